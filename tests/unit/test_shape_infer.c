/* Shape and dtype inference (tgc_infer), called directly with constant and symbolic dims:
 * the result of every op family, the dtype rules of tgc/ops.h, and each error's status and
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ir/shape_infer.h"
#include "tgc/ops.h"

/* ---- helpers ---- */

static tgc_vinfo mk(tgc_dtype dt, int n, const tgc_sdim *d)
{
    tgc_vinfo v = {.dtype = dt, .ndim = n};
    for (int k = 0; k < n; k++)
        v.shape[k] = d[k];
    return v;
}
/* VI(TGC_F32, 2, 3) is an f32 [2, 3]; SCALAR(dt) is 0-d. */
#define VI(dt, ...)                                                                                \
    mk(dt, (int)(sizeof((tgc_sdim[]){__VA_ARGS__}) / sizeof(tgc_sdim)), (tgc_sdim[]){__VA_ARGS__})
#define SCALAR(dt) mk(dt, 0, NULL)

/* Attributes from a list of ints (and optional floats via .f). */
static tgc_attrs ia(int n, const int64_t *v)
{
    tgc_attrs a = {0};
    memcpy(a.i, v, sizeof(int64_t) * (size_t)n);
    a.ni = n;
    return a;
}
#define IA(...)                                                                                    \
    ia((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define NONE ((tgc_attrs){0})

static tgc_symtab *syms;
static tgc_vinfo out;

static int setup(void **state)
{
    (void)state;
    syms = tgc_symtab_create();
    memset(&out, 0, sizeof out);
    tgc_clear_error();
    return syms ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tgc_symtab_free(syms);
    return 0;
}

static tgc_status infer(tgc_op op, const tgc_vinfo *in, int n, tgc_attrs a)
{
    return tgc_infer(op, in, n, &a, syms, &out);
}

/* Eager form: no symbol table, constant dims only. */
static tgc_status infer_eager(tgc_op op, const tgc_vinfo *in, int n, tgc_attrs a)
{
    return tgc_infer(op, in, n, &a, NULL, &out);
}

static void check_out(tgc_dtype dt, const char *shape)
{
    char buf[256];
    tgc_vinfo_format_shape(syms, &out, buf, sizeof buf);
    assert_string_equal(buf, shape);
    assert_int_equal(out.dtype, dt);
}

static void check_error(tgc_status got, tgc_status want, const char *text)
{
    assert_int_equal(got, want);
    assert_int_equal(tgc_last_status(), want);
    if (!strstr(tgc_last_error(), text))
        fail_msg("error \"%s\" lacks \"%s\"", tgc_last_error(), text);
}

/* Value of an output dim when the symbols take vals. */
static int64_t eval_dim(int k, const int64_t *vals)
{
    return tgc_sym_eval(syms, out.shape[k], vals);
}

/* ---- dtype promotion ---- */

static void test_promote_follows_ops_h(void **state)
{
    (void)state;
    assert_int_equal(tgc_promote(TGC_F16, TGC_F16), TGC_F16);
    assert_int_equal(tgc_promote(TGC_BOOL, TGC_I32), TGC_I32);
    assert_int_equal(tgc_promote(TGC_F16, TGC_BOOL), TGC_F16);
    assert_int_equal(tgc_promote(TGC_I32, TGC_I64), TGC_I64);
    assert_int_equal(tgc_promote(TGC_I64, TGC_BF16), TGC_BF16);
    assert_int_equal(tgc_promote(TGC_F16, TGC_BF16), TGC_F32);
    assert_int_equal(tgc_promote(TGC_BF16, TGC_F32), TGC_F32);
    assert_int_equal(tgc_promote(TGC_F64, TGC_F32), TGC_F64);
    assert_true(tgc_dtype_is_float(TGC_BF16));
    assert_false(tgc_dtype_is_float(TGC_I64));
    assert_false(tgc_dtype_is_float(TGC_BOOL));
}

/* ---- elementwise ---- */

static void test_binary_broadcasts_constant_shapes(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_I32, 4, 1, 3), VI(TGC_F16, 2, 1)};
    assert_int_equal(infer_eager(TGC_OP_ADD, in, 2, NONE), TGC_OK);
    check_out(TGC_F16, "[4, 2, 3]");
    in[1] = SCALAR(TGC_I64);
    assert_int_equal(infer_eager(TGC_OP_MUL, in, 2, NONE), TGC_OK);
    check_out(TGC_I64, "[4, 1, 3]");
}

static void test_div_is_true_division_and_compare_is_bool(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_I32, 5), VI(TGC_I64, 5)};
    assert_int_equal(infer_eager(TGC_OP_DIV, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[5]");
    assert_int_equal(infer_eager(TGC_OP_LE, in, 2, NONE), TGC_OK);
    check_out(TGC_BOOL, "[5]");
}

static void test_broadcast_mismatch_names_both_shapes(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_F32, 2, 3), VI(TGC_F32, 4)};
    check_error(infer_eager(TGC_OP_ADD, in, 2, NONE), TGC_ERR_SHAPE,
                "tgc_add: shapes [2, 3] and [4] do not broadcast");
}

static void test_broadcast_symbolic_dims(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 8, 0, 0), s1 = tgc_sym_new(syms, 16, 1, 1);
    tgc_vinfo in[2] = {VI(TGC_F32, s0, 1), VI(TGC_F32, 1, s1)};
    assert_int_equal(infer(TGC_OP_SUB, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[s0, s1]");
    assert_int_equal(tgc_sym_n_assumptions(syms), 0);

    in[1] = VI(TGC_F32, 3);
    assert_int_equal(infer(TGC_OP_SUB, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[s0, 3]");
}

static void test_broadcast_unifies_equal_hints_and_rejects_others(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 8, 0, 0), s1 = tgc_sym_new(syms, 8, 1, 0);
    tgc_sdim s2 = tgc_sym_new(syms, 9, 2, 0);
    tgc_vinfo in[2] = {VI(TGC_F32, s0, 4), VI(TGC_F32, s1, 4)};
    assert_int_equal(infer(TGC_OP_MUL, in, 2, NONE), TGC_OK);
    assert_int_equal(tgc_sym_n_assumptions(syms), 1);

    in[1] = VI(TGC_F32, s2, 4);
    check_error(infer(TGC_OP_MUL, in, 2, NONE), TGC_ERR_SHAPE,
                "tgc_mul: shapes [8, 4] and [9, 4] do not broadcast");
    in[1] = VI(TGC_F32, 5, 4);
    check_error(infer(TGC_OP_MUL, in, 2, NONE), TGC_ERR_SHAPE, "do not broadcast");
}

static void test_where_needs_bool_cond(void **state)
{
    (void)state;
    tgc_vinfo in[3] = {VI(TGC_BOOL, 3, 1), VI(TGC_I32, 4), VI(TGC_F32, 1)};
    assert_int_equal(infer_eager(TGC_OP_WHERE, in, 3, NONE), TGC_OK);
    check_out(TGC_F32, "[3, 4]");
    in[0].dtype = TGC_I32;
    check_error(infer_eager(TGC_OP_WHERE, in, 3, NONE), TGC_ERR_DTYPE,
                "tgc_where: cond must be bool, got i32");
}

static void test_scalar_forms_keep_dtype_unless_fractional(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_I32, 2, 2);
    tgc_attrs a = {.f = {2.0}, .nf = 1};
    assert_int_equal(infer_eager(TGC_OP_ADD_SCALAR, &x, 1, a), TGC_OK);
    check_out(TGC_I32, "[2, 2]");
    a.f[0] = 0.5;
    assert_int_equal(infer_eager(TGC_OP_MUL_SCALAR, &x, 1, a), TGC_OK);
    check_out(TGC_F32, "[2, 2]");
    a.f[0] = 2.0;
    assert_int_equal(infer_eager(TGC_OP_DIV_SCALAR, &x, 1, a), TGC_OK);
    check_out(TGC_F32, "[2, 2]");
    tgc_attrs clamp = {.f = {-INFINITY, 3.0}, .nf = 2};
    assert_int_equal(infer_eager(TGC_OP_CLAMP, &x, 1, clamp), TGC_OK);
    check_out(TGC_I32, "[2, 2]");
}

static void test_unary_float_math_promotes_ints(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_I64, 7);
    assert_int_equal(infer_eager(TGC_OP_EXP, &x, 1, NONE), TGC_OK);
    check_out(TGC_F32, "[7]");
    assert_int_equal(infer_eager(TGC_OP_NEG, &x, 1, NONE), TGC_OK);
    check_out(TGC_I64, "[7]");
    tgc_attrs cast = {.dtype = TGC_BF16};
    assert_int_equal(infer_eager(TGC_OP_CAST, &x, 1, cast), TGC_OK);
    check_out(TGC_BF16, "[7]");
    cast.dtype = TGC_DTYPE_COUNT;
    check_error(infer_eager(TGC_OP_CAST, &x, 1, cast), TGC_ERR_INVALID_ARG, "tgc_cast:");
}

/* ---- reductions ---- */

static void test_reduce_mask_and_keepdim(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 2, 3, 4);
    assert_int_equal(infer_eager(TGC_OP_SUM, &x, 1, IA(0x5, 0)), TGC_OK);
    check_out(TGC_F32, "[3]");
    assert_int_equal(infer_eager(TGC_OP_MEAN, &x, 1, IA(0x5, 1)), TGC_OK);
    check_out(TGC_F32, "[1, 3, 1]");
    assert_int_equal(infer_eager(TGC_OP_VAR, &x, 1, IA(0x7, 0, 1)), TGC_OK);
    check_out(TGC_F32, "[]");
    assert_int_equal(infer_eager(TGC_OP_ARGMAX, &x, 1, IA(1, 0)), TGC_OK);
    check_out(TGC_I64, "[2, 4]");
}

static void test_reduce_dtypes(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_BOOL, 5);
    assert_int_equal(infer_eager(TGC_OP_SUM, &x, 1, IA(1, 0)), TGC_OK);
    check_out(TGC_I64, "[]");
    x.dtype = TGC_I32;
    assert_int_equal(infer_eager(TGC_OP_MEAN, &x, 1, IA(1, 0)), TGC_OK);
    check_out(TGC_F32, "[]");
    assert_int_equal(infer_eager(TGC_OP_MAX, &x, 1, IA(1, 0)), TGC_OK);
    check_out(TGC_I32, "[]");
    assert_int_equal(infer_eager(TGC_OP_SOFTMAX, &x, 1, IA(0)), TGC_OK);
    check_out(TGC_F32, "[5]");
}

static void test_reduce_errors(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 3, 0);
    check_error(infer_eager(TGC_OP_MAX, &x, 1, IA(0x2, 0)), TGC_ERR_SHAPE,
                "tgc_max: cannot reduce over the empty dim 1 of [3, 0]");
    check_error(infer_eager(TGC_OP_ARGMAX, &x, 1, IA(1, 0)), TGC_ERR_SHAPE, "tgc_argmax:");
    assert_int_equal(infer_eager(TGC_OP_SUM, &x, 1, IA(0x2, 0)), TGC_OK);
    check_out(TGC_F32, "[3]");
    check_error(infer_eager(TGC_OP_SUM, &x, 1, IA(0x4, 0)), TGC_ERR_INVALID_ARG,
                "tgc_sum: dims mask 0x4 names dims beyond a 2-d tensor");
    check_error(infer_eager(TGC_OP_VAR, &x, 1, IA(0x1, 0, -1)), TGC_ERR_INVALID_ARG,
                "correction must be >= 0");
}

static void test_reduce_symbolic_keeps_other_dims(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 32, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0, 10);
    assert_int_equal(infer(TGC_OP_SUM, &x, 1, IA(0x2, 1)), TGC_OK);
    check_out(TGC_F32, "[s0, 1]");
}

/* ---- views ---- */

static void test_reshape_onnx_rules(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 2, 3, 4);
    assert_int_equal(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(0, -1)), TGC_OK);
    check_out(TGC_F32, "[2, 12]");
    assert_int_equal(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(-1)), TGC_OK);
    check_out(TGC_F32, "[24]");
    assert_int_equal(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(4, 0, 2)), TGC_OK);
    check_out(TGC_F32, "[4, 3, 2]");
}

static void test_reshape_errors(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 2, 3);
    check_error(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(4, -1)), TGC_ERR_SHAPE,
                "tgc_reshape: cannot reshape [2, 3] (6 elements) into [4, -1]");
    check_error(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(5)), TGC_ERR_SHAPE, "into [5]");
    check_error(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(-1, -1)), TGC_ERR_INVALID_ARG,
                "only one dim may be -1");
    check_error(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(6, 1, 0)), TGC_ERR_INVALID_ARG,
                "0 at position 2");
    check_error(infer_eager(TGC_OP_RESHAPE, &x, 1, IA(-2, 3)), TGC_ERR_INVALID_ARG,
                "invalid size -2");
}

static void test_reshape_infers_over_symbolic_batch(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 64, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0, 1, 28, 28);
    assert_int_equal(infer(TGC_OP_RESHAPE, &x, 1, IA(-1, 784)), TGC_OK);
    check_out(TGC_F32, "[s0, 784]");
    assert_int_equal(infer(TGC_OP_RESHAPE, &x, 1, IA(0, -1)), TGC_OK);
    check_out(TGC_F32, "[s0, 784]");
    assert_int_equal(infer(TGC_OP_RESHAPE, &x, 1, IA(-1, 14, 2, 28)), TGC_OK);
    check_out(TGC_F32, "[s0, 14, 2, 28]");
    assert_int_equal(tgc_sym_n_assumptions(syms), 0);
}

static void test_reshape_inexact_symbolic_split_is_assumed(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 10, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0, 6);
    assert_int_equal(infer(TGC_OP_RESHAPE, &x, 1, IA(-1, 4)), TGC_OK);
    const int64_t at10[] = {10}, at14[] = {14};
    assert_int_equal(eval_dim(0, at10), 15);
    assert_int_equal(eval_dim(0, at14), 21);
    assert_int_equal(tgc_sym_n_assumptions(syms), 1); /* s0*6 divisible by 4 */

    tgc_sdim s1 = tgc_sym_new(syms, 7, 1, 0);
    x = VI(TGC_F32, s1, 6);
    check_error(infer(TGC_OP_RESHAPE, &x, 1, IA(-1, 4)), TGC_ERR_SHAPE, "cannot reshape [7, 6]");
}

static void test_permute_expand_squeeze_unsqueeze(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 5, 0, 0);
    tgc_vinfo x = VI(TGC_F16, s0, 1, 3);
    assert_int_equal(infer(TGC_OP_PERMUTE, &x, 1, IA(2, 0, 1)), TGC_OK);
    check_out(TGC_F16, "[3, s0, 1]");
    check_error(infer(TGC_OP_PERMUTE, &x, 1, IA(0, 0, 1)), TGC_ERR_INVALID_ARG,
                "tgc_permute: perm is not a permutation of 0..2");
    assert_int_equal(infer(TGC_OP_EXPAND, &x, 1, IA(2, -1, 4, -1)), TGC_OK);
    check_out(TGC_F16, "[2, s0, 4, 3]");
    check_error(infer(TGC_OP_EXPAND, &x, 1, IA(-1, 1, 5)), TGC_ERR_SHAPE,
                "tgc_expand: cannot expand dim 2 of [5, 1, 3] (size 3) to 5");
    assert_int_equal(infer(TGC_OP_SQUEEZE, &x, 1, IA(TGC_ALL_DIMS)), TGC_OK);
    check_out(TGC_F16, "[s0, 3]");
    assert_int_equal(infer(TGC_OP_SQUEEZE, &x, 1, IA(0)), TGC_OK);
    check_out(TGC_F16, "[s0, 1, 3]");
    assert_int_equal(infer(TGC_OP_UNSQUEEZE, &x, 1, IA(3)), TGC_OK);
    check_out(TGC_F16, "[s0, 1, 3, 1]");
}

static void test_slice_python_rules(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 4, 10);
    assert_int_equal(infer_eager(TGC_OP_SLICE, &x, 1, IA(1, 2, -1, 3)), TGC_OK);
    check_out(TGC_F32, "[4, 3]");
    assert_int_equal(infer_eager(TGC_OP_SLICE, &x, 1, IA(1, -100, 100, 1)), TGC_OK);
    check_out(TGC_F32, "[4, 10]");
    assert_int_equal(infer_eager(TGC_OP_SLICE, &x, 1, IA(0, 3, 1, 1)), TGC_OK);
    check_out(TGC_F32, "[0, 10]");
    check_error(infer_eager(TGC_OP_SLICE, &x, 1, IA(0, 0, 4, 0)), TGC_ERR_INVALID_ARG,
                "tgc_slice: step must be positive, got 0");
}

static void test_slice_symbolic_whole_dim_stays_symbolic(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 9, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0);
    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(0, 0, INT64_MAX, 2)), TGC_OK);
    const int64_t at9[] = {9};
    assert_int_equal(eval_dim(0, at9), 5);
    assert_int_equal(tgc_sym_n_assumptions(syms), 0);

    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(0, 1, 5, 1)), TGC_OK);
    check_out(TGC_F32, "[4]");
    assert_int_equal(tgc_sym_n_assumptions(syms), 1); /* guarded: s0 >= 5 (the end fits) */
}

static void test_flatten_symbolic(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 4, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0, 3, 5);
    assert_int_equal(infer(TGC_OP_FLATTEN, &x, 1, IA(1, 2)), TGC_OK);
    check_out(TGC_F32, "[s0, 15]");
    assert_int_equal(infer(TGC_OP_FLATTEN, &x, 1, IA(0, 1)), TGC_OK);
    const int64_t at6[] = {6};
    assert_int_equal(out.ndim, 2);
    assert_int_equal(eval_dim(0, at6), 18);
    x = SCALAR(TGC_F32);
    assert_int_equal(infer(TGC_OP_FLATTEN, &x, 1, IA(0, 0)), TGC_OK);
    check_out(TGC_F32, "[1]");
}

/* ---- movement and indexing ---- */

static void test_cat_stack_pad(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 4, 0, 0), s1 = tgc_sym_new(syms, 6, 1, 0);
    tgc_vinfo in[3] = {VI(TGC_F32, s0, 3), VI(TGC_I32, s1, 3), VI(TGC_F32, 2, 3)};
    assert_int_equal(infer(TGC_OP_CAT, in, 3, IA(0)), TGC_OK);
    const int64_t v[] = {5, 7};
    assert_int_equal(out.dtype, TGC_F32);
    assert_int_equal(eval_dim(0, v), 14);
    check_error(infer(TGC_OP_CAT, in, 3, IA(1)), TGC_ERR_SHAPE,
                "tgc_cat: input 1 is [6, 3] but input 0 is [4, 3]");

    tgc_vinfo same[2] = {VI(TGC_F32, 2, 3), VI(TGC_F32, 2, 3)};
    assert_int_equal(infer(TGC_OP_STACK, same, 2, IA(2)), TGC_OK);
    check_out(TGC_F32, "[2, 3, 2]");

    tgc_vinfo x = VI(TGC_F32, 2, 3, 4);
    assert_int_equal(infer(TGC_OP_PAD, &x, 1, IA(2, 1, 1, 0, 2)), TGC_OK);
    check_out(TGC_F32, "[2, 5, 6]");
    check_error(infer(TGC_OP_PAD, &x, 1, IA(1, -3, -2)), TGC_ERR_SHAPE, "tgc_pad:");
}

static void test_indexing(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 8, 0, 0);
    tgc_vinfo emb[2] = {VI(TGC_F32, 100, 16), VI(TGC_I64, s0, 7)};
    assert_int_equal(infer(TGC_OP_EMBEDDING, emb, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[s0, 7, 16]");
    emb[1].dtype = TGC_F32;
    check_error(infer(TGC_OP_EMBEDDING, emb, 2, NONE), TGC_ERR_DTYPE,
                "tgc_embedding: idx must be i32 or i64, got f32");

    tgc_vinfo sel[2] = {VI(TGC_F16, 5, 6), VI(TGC_I32, 3)};
    assert_int_equal(infer(TGC_OP_INDEX_SELECT, sel, 2, IA(1)), TGC_OK);
    check_out(TGC_F16, "[5, 3]");

    tgc_vinfo g[2] = {VI(TGC_F32, 5, 6), VI(TGC_I64, 2, 6)};
    assert_int_equal(infer(TGC_OP_GATHER, g, 2, IA(0)), TGC_OK);
    check_out(TGC_F32, "[2, 6]");
    g[1] = VI(TGC_I64, 2, 7);
    check_error(infer(TGC_OP_GATHER, g, 2, IA(0)), TGC_ERR_SHAPE, "tgc_gather:");
}

/* ---- linear algebra ---- */

static void test_matmul_shapes(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_F32, 64, 512), VI(TGC_F32, 512, 10)};
    assert_int_equal(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[64, 10]");
    in[0] = VI(TGC_F32, 2, 1, 3, 4);
    in[1] = VI(TGC_F32, 5, 4, 6);
    assert_int_equal(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[2, 5, 3, 6]");
    in[0] = VI(TGC_F32, 4);
    assert_int_equal(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[5, 6]");
    in[1] = VI(TGC_F32, 4);
    assert_int_equal(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_OK);
    check_out(TGC_F32, "[]");
}

static void test_matmul_errors(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_F32, 64, 512), VI(TGC_F32, 256, 10)};
    check_error(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_ERR_SHAPE,
                "tgc_matmul: inner dims differ: a is [64, 512], b is [256, 10]");
    in[1] = VI(TGC_F16, 512, 10);
    check_error(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_ERR_DTYPE,
                "tgc_matmul: dtypes differ: a is f32, b is f16");
    in[0].dtype = TGC_I32;
    check_error(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_ERR_DTYPE,
                "a must be a float tensor, got i32");
    in[0] = VI(TGC_F32, 2, 3, 4);
    in[1] = VI(TGC_F32, 5, 4, 6);
    check_error(infer_eager(TGC_OP_MATMUL, in, 2, NONE), TGC_ERR_SHAPE,
                "batch dims do not broadcast");
}

static void test_linear_symbolic_batch(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 64, 0, 0);
    tgc_vinfo in[3] = {VI(TGC_F32, s0, 784), VI(TGC_F32, 128, 784), VI(TGC_F32, 128)};
    assert_int_equal(infer(TGC_OP_LINEAR, in, 3, NONE), TGC_OK);
    check_out(TGC_F32, "[s0, 128]");
    in[2] = VI(TGC_F32, 64);
    check_error(infer(TGC_OP_LINEAR, in, 3, NONE), TGC_ERR_SHAPE,
                "tgc_linear: bias is [64] but weight is [128, 784]");
    in[1] = VI(TGC_F32, 128, 100);
    check_error(infer(TGC_OP_LINEAR, in, 2, NONE), TGC_ERR_SHAPE,
                "tgc_linear: in features differ: x is [64, 784], weight is [128, 100]");
}

/* ---- convolution and pooling ---- */

static void test_conv2d_output_sizes(void **state)
{
    (void)state;
    tgc_vinfo in[3] = {VI(TGC_F32, 8, 3, 32, 32), VI(TGC_F32, 16, 3, 3, 3), VI(TGC_F32, 16)};
    assert_int_equal(infer_eager(TGC_OP_CONV2D, in, 3, IA(1, 1, 1, 1, 1, 1, 1)), TGC_OK);
    check_out(TGC_F32, "[8, 16, 32, 32]");
    assert_int_equal(infer_eager(TGC_OP_CONV2D, in, 2, IA(2, 1, 1, 0, 1, 2, 1)), TGC_OK);
    check_out(TGC_F32, "[8, 16, 16, 28]");
}

static void test_conv2d_groups_and_errors(void **state)
{
    (void)state;
    tgc_vinfo in[2] = {VI(TGC_F32, 1, 4, 8, 8), VI(TGC_F32, 8, 2, 3, 3)};
    assert_int_equal(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, 1, 1, 2)), TGC_OK);
    check_out(TGC_F32, "[1, 8, 6, 6]");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, 1, 1, 1)), TGC_ERR_SHAPE,
                "tgc_conv2d: weight [8, 2, 3, 3] expects 2*1 input channels, x is [1, 4, 8, 8]");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, 1, 1, 3)), TGC_ERR_SHAPE,
                "groups (3) must divide");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, 1, 1, 0)), TGC_ERR_INVALID_ARG,
                "tgc_conv2d: groups must be >= 1, got 0");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(0, 1, 0, 0, 1, 1, 2)), TGC_ERR_INVALID_ARG,
                "stride must be >= 1");
    in[1] = VI(TGC_F32, 8, 2, 9, 3);
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, 1, 1, 2)), TGC_ERR_SHAPE,
                "the height window (9 with dilation 1) is larger than the padded input");
}

static void test_conv2d_symbolic_sizes(void **state)
{
    (void)state;
    tgc_sdim n = tgc_sym_new(syms, 8, 0, 0), h = tgc_sym_new(syms, 32, 0, 2);
    tgc_vinfo in[2] = {VI(TGC_F32, n, 3, h, 32), VI(TGC_F32, 16, 3, 3, 3)};
    assert_int_equal(infer(TGC_OP_CONV2D, in, 2, IA(2, 2, 1, 1, 1, 1, 1)), TGC_OK);
    assert_int_equal(out.shape[0], n);
    assert_int_equal(out.shape[1], 16);
    assert_int_equal(out.shape[3], 16);
    const int64_t h32[] = {8, 32}, h33[] = {8, 33}, h7[] = {8, 7};
    assert_int_equal(eval_dim(2, h32), 16);
    assert_int_equal(eval_dim(2, h33), 17);
    assert_int_equal(eval_dim(2, h7), 4);
    /* stride 1, padding 1, kernel 3 keeps the size: the expression folds back to h */
    assert_int_equal(infer(TGC_OP_CONV2D, in, 2, IA(1, 1, 1, 1, 1, 1, 1)), TGC_OK);
    assert_int_equal(out.shape[2], h);
}

static void test_pools(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 16, 0, 0);
    tgc_vinfo x = VI(TGC_F32, s0, 3, 32, 31);
    assert_int_equal(infer(TGC_OP_MAX_POOL2D, &x, 1, IA(2, 2, 2, 2, 0, 0)), TGC_OK);
    check_out(TGC_F32, "[s0, 3, 16, 15]");
    assert_int_equal(infer(TGC_OP_AVG_POOL2D, &x, 1, IA(3, 3, 1, 1, 1, 1)), TGC_OK);
    check_out(TGC_F32, "[s0, 3, 32, 31]");
    assert_int_equal(infer(TGC_OP_ADAPTIVE_AVG_POOL2D, &x, 1, IA(1, 1)), TGC_OK);
    check_out(TGC_F32, "[s0, 3, 1, 1]");
    check_error(infer(TGC_OP_MAX_POOL2D, &x, 1, IA(2, 2, 2, 2, 2, 0)), TGC_ERR_INVALID_ARG,
                "tgc_max_pool2d: padding (2, 0) must be at most half the kernel (2, 2)");
    check_error(infer(TGC_OP_ADAPTIVE_AVG_POOL2D, &x, 1, IA(0, 1)), TGC_ERR_INVALID_ARG,
                "output size must be >= 1");
    x = VI(TGC_F32, 1, 3, 2, 2);
    check_error(infer(TGC_OP_AVG_POOL2D, &x, 1, IA(3, 3, 1, 1, 0, 0)), TGC_ERR_SHAPE,
                "tgc_avg_pool2d: the height window");
    x.dtype = TGC_I32;
    check_error(infer(TGC_OP_MAX_POOL2D, &x, 1, IA(2, 2, 2, 2, 0, 0)), TGC_ERR_DTYPE,
                "x must be a float tensor, got i32");
}

/* ---- normalization, losses, attention ---- */

static void test_batch_norm(void **state)
{
    (void)state;
    tgc_vinfo c16 = VI(TGC_F32, 16);
    tgc_vinfo in[5] = {VI(TGC_F32, 8, 16, 4, 4), c16, c16, c16, c16};
    tgc_attrs a = IA(1, TGC_BN_HAS_STATS | TGC_BN_HAS_WEIGHT | TGC_BN_HAS_BIAS);
    a.f[0] = 0.1;
    a.f[1] = 1e-5;
    assert_int_equal(infer_eager(TGC_OP_BATCH_NORM, in, 5, a), TGC_OK);
    check_out(TGC_F32, "[8, 16, 4, 4]");
    in[3] = VI(TGC_F32, 8);
    check_error(infer_eager(TGC_OP_BATCH_NORM, in, 5, a), TGC_ERR_SHAPE,
                "tgc_batch_norm: weight is [8] but x [8, 16, 4, 4] has 16 channels");
    a.i[0] = 0;
    a.i[1] = TGC_BN_HAS_WEIGHT;
    in[1] = c16;
    check_error(infer_eager(TGC_OP_BATCH_NORM, in, 2, a), TGC_ERR_INVALID_ARG,
                "running_mean and running_var are required when not training");
    a.i[0] = 1;
    in[0] = VI(TGC_F32, 1, 16);
    check_error(infer_eager(TGC_OP_BATCH_NORM, in, 2, a), TGC_ERR_SHAPE,
                "more than 1 value per channel");
    a.i[1] = TGC_BN_HAS_STATS;
    check_error(infer_eager(TGC_OP_BATCH_NORM, in, 2, a), TGC_ERR_INTERNAL, "tgc_batch_norm:");
}

static void test_layer_norm(void **state)
{
    (void)state;
    tgc_vinfo in[3] = {VI(TGC_F32, 2, 5, 8), VI(TGC_F32, 5, 8), VI(TGC_F32, 5, 8)};
    tgc_attrs a = IA(2, TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS);
    a.f[0] = 1e-5;
    assert_int_equal(infer_eager(TGC_OP_LAYER_NORM, in, 3, a), TGC_OK);
    check_out(TGC_F32, "[2, 5, 8]");
    in[2] = VI(TGC_F32, 8);
    check_error(infer_eager(TGC_OP_LAYER_NORM, in, 3, a), TGC_ERR_SHAPE,
                "tgc_layer_norm: bias is [8] but the last 2 dims of x are [5, 8]");
    a.i[0] = 4;
    check_error(infer_eager(TGC_OP_LAYER_NORM, in, 3, a), TGC_ERR_INVALID_ARG,
                "n_norm must be in [1, 3]");
    tgc_vinfo ints = VI(TGC_I32, 3, 4); /* ops.h: float operands only */
    check_error(infer_eager(TGC_OP_LAYER_NORM, &ints, 1, IA(1, 0)), TGC_ERR_DTYPE,
                "tgc_layer_norm: x must be a float tensor, got i32");
}

static void test_cross_entropy_and_nll(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 32, 0, 0);
    tgc_vinfo in[2] = {VI(TGC_F32, s0, 10), VI(TGC_I64, s0)};
    assert_int_equal(infer(TGC_OP_CROSS_ENTROPY, in, 2, IA(TGC_REDUCE_MEAN, -100)), TGC_OK);
    check_out(TGC_F32, "[]");
    assert_int_equal(infer(TGC_OP_NLL_LOSS, in, 2, IA(TGC_REDUCE_NONE, -100)), TGC_OK);
    check_out(TGC_F32, "[s0]");
    in[0] = VI(TGC_F32, s0, 10, 7);
    in[1] = VI(TGC_I32, s0, 7);
    assert_int_equal(infer(TGC_OP_CROSS_ENTROPY, in, 2, IA(TGC_REDUCE_NONE, -100)), TGC_OK);
    check_out(TGC_F32, "[s0, 7]");
    in[1] = VI(TGC_I64, s0);
    check_error(infer(TGC_OP_CROSS_ENTROPY, in, 2, IA(TGC_REDUCE_SUM, -100)), TGC_ERR_SHAPE,
                "tgc_cross_entropy: target is [32] but logits [32, 10, 7] needs target [32, 7]");
    in[1] = VI(TGC_F32, s0, 7);
    check_error(infer(TGC_OP_CROSS_ENTROPY, in, 2, IA(TGC_REDUCE_SUM, -100)), TGC_ERR_DTYPE,
                "target must be i32 or i64, got f32");
    check_error(infer(TGC_OP_NLL_LOSS, in, 2, IA(3, -100)), TGC_ERR_INVALID_ARG,
                "tgc_nll_loss: reduction must be");
    tgc_attrs ls = IA(TGC_REDUCE_MEAN, -100);
    ls.f[0] = 1.5;
    check_error(infer(TGC_OP_CROSS_ENTROPY, in, 2, ls), TGC_ERR_INVALID_ARG,
                "label_smoothing must be in [0, 1], got 1.5");
}

static void test_sdpa(void **state)
{
    (void)state;
    tgc_sdim l = tgc_sym_new(syms, 128, 0, 2);
    tgc_vinfo in[4] = {VI(TGC_F16, 2, 8, l, 64), VI(TGC_F16, 1, 8, l, 64), VI(TGC_F16, 2, 1, l, 32),
                       VI(TGC_BOOL, l, l)};
    tgc_attrs a = IA(0, 1);
    a.f[1] = 0.125;
    assert_int_equal(infer(TGC_OP_SDPA, in, 4, a), TGC_OK);
    check_out(TGC_F16, "[2, 8, s0, 32]");
    in[3] = VI(TGC_BOOL, 3, l);
    check_error(infer(TGC_OP_SDPA, in, 4, a), TGC_ERR_SHAPE,
                "mask [3, 128] does not broadcast to the scores [2, 8, 128, 128]");
    in[3] = VI(TGC_I32, l, l);
    check_error(infer(TGC_OP_SDPA, in, 4, a), TGC_ERR_DTYPE, "mask must be bool or q's dtype");
    in[1] = VI(TGC_F16, 1, 8, l, 48);
    check_error(infer(TGC_OP_SDPA, in, 3, IA(1, 0)), TGC_ERR_INVALID_ARG, "scale");
    a.i[1] = 0;
    check_error(infer(TGC_OP_SDPA, in, 3, a), TGC_ERR_SHAPE,
                "tgc_scaled_dot_product_attention: q and k head dims differ");
    a.f[0] = 2.0;
    check_error(infer(TGC_OP_SDPA, in, 3, a), TGC_ERR_INVALID_ARG, "dropout_p must be in [0, 1]");
}

static void test_dropout_and_malformed_nodes(void **state)
{
    (void)state;
    tgc_vinfo x = VI(TGC_F32, 3);
    tgc_attrs a = {.f = {0.5}, .nf = 1};
    assert_int_equal(infer_eager(TGC_OP_DROPOUT, &x, 1, a), TGC_OK);
    check_out(TGC_F32, "[3]");
    a.f[0] = 1.5;
    check_error(infer_eager(TGC_OP_DROPOUT, &x, 1, a), TGC_ERR_INVALID_ARG,
                "tgc_dropout: p must be in [0, 1], got 1.5");
    check_error(infer_eager(TGC_OP_INPUT, NULL, 0, NONE), TGC_ERR_INTERNAL, "tgc_input:");
    check_error(infer_eager(TGC_OP_ADD, &x, 1, NONE), TGC_ERR_INTERNAL, "tgc_add:");
}

/* ---- symbolic slices, 0/1 specialization, size limits ---- */

/* Messages from a dynamic variant's trace show this call's sizes, as eager ones do, not
 * the variant's symbols: the broadcast, reshape, cat, linear and attention messages above
 * all print trace-time values. */

/* Python's slice length on a dynamic dim, for every kind of bound: the normal form makes
 * bounds counted from the end cancel (x[:, -1:] is 1, not s0 + (s0 - 1)*-1), lower bounds
 * (a symbol is >= 2) prove the common cases without guards, and the rest are guarded. */
static void test_slice_symbolic_forms(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 9, 0, 0);
    tgc_vinfo x = VI(TGC_F32, 4, s0);
    const int64_t at[] = {2, 3, 5, 9, 40};
    const struct {
        int64_t start, end, step;
        const char *shape;
        int assumptions; /* guards recorded by this slice */
    } cases[] = {
        {-1, INT64_MAX, 1, "[4, 1]", 0},
        {-2, INT64_MAX, 1, "[4, 2]", 0},
        {1, INT64_MAX, 1, "[4, (s0 - 1)]", 0},
        {0, -1, 1, "[4, (s0 - 1)]", 0},
        {1, -1, 1, "[4, (s0 - 2)]", 1},
        {-3, INT64_MAX, 1, "[4, 3]", 1},
        {0, 2, 1, "[4, 2]", 0},
        {INT64_MIN, INT64_MAX, 1, "[4, s0]", 0},
        {0, INT64_MAX, 2, "[4, ((s0 + 1) // 2)]", 0},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        int before = tgc_sym_n_assumptions(syms);
        assert_int_equal(
            infer(TGC_OP_SLICE, &x, 1, IA(1, cases[k].start, cases[k].end, cases[k].step)), TGC_OK);
        check_out(TGC_F32, cases[k].shape);
        assert_int_equal(tgc_sym_n_assumptions(syms) - before, cases[k].assumptions);
        /* where the guards hold, the size is python's */
        for (int v = 0; v < (int)(sizeof at / sizeof at[0]); v++) {
            int holds = 1;
            for (int a = 0; a < tgc_sym_n_assumptions(syms); a++)
                holds &= tgc_sym_assumption_holds(syms, a, &at[v]);
            if (!holds)
                continue;
            int64_t n = at[v], lo = cases[k].start, hi = cases[k].end;
            lo = lo < 0 ? (lo < -n ? 0 : lo + n) : lo > n ? n : lo;
            hi = hi < 0 ? (hi < -n ? 0 : hi + n) : hi > n ? n : hi;
            int64_t want = hi > lo ? (hi - lo - 1) / cases[k].step + 1 : 0;
            assert_int_equal(eval_dim(1, &at[v]), want);
        }
    }
    /* bounds outside the dim at trace time: clamped, and guarded to stay outside */
    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(1, 100, INT64_MAX, 1)), TGC_OK);
    check_out(TGC_F32, "[4, 0]");
    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(1, -100, 3, 1)), TGC_OK);
    check_out(TGC_F32, "[4, 3]");
    /* a step beyond any size takes one element */
    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(1, INT64_MIN, -2, INT64_MAX)), TGC_OK);
    check_out(TGC_F32, "[4, 1]");
}

/* A computed size that is 1 at trace time becomes the constant 1, guarded, like an input
 * size: broadcasting and squeeze then see a plain 1. A computed 0 stays symbolic. */
static void test_results_are_1_specialized(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(syms, 2, 0, 0);
    tgc_vinfo x = VI(TGC_F32, 3, s0);
    assert_int_equal(infer(TGC_OP_SLICE, &x, 1, IA(1, 1, INT64_MAX, 1)), TGC_OK);
    check_out(TGC_F32, "[3, 1]");
    assert_int_equal(tgc_sym_n_assumptions(syms), 1);
    tgc_sdim a, b;
    assert_int_equal(tgc_sym_assumption(syms, 0, &a, &b), TGC_ASSUME_EQ);
    assert_int_equal(b, 1);
    const int64_t two = 2, three = 3;
    assert_true(tgc_sym_assumption_holds(syms, 0, &two));
    assert_false(tgc_sym_assumption_holds(syms, 0, &three));
    tgc_vinfo y = out;
    assert_int_equal(infer(TGC_OP_SQUEEZE, &y, 1, IA(TGC_ALL_DIMS)), TGC_OK);
    check_out(TGC_F32, "[3]");
    /* a kept symbolic dim is guarded to stay above 1 (where it is 1, eager drops it) */
    tgc_sdim s1 = tgc_sym_new(syms, 6, 0, 1);
    x = VI(TGC_F32, 1, s1);
    int before = tgc_sym_n_assumptions(syms);
    assert_int_equal(infer(TGC_OP_SQUEEZE, &x, 1, IA(TGC_ALL_DIMS)), TGC_OK);
    check_out(TGC_F32, "[s1]");
    assert_int_equal(tgc_sym_n_assumptions(syms), before); /* a symbol is >= 2: proven */
    x = VI(TGC_F32, 1, tgc_sym_sub(syms, s1, 3));
    assert_int_equal(infer(TGC_OP_SQUEEZE, &x, 1, IA(TGC_ALL_DIMS)), TGC_OK);
    check_out(TGC_F32, "[(s1 - 3)]");
    assert_int_equal(tgc_sym_n_assumptions(syms), before + 1);
    assert_int_equal(tgc_sym_assumption(syms, before, &a, &b), TGC_ASSUME_GE);
    assert_int_equal(b, 2);
    /* a computed 0 stays symbolic; squeeze keeps it, guarded to stay 0 */
    x = VI(TGC_F32, 1, tgc_sym_sub(syms, s1, 6));
    before = tgc_sym_n_assumptions(syms);
    assert_int_equal(infer(TGC_OP_SQUEEZE, &x, 1, IA(TGC_ALL_DIMS)), TGC_OK);
    assert_false(TGC_SDIM_IS_CONST(out.shape[0]));
    assert_int_equal(tgc_sym_n_assumptions(syms), before + 1);
    assert_int_equal(tgc_sym_assumption(syms, before, &a, &b), TGC_ASSUME_EQ);
    assert_int_equal(b, 0);
}

/* Every result is limited to TGC_MAX_NUMEL elements (0 counted as 1), and every size
 * computation is checked: TGC_ERR_SHAPE naming the op, never a wrapped size. */
static void test_size_limits_and_overflow(void **state)
{
    (void)state;
    tgc_vinfo one = VI(TGC_F32, 1);
    check_error(infer_eager(TGC_OP_EXPAND, &one, 1, IA((int64_t)1 << 62, 8)), TGC_ERR_SHAPE,
                "tgc_expand: the result [4611686018427387904, 8] is too large");
    assert_int_equal(infer_eager(TGC_OP_EXPAND, &one, 1, IA((int64_t)1 << 28, 1 << 28)), TGC_OK);
    check_error(infer_eager(TGC_OP_EXPAND, &one, 1, IA((int64_t)1 << 28, (1 << 28) + 1)),
                TGC_ERR_SHAPE, "TGC_MAX_NUMEL");
    /* the reported crash: eager, no symbol table */
    tgc_vinfo x = VI(TGC_F32, 4);
    check_error(infer_eager(TGC_OP_PAD, &x, 1, IA(1, INT64_MAX, 1)), TGC_ERR_SHAPE,
                "tgc_pad: pads 9223372036854775807, 1 on dim 0 of [4]");
    check_error(infer_eager(TGC_OP_PAD, &x, 1, IA(1, TGC_MAX_NUMEL, 0)), TGC_ERR_SHAPE,
                "tgc_pad: the result [72057594037927940] is too large");
    /* and symbolic */
    tgc_sdim s0 = tgc_sym_new(syms, 5, 0, 0);
    x = VI(TGC_F32, s0);
    check_error(infer(TGC_OP_PAD, &x, 1, IA(1, INT64_MAX, 1)), TGC_ERR_SHAPE, "tgc_pad: pads");
    check_error(infer(TGC_OP_PAD, &x, 1, IA(1, TGC_MAX_NUMEL - 4, 0)), TGC_ERR_SHAPE,
                "tgc_pad: the result [72057594037927937] is too large");
    /* cat sizes */
    tgc_vinfo big[3] = {VI(TGC_F32, INT64_MAX / 2), VI(TGC_F32, INT64_MAX / 2),
                        VI(TGC_F32, INT64_MAX / 2)};
    check_error(infer_eager(TGC_OP_CAT, big, 3, IA(0)), TGC_ERR_SHAPE,
                "tgc_cat: the sizes of dim 0 of 3 tensors overflow int64");
    /* conv and pool windows */
    tgc_vinfo in[2] = {VI(TGC_F32, 1, 3, 8, 8), VI(TGC_F32, 4, 3, 3, 3)};
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, INT64_MAX, 0, 1, 1, 1)), TGC_ERR_SHAPE,
                "tgc_conv2d: the height window (3 with dilation 1, padding");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, 0, 0, INT64_MAX, 1, 1)), TGC_ERR_SHAPE,
                "overflows int64");
    check_error(infer_eager(TGC_OP_CONV2D, in, 2, IA(1, 1, (int64_t)1 << 60, 0, 1, 1, 1)),
                TGC_ERR_SHAPE, "is too large");
    tgc_vinfo p = VI(TGC_F32, 1, 3, 8, 8);
    check_error(infer_eager(TGC_OP_MAX_POOL2D, &p, 1, IA(2, 2, 1, 1, INT64_MAX, 0)),
                TGC_ERR_INVALID_ARG, "must be at most half the kernel");
    check_error(infer_eager(TGC_OP_AVG_POOL2D, &p, 1, IA(INT64_MAX, 2, 1, 1, 0, 0)), TGC_ERR_SHAPE,
                "tgc_avg_pool2d: the height window");
    /* reshape targets whose product overflows */
    tgc_vinfo r = VI(TGC_F32, 2, 5);
    check_error(infer_eager(TGC_OP_RESHAPE, &r, 1, IA(INT64_MAX, 4)), TGC_ERR_SHAPE,
                "tgc_reshape: cannot reshape [2, 5] (10 elements) into "
                "[9223372036854775807, 4]");
    check_error(infer_eager(TGC_OP_RESHAPE, &r, 1, IA(-1, (int64_t)1 << 62, 4)), TGC_ERR_SHAPE,
                "cannot reshape");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_promote_follows_ops_h),
        T(test_binary_broadcasts_constant_shapes),
        T(test_div_is_true_division_and_compare_is_bool),
        T(test_broadcast_mismatch_names_both_shapes),
        T(test_broadcast_symbolic_dims),
        T(test_broadcast_unifies_equal_hints_and_rejects_others),
        T(test_where_needs_bool_cond),
        T(test_scalar_forms_keep_dtype_unless_fractional),
        T(test_unary_float_math_promotes_ints),
        T(test_reduce_mask_and_keepdim),
        T(test_reduce_dtypes),
        T(test_reduce_errors),
        T(test_reduce_symbolic_keeps_other_dims),
        T(test_reshape_onnx_rules),
        T(test_reshape_errors),
        T(test_reshape_infers_over_symbolic_batch),
        T(test_reshape_inexact_symbolic_split_is_assumed),
        T(test_permute_expand_squeeze_unsqueeze),
        T(test_slice_python_rules),
        T(test_slice_symbolic_whole_dim_stays_symbolic),
        T(test_flatten_symbolic),
        T(test_cat_stack_pad),
        T(test_indexing),
        T(test_matmul_shapes),
        T(test_matmul_errors),
        T(test_linear_symbolic_batch),
        T(test_conv2d_output_sizes),
        T(test_conv2d_groups_and_errors),
        T(test_conv2d_symbolic_sizes),
        T(test_pools),
        T(test_batch_norm),
        T(test_layer_norm),
        T(test_cross_entropy_and_nll),
        T(test_sdpa),
        T(test_dropout_and_malformed_nodes),
        T(test_slice_symbolic_forms),
        T(test_results_are_1_specialized),
        T(test_size_limits_and_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
