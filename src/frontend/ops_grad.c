/* The backward ops' builders (ops_grad.h): the forward attributes plus the sizes of the
 * operand whose gradient is made, read as tgc_sdims (symbolic while tracing), then
 * tgc_apply. */
#include "frontend/ops_grad.h"

#include <stdio.h>
#include <string.h>

#include "frontend/apply.h"
#include "ir/sym.h"
#include "support/error.h"
#include "tensor/tensor_impl.h"

/* Checks like (the forward operand) and copies its sizes as tgc_sdims: the symbolic ones of
 * this trace for a traced tensor, its sizes otherwise. rank_lo..rank_hi: its allowed ranks. */
static int like_sizes(tgc_op op, const char *name, const tgc_tensor *like, int rank_lo, int rank_hi,
                      tgc_sdim *out)
{
    if (!like) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_%s: %s is NULL", tgc_op_name(op), name);
        return 0;
    }
    if (like->trace && like->trace != tgc_trace_current()) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_%s: %s is a traced tensor that escaped its trace",
                      tgc_op_name(op), name);
        return 0;
    }
    if (like->ndim < rank_lo || like->ndim > rank_hi) {
        char dims[160], ranks[32];
        if (rank_hi > rank_lo)
            snprintf(ranks, sizeof ranks, "%d to %d", rank_lo, rank_hi);
        else
            snprintf(ranks, sizeof ranks, "%d", rank_lo);
        tgc_set_error(TGC_ERR_SHAPE, "tgc_%s: %s must have %s dims, got %s", tgc_op_name(op), name,
                      ranks, tgc_format_dims(like->shape, like->ndim, dims, sizeof dims));
        return 0;
    }
    for (int d = 0; d < like->ndim; d++)
        out[d] = like->trace ? like->sshape[d] : like->shape[d];
    return 1;
}

/* The result takes like's dtype: dy must have it. */
static int same_dtype(tgc_op op, const tgc_tensor *dy, const char *name, const tgc_tensor *like)
{
    if (dy->dtype == like->dtype)
        return 1;
    tgc_set_error(TGC_ERR_DTYPE, "tgc_%s: dy is %s but %s is %s; cast dy to %s's dtype",
                  tgc_op_name(op), tgc_dtype_name(dy->dtype), name, tgc_dtype_name(like->dtype),
                  name);
    return 0;
}

/* The forward attributes into at: its first n integer words (n entries at least), which
 * each backward layout repeats first, in the forward's order (ops.def). */
static int forward_attrs(tgc_op op, const tgc_attrs *fwd, int n, const char *what, tgc_attrs *at)
{
    if (!fwd) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_%s: %s is NULL", tgc_op_name(op), what);
        return 0;
    }
    if (fwd->ni < n) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_%s: %s has %d integer attributes, expected %d",
                      tgc_op_name(op), what, fwd->ni, n);
        return 0;
    }
    *at = tgc_attrs_none();
    memcpy(at->i, fwd->i, sizeof(int64_t) * (size_t)n);
    at->ni = n;
    return 1;
}

/* A NULL input: tgc_apply keeps the first error (or names the input). */
static tgc_tensor *pass_null(tgc_op op, tgc_tensor *const *in, int n)
{
    tgc_attrs none = tgc_attrs_none();
    return tgc_apply(op, in, n, &none);
}

static int any_null(tgc_tensor *const *in, int n)
{
    for (int k = 0; k < n; k++)
        if (!in[k])
            return 1;
    return 0;
}

tgc_tensor *tgc_conv2d_grad_input(tgc_tensor *dy, tgc_tensor *w, const tgc_attrs *conv_attrs,
                                  const tgc_tensor *x_like)
{
    const tgc_op op = TGC_OP_CONV2D_GRAD_INPUT;
    tgc_tensor *in[2] = {dy, w};
    tgc_sdim xs[TGC_MAX_DIMS];
    tgc_attrs at;
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!forward_attrs(op, conv_attrs, 7, "conv_attrs", &at) ||
        !like_sizes(op, "x_like", x_like, 4, 4, xs) || !same_dtype(op, dy, "x_like", x_like))
        return NULL;
    at.conv2d_grad_input.h = xs[2];
    at.conv2d_grad_input.w = xs[3];
    at.ni = 9;
    return tgc_apply(op, in, 2, &at);
}

tgc_tensor *tgc_conv2d_grad_weight(tgc_tensor *x, tgc_tensor *dy, const tgc_attrs *conv_attrs,
                                   const tgc_tensor *w_like)
{
    const tgc_op op = TGC_OP_CONV2D_GRAD_WEIGHT;
    tgc_tensor *in[2] = {x, dy};
    tgc_sdim ws[TGC_MAX_DIMS];
    tgc_attrs at;
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!forward_attrs(op, conv_attrs, 7, "conv_attrs", &at) ||
        !like_sizes(op, "w_like", w_like, 4, 4, ws) || !same_dtype(op, dy, "w_like", w_like))
        return NULL;
    at.conv2d_grad_weight.kh = ws[2];
    at.conv2d_grad_weight.kw = ws[3];
    at.ni = 9;
    return tgc_apply(op, in, 2, &at);
}

tgc_tensor *tgc_max_pool2d_grad(tgc_tensor *x, tgc_tensor *dy, const tgc_attrs *pool_attrs)
{
    const tgc_op op = TGC_OP_MAX_POOL2D_GRAD;
    tgc_tensor *in[2] = {x, dy};
    tgc_attrs at;
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!forward_attrs(op, pool_attrs, 7, "pool_attrs", &at))
        return NULL;
    return tgc_apply(op, in, 2, &at);
}

/* avg_pool2d_grad and adaptive_avg_pool2d_grad: n forward attributes, then x's H and W. */
static tgc_tensor *avg_grad(tgc_op op, tgc_tensor *dy, const tgc_attrs *fwd, int n,
                            const char *what, const tgc_tensor *x_like)
{
    tgc_sdim xs[TGC_MAX_DIMS];
    tgc_attrs at;
    if (!dy)
        return pass_null(op, &dy, 1);
    if (!forward_attrs(op, fwd, n, what, &at) || !like_sizes(op, "x_like", x_like, 3, 4, xs) ||
        !same_dtype(op, dy, "x_like", x_like))
        return NULL;
    const tgc_sdim h = xs[x_like->ndim - 2], w = xs[x_like->ndim - 1];
    if (op == TGC_OP_AVG_POOL2D_GRAD) {
        at.pool_grad.h = h;
        at.pool_grad.w = w;
    } else {
        at.adaptive_pool_grad.h = h;
        at.adaptive_pool_grad.w = w;
    }
    at.ni = n + 2;
    return tgc_apply(op, &dy, 1, &at);
}

tgc_tensor *tgc_avg_pool2d_grad(tgc_tensor *dy, const tgc_attrs *pool_attrs,
                                const tgc_tensor *x_like)
{
    return avg_grad(TGC_OP_AVG_POOL2D_GRAD, dy, pool_attrs, 7, "pool_attrs", x_like);
}

tgc_tensor *tgc_adaptive_avg_pool2d_grad(tgc_tensor *dy, const tgc_attrs *a,
                                         const tgc_tensor *x_like)
{
    return avg_grad(TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, dy, a, 2, "a", x_like);
}

tgc_tensor *tgc_embedding_grad(tgc_tensor *dy, tgc_tensor *idx, const tgc_tensor *weight_like)
{
    const tgc_op op = TGC_OP_EMBEDDING_GRAD;
    tgc_tensor *in[2] = {dy, idx};
    tgc_sdim ws[TGC_MAX_DIMS];
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!like_sizes(op, "weight_like", weight_like, 2, 2, ws) ||
        !same_dtype(op, dy, "weight_like", weight_like))
        return NULL;
    tgc_attrs at = tgc_attrs_of(op);
    at.embedding_grad.num = ws[0];
    return tgc_apply(op, in, 2, &at);
}

/* dim of t_like from the end when negative (a 0-d t takes 0 and -1); -1 with the error set. */
static int grad_dim(tgc_op op, int dim, int ndim)
{
    int d = tgc_norm_dim(dim, ndim > 0 ? ndim : 1);
    if (d < 0)
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_%s: dim %d is out of range for a %d-d tensor",
                      tgc_op_name(op), dim, ndim);
    return d;
}

tgc_tensor *tgc_gather_grad(tgc_tensor *dy, tgc_tensor *idx, int dim, const tgc_tensor *t_like)
{
    const tgc_op op = TGC_OP_GATHER_GRAD;
    tgc_tensor *in[2] = {dy, idx};
    tgc_sdim ts[TGC_MAX_DIMS];
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!like_sizes(op, "t_like", t_like, 0, TGC_MAX_DIMS, ts) ||
        !same_dtype(op, dy, "t_like", t_like))
        return NULL;
    int d = grad_dim(op, dim, t_like->ndim);
    if (d < 0)
        return NULL;
    if (t_like->ndim + 1 > TGC_MAX_IATTR) { /* cannot happen with TGC_MAX_DIMS <= 19 */
        tgc_set_error(TGC_ERR_INTERNAL, "tgc_gather_grad: too many dims");
        return NULL;
    }
    tgc_attrs at = tgc_attrs_of(op);
    at.gather_grad.dim = d;
    for (int k = 0; k < t_like->ndim; k++)
        at.gather_grad.shape[k] = ts[k];
    at.ni = 1 + t_like->ndim;
    return tgc_apply(op, in, 2, &at);
}

tgc_tensor *tgc_index_select_grad(tgc_tensor *dy, tgc_tensor *idx, int dim,
                                  const tgc_tensor *t_like)
{
    const tgc_op op = TGC_OP_INDEX_SELECT_GRAD;
    tgc_tensor *in[2] = {dy, idx};
    tgc_sdim ts[TGC_MAX_DIMS];
    if (any_null(in, 2))
        return pass_null(op, in, 2);
    if (!like_sizes(op, "t_like", t_like, 1, TGC_MAX_DIMS, ts) ||
        !same_dtype(op, dy, "t_like", t_like))
        return NULL;
    int d = grad_dim(op, dim, t_like->ndim);
    if (d < 0)
        return NULL;
    tgc_attrs at = tgc_attrs_of(op);
    at.index_select_grad.dim = d;
    at.index_select_grad.size = ts[d];
    return tgc_apply(op, in, 2, &at);
}
