/* Refcounted host (and later device) memory behind tensors. The runtime never includes
 * compiler headers. */
#ifndef TGC_RUNTIME_STORAGE_H
#define TGC_RUNTIME_STORAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tgc/tensor.h"

typedef struct tgc_storage {
    void *data; /* 64-byte aligned */
    size_t nbytes;
    size_t cap; /* bytes allocated (a reused block may be larger) */
    atomic_int refs;
    atomic_uint_fast64_t version; /* bumped by every in-place write */
    tgc_device device;
} tgc_storage;

/* New storage with refs = 1, contents uninitialised; NULL when out of memory. */
tgc_storage *tgc_storage_new(size_t nbytes, tgc_device dev);
void tgc_storage_ref(tgc_storage *s);
void tgc_storage_unref(tgc_storage *s);
static inline void tgc_storage_bump(tgc_storage *s)
{
    atomic_fetch_add_explicit(&s->version, 1, memory_order_relaxed);
}

#endif
