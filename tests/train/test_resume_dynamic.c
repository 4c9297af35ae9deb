/* Resuming a compiled training run with cfg.dynamic = AUTO: the batch dim becomes dynamic
 * when a smaller batch comes, and from then on the dynamic variant serves every batch. A run
 * resumed from a checkpoint (module, optimizer and tgc_fn_save_state) continues on that
 * variant and equals the uninterrupted run bit for bit; without the function's state it
 * would start on a static variant. Also the state file's errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tgc/tgc.h"

enum { F = 8, HW = 6, B = 32, B_SMALL = 20, STEPS = 12, SAVE_AT = 6 };

static tgc_optim *opt;

static int64_t batch_of(int s)
{
    return s == 3 || s == 10 ? B_SMALL : B; /* the dim changes at step 3 */
}

static tgc_tensor *batch(int s)
{
    int64_t shape[4] = {batch_of(s), F, HW, HW}, n = shape[0] * F * HW * HW;
    static float v[B * F * HW * HW];
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)sin(0.37 * (double)(i + 1) + 1.3 * s);
    return tgc_from_data(v, (size_t)n * sizeof(float), shape, 4, TGC_F32, tgc_cpu());
}

static tgc_module *model(float seed)
{
    tgc_module *m = tgc_module_create("m", NULL);
    int64_t n = F;
    float w[F];
    for (int i = 0; i < F; i++)
        w[i] = 0.1f * seed * (float)cos(i + 0.5);
    tgc_scope_push();
    assert_non_null(
        tgc_module_param(m, "w", tgc_from_data(w, sizeof w, &n, 1, TGC_F32, tgc_cpu())));
    int64_t cshape[4] = {F, F, 3, 3};
    float cw[F * F * 9];
    for (int i = 0; i < F * F * 9; i++)
        cw[i] = 0.2f * (float)sin(1.7 * i + seed);
    assert_non_null(
        tgc_module_param(m, "conv", tgc_from_data(cw, sizeof cw, cshape, 4, TGC_F32, tgc_cpu())));
    int64_t fshape[2] = {4, F * HW * HW};
    float fw[4 * F * HW * HW];
    for (int i = 0; i < 4 * F * HW * HW; i++)
        fw[i] = 0.05f * (float)cos(0.9 * i - seed);
    assert_non_null(
        tgc_module_param(m, "fc", tgc_from_data(fw, sizeof fw, fshape, 2, TGC_F32, tgc_cpu())));
    assert_non_null(tgc_module_buffer(m, "running_mean", tgc_zeros(&n, 1, TGC_F32, tgc_cpu())));
    assert_non_null(tgc_module_buffer(m, "running_var", tgc_ones(&n, 1, TGC_F32, tgc_cpu())));
    tgc_scope_pop();
    return m;
}

/* A batch-norm layer in training (batch statistics, running statistics updated in place:
 * here the static and the dynamic variant round differently), then
 * loss = mean over the batch of sum_j tanh(bn(x) w)^2; SGD with momentum. */
static tgc_status step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                       int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *c = tgc_conv2d(in[0], tgc_module_get(self, "conv"), NULL,
                               &(tgc_conv2d_opts){.padding = {1, 1}});
    tgc_tensor *h = tgc_batch_norm(c, tgc_module_get(self, "running_mean"),
                                   tgc_module_get(self, "running_var"), NULL, NULL, 1, 0.1, 1e-5);
    int64_t wshape[3] = {F, 1, 1};
    tgc_tensor *t = tgc_tanh(tgc_mul(h, tgc_reshape(tgc_module_get(self, "w"), wshape, 3)));
    int64_t flat[2] = {0, F * HW * HW};
    tgc_tensor *y = tgc_linear(tgc_reshape(t, flat, 2), tgc_module_get(self, "fc"), NULL);
    int dim1 = 1, dim0 = 0;
    tgc_tensor *loss = tgc_mean(tgc_sum(tgc_mul(y, y), &dim1, 1, 0), &dim0, 1, 0);
    tgc_status st = tgc_backward(loss);
    if (st == TGC_OK)
        st = tgc_optim_step(opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(opt);
    out[0] = tgc_detach(loss);
    return st == TGC_OK && !out[0] ? tgc_last_status() : st;
}

static void run(tgc_fn *f, tgc_module *m, int from, int to, float *losses)
{
    for (int s = from; s < to; s++) {
        tgc_scope_push();
        tgc_tensor *x = batch(s), *out[1] = {NULL};
        assert_int_equal(tgc_call(f, m, &x, 1, out, 1), TGC_OK);
        assert_int_equal(tgc_copy_to_host(out[0], &losses[s], sizeof(float)), TGC_OK);
        tgc_scope_pop();
    }
}

/* w, running_mean, running_var */
static void read_w(tgc_module *m, float *w)
{
    const char *names[] = {"w", "running_mean", "running_var"};
    for (int k = 0; k < 3; k++)
        assert_int_equal(
            tgc_copy_to_host(tgc_module_get(m, names[k]), w + k * F, F * sizeof(float)), TGC_OK);
}

static int explain_has(const tgc_fn *f, const char *text)
{
    char *e = tgc_fn_explain(f);
    assert_non_null(e);
    int has = strstr(e, text) != NULL;
    tgc_free(e);
    return has;
}

typedef struct paths {
    char module[96], optim[96], fn[96];
} paths;

static paths make_paths(void)
{
    paths p;
    snprintf(p.module, sizeof p.module, "/tmp/tgc_resume_dyn_%d.safetensors", (int)getpid());
    snprintf(p.optim, sizeof p.optim, "/tmp/tgc_resume_dyn_%d.optim.safetensors", (int)getpid());
    snprintf(p.fn, sizeof p.fn, "/tmp/tgc_resume_dyn_%d.fn.safetensors", (int)getpid());
    return p;
}

/* The resumed run: a fresh module, optimizer and function; the checkpoint loaded; the
 * function's state too when with_state. */
static tgc_fn *resume(const paths *p, int with_state, tgc_module **m, float *losses)
{
    *m = model(-2.0f);
    opt = tgc_sgd(*m, &(tgc_sgd_opts){.lr = 0.2, .momentum = 0.9});
    assert_non_null(opt);
    assert_int_equal(tgc_module_load(*m, p->module, 1), TGC_OK);
    assert_int_equal(tgc_optim_load(opt, p->optim), TGC_OK);
    tgc_config cfg = tgc_config_default();
    tgc_fn *f = tgc_compile(step, "step", &cfg);
    if (with_state)
        assert_int_equal(tgc_fn_load_state(f, p->fn), TGC_OK);
    run(f, *m, SAVE_AT, STEPS, losses);
    return f;
}

static void test_resumed_run_equals_uninterrupted_run(void **state)
{
    (void)state;
    paths p = make_paths();
    float la[STEPS], lb[STEPS], lc[STEPS], wa[3 * F], wb[3 * F], wc[3 * F];

    tgc_module *a = model(1.0f);
    opt = tgc_sgd(a, &(tgc_sgd_opts){.lr = 0.2, .momentum = 0.9});
    assert_non_null(opt);
    tgc_config cfg = tgc_config_default();
    tgc_fn *fa = tgc_compile(step, "step", &cfg);
    run(fa, a, 0, SAVE_AT, la);
    assert_true(explain_has(fa, "input 0: f32 [s0, 8, 6, 6]")); /* the batch dim went dynamic */
    assert_int_equal(tgc_module_save(a, p.module), TGC_OK);
    assert_int_equal(tgc_optim_save(opt, p.optim), TGC_OK);
    assert_int_equal(tgc_fn_save_state(fa, p.fn), TGC_OK);
    run(fa, a, SAVE_AT, STEPS, la);
    read_w(a, wa);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(fa, &st), TGC_OK);
    assert_int_equal(st.compiles, 2); /* static for 8, then dynamic */
    tgc_optim_free(opt);

    tgc_module *b;
    tgc_fn *fb = resume(&p, 1, &b, lb);
    read_w(b, wb);
    assert_int_equal(tgc_fn_stats(fb, &st), TGC_OK);
    assert_int_equal(st.compiles, 1); /* dynamic from its first call */
    assert_true(explain_has(fb, "input 0: f32 [s0, 8, 6, 6]"));
    assert_memory_equal(&lb[SAVE_AT], &la[SAVE_AT], (STEPS - SAVE_AT) * sizeof(float));
    assert_memory_equal(wb, wa, sizeof wa);
    tgc_optim_free(opt);

    /* without the function's state the resumed run starts on a static variant */
    tgc_module *c;
    tgc_fn *fc = resume(&p, 0, &c, lc);
    read_w(c, wc);
    assert_true(explain_has(fc, "input 0: f32 [32, 8, 6, 6]"));
    print_message("without the function's state: %s\n",
                  memcmp(&lc[SAVE_AT], &la[SAVE_AT], (STEPS - SAVE_AT) * sizeof(float)) ||
                          memcmp(wc, wa, sizeof wa)
                      ? "the resumed run differs from the uninterrupted one"
                      : "the same bits on this machine");
    tgc_optim_free(opt);
    opt = NULL;

    tgc_fn_free(fa);
    tgc_fn_free(fb);
    tgc_fn_free(fc);
    tgc_module_free(a);
    tgc_module_free(b);
    tgc_module_free(c);
    remove(p.module);
    remove(p.optim);
    remove(p.fn);
}

static void test_state_errors(void **state)
{
    (void)state;
    paths p = make_paths();
    tgc_module *m = model(1.0f);
    opt = tgc_sgd(m, &(tgc_sgd_opts){.lr = 0.2});
    assert_non_null(opt);
    tgc_config cfg = tgc_config_default();
    tgc_fn *f = tgc_compile(step, "step", &cfg), *g = tgc_compile(step, "other", &cfg);

    assert_int_equal(tgc_fn_save_state(NULL, p.fn), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_fn_save_state: function is NULL");
    assert_int_equal(tgc_fn_load_state(f, NULL), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_fn_load_state: path is NULL");

    /* a function that never ran saves an empty state, which loads */
    assert_int_equal(tgc_fn_save_state(f, p.fn), TGC_OK);
    assert_int_equal(tgc_fn_load_state(f, p.fn), TGC_OK);

    /* another function's state */
    assert_int_equal(tgc_fn_load_state(g, p.fn), TGC_ERR_INVALID_ARG);
    char want[512];
    snprintf(want, sizeof want,
             "tgc_fn_load_state: %s holds the state of function 'step', not "
             "of 'other'",
             p.fn);
    assert_string_equal(tgc_last_error(), want);

    /* a function that compiled already */
    float loss[1];
    run(f, m, 0, 1, loss);
    assert_int_equal(tgc_fn_load_state(f, p.fn), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_fn_load_state: 'step' has compiled 1 variant "
                                          "already; load its state before its first tgc_call");

    /* a file that is not a function's state, and a missing one */
    assert_int_equal(tgc_module_save(m, p.module), TGC_OK);
    assert_int_equal(tgc_fn_load_state(g, p.module), TGC_ERR_IO);
    assert_non_null(strstr(tgc_last_error(), "tgc_fn_load_state: "));
    assert_non_null(strstr(tgc_last_error(), "is not a function state file"));
    remove(p.fn);
    assert_int_equal(tgc_fn_load_state(g, p.fn), TGC_ERR_IO);
    assert_non_null(strstr(tgc_last_error(), "tgc_fn_load_state: "));

    tgc_fn_free(f);
    tgc_fn_free(g);
    tgc_optim_free(opt);
    opt = NULL;
    tgc_module_free(m);
    remove(p.module);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resumed_run_equals_uninterrupted_run),
        cmocka_unit_test(test_state_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
