/* Schedules of kernel IR (kir/schedule.h): the same fused group lowered for the LLVM
 * backend's target and for a GPU-like target defined here gets the axis roles, vector width
 * and split each target describes, and the kernel text shows them. Also: templates exist per
 * target and dtype, and random draws print with their per-call seed and base. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kir/abi.h"
#include "kir/kir.h"
#include "kir/schedule.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_codegen.h"
#endif

/* Lowering no longer hard-codes a CPU chunk: the split is the target's. */
#ifdef KIR_CHUNK
#error "KIR_CHUNK is defined: the flat-domain split belongs to kir_target.flat_split"
#endif

/* A GPU-like target: no SIMD lanes, blocks of 128 threads, flat domains split by block,
 * GEMM templates for f32 and f64 (no conv). */
static const kir_target *gpu_target(void)
{
    static kir_target t;
    if (!t.name) {
        for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++)
            t.lanes[dt] = 1;
        t.min_lanes = 1;
        t.flat_split = 128;
        t.has_grid = 1;
        t.block_threads = 128;
        t.template_dtypes[KIR_TPL_GEMM] = (1u << TGC_F32) | (1u << TGC_F64);
        t.name = "test-gpu";
    }
    return &t;
}

/* The CPU target under test: the LLVM backend's when built with LLVM, else the test CPU. */
static const kir_target *cpu_target(void)
{
#ifdef TGC_HAVE_LLVM
    return tgc_llvm_kir_target();
#else
    return gb_target();
#endif
}

/* f32 lanes of the CPU target (its vector bits / 32). */
static int cpu_f32_lanes(void)
{
    return cpu_target()->lanes[TGC_F32];
}

/* Fusion classes as gb_classify, with rand and dropout of floats pointwise (ops.def's RANDOM
 * class on a target with draws, as the LLVM backend's). */
static tgc_fuse_class classify_random(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op == TGC_OP_RAND || nd->op == TGC_OP_DROPOUT)
        return TGC_FUSE_POINTWISE;
    return gb_classify(g, i);
}

/* The one kernel of g (a single group) lowered for target t. */
static kir_kernel *lower_one(const tgc_graph *g, const kir_target *t, int random)
{
    tgc_fusion f;
    const tgc_fuse_hooks hooks = {classify_random, kir_epilogue_operand_ok, NULL};
    if (tgc_pass_fuse(g, random ? &hooks : &gb_hooks, &f) != TGC_OK)
        fail_msg("fuse: %s", tgc_last_error());
    assert_int_equal(f.n_groups, 1);
    uint8_t *mat = kir_materialized(g, &f);
    assert_non_null(mat);
    kir_kernel *k = NULL;
    if (kir_lower_group(g, &f, 0, mat, t, &k) != TGC_OK)
        fail_msg("lower: %s", tgc_last_error());
    assert_non_null(k);
    free(mat);
    tgc_fusion_free(&f);
    return k;
}

static void expect_text(const kir_kernel *k, const tgc_graph *g, const char *want)
{
    char *txt = kir_kernel_to_text(k, g->syms);
    assert_non_null(txt);
    if (!strstr(txt, want))
        fail_msg("kernel text lacks \"%s\":\n%s", want, txt);
    free(txt);
}

static void flat_pointwise_is_split_by_the_target(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {4, 5, 6};
    int32_t x = gb_input(g, TGC_F32, 3, s), y = gb_input(g, TGC_F32, 3, s);
    int32_t o = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_ADD, x, y));
    gb_outputs(g, &o, 1);

    kir_kernel *k = lower_one(g, cpu_target(), 0);
    assert_int_equal(k->n_outer, 0);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->sched.role[0], KIR_AXIS_VECTOR);
    assert_int_equal(k->sched.vec_axis, 0);
    assert_int_equal(k->sched.lanes, cpu_f32_lanes());
    assert_int_equal(k->sched.split_axis, 0);
    assert_int_equal(k->sched.split, 16384);
    assert_int_equal(k->sched.block_threads, 0);
    char want[96];
    snprintf(want, sizeof want, "  schedule [vector x%d] split i0 by 16384\n", cpu_f32_lanes());
    expect_text(k, g, want);
    kir_kernel_free(k);

    k = lower_one(g, gpu_target(), 0);
    assert_int_equal(k->extent[0], 120); /* the same domain */
    assert_int_equal(k->sched.role[0], KIR_AXIS_BLOCK);
    assert_int_equal(k->sched.vec_axis, -1);
    assert_int_equal(k->sched.lanes, 1);
    assert_int_equal(k->sched.split_axis, 0);
    assert_int_equal(k->sched.split, 128);
    assert_int_equal(k->sched.block_threads, 128);
    expect_text(k, g, "  schedule [block x128] split i0 by 128\n");
    kir_kernel_free(k);
    tgc_graph_free(g);
}

static void broadcast_keeps_outer_grid_axes(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[4] = {2, 3, 4, 5}, sb[4] = {1, 3, 1, 1};
    int32_t x = gb_input(g, TGC_F32, 4, sx), b = gb_input(g, TGC_F32, 4, sb);
    int32_t o = gb_un(g, TGC_OP_RELU, gb_bin(g, TGC_OP_ADD, x, b));
    gb_outputs(g, &o, 1);

    kir_kernel *k = lower_one(g, cpu_target(), 0);
    assert_int_equal(k->n_outer, 2);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->sched.role[0], KIR_AXIS_GRID);
    assert_int_equal(k->sched.role[1], KIR_AXIS_GRID);
    assert_int_equal(k->sched.role[2], KIR_AXIS_VECTOR);
    assert_int_equal(k->sched.split_axis, -1);
    assert_int_equal(k->sched.split, 0);
    char want[96];
    snprintf(want, sizeof want, "  schedule [grid, grid, vector x%d]\n", cpu_f32_lanes());
    expect_text(k, g, want);
    kir_kernel_free(k);

    k = lower_one(g, gpu_target(), 0);
    assert_int_equal(k->sched.role[2], KIR_AXIS_BLOCK);
    assert_int_equal(k->sched.split_axis, -1);
    expect_text(k, g, "  schedule [grid, grid, block x128]\n");
    kir_kernel_free(k);
    tgc_graph_free(g);
}

static void reduction_rows_are_grid_and_inner_axes_serial_or_block(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {3, 4, 5};
    int32_t x = gb_input(g, TGC_F32, 3, s);
    /* sum over dims 0 and 2: two inner axes that do not merge, one kept row axis */
    int32_t o = gb_reduce(g, TGC_OP_SUM, gb_un(g, TGC_OP_EXP, x), 5u, 0);
    gb_outputs(g, &o, 1);

    const kir_target *cpu = cpu_target();
    kir_kernel *k = lower_one(g, cpu, 0);
    assert_int_equal(k->n_outer, 1);
    assert_int_equal(k->n_inner, 2);
    assert_int_equal(k->sched.role[0], KIR_AXIS_GRID);
    assert_int_equal(k->sched.role[1], KIR_AXIS_SERIAL);
    assert_int_equal(k->sched.role[2], KIR_AXIS_VECTOR);
    /* f64 sum accumulators: the f64 width, or the f32 width where the target keeps it */
    int want_lanes = cpu->lanes[TGC_F64];
    if (cpu->reduce_lanes > want_lanes)
        want_lanes = cpu->reduce_lanes;
    if (want_lanes < cpu->min_lanes)
        want_lanes = cpu->min_lanes;
    assert_int_equal(k->sched.lanes, want_lanes);
    assert_int_equal(k->sched.split_axis, -1); /* a reduction keeps its row whole */
    char want[96];
    snprintf(want, sizeof want, "  schedule [grid, serial, vector x%d]\n", want_lanes);
    expect_text(k, g, want);
    kir_kernel_free(k);

    k = lower_one(g, gpu_target(), 0);
    assert_int_equal(k->sched.role[0], KIR_AXIS_GRID);
    assert_int_equal(k->sched.role[1], KIR_AXIS_BLOCK);
    assert_int_equal(k->sched.role[2], KIR_AXIS_BLOCK);
    expect_text(k, g, "  schedule [grid, block x128, block x128]\n");
    kir_kernel_free(k);
    tgc_graph_free(g);
}

static void vector_width_follows_the_widest_dtype(void **state)
{
    (void)state;
    /* the test CPU: f32 8 lanes, f64 4, at least 4 */
    const kir_target *t = gb_target();
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {6, 50};
    int32_t x = gb_input(g, TGC_F64, 2, s);
    int32_t o = gb_un(g, TGC_OP_TANH, x);
    gb_outputs(g, &o, 1);
    kir_kernel *k = lower_one(g, t, 0);
    assert_int_equal(k->sched.lanes, 4);
    kir_kernel_free(k);
    tgc_graph_free(g);

    /* a 128-bit CPU (f32 4 lanes, f64 2): f64 values would give 2, min_lanes keeps 4 */
    kir_target narrow = *t;
    for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++)
        narrow.lanes[dt] = dt == TGC_F64 || dt == TGC_I32 || dt == TGC_I64 ? 2 : 4;
    narrow.reduce_lanes = 0;
    g = tgc_graph_create();
    x = gb_input(g, TGC_F64, 2, s);
    o = gb_un(g, TGC_OP_TANH, x);
    gb_outputs(g, &o, 1);
    k = lower_one(g, &narrow, 0);
    assert_int_equal(k->sched.lanes, 4);
    narrow.min_lanes = 1;
    kir_kernel_free(k);
    k = lower_one(g, &narrow, 0);
    assert_int_equal(k->sched.lanes, 2);
    kir_kernel_free(k);
    tgc_graph_free(g);
}

static void templates_exist_per_target_and_dtype(void **state)
{
    (void)state;
    const kir_target *cpu = cpu_target(), *gpu = gpu_target();
    assert_true(kir_target_has_template(cpu, KIR_TPL_GEMM, TGC_F32));
    assert_true(kir_target_has_template(cpu, KIR_TPL_CONV, TGC_F32));
    assert_false(kir_target_has_template(cpu, KIR_TPL_GEMM, TGC_F64));
    assert_false(kir_target_has_template(cpu, KIR_TPL_GEMM, TGC_F16));
    assert_true(kir_target_has_template(gpu, KIR_TPL_GEMM, TGC_F64));
    assert_false(kir_target_has_template(gpu, KIR_TPL_CONV, TGC_F32));
    assert_false(kir_target_has_template(NULL, KIR_TPL_GEMM, TGC_F32));

    tgc_graph *g = tgc_graph_create();
    tgc_sdim sa[2] = {8, 16}, sb[2] = {16, 4};
    int32_t a = gb_input(g, TGC_F64, 2, sa), b = gb_input(g, TGC_F64, 2, sb);
    int32_t ab[2] = {a, b};
    tgc_attrs none = {0};
    int32_t mm = gb_op(g, TGC_OP_MATMUL, ab, 2, &none);
    gb_outputs(g, &mm, 1);
    assert_false(kir_template_ok(g, mm, cpu));
    assert_true(kir_template_ok(g, mm, gpu));

    /* lowered for the GPU target, the f64 GEMM carries its dtypes */
    tgc_fusion f;
    memset(&f, 0, sizeof f);
    assert_int_equal(tgc_pass_fuse(g, &gb_hooks, &f), TGC_OK); /* gb's f32 rule: opaque */
    assert_int_equal(f.groups[0].kind, TGC_GROUP_OPAQUE);
    f.groups[0].kind = TGC_GROUP_TEMPLATE; /* as a backend with the f64 template fuses it */
    uint8_t *mat = kir_materialized(g, &f);
    kir_kernel *k = NULL;
    assert_int_equal(kir_lower_group(g, &f, 0, mat, gpu, &k), TGC_OK);
    assert_int_equal(k->kind, KIR_GEMM);
    assert_int_equal(k->tpl.dtype, TGC_F64);
    assert_int_equal(k->tpl.acc_dtype, TGC_F64);
    assert_int_equal(k->tpl.out_dtype, TGC_F64);
    assert_int_equal(k->bufs[k->tpl.a].dtype, TGC_F64);
    assert_int_equal(k->vals[0].dtype, TGC_F64);
    expect_text(k, g, "out=buf2 f64\n");
    kir_kernel_free(k);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void random_draws_are_values_with_abi_words(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 7};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    tgc_attrs ra = {.ni = 2, .dtype = TGC_F32};
    ra.i[0] = 3;
    ra.i[1] = 7;
    int32_t r = gb_op(g, TGC_OP_RAND, NULL, 0, &ra);
    tgc_attrs da = {.nf = 1};
    da.f[0] = 0.5;
    int32_t d = gb_op(g, TGC_OP_DROPOUT, &r, 1, &da);
    int32_t o = gb_bin(g, TGC_OP_ADD, d, x);
    gb_outputs(g, &o, 1);

    kir_kernel *k = lower_one(g, cpu_target(), 1);
    assert_int_equal(k->n_rands, 2); /* rand, then dropout: graph order */
    assert_int_equal(k->rands[0].node, r);
    assert_int_equal(k->rands[1].node, d);
    assert_int_equal(k->rands[0].numel, 21);
    assert_int_equal(k->rands[0].at.stride[0], 1); /* the merged flat axis */
    int n_rand_vals = 0;
    for (int i = 0; i < k->n_vals; i++)
        n_rand_vals += k->vals[i].kind == KV_RAND;
    assert_int_equal(n_rand_vals, 2);
    expect_text(k, g, "philox uniform(seed0, base0 + 0 + 1*i0) of %1 : f32");
    expect_text(k, g, "philox uniform24(seed1, base1 + 0 + 1*i0) of %2 : f32");
    kir_args args = {0};
    assert_int_equal(kir_args_collect(k, &args), TGC_OK);
    assert_int_equal(args.n_rands, 2);
    assert_int_equal(kir_args_rand_word(&args, 0), args.n);
    assert_int_equal(kir_args_rand_word(&args, 1), args.n + 2);
    assert_int_equal(kir_args_words(&args), args.n + 4);
    kir_args_free(&args);
    kir_kernel_free(k);
    tgc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flat_pointwise_is_split_by_the_target),
        cmocka_unit_test(broadcast_keeps_outer_grid_axes),
        cmocka_unit_test(reduction_rows_are_grid_and_inner_axes_serial_or_block),
        cmocka_unit_test(vector_width_follows_the_widest_dtype),
        cmocka_unit_test(templates_exist_per_target_and_dtype),
        cmocka_unit_test(random_draws_are_values_with_abi_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
