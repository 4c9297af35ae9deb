/* Regression: a compiled cat / stack of more than 8 tensors. The executor ran opaque steps
 * with room for 8 inputs and failed larger ones with TGC_ERR_INTERNAL ("cat with 9 inputs"),
 * which a data-parallel gradient bucket (one input per parameter) hit first. Compiled on the
 * default backend and on interp, against the same ops eagerly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

enum { N = 13 };

static tgc_status cat_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)self;
    (void)n_out;
    tgc_tensor *parts[N];
    for (int i = 0; i < n_in; i++) /* a computed value each, so nothing folds */
        parts[i] = tgc_mul_scalar(in[i], (double)(i + 1));
    out[0] = tgc_cat(parts, n_in, 0);
    out[1] = tgc_stack(in, n_in, 1);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static void test_cat_and_stack_of_13(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_tensor *in[N];
    for (int i = 0; i < N; i++) {
        float v[6];
        for (int j = 0; j < 6; j++)
            v[j] = (float)(i * 10 + j);
        int64_t shape[2] = {2, 3};
        in[i] = tgc_from_data(v, sizeof v, shape, 2, TGC_F32, tgc_cpu());
    }
    tgc_tensor *want[2];
    assert_int_equal(cat_fn(NULL, in, N, want, 2), TGC_OK);
    float w0[N * 6], w1[N * 6], g0[N * 6], g1[N * 6];
    assert_int_equal(tgc_copy_to_host(want[0], w0, sizeof w0), TGC_OK);
    assert_int_equal(tgc_copy_to_host(want[1], w1, sizeof w1), TGC_OK);
    for (int b = 0; b < 2; b++) {
        tgc_config c = tgc_config_default();
        if (b)
            c.backend = TGC_BACKEND_INTERP;
        tgc_fn *f = tgc_compile(cat_fn, "cat13", &c);
        for (int call = 0; call < 2; call++) {
            tgc_tensor *out[2] = {NULL, NULL};
            assert_int_equal(tgc_call(f, NULL, in, N, out, 2), TGC_OK);
            assert_int_equal(tgc_size(out[0], 0), 2 * N);
            assert_int_equal(tgc_size(out[1], 1), N);
            assert_int_equal(tgc_copy_to_host(out[0], g0, sizeof g0), TGC_OK);
            assert_int_equal(tgc_copy_to_host(out[1], g1, sizeof g1), TGC_OK);
            assert_memory_equal(g0, w0, sizeof w0);
            assert_memory_equal(g1, w1, sizeof w1);
        }
        tgc_stats st;
        assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
        assert_int_equal(st.compiles, 1);
        assert_int_equal(st.eager_fallbacks, 0);
        tgc_fn_free(f);
    }
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cat_and_stack_of_13)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
