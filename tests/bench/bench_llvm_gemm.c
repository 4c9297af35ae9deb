/* Microbenchmark of the LLVM backend's GEMM / conv2d kernels, called directly (no graph):
 * GFLOP/s at 1 and 2 threads, the fraction of the AVX-512 FMA peak (206 / 400 GFLOP/s on the
 * 2-vCPU Zen 5 development machine) and, for sgemm, OpenBLAS in the same run (loaded with
 * dlopen when present; run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` so OpenBLAS uses
 * its AVX-512 kernels).
 *
 * usage: bench_llvm_gemm [--only gemm|conv] [--threads N] [--time S]
 *                        [--mr R --nv V --ku U --kc K --mc M --nc N] */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "backend/llvm/llvm_gemm_build.h"

/* weak: the bench still links when the library is built without LLVM */
extern tgc_status tgc_llvm_gemm_build(int kind, const tgc_conv_params *static_params,
                                      const tgc_gemm_config *cfg, tgc_gemm_kernel *k, void **code)
    __attribute__((weak));

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
typedef void (*set_threads_fn)(int);
static sgemm_fn g_blas;
static set_threads_fn g_blas_threads;
static double g_min_time = 0.4;

static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) & 1023) / 512.0f - 1.0f;
    }
}

static float *alloc_f(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

typedef void (*work_fn)(void *ctx, int threads);

/* best time of repeated runs (the machine is shared: the minimum is the least disturbed) */
static double best_time(work_fn f, void *ctx, int threads)
{
    f(ctx, threads);
    double best = 1e30, start = now();
    int reps = 0;
    while (reps < 3 || now() - start < g_min_time) {
        double t0 = now();
        f(ctx, threads);
        double t = now() - t0;
        if (t < best)
            best = t;
        reps++;
    }
    return best;
}

typedef struct gemm_case {
    tgc_gemm_kernel *k;
    tgc_gemm_args a;
} gemm_case;

static void run_tgc_gemm(void *ctx, int threads)
{
    gemm_case *c = ctx;
    if (tgc_gemm_run(c->k, &c->a, threads) != TGC_OK) {
        fprintf(stderr, "tgc_gemm_run: %s\n", tgc_last_error());
        exit(1);
    }
}

static void run_blas_gemm(void *ctx, int threads)
{
    gemm_case *c = ctx;
    g_blas_threads(threads);
    g_blas(101, 111, 111, (int)c->a.m, (int)c->a.n, (int)c->a.k, 1.0f, c->a.a, (int)c->a.a_rs,
           c->a.b, (int)c->a.b_rs, 0.0f, c->a.c, (int)c->a.c_rs);
}

static double peak(int threads)
{
    return threads == 1 ? 206.0 : 400.0;
}

static double check_gemm(const gemm_case *c)
{
    /* spot-check a few entries against a double-precision dot product */
    double worst = 0;
    for (int s = 0; s < 16; s++) {
        int64_t i = (int64_t)s * 7919 % c->a.m, j = (int64_t)s * 104729 % c->a.n;
        double ref = 0;
        for (int64_t p = 0; p < c->a.k; p++)
            ref += (double)c->a.a[i * c->a.a_rs + p] * c->a.b[p * c->a.b_rs + j];
        double err = fabs(ref - c->a.c[i * c->a.c_rs + j]) / (1.0 + fabs(ref));
        if (err > worst)
            worst = err;
    }
    return worst;
}

static void bench_gemm(tgc_gemm_kernel *k, int64_t m, int64_t n, int64_t kk, int thr_lo, int thr_hi)
{
    gemm_case c = {.k = k};
    c.a = (tgc_gemm_args){.batch = 1,
                          .m = m,
                          .n = n,
                          .k = kk,
                          .a_rs = kk,
                          .a_cs = 1,
                          .b_rs = n,
                          .b_cs = 1,
                          .c_rs = n};
    float *a = alloc_f((size_t)(m * kk)), *b = alloc_f((size_t)(kk * n)),
          *cc = alloc_f((size_t)(m * n));
    fill(a, (size_t)(m * kk), 1);
    fill(b, (size_t)(kk * n), 2);
    c.a.a = a;
    c.a.b = b;
    c.a.c = cc;
    double flop = 2.0 * (double)m * (double)n * (double)kk;
    for (int t = thr_lo; t <= thr_hi; t++) {
        double tt = best_time(run_tgc_gemm, &c, t);
        double err = check_gemm(&c);
        double g = flop / tt * 1e-9;
        printf("sgemm %6lld x %5lld x %5lld  %d thr: tgc %7.1f GFLOP/s (%3.0f%% peak)",
               (long long)m, (long long)n, (long long)kk, t, g, 100 * g / peak(t));
        if (g_blas) {
            double tb = best_time(run_blas_gemm, &c, t);
            double gb = flop / tb * 1e-9;
            printf("  openblas %7.1f  ratio %.2f", gb, g / gb);
        }
        printf("%s\n", err > 1e-3 ? "  WRONG RESULT" : "");
        fflush(stdout);
    }
    free(a);
    free(b);
    free(cc);
}

typedef struct conv_case {
    tgc_gemm_kernel *k;
    tgc_conv_args a;
} conv_case;

static void run_tgc_conv(void *ctx, int threads)
{
    conv_case *c = ctx;
    if (tgc_conv_run(c->k, &c->a, threads) != TGC_OK) {
        fprintf(stderr, "tgc_conv_run: %s\n", tgc_last_error());
        exit(1);
    }
}

static void bench_conv(const tgc_gemm_config *cfg, tgc_conv_params p, int thr_lo, int thr_hi,
                       double ref1, double ref2, int use_static)
{
    tgc_gemm_kernel k;
    void *code = NULL;
    double t0 = now();
    if (tgc_llvm_gemm_build(TGC_GEMM_KIND_CONV, use_static ? &p : NULL, cfg, &k, &code) != TGC_OK) {
        fprintf(stderr, "build: %s\n", tgc_last_error());
        exit(1);
    }
    double tbuild = now() - t0;
    int64_t oh = tgc_conv_out_h(&p), ow = tgc_conv_out_w(&p);
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), nw = (size_t)(p.o * p.c / p.groups * p.kh * p.kw),
           ny = (size_t)(p.n * p.o * oh * ow);
    float *x = alloc_f(nx), *w = alloc_f(nw), *y = alloc_f(ny);
    fill(x, nx, 3);
    fill(w, nw, 4);
    conv_case c = {.k = &k, .a = {.p = p, .x = x, .w = w, .y = y}};
    double flop = 2.0 * (double)p.n * (double)p.o * (double)(oh * ow) *
                  (double)(p.c / p.groups * p.kh * p.kw);
    for (int t = thr_lo; t <= thr_hi; t++) {
        double tt = best_time(run_tgc_conv, &c, t);
        double g = flop / tt * 1e-9, ref = t == 1 ? ref1 : ref2;
        printf("conv N=%lld %lld->%lld %lldx%lld k%lldx%lld s%lld p%lld g%lld%s %d thr: tgc %7.1f "
               "GFLOP/s (%3.0f%% peak)",
               (long long)p.n, (long long)p.c, (long long)p.o, (long long)p.h, (long long)p.w,
               (long long)p.kh, (long long)p.kw, (long long)p.stride_h, (long long)p.pad_h,
               (long long)p.groups, use_static ? " static" : "", t, g, 100 * g / peak(t));
        if (ref > 0)
            printf("  vs oneDNN (FACTS.md) %.0f: ratio %.2f", ref, g / ref);
        printf("  [build %.0f ms]\n", tbuild * 1e3);
        fflush(stdout);
    }
    free(x);
    free(w);
    free(y);
    tgc_llvm_gemm_build_free(code);
}

static void load_openblas(void)
{
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("(OpenBLAS not found: measuring tgc only)\n");
        return;
    }
    g_blas = (sgemm_fn)dlsym(h, "cblas_sgemm");
    g_blas_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    const char *(*core)(void) = (const char *(*)(void))dlsym(h, "openblas_get_corename");
    if (!g_blas || !g_blas_threads)
        g_blas = NULL;
    else
        printf("OpenBLAS core: %s%s\n", core ? core() : "?",
               getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE is set: run under env -u "
                                             "OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)"
                                           : "");
}

int main(int argc, char **argv)
{
    if (!tgc_llvm_gemm_build) {
        printf("bench_llvm_gemm: libtgc was built without the LLVM backend\n");
        return 0;
    }
    tgc_gemm_config cfg = {0};
    const char *only = "";
    int64_t shape[3] = {0, 0, 0};
    int thr_lo = 1, thr_hi = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i];
        int v = atoi(argv[i + 1]);
        if (!strcmp(o, "--only"))
            only = argv[i + 1];
        else if (!strcmp(o, "--threads"))
            thr_lo = thr_hi = v;
        else if (!strcmp(o, "--time"))
            g_min_time = atof(argv[i + 1]);
        else if (!strcmp(o, "--mr"))
            cfg.mr = v;
        else if (!strcmp(o, "--nv"))
            cfg.nr_vec = v;
        else if (!strcmp(o, "--ku"))
            cfg.ku = v;
        else if (!strcmp(o, "--kc"))
            cfg.kc = v;
        else if (!strcmp(o, "--mc"))
            cfg.mc = v;
        else if (!strcmp(o, "--nc"))
            cfg.nc = v;
        else if (!strcmp(o, "--shape"))
            sscanf(argv[i + 1], "%" SCNd64 ",%" SCNd64 ",%" SCNd64, &shape[0], &shape[1],
                   &shape[2]);
    }
    if (strcmp(only, "conv")) {
        load_openblas();
        tgc_gemm_kernel k;
        void *code = NULL;
        double t0 = now();
        if (tgc_llvm_gemm_build(TGC_GEMM_KIND_GEMM, NULL, &cfg, &k, &code) != TGC_OK) {
            fprintf(stderr, "build: %s\n", tgc_last_error());
            return 1;
        }
        printf("gemm kernel: MR=%d NR=%d VL=%d KU=%d KC=%d MC=%d NC=%d, built in %.1f ms\n", k.mr,
               k.nr, k.vl, k.ku, k.kc, k.mc, k.nc, (now() - t0) * 1e3);
        static const int64_t shapes[][3] = {
            {256, 256, 256},  {512, 512, 512},  {1024, 1024, 1024}, {2048, 2048, 2048},
            {65536, 64, 576}, {4096, 768, 768}, {4096, 3072, 768},
        };
        if (shape[0] > 0)
            bench_gemm(&k, shape[0], shape[1], shape[2], thr_lo, thr_hi);
        for (size_t s = 0; shape[0] == 0 && s < sizeof shapes / sizeof shapes[0]; s++)
            bench_gemm(&k, shapes[s][0], shapes[s][1], shapes[s][2], thr_lo, thr_hi);
        tgc_llvm_gemm_build_free(code);
    }
    if (strcmp(only, "gemm")) {
        tgc_conv_params p = {.n = 64,
                             .c = 64,
                             .h = 32,
                             .w = 32,
                             .o = 64,
                             .kh = 3,
                             .kw = 3,
                             .stride_h = 1,
                             .stride_w = 1,
                             .pad_h = 1,
                             .pad_w = 1,
                             .dil_h = 1,
                             .dil_w = 1,
                             .groups = 1};
        bench_conv(&cfg, p, thr_lo, thr_hi, 183, 355, 0);
        bench_conv(&cfg, p, thr_lo, thr_hi, 183, 355, 1);
    }
    return 0;
}
