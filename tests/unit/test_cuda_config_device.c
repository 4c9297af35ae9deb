/* A compiled function without tensor inputs (it only creates tensors) runs on the GPU that
 * cfg.device names, with backend CUDA or AUTO, in DEFAULT and REDUCE_OVERHEAD mode; left at
 * its default (the CPU), backend CUDA says so. Skipped without a GPU (tests/gpu_skip.h);
 * tests/unit/test_config.c checks the host side. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#include <stdio.h>
#include <string.h>

#include "tgc/compile.h"
#include "tgc/config.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

static tgc_device make_dev; /* where make_values creates its tensors */

/* a * a + 1 + 0 * noise for a = arange(4): 1, 2, 5, 10 (the draw is a graph op of the
 * variant's device) */
static tgc_status make_values(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)in, (void)n_in, (void)n_out;
    int64_t s[1] = {4};
    tgc_tensor *a = tgc_arange(0, 4, 1, TGC_F32, make_dev);
    tgc_tensor *noise = tgc_mul_scalar(tgc_randn(s, 1, TGC_F32, make_dev), 0.0);
    out[0] = tgc_add(tgc_add_scalar(tgc_mul(a, a), 1.0), noise);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* a * a for a = arange(4) */
static tgc_status make_squares(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)self, (void)in, (void)n_in, (void)n_out;
    tgc_tensor *a = tgc_arange(0, 4, 1, TGC_F32, make_dev);
    out[0] = tgc_mul(a, a);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void expect_values_on_gpu(tgc_fn *f)
{
    tgc_tensor *y = NULL;
    tgc_clear_error();
    if (tgc_call(f, NULL, NULL, 0, &y, 1) != TGC_OK)
        fail_msg("tgc_call: %s", tgc_last_error());
    tgc_device d = tgc_device_of(y);
    assert_int_equal(d.type, TGC_DEVICE_CUDA);
    assert_int_equal(d.index, 0);
    float got[4];
    assert_int_equal(tgc_copy_to_host(y, got, sizeof got), TGC_OK);
    assert_true(got[0] == 1.0f && got[1] == 2.0f && got[2] == 5.0f && got[3] == 10.0f);
}

static void test_no_inputs_run_on_cfg_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    make_dev = tgc_cuda(0);
    const tgc_backend_kind kinds[] = {TGC_BACKEND_CUDA, TGC_BACKEND_AUTO};
    const tgc_mode modes[] = {TGC_MODE_DEFAULT, TGC_MODE_REDUCE_OVERHEAD};
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < 2; m++) {
            tgc_config c = tgc_config_default();
            c.backend = kinds[k];
            c.mode = modes[m];
            c.device = tgc_cuda(0);
            tgc_fn *f = tgc_compile(make_values, "make", &c);
            assert_non_null(f);
            for (int i = 0; i < 3; i++)
                expect_values_on_gpu(f);
            tgc_stats st;
            assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
            assert_int_equal(st.compiles, 1);
            assert_int_equal(st.cache_hits, 2);
            assert_string_equal(st.backend, "cuda");
            tgc_fn_free(f);
        }
}

static void test_no_inputs_cuda_backend_needs_cfg_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    make_dev = tgc_cuda(0);
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_CUDA; /* cfg.device left at tgc_cpu() */
    tgc_fn *f = tgc_compile(make_values, "make", &c);
    assert_non_null(f);
    tgc_tensor *y = NULL;
    tgc_clear_error();
    assert_int_equal(tgc_call(f, NULL, NULL, 0, &y, 1), TGC_ERR_DEVICE);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: cfg.backend is CUDA but 'make' has no tensor inputs or module "
                        "tensors, so it runs on cfg.device (cpu); set cfg.device to the GPU "
                        "(tgc_cuda(i)), or use TGC_BACKEND_AUTO");
    tgc_fn_free(f);
}

/* created on the host while the function runs on the GPU: refused, naming both */
static void test_no_inputs_tensor_on_another_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    make_dev = tgc_cpu();
    tgc_config c = tgc_config_default();
    c.device = tgc_cuda(0);
    tgc_fn *f = tgc_compile(make_squares, "make", &c);
    assert_non_null(f);
    tgc_tensor *y = NULL;
    tgc_clear_error();
    assert_int_equal(tgc_call(f, NULL, NULL, 0, &y, 1), TGC_ERR_DEVICE);
    const char *want = "tgc_call: 'make' reads a module or captured tensor on cpu, but it runs on "
                       "cuda:0 (its inputs' device, else its module's, else cfg.device)";
    if (strncmp(tgc_last_error(), want, strlen(want)) != 0)
        fail_msg("message \"%s\" does not start with \"%s\"", tgc_last_error(), want);
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_inputs_run_on_cfg_device, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_no_inputs_cuda_backend_needs_cfg_device, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_no_inputs_tensor_on_another_device, scoped_setup,
                                        scoped_teardown),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, group_shutdown));
}
