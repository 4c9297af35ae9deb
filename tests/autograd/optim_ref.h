/* Shared by test_optim.c and test_optim_cuda.c: the model, a reference written in plain C
 * double arithmetic of PyTorch's torch.optim formulas (single-tensor, foreach=False), and the
 * drivers that run both, eagerly or compiled, on optim_test_dev (tests only; one thread). */
#ifndef TGC_TESTS_AUTOGRAD_OPTIM_REF_H
#define TGC_TESTS_AUTOGRAD_OPTIM_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "frontend/module_impl.h"
#include "train/optim_impl.h"
#include "tgc/autograd.h"
#include "tgc/compile.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* The device the model, its gradients and the inputs live on (the host unless a test sets
 * it). */
static tgc_device optim_test_dev;
/* The config run_compiled compiles with (NULL: the defaults). */
static const tgc_config *optim_test_cfg;

/* ---- the model: net { w [3, 4], running (buffer [4]), fc { weight [2, 3], frozen [3] (no
 * grad), inner { bias [5] } } }: the optimizer updates w, fc.weight, fc.inner.bias ---- */

#define NP 3
static const int64_t shapes[NP][2] = {{3, 4}, {2, 3}, {5, 0}};
static const int ndims[NP] = {2, 2, 1};
static const char *const pnames[NP] = {"w", "fc.weight", "fc.inner.bias"};
static const int numels[NP] = {12, 6, 5};
#define MAXN 12

static inline tgc_tensor *host_tensor(const double *v, const int64_t *shape, int nd, tgc_dtype dt)
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

static inline double init_value(int i, int k)
{
    return 0.5 * cos(0.9 * k + i) + 0.1 * i;
}

static inline double grad_value(int i, int k, int step)
{
    return 0.3 * sin(1.7 * k + 0.6 * step + i) + 0.05 * (k % 3 - 1) + 0.02 * step;
}

static inline tgc_module *build(tgc_dtype dt, tgc_tensor **params)
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
    if (optim_test_dev.type != TGC_DEVICE_CPU)
        assert_int_equal(tgc_module_to(net, optim_test_dev), TGC_OK);
    return net;
}

static inline void read_f64(tgc_tensor *t, double *out, int n)
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

static inline void ref_sgd(const config *c, ref_param *r, const double *grad, int n)
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

static inline void ref_adam(const config *c, ref_param *r, const double *grad, int n)
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

static inline config sgd_cfg(double lr, double momentum, double dampening, double wd, int nesterov,
                             int maximize)
{
    config c = {K_SGD, lr, momentum, dampening, wd, 0, 0, 0, nesterov, maximize, 0};
    return c;
}

static inline config adam_cfg(kind k, double lr, double wd, double b1, double b2, double eps,
                              int amsgrad, int maximize)
{
    config c = {k, lr, 0, 0, wd, b1, b2, eps, 0, maximize, amsgrad};
    return c;
}

/* ---- driving both ---- */

static inline tgc_optim *make(tgc_module *m, const config *c)
{
    if (c->k == K_SGD) {
        tgc_sgd_opts o = {c->lr, c->momentum, c->dampening, c->wd, c->nesterov, c->maximize};
        return tgc_sgd(m, &o);
    }
    tgc_adam_opts o = {c->lr, c->b1, c->b2, c->eps, c->wd, c->amsgrad, c->maximize};
    return c->k == K_ADAM ? tgc_adam(m, &o) : tgc_adamw(m, &o);
}

/* The gradients of step s as tensors of the parameters' dtype. */
static inline void make_grads(tgc_dtype dt, int s, tgc_tensor **g)
{
    double v[MAXN];
    for (int i = 0; i < NP; i++) {
        for (int k = 0; k < numels[i]; k++)
            v[k] = grad_value(i, k, s);
        g[i] = tgc_to(host_tensor(v, shapes[i], ndims[i], dt), optim_test_dev);
        assert_non_null(g[i]);
    }
}

/* Hand-set gradients: each parameter's .grad (created as zeros first) gets g[i]. */
static inline void set_grads(tgc_tensor **params, tgc_tensor **g)
{
    for (int i = 0; i < NP; i++) {
        assert_int_equal(tgc_autograd_ensure_grad(params[i]), TGC_OK);
        assert_int_equal(tgc_copy_(tgc_grad(params[i]), g[i]), TGC_OK);
    }
}

/* The same gradients through backward: d/dp_i of sum_i sum(p_i * g_i) is g_i. */
static inline tgc_status backward_grads(tgc_tensor **params, tgc_tensor *const *g)
{
    tgc_tensor *loss = NULL;
    for (int i = 0; i < NP; i++) {
        tgc_tensor *term = tgc_sum(tgc_mul(params[i], g[i]), NULL, 0, 0);
        loss = loss ? tgc_add(loss, term) : term;
    }
    return loss ? tgc_backward(loss) : tgc_last_status();
}

static inline void ref_step(const config *c, ref_param *r, int s, const int *skip)
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

static inline void ref_init(ref_param *r)
{
    memset(r, 0, NP * sizeof *r);
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < numels[i]; k++)
            r[i].p[k] = init_value(i, k);
}

static inline void close_to(const double *got, const double *want, int n, tgc_dtype dt,
                            const char *what, const char *name)
{
    /* f32, f64: a few roundings of each per step; f16, bf16 (their inputs rounded too): a
     * sanity bound, not PyTorch's exact rounding */
    double rtol = dt == TGC_F64 ? 1e-12 : dt == TGC_F32 ? 2e-5 : dt == TGC_F16 ? 1e-2 : 4e-2;
    double atol = dt == TGC_F64 ? 1e-13 : dt == TGC_F32 ? 2e-6 : dt == TGC_F16 ? 2e-3 : 1e-2;
    for (int k = 0; k < n; k++)
        if (!(fabs(got[k] - want[k]) <= atol + rtol * fabs(want[k])))
            fail_msg("%s of %s [%d]: got %.17g, want %.17g (%s)", what, name, k, got[k], want[k],
                     tgc_dtype_name(dt));
}

/* Parameters and every state tensor against the reference. */
static inline void check_against(tgc_optim *o, tgc_tensor **params, const ref_param *r,
                                 tgc_dtype dt)
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
static inline double f32(double v)
{
    return (double)(float)v;
}

/* How run_eager hands the optimizer its gradients. */
typedef enum { VIA_GRAD, VIA_BACKWARD, VIA_STEP_GRADS } grad_path;

static inline void run_eager_via(config c, tgc_dtype dt, int steps, grad_path via)
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
        if (via == VIA_STEP_GRADS) {
            assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
        } else {
            if (via == VIA_GRAD) {
                set_grads(params, g);
            } else {
                assert_int_equal(tgc_optim_zero_grad(o), TGC_OK);
                assert_int_equal(backward_grads(params, g), TGC_OK);
            }
            assert_int_equal(tgc_optim_step(o), TGC_OK);
        }
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

static inline void run_eager(config c, tgc_dtype dt, int steps)
{
    run_eager_via(c, dt, steps, VIA_GRAD);
}

static const tgc_dtype dtypes[] = {TGC_F32, TGC_F64};

/* ---- compiled ---- */

static tgc_optim *g_opt; /* the optimizer the compiled step updates */

/* A whole training step: zero the gradients, backward of sum_i sum(p_i * in[i]) (so the
 * gradients are in[]), the update; out[0]: w after it. */
static inline tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)n_in;
    (void)n_out;
    int np;
    tgc_tensor *const *ps = tgc_optim_params(g_opt, &np);
    tgc_tensor *params[NP];
    memcpy(params, ps, sizeof params);
    tgc_status st = tgc_optim_zero_grad(g_opt);
    if (st == TGC_OK)
        st = backward_grads(params, in);
    if (st == TGC_OK)
        st = tgc_optim_step(g_opt);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_mul_scalar(tgc_module_get(self, "w"), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* Only the update: the gradients are set before each call (bound by position). */
static inline tgc_status update_step(tgc_module *self, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    tgc_status st = tgc_optim_step(g_opt);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_mul_scalar(tgc_module_get(self, "w"), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static inline void run_compiled(config c, tgc_dtype dt, int calls, int lr_change_at,
                                tgc_model_fn fn)
{
    tgc_scope_push();
    tgc_tensor *params[NP];
    tgc_module *m = build(dt, params);
    g_opt = make(m, &c);
    assert_non_null(g_opt);
    tgc_fn *f = tgc_compile(fn, "train_step", optim_test_cfg);
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
        if (fn == update_step)
            set_grads(params, g);
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
    double step;
    read_f64(tgc_optim_state(g_opt, 0, NULL), &step, 1);
    assert_true(step == calls);
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

#endif
