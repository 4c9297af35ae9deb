/* Optimizers on the GPU: SGD, Adam and AdamW steps on tgc_cuda(0), eager and compiled (one
 * compile for 20 calls), against the same double reference of PyTorch's formulas as
 * test_optim.c; tgc_module_to moving the parameters, their gradients and the optimizer's
 * state to the GPU and back in the middle of training. Skips (rc 77) without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit/unit_test_util.h"

#include "optim_ref.h"

static void on_gpu(void)
{
    optim_test_dev = tgc_cuda(0);
}

static int back_to_host(void **state)
{
    optim_test_dev = tgc_cpu();
    optim_test_cfg = NULL;
    return scoped_teardown(state);
}

static void eager_steps_on_the_gpu_match_pytorch(void **state)
{
    (void)state;
    GPU_REQUIRE();
    on_gpu();
    for (int d = 0; d < 2; d++) {
        run_eager(sgd_cfg(0.05, 0.9, 0.3, 0.1, 0, 1), dtypes[d], 5);
        run_eager(sgd_cfg(0.05, 0.9, 0, 0.1, 1, 0), dtypes[d], 5);
        run_eager(sgd_cfg(0.05, 0, 0, 0, 0, 0), dtypes[d], 5);
        run_eager(adam_cfg(K_ADAM, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), dtypes[d], 6);
        run_eager(adam_cfg(K_ADAMW, 0.01, 0.05, 0.3, 0.95, 1e-6, 0, 1), dtypes[d], 6);
        run_eager_via(adam_cfg(K_ADAMW, 0.01, 0, 0.9, 0.999, 1e-8, 1, 0), dtypes[d], 4,
                      VIA_BACKWARD);
    }
}

static void compiled_steps_on_the_gpu_compile_once(void **state)
{
    (void)state;
    GPU_REQUIRE();
    on_gpu();
    for (int d = 0; d < 2; d++)
        for (int w = 0; w < 2; w++) {
            tgc_model_fn fn = w ? train_step : update_step;
            run_compiled(sgd_cfg(0.05, 0.9, 0.3, 0.1, 0, 0), dtypes[d], 20, 9, fn);
            run_compiled(adam_cfg(K_ADAM, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), dtypes[d], 20, -1,
                         fn);
            run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.8, 0.99, 1e-8, 0, 1), dtypes[d], 20, 5,
                         fn);
        }
}

/* The same in REDUCE_OVERHEAD mode (CUDA graphs: the in-place writes replayed each call). */
static void reduce_overhead_steps_on_the_gpu(void **state)
{
    (void)state;
    GPU_REQUIRE();
    on_gpu();
    tgc_config cfg = tgc_config_default();
    cfg.mode = TGC_MODE_REDUCE_OVERHEAD;
    optim_test_cfg = &cfg;
    for (int w = 0; w < 2; w++) {
        tgc_model_fn fn = w ? train_step : update_step;
        run_compiled(sgd_cfg(0.05, 0.9, w ? 0.3 : 0, 0.1, 1 - w, 0), TGC_F32, 20, 9, fn);
        run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), TGC_F32, 20, 5, fn);
    }
    optim_test_cfg = NULL;
}

static void assert_on(tgc_tensor *t, tgc_device_type type)
{
    assert_non_null(t);
    assert_int_equal(tgc_device_of(t).type, type);
}

/* Built and stepped on the host, moved to the GPU with tgc_module_to (parameters, .grads,
 * every state tensor, the same tensor objects), stepped there, moved back, stepped again:
 * the reference's values throughout. */
static void module_to_moves_state_and_gradients(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    config c = adam_cfg(K_ADAM, 0.01, 0.02, 0.9, 0.999, 1e-8, 1, 0);
    tgc_optim *o = make(m, &c);
    assert_non_null(o);
    c.lr = f32(c.lr);
    ref_param r[NP];
    ref_init(r);
    int ns = tgc_optim_num_state(o);
    for (int s = 0; s < 6; s++) {
        if (s == 2 || s == 4) {
            tgc_device_type to = s == 2 ? TGC_DEVICE_CUDA : TGC_DEVICE_CPU;
            assert_int_equal(tgc_module_to(m, s == 2 ? tgc_cuda(0) : tgc_cpu()), TGC_OK);
            for (int i = 0; i < NP; i++) {
                assert_on(params[i], to);
                assert_on(tgc_grad(params[i]), to);
            }
            for (int i = 0; i < ns; i++)
                assert_on(tgc_optim_state(o, i, NULL), to);
            optim_test_dev = s == 2 ? tgc_cuda(0) : tgc_cpu();
        }
        tgc_scope_push();
        tgc_tensor *g[NP];
        make_grads(TGC_F32, s, g);
        set_grads(params, g);
        assert_int_equal(tgc_optim_step(o), TGC_OK);
        ref_step(&c, r, s, NULL);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    check_against(o, params, r, TGC_F32);
    tgc_optim_free(o);

    /* an optimizer over the root, a child moved: the child's parameters take their state
     * along, "step" and "lr" stay with w; moving the rest joins them again */
    o = make(m, &c);
    assert_int_equal(tgc_module_to(tgc_module_get_child(m, "fc"), tgc_cuda(0)), TGC_OK);
    for (int i = 0; i < ns; i++) {
        tgc_tensor *p = tgc_optim_state_param(o, i);
        assert_on(tgc_optim_state(o, i, NULL),
                  p && p != params[0] ? TGC_DEVICE_CUDA : TGC_DEVICE_CPU);
    }
    assert_int_equal(tgc_module_to(m, tgc_cuda(0)), TGC_OK);
    for (int i = 0; i < ns; i++)
        assert_on(tgc_optim_state(o, i, NULL), TGC_DEVICE_CUDA);
    tgc_optim_free(o);
    tgc_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(eager_steps_on_the_gpu_match_pytorch, scoped_setup,
                                        back_to_host),
        cmocka_unit_test_setup_teardown(compiled_steps_on_the_gpu_compile_once, scoped_setup,
                                        back_to_host),
        cmocka_unit_test_setup_teardown(reduce_overhead_steps_on_the_gpu, scoped_setup,
                                        back_to_host),
        cmocka_unit_test_setup_teardown(module_to_moves_state_and_gradients, scoped_setup,
                                        back_to_host),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, group_shutdown));
}
