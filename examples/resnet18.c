/* ResNet18 inference with libtgc: compiled vs eager on a CIFAR-10 sized batch.
 *
 * The model (torchvision's resnet18 layout, 10 classes, eval-mode batch norm) is in
 * models/resnet18.h. This program builds it, runs one batch eagerly and through
 * tgc_compile, and prints the compile time, the time per call of each, how far apart their
 * outputs are and the top class of the first images.
 *
 *   ./build/examples/resnet18 [--batch 64] [--threads 0] [--iters 3] [--warmup 1]
 *                             [--width 64] [--backend auto|llvm|cuda|interp|eager]
 *                             [--device cpu|cuda] [--precision highest|high|medium]
 *                             [--mode default|reduce-overhead]
 *
 * --threads 0 means all cores (cfg.num_threads). --device cuda moves the model with
 * tgc_module_to and makes the input on the GPU; backend auto then compiles with CUDA, and
 * --precision / --mode set cfg.matmul_precision (TF32 = high, bf16 = medium) and cfg.mode
 * (reduce-overhead replays the variant as one CUDA graph). GPU timings wait for the output. The
 * weights are fixed-seed random, so the "classes" only show that compiled and eager agree. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tgc/tgc.h>

#include "device_opts.h"
#include "models/resnet18.h"

typedef struct options {
    int batch, threads, iters, warmup, width;
    tgc_backend_kind backend;
    tgc_device device;
    tgc_matmul_precision precision;
    tgc_mode mode;
} options;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_backend(const char *s, tgc_backend_kind *out)
{
    static const struct {
        const char *name;
        tgc_backend_kind kind;
    } names[] = {{"auto", TGC_BACKEND_AUTO},
                 {"llvm", TGC_BACKEND_LLVM},
                 {"cuda", TGC_BACKEND_CUDA},
                 {"interp", TGC_BACKEND_INTERP},
                 {"eager", TGC_BACKEND_EAGER}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].kind;
            return 1;
        }
    return 0;
}

static void print_usage(FILE *fp, const char *prog)
{
    fprintf(fp,
            "usage: %s [--batch N] [--threads N (0 = all cores)] [--iters N] [--warmup N]\n"
            "          [--width N (64 = torchvision)] [--backend "
            "auto|llvm|cuda|interp|eager]\n" EXAMPLE_DEVICE_USAGE
            "--device cuda: the model and input on tgc_cuda(0) (backend auto compiles for it);\n"
            "--precision: cfg.matmul_precision (GPU: highest = fp32, high = TF32, medium = bf16);\n"
            "--mode reduce-overhead: each compiled call replays one CUDA graph\n",
            prog);
}

/* 1: run; 0: bad arguments; -1: --help. */
static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        int *dst = strcmp(a, "--batch") == 0     ? &o->batch
                   : strcmp(a, "--threads") == 0 ? &o->threads
                   : strcmp(a, "--iters") == 0   ? &o->iters
                   : strcmp(a, "--warmup") == 0  ? &o->warmup
                   : strcmp(a, "--width") == 0   ? &o->width
                                                 : NULL;
        int dev_opt = example_device_option(argc, argv, &i, &o->device, &o->precision, &o->mode);
        if (dev_opt < 0) {
            fprintf(stderr, "%s: bad value for '%s'\n", argv[0], a);
            return 0;
        } else if (dev_opt > 0) {
            continue;
        } else if (dst && v) {
            *dst = atoi(v);
            i++;
        } else if (strcmp(a, "--backend") == 0 && v && parse_backend(v, &o->backend)) {
            i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], a);
            return 0;
        }
    }
    if (o->batch < 1 || o->threads < 0 || o->iters < 1 || o->warmup < 0 || o->width < 1) {
        fprintf(stderr, "%s: batch, iters and width must be >= 1; threads, warmup >= 0\n", argv[0]);
        return 0;
    }
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs the model warmup + iters times (compiled when f is set, else eagerly) and returns
 * the median seconds per call, or a negative number on error (already printed). */
static double time_calls(tgc_fn *f, tgc_module *net, tgc_tensor *x, int warmup, int iters)
{
    double *t = malloc((size_t)iters * sizeof(double));
    if (!t)
        return -1;
    for (int i = 0; i < warmup + iters; i++) {
        tgc_scope_push(); /* frees this call's output */
        tgc_tensor *y = NULL;
        double t0 = now();
        tgc_status st = f ? tgc_call(f, net, &x, 1, &y, 1) : resnet18_forward(net, &x, 1, &y, 1);
        if (st == TGC_OK)
            example_sync(y); /* a GPU call returns before its kernels finish */
        double dt = now() - t0;
        tgc_scope_pop();
        if (st != TGC_OK) {
            fprintf(stderr, "%s: %s (%s)\n", f ? "tgc_call" : "resnet18_forward", tgc_last_error(),
                    tgc_status_str(st));
            free(t);
            return -1;
        }
        if (i >= warmup)
            t[i - warmup] = dt;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    double median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    return median;
}

/* max |a - b| and max |b|, computed with tgc ops (eagerly, outside any compiled function). */
static int compare(tgc_tensor *a, tgc_tensor *b, double *max_diff, double *max_ref)
{
    tgc_scope_push();
    tgc_tensor *d = tgc_max(tgc_abs(tgc_sub(a, b)), NULL, 0, 0);
    tgc_tensor *r = tgc_max(tgc_abs(b), NULL, 0, 0);
    int ok = d && r;
    if (ok) {
        *max_diff = tgc_item_f64(d);
        *max_ref = tgc_item_f64(r);
    } else {
        fprintf(stderr, "compare: %s\n", tgc_last_error());
    }
    tgc_scope_pop();
    return ok;
}

/* Prints argmax over the classes of the first n rows of logits [N, classes]. */
static int print_top_classes(tgc_tensor *logits, int n)
{
    tgc_scope_push();
    tgc_tensor *top = tgc_argmax(logits, 1, 0); /* i64 [N] */
    int64_t batch = tgc_numel(top);
    int64_t *cls = malloc((size_t)batch * sizeof(int64_t));
    tgc_status st =
        top && cls ? tgc_copy_to_host(top, cls, (size_t)batch * sizeof(int64_t)) : TGC_ERR_OOM;
    if (st == TGC_OK) {
        printf("top class of the first %d images:", n);
        for (int i = 0; i < n && i < batch; i++)
            printf(" %lld", (long long)cls[i]);
        printf("\n");
    } else {
        fprintf(stderr, "argmax: %s\n", tgc_last_error());
    }
    free(cls);
    tgc_scope_pop();
    return st == TGC_OK;
}

/* The backend a compiled function runs on: that of its most recently used variant. */
static void backend_name(const tgc_fn *f, char *buf, size_t size)
{
    tgc_stats s;
    snprintf(buf, size, "%s", tgc_fn_stats(f, &s) == TGC_OK ? s.backend : "?");
}

int main(int argc, char **argv)
{
    options o = {
        64, 0, 3, 1, 64, TGC_BACKEND_AUTO, tgc_cpu(), TGC_PRECISION_HIGHEST, TGC_MODE_DEFAULT};
    int parsed = parse_args(argc, argv, &o);
    if (parsed <= 0) {
        print_usage(parsed < 0 ? stdout : stderr, argv[0]);
        return parsed < 0 ? 0 : 2;
    }

    resnet18_config rc = resnet18_default_config();
    rc.width = o.width;
    tgc_module *net = resnet18_create(&rc);
    if (!net) {
        fprintf(stderr, "resnet18_create: %s\n", tgc_last_error());
        return 1;
    }
    if (o.device.type != TGC_DEVICE_CPU && tgc_module_to(net, o.device) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        tgc_module_free(net);
        return 1;
    }

    tgc_config cfg = tgc_config_default(); /* defaults, then the TGC_* environment */
    cfg.backend = o.backend;
    cfg.num_threads = o.threads;
    cfg.matmul_precision = o.precision;
    cfg.mode = o.mode;
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet18_forward", &cfg);
    if (!f) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        tgc_module_free(net);
        return 1;
    }

    int rcode = 1;
    tgc_no_grad_push(); /* inference: like torch.no_grad(), compiled variants guard on it */
    tgc_scope_push();   /* everything below is freed by the matching pop */
    tgc_manual_seed(2024);
    int64_t xs[4] = {o.batch, rc.in_channels, 32, 32};
    tgc_tensor *x = example_to(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), o.device);
    if (!x) {
        fprintf(stderr, "input on the device: %s\n", tgc_last_error());
        goto done;
    }
    char dev[32];
    printf("ResNet18 (torchvision layout, width %d, %d parameter tensors and buffers), "
           "input %dx%dx32x32 on %s, num_threads %d%s\n",
           o.width, tgc_module_num_tensors(net), o.batch, rc.in_channels,
           example_device_name(o.device, dev, sizeof dev), o.threads,
           o.threads ? "" : " (all cores)");

    /* 1. The first call traces, compiles and runs. */
    tgc_tensor *y_compiled = NULL, *y_eager = NULL;
    double t0 = now();
    tgc_status st = tgc_call(f, net, &x, 1, &y_compiled, 1);
    if (st == TGC_OK)
        example_sync(y_compiled);
    double first_call = now() - t0;
    if (st != TGC_OK) {
        fprintf(stderr, "tgc_call: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
        goto done;
    }
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK)
        goto done;
    char backend[32];
    backend_name(f, backend, sizeof backend);
    printf("backend %s: compile %.1f ms (trace + compile); first call %.1f ms in all; "
           "%d kernels\n",
           backend, 1e3 * s.compile_seconds, 1e3 * first_call, s.kernels_last_variant);

    /* 2. The same batch eagerly: every op runs as it is called. */
    st = resnet18_forward(net, &x, 1, &y_eager, 1);
    if (st != TGC_OK) {
        fprintf(stderr, "resnet18_forward: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
        goto done;
    }
    double diff, ref;
    if (!compare(y_compiled, y_eager, &diff, &ref))
        goto done;
    printf("max |compiled - eager| = %.3g (max |eager| = %.3g, relative %.3g)\n", diff, ref,
           ref > 0 ? diff / ref : diff);

    /* 3. Time per call: median of --iters after --warmup. */
    double tc = time_calls(f, net, x, o.warmup, o.iters);
    double te = tc < 0 ? -1 : time_calls(NULL, net, x, o.warmup, o.iters);
    if (te < 0)
        goto done;
    printf("per call (median of %d): compiled %.1f ms, eager %.1f ms, eager/compiled %.2fx\n",
           o.iters, 1e3 * tc, 1e3 * te, te / tc);
    if (!print_top_classes(y_compiled, o.batch < 8 ? o.batch : 8))
        goto done;
    if (tgc_fn_stats(f, &s) != TGC_OK)
        goto done;
    printf("stats: %llu calls, %llu cache hits, %llu compiles, guard check %.0f ns per call\n",
           (unsigned long long)s.calls, (unsigned long long)s.cache_hits,
           (unsigned long long)s.compiles, s.guard_ns_per_call);
    rcode = 0;
done:
    tgc_scope_pop();
    tgc_no_grad_pop();
    tgc_fn_free(f);
    tgc_module_free(net);
    tgc_shutdown();
    return rcode;
}
