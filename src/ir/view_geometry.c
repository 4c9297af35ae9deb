/* View geometry of concrete tensors (ir/view_geometry.h): the strides and offset that let
 * reshape, permute, expand, squeeze, unsqueeze, slice, flatten and contiguous share their
 * input's storage. The executor makes its views with it, interp's view kernels and the
 * device backends' native views too. */
#include <string.h>

#include "ir/view_geometry.h"
#include "tensor/copy.h"
#include "tgc/ops.h" /* TGC_ALL_DIMS */

static int norm_axis(int64_t d, int nd)
{
    if (d < 0)
        d += nd;
    return d >= 0 && d < nd ? (int)d : -1;
}

/* PyTorch's computeStride: old dims are split into chunks that are contiguous among
 * themselves; a view exists when the new shape splits at chunk boundaries only. */
static int reshape_strides(const int64_t *oshape, const int64_t *ostr, int ond,
                           const int64_t *nshape, int nnd, int64_t *nstr)
{
    int64_t numel = tgc_shape_numel(oshape, ond);
    if (numel != tgc_shape_numel(nshape, nnd))
        return 0;
    if (ond == 0) {
        for (int d = 0; d < nnd; d++)
            nstr[d] = 1;
        return 1;
    }
    if (numel == 0) {
        if (tgc_shape_equal(oshape, ond, nshape, nnd))
            memcpy(nstr, ostr, sizeof(int64_t) * (size_t)nnd);
        else
            tgc_row_major_strides(nshape, nnd, nstr);
        return 1;
    }
    int vd = nnd - 1;
    int64_t base = ostr[ond - 1], tnumel = 1, vnumel = 1;
    for (int td = ond - 1; td >= 0; td--) {
        tnumel *= oshape[td];
        if (td > 0 && (oshape[td - 1] == 1 || ostr[td - 1] == tnumel * base))
            continue;
        while (vd >= 0 && (vnumel < tnumel || nshape[vd] == 1)) {
            nstr[vd] = vnumel * base;
            vnumel *= nshape[vd];
            vd--;
        }
        if (vnumel != tnumel)
            return 0;
        if (td > 0) {
            base = ostr[td - 1];
            tnumel = 1;
            vnumel = 1;
        }
    }
    return vd == -1;
}

static int permute_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                            int out_ndim, int64_t *strides)
{
    unsigned seen = 0;
    if (a->ni != in->ndim || out_ndim != in->ndim)
        return 0;
    for (int j = 0; j < out_ndim; j++) {
        int p = norm_axis(a->perm.perm[j], in->ndim);
        if (p < 0 || (seen & (1u << p)) || out_shape[j] != in->shape[p])
            return 0;
        seen |= 1u << p;
        strides[j] = in->strides[p];
    }
    return 1;
}

static int expand_geometry(const tgc_tensor *in, const int64_t *out_shape, int out_ndim,
                           int64_t *strides)
{
    int lead = out_ndim - in->ndim;
    if (lead < 0)
        return 0;
    for (int j = 0; j < out_ndim; j++) {
        int k = j - lead;
        if (k < 0)
            strides[j] = 0;
        else if (in->shape[k] == out_shape[j])
            strides[j] = in->strides[k];
        else if (in->shape[k] == 1)
            strides[j] = 0;
        else
            return 0;
    }
    return 1;
}

static int squeeze_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                            int out_ndim, int64_t *strides)
{
    int k = 0;
    if (a->dim.dim == TGC_ALL_DIMS) {
        for (int d = 0; d < in->ndim; d++) {
            if (in->shape[d] == 1)
                continue;
            if (k >= out_ndim || out_shape[k] != in->shape[d])
                return 0;
            strides[k++] = in->strides[d];
        }
        return k == out_ndim;
    }
    if (tgc_shape_equal(in->shape, in->ndim, out_shape, out_ndim)) {
        memcpy(strides, in->strides, sizeof(int64_t) * (size_t)out_ndim);
        return 1; /* the dim is not of size 1: squeeze leaves the tensor as it is */
    }
    int drop = norm_axis(a->dim.dim, in->ndim);
    if (drop < 0 || in->shape[drop] != 1 || out_ndim != in->ndim - 1)
        return 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == drop)
            continue;
        if (out_shape[k] != in->shape[d])
            return 0;
        strides[k++] = in->strides[d];
    }
    return 1;
}

static int unsqueeze_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                              int out_ndim, int64_t *strides)
{
    int at = norm_axis(a->dim.dim, out_ndim);
    if (at < 0 || out_ndim != in->ndim + 1 || out_shape[at] != 1)
        return 0;
    for (int j = 0, d = 0; j < out_ndim; j++) {
        if (j == at) {
            /* PyTorch's choice: the stride that the dim would have if it were dense. */
            strides[j] = at < in->ndim ? in->shape[at] * in->strides[at] : 1;
            continue;
        }
        if (out_shape[j] != in->shape[d])
            return 0;
        strides[j] = in->strides[d++];
    }
    return 1;
}

static int slice_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                          int out_ndim, int64_t *strides, int64_t *offset)
{
    int dim = norm_axis(a->slice.dim, in->ndim);
    int64_t start = a->slice.start, end = a->slice.end, step = a->slice.step;
    if (dim < 0 || step <= 0 || out_ndim != in->ndim)
        return 0;
    int64_t size = in->shape[dim];
    if (start < 0)
        start += size;
    if (end < 0)
        end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t len = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for any step */
    for (int d = 0; d < out_ndim; d++) {
        if (out_shape[d] != (d == dim ? len : in->shape[d]))
            return 0;
        strides[d] = in->strides[d];
    }
    if (len > 1) /* (len - 1) * step < size: the stride fits; a size-1 dim keeps its own */
        strides[dim] *= step;
    *offset += start * in->strides[dim];
    return 1;
}

void tgc_flip_geometry(const tgc_tensor *in, int64_t mask, int64_t *strides, int64_t *offset)
{
    *offset = in->offset;
    for (int d = 0; d < in->ndim; d++) {
        const int rev = (mask >> d) & 1;
        strides[d] = rev ? -in->strides[d] : in->strides[d];
        if (rev)
            *offset += (in->shape[d] - 1) * in->strides[d];
    }
}

int tgc_view_geometry(tgc_op op, const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                      int out_ndim, int64_t *strides, int64_t *offset)
{
    *offset = in->offset;
    if (out_ndim < 0 || out_ndim > TGC_MAX_DIMS)
        return 0;
    switch (op) {
    case TGC_OP_RESHAPE:
    case TGC_OP_FLATTEN:
        return reshape_strides(in->shape, in->strides, in->ndim, out_shape, out_ndim, strides);
    case TGC_OP_CONTIGUOUS:
        if (!tgc_shape_equal(in->shape, in->ndim, out_shape, out_ndim) ||
            !tgc_tensor_is_contiguous(in))
            return 0;
        memcpy(strides, in->strides, sizeof(int64_t) * (size_t)out_ndim);
        return 1;
    case TGC_OP_PERMUTE: return permute_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_EXPAND: return expand_geometry(in, out_shape, out_ndim, strides);
    case TGC_OP_SQUEEZE: return squeeze_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_UNSQUEEZE: return unsqueeze_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_SLICE: return slice_geometry(in, a, out_shape, out_ndim, strides, offset);
    default: return 0;
    }
}
