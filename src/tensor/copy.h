/* Element copies on host memory, used by every layer above: views that must copy, interp's
 * movement kernels, the executors' input and write-back copies, tgc_copy_ and tgc_to. */
#ifndef TGC_TENSOR_COPY_H
#define TGC_TENSOR_COPY_H

#include "tensor/tensor_impl.h"

/* Strided element copy with dtype conversion: dst/src point at element 0 of their buffers;
 * offsets and strides are in elements. Drops size-1 dims, merges dims contiguous in both,
 * then moves memcpy runs, strided runs, or 32x32 tiles for transposes. */
void tgc_copy_strided(void *dst, tgc_dtype ddt, int64_t doff, const int64_t *dstrides,
                      const void *src, tgc_dtype sdt, int64_t soff, const int64_t *sstrides,
                      const int64_t *shape, int ndim);
/* Copies src's elements into dst in row-major order: same shape (any strides on both), or
 * same numel with different shapes. Overlapping storage is handled through a temporary.
 * Does not bump dst's version (the caller does). TGC_ERR_SHAPE when the numels differ. */
tgc_status tgc_tensor_copy(tgc_tensor *dst, const tgc_tensor *src);

/* The row-major copy of tgc_tensor_copy for tensors known not to overlap (dst is fresh), fn
 * naming the caller in an out-of-memory message; numels equal (not checked). */
tgc_status tgc_copy_reshape(const char *fn, tgc_tensor *dst, const tgc_tensor *src);
/* A contiguous copy of t on device dev, in the innermost scope; NULL with the error set (fn
 * names the caller). The one function data moves between devices with (tgc_to, staging of
 * fallback steps). */
tgc_tensor *tgc_tensor_copy_to(const char *fn, const tgc_tensor *t, tgc_device dev);

/* Row-major strides that count size-0 and size-1 dims as 1. */
void tgc_row_major_strides(const int64_t *shape, int nd, int64_t *st);
int tgc_shape_equal(const int64_t *a, int na, const int64_t *b, int nb);
/* 1 when every dim of size > 1 has its row-major stride (an empty shape is dense). */
int tgc_strides_dense(const int64_t *shape, const int64_t *st, int nd);

#endif
