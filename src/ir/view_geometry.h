/* View geometry of concrete tensors: what tgc_view_of (view_access.h) is for the symbolic
 * values of a graph, for one view op over a tensor with sizes, strides and an offset. */
#ifndef TGC_IR_VIEW_GEOMETRY_H
#define TGC_IR_VIEW_GEOMETRY_H

#include "ir/graph.h"
#include "tensor/tensor_impl.h"

/* A VIEW op (and CONTIGUOUS of a contiguous tensor) over in with output shape
 * out_shape[0..out_ndim): fills strides (elements) and *offset (from in's storage start) and
 * returns 1; 0 when no view is possible (a reshape of a non-viewable layout, or a shape the
 * op cannot give: the caller copies). */
int tgc_view_geometry(tgc_op op, const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                      int out_ndim, int64_t *strides, int64_t *offset);

/* FLIP's read of in (mask: the reversed dims): in's strides with the reversed ones negated and
 * *offset (elements from in's storage start) at their last element, so that element i of the
 * result is in's element at that offset plus i . strides. Not a view (a tensor's strides are
 * never negative): the flip kernels copy through it. */
void tgc_flip_geometry(const tgc_tensor *in, int64_t mask, int64_t *strides, int64_t *offset);

#endif
