/* Random numbers compiled natively by the LLVM backend: tgc_rand, tgc_randn and tgc_dropout
 * lower to loop kernels whose Philox4x32-10 draws (KV_RAND) take their seed and base counter
 * as per-call kernel arguments. Each case compiles a model on LLVM and on interp (the
 * oracle), runs both from the same seed and requires bit-equal outputs and the same stream
 * offset afterwards; the LLVM compile's kernel and fusion logs show the draws inside loop
 * kernels and no opaque group. Skipped when built without LLVM. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TGC_HAVE_LLVM
#include "runtime/philox.h"
#include "tgc/tgc.h"
#include "unit/unit_test_util.h"

#define MAX_OUT 4
#define SEED    20261201u

/* ---- the model functions: shapes and dtypes come from the test through globals ---- */

static int64_t g_shape[4];
static int g_ndim;
static tgc_dtype g_dt;
static double g_p = 0.25;

/* out = rand(shape) */
static tgc_status fn_rand(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)m, (void)in, (void)n_in, (void)n_out;
    out[0] = tgc_rand(g_shape, g_ndim, g_dt, tgc_cpu());
    return out[0] ? TGC_OK : tgc_last_status();
}

/* out = randn(shape) * 2 + x (the draw fused with its consumers) */
static tgc_status fn_randn_fused(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *r = tgc_randn(g_shape, g_ndim, g_dt, tgc_cpu());
    out[0] = tgc_add(tgc_mul_scalar(r, 2.0), in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* out = dropout(relu(x) + 1) * 3: dropout fused with its producers and its consumer */
static tgc_status fn_dropout_fused(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                   int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *h = tgc_add_scalar(tgc_relu(in[0]), 1.0);
    out[0] = tgc_mul_scalar(tgc_dropout(h, g_p, 1), 3.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* Two draws between which a producer's group is older than the first draw's: relu(x) starts
 * a group, rand draws in the next, and the dropout of relu(x) must not join relu's group (it
 * would draw before the rand). out = rand + dropout(relu(x)), and the draws separately. */
static tgc_status fn_two_draws(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *h = tgc_relu(in[0]);
    tgc_tensor *r = tgc_rand(g_shape, g_ndim, tgc_dtype_of(in[0]), tgc_cpu());
    tgc_tensor *d = tgc_dropout(h, g_p, 1);
    out[0] = tgc_add(r, d);
    out[1] = d;
    out[2] = tgc_mul_scalar(r, 1.0);
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

/* Draws inside a reduction kernel: out[0] = max over dim 1 of dropout(x) (a prologue draw,
 * full shaped); out[1] = x + dropout(max over dim 1 of x, keepdim) (a row-shaped draw read
 * back by the next phase: one counter per row, the same in every lane). */
static tgc_status fn_dropout_reductions(tgc_module *m, tgc_tensor *const *in, int n_in,
                                        tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    const int dim = 1;
    out[0] = tgc_max(tgc_dropout(in[0], g_p, 1), &dim, 1, 0);
    out[1] = tgc_add(in[0], tgc_dropout(tgc_max(in[0], &dim, 1, 1), g_p, 1));
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

/* ---- running and comparing ---- */

/* Raw bytes of t (contiguous copy). Caller frees. */
static unsigned char *bytes_of(tgc_tensor *t, size_t *n)
{
    tgc_tensor *c = tgc_contiguous(t);
    assert_non_null(c);
    *n = (size_t)tgc_numel(c) * tgc_dtype_size(tgc_dtype_of(c));
    unsigned char *p = malloc(*n ? *n : 1);
    assert_non_null(p);
    assert_int_equal(tgc_copy_to_host(c, p, *n), TGC_OK);
    return p;
}

static void expect_same_bits(const char *what, tgc_tensor *got, tgc_tensor *want)
{
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
    assert_int_equal(tgc_ndim(got), tgc_ndim(want));
    for (int d = 0; d < tgc_ndim(got); d++)
        assert_int_equal(tgc_size(got, d), tgc_size(want, d));
    size_t na, nb;
    unsigned char *a = bytes_of(got, &na), *b = bytes_of(want, &nb);
    assert_int_equal(na, nb);
    size_t es = tgc_dtype_size(tgc_dtype_of(got));
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i])
            fail_msg("%s: element %zu differs from interp's bits", what, i / es);
    free(a);
    free(b);
}

typedef struct compiled {
    tgc_fn *llvm, *interp;
    test_log *log;
} compiled;

static compiled compile_both(tgc_model_fn fn)
{
    compiled c;
    c.log = calloc(1, sizeof *c.log);
    assert_non_null(c.log);
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    cfg.log = TGC_LOG_GRAPH | TGC_LOG_KERNELS;
    cfg.log_fn = test_log_capture;
    cfg.log_user = c.log;
    c.llvm = tgc_compile(fn, "random", &cfg);
    tgc_config icfg = tgc_config_default();
    icfg.backend = TGC_BACKEND_INTERP;
    c.interp = tgc_compile(fn, "random", &icfg);
    assert_non_null(c.llvm);
    assert_non_null(c.interp);
    return c;
}

static void compiled_free(compiled *c)
{
    tgc_fn_free(c->llvm);
    tgc_fn_free(c->interp);
    free(c->log);
}

/* One call on each backend from the same seed: same bits, same stream offset after. */
static void call_both(const compiled *c, const char *what, tgc_tensor **in, int n_in, int n_out)
{
    tgc_tensor *got[MAX_OUT] = {0}, *want[MAX_OUT] = {0};
    tgc_manual_seed(SEED);
    if (tgc_call(c->interp, NULL, in, n_in, want, n_out) != TGC_OK)
        fail_msg("%s on interp: %s", what, tgc_last_error());
    uint64_t off_interp = tgc_rng_reserve(0);
    tgc_manual_seed(SEED);
    if (tgc_call(c->llvm, NULL, in, n_in, got, n_out) != TGC_OK)
        fail_msg("%s on llvm: %s", what, tgc_last_error());
    uint64_t off_llvm = tgc_rng_reserve(0);
    assert_int_equal(off_llvm, off_interp);
    char name[96];
    for (int k = 0; k < n_out; k++) {
        snprintf(name, sizeof name, "%s out[%d]", what, k);
        expect_same_bits(name, got[k], want[k]);
    }
}

/* The LLVM compile ran every node in kernels: its fusion log has no opaque group, its kernel
 * log shows n_draws Philox draws, and it launched `kernels` kernels. */
static void expect_native(const compiled *c, int n_draws, int kernels)
{
    if (strstr(c->log->text, "opaque"))
        fail_msg("an opaque group in:\n%s", c->log->text);
    int n = 0;
    for (const char *p = c->log->text; (p = strstr(p, "philox")); p++)
        n++;
    assert_int_equal(n, n_draws);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(c->llvm, &st), TGC_OK);
    assert_int_equal(st.kernels_last_variant, kernels);
}

static tgc_tensor *input(const int64_t *shape, int ndim, tgc_dtype dt)
{
    tgc_manual_seed(7);
    tgc_tensor *x = tgc_randn(shape, ndim, TGC_F32, tgc_cpu());
    x = tgc_cast(x, dt);
    assert_non_null(x);
    return x;
}

static void set_shape(const int64_t *s, int ndim, tgc_dtype dt)
{
    memcpy(g_shape, s, (size_t)ndim * sizeof *s);
    g_ndim = ndim;
    g_dt = dt;
}

static const tgc_dtype k_floats[] = {TGC_F32, TGC_F64, TGC_F16, TGC_BF16};

/* sizes around the vector widths (4, 8, 16 lanes) and the 16384-element split */
static const int64_t k_shapes[][3] = {{1, 1, 1},   {1, 1, 7},     {1, 3, 5},
                                      {2, 17, 31}, {1, 1, 16385}, {1, 1000, 37}};

static void rand_uniform_equals_interp(void **state)
{
    (void)state;
    for (int d = 0; d < N_OF(k_floats); d++)
        for (int s = 0; s < N_OF(k_shapes); s++) {
            set_shape(k_shapes[s], 3, k_floats[d]);
            compiled c = compile_both(fn_rand);
            char what[64];
            snprintf(what, sizeof what, "rand %s shape %d", tgc_dtype_name(k_floats[d]), s);
            call_both(&c, what, NULL, 0, 1);
            /* a second call draws fresh counters: still interp's */
            call_both(&c, what, NULL, 0, 1);
            expect_native(&c, 1, 1);
            compiled_free(&c);
        }
}

static void randn_fused_equals_interp(void **state)
{
    (void)state;
    for (int d = 0; d < N_OF(k_floats); d++)
        for (int s = 0; s < N_OF(k_shapes); s++) {
            set_shape(k_shapes[s], 3, k_floats[d]);
            tgc_tensor *x = input(k_shapes[s], 3, k_floats[d]);
            compiled c = compile_both(fn_randn_fused);
            char what[64];
            snprintf(what, sizeof what, "randn %s shape %d", tgc_dtype_name(k_floats[d]), s);
            call_both(&c, what, &x, 1, 1);
            expect_native(&c, 1, 1); /* randn, scale and add: one kernel */
            compiled_free(&c);
        }
}

static void dropout_fuses_with_producer_and_equals_interp(void **state)
{
    (void)state;
    for (int d = 0; d < N_OF(k_floats); d++)
        for (int s = 0; s < N_OF(k_shapes); s++) {
            tgc_tensor *x = input(k_shapes[s], 3, k_floats[d]);
            compiled c = compile_both(fn_dropout_fused);
            char what[64];
            snprintf(what, sizeof what, "dropout %s shape %d", tgc_dtype_name(k_floats[d]), s);
            call_both(&c, what, &x, 1, 1);
            expect_native(&c, 1, 1); /* relu, add, dropout, scale: one kernel */
            compiled_free(&c);
        }
}

static void dropout_probabilities_equal_interp(void **state)
{
    (void)state;
    static const double ps[] = {0.5, 0.9, 1.0};
    const int64_t s[2] = {33, 9};
    tgc_tensor *x = input(s, 2, TGC_F32);
    for (int i = 0; i < N_OF(ps); i++) {
        g_p = ps[i];
        compiled c = compile_both(fn_dropout_fused);
        call_both(&c, "dropout p", &x, 1, 1);
        compiled_free(&c);
    }
    g_p = 0.25;
}

static void two_draws_keep_interp_order(void **state)
{
    (void)state;
    const int64_t s[2] = {5, 19};
    set_shape(s, 2, TGC_F32);
    tgc_tensor *x = input(s, 2, TGC_F32);
    compiled c = compile_both(fn_two_draws);
    call_both(&c, "two draws", &x, 1, 3);
    call_both(&c, "two draws again", &x, 1, 3);
    if (strstr(c.log->text, "opaque"))
        fail_msg("an opaque group in:\n%s", c.log->text);
    compiled_free(&c);
}

static void draws_inside_reductions_equal_interp(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{4, 37}, {9, 1}, {3, 100}};
    for (int i = 0; i < N_OF(shapes); i++) {
        tgc_tensor *x = input(shapes[i], 2, TGC_F32);
        compiled c = compile_both(fn_dropout_reductions);
        call_both(&c, "draws in reductions", &x, 1, 2);
        if (strstr(c.log->text, "opaque"))
            fail_msg("an opaque group in:\n%s", c.log->text);
        compiled_free(&c);
    }
}

static void dynamic_shapes_draw_per_call_size(void **state)
{
    (void)state;
    compiled c = compile_both(fn_dropout_fused);
    static const int64_t rows[] = {3, 1, 64, 257};
    for (int i = 0; i < N_OF(rows); i++) {
        int64_t s[2] = {rows[i], 13};
        tgc_tensor *x = input(s, 2, TGC_F32);
        tgc_mark_dynamic(x, 0);
        char what[64];
        snprintf(what, sizeof what, "dynamic rows %lld", (long long)rows[i]);
        call_both(&c, what, &x, 1, 1);
    }
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(c.llvm, &st), TGC_OK);
    assert_true(st.variants <= 2); /* one symbolic variant serves the sizes (after the first) */
    expect_native(&c, (int)st.variants, 1);
    compiled_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(rand_uniform_equals_interp, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(randn_fused_equals_interp, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(dropout_fuses_with_producer_and_equals_interp, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(dropout_probabilities_equal_interp, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(two_draws_keep_interp_order, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(draws_inside_reductions_equal_interp, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(dynamic_shapes_draw_per_call_size, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
#else
static void skipped(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(skipped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
