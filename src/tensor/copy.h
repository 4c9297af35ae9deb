/* Element copies, used by every layer above: the strided copy on host memory (views that
 * must copy, interp's movement kernels), and the tensor copies between any two devices
 * (tgc_copy_, tgc_to, tgc_copy_to_host, the executors' input and write-back copies, staging
 * for steps that run on the host). Host to host is the strided copy; a device side moves
 * contiguous bytes through its allocator's copy (runtime/alloc.h), strided or converting
 * copies being staged through a host image of the bytes their elements span. */
#ifndef TGC_TENSOR_COPY_H
#define TGC_TENSOR_COPY_H

#include "tensor/tensor_impl.h"

/* Strided element copy with dtype conversion, HOST MEMORY ONLY: dst/src point at element 0
 * of their host buffers;
 * offsets and strides are in elements. Drops size-1 dims, merges dims contiguous in both,
 * then moves memcpy runs, strided runs, or 32x32 tiles for transposes. */
void tgc_copy_strided(void *dst, tgc_dtype ddt, int64_t doff, const int64_t *dstrides,
                      const void *src, tgc_dtype sdt, int64_t soff, const int64_t *sstrides,
                      const int64_t *shape, int ndim);
/* Copies src's elements into dst in row-major order: same shape (any strides on both), or
 * same numel with different shapes; each on any device. Overlapping storage is handled
 * through a temporary. Does not bump dst's version (the caller does). TGC_ERR_SHAPE when
 * the numels differ; a failed device copy's status, its message naming both devices. */
tgc_status tgc_tensor_copy(tgc_tensor *dst, const tgc_tensor *src);

/* The row-major copy of tgc_tensor_copy for tensors known not to overlap (dst is fresh), fn
 * naming the caller in an error message; numels equal (not checked). */
tgc_status tgc_copy_reshape(const char *fn, tgc_tensor *dst, const tgc_tensor *src);
/* A contiguous copy of t on device dev, in the innermost scope; NULL with the error set (fn
 * names the caller). The one function data moves between devices with (tgc_to, staging of
 * fallback steps). */
tgc_tensor *tgc_tensor_copy_to(const char *fn, const tgc_tensor *t, tgc_device dev);
/* t's elements in row-major order into the host buffer dst (numel * dtype size bytes, t's
 * dtype), t on any device; fn names the caller in errors. */
tgc_status tgc_tensor_read(const char *fn, const tgc_tensor *t, void *dst);
/* The reverse: the host buffer src (t's dtype, row-major) into t's elements. */
tgc_status tgc_tensor_write(const char *fn, tgc_tensor *t, const void *src);
/* The element at t's offset (its first in row-major order; t not empty) into dst
 * (dtype size bytes). */
tgc_status tgc_tensor_read_item(const char *fn, const tgc_tensor *t, void *dst);

/* Row-major strides that count size-0 and size-1 dims as 1. */
void tgc_row_major_strides(const int64_t *shape, int nd, int64_t *st);
int tgc_shape_equal(const int64_t *a, int na, const int64_t *b, int nb);
/* 1 when every dim of size > 1 has its row-major stride (an empty shape is dense). */
int tgc_strides_dense(const int64_t *shape, const int64_t *st, int nd);

#endif
