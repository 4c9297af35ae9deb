/* Shape inference for the backward ops (ops.def's GRAD kind): each result has the shape of a
 * forward operand, given by a tensor input (max_pool2d_grad's x) or by size attributes
 * (tgc_sdim: symbolic while tracing), and each rule checks that dy is the gradient of the
 * forward op those sizes describe. Gradients are float; dy and a float operand share one
 * dtype. */
#include <string.h>

#include "ir/shape_infer_impl.h"

/* a->ni must be n (a malformed node otherwise: the builders always set it). */
static tgc_status need_ni(si_ctx *c, int n)
{
    if (c->a->ni == n)
        return TGC_OK;
    return si_fail(c, TGC_ERR_INTERNAL, "malformed node: %d integer attributes, expected %d",
                   c->a->ni, n);
}

/* A size attribute v (a tgc_sdim) into *d: valid, symbolic only with a symbol table, and
 * at least min. */
static tgc_status size_attr(si_ctx *c, tgc_sdim v, int64_t min, const char *what, tgc_sdim *d)
{
    if (!TGC_SDIM_IS_VALID(v) || (!TGC_SDIM_IS_CONST(v) && !c->syms))
        return si_fail(c, TGC_ERR_INTERNAL, "malformed node: %s is not a size", what);
    if (!si_ge(c, v, min))
        return si_fail(c, TGC_ERR_INVALID_ARG, "%s must be >= %lld, got %s", what, (long long)min,
                       si_dim(c, v));
    *d = v;
    return TGC_OK;
}

/* One float input (TGC_ERR_DTYPE), or two of one float dtype. */
static tgc_status need_float(si_ctx *c, const char *n0, const char *n1)
{
    const int idx[2] = {0, 1};
    const char *const names[2] = {n0, n1};
    return si_need_float(c, idx, names, n1 ? 2 : 1);
}

/* The forward window along one axis: a forward input of n positions with window k
 * (stride, pad, dil) must give dy's `got` positions. */
typedef struct gwin {
    tgc_sdim n, k;
    int64_t stride, pad, dil;
} gwin;

/* Which input is dy. */
static int dy_input(tgc_op op)
{
    return op == TGC_OP_CONV2D_GRAD_WEIGHT || op == TGC_OP_MAX_POOL2D_GRAD ? 1 : 0;
}

static tgc_status check_window(si_ctx *c, gwin w, tgc_sdim got, const char *axis)
{
    tgc_symtab *t = c->syms;
    tgc_sdim span = tgc_sym_add(t, tgc_sym_mul(t, w.dil, tgc_sym_sub(t, w.k, 1)), 1);
    tgc_sdim room = tgc_sym_sub(t, tgc_sym_add(t, w.n, tgc_sym_mul(t, w.pad, 2)), span);
    if (!TGC_SDIM_IS_VALID(room))
        return si_fail(c, TGC_ERR_SHAPE,
                       "the %s window (%s with dilation %lld, padding %lld) over %s overflows "
                       "int64",
                       axis, si_dim(c, w.k), (long long)w.dil, (long long)w.pad, si_dim(c, w.n));
    if (!si_ge(c, room, 0))
        return si_fail(c, TGC_ERR_SHAPE,
                       "the %s window (%s with dilation %lld) is larger than the padded forward "
                       "input (%s + 2*%lld)",
                       axis, si_dim(c, w.k), (long long)w.dil, si_dim(c, w.n), (long long)w.pad);
    tgc_sdim want = tgc_sym_add(t, tgc_sym_floordiv(t, room, w.stride), 1);
    if (!si_eq(c, want, got))
        return si_fail(c, TGC_ERR_SHAPE,
                       "dy %s has %s positions along the %s, but the forward input's %s "
                       "(window %s, stride %lld, padding %lld, dilation %lld) gives %s",
                       si_shape(c, &c->in[dy_input(c->op)]), si_dim(c, got), axis, si_dim(c, w.n),
                       si_dim(c, w.k), (long long)w.stride, (long long)w.pad, (long long)w.dil,
                       si_dim(c, want));
    return TGC_OK;
}

/* groups must divide channel count ch of operand k. */
static tgc_status groups_divide(si_ctx *c, int k, const char *name, tgc_sdim ch, int64_t g)
{
    if (si_hint(c, ch) % g == 0)
        return TGC_OK;
    return si_fail(c, TGC_ERR_SHAPE, "groups (%lld) must divide the %s channels of %s %s",
                   (long long)g, si_dim(c, ch), name, si_shape(c, &c->in[k]));
}

/* ---- convolution ---- */

static tgc_status infer_conv_grad_input(si_ctx *c)
{
    const tgc_vinfo *dy = &c->in[0], *w = &c->in[1];
    const tgc_conv2d_grad_input_attrs *a = &c->a->conv2d_grad_input;
    tgc_sdim r[4];
    tgc_status s = need_ni(c, 9);
    if (!s)
        s = si_conv_attrs(c);
    if (!s)
        s = need_float(c, "dy", "weight");
    if (!s)
        s = si_need_rank(c, 0, "dy", 4, 4);
    if (!s)
        s = si_need_rank(c, 1, "weight", 4, 4);
    if (!s)
        s = groups_divide(c, 1, "weight", w->shape[0], a->groups);
    if (!s && !si_eq(c, dy->shape[1], w->shape[0]))
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s has %s channels but weight %s has %s output channels",
                    si_shape(c, dy), si_dim(c, dy->shape[1]), si_shape(c, w),
                    si_dim(c, w->shape[0]));
    if (!s)
        s = size_attr(c, a->h, 0, "the input height", &r[2]);
    if (!s)
        s = size_attr(c, a->w, 0, "the input width", &r[3]);
    if (!s)
        s = check_window(c, (gwin){r[2], w->shape[2], a->stride_h, a->pad_h, a->dil_h},
                         dy->shape[2], "height");
    if (!s)
        s = check_window(c, (gwin){r[3], w->shape[3], a->stride_w, a->pad_w, a->dil_w},
                         dy->shape[3], "width");
    if (s)
        return s;
    r[0] = dy->shape[0];
    r[1] = tgc_sym_mul(c->syms, w->shape[1], a->groups);
    return si_set_out(c, dy->dtype, r, 4);
}

static tgc_status infer_conv_grad_weight(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *dy = &c->in[1];
    const tgc_conv2d_grad_weight_attrs *a = &c->a->conv2d_grad_weight;
    tgc_sdim r[4];
    tgc_status s = need_ni(c, 9);
    if (!s)
        s = si_conv_attrs(c);
    if (!s)
        s = need_float(c, "x", "dy");
    if (!s)
        s = si_need_rank(c, 0, "x", 4, 4);
    if (!s)
        s = si_need_rank(c, 1, "dy", 4, 4);
    if (!s && !si_eq(c, x->shape[0], dy->shape[0]))
        s = si_fail(c, TGC_ERR_SHAPE, "batch sizes differ: x is %s, dy is %s", si_shape(c, x),
                    si_shape(c, dy));
    if (!s)
        s = groups_divide(c, 0, "x", x->shape[1], a->groups);
    if (!s)
        s = groups_divide(c, 1, "dy", dy->shape[1], a->groups);
    if (!s)
        s = size_attr(c, a->kh, 1, "the kernel height", &r[2]);
    if (!s)
        s = size_attr(c, a->kw, 1, "the kernel width", &r[3]);
    if (!s)
        s = check_window(c, (gwin){x->shape[2], r[2], a->stride_h, a->pad_h, a->dil_h},
                         dy->shape[2], "height");
    if (!s)
        s = check_window(c, (gwin){x->shape[3], r[3], a->stride_w, a->pad_w, a->dil_w},
                         dy->shape[3], "width");
    if (s)
        return s;
    r[0] = dy->shape[1];
    r[1] = tgc_sym_floordiv(c->syms, x->shape[1], a->groups);
    return si_set_out(c, x->dtype, r, 4);
}

/* ---- pools ---- */

/* dy [..., OH, OW] of a pool of a forward input [..., H, W] (window pools; adaptive pools
 * check their output size themselves). */
static tgc_status pool_dy(si_ctx *c, int k, tgc_sdim H, tgc_sdim W)
{
    const tgc_vinfo *dy = &c->in[k];
    const tgc_pool_attrs a = si_pool_of(c);
    int h = dy->ndim - 2;
    tgc_status s = check_window(c, (gwin){H, a.kh, a.sh, a.ph, 1}, dy->shape[h], "height");
    return s ? s : check_window(c, (gwin){W, a.kw, a.sw, a.pw, 1}, dy->shape[h + 1], "width");
}

static tgc_status infer_max_pool_grad(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *dy = &c->in[1];
    tgc_status s = need_ni(c, 7);
    if (!s)
        s = si_pool_attrs(c);
    if (!s)
        s = need_float(c, "x", "dy");
    if (!s)
        s = si_need_rank(c, 0, "x", 3, 4);
    if (!s && dy->ndim != x->ndim)
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s must have the rank of x %s", si_shape(c, dy),
                    si_shape(c, x));
    for (int d = 0; !s && d < x->ndim - 2; d++)
        if (!si_eq(c, x->shape[d], dy->shape[d]))
            s = si_fail(c, TGC_ERR_SHAPE, "dy %s and x %s differ at dim %d", si_shape(c, dy),
                        si_shape(c, x), d);
    if (!s)
        s = pool_dy(c, 1, x->shape[x->ndim - 2], x->shape[x->ndim - 1]);
    return s ? s : si_set_out(c, x->dtype, x->shape, x->ndim);
}

static tgc_status infer_avg_pool_grad(si_ctx *c)
{
    const tgc_vinfo *dy = &c->in[0];
    int adaptive = c->op == TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD;
    const tgc_adaptive_pool_grad_attrs *ad = &c->a->adaptive_pool_grad;
    const tgc_sdim H = adaptive ? ad->h : c->a->pool_grad.h;
    const tgc_sdim W = adaptive ? ad->w : c->a->pool_grad.w;
    tgc_sdim r[4];
    tgc_status s = need_ni(c, adaptive ? 4 : 9);
    if (!s && adaptive && !(s = si_attr_at_least(c, ad->out_h, 1, "output size")))
        s = si_attr_at_least(c, ad->out_w, 1, "output size");
    if (!s && !adaptive)
        s = si_pool_attrs(c);
    if (!s)
        s = need_float(c, "dy", NULL);
    if (!s)
        s = si_need_rank(c, 0, "dy", 3, 4);
    if (s)
        return s;
    int h = dy->ndim - 2;
    memcpy(r, dy->shape, sizeof r);
    s = size_attr(c, H, adaptive, "the input height", &r[h]);
    if (!s)
        s = size_attr(c, W, adaptive, "the input width", &r[h + 1]);
    if (!s && !adaptive)
        s = pool_dy(c, 0, r[h], r[h + 1]);
    if (!s && adaptive &&
        (!si_eq(c, dy->shape[h], ad->out_h) || !si_eq(c, dy->shape[h + 1], ad->out_w)))
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s must end in the output size [%lld, %lld]",
                    si_shape(c, dy), (long long)ad->out_h, (long long)ad->out_w);
    return s ? s : si_set_out(c, dy->dtype, r, dy->ndim);
}

/* ---- indexing ---- */

static tgc_status infer_embedding_grad(si_ctx *c)
{
    const tgc_vinfo *dy = &c->in[0], *idx = &c->in[1];
    tgc_sdim r[2];
    tgc_status s = need_ni(c, 1);
    if (!s)
        s = need_float(c, "dy", NULL);
    if (!s)
        s = si_need_index(c, 1, "idx");
    int ok = !s && dy->ndim == idx->ndim + 1;
    for (int d = 0; ok && d < idx->ndim; d++)
        ok = si_eq(c, dy->shape[d], idx->shape[d]);
    if (!s && !ok)
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s must be idx's shape %s and one more dim",
                    si_shape(c, dy), si_shape(c, idx));
    if (!s)
        s = size_attr(c, c->a->embedding_grad.num, 0, "the number of embeddings", &r[0]);
    if (s)
        return s;
    r[1] = dy->shape[dy->ndim - 1];
    return si_set_out(c, dy->dtype, r, 2);
}

static tgc_status infer_gather_grad(si_ctx *c)
{
    const tgc_vinfo *dy = &c->in[0], *idx = &c->in[1];
    int64_t dim = c->a->gather_grad.dim;
    tgc_sdim r[TGC_MAX_DIMS];
    tgc_status s = need_float(c, "dy", NULL);
    if (!s)
        s = si_need_index(c, 1, "idx");
    int ok = !s && dy->ndim == idx->ndim;
    for (int d = 0; ok && d < idx->ndim; d++)
        ok = si_eq(c, dy->shape[d], idx->shape[d]);
    if (!s && !ok)
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s must have idx's shape %s", si_shape(c, dy),
                    si_shape(c, idx));
    if (!s)
        s = need_ni(c, 1 + idx->ndim);
    if (!s)
        s = si_need_dim(c, dim, idx->ndim);
    for (int d = 0; !s && d < idx->ndim; d++)
        s = size_attr(c, c->a->gather_grad.shape[d], 0, "a size of t", &r[d]);
    for (int d = 0; !s && d < idx->ndim; d++)
        if (d != dim && !si_ge(c, tgc_sym_sub(c->syms, r[d], idx->shape[d]), 0))
            s = si_fail(c, TGC_ERR_SHAPE,
                        "idx %s must have no larger dims than t %s outside dim %lld",
                        si_shape(c, idx), si_dims(c, r, idx->ndim), (long long)dim);
    return s ? s : si_set_out(c, dy->dtype, r, idx->ndim);
}

static tgc_status infer_index_select_grad(si_ctx *c)
{
    const tgc_vinfo *dy = &c->in[0], *idx = &c->in[1];
    int64_t dim = c->a->index_select_grad.dim;
    tgc_sdim r[TGC_MAX_DIMS];
    tgc_status s = need_ni(c, 2);
    if (!s)
        s = need_float(c, "dy", NULL);
    if (!s)
        s = si_need_index(c, 1, "idx");
    if (!s)
        s = si_need_rank(c, 1, "idx", 0, 1);
    if (!s)
        s = si_need_rank(c, 0, "dy", 1, TGC_MAX_DIMS);
    if (!s)
        s = si_need_dim(c, dim, dy->ndim);
    if (!s && !si_eq(c, dy->shape[dim], idx->ndim ? idx->shape[0] : 1))
        s = si_fail(c, TGC_ERR_SHAPE, "dy %s must have idx's %s entries at dim %lld",
                    si_shape(c, dy), si_dim(c, idx->ndim ? idx->shape[0] : 1), (long long)dim);
    if (s)
        return s;
    memcpy(r, dy->shape, sizeof r);
    s = size_attr(c, c->a->index_select_grad.size, 0, "the size of t along dim", &r[dim]);
    return s ? s : si_set_out(c, dy->dtype, r, dy->ndim);
}

tgc_status si_rule_GRAD(si_ctx *c)
{
    switch (c->op) {
    case TGC_OP_CONV2D_GRAD_INPUT: return infer_conv_grad_input(c);
    case TGC_OP_CONV2D_GRAD_WEIGHT: return infer_conv_grad_weight(c);
    case TGC_OP_MAX_POOL2D_GRAD: return infer_max_pool_grad(c);
    case TGC_OP_AVG_POOL2D_GRAD:
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD: return infer_avg_pool_grad(c);
    case TGC_OP_EMBEDDING_GRAD: return infer_embedding_grad(c);
    case TGC_OP_GATHER_GRAD: return infer_gather_grad(c);
    case TGC_OP_INDEX_SELECT_GRAD: return infer_index_select_grad(c);
    default: return si_fail(c, TGC_ERR_INTERNAL, "not a backward op");
    }
}
