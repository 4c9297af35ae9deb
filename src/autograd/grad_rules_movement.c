/* Backward rules of the views, the copying movement ops and the indexing ops.
 *
 * Views give the gradient back in the input's geometry (reshape_as, the inverse permute,
 * sum over expanded dims). slice pads its gradient back to the input's size (a step > 1
 * interleaves zeros first); cat and stack slice theirs; pad pads with the negated pads
 * (a crop). Indexing ops scatter-add through their *_GRAD ops (frontend/ops_grad.h).
 *
 * Symbolic sizes stay symbolic: a slice along a symbolic dim pads back with zeros of
 * symbolic sizes (cat), and a cat along a dim with symbolic sizes on both sides of an input
 * picks that input's part with an index_select at a symbolic offset (slice bounds are
 * numbers). */
#include <string.h>

#include "autograd/grad_rules_impl.h"
#include "frontend/ops_grad.h"
#include "support/error.h"

/* ---- views ---- */

static tgc_tensor *slice_grad_static(tgc_tensor *gy, int dim, int64_t n, int64_t start,
                                     int64_t step)
{
    const int nd = tgc_ndim(gy);
    int64_t m;
    if (!tgc_gr_const_dim(gy, dim, &m))
        return NULL; /* not reached: a slice of a static dim has a static length */
    int64_t lo = start < 0 ? start + n : start;
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    tgc_tensor *t = gy;
    int64_t span = m;
    if (step > 1) { /* [.., m, ..] -> [.., m, step, ..] (zeros after each) -> [.., m*step, ..] */
        int64_t ip[2 * TGC_MAX_DIMS] = {0};
        ip[2 * (nd - 1 - dim) + 1] = step - 1;
        t = tgc_flatten(tgc_pad(tgc_unsqueeze(gy, dim + 1), ip, nd - dim, 0.0), dim, dim + 1);
        span = m * step;
    }
    int64_t pads[2 * TGC_MAX_DIMS] = {0};
    pads[2 * (nd - 1 - dim)] = lo;
    pads[2 * (nd - 1 - dim) + 1] = n - lo - span; /* may be negative: crops the last zeros */
    return tgc_pad(t, pads, nd - dim, 0.0);
}

static int symint_is_zero(tgc_symint s)
{
    return !s.trace_ && !s.invalid_ && s.expr_ == 0;
}

/* Zeros shaped like g but with `len` along dim. */
static tgc_tensor *zeros_along(tgc_tensor *g, int dim, tgc_symint len)
{
    tgc_symint s[TGC_MAX_DIMS];
    const int nd = tgc_ndim(g);
    for (int d = 0; d < nd; d++)
        s[d] = d == dim ? len : tgc_sym_size(g, d);
    return tgc_expand_sym(tgc_gr_scalar(0.0, tgc_dtype_of(g), g), s, nd);
}

/* A slice along a symbolic dim: [zeros(lo), gy interleaved, zeros(rest)] joined by cat,
 * with lo and rest as symbolic sizes (the clamping decisions are the ones shape inference
 * guarded when it sized the slice). */
static tgc_tensor *slice_grad_sym(tgc_tensor *x, tgc_tensor *gy, int dim, int64_t start,
                                  int64_t step)
{
    const int nd = tgc_ndim(gy);
    tgc_symint n = tgc_sym_size(x, dim), m = tgc_sym_size(gy, dim);
    const int64_t n_hint = x->shape[dim];
    tgc_symint lo = start >= 0            ? tgc_symint_const(start)
                    : n_hint + start >= 0 ? tgc_symint_add(n, tgc_symint_const(start))
                                          : tgc_symint_const(0);
    tgc_tensor *t = gy;
    if (step > 1) {
        int64_t ip[2 * TGC_MAX_DIMS] = {0};
        ip[2 * (nd - 1 - dim) + 1] = step - 1;
        t = tgc_flatten(tgc_pad(tgc_unsqueeze(gy, dim + 1), ip, nd - dim, 0.0), dim, dim + 1);
        t = tgc_slice(t, dim, 0, -(step - 1), 1); /* (m - 1) * step + 1 */
    }
    /* the elements from the last one picked to the end */
    tgc_symint used = tgc_symint_add(
        tgc_symint_mul(tgc_symint_sub(m, tgc_symint_const(1)), tgc_symint_const(step)),
        tgc_symint_const(1));
    tgc_symint rest = tgc_symint_sub(tgc_symint_sub(n, lo), used);
    tgc_tensor *parts[3];
    int k = 0;
    if (!symint_is_zero(lo))
        parts[k++] = zeros_along(gy, dim, lo);
    parts[k++] = t;
    if (!symint_is_zero(rest))
        parts[k++] = zeros_along(gy, dim, rest);
    return k == 1 ? t : tgc_cat(parts, k, dim);
}

tgc_status tgc_grad_rule_view(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *r = NULL;
    if (!c->needs[0])
        return TGC_OK;
    const int nd = tgc_ndim(x);
    switch (c->op) {
    case TGC_OP_RESHAPE:
    case TGC_OP_SQUEEZE:
    case TGC_OP_UNSQUEEZE:
    case TGC_OP_FLATTEN:
    case TGC_OP_CONTIGUOUS: r = tgc_reshape_as(gy, x); break;
    case TGC_OP_PERMUTE: {
        int inv[TGC_MAX_DIMS];
        for (int k = 0; k < nd; k++)
            inv[c->a->perm.perm[k]] = k;
        r = tgc_permute(gy, inv, nd);
        break;
    }
    case TGC_OP_EXPAND: r = tgc_grad_sum_to(gy, x); break;
    case TGC_OP_SLICE: {
        const int dim = (int)c->a->slice.dim;
        const int64_t start = c->a->slice.start, step = c->a->slice.step;
        int64_t n, m;
        if (tgc_gr_const_dim(gy, dim, &m) && m == 0)
            return TGC_OK; /* nothing was picked: a zero gradient */
        r = tgc_gr_const_dim(x, dim, &n) ? slice_grad_static(gy, dim, n, start, step)
                                         : slice_grad_sym(x, gy, dim, start, step);
        break;
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_view: %s is not a view op",
                             tgc_op_name(c->op));
    }
    GR_SET(gin[0], tgc_gr_cast(r, tgc_dtype_of(x)));
    return TGC_OK;
}

/* ---- movement ---- */

/* A 0-d i64 tensor holding v (symbolic: a sum over a stride-0 view of v ones). */
static tgc_tensor *symint_tensor(tgc_symint v, const tgc_tensor *like)
{
    if (!v.trace_ && !v.invalid_)
        return tgc_gr_scalar((double)v.expr_, TGC_I64, like);
    tgc_tensor *ones = tgc_expand_sym(tgc_gr_scalar(1.0, TGC_F64, like), &v, 1);
    return tgc_cast(tgc_sum(ones, NULL, 0, 0), TGC_I64);
}

/* The part of a cat's gradient that belongs to input k. A slice when its bounds are numbers:
 * from the start when the sizes before it are constants, else from the end when the sizes
 * after it are. Otherwise (symbolic sizes on both sides) an index_select of positions
 * offset + [0, size), with the offset a symbolic value: nothing is specialized. */
static tgc_tensor *cat_part(const tgc_grad_ctx *c, tgc_tensor *gy, int k, int dim)
{
    int64_t v, before = 0, after = 0, own = 0;
    int before_ok = 1, after_ok = 1, own_ok = tgc_gr_const_dim(c->in[k], dim, &own);
    for (int j = 0; j < k; j++)
        before_ok = before_ok && tgc_gr_const_dim(c->in[j], dim, &v) && ((before += v), 1);
    for (int j = k + 1; j < c->n_in; j++)
        after_ok = after_ok && tgc_gr_const_dim(c->in[j], dim, &v) && ((after += v), 1);
    if (before_ok && (own_ok || after_ok))
        return tgc_slice(gy, dim, before, own_ok ? before + own : after ? -after : INT64_MAX, 1);
    if (after_ok && own_ok)
        return tgc_slice(gy, dim, -(after + own), after ? -after : INT64_MAX, 1);
    tgc_symint off = tgc_symint_const(0);
    for (int j = 0; j < k; j++)
        off = tgc_symint_add(off, tgc_sym_size(c->in[j], dim));
    tgc_tensor *pos = tgc_arange_sym(0, tgc_sym_size(c->in[k], dim), 1, TGC_I64, tgc_device_of(gy));
    return tgc_index_select(gy, dim, tgc_add(pos, symint_tensor(off, gy)));
}

tgc_status tgc_grad_rule_move(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    const int dim = c->op == TGC_OP_PAD || c->op == TGC_OP_FLIP ? 0 : (int)c->a->dim.dim;
    switch (c->op) {
    case TGC_OP_CAT:
        for (int k = 0; k < c->n_in; k++) {
            if (!c->needs[k])
                continue;
            GR_SET(gin[k], tgc_gr_cast(cat_part(c, gy, k, dim), tgc_dtype_of(c->in[k])));
        }
        return TGC_OK;
    case TGC_OP_STACK:
        for (int k = 0; k < c->n_in; k++)
            if (c->needs[k])
                GR_SET(gin[k], tgc_gr_cast(tgc_squeeze(tgc_slice(gy, dim, k, k + 1, 1), dim),
                                           tgc_dtype_of(c->in[k])));
        return TGC_OK;
    case TGC_OP_PAD: {
        if (!c->needs[0])
            return TGC_OK;
        const int np = (int)c->a->pad.n_pairs;
        int64_t pads[2 * TGC_MAX_DIMS];
        for (int k = 0; k < 2 * np; k++)
            pads[k] = -c->a->pad.pads[k];
        GR_SET(gin[0], tgc_pad(gy, pads, np, 0.0));
        return TGC_OK;
    }
    case TGC_OP_FLIP: { /* its own inverse */
        if (!c->needs[0])
            return TGC_OK;
        int dims[TGC_MAX_DIMS], n = 0;
        for (int d = 0; d < TGC_MAX_DIMS; d++)
            if ((c->a->flip.mask >> d) & 1)
                dims[n++] = d;
        GR_SET(gin[0], tgc_flip(gy, dims, n));
        return TGC_OK;
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_move: %s is not a movement op",
                             tgc_op_name(c->op));
    }
}

/* ---- indexing: the index operand never gets a gradient ---- */

tgc_status tgc_grad_rule_index(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *t = c->in[0], *idx = c->in[1], *g;
    if (!c->needs[0])
        return TGC_OK;
    GR_SET(g, tgc_gr_cast(gy, tgc_dtype_of(t)));
    switch (c->op) {
    case TGC_OP_EMBEDDING: GR_SET(gin[0], tgc_embedding_grad(g, idx, t)); break;
    case TGC_OP_GATHER: GR_SET(gin[0], tgc_gather_grad(g, idx, (int)c->a->dim.dim, t)); break;
    case TGC_OP_INDEX_SELECT:
        GR_SET(gin[0], tgc_index_select_grad(g, idx, (int)c->a->dim.dim, t));
        break;
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_index: %s is not an indexing op",
                             tgc_op_name(c->op));
    }
    return TGC_OK;
}
