/* The LLVM backend's conv2d backward kernels (runtime/conv_grad.h: the input gradient
 * CONV2D_GRAD_INPUT and the weight gradient CONV2D_GRAD_WEIGHT) on the conv layers of
 * ResNet18 (examples/models/resnet18.h at 3x32x32) and of the seed CNN
 * (examples/models/seed_cnn.h), at batch 64 by default, against the forward conv of the same
 * shape (a conv kernel with the layer's static geometry, as a compiled model runs it) and,
 * when the bench links oneDNN, against oneDNN's backward-data and backward-weights primitives
 * on plain NCHW / OIHW memory (the layout tgc takes; oneDNN may pick its own internal
 * algorithm). Every backward FLOP count is the forward's (2 * N * O * OH * OW * C/g * KH * KW).
 *
 * One line per layer and thread count: GFLOP/s of forward, dX and dW, and the ratios
 * dX/forward, dW/forward (and tgc/oneDNN). Each figure is the median of --iters runs after a
 * warmup (fewer when --budget seconds per measurement run out). With --cpu-time runs are timed
 * by the process's CPU time divided by the thread count instead of the wall clock: on a
 * machine shared with other jobs that counts only the time the runs were on a core (exact
 * for 1 thread; for more it also counts the workers' waiting). Not a timed test.
 *
 *   bench_conv_grad [--batch N] [--threads 1,2] [--iters N] [--budget SECONDS] [--quick]
 *                   [--layer SUBSTRING] [--cpu-time] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/llvm/llvm_conv_grad.h"
#include "backend/llvm/llvm_gemm_build.h"
#include "bench_util.h"
#include "runtime/conv_grad.h"

#ifdef TGC_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef TGC_BENCH_HAVE_OMP
#include <omp.h>
#endif

typedef struct layer {
    const char *name;
    int64_t c, h, o, k, s, p; /* square input, kernel, stride, padding */
} layer;

static const layer layers[] = {
    {"resnet18.conv1 3-64 7x7 s2", 3, 32, 64, 7, 2, 3},
    {"resnet18.layer1 64-64 3x3", 64, 8, 64, 3, 1, 1},
    {"resnet18.layer2.0.conv1 s2", 64, 8, 128, 3, 2, 1},
    {"resnet18.layer2 128-128 3x3", 128, 4, 128, 3, 1, 1},
    {"resnet18.layer2.0.down 1x1 s2", 64, 8, 128, 1, 2, 0},
    {"resnet18.layer3.0.conv1 s2", 128, 4, 256, 3, 2, 1},
    {"resnet18.layer3 256-256 3x3", 256, 2, 256, 3, 1, 1},
    {"resnet18.layer3.0.down 1x1 s2", 128, 4, 256, 1, 2, 0},
    {"resnet18.layer4.0.conv1 s2", 256, 2, 512, 3, 2, 1},
    {"resnet18.layer4 512-512 3x3", 512, 1, 512, 3, 1, 1},
    {"resnet18.layer4.0.down 1x1 s2", 256, 2, 512, 1, 2, 0},
    {"seed_cnn.conv1 3-32 p2", 3, 32, 32, 3, 1, 2},
    {"seed_cnn.conv2 32-64 p2", 32, 16, 64, 3, 1, 2},
    {"seed_cnn.conv3 64-128 p2", 64, 8, 128, 3, 1, 2},
};

static int g_cpu_time, g_threads_now = 1;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / g_threads_now;
}

/* time_runs (bench_util.h) on the clock --cpu-time chose */
static double time_median(run_fn fn, void *ctx, int iters, double budget)
{
    if (!g_cpu_time)
        return time_runs(fn, ctx, iters, budget, NULL);
    double t[256];
    if (iters > 256)
        iters = 256;
    double start = now();
    if (fn(ctx) != 0)
        return -1;
    int n = 0;
    while (n < iters && (n == 0 || now() - start < budget)) {
        double t0 = cpu_now();
        if (fn(ctx) != 0)
            return -1;
        t[n++] = cpu_now() - t0;
    }
    return median(t, n);
}

typedef struct run_ctx {
    int which; /* 0 forward, 1 dX, 2 dW */
    const tgc_gemm_kernel *fwd, *gemm, *conv;
    tgc_conv_params p;
    const float *x, *w, *dy;
    float *y, *dx, *dw;
    int threads;
} run_ctx;

static int run_tgc(void *v)
{
    run_ctx *c = v;
    tgc_status st;
    if (c->which == 0) {
        tgc_conv_args a = {.p = c->p, .x = c->x, .w = c->w, .y = c->y};
        st = tgc_conv_run(c->fwd, &a, c->threads);
    } else if (c->which == 1) {
        st = tgc_conv_grad_input_run(c->gemm, c->conv, &c->p, c->dy, c->w, c->dx, c->threads);
    } else {
        st = tgc_conv_grad_weight_run(c->gemm, &c->p, c->x, c->dy, c->dw, c->threads);
    }
    return st == TGC_OK ? 0 : 1;
}

static void fill_random(float *p, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 40) / (double)(1 << 24) - 0.5);
    }
}

#ifdef TGC_BENCH_HAVE_DNNL
/* oneDNN's backward data (which 1) or weights (which 2) on plain NCHW / OIHW memory; seconds
 * per run, < 0 when unavailable. */
typedef struct dnnl_ctx {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[3];
} dnnl_ctx;

static int dnnl_run(void *v)
{
    dnnl_ctx *c = v;
    return dnnl_primitive_execute(c->prim, c->stream, 3, c->args) == dnnl_success &&
                   dnnl_stream_wait(c->stream) == dnnl_success
               ? 0
               : 1;
}

static double dnnl_time(const run_ctx *c, int which, int iters, double budget)
{
    const tgc_conv_params *p = &c->p;
    int64_t oh = tgc_conv_out_h(p), ow = tgc_conv_out_w(p);
    dnnl_dims_t xd = {p->n, p->c, p->h, p->w}, wd = {p->o, p->c, p->kh, p->kw},
                yd = {p->n, p->o, oh, ow}, st = {p->stride_h, p->stride_w},
                pd = {p->pad_h, p->pad_w};
    dnnl_memory_desc_t xm, wm, ym;
    dnnl_convolution_desc_t fd, bd;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t fwd = NULL, bwd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t mx = NULL, mw = NULL, my = NULL;
    double t = -1;
#ifdef TGC_BENCH_HAVE_OMP
    omp_set_num_threads(c->threads);
#endif
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wm, 4, wd, dnnl_f32, dnnl_oihw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &xm,
                                           &wm, NULL, &ym, st, pd, pd) != dnnl_success ||
        dnnl_primitive_desc_create(&fwd, &fd, NULL, eng, NULL) != dnnl_success)
        goto done;
    if (which == 1 ? dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &xm,
                                                              &wm, &ym, st, pd, pd)
                   : dnnl_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &xm,
                                                                 &wm, NULL, &ym, st, pd, pd))
        goto done;
    if (dnnl_primitive_desc_create(&bwd, &bd, NULL, eng, fwd) != dnnl_success ||
        dnnl_primitive_create(&prim, bwd) != dnnl_success ||
        dnnl_memory_create(&mx, &xm, eng, which == 1 ? (void *)c->dx : (void *)c->x) !=
            dnnl_success ||
        dnnl_memory_create(&mw, &wm, eng, which == 1 ? (void *)c->w : (void *)c->dw) !=
            dnnl_success ||
        dnnl_memory_create(&my, &ym, eng, (void *)c->dy) != dnnl_success)
        goto done;
    dnnl_ctx d = {prim, stream, {{0, NULL}}};
    if (which == 1) {
        d.args[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mx};
        d.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mw};
    } else {
        d.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mx};
        d.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, mw};
    }
    d.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, my};
    t = time_median(dnnl_run, &d, iters, budget);
done:
    if (mx)
        dnnl_memory_destroy(mx);
    if (mw)
        dnnl_memory_destroy(mw);
    if (my)
        dnnl_memory_destroy(my);
    if (prim)
        dnnl_primitive_destroy(prim);
    if (bwd)
        dnnl_primitive_desc_destroy(bwd);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    if (stream)
        dnnl_stream_destroy(stream);
    if (eng)
        dnnl_engine_destroy(eng);
    return t;
}
#endif

int main(int argc, char **argv)
{
    int64_t batch = 64;
    int threads[8] = {1, 2}, n_threads = 2, iters = 10;
    double budget = 2.0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batch = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            budget = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--layer") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--cpu-time")) {
            g_cpu_time = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            iters = 3;
            budget = 0.5;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_threads = 0;
            for (char *s = strtok(argv[++i], ","); s && n_threads < 8; s = strtok(NULL, ","))
                threads[n_threads++] = atoi(s);
        } else {
            fprintf(stderr, "usage: bench_conv_grad [--batch N] [--threads 1,2] [--iters N] "
                            "[--budget S] [--quick] [--layer SUBSTRING] [--cpu-time]\n");
            return 2;
        }
    }
    const tgc_gemm_kernel *gemm, *conv;
    if (tgc_llvm_conv_grad_kernels(&gemm, &conv) != TGC_OK) {
        fprintf(stderr, "bench_conv_grad: %s\n", tgc_last_error());
        return 1;
    }
#ifdef TGC_BENCH_HAVE_DNNL
    const char *dnnl_note = "oneDNN backward (plain NCHW) linked";
#else
    const char *dnnl_note = "oneDNN not linked (tests/bench/deps.sh)";
#endif
    printf("bench_conv_grad: batch %lld, f32, %s; GFLOP/s (forward FLOPs for every op), %s\n",
           (long long)batch, dnnl_note, g_cpu_time ? "CPU time / threads" : "wall clock");
    printf("%-32s %3s %8s %8s %8s %7s %7s", "layer", "thr", "fwd", "dX", "dW", "dX/fwd", "dW/fwd");
#ifdef TGC_BENCH_HAVE_DNNL
    printf(" %8s %8s %7s %7s", "dnnl-dX", "dnnl-dW", "dX/dnnl", "dW/dnnl");
#endif
    printf("\n");
    double sum_t[3] = {0}, sum_f = 0;
    for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
        const layer *L = &layers[li];
        if (only && !strstr(L->name, only))
            continue;
        run_ctx c = {
            .p = {batch, L->c, L->h, L->h, L->o, L->k, L->k, L->s, L->s, L->p, L->p, 1, 1, 1}};
        int64_t oh = tgc_conv_out_h(&c.p), ow = tgc_conv_out_w(&c.p);
        int64_t nx = batch * L->c * L->h * L->h, nw = L->o * L->c * L->k * L->k,
                ny = batch * L->o * oh * ow;
        double flops = 2.0 * (double)ny * (double)(L->c * L->k * L->k);
        float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *y = malloc((size_t)ny * 4),
              *dy = malloc((size_t)ny * 4), *dx = malloc((size_t)nx * 4),
              *dw = malloc((size_t)nw * 4);
        tgc_gemm_kernel fwd;
        void *code = NULL;
        if (!x || !w || !y || !dy || !dx || !dw ||
            tgc_llvm_gemm_build(TGC_GEMM_KIND_CONV, &c.p, NULL, &fwd, &code) != TGC_OK) {
            fprintf(stderr, "bench_conv_grad: %s\n", tgc_last_error());
            return 1;
        }
        fill_random(x, nx, 1);
        fill_random(w, nw, 2);
        fill_random(dy, ny, 3);
        c.fwd = &fwd;
        c.gemm = gemm;
        c.conv = conv;
        c.x = x, c.w = w, c.dy = dy, c.y = y, c.dx = dx, c.dw = dw;
        for (int ti = 0; ti < n_threads; ti++) {
            c.threads = threads[ti];
            g_threads_now = c.threads;
            double t[3];
            for (int k = 0; k < 3; k++) {
                c.which = k;
                t[k] = time_median(run_tgc, &c, iters, budget);
            }
            if (ti == n_threads - 1) {
                for (int k = 0; k < 3; k++)
                    sum_t[k] += t[k];
                sum_f += flops;
            }
            printf("%-32s %3d %8.1f %8.1f %8.1f %7.2f %7.2f", L->name, c.threads,
                   flops / t[0] * 1e-9, flops / t[1] * 1e-9, flops / t[2] * 1e-9, t[0] / t[1],
                   t[0] / t[2]);
#ifdef TGC_BENCH_HAVE_DNNL
            double d1 = dnnl_time(&c, 1, iters, budget), d2 = dnnl_time(&c, 2, iters, budget);
            printf(" %8.1f %8.1f %7.2f %7.2f", d1 > 0 ? flops / d1 * 1e-9 : 0,
                   d2 > 0 ? flops / d2 * 1e-9 : 0, d1 > 0 ? d1 / t[1] : 0, d2 > 0 ? d2 / t[2] : 0);
#endif
            printf("\n");
        }
        tgc_llvm_gemm_build_free(code);
        free(x);
        free(w);
        free(y);
        free(dy);
        free(dx);
        free(dw);
    }
    printf("all layers at %d threads: fwd %.2f ms, dX %.2f ms, dW %.2f ms (%.1f / %.1f / %.1f "
           "GFLOP/s)\n",
           threads[n_threads - 1], sum_t[0] * 1e3, sum_t[1] * 1e3, sum_t[2] * 1e3,
           sum_f / sum_t[0] * 1e-9, sum_f / sum_t[1] * 1e-9, sum_f / sum_t[2] * 1e-9);
    return 0;
}
