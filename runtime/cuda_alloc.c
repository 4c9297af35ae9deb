/* The caching CUDA device allocator (a tgc_allocator, runtime/alloc.h) and its copies between
 * the host and devices, above the driver layer (runtime/cuda.c); and tgc_cuda_load, which
 * loads the driver, sets up the allocator's pools and registers it for TGC_DEVICE_CUDA.
 *
 * Size classes: a request is rounded up to a class and blocks are only reused for requests
 * of exactly their class (no splitting): up to 1 MiB, multiples of 512 B; up to 64 MiB,
 * multiples of 2 MiB; above, eight classes per power of two (2^k + j * 2^(k-3)), so at most
 * 12.5% is wasted. The driver's own sub-allocator serves the small classes.
 *
 * Stream-ordered reuse: a block remembers the stream that was the thread's current one for
 * the device when it was allocated (tgc_cuda_stream). A freed block goes to the cache under
 * that stream and is handed out again only to allocations on the same stream: work that used
 * the block was queued on that stream before anything the next owner queues, so no event is
 * needed. Blocks are not shared between streams (a block used on another stream than its
 * allocation's needs the caller's synchronization, as with PyTorch's record_stream). When a
 * thread's own stream is destroyed at thread exit (after it was synchronized) its blocks are
 * re-keyed to "any stream": the first allocation of their class on any stream takes them.
 *
 * Out of memory: when cuMemAlloc fails, the device is synchronized, every cached block of the
 * device is released and the allocation is tried once more; if that fails too, alloc returns
 * {NULL, 0} and alloc_failure tells the bytes asked and the device's free and total memory.
 * During stream capture (cuStreamIsCapturing on the thread's stream) a cache miss does not
 * call cuMemAlloc: it fails, and alloc_failure says so (allocate before capturing), unless a
 * capture pool is open on that stream.
 *
 * Capture pools (tgc_cuda_pool_*, the contract is in runtime/cuda.h): a pool is open on one
 * (device, stream) from begin to end, and the blocks allocated on that stream meanwhile are
 * its own for its life: each block record points to its pool, so a free puts it on the pool's
 * free list (by class) instead of the general cache in O(1). An open pool serves its own free
 * blocks first, then takes blocks of the general cache into its ownership, then calls
 * cuMemAlloc (in relaxed capture interaction mode). A general block of the pool's stream
 * freed while the pool is open becomes the pool's too (captured kernels may have used it).
 * Release hands the free blocks to the
 * general cache and unhooks the live ones (a scan of the live table), which then go there
 * when freed. While a pool of a device is open, nothing here synchronizes that device (the
 * out-of-memory retry and empty_cache leave it alone): a synchronization would invalidate
 * the capture.
 *
 * Copies (synchronous by contract): host <-> device through pinned staging buffers (two of
 * 4 MiB per user, cuMemHostAlloc, double-buffered with async copies and events on the thread's
 * stream, so pageable memory is not the bottleneck; host memory the driver has page-locked is
 * copied directly); device <-> device on the source's
 * thread stream (cuMemcpyPeerAsync across devices, after the destination device's thread
 * stream was synchronized). Each copy is queued on the thread's stream, so it runs after the
 * work this thread queued there, and the stream is synchronized before returning. Staging
 * buffers are kept per device in a free list (one per concurrent copier) until exit.
 *
 * Thread-safety: one mutex per device guards its pools and statistics; the driver calls run
 * outside it. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/cuda.h"
#include "support/error.h"

#define SMALL_MAX ((size_t)1 << 20)
#define MID_MAX   ((size_t)64 << 20)
#define MID_STEP  ((size_t)2 << 20)
#define BUCKETS   1024
#define CHUNK     ((size_t)4 << 20)

typedef struct blk {
    CUdeviceptr ptr;
    size_t cap;
    CUstream stream;     /* allocation stream; NULL: any */
    tgc_cuda_pool *pool; /* the capture pool that owns it; NULL: the general cache's */
    struct blk *next;
} blk;

#define POOL_BUCKETS 64

struct tgc_cuda_pool {
    int dev;
    CUstream stream; /* allocations on it join while open; NULL once the stream is gone */
    int open;
    size_t owned, free_bytes;   /* bytes of its blocks, and of those free now */
    size_t n_live;              /* its blocks that are live */
    blk *free_[POOL_BUCKETS];   /* its free blocks, by cap */
    struct tgc_cuda_pool *next; /* the device's pools not yet released */
};

typedef struct staging {
    void *host[2];
    CUevent ev[2];
    struct staging *next;
} staging;

typedef struct pool {
    pthread_mutex_t mu;
    blk *cached[BUCKETS];              /* by (stream, cap) */
    blk *live[BUCKETS];                /* by ptr */
    size_t in_use, cached_bytes, peak; /* cached_bytes counts the pools' free blocks */
    staging *stage;                    /* free staging pairs */
    tgc_cuda_pool *pools;              /* not yet released */
    int n_open;                        /* of those, open (a capture under way) */
} pool;

static pool *g_pools;
static int g_n;

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
static void stream_gone(int dev, CUstream s);

/* Once, after the driver loaded: a pool per device, and the driver layer's stream-gone hook. */
static void init_pools(void)
{
    int count = tgc_cuda_count();
    g_pools = calloc((size_t)(count ? count : 1), sizeof *g_pools);
    if (!g_pools)
        return; /* every allocation then fails with a message */
    for (int i = 0; i < count; i++)
        pthread_mutex_init(&g_pools[i].mu, NULL);
    g_n = count;
    tgc_cuda_set_stream_gone_hook(stream_gone);
}

static size_t size_class(size_t n)
{
    if (n == 0)
        n = 1;
    if (n <= SMALL_MAX)
        return (n + 511) & ~(size_t)511;
    if (n <= MID_MAX)
        return (n + MID_STEP - 1) & ~(MID_STEP - 1);
    if (n > SIZE_MAX / 2)
        return 0; /* no device holds this */
    size_t p = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n));
    size_t step = p / 8;
    return (n + step - 1) & ~(step - 1);
}

static unsigned hash_key(CUstream s, size_t cap)
{
    uint64_t h =
        (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull ^ (uint64_t)cap * 0xC2B2AE3D27D4EB4Full;
    return (unsigned)(h >> 40) % BUCKETS;
}

static unsigned hash_ptr(CUdeviceptr p)
{
    return (unsigned)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> 40) % BUCKETS;
}

/* Takes a cached block of class cap for stream s (or of no stream); NULL if none. Locked. */
static blk *take_cached(pool *p, CUstream s, size_t cap)
{
    for (int pass = 0; pass < 2; pass++) {
        CUstream want = pass ? NULL : s;
        blk **pp = &p->cached[hash_key(want, cap)];
        for (; *pp; pp = &(*pp)->next)
            if ((*pp)->cap == cap && (*pp)->stream == want) {
                blk *b = *pp;
                *pp = b->next;
                p->cached_bytes -= cap;
                b->stream = s;
                return b;
            }
        if (!s)
            break;
    }
    return NULL;
}

static void put_live(pool *p, blk *b)
{
    unsigned h = hash_ptr(b->ptr);
    b->next = p->live[h];
    p->live[h] = b;
    p->in_use += b->cap;
    if (p->in_use > p->peak)
        p->peak = p->in_use;
}

static unsigned hash_cap(size_t cap)
{
    return (unsigned)(((uint64_t)cap * 0x9E3779B97F4A7C15ull) >> 58) % POOL_BUCKETS;
}

/* The open pool of stream s, NULL if none. Locked. */
static tgc_cuda_pool *open_pool(pool *p, CUstream s)
{
    if (!p->n_open)
        return NULL;
    for (tgc_cuda_pool *q = p->pools; q; q = q->next)
        if (q->open && q->stream == s)
            return q;
    return NULL;
}

/* A free block of class cap of pool q, NULL if none. Locked. */
static blk *pool_take(pool *p, tgc_cuda_pool *q, size_t cap)
{
    for (blk **pp = &q->free_[hash_cap(cap)]; *pp; pp = &(*pp)->next)
        if ((*pp)->cap == cap) {
            blk *b = *pp;
            *pp = b->next;
            q->free_bytes -= cap;
            q->n_live++;
            p->cached_bytes -= cap;
            return b;
        }
    return NULL;
}

/* Makes the (live) block b pool q's. Locked. */
static void pool_adopt(tgc_cuda_pool *q, blk *b)
{
    b->pool = q;
    q->owned += b->cap;
    q->n_live++;
}

/* Every cached block of p, unlinked (locked). The pools' free blocks stay theirs. */
static blk *drain(pool *p)
{
    blk *all = NULL;
    for (int h = 0; h < BUCKETS; h++)
        while (p->cached[h]) {
            blk *b = p->cached[h];
            p->cached[h] = b->next;
            p->cached_bytes -= b->cap;
            b->next = all;
            all = b;
        }
    return all;
}

/* Synchronizes device dev and frees the blocks of the list (its context current). */
static void release(int dev, blk *list)
{
    if (!list)
        return;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    if (tgc_cuda_enter(dev) == TGC_OK)
        d->cuCtxSynchronize();
    while (list) {
        blk *b = list;
        list = b->next;
        d->cuMemFree(b->ptr);
        free(b);
    }
}

/* Why this thread's last failed alloc failed (alloc_failure reads it). */
static _Thread_local tgc_status tls_fail_status;
static _Thread_local char tls_fail[512];

static tgc_block fail_with(tgc_status s, const char *fmt, ...) TGC_PRINTF(2, 3);
static tgc_block fail_with(tgc_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_fail, sizeof tls_fail, fmt, ap);
    va_end(ap);
    tls_fail_status = s;
    return (tgc_block){NULL, 0};
}

static tgc_block cuda_alloc(void *ctx, int index, size_t nbytes)
{
    (void)ctx;
    char a[32], f[32], t[32];
    if (index < 0 || index >= g_n)
        return fail_with(TGC_ERR_DEVICE, "cuda:%d is not a device of this machine (%d present)",
                         index, g_n);
    size_t cap = size_class(nbytes);
    if (!cap)
        return fail_with(TGC_ERR_OOM, "asked for %s (%zu bytes), more than any device holds",
                         tgc_cuda_format_bytes(nbytes, a, sizeof a), nbytes);
    CUstream s = tgc_cuda_stream(index); /* also makes the device's context current */
    if (!s)
        return fail_with(tgc_last_status(), "%s", tgc_last_error());
    pool *p = &g_pools[index];
    pthread_mutex_lock(&p->mu);
    tgc_cuda_pool *q = open_pool(p, s);
    blk *b = q ? pool_take(p, q, cap) : NULL;
    if (!b) {
        b = take_cached(p, s, cap);
        if (b && q)
            pool_adopt(q, b);
    }
    if (b)
        put_live(p, b);
    pthread_mutex_unlock(&p->mu);
    if (b)
        return (tgc_block){(void *)(uintptr_t)b->ptr, cap};

    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    int capturing =
        d->cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
    if (capturing && !q)
        return fail_with(TGC_ERR_RUNTIME,
                         "asked for %s while the stream is being captured into a CUDA graph and "
                         "no cached block of that size is free for it: memory cannot be "
                         "allocated during capture (allocate before capture begins)",
                         tgc_cuda_format_bytes(cap, a, sizeof a));
    b = malloc(sizeof *b);
    if (!b)
        return fail_with(TGC_ERR_OOM, "out of host memory for a block record");
    CUdeviceptr ptr = 0;
    /* the pool's capture: cuMemAlloc (not captured) is allowed in relaxed interaction mode,
     * whatever mode the capture began with; the thread's mode is restored on every exit */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    int relaxed = capturing && d->cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    CUresult r = d->cuMemAlloc(&ptr, cap);
    const tgc_cuda_props *pr = tgc_cuda_props_of(index);
    /* a size beyond the device may be refused as an invalid value: out of memory too */
#define OOM_(r)                                                                                    \
    ((r) == CUDA_ERROR_OUT_OF_MEMORY ||                                                            \
     ((r) == CUDA_ERROR_INVALID_VALUE && pr && cap > pr->total_mem))
    int retried = 0, held = 0;
    if (OOM_(r)) {
        pthread_mutex_lock(&p->mu);
        held = p->n_open > 0; /* a capture is under way: no synchronization */
        blk *all = held ? NULL : drain(p);
        pthread_mutex_unlock(&p->mu);
        if (!held) {
            release(index, all);
            retried = 1;
            r = d->cuMemAlloc(&ptr, cap);
        }
    }
    if (r != CUDA_SUCCESS) {
        free(b);
        size_t fr = 0, tot = 0;
        int oom = OOM_(r);
        if (oom)
            d->cuMemGetInfo(&fr, &tot);
        if (relaxed)
            d->cuThreadExchangeStreamCaptureMode(&mode);
        if (oom) {
            return fail_with(TGC_ERR_OOM, "asked for %s (%zu bytes), %s free of %s%s",
                             tgc_cuda_format_bytes(nbytes, a, sizeof a), nbytes,
                             tgc_cuda_format_bytes(fr, f, sizeof f),
                             tgc_cuda_format_bytes(tot, t, sizeof t),
                             retried ? " (the cache was emptied and the allocation retried)"
                             : held  ? " (the cache was not emptied: a CUDA graph capture is "
                                       "under way on the device)"
                                     : "");
        }
        char why[256];
        return fail_with(TGC_ERR_RUNTIME, "asked for %s (%zu bytes): cuMemAlloc failed: %s",
                         tgc_cuda_format_bytes(nbytes, a, sizeof a), nbytes,
                         tgc_cuda_describe(r, why, sizeof why));
    }
#undef OOM_
    if (relaxed)
        d->cuThreadExchangeStreamCaptureMode(&mode);
    b->ptr = ptr;
    b->cap = cap;
    b->stream = s;
    b->pool = NULL;
    pthread_mutex_lock(&p->mu);
    if (q) { /* still listed? (end and release must not race with its allocations) */
        tgc_cuda_pool *x = p->pools;
        while (x && x != q)
            x = x->next;
        if (x)
            pool_adopt(q, b);
    }
    put_live(p, b);
    pthread_mutex_unlock(&p->mu);
    return (tgc_block){(void *)(uintptr_t)ptr, cap};
}

static tgc_status cuda_alloc_failure(void *ctx, int index, size_t nbytes, char *buf, size_t n)
{
    (void)ctx;
    (void)index;
    (void)nbytes;
    snprintf(buf, n, "%s", tls_fail);
    return tls_fail_status ? tls_fail_status : TGC_ERR_OOM;
}

static void cuda_free(void *ctx, int index, tgc_block b)
{
    (void)ctx;
    if (!b.ptr || index < 0 || index >= g_n)
        return;
    CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)b.ptr;
    pool *p = &g_pools[index];
    pthread_mutex_lock(&p->mu);
    blk **pp = &p->live[hash_ptr(ptr)];
    while (*pp && (*pp)->ptr != ptr)
        pp = &(*pp)->next;
    blk *k = *pp;
    if (k) {
        *pp = k->next;
        p->in_use -= k->cap;
        p->cached_bytes += k->cap;
        tgc_cuda_pool *q = k->pool;
        if (!q && (q = open_pool(p, k->stream))) {
            /* live when the capture began: captured kernels may use it, so the pool keeps it */
            k->pool = q;
            q->owned += k->cap;
            q->n_live++;
        }
        if (q) { /* the pool's for its life */
            unsigned h = hash_cap(k->cap);
            k->next = q->free_[h];
            q->free_[h] = k;
            q->free_bytes += k->cap;
            q->n_live--;
        } else {
            unsigned h = hash_key(k->stream, k->cap);
            k->next = p->cached[h];
            p->cached[h] = k;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

/* A thread's own stream of dev is about to be destroyed (at thread exit, after it was
 * synchronized): its cached and live blocks are no longer tied to it. */
static void stream_gone(int dev, CUstream s)
{
    if (dev < 0 || dev >= g_n || !s)
        return;
    pool *p = &g_pools[dev];
    pthread_mutex_lock(&p->mu);
    for (int h = 0; h < BUCKETS; h++)
        for (blk *b = p->live[h]; b; b = b->next)
            if (b->stream == s)
                b->stream = NULL;
    /* cached blocks move to the buckets of "any stream" */
    blk *moved = NULL;
    for (int h = 0; h < BUCKETS; h++) {
        blk **pp = &p->cached[h];
        while (*pp) {
            if ((*pp)->stream == s) {
                blk *b = *pp;
                *pp = b->next;
                b->stream = NULL;
                b->next = moved;
                moved = b;
            } else {
                pp = &(*pp)->next;
            }
        }
    }
    while (moved) {
        blk *b = moved;
        moved = b->next;
        unsigned h = hash_key(NULL, b->cap);
        b->next = p->cached[h];
        p->cached[h] = b;
    }
    /* the pools' free blocks go to "any stream" when released; a pool of s takes no more */
    for (tgc_cuda_pool *q = p->pools; q; q = q->next) {
        if (q->stream == s)
            q->stream = NULL;
        for (int h = 0; h < POOL_BUCKETS; h++)
            for (blk *b = q->free_[h]; b; b = b->next)
                if (b->stream == s)
                    b->stream = NULL;
    }
    pthread_mutex_unlock(&p->mu);
}

/* ---- capture pools ---- */

tgc_cuda_pool *tgc_cuda_pool_begin(int dev, CUstream s)
{
    if (tgc_error_prefix(tgc_cuda_load(), "tgc_cuda_pool_begin") != TGC_OK)
        return NULL; /* the pools exist once CUDA is loaded */
    if (dev < 0 || dev >= g_n) {
        tgc_set_error(TGC_ERR_DEVICE,
                      "tgc_cuda_pool_begin: cuda:%d is not a device of this machine (%d present)",
                      dev, g_n);
        return NULL;
    }
    if (!s) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_pool_begin: the stream is NULL (a pool "
                                           "collects the allocations made on the capturing "
                                           "stream: pass that stream)");
        return NULL;
    }
    tgc_cuda_pool *q = calloc(1, sizeof *q);
    if (!q) {
        tgc_set_error(TGC_ERR_OOM, "tgc_cuda_pool_begin: out of host memory for a pool");
        return NULL;
    }
    q->dev = dev;
    q->stream = s;
    q->open = 1;
    pool *p = &g_pools[dev];
    pthread_mutex_lock(&p->mu);
    int dup = open_pool(p, s) != NULL;
    if (!dup) {
        q->next = p->pools;
        p->pools = q;
        p->n_open++;
    }
    pthread_mutex_unlock(&p->mu);
    if (dup) {
        free(q);
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_cuda_pool_begin: a pool is already open on this stream of cuda:%d "
                      "(end it before beginning another)",
                      dev);
        return NULL;
    }
    return q;
}

void tgc_cuda_pool_end(tgc_cuda_pool *q)
{
    if (!q)
        return;
    pool *p = &g_pools[q->dev];
    pthread_mutex_lock(&p->mu);
    if (q->open) {
        q->open = 0;
        p->n_open--;
    }
    pthread_mutex_unlock(&p->mu);
}

void tgc_cuda_pool_release(tgc_cuda_pool *q)
{
    if (!q)
        return;
    pool *p = &g_pools[q->dev];
    pthread_mutex_lock(&p->mu);
    if (q->open) {
        q->open = 0;
        p->n_open--;
    }
    for (tgc_cuda_pool **pp = &p->pools; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    /* free blocks to the general cache (already counted as cached) */
    for (int h = 0; h < POOL_BUCKETS; h++)
        while (q->free_[h]) {
            blk *b = q->free_[h];
            q->free_[h] = b->next;
            b->pool = NULL;
            unsigned k = hash_key(b->stream, b->cap);
            b->next = p->cached[k];
            p->cached[k] = b;
        }
    /* live ones go there when freed */
    for (int h = 0; q->n_live && h < BUCKETS; h++)
        for (blk *b = p->live[h]; b; b = b->next)
            if (b->pool == q) {
                b->pool = NULL;
                q->n_live--;
            }
    pthread_mutex_unlock(&p->mu);
    free(q);
}

void tgc_cuda_pool_stats(tgc_cuda_pool *q, size_t *owned_bytes, size_t *free_bytes)
{
    size_t o = 0, f = 0;
    if (q) {
        pool *p = &g_pools[q->dev];
        pthread_mutex_lock(&p->mu);
        o = q->owned;
        f = q->free_bytes;
        pthread_mutex_unlock(&p->mu);
    }
    if (owned_bytes)
        *owned_bytes = o;
    if (free_bytes)
        *free_bytes = f;
}

static void cuda_empty_cache(void *ctx)
{
    (void)ctx;
    for (int i = 0; i < g_n; i++) {
        pthread_mutex_lock(&g_pools[i].mu);
        /* a capture under way on the device: synchronizing would invalidate it */
        blk *all = g_pools[i].n_open ? NULL : drain(&g_pools[i]);
        pthread_mutex_unlock(&g_pools[i].mu);
        release(i, all);
    }
}

static tgc_mem_stats cuda_stats(void *ctx, int index)
{
    (void)ctx;
    tgc_mem_stats m = {0, 0, 0};
    if (index < 0 || index >= g_n)
        return m;
    pool *p = &g_pools[index];
    pthread_mutex_lock(&p->mu);
    m = (tgc_mem_stats){p->in_use, p->cached_bytes, p->peak};
    pthread_mutex_unlock(&p->mu);
    return m;
}

static void cuda_reset_peak(void *ctx, int index)
{
    (void)ctx;
    if (index < 0 || index >= g_n)
        return;
    pool *p = &g_pools[index];
    pthread_mutex_lock(&p->mu);
    p->peak = p->in_use;
    pthread_mutex_unlock(&p->mu);
}

static int cuda_device_count(void *ctx)
{
    (void)ctx;
    return g_n;
}

static tgc_status cuda_synchronize(void *ctx, int index)
{
    (void)ctx;
    return tgc_cuda_sync(index);
}

/* ---- copies ---- */

/* A staging pair of device dev (its context current), from the free list or new; NULL
 * when pinned memory cannot be had (the caller copies without staging). */
static staging *stage_get(int dev)
{
    pool *p = &g_pools[dev];
    pthread_mutex_lock(&p->mu);
    staging *s = p->stage;
    if (s)
        p->stage = s->next;
    pthread_mutex_unlock(&p->mu);
    if (s)
        return s;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    for (int k = 0; k < 2; k++) {
        if (d->cuMemHostAlloc(&s->host[k], CHUNK, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
            d->cuEventCreate(&s->ev[k], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
            for (int j = 0; j <= k; j++) {
                if (s->host[j])
                    d->cuMemFreeHost(s->host[j]);
                if (s->ev[j])
                    d->cuEventDestroy(s->ev[j]);
            }
            free(s);
            return NULL;
        }
    }
    return s;
}

static void stage_put(int dev, staging *s)
{
    pool *p = &g_pools[dev];
    pthread_mutex_lock(&p->mu);
    s->next = p->stage;
    p->stage = s;
    pthread_mutex_unlock(&p->mu);
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

#define TRY(call, what)                                                                            \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            snprintf(w, sizeof w, "%s (cuda:%d)", what, dev);                                      \
            st = tgc_cuda_error(r_, w);                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* 1 when host memory p is page-locked by the driver (cuMemHostAlloc, cuMemHostRegister): then
 * the DMA reads it directly and staging would only add a host copy. Asked only for copies
 * large enough to repay the query, through cuPointerGetAttributes, which answers "no type"
 * for memory the driver does not know instead of failing (cuPointerGetAttribute's
 * CUDA_ERROR_INVALID_VALUE is an API error compute-sanitizer reports). */
static int pinned(const void *p, size_t n)
{
    if (n < ((size_t)256 << 10))
        return 0;
    unsigned type = 0;
    CUpointer_attribute a = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data[1] = {&type};
    return tgc_cuda_drv()->cuPointerGetAttributes(1, &a, data, (CUdeviceptr)(uintptr_t)p) ==
               CUDA_SUCCESS &&
           type == CU_MEMORYTYPE_HOST;
}

static tgc_status copy_h2d(int dev, CUdeviceptr dst, const char *src, size_t n)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstream s = tgc_cuda_stream(dev);
    if (!s)
        return tgc_last_status();
    char w[96];
    tgc_status st = TGC_OK;
    staging *sg = NULL;
    if (pinned(src, n)) {
        TRY(d->cuMemcpyHtoDAsync(dst, src, n, s), "cuMemcpyHtoDAsync");
        TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
        return TGC_OK;
    }
    sg = stage_get(dev);
    if (!sg) { /* no pinned memory: a synchronous copy after the stream's work */
        TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
        TRY(d->cuMemcpyHtoD(dst, src, n), "cuMemcpyHtoD");
        return TGC_OK;
    }
    for (size_t off = 0, i = 0; off < n; off += CHUNK, i++) {
        int k = (int)(i & 1);
        size_t len = min_sz(CHUNK, n - off);
        if (i >= 2)
            TRY(d->cuEventSynchronize(sg->ev[k]), "cuEventSynchronize");
        memcpy(sg->host[k], src + off, len);
        TRY(d->cuMemcpyHtoDAsync(dst + off, sg->host[k], len, s), "cuMemcpyHtoDAsync");
        TRY(d->cuEventRecord(sg->ev[k], s), "cuEventRecord");
    }
out:
    if (sg) {
        /* the staging buffers are free again only when the stream has read them */
        CUresult r = d->cuStreamSynchronize(s);
        if (st == TGC_OK && r != CUDA_SUCCESS) {
            snprintf(w, sizeof w, "cuStreamSynchronize (cuda:%d)", dev);
            st = tgc_cuda_error(r, w);
        }
        stage_put(dev, sg);
    }
    return st;
}

static tgc_status copy_d2h(int dev, char *dst, CUdeviceptr src, size_t n)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstream s = tgc_cuda_stream(dev);
    if (!s)
        return tgc_last_status();
    char w[96];
    tgc_status st = TGC_OK;
    staging *sg = NULL;
    if (pinned(dst, n)) {
        TRY(d->cuMemcpyDtoHAsync(dst, src, n, s), "cuMemcpyDtoHAsync");
        TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
        return TGC_OK;
    }
    sg = stage_get(dev);
    if (!sg) {
        TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
        TRY(d->cuMemcpyDtoH(dst, src, n), "cuMemcpyDtoH");
        return TGC_OK;
    }
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    for (size_t i = 0; i < chunks && i < 2; i++) {
        size_t off = i * CHUNK;
        TRY(d->cuMemcpyDtoHAsync(sg->host[i], src + off, min_sz(CHUNK, n - off), s),
            "cuMemcpyDtoHAsync");
        TRY(d->cuEventRecord(sg->ev[i], s), "cuEventRecord");
    }
    for (size_t i = 0; i < chunks; i++) {
        int k = (int)(i & 1);
        size_t off = i * CHUNK;
        TRY(d->cuEventSynchronize(sg->ev[k]), "cuEventSynchronize");
        memcpy(dst + off, sg->host[k], min_sz(CHUNK, n - off));
        if (i + 2 < chunks) {
            size_t o2 = (i + 2) * CHUNK;
            TRY(d->cuMemcpyDtoHAsync(sg->host[k], src + o2, min_sz(CHUNK, n - o2), s),
                "cuMemcpyDtoHAsync");
            TRY(d->cuEventRecord(sg->ev[k], s), "cuEventRecord");
        }
    }
out:
    if (sg) {
        CUresult r = d->cuStreamSynchronize(s);
        if (st == TGC_OK && r != CUDA_SUCCESS) {
            snprintf(w, sizeof w, "cuStreamSynchronize (cuda:%d)", dev);
            st = tgc_cuda_error(r, w);
        }
        stage_put(dev, sg);
    }
    return st;
}

static tgc_status copy_d2d(int ddev, CUdeviceptr dst, int sdev, CUdeviceptr src, size_t n)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    char w[96];
    tgc_status st = TGC_OK;
    int dev = sdev;
    if (ddev != sdev) {
        /* the destination device's queued work (on this thread's stream) comes first */
        if ((st = tgc_cuda_sync(ddev)) != TGC_OK)
            return st;
        CUcontext dc = tgc_cuda_context(ddev), sc = tgc_cuda_context(sdev);
        if (!dc || !sc)
            return tgc_last_status();
        CUstream s = tgc_cuda_stream(sdev);
        if (!s)
            return tgc_last_status();
        TRY(d->cuMemcpyPeerAsync(dst, dc, src, sc, n, s), "cuMemcpyPeerAsync");
        TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
        return TGC_OK;
    }
    CUstream s = tgc_cuda_stream(dev);
    if (!s)
        return tgc_last_status();
    TRY(d->cuMemcpyDtoDAsync(dst, src, n, s), "cuMemcpyDtoDAsync");
    TRY(d->cuStreamSynchronize(s), "cuStreamSynchronize");
out:
    return st;
}

static tgc_status cuda_copy(void *ctx, void *dst, tgc_device dst_dev, const void *src,
                            tgc_device src_dev, size_t nbytes)
{
    (void)ctx;
    if (!nbytes)
        return TGC_OK;
    int dc = dst_dev.type == TGC_DEVICE_CUDA, sc = src_dev.type == TGC_DEVICE_CUDA;
    if ((dc && (dst_dev.index < 0 || dst_dev.index >= g_n)) ||
        (sc && (src_dev.index < 0 || src_dev.index >= g_n)))
        return tgc_set_error(TGC_ERR_DEVICE, "cuda copy: device index out of range (%d present)",
                             g_n);
    if (dc && sc)
        return copy_d2d(dst_dev.index, (CUdeviceptr)(uintptr_t)dst, src_dev.index,
                        (CUdeviceptr)(uintptr_t)src, nbytes);
    if (dc)
        return copy_h2d(dst_dev.index, (CUdeviceptr)(uintptr_t)dst, src, nbytes);
    if (sc)
        return copy_d2h(src_dev.index, dst, (CUdeviceptr)(uintptr_t)src, nbytes);
    memcpy(dst, src, nbytes);
    return TGC_OK;
}

static const tgc_allocator cuda_allocator = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .stats = cuda_stats,
    .reset_peak = cuda_reset_peak,
    .empty_cache = cuda_empty_cache,
    .alloc_failure = cuda_alloc_failure,
};

tgc_status tgc_cuda_load(void)
{
    tgc_status st = tgc_cuda_driver_load();
    if (st != TGC_OK)
        return st;
    pthread_once(&g_init_once, init_pools);
    /* A test's stand-in allocator stays; otherwise (also after it was unregistered) CUDA
     * tensors get device memory from here on. */
    if (!tgc_allocator_of(TGC_DEVICE_CUDA))
        tgc_allocator_register(TGC_DEVICE_CUDA, &cuda_allocator);
    return TGC_OK;
}
