/* The CUDA driver API as the backend sees it: libcuda opened with dlopen at run time (the
 * library links no CUDA library and runs where no driver or GPU exists), its functions in one
 * table with the real types of <cuda.h>, the primary context of each device, the calling
 * thread's stream per device, the conversion of CUresult to a tgc_status with a message, and
 * the properties of each device. The caching device allocator is runtime/cuda_alloc.c.
 *
 * Driver versions: <cuda.h> maps each API name to the versioned symbol the toolkit compiles
 * against (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy -> cuStreamDestroy_v2, ...). The table
 * members are declared with those same macros, so `d->cuMemAlloc(&p, n)` calls the symbol
 * cuMemAlloc_v2 that was looked up by that name; a driver lacking a symbol fails the load and
 * names it (cuEventElapsedTime_v2, new in CUDA 12.8, falls back to cuEventElapsedTime).
 *
 * Only runtime/cuda*.{c,h} and src/backend/cuda/ include this (and so <cuda.h>); src/tensor
 * uses runtime/cuda_host.h. Built only with TGC_HAVE_CUDA.
 *
 * Thread-safety: the table is written once under pthread_once and read-only afterwards;
 * every function here may be called from any thread. */
#ifndef TGC_RUNTIME_CUDA_H
#define TGC_RUNTIME_CUDA_H

#include <cuda.h>

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
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                 \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuStreamIsCapturing)                                                                         \
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

/* ---- between runtime/cuda.c and runtime/cuda_alloc.c ---- */
/* The allocator (cuda_alloc.c), registered by tgc_cuda_load. */
extern const struct tgc_allocator tgc_cuda_allocator;
/* Called once by tgc_cuda_load before registering (initialises the pools). */
void tgc_cuda_alloc_init(int count);
/* A thread's own stream of dev is about to be destroyed (at thread exit, after it was
 * synchronized): its cached and live blocks are no longer tied to it. */
void tgc_cuda_alloc_stream_gone(int dev, CUstream s);

#endif
