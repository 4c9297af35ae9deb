/* Shape inference for linear algebra (matmul, linear), convolution and pooling, the
 * normalizations, losses and attention. Their float operands must share one float dtype. */
#include <math.h>
#include <string.h>

#include "ir/shape_infer_impl.h"
#include "tgc/ops.h"

/* ---- linear algebra ---- */

static tgc_status infer_matmul(si_ctx *c)
{
    const tgc_vinfo *a = &c->in[0], *b = &c->in[1];
    static const int idx[] = {0, 1};
    static const char *const names[] = {"a", "b"};
    tgc_status s = si_need_float(c, idx, names, 2);
    if (!s)
        s = si_need_rank(c, 0, "a", 1, TGC_MAX_DIMS);
    if (!s)
        s = si_need_rank(c, 1, "b", 1, TGC_MAX_DIMS);
    if (s)
        return s;
    /* 1-d operands act as a row (a) or a column (b) that is dropped from the result */
    int a1 = a->ndim == 1, b1 = b->ndim == 1, na = a1 ? 0 : a->ndim - 2, nb = b1 ? 0 : b->ndim - 2;
    tgc_sdim ka = a->shape[a->ndim - 1], kb = b->shape[b1 ? 0 : b->ndim - 2];
    if (!si_eq(c, ka, kb))
        return si_fail(c, TGC_ERR_SHAPE, "inner dims differ: a is %s, b is %s", si_shape(c, a),
                       si_shape(c, b));
    tgc_sdim r[TGC_MAX_DIMS];
    int nr;
    if (!si_broadcast_dims(c, a->shape, na, b->shape, nb, r, &nr))
        return si_fail(c, TGC_ERR_SHAPE, "batch dims do not broadcast: a is %s, b is %s",
                       si_shape(c, a), si_shape(c, b));
    if (!a1)
        r[nr++] = a->shape[a->ndim - 2];
    if (!b1)
        r[nr++] = b->shape[b->ndim - 1];
    return si_set_out(c, a->dtype, r, nr);
}

static tgc_status infer_linear(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *w = &c->in[1];
    static const int idx[] = {0, 1, 2};
    static const char *const names[] = {"x", "weight", "bias"};
    int has_bias = c->n_in == 3;
    tgc_status s = si_need_float(c, idx, names, c->n_in);
    if (!s)
        s = si_need_rank(c, 0, "x", 1, TGC_MAX_DIMS);
    if (!s)
        s = si_need_rank(c, 1, "weight", 2, 2);
    if (!s && has_bias)
        s = si_need_rank(c, 2, "bias", 1, 1);
    if (s)
        return s;
    if (!si_eq(c, x->shape[x->ndim - 1], w->shape[1]))
        return si_fail(c, TGC_ERR_SHAPE, "in features differ: x is %s, weight is %s",
                       si_shape(c, x), si_shape(c, w));
    if (has_bias && !si_eq(c, c->in[2].shape[0], w->shape[0]))
        return si_fail(c, TGC_ERR_SHAPE, "bias is %s but weight is %s", si_shape(c, &c->in[2]),
                       si_shape(c, w));
    tgc_sdim r[TGC_MAX_DIMS];
    memcpy(r, x->shape, sizeof r);
    r[x->ndim - 1] = w->shape[0];
    return si_set_out(c, x->dtype, r, x->ndim);
}

tgc_status si_rule_MATMUL(si_ctx *c)
{
    return c->op == TGC_OP_MATMUL ? infer_matmul(c) : infer_linear(c);
}

/* ---- convolution and pooling ---- */

/* A sliding window over n positions: out = (n + 2*pad - (dil*(k-1) + 1)) // stride + 1,
 * which must be at least 1. */
typedef struct window {
    tgc_sdim k;
    int64_t stride, pad, dil;
} window;

static tgc_status window_out(si_ctx *c, tgc_sdim n, window w, const char *axis, tgc_sdim *out)
{
    tgc_symtab *t = c->syms;
    tgc_sdim span = tgc_sym_add(t, tgc_sym_mul(t, w.dil, tgc_sym_sub(t, w.k, 1)), 1);
    tgc_sdim room = tgc_sym_sub(t, tgc_sym_add(t, n, tgc_sym_mul(t, w.pad, 2)), span);
    if (!TGC_SDIM_IS_VALID(room))
        return si_fail(c, TGC_ERR_SHAPE,
                       "the %s window (%s with dilation %lld, padding %lld) of x %s overflows "
                       "int64",
                       axis, si_dim(c, w.k), (long long)w.dil, (long long)w.pad,
                       si_shape(c, &c->in[0]));
    if (!si_ge(c, room, 0))
        return si_fail(c, TGC_ERR_SHAPE,
                       "the %s window (%s with dilation %lld) is larger than the padded input "
                       "(%s + 2*%lld) of x %s",
                       axis, si_dim(c, w.k), (long long)w.dil, si_dim(c, n), (long long)w.pad,
                       si_shape(c, &c->in[0]));
    *out = tgc_sym_add(t, tgc_sym_floordiv(t, room, w.stride), 1);
    return TGC_OK;
}

tgc_status si_attr_at_least(si_ctx *c, int64_t v, int64_t min, const char *what)
{
    if (v < min)
        return si_fail(c, TGC_ERR_INVALID_ARG, "%s must be >= %lld, got %lld", what, (long long)min,
                       (long long)v);
    return TGC_OK;
}

/* The backward layouts repeat the forward's fields under the same names (ops.def). */
#define CONV_OF(l)                                                                                 \
    ((tgc_conv2d_attrs){.stride_h = (l).stride_h,                                                  \
                        .stride_w = (l).stride_w,                                                  \
                        .pad_h = (l).pad_h,                                                        \
                        .pad_w = (l).pad_w,                                                        \
                        .dil_h = (l).dil_h,                                                        \
                        .dil_w = (l).dil_w,                                                        \
                        .groups = (l).groups})

static tgc_conv2d_attrs conv_of(const si_ctx *c)
{
    switch (c->op) {
    case TGC_OP_CONV2D_GRAD_INPUT: return CONV_OF(c->a->conv2d_grad_input);
    case TGC_OP_CONV2D_GRAD_WEIGHT: return CONV_OF(c->a->conv2d_grad_weight);
    default: return c->a->conv2d;
    }
}

tgc_pool_attrs si_pool_of(const si_ctx *c)
{
    if (c->op != TGC_OP_AVG_POOL2D_GRAD) /* MAX_POOL2D_GRAD has the forward's layout */
        return c->a->pool;
    const tgc_pool_grad_attrs *g = &c->a->pool_grad;
    return (tgc_pool_attrs){.kh = g->kh,
                            .kw = g->kw,
                            .sh = g->sh,
                            .sw = g->sw,
                            .ph = g->ph,
                            .pw = g->pw,
                            .exclude_padding = g->exclude_padding};
}

tgc_status si_conv_attrs(si_ctx *c)
{
    const tgc_conv2d_attrs a = conv_of(c);
    tgc_status s = si_attr_at_least(c, a.stride_h, 1, "stride");
    if (!s)
        s = si_attr_at_least(c, a.stride_w, 1, "stride");
    if (!s)
        s = si_attr_at_least(c, a.pad_h, 0, "padding");
    if (!s)
        s = si_attr_at_least(c, a.pad_w, 0, "padding");
    if (!s)
        s = si_attr_at_least(c, a.dil_h, 1, "dilation");
    if (!s)
        s = si_attr_at_least(c, a.dil_w, 1, "dilation");
    if (!s)
        s = si_attr_at_least(c, a.groups, 1, "groups");
    return s;
}

static tgc_status conv_channels(si_ctx *c, int64_t g)
{
    const tgc_vinfo *x = &c->in[0], *w = &c->in[1];
    if (si_hint(c, x->shape[1]) % g || si_hint(c, w->shape[0]) % g)
        return si_fail(c, TGC_ERR_SHAPE,
                       "groups (%lld) must divide the channels of x %s and weight %s", (long long)g,
                       si_shape(c, x), si_shape(c, w));
    if (!si_eq(c, tgc_sym_mul(c->syms, w->shape[1], g), x->shape[1]))
        return si_fail(c, TGC_ERR_SHAPE, "weight %s expects %s*%lld input channels, x is %s",
                       si_shape(c, w), si_dim(c, w->shape[1]), (long long)g, si_shape(c, x));
    if (c->n_in == 3 && (c->in[2].ndim != 1 || !si_eq(c, c->in[2].shape[0], w->shape[0])))
        return si_fail(c, TGC_ERR_SHAPE, "bias is %s but weight is %s", si_shape(c, &c->in[2]),
                       si_shape(c, w));
    return TGC_OK;
}

tgc_status si_rule_CONV(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *w = &c->in[1];
    const tgc_conv2d_attrs *a = &c->a->conv2d;
    static const int idx[] = {0, 1, 2};
    static const char *const names[] = {"x", "weight", "bias"};
    tgc_status s = si_conv_attrs(c);
    if (!s)
        s = si_need_float(c, idx, names, c->n_in);
    if (!s)
        s = si_need_rank(c, 0, "x", 4, 4);
    if (!s)
        s = si_need_rank(c, 1, "weight", 4, 4);
    if (!s)
        s = conv_channels(c, a->groups);
    tgc_sdim r[4] = {x->shape[0], w->shape[0]};
    if (!s)
        s = window_out(c, x->shape[2], (window){w->shape[2], a->stride_h, a->pad_h, a->dil_h},
                       "height", &r[2]);
    if (!s)
        s = window_out(c, x->shape[3], (window){w->shape[3], a->stride_w, a->pad_w, a->dil_w},
                       "width", &r[3]);
    return s ? s : si_set_out(c, x->dtype, r, 4);
}

tgc_status si_pool_attrs(si_ctx *c)
{
    const tgc_pool_attrs a = si_pool_of(c);
    tgc_status s = si_attr_at_least(c, a.kh, 1, "kernel size");
    if (!s)
        s = si_attr_at_least(c, a.kw, 1, "kernel size");
    if (!s)
        s = si_attr_at_least(c, a.sh, 1, "stride");
    if (!s)
        s = si_attr_at_least(c, a.sw, 1, "stride");
    if (!s)
        s = si_attr_at_least(c, a.ph, 0, "padding");
    if (!s)
        s = si_attr_at_least(c, a.pw, 0, "padding");
    const int64_t ex = a.exclude_padding;
    if (!s &&
        (ex < 0 || ex > 1 || (ex && c->op != TGC_OP_AVG_POOL2D && c->op != TGC_OP_AVG_POOL2D_GRAD)))
        return si_fail(c, TGC_ERR_INVALID_ARG,
                       "exclude_padding must be 0 or 1 and applies to avg_pool2d only, got %lld",
                       (long long)ex);
    if (!s && (a.ph > a.kh / 2 || a.pw > a.kw / 2)) /* 2*pad > kernel, without overflow */
        return si_fail(c, TGC_ERR_INVALID_ARG,
                       "padding (%lld, %lld) must be at most half the kernel (%lld, %lld)",
                       (long long)a.ph, (long long)a.pw, (long long)a.kh, (long long)a.kw);
    return s;
}

static tgc_status adaptive_sizes(si_ctx *c, tgc_sdim *r)
{
    const tgc_vinfo *x = &c->in[0];
    const tgc_adaptive_pool_attrs *a = &c->a->adaptive_pool;
    tgc_status s = si_attr_at_least(c, a->out_h, 1, "output size");
    if (!s)
        s = si_attr_at_least(c, a->out_w, 1, "output size");
    if (!s && (!si_ge(c, x->shape[x->ndim - 2], 1) || !si_ge(c, x->shape[x->ndim - 1], 1)))
        return si_fail(c, TGC_ERR_SHAPE, "x %s has an empty spatial dim", si_shape(c, x));
    r[0] = a->out_h;
    r[1] = a->out_w;
    return s;
}

tgc_status si_rule_POOL(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    const tgc_pool_attrs *a = &c->a->pool; /* the window pools' (not read by the adaptive) */
    static const int idx[] = {0};
    static const char *const names[] = {"x"};
    tgc_status s = si_need_float(c, idx, names, 1);
    if (!s)
        s = si_need_rank(c, 0, "x", 3, 4);
    if (s)
        return s;
    tgc_sdim r[4];
    int h = x->ndim - 2;
    memcpy(r, x->shape, sizeof r);
    if (c->op == TGC_OP_ADAPTIVE_AVG_POOL2D)
        s = adaptive_sizes(c, r + h);
    else if (!(s = si_pool_attrs(c)) &&
             !(s = window_out(c, x->shape[h], (window){a->kh, a->sh, a->ph, 1}, "height", &r[h])))
        s = window_out(c, x->shape[h + 1], (window){a->kw, a->sw, a->pw, 1}, "width", &r[h + 1]);
    return s ? s : si_set_out(c, x->dtype, r, x->ndim);
}

/* ---- normalization ---- */

static int popcount(int64_t bits)
{
    int n = 0;
    for (; bits; bits &= bits - 1)
        n++;
    return n;
}

static tgc_status need_eps(si_ctx *c, double eps)
{
    if (eps >= 0.0 && isfinite(eps))
        return TGC_OK;
    return si_fail(c, TGC_ERR_INVALID_ARG, "eps must be finite and >= 0, got %g", eps);
}

/* in[k] is a per-channel vector: shape [C], x's dtype. */
static tgc_status channel_vector(si_ctx *c, int k, const char *name, tgc_sdim ch)
{
    const tgc_vinfo *v = &c->in[k];
    if (v->ndim != 1 || !si_eq(c, v->shape[0], ch))
        return si_fail(c, TGC_ERR_SHAPE, "%s is %s but x %s has %s channels", name, si_shape(c, v),
                       si_shape(c, &c->in[0]), si_dim(c, ch));
    int idx[2] = {0, k};
    const char *names[2] = {"x", name};
    return si_need_float(c, idx, names, 2);
}

static tgc_status bn_attrs(si_ctx *c, int64_t has)
{
    double momentum = c->a->batch_norm.momentum;
    tgc_status s = si_need_inputs(c, 1 + 2 * !!(has & TGC_BN_HAS_STATS) +
                                         !!(has & TGC_BN_HAS_WEIGHT) + !!(has & TGC_BN_HAS_BIAS));
    if (s)
        return s;
    if (!c->a->batch_norm.training && !(has & TGC_BN_HAS_STATS))
        return si_fail(c, TGC_ERR_INVALID_ARG,
                       "running_mean and running_var are required when not training");
    if (!(momentum >= 0.0 && momentum <= 1.0))
        return si_fail(c, TGC_ERR_INVALID_ARG, "momentum must be in [0, 1], got %g", momentum);
    return need_eps(c, c->a->batch_norm.eps);
}

static tgc_status infer_batch_norm(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t has = c->a->batch_norm.has;
    static const int idx[] = {0};
    static const char *const names[] = {"x"};
    tgc_status s = bn_attrs(c, has);
    if (!s)
        s = si_need_float(c, idx, names, 1);
    if (!s)
        s = si_need_rank(c, 0, "x", 2, TGC_MAX_DIMS);
    if (s)
        return s;
    static const struct {
        int bit;
        const char *name;
    } opt[] = {{TGC_BN_HAS_STATS, "running_mean"},
               {TGC_BN_HAS_STATS, "running_var"},
               {TGC_BN_HAS_WEIGHT, "weight"},
               {TGC_BN_HAS_BIAS, "bias"}};
    for (int k = 0, in = 1; k < 4 && !s; k++)
        if (has & opt[k].bit)
            s = channel_vector(c, in++, opt[k].name, x->shape[1]);
    if (s)
        return s;
    tgc_sdim per_channel = tgc_sym_mul(c->syms, x->shape[0], si_prod(c, x->shape + 2, x->ndim - 2));
    if (c->a->batch_norm.training && !si_ge(c, per_channel, 2))
        return si_fail(c, TGC_ERR_SHAPE, "training needs more than 1 value per channel, x is %s",
                       si_shape(c, x));
    return si_set_out(c, x->dtype, x->shape, x->ndim);
}

/* weight / bias of layer_norm: the normalized shape, the result's float dtype. */
static tgc_status ln_param(si_ctx *c, int k, const char *name, int64_t n_norm, tgc_dtype dt)
{
    const tgc_vinfo *x = &c->in[0], *p = &c->in[k];
    int ok = p->ndim == n_norm;
    for (int d = 0; ok && d < n_norm; d++)
        ok = si_eq(c, p->shape[d], x->shape[x->ndim - n_norm + d]);
    if (!ok)
        return si_fail(c, TGC_ERR_SHAPE, "%s is %s but the last %lld dims of x are %s", name,
                       si_shape(c, p), (long long)n_norm,
                       si_dims(c, x->shape + x->ndim - n_norm, (int)n_norm));
    if (p->dtype != dt)
        return si_fail(c, TGC_ERR_DTYPE, "dtypes differ: x computes in %s, %s is %s",
                       tgc_dtype_name(dt), name, tgc_dtype_name(p->dtype));
    return TGC_OK;
}

static tgc_status infer_layer_norm(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t n_norm = c->a->layer_norm.n_norm, has = c->a->layer_norm.has;
    tgc_dtype dt = x->dtype;
    static const int idx[] = {0};
    static const char *const names[] = {"x"};
    tgc_status s = si_need_inputs(c, 1 + popcount(has & (TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS)));
    if (!s)
        s = si_need_float(c, idx, names, 1); /* as ops.h states: no integer promotion */
    if (!s)
        s = need_eps(c, c->a->layer_norm.eps);
    if (s)
        return s;
    if (n_norm < 1 || n_norm > x->ndim)
        return si_fail(c, TGC_ERR_INVALID_ARG, "n_norm must be in [1, %d] for x %s, got %lld",
                       x->ndim, si_shape(c, x), (long long)n_norm);
    int in = 1;
    if (has & TGC_LN_HAS_WEIGHT)
        s = ln_param(c, in++, "weight", n_norm, dt);
    if (!s && (has & TGC_LN_HAS_BIAS))
        s = ln_param(c, in, "bias", n_norm, dt);
    return s ? s : si_set_out(c, dt, x->shape, x->ndim);
}

/* group_norm: x [N, C, *] float, C a multiple of groups, weight / bias [C] of x's dtype. */
static tgc_status infer_group_norm(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t groups = c->a->group_norm.groups, has = c->a->group_norm.has;
    static const int idx[] = {0};
    static const char *const names[] = {"x"};
    tgc_status s = si_need_inputs(c, 1 + popcount(has & (TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS)));
    if (!s)
        s = si_need_float(c, idx, names, 1);
    if (!s)
        s = si_need_rank(c, 0, "x", 2, TGC_MAX_DIMS);
    if (!s)
        s = need_eps(c, c->a->group_norm.eps);
    if (s)
        return s;
    if (groups < 1)
        return si_fail(c, TGC_ERR_INVALID_ARG, "num_groups must be >= 1, got %lld",
                       (long long)groups);
    if (TGC_SDIM_IS_CONST(x->shape[1]) && x->shape[1] % groups != 0)
        return si_fail(c, TGC_ERR_SHAPE,
                       "the %s channels of x %s are not divisible by num_groups = %lld",
                       si_dim(c, x->shape[1]), si_shape(c, x), (long long)groups);
    int in = 1;
    if (has & TGC_LN_HAS_WEIGHT)
        s = channel_vector(c, in++, "weight", x->shape[1]);
    if (!s && (has & TGC_LN_HAS_BIAS))
        s = channel_vector(c, in, "bias", x->shape[1]);
    for (int k = 1; !s && k < c->n_in; k++)
        if (c->in[k].dtype != x->dtype)
            s = si_fail(c, TGC_ERR_DTYPE, "dtypes differ: x is %s, %s is %s",
                        tgc_dtype_name(x->dtype),
                        k == 1 && (has & TGC_LN_HAS_WEIGHT) ? "weight" : "bias",
                        tgc_dtype_name(c->in[k].dtype));
    return s ? s : si_set_out(c, x->dtype, x->shape, x->ndim);
}

tgc_status si_rule_NN(si_ctx *c)
{
    if (c->op == TGC_OP_GROUP_NORM)
        return infer_group_norm(c);
    /* layer_norm, and the ops of its layout (its weight has the normalized shape) */
    return c->op == TGC_OP_BATCH_NORM ? infer_batch_norm(c) : infer_layer_norm(c);
}

/* ---- losses ---- */

static tgc_status loss_attrs(si_ctx *c)
{
    int64_t red = c->a->loss.reduction;
    if (red != TGC_REDUCE_NONE && red != TGC_REDUCE_MEAN && red != TGC_REDUCE_SUM)
        return si_fail(c, TGC_ERR_INVALID_ARG,
                       "reduction must be 0 (none), 1 (mean) or 2 (sum), "
                       "got %lld",
                       (long long)red);
    double ls = c->a->loss.label_smoothing;
    if (c->op == TGC_OP_CROSS_ENTROPY && !(ls >= 0.0 && ls <= 1.0))
        return si_fail(c, TGC_ERR_INVALID_ARG, "label_smoothing must be in [0, 1], got %g", ls);
    return TGC_OK;
}

tgc_status si_rule_LOSS(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *t = &c->in[1];
    const char *xname = c->op == TGC_OP_CROSS_ENTROPY ? "logits" : "logp";
    const int idx[] = {0};
    const char *const names[] = {xname};
    tgc_status s = loss_attrs(c);
    if (!s)
        s = si_need_float(c, idx, names, 1);
    if (!s)
        s = si_need_index(c, 1, "target");
    if (!s)
        s = si_need_rank(c, 0, xname, 1, TGC_MAX_DIMS);
    if (s)
        return s;
    /* classes are dim 1 ([N, C, d...]), or dim 0 of an unbatched [C] */
    tgc_sdim want[TGC_MAX_DIMS];
    int nw = 0, cls = x->ndim == 1 ? 0 : 1;
    for (int d = 0; d < x->ndim; d++)
        if (d != cls)
            want[nw++] = x->shape[d];
    int ok = t->ndim == nw;
    for (int d = 0; ok && d < nw; d++)
        ok = si_eq(c, t->shape[d], want[d]);
    if (!ok)
        return si_fail(c, TGC_ERR_SHAPE, "target is %s but %s %s needs target %s", si_shape(c, t),
                       xname, si_shape(c, x), si_dims(c, want, nw));
    return si_set_out(c, x->dtype, want, c->a->loss.reduction == TGC_REDUCE_NONE ? nw : 0);
}

/* ---- attention ---- */

static tgc_status sdpa_attrs(si_ctx *c)
{
    double p = c->a->sdpa.dropout_p, scale = c->a->sdpa.scale;
    tgc_status s = si_need_inputs(c, 3 + (c->a->sdpa.has_mask != 0));
    if (s)
        return s;
    if (!(p >= 0.0 && p <= 1.0))
        return si_fail(c, TGC_ERR_INVALID_ARG, "dropout_p must be in [0, 1], got %g", p);
    if (!isfinite(scale) || scale == 0.0)
        return si_fail(c, TGC_ERR_INVALID_ARG, "scale must be finite and nonzero, got %g", scale);
    return TGC_OK;
}

/* The mask must broadcast to [..., L, S] without growing it. */
static tgc_status sdpa_mask(si_ctx *c, const tgc_sdim *scores, int ns)
{
    const tgc_vinfo *m = &c->in[3];
    if (m->dtype != TGC_BOOL && m->dtype != c->in[0].dtype)
        return si_fail(c, TGC_ERR_DTYPE, "mask must be bool or q's dtype %s, got %s",
                       tgc_dtype_name(c->in[0].dtype), tgc_dtype_name(m->dtype));
    int ok = m->ndim <= ns;
    for (int d = 0; ok && d < m->ndim; d++) {
        tgc_sdim md = m->shape[m->ndim - 1 - d], sd = scores[ns - 1 - d];
        ok = md == 1 || si_eq(c, md, sd);
    }
    if (!ok)
        return si_fail(c, TGC_ERR_SHAPE, "mask %s does not broadcast to the scores %s",
                       si_shape(c, m), si_dims(c, scores, ns));
    return TGC_OK;
}

tgc_status si_rule_ATTENTION(si_ctx *c)
{
    const tgc_vinfo *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
    static const int idx[] = {0, 1, 2};
    static const char *const names[] = {"q", "k", "v"};
    tgc_status s = sdpa_attrs(c);
    for (int j = 0; j < 3 && !s; j++)
        s = si_need_rank(c, j, names[j], 2, TGC_MAX_DIMS);
    if (!s)
        s = si_need_float(c, idx, names, 3);
    if (s)
        return s;
    if (!si_eq(c, q->shape[q->ndim - 1], k->shape[k->ndim - 1]))
        return si_fail(c, TGC_ERR_SHAPE, "q and k head dims differ: q is %s, k is %s",
                       si_shape(c, q), si_shape(c, k));
    if (!si_eq(c, k->shape[k->ndim - 2], v->shape[v->ndim - 2]))
        return si_fail(c, TGC_ERR_SHAPE, "k and v sequence lengths differ: k is %s, v is %s",
                       si_shape(c, k), si_shape(c, v));
    tgc_sdim qk[TGC_MAX_DIMS], r[TGC_MAX_DIMS];
    int nqk, nr;
    if (!si_broadcast_dims(c, q->shape, q->ndim - 2, k->shape, k->ndim - 2, qk, &nqk) ||
        !si_broadcast_dims(c, qk, nqk, v->shape, v->ndim - 2, r, &nr))
        return si_fail(c, TGC_ERR_SHAPE, "batch dims do not broadcast: q is %s, k is %s, v is %s",
                       si_shape(c, q), si_shape(c, k), si_shape(c, v));
    r[nr] = q->shape[q->ndim - 2];
    if (c->a->sdpa.has_mask) {
        r[nr + 1] = k->shape[k->ndim - 2]; /* the scores [..., L, S] */
        if ((s = sdpa_mask(c, r, nr + 2)))
            return s;
    }
    r[nr + 1] = v->shape[v->ndim - 1];
    return si_set_out(c, q->dtype, r, nr + 2);
}
