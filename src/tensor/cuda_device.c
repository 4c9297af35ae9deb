/* The public CUDA device API (include/tgc/cuda.h): availability, device count and names,
 * the thread's streams, synchronization and memory statistics, on top of the runtime's CUDA
 * layer (runtime/cuda_host.h) and the allocator registered for TGC_DEVICE_CUDA. Always
 * compiled: without TGC_HAVE_CUDA every function reports that the build has no CUDA backend.
 * Thread-safety: that of the runtime functions it calls (all thread-safe). */
#include <stdio.h>

#include "runtime/alloc.h"
#include "support/error.h"
#include "support/struct_size.h"
#include "tgc/cuda.h"
#ifdef TGC_HAVE_CUDA
#include "runtime/cuda_host.h"
#endif

#ifndef TGC_HAVE_CUDA
#define NO_CUDA                                                                                    \
    "this build has no CUDA backend (configured with TGC_WITH_CUDA=OFF or without the CUDA "       \
    "toolkit headers)"
/* Worded like device_ok's failure with CUDA: "<fn>: CUDA is not available: <reason>". */
static tgc_status no_cuda(const char *fn)
{
    return tgc_set_error(TGC_ERR_DEVICE, "%s: CUDA is not available: " NO_CUDA, fn);
}
#else
/* TGC_OK when the driver is loaded and index names a device; else the error, set. */
static tgc_status device_ok(const char *fn, int index)
{
    if (tgc_cuda_load() != TGC_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", tgc_last_error());
        return tgc_set_error(TGC_ERR_DEVICE, "%s: CUDA is not available: %s", fn, why);
    }
    int n = tgc_cuda_count();
    if (index < 0 || index >= n)
        return tgc_set_error(TGC_ERR_DEVICE,
                             "%s: device cuda:%d is not available: %d CUDA device%s present", fn,
                             index, n, n == 1 ? " is" : "s are");
    return TGC_OK;
}
#endif

tgc_status tgc_cuda_check(void)
{
#ifdef TGC_HAVE_CUDA
    return tgc_error_prefix(tgc_cuda_load(), "tgc_cuda_check");
#else
    return tgc_set_error(TGC_ERR_DEVICE, "tgc_cuda_check: " NO_CUDA);
#endif
}

int tgc_cuda_is_available(void)
{
#ifdef TGC_HAVE_CUDA
    tgc_status was = tgc_last_status(); /* a predicate: the thread's error stays as it was */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    int ok = tgc_cuda_load() == TGC_OK;
    tgc_set_error(was, "%s", msg);
    return ok;
#else
    return 0;
#endif
}

int tgc_cuda_device_count(void)
{
#ifdef TGC_HAVE_CUDA
    return tgc_cuda_load() == TGC_OK ? tgc_cuda_count() : 0;
#else
    return 0;
#endif
}

tgc_status tgc_cuda_synchronize(int index)
{
#ifdef TGC_HAVE_CUDA
    tgc_status s = device_ok("tgc_cuda_synchronize", index);
    return s != TGC_OK ? s : tgc_cuda_sync(index);
#else
    (void)index;
    return no_cuda("tgc_cuda_synchronize");
#endif
}

tgc_status tgc_cuda_set_stream(int index, void *stream)
{
#ifdef TGC_HAVE_CUDA
    tgc_status s = device_ok("tgc_cuda_set_stream", index);
    return s != TGC_OK ? s : tgc_cuda_stream_set(index, stream);
#else
    (void)index;
    (void)stream;
    return no_cuda("tgc_cuda_set_stream");
#endif
}

void *tgc_cuda_current_stream(int index)
{
#ifdef TGC_HAVE_CUDA
    if (device_ok("tgc_cuda_current_stream", index) != TGC_OK)
        return NULL;
    return tgc_cuda_stream_ptr(index);
#else
    (void)index;
    no_cuda("tgc_cuda_current_stream");
    return NULL;
#endif
}

static tgc_status memory_stats(int index, tgc_cuda_memstats *out)
{
#ifdef TGC_HAVE_CUDA
    tgc_status s = device_ok("tgc_cuda_memory_stats", index);
    if (s != TGC_OK)
        return s;
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (a) {
        tgc_mem_stats m = a->stats(a->ctx, index);
        out->in_use = m.in_use;
        out->cached = m.cached;
        out->peak = m.peak;
    }
    return tgc_cuda_mem_info(index, &out->device_free, &out->device_total);
#else
    (void)index, (void)out;
    return no_cuda("tgc_cuda_memory_stats");
#endif
}

tgc_status tgc_cuda_memory_stats_sized(int index, tgc_cuda_memstats *out, size_t out_size)
{
    if (!out)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_memory_stats: out is NULL");
    tgc_cuda_memstats m = {0, 0, 0, 0, 0}; /* zeros where the device cannot be asked */
    tgc_status st = memory_stats(index, &m);
    /* the caller's struct holds out_size bytes: write no further */
    tgc_status wst = tgc_struct_write("tgc_cuda_memory_stats", "out_size", out, out_size, &m,
                                      sizeof m, TGC_FIELD_END(tgc_cuda_memstats, in_use));
    return wst != TGC_OK ? wst : st;
}

void tgc_cuda_reset_peak(int index)
{
#ifdef TGC_HAVE_CUDA
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (device_ok("tgc_cuda_reset_peak", index) == TGC_OK && a && a->reset_peak)
        a->reset_peak(a->ctx, index);
#else
    (void)index;
#endif
}

void tgc_cuda_empty_cache(void)
{
#ifdef TGC_HAVE_CUDA
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (tgc_cuda_count() > 0 && a)
        a->empty_cache(a->ctx);
#endif
}

tgc_status tgc_cuda_device_name(int index, char *buf, size_t n)
{
    if (!buf || !n)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_device_name: buf is NULL or n is 0");
    buf[0] = 0;
#ifdef TGC_HAVE_CUDA
    tgc_status s = device_ok("tgc_cuda_device_name", index);
    if (s != TGC_OK)
        return s;
    snprintf(buf, n, "%s", tgc_cuda_name(index));
    return TGC_OK;
#else
    (void)index;
    return no_cuda("tgc_cuda_device_name");
#endif
}
