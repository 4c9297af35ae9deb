/* tgc_fn_explain and tgc_fn_stats name the backend a function's variants run on: a function
 * compiled with backend AUTO and called on GPU tensors runs CUDA kernels, so both say "cuda"
 * (the config alone resolves to llvm or interp). Skipped without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#include <stdio.h>
#include <string.h>

#include "tgc/tgc.h"

static tgc_status gelu_sum(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_sum(tgc_gelu(tgc_add(in[0], in[0])), NULL, 0, 0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void auto_function_on_gpu_inputs_reports_backend_cuda(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    int64_t shape[2] = {32, 64};
    tgc_tensor *x = tgc_rand(shape, 2, TGC_F32, tgc_cuda(0)), *y;
    assert_non_null(x);
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_AUTO;
    tgc_fn *f = tgc_compile(gelu_sum, "on_gpu", &c);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    char *r = tgc_fn_explain(f);
    assert_non_null(r);
    if (strncmp(r, "tgc_fn 'on_gpu' (backend cuda): ", 32) != 0)
        fail_msg("explain starts \"%.80s\"", r);
    assert_non_null(strstr(r, "(cuda backend, on cuda:0)"));
    tgc_free(r);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_string_equal(s.backend, "cuda");
    tgc_fn_free(f);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_function_on_gpu_inputs_reports_backend_cuda),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
