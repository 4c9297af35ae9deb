/* Optimizers (tgc/autograd.h: tgc_sgd, tgc_adam, tgc_adamw): several steps with hand-set
 * gradients against a reference written here in plain C double arithmetic of PyTorch's
 * torch.optim formulas (foreach=False), for every option combination, in f32 and f64,
 * eagerly and inside a compiled function (one compile for 20 calls; tgc_optim_set_lr changes
 * the update without a recompile); the state tensors' names, order and values; invalid
 * options with their statuses; tgc_module_to with the state; the module freed before its
 * optimizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit/unit_test_util.h"

#include "optim_ref.h"

static void sgd_matches_pytorch_in_every_combination(void **state)
{
    (void)state;
    int cases = 0;
    for (int d = 0; d < 2; d++)
        for (int mom = 0; mom < 2; mom++)
            for (int damp = 0; damp < 2; damp++)
                for (int nest = 0; nest < 2; nest++)
                    for (int wd = 0; wd < 2; wd++)
                        for (int max = 0; max < 2; max++) {
                            config c = sgd_cfg(0.05, mom ? 0.9 : 0, damp ? 0.3 : 0, wd ? 0.1 : 0,
                                               nest, max);
                            if (nest && (!mom || damp))
                                continue; /* invalid: tested below */
                            run_eager(c, dtypes[d], 5);
                            cases++;
                        }
    assert_int_equal(cases, 2 * 20);
}

static void adam_and_adamw_match_pytorch_in_every_combination(void **state)
{
    (void)state;
    /* betas: the defaults, others, and beta1 0.3, where torch.lerp's weight 0.7 takes its
     * second form */
    static const double betas[][2] = {{0.9, 0.999}, {0.8, 0.99}, {0.3, 0.95}};
    for (int d = 0; d < 2; d++)
        for (int k = K_ADAM; k <= K_ADAMW; k++)
            for (int ams = 0; ams < 2; ams++)
                for (int wd = 0; wd < 2; wd++)
                    for (int max = 0; max < 2; max++)
                        for (int b = 0; b < 3; b++) {
                            config c = adam_cfg((kind)k, 0.01, wd ? 0.05 : 0, betas[b][0],
                                                betas[b][1], b == 1 ? 1e-6 : 1e-8, ams, max);
                            run_eager(c, dtypes[d], 6);
                        }
}

/* f16 and bf16 parameters keep state of their dtype and step close to the reference. Adam
 * only in bf16: in f16 the square of a small gradient (here 0.005) underflows to 0 (and eps
 * 1e-8 rounds to 0), in PyTorch as here, so its update is nothing like the double one. */
static void reduced_precision_parameters_step(void **state)
{
    (void)state;
    const tgc_dtype low[] = {TGC_F16, TGC_BF16};
    for (int d = 0; d < 2; d++) {
        run_eager(sgd_cfg(0.05, 0.9, 0, 0.1, 1, 0), low[d], 3);
        run_eager(sgd_cfg(0.05, 0.9, 0.3, 0, 0, 1), low[d], 3);
        if (low[d] == TGC_F16)
            continue;
        run_eager(adam_cfg(K_ADAM, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), low[d], 3);
        run_eager(adam_cfg(K_ADAMW, 0.01, 0.05, 0.9, 0.999, 1e-8, 0, 1), low[d], 3);
    }
}

/* The gradients reach the optimizer as .grad set by hand, through tgc_backward after
 * tgc_optim_zero_grad, or given to the internal tgc_optim_step_grads: the same updates. */
static void every_gradient_path_gives_the_same_update(void **state)
{
    (void)state;
    for (int via = VIA_GRAD; via <= VIA_STEP_GRADS; via++) {
        run_eager_via(sgd_cfg(0.05, 0.9, 0.3, 0.1, 0, 1), TGC_F32, 4, (grad_path)via);
        run_eager_via(adam_cfg(K_ADAMW, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), TGC_F64, 4,
                      (grad_path)via);
    }
}

/* tgc_optim_zero_grad zeroes each parameter's .grad in place, creating it when missing. */
static void zero_grad_zeroes_and_creates_gradients(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    tgc_sgd_opts so = {.lr = 0.1};
    tgc_optim *o = tgc_sgd(m, &so);
    tgc_tensor *g[NP];
    make_grads(TGC_F32, 0, g);
    assert_int_equal(tgc_autograd_ensure_grad(params[0]), TGC_OK);
    assert_int_equal(tgc_copy_(tgc_grad(params[0]), g[0]), TGC_OK);
    tgc_tensor *g0 = tgc_grad(params[0]);
    assert_null(tgc_grad(params[1]));
    assert_int_equal(tgc_optim_zero_grad(o), TGC_OK);
    assert_ptr_equal(tgc_grad(params[0]), g0); /* in place */
    for (int i = 0; i < NP; i++) {
        double v[MAXN];
        assert_non_null(tgc_grad(params[i]));
        read_f64(tgc_grad(params[i]), v, numels[i]);
        for (int k = 0; k < numels[i]; k++)
            assert_true(v[k] == 0);
    }
    /* a zero gradient still takes a step: here plain SGD leaves the values as they were */
    assert_int_equal(tgc_optim_step(o), TGC_OK);
    ref_param r[NP];
    ref_init(r);
    check_against(o, params, r, TGC_F32);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* Defaults: TGC_OPTIM_DEFAULT asks for PyTorch's (AdamW's weight decay 1e-2), betas and eps
 * left 0 take PyTorch's, a weight decay of 0 is none for Adam and AdamW alike. */
static void zero_fields_take_pytorch_defaults(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    char buf[256];
    const char *none = "{\"lr\":0.001,\"betas\":[0.9,0.999],\"eps\":1e-08,\"weight_decay\":0,"
                       "\"amsgrad\":false,\"maximize\":false}";
    tgc_optim *o = tgc_adamw(m, &(tgc_adam_opts){.lr = 1e-3});
    assert_non_null(o);
    tgc_optim_hparams(o, buf, sizeof buf);
    assert_string_equal(buf, none);
    tgc_optim_free(o);
    o = tgc_adam(m, &(tgc_adam_opts){.lr = 1e-3, .weight_decay = TGC_OPTIM_DEFAULT});
    assert_non_null(o);
    tgc_optim_hparams(o, buf, sizeof buf);
    assert_string_equal(buf, none);
    tgc_optim_free(o);
    tgc_adam_opts ao = {.lr = 1e-3,
                        .beta1 = TGC_OPTIM_DEFAULT,
                        .beta2 = TGC_OPTIM_DEFAULT,
                        .eps = TGC_OPTIM_DEFAULT,
                        .weight_decay = TGC_OPTIM_DEFAULT};
    o = tgc_adamw(m, &ao);
    assert_non_null(o);
    int n = tgc_optim_hparams(o, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(buf, "{\"lr\":0.001,\"betas\":[0.9,0.999],\"eps\":1e-08,\"weight_decay\":"
                             "0.01,\"amsgrad\":false,\"maximize\":false}");
    assert_string_equal(tgc_optim_kind(o), "adamw");
    assert_ptr_equal(tgc_optim_module(o), m);
    config c = adam_cfg(K_ADAMW, f32(1e-3), 1e-2, 0.9, 0.999, 1e-8, 0, 0);
    ref_param r[NP];
    ref_init(r);
    for (int s = 0; s < 3; s++) {
        tgc_tensor *g[NP];
        make_grads(TGC_F32, s, g);
        assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
        ref_step(&c, r, s, NULL);
    }
    check_against(o, params, r, TGC_F32);
    tgc_optim_free(o);

    tgc_sgd_opts so = {.lr = 0.1, .momentum = 0.9, .nesterov = 1};
    o = tgc_sgd(m, &so);
    assert_non_null(o);
    tgc_optim_hparams(o, buf, sizeof buf);
    assert_string_equal(buf, "{\"lr\":0.1,\"momentum\":0.9,\"dampening\":0,\"weight_decay\":0,"
                             "\"nesterov\":true,\"maximize\":false}");
    assert_string_equal(tgc_optim_kind(o), "sgd");
    assert_int_equal(tgc_optim_hparams(o, NULL, 0), (int)strlen(buf));
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* State: "step", "lr", then each parameter's tensors in tree order, zeros of its shape,
 * dtype and device; buffers and parameters that require no gradient have none. */
static void state_is_named_ordered_and_zero(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F64, params);
    tgc_adam_opts ao = {.lr = 1e-3, .amsgrad = 1};
    tgc_optim *o = tgc_adam(m, &ao);
    assert_non_null(o);
    static const char *const want[] = {"step",
                                       "lr",
                                       "w.exp_avg",
                                       "w.exp_avg_sq",
                                       "w.max_exp_avg_sq",
                                       "fc.weight.exp_avg",
                                       "fc.weight.exp_avg_sq",
                                       "fc.weight.max_exp_avg_sq",
                                       "fc.inner.bias.exp_avg",
                                       "fc.inner.bias.exp_avg_sq",
                                       "fc.inner.bias.max_exp_avg_sq"};
    assert_int_equal(tgc_optim_num_state(o), N_OF(want));
    for (int i = 0; i < N_OF(want); i++) {
        const char *name = NULL;
        tgc_tensor *t = tgc_optim_state(o, i, &name);
        assert_non_null(t);
        assert_string_equal(name, want[i]);
        if (i < 2) {
            assert_int_equal(tgc_ndim(t), 0);
            assert_int_equal(tgc_dtype_of(t), TGC_F32);
            assert_null(tgc_optim_state_param(o, i));
            continue;
        }
        int p = (i - 2) / 3;
        assert_ptr_equal(tgc_optim_state_param(o, i), params[p]);
        assert_int_equal(tgc_dtype_of(t), TGC_F64);
        assert_int_equal(tgc_ndim(t), ndims[p]);
        assert_int_equal(tgc_numel(t), numels[p]);
        double v[MAXN];
        read_f64(t, v, numels[p]);
        for (int k = 0; k < numels[p]; k++)
            assert_true(v[k] == 0);
    }
    double v;
    read_f64(tgc_optim_state(o, 1, NULL), &v, 1);
    assert_true(v == f32(1e-3));
    assert_true(tgc_optim_lr(o) == f32(1e-3));
    int np;
    tgc_tensor *const *ps = tgc_optim_params(o, &np);
    assert_int_equal(np, NP);
    for (int i = 0; i < NP; i++)
        assert_ptr_equal(ps[i], params[i]);
    assert_null(tgc_optim_state(o, N_OF(want), NULL));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_null(tgc_optim_state(o, -1, NULL));
    tgc_optim_free(o);

    /* plain SGD keeps no per-parameter state; with momentum one buffer each */
    tgc_sgd_opts so = {.lr = 0.1};
    o = tgc_sgd(m, &so);
    assert_int_equal(tgc_optim_num_state(o), 2);
    tgc_optim_free(o);
    so.momentum = 0.5;
    o = tgc_sgd(m, &so);
    assert_int_equal(tgc_optim_num_state(o), 2 + NP);
    const char *name;
    assert_non_null(tgc_optim_state(o, 3, &name));
    assert_string_equal(name, "fc.weight.momentum_buffer");
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* A parameter without a gradient is skipped: neither it nor its state changes. */
static void parameters_without_gradient_are_skipped(void **state)
{
    (void)state;
    for (int k = K_SGD; k <= K_ADAMW; k++) {
        tgc_tensor *params[NP];
        tgc_module *m = build(TGC_F64, params);
        config c = k == K_SGD ? sgd_cfg(0.02, 0.9, 0, 0.01, 0, 0)
                              : adam_cfg((kind)k, 0.02, 0.01, 0.9, 0.999, 1e-8, 0, 0);
        tgc_optim *o = make(m, &c);
        assert_non_null(o);
        c.lr = f32(c.lr);
        ref_param r[NP];
        ref_init(r);
        const int skip[NP] = {0, 1, 0};
        for (int s = 0; s < 4; s++) {
            tgc_tensor *g[NP];
            make_grads(TGC_F64, s, g);
            if (s % 2) { /* the internal path: a NULL gradient */
                g[1] = NULL;
                assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
            } else { /* the public one: fc.weight has no .grad */
                for (int i = 0; i < NP; i += 2) {
                    assert_int_equal(tgc_autograd_ensure_grad(params[i]), TGC_OK);
                    assert_int_equal(tgc_copy_(tgc_grad(params[i]), g[i]), TGC_OK);
                }
                assert_int_equal(tgc_optim_step(o), TGC_OK);
            }
            assert_null(tgc_grad(params[1]));
            ref_step(&c, r, s, skip);
        }
        check_against(o, params, r, TGC_F64);
        tgc_optim_free(o);
        tgc_module_free(m);
    }
}

static void compiled_steps_match_pytorch_and_compile_once(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        for (int w = 0; w < 2; w++) {
            tgc_model_fn fn = w ? train_step : update_step;
            run_compiled(sgd_cfg(0.05, 0.9, 0.3, 0.1, 0, 0), dtypes[d], 20, -1, fn);
            run_compiled(sgd_cfg(0.05, 0.9, 0, 0.1, 1, 1), dtypes[d], 20, -1, fn);
            run_compiled(sgd_cfg(0.05, 0, 0, 0, 0, 0), dtypes[d], 20, -1, fn);
            run_compiled(adam_cfg(K_ADAM, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), dtypes[d], 20, -1,
                         fn);
            run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.8, 0.99, 1e-8, 0, 1), dtypes[d], 20, -1,
                         fn);
        }
    }
}

static void set_lr_changes_the_update_without_recompiling(void **state)
{
    (void)state;
    run_compiled(sgd_cfg(0.05, 0.9, 0, 0, 0, 0), TGC_F32, 20, 7, update_step);
    run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.9, 0.999, 1e-8, 0, 0), TGC_F64, 20, 11,
                 train_step);
}

static void set_lr_changes_the_eager_update(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F64, params);
    config c = adam_cfg(K_ADAM, 0.01, 0, 0.9, 0.999, 1e-8, 0, 0);
    tgc_optim *o = make(m, &c);
    c.lr = f32(c.lr);
    ref_param r[NP];
    ref_init(r);
    for (int s = 0; s < 6; s++) {
        if (s == 3) {
            assert_int_equal(tgc_optim_set_lr(o, 0.5), TGC_OK);
            c.lr = 0.5;
        }
        tgc_tensor *g[NP];
        make_grads(TGC_F64, s, g);
        set_grads(params, g);
        assert_int_equal(tgc_optim_step(o), TGC_OK);
        ref_step(&c, r, s, NULL);
    }
    check_against(o, params, r, TGC_F64);
    assert_true(tgc_optim_lr(o) == 0.5);
    check_error(tgc_optim_set_lr(o, 0), TGC_ERR_INVALID_ARG, "lr is 0");
    check_error(tgc_optim_set_lr(o, -1), TGC_ERR_INVALID_ARG, "tgc_optim_set_lr");
    check_error(tgc_optim_set_lr(o, NAN), TGC_ERR_INVALID_ARG, "tgc_optim_set_lr");
    check_error(tgc_optim_set_lr(o, 1e-50), TGC_ERR_INVALID_ARG, "f32");
    assert_true(tgc_optim_lr(o) == 0.5);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* ---- invalid options ---- */

static void invalid_options_fail_with_invalid_arg(void **state)
{
    (void)state;
    tgc_module *m = build(TGC_F32, NULL);
    tgc_sgd_opts s = {.lr = 0.1};
    tgc_adam_opts a = {.lr = 0.1};
    tgc_clear_error();
    assert_null(tgc_sgd(NULL, &s));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "module is NULL");
    assert_null(tgc_sgd(m, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "opts is NULL");
    assert_null(tgc_adam(NULL, &a));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_adam: module is NULL");
    assert_null(tgc_adamw(m, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_adamw: opts is NULL");

    const double bad_lr[] = {0, -0.1, INFINITY, NAN, 1e-50, 1e300};
    for (int i = 0; i < N_OF(bad_lr); i++) {
        s.lr = a.lr = bad_lr[i];
        assert_null(tgc_sgd(m, &s));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_sgd: lr is");
        assert_null(tgc_adam(m, &a));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_adam: lr is");
        assert_null(tgc_adamw(m, &a));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_adamw: lr is");
    }
    s.lr = a.lr = 0.1;

    tgc_sgd_opts bad_sgd[] = {
        {.lr = 0.1, .momentum = -0.5},
        {.lr = 0.1, .momentum = NAN},
        {.lr = 0.1, .weight_decay = -1e-4},
        {.lr = 0.1, .dampening = INFINITY},
        {.lr = 0.1, .nesterov = 1},                                    /* no momentum */
        {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = 1}, /* dampening */
    };
    const char *sgd_msg[] = {"momentum is -0.5",
                             "momentum",
                             "weight_decay is -0.0001",
                             "dampening",
                             "nesterov needs momentum > 0",
                             "dampening 0"};
    for (int i = 0; i < N_OF(bad_sgd); i++) {
        assert_null(tgc_sgd(m, &bad_sgd[i]));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, sgd_msg[i]);
    }

    tgc_adam_opts bad_adam[] = {
        {.lr = 0.1, .beta1 = 1.0},        {.lr = 0.1, .beta1 = -0.1}, {.lr = 0.1, .beta2 = 1.5},
        {.lr = 0.1, .beta2 = NAN},        {.lr = 0.1, .eps = -1e-8},  {.lr = 0.1, .eps = INFINITY},
        {.lr = 0.1, .weight_decay = NAN},
    };
    const char *adam_msg[] = {"beta1 is 1",    "beta1 is -0.1", "beta2 is 1.5", "beta2",
                              "eps is -1e-08", "eps is inf",    "weight_decay"};
    for (int i = 0; i < N_OF(bad_adam); i++) {
        assert_null(tgc_adam(m, &bad_adam[i]));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, adam_msg[i]);
        assert_null(tgc_adamw(m, &bad_adam[i]));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, adam_msg[i]);
    }
    /* every floating option: NaN, both infinities and a negative value are refused, with
     * the function and the field named */
    const double bad_value[] = {NAN, INFINITY, -INFINITY, -0.1};
    const char *bad_text[] = {"nan", "inf", "-inf", "-0.1"};
    const char *sgd_field[] = {"momentum", "dampening", "weight_decay"};
    const char *adam_field[] = {"beta1", "beta2", "eps", "weight_decay"};
    char want[200];
    for (int v = 0; v < N_OF(bad_value); v++) {
        for (int f = 0; f < N_OF(sgd_field); f++) {
            tgc_sgd_opts so = {.lr = 0.1};
            double *field[] = {&so.momentum, &so.dampening, &so.weight_decay};
            *field[f] = bad_value[v];
            assert_null(tgc_sgd(m, &so));
            snprintf(want, sizeof want, "tgc_sgd: %s is %s; it must be finite and ", sgd_field[f],
                     bad_text[v]);
            check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, want);
        }
        for (int f = 0; f < N_OF(adam_field); f++)
            for (int k = 0; k < 2; k++) {
                tgc_adam_opts ao = {.lr = 0.1};
                double *field[] = {&ao.beta1, &ao.beta2, &ao.eps, &ao.weight_decay};
                *field[f] = bad_value[v];
                assert_null(k ? tgc_adamw(m, &ao) : tgc_adam(m, &ao));
                snprintf(want, sizeof want, "%s: %s is %s; it must be finite and ",
                         k ? "tgc_adamw" : "tgc_adam", adam_field[f], bad_text[v]);
                check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, want);
            }
    }
    assert_null(tgc_sgd(m, &(tgc_sgd_opts){.lr = 0.1, .dampening = 1.5}));
    assert_string_equal(tgc_last_error(), "tgc_sgd: dampening is 1.5; it must be finite and in "
                                          "[0, 1] (TGC_OPTIM_DEFAULT: 0)");
    assert_null(tgc_adamw(m, &(tgc_adam_opts){.lr = 0.1, .weight_decay = -1}));
    assert_string_equal(tgc_last_error(), "tgc_adamw: weight_decay is -1; it must be finite and "
                                          ">= 0 (TGC_OPTIM_DEFAULT: 0.01)");
    char buf[200];

    /* NULL optimizers */
    check_error(tgc_optim_step(NULL), TGC_ERR_INVALID_ARG, "optimizer is NULL");
    check_error(tgc_optim_zero_grad(NULL), TGC_ERR_INVALID_ARG, "optimizer is NULL");
    check_error(tgc_optim_set_lr(NULL, 0.1), TGC_ERR_INVALID_ARG, "optimizer is NULL");
    assert_true(tgc_optim_lr(NULL) == 0);
    assert_int_equal(tgc_optim_num_state(NULL), 0);
    assert_null(tgc_optim_state(NULL, 0, NULL));
    assert_null(tgc_optim_kind(NULL));
    assert_int_equal(tgc_optim_hparams(NULL, buf, sizeof buf), -1);
    tgc_optim_free(NULL);
    tgc_module_free(m);
}

static tgc_status create_inside(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    tgc_sgd_opts so = {.lr = 0.1};
    tgc_optim *o = tgc_sgd(self, &so);
    if (!o)
        return tgc_last_status();
    tgc_optim_free(o);
    out[0] = tgc_mul_scalar(tgc_module_get(self, "w"), 1.0);
    return TGC_OK;
}

/* An optimizer's state must exist before a compiled step binds it: creating one while
 * tracing is refused. */
static void creating_an_optimizer_while_tracing_fails(void **state)
{
    (void)state;
    tgc_module *m = build(TGC_F32, NULL);
    tgc_fn *f = tgc_compile(create_inside, "create_inside", NULL);
    tgc_tensor *out = NULL;
    check_error(tgc_call(f, m, NULL, 0, &out, 1), TGC_ERR_INVALID_ARG,
                "tgc_sgd: called while tracing");
    tgc_fn_free(f);
    tgc_module_free(m);
}

/* Gradients that do not match their parameter are refused before anything is written. */
static void mismatched_gradients_fail_and_change_nothing(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    tgc_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    tgc_optim *o = tgc_sgd(m, &so);
    tgc_tensor *g[NP];
    make_grads(TGC_F32, 0, g);
    tgc_tensor *good = g[2];
    g[2] = tgc_zeros((int64_t[]){6}, 1, TGC_F32, tgc_cpu());
    check_error(tgc_optim_step_grads(o, g), TGC_ERR_SHAPE, "gradient of 'fc.inner.bias' is [6]");
    g[2] = tgc_zeros((int64_t[]){5}, 1, TGC_F64, tgc_cpu());
    check_error(tgc_optim_step_grads(o, g), TGC_ERR_DTYPE, "gradient of 'fc.inner.bias' is f64");
    check_error(tgc_optim_step_grads(o, NULL), TGC_ERR_INVALID_ARG, "grads is NULL");
    g[2] = good;
    ref_param r[NP];
    ref_init(r);
    check_against(o, params, r, TGC_F32); /* nothing moved, buffers still zero */
    double step;
    read_f64(tgc_optim_state(o, 0, NULL), &step, 1);
    assert_true(step == 0);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* ---- the module ---- */

/* tgc_module_to keeps the state with the parameters: to the device they are on, nothing
 * moves and the optimizer goes on; to an unavailable device it fails and nothing moves. */
static void module_to_keeps_state_with_parameters(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    config c = adam_cfg(K_ADAM, 0.01, 0, 0.9, 0.999, 1e-8, 0, 0);
    tgc_optim *o = make(m, &c);
    c.lr = f32(c.lr);
    ref_param r[NP];
    ref_init(r);
    tgc_tensor *st[16];
    int ns = tgc_optim_num_state(o);
    for (int i = 0; i < ns; i++)
        st[i] = tgc_optim_state(o, i, NULL);
    for (int s = 0; s < 4; s++) {
        tgc_tensor *g[NP];
        make_grads(TGC_F32, s, g);
        set_grads(params, g);
        assert_int_equal(tgc_optim_step(o), TGC_OK);
        ref_step(&c, r, s, NULL);
        if (s == 1)
            assert_int_equal(tgc_module_to(m, tgc_cpu()), TGC_OK);
        if (s == 2) {
            tgc_status got = tgc_module_to(m, tgc_cuda(7));
            assert_int_equal(got, TGC_ERR_DEVICE);
        }
    }
    check_against(o, params, r, TGC_F32);
    for (int i = 0; i < ns; i++) {
        assert_ptr_equal(tgc_optim_state(o, i, NULL), st[i]); /* the same tensors */
        assert_int_equal(tgc_device_of(st[i]).type, TGC_DEVICE_CPU);
    }
    double got[MAXN], want[MAXN]; /* the gradients too stayed what they were */
    read_f64(tgc_grad(params[2]), got, numels[2]);
    for (int k = 0; k < numels[2]; k++)
        want[k] = grad_value(2, k, 3);
    close_to(got, want, numels[2], TGC_F32, "grad", pnames[2]);
    /* a child's tgc_module_to, an optimizer over the root: still one device, still fine */
    assert_int_equal(tgc_module_to(tgc_module_get_child(m, "fc"), tgc_cpu()), TGC_OK);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* Freeing the module first: the optimizer's calls fail with TGC_ERR_INVALID_ARG, its state
 * stays readable, and tgc_optim_free is safe. Two optimizers over one module: freeing one
 * leaves the other attached. */
static void module_freed_before_its_optimizer(void **state)
{
    (void)state;
    tgc_module *m = build(TGC_F32, NULL);
    tgc_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    tgc_adam_opts ao = {.lr = 0.1};
    tgc_optim *o1 = tgc_sgd(m, &so), *o2 = tgc_adam(m, &ao),
              *o3 = tgc_adam(tgc_module_get_child(m, "fc"), &ao);
    assert_non_null(o1);
    assert_non_null(o2);
    assert_non_null(o3);
    int np;
    tgc_optim_params(o3, &np);
    assert_int_equal(np, 2); /* fc.weight, fc.inner.bias: names below fc */
    const char *name;
    tgc_optim_state(o3, 2, &name);
    assert_string_equal(name, "weight.exp_avg");
    tgc_optim_free(o1);
    tgc_module_free(m);
    assert_null(tgc_optim_module(o2));
    check_error(tgc_optim_step(o2), TGC_ERR_INVALID_ARG, "was freed");
    check_error(tgc_optim_zero_grad(o2), TGC_ERR_INVALID_ARG, "was freed");
    check_error(tgc_optim_set_lr(o3, 0.1), TGC_ERR_INVALID_ARG, "was freed");
    check_error(tgc_optim_step_grads(o3, NULL), TGC_ERR_INVALID_ARG, "was freed");
    assert_int_equal(tgc_optim_num_state(o2), 2 + 2 * NP);
    assert_non_null(tgc_optim_state(o2, 2, NULL));
    assert_null(tgc_optim_state_param(o2, 2));
    tgc_optim_params(o2, &np);
    assert_int_equal(np, 0);
    assert_true(tgc_optim_lr(o2) == f32(0.1));
    tgc_optim_free(o2);
    tgc_optim_free(o3);
}

/* The dotted names optimizer state and checkpoints use (tgc_module_flat_name): every flat
 * tensor, buffers told apart, snprintf-style lengths and truncation, any depth and length. */
static void flat_names_are_dotted_paths_below_the_module(void **state)
{
    (void)state;
    tgc_module *m = build(TGC_F32, NULL);
    static const char *const want[] = {"w", "running", "fc.weight", "fc.frozen", "fc.inner.bias"};
    int n;
    tgc_module_flat(m, &n);
    assert_int_equal(n, N_OF(want));
    for (int i = 0; i < n; i++) {
        char buf[64];
        int is_buffer = -1;
        assert_int_equal(tgc_module_flat_name(m, i, buf, sizeof buf, &is_buffer),
                         (int)strlen(want[i]));
        assert_string_equal(buf, want[i]);
        assert_int_equal(is_buffer, i == 1);
        assert_int_equal(tgc_module_flat_name(m, i, NULL, 0, NULL), (int)strlen(want[i]));
    }
    char small[6] = "xxxxx";
    assert_int_equal(tgc_module_flat_name(m, 4, small, sizeof small, NULL), 13);
    assert_string_equal(small, "fc.in");
    assert_int_equal(tgc_module_flat_name(m, 5, small, sizeof small, NULL), -1);
    assert_int_equal(tgc_module_flat_name(m, -1, small, sizeof small, NULL), -1);
    assert_int_equal(tgc_module_flat_name(NULL, 0, small, sizeof small, NULL), -1);
    /* below a child: the child's own name left out */
    char buf[64];
    tgc_module *fc = tgc_module_get_child(m, "fc");
    assert_int_equal(tgc_module_flat_name(fc, 2, buf, sizeof buf, NULL), 10);
    assert_string_equal(buf, "inner.bias");
    tgc_module_free(m);

    /* 40 levels of 30-character names: a 1250-character path */
    char name[31];
    memset(name, 'a', 30);
    name[30] = 0;
    tgc_module *root = tgc_module_create("root", NULL), *at = root;
    for (int d = 0; d < 40; d++) {
        tgc_module *c = tgc_module_create("c", NULL);
        name[0] = (char)('a' + d % 26);
        assert_int_equal(tgc_module_child(at, name, c), TGC_OK);
        at = c;
    }
    assert_non_null(tgc_module_param(at, "p", tgc_ones(NULL, 0, TGC_F32, tgc_cpu())));
    int len = tgc_module_flat_name(root, 0, NULL, 0, NULL);
    assert_int_equal(len, 40 * 31 + 1);
    char *path = malloc((size_t)len + 1);
    assert_int_equal(tgc_module_flat_name(root, 0, path, (size_t)len + 1, NULL), len);
    assert_int_equal((int)strlen(path), len);
    assert_true(path[0] == 'a' && path[30] == '.' && path[31] == 'b' && path[len - 1] == 'p');
    free(path);
    tgc_module_free(root);
}

/* A module with nothing to train: an optimizer over it steps (the count only). */
static void module_without_parameters(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("empty", NULL);
    tgc_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    tgc_optim *o = tgc_sgd(m, &so);
    assert_non_null(o);
    assert_int_equal(tgc_optim_num_state(o), 2);
    assert_int_equal(tgc_optim_step(o), TGC_OK);
    assert_int_equal(tgc_optim_zero_grad(o), TGC_OK);
    double step;
    read_f64(tgc_optim_state(o, 0, NULL), &step, 1);
    assert_true(step == 1);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* A checkpoint cannot bring an lr or a step count the options would refuse: the load fails
 * naming the file and the value, and changes nothing. */
static void checkpoint_with_invalid_lr_or_step_is_refused(void **state)
{
    (void)state;
    tgc_module *m = build(TGC_F32, NULL);
    char path[96];
    snprintf(path, sizeof path, "/tmp/tgc_optim_bad_scalar_%d.safetensors", (int)getpid());
    const char *names[] = {"lr", "lr", "lr", "step", "step", "step"};
    const float values[] = {NAN, -0.5f, INFINITY, -1.0f, 2.5f, NAN};
    const char *shown[] = {"lr nan", "lr -0.5", "lr inf", "step -1", "step 2.5", "step nan"};
    for (int c = 0; c < N_OF(names); c++) {
        tgc_optim *a = tgc_adam(m, &(tgc_adam_opts){.lr = 1e-3});
        tgc_optim *b = tgc_adam(m, &(tgc_adam_opts){.lr = 2e-3});
        assert_non_null(a);
        assert_non_null(b);
        for (int i = 0; i < tgc_optim_num_state(a); i++) {
            const char *name;
            tgc_tensor *t = tgc_optim_state(a, i, &name);
            if (strcmp(name, names[c]) == 0)
                assert_int_equal(tgc_copy_(t, tgc_full(NULL, 0, values[c], TGC_F32, tgc_cpu())),
                                 TGC_OK);
        }
        assert_int_equal(tgc_optim_save(a, path), TGC_OK);
        assert_int_equal(tgc_optim_load(b, path), TGC_ERR_INVALID_ARG);
        char want[256];
        snprintf(want, sizeof want, "tgc_optim_load: '%s' holds %s; it must be finite and ", path,
                 shown[c]);
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, want);
        assert_true(tgc_optim_lr(b) == (double)2e-3f); /* unchanged */
        tgc_optim_free(a);
        tgc_optim_free(b);
    }
    remove(path);
    tgc_module_free(m);
}

/* ---- the names reports give the state a compiled step captures ---- */

static tgc_optim *g_named_opt;

static tgc_status named_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(tgc_module_get_child(self, "fc1"), "weight");
    tgc_tensor *loss = tgc_sum(tgc_mul(w, in[0]), NULL, 0, 0);
    tgc_status st = tgc_backward(loss);
    if (st == TGC_OK)
        st = tgc_optim_step(g_named_opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(g_named_opt);
    out[0] = tgc_detach(loss);
    return st;
}

static void explain_names_optimizer_state(void **state)
{
    (void)state;
    tgc_module *root = tgc_module_create("net", NULL), *fc1 = tgc_module_create("fc1", NULL);
    assert_int_equal(tgc_module_child(root, "fc1", fc1), TGC_OK);
    int64_t three = 3;
    assert_non_null(tgc_module_param(fc1, "weight", tgc_ones(&three, 1, TGC_F32, tgc_cpu())));
    g_named_opt = tgc_adam(root, &(tgc_adam_opts){.lr = 1e-2, .amsgrad = 1});
    assert_non_null(g_named_opt);
    tgc_config cfg = tgc_config_default();
    tgc_fn *f = tgc_compile(named_step, "named_step", &cfg);
    tgc_tensor *x = tgc_ones(&three, 1, TGC_F32, tgc_cpu()), *out[1] = {NULL};
    assert_int_equal(tgc_call(f, root, &x, 1, out, 1), TGC_OK);
    char *e = tgc_fn_explain(f);
    assert_non_null(e);
    const char *want[] = {" adam.step (f32[]): this object, alive",
                          " adam.lr (f32[]): this object, alive",
                          " adam.exp_avg[fc1.weight] (f32[3]): this object, alive",
                          " adam.exp_avg_sq[fc1.weight] (f32[3]): this object, alive",
                          " adam.max_exp_avg_sq[fc1.weight] (f32[3]): this object, alive"};
    for (int i = 0; i < N_OF(want); i++)
        if (!strstr(e, want[i]))
            fail_msg("tgc_fn_explain lacks \"%s\":\n%s", want[i], e);
    tgc_free(e);
    /* a recompile reason names it too: a new optimizer's state is not the captured one */
    tgc_optim_free(g_named_opt);
    g_named_opt = tgc_sgd(root, &(tgc_sgd_opts){.lr = 0.1, .momentum = 0.9});
    assert_non_null(g_named_opt);
    assert_int_equal(tgc_call(f, root, &x, 1, out, 1), TGC_OK);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.compiles, 2);
    if (!strstr(st.last_recompile_reason, "captured tensor ") ||
        !strstr(st.last_recompile_reason, " adam.") ||
        !strstr(st.last_recompile_reason, ") was freed"))
        fail_msg("recompile reason \"%s\" does not name the state", st.last_recompile_reason);
    tgc_fn_free(f);
    tgc_optim_free(g_named_opt);
    g_named_opt = NULL;
    tgc_module_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sgd_matches_pytorch_in_every_combination, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(adam_and_adamw_match_pytorch_in_every_combination,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(reduced_precision_parameters_step, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(every_gradient_path_gives_the_same_update, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(zero_grad_zeroes_and_creates_gradients, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(zero_fields_take_pytorch_defaults, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(state_is_named_ordered_and_zero, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(parameters_without_gradient_are_skipped, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(set_lr_changes_the_eager_update, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(invalid_options_fail_with_invalid_arg, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(creating_an_optimizer_while_tracing_fails, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(mismatched_gradients_fail_and_change_nothing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_to_keeps_state_with_parameters, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_freed_before_its_optimizer, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(flat_names_are_dotted_paths_below_the_module, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_without_parameters, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(explain_names_optimizer_state, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(checkpoint_with_invalid_lr_or_step_is_refused, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(compiled_steps_match_pytorch_and_compile_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(set_lr_changes_the_update_without_recompiling, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
