/* Public entry points of linear algebra and the neural-network ops. Optional tensor inputs
 * (bias, running stats, weight, mask) are left out of the input list when NULL and their
 * presence is recorded in the attributes, as ops.def lays out. */
#include <math.h>
#include <stdio.h>

#include "frontend/apply.h"
#include "autograd/autograd.h"
#include "autograd/grad_rules_impl.h"
#include "frontend/module_impl.h"
#include "frontend/trace.h"
#include "support/error.h"
#include "support/struct_size.h"
#include "tensor/tensor_impl.h"
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

tgc_tensor *tgc_conv2d_sized(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias,
                             const tgc_conv2d_opts *opts, size_t opts_size)
{
    tgc_tensor *in[3] = {x, w, bias};
    tgc_conv2d_opts o = {0}; /* the fields past the caller's opts_size: 0, their defaults */
    if (opts && TGC_READ_OPTS("tgc_conv2d", tgc_conv2d_opts, stride, &o, opts, opts_size) != TGC_OK)
        return NULL;
    tgc_attrs at = tgc_attrs_of(TGC_OP_CONV2D);
    tgc_conv2d_attrs *ca = &at.conv2d;
    ca->stride_h = or_default(o.stride[0], 1);
    ca->stride_w = or_default(o.stride[1], 1);
    ca->pad_h = o.padding[0];
    ca->pad_w = o.padding[1];
    ca->dil_h = or_default(o.dilation[0], 1);
    ca->dil_w = or_default(o.dilation[1], 1);
    ca->groups = or_default(o.groups, 1);
    return tgc_apply(TGC_OP_CONV2D, in, bias ? 3 : 2, &at);
}

static tgc_tensor *pool(tgc_op op, tgc_tensor *x, const tgc_pool2d_opts *user, size_t opts_size)
{
    tgc_pool2d_opts full = {0}; /* the fields past the caller's opts_size: 0, their defaults */
    char fn[32];
    snprintf(fn, sizeof fn, "tgc_%s", tgc_op_name(op));
    if (user && TGC_READ_OPTS(fn, tgc_pool2d_opts, kernel, &full, user, opts_size) != TGC_OK)
        return NULL;
    const tgc_pool2d_opts *opts = user ? &full : NULL;
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
    tgc_attrs at = tgc_attrs_of(op);
    tgc_pool_attrs *pa = &at.pool;
    pa->kh = opts->kernel[0];
    pa->kw = opts->kernel[1];
    pa->sh = or_default(opts->stride[0], opts->kernel[0]);
    pa->sw = or_default(opts->stride[1], opts->kernel[1]);
    pa->ph = opts->padding[0];
    pa->pw = opts->padding[1];
    pa->exclude_padding = opts->exclude_padding;
    return tgc_apply(op, &x, 1, &at);
}

tgc_tensor *tgc_max_pool2d_sized(tgc_tensor *x, const tgc_pool2d_opts *opts, size_t opts_size)
{
    return pool(TGC_OP_MAX_POOL2D, x, opts, opts_size);
}

tgc_tensor *tgc_avg_pool2d_sized(tgc_tensor *x, const tgc_pool2d_opts *opts, size_t opts_size)
{
    return pool(TGC_OP_AVG_POOL2D, x, opts, opts_size);
}

tgc_tensor *tgc_adaptive_avg_pool2d(tgc_tensor *x, int out_h, int out_w)
{
    tgc_attrs at = tgc_attrs_of(TGC_OP_ADAPTIVE_AVG_POOL2D);
    at.adaptive_pool.out_h = out_h;
    at.adaptive_pool.out_w = out_w;
    return tgc_apply(TGC_OP_ADAPTIVE_AVG_POOL2D, &x, 1, &at);
}

/* ---- normalization ---- */

/* batch_norm in training, recorded for autograd: the BATCH_NORM node computes the output and
 * updates the running statistics exactly as without recording (same kernel, same numbers),
 * and the batch mean and 1/std the backward needs are computed beside it with ops
 * (tgc_gr_bn_stats: one more reduction pass over x, in f32 at least) and saved in the one
 * record attached to the output. A backend that does not keep the op whole (no
 * TGC_DECOMPOSE_KEEP_BATCH_NORM: CUDA) decomposes it into those same statistics ops, so a
 * compiled step computes them once; LLVM keeps it, its eager ops running interp's kernel. */
static tgc_tensor *batch_norm_recorded(tgc_tensor *const *in, int n, const tgc_attrs *at)
{
    tgc_tensor *mean = NULL, *rstd = NULL;
    tgc_autograd_pause();
    tgc_tensor *y = tgc_apply(TGC_OP_BATCH_NORM, in, n, at);
    tgc_status st =
        y ? tgc_gr_bn_stats(in[0], at->batch_norm.eps, &mean, &rstd) : tgc_last_status();
    tgc_autograd_resume();
    if (st == TGC_OK) {
        tgc_tensor *saved[2] = {mean, rstd};
        st = tgc_autograd_attach(y, TGC_OP_BATCH_NORM, at, in, n,
                                 tgc_grad_rule_for(TGC_OP_BATCH_NORM, at), saved, 2);
    }
    tgc_tensor_free(mean); /* the record holds its own references */
    tgc_tensor_free(rstd);
    if (st != TGC_OK) {
        tgc_tensor_free(y);
        return NULL;
    }
    return y;
}

/* PyTorch's batch norm counts its training batches in the buffer num_batches_tracked (i64,
 * one element) beside its running statistics, and a state_dict carries it. When the module
 * that holds running_mean has that buffer, each training-mode batch norm adds one to it: an
 * in-place write of the module's tensor (tgc_copy_), so a compiled function records it as
 * an assignment in the graph, as the running statistics are written in place. */
static tgc_status count_batch(const tgc_tensor *running_mean)
{
    tgc_tensor *n = running_mean->module
                        ? tgc_module_find_local(running_mean->module, "num_batches_tracked")
                        : NULL;
    if (!n || n->dtype != TGC_I64 || tgc_shape_numel(n->shape, n->ndim) != 1)
        return TGC_OK;
    tgc_tensor *n1 = tgc_add_scalar(n, 1.0);
    tgc_status st = n1 ? tgc_copy_(n, n1) : tgc_last_status();
    tgc_tensor_free(n1);
    return st;
}

static tgc_tensor *batch_norm_op(tgc_tensor *x, tgc_tensor *running_mean, tgc_tensor *running_var,
                                 tgc_tensor *weight, tgc_tensor *bias, int training,
                                 double momentum, double eps)
{
    if (!running_mean != !running_var) {
        tgc_keep_error(TGC_ERR_INVALID_ARG,
                       "tgc_batch_norm: give both running_mean and running_var, or neither");
        return NULL;
    }
    tgc_tensor *in[5] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_of(TGC_OP_BATCH_NORM);
    if (running_mean) {
        in[n++] = running_mean;
        in[n++] = running_var;
        at.batch_norm.has |= TGC_BN_HAS_STATS;
    }
    if (weight) {
        in[n++] = weight;
        at.batch_norm.has |= TGC_BN_HAS_WEIGHT;
    }
    if (bias) {
        in[n++] = bias;
        at.batch_norm.has |= TGC_BN_HAS_BIAS;
    }
    at.batch_norm.training = training != 0;
    at.batch_norm.momentum = momentum;
    at.batch_norm.eps = eps;
    if (training && x && tgc_autograd_wants(in, n))
        return batch_norm_recorded(in, n, &at);
    return tgc_apply(TGC_OP_BATCH_NORM, in, n, &at);
}

tgc_tensor *tgc_batch_norm(tgc_tensor *x, tgc_tensor *running_mean, tgc_tensor *running_var,
                           tgc_tensor *weight, tgc_tensor *bias, int training, double momentum,
                           double eps)
{
    tgc_tensor *y =
        batch_norm_op(x, running_mean, running_var, weight, bias, training, momentum, eps);
    if (y && training && running_mean && count_batch(running_mean) != TGC_OK) {
        tgc_tensor_free(y);
        return NULL;
    }
    return y;
}

tgc_tensor *tgc_layer_norm(tgc_tensor *x, int n_norm, tgc_tensor *weight, tgc_tensor *bias,
                           double eps)
{
    tgc_tensor *in[3] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_of(TGC_OP_LAYER_NORM);
    if (weight) {
        in[n++] = weight;
        at.layer_norm.has |= TGC_LN_HAS_WEIGHT;
    }
    if (bias) {
        in[n++] = bias;
        at.layer_norm.has |= TGC_LN_HAS_BIAS;
    }
    at.layer_norm.n_norm = n_norm;
    at.layer_norm.eps = eps;
    return tgc_apply(TGC_OP_LAYER_NORM, in, n, &at);
}

/* torch.finfo(dt).eps of a float dtype (rms_norm's eps=None); f32's for the others, whose
 * inference fails anyway. */
static double finfo_eps(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 2.220446049250313e-16;
    case TGC_F16: return 9.765625e-04;
    case TGC_BF16: return 7.8125e-03;
    default: return 1.1920928955078125e-07;
    }
}

tgc_tensor *tgc_rms_norm(tgc_tensor *x, int n_norm, tgc_tensor *weight, double eps)
{
    tgc_tensor *in[2] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_of(TGC_OP_RMS_NORM);
    if (weight) {
        in[n++] = weight;
        at.layer_norm.has = TGC_LN_HAS_WEIGHT;
    }
    at.layer_norm.n_norm = n_norm;
    at.layer_norm.eps = !(eps >= 0) && x ? finfo_eps(tgc_dtype_of(x)) : eps;
    return tgc_apply(TGC_OP_RMS_NORM, in, n, &at);
}

tgc_tensor *tgc_group_norm(tgc_tensor *x, int num_groups, tgc_tensor *weight, tgc_tensor *bias,
                           double eps)
{
    tgc_tensor *in[3] = {x};
    int n = 1;
    tgc_attrs at = tgc_attrs_of(TGC_OP_GROUP_NORM);
    if (weight) {
        in[n++] = weight;
        at.group_norm.has |= TGC_LN_HAS_WEIGHT;
    }
    if (bias) {
        in[n++] = bias;
        at.group_norm.has |= TGC_LN_HAS_BIAS;
    }
    at.group_norm.groups = num_groups;
    at.group_norm.eps = eps;
    return tgc_apply(TGC_OP_GROUP_NORM, in, n, &at);
}

/* dropout recorded for autograd: the mask is drawn once, by a DROPOUT node over ones of x's
 * shape (so the draw reserves the same counters of the Philox stream and keeps the same
 * elements as DROPOUT(x) would), in f64: m = keep ? 1/(1-p) : 0 exactly. y = x * m
 * computed in f64 and rounded once to x's dtype is what the DROPOUT kernel computes (it
 * multiplies in double, so NaN and -0 propagate the same way): the same bits. The keep
 * mask (bool) is saved in the record; backward never draws again. */
static tgc_tensor *dropout_recorded(tgc_tensor *x, const tgc_attrs *at)
{
    tgc_tensor *keep = NULL, *y = NULL;
    tgc_autograd_pause();
    tgc_tensor *ones = tgc_gr_full_like(1.0, TGC_F64, x);
    tgc_tensor *m = ones ? tgc_apply(TGC_OP_DROPOUT, &ones, 1, at) : NULL;
    if (m) {
        tgc_tensor *prod = tgc_mul(x, m);
        y = tgc_gr_cast(prod, tgc_dtype_of(x));
        if (y != prod)
            tgc_tensor_free(prod);
        keep = tgc_ne(m, tgc_gr_scalar(0.0, TGC_F64, x));
    }
    tgc_autograd_resume();
    tgc_tensor_free(ones);
    tgc_tensor_free(m);
    tgc_status st = y && keep ? tgc_autograd_attach(y, TGC_OP_DROPOUT, at, &x, 1,
                                                    tgc_grad_rule_for(TGC_OP_DROPOUT, at), &keep, 1)
                              : tgc_last_status();
    tgc_tensor_free(keep);
    if (st != TGC_OK) {
        tgc_tensor_free(y);
        return NULL;
    }
    return y;
}

/* Identity when not training or p == 0: a no-copy alias (expand keeping every dim). */
tgc_tensor *tgc_dropout(tgc_tensor *x, double p, int training)
{
    if (x && !(p >= 0.0 && p <= 1.0)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dropout: p must be in [0, 1], got %g", p);
        return NULL;
    }
    if (x && (!training || p == 0.0)) {
        tgc_attrs ex = tgc_attrs_none();
        ex.ni = tgc_ndim(x);
        for (int k = 0; k < ex.ni; k++)
            ex.shape.dims[k] = -1;
        return tgc_apply(TGC_OP_EXPAND, &x, 1, &ex);
    }
    tgc_attrs at = tgc_attrs_of(TGC_OP_DROPOUT);
    at.dropout.p = p;
    if (x && tgc_autograd_wants(&x, 1))
        return dropout_recorded(x, &at);
    return tgc_apply(TGC_OP_DROPOUT, &x, 1, &at);
}

/* ---- losses ---- */

static tgc_tensor *loss(tgc_op op, tgc_tensor *x, tgc_tensor *target, int reduction,
                        int64_t ignore_index, double label_smoothing)
{
    tgc_tensor *in[2] = {x, target};
    tgc_attrs at = tgc_attrs_of(op);
    at.loss.reduction = reduction;
    at.loss.ignore_index = ignore_index;
    at.loss.label_smoothing = label_smoothing;
    at.nf = op == TGC_OP_CROSS_ENTROPY; /* NLL_LOSS has no label smoothing */
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

/* Attention with dropout, recorded for autograd: composed of recorded ops, so the dropout
 * mask is drawn once and saved (tgc_dropout's record). The weights are expanded to the
 * result's batch dims first, so the draw covers the row-major [batch..., L, S] weights with
 * the counters the SDPA kernel uses: the same elements are dropped. The values agree with
 * the fused kernel within rounding (they are not bit-identical: the kernel rounds once). */
static tgc_tensor *sdpa_composed(tgc_tensor *q, tgc_tensor *k, tgc_tensor *v, tgc_tensor *mask,
                                 const tgc_attrs *at)
{
    tgc_tensor *P = tgc_gr_sdpa_weights(q, k, mask, (int)at->sdpa.causal, at->sdpa.scale);
    if (!P)
        return NULL;
    const int np = tgc_ndim(P), nv = tgc_ndim(v), nb = (np > nv ? np : nv) - 2;
    tgc_symint s[TGC_MAX_DIMS];
    for (int d = 0; d < nb; d++) { /* the result's batch dims: P's, broadcast with v's */
        int dp = d - (nb - (np - 2)), dv = d - (nb - (nv - 2));
        s[d] = dp >= 0 && !tgc_grad_dim_is_one(P, dp) ? tgc_sym_size(P, dp)
               : dv >= 0                              ? tgc_sym_size(v, dv)
                                                      : tgc_symint_const(1);
    }
    s[nb] = tgc_sym_size(P, -2);
    s[nb + 1] = tgc_sym_size(P, -1);
    tgc_tensor *Pd = tgc_dropout(tgc_expand_sym(P, s, nb + 2), at->sdpa.dropout_p, 1);
    tgc_tensor *y = tgc_matmul(Pd, tgc_gr_cast(v, tgc_dtype_of(P)));
    return tgc_gr_cast(y, tgc_dtype_of(q));
}

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
    tgc_attrs at = tgc_attrs_of(TGC_OP_SDPA);
    at.sdpa.causal = causal != 0;
    at.sdpa.has_mask = mask != NULL;
    at.sdpa.dropout_p = dropout_p;
    at.sdpa.scale = sdpa_scale(q, scale);
    if (dropout_p > 0 && q && k && v && tgc_autograd_wants(in, mask ? 4 : 3))
        return sdpa_composed(q, k, v, mask, &at);
    return tgc_apply(TGC_OP_SDPA, in, mask ? 4 : 3, &at);
}
