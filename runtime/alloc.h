/* Allocators: where the bytes of every tensor storage come from, one per device type.
 *
 * The host allocator (runtime/host_alloc.c) is always registered for TGC_DEVICE_CPU. A
 * device backend plugs its own in with tgc_allocator_register (the CUDA backend next), and
 * from then on tensors can be created on, and copied to and from, devices of that type:
 * tgc_storage_new dispatches on the device, a storage remembers the allocator that made it
 * and frees through it, and the tensor core's copies (tensor/copy.c) move bytes between
 * devices only through the allocators' `copy`.
 *
 * The runtime never includes compiler headers. */
#ifndef TGC_RUNTIME_ALLOC_H
#define TGC_RUNTIME_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>

#include "tgc/tensor.h"

/* A block of memory: ptr (64-byte aligned on the host) and the bytes actually reserved
 * behind it (a reused block may be larger than asked for). ptr NULL: out of memory. */
typedef struct tgc_block {
    void *ptr;
    size_t cap;
} tgc_block;

/* Bytes of one device: held by live blocks, kept in the allocator's cache for reuse, and
 * the most ever held by live blocks at once (since the start, or the last reset). */
typedef struct tgc_mem_stats {
    size_t in_use;
    size_t cached;
    size_t peak;
} tgc_mem_stats;

typedef struct tgc_allocator tgc_allocator;

/* The members of an allocator. Every member but the optional ones must be set. `index` is
 * the device index (always 0 for the host); blocks are only freed by the allocator and
 * index that made them. */
struct tgc_allocator {
    const char *name; /* the device type as users write it: "cpu", "cuda" */
    void *ctx;        /* the allocator's own state, passed back to every member */
    /* Optional: number of devices of this type; tgc_device_check rejects an index outside
     * [0, count). Asked at every tensor creation on the device: return a cached count.
     * NULL: every index is accepted (the host). */
    int (*device_count)(void *ctx);
    /* A block of at least nbytes (nbytes may be 0), contents uninitialised; {NULL, 0} when
     * out of memory (no error set: the caller names the op). Called on every tensor's
     * allocation: keep it fast. */
    tgc_block (*alloc)(void *ctx, int index, size_t nbytes);
    /* Releases a block alloc returned (cap as returned). Never fails. */
    void (*free)(void *ctx, int index, tgc_block b);
    /* Copies nbytes contiguous bytes from src to dst, each either host memory or memory of
     * this allocator, as dst_dev / src_dev say (one of them, or both, is of this type; the
     * two indices may differ). Complete when it returns (synchronous). TGC_OK, or a status
     * with the error set naming what failed. The only way bytes enter or leave a device. */
    tgc_status (*copy)(void *ctx, void *dst, tgc_device dst_dev, const void *src,
                       tgc_device src_dev, size_t nbytes);
    /* Optional: waits until all work queued on device index has finished. NULL: work is
     * synchronous. */
    tgc_status (*synchronize)(void *ctx, int index);
    /* Statistics of device index. */
    tgc_mem_stats (*stats)(void *ctx, int index);
    /* Optional: restarts peak at the bytes now in use. */
    void (*reset_peak)(void *ctx, int index);
    /* Returns the cached (free, kept for reuse) blocks of every device to the system. */
    void (*empty_cache)(void *ctx);
    /* Optional: why the calling thread's last alloc of nbytes on device index returned
     * {NULL, 0}. Writes the reason into buf (n bytes), e.g. "asked for 1.5 TiB, 139.2 GiB
     * free of 139.8 GiB (the cache was emptied and the allocation retried)", and returns the
     * status to report (TGC_ERR_OOM, or another one for a failure that is not a lack of
     * memory, e.g. TGC_ERR_RUNTIME for a driver error). Called right after the failed alloc
     * on the same thread. NULL: plain out of memory, no details. */
    tgc_status (*alloc_failure)(void *ctx, int index, size_t nbytes, char *buf, size_t n);
};

/* Plugs a in for devices of type `type`, replacing any earlier one (for the host: the host
 * allocator). a (and what it points to) must stay valid until it is unregistered.
 * TGC_ERR_INVALID_ARG (error set) for an unknown type or a missing required member.
 * Thread-safety: registration is a release store, lookup an acquire load, so a backend may
 * register from any thread, but registering or unregistering must not overlap the life of
 * storage made by the allocator it replaces: do it before the first tensor on that device
 * type exists and after the last one is freed. */
tgc_status tgc_allocator_register(tgc_device_type type, const tgc_allocator *a);
/* Removes the allocator of `type` (the host allocator comes back for TGC_DEVICE_CPU); same
 * contract as registering. */
void tgc_allocator_unregister(tgc_device_type type);
/* The allocator of a device type, or NULL when none is registered (or the type is
 * unknown). Inline: every storage allocation asks (one acquire load, a plain load on x86). */
#define TGC_DEVICE_TYPES 2 /* TGC_DEVICE_CPU, TGC_DEVICE_CUDA */
extern _Atomic(const tgc_allocator *) tgc_allocator_table[TGC_DEVICE_TYPES];
static inline const tgc_allocator *tgc_allocator_of(tgc_device_type type)
{
    return (unsigned)type < TGC_DEVICE_TYPES
               ? atomic_load_explicit(&tgc_allocator_table[type], memory_order_acquire)
               : NULL;
}
/* The host allocator (runtime/host_alloc.c): registered for TGC_DEVICE_CPU unless replaced. */
extern const tgc_allocator tgc_host_allocator;

/* "cpu", "cuda" for known types whether or not an allocator is registered; NULL for an
 * unknown type. */
const char *tgc_device_type_name(tgc_device_type type);
/* "cpu", "cuda:1", or "device type 7 index 0" for an unknown type, into buf; returns buf. */
char *tgc_format_device(tgc_device dev, char *buf, size_t n);
static inline int tgc_device_equal(tgc_device a, tgc_device b)
{
    return a.type == b.type && a.index == b.index;
}

#endif
