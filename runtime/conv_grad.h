/* The f32 conv2d backward drivers: the gradients of y = conv2d(x, w) (x NCHW [N,C,H,W],
 * w [O, C/groups, KH, KW], y [N,O,OH,OW], all contiguous; tgc_conv_params as runtime/gemm.h)
 * computed with the JIT-compiled GEMM pieces of a tgc_gemm_kernel (its micro-kernel and
 * packing routines), not with scalar loops:
 *
 *   dW  per group: dW[o, k] = sum over images n and pixels p of dY[n,o,p] * im2col(x_n)[k,p],
 *       the reduction over (n, p) cut into fixed chunks of R columns crossing image
 *       boundaries, accumulated across chunks in C (the micro-kernel's ACCUM). Each chunk's
 *       im2col rows are built per block (in L2: one shifted copy per image for stride-1
 *       "same"-width convs). Two orientations: dW^T[k, o] = im2col . dY^T (im2col packed by
 *       pack_a's vector transpose, a [kg][og] scratch transposed out at the end) for fewer
 *       than 128 output channels per group; dW = dY . im2col^T (im2col transposed into B
 *       panels by pack_b, no scratch) for 128 or more, or when the whole reduction is one
 *       chunk. Threads split the rows (or columns) of C within each group. Fewer than 4
 *       output channels per group (depthwise) run a direct loop instead.
 *   dX  stride 1 with padding <= dilation * (kernel - 1) (the usual "same" and "valid" convs):
 *       dX = conv2d(dY, w flipped and transposed per group, padding dil*(k-1) - pad) through
 *       the conv driver (implicit GEMM, no col2im). Otherwise dcols = W^T . dY (W^T packed
 *       once per call) over blocks of 128 reduction columns crossing images, each block's
 *       rows scattered back (col2im) at once; a task owns a slice of the input channels of
 *       one group in every image, so each dX element is accumulated by one task in a fixed
 *       order.
 *
 * Results are deterministic: the same bits on every run and for every thread count.
 * Threading: stateless; any thread may call at once (the kernels are immutable). */
#ifndef TGC_RUNTIME_CONV_GRAD_H
#define TGC_RUNTIME_CONV_GRAD_H

#include "runtime/gemm.h"

/* dw [O, C/groups, KH, KW] = the gradient of conv2d(x, w) with output gradient dy.
 * gemm: a bound GEMM kernel (tgc_gemm_kernel_bind). nthreads 0 = every core.
 * Errors: TGC_ERR_INVALID_ARG (bad params, NULL pointers, a non-GEMM kernel), TGC_ERR_OOM. */
tgc_status tgc_conv_grad_weight_run(const tgc_gemm_kernel *gemm, const tgc_conv_params *p,
                                    const float *x, const float *dy, float *dw, int nthreads);

/* dx [N, C, H, W] = the gradient of conv2d(x, w) with respect to x. gemm: a bound GEMM kernel;
 * conv: a bound conv kernel with dynamic geometry (no static params), or NULL to always take
 * the col2im path. Errors as tgc_conv_grad_weight_run. */
tgc_status tgc_conv_grad_input_run(const tgc_gemm_kernel *gemm, const tgc_gemm_kernel *conv,
                                   const tgc_conv_params *p, const float *dy, const float *w,
                                   float *dx, int nthreads);

#endif
