/* View canonicalization for lowering: a chain of views (reshape, permute, expand, squeeze,
 * unsqueeze, slice, flatten) over a materialized value becomes one affine access —
 * element (off + sum_d stride[d] * i[d]) of the base value's contiguous buffer — so no
 * view is ever copied. Strides and offsets are symbolic dims of the graph's symtab. */
#ifndef TGC_IR_VIEW_ACCESS_H
#define TGC_IR_VIEW_ACCESS_H

#include "ir/graph.h"

typedef struct tgc_view {
    int32_t base; /* the non-view value whose buffer is read */
    tgc_sdim off;
    tgc_sdim stride[TGC_MAX_DIMS]; /* per dim of the viewed value */
} tgc_view;

/* 1 when op is a view kind that lowering folds into indexing (CONTIGUOUS is not). */
int tgc_is_view_op(tgc_op op);
/* The affine view of value v (v itself when it is not a view). 0 when a reshape in the
 * chain merges dims whose strides do not allow it (the caller materializes). */
int tgc_view_of(const tgc_graph *g, int32_t v, tgc_view *out);
/* Row-major strides of a shape. */
void tgc_sym_contiguous_strides(tgc_symtab *t, const tgc_vinfo *v, tgc_sdim *strides);
/* 1 when dims [a, b] of (sizes, strides) can be walked as one dim: stride[d] ==
 * stride[d+1] * size[d+1]; size-1 dims are ignored. *merged gets the inner stride. */
int tgc_dims_mergeable(tgc_symtab *t, const tgc_sdim *sizes, const tgc_sdim *strides, int a, int b,
                       tgc_sdim *merged);
/* 1 when node i is a contiguous copy of a permute of a non-view value *src (CONTIGUOUS over
 * PERMUTE over src): src's elements stored in another dim order. perm (may be NULL; as many
 * entries as dims) gets the order: dim j of i is dim perm[j] of src. */
int tgc_permuted_copy_of(const tgc_graph *g, int32_t i, int32_t *src, int64_t *perm);
/* 1 when node i is such a copy of a 4-D *src in the order (0, 2, 3, 1): NCHW stored NHWC. */
int tgc_nhwc_copy_of(const tgc_graph *g, int32_t i, int32_t *src);
/* For such a copy i: where element (i_0, ..) of its source lands in i's buffer, as one
 * stride per dim of the source (sum_d strides[d] * i_d). */
void tgc_permuted_copy_strides(const tgc_graph *g, int32_t i, tgc_sdim *strides);
/* 1 when a and b are the same dim (constants compare by value). */
static inline int tgc_sdim_same(tgc_sdim a, tgc_sdim b)
{
    return a == b;
}
static inline int tgc_sdim_is(tgc_sdim d, int64_t c)
{
    return TGC_SDIM_IS_CONST(d) && d == c;
}

#endif
