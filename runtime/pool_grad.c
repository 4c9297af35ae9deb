/* Pool and embedding backward loops (see pool_grad.h). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/parallel.h"
#include "runtime/pool_grad.h"
#include "support/error.h"

typedef struct span {
    int64_t lo, hi, count;
} span;

/* The forward's windows along one dim, exactly as interp derives them (k_grad.c): k == 0
 * adaptive, else window k, stride s, padding p; the divisor counts the padding unless
 * exclude_pad. */
static void windows(span *win, int64_t m, int64_t n, int64_t k, int64_t s, int64_t p,
                    int exclude_pad)
{
    for (int64_t i = 0; i < m; i++) {
        int64_t lo, hi, count;
        if (k == 0) {
            lo = i * n / m;
            hi = ((i + 1) * n + m - 1) / m;
            count = hi - lo;
        } else {
            lo = i * s - p;
            hi = lo + k;
            count = (hi < n + p ? hi : n + p) - lo;
        }
        win[i].lo = lo > 0 ? lo : 0;
        win[i].hi = hi < n ? hi : n;
        win[i].count = exclude_pad ? win[i].hi - win[i].lo : count;
    }
}

typedef struct pool_job {
    const tgc_pool_grad_args *a;
    const span *wh, *ww;
    atomic_int oom;
} pool_job;

static void pool_planes(void *ctx, int64_t lo, int64_t hi)
{
    pool_job *j = ctx;
    const tgc_pool_grad_args *a = j->a;
    int64_t H = a->h, W = a->w, OH = a->oh, OW = a->ow;
    double *acc = malloc((size_t)(H * W) * sizeof *acc);
    if (!acc) {
        atomic_store(&j->oom, 1);
        return;
    }
    for (int64_t pl = lo; pl < hi; pl++) {
        const float *src = a->x ? a->x + pl * H * W : NULL, *gp = a->dy + pl * OH * OW;
        memset(acc, 0, (size_t)(H * W) * sizeof *acc);
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const span h = j->wh[oh], w = j->ww[ow];
                const double d = gp[oh * OW + ow];
                if (a->kind == TGC_POOL_GRAD_MAX) {
                    /* the forward's pick: v > best, or a NaN (which then stays) */
                    int64_t at = h.lo * W + w.lo;
                    double best = -INFINITY;
                    for (int64_t i = h.lo; i < h.hi; i++)
                        for (int64_t c = w.lo; c < w.hi; c++) {
                            double e = src[i * W + c];
                            if (e > best || e != e) {
                                best = e;
                                at = i * W + c;
                            }
                        }
                    if (h.lo < h.hi && w.lo < w.hi)
                        acc[at] += d;
                } else {
                    const double share = d / (double)(h.count * w.count);
                    for (int64_t i = h.lo; i < h.hi; i++)
                        for (int64_t c = w.lo; c < w.hi; c++)
                            acc[i * W + c] += share;
                }
            }
        float *dx = a->dx + pl * H * W;
        for (int64_t i = 0; i < H * W; i++)
            dx[i] = (float)acc[i];
    }
    free(acc);
}

tgc_status tgc_pool2d_grad_run(const tgc_pool_grad_args *a, int nthreads)
{
    if (!a || a->planes < 0 || a->h < 1 || a->w < 1 || a->oh < 0 || a->ow < 0 ||
        (a->kind != TGC_POOL_GRAD_ADAPTIVE &&
         (a->kh < 1 || a->kw < 1 || a->sh < 1 || a->sw < 1 || a->ph < 0 || a->pw < 0)) ||
        (a->kind == TGC_POOL_GRAD_ADAPTIVE && (a->oh < 1 || a->ow < 1)) || a->kind < 0 ||
        a->kind > TGC_POOL_GRAD_ADAPTIVE)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_pool2d_grad_run: bad sizes or kind");
    if (a->planes == 0)
        return TGC_OK;
    if (!a->dy || !a->dx || (a->kind == TGC_POOL_GRAD_MAX && !a->x))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_pool2d_grad_run: NULL pointer");
    span *win = malloc((size_t)(a->oh + a->ow + 1) * sizeof *win);
    if (!win)
        return tgc_set_error(TGC_ERR_OOM, "tgc_pool2d_grad_run: out of memory");
    int adaptive = a->kind == TGC_POOL_GRAD_ADAPTIVE;
    int excl = a->kind == TGC_POOL_GRAD_AVG && a->exclude_pad;
    windows(win, a->oh, a->h, adaptive ? 0 : a->kh, adaptive ? 1 : a->sh, adaptive ? 0 : a->ph,
            excl);
    windows(win + a->oh, a->ow, a->w, adaptive ? 0 : a->kw, adaptive ? 1 : a->sw,
            adaptive ? 0 : a->pw, excl);
    pool_job j = {.a = a, .wh = win, .ww = win + a->oh};
    atomic_init(&j.oom, 0);
    /* about 16K elements of work per chunk */
    int64_t per = (a->h * a->w + a->oh * a->ow) * 2 + 1;
    tgc_parallel_for(a->planes, 1 + 16384 / per, nthreads, pool_planes, &j);
    free(win);
    if (atomic_load(&j.oom))
        return tgc_set_error(TGC_ERR_OOM, "tgc_pool2d_grad_run: out of memory");
    return TGC_OK;
}

typedef struct emb_job {
    const float *dy;
    const int64_t *ids;
    int64_t n, v, d;
    float *dw;
} emb_job;

/* columns [lo, hi) of every row */
static void emb_cols(void *ctx, int64_t lo, int64_t hi)
{
    const emb_job *j = ctx;
    for (int64_t r = 0; r < j->v; r++)
        memset(j->dw + r * j->d + lo, 0, (size_t)(hi - lo) * sizeof(float));
    for (int64_t i = 0; i < j->n; i++) {
        float *dst = j->dw + j->ids[i] * j->d;
        const float *src = j->dy + i * j->d;
        for (int64_t c = lo; c < hi; c++)
            dst[c] += src[c];
    }
}

tgc_status tgc_embedding_grad_run(const float *dy, const int64_t *ids, int64_t n, int64_t v,
                                  int64_t d, float *dw, int nthreads)
{
    if (n < 0 || v < 0 || d < 0 || (v * d > 0 && !dw) || (n * d > 0 && (!dy || !ids)))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_embedding_grad_run: bad sizes or NULL");
    if (v * d == 0)
        return TGC_OK;
    emb_job j = {dy, ids, n, v, d, dw};
    /* column slices of at least 16 floats (a cache line each side of a slice boundary) */
    tgc_parallel_for(d, (n + v) * d < 65536 ? d : 16, nthreads, emb_cols, &j);
    return TGC_OK;
}
