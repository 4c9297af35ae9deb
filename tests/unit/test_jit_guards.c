/* Guards and the variant cache: every guard kind recompiles exactly once with the right
 * reason; modules of one structure share variants; limits, ERROR mode, graph breaks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tgc/tgc.h"

/* ---- log capture ---- */
static char last_log[1024];
static int n_warnings, n_recompile_logs, n_dynamic_logs, n_log_lines;

static void capture(unsigned channel, const char *msg, void *user)
{
    (void)user;
    snprintf(last_log, sizeof last_log, "%s", msg);
    n_log_lines++;
    n_warnings += channel == 0;
    n_recompile_logs += channel == TGC_LOG_RECOMPILES;
    n_dynamic_logs += channel == TGC_LOG_DYNAMIC;
}

static tgc_config test_config(void)
{
    tgc_config c = tgc_config_default();
    c.log = TGC_LOG_RECOMPILES | TGC_LOG_DYNAMIC;
    c.log_fn = capture;
    n_warnings = n_recompile_logs = n_dynamic_logs = n_log_lines = 0;
    last_log[0] = 0;
    return c;
}

static int setup(void **state)
{
    (void)state;
    tgc_scope_push();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tgc_scope_pop();
    return 0;
}

static tgc_tensor *filled(int64_t a, int64_t b, double v)
{
    int64_t s[2] = {a, b};
    return tgc_full(s, 2, v, TGC_F32, tgc_cpu());
}

static tgc_stats stats_of(const tgc_fn *f)
{
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    return s;
}

static tgc_status call1(tgc_fn *f, tgc_module *m, tgc_tensor *x, tgc_tensor **y)
{
    return tgc_call(f, m, &x, 1, y, 1);
}

/* ---- model functions ---- */
static tgc_status add_one(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status linear_fwd(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in, (void)n_out;
    out[0] = tgc_linear(in[0], tgc_module_get(self, "w"), tgc_module_get(self, "b"));
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_module *linear_module(double wv)
{
    tgc_module *m = tgc_module_create("lin", NULL);
    tgc_scope_push();
    tgc_module_param(m, "w", filled(3, 4, wv));
    int64_t bs[1] = {3};
    tgc_module_param(m, "b", tgc_full(bs, 1, 0.5, TGC_F32, tgc_cpu()));
    tgc_scope_pop();
    return m;
}

static void assert_first_is(tgc_tensor *t, double v)
{
    assert_non_null(t);
    assert_true(tgc_item_f64(t) == v);
}

/* ---- tests ---- */

static void cache_hit_reuses_the_variant(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "add_one", &c);
    tgc_tensor *y;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(call1(f, NULL, filled(2, 3, i), &y), TGC_OK);
        assert_first_is(y, i + 1.0);
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.calls, 5);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 4);
    assert_int_equal(s.recompiles, 0);
    assert_int_equal(n_recompile_logs, 0);
    tgc_fn_free(f);
}

/* Calls f with x0, then x1, and asserts exactly one recompile whose reason contains want. */
static void expect_one_recompile(tgc_fn *f, tgc_module *m0, tgc_tensor *x0, tgc_module *m1,
                                 tgc_tensor *x1, const char *want)
{
    tgc_tensor *y;
    assert_int_equal(call1(f, m0, x0, &y), TGC_OK);
    assert_int_equal(call1(f, m1, x1, &y), TGC_OK);
    assert_int_equal(call1(f, m1, x1, &y), TGC_OK);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.recompiles, 1);
    assert_int_equal(n_recompile_logs, 1);
    if (!strstr(s.last_recompile_reason, want))
        fail_msg("reason '%s' lacks '%s'", s.last_recompile_reason, want);
    assert_non_null(strstr(last_log, "tgc: recompiling 'guarded' (variant 2 of 8): "));
}

static void dtype_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    tgc_tensor *x = filled(2, 3, 1);
    expect_one_recompile(f, NULL, x, NULL, tgc_cast(x, TGC_F16),
                         "input 0 dtype changed: expected f32, got f16");
    tgc_fn_free(f);
}

static void rank_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    int64_t s3[3] = {2, 3, 1};
    expect_one_recompile(f, NULL, filled(2, 3, 1), NULL, tgc_ones(s3, 3, TGC_F32, tgc_cpu()),
                         "input 0 rank changed: expected 2, got 3");
    tgc_fn_free(f);
}

static void size_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_NEVER;
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    expect_one_recompile(f, NULL, filled(2, 3, 1), NULL, filled(2, 5, 1),
                         "input 0 size mismatch at dim 1: expected 3, got 5");
    tgc_fn_free(f);
}

static void contiguity_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    tgc_tensor *x = filled(3, 3, 1);
    expect_one_recompile(f, NULL, x, NULL, tgc_transpose(x, 0, 1),
                         "input 0 layout changed: expected contiguous, got strided");
    tgc_fn_free(f);
}

static void training_flag_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(linear_fwd, "guarded", &c);
    tgc_module *m = linear_module(1.0);
    tgc_tensor *x = filled(2, 4, 1);
    tgc_tensor *y;
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    tgc_module_train(m, 0);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason, "self.training changed (true -> false)");
    tgc_module_train(m, 1); /* back to the first variant: a hit, no compile */
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_int_equal(stats_of(f).compiles, 2);
    assert_first_is(y, 4.5);
    tgc_module_free(m);
    tgc_fn_free(f);
}

static void module_structure_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(linear_fwd, "guarded", &c);
    tgc_module *m0 = linear_module(1.0), *m1 = linear_module(1.0);
    int64_t s1[1] = {3};
    tgc_module_buffer(m1, "extra", tgc_zeros(s1, 1, TGC_F32, tgc_cpu()));
    expect_one_recompile(f, m0, filled(2, 4, 1), m1, filled(2, 4, 1), "self structure changed");
    tgc_module_free(m0);
    tgc_module_free(m1);
    tgc_fn_free(f);
}

static void requires_grad_change_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(linear_fwd, "guarded", &c);
    tgc_module *m0 = linear_module(1.0), *m1 = linear_module(1.0);
    tgc_requires_grad(tgc_module_get(m1, "w"), 0);
    expect_one_recompile(f, m0, filled(2, 4, 1), m1, filled(2, 4, 1), "self.w");
    tgc_module_free(m0);
    tgc_module_free(m1);
    tgc_fn_free(f);
}

static void grad_mode_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    tgc_tensor *y, *x = filled(2, 2, 1);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    tgc_no_grad_push();
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    tgc_no_grad_pop();
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason, "grad mode changed (enabled -> disabled)");
    tgc_fn_free(f);
}

static void two_modules_of_one_structure_share_a_variant(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(linear_fwd, "shared", &c);
    tgc_module *m0 = linear_module(1.0), *m1 = linear_module(2.0);
    tgc_tensor *y, *x = filled(2, 4, 1);
    assert_int_equal(call1(f, m0, x, &y), TGC_OK);
    assert_first_is(y, 4.5);
    assert_int_equal(call1(f, m1, x, &y), TGC_OK);
    assert_first_is(y, 8.5); /* m1's own parameters, bound by position */
    assert_int_equal(stats_of(f).compiles, 1);
    assert_int_equal(n_recompile_logs, 0);
    tgc_module_free(m0);
    tgc_module_free(m1);
    tgc_fn_free(f);
}

static void module_identity_guard_when_asked(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.guard_module_identity = 1;
    tgc_fn *f = tgc_compile(linear_fwd, "guarded", &c);
    tgc_module *m0 = linear_module(1.0), *m1 = linear_module(2.0);
    expect_one_recompile(f, m0, filled(2, 4, 1), m1, filled(2, 4, 1),
                         "self is a different module object");
    tgc_module_free(m0);
    tgc_module_free(m1);
    tgc_fn_free(f);
}

static double scale_value = 2.0;
static tgc_tensor *captured_scale;

static tgc_status uses_capture(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_mul(in[0], captured_scale);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* The outside report: 12 calls with the captured tensor written in place between them gave
 * 8 compiles, 4 eager calls and the cache-limit warning. Its values are read at call time. */
static void captured_tensor_written_in_place_is_read_at_call_time(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(uses_capture, "captures", &c);
    captured_scale = filled(1, 1, scale_value);
    tgc_tensor *y, *x = filled(2, 2, 3);
    for (int i = 0; i < 12; i++) {
        assert_int_equal(tgc_copy_(captured_scale, filled(1, 1, 1.0 + i)), TGC_OK);
        assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
        assert_first_is(y, 3.0 * (1.0 + i));
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 11);
    assert_int_equal(s.eager_fallbacks, 0);
    assert_int_equal(s.cache_limit_hit, 0);
    assert_int_equal(n_warnings, 0);
    assert_int_equal(n_recompile_logs, 0);
    char *r = tgc_fn_explain(f);
    assert_non_null(strstr(r, "    captured tensor 0 (f32[1, 1]): this object, alive\n"));
    tgc_free(r);
    tgc_fn_free(f);
}

static tgc_status reads_captured_item(tgc_module *self, tgc_tensor *const *in, int n_in,
                                      tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    /* the value becomes a constant of the graph: the one case a version guard is needed */
    out[0] = tgc_mul_scalar(in[0], tgc_item_f64(captured_scale));
    return out[0] ? TGC_OK : tgc_last_status();
}

static void captured_value_read_while_tracing_is_guarded_on_its_version(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(reads_captured_item, "guarded", &c);
    captured_scale = filled(1, 1, 2.0);
    tgc_tensor *y, *x = filled(2, 2, 3);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_first_is(y, 6.0);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_int_equal(stats_of(f).compiles, 1);
    assert_int_equal(tgc_copy_(captured_scale, filled(1, 1, 5.0)), TGC_OK);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_first_is(y, 15.0);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason,
                        "captured tensor 0 (f32[1, 1]) was written in place after the trace read "
                        "its value with tgc_item_* (version 0 -> 1)");
    char *r = tgc_fn_explain(f);
    assert_non_null(strstr(r, "    captured tensor 0 (f32[1, 1]): this object, alive, version 1 "
                              "(its value was read while tracing)\n"));
    tgc_free(r);
    tgc_fn_free(f);
}

/* batch_norm in training mode updates its running statistics in place: on captured
 * statistics that used to invalidate the variant on every call. */
static tgc_tensor *captured_mean, *captured_var;

static tgc_status bn_on_captured_stats(tgc_module *self, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_batch_norm(in[0], captured_mean, captured_var, NULL, NULL, 1, 0.1, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void assert_tensors_close(tgc_tensor *a, tgc_tensor *b, double tol)
{
    int64_t n = tgc_numel(a);
    assert_int_equal(n, tgc_numel(b));
    float va[64], vb[64];
    assert_true(n <= 64);
    assert_int_equal(tgc_copy_to_host(a, va, (size_t)n * sizeof(float)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(b, vb, (size_t)n * sizeof(float)), TGC_OK);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)va[i] - vb[i]) <= tol * (1 + fabs((double)vb[i]))))
            fail_msg("element %lld: %.9g vs %.9g", (long long)i, va[i], vb[i]);
}

static void batch_norm_training_on_captured_stats_compiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(bn_on_captured_stats, "bn", &c);
    int64_t cs[1] = {3}, xs[4] = {4, 3, 2, 2};
    captured_mean = tgc_zeros(cs, 1, TGC_F32, tgc_cpu());
    captured_var = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *ref_mean = tgc_zeros(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *ref_var = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    for (int i = 0; i < 6; i++) {
        tgc_scope_push();
        tgc_tensor *x =
            tgc_add_scalar(tgc_mul_scalar(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), 1.0 + i), 0.5 * i);
        tgc_tensor *y, *want = tgc_batch_norm(x, ref_mean, ref_var, NULL, NULL, 1, 0.1, 1e-5);
        assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
        assert_tensors_close(y, want, 1e-4);
        assert_tensors_close(captured_mean, ref_mean, 1e-5);
        assert_tensors_close(captured_var, ref_var, 1e-5);
        tgc_scope_pop();
    }
    /* the statistics moved away from their start: the updates really happened */
    assert_true(fabs(tgc_item_f64(tgc_sum(captured_mean, NULL, 0, 0))) > 0.1);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 5);
    assert_int_equal(s.eager_fallbacks, 0);
    assert_int_equal(n_warnings, 0);
    tgc_fn_free(f);
}

static void freed_captured_tensor_recompiles(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(uses_capture, "guarded", &c);
    tgc_tensor *y, *x = filled(2, 2, 3);
    captured_scale = filled(1, 1, 2.0);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    tgc_tensor_free(captured_scale);
    captured_scale = filled(1, 1, 4.0);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_first_is(y, 12.0);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason, "captured tensor 0 (f32[1, 1]) was freed");
    tgc_fn_free(f);
}

/* ---- module attributes: hyperparameters the guards see ---- */

/* y = x * self.scale * self.enc.layer0.scale + self.num_heads: every attribute read at trace
 * time, through the public readers. */
static tgc_status uses_attrs(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in, (void)n_out;
    int64_t heads;
    double scale, inner;
    tgc_module *layer = tgc_module_get_child(tgc_module_get_child(self, "encoder"), "layer0");
    tgc_status st = tgc_module_attr_i64(self, "num_heads", &heads);
    if (st == TGC_OK)
        st = tgc_module_attr_f64(self, "scale", &scale);
    if (st == TGC_OK)
        st = tgc_module_attr_f64(layer, "scale", &inner);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_add_scalar(tgc_mul_scalar(in[0], scale * inner), (double)heads);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_module *attr_module(int64_t heads, double scale, double inner)
{
    tgc_module *m = tgc_module_create("net", NULL);
    tgc_module *enc = tgc_module_create("encoder", NULL);
    tgc_module *layer = tgc_module_create("layer0", NULL);
    assert_int_equal(tgc_module_child(m, "encoder", enc), TGC_OK);
    assert_int_equal(tgc_module_child(enc, "layer0", layer), TGC_OK);
    assert_int_equal(tgc_module_set_i64(m, "num_heads", heads), TGC_OK);
    assert_int_equal(tgc_module_set_f64(m, "scale", scale), TGC_OK);
    assert_int_equal(tgc_module_set_f64(layer, "scale", inner), TGC_OK);
    return m;
}

static void attribute_change_recompiles_with_its_name_and_values(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(uses_attrs, "attrs", &c);
    tgc_module *m = attr_module(2, 1.0, 0.5);
    tgc_tensor *y, *x = filled(2, 2, 4);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 4 * 0.5 + 2);
    /* unchanged, and set again to the same value: hits */
    assert_int_equal(tgc_module_set_i64(m, "num_heads", 2), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_int_equal(stats_of(f).compiles, 1);
    assert_int_equal(stats_of(f).cache_hits, 1);

    assert_int_equal(tgc_module_set_i64(m, "num_heads", 4), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 4 * 0.5 + 4);
    assert_string_equal(stats_of(f).last_recompile_reason, "self.num_heads changed (2 -> 4)");
    assert_string_equal(last_log, "tgc: recompiling 'attrs' (variant 2 of 8): self.num_heads "
                                  "changed (2 -> 4)");

    tgc_module *layer = tgc_module_get_child(tgc_module_get_child(m, "encoder"), "layer0");
    assert_int_equal(tgc_module_set_f64(layer, "scale", 0.25), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 4 * 0.25 + 4);
    assert_string_equal(stats_of(f).last_recompile_reason,
                        "self.encoder.layer0.scale changed (0.5 -> 0.25)");

    /* back to the first values: the first variant matches again */
    assert_int_equal(tgc_module_set_i64(m, "num_heads", 2), TGC_OK);
    assert_int_equal(tgc_module_set_f64(layer, "scale", 0.5), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 4 * 0.5 + 2);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 3);
    assert_int_equal(s.cache_hits, 2);
    assert_int_equal(n_recompile_logs, 2);
    tgc_module_free(m);
    tgc_fn_free(f);
}

static void string_attribute_change_recompiles(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(uses_attrs, "attrs", &c);
    tgc_module *m = attr_module(1, 1.0, 1.0);
    assert_int_equal(tgc_module_set_str(m, "act", "gelu"), TGC_OK);
    tgc_tensor *y, *x = filled(2, 2, 1);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_int_equal(tgc_module_set_str(m, "act", "relu"), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_string_equal(stats_of(f).last_recompile_reason,
                        "self.act changed (\"gelu\" -> \"relu\")");
    /* an attribute added later is a structure change that names it */
    assert_int_equal(tgc_module_set_i64(m, "depth", 3), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_string_equal(stats_of(f).last_recompile_reason,
                        "self structure changed: self.depth was added");
    assert_int_equal(stats_of(f).compiles, 3);
    tgc_module_free(m);
    tgc_fn_free(f);
}

static void modules_with_equal_attributes_share_a_variant(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(uses_attrs, "attrs", &c);
    tgc_module *m0 = attr_module(3, 2.0, 0.5), *m1 = tgc_module_create("net", NULL);
    /* the same attributes set in another order */
    tgc_module *enc = tgc_module_create("encoder", NULL), *layer = tgc_module_create("l", NULL);
    assert_int_equal(tgc_module_set_f64(m1, "scale", 2.0), TGC_OK);
    assert_int_equal(tgc_module_set_i64(m1, "num_heads", 3), TGC_OK);
    assert_int_equal(tgc_module_set_f64(layer, "scale", 0.5), TGC_OK);
    assert_int_equal(tgc_module_child(m1, "encoder", enc), TGC_OK);
    assert_int_equal(tgc_module_child(enc, "layer0", layer), TGC_OK);
    assert_true(tgc_module_signature(m0) == tgc_module_signature(m1));
    tgc_tensor *y, *x = filled(2, 2, 1);
    assert_int_equal(call1(f, m0, x, &y), TGC_OK);
    assert_first_is(y, 4.0);
    assert_int_equal(call1(f, m1, x, &y), TGC_OK);
    assert_first_is(y, 4.0);
    assert_int_equal(stats_of(f).compiles, 1);
    assert_int_equal(n_recompile_logs, 0);
    tgc_module_free(m0);
    tgc_module_free(m1);
    tgc_fn_free(f);
}

static void attributes_read_eagerly_give_current_values(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.backend = TGC_BACKEND_EAGER;
    tgc_fn *f = tgc_compile(uses_attrs, "attrs", &c);
    tgc_module *m = attr_module(1, 3.0, 1.0);
    tgc_tensor *y, *x = filled(2, 2, 2);
    for (int k = 1; k <= 3; k++) {
        assert_int_equal(tgc_module_set_i64(m, "num_heads", k), TGC_OK);
        assert_int_equal(call1(f, m, x, &y), TGC_OK);
        assert_first_is(y, 6.0 + k);
        assert_int_equal(uses_attrs(m, &x, 1, &y, 1), TGC_OK); /* a plain C call */
        assert_first_is(y, 6.0 + k);
    }
    /* a missing attribute reaches the caller of tgc_call with its status */
    tgc_module *bare = tgc_module_create("bare", NULL);
    assert_int_equal(call1(f, bare, x, &y), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_module_attr_i64: module 'bare' has no attribute "
                                          "'num_heads' (set it with tgc_module_set_i64 before "
                                          "the call)");
    tgc_module_free(bare);
    tgc_module_free(m);
    tgc_fn_free(f);
}

/* The cache-limit message gives the advice that fits the last reason. */
static void expect_limit_advice(const char *reason, const char *advice)
{
    if (!strstr(last_log, reason))
        fail_msg("warning '%s' lacks the reason '%s'", last_log, reason);
    if (!strstr(last_log, advice))
        fail_msg("warning '%s' lacks the advice '%s'", last_log, advice);
    assert_null(strstr(last_log, "mark dims dynamic"));
    assert_int_equal(n_warnings, 1);
}

static void cache_limit_advice_matches_the_reason(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.cache_size_limit = 1;
    tgc_tensor *y, *x = filled(2, 4, 1);

    tgc_fn *f = tgc_compile(linear_fwd, "limited", &c);
    tgc_module *m = linear_module(1.0);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    tgc_module_train(m, 0);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 4.5);
    expect_limit_advice("last reason: self.training changed (true -> false)",
                        "Raise cfg.cache_size_limit, compile one tgc_fn for training and one for "
                        "eval instead of switching tgc_module_train on one, or see "
                        "tgc_fn_explain().");
    tgc_module_free(m);
    tgc_fn_free(f);

    c = test_config();
    c.cache_size_limit = 1;
    f = tgc_compile(uses_attrs, "limited", &c);
    m = attr_module(2, 1.0, 1.0);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_int_equal(tgc_module_set_f64(m, "scale", 3.0), TGC_OK);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    assert_first_is(y, 5.0);
    expect_limit_advice("self.scale changed (1 -> 3)",
                        "pass a value that changes from call to call as an input tensor instead "
                        "of a module attribute");
    tgc_module_free(m);
    tgc_fn_free(f);

    c = test_config();
    c.cache_size_limit = 1;
    f = tgc_compile(uses_capture, "limited", &c);
    captured_scale = filled(1, 1, 2.0);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    tgc_tensor_free(captured_scale);
    captured_scale = filled(1, 1, 3.0);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_first_is(y, 3.0);
    expect_limit_advice("captured tensor 0 (f32[1, 1]) was freed",
                        "pass the captured tensor as an input instead");
    tgc_fn_free(f);

    /* ERROR mode gives the same advice */
    c = test_config();
    c.cache_size_limit = 1;
    c.on_cache_limit = TGC_ON_LIMIT_ERROR;
    f = tgc_compile(add_one, "strict", &c);
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    tgc_no_grad_push();
    assert_int_equal(call1(f, NULL, x, &y), TGC_ERR_CACHE_LIMIT);
    tgc_no_grad_pop();
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'strict' hit cache_size_limit (1); last reason: grad mode "
                        "changed (enabled -> disabled). Raise cfg.cache_size_limit, compile one "
                        "tgc_fn per grad mode, or see tgc_fn_explain().");
    tgc_fn_free(f);
}

static tgc_status reads_item(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    double k = tgc_item_f64(in[1]); /* a scalar input read at trace time: specialized */
    out[0] = tgc_mul_scalar(in[0], k);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void item_value_guard_recompiles_once(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(reads_item, "guarded", &c);
    tgc_tensor *y, *x = filled(2, 2, 3);
    tgc_tensor *in_a[2] = {x, filled(1, 1, 2)}, *in_b[2] = {x, filled(1, 1, 7)};
    assert_int_equal(tgc_call(f, NULL, in_a, 2, &y, 1), TGC_OK);
    assert_first_is(y, 6.0);
    assert_int_equal(tgc_call(f, NULL, in_b, 2, &y, 1), TGC_OK);
    assert_first_is(y, 21.0);
    assert_int_equal(tgc_call(f, NULL, in_b, 2, &y, 1), TGC_OK);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason,
                        "value of input 1 (read with tgc_item_*) changed: expected 2, got 7");
    tgc_fn_free(f);
}

static void input_count_change_is_refused_without_a_compile(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "guarded", &c);
    tgc_tensor *y, *x = filled(2, 2, 1);
    tgc_tensor *two[2] = {x, x};
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(tgc_call(f, NULL, two, 2, &y, 1), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "tgc_call: 'guarded' was traced with 1 input, "
                                             "called with 2 (n_in)"));
    assert_int_equal(stats_of(f).compiles, 1);
    tgc_fn_free(f);
}

static void cache_limit_warns_once_then_runs_eagerly(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_NEVER;
    c.cache_size_limit = 2;
    tgc_fn *f = tgc_compile(add_one, "limited", &c);
    tgc_tensor *y;
    for (int n = 2; n < 8; n++) {
        assert_int_equal(call1(f, NULL, filled(n, 1, n), &y), TGC_OK);
        assert_first_is(y, n + 1.0);
        assert_int_equal(tgc_size(y, 0), n);
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.variants, 2);
    assert_int_equal(s.eager_fallbacks, 4);
    assert_int_equal(s.cache_limit_hit, 1);
    assert_int_equal(n_warnings, 1);
    assert_string_equal(last_log,
                        "tgc: 'limited' hit cache_size_limit (2); last reason: input 0 size "
                        "mismatch at dim 0: expected 3, got 4; running eagerly from now on. Raise "
                        "cfg.cache_size_limit, mark dims dynamic (tgc_mark_dynamic or "
                        "cfg.dynamic), or see tgc_fn_explain().");
    /* shapes that have a variant still hit it */
    assert_int_equal(call1(f, NULL, filled(2, 1, 0), &y), TGC_OK);
    assert_int_equal(stats_of(f).cache_hits, 1);
    tgc_fn_free(f);
}

static void cache_limit_error_mode_fails_with_status(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_NEVER;
    c.cache_size_limit = 1;
    c.on_cache_limit = TGC_ON_LIMIT_ERROR;
    tgc_fn *f = tgc_compile(add_one, "strict", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(2, 1, 0), &y), TGC_OK);
    assert_int_equal(call1(f, NULL, filled(3, 1, 0), &y), TGC_ERR_CACHE_LIMIT);
    assert_null(y);
    assert_non_null(strstr(tgc_last_error(), "'strict' hit cache_size_limit (1)"));
    assert_int_equal(n_warnings, 0);
    tgc_fn_free(f);
}

static void accumulated_limit_counts_every_function(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.accumulated_cache_size_limit = 2;
    tgc_fn *f1 = tgc_compile(add_one, "one", &c), *f2 = tgc_compile(add_one, "two", &c),
           *f3 = tgc_compile(add_one, "three", &c);
    tgc_tensor *y, *x = filled(2, 2, 1);
    assert_int_equal(call1(f1, NULL, x, &y), TGC_OK);
    assert_int_equal(call1(f2, NULL, x, &y), TGC_OK);
    assert_int_equal(call1(f3, NULL, x, &y), TGC_OK);
    assert_first_is(y, 2.0);
    assert_int_equal(stats_of(f3).compiles, 0);
    assert_int_equal(stats_of(f3).eager_fallbacks, 1);
    assert_non_null(strstr(last_log, "hit accumulated_cache_size_limit (2)"));
    tgc_fn_free(f1);
    tgc_fn_free(f2);
    tgc_fn_free(f3);
}

static void dynamic_auto_compiles_at_most_twice_for_ten_batch_sizes(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "sweep", &c);
    tgc_tensor *y;
    for (int i = 0; i < 10; i++) {
        int64_t n = 8 + 5 * i;
        assert_int_equal(call1(f, NULL, filled(n, 3, i), &y), TGC_OK);
        assert_int_equal(tgc_size(y, 0), n);
        assert_first_is(y, i + 1.0);
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(n_dynamic_logs, 1);
    char *g = tgc_fn_graph(f, 0, 0);
    assert_non_null(strstr(g, "s0=in0.size(0)"));
    tgc_free(g);
    tgc_fn_free(f);
}

static void dynamic_always_compiles_once_and_never_compiles_per_size(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    c.cache_size_limit = 16;
    tgc_fn *always = tgc_compile(add_one, "always", &c);
    c.dynamic = TGC_DYNAMIC_NEVER;
    tgc_fn *never = tgc_compile(add_one, "never", &c);
    tgc_tensor *y;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(call1(always, NULL, filled(2 + i, 3 + i, 0), &y), TGC_OK);
        assert_int_equal(call1(never, NULL, filled(2 + i, 3, 0), &y), TGC_OK);
    }
    assert_int_equal(stats_of(always).compiles, 1);
    assert_int_equal(stats_of(never).compiles, 10);
    tgc_fn_free(always);
    tgc_fn_free(never);
}

static void sizes_zero_and_one_stay_specialized(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(add_one, "ones", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(4, 3, 0), &y), TGC_OK);
    assert_int_equal(call1(f, NULL, filled(1, 3, 0), &y), TGC_OK);
    assert_int_equal(tgc_size(y, 0), 1);
    assert_int_equal(stats_of(f).compiles, 2);
    assert_non_null(strstr(stats_of(f).last_recompile_reason, "(0 and 1 are specialized)"));
    tgc_fn_free(f);
}

static void mark_dynamic_makes_a_dim_symbolic_on_first_compile(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "marked", &c);
    tgc_tensor *y;
    for (int n = 2; n < 6; n++) {
        tgc_tensor *x = filled(n, 3, 0);
        tgc_mark_dynamic(x, 0);
        assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    }
    assert_int_equal(stats_of(f).compiles, 1);
    tgc_fn_free(f);
}

static tgc_status reads_size(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_mul_scalar(in[0], (double)tgc_size(in[0], 0));
    return out[0] ? TGC_OK : tgc_last_status();
}

static void reading_a_dynamic_size_specializes_it_and_logs(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(reads_size, "sized", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(4, 3, 1), &y), TGC_OK);
    assert_first_is(y, 4.0);
    assert_int_equal(n_dynamic_logs, 1);
    assert_non_null(strstr(last_log, "specializing it to 4"));
    assert_int_equal(call1(f, NULL, filled(5, 3, 1), &y), TGC_OK);
    assert_first_is(y, 5.0); /* a new size recompiles instead of reusing the value 4 */
    assert_int_equal(stats_of(f).compiles, 2);
    assert_non_null(strstr(stats_of(f).last_recompile_reason,
                           "input 0 dim 0 was specialized to 4 by tgc_size() in 'sized' and is "
                           "now 5; use tgc_flatten"));
    tgc_fn_free(f);
}

static tgc_status broadcast_two(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void dynamic_dims_equal_at_trace_are_guarded_equal(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(broadcast_two, "pair", &c);
    tgc_tensor *y;
    tgc_tensor *a[2] = {filled(4, 3, 1), filled(4, 3, 2)};
    assert_int_equal(tgc_call(f, NULL, a, 2, &y, 1), TGC_OK);
    tgc_tensor *b[2] = {filled(6, 3, 1), filled(6, 3, 2)};
    assert_int_equal(tgc_call(f, NULL, b, 2, &y, 1), TGC_OK);
    assert_first_is(y, 3.0);
    assert_int_equal(stats_of(f).compiles, 1);
    /* mismatched sizes: the guard rejects the variant and the trace reports the error */
    tgc_tensor *bad[2] = {filled(6, 3, 1), filled(5, 3, 2)};
    assert_int_equal(tgc_call(f, NULL, bad, 2, &y, 1), TGC_ERR_SHAPE);
    assert_null(y);
    tgc_fn_free(f);
}

static tgc_status pools(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_max_pool2d(in[0], &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {1, 1}});
    return out[0] ? TGC_OK : tgc_last_status();
}

static void dynamic_window_fit_is_guarded(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(pools, "pools", &c);
    int64_t big[4] = {1, 1, 8, 9}, fits[4] = {1, 1, 3, 5}, small[4] = {1, 1, 2, 5};
    tgc_tensor *y, *x = tgc_ones(big, 4, TGC_F32, tgc_cpu());
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_int_equal(tgc_size(y, 2), 6);
    x = tgc_ones(fits, 4, TGC_F32, tgc_cpu());
    assert_int_equal(call1(f, NULL, x, &y), TGC_OK);
    assert_int_equal(tgc_size(y, 2), 1);
    assert_int_equal(stats_of(f).compiles, 1);
    /* a 2-high input no longer fits the window: the variant's guard rejects it and the
     * retrace reports the shape error */
    x = tgc_ones(small, 4, TGC_F32, tgc_cpu());
    assert_int_equal(call1(f, NULL, x, &y), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "tgc_max_pool2d"));
    char *r = tgc_fn_explain(f);
    assert_non_null(strstr(r, ">= 0"));
    tgc_free(r);
    tgc_fn_free(f);
}

static tgc_status breaks_graph(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *s = tgc_sum(in[0], NULL, 0, 0);
    double total = tgc_item_f64(s); /* needs a computed value: a graph break */
    out[0] = tgc_add_scalar(in[0], total);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void graph_break_runs_eagerly_and_is_logged(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(breaks_graph, "breaks", &c);
    tgc_tensor *y;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(call1(f, NULL, filled(2, 2, 1), &y), TGC_OK);
        assert_first_is(y, 5.0);
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 0); /* traced once, compiled nothing; later calls go straight
                                        to eager */
    assert_int_equal(s.recompiles, 0);
    assert_int_equal(s.variants, 1);
    assert_int_equal(s.graph_breaks, 1);
    assert_int_equal(s.eager_fallbacks, 3);
    assert_int_equal(n_recompile_logs, 1);
    assert_non_null(strstr(last_log, "graph break in 'breaks'"));
    assert_non_null(strstr(last_log, "reads the value of a traced tensor"));
    tgc_fn_free(f);
}

static void graph_break_with_fullgraph_is_an_error(void **state)
{
    (void)state;
    tgc_config c = test_config();
    c.fullgraph = 1;
    tgc_fn *f = tgc_compile(breaks_graph, "breaks", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(2, 2, 1), &y), TGC_ERR_GRAPH_BREAK);
    assert_null(y);
    assert_non_null(strstr(tgc_last_error(), "graph break in 'breaks' and cfg.fullgraph is set"));
    assert_int_equal(call1(f, NULL, filled(2, 2, 1), &y), TGC_ERR_GRAPH_BREAK);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.variants, 0);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.graph_breaks, 2); /* every call traces again and breaks again */
    tgc_fn_free(f);
}

static tgc_status makes_constant(tgc_module *self, tgc_tensor *const *in, int n_in,
                                 tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int64_t s[1] = {3};
    tgc_tensor *k = tgc_full(s, 1, 10.0, TGC_F32, tgc_cpu()); /* a trace-time constant */
    out[0] = tgc_add(in[0], k);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void tensors_created_while_tracing_are_constants(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(makes_constant, "consts", &c);
    tgc_tensor *y;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(call1(f, NULL, filled(2, 3, i), &y), TGC_OK);
        assert_first_is(y, 10.0 + i);
    }
    assert_int_equal(stats_of(f).compiles, 1);
    tgc_fn_free(f);
}

static void explain_lists_variants_guards_and_reasons(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(linear_fwd, "explained", &c);
    tgc_module *m = linear_module(1.0);
    tgc_tensor *y, *x = filled(2, 4, 1);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    tgc_module_train(m, 0);
    assert_int_equal(call1(f, m, x, &y), TGC_OK);
    char *r = tgc_fn_explain(f);
    assert_non_null(r);
    assert_non_null(strstr(r, "tgc_fn 'explained' (backend "));
    assert_non_null(strstr(r, "): 2 calls, 0 cache hits, 2 compiles"));
    assert_non_null(strstr(
        r,
        "variant 2 (most recently hit): compiled because: self.training changed (true -> false)"));
    assert_non_null(strstr(r, "variant 1: compiled because: first call"));
    assert_non_null(strstr(r, "input 0: f32 [2, 4] contiguous cpu"));
    tgc_free(r);
    char *dot = tgc_fn_graph(f, 0, 1);
    assert_non_null(strstr(dot, "digraph tgc"));
    tgc_free(dot);
    assert_null(tgc_fn_graph(f, 5, 0));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_module_free(m);
    tgc_fn_free(f);
}

static int n_graph_logs;
static void count_graph_logs(unsigned channel, const char *msg, void *user)
{
    (void)user;
    if (channel == TGC_LOG_GRAPH && strstr(msg, "tgc: graph of 'dumped' variant "))
        n_graph_logs++;
}

static int file_has(const char *path, const char *text)
{
    char buf[4096] = {0};
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

static void graph_channel_and_dump_dir_show_each_variant(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_dump_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tgc_config c = tgc_config_default();
    c.log = TGC_LOG_GRAPH;
    c.log_fn = count_graph_logs;
    c.dump_dir = dir;
    c.dynamic = TGC_DYNAMIC_NEVER;
    n_graph_logs = 0;
    tgc_fn *f = tgc_compile(add_one, "dumped", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(2, 3, 0), &y), TGC_OK);
    assert_int_equal(call1(f, NULL, filled(4, 3, 0), &y), TGC_OK);
    assert_int_equal(n_graph_logs, 2);
    char path[256];
    for (int v = 1; v <= 2; v++) {
        snprintf(path, sizeof path, "%s/dumped_v%d.graph.txt", dir, v);
        assert_true(file_has(path, v == 1 ? "add_scalar(%0) {f=1} : f32[2, 3]"
                                          : "add_scalar(%0) {f=1} : f32[4, 3]"));
        remove(path);
        snprintf(path, sizeof path, "%s/dumped_v%d.dot", dir, v);
        assert_true(file_has(path, "digraph tgc"));
        remove(path);
    }
    rmdir(dir);
    tgc_fn_free(f);
}

static void bad_calls_return_the_right_status(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(add_one, "bad", &c);
    tgc_tensor *y, *none = NULL;
    assert_int_equal(tgc_call(NULL, NULL, &none, 1, &y, 1), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
    assert_int_equal(tgc_call(f, NULL, &none, 1, &y, 1), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_call: 'bad' in[0] is NULL");
    assert_int_equal(tgc_call(f, NULL, NULL, 1, &y, 1), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_call(f, NULL, &none, -1, &y, 1), TGC_ERR_INVALID_ARG);
    assert_null(tgc_compile(NULL, "x", &c));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_fn_stats(NULL, NULL), TGC_ERR_INVALID_ARG);
    assert_null(tgc_fn_explain(NULL));
    tgc_fn_free(f);
}

static tgc_status fails_shape(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_matmul(in[0], in[0]); /* [2, 3] @ [2, 3]: inner dims differ */
    return out[0] ? TGC_OK : tgc_last_status();
}

static void op_errors_while_tracing_reach_the_caller(void **state)
{
    (void)state;
    tgc_config c = test_config();
    tgc_fn *f = tgc_compile(fails_shape, "fails", &c);
    tgc_tensor *y;
    assert_int_equal(call1(f, NULL, filled(2, 3, 1), &y), TGC_ERR_SHAPE);
    assert_null(y);
    assert_non_null(strstr(tgc_last_error(), "tgc_matmul"));
    assert_int_equal(stats_of(f).variants, 0);
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cache_hit_reuses_the_variant, setup, teardown),
        cmocka_unit_test_setup_teardown(dtype_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(rank_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(size_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(contiguity_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(training_flag_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(module_structure_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(requires_grad_change_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(grad_mode_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(two_modules_of_one_structure_share_a_variant, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(module_identity_guard_when_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(captured_tensor_written_in_place_is_read_at_call_time,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(captured_value_read_while_tracing_is_guarded_on_its_version,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(batch_norm_training_on_captured_stats_compiles_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(freed_captured_tensor_recompiles, setup, teardown),
        cmocka_unit_test_setup_teardown(item_value_guard_recompiles_once, setup, teardown),
        cmocka_unit_test_setup_teardown(input_count_change_is_refused_without_a_compile, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(attribute_change_recompiles_with_its_name_and_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(string_attribute_change_recompiles, setup, teardown),
        cmocka_unit_test_setup_teardown(modules_with_equal_attributes_share_a_variant, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(attributes_read_eagerly_give_current_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cache_limit_advice_matches_the_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_limit_warns_once_then_runs_eagerly, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_limit_error_mode_fails_with_status, setup, teardown),
        cmocka_unit_test_setup_teardown(accumulated_limit_counts_every_function, setup, teardown),
        cmocka_unit_test_setup_teardown(dynamic_auto_compiles_at_most_twice_for_ten_batch_sizes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(dynamic_always_compiles_once_and_never_compiles_per_size,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(sizes_zero_and_one_stay_specialized, setup, teardown),
        cmocka_unit_test_setup_teardown(mark_dynamic_makes_a_dim_symbolic_on_first_compile, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(reading_a_dynamic_size_specializes_it_and_logs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(dynamic_dims_equal_at_trace_are_guarded_equal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(dynamic_window_fit_is_guarded, setup, teardown),
        cmocka_unit_test_setup_teardown(graph_break_runs_eagerly_and_is_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(graph_break_with_fullgraph_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(tensors_created_while_tracing_are_constants, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(explain_lists_variants_guards_and_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(graph_channel_and_dump_dir_show_each_variant, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bad_calls_return_the_right_status, setup, teardown),
        cmocka_unit_test_setup_teardown(op_errors_while_tracing_reach_the_caller, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
