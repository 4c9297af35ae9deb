/* Shape helpers of the backward rules: reducing a gradient to a broadcast operand's shape,
 * restoring reduced dims, element counts of reduced dims. They read sizes as tgc_sdims (a
 * traced tensor's sshape) and pass them to ops as symints, so nothing is specialized while
 * tracing. */
#include "autograd/grad_rules_impl.h"

#include "support/error.h"
#include "tensor/dtype.h"

tgc_status tgc_gr_fail(const char *rule)
{
    tgc_status s = tgc_last_status();
    if (s != TGC_OK)
        return s;
    return tgc_set_error(TGC_ERR_INTERNAL, "%s: an op returned NULL without an error", rule);
}

tgc_sdim tgc_gr_sdim(const tgc_tensor *t, int d)
{
    return t->trace ? t->sshape[d] : t->shape[d];
}

int tgc_gr_const_dim(const tgc_tensor *t, int d, int64_t *v)
{
    tgc_sdim s = tgc_gr_sdim(t, d);
    if (!TGC_SDIM_IS_CONST(s))
        return 0;
    *v = s;
    return 1;
}

int tgc_grad_dim_is_one(const tgc_tensor *t, int d)
{
    int64_t v;
    return t && d >= 0 && d < t->ndim && tgc_gr_const_dim(t, d, &v) && v == 1;
}

tgc_tensor *tgc_gr_scalar(double v, tgc_dtype dt, const tgc_tensor *like)
{
    return tgc_full(NULL, 0, v, dt, tgc_device_of(like));
}

tgc_tensor *tgc_gr_full_like(double v, tgc_dtype dt, tgc_tensor *like)
{
    tgc_tensor *s = tgc_gr_scalar(v, dt, like);
    return s ? tgc_expand_as(s, like) : NULL;
}

tgc_dtype tgc_gr_compute_dtype(tgc_dtype dt)
{
    return dt == TGC_F16 || dt == TGC_BF16 ? TGC_F32 : dt;
}

tgc_tensor *tgc_gr_cast(tgc_tensor *t, tgc_dtype dt)
{
    if (!t)
        return NULL;
    return tgc_dtype_of(t) == dt ? t : tgc_cast(t, dt);
}

tgc_tensor *tgc_gr_up(tgc_tensor *t, tgc_dtype dt)
{
    return tgc_gr_cast(t, tgc_gr_compute_dtype(dt));
}

tgc_tensor *tgc_grad_sum_to(tgc_tensor *g, const tgc_tensor *like)
{
    if (!g || !like) {
        if (g)
            tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_grad_sum_to: like is NULL");
        return NULL;
    }
    const int ng = tgc_ndim(g), nl = tgc_ndim(like);
    if (ng < nl) {
        tgc_set_error(TGC_ERR_SHAPE,
                      "tgc_grad_sum_to: the gradient has %d dims, fewer than its operand's %d", ng,
                      nl);
        return NULL;
    }
    int dims[TGC_MAX_DIMS], n = 0;
    for (int d = 0; d < ng; d++) {
        int dl = d - (ng - nl);
        if (dl < 0 || (tgc_grad_dim_is_one(like, dl) && !tgc_grad_dim_is_one(g, d)))
            dims[n++] = d;
    }
    tgc_tensor *r = g;
    if (n > 0) {
        r = tgc_sum(g, dims, n, 1);
        if (r)
            r = tgc_reshape_as(r, (tgc_tensor *)like);
    }
    return tgc_gr_cast(r, tgc_dtype_of(like));
}

tgc_tensor *tgc_gr_unreduce(tgc_tensor *g, int64_t mask, int ndim, int keepdim)
{
    if (keepdim || !g)
        return g;
    for (int d = 0; d < ndim && g; d++)
        if (mask >> d & 1)
            g = tgc_unsqueeze(g, d);
    return g;
}

int tgc_gr_count(tgc_tensor *x, int64_t mask, tgc_dtype dt, double *count, tgc_tensor **dyn)
{
    double stat = 1;
    tgc_tensor *n_dyn = NULL;
    for (int d = 0; d < tgc_ndim(x); d++) {
        if (!(mask >> d & 1))
            continue;
        int64_t v;
        if (tgc_gr_const_dim(x, d, &v)) {
            stat *= (double)v;
            continue;
        }
        /* a symbolic size: the sum of a stride-0 view of that many ones */
        tgc_symint s = tgc_sym_size(x, d);
        tgc_tensor *one = tgc_gr_scalar(1.0, TGC_F64, x);
        tgc_tensor *n = tgc_sum(tgc_expand_sym(one, &s, 1), NULL, 0, 0);
        n_dyn = n_dyn ? tgc_mul(n_dyn, n) : n;
        if (!n_dyn)
            return 0;
    }
    *count = stat;
    *dyn = NULL;
    if (n_dyn && !(*dyn = tgc_gr_cast(tgc_mul_scalar(n_dyn, stat), dt)))
        return 0;
    return 1;
}

tgc_tensor *tgc_gr_div_count(tgc_tensor *t, tgc_tensor *x, int64_t mask, double minus)
{
    double stat;
    tgc_tensor *n;
    if (!t || !tgc_gr_count(x, mask, tgc_dtype_of(t), &stat, &n))
        return NULL;
    if (n)
        return tgc_div(t, minus != 0 ? tgc_sub_scalar(n, minus) : n);
    return tgc_div_scalar(t, stat - minus);
}

tgc_tensor *tgc_gr_mT(tgc_tensor *t)
{
    return tgc_transpose(t, -2, -1);
}

tgc_tensor *tgc_gr_rsub(double s, tgc_tensor *t)
{
    return tgc_add_scalar(tgc_neg(t), s);
}
