/* The CUDA driver layer (runtime/cuda.h): opens libcuda with dlopen once per process, fills
 * the driver table, initialises the driver and reads each device's properties; then hands
 * out primary contexts (retained lazily, one per device, kept until the process ends) and
 * per-thread streams (one per device a thread uses, created on first use, synchronized and
 * destroyed by a pthread key destructor at thread exit, after the stream-gone hook was told),
 * and turns CUresults into statuses with messages. It knows nothing of memory: the caching
 * allocator above it (cuda_alloc.c) is what tgc_cuda_load adds to the driver.
 *
 * Environment: TGC_CUDA_DRIVER=<path> replaces the library opened (default libcuda.so.1,
 * then libcuda.so); read once, at load (the runtime reads its own variables).
 *
 * Thread-safety: loading is under pthread_once; contexts are retained under a mutex and
 * published with release stores; streams are thread-local. */
#include "runtime/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/error.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

static tgc_cuda_driver g_drv;
static atomic_int g_loaded; /* 1 once g_drv is complete and the devices are counted */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_status g_status = TGC_OK;
static char g_msg[1024];
static int g_count;
static tgc_cuda_props g_props[TGC_CUDA_MAX_DEVICES];
static CUdevice g_dev[TGC_CUDA_MAX_DEVICES];
static _Atomic(CUcontext) g_ctx[TGC_CUDA_MAX_DEVICES];
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_key;
static _Atomic(tgc_cuda_stream_gone_fn) g_stream_gone;

/* ---- error text ---- */

/* Names and texts of the results that matter before a driver works (the stub library answers
 * cuGetErrorName with an error of its own) and of the common ones. */
static const struct {
    CUresult r;
    const char *name, *text;
} known[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library (the toolkit's stubs/libcuda.so, not an NVIDIA driver)"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
};

char *tgc_cuda_describe(CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (atomic_load_explicit(&g_loaded, memory_order_acquire) ||
        (g_drv.cuGetErrorName && g_drv.cuGetErrorString)) {
        if (g_drv.cuGetErrorName(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (g_drv.cuGetErrorString(r, &text) != CUDA_SUCCESS)
            text = NULL;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0] && (!name || !text); i++)
        if (known[i].r == r) {
            name = name ? name : known[i].name;
            text = text ? text : known[i].text;
        }
    if (name)
        snprintf(buf, n, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(buf, n, "CUDA error %d", (int)r);
    return buf;
}

tgc_status tgc_cuda_error(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return TGC_OK;
    char d[256];
    tgc_cuda_describe(r, d, sizeof d);
    tgc_status s = TGC_ERR_RUNTIME;
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: s = TGC_ERR_OOM; break;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED: s = TGC_ERR_DEVICE; break;
    default: break;
    }
    return tgc_set_error(s, "%s: %s", what, d);
}

char *tgc_cuda_format_bytes(size_t n, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", n);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

/* ---- loading ---- */

static void fail(tgc_status s, const char *fmt, ...) TGC_PRINTF(2, 3);
static void fail(tgc_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_status = s;
}

static void thread_exit(void *p);

/* Symbols newer drivers export under a new version, with an older one of the same type. */
static void *lookup(void *lib, const char *sym)
{
    void *f = dlsym(lib, sym);
    if (!f && !strcmp(sym, "cuEventElapsedTime_v2"))
        f = dlsym(lib, "cuEventElapsedTime");
    return f;
}

static void do_load(void)
{
    const char *env = getenv("TGC_CUDA_DRIVER");
    const char *lib_name = env && *env ? env : "libcuda.so.1";
    void *lib = dlopen(lib_name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char why[512];
        snprintf(why, sizeof why, "%s", dlerror());
        if (env && *env) {
            fail(TGC_ERR_DEVICE, "TGC_CUDA_DRIVER=%s could not be opened (%s)", env, why);
            return;
        }
        lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fail(TGC_ERR_DEVICE,
                 "libcuda.so.1 could not be opened (%s): no NVIDIA driver on this machine", why);
            return;
        }
        lib_name = "libcuda.so";
    }
    tgc_cuda_driver d;
    memset(&d, 0, sizeof d);
    const char *missing = NULL;
#define LOOK_(name)                                                                                \
    if (!missing) {                                                                                \
        void *f_ = lookup(lib, STR(name));                                                         \
        if (f_)                                                                                    \
            memcpy(&d.name, &f_, sizeof f_);                                                       \
        else                                                                                       \
            missing = STR(name);                                                                   \
    }
    TGC_CUDA_DRIVER_FUNCS(LOOK_)
#undef LOOK_
    if (missing) {
        int v = 0;
        if (!d.cuDriverGetVersion || d.cuDriverGetVersion(&v) != CUDA_SUCCESS)
            v = 0;
        fail(TGC_ERR_DEVICE,
             "%s lacks %s: the NVIDIA driver (CUDA %d.%d) is older than this build needs (it was "
             "built with the headers of CUDA %d.%d); update the driver",
             lib_name, missing, v / 1000, v % 1000 / 10, CUDA_VERSION / 1000,
             CUDA_VERSION % 1000 / 10);
        dlclose(lib);
        return;
    }
    /* The error names are usable from here on, also for cuInit's failure. */
    g_drv = d;
    char why[256];
    CUresult r = d.cuInit(0);
    if (r != CUDA_SUCCESS) {
        fail(TGC_ERR_DEVICE, "cuInit failed: %s", tgc_cuda_describe(r, why, sizeof why));
        return;
    }
    if (d.cuDriverGetVersion(&g_drv.version) != CUDA_SUCCESS)
        g_drv.version = 0;
    int n = 0;
    r = d.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
        fail(TGC_ERR_DEVICE, "cuDeviceGetCount failed: %s", tgc_cuda_describe(r, why, sizeof why));
        return;
    }
    if (n <= 0) {
        fail(TGC_ERR_DEVICE, "no CUDA device is present");
        return;
    }
    if (n > TGC_CUDA_MAX_DEVICES)
        n = TGC_CUDA_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        tgc_cuda_props *p = &g_props[i];
        CUdevice dev;
        r = d.cuDeviceGet(&dev, i);
        if (r != CUDA_SUCCESS) {
            fail(TGC_ERR_DEVICE, "cuDeviceGet(%d) failed: %s", i,
                 tgc_cuda_describe(r, why, sizeof why));
            return;
        }
        g_dev[i] = dev;
        static const struct {
            CUdevice_attribute a;
            size_t off;
        } attrs[] = {
            {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(tgc_cuda_props, major)},
            {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(tgc_cuda_props, minor)},
            {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(tgc_cuda_props, sms)},
            {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
             offsetof(tgc_cuda_props, max_threads_per_block)},
            {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
             offsetof(tgc_cuda_props, smem_per_block_optin)},
            {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
             offsetof(tgc_cuda_props, smem_per_sm)},
            {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(tgc_cuda_props, l2_bytes)},
            {CU_DEVICE_ATTRIBUTE_WARP_SIZE, offsetof(tgc_cuda_props, warp)},
        };
        for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++) {
            int v = 0;
            r = d.cuDeviceGetAttribute(&v, attrs[k].a, dev);
            if (r != CUDA_SUCCESS) {
                fail(TGC_ERR_DEVICE, "cuDeviceGetAttribute(%d) of cuda:%d failed: %s",
                     (int)attrs[k].a, i, tgc_cuda_describe(r, why, sizeof why));
                return;
            }
            memcpy((char *)p + attrs[k].off, &v, sizeof v);
        }
        size_t total = 0;
        if (d.cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS)
            p->total_mem = total;
        if (d.cuDeviceGetName(p->name, (int)sizeof p->name, dev) != CUDA_SUCCESS)
            snprintf(p->name, sizeof p->name, "CUDA device %d", i);
    }
    if (pthread_key_create(&g_key, thread_exit) != 0) {
        fail(TGC_ERR_RUNTIME, "pthread_key_create failed (out of thread-specific keys)");
        return;
    }
    g_count = n;
    atomic_store_explicit(&g_loaded, 1, memory_order_release);
}

tgc_status tgc_cuda_driver_load(void)
{
    pthread_once(&g_once, do_load);
    if (g_status != TGC_OK)
        return tgc_set_error(g_status, "%s", g_msg);
    return TGC_OK;
}

void tgc_cuda_set_stream_gone_hook(tgc_cuda_stream_gone_fn fn)
{
    atomic_store_explicit(&g_stream_gone, fn, memory_order_release);
}

static int loaded(void)
{
    return atomic_load_explicit(&g_loaded, memory_order_acquire);
}

const tgc_cuda_driver *tgc_cuda_drv(void)
{
    return loaded() ? &g_drv : NULL;
}

int tgc_cuda_count(void)
{
    return loaded() ? g_count : 0;
}

const tgc_cuda_props *tgc_cuda_props_of(int dev)
{
    return loaded() && dev >= 0 && dev < g_count ? &g_props[dev] : NULL;
}

const char *tgc_cuda_name(int dev)
{
    const tgc_cuda_props *p = tgc_cuda_props_of(dev);
    return p ? p->name : NULL;
}

static tgc_status check_index(const char *fn, int dev)
{
    if (!loaded()) {
        tgc_status s = tgc_cuda_driver_load();
        if (s != TGC_OK)
            return s;
    }
    if (dev < 0 || dev >= g_count)
        return tgc_set_error(TGC_ERR_DEVICE,
                             "%s: device cuda:%d is not available: %d CUDA device%s present", fn,
                             dev, g_count, g_count == 1 ? " is" : "s are");
    return TGC_OK;
}

/* ---- contexts ---- */

CUcontext tgc_cuda_context(int dev)
{
    if (check_index("tgc_cuda_context", dev) != TGC_OK)
        return NULL;
    CUcontext c = atomic_load_explicit(&g_ctx[dev], memory_order_acquire);
    if (c)
        return c;
    pthread_mutex_lock(&g_ctx_lock);
    c = atomic_load_explicit(&g_ctx[dev], memory_order_relaxed);
    if (!c) {
        char what[64];
        snprintf(what, sizeof what, "cuDevicePrimaryCtxRetain (cuda:%d)", dev);
        if (tgc_cuda_error(g_drv.cuDevicePrimaryCtxRetain(&c, g_dev[dev]), what) != TGC_OK)
            c = NULL;
        else
            atomic_store_explicit(&g_ctx[dev], c, memory_order_release);
    }
    pthread_mutex_unlock(&g_ctx_lock);
    return c;
}

/* ---- per-thread state ---- */

typedef struct thread_state {
    CUstream own[TGC_CUDA_MAX_DEVICES];     /* created by this thread, destroyed at its exit */
    uint64_t own_key[TGC_CUDA_MAX_DEVICES]; /* tgc_cuda_stream_key of own[d] */
    CUstream set[TGC_CUDA_MAX_DEVICES];     /* tgc_cuda_stream_set's; NULL: own */
} thread_state;

/* Keys of the streams threads create: odd, never reused (a caller's stream's key is even) */
static atomic_uint_fast64_t g_next_key = 1;

static _Thread_local int tls_entered;         /* device index + 1 whose context is current */
static _Thread_local thread_state *tls_state; /* also held by g_key for the destructor */

static thread_state *state(void)
{
    if (!tls_state) {
        tls_state = calloc(1, sizeof *tls_state);
        if (!tls_state) {
            tgc_set_error(TGC_ERR_OOM, "tgc_cuda: out of memory for thread state");
            return NULL;
        }
        pthread_setspecific(g_key, tls_state);
    }
    return tls_state;
}

static void thread_exit(void *p)
{
    thread_state *st = p;
    tgc_cuda_stream_gone_fn gone = atomic_load_explicit(&g_stream_gone, memory_order_acquire);
    for (int d = 0; d < g_count; d++) {
        if (!st->own[d])
            continue;
        CUcontext c = atomic_load_explicit(&g_ctx[d], memory_order_acquire);
        if (c && g_drv.cuCtxSetCurrent(c) == CUDA_SUCCESS) {
            g_drv.cuStreamSynchronize(st->own[d]);
            if (gone)
                gone(d, st->own[d]);
            g_drv.cuStreamDestroy(st->own[d]);
        }
    }
    free(st);
    tls_state = NULL;
    tls_entered = 0;
}

tgc_status tgc_cuda_enter(int dev)
{
    if (tls_entered == dev + 1 && loaded())
        return TGC_OK;
    tgc_status s = check_index("tgc_cuda_enter", dev);
    if (s != TGC_OK)
        return s;
    CUcontext c = tgc_cuda_context(dev);
    if (!c)
        return tgc_last_status();
    char what[64];
    snprintf(what, sizeof what, "cuCtxSetCurrent (cuda:%d)", dev);
    s = tgc_cuda_error(g_drv.cuCtxSetCurrent(c), what);
    if (s == TGC_OK)
        tls_entered = dev + 1;
    return s;
}

CUstream tgc_cuda_stream(int dev)
{
    if (tgc_cuda_enter(dev) != TGC_OK)
        return NULL;
    thread_state *st = state();
    if (!st)
        return NULL;
    if (st->set[dev])
        return st->set[dev];
    if (!st->own[dev]) {
        char what[64];
        snprintf(what, sizeof what, "cuStreamCreate (cuda:%d)", dev);
        CUstream s = NULL;
        if (tgc_cuda_error(g_drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), what) != TGC_OK)
            return NULL;
        st->own[dev] = s;
        st->own_key[dev] = (atomic_fetch_add(&g_next_key, 1) << 1) | 1;
    }
    return st->own[dev];
}

uint64_t tgc_cuda_stream_key(int dev)
{
    CUstream s = tgc_cuda_stream(dev);
    if (!s)
        return 0;
    thread_state *st = tls_state;
    if (st->set[dev])
        return (uint64_t)(uintptr_t)st->set[dev] << 1;
    return st->own_key[dev];
}

void *tgc_cuda_stream_ptr(int dev)
{
    return (void *)tgc_cuda_stream(dev);
}

tgc_status tgc_cuda_stream_set(int dev, void *stream)
{
    tgc_status s = check_index("tgc_cuda_set_stream", dev);
    if (s != TGC_OK)
        return s;
    thread_state *st = state();
    if (!st)
        return TGC_ERR_OOM;
    st->set[dev] = (CUstream)stream;
    return TGC_OK;
}

CUstream tgc_cuda_stream_swap(int dev, CUstream s)
{
    thread_state *st = loaded() && dev >= 0 && dev < g_count ? state() : NULL;
    if (!st)
        return NULL;
    CUstream prev = st->set[dev];
    st->set[dev] = s;
    return prev;
}

tgc_status tgc_cuda_sync(int dev)
{
    tgc_status s = check_index("tgc_cuda_synchronize", dev);
    if (s != TGC_OK)
        return s;
    thread_state *st = tls_state;
    CUstream cs = st ? (st->set[dev] ? st->set[dev] : st->own[dev]) : NULL;
    if (!cs)
        return TGC_OK; /* this thread queued nothing on cuda:dev */
    if ((s = tgc_cuda_enter(dev)) != TGC_OK)
        return s;
    char what[64];
    snprintf(what, sizeof what, "cuStreamSynchronize (cuda:%d)", dev);
    return tgc_cuda_error(g_drv.cuStreamSynchronize(cs), what);
}

tgc_status tgc_cuda_mem_info(int dev, size_t *free_bytes, size_t *total_bytes)
{
    tgc_status s = tgc_cuda_enter(dev);
    if (s != TGC_OK)
        return s;
    size_t f = 0, t = 0;
    char what[64];
    snprintf(what, sizeof what, "cuMemGetInfo (cuda:%d)", dev);
    s = tgc_cuda_error(g_drv.cuMemGetInfo(&f, &t), what);
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return s;
}
