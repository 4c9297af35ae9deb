/* f32 backward kernels of the pools and of embedding, as threaded loops (the LLVM backend's
 * native steps for MAX_POOL2D_GRAD, AVG_POOL2D_GRAD, ADAPTIVE_AVG_POOL2D_GRAD and
 * EMBEDDING_GRAD; semantics in src/ir/ops.def and the interp oracle, k_grad.c).
 *
 * Pools: planes (n * c) are independent tasks; each plane's gradient is accumulated in double
 * in interp's order and rounded once, so the results are interp's bit for bit. Embedding:
 * threads own column slices of the [V, D] result and add dy's rows in index order (f32
 * sums, the same bits for every thread count). Inputs and outputs contiguous.
 * Threading: stateless; any thread may call at once. */
#ifndef TGC_RUNTIME_POOL_GRAD_H
#define TGC_RUNTIME_POOL_GRAD_H

#include <stdint.h>

#include "tgc/tensor.h"

enum { TGC_POOL_GRAD_MAX, TGC_POOL_GRAD_AVG, TGC_POOL_GRAD_ADAPTIVE };

typedef struct tgc_pool_grad_args {
    int kind;                       /* TGC_POOL_GRAD_* */
    int64_t planes, h, w;           /* dx: planes x h x w */
    int64_t oh, ow;                 /* dy: planes x oh x ow */
    int64_t kh, kw, sh, sw, ph, pw; /* MAX / AVG windows (ignored by ADAPTIVE) */
    int exclude_pad;                /* AVG: divide by the taps inside x */
    const float *x;                 /* MAX: the forward input (the picks are recomputed) */
    const float *dy;
    float *dx;
} tgc_pool_grad_args;

/* TGC_ERR_INVALID_ARG (bad sizes, NULL pointers), TGC_ERR_OOM. */
tgc_status tgc_pool2d_grad_run(const tgc_pool_grad_args *a, int nthreads);

/* dw [v, d] = zeros with row ids[j] += dy[j] for j in [0, n); every id in [0, v) (the caller
 * checks). TGC_ERR_INVALID_ARG on bad sizes or NULL pointers. */
tgc_status tgc_embedding_grad_run(const float *dy, const int64_t *ids, int64_t n, int64_t v,
                                  int64_t d, float *dw, int nthreads);

#endif
