/* The CUDA runtime layer (runtime/cuda*.c, include/tgc/cuda.h) through the public API.
 *
 * Without a usable GPU: tgc_cuda_check and every creation on tgc_cuda(i) fail with
 * TGC_ERR_DEVICE and a message naming what is missing (the test finds out itself, with
 * dlopen, which library is missing, and expects exactly that), repeatably. The driver
 * override TGC_CUDA_DRIVER is tested in child processes (the driver is loaded once per
 * process): a path that does not exist, and the toolkit's stub libcuda, which opens, has
 * every symbol the table needs, and fails cuInit with CUDA_ERROR_STUB_LIBRARY.
 *
 * With a GPU (tgc_cuda_check() == TGC_OK; otherwise these tests are skipped and one line
 * says how many and why): the caching allocator's reuse and statistics, round trips
 * host -> device -> device -> host of odd sizes across the staging chunk boundaries, from and
 * to page-locked host memory (copied without staging), strided
 * device views read back, an allocation larger than the GPU (TGC_ERR_OOM naming the bytes
 * asked and free, the process going on), allocation refused during stream capture, per-thread and
 * caller-set streams with stream-keyed reuse, memory statistics and empty_cache, and the
 * capture pools of CUDA-graph capture (tgc_cuda_pool_*: reuse inside the pool only, blocks
 * kept by the pool after its end, handed to the general cache at release, live blocks at
 * release, allocation in a thread-local capture, out of memory without invalidating the
 * capture, statistics). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensor/tensor_impl.h"
#include "tgc/cuda.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"
#ifdef TGC_HAVE_CUDA
#include "runtime/cuda.h"
#endif

static int g_gpu;           /* tgc_cuda_check() == TGC_OK */
static char g_self[4096];   /* this program, run again as a child */
static char g_reason[1024]; /* why not */

static int g_skipped_gpu, g_skipped_host; /* cases skipped for want of a GPU, or for one */

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!g_gpu) {                                                                              \
            g_skipped_gpu++;                                                                       \
            skip();                                                                                \
        }                                                                                          \
    } while (0)
#define NEED_NO_GPU()                                                                              \
    do {                                                                                           \
        if (g_gpu) {                                                                               \
            g_skipped_host++;                                                                      \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- without a GPU ---- */

#ifdef TGC_HAVE_CUDA
/* What tgc_cuda_check must say on this machine, found independently: the library that
 * cannot be opened, or NULL when libcuda opens (then the failure, if any, is later). */
static const char *expected_missing(void)
{
    if (getenv("TGC_CUDA_DRIVER"))
        return NULL;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return NULL;
    }
    h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return NULL;
    }
    return "libcuda.so.1 could not be opened (";
}

#endif

static void test_unavailable_reason(void **state)
{
    (void)state;
    NEED_NO_GPU();
    tgc_status s = tgc_cuda_check();
    assert_int_equal(s, TGC_ERR_DEVICE);
    assert_int_equal(strncmp(tgc_last_error(), "tgc_cuda_check: ", 16), 0);
    char first[1024];
    snprintf(first, sizeof first, "%s", tgc_last_error());
#ifdef TGC_HAVE_CUDA
    const char *want = expected_missing();
    if (want) {
        check_error(s, TGC_ERR_DEVICE, want);
        check_error(s, TGC_ERR_DEVICE, "no NVIDIA driver on this machine");
    }
#else
    check_error(s, TGC_ERR_DEVICE, "this build has no CUDA backend");
#endif
    /* remembered: the same status and message every time */
    for (int i = 0; i < 3; i++) {
        tgc_clear_error();
        assert_int_equal(tgc_cuda_check(), TGC_ERR_DEVICE);
        assert_string_equal(tgc_last_error(), first);
    }
    assert_int_equal(tgc_cuda_device_count(), 0);
    /* the predicate: 0, and the thread's error untouched (none, or an earlier one) */
    tgc_clear_error();
    assert_int_equal(tgc_cuda_is_available(), 0);
    assert_int_equal(tgc_last_status(), TGC_OK);
    assert_string_equal(tgc_last_error(), "");
}

static void test_unavailable_tensors(void **state)
{
    (void)state;
    NEED_NO_GPU();
    const int64_t shape[] = {2, 3};
    char want[1200];
    for (int i = 0; i < 3; i++) {
        tgc_clear_error();
        assert_null(tgc_empty(shape, 2, TGC_F32, tgc_cuda(0)));
        snprintf(want, sizeof want, "tgc_empty: device cuda:0 is not available: %s", g_reason);
        check_error(tgc_last_status(), TGC_ERR_DEVICE, want);
#ifdef TGC_HAVE_CUDA
        if (expected_missing())
            check_error(tgc_last_status(), TGC_ERR_DEVICE, "libcuda.so.1");
#endif
    }
    tgc_tensor *h = tgc_ones(shape, 2, TGC_F32, tgc_cpu());
    assert_null(tgc_to(h, tgc_cuda(0)));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_to: device cuda:0 is not available: ");
    assert_null(tgc_zeros(shape, 2, TGC_F16, tgc_cuda(1)));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_zeros: device cuda:1 is not available");
    /* the host tensor is untouched */
    assert_true(tgc_item_f64(h) == 1.0);
}

static void test_unavailable_api(void **state)
{
    (void)state;
    NEED_NO_GPU();
    char name[64] = "x";
    tgc_cuda_memstats m = {1, 1, 1, 1, 1};
    check_error(tgc_cuda_synchronize(0), TGC_ERR_DEVICE, g_reason);
    check_error(tgc_cuda_set_stream(0, NULL), TGC_ERR_DEVICE, g_reason);
    assert_null(tgc_cuda_current_stream(0));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    check_error(tgc_cuda_memory_stats(0, &m), TGC_ERR_DEVICE, g_reason);
    assert_true(m.in_use == 0 && m.cached == 0 && m.peak == 0 && m.device_total == 0);
    check_error(tgc_cuda_device_name(0, name, sizeof name), TGC_ERR_DEVICE, g_reason);
    assert_string_equal(name, "");
    check_error(tgc_cuda_memory_stats(0, NULL), TGC_ERR_INVALID_ARG, "out is NULL");
    tgc_cuda_empty_cache(); /* nothing to do, no crash */
    tgc_cuda_reset_peak(0);
    assert_int_equal(tgc_cuda_device_count(), 0);
}

/* ---- the driver override, in child processes ---- */

#ifdef TGC_HAVE_CUDA
/* Runs this test binary as "--child" with TGC_CUDA_DRIVER=driver; its output (status
 * name, a newline, the message) into out. */
static void run_child(const char *driver, char *out, size_t n)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("TGC_CUDA_DRIVER", driver, 1);
        execl(g_self, "test_cuda_runtime", "--child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fd[0], out + got, n - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = 0;
    close(fd[0]);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

#endif

static int child_main(void)
{
    tgc_status s = tgc_cuda_check();
    printf("%s\n%s\n", tgc_status_str(s), tgc_last_error());
    /* and a tensor on the device carries the same reason */
    const int64_t shape[] = {4};
    tgc_clear_error();
    tgc_tensor *t = tgc_empty(shape, 1, TGC_F32, tgc_cuda(0));
    printf("%s\n%s\n", t ? "tensor" : "null", tgc_last_error());
    tgc_shutdown();
    return 0;
}

#ifdef TGC_HAVE_CUDA
static void expect_in(const char *out, const char *text)
{
    if (!strstr(out, text))
        fail_msg("child output \"%s\" lacks \"%s\"", out, text);
}

#endif

static void test_driver_override_missing(void **state)
{
    (void)state;
#ifndef TGC_HAVE_CUDA
    skip();
#else
    char out[4096];
    run_child("/nonexistent/libcuda.so.1", out, sizeof out);
    expect_in(out, "TGC_ERR_DEVICE\ntgc_cuda_check: TGC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "
                   "could not be opened (");
    expect_in(out, "null\ntgc_empty: device cuda:0 is not available: TGC_CUDA_DRIVER="
                   "/nonexistent/libcuda.so.1 could not be opened");
#endif
}

static void test_driver_override_stub(void **state)
{
    (void)state;
#ifndef TGC_HAVE_CUDA
    skip();
#else
    /* the toolkit's stub: where the build found the toolkit, CUDA_HOME, /usr/local/cuda */
    char stub[512] = "";
    const char *home = getenv("CUDA_HOME");
    const char *roots[] = {
#ifdef TGC_CUDA_LIBDIR
        TGC_CUDA_LIBDIR "/..",
#endif
        home ? home : "/usr/local/cuda", "/usr/local/cuda"};
    for (int i = 0; i < N_OF(roots) && !*stub; i++) {
        snprintf(stub, sizeof stub, "%s/lib64/stubs/libcuda.so", roots[i]);
        if (access(stub, R_OK) != 0)
            stub[0] = 0;
    }
    if (!*stub)
        skip(); /* a toolkit without the stub library */
    char out[4096];
    run_child(stub, out, sizeof out);
    /* it opened and every symbol of the table was found: the failure is cuInit's */
    expect_in(out, "TGC_ERR_DEVICE\ntgc_cuda_check: cuInit failed: CUDA_ERROR_STUB_LIBRARY (");
    expect_in(out, "null\ntgc_empty: device cuda:0 is not available: cuInit failed: "
                   "CUDA_ERROR_STUB_LIBRARY");
#endif
}

/* ---- with a GPU ---- */

static tgc_cuda_memstats stats0(void)
{
    tgc_cuda_memstats m;
    assert_int_equal(tgc_cuda_memory_stats(0, &m), TGC_OK);
    return m;
}

static void *dev_ptr(const tgc_tensor *t)
{
    return t->storage->data;
}

static void test_gpu_cache_reuse(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t shape[] = {1000}; /* 4000 bytes: the 4096-byte class */
    tgc_cuda_memstats a = stats0();
    tgc_tensor *t = tgc_empty(shape, 1, TGC_F32, tgc_cuda(0));
    assert_non_null(t);
    void *p = dev_ptr(t);
    tgc_cuda_memstats b = stats0();
    assert_true(b.in_use == a.in_use + 4096);
    assert_true(b.peak >= b.in_use);
    tgc_tensor_free(t);
    tgc_cuda_memstats c = stats0();
    assert_true(c.in_use == a.in_use);
    assert_true(c.cached == b.cached + 4096);
    /* the same class on the same stream: the cached block comes back */
    const int64_t shape2[] = {1020}; /* 4080 bytes, same class */
    tgc_tensor *u = tgc_empty(shape2, 1, TGC_F32, tgc_cuda(0));
    assert_non_null(u);
    assert_ptr_equal(dev_ptr(u), p);
    tgc_cuda_memstats d = stats0();
    assert_true(d.cached == c.cached - 4096);
    assert_true(d.in_use == a.in_use + 4096);
    tgc_tensor_free(u);
}

static uint32_t g_rng = 12345;
static uint8_t rnd8(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return (uint8_t)(g_rng >> 24);
}

static void test_gpu_round_trips(void **state)
{
    (void)state;
    NEED_GPU();
    const size_t mib = (size_t)1 << 20;
    const size_t sizes[] = {1,       3,           511,         512,     513,
                            4095,    65537,       4 * mib - 1, 4 * mib, 4 * mib + 1,
                            8 * mib, 8 * mib + 5, 9 * mib + 3};
    for (int k = 0; k < N_OF(sizes); k++) {
        size_t n = sizes[k];
        uint8_t *src = malloc(n), *back = malloc(n);
        assert_non_null(src);
        assert_non_null(back);
        for (size_t i = 0; i < n; i++)
            src[i] = rnd8() & 1; /* bool bytes */
        int64_t shape[] = {(int64_t)n};
        tgc_scope_push();
        tgc_tensor *h = tgc_from_data(src, n, shape, 1, TGC_BOOL, tgc_cpu());
        tgc_tensor *d = tgc_to(h, tgc_cuda(0)); /* host -> device */
        tgc_tensor *e = tgc_empty(shape, 1, TGC_BOOL, tgc_cuda(0));
        assert_non_null(d);
        assert_non_null(e);
        assert_int_equal(tgc_copy_(e, d), TGC_OK); /* device -> device */
        memset(back, 7, n);
        assert_int_equal(tgc_copy_to_host(e, back, n), TGC_OK); /* device -> host */
        if (memcmp(src, back, n))
            fail_msg("round trip of %zu bytes differs", n);
        tgc_tensor *h2 = tgc_to(d, tgc_cpu());
        assert_non_null(h2);
        assert_int_equal(memcmp(tgc_host_data(h2), src, n), 0);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
        free(src);
        free(back);
    }
    /* 32-bit elements across chunk boundaries, and scalars */
    int64_t n = (int64_t)(9 * mib + 3) / 4 * 4 / 4;
    int32_t *v = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        v[i] = (int32_t)(i * 2654435761u);
    int64_t shape[] = {n};
    tgc_tensor *d = tgc_from_data(v, (size_t)n * 4, shape, 1, TGC_I32, tgc_cuda(0));
    assert_non_null(d);
    assert_int_equal(tgc_copy_to_host(d, w, (size_t)n * 4), TGC_OK);
    assert_int_equal(memcmp(v, w, (size_t)n * 4), 0);
    assert_true(tgc_item_i64(d) == v[0]);
    free(v);
    free(w);
}

/* Host memory the driver page-locked is copied without staging; the bytes must be the same. */
static void test_gpu_pinned_host(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    const tgc_cuda_driver *d = tgc_cuda_drv();
    const size_t n = ((size_t)5 << 20) + 7; /* past the size that asks whether memory is pinned */
    uint8_t *in = NULL, *out = NULL;
    assert_int_equal(tgc_cuda_enter(0), TGC_OK);
    assert_int_equal(d->cuMemHostAlloc((void **)&in, n, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    assert_int_equal(d->cuMemHostAlloc((void **)&out, n, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        in[i] = rnd8() & 1;
    memset(out, 9, n);
    int64_t shape[] = {(int64_t)n};
    tgc_tensor *t = tgc_from_data(in, n, shape, 1, TGC_BOOL, tgc_cuda(0));
    assert_non_null(t);
    assert_int_equal(tgc_copy_to_host(t, out, n), TGC_OK);
    assert_int_equal(memcmp(in, out, n), 0);
    /* and pinned to pageable through the device */
    uint8_t *page = malloc(n);
    assert_int_equal(tgc_copy_to_host(t, page, n), TGC_OK);
    assert_int_equal(memcmp(in, page, n), 0);
    free(page);
    assert_int_equal(d->cuMemFreeHost(in), CUDA_SUCCESS);
    assert_int_equal(d->cuMemFreeHost(out), CUDA_SUCCESS);
#endif
}

static void test_gpu_strided_read(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t shape[] = {37, 53};
    float src[37 * 53];
    for (int i = 0; i < 37 * 53; i++)
        src[i] = (float)i * 0.5f - 100;
    tgc_tensor *h = tgc_from_data(src, sizeof src, shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *d = tgc_to(h, tgc_cuda(0));
    assert_non_null(d);
    tgc_tensor *dt = tgc_transpose(d, 0, 1);
    assert_non_null(dt);
    float got[37 * 53];
    assert_int_equal(tgc_copy_to_host(dt, got, sizeof got), TGC_OK);
    for (int i = 0; i < 53; i++)
        for (int j = 0; j < 37; j++)
            assert_true(got[i * 37 + j] == src[j * 53 + i]);
    /* a dense copy of the view on the device */
    tgc_tensor *dc = tgc_to(dt, tgc_cuda(0));
    assert_non_null(dc);
    assert_int_equal(tgc_device_of(dc).type, TGC_DEVICE_CUDA);
    memset(got, 0, sizeof got);
    assert_int_equal(tgc_copy_to_host(dc, got, sizeof got), TGC_OK);
    assert_true(got[1] == src[53]);
    assert_true(got[37] == src[1]);
}

static void test_gpu_oom(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t huge[] = {(int64_t)3 << 39}; /* 1.5 Ti floats: 6 TiB */
    tgc_cuda_memstats a = stats0();
    assert_null(tgc_empty(huge, 1, TGC_F32, tgc_cuda(0)));
    check_error(tgc_last_status(), TGC_ERR_OOM, "tgc_empty: out of memory on cuda:0: asked for ");
    check_error(tgc_last_status(), TGC_ERR_OOM, "6.0 TiB");
    check_error(tgc_last_status(), TGC_ERR_OOM, " free of ");
    check_error(tgc_last_status(), TGC_ERR_OOM, "the cache was emptied and the allocation retried");
    /* the process goes on: the cache was emptied, and allocations work */
    tgc_cuda_memstats b = stats0();
    assert_true(b.cached == 0);
    assert_true(b.in_use == a.in_use);
    const int64_t small[] = {256};
    tgc_tensor *t = tgc_ones(small, 1, TGC_F32, tgc_cuda(0));
    assert_non_null(t);
    assert_true(tgc_item_f64(t) == 1.0);
}

#ifdef TGC_HAVE_CUDA
static void *other_thread_stream(void *arg)
{
    (void)arg;
    void *s = tgc_cuda_current_stream(0);
    const int64_t shape[] = {64};
    tgc_tensor *t = tgc_full(shape, 1, 3.0, TGC_F32, tgc_cuda(0));
    double v = t ? tgc_item_f64(t) : -1;
    tgc_shutdown(); /* this thread's tensors */
    return v == 3.0 ? s : NULL;
}
#endif

static void test_gpu_streams(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    void *own = tgc_cuda_current_stream(0);
    assert_non_null(own);
    assert_ptr_equal(tgc_cuda_current_stream(0), own);
    /* another thread has a stream of its own */
    pthread_t th;
    void *theirs = NULL;
    assert_int_equal(pthread_create(&th, NULL, other_thread_stream, NULL), 0);
    assert_int_equal(pthread_join(th, &theirs), 0);
    assert_non_null(theirs);
    assert_true(theirs != own);

    /* a caller's stream: current while set; blocks freed on it are reused only on it */
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstream mine = NULL;
    assert_int_equal(tgc_cuda_enter(0), TGC_OK);
    assert_int_equal(d->cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(tgc_cuda_set_stream(0, mine), TGC_OK);
    assert_ptr_equal(tgc_cuda_current_stream(0), mine);
    const int64_t shape[] = {3000, 7}; /* 84000 bytes: a class no other test uses */
    tgc_tensor *t = tgc_zeros(shape, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(t);
    void *p = dev_ptr(t);
    assert_true(tgc_item_f64(t) == 0.0);
    tgc_tensor_free(t);
    assert_int_equal(tgc_cuda_set_stream(0, NULL), TGC_OK);
    assert_ptr_equal(tgc_cuda_current_stream(0), own);
    tgc_tensor *u = tgc_empty(shape, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(u);
    assert_true(dev_ptr(u) != p); /* not handed across streams */
    /* back on `mine` (through the runtime's swap, as a caller's cfg.cuda_stream is) */
    assert_null(tgc_cuda_stream_swap(0, mine));
    assert_ptr_equal(tgc_cuda_current_stream(0), mine);
    tgc_tensor *v = tgc_empty(shape, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(v);
    assert_ptr_equal(dev_ptr(v), p); /* reused on its own stream */
    tgc_tensor_free(v);
    assert_ptr_equal(tgc_cuda_stream_swap(0, NULL), mine);
    assert_ptr_equal(tgc_cuda_current_stream(0), own);
    assert_int_equal(tgc_cuda_set_stream(0, mine), TGC_OK);
    assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
    assert_int_equal(tgc_cuda_set_stream(0, NULL), TGC_OK);
    tgc_tensor_free(u);
    tgc_cuda_empty_cache(); /* no block keyed by `mine` survives its destruction */
    assert_int_equal(d->cuStreamDestroy(mine), CUDA_SUCCESS);
    check_error(tgc_cuda_set_stream(5000, NULL), TGC_ERR_DEVICE, "cuda:5000");
#endif
}

#ifdef TGC_HAVE_CUDA
typedef struct stream_and_key {
    void *stream;
    uint64_t key;
} stream_and_key;

static void *thread_stream_key(void *arg)
{
    stream_and_key *r = arg;
    r->stream = tgc_cuda_current_stream(0);
    r->key = tgc_cuda_stream_key(0);
    tgc_shutdown();
    return NULL; /* its stream is destroyed at exit */
}
#endif

/* The keys the executor keeps arenas and recordings under: one per stream, stable while it
 * lives, never given to a later thread's stream (even one at the address of a destroyed one),
 * and a caller's stream keyed apart from every runtime stream. */
static void test_gpu_stream_keys(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    uint64_t own = tgc_cuda_stream_key(0);
    assert_true(own != 0);
    assert_true(own & 1); /* a runtime stream's key is odd */
    assert_true(tgc_cuda_stream_key(0) == own);
    stream_and_key r[3];
    for (int i = 0; i < 3; i++) { /* one after the other: a freed stream's address may return */
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, thread_stream_key, &r[i]), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_non_null(r[i].stream);
        assert_true(r[i].key != 0 && r[i].key != own);
        for (int j = 0; j < i; j++)
            assert_true(r[i].key != r[j].key);
    }
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstream mine = NULL;
    assert_int_equal(tgc_cuda_enter(0), TGC_OK);
    assert_int_equal(d->cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_null(tgc_cuda_stream_swap(0, mine));
    uint64_t k = tgc_cuda_stream_key(0);
    assert_true(k == (uint64_t)(uintptr_t)mine << 1); /* even: apart from every runtime key */
    assert_ptr_equal(tgc_cuda_stream_swap(0, NULL), mine);
    assert_true(tgc_cuda_stream_key(0) == own);
    assert_int_equal(d->cuStreamDestroy(mine), CUDA_SUCCESS);
#endif
}

/* While the thread's stream is being captured, a cache miss does not call cuMemAlloc: the
 * allocation fails and says why; a cached block of the class is still handed out. */
static void test_gpu_capture_refuses_alloc(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    const tgc_cuda_driver *d = tgc_cuda_drv();
    const int64_t cached_shape[] = {777, 5};     /* 15540 bytes: the 15872-byte class */
    const int64_t fresh_shape[] = {3, 1003, 11}; /* 132396 bytes: the 132608-byte class */
    tgc_tensor *warm = tgc_empty(cached_shape, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(warm);
    void *p = dev_ptr(warm);
    tgc_tensor_free(warm);
    CUstream s = tgc_cuda_stream(0);
    assert_non_null(s);
    assert_int_equal(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    tgc_tensor *a = tgc_empty(cached_shape, 2, TGC_F32, tgc_cuda(0));
    tgc_tensor *b = tgc_empty(fresh_shape, 3, TGC_F32, tgc_cuda(0));
    tgc_status bs = tgc_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    CUgraph g = NULL;
    assert_int_equal(d->cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    if (g)
        assert_int_equal(d->cuGraphDestroy(g), CUDA_SUCCESS);
    assert_non_null(a);
    assert_ptr_equal(dev_ptr(a), p);
    assert_null(b);
    assert_int_equal(bs, TGC_ERR_RUNTIME);
    if (!strstr(msg, "tgc_empty: allocation failed on cuda:0: asked for 129.5 KiB while the "
                     "stream is being captured into a CUDA graph"))
        fail_msg("capture message: %s", msg);
    /* after the capture the same allocation works */
    tgc_tensor *c = tgc_empty(fresh_shape, 3, TGC_F32, tgc_cuda(0));
    assert_non_null(c);
    tgc_tensor_free(a);
    tgc_tensor_free(c);
#endif
}

#ifdef TGC_HAVE_CUDA
/* Size classes no other case uses (F32 {n, 9}): 39996 -> 40448, 79992 -> 80384, 119988 ->
 * 120320 bytes. */
static const int64_t pool_a[] = {1111, 9}, pool_b[] = {2222, 9}, pool_c[] = {3333, 9};
#define POOL_A ((size_t)40448)
#define POOL_B ((size_t)80384)
#define POOL_C ((size_t)120320)

static tgc_tensor *dev_empty(const int64_t *shape)
{
    tgc_tensor *t = tgc_empty(shape, 2, TGC_F32, tgc_cuda(0));
    if (!t)
        fail_msg("tgc_empty on cuda:0: %s", tgc_last_error());
    return t;
}

static void expect_stats_at(int line, tgc_cuda_memstats m, size_t in_use, size_t cached)
{
    if (m.in_use != in_use || m.cached != cached || m.peak < m.in_use)
        fail_msg("line %d: stats in_use %zu cached %zu peak %zu, want in_use %zu cached %zu", line,
                 m.in_use, m.cached, m.peak, in_use, cached);
}
#define expect_stats(m, in_use, cached) expect_stats_at(__LINE__, m, in_use, cached)

static void *free_on_thread(void *arg)
{
    const tgc_allocator *al = tgc_allocator_of(TGC_DEVICE_CUDA);
    al->free(al->ctx, 0, *(tgc_block *)arg);
    return NULL;
}

/* A thread opens a pool on its own stream (no capture needed), frees the pool's block and
 * exits: its stream is gone, so the block, released afterwards, is any stream's. */
static void *pool_on_own_stream(void *arg)
{
    const tgc_allocator *al = tgc_allocator_of(TGC_DEVICE_CUDA);
    CUstream s = tgc_cuda_stream(0);
    tgc_cuda_pool *pl = s ? tgc_cuda_pool_begin(0, s) : NULL;
    if (!pl)
        return NULL;
    tgc_block b = al->alloc(al->ctx, 0, POOL_B);
    tgc_cuda_pool_end(pl);
    al->free(al->ctx, 0, b);
    *(void **)arg = b.ptr;
    return pl;
}
#endif

/* The memory side of CUDA-graph capture: a pool open on the capturing stream keeps every
 * block allocated on it in the capture; blocks freed in the capture are reused in it and
 * nowhere else, blocks freed after its end go back to it, release hands them to the cache. */
static void test_gpu_capture_pool(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    const tgc_cuda_driver *d = tgc_cuda_drv();
    const tgc_allocator *al = tgc_allocator_of(TGC_DEVICE_CUDA);
    CUstream s = tgc_cuda_stream(0);
    assert_non_null(s);
    tgc_cuda_empty_cache();
    /* the warm-up run leaves a block of class A cached for s */
    tgc_tensor *w = dev_empty(pool_a);
    void *pa = dev_ptr(w);
    tgc_tensor_free(w);
    tgc_cuda_memstats m0 = stats0();
    const size_t u0 = m0.in_use;
    expect_stats(m0, u0, POOL_A);

    CUstream o = NULL; /* another stream, made before the capture */
    assert_int_equal(d->cuStreamCreate(&o, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    tgc_cuda_pool *pl = tgc_cuda_pool_begin(0, s);
    assert_non_null(pl);
    assert_null(tgc_cuda_pool_begin(0, s)); /* one open pool per stream */
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_cuda_pool_begin: a pool is already open on this stream of cuda:0");
    /* served from the general cache, which the pool now owns */
    tgc_tensor *t1 = dev_empty(pool_a);
    assert_ptr_equal(dev_ptr(t1), pa);
    expect_stats(stats0(), u0 + POOL_A, 0);
    /* a cache miss in the pool's capture: cuMemAlloc (allowed in relaxed mode) */
    tgc_tensor *t2 = dev_empty(pool_b);
    void *pb = dev_ptr(t2);
    expect_stats(stats0(), u0 + POOL_A + POOL_B, 0);
    tgc_tensor_free(t1); /* to the pool's free list: counted as cached */
    expect_stats(stats0(), u0 + POOL_B, POOL_A);
    size_t owned = 0, freeb = 0;
    tgc_cuda_pool_stats(pl, &owned, &freeb);
    assert_true(owned == POOL_A + POOL_B && freeb == POOL_A);
    /* an allocation on another stream does not get the pool's free block */
    assert_null(tgc_cuda_stream_swap(0, o));
    tgc_tensor *u = dev_empty(pool_a);
    assert_true(dev_ptr(u) != pa);
    tgc_tensor_free(u); /* general cache, keyed to o */
    assert_ptr_equal(tgc_cuda_stream_swap(0, NULL), o);
    expect_stats(stats0(), u0 + POOL_B, 2 * POOL_A);
    /* the next allocation of the class in the pool reuses it */
    tgc_tensor *t3 = dev_empty(pool_a);
    assert_ptr_equal(dev_ptr(t3), pa);
    expect_stats(stats0(), u0 + POOL_A + POOL_B, POOL_A);
    /* a raw block of the pool, freed on another thread after the end */
    tgc_block rb = al->alloc(al->ctx, 0, POOL_C);
    assert_non_null(rb.ptr);
    assert_true(rb.cap == POOL_C);
    tgc_cuda_pool_end(pl);
    tgc_cuda_pool_end(pl); /* idempotent */
    CUgraph g = NULL;
    assert_int_equal(d->cuStreamEndCapture(s, &g), CUDA_SUCCESS); /* nothing invalidated it */
    if (g)
        assert_int_equal(d->cuGraphDestroy(g), CUDA_SUCCESS);
    expect_stats(stats0(), u0 + POOL_A + POOL_B + POOL_C, POOL_A);

    /* after the end: freed blocks go back to the pool, never to the general cache */
    tgc_tensor_free(t3);
    expect_stats(stats0(), u0 + POOL_B + POOL_C, 2 * POOL_A);
    tgc_tensor *t4 = dev_empty(pool_a); /* not in the pool: a different address */
    assert_true(dev_ptr(t4) != pa);
    void *p4 = dev_ptr(t4);
    expect_stats(stats0(), u0 + POOL_A + POOL_B + POOL_C, 2 * POOL_A);
    tgc_tensor_free(t4); /* general cache, keyed to s */
    tgc_tensor_free(t2);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, free_on_thread, &rb), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    expect_stats(stats0(), u0, 3 * POOL_A + POOL_B + POOL_C);
    tgc_cuda_pool_stats(pl, &owned, &freeb);
    assert_true(owned == POOL_A + POOL_B + POOL_C && freeb == owned);
    tgc_block nb = al->alloc(al->ctx, 0, POOL_C); /* not the pool's block either */
    assert_true(nb.ptr && nb.ptr != rb.ptr);
    al->free(al->ctx, 0, nb);
    /* empty_cache leaves the pool's blocks (a graph may still use them) */
    tgc_cuda_empty_cache();
    expect_stats(stats0(), u0, POOL_A + POOL_B + POOL_C);

    /* release: the pool's free blocks join the general cache, and are reused */
    tgc_cuda_pool_release(pl);
    expect_stats(stats0(), u0, POOL_A + POOL_B + POOL_C);
    tgc_tensor *t5 = dev_empty(pool_a);
    tgc_tensor *t6 = dev_empty(pool_b);
    tgc_block cb = al->alloc(al->ctx, 0, POOL_C);
    assert_ptr_equal(dev_ptr(t5), pa);
    assert_ptr_equal(dev_ptr(t6), pb);
    assert_ptr_equal(cb.ptr, rb.ptr);
    assert_true(p4 != pa);
    expect_stats(stats0(), u0 + POOL_A + POOL_B + POOL_C, 0);
    tgc_tensor_free(t5);
    tgc_tensor_free(t6);
    al->free(al->ctx, 0, cb);
    expect_stats(stats0(), u0, POOL_A + POOL_B + POOL_C);
    tgc_cuda_empty_cache();
    expect_stats(stats0(), u0, 0);
    assert_int_equal(d->cuStreamDestroy(o), CUDA_SUCCESS);

    /* bad arguments */
    assert_null(tgc_cuda_pool_begin(7000, s));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_cuda_pool_begin: cuda:7000 is not");
    assert_null(tgc_cuda_pool_begin(0, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_cuda_pool_begin: the stream is NULL");
    tgc_cuda_pool_end(NULL);
    tgc_cuda_pool_release(NULL);
#endif
}

/* A capture begun in thread-local mode (cuMemAlloc still allowed: the allocator relaxes the
 * thread's mode), out of memory in the pool (no synchronization, so the capture stays
 * valid), and a block still live at release, which goes to the general cache when freed. */
static void test_gpu_capture_pool_live_release(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef TGC_HAVE_CUDA
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUstream s = tgc_cuda_stream(0);
    assert_non_null(s);
    tgc_cuda_empty_cache();
    const size_t u0 = stats0().in_use;
    tgc_tensor *pre = dev_empty(pool_a); /* live when the capture begins */
    void *pa = dev_ptr(pre);
    assert_int_equal(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    tgc_cuda_pool *pl = tgc_cuda_pool_begin(0, s);
    assert_non_null(pl);
    tgc_tensor_free(pre); /* freed in the capture: the pool keeps it */
    size_t owned = 0, freeb = 0;
    tgc_cuda_pool_stats(pl, &owned, &freeb);
    assert_true(owned == POOL_A && freeb == POOL_A);
    tgc_tensor *t = tgc_empty(pool_c, 2, TGC_F32, tgc_cuda(0));
    tgc_status ts = tgc_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", t ? "" : tgc_last_error());
    const int64_t huge[] = {(int64_t)3 << 39}; /* 6 TiB */
    tgc_tensor *h = tgc_empty(huge, 1, TGC_F32, tgc_cuda(0));
    tgc_status hs = tgc_last_status();
    char hmsg[1024];
    snprintf(hmsg, sizeof hmsg, "%s", tgc_last_error());
    tgc_cuda_pool_end(pl);
    CUgraph g = NULL;
    CUresult er = d->cuStreamEndCapture(s, &g);
    if (g)
        assert_int_equal(d->cuGraphDestroy(g), CUDA_SUCCESS);
    if (!t)
        fail_msg("allocation in a thread-local capture's pool failed (%s): %s", tgc_status_str(ts),
                 msg);
    assert_null(h);
    assert_int_equal(hs, TGC_ERR_OOM);
    if (!strstr(hmsg, "6.0 TiB") ||
        !strstr(hmsg, "the cache was not emptied: a CUDA graph capture is under way"))
        fail_msg("out of memory in the pool: %s", hmsg);
    assert_int_equal(er, CUDA_SUCCESS); /* the capture was not invalidated */
    void *pc = dev_ptr(t);
    expect_stats(stats0(), u0 + POOL_C, POOL_A);
    tgc_tensor *a2 = dev_empty(pool_a); /* after the end: not the block the pool kept */
    assert_true(dev_ptr(a2) != pa);
    tgc_tensor_free(a2);
    tgc_cuda_empty_cache();
    expect_stats(stats0(), u0 + POOL_C, POOL_A);
    /* released with t live: t's block goes to the general cache when t is freed */
    tgc_cuda_pool_release(pl);
    expect_stats(stats0(), u0 + POOL_C, POOL_A);
    tgc_tensor_free(t);
    expect_stats(stats0(), u0, POOL_A + POOL_C);
    tgc_tensor *a3 = dev_empty(pool_a); /* the kept block, back in the cache */
    assert_ptr_equal(dev_ptr(a3), pa);
    tgc_tensor_free(a3);
    tgc_tensor *v = dev_empty(pool_c);
    assert_ptr_equal(dev_ptr(v), pc);
    tgc_tensor_free(v);
    /* a pool of a thread's own stream, released after the thread exited */
    tgc_cuda_empty_cache();
    pthread_t th;
    void *pt = NULL, *pool_ret = NULL;
    assert_int_equal(pthread_create(&th, NULL, pool_on_own_stream, &pt), 0);
    assert_int_equal(pthread_join(th, &pool_ret), 0);
    assert_non_null(pool_ret);
    expect_stats(stats0(), u0, POOL_B);
    tgc_cuda_pool_release((tgc_cuda_pool *)pool_ret);
    expect_stats(stats0(), u0, POOL_B);
    tgc_tensor *x = dev_empty(pool_b); /* any stream's now: this one takes it */
    assert_ptr_equal(dev_ptr(x), pt);
    tgc_tensor_free(x);
    /* no pool open: the out-of-memory retry empties the cache again */
    assert_null(tgc_empty(huge, 1, TGC_F32, tgc_cuda(0)));
    check_error(tgc_last_status(), TGC_ERR_OOM, "the cache was emptied and the allocation retried");
    expect_stats(stats0(), u0, 0);
#endif
}

static void test_gpu_stats_and_empty_cache(void **state)
{
    (void)state;
    NEED_GPU();
    tgc_cuda_memstats a = stats0();
    assert_true(a.device_total > 0);
    assert_true(a.device_free <= a.device_total);
    assert_true(a.peak >= a.in_use);
    const int64_t shape[] = {5 << 20}; /* 20 MiB: the 20 MiB class */
    tgc_tensor *t = tgc_empty(shape, 1, TGC_F32, tgc_cuda(0));
    assert_non_null(t);
    tgc_cuda_memstats b = stats0();
    assert_true(b.in_use == a.in_use + ((size_t)20 << 20));
    assert_true(b.peak >= b.in_use);
    tgc_tensor_free(t);
    tgc_cuda_memstats c = stats0();
    assert_true(c.cached >= (size_t)20 << 20);
    assert_true(c.peak == b.peak);
    tgc_cuda_reset_peak(0);
    assert_true(stats0().peak == c.in_use);
    tgc_cuda_empty_cache();
    tgc_cuda_memstats e = stats0();
    assert_true(e.cached == 0);
    assert_true(e.in_use == c.in_use);
    assert_true(e.device_free >= c.device_free); /* the 20 MiB went back to the driver */
    char name[128];
    assert_int_equal(tgc_cuda_device_name(0, name, sizeof name), TGC_OK);
    assert_true(strlen(name) > 0);
    assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
    assert_true(tgc_cuda_device_count() >= 1);
    int n = tgc_cuda_device_count();
    const int64_t one[] = {1};
    assert_null(tgc_empty(one, 1, TGC_F32, tgc_cuda(n)));
    char want[64];
    snprintf(want, sizeof want, "device cuda:%d is not available", n);
    check_error(tgc_last_status(), TGC_ERR_DEVICE, want);
#ifdef TGC_HAVE_CUDA
    const tgc_cuda_props *pr = tgc_cuda_props_of(0);
    assert_non_null(pr);
    assert_true(pr->major >= 3 && pr->sms > 0 && pr->warp == 32 && pr->total_mem > 0);
    assert_string_equal(pr->name, name);
#endif
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--child"))
        return child_main();
    /* argv[0] rather than /proc/self/exe, which is the tool under valgrind */
    if (!realpath(argv[0], g_self))
        snprintf(g_self, sizeof g_self, "/proc/self/exe");
    g_gpu = tgc_cuda_check() == TGC_OK;
    if (tgc_cuda_is_available() != g_gpu) {
        fprintf(stderr, "tgc_cuda_is_available() disagrees with tgc_cuda_check()\n");
        return 1;
    }
    /* the reason alone, as the other calls quote it after their own names */
    const char *reason = tgc_last_error();
    if (!strncmp(reason, "tgc_cuda_check: ", 16))
        reason += 16;
    snprintf(g_reason, sizeof g_reason, "%s", g_gpu ? "" : reason);
    tgc_clear_error();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unavailable_reason, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_unavailable_tensors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_unavailable_api, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_driver_override_missing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_driver_override_stub, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_cache_reuse, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_round_trips, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_pinned_host, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_strided_read, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_oom, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_streams, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_stream_keys, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_capture_refuses_alloc, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_capture_pool, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_capture_pool_live_release, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_stats_and_empty_cache, scoped_setup,
                                        scoped_teardown),
    };
    int rc = cmocka_run_group_tests_name("cuda_runtime", tests, NULL, group_shutdown);
    /* the skip line of tests/gpu_skip.h's format; the no-GPU cases that ran keep the exit
     * code 0 (passed), not 77 */
    if (g_skipped_gpu)
        printf("tgc: %d GPU tests skipped: %s\n", g_skipped_gpu, g_reason);
    if (g_skipped_host)
        printf("tgc: %d no-GPU tests skipped: a GPU is present\n", g_skipped_host);
    return rc;
}
