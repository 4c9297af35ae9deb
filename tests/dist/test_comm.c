/* Communicators (runtime/comm.h) on the host, against the tests' fake NCCL
 * (tests/dist/fake_nccl.c, TGC_NCCL_LIBRARY set by tests/dist/CMakeLists.txt). Ranks are
 * forked processes: each child runs its side and reports failures through its exit code
 * (printing what failed), the parent asserts on every child. The cases that need a process
 * that has not loaded NCCL yet run this binary again (/proc/self/exe) with a child mode. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/comm.h"
#include "runtime/nccl.h"

#define CHUNK_BYTES (64 * 1024) /* the fake's chunk per rank and round */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Inside a child: print and fail the child's exit code. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s (last error: %s)\n", g_rank,         \
                    __FILE__, __LINE__, #cond, tgc_last_error());                                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int g_rank = -1;

typedef int (*rank_fn)(int rank, int world, const tgc_comm_id *id, void *arg);

/* Forks world children running fn(rank); returns when all exited (killing them after 90 s);
 * asserts every exit code is 0. */
static void run_ranks(int world, rank_fn fn, void *arg)
{
    tgc_comm_id id;
    assert_int_equal(tgc_comm_unique_id(&id), TGC_OK);
    pid_t pid[8];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            g_rank = r;
            int rc = fn(r, world, &id, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
    }
    double deadline = now_s() + 90;
    int status[8] = {0}, left = world;
    int done[8] = {0};
    while (left > 0) {
        for (int r = 0; r < world; r++) {
            if (done[r])
                continue;
            pid_t w = waitpid(pid[r], &status[r], WNOHANG);
            if (w == pid[r]) {
                done[r] = 1;
                left--;
            }
        }
        if (left > 0 && now_s() > deadline) {
            for (int r = 0; r < world; r++)
                if (!done[r])
                    kill(pid[r], SIGKILL);
            fail_msg("ranks did not finish within 90 s");
        }
        if (left > 0)
            usleep(1000);
    }
    for (int r = 0; r < world; r++) {
        if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0)
            fprintf(stderr, "world %d: rank %d failed (status 0x%x)\n", world, r, status[r]);
        assert_true(WIFEXITED(status[r]));
        assert_int_equal(WEXITSTATUS(status[r]), 0);
    }
}

/* ---- values ---- */

static const tgc_dtype k_dtypes[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64, TGC_I32, TGC_I64};
static const size_t k_sizes[] = {0, 1, 7, 100003}; /* 100003 f64: 13 chunks of the fake */

static size_t dsize(tgc_dtype dt)
{
    return dt == TGC_F64 || dt == TGC_I64 ? 8 : dt == TGC_F32 || dt == TGC_I32 ? 4 : 2;
}

static int is_int(tgc_dtype dt)
{
    return dt == TGC_I32 || dt == TGC_I64;
}

/* Rank r's element i: a quarter-integer (integers for integer dtypes) whose offsets over the
 * ranks sum to zero, so SUM and AVG are exact in every dtype. */
static double value(int r, int world, size_t i, tgc_dtype dt)
{
    double base = (double)((int)(i * 7 % 9) - 4);
    double off = (double)(2 * r - (world - 1));
    return is_int(dt) ? base * 3 + off : base * 0.5 + off * 0.25;
}

static void store(void *p, size_t i, tgc_dtype dt, double v)
{
    switch (dt) {
    case TGC_F32: ((float *)p)[i] = (float)v; break;
    case TGC_F64: ((double *)p)[i] = v; break;
    case TGC_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case TGC_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case TGC_BF16: {
        float f = (float)v; /* the values are exact in bf16: truncation is exact */
        uint32_t b;
        memcpy(&b, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        break;
    }
    case TGC_F16: { /* |v| < 8 with 2 fractional bits: exact */
        float a = fabsf((float)v);
        uint16_t h = 0;
        if (a != 0) {
            int e;
            float fr = frexpf(a, &e);
            h = (uint16_t)(((e + 14) << 10) | ((uint32_t)ldexpf(fr, 11) - 1024));
        }
        ((uint16_t *)p)[i] = (uint16_t)((v < 0 ? 0x8000 : 0) | h);
        break;
    }
    default: break;
    }
}

static double load(const void *p, size_t i, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32: return ((const float *)p)[i];
    case TGC_F64: return ((const double *)p)[i];
    case TGC_I32: return ((const int32_t *)p)[i];
    case TGC_I64: return (double)((const int64_t *)p)[i];
    case TGC_BF16: {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case TGC_F16: {
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        return h & 0x8000 ? -v : v;
    }
    default: return 0;
    }
}

static double expected(int world, size_t i, tgc_dtype dt, tgc_dist_op op)
{
    double v = value(0, world, i, dt);
    for (int r = 1; r < world; r++) {
        double x = value(r, world, i, dt);
        if (op == TGC_DIST_SUM || op == TGC_DIST_AVG)
            v += x;
        else if (op == TGC_DIST_PROD)
            v *= x;
        else if (op == TGC_DIST_MAX)
            v = x > v ? x : v;
        else
            v = x < v ? x : v;
    }
    return op == TGC_DIST_AVG ? v / world : v;
}

/* Half an ulp of the dtype, relative (products of quarter-integers need more bits than bf16
 * and f16 have: one rounding). */
static double tolerance(tgc_dtype dt)
{
    return dt == TGC_BF16 ? ldexp(1, -8) : dt == TGC_F16 ? ldexp(1, -11) : 0;
}

static int check_result(const void *recv, size_t n, int world, tgc_dtype dt, tgc_dist_op op)
{
    for (size_t i = 0; i < n; i++) {
        double want = expected(world, i, dt, op), got = load(recv, i, dt);
        if (fabs(got - want) > tolerance(dt) * fabs(want)) {
            fprintf(stderr, "rank %d: dtype %d op %d n %zu: element %zu is %g, want %g\n", g_rank,
                    (int)dt, (int)op, n, i, got, want);
            return 1;
        }
    }
    return 0;
}

static tgc_comm *join(int rank, int world, const tgc_comm_id *id, double timeout)
{
    tgc_comm *c = NULL;
    tgc_status st = tgc_comm_create(id, rank, world, tgc_cpu(), timeout, &c);
    if (st != TGC_OK)
        fprintf(stderr, "rank %d: tgc_comm_create: %s: %s\n", rank, tgc_status_str(st),
                tgc_last_error());
    return c;
}

/* ---- all-reduce of every dtype, op and size, in place and out of place ---- */

static int all_reduce_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    tgc_comm *c = join(rank, world, id, 30);
    CHECK(c);
    CHECK(tgc_comm_rank(c) == rank && tgc_comm_world(c) == world);
    CHECK(tgc_comm_device(c).type == TGC_DEVICE_CPU && tgc_comm_timeout(c) == 30);
    size_t maxn = k_sizes[sizeof k_sizes / sizeof k_sizes[0] - 1];
    unsigned char *send = malloc(maxn * 8), *recv = malloc(maxn * 8), *copy = malloc(maxn * 8);
    CHECK(send && recv && copy);
    for (size_t d = 0; d < sizeof k_dtypes / sizeof k_dtypes[0]; d++) {
        tgc_dtype dt = k_dtypes[d];
        for (int op = TGC_DIST_SUM; op <= TGC_DIST_AVG; op++) {
            if (is_int(dt) && (op == TGC_DIST_AVG || op == TGC_DIST_PROD)) {
                CHECK(tgc_comm_all_reduce_start(c, send, recv, 4, dt, op, NULL) == TGC_ERR_DTYPE);
                continue;
            }
            for (size_t s = 0; s < sizeof k_sizes / sizeof k_sizes[0]; s++) {
                size_t n = k_sizes[s];
                for (int inplace = 0; inplace < 2; inplace++) {
                    for (size_t i = 0; i < n; i++)
                        store(send, i, dt, value(rank, world, i, dt));
                    memcpy(copy, send, n * dsize(dt));
                    memset(recv, 0x5a, n * dsize(dt));
                    void *out = inplace ? (void *)send : (void *)recv;
                    CHECK(tgc_comm_all_reduce_start(c, send, out, n, dt, op, NULL) == TGC_OK);
                    CHECK(tgc_comm_wait(c, out, NULL) == TGC_OK);
                    CHECK(check_result(out, n, world, dt, op) == 0);
                    if (!inplace)
                        CHECK(n == 0 || memcmp(send, copy, n * dsize(dt)) == 0);
                }
            }
        }
    }
    CHECK(tgc_comm_status(c) == TGC_OK);
    free(send);
    free(recv);
    free(copy);
    tgc_comm_free(c);
    return 0;
}

static void test_all_reduce_world1(void **state)
{
    (void)state;
    run_ranks(1, all_reduce_side, NULL);
}

static void test_all_reduce_world2(void **state)
{
    (void)state;
    run_ranks(2, all_reduce_side, NULL);
}

static void test_all_reduce_world3(void **state)
{
    (void)state;
    run_ranks(3, all_reduce_side, NULL);
}

/* ---- several started, waited for in another order; the bookkeeping's errors ---- */

static int concurrent_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    tgc_comm *c = join(rank, world, id, 30);
    CHECK(c);
    enum { K = 5, N = 20000 }; /* 80 KB of f32: more than one chunk */
    float *buf[K];
    for (int k = 0; k < K; k++) {
        buf[k] = malloc(N * sizeof(float));
        CHECK(buf[k]);
        for (int i = 0; i < N; i++)
            buf[k][i] = (float)(k * 1000 + rank + i % 13);
    }
    for (int k = 0; k < K; k++)
        CHECK(tgc_comm_all_reduce_start(c, buf[k], buf[k], N, TGC_F32, TGC_DIST_SUM, NULL) ==
              TGC_OK);
    /* a second start into a recv not waited for yet */
    CHECK(tgc_comm_all_reduce_start(c, buf[2], buf[2], N, TGC_F32, TGC_DIST_SUM, NULL) ==
          TGC_ERR_INVALID_ARG);
    const int order[K] = {3, 0, 4, 2, 1};
    for (int k = 0; k < K; k++)
        CHECK(tgc_comm_wait(c, buf[order[k]], NULL) == TGC_OK);
    CHECK(tgc_comm_wait(c, buf[0], NULL) == TGC_ERR_INVALID_ARG); /* waited for already */
    int unknown;
    CHECK(tgc_comm_wait(c, &unknown, NULL) == TGC_ERR_INVALID_ARG);
    CHECK(strstr(tgc_last_error(), "no all-reduce"));
    float rank_sum = (float)(world * (world - 1) / 2);
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++)
            CHECK(buf[k][i] == (float)world * (float)(k * 1000 + i % 13) + rank_sum);
    /* argument errors: each with its status, the communicator unharmed */
    CHECK(tgc_comm_all_reduce_start(c, buf[0], buf[0], 4, TGC_BOOL, TGC_DIST_SUM, NULL) ==
          TGC_ERR_DTYPE);
    CHECK(tgc_comm_all_reduce_start(c, buf[0], buf[0], 4, TGC_I32, TGC_DIST_AVG, NULL) ==
          TGC_ERR_DTYPE);
    CHECK(strstr(tgc_last_error(), "AVG"));
    CHECK(tgc_comm_all_reduce_start(c, NULL, buf[0], 4, TGC_F32, TGC_DIST_SUM, NULL) ==
          TGC_ERR_INVALID_ARG);
    CHECK(tgc_comm_all_reduce_start(c, buf[0], buf[0], 4, TGC_F32, (tgc_dist_op)9, NULL) ==
          TGC_ERR_INVALID_ARG);
    CHECK(tgc_comm_broadcast(c, buf[0], 4, TGC_F32, world, NULL) == TGC_ERR_INVALID_ARG);
    CHECK(tgc_comm_status(c) == TGC_OK);
    CHECK(tgc_comm_synchronize(c, NULL) == TGC_OK);
    CHECK(tgc_comm_watch(c, NULL) == TGC_OK);
    for (int k = 0; k < K; k++)
        free(buf[k]);
    tgc_comm_free(c);
    return 0;
}

static void test_concurrent_starts_waited_out_of_order(void **state)
{
    (void)state;
    run_ranks(2, concurrent_side, NULL);
    run_ranks(3, concurrent_side, NULL);
}

/* ---- broadcast from root 1 ---- */

static int broadcast_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    tgc_comm *c = join(rank, world, id, 30);
    CHECK(c);
    const size_t sizes[] = {0, 1, 9, 40000}; /* 40000 i64: 5 chunks */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        int64_t *b = malloc((n ? n : 1) * sizeof *b);
        CHECK(b);
        for (size_t i = 0; i < n; i++)
            b[i] = (int64_t)(rank * 1000003 + i);
        CHECK(tgc_comm_broadcast(c, b, n, TGC_I64, 1, NULL) == TGC_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(b[i] == (int64_t)(1000003 + i));
        free(b);
    }
    uint16_t h[3] = {(uint16_t)rank, 7, 9};
    CHECK(tgc_comm_broadcast(c, h, 3, TGC_BF16, 1, NULL) == TGC_OK);
    CHECK(h[0] == 1);
    CHECK(tgc_comm_broadcast(c, h, 3, TGC_BOOL, 1, NULL) == TGC_ERR_DTYPE);
    tgc_comm_free(c);
    return 0;
}

static void test_broadcast_from_root_1(void **state)
{
    (void)state;
    run_ranks(2, broadcast_side, NULL);
    run_ranks(3, broadcast_side, NULL);
}

/* ---- ids as text ---- */

static void test_id_text_round_trip_and_bad_input(void **state)
{
    (void)state;
    tgc_comm_id id, back;
    assert_int_equal(tgc_comm_unique_id(&id), TGC_OK);
    char text[TGC_DIST_ID_CHARS + 1];
    assert_int_equal(tgc_comm_id_to_text(&id, text, sizeof text), TGC_OK);
    assert_int_equal(strlen(text), TGC_DIST_ID_CHARS);
    assert_int_equal(strspn(text, "0123456789abcdef"), TGC_DIST_ID_CHARS);
    memset(&back, 0, sizeof back);
    assert_int_equal(tgc_comm_id_from_text(text, &back), TGC_OK);
    assert_memory_equal(id.bytes, back.bytes, sizeof id.bytes);
    /* upper case is accepted too */
    char upper[TGC_DIST_ID_CHARS + 1];
    for (int i = 0; i <= TGC_DIST_ID_CHARS; i++)
        upper[i] = (char)(text[i] >= 'a' && text[i] <= 'f' ? text[i] - 32 : text[i]);
    assert_int_equal(tgc_comm_id_from_text(upper, &back), TGC_OK);
    assert_memory_equal(id.bytes, back.bytes, sizeof id.bytes);
    /* two ids differ */
    tgc_comm_id other;
    assert_int_equal(tgc_comm_unique_id(&other), TGC_OK);
    assert_true(memcmp(id.bytes, other.bytes, sizeof id.bytes) != 0);

    assert_int_equal(tgc_comm_id_to_text(&id, text, TGC_DIST_ID_CHARS), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "257"));
    assert_int_equal(tgc_comm_id_to_text(NULL, text, sizeof text), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_comm_id_from_text(NULL, &back), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_comm_id_from_text("abc", &back), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "3 characters"));
    char longer[TGC_DIST_ID_CHARS + 3];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    assert_int_equal(tgc_comm_id_from_text(longer, &back), TGC_ERR_INVALID_ARG);
    char bad[TGC_DIST_ID_CHARS + 1];
    memcpy(bad, text, sizeof bad);
    bad[77] = 'g';
    memcpy(&back, &other, sizeof back);
    assert_int_equal(tgc_comm_id_from_text(bad, &back), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "'g' at 77"));
    assert_memory_equal(back.bytes, other.bytes, sizeof back.bytes); /* untouched */
    assert_int_equal(tgc_comm_unique_id(NULL), TGC_ERR_INVALID_ARG);
}

/* ---- creation errors, handles ---- */

static int handles_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    (void)world;
    tgc_comm *c = NULL;
    CHECK(tgc_comm_create(id, 1, 1, tgc_cpu(), 5, &c) == TGC_ERR_INVALID_ARG && !c);
    CHECK(tgc_comm_create(id, -1, 2, tgc_cpu(), 5, &c) == TGC_ERR_INVALID_ARG && !c);
    CHECK(tgc_comm_create(id, 0, 0, tgc_cpu(), 5, &c) == TGC_ERR_INVALID_ARG && !c);
    CHECK(tgc_comm_create(id, 0, 1, tgc_cpu(), 0, &c) == TGC_ERR_INVALID_ARG && !c);
    CHECK(tgc_comm_create(NULL, 0, 1, tgc_cpu(), 5, &c) == TGC_ERR_INVALID_ARG && !c);
#ifndef TGC_HAVE_CUDA
    CHECK(tgc_comm_create(id, 0, 1, tgc_cuda(0), 5, &c) == TGC_ERR_DEVICE && !c);
#endif
    c = join(rank, 1, id, 5);
    CHECK(c);
    int64_t h = tgc_comm_handle(c);
    CHECK(h > 0);
    CHECK(tgc_comm_from_handle(h) == c);
    tgc_comm_id id2;
    CHECK(tgc_comm_unique_id(&id2) == TGC_OK);
    tgc_comm *d = join(0, 1, &id2, 5);
    CHECK(d);
    int64_t h2 = tgc_comm_handle(d);
    CHECK(h2 > 0 && h2 != h);
    tgc_comm_free(c);
    CHECK(tgc_comm_from_handle(h) == NULL);
    CHECK(tgc_comm_from_handle(h2) == d);
    CHECK(tgc_comm_unique_id(&id2) == TGC_OK);
    tgc_comm *e = join(0, 1, &id2, 5);
    CHECK(e);
    CHECK(tgc_comm_handle(e) != h && tgc_comm_handle(e) != h2 && tgc_comm_handle(e) > 0);
    float x = 3;
    CHECK(tgc_comm_all_reduce_start(e, &x, &x, 1, TGC_F32, TGC_DIST_AVG, NULL) == TGC_OK);
    CHECK(tgc_comm_wait(e, &x, NULL) == TGC_OK && x == 3);
    /* at most 1024 started and not waited for */
    enum { MAX = 1024 };
    float *many = calloc(MAX + 1, sizeof *many);
    CHECK(many);
    for (int i = 0; i < MAX; i++)
        CHECK(tgc_comm_all_reduce_start(e, &many[i], &many[i], 1, TGC_F32, TGC_DIST_SUM, NULL) ==
              TGC_OK);
    CHECK(tgc_comm_all_reduce_start(e, &many[MAX], &many[MAX], 1, TGC_F32, TGC_DIST_SUM, NULL) ==
          TGC_ERR_RUNTIME);
    CHECK(strstr(tgc_last_error(), "at most 1024"));
    for (int i = MAX - 1; i >= 0; i--)
        CHECK(tgc_comm_wait(e, &many[i], NULL) == TGC_OK);
    CHECK(tgc_comm_status(e) == TGC_OK);
    free(many);
    tgc_comm_free(d);
    tgc_comm_free(e);
    tgc_comm_free(NULL);
    CHECK(tgc_comm_from_handle(h2) == NULL && tgc_comm_from_handle(0) == NULL);
    CHECK(tgc_comm_status(NULL) == TGC_ERR_INVALID_ARG);
    return 0;
}

static void test_handles_and_create_errors(void **state)
{
    (void)state;
    run_ranks(1, handles_side, NULL);
}

/* ---- one process, several ranks ---- */

typedef struct local_arg {
    tgc_comm *c;
    int rc;
} local_arg;

static void *local_thread(void *p)
{
    local_arg *a = p;
    enum { N = 30000 };
    double *v = malloc(N * sizeof *v);
    a->rc = 1;
    if (!v)
        return NULL;
    int r = tgc_comm_rank(a->c), w = tgc_comm_world(a->c);
    for (int i = 0; i < N; i++)
        v[i] = r + 0.5 * i;
    if (tgc_comm_all_reduce_start(a->c, v, v, N, TGC_F64, TGC_DIST_MAX, NULL) == TGC_OK &&
        tgc_comm_wait(a->c, v, NULL) == TGC_OK) {
        a->rc = 0;
        for (int i = 0; i < N; i++)
            if (v[i] != (w - 1) + 0.5 * i)
                a->rc = 1;
    }
    free(v);
    return NULL;
}

static int local_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)rank;
    (void)world;
    (void)id;
    (void)arg;
    enum { L = 3 };
    tgc_device devs[L] = {tgc_cpu(), tgc_cpu(), tgc_cpu()};
    tgc_comm *c[L] = {NULL};
    CHECK(tgc_comm_create_local(L, devs, 10, c) == TGC_OK);
    pthread_t t[L];
    local_arg a[L];
    for (int i = 0; i < L; i++) {
        CHECK(c[i] && tgc_comm_rank(c[i]) == i && tgc_comm_world(c[i]) == L);
        a[i] = (local_arg){c[i], 1};
        CHECK(pthread_create(&t[i], NULL, local_thread, &a[i]) == 0);
    }
    for (int i = 0; i < L; i++) {
        pthread_join(t[i], NULL);
        CHECK(a[i].rc == 0);
        tgc_comm_free(c[i]);
    }
    CHECK(tgc_comm_create_local(0, devs, 10, c) == TGC_ERR_INVALID_ARG);
    return 0;
}

static void test_create_local_three_ranks_in_one_process(void **state)
{
    (void)state;
    run_ranks(1, local_side, NULL);
}

/* ---- failures: a peer that never joins, a peer that dies ---- */

static int segment_exists(const tgc_comm_id *id)
{
    char name[129];
    memcpy(name, id->bytes, 128);
    name[128] = 0;
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

static int init_timeout_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    (void)world;
    tgc_comm *c = (tgc_comm *)(uintptr_t)1;
    double t0 = now_s();
    tgc_status st = tgc_comm_create(id, rank, 2, tgc_cpu(), 0.5, &c);
    double dt = now_s() - t0;
    printf("init timeout: %s after %.3f s: %s\n", tgc_status_str(st), dt, tgc_last_error());
    CHECK(st == TGC_ERR_TIMEOUT);
    CHECK(c == NULL);
    CHECK(dt >= 0.45 && dt < 2.0);
    CHECK(strstr(tgc_last_error(), "rank 0 of 2: the other ranks did not join within 0.5 s"));
    /* the fake's segment is gone: the aborted communicator left it (with the config API;
     * the blocking fallback's helper thread still holds its init) */
    if (tgc_nccl()->CommInitRankConfig)
        CHECK(!segment_exists(id));
    else
        shm_unlink((const char *)id->bytes); /* the helper's, left when this process exits */
    return 0;
}

static void test_init_timeout_when_a_peer_never_joins(void **state)
{
    (void)state;
    run_ranks(1, init_timeout_side, NULL); /* world 2, only rank 0 runs */
}

static int peer_death_side(int rank, int world, const tgc_comm_id *id, void *arg)
{
    (void)arg;
    tgc_comm *c = join(rank, world, id, 1.0);
    CHECK(c);
    float x[3] = {1, 2, 3};
    CHECK(tgc_comm_all_reduce_start(c, x, x, 3, TGC_F32, TGC_DIST_SUM, NULL) == TGC_OK);
    CHECK(tgc_comm_wait(c, x, NULL) == TGC_OK);
    CHECK(x[2] == 6);
    if (rank == 1) {
        tgc_comm_free(c);
        return 0; /* rank 1 leaves */
    }
    double t0 = now_s();
    tgc_status st = tgc_comm_all_reduce_start(c, x, x, 3, TGC_F32, TGC_DIST_SUM, NULL);
    double dt = now_s() - t0;
    printf("peer death: %s after %.3f s: %s\n", tgc_status_str(st), dt, tgc_last_error());
    CHECK(st == TGC_ERR_TIMEOUT);
    CHECK(dt >= 0.9 && dt < 3.0);
    CHECK(strstr(tgc_last_error(), "rank 0 of 2: a peer did not answer within 1 s"));
    /* sticky: the status, and every later call */
    tgc_clear_error();
    CHECK(tgc_comm_status(c) == TGC_ERR_TIMEOUT);
    CHECK(strstr(tgc_last_error(), "did not answer"));
    t0 = now_s();
    CHECK(tgc_comm_all_reduce_start(c, x, x, 3, TGC_F32, TGC_DIST_SUM, NULL) == TGC_ERR_TIMEOUT);
    CHECK(tgc_comm_broadcast(c, x, 3, TGC_F32, 0, NULL) == TGC_ERR_TIMEOUT);
    CHECK(tgc_comm_synchronize(c, NULL) == TGC_ERR_TIMEOUT);
    CHECK(now_s() - t0 < 0.5);
    CHECK(tgc_comm_wait(c, x, NULL) == TGC_ERR_INVALID_ARG); /* the failed start kept nothing */
    int64_t h = tgc_comm_handle(c);
    tgc_comm_free(c);
    CHECK(tgc_comm_from_handle(h) == NULL);
    CHECK(!segment_exists(id));
    return 0;
}

static void test_peer_death_times_out_and_sticks(void **state)
{
    (void)state;
    run_ranks(2, peer_death_side, NULL);
}

/* ---- loading: a missing library, NVLS kept off ---- */

static void run_self(const char *mode, const char *lib)
{
    fflush(stdout);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        if (lib)
            setenv("TGC_NCCL_LIBRARY", lib, 1);
        execl("/proc/self/exe", "test_comm", mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static int child_missing(void)
{
    tgc_comm_id id;
    tgc_status st = tgc_comm_unique_id(&id);
    printf("missing library: %s: %s\n", tgc_status_str(st), tgc_last_error());
    CHECK(st == TGC_ERR_UNSUPPORTED);
    CHECK(strstr(tgc_last_error(), "/nonexistent/libnccl.so.2"));
    CHECK(strstr(tgc_last_error(), "TGC_NCCL_LIBRARY"));
    tgc_comm *c = NULL;
    memset(&id, 0, sizeof id);
    CHECK(tgc_comm_create(&id, 0, 1, tgc_cpu(), 5, &c) == TGC_ERR_UNSUPPORTED && !c);
    CHECK(tgc_nccl_load() == TGC_ERR_UNSUPPORTED); /* the same answer again */
    CHECK(strstr(tgc_last_error(), "/nonexistent/libnccl.so.2"));
    CHECK(tgc_nccl_version() == 0 && tgc_nccl() == NULL);
    return 0;
}

static int child_nvls(int preset)
{
    if (preset)
        setenv("NCCL_NVLS_ENABLE", "1", 1);
    else
        unsetenv("NCCL_NVLS_ENABLE");
    CHECK(tgc_nccl_load() == TGC_OK);
    const char *v = getenv("NCCL_NVLS_ENABLE");
    CHECK(v && strcmp(v, preset ? "1" : "0") == 0);
    CHECK(tgc_nccl_version() >= 20000);
    return 0;
}

static void test_missing_library_is_unsupported(void **state)
{
    (void)state;
    run_self("--child-missing", "/nonexistent/libnccl.so.2");
}

static void test_nvls_off_unless_set(void **state)
{
    (void)state;
    run_self("--child-nvls-unset", NULL);
    run_self("--child-nvls-preset", NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child-missing"))
        return child_missing();
    if (argc > 1 && !strcmp(argv[1], "--child-nvls-unset"))
        return child_nvls(0);
    if (argc > 1 && !strcmp(argv[1], "--child-nvls-preset"))
        return child_nvls(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library_is_unsupported),
        cmocka_unit_test(test_nvls_off_unless_set),
        cmocka_unit_test(test_id_text_round_trip_and_bad_input),
        cmocka_unit_test(test_handles_and_create_errors),
        cmocka_unit_test(test_all_reduce_world1),
        cmocka_unit_test(test_all_reduce_world2),
        cmocka_unit_test(test_all_reduce_world3),
        cmocka_unit_test(test_concurrent_starts_waited_out_of_order),
        cmocka_unit_test(test_broadcast_from_root_1),
        cmocka_unit_test(test_create_local_three_ranks_in_one_process),
        cmocka_unit_test(test_init_timeout_when_a_peer_never_joins),
        cmocka_unit_test(test_peer_death_times_out_and_sticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
