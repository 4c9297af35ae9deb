/* Interp kernels for views and data movement.
 *
 * Views share their input's storage with the geometry of ir/view_geometry.h; a view op
 * whose geometry does not exist (a reshape of a non-viewable layout) copies.
 *
 * The strided copy: every path that reads a non-contiguous tensor (a view op that must
 * copy, cat, stack, pad, index_select, embedding, tgc_copy_) goes through
 * tgc_copy_strided, which drops size-1 dims, merges dims that are contiguous in both
 * source and destination, and then moves memcpy runs, strided runs, or 32x32 tiles for
 * transposes.
 *
 * Copying ops: cat, stack, pad, embedding, gather, index_select. Out-of-range indices are
 * the only data-dependent errors (TGC_ERR_INVALID_ARG naming the op, the index and its
 * position); shape disagreements that inference should have caught are TGC_ERR_INTERNAL
 * and never turn into out-of-bounds accesses. */
#include "backend/interp/interp.h"
#include "ir/view_geometry.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tgc/ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------ */
/* Small geometry helpers                                                                */
/* ------------------------------------------------------------------------------------ */

static int norm_axis(int64_t d, int nd)
{
    if (d < 0)
        d += nd;
    return d >= 0 && d < nd ? (int)d : -1;
}

/* ------------------------------------------------------------------------------------ */
/* Copying ops                                                                           */
/* ------------------------------------------------------------------------------------ */

static tgc_status shape_mismatch(tgc_op op, const char *what, const tgc_tensor *t,
                                 const tgc_tensor *out)
{
    char b1[96], b2[96];
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: %s %s does not fit output %s", tgc_op_name(op),
                         what, tgc_format_dims(t->shape, t->ndim, b1, sizeof b1),
                         tgc_format_dims(out->shape, out->ndim, b2, sizeof b2));
}

/* Copies src (its own geometry) into out's region at doff with strides dst. */
static void copy_into(tgc_tensor *out, int64_t doff, const int64_t *dst, const tgc_tensor *src,
                      int64_t soff, const int64_t *shape, int nd)
{
    tgc_copy_strided(tgc_host_data(out), out->dtype, doff, dst, tgc_host_data(src), src->dtype,
                     soff, src->strides, shape, nd);
}

static tgc_status view_copy(tgc_op op, const tgc_tensor *in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t st[TGC_MAX_DIMS], off, ost[TGC_MAX_DIMS];
    tgc_row_major_strides(out->shape, out->ndim, ost);
    if (tgc_view_geometry(op, in, a, out->shape, out->ndim, st, &off)) {
        tgc_copy_strided(tgc_host_data(out), out->dtype, out->offset, ost, tgc_host_data(in),
                         in->dtype, off, st, out->shape, out->ndim);
        return TGC_OK;
    }
    if ((op != TGC_OP_RESHAPE && op != TGC_OP_FLATTEN && op != TGC_OP_CONTIGUOUS) ||
        tgc_shape_numel(in->shape, in->ndim) != tgc_shape_numel(out->shape, out->ndim))
        return shape_mismatch(op, "input", in, out);
    char fn[48];
    snprintf(fn, sizeof fn, "tgc_%s", tgc_op_name(op));
    return tgc_copy_reshape(fn, out, in);
}

static tgc_status cat_kernel(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t ost[TGC_MAX_DIMS], total = 0;
    int dim = norm_axis(a->dim.dim, out->ndim);
    if (dim < 0)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_cat: dim %" PRId64 " out of range", a->dim.dim);
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (tgc_shape_numel(t->shape, t->ndim) == 0)
            continue; /* empty pieces add nothing */
        if (t->ndim != out->ndim)
            return shape_mismatch(TGC_OP_CAT, "piece", t, out);
        for (int d = 0; d < out->ndim; d++)
            if (d != dim && t->shape[d] != out->shape[d])
                return shape_mismatch(TGC_OP_CAT, "piece", t, out);
        total += t->shape[dim];
    }
    if (tgc_shape_numel(out->shape, out->ndim) > 0 && total != out->shape[dim])
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_cat: pieces add up to %" PRId64
                             " along dim %d, output has %" PRId64,
                             total, dim, out->shape[dim]);
    tgc_row_major_strides(out->shape, out->ndim, ost);
    int64_t at = 0;
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (tgc_shape_numel(t->shape, t->ndim) == 0)
            continue;
        copy_into(out, out->offset + at * ost[dim], ost, t, t->offset, t->shape, t->ndim);
        at += t->shape[dim];
    }
    return TGC_OK;
}

static tgc_status stack_kernel(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t ost[TGC_MAX_DIMS], pst[TGC_MAX_DIMS];
    int dim = norm_axis(a->dim.dim, out->ndim);
    if (dim < 0 || out->shape[dim] != n_in)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_stack: dim %" PRId64 " does not hold %d pieces",
                             a->dim.dim, n_in);
    tgc_row_major_strides(out->shape, out->ndim, ost);
    for (int d = 0, k = 0; d < out->ndim; d++)
        if (d != dim)
            pst[k++] = ost[d];
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (t->ndim != out->ndim - 1)
            return shape_mismatch(TGC_OP_STACK, "piece", t, out);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != out->shape[d < dim ? d : d + 1])
                return shape_mismatch(TGC_OP_STACK, "piece", t, out);
    }
    for (int k = 0; k < n_in; k++)
        copy_into(out, out->offset + k * ost[dim], pst, in[k], in[k]->offset, in[k]->shape,
                  in[k]->ndim);
    return TGC_OK;
}

/* Writes value into every element of the dense out. */
static void fill_value(tgc_tensor *out, double value)
{
    int64_t n = tgc_shape_numel(out->shape, out->ndim);
    size_t esz = tgc_dtype_size(out->dtype);
    if (n == 0)
        return;
    char *p = (char *)tgc_host_data(out) + out->offset * (int64_t)esz;
    tgc_store(p, out->dtype, 0, value);
    int zero = 1;
    for (size_t b = 0; b < esz; b++)
        zero &= p[b] == 0;
    size_t total = (size_t)n * esz, have = esz;
    if (zero) {
        memset(p, 0, total);
        return;
    }
    while (have < total) {
        size_t c = have < total - have ? have : total - have;
        memcpy(p + have, p, c);
        have += c;
    }
}

static tgc_status pad_kernel(const tgc_tensor *in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t before[TGC_MAX_DIMS] = {0}, after[TGC_MAX_DIMS] = {0};
    int64_t ost[TGC_MAX_DIMS], cnt[TGC_MAX_DIMS];
    int nd = in->ndim;
    int64_t pairs = a->pad.n_pairs;
    if (pairs < 0 || pairs > nd || out->ndim != nd)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_pad: %" PRId64 " pairs for a %d-d input", pairs,
                             nd);
    for (int k = 0; k < pairs; k++) {
        before[nd - 1 - k] = a->pad.pads[2 * k];
        after[nd - 1 - k] = a->pad.pads[2 * k + 1];
    }
    for (int d = 0; d < nd; d++)
        if (out->shape[d] != in->shape[d] + before[d] + after[d])
            return shape_mismatch(TGC_OP_PAD, "padded input", in, out);
    fill_value(out, a->pad.value);
    tgc_row_major_strides(out->shape, nd, ost);
    int64_t soff = in->offset, doff = out->offset;
    for (int d = 0; d < nd; d++) {
        /* input index i lands at i + before; negative pads crop */
        int64_t lo = before[d] < 0 ? -before[d] : 0;
        int64_t hi = after[d] < 0 ? in->shape[d] + after[d] : in->shape[d];
        cnt[d] = hi - lo;
        if (cnt[d] <= 0)
            return TGC_OK;
        soff += lo * in->strides[d];
        doff += (lo + before[d]) * ost[d];
    }
    copy_into(out, doff, ost, in, soff, cnt, nd);
    return TGC_OK;
}

/* FLIP: out[i] = in[i with the masked dims reversed] (tgc_flip_geometry). */
static tgc_status flip_kernel(const tgc_tensor *in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t ost[TGC_MAX_DIMS], sst[TGC_MAX_DIMS];
    const int nd = in->ndim;
    if (out->ndim != nd || !tgc_shape_equal(in->shape, nd, out->shape, nd))
        return shape_mismatch(TGC_OP_FLIP, "input", in, out);
    if (tgc_shape_numel(in->shape, nd) == 0)
        return TGC_OK;
    int64_t soff;
    tgc_flip_geometry(in, a->flip.mask, sst, &soff);
    tgc_row_major_strides(out->shape, nd, ost);
    tgc_copy_strided(tgc_host_data(out), out->dtype, out->offset, ost, tgc_host_data(in), in->dtype,
                     soff, sst, out->shape, nd);
    return TGC_OK;
}

static int64_t read_index(const void *base, tgc_dtype dt, int64_t off)
{
    if (dt == TGC_I64) {
        int64_t v;
        memcpy(&v, (const char *)base + off * 8, 8);
        return v;
    }
    if (dt == TGC_I32) {
        int32_t v;
        memcpy(&v, (const char *)base + off * 4, 4);
        return v;
    }
    double v = tgc_load(base, dt, off);
    return v >= -9.0e18 && v <= 9.0e18 ? (int64_t)v : INT64_MIN;
}

static tgc_status index_error(tgc_op op, int64_t v, int64_t limit, int64_t pos)
{
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc_%s: index %" PRId64 " out of range [0, %" PRId64
                         ") at position %" PRId64,
                         tgc_op_name(op), v, limit, pos);
}

/* Reads idx's values in row-major order into ids, checking each against [0, limit). */
static tgc_status read_indices(tgc_op op, const tgc_tensor *idx, int64_t limit, int64_t *ids)
{
    int64_t n = tgc_shape_numel(idx->shape, idx->ndim), ost[TGC_MAX_DIMS] = {0};
    if (n == 0)
        return TGC_OK;
    if (idx->dtype == TGC_I64) {
        tgc_row_major_strides(idx->shape, idx->ndim, ost);
        tgc_copy_strided(ids, TGC_I64, 0, ost, tgc_host_data(idx), TGC_I64, idx->offset,
                         idx->strides, idx->shape, idx->ndim);
    } else {
        const int64_t *ist = idx->strides;
        int64_t pos[TGC_MAX_DIMS] = {0}, off = idx->offset;
        for (int64_t p = 0; p < n; p++) {
            ids[p] = read_index(tgc_host_data(idx), idx->dtype, off);
            for (int k = idx->ndim - 1; k >= 0; k--) {
                off += ist[k];
                if (++pos[k] < idx->shape[k])
                    break;
                off -= ist[k] * idx->shape[k];
                pos[k] = 0;
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        if (ids[p] < 0 || ids[p] >= limit)
            return index_error(op, ids[p], limit, p);
    return TGC_OK;
}

/* out = t with dim replaced by the n positions ids (already checked), one slice per id. */
static void select_slices(const tgc_tensor *t, int dim, const int64_t *ids, int64_t n,
                          tgc_tensor *out)
{
    int64_t shape[TGC_MAX_DIMS], tst[TGC_MAX_DIMS], ost[TGC_MAX_DIMS];
    int nd = t->ndim;
    memcpy(shape, t->shape, sizeof shape);
    memcpy(tst, t->strides, sizeof tst);
    if (nd == 0) { /* a 0-d tensor indexes like a 1-element vector */
        nd = 1;
        shape[0] = 1;
        tst[0] = 0;
    }
    shape[dim] = n;
    tgc_row_major_strides(shape, nd, ost);
    shape[dim] = 1;
    for (int64_t j = 0; j < n; j++)
        tgc_copy_strided(tgc_host_data(out), out->dtype, out->offset + j * ost[dim], ost,
                         tgc_host_data(t), t->dtype, t->offset + ids[j] * tst[dim], tst, shape, nd);
}

static tgc_status select_kernel(tgc_op op, const tgc_tensor *t, int dim, const tgc_tensor *idx,
                                tgc_tensor *out)
{
    int64_t n = tgc_shape_numel(idx->shape, idx->ndim);
    int64_t limit = t->ndim ? t->shape[dim] : 1, want = n;
    for (int d = 0; d < t->ndim; d++)
        want *= d == dim ? 1 : t->shape[d];
    if (tgc_shape_numel(out->shape, out->ndim) != want)
        return shape_mismatch(op, "selection from", t, out);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!ids)
        return tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory for %" PRId64 " indices",
                             tgc_op_name(op), n);
    tgc_status s = read_indices(op, idx, limit, ids);
    if (s == TGC_OK && want > 0)
        select_slices(t, dim, ids, n, out);
    free(ids);
    return s;
}

/* One element of a same-dtype copy; the switch keeps the common sizes as plain moves. */
static inline void copy_elem(char *d, const char *s, size_t esz)
{
    switch (esz) {
    case 1: memcpy(d, s, 1); return;
    case 2: memcpy(d, s, 2); return;
    case 4: memcpy(d, s, 4); return;
    case 8: memcpy(d, s, 8); return;
    default: memcpy(d, s, esz); return;
    }
}

static tgc_status gather_kernel(const tgc_tensor *t, const tgc_attrs *a, const tgc_tensor *idx,
                                tgc_tensor *out)
{
    char b1[96], b2[96];
    int nd = idx->ndim;
    int dim = nd ? norm_axis(a->dim.dim, nd) : 0;
    if (dim < 0 || t->ndim != nd || !tgc_shape_equal(idx->shape, nd, out->shape, out->ndim))
        return shape_mismatch(TGC_OP_GATHER, "index", idx, out);
    for (int d = 0; d < nd; d++)
        if (d != dim && idx->shape[d] > t->shape[d])
            return tgc_set_error(TGC_ERR_SHAPE,
                                 "tgc_gather: index %s is larger than input %s at dim %d",
                                 tgc_format_dims(idx->shape, nd, b1, sizeof b1),
                                 tgc_format_dims(t->shape, nd, b2, sizeof b2), d);
    int64_t n = tgc_shape_numel(idx->shape, nd);
    int64_t limit = nd ? t->shape[dim] : 1, tdim = nd ? t->strides[dim] : 0;
    int64_t pos[TGC_MAX_DIMS] = {0}, ioff = idx->offset, toff = t->offset;
    const char *ibase = tgc_host_data(idx), *tbase = tgc_host_data(t);
    char *obase = tgc_host_data(out);
    size_t esz = tgc_dtype_size(out->dtype);
    int same = t->dtype == out->dtype;
    for (int64_t p = 0; p < n; p++) {
        int64_t v = read_index(ibase, idx->dtype, ioff);
        if (v < 0 || v >= limit)
            return index_error(TGC_OP_GATHER, v, limit, p);
        int64_t src = toff + v * tdim, dst = out->offset + p;
        if (same)
            copy_elem(obase + dst * (int64_t)esz, tbase + src * (int64_t)esz, esz);
        else
            tgc_store(obase, out->dtype, dst, tgc_load(tbase, t->dtype, src));
        for (int k = nd - 1; k >= 0; k--) {
            int64_t ts = k == dim ? 0 : t->strides[k];
            ioff += idx->strides[k];
            toff += ts;
            if (++pos[k] < idx->shape[k])
                break;
            ioff -= idx->strides[k] * idx->shape[k];
            toff -= ts * idx->shape[k];
            pos[k] = 0;
        }
    }
    return TGC_OK;
}

static tgc_status check_host(tgc_op op, const tgc_tensor *t)
{
    if (tgc_host_data(t) || tgc_shape_numel(t->shape, t->ndim) == 0)
        return TGC_OK;
    return tgc_set_error(TGC_ERR_INTERNAL,
                         "tgc_%s: a tensor without host storage reached "
                         "the interp backend",
                         tgc_op_name(op));
}

tgc_status tgc_interp_movement(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                               tgc_tensor *out)
{
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_movement: op %d with %d inputs", (int)op,
                             n_in);
    for (int k = 0; k < n_in; k++) {
        if (!in[k])
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: input %d is NULL", tgc_op_name(op), k);
        tgc_status s = check_host(op, in[k]);
        if (s != TGC_OK)
            return s;
    }
    tgc_status s = check_host(op, out);
    if (s != TGC_OK)
        return s;
    switch (op) {
    case TGC_OP_RESHAPE:
    case TGC_OP_PERMUTE:
    case TGC_OP_EXPAND:
    case TGC_OP_SQUEEZE:
    case TGC_OP_UNSQUEEZE:
    case TGC_OP_SLICE:
    case TGC_OP_FLATTEN:
    case TGC_OP_CONTIGUOUS: return view_copy(op, in[0], a, out);
    case TGC_OP_CAT: return cat_kernel(in, n_in, a, out);
    case TGC_OP_STACK: return stack_kernel(in, n_in, a, out);
    case TGC_OP_PAD: return pad_kernel(in[0], a, out);
    case TGC_OP_FLIP: return flip_kernel(in[0], a, out);
    case TGC_OP_ASSIGN: /* tgc_interp_run writes it in place */
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_interp_movement: assign runs in tgc_interp_run");
    case TGC_OP_EMBEDDING:
        if (in[0]->ndim != 2)
            return shape_mismatch(op, "weight", in[0], out);
        return select_kernel(op, in[0], 0, in[1], out);
    case TGC_OP_INDEX_SELECT: {
        int dim = in[0]->ndim ? norm_axis(a->dim.dim, in[0]->ndim) : 0;
        if (dim < 0 || in[1]->ndim > 1)
            return shape_mismatch(op, "index", in[1], out);
        return select_kernel(op, in[0], dim, in[1], out);
    }
    case TGC_OP_GATHER: return gather_kernel(in[0], a, in[1], out);
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_movement: '%s' is not a movement op",
                             tgc_op_name(op));
    }
}
