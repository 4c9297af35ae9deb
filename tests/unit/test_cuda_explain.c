/* tgc_fn_explain and tgc_fn_stats name the backend a function's variants run on: a function
 * compiled with backend AUTO and called on GPU tensors runs CUDA kernels, so both say "cuda"
 * (the config alone resolves to llvm or interp). Skipped without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
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

#include "gpu_test_util.h"
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

/* in: x [N, 16, 10, 10], w1, w2, w3 [16, 16, 3, 3], b1 [16]. y1 = relu(conv(x) + b1) is read
 * by conv2 and the residual add, the pool's result by conv3: both kept NHWC on the GPU; the
 * rest NCHW. */
static tgc_status conv_chain(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    const tgc_conv2d_opts pad1 = {.padding = {1, 1}};
    tgc_tensor *y1 = tgc_relu(tgc_conv2d(in[0], in[1], in[4], &pad1));
    tgc_tensor *y2 = tgc_relu(tgc_add(tgc_conv2d(y1, in[2], NULL, &pad1), y1));
    tgc_tensor *p = tgc_max_pool2d(y2, &(tgc_pool2d_opts){.kernel = {2, 2}});
    const int hw[2] = {2, 3};
    out[0] = tgc_mean(tgc_relu(tgc_conv2d(p, in[3], NULL, &pad1)), hw, 2, 0);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* The GPU variant keeps the activations between convs channels-last (the explain line says
 * how many, and which convs read them in place), and the result equals interp's on the CPU:
 * fp32 at HIGHEST, f16 operands, TF32 at HIGH. */
static void conv_chain_keeps_activations_channels_last(void **state)
{
    (void)state;
    GPU_REQUIRE();
    const struct {
        tgc_dtype dt;
        tgc_matmul_precision prec;
    } cases[] = {{TGC_F32, TGC_PRECISION_HIGHEST},
                 {TGC_F16, TGC_PRECISION_HIGHEST},
                 {TGC_F32, TGC_PRECISION_HIGH}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        tgc_scope_push();
        tgc_manual_seed(7);
        const int64_t sx[4] = {4, 16, 10, 10}, sw[4] = {16, 16, 3, 3}, sb[1] = {16};
        tgc_tensor *cpu[5], *gpu[5];
        for (int k = 0; k < 5; k++) {
            cpu[k] = tgc_randn(k == 0 ? sx : k == 4 ? sb : sw, k == 4 ? 1 : 4, TGC_F32, tgc_cpu());
            if (k > 0)
                cpu[k] = tgc_mul_scalar(cpu[k], 0.25);
            cpu[k] = tgc_cast(cpu[k], cases[c].dt);
            gpu[k] = tgc_to(cpu[k], tgc_cuda(0));
            assert_non_null(gpu[k]);
        }
        tgc_config cg = tgc_config_default(), cc = tgc_config_default();
        cg.matmul_precision = cases[c].prec;
        cc.backend = TGC_BACKEND_INTERP;
        tgc_fn *fg = tgc_compile(conv_chain, "conv_chain", &cg);
        tgc_fn *fc = tgc_compile(conv_chain, "conv_chain_cpu", &cc);
        tgc_tensor *got = NULL, *want = NULL;
        assert_int_equal(tgc_call(fg, NULL, gpu, 5, &got, 1), TGC_OK);
        assert_int_equal(tgc_call(fc, NULL, cpu, 5, &want, 1), TGC_OK);
        char *r = tgc_fn_explain(fg);
        assert_non_null(r);
        const char *line = strstr(r, "channels-last: ");
        if ((!line || strncmp(line,
                              "channels-last: 2 activations stored NHWC, 2 of 3 convs read "
                              "NHWC input in place",
                              73) != 0))
            fail_msg("case %d: explain says:\n%s", c, r);
        tgc_free(r);
        /* three products in a row: three times a product's row-norm tolerance (f16
         * operands: its own rounding of each layer's result, 2^-10 relative, five ops deep) */
        double rowtol = cases[c].dt == TGC_F16 ? 1e-2 : 3 * gpu_precision_tol(cases[c].prec);
        gpu_cmp cmp = gpu_compare(tgc_to(got, tgc_cpu()), want, rowtol, 1.0);
        if (!cmp.ok)
            fail_msg("case %d: %s", c, cmp.msg);
        tgc_fn_free(fg);
        tgc_fn_free(fc);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
}

static tgc_optim *g_opt; /* the training step's optimizer */

/* A training step of three 3x3 convs (16 channels) with ReLUs, a mean loss and SGD: in[0] x
 * [4, 16, 10, 10]; out[0] the loss. */
static tgc_status conv_train_step(tgc_module *self, tgc_tensor *const *in, int n_in,
                                  tgc_tensor **out, int n_out)
{
    (void)n_in, (void)n_out;
    const tgc_conv2d_opts pad1 = {.padding = {1, 1}};
    tgc_tensor *h = in[0];
    const char *const names[3] = {"w1", "w2", "w3"};
    for (int k = 0; k < 3; k++)
        h = tgc_relu(tgc_conv2d(h, tgc_module_get(self, names[k]), NULL, &pad1));
    tgc_tensor *loss = tgc_mean(tgc_mul(h, h), NULL, 0, 0);
    tgc_status st = loss ? tgc_backward(loss) : tgc_last_status();
    if (st == TGC_OK)
        st = tgc_optim_step(g_opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(g_opt);
    out[0] = tgc_detach(loss);
    return st;
}

/* With the conv gradients channels-last (TGC_CHANNELS_LAST_GRAD=1, set by main), a training
 * step keeps the activations the gradients read NHWC too, explain says how many gradients
 * read them, and the step gives interp's losses and weights. */
static void training_step_reads_channels_last_in_gradients(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    tgc_manual_seed(11);
    const int64_t sx[4] = {4, 16, 10, 10}, sw[4] = {16, 16, 3, 3};
    tgc_module *m[2];
    tgc_optim *opt[2];
    tgc_fn *fn[2];
    tgc_tensor *x[2];
    tgc_tensor *init[3];
    for (int k = 0; k < 3; k++)
        init[k] = tgc_mul_scalar(tgc_randn(sw, 4, TGC_F32, tgc_cpu()), 0.15);
    tgc_tensor *xc = tgc_randn(sx, 4, TGC_F32, tgc_cpu());
    for (int d = 0; d < 2; d++) { /* 0: cuda:0, 1: interp on the CPU */
        tgc_device dev = d ? tgc_cpu() : tgc_cuda(0);
        m[d] = tgc_module_create(d ? "cpu_net" : "gpu_net", NULL);
        assert_non_null(tgc_module_param(m[d], "w1", tgc_to(init[0], dev)));
        assert_non_null(tgc_module_param(m[d], "w2", tgc_to(init[1], dev)));
        assert_non_null(tgc_module_param(m[d], "w3", tgc_to(init[2], dev)));
        opt[d] = tgc_sgd(m[d], &(tgc_sgd_opts){.lr = 0.1});
        assert_non_null(opt[d]);
        tgc_config cfg = tgc_config_default();
        if (d)
            cfg.backend = TGC_BACKEND_INTERP;
        fn[d] = tgc_compile(conv_train_step, d ? "train_cpu" : "train_gpu", &cfg);
        assert_non_null(fn[d]);
        x[d] = tgc_to(xc, dev);
    }
    for (int step = 0; step < 3; step++) {
        double loss[2];
        for (int d = 0; d < 2; d++) {
            g_opt = opt[d];
            tgc_tensor *l = NULL;
            if (tgc_call(fn[d], m[d], &x[d], 1, &l, 1) != TGC_OK)
                fail_msg("step %d on %s: %s", step, d ? "interp" : "cuda", tgc_last_error());
            loss[d] = tgc_item_f64(l);
        }
        if (!(fabs(loss[0] - loss[1]) <= 1e-2 * fabs(loss[1]) + 1e-6))
            fail_msg("step %d: loss %.9g on cuda, %.9g on interp", step, loss[0], loss[1]);
    }
    gpu_cmp cmp =
        gpu_compare(tgc_to(tgc_module_get(m[0], "w1"), tgc_cpu()), tgc_module_get(m[1], "w1"),
                    3 * gpu_precision_tol(TGC_PRECISION_HIGH), 1.0);
    if (!cmp.ok)
        fail_msg("w1 after three steps: %s", cmp.msg);
    char *r = tgc_fn_explain(fn[0]);
    assert_non_null(r);
    /* x of conv2 and conv3 (read by the convs and their weight gradients) and the gradients
     * of the conv outputs (read by the input gradients as convolutions and by the weight
     * gradients) go NHWC; the weight gradients of conv2 and conv3 read both operands so */
    const char *line = strstr(r, "channels-last: ");
    if (!line || !strstr(line, "conv gradients read NHWC operands"))
        fail_msg("explain says:\n%s", r);
    tgc_free(r);
    for (int d = 0; d < 2; d++) {
        tgc_fn_free(fn[d]);
        tgc_optim_free(opt[d]);
        tgc_module_free(m[d]);
    }
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

int main(void)
{
    /* the channels-last layout on for this process whatever the caller's environment says
     * (the library reads it once), through the conv gradients too */
    setenv("TGC_CHANNELS_LAST", "1", 1);
    setenv("TGC_CHANNELS_LAST_GRAD", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_function_on_gpu_inputs_reports_backend_cuda),
        cmocka_unit_test(conv_chain_keeps_activations_channels_last),
        cmocka_unit_test(training_step_reads_channels_last_in_gradients),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
