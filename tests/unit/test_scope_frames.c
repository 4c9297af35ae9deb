/* Scope frames: tgc_call runs the model function inside a scope the function cannot pop
 * (it owns the traced inputs while tracing, the function's temporaries when eager). An
 * unbalanced tgc_scope_pop inside the function is an error that frees nothing: while
 * tracing, on the eager fallback (graph break, cache limit), with the eager backend and in a
 * tgc_call inlined into a trace. Under ASan a pop that went through would be a use after
 * free of the traced inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <stdio.h>
#include <string.h>

#include "tgc/tgc.h"

static tgc_status pop_status, keep_status;
static char pop_message[512], keep_message[512];
static int n_runs;

static int setup(void **state)
{
    (void)state;
    tgc_clear_error();
    tgc_scope_push();
    pop_status = keep_status = TGC_OK;
    pop_message[0] = keep_message[0] = 0;
    n_runs = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tgc_scope_pop() == TGC_OK ? 0 : -1;
}

static tgc_tensor *filled(int64_t n, double v)
{
    int64_t s[2] = {2, n};
    return tgc_full(s, 2, v, TGC_F32, tgc_cpu());
}

static double first(tgc_tensor *t)
{
    assert_non_null(t);
    return tgc_item_f64(t);
}

/* Pops a scope it never pushed, then uses its input: the pop must not free it. */
static tgc_status pops_foreign_scope(tgc_module *self, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    n_runs++;
    pop_status = tgc_scope_pop();
    snprintf(pop_message, sizeof pop_message, "%s", tgc_last_error());
    tgc_clear_error();
    out[0] = tgc_add_scalar(tgc_mul_scalar(in[0], 2.0), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* The same, with a graph break before it: every call runs it eagerly. */
static tgc_status breaks_then_pops(tgc_module *self, tgc_tensor *const *in, int n_in,
                                   tgc_tensor **out, int n_out)
{
    double total = tgc_item_f64(tgc_sum(in[0], NULL, 0, 0));
    tgc_status st = pops_foreign_scope(self, in, n_in, out, n_out);
    if (st == TGC_OK)
        out[0] = tgc_add_scalar(out[0], total);
    return out[0] ? st : tgc_last_status();
}

static void check_pop_refused(void)
{
    assert_int_equal(pop_status, TGC_ERR_INVALID_ARG);
    if (!strstr(pop_message, "tgc_scope_pop: ") ||
        !strstr(pop_message, "model function popped a scope it did not push"))
        fail_msg("unexpected message: %s", pop_message);
    pop_status = TGC_OK;
}

static void pop_of_the_tracer_scope_is_refused(void **state)
{
    (void)state;
    tgc_fn *f = tgc_compile(pops_foreign_scope, "pops", NULL);
    for (int i = 0; i < 3; i++) {
        tgc_tensor *y, *x = filled(3, i);
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 2.0 * i + 1.0);
        assert_true(first(x) == i); /* the caller's input is untouched */
    }
    assert_int_equal(n_runs, 1); /* traced once */
    check_pop_refused();
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    /* the caller's scope is still the innermost one: a balanced pair works */
    tgc_scope_push();
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    tgc_fn_free(f);
}

static void pop_is_refused_when_running_eagerly(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_EAGER;
    tgc_fn *f = tgc_compile(pops_foreign_scope, "pops", &c);
    tgc_tensor *x = filled(3, 5), *keep = filled(1, 7); /* in the caller's scope */
    for (int i = 0; i < 3; i++) {
        tgc_tensor *y;
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 11.0);
        check_pop_refused();
    }
    assert_true(first(keep) == 7.0);
    tgc_fn_free(f);
}

static void pop_is_refused_on_the_graph_break_fallback(void **state)
{
    (void)state;
    tgc_fn *f = tgc_compile(breaks_then_pops, "breaks", NULL);
    tgc_tensor *x = filled(2, 1);
    for (int i = 0; i < 3; i++) {
        tgc_tensor *y;
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 3.0 + 4.0);
        check_pop_refused();
    }
    assert_int_equal(n_runs, 4); /* the trace, then three eager calls */
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.graph_breaks, 1);
    assert_int_equal(s.eager_fallbacks, 3);
    tgc_fn_free(f);
}

static void pop_is_refused_on_the_cache_limit_fallback(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    c.cache_size_limit = 1;
    c.dynamic = TGC_DYNAMIC_NEVER;
    c.log_fn = NULL;
    tgc_fn *f = tgc_compile(pops_foreign_scope, "limited", &c);
    for (int n = 1; n <= 3; n++) {
        tgc_tensor *y, *x = filled(n, 2);
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 5.0);
        assert_int_equal(tgc_size(y, 1), n);
        check_pop_refused();
    }
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.eager_fallbacks, 2);
    tgc_fn_free(f);
}

/* A function of its own inlined into the caller's trace is framed too. */
static tgc_fn *inner_fn;

static tgc_status calls_inner(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)n_out;
    tgc_scope_push(); /* the outer function's own scope: the inner one must not pop it */
    tgc_tensor *h = tgc_neg(in[0]);
    tgc_tensor *r = NULL;
    tgc_status st = tgc_call(inner_fn, self, &h, n_in, &r, 1);
    if (st == TGC_OK)
        st = tgc_scope_keep(r);
    if (st == TGC_OK)
        out[0] = r;
    tgc_status pop = tgc_scope_pop();
    return st != TGC_OK ? st : pop;
}

static void pop_is_refused_in_an_inlined_call(void **state)
{
    (void)state;
    inner_fn = tgc_compile(pops_foreign_scope, "inner", NULL);
    tgc_fn *f = tgc_compile(calls_inner, "outer", NULL);
    for (int i = 0; i < 2; i++) {
        tgc_tensor *y, *x = filled(3, 4);
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == -7.0);
    }
    check_pop_refused();
    tgc_fn_free(f);
    tgc_fn_free(inner_fn);
}

/* Balanced scopes inside the function work as before; tensors kept out of an inner scope
 * land in the function's frame and can be returned. */
static tgc_status balanced_scopes(tgc_module *self, tgc_tensor *const *in, int n_in,
                                  tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_scope_push();
    tgc_tensor *t = tgc_mul_scalar(in[0], 3.0);
    tgc_status st = tgc_scope_keep(t);
    tgc_add_scalar(in[0], 100.0); /* freed by the pop */
    tgc_status pop = tgc_scope_pop();
    out[0] = t;
    return st != TGC_OK ? st : pop;
}

static void balanced_scopes_inside_the_function_work(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    for (int eager = 0; eager < 2; eager++) {
        c.backend = eager ? TGC_BACKEND_EAGER : TGC_BACKEND_AUTO;
        tgc_fn *f = tgc_compile(balanced_scopes, "balanced", &c);
        tgc_tensor *y, *x = filled(2, 2);
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 6.0);
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 6.0);
        tgc_fn_free(f);
    }
}

/* tgc_scope_keep of a tensor the frame owns would move it past the call: refused. */
static tgc_status keeps_past_the_call(tgc_module *self, tgc_tensor *const *in, int n_in,
                                      tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add_scalar(in[0], 1.0);
    keep_status = tgc_scope_keep(out[0]);
    snprintf(keep_message, sizeof keep_message, "%s", tgc_last_error());
    tgc_clear_error();
    return out[0] ? TGC_OK : tgc_last_status();
}

static void keep_past_the_frame_is_refused(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    for (int eager = 0; eager < 2; eager++) {
        c.backend = eager ? TGC_BACKEND_EAGER : TGC_BACKEND_AUTO;
        tgc_fn *f = tgc_compile(keeps_past_the_call, "keeps", &c);
        tgc_tensor *y, *x = filled(2, 2);
        keep_status = TGC_OK;
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 3.0);
        assert_int_equal(keep_status, TGC_ERR_INVALID_ARG);
        assert_non_null(strstr(keep_message, "tgc_scope_keep: tensor is in the scope tgc_call "
                                             "opened around the model function"));
        tgc_fn_free(f);
    }
}

/* A function that returns with a scope of its own still open: its scopes are closed and the
 * call fails; on an error path the function's own status is kept. */
static int fail_after_push;

static tgc_status leaves_scope_open(tgc_module *self, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_scope_push();
    out[0] = tgc_add_scalar(in[0], 1.0);
    if (fail_after_push) { /* an op error, returned with the function's scope still open */
        int64_t three = 3;
        if (!tgc_reshape(in[0], &three, 1))
            return tgc_last_status();
    }
    return out[0] ? TGC_OK : tgc_last_status();
}

static void scopes_left_open_are_closed_and_reported(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    for (int eager = 0; eager < 2; eager++) {
        c.backend = eager ? TGC_BACKEND_EAGER : TGC_BACKEND_AUTO;
        tgc_fn *f = tgc_compile(leaves_scope_open, "leaky", &c);
        tgc_tensor *y = NULL, *x = filled(2, 2);
        fail_after_push = 0;
        check_error(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_INVALID_ARG,
                    "tgc_call: 'leaky' returned with 1 scope it pushed still open (they were "
                    "closed); pair every tgc_scope_push with one tgc_scope_pop inside the "
                    "function");
        assert_null(y);
        tgc_clear_error();
        fail_after_push = 1;
        check_error(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_SHAPE, "tgc_reshape");
        assert_null(y);
        /* the caller's scope is the innermost one again */
        assert_true(first(x) == 2.0);
        tgc_scope_push();
        assert_int_equal(tgc_scope_pop(), TGC_OK);
        tgc_fn_free(f);
    }
}

static tgc_status calls_shutdown(tgc_module *self, tgc_tensor *const *in, int n_in,
                                 tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_shutdown();
    pop_status = tgc_last_status();
    snprintf(pop_message, sizeof pop_message, "%s", tgc_last_error());
    tgc_clear_error();
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void shutdown_inside_a_model_function_is_refused(void **state)
{
    (void)state;
    tgc_fn *f = tgc_compile(calls_shutdown, "shuts", NULL);
    tgc_tensor *y, *x = filled(2, 2);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    assert_true(first(y) == 3.0);
    assert_int_equal(pop_status, TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(pop_message, "tgc_shutdown: called inside a model function"));
    tgc_fn_free(f);
}

/* Pops the caller's no-grad level (refused), or leaves one of its own pushed. */
static int grad_leave_pushed;
static int grad_seen_inside;
static tgc_status pops_callers_no_grad(tgc_module *self, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    if (grad_leave_pushed) {
        tgc_no_grad_push();
    } else {
        tgc_no_grad_pop();
        pop_status = tgc_last_status();
        snprintf(pop_message, sizeof pop_message, "%s", tgc_last_error());
        tgc_clear_error();
    }
    grad_seen_inside = tgc_grad_enabled();
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void no_grad_levels_of_the_caller_are_guarded_by_the_frame(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    for (int eager = 0; eager < 2; eager++) {
        c.backend = eager ? TGC_BACKEND_EAGER : TGC_BACKEND_AUTO;
        tgc_fn *f = tgc_compile(pops_callers_no_grad, "grad_pop", &c);
        tgc_tensor *y = NULL, *x = filled(2, 2);
        grad_leave_pushed = 0;
        tgc_no_grad_push();
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(first(y) == 3.0);
        assert_int_equal(pop_status, TGC_ERR_INVALID_ARG);
        assert_non_null(strstr(pop_message, "tgc_no_grad_pop: the model function popped a "
                                            "no-grad level it did not push"));
        assert_int_equal(grad_seen_inside, 0); /* the pop changed nothing */
        assert_int_equal(tgc_grad_enabled(), 0);
        tgc_no_grad_pop();
        assert_int_equal(tgc_grad_enabled(), 1);

        /* a level the function leaves pushed is undone and reported */
        grad_leave_pushed = 1;
        check_error(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_INVALID_ARG,
                    "tgc_call: 'grad_pop' returned with 1 no-grad level it pushed still open "
                    "(grad mode was restored)");
        assert_null(y);
        assert_int_equal(grad_seen_inside, 0);
        assert_int_equal(tgc_grad_enabled(), 1);
        tgc_clear_error();
        tgc_fn_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pop_of_the_tracer_scope_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(pop_is_refused_when_running_eagerly, setup, teardown),
        cmocka_unit_test_setup_teardown(pop_is_refused_on_the_graph_break_fallback, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pop_is_refused_on_the_cache_limit_fallback, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pop_is_refused_in_an_inlined_call, setup, teardown),
        cmocka_unit_test_setup_teardown(balanced_scopes_inside_the_function_work, setup, teardown),
        cmocka_unit_test_setup_teardown(keep_past_the_frame_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(scopes_left_open_are_closed_and_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(shutdown_inside_a_model_function_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(no_grad_levels_of_the_caller_are_guarded_by_the_frame,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
