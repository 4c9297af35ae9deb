/* Public entry points of the reductions (sum, mean, max, argmax, var, logsumexp) and
 * softmax. */
#include "frontend/apply.h"
#include "support/error.h"
#include "tgc/ops.h"

/* dim of a rank-ndim tensor from the end when negative; a 0-d tensor takes 0 and -1.
 * -1 with an error naming fn when out of range. */
static int norm_dim(const char *fn, int dim, int ndim)
{
    int d = tgc_norm_dim(dim, ndim > 0 ? ndim : 1);
    if (d < 0)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-d tensor", fn, dim,
                      ndim);
    return d;
}

/* The bitmask of dims[0..n) (n = 0: every dim); -1 with an error set on a bad list. */
static int64_t dims_mask(const char *fn, const int *dims, int n, int ndim)
{
    if (n < 0 || n > TGC_MAX_DIMS || (n > 0 && !dims)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: dims must list 0 to %d dims, got n = %d%s", fn,
                      TGC_MAX_DIMS, n, n > 0 && !dims ? " with dims NULL" : "");
        return -1;
    }
    if (n == 0)
        return ((int64_t)1 << ndim) - 1;
    int64_t mask = 0;
    for (int k = 0; k < n; k++) {
        int d = norm_dim(fn, dims[k], ndim);
        if (d < 0)
            return -1;
        if (ndim == 0)
            continue; /* a 0-d tensor reduces to itself */
        if (mask >> d & 1) {
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: dim %d is listed twice", fn, dims[k]);
            return -1;
        }
        mask |= (int64_t)1 << d;
    }
    return mask;
}

static tgc_tensor *reduce(tgc_op op, const char *fn, tgc_tensor *t, const int *dims, int n,
                          int keepdim, int correction)
{
    tgc_attrs at = tgc_attrs_none();
    if (t) {
        int64_t mask = dims_mask(fn, dims, n, tgc_ndim(t));
        if (mask < 0)
            return NULL;
        at = tgc_attrs_of(op);
        at.reduce.mask = mask;
        at.reduce.keepdim = keepdim != 0;
        at.reduce.correction = correction;
        at.ni = op == TGC_OP_VAR ? 3 : 2; /* correction is VAR's only */
    }
    return tgc_apply(op, &t, 1, &at);
}

/* An op whose only attribute is a normalized dim (argmax with keepdim, softmax). */
static tgc_tensor *along_dim(tgc_op op, const char *fn, tgc_tensor *t, int dim, int keepdim)
{
    tgc_attrs at = tgc_attrs_none();
    if (t) {
        int d = norm_dim(fn, dim, tgc_ndim(t));
        if (d < 0)
            return NULL;
        at = tgc_attrs_of(op);
        if (op == TGC_OP_ARGMAX) {
            at.argmax.dim = d;
            at.argmax.keepdim = keepdim != 0;
        } else {
            at.dim.dim = d;
        }
    }
    return tgc_apply(op, &t, 1, &at);
}

tgc_tensor *tgc_sum(tgc_tensor *t, const int *dims, int n, int keepdim)
{
    return reduce(TGC_OP_SUM, "tgc_sum", t, dims, n, keepdim, 0);
}

tgc_tensor *tgc_mean(tgc_tensor *t, const int *dims, int n, int keepdim)
{
    return reduce(TGC_OP_MEAN, "tgc_mean", t, dims, n, keepdim, 0);
}

tgc_tensor *tgc_max(tgc_tensor *t, const int *dims, int n, int keepdim)
{
    return reduce(TGC_OP_MAX, "tgc_max", t, dims, n, keepdim, 0);
}

tgc_tensor *tgc_var(tgc_tensor *t, const int *dims, int n, int correction, int keepdim)
{
    return reduce(TGC_OP_VAR, "tgc_var", t, dims, n, keepdim, correction);
}

tgc_tensor *tgc_logsumexp(tgc_tensor *t, const int *dims, int n, int keepdim)
{
    return reduce(TGC_OP_LOGSUMEXP, "tgc_logsumexp", t, dims, n, keepdim, 0);
}

tgc_tensor *tgc_argmax(tgc_tensor *t, int dim, int keepdim)
{
    return along_dim(TGC_OP_ARGMAX, "tgc_argmax", t, dim, keepdim);
}

tgc_tensor *tgc_softmax(tgc_tensor *t, int dim)
{
    return along_dim(TGC_OP_SOFTMAX, "tgc_softmax", t, dim, 0);
}

tgc_tensor *tgc_log_softmax(tgc_tensor *t, int dim)
{
    return along_dim(TGC_OP_LOG_SOFTMAX, "tgc_log_softmax", t, dim, 0);
}
