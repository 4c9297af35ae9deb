/* Communicators on a GPU through the REAL NCCL (libnccl.so.2, or the caller's
 * TGC_NCCL_LIBRARY, e.g. PyTorch's nvidia/nccl/lib/libnccl.so.2): a world of size 1 on cuda:0
 * (all-reduce SUM out of place and AVG in place equal to the input, broadcast, many start / wait
 * pairs timed, a CUDA-graph capture of a copy + start / wait replayed with new inputs), a
 * one-device local group, and an init that times out (world 2, only rank 0). Prints what it
 * measured. Skips (rc 77, tests/gpu_skip.h) without a GPU, and with the reason when libnccl.so.2
 * cannot be opened. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/comm.h"
#include "runtime/nccl.h"
#ifdef TGC_HAVE_CUDA
#include "runtime/cuda.h"
#endif
#include "gpu_skip.h"

#ifdef TGC_HAVE_CUDA /* the cases that time anything need the CUDA backend */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

/* GPU_REQUIRE, then NCCL: without it the case is skipped with NCCL's reason. */
#define NCCL_REQUIRE()                                                                             \
    do {                                                                                           \
        GPU_REQUIRE();                                                                             \
        if (tgc_nccl_load() != TGC_OK) {                                                           \
            snprintf(gpu_skip_reason_, sizeof gpu_skip_reason_, "%s", tgc_last_error());           \
            gpu_skip_count_++;                                                                     \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#ifdef TGC_HAVE_CUDA
#define CU(call) assert_int_equal(tgc_cuda_error((call), #call), TGC_OK)

static void read_back(tgc_comm *c, CUstream s, CUdeviceptr p, float *h, size_t n)
{
    assert_int_equal(tgc_comm_synchronize(c, s), TGC_OK);
    CU(tgc_cuda_drv()->cuMemcpyDtoH(h, p, n * sizeof *h));
}
#endif

static void test_world1_all_reduce_broadcast_and_graph_replay(void **state)
{
    (void)state;
    NCCL_REQUIRE();
#ifdef TGC_HAVE_CUDA
    int v = tgc_nccl_version();
    printf("NCCL %d (%s), NCCL_NVLS_ENABLE=%s\n", v, tgc_nccl()->path,
           getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)");
    assert_non_null(getenv("NCCL_NVLS_ENABLE")); /* "0" unless the user set it */
    tgc_comm_id id;
    assert_int_equal(tgc_comm_unique_id(&id), TGC_OK);
    tgc_comm *c = NULL;
    double t0 = now_s();
    tgc_status st = tgc_comm_create(&id, 0, 1, tgc_cuda(0), 60, &c);
    if (st != TGC_OK)
        fail_msg("tgc_comm_create: %s", tgc_last_error());
    printf("world 1 init on cuda:0: %.1f ms\n", 1e3 * (now_s() - t0));
    assert_true(tgc_comm_handle(c) > 0);
    assert_int_equal(tgc_comm_device(c).type, TGC_DEVICE_CUDA);

    const tgc_cuda_driver *d = tgc_cuda_drv();
    assert_int_equal(tgc_cuda_enter(0), TGC_OK);
    CUstream s = NULL;
    CU(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    enum { N = 1 << 20 };
    size_t bytes = N * sizeof(float);
    float *h = malloc(bytes), *back = malloc(bytes);
    assert_non_null(h);
    assert_non_null(back);
    for (int i = 0; i < N; i++)
        h[i] = 0.5f * (float)(i % 1000) - 3.0f;
    CUdeviceptr src = 0, dst = 0, out = 0;
    CU(d->cuMemAlloc(&src, bytes));
    CU(d->cuMemAlloc(&dst, bytes));
    CU(d->cuMemAlloc(&out, bytes));
    CU(d->cuMemcpyHtoD(src, h, bytes));
    CU(d->cuCtxSynchronize()); /* a pageable copy may still be in flight */

    /* SUM out of place, on the caller's stream s */
    assert_int_equal(
        tgc_comm_all_reduce_start(c, (void *)src, (void *)dst, N, TGC_F32, TGC_DIST_SUM, s),
        TGC_OK);
    assert_int_equal(tgc_comm_wait(c, (void *)dst, s), TGC_OK);
    read_back(c, s, dst, back, N);
    assert_memory_equal(back, h, bytes);
    /* AVG in place, on the thread's stream (NULL) */
    assert_int_equal(
        tgc_comm_all_reduce_start(c, (void *)dst, (void *)dst, N, TGC_F32, TGC_DIST_AVG, NULL),
        TGC_OK);
    assert_int_equal(tgc_comm_wait(c, (void *)dst, NULL), TGC_OK);
    assert_int_equal(tgc_comm_synchronize(c, NULL), TGC_OK);
    CU(d->cuMemcpyDtoH(back, dst, bytes));
    assert_memory_equal(back, h, bytes);
    /* broadcast from root 0 leaves the buffer as it is */
    assert_int_equal(tgc_comm_broadcast(c, (void *)dst, N, TGC_F32, 0, s), TGC_OK);
    read_back(c, s, dst, back, N);
    assert_memory_equal(back, h, bytes);
    assert_int_equal(
        tgc_comm_all_reduce_start(c, (void *)dst, (void *)dst, 4, TGC_I32, TGC_DIST_AVG, s),
        TGC_ERR_DTYPE);

    /* many start / wait pairs, timed */
    enum { REPS = 200 };
    t0 = now_s();
    for (int r = 0; r < REPS; r++) {
        assert_int_equal(
            tgc_comm_all_reduce_start(c, (void *)dst, (void *)dst, N, TGC_F32, TGC_DIST_SUM, s),
            TGC_OK);
        assert_int_equal(tgc_comm_wait(c, (void *)dst, s), TGC_OK);
    }
    assert_int_equal(tgc_comm_synchronize(c, s), TGC_OK);
    printf("world 1 all-reduce of %d f32 (4 MiB): %.1f us each (%d start/wait pairs)\n", N,
           1e6 * (now_s() - t0) / REPS, REPS);

    /* capture a copy and an all-reduce (start + wait) into a graph, replay with new inputs */
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CU(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CU(d->cuMemcpyDtoDAsync(dst, src, bytes, s));
    st = tgc_comm_all_reduce_start(c, (void *)dst, (void *)out, N, TGC_F32, TGC_DIST_AVG, s);
    tgc_status st2 = st == TGC_OK ? tgc_comm_wait(c, (void *)out, s) : st;
    CUresult end = d->cuStreamEndCapture(s, &g);
    if (st != TGC_OK || st2 != TGC_OK)
        fail_msg("start / wait in a capture: %s", tgc_last_error());
    CU(end);
    CU(d->cuGraphInstantiateWithFlags(&ge, g, 0));
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < N; i++)
            h[i] = (float)(rep + 1) * 0.25f * (float)(i % 777) - 1.0f;
        CU(d->cuMemcpyHtoD(src, h, bytes));
        /* from pageable memory the copy may still be in flight when it returns, on the legacy
         * stream, which the non-blocking s does not wait for */
        CU(d->cuCtxSynchronize());
        t0 = now_s();
        CU(d->cuGraphLaunch(ge, s));
        assert_int_equal(tgc_comm_watch(c, s), TGC_OK);
        read_back(c, s, out, back, N);
        printf("graph replay %d (copy + all-reduce of 4 MiB): %.1f us to the host\n", rep,
               1e6 * (now_s() - t0));
        assert_memory_equal(back, h, bytes);
    }
    CU(d->cuGraphExecDestroy(ge));
    CU(d->cuGraphDestroy(g));
    assert_int_equal(tgc_comm_status(c), TGC_OK);
    tgc_comm_free(c);
    CU(d->cuMemFree(src));
    CU(d->cuMemFree(dst));
    CU(d->cuMemFree(out));
    CU(d->cuStreamDestroy(s));
    free(h);
    free(back);
#endif
}

static void test_local_group_of_one_device(void **state)
{
    (void)state;
    NCCL_REQUIRE();
#ifdef TGC_HAVE_CUDA
    tgc_device dev = tgc_cuda(0);
    tgc_comm *c = NULL;
    double t0 = now_s();
    if (tgc_comm_create_local(1, &dev, 60, &c) != TGC_OK)
        fail_msg("tgc_comm_create_local: %s", tgc_last_error());
    printf("local group of 1 on cuda:0: %.1f ms\n", 1e3 * (now_s() - t0));
    const tgc_cuda_driver *d = tgc_cuda_drv();
    double h[5] = {1, -2, 3.5, 4, 1e300}, back[5] = {0};
    CUdeviceptr p = 0;
    CU(d->cuMemAlloc(&p, sizeof h));
    CU(d->cuMemcpyHtoD(p, h, sizeof h));
    CU(d->cuCtxSynchronize());
    assert_int_equal(
        tgc_comm_all_reduce_start(c, (void *)p, (void *)p, 5, TGC_F64, TGC_DIST_MAX, NULL),
        TGC_OK);
    assert_int_equal(tgc_comm_wait(c, (void *)p, NULL), TGC_OK);
    assert_int_equal(tgc_comm_synchronize(c, NULL), TGC_OK);
    CU(d->cuMemcpyDtoH(back, p, sizeof back));
    assert_memory_equal(back, h, sizeof h);
    tgc_comm_free(c);
    CU(d->cuMemFree(p));
#endif
}

static void test_init_times_out_when_rank_1_never_joins(void **state)
{
    (void)state;
    NCCL_REQUIRE();
#ifdef TGC_HAVE_CUDA
    tgc_comm_id id;
    assert_int_equal(tgc_comm_unique_id(&id), TGC_OK);
    tgc_comm *c = (tgc_comm *)(uintptr_t)1;
    double t0 = now_s();
    tgc_status st = tgc_comm_create(&id, 0, 2, tgc_cuda(0), 2.0, &c);
    double dt = now_s() - t0;
    printf("world 2 with only rank 0, timeout 2 s: %s after %.2f s: %s\n", tgc_status_str(st), dt,
           tgc_last_error());
    assert_int_equal(st, TGC_ERR_TIMEOUT);
    assert_null(c);
    assert_non_null(strstr(tgc_last_error(), "did not join within 2 s"));
    assert_true(dt >= 1.9 && dt < 15.0); /* the abort of an NCCL init may take a while */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world1_all_reduce_broadcast_and_graph_replay),
        cmocka_unit_test(test_local_group_of_one_device),
        cmocka_unit_test(test_init_times_out_when_rank_1_never_joins),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
