/* The CUDA renderer (backend/cuda/cuda_render.h) without a GPU: the text of small hand-built
 * kernels (signature, vector accesses, shuffles, determinism), and NVRTC compiles (sm_90) of
 * every LOOP kernel the compile driver lowers from a broad set of graphs with the CUDA
 * backend's passes, preparation, fusion hooks and target: every pointwise op over every
 * dtype it takes, scalar forms, broadcasting, views, reductions, the decomposed norms,
 * pools, draws and symbolic sizes; each of those kernels is rendered again with the marked
 * dialect of render_dialects.h, which must spell nothing as CUDA does and give CUDA's text
 * once its markers are spelled as CUDA's (every CUDA spelling comes from the dialect table).
 * Where libnvrtc cannot be loaded the compile tests are skipped and say so. What needs a GPU
 * (the results) is the GPU suite's job. */
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
#include "test_shard.h"
#include "unit/render_dialects.h"
#include "unit/unit_test_util.h"

/* ---- a text-only backend: the driver's pipeline with the CUDA decisions ---- */

static int g_nvrtc = -1; /* 1: libnvrtc loaded */
static int g_kernels;    /* LOOP kernels rendered and compiled */
static int g_templates;  /* template kernels seen (rendered by cuda_gemm, not here) */
static int g_skipped;    /* compile tests skipped for want of libnvrtc */
static int g_programs;   /* programs compiled */
static int g_kinds[2];   /* FLAT / ROWS kernels */
static int g_marked;     /* kernels whose marked-dialect text mapped back to CUDA's */

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

/* Kernels of many graphs are compiled together: NVRTC's fixed cost per program dominates
 * small kernels, so the graphs' kernels are batched (names made unique by a graph counter)
 * and compiled as a few programs on two threads. */
#define BATCH_KERNELS  400
#define BATCH_PROGRAMS 2
static tgc_strbuf g_batch[BATCH_PROGRAMS];
static int g_batch_n[BATCH_PROGRAMS];
static int g_graph_no;

static void flush_batches(void)
{
    const char *srcs[BATCH_PROGRAMS], *names[BATCH_PROGRAMS] = {"batch0", "batch1"};
    char *texts[BATCH_PROGRAMS];
    char *cubins[BATCH_PROGRAMS];
    size_t sizes[BATCH_PROGRAMS];
    int n = 0, kernels = 0;
    for (int i = 0; i < BATCH_PROGRAMS; i++) {
        if (!g_batch_n[i])
            continue;
        texts[n] = tgc_sb_take(&g_batch[i]);
        assert_non_null(texts[n]);
        srcs[n] = texts[n];
        names[n] = i ? "batch1" : "batch0";
        kernels += g_batch_n[i];
        g_batch_n[i] = 0;
        n++;
    }
    if (!n)
        return;
    static int dumped;
    const char *dump = getenv("TGC_TEST_CUDA_DUMP"); /* a folder for the programs' text */
    for (int i = 0; dump && i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/batch%03d.cu", dump, dumped++);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(texts[i], f);
            fclose(f);
        }
    }
    /* TGC_TEST_NVRTC_EVERY=N (the sanitizer build: tests/CMakeLists.txt) compiles every N-th
     * flush and only renders the others: the rendering is this build's own code and runs in
     * full; NVRTC's verdict on the same text (the rendering is deterministic) is the release
     * build's, which compiles every flush. */
    static int flushes;
    const char *every_env = getenv("TGC_TEST_NVRTC_EVERY");
    int every = every_env ? atoi(every_env) : 1;
    if (every > 1 && flushes++ % every != 0) {
        for (int i = 0; i < n; i++)
            free(texts[i]);
        g_kernels += kernels;
        return;
    }
    tgc_status st = tgc_nvrtc_compile_all(n, names, srcs, 90, 2, cubins, sizes, NULL);
    if (st != TGC_OK) {
        for (int i = 0; i < n; i++) {
            char path[64];
            snprintf(path, sizeof path, "/tmp/tgc_cuda_render_failed_%d.cu", i);
            FILE *f = fopen(path, "w");
            if (f) {
                fputs(texts[i], f);
                fclose(f);
            }
        }
        fail_msg("NVRTC (sources in /tmp/tgc_cuda_render_failed_*.cu): %s", tgc_last_error());
    }
    for (int i = 0; i < n; i++) {
        assert_true(sizes[i] > 0);
        free(cubins[i]);
        free(texts[i]);
    }
    g_kernels += kernels;
    g_programs += n;
}

/* The kernel rendered with the marked dialect (render_dialects.h) spells nothing as CUDA
 * does, and its markers spelled as CUDA's give cuda_text exactly. */
static void same_in_marked_dialect(const kir_kernel *k, const kir_args *slots, const char *fname,
                                   const char *cuda_text)
{
    tgc_strbuf sb = {0};
    tgc_c_launch l;
    if (tgc_c_render_loop(marked_dialect(), &sb, k, slots, fname, &l) != TGC_OK)
        fail_msg("%s: %s", fname, tgc_last_error());
    char *m = tgc_sb_take(&sb);
    assert_non_null(m);
    no_cuda_spelling(m);
    char *back = marked_to_cuda(m, tgc_cuda_dialect());
    assert_string_equal(back, cuda_text);
    free(back);
    free(m);
    g_marked++;
}

static tgc_status text_compile(const tgc_config *cfg, tgc_device dev, const char *name,
                               const tgc_graph *g, tgc_plan_kernel *ks, int n, void **code)
{
    (void)cfg, (void)dev, (void)g;
    int gno = g_graph_no++;
    int b = gno % BATCH_PROGRAMS;
    for (int i = 0; i < n; i++) {
        if (ks[i].k->kind != KIR_LOOP) {
            g_templates++;
            continue;
        }
        char fname[96];
        snprintf(fname, sizeof fname, "g%d_%s", gno, ks[i].name);
        if (!g_batch_n[b]) {
            tgc_sb_puts(&g_batch[b], tgc_cuda_prelude());
        }
        tgc_sb_printf(&g_batch[b], "/* graph %s */\n", name);
        tgc_cuda_launch ln;
        size_t at = g_batch[b].len;
        tgc_status st = tgc_cuda_render_loop(&g_batch[b], ks[i].k, &ks[i].slots, fname, &ln);
        if (st != TGC_OK)
            return st;
        same_in_marked_dialect(ks[i].k, &ks[i].slots, fname, g_batch[b].data + at);
        g_kinds[ln.shape == TGC_CUDA_SHAPE_ROWS]++;
        g_batch_n[b]++;
    }
    if (g_batch_n[0] + g_batch_n[1] >= BATCH_KERNELS)
        flush_batches();
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
    if (tgc_plan_compile(&b, g, &cfg, tgc_cpu(), name, &p) != TGC_OK)
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
                    /* every shape for one dtype, a broadcast for mixed dtypes */
                    int same = n_in == 1 || a0 == a1;
                    for (int shape = same ? 0 : 1; shape < (same ? 5 : 2); shape++) {
                        tgc_graph *g = tgc_graph_create();
                        tgc_sdim s2[2] = {3, 37}, s1[1] = {37}, st[2] = {37, 3};
                        if (shape == 3) /* every access aligned: the vector path */
                            s2[0] = 8, s2[1] = 64, s1[0] = 64;
                        if (shape == 4) /* symbolic rows and columns */
                            s2[0] = tgc_sym_new(g->syms, 3, 0, 0),
                            s2[1] = s1[0] = tgc_sym_new(g->syms, 37, 0, 1);
                        int32_t in[3];
                        for (int k = 0; k < n_in; k++) {
                            if ((shape == 1 || shape == 4) && k == n_in - 1) {
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
    flush_batches();
    print_message("pointwise: %d graphs, %d kernels compiled\n", graphs, g_kernels);
    assert_true(graphs > 1000);
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
    flush_batches();
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
        /* logsumexp (decomposed: max, where on the infinite max, exp, sum, log) */
        for (int keep = 0; keep < 2; keep++) {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[3] = {4, 33, 300};
            int32_t x = gb_input(g, dt, 3, s);
            int32_t o = gb_ints(g, TGC_OP_LOGSUMEXP, x, (int64_t[]){keep ? 5 : 4, keep}, 2);
            gb_outputs(g, &o, 1);
            compile_graph(g, "logsumexp");
        }
        /* rms_norm with and without weight */
        for (int w = 0; w < 2; w++) {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[3] = {2, 128, 768}, sw[1] = {768};
            int32_t in[2] = {gb_input(g, dt, 3, s), gb_input(g, dt, 1, sw)};
            tgc_attrs a = {.ni = 2, .nf = 1};
            a.i[0] = 1;
            a.i[1] = w ? TGC_LN_HAS_WEIGHT : 0;
            a.f[0] = 1e-6;
            int32_t o = gb_op(g, TGC_OP_RMS_NORM, in, 1 + w, &a);
            gb_outputs(g, &o, 1);
            compile_graph(g, "rms_norm");
        }
        /* group_norm, 4-d with weight and bias, 3-d without */
        for (int affine = 0; affine < 2; affine++) {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s4[4] = {4, 32, 9, 9}, s3[3] = {4, 32, 50}, sc[1] = {32};
            int32_t in[3] = {affine ? gb_input(g, dt, 4, s4) : gb_input(g, dt, 3, s3)};
            if (affine) {
                in[1] = gb_input(g, dt, 1, sc);
                in[2] = gb_input(g, dt, 1, sc);
            }
            tgc_attrs a = {.ni = 2, .nf = 1};
            a.i[0] = affine ? 8 : 32;
            a.i[1] = affine ? TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS : 0;
            a.f[0] = 1e-5;
            int32_t o = gb_op(g, TGC_OP_GROUP_NORM, in, affine ? 3 : 1, &a);
            gb_outputs(g, &o, 1);
            compile_graph(g, "group_norm");
        }
        /* sin and cos (MATH_FN primitives, rendered by name) */
        {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[2] = {7, 300};
            int32_t x = gb_input(g, dt, 2, s);
            int32_t sn = gb_op(g, TGC_OP_SIN, &x, 1, NULL);
            int32_t cs = gb_op(g, TGC_OP_COS, &sn, 1, NULL);
            gb_outputs(g, &cs, 1);
            compile_graph(g, "sin_cos");
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
    flush_batches();
}

static int32_t pool(tgc_graph *g, tgc_op op, int32_t x, int k, int st, int pad, int excl)
{
    tgc_attrs a = {.ni = 7};
    a.i[0] = a.i[1] = k;
    a.i[2] = a.i[3] = st;
    a.i[4] = a.i[5] = pad;
    a.i[6] = excl;
    return gb_op(g, op, &x, 1, &a);
}

/* Pools (guarded windows, global average), draws, views, symbolic sizes, long chains. */
static void pools_draws_views_symbolic(void **state)
{
    (void)state;
    if (!have_nvrtc()) {
        g_skipped++;
        skip();
    }
    for (int d = 0; d < N_OF(float_dtypes); d++) {
        tgc_dtype dt = float_dtypes[d];
        for (int v = 0; v < 4; v++) {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[4] = {2, 3, 17, 16};
            int32_t x = gb_input(g, dt, 4, s);
            int32_t o = v == 0   ? pool(g, TGC_OP_MAX_POOL2D, x, 3, 2, 1, 0)
                        : v == 1 ? pool(g, TGC_OP_AVG_POOL2D, x, 2, 2, 0, 0)
                        : v == 2 ? pool(g, TGC_OP_AVG_POOL2D, x, 3, 1, 1, 0)
                                 : gb_ints(g, TGC_OP_ADAPTIVE_AVG_POOL2D, x, (int64_t[]){1, 1}, 2);
            int32_t r = gb_un(g, TGC_OP_RELU, o);
            gb_outputs(g, &r, 1);
            compile_graph(g, "pool");
        }
        /* rand / randn of each float dtype, and dropout of an input */
        for (int normal = 0; normal < 2; normal++) {
            tgc_graph *g = tgc_graph_create();
            tgc_attrs a = {.ni = 2, .nf = 1, .dtype = dt};
            a.i[0] = 64;
            a.i[1] = 100;
            a.f[0] = normal;
            int32_t r = gb_op(g, TGC_OP_RAND, NULL, 0, &a);
            int32_t m = gb_scalar(g, TGC_OP_MUL_SCALAR, r, 2.0);
            gb_outputs(g, &m, 1);
            compile_graph(g, "rand");
        }
        {
            tgc_graph *g = tgc_graph_create();
            tgc_sdim s[2] = {64, 128};
            int32_t x = gb_input(g, dt, 2, s);
            int32_t dr = gb_scalar(g, TGC_OP_DROPOUT, x, 0.25);
            int32_t o = gb_un(g, TGC_OP_GELU, dr);
            gb_outputs(g, &o, 1);
            compile_graph(g, "dropout");
        }
    }
    /* views: slices with steps, expand, permutes, a reshape of a permute (copied first) */
    {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim s[3] = {8, 16, 32}, s1[2] = {1, 32};
        int32_t x = gb_input(g, TGC_F32, 3, s), y = gb_input(g, TGC_F32, 2, s1);
        int32_t sl = gb_ints(g, TGC_OP_SLICE, x, (int64_t[]){2, 1, 31, 2}, 4); /* [8,16,15] */
        int32_t p = gb_ints(g, TGC_OP_PERMUTE, sl, (int64_t[]){2, 0, 1}, 3);   /* [15,8,16] */
        int32_t e = gb_ints(g, TGC_OP_EXPAND, y, (int64_t[]){16, 32}, 2);
        int32_t pe = gb_ints(g, TGC_OP_PERMUTE, e, (int64_t[]){1, 0}, 2); /* [32, 16] */
        int32_t ps = gb_ints(g, TGC_OP_SLICE, pe, (int64_t[]){0, 0, 15, 1}, 4);
        int32_t pu = gb_ints(g, TGC_OP_UNSQUEEZE, ps, (int64_t[]){1}, 1); /* [15,1,16] */
        int32_t a = gb_bin(g, TGC_OP_ADD, p, pu);
        int32_t px = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){1, 0, 2}, 3);
        int32_t rx = gb_ints(g, TGC_OP_RESHAPE, px, (int64_t[]){128, 32}, 2);
        int32_t ex = gb_un(g, TGC_OP_EXP, rx);
        int32_t outs[2] = {a, ex};
        gb_outputs(g, outs, 2);
        compile_graph(g, "views");
    }
    /* symbolic sizes: a batch dim s0 and a length s1, through pointwise, broadcast,
     * reductions and softmax */
    for (int d = 0; d < N_OF(all_dtypes); d++) {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim s0 = tgc_sym_new(g->syms, 4, 0, 0), s1 = tgc_sym_new(g->syms, 100, 0, 1);
        tgc_sdim sx[2] = {s0, s1}, sb[1] = {s1};
        tgc_dtype dt = all_dtypes[d];
        int32_t x = gb_input(g, dt, 2, sx), b = gb_input(g, dt, 1, sb);
        int32_t a = gb_bin(g, TGC_OP_MUL, x, b);
        int32_t r = gb_reduce(g, TGC_OP_SUM, a, 2, 1);
        int32_t m = gb_reduce(g, TGC_OP_MAX, x, 1, 0);
        int32_t outs[3] = {a, r, m};
        int n = 3;
        if (tgc_dtype_is_float(dt)) {
            tgc_attrs sa = {.ni = 1};
            sa.i[0] = 1;
            outs[n - 1] = gb_op(g, TGC_OP_SOFTMAX, &x, 1, &sa);
        }
        gb_outputs(g, outs, n);
        compile_graph(g, "symbolic");
    }
    /* templates: linear + bias + gelu and conv + relu go to cuda_gemm (counted, not rendered),
     * a sum over everything takes the split pair */
    for (int d = 0; d < 3; d++) {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sx[2] = {64, 256}, sw[2] = {128, 256}, sb[1] = {128};
        int32_t in[3] = {gb_input(g, float_dtypes[d], 2, sx), gb_input(g, float_dtypes[d], 2, sw),
                         gb_input(g, float_dtypes[d], 1, sb)};
        int32_t o = gb_op(g, TGC_OP_LINEAR, in, 3, NULL);
        o = gb_un(g, TGC_OP_GELU, o);
        int32_t r = gb_reduce(g, TGC_OP_SUM, o, 3, 0);
        int32_t outs[2] = {o, r};
        gb_outputs(g, outs, 2);
        compile_graph(g, "linear");
    }
    /* the benchmark's chain of 8 pointwise ops on 256 MiB, and 4-d broadcasting */
    for (int d = 0; d < N_OF(float_dtypes); d++) {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim s[1] = {(int64_t)64 << 20};
        int32_t x = gb_input(g, float_dtypes[d], 1, s);
        int32_t v = gb_scalar(g, TGC_OP_MUL_SCALAR, x, 1.5);
        v = gb_scalar(g, TGC_OP_ADD_SCALAR, v, 0.25);
        v = gb_un(g, TGC_OP_RELU, v);
        v = gb_scalar(g, TGC_OP_MUL_SCALAR, v, 0.1);
        v = gb_un(g, TGC_OP_TANH, v);
        v = gb_bin(g, TGC_OP_ADD, v, x);
        v = gb_un(g, TGC_OP_SIGMOID, v);
        v = gb_scalar(g, TGC_OP_SUB_SCALAR, v, 0.5);
        gb_outputs(g, &v, 1);
        compile_graph(g, "chain8");
    }
    {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sa[4] = {2, 1, 8, 64}, sb[3] = {3, 1, 64};
        int32_t a = gb_input(g, TGC_F16, 4, sa), b = gb_input(g, TGC_BF16, 3, sb);
        int32_t o = gb_bin(g, TGC_OP_SUB, a, b);
        gb_outputs(g, &o, 1);
        compile_graph(g, "bcast4");
    }
    flush_batches();
}

/* ---- text of hand-built kernels ---- */

/* out[i] = exp(x[i]) over n f32 elements (n constant, or symbolic through slot 0). */
static kir_kernel *exp_kernel(tgc_sdim n, tgc_dtype dt)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_inner = 1;
    k->extent[0] = n;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, dt, 0), bo = kir_buf_of(k, 1, dt, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = 1;
    ld.dtype = dt;
    int32_t x = kir_add_load_val(k, &ld);
    kir_val e = {.kind = KV_OP, .op = TGC_OP_EXP, .dtype = dt, .n_in = 1, .in = {x}};
    int32_t v = kir_add_val(k, &e);
    kir_store st = {0};
    st.at.buf = bo;
    st.at.stride[0] = 1;
    st.val = v;
    st.dtype = dt;
    st.phase = 0;
    assert_true(kir_add_store(k, &st) >= 0);
    kir_schedule_kernel(k, tgc_cuda_kir_target());
    return k;
}

/* out[r] = sum_j x[r, j] over rows x len (row store). */
static kir_kernel *rowsum_kernel(int64_t rows, int64_t len)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_outer = 1;
    k->n_inner = 1;
    k->extent[0] = rows;
    k->extent[1] = len;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, TGC_F32, 0), bo = kir_buf_of(k, 1, TGC_F32, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = len;
    ld.at.stride[1] = 1;
    ld.dtype = TGC_F32;
    int32_t x = kir_add_load_val(k, &ld);
    kir_reduce r = {KR_SUM, x, 0};
    int32_t ri = kir_add_reduce(k, &r);
    kir_val acc = {.kind = KV_ACC, .dtype = TGC_F32, .index = ri};
    int32_t av = kir_add_val(k, &acc);
    kir_store st = {0};
    st.at.buf = bo;
    st.at.stride[0] = 1;
    st.val = av;
    st.dtype = TGC_F32;
    st.phase = -1;
    assert_true(kir_add_store(k, &st) >= 0);
    kir_schedule_kernel(k, tgc_cuda_kir_target());
    return k;
}

static char *render(const kir_kernel *k, const char *name, tgc_cuda_launch *l)
{
    kir_args a = {0};
    assert_int_equal(kir_args_collect(k, &a), TGC_OK);
    tgc_strbuf sb = {0};
    if (tgc_cuda_render_loop(&sb, k, &a, name, l) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    kir_args_free(&a);
    char *t = tgc_sb_take(&sb);
    assert_non_null(t);
    return t;
}

static void compile_text(const char *name, const char *body)
{
    if (!have_nvrtc())
        return;
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, tgc_cuda_prelude());
    tgc_sb_puts(&sb, body);
    char *src = tgc_sb_take(&sb);
    char *cubin = NULL, *ptx = NULL;
    size_t size = 0;
    if (tgc_nvrtc_compile(name, src, 90, &cubin, &size, &ptx) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    assert_true(size > 0);
    assert_non_null(ptx);
    assert_non_null(strstr(ptx, ".entry"));
    free(cubin);
    free(ptx);
    free(src);
}

static void text_pointwise_signature_vectors_determinism(void **state)
{
    (void)state;
    kir_kernel *k = exp_kernel(1 << 20, TGC_F32);
    tgc_cuda_launch l;
    char *t = render(k, "kexp", &l);
    assert_non_null(strstr(t, "struct kexp_b { void *p[2]; };"));
    assert_non_null(strstr(t, "struct kexp_s { long long v[1]; };"));
    assert_non_null(strstr(t, "extern \"C\" __global__ void __launch_bounds__(256) kexp(kexp_b b, "
                              "kexp_s s)"));
    assert_non_null(strstr(t, "tgc_vec<float, 4> L0 = *(const tgc_vec<float, 4> *)"));
    assert_non_null(strstr(t, "*(tgc_vec<float, 4> *)(B1 + "));
    assert_non_null(strstr(t, "expf("));
    assert_int_equal(l.shape, TGC_CUDA_SHAPE_FLAT);
    assert_int_equal(l.vec, 4);
    assert_int_equal(l.block_threads, 256);
    /* the same input gives the same text */
    tgc_cuda_launch l2;
    char *t2 = render(k, "kexp", &l2);
    assert_string_equal(t, t2);
    /* launch: 2^20 / 4 per thread / 256 per block = 1024 blocks, capped by 8 per SM */
    unsigned grid[3], block[3], smem = 1;
    int64_t ext[1] = {1 << 20};
    tgc_cuda_launch_dims(&l, k, ext, 132, grid, block, &smem);
    assert_int_equal(grid[0], 1024);
    assert_int_equal(block[0], 256);
    assert_int_equal(smem, 0);
    tgc_cuda_launch_dims(&l, k, ext, 100, grid, block, &smem);
    assert_int_equal(grid[0], 800);
    compile_text("kexp", t);
    free(t);
    free(t2);
    kir_kernel_free(k);
    /* f16: 8 per thread; odd constant length: no vector path at all */
    k = exp_kernel(4096, TGC_F16);
    t = render(k, "kh", &l);
    assert_int_equal(l.vec, 8);
    assert_non_null(strstr(t, "tgc_vec<uint16_t, 8>"));
    assert_non_null(strstr(t, "tgc_round_h(expf("));
    compile_text("kh", t);
    free(t);
    kir_kernel_free(k);
    k = exp_kernel(1001, TGC_F32);
    t = render(k, "ko", &l);
    assert_int_equal(l.vec, 1);
    assert_null(strstr(t, "tgc_vec<"));
    free(t);
    kir_kernel_free(k);
}

static void text_symbolic_sizes_are_slots(void **state)
{
    (void)state;
    tgc_symtab *syms = tgc_symtab_create();
    tgc_sdim n = tgc_sym_new(syms, 1000, 0, 0);
    kir_kernel *k = exp_kernel(n, TGC_F64);
    tgc_cuda_launch l;
    char *t = render(k, "kd", &l);
    /* the length is s.v[0]: the vector path is a run-time decision, the index type too */
    assert_non_null(strstr(t, "s.v[0]"));
    assert_non_null(strstr(t, "% 2LL) == 0LL"));
    assert_non_null(strstr(t, "kd_run<unsigned>(b, s)"));
    assert_non_null(strstr(t, "kd_run<long long>(b, s)"));
    assert_int_equal(l.vec, 2);
    compile_text("kd", t);
    free(t);
    kir_kernel_free(k);
    tgc_symtab_free(syms);
}

static void text_reduction_uses_shuffles(void **state)
{
    (void)state;
    kir_kernel *k = rowsum_kernel(64, 4096);
    tgc_cuda_launch l;
    char *t = render(k, "krs", &l);
    assert_int_equal(l.shape, TGC_CUDA_SHAPE_ROWS);
    assert_non_null(strstr(t, "tgc_warp_sum(a0)"));
    assert_non_null(strstr(t, "__shared__ double red0_[8]"));
    assert_non_null(strstr(t, "__syncthreads()"));
    assert_non_null(strstr(tgc_cuda_prelude(), "__shfl_xor_sync"));
    unsigned grid[3], block[3], smem;
    int64_t ext[2] = {64, 4096};
    tgc_cuda_launch_dims(&l, k, ext, 132, grid, block, &smem);
    assert_int_equal(grid[0], 64); /* a block per long row */
    ext[1] = 100;
    tgc_cuda_launch_dims(&l, k, ext, 132, grid, block, &smem);
    assert_int_equal(grid[0], 8); /* a warp per short row: 8 rows per block */
    compile_text("krs", t);
    free(t);
    kir_kernel_free(k);
}

/* ---- batches ---- */

static int g_batch_heads, g_batch_members;

static int text_batch_fits(const tgc_plan_kernel *ks, int n)
{
    for (int j = 0; j < n; j++)
        if (!tgc_c_loop_is_flat(ks[j].k))
            return 0;
    return 1;
}

static tgc_status text_launch_batch(const tgc_plan_kernel *ks, int n, void *const *const *bufs,
                                    const int64_t *const *sizes, int one_by_one,
                                    const tgc_launch_env *env)
{
    (void)ks, (void)n, (void)bufs, (void)sizes, (void)one_by_one, (void)env;
    return tgc_set_error(TGC_ERR_UNSUPPORTED, "text backend: no launches");
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Renders each batch the driver formed as the CUDA backend does (the prelude, the batch as
 * tgc_k) and compiles it with NVRTC. */
static tgc_status text_compile_batches(const tgc_config *cfg, tgc_device dev, const char *name,
                                       const tgc_graph *g, tgc_plan_kernel *ks, int n, void **code)
{
    (void)cfg, (void)dev, (void)g;
    for (int i = 0; i < n; i++) {
        if (ks[i].batch < 2)
            continue;
        int m = ks[i].batch;
        const kir_kernel *kk[8];
        const kir_args *sl[8];
        tgc_cuda_launch ls[8];
        assert_true(m <= 8);
        for (int j = 0; j < m; j++) {
            kk[j] = ks[i + j].k;
            sl[j] = &ks[i + j].slots;
        }
        tgc_strbuf sb = {0};
        tgc_sb_puts(&sb, tgc_cuda_prelude());
        size_t at = sb.len;
        assert_int_equal(tgc_cuda_render_batch(&sb, kk, sl, m, "tgc_k", ls), TGC_OK);
        char *text = tgc_sb_take(&sb);
        assert_non_null(text);
        const char *b = text + at;
        assert_int_equal(count_of(b, "__global__"), 1); /* the entry; members are device code */
        assert_non_null(strstr(b, "static __shared__ unsigned tgc_bx_, tgc_gx_;"));
        char want[96];
        snprintf(want, sizeof want, "struct tgc_k_e { unsigned e[%d]; };", m);
        assert_non_null(strstr(b, want));
        for (int j = 0; j < m; j++) {
            snprintf(want, sizeof want, "static __device__ __forceinline__ void tgc_k_m%d(", j);
            assert_non_null(strstr(b, want));
            snprintf(want, sizeof want, "tgc_k_m%d(b%d, s%d);", j, j, j);
            assert_non_null(strstr(b, want));
            assert_int_equal(ls[j].shape, TGC_CUDA_SHAPE_FLAT);
        }
        /* the members read the batch's share of the grid, never the grid itself */
        assert_int_equal(count_of(b, "gridDim.x"), 0);
        assert_int_equal(count_of(b, "blockIdx.x"), 1);
        if (have_nvrtc()) {
            char *cubin = NULL;
            size_t size = 0;
            tgc_status st = tgc_nvrtc_compile(name, text, 90, &cubin, &size, NULL);
            if (st != TGC_OK) {
                FILE *f = fopen("/tmp/tgc_cuda_render_failed_batch.cu", "w");
                if (f) {
                    fputs(text, f);
                    fclose(f);
                }
                fail_msg("NVRTC (source in /tmp/tgc_cuda_render_failed_batch.cu): %s",
                         tgc_last_error());
            }
            assert_true(size > 0);
            free(cubin);
        }
        free(text);
        g_batch_heads++;
        g_batch_members += m;
    }
    *code = calloc(1, 1);
    return *code ? TGC_OK : TGC_ERR_OOM;
}

/* An optimizer-like step: p_i <- p_i - g_i * g_i for parameters of three shapes and two
 * dtypes, and a symbolic batch size elsewhere: the driver forms one batch of the three
 * updates; the batch renders with one entry and compiles. A template (no flat kernel) is
 * refused. */
static void batched_updates_render_and_compile(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    static const tgc_sdim s64[1] = {64}, s337[2] = {3, 37}, s107[2] = {10, 7};
    const tgc_sdim *shapes[3] = {s64, s337, s107};
    const int ranks[3] = {1, 2, 2};
    const tgc_dtype dts[3] = {TGC_F32, TGC_F32, TGC_F16};
    for (int i = 0; i < 3; i++) {
        int32_t p = gb_input(g, dts[i], ranks[i], shapes[i]);
        int32_t gr = gb_input(g, dts[i], ranks[i], shapes[i]);
        gb_bin(g, TGC_OP_ASSIGN, p, gb_bin(g, TGC_OP_SUB, p, gb_bin(g, TGC_OP_MUL, gr, gr)));
    }
    tgc_sdim sx[2] = {tgc_sym_new(g->syms, 4, 6, 0), 5};
    int32_t x = gb_input(g, TGC_F32, 2, sx);
    int32_t y = gb_un(g, TGC_OP_EXP, x);
    gb_outputs(g, &y, 1);
    tgc_backend b = text_backend();
    b.compile = text_compile_batches;
    b.batch_fits = text_batch_fits;
    b.launch_batch = text_launch_batch;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    tgc_plan *p = NULL;
    g_batch_heads = g_batch_members = 0;
    if (tgc_plan_compile(&b, g, &cfg, tgc_cpu(), "batch", &p) != TGC_OK)
        fail_msg("batch: %s", tgc_last_error());
    assert_int_equal(g_batch_heads, 1);
    assert_int_equal(g_batch_members, 4); /* the three updates and exp(x) */
    tgc_plan_free(p);
    tgc_graph_free(g);

    kir_kernel *t = kir_kernel_new(KIR_GEMM);
    assert_non_null(t);
    kir_args none = {0};
    const kir_kernel *kk[1] = {t};
    const kir_args *sl[1] = {&none};
    tgc_cuda_launch ls[1];
    tgc_strbuf sb = {0};
    check_error(tgc_cuda_render_batch(&sb, kk, sl, 1, "tgc_k", ls), TGC_ERR_INVALID_ARG,
                "flat LOOP kernels only");
    tgc_sb_free(&sb);
    kir_kernel_free(t);
}

/* Few long rows: the split pair, its grids and scratch. */
static void text_split_reduction(void **state)
{
    (void)state;
    kir_kernel *k = rowsum_kernel(1, (int64_t)1 << 24);
    tgc_cuda_launch l;
    char *t = render(k, "ksp", &l);
    assert_int_equal(l.split, 1);
    assert_non_null(strstr(t, "struct ksp_pb { void *p[3]; };"));
    assert_non_null(strstr(t, "void __launch_bounds__(256) ksp_part(ksp_pb b, ksp_s s)"));
    assert_non_null(strstr(t, "void __launch_bounds__(256) ksp_fin(ksp_pb b, ksp_s s)"));
    assert_int_equal(tgc_cuda_split_chunks(1, (int64_t)1 << 24), 2048);
    assert_int_equal(tgc_cuda_split_chunks(8, 1 << 20), 128);
    assert_int_equal(tgc_cuda_split_chunks(64, 1 << 20), 1);
    assert_int_equal(tgc_cuda_split_chunks(4, 1000), 1);
    unsigned gp[3], gf[3];
    size_t scratch = 0;
    int64_t ext[2] = {1, (int64_t)1 << 24};
    assert_int_equal(tgc_cuda_split_dims(&l, k, ext, 132, gp, gf, &scratch), 1);
    assert_int_equal(gp[0], 132 * 8);
    assert_int_equal(gf[0], 1);
    assert_int_equal(scratch, 2048 * 8);
    ext[0] = 100;
    assert_int_equal(tgc_cuda_split_dims(&l, k, ext, 132, gp, gf, &scratch), 0);
    compile_text("ksp", t);
    free(t);
    kir_kernel_free(k);
}

/* A GEMM epilogue: relu(acc + bias[n]) * scale, through tgc_cuda_render_vals. */
static void text_epilogue_values(void **state)
{
    (void)state;
    kir_kernel *k = kir_kernel_new(KIR_GEMM);
    assert_non_null(k);
    k->tpl.dtype = k->tpl.acc_dtype = k->tpl.out_dtype = TGC_BF16;
    kir_val acc = {.kind = KV_ACC, .dtype = TGC_BF16, .index = 0};
    int32_t a = kir_add_val(k, &acc);
    kir_load ld = {0};
    ld.at.buf = kir_buf_of(k, 7, TGC_BF16, 0);
    ld.at.stride[2] = 1;
    ld.dtype = TGC_BF16;
    int32_t bv = kir_add_load_val(k, &ld);
    kir_val add = {.kind = KV_OP, .op = TGC_OP_ADD, .dtype = TGC_BF16, .n_in = 2, .in = {a, bv}};
    int32_t s = kir_add_val(k, &add);
    kir_val relu = {.kind = KV_OP, .op = TGC_OP_RELU, .dtype = TGC_BF16, .n_in = 1, .in = {s}};
    int32_t r = kir_add_val(k, &relu);
    kir_val mul = {.kind = KV_OP,
                   .op = TGC_OP_MUL_SCALAR,
                   .dtype = TGC_BF16,
                   .n_in = 1,
                   .in = {r},
                   .f = {0.5, 0}};
    int32_t m = kir_add_val(k, &mul);
    k->result = m;
    kir_args sl = {0};
    assert_int_equal(kir_args_collect(k, &sl), TGC_OK);
    tgc_cuda_val_env env = {
        .acc = {"acc_"}, .var = {"bb", "mm", "nn"}, .bufs = "b.p", .sizes = "s.v", .prefix = "e0_"};
    uint8_t emitted[8] = {0};
    char name[64];
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "struct ep_b { void *p[1]; };\nstruct ep_s { long long v[1]; };\n"
                     "extern \"C\" __global__ void ep(ep_b b, ep_s s) {\n"
                     "  const long long bb = 0, mm = blockIdx.x, nn = threadIdx.x;\n"
                     "  const float acc_ = (float)threadIdx.x;\n");
    assert_int_equal(tgc_cuda_render_vals(&sb, k, &sl, &env, m, name, sizeof name, emitted),
                     TGC_OK);
    assert_string_equal(name, "e0_4");
    for (int i = 0; i < k->n_vals; i++)
        assert_int_equal(emitted[i], 1);
    /* a second call renders nothing new */
    size_t len = sb.len;
    assert_int_equal(tgc_cuda_render_vals(&sb, k, &sl, &env, s, name, sizeof name, emitted),
                     TGC_OK);
    assert_int_equal(sb.len, len);
    assert_string_equal(name, "e0_2");
    tgc_sb_puts(&sb, "  ((uint16_t *)b.p[0])[mm * 256 + nn] = tgc_f2bf(e0_4);\n}\n");
    char *t = tgc_sb_take(&sb);
    assert_non_null(strstr(t, "tgc_bf2f(((const uint16_t *)b.p[0])["));
    assert_non_null(strstr(t, "tgc_round_bf((acc_))"));
    compile_text("ep", t);
    /* bad ids */
    check_error(tgc_cuda_render_vals(&sb, k, &sl, &env, 99, name, sizeof name, emitted),
                TGC_ERR_INVALID_ARG, "has no value 99");
    tgc_sb_free(&sb);
    free(t);
    kir_args_free(&sl);
    kir_kernel_free(k);
}

/* The prelude's helpers compile, and NVRTC errors come back with the log. */
static void prelude_compiles_and_errors_report(void **state)
{
    (void)state;
    compile_text(
        "prelude",
        "extern \"C\" __global__ void use(float *f, double *d, long long *l, "
        "unsigned *u) {\n"
        "  unsigned long long s = 42, c = threadIdx.x;\n"
        "  u[0] = tgc_philox_bits(s, c);\n"
        "  f[0] = tgc_philox_uniform(s, c) + tgc_philox_uniform24(s, c) +\n"
        "         tgc_philox_uniform_m(s, c, 11) + tgc_philox_normal(s, c);\n"
        "  f[1] = tgc_h2f(tgc_f2h(f[2])) + tgc_bf2f(tgc_f2bf(f[3])) + tgc_round_h(f[4])"
        " + tgc_round_bf(f[5]);\n"
        "  f[6] = tgc_relu(f[11]) + tgc_maximum(f[12], f[13]) + "
        "tgc_minimum(f[14], f[15]) + tgc_clamp(f[16], 0.f, 1.f) + tgc_pow_half(f[17]);\n"
        "  d[0] = tgc_relu(d[1]) + tgc_maximum(d[2], d[3]) + tgc_inf_d() + tgc_nan_d();\n"
        "  l[0] = tgc_f2i64(d[4]) + tgc_f2i32(d[5]) + tgc_warp_sum(l[1]);\n"
        "  f[18] = tgc_warp_max(f[19]) + tgc_warp_min(f[20]) + tgc_inf_f() + tgc_nan_f();\n"
        "  tgc_vec<float, 4> v = *(const tgc_vec<float, 4> *)(f + 32); f[64] = v.v[3];\n"
        "}\n");
    if (!have_nvrtc()) {
        g_skipped++;
        skip();
    }
    char *cubin = (char *)1;
    size_t size = 1;
    check_error(tgc_nvrtc_compile("broken", "extern \"C\" __global__ void k() { int x = ; }", 90,
                                  &cubin, &size, NULL),
                TGC_ERR_COMPILE, "tgc cuda: NVRTC rejected broken: ");
    assert_null(cubin);
    assert_int_equal(size, 0);
    const char *srcs[3] = {"extern \"C\" __global__ void a() {}", "junk(", "more junk("};
    const char *names[3] = {"ok", "bad1", "bad2"};
    char *cubins[3];
    size_t sizes[3];
    check_error(tgc_nvrtc_compile_all(3, names, srcs, 90, 2, cubins, sizes, NULL), TGC_ERR_COMPILE,
                "NVRTC rejected bad1");
    for (int i = 0; i < 3; i++) {
        assert_null(cubins[i]);
        assert_int_equal(sizes[i], 0);
    }
    /* sm_90a when the program asks for it */
    char *ptx = NULL;
    assert_int_equal(tgc_nvrtc_compile("a",
                                       "#define TGC_NEEDS_SM90A\nextern \"C\" __global__ void "
                                       "a() {}",
                                       90, &cubin, &size, &ptx),
                     TGC_OK);
    assert_non_null(strstr(ptx, "sm_90a"));
    free(cubin);
    free(ptx);
    int ma = 0, mi = 0;
    assert_int_equal(tgc_nvrtc_version(&ma, &mi), 0);
    assert_true(ma >= 12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(text_pointwise_signature_vectors_determinism, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(text_symbolic_sizes_are_slots, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(text_reduction_uses_shuffles, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(text_split_reduction, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(batched_updates_render_and_compile, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(text_epilogue_values, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(prelude_compiles_and_errors_report, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(pointwise_ops_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(reductions_every_axis, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(norms_after_decomposition, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(pools_draws_views_symbolic, scoped_setup, scoped_teardown),
    };
    /* ctest runs it in shards (tests/test_shard.h: TGC_TEST_SHARD=k/n runs case i when
     * i % n == k) */
    int rc = test_run_shard("test_cuda_render", tests, sizeof tests / sizeof tests[0], NULL,
                            group_shutdown);
    printf("cuda render: %d LOOP kernels (%d flat, %d rows) in %d NVRTC programs, %d template "
           "kernels left to cuda_gemm, %d compile tests skipped (no libnvrtc), %d the same in "
           "the marked dialect\n",
           g_kernels, g_kinds[0], g_kinds[1], g_programs, g_templates, g_skipped, g_marked);
    return rc;
}
