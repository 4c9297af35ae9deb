/* Timing helpers shared by the benchmarks in tests/bench/ (header only). */
#ifndef TGC_BENCH_UTIL_H
#define TGC_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tgc/tgc.h"

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef int (*run_fn)(void *ctx);

/* One warmup, then up to iters runs while the budget lasts (at least one). Returns the median
 * seconds per run, or < 0 when a run fails; *runs (may be NULL) gets the count. */
static inline double time_runs(run_fn fn, void *ctx, int iters, double budget, int *runs)
{
    double t[256];
    if (iters > 256)
        iters = 256;
    double start = now();
    if (fn(ctx) != 0)
        return -1;
    int n = 0;
    while (n < iters && (n == 0 || now() - start < budget)) {
        double t0 = now();
        if (fn(ctx) != 0)
            return -1;
        t[n++] = now() - t0;
    }
    if (runs)
        *runs = n;
    return median(t, n);
}

/* The backend a compiled function runs on ("llvm", "interp"). */
static inline void backend_of(const tgc_fn *f, char *buf, size_t n)
{
    tgc_stats s;
    snprintf(buf, n, "%s", tgc_fn_stats(f, &s) == TGC_OK ? s.backend : "?");
}

#endif
