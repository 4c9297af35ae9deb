/* The caching CUDA device allocator (a tgc_allocator, runtime/alloc.h), registered for
 * TGC_DEVICE_CUDA by tgc_cuda_load (runtime/cuda.c), and its copies between the host and
 * devices.
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
 * call cuMemAlloc: it fails, and alloc_failure says so (allocate before capturing).
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
    CUstream stream; /* allocation stream; NULL: any */
    struct blk *next;
} blk;

typedef struct staging {
    void *host[2];
    CUevent ev[2];
    struct staging *next;
} staging;

typedef struct pool {
    pthread_mutex_t mu;
    blk *cached[BUCKETS]; /* by (stream, cap) */
    blk *live[BUCKETS];   /* by ptr */
    size_t in_use, cached_bytes, peak;
    staging *stage; /* free staging pairs */
} pool;

static pool *g_pools;
static int g_n;

void tgc_cuda_alloc_init(int count)
{
    g_pools = calloc((size_t)count, sizeof *g_pools);
    if (!g_pools)
        return; /* every allocation then fails with a message */
    for (int i = 0; i < count; i++)
        pthread_mutex_init(&g_pools[i].mu, NULL);
    g_n = count;
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

/* Every cached block of p, unlinked (locked). */
static blk *drain(pool *p)
{
    blk *all = NULL;
    for (int h = 0; h < BUCKETS; h++)
        while (p->cached[h]) {
            blk *b = p->cached[h];
            p->cached[h] = b->next;
            b->next = all;
            all = b;
        }
    p->cached_bytes = 0;
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
    blk *b = take_cached(p, s, cap);
    if (b)
        put_live(p, b);
    pthread_mutex_unlock(&p->mu);
    if (b)
        return (tgc_block){(void *)(uintptr_t)b->ptr, cap};

    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (d->cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return fail_with(TGC_ERR_RUNTIME,
                         "asked for %s while the stream is being captured into a CUDA graph and "
                         "no cached block of that size is free for it: memory cannot be "
                         "allocated during capture (allocate before capture begins)",
                         tgc_cuda_format_bytes(cap, a, sizeof a));
    b = malloc(sizeof *b);
    if (!b)
        return fail_with(TGC_ERR_OOM, "out of host memory for a block record");
    CUdeviceptr ptr = 0;
    CUresult r = d->cuMemAlloc(&ptr, cap);
    const tgc_cuda_props *pr = tgc_cuda_props_of(index);
    /* a size beyond the device may be refused as an invalid value: out of memory too */
#define OOM_(r)                                                                                    \
    ((r) == CUDA_ERROR_OUT_OF_MEMORY ||                                                            \
     ((r) == CUDA_ERROR_INVALID_VALUE && pr && cap > pr->total_mem))
    int retried = 0;
    if (OOM_(r)) {
        pthread_mutex_lock(&p->mu);
        blk *all = drain(p);
        pthread_mutex_unlock(&p->mu);
        release(index, all);
        retried = 1;
        r = d->cuMemAlloc(&ptr, cap);
    }
    if (r != CUDA_SUCCESS) {
        free(b);
        size_t fr = 0, tot = 0;
        if (OOM_(r)) {
            d->cuMemGetInfo(&fr, &tot);
            return fail_with(TGC_ERR_OOM, "asked for %s (%zu bytes), %s free of %s%s",
                             tgc_cuda_format_bytes(nbytes, a, sizeof a), nbytes,
                             tgc_cuda_format_bytes(fr, f, sizeof f),
                             tgc_cuda_format_bytes(tot, t, sizeof t),
                             retried ? " (the cache was emptied and the allocation retried)" : "");
        }
        char why[256];
        return fail_with(TGC_ERR_RUNTIME, "asked for %s (%zu bytes): cuMemAlloc failed: %s",
                         tgc_cuda_format_bytes(nbytes, a, sizeof a), nbytes,
                         tgc_cuda_describe(r, why, sizeof why));
    }
#undef OOM_
    b->ptr = ptr;
    b->cap = cap;
    b->stream = s;
    pthread_mutex_lock(&p->mu);
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
        unsigned h = hash_key(k->stream, k->cap);
        k->next = p->cached[h];
        p->cached[h] = k;
        p->cached_bytes += k->cap;
    }
    pthread_mutex_unlock(&p->mu);
}

void tgc_cuda_alloc_stream_gone(int dev, CUstream s)
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
    pthread_mutex_unlock(&p->mu);
}

static void cuda_empty_cache(void *ctx)
{
    (void)ctx;
    for (int i = 0; i < g_n; i++) {
        pthread_mutex_lock(&g_pools[i].mu);
        blk *all = drain(&g_pools[i]);
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
 * large enough to repay the query. */
static int pinned(const void *p, size_t n)
{
    if (n < ((size_t)256 << 10))
        return 0;
    unsigned type = 0;
    return tgc_cuda_drv()->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                 (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
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

const tgc_allocator tgc_cuda_allocator = {
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
