/* The seed's CNN, compiled with libtgc: watch the variant cache and the guards at work.
 *
 *   Conv(3->32, k3, p2) - ReLU - MaxPool(3, s2) - Conv(32->64, k3, p2) - ReLU - MaxPool(3, s2)
 *   - Conv(64->128, k3, p2) - ReLU - AdaptiveAvgPool(8) - Flatten - Linear(8192 -> 10)
 *
 * on batches of 64 x 3 x 32 x 32. The model is in models/seed_cnn.h. Run it with `make demo`.
 *
 *   ./build/examples/seed_cnn [--device cpu|cuda] [--precision highest|high|medium]
 *                             [--mode default|reduce-overhead]
 *
 * --device cuda moves the model to tgc_cuda(0) (tgc_module_to) and makes every batch there;
 * the compiled function (backend auto) then runs on the GPU. --precision sets
 * cfg.matmul_precision, --mode cfg.mode (reduce-overhead: CUDA graphs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgc/tgc.h>

#include "device_opts.h"
#include "models/seed_cnn.h" /* the model: seed_cnn_create, seed_cnn_forward */

#define CHECK(x)                                                                                \
    do {                                                                                        \
        tgc_status st_ = (x);                                                                   \
        if (st_ != TGC_OK) {                                                                    \
            fprintf(stderr, "%s failed: %s (%s)\n", #x, tgc_last_error(), tgc_status_str(st_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void print_log(unsigned channel, const char *msg, void *user)
{
    (void)user;
    printf("    [%s] %s\n", channel == 0 ? "warning" : "log", msg);
}

static tgc_device device; /* --device */

static tgc_tensor *batch(int64_t n)
{
    int64_t shape[4] = {n, 3, 32, 32};
    tgc_tensor *x = example_to(tgc_randn(shape, 4, TGC_F32, tgc_cpu()), device);
    if (!x) {
        fprintf(stderr, "batch on the device: %s\n", tgc_last_error());
        exit(1);
    }
    return x;
}

static void show_stats(const tgc_fn *f)
{
    tgc_stats s;
    CHECK(tgc_fn_stats(f, &s));
    printf("    stats: %llu calls, %llu cache hits, %llu compiles, %llu eager calls, %d variants\n",
           (unsigned long long)s.calls, (unsigned long long)s.cache_hits,
           (unsigned long long)s.compiles, (unsigned long long)s.eager_fallbacks, s.variants);
}

static double max_abs_diff(tgc_tensor *a, tgc_tensor *b)
{
    tgc_scope_push();
    double d = tgc_item_f64(tgc_max(tgc_abs(tgc_sub(a, b)), NULL, 0, 0));
    tgc_scope_pop();
    return d;
}

static tgc_tensor *call1(tgc_fn *f, tgc_module *m, tgc_tensor *x)
{
    tgc_tensor *y = NULL;
    CHECK(tgc_call(f, m, &x, 1, &y, 1));
    return y;
}

static void usage(FILE *fp, const char *prog)
{
    fprintf(fp,
            "usage: %s\n" EXAMPLE_DEVICE_USAGE
            "--device cuda: the model and its batches on tgc_cuda(0) (backend auto compiles for "
            "it);\n--precision: cfg.matmul_precision (GPU: highest = fp32, high = TF32, medium = "
            "bf16);\n--mode reduce-overhead: each compiled call replays one CUDA graph\n",
            prog);
}

/* Makes a model on the chosen device; exits on error. */
static tgc_module *make_model(void)
{
    tgc_module *m = seed_cnn_create();
    if (!m) {
        fprintf(stderr, "seed_cnn_create: %s\n", tgc_last_error());
        exit(1);
    }
    if (device.type != TGC_DEVICE_CPU && tgc_module_to(m, device) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        exit(1);
    }
    return m;
}

int main(int argc, char **argv)
{
    tgc_matmul_precision precision = TGC_PRECISION_HIGHEST;
    tgc_mode mode = TGC_MODE_DEFAULT;
    device = tgc_cpu();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout, argv[0]);
            return 0;
        }
        if (example_device_option(argc, argv, &i, &device, &precision, &mode) <= 0) {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], argv[i]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    tgc_manual_seed(1234);
    tgc_module *model = make_model();
    tgc_config cfg = tgc_config_default();
    cfg.matmul_precision = precision;
    cfg.mode = mode;
    cfg.log |= TGC_LOG_RECOMPILES | TGC_LOG_DYNAMIC;
    cfg.log_fn = print_log;
    tgc_fn *fwd = tgc_compile(seed_cnn_forward, "seed_cnn_forward", &cfg);
    if (!fwd) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        return 1;
    }
    char dev[32];
    printf("libtgc demo: the seed CNN (%d parameter tensors) on 64x3x32x32 batches on %s\n\n",
           tgc_module_num_tensors(model), example_device_name(device, dev, sizeof dev));

    printf("1. The first call traces the function and compiles variant 1:\n");
    tgc_scope_push();
    tgc_tensor *x = batch(64), *y = call1(fwd, model, x);
    tgc_stats s;
    CHECK(tgc_fn_stats(fwd, &s));
    printf("    traced, verified and planned in %.2f ms; output is [%lld, %lld]\n",
           1e3 * s.compile_seconds,
           (long long)tgc_size(y, 0), (long long)tgc_size(y, 1));

    printf("2. Later calls with the same shapes are cache hits (guards only, no tracing):\n");
    for (int i = 0; i < 3; i++)
        call1(fwd, model, batch(64));
    show_stats(fwd);

    printf("3. Compiled and eager runs agree:\n");
    tgc_tensor *eager[1];
    CHECK(seed_cnn_forward(model, &x, 1, eager, 1));
    printf("    max |compiled - eager| = %.3g\n", max_abs_diff(y, eager[0]));

    printf("4. A second model instance of the same structure reuses variant 1 "
           "(parameters are bound by position, not identity):\n");
    tgc_module *model2 = make_model();
    call1(fwd, model2, x);
    show_stats(fwd);

    printf("5. Switching to eval mode changes a guard, so tgc says why it recompiles:\n");
    tgc_module_train(model, 0);
    call1(fwd, model, x);
    show_stats(fwd);
    tgc_module_train(model, 1);

    printf("6. dynamic = AUTO: a new batch size recompiles once with the batch dim symbolic,\n"
           "   then every other batch size hits that variant:\n");
    int64_t sizes[] = {32, 16, 48, 8, 64};
    for (int i = 0; i < 5; i++) {
        tgc_tensor *yb = call1(fwd, model, batch(sizes[i]));
        printf("    batch %2lld -> output [%lld, %lld]\n", (long long)sizes[i],
               (long long)tgc_size(yb, 0), (long long)tgc_size(yb, 1));
    }
    show_stats(fwd);

    printf("7. With dynamic = NEVER and cache_size_limit = 2, new batch sizes exhaust the "
           "cache; tgc warns once and runs eagerly:\n");
    tgc_config small = cfg;
    small.dynamic = TGC_DYNAMIC_NEVER;
    small.cache_size_limit = 2;
    tgc_fn *limited = tgc_compile(seed_cnn_forward, "seed_cnn_static", &small);
    int64_t sweep[] = {8, 16, 24, 32};
    for (int i = 0; i < 4; i++)
        call1(limited, model, batch(sweep[i]));
    show_stats(limited);

    printf("8. tgc_fn_explain shows every variant, its guards and why it exists:\n");
    char *report = tgc_fn_explain(fwd);
    printf("%s", report);
    tgc_free(report);

    tgc_scope_pop();
    tgc_fn_free(limited);
    tgc_fn_free(fwd);
    tgc_module_free(model2);
    tgc_module_free(model);
    tgc_shutdown();
    return 0;
}
