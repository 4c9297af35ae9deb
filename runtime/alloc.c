/* The allocator registry (runtime/alloc.h): one allocator per device type, the host's
 * registered from the start; what the backends registered of the other device types; and the
 * names devices are written with in messages. */
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

/* What each device type other than the host registered (tgc_device_ops_register). */
static _Atomic(const tgc_device_ops *) device_ops_table[TGC_DEVICE_TYPES];

tgc_status tgc_device_ops_register(tgc_device_type type, const tgc_device_ops *ops)
{
    if (type == TGC_DEVICE_CPU || (unsigned)type >= TGC_DEVICE_TYPES)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_device_ops_register: device type %d is the host's or unknown",
                             (int)type);
    if (!ops || !ops->name || !ops->label || (!ops->load && !ops->missing) ||
        (ops->load && (!ops->count || !ops->synchronize || !ops->set_stream ||
                       !ops->current_stream || !ops->device_name || !ops->mem_info)))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_device_ops_register: device type %d: the ops lack a required "
                             "member (name and label; load and its hooks, or why it is missing)",
                             (int)type);
    atomic_store_explicit(&device_ops_table[type], ops, memory_order_release);
    return TGC_OK;
}

void tgc_device_ops_unregister(tgc_device_type type)
{
    if (type != TGC_DEVICE_CPU && (unsigned)type < TGC_DEVICE_TYPES)
        atomic_store_explicit(&device_ops_table[type], NULL, memory_order_release);
}

const tgc_device_ops *tgc_device_ops_of(tgc_device_type type)
{
    return (unsigned)type < TGC_DEVICE_TYPES
               ? atomic_load_explicit(&device_ops_table[type], memory_order_acquire)
               : NULL;
}

const char *tgc_device_type_name(tgc_device_type type)
{
    if (type == TGC_DEVICE_CPU)
        return "cpu";
    const tgc_device_ops *o = tgc_device_ops_of(type);
    return o ? o->name : NULL;
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
