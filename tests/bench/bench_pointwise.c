/* A chain of 8 pointwise ops over 64 Mi floats (256 MiB), through the public API:
 *
 *   y = -min(|relu(x * 1.5 + 0.25) * s - 0.5|, cap)
 *     = neg(minimum(abs(sub_scalar(mul(relu(add_scalar(mul_scalar(x, 1.5), 0.25)), s), 0.5)),
 *                   cap))
 *
 * x is [8192, 8192]; s, the second input, is a per-column scale [8192] broadcast over the rows
 * (--second full makes it a full [8192, 8192] tensor); cap is a [1] tensor. Measured at 1 and
 * 2 threads:
 *   - compiled: tgc_compile of the chain (cfg.num_threads = t); a fused kernel reads x and
 *     writes y once, so its floor is one memcpy of 256 MiB;
 *   - eager: the same function with cfg.backend = EAGER, each op a separate kernel;
 *   - memcpy of 256 MiB into a buffer written before (2 threads: two halves on two pthreads),
 *     and into a fresh malloc each time (that adds the page faults a fresh output pays);
 *   - hand-fused C: one loop doing the 8 ops, compiled with the project's flags; and on x86 the
 *     same loop in SSE2 with non-temporal stores, which skip the read-for-ownership of y that
 *     ordinary stores pay (whether that wins depends on the machine and the thread count).
 * Compiled outputs are freed every iteration (a fresh output, as users get). Prints times,
 * GB/s of the traffic each one needs (x read + y written [+ s read]), compiled/memcpy (target
 * <= 1.3) and eager/compiled. One line per measurement; compare ratios within one run.
 *
 *   bench_pointwise [--quick] [--rows R] [--cols C] [--second row|full] [--threads 1,2]
 *                   [--iters N] [--budget SECONDS] [--backend auto|llvm|interp|eager] */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define BENCH_SSE2 1
#endif

#include "bench_util.h"
#include "tgc/tgc.h"

#define MAX_THREADS 8

typedef struct options {
    int64_t rows, cols;
    int full_second;
    int threads[MAX_THREADS];
    int n_threads;
    int iters;
    double budget;
    int backend_set;
    tgc_backend_kind backend;
} options;

static const float k_mul = 1.5f, k_add = 0.25f, k_sub = 0.5f, k_cap = 1.75f;

static void fill_random(float *p, int64_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((double)(s >> 40) / (double)(1 << 24));
    }
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

static int parse_threads(const char *s, options *o)
{
    o->n_threads = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_THREADS || o->n_threads == MAX_THREADS)
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

static void usage(FILE *to)
{
    fprintf(to, "usage: bench_pointwise [--quick] [--rows R] [--cols C] [--second row|full]\n"
                "                       [--threads 1,2] [--iters N] [--budget SECONDS] "
                "[--backend NAME]\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    const char *threads = "1,2";
    o->rows = 8192, o->cols = 8192;
    o->iters = 7;
    o->budget = 20.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->rows = 1024, o->iters = 3, o->budget = 3.0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v && strcmp(a, "--rows") == 0) {
            o->rows = atoll(v), i++;
        } else if (v && strcmp(a, "--cols") == 0) {
            o->cols = atoll(v), i++;
        } else if (v && strcmp(a, "--second") == 0) {
            if (strcmp(v, "row") != 0 && strcmp(v, "full") != 0)
                return -1;
            o->full_second = strcmp(v, "full") == 0, i++;
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
    if (o->rows < 1 || o->cols < 1 || o->iters < 1 || o->budget <= 0)
        return -1;
    return parse_threads(threads, o);
}

/* ---- the chain, as a model function ---- */

static tgc_status chain_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *t = tgc_mul_scalar(in[0], k_mul); /* 1 */
    t = tgc_add_scalar(t, k_add);                 /* 2 */
    t = tgc_relu(t);                              /* 3 */
    t = tgc_mul(t, in[1]);                        /* 4: the second input */
    t = tgc_sub_scalar(t, k_sub);                 /* 5 */
    t = tgc_abs(t);                               /* 6 */
    t = tgc_minimum(t, in[2]);                    /* 7: cap, a [1] tensor */
    out[0] = tgc_neg(t);                          /* 8 */
    return out[0] ? TGC_OK : tgc_last_status();
}

/* ---- host references, split by rows over threads ---- */

typedef struct host_job {
    const float *x, *s;
    float *y;
    int64_t row0, row1, cols;
    int full_second;
    int stream; /* non-temporal stores (x86 SSE2) where y is 16-byte aligned */
    /* memcpy */
    const char *src;
    char *dst;
    size_t bytes;
} host_job;

#ifdef BENCH_SSE2
/* The same 8 ops on 4 lanes, stored with non-temporal stores that skip the read-for-ownership
 * of y (as memcpy does for large copies). Returns the number of columns done. */
static int64_t fused_row_stream(const float *x, const float *s, float *y, int64_t cols)
{
    if (((uintptr_t)y & 15) != 0)
        return 0;
    const __m128 mul = _mm_set1_ps(k_mul), add = _mm_set1_ps(k_add), sub = _mm_set1_ps(k_sub);
    const __m128 cap = _mm_set1_ps(k_cap), zero = _mm_setzero_ps(), sign = _mm_set1_ps(-0.0f);
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        __m128 v = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + c), mul), add);
        v = _mm_max_ps(v, zero);
        v = _mm_sub_ps(_mm_mul_ps(v, _mm_loadu_ps(s + c)), sub);
        v = _mm_andnot_ps(sign, v);
        v = _mm_min_ps(v, cap);
        _mm_stream_ps(y + c, _mm_xor_ps(v, sign));
    }
    return c;
}
#endif

static void *fused_thread(void *arg)
{
    const host_job *j = arg;
    const float cap = k_cap;
    for (int64_t r = j->row0; r < j->row1; r++) {
        const float *x = j->x + r * j->cols;
        const float *s = j->full_second ? j->s + r * j->cols : j->s;
        float *y = j->y + r * j->cols;
        int64_t c = 0;
#ifdef BENCH_SSE2
        if (j->stream)
            c = fused_row_stream(x, s, y, j->cols);
#endif
        for (; c < j->cols; c++) {
            float v = x[c] * k_mul + k_add;
            v = v > 0.0f ? v : 0.0f;
            v = v * s[c] - k_sub;
            v = fabsf(v);
            v = v < cap ? v : cap;
            y[c] = -v;
        }
    }
#ifdef BENCH_SSE2
    if (j->stream)
        _mm_sfence();
#endif
    return NULL;
}

static void *memcpy_thread(void *arg)
{
    const host_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

/* Runs fn over `threads` jobs (the calling thread takes the first). */
static int run_jobs(void *(*fn)(void *), host_job *jobs, int threads)
{
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tid[i], NULL, fn, &jobs[i]) != 0)
            break;
        started++;
    }
    fn(&jobs[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
    return started == threads - 1 ? 0 : -1;
}

typedef struct host_ctx {
    const options *o;
    const float *x, *s;
    float *y;
    int threads;
    int fresh;  /* memcpy into a fresh malloc each run */
    int stream; /* hand-fused with non-temporal stores */
} host_ctx;

static int fused_run(void *p)
{
    host_ctx *c = p;
    host_job jobs[MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    int64_t rows = c->o->rows;
    for (int i = 0; i < c->threads; i++)
        jobs[i] = (host_job){.x = c->x,
                             .s = c->s,
                             .y = c->y,
                             .row0 = rows * i / c->threads,
                             .row1 = rows * (i + 1) / c->threads,
                             .cols = c->o->cols,
                             .full_second = c->o->full_second,
                             .stream = c->stream};
    return run_jobs(fused_thread, jobs, c->threads);
}

static int memcpy_run(void *p)
{
    host_ctx *c = p;
    size_t bytes = (size_t)(c->o->rows * c->o->cols) * sizeof(float);
    char *dst = c->fresh ? malloc(bytes) : (char *)c->y;
    if (!dst)
        return -1;
    host_job jobs[MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    size_t chunk = (bytes / (size_t)c->threads + 63) & ~(size_t)63;
    for (int i = 0; i < c->threads; i++) {
        size_t off = chunk * (size_t)i < bytes ? chunk * (size_t)i : bytes;
        size_t end = off + chunk < bytes ? off + chunk : bytes;
        jobs[i] = (host_job){.src = (const char *)c->x + off, .dst = dst + off, .bytes = end - off};
    }
    int rc = run_jobs(memcpy_thread, jobs, c->threads);
    if (c->fresh) {
        volatile char sink = dst[bytes - 1];
        (void)sink;
        free(dst);
    }
    return rc;
}

/* ---- tgc side ---- */

typedef struct tgc_ctx {
    tgc_fn *f;
    tgc_tensor *in[3];
} tgc_ctx;

static int tgc_run(void *p)
{
    tgc_ctx *x = p;
    tgc_tensor *y = NULL;
    if (tgc_call(x->f, NULL, x->in, 3, &y, 1) != TGC_OK) {
        fprintf(stderr, "bench_pointwise: %s\n", tgc_last_error());
        return -1;
    }
    tgc_tensor_free(y);
    return 0;
}

typedef struct tgc_result {
    double sec, first_call_s, max_diff;
    int kernels;
    char backend[32];
} tgc_result;

/* Times the chain with `backend`; compares the first output with the hand-fused `ref`. */
static int tgc_measure(const options *o, int threads, tgc_backend_kind backend,
                       tgc_tensor *const *in, const float *ref, tgc_result *r)
{
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = threads;
    cfg.backend = backend;
    tgc_fn *f = tgc_compile(chain_fn, "pointwise8", &cfg);
    if (!f) {
        fprintf(stderr, "bench_pointwise: %s\n", tgc_last_error());
        return -1;
    }
    tgc_ctx ctx = {f, {in[0], in[1], in[2]}};
    tgc_tensor *y = NULL;
    double t0 = now();
    tgc_status st = tgc_call(f, NULL, ctx.in, 3, &y, 1);
    r->first_call_s = now() - t0;
    if (st != TGC_OK) {
        fprintf(stderr, "bench_pointwise: %s\n", tgc_last_error());
        tgc_fn_free(f);
        return -1;
    }
    size_t n = (size_t)(o->rows * o->cols);
    float *got = malloc(n * sizeof(float));
    r->max_diff = -1;
    if (got && tgc_copy_to_host(y, got, n * sizeof(float)) == TGC_OK) {
        r->max_diff = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[i] - (double)ref[i]) / fmax(1.0, fabs((double)ref[i]));
            if (!(d <= r->max_diff))
                r->max_diff = d;
        }
    }
    free(got);
    tgc_tensor_free(y);
    backend_of(f, r->backend, sizeof r->backend);
    tgc_stats stats;
    r->kernels = tgc_fn_stats(f, &stats) == TGC_OK ? stats.kernels_last_variant : -1;
    r->sec = time_runs(tgc_run, &ctx, o->iters, o->budget, NULL);
    tgc_fn_free(f);
    return r->sec > 0 ? 0 : -1;
}

static void print_line(const char *what, int threads, double sec, double bytes, double memcpy_sec)
{
    printf("pointwise8 t=%d  %-28s %8.2f ms  %6.1f GB/s", threads, what, 1e3 * sec,
           bytes / sec * 1e-9);
    if (memcpy_sec > 0)
        printf("  /memcpy %.2f", sec / memcpy_sec);
    printf("\n");
}

static int run_threads(const options *o, int threads, tgc_tensor *const *in, const float *hx,
                       const float *hs, float *hy, float *ref)
{
    size_t n = (size_t)(o->rows * o->cols);
    double copy_bytes = 2.0 * (double)n * sizeof(float);
    double chain_bytes =
        copy_bytes + (o->full_second ? (double)n : (double)o->cols) * sizeof(float);
    int failed = 0;

    host_ctx hc = {o, hx, hs, hy, threads, 0, 0};
    double t_copy = time_runs(memcpy_run, &hc, o->iters, o->budget, NULL);
    hc.fresh = 1;
    double t_copy_fresh = time_runs(memcpy_run, &hc, o->iters, o->budget, NULL);
    hc.fresh = 0;
    hc.y = ref;
    double t_stream = -1;
#ifdef BENCH_SSE2
    hc.stream = 1;
    t_stream = time_runs(fused_run, &hc, o->iters, o->budget, NULL);
    hc.stream = 0;
#endif
    double t_fused = time_runs(fused_run, &hc, o->iters, o->budget, NULL);
    if (t_copy <= 0 || t_copy_fresh <= 0 || t_fused <= 0) {
        fprintf(stderr, "bench_pointwise: a host reference failed\n");
        return 1;
    }
    print_line("memcpy (warm dst)", threads, t_copy, copy_bytes, 0);
    print_line("memcpy into fresh malloc", threads, t_copy_fresh, copy_bytes, t_copy);
    print_line("hand-fused C loop", threads, t_fused, chain_bytes, t_copy);
    if (t_stream > 0)
        print_line("hand-fused SSE2, NT stores", threads, t_stream, chain_bytes, t_copy);
    fflush(stdout);

    tgc_config def = tgc_config_default();
    tgc_backend_kind compiled = o->backend_set ? o->backend : def.backend;
    tgc_result c = {0}, e = {0};
    if (tgc_measure(o, threads, compiled, in, ref, &c) != 0) {
        printf("pointwise8 t=%d  compiled FAILED\n", threads);
        failed = 1;
        c.sec = -1;
    }
    if (tgc_measure(o, threads, TGC_BACKEND_EAGER, in, ref, &e) != 0) {
        printf("pointwise8 t=%d  eager FAILED\n", threads);
        failed = 1;
        e.sec = -1;
    }
    char what[64];
    if (c.sec > 0) {
        snprintf(what, sizeof what, "compiled tgc[%s] %d kernel%s", c.backend, c.kernels,
                 c.kernels == 1 ? "" : "s");
        print_line(what, threads, c.sec, chain_bytes, t_copy);
    }
    if (e.sec > 0)
        print_line("eager tgc (8 kernels)", threads, e.sec, chain_bytes, t_copy);
    if (c.sec > 0 && e.sec > 0)
        printf("pointwise8 t=%d  compiled/memcpy %.2f (target <= 1.3)  compiled/hand-fused %.2f  "
               "eager/compiled %.2f  (first compiled call %.3f s)\n",
               threads, c.sec / t_copy, c.sec / t_fused, e.sec / c.sec, c.first_call_s);
    for (int i = 0; i < 2; i++) {
        const tgc_result *r = i ? &e : &c;
        if (r->sec > 0 && !(r->max_diff >= 0 && r->max_diff <= 1e-5)) {
            printf("  check %s vs hand-fused: max rel diff %.2e  CHECK FAILED\n",
                   i ? "eager" : "compiled", r->max_diff);
            failed = 1;
        }
    }
    fflush(stdout);
    return failed;
}

int main(int argc, char **argv)
{
    options o = {0};
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    size_t n = (size_t)(o.rows * o.cols), sn = o.full_second ? n : (size_t)o.cols;
    float *hx = malloc(n * sizeof(float)), *hs = malloc(sn * sizeof(float));
    float *hy = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    if (!hx || !hs || !hy || !ref) {
        fprintf(stderr, "bench_pointwise: out of memory\n");
        free(hx), free(hs), free(hy), free(ref);
        return 1;
    }
    fill_random(hx, (int64_t)n, 1, -1.0f, 1.0f);
    fill_random(hs, (int64_t)sn, 2, 0.0f, 4.0f);
    memset(hy, 0, n * sizeof(float));
    memset(ref, 0, n * sizeof(float));

    tgc_config def = tgc_config_default();
    printf("tgc: backend requested %s%s; y = -min(|relu(x*1.5+0.25)*s - 0.5|, cap), x [%lld, "
           "%lld] f32 (%.0f MiB), s %s, median of up to %d runs\n",
           backend_str(o.backend_set ? o.backend : def.backend),
           o.backend_set ? " (--backend)" : " (tgc_config_default / TGC_BACKEND)",
           (long long)o.rows, (long long)o.cols, (double)n * sizeof(float) / (1 << 20),
           o.full_second ? "full-size" : "[cols] broadcast", o.iters);
    fflush(stdout);

    int failed = 0;
    tgc_scope_push();
    int64_t xs[2] = {o.rows, o.cols}, ss[2] = {o.rows, o.cols}, cs[1] = {1};
    float cap = k_cap;
    tgc_tensor *in[3] = {
        tgc_from_data(hx, n * sizeof(float), xs, 2, TGC_F32, tgc_cpu()),
        o.full_second ? tgc_from_data(hs, n * sizeof(float), ss, 2, TGC_F32, tgc_cpu())
                      : tgc_from_data(hs, sn * sizeof(float), &ss[1], 1, TGC_F32, tgc_cpu()),
        tgc_from_data(&cap, sizeof cap, cs, 1, TGC_F32, tgc_cpu()),
    };
    if (!in[0] || !in[1] || !in[2]) {
        fprintf(stderr, "bench_pointwise: inputs: %s\n", tgc_last_error());
        failed = 1;
    }
    for (int t = 0; t < o.n_threads && !failed; t++)
        failed |= run_threads(&o, o.threads[t], in, hx, hs, hy, ref);
    tgc_scope_pop();
    free(hx), free(hs), free(hy), free(ref);
    tgc_shutdown();
    return failed;
}
