/* The public CUDA device API (include/tgc/cuda.h): availability, device count and names,
 * the thread's streams, synchronization and memory statistics, through the hooks the CUDA
 * backend registers for TGC_DEVICE_CUDA (runtime/alloc.h's tgc_device_ops) and the allocator
 * registered for the type. Always compiled: in a build without the CUDA backend the type's
 * registration has no hooks, only why it is missing, and every function reports that.
 * Thread-safety: that of the hooks it calls (all thread-safe). */
#include <stdio.h>

#include "runtime/alloc.h"
#include "support/error.h"
#include "support/struct_size.h"
#include "tgc/cuda.h"

/* The CUDA hooks, or NULL when the build has none (then why() says why). */
static const tgc_device_ops *cuda_ops(void)
{
    const tgc_device_ops *o = tgc_device_ops_of(TGC_DEVICE_CUDA);
    return o && o->load ? o : NULL;
}

static const char *why(void)
{
    const tgc_device_ops *o = tgc_device_ops_of(TGC_DEVICE_CUDA);
    return o && o->missing ? o->missing : "no CUDA backend is registered";
}

/* Worded like device_ok's failure with CUDA: "<fn>: CUDA is not available: <reason>". */
static tgc_status no_cuda(const char *fn)
{
    return tgc_set_error(TGC_ERR_DEVICE, "%s: CUDA is not available: %s", fn, why());
}

/* TGC_OK when the driver is loaded and index names a device; else the error, set. */
static tgc_status device_ok(const char *fn, const tgc_device_ops *o, int index)
{
    if (!o)
        return no_cuda(fn);
    if (o->load() != TGC_OK) {
        char why_not[768];
        snprintf(why_not, sizeof why_not, "%s", tgc_last_error());
        return tgc_set_error(TGC_ERR_DEVICE, "%s: CUDA is not available: %s", fn, why_not);
    }
    int n = o->count();
    if (index < 0 || index >= n)
        return tgc_set_error(TGC_ERR_DEVICE,
                             "%s: device cuda:%d is not available: %d CUDA device%s present", fn,
                             index, n, n == 1 ? " is" : "s are");
    return TGC_OK;
}

tgc_status tgc_cuda_check(void)
{
    const tgc_device_ops *o = cuda_ops();
    if (!o)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc_cuda_check: %s", why());
    return tgc_error_prefix(o->load(), "tgc_cuda_check");
}

int tgc_cuda_is_available(void)
{
    const tgc_device_ops *o = cuda_ops();
    if (!o)
        return 0;
    tgc_status was = tgc_last_status(); /* a predicate: the thread's error stays as it was */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    int ok = o->load() == TGC_OK;
    tgc_set_error(was, "%s", msg);
    return ok;
}

int tgc_cuda_device_count(void)
{
    const tgc_device_ops *o = cuda_ops();
    return o && o->load() == TGC_OK ? o->count() : 0;
}

tgc_status tgc_cuda_synchronize(int index)
{
    const tgc_device_ops *o = cuda_ops();
    tgc_status s = device_ok("tgc_cuda_synchronize", o, index);
    return s != TGC_OK ? s : o->synchronize(index);
}

tgc_status tgc_cuda_set_stream(int index, void *stream)
{
    const tgc_device_ops *o = cuda_ops();
    tgc_status s = device_ok("tgc_cuda_set_stream", o, index);
    return s != TGC_OK ? s : o->set_stream(index, stream);
}

void *tgc_cuda_current_stream(int index)
{
    const tgc_device_ops *o = cuda_ops();
    if (device_ok("tgc_cuda_current_stream", o, index) != TGC_OK)
        return NULL;
    return o->current_stream(index);
}

static tgc_status memory_stats(int index, tgc_cuda_memstats *out)
{
    const tgc_device_ops *o = cuda_ops();
    tgc_status s = device_ok("tgc_cuda_memory_stats", o, index);
    if (s != TGC_OK)
        return s;
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (a) {
        tgc_mem_stats m = a->stats(a->ctx, index);
        out->in_use = m.in_use;
        out->cached = m.cached;
        out->peak = m.peak;
    }
    return o->mem_info(index, &out->device_free, &out->device_total);
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
    const tgc_device_ops *o = cuda_ops();
    if (!o) /* nothing to reset, nothing to report */
        return;
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (device_ok("tgc_cuda_reset_peak", o, index) == TGC_OK && a && a->reset_peak)
        a->reset_peak(a->ctx, index);
}

void tgc_cuda_empty_cache(void)
{
    const tgc_device_ops *o = cuda_ops();
    const tgc_allocator *a = tgc_allocator_of(TGC_DEVICE_CUDA);
    if (o && o->count() > 0 && a)
        a->empty_cache(a->ctx);
}

tgc_status tgc_cuda_device_name(int index, char *buf, size_t n)
{
    if (!buf || !n)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_cuda_device_name: buf is NULL or n is 0");
    buf[0] = 0;
    const tgc_device_ops *o = cuda_ops();
    tgc_status s = device_ok("tgc_cuda_device_name", o, index);
    if (s != TGC_OK)
        return s;
    snprintf(buf, n, "%s", o->device_name(index));
    return TGC_OK;
}
