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
    int capturing;
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
    return CUDA_SUCCESS; /* streams run when synchronized themselves */
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
        if (n > total - used)
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
    LOCKED(used -= h->n);
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
    *c = str(s)->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
/* Capture only flips the stream's status (no graph is built: the runtime never replays). */
API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    (void)mode;
    str(s)->capturing = 1;
    return CUDA_SUCCESS;
}
API CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    str(s)->capturing = 0;
    *g = NULL;
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
