/* New tensors a user or a layer above gets: fresh storage or a view of another tensor's, each
 * in the innermost scope of the thread. Above the tensor objects (tensor.c) and the scopes
 * (scope.c), which own the tensors but never create them. */
#include <stdio.h>

#include "runtime/alloc.h"
#include "support/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor_impl.h"

tgc_tensor *tgc_tensor_new_checked(const char *fn, const int64_t *shape, int ndim, tgc_dtype dt,
                                   tgc_device dev)
{
    if (!tgc_shape_check(fn, shape, ndim) || !tgc_dtype_device_check(fn, dt, dev))
        return NULL;
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    int64_t numel = tgc_shape_numel(shape, ndim);
    t->storage = tgc_storage_new((size_t)numel * tgc_dtype_size(dt), dev);
    if (!t->storage) {
        tgc_tensor_unref(t);
        char dims[160];
        size_t nb = (size_t)numel * tgc_dtype_size(dt);
        const tgc_allocator *a = tgc_allocator_of(dev.type);
        if (dev.type != TGC_DEVICE_CPU && a && a->alloc_failure) {
            /* the device allocator knows why: bytes asked, free and total */
            char why[512], dn[48];
            tgc_status st = a->alloc_failure(a->ctx, dev.index, nb, why, sizeof why);
            tgc_set_error(st, "%s: %s on %s: %s; the tensor: %s of shape %s (%lld elements)", fn,
                          st == TGC_ERR_OOM ? "out of memory" : "allocation failed",
                          tgc_format_device(dev, dn, sizeof dn), why, tgc_dtype_name(dt),
                          tgc_format_dims(shape, ndim, dims, sizeof dims), (long long)numel);
            return NULL;
        }
        tgc_set_error(TGC_ERR_OOM,
                      "%s: out of memory for a %s tensor of shape %s (%lld elements, %zu bytes)",
                      fn, tgc_dtype_name(dt), tgc_format_dims(shape, ndim, dims, sizeof dims),
                      (long long)numel, nb);
        return NULL;
    }
    t->dtype = dt;
    t->ndim = ndim;
    t->device = dev;
    for (int i = 0; i < ndim && i < TGC_MAX_DIMS; i++)
        t->shape[i] = shape[i];
    tgc_contiguous_strides(t->shape, ndim, t->strides);
    /* Created while tracing: the value becomes a constant of the graph, not a capture. */
    if (tgc_trace_current())
        t->flags |= TGC_T_TRACE_CONST;
    tgc_scope_adopt(t);
    return t;
}

tgc_tensor *tgc_tensor_new(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return tgc_tensor_new_checked("tgc", shape, ndim, dt, dev);
}

tgc_tensor *tgc_tensor_view(const tgc_tensor *base, const int64_t *shape, const int64_t *strides,
                            int ndim, int64_t offset)
{
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    t->dtype = base->dtype;
    t->device = base->device;
    t->ndim = ndim;
    for (int i = 0; i < ndim && i < TGC_MAX_DIMS; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
    t->offset = offset;
    t->storage = base->storage;
    tgc_storage_ref(t->storage);
    t->flags = base->flags & TGC_T_TRACE_CONST;
    tgc_scope_adopt(t);
    return t;
}
