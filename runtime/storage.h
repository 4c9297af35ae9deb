/* Refcounted memory behind tensors, on the host or on a device: the bytes come from the
 * allocator registered for the device's type (runtime/alloc.h), which the storage remembers
 * and frees through. `data` is a host address only when the device is the host; device
 * memory is reached only through its allocator's copy. The runtime never includes compiler
 * headers. */
#ifndef TGC_RUNTIME_STORAGE_H
#define TGC_RUNTIME_STORAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "tgc/tensor.h"

typedef struct tgc_storage {
    void *data; /* 64-byte aligned on the host; a device address otherwise */
    size_t nbytes;
    size_t cap; /* bytes allocated (a reused block may be larger) */
    atomic_int refs;
    atomic_uint_fast64_t version; /* bumped by every in-place write */
    uint64_t uid;                 /* unique in the process, never reused (an address may be) */
    tgc_device device;
    const tgc_allocator *alloc; /* made the block; frees it */
} tgc_storage;

/* New storage on dev with refs = 1, contents uninitialised; NULL when out of memory or when
 * no allocator is registered for dev's type (tgc_device_check tells which, with a message). */
tgc_storage *tgc_storage_new(size_t nbytes, tgc_device dev);
void tgc_storage_ref(tgc_storage *s);
void tgc_storage_unref(tgc_storage *s);
static inline void tgc_storage_bump(tgc_storage *s)
{
    atomic_fetch_add_explicit(&s->version, 1, memory_order_relaxed);
}

#endif
