/* The host allocator (runtime/alloc.h, registered for TGC_DEVICE_CPU): aligned host
 * memory, with a cache of large blocks.
 *
 * Large buffers come from mmap in glibc, and a fresh mapping pays a page fault per 4 KiB on
 * first touch: a 256 MiB tensor costs more to fault in than to fill. So freed blocks of
 * 1 MiB and more are kept (up to TGC_STORAGE_CACHE_BYTES, 2 GiB by default, oldest dropped
 * first) and handed out again for requests they fit without wasting more than half. The
 * cache is process-wide and locked; small blocks go straight to malloc.
 *
 * Statistics: bytes in live blocks and their peak are two relaxed atomics updated on every
 * block (no lock: the small-block path takes none); cached bytes are read under the lock.
 *
 * The host program may supply the memory itself (tgc_set_host_allocator, tgc/tensor.h):
 * every block then comes from its alloc and goes back to its free, with no cache in between
 * (its allocator decides what to keep), while no block is alive when it is set. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/sysinfo.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "support/error.h"

#define CACHE_MIN   ((size_t)1 << 20)
#define CACHE_SLOTS 64

typedef struct cached {
    void *data;
    size_t cap;
} cached;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cached g_cache[CACHE_SLOTS];
static int g_n;
static size_t g_bytes;
static pthread_once_t g_limit_once = PTHREAD_ONCE_INIT;
static size_t g_limit; /* written once under g_limit_once: threads free blocks concurrently */
static atomic_size_t g_in_use, g_peak;
static atomic_size_t g_live_blocks; /* blocks handed out and not yet freed */

/* The host program's allocator, when set. Written only while no block is alive (checked,
 * and the contract says no other thread allocates meanwhile); read on every block. */
static _Atomic(tgc_host_alloc_fn) g_user_alloc;
static _Atomic(tgc_host_free_fn) g_user_free;
static _Atomic(void *) g_user_data;

static void read_limit(void)
{
    const char *e = getenv("TGC_STORAGE_CACHE_BYTES");
    char *end;
    unsigned long long v = e ? strtoull(e, &end, 10) : 0;
    g_limit = e && *e && !*end ? (size_t)v : ((size_t)2 << 30);
}

/* No single block larger than the machine's RAM and swap together: a kernel that
 * overcommits (vm.overcommit_memory = 1) promises any size and kills the process once the
 * pages are written, where the caller was owed TGC_ERR_OOM. Read once; 0: unknown, no bound. */
static pthread_once_t g_ram_once = PTHREAD_ONCE_INIT;
static size_t g_ram_bound;

static void read_ram(void)
{
    struct sysinfo si;
    if (sysinfo(&si) != 0 || si.mem_unit == 0)
        return;
    unsigned long long units = (unsigned long long)si.totalram + si.totalswap;
    unsigned long long bytes = units * si.mem_unit;
    g_ram_bound = bytes / si.mem_unit == units && bytes <= SIZE_MAX ? (size_t)bytes : 0;
}

static int beyond_ram(size_t nbytes)
{
    pthread_once(&g_ram_once, read_ram);
    return g_ram_bound && nbytes > g_ram_bound;
}

static size_t cache_limit(void)
{
    pthread_once(&g_limit_once, read_limit);
    return g_limit;
}

/* A cached block of at least cap bytes and at most twice that; NULL if none. */
static void *cache_take(size_t cap, size_t *got)
{
    void *p = NULL;
    pthread_mutex_lock(&g_lock);
    int best = -1;
    for (int i = 0; i < g_n; i++)
        if (g_cache[i].cap >= cap && g_cache[i].cap / 2 <= cap &&
            (best < 0 || g_cache[i].cap < g_cache[best].cap))
            best = i;
    if (best >= 0) {
        p = g_cache[best].data;
        *got = g_cache[best].cap;
        g_bytes -= g_cache[best].cap;
        g_cache[best] = g_cache[--g_n];
    }
    pthread_mutex_unlock(&g_lock);
    return p;
}

static void cache_put(void *data, size_t cap)
{
    size_t limit = cache_limit();
    pthread_mutex_lock(&g_lock);
    while (g_n > 0 && (g_n == CACHE_SLOTS || g_bytes + cap > limit)) {
        g_bytes -= g_cache[0].cap; /* oldest first */
        free(g_cache[0].data);
        for (int i = 1; i < g_n; i++)
            g_cache[i - 1] = g_cache[i];
        g_n--;
    }
    if (cap <= limit) {
        g_cache[g_n++] = (cached){data, cap};
        g_bytes += cap;
        data = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    free(data);
}

static void host_empty_cache(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++)
        free(g_cache[i].data);
    g_n = 0;
    g_bytes = 0;
    pthread_mutex_unlock(&g_lock);
}

/* The cache goes back to the system at exit (leak checkers). */
__attribute__((destructor)) static void cache_release(void)
{
    host_empty_cache(NULL);
}

static void note_alloc(size_t cap)
{
    size_t now = atomic_fetch_add_explicit(&g_in_use, cap, memory_order_relaxed) + cap;
    size_t peak = atomic_load_explicit(&g_peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(
                             &g_peak, &peak, now, memory_order_relaxed, memory_order_relaxed))
        ;
}

static tgc_block host_alloc(void *ctx, int index, size_t nbytes)
{
    (void)ctx;
    (void)index;
    /* 64-byte alignment suits every vector width; round up as aligned_alloc requires. */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (!rounded)
        rounded = 64;
    if (rounded < nbytes) /* nbytes within 63 of SIZE_MAX */
        return (tgc_block){NULL, 0};
    size_t cap = rounded;
    void *p = NULL;
    tgc_host_alloc_fn ua = atomic_load_explicit(&g_user_alloc, memory_order_acquire);
    if (ua) {
        p = ua(rounded, 64, atomic_load_explicit(&g_user_data, memory_order_relaxed));
        if (((uintptr_t)p & 63) != 0) { /* misaligned: kernels would fault; say out of memory */
            atomic_load_explicit(&g_user_free, memory_order_relaxed)(
                p, rounded, atomic_load_explicit(&g_user_data, memory_order_relaxed));
            p = NULL;
        }
    } else if (!beyond_ram(rounded)) {
        p = rounded >= CACHE_MIN ? cache_take(rounded, &cap) : NULL;
        if (!p)
            p = aligned_alloc(64, rounded);
    }
    if (!p)
        return (tgc_block){NULL, 0};
    atomic_fetch_add_explicit(&g_live_blocks, 1, memory_order_relaxed);
    note_alloc(cap);
    return (tgc_block){p, cap};
}

static void host_free(void *ctx, int index, tgc_block b)
{
    (void)ctx;
    (void)index;
    atomic_fetch_sub_explicit(&g_in_use, b.cap, memory_order_relaxed);
    atomic_fetch_sub_explicit(&g_live_blocks, 1, memory_order_relaxed);
    tgc_host_free_fn uf = atomic_load_explicit(&g_user_free, memory_order_acquire);
    if (uf)
        uf(b.ptr, b.cap, atomic_load_explicit(&g_user_data, memory_order_relaxed));
    else if (b.cap >= CACHE_MIN)
        cache_put(b.ptr, b.cap);
    else
        free(b.ptr);
}

static tgc_status host_copy(void *ctx, void *dst, tgc_device dst_dev, const void *src,
                            tgc_device src_dev, size_t nbytes)
{
    (void)ctx;
    (void)dst_dev;
    (void)src_dev;
    if (nbytes)
        memcpy(dst, src, nbytes);
    return TGC_OK;
}

static tgc_mem_stats host_stats(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    tgc_mem_stats m = {atomic_load_explicit(&g_in_use, memory_order_relaxed), 0,
                       atomic_load_explicit(&g_peak, memory_order_relaxed)};
    pthread_mutex_lock(&g_lock);
    m.cached = g_bytes;
    pthread_mutex_unlock(&g_lock);
    return m;
}

static void host_reset_peak(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    atomic_store_explicit(&g_peak, atomic_load_explicit(&g_in_use, memory_order_relaxed),
                          memory_order_relaxed);
}

tgc_status tgc_set_host_allocator(tgc_host_alloc_fn alloc, tgc_host_free_fn free_fn, void *user)
{
    if (!alloc != !free_fn)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_set_host_allocator: alloc is %s but free is %s; pass both, or "
                             "both NULL for the library's own allocator",
                             alloc ? "set" : "NULL", free_fn ? "set" : "NULL");
    size_t live = atomic_load_explicit(&g_live_blocks, memory_order_relaxed);
    if (live)
        return tgc_set_error(
            TGC_ERR_INVALID_ARG,
            "tgc_set_host_allocator: %zu host buffers (%zu bytes) are still alive; set the "
            "allocator before the first tensor is made, or once every tensor, module, "
            "optimizer and compiled function is freed",
            live, atomic_load_explicit(&g_in_use, memory_order_relaxed));
    host_empty_cache(NULL); /* blocks of the built-in cache would never reach the new free */
    atomic_store_explicit(&g_user_data, alloc ? user : NULL, memory_order_relaxed);
    atomic_store_explicit(&g_user_free, free_fn, memory_order_release);
    atomic_store_explicit(&g_user_alloc, alloc, memory_order_release);
    return TGC_OK;
}

const tgc_allocator tgc_host_allocator = {
    .name = "cpu",
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .stats = host_stats,
    .reset_peak = host_reset_peak,
    .empty_cache = host_empty_cache,
};
