/* Pools, batch_norm, layer_norm, dropout, cross_entropy, nll_loss and
 * scaled_dot_product_attention run eagerly through the public API: values against
 * hand-worked cases and numpy goldens (golden_nn.h, from gen_golden_nn.py, whose references
 * were checked against PyTorch 2.11 with its --check-torch mode); strided inputs; the Philox
 * stream contract of the random ops; and the errors a user sees. */
#include "tensor/tensor_impl.h"
#include "op_test_util.h"
#include "ops/golden_nn.h"
#include "runtime/philox.h"
#include "tgc/tgc.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* A copy of n elements of size es with the last two dims swapped; swapped gets its shape. */
static void *swap_last2(const void *src, size_t es, const int64_t *shape, int nd, int64_t *swapped)
{
    assert_true(nd >= 2);
    const int64_t H = shape[nd - 2], W = shape[nd - 1], n = numel_of(shape, nd);
    memcpy(swapped, shape, (size_t)nd * sizeof *shape);
    swapped[nd - 2] = W;
    swapped[nd - 1] = H;
    unsigned char *dst = malloc((size_t)n * es + 1);
    assert_non_null(dst);
    for (int64_t i = 0; i < n; i++) {
        int64_t b = i / (H * W), h = i / W % H, w = i % W;
        memcpy(dst + (size_t)(b * H * W + w * H + h) * es, (const unsigned char *)src + i * es, es);
    }
    return dst;
}

/* The transpose of the last two dims of base: a non-contiguous view. */
static tgc_tensor *transposed(tgc_tensor *base)
{
    int nd = tgc_ndim(base);
    tgc_tensor *t = tgc_transpose(base, nd - 2, nd - 1);
    assert_non_null(t);
    if (tgc_size(t, -1) > 1 && tgc_size(t, -2) > 1)
        assert_false(tgc_is_contiguous(t));
    return t;
}

/* The same values as from_floats(), as a strided view of storage laid out with the last two dims
 * swapped. */
static tgc_tensor *make_strided(const float *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t swapped[TGC_MAX_DIMS];
    float *buf = swap_last2(v, sizeof *v, shape, nd, swapped);
    tgc_tensor *base = from_floats(buf, swapped, nd, dt);
    free(buf);
    return transposed(base);
}

static tgc_tensor *make_i64_strided(const int64_t *v, const int64_t *shape, int nd)
{
    int64_t swapped[TGC_MAX_DIMS];
    int64_t *buf = swap_last2(v, sizeof *v, shape, nd, swapped);
    tgc_tensor *base = i64s(buf, swapped, nd);
    free(buf);
    return transposed(base);
}

static tgc_tensor *make_bool(const uint8_t *v, const int64_t *shape, int nd)
{
    tgc_tensor *t = tgc_from_data(v, (size_t)numel_of(shape, nd), shape, nd, TGC_BOOL, tgc_cpu());
    assert_non_null(t);
    return t;
}

#define GOLDEN(name)                                                                               \
    from_floats(golden_##name, golden_##name##_SHAPE, golden_##name##_NDIM, TGC_F32)
#define GOLDEN_AS(name, dt)                                                                        \
    from_floats(golden_##name, golden_##name##_SHAPE, golden_##name##_NDIM, dt)
#define GOLDEN_STRIDED(name)                                                                       \
    make_strided(golden_##name, golden_##name##_SHAPE, golden_##name##_NDIM, TGC_F32)
#define GOLDEN_I64(name) i64s(golden_##name, golden_##name##_SHAPE, golden_##name##_NDIM)

/* The values of an f32 tensor, row-major; caller frees. */
static float *values(const tgc_tensor *t)
{
    assert_non_null(t);
    assert_int_equal(tgc_dtype_of(t), TGC_F32);
    int64_t n = tgc_numel(t);
    float *buf = malloc((size_t)n * sizeof *buf + 1);
    assert_non_null(buf);
    assert_int_equal(tgc_copy_to_host(t, buf, (size_t)n * sizeof *buf), TGC_OK);
    return buf;
}

#define TOL 2e-6
#define EXPECT_GOLDEN(t, name, tol)                                                                \
    expect_allclose(t, TGC_F32, golden_##name##_SHAPE, golden_##name##_NDIM, golden_##name, tol)

static tgc_tensor *as_f32(tgc_tensor *t)
{
    tgc_tensor *r = tgc_cast(t, TGC_F32);
    assert_non_null(r);
    return r;
}

static uint64_t version_of(const tgc_tensor *t)
{
    return atomic_load(&t->storage->version);
}

/* ---- pools ---- */

static void test_max_pool2d_golden(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(pool_x) : GOLDEN(pool_x);
        EXPECT_GOLDEN(
            tgc_max_pool2d(
                x, &(tgc_pool2d_opts){.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}}),
            maxpool_k3x2_s2x1_p1x1, 0);
        EXPECT_GOLDEN(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}}),
                      maxpool_k3_s2_p0, 0);
    }
}

static void test_max_pool2d_hand_worked(void **state)
{
    (void)state;
    /* 3x3 neighbourhood maxima of 0..8, the border padded with -inf */
    const float x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    const int64_t xs[4] = {1, 1, 3, 3};
    const float want[9] = {4, 5, 5, 7, 8, 8, 7, 8, 8};
    expect_allclose(
        tgc_max_pool2d(from_floats(x, xs, 4, TGC_F32),
                       &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}),
        TGC_F32, xs, 4, want, 0);

    /* stride 0 means stride = kernel; a rank-3 [C, H, W] input */
    const float y[8] = {1, -2, 3, -4, -5, 6, -7, 8};
    const int64_t ys[3] = {2, 2, 2}, os[3] = {2, 1, 1};
    const float want2[2] = {3, 8};
    expect_allclose(
        tgc_max_pool2d(from_floats(y, ys, 3, TGC_F32), &(tgc_pool2d_opts){.kernel = {2, 2}}),
        TGC_F32, os, 3, want2, 0);
}

static void test_max_pool2d_propagates_nan(void **state)
{
    (void)state;
    const float x[8] = {1, NAN, 3, -2, 5, 6, 7, 8};
    const int64_t xs[4] = {1, 1, 2, 4}, os[4] = {1, 1, 1, 2};
    const float want[2] = {NAN, 8};
    expect_allclose(tgc_max_pool2d(from_floats(x, xs, 4, TGC_F32),
                                   &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}),
                    TGC_F32, os, 4, want, 0);
}

/* The seed CNN's pool: [64, 32, 34, 34], k 3, s 2, against a naive loop here. */
static void test_max_pool2d_seed_cnn_shape(void **state)
{
    (void)state;
    const int64_t xs[4] = {64, 32, 34, 34}, os[4] = {64, 32, 16, 16};
    tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
    tgc_tensor *y = tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
    expect_shape(y, os, 4);
    float *xv = values(x), *yv = values(y);
    for (int64_t p = 0; p < 64 * 32; p++)
        for (int oh = 0; oh < 16; oh++)
            for (int ow = 0; ow < 16; ow++) {
                float m = -INFINITY;
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 3; j++) {
                        float v = xv[(p * 34 + oh * 2 + i) * 34 + ow * 2 + j];
                        m = v > m ? v : m;
                    }
                if (yv[(p * 16 + oh) * 16 + ow] != m)
                    fail_msg("plane %lld (%d, %d)", (long long)p, oh, ow);
            }
    free(xv);
    free(yv);
}

static void test_max_pool2d_half_types(void **state)
{
    (void)state;
    const tgc_dtype dts[2] = {TGC_F16, TGC_BF16};
    for (int k = 0; k < 2; k++) {
        tgc_tensor *y = tgc_max_pool2d(GOLDEN_AS(pool_x, dts[k]),
                                       &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}});
        assert_non_null(y);
        assert_int_equal(tgc_dtype_of(y), dts[k]);
        EXPECT_GOLDEN(as_f32(y), maxpool_k3_s2_p0, 1e-2);
    }
}

static void test_avg_pool2d_golden(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(pool_x) : GOLDEN(pool_x);
        EXPECT_GOLDEN(
            tgc_avg_pool2d(
                x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}),
            avgpool_k3_s2_p1, TOL);
        EXPECT_GOLDEN(
            tgc_avg_pool2d(
                x, &(tgc_pool2d_opts){.kernel = {2, 3}, .stride = {1, 2}, .padding = {0, 1}}),
            avgpool_k2x3_s1x2_p0x1, TOL);
    }
}

/* count_include_pad: padded positions count in the divisor. */
static void test_avg_pool2d_counts_padding(void **state)
{
    (void)state;
    const float x[4] = {1, 1, 1, 1};
    const int64_t xs[4] = {1, 1, 2, 2}, os[4] = {1, 1, 3, 3};
    const float want[9] = {0.25f, 0.5f, 0.25f, 0.5f, 1, 0.5f, 0.25f, 0.5f, 0.25f};
    expect_allclose(
        tgc_avg_pool2d(from_floats(x, xs, 4, TGC_F32),
                       &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 1}}),
        TGC_F32, os, 4, want, 0);
}

static void test_adaptive_avg_pool2d(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(pool_x) : GOLDEN(pool_x);
        EXPECT_GOLDEN(tgc_adaptive_avg_pool2d(x, 3, 4), adaptive_3x4, TOL);
        EXPECT_GOLDEN(tgc_adaptive_avg_pool2d(x, 5, 5), adaptive_5x5, TOL);
    }
    /* overlapping windows: rows and cols [0, 2) and [1, 3) of 0..8 */
    const float x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    const int64_t xs[3] = {1, 3, 3}, os[3] = {1, 2, 2};
    const float want[4] = {2, 3, 5, 6};
    expect_allclose(tgc_adaptive_avg_pool2d(from_floats(x, xs, 3, TGC_F32), 2, 2), TGC_F32, os, 3,
                    want, 0);
    /* output larger than the input repeats elements */
    const int64_t os2[3] = {1, 4, 1};
    const float want2[4] = {1, 2.5f, 5.5f, 7};
    expect_allclose(tgc_adaptive_avg_pool2d(from_floats(x, xs, 3, TGC_F32), 4, 1), TGC_F32, os2, 3,
                    want2, 0);
}

static void test_pool_errors(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 4, 4};
    tgc_tensor *x = tgc_zeros(xs, 4, TGC_F32, tgc_cpu());
    expect_error(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {5, 5}, .stride = {1, 1}}),
                 TGC_ERR_SHAPE, "tgc_max_pool2d");
    expect_error(tgc_max_pool2d(
                     x, &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {1, 1}, .padding = {2, 2}}),
                 TGC_ERR_INVALID_ARG, "padding");
    expect_error(tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {0, 2}, .stride = {1, 1}}),
                 TGC_ERR_INVALID_ARG, "tgc_avg_pool2d");
    expect_error(tgc_adaptive_avg_pool2d(x, 0, 2), TGC_ERR_INVALID_ARG, "tgc_adaptive_avg_pool2d");
    const int64_t v2[2] = {4, 4};
    expect_error(tgc_max_pool2d(tgc_zeros(v2, 2, TGC_F32, tgc_cpu()),
                                &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}),
                 TGC_ERR_SHAPE, "tgc_max_pool2d");
    expect_error(tgc_max_pool2d(NULL, &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}),
                 TGC_ERR_INVALID_ARG, "NULL");
}

/* ---- batch_norm ---- */

static void test_batch_norm_training_updates_running_stats(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(bn_x) : GOLDEN(bn_x);
        tgc_tensor *rm = GOLDEN(bn_rm), *rv = GOLDEN(bn_rv);
        uint64_t vm = version_of(rm), vv = version_of(rv);
        tgc_tensor *y = tgc_batch_norm(x, rm, rv, GOLDEN(bn_w), GOLDEN(bn_b), 1, 0.1, 1e-5);
        EXPECT_GOLDEN(y, bn_train_y, TOL);
        /* momentum 0.1, unbiased variance, written in place and the versions bumped */
        EXPECT_GOLDEN(rm, bn_train_rm, TOL);
        EXPECT_GOLDEN(rv, bn_train_rv, TOL);
        assert_true(version_of(rm) > vm);
        assert_true(version_of(rv) > vv);
    }
}

static void test_batch_norm_training_rank4_without_affine(void **state)
{
    (void)state;
    const int64_t cs[1] = {2};
    tgc_tensor *rm = tgc_zeros(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *rv = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *y = tgc_batch_norm(GOLDEN(bn4_x), rm, rv, NULL, NULL, 1, 0.3, 1e-3);
    EXPECT_GOLDEN(y, bn4_train_y, TOL);
    EXPECT_GOLDEN(rm, bn4_train_rm, TOL);
    EXPECT_GOLDEN(rv, bn4_train_rv, TOL);
}

static void test_batch_norm_training_without_running_stats(void **state)
{
    (void)state;
    tgc_tensor *y =
        tgc_batch_norm(GOLDEN(bn_x), NULL, NULL, GOLDEN(bn_w), GOLDEN(bn_b), 1, 0.1, 1e-5);
    EXPECT_GOLDEN(y, bn_train_y, TOL);
}

static void test_batch_norm_eval_uses_running_stats(void **state)
{
    (void)state;
    tgc_tensor *rm = GOLDEN(bn_rm), *rv = GOLDEN(bn_rv);
    uint64_t vm = version_of(rm);
    tgc_tensor *y =
        tgc_batch_norm(GOLDEN_STRIDED(bn_x), rm, rv, GOLDEN(bn_w), GOLDEN(bn_b), 0, 0.1, 1e-5);
    EXPECT_GOLDEN(y, bn_eval_y, TOL);
    /* untouched */
    EXPECT_GOLDEN(rm, bn_rm, 0);
    EXPECT_GOLDEN(rv, bn_rv, 0);
    assert_true(version_of(rm) == vm);
}

/* Hand-worked: channel 0 holds {1, 3}: mean 2, biased var 1, unbiased var 2. */
static void test_batch_norm_hand_worked(void **state)
{
    (void)state;
    const float x[4] = {1, 10, 3, 30};
    const int64_t xs[2] = {2, 2}, cs[1] = {2};
    tgc_tensor *rm = tgc_zeros(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *rv = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *y = tgc_batch_norm(from_floats(x, xs, 2, TGC_F32), rm, rv, NULL, NULL, 1, 0.5, 0.0);
    const float want[4] = {-1, -1, 1, 1};
    expect_allclose(y, TGC_F32, xs, 2, want, 1e-6);
    const float want_rm[2] = {1, 10}, want_rv[2] = {1.5f, 100.5f};
    expect_allclose(rm, TGC_F32, cs, 1, want_rm, 1e-6);
    expect_allclose(rv, TGC_F32, cs, 1, want_rv, 1e-6);
}

/* Running stats that are strided views are updated in place through the view. */
static void test_batch_norm_updates_strided_running_stats(void **state)
{
    (void)state;
    const float x[4] = {1, 10, 3, 30}, init[4] = {0, -7, 0, -7};
    const int64_t xs[2] = {2, 2}, bs[1] = {4}, cs[1] = {2};
    tgc_tensor *base = from_floats(init, bs, 1, TGC_F32);
    tgc_tensor *rm = tgc_slice(base, 0, 0, 4, 2);
    tgc_tensor *rv = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    assert_non_null(
        tgc_batch_norm(from_floats(x, xs, 2, TGC_F32), rm, rv, NULL, NULL, 1, 0.5, 0.0));
    const float want[4] = {1, -7, 10, -7};
    expect_allclose(base, TGC_F32, bs, 1, want, 1e-6);
}

static void test_batch_norm_errors(void **state)
{
    (void)state;
    const int64_t xs[3] = {4, 3, 5}, cs[1] = {3}, c2[1] = {2}, one[2] = {1, 3};
    tgc_tensor *x = tgc_zeros(xs, 3, TGC_F32, tgc_cpu());
    tgc_tensor *rm = tgc_zeros(cs, 1, TGC_F32, tgc_cpu()),
               *rv = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    expect_error(tgc_batch_norm(x, NULL, NULL, NULL, NULL, 0, 0.1, 1e-5), TGC_ERR_INVALID_ARG,
                 "running_mean");
    expect_error(tgc_batch_norm(x, rm, NULL, NULL, NULL, 1, 0.1, 1e-5), TGC_ERR_INVALID_ARG,
                 "tgc_batch_norm");
    expect_error(tgc_batch_norm(x, rm, rv, tgc_ones(c2, 1, TGC_F32, tgc_cpu()), NULL, 1, 0.1, 1e-5),
                 TGC_ERR_SHAPE, "weight");
    expect_error(
        tgc_batch_norm(tgc_zeros(one, 2, TGC_F32, tgc_cpu()), NULL, NULL, NULL, NULL, 1, 0.1, 1e-5),
        TGC_ERR_SHAPE, "more than 1 value per channel");
    /* a failed call leaves the running stats alone */
    const float z[3] = {0, 0, 0};
    expect_allclose(rm, TGC_F32, cs, 1, z, 0);
}

/* ---- layer_norm ---- */

static void test_layer_norm_golden(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(ln_x) : GOLDEN(ln_x);
        EXPECT_GOLDEN(tgc_layer_norm(x, 1, GOLDEN(ln_w), GOLDEN(ln_b), 1e-5), ln_last_wb, TOL);
        EXPECT_GOLDEN(tgc_layer_norm(x, 2, NULL, NULL, 1e-3), ln_last2_plain, TOL);
    }
}

static void test_layer_norm_hand_worked(void **state)
{
    (void)state;
    /* mean 2.5, biased variance 1.25 */
    const float x[4] = {1, 2, 3, 4};
    const int64_t xs[2] = {1, 4};
    const double r = 1.0 / sqrt(1.25);
    const float want[4] = {(float)(-1.5 * r), (float)(-0.5 * r), (float)(0.5 * r),
                           (float)(1.5 * r)};
    expect_allclose(tgc_layer_norm(from_floats(x, xs, 2, TGC_F32), 1, NULL, NULL, 0.0), TGC_F32, xs,
                    2, want, 1e-6);
}

static void test_layer_norm_f16(void **state)
{
    (void)state;
    tgc_tensor *y = tgc_layer_norm(GOLDEN_AS(ln_x, TGC_F16), 1, GOLDEN_AS(ln_w, TGC_F16),
                                   GOLDEN_AS(ln_b, TGC_F16), 1e-5);
    assert_non_null(y);
    assert_int_equal(tgc_dtype_of(y), TGC_F16);
    EXPECT_GOLDEN(as_f32(y), ln_last_wb, 1e-2);
}

static void test_layer_norm_errors(void **state)
{
    (void)state;
    const int64_t xs[2] = {2, 4}, ws[1] = {3};
    tgc_tensor *x = tgc_zeros(xs, 2, TGC_F32, tgc_cpu());
    expect_error(tgc_layer_norm(x, 0, NULL, NULL, 1e-5), TGC_ERR_INVALID_ARG, "n_norm");
    expect_error(tgc_layer_norm(x, 3, NULL, NULL, 1e-5), TGC_ERR_INVALID_ARG, "n_norm");
    expect_error(tgc_layer_norm(x, 1, tgc_ones(ws, 1, TGC_F32, tgc_cpu()), NULL, 1e-5),
                 TGC_ERR_SHAPE, "weight");
    expect_error(tgc_layer_norm(x, 1, NULL, NULL, -1.0), TGC_ERR_INVALID_ARG, "eps");
}

/* ---- dropout ---- */

/* Element i of a call keeps iff uniform(seed, base + i) >= p, base = the stream offset at the
 * call: the golden values come from an independent Python Philox. */
static void test_dropout_golden_bits(void **state)
{
    (void)state;
    tgc_tensor *x = GOLDEN(do_x);
    tgc_manual_seed(1234);
    EXPECT_GOLDEN(tgc_dropout(x, 0.25, 1), do_first, 1e-6);
    EXPECT_GOLDEN(tgc_dropout(x, 0.25, 1), do_second, 1e-6);
    /* each call reserved exactly numel counters */
    assert_true(tgc_rng_reserve(0) == 2 * 64);

    /* a strided input draws for its logical row-major order */
    tgc_manual_seed(1234);
    EXPECT_GOLDEN(tgc_dropout(GOLDEN_STRIDED(do_x), 0.25, 1), do_first, 1e-6);
}

static void test_dropout_reseed_replays(void **state)
{
    (void)state;
    const int64_t s[2] = {32, 33};
    tgc_tensor *x = tgc_ones(s, 2, TGC_F32, tgc_cpu());
    tgc_manual_seed(7);
    float *a = values(tgc_dropout(x, 0.5, 1));
    float *b = values(tgc_dropout(x, 0.5, 1));
    tgc_manual_seed(7);
    float *c = values(tgc_dropout(x, 0.5, 1));
    assert_memory_equal(a, c, 32 * 33 * sizeof(float));
    assert_memory_not_equal(a, b, 32 * 33 * sizeof(float));
    free(a);
    free(b);
    free(c);
}

static void test_dropout_keep_rate_and_scale(void **state)
{
    (void)state;
    const int64_t s[1] = {200000};
    const double p = 0.3;
    tgc_tensor *x = tgc_ones(s, 1, TGC_F32, tgc_cpu());
    tgc_manual_seed(42);
    float *y = values(tgc_dropout(x, p, 1));
    const float kept = (float)(1.0 / (1.0 - p));
    int64_t n_kept = 0;
    for (int64_t i = 0; i < s[0]; i++) {
        if (y[i] != 0.0f) {
            assert_true(y[i] == kept);
            n_kept++;
        }
    }
    /* 0.7 +- 5 standard deviations (0.001) */
    assert_true(fabs((double)n_kept / (double)s[0] - 0.7) < 0.005);
    free(y);
}

static void test_dropout_edge_probabilities(void **state)
{
    (void)state;
    tgc_tensor *x = GOLDEN(do_x);
    const int64_t *s = golden_do_x_SHAPE;
    float zeros[64] = {0};
    expect_allclose(tgc_dropout(x, 1.0, 1), TGC_F32, s, 2, zeros, 0);
    /* p == 0 and eval mode are the identity and draw nothing */
    tgc_manual_seed(3);
    EXPECT_GOLDEN(tgc_dropout(x, 0.0, 1), do_x, 0);
    EXPECT_GOLDEN(tgc_dropout(x, 0.5, 0), do_x, 0);
    assert_true(tgc_rng_reserve(0) == 0);
    expect_error(tgc_dropout(x, 1.5, 1), TGC_ERR_INVALID_ARG, "tgc_dropout");
    expect_error(tgc_dropout(x, -0.1, 1), TGC_ERR_INVALID_ARG, "tgc_dropout");
}

/* ---- cross_entropy and nll_loss ---- */

static void test_cross_entropy_reductions_and_smoothing(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(ce_logits) : GOLDEN(ce_logits);
        tgc_tensor *t = GOLDEN_I64(ce_target); /* position 2 is ignore_index -100 */
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_NONE, -100, 0.0), ce_none, TOL);
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_MEAN, -100, 0.0), ce_mean, TOL);
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_SUM, -100, 0.0), ce_sum, TOL);
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_NONE, -100, 0.2), ce_none_ls, TOL);
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_MEAN, -100, 0.2), ce_mean_ls, TOL);
        EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_SUM, -100, 0.2), ce_sum_ls, TOL);
        /* an ignore_index inside [0, C) */
        EXPECT_GOLDEN(tgc_cross_entropy(x, GOLDEN_I64(ce_target3), TGC_REDUCE_MEAN, 3, 0.0),
                      ce_mean_ignore3, TOL);
    }
}

static void test_cross_entropy_spatial(void **state)
{
    (void)state;
    tgc_tensor *x = GOLDEN(ce_sp_logits), *t = GOLDEN_I64(ce_sp_target);
    EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_NONE, -1, 0.0), ce_sp_none, TOL);
    EXPECT_GOLDEN(tgc_cross_entropy(x, t, TGC_REDUCE_MEAN, -1, 0.1), ce_sp_mean_ls, TOL);
    /* a strided target gives the same */
    tgc_tensor *ts =
        make_i64_strided(golden_ce_sp_target, golden_ce_sp_target_SHAPE, golden_ce_sp_target_NDIM);
    EXPECT_GOLDEN(tgc_cross_entropy(GOLDEN_STRIDED(ce_sp_logits), ts, TGC_REDUCE_NONE, -1, 0.0),
                  ce_sp_none, TOL);
}

static void test_cross_entropy_hand_worked(void **state)
{
    (void)state;
    /* two equal logits: -log(1/2) */
    const float x[2] = {0, 0};
    const int64_t xs[2] = {1, 2}, ts[1] = {1}, t[1] = {1};
    const float want[1] = {(float)log(2.0)};
    expect_allclose(tgc_cross_entropy(from_floats(x, xs, 2, TGC_F32), i64s(t, ts, 1),
                                      TGC_REDUCE_MEAN, -100, 0.0),
                    TGC_F32, NULL, 0, want, 1e-6);
    /* unbatched logits [C] with a 0-d target; an i32 target */
    const float u[3] = {1, 2, 3};
    const int64_t us[1] = {3};
    const int32_t t32 = 2;
    tgc_tensor *tt = tgc_from_data(&t32, sizeof t32, NULL, 0, TGC_I32, tgc_cpu());
    const double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
    const float want2[1] = {(float)(lse - 3.0)};
    expect_allclose(
        tgc_cross_entropy(from_floats(u, us, 1, TGC_F32), tt, TGC_REDUCE_NONE, -100, 0.0), TGC_F32,
        NULL, 0, want2, 1e-6);
    /* full smoothing: the mean of -log_softmax over the classes */
    const float want3[1] = {(float)(lse - 2.0)};
    expect_allclose(
        tgc_cross_entropy(from_floats(u, us, 1, TGC_F32), tt, TGC_REDUCE_SUM, -100, 1.0), TGC_F32,
        NULL, 0, want3, 1e-6);
}

/* mean over no targets is 0/0 = NaN, as in PyTorch; sum is 0 */
static void test_loss_all_ignored(void **state)
{
    (void)state;
    const int64_t xs[2] = {2, 3}, ts[1] = {2}, t[2] = {-100, -100};
    tgc_tensor *x = tgc_ones(xs, 2, TGC_F32, tgc_cpu()), *tg = i64s(t, ts, 1);
    const float nan[1] = {NAN}, zero[2] = {0, 0};
    expect_allclose(tgc_cross_entropy(x, tg, TGC_REDUCE_MEAN, -100, 0.1), TGC_F32, NULL, 0, nan, 0);
    expect_allclose(tgc_cross_entropy(x, tg, TGC_REDUCE_SUM, -100, 0.1), TGC_F32, NULL, 0, zero, 0);
    expect_allclose(tgc_nll_loss(x, tg, TGC_REDUCE_NONE, -100), TGC_F32, ts, 1, zero, 0);
    expect_allclose(tgc_nll_loss(x, tg, TGC_REDUCE_MEAN, -100), TGC_F32, NULL, 0, nan, 0);
}

static void test_nll_loss_golden(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *x = strided ? GOLDEN_STRIDED(nll_logp) : GOLDEN(nll_logp);
        tgc_tensor *t = GOLDEN_I64(ce_target);
        EXPECT_GOLDEN(tgc_nll_loss(x, t, TGC_REDUCE_NONE, -100), nll_none, TOL);
        EXPECT_GOLDEN(tgc_nll_loss(x, t, TGC_REDUCE_MEAN, -100), nll_mean, TOL);
        EXPECT_GOLDEN(tgc_nll_loss(x, t, TGC_REDUCE_SUM, -100), nll_sum, TOL);
    }
}

static void test_loss_target_out_of_range(void **state)
{
    (void)state;
    const int64_t xs[2] = {5, 10}, ts[1] = {5};
    const int64_t t[5] = {0, 1, 2, 12, 4}, neg[5] = {0, -5, 2, 3, 4};
    tgc_tensor *x = tgc_zeros(xs, 2, TGC_F32, tgc_cpu());
    tgc_tensor *r = tgc_cross_entropy(x, i64s(t, ts, 1), TGC_REDUCE_MEAN, -100, 0.0);
    assert_null(r);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_cross_entropy: target 12 out of range [0, 10) at position 3");
    tgc_clear_error();
    r = tgc_nll_loss(x, i64s(neg, ts, 1), TGC_REDUCE_NONE, -100);
    assert_null(r);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_nll_loss: target -5 out of range [0, 10) at position 1");
    tgc_clear_error();
    /* the same value is fine as the ignore_index */
    assert_non_null(tgc_nll_loss(x, i64s(neg, ts, 1), TGC_REDUCE_NONE, -5));
}

static void test_loss_shape_and_dtype_errors(void **state)
{
    (void)state;
    const int64_t xs[2] = {5, 10}, ts[1] = {5}, bad[1] = {4};
    tgc_tensor *x = tgc_zeros(xs, 2, TGC_F32, tgc_cpu());
    expect_error(
        tgc_cross_entropy(x, tgc_zeros(bad, 1, TGC_I64, tgc_cpu()), TGC_REDUCE_MEAN, -100, 0.0),
        TGC_ERR_SHAPE, "tgc_cross_entropy");
    expect_error(
        tgc_cross_entropy(x, tgc_zeros(ts, 1, TGC_F32, tgc_cpu()), TGC_REDUCE_MEAN, -100, 0.0),
        TGC_ERR_DTYPE, "target");
    expect_error(tgc_cross_entropy(x, tgc_zeros(ts, 1, TGC_I64, tgc_cpu()), 3, -100, 0.0),
                 TGC_ERR_INVALID_ARG, "reduction");
    expect_error(
        tgc_cross_entropy(x, tgc_zeros(ts, 1, TGC_I64, tgc_cpu()), TGC_REDUCE_MEAN, -100, 1.5),
        TGC_ERR_INVALID_ARG, "label_smoothing");
    expect_error(tgc_nll_loss(x, NULL, TGC_REDUCE_MEAN, -100), TGC_ERR_INVALID_ARG, "NULL");
}

/* ---- scaled_dot_product_attention ---- */

static void test_sdpa_golden(void **state)
{
    (void)state;
    for (int strided = 0; strided < 2; strided++) {
        tgc_tensor *q = strided ? GOLDEN_STRIDED(at_q) : GOLDEN(at_q);
        tgc_tensor *k = strided ? GOLDEN_STRIDED(at_k) : GOLDEN(at_k);
        tgc_tensor *v = strided ? GOLDEN_STRIDED(at_v) : GOLDEN(at_v);
        tgc_tensor *fm = strided ? GOLDEN_STRIDED(at_fmask) : GOLDEN(at_fmask);
        tgc_tensor *bm = make_bool(golden_at_bmask, golden_at_bmask_SHAPE, golden_at_bmask_NDIM);
        EXPECT_GOLDEN(tgc_scaled_dot_product_attention(q, k, v, NULL, 0.0, 0, 0.0), at_plain, TOL);
        EXPECT_GOLDEN(tgc_scaled_dot_product_attention(q, k, v, NULL, 0.0, 1, 0.0), at_causal, TOL);
        /* bool mask [L, S] broadcast over the batch; its row 2 masks everything */
        EXPECT_GOLDEN(tgc_scaled_dot_product_attention(q, k, v, bm, 0.0, 0, 0.0), at_bool, TOL);
        /* float mask [2, 1, L, S] added to the scores, explicit scale */
        EXPECT_GOLDEN(tgc_scaled_dot_product_attention(q, k, v, fm, 0.0, 0, 0.5), at_float_scale,
                      TOL);
    }
}

/* k and v with batch 1 broadcast against q's batch 2, read through stride-0 dims: the same
 * as materialized copies. */
static void test_sdpa_broadcasts_batch_dims(void **state)
{
    (void)state;
    tgc_tensor *q = GOLDEN(at_q);
    tgc_tensor *k = tgc_slice(GOLDEN(at_k), 0, 0, 1, 1), *v = tgc_slice(GOLDEN(at_v), 0, 0, 1, 1);
    const int64_t full_k[4] = {2, 3, 6, 8}, full_v[4] = {2, 3, 6, 5}, os[4] = {2, 3, 4, 5};
    tgc_tensor *ke = tgc_contiguous(tgc_expand(k, full_k, 4));
    tgc_tensor *ve = tgc_contiguous(tgc_expand(v, full_v, 4));
    tgc_tensor *want = tgc_scaled_dot_product_attention(q, ke, ve, NULL, 0.0, 1, 0.0);
    float *w = values(want);
    expect_allclose(tgc_scaled_dot_product_attention(q, k, v, NULL, 0.0, 1, 0.0), TGC_F32, os, 4, w,
                    0);
    /* batch 0 of that equals the golden batch 0, whose k and v were the same */
    for (int64_t i = 0; i < 3 * 4 * 5; i++)
        assert_true(fabs(w[i] - golden_at_causal[i]) <= TOL * (1 + fabs(golden_at_causal[i])));
    free(w);
}

static void test_sdpa_hand_worked(void **state)
{
    (void)state;
    /* equal scores average v */
    const float q[1] = {1}, k[2] = {1, 1}, v[2] = {2, 6};
    const int64_t qs[3] = {1, 1, 1}, ks[3] = {1, 2, 1}, os[3] = {1, 1, 1};
    const float want[1] = {4};
    expect_allclose(tgc_scaled_dot_product_attention(
                        from_floats(q, qs, 3, TGC_F32), from_floats(k, ks, 3, TGC_F32),
                        from_floats(v, ks, 3, TGC_F32), NULL, 0.0, 0, 0.0),
                    TGC_F32, os, 3, want, 1e-6);
    /* causal with L < S is aligned top-left: query i sees keys 0..i */
    const float ones[3] = {1, 1, 1}, v3[3] = {0, 1, 2};
    const int64_t q2[3] = {1, 2, 1}, k3[3] = {1, 3, 1}, o2[3] = {1, 2, 1};
    const float want2[2] = {0, 0.5f};
    expect_allclose(tgc_scaled_dot_product_attention(
                        from_floats(ones, q2, 3, TGC_F32), from_floats(ones, k3, 3, TGC_F32),
                        from_floats(v3, k3, 3, TGC_F32), NULL, 0.0, 1, 0.0),
                    TGC_F32, o2, 3, want2, 1e-6);
    /* an all -inf float mask row gives zeros, as PyTorch's math backend does */
    const float mask[3] = {-INFINITY, -INFINITY, -INFINITY};
    const int64_t ms[1] = {3}, o1[3] = {1, 2, 1};
    const float zero[2] = {0, 0};
    expect_allclose(tgc_scaled_dot_product_attention(
                        from_floats(ones, q2, 3, TGC_F32), from_floats(ones, k3, 3, TGC_F32),
                        from_floats(v3, k3, 3, TGC_F32), from_floats(mask, ms, 1, TGC_F32), 0.0, 0,
                        0.0),
                    TGC_F32, o1, 3, zero, 0);
}

/* Dropout on the attention weights [batch..., L, S]: weight e keeps iff
 * uniform(seed, base + e) >= p, scaled by 1 / (1 - p); one reservation of B * L * S. */
static void test_sdpa_dropout_follows_the_stream(void **state)
{
    (void)state;
    const float q[4] = {0.5f, -1, 2, 0.25f}, k[6] = {1, 0, -1, 2, 0.5f, 0.5f}, v[3] = {1, 10, 100};
    const int64_t qs[3] = {1, 2, 2}, ks[3] = {1, 3, 2}, vs[3] = {1, 3, 1}, os[3] = {1, 2, 1};
    const double p = 0.5, scale = 0.7;
    tgc_manual_seed(77);
    tgc_tensor *y = tgc_scaled_dot_product_attention(
        from_floats(q, qs, 3, TGC_F32), from_floats(k, ks, 3, TGC_F32),
        from_floats(v, vs, 3, TGC_F32), NULL, p, 0, scale);
    assert_true(tgc_rng_reserve(0) == 2 * 3);
    float want[2];
    for (int i = 0; i < 2; i++) {
        double s[3], m = -INFINITY, sum = 0, acc = 0;
        for (int j = 0; j < 3; j++) {
            s[j] = scale * ((double)q[2 * i] * k[2 * j] + (double)q[2 * i + 1] * k[2 * j + 1]);
            m = s[j] > m ? s[j] : m;
        }
        for (int j = 0; j < 3; j++)
            sum += exp(s[j] - m);
        for (int j = 0; j < 3; j++) {
            int keep = tgc_philox_uniform(77, (uint64_t)(i * 3 + j)) >= p;
            acc += exp(s[j] - m) / sum * (keep ? 1.0 / (1.0 - p) : 0.0) * v[j];
        }
        want[i] = (float)acc;
    }
    expect_allclose(y, TGC_F32, os, 3, want, 1e-6);

    /* p == 1 drops every weight */
    const float zero[2] = {0, 0};
    expect_allclose(tgc_scaled_dot_product_attention(
                        from_floats(q, qs, 3, TGC_F32), from_floats(k, ks, 3, TGC_F32),
                        from_floats(v, vs, 3, TGC_F32), NULL, 1.0, 0, scale),
                    TGC_F32, os, 3, zero, 0);
}

static void test_sdpa_errors(void **state)
{
    (void)state;
    const int64_t qs[3] = {2, 4, 8}, ks[3] = {2, 6, 8}, k7[3] = {2, 6, 7}, v5[3] = {2, 5, 3};
    const int64_t vs[3] = {2, 6, 3}, bad_mask[2] = {4, 5}, ok_mask[2] = {4, 6};
    tgc_tensor *q = tgc_zeros(qs, 3, TGC_F32, tgc_cpu()), *k = tgc_zeros(ks, 3, TGC_F32, tgc_cpu());
    tgc_tensor *v = tgc_zeros(vs, 3, TGC_F32, tgc_cpu());
    const char *fn = "tgc_scaled_dot_product_attention";
    expect_error(tgc_scaled_dot_product_attention(q, tgc_zeros(k7, 3, TGC_F32, tgc_cpu()), v, NULL,
                                                  0.0, 0, 0.0),
                 TGC_ERR_SHAPE, fn);
    expect_error(tgc_scaled_dot_product_attention(q, k, tgc_zeros(v5, 3, TGC_F32, tgc_cpu()), NULL,
                                                  0.0, 0, 0.0),
                 TGC_ERR_SHAPE, fn);
    expect_error(tgc_scaled_dot_product_attention(
                     q, k, v, tgc_zeros(bad_mask, 2, TGC_BOOL, tgc_cpu()), 0.0, 0, 0.0),
                 TGC_ERR_SHAPE, "mask");
    expect_error(tgc_scaled_dot_product_attention(
                     q, k, v, tgc_zeros(ok_mask, 2, TGC_I32, tgc_cpu()), 0.0, 0, 0.0),
                 TGC_ERR_DTYPE, "mask");
    expect_error(tgc_scaled_dot_product_attention(q, k, v, NULL, 1.5, 0, 0.0), TGC_ERR_INVALID_ARG,
                 "dropout_p");
}

#define T(f) cmocka_unit_test_setup_teardown(f, scope_setup, scope_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_max_pool2d_golden),
        T(test_max_pool2d_hand_worked),
        T(test_max_pool2d_propagates_nan),
        T(test_max_pool2d_seed_cnn_shape),
        T(test_max_pool2d_half_types),
        T(test_avg_pool2d_golden),
        T(test_avg_pool2d_counts_padding),
        T(test_adaptive_avg_pool2d),
        T(test_pool_errors),
        T(test_batch_norm_training_updates_running_stats),
        T(test_batch_norm_training_rank4_without_affine),
        T(test_batch_norm_training_without_running_stats),
        T(test_batch_norm_eval_uses_running_stats),
        T(test_batch_norm_hand_worked),
        T(test_batch_norm_updates_strided_running_stats),
        T(test_batch_norm_errors),
        T(test_layer_norm_golden),
        T(test_layer_norm_hand_worked),
        T(test_layer_norm_f16),
        T(test_layer_norm_errors),
        T(test_dropout_golden_bits),
        T(test_dropout_reseed_replays),
        T(test_dropout_keep_rate_and_scale),
        T(test_dropout_edge_probabilities),
        T(test_cross_entropy_reductions_and_smoothing),
        T(test_cross_entropy_spatial),
        T(test_cross_entropy_hand_worked),
        T(test_loss_all_ignored),
        T(test_nll_loss_golden),
        T(test_loss_target_out_of_range),
        T(test_loss_shape_and_dtype_errors),
        T(test_sdpa_golden),
        T(test_sdpa_broadcasts_batch_dims),
        T(test_sdpa_hand_worked),
        T(test_sdpa_dropout_follows_the_stream),
        T(test_sdpa_errors),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
