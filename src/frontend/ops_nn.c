/* Public entry points of linear algebra and the neural-network ops. Optional tensor inputs
 * (bias, running stats, weight, mask) are left out of the input list when NULL and their
 * presence is recorded in the attributes, as ops.def lays out. */
#include <math.h>

#include "frontend/apply.h"
#include "frontend/trace.h"
#include "support/error.h"
#include "tgc/ops.h"

/* ---- linear algebra ---- */

tgc_tensor *tgc_matmul(tgc_tensor *a, tgc_tensor *b)
{
    tgc_tensor *in[2] = {a, b};
    tgc_attrs at = tgc_attrs_none();
    return tgc_apply(TGC_OP_MATMUL, in, 2, &at);
}

tgc_tensor *tgc_linear(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias)
{
    tgc_tensor *in[3] = {x, w, bias};
    tgc_attrs at = tgc_attrs_none();
    return tgc_apply(TGC_OP_LINEAR, in, bias ? 3 : 2, &at);
}

/* ---- convolution and pooling ---- */

/* A zero option takes its default; negative ones pass through for shape inference to
 * reject with the op's name. */
static int64_t or_default(int v, int64_t dflt)
{
    return v ? v : dflt;
}

tgc_tensor *tgc_conv2d(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias, const tgc_conv2d_opts *opts)
{
    tgc_tensor *in[3] = {x, w, bias};
    const tgc_conv2d_opts o = opts ? *opts : (tgc_conv2d_opts){0};
    tgc_attrs at = tgc_attrs_none();
    for (int k = 0; k < 2; k++) {
        at.i[k] = or_default(o.stride[k], 1);
        at.i[2 + k] = o.padding[k];
        at.i[4 + k] = or_default(o.dilation[k], 1);
    }
    at.i[6] = or_default(o.groups, 1);
    at.ni = 7;
    return tgc_apply(TGC_OP_CONV2D, in, bias ? 3 : 2, &at);
}

static tgc_tensor *pool(tgc_op op, tgc_tensor *x, const tgc_pool2d_opts *opts)
{
    if (!opts) {
        tgc_keep_error(TGC_ERR_INVALID_ARG,
                       "tgc_%s: opts is NULL; give at least the kernel size "
                       "(&(tgc_pool2d_opts){.kernel = {kh, kw}})",
                       tgc_op_name(op));
        return NULL;
    }
    if (opts->exclude_padding != 0 && opts->exclude_padding != 1) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_%s: exclude_padding must be 0 or 1, got %d",
                       tgc_op_name(op), opts->exclude_padding);
        return NULL;
    }
    if (opts->exclude_padding && op != TGC_OP_AVG_POOL2D) {
        tgc_keep_error(TGC_ERR_INVALID_ARG,
                       "tgc_%s: exclude_padding applies to tgc_avg_pool2d only", tgc_op_name(op));
        return NULL;
    }
    tgc_attrs at = tgc_attrs_none();
    for (int k = 0; k < 2; k++) {
        at.i[k] = opts->kernel[k];
        at.i[2 + k] = or_default(opts->stride[k], opts->kernel[k]);
        at.i[4 + k] = opts->padding[k];
    }
    at.i[6] = opts->exclude_padding;
    at.ni = 7;
    return tgc_apply(op, &x, 1, &at);
}

tgc_tensor *tgc_max_pool2d(tgc_tensor *x, const tgc_pool2d_opts *opts)
{
    return pool(TGC_OP_MAX_POOL2D, x, opts);
}

tgc_tensor *tgc_avg_pool2d(tgc_tensor *x, const tgc_pool2d_opts *opts)
{
    return pool(TGC_OP_AVG_POOL2D, x, opts);
}

tgc_tensor *tgc_adaptive_avg_pool2d(tgc_tensor *x, int out_h, int out_w)
{
    tgc_attrs at = tgc_attrs_none();
    at.i[0] = out_h;
    at.i[1] = out_w;
    at.ni = 2;
    return tgc_apply(TGC_OP_ADAPTIVE_AVG_POOL2D, &x, 1, &at);
}

/* ---- normalization ---- */

tgc_tensor *tgc_batch_norm(tgc_tensor *x, tgc_tensor *running_mean, tgc_tensor *running_var,
                           tgc_tensor *weight, tgc_tensor *bias, int training, double momentum,
                           double eps)
{
    if (!running_mean != !running_var) {
        tgc_keep_error(TGC_ERR_INVALID_ARG,
                       "tgc_batch_norm: give both running_mean and running_var, or neither");
        return NULL;
    }
    tgc_tensor *in[5] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_none();
    if (running_mean) {
        in[n++] = running_mean;
        in[n++] = running_var;
        at.i[1] |= TGC_BN_HAS_STATS;
    }
    if (weight) {
        in[n++] = weight;
        at.i[1] |= TGC_BN_HAS_WEIGHT;
    }
    if (bias) {
        in[n++] = bias;
        at.i[1] |= TGC_BN_HAS_BIAS;
    }
    at.i[0] = training != 0;
    at.ni = 2;
    at.f[0] = momentum;
    at.f[1] = eps;
    at.nf = 2;
    return tgc_apply(TGC_OP_BATCH_NORM, in, n, &at);
}

tgc_tensor *tgc_layer_norm(tgc_tensor *x, int n_norm, tgc_tensor *weight, tgc_tensor *bias,
                           double eps)
{
    tgc_tensor *in[3] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_none();
    if (weight) {
        in[n++] = weight;
        at.i[1] |= TGC_LN_HAS_WEIGHT;
    }
    if (bias) {
        in[n++] = bias;
        at.i[1] |= TGC_LN_HAS_BIAS;
    }
    at.i[0] = n_norm;
    at.ni = 2;
    at.f[0] = eps;
    at.nf = 1;
    return tgc_apply(TGC_OP_LAYER_NORM, in, n, &at);
}

/* Identity when not training or p == 0: a no-copy alias (expand keeping every dim). */
tgc_tensor *tgc_dropout(tgc_tensor *x, double p, int training)
{
    tgc_attrs at = tgc_attrs_none();
    if (x && !(p >= 0.0 && p <= 1.0)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dropout: p must be in [0, 1], got %g", p);
        return NULL;
    }
    if (x && (!training || p == 0.0)) {
        at.ni = tgc_ndim(x);
        for (int k = 0; k < at.ni; k++)
            at.i[k] = -1;
        return tgc_apply(TGC_OP_EXPAND, &x, 1, &at);
    }
    at.f[0] = p;
    at.nf = 1;
    return tgc_apply(TGC_OP_DROPOUT, &x, 1, &at);
}

/* ---- losses ---- */

static tgc_tensor *loss(tgc_op op, tgc_tensor *x, tgc_tensor *target, int reduction,
                        int64_t ignore_index, double label_smoothing)
{
    tgc_tensor *in[2] = {x, target};
    tgc_attrs at = tgc_attrs_none();
    at.i[0] = reduction;
    at.i[1] = ignore_index;
    at.ni = 2;
    at.f[0] = label_smoothing;
    at.nf = op == TGC_OP_CROSS_ENTROPY;
    return tgc_apply(op, in, 2, &at);
}

tgc_tensor *tgc_cross_entropy(tgc_tensor *logits, tgc_tensor *target, int reduction,
                              int64_t ignore_index, double label_smoothing)
{
    return loss(TGC_OP_CROSS_ENTROPY, logits, target, reduction, ignore_index, label_smoothing);
}

tgc_tensor *tgc_nll_loss(tgc_tensor *logp, tgc_tensor *target, int reduction, int64_t ignore_index)
{
    return loss(TGC_OP_NLL_LOSS, logp, target, reduction, ignore_index, 0.0);
}

/* ---- attention ---- */

/* scale 0 means 1/sqrt(E). E is normally static; reading a dynamic one specializes it,
 * which the scale's value depends on anyway (the recompile reason names this op). */
static double sdpa_scale(const tgc_tensor *q, double scale)
{
    if (scale != 0.0 || !q || q->ndim == 0)
        return scale != 0.0 ? scale : 1.0;
    int d = q->ndim - 1;
    int64_t e = q->trace && q->trace == tgc_trace_current() && !TGC_SDIM_IS_CONST(q->sshape[d])
                    ? tgc_trace_read_size(q->trace, q, d, "tgc_scaled_dot_product_attention")
                    : q->shape[d];
    return e > 0 ? 1.0 / sqrt((double)e) : 1.0;
}

tgc_tensor *tgc_scaled_dot_product_attention(tgc_tensor *q, tgc_tensor *k, tgc_tensor *v,
                                             tgc_tensor *mask, double dropout_p, int causal,
                                             double scale)
{
    tgc_tensor *in[4] = {q, k, v, mask};
    tgc_attrs at = tgc_attrs_none();
    at.i[0] = causal != 0;
    at.i[1] = mask != NULL;
    at.ni = 2;
    at.f[0] = dropout_p;
    at.f[1] = sdpa_scale(q, scale);
    at.nf = 2;
    return tgc_apply(TGC_OP_SDPA, in, mask ? 4 : 3, &at);
}
