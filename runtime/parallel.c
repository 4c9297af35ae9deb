/* OpenMP-backed parallel loops (see parallel.h). */
#include <omp.h>

#include "runtime/parallel.h"

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
#pragma omp parallel num_threads(t)
    {
        int64_t k = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = n * k / nt, hi = n * (k + 1) / nt;
        if (lo < hi)
            fn(ctx, lo, hi);
    }
}
