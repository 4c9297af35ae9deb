/* The CUDA driver API as the backend sees it: libcuda opened with dlopen at run time (the
 * library links no CUDA library and runs where no driver or GPU exists), its functions in one
 * table with the real types of <cuda.h>, the primary context of each device, the calling
 * thread's stream per device, the conversion of CUresult to a tgc_status with a message, and
 * the properties of each device. The caching device allocator is runtime/cuda_alloc.c, a layer
 * above: it calls the driver layer, which calls it only through the stream-gone hook.
 *
 * Driver versions: <cuda.h> maps each API name to the versioned symbol the toolkit compiles
 * against (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy -> cuStreamDestroy_v2, ...). The table
 * members are declared with those same macros, so `d->cuMemAlloc(&p, n)` calls the symbol
 * cuMemAlloc_v2 that was looked up by that name; a driver lacking a symbol fails the load and
 * names it (cuEventElapsedTime_v2, new in CUDA 12.8, falls back to cuEventElapsedTime).
 *
 * Only runtime/cuda*.{c,h} and src/backend/cuda/ include this (and so <cuda.h>); the layers
 * below the backends reach CUDA through the hooks of runtime/cuda_hooks.c, which the CUDA
 * backend registers (runtime/alloc.h). Built only with the CUDA backend.
 *
 * Thread-safety: the table is written once under pthread_once and read-only afterwards;
 * every function here may be called from any thread. */
#ifndef TGC_RUNTIME_CUDA_H
#define TGC_RUNTIME_CUDA_H

#include <cuda.h>
#include <stdint.h>

#include "runtime/cuda_host.h"

/* Every driver function the project uses, as <cuda.h> spells the API name (macros expand to
 * the versioned symbol). Add a name here to get a member and its lookup. */
#define TGC_CUDA_DRIVER_FUNCS(X)                                                                   \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceCanAccessPeer)                                                                       \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxSynchronize)                                                                            \
    X(cuCtxEnablePeerAccess)                                                                       \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemGetInfo)                                                                                \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemcpyHtoD)                                                                                \
    X(cuMemcpyDtoH)                                                                                \
    X(cuMemcpyDtoD)                                                                                \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemcpyPeerAsync)                                                                           \
    X(cuMemsetD8Async)                                                                             \
    X(cuMemsetD32Async)                                                                            \
    X(cuPointerGetAttribute)                                                                       \
    X(cuPointerGetAttributes)                                                                      \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamQuery)                                                                               \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuEventDestroy)                                                                              \
    X(cuEventElapsedTime)                                                                          \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuFuncSetAttribute)                                                                          \
    X(cuFuncGetAttribute)                                                                          \
    X(cuLaunchKernel)                                                                              \
    X(cuTensorMapEncodeTiled)                                                                      \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                 \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuStreamIsCapturing)                                                                         \
    X(cuThreadExchangeStreamCaptureMode)                                                           \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphDestroy)                                                                              \
    X(cuGraphUpload)

#define TGC_CUDA_MEMBER_(name) __typeof__(name) *name;
/* The driver's functions: member cuX calls the symbol <cuda.h> maps cuX to. */
typedef struct tgc_cuda_driver {
    TGC_CUDA_DRIVER_FUNCS(TGC_CUDA_MEMBER_)
    int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} tgc_cuda_driver;
#undef TGC_CUDA_MEMBER_

/* The driver table, NULL until tgc_cuda_load succeeded. */
const tgc_cuda_driver *tgc_cuda_drv(void);

/* The calling thread's current stream for dev (see tgc_cuda_stream_ptr in cuda_host.h);
 * NULL with the error set on failure. */
CUstream tgc_cuda_stream(int dev);
/* A key naming the stream tgc_cuda_stream(dev) returns now, for state kept per stream (the
 * executor's arenas and recordings): a stream the runtime creates for a thread gets a key no
 * other stream ever gets (not even one created later at the same address, after the thread
 * exited), a caller's stream (tgc_cuda_stream_swap, tgc_cuda_set_stream) is keyed by its
 * handle (the caller synchronizes it before destroying it, as for the allocator's blocks).
 * 0 (with the error set) when there is no stream. */
uint64_t tgc_cuda_stream_key(int dev);
/* Makes s the calling thread's stream for dev (NULL: its own) and returns the stream set
 * before (NULL when it was its own), for code that runs on a caller's stream for a while
 * (cfg.cuda_stream): allocations made meanwhile are keyed to s, so their blocks are reused
 * in s's order. dev must be valid (the caller entered it). */
CUstream tgc_cuda_stream_swap(int dev, CUstream s);
/* Device dev's primary context (retained on first use), NULL with the error set. */
CUcontext tgc_cuda_context(int dev);

/* TGC_OK for CUDA_SUCCESS; else sets "<what>: CUDA_ERROR_X (<cuGetErrorString text>)" and
 * returns TGC_ERR_OOM for CUDA_ERROR_OUT_OF_MEMORY, TGC_ERR_DEVICE for errors that say the
 * device or driver is missing or unusable (no device, invalid device, stub library, driver
 * mismatch, device unavailable, device not licensed), TGC_ERR_RUNTIME otherwise. */
tgc_status tgc_cuda_error(CUresult r, const char *what);
/* "CUDA_ERROR_X (text)" of r into buf (works before and without a loaded driver); buf. */
char *tgc_cuda_describe(CUresult r, char *buf, size_t n);

/* What the code generators and launchers need of a device; read once per device at load. */
typedef struct tgc_cuda_props {
    int major, minor; /* compute capability (9.0 on the H200) */
    int sms;          /* multiprocessors */
    int max_threads_per_block;
    int smem_per_block_optin; /* bytes of shared memory a block may opt in to */
    int smem_per_sm;
    int l2_bytes;
    int warp;
    size_t total_mem;
    char name[128];
} tgc_cuda_props;
/* NULL for a bad index or when CUDA is not loaded. */
const tgc_cuda_props *tgc_cuda_props_of(int dev);

/* ---- private memory pools for CUDA-graph capture (runtime/cuda_alloc.c) ----
 *
 * A graph captured on stream s bakes in the device addresses its kernels were given, so every
 * block allocated for the capture must stay out of the general cache (where another tensor
 * would get it) while the graph exists. Use:
 *
 *     warm-up run (fills the general cache with blocks of the classes the steps use)
 *     cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
 *     tgc_cuda_pool *p = tgc_cuda_pool_begin(dev, s);
 *     ... the steps: kernels on s, tensors allocated and freed on s ...
 *     tgc_cuda_pool_end(p);
 *     cuStreamEndCapture(s, &graph); instantiate, replay many times ...
 *     destroy the graph exec and graph, free every tensor the pool's blocks back,
 *     tgc_cuda_pool_release(p);
 *
 * From begin to end, every allocation of device dev made with s as the calling thread's
 * current stream (tgc_cuda_stream(dev) == s, on any thread) belongs to the pool. It is served
 * first from the pool's own free blocks of its size class (blocks freed earlier in the same
 * capture: the graph replays the steps in stream order, so that reuse is as safe as it was
 * in the capture), then from the general cache (blocks cached for s or for no stream), then
 * with cuMemAlloc. During capture cuMemAlloc runs with the calling thread's capture
 * interaction mode exchanged to CU_STREAM_CAPTURE_MODE_RELAXED
 * (cuThreadExchangeStreamCaptureMode), so it is allowed whatever mode the capture was begun
 * with. Out of memory gives {NULL, 0} and alloc_failure's message as any allocation. While
 * any pool of the device is open, nothing synchronizes the device (that would invalidate
 * the capture): the out-of-memory retry of any allocation on it does not empty the cache
 * (the message says so) and empty_cache leaves the device's cache alone. Allocations on other
 * streams, or after tgc_cuda_pool_end, never get the pool's blocks; without an open pool on the
 * capturing stream a cache miss during capture still fails (cuda_alloc.c).
 *
 * A block of the general cache's allocated on s (before the pool began) and freed while the
 * pool is open becomes the pool's too: kernels captured before its free may use it.
 * A block the pool took stays the pool's: freed at any time (during the capture, after end,
 * from any thread) it goes to the pool's free list, never to the general cache. Its bytes
 * count as `cached` in the device statistics while free (in_use while live); the allocator's
 * empty_cache leaves them (the graph may still use them). A tensor allocated in the capture
 * that outlives it (an output of the graph) is a pool block that every replay writes again:
 * the executor copies or hands it out knowing that.
 *
 * Thread-safety: the pools of a device are guarded by the device's allocator mutex; begin,
 * end and release may be called from any thread, but end and release must not race with
 * allocations made in the pool (call them from the capturing thread after its steps).
 * Ownership: begin returns a pool the caller owns until tgc_cuda_pool_release. */
typedef struct tgc_cuda_pool tgc_cuda_pool;
/* Opens a pool for allocations on stream s (non-NULL, a stream of dev's primary context) of
 * device dev. NULL with the error set: TGC_ERR_DEVICE for a bad dev, TGC_ERR_INVALID_ARG for
 * a NULL stream or when a pool is already open on (dev, s), TGC_ERR_OOM without host memory. */
tgc_cuda_pool *tgc_cuda_pool_begin(int dev, CUstream s);
/* Stops adding allocations to p (idempotent; NULL: nothing). Its blocks stay its own. */
void tgc_cuda_pool_end(tgc_cuda_pool *p);
/* Returns p's free blocks to the general cache (under the stream they were allocated on) and
 * frees p (ending it first if still open; NULL: nothing). Call it after the graph that used
 * the blocks was destroyed and after every tensor they back was freed: a block still live at
 * release is no longer the pool's, and goes to the general cache when it is freed. */
void tgc_cuda_pool_release(tgc_cuda_pool *p);
/* Bytes of the blocks p owns (live and free) and of those free now, either pointer may be
 * NULL (for tests and logs). */
void tgc_cuda_pool_stats(tgc_cuda_pool *p, size_t *owned_bytes, size_t *free_bytes);

/* ---- the driver layer (runtime/cuda.c) below the allocator (runtime/cuda_alloc.c) ---- */
/* The driver part of tgc_cuda_load (cuda_host.h: the same errors, once per process): opens
 * libcuda, initialises it and reads the devices, with no allocator. The contexts and streams
 * load the driver through it when used first; tgc_cuda_load (cuda_alloc.c) calls it and then
 * sets up and registers the allocator. */
tgc_status tgc_cuda_driver_load(void);
/* What a thread's own stream of a device is about to be destroyed says to the layer above
 * (at thread exit, after the stream was synchronized, its device's context current): the
 * allocator re-keys the blocks tied to it. One hook per process, set by tgc_cuda_load before
 * the first allocation (NULL: none); called from the exiting thread. */
typedef void (*tgc_cuda_stream_gone_fn)(int dev, CUstream s);
void tgc_cuda_set_stream_gone_hook(tgc_cuda_stream_gone_fn fn);

#endif
