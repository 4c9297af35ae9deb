/* The autograd core: recording, tgc_backward, leaf .grad accumulation, freed records,
 * tgc_copy_ as an in-place write of compiled variants (ASSIGN), gradients bound by position,
 * and a compiled training step that compiles once and equals eager. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

static tgc_tensor *vec(const float *v, int64_t n)
{
    return tgc_from_data(v, (size_t)n * sizeof(float), &n, 1, TGC_F32, tgc_cpu());
}

static void read_vec(const tgc_tensor *t, float *v, int64_t n)
{
    assert_int_equal(tgc_copy_to_host(t, v, (size_t)n * sizeof(float)), TGC_OK);
}

/* loss = sum(relu(x * w) + x), d/dw = x * [x*w > 0], d/dx = w * [x*w > 0] + 1 */
static void test_eager_backward(void **state)
{
    (void)state;
    tgc_scope_push();
    float xv[4] = {1, -2, 3, 0.5f}, wv[4] = {2, 1, -1, 4};
    tgc_tensor *x = vec(xv, 4), *w = vec(wv, 4);
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad(w, 1), TGC_OK);
    tgc_tensor *y = tgc_add(tgc_relu(tgc_mul(x, w)), x);
    assert_int_equal(tgc_requires_grad_of(y), 1);
    tgc_tensor *loss = tgc_sum(y, NULL, 0, 0);
    assert_null(tgc_grad(w));
    assert_int_equal(tgc_backward(loss), TGC_OK);
    float gw[4], gx[4];
    read_vec(tgc_grad(w), gw, 4);
    read_vec(tgc_grad(x), gx, 4);
    for (int i = 0; i < 4; i++) {
        int on = xv[i] * wv[i] > 0;
        assert_float_equal(gw[i], on ? xv[i] : 0, 1e-6);
        assert_float_equal(gx[i], (on ? wv[i] : 0) + 1, 1e-6);
    }
    /* the record is freed: a second backward through it is refused */
    assert_int_equal(tgc_backward(loss), TGC_ERR_INVALID_ARG);
    /* accumulation across calls */
    tgc_tensor *loss2 = tgc_sum(tgc_mul(x, w), NULL, 0, 0);
    assert_int_equal(tgc_backward(loss2), TGC_OK);
    read_vec(tgc_grad(w), gw, 4);
    for (int i = 0; i < 4; i++)
        assert_float_equal(gw[i], (xv[i] * wv[i] > 0 ? xv[i] : 0) + xv[i], 1e-6);
    /* grads are owned by their leaf */
    tgc_tensor_free(tgc_grad(w));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_scope_pop();
}

static void test_errors(void **state)
{
    (void)state;
    tgc_scope_push();
    float xv[3] = {1, 2, 3};
    tgc_tensor *x = vec(xv, 3);
    assert_int_equal(tgc_backward(NULL), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_backward(tgc_sum(x, NULL, 0, 0)), TGC_ERR_INVALID_ARG); /* no grad */
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    assert_int_equal(tgc_backward(tgc_mul(x, x)), TGC_ERR_INVALID_ARG); /* not a scalar */
    tgc_tensor *y = tgc_mul(x, x);
    int64_t two = 2;
    tgc_tensor *g2 = tgc_ones(&two, 1, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_backward_grad(y, g2), TGC_ERR_SHAPE);
    int64_t three = 3;
    tgc_tensor *gi = tgc_ones(&three, 1, TGC_I32, tgc_cpu());
    assert_int_equal(tgc_backward_grad(y, gi), TGC_ERR_DTYPE);
    tgc_tensor *g3 = tgc_full(&three, 1, 2.0, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_backward_grad(y, g3), TGC_OK);
    float gx[3];
    read_vec(tgc_grad(x), gx, 3);
    for (int i = 0; i < 3; i++)
        assert_float_equal(gx[i], 2 * 2 * xv[i], 1e-6);
    /* grad mode off: nothing recorded */
    tgc_no_grad_push();
    tgc_tensor *z = tgc_mul(x, x);
    tgc_no_grad_pop();
    assert_int_equal(tgc_requires_grad_of(z), 0);
    /* detach */
    assert_int_equal(tgc_requires_grad_of(tgc_detach(y)), 0);
    tgc_scope_pop();
}

/* A training step: loss = sum((w*x - t)^2); w -= lr * grad; grads zeroed first. */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w");
    tgc_status st = tgc_zero_grad(self);
    if (st != TGC_OK)
        return st;
    tgc_tensor *d = tgc_sub(tgc_mul(w, in[0]), in[1]);
    tgc_tensor *loss = tgc_sum(tgc_mul(d, d), NULL, 0, 0);
    if ((st = tgc_backward(loss)) != TGC_OK)
        return st;
    tgc_tensor *nw;
    tgc_no_grad_push();
    nw = tgc_sub(w, tgc_mul_scalar(tgc_grad(w), 0.05));
    tgc_no_grad_pop();
    if (!nw || (st = tgc_copy_(w, nw)) != TGC_OK)
        return nw ? st : tgc_last_status();
    out[0] = loss;
    return loss ? TGC_OK : tgc_last_status();
}

static tgc_module *make_model(void)
{
    tgc_module *m = tgc_module_create("m", NULL);
    float wv[5] = {0.5f, -1, 2, 0.25f, 1};
    tgc_scope_push();
    assert_non_null(tgc_module_param(m, "w", vec(wv, 5)));
    tgc_scope_pop();
    return m;
}

static void run_steps(tgc_fn *f, tgc_module *m, int steps, float *losses)
{
    float xv[5] = {1, 2, -1, 0.5f, 3}, tv[5] = {1, 0, 1, -2, 2};
    tgc_scope_push();
    tgc_tensor *in[2] = {vec(xv, 5), vec(tv, 5)};
    for (int s = 0; s < steps; s++) {
        tgc_scope_push();
        tgc_tensor *out[1] = {NULL};
        tgc_status st = f ? tgc_call(f, m, in, 2, out, 1) : train_step(m, in, 2, out, 1);
        assert_int_equal(st, TGC_OK);
        read_vec(out[0], &losses[s], 1);
        tgc_scope_pop();
    }
    tgc_scope_pop();
}

static void check_step(tgc_backend_kind backend)
{
    enum { STEPS = 12 };
    tgc_module *me = make_model(), *mc = make_model(), *mc2 = make_model();
    float le[STEPS], lc[STEPS], lc2[STEPS];
    run_steps(NULL, me, STEPS, le);
    tgc_config cfg = tgc_config_default();
    cfg.backend = backend;
    tgc_fn *f = tgc_compile(train_step, "train_step", &cfg);
    run_steps(f, mc, STEPS, lc);
    run_steps(f, mc2, STEPS, lc2); /* another module of the structure shares the variant */
    for (int s = 0; s < STEPS; s++)
        print_message("step %d: eager %g compiled %g / %g\n", s, le[s], lc[s], lc2[s]);
    for (int s = 0; s < STEPS; s++) {
        assert_float_equal(lc[s], le[s], 1e-4 * (1 + le[s]));
        assert_float_equal(lc2[s], le[s], 1e-4 * (1 + le[s]));
    }
    assert_true(le[STEPS - 1] < le[0]);
    float we[5], wc[5], ge[5], gc[5];
    read_vec(tgc_module_get(me, "w"), we, 5);
    read_vec(tgc_module_get(mc, "w"), wc, 5);
    read_vec(tgc_grad(tgc_module_get(me, "w")), ge, 5);
    read_vec(tgc_grad(tgc_module_get(mc, "w")), gc, 5);
    for (int i = 0; i < 5; i++) {
        assert_float_equal(wc[i], we[i], 1e-5);
        assert_float_equal(gc[i], ge[i], 1e-4);
    }
    tgc_stats stats;
    assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
    assert_int_equal(stats.compiles, 1);
    assert_int_equal(stats.eager_fallbacks, 0);
    char *g = tgc_fn_graph(f, 0, 0);
    assert_non_null(strstr(g, "assign("));
    assert_non_null(strstr(g, "{grad 0}"));
    tgc_free(g);
    tgc_fn_free(f);
    tgc_module_free(me);
    tgc_module_free(mc);
    tgc_module_free(mc2);
}

static void test_compiled_step_default(void **state)
{
    (void)state;
    check_step(TGC_BACKEND_AUTO);
}

static void test_compiled_step_interp(void **state)
{
    (void)state;
    check_step(TGC_BACKEND_INTERP);
}

/* In-place writes whose new value reads the old one elsewhere (a transpose) or after the
 * write: the compiled writes must equal eager ones (no store forwarding where it would
 * read overwritten elements). */
static tgc_status rotate(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w"), *b = tgc_module_get(self, "b");
    tgc_no_grad_push();
    tgc_tensor *before = tgc_relu(w); /* read before the write, used after it */
    tgc_status st = tgc_copy_(w, tgc_add_scalar(tgc_transpose(w, 0, 1), 1.0));
    if (st == TGC_OK)
        st = tgc_copy_(b, tgc_mul_scalar(b, 0.5)); /* pointwise: forwarded */
    out[0] = tgc_add(before, tgc_sum(w, NULL, 0, 0));
    tgc_no_grad_pop();
    return st != TGC_OK ? st : out[0] ? TGC_OK : tgc_last_status();
}

static void test_in_place_hazards(void **state)
{
    (void)state;
    tgc_module *me = tgc_module_create("r", NULL), *mc = tgc_module_create("r", NULL);
    float wv[9] = {1, -2, 3, 4, 5, -6, 7, 8, 9}, bv[3] = {1, 2, 4};
    int64_t s33[2] = {3, 3}, s3 = 3;
    tgc_scope_push();
    tgc_tensor *w0 = tgc_from_data(wv, sizeof wv, s33, 2, TGC_F32, tgc_cpu());
    tgc_tensor *b0 = tgc_from_data(bv, sizeof bv, &s3, 1, TGC_F32, tgc_cpu());
    assert_non_null(tgc_module_param(me, "w", w0));
    assert_non_null(tgc_module_param(me, "b", b0));
    assert_non_null(tgc_module_param(mc, "w", w0));
    assert_non_null(tgc_module_param(mc, "b", b0));
    tgc_fn *f = tgc_compile(rotate, "rotate", NULL);
    for (int step = 0; step < 4; step++) {
        tgc_tensor *oe[1], *oc[1];
        assert_int_equal(rotate(me, NULL, 0, oe, 1), TGC_OK);
        assert_int_equal(tgc_call(f, mc, NULL, 0, oc, 1), TGC_OK);
        float a[9], c[9];
        read_vec(oe[0], a, 9);
        read_vec(oc[0], c, 9);
        for (int i = 0; i < 9; i++)
            assert_float_equal(a[i], c[i], 1e-4);
        read_vec(tgc_module_get(me, "w"), a, 9);
        read_vec(tgc_module_get(mc, "w"), c, 9);
        for (int i = 0; i < 9; i++)
            assert_float_equal(a[i], c[i], 1e-4);
        read_vec(tgc_module_get(me, "b"), a, 3);
        read_vec(tgc_module_get(mc, "b"), c, 3);
        for (int i = 0; i < 3; i++)
            assert_float_equal(a[i], c[i], 1e-6);
    }
    tgc_stats st;
    tgc_fn_stats(f, &st);
    assert_int_equal(st.compiles, 1);
    tgc_scope_pop();
    tgc_fn_free(f);
    tgc_module_free(me);
    tgc_module_free(mc);
}

/* Regression: a write that a later write of the same tensor makes dead becomes a view that
 * nothing reads, and must be dropped; it kept the "writes its inputs" flag, so every dead
 * gradient write of a training step stayed a copy (124 per ResNet18 step on the GPU). */
static tgc_status write_twice(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w");
    tgc_status st = tgc_copy_(w, tgc_mul_scalar(w, 2.0));
    if (st == TGC_OK)
        st = tgc_copy_(w, tgc_add_scalar(w, 1.0)); /* reads the first write's value */
    out[0] = tgc_sum(w, NULL, 0, 0);
    return st != TGC_OK ? st : out[0] ? TGC_OK : tgc_last_status();
}

static void test_dead_write_is_dropped(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    float wv[4] = {1, -2, 3, 0.5f};
    int64_t n = 4;
    tgc_scope_push();
    assert_non_null(tgc_module_buffer(m, "w", tgc_from_data(wv, sizeof wv, &n, 1, TGC_F32,
                                                             tgc_cpu())));
    tgc_fn *f = tgc_compile(write_twice, "write_twice", NULL);
    float want[4] = {1, -2, 3, 0.5f};
    for (int call = 0; call < 3; call++) {
        tgc_tensor *o[1];
        assert_int_equal(tgc_call(f, m, NULL, 0, o, 1), TGC_OK);
        float got[4], sum = 0;
        read_vec(tgc_module_get(m, "w"), got, 4);
        for (int i = 0; i < 4; i++) {
            want[i] = want[i] * 2 + 1;
            sum += want[i];
            assert_float_equal(got[i], want[i], 1e-6);
        }
        assert_float_equal(tgc_item_f64(o[0]), sum, 1e-5);
    }
    char *g = tgc_fn_graph(f, 0, 0);
    int writes = 0;
    for (const char *p = g; (p = strstr(p, "writes its inputs")); p++)
        writes++;
    if (writes != 1)
        fail_msg("expected one in-place write in the graph, found %d:\n%s", writes, g);
    tgc_free(g);
    tgc_fn_free(f);
    tgc_scope_pop();
    tgc_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_backward),
        cmocka_unit_test(test_dead_write_is_dropped),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_compiled_step_default),
        cmocka_unit_test(test_compiled_step_interp),
        cmocka_unit_test(test_in_place_hazards),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return r;
}
