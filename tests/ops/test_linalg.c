/* tgc_matmul, tgc_linear and tgc_conv2d run eagerly through the interp kernels: values
 * against hand-worked cases, numpy goldens (golden_linalg.h, from gen_golden_linalg.py) and
 * naive loops here; layouts (transposed, permuted, expanded inputs); every dtype; empty and
 * size-1 dims; and the errors a user sees for bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "tensor/tensor_impl.h"
#include "op_test_util.h"
#include "ops/golden_linalg.h"
#include "tgc/tgc.h"

/* ---- helpers ---- */

static tgc_tensor *zeros(const int64_t *shape, int nd)
{
    return tgc_zeros(shape, nd, TGC_F32, tgc_cpu());
}

static tgc_tensor *ones(const int64_t *shape, int nd)
{
    return tgc_ones(shape, nd, TGC_F32, tgc_cpu());
}

#define GOLDEN(name, dt)                from_floats(name, name##_SHAPE, name##_NDIM, dt)
#define EXPECT_GOLDEN(t, dt, name, tol) expect_allclose(t, dt, name##_SHAPE, name##_NDIM, name, tol)

/* Deterministic values in [-1, 1) on a 1/64 grid. */
static float *pattern(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(v);
    uint32_t x = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((int)(x >> 25) - 64) / 64.0f;
    }
    return v;
}

/* Row-major transpose of a [r, c] array into a fresh [c, r] array. */
static float *transposed(const float *v, int64_t r, int64_t c)
{
    float *t = malloc((size_t)(r * c) * sizeof(float));
    assert_non_null(t);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            t[j * r + i] = v[i * c + j];
    return t;
}

/* The same values with dims 0 and 1 stored swapped: a non-contiguous view of t. */
static tgc_tensor *transposed_view(tgc_tensor *t)
{
    tgc_tensor *v = tgc_transpose(tgc_contiguous(tgc_transpose(t, 0, 1)), 0, 1);
    assert_non_null(v);
    assert_false(tgc_is_contiguous(v));
    return v;
}

static tgc_tensor *conv(tgc_tensor *x, tgc_tensor *w, tgc_tensor *b, const int at[7])
{
    const tgc_conv2d_opts o = {.stride = {at[0], at[1]},
                               .padding = {at[2], at[3]},
                               .dilation = {at[4], at[5]},
                               .groups = at[6]};
    return tgc_conv2d(x, w, b, &o);
}

/* ---- matmul ---- */

static void test_matmul_2x2_by_hand(void **state)
{
    (void)state;
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8}, want[] = {19, 22, 43, 50};
    const int64_t s[] = {2, 2};
    expect_allclose(tgc_matmul(f32s(a, s, 2), f32s(b, s, 2)), TGC_F32, s, 2, want, 0);
}

static void test_matmul_odd_sizes_match_numpy(void **state)
{
    (void)state;
    tgc_tensor *c = tgc_matmul(GOLDEN(G_MM_ODD_A, TGC_F32), GOLDEN(G_MM_ODD_B, TGC_F32));
    EXPECT_GOLDEN(c, TGC_F32, G_MM_ODD_OUT, 1e-6);
}

static void test_matmul_broadcasts_batch_dims(void **state)
{
    (void)state;
    /* [2, 1, 3, 4] @ [3, 4, 5] -> [2, 3, 3, 5] */
    tgc_tensor *c = tgc_matmul(GOLDEN(G_MM_BCAST_A, TGC_F32), GOLDEN(G_MM_BCAST_B, TGC_F32));
    EXPECT_GOLDEN(c, TGC_F32, G_MM_BCAST_OUT, 1e-6);
}

static void test_matmul_expanded_operands_read_stride_zero(void **state)
{
    (void)state;
    const int64_t ea[] = {2, 3, 3, 4}, eb[] = {2, 3, 4, 5};
    tgc_tensor *a = tgc_expand(GOLDEN(G_MM_BCAST_A, TGC_F32), ea, 4);
    tgc_tensor *b = tgc_expand(GOLDEN(G_MM_BCAST_B, TGC_F32), eb, 4);
    assert_int_equal(tgc_stride(b, 0), 0);
    EXPECT_GOLDEN(tgc_matmul(a, b), TGC_F32, G_MM_BCAST_OUT, 1e-6);
}

static void test_matmul_vector_operands_drop_their_dim(void **state)
{
    (void)state;
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_VEC_MAT_A, TGC_F32), GOLDEN(G_MM_VEC_MAT_B, TGC_F32)),
                  TGC_F32, G_MM_VEC_MAT_OUT, 1e-6);
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_MAT_VEC_A, TGC_F32), GOLDEN(G_MM_MAT_VEC_B, TGC_F32)),
                  TGC_F32, G_MM_MAT_VEC_OUT, 1e-6);
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_VEC_BATCH_A, TGC_F32), GOLDEN(G_MM_VEC_BATCH_B, TGC_F32)),
                  TGC_F32, G_MM_VEC_BATCH_OUT, 1e-6);
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_BATCH_VEC_A, TGC_F32), GOLDEN(G_MM_BATCH_VEC_B, TGC_F32)),
                  TGC_F32, G_MM_BATCH_VEC_OUT, 1e-6);
    /* vector . vector is a 0-d tensor */
    tgc_tensor *dot = tgc_matmul(GOLDEN(G_MM_DOT_A, TGC_F32), GOLDEN(G_MM_DOT_B, TGC_F32));
    expect_allclose(dot, TGC_F32, NULL, 0, G_MM_DOT_OUT, 1e-6);
}

static void test_matmul_transposed_inputs(void **state)
{
    (void)state;
    /* a^T and b^T stored row-major, transposed back as views: strides (1, rows) */
    float *at = transposed(G_MM_ODD_A, 5, 7), *bt = transposed(G_MM_ODD_B, 7, 3);
    const int64_t sa[] = {7, 5}, sb[] = {3, 7};
    tgc_tensor *a = tgc_transpose(f32s(at, sa, 2), 0, 1);
    tgc_tensor *b = tgc_transpose(f32s(bt, sb, 2), 0, 1);
    free(at);
    free(bt);
    assert_false(tgc_is_contiguous(a));
    EXPECT_GOLDEN(tgc_matmul(a, b), TGC_F32, G_MM_ODD_OUT, 1e-6);
    /* the generic (f16) path reads the same kind of views */
    EXPECT_GOLDEN(tgc_matmul(transposed_view(GOLDEN(G_MM_ODD_A, TGC_F16)),
                             transposed_view(GOLDEN(G_MM_ODD_B, TGC_F16))),
                  TGC_F16, G_MM_ODD_OUT, 1e-3);
}

/* [m, k] @ [k, n] of pattern data against a naive double loop. */
static void check_matmul_naive(int64_t m, int64_t k, int64_t n)
{
    const int64_t sa[] = {m, k}, sb[] = {k, n}, sc[] = {m, n};
    float *a = pattern(m * k, 1), *b = pattern(k * n, 2), *want = malloc(sizeof(float) * m * n);
    assert_non_null(want);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)a[i * k + p] * b[p * n + j];
            want[i * n + j] = (float)acc;
        }
    tgc_tensor *c = tgc_matmul(f32s(a, sa, 2), f32s(b, sb, 2));
    expect_allclose(c, TGC_F32, sc, 2, want, 1e-5);
    free(a);
    free(b);
    free(want);
}

/* Sizes past every blocking boundary of the f32 GEMM (K over 2 x 256, N over 1024, M over
 * 128) and ragged edges (M not a multiple of 4 rows, N not of 16 columns). */
static void test_matmul_crosses_gemm_blocks(void **state)
{
    (void)state;
    check_matmul_naive(7, 517, 1030);
    check_matmul_naive(133, 300, 21);
}

static void test_matmul_inner_dim_zero_gives_zeros(void **state)
{
    (void)state;
    const int64_t sa[] = {2, 3, 0}, sb[] = {0, 4}, sc[] = {2, 3, 4};
    const float none[24] = {0};
    expect_allclose(tgc_matmul(zeros(sa, 3), zeros(sb, 2)), TGC_F32, sc, 3, none, 0);
    tgc_tensor *ah = tgc_zeros(sa, 3, TGC_BF16, tgc_cpu()),
               *bh = tgc_zeros(sb, 2, TGC_BF16, tgc_cpu());
    expect_allclose(tgc_matmul(ah, bh), TGC_BF16, sc, 3, none, 0);
}

static void test_matmul_empty_rows_and_batches(void **state)
{
    (void)state;
    const int64_t sa[] = {0, 5}, sb[] = {5, 4}, sc[] = {0, 4};
    const int64_t ba[] = {0, 2, 3}, bb[] = {3, 4}, bc[] = {0, 2, 4};
    expect_shape(tgc_matmul(zeros(sa, 2), ones(sb, 2)), sc, 2);
    expect_shape(tgc_matmul(zeros(ba, 3), ones(bb, 2)), bc, 3);
}

static void test_matmul_size_one_dims(void **state)
{
    (void)state;
    const float a[] = {3}, b[] = {-2}, want1[] = {-6};
    const int64_t s11[] = {1, 1};
    expect_allclose(tgc_matmul(f32s(a, s11, 2), f32s(b, s11, 2)), TGC_F32, s11, 2, want1, 0);
    /* an outer product: [3, 1] @ [1, 2] */
    const float col[] = {1, 2, 3}, row[] = {4, -5}, outer[] = {4, -5, 8, -10, 12, -15};
    const int64_t sc[] = {3, 1}, sr[] = {1, 2}, so[] = {3, 2};
    expect_allclose(tgc_matmul(f32s(col, sc, 2), f32s(row, sr, 2)), TGC_F32, so, 2, outer, 0);
    /* a row times a column: [1, 3] @ [3, 1] */
    const int64_t s13[] = {1, 3}, s31[] = {3, 1};
    const float inner[] = {1 * 1 + 2 * 2 + 3 * 3};
    expect_allclose(tgc_matmul(f32s(col, s13, 2), f32s(col, s31, 2)), TGC_F32, s11, 2, inner, 0);
}

static void test_matmul_half_dtypes(void **state)
{
    (void)state;
    /* inputs are exact in f16/bf16; results are rounded once to the output dtype */
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_ODD_A, TGC_F16), GOLDEN(G_MM_ODD_B, TGC_F16)), TGC_F16,
                  G_MM_ODD_OUT, 1e-3);
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_BCAST_A, TGC_BF16), GOLDEN(G_MM_BCAST_B, TGC_BF16)),
                  TGC_BF16, G_MM_BCAST_OUT, 1e-2);
    EXPECT_GOLDEN(tgc_matmul(GOLDEN(G_MM_ODD_A, TGC_F64), GOLDEN(G_MM_ODD_B, TGC_F64)), TGC_F64,
                  G_MM_ODD_OUT, 0);
}

/* Shape inference admits only float operands of one dtype, but the kernel contract covers
 * every dtype mix, so these run the kernel directly. */
static void test_matmul_kernel_integer_and_mixed_dtypes(void **state)
{
    (void)state;
    const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, want[] = {58, 64, 139, 154};
    const int64_t sa[] = {2, 3}, sb[] = {3, 2}, sc[] = {2, 2};
    const tgc_attrs at = {0};
    const tgc_dtype cases[][3] = {{TGC_I32, TGC_I32, TGC_I32},
                                  {TGC_I64, TGC_I64, TGC_I64},
                                  {TGC_I32, TGC_F32, TGC_F32},
                                  {TGC_F16, TGC_BF16, TGC_F32}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tgc_tensor *in[2] = {from_floats(a, sa, 2, cases[k][0]),
                             from_floats(b, sb, 2, cases[k][1])};
        tgc_tensor *c = tgc_interp_run(TGC_OP_MATMUL, in, 2, &at, cases[k][2], sc, 2);
        expect_allclose(c, cases[k][2], sc, 2, want, 0);
    }
}

static void test_matmul_inner_dims_differ_is_shape_error(void **state)
{
    (void)state;
    const int64_t sa[] = {64, 512}, sb[] = {256, 10};
    tgc_tensor *a = zeros(sa, 2), *b = zeros(sb, 2);
    expect_error_both(tgc_matmul(a, b), TGC_ERR_SHAPE, "[64, 512]", "[256, 10]");
    tgc_matmul(a, b);
    assert_non_null(strstr(tgc_last_error(), "tgc_matmul"));
    tgc_clear_error();
    /* vector forms check the same dim */
    const int64_t v3[] = {3}, v4[] = {4};
    expect_error_both(tgc_matmul(zeros(v3, 1), zeros(v4, 1)), TGC_ERR_SHAPE, "[3]", "[4]");
}

static void test_matmul_bad_batch_and_rank_are_shape_errors(void **state)
{
    (void)state;
    const int64_t sa[] = {2, 3, 4}, sb[] = {3, 4, 5};
    expect_error_both(tgc_matmul(zeros(sa, 3), zeros(sb, 3)), TGC_ERR_SHAPE, "[2, 3, 4]",
                      "[3, 4, 5]");
    tgc_tensor *scalar = zeros(NULL, 0);
    expect_error(tgc_matmul(scalar, zeros(sb, 3)), TGC_ERR_SHAPE, "tgc_matmul");
}

static void test_matmul_null_input_returns_null(void **state)
{
    (void)state;
    const int64_t s[] = {2, 2};
    tgc_tensor *b = zeros(s, 2);
    assert_null(tgc_matmul(NULL, b));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
}

/* ---- linear ---- */

static void test_linear_matches_numpy(void **state)
{
    (void)state;
    EXPECT_GOLDEN(tgc_linear(GOLDEN(G_LIN_3D_X, TGC_F32), GOLDEN(G_LIN_3D_W, TGC_F32),
                             GOLDEN(G_LIN_3D_BIAS, TGC_F32)),
                  TGC_F32, G_LIN_3D_OUT, 1e-6);
    EXPECT_GOLDEN(
        tgc_linear(GOLDEN(G_LIN_NOBIAS_X, TGC_F32), GOLDEN(G_LIN_NOBIAS_W, TGC_F32), NULL), TGC_F32,
        G_LIN_NOBIAS_OUT, 1e-6);
    EXPECT_GOLDEN(tgc_linear(GOLDEN(G_LIN_1D_X, TGC_F32), GOLDEN(G_LIN_1D_W, TGC_F32),
                             GOLDEN(G_LIN_1D_BIAS, TGC_F32)),
                  TGC_F32, G_LIN_1D_OUT, 1e-6);
}

static void test_linear_noncontiguous_inputs(void **state)
{
    (void)state;
    /* x [2, 3, 6] as a transposed view of [3, 2, 6]: its leading dims do not merge */
    float *xt = malloc(sizeof G_LIN_3D_X);
    assert_non_null(xt);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            memcpy(xt + (j * 2 + i) * 6, G_LIN_3D_X + (i * 3 + j) * 6, 6 * sizeof(float));
    const int64_t sx[] = {3, 2, 6}, sw[] = {6, 5};
    tgc_tensor *x = tgc_transpose(f32s(xt, sx, 3), 0, 1);
    float *wt = transposed(G_LIN_3D_W, 5, 6);
    tgc_tensor *w = tgc_transpose(f32s(wt, sw, 2), 0, 1);
    free(xt);
    free(wt);
    EXPECT_GOLDEN(tgc_linear(x, w, GOLDEN(G_LIN_3D_BIAS, TGC_F32)), TGC_F32, G_LIN_3D_OUT, 1e-6);
    /* bias read through a stride-2 slice: the odd positions are poison */
    float b2[10];
    for (int i = 0; i < 5; i++) {
        b2[2 * i] = G_LIN_3D_BIAS[i];
        b2[2 * i + 1] = 1e30f;
    }
    tgc_tensor *bs = tgc_slice(f32s(b2, (const int64_t[]){10}, 1), 0, 0, 10, 2);
    EXPECT_GOLDEN(tgc_linear(x, w, bs), TGC_F32, G_LIN_3D_OUT, 1e-6);
}

/* The seed CNN's classifier head: 64 x 8192 -> 10, against a naive double loop. */
static void test_linear_seed_cnn_head(void **state)
{
    (void)state;
    const int64_t n = 64, in = 8192, out = 10, sx[] = {n, in}, sw[] = {out, in}, sb[] = {out},
                  so[] = {n, out};
    float *x = pattern(n * in, 3), *w = pattern(out * in, 4), *b = pattern(out, 5),
          *want = malloc(sizeof(float) * n * out);
    assert_non_null(want);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < out; j++) {
            double acc = b[j];
            for (int64_t p = 0; p < in; p++)
                acc += (double)x[i * in + p] * w[j * in + p];
            want[i * out + j] = (float)acc;
        }
    expect_allclose(tgc_linear(f32s(x, sx, 2), f32s(w, sw, 2), f32s(b, sb, 1)), TGC_F32, so, 2,
                    want, 1e-5);
    free(x);
    free(w);
    free(b);
    free(want);
}

static void test_linear_half_dtypes(void **state)
{
    (void)state;
    EXPECT_GOLDEN(tgc_linear(GOLDEN(G_LIN_3D_X, TGC_BF16), GOLDEN(G_LIN_3D_W, TGC_BF16),
                             GOLDEN(G_LIN_3D_BIAS, TGC_BF16)),
                  TGC_BF16, G_LIN_3D_OUT, 1e-2);
    EXPECT_GOLDEN(
        tgc_linear(GOLDEN(G_LIN_NOBIAS_X, TGC_F16), GOLDEN(G_LIN_NOBIAS_W, TGC_F16), NULL), TGC_F16,
        G_LIN_NOBIAS_OUT, 1e-3);
}

static void test_linear_zero_in_features_gives_bias(void **state)
{
    (void)state;
    const int64_t sx[] = {3, 0}, sw[] = {2, 0}, sb[] = {2}, so[] = {3, 2};
    const float b[] = {1.5f, -2}, want[] = {1.5f, -2, 1.5f, -2, 1.5f, -2};
    tgc_tensor *y = tgc_linear(zeros(sx, 2), zeros(sw, 2), f32s(b, sb, 1));
    expect_allclose(y, TGC_F32, so, 2, want, 0);
}

static void test_linear_shape_errors(void **state)
{
    (void)state;
    const int64_t sx[] = {4, 6}, sw[] = {3, 5}, sw_ok[] = {3, 6}, sb[] = {4}, s1[] = {6};
    tgc_tensor *x = zeros(sx, 2);
    expect_error_both(tgc_linear(x, zeros(sw, 2), NULL), TGC_ERR_SHAPE, "[4, 6]", "[3, 5]");
    expect_error_both(tgc_linear(x, zeros(sw_ok, 2), zeros(sb, 1)), TGC_ERR_SHAPE, "tgc_linear",
                      "[4]");
    expect_error(tgc_linear(x, zeros(s1, 1), NULL), TGC_ERR_SHAPE, "tgc_linear");
}

/* ---- conv2d ---- */

static void check_conv_golden(const float *x, const int64_t *sx, const float *w, const int64_t *sw,
                              const float *b, const int64_t *sb, int has_bias, const int at[7],
                              const float *want, const int64_t *so)
{
    tgc_tensor *y = conv(f32s(x, sx, 4), f32s(w, sw, 4), has_bias ? f32s(b, sb, 1) : NULL, at);
    expect_allclose(y, TGC_F32, so, 4, want, 1e-6);
}

#define CONV_GOLDEN(name, has_bias)                                                                \
    check_conv_golden(name##_X, name##_X_SHAPE, name##_W, name##_W_SHAPE, name##_BIAS,             \
                      name##_BIAS_SHAPE, has_bias, name##_ATTRS, name##_OUT, name##_OUT_SHAPE)

static void test_conv2d_padded_3x3_matches_numpy(void **state)
{
    (void)state;
    CONV_GOLDEN(G_CONV_BASIC, 1);
}

static void test_conv2d_stride_padding_dilation_groups(void **state)
{
    (void)state;
    CONV_GOLDEN(G_CONV_STRIDED, 1);   /* stride (2,1), pad (1,2), dilation (1,2), groups 2 */
    CONV_GOLDEN(G_CONV_DILATED, 0);   /* stride (2,3), pad (2,1), dilation 2, no bias */
    CONV_GOLDEN(G_CONV_DEPTHWISE, 1); /* groups == channels, pad 2 */
    CONV_GOLDEN(G_CONV_POINTWISE, 1); /* 1x1: read without im2col */
}

/* x stored NHWC and permuted to NCHW: channel stride 1, no dim contiguous in W order. */
static tgc_tensor *channels_last(const float *x, const int64_t *s)
{
    int64_t n = s[0], c = s[1], h = s[2], w = s[3];
    float *nhwc = malloc(sizeof(float) * (size_t)(n * c * h * w));
    assert_non_null(nhwc);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t y = 0; y < h; y++)
                for (int64_t xx = 0; xx < w; xx++)
                    nhwc[((i * h + y) * w + xx) * c + ch] = x[((i * c + ch) * h + y) * w + xx];
    const int64_t sl[] = {n, h, w, c};
    const int perm[] = {0, 3, 1, 2};
    tgc_tensor *t = tgc_permute(f32s(nhwc, sl, 4), perm, 4);
    free(nhwc);
    assert_non_null(t);
    return t;
}

static void test_conv2d_channels_last_input(void **state)
{
    (void)state;
    tgc_tensor *x = channels_last(G_CONV_STRIDED_X, G_CONV_STRIDED_X_SHAPE);
    assert_false(tgc_is_contiguous(x));
    tgc_tensor *y = conv(x, GOLDEN(G_CONV_STRIDED_W, TGC_F32), GOLDEN(G_CONV_STRIDED_BIAS, TGC_F32),
                         G_CONV_STRIDED_ATTRS);
    EXPECT_GOLDEN(y, TGC_F32, G_CONV_STRIDED_OUT, 1e-6);
    tgc_tensor *xp = channels_last(G_CONV_POINTWISE_X, G_CONV_POINTWISE_X_SHAPE);
    /* a non-contiguous weight is copied before packing */
    tgc_tensor *wp = transposed_view(GOLDEN(G_CONV_POINTWISE_W, TGC_F32));
    y = conv(xp, wp, GOLDEN(G_CONV_POINTWISE_BIAS, TGC_F32), G_CONV_POINTWISE_ATTRS);
    EXPECT_GOLDEN(y, TGC_F32, G_CONV_POINTWISE_OUT, 1e-6);
}

/* One image of the seed CNN's second conv (32 -> 64, k3, pad 2 on 17x17) against a naive
 * loop; the full batch of 64 runs the same code 64 times. */
static void test_conv2d_seed_cnn_shape(void **state)
{
    (void)state;
    const int64_t n = 2, c = 32, h = 17, o = 64, k = 3, p = 2, oh = h + 2 * p - k + 1;
    const int64_t sx[] = {n, c, h, h}, sw[] = {o, c, k, k}, sb[] = {o}, so[] = {n, o, oh, oh};
    float *x = pattern(n * c * h * h, 6), *w = pattern(o * c * k * k, 7), *b = pattern(o, 8);
    float *want = malloc(sizeof(float) * (size_t)(n * o * oh * oh));
    assert_non_null(want);
    for (int64_t i = 0; i < n; i++)
        for (int64_t q = 0; q < o; q++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xx = 0; xx < oh; xx++) {
                    double acc = b[q];
                    for (int64_t ch = 0; ch < c; ch++)
                        for (int64_t ki = 0; ki < k; ki++)
                            for (int64_t kj = 0; kj < k; kj++) {
                                int64_t iy = y - p + ki, ix = xx - p + kj;
                                if (iy >= 0 && iy < h && ix >= 0 && ix < h)
                                    acc += (double)x[((i * c + ch) * h + iy) * h + ix] *
                                           w[((q * c + ch) * k + ki) * k + kj];
                            }
                    want[((i * o + q) * oh + y) * oh + xx] = (float)acc;
                }
    const int at[7] = {1, 1, 2, 2, 1, 1, 1};
    expect_allclose(conv(f32s(x, sx, 4), f32s(w, sw, 4), f32s(b, sb, 1), at), TGC_F32, so, 4, want,
                    1e-5);
    free(x);
    free(w);
    free(b);
    free(want);
}

static void test_conv2d_half_dtypes(void **state)
{
    (void)state;
    tgc_tensor *y = conv(GOLDEN(G_CONV_BASIC_X, TGC_F16), GOLDEN(G_CONV_BASIC_W, TGC_F16),
                         GOLDEN(G_CONV_BASIC_BIAS, TGC_F16), G_CONV_BASIC_ATTRS);
    EXPECT_GOLDEN(y, TGC_F16, G_CONV_BASIC_OUT, 2e-3);
    y = conv(GOLDEN(G_CONV_STRIDED_X, TGC_BF16), GOLDEN(G_CONV_STRIDED_W, TGC_BF16),
             GOLDEN(G_CONV_STRIDED_BIAS, TGC_BF16), G_CONV_STRIDED_ATTRS);
    EXPECT_GOLDEN(y, TGC_BF16, G_CONV_STRIDED_OUT, 1e-2);
}

static void test_conv2d_kernel_integer_dtypes(void **state)
{
    (void)state;
    /* 3x3 image 1..9, 2x2 box kernel, bias 10 */
    const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 1, 1, 1}, b[] = {10};
    const float want[] = {22, 26, 34, 38};
    const int64_t sx[] = {1, 1, 3, 3}, sw[] = {1, 1, 2, 2}, sb[] = {1}, so[] = {1, 1, 2, 2};
    tgc_attrs at = {0};
    const int64_t v[7] = {1, 1, 0, 0, 1, 1, 1};
    memcpy(at.i, v, sizeof v);
    at.ni = 7;
    tgc_tensor *in[3] = {from_floats(x, sx, 4, TGC_I32), from_floats(w, sw, 4, TGC_I32),
                         from_floats(b, sb, 1, TGC_I32)};
    expect_allclose(tgc_interp_run(TGC_OP_CONV2D, in, 3, &at, TGC_I32, so, 4), TGC_I32, so, 4, want,
                    0);
    in[0] = from_floats(x, sx, 4, TGC_I64);
    expect_allclose(tgc_interp_run(TGC_OP_CONV2D, in, 3, &at, TGC_F32, so, 4), TGC_F32, so, 4, want,
                    0);
}

static void test_linear_kernel_integer_dtypes(void **state)
{
    (void)state;
    const float x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, -1, 2, 2, 2}, b[] = {100, -100};
    const float want[] = {98, -88, 98, -70};
    const int64_t sx[] = {2, 3}, sw[] = {2, 3}, sb[] = {2}, so[] = {2, 2};
    const tgc_attrs at = {0};
    tgc_tensor *in[3] = {from_floats(x, sx, 2, TGC_I32), from_floats(w, sw, 2, TGC_I32),
                         from_floats(b, sb, 1, TGC_I64)};
    expect_allclose(tgc_interp_run(TGC_OP_LINEAR, in, 3, &at, TGC_I64, so, 2), TGC_I64, so, 2, want,
                    0);
}

static void test_conv2d_empty_batch(void **state)
{
    (void)state;
    const int64_t sx[] = {0, 3, 8, 8}, sw[] = {4, 3, 3, 3}, so[] = {0, 4, 8, 8};
    const int at[7] = {1, 1, 1, 1, 1, 1, 1};
    expect_shape(conv(zeros(sx, 4), ones(sw, 4), NULL, at), so, 4);
}

static void test_conv2d_shape_errors(void **state)
{
    (void)state;
    const int64_t sx[] = {2, 3, 8, 8}, sw[] = {4, 2, 3, 3}, sw_ok[] = {4, 3, 3, 3},
                  s3[] = {3, 8, 8}, sb[] = {5}, big[] = {4, 3, 11, 11};
    const int at[7] = {1, 1, 1, 1, 1, 1, 1};
    tgc_tensor *x = zeros(sx, 4);
    tgc_tensor *w = zeros(sw_ok, 4);
    /* channel mismatch: x has 3 channels, w expects 2 per group */
    expect_error_both(conv(x, zeros(sw, 4), NULL, at), TGC_ERR_SHAPE, "tgc_conv2d", "[2, 3, 8, 8]");
    /* x without a batch dim */
    expect_error_both(conv(zeros(s3, 3), w, NULL, at), TGC_ERR_SHAPE, "tgc_conv2d", "[3, 8, 8]");
    /* bias of the wrong size */
    expect_error_both(conv(x, w, zeros(sb, 1), at), TGC_ERR_SHAPE, "tgc_conv2d", "[5]");
    /* a kernel larger than the padded input */
    expect_error(conv(x, zeros(big, 4), NULL, at), TGC_ERR_SHAPE, "tgc_conv2d");
}

/* ---- the kernel's own contract ---- */

static void test_interp_linalg_rejects_other_ops(void **state)
{
    (void)state;
    const int64_t s[] = {2, 2};
    tgc_tensor *a = zeros(s, 2), *out = zeros(s, 2);
    tgc_tensor *in[2] = {a, a};
    tgc_attrs at = {0};
    assert_int_equal(tgc_interp_linalg(TGC_OP_ADD, in, 2, &at, out), TGC_ERR_INTERNAL);
    assert_non_null(strstr(tgc_last_error(), "add"));
    tgc_clear_error();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, scope_setup, scope_teardown)
    const struct CMUnitTest tests[] = {
        T(test_matmul_2x2_by_hand),
        T(test_matmul_odd_sizes_match_numpy),
        T(test_matmul_broadcasts_batch_dims),
        T(test_matmul_expanded_operands_read_stride_zero),
        T(test_matmul_vector_operands_drop_their_dim),
        T(test_matmul_transposed_inputs),
        T(test_matmul_crosses_gemm_blocks),
        T(test_matmul_inner_dim_zero_gives_zeros),
        T(test_matmul_empty_rows_and_batches),
        T(test_matmul_size_one_dims),
        T(test_matmul_half_dtypes),
        T(test_matmul_kernel_integer_and_mixed_dtypes),
        T(test_matmul_inner_dims_differ_is_shape_error),
        T(test_matmul_bad_batch_and_rank_are_shape_errors),
        T(test_matmul_null_input_returns_null),
        T(test_linear_matches_numpy),
        T(test_linear_noncontiguous_inputs),
        T(test_linear_seed_cnn_head),
        T(test_linear_half_dtypes),
        T(test_linear_kernel_integer_dtypes),
        T(test_linear_zero_in_features_gives_bias),
        T(test_linear_shape_errors),
        T(test_conv2d_padded_3x3_matches_numpy),
        T(test_conv2d_stride_padding_dilation_groups),
        T(test_conv2d_channels_last_input),
        T(test_conv2d_seed_cnn_shape),
        T(test_conv2d_half_dtypes),
        T(test_conv2d_kernel_integer_dtypes),
        T(test_conv2d_empty_batch),
        T(test_conv2d_shape_errors),
        T(test_interp_linalg_rejects_other_ops),
    };
#undef T
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return failed;
}
