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
/* Slots for device types: TGC_DEVICE_CPU, TGC_DEVICE_CUDA and two more a backend registered at
 * run time may own (a test's stand-in, a new device backend before its public enum value). */
#define TGC_DEVICE_TYPES 4
extern _Atomic(const tgc_allocator *) tgc_allocator_table[TGC_DEVICE_TYPES];
static inline const tgc_allocator *tgc_allocator_of(tgc_device_type type)
{
    return (unsigned)type < TGC_DEVICE_TYPES
               ? atomic_load_explicit(&tgc_allocator_table[type], memory_order_acquire)
               : NULL;
}
/* The host allocator (runtime/host_alloc.c): registered for TGC_DEVICE_CPU unless replaced. */
extern const tgc_allocator tgc_host_allocator;

/* ---- device types ----
 *
 * A device type other than the host is known to the layers below the backends only through
 * what its backend registers here (src/backend/registry.c does it for every backend of the
 * build before main, and for a backend registered at run time): its names, and the hooks of
 * its runtime that the public device API (src/tensor/cuda_device.c), the tensor core (the
 * first tensor on the type loads its driver) and the communicators (runtime/comm.c) call.
 * A build without the backend of a known type registers the names and why it is missing,
 * with no hooks. Nothing below src/backend/ names a device runtime. */

/* Streams and events of a device type: what a communicator queues its collectives with
 * (runtime/comm.c). Every member is set. `what` starts the message of a failure: the hook
 * sets "<what>: <the driver call>: <the driver's error>" and returns its status. */
typedef struct tgc_device_stream_ops {
    /* 1 once the driver is loaded (before that no stream or event of the type exists). */
    int (*loaded)(void);
    /* Makes device index current on the calling thread (NCCL and the driver queue work on the
     * current device). */
    tgc_status (*enter)(int index, const char *what);
    /* A non-blocking stream of the current device, the caller's to destroy. */
    tgc_status (*stream_create)(void **stream, const char *what);
    void (*stream_destroy)(void *stream);
    /* An event without timing, of the current device. */
    tgc_status (*event_create)(void **event, const char *what);
    void (*event_destroy)(void *event);
    /* Records event after the work queued on stream so far. */
    tgc_status (*record)(void *event, void *stream, const char *what);
    /* Makes later work on stream wait for event. */
    tgc_status (*wait)(void *stream, void *event, const char *what);
    /* 1: the work before event has finished; 0: not yet; -1: it failed (error set). */
    int (*query)(void *event, const char *what);
    /* *yes = 1 when stream is being captured into a graph (its events cannot be queried). */
    tgc_status (*capturing)(void *stream, int *yes, const char *what);
    /* Lets the calling thread query events while another thread captures in global mode;
     * returns 0 (nothing done) when the driver is not loaded yet. */
    int (*relax_capture)(void);
} tgc_device_stream_ops;

typedef struct tgc_device_ops {
    const char *name;  /* as users write it: "cuda" (devices are written "cuda:1") */
    const char *label; /* in prose: "CUDA" ("2 CUDA devices") */
    /* Why the type cannot be used when the build has no runtime for it (load NULL): "this
     * build has no CUDA backend (configured with TGC_WITH_CUDA=OFF or ...)". */
    const char *missing;
    /* Opens the type's driver once per process, counts its devices and registers its
     * allocator; later calls return the first call's status and set its error again
     * (TGC_ERR_DEVICE: what is missing, "libcuda.so.1 could not be opened ..."). NULL: the
     * build has no runtime for the type, and every other member is NULL too. */
    tgc_status (*load)(void);
    /* The members below are set whenever load is; count may be asked before load (0 until
     * it succeeded, and it does not load), the others only after load succeeded. */
    int (*count)(void); /* devices present */
    /* Waits for the work queued on the calling thread's current stream for device index. */
    tgc_status (*synchronize)(int index);
    /* Sets the calling thread's stream for device index (NULL: its own one) / returns it
     * (its own one made on first use; NULL with the error set on failure). */
    tgc_status (*set_stream)(int index, void *stream);
    void *(*current_stream)(int index);
    const char *(*device_name)(int index); /* "NVIDIA H200" */
    /* The driver's free and total bytes of device index. */
    tgc_status (*mem_info)(int index, size_t *free_bytes, size_t *total_bytes);
    const tgc_device_stream_ops *streams;
} tgc_device_ops;

/* Registers what type is (replacing an earlier registration; ops must stay valid while
 * registered). TGC_ERR_INVALID_ARG (error set) for the host's type, one outside the slots,
 * or ops without a name. Registration is a release store, lookup an acquire load: a backend
 * may register from any thread, before the first use of the type. */
tgc_status tgc_device_ops_register(tgc_device_type type, const tgc_device_ops *ops);
/* Removes type's registration (tests). */
void tgc_device_ops_unregister(tgc_device_type type);
/* What type registered; NULL for the host, an unknown type, or one nothing registered. */
const tgc_device_ops *tgc_device_ops_of(tgc_device_type type);

/* "cpu" for the host, the registered name of another type ("cuda", also in a build without
 * its backend) whether or not an allocator is registered; NULL for an unknown type. */
const char *tgc_device_type_name(tgc_device_type type);
/* "cpu", "cuda:1", or "device type 7 index 0" for an unknown type, into buf; returns buf. */
char *tgc_format_device(tgc_device dev, char *buf, size_t n);
static inline int tgc_device_equal(tgc_device a, tgc_device b)
{
    return a.type == b.type && a.index == b.index;
}

#endif
