/* The fast f32 conv2d backward kernels of the CUDA backend: CONV2D_GRAD_INPUT (dgrad) and
 * CONV2D_GRAD_WEIGHT (wgrad) as implicit-GEMM templates (cuda_conv_grad_lib.cuh on top of
 * cuda_gemm_lib.cuh): SIMT fp32 for TGC_PRECISION_HIGHEST, TF32 mma.sync for HIGH (dgrad
 * on sm_90: wgmma from swizzled shared-memory stages), bf16 mma.sync (operands rounded from
 * fp32) for MEDIUM, fp32 accumulation, split-K for wgrad
 * with the library's deterministic last-block reduction in split order (no float atomics:
 * the same bits on every run).
 *
 * The kernels read their geometry at run time (no size is compiled in), so one program per
 * (precision mode, tile variant) serves every conv: the programs of a mode come from the
 * program cache (cuda_program.h) on first use per device: compiled by NVRTC all at once on
 * several threads, once per process and architecture (or loaded from the cache directory),
 * and loaded once per device. cuda_ops.c calls tgc_cuda_conv_grad_run for f32 nodes whose
 * geometry tgc_cuda_conv_grad_fits accepts (the generic kernel of cuda_ops_kernels.cu takes
 * the rest, and every other dtype). Each program has entries over NCHW operands and over
 * channels-last ones (x and dy NHWC, their loaders moving 16-byte chunks of channels; dx and
 * dw keep their layouts), so a training step whose activations are channels-last reads them
 * in place.
 *
 * Thread-safety: every function may be called from any thread (one mutex guards the
 * per-device kernel tables; launches run outside it). */
#ifndef TGC_BACKEND_CUDA_CONV_GRAD_H
#define TGC_BACKEND_CUDA_CONV_GRAD_H

#include <stddef.h>
#include <stdint.h>

#include "tgc/config.h"
#include "tgc/tensor.h"

/* One conv backward call. x [n, c, h, w], dy [n, o, oh, ow], w [o, c / groups, kh, kw]. */
typedef struct tgc_cg_args {
    int wgrad; /* 0: dx = dgrad(dy, w); 1: dw = wgrad(x, dy) */
    int cl;    /* 1: dy (and for wgrad x) channels-last, NHWC contiguous; dx and dw as below */
    int64_t n, c, h, w, o, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw, dh, dw, groups;
    const void *x;  /* wgrad: x, NCHW contiguous f32 (cl: NHWC) */
    const void *dy; /* dy, NCHW contiguous f32 (cl: NHWC) */
    const void *wt; /* dgrad: the weights, f32 with strides wst (elements) */
    int64_t wst[4];
    void *out; /* dx [n, c, h, w] or dw [o, c / groups, kh, kw], contiguous f32 */
} tgc_cg_args;

/* 1 when the templates take a's geometry (positive sizes, every index below 2^31, per axis
 * not both a stride and a dilation above 1 for dgrad, at most 65535 (group, phase) pairs),
 * in either layout. */
int tgc_cuda_conv_grad_fits(const tgc_cg_args *a);

/* Queues the kernels for a on device dev's stream `stream` (NULL: the thread's own): for
 * dgrad a weight-packing kernel, then the GEMM; for wgrad the GEMM (split over K when its
 * tiles leave most SMs idle). Temporary buffers come from the device's caching allocator on
 * the thread's stream and go back to it after the launches (stream-ordered reuse).
 * prec is the variant's cfg.matmul_precision (the mode: tgc_cuda_f32_mode); cache_dir the
 * program cache's directory (NULL: memory only).
 * Errors: TGC_ERR_DEVICE / TGC_ERR_COMPILE (NVRTC, with its log) / TGC_ERR_OOM /
 * TGC_ERR_RUNTIME from the driver. */
/* Loads the conv-gradient programs of precision prec on device dev now (through the program
 * cache, as the first tgc_cuda_conv_grad_run would): the CUDA compile runs it beside a
 * variant's kernels when the variant has conv-gradient steps. Thread-safe; a failure is
 * remembered and repeated by every later run on dev, as a failure there would be. */
tgc_status tgc_cuda_conv_grad_load(int dev, tgc_matmul_precision prec, const char *cache_dir);

tgc_status tgc_cuda_conv_grad_run(const tgc_cg_args *a, tgc_matmul_precision prec, int dev,
                                  void *stream, const char *cache_dir);

/* The program of precision mode `mode` (tgc_cuda_tpl_mode: 0 SIMT, 1 TF32, 2 BF16X) and tile
 * variant (0: 128-row tiles, 1: 64-row tiles, mma.sync or SIMT; SIMT has only 0; TF32 also
 * 2: 128-row and 3: 64-row wgmma tiles, for sm_90a): malloc'd text (caller frees),
 * NULL for a bad mode / variant or out of memory. Entry points tgc_cg_dgrad, tgc_cg_wgrad,
 * tgc_cg_pack, tgc_cg_dgrad_cl and (but for wgmma tiles) tgc_cg_wgrad_cl. Pure; for tests (NVRTC in
 * CI, the CPU emulator). */
char *tgc_cuda_conv_grad_source(int mode, int variant);

/* The launch configuration of a program (for the emulator and tests): block threads and the
 * dynamic shared memory of its dgrad / wgrad entry over NCHW operands (cl 0: tgc_cg_dgrad,
 * tgc_cg_wgrad) or channels-last ones (cl 1: tgc_cg_dgrad_cl, tgc_cg_wgrad_cl; *smem_wgrad 0
 * for the wgmma variants, which have no channels-last wgrad). */
void tgc_cuda_conv_grad_config(int mode, int variant, int cl, int *threads, unsigned *smem_dgrad,
                               unsigned *smem_wgrad);

/* How a call is launched (tgc_cuda_conv_grad_run's choice, exposed for the emulator and
 * tests) on a device of architecture sm (e.g. 90) with sms multiprocessors: the program
 * (mode, variant), the GEMM's grid (x tiles, y splits, z groups or
 * (group, phase) pairs), block threads, dynamic smem, the workspace bytes (0: none) of which
 * the first zero_bytes (split-K counters) must be zero, and the packed-weight floats (dgrad). */
typedef struct tgc_cg_launch {
    int mode, variant;
    unsigned grid[3], threads, smem;
    size_t ws_bytes, zero_bytes, packed;
} tgc_cg_launch;
void tgc_cuda_conv_grad_plan(const tgc_cg_args *a, tgc_matmul_precision prec, int sm, int sms,
                             tgc_cg_launch *l);

#endif
