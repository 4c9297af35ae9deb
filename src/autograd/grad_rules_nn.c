/* Backward rules of the normalizations, dropout, the losses and attention, and the
 * composite forwards that record them (used by ops_nn.c).
 *
 * batch_norm, training: the record saves the batch mean and 1/std that tgc_batch_norm
 * computed with ops beside its BATCH_NORM node (tgc_gr_bn_stats); the rule is the closed
 * form dx = w rstd (dy - mean(dy) - xhat mean(dy xhat)), dw = sum(dy xhat), db = sum(dy)
 * over N and the spatial dims. Eval: the normalization is an affine map per channel.
 * layer_norm recomputes mean and 1/std from x in its rule (one extra reduction over x in
 * backward, nothing saved); the formula is batch_norm's over the last n_norm dims.
 * dropout: the record saves the keep mask drawn in the forward (never re-drawn).
 * Losses: softmax(x) - (1 - eps) onehot - eps / C per position (cross_entropy with label
 * smoothing eps), -onehot (nll_loss), scaled per position by the reduction (mean divides by
 * the count of targets that are not ignore_index) and zero at ignored positions.
 * Attention recomputes the weights P with matmul and softmax (tgc_gr_sdpa_weights), then
 * dV = P^T dY, dS = P (dP - sum(dP P)), dQ = scale dS K, dK = scale dS^T Q, and a float
 * mask gets dS. */
#include <math.h>

#include "autograd/grad_rules_impl.h"
#include "support/error.h"

/* The dims of x [N, C, ...] but 1, as a list and a mask. */
static int bn_dims(int nd, int *dims, int64_t *mask)
{
    int n = 0;
    *mask = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1) {
            dims[n++] = d;
            *mask |= (int64_t)1 << d;
        }
    return n;
}

/* A per-channel [C] tensor as [1, C, 1, ...] against x. */
static tgc_tensor *per_channel(tgc_tensor *p, tgc_tensor *x, tgc_dtype dt)
{
    tgc_symint s[TGC_MAX_DIMS];
    const int nd = tgc_ndim(x);
    for (int d = 0; d < nd; d++)
        s[d] = d == 1 ? tgc_sym_size(x, 1) : tgc_symint_const(1);
    return tgc_reshape_sym(tgc_gr_cast(p, dt), s, nd);
}

tgc_status tgc_gr_bn_stats(tgc_tensor *x, double eps, tgc_tensor **mean, tgc_tensor **rstd)
{
    int dims[TGC_MAX_DIMS];
    int64_t mask;
    const int n = bn_dims(tgc_ndim(x), dims, &mask);
    tgc_tensor *xu;
    *mean = *rstd = NULL;
    GR_SET(xu, tgc_gr_up(x, tgc_dtype_of(x)));
    GR_SET(*mean, tgc_mean(xu, dims, n, 1));
    /* the biased variance as the mean of the squared deviations: the expression the passes
     * decompose batch_norm into (decompose.c), so a compiled step computes them once */
    tgc_tensor *dev;
    GR_SET(dev, tgc_sub(xu, *mean));
    GR_SET(*rstd, tgc_rsqrt(tgc_add_scalar(tgc_mean(tgc_mul(dev, dev), dims, n, 1), eps)));
    return TGC_OK;
}

/* dx of a normalization given dxhat (dy times the weight), xhat and rstd: rstd (dxhat -
 * mean(dxhat) - xhat mean(dxhat xhat)) over dims. */
static tgc_tensor *norm_dx(tgc_tensor *dxhat, tgc_tensor *xhat, tgc_tensor *rstd, const int *dims,
                           int n)
{
    tgc_tensor *m1 = tgc_mean(dxhat, dims, n, 1);
    tgc_tensor *m2 = tgc_mean(tgc_mul(dxhat, xhat), dims, n, 1);
    return tgc_mul(rstd, tgc_sub(tgc_sub(dxhat, m1), tgc_mul(xhat, m2)));
}

tgc_status tgc_grad_rule_batch_norm(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *rm = NULL, *rv = NULL, *w = NULL;
    const int64_t bits = c->a->batch_norm.has;
    const int training = c->a->batch_norm.training != 0;
    int k = 1, wi = -1, bi = -1;
    if (bits & TGC_BN_HAS_STATS) {
        rm = c->in[k++];
        rv = c->in[k++];
    }
    if (bits & TGC_BN_HAS_WEIGHT)
        w = c->in[wi = k++];
    if (bits & TGC_BN_HAS_BIAS)
        bi = k++;
    if (k != c->n_in || (!training && !rm))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_batch_norm: %d inputs for bits %lld",
                             c->n_in, (long long)bits);
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(x));
    int dims[TGC_MAX_DIMS];
    int64_t mask;
    const int n = bn_dims(tgc_ndim(x), dims, &mask);
    tgc_tensor *g, *xu, *mean, *rstd, *xhat;
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(xu, tgc_gr_cast(x, dt));
    if (!training) {
        GR_SET(mean, per_channel(rm, x, dt));
        GR_SET(rstd, tgc_rsqrt(tgc_add_scalar(per_channel(rv, x, dt), c->a->batch_norm.eps)));
    } else if (c->n_saved >= 2) {
        mean = c->saved[0];
        rstd = c->saved[1];
    } else { /* recorded without its statistics: recompute them */
        tgc_status s = tgc_gr_bn_stats(x, c->a->batch_norm.eps, &mean, &rstd);
        if (s)
            return s;
    }
    GR_SET(xhat, tgc_mul(tgc_sub(xu, mean), rstd));
    /* the two per-channel sums every gradient is made of: sum(dy) (db) and sum(dy xhat) (dw);
     * in training dx = w rstd (dy - sum(dy)/n - xhat sum(dy xhat)/n) */
    const int need_w = wi >= 0 && c->needs[wi], need_b = bi >= 0 && c->needs[bi];
    tgc_tensor *s_g = NULL, *s_gx = NULL, *scale = rstd;
    if (need_b || (training && c->needs[0]))
        GR_SET(s_g, tgc_sum(g, dims, n, 1));
    if (need_w || (training && c->needs[0]))
        GR_SET(s_gx, tgc_sum(tgc_mul(g, xhat), dims, n, 1));
    if (c->needs[0]) {
        if (w)
            GR_SET(scale, tgc_mul(rstd, per_channel(w, x, dt)));
        tgc_tensor *d = g;
        if (training)
            d = tgc_sub(tgc_sub(g, tgc_gr_div_count(s_g, x, mask, 0)),
                        tgc_mul(xhat, tgc_gr_div_count(s_gx, x, mask, 0)));
        GR_SET(gin[0], tgc_gr_cast(tgc_mul(d, scale), tgc_dtype_of(x)));
    }
    if (need_w)
        GR_SET(gin[wi], tgc_reshape_as(tgc_gr_cast(s_gx, tgc_dtype_of(w)), w));
    if (need_b)
        GR_SET(gin[bi], tgc_reshape_as(tgc_gr_cast(s_g, tgc_dtype_of(c->in[bi])), c->in[bi]));
    (void)rv;
    return TGC_OK; /* the running statistics get no gradient (PyTorch) */
}

tgc_status tgc_grad_rule_layer_norm(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *w = NULL;
    const int n_norm = (int)c->a->layer_norm.n_norm;
    const int64_t bits = c->a->layer_norm.has;
    int k = 1, wi = -1, bi = -1;
    if (bits & TGC_LN_HAS_WEIGHT)
        w = c->in[wi = k++];
    if (bits & TGC_LN_HAS_BIAS)
        bi = k++;
    const int nd = tgc_ndim(x);
    if (k != c->n_in || n_norm < 0 || n_norm > nd)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_layer_norm: %d inputs, n_norm %d",
                             c->n_in, n_norm);
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(x));
    tgc_tensor *g;
    GR_SET(g, tgc_gr_cast(gy, dt));
    if (bi >= 0 && c->needs[bi])
        GR_SET(gin[bi], tgc_grad_sum_to(g, c->in[bi]));
    if (n_norm == 0) /* each element is its own row: y = bias, x and weight do not matter */
        return TGC_OK;
    int dims[TGC_MAX_DIMS];
    for (int d = 0; d < n_norm; d++)
        dims[d] = nd - n_norm + d;
    tgc_tensor *xu, *mean, *rstd, *xhat;
    GR_SET(xu, tgc_gr_cast(x, dt));
    GR_SET(mean, tgc_mean(xu, dims, n_norm, 1));
    GR_SET(rstd, tgc_rsqrt(tgc_add_scalar(tgc_var(xu, dims, n_norm, 0, 1), c->a->layer_norm.eps)));
    GR_SET(xhat, tgc_mul(tgc_sub(xu, mean), rstd));
    if (c->needs[0]) {
        tgc_tensor *dxhat = w ? tgc_mul(g, tgc_gr_cast(w, dt)) : g;
        GR_SET(gin[0], tgc_gr_cast(norm_dx(dxhat, xhat, rstd, dims, n_norm), tgc_dtype_of(x)));
    }
    if (wi >= 0 && c->needs[wi])
        GR_SET(gin[wi], tgc_grad_sum_to(tgc_mul(g, xhat), w));
    return TGC_OK;
}

/* rms_norm: xhat = x rstd, rstd = rsqrt(mean(x^2) + eps) recomputed from x; with dxhat = dy w,
 * dx = rstd (dxhat - xhat mean(dxhat xhat)) over the normalized dims, dw = sum(dy xhat). */
tgc_status tgc_grad_rule_rms_norm(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *w = c->n_in > 1 ? c->in[1] : NULL;
    const int n_norm = (int)c->a->layer_norm.n_norm, nd = tgc_ndim(x);
    if (c->n_in != 1 + !!(c->a->layer_norm.has & TGC_LN_HAS_WEIGHT) || n_norm < 1 || n_norm > nd)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_rms_norm: %d inputs, n_norm %d",
                             c->n_in, n_norm);
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(x));
    int dims[TGC_MAX_DIMS];
    for (int d = 0; d < n_norm; d++)
        dims[d] = nd - n_norm + d;
    tgc_tensor *g, *xu, *rstd, *xhat;
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(xu, tgc_gr_cast(x, dt));
    GR_SET(rstd, tgc_rsqrt(tgc_add_scalar(tgc_mean(tgc_mul(xu, xu), dims, n_norm, 1),
                                          c->a->layer_norm.eps)));
    GR_SET(xhat, tgc_mul(xu, rstd));
    if (c->needs[0]) {
        tgc_tensor *dxhat = w ? tgc_mul(g, tgc_gr_cast(w, dt)) : g, *m;
        GR_SET(m, tgc_mean(tgc_mul(dxhat, xhat), dims, n_norm, 1));
        GR_SET(gin[0],
               tgc_gr_cast(tgc_mul(rstd, tgc_sub(dxhat, tgc_mul(xhat, m))), tgc_dtype_of(x)));
    }
    if (w && c->needs[1])
        GR_SET(gin[1], tgc_gr_cast(tgc_grad_sum_to(tgc_mul(g, xhat), w), tgc_dtype_of(w)));
    return TGC_OK;
}

/* group_norm: x viewed as [N, G, C / G * spatial], each row normalized as layer_norm's (its
 * closed form, norm_dx), the statistics recomputed from x; dw = sum(dy xhat), db = sum(dy)
 * over N and the spatial dims. */
tgc_status tgc_grad_rule_group_norm(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *w = NULL;
    const int64_t bits = c->a->group_norm.has, G = c->a->group_norm.groups;
    int k = 1, wi = -1, bi = -1;
    if (bits & TGC_LN_HAS_WEIGHT)
        w = c->in[wi = k++];
    if (bits & TGC_LN_HAS_BIAS)
        bi = k++;
    const int nd = tgc_ndim(x);
    if (k != c->n_in || nd < 2 || G < 1)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_group_norm: %d inputs, rank %d",
                             c->n_in, nd);
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(x));
    int dims[TGC_MAX_DIMS];
    int64_t mask;
    const int n = bn_dims(nd, dims, &mask);
    const int64_t grouped[3] = {0, G, -1};
    const int last[1] = {2};
    tgc_tensor *g, *xu, *x3, *mean, *rstd, *xhat3, *xhat = NULL;
    GR_SET(g, tgc_gr_cast(gy, dt));
    if (bi >= 0 && c->needs[bi])
        GR_SET(gin[bi], tgc_gr_cast(tgc_sum(g, dims, n, 0), tgc_dtype_of(c->in[bi])));
    if (!c->needs[0] && !(wi >= 0 && c->needs[wi]))
        return TGC_OK;
    GR_SET(xu, tgc_gr_cast(x, dt));
    GR_SET(x3, tgc_reshape(xu, grouped, 3));
    GR_SET(mean, tgc_mean(x3, last, 1, 1));
    GR_SET(rstd, tgc_rsqrt(tgc_add_scalar(tgc_var(x3, last, 1, 0, 1), c->a->group_norm.eps)));
    GR_SET(xhat3, tgc_mul(tgc_sub(x3, mean), rstd));
    if (c->needs[0]) {
        tgc_tensor *dxhat = w ? tgc_mul(g, per_channel(w, x, dt)) : g, *dx3;
        GR_SET(dx3, norm_dx(tgc_reshape(dxhat, grouped, 3), xhat3, rstd, last, 1));
        GR_SET(gin[0], tgc_gr_cast(tgc_reshape_as(dx3, x), tgc_dtype_of(x)));
    }
    if (wi >= 0 && c->needs[wi]) {
        GR_SET(xhat, tgc_reshape_as(xhat3, x));
        GR_SET(gin[wi], tgc_gr_cast(tgc_sum(tgc_mul(g, xhat), dims, n, 0), tgc_dtype_of(w)));
    }
    return TGC_OK;
}

tgc_status tgc_grad_rule_dropout(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    if (!c->needs[0])
        return TGC_OK;
    if (c->n_saved < 1)
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "tgc_dropout: recorded without its mask; its gradient needs the "
                             "bits the forward drew (record it through tgc_dropout)");
    const double p = c->a->dropout.p, scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    const tgc_dtype xdt = tgc_dtype_of(c->in[0]), dt = tgc_gr_compute_dtype(xdt);
    tgc_tensor *keep;
    GR_SET(keep, tgc_cast(c->saved[0], dt));
    GR_SET(gin[0], tgc_gr_cast(tgc_mul_scalar(tgc_mul(tgc_gr_cast(gy, dt), keep), scale), xdt));
    return TGC_OK;
}

/* [1, C, 1, ...] (or [C] for a 1-D x) class indices of dtype dt along dim cdim of x. */
static tgc_tensor *class_ids(tgc_tensor *x, int cdim, tgc_dtype dt)
{
    const int nd = tgc_ndim(x);
    tgc_symint s[TGC_MAX_DIMS];
    tgc_symint C = tgc_sym_size(x, cdim);
    tgc_tensor *ids = tgc_arange_sym(0, C, 1, dt, tgc_device_of(x));
    for (int d = 0; d < nd; d++)
        s[d] = d == cdim ? C : tgc_symint_const(1);
    return tgc_reshape_sym(ids, s, nd);
}

tgc_status tgc_grad_rule_loss(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *t = c->in[1];
    if (!c->needs[0])
        return TGC_OK;
    const int reduction = (int)c->a->loss.reduction;
    const int cdim = tgc_ndim(x) == 1 ? 0 : 1;
    const tgc_dtype xdt = tgc_dtype_of(x), dt = tgc_gr_compute_dtype(xdt);
    const tgc_dtype tdt = tgc_dtype_of(t);
    tgc_tensor *g, *valid, *wp, *onehot, *r;
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(valid, tgc_ne(t, tgc_gr_scalar((double)c->a->loss.ignore_index, tdt, t)));
    if (reduction == TGC_REDUCE_MEAN) /* over the targets that count */
        GR_SET(g, tgc_div(g, tgc_sum(tgc_cast(valid, dt), NULL, 0, 0)));
    GR_SET(wp, tgc_unsqueeze(tgc_where(valid, g, tgc_gr_scalar(0.0, dt, x)), cdim));
    GR_SET(onehot, tgc_cast(tgc_eq(tgc_unsqueeze(t, cdim), class_ids(x, cdim, tdt)), dt));
    if (c->op == TGC_OP_NLL_LOSS) {
        r = tgc_neg(tgc_mul(onehot, wp));
    } else {
        const double eps = c->a->loss.label_smoothing;
        tgc_tensor *d = tgc_softmax(tgc_gr_cast(x, dt), cdim);
        if (eps != 1.0)
            d = tgc_sub(d, tgc_mul_scalar(onehot, 1.0 - eps));
        if (eps != 0.0) /* the smoothing term's eps / C */
            d = tgc_sub(d, tgc_gr_div_count(tgc_gr_scalar(eps, dt, x), x, (int64_t)1 << cdim, 0));
        r = tgc_mul(d, wp);
    }
    GR_SET(gin[0], tgc_gr_cast(r, xdt));
    return TGC_OK;
}

tgc_tensor *tgc_gr_sdpa_weights(tgc_tensor *q, tgc_tensor *k, tgc_tensor *mask, int causal,
                                double scale)
{
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(q));
    tgc_tensor *s =
        tgc_mul_scalar(tgc_matmul(tgc_gr_cast(q, dt), tgc_gr_mT(tgc_gr_cast(k, dt))), scale);
    if (!s)
        return NULL;
    tgc_tensor *ninf = tgc_gr_scalar(-INFINITY, dt, q);
    if (causal) { /* position j > i is masked (top-left aligned, as PyTorch's is_causal) */
        tgc_symint L = tgc_sym_size(q, -2), S = tgc_sym_size(k, -2);
        tgc_symint l1[2] = {L, tgc_symint_const(1)}, s1[2] = {tgc_symint_const(1), S};
        tgc_tensor *i = tgc_reshape_sym(tgc_arange_sym(0, L, 1, TGC_I64, tgc_device_of(q)), l1, 2);
        tgc_tensor *j = tgc_reshape_sym(tgc_arange_sym(0, S, 1, TGC_I64, tgc_device_of(q)), s1, 2);
        s = tgc_where(tgc_gt(j, i), ninf, s);
    }
    if (mask)
        s = tgc_dtype_of(mask) == TGC_BOOL ? tgc_where(mask, s, ninf)
                                           : tgc_add(s, tgc_gr_cast(mask, dt));
    const int last = -1;
    tgc_tensor *all_masked = tgc_eq(tgc_max(s, &last, 1, 1), ninf);
    /* a row with every position masked attends to nothing: zeros, not NaN */
    return tgc_where(all_masked, tgc_gr_scalar(0.0, dt, q), tgc_softmax(s, -1));
}

tgc_status tgc_grad_rule_sdpa(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    tgc_tensor *mask = c->a->sdpa.has_mask ? c->in[3] : NULL;
    const double p = c->a->sdpa.dropout_p, scale = c->a->sdpa.scale;
    if (p > 0)
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "tgc_scaled_dot_product_attention: recorded with dropout_p %g as "
                             "one node; its gradient needs the dropout bits (record it through "
                             "tgc_scaled_dot_product_attention, which then composes it of ops)",
                             p);
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(q));
    tgc_tensor *P, *g, *vu, *dP, *dS;
    GR_SET(P, tgc_gr_sdpa_weights(q, k, mask, (int)c->a->sdpa.causal, scale));
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(vu, tgc_gr_cast(v, dt));
    if (c->needs[2])
        GR_SET(gin[2], tgc_grad_sum_to(tgc_matmul(tgc_gr_mT(P), g), v));
    if (!c->needs[0] && !c->needs[1] && !(mask && c->needs[3]))
        return TGC_OK;
    const int last = -1;
    GR_SET(dP, tgc_matmul(g, tgc_gr_mT(vu)));
    GR_SET(dS, tgc_mul(P, tgc_sub(dP, tgc_sum(tgc_mul(dP, P), &last, 1, 1))));
    if (c->needs[0])
        GR_SET(gin[0],
               tgc_grad_sum_to(tgc_mul_scalar(tgc_matmul(dS, tgc_gr_cast(k, dt)), scale), q));
    if (c->needs[1])
        GR_SET(gin[1],
               tgc_grad_sum_to(tgc_mul_scalar(tgc_matmul(tgc_gr_mT(dS), tgc_gr_cast(q, dt)), scale),
                               k));
    if (mask && c->needs[3] && tgc_dtype_of(mask) != TGC_BOOL)
        GR_SET(gin[3], tgc_grad_sum_to(dS, mask));
    return TGC_OK;
}
