/* GEMM / CONV template kernels -> CUDA C (see cuda_gemm.h). The device code is the template
 * library cuda_gemm_lib.cuh (embedded by the build, as every .cu / .cuh); this file picks a tile
 * configuration and operand layouts per kernel, compiles the kernel's constant sizes in and
 * writes a small wrapper: the ABI structs, the epilogue functor and the __global__ entry that
 * instantiates the library's templates. Pure functions of their arguments; thread-safe. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_render.h"
#include "support/config_env.h"
#include "support/error.h"

#include "backend/cuda/cuda_gemm_lib.cuh.h"

const char *tgc_cuda_gemm_lib(void)
{
    return tgc_text_cuda_gemm_lib_cuh;
}

int tgc_cuda_f32_mode(tgc_matmul_precision prec)
{
    return prec == TGC_PRECISION_HIGH     ? TGC_CUDA_TPL_TF32
           : prec == TGC_PRECISION_MEDIUM ? TGC_CUDA_TPL_BF16X
                                          : TGC_CUDA_TPL_SIMT;
}

/* ---- configuration ---- */

/* fp32 operands on wgmma (TF32, and MEDIUM's bf16 of fp32): tf32 wgmma of stages rounded
 * first (to tf32, or to bf16, whose products tf32 computes exactly), K-major only */
static int f32_wgmma(int mode)
{
    return mode == TGC_CUDA_TPL_TF32 || mode == TGC_CUDA_TPL_BF16X;
}

static int is_const(tgc_sdim d, int64_t v)
{
    return TGC_SDIM_IS_CONST(d) && d == v;
}

/* constant value or -1 */
static int64_t cval(tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ? (int64_t)d : -1;
}

typedef struct opnd {
    int layout; /* 0 K-major, 1 MN-major */
    int pad, vec, kfast;
} opnd;

typedef struct plan {
    tgc_cuda_tpl c;
    int es;
    opnd a, b; /* b unused for conv (im2col) */
    int b_pad;
} plan;

static int mode_of(const kir_kernel *k, tgc_matmul_precision prec)
{
    switch (k->tpl.dtype) {
    case TGC_F32: return tgc_cuda_f32_mode(prec);
    case TGC_F16: return TGC_CUDA_TPL_F16;
    case TGC_BF16: return TGC_CUDA_TPL_BF16;
    default: return -1;
    }
}

/* Stage size in elements of one operand tile (must match tgc_ld / tgc_im2col). */
static int stage_elems(int layout, int bmn, int bk, int pad)
{
    return layout == 0 ? bmn * (bk + pad) : bk * (bmn + pad);
}

/* Operand layouts of the wgmma path (stages swizzled, no pads): 0 when it has none for this
 * kernel. fp32 operands (tf32 wgmma) are read K-major; f16 / bf16 take either. */
static int choose_wgmma(const kir_kernel *k, int mode, int64_t M, int64_t N, plan *p)
{
    const kir_template *t = &k->tpl;
    const int conv = k->kind == KIR_CONV, h16 = mode >= TGC_CUDA_TPL_F16;
    if (!f32_wgmma(mode) && !h16)
        return 0;
    opnd a, b = {0, 0, 0, 0};
    if (conv || is_const(t->a_cs, 1))
        a = (opnd){0, 0, 1, 1};
    else if (is_const(t->a_rs, 1))
        a = (opnd){1, 0, 1, 0};
    else
        a = (opnd){0, 0, 0, 1};
    if (!conv) {
        if (is_const(t->b_rs, 1))
            b = (opnd){0, 0, 1, 1};
        else if (is_const(t->b_cs, 1))
            b = (opnd){1, 0, 1, 0};
        else
            b = (opnd){0, 0, 0, 1};
    }
    if (!h16 && (a.layout || b.layout))
        return 0;
    p->a = a;
    p->b = b;
    p->c.bm = 128;
    p->c.bn = 128;
    p->c.why = "128 x 128 blocks";
    int big = M >= 128 && N >= 256 && M * N >= 2LL * 132 * 128 * 256;
    if (big) {
        p->c.bn = 256;
        p->c.why = "a large problem (two waves of 128 x 256 blocks)";
    } else if (N >= 0 && N <= 64) {
        p->c.bn = 64;
        p->c.why = "at most 64 columns";
    }
    p->c.wm = 2;
    p->c.wn = 1;
    /* a small problem (under 32 blocks of 128 rows, a quarter of an sm_90 part's SMs, split-K
     * or not) takes 64-row blocks too: twice the blocks, and per block the same eight warps
     * (measured on ResNet18's 4x4 and 2x2 convolutions: 1.4-1.6x) */
    int64_t nb = conv ? (t->attrs.conv2d.groups > 0 ? t->attrs.conv2d.groups : 1) : cval(t->batch);
    int small =
        M > 64 && N >= 128 && nb >= 1 && (M + 127) / 128 * ((N + p->c.bn - 1) / p->c.bn) * nb < 32;
    if ((M >= 0 && M <= 64) || small) {
        p->c.why = small ? "a small problem (under 32 blocks of 128 rows)" : "at most 64 rows";
        /* one 64-row slab: two warpgroups side by side along N (eight warps, as for 128
         * rows; half the accumulators each) where N has two slabs' worth, else one */
        p->c.bm = 64;
        p->c.wm = 1;
        p->c.wn = p->c.bn >= 128 && (!b.layout || p->c.bn / 2 * p->es % 128 == 0) ? 2 : 1;
    }
    p->c.wg = p->c.wm * p->c.wn;
    p->c.bk = 128 / p->es;
    p->c.threads = 128 * p->c.wg;
    p->c.stages = 4;
    return 1;
}

/* The TMA entry's shared memory: per stage 128 x 128-byte and bn x 128-byte k tiles (and a raw
 * slot of the same size for each MN-major TF32 operand, which the producer rewrites
 * K-major), and the slack to align them to 1024 bytes (the barriers are static shared
 * memory). */
static unsigned tma_smem_of(const tgc_cuda_tpl *c, int bn, int stages)
{
    const int tf32 = f32_wgmma(c->mode);
    const int per =
        (128 + bn) * 128 + (tf32 && c->tma_al ? 128 * 128 : 0) + (tf32 && c->tma_bl ? bn * 128 : 0);
    return (unsigned)(stages * per + 1024);
}

/* The warp-specialized TMA entry with 128 x bn tiles (bn 128, 192 or 256; 128 where a TF32
 * operand is MN-major) and `stages` stages (0: as many as fit, at most 8), operand layouts al, bl;
 * 0 when that does not fit. */
static int choose_tma(plan *p, int al, int bl, int bn, int stages)
{
    tgc_cuda_tpl *c = &p->c;
    if (bn != 128 && bn != 192 && bn != 256)
        return 0;
    c->tma_al = al;
    c->tma_bl = bl;
    /* 227 KiB a block, less the static shared memory of the barriers (24 bytes a stage) */
    const unsigned most = 227u * 1024u - 256u;
    if (!stages)
        for (stages = 8; stages > 2 && tma_smem_of(c, bn, stages) > most; stages--)
            ;
    if (stages < 2 || stages > 8 || tma_smem_of(c, bn, stages) > most) {
        c->tma_al = c->tma_bl = 0;
        return 0;
    }
    c->tma_bn = bn;
    c->tma_stages = stages;
    c->tma_smem = tma_smem_of(c, bn, stages);
    return 1;
}

/* The TMA entry's tile width for an M x N problem (-1: not constant): the one of 128, 192 and
 * 256 whose waves of tiles over an sm_90 part's 132 SMs take least time, a wave of 128 x bn
 * tiles costing bn / rate(bn) (wider tiles reuse more of each A tile: rate 1, 0.95, 0.85 for
 * 256, 192, 128). Wave quantization decides BERT's shapes: N = 2304 or 3072 at M = 1024 are
 * one wave of 128 x 192 tiles against two of 128 x 128. 128 where a size is symbolic. */
static int tma_bn_for(int64_t M, int64_t N)
{
    if (M < 1 || N < 1)
        return 128;
    static const int bns[3] = {256, 192, 128};
    static const double rate[3] = {1.0, 0.95, 0.85};
    int best = 128;
    double best_t = 0;
    for (int i = 0; i < 3; i++) {
        if (bns[i] > 128 && N <= bns[i] - 64) /* a tile mostly past the last column */
            continue;
        int64_t tiles = (M + 127) / 128 * ((N + bns[i] - 1) / bns[i]);
        double t = (double)((tiles + 131) / 132) * bns[i] / rate[i];
        if (best_t == 0 || t < best_t) {
            best_t = t;
            best = bns[i];
        }
    }
    return best;
}

int tgc_cuda_gemm_tma(void)
{
    return tgc_env_cuda_tma();
}

/* The TMA entry of an sm_90a GEMM in mode (TF32, F16, BF16) whose operands are contiguous
 * along k (layout 0) or along m / n (layout 1), constant strides: its tile for M x N (-1:
 * not constant). TF32 needs K-major stages; an MN-major TF32 operand is rewritten by the
 * producer warps, in 128-wide tiles. */
static void add_tma(const kir_kernel *k, int mode, int64_t M, int64_t N, plan *p)
{
    const kir_template *t = &k->tpl;
    if (!tgc_cuda_gemm_tma() || k->kind != KIR_GEMM || mode == TGC_CUDA_TPL_SIMT)
        return;
    int al = is_const(t->a_cs, 1) ? 0 : is_const(t->a_rs, 1) ? 1 : -1;
    int bl = is_const(t->b_rs, 1) ? 0 : is_const(t->b_cs, 1) ? 1 : -1;
    if (al < 0 || bl < 0)
        return;
    int raw = f32_wgmma(mode) && (al || bl);
    /* MEDIUM with an MN-major operand: bf16 mma.sync (117 TFLOP/s at 4096^3 on an H100)
     * beats the entry's rewrite into tf32 stages (79) */
    if (raw && mode == TGC_CUDA_TPL_BF16X)
        return;
    choose_tma(p, al, bl, raw ? 128 : tma_bn_for(M, N), 0);
}

static unsigned smem_of(const plan *p)
{
    const tgc_cuda_tpl *c = &p->c;
    if (c->wg) /* swizzled stages, plus the slack to align them to 1024 bytes */
        return (unsigned)(c->stages * (c->bm + c->bn) * c->bk * p->es + 1024);
    int sa = stage_elems(p->a.layout, c->bm, c->bk, p->a.pad);
    int sb = stage_elems(p->b.layout, c->bn, c->bk, p->b.pad);
    return (unsigned)(c->stages * (sa + sb) * p->es);
}

static void choose(const kir_kernel *k, int mode, int wgmma, plan *p)
{
    const kir_template *t = &k->tpl;
    const int conv = k->kind == KIR_CONV;
    memset(p, 0, sizeof *p);
    p->c.kind = k->kind;
    p->c.cl = conv && t->cl;
    p->c.out_cl = conv && t->out_cl;
    p->c.mode = mode;
    p->c.split_k = 1;
    p->es = mode >= TGC_CUDA_TPL_F16 ? 2 : 4;
    int64_t groups = conv ? t->attrs.conv2d.groups : 1;
    /* M, N when constant (-1 otherwise) */
    int64_t M = conv ? (cval(t->co) >= 0 ? cval(t->co) / (groups ? groups : 1) : -1) : cval(t->M);
    int64_t N = conv ? -1 : cval(t->N);
    if (conv && cval(t->cn) >= 0 && cval(t->oh) >= 0 && cval(t->ow) >= 0)
        N = cval(t->cn) * cval(t->oh) * cval(t->ow);
    if (wgmma && choose_wgmma(k, mode, M, N, p)) {
        p->c.smem_bytes = smem_of(p);
        add_tma(k, mode, M, N, p);
        return;
    }
    p->c.why = !wgmma                       ? "mma.sync / SIMT templates (not sm_90)"
               : mode == TGC_CUDA_TPL_TF32  ? "TF32 with an MN-major operand: mma.sync"
               : mode == TGC_CUDA_TPL_SIMT  ? "exact fp32 (HIGHEST): SIMT"
               : mode == TGC_CUDA_TPL_BF16X ? "bf16 of fp32 operands (MEDIUM) with an MN-major "
                                              "operand: mma.sync"
                                            : "mma.sync";
    if (mode == TGC_CUDA_TPL_SIMT) {
        p->c.bm = p->c.bn = 128;
        p->c.bk = 8;
        p->c.threads = 256;
        p->c.stages = 4;
        p->a.layout = p->b.layout = 1;
        p->a.pad = p->b.pad = 4;
        p->b_pad = 4;
        if (conv) {
            p->a.kfast = 1; /* weights: k contiguous, transposed into the stage */
        } else {
            p->a.vec = is_const(t->a_rs, 1);
            p->a.kfast = !p->a.vec && is_const(t->a_cs, 1);
            p->b.vec = is_const(t->b_cs, 1);
            p->b.kfast = !p->b.vec && is_const(t->b_rs, 1);
        }
    } else {
        const int h16 = mode >= TGC_CUDA_TPL_F16;
        p->c.bm = p->c.bn = 128;
        p->c.bk = 32;
        p->c.wm = 2;
        p->c.wn = 4;
        /* 128 x 128 with 8 warps of 64 x 32; a side of at most 64 gets a 64 tile and 4 warps */
        int small_m = M >= 0 && M <= 64, small_n = N >= 0 && N <= 64;
        /* large problems (two waves of 128 x 256 tiles on 132 SMs): 64 x 64 warp tiles, half
         * the shared-memory reads per mma */
        int big = M >= 128 && N >= 256 && M * N >= 2LL * 132 * 128 * 256;
        if (big) {
            p->c.bn = 256;
        } else if (small_m && small_n) {
            p->c.bm = p->c.bn = 64;
            p->c.wm = p->c.wn = 2;
        } else if (small_m) {
            p->c.bm = 64;
            p->c.wm = 1;
        } else if (small_n) {
            p->c.bn = 64;
            p->c.wn = 2;
        }
        p->c.threads = 32 * p->c.wm * p->c.wn;
        p->c.stages = h16 ? 4 : 3;
        int padk = h16 ? 8 : 4, padmn = 8;
        p->b_pad = padmn;
        if (conv || is_const(t->a_cs, 1)) {
            p->a = (opnd){0, padk, 1, 1};
        } else if (is_const(t->a_rs, 1)) {
            p->a = (opnd){1, padmn, 1, 0};
        } else {
            p->a = (opnd){0, padk, 0, 1};
        }
        if (!conv) {
            if (is_const(t->b_rs, 1))
                p->b = (opnd){0, padk, 1, 1};
            else if (is_const(t->b_cs, 1))
                p->b = (opnd){1, padmn, 1, 0};
            else
                p->b = (opnd){1, padmn, 0, 0};
        }
    }
    /* the im2col of x: MN-major, gathered by element; channels-last x in K-major 16-byte
     * chunks (SIMT's stages stay MN-major) */
    if (conv)
        p->b = t->cl && mode != TGC_CUDA_TPL_SIMT
                   ? (opnd){0, mode >= TGC_CUDA_TPL_F16 ? 8 : 4, 1, 1}
                   : (opnd){1, p->b_pad, 0, 0};
    p->c.smem_bytes = smem_of(p);
    if (wgmma) /* fp32 with an MN-major operand: mma.sync, and the TMA entry rewrites it */
        add_tma(k, mode, M, N, p);
}

/* ---- text ---- */

static const char *ctype(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32: return "float";
    case TGC_F16:
    case TGC_BF16: return "unsigned short";
    default: return NULL;
    }
}

/* The epilogue functor: (v0, v1, v2) = (batch, m, n) epilogue vars, acc the fp32 sum; val()
 * computes the result (the DAG, rendered by tgc_cuda_render_vals: cuda_render.h, its helpers
 * come from the prelude the program starts with), store() writes it at v0 * c_bs + v1 * c_rs
 * + v2 of the output buffer. Two calls, so that the library computes every value of a
 * thread's tile before it stores any: the output may alias nothing the compiler can see, so
 * a load of the epilogue after a store would wait for the one before it. */
static tgc_status render_epilogue(tgc_strbuf *o, const kir_kernel *k, const kir_args *slots,
                                  const char *fname)
{
    const kir_template *t = &k->tpl;
    int32_t res = k->result;
    if (res >= 0 && k->vals[res].kind == KV_ACC && k->vals[res].dtype == TGC_F32)
        res = -1; /* the bare sum */
    tgc_sb_printf(o,
                  "struct %s_ep {\n"
                  "    %s_b b;\n"
                  "    %s_s s;\n"
                  "    long long c_bs, c_rs;\n"
                  "    __device__ __forceinline__ float val(long long v0, long long v1, "
                  "long long v2, float acc) const\n"
                  "    {\n",
                  fname, fname, fname);
    char name[64] = "acc";
    if (res >= 0) {
        uint8_t *emitted = calloc((size_t)(k->n_vals > 0 ? k->n_vals : 1), 1);
        if (!emitted)
            return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", fname);
        tgc_cuda_val_env env = {.acc = {"acc"},
                                .var = {"v0", "v1", "v2"},
                                .bufs = "b.p",
                                .sizes = "s.v",
                                .prefix = "tv"};
        tgc_strbuf body = {0};
        tgc_status st =
            tgc_cuda_render_vals(&body, k, slots, &env, res, name, sizeof name, emitted);
        free(emitted);
        if (st != TGC_OK) {
            tgc_sb_free(&body);
            return tgc_keep_error(st, "tgc cuda: the epilogue of template kernel %s", fname);
        }
        if (body.data)
            tgc_sb_puts(o, body.data);
        tgc_sb_free(&body);
        if (k->vals[res].dtype != t->out_dtype)
            return tgc_set_error(
                TGC_ERR_INTERNAL, "tgc cuda: the epilogue of kernel %s gives %s, its output is %s",
                fname, tgc_dtype_name(k->vals[res].dtype), tgc_dtype_name(t->out_dtype));
    }
    tgc_sb_printf(o,
                  "        return %s;\n    }\n"
                  "    __device__ __forceinline__ void store(long long v0, long long v1, "
                  "long long v2, float v) const\n    {\n",
                  name);
    /* NCHW / GEMM rows: pixel or column fastest; channels-last: the channel (var m) */
    const char *idx = t->out_cl ? "v0 * c_bs + v2 * c_rs + v1" : "v0 * c_bs + v1 * c_rs + v2";
    if (t->out_dtype == TGC_F32)
        tgc_sb_printf(o, "        ((float *)b.p[%d])[%s] = v;\n", (int)t->out, idx);
    else
        tgc_sb_printf(o, "        ((unsigned short *)b.p[%d])[%s] = tgc_f32_bits(v, %d);\n",
                      (int)t->out, idx, t->out_dtype == TGC_BF16);
    tgc_sb_puts(o, "    }\n};\n");
    return TGC_OK;
}

/* (cuda_gemm.h) */
void tgc_cuda_render_wgmma(tgc_strbuf *o, const char *fname, int mode, int n, int ta, int tb)
{
    const int tf32 = f32_wgmma(mode), nacc = n / 2;
    const char *ty = tf32 ? "tf32" : mode == TGC_CUDA_TPL_BF16 ? "bf16" : "f16";
    tgc_sb_printf(o,
                  "struct %s_mma {\n"
                  "    __device__ __forceinline__ static void run(float *d, unsigned long long a, "
                  "unsigned long long b)\n    {\n"
                  "#ifdef TGC_GEMM_EMU\n"
                  "        tgc_emu_wgmma(d, %d, %d, %d, %d, a, b);\n"
                  "#else\n"
                  "        asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n"
                  "                     \"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {",
                  fname, n,
                  tf32                        ? 0
                  : mode == TGC_CUDA_TPL_BF16 ? 2
                                              : 1,
                  ta, tb, nacc + 2, n, tf32 ? 8 : 16, ty, ty);
    for (int i = 0; i < nacc; i++)
        tgc_sb_printf(o, "%s%%%d", i ? ", " : "", i);
    tgc_sb_printf(o, "}, %%%d, %%%d, p, 1, 1", nacc, nacc + 1);
    if (!tf32)
        tgc_sb_printf(o, ", %d, %d", ta, tb);
    tgc_sb_puts(o, ";\\n}\\n\"\n                     : ");
    for (int i = 0; i < nacc; i++)
        tgc_sb_printf(o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
    tgc_sb_puts(o, "\n                     : \"l\"(a), \"l\"(b), \"r\"(1));\n"
                   "#endif\n    }\n};\n");
}

/* G.<field> = constant, for every constant sdim of the template */
static void put_consts(tgc_strbuf *o, const kir_kernel *k)
{
    const kir_template *t = &k->tpl;
    const struct {
        const char *name;
        tgc_sdim d;
    } f[] = {
        {"batch", t->batch}, {"M", t->M},       {"N", t->N},       {"K", t->K},
        {"a_off", t->a_off}, {"a_bs", t->a_bs}, {"a_rs", t->a_rs}, {"a_cs", t->a_cs},
        {"b_off", t->b_off}, {"b_bs", t->b_bs}, {"b_rs", t->b_rs}, {"b_cs", t->b_cs},
        {"c_bs", t->c_bs},   {"c_rs", t->c_rs}, {"cn", t->cn},     {"cc", t->cc},
        {"ch", t->ch},       {"cw", t->cw},     {"co", t->co},     {"kh", t->kh},
        {"kw", t->kw},       {"oh", t->oh},     {"ow", t->ow},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (TGC_SDIM_IS_CONST(f[i].d))
            tgc_sb_printf(o, "    G.%s = %lldLL;\n", f[i].name, (long long)f[i].d);
}

/* Applies a forced tile to p (bm, bn, bk, wm, wn, stages); 0 when it breaks a constraint of
 * the library's templates (the static_asserts there, checked here first). */
static int force_tile(plan *p, const tgc_cuda_tpl *f)
{
    tgc_cuda_tpl *c = &p->c;
    const int simt = c->mode == TGC_CUDA_TPL_SIMT, conv = c->kind == KIR_CONV;
    if (f->stages < 2 || f->stages > 8)
        return 0;
    if (c->wg) {
        int nt = 128 * f->wg, mn16 = p->es == 2 ? 64 : 8, wn = f->wn > 0 ? f->wn : 1;
        if (f->wg < 1 || f->wg > 4 || wn > 2 || f->wg % wn || f->bm != 64 * (f->wg / wn) ||
            f->stages < 3 || f->bn % wn || f->bn / wn < 16 || f->bn / wn > 256 ||
            (f->bn / wn) % 16 || (f->bk * p->es) % 128 || (p->a.layout && f->bm % mn16) ||
            (!conv && p->b.layout && (f->bn / wn) % mn16))
            return 0;
        c->wg = f->wg;
        c->wm = f->wg / wn;
        c->wn = wn;
        c->threads = nt;
    } else if (simt) {
        if (f->bm != 128 || f->bn != 128 || (f->bk != 8 && f->bk != 16))
            return 0;
    } else {
        int nt = 32 * f->wm * f->wn;
        if (f->wm < 1 || f->wn < 1 || nt > 1024 || f->bk % 16 || f->bm % (16 * f->wm) ||
            f->bn % (16 * f->wn))
            return 0;
        c->wm = f->wm;
        c->wn = f->wn;
        c->threads = nt;
    }
    c->bm = f->bm;
    c->bn = f->bn;
    c->bk = f->bk;
    c->stages = f->stages;
    c->why = "a forced tile";
    const int nt = c->threads, v = 16 / p->es;
    const opnd *o[2] = {&p->a, &p->b};
    const int mn[2] = {c->bm, c->bn};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && conv && c->cl) { /* tgc_im2col_cl's chunks of v channels */
            int ch = c->bk / v;
            if (c->bk % v || nt % ch || (c->bn * ch) % nt || (c->bn * c->bk) % nt)
                return 0;
            continue;
        }
        if (i == 1 && conv) {
            int rs = nt >= c->bn ? nt / c->bn : 1;
            if ((c->bn % nt && nt % c->bn) || c->bk % rs)
                return 0;
            continue;
        }
        if ((mn[i] * c->bk) % nt)
            return 0;
        if (o[i]->vec && (o[i]->layout == 0 ? mn[i] * (c->bk / v) : c->bk * (mn[i] / v)) % nt)
            return 0;
    }
    c->smem_bytes = smem_of(p);
    if (f->tma_bn && (!c->tma_bn || !choose_tma(p, c->tma_al, c->tma_bl, f->tma_bn, f->tma_stages)))
        return 0;
    return c->smem_bytes <= 227u * 1024u;
}

/* NAME_tma, the warp-specialized TMA entry (tgc_ws_run), beside NAME: the same buffers,
 * sizes, geometry and epilogue, the operands through the tensor maps ta and tb. */
static void render_tma(tgc_strbuf *o, const kir_kernel *k, const plan *p, const char *fname)
{
    const tgc_cuda_tpl *c = &p->c;
    char mma[80];
    snprintf(mma, sizeof mma, "%s_tma", fname);
    const int tf32 = f32_wgmma(c->mode);
    tgc_cuda_render_wgmma(o, mma, c->mode, c->tma_bn, tf32 ? 0 : c->tma_al, tf32 ? 0 : c->tma_bl);
    tgc_sb_printf(o,
                  "extern \"C\" __global__ void __launch_bounds__(384, 1) %s_tma(%s_b b, %s_s s, "
                  "tgc_gemm_geom g, const __grid_constant__ tgc_tmap ta, "
                  "const __grid_constant__ tgc_tmap tb, void *ws, int splits)\n{\n"
                  "    TGC_DYN_SMEM(tgc_smem);\n"
                  "    tgc_gemm_geom G = g;\n",
                  fname, fname, fname);
    put_consts(o, k);
    const int bk = 128 / p->es;
    /* the stages wgmma reads: fp32's always K-major (the producer rewrites an MN-major one) */
    const int sa = tf32 ? 0 : c->tma_al, sbl = tf32 ? 0 : c->tma_bl;
    tgc_sb_printf(
        o,
        "    typedef tgc_lay<%d> LA;\n    typedef tgc_lay<%d> LB;\n"
        "    typedef tgc_wgmma_comp<%d, 128, %d, %d, 2, 1, LA, LB, %s_tma_mma> COMP;\n"
        "    tgc_gemm_prob<LA, LB, %d, %s_ep> pb;\n"
        "    pb.A = (const char *)b.p[%d];\n"
        "    pb.B = (const char *)b.p[%d];\n"
        "    pb.G = G;\n"
        "    pb.ep.b = b;\n"
        "    pb.ep.s = s;\n"
        "    pb.ep.c_bs = G.c_bs;\n"
        "    pb.ep.c_rs = G.c_rs;\n"
        "    pb.setup();\n"
        "    tgc_ws_run<%d, %d, 128, %d, %d, %d, %d, COMP>(pb, &ta, &tb, ws, splits, tgc_smem);\n"
        "}\n",
        sa, sbl, c->mode, c->tma_bn, bk, fname, p->es, fname, (int)k->tpl.a, (int)k->tpl.b, c->mode,
        c->tma_stages, c->tma_bn, bk, c->tma_al, c->tma_bl);
}

static tgc_status render(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                         const char *fname, tgc_matmul_precision prec, int sm,
                         const tgc_cuda_tpl *force, tgc_cuda_tpl *cfg)
{
    if (!out || !k || !slots || !fname || !cfg)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_render_template: NULL argument");
    if (k->kind != KIR_GEMM && k->kind != KIR_CONV)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_cuda_render_template: kernel %s is not a GEMM or CONV template",
                             fname);
    int mode = mode_of(k, prec);
    if (mode < 0 || !ctype(k->tpl.out_dtype))
        return tgc_set_error(
            TGC_ERR_UNSUPPORTED, "tgc cuda: no %s template for %s operands (kernel %s)",
            k->kind == KIR_CONV ? "conv" : "GEMM", tgc_dtype_name(k->tpl.dtype), fname);
    if (sm < 80)
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "tgc cuda: the GEMM / conv templates need sm_80 or newer (cp.async, "
                             "mma.sync); kernel %s was asked for sm_%d",
                             fname, sm);
    plan p;
    const int wgmma = sm == 90 && (!force || force->wg > 0);
    choose(k, mode, wgmma, &p);
    if (force && force->wg > 0 && !p.c.wg)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc cuda: kernel %s has no wgmma template (sm_%d, mode %d, its "
                             "operand layouts)",
                             fname, sm, mode);
    if (force && !force_tile(&p, force))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc cuda: tile %dx%dx%d, %dx%d warps, %d stages does not fit the "
                             "mode-%d template of kernel %s",
                             force->bm, force->bn, force->bk, force->wm, force->wn, force->stages,
                             mode, fname);
    const int conv = k->kind == KIR_CONV;
    tgc_strbuf o = {0};
    if (p.c.wg || p.c.tma_bn)
        tgc_sb_puts(&o, "#define TGC_NEEDS_SM90A\n");
    tgc_sb_puts(&o, tgc_text_cuda_gemm_lib_cuh);
    tgc_sb_printf(&o, "struct %s_b { void *p[%d]; };\n", fname, k->n_bufs > 0 ? k->n_bufs : 1);
    int nw = kir_args_words(slots);
    tgc_sb_printf(&o, "struct %s_s { long long v[%d]; };\n", fname, nw > 0 ? nw : 1);
    tgc_status st = render_epilogue(&o, k, slots, fname);
    if (st != TGC_OK) {
        tgc_sb_free(&o);
        return st;
    }
    const tgc_cuda_tpl *c = &p.c;
    if (c->wg)
        tgc_cuda_render_wgmma(&o, fname, c->mode, c->bn / c->wn, p.a.layout, conv ? 0 : p.b.layout);
    tgc_sb_printf(&o,
                  "extern \"C\" __global__ void __launch_bounds__(%d, 1) %s(%s_b b, %s_s s, "
                  "tgc_gemm_geom g, void *ws)\n{\n"
                  "    TGC_DYN_SMEM(tgc_smem);\n"
                  "    tgc_gemm_geom G = g;\n",
                  c->threads, fname, fname, fname);
    put_consts(&o, k);
    if (c->wg) {
        tgc_sb_printf(&o, "    typedef tgc_ld_sw<%d, %d, %d, %d, %d, %d, %d> LA;\n", p.es, c->bm,
                      c->bk, c->threads, p.a.layout, p.a.vec, p.a.kfast);
        if (conv && c->cl)
            tgc_sb_printf(&o, "    typedef tgc_im2col_cl<%d, %d, %d, %d, 0, 0, 1> LB;\n", p.es,
                          c->bn, c->bk, c->threads);
        else if (conv)
            tgc_sb_printf(&o, "    typedef tgc_im2col<%d, %d, %d, %d, 0, 1> LB;\n", p.es, c->bn,
                          c->bk, c->threads);
        else
            tgc_sb_printf(&o, "    typedef tgc_ld_sw<%d, %d, %d, %d, %d, %d, %d> LB;\n", p.es,
                          c->bn, c->bk, c->threads, p.b.layout, p.b.vec, p.b.kfast);
    } else {
        tgc_sb_printf(&o, "    typedef tgc_ld<%d, %d, %d, %d, %d, %d, %d, %d> LA;\n", p.es, c->bm,
                      c->bk, c->threads, p.a.layout, p.a.pad, p.a.vec, p.a.kfast);
        if (conv && c->cl)
            tgc_sb_printf(&o, "    typedef tgc_im2col_cl<%d, %d, %d, %d, %d, %d, 0> LB;\n", p.es,
                          c->bn, c->bk, c->threads, p.b.layout, p.b.pad);
        else if (conv)
            tgc_sb_printf(&o, "    typedef tgc_im2col<%d, %d, %d, %d, %d> LB;\n", p.es, c->bn,
                          c->bk, c->threads, p.b.pad);
        else
            tgc_sb_printf(&o, "    typedef tgc_ld<%d, %d, %d, %d, %d, %d, %d, %d> LB;\n", p.es,
                          c->bn, c->bk, c->threads, p.b.layout, p.b.pad, p.b.vec, p.b.kfast);
    }
    if (c->wg)
        tgc_sb_printf(&o,
                      "    typedef tgc_wgmma_comp<%d, %d, %d, %d, %d, %d, LA, LB, %s_mma> COMP;\n",
                      c->mode, c->bm, c->bn, c->bk, c->wg, c->wn, fname);
    else if (c->mode == TGC_CUDA_TPL_SIMT)
        tgc_sb_printf(&o, "    typedef tgc_simt_comp<%d, LA, LB> COMP;\n", c->bk);
    else
        tgc_sb_printf(&o, "    typedef tgc_tc_comp<%d, %d, %d, %d, %d, %d, LA, LB> COMP;\n",
                      c->mode, c->bm, c->bn, c->bk, c->wm, c->wn);
    tgc_sb_printf(&o,
                  "    tgc_%s_prob<LA, LB, %d, %s_ep> pb;\n"
                  "    pb.A = (const char *)b.p[%d];\n"
                  "    pb.B = (const char *)b.p[%d];\n"
                  "    pb.G = G;\n"
                  "    pb.ep.b = b;\n"
                  "    pb.ep.s = s;\n",
                  conv ? "conv" : "gemm", p.es, fname,
                  /* conv: the GEMM's A is the weights (tpl.b), its B the im2col of x */
                  (int)(conv ? k->tpl.b : k->tpl.a), (int)(conv ? k->tpl.a : k->tpl.b));
    if (conv) {
        const tgc_conv2d_attrs *a = &k->tpl.attrs.conv2d;
        tgc_sb_printf(&o,
                      "    pb.at.sh = %lld;\n    pb.at.sw = %lld;\n    pb.at.ph = %lld;\n"
                      "    pb.at.pw = %lld;\n    pb.at.dh = %lld;\n    pb.at.dw = %lld;\n"
                      "    pb.at.groups = %lld;\n"
                      "%s",
                      (long long)a->stride_h, (long long)a->stride_w, (long long)a->pad_h,
                      (long long)a->pad_w, (long long)a->dil_h, (long long)a->dil_w,
                      (long long)a->groups,
                      k->tpl.out_cl ? "    pb.ep.c_rs = G.co;\n"
                                      "    pb.ep.c_bs = G.oh * G.ow * G.co;\n"
                                    : "    pb.ep.c_rs = G.oh * G.ow;\n"
                                      "    pb.ep.c_bs = G.co * pb.ep.c_rs;\n");
    } else {
        tgc_sb_puts(&o, "    pb.ep.c_bs = G.c_bs;\n    pb.ep.c_rs = G.c_rs;\n");
    }
    tgc_sb_printf(&o,
                  "    pb.setup();\n"
                  "    tgc_tpl_run<%d, %d, %d, %d, %d, %d, COMP>(pb, ws, tgc_smem);\n"
                  "}\n",
                  c->stages, c->bm, c->bn, c->bk, c->threads, p.es);
    if (c->tma_bn)
        render_tma(&o, k, &p, fname);
    if (o.failed) {
        tgc_sb_free(&o);
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", fname);
    }
    tgc_sb_puts(out, o.data);
    tgc_sb_free(&o);
    if (out->failed)
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", fname);
    *cfg = p.c;
    return TGC_OK;
}

tgc_status tgc_cuda_render_template(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                    const char *fname, tgc_matmul_precision prec, int sm,
                                    tgc_cuda_tpl *cfg)
{
    return render(out, k, slots, fname, prec, sm, NULL, cfg);
}

tgc_status tgc_cuda_render_template_tile(tgc_strbuf *out, const kir_kernel *k,
                                         const kir_args *slots, const char *fname,
                                         tgc_matmul_precision prec, int sm,
                                         const tgc_cuda_tpl *tile, tgc_cuda_tpl *cfg)
{
    if (!tile)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_render_template_tile: NULL tile");
    return render(out, k, slots, fname, prec, sm, tile, cfg);
}

void tgc_cuda_tpl_describe(const tgc_cuda_tpl *c, char *buf, size_t n)
{
    static const char *const modes[] = {"SIMT fp32", "TF32", "bf16 of fp32", "f16", "bf16"};
    const char *mode = c->mode >= 0 && c->mode <= 4 ? modes[c->mode] : "?";
    char units[48];
    if (c->wg)
        snprintf(units, sizeof units, "%d warpgroup%s%s", c->wg, c->wg > 1 ? "s" : "",
                 c->wn == 2 ? " along N" : "");
    else
        snprintf(units, sizeof units, "%dx%d warps", c->wm, c->wn);
    char tma[96] = "";
    if (c->tma_bn)
        snprintf(tma, sizeof tma, "; TMA warp-specialized 128x%dx%d, %d stages, %u B smem",
                 c->tma_bn, 128 / (c->mode >= TGC_CUDA_TPL_F16 ? 2 : 4), c->tma_stages,
                 c->tma_smem);
    snprintf(buf, n, "%s %s %s %dx%dx%d, %s, %d stages, %d threads, %u B smem: %s%s",
             c->kind != KIR_CONV ? "GEMM"
             : c->cl     ? (c->out_cl ? "conv channels-last in and out" : "conv channels-last")
             : c->out_cl ? "conv channels-last out"
                         : "conv",
             mode,
             c->wg                          ? "wgmma"
             : c->mode == TGC_CUDA_TPL_SIMT ? "fma"
                                            : "mma.sync",
             c->bm, c->bn, c->bk, units, c->stages, c->threads, c->smem_bytes,
             c->why ? c->why : "-", tma);
}

/* ---- launch ---- */

typedef struct dims {
    int64_t batch, M, N, K;
} dims;

static dims dims_of(const tgc_cuda_tpl *cfg, const kir_kernel *k, const tgc_gemm_geom *g)
{
    dims d;
    if (cfg->kind == KIR_CONV) {
        int64_t groups = k->tpl.attrs.conv2d.groups > 0 ? k->tpl.attrs.conv2d.groups : 1;
        d.batch = groups;
        d.M = g->co / groups;
        d.N = g->cn * g->oh * g->ow;
        d.K = g->cc / groups * g->kh * g->kw;
    } else {
        d.batch = g->batch;
        d.M = g->M;
        d.N = g->N;
        d.K = g->K;
    }
    return d;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a <= 0 ? 0 : (a + b - 1) / b;
}

/* splits for split-K: only when the tiles leave most SMs idle and K is long */
static int64_t splits_of(const tgc_cuda_tpl *cfg, const dims *d, int64_t tiles, int sms)
{
    int64_t ktiles = ceil_div(d->K, cfg->bk);
    int64_t work = tiles * d->batch;
    if (!cfg->split_k || work <= 0 || d->batch > 65535 || sms <= 0 || work * 2 > sms || ktiles < 8)
        return 1;
    int64_t s = sms / work;
    if (s > ktiles / 4)
        s = ktiles / 4;
    if (s > 16)
        s = 16;
    return s < 2 ? 1 : s;
}

static size_t counter_bytes(int64_t tiles)
{
    return (size_t)((tiles * 4 + 255) / 256 * 256);
}

void tgc_cuda_template_launch(const tgc_cuda_tpl *cfg, const kir_kernel *k, const tgc_gemm_geom *g,
                              int sms, unsigned grid[3], unsigned block[3], unsigned *smem,
                              size_t *ws_bytes)
{
    dims d = dims_of(cfg, k, g);
    int64_t tiles = ceil_div(d.M, cfg->bm) * ceil_div(d.N, cfg->bn);
    int64_t splits = splits_of(cfg, &d, tiles, sms);
    int64_t z = d.batch < 1 ? 1 : d.batch > 65535 ? 65535 : d.batch;
    grid[0] = (unsigned)(tiles < 1 ? 1 : tiles);
    grid[1] = (unsigned)splits;
    grid[2] = (unsigned)z;
    block[0] = (unsigned)cfg->threads;
    block[1] = block[2] = 1;
    *smem = cfg->smem_bytes;
    *ws_bytes = 0;
    if (splits > 1)
        *ws_bytes = counter_bytes(tiles * d.batch) +
                    (size_t)(tiles * d.batch * splits) * (size_t)cfg->bm * (size_t)cfg->bn * 4u;
}

/* The map of one operand: rows `outer` of `inner` contiguous elements `so` apart, batch items
 * `sb` apart (0: one item for every batch index), read in boxes of 128 bytes by `rows`; 0
 * when TMA cannot address it. */
static int tmap_of(tgc_cuda_tmap_desc *d, tgc_dtype dt, int es, const char *base, int64_t inner,
                   int64_t outer, int64_t so, int64_t sb, int64_t batch, int rows)
{
    const int64_t lim = 1LL << 40;
    if ((uintptr_t)base % 16 || so <= 0 || so * es % 16 || so * es >= lim || sb < 0 ||
        sb * es % 16 || sb * es >= lim || inner >= (1LL << 31) || outer >= (1LL << 31))
        return 0;
    d->dtype = dt;
    d->base = (void *)base;
    d->dims[0] = (uint64_t)inner;
    d->dims[1] = (uint64_t)outer;
    d->dims[2] = (uint64_t)(sb ? batch : 1);
    d->strides[0] = (uint64_t)(so * es);
    /* a single item's stride is never read; any multiple of 16 bytes will do */
    d->strides[1] = (uint64_t)(sb ? sb * es : so * es);
    d->box[0] = (uint32_t)(128 / es);
    d->box[1] = (uint32_t)rows;
    return 1;
}

/* The k splits of the TMA kernel's `tiles` tiles of ktiles k tiles on `sms` SMs (see
 * tgc_cuda_template_tma): the count of waves of units times a unit's cost, in k tiles (its
 * share of k, 2 to fill the ring and drain the epilogue), plus 2 for each partial tile the
 * last split reads back from the workspace (its 128 x bn fp32 round trip costs about two k
 * tiles of loads; on an H100, BERT's 1024 x 768 x 3072 ran at 118 TFLOP/s in 5 splits, which
 * a model without that term picks, against 169 in 2), least over 1 to 16 splits of at least 4
 * k tiles each. */
static int64_t tma_splits(int64_t tiles, int64_t ktiles, int sms)
{
    if (sms <= 0 || tiles >= sms)
        return 1;
    int64_t best = 1, best_t = ceil_div(tiles, sms) * (ktiles + 2);
    for (int64_t s = 2; s <= 16 && s * 4 <= ktiles; s++) {
        int64_t t = ceil_div(tiles * s, sms) * (ceil_div(ktiles, s) + 2) + 2 * (s - 1);
        if (t < best_t) {
            best_t = t;
            best = s;
        }
    }
    return best;
}

int tgc_cuda_template_tma(const tgc_cuda_tpl *cfg, const kir_kernel *k, const tgc_gemm_geom *g,
                          void *const *bufs, int sms, tgc_cuda_tma_launch *out)
{
    if (!cfg->tma_bn || cfg->kind != KIR_GEMM || !bufs)
        return 0;
    dims d = dims_of(cfg, k, g);
    const int64_t big = 1LL << 31;
    if (d.batch < 1 || d.M < 1 || d.N < 1 || d.K < 1 || d.batch >= big || d.M >= big ||
        d.N >= big || d.K >= big)
        return 0;
    const kir_template *t = &k->tpl;
    const int es = cfg->mode >= TGC_CUDA_TPL_F16 ? 2 : 4, bk = 128 / es;
    const tgc_dtype dt = f32_wgmma(cfg->mode)            ? TGC_F32
                         : cfg->mode == TGC_CUDA_TPL_F16 ? TGC_F16
                                                         : TGC_BF16;
    const char *a = (const char *)bufs[t->a] + g->a_off * es;
    const char *b = (const char *)bufs[t->b] + g->b_off * es;
    /* one batch item: its stride is never read */
    const int64_t abs_ = d.batch > 1 ? g->a_bs : 0, bbs_ = d.batch > 1 ? g->b_bs : 0;
    tgc_cuda_tmap_desc *maps = out->maps;
    /* A(m, k): K-major rows of k (a_cs 1) a_rs apart, or MN-major rows of m (a_rs 1) a_cs
     * apart; B(k, n) likewise with b_rs / b_cs */
    int ok =
        cfg->tma_al == 0
            ? g->a_cs == 1 && tmap_of(&maps[0], dt, es, a, d.K, d.M, g->a_rs, abs_, d.batch, 128)
            : g->a_rs == 1 && tmap_of(&maps[0], dt, es, a, d.M, d.K, g->a_cs, abs_, d.batch, bk);
    ok = ok &&
         (cfg->tma_bl == 0
              ? g->b_rs == 1 &&
                    tmap_of(&maps[1], dt, es, b, d.K, d.N, g->b_cs, bbs_, d.batch, cfg->tma_bn)
              : g->b_cs == 1 && tmap_of(&maps[1], dt, es, b, d.N, d.K, g->b_rs, bbs_, d.batch, bk));
    if (!ok)
        return 0;
    const int64_t tiles = ceil_div(d.M, 128) * ceil_div(d.N, cfg->tma_bn) * d.batch;
    const int64_t splits = tma_splits(tiles, ceil_div(d.K, bk), sms), units = tiles * splits;
    out->grid[0] = (unsigned)(units < sms ? units : sms > 0 ? sms : 1);
    out->grid[1] = out->grid[2] = 1;
    out->block[0] = 384;
    out->block[1] = out->block[2] = 1;
    out->smem = cfg->tma_smem;
    out->splits = (int)splits;
    out->ws_zero_bytes = splits > 1 ? counter_bytes(tiles) : 0;
    out->ws_bytes = splits > 1 ? out->ws_zero_bytes + (size_t)units * 128 * cfg->tma_bn * 4 : 0;
    return 1;
}

size_t tgc_cuda_template_ws_zero_bytes(const tgc_cuda_tpl *cfg, const kir_kernel *k,
                                       const tgc_gemm_geom *g, int sms)
{
    dims d = dims_of(cfg, k, g);
    int64_t tiles = ceil_div(d.M, cfg->bm) * ceil_div(d.N, cfg->bn);
    return splits_of(cfg, &d, tiles, sms) > 1 ? counter_bytes(tiles * d.batch) : 0;
}

void tgc_cuda_template_geom(const kir_kernel *k, const tgc_symtab *syms, const int64_t *vals,
                            tgc_gemm_geom *g)
{
    const kir_template *t = &k->tpl;
#define EV(f) g->f = (long long)tgc_sym_eval(syms, t->f, vals)
    EV(batch);
    EV(M);
    EV(N);
    EV(K);
    EV(a_off);
    EV(a_bs);
    EV(a_rs);
    EV(a_cs);
    EV(b_off);
    EV(b_bs);
    EV(b_rs);
    EV(b_cs);
    EV(c_bs);
    EV(c_rs);
    EV(cn);
    EV(cc);
    EV(ch);
    EV(cw);
    EV(co);
    EV(kh);
    EV(kw);
    EV(oh);
    EV(ow);
#undef EV
}
