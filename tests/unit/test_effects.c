/* Op effects through every backend: in-place writes (batch_norm in training updating its
 * running statistics) and random draws (dropout, attention dropout) give the same values
 * compiled (interp graph, LLVM) as eagerly.
 *
 * Regression tests for two defects the fuzzer found (tests/fuzz/README.md, new-1 and new-2):
 * LLVM hoisted ops over module buffers / captured tensors above the batch_norm that wrote
 * them (they read the old running_var), and DCE removed a dead dropout, so a later dropout drew
 * other Philox bits than eager. Each case runs the model eagerly (the model function called
 * directly: the reference), then compiled on every backend from the same initial state and
 * the same tgc_manual_seed, and compares outputs and the running statistics after the call. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"
#include "unit/unit_test_util.h"

#define N_STATE 4
#define MAX_OUT 8

/* The state a model reads besides its arguments: captured tensors (globals) or module
 * members, reset to the same initial values before every run. */
static tgc_tensor *g_state[N_STATE]; /* rm, rv, c, w */
static float g_init[N_STATE][3];

static tgc_tensor *vec3(const float *v)
{
    int64_t s[1] = {3};
    tgc_tensor *t = tgc_from_data(v, 3 * sizeof(float), s, 1, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* With g_strided, each state tensor is a stride-2 view of a buffer of twice its size (the
 * LLVM backend reads such inputs through contiguous copies: writes must reach the view). */
static int g_strided;

static void reset_state(void)
{
    for (int k = 0; k < N_STATE; k++) {
        if (!g_strided) {
            g_state[k] = vec3(g_init[k]);
            continue;
        }
        float twice[6];
        for (int j = 0; j < 6; j++)
            twice[j] = j % 2 ? -100.0f : g_init[k][j / 2];
        int64_t s[1] = {6};
        tgc_tensor *buf = tgc_from_data(twice, sizeof twice, s, 1, TGC_F32, tgc_cpu());
        g_state[k] = tgc_slice(buf, 0, 0, 6, 2);
        assert_non_null(g_state[k]);
        assert_false(tgc_is_contiguous(g_state[k]));
    }
}

static double *host(tgc_tensor *t)
{
    tgc_tensor *c = tgc_cast(t, TGC_F64);
    assert_non_null(c);
    size_t n = (size_t)tgc_numel(c);
    double *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    assert_int_equal(tgc_copy_to_host(c, p, n * sizeof *p), TGC_OK);
    return p;
}

/* got equals want within f32 rounding (tol 0: bitwise, for dropout masks). */
static void expect_close(const char *what, tgc_tensor *got, tgc_tensor *want, double tol)
{
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
    assert_int_equal(tgc_ndim(got), tgc_ndim(want));
    for (int d = 0; d < tgc_ndim(got); d++)
        assert_int_equal(tgc_size(got, d), tgc_size(want, d));
    double *a = host(got), *b = host(want);
    for (int64_t i = 0; i < tgc_numel(got); i++)
        if (!(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i]))))
            fail_msg("%s element %lld: %.9g, eager %.9g", what, (long long)i, a[i], b[i]);
    free(a);
    free(b);
}

static int any_differs(tgc_tensor *a, tgc_tensor *b)
{
    double *x = host(a), *y = host(b);
    int d = 0;
    for (int64_t i = 0; i < tgc_numel(a); i++)
        d |= x[i] != y[i];
    free(x);
    free(y);
    return d;
}

static const tgc_backend_kind k_backends[] = {TGC_BACKEND_INTERP, TGC_BACKEND_EAGER,
#ifdef TGC_HAVE_LLVM
                                              TGC_BACKEND_LLVM
#endif
};
static const char *const k_names[] = {"interp", "eager", "llvm"};

/* Runs fn eagerly (the reference) and then compiled on every backend, `calls` calls each
 * (the state carries over from call to call, as it does eagerly), each run from the initial
 * state and seed; compares the outputs and the state after every call. */
static void compare_backends(tgc_model_fn fn, tgc_tensor **in, int n_in, int n_out, int calls,
                             double tol)
{
    tgc_tensor *want[4][MAX_OUT], *want_state[4][N_STATE];
    reset_state();
    tgc_manual_seed(1234);
    for (int c = 0; c < calls; c++) {
        assert_int_equal(fn(NULL, in, n_in, want[c], n_out), TGC_OK);
        for (int k = 0; k < N_STATE; k++)
            want_state[c][k] = tgc_mul_scalar(g_state[k], 1.0); /* a copy: the state moves on */
    }
    for (int b = 0; b < N_OF(k_backends); b++) {
        tgc_config cfg = tgc_config_default();
        cfg.backend = k_backends[b];
        tgc_fn *f = tgc_compile(fn, "effects", &cfg);
        assert_non_null(f);
        reset_state();
        tgc_manual_seed(1234);
        for (int c = 0; c < calls; c++) {
            tgc_tensor *got[MAX_OUT] = {0};
            if (tgc_call(f, NULL, in, n_in, got, n_out) != TGC_OK)
                fail_msg("%s call %d: %s", k_names[b], c, tgc_last_error());
            char what[64];
            for (int k = 0; k < n_out; k++) {
                snprintf(what, sizeof what, "%s call %d out[%d]", k_names[b], c, k);
                expect_close(what, got[k], want[c][k], tol);
            }
            for (int k = 0; k < N_STATE; k++) {
                snprintf(what, sizeof what, "%s call %d state[%d]", k_names[b], c, k);
                expect_close(what, g_state[k], want_state[c][k], tol);
            }
        }
        tgc_fn_free(f);
    }
}

/* ---- new-1: readers of the running stats batch_norm(training) writes ---- */

static tgc_status fn_bn_readers(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *rm = g_state[0], *rv = g_state[1], *c = g_state[2], *w = g_state[3];
    out[0] = tgc_mul_scalar(rv, 3.0); /* before the write: the old value */
    tgc_tensor *h = tgc_relu(in[0]);
    out[1] = tgc_batch_norm(h, rm, rv, NULL, NULL, 1, 0.1, 1e-5);
    out[2] = tgc_matmul(rv, w);  /* operands only captured: hoisted before */
    out[3] = tgc_minimum(c, rv); /* likewise */
    int64_t pads[2] = {1, 2};
    out[4] = tgc_pad(rm, pads, 1, 0.5);
    out[5] = tgc_add(h, rv); /* pointwise over h's group, which runs before the write */
    out[6] = tgc_sum(tgc_mul(rv, rm), NULL, 0, 0);
    for (int k = 0; k < 7; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

static void bn_training_then_readers_of_running_stats(void **state)
{
    (void)state;
    const float init[N_STATE][3] = {
        {0.1f, -0.2f, 0.3f}, {1.0f, 0.5f, 2.0f}, {0.9f, 0.6f, 1.5f}, {0.7f, -1.1f, 0.4f}};
    memcpy(g_init, init, sizeof init);
    int64_t s[2] = {6, 3};
    tgc_tensor *in[1] = {tgc_randn(s, 2, TGC_F32, tgc_cpu())};
    compare_backends(fn_bn_readers, in, 1, 7, 3, 2e-5);
}

static void strided_running_stats_get_their_updates(void **state)
{
    (void)state;
    const float init[N_STATE][3] = {
        {0.1f, -0.2f, 0.3f}, {1.0f, 0.5f, 2.0f}, {0.9f, 0.6f, 1.5f}, {0.7f, -1.1f, 0.4f}};
    memcpy(g_init, init, sizeof init);
    int64_t s[2] = {6, 3};
    tgc_tensor *in[1] = {tgc_randn(s, 2, TGC_F32, tgc_cpu())};
    g_strided = 1;
    compare_backends(fn_bn_readers, in, 1, 7, 3, 2e-5);
    g_strided = 0;
}

/* Two writes of one buffer in one call: a reader between them sees the first update only. */
static tgc_status fn_two_writes(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *rm = g_state[0], *rv = g_state[1], *w = g_state[3];
    out[0] = tgc_batch_norm(in[0], rm, rv, NULL, NULL, 1, 0.2, 1e-5);
    out[1] = tgc_matmul(rv, w);
    out[2] = tgc_batch_norm(tgc_exp(in[0]), rm, rv, NULL, NULL, 1, 0.5, 1e-5);
    out[3] = tgc_matmul(rv, w);
    out[4] = tgc_add(rm, w);
    for (int k = 0; k < 5; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

static void readers_between_two_in_place_writes(void **state)
{
    (void)state;
    const float init[N_STATE][3] = {
        {0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}, {0.0f, 0.0f, 0.0f}, {0.25f, -0.5f, 2.0f}};
    memcpy(g_init, init, sizeof init);
    int64_t s[2] = {5, 3};
    tgc_tensor *in[1] = {tgc_randn(s, 2, TGC_F32, tgc_cpu())};
    compare_backends(fn_two_writes, in, 1, 5, 2, 2e-5);
}

/* ---- new-2: dead random draws still advance the Philox stream ---- */

static tgc_status fn_dead_dropout(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                  int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *dead = tgc_dropout(in[0], 0.5, 1);
    tgc_tensor *dead_attn = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0);
    if (!dead || !dead_attn)
        return tgc_last_status();
    out[0] = tgc_dropout(tgc_add_scalar(in[0], 1.0), 0.5, 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void dead_dropout_then_live_dropout_draws_eager_bits(void **state)
{
    (void)state;
    memset(g_init, 0, sizeof g_init);
    int64_t s[2] = {7, 5};
    tgc_tensor *in[1] = {tgc_randn(s, 2, TGC_F32, tgc_cpu())};
    compare_backends(fn_dead_dropout, in, 1, 1, 2, 0);
}

static tgc_status fn_two_dropouts(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                  int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_dropout(in[0], 0.5, 1);
    out[1] = tgc_dropout(in[0], 0.5, 1);
    out[2] = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.4, 0, 0);
    out[3] = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.4, 0, 0);
    for (int k = 0; k < 4; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

static void two_dropouts_of_one_input_draw_different_bits(void **state)
{
    (void)state;
    memset(g_init, 0, sizeof g_init);
    int64_t s[2] = {8, 6};
    tgc_tensor *in[1] = {tgc_randn(s, 2, TGC_F32, tgc_cpu())};
    /* f32 rounding apart: eager attention runs on LLVM's GEMMs, the interp variant on its loops
     * (a dropped or kept element differs by far more, so the masks are still compared) */
    compare_backends(fn_two_dropouts, in, 1, 4, 2, 1e-6);
    /* eagerly the two draws differ (48 elements at p = 0.5): so do the compiled ones */
    tgc_tensor *o[4];
    tgc_manual_seed(99);
    assert_int_equal(fn_two_dropouts(NULL, in, 1, o, 4), TGC_OK);
    assert_true(any_differs(o[0], o[1]));
    assert_true(any_differs(o[2], o[3]));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, scoped_setup, scoped_teardown)
    const struct CMUnitTest tests[] = {
        T(strided_running_stats_get_their_updates),
        T(bn_training_then_readers_of_running_stats),
        T(readers_between_two_in_place_writes),
        T(dead_dropout_then_live_dropout_draws_eager_bits),
        T(two_dropouts_of_one_input_draw_different_bits),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
