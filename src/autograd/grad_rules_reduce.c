/* Backward rules of the reductions (logsumexp's: exp(x - logsumexp(x)), recomputed from x)
 * and of softmax / log_softmax.
 *
 * max over dims is PyTorch's amax: the gradient of a reduced position is split evenly
 * among the elements equal to the maximum (torch.amax's backward; max(dim) with indices,
 * which gives it all to one index, is not an op here). mean and var divide by the reduced
 * element count, which stays symbolic for dynamic dims (tgc_gr_count). */
#include "autograd/grad_rules_impl.h"
#include "support/error.h"

tgc_status tgc_grad_rule_reduce(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *g, *xu, *r = NULL;
    if (!c->needs[0])
        return TGC_OK;
    const int64_t mask = c->a->reduce.mask;
    const int keep = (int)c->a->reduce.keepdim, nd = tgc_ndim(x);
    const tgc_dtype xdt = tgc_dtype_of(x), dt = tgc_gr_compute_dtype(xdt);
    GR_SET(g, tgc_gr_unreduce(tgc_gr_cast(gy, dt), mask, nd, keep));
    switch (c->op) {
    case TGC_OP_SUM: r = tgc_expand_as(g, x); break;
    case TGC_OP_MEAN: r = tgc_expand_as(tgc_gr_div_count(g, x, mask, 0.0), x); break;
    case TGC_OP_MAX: {
        tgc_tensor *is_max, *ties, *share;
        GR_SET(is_max, tgc_eq(x, tgc_gr_unreduce(c->out, mask, nd, keep)));
        int dims[TGC_MAX_DIMS], n = 0;
        for (int d = 0; d < nd; d++)
            if (mask >> d & 1)
                dims[n++] = d;
        /* the number of ties per reduced position (>= 1 unless the max is NaN) */
        GR_SET(ties, n ? tgc_sum(tgc_cast(is_max, dt), dims, n, 1) : tgc_cast(is_max, dt));
        GR_SET(share, tgc_div(g, ties));
        r = tgc_where(is_max, tgc_expand_as(share, x), tgc_gr_scalar(0.0, dt, x));
        break;
    }
    case TGC_OP_VAR: { /* 2 (x - mean) / (n - correction) */
        int dims[TGC_MAX_DIMS], n = 0;
        for (int d = 0; d < nd; d++)
            if (mask >> d & 1)
                dims[n++] = d;
        GR_SET(xu, tgc_gr_cast(x, dt));
        tgc_tensor *centered = tgc_sub(xu, n ? tgc_mean(xu, dims, n, 1) : xu);
        tgc_tensor *scaled =
            tgc_gr_div_count(tgc_mul_scalar(g, 2.0), x, mask, (double)c->a->reduce.correction);
        r = tgc_mul(centered, scaled);
        break;
    }
    case TGC_OP_LOGSUMEXP: { /* exp(x - logsumexp(x)), recomputed (torch's: NaN where the
                              * result is infinite) */
        int dims[TGC_MAX_DIMS], n = 0;
        for (int d = 0; d < nd; d++)
            if (mask >> d & 1)
                dims[n++] = d;
        GR_SET(xu, tgc_gr_cast(x, dt));
        /* nothing reduced (a 0-d x): logsumexp(x) = x */
        tgc_tensor *lse = n ? tgc_logsumexp(xu, dims, n, 1) : xu;
        r = tgc_mul(g, tgc_exp(tgc_sub(xu, lse)));
        break;
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_reduce: %s is not differentiable",
                             tgc_op_name(c->op));
    }
    GR_SET(gin[0], tgc_gr_cast(r, xdt));
    return TGC_OK;
}

tgc_status tgc_grad_rule_softmax(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *g, *y, *r;
    if (!c->needs[0])
        return TGC_OK;
    const int dim = (int)c->a->dim.dim;
    const tgc_dtype xdt = tgc_dtype_of(x), dt = tgc_gr_compute_dtype(xdt);
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(y, tgc_gr_cast(c->out, dt));
    if (c->op == TGC_OP_SOFTMAX) /* y (g - sum(g y)) */
        r = tgc_mul(y, tgc_sub(g, tgc_sum(tgc_mul(g, y), &dim, 1, 1)));
    else /* g - exp(y) sum(g) */
        r = tgc_sub(g, tgc_mul(tgc_exp(y), tgc_sum(g, &dim, 1, 1)));
    GR_SET(gin[0], tgc_gr_cast(r, xdt));
    return TGC_OK;
}
