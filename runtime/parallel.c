/* OpenMP-backed parallel loops (see parallel.h).
 *
 * ThreadSanitizer: libgomp is not instrumented, so TSan cannot see that a parallel region's
 * workers start after the caller's writes (the fork) and that the caller continues after
 * their writes (the join): it would report every kernel's inputs and outputs as races.
 * In TSan builds the two edges OpenMP guarantees are declared with __tsan_release /
 * __tsan_acquire on the region's own context, and nothing else: races among the workers
 * of one region, or between regions of different calling threads, are still reported. */
#include <omp.h>

#include "runtime/parallel.h"

#if defined(__SANITIZE_THREAD__)
#define TGC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TGC_TSAN 1
#endif
#endif

#ifdef TGC_TSAN
#include <sanitizer/tsan_interface.h>
#define FORK_RELEASE(p) __tsan_release(p)
#define FORK_ACQUIRE(p) __tsan_acquire(p)
#else
#define FORK_RELEASE(p) ((void)(p))
#define FORK_ACQUIRE(p) ((void)(p))
#endif

int tgc_threads_resolve(int num_threads)
{
    if (num_threads > 0)
        return num_threads;
    int n = omp_get_max_threads();
    return n > 0 ? n : 1;
}

void tgc_parallel_for(int64_t n, int64_t grain, int nthreads, tgc_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int t = tgc_threads_resolve(nthreads);
    int64_t max_chunks = (n + grain - 1) / grain;
    if (t > max_chunks)
        t = (int)max_chunks;
    if (t <= 1 || omp_in_parallel()) {
        fn(ctx, 0, n);
        return;
    }
    char fork_edge, join_edge; /* addresses for the TSan annotations only */
    FORK_RELEASE(&fork_edge);
#pragma omp parallel num_threads(t)
    {
        FORK_ACQUIRE(&fork_edge);
        int64_t k = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = n * k / nt, hi = n * (k + 1) / nt;
        if (lo < hi)
            fn(ctx, lo, hi);
        FORK_RELEASE(&join_edge);
    }
    FORK_ACQUIRE(&join_edge);
}
