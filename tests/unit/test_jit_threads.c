/* tgc_call on one tgc_fn from several threads at once: every result is right and the
 * counters add up. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tgc/tgc.h"

#define THREADS 4
#define CALLS 200

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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(concurrent_calls_are_safe_and_counted),
                                       cmocka_unit_test(concurrent_calls_may_share_one_module)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
