/* The seed's CNN for libtgc, header-only (the users' PyTorch NeuralNetwork):
 *
 *   Conv(3->32, k3, p2) - ReLU - MaxPool(3, s2) - Conv(32->64, k3, p2) - ReLU - MaxPool(3, s2)
 *   - Conv(64->128, k3, p2) - ReLU - AdaptiveAvgPool(8) - Flatten - Linear(8192 -> 10)
 *
 * on batches of N x 3 x 32 x 32. Parameters use PyTorch's default init,
 * uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from the library's generator (seed it with
 * tgc_manual_seed first for reproducible weights). */
#ifndef TGC_EXAMPLES_MODELS_SEED_CNN_H
#define TGC_EXAMPLES_MODELS_SEED_CNN_H

#include <math.h>
#include <stdint.h>

#include <tgc/tgc.h>

/* PyTorch's default init: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)). Returns 0 on error. */
static inline int seed_cnn_add_uniform(tgc_module *m, const char *name, const int64_t *shape,
                                       int ndim, int64_t fan_in)
{
    tgc_scope_push();
    double bound = 1.0 / sqrt((double)fan_in);
    tgc_tensor *u = tgc_rand(shape, ndim, TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_sub_scalar(tgc_mul_scalar(u, 2 * bound), bound);
    tgc_tensor *p = tgc_module_param(m, name, w);
    tgc_scope_pop();
    return p != NULL;
}

static inline int seed_cnn_layer(tgc_module *parent, const char *name, int64_t cin, int64_t cout,
                                 int64_t fan_in, int conv)
{
    tgc_module *m = tgc_module_create(name, NULL);
    if (!m)
        return 0;
    if (tgc_module_child(parent, name, m) != TGC_OK) {
        tgc_module_free(m);
        return 0;
    }
    int64_t cw[4] = {cout, cin, 3, 3}, lw[2] = {cout, cin}, b[1] = {cout};
    return seed_cnn_add_uniform(m, "weight", conv ? cw : lw, conv ? 4 : 2, fan_in) &&
           seed_cnn_add_uniform(m, "bias", b, 1, fan_in);
}

/* The model in training mode (a new module's default), or NULL (tgc_last_error() says why). */
static inline tgc_module *seed_cnn_create(void)
{
    tgc_module *net = tgc_module_create("NeuralNetwork", NULL);
    if (net && seed_cnn_layer(net, "conv1", 3, 32, 3 * 9, 1) &&
        seed_cnn_layer(net, "conv2", 32, 64, 32 * 9, 1) &&
        seed_cnn_layer(net, "conv3", 64, 128, 64 * 9, 1) &&
        seed_cnn_layer(net, "fc", 8192, 10, 8192, 0))
        return net;
    tgc_module_free(net);
    return NULL;
}

static inline tgc_tensor *seed_cnn_conv_relu(tgc_module *self, const char *name, tgc_tensor *x)
{
    tgc_module *c = tgc_module_get_child(self, name);
    return tgc_relu(tgc_conv2d(x, tgc_module_get(c, "weight"), tgc_module_get(c, "bias"),
                               &(tgc_conv2d_opts){.padding = {2, 2}}));
}

/* The model: an ordinary C function of tgc ops. in[0]: f32 [N, 3, 32, 32]; out[0]: [N, 10]. */
static inline tgc_status seed_cnn_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                          tgc_tensor **out, int n_out)
{
    if (n_in < 1 || n_out < 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *x = seed_cnn_conv_relu(self, "conv1", in[0]);
    x = tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
    x = seed_cnn_conv_relu(self, "conv2", x);
    x = tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
    x = seed_cnn_conv_relu(self, "conv3", x);
    x = tgc_adaptive_avg_pool2d(x, 8, 8);
    x = tgc_flatten(x, 1, -1);
    tgc_module *fc = tgc_module_get_child(self, "fc");
    out[0] = tgc_linear(x, tgc_module_get(fc, "weight"), tgc_module_get(fc, "bias"));
    return out[0] ? TGC_OK : tgc_last_status();
}

#endif
