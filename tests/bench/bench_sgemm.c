/* sgemm through the public API: a compiled function returning tgc_matmul(a, b) of row-major
 * f32 [M, K] x [K, N], at cfg.num_threads = 1 and 2, against OpenBLAS cblas_sgemm at the same
 * thread counts, and against the machine's fp32 FMA peak measured here.
 *
 * OpenBLAS reads OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE when it is loaded, and the environment
 * sets them to force AVX2 kernels. So the OpenBLAS side runs in a child: this program re-executes
 * itself (/proc/self/exe --openblas-only ...) with both variables removed from its environment
 * and reads the child's numbers back through a pipe. The variables are left alone everywhere
 * else.
 *
 * Each measurement: inputs created once, one warmup call (the first tgc call also compiles and
 * is reported separately), then the median of --iters runs (fewer when --budget seconds run
 * out); outputs are freed every iteration. Prints one line per measurement; compare ratios
 * within one run. Not a timed test.
 *
 *   bench_sgemm [--quick] [--sizes 256,1024,65536x64x576] [--threads 1,2] [--iters N]
 *               [--budget SECONDS] [--backend auto|llvm|interp|eager] [--no-openblas]
 * A size is N (N x N x N) or MxNxK. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

#include "bench_util.h"
#include "tgc/tgc.h"

#ifdef TGC_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

extern char **environ;

#define MAX_SIZES   32
#define MAX_THREADS 8

typedef struct gemm_shape {
    int64_t m, n, k;
} gemm_shape;

typedef struct options {
    gemm_shape sizes[MAX_SIZES];
    int n_sizes;
    int threads[MAX_THREADS];
    int n_threads;
    int iters;
    double budget;
    int openblas_only; /* the re-executed child */
    int no_openblas;
    int backend_set;
    tgc_backend_kind backend;
    char sizes_arg[512];
    char threads_arg[64];
} options;

/* What the OpenBLAS child measured: GFLOP/s per (size, thread) slot, < 0 when missing. */
typedef struct openblas_results {
    char corename[64];
    double gflops[MAX_SIZES][MAX_THREADS];
    int ok;
} openblas_results;

/* ---- fp32 FMA peak ---- */

#ifdef BENCH_X86
#define FMA_ACC_512 16
#define FMA_ACC_256 12

__attribute__((target("avx512f"))) static float fma_loop_avx512(long n)
{
    __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.1f), a2 = _mm512_set1_ps(1.2f);
    __m512 a3 = _mm512_set1_ps(1.3f), a4 = _mm512_set1_ps(1.4f), a5 = _mm512_set1_ps(1.5f);
    __m512 a6 = _mm512_set1_ps(1.6f), a7 = _mm512_set1_ps(1.7f), a8 = _mm512_set1_ps(1.8f);
    __m512 a9 = _mm512_set1_ps(1.9f), a10 = _mm512_set1_ps(2.0f), a11 = _mm512_set1_ps(2.1f);
    __m512 a12 = _mm512_set1_ps(2.2f), a13 = _mm512_set1_ps(2.3f), a14 = _mm512_set1_ps(2.4f);
    __m512 a15 = _mm512_set1_ps(2.5f);
    for (long i = 0; i < n; i++) {
        a0 = _mm512_fmadd_ps(a0, b, c);
        a1 = _mm512_fmadd_ps(a1, b, c);
        a2 = _mm512_fmadd_ps(a2, b, c);
        a3 = _mm512_fmadd_ps(a3, b, c);
        a4 = _mm512_fmadd_ps(a4, b, c);
        a5 = _mm512_fmadd_ps(a5, b, c);
        a6 = _mm512_fmadd_ps(a6, b, c);
        a7 = _mm512_fmadd_ps(a7, b, c);
        a8 = _mm512_fmadd_ps(a8, b, c);
        a9 = _mm512_fmadd_ps(a9, b, c);
        a10 = _mm512_fmadd_ps(a10, b, c);
        a11 = _mm512_fmadd_ps(a11, b, c);
        a12 = _mm512_fmadd_ps(a12, b, c);
        a13 = _mm512_fmadd_ps(a13, b, c);
        a14 = _mm512_fmadd_ps(a14, b, c);
        a15 = _mm512_fmadd_ps(a15, b, c);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(
        s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                         _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0] + out[15];
}

/* 12 chains: with AVX2 alone there are 16 ymm registers, and b and c take two. */
__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long n)
{
    __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = _mm256_set1_ps(1.1f), a2 = _mm256_set1_ps(1.2f);
    __m256 a3 = _mm256_set1_ps(1.3f), a4 = _mm256_set1_ps(1.4f), a5 = _mm256_set1_ps(1.5f);
    __m256 a6 = _mm256_set1_ps(1.6f), a7 = _mm256_set1_ps(1.7f), a8 = _mm256_set1_ps(1.8f);
    __m256 a9 = _mm256_set1_ps(1.9f), a10 = _mm256_set1_ps(2.0f), a11 = _mm256_set1_ps(2.1f);
    for (long i = 0; i < n; i++) {
        a0 = _mm256_fmadd_ps(a0, b, c);
        a1 = _mm256_fmadd_ps(a1, b, c);
        a2 = _mm256_fmadd_ps(a2, b, c);
        a3 = _mm256_fmadd_ps(a3, b, c);
        a4 = _mm256_fmadd_ps(a4, b, c);
        a5 = _mm256_fmadd_ps(a5, b, c);
        a6 = _mm256_fmadd_ps(a6, b, c);
        a7 = _mm256_fmadd_ps(a7, b, c);
        a8 = _mm256_fmadd_ps(a8, b, c);
        a9 = _mm256_fmadd_ps(a9, b, c);
        a10 = _mm256_fmadd_ps(a10, b, c);
        a11 = _mm256_fmadd_ps(a11, b, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}
#endif

typedef struct fma_job {
    int avx512;
    long n;
    float sink;
} fma_job;

static void *fma_thread(void *arg)
{
    fma_job *j = arg;
#ifdef BENCH_X86
    j->sink = j->avx512 ? fma_loop_avx512(j->n) : fma_loop_avx2(j->n);
#else
    j->sink = 0;
#endif
    return NULL;
}

/* Wall time of `threads` threads each running n iterations; < 0 when a thread fails. */
static double fma_run(int avx512, int threads, long n)
{
    pthread_t tid[MAX_THREADS];
    fma_job jobs[MAX_THREADS];
    double t0 = now();
    int started = 0;
    for (int i = 0; i < threads; i++) {
        jobs[i] = (fma_job){.avx512 = avx512, .n = n};
        if (pthread_create(&tid[i], NULL, fma_thread, &jobs[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    double dt = now() - t0;
    volatile float sink = 0;
    for (int i = 0; i < started; i++)
        sink += jobs[i].sink;
    (void)sink;
    return started == threads ? dt : -1.0;
}

/* GFLOP/s of the FMA loop on `threads` threads (best of 3 runs of ~0.2 s); 0 if unsupported. */
static double fma_peak(int avx512, int threads)
{
#ifdef BENCH_X86
    if (avx512 ? !__builtin_cpu_supports("avx512f")
               : !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        return 0;
    double flops_per_iter = avx512 ? FMA_ACC_512 * 16 * 2 : FMA_ACC_256 * 8 * 2;
    long n = 1L << 20;
    double dt = fma_run(avx512, threads, n);
    if (dt <= 0)
        return 0;
    n = (long)((double)n * 0.2 / dt) + 1;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        dt = fma_run(avx512, threads, n);
        if (dt > 0 && dt < best)
            best = dt;
    }
    return best < 1e30 ? flops_per_iter * (double)n * threads / best * 1e-9 : 0;
#else
    (void)avx512, (void)threads;
    return 0;
#endif
}

/* ---- options ---- */

static int parse_sizes(const char *s, options *o)
{
    o->n_sizes = 0;
    while (*s) {
        if (o->n_sizes == MAX_SIZES)
            return -1;
        char *end;
        long long v[3];
        int nv = 0;
        for (;;) {
            errno = 0;
            v[nv] = strtoll(s, &end, 10);
            if (end == s || errno || v[nv] <= 0)
                return -1;
            nv++;
            s = end;
            if (*s != 'x' || nv == 3)
                break;
            s++;
        }
        if (nv == 2)
            return -1;
        gemm_shape *g = &o->sizes[o->n_sizes++];
        g->m = v[0];
        g->n = nv == 3 ? v[1] : v[0];
        g->k = nv == 3 ? v[2] : v[0];
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return o->n_sizes > 0 ? 0 : -1;
}

static int parse_threads(const char *s, options *o)
{
    o->n_threads = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256 || o->n_threads == MAX_THREADS)
            return -1;
        o->threads[o->n_threads++] = (int)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return o->n_threads > 0 ? 0 : -1;
}

static int parse_backend(const char *s, tgc_backend_kind *b)
{
    static const char *const names[] = {"auto", "llvm", "cuda", "eager", "interp"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *b = (tgc_backend_kind)i;
            return 0;
        }
    return -1;
}

static const char *backend_str(tgc_backend_kind b)
{
    switch (b) {
    case TGC_BACKEND_AUTO: return "auto";
    case TGC_BACKEND_LLVM: return "llvm";
    case TGC_BACKEND_CUDA: return "cuda";
    case TGC_BACKEND_EAGER: return "eager";
    case TGC_BACKEND_INTERP: return "interp";
    }
    return "?";
}

static void usage(FILE *to)
{
    fprintf(to, "usage: bench_sgemm [--quick] [--sizes 256,1024,65536x64x576] [--threads 1,2]\n"
                "                   [--iters N] [--budget SECONDS] [--backend NAME] "
                "[--no-openblas]\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    const char *sizes = "256,512,1024,2048,65536x64x576,4096x768x768,4096x3072x768";
    const char *threads = "1,2";
    o->iters = 5;
    o->budget = 20.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            sizes = "256,512,512x64x576";
            o->iters = 3;
            o->budget = 3.0;
        } else if (strcmp(a, "--openblas-only") == 0) {
            o->openblas_only = 1;
        } else if (strcmp(a, "--no-openblas") == 0) {
            o->no_openblas = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v && strcmp(a, "--sizes") == 0) {
            sizes = v, i++;
        } else if (v && strcmp(a, "--threads") == 0) {
            threads = v, i++;
        } else if (v && strcmp(a, "--iters") == 0) {
            o->iters = atoi(v), i++;
        } else if (v && strcmp(a, "--budget") == 0) {
            o->budget = atof(v), i++;
        } else if (v && strcmp(a, "--backend") == 0) {
            if (parse_backend(v, &o->backend) != 0)
                return -1;
            o->backend_set = 1, i++;
        } else {
            return -1;
        }
    }
    if (o->iters < 1 || o->budget <= 0 || parse_sizes(sizes, o) != 0 ||
        parse_threads(threads, o) != 0)
        return -1;
    snprintf(o->sizes_arg, sizeof o->sizes_arg, "%s", sizes);
    snprintf(o->threads_arg, sizeof o->threads_arg, "%s", threads);
    return 0;
}

/* ---- timing ---- */

static void fill_random(float *p, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 40) / (double)(1 << 24) - 0.5);
    }
}

/* ---- OpenBLAS side (the child) ---- */

#ifdef TGC_BENCH_HAVE_OPENBLAS
typedef struct blas_ctx {
    const gemm_shape *g;
    const float *a, *b;
    float *c;
} blas_ctx;

static int blas_run(void *p)
{
    blas_ctx *x = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)x->g->m, (blasint)x->g->n,
                (blasint)x->g->k, 1.0f, x->a, (blasint)x->g->k, x->b, (blasint)x->g->n, 0.0f, x->c,
                (blasint)x->g->n);
    return 0;
}
#endif

/* Writes "core NAME" then "gemm SIZE_INDEX THREAD_INDEX GFLOPS RUNS" lines to stdout. */
static int openblas_child(const options *o)
{
#ifdef TGC_BENCH_HAVE_OPENBLAS
    printf("core %s\n", openblas_get_corename());
    fflush(stdout);
    for (int s = 0; s < o->n_sizes; s++) {
        const gemm_shape *g = &o->sizes[s];
        float *a = malloc((size_t)(g->m * g->k) * sizeof(float));
        float *b = malloc((size_t)(g->k * g->n) * sizeof(float));
        float *c = malloc((size_t)(g->m * g->n) * sizeof(float));
        if (!a || !b || !c) {
            free(a), free(b), free(c);
            fprintf(stderr, "bench_sgemm: out of memory for %lldx%lldx%lld\n", (long long)g->m,
                    (long long)g->n, (long long)g->k);
            return 1;
        }
        fill_random(a, g->m * g->k, 1);
        fill_random(b, g->k * g->n, 2);
        for (int t = 0; t < o->n_threads; t++) {
            openblas_set_num_threads(o->threads[t]);
            blas_ctx ctx = {g, a, b, c};
            int runs = 0;
            double sec = time_runs(blas_run, &ctx, o->iters, o->budget, &runs);
            double gf = 2.0 * (double)g->m * (double)g->n * (double)g->k / sec * 1e-9;
            printf("gemm %d %d %.3f %d\n", s, t, gf, runs);
            fflush(stdout);
        }
        free(a), free(b), free(c);
    }
    return 0;
#else
    (void)o;
    printf("core none\n");
    return 1;
#endif
}

#ifdef TGC_BENCH_HAVE_OPENBLAS
/* Runs the OpenBLAS side in a re-executed child without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE. */
static int openblas_measure(const options *o, openblas_results *r)
{
    for (int s = 0; s < MAX_SIZES; s++)
        for (int t = 0; t < MAX_THREADS; t++)
            r->gflops[s][t] = -1;
    snprintf(r->corename, sizeof r->corename, "?");
    size_t n_env = 0;
    while (environ[n_env])
        n_env++;
    char **envp = calloc(n_env + 1, sizeof *envp);
    if (!envp)
        return -1;
    for (size_t i = 0, j = 0; i < n_env; i++)
        if (strncmp(environ[i], "OPENBLAS_CORETYPE=", 18) != 0 &&
            strncmp(environ[i], "OPENBLAS_L2_SIZE=", 17) != 0)
            envp[j++] = environ[i];
    char iters[16], budget[32];
    snprintf(iters, sizeof iters, "%d", o->iters);
    snprintf(budget, sizeof budget, "%g", o->budget);
    char *argv[] = {"bench_sgemm", "--openblas-only",
                    "--sizes",     (char *)o->sizes_arg,
                    "--threads",   (char *)o->threads_arg,
                    "--iters",     iters,
                    "--budget",    budget,
                    NULL};
    int fd[2];
    if (pipe(fd) != 0) {
        free(envp);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        free(envp);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(fd[1]);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    free(envp);
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    if (!in) {
        close(fd[0]);
        waitpid(pid, NULL, 0);
        return -1;
    }
    char line[256];
    while (fgets(line, sizeof line, in)) {
        int s, t, runs;
        double gf;
        char name[64];
        if (sscanf(line, "core %63s", name) == 1)
            snprintf(r->corename, sizeof r->corename, "%s", name);
        else if (sscanf(line, "gemm %d %d %lf %d", &s, &t, &gf, &runs) == 4 && s >= 0 &&
                 s < MAX_SIZES && t >= 0 && t < MAX_THREADS)
            r->gflops[s][t] = gf;
    }
    fclose(in);
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_sgemm: the OpenBLAS child failed (status %d)\n", status);
        return -1;
    }
    r->ok = 1;
    return 0;
}
#endif

/* ---- tgc side ---- */

static tgc_status matmul_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_matmul(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

typedef struct tgc_ctx {
    tgc_fn *f;
    tgc_tensor *in[2];
} tgc_ctx;

static int tgc_run(void *p)
{
    tgc_ctx *x = p;
    tgc_tensor *y = NULL;
    tgc_status st = tgc_call(x->f, NULL, x->in, 2, &y, 1);
    if (st != TGC_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", tgc_last_error());
        return -1;
    }
    tgc_tensor_free(y);
    return 0;
}

/* Compares 32 entries of c = a @ b with a double-precision dot product. */
static int spot_check(const gemm_shape *g, const float *a, const float *b, tgc_tensor *c)
{
    float *hc = malloc((size_t)(g->m * g->n) * sizeof(float));
    if (!hc || tgc_copy_to_host(c, hc, (size_t)(g->m * g->n) * sizeof(float)) != TGC_OK) {
        free(hc);
        return -1;
    }
    int bad = 0;
    uint64_t s = 12345;
    for (int i = 0; i < 32; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int64_t r = (int64_t)(s % (uint64_t)g->m), col = (int64_t)((s >> 32) % (uint64_t)g->n);
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < g->k; k++) {
            double p = (double)a[r * g->k + k] * (double)b[k * g->n + col];
            ref += p;
            mag += fabs(p);
        }
        double got = hc[r * g->n + col];
        if (!(fabs(got - ref) <= 1e-4 * mag + 1e-6))
            bad++;
    }
    free(hc);
    return bad;
}

typedef struct tgc_result {
    double gflops;
    double first_call_s;
    int runs;
    int check_bad; /* entries that disagree with the reference; < 0: could not check */
    char backend[32];
} tgc_result;

static int tgc_measure(const options *o, const gemm_shape *g, int threads, tgc_tensor *a,
                       tgc_tensor *b, const float *ha, const float *hb, tgc_result *r)
{
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = threads;
    if (o->backend_set)
        cfg.backend = o->backend;
    tgc_fn *f = tgc_compile(matmul_fn, "sgemm", &cfg);
    if (!f) {
        fprintf(stderr, "bench_sgemm: %s\n", tgc_last_error());
        return -1;
    }
    tgc_ctx ctx = {f, {a, b}};
    tgc_tensor *y = NULL;
    double t0 = now();
    tgc_status st = tgc_call(f, NULL, ctx.in, 2, &y, 1);
    r->first_call_s = now() - t0;
    if (st != TGC_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", tgc_last_error());
        tgc_fn_free(f);
        return -1;
    }
    r->check_bad = spot_check(g, ha, hb, y);
    tgc_tensor_free(y);
    backend_of(f, r->backend, sizeof r->backend);
    double sec = time_runs(tgc_run, &ctx, o->iters, o->budget, &r->runs);
    tgc_fn_free(f);
    if (sec <= 0)
        return -1;
    r->gflops = 2.0 * (double)g->m * (double)g->n * (double)g->k / sec * 1e-9;
    return 0;
}

static tgc_tensor *host_tensor(const float *data, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    return tgc_from_data(data, (size_t)(rows * cols) * sizeof(float), shape, 2, TGC_F32, tgc_cpu());
}

int main(int argc, char **argv)
{
    options o = {0};
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    if (o.openblas_only)
        return openblas_child(&o);

    double peak512[MAX_THREADS] = {0}, peak256[MAX_THREADS] = {0}, peak[MAX_THREADS];
    for (int t = 0; t < o.n_threads; t++) {
        peak512[t] = fma_peak(1, o.threads[t]);
        peak256[t] = fma_peak(0, o.threads[t]);
        peak[t] = peak512[t] > peak256[t] ? peak512[t] : peak256[t];
        printf("fp32 FMA peak t=%d: avx512 %.1f GFLOP/s, avx2 %.1f GFLOP/s\n", o.threads[t],
               peak512[t], peak256[t]);
    }
    /* A peak that does not scale with threads means other processes hold the cores. */
    for (int t = 1; t < o.n_threads; t++)
        if (peak[0] > 0 && peak[t] / peak[0] < 0.8 * o.threads[t] / o.threads[0])
            printf("warning: the t=%d peak is %.2fx the t=%d one: the cores are busy with other "
                   "work, so multi-thread figures of this run are unreliable\n",
                   o.threads[t], peak[t] / peak[0], o.threads[0]);

    openblas_results blas;
    memset(&blas, 0, sizeof blas);
    int have_blas = 0;
#ifdef TGC_BENCH_HAVE_OPENBLAS
    if (!o.no_openblas)
        have_blas = openblas_measure(&o, &blas) == 0;
    if (o.no_openblas)
        printf("openblas: skipped (--no-openblas)\n");
    else if (have_blas)
        printf("openblas: core %s, measured with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset\n",
               blas.corename);
#else
    printf("openblas: not installed (apt-get install libopenblas-dev, or tests/bench/deps.sh)\n");
#endif

    tgc_config def = tgc_config_default();
    printf("tgc: backend requested %s%s; sizes are MxNxK, row-major f32, median of up to %d "
           "runs\n",
           backend_str(o.backend_set ? o.backend : def.backend),
           o.backend_set ? " (--backend)" : " (tgc_config_default / TGC_BACKEND)", o.iters);
    fflush(stdout);

    int failed = 0;
    for (int s = 0; s < o.n_sizes; s++) {
        const gemm_shape *g = &o.sizes[s];
        float *ha = malloc((size_t)(g->m * g->k) * sizeof(float));
        float *hb = malloc((size_t)(g->k * g->n) * sizeof(float));
        tgc_scope_push();
        tgc_tensor *a = NULL, *b = NULL;
        if (ha && hb) {
            fill_random(ha, g->m * g->k, 1);
            fill_random(hb, g->k * g->n, 2);
            a = host_tensor(ha, g->m, g->k);
            b = host_tensor(hb, g->k, g->n);
        }
        for (int t = 0; t < o.n_threads && a && b; t++) {
            tgc_result r = {0};
            char label[64];
            snprintf(label, sizeof label, "%lldx%lldx%lld", (long long)g->m, (long long)g->n,
                     (long long)g->k);
            if (tgc_measure(&o, g, o.threads[t], a, b, ha, hb, &r) != 0) {
                printf("sgemm %s t=%d  tgc FAILED\n", label, o.threads[t]);
                failed = 1;
                continue;
            }
            char pk[32] = "", blas_part[96] = "", ratio[48] = "";
            if (peak[t] > 0)
                snprintf(pk, sizeof pk, " (%.2f peak)", r.gflops / peak[t]);
            double bg = have_blas ? blas.gflops[s][t] : -1;
            if (bg > 0) {
                snprintf(blas_part, sizeof blas_part, "  openblas[%s] %.1f", blas.corename, bg);
                if (peak[t] > 0)
                    snprintf(blas_part + strlen(blas_part), sizeof blas_part - strlen(blas_part),
                             " (%.2f)", bg / peak[t]);
                snprintf(ratio, sizeof ratio, "  tgc/openblas %.2f", r.gflops / bg);
            } else {
                snprintf(blas_part, sizeof blas_part, "  openblas n/a");
            }
            printf("sgemm %s t=%d  tgc[%s] %.1f GFLOP/s%s%s%s  (first call %.3f s, %d runs%s)\n",
                   label, o.threads[t], r.backend, r.gflops, pk, blas_part, ratio, r.first_call_s,
                   r.runs,
                   r.check_bad == 0  ? ""
                   : r.check_bad < 0 ? ", check skipped"
                                     : ", CHECK FAILED");
            if (r.check_bad > 0)
                failed = 1;
            fflush(stdout);
        }
        if (!ha || !hb || !a || !b) {
            fprintf(stderr, "bench_sgemm: could not allocate the inputs: %s\n", tgc_last_error());
            failed = 1;
        }
        tgc_scope_pop();
        free(ha), free(hb);
    }
    tgc_shutdown();
    return failed;
}
