/* A compiled function that runs eagerly (its cache limit reached, or backend EAGER) keeps its
 * matmul precision: the eager engine compiles its ops' plans with the function's
 * cfg.matmul_precision, and the eager cache keeps one plan per precision for the ops whose
 * matrix products it rounds (and one for all precisions for the others).
 *
 * The CPU computes every precision as fp32 (config.h), so the observable here is the eager
 * cache itself (tgc_eager_cache_count: the ready plans of an op compiled at a precision);
 * test_cuda_threads checks on the GPU that a HIGH function's fallback really computes TF32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/eager.h"
#include "tgc/tgc.h"

static tgc_status mm_relu(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_relu(tgc_matmul(in[0], in[1]));
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_fn *compile_at(tgc_matmul_precision p, tgc_backend_kind backend)
{
    tgc_config c = tgc_config_default();
    c.log = 0;
    c.backend = backend;
    c.matmul_precision = p;
    c.cache_size_limit = 1;
    tgc_fn *f = tgc_compile(mm_relu, "mm_relu", &c);
    assert_non_null(f);
    return f;
}

/* Calls f on [rows, 8] x [8, 3] ones and checks the value (8 everywhere). */
static void call_rows(tgc_fn *f, int64_t rows)
{
    tgc_scope_push();
    int64_t sa[2] = {rows, 8}, sb[2] = {8, 3};
    tgc_tensor *in[2] = {tgc_ones(sa, 2, TGC_F32, tgc_cpu()), tgc_ones(sb, 2, TGC_F32, tgc_cpu())};
    tgc_tensor *y = NULL;
    assert_int_equal(tgc_call(f, NULL, in, 2, &y, 1), TGC_OK);
    assert_int_equal(tgc_size(y, 0), rows);
    float v[64 * 3];
    assert_int_equal(tgc_copy_to_host(y, v, (size_t)rows * 3 * sizeof(float)), TGC_OK);
    for (int64_t i = 0; i < rows * 3; i++)
        assert_float_equal(v[i], 8.0f, 0.0f);
    tgc_scope_pop();
}

static void skip_without_llvm(void)
{
#ifndef TGC_HAVE_LLVM
    skip(); /* eager ops run on interp: no plans to count */
#endif
}

static void cache_limit_fallback_compiles_at_the_function_precision(void **state)
{
    (void)state;
    skip_without_llvm();
    int high0 = tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGH);
    int highest0 = tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGHEST);
    int relu0 = tgc_eager_cache_count(TGC_OP_RELU, -1);
    tgc_fn *f = compile_at(TGC_PRECISION_HIGH, TGC_BACKEND_AUTO);
    call_rows(f, 4); /* compiled */
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGH), high0);
    call_rows(f, 5); /* the limit: eagerly */
    call_rows(f, 6); /* the same signatures again */
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.eager_fallbacks, 2);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGH), high0 + 1);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGHEST), highest0);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_RELU, -1), relu0 + 1);
    tgc_fn_free(f);

    /* a HIGHEST function's fallback: a matmul plan of its own, the relu plan shared */
    f = compile_at(TGC_PRECISION_HIGHEST, TGC_BACKEND_AUTO);
    call_rows(f, 4);
    call_rows(f, 5);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGHEST), highest0 + 1);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_HIGH), high0 + 1);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_RELU, -1), relu0 + 1);
    tgc_fn_free(f);
}

static void eager_backend_compiles_at_the_function_precision(void **state)
{
    (void)state;
    skip_without_llvm();
    int medium0 = tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_MEDIUM);
    tgc_fn *f = compile_at(TGC_PRECISION_MEDIUM, TGC_BACKEND_EAGER);
    call_rows(f, 7);
    call_rows(f, 7);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_MEDIUM), medium0 + 1);
    tgc_fn_free(f);
}

static void plain_eager_ops_keep_the_default_after_a_call(void **state)
{
    (void)state;
    skip_without_llvm();
    tgc_fn *f = compile_at(TGC_PRECISION_MEDIUM, TGC_BACKEND_EAGER);
    call_rows(f, 9);
    int medium = tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_MEDIUM);
    int any = tgc_eager_cache_count(TGC_OP_MATMUL, -1);
    /* outside the call: a new signature (batched) compiles at the default, not MEDIUM */
    tgc_scope_push();
    int64_t sa[3] = {2, 4, 8}, sb[2] = {8, 3};
    tgc_tensor *y =
        tgc_matmul(tgc_ones(sa, 3, TGC_F32, tgc_cpu()), tgc_ones(sb, 2, TGC_F32, tgc_cpu()));
    assert_non_null(y);
    tgc_scope_pop();
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, TGC_PRECISION_MEDIUM), medium);
    assert_int_equal(tgc_eager_cache_count(TGC_OP_MATMUL, -1), any + 1);
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cache_limit_fallback_compiles_at_the_function_precision),
        cmocka_unit_test(eager_backend_compiles_at_the_function_precision),
        cmocka_unit_test(plain_eager_ops_keep_the_default_after_a_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
