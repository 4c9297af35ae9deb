/* libtgc — CUDA devices: availability, streams, synchronization and memory statistics.
 *
 * Tensors live on a GPU when created with tgc_cuda(i) or moved there with tgc_to; the CUDA
 * driver (libcuda.so.1) is opened at run time on first use, so a program built with CUDA
 * support also runs where no driver or GPU exists: there tgc_cuda_is_available() is 0,
 * tgc_cuda_check() and every creation on tgc_cuda(i) fail with TGC_ERR_DEVICE and a message
 * naming what is missing.
 * Without CUDA support in the build every function here returns TGC_ERR_DEVICE ("this build
 * has no CUDA backend ...") or 0.
 *
 * Asynchrony: work on a GPU tensor (ops, compiled calls) is queued on the calling thread's
 * current stream for the tensor's device and returns before it has run. Reading on the host
 * synchronizes: tgc_copy_to_host, tgc_item_*, tgc_to(t, tgc_cpu()) wait for the work this
 * thread queued on that stream, and copies between devices complete before they return.
 * Work queued by other threads (on their own streams) is not waited for: hand tensors
 * between threads after tgc_cuda_synchronize on the producing thread.
 *
 * Streams: each thread has its own stream per device (non-blocking with respect to the
 * legacy default stream, created on first use, destroyed at thread exit);
 * tgc_cuda_set_stream makes a caller's stream current instead (cfg.cuda_stream overrides it
 * for one compiled function). Memory is cached per device and stream: freed blocks are reused
 * by later allocations on the same stream, so the bytes a tensor used on one stream are not
 * handed to another stream while work may still read them.
 *
 * Thread-safety: every function may be called from any thread; stream settings are per
 * thread. Ownership: a stream passed in stays the caller's (it must outlive its use and be
 * synchronized before it is destroyed); buffers passed in are the caller's. */
#ifndef TGC_CUDA_H
#define TGC_CUDA_H

#include <stddef.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when CUDA can be used (the driver loads and at least one device is present), else 0:
 * `if (tgc_cuda_is_available())` reads as it runs. Leaves the thread's error as it was; the
 * reason for a 0 is tgc_cuda_check's. The first call (of either) loads the driver; later
 * calls give the same answer. TGC_CUDA_DRIVER=<path> replaces the library looked for. */
TGC_API int tgc_cuda_is_available(void);
/* The same question as a status: TGC_OK when CUDA can be used, else TGC_ERR_DEVICE with the
 * reason in tgc_last_error(), e.g. "tgc_cuda_check: libcuda.so.1 could not be opened (...):
 * no NVIDIA driver on this machine". */
TGC_API tgc_status tgc_cuda_check(void);
/* Number of CUDA devices; 0 when CUDA is not available. */
TGC_API int tgc_cuda_device_count(void);
/* Waits until all work the calling thread queued on device index (on its current stream
 * there) has finished. TGC_ERR_DEVICE for a bad index; a kernel's asynchronous failure
 * surfaces here as TGC_ERR_RUNTIME with the driver's error. */
TGC_API tgc_status tgc_cuda_synchronize(int index);
/* Makes stream (a CUstream of device index's primary context, the caller's) the calling
 * thread's current stream for device index; NULL goes back to the thread's own stream. */
TGC_API tgc_status tgc_cuda_set_stream(int index, void *stream);
/* The calling thread's current stream for device index (a CUstream; the thread's own one is
 * created on first use). NULL with the error set when CUDA or the device is not available. */
TGC_API void *tgc_cuda_current_stream(int index);

/* Bytes of one device: in live tensors (and other library buffers), kept in the cache for
 * reuse, the most ever in use at once since the start or the last tgc_cuda_reset_peak, and
 * the device's free and total memory as the driver reports it (cuMemGetInfo). */
typedef struct tgc_cuda_memstats {
    size_t in_use, cached, peak, device_free, device_total;
} tgc_cuda_memstats;
TGC_API tgc_status tgc_cuda_memory_stats_sized(int index, tgc_cuda_memstats *out, size_t out_size);
static inline tgc_status tgc_cuda_memory_stats(int index, tgc_cuda_memstats *out)
{
    return tgc_cuda_memory_stats_sized(index, out, sizeof *out); /* config.h: structs that grow */
}
/* Restarts the peak of device index at the bytes now in use. */
TGC_API void tgc_cuda_reset_peak(int index);
/* Returns the cached (unused) memory of every device to the driver, after synchronizing the
 * devices. Live tensors are untouched. A device on which a CUDA graph is being captured is
 * left alone (synchronizing it would invalidate the capture), and memory kept for a captured
 * graph stays until the graph is released. */
TGC_API void tgc_cuda_empty_cache(void);
/* The device's name ("NVIDIA H200") into buf (n bytes, truncated to fit). */
TGC_API tgc_status tgc_cuda_device_name(int index, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
