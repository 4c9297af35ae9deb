/* Elementwise ops run eagerly through the public API: binary arithmetic, comparisons,
 * where, scalar forms, unary math and cast. Covers broadcasting, non-contiguous inputs
 * (transpose, slice, expand, permute), size-1 and empty dims, every dtype family with the
 * promotion rules of include/tgc/ops.h, and the error paths' status and message. Reference
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

typedef tgc_tensor *(*binary_fn)(tgc_tensor *, tgc_tensor *);
typedef tgc_tensor *(*unary_fn)(tgc_tensor *);
typedef tgc_tensor *(*scalar_fn)(tgc_tensor *, double);

/* ---- binary arithmetic and broadcasting ---- */

static void test_add_of_same_shape_f32_adds_elementwise(void **state)
{
    (void)state;
    tgc_tensor *a = f32s((const float[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3), 2);
    tgc_tensor *b = f32s((const float[]){10, 20, 30, 40, 50, 60}, SHAPE(2, 3), 2);
    expect_values(tgc_add(a, b), TGC_F32, SHAPE(2, 3), 2, VALS(11, 22, 33, 44, 55, 66), 0);
    expect_values(tgc_sub(a, b), TGC_F32, SHAPE(2, 3), 2, VALS(-9, -18, -27, -36, -45, -54), 0);
    expect_values(tgc_mul(a, b), TGC_F32, SHAPE(2, 3), 2, VALS(10, 40, 90, 160, 250, 360), 0);
    expect_values(tgc_div(b, a), TGC_F32, SHAPE(2, 3), 2, VALS(10, 10, 10, 10, 10, 10), 0);
}

static void test_add_broadcasts_a_row_over_every_row(void **state)
{
    (void)state;
    tgc_tensor *a = iota(SHAPE(2, 3), 2, TGC_F32);
    tgc_tensor *b = f32s((const float[]){10, 20, 30}, SHAPE(3), 1);
    expect_values(tgc_add(a, b), TGC_F32, SHAPE(2, 3), 2, VALS(10, 21, 32, 13, 24, 35), 0);
    expect_values(tgc_add(b, a), TGC_F32, SHAPE(2, 3), 2, VALS(10, 21, 32, 13, 24, 35), 0);
}

static void test_mul_of_column_and_row_is_their_outer_product(void **state)
{
    (void)state;
    tgc_tensor *col = f32s((const float[]){1, 2, 3}, SHAPE(3, 1), 2);
    tgc_tensor *row = f32s((const float[]){1, 10, 100, 1000}, SHAPE(1, 4), 2);
    expect_values(tgc_mul(col, row), TGC_F32, SHAPE(3, 4), 2,
                  VALS(1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000), 0);
}

static void test_broadcast_adds_leading_dims_from_either_side(void **state)
{
    (void)state;
    tgc_tensor *a = iota(SHAPE(2, 1, 3), 3, TGC_F32);                    /* 0..5 */
    tgc_tensor *b = f32s((const float[]){0, 10}, SHAPE(2, 1), 2);        /* [2, 1] */
    expect_values(tgc_add(a, b), TGC_F32, SHAPE(2, 2, 3), 3,
                  VALS(0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15), 0);
}

static void test_zero_dim_tensor_broadcasts_as_a_scalar(void **state)
{
    (void)state;
    tgc_tensor *s = f32s((const float[]){2.5f}, NULL, 0);
    tgc_tensor *m = iota(SHAPE(2, 2), 2, TGC_F32);
    expect_values(tgc_mul(s, m), TGC_F32, SHAPE(2, 2), 2, VALS(0, 2.5, 5, 7.5), 0);
    expect_values(tgc_sub(m, s), TGC_F32, SHAPE(2, 2), 2, VALS(-2.5, -1.5, -0.5, 0.5), 0);
    expect_values(tgc_add(s, s), TGC_F32, NULL, 0, VALS(5), 0);
}

static void test_size_one_dims_stay_when_both_sides_have_size_one(void **state)
{
    (void)state;
    tgc_tensor *a = iota(SHAPE(1, 3, 1), 3, TGC_F32);
    tgc_tensor *b = f32s((const float[]){100}, SHAPE(1, 1, 1), 3);
    expect_values(tgc_add(a, b), TGC_F32, SHAPE(1, 3, 1), 3, VALS(100, 101, 102), 0);
}

static void test_empty_operand_gives_empty_result_of_the_broadcast_shape(void **state)
{
    (void)state;
    tgc_tensor *e = tgc_zeros(SHAPE(0, 3), 2, TGC_F32, tgc_cpu());
    tgc_tensor *r = iota(SHAPE(1, 3), 2, TGC_F32);
    expect_values(tgc_add(e, r), TGC_F32, SHAPE(0, 3), 2, NULL, 0);
    expect_values(tgc_exp(e), TGC_F32, SHAPE(0, 3), 2, NULL, 0);
    expect_values(tgc_lt(r, e), TGC_BOOL, SHAPE(0, 3), 2, NULL, 0);
    expect_values(tgc_add_scalar(e, 1), TGC_F32, SHAPE(0, 3), 2, NULL, 0);
    expect_values(tgc_cast(e, TGC_I64), TGC_I64, SHAPE(0, 3), 2, NULL, 0);
}

static void test_golden_binary_ops_broadcast_3d_with_2d(void **state)
{
    (void)state;
    static const struct {
        binary_fn fn;
        const float *a, *want;
    } cases[] = {
        {tgc_add, golden_bin_a, golden_bin_add},
        {tgc_sub, golden_bin_a, golden_bin_sub},
        {tgc_mul, golden_bin_a, golden_bin_mul},
        {tgc_div, golden_bin_a, golden_bin_div},
        {tgc_maximum, golden_bin_a, golden_bin_maximum},
        {tgc_minimum, golden_bin_a, golden_bin_minimum},
        {tgc_pow, golden_bin_pow_a, golden_bin_pow},
    };
    tgc_tensor *b = f32s(golden_bin_b, SHAPE(3, 1), 2);
    for (int k = 0; k < N_OF(cases); k++) {
        tgc_tensor *a = f32s(cases[k].a, SHAPE(2, 3, 4), 3);
        expect_f32(cases[k].fn(a, b), SHAPE(2, 3, 4), 3, cases[k].want, 1e-6);
    }
}

/* ---- non-contiguous inputs ---- */

static void test_binary_reads_a_transposed_input_through_its_strides(void **state)
{
    (void)state;
    tgc_tensor *t = tgc_transpose(iota(SHAPE(3, 2), 2, TGC_F32), 0, 1); /* [[0,2,4],[1,3,5]] */
    tgc_tensor *b = f32s((const float[]){10, 20, 30, 40, 50, 60}, SHAPE(2, 3), 2);
    assert_false(tgc_is_contiguous(t));
    expect_values(tgc_add(t, b), TGC_F32, SHAPE(2, 3), 2, VALS(10, 22, 34, 41, 53, 65), 0);
    expect_values(tgc_sub(t, t), TGC_F32, SHAPE(2, 3), 2, VALS(0, 0, 0, 0, 0, 0), 0);
}

static void test_binary_reads_a_sliced_input_with_a_step(void **state)
{
    (void)state;
    tgc_tensor *s = tgc_slice(iota(SHAPE(10), 1, TGC_F32), 0, 1, 10, 3); /* 1, 4, 7 */
    tgc_tensor *b = f32s((const float[]){2, 3, 4}, SHAPE(3), 1);
    expect_values(tgc_mul(s, b), TGC_F32, SHAPE(3), 1, VALS(2, 12, 28), 0);
}

static void test_binary_reads_an_expanded_input_with_stride_zero(void **state)
{
    (void)state;
    tgc_tensor *col = f32s((const float[]){100, 200}, SHAPE(2, 1), 2);
    tgc_tensor *x = tgc_expand(col, SHAPE(2, 3), 2);
    assert_int_equal(tgc_stride(x, 1), 0);
    expect_values(tgc_add(x, iota(SHAPE(2, 3), 2, TGC_F32)), TGC_F32, SHAPE(2, 3), 2,
                  VALS(100, 101, 102, 203, 204, 205), 0);
    expect_values(tgc_eq(x, tgc_contiguous(x)), TGC_BOOL, SHAPE(2, 3), 2,
                  VALS(1, 1, 1, 1, 1, 1), 0);
}

static void test_unary_on_a_permuted_view_equals_unary_on_its_contiguous_copy(void **state)
{
    (void)state;
    static const int perm[3] = {2, 0, 1};
    tgc_tensor *x = tgc_add_scalar(iota(SHAPE(3, 4, 5), 3, TGC_F32), -30);
    tgc_tensor *v = tgc_permute(tgc_mul_scalar(x, 0.1), perm, 3);
    tgc_tensor *c = tgc_contiguous(v);
    static const unary_fn fns[] = {tgc_exp, tgc_tanh, tgc_gelu, tgc_relu, tgc_neg};
    for (int k = 0; k < N_OF(fns); k++) {
        double *want = values_of(fns[k](c));
        tgc_tensor *got = fns[k](v);
        expect_values(got, TGC_F32, SHAPE(5, 3, 4), 3, want, 0);
        free(want);
    }
}

/* Rows longer than the kernels' block size, with a row and a column broadcast. */
static void test_long_broadcast_rows_cross_block_boundaries(void **state)
{
    (void)state;
    enum { N = 1000 };
    double *want = malloc(sizeof(double) * 3 * N);
    assert_non_null(want);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < N; i++)
            want[r * N + i] = i + 1e4 * r;
    tgc_tensor *row = iota(SHAPE(N), 1, TGC_F32);
    tgc_tensor *col = f32s((const float[]){0, 1e4f, 2e4f}, SHAPE(3, 1), 2);
    expect_values(tgc_add(row, col), TGC_F32, SHAPE(3, N), 2, want, 0);
    expect_values(tgc_add(tgc_cast(row, TGC_F64), col), TGC_F64, SHAPE(3, N), 2, want, 0);
    free(want);
}

/* The f32 kernels give exactly the double-precision result rounded once to f32. */
static void test_f32_results_are_the_double_results_rounded_once(void **state)
{
    (void)state;
    tgc_tensor *x = f32s(golden_bin_a, SHAPE(2, 3, 4), 3);
    tgc_tensor *y = tgc_transpose(f32s(golden_bin_pow_a, SHAPE(2, 4, 3), 3), 1, 2);
    tgc_tensor *xd = tgc_cast(x, TGC_F64), *yd = tgc_cast(y, TGC_F64);
    static const binary_fn bins[] = {tgc_add, tgc_sub, tgc_mul, tgc_div, tgc_pow,
                                     tgc_maximum, tgc_minimum};
    for (int k = 0; k < N_OF(bins); k++) {
        double *want = values_of(tgc_cast(bins[k](yd, xd), TGC_F32));
        expect_values(bins[k](y, x), TGC_F32, SHAPE(2, 3, 4), 3, want, 0);
        free(want);
    }
    static const unary_fn uns[] = {tgc_exp, tgc_tanh, tgc_sigmoid, tgc_gelu, tgc_gelu_tanh,
                                   tgc_silu, tgc_erf, tgc_abs, tgc_relu, tgc_neg};
    for (int k = 0; k < N_OF(uns); k++) {
        double *want = values_of(tgc_cast(uns[k](xd), TGC_F32));
        expect_values(uns[k](x), TGC_F32, SHAPE(2, 3, 4), 3, want, 0);
        free(want);
    }
    static const scalar_fn scs[] = {tgc_add_scalar, tgc_sub_scalar, tgc_mul_scalar,
                                    tgc_div_scalar, tgc_pow_scalar};
    for (int k = 0; k < N_OF(scs); k++) {
        double *want = values_of(tgc_cast(scs[k](yd, 0.3), TGC_F32));
        expect_values(scs[k](y, 0.3), TGC_F32, SHAPE(2, 3, 4), 3, want, 0);
        free(want);
    }
}

/* ---- dtypes and promotion ---- */

static void test_i32_plus_i64_gives_i64_and_bool_plus_i32_gives_i32(void **state)
{
    (void)state;
    tgc_tensor *a = from_doubles(VALS(1, -2, 3), SHAPE(3), 1, TGC_I32);
    tgc_tensor *b = from_doubles(VALS(10, 20, 30), SHAPE(3), 1, TGC_I64);
    tgc_tensor *t = from_doubles(VALS(1, 0, 1), SHAPE(3), 1, TGC_BOOL);
    expect_values(tgc_add(a, b), TGC_I64, SHAPE(3), 1, VALS(11, 18, 33), 0);
    expect_values(tgc_add(t, a), TGC_I32, SHAPE(3), 1, VALS(2, -2, 4), 0);
    expect_values(tgc_mul(a, t), TGC_I32, SHAPE(3), 1, VALS(1, 0, 3), 0);
}

static void test_integer_with_float_gives_the_float_dtype(void **state)
{
    (void)state;
    tgc_tensor *i = from_doubles(VALS(1, 2), SHAPE(2), 1, TGC_I64);
    tgc_tensor *h = from_doubles(VALS(0.5, 0.25), SHAPE(2), 1, TGC_F16);
    tgc_tensor *bf = from_doubles(VALS(0.5, 0.25), SHAPE(2), 1, TGC_BF16);
    tgc_tensor *f = from_doubles(VALS(0.5, 0.25), SHAPE(2), 1, TGC_F32);
    expect_values(tgc_add(i, h), TGC_F16, SHAPE(2), 1, VALS(1.5, 2.25), 0);
    expect_values(tgc_add(bf, i), TGC_BF16, SHAPE(2), 1, VALS(1.5, 2.25), 0);
    expect_values(tgc_add(i, f), TGC_F32, SHAPE(2), 1, VALS(1.5, 2.25), 0);
    expect_values(tgc_mul(h, bf), TGC_F32, SHAPE(2), 1, VALS(0.25, 0.0625), 0);
}

static void test_f32_with_f64_gives_f64_without_losing_precision(void **state)
{
    (void)state;
    tgc_tensor *a = from_doubles(VALS(1), SHAPE(1), 1, TGC_F32);
    tgc_tensor *b = from_doubles(VALS(1e-12), SHAPE(1), 1, TGC_F64);
    tgc_tensor *r = tgc_add(a, b);
    double got;
    assert_non_null(r);
    assert_int_equal(tgc_dtype_of(r), TGC_F64);
    assert_int_equal(tgc_copy_to_host(r, &got, sizeof got), TGC_OK);
    assert_true(got == 1.0 + 1e-12);
}

static void test_div_of_integers_is_true_division_in_f32(void **state)
{
    (void)state;
    tgc_tensor *a = from_doubles(VALS(7, -7, 1, 0), SHAPE(4), 1, TGC_I32);
    tgc_tensor *b = from_doubles(VALS(2, 2, 0, 0), SHAPE(4), 1, TGC_I32);
    expect_values(tgc_div(a, b), TGC_F32, SHAPE(4), 1, VALS(3.5, -3.5, INFINITY, NAN), 0);
    expect_values(tgc_div_scalar(a, 2), TGC_F32, SHAPE(4), 1, VALS(3.5, -3.5, 0.5, 0), 0);
}

static void test_i64_arithmetic_is_exact_beyond_2_pow_53(void **state)
{
    (void)state;
    const int64_t big = ((int64_t)1 << 53) + 1;
    tgc_tensor *a = i64s((const int64_t[]){big, -big, big}, SHAPE(3), 1);
    tgc_tensor *b = i64s((const int64_t[]){2, 0, big}, SHAPE(3), 1);
    expect_i64_exact(tgc_add(a, b), (const int64_t[]){big + 2, -big, 2 * big}, 3);
    expect_i64_exact(tgc_maximum(a, b), (const int64_t[]){big, 0, big}, 3);
    expect_i64_exact(tgc_add_scalar(a, 1), (const int64_t[]){big + 1, 1 - big, big + 1}, 3);
    expect_i64_exact(tgc_neg(a), (const int64_t[]){-big, big, -big}, 3);
    expect_values(tgc_gt(a, tgc_sub_scalar(a, 1)), TGC_BOOL, SHAPE(3), 1, VALS(1, 1, 1), 0);
}

static void test_i32_overflow_wraps_like_pytorch(void **state)
{
    (void)state;
    tgc_tensor *a = from_doubles(VALS(2147483647, -2147483647 - 1.0), SHAPE(2), 1, TGC_I32);
    tgc_tensor *one = from_doubles(VALS(1), SHAPE(1), 1, TGC_I32);
    expect_values(tgc_add(a, one), TGC_I32, SHAPE(2), 1, VALS(-2147483647 - 1.0, -2147483647), 0);
}

static void test_pow_of_integers_stays_integer(void **state)
{
    (void)state;
    tgc_tensor *a = from_doubles(VALS(2, 3, -2), SHAPE(3), 1, TGC_I32);
    tgc_tensor *b = from_doubles(VALS(10, 2, 3), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_pow(a, b), TGC_I32, SHAPE(3), 1, VALS(1024, 9, -8), 0);
    expect_values(tgc_pow_scalar(a, 2), TGC_I32, SHAPE(3), 1, VALS(4, 9, 4), 0);
}

static void test_half_results_are_rounded_to_their_dtype(void **state)
{
    (void)state;
    /* 1 + 2^-12 is below half an ulp of 1 in f16 (2^-11) and in bf16 (2^-8). */
    tgc_tensor *h = from_doubles(VALS(1, 3), SHAPE(2), 1, TGC_F16);
    tgc_tensor *bf = from_doubles(VALS(1, 3), SHAPE(2), 1, TGC_BF16);
    expect_values(tgc_add_scalar(h, 1.0 / 4096), TGC_F16, SHAPE(2), 1, VALS(1, 3), 0);
    expect_values(tgc_add_scalar(bf, 1.0 / 4096), TGC_BF16, SHAPE(2), 1, VALS(1, 3), 0);
    expect_values(tgc_div(h, from_doubles(VALS(3), SHAPE(1), 1, TGC_F16)), TGC_F16, SHAPE(2), 1,
                  VALS(0.333251953125, 1), 0);
    expect_values(tgc_sqrt(bf), TGC_BF16, SHAPE(2), 1, VALS(1, 1.734375), 0);
}

static void test_maximum_and_minimum_propagate_nan(void **state)
{
    (void)state;
    tgc_tensor *a = f32s((const float[]){NAN, 1, 5, -INFINITY}, SHAPE(4), 1);
    tgc_tensor *b = f32s((const float[]){1, NAN, 2, 0}, SHAPE(4), 1);
    expect_values(tgc_maximum(a, b), TGC_F32, SHAPE(4), 1, VALS(NAN, NAN, 5, 0), 0);
    expect_values(tgc_minimum(a, b), TGC_F32, SHAPE(4), 1, VALS(NAN, NAN, 2, -INFINITY), 0);
    tgc_tensor *ad = tgc_cast(a, TGC_F64);
    expect_values(tgc_maximum(ad, b), TGC_F64, SHAPE(4), 1, VALS(NAN, NAN, 5, 0), 0);
}

/* ---- comparisons ---- */

static void test_comparisons_return_bool_and_broadcast(void **state)
{
    (void)state;
    tgc_tensor *a = f32s((const float[]){1, 2, 3}, SHAPE(3), 1);
    tgc_tensor *b = from_doubles(VALS(2, 1), SHAPE(2, 1), 2, TGC_I32);
    static const struct {
        binary_fn fn;
        double want[6];
    } cases[] = {
        {tgc_eq, {0, 1, 0, 1, 0, 0}}, {tgc_ne, {1, 0, 1, 0, 1, 1}},
        {tgc_lt, {1, 0, 0, 0, 0, 0}}, {tgc_le, {1, 1, 0, 1, 0, 0}},
        {tgc_gt, {0, 0, 1, 0, 1, 1}}, {tgc_ge, {0, 1, 1, 1, 1, 1}},
    };
    for (int k = 0; k < N_OF(cases); k++)
        expect_values(cases[k].fn(a, b), TGC_BOOL, SHAPE(2, 3), 2, cases[k].want, 0);
}

static void test_comparison_with_nan_is_false_except_ne(void **state)
{
    (void)state;
    tgc_tensor *a = f32s((const float[]){NAN, NAN}, SHAPE(2), 1);
    tgc_tensor *b = f32s((const float[]){NAN, 1}, SHAPE(2), 1);
    expect_values(tgc_eq(a, b), TGC_BOOL, SHAPE(2), 1, VALS(0, 0), 0);
    expect_values(tgc_ne(a, b), TGC_BOOL, SHAPE(2), 1, VALS(1, 1), 0);
    expect_values(tgc_lt(a, b), TGC_BOOL, SHAPE(2), 1, VALS(0, 0), 0);
    expect_values(tgc_ge(a, b), TGC_BOOL, SHAPE(2), 1, VALS(0, 0), 0);
}

/* As in PyTorch the i64 is cast to the common dtype f32 first: 2^24 + 1 becomes 2^24. */
static void test_integer_compared_with_f32_compares_in_f32(void **state)
{
    (void)state;
    tgc_tensor *i = i64s((const int64_t[]){16777217, 3}, SHAPE(2), 1);
    tgc_tensor *f = f32s((const float[]){16777216, 3.5f}, SHAPE(2), 1);
    expect_values(tgc_eq(i, f), TGC_BOOL, SHAPE(2), 1, VALS(1, 0), 0);
    expect_values(tgc_lt(i, f), TGC_BOOL, SHAPE(2), 1, VALS(0, 1), 0);
}

/* ---- where ---- */

static void test_where_picks_a_where_cond_holds_with_broadcasting(void **state)
{
    (void)state;
    tgc_tensor *cond = from_doubles(VALS(1, 0), SHAPE(2, 1), 2, TGC_BOOL);
    tgc_tensor *a = f32s((const float[]){1, 2, 3}, SHAPE(3), 1);
    tgc_tensor *b = f32s((const float[]){-1}, NULL, 0);
    expect_values(tgc_where(cond, a, b), TGC_F32, SHAPE(2, 3), 2, VALS(1, 2, 3, -1, -1, -1), 0);
    tgc_tensor *c3 = tgc_gt(a, f32s((const float[]){1.5f}, NULL, 0)); /* 0, 1, 1 */
    expect_values(tgc_where(c3, a, b), TGC_F32, SHAPE(3), 1, VALS(-1, 2, 3), 0);
}

static void test_where_promotes_its_branches(void **state)
{
    (void)state;
    const int64_t big = ((int64_t)1 << 60) + 7;
    tgc_tensor *cond = from_doubles(VALS(1, 0), SHAPE(2), 1, TGC_BOOL);
    tgc_tensor *i = from_doubles(VALS(4, 5), SHAPE(2), 1, TGC_I32);
    tgc_tensor *f = from_doubles(VALS(0.5, 0.25), SHAPE(2), 1, TGC_F32);
    expect_values(tgc_where(cond, i, f), TGC_F32, SHAPE(2), 1, VALS(4, 0.25), 0);
    tgc_tensor *l = i64s((const int64_t[]){big, -big}, SHAPE(2), 1);
    expect_i64_exact(tgc_where(cond, l, i), (const int64_t[]){big, 5}, 2);
}

static void test_where_rejects_a_non_bool_condition(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1, 0}, SHAPE(2), 1);
    expect_error(tgc_where(x, x, x), TGC_ERR_DTYPE, "tgc_where");
}

/* ---- scalar forms ---- */

static void test_scalar_ops_apply_the_scalar_to_every_element(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){1, 2, 4}, SHAPE(3), 1);
    expect_values(tgc_add_scalar(x, 0.5), TGC_F32, SHAPE(3), 1, VALS(1.5, 2.5, 4.5), 0);
    expect_values(tgc_sub_scalar(x, 0.5), TGC_F32, SHAPE(3), 1, VALS(0.5, 1.5, 3.5), 0);
    expect_values(tgc_mul_scalar(x, -2), TGC_F32, SHAPE(3), 1, VALS(-2, -4, -8), 0);
    expect_values(tgc_div_scalar(x, 4), TGC_F32, SHAPE(3), 1, VALS(0.25, 0.5, 1), 0);
    expect_values(tgc_pow_scalar(x, 0.5), TGC_F32, SHAPE(3), 1, VALS(1, M_SQRT2, 2), 1e-7);
    expect_values(tgc_pow_scalar(x, -1), TGC_F32, SHAPE(3), 1, VALS(1, 0.5, 0.25), 0);
}

static void test_integral_scalar_keeps_the_integer_dtype(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(1, -2, 3), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_add_scalar(x, 3), TGC_I32, SHAPE(3), 1, VALS(4, 1, 6), 0);
    expect_values(tgc_sub_scalar(x, -1), TGC_I32, SHAPE(3), 1, VALS(2, -1, 4), 0);
    expect_values(tgc_mul_scalar(x, 4), TGC_I32, SHAPE(3), 1, VALS(4, -8, 12), 0);
}

static void test_fractional_scalar_turns_an_integer_tensor_into_f32(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(1, 2), SHAPE(2), 1, TGC_I64);
    tgc_tensor *t = from_doubles(VALS(1, 0), SHAPE(2), 1, TGC_BOOL);
    expect_values(tgc_add_scalar(x, 0.5), TGC_F32, SHAPE(2), 1, VALS(1.5, 2.5), 0);
    expect_values(tgc_mul_scalar(t, 1.5), TGC_F32, SHAPE(2), 1, VALS(1.5, 0), 0);
}

static void test_clamp_limits_both_sides_and_keeps_nan(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){-2, 0.5f, 3, NAN}, SHAPE(4), 1);
    expect_values(tgc_clamp(x, -1, 1), TGC_F32, SHAPE(4), 1, VALS(-1, 0.5, 1, NAN), 0);
    expect_values(tgc_clamp(x, 0, INFINITY), TGC_F32, SHAPE(4), 1, VALS(0, 0.5, 3, NAN), 0);
    /* lo > hi: every element becomes hi, as in PyTorch */
    expect_values(tgc_clamp(x, 2, 1), TGC_F32, SHAPE(4), 1, VALS(1, 1, 1, NAN), 0);
    expect_values(tgc_clamp(x, NAN, 1), TGC_F32, SHAPE(4), 1, VALS(NAN, NAN, NAN, NAN), 0);
}

static void test_clamp_of_integers_keeps_them_integer(void **state)
{
    (void)state;
    const int64_t big = ((int64_t)1 << 62) + 3;
    tgc_tensor *x = from_doubles(VALS(-5, 3, 7), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_clamp(x, -1, 5), TGC_I32, SHAPE(3), 1, VALS(-1, 3, 5), 0);
    expect_values(tgc_clamp(x, 0, INFINITY), TGC_I32, SHAPE(3), 1, VALS(0, 3, 7), 0);
    expect_values(tgc_clamp(x, -0.5, 4.5), TGC_F32, SHAPE(3), 1, VALS(-0.5, 3, 4.5), 0);
    tgc_tensor *l = i64s((const int64_t[]){big, -big}, SHAPE(2), 1);
    expect_i64_exact(tgc_clamp(l, -INFINITY, INFINITY), (const int64_t[]){big, -big}, 2);
}

/* ---- unary ---- */

static void test_golden_unary_math_matches_reference_values(void **state)
{
    (void)state;
    static const struct {
        unary_fn fn;
        const float *x, *want;
    } cases[] = {
        {tgc_exp, golden_unary_x, golden_unary_exp},
        {tgc_tanh, golden_unary_x, golden_unary_tanh},
        {tgc_sigmoid, golden_unary_x, golden_unary_sigmoid},
        {tgc_gelu, golden_unary_x, golden_unary_gelu},
        {tgc_gelu_tanh, golden_unary_x, golden_unary_gelu_tanh},
        {tgc_silu, golden_unary_x, golden_unary_silu},
        {tgc_erf, golden_unary_x, golden_unary_erf},
        {tgc_log, golden_unary_pos_x, golden_unary_log},
        {tgc_sqrt, golden_unary_pos_x, golden_unary_sqrt},
        {tgc_rsqrt, golden_unary_pos_x, golden_unary_rsqrt},
    };
    const int n = N_OF(golden_unary_x);
    for (int k = 0; k < N_OF(cases); k++) {
        tgc_tensor *x = f32s(cases[k].x, SHAPE(n), 1);
        expect_f32(cases[k].fn(x), SHAPE(n), 1, cases[k].want, 1e-6);
    }
}

static void test_float_math_on_integers_returns_f32(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(0, 1, 4), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_exp(x), TGC_F32, SHAPE(3), 1, VALS(1, M_E, exp(4)), 1e-7);
    expect_values(tgc_sqrt(x), TGC_F32, SHAPE(3), 1, VALS(0, 1, 2), 0);
    expect_values(tgc_sigmoid(from_doubles(VALS(0, 1), SHAPE(2), 1, TGC_BOOL)), TGC_F32, SHAPE(2),
                  1, VALS(0.5, 1 / (1 + exp(-1))), 1e-7);
}

static void test_neg_abs_relu_keep_the_integer_dtype(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(-3, 0, 5), SHAPE(3), 1, TGC_I64);
    expect_values(tgc_neg(x), TGC_I64, SHAPE(3), 1, VALS(3, 0, -5), 0);
    expect_values(tgc_abs(x), TGC_I64, SHAPE(3), 1, VALS(3, 0, 5), 0);
    expect_values(tgc_relu(x), TGC_I64, SHAPE(3), 1, VALS(0, 0, 5), 0);
    tgc_tensor *y = from_doubles(VALS(-7, 7), SHAPE(2), 1, TGC_I32);
    expect_values(tgc_abs(y), TGC_I32, SHAPE(2), 1, VALS(7, 7), 0);
}

static void test_relu_zeroes_negatives_and_keeps_nan(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){-1, 0, 2, NAN, -INFINITY}, SHAPE(5), 1);
    expect_values(tgc_relu(x), TGC_F32, SHAPE(5), 1, VALS(0, 0, 2, NAN, 0), 0);
    expect_values(tgc_abs(x), TGC_F32, SHAPE(5), 1, VALS(1, 0, 2, NAN, INFINITY), 0);
}

static void test_sigmoid_and_silu_saturate_without_nan(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){-1000, 1000}, SHAPE(2), 1);
    expect_values(tgc_sigmoid(x), TGC_F32, SHAPE(2), 1, VALS(0, 1), 0);
    expect_values(tgc_silu(x), TGC_F32, SHAPE(2), 1, VALS(0, 1000), 0);
    expect_values(tgc_tanh(x), TGC_F32, SHAPE(2), 1, VALS(-1, 1), 0);
    expect_values(tgc_gelu(x), TGC_F32, SHAPE(2), 1, VALS(0, 1000), 0);
}

static void test_log_sqrt_rsqrt_at_the_edges_of_their_domains(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){0, -1, INFINITY}, SHAPE(3), 1);
    expect_values(tgc_log(x), TGC_F32, SHAPE(3), 1, VALS(-INFINITY, NAN, INFINITY), 0);
    expect_values(tgc_sqrt(x), TGC_F32, SHAPE(3), 1, VALS(0, NAN, INFINITY), 0);
    expect_values(tgc_rsqrt(x), TGC_F32, SHAPE(3), 1, VALS(INFINITY, NAN, 0), 0);
}

/* ---- cast ---- */

static void test_cast_float_to_integer_truncates_toward_zero(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){2.7f, -2.7f, 0.5f, -0.5f}, SHAPE(4), 1);
    expect_values(tgc_cast(x, TGC_I32), TGC_I32, SHAPE(4), 1, VALS(2, -2, 0, 0), 0);
    expect_values(tgc_cast(x, TGC_I64), TGC_I64, SHAPE(4), 1, VALS(2, -2, 0, 0), 0);
}

static void test_cast_to_bool_is_true_for_nonzero_and_nan(void **state)
{
    (void)state;
    tgc_tensor *x = f32s((const float[]){0, -0.0f, 0.25f, NAN}, SHAPE(4), 1);
    expect_values(tgc_cast(x, TGC_BOOL), TGC_BOOL, SHAPE(4), 1, VALS(0, 0, 1, 1), 0);
    tgc_tensor *i = from_doubles(VALS(0, 5, -1), SHAPE(3), 1, TGC_I32);
    expect_values(tgc_cast(i, TGC_BOOL), TGC_BOOL, SHAPE(3), 1, VALS(0, 1, 1), 0);
    expect_values(tgc_cast(tgc_cast(i, TGC_BOOL), TGC_F32), TGC_F32, SHAPE(3), 1,
                  VALS(0, 1, 1), 0);
}

static void test_cast_rounds_to_half_precision(void **state)
{
    (void)state;
    tgc_tensor *x = from_doubles(VALS(1.0 / 3, 65504, 1e-8), SHAPE(3), 1, TGC_F64);
    expect_values(tgc_cast(x, TGC_F16), TGC_F16, SHAPE(3), 1, VALS(0.333251953125, 65504, 0), 0);
    expect_values(tgc_cast(x, TGC_BF16), TGC_BF16, SHAPE(3), 1, VALS(0.333984375, 65536, 1e-8),
                  1e-2);
}

static void test_cast_between_integers_wraps_and_keeps_exact_values(void **state)
{
    (void)state;
    const int64_t big = ((int64_t)1 << 32) + 5;
    const int64_t exact = ((int64_t)1 << 55) + 1;
    tgc_tensor *x = i64s((const int64_t[]){big, -1, exact}, SHAPE(3), 1);
    tgc_tensor *narrow = tgc_cast(x, TGC_I32);
    expect_values(narrow, TGC_I32, SHAPE(3), 1, VALS(5, -1, 1), 0);
    expect_i64_exact(tgc_cast(narrow, TGC_I64), (const int64_t[]){5, -1, 1}, 3);
    expect_i64_exact(tgc_cast(x, TGC_I64), (const int64_t[]){big, -1, exact}, 3);
}

/* ---- errors ---- */

static void test_mismatched_shapes_fail_with_a_shape_error(void **state)
{
    (void)state;
    tgc_tensor *a = iota(SHAPE(2, 3), 2, TGC_F32);
    tgc_tensor *b = iota(SHAPE(4), 1, TGC_F32);
    expect_error(tgc_add(a, b), TGC_ERR_SHAPE, "tgc_add");
    expect_error(tgc_where(tgc_gt(a, a), a, b), TGC_ERR_SHAPE, "do not broadcast");
    expect_error(tgc_lt(b, a), TGC_ERR_SHAPE, "[4]");
}

static void test_null_input_returns_null_and_keeps_the_first_error(void **state)
{
    (void)state;
    tgc_tensor *a = iota(SHAPE(2), 1, TGC_F32);
    assert_null(tgc_neg(NULL));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
    tgc_tensor *bad = tgc_add(a, iota(SHAPE(3), 1, TGC_F32));
    tgc_tensor *r = tgc_exp(tgc_mul(bad, a));
    assert_null(r);
    expect_error(tgc_add_scalar(r, 1), TGC_ERR_SHAPE, "tgc_add");
    assert_null(tgc_where(NULL, a, a));
    assert_null(tgc_cast(NULL, TGC_F32));
    tgc_clear_error();
}

static void test_interp_pointwise_rejects_ops_it_does_not_implement(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(3), 1, TGC_F32);
    tgc_tensor *out = tgc_empty(SHAPE(3), 1, TGC_F32, tgc_cpu());
    tgc_tensor *two[2] = {x, x};
    tgc_attrs at = {0};
    assert_int_equal(tgc_interp_pointwise(TGC_OP_SUM, &x, 1, &at, out), TGC_ERR_INTERNAL);
    assert_int_equal(tgc_interp_pointwise(TGC_OP_ADD, &x, 1, &at, out), TGC_ERR_INTERNAL);
    tgc_tensor *wide = tgc_empty(SHAPE(4), 1, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_interp_pointwise(TGC_OP_ADD, two, 2, &at, wide), TGC_ERR_INTERNAL);
    assert_int_equal(tgc_interp_pointwise(TGC_OP_ADD, two, 2, &at, out), TGC_OK);
    tgc_clear_error();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, scope_setup, scope_teardown)
    const struct CMUnitTest tests[] = {
        T(test_add_of_same_shape_f32_adds_elementwise),
        T(test_add_broadcasts_a_row_over_every_row),
        T(test_mul_of_column_and_row_is_their_outer_product),
        T(test_broadcast_adds_leading_dims_from_either_side),
        T(test_zero_dim_tensor_broadcasts_as_a_scalar),
        T(test_size_one_dims_stay_when_both_sides_have_size_one),
        T(test_empty_operand_gives_empty_result_of_the_broadcast_shape),
        T(test_golden_binary_ops_broadcast_3d_with_2d),
        T(test_binary_reads_a_transposed_input_through_its_strides),
        T(test_binary_reads_a_sliced_input_with_a_step),
        T(test_binary_reads_an_expanded_input_with_stride_zero),
        T(test_unary_on_a_permuted_view_equals_unary_on_its_contiguous_copy),
        T(test_long_broadcast_rows_cross_block_boundaries),
        T(test_f32_results_are_the_double_results_rounded_once),
        T(test_i32_plus_i64_gives_i64_and_bool_plus_i32_gives_i32),
        T(test_integer_with_float_gives_the_float_dtype),
        T(test_f32_with_f64_gives_f64_without_losing_precision),
        T(test_div_of_integers_is_true_division_in_f32),
        T(test_i64_arithmetic_is_exact_beyond_2_pow_53),
        T(test_i32_overflow_wraps_like_pytorch),
        T(test_pow_of_integers_stays_integer),
        T(test_half_results_are_rounded_to_their_dtype),
        T(test_maximum_and_minimum_propagate_nan),
        T(test_comparisons_return_bool_and_broadcast),
        T(test_comparison_with_nan_is_false_except_ne),
        T(test_integer_compared_with_f32_compares_in_f32),
        T(test_where_picks_a_where_cond_holds_with_broadcasting),
        T(test_where_promotes_its_branches),
        T(test_where_rejects_a_non_bool_condition),
        T(test_scalar_ops_apply_the_scalar_to_every_element),
        T(test_integral_scalar_keeps_the_integer_dtype),
        T(test_fractional_scalar_turns_an_integer_tensor_into_f32),
        T(test_clamp_limits_both_sides_and_keeps_nan),
        T(test_clamp_of_integers_keeps_them_integer),
        T(test_golden_unary_math_matches_reference_values),
        T(test_float_math_on_integers_returns_f32),
        T(test_neg_abs_relu_keep_the_integer_dtype),
        T(test_relu_zeroes_negatives_and_keeps_nan),
        T(test_sigmoid_and_silu_saturate_without_nan),
        T(test_log_sqrt_rsqrt_at_the_edges_of_their_domains),
        T(test_cast_float_to_integer_truncates_toward_zero),
        T(test_cast_to_bool_is_true_for_nonzero_and_nan),
        T(test_cast_rounds_to_half_precision),
        T(test_cast_between_integers_wraps_and_keeps_exact_values),
        T(test_mismatched_shapes_fail_with_a_shape_error),
        T(test_null_input_returns_null_and_keeps_the_first_error),
        T(test_interp_pointwise_rejects_ops_it_does_not_implement),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
