/* Reductions and softmax run eagerly through the public API: sum, mean, max, var, argmax
 * over one, several or all dims with and without keepdim, softmax and log_softmax. Covers
 * non-contiguous inputs (permute, slice, expand), 0-d and empty inputs, the result dtypes
 * (sum of bool/i32 is i64, mean/var/softmax of integers is f32, argmax is i64), NaN
 * handling, accumulation precision, and the error paths' status and message. Reference
 * values are hand-worked or come from tests/ops/gen_golden_pointwise_reduce.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "tensor/tensor_impl.h"
#include "golden_pointwise_reduce.h"
#include "op_test_util.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* ---- sum, mean, max, var, argmax ---- */

static void test_sum_with_no_dims_listed_reduces_every_dim(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(2, 3), 2, TGC_F32);
    expect_values(tgc_sum(x, NULL, 0, 0), TGC_F32, NULL, 0, VALS(15), 0);
    expect_values(tgc_sum(x, NULL, 0, 1), TGC_F32, SHAPE(1, 1), 2, VALS(15), 0);
    expect_values(tgc_mean(x, NULL, 0, 0), TGC_F32, NULL, 0, VALS(2.5), 0);
}

static void test_sum_over_one_dim_with_and_without_keepdim(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(2, 3), 2, TGC_F32);
    expect_values(tgc_sum(x, (const int[]){0}, 1, 0), TGC_F32, SHAPE(3), 1, VALS(3, 5, 7), 0);
    expect_values(tgc_sum(x, (const int[]){1}, 1, 1), TGC_F32, SHAPE(2, 1), 2, VALS(3, 12), 0);
    expect_values(tgc_sum(x, (const int[]){-1}, 1, 0), TGC_F32, SHAPE(2), 1, VALS(3, 12), 0);
    expect_values(tgc_sum(x, (const int[]){1, 0}, 2, 1), TGC_F32, SHAPE(1, 1), 2, VALS(15), 0);
}

static void test_reducing_a_0d_tensor_gives_the_tensor_itself(void **state)
{
    (void)state;
    tgc_tensor *s = f32s((const float[]){4}, NULL, 0);
    expect_values(tgc_sum(s, NULL, 0, 0), TGC_F32, NULL, 0, VALS(4), 0);
    expect_values(tgc_max(s, (const int[]){0}, 1, 1), TGC_F32, NULL, 0, VALS(4), 0);
    expect_values(tgc_mean(s, (const int[]){-1}, 1, 0), TGC_F32, NULL, 0, VALS(4), 0);
    expect_values(tgc_argmax(s, 0, 0), TGC_I64, NULL, 0, VALS(0), 0);
}

static void test_golden_reductions_over_several_dims_of_a_4d_tensor(void **state)
{
    (void)state;
    tgc_tensor *x = f32s(golden_red_x, SHAPE(2, 3, 4, 5), 4);
    expect_f32(tgc_sum(x, (const int[]){1, 3}, 2, 0), SHAPE(2, 4), 2, golden_red_sum_d13, 1e-6);
    expect_f32(tgc_mean(x, (const int[]){0, -2}, 2, 0), SHAPE(3, 5), 2, golden_red_mean_d02,
               1e-6);
    expect_f32(tgc_max(x, (const int[]){2}, 1, 0), SHAPE(2, 3, 5), 3, golden_red_max_d2, 0);
    expect_f32(tgc_var(x, (const int[]){1, 2, 3}, 3, 0, 0), SHAPE(2), 1, golden_red_var_d123_c0,
               1e-6);
    expect_f32(tgc_var(x, (const int[]){1, 2, 3}, 3, 1, 1), SHAPE(2, 1, 1, 1), 4,
               golden_red_var_d123_c1, 1e-6);
    expect_f32(tgc_var(x, (const int[]){0}, 1, 1, 0), SHAPE(3, 4, 5), 3, golden_red_var_d0_c1,
               1e-6);
    double want[30];
    for (int i = 0; i < 30; i++)
        want[i] = (double)golden_red_argmax_d2[i];
    expect_values(tgc_argmax(x, 2, 0), TGC_I64, SHAPE(2, 3, 5), 3, want, 0);
    expect_values(tgc_argmax(x, -2, 1), TGC_I64, SHAPE(2, 3, 1, 5), 4, want, 0);
}

/* x permuted to [5, 4, 3, 2]: dims 0 and 2 there are dims 3 and 1 of the golden input. */
static void test_reductions_read_a_permuted_view_through_its_strides(void **state)
{
    (void)state;
    static const int perm[4] = {3, 2, 1, 0};
    tgc_tensor *xt = tgc_permute(f32s(golden_red_x, SHAPE(2, 3, 4, 5), 4), perm, 4);
    float want[8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            want[i * 2 + j] = golden_red_sum_d13[j * 4 + i];
    expect_f32(tgc_sum(xt, (const int[]){0, 2}, 2, 0), SHAPE(4, 2), 2, want, 1e-6);
    double *soft = values_of(tgc_permute(tgc_softmax(xt, 0), perm, 4));
    double *argm = values_of(tgc_argmax(xt, 1, 0)); /* [5, 3, 2]: golden dim 2 */
    for (int k = 0; k < 120; k++)
        assert_true(close_to(soft[k], golden_red_softmax_d3[k], 1e-6));
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++)
                assert_int_equal((int64_t)argm[(a * 3 + b) * 2 + c],
                                 golden_red_argmax_d2[(c * 3 + b) * 5 + a]);
    free(soft);
    free(argm);
}

static void test_reductions_read_sliced_and_expanded_views(void **state)
{
    (void)state;
    tgc_tensor *s = tgc_slice(iota(SHAPE(4, 5), 2, TGC_F32), 1, 0, 5, 2); /* cols 0, 2, 4 */
    expect_values(tgc_sum(s, (const int[]){1}, 1, 0), TGC_F32, SHAPE(4), 1,
                  VALS(6, 21, 36, 51), 0);
    expect_values(tgc_max(s, (const int[]){0}, 1, 0), TGC_F32, SHAPE(3), 1, VALS(15, 17, 19), 0);
    tgc_tensor *e = tgc_expand(f32s((const float[]){1, 2}, SHAPE(2, 1), 2), SHAPE(2, 7), 2);
    expect_values(tgc_sum(e, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1, VALS(7, 14), 0);
    expect_values(tgc_var(e, (const int[]){1}, 1, 1, 0), TGC_F32, SHAPE(2), 1, VALS(0, 0), 0);
    expect_values(tgc_softmax(e, 1), TGC_F32, SHAPE(2, 7), 2,
                  VALS(1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7.,
                       1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7.),
                  1e-7);
}

static void test_sum_of_bool_and_i32_is_i64_and_exact(void **state)
{
    (void)state;
    const int64_t big = (int64_t)1 << 53;
    tgc_tensor *b = from_doubles(VALS(1, 1, 0, 1), SHAPE(4), 1, TGC_BOOL);
    tgc_tensor *i = from_doubles(VALS(2147483647, 2147483647, 2), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_sum(b, NULL, 0, 0), TGC_I64, NULL, 0, VALS(3), 0);
    expect_i64_exact(tgc_sum(i, NULL, 0, 0), (const int64_t[]){4294967296}, 1);
    tgc_tensor *l = i64s((const int64_t[]){big, 1, 1}, SHAPE(3), 1);
    expect_i64_exact(tgc_sum(l, NULL, 0, 0), (const int64_t[]){big + 2}, 1);
    expect_i64_exact(tgc_max(tgc_add_scalar(l, 1), NULL, 0, 0), (const int64_t[]){big + 1}, 1);
}

static void test_sums_accumulate_in_higher_precision_than_the_dtype(void **state)
{
    (void)state;
    /* In f16, 2048 + 1 rounds back to 2048; accumulated in double the sum is exact. */
    tgc_tensor *h = tgc_ones(SHAPE(4096), 1, TGC_F16, tgc_cpu());
    expect_values(tgc_sum(h, NULL, 0, 0), TGC_F16, NULL, 0, VALS(4096), 0);
    expect_values(tgc_mean(h, NULL, 0, 0), TGC_F16, NULL, 0, VALS(1), 0);
    tgc_tensor *f = tgc_full(SHAPE(10000), 1, 0.1, TGC_F32, tgc_cpu());
    expect_values(tgc_sum(f, NULL, 0, 0), TGC_F32, NULL, 0, VALS((float)(10000 * (double)0.1f)),
                  0);
}

static void test_sum_over_an_empty_dim_is_zero_and_mean_is_nan(void **state)
{
    (void)state;
    tgc_tensor *e = tgc_zeros(SHAPE(0, 3), 2, TGC_F32, tgc_cpu());
    expect_values(tgc_sum(e, (const int[]){0}, 1, 0), TGC_F32, SHAPE(3), 1, VALS(0, 0, 0), 0);
    expect_values(tgc_sum(e, NULL, 0, 1), TGC_F32, SHAPE(1, 1), 2, VALS(0), 0);
    expect_values(tgc_mean(e, (const int[]){0}, 1, 1), TGC_F32, SHAPE(1, 3), 2,
                  VALS(NAN, NAN, NAN), 0);
    expect_values(tgc_var(e, (const int[]){0}, 1, 0, 0), TGC_F32, SHAPE(3), 1,
                  VALS(NAN, NAN, NAN), 0);
    expect_values(tgc_sum(e, (const int[]){1}, 1, 0), TGC_F32, SHAPE(0), 1, NULL, 0);
    expect_values(tgc_softmax(e, 1), TGC_F32, SHAPE(0, 3), 2, NULL, 0);
    tgc_tensor *ei = tgc_zeros(SHAPE(2, 0), 2, TGC_I32, tgc_cpu());
    expect_values(tgc_sum(ei, (const int[]){1}, 1, 0), TGC_I64, SHAPE(2), 1, VALS(0, 0), 0);
}

static void test_max_and_argmax_over_an_empty_dim_are_rejected(void **state)
{
    (void)state;
    tgc_tensor *e = tgc_zeros(SHAPE(0, 3), 2, TGC_F32, tgc_cpu());
    expect_error(tgc_max(e, (const int[]){0}, 1, 0), TGC_ERR_SHAPE, "tgc_max");
    expect_error(tgc_argmax(e, 0, 0), TGC_ERR_SHAPE, "tgc_argmax");
}

static void test_mean_and_var_of_integers_return_f32(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(1, 2, 3, 4), SHAPE(2, 2), 2, TGC_I32);
    expect_values(tgc_mean(x, NULL, 0, 0), TGC_F32, NULL, 0, VALS(2.5), 0);
    expect_values(tgc_mean(x, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1, VALS(1.5, 3.5), 0);
    expect_values(tgc_var(x, NULL, 0, 0, 0), TGC_F32, NULL, 0, VALS(1.25), 0);
    expect_values(tgc_max(x, NULL, 0, 0), TGC_I32, NULL, 0, VALS(4), 0);
}

static void test_max_propagates_nan_and_keeps_the_dtype(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1, NAN, 3, -INFINITY, -5, -7}, SHAPE(2, 3), 2);
    expect_values(tgc_max(x, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1, VALS(NAN, -5), 0);
    expect_values(tgc_max(x, (const int[]){0}, 1, 0), TGC_F32, SHAPE(3), 1, VALS(1, NAN, 3), 0);
    tgc_tensor *h = from_doubles(VALS(-3, -1, -2), SHAPE(3), 1, TGC_BF16);
    expect_values(tgc_max(h, NULL, 0, 0), TGC_BF16, NULL, 0, VALS(-1), 0);
    tgc_tensor *b = from_doubles(VALS(0, 1, 0), SHAPE(3), 1, TGC_BOOL);
    expect_values(tgc_max(b, NULL, 0, 0), TGC_BOOL, NULL, 0, VALS(1), 0);
}

static void test_var_divides_by_count_minus_correction(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1, 2, 3, 4}, SHAPE(4), 1);
    expect_values(tgc_var(x, NULL, 0, 0, 0), TGC_F32, NULL, 0, VALS(1.25), 0);
    expect_values(tgc_var(x, NULL, 0, 1, 0), TGC_F32, NULL, 0, VALS(5.0 / 3), 1e-7);
    expect_values(tgc_var(x, NULL, 0, 2, 0), TGC_F32, NULL, 0, VALS(2.5), 0);
    /* As in PyTorch the divisor is max(0, n - correction): 5 / 0 is inf, 0 / 0 is NaN. */
    expect_values(tgc_var(x, NULL, 0, 4, 0), TGC_F32, NULL, 0, VALS(INFINITY), 0);
    expect_values(tgc_var(x, NULL, 0, 9, 0), TGC_F32, NULL, 0, VALS(INFINITY), 0);
    tgc_tensor *one = f32s((const float[]){3}, SHAPE(1), 1);
    expect_values(tgc_var(one, NULL, 0, 1, 0), TGC_F32, NULL, 0, VALS(NAN), 0);
    expect_values(tgc_var(one, NULL, 0, 0, 0), TGC_F32, NULL, 0, VALS(0), 0);
}

static void test_var_is_accurate_for_a_large_mean(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4), SHAPE(4), 1, TGC_F64);
    expect_values(tgc_var(x, NULL, 0, 0, 0), TGC_F64, NULL, 0, VALS(1.25), 1e-12);
}

static void test_argmax_returns_the_first_maximum_as_i64(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){3, 7, 7, 1, 9, 9, 0, 9}, SHAPE(2, 4), 2);
    expect_values(tgc_argmax(x, 1, 0), TGC_I64, SHAPE(2), 1, VALS(1, 0), 0);
    expect_values(tgc_argmax(x, 0, 1), TGC_I64, SHAPE(1, 4), 2, VALS(1, 1, 0, 1), 0);
    tgc_tensor *i = from_doubles(VALS(-5, -2, -2), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_argmax(i, -1, 0), TGC_I64, NULL, 0, VALS(1), 0);
}

static void test_argmax_treats_the_first_nan_as_the_maximum(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1, NAN, 3, NAN}, SHAPE(4), 1);
    expect_values(tgc_argmax(x, 0, 0), TGC_I64, NULL, 0, VALS(1), 0);
    tgc_tensor *y = f32s((const float[]){-INFINITY, -INFINITY}, SHAPE(2), 1);
    expect_values(tgc_argmax(y, 0, 0), TGC_I64, NULL, 0, VALS(0), 0);
}

/* ---- softmax, log_softmax ---- */

static void test_golden_softmax_and_log_softmax(void **state)
{
    (void)state;
    tgc_tensor *x = f32s(golden_red_x, SHAPE(2, 3, 4, 5), 4);
    expect_f32(tgc_softmax(x, 1), SHAPE(2, 3, 4, 5), 4, golden_red_softmax_d1, 1e-6);
    expect_f32(tgc_softmax(x, -1), SHAPE(2, 3, 4, 5), 4, golden_red_softmax_d3, 1e-6);
    expect_f32(tgc_log_softmax(x, 3), SHAPE(2, 3, 4, 5), 4, golden_red_log_softmax_d3, 1e-6);
    double *s = values_of(tgc_sum(tgc_softmax(x, 1), (const int[]){1}, 1, 0));
    for (int k = 0; k < 40; k++)
        assert_true(close_to(s[k], 1.0, 1e-6));
    free(s);
}

static void test_softmax_is_stable_for_large_logits(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1000, 1001, 1002, -INFINITY, 0, -1000}, SHAPE(2, 3), 2);
    const double z = 1 + exp(-1) + exp(-2);
    expect_values(tgc_softmax(x, 1), TGC_F32, SHAPE(2, 3), 2,
                  VALS(exp(-2) / z, exp(-1) / z, 1 / z, 0, 1, 0), 1e-6);
    expect_values(tgc_log_softmax(x, 1), TGC_F32, SHAPE(2, 3), 2,
                  VALS(-2 - log(z), -1 - log(z), -log(z), -INFINITY, 0, -1000), 1e-6);
}

static void test_softmax_of_a_row_of_minus_infinity_is_nan(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){-INFINITY, -INFINITY}, SHAPE(1, 2), 2);
    expect_values(tgc_softmax(x, 1), TGC_F32, SHAPE(1, 2), 2, VALS(NAN, NAN), 0);
}

static void test_softmax_of_integers_is_f32_and_of_half_is_half(void **state)
{
    (void)state;
    const double z = 1 + exp(1);
    tgc_tensor *i = from_doubles(VALS(0, 1), SHAPE(2), 1, TGC_I64);
    expect_values(tgc_softmax(i, 0), TGC_F32, SHAPE(2), 1, VALS(1 / z, exp(1) / z), 1e-7);
    tgc_tensor *h = from_doubles(VALS(0, 1), SHAPE(2), 1, TGC_F16);
    expect_values(tgc_softmax(h, 0), TGC_F16, SHAPE(2), 1, VALS(1 / z, exp(1) / z), 1e-3);
    expect_values(tgc_log_softmax(h, 0), TGC_F16, SHAPE(2), 1, VALS(-log(z), 1 - log(z)), 1e-3);
}

static void test_softmax_of_a_0d_tensor_is_one(void **state)
{
    (void)state;
    tgc_tensor *s = f32s((const float[]){-3}, NULL, 0);
    expect_values(tgc_softmax(s, 0), TGC_F32, NULL, 0, VALS(1), 0);
    expect_values(tgc_log_softmax(s, -1), TGC_F32, NULL, 0, VALS(0), 0);
}

/* Short rows are kept on the stack, long ones streamed; both give the formula's values. */
static void test_softmax_rows_of_any_length_match_the_formula(void **state)
{
    (void)state;
    static const int64_t lens[] = {5, 1024, 1025, 3000};
    for (int k = 0; k < (int)(sizeof lens / sizeof lens[0]); k++) {
        const int64_t n = lens[k];
        double *x = malloc(sizeof(double) * (size_t)n), *soft = malloc(sizeof(double) * (size_t)n);
        double *logp = malloc(sizeof(double) * (size_t)n), mx = -INFINITY, sum = 0;
        assert_true(x && soft && logp);
        for (int64_t i = 0; i < n; i++) {
            x[i] = 20 * sin(0.37 * (double)i);
            mx = x[i] > mx ? x[i] : mx;
        }
        for (int64_t i = 0; i < n; i++)
            sum += exp(x[i] - mx);
        for (int64_t i = 0; i < n; i++) {
            soft[i] = exp(x[i] - mx) / sum;
            logp[i] = x[i] - mx - log(sum);
        }
        tgc_tensor *t = tgc_transpose(from_doubles(x, SHAPE(n, 1), 2, TGC_F64), 0, 1);
        expect_values(tgc_softmax(t, 1), TGC_F64, SHAPE(1, n), 2, soft, 1e-12);
        expect_values(tgc_log_softmax(t, -1), TGC_F64, SHAPE(1, n), 2, logp, 1e-12);
        free(x);
        free(soft);
        free(logp);
    }
}

/* Rows longer than the kernel's block size. */
static void test_long_rows_cross_block_boundaries(void **state)
{
    (void)state;
    enum { N = 1000 };
    tgc_tensor *x = iota(SHAPE(2, N), 2, TGC_F32);
    expect_values(tgc_sum(x, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1,
                  VALS(499500, 499500 + 1e6), 0);
    expect_values(tgc_max(x, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1, VALS(999, 1999), 0);
    expect_values(tgc_argmax(x, 1, 0), TGC_I64, SHAPE(2), 1, VALS(999, 999), 0);
    double *p = values_of(tgc_softmax(tgc_zeros(SHAPE(N, 2), 2, TGC_F32, tgc_cpu()), 0));
    for (int k = 0; k < 2 * N; k++)
        assert_true(close_to(p[k], 1.0 / N, 1e-6));
    free(p);
}

/* ---- errors ---- */

static void test_bad_dims_fail_with_invalid_arg(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(2, 3), 2, TGC_F32);
    expect_error(tgc_sum(x, (const int[]){2}, 1, 0), TGC_ERR_INVALID_ARG, "tgc_sum");
    expect_error(tgc_mean(x, (const int[]){0, -2}, 2, 0), TGC_ERR_INVALID_ARG, "twice");
    expect_error(tgc_max(x, (const int[]){-3}, 1, 0), TGC_ERR_INVALID_ARG, "tgc_max");
    expect_error(tgc_argmax(x, 2, 0), TGC_ERR_INVALID_ARG, "tgc_argmax");
    expect_error(tgc_softmax(x, -3), TGC_ERR_INVALID_ARG, "tgc_softmax");
    expect_error(tgc_log_softmax(x, 2), TGC_ERR_INVALID_ARG, "tgc_log_softmax");
    expect_error(tgc_var(x, NULL, 0, -1, 0), TGC_ERR_INVALID_ARG, "correction");
}

static void test_null_input_returns_null_and_keeps_the_first_error(void **state)
{
    (void)state;
    assert_null(tgc_sum(NULL, NULL, 0, 0));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
    tgc_tensor *x = iota(SHAPE(2, 3), 2, TGC_F32);
    tgc_tensor *bad = tgc_sum(x, (const int[]){5}, 1, 0);
    assert_null(tgc_softmax(tgc_mean(bad, NULL, 0, 0), 0));
    expect_error(tgc_argmax(tgc_var(bad, NULL, 0, 1, 0), 0, 0), TGC_ERR_INVALID_ARG, "tgc_sum");
}

static void test_interp_reduce_rejects_ops_it_does_not_implement(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(2, 3), 2, TGC_F32);
    tgc_tensor *out = tgc_empty(SHAPE(2), 1, TGC_F32, tgc_cpu());
    tgc_attrs at = {0};
    at.i[0] = 2; /* dim 1 */
    assert_int_equal(tgc_interp_reduce(TGC_OP_ADD, &x, 1, &at, out), TGC_ERR_INTERNAL);
    assert_int_equal(tgc_interp_reduce(TGC_OP_SUM, &x, 0, &at, out), TGC_ERR_INTERNAL);
    at.i[0] = 4; /* dim 2 of a 2-d tensor */
    assert_int_equal(tgc_interp_reduce(TGC_OP_SUM, &x, 1, &at, out), TGC_ERR_INTERNAL);
    at.i[0] = 1; /* dim 0 leaves 3 elements, out has 2 */
    assert_int_equal(tgc_interp_reduce(TGC_OP_SUM, &x, 1, &at, out), TGC_ERR_INTERNAL);
    at.i[0] = 2;
    assert_int_equal(tgc_interp_reduce(TGC_OP_SUM, &x, 1, &at, out), TGC_OK);
    expect_values(out, TGC_F32, SHAPE(2), 1, VALS(3, 12), 0);
    tgc_clear_error();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, scope_setup, scope_teardown)
    const struct CMUnitTest tests[] = {
        T(test_sum_with_no_dims_listed_reduces_every_dim),
        T(test_sum_over_one_dim_with_and_without_keepdim),
        T(test_reducing_a_0d_tensor_gives_the_tensor_itself),
        T(test_golden_reductions_over_several_dims_of_a_4d_tensor),
        T(test_reductions_read_a_permuted_view_through_its_strides),
        T(test_reductions_read_sliced_and_expanded_views),
        T(test_sum_of_bool_and_i32_is_i64_and_exact),
        T(test_sums_accumulate_in_higher_precision_than_the_dtype),
        T(test_sum_over_an_empty_dim_is_zero_and_mean_is_nan),
        T(test_max_and_argmax_over_an_empty_dim_are_rejected),
        T(test_mean_and_var_of_integers_return_f32),
        T(test_max_propagates_nan_and_keeps_the_dtype),
        T(test_var_divides_by_count_minus_correction),
        T(test_var_is_accurate_for_a_large_mean),
        T(test_argmax_returns_the_first_maximum_as_i64),
        T(test_argmax_treats_the_first_nan_as_the_maximum),
        T(test_golden_softmax_and_log_softmax),
        T(test_softmax_is_stable_for_large_logits),
        T(test_softmax_of_a_row_of_minus_infinity_is_nan),
        T(test_softmax_of_integers_is_f32_and_of_half_is_half),
        T(test_softmax_of_a_0d_tensor_is_one),
        T(test_softmax_rows_of_any_length_match_the_formula),
        T(test_long_rows_cross_block_boundaries),
        T(test_bad_dims_fail_with_invalid_arg),
        T(test_null_input_returns_null_and_keeps_the_first_error),
        T(test_interp_reduce_rejects_ops_it_does_not_implement),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
