/* The CUDA renderer (backend/cuda/cuda_render.h) without a GPU: the text of small hand-built
 * kernels (signature, vector accesses, shuffles, determinism), and NVRTC compiles (sm_90) of
 * every LOOP kernel the compile driver lowers from a broad set of graphs with the CUDA
 * backend's passes, preparation, fusion hooks and target: every pointwise op over every
 * dtype it takes, scalar forms, broadcasting, views, reductions, the decomposed norms,
 * pools, draws and symbolic sizes. Where libnvrtc cannot be loaded the compile tests are
 * skipped and say so. What needs a GPU (the results) is the GPU suite's job. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_classify.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "backend/plan.h"
#include "ir/view_access.h"
#include "support/error.h"
#include "support/strbuf.h"
#include "tensor/dtype.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

/* ---- a text-only backend: the driver's pipeline with the CUDA decisions ---- */

static int g_nvrtc = -1; /* 1: libnvrtc loaded */
static int g_kernels;    /* LOOP kernels rendered and compiled */
static int g_templates;  /* template kernels seen (rendered by cuda_gemm, not here) */
static int g_skipped;    /* compile tests skipped for want of libnvrtc */
static int g_programs;   /* programs compiled */
static int g_kinds[2];   /* FLAT / ROWS kernels */

static int have_nvrtc(void)
{
    if (g_nvrtc < 0) {
        g_nvrtc = tgc_nvrtc_load() == TGC_OK;
        tgc_clear_error();
        if (!g_nvrtc)
            fprintf(stderr, "[ SKIPPED  ] libnvrtc is not loadable here: NVRTC compiles skipped\n");
    }
    return g_nvrtc;
}

static tgc_status text_compile(const tgc_config *cfg, const char *name, tgc_plan_kernel *ks, int n,
                               void **code)
{
    (void)cfg;
    const kir_kernel *kk[64] = {0};
    const kir_args *sl[64] = {0};
    const char *nm[64] = {0};
    tgc_cuda_launch ln[64];
    int m = 0;
    for (int i = 0; i < n && m < 64; i++) {
        if (ks[i].k->kind != KIR_LOOP) {
            g_templates++;
            continue;
        }
        kk[m] = ks[i].k;
        sl[m] = &ks[i].slots;
        nm[m] = ks[i].name;
        m++;
    }
    char *src = tgc_cuda_render_program(kk, sl, nm, m, ln);
    if (!src)
        return tgc_last_status();
    for (int i = 0; i < m; i++)
        g_kinds[ln[i].shape == TGC_CUDA_SHAPE_ROWS]++;
    if (getenv("TGC_TEST_CUDA_DUMP")) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.cu", getenv("TGC_TEST_CUDA_DUMP"), name);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(src, f);
            fclose(f);
        }
    }
    tgc_status st = TGC_OK;
    if (m > 0) {
        char *cubin = NULL;
        size_t size = 0;
        st = tgc_nvrtc_compile(name, src, 90, &cubin, &size, NULL);
        free(cubin);
        if (st == TGC_OK) {
            g_kernels += m;
            g_programs++;
        }
    }
    free(src);
    if (st != TGC_OK)
        return st;
    *code = calloc(1, 1);
    return *code ? TGC_OK : TGC_ERR_OOM;
}

static tgc_status text_launch(const tgc_plan_kernel *k, void *const *bufs, const int64_t *sizes,
                              const tgc_launch_env *env)
{
    (void)k, (void)bufs, (void)sizes, (void)env;
    return tgc_set_error(TGC_ERR_UNSUPPORTED, "text backend: no launches");
}

static void text_release(void *code)
{
    free(code);
}

static const kir_target *cuda_target(void)
{
    return tgc_cuda_kir_target();
}

static tgc_backend text_backend(void)
{
    tgc_backend b = {
        .name = "cuda-text",
        .device = TGC_DEVICE_CPU,
        .decompose_keep = tgc_cuda_decompose_keep(),
        .prepare = tgc_cuda_prepare,
        .fuse = tgc_cuda_fuse_hooks(),
        .target = cuda_target,
        .compile = text_compile,
        .launch = text_launch,
        .run_template = text_launch,
        .release_code = text_release,
    };
    return b;
}

/* Compiles g through the driver; every LOOP kernel is rendered and NVRTC-compiled. Frees g. */
static void compile_graph(tgc_graph *g, const char *name)
{
    tgc_backend b = text_backend();
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    tgc_plan *p = NULL;
    if (tgc_plan_compile(&b, g, &cfg, name, &p) != TGC_OK)
        fail_msg("%s: %s", name, tgc_last_error());
    tgc_plan_free(p);
    tgc_graph_free(g);
}

/* ---- graphs ---- */

/* A node of up to 5 inputs (gb_op takes 4). */
static int32_t node5(tgc_graph *g, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    tgc_vinfo iv[5], out;
    for (int k = 0; k < n_in; k++)
        iv[k] = g->nodes[in[k]].out;
    if (tgc_infer(op, iv, n_in, a, g->syms, &out) != TGC_OK)
        fail_msg("%s: %s", tgc_op_name(op), tgc_last_error());
    int32_t id = tgc_graph_add(g, op, in, n_in, a, &out);
    assert_true(id >= 0);
    return id;
}

static const tgc_dtype all_dtypes[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64,
                                       TGC_I32, TGC_I64, TGC_BOOL};
static const tgc_dtype float_dtypes[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};

static int infer_ok(tgc_op op, const tgc_dtype *dts, int n, const tgc_attrs *a)
{
    tgc_vinfo iv[3], out;
    for (int k = 0; k < n; k++) {
        memset(&iv[k], 0, sizeof iv[k]);
        iv[k].dtype = dts[k];
        iv[k].ndim = 2;
        iv[k].shape[0] = 3;
        iv[k].shape[1] = 37;
    }
    tgc_attrs none = {0};
    int ok = tgc_infer(op, iv, n, a ? a : &none, NULL, &out) == TGC_OK;
    tgc_clear_error();
    return ok;
}

/* One pointwise op per dtype combination it accepts, three shapes: contiguous, broadcast
 * and a permuted view. */
static void pointwise_ops_every_dtype(void **state)
{
    (void)state;
    if (!have_nvrtc()) {
        g_skipped++;
        skip();
    }
    int graphs = 0;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        const tgc_op_info *info = tgc_op_info_of((tgc_op)op);
        tgc_op_kind kind = info->kind;
        int n_in = kind == TGC_KIND_BINARY || kind == TGC_KIND_COMPARE ? 2
                   : kind == TGC_KIND_TERNARY                          ? 3
                   : kind == TGC_KIND_UNARY || kind == TGC_KIND_SCALAR ? 1
                                                                       : 0;
        if (!n_in)
            continue;
        int nd = N_OF(all_dtypes);
        for (int a0 = 0; a0 < nd; a0++)
            for (int a1 = 0; a1 < (n_in > 1 ? nd : 1); a1++) {
                tgc_dtype dts[3] = {all_dtypes[a0], all_dtypes[a1], all_dtypes[a1]};
                if (kind == TGC_KIND_TERNARY)
                    dts[0] = TGC_BOOL, dts[1] = all_dtypes[a0], dts[2] = all_dtypes[a1];
                if (kind == TGC_KIND_TERNARY && a0 > 0 && a1 > 0 && a0 != a1 && a1 != 1)
                    continue; /* a sample of the where pairs */
                int n_casts = op == TGC_OP_CAST ? nd : 1;
                for (int ci = 0; ci < n_casts; ci++) {
                    tgc_attrs at = {0};
                    at.nf = 2;
                    at.f[0] = op == TGC_OP_CLAMP ? -0.5 : 0.1;
                    at.f[1] = 2.0;
                    if (kind == TGC_KIND_SCALAR && op != TGC_OP_CLAMP && (a0 & 1))
                        at.f[0] = 3.0; /* an integral scalar keeps integer dtypes */
                    if (op == TGC_OP_CAST)
                        at.dtype = all_dtypes[ci];
                    if (!infer_ok((tgc_op)op, dts, n_in, &at))
                        continue;
                    for (int shape = 0; shape < 3; shape++) {
                        tgc_graph *g = tgc_graph_create();
                        tgc_sdim s2[2] = {3, 37}, s1[1] = {37}, st[2] = {37, 3};
                        int32_t in[3];
                        for (int k = 0; k < n_in; k++) {
                            if (shape == 1 && k == n_in - 1) {
                                in[k] = gb_input(g, dts[k], 1, s1); /* broadcast row */
                            } else if (shape == 2 && k == 0) {
                                int32_t t = gb_input(g, dts[k], 2, st);
                                in[k] = gb_ints(g, TGC_OP_PERMUTE, t, (int64_t[]){1, 0}, 2);
                            } else {
                                in[k] = gb_input(g, dts[k], 2, s2);
                            }
                        }
                        int32_t o = gb_op(g, (tgc_op)op, in, n_in, &at);
                        gb_outputs(g, &o, 1);
                        char name[96];
                        snprintf(name, sizeof name, "%s_%s_%s_%d", info->name,
                                 tgc_dtype_info_of(dts[0])->name, tgc_dtype_info_of(dts[1])->name,
                                 shape);
                        compile_graph(g, name);
                        graphs++;
                    }
                }
            }
    }
    print_message("pointwise: %d graphs, %d kernels compiled\n", graphs, g_kernels);
    assert_true(graphs > 500);
}

static void reductions_every_axis(void **state)
{
    (void)state;
    if (!have_nvrtc()) {
        g_skipped++;
        skip();
    }
    static const tgc_op ops[] = {TGC_OP_SUM, TGC_OP_MEAN, TGC_OP_MAX};
    static const uint32_t masks[] = {1, 2, 4, 7, 5, 3, 6};
    for (int o = 0; o < N_OF(ops); o++)
        for (int d = 0; d < N_OF(all_dtypes); d++)
            for (int m = 0; m < N_OF(masks); m++)
                for (int keep = 0; keep < 2; keep++) {
                    tgc_graph *g = tgc_graph_create();
                    tgc_sdim s[3] = {5, 33, 300};
                    int32_t x = gb_input(g, all_dtypes[d], 3, s);
                    int32_t r = gb_reduce(g, ops[o], x, masks[m], keep);
                    gb_outputs(g, &r, 1);
                    char name[64];
                    snprintf(name, sizeof name, "red_%s_%s_%u_%d", tgc_op_name(ops[o]),
                             tgc_dtype_info_of(all_dtypes[d])->name, masks[m], keep);
                    compile_graph(g, name);
                }
}

static void norms_after_decomposition(void **state)
{
    (void)state;
    if (!have_nvrtc()) {
        g_skipped++;
        skip();
    }
    for (int d = 0; d < N_OF(float_dtypes); d++) {
        tgc_dtype dt = float_dtypes[d];
        /* softmax and log_softmax over the last and a middle dim */
        for (int dim = 1; dim < 3; dim++)
            for (int lg = 0; lg < 2; lg++) {
                tgc_graph *g = tgc_graph_create();
                tgc_sdim s[3] = {4, 77, 1000};
                int32_t x = gb_input(g, dt, 3, s);
                tgc_attrs a = {.ni = 1};
                a.i[0] = dim;
                int32_t o = gb_op(g, lg ? TGC_OP_LOG_SOFTMAX : TGC_OP_SOFTMAX, &x, 1, &a);
                gb_outputs(g, &o, 1);
                compile_graph(g, "softmax");
            }
        /* layer_norm with weight and bias */
        {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[3] = {2, 128, 768}, sw[1] = {768};
            int32_t x = gb_input(g, dt, 3, s), w = gb_input(g, dt, 1, sw),
                    bi = gb_input(g, dt, 1, sw);
            tgc_attrs a = {.ni = 2, .nf = 1};
            a.i[0] = 1;
            a.i[1] = TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS;
            a.f[0] = 1e-5;
            int32_t in[3] = {x, w, bi};
            int32_t o = gb_op(g, TGC_OP_LAYER_NORM, in, 3, &a);
            gb_outputs(g, &o, 1);
            compile_graph(g, "layer_norm");
        }
        /* batch_norm in eval with running stats, weight and bias */
        {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[4] = {8, 16, 10, 10}, sc[1] = {16};
            int32_t x = gb_input(g, dt, 4, s);
            int32_t in[5] = {x};
            for (int k = 1; k < 5; k++)
                in[k] = gb_input(g, dt, 1, sc);
            tgc_attrs a = {.ni = 2, .nf = 2};
            a.i[0] = 0;
            a.i[1] = TGC_BN_HAS_STATS | TGC_BN_HAS_WEIGHT | TGC_BN_HAS_BIAS;
            a.f[0] = 0.1;
            a.f[1] = 1e-5;
            int32_t o = node5(g, TGC_OP_BATCH_NORM, in, 5, &a);
            gb_outputs(g, &o, 1);
            compile_graph(g, "batch_norm");
        }
        /* var (decomposed) */
        {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[2] = {6, 500};
            int32_t x = gb_input(g, dt, 2, s);
            int32_t o = gb_ints(g, TGC_OP_VAR, x, (int64_t[]){2, 0, 1}, 3);
            gb_outputs(g, &o, 1);
            compile_graph(g, "var");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pointwise_ops_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(reductions_every_axis, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(norms_after_decomposition, scoped_setup, scoped_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, group_shutdown);
    printf("cuda render: %d LOOP kernels (%d flat, %d rows) in %d NVRTC programs, %d template "
           "kernels left to cuda_gemm, %d compile tests skipped (no libnvrtc)\n",
           g_kernels, g_kinds[0], g_kinds[1], g_programs, g_templates, g_skipped);
    return rc;
}
