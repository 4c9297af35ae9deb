/* Builders of the backward ops (ops.def's GRAD kind), for autograd's rules: each records or
 * runs one gradient op through tgc_apply, eagerly or while tracing, like every op.
 *
 * Arguments: dy is the forward result's gradient; the forward attributes are those of its
 * node (tgc_grad_ctx.a: CONV2D's i[0..7), the pools' i[0..7), ADAPTIVE_AVG_POOL2D's i[0..2));
 * a `*_like` tensor is the forward operand whose gradient is made: only its shape and dtype are
 * read, symbolically while tracing (never tgc_size, so nothing is specialized), and the result
 * has its shape and dtype (dy must have that dtype: TGC_ERR_DTYPE otherwise). A NULL tensor
 * input returns NULL and keeps the first error; NULL attributes or a NULL *_like are
 * TGC_ERR_INVALID_ARG; a *_like of the wrong rank TGC_ERR_SHAPE. Shape inference checks the
 * rest against the forward op the sizes describe (TGC_ERR_SHAPE / TGC_ERR_DTYPE).
 * Results belong to the innermost scope. Thread-safe as every op: tensors of one thread. */
#ifndef TGC_FRONTEND_OPS_GRAD_H
#define TGC_FRONTEND_OPS_GRAD_H

#include "ir/op.h"
#include "tgc/tensor.h"

/* d x of tgc_conv2d(x, w, ...): [N, C_in, H, W] from dy [N, C_out, OH, OW]. */
tgc_tensor *tgc_conv2d_grad_input(tgc_tensor *dy, tgc_tensor *w, const tgc_attrs *conv_attrs,
                                  const tgc_tensor *x_like);
/* d w of tgc_conv2d(x, w, ...): [C_out, C_in / groups, kh, kw]. */
tgc_tensor *tgc_conv2d_grad_weight(tgc_tensor *x, tgc_tensor *dy, const tgc_attrs *conv_attrs,
                                   const tgc_tensor *w_like);
/* d x of tgc_max_pool2d(x): dy goes to each window's maximum (PyTorch's tie rule). */
tgc_tensor *tgc_max_pool2d_grad(tgc_tensor *x, tgc_tensor *dy, const tgc_attrs *pool_attrs);
/* d x of tgc_avg_pool2d(x) (exclude_padding as the forward's attributes say). */
tgc_tensor *tgc_avg_pool2d_grad(tgc_tensor *dy, const tgc_attrs *pool_attrs,
                                const tgc_tensor *x_like);
/* d x of tgc_adaptive_avg_pool2d(x, out_h, out_w). */
tgc_tensor *tgc_adaptive_avg_pool2d_grad(tgc_tensor *dy, const tgc_attrs *a,
                                         const tgc_tensor *x_like);
/* d weight of tgc_embedding(weight, idx): dy's rows scatter-added at idx into [V, D]. */
tgc_tensor *tgc_embedding_grad(tgc_tensor *dy, tgc_tensor *idx, const tgc_tensor *weight_like);
/* d t of tgc_gather(t, dim, idx): dy scatter-added along dim (dim may be negative). */
tgc_tensor *tgc_gather_grad(tgc_tensor *dy, tgc_tensor *idx, int dim, const tgc_tensor *t_like);
/* d t of tgc_index_select(t, dim, idx): dy's slices index-added along dim. */
tgc_tensor *tgc_index_select_grad(tgc_tensor *dy, tgc_tensor *idx, int dim,
                                  const tgc_tensor *t_like);

#endif
