/* Splitting loops across threads. Kernels are written over a half-open range of their
 * outermost (parallel) iteration space; the runtime hands each thread one contiguous
 * chunk, through OpenMP's thread pool.
 *
 * nthreads: a cfg.num_threads value (0 = every core the process may use). Calls from
 * inside a parallel region run serially, so nested kernels never oversubscribe. */
#ifndef TGC_RUNTIME_PARALLEL_H
#define TGC_RUNTIME_PARALLEL_H

#include <stdint.h>

typedef void (*tgc_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* The thread count a cfg.num_threads value means on this machine (>= 1). */
int tgc_threads_resolve(int num_threads);

/* Runs fn(ctx, lo, hi) over [0, n) split into at most nthreads chunks of at least `grain`
 * iterations each (grain >= 1); chunks are contiguous and in order. */
void tgc_parallel_for(int64_t n, int64_t grain, int nthreads, tgc_range_fn fn, void *ctx);

#endif
