/* A host-memory stand-in for libcuda, loaded by test_cuda_runtime_mock through
 * TGC_CUDA_DRIVER, to check the CUDA runtime layer's own logic (runtime/cuda*.c: the caching
 * allocator's classes and stream keying, the OOM retry, the double-buffered staging copies,
 * per-thread streams) on machines without a GPU. It is not a model of the driver: the GPU
 * run of test_cuda_runtime is the real test.
 *
 * One device with 1 GiB; device memory is malloc'd (filled with 0xAB); asynchronous copies
 * are queued on their stream and run only when the stream or an event recorded after them
 * is synchronized, so a staging buffer reused before its copy ran corrupts the data the test
 * compares. Functions the runtime layer does not call are in libcuda_mock_unsupported.c.
 *
 * Stream capture builds no graph (the runtime never replays) but keeps the driver's rules on
 * what may run meanwhile, so a runtime that breaks them fails its test: cuMemAlloc during a
 * capture not begun in relaxed mode fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED unless
 * the calling thread's interaction mode (cuThreadExchangeStreamCaptureMode) is relaxed;
 * cuMemFree and cuCtxSynchronize during any capture, and cuStreamSynchronize of a capturing
 * stream, fail the same way. Each such failure invalidates the captures under way (status
 * CU_STREAM_CAPTURE_STATUS_INVALIDATED; cuStreamEndCapture then fails with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). (Simplified: which thread began a capture is not
 * tracked, and the real driver may allow cuMemFree in relaxed mode.)
 *
 * Thread-safety: one lock around every call. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef struct op {
    void *dst;
    const void *src;
    size_t n;
} op;
typedef struct mstream {
    op *ops;
    size_t n, cap, done;
    int capturing, invalidated;
    CUstreamCaptureMode mode;
} mstream;
typedef struct mevent {
    mstream *s;
    size_t upto;
} mevent;
typedef struct hdr {
    size_t n;
    size_t pad;
} hdr;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const size_t total = (size_t)1 << 30;
static size_t used;
static mstream legacy;

#define LOCKED(...)                                                                                \
    do {                                                                                           \
        pthread_mutex_lock(&mu);                                                                   \
        __VA_ARGS__;                                                                               \
        pthread_mutex_unlock(&mu);                                                                 \
    } while (0)

static mstream *str(CUstream s)
{
    return s ? (mstream *)s : &legacy;
}

/* The streams being captured (locked). */
#define MAX_CAPTURES 16
static mstream *captures[MAX_CAPTURES];
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* 1 (and the captures invalidated) when an unsafe call is prohibited now: any capture under
 * way (all: 1), or one not begun in relaxed mode while this thread is not relaxed (all: 0).
 * Locked. */
static int prohibited(int all)
{
    int bad = 0;
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i] && (all || (captures[i]->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                                    thread_mode != CU_STREAM_CAPTURE_MODE_RELAXED)))
            bad = 1;
    if (bad)
        for (int i = 0; i < MAX_CAPTURES; i++)
            if (captures[i])
                captures[i]->invalidated = 1;
    return bad;
}

static CUresult push(CUstream st, void *d, const void *src, size_t n)
{
    mstream *s = str(st);
    LOCKED({
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 16;
            s->ops = realloc(s->ops, s->cap * sizeof(op));
        }
        s->ops[s->n++] = (op){d, src, n};
    });
    return CUDA_SUCCESS;
}

static void run_to(mstream *s, size_t upto)
{
    LOCKED({
        for (; s->done < upto; s->done++)
            memcpy(s->ops[s->done].dst, s->ops[s->done].src, s->ops[s->done].n);
    });
}

API CUresult cuInit(unsigned f)
{
    (void)f;
    return CUDA_SUCCESS;
}
API CUresult cuDriverGetVersion(int *v)
{
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}
API CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : NULL;
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : NULL;
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuDeviceGet(CUdevice *d, int i)
{
    *d = i;
    return i == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
API CUresult cuDeviceGetCount(int *n)
{
    *n = 1;
    return CUDA_SUCCESS;
}
API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    default: *v = 132; break;
    }
    return CUDA_SUCCESS;
}
API CUresult cuDeviceGetName(char *n, int len, CUdevice d)
{
    (void)d;
    snprintf(n, (size_t)len, "libcuda mock");
    return CUDA_SUCCESS;
}
API CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d)
{
    (void)d;
    *b = total;
    return CUDA_SUCCESS;
}
API CUresult cuDeviceCanAccessPeer(int *c, CUdevice a, CUdevice b)
{
    (void)a;
    (void)b;
    *c = 0;
    return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = (CUcontext)&legacy;
    return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    return CUDA_SUCCESS;
}
API CUresult cuCtxSetCurrent(CUcontext c)
{
    return c == (CUcontext)&legacy ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
API CUresult cuCtxGetCurrent(CUcontext *c)
{
    *c = (CUcontext)&legacy;
    return CUDA_SUCCESS;
}
API CUresult cuCtxGetDevice(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
API CUresult cuCtxSynchronize(void)
{
    int bad;
    LOCKED(bad = prohibited(1));
    /* streams run when synchronized themselves */
    return bad ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
API CUresult cuCtxEnablePeerAccess(CUcontext c, unsigned f)
{
    (void)c;
    (void)f;
    return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}
API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult r = CUDA_SUCCESS;
    LOCKED({
        if (prohibited(0))
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        else if (n > total - used)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            used += n;
    });
    if (r != CUDA_SUCCESS)
        return r;
    hdr *h = malloc(sizeof(hdr) + n);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->n = n;
    memset(h + 1, 0xAB, n);
    *p = (CUdeviceptr)(h + 1);
    return CUDA_SUCCESS;
}
API CUresult cuMemFree_v2(CUdeviceptr p)
{
    hdr *h = (hdr *)p - 1;
    int bad;
    LOCKED({
        bad = prohibited(1);
        if (!bad)
            used -= h->n;
    });
    if (bad)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    free(h);
    return CUDA_SUCCESS;
}
API CUresult cuMemGetInfo_v2(size_t *f, size_t *t)
{
    LOCKED(*f = total - used);
    *t = total;
    return CUDA_SUCCESS;
}
/* "Page-locked" host blocks, for cuPointerGetAttribute */
#define MAX_HOST 256
static struct {
    char *p;
    size_t n;
} host_blocks[MAX_HOST];

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
    (void)f;
    *p = malloc(n);
    if (!*p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    LOCKED({
        for (int i = 0; i < MAX_HOST; i++)
            if (!host_blocks[i].p) {
                host_blocks[i].p = *p;
                host_blocks[i].n = n;
                break;
            }
    });
    return CUDA_SUCCESS;
}
API CUresult cuMemFreeHost(void *p)
{
    LOCKED({
        for (int i = 0; i < MAX_HOST; i++)
            if (host_blocks[i].p == p)
                host_blocks[i].p = NULL;
    });
    free(p);
    return CUDA_SUCCESS;
}
API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
    if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = CUDA_ERROR_INVALID_VALUE; /* what the driver says of unregistered memory */
    LOCKED({
        for (int i = 0; i < MAX_HOST; i++)
            if (host_blocks[i].p && (char *)ptr >= host_blocks[i].p &&
                (char *)ptr < host_blocks[i].p + host_blocks[i].n) {
                *(unsigned *)data = CU_MEMORYTYPE_HOST;
                r = CUDA_SUCCESS;
            }
    });
    return r;
}
/* As the driver: unknown memory gets type 0 and CUDA_SUCCESS. */
API CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute *as, void **data,
                                    CUdeviceptr ptr)
{
    for (unsigned k = 0; k < n; k++) {
        if (as[k] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
            return CUDA_ERROR_NOT_SUPPORTED;
        unsigned type = 0;
        if (cuPointerGetAttribute(&type, as[k], ptr) != CUDA_SUCCESS)
            type = 0;
        *(unsigned *)data[k] = type;
    }
    return CUDA_SUCCESS;
}
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)d, s, n);
    return CUDA_SUCCESS;
}
API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    memcpy(d, (const void *)s, n);
    return CUDA_SUCCESS;
}
API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    memcpy((void *)d, (const void *)s, n);
    return CUDA_SUCCESS;
}
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    return push(st, (void *)d, s, n);
}
API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st)
{
    return push(st, d, (const void *)s, n);
}
API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    return push(st, (void *)d, (const void *)s, n);
}
API CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                               CUstream st)
{
    (void)dc;
    (void)sc;
    return push(st, (void *)d, (const void *)s, n);
}
API CUresult cuStreamCreate(CUstream *s, unsigned f)
{
    (void)f;
    *s = (CUstream)calloc(1, sizeof(mstream));
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
API CUresult cuStreamDestroy_v2(CUstream s)
{
    mstream *m = str(s);
    run_to(m, m->n);
    free(m->ops);
    free(m);
    return CUDA_SUCCESS;
}
API CUresult cuStreamSynchronize(CUstream s)
{
    mstream *m = str(s);
    int bad;
    LOCKED({
        bad = m->capturing;
        if (bad)
            m->invalidated = 1;
    });
    if (bad)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    run_to(m, m->n);
    return CUDA_SUCCESS;
}
API CUresult cuStreamQuery(CUstream s)
{
    mstream *m = str(s);
    return m->done == m->n ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *c)
{
    mstream *m = str(s);
    LOCKED(*c = !m->capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
                : m->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                 : CU_STREAM_CAPTURE_STATUS_ACTIVE);
    return CUDA_SUCCESS;
}
/* Capture flips the stream's status and mode (no graph is built: the runtime never replays). */
API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    mstream *m = str(s);
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    LOCKED({
        for (int i = 0; i < MAX_CAPTURES && !m->capturing; i++)
            if (!captures[i]) {
                captures[i] = m;
                m->capturing = 1;
                m->invalidated = 0;
                m->mode = mode;
                r = CUDA_SUCCESS;
            }
    });
    return r;
}
API CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    mstream *m = str(s);
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    *g = NULL;
    LOCKED({
        if (m->capturing) {
            r = m->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
            m->capturing = m->invalidated = 0;
            for (int i = 0; i < MAX_CAPTURES; i++)
                if (captures[i] == m)
                    captures[i] = NULL;
        }
    });
    return r;
}
API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
API CUresult cuGraphDestroy(CUgraph g)
{
    return g ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
API CUresult cuEventCreate(CUevent *e, unsigned f)
{
    (void)f;
    *e = (CUevent)calloc(1, sizeof(mevent));
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
API CUresult cuEventRecord(CUevent e, CUstream s)
{
    mevent *m = (mevent *)e;
    m->s = str(s);
    LOCKED(m->upto = m->s->n);
    return CUDA_SUCCESS;
}
API CUresult cuEventSynchronize(CUevent e)
{
    mevent *m = (mevent *)e;
    if (m->s)
        run_to(m->s, m->upto);
    return CUDA_SUCCESS;
}
API CUresult cuEventDestroy_v2(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}
