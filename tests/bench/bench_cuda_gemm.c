/* GPU correctness and speed of the CUDA GEMM / conv templates alone (cuda_gemm.h), without
 * the CUDA backend's glue: each case is a small graph lowered with the CUDA target, its
 * template kernel rendered, compiled by NVRTC for the device's sm, loaded and launched
 * through the driver API (libcuda.so.1 opened here with dlopen; no toolkit header), and its
 * output compared with a double-precision CPU reference computed from the kernel's own
 * template geometry (every element for small cases, 4096 sampled elements for large ones).
 * Large cases are also timed (median of CUDA-event-timed launches) and print TFLOP/s.
 *
 *   bench_cuda_gemm            all cases
 *   bench_cuda_gemm quick      correctness only (no 4096^3 timing)
 *   bench_cuda_gemm sweep      also times every timed case with alternative block tiles
 *   bench_cuda_gemm sweep-wgmma   the same with the sm_90 wgmma tiles only
 *   bench_cuda_gemm all|quick|sweep|sweep-wgmma TEXT   only the cases whose name holds TEXT
 *   bench_cuda_gemm emit DIR   no GPU: writes every case's kernel for tools/gemm_emu/run.sh
 *                              (caseNN.cu) and as NVRTC compiles it (caseNN.nvrtc.cu)
 *
 * Exit status 0 when every case is within its tolerance, 1 otherwise, 77 when there is no
 * GPU or no NVRTC (nothing run). Tolerance per element: |got - ref| <= ts * sum_k |a_k b_k| +
 * to * |ref| + 1e-30, ts by mode (SIMT 1e-5, TF32 2e-3, f16/bf16 operands 1e-5 since their
 * products are exact in fp32), to by output dtype (f16 2^-10, bf16 2^-7). The bf16 mode of
 * f32 operands (MEDIUM) is checked against a reference of the operands rounded to bf16 (round
 * to nearest even, as cvt.rn.bf16x2.f32 does) with ts 1e-5: its products are exact in fp32
 * too, so what is left is the fp32 accumulation, and a wrong fragment element or a stale
 * shared-memory value shows as an error of the size of a product, far above the bound (the
 * rounding of the operands alone makes errors of about 2^-8 of a product, which a bound of
 * 1e-2 of sum |a_k b_k| can never see). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tgc/tgc.h"

#ifndef TGC_HAVE_CUDA
int main(void)
{
    printf("bench_cuda_gemm: built without the CUDA backend\n");
    return 77;
}
#else
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "backend/cuda/cuda_tmap.h"
#include "ir/shape_infer.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/fuse.h"
#include "runtime/cuda_host.h"

/* seconds of wall time, for the per-case cost printed after each line */
static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the driver API, by hand (cuda.h is for runtime/ and src/backend/cuda only) ---- */
typedef int CUres;
typedef unsigned long long CUdptr;
static struct {
    CUres (*Init)(unsigned);
    CUres (*DeviceGet)(int *, int);
    CUres (*DeviceGetAttribute)(int *, int, int);
    CUres (*PrimaryCtxRetain)(void **, int);
    CUres (*CtxSetCurrent)(void *);
    CUres (*ModuleLoadData)(void **, const void *);
    CUres (*ModuleUnload)(void *);
    CUres (*ModuleGetFunction)(void **, void *, const char *);
    CUres (*FuncSetAttribute)(void *, int, int);
    CUres (*MemAlloc)(CUdptr *, size_t);
    CUres (*MemFree)(CUdptr);
    CUres (*HtoD)(CUdptr, const void *, size_t);
    CUres (*DtoH)(void *, CUdptr, size_t);
    CUres (*MemsetD8)(CUdptr, unsigned char, size_t);
    CUres (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                    void *, void **, void **);
    CUres (*CtxSync)(void);
    CUres (*EventCreate)(void **, unsigned);
    CUres (*EventRecord)(void *, void *);
    CUres (*EventSync)(void *);
    CUres (*EventElapsed)(float *, void *, void *);
    CUres (*GetErrorName)(CUres, const char **);
} cu;
enum { ATTR_SMS = 16, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76, FUNC_MAX_DYN_SMEM = 8 };

static int cu_fail(CUres r, const char *what)
{
    const char *n = "?";
    if (cu.GetErrorName)
        cu.GetErrorName(r, &n);
    fprintf(stderr, "bench_cuda_gemm: %s failed: %s (%d)\n", what, n, r);
    return 1;
}
#define CU(call)                                                                                   \
    do {                                                                                           \
        CUres r_ = (call);                                                                         \
        if (r_ != 0)                                                                               \
            return cu_fail(r_, #call);                                                             \
    } while (0)

static int cu_open(int *sm, int *sms)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
#define SYM(f, name)                                                                               \
    if (!(*(void **)&cu.f = dlsym(h, name)))                                                       \
        return 0;
    SYM(Init, "cuInit");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(FuncSetAttribute, "cuFuncSetAttribute");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(HtoD, "cuMemcpyHtoD_v2");
    SYM(DtoH, "cuMemcpyDtoH_v2");
    SYM(MemsetD8, "cuMemsetD8_v2");
    SYM(Launch, "cuLaunchKernel");
    SYM(CtxSync, "cuCtxSynchronize");
    SYM(EventCreate, "cuEventCreate");
    SYM(EventRecord, "cuEventRecord");
    SYM(EventSync, "cuEventSynchronize");
    SYM(GetErrorName, "cuGetErrorName");
    if (!(*(void **)&cu.EventElapsed = dlsym(h, "cuEventElapsedTime_v2")))
        SYM(EventElapsed, "cuEventElapsedTime");
#undef SYM
    int dev, maj, min;
    void *ctx;
    if (cu.Init(0) || cu.DeviceGet(&dev, 0) || cu.PrimaryCtxRetain(&ctx, dev) ||
        cu.CtxSetCurrent(ctx) || cu.DeviceGetAttribute(&maj, ATTR_CC_MAJOR, dev) ||
        cu.DeviceGetAttribute(&min, ATTR_CC_MINOR, dev) ||
        cu.DeviceGetAttribute(sms, ATTR_SMS, dev))
        return 0;
    *sm = maj * 10 + min;
    return 1;
}

/* ---- graphs ---- */

static int32_t add_input(tgc_graph *g, tgc_dtype dt, int nd, const int64_t *shape)
{
    static int n_in;
    tgc_attrs a = {.ni = 2};
    a.i[0] = TGC_BIND_ARG;
    a.i[1] = n_in++;
    tgc_vinfo v = {.dtype = dt, .ndim = nd};
    for (int d = 0; d < nd; d++)
        v.shape[d] = shape[d];
    return tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &a, &v);
}

static int32_t add_op(tgc_graph *g, tgc_op op, const int32_t *in, int n, const tgc_attrs *a)
{
    tgc_vinfo iv[4], out;
    tgc_attrs none = {0};
    for (int k = 0; k < n; k++)
        iv[k] = g->nodes[in[k]].out;
    if (tgc_infer(op, iv, n, a ? a : &none, g->syms, &out) != TGC_OK) {
        fprintf(stderr, "infer %s: %s\n", tgc_op_name(op), tgc_last_error());
        exit(2);
    }
    return tgc_graph_add(g, op, in, n, a ? a : &none, &out);
}

static tgc_fuse_class classify(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op == TGC_OP_INPUT || tgc_is_view_op(nd->op))
        return TGC_FUSE_FREE;
    if (nd->op == TGC_OP_CONTIGUOUS) /* a copy (the channels-last store of a result) */
        return TGC_FUSE_POINTWISE;
    switch (tgc_op_info_of(nd->op)->kind) {
    case TGC_KIND_MATMUL:
    case TGC_KIND_CONV:
        return kir_template_ok(g, i, tgc_cuda_kir_target()) ? TGC_FUSE_TEMPLATE : TGC_FUSE_OPAQUE;
    case TGC_KIND_BINARY:
    case TGC_KIND_UNARY:
    case TGC_KIND_SCALAR: return TGC_FUSE_POINTWISE;
    default: return TGC_FUSE_OPAQUE;
    }
}
static const tgc_fuse_hooks hooks = {classify, kir_epilogue_operand_ok, kir_permuted_store_ok};

/* ---- cases ---- */

/* C_BMM_B2: A [batch, M, K] times a 2-D B [K, N] (B broadcast over the batch) */
/* C_CONV_CL: the conv of a channels-last x (an NHWC input permuted to NCHW) and w (OHWI) */
/* C_CONV_CLO: the same, its result (after the epilogue) stored channels-last: the graph's
 * output is the contiguous copy of its NHWC permute, which the epilogue writes */
typedef enum {
    C_MATMUL,
    C_MATMUL_TA,
    C_LINEAR,
    C_BMM_NT,
    C_BMM_B2,
    C_CONV,
    C_CONV_CL,
    C_CONV_CLO
} ckind;
typedef struct tcase {
    const char *name;
    ckind kind;
    tgc_dtype dt;
    tgc_matmul_precision prec;
    int64_t d[11]; /* matmul: M N K [batch]; linear: rows out in [batch (x is [batch, rows, in])];
                      conv: n c h w o kh kw stride pad dil groups */
    int timed;
    int epi; /* 0 none, 1 bias + relu (linear / conv), 2 conv bias + residual + relu, 3 x 0.125 */
    const int *tile; /* forced bm bn bk wm wn stages, or NULL */
} tcase;

static int is_conv(const tcase *tc)
{
    return tc->kind == C_CONV || tc->kind == C_CONV_CL || tc->kind == C_CONV_CLO;
}

static uint16_t to_half_bits(float f, tgc_dtype dt)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (dt == TGC_BF16)
        return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    /* f16, round to nearest even; inputs are in [-1, 1] so no overflow or subnormal care */
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t s = (u >> 16) & 0x8000u, m = u & 0x7fffffu;
    if (e <= 0)
        return (uint16_t)s; /* tiny -> 0 */
    uint32_t h = s | ((uint32_t)e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)h;
}

static float from_half_bits(uint16_t h, tgc_dtype dt)
{
    uint32_t u;
    if (dt == TGC_BF16) {
        u = (uint32_t)h << 16;
    } else {
        uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
        if (e == 0)
            return (s ? -1.0f : 1.0f) * (float)m * 5.9604645e-8f;
        if (e == 31)
            u = s | 0x7f800000u | (m << 13);
        else
            u = s | ((e - 15 + 127) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct hostbuf {
    int32_t value;
    tgc_dtype dt;
    size_t n;
    float *f; /* values as the kernel sees them (rounded for 16-bit) */
    CUdptr d;
} hostbuf;

static int64_t numel_of(const tgc_vinfo *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

/* reference of output element (b, m, n) (GEMM) from the template geometry */
static double ref_gemm(const tgc_gemm_geom *G, const float *A, const float *B, int64_t b, int64_t m,
                       int64_t n, double *abssum)
{
    double s = 0, as = 0;
    for (int64_t k = 0; k < G->K; k++) {
        double p = (double)A[G->a_off + b * G->a_bs + m * G->a_rs + k * G->a_cs] *
                   (double)B[G->b_off + b * G->b_bs + k * G->b_rs + n * G->b_cs];
        s += p;
        as += fabs(p);
    }
    *abssum = as;
    return s;
}

static double ref_conv(const tgc_gemm_geom *G, const int64_t *at, int cl, const float *x,
                       const float *w, int64_t img, int64_t co, int64_t q, double *abssum)
{
    int64_t groups = at[6], cg = G->cc / groups, og = G->co / groups, gi = co / og;
    int64_t oh = q / G->ow, ow = q % G->ow;
    double s = 0, as = 0;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t r = 0; r < G->kh; r++)
            for (int64_t t = 0; t < G->kw; t++) {
                int64_t ih = oh * at[0] - at[2] + r * at[4], iw = ow * at[1] - at[3] + t * at[5];
                if (ih < 0 || ih >= G->ch || iw < 0 || iw >= G->cw)
                    continue;
                double p = cl ? (double)x[((img * G->ch + ih) * G->cw + iw) * G->cc + gi * cg + c] *
                                    (double)w[((co * G->kh + r) * G->kw + t) * cg + c]
                              : (double)x[((img * G->cc + gi * cg + c) * G->ch + ih) * G->cw + iw] *
                                    (double)w[((co * cg + c) * G->kh + r) * G->kw + t];
                s += p;
                as += fabs(p);
            }
    *abssum = as;
    return s;
}

static int buf_of(const kir_kernel *k, int32_t value)
{
    for (int i = 0; value >= 0 && i < k->n_bufs; i++)
        if (k->bufs[i].value == value)
            return i;
    return -1;
}

/* the epilogue applied to the sum r of output element idx (conv: channel co) */
static double apply_epi(int epi, double r, const float *bias, const float *res, int64_t chan,
                        size_t idx)
{
    if (epi == 1 || epi == 2)
        r += bias[chan];
    if (epi == 2)
        r += res[idx];
    if (epi == 1 || epi == 2)
        r = r < 0 ? 0 : r;
    if (epi == 3)
        r *= 0.125;
    return r;
}

static const char *g_emit_dir; /* "emit DIR": write each case for tools/gemm_emu, no GPU */

/* Writes case idx's kernel text and what tools/gemm_emu/emu_main.cpp needs to run it. */
static int emit_case(int idx, const tcase *tc, const kir_kernel *k, const tgc_graph *g,
                     const char *src, const tgc_cuda_tpl *cfg, int sms, int bias, int res)
{
    char path[512];
    snprintf(path, sizeof path, "%s/case%02d.cu", g_emit_dir, idx);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return 1;
    tgc_gemm_geom geo;
    tgc_cuda_template_geom(k, g->syms, NULL, &geo);
    unsigned grid[3], block[3], smem;
    size_t ws;
    tgc_cuda_template_launch(cfg, k, &geo, sms, grid, block, &smem, &ws);
    fprintf(fp, "// %s\n%s\n", tc->name, src);
    /* and the program as NVRTC compiles it (caseNN.nvrtc.cu), to read its SASS offline */
    snprintf(path, sizeof path, "%s/case%02d.nvrtc.cu", g_emit_dir, idx);
    FILE *fs = fopen(path, "w");
    if (fs) {
        fprintf(fs, "%s%s", tgc_cuda_prelude(), src);
        fclose(fs);
    }
    fprintf(fp, "static const char *TGC_NAME = \"%s\";\n", tc->name);
    fprintf(fp,
            "static const int TGC_NB = %d, TGC_A = %d, TGC_B = %d, TGC_OUT = %d, TGC_CONV = %d, "
            "TGC_CL = %d, TGC_OCL = %d, TGC_MODE = %d;\n",
            k->n_bufs, (int)k->tpl.a, (int)k->tpl.b, (int)k->tpl.out, k->kind == KIR_CONV,
            k->kind == KIR_CONV && k->tpl.cl, k->kind == KIR_CONV && k->tpl.out_cl, cfg->mode);
    fprintf(fp, "static const int TGC_DT[] = {");
    for (int i = 0; i < k->n_bufs; i++)
        fprintf(fp, "%d, ", k->bufs[i].dtype == TGC_F32 ? 0 : k->bufs[i].dtype == TGC_F16 ? 1 : 2);
    fprintf(fp, "};\nstatic const long long TGC_NUMEL[] = {");
    for (int i = 0; i < k->n_bufs; i++)
        fprintf(fp, "%lldLL, ", (long long)numel_of(&g->nodes[k->bufs[i].value].out));
    const long long *G = &geo.batch;
    fprintf(fp, "};\nstatic tgc_gemm_geom TGC_GEOM = {");
    for (int i = 0; i < 23; i++)
        fprintf(fp, "%lldLL, ", G[i]);
    fprintf(fp, "};\nstatic const long long TGC_ATTR[7] = {");
    for (int i = 0; i < 7; i++)
        fprintf(fp, "%lldLL, ", (long long)k->tpl.attrs.i[i]);
    fprintf(fp, "};\nstatic unsigned TGC_GRID[3] = {%u, %u, %u};\n", grid[0], grid[1], grid[2]);
    fprintf(
        fp,
        "static const unsigned TGC_NT = %u, TGC_SMEM = %u;\nstatic const size_t TGC_WS = %zu;\n",
        block[0], smem, ws);
    fprintf(fp, "static const int TGC_EPI = %d, TGC_BIAS = %d, TGC_RES = %d;\n", tc->epi, bias,
            res);
    fprintf(fp, "#define TGC_KERNEL tgc_k\n#define TGC_KB tgc_k_b\n#define TGC_KS tgc_k_s\n");
    /* the TMA entry, launched as on a part of 3 SMs (so that each persistent block loops over
     * several tiles): its maps with the buffer each reads and the byte offset into it */
    void *fake[8];
    for (int i = 0; i < 8; i++)
        fake[i] = (void *)(uintptr_t)((uintptr_t)(i + 1) << 32);
    tgc_cuda_tma_launch tl;
    const tgc_cuda_tmap_desc *md = tl.maps;
    if (cfg->tma_bn && k->n_bufs <= 8 && tgc_cuda_template_tma(cfg, k, &geo, fake, 3, &tl)) {
        fprintf(fp,
                "#define TGC_TMA 1\nstatic unsigned TGC_TMA_GRID = %u, TGC_TMA_SMEM = %u;\n"
                "static const size_t TGC_TMA_WS = %zu;\nstatic const int TGC_TMA_SPLITS = %d;\n",
                tl.grid[0], tl.smem, tl.ws_bytes, tl.splits);
        fprintf(fp, "static const long long TGC_TMAP[2][11] = {");
        for (int i = 0; i < 2; i++) {
            int buf = i ? (int)k->tpl.b : (int)k->tpl.a;
            fprintf(fp, "{%d, %lld, %d, %lluLL, %lluLL, %lluLL, %lluLL, %lluLL, %u, %u, 0}, ", buf,
                    (long long)((uintptr_t)md[i].base - (uintptr_t)fake[buf]),
                    md[i].dtype == TGC_F32 ? 4 : 2, (unsigned long long)md[i].dims[0],
                    (unsigned long long)md[i].dims[1], (unsigned long long)md[i].dims[2],
                    (unsigned long long)md[i].strides[0], (unsigned long long)md[i].strides[1],
                    md[i].box[0], md[i].box[1]);
        }
        fprintf(fp, "};\n#define TGC_KERNEL_TMA tgc_k_tma\n");
    }
    fclose(fp);
    return 0;
}

static int g_case_idx;

static int run_case(const tcase *tc, int sm, int sms, int quick, const tgc_cuda_tpl *force)
{
    tgc_graph *g = tgc_graph_create();
    int32_t o, bias_id = -1, res_id = -1;
    const int64_t *d = tc->d;
    if (is_conv(tc)) {
        int64_t sx[4] = {d[0], d[1], d[2], d[3]}, sw[4] = {d[4], d[1] / d[10], d[5], d[6]};
        int32_t in[3] = {add_input(g, tc->dt, 4, sx), add_input(g, tc->dt, 4, sw), -1};
        if (tc->kind != C_CONV) { /* NHWC and OHWI inputs, viewed as NCHW and OIHW */
            int64_t cx[4] = {d[0], d[2], d[3], d[1]}, cw[4] = {d[4], d[5], d[6], d[1] / d[10]};
            tgc_attrs p = {.ni = 4};
            const int64_t to_nchw[4] = {0, 3, 1, 2};
            memcpy(p.i, to_nchw, sizeof to_nchw);
            int32_t xi = add_input(g, tc->dt, 4, cx), wi = add_input(g, tc->dt, 4, cw);
            in[0] = add_op(g, TGC_OP_PERMUTE, &xi, 1, &p);
            in[1] = add_op(g, TGC_OP_PERMUTE, &wi, 1, &p);
        }
        tgc_attrs a = {.ni = 7};
        const int64_t at[7] = {d[7], d[7], d[8], d[8], d[9], d[9], d[10]};
        memcpy(a.i, at, sizeof at);
        if (tc->epi == 1 || tc->epi == 2)
            in[2] = bias_id = add_input(g, tc->dt, 1, &d[4]);
        o = add_op(g, TGC_OP_CONV2D, in, in[2] >= 0 ? 3 : 2, &a);
        if (tc->epi == 2) {
            int32_t r[2] = {o, res_id = add_input(g, tc->dt, 4, g->nodes[o].out.shape)};
            o = add_op(g, TGC_OP_ADD, r, 2, NULL);
        }
    } else if (tc->kind == C_LINEAR) {
        int64_t sx[3] = {d[3], d[0], d[2]}, sw[2] = {d[1], d[2]};
        int xb = d[3] > 0; /* x [batch, rows, in] */
        int32_t in[3] = {add_input(g, tc->dt, 2 + xb, sx + !xb), add_input(g, tc->dt, 2, sw), -1};
        if (tc->epi == 1)
            in[2] = bias_id = add_input(g, tc->dt, 1, &d[1]);
        o = add_op(g, TGC_OP_LINEAR, in, in[2] >= 0 ? 3 : 2, NULL);
    } else if (tc->kind == C_MATMUL_TA) {
        int64_t sa[2] = {d[2], d[0]}, sb[2] = {d[2], d[1]};
        int32_t a = add_input(g, tc->dt, 2, sa);
        tgc_attrs p = {.ni = 2};
        p.i[0] = 1;
        p.i[1] = 0;
        int32_t at = add_op(g, TGC_OP_PERMUTE, &a, 1, &p);
        int32_t in[2] = {at, add_input(g, tc->dt, 2, sb)};
        o = add_op(g, TGC_OP_MATMUL, in, 2, NULL);
    } else if (tc->kind == C_BMM_B2) {
        int64_t sa[3] = {d[3], d[0], d[2]}, sb[2] = {d[2], d[1]};
        int32_t in[2] = {add_input(g, tc->dt, 3, sa), add_input(g, tc->dt, 2, sb)};
        o = add_op(g, TGC_OP_MATMUL, in, 2, NULL);
    } else if (tc->kind == C_BMM_NT) {
        int64_t sa[3] = {d[3], d[0], d[2]}, sb[3] = {d[3], d[1], d[2]};
        int32_t b = add_input(g, tc->dt, 3, sb);
        tgc_attrs p = {.ni = 3};
        p.i[0] = 0;
        p.i[1] = 2;
        p.i[2] = 1;
        int32_t in[2] = {add_input(g, tc->dt, 3, sa), add_op(g, TGC_OP_PERMUTE, &b, 1, &p)};
        o = add_op(g, TGC_OP_MATMUL, in, 2, NULL);
    } else {
        int64_t sa[2] = {d[0], d[2]}, sb[2] = {d[2], d[1]};
        int32_t in[2] = {add_input(g, tc->dt, 2, sa), add_input(g, tc->dt, 2, sb)};
        o = add_op(g, TGC_OP_MATMUL, in, 2, NULL);
    }
    if (tc->epi == 1 || tc->epi == 2)
        o = add_op(g, TGC_OP_RELU, &o, 1, NULL);
    if (tc->epi == 3) {
        tgc_attrs sc = {.nf = 1};
        sc.f[0] = 0.125;
        o = add_op(g, TGC_OP_MUL_SCALAR, &o, 1, &sc);
    }
    if (tc->kind == C_CONV_CLO) {
        tgc_attrs p = {.ni = 4};
        const int64_t to_nhwc[4] = {0, 2, 3, 1};
        memcpy(p.i, to_nhwc, sizeof to_nhwc);
        o = add_op(g, TGC_OP_PERMUTE, &o, 1, &p);
        o = add_op(g, TGC_OP_CONTIGUOUS, &o, 1, NULL);
    }
    tgc_graph_set_outputs(g, &o, 1);
    tgc_fusion f;
    if (tgc_pass_fuse(g, &hooks, &f) != TGC_OK) {
        fprintf(stderr, "%s: fuse: %s\n", tc->name, tgc_last_error());
        return 1;
    }
    uint8_t *mat = kir_materialized(g, &f);
    kir_kernel *k = NULL;
    for (int i = 0; i < f.n_groups && !k; i++) {
        kir_kernel *kk = NULL;
        if (kir_lower_group(g, &f, i, mat, tgc_cuda_kir_target(), &kk) != TGC_OK) {
            fprintf(stderr, "%s: lower: %s\n", tc->name, tgc_last_error());
            return 1;
        }
        if (kk && kk->kind != KIR_LOOP)
            k = kk;
        else
            kir_kernel_free(kk);
    }
    if (!k) {
        fprintf(stderr, "%s: no template kernel\n", tc->name);
        return 1;
    }
    kir_args slots = {0};
    kir_args_collect(k, &slots);
    tgc_strbuf sb = {0};
    tgc_cuda_tpl cfg;
    if (!g_emit_dir) /* the emulator brings its own subset of the prelude */
        tgc_sb_puts(&sb, tgc_cuda_prelude());
    tgc_cuda_tpl tile_cfg;
    if (!force && tc->tile) {
        tile_cfg = (tgc_cuda_tpl){.bm = tc->tile[0],
                                  .bn = tc->tile[1],
                                  .bk = tc->tile[2],
                                  .wm = tc->tile[3],
                                  .wn = tc->tile[4],
                                  .stages = tc->tile[5]};
        force = &tile_cfg;
    }
    tgc_status rs =
        force ? tgc_cuda_render_template_tile(&sb, k, &slots, "tgc_k", tc->prec, sm, force, &cfg)
              : tgc_cuda_render_template(&sb, k, &slots, "tgc_k", tc->prec, sm, &cfg);
    if (rs == TGC_ERR_INVALID_ARG && force) { /* a tile the mode cannot take: not a failure */
        tgc_sb_free(&sb);
        kir_args_free(&slots);
        kir_kernel_free(k);
        free(mat);
        tgc_fusion_free(&f);
        tgc_graph_free(g);
        return 0;
    }
    if (rs != TGC_OK) {
        fprintf(stderr, "%s: render: %s\n", tc->name, tgc_last_error());
        return 1;
    }
    char *src = tgc_sb_take(&sb), *cubin = NULL;
    size_t cubin_n = 0;
    if (g_emit_dir) {
        int r =
            emit_case(g_case_idx, tc, k, g, src, &cfg, sms, buf_of(k, bias_id), buf_of(k, res_id));
        free(src);
        kir_args_free(&slots);
        kir_kernel_free(k);
        free(mat);
        tgc_fusion_free(&f);
        tgc_graph_free(g);
        return r;
    }
    double t_compile = wall_s();
    if (tgc_nvrtc_compile(tc->name, src, sm, &cubin, &cubin_n, NULL) != TGC_OK) {
        fprintf(stderr, "%s: %s\n", tc->name, tgc_last_error());
        return 1;
    }
    t_compile = wall_s() - t_compile;
    double t_setup = wall_s();
    void *mod, *fn;
    CU(cu.ModuleLoadData(&mod, cubin));
    CU(cu.ModuleGetFunction(&fn, mod, "tgc_k"));
    if (cfg.smem_bytes > 48 * 1024)
        CU(cu.FuncSetAttribute(fn, FUNC_MAX_DYN_SMEM, (int)cfg.smem_bytes));
    /* buffers */
    hostbuf hb[8];
    int nb = k->n_bufs;
    for (int i = 0; i < nb; i++) {
        const tgc_vinfo *v = &g->nodes[k->bufs[i].value].out;
        hb[i].value = k->bufs[i].value;
        hb[i].dt = v->dtype;
        hb[i].n = (size_t)numel_of(v);
        hb[i].f = malloc(hb[i].n * sizeof(float));
        size_t es = tgc_dtype_size(v->dtype);
        void *raw = malloc(hb[i].n * es);
        for (size_t j = 0; j < hb[i].n; j++) {
            float x = k->bufs[i].written ? NAN : frand();
            if (es == 2) {
                uint16_t h = k->bufs[i].written ? 0x7e00 : to_half_bits(x, v->dtype);
                ((uint16_t *)raw)[j] = h;
                hb[i].f[j] = from_half_bits(h, v->dtype);
            } else {
                ((float *)raw)[j] = x;
                hb[i].f[j] = x;
            }
        }
        CU(cu.MemAlloc(&hb[i].d, hb[i].n * es + 16));
        CU(cu.HtoD(hb[i].d, raw, hb[i].n * es));
        free(raw);
    }
    void *bufs[8];
    for (int i = 0; i < nb; i++)
        bufs[i] = (void *)(uintptr_t)hb[i].d;
    int64_t sizes[16] = {0};
    for (int i = 0; i < slots.n; i++)
        sizes[i] = tgc_sym_eval(g->syms, slots.dims[i], NULL);
    tgc_gemm_geom geo;
    tgc_cuda_template_geom(k, g->syms, NULL, &geo);
    unsigned grid[3], block[3], smem;
    size_t ws_n;
    tgc_cuda_template_launch(&cfg, k, &geo, sms, grid, block, &smem, &ws_n);
    CUdptr ws = 0;
    if (ws_n) {
        CU(cu.MemAlloc(&ws, ws_n));
        CU(cu.MemsetD8(ws, 0, ws_n));
    }
    void *wsp = (void *)(uintptr_t)ws;
    /* the TMA entry too where the kernel has one and the call suits it: both checked, both
     * timed (variant 0 the kernel NAME, 1 NAME_tma) */
    void *fn_tma = NULL;
    _Alignas(64) unsigned char maps[2][128];
    tgc_cuda_tma_launch tl = {.splits = 1};
    CUdptr tws = 0;
    if (cfg.tma_bn && tgc_cuda_template_tma(&cfg, k, &geo, bufs, sms, &tl)) {
        if (tgc_cuda_load() != TGC_OK || tgc_cuda_tmap_encode(&tl.maps[0], maps[0]) != TGC_OK ||
            tgc_cuda_tmap_encode(&tl.maps[1], maps[1]) != TGC_OK) {
            fprintf(stderr, "%s: tensor maps: %s\n", tc->name, tgc_last_error());
            return 1;
        }
        CU(cu.ModuleGetFunction(&fn_tma, mod, "tgc_k_tma"));
        CU(cu.FuncSetAttribute(fn_tma, FUNC_MAX_DYN_SMEM, (int)cfg.tma_smem));
        if (tl.ws_bytes) {
            CU(cu.MemAlloc(&tws, tl.ws_bytes));
            CU(cu.MemsetD8(tws, 0, tl.ws_bytes));
        }
    }
    void *twsp = (void *)(uintptr_t)tws;
    t_setup = wall_s() - t_setup;
    int bad_any = 0;
    for (int variant = 0; variant < (fn_tma ? 2 : 1); variant++) {
        void *params[7] = {bufs, sizes, &geo, &wsp, NULL, NULL, NULL};
        void *vfn = fn;
        if (variant) {
            params[3] = maps[0];
            params[4] = maps[1];
            params[5] = &twsp;
            params[6] = &tl.splits;
            vfn = fn_tma;
            memcpy(grid, tl.grid, sizeof grid);
            memcpy(block, tl.block, sizeof block);
            smem = tl.smem;
            /* NaN everywhere again (all-ones bits: NaN in f32, f16 and bf16), so that an
             * element this kernel misses cannot pass with the first one's value */
            const hostbuf *ob = &hb[k->tpl.out];
            CU(cu.MemsetD8(ob->d, 0xff, ob->n * tgc_dtype_size(ob->dt)));
        }
        double t_check = wall_s();
        CU(cu.Launch(vfn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, NULL,
                     params, NULL));
        CU(cu.CtxSync());
        /* check */
        const kir_template *t = &k->tpl;
        hostbuf *out = &hb[t->out], *A = &hb[t->a], *B = &hb[t->b];
        int bi_ = buf_of(k, bias_id), ri_ = buf_of(k, res_id);
        hostbuf *bias = bi_ >= 0 ? &hb[bi_] : NULL, *resb = ri_ >= 0 ? &hb[ri_] : NULL;
        size_t es = tgc_dtype_size(out->dt);
        void *raw = malloc(out->n * es);
        CU(cu.DtoH(raw, out->d, out->n * es));
        if (cfg.mode == TGC_CUDA_TPL_BF16X) /* the reference sees what the mma sees (see the top) */
            for (int o = 0; o < 2; o++) {
                hostbuf *hbo = o ? B : A;
                for (size_t j = 0; j < hbo->n; j++)
                    hbo->f[j] = from_half_bits(to_half_bits(hbo->f[j], TGC_BF16), TGC_BF16);
                if (t->a == t->b)
                    break;
            }
        double ts = cfg.mode == TGC_CUDA_TPL_TF32 ? 2e-3 : 1e-5;
        double to = out->dt == TGC_F16 ? 1.0 / 1024 : out->dt == TGC_BF16 ? 1.0 / 128 : 0;
        size_t total = out->n, samples = total <= (1u << 18) ? total : 4096, bad = 0;
        double worst = 0;
        for (size_t s = 0; s < samples; s++) {
            size_t idx = samples == total
                             ? s
                             : (size_t)((rng = rng * 6364136223846793005ull + 1) >> 20) % total;
            double as, r;
            if (is_conv(tc)) {
                int64_t ohw = geo.oh * geo.ow, img = (int64_t)idx / (geo.co * ohw);
                int64_t co = ((int64_t)idx / ohw) % geo.co, q = (int64_t)idx % ohw;
                if (t->out_cl) /* the output is [n, oh, ow, co] */
                    q = ((int64_t)idx / geo.co) % ohw, co = (int64_t)idx % geo.co;
                size_t nchw = (size_t)((img * geo.co + co) * ohw + q);
                r = ref_conv(&geo, t->attrs.i, t->cl, A->f, B->f, img, co, q, &as);
                r = apply_epi(tc->epi, r, bias ? bias->f : NULL, resb ? resb->f : NULL, co, nchw);
            } else {
                int64_t b = geo.c_bs ? (int64_t)idx / geo.c_bs : 0,
                        rem = (int64_t)idx - b * geo.c_bs;
                r = ref_gemm(&geo, A->f, B->f, b, rem / geo.c_rs, rem % geo.c_rs, &as);
                r = apply_epi(tc->epi, r, bias ? bias->f : NULL, NULL, rem % geo.c_rs, idx);
            }
            double got =
                es == 2 ? from_half_bits(((uint16_t *)raw)[idx], out->dt) : ((float *)raw)[idx];
            /* each epilogue op of a 16-bit kernel rounds: allow two roundings of every term */
            double mag = fabs(r);
            if (tc->epi && to > 0)
                mag = 2 * (as + (bias ? 1.0 : 0.0) + (resb ? 1.0 : 0.0));
            double err = fabs(got - r), lim = ts * as + to * mag + 1e-30;
            if (!(err <= lim)) {
                if (bad < 5)
                    fprintf(stderr, "%s: element %zu: got %.9g want %.9g (limit %.3g)\n", tc->name,
                            idx, got, r, lim);
                bad++;
            }
            if (lim > 0 && err / lim > worst)
                worst = err / lim;
        }
        free(raw);
        t_check = wall_s() - t_check;
        double flops = is_conv(tc) ? 2.0 * (double)geo.cn * geo.co * geo.oh * geo.ow *
                                         (geo.cc / t->attrs.i[6]) * geo.kh * geo.kw
                                   : 2.0 * (double)geo.batch * geo.M * geo.N * geo.K;
        double tflops = 0;
        if (tc->timed && !quick) {
            void *e0, *e1;
            CU(cu.EventCreate(&e0, 0));
            CU(cu.EventCreate(&e1, 0));
            for (int i = 0; i < 3; i++)
                CU(cu.Launch(vfn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                             NULL, params, NULL));
            int reps = 20;
            CU(cu.EventRecord(e0, NULL));
            for (int i = 0; i < reps; i++)
                CU(cu.Launch(vfn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                             NULL, params, NULL));
            CU(cu.EventRecord(e1, NULL));
            CU(cu.EventSync(e1));
            float ms;
            CU(cu.EventElapsed(&ms, e0, e1));
            tflops = flops * reps / (ms * 1e-3) / 1e12;
        }
        printf("%-34s mode %d%s tile %dx%dx%d st %d thr %d smem %6u grid %ux%ux%u ws %8zu  %s "
               "(worst %.2f of limit, %zu/%zu checked)",
               tc->name, cfg.mode,
               variant && tl.splits > 1 ? " tma split-K"
               : variant                ? " tma"
               : !cfg.wg                ? ""
               : cfg.wn == 2            ? " wgmma-n2"
                                        : " wgmma",
               variant ? 128 : cfg.bm, variant ? cfg.tma_bn : cfg.bn, cfg.bk,
               variant ? cfg.tma_stages : cfg.stages, variant ? 384 : cfg.threads, smem, grid[0],
               grid[1], grid[2], variant ? tl.ws_bytes : ws_n, bad ? "FAIL" : "ok", worst, samples,
               total);
        if (tflops > 0)
            printf("  %.1f TFLOP/s", tflops);
        /* where a case's seconds go (the first line of a case: compile and setup too) */
        if (variant)
            printf("  [check %.2f s]\n", t_check);
        else
            printf("  [compile %.2f s, setup %.2f s, check %.2f s]\n", t_compile, t_setup, t_check);
        bad_any |= bad != 0;
    }
    for (int i = 0; i < nb; i++) {
        cu.MemFree(hb[i].d);
        free(hb[i].f);
    }
    if (ws)
        cu.MemFree(ws);
    if (tws)
        cu.MemFree(tws);
    cu.ModuleUnload(mod);
    free(cubin);
    free(src);
    kir_args_free(&slots);
    kir_kernel_free(k);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
    return bad_any;
}

int main(int argc, char **argv)
{
    setenv("TGC_CUDA_TMA", "1", 0);   /* both entries checked and timed, unless asked otherwise */
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut by a time limit keeps every finished line */
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    int wsweep = argc > 1 && !strcmp(argv[1], "sweep-wgmma");
    int sweep = wsweep || (argc > 1 && !strcmp(argv[1], "sweep"));
    int sm = 90, sms = 132;
    if (argc > 2 && !strcmp(argv[1], "emit"))
        g_emit_dir = argv[2];
    if (!g_emit_dir && !cu_open(&sm, &sms)) {
        printf("bench_cuda_gemm: no GPU (libcuda.so.1 / device unavailable): nothing run\n");
        return 77;
    }
    if (!g_emit_dir && tgc_nvrtc_load() != TGC_OK) {
        printf("bench_cuda_gemm: %s\n", tgc_last_error());
        return 77;
    }
    const tgc_matmul_precision H = TGC_PRECISION_HIGHEST, T = TGC_PRECISION_HIGH,
                               M = TGC_PRECISION_MEDIUM;
    const tcase cases[] = {
        {"mm f32 highest 4096", C_MATMUL, TGC_F32, H, {4096, 4096, 4096}, 1, 0, NULL},
        {"mm f32 tf32 4096", C_MATMUL, TGC_F32, T, {4096, 4096, 4096}, 1, 0, NULL},
        {"mm f32 bf16 4096", C_MATMUL, TGC_F32, M, {4096, 4096, 4096}, 1, 0, NULL},
        {"mm f16 4096", C_MATMUL, TGC_F16, H, {4096, 4096, 4096}, 1, 0, NULL},
        {"mm bf16 4096", C_MATMUL, TGC_BF16, H, {4096, 4096, 4096}, 1, 0, NULL},
        {"mm f32 highest odd", C_MATMUL, TGC_F32, H, {333, 517, 201}, 0, 0, NULL},
        {"mm f32 tf32 odd", C_MATMUL, TGC_F32, T, {333, 517, 201}, 0, 0, NULL},
        {"mm f32 bf16 odd", C_MATMUL, TGC_F32, M, {333, 517, 201}, 0, 0, NULL},
        {"mm f16 odd", C_MATMUL, TGC_F16, H, {333, 517, 203}, 0, 0, NULL},
        {"mm bf16 odd", C_MATMUL, TGC_BF16, H, {333, 517, 203}, 0, 0, NULL},
        {"mm f32 tf32 K%4!=0 (no vec)", C_MATMUL, TGC_F32, T, {130, 130, 131}, 0, 0, NULL},
        {"mm f16 K%8!=0 (no vec)", C_MATMUL, TGC_F16, H, {130, 130, 131}, 0, 0, NULL},
        {"mmT f32 highest", C_MATMUL_TA, TGC_F32, H, {300, 260, 170}, 0, 0, NULL},
        {"mmT f32 tf32", C_MATMUL_TA, TGC_F32, T, {300, 260, 170}, 0, 0, NULL},
        {"mmT bf16", C_MATMUL_TA, TGC_BF16, H, {300, 264, 176}, 0, 0, NULL},
        {"linear f32 highest", C_LINEAR, TGC_F32, H, {1024, 768, 768}, 0, 0, NULL},
        {"linear f32 tf32", C_LINEAR, TGC_F32, T, {1024, 3072, 768}, 1, 0, NULL},
        {"linear f16", C_LINEAR, TGC_F16, H, {1024, 3072, 768}, 1, 0, NULL},
        {"linear bf16 small-M", C_LINEAR, TGC_BF16, H, {8, 768, 768}, 0, 0, NULL},
        /* BERT-base's projections at batch 8 x sequence 128 (M = 1024) */
        {"bert qkv bf16", C_LINEAR, TGC_BF16, H, {1024, 2304, 768}, 1, 0, NULL},
        {"bert out bf16", C_LINEAR, TGC_BF16, H, {1024, 768, 768}, 1, 0, NULL},
        {"bert ffn1 bf16", C_LINEAR, TGC_BF16, H, {1024, 3072, 768}, 1, 0, NULL},
        {"bert ffn2 bf16", C_LINEAR, TGC_BF16, H, {1024, 768, 3072}, 1, 0, NULL},
        {"bert qkv tf32", C_LINEAR, TGC_F32, T, {1024, 2304, 768}, 1, 0, NULL},
        {"bert out tf32", C_LINEAR, TGC_F32, T, {1024, 768, 768}, 1, 0, NULL},
        {"bert ffn1 tf32", C_LINEAR, TGC_F32, T, {1024, 3072, 768}, 1, 0, NULL},
        {"bert ffn2 tf32", C_LINEAR, TGC_F32, T, {1024, 768, 3072}, 1, 0, NULL},
        {"linear tf32 4096", C_LINEAR, TGC_F32, T, {4096, 4096, 4096}, 1, 0, NULL},
        {"linear f32 bf16 4096", C_LINEAR, TGC_F32, M, {4096, 4096, 4096}, 1, 0, NULL},
        {"linear bf16 4096", C_LINEAR, TGC_BF16, H, {4096, 4096, 4096}, 1, 0, NULL},
        {"linear f16 edges", C_LINEAR, TGC_F16, H, {1000, 1000, 1000}, 0, 0, NULL},
        {"bmm NT bf16 batched", C_BMM_NT, TGC_BF16, H, {512, 512, 128, 24}, 1, 0, NULL},
        {"bmm B2 f16 broadcast B", C_BMM_B2, TGC_F16, H, {384, 256, 320, 6}, 0, 0, NULL},
        {"bmm NT f32 tf32", C_BMM_NT, TGC_F32, T, {128, 128, 64, 96}, 0, 0, NULL},
        {"bmm NT f32 highest", C_BMM_NT, TGC_F32, H, {100, 77, 64, 12}, 0, 0, NULL},
        {"bmm NT f16", C_BMM_NT, TGC_F16, H, {128, 128, 64, 96}, 0, 0, NULL},
        {"splitK f32 highest", C_MATMUL, TGC_F32, H, {64, 10, 16384}, 0, 0, NULL},
        {"splitK f32 tf32", C_MATMUL, TGC_F32, T, {256, 256, 16384}, 1, 0, NULL},
        {"splitK bf16", C_MATMUL, TGC_BF16, H, {64, 100, 8192}, 0, 0, NULL},
        {"conv3x3 f32 highest",
         C_CONV,
         TGC_F32,
         H,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         1,
         0,
         NULL},
        {"conv3x3 f32 tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         1,
         0,
         NULL},
        {"conv3x3 f32 bf16",
         C_CONV,
         TGC_F32,
         M,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         0,
         0,
         NULL},
        {"conv3x3 bf16", C_CONV, TGC_BF16, H, {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1}, 1, 0, NULL},
        {"conv3x3 256ch tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1},
         1,
         0,
         NULL},
        {"conv stem 7x7/2 tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1},
         0,
         0,
         NULL},
        {"conv s2 d2 g2 highest",
         C_CONV,
         TGC_F32,
         H,
         {8, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2},
         0,
         0,
         NULL},
        {"conv s2 d2 g2 tf32",
         C_CONV,
         TGC_F32,
         T,
         {8, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2},
         0,
         0,
         NULL},
        {"conv s2 d2 g2 f16",
         C_CONV,
         TGC_F16,
         H,
         {8, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2},
         0,
         0,
         NULL},
        {"conv depthwise tf32",
         C_CONV,
         TGC_F32,
         T,
         {4, 32, 9, 9, 32, 3, 3, 1, 1, 1, 32},
         0,
         0,
         NULL},
        {"conv 1x1/2 tf32", C_CONV, TGC_F32, T, {64, 256, 8, 8, 512, 1, 1, 2, 0, 1, 1}, 0, 0, NULL},
        {"conv 512ch 2x2 splitK tf32",
         C_CONV,
         TGC_F32,
         T,
         {2, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1},
         0,
         0,
         NULL},
        {"linear+bias+relu f32 highest", C_LINEAR, TGC_F32, H, {512, 768, 768}, 0, 1, NULL},
        {"linear+bias+relu f32 tf32", C_LINEAR, TGC_F32, T, {1024, 3072, 768}, 1, 1, NULL},
        {"linear+bias+relu bf16", C_LINEAR, TGC_BF16, H, {1024, 3072, 768}, 1, 1, NULL},
        {"conv+bias+res+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"conv+bias+res+relu f16",
         C_CONV,
         TGC_F16,
         H,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         0,
         2,
         NULL},
        {"conv+bias+relu g2 highest",
         C_CONV,
         TGC_F32,
         H,
         {8, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2},
         0,
         1,
         NULL},
        {"bmm NT x0.125 f16", C_BMM_NT, TGC_F16, H, {128, 128, 64, 96}, 0, 3, NULL},
        /* MEDIUM (bf16 mma of f32 operands) at the shapes of test_cuda_public's big cases,
         * checked against the bf16-rounded reference (a tight bound, see the top) */
        {"bf16x linear 77x768x768 +b+relu", C_LINEAR, TGC_F32, M, {77, 768, 768}, 0, 1, NULL},
        {"bf16x linear 77x768 K3072 +b+relu", C_LINEAR, TGC_F32, M, {77, 768, 3072}, 0, 1, NULL},
        {"bf16x linear 2x77x3072 K768 +b+relu",
         C_LINEAR,
         TGC_F32,
         M,
         {77, 3072, 768, 2},
         0,
         1,
         NULL},
        {"bf16x linear 8x77x768 K768 +b+relu", C_LINEAR, TGC_F32, M, {77, 768, 768, 8}, 0, 1, NULL},
        {"bf16x mm 127x1024 K512", C_MATMUL, TGC_F32, M, {127, 1024, 512}, 0, 0, NULL},
        {"bf16x mm 127x33 K65", C_MATMUL, TGC_F32, M, {127, 33, 65}, 0, 0, NULL},
        {"bf16x mm 127x129 K257", C_MATMUL, TGC_F32, M, {127, 129, 257}, 0, 0, NULL},
        {"bf16x bmm 3x127x200 K65 (2-D B)", C_BMM_B2, TGC_F32, M, {127, 200, 65, 3}, 0, 0, NULL},
        {"bf16x conv stem 7x7/2 8x3x32x32",
         C_CONV,
         TGC_F32,
         M,
         {8, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1},
         0,
         0,
         NULL},
        {"bf16x conv s2 d2 g4 4x16x33x31",
         C_CONV,
         TGC_F32,
         M,
         {4, 16, 33, 31, 32, 3, 3, 2, 2, 2, 4},
         0,
         0,
         NULL},
        /* the convolutions of ResNet18 (torchvision layout) on CIFAR-sized input, batch 64:
         * small problems, where the tile count and the per-block cost decide */
        {"r18 stem 7x7/2 +b+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1},
         1,
         1,
         NULL},
        {"r18 l1 64ch 8x8 +b+res+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"r18 l2 128ch 4x4 +b+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 128, 4, 4, 128, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l3 256ch 2x2 +b+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 256, 2, 2, 256, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l4 512ch 1x1 +b+relu tf32",
         C_CONV,
         TGC_F32,
         T,
         {64, 512, 1, 1, 512, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l1 64ch 8x8 +b+res+relu bf16",
         C_CONV,
         TGC_BF16,
         H,
         {64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"r18 l4 512ch 1x1 +b+relu bf16",
         C_CONV,
         TGC_BF16,
         H,
         {64, 512, 1, 1, 512, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        /* the same convolutions channels-last (x NHWC, w OHWI, read in place) */
        {"r18 stem 7x7/2 +b+relu tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {64, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1},
         1,
         1,
         NULL},
        {"r18 l1 64ch 8x8 +b+res+relu tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"r18 l1 64ch 8x8 +b+res+relu tf32 cl nhwc",
         C_CONV_CLO,
         TGC_F32,
         T,
         {64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"r18 l2 128ch 4x4 +b+relu tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {64, 128, 4, 4, 128, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l3 256ch 2x2 +b+relu tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {64, 256, 2, 2, 256, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l4 512ch 1x1 +b+relu tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {64, 512, 1, 1, 512, 3, 3, 1, 1, 1, 1},
         1,
         1,
         NULL},
        {"r18 l1 64ch 8x8 +b+res+relu bf16 cl",
         C_CONV_CL,
         TGC_BF16,
         H,
         {64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1},
         1,
         2,
         NULL},
        {"conv3x3 f32 highest cl",
         C_CONV_CL,
         TGC_F32,
         H,
         {64, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1},
         1,
         0,
         NULL},
        {"conv3x3 256ch tf32 cl",
         C_CONV_CL,
         TGC_F32,
         T,
         {32, 256, 16, 16, 256, 3, 3, 1, 1, 1, 1},
         1,
         0,
         NULL},
    };
    static const int big_tile[6] = {128, 256, 32, 2, 4, 3};
    /* emit: small shapes with every feature, every mode (the CPU emulator is slow) */
    enum { NE = 128 };
    static tcase emu[NE];
    static int emu_sm[NE]; /* the architecture each is rendered for */
    static char names[NE][64];
    int ne = 0;
    if (g_emit_dir) {
        const struct {
            const char *name;
            ckind kind;
            int all_modes; /* 0: tf32 and f16 only, 1: every mode, 2: MEDIUM only */
            int64_t d[11];
            int epi;
            const int *tile; /* a name starting "sm80 " renders for sm_80, others for sm_90 */
        } base[] = {
            {"linear+bias+relu", C_LINEAR, 1, {150, 72, 48}, 1, NULL},
            {"conv+bias+res+relu", C_CONV, 1, {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, 2, NULL},
            {"conv+bias+relu g2", C_CONV, 0, {3, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2}, 1, NULL},
            {"bmm NT x0.125", C_BMM_NT, 0, {40, 24, 32, 3}, 3, NULL},
            {"mm odd", C_MATMUL, 1, {133, 77, 70}, 0, NULL},
            {"mmT", C_MATMUL_TA, 1, {70, 136, 40}, 0, NULL},
            {"linear", C_LINEAR, 1, {150, 72, 48}, 0, NULL},
            {"bmm NT", C_BMM_NT, 1, {40, 24, 32, 3}, 0, NULL},
            {"splitK", C_MATMUL, 1, {64, 10, 2048}, 0, NULL},
            {"conv3x3", C_CONV, 1, {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, 0, NULL},
            {"conv s2 d2 g2", C_CONV, 1, {3, 16, 15, 17, 32, 3, 3, 2, 2, 2, 2}, 0, NULL},
            {"mm K%vec", C_MATMUL, 0, {130, 66, 131}, 0, NULL},
            {"conv stem 7x7/2", C_CONV, 0, {2, 3, 16, 16, 16, 7, 7, 2, 3, 1, 1}, 0, NULL},
            {"conv depthwise", C_CONV, 0, {2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 32}, 0, NULL},
            {"conv 1x1/2", C_CONV, 0, {2, 32, 8, 8, 64, 1, 1, 2, 0, 1, 1}, 0, NULL},
            {"conv splitK", C_CONV, 0, {1, 64, 4, 4, 64, 3, 3, 1, 1, 1, 1}, 0, NULL},
            {"mm 200x130 M>64", C_MATMUL, 0, {200, 130, 64}, 0, NULL},
            {"mm tile 128x256", C_MATMUL, 1, {300, 520, 96}, 0, big_tile},
            {"linear tile 128x256", C_LINEAR, 0, {140, 300, 64}, 1, big_tile},
            /* the TMA entry (TF32, f16, bf16): an MN-major B, then A, over more k tiles than
             * its ring has stages, tiles cut at both edges, several tiles per block; a B
             * broadcast over the batch */
            {"tma mm ring", C_MATMUL, 1, {264, 200, 720}, 0, NULL},
            {"tma mmT ring", C_MATMUL_TA, 1, {264, 200, 720}, 0, NULL},
            {"tma bmm B2", C_BMM_B2, 0, {136, 192, 96, 3}, 0, NULL},
            /* two tiles of a long k: split-K in the TMA entry, units over several blocks */
            {"tma splitK", C_MATMUL, 1, {200, 104, 1440}, 0, NULL},
            {"tma bmm NT splitK", C_BMM_NT, 0, {64, 64, 2048, 2}, 0, NULL},
            {"tma splitK linear+bias+relu", C_LINEAR, 0, {200, 104, 1440}, 1, NULL},
            /* all_modes 2: MEDIUM only, shapes of test_cuda_public's big cases (long K: the
             * stages are refilled many times, split-K) */
            {"bf16x linear 77x768 K768", C_LINEAR, 2, {77, 768, 768}, 1, NULL},
            {"bf16x mm 127x1024 K512", C_MATMUL, 2, {127, 1024, 512}, 0, NULL},
            {"bf16x mm 127x33 K65", C_MATMUL, 2, {127, 33, 65}, 0, NULL},
            {"bf16x mm 127x129 K257", C_MATMUL, 2, {127, 129, 257}, 0, NULL},
            {"bf16x bmm 3x127x200 K65", C_BMM_B2, 2, {127, 200, 65, 3}, 0, NULL},
            {"bf16x conv stem 7x7/2", C_CONV, 2, {8, 3, 32, 32, 64, 7, 7, 2, 3, 1, 1}, 0, NULL},
            {"bf16x conv s2 d2 g4", C_CONV, 2, {4, 16, 33, 31, 32, 3, 3, 2, 2, 2, 4}, 0, NULL},
            {"bf16x cl conv 64ch 16x16 +b+relu",
             C_CONV_CL,
             2,
             {8, 64, 16, 16, 128, 3, 3, 1, 1, 1, 1},
             1,
             NULL},
            /* channels-last convolutions: 16-byte chunks of channels (8 and 16 of them), 6
             * channels (element by element), split-K; on sm_80 the mma.sync paths */
            {"cl conv+bias+res+relu", C_CONV_CL, 1, {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, 2, NULL},
            {"cl conv s2 d2 g2", C_CONV_CL, 0, {3, 32, 15, 17, 32, 3, 3, 2, 2, 2, 2}, 0, NULL},
            {"cl conv 6ch", C_CONV_CL, 1, {2, 6, 7, 7, 16, 3, 3, 1, 1, 1, 1}, 0, NULL},
            {"cl conv stem 7x7/2", C_CONV_CL, 0, {2, 3, 16, 16, 16, 7, 7, 2, 3, 1, 1}, 0, NULL},
            {"cl conv splitK", C_CONV_CL, 0, {1, 64, 4, 4, 64, 3, 3, 1, 1, 1, 1}, 0, NULL},
            {"sm80 cl conv+bias+res+relu",
             C_CONV_CL,
             0,
             {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1},
             2,
             NULL},
            {"sm80 cl conv s2 d2 g2", C_CONV_CL, 0, {3, 32, 15, 17, 32, 3, 3, 2, 2, 2, 2}, 0, NULL},
            /* the result stored channels-last (NHWC) by the epilogue, split-K included */
            {"cl conv+bias+res+relu nhwc out",
             C_CONV_CLO,
             1,
             {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1},
             2,
             NULL},
            {"cl conv s2 d2 g2 nhwc out",
             C_CONV_CLO,
             0,
             {3, 32, 15, 17, 32, 3, 3, 2, 2, 2, 2},
             0,
             NULL},
            {"cl conv splitK nhwc out",
             C_CONV_CLO,
             0,
             {1, 64, 4, 4, 64, 3, 3, 1, 1, 1, 1},
             0,
             NULL},
            {"sm80 cl conv+bias+res+relu nhwc out",
             C_CONV_CLO,
             0,
             {2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1},
             2,
             NULL},
        };
        const struct {
            const char *tag;
            tgc_dtype dt;
            tgc_matmul_precision p;
        } modes[5] = {{"f32 highest", TGC_F32, H},
                      {"f32 tf32", TGC_F32, T},
                      {"f32 bf16", TGC_F32, M},
                      {"f16", TGC_F16, H},
                      {"bf16", TGC_BF16, H}};
        for (size_t b = 0; b < sizeof base / sizeof base[0]; b++)
            for (int m = 0; m < 5; m++) {
                if (!base[b].all_modes && m != 1 && m != 3)
                    continue;
                if (base[b].all_modes == 2 && m != 2)
                    continue;
                if (base[b].all_modes == 2)
                    snprintf(names[ne], sizeof names[ne], "%s", base[b].name);
                else
                    snprintf(names[ne], sizeof names[ne], "%s %s", base[b].name, modes[m].tag);
                emu[ne] = (tcase){names[ne], base[b].kind, modes[m].dt, modes[m].p, {0},
                                  0,         base[b].epi,  base[b].tile};
                emu_sm[ne] = strncmp(base[b].name, "sm80 ", 5) ? sm : 80;
                memcpy(emu[ne].d, base[b].d, sizeof emu[ne].d);
                ne++;
            }
    }
    int fails = 0;
    if (g_emit_dir) {
        for (int i = 0; i < ne; i++) {
            g_case_idx = i;
            fails += run_case(&emu[i], emu_sm[i], sms, quick, NULL);
        }
        printf("bench_cuda_gemm: wrote %d cases to %s\n", ne, g_emit_dir);
        return fails ? 1 : 0;
    }
    const char *only = argc > 2 ? argv[2] : NULL;
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_case_idx = (int)i;
        if (only && !strstr(cases[i].name, only))
            continue;
        ran++;
        fails += run_case(&cases[i], sm, sms, quick, NULL);
        if (!sweep || !cases[i].timed)
            continue;
        /* bm bn bk wm wn stages */
        static const int tiles[][6] = {
            {128, 128, 32, 2, 4, 4}, {128, 128, 32, 2, 2, 3}, {128, 128, 32, 2, 2, 4},
            {128, 256, 32, 2, 4, 3}, {256, 128, 32, 4, 2, 3}, {128, 256, 32, 2, 4, 4},
            {128, 128, 16, 2, 4, 4}, {128, 128, 64, 2, 4, 3}, {64, 128, 32, 2, 2, 4},
            {128, 128, 8, 0, 0, 2},  {128, 128, 8, 0, 0, 3},  {128, 128, 8, 0, 0, 5},
            {128, 128, 16, 0, 0, 2}, {128, 128, 16, 0, 0, 3}, {128, 128, 16, 0, 0, 4},
        };
        for (size_t t = 0; t < (wsweep ? 0 : sizeof tiles / sizeof tiles[0]); t++) {
            tgc_cuda_tpl f = {.bm = tiles[t][0],
                              .bn = tiles[t][1],
                              .bk = tiles[t][2],
                              .wm = tiles[t][3],
                              .wn = tiles[t][4],
                              .stages = tiles[t][5]};
            int simt_tile = f.wm == 0;
            if (simt_tile != (cases[i].dt == TGC_F32 && cases[i].prec == H))
                continue;
            fails += run_case(&cases[i], sm, sms, quick, &f);
        }
        /* sm_90 wgmma tiles (warpgroups, of them along N, bn, stages; bk: one 128-byte
         * row), where the case's mode and layouts have them */
        static const int wtiles[][4] = {{2, 1, 256, 4}, {2, 1, 256, 3}, {2, 1, 128, 4},
                                        {2, 1, 128, 6}, {1, 1, 256, 4}, {1, 1, 128, 6},
                                        {2, 1, 192, 4}, {3, 1, 128, 4}, {2, 2, 128, 4},
                                        {2, 2, 256, 4}, {2, 2, 128, 6}, {1, 1, 64, 6}};
        int es = cases[i].dt == TGC_F32 ? 4 : 2;
        if (sm != 90 || (cases[i].dt == TGC_F32 && cases[i].prec != T))
            continue;
        for (size_t t = 0; t < sizeof wtiles / sizeof wtiles[0]; t++) {
            tgc_cuda_tpl f = {.wg = wtiles[t][0],
                              .wn = wtiles[t][1],
                              .bm = 64 * wtiles[t][0] / wtiles[t][1],
                              .bn = wtiles[t][2],
                              .bk = 128 / es,
                              .stages = wtiles[t][3]};
            fails += run_case(&cases[i], sm, sms, quick, &f);
        }
        /* the TMA entry's tiles (bn, stages), beside the chosen wgmma tile */
        static const int ttiles[][2] = {{256, 4}, {256, 3}, {192, 5}, {192, 4},
                                        {128, 7}, {128, 5}, {128, 4}};
        for (size_t t = 0; wsweep && t < sizeof ttiles / sizeof ttiles[0]; t++) {
            tgc_cuda_tpl f = {.wg = 2,
                              .wn = 1,
                              .bm = 128,
                              .bn = 128,
                              .bk = 128 / es,
                              .stages = 4,
                              .tma_bn = ttiles[t][0],
                              .tma_stages = ttiles[t][1]};
            fails += run_case(&cases[i], sm, sms, quick, &f);
        }
    }
    printf("bench_cuda_gemm: %d of %d cases failed (sm_%d, %d SMs)\n", fails, ran, sm, sms);
    return fails ? 1 : 0;
}
#endif
