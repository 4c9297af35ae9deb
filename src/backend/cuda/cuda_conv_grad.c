/* Fast f32 conv2d backward on the GPU (see cuda_conv_grad.h): the program texts (the GEMM
 * library, the conv-grad library and one wrapper per entry point instantiating them with a
 * tile configuration), their kernels on each device (through the program cache) and the
 * launches. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_conv_grad.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_program.h"
#include "runtime/cuda.h"
#include "runtime/storage.h"
#include "support/error.h"
#include "support/strbuf.h"

#include "backend/cuda/cuda_conv_grad_lib.cuh.h"

#define CG_MODES    3 /* SIMT, TF32, BF16X */
#define CG_VARIANTS 4 /* mma.sync / SIMT 128 and 64 rows; TF32 wgmma (sm_90) 128 and 64 rows */
#define CG_ENTRIES  5

/* dgrad, wgrad, the weight packing, then the channels-last dgrad and wgrad (x and dy NHWC) */
static const char *const entry_names[CG_ENTRIES] = {"tgc_cg_dgrad", "tgc_cg_wgrad", "tgc_cg_pack",
                                                    "tgc_cg_dgrad_cl", "tgc_cg_wgrad_cl"};

/* the entry of op (0 dgrad, 1 wgrad) over NCHW (cl 0) or channels-last operands */
static int entry_of(int wgrad, int cl)
{
    return cl ? 3 + wgrad : wgrad;
}

/* The tile of a (mode, variant): block tile, warps (mma.sync) or warpgroups and how many of
 * them side by side along N (wgmma: wg > 0), stages, threads. */
typedef struct cg_tile {
    int bm, bn, bk, wm, wn, wg, wgn, st, nt;
} cg_tile;

static int tile_of(int mode, int variant, cg_tile *t)
{
    if (mode < 0 || mode >= CG_MODES || variant < 0 || variant >= CG_VARIANTS ||
        (mode == TGC_CUDA_TPL_SIMT && variant) || (mode != TGC_CUDA_TPL_TF32 && variant > 1))
        return 0;
    if (mode == TGC_CUDA_TPL_SIMT)
        *t = (cg_tile){128, 128, 8, 0, 0, 0, 0, 4, 256};
    else if (variant == 0)
        *t = (cg_tile){128, 128, 32, 2, 4, 0, 0, 3, 256};
    else if (variant == 1)
        *t = (cg_tile){64, 128, 32, 1, 4, 0, 0, 3, 128};
    else if (variant == 2) /* two warpgroups along M, 64 x 128 each */
        *t = (cg_tile){128, 128, 32, 0, 0, 2, 1, 4, 256};
    else /* one 64-row slab, two warpgroups side by side along N */
        *t = (cg_tile){64, 128, 32, 0, 0, 2, 2, 4, 256};
    return 1;
}

/* shared-memory floats of one stage: A then B, as the library's SIZE constants (cl: the
 * channels-last entries' loaders: dgrad's B K-major, wgrad's A and B MN-major) */
static void stage_sizes(int mode, const cg_tile *t, int wgrad, int cl, int *sa, int *sb)
{
    const int simt = mode == TGC_CUDA_TPL_SIMT, pad = simt ? 4 : 8;
    if (t->wg) { /* swizzled, no pads */
        *sa = t->bm * t->bk;
        *sb = t->bn * t->bk;
    } else if (cl && !wgrad) {
        *sa = simt ? t->bk * (t->bm + 4) : t->bm * (t->bk + 4);
        *sb = simt ? t->bk * (t->bn + 4) : t->bn * (t->bk + 4);
    } else if (cl) {
        *sa = t->bk * (t->bm + pad);
        *sb = t->bk * (t->bn + pad);
    } else if (!wgrad) {
        *sa = simt ? t->bk * (t->bm + 4) : t->bm * (t->bk + 4);
        *sb = t->bk * (t->bn + (simt ? 4 : 8));
    } else {
        *sa = simt ? t->bk * (t->bm + 4) : t->bm * (t->bk + 4);
        *sb = simt ? t->bk * (t->bn + 4) : t->bn * (t->bk + 4);
    }
}

static unsigned smem_of(int mode, const cg_tile *t, int wgrad, int cl)
{
    int sa, sb;
    stage_sizes(mode, t, wgrad, cl, &sa, &sb);
    /* wgmma: plus the slack that aligns the stages to 1024 bytes */
    return (unsigned)(t->st * (sa + sb) * 4 + (t->wg ? 1024 : 0));
}

void tgc_cuda_conv_grad_config(int mode, int variant, int cl, int *threads, unsigned *smem_dgrad,
                               unsigned *smem_wgrad)
{
    cg_tile t;
    if (!tile_of(mode, variant, &t)) {
        *threads = 0;
        *smem_dgrad = *smem_wgrad = 0;
        return;
    }
    *threads = t.nt;
    *smem_dgrad = smem_of(mode, &t, 0, cl);
    *smem_wgrad = t.wg && cl ? 0 : smem_of(mode, &t, 1, cl);
}

/* which: 1 the dgrad entries, 2 the wgrad entries, 3 both (tgc_cg_pack is in the library); each
 * over NCHW and over channels-last operands, but for wgmma tiles no channels-last wgrad (its
 * loaders fill MN-major stages, which tf32 wgmma cannot read) */
static char *render(int mode, int variant, int which)
{
    cg_tile t;
    if (!tile_of(mode, variant, &t))
        return NULL;
    const int simt = mode == TGC_CUDA_TPL_SIMT;
    tgc_strbuf o = {0};
    if (t.wg) /* wgmma: NVRTC compiles the program for sm_90a */
        tgc_sb_puts(&o, "#define TGC_NEEDS_SM90A\n");
    tgc_sb_puts(&o, tgc_cuda_gemm_lib());
    tgc_sb_puts(&o, tgc_text_cuda_conv_grad_lib_cuh);
    tgc_sb_printf(&o, "// conv-grad program: mode %d, %d x %d x %d tiles, %d stages%s\n", mode,
                  t.bm, t.bn, t.bk, t.st, t.wg ? ", wgmma" : "");
    char comp[160];
    /* dgrad: A = packed weights (K-major in memory), B = the dy gather */
    if (t.wg) {
        tgc_cuda_render_wgmma(&o, "tgc_cg", mode, t.bn / t.wgn, 0, 0);
        tgc_sb_printf(&o,
                      "typedef tgc_ld_sw<4, %d, %d, %d, 0, 1, 1> TGC_DG_LA;\n"
                      "typedef tgc_dcol<4, %d, %d, %d, 0, 1> TGC_DG_LB;\n"
                      "typedef tgc_wdy<4, %d, %d, %d, 0, 0, 1> TGC_WG_LA;\n"
                      "typedef tgc_wcol<4, %d, %d, %d, 0, 0, 1> TGC_WG_LB;\n"
                      "typedef tgc_dcol_cl<4, %d, %d, %d, 0, 0, 1> TGC_DGC_LB;\n",
                      t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bn,
                      t.bk, t.nt);
        snprintf(comp, sizeof comp,
                 "tgc_wgmma_comp<%d, %d, %d, %d, %d, %d, TGC_%%s_LA, TGC_%%s_LB, tgc_cg_mma>", mode,
                 t.bm, t.bn, t.bk, t.wg, t.wgn);
    } else if (simt) {
        tgc_sb_printf(&o,
                      "typedef tgc_ld<4, %d, %d, %d, 1, 4, 0, 1> TGC_DG_LA;\n"
                      "typedef tgc_dcol<4, %d, %d, %d, 4> TGC_DG_LB;\n"
                      "typedef tgc_wdy<4, %d, %d, %d, 1, 4> TGC_WG_LA;\n"
                      "typedef tgc_wcol<4, %d, %d, %d, 1, 4> TGC_WG_LB;\n"
                      "typedef tgc_dcol_cl<4, %d, %d, %d, 1, 4> TGC_DGC_LB;\n"
                      "typedef tgc_wdy_cl<4, %d, %d, %d, 4> TGC_WGC_LA;\n"
                      "typedef tgc_wcol_cl<4, %d, %d, %d, 4> TGC_WGC_LB;\n",
                      t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bn,
                      t.bk, t.nt, t.bm, t.bk, t.nt, t.bn, t.bk, t.nt);
        snprintf(comp, sizeof comp, "tgc_simt_comp<%d, TGC_%%s_LA, TGC_%%s_LB>", t.bk);
    } else {
        tgc_sb_printf(&o,
                      "typedef tgc_ld<4, %d, %d, %d, 0, 4, 1, 1> TGC_DG_LA;\n"
                      "typedef tgc_dcol<4, %d, %d, %d, 8> TGC_DG_LB;\n"
                      "typedef tgc_wdy<4, %d, %d, %d, 0, 4> TGC_WG_LA;\n"
                      "typedef tgc_wcol<4, %d, %d, %d, 0, 4> TGC_WG_LB;\n"
                      "typedef tgc_dcol_cl<4, %d, %d, %d, 0, 4> TGC_DGC_LB;\n"
                      "typedef tgc_wdy_cl<4, %d, %d, %d, 8> TGC_WGC_LA;\n"
                      "typedef tgc_wcol_cl<4, %d, %d, %d, 8> TGC_WGC_LB;\n",
                      t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bm, t.bk, t.nt, t.bn, t.bk, t.nt, t.bn,
                      t.bk, t.nt, t.bm, t.bk, t.nt, t.bn, t.bk, t.nt);
        snprintf(comp, sizeof comp, "tgc_tc_comp<%d, %d, %d, %d, %d, %d, TGC_%%s_LA, TGC_%%s_LB>",
                 mode, t.bm, t.bn, t.bk, t.wm, t.wn);
    }
    tgc_sb_puts(&o, "typedef TGC_DG_LA TGC_DGC_LA;\n");
    for (int cl = 0; cl < 2; cl++) {
        const char *sfx = cl ? "_cl" : "";
        char cdg[200], cwg[200];
        snprintf(cdg, sizeof cdg, comp, cl ? "DGC" : "DG", cl ? "DGC" : "DG");
        snprintf(cwg, sizeof cwg, comp, cl ? "WGC" : "WG", cl ? "WGC" : "WG");
        if (which & 1)
            tgc_sb_printf(
                &o,
                "extern \"C\" __global__ void __launch_bounds__(%d, 1) tgc_cg_dgrad%s(tgc_cg_geom "
                "g, const float *dy, const float *wt, float *dx, void *ws)\n{\n"
                "    TGC_DYN_SMEM(tgc_smem);\n"
                "    typedef %s COMP;\n"
                "    tgc_dg_prob<TGC_%s_LA, TGC_%s_LB> pb;\n"
                "    pb.G = g;\n"
                "    pb.dy = (const char *)dy;\n"
                "    pb.wt = (const char *)wt;\n"
                "    pb.dx = dx;\n"
                "    tgc_cg_run<%d, %d, %d, %d, %d, 4, COMP>(pb, ws, tgc_smem);\n"
                "}\n",
                t.nt, sfx, cdg, cl ? "DGC" : "DG", cl ? "DGC" : "DG", t.st, t.bm, t.bn, t.bk, t.nt);
        if ((which & 2) && !(cl && t.wg))
            tgc_sb_printf(
                &o,
                "extern \"C\" __global__ void __launch_bounds__(%d, 1) tgc_cg_wgrad%s(tgc_cg_geom "
                "g, const float *x, const float *dy, float *dw, void *ws)\n{\n"
                "    TGC_DYN_SMEM(tgc_smem);\n"
                "    typedef %s COMP;\n"
                "    tgc_wg_prob<TGC_%s_LA, TGC_%s_LB, %d> pb;\n"
                "    pb.G = g;\n"
                "    pb.x = (const char *)x;\n"
                "    pb.dy = (const char *)dy;\n"
                "    pb.dw = dw;\n"
                "    tgc_cg_run<%d, %d, %d, %d, %d, 4, COMP>(pb, ws, tgc_smem);\n"
                "}\n",
                t.nt, sfx, cwg, cl ? "WGC" : "WG", cl ? "WGC" : "WG", cl, t.st, t.bm, t.bn, t.bk,
                t.nt);
    }
    return tgc_sb_take(&o);
}

char *tgc_cuda_conv_grad_source(int mode, int variant)
{
    return render(mode, variant, 3);
}

/* ---- launch planning ---- */

static int64_t cdiv(int64_t a, int64_t b)
{
    return a <= 0 ? 0 : (a + b - 1) / b;
}

int tgc_cuda_conv_grad_fits(const tgc_cg_args *a)
{
    const int64_t lim = (int64_t)1 << 31;
    if (!a || a->n < 1 || a->c < 1 || a->h < 1 || a->w < 1 || a->o < 1 || a->kh < 1 || a->kw < 1 ||
        a->oh < 1 || a->ow < 1 || a->sh < 1 || a->sw < 1 || a->ph < 0 || a->pw < 0 || a->dh < 1 ||
        a->dw < 1 || a->groups < 1 || a->c % a->groups || a->o % a->groups)
        return 0;
    if (a->n * a->c * a->h * a->w >= lim || a->n * a->o * a->oh * a->ow >= lim ||
        a->o * a->c * a->kh * a->kw >= lim || a->ph > 65535 || a->pw > 65535 || a->sh > 65535 ||
        a->sw > 65535)
        return 0;
    if (a->wgrad)
        return (a->kh - 1) * a->dh < 32768 && (a->kw - 1) * a->dw < 32768 && a->groups <= 65535 &&
               a->kh * a->kw * (a->c / a->groups) < lim;
    if ((a->sh > 1 && a->dh > 1) || (a->sw > 1 && a->dw > 1) || a->sh * a->sw > 64)
        return 0;
    return a->groups * a->sh * a->sw <= 65535 && a->kh * a->dh < 65536 && a->kw * a->dw < 65536;
}

/* TF32 dgrad on sm_90 takes the wgmma variants (2, 3), everything else the mma.sync / SIMT
 * ones: on the H200 the wgmma dgrad measured 5-15% faster on ResNet18's 3x3 convs, the wgmma
 * wgrad 3-20% slower than mma.sync (both bound by their gathers' index math, not by the
 * tensor cores), so wgrad keeps mma.sync (its wgmma programs stay buildable, for tuning). */
static int wgmma_for(int mode, int sm, int wgrad)
{
    return sm == 90 && mode == TGC_CUDA_TPL_TF32 && !wgrad;
}

void tgc_cuda_conv_grad_plan(const tgc_cg_args *a, tgc_matmul_precision prec, int sm, int sms,
                             tgc_cg_launch *l)
{
    memset(l, 0, sizeof *l);
    l->mode = tgc_cuda_f32_mode(prec);
    const int64_t og = a->o / a->groups, cg = a->c / a->groups;
    int64_t M, N, K, z;
    if (a->wgrad) {
        M = og;
        N = cg * a->kh * a->kw;
        K = a->n * a->oh * a->ow;
        z = a->groups;
    } else {
        M = cg;
        N = a->n * cdiv(a->h, a->sh) * cdiv(a->w, a->sw); /* phase 0 has the most pixels */
        K = og * cdiv(a->kh, a->sh) * cdiv(a->kw, a->sw);
        z = a->groups * a->sh * a->sw;
        l->packed = (size_t)(a->o * cg * a->kh * a->kw);
    }
    l->variant = (l->mode != TGC_CUDA_TPL_SIMT && M <= 64) + 2 * wgmma_for(l->mode, sm, a->wgrad);
    cg_tile t;
    tile_of(l->mode, l->variant, &t);
    int64_t tiles = cdiv(M, t.bm) * cdiv(N, t.bn);
    if (tiles < 1)
        tiles = 1;
    int64_t work = tiles * z, ktiles = cdiv(K, t.bk), splits = 1;
    /* split K when the tiles leave SMs idle: about two blocks per SM, every split at least
     * four k tiles */
    if (sms > 0 && work < sms && ktiles >= 8) {
        splits = (2 * (int64_t)sms + work - 1) / work;
        if (splits > ktiles / 4)
            splits = ktiles / 4;
        if (splits > 64)
            splits = 64;
        if (splits < 2)
            splits = 1;
    }
    l->grid[0] = (unsigned)tiles;
    l->grid[1] = (unsigned)splits;
    l->grid[2] = (unsigned)z;
    l->threads = (unsigned)t.nt;
    l->smem = smem_of(l->mode, &t, a->wgrad, a->cl);
    if (splits > 1) {
        int64_t ntiles = tiles * z;
        l->zero_bytes = (size_t)((ntiles * 4 + 255) / 256 * 256);
        l->ws_bytes = l->zero_bytes + (size_t)(ntiles * splits) * (size_t)t.bm * (size_t)t.bn * 4u;
    }
}

/* ---- programs: from the program cache on first use per device and mode ---- */

/* A mode's kernels on one device: its programs are one per (tile variant, op), the dgrad one
 * with the packing entry too, so the program cache compiles them all at once on several
 * threads; the variants of the device's architecture only (variants_of). */
typedef struct cg_mod {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    tgc_status status;
    char msg[512];
    CUfunction fn[CG_VARIANTS][CG_ENTRIES]; /* [v][e]: entry_names[e] of variant v */
    int smem_set[CG_VARIANTS][CG_ENTRIES];
} cg_mod;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cg_mod g_mod[TGC_CUDA_MAX_DEVICES][CG_MODES];

/* the tile variants of an op (0 dgrad, 1 wgrad) a mode loads on an sm: [first, first + n) */
static int variants_of(int mode, int sm, int wgrad, int *first)
{
    *first = wgmma_for(mode, sm, wgrad) ? 2 : 0;
    return mode == TGC_CUDA_TPL_SIMT ? 1 : 2;
}

static tgc_status load_mod(int dev, int mode, const char *cache_dir, cg_mod *m)
{
    const tgc_cuda_props *pr = tgc_cuda_props_of(dev);
    if (!tgc_cuda_drv() || !pr)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: device cuda:%d is not available", dev);
    const int sm = pr->major * 10 + pr->minor;
    int v0[2];
    const int nv = variants_of(mode, sm, 0, &v0[0]), np = 2 * nv;
    variants_of(mode, sm, 1, &v0[1]);
    static const char *const names[2 * CG_VARIANTS] = {
        "tgc_conv_dgrad_128",   "tgc_conv_wgrad_128",    "tgc_conv_dgrad_64",
        "tgc_conv_wgrad_64",    "tgc_conv_dgrad_wg_128", "tgc_conv_wgrad_wg_128",
        "tgc_conv_dgrad_wg_64", "tgc_conv_wgrad_wg_64"};
    /* program p: op p % 2 (0 dgrad with the packing entry, 1 wgrad), variant v0[op] + p / 2 */
    char *src[2 * CG_VARIANTS] = {NULL};
    tgc_cuda_program_src srcs[2 * CG_VARIANTS];
    const tgc_cuda_program *progs[2 * CG_VARIANTS] = {NULL};
    tgc_status st = TGC_OK;
    for (int p = 0; p < np && st == TGC_OK; p++) {
        const int op = p % 2, v = v0[op] + p / 2;
        if (!(src[p] = render(mode, v, op ? 2 : 1)))
            st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for the conv-grad kernels");
        srcs[p] = (tgc_cuda_program_src){names[2 * v + op], src[p]};
    }
    if (st == TGC_OK)
        st = tgc_cuda_programs_get(np, srcs, sm, cache_dir, progs, NULL);
    for (int p = 0; p < np; p++)
        free(src[p]);
    for (int i = 0; i < nv && st == TGC_OK; i++)
        for (int e = 0; e < CG_ENTRIES && st == TGC_OK; e++) {
            /* dgrad, pack and the channels-last dgrad from the dgrad program, the wgrads from
             * their own (a wgmma wgrad program has no channels-last entry) */
            const int op = e == 1 || e == 4;
            cg_tile t;
            if (e == 4 && tile_of(mode, v0[op] + i, &t) && t.wg)
                continue;
            st = tgc_cuda_program_function(progs[2 * i + op], dev, entry_names[e],
                                           &m->fn[v0[op] + i][e]);
        }
    return st;
}

static tgc_status mod_ready(int dev, int mode, const char *cache_dir, cg_mod **out)
{
    if (dev < 0 || dev >= TGC_CUDA_MAX_DEVICES)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: no device cuda:%d", dev);
    cg_mod *m = &g_mod[dev][mode];
    pthread_mutex_lock(&g_lock);
    if (m->state == 0) {
        tgc_status s = load_mod(dev, mode, cache_dir, m);
        m->state = s == TGC_OK ? 1 : -1;
        m->status = s;
        if (s != TGC_OK)
            snprintf(m->msg, sizeof m->msg, "%s", tgc_last_error());
    }
    int state = m->state;
    pthread_mutex_unlock(&g_lock);
    if (state < 0)
        return tgc_set_error(m->status, "%s", m->msg);
    *out = m;
    return TGC_OK;
}

tgc_status tgc_cuda_conv_grad_load(int dev, tgc_matmul_precision prec, const char *cache_dir)
{
    cg_mod *m = NULL;
    return mod_ready(dev, tgc_cuda_f32_mode(prec), cache_dir, &m);
}

/* ---- run ---- */

/* the device's tgc_cg_geom, field for field */
typedef struct tgc_cg_geom_host {
    long long n, c, h, w, o, kh, kw, oh, ow;
    int sh, sw, ph, pw, dh, dw, groups, pad_;
} tgc_cg_geom_host;

static void geom_of(const tgc_cg_args *a, tgc_cg_geom_host *g)
{
    memset(g, 0, sizeof *g);
    g->n = a->n;
    g->c = a->c;
    g->h = a->h;
    g->w = a->w;
    g->o = a->o;
    g->kh = a->kh;
    g->kw = a->kw;
    g->oh = a->oh;
    g->ow = a->ow;
    g->sh = (int)a->sh;
    g->sw = (int)a->sw;
    g->ph = (int)a->ph;
    g->pw = (int)a->pw;
    g->dh = (int)a->dh;
    g->dw = (int)a->dw;
    g->groups = (int)a->groups;
}

static tgc_status launch(CUfunction fn, const unsigned grid[3], unsigned threads, unsigned smem,
                         CUstream s, void **params, const char *what)
{
    return tgc_cuda_error(tgc_cuda_drv()->cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1,
                                                         1, smem, s, params, NULL),
                          what);
}

tgc_status tgc_cuda_conv_grad_run(const tgc_cg_args *a, tgc_matmul_precision prec, int dev,
                                  void *stream, const char *cache_dir)
{
    const tgc_cuda_props *pr = tgc_cuda_props_of(dev);
    if (!pr)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: device cuda:%d is not available", dev);
    tgc_cg_launch l;
    tgc_cuda_conv_grad_plan(a, prec, pr->major * 10 + pr->minor, pr->sms, &l);
    cg_mod *m = NULL;
    tgc_status st = mod_ready(dev, l.mode, cache_dir, &m);
    if (st == TGC_OK)
        st = tgc_cuda_enter(dev);
    if (st != TGC_OK)
        return st;
    CUstream s = stream ? (CUstream)stream : tgc_cuda_stream(dev);
    if (!s)
        return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_DEVICE;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    const int v = l.variant, e = entry_of(a->wgrad, a->cl);
    CUfunction fn = m->fn[v][e];
    if (l.smem > 48 * 1024) {
        pthread_mutex_lock(&g_lock);
        if (!m->smem_set[v][e])
            st = tgc_cuda_error(
                d->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      (int)l.smem),
                "tgc cuda: the conv-grad kernels' shared memory");
        if (st == TGC_OK)
            m->smem_set[v][e] = 1;
        pthread_mutex_unlock(&g_lock);
        if (st != TGC_OK)
            return st;
    }
    tgc_cg_geom_host g;
    geom_of(a, &g);
    tgc_device dv = {TGC_DEVICE_CUDA, dev};
    tgc_storage *packed = NULL, *ws = NULL;
    if (l.packed) {
        packed = tgc_storage_new(l.packed * 4, dv);
        if (!packed)
            return tgc_keep_error(TGC_ERR_OOM,
                                  "tgc_conv2d_grad_input: out of memory for the "
                                  "packed weights (%zu bytes)",
                                  l.packed * 4);
    }
    if (l.ws_bytes) {
        ws = tgc_storage_new(l.ws_bytes, dv);
        if (!ws)
            st = tgc_keep_error(TGC_ERR_OOM,
                                "tgc_conv2d_grad_weight: out of memory for the split-K workspace "
                                "(%zu bytes)",
                                l.ws_bytes);
        else
            st = tgc_cuda_error(d->cuMemsetD8Async((CUdeviceptr)ws->data, 0, l.zero_bytes, s),
                                "tgc cuda: clearing a split-K workspace");
    }
    void *wsp = ws ? ws->data : NULL;
    if (st == TGC_OK && !a->wgrad) {
        const void *wp = a->wt;
        void *pp = packed->data;
        long long s0 = a->wst[0], s1 = a->wst[1], s2 = a->wst[2], s3 = a->wst[3];
        void *pa[] = {&g, &wp, &s0, &s1, &s2, &s3, &pp};
        int64_t blocks = cdiv((int64_t)l.packed, 256);
        unsigned pg[3] = {(unsigned)(blocks > 4096 ? 4096 : blocks < 1 ? 1 : blocks), 1, 1};
        st = launch(m->fn[v][2], pg, 256, 0, s, pa, "tgc_conv2d_grad_input: packing the weights");
        const void *dyp = a->dy;
        void *op = a->out;
        void *ga[] = {&g, &dyp, &pp, &op, &wsp};
        if (st == TGC_OK)
            st = launch(fn, l.grid, l.threads, l.smem, s, ga, "tgc_conv2d_grad_input: launching");
    } else if (st == TGC_OK) {
        const void *xp = a->x, *dyp = a->dy;
        void *op = a->out;
        void *ga[] = {&g, &xp, &dyp, &op, &wsp};
        st = launch(fn, l.grid, l.threads, l.smem, s, ga, "tgc_conv2d_grad_weight: launching");
    }
    /* stream-ordered: the blocks are reused only by later work on this stream */
    if (packed)
        tgc_storage_unref(packed);
    if (ws)
        tgc_storage_unref(ws);
    return st;
}
