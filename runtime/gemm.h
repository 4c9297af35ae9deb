/* The f32 GEMM / conv2d driver: cache blocking, packing buffers, threads and the batch loop
 * around JIT-compiled pieces (a register-blocked micro-kernel with a fused epilogue, and the
 * packing routines) that src/backend/llvm/llvm_gemm.c emits and binds into a
 * tgc_gemm_kernel. This header needs no LLVM: the runtime calls the code through plain
 * function pointers.
 *
 * Problems:
 *   GEMM  for b in [0,batch): C_b[m,n] = ep(sum_k A_b[m,k] * B_b[k,n]) with element strides
 *         A[b*a_bs + m*a_rs + k*a_cs], B[b*b_bs + k*b_rs + n*b_cs], C[b*c_bs + m*c_rs + n].
 *         Any strides, 0 included (a broadcast batch).
 *   conv2d  x NCHW [N,C,H,W], w [O, C/groups, KH, KW], y NCHW [N,O,OH,OW] contiguous, with
 *         stride, symmetric padding, dilation and groups. Computed per image and group as
 *         an implicit GEMM y[o,p] = sum_k w[o,k] * im2col(x)[k,p] whose B panels are packed
 *         straight from x (padding reads as zero); im2col is never materialized.
 *
 * Threading: a kernel is immutable after tgc_gemm_kernel_bind; tgc_gemm_run / tgc_conv_run
 * may be called on one kernel from many threads at once. Packing buffers are per thread,
 * 64-byte aligned, grown on demand, reused across calls and freed when the thread exits. */
#ifndef TGC_RUNTIME_GEMM_H
#define TGC_RUNTIME_GEMM_H

#include <stdint.h>

#include "tgc/tensor.h"

/* C[0..mr) x [0..nr) (row stride ldc) = (flags & ACCUM ? C : 0) + Ap * Bp over kc, where Ap is
 * one packed MR-row panel ([kc][MR]) and Bp one packed NR-column panel ([kc][NR]), both zero
 * padded. */
typedef void (*tgc_gemm_ukr_fn)(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                                int64_t mr, int64_t nr, int32_t flags);
enum { TGC_GEMM_UKR_ACCUM = 1 };
/* The fused epilogue over a finished tile: C[i,j] = ep(C[i,j]) for i < mr, j < nr, where c
 * points at C[m0, n0] of batch item `batch` (for conv: image n, channel m0, pixel n0). */
typedef void (*tgc_gemm_ep_fn)(float *c, int64_t ldc, int64_t mr, int64_t nr, void *ep_args,
                               int64_t batch, int64_t m0, int64_t n0);
/* Packs rows [0,mc) x cols [0,kc) of A (element strides rs, cs) into ceil(mc/MR) panels of
 * [kc][MR] floats, the last panel zero padded. */
typedef void (*tgc_gemm_pack_a_fn)(const float *a, int64_t rs, int64_t cs, int64_t mc, int64_t kc,
                                   float *ap);
/* Packs rows [0,kc) x cols [0,nc) of B into ceil(nc/NR) panels of [kc][NR] floats. */
typedef void (*tgc_gemm_pack_b_fn)(const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t nc,
                                   float *bp);
/* Packs im2col rows [k0,k0+kc) x output pixels [p0,p0+nc) of one image and group (x points
 * at its first input channel) into ceil(nc/NR) panels of [kc][NR]; geom is
 * TGC_CONV_GEOM_COUNT int64 values (see tgc_conv_geom). */
typedef void (*tgc_conv_pack_b_fn)(const float *x, const int64_t *geom, int64_t k0, int64_t kc,
                                   int64_t p0, int64_t nc, float *bp);

/* Indices into the conv geometry array the packing routine reads. */
enum tgc_conv_geom {
    TGC_CG_C, /* input channels per group */
    TGC_CG_H,
    TGC_CG_W,
    TGC_CG_KH,
    TGC_CG_KW,
    TGC_CG_SH,
    TGC_CG_SW,
    TGC_CG_PH,
    TGC_CG_PW,
    TGC_CG_DH,
    TGC_CG_DW,
    TGC_CG_OH,
    TGC_CG_OW,
    TGC_CONV_GEOM_COUNT
};

typedef struct tgc_conv_params {
    int64_t n, c, h, w; /* input NCHW */
    int64_t o, kh, kw;  /* output channels and kernel size */
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
} tgc_conv_params;

/* Register and cache blocking; 0 fields mean "the default for the target". */
typedef struct tgc_gemm_config {
    int mr;     /* rows of the micro-tile */
    int nr_vec; /* columns of the micro-tile, in vectors */
    int ku;     /* k-loop unroll */
    int kc, mc, nc;
} tgc_gemm_config;

enum { TGC_GEMM_KIND_GEMM = 1, TGC_GEMM_KIND_CONV = 2 };
enum { TGC_GEMM_NAME_MAX = 96 };

/* What the emitter made and the driver calls. Plain data: copyable; owns nothing (the code
 * belongs to the tgc_llvm_code it was bound from, which must outlive every run). */
typedef struct tgc_gemm_kernel {
    int kind;
    int mr, nr, vl, ku;
    int kc, mc, nc; /* cache blocking (kc a multiple of 8, mc of mr, nc of nr) */
    int has_static;
    tgc_conv_params static_params; /* conv with has_static: must match except for n */
    /* base names of the functions in the unit (tgc_llvm_code_lookup takes these) */
    char ukr_name[TGC_GEMM_NAME_MAX], pack_a_name[TGC_GEMM_NAME_MAX],
        pack_b_name[TGC_GEMM_NAME_MAX], conv_pack_name[TGC_GEMM_NAME_MAX],
        ep_name[TGC_GEMM_NAME_MAX]; /* ep_name "" = no epilogue */
    /* set by tgc_gemm_kernel_bind */
    tgc_gemm_ukr_fn ukr;
    tgc_gemm_pack_a_fn pack_a;
    tgc_gemm_pack_b_fn pack_b;
    tgc_conv_pack_b_fn conv_pack_b;
    tgc_gemm_ep_fn ep; /* NULL = identity */
} tgc_gemm_kernel;

typedef struct tgc_gemm_args {
    int64_t batch, m, n, k;
    const float *a;
    int64_t a_bs, a_rs, a_cs;
    const float *b;
    int64_t b_bs, b_rs, b_cs;
    float *c;
    int64_t c_bs, c_rs;
    void *ep_args; /* handed to the epilogue unchanged */
} tgc_gemm_args;

typedef struct tgc_conv_args {
    tgc_conv_params p;
    const float *x, *w;
    float *y;
    void *ep_args;
} tgc_conv_args;

/* Output height/width of a conv; <= 0 when the window does not fit. */
int64_t tgc_conv_out_h(const tgc_conv_params *p);
int64_t tgc_conv_out_w(const tgc_conv_params *p);
/* TGC_OK or TGC_ERR_INVALID_ARG naming the bad field (negative or zero sizes, channels not
 * divisible by groups, an empty output). */
tgc_status tgc_conv_params_check(const tgc_conv_params *p);

/* Runs a bound GEMM kernel. nthreads: 0 = every core. Errors: TGC_ERR_INVALID_ARG (unbound or
 * conv kernel, negative sizes, NULL pointers with non-empty extents, c_rs < n), TGC_ERR_OOM. */
tgc_status tgc_gemm_run(const tgc_gemm_kernel *k, const tgc_gemm_args *a, int nthreads);
/* Runs a bound conv kernel. Errors: TGC_ERR_INVALID_ARG (bad params, params that differ from
 * the static ones the kernel was emitted for, NULL pointers), TGC_ERR_OOM. */
tgc_status tgc_conv_run(const tgc_gemm_kernel *k, const tgc_conv_args *a, int nthreads);

#endif
