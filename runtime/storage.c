/* Refcounted host memory. */
#include "runtime/storage.h"

#include <stdlib.h>

tgc_storage *tgc_storage_new(size_t nbytes, tgc_device dev)
{
    tgc_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    /* 64-byte alignment suits every vector width; round up as aligned_alloc requires. */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    s->data = aligned_alloc(64, rounded ? rounded : 64);
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    atomic_init(&s->refs, 1);
    atomic_init(&s->version, 0);
    s->device = dev;
    return s;
}

void tgc_storage_ref(tgc_storage *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void tgc_storage_unref(tgc_storage *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        free(s->data);
        free(s);
    }
}
