/* The allocator registry (runtime/alloc.h): one allocator per device type, the host's
 * registered from the start; and the names devices are written with in messages. */
#include "runtime/alloc.h"

#include <stdio.h>

#include "support/error.h"

/* The host's allocator is there from the start (a constant initializer: before any code). */
_Atomic(const tgc_allocator *) tgc_allocator_table[TGC_DEVICE_TYPES] = {&tgc_host_allocator};

tgc_status tgc_allocator_register(tgc_device_type type, const tgc_allocator *a)
{
    if ((unsigned)type >= TGC_DEVICE_TYPES)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_allocator_register: unknown device type %d",
                             (int)type);
    if (!a || !a->name || !a->alloc || !a->free || !a->copy || !a->stats || !a->empty_cache)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_allocator_register: the %s allocator lacks a required member "
                             "(name, alloc, free, copy, stats and empty_cache must be set)",
                             tgc_device_type_name(type));
    atomic_store_explicit(&tgc_allocator_table[type], a, memory_order_release);
    return TGC_OK;
}

void tgc_allocator_unregister(tgc_device_type type)
{
    if ((unsigned)type >= TGC_DEVICE_TYPES)
        return;
    atomic_store_explicit(&tgc_allocator_table[type],
                          type == TGC_DEVICE_CPU ? &tgc_host_allocator : NULL,
                          memory_order_release);
}

const char *tgc_device_type_name(tgc_device_type type)
{
    switch (type) {
    case TGC_DEVICE_CPU: return "cpu";
    case TGC_DEVICE_CUDA: return "cuda";
    }
    return NULL;
}

char *tgc_format_device(tgc_device dev, char *buf, size_t n)
{
    const char *name = tgc_device_type_name(dev.type);
    if (dev.type == TGC_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else if (name)
        snprintf(buf, n, "%s:%d", name, dev.index);
    else
        snprintf(buf, n, "device type %d index %d", (int)dev.type, dev.index);
    return buf;
}
