/* Whole models: compiled equals eager, to the bit, including random ops and batch-norm
 * running statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

static void add_param(tgc_module *m, const char *name, const int64_t *shape, int ndim)
{
    tgc_scope_push();
    tgc_module_param(m, name, tgc_mul_scalar(tgc_randn(shape, ndim, TGC_F32, tgc_cpu()), 0.1));
    tgc_scope_pop();
}

static tgc_module *conv_child(tgc_module *net, const char *name, int64_t cin, int64_t cout)
{
    tgc_module *c = tgc_module_create(name, NULL);
    int64_t w[4] = {cout, cin, 3, 3}, b[1] = {cout};
    add_param(c, "weight", w, 4);
    add_param(c, "bias", b, 1);
    tgc_module_child(net, name, c);
    return c;
}

/* The seed's NeuralNetwork. */
static tgc_module *seed_cnn(void)
{
    tgc_module *net = tgc_module_create("NeuralNetwork", NULL);
    conv_child(net, "conv1", 3, 32);
    conv_child(net, "conv2", 32, 64);
    conv_child(net, "conv3", 64, 128);
    tgc_module *fc = tgc_module_create("fc", NULL);
    int64_t w[2] = {10, 8192}, b[1] = {10};
    add_param(fc, "weight", w, 2);
    add_param(fc, "bias", b, 1);
    tgc_module_child(net, "fc", fc);
    return net;
}

static tgc_tensor *conv_relu(tgc_module *self, const char *name, tgc_tensor *x)
{
    tgc_module *c = tgc_module_get_child(self, name);
    return tgc_relu(tgc_conv2d(x, tgc_module_get(c, "weight"), tgc_module_get(c, "bias"),
                               &(tgc_conv2d_opts){.padding = {2, 2}}));
}

static tgc_status seed_forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)n_in, (void)n_out;
    tgc_tensor *x = tgc_max_pool2d(conv_relu(self, "conv1", in[0]),
                                   &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
    x = tgc_max_pool2d(conv_relu(self, "conv2", x),
                       &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
    x = tgc_flatten(tgc_adaptive_avg_pool2d(conv_relu(self, "conv3", x), 8, 8), 1, -1);
    tgc_module *fc = tgc_module_get_child(self, "fc");
    out[0] = tgc_linear(x, tgc_module_get(fc, "weight"), tgc_module_get(fc, "bias"));
    /* a second output: the loss against in[1], as a training step would compute it */
    out[1] = tgc_cross_entropy(out[0], in[1], TGC_REDUCE_MEAN, -100, 0.0);
    return out[1] ? TGC_OK : tgc_last_status();
}

/* Compiled equals eager: bit for bit on interp (the same kernels run), within f32 rounding
 * (atol 1e-5, rtol 1e-5) on a backend that fuses and vectorizes. */
static int same_bits(tgc_tensor *a, tgc_tensor *b)
{
    int64_t n = tgc_numel(a);
    if (n != tgc_numel(b) || tgc_dtype_of(a) != TGC_F32)
        return 0;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    tgc_copy_to_host(a, x, (size_t)n * 4);
    tgc_copy_to_host(b, y, (size_t)n * 4);
    const char *be = getenv("TGC_BACKEND");
    int exact = be && strcmp(be, "interp") == 0;
    int same = memcmp(x, y, (size_t)n * 4) == 0;
    for (int64_t i = 0; !exact && i < n; i++) {
        same = fabsf(x[i] - y[i]) <= 1e-5f + 1e-5f * fabsf(x[i]);
        if (!same) {
            print_message("element %lld: eager %.9g, compiled %.9g\n", (long long)i, x[i], y[i]);
            break;
        }
    }
    free(x);
    free(y);
    return same;
}

static void seed_cnn_compiled_equals_eager(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_manual_seed(7);
    tgc_module *net = seed_cnn();
    int64_t xs[4] = {4, 3, 32, 32};
    int64_t labels[4] = {3, 0, 9, 5}, ls[1] = {4};
    tgc_tensor *in[2] = {tgc_randn(xs, 4, TGC_F32, tgc_cpu()),
                         tgc_from_data(labels, sizeof labels, ls, 1, TGC_I64, tgc_cpu())};
    tgc_tensor *eager[2], *compiled[2];
    assert_int_equal(seed_forward(net, in, 2, eager, 2), TGC_OK);
    tgc_fn *f = tgc_compile(seed_forward, "seed", NULL);
    assert_int_equal(tgc_call(f, net, in, 2, compiled, 2), TGC_OK);
    assert_int_equal(tgc_size(compiled[0], 0), 4);
    assert_int_equal(tgc_size(compiled[0], 1), 10);
    assert_true(same_bits(eager[0], compiled[0]));
    assert_true(same_bits(eager[1], compiled[1]));
    assert_true(tgc_item_f64(compiled[1]) > 0);
    tgc_fn_free(f);
    tgc_module_free(net);
    tgc_scope_pop();
}

/* A block with batch norm (training) and dropout: the seed's complaint was "using triton
 * random, expect difference from eager". Here compiled code draws the same bits. */
static tgc_status bn_dropout_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)n_in, (void)n_out;
    int training = tgc_module_is_training(self);
    tgc_tensor *x = tgc_batch_norm(
        in[0], tgc_module_get(self, "running_mean"), tgc_module_get(self, "running_var"),
        tgc_module_get(self, "weight"), tgc_module_get(self, "bias"), training, 0.1, 1e-5);
    out[0] = tgc_dropout(tgc_gelu(x), 0.25, training);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_module *bn_block(void)
{
    tgc_module *m = tgc_module_create("block", NULL);
    int64_t c[1] = {6};
    tgc_scope_push();
    tgc_module_param(m, "weight", tgc_add_scalar(tgc_rand(c, 1, TGC_F32, tgc_cpu()), 0.5));
    tgc_module_param(m, "bias", tgc_randn(c, 1, TGC_F32, tgc_cpu()));
    tgc_module_buffer(m, "running_mean", tgc_zeros(c, 1, TGC_F32, tgc_cpu()));
    tgc_module_buffer(m, "running_var", tgc_ones(c, 1, TGC_F32, tgc_cpu()));
    tgc_scope_pop();
    return m;
}

static void dropout_and_batch_norm_match_eager_bit_for_bit(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_manual_seed(11);
    tgc_module *a = bn_block(), *b = bn_block();
    tgc_copy_(tgc_module_get(b, "weight"), tgc_module_get(a, "weight"));
    tgc_copy_(tgc_module_get(b, "bias"), tgc_module_get(a, "bias"));
    tgc_fn *f = tgc_compile(bn_dropout_forward, "block", NULL);
    int64_t xs[4] = {5, 6, 7, 3};
    for (int step = 0; step < 3; step++) {
        tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
        tgc_tensor *ye, *yc;
        tgc_manual_seed(100 + step);
        assert_int_equal(bn_dropout_forward(a, &x, 1, &ye, 1), TGC_OK);
        tgc_manual_seed(100 + step);
        assert_int_equal(tgc_call(f, b, &x, 1, &yc, 1), TGC_OK);
        assert_true(same_bits(ye, yc));
        assert_true(
            same_bits(tgc_module_get(a, "running_mean"), tgc_module_get(b, "running_mean")));
        assert_true(same_bits(tgc_module_get(a, "running_var"), tgc_module_get(b, "running_var")));
    }
    tgc_stats s;
    tgc_fn_stats(f, &s);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 2);
    tgc_fn_free(f);
    tgc_module_free(a);
    tgc_module_free(b);
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_cnn_compiled_equals_eager),
        cmocka_unit_test(dropout_and_batch_norm_match_eager_bit_for_bit),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
