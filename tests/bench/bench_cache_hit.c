/* The cost of a cache hit: guard check + dispatch, no kernels, for a module with
 * torchvision ResNet18's 62 parameters (and its 40 batch-norm buffers).
 *
 * Prints one line per measurement; ratios are taken within this run. Not a timed test. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tgc/tgc.h"

static void add(tgc_module *m, const char *name, const int64_t *shape, int ndim, int buffer)
{
    tgc_scope_push();
    tgc_tensor *t = tgc_zeros(shape, ndim, TGC_F32, tgc_cpu());
    if (buffer)
        tgc_module_buffer(m, name, t);
    else
        tgc_module_param(m, name, t);
    tgc_scope_pop();
}

static tgc_module *child(tgc_module *parent, const char *name)
{
    tgc_module *m = tgc_module_create(name, NULL);
    tgc_module_child(parent, name, m);
    return m;
}

static void conv(tgc_module *parent, const char *name, int64_t o, int64_t i, int64_t k)
{
    int64_t s[4] = {o, i, k, k};
    add(child(parent, name), "weight", s, 4, 0);
}

static void bn(tgc_module *parent, const char *name, int64_t c)
{
    tgc_module *m = child(parent, name);
    add(m, "weight", &c, 1, 0);
    add(m, "bias", &c, 1, 0);
    add(m, "running_mean", &c, 1, 1);
    add(m, "running_var", &c, 1, 1);
}

static void block(tgc_module *layer, const char *name, int64_t in, int64_t out, int down)
{
    tgc_module *b = child(layer, name);
    conv(b, "conv1", out, in, 3);
    bn(b, "bn1", out);
    conv(b, "conv2", out, out, 3);
    bn(b, "bn2", out);
    if (down) {
        tgc_module *d = child(b, "downsample");
        conv(d, "0", out, in, 1);
        bn(d, "1", out);
    }
}

static tgc_module *resnet18_shaped(void)
{
    tgc_module *r = tgc_module_create("resnet18", NULL);
    conv(r, "conv1", 64, 3, 7);
    bn(r, "bn1", 64);
    int64_t widths[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; l++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", l + 1);
        tgc_module *layer = child(r, name);
        int64_t in = l ? widths[l - 1] : 64;
        block(layer, "0", in, widths[l], l > 0);
        block(layer, "1", widths[l], widths[l], 0);
    }
    tgc_module *fc = child(r, "fc");
    int64_t w[2] = {1000, 512}, b[1] = {1000};
    add(fc, "weight", w, 2, 0);
    add(fc, "bias", b, 1, 0);
    return r;
}

/* No kernels: the graph returns its input, so a call costs guards + dispatch alone. */
static tgc_status passthrough(tgc_module *self, tgc_tensor *const *in, int n_in,
                              tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = in[0];
    return TGC_OK;
}

int main(void)
{
    tgc_module *m = resnet18_shaped();
    int n_params = 0;
    for (int i = 0, n = tgc_module_num_tensors(m); i < n; i++)
        n_params += 1;
    int64_t xs[4] = {64, 3, 32, 32};
    tgc_tensor *x = tgc_zeros(xs, 4, TGC_F32, tgc_cpu());
    tgc_config cfg = tgc_config_default();
    tgc_fn *f = tgc_compile(passthrough, "passthrough", &cfg);
    tgc_tensor *y;
    if (tgc_call(f, m, &x, 1, &y, 1) != TGC_OK) {
        fprintf(stderr, "tgc_call: %s\n", tgc_last_error());
        return 1;
    }
    const int iters = 200000;
    double best_call = 1e9, best_eager = 1e9, best_sig = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) {
            tgc_scope_push();
            tgc_call(f, m, &x, 1, &y, 1);
            tgc_scope_pop();
        }
        double t1 = now();
        for (int i = 0; i < iters; i++) {
            tgc_scope_push();
            passthrough(m, &x, 1, &y, 1);
            tgc_scope_pop();
        }
        double t2 = now();
        volatile uint64_t sink = 0;
        for (int i = 0; i < iters; i++)
            sink += tgc_module_signature(m);
        double t3 = now();
        (void)sink;
        if ((t1 - t0) / iters < best_call)
            best_call = (t1 - t0) / iters;
        if ((t2 - t1) / iters < best_eager)
            best_eager = (t2 - t1) / iters;
        if ((t3 - t2) / iters < best_sig)
            best_sig = (t3 - t2) / iters;
    }
    tgc_stats s;
    tgc_fn_stats(f, &s);
    printf("module: %d tensors (62 parameters + 40 batch-norm buffers, ResNet18's layout)\n",
           n_params);
    printf("cache hit, whole tgc_call (guards + dispatch + output handle): %.0f ns/call\n",
           1e9 * best_call);
    printf("guard check alone (sampled inside tgc_call): %.0f ns/call\n", s.guard_ns_per_call);
    printf("module structure signature (cached) read: %.1f ns\n", 1e9 * best_sig);
    printf("direct C call of the same function with a scope push/pop: %.0f ns/call\n",
           1e9 * best_eager);
    printf("ratio tgc_call / direct call: %.1fx; hits %llu, compiles %llu\n",
           best_call / best_eager, (unsigned long long)s.cache_hits,
           (unsigned long long)s.compiles);
    tgc_fn_free(f);
    tgc_module_free(m);
    tgc_shutdown();
    return 0;
}
