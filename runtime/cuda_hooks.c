/* The CUDA device type's hooks (runtime/alloc.h's tgc_device_ops): what the public tgc_cuda_*
 * API, the tensor core and the communicators ask of CUDA, on top of runtime/cuda.c. The CUDA
 * backend registers them with itself (src/backend/cuda/cuda_backend.c); built only with the
 * backend, like the rest of runtime/cuda*.
 *
 * Thread-safety: that of the runtime functions it calls (all thread-safe). */
#include <stdio.h>

#include "runtime/cuda.h"
#include "support/error.h"

/* "<what>: <call>", the prefix of a driver call's error. */
static tgc_status cu(CUresult r, const char *what, const char *call)
{
    if (r == CUDA_SUCCESS)
        return TGC_OK;
    char w[160];
    snprintf(w, sizeof w, "%s: %s", what, call);
    return tgc_cuda_error(r, w);
}

static int loaded(void)
{
    return tgc_cuda_drv() != NULL;
}

static tgc_status enter(int index, const char *what)
{
    CUcontext ctx = tgc_cuda_context(index);
    if (!ctx)
        return tgc_last_status();
    return cu(tgc_cuda_drv()->cuCtxSetCurrent(ctx), what, "cuCtxSetCurrent");
}

static tgc_status stream_create(void **stream, const char *what)
{
    CUstream s = NULL;
    tgc_status st =
        cu(tgc_cuda_drv()->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), what, "cuStreamCreate");
    *stream = st == TGC_OK ? (void *)s : NULL;
    return st;
}

static void stream_destroy(void *stream)
{
    tgc_cuda_drv()->cuStreamDestroy((CUstream)stream);
}

static tgc_status event_create(void **event, const char *what)
{
    CUevent e = NULL;
    tgc_status st =
        cu(tgc_cuda_drv()->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), what, "cuEventCreate");
    *event = st == TGC_OK ? (void *)e : NULL;
    return st;
}

static void event_destroy(void *event)
{
    tgc_cuda_drv()->cuEventDestroy((CUevent)event);
}

static tgc_status record(void *event, void *stream, const char *what)
{
    return cu(tgc_cuda_drv()->cuEventRecord((CUevent)event, (CUstream)stream), what,
              "cuEventRecord");
}

static tgc_status stream_wait(void *stream, void *event, const char *what)
{
    return cu(tgc_cuda_drv()->cuStreamWaitEvent((CUstream)stream, (CUevent)event, 0), what,
              "cuStreamWaitEvent");
}

static int query(void *event, const char *what)
{
    CUresult r = tgc_cuda_drv()->cuEventQuery((CUevent)event);
    if (r == CUDA_SUCCESS)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    cu(r, what, "cuEventQuery");
    return -1;
}

static tgc_status capturing(void *stream, int *yes, const char *what)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    tgc_status st =
        cu(tgc_cuda_drv()->cuStreamIsCapturing((CUstream)stream, &cs), what, "cuStreamIsCapturing");
    *yes = cs != CU_STREAM_CAPTURE_STATUS_NONE;
    return st;
}

static int relax_capture(void)
{
    if (!tgc_cuda_drv())
        return 0;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    tgc_cuda_drv()->cuThreadExchangeStreamCaptureMode(&m);
    return 1;
}

static const tgc_device_stream_ops streams = {
    loaded, enter,       stream_create, stream_destroy, event_create,  event_destroy,
    record, stream_wait, query,         capturing,      relax_capture,
};

const tgc_device_ops tgc_cuda_device_ops = {
    .name = "cuda",
    .label = "CUDA",
    .load = tgc_cuda_load,
    .count = tgc_cuda_count,
    .synchronize = tgc_cuda_sync,
    .set_stream = tgc_cuda_stream_set,
    .current_stream = tgc_cuda_stream_ptr,
    .device_name = tgc_cuda_name,
    .mem_info = tgc_cuda_mem_info,
    .streams = &streams,
};
