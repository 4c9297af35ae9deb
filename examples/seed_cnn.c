/* The seed's CNN, compiled with libtgc: watch the variant cache and the guards at work.
 *
 *   Conv(3->32, k3, p2) - ReLU - MaxPool(3, s2) - Conv(32->64, k3, p2) - ReLU - MaxPool(3, s2)
 *   - Conv(64->128, k3, p2) - ReLU - AdaptiveAvgPool(8) - Flatten - Linear(8192 -> 10)
 *
 * on batches of 64 x 3 x 32 x 32. Run it with `make demo`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <tgc/tgc.h>

#define CHECK(x)                                                                                \
    do {                                                                                        \
        tgc_status st_ = (x);                                                                   \
        if (st_ != TGC_OK) {                                                                    \
            fprintf(stderr, "%s failed: %s (%s)\n", #x, tgc_last_error(), tgc_status_str(st_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* PyTorch's default init: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
static void add_uniform(tgc_module *m, const char *name, const int64_t *shape, int ndim,
                        int64_t fan_in)
{
    tgc_scope_push();
    double bound = 1.0 / sqrt((double)fan_in);
    tgc_tensor *u = tgc_rand(shape, ndim, TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_sub_scalar(tgc_mul_scalar(u, 2 * bound), bound);
    if (!tgc_module_param(m, name, w)) {
        fprintf(stderr, "tgc_module_param: %s\n", tgc_last_error());
        exit(1);
    }
    tgc_scope_pop();
}

static tgc_module *conv_layer(tgc_module *parent, const char *name, int64_t cin, int64_t cout)
{
    tgc_module *m = tgc_module_create(name, NULL);
    int64_t w[4] = {cout, cin, 3, 3}, b[1] = {cout};
    add_uniform(m, "weight", w, 4, cin * 9);
    add_uniform(m, "bias", b, 1, cin * 9);
    CHECK(tgc_module_child(parent, name, m));
    return m;
}

static tgc_module *seed_cnn_create(void)
{
    tgc_module *net = tgc_module_create("NeuralNetwork", NULL);
    conv_layer(net, "conv1", 3, 32);
    conv_layer(net, "conv2", 32, 64);
    conv_layer(net, "conv3", 64, 128);
    tgc_module *fc = tgc_module_create("fc", NULL);
    int64_t w[2] = {10, 8192}, b[1] = {10};
    add_uniform(fc, "weight", w, 2, 8192);
    add_uniform(fc, "bias", b, 1, 8192);
    CHECK(tgc_module_child(net, "fc", fc));
    return net;
}

static tgc_tensor *conv_relu(tgc_module *self, const char *name, tgc_tensor *x)
{
    tgc_module *c = tgc_module_get_child(self, name);
    return tgc_relu(tgc_conv2d(x, tgc_module_get(c, "weight"), tgc_module_get(c, "bias"), 1, 1,
                               2, 2, 1, 1, 1));
}

/* The model: an ordinary C function of tgc ops. */
static tgc_status seed_cnn_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                   tgc_tensor **out, int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *x = conv_relu(self, "conv1", in[0]);
    x = tgc_max_pool2d(x, 3, 3, 2, 2, 0, 0);
    x = conv_relu(self, "conv2", x);
    x = tgc_max_pool2d(x, 3, 3, 2, 2, 0, 0);
    x = conv_relu(self, "conv3", x);
    x = tgc_adaptive_avg_pool2d(x, 8, 8);
    x = tgc_flatten(x, 1, -1);
    tgc_module *fc = tgc_module_get_child(self, "fc");
    out[0] = tgc_linear(x, tgc_module_get(fc, "weight"), tgc_module_get(fc, "bias"));
    return out[0] ? TGC_OK : tgc_last_status();
}

static void print_log(unsigned channel, const char *msg, void *user)
{
    (void)user;
    printf("    [%s] %s\n", channel == 0 ? "warning" : "log", msg);
}

static tgc_tensor *batch(int64_t n)
{
    int64_t shape[4] = {n, 3, 32, 32};
    return tgc_randn(shape, 4, TGC_F32, tgc_cpu());
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

int main(void)
{
    tgc_manual_seed(1234);
    tgc_module *model = seed_cnn_create();
    tgc_config cfg = tgc_config_default();
    cfg.log |= TGC_LOG_RECOMPILES | TGC_LOG_DYNAMIC;
    cfg.log_fn = print_log;
    tgc_fn *fwd = tgc_compile(seed_cnn_forward, "seed_cnn_forward", &cfg);
    if (!fwd) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        return 1;
    }
    printf("libtgc demo: the seed CNN (%d parameter tensors) on 64x3x32x32 batches\n\n",
           tgc_module_num_tensors(model));

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
    tgc_module *model2 = seed_cnn_create();
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
