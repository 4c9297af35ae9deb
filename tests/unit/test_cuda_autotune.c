/* cfg.autotune on the GPU: a compiled matrix product measures its candidate tiles when it
 * compiles (said on the kernels channel), computes what the heuristic's kernel computes, and
 * a second function with the same kernel takes the remembered choice without measuring;
 * MAX_AUTOTUNE tunes too; a function with symbolic sizes keeps the heuristic's tile. Skipped
 * without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgc/tgc.h"

static tgc_status mm_relu(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_relu(tgc_matmul(in[0], in[1]));
    return out[0] ? TGC_OK : tgc_last_status();
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* y = relu(x @ w) of f compiled with cfg (its log into *lb), on the host. */
static float *run(tgc_config cfg, const char *name, tgc_tensor *x, tgc_tensor *w, test_log *lb,
                  size_t n)
{
    cfg.log = TGC_LOG_KERNELS;
    cfg.log_fn = test_log_capture;
    cfg.log_user = lb;
    lb->n = 0;
    lb->text[0] = 0;
    tgc_fn *f = tgc_compile(mm_relu, name, &cfg);
    assert_non_null(f);
    tgc_tensor *in[2] = {x, w}, *y = NULL;
    for (int i = 0; i < 3; i++) /* REDUCE_OVERHEAD / MAX_AUTOTUNE record on the second call */
        assert_int_equal(tgc_call(f, NULL, in, 2, &y, 1), TGC_OK);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(tgc_copy_to_host(y, h, n * sizeof *h), TGC_OK);
    tgc_fn_free(f);
    return h;
}

static void close_to(const float *a, const float *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * (1.0 + fabs((double)b[i]))))
            fail_msg("element %zu: %.9g, heuristic %.9g", i, a[i], b[i]);
}

static void tuned_kernels_compute_what_the_heuristic_computes(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    int64_t sx[2] = {384, 640}, sw[2] = {640, 512};
    const size_t n = 384 * 512;
    tgc_tensor *x = tgc_rand(sx, 2, TGC_F32, tgc_cuda(0)),
               *w = tgc_rand(sw, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(x);
    assert_non_null(w);
    static test_log lb;
    static const tgc_matmul_precision precs[2] = {TGC_PRECISION_HIGHEST, TGC_PRECISION_HIGH};
    for (int p = 0; p < 2; p++) {
        tgc_config c = tgc_config_default();
        c.backend = TGC_BACKEND_CUDA;
        c.matmul_precision = precs[p];
        c.autotune = TGC_AUTOTUNE_OFF;
        float *ref = run(c, "heuristic", x, w, &lb, n);
        assert_int_equal(count(lb.text, "autotune"), 0);
        c.autotune = TGC_AUTOTUNE_FAST;
        float *got = run(c, "fast", x, w, &lb, n);
        if (count(lb.text, "measured") != 1)
            fail_msg("precision %d: one kernel measured, log:\n%s", p, lb.text);
        assert_int_equal(count(lb.text, "kept the heuristic"), 0);
        /* a tile sums k in the same order; a split of k (another per tile) rounds apart */
        close_to(got, ref, n, 1e-5);
        free(got);
        /* the same kernel in another function: remembered, not measured again */
        got = run(c, "again", x, w, &lb, n);
        assert_int_equal(count(lb.text, "measured"), 0);
        if (count(lb.text, "remembered") != 1)
            fail_msg("precision %d: the choice remembered, log:\n%s", p, lb.text);
        close_to(got, ref, n, 1e-5);
        free(got);
        /* MAX_AUTOTUNE: FULL (another level: measured again), recorded as a CUDA graph */
        c.autotune = TGC_AUTOTUNE_OFF;
        c.mode = TGC_MODE_MAX_AUTOTUNE;
        got = run(c, "max", x, w, &lb, n);
        assert_int_equal(count(lb.text, "measured"), 1);
        close_to(got, ref, n, 1e-5);
        free(got);
        free(ref);
    }
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

static void symbolic_sizes_keep_the_heuristic(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    static test_log lb;
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_CUDA;
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    c.autotune = TGC_AUTOTUNE_FAST;
    int64_t sx[2] = {200, 96}, sw[2] = {96, 160};
    tgc_tensor *x = tgc_rand(sx, 2, TGC_F32, tgc_cuda(0)),
               *w = tgc_rand(sw, 2, TGC_F32, tgc_cuda(0));
    float *got = run(c, "dynamic", x, w, &lb, 200 * 160);
    assert_int_equal(count(lb.text, "autotune"), 0);
    c.dynamic = TGC_DYNAMIC_AUTO;
    c.autotune = TGC_AUTOTUNE_OFF;
    float *ref = run(c, "static", x, w, &lb, 200 * 160);
    close_to(got, ref, 200 * 160, 1e-5);
    free(got);
    free(ref);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tuned_kernels_compute_what_the_heuristic_computes),
        cmocka_unit_test(symbolic_sizes_keep_the_heuristic),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
