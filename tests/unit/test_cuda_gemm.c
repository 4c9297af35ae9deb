/* The CUDA GEMM / conv templates (src/backend/cuda/cuda_gemm.h): kernels built by the real
 * lowering (graphs fused with the CUDA target's template dtypes), rendered for each mode and
 * compiled by NVRTC for sm_90 (skipped, with a visible count, where NVRTC is absent); the
 * mode's instruction is in the PTX; the launch geometry and split-K workspace for given
 * sizes. No GPU is needed. */
#include <math.h>
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
#include "kir/lower.h"
#include "passes/passes.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

#ifdef TGC_HAVE_CUDA
#include "backend/backend.h"
#include "backend/cuda/cuda_autotune.h"
#include "backend/prepare.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "runtime/cuda_host.h"
#include "support/config_env.h"

static int g_skipped;
static int g_sm = 90; /* the architecture render_compile renders and compiles for */

/* The CUDA backend's classification (templates for f32, f16, bf16; loops of every dtype). */
static tgc_fuse_class cu_classify(const tgc_graph *g, int32_t i)
{
    return tgc_backend_classify(g, i, tgc_cuda_kir_target());
}

static const tgc_fuse_hooks cu_hooks = {cu_classify, kir_epilogue_operand_ok,
                                        kir_permuted_store_ok};

typedef struct tk {
    tgc_fusion f;
    uint8_t *mat;
    kir_kernel *k; /* the template kernel */
    kir_args slots;
} tk;

/* Lowers g and returns its (single) template kernel. */
static void lower_tpl(const tgc_graph *g, tk *t)
{
    memset(t, 0, sizeof *t);
    if (tgc_pass_fuse(g, &cu_hooks, &t->f) != TGC_OK)
        fail_msg("fuse: %s", tgc_last_error());
    t->mat = kir_materialized(g, &t->f);
    for (int i = 0; i < t->f.n_groups; i++) {
        kir_kernel *k = NULL;
        if (kir_lower_group(g, &t->f, i, t->mat, tgc_cuda_kir_target(), &k) != TGC_OK)
            fail_msg("lower group %d: %s", i, tgc_last_error());
        if (k && k->kind != KIR_LOOP && !t->k)
            t->k = k;
        else
            kir_kernel_free(k);
    }
    assert_non_null(t->k);
    assert_int_equal(kir_args_collect(t->k, &t->slots), TGC_OK);
}

static void tk_free(tk *t)
{
    kir_args_free(&t->slots);
    kir_kernel_free(t->k);
    free(t->mat);
    tgc_fusion_free(&t->f);
}

/* Renders t's kernel as "tgc_k" for prec and compiles it; returns the PTX (caller frees)
 * or NULL when NVRTC is absent (counted as skipped). */
static char *render_compile(const tk *t, tgc_matmul_precision prec, tgc_cuda_tpl *cfg,
                            char **src_out)
{
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, tgc_cuda_prelude()); /* as the backend starts every program */
    if (tgc_cuda_render_template(&sb, t->k, &t->slots, "tgc_k", prec, g_sm, cfg) != TGC_OK)
        fail_msg("render: %s", tgc_last_error());
    char *src = tgc_sb_take(&sb);
    assert_non_null(src);
    char *ptx = NULL;
    if (tgc_nvrtc_load() != TGC_OK) {
        g_skipped++;
        if (src_out)
            *src_out = src;
        else
            free(src);
        return NULL;
    }
    char *cubin = NULL;
    size_t n = 0;
    if (tgc_nvrtc_compile("tgc_k", src, g_sm, &cubin, &n, &ptx) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    assert_true(n > 0);
    free(cubin);
    if (src_out)
        *src_out = src;
    else
        free(src);
    return ptx;
}

/* The PTX has the instruction of cfg's mode: wgmma (sm_90a) when cfg->wg, else mma.sync
 * (SIMT: fma), and cp.async loads. */
static void check_mode_ptx(const char *ptx, const tgc_cuda_tpl *cfg)
{
    if (!ptx)
        return;
    const int mode = cfg->mode;
    int tf32 = strstr(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != NULL;
    int bf16 = strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL;
    int f16 = strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL;
    int wg = strstr(ptx, "wgmma.mma_async.sync.aligned.m64n") != NULL;
    /* the TMA entry (beside an mma.sync kernel too: TF32 with an MN-major operand) */
    assert_int_equal(wg, cfg->wg > 0 || cfg->tma_bn > 0);
    assert_int_equal(strstr(ptx, ".entry tgc_k_tma(") != NULL, cfg->tma_bn > 0);
    if (cfg->tma_bn > 0) {
        /* the two consumer warpgroups raise their registers by no more than the producer
         * lowers its own from the 168 a thread of 384 gets at launch: setmaxnreg.inc takes
         * them from the block's pool alone, and an increase it cannot meet hangs the kernel
         * (the TF32 entry once asked 224 against a producer's 64) */
        static const char inc_op[] = "setmaxnreg.inc.sync.aligned.u32 ",
                          dec_op[] = "setmaxnreg.dec.sync.aligned.u32 ";
        const char *inc = strstr(ptx, inc_op), *dec = strstr(ptx, dec_op);
        assert_non_null(inc);
        assert_non_null(dec);
        int ri = atoi(inc + sizeof inc_op - 1), rd = atoi(dec + sizeof dec_op - 1);
        assert_true(ri > 168 && rd < 168);
        assert_true(2 * (ri - 168) <= 168 - rd);
    }
    /* fp32 operands on wgmma (TF32, MEDIUM's bf16 of fp32) take tf32 wgmma from stages rounded
     * first: to tf32 (cvt.rna), or to bf16 (cvt.rn) */
    const int f32_wg = mode == TGC_CUDA_TPL_TF32 || mode == TGC_CUDA_TPL_BF16X;
    if (f32_wg && (cfg->wg || cfg->tma_bn))
        assert_non_null(
            strstr(ptx, mode == TGC_CUDA_TPL_TF32 ? "cvt.rna.tf32.f32" : "cvt.rn.bf16.f32"));
    if (cfg->wg) {
        char want[96];
        const char *ty = f32_wg ? "tf32" : mode == TGC_CUDA_TPL_BF16 ? "bf16" : "f16";
        /* wn warpgroups side by side along N, each an m64 x bn / wn slab */
        assert_true(cfg->wn == 1 || cfg->wn == 2);
        snprintf(want, sizeof want, "wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s",
                 cfg->bn / cfg->wn, f32_wg ? 8 : 16, ty, ty);
        assert_non_null(strstr(ptx, want));
        assert_non_null(strstr(ptx, ".target sm_90a"));
        assert_int_equal(cfg->bm, 64 * cfg->wg / cfg->wn);
        assert_int_equal(cfg->threads, 128 * cfg->wg);
        assert_int_equal(tf32 + bf16 + f16, 0);
        if (mode == TGC_CUDA_TPL_BF16X) /* no tf32 rounding left anywhere */
            assert_null(strstr(ptx, "cvt.rna.tf32.f32"));
    } else {
        assert_int_equal(tf32, mode == TGC_CUDA_TPL_TF32);
        assert_int_equal(bf16, mode == TGC_CUDA_TPL_BF16X || mode == TGC_CUDA_TPL_BF16);
        assert_int_equal(f16, mode == TGC_CUDA_TPL_F16);
    }
    assert_non_null(strstr(ptx, "cp.async"));
    if (mode == TGC_CUDA_TPL_SIMT)
        assert_non_null(strstr(ptx, "fma.rn.f32"));
}

static int32_t matmul_graph(tgc_graph *g, tgc_dtype dt, tgc_sdim m, tgc_sdim n, tgc_sdim k)
{
    tgc_sdim sa[2] = {m, k}, sb[2] = {k, n};
    int32_t a = gb_input(g, dt, 2, sa), b = gb_input(g, dt, 2, sb);
    int32_t o = gb_bin(g, TGC_OP_MATMUL, a, b);
    gb_outputs(g, &o, 1);
    return o;
}

static void matmul_every_precision_compiles_with_its_instruction(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    matmul_graph(g, TGC_F32, 4096, 4096, 4096);
    tk t;
    lower_tpl(g, &t);
    const tgc_matmul_precision precs[3] = {TGC_PRECISION_HIGHEST, TGC_PRECISION_HIGH,
                                           TGC_PRECISION_MEDIUM};
    const int modes[3] = {TGC_CUDA_TPL_SIMT, TGC_CUDA_TPL_TF32, TGC_CUDA_TPL_BF16X};
    for (int i = 0; i < 3; i++) {
        tgc_cuda_tpl cfg;
        char *src = NULL;
        char *ptx = render_compile(&t, precs[i], &cfg, &src);
        assert_int_equal(cfg.mode, modes[i]);
        assert_non_null(strstr(src, "extern \"C\" __global__ void __launch_bounds__"));
        assert_non_null(strstr(src, "G.K = 4096LL;"));
        assert_non_null(strstr(src, i == 0 ? "tgc_simt_comp<" : "tgc_tc_comp<"));
        check_mode_ptx(ptx, &cfg);
        free(ptx);
        free(src);
        /* 4096^3: no split; the tensor-core modes take 128 x 256 tiles of 64 x 64 warps */
        assert_int_equal(cfg.bn, i == 0 ? 128 : 256);
        tgc_gemm_geom geo;
        tgc_cuda_template_geom(t.k, g->syms, NULL, &geo);
        assert_int_equal(geo.M, 4096);
        assert_int_equal(geo.b_rs, 4096);
        unsigned grid[3], block[3], smem;
        size_t ws;
        tgc_cuda_template_launch(&cfg, t.k, &geo, 132, grid, block, &smem, &ws);
        assert_int_equal(grid[0], (4096 / cfg.bm) * (4096 / cfg.bn));
        assert_int_equal(grid[1], 1);
        assert_int_equal(grid[2], 1);
        assert_int_equal(block[0], (unsigned)cfg.threads);
        assert_int_equal(smem, cfg.smem_bytes);
        assert_true(smem <= 227u * 1024u);
        assert_int_equal(ws, 0);
        print_message("mode %d: %ux%ux%u tiles, %d threads, %d stages, %u B smem\n", cfg.mode,
                      cfg.bm, cfg.bn, cfg.bk, cfg.threads, cfg.stages, smem);
    }
    tk_free(&t);
    tgc_graph_free(g);
}

static void half_operands_use_their_own_mma(void **state)
{
    (void)state;
    const tgc_dtype dts[2] = {TGC_F16, TGC_BF16};
    for (int i = 0; i < 2; i++) {
        tgc_graph *g = tgc_graph_create();
        matmul_graph(g, dts[i], 1000, 520, 333); /* odd sizes: predicated edges */
        tk t;
        lower_tpl(g, &t);
        tgc_cuda_tpl cfg;
        char *ptx = render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, NULL);
        assert_int_equal(cfg.mode, i == 0 ? TGC_CUDA_TPL_F16 : TGC_CUDA_TPL_BF16);
        check_mode_ptx(ptx, &cfg);
        assert_int_equal(cfg.wg, 2); /* sm_90: both layouts (B MN-major) on wgmma */
        free(ptx);
        /* sm_80: mma.sync with ldmatrix */
        g_sm = 80;
        ptx = render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, NULL);
        g_sm = 90;
        assert_int_equal(cfg.wg, 0);
        check_mode_ptx(ptx, &cfg);
        if (ptx)
            assert_non_null(strstr(ptx, "ldmatrix"));
        free(ptx);
        tk_free(&t);
        tgc_graph_free(g);
    }
}

static void symbolic_sizes_are_read_from_the_geometry(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s = tgc_sym_new(g->syms, 128, 0, 0);
    tgc_sdim sx[3] = {8, s, 768}, sw[2] = {3072, 768};
    int32_t x = gb_input(g, TGC_F32, 3, sx), w = gb_input(g, TGC_F32, 2, sw);
    int32_t in[2] = {x, w};
    int32_t o = gb_op(g, TGC_OP_LINEAR, in, 2, NULL);
    gb_outputs(g, &o, 1);
    tk t;
    lower_tpl(g, &t);
    assert_false(TGC_SDIM_IS_CONST(t.k->tpl.M));
    for (int p = 0; p < 3; p++) {
        tgc_cuda_tpl cfg;
        char *src = NULL;
        char *ptx = render_compile(&t, (tgc_matmul_precision)p, &cfg, &src);
        assert_null(strstr(src, "G.M ="));            /* symbolic: from g */
        assert_non_null(strstr(src, "G.K = 768LL;")); /* constant: compiled in */
        free(ptx);
        free(src);
    }
    const int64_t vals[1] = {77};
    tgc_gemm_geom geo;
    tgc_cuda_template_geom(t.k, g->syms, vals, &geo);
    assert_int_equal(geo.M, 8 * 77);
    assert_int_equal(geo.N, 3072);
    assert_int_equal(geo.b_rs, 1);
    tk_free(&t);
    tgc_graph_free(g);
}

static void strided_and_batched_operands_compile(void **state)
{
    (void)state;
    /* A transposed (a_rs == 1) and a batched B^T (b_rs == 1): attention scores */
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sq[3] = {12, 64, 200}, sk[3] = {12, 200, 64};
    int32_t q = gb_input(g, TGC_F32, 3, sq), k = gb_input(g, TGC_F32, 3, sk);
    int32_t qt = gb_ints(g, TGC_OP_PERMUTE, q, (int64_t[]){0, 2, 1}, 3); /* [12, 200, 64] */
    int32_t kt = gb_ints(g, TGC_OP_PERMUTE, k, (int64_t[]){0, 2, 1}, 3); /* [12, 64, 200] */
    int32_t o = gb_bin(g, TGC_OP_MATMUL, qt, kt);
    gb_outputs(g, &o, 1);
    tk t;
    lower_tpl(g, &t);
    assert_int_equal(t.k->tpl.a_rs, 1);
    assert_int_equal(t.k->tpl.b_rs, 1);
    assert_int_equal(t.k->tpl.batch, 12);
    for (int p = 0; p < 3; p++) {
        tgc_cuda_tpl cfg;
        char *ptx = render_compile(&t, (tgc_matmul_precision)p, &cfg, NULL);
        free(ptx);
        tgc_gemm_geom geo;
        tgc_cuda_template_geom(t.k, g->syms, NULL, &geo);
        unsigned grid[3], block[3], smem;
        size_t ws;
        tgc_cuda_template_launch(&cfg, t.k, &geo, 132, grid, block, &smem, &ws);
        assert_int_equal(grid[2], 12);
    }
    tk_free(&t);
    tgc_graph_free(g);
}

static void skinny_shapes_split_k_with_a_workspace(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    matmul_graph(g, TGC_F32, 64, 10, 16384);
    tk t;
    lower_tpl(g, &t);
    for (int p = 0; p < 3; p++) {
        tgc_cuda_tpl cfg;
        char *ptx = render_compile(&t, (tgc_matmul_precision)p, &cfg, NULL);
        free(ptx);
        tgc_gemm_geom geo;
        tgc_cuda_template_geom(t.k, g->syms, NULL, &geo);
        unsigned grid[3], block[3], smem;
        size_t ws;
        tgc_cuda_template_launch(&cfg, t.k, &geo, 132, grid, block, &smem, &ws);
        assert_int_equal(grid[0], 1);
        assert_true(grid[1] >= 2 && grid[1] <= 16);
        size_t zero = tgc_cuda_template_ws_zero_bytes(&cfg, t.k, &geo, 132);
        assert_int_equal(zero, 256);
        assert_int_equal(ws, zero + (size_t)grid[1] * cfg.bm * cfg.bn * 4);
        if (p == TGC_PRECISION_HIGH)
            assert_int_equal(cfg.bm, 64);
    }
    tk_free(&t);
    tgc_graph_free(g);
}

static void conv_shapes_compile(void **state)
{
    (void)state;
    /* {n, c, h, w, o, kh, kw, stride, pad, dilation, groups} */
    const int64_t cases[][11] = {
        {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1}, /* ResNet basic block */
        {64, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1},  /* stem: K = 147 (no 16-byte rows) */
        {8, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2},  /* stride, dilation, groups */
        {4, 32, 9, 9, 32, 3, 3, 1, 1, 1, 32},   /* depthwise */
        {64, 256, 8, 8, 512, 1, 1, 2, 0, 1, 1}, /* 1x1 downsample */
    };
    for (int c = 0; c < N_OF(cases); c++) {
        const int64_t *p = cases[c];
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sx[4] = {p[0], p[1], p[2], p[3]}, sw[4] = {p[4], p[1] / p[10], p[5], p[6]};
        int32_t x = gb_input(g, TGC_F32, 4, sx), w = gb_input(g, TGC_F32, 4, sw);
        tgc_attrs a = {.ni = 7};
        const int64_t at[7] = {p[7], p[7], p[8], p[8], p[9], p[9], p[10]};
        memcpy(a.i, at, sizeof at);
        int32_t in[2] = {x, w};
        int32_t o = gb_op(g, TGC_OP_CONV2D, in, 2, &a);
        gb_outputs(g, &o, 1);
        tk t;
        lower_tpl(g, &t);
        assert_int_equal(t.k->kind, KIR_CONV);
        for (int pr = 0; pr < 3; pr++) {
            if (c > 1 && pr == 2)
                continue; /* keep the NVRTC time down: MEDIUM shares TF32's loaders */
            tgc_cuda_tpl cfg;
            char *src = NULL;
            char *ptx = render_compile(&t, (tgc_matmul_precision)pr, &cfg, &src);
            assert_non_null(strstr(src, "tgc_im2col<"));
            check_mode_ptx(ptx, &cfg);
            free(ptx);
            free(src);
            tgc_gemm_geom geo;
            tgc_cuda_template_geom(t.k, g->syms, NULL, &geo);
            unsigned grid[3], block[3], smem;
            size_t ws;
            tgc_cuda_template_launch(&cfg, t.k, &geo, 132, grid, block, &smem, &ws);
            int64_t oh = geo.oh, ow = geo.ow;
            int64_t tiles =
                (p[4] / p[10] + cfg.bm - 1) / cfg.bm * ((p[0] * oh * ow + cfg.bn - 1) / cfg.bn);
            assert_int_equal(grid[0], (unsigned)tiles);
            assert_int_equal(grid[2], (unsigned)p[10]);
        }
        tk_free(&t);
        tgc_graph_free(g);
    }
}

/* A conv graph (8 images of 16 x 16, 64 to 128 channels): x [n, h, w, c] (channels-last:
 * viewed as NCHW; x_cl 2: n and h symbolic) or [n, c, h, w]; w [o, kh, kw, c] (channels-last)
 * or [o, c, kh, kw]; 3x3, padding 1. Returns the conv node. */
static int32_t cl_conv_graph(tgc_graph *g, tgc_dtype dt, int x_cl, int w_cl)
{
    static const int64_t to_nchw[4] = {0, 3, 1, 2};
    tgc_sdim sx[4] = {8, 16, 16, 64}, sw[4] = {128, 3, 3, 64};
    if (x_cl == 2) /* batch and height symbolic */
        sx[0] = tgc_sym_new(g->syms, 8, 0, 0), sx[1] = tgc_sym_new(g->syms, 16, 0, 0);
    if (!x_cl)
        sx[1] = 64, sx[2] = 16, sx[3] = 16;
    if (!w_cl)
        sw[1] = 64, sw[2] = 3, sw[3] = 3;
    int32_t x = gb_input(g, dt, 4, sx), w = gb_input(g, dt, 4, sw);
    if (x_cl)
        x = gb_ints(g, TGC_OP_PERMUTE, x, to_nchw, 4);
    if (w_cl)
        w = gb_ints(g, TGC_OP_PERMUTE, w, to_nchw, 4);
    tgc_attrs a = {.ni = 7};
    const int64_t at[7] = {1, 1, 1, 1, 1, 1, 1};
    memcpy(a.i, at, sizeof at);
    int32_t in[2] = {x, w};
    int32_t o = gb_op(g, TGC_OP_CONV2D, in, 2, &a);
    gb_outputs(g, &o, 1);
    return o;
}

/* The conv node of g (the last one). */
static int32_t conv_node(const tgc_graph *g)
{
    for (int32_t i = g->n_nodes - 1; i >= 0; i--)
        if (g->nodes[i].op == TGC_OP_CONV2D)
            return i;
    fail_msg("no conv node");
    return -1;
}

static void channels_last_conv_reads_in_place(void **state)
{
    (void)state;
    const kir_target *cu = tgc_cuda_kir_target();
    kir_target plain = *cu; /* a target whose conv template reads NCHW only */
    plain.conv_channels_last = 0;
    /* both operands channels-last: the template reads them in place, in every mode */
    const struct {
        tgc_dtype dt;
        tgc_matmul_precision prec;
        int sm;
    } modes[] = {{TGC_F32, TGC_PRECISION_HIGHEST, 90}, {TGC_F32, TGC_PRECISION_HIGH, 90},
                 {TGC_F32, TGC_PRECISION_MEDIUM, 90},  {TGC_BF16, TGC_PRECISION_HIGHEST, 90},
                 {TGC_F32, TGC_PRECISION_HIGH, 80},    {TGC_F16, TGC_PRECISION_HIGHEST, 80}};
    for (int m = 0; m < N_OF(modes); m++) {
        tgc_graph *g = tgc_graph_create();
        int32_t c = cl_conv_graph(g, modes[m].dt, m == 1 ? 2 : 1, 1);
        assert_true(kir_template_ok(g, c, cu));
        assert_false(kir_template_ok(g, c, &plain));
        tk t;
        lower_tpl(g, &t);
        assert_int_equal(t.k->kind, KIR_CONV);
        assert_int_equal(t.k->tpl.cl, 1);
        g_sm = modes[m].sm;
        tgc_cuda_tpl cfg;
        char *src = NULL;
        char *ptx = render_compile(&t, modes[m].prec, &cfg, &src);
        g_sm = 90;
        assert_int_equal(cfg.cl, 1);
        assert_non_null(strstr(src, "tgc_im2col_cl<"));
        assert_null(strstr(src, "tgc_im2col<"));
        check_mode_ptx(ptx, &cfg);
        char desc[256];
        tgc_cuda_tpl_describe(&cfg, desc, sizeof desc);
        assert_non_null(strstr(desc, "conv channels-last "));
        free(ptx);
        free(src);
        tk_free(&t);
        tgc_graph_free(g);
    }
    /* channels-last x, contiguous w: the prepare pass gives w a channels-last copy on the
     * CUDA target (x stays in place), and x a contiguous copy on the other */
    for (int tg = 0; tg < 2; tg++) {
        tgc_graph *g = tgc_graph_create();
        int32_t c = cl_conv_graph(g, TGC_F32, 1, 0);
        assert_false(kir_template_ok(g, c, cu));
        assert_int_equal(tgc_prepare_template_operands(g, tg ? &plain : cu), TGC_OK);
        c = conv_node(g);
        assert_true(kir_template_ok(g, c, tg ? &plain : cu));
        int32_t base;
        assert_int_equal(kir_is_channels_last_view(g, g->nodes[c].in[0], &base), !tg);
        assert_int_equal(kir_is_channels_last_view(g, g->nodes[c].in[1], &base), !tg);
        if (!tg) /* the weights' copy is [o, kh, kw, c] */
            assert_int_equal(g->nodes[base].out.shape[3], 64);
        tk t;
        lower_tpl(g, &t);
        assert_int_equal(t.k->tpl.cl, !tg);
        tk_free(&t);
        tgc_graph_free(g);
    }
    /* contiguous x, channels-last w: w is copied contiguous; the template reads NCHW */
    tgc_graph *g = tgc_graph_create();
    int32_t c = cl_conv_graph(g, TGC_F32, 0, 1);
    assert_false(kir_template_ok(g, c, cu));
    assert_int_equal(tgc_prepare_template_operands(g, cu), TGC_OK);
    c = conv_node(g);
    assert_true(kir_template_ok(g, c, cu));
    tk t;
    lower_tpl(g, &t);
    assert_int_equal(t.k->tpl.cl, 0);
    tk_free(&t);
    tgc_graph_free(g);
}

/* Runs g on interp with args in (every input an argument); outputs in out. */
static void interp_graph(const tgc_graph *g, tgc_tensor **in, int n_in, tgc_tensor **out)
{
    int64_t symvals[1] = {0};
    tgc_exec_args a = {in, n_in, NULL, 0, NULL, 0, symvals};
    gb_run_interp(g, &a, out);
}

/* x -> conv1 (+bias) -> relu r -> conv2 -> + r = a -> max pool p -> conv3 -> output; r also a
 * graph output in variant 1 (then it stays NCHW); variant 2: the batch symbolic, bf16. 2
 * images of 16 channels, 9 x 9. */
static tgc_graph *cl_chain_graph(int variant, int32_t *r_out)
{
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[4] = {2, 16, 9, 9};
    const tgc_sdim sw[4] = {16, 16, 3, 3}, sb[1] = {16};
    const tgc_dtype dt = variant == 2 ? TGC_BF16 : TGC_F32;
    if (variant == 2)
        sx[0] = tgc_sym_new(g->syms, 2, 0, 0);
    int32_t x = gb_input(g, dt, 4, sx), w1 = gb_input(g, dt, 4, sw), b1 = gb_input(g, dt, 1, sb),
            w2 = gb_input(g, dt, 4, sw), w3 = gb_input(g, dt, 4, sw);
    tgc_attrs ca = {.ni = 7};
    const int64_t at[7] = {1, 1, 1, 1, 1, 1, 1};
    memcpy(ca.i, at, sizeof at);
    int32_t c1 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){x, w1, b1}, 3, &ca);
    int32_t r = gb_un(g, TGC_OP_RELU, c1);
    int32_t c2 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){r, w2}, 2, &ca);
    int32_t a = gb_bin(g, TGC_OP_ADD, c2, r);
    const int64_t pool[7] = {2, 2, 1, 1, 0, 0, 0};
    int32_t p = gb_ints(g, TGC_OP_MAX_POOL2D, a, pool, 7);
    int32_t c3 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){p, w3}, 2, &ca);
    gb_outputs(g, (int32_t[]){c3, r}, variant == 1 ? 2 : 1);
    *r_out = r;
    return g;
}

/* 1 when node i of g is the NHWC copy of value v (CONTIGUOUS over the NHWC permute). */
static int is_nhwc_copy_of(const tgc_graph *g, int32_t i, int32_t v)
{
    int32_t src;
    int64_t p[4];
    return tgc_permuted_copy_of(g, i, &src, p) && src == v && p[0] == 0 && p[1] == 2 && p[2] == 3 &&
           p[3] == 1;
}

static void activations_between_convs_are_channels_last(void **state)
{
    (void)state;
    const kir_target *cu = tgc_cuda_kir_target();
    int32_t r;
    tgc_graph *g = cl_chain_graph(0, &r), *before = tgc_graph_clone(g);
    assert_non_null(before);
    /* r (read by conv2 and the add) and p (by conv3) go NHWC; a (read by the pool alone),
     * conv1's x (a graph input) and conv3's result (the output) stay NCHW */
    int n = -1;
    assert_int_equal(tgc_prepare_channels_last(g, cu, &n), TGC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(tgc_prepare_template_operands(g, cu), TGC_OK);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    int32_t c1 = gb_find_op(g, TGC_OP_CONV2D, 0), c2 = gb_find_op(g, TGC_OP_CONV2D, 1),
            c3 = gb_find_op(g, TGC_OP_CONV2D, 2), pool = gb_find_op(g, TGC_OP_MAX_POOL2D, 0), base;
    assert_false(kir_is_channels_last_view(g, g->nodes[c1].in[0], &base));
    assert_true(kir_is_channels_last_view(g, g->nodes[c2].in[0], &base));
    assert_true(kir_is_channels_last_view(g, g->nodes[c3].in[0], &base));
    assert_false(kir_is_channels_last_view(g, g->nodes[pool].in[0], &base));
    for (int k = 0; k < 3; k++)
        assert_true(kir_template_ok(g, gb_find_op(g, TGC_OP_CONV2D, k), cu));
    /* the same values on interp (the rewrite only adds views and copies) */
    tgc_tensor *in[5], *want[1] = {0}, *got[1] = {0};
    const int64_t sx[4] = {2, 16, 9, 9}, sw[4] = {16, 16, 3, 3}, sb[1] = {16};
    tgc_manual_seed(40);
    for (int k = 0; k < 5; k++) {
        in[k] = tgc_randn(k == 0 ? sx : k == 2 ? sb : sw, k == 2 ? 1 : 4, TGC_F32, tgc_cpu());
        assert_non_null(in[k]);
    }
    interp_graph(before, in, 5, want);
    interp_graph(g, in, 5, got);
    float *pw = malloc(2 * 16 * 8 * 8 * sizeof *pw), *pg = malloc(2 * 16 * 8 * 8 * sizeof *pg);
    assert_int_equal(tgc_numel(got[0]), 2 * 16 * 8 * 8);
    assert_int_equal(tgc_copy_to_host(want[0], pw, 2 * 16 * 8 * 8 * sizeof *pw), TGC_OK);
    assert_int_equal(tgc_copy_to_host(got[0], pg, 2 * 16 * 8 * 8 * sizeof *pg), TGC_OK);
    for (int i = 0; i < 2 * 16 * 8 * 8; i++)
        assert_float_equal(pg[i], pw[i], 1e-5 * (1 + fabsf(pw[i])));
    free(pw);
    free(pg);
    for (int k = 0; k < 5; k++)
        tgc_tensor_free(in[k]);
    tgc_tensor_free(want[0]);
    tgc_tensor_free(got[0]);
    /* fusion: each NHWC copy is its producer's store (conv1's epilogue, the pool's loop), so
     * r and p get no buffer of their own */
    tgc_fusion f;
    assert_int_equal(tgc_pass_fuse(g, &cu_hooks, &f), TGC_OK);
    uint8_t *mat = kir_materialized(g, &f);
    assert_non_null(mat);
    int copies = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        int32_t src;
        if (!tgc_permuted_copy_of(g, i, &src, NULL))
            continue;
        assert_true(mat[i]);
        if (g->nodes[src].op == TGC_OP_INPUT) /* the OHWI copies of conv2's and conv3's weights */
            continue;
        copies++;
        assert_int_equal(f.group_of[i], f.group_of[src]);
        assert_false(mat[src]);
    }
    assert_int_equal(copies, 2);
    int n_cl_out = 0, n_loop_perm = 0;
    for (int gi = 0; gi < f.n_groups; gi++) {
        kir_kernel *k = NULL;
        if (kir_lower_group(g, &f, gi, mat, cu, &k) != TGC_OK)
            fail_msg("lower group %d: %s", gi, tgc_last_error());
        if (!k)
            continue;
        if (k->kind == KIR_CONV) {
            int32_t out = k->bufs[k->tpl.out].value;
            n_cl_out += k->tpl.out_cl;
            /* conv1 stores NHWC (its tip is r's copy); conv2 stores a, conv3 the output */
            assert_int_equal(k->tpl.out_cl, g->nodes[out].op == TGC_OP_CONTIGUOUS);
            assert_int_equal(k->tpl.cl, f.groups[gi].anchor != c1);
            tk t = {.k = k};
            kir_args_collect(k, &t.slots);
            tgc_cuda_tpl cfg;
            char *src = NULL;
            char *ptx = render_compile(&t, TGC_PRECISION_HIGH, &cfg, &src);
            assert_int_equal(cfg.out_cl, k->tpl.out_cl);
            assert_int_equal(strstr(src, "[v0 * c_bs + v2 * c_rs + v1]") != NULL, k->tpl.out_cl);
            char desc[256];
            tgc_cuda_tpl_describe(&cfg, desc, sizeof desc);
            assert_int_equal(strstr(desc, "channels-last out") != NULL ||
                                 strstr(desc, "channels-last in and out") != NULL,
                             k->tpl.out_cl);
            free(ptx);
            free(src);
            kir_args_free(&t.slots);
        } else if (k->kind == KIR_LOOP) {
            for (int s2 = 0; s2 < k->n_stores; s2++) {
                int32_t v = k->bufs[k->stores[s2].at.buf].value;
                if (!is_nhwc_copy_of(g, v, g->nodes[g->nodes[v].in[0]].in[0]))
                    continue;
                /* the pool's loop over its NCHW output stores [n, h, w, c]: some var walks
                 * the channels with stride 1, none the width with stride 1 */
                if (g->nodes[g->nodes[g->nodes[v].in[0]].in[0]].op == TGC_OP_INPUT)
                    continue; /* the weights' OHWI copies */
                n_loop_perm++;
                /* it renders and compiles as CUDA */
                tgc_strbuf sb = {0};
                kir_args ls = {0};
                tgc_cuda_launch launch;
                kir_args_collect(k, &ls);
                tgc_sb_puts(&sb, tgc_cuda_prelude());
                assert_int_equal(tgc_cuda_render_loop(&sb, k, &ls, "tgc_pool", &launch), TGC_OK);
                char *lsrc = tgc_sb_take(&sb), *cubin = NULL, *lptx = NULL;
                size_t nb = 0;
                if (tgc_nvrtc_load() == TGC_OK) {
                    if (tgc_nvrtc_compile("tgc_pool", lsrc, 90, &cubin, &nb, &lptx) != TGC_OK)
                        fail_msg("%s", tgc_last_error());
                    assert_true(nb > 0);
                } else {
                    g_skipped++;
                }
                free(cubin);
                free(lptx);
                free(lsrc);
                kir_args_free(&ls);
                int unit = 0;
                for (int d = 0; d < k->n_outer + k->n_inner; d++)
                    unit += TGC_SDIM_IS_CONST(k->stores[s2].at.stride[d]) &&
                            k->stores[s2].at.stride[d] == 1;
                assert_int_equal(unit, 1);
                assert_false(k->stores[s2].at.stride[k->n_outer + k->n_inner - 1] == 1);
            }
        }
        kir_kernel_free(k);
    }
    assert_int_equal(n_cl_out, 1);
    assert_int_equal(n_loop_perm, 1);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
    tgc_graph_free(before);
    /* r also an output: it stays NCHW (p still goes NHWC); the LLVM-like target (no
     * channels-last convs) changes nothing */
    g = cl_chain_graph(1, &r);
    assert_int_equal(tgc_prepare_channels_last(g, cu, &n), TGC_OK);
    assert_int_equal(n, 1);
    for (int32_t i = 0; i < g->n_nodes; i++)
        assert_false(is_nhwc_copy_of(g, i, r));
    tgc_graph_free(g);
    /* a symbolic batch, bf16: the same layout; each kernel compiles, conv1's storing NHWC */
    g = cl_chain_graph(2, &r);
    assert_int_equal(tgc_prepare_channels_last(g, cu, &n), TGC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(tgc_prepare_for_target(g, cu), TGC_OK); /* (a second pass adds nothing) */
    assert_int_equal(tgc_pass_fuse(g, &cu_hooks, &f), TGC_OK);
    mat = kir_materialized(g, &f);
    assert_non_null(mat);
    n_cl_out = 0;
    for (int gi = 0; gi < f.n_groups; gi++) {
        kir_kernel *k = NULL;
        if (kir_lower_group(g, &f, gi, mat, cu, &k) != TGC_OK)
            fail_msg("lower group %d: %s", gi, tgc_last_error());
        if (k && k->kind == KIR_CONV) {
            assert_false(TGC_SDIM_IS_CONST(k->tpl.cn));
            n_cl_out += k->tpl.out_cl;
            tk t = {.k = k};
            kir_args_collect(k, &t.slots);
            tgc_cuda_tpl cfg;
            free(render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, NULL));
            assert_int_equal(cfg.mode, TGC_CUDA_TPL_BF16);
            kir_args_free(&t.slots);
        }
        kir_kernel_free(k);
    }
    assert_int_equal(n_cl_out, 1);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
    /* tgc_prepare_for_target applies it only where tgc_prepare_channels_last_on says so
     * (TGC_CHANNELS_LAST; off when unset) */
    g = cl_chain_graph(0, &r);
    assert_int_equal(tgc_prepare_for_target(g, cu), TGC_OK);
    int nhwc = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        nhwc += is_nhwc_copy_of(g, i, r);
    assert_int_equal(nhwc, tgc_prepare_channels_last_on());
    tgc_graph_free(g);
    g = cl_chain_graph(0, &r);
    int before_nodes = g->n_nodes;
    assert_int_equal(tgc_prepare_channels_last(g, gb_target(), &n), TGC_OK);
    assert_int_equal(n, 0);
    assert_int_equal(g->n_nodes, before_nodes);
    tgc_graph_free(g);
}

/* A value read by a conv and by a conv's weight gradient (and a dy read by an input gradient
 * alone): NCHW by default; where the conv gradients read channels-last
 * (TGC_CHANNELS_LAST_GRAD=1: this test's _cl_grad run) both go NHWC and the gradients read
 * the views in place. */
static void values_read_by_conv_gradients(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    const tgc_sdim sx[4] = {2, 16, 9, 9}, sw[4] = {16, 16, 3, 3};
    int32_t x = gb_input(g, TGC_F32, 4, sx), w1 = gb_input(g, TGC_F32, 4, sw),
            w2 = gb_input(g, TGC_F32, 4, sw), dy = gb_input(g, TGC_F32, 4, sx);
    tgc_attrs ca = {.ni = 7};
    const int64_t at[7] = {1, 1, 1, 1, 1, 1, 1};
    memcpy(ca.i, at, sizeof at);
    int32_t c1 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){x, w1}, 2, &ca);
    int32_t r = gb_un(g, TGC_OP_RELU, c1);
    int32_t c2 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){r, w2}, 2, &ca);
    int32_t t = gb_un(g, TGC_OP_NEG, dy);
    tgc_attrs ga = tgc_attrs_of(TGC_OP_CONV2D_GRAD_WEIGHT);
    memcpy(ga.i, at, sizeof at);
    ga.i[7] = 3;
    ga.i[8] = 3;
    int32_t dw = gb_op(g, TGC_OP_CONV2D_GRAD_WEIGHT, (int32_t[]){r, t}, 2, &ga);
    tgc_attrs gi = tgc_attrs_of(TGC_OP_CONV2D_GRAD_INPUT);
    memcpy(gi.i, at, sizeof at);
    gi.i[7] = 9;
    gi.i[8] = 9;
    int32_t dx = gb_op(g, TGC_OP_CONV2D_GRAD_INPUT, (int32_t[]){t, w2}, 2, &gi);
    gb_outputs(g, (int32_t[]){c2, dw, dx}, 3);
    const int on = tgc_env_channels_last_grad();
    int n = -1;
    assert_int_equal(tgc_prepare_channels_last(g, tgc_cuda_kir_target(), &n), TGC_OK);
    assert_int_equal(n, on ? 2 : 0);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    int32_t base, wg = gb_find_op(g, TGC_OP_CONV2D_GRAD_WEIGHT, 0),
                  dg = gb_find_op(g, TGC_OP_CONV2D_GRAD_INPUT, 0);
    assert_int_equal(kir_is_channels_last_view(g, g->nodes[wg].in[0], &base), on);
    assert_int_equal(kir_is_channels_last_view(g, g->nodes[wg].in[1], &base), on);
    assert_int_equal(kir_is_channels_last_view(g, g->nodes[dg].in[0], &base), on);
    assert_int_equal(
        kir_is_channels_last_view(g, g->nodes[gb_find_op(g, TGC_OP_CONV2D, 1)].in[0], &base), on);
    tgc_graph_free(g);
    /* a target whose conv gradients read NCHW only keeps both NCHW either way */
    kir_target nchw_grads = *tgc_cuda_kir_target();
    nchw_grads.conv_grad_channels_last = 0;
    g = tgc_graph_create();
    x = gb_input(g, TGC_F32, 4, sx);
    w1 = gb_input(g, TGC_F32, 4, sw);
    w2 = gb_input(g, TGC_F32, 4, sw);
    dy = gb_input(g, TGC_F32, 4, sx);
    r = gb_un(g, TGC_OP_RELU, gb_op(g, TGC_OP_CONV2D, (int32_t[]){x, w1}, 2, &ca));
    c2 = gb_op(g, TGC_OP_CONV2D, (int32_t[]){r, w2}, 2, &ca);
    t = gb_un(g, TGC_OP_NEG, dy);
    dw = gb_op(g, TGC_OP_CONV2D_GRAD_WEIGHT, (int32_t[]){r, t}, 2, &ga);
    dx = gb_op(g, TGC_OP_CONV2D_GRAD_INPUT, (int32_t[]){t, w2}, 2, &gi);
    gb_outputs(g, (int32_t[]){c2, dw, dx}, 3);
    assert_int_equal(tgc_prepare_channels_last(g, &nchw_grads, &n), TGC_OK);
    assert_int_equal(n, 0);
    tgc_graph_free(g);
}

static void half_conv_compiles(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    cl_conv_graph(g, TGC_BF16, 0, 0);
    tk t;
    lower_tpl(g, &t);
    tgc_cuda_tpl cfg;
    char *ptx = render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, NULL);
    assert_int_equal(cfg.mode, TGC_CUDA_TPL_BF16);
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    tk_free(&t);
    tgc_graph_free(g);
}

static void fused_epilogues_compile(void **state)
{
    (void)state;
    /* linear + bias + relu (f32, every precision; bf16) */
    for (int dt = 0; dt < 2; dt++) {
        tgc_dtype d = dt ? TGC_BF16 : TGC_F32;
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sx[2] = {256, 768}, sw[2] = {3072, 768}, sb[1] = {3072};
        int32_t x = gb_input(g, d, 2, sx), w = gb_input(g, d, 2, sw), b = gb_input(g, d, 1, sb);
        int32_t in[3] = {x, w, b};
        int32_t o = gb_un(g, TGC_OP_RELU, gb_op(g, TGC_OP_LINEAR, in, 3, NULL));
        gb_outputs(g, &o, 1);
        tk t;
        lower_tpl(g, &t);
        assert_int_equal(t.k->vals[t.k->result].op, TGC_OP_RELU);
        for (int p = 0; p < (dt ? 1 : 3); p++) {
            tgc_cuda_tpl cfg;
            char *src = NULL;
            char *ptx = render_compile(&t, (tgc_matmul_precision)p, &cfg, &src);
            assert_null(strstr(src, "= acc;")); /* the epilogue's value is stored */
            free(ptx);
            free(src);
        }
        tk_free(&t);
        tgc_graph_free(g);
    }
    /* conv + bias + residual + relu, and a scaled f16 attention-score matmul */
    {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sx[4] = {8, 32, 16, 16}, sw[4] = {64, 32, 3, 3}, sb[1] = {64},
                 sr[4] = {8, 64, 16, 16};
        int32_t x = gb_input(g, TGC_F32, 4, sx), w = gb_input(g, TGC_F32, 4, sw);
        int32_t b = gb_input(g, TGC_F32, 1, sb), r = gb_input(g, TGC_F32, 4, sr);
        tgc_attrs a = {.ni = 7};
        const int64_t at[7] = {1, 1, 1, 1, 1, 1, 1};
        memcpy(a.i, at, sizeof at);
        int32_t in[3] = {x, w, b};
        int32_t c = gb_op(g, TGC_OP_CONV2D, in, 3, &a);
        int32_t o = gb_un(g, TGC_OP_RELU, gb_bin(g, TGC_OP_ADD, c, r));
        gb_outputs(g, &o, 1);
        tk t;
        lower_tpl(g, &t);
        assert_int_equal(t.k->n_loads, 2);
        tgc_cuda_tpl cfg;
        free(render_compile(&t, TGC_PRECISION_HIGH, &cfg, NULL));
        tk_free(&t);
        tgc_graph_free(g);
    }
    {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim sq[3] = {12, 128, 64}, sk[3] = {12, 128, 64};
        int32_t q = gb_input(g, TGC_F16, 3, sq), k = gb_input(g, TGC_F16, 3, sk);
        int32_t kt = gb_ints(g, TGC_OP_PERMUTE, k, (int64_t[]){0, 2, 1}, 3);
        int32_t o = gb_scalar(g, TGC_OP_MUL_SCALAR, gb_bin(g, TGC_OP_MATMUL, q, kt), 0.125);
        gb_outputs(g, &o, 1);
        tk t;
        lower_tpl(g, &t);
        tgc_cuda_tpl cfg;
        char *src = NULL;
        free(render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, &src));
        assert_int_equal(cfg.mode, TGC_CUDA_TPL_F16);
        free(src);
        tk_free(&t);
        tgc_graph_free(g);
    }
}

/* sm_90 takes wgmma where it has the operand layouts: tf32 with both operands K-major (a
 * linear layer's x @ W^T, conv's weights and im2col), f16 / bf16 with either; tf32 with an
 * MN-major operand keeps mma.sync. sm_80 keeps mma.sync for all. Forced wgmma tiles are
 * checked like the others. */
static void hopper_takes_wgmma_where_the_layouts_allow(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[2] = {1024, 768}, sw[2] = {2304, 768};
    int32_t x = gb_input(g, TGC_F32, 2, sx), w = gb_input(g, TGC_F32, 2, sw);
    int32_t in[2] = {x, w};
    int32_t o = gb_op(g, TGC_OP_LINEAR, in, 2, NULL);
    gb_outputs(g, &o, 1);
    tk t;
    lower_tpl(g, &t);
    tgc_cuda_tpl cfg;
    char *src = NULL;
    char *ptx = render_compile(&t, TGC_PRECISION_HIGH, &cfg, &src);
    assert_int_equal(cfg.mode, TGC_CUDA_TPL_TF32);
    assert_int_equal(cfg.wg, 2);
    assert_int_equal(cfg.bk, 32); /* one 128-byte row of fp32 per stage */
    assert_int_equal(cfg.smem_bytes, (unsigned)(cfg.stages * (cfg.bm + cfg.bn) * 128 + 1024));
    assert_non_null(strstr(src, "#define TGC_NEEDS_SM90A"));
    assert_non_null(strstr(src, "tgc_ld_sw<"));
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    free(src);
    /* the kernels log line: path, tile, warpgroups and the reason */
    char desc[256];
    tgc_cuda_tpl_describe(&cfg, desc, sizeof desc);
    assert_string_equal(desc, "GEMM TF32 wgmma 128x128x32, 2 warpgroups, 4 stages, 256 threads, "
                              "132096 B smem: 128 x 128 blocks; TMA warp-specialized 128x192x32, "
                              "5 stages, 205824 B smem");
    /* N = 2304 at M = 1024: one wave of 96 tiles of 128 x 192 (128 x 128: 144 tiles, two
     * waves on 132 SMs) */
    assert_int_equal(cfg.tma_bn, 192);
    /* HIGHEST (exact fp32) stays on SIMT */
    ptx = render_compile(&t, TGC_PRECISION_HIGHEST, &cfg, NULL);
    assert_int_equal(cfg.wg, 0);
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    assert_string_equal(cfg.why, "exact fp32 (HIGHEST): SIMT");
    /* MEDIUM (bf16 of fp32 operands) takes TF32's kernels, both entries, with its stages
     * rounded to bf16 */
    ptx = render_compile(&t, TGC_PRECISION_MEDIUM, &cfg, &src);
    assert_int_equal(cfg.mode, TGC_CUDA_TPL_BF16X);
    assert_int_equal(cfg.wg, 2);
    assert_int_equal(cfg.bk, 32);
    assert_int_equal(cfg.tma_bn, 192);
    assert_non_null(strstr(src, "tgc_wgmma_comp<2, 128, 128, 32, 2, 1, LA, LB, tgc_k_mma>"));
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    free(src);
    tgc_cuda_tpl_describe(&cfg, desc, sizeof desc);
    assert_non_null(strstr(desc, "GEMM bf16 of fp32 wgmma 128x128x32"));
    /* forced wgmma tiles */
    tgc_strbuf sb = {0};
    tgc_cuda_tpl want = {.bm = 64, .bn = 192, .bk = 64, .wg = 1, .stages = 3}, got;
    assert_int_equal(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &want, &got),
        TGC_OK);
    assert_int_equal(got.wg, 1);
    assert_int_equal(got.threads, 128);
    assert_string_equal(got.why, "a forced tile");
    assert_int_equal(got.bn, 192);
    assert_int_equal(got.smem_bytes, 3u * (64 + 192) * 64 * 4 + 1024);
    tgc_cuda_tpl bad = want;
    bad.bm = 128; /* not 64 per warpgroup */
    check_error(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &bad, &got),
        TGC_ERR_INVALID_ARG, "does not fit");
    bad = want;
    bad.bk = 16; /* 64 bytes: not a whole swizzled row */
    check_error(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &bad, &got),
        TGC_ERR_INVALID_ARG, "does not fit");
    check_error(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 80, &want, &got),
        TGC_ERR_INVALID_ARG, "no wgmma template");
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
    /* tf32 with B MN-major (x @ W, W [K, N]) keeps mma.sync, and says so by its config */
    g = tgc_graph_create();
    matmul_graph(g, TGC_F32, 512, 512, 512);
    lower_tpl(g, &t);
    ptx = render_compile(&t, TGC_PRECISION_HIGH, &cfg, NULL);
    assert_int_equal(cfg.wg, 0);
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    assert_string_equal(cfg.why, "TF32 with an MN-major operand: mma.sync");
    /* MEDIUM likewise, and alone: its bf16 mma.sync beats the TMA entry's rewrite of B into
     * tf32 stages */
    ptx = render_compile(&t, TGC_PRECISION_MEDIUM, &cfg, NULL);
    assert_int_equal(cfg.wg, 0);
    assert_int_equal(cfg.tma_bn, 0);
    check_mode_ptx(ptx, &cfg);
    free(ptx);
    assert_string_equal(cfg.why,
                        "bf16 of fp32 operands (MEDIUM) with an MN-major operand: mma.sync");
    check_error(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &want, &got),
        TGC_ERR_INVALID_ARG, "no wgmma template");
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
    /* at most 64 rows, or a small problem (under 32 blocks of 128 rows): one 64-row slab,
     * two warpgroups side by side along N (f16 with B MN-major, then tf32 K-major, then f16
     * 256 x 256); forced ones too, bm = 64 wg / wn */
    for (int d = 0; d < 3; d++) {
        g = tgc_graph_create();
        if (d != 1) {
            matmul_graph(g, TGC_F16, d ? 256 : 64, d ? 256 : 1024, 512);
        } else {
            tgc_sdim sx2[2] = {48, 768}, sw2[2] = {2048, 768};
            int32_t in2[2] = {gb_input(g, TGC_F32, 2, sx2), gb_input(g, TGC_F32, 2, sw2)};
            int32_t o2 = gb_op(g, TGC_OP_LINEAR, in2, 2, NULL);
            gb_outputs(g, &o2, 1);
        }
        lower_tpl(g, &t);
        ptx = render_compile(&t, TGC_PRECISION_HIGH, &cfg, NULL);
        assert_int_equal(cfg.wg, 2);
        assert_int_equal(cfg.wn, 2);
        assert_int_equal(cfg.bm, 64);
        assert_int_equal(cfg.bn, 128);
        check_mode_ptx(ptx, &cfg);
        free(ptx);
        assert_string_equal(cfg.why, d == 2 ? "a small problem (under 32 blocks of 128 rows)"
                                            : "at most 64 rows");
        char dd[256];
        tgc_cuda_tpl_describe(&cfg, dd, sizeof dd);
        assert_non_null(strstr(dd, "wgmma 64x128x"));
        assert_non_null(strstr(dd, "2 warpgroups along N"));
        tgc_cuda_tpl w2 = {
            .bm = 64, .bn = 256, .bk = d == 1 ? 32 : 64, .wg = 2, .wn = 2, .stages = 4};
        assert_int_equal(tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH,
                                                       90, &w2, &got),
                         TGC_OK);
        assert_int_equal(got.wn, 2);
        assert_int_equal(got.threads, 256);
        tgc_cuda_tpl bad2 = w2;
        bad2.bm = 128; /* two warpgroups along N: one 64-row slab */
        check_error(tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90,
                                                  &bad2, &got),
                    TGC_ERR_INVALID_ARG, "does not fit");
        tgc_sb_free(&sb);
        tk_free(&t);
        tgc_graph_free(g);
    }
}

/* [4096, 4096] bf16 @ [4096, 4096], lowered into t; the graph (caller frees). */
static tgc_graph *lower_bf16_mm(tk *t)
{
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sa[2] = {4096, 4096};
    int32_t in[2] = {gb_input(g, TGC_BF16, 2, sa), gb_input(g, TGC_BF16, 2, sa)};
    int32_t o = gb_op(g, TGC_OP_MATMUL, in, 2, NULL);
    gb_outputs(g, &o, 1);
    lower_tpl(g, t);
    return g;
}

/* A 16-bit or TF32 GEMM whose operands are contiguous along k or m / n gets the warp-specialized
 * TMA entry beside the wgmma kernel (TMA loads completing mbarrier transactions, registers
 * moved to the consumers); the launch takes it only for calls TMA can address. */
static void hopper_gemm_has_a_tma_entry(void **state)
{
    (void)state;
    /* [4096, 4096] bf16 @ [4096, 4096]: B MN-major (stride 1 along n) */
    tk t;
    tgc_graph *g = lower_bf16_mm(&t);
    tgc_cuda_tpl cfg;
    char *src = NULL;
    char *ptx = render_compile(&t, TGC_PRECISION_HIGH, &cfg, &src);
    assert_int_equal(cfg.mode, TGC_CUDA_TPL_BF16);
    assert_int_equal(cfg.tma_bn, 256); /* a large problem */
    assert_int_equal(cfg.tma_stages, 4);
    assert_int_equal(cfg.tma_al, 0);
    assert_int_equal(cfg.tma_bl, 1);
    assert_int_equal(cfg.tma_smem, 4u * (128 + 256) * 128 + 1024);
    assert_non_null(strstr(src, "void __launch_bounds__(384, 1) tgc_k_tma("));
    if (ptx) {
        assert_non_null(strstr(ptx, ".entry tgc_k_tma("));
        assert_non_null(strstr(ptx, "cp.async.bulk.tensor.3d.shared::cluster.global"));
        assert_non_null(strstr(ptx, "mbarrier.try_wait.parity.shared::cta.b64"));
        assert_non_null(strstr(ptx, "mbarrier.arrive.expect_tx.shared::cta.b64"));
        assert_non_null(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 232"));
        assert_non_null(strstr(ptx, "setmaxnreg.dec.sync.aligned.u32 40"));
        assert_non_null(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
        assert_non_null(strstr(ptx, "bar.sync 1, 256;")); /* split-K: the consumers' barrier */
    }
    free(ptx);
    free(src);
    /* the launch: maps of A (K-major: 128-byte boxes of 128 rows) and B (MN-major: 64
     * columns by 64 k rows), a block per SM */
    tgc_gemm_geom geo;
    tgc_cuda_template_geom(t.k, g->syms, NULL, &geo);
    void *bufs[4] = {0};
    bufs[t.k->tpl.a] = (void *)(uintptr_t)0x10000;
    bufs[t.k->tpl.b] = (void *)(uintptr_t)0x200000;
    bufs[t.k->tpl.out] = (void *)(uintptr_t)0x4000000;
    tgc_cuda_tma_launch tl;
    const tgc_cuda_tmap_desc *md = tl.maps;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &geo, bufs, 132, &tl), 1);
    assert_int_equal(tl.grid[0], 132); /* 32 x 16 tiles, persistent */
    assert_int_equal(tl.block[0], 384);
    assert_int_equal(tl.smem, cfg.tma_smem);
    assert_int_equal(tl.splits, 1);
    assert_int_equal(tl.ws_bytes, 0);
    assert_int_equal(tl.ws_zero_bytes, 0);
    assert_int_equal(md[0].dtype, TGC_BF16);
    assert_int_equal(md[0].dims[0], 4096); /* k */
    assert_int_equal(md[0].dims[1], 4096); /* m */
    assert_int_equal(md[0].dims[2], 1);
    assert_int_equal(md[0].strides[0], 4096 * 2);
    assert_int_equal(md[0].box[0], 64);
    assert_int_equal(md[0].box[1], 128);
    assert_ptr_equal(md[1].base, bufs[t.k->tpl.b]);
    assert_int_equal(md[1].box[0], 64); /* n */
    assert_int_equal(md[1].box[1], 64); /* k */
    /* fewer tiles than SMs (and too short a k to split): one block per tile */
    tgc_gemm_geom small = geo;
    small.M = small.N = 512;
    small.K = 256;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &small, bufs, 132, &tl), 1);
    assert_int_equal(tl.grid[0], 4 * 2);
    assert_int_equal(tl.splits, 1);
    /* fewer tiles than SMs over a long k: split-K, the partials of 128 x 256 tiles in the
     * workspace after the tile counters. 1024 x 768 x 768 (BERT's projections): 24 tiles of
     * 12 k tiles in 2 splits (3 splits cost as much: a unit of 4 k tiles, but one more
     * partial read back) */
    small.M = 1024;
    small.N = small.K = 768;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &small, bufs, 132, &tl), 1);
    assert_int_equal(tl.splits, 2);
    assert_int_equal(tl.grid[0], 48);
    assert_int_equal(tl.ws_zero_bytes, 256);
    assert_int_equal(tl.ws_bytes, 256 + 48u * 128 * 256 * 4);
    /* one tile of k 4096 (64 k tiles): 5 splits, where 13 k tiles a unit and 4 partials
     * read back cost least */
    small.M = small.N = 128;
    small.K = 4096;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &small, bufs, 132, &tl), 1);
    assert_int_equal(tl.splits, 5);
    assert_int_equal(tl.grid[0], 5);
    /* a full wave of tiles is never split */
    small.M = 128 * 33;
    small.N = 1024;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &small, bufs, 132, &tl), 1);
    assert_int_equal(tl.splits, 1);
    assert_int_equal(tl.grid[0], 132);
    /* what TMA cannot address keeps the wgmma kernel: a base off 16 bytes, a row stride of
     * 2 bytes short of 16-byte multiples, sizes of 2^31, an empty problem */
    void *mis[4];
    memcpy(mis, bufs, sizeof mis);
    mis[t.k->tpl.a] = (void *)(uintptr_t)0x10008;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &geo, mis, 132, &tl), 0);
    tgc_gemm_geom odd = geo;
    odd.a_rs = 4095;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &odd, bufs, 132, &tl), 0);
    odd = geo;
    odd.K = 1LL << 31;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &odd, bufs, 132, &tl), 0);
    odd = geo;
    odd.M = 0;
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &odd, bufs, 132, &tl), 0);
    /* forced TMA tiles; a TMA tile where there is no TMA entry is refused */
    tgc_strbuf sb = {0};
    tgc_cuda_tpl want = {.wg = 2,
                         .bm = 128,
                         .bn = 128,
                         .bk = 64,
                         .stages = 4,
                         .tma_bn = 128,
                         .tma_stages = 5},
                 got;
    assert_int_equal(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &want, &got),
        TGC_OK);
    assert_int_equal(got.tma_bn, 128);
    assert_int_equal(got.tma_stages, 5);
    want.tma_stages = 6;
    want.tma_bn = 256; /* 6 x 48 KiB: more than 227 KiB */
    check_error(
        tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &want, &got),
        TGC_ERR_INVALID_ARG, "does not fit");
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
    /* sm_80: no TMA entry */
    g = lower_bf16_mm(&t);
    sb = (tgc_strbuf){0};
    assert_int_equal(
        tgc_cuda_render_template(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 80, &cfg), TGC_OK);
    assert_int_equal(cfg.tma_bn, 0);
    assert_null(strstr(sb.data, "k_tma("));
    assert_int_equal(tgc_cuda_template_tma(&cfg, t.k, &geo, bufs, 132, &tl), 0);
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
}

/* The tensor-map encoder: element types it has none for, no driver, and with a driver (a GPU
 * machine) a valid map and one the driver refuses (a row stride off 16 bytes). */
static void tensor_maps_encode_or_say_why(void **state)
{
    (void)state;
    _Alignas(64) unsigned char map[128];
    static _Alignas(256) uint16_t data[64 * 128];
    tgc_cuda_tmap_desc d = {.dtype = TGC_I32,
                            .base = data,
                            .dims = {64, 128, 1},
                            .strides = {128, 128 * 128},
                            .box = {64, 64}};
    check_error(tgc_cuda_tmap_encode(&d, map), TGC_ERR_INVALID_ARG, "no tensor map for i32");
    /* a kernel's map cache keeps only what the driver encoded */
    tgc_cuda_tmap_cache *c = malloc(sizeof *c);
    assert_non_null(c);
    tgc_cuda_tmap_cache_init(c);
    check_error(tgc_cuda_tmap_get(c, &d, map), TGC_ERR_INVALID_ARG, "no tensor map for i32");
    d.dtype = TGC_BF16;
    if (tgc_cuda_load() != TGC_OK) {
        check_error(tgc_cuda_tmap_encode(&d, map), TGC_ERR_DEVICE, "needs the CUDA driver");
        check_error(tgc_cuda_tmap_get(c, &d, map), TGC_ERR_DEVICE, "needs the CUDA driver");
        assert_int_equal(c->encodes, 0);
        assert_int_equal(c->hits, 0);
        tgc_cuda_tmap_cache_destroy(c);
        free(c);
        return;
    }
    /* the driver encodes maps only with a context current (the backend's launches have one) */
    if (tgc_cuda_enter(0) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    if (tgc_cuda_tmap_encode(&d, map) != TGC_OK)
        fail_msg("a valid map was refused: %s", tgc_last_error());
    /* the cache: the first get encodes, an equal description is a hit with the same bytes,
     * another base is a new entry; more descriptions than entries replace the oldest */
    _Alignas(64) unsigned char m1[128], m2[128];
    assert_int_equal(tgc_cuda_tmap_get(c, &d, m1), TGC_OK);
    assert_memory_equal(m1, map, 128);
    assert_int_equal(tgc_cuda_tmap_get(c, &d, m2), TGC_OK);
    assert_memory_equal(m2, map, 128);
    assert_int_equal(c->encodes, 1);
    assert_int_equal(c->hits, 1);
    tgc_cuda_tmap_desc d2 = d;
    d2.dims[1] = 64;
    assert_int_equal(tgc_cuda_tmap_get(c, &d2, m2), TGC_OK);
    assert_int_equal(c->encodes, 2);
    assert_int_equal(tgc_cuda_tmap_encode(&d2, m1), TGC_OK);
    assert_memory_equal(m1, m2, 128);
    for (int i = 0; i < TGC_CUDA_TMAP_CACHE; i++) {
        d2.dims[2] = 2 + (uint64_t)i;
        assert_int_equal(tgc_cuda_tmap_get(c, &d2, m2), TGC_OK);
    }
    assert_int_equal(tgc_cuda_tmap_get(c, &d, m2), TGC_OK); /* replaced: encoded again */
    assert_int_equal(c->encodes, 3 + TGC_CUDA_TMAP_CACHE);
    assert_int_equal(c->hits, 1);
    d.strides[0] = 120;
    check_error(tgc_cuda_tmap_encode(&d, map), TGC_ERR_INVALID_ARG, "refused");
    check_error(tgc_cuda_tmap_get(c, &d, map), TGC_ERR_INVALID_ARG, "refused");
    assert_int_equal(c->encodes, 3 + TGC_CUDA_TMAP_CACHE);
    tgc_cuda_tmap_cache_destroy(c);
    free(c);
}

/* Autotuning's candidates render (those the templates refuse are dropped by the backend, and
 * are few), FAST's are a subset of FULL's, OFF keeps the heuristic alone; the remembered form
 * reads back and refuses what is not one; a choice remembered under a key is recalled from
 * memory and written to the cache directory, another key's is not. */
static void autotune_candidates_and_choices(void **state)
{
    (void)state;
    static const struct {
        tgc_dtype dt;
        tgc_matmul_precision prec;
        int sm;
    } kinds[] = {{TGC_BF16, TGC_PRECISION_HIGH, 90},
                 {TGC_F32, TGC_PRECISION_HIGHEST, 90},
                 {TGC_F32, TGC_PRECISION_HIGH, 90},
                 {TGC_F16, TGC_PRECISION_HIGH, 80}};
    for (size_t q = 0; q < sizeof kinds / sizeof *kinds; q++) {
        tgc_graph *g = tgc_graph_create();
        matmul_graph(g, kinds[q].dt, 2048, 1024, 512);
        tk t;
        lower_tpl(g, &t);
        tgc_strbuf sb = {0};
        tgc_cuda_tpl chosen, got;
        assert_int_equal(
            tgc_cuda_render_template(&sb, t.k, &t.slots, "k", kinds[q].prec, kinds[q].sm, &chosen),
            TGC_OK);
        tgc_cuda_tune_cand fast[TGC_CUDA_TUNE_MAX], full[TGC_CUDA_TUNE_MAX];
        assert_int_equal(tgc_cuda_tune_candidates(&chosen, TGC_AUTOTUNE_OFF, fast, 1), 1);
        int nf = tgc_cuda_tune_candidates(&chosen, TGC_AUTOTUNE_FAST, fast, TGC_CUDA_TUNE_MAX);
        int nu = tgc_cuda_tune_candidates(&chosen, TGC_AUTOTUNE_FULL, full, TGC_CUDA_TUNE_MAX);
        assert_true(nf >= 4);
        assert_true(nu > nf);
        assert_int_equal(fast[0].tma, chosen.tma_bn != 0);
        assert_int_equal(fast[0].force.bm, chosen.bm);
        assert_int_equal(fast[0].force.stages, chosen.stages);
        int ok = 0;
        for (int i = 1; i < nf; i++) {
            sb.len = 0;
            if (tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", kinds[q].prec, kinds[q].sm,
                                              &fast[i].force, &got) != TGC_OK) {
                tgc_clear_error();
                continue;
            }
            ok++;
            assert_int_equal(got.bm, fast[i].force.bm); /* the forced tile, as asked */
            assert_int_equal(got.bn, fast[i].force.bn);
            assert_int_equal(got.stages, fast[i].force.stages);
            if (fast[i].force.tma_bn)
                assert_int_equal(got.tma_bn, fast[i].force.tma_bn);
            int in_full = 0;
            for (int j = 0; j < nu; j++)
                in_full |= !memcmp(&full[j].force, &fast[i].force, sizeof full[j].force) &&
                           full[j].tma == fast[i].tma;
            assert_true(in_full);
        }
        assert_true(ok * 3 >= (nf - 1) * 2); /* at most a third refused */
        tgc_sb_free(&sb);
        tk_free(&t);
        tgc_graph_free(g);
    }

    /* the remembered form */
    tgc_cuda_tune_cand c = {.force = {.bm = 128,
                                      .bn = 256,
                                      .bk = 64,
                                      .wg = 2,
                                      .wn = 1,
                                      .stages = 4,
                                      .tma_bn = 192},
                            .tma = 1},
                       r;
    char line[96];
    tgc_cuda_tune_format(&c, line, sizeof line);
    assert_string_equal(line, "128 256 64 2 0 1 4 192 0 1");
    assert_int_equal(tgc_cuda_tune_parse(line, strlen(line), &r), 1);
    assert_memory_equal(&r.force, &c.force, sizeof c.force);
    assert_int_equal(r.tma, 1);
    static const char *const bad[] = {"", "128 256 64", "128 256 64 2 0 1 4 192 0 1 7",
                                      "128 256 64 2 0 1 4 192 0 1x", "-1 256 64 2 0 1 4 0 0 0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(tgc_cuda_tune_parse(bad[i], strlen(bad[i]), &r), 0);

    /* remembered and recalled by key; the cache directory gets the choice */
    char dir[] = "/tmp/tgc-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *k1 = tgc_cuda_tune_key("program one", 90, 0, TGC_AUTOTUNE_FAST);
    char *k2 = tgc_cuda_tune_key("program one", 90, 0, TGC_AUTOTUNE_FULL);
    assert_non_null(k1);
    assert_non_null(k2);
    assert_non_null(strstr(k1, "tgc-cuda-tune 1\nlevel 1\n"));
    assert_non_null(strstr(k1, "program one"));
    assert_int_equal(tgc_cuda_tune_recall(k1, dir, &r), 0);
    tgc_cuda_tune_remember(k1, dir, &c);
    memset(&r, 0, sizeof r);
    assert_int_equal(tgc_cuda_tune_recall(k1, NULL, &r), 1);
    assert_memory_equal(&r.force, &c.force, sizeof c.force);
    assert_int_equal(tgc_cuda_tune_recall(k2, dir, &r), 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s | grep -c '^tgc-cuda-sm90-.*\\.tune$')\" = 1", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(k1);
    free(k2);
}

static void forced_tiles_are_checked(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    matmul_graph(g, TGC_BF16, 4096, 4096, 4096);
    tk t;
    lower_tpl(g, &t);
    tgc_strbuf sb = {0};
    tgc_cuda_tpl cfg, want = {.bm = 128, .bn = 256, .bk = 32, .wm = 2, .wn = 4, .stages = 4};
    assert_int_equal(tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGHEST,
                                                   90, &want, &cfg),
                     TGC_OK);
    assert_int_equal(cfg.bn, 256);
    assert_int_equal(cfg.threads, 256);
    assert_int_equal(cfg.smem_bytes, 4u * (128 * 40 + 32 * 264) * 2);
    tgc_cuda_tpl bad = want;
    bad.bn = 40; /* not a multiple of 16 per warp */
    check_error(tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGHEST, 90,
                                              &bad, &cfg),
                TGC_ERR_INVALID_ARG, "does not fit");
    bad = want;
    bad.bm = 256;
    bad.stages = 8; /* 8 x 37 KiB of shared memory */
    check_error(tgc_cuda_render_template_tile(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGHEST, 90,
                                              &bad, &cfg),
                TGC_ERR_INVALID_ARG, "does not fit");
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
}

static void unsupported_dtype_and_arch_are_errors(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    matmul_graph(g, TGC_F32, 16, 16, 16);
    tk t;
    lower_tpl(g, &t);
    tgc_strbuf sb = {0};
    tgc_cuda_tpl cfg;
    check_error(tgc_cuda_render_template(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 75, &cfg),
                TGC_ERR_UNSUPPORTED, "sm_80");
    t.k->tpl.dtype = TGC_F64;
    check_error(tgc_cuda_render_template(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGH, 90, &cfg),
                TGC_ERR_UNSUPPORTED, "f64 operands");
    t.k->tpl.dtype = TGC_F32;
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
}

/* The embedded library is the checked-in cuda_gemm_lib.cuh: every rendered template starts
 * with it (the build embeds it). */
static void embedded_library_matches_its_source(void **state)
{
    (void)state;
    char path[1024];
    const char *me = __FILE__, *cut = strstr(me, "tests/unit/test_cuda_gemm.c");
    if (!cut)
        skip();
    snprintf(path, sizeof path, "%.*ssrc/backend/cuda/cuda_gemm_lib.cuh", (int)(cut - me), me);
    FILE *f = fopen(path, "rb");
    if (!f)
        skip();
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *want = malloc((size_t)n + 1);
    assert_int_equal(fread(want, 1, (size_t)n, f), (size_t)n);
    want[n] = 0;
    fclose(f);
    tgc_graph *g = tgc_graph_create();
    matmul_graph(g, TGC_F32, 8, 8, 8);
    tk t;
    lower_tpl(g, &t);
    tgc_strbuf sb = {0};
    tgc_cuda_tpl cfg;
    assert_int_equal(
        tgc_cuda_render_template(&sb, t.k, &t.slots, "k", TGC_PRECISION_HIGHEST, 90, &cfg), TGC_OK);
    if (strncmp(sb.data, want, (size_t)n) != 0)
        fail_msg("the embedded cuda_gemm_lib.cuh is stale: rebuild");
    free(want);
    tgc_sb_free(&sb);
    tk_free(&t);
    tgc_graph_free(g);
}

static int report_skips(void **state)
{
    (void)state;
    if (g_skipped)
        printf("[  SKIPPED ] %d NVRTC compiles: libnvrtc not found\n", g_skipped);
    return group_shutdown(state);
}

int main(void)
{
    setenv("TGC_CUDA_TMA", "1", 1); /* the TMA entry, whatever the library's default */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(matmul_every_precision_compiles_with_its_instruction,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(half_operands_use_their_own_mma, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(symbolic_sizes_are_read_from_the_geometry, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(strided_and_batched_operands_compile, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(skinny_shapes_split_k_with_a_workspace, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(conv_shapes_compile, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(half_conv_compiles, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(channels_last_conv_reads_in_place, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(activations_between_convs_are_channels_last, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(values_read_by_conv_gradients, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(fused_epilogues_compile, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(hopper_takes_wgmma_where_the_layouts_allow, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(hopper_gemm_has_a_tma_entry, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(tensor_maps_encode_or_say_why, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(forced_tiles_are_checked, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(autotune_candidates_and_choices, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(embedded_library_matches_its_source, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(unsupported_dtype_and_arch_are_errors, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, report_skips);
}

#else /* no CUDA toolkit: nothing to test */

static void cuda_backend_not_built(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(cuda_backend_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
