/* Error messages and dtype contracts: errors of decomposed nodes
 * name the op the user called; errors while tracing a dynamic variant give this call's sizes,
 * not symbols; out-of-memory names the op, dtype, shape and bytes; an unknown device type is
 * not printed as cuda; layer_norm on integers and neg on bool are TGC_ERR_DTYPE, eagerly and
 * compiled. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>

#include "tgc/tgc.h"
#include "unit_test_util.h"

/* Huge allocations must come back as NULL (TGC_ERR_OOM) under ASan too, not abort. */
const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static const tgc_backend_kind backends[2] = {TGC_BACKEND_AUTO, TGC_BACKEND_INTERP};
static const tgc_dynamic dynamics[2] = {TGC_DYNAMIC_NEVER, TGC_DYNAMIC_ALWAYS};

static tgc_tensor *i64s(const int64_t *v, int64_t n)
{
    tgc_tensor *t = tgc_from_data(v, sizeof(int64_t) * (size_t)n, &n, 1, TGC_I64, tgc_cpu());
    assert_non_null(t);
    return t;
}

static tgc_tensor *randn2(int64_t a, int64_t b)
{
    int64_t s[2] = {a, b};
    tgc_tensor *t = tgc_randn(s, 2, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* Calls fn on in[0..n) compiled with every backend and dynamic mode; each call must fail
 * with st and exactly the message want. */
static void expect_compiled_error(tgc_model_fn fn, tgc_tensor **in, int n, tgc_status st,
                                  const char *want)
{
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 2; d++) {
            tgc_config c = tgc_config_default();
            c.backend = backends[b];
            c.dynamic = dynamics[d];
            tgc_fn *f = tgc_compile(fn, "msg", &c);
            tgc_tensor *out = NULL;
            tgc_clear_error();
            assert_int_equal(tgc_call(f, NULL, in, n, &out, 1), st);
            if (strcmp(tgc_last_error(), want) != 0)
                fail_msg("backend %d dynamic %d: \"%s\", want \"%s\"", b, d, tgc_last_error(),
                         want);
            tgc_fn_free(f);
        }
    tgc_clear_error();
}

static tgc_status ce_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_cross_entropy(in[0], in[1], TGC_REDUCE_MEAN, -100, 0.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void decomposed_cross_entropy_names_itself(void **state)
{
    (void)state;
    const int64_t target[3] = {0, 7, 1};
    tgc_tensor *in[2] = {randn2(3, 4), i64s(target, 3)};
    const char *want = "tgc_cross_entropy: target 7 out of range [0, 4) at position 1";
    assert_null(tgc_cross_entropy(in[0], in[1], TGC_REDUCE_MEAN, -100, 0.0));
    assert_string_equal(tgc_last_error(), want); /* eager */
    expect_compiled_error(ce_fn, in, 2, TGC_ERR_INVALID_ARG, want);
}

static tgc_status matmul_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_matmul(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void dynamic_trace_errors_give_this_calls_sizes(void **state)
{
    (void)state;
    tgc_tensor *in[2] = {randn2(3, 4), randn2(5, 2)};
    assert_null(tgc_matmul(in[0], in[1]));
    char eager[512];
    snprintf(eager, sizeof eager, "%s", tgc_last_error());
    assert_non_null(strstr(eager, "[3, 4]"));
    expect_compiled_error(matmul_fn, in, 2, TGC_ERR_SHAPE, eager);
}

/* expand_sym to a symbolic size that does not fit: no eager twin, symbols are replaced. */
static tgc_status expand_sym_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_symint s[2] = {tgc_symint_mul(tgc_sym_size(in[0], 0), tgc_symint_const(2)),
                       tgc_symint_const(3)};
    out[0] = tgc_expand_sym(in[0], s, 2);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void symbolic_attrs_errors_give_this_calls_sizes(void **state)
{
    (void)state;
    for (int b = 0; b < 2; b++) {
        tgc_config c = tgc_config_default();
        c.backend = backends[b];
        c.dynamic = TGC_DYNAMIC_ALWAYS;
        tgc_fn *f = tgc_compile(expand_sym_fn, "exp", &c);
        tgc_tensor *x = randn2(4, 3), *out;
        tgc_status st = tgc_call(f, NULL, &x, 1, &out, 1);
        check_error(st, TGC_ERR_SHAPE,
                    "tgc_expand: cannot expand dim 0 of [4, 3] (size 4) to 8 (target [8, 3])");
        tgc_fn_free(f);
        tgc_clear_error();
    }
}

static void out_of_memory_names_op_dtype_shape_and_bytes(void **state)
{
    (void)state;
    const int64_t huge[1] = {INT64_C(1) << 50};
    assert_null(tgc_empty(huge, 1, TGC_F32, tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_OOM,
                "tgc_empty: out of memory for a f32 tensor of shape [1125899906842624] "
                "(1125899906842624 elements, 4503599627370496 bytes)");
    tgc_clear_error();
    const int64_t one[1] = {1};
    tgc_tensor *wide = tgc_expand(tgc_ones(one, 1, TGC_F64, tgc_cpu()), huge, 1); /* a view */
    assert_non_null(wide);
    assert_null(tgc_contiguous(wide));
    check_error(tgc_last_status(), TGC_ERR_OOM,
                "tgc_contiguous: out of memory for its f64 result of shape [1125899906842624] "
                "(9007199254740992 bytes)");
    tgc_clear_error();
}

static void unknown_device_type_is_not_cuda(void **state)
{
    (void)state;
    const int64_t s[1] = {2};
    tgc_device odd = {(tgc_device_type)7, 0};
    assert_null(tgc_empty(s, 1, TGC_F32, odd));
    check_error(tgc_last_status(), TGC_ERR_DEVICE,
                "tgc_empty: unknown device type 7 (index 0); use tgc_cpu()");
    tgc_clear_error();
    assert_null(tgc_to(tgc_zeros(s, 1, TGC_F32, tgc_cpu()), odd));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_to: unknown device type 7");
    tgc_clear_error();
    int nd = tgc_cuda_device_count(); /* an index no device has */
    char w[80];
    snprintf(w, sizeof w, "tgc_empty: device cuda:%d is not available", nd + 1);
    assert_null(tgc_empty(s, 1, TGC_F32, tgc_cuda(nd + 1)));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, w);
    tgc_clear_error();
}

static tgc_status ln_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_layer_norm(in[0], 1, NULL, NULL, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status neg_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_neg(in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void layer_norm_of_integers_and_neg_of_bool_are_dtype_errors(void **state)
{
    (void)state;
    const int64_t s[2] = {2, 3};
    tgc_tensor *xi = tgc_zeros(s, 2, TGC_I32, tgc_cpu()),
               *xb = tgc_zeros(s, 2, TGC_BOOL, tgc_cpu());
    const char *ln = "tgc_layer_norm: x must be a float tensor, got i32";
    assert_null(tgc_layer_norm(xi, 1, NULL, NULL, 1e-5));
    check_error(tgc_last_status(), TGC_ERR_DTYPE, ln);
    tgc_clear_error();
    expect_compiled_error(ln_fn, &xi, 1, TGC_ERR_DTYPE, ln);
    const char *neg = "tgc_neg: negation of a bool tensor is not supported; to invert a mask use "
                      "tgc_eq(mask, false) or tgc_where";
    assert_null(tgc_neg(xb));
    check_error(tgc_last_status(), TGC_ERR_DTYPE, neg);
    tgc_clear_error();
    expect_compiled_error(neg_fn, &xb, 1, TGC_ERR_DTYPE, neg);
    /* the other dtypes keep working: neg of i32 and layer_norm of f16 */
    int32_t v[6];
    assert_int_equal(tgc_copy_to_host(tgc_neg(tgc_add_scalar(xi, 2)), v, sizeof v), TGC_OK);
    assert_int_equal(v[5], -2);
    assert_non_null(tgc_layer_norm(tgc_cast(xi, TGC_F16), 1, NULL, NULL, 1e-5));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, scoped_setup, scoped_teardown)
    const struct CMUnitTest tests[] = {
        T(decomposed_cross_entropy_names_itself),
        T(dynamic_trace_errors_give_this_calls_sizes),
        T(symbolic_attrs_errors_give_this_calls_sizes),
        T(out_of_memory_names_op_dtype_shape_and_bytes),
        T(unknown_device_type_is_not_cuda),
        T(layer_norm_of_integers_and_neg_of_bool_are_dtype_errors),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
