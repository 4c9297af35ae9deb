/* Fusion classification (backend/classify.c): every op of ops.def has a fusion class and a
 * dtype rule, and the shared classifier gives each compiled backend's target the classes its
 * kernels compute: the same op table narrowed by the target's caps (which dtypes it has
 * copies, reductions, pools, draws and positions for, which pointwise ops it renders, which
 * templates it has). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/classify.h"
#include "ir/view_access.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_codegen.h"
#endif
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_target.h"
#endif

static void every_op_has_a_class_and_a_dtype_rule(void **state)
{
    (void)state;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        tgc_op_fusion f = tgc_op_fusion_class((tgc_op)op);
        assert_true((unsigned)f < TGC_OPF_COUNT);
        assert_string_not_equal(tgc_op_fusion_name(f), "?");
        assert_true((unsigned)tgc_op_dtype_rule((tgc_op)op) < TGC_DTR_COUNT);
        /* views have no kernel, except contiguous, a copy */
        if (tgc_is_view_op((tgc_op)op) && op != TGC_OP_CONTIGUOUS)
            assert_int_equal(f, TGC_OPF_FREE);
    }
    assert_int_equal(tgc_op_fusion_class(TGC_OP_INPUT), TGC_OPF_FREE);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_CONTIGUOUS), TGC_OPF_COPY);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_GELU), TGC_OPF_POINTWISE);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_SUM), TGC_OPF_REDUCE);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_VAR), TGC_OPF_OPAQUE);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_CONV2D), TGC_OPF_TEMPLATE);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_DROPOUT), TGC_OPF_RANDOM);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_ARANGE), TGC_OPF_INDEX);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_AVG_POOL2D), TGC_OPF_POOL);
    assert_int_equal(tgc_op_fusion_class(TGC_OP_EMBEDDING_GRAD), TGC_OPF_OPAQUE);
    assert_int_equal(tgc_op_fusion_class((tgc_op)TGC_OP_COUNT), TGC_OPF_OPAQUE);
}

/* The dtype rules, through shape inference (which checks its rules against them). */
static void dtype_rules_give_the_result_dtypes(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 4};
    int32_t b = gb_input(g, TGC_BOOL, 2, s), i = gb_input(g, TGC_I32, 2, s);
    int32_t h = gb_input(g, TGC_F16, 2, s);
    assert_int_equal(tgc_op_dtype_rule(TGC_OP_DIV), TGC_DTR_PROMOTE_FLOAT);
    assert_int_equal(g->nodes[gb_bin(g, TGC_OP_DIV, i, i)].out.dtype, TGC_F32);
    assert_int_equal(g->nodes[gb_bin(g, TGC_OP_ADD, i, h)].out.dtype, TGC_F16);
    assert_int_equal(g->nodes[gb_bin(g, TGC_OP_LT, i, h)].out.dtype, TGC_BOOL);
    assert_int_equal(g->nodes[gb_un(g, TGC_OP_EXP, i)].out.dtype, TGC_F32);
    assert_int_equal(g->nodes[gb_un(g, TGC_OP_ABS, i)].out.dtype, TGC_I32);
    assert_int_equal(g->nodes[gb_reduce(g, TGC_OP_SUM, b, 1, 0)].out.dtype, TGC_I64);
    assert_int_equal(g->nodes[gb_reduce(g, TGC_OP_MEAN, i, 1, 0)].out.dtype, TGC_F32);
    assert_int_equal(g->nodes[gb_reduce(g, TGC_OP_MAX, h, 1, 0)].out.dtype, TGC_F16);
    int32_t w[3] = {b, i, h};
    assert_int_equal(g->nodes[gb_op(g, TGC_OP_WHERE, w, 3, NULL)].out.dtype, TGC_F16);
    tgc_graph_free(g);
}

/* One graph with a node of each representative kind and dtype; ids in the struct. */
typedef struct reps {
    int32_t add_f32, add_i32, copy_i32, copy_f64, sum_f32, sum_i32, sum_bool, mean_f16;
    int32_t pool_f32, pool_f16, pool_excl, gap_f32, ap2_f32, mm_f32, mm_f16, ar_i64, ar_f16;
    int32_t rand_f32, argmax, cat, reshape, input;
} reps;

static int32_t pool(tgc_graph *g, tgc_op op, int32_t x, int excl)
{
    int64_t p[7] = {2, 2, 2, 2, 0, 0, excl};
    return gb_ints(g, op, x, p, 7);
}

static int32_t gap(tgc_graph *g, int32_t x, int64_t out)
{
    int64_t p[2] = {out, out};
    return gb_ints(g, TGC_OP_ADAPTIVE_AVG_POOL2D, x, p, 2);
}

static int32_t arange(tgc_graph *g, tgc_dtype dt)
{
    tgc_attrs a = {.ni = 1, .nf = 2, .dtype = dt};
    a.arange.n = 8;
    a.arange.step = 1.0;
    return gb_op(g, TGC_OP_ARANGE, NULL, 0, &a);
}

static tgc_graph *build(reps *r)
{
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s2[2] = {8, 8}, s4[4] = {2, 3, 8, 8};
    int32_t f = gb_input(g, TGC_F32, 2, s2), i = gb_input(g, TGC_I32, 2, s2);
    int32_t d = gb_input(g, TGC_F64, 2, s2), b = gb_input(g, TGC_BOOL, 2, s2);
    int32_t h = gb_input(g, TGC_F16, 2, s2);
    int32_t x = gb_input(g, TGC_F32, 4, s4), xh = gb_input(g, TGC_F16, 4, s4);
    r->input = f;
    r->add_f32 = gb_bin(g, TGC_OP_ADD, f, f);
    r->add_i32 = gb_bin(g, TGC_OP_ADD, i, i);
    int64_t perm[2] = {1, 0};
    r->copy_i32 = gb_un(g, TGC_OP_CONTIGUOUS, gb_ints(g, TGC_OP_PERMUTE, i, perm, 2));
    r->copy_f64 = gb_un(g, TGC_OP_CONTIGUOUS, gb_ints(g, TGC_OP_PERMUTE, d, perm, 2));
    r->sum_f32 = gb_reduce(g, TGC_OP_SUM, f, 2, 0);
    r->sum_i32 = gb_reduce(g, TGC_OP_SUM, i, 2, 0);
    r->sum_bool = gb_reduce(g, TGC_OP_SUM, b, 2, 0);
    r->mean_f16 = gb_reduce(g, TGC_OP_MEAN, h, 2, 0);
    r->pool_f32 = pool(g, TGC_OP_MAX_POOL2D, x, 0);
    r->pool_f16 = pool(g, TGC_OP_MAX_POOL2D, xh, 0);
    r->pool_excl = pool(g, TGC_OP_AVG_POOL2D, x, 1);
    r->gap_f32 = gap(g, x, 1);
    r->ap2_f32 = gap(g, x, 3);
    r->mm_f32 = gb_bin(g, TGC_OP_MATMUL, f, f);
    r->mm_f16 = gb_bin(g, TGC_OP_MATMUL, h, h);
    r->ar_i64 = arange(g, TGC_I64);
    r->ar_f16 = arange(g, TGC_F16);
    tgc_attrs ra = {.ni = 2, .nf = 1, .dtype = TGC_F32};
    ra.rand.shape[0] = 4;
    ra.rand.shape[1] = 4;
    r->rand_f32 = gb_op(g, TGC_OP_RAND, NULL, 0, &ra);
    int64_t am[2] = {1, 0};
    r->argmax = gb_ints(g, TGC_OP_ARGMAX, f, am, 2);
    int32_t cin[2] = {f, f};
    tgc_attrs ca = {.ni = 1};
    r->cat = gb_op(g, TGC_OP_CAT, cin, 2, &ca);
    int64_t rs[1] = {64};
    r->reshape = gb_ints(g, TGC_OP_RESHAPE, f, rs, 1);
    return g;
}

/* Classes every target agrees on. */
static void check_common(const tgc_graph *g, const reps *r, const kir_target *t)
{
    assert_int_equal(tgc_backend_classify(g, r->input, t), TGC_FUSE_FREE);
    assert_int_equal(tgc_backend_classify(g, r->reshape, t), TGC_FUSE_FREE);
    assert_int_equal(tgc_backend_classify(g, r->add_f32, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r->copy_f64, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r->sum_f32, t), TGC_FUSE_REDUCE);
    assert_int_equal(tgc_backend_classify(g, r->mean_f16, t), TGC_FUSE_REDUCE);
    assert_int_equal(tgc_backend_classify(g, r->pool_f32, t), TGC_FUSE_WINDOW);
    assert_int_equal(tgc_backend_classify(g, r->pool_excl, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r->gap_f32, t), TGC_FUSE_REDUCE);
    assert_int_equal(tgc_backend_classify(g, r->ap2_f32, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r->mm_f32, t), TGC_FUSE_TEMPLATE);
    assert_int_equal(tgc_backend_classify(g, r->rand_f32, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r->ar_f16, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r->argmax, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r->cat, t), TGC_FUSE_OPAQUE);
}

static void llvm_target_classes(void **state)
{
    (void)state;
#ifdef TGC_HAVE_LLVM
    reps r;
    tgc_graph *g = build(&r);
    const kir_target *t = tgc_llvm_kir_target();
    check_common(g, &r, t);
    /* copies and pools of f32 / f64 only, reductions of floats into their own dtype, f32
     * templates, aranges of i32 / i64 / f32 / f64 computed where read */
    assert_int_equal(tgc_backend_classify(g, r.add_i32, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r.copy_i32, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r.sum_i32, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r.sum_bool, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r.pool_f16, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r.mm_f16, t), TGC_FUSE_OPAQUE);
    assert_int_equal(tgc_backend_classify(g, r.ar_i64, t), TGC_FUSE_POINTWISE);
    tgc_graph_free(g);
#else
    skip();
#endif
}

static void cuda_target_classes(void **state)
{
    (void)state;
#ifdef TGC_HAVE_CUDA
    reps r;
    tgc_graph *g = build(&r);
    const kir_target *t = tgc_cuda_kir_target();
    check_common(g, &r, t);
    /* every dtype for pointwise ops, copies and reductions; pools of floats; f16 templates;
     * arange a native op */
    assert_int_equal(tgc_backend_classify(g, r.add_i32, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r.copy_i32, t), TGC_FUSE_POINTWISE);
    assert_int_equal(tgc_backend_classify(g, r.sum_i32, t), TGC_FUSE_REDUCE);
    assert_int_equal(tgc_backend_classify(g, r.sum_bool, t), TGC_FUSE_REDUCE);
    assert_int_equal(tgc_backend_classify(g, r.pool_f16, t), TGC_FUSE_WINDOW);
    assert_int_equal(tgc_backend_classify(g, r.mm_f16, t), TGC_FUSE_TEMPLATE);
    assert_int_equal(tgc_backend_classify(g, r.ar_i64, t), TGC_FUSE_OPAQUE);
    tgc_graph_free(g);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_op_has_a_class_and_a_dtype_rule),
        cmocka_unit_test(dtype_rules_give_the_result_dtypes),
        cmocka_unit_test(llvm_target_classes),
        cmocka_unit_test(cuda_target_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
