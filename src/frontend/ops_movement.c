/* Public entry points of the views, copying movement and indexing ops. They check the
 * non-tensor arguments, normalize dims against the input's rank and build the attributes
 * of ops.def; shape inference checks the rest. A NULL input tensor goes straight to
 * tgc_apply, which keeps the first error. */
#include <string.h>

#include "frontend/apply.h"
#include "support/error.h"
#include "tgc/ops.h"

/* tgc_apply with no attributes: for ops that have none, and to pass a NULL input on. */
static tgc_tensor *apply_plain(tgc_op op, tgc_tensor *const *in, int n)
{
    tgc_attrs none = tgc_attrs_none();
    return tgc_apply(op, in, n, &none);
}

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

/* A shape argument: ndim in [0, TGC_MAX_DIMS], not NULL unless empty; copied into
 * at->shape.dims. */
static int shape_arg(const char *fn, const int64_t *shape, int ndim, tgc_attrs *at)
{
    if (ndim < 0 || ndim > TGC_MAX_DIMS || (ndim > 0 && !shape)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: shape must have 0 to %d dims, got ndim = %d%s", fn,
                      TGC_MAX_DIMS, ndim, ndim > 0 && !shape ? " with shape NULL" : "");
        return 0;
    }
    if (ndim > 0)
        memcpy(at->shape.dims, shape, sizeof(int64_t) * (size_t)ndim);
    at->ni = ndim;
    return 1;
}

static tgc_tensor *view_with_shape(tgc_op op, const char *fn, tgc_tensor *t, const int64_t *shape,
                                   int ndim)
{
    tgc_attrs at = tgc_attrs_none();
    if (t && !shape_arg(fn, shape, ndim, &at))
        return NULL;
    return tgc_apply(op, &t, 1, &at);
}

/* An op on t whose attribute (layout dim) is a dim normalized against t's rank + extra. */
static tgc_tensor *with_dim(tgc_op op, const char *fn, tgc_tensor *const *in, int n, int dim,
                            int extra)
{
    if (!in[0])
        return apply_plain(op, in, n);
    int d = norm_dim(fn, dim, tgc_ndim(in[0]) + extra);
    if (d < 0)
        return NULL;
    tgc_attrs at = tgc_attrs_of(op);
    at.dim.dim = d;
    return tgc_apply(op, in, n, &at);
}

/* ---- views ---- */

tgc_tensor *tgc_reshape(tgc_tensor *t, const int64_t *shape, int ndim)
{
    return view_with_shape(TGC_OP_RESHAPE, "tgc_reshape", t, shape, ndim);
}

tgc_tensor *tgc_expand(tgc_tensor *t, const int64_t *shape, int ndim)
{
    return view_with_shape(TGC_OP_EXPAND, "tgc_expand", t, shape, ndim);
}

tgc_tensor *tgc_permute(tgc_tensor *t, const int *perm, int ndim)
{
    if (!t)
        return apply_plain(TGC_OP_PERMUTE, &t, 1);
    int nd = tgc_ndim(t);
    if (ndim != nd || (ndim > 0 && !perm)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_permute: perm must list %d dims, got %d%s", nd,
                      ndim, ndim > 0 && !perm ? " with perm NULL" : "");
        return NULL;
    }
    tgc_attrs at = tgc_attrs_none();
    for (int k = 0; k < nd; k++) {
        int d = norm_dim("tgc_permute", perm[k], nd);
        if (d < 0)
            return NULL;
        at.perm.perm[k] = d;
    }
    at.ni = nd;
    return tgc_apply(TGC_OP_PERMUTE, &t, 1, &at);
}

tgc_tensor *tgc_transpose(tgc_tensor *t, int d0, int d1)
{
    if (!t) { /* named here: tgc_apply would report the permute it forwards to */
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_transpose: input 0 is NULL");
        return NULL;
    }
    int nd = tgc_ndim(t), a = norm_dim("tgc_transpose", d0, nd), b;
    if (a < 0 || (b = norm_dim("tgc_transpose", d1, nd)) < 0)
        return NULL;
    tgc_attrs at = tgc_attrs_none();
    for (int k = 0; k < nd; k++)
        at.perm.perm[k] = k == a ? b : k == b ? a : k;
    at.ni = nd;
    return tgc_apply(TGC_OP_PERMUTE, &t, 1, &at);
}

tgc_tensor *tgc_squeeze(tgc_tensor *t, int dim)
{
    if (dim != TGC_ALL_DIMS)
        return with_dim(TGC_OP_SQUEEZE, "tgc_squeeze", &t, 1, dim, 0);
    tgc_attrs at = tgc_attrs_of(TGC_OP_SQUEEZE);
    at.dim.dim = TGC_ALL_DIMS;
    return tgc_apply(TGC_OP_SQUEEZE, &t, 1, &at);
}

tgc_tensor *tgc_unsqueeze(tgc_tensor *t, int dim)
{
    return with_dim(TGC_OP_UNSQUEEZE, "tgc_unsqueeze", &t, 1, dim, 1);
}

tgc_tensor *tgc_slice(tgc_tensor *t, int dim, int64_t start, int64_t end, int64_t step)
{
    if (!t)
        return apply_plain(TGC_OP_SLICE, &t, 1);
    int d = norm_dim("tgc_slice", dim, tgc_ndim(t));
    if (d < 0)
        return NULL;
    tgc_attrs at = tgc_attrs_of(TGC_OP_SLICE);
    at.slice.dim = d;
    at.slice.start = start;
    at.slice.end = end;
    at.slice.step = step;
    return tgc_apply(TGC_OP_SLICE, &t, 1, &at);
}

tgc_tensor *tgc_flatten(tgc_tensor *t, int start_dim, int end_dim)
{
    if (!t)
        return apply_plain(TGC_OP_FLATTEN, &t, 1);
    int nd = tgc_ndim(t), lo = norm_dim("tgc_flatten", start_dim, nd), hi;
    if (lo < 0 || (hi = norm_dim("tgc_flatten", end_dim, nd)) < 0)
        return NULL;
    tgc_attrs at = tgc_attrs_of(TGC_OP_FLATTEN);
    at.flatten.start = lo;
    at.flatten.end = hi;
    return tgc_apply(TGC_OP_FLATTEN, &t, 1, &at);
}

tgc_tensor *tgc_contiguous(tgc_tensor *t)
{
    return apply_plain(TGC_OP_CONTIGUOUS, &t, 1);
}

/* ---- movement ---- */

static tgc_tensor *join(tgc_op op, const char *fn, tgc_tensor *const *ts, int n, int dim)
{
    if (!ts || n < 1) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: needs at least one tensor, got n = %d%s", fn, n,
                      ts ? "" : " with ts NULL");
        return NULL;
    }
    return with_dim(op, fn, ts, n, dim, op == TGC_OP_STACK);
}

tgc_tensor *tgc_cat(tgc_tensor *const *ts, int n, int dim)
{
    return join(TGC_OP_CAT, "tgc_cat", ts, n, dim);
}

tgc_tensor *tgc_stack(tgc_tensor *const *ts, int n, int dim)
{
    return join(TGC_OP_STACK, "tgc_stack", ts, n, dim);
}

tgc_tensor *tgc_pad(tgc_tensor *t, const int64_t *pads, int n_pairs, double value)
{
    if (!t)
        return apply_plain(TGC_OP_PAD, &t, 1);
    int nd = tgc_ndim(t);
    if (n_pairs < 0 || n_pairs > nd || (n_pairs > 0 && !pads)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_pad: n_pairs must be in [0, %d], got %d%s", nd,
                      n_pairs, n_pairs > 0 && !pads ? " with pads NULL" : "");
        return NULL;
    }
    tgc_attrs at = tgc_attrs_of(TGC_OP_PAD);
    at.pad.n_pairs = n_pairs;
    if (n_pairs > 0)
        memcpy(at.pad.pads, pads, sizeof(int64_t) * 2 * (size_t)n_pairs);
    at.ni = 1 + 2 * n_pairs;
    at.pad.value = value;
    return tgc_apply(TGC_OP_PAD, &t, 1, &at);
}

tgc_tensor *tgc_flip(tgc_tensor *t, const int *dims, int n)
{
    if (!t)
        return apply_plain(TGC_OP_FLIP, &t, 1);
    const int nd = tgc_ndim(t);
    if (n < 0 || (n > 0 && !dims)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_flip: %d dims%s", n,
                      n > 0 && !dims ? " with dims NULL" : "");
        return NULL;
    }
    int64_t mask = 0;
    for (int k = 0; k < n; k++) {
        const int d = dims[k] < 0 ? dims[k] + nd : dims[k];
        if (d < 0 || d >= nd || ((mask >> d) & 1)) {
            tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_flip: dim %d %s for a %d-d tensor", dims[k],
                          d < 0 || d >= nd ? "is out of range" : "is named twice", nd);
            return NULL;
        }
        mask |= (int64_t)1 << d;
    }
    tgc_attrs at = tgc_attrs_of(TGC_OP_FLIP);
    at.flip.mask = mask;
    return tgc_apply(TGC_OP_FLIP, &t, 1, &at);
}

/* ---- indexing ---- */

tgc_tensor *tgc_embedding(tgc_tensor *weight, tgc_tensor *idx)
{
    tgc_tensor *in[2] = {weight, idx};
    return apply_plain(TGC_OP_EMBEDDING, in, 2);
}

tgc_tensor *tgc_gather(tgc_tensor *t, int dim, tgc_tensor *idx)
{
    tgc_tensor *in[2] = {t, idx};
    return with_dim(TGC_OP_GATHER, "tgc_gather", in, 2, dim, 0);
}

tgc_tensor *tgc_index_select(tgc_tensor *t, int dim, tgc_tensor *idx)
{
    tgc_tensor *in[2] = {t, idx};
    return with_dim(TGC_OP_INDEX_SELECT, "tgc_index_select", in, 2, dim, 0);
}
