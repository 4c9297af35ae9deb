/* The CUDA runtime's functions that need no driver types, and the CUDA device type's hooks
 * built from them (tgc_cuda_device_ops, runtime/cuda_hooks.c), so that only runtime/cuda* and
 * src/backend/cuda/ include <cuda.h>. Defined in runtime/cuda*.c, which are built only with
 * the CUDA backend: the layers below the backends reach them through the hooks the backend
 * registers (runtime/alloc.h), never by name. Streams travel as void * (a CUstream). The
 * backend uses runtime/cuda.h, which includes this.
 *
 * Thread-safety: every function may be called from any thread. */
#ifndef TGC_RUNTIME_CUDA_HOST_H
#define TGC_RUNTIME_CUDA_HOST_H

#include <stddef.h>

#include "runtime/alloc.h"
#include "tgc/tensor.h"

/* Devices beyond this index are not used (tgc_cuda_count() is at most this). */
#define TGC_CUDA_MAX_DEVICES 64

/* Opens libcuda, cuInit(0), counts the devices, reads their properties and registers the CUDA
 * allocator (runtime/cuda_alloc.c) for TGC_DEVICE_CUDA when none is registered (a test's
 * stand-in stays; every successful call registers it again if it was unregistered). Idempotent and
 * thread-safe: the work happens once per process; later calls return the first call's status and,
 * on failure, set the same error again: "libcuda.so.1 could not be opened (<dlerror>): no NVIDIA
 * driver on this machine" "TGC_CUDA_DRIVER=<path> could not be opened (<dlerror>)"
 *   "<library> lacks cuXxx: the NVIDIA driver (CUDA a.b) is older than this build needs ..."
 *   "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
 *   "no CUDA device is present"
 * all TGC_ERR_DEVICE. The environment variable TGC_CUDA_DRIVER=<path> replaces the library
 * looked for (default libcuda.so.1, then libcuda.so): read here, once. */
tgc_status tgc_cuda_load(void);
/* Number of CUDA devices: 0 when tgc_cuda_load has not succeeded (it does not load). */
int tgc_cuda_count(void);
/* Makes device dev's primary context current on the calling thread (retained on first use,
 * kept for the life of the process). Cheap when this thread already entered dev last: a
 * thread-local check (a context made current behind the library's back is not noticed).
 * TGC_ERR_DEVICE for an index outside [0, count) or when CUDA is not loaded. */
tgc_status tgc_cuda_enter(int dev);
/* The calling thread's current stream for dev as a CUstream: the one set with
 * tgc_cuda_stream_set, else the thread's own (created on first use, CU_STREAM_NON_BLOCKING,
 * synchronized and destroyed at thread exit). Makes dev's context current. NULL with the
 * error set on failure (NULL is never a valid result: the legacy stream is not used). */
void *tgc_cuda_stream_ptr(int dev);
/* Sets the calling thread's stream for dev (a CUstream of dev's primary context, owned by the
 * caller, which must outlive its use here and be synchronized before it is destroyed); NULL
 * goes back to the thread's own stream. TGC_ERR_DEVICE for a bad index. */
tgc_status tgc_cuda_stream_set(int dev, void *stream);
/* Waits for the work queued on the calling thread's current stream for dev (nothing to wait
 * for when this thread never made one). A driver error's status, with the error set. */
tgc_status tgc_cuda_sync(int dev);
/* The name of device dev ("NVIDIA H200"), NULL for a bad index or when not loaded. */
const char *tgc_cuda_name(int dev);
/* cuMemGetInfo of device dev (its context made current): bytes free and in total. */
tgc_status tgc_cuda_mem_info(int dev, size_t *free_bytes, size_t *total_bytes);

/* The CUDA device type's hooks: name "cuda", loading (tgc_cuda_load), devices, streams, names,
 * memory, and the streams and events the communicators use. */
extern const tgc_device_ops tgc_cuda_device_ops;

/* "1.5 TiB", "139.2 GiB", "3.0 KiB", "512 B" into buf; returns buf. */
char *tgc_cuda_format_bytes(size_t n, char *buf, size_t len);

#endif
