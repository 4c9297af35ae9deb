/* Refcounted storage behind tensors (runtime/storage.h): the bytes come from the allocator
 * registered for the storage's device type (runtime/alloc.h), and go back through it. */
#include "runtime/storage.h"

#include <stdlib.h>

static atomic_uint_fast64_t next_uid = 1;

tgc_storage *tgc_storage_new(size_t nbytes, tgc_device dev)
{
    const tgc_allocator *a = tgc_allocator_of(dev.type);
    if (!a)
        return NULL;
    tgc_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    tgc_block b = a->alloc(a->ctx, dev.index, nbytes);
    if (!b.ptr) {
        free(s);
        return NULL;
    }
    s->data = b.ptr;
    s->nbytes = nbytes;
    s->cap = b.cap;
    atomic_init(&s->refs, 1);
    atomic_init(&s->version, 0);
    s->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
    s->device = dev;
    s->alloc = a;
    return s;
}

void tgc_storage_ref(tgc_storage *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void tgc_storage_unref(tgc_storage *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        s->alloc->free(s->alloc->ctx, s->device.index, (tgc_block){s->data, s->cap});
        free(s);
    }
}
