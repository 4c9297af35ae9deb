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

#include <cmocka.h>

#include "unit/unit_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/optim_impl.h"
#include "tgc/autograd.h"
#include "tgc/compile.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* ---- the model: net { w [3, 4], running (buffer [4]), fc { weight [2, 3], frozen [3] (no
 * grad), inner { bias [5] } } }: the optimizer updates w, fc.weight, fc.inner.bias ---- */

#define NP 3
static const int64_t shapes[NP][2] = {{3, 4}, {2, 3}, {5, 0}};
static const int ndims[NP] = {2, 2, 1};
static const char *const pnames[NP] = {"w", "fc.weight", "fc.inner.bias"};
static const int numels[NP] = {12, 6, 5};
#define MAXN 12

static tgc_tensor *host_tensor(const double *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    size_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= (size_t)shape[d];
    tgc_tensor *t = tgc_from_data(v, n * sizeof(double), shape, nd, TGC_F64, tgc_cpu());
    assert_non_null(t);
    tgc_tensor *c = dt == TGC_F64 ? t : tgc_cast(t, dt);
    assert_non_null(c);
    return c;
}

static double init_value(int i, int k)
{
    return 0.5 * cos(0.9 * k + i) + 0.1 * i;
}

static double grad_value(int i, int k, int step)
{
    return 0.3 * sin(1.7 * k + 0.6 * step + i) + 0.05 * (k % 3 - 1) + 0.02 * step;
}

static tgc_module *build(tgc_dtype dt, tgc_tensor **params)
{
    tgc_module *net = tgc_module_create("net", NULL), *fc = tgc_module_create("fc", NULL),
               *inner = tgc_module_create("inner", NULL);
    assert_non_null(net);
    double v[MAXN];
    tgc_tensor *p[NP];
    tgc_module *owner[NP] = {net, fc, inner};
    const char *local[NP] = {"w", "weight", "bias"};
    for (int i = 0; i < NP; i++) {
        for (int k = 0; k < numels[i]; k++)
            v[k] = init_value(i, k);
        p[i] = tgc_module_param(owner[i], local[i], host_tensor(v, shapes[i], ndims[i], dt));
        assert_non_null(p[i]);
        if (params)
            params[i] = p[i];
        if (i == 0) {
            assert_non_null(
                tgc_module_buffer(net, "running", tgc_ones((int64_t[]){4}, 1, dt, tgc_cpu())));
        }
        if (i == 1) {
            tgc_tensor *fr =
                tgc_module_param(fc, "frozen", tgc_ones((int64_t[]){3}, 1, dt, tgc_cpu()));
            assert_non_null(fr);
            assert_int_equal(tgc_requires_grad(fr, 0), TGC_OK);
        }
    }
    assert_int_equal(tgc_module_child(fc, "inner", inner), TGC_OK);
    assert_int_equal(tgc_module_child(net, "fc", fc), TGC_OK);
    return net;
}

static void read_f64(tgc_tensor *t, double *out, int n)
{
    tgc_tensor *c = tgc_cast(t, TGC_F64);
    assert_non_null(c);
    assert_int_equal(tgc_copy_to_host(c, out, (size_t)n * sizeof(double)), TGC_OK);
}

/* ---- the reference: PyTorch's torch.optim single-tensor updates, in double ---- */

typedef enum { K_SGD, K_ADAM, K_ADAMW } kind;

typedef struct config {
    kind k;
    double lr, momentum, dampening, wd, b1, b2, eps; /* resolved: what PyTorch is given */
    int nesterov, maximize, amsgrad;
} config;

typedef struct ref_param {
    double p[MAXN], buf[MAXN], m[MAXN], v[MAXN], vmax[MAXN];
    int has_buf, steps;
} ref_param;

static void ref_sgd(const config *c, ref_param *r, const double *grad, int n)
{
    double g[MAXN];
    for (int k = 0; k < n; k++) {
        g[k] = c->maximize ? -grad[k] : grad[k];
        if (c->wd != 0)
            g[k] = g[k] + c->wd * r->p[k];
    }
    if (c->momentum != 0) {
        for (int k = 0; k < n; k++)
            r->buf[k] = r->has_buf ? r->buf[k] * c->momentum + (1 - c->dampening) * g[k] : g[k];
        r->has_buf = 1;
        for (int k = 0; k < n; k++)
            g[k] = c->nesterov ? g[k] + c->momentum * r->buf[k] : r->buf[k];
    }
    for (int k = 0; k < n; k++)
        r->p[k] = r->p[k] + -c->lr * g[k];
}

static void ref_adam(const config *c, ref_param *r, const double *grad, int n)
{
    int step = ++r->steps;
    double bc1 = 1 - pow(c->b1, step), bc2 = 1 - pow(c->b2, step);
    double step_size = c->lr / bc1, bc2_sqrt = sqrt(bc2);
    for (int k = 0; k < n; k++) {
        double g = c->maximize ? -grad[k] : grad[k];
        if (c->k == K_ADAMW)
            r->p[k] *= 1 - c->lr * c->wd;
        else if (c->wd != 0)
            g = g + c->wd * r->p[k];
        double w = 1 - c->b1;
        r->m[k] = fabs(w) < 0.5 ? r->m[k] + w * (g - r->m[k]) : g - (g - r->m[k]) * (1 - w);
        r->v[k] = r->v[k] * c->b2 + (1 - c->b2) * g * g;
        double vv = r->v[k];
        if (c->amsgrad)
            vv = r->vmax[k] = fmax(r->vmax[k], r->v[k]);
        double denom = sqrt(vv) / bc2_sqrt + c->eps;
        r->p[k] = r->p[k] + -step_size * r->m[k] / denom;
    }
}

static config sgd_cfg(double lr, double momentum, double dampening, double wd, int nesterov,
                      int maximize)
{
    config c = {K_SGD, lr, momentum, dampening, wd, 0, 0, 0, nesterov, maximize, 0};
    return c;
}

static config adam_cfg(kind k, double lr, double wd, double b1, double b2, double eps, int amsgrad,
                       int maximize)
{
    config c = {k, lr, 0, 0, wd, b1, b2, eps, 0, maximize, amsgrad};
    return c;
}

/* ---- driving both ---- */

static tgc_optim *make(tgc_module *m, const config *c)
{
    if (c->k == K_SGD) {
        tgc_sgd_opts o = {c->lr, c->momentum, c->dampening, c->wd, c->nesterov, c->maximize};
        return tgc_sgd(m, &o);
    }
    tgc_adam_opts o = {c->lr, c->b1, c->b2, c->eps, c->wd, c->amsgrad, c->maximize};
    if (c->k == K_ADAMW)
        o.weight_decay = c->wd == 0 ? -1 : c->wd; /* 0 would be AdamW's default 1e-2 */
    return c->k == K_ADAM ? tgc_adam(m, &o) : tgc_adamw(m, &o);
}

/* The gradients of step s as tensors of the parameters' dtype. */
static void make_grads(tgc_dtype dt, int s, tgc_tensor **g)
{
    double v[MAXN];
    for (int i = 0; i < NP; i++) {
        for (int k = 0; k < numels[i]; k++)
            v[k] = grad_value(i, k, s);
        g[i] = host_tensor(v, shapes[i], ndims[i], dt);
    }
}

static void ref_step(const config *c, ref_param *r, int s, const int *skip)
{
    double g[MAXN];
    for (int i = 0; i < NP; i++) {
        if (skip && skip[i])
            continue;
        for (int k = 0; k < numels[i]; k++)
            g[k] = grad_value(i, k, s);
        (c->k == K_SGD ? ref_sgd : ref_adam)(c, &r[i], g, numels[i]);
    }
}

static void ref_init(ref_param *r)
{
    memset(r, 0, NP * sizeof *r);
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numels[i]; k++)
            r[i].p[k] = init_value(i, k);
}

static void close_to(const double *got, const double *want, int n, tgc_dtype dt, const char *what,
                     const char *name)
{
    double rtol = dt == TGC_F64 ? 1e-12 : 2e-5, atol = dt == TGC_F64 ? 1e-13 : 2e-6;
    for (int k = 0; k < n; k++)
        if (!(fabs(got[k] - want[k]) <= atol + rtol * fabs(want[k])))
            fail_msg("%s of %s [%d]: got %.17g, want %.17g (%s)", what, name, k, got[k], want[k],
                     tgc_dtype_name(dt));
}

/* Parameters and every state tensor against the reference. */
static void check_against(tgc_optim *o, tgc_tensor **params, const ref_param *r, tgc_dtype dt)
{
    double got[MAXN];
    for (int i = 0; i < NP; i++) {
        read_f64(params[i], got, numels[i]);
        close_to(got, r[i].p, numels[i], dt, "value", pnames[i]);
    }
    int ns = tgc_optim_num_state(o);
    for (int s = 2; s < ns; s++) {
        const char *name;
        tgc_tensor *t = tgc_optim_state(o, s, &name);
        assert_non_null(t);
        int i = 0;
        while (i < NP && strncmp(name, pnames[i], strlen(pnames[i])) != 0)
            i++;
        /* the longest matching parameter name: "fc.weight" before "w"? names differ at
         * their first character here, so the first match is the one */
        assert_true(i < NP);
        const char *field = name + strlen(pnames[i]) + 1;
        const double *want = strcmp(field, "momentum_buffer") == 0 ? r[i].buf
                             : strcmp(field, "exp_avg") == 0       ? r[i].m
                             : strcmp(field, "exp_avg_sq") == 0    ? r[i].v
                                                                   : r[i].vmax;
        read_f64(t, got, numels[i]);
        close_to(got, want, numels[i], dt, field, pnames[i]);
    }
}

/* lr as the f32 "lr" tensor holds it: the reference uses the same value. */
static double f32(double v)
{
    return (double)(float)v;
}

static void run_eager(config c, tgc_dtype dt, int steps)
{
    tgc_scope_push();
    tgc_tensor *params[NP];
    tgc_module *m = build(dt, params);
    tgc_optim *o = make(m, &c);
    if (!o)
        fail_msg("create failed: %s", tgc_last_error());
    c.lr = f32(c.lr);
    ref_param r[NP];
    ref_init(r);
    for (int s = 0; s < steps; s++) {
        tgc_scope_push();
        tgc_tensor *g[NP];
        make_grads(dt, s, g);
        assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
        ref_step(&c, r, s, NULL);
    }
    check_against(o, params, r, dt);
    double step;
    read_f64(tgc_optim_state(o, 0, NULL), &step, 1);
    assert_true(step == steps);
    tgc_optim_free(o);
    tgc_module_free(m);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

static const tgc_dtype dtypes[] = {TGC_F32, TGC_F64};

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

/* Defaults: AdamW's weight decay 0 means 1e-2, betas and eps 0 mean PyTorch's. */
static void zero_fields_take_pytorch_defaults(void **state)
{
    (void)state;
    tgc_tensor *params[NP];
    tgc_module *m = build(TGC_F32, params);
    tgc_adam_opts ao = {.lr = 1e-3};
    tgc_optim *o = tgc_adamw(m, &ao);
    assert_non_null(o);
    char buf[256];
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
            g[1] = NULL;
            assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
            ref_step(&c, r, s, skip);
        }
        check_against(o, params, r, TGC_F64);
        tgc_optim_free(o);
        tgc_module_free(m);
    }
}

/* ---- compiled ---- */

static tgc_optim *g_opt; /* the optimizer the compiled step updates */

/* in[]: the gradients (one per parameter); out[0]: the first parameter after the update */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_status st = tgc_optim_step_grads(g_opt, in);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_mul_scalar(tgc_module_get(self, "w"), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void run_compiled(config c, tgc_dtype dt, int calls, int lr_change_at)
{
    tgc_scope_push();
    tgc_tensor *params[NP];
    tgc_module *m = build(dt, params);
    g_opt = make(m, &c);
    assert_non_null(g_opt);
    tgc_fn *f = tgc_compile(train_step, "train_step", NULL);
    assert_non_null(f);
    c.lr = f32(c.lr);
    ref_param r[NP];
    ref_init(r);
    for (int s = 0; s < calls; s++) {
        if (s == lr_change_at) {
            assert_int_equal(tgc_optim_set_lr(g_opt, c.lr * 0.25), TGC_OK);
            c.lr = f32(c.lr * 0.25);
            assert_true(tgc_optim_lr(g_opt) == c.lr);
        }
        tgc_scope_push();
        tgc_tensor *g[NP], *out = NULL;
        make_grads(dt, s, g);
        tgc_status st = tgc_call(f, m, g, NP, &out, 1);
        if (st != TGC_OK)
            fail_msg("call %d: %s", s, tgc_last_error());
        ref_step(&c, r, s, NULL);
        double got[MAXN];
        read_f64(out, got, numels[0]);
        close_to(got, r[0].p, numels[0], dt, "output", "w");
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    check_against(g_opt, params, r, dt);
    tgc_stats stats;
    assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
    if (stats.compiles != 1 || stats.eager_fallbacks != 0)
        fail_msg("compiles %llu, eager fallbacks %llu (want 1 and 0): %s",
                 (unsigned long long)stats.compiles, (unsigned long long)stats.eager_fallbacks,
                 stats.last_recompile_reason);
    assert_int_equal(stats.calls, calls);
    tgc_fn_free(f);
    tgc_optim_free(g_opt);
    tgc_module_free(m);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

static void compiled_steps_match_pytorch_and_compile_once(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        run_compiled(sgd_cfg(0.05, 0.9, 0.3, 0.1, 0, 0), dtypes[d], 20, -1);
        run_compiled(sgd_cfg(0.05, 0.9, 0, 0.1, 1, 1), dtypes[d], 20, -1);
        run_compiled(adam_cfg(K_ADAM, 0.01, 0.05, 0.9, 0.999, 1e-8, 1, 0), dtypes[d], 20, -1);
        run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.8, 0.99, 1e-8, 0, 1), dtypes[d], 20, -1);
    }
}

static void set_lr_changes_the_update_without_recompiling(void **state)
{
    (void)state;
    run_compiled(sgd_cfg(0.05, 0.9, 0, 0, 0, 0), TGC_F32, 20, 7);
    run_compiled(adam_cfg(K_ADAMW, 0.01, 0.05, 0.9, 0.999, 1e-8, 0, 0), TGC_F64, 20, 11);
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
        assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
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
    /* Adam's L2 decay must be >= 0; AdamW's negative one means none */
    a.weight_decay = -0.1;
    assert_null(tgc_adam(m, &a));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "weight_decay is -0.1");
    tgc_optim *o = tgc_adamw(m, &a);
    assert_non_null(o);
    char buf[200];
    tgc_optim_hparams(o, buf, sizeof buf);
    assert_non_null(strstr(buf, "\"weight_decay\":0,"));
    tgc_optim_free(o);

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
        assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sgd_matches_pytorch_in_every_combination, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(adam_and_adamw_match_pytorch_in_every_combination,
                                        scoped_setup, scoped_teardown),
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
        cmocka_unit_test_setup_teardown(mismatched_gradients_fail_and_change_nothing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_to_keeps_state_with_parameters, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_freed_before_its_optimizer, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(module_without_parameters, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(compiled_steps_match_pytorch_and_compile_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(set_lr_changes_the_update_without_recompiling, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
