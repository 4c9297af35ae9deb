/* Shape inference for views (reshape, permute, expand, squeeze, unsqueeze, slice, flatten,
 * contiguous), copying movement (cat, stack, pad) and indexing (embedding, gather,
 * index_select). */
#include <string.h>

#include "ir/shape_infer_impl.h"
#include "support/checked.h"
#include "tgc/ops.h"

/* ---- reshape ---- */

/* A product split into its constant part and its symbolic factors, so that factors shared
 * by the input and the target cancel exactly ([s0, 3, 4] into [0, -1] gives 12, not
 * (s0*12)//s0). */
typedef struct factors {
    int64_t k;
    tgc_sdim sym[TGC_MAX_DIMS];
    int n, overflow;
} factors;

static void factors_add(factors *f, tgc_sdim d)
{
    if (!TGC_SDIM_IS_CONST(d))
        f->sym[f->n++] = d;
    else if (__builtin_mul_overflow(f->k, d, &f->k))
        f->overflow = 1;
}

static void factors_cancel(factors *a, factors *b)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (tgc_sym_same(a->sym[i], b->sym[j])) {
                a->sym[i--] = a->sym[--a->n];
                b->sym[j] = b->sym[--b->n];
                break;
            }
}

static tgc_sdim factors_value(si_ctx *c, const factors *f)
{
    return tgc_sym_mul(c->syms, si_prod(c, f->sym, f->n), f->k);
}

/* The RESHAPE/EXPAND target as text, symbolic sizes as this call's values. */
static const char *target_text(si_ctx *c, int n)
{
    return si_dims(c, c->a->shape.dims, n < TGC_MAX_DIMS ? n : TGC_MAX_DIMS);
}

static tgc_status reshape_mismatch(si_ctx *c)
{
    const char *target = target_text(c, c->a->ni);
    return si_fail(c, TGC_ERR_SHAPE, "cannot reshape %s (%s elements) into %s",
                   si_shape(c, &c->in[0]), si_dim(c, si_prod(c, c->in[0].shape, c->in[0].ndim)),
                   target);
}

/* v is a symbolic target dim: RESHAPE/EXPAND from tgc_reshape_sym / tgc_expand_sym. */
static int sym_target(const si_ctx *c, int64_t v)
{
    return c->a->nf == 1 && c->a->shape.symbolic == 1.0 && c->syms && !TGC_SDIM_IS_CONST(v);
}

/* Fills r from the target, leaving r[*infer_at] for the caller; collects the product of the
 * known target dims into known. */
static tgc_status reshape_target(si_ctx *c, tgc_sdim *r, int *infer_at, factors *known)
{
    const tgc_vinfo *x = &c->in[0];
    const char *target = target_text(c, c->a->ni);
    *infer_at = -1;
    for (int k = 0; k < c->a->ni; k++) {
        int64_t v = c->a->shape.dims[k];
        if (sym_target(c, v)) {
            r[k] = v;
            factors_add(known, v);
            continue;
        }
        if (v == -1 && *infer_at >= 0)
            return si_fail(c, TGC_ERR_INVALID_ARG,
                           "only one dim may be -1 (positions %d and %d of the target %s for %s)",
                           *infer_at, k, target, si_shape(c, x));
        if (v < -1)
            return si_fail(c, TGC_ERR_INVALID_ARG,
                           "invalid size %lld at position %d of the target %s for %s (sizes "
                           "are >= 0, or -1 to infer one, or 0 to copy the input's)",
                           (long long)v, k, target, si_shape(c, x));
        if (v == 0 && k >= x->ndim)
            return si_fail(c, TGC_ERR_INVALID_ARG,
                           "0 at position %d of the target %s copies a dim that the input %s "
                           "lacks",
                           k, target, si_shape(c, x));
        if (v == -1) {
            *infer_at = k;
            continue;
        }
        r[k] = v == 0 ? x->shape[k] : v;
        factors_add(known, r[k]);
    }
    return TGC_OK;
}

static tgc_status infer_reshape(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int nd = c->a->ni, at;
    if (nd < 0 || nd > TGC_MAX_DIMS)
        return si_fail(c, TGC_ERR_INVALID_ARG, "target has %d dims (at most %d)", nd, TGC_MAX_DIMS);
    tgc_sdim r[TGC_MAX_DIMS];
    factors have = {.k = 1}, known = {.k = 1};
    tgc_status s = reshape_target(c, r, &at, &known);
    if (s)
        return s;
    for (int k = 0; k < x->ndim; k++)
        factors_add(&have, x->shape[k]);
    if (have.overflow || known.overflow)
        return reshape_mismatch(c);
    factors_cancel(&have, &known);
    tgc_sdim num = factors_value(c, &have), den = factors_value(c, &known);
    if (at >= 0) {
        if (si_hint(c, den) == 0)
            return reshape_mismatch(c); /* -1 is ambiguous with 0 elements */
        if (known.n == 0 && have.k % known.k == 0)
            r[at] = tgc_sym_mul(c->syms, si_prod(c, have.sym, have.n), have.k / known.k);
        else
            r[at] = tgc_sym_floordiv(c->syms, num, den);
        den = tgc_sym_mul(c->syms, den, r[at]);
    }
    if (!si_eq(c, num, den))
        return reshape_mismatch(c);
    return si_set_out(c, x->dtype, r, nd);
}

/* ---- other views ---- */

static tgc_status infer_permute(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    tgc_sdim r[TGC_MAX_DIMS];
    unsigned seen = 0;
    if (c->a->ni != x->ndim)
        return si_fail(c, TGC_ERR_INVALID_ARG, "perm has %d entries for a %d-d tensor", c->a->ni,
                       x->ndim);
    for (int k = 0; k < x->ndim; k++) {
        int64_t p = c->a->perm.perm[k];
        if (p < 0 || p >= x->ndim || (seen >> p & 1))
            return si_fail(c, TGC_ERR_INVALID_ARG, "perm is not a permutation of 0..%d",
                           x->ndim - 1);
        seen |= 1u << p;
        r[k] = x->shape[p];
    }
    return si_set_out(c, x->dtype, r, x->ndim);
}

static tgc_status infer_expand(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int nd = c->a->ni, lead = nd - x->ndim;
    tgc_sdim r[TGC_MAX_DIMS];
    if (nd < x->ndim || nd > TGC_MAX_DIMS)
        return si_fail(c, TGC_ERR_INVALID_ARG, "cannot expand %s to %d dims", si_shape(c, x), nd);
    const char *target = target_text(c, nd);
    for (int k = 0; k < nd; k++) {
        int64_t v = c->a->shape.dims[k];
        tgc_sdim d = k < lead ? 1 : x->shape[k - lead];
        int sym = sym_target(c, v);
        if (!sym && (v < -1 || (v == -1 && k < lead)))
            return si_fail(c, TGC_ERR_INVALID_ARG,
                           "invalid size %lld at position %d of the target %s for %s (%s)",
                           (long long)v, k, target, si_shape(c, x),
                           v == -1 ? "-1 keeps a size, and a new leading dim has none"
                                   : "sizes are >= 0, or -1 to keep the input's");
        if (v == -1)
            r[k] = d;
        else if (d == 1 || si_eq(c, d, v))
            r[k] = v;
        else
            return si_fail(c, TGC_ERR_SHAPE,
                           "cannot expand dim %d of %s (size %s) to %s (target %s): only "
                           "sizes of 1 expand",
                           k - lead, si_shape(c, x), si_dim(c, d), si_dim(c, v), target);
    }
    return si_set_out(c, x->dtype, r, nd);
}

/* Whether squeeze drops a dim of size d. A symbolic size is not 1 at trace time (results
 * are 1-specialized, si_set_out); the kept dim is guarded to stay as it is (>= 2, or 0):
 * where it becomes 1, eager would drop it. */
static int size_is_one(si_ctx *c, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d) || !c->syms)
        return d == 1;
    if (si_hint(c, d) >= 2)
        si_ge(c, d, 2);
    else
        si_eq(c, d, 0);
    return 0;
}

static tgc_status infer_squeeze(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t dim = c->a->dim.dim;
    tgc_sdim r[TGC_MAX_DIMS];
    int nr = 0;
    if (dim != TGC_ALL_DIMS) {
        tgc_status s = si_need_dim(c, dim, x->ndim);
        if (s)
            return s;
    }
    for (int k = 0; k < x->ndim; k++)
        if ((dim != TGC_ALL_DIMS && dim != k) || !size_is_one(c, x->shape[k]))
            r[nr++] = x->shape[k];
    return si_set_out(c, x->dtype, r, nr);
}

static tgc_status infer_unsqueeze(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t dim = c->a->dim.dim;
    tgc_sdim r[TGC_MAX_DIMS + 1];
    if (dim < 0 || dim > x->ndim)
        return si_fail(c, TGC_ERR_INVALID_ARG, "dim %lld is out of range for a %d-d result",
                       (long long)dim, x->ndim + 1);
    memcpy(r, x->shape, sizeof(tgc_sdim) * (size_t)dim);
    r[dim] = 1;
    memcpy(r + dim + 1, x->shape + dim, sizeof(tgc_sdim) * (size_t)(x->ndim - dim));
    return si_set_out(c, x->dtype, r, x->ndim + 1);
}

/* Python's clamping of a slice bound v against a constant length n >= 0. */
static int64_t clamp_bound(int64_t v, int64_t n)
{
    if (v < 0)
        v = v < -n ? 0 : v + n;
    return v > n ? n : v;
}

/* A slice bound on a symbolic dim, python rules: v counts from the start (v >= 0) or from
 * the end (v < 0) and clamps to [0, len]. Which case applies is decided at trace time and
 * recorded as a guard (none where lower bounds prove it: len >= 2, so -1, -2, 1 and 2 need
 * none), so the result stays symbolic. No size exceeds TGC_MAX_NUMEL, so bounds beyond it
 * clamp without a guard. */
static tgc_sdim symbolic_bound(si_ctx *c, tgc_sdim len, int64_t v)
{
    tgc_symtab *t = c->syms;
    if (v >= TGC_MAX_NUMEL)
        return len;
    if (v == 0 || v <= -TGC_MAX_NUMEL)
        return 0;
    if (v > 0) {
        if (si_hint(c, len) >= v) { /* v inside the dim */
            si_ge(c, tgc_sym_sub(t, len, v), 0);
            return v;
        }
        si_ge(c, tgc_sym_sub(t, v, len), 0); /* clamps to len while len <= v */
        return len;
    }
    tgc_sdim pos = tgc_sym_add(t, len, v);
    if (si_hint(c, pos) >= 0) {
        si_ge(c, pos, 0);
        return pos;
    }
    si_ge(c, tgc_sym_sub(t, 0, pos), 0); /* clamps to 0 while len <= -v */
    return 0;
}

/* Length of the slice start:end:step (step >= 1) of a dim of size len, python rules. On a
 * symbolic dim it stays symbolic: each bound's clamping, and whether the slice is empty,
 * are guarded decisions. */
static tgc_sdim slice_len(si_ctx *c, tgc_sdim len, int64_t start, int64_t end, int64_t step)
{
    if (!TGC_SDIM_IS_CONST(len)) {
        tgc_sdim lo = symbolic_bound(c, len, start), hi = symbolic_bound(c, len, end);
        tgc_sdim count = tgc_sym_sub(c->syms, hi, lo);
        if (si_hint(c, count) >= 1 && si_ge(c, count, 1))
            /* count <= len <= TGC_MAX_NUMEL: a larger step takes one element */
            return step >= TGC_MAX_NUMEL ? 1 : tgc_sym_ceildiv(c->syms, count, step);
        si_ge(c, tgc_sym_sub(c->syms, 0, count), 0);
        return 0;
    }
    start = clamp_bound(start, len);
    end = clamp_bound(end, len);
    return end > start ? (end - start - 1) / step + 1 : 0;
}

static tgc_status infer_slice(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    const tgc_slice_attrs *a = &c->a->slice;
    tgc_sdim r[TGC_MAX_DIMS];
    if (x->ndim == 0)
        return si_fail(c, TGC_ERR_SHAPE, "cannot slice a 0-d tensor");
    tgc_status s = si_need_dim(c, a->dim, x->ndim);
    if (s)
        return s;
    if (a->step < 1)
        return si_fail(c, TGC_ERR_INVALID_ARG, "step must be positive, got %lld",
                       (long long)a->step);
    memcpy(r, x->shape, sizeof r);
    r[a->dim] = slice_len(c, x->shape[a->dim], a->start, a->end, a->step);
    return si_set_out(c, x->dtype, r, x->ndim);
}

static tgc_status infer_flatten(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t lo = c->a->flatten.start, hi = c->a->flatten.end;
    tgc_sdim r[TGC_MAX_DIMS] = {1};
    if (x->ndim == 0 && lo == 0 && hi == 0)
        return si_set_out(c, x->dtype, r, 1);
    if (lo < 0 || hi >= x->ndim || lo > hi)
        return si_fail(c, TGC_ERR_INVALID_ARG, "cannot flatten dims %lld..%lld of %s",
                       (long long)lo, (long long)hi, si_shape(c, x));
    int nr = 0;
    for (int k = 0; k < lo; k++)
        r[nr++] = x->shape[k];
    r[nr++] = si_prod(c, x->shape + lo, (int)(hi - lo + 1));
    for (int k = (int)hi + 1; k < x->ndim; k++)
        r[nr++] = x->shape[k];
    return si_set_out(c, x->dtype, r, nr);
}

tgc_status si_rule_VIEW(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    switch (c->op) {
    case TGC_OP_RESHAPE: return infer_reshape(c);
    case TGC_OP_PERMUTE: return infer_permute(c);
    case TGC_OP_EXPAND: return infer_expand(c);
    case TGC_OP_SQUEEZE: return infer_squeeze(c);
    case TGC_OP_UNSQUEEZE: return infer_unsqueeze(c);
    case TGC_OP_SLICE: return infer_slice(c);
    case TGC_OP_FLATTEN: return infer_flatten(c);
    case TGC_OP_CONTIGUOUS: return si_set_out(c, x->dtype, x->shape, x->ndim);
    default: return si_fail(c, TGC_ERR_INTERNAL, "not a view op");
    }
}

/* ---- movement ---- */

/* in[k] must have in[0]'s shape, except along dim `skip` (-1: none). */
static tgc_status same_shape(si_ctx *c, int k, int skip)
{
    const tgc_vinfo *x = &c->in[0], *y = &c->in[k];
    int ok = x->ndim == y->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == skip || si_eq(c, x->shape[d], y->shape[d]);
    if (ok)
        return TGC_OK;
    return si_fail(c, TGC_ERR_SHAPE, "input %d is %s but input 0 is %s%s", k, si_shape(c, y),
                   si_shape(c, x), skip >= 0 ? " (only the cat dim may differ)" : "");
}

static tgc_status infer_cat(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t dim = c->a->dim.dim;
    if (x->ndim == 0)
        return si_fail(c, TGC_ERR_SHAPE, "cannot concatenate 0-d tensors");
    tgc_status s = si_need_dim(c, dim, x->ndim);
    tgc_sdim r[TGC_MAX_DIMS];
    tgc_dtype dt = x->dtype;
    memcpy(r, x->shape, sizeof r);
    for (int k = 1; !s && k < c->n_in; k++) {
        s = same_shape(c, k, (int)dim);
        r[dim] = tgc_sym_add(c->syms, r[dim], c->in[k].shape[dim]);
        dt = tgc_promote(dt, c->in[k].dtype);
    }
    if (!s && !TGC_SDIM_IS_VALID(r[dim]))
        return si_fail(c, TGC_ERR_SHAPE, "the sizes of dim %lld of %d tensors overflow int64",
                       (long long)dim, c->n_in);
    return s ? s : si_set_out(c, dt, r, x->ndim);
}

static tgc_status infer_stack(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t dim = c->a->dim.dim;
    tgc_sdim r[TGC_MAX_DIMS + 1];
    tgc_dtype dt = x->dtype;
    if (dim < 0 || dim > x->ndim)
        return si_fail(c, TGC_ERR_INVALID_ARG, "dim %lld is out of range for a %d-d result",
                       (long long)dim, x->ndim + 1);
    for (int k = 1; k < c->n_in; k++) {
        tgc_status s = same_shape(c, k, -1);
        if (s)
            return s;
        dt = tgc_promote(dt, c->in[k].dtype);
    }
    memcpy(r, x->shape, sizeof(tgc_sdim) * (size_t)dim);
    r[dim] = c->n_in;
    memcpy(r + dim + 1, x->shape + dim, sizeof(tgc_sdim) * (size_t)(x->ndim - dim));
    return si_set_out(c, dt, r, x->ndim + 1);
}

static tgc_status infer_pad(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    int64_t np = c->a->pad.n_pairs;
    tgc_sdim r[TGC_MAX_DIMS];
    if (np < 0 || np > x->ndim || c->a->ni != 1 + 2 * np)
        return si_fail(c, TGC_ERR_INVALID_ARG, "%lld pad pairs for %s (at most one per dim)",
                       (long long)np, si_shape(c, x));
    memcpy(r, x->shape, sizeof r);
    for (int k = 0; k < np; k++) {
        int d = x->ndim - 1 - k;
        tgc_sdim before = c->a->pad.pads[2 * k], after = c->a->pad.pads[2 * k + 1];
        if (before < -TGC_MAX_NUMEL || before > TGC_MAX_NUMEL || after < -TGC_MAX_NUMEL ||
            after > TGC_MAX_NUMEL)
            return si_fail(c, TGC_ERR_SHAPE,
                           "pads %lld, %lld on dim %d of %s: a pad must be within "
                           "+-TGC_MAX_NUMEL (2^56)",
                           (long long)before, (long long)after, d, si_shape(c, x));
        r[d] = tgc_sym_add(c->syms, tgc_sym_add(c->syms, r[d], before), after);
        if (!TGC_SDIM_IS_VALID(r[d]))
            return si_fail(c, TGC_ERR_SHAPE, "pads %lld, %lld on dim %d of %s overflow int64",
                           (long long)before, (long long)after, d, si_shape(c, x));
        if (!si_ge(c, r[d], 0))
            return si_fail(c, TGC_ERR_SHAPE, "pads %lld, %lld make dim %d of %s negative",
                           (long long)before, (long long)after, d, si_shape(c, x));
    }
    return si_set_out(c, x->dtype, r, x->ndim);
}

/* FLIP(x): x's shape; mask names dims of x only. */
static tgc_status infer_flip(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    const int64_t mask = c->a->flip.mask;
    if (c->a->ni != 1 || mask < 0 || (x->ndim < 63 && (mask >> x->ndim) != 0))
        return si_fail(c, TGC_ERR_INVALID_ARG, "dim mask 0x%llx names a dim %s does not have",
                       (unsigned long long)mask, si_shape(c, x));
    return si_set_out(c, x->dtype, x->shape, x->ndim);
}

/* ASSIGN(dst, src): src must match dst's shape and dtype (the tracer casts first). */
static tgc_status infer_assign(si_ctx *c)
{
    const tgc_vinfo *dst = &c->in[0];
    tgc_status s = same_shape(c, 1, -1);
    if (s)
        return s;
    if (c->in[1].dtype != dst->dtype)
        return si_fail(c, TGC_ERR_DTYPE, "src is %s but dst is %s", tgc_dtype_name(c->in[1].dtype),
                       tgc_dtype_name(dst->dtype));
    return si_set_out(c, dst->dtype, dst->shape, dst->ndim);
}

tgc_status si_rule_MOVE(si_ctx *c)
{
    switch (c->op) {
    case TGC_OP_ASSIGN: return infer_assign(c);
    case TGC_OP_CAT: return infer_cat(c);
    case TGC_OP_STACK: return infer_stack(c);
    case TGC_OP_PAD: return infer_pad(c);
    case TGC_OP_FLIP: return infer_flip(c);
    default: return si_fail(c, TGC_ERR_INTERNAL, "not a movement op");
    }
}

/* ---- indexing ---- */

static tgc_status infer_embedding(si_ctx *c)
{
    const tgc_vinfo *w = &c->in[0], *idx = &c->in[1];
    tgc_status s = si_need_rank(c, 0, "weight", 2, 2);
    if (!s)
        s = si_need_index(c, 1, "idx");
    if (s)
        return s;
    tgc_sdim r[TGC_MAX_DIMS + 1];
    memcpy(r, idx->shape, sizeof(tgc_sdim) * (size_t)idx->ndim);
    r[idx->ndim] = w->shape[1];
    return si_set_out(c, w->dtype, r, idx->ndim + 1);
}

static tgc_status infer_gather(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *idx = &c->in[1];
    int64_t dim = c->a->dim.dim;
    tgc_status s = si_need_index(c, 1, "idx");
    if (!s)
        s = si_need_dim(c, dim, x->ndim);
    if (s)
        return s;
    int ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == dim || si_ge(c, tgc_sym_sub(c->syms, x->shape[d], idx->shape[d]), 0);
    if (!ok)
        return si_fail(c, TGC_ERR_SHAPE,
                       "idx %s must have t's rank and no larger dims than t %s outside dim "
                       "%lld",
                       si_shape(c, idx), si_shape(c, x), (long long)dim);
    return si_set_out(c, x->dtype, idx->shape, idx->ndim);
}

static tgc_status infer_index_select(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0], *idx = &c->in[1];
    int64_t dim = c->a->dim.dim;
    tgc_status s = si_need_index(c, 1, "idx");
    if (!s)
        s = si_need_rank(c, 1, "idx", 0, 1);
    if (!s)
        s = si_need_rank(c, 0, "t", 1, TGC_MAX_DIMS);
    if (!s)
        s = si_need_dim(c, dim, x->ndim);
    if (s)
        return s;
    tgc_sdim r[TGC_MAX_DIMS];
    memcpy(r, x->shape, sizeof r);
    r[dim] = idx->ndim ? idx->shape[0] : 1;
    return si_set_out(c, x->dtype, r, x->ndim);
}

tgc_status si_rule_INDEX(si_ctx *c)
{
    switch (c->op) {
    case TGC_OP_EMBEDDING: return infer_embedding(c);
    case TGC_OP_GATHER: return infer_gather(c);
    case TGC_OP_INDEX_SELECT: return infer_index_select(c);
    default: return si_fail(c, TGC_ERR_INTERNAL, "not an indexing op");
    }
}
