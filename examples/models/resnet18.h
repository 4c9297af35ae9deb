/* ResNet18 for libtgc, header-only: torchvision's resnet18 layout, for CIFAR-10 sized input.
 *
 *   conv1 7x7 s2 p3 - bn1 - relu - maxpool 3x3 s2 p1
 *   - layer1..layer4: two BasicBlocks each (64, 128, 256, 512 channels; the first block of
 *     layer2..4 has stride 2 and a downsample = 1x1 conv (stride 2) + batch norm)
 *   - adaptive avgpool 1x1 - flatten - fc (512 -> num_classes)
 *
 * Parameter and buffer names follow torchvision's state_dict ("layer2.0.downsample.0.weight",
 * "layer1.1.bn2.running_var", ...), without num_batches_tracked.
 *
 *   resnet18_config cfg = resnet18_default_config();  // CIFAR-10: 10 classes, width 64
 *   tgc_module *net = resnet18_create(&cfg);           // eval mode; NULL on error
 *   tgc_tensor *x = ...;                               // f32 [N, 3, 32, 32]
 *   tgc_tensor *logits;
 *   resnet18_forward(net, &x, 1, &logits, 1);          // eager, or through tgc_compile
 *   tgc_module_free(net);
 *
 * The weights come from a fixed-seed generator of this header (not the library's Philox
 * stream, which is left alone): convolutions use torchvision's Kaiming-normal init (fan_out,
 * relu); batch-norm affine parameters and running statistics are perturbed around (1, 0) so
 * that eval-mode batch norm is not an identity, as in a trained network; fc is PyTorch's
 * default uniform init. Every block reads its own module's training flag, so the model
 * follows tgc_module_train().
 *
 * Hyperparameters are module attributes, as in torchvision: every conv has "stride" and
 * "padding", every batch norm "eps" and "momentum" (tgc_module_set_i64/f64). Compiled
 * variants are guarded on them: changing one recompiles with a reason that names it
 * ("self.layer2.0.conv1.stride changed (2 -> 1)"). */
#ifndef TGC_EXAMPLES_MODELS_RESNET18_H
#define TGC_EXAMPLES_MODELS_RESNET18_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tgc/tgc.h>

typedef struct resnet18_config {
    int width;       /* channels of layer1 (64 in torchvision); layer k has width << (k-1) */
    int in_channels; /* 3 */
    int num_classes; /* 10 for CIFAR-10 */
    uint64_t seed;   /* weights are a pure function of the config, seed included */
} resnet18_config;

static inline resnet18_config resnet18_default_config(void)
{
    resnet18_config c = {64, 3, 10, 0x5eed18u};
    return c;
}

/* ---- a small deterministic generator (splitmix64 + Box-Muller) ---- */
typedef struct resnet18_rng {
    uint64_t state;
} resnet18_rng;

static inline double resnet18_rng_uniform(resnet18_rng *r) /* [0, 1) */
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static inline double resnet18_rng_normal(resnet18_rng *r)
{
    double u1 = 1.0 - resnet18_rng_uniform(r), u2 = resnet18_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* kind: 0 normal(mean, scale), 1 uniform(mean - scale, mean + scale). */
static inline tgc_tensor *resnet18_add(tgc_module *m, const char *name, const int64_t *shape,
                                       int ndim, int kind, double mean, double scale, int buffer,
                                       resnet18_rng *rng)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *data = malloc((size_t)n * sizeof(float));
    if (!data)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        double v = kind == 0 ? resnet18_rng_normal(rng) : 2.0 * resnet18_rng_uniform(rng) - 1.0;
        data[i] = (float)(mean + scale * v);
    }
    tgc_scope_push();
    tgc_tensor *init =
        tgc_from_data(data, (size_t)n * sizeof(float), shape, ndim, TGC_F32, tgc_cpu());
    tgc_tensor *t = NULL;
    if (init)
        t = buffer ? tgc_module_buffer(m, name, init) : tgc_module_param(m, name, init);
    tgc_scope_pop();
    free(data);
    return t;
}

/* Creates a child module and attaches it; NULL on error. */
static inline tgc_module *resnet18_child(tgc_module *parent, const char *name)
{
    tgc_module *c = tgc_module_create(name, NULL);
    if (c && tgc_module_child(parent, name, c) != TGC_OK) {
        tgc_module_free(c);
        return NULL;
    }
    return c;
}

static inline int resnet18_conv(tgc_module *parent, const char *name, int64_t cout, int64_t cin,
                                int64_t k, int64_t stride, int64_t padding, resnet18_rng *rng)
{
    tgc_module *c = resnet18_child(parent, name);
    int64_t shape[4] = {cout, cin, k, k};
    double std = sqrt(2.0 / (double)(cout * k * k)); /* kaiming_normal_, fan_out, relu */
    return c && tgc_module_set_i64(c, "stride", stride) == TGC_OK &&
           tgc_module_set_i64(c, "padding", padding) == TGC_OK &&
           resnet18_add(c, "weight", shape, 4, 0, 0.0, std, 0, rng);
}

static inline int resnet18_bn(tgc_module *parent, const char *name, int64_t ch, resnet18_rng *rng)
{
    tgc_module *b = resnet18_child(parent, name);
    return b && tgc_module_set_f64(b, "eps", 1e-5) == TGC_OK &&
           tgc_module_set_f64(b, "momentum", 0.1) == TGC_OK &&
           resnet18_add(b, "weight", &ch, 1, 1, 1.0, 0.2, 0, rng) &&
           resnet18_add(b, "bias", &ch, 1, 0, 0.0, 0.05, 0, rng) &&
           resnet18_add(b, "running_mean", &ch, 1, 0, 0.0, 0.05, 1, rng) &&
           resnet18_add(b, "running_var", &ch, 1, 1, 1.0, 0.25, 1, rng);
}

/* torchvision's BasicBlock; the blocks with a downsample are the strided ones. */
static inline int resnet18_block(tgc_module *layer, const char *name, int64_t in, int64_t out,
                                 int downsample, resnet18_rng *rng)
{
    tgc_module *b = resnet18_child(layer, name);
    int64_t stride = downsample ? 2 : 1;
    if (!b || !resnet18_conv(b, "conv1", out, in, 3, stride, 1, rng) ||
        !resnet18_bn(b, "bn1", out, rng) || !resnet18_conv(b, "conv2", out, out, 3, 1, 1, rng) ||
        !resnet18_bn(b, "bn2", out, rng))
        return 0;
    if (!downsample)
        return 1;
    tgc_module *d = resnet18_child(b, "downsample");
    return d && resnet18_conv(d, "0", out, in, 1, stride, 0, rng) && resnet18_bn(d, "1", out, rng);
}

/* A ResNet18 in eval mode, or NULL (tgc_last_error() says why). */
static inline tgc_module *resnet18_create(const resnet18_config *cfg)
{
    resnet18_config c = cfg ? *cfg : resnet18_default_config();
    if (c.width < 1 || c.in_channels < 1 || c.num_classes < 1) {
        fprintf(stderr, "resnet18_create: bad config\n");
        return NULL;
    }
    resnet18_rng rng = {c.seed};
    tgc_module *net = tgc_module_create("ResNet", NULL);
    if (!net)
        return NULL;
    int ok = resnet18_conv(net, "conv1", c.width, c.in_channels, 7, 2, 3, &rng) &&
             resnet18_bn(net, "bn1", c.width, &rng);
    for (int l = 0; ok && l < 4; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l + 1);
        tgc_module *layer = resnet18_child(net, name);
        int64_t out = (int64_t)c.width << l, in = l ? out / 2 : c.width;
        ok = layer && resnet18_block(layer, "0", in, out, l > 0, &rng) &&
             resnet18_block(layer, "1", out, out, 0, &rng);
    }
    tgc_module *fc = ok ? resnet18_child(net, "fc") : NULL;
    int64_t fan_in = (int64_t)c.width * 8;
    int64_t ws[2] = {c.num_classes, fan_in}, bs[1] = {c.num_classes};
    double bound = 1.0 / sqrt((double)fan_in);
    ok = fc && resnet18_add(fc, "weight", ws, 2, 1, 0.0, bound, 0, &rng) &&
         resnet18_add(fc, "bias", bs, 1, 1, 0.0, bound, 0, &rng);
    if (!ok) {
        tgc_module_free(net);
        return NULL;
    }
    tgc_module_train(net, 0);
    return net;
}

/* ---- forward ---- */

/* NULL (error set) when the conv lacks its attributes. */
static inline tgc_tensor *resnet18_conv_fwd(tgc_module *self, const char *name, tgc_tensor *x)
{
    tgc_module *c = tgc_module_get_child(self, name);
    int64_t s, p;
    if (tgc_module_attr_i64(c, "stride", &s) != TGC_OK ||
        tgc_module_attr_i64(c, "padding", &p) != TGC_OK)
        return NULL;
    int stride = (int)s, pad = (int)p;
    return tgc_conv2d(x, tgc_module_get(c, "weight"), NULL,
                      &(tgc_conv2d_opts){.stride = {stride, stride}, .padding = {pad, pad}});
}

static inline tgc_tensor *resnet18_bn_fwd(tgc_module *self, const char *name, tgc_tensor *x)
{
    tgc_module *b = tgc_module_get_child(self, name);
    double eps, momentum;
    if (tgc_module_attr_f64(b, "eps", &eps) != TGC_OK ||
        tgc_module_attr_f64(b, "momentum", &momentum) != TGC_OK)
        return NULL;
    return tgc_batch_norm(x, tgc_module_get(b, "running_mean"), tgc_module_get(b, "running_var"),
                          tgc_module_get(b, "weight"), tgc_module_get(b, "bias"),
                          tgc_module_is_training(b), momentum, eps);
}

static inline tgc_tensor *resnet18_block_fwd(tgc_module *b, tgc_tensor *x)
{
    tgc_module *down = tgc_module_get_child(b, "downsample");
    tgc_tensor *h = tgc_relu(resnet18_bn_fwd(b, "bn1", resnet18_conv_fwd(b, "conv1", x)));
    h = resnet18_bn_fwd(b, "bn2", resnet18_conv_fwd(b, "conv2", h));
    tgc_tensor *identity = x;
    if (down)
        identity = resnet18_bn_fwd(down, "1", resnet18_conv_fwd(down, "0", x));
    return tgc_relu(tgc_add(h, identity));
}

/* in[0]: f32 [N, C, H, W] images; out[0]: f32 [N, num_classes] logits. */
static inline tgc_status resnet18_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                          tgc_tensor **out, int n_out)
{
    if (n_in < 1 || n_out < 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *x = resnet18_conv_fwd(self, "conv1", in[0]);
    x = tgc_relu(resnet18_bn_fwd(self, "bn1", x));
    x = tgc_max_pool2d(x,
                       &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    for (int l = 1; l <= 4; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        tgc_module *layer = tgc_module_get_child(self, name);
        x = resnet18_block_fwd(tgc_module_get_child(layer, "0"), x);
        x = resnet18_block_fwd(tgc_module_get_child(layer, "1"), x);
    }
    x = tgc_flatten(tgc_adaptive_avg_pool2d(x, 1, 1), 1, -1);
    tgc_module *fc = tgc_module_get_child(self, "fc");
    out[0] = tgc_linear(x, tgc_module_get(fc, "weight"), tgc_module_get(fc, "bias"));
    return out[0] ? TGC_OK : tgc_last_status();
}

#endif
