/* Gradcheck on the GPU: every case of gradcheck_cases.h on cuda:0, eagerly and in a compiled
 * step (backend AUTO: the CUDA backend for inputs on the GPU), against a compiled step on
 * interp (CPU), in f64, f32 and, where the op takes them, f16 and bf16 (gc_tol with the GPU's
 * matrix-product tolerance). Also: dropout's recorded mask on the GPU is the CPU's bits.
 * Every case skips without a GPU (tests/gpu_skip.h: exit 77 when all skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "autograd/gradcheck_cases.h"
#include "gpu_skip.h"
#include "gpu_test_util.h"

static int case_ids[GC_N_CASES];

static void test_case_on_gpu(void **state)
{
    GPU_REQUIRE();
    const int ci = *(int *)*state;
    const gc_case *c = &gc_cases[ci];
    const tgc_dtype dts[4] = {TGC_F64, TGC_F32, TGC_F16, TGC_BF16};
    const int n_dt = c->flags & GC_HALF ? 4 : 2;
    double *vals[5] = {0};
    for (int k = 0; k < c->n_in; k++)
        vals[k] = gc_values(ci, k);
    int bad = 0;
    for (int j = 0; j < n_dt; j++) {
        const tgc_dtype dt = dts[j];
        tgc_scope_push();
        tgc_tensor *r_cpu = gc_case_weights(ci, vals, tgc_cpu());
        tgc_tensor *r_gpu = r_cpu ? tgc_to(r_cpu, tgc_cuda(0)) : NULL;
        assert_non_null(r_gpu);
        gc_grads ref, got;
        tgc_status st = gc_compiled_grads(ci, vals, dt, tgc_cpu(), r_cpu, TGC_BACKEND_INTERP, &ref);
        assert_int_equal(st, TGC_OK);
        const double tol = gc_tol(c, dt, 1);
        char what[64];
        st = gc_eager_grads(ci, vals, dt, tgc_cuda(0), r_gpu, &got);
        if (st != TGC_OK)
            print_message("%s %s: eager on cuda:0: %s\n", c->name, tgc_dtype_name(dt),
                          tgc_last_error());
        assert_int_equal(st, TGC_OK);
        snprintf(what, sizeof what, "%s cuda eager", tgc_dtype_name(dt));
        bad += gc_compare(c, what, &got, &ref, tol);
        gc_grads_free(&got);
        st = gc_compiled_grads(ci, vals, dt, tgc_cuda(0), r_gpu, TGC_BACKEND_AUTO, &got);
        if (st != TGC_OK)
            print_message("%s %s: compiled on cuda:0: %s\n", c->name, tgc_dtype_name(dt),
                          tgc_last_error());
        assert_int_equal(st, TGC_OK);
        snprintf(what, sizeof what, "%s cuda compiled", tgc_dtype_name(dt));
        bad += gc_compare(c, what, &got, &ref, tol);
        gc_grads_free(&got);
        gc_grads_free(&ref);
        tgc_scope_pop();
    }
    for (int k = 0; k < c->n_in; k++)
        free(vals[k]);
    assert_int_equal(bad, 0);
}

/* The recorded dropout on cuda:0 keeps exactly the elements the CPU keeps. */
static void test_dropout_mask_matches_cpu(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    int64_t s[2] = {33, 65};
    const int64_t n = 33 * 65;
    tgc_manual_seed(11);
    tgc_tensor *x = tgc_randn(s, 2, TGC_F32, tgc_cpu());
    tgc_tensor *xg = tgc_to(x, tgc_cuda(0));
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad(xg, 1), TGC_OK);
    tgc_manual_seed(21);
    tgc_tensor *yc = tgc_dropout(x, 0.4, 1);
    tgc_manual_seed(21);
    tgc_tensor *yg = tgc_dropout(xg, 0.4, 1);
    assert_int_equal(tgc_backward(tgc_sum(yc, NULL, 0, 0)), TGC_OK);
    assert_int_equal(tgc_backward(tgc_sum(yg, NULL, 0, 0)), TGC_OK);
    int64_t m = 0;
    double *a = gpu_values(tgc_grad(x), &m), *b = gpu_values(tgc_grad(xg), &m);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(m, n);
    for (int64_t i = 0; i < n; i++)
        assert_true((a[i] == 0) == (b[i] == 0));
    free(a);
    free(b);
    tgc_scope_pop();
}

int main(void)
{
    static struct CMUnitTest tests[GC_N_CASES + 1];
    static char names[GC_N_CASES][80];
    int n = 0;
    for (int i = 0; i < GC_N_CASES; i++) {
        case_ids[i] = i;
        snprintf(names[i], sizeof names[0], "cuda/%s", gc_cases[i].name);
        tests[n++] = (struct CMUnitTest){names[i], test_case_on_gpu, NULL, NULL, &case_ids[i]};
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_dropout_mask_matches_cpu);
    int r = _cmocka_run_group_tests("test_cuda_gradcheck", tests, (size_t)n, NULL, NULL);
    tgc_shutdown();
    return gpu_skip_finish(r);
}
