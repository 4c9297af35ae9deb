/* The lifetime of autograd records: a backward after the caller freed intermediates of the
 * loss (their scope popped, or tgc_tensor_free), eagerly and inside a compiled training
 * step, gives the gradients of a run that kept them; and tgc_backward_grad's shape check,
 * eager and traced. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

enum { N = 4, STEPS = 100 };

static const float XV[N] = {0.5f, -1.0f, 0.25f, 2.0f};
static const float WV[N] = {0.3f, 0.2f, -0.4f, 0.1f};
static const double LR = 0.05;

static tgc_tensor *vec(const float *v, int64_t n)
{
    return tgc_from_data(v, (size_t)n * sizeof(float), &n, 1, TGC_F32, tgc_cpu());
}

static void read_vec(const tgc_tensor *t, float *v, int64_t n)
{
    assert_int_equal(tgc_copy_to_host(t, v, (size_t)n * sizeof(float)), TGC_OK);
}

static tgc_module *make_model(void)
{
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_scope_push();
    assert_non_null(tgc_module_param(m, "w", vec(WV, N)));
    tgc_scope_pop();
    return m;
}

/* d/dw_i sum(tanh(exp(x * w))) = (1 - tanh(e_i)^2) e_i x_i with e_i = exp(x_i w_i) */
static double grad_ref(double x, double w)
{
    double e = exp(x * w), t = tanh(e);
    return (1 - t * t) * e * x;
}

static tgc_optim *opt; /* the optimizer of the module the step runs on */

/* The forward in a scope of its own that keeps only the loss, then the backward: the
 * records are all that hold the freed intermediates (mul, exp, tanh). */
static tgc_status step_scoped(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_scope_push();
    tgc_tensor *loss =
        tgc_sum(tgc_tanh(tgc_exp(tgc_mul(in[0], tgc_module_get(self, "w")))), NULL, 0, 0);
    tgc_scope_keep(loss);
    tgc_scope_pop(); /* frees the mul, exp and tanh results */
    tgc_status st = tgc_backward(loss);
    if (st == TGC_OK)
        st = tgc_optim_step(opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(opt);
    out[0] = tgc_detach(loss);
    return st == TGC_OK && !out[0] ? tgc_last_status() : st;
}

/* The same step with every intermediate alive until the end of the call. */
static tgc_status step_kept(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *loss =
        tgc_sum(tgc_tanh(tgc_exp(tgc_mul(in[0], tgc_module_get(self, "w")))), NULL, 0, 0);
    tgc_status st = tgc_backward(loss);
    if (st == TGC_OK)
        st = tgc_optim_step(opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(opt);
    out[0] = tgc_detach(loss);
    return st == TGC_OK && !out[0] ? tgc_last_status() : st;
}

/* STEPS steps of fn (through f when compiled); losses[s] and the final weights. */
static void train(tgc_model_fn fn, const tgc_config *cfg, float *losses, float *w)
{
    tgc_module *m = make_model();
    tgc_sgd_opts so = {.lr = LR};
    opt = tgc_sgd(m, &so);
    assert_non_null(opt);
    tgc_fn *f = cfg ? tgc_compile(fn, "step", cfg) : NULL;
    tgc_scope_push();
    tgc_tensor *x = vec(XV, N);
    for (int s = 0; s < STEPS; s++) {
        tgc_scope_push();
        tgc_tensor *out[1] = {NULL};
        tgc_status st = f ? tgc_call(f, m, &x, 1, out, 1) : fn(m, &x, 1, out, 1);
        assert_int_equal(st, TGC_OK);
        read_vec(out[0], &losses[s], 1);
        tgc_scope_pop();
    }
    tgc_scope_pop();
    read_vec(tgc_module_get(m, "w"), w, N);
    if (f) {
        tgc_stats stats;
        assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
        assert_int_equal(stats.compiles, 1);
        assert_int_equal(stats.eager_fallbacks, 0);
        tgc_fn_free(f);
    }
    tgc_optim_free(opt);
    opt = NULL;
    tgc_module_free(m);
}

/* The reference: the same SGD steps in double precision. */
static void train_ref(double *loss0, double *w)
{
    for (int i = 0; i < N; i++)
        w[i] = WV[i];
    *loss0 = 0;
    for (int i = 0; i < N; i++)
        *loss0 += tanh(exp(XV[i] * w[i]));
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < N; i++)
            w[i] -= LR * grad_ref(XV[i], w[i]);
}

static void check_against_kept(tgc_model_fn scoped, const tgc_config *cfg)
{
    float ls[STEPS], lk[STEPS], ws[N], wk[N];
    train(scoped, cfg, ls, ws);
    train(step_kept, cfg, lk, wk);
    /* the same computation: the same bits */
    assert_memory_equal(ls, lk, sizeof ls);
    assert_memory_equal(ws, wk, sizeof ws);
    double l0, wr[N];
    train_ref(&l0, wr);
    assert_float_equal(ls[0], l0, 1e-5);
    for (int i = 0; i < N; i++)
        assert_float_equal(ws[i], wr[i], 1e-4);
    assert_true(ls[STEPS - 1] < ls[0]);
}

static void test_scope_popped_before_backward_eager(void **state)
{
    (void)state;
    check_against_kept(step_scoped, NULL);
}

static void test_scope_popped_before_backward_compiled(void **state)
{
    (void)state;
    tgc_config cfg = tgc_config_default();
    check_against_kept(step_scoped, &cfg);
}

static void test_scope_popped_before_backward_interp(void **state)
{
    (void)state;
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_INTERP;
    check_against_kept(step_scoped, &cfg);
}

/* tgc_tensor_free of intermediates (a chain and a shared one) before the backward. */
static void test_tensor_free_before_backward(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_tensor *x = vec(XV, N), *w = vec(WV, N);
    assert_int_equal(tgc_requires_grad(w, 1), TGC_OK);
    tgc_tensor *p = tgc_mul(x, w);
    tgc_tensor *e = tgc_exp(p);
    tgc_tensor *t = tgc_tanh(e);
    /* loss = sum(tanh(e)) + sum(e * p): e and p feed two records each */
    tgc_tensor *loss = tgc_add(tgc_sum(t, NULL, 0, 0), tgc_sum(tgc_mul(e, p), NULL, 0, 0));
    assert_non_null(loss);
    tgc_tensor_free(t);
    tgc_tensor_free(e);
    tgc_tensor_free(p);
    assert_int_equal(tgc_backward(loss), TGC_OK);
    float g[N];
    read_vec(tgc_grad(w), g, N);
    for (int i = 0; i < N; i++) {
        double pv = (double)XV[i] * WV[i], ev = exp(pv);
        /* d/dw sum(e * p) = (e * p + e) x */
        double want = grad_ref(XV[i], WV[i]) + (ev * pv + ev) * XV[i];
        assert_float_equal(g[i], want, 1e-5 * (1 + fabs(want)));
    }
    /* the record went with the backward: a second one is refused, nothing crashes */
    assert_int_equal(tgc_backward(loss), TGC_ERR_INVALID_ARG);
    tgc_scope_pop();
}

/* The loss itself freed right after a backward that dropped the last references. */
static void test_loss_freed_after_backward(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_tensor *x = vec(XV, N);
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    tgc_scope_push();
    tgc_tensor *loss = tgc_sum(tgc_exp(tgc_exp(x)), NULL, 0, 0);
    tgc_scope_keep(loss);
    tgc_scope_pop();
    assert_int_equal(tgc_backward(loss), TGC_OK);
    tgc_tensor_free(loss);
    float g[N];
    read_vec(tgc_grad(x), g, N);
    for (int i = 0; i < N; i++) {
        double want = exp(exp(XV[i])) * exp(XV[i]);
        assert_float_equal(g[i], want, 1e-5 * (1 + want));
    }
    tgc_scope_pop();
}

/* ---- tgc_backward_grad's gradient shape ---- */

static void check_shape_error(tgc_status st)
{
    assert_int_equal(st, TGC_ERR_SHAPE);
    assert_string_equal(tgc_last_error(), "tgc_backward_grad: grad_out is [4] but out is [3]");
}

static tgc_status backward_wrong_shape(tgc_module *self, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w");
    int64_t four = 4;
    tgc_tensor *g = tgc_ones(&four, 1, TGC_F32, tgc_cpu());
    tgc_status st = tgc_backward_grad(tgc_mul(w, w), g);
    out[0] = tgc_detach(w);
    return st;
}

static void test_backward_grad_shape_eager(void **state)
{
    (void)state;
    tgc_scope_push();
    float v[3] = {1, 2, 3};
    tgc_tensor *w = vec(v, 3);
    assert_int_equal(tgc_requires_grad(w, 1), TGC_OK);
    int64_t four = 4;
    check_shape_error(tgc_backward_grad(tgc_mul(w, w), tgc_ones(&four, 1, TGC_F32, tgc_cpu())));
    assert_null(tgc_grad(w));
    tgc_scope_pop();
}

static void test_backward_grad_shape_traced(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    float v[3] = {1, 2, 3};
    tgc_scope_push();
    assert_non_null(tgc_module_param(m, "w", vec(v, 3)));
    tgc_config cfg = tgc_config_default();
    cfg.fullgraph = 1;
    tgc_fn *f = tgc_compile(backward_wrong_shape, "wrong_grad", &cfg);
    tgc_tensor *x = vec(v, 3), *out[1] = {NULL};
    check_shape_error(tgc_call(f, m, &x, 1, out, 1));
    /* with dynamic sizes too: the trace-time sizes differ */
    tgc_fn_free(f);
    cfg.dynamic = TGC_DYNAMIC_ALWAYS;
    f = tgc_compile(backward_wrong_shape, "wrong_grad_dyn", &cfg);
    check_shape_error(tgc_call(f, m, &x, 1, out, 1));
    tgc_fn_free(f);
    tgc_scope_pop();
    tgc_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_popped_before_backward_eager),
        cmocka_unit_test(test_scope_popped_before_backward_compiled),
        cmocka_unit_test(test_scope_popped_before_backward_interp),
        cmocka_unit_test(test_tensor_free_before_backward),
        cmocka_unit_test(test_loss_freed_after_backward),
        cmocka_unit_test(test_backward_grad_shape_eager),
        cmocka_unit_test(test_backward_grad_shape_traced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
