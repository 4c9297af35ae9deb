/* tgc_call on one tgc_fn from several threads at once: every result is right and the
 * counters add up. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "tgc/tgc.h"

#define THREADS 4
#define CALLS   200

static tgc_fn *shared_fn;
static tgc_module *shared_module; /* NULL, or a module every thread passes as self */

static tgc_status scale_add(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *x = self ? tgc_mul(in[0], tgc_module_get(self, "one")) : in[0];
    out[0] = tgc_add_scalar(tgc_mul_scalar(x, 2.0), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void *worker(void *arg)
{
    intptr_t id = (intptr_t)arg;
    intptr_t bad = 0;
    for (int i = 0; i < CALLS; i++) {
        tgc_scope_push();
        int64_t shape[2] = {2 + (i + id) % 3, 5};
        tgc_tensor *x = tgc_full(shape, 2, (double)id, TGC_F32, tgc_cpu()), *y = NULL;
        if (tgc_call(shared_fn, shared_module, &x, 1, &y, 1) != TGC_OK || !y ||
            tgc_item_f64(y) != 2.0 * (double)id + 1.0 || tgc_size(y, 0) != shape[0])
            bad++;
        tgc_scope_pop();
    }
    tgc_shutdown();
    return (void *)bad;
}

static void run_threads(void)
{
    tgc_config c = tgc_config_default();
    c.log = 0;
    shared_fn = tgc_compile(scale_add, "shared", &c);
    pthread_t t[THREADS];
    for (intptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        assert_int_equal((intptr_t)bad, 0);
    }
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(shared_fn, &s), TGC_OK);
    assert_int_equal(s.calls, THREADS * CALLS);
    assert_int_equal(s.cache_hits + s.compiles + s.eager_fallbacks, THREADS * CALLS);
    assert_true(s.compiles <= 2); /* static, then the batch dim dynamic */
    tgc_fn_free(shared_fn);
}

static void concurrent_calls_are_safe_and_counted(void **state)
{
    (void)state;
    shared_module = NULL;
    run_threads();
}

static void concurrent_calls_may_share_one_module(void **state)
{
    (void)state;
    shared_module = tgc_module_create("shared", NULL);
    int64_t one = 1;
    tgc_scope_push();
    tgc_module_param(shared_module, "one", tgc_ones(&one, 1, TGC_F32, tgc_cpu()));
    tgc_scope_pop();
    run_threads();
    tgc_module_free(shared_module);
    shared_module = NULL;
}

/* A recompile does not stall calls that hit an existing variant: the trace of the second
 * shape waits (up to 10 s) until the main thread has made its hits on the first variant. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_armed, gate_tracing, gate_open, gate_waited_ok;

static tgc_status gated(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    pthread_mutex_lock(&gate_lock);
    if (gate_armed) {
        gate_tracing = 1;
        pthread_cond_broadcast(&gate_cond);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        while (!gate_open && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
            ;
        gate_waited_ok = gate_open;
    }
    pthread_mutex_unlock(&gate_lock);
    return scale_add(self, in, n_in, out, n_out);
}

static void *compile_second_shape(void *arg)
{
    int64_t shape[2] = {3, 5};
    tgc_tensor *x = tgc_full(shape, 2, 1.0, TGC_F32, tgc_cpu()), *y = NULL;
    intptr_t ok = tgc_call((tgc_fn *)arg, NULL, &x, 1, &y, 1) == TGC_OK && y &&
                  tgc_item_f64(y) == 3.0 && tgc_size(y, 0) == 3;
    tgc_shutdown();
    return (void *)ok;
}

static void hits_go_on_while_the_same_function_recompiles(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    c.log = 0;
    c.dynamic = TGC_DYNAMIC_NEVER;
    tgc_fn *f = tgc_compile(gated, "gated", &c);
    int64_t shape[2] = {2, 5};
    tgc_scope_push();
    tgc_tensor *x = tgc_full(shape, 2, 4.0, TGC_F32, tgc_cpu()), *y = NULL;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK); /* variant 1 */
    gate_armed = 1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, compile_second_shape, f), 0);
    pthread_mutex_lock(&gate_lock);
    while (!gate_tracing)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    for (int i = 0; i < 10; i++) { /* the other thread is inside its compile now */
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
        assert_true(tgc_item_f64(y) == 9.0);
    }
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    void *ok;
    pthread_join(t, &ok);
    assert_true((intptr_t)ok);
    assert_true(gate_waited_ok);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.cache_hits, 10);
    gate_armed = 0;
    tgc_scope_pop();
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_calls_are_safe_and_counted),
        cmocka_unit_test(concurrent_calls_may_share_one_module),
        cmocka_unit_test(hits_go_on_while_the_same_function_recompiles)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
