/* Refcounted host memory, with a cache of large blocks.
 *
 * Large buffers come from mmap in glibc, and a fresh mapping pays a page fault per 4 KiB on
 * first touch: a 256 MiB tensor costs more to fault in than to fill. So freed blocks of
 * 1 MiB and more are kept (up to TGC_STORAGE_CACHE_BYTES, 2 GiB by default, oldest dropped
 * first) and handed out again for requests they fit without wasting more than half. The
 * cache is process-wide and locked; small blocks go straight to malloc. */
#include "runtime/storage.h"

#include <pthread.h>
#include <stdlib.h>

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

static void read_limit(void)
{
    const char *e = getenv("TGC_STORAGE_CACHE_BYTES");
    char *end;
    unsigned long long v = e ? strtoull(e, &end, 10) : 0;
    g_limit = e && *e && !*end ? (size_t)v : ((size_t)2 << 30);
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

__attribute__((destructor)) static void cache_release(void)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++)
        free(g_cache[i].data);
    g_n = 0;
    g_bytes = 0;
    pthread_mutex_unlock(&g_lock);
}

tgc_storage *tgc_storage_new(size_t nbytes, tgc_device dev)
{
    tgc_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    /* 64-byte alignment suits every vector width; round up as aligned_alloc requires. */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (!rounded)
        rounded = 64;
    size_t cap = rounded;
    s->data = rounded >= CACHE_MIN ? cache_take(rounded, &cap) : NULL;
    if (!s->data)
        s->data = aligned_alloc(64, rounded);
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    s->cap = cap;
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
        if (s->cap >= CACHE_MIN)
            cache_put(s->data, s->cap);
        else
            free(s->data);
        free(s);
    }
}
