/* The native-op program on the devices: its text compiled and loaded through the program cache
 * (cuda_program.h: once per architecture, from cfg.cache_dir when an earlier process left it
 * there, loaded once per device), the kernel handles of each device kept here, and the
 * launches, stream synchronization and capture query of cuda_ops.c.
 *
 * Thread-safety: one mutex guards the per-device kernel tables; the first caller for a device
 * gets the program and its kernels while later callers wait, and a failure is remembered
 * (status and message) and repeated on every later call for that device. After that,
 * launches read the kernel table without the lock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/cuda_program.h"
#include "runtime/cuda.h"
#include "support/error.h"

typedef struct ops_dev {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    tgc_status status;
    char msg[768];
    CUfunction fn[OPS_K_COUNT];
    int sms;
} ops_dev;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ops_dev g_devs[TGC_CUDA_MAX_DEVICES];

static tgc_status load_dev(int dev, const char *cache_dir, ops_dev *d)
{
    const tgc_cuda_props *pr = tgc_cuda_props_of(dev);
    if (!tgc_cuda_drv() || !pr)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: device cuda:%d is not available", dev);
    char *src = tgc_cuda_ops_source();
    if (!src)
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for the native-op program");
    const tgc_cuda_program *prog = NULL;
    tgc_status s =
        tgc_cuda_program_get("tgc_cuda_ops", src, pr->major * 10 + pr->minor, cache_dir, &prog);
    free(src);
    int n;
    const char *const *names = tgc_cuda_ops_kernel_names(&n);
    for (int k = 0; k < n && s == TGC_OK; k++)
        s = tgc_cuda_program_function(prog, dev, names[k], &d->fn[k]);
    if (s != TGC_OK)
        return s;
    d->sms = pr->sms > 0 ? pr->sms : 1;
    return TGC_OK;
}

static tgc_status dev_ready(int dev, const char *cache_dir, ops_dev **out)
{
    if (dev < 0 || dev >= TGC_CUDA_MAX_DEVICES)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: no device cuda:%d", dev);
    ops_dev *d = &g_devs[dev];
    pthread_mutex_lock(&g_lock);
    if (d->state == 0) {
        tgc_status s = load_dev(dev, cache_dir, d);
        d->state = s == TGC_OK ? 1 : -1;
        d->status = s;
        if (s != TGC_OK)
            snprintf(d->msg, sizeof d->msg, "%s", tgc_last_error());
    }
    int state = d->state;
    tgc_status st = d->status;
    pthread_mutex_unlock(&g_lock);
    if (state < 0)
        return tgc_set_error(st, "%s", d->msg);
    *out = d;
    return TGC_OK;
}

tgc_status tgc_cuda_ops_load(int dev, const char *cache_dir)
{
    ops_dev *d = NULL;
    return dev_ready(dev, cache_dir, &d);
}

static CUstream stream_of(const ops_ctx *c)
{
    return c->stream ? (CUstream)c->stream : tgc_cuda_stream(c->dev.index);
}

tgc_status tgc_ops_launch(const ops_ctx *c, ops_kernel k, ops_shape shape, int64_t work,
                          int block_hint, void **params)
{
    if (work <= 0)
        return TGC_OK;
    ops_dev *d = NULL;
    tgc_status s = dev_ready(c->dev.index, c->cache_dir, &d);
    if (s == TGC_OK)
        s = tgc_cuda_enter(c->dev.index);
    if (s != TGC_OK)
        return s;
    CUstream st = stream_of(c);
    if (!st)
        return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_DEVICE;
    const int64_t cap = (int64_t)d->sms * 32;
    unsigned block = block_hint >= 32 && block_hint <= 1024 ? (unsigned)block_hint / 32 * 32 : 256;
    int64_t grid;
    switch (shape) {
    case OPS_GRID: grid = (work + block - 1) / block; break;
    case OPS_BLOCKS: grid = work; break;
    case OPS_WARPS: grid = (work + block / 32 - 1) / (block / 32); break;
    default: grid = 1; break;
    }
    if (grid > cap && shape != OPS_SINGLE)
        grid = cap; /* the kernels stride over the rest */
    if (grid < 1)
        grid = 1;
    int n;
    const char *const *names = tgc_cuda_ops_kernel_names(&n);
    char what[128];
    snprintf(what, sizeof what, "tgc_%s: launching %s", c->op ? c->op : "op", names[k]);
    return tgc_cuda_error(tgc_cuda_drv()->cuLaunchKernel(d->fn[k], (unsigned)grid, 1, 1, block, 1,
                                                         1, 0, st, params, NULL),
                          what);
}

tgc_status tgc_ops_sync(const ops_ctx *c)
{
    tgc_status s = tgc_cuda_drv() ? tgc_cuda_enter(c->dev.index)
                                  : tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: CUDA is not loaded");
    if (s != TGC_OK)
        return s;
    CUstream st = stream_of(c);
    if (!st)
        return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_DEVICE;
    char what[96];
    snprintf(what, sizeof what, "tgc_%s: waiting for its kernels", c->op ? c->op : "op");
    return tgc_cuda_error(tgc_cuda_drv()->cuStreamSynchronize(st), what);
}

int tgc_ops_capturing(const ops_ctx *c)
{
    if (!tgc_cuda_drv() || tgc_cuda_enter(c->dev.index) != TGC_OK) {
        tgc_clear_error();
        return 0;
    }
    CUstream st = stream_of(c);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!st || tgc_cuda_drv()->cuStreamIsCapturing(st, &cs) != CUDA_SUCCESS) {
        tgc_clear_error();
        return 0;
    }
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}
