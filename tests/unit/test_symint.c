/* Sizes without specialization: a model written with tgc_sym_size,
 * tgc_reshape_sym, tgc_expand_sym, tgc_full_sym, tgc_arange_sym, tgc_reshape_as,
 * tgc_expand_as and tgc_flatten compiles once static and once dynamic over five batch sizes
 * under dynamic = AUTO, with the values of eager; a model that reads a size with
 * tgc_numel / tgc_shape gets a recompile reason and a `dynamic` log line naming the call
 * and the dim; symint arithmetic and its errors. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>

#include "tgc/tgc.h"
#include "unit_test_util.h"

static char last_log[1024];
static int n_dynamic_logs;

static void capture_log(unsigned channel, const char *msg, void *user)
{
    (void)user;
    if (channel == TGC_LOG_DYNAMIC && strstr(msg, "specializing")) {
        n_dynamic_logs++;
        snprintf(last_log, sizeof last_log, "%s", msg);
    }
}

static tgc_config config_for(tgc_backend_kind b)
{
    tgc_config c = tgc_config_default();
    c.backend = b;
    c.dynamic = TGC_DYNAMIC_AUTO;
    c.log = TGC_LOG_DYNAMIC;
    c.log_fn = capture_log;
    n_dynamic_logs = 0;
    last_log[0] = 0;
    return c;
}

static tgc_tensor *iota2(int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    tgc_tensor *t =
        tgc_reshape(tgc_arange(0, (double)(rows * cols), 1, TGC_F32, tgc_cpu()), shape, 2);
    assert_non_null(t);
    return t;
}

/* Exact equality of two f32 tensors of one shape. */
static void expect_same(tgc_tensor *got, tgc_tensor *want)
{
    assert_non_null(got);
    assert_non_null(want);
    int64_t gs[TGC_MAX_DIMS], ws[TGC_MAX_DIMS];
    int nd = tgc_shape(want, ws);
    assert_int_equal(tgc_shape(got, gs), nd);
    for (int d = 0; d < nd; d++)
        assert_int_equal(gs[d], ws[d]);
    int64_t n = tgc_numel(want);
    float *g = malloc(sizeof(float) * (size_t)(n ? n : 1));
    float *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
    assert_non_null(g);
    assert_non_null(w);
    assert_int_equal(tgc_copy_to_host(tgc_cast(got, TGC_F32), g, sizeof(float) * (size_t)n),
                     TGC_OK);
    assert_int_equal(tgc_copy_to_host(tgc_cast(want, TGC_F32), w, sizeof(float) * (size_t)n),
                     TGC_OK);
    for (int64_t i = 0; i < n; i++)
        if (g[i] != w[i])
            fail_msg("element %lld: got %g, want %g", (long long)i, g[i], w[i]);
    free(g);
    free(w);
}

/* x [B, 6]: every size it needs comes from symints or from shape-preserving ops.
 *   out[0] = reshape_sym(x, [B, 2, 3]) summed over dim 2, flattened from dim 1: [B, 2]
 *   out[1] = x + arange_sym(0, B, 1) as a column: [B, 6]
 *   out[2] = full_sym([B, (B*6)//6 ... ]) : a [B, 3] of 0.5 plus expand_as of a [1, 3] row
 *   out[3] = reshape_as(flatten(x), x) * 2 */
static tgc_status sym_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *x = in[0];
    tgc_symint b = tgc_sym_size(x, 0);
    tgc_symint s3[3] = {b, tgc_symint_const(2), tgc_symint_const(3)};
    out[0] = tgc_flatten(tgc_sum(tgc_reshape_sym(x, s3, 3), (const int[]){2}, 1, 1), 1, -1);
    tgc_symint col[2] = {b, tgc_symint_const(1)};
    tgc_tensor *ids = tgc_reshape_sym(tgc_arange_sym(0, b, 1, TGC_F32, tgc_cpu()), col, 2);
    out[1] = tgc_add(x, ids);
    /* (B*6)//6 - 0 == B: symbolic arithmetic that folds back to the batch size */
    tgc_symint bb =
        tgc_symint_sub(tgc_symint_floordiv(tgc_symint_mul(tgc_sym_size(x, 0), tgc_sym_size(x, 1)),
                                           tgc_sym_size(x, 1)),
                       tgc_symint_const(0));
    tgc_symint s2[2] = {bb, tgc_symint_const(3)};
    tgc_tensor *halves = tgc_full_sym(s2, 2, 0.5, TGC_F32, tgc_cpu());
    tgc_tensor *row = tgc_slice(tgc_slice(x, 0, 0, 1, 1), 1, 0, 3, 1); /* [1, 3] */
    out[2] = tgc_add(halves, tgc_expand_as(row, halves));
    out[3] = tgc_mul_scalar(tgc_reshape_as(tgc_flatten(x, 0, -1), x), 2.0);
    for (int k = 0; k < 4; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

static void run_batches(tgc_backend_kind backend)
{
    tgc_config c = config_for(backend);
    tgc_fn *f = tgc_compile(sym_model, "sym_model", &c);
    assert_non_null(f);
    const int64_t batches[5] = {4, 7, 2, 9, 5};
    for (int i = 0; i < 5; i++) {
        tgc_scope_push();
        tgc_tensor *x = iota2(batches[i], 6), *got[4] = {0}, *want[4] = {0};
        assert_int_equal(tgc_call(f, NULL, &x, 1, got, 4), TGC_OK);
        assert_int_equal(sym_model(NULL, &x, 1, want, 4), TGC_OK); /* eager */
        for (int k = 0; k < 4; k++)
            expect_same(got[k], want[k]);
        tgc_scope_pop();
    }
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.compiles, 2); /* static, then batch dim dynamic: never again */
    assert_int_equal(st.eager_fallbacks, 0);
    assert_int_equal(n_dynamic_logs, 0); /* nothing specialized */
    char *g = tgc_fn_graph(f, 0, 0);     /* the dynamic variant prints its symbolic sizes */
    assert_non_null(g);
    if (!strstr(g, "reshape(%0) {i=s0,2,3 f=1}") || !strstr(g, "arange() {i=s0 f=0,1}"))
        fail_msg("graph:\n%s", g);
    tgc_free(g);
    tgc_fn_free(f);
}

static void sym_model_compiles_twice_over_five_batches_llvm(void **state)
{
    (void)state;
    run_batches(TGC_BACKEND_AUTO);
}

static void sym_model_compiles_twice_over_five_batches_interp(void **state)
{
    (void)state;
    run_batches(TGC_BACKEND_INTERP);
}

/* flatten(x, 1, -1) with a size read: tgc_numel specializes the batch dim. */
static tgc_status numel_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int64_t shape[2] = {tgc_numel(in[0]) / 6, 6};
    out[0] = tgc_reshape(in[0], shape, 2);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void numel_read_names_the_call_and_the_dim(void **state)
{
    (void)state;
    tgc_config c = config_for(TGC_BACKEND_AUTO);
    tgc_fn *f = tgc_compile(numel_model, "numel_model", &c);
    tgc_tensor *x, *y;
    x = iota2(64, 6);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK); /* static: nothing to say */
    assert_int_equal(n_dynamic_logs, 0);
    x = iota2(32, 6);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK); /* dim 0 dynamic, then read */
    assert_int_equal(n_dynamic_logs, 1);
    if (!strstr(last_log, "'numel_model': tgc_numel() read dynamic input 0 dim 0 while tracing; "
                          "specializing it to 32") ||
        !strstr(last_log, "use tgc_flatten, tgc_reshape with 0/-1, tgc_reshape_as or "
                          "tgc_sym_size instead of reading sizes"))
        fail_msg("log: %s", last_log);
    x = iota2(16, 6);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    expect_same(y, x);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.compiles, 3);
    const char *want = "input 0 dim 0 was specialized to 32 by tgc_numel() in 'numel_model' and "
                       "is now 16; use tgc_flatten, tgc_reshape with 0/-1, tgc_reshape_as or "
                       "tgc_sym_size instead of reading sizes";
    if (strcmp(st.last_recompile_reason, want) != 0)
        fail_msg("reason: %s", st.last_recompile_reason);
    tgc_fn_free(f);
}

/* tgc_shape on a reshaped tensor: the dim read is an expression, not an input's dim. */
static tgc_status shape_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int64_t s[TGC_MAX_DIMS];
    tgc_tensor *flat = tgc_flatten(in[0], 0, -1);
    tgc_shape(flat, s);
    out[0] = tgc_mul_scalar(flat, (double)s[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void shape_read_of_an_expression_is_described(void **state)
{
    (void)state;
    tgc_config c = config_for(TGC_BACKEND_INTERP);
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(shape_model, "shape_model", &c);
    tgc_tensor *x = iota2(4, 6), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    if (!strstr(last_log, "tgc_shape() read dynamic size s0*s1 at dim 0 of a traced tensor"))
        fail_msg("log: %s", last_log);
    x = iota2(5, 6);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    if (!strstr(st.last_recompile_reason, "size s0*s1 at dim 0 of a traced tensor was "
                                          "specialized to 24 by tgc_shape() in 'shape_model' "
                                          "and is now 30"))
        fail_msg("reason: %s", st.last_recompile_reason);
    tgc_fn_free(f);
}

/* tgc_symint_value specializes like tgc_size, and says so. */
static tgc_status value_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int ok = 0;
    int64_t b = tgc_symint_value(tgc_sym_size(in[0], 0), &ok);
    out[0] = ok ? tgc_add_scalar(in[0], (double)b) : NULL;
    return out[0] ? TGC_OK : tgc_last_status();
}

static void symint_value_specializes_and_is_named(void **state)
{
    (void)state;
    tgc_config c = config_for(TGC_BACKEND_INTERP);
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(value_model, "value_model", &c);
    tgc_tensor *x = iota2(3, 2), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    float v;
    assert_int_equal(tgc_copy_to_host(tgc_slice(tgc_flatten(y, 0, -1), 0, 0, 1, 1), &v, 4), TGC_OK);
    assert_true(v == 3.0f);
    x = iota2(4, 2);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(tgc_copy_to_host(tgc_slice(tgc_flatten(y, 0, -1), 0, 0, 1, 1), &v, 4), TGC_OK);
    assert_true(v == 4.0f);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    if (!strstr(st.last_recompile_reason,
                "input 0 dim 0 was specialized to 3 by tgc_symint_value() in 'value_model'"))
        fail_msg("reason: %s", st.last_recompile_reason);
    tgc_fn_free(f);
}

/* sdpa's default scale reads E: the op, not tgc_size, is named. */
static tgc_status sdpa_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.0, 0, 0.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void sdpa_scale_read_names_the_op(void **state)
{
    (void)state;
    tgc_config c = config_for(TGC_BACKEND_INTERP);
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(sdpa_model, "attn", &c);
    tgc_tensor *x = iota2(3, 4), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    if (!strstr(last_log,
                "'attn': tgc_scaled_dot_product_attention() read dynamic input 0 dim 1 while "
                "tracing; specializing it to 4"))
        fail_msg("log: %s", last_log);
    tgc_fn_free(f);
}

/* ---- outside tracing: numbers ---- */

static int64_t value_of(tgc_symint s)
{
    int ok = 0;
    int64_t v = tgc_symint_value(s, &ok);
    assert_true(ok);
    return v;
}

static void symint_arithmetic_on_numbers(void **state)
{
    (void)state;
    tgc_symint a = tgc_symint_const(-7), b = tgc_symint_const(2);
    assert_int_equal(value_of(tgc_symint_add(a, b)), -5);
    assert_int_equal(value_of(tgc_symint_sub(a, b)), -9);
    assert_int_equal(value_of(tgc_symint_mul(a, b)), -14);
    assert_int_equal(value_of(tgc_symint_floordiv(a, b)), -4); /* floor, as Python's // */
    assert_int_equal(value_of(tgc_symint_floordiv(tgc_symint_const(7), b)), 3);
    tgc_tensor *x = iota2(3, 4);
    assert_int_equal(value_of(tgc_sym_size(x, -1)), 4);
    tgc_symint s[3] = {tgc_sym_size(x, 1), tgc_symint_const(-1), tgc_symint_const(1)};
    tgc_tensor *r = tgc_reshape_sym(x, s, 3);
    assert_non_null(r);
    assert_int_equal(tgc_size(r, 0), 4);
    assert_int_equal(tgc_size(r, 1), 3);
    tgc_tensor *full = tgc_full_sym(s, 1, 2.5, TGC_F64, tgc_cpu());
    assert_int_equal(tgc_numel(full), 4);
    assert_true(tgc_item_f64(full) == 2.5);
    tgc_tensor *ar = tgc_arange_sym(10, tgc_symint_const(4), -3, TGC_I64, tgc_cpu());
    int64_t got[2];
    assert_int_equal(tgc_numel(ar), 2);
    assert_int_equal(tgc_copy_to_host(ar, got, sizeof got), TGC_OK);
    assert_int_equal(got[0], 10);
    assert_int_equal(got[1], 7);
}

static void symint_errors(void **state)
{
    (void)state;
    int ok = 1;
    tgc_symint big = tgc_symint_const(INT64_MAX);
    assert_int_equal(tgc_symint_value(tgc_symint_add(big, tgc_symint_const(1)), &ok), 0);
    assert_int_equal(ok, 0);
    check_error(tgc_last_status(), TGC_ERR_SHAPE,
                "tgc_symint_add: 9223372036854775807 and 1 "
                "overflow int64");
    tgc_clear_error();
    tgc_symint bad = tgc_symint_floordiv(tgc_symint_const(4), tgc_symint_const(0));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_symint_floordiv: divisor must be > 0, got 0");
    /* an invalid symint propagates and keeps the first error */
    tgc_symint s[1] = {tgc_symint_mul(bad, tgc_symint_const(3))};
    assert_null(tgc_reshape_sym(iota2(2, 2), s, 1));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "divisor must be > 0");
    tgc_clear_error();
    tgc_symint_value(tgc_sym_size(NULL, 0), &ok);
    assert_int_equal(ok, 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_sym_size: tensor is NULL");
    tgc_clear_error();
    tgc_sym_size(iota2(2, 2), 2);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_sym_size: dim 2 is out of range for rank 2");
    tgc_clear_error();
    assert_null(tgc_arange_sym(0, tgc_symint_const(3), 0, TGC_F32, tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_arange_sym: step must be nonzero");
    tgc_clear_error();
    assert_null(tgc_reshape_as(iota2(2, 3), NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_reshape_as: other is NULL");
    tgc_clear_error();
    assert_null(tgc_expand_as(iota2(2, 3), iota2(3, 3)));
    check_error(tgc_last_status(), TGC_ERR_SHAPE, "tgc_expand");
    tgc_clear_error();
}

/* A symbolic symint kept past its trace is refused, not misread. */
static tgc_symint escaped;

static tgc_status keeps_symint(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    escaped = tgc_sym_size(in[0], 0);
    out[0] = tgc_neg(in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void symint_outside_its_trace_is_an_error(void **state)
{
    (void)state;
    tgc_config c = config_for(TGC_BACKEND_INTERP);
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(keeps_symint, "keeps", &c);
    tgc_tensor *x = iota2(3, 2), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    int ok = 1;
    tgc_symint_value(escaped, &ok);
    assert_int_equal(ok, 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_symint_value: a symbolic tgc_symint used outside the trace that made it");
    tgc_clear_error();
    tgc_symint s[2] = {escaped, tgc_symint_const(2)};
    assert_null(tgc_reshape_sym(x, s, 2));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_reshape_sym: a symbolic tgc_symint");
    tgc_clear_error();
    tgc_fn_free(f);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, scoped_setup, scoped_teardown)
    const struct CMUnitTest tests[] = {
        T(sym_model_compiles_twice_over_five_batches_llvm),
        T(sym_model_compiles_twice_over_five_batches_interp),
        T(numel_read_names_the_call_and_the_dim),
        T(shape_read_of_an_expression_is_described),
        T(symint_value_specializes_and_is_named),
        T(sdpa_scale_read_names_the_op),
        T(symint_arithmetic_on_numbers),
        T(symint_errors),
        T(symint_outside_its_trace_is_an_error),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
