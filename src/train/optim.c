/* Optimizers: PyTorch's SGD, Adam and AdamW (torch.optim with foreach=False: the
 * single-tensor formulas, with their operation order), written as tgc ops so that the same
 * code runs eagerly and is traced into a compiled training step.
 *
 * Per parameter p with gradient g (maximize: g = -g first), in p's dtype:
 *   SGD:   g = g + wd*p (wd != 0);
 *          momentum != 0: buf = momentum*buf + c*g, c = 1 on the first step (PyTorch's
 *          buf = clone(g): buf starts as zeros), (1 - dampening) after;
 *          g = nesterov ? g + momentum*buf : buf;
 *          p = p + (-lr)*g.
 *   Adam:  g = g + wd*p (wd != 0);  AdamW: p = p*(1 - lr*wd) instead;
 *          m = lerp(m, g, 1 - beta1)  (m + w*(g - m) for w < 0.5, else g - (g - m)*(1 - w));
 *          v = v*beta2 + ((1 - beta2)*g)*g;
 *          amsgrad: vmax = max(vmax, v), used for v below;
 *          p = p + ((-lr/bc1)*m) / (sqrt(v)/sqrt(bc2) + eps),
 *          bc1 = 1 - beta1^step, bc2 = 1 - beta2^step.
 * The step count and lr live in f32 0-d tensors ("step", "lr"); everything computed from
 * them (bias corrections, -lr/bc1, 1 - lr*wd, SGD's c) is computed once per step and dtype in
 * f64 from them, as PyTorch computes them in Python doubles, then cast to the parameter's
 * dtype, as PyTorch's kernels take scalars: no value is read on the host, so a compiled step
 * never specializes on the step or the lr. beta^step is exp(step*log(beta)).
 *
 * Every write (parameters, state, the step) is tgc_copy_, which inside a trace records an
 * in-place assignment; each parameter's update is one chain of pointwise ops of its shape (the
 * fuser makes it one kernel) reading the 0-d scalars. Recording is paused throughout.
 *
 * Where this differs from PyTorch, by design:
 *  - one step count for all parameters: PyTorch creates a parameter's state at its first
 *    gradient and counts its steps from there, so a parameter whose first gradient comes
 *    after others were updated gets smaller bias corrections there (and SGD's buf = g at that
 *    later step); here the optimizer's count. The same whenever every parameter has a
 *    gradient from the first step on (tgc_zero_grad and tgc_optim_zero_grad create them all).
 *  - lr is held in f32 (the "lr" tensor): f64 parameters are updated with (double)(float)lr,
 *    PyTorch uses the double (a relative difference of at most 6e-8 in the lr).
 *  - f16 / bf16 parameters: each op rounds to the parameter's dtype, PyTorch's fused CPU
 *    kernels round some chains once. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "frontend/module_impl.h"
#include "train/optim_impl.h"
#include "frontend/watch.h"
#include "runtime/alloc.h"
#include "support/error.h"
#include "support/struct_size.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/ops.h"

typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optim_kind;
static const char *const kind_name[] = {"sgd", "adam", "adamw"};
static const char *const kind_fn[] = {"tgc_sgd", "tgc_adam", "tgc_adamw"};

enum { STATE_STEP, STATE_LR, STATE_FIRST_PARAM }; /* then per_param tensors per parameter */

typedef struct optim_state {
    char *name;
    tgc_tensor *t; /* owned */
    int param;     /* index into params; -1 for "step" and "lr" */
} optim_state;

struct tgc_optim {
    tgc_watch watch; /* on module's list (frontend/watch.h): module_gone, moving_state */
    optim_kind kind;
    tgc_module *module; /* NULL once freed */
    double momentum, dampening, weight_decay, beta1, beta2, eps;
    int nesterov, maximize, amsgrad;
    tgc_tensor **params; /* references held */
    char **pnames;       /* dotted names, for messages */
    int n_params;
    int per_param; /* SGD: 1 with momentum, else 0; Adam: 2, 3 with amsgrad */
    optim_state *state;
    int n_state;
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* A tensor the optimizer owns from now on (out of every scope), or NULL. */
static tgc_tensor *own(tgc_tensor *t)
{
    if (t)
        tgc_scope_release(t);
    return t;
}

static void drop_params(tgc_optim *o)
{
    for (int i = 0; i < o->n_params; i++) {
        tgc_tensor_unref(o->params[i]);
        free(o->pnames[i]);
    }
    free(o->params);
    free(o->pnames);
    o->params = NULL;
    o->pnames = NULL;
    o->n_params = 0;
}

void tgc_optim_free(tgc_optim *o)
{
    if (!o)
        return;
    if (o->module)
        tgc_module_unwatch(o->module, &o->watch);
    drop_params(o);
    for (int i = 0; i < o->n_state; i++) {
        free(o->state[i].name);
        if (o->state[i].t) {
            o->state[i].t->flags |= TGC_T_DEAD;
            tgc_tensor_unref(o->state[i].t);
        }
    }
    free(o->state);
    free(o);
}

/* tgc_module_free of the module's tree: the optimizer drops its parameters; later
 * tgc_optim_step / _zero_grad / _set_lr fail with TGC_ERR_INVALID_ARG, its state stays
 * readable, and tgc_optim_free frees it. */
static void module_gone(tgc_watch *w)
{
    tgc_optim *o = (tgc_optim *)(void *)w; /* the first member */
    o->module = NULL;
    drop_params(o);
}

/* What moves with root's subtree (tgc_module_to): each parameter's state when the parameter
 * is in the subtree, and the shared tensors ("step", "lr") when all the parameters end up on
 * dev (or, with no parameters, when the optimizer's module is in the subtree). */
static int moving_state(tgc_watch *w, const tgc_module *root, tgc_device dev,
                        int (*add)(void *ctx, tgc_tensor *t), void *ctx)
{
    const tgc_optim *o = (const tgc_optim *)(void *)w;
    int all = 1;
    for (int i = 0; i < o->n_params; i++)
        if (!tgc_module_in_subtree(o->params[i]->module, root) &&
            !tgc_device_equal(o->params[i]->device, dev))
            all = 0;
    if (o->n_params == 0)
        all = tgc_module_in_subtree(o->module, root);
    for (int i = 0; i < o->n_state; i++) {
        const tgc_tensor *owner = tgc_optim_state_param(o, i);
        if (owner ? tgc_module_in_subtree(owner->module, root) : all)
            if (!add(ctx, o->state[i].t))
                return 0;
    }
    return 1;
}

/* 1 when lr is a learning rate the "lr" tensor can hold: > 0 and finite in f32. */
static int lr_ok(double lr)
{
    return lr > 0 && isfinite(lr) && (float)lr > 0 && isfinite((float)lr);
}

/* Collects the parameters of m's tree that require a gradient, with their names; all on one
 * device (*dev; the host when there are none). */
static tgc_status collect_params(tgc_optim *o, tgc_module *m, tgc_device *dev, const char *fn)
{
    int n;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    if (!flat && tgc_module_num_tensors(m) > 0)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    o->params = calloc((size_t)n + 1, sizeof *o->params);
    o->pnames = calloc((size_t)n + 1, sizeof *o->pnames);
    if (!o->params || !o->pnames)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    *dev = tgc_cpu();
    for (int i = 0; i < n; i++) {
        int is_buffer = 0;
        char name[1024];
        tgc_module_flat_name(m, i, name, sizeof name, &is_buffer);
        if (is_buffer || !(flat[i]->flags & TGC_T_REQUIRES_GRAD))
            continue;
        if (o->n_params == 0)
            *dev = flat[i]->device;
        else if (!tgc_device_equal(*dev, flat[i]->device))
            return tgc_set_error(TGC_ERR_DEVICE,
                                 "%s: parameter '%s' is on %s:%d but '%s' is on %s:%d; an "
                                 "optimizer updates parameters of one device (move the module "
                                 "with tgc_module_to first)",
                                 fn, name, flat[i]->device.type == TGC_DEVICE_CPU ? "cpu" : "cuda",
                                 flat[i]->device.index, o->pnames[0],
                                 dev->type == TGC_DEVICE_CPU ? "cpu" : "cuda", dev->index);
        if (!(o->pnames[o->n_params] = dup_str(name)))
            return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
        tgc_tensor_ref(flat[i]);
        o->params[o->n_params++] = flat[i];
    }
    return TGC_OK;
}

/* "step", "lr", then each parameter's state tensors (zeros like it). */
static tgc_status make_state(tgc_optim *o, double lr, tgc_device dev, const char *fn)
{
    static const char *const sgd_names[] = {"momentum_buffer"};
    static const char *const adam_names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    const char *const *names = o->kind == OPTIM_SGD ? sgd_names : adam_names;
    int n = STATE_FIRST_PARAM + o->n_params * o->per_param;
    o->state = calloc((size_t)n, sizeof *o->state);
    if (!o->state)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    o->state[STATE_STEP] = (optim_state){dup_str("step"), NULL, -1};
    o->state[STATE_LR] = (optim_state){dup_str("lr"), NULL, -1};
    o->n_state = STATE_FIRST_PARAM;
    if (!o->state[STATE_STEP].name || !o->state[STATE_LR].name)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    if (!(o->state[STATE_STEP].t = own(tgc_zeros(NULL, 0, TGC_F32, dev))) ||
        !(o->state[STATE_LR].t = own(tgc_full(NULL, 0, lr, TGC_F32, dev))))
        return tgc_last_status();
    /* the names reports give the state a compiled step captures: "adam.step",
     * "adam.exp_avg[fc1.weight]" */
    char label[1100];
    for (int k = STATE_STEP; k <= STATE_LR; k++) {
        snprintf(label, sizeof label, "%s.%s", kind_name[o->kind], o->state[k].name);
        tgc_tensor_set_debug_name(o->state[k].t, label);
    }
    for (int i = 0; i < o->n_params; i++)
        for (int k = 0; k < o->per_param; k++) {
            const tgc_tensor *p = o->params[i];
            optim_state *s = &o->state[o->n_state++];
            size_t len = strlen(o->pnames[i]) + strlen(names[k]) + 2;
            s->param = i;
            if (!(s->name = malloc(len)))
                return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
            snprintf(s->name, len, "%s.%s", o->pnames[i], names[k]);
            if (!(s->t = own(tgc_zeros(p->shape, p->ndim, p->dtype, p->device))))
                return tgc_last_status();
            snprintf(label, sizeof label, "%s.%s[%s]", kind_name[o->kind], names[k], o->pnames[i]);
            tgc_tensor_set_debug_name(s->t, label);
        }
    return TGC_OK;
}

static tgc_optim *optim_create(tgc_module *m, optim_kind kind, double lr, tgc_optim *cfg)
{
    const char *fn = kind_fn[kind];
    tgc_device dev;
    tgc_optim *o = calloc(1, sizeof *o);
    if (!o) {
        tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    *o = *cfg;
    o->watch = (tgc_watch){.gone = module_gone, .moving = moving_state};
    o->kind = kind;
    o->per_param = kind == OPTIM_SGD ? (o->momentum != 0) : 2 + (o->amsgrad != 0);
    tgc_scope_push();
    tgc_status st = collect_params(o, m, &dev, fn);
    if (st == TGC_OK)
        st = make_state(o, lr, dev, fn);
    if (st == TGC_OK)
        st = tgc_module_watch(m, &o->watch);
    tgc_scope_pop();
    if (st != TGC_OK) {
        tgc_optim_free(o); /* not attached: module is still NULL */
        return NULL;
    }
    o->module = m;
    return o;
}

/* The checks every constructor makes first: NULL arguments, a trace, lr. */
static int create_ok(const tgc_module *m, const void *opts, double lr, const char *fn)
{
    if (!m || !opts) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, m ? "opts" : "module");
        return 0;
    }
    if (tgc_trace_current()) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: called while tracing; create the optimizer outside the compiled "
                      "function (its state must exist before the first call binds it)",
                      fn);
        return 0;
    }
    if (!lr_ok(lr)) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: lr is %g; it must be > 0 and finite (and representable in f32)", fn, lr);
        return 0;
    }
    return 1;
}

/* Resolves one floating option: TGC_OPTIM_DEFAULT takes dflt, and so does 0 where zero_is_default
 * (the fields that are never 0); the result must be finite and in [lo, hi] (hi_open: < hi;
 * lo_open: > lo). 0 with the error set, naming fn and the field, otherwise. */
static int option(const char *fn, const char *field, double v, double dflt, int zero_is_default,
                  double lo, int lo_open, double hi, int hi_open, double *out)
{
    if (v == TGC_OPTIM_DEFAULT || (zero_is_default && v == 0))
        v = dflt;
    int ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!ok) {
        char range[96];
        if (isinf(hi))
            snprintf(range, sizeof range, "%s %g", lo_open ? ">" : ">=", lo);
        else
            snprintf(range, sizeof range, "in %c%g, %g%c", lo_open ? '(' : '[', lo, hi,
                     hi_open ? ')' : ']');
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: %s is %g; it must be finite and %s (TGC_OPTIM_DEFAULT%s: %g)", fn, field,
                      v, range, zero_is_default ? " or 0" : "", dflt);
        return 0;
    }
    *out = v;
    return 1;
}

tgc_optim *tgc_sgd_sized(tgc_module *m, const tgc_sgd_opts *user, size_t opts_size)
{
    const char *fn = "tgc_sgd";
    tgc_sgd_opts full = {0}; /* the fields past the caller's opts_size: 0, their defaults */
    if (user && TGC_READ_OPTS(fn, tgc_sgd_opts, lr, &full, user, opts_size) != TGC_OK)
        return NULL;
    const tgc_sgd_opts *opts = user ? &full : NULL;
    if (!create_ok(m, opts, opts ? opts->lr : 0, fn))
        return NULL;
    tgc_optim cfg = {0};
    if (!option(fn, "momentum", opts->momentum, 0, 0, 0, 0, INFINITY, 0, &cfg.momentum) ||
        !option(fn, "dampening", opts->dampening, 0, 0, 0, 0, 1, 0, &cfg.dampening) ||
        !option(fn, "weight_decay", opts->weight_decay, 0, 0, 0, 0, INFINITY, 0, &cfg.weight_decay))
        return NULL;
    if (opts->nesterov && (cfg.momentum <= 0 || cfg.dampening != 0)) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: nesterov needs momentum > 0 and dampening 0 (momentum %g, "
                      "dampening %g)",
                      fn, cfg.momentum, cfg.dampening);
        return NULL;
    }
    cfg.nesterov = opts->nesterov != 0;
    cfg.maximize = opts->maximize != 0;
    return optim_create(m, OPTIM_SGD, opts->lr, &cfg);
}

static tgc_optim *adam_create(tgc_module *m, const tgc_adam_opts *opts, optim_kind kind)
{
    const char *fn = kind_fn[kind];
    if (!create_ok(m, opts, opts ? opts->lr : 0, fn))
        return NULL;
    tgc_optim cfg = {0};
    /* 0 is no decay for both; PyTorch's AdamW decays by 1e-2 unless told otherwise, so
     * TGC_OPTIM_DEFAULT asks for that */
    double wd_default = kind == OPTIM_ADAMW ? 1e-2 : 0;
    if (!option(fn, "beta1", opts->beta1, 0.9, 1, 0, 1, 1, 1, &cfg.beta1) ||
        !option(fn, "beta2", opts->beta2, 0.999, 1, 0, 1, 1, 1, &cfg.beta2) ||
        !option(fn, "eps", opts->eps, 1e-8, 1, 0, 1, INFINITY, 0, &cfg.eps) ||
        !option(fn, "weight_decay", opts->weight_decay, wd_default, 0, 0, 0, INFINITY, 0,
                &cfg.weight_decay))
        return NULL;
    cfg.amsgrad = opts->amsgrad != 0;
    cfg.maximize = opts->maximize != 0;
    return optim_create(m, kind, opts->lr, &cfg);
}

/* The caller's opts_size bytes of user into *full (zeros after them: the defaults). */
static const tgc_adam_opts *read_adam_opts(optim_kind kind, tgc_adam_opts *full,
                                           const tgc_adam_opts *user, size_t opts_size,
                                           int *refused)
{
    memset(full, 0, sizeof *full);
    *refused =
        user && TGC_READ_OPTS(kind_fn[kind], tgc_adam_opts, lr, full, user, opts_size) != TGC_OK;
    return user ? full : NULL;
}

tgc_optim *tgc_adam_sized(tgc_module *m, const tgc_adam_opts *user, size_t opts_size)
{
    tgc_adam_opts full;
    int refused;
    const tgc_adam_opts *opts = read_adam_opts(OPTIM_ADAM, &full, user, opts_size, &refused);
    return refused ? NULL : adam_create(m, opts, OPTIM_ADAM);
}

tgc_optim *tgc_adamw_sized(tgc_module *m, const tgc_adam_opts *user, size_t opts_size)
{
    tgc_adam_opts full;
    int refused;
    const tgc_adam_opts *opts = read_adam_opts(OPTIM_ADAMW, &full, user, opts_size, &refused);
    return refused ? NULL : adam_create(m, opts, OPTIM_ADAMW);
}

/* ---- the update ---- */

/* The 0-d scalars of one step in one dtype (see the top of the file). */
typedef struct step_scalars {
    int ready;
    tgc_tensor *neg_lr;        /* SGD: -lr */
    tgc_tensor *damp;          /* SGD with dampening: 1 on the first step, then 1 - dampening */
    tgc_tensor *neg_step_size; /* Adam: -lr / bc1 */
    tgc_tensor *bc2_sqrt;      /* Adam: sqrt(bc2) */
    tgc_tensor *decay;         /* AdamW: 1 - lr*wd */
} step_scalars;

/* 1 - beta^step, step in f64. */
static tgc_tensor *bias_correction(tgc_tensor *step64, double beta)
{
    return tgc_add_scalar(tgc_neg(tgc_exp(tgc_mul_scalar(step64, log(beta)))), 1.0);
}

static void make_scalars(const tgc_optim *o, tgc_tensor *step64, tgc_tensor *lr64, tgc_dtype dt,
                         step_scalars *s)
{
    s->ready = 1;
    if (o->kind == OPTIM_SGD) {
        s->neg_lr = tgc_cast(tgc_neg(lr64), dt);
        if (o->momentum != 0 && o->dampening != 0) /* 1 - dampening*min(step - 1, 1) */
            s->damp = tgc_cast(
                tgc_add_scalar(
                    tgc_mul_scalar(tgc_clamp(tgc_sub_scalar(step64, 1.0), 0.0, 1.0), -o->dampening),
                    1.0),
                dt);
        return;
    }
    s->neg_step_size = tgc_cast(tgc_neg(tgc_div(lr64, bias_correction(step64, o->beta1))), dt);
    s->bc2_sqrt = tgc_cast(tgc_sqrt(bias_correction(step64, o->beta2)), dt);
    if (o->kind == OPTIM_ADAMW && o->weight_decay != 0)
        s->decay = tgc_cast(tgc_add_scalar(tgc_mul_scalar(lr64, -o->weight_decay), 1.0), dt);
}

static tgc_tensor *state_of(const tgc_optim *o, int param, int k)
{
    return o->state[STATE_FIRST_PARAM + param * o->per_param + k].t;
}

/* tgc_copy_ of each (dst, src) pair; the first failure's status (an op of the chain that
 * failed left src NULL with its error). */
static tgc_status write_all(tgc_tensor *const *dst, tgc_tensor *const *src, int n)
{
    for (int i = 0; i < n; i++) {
        tgc_status st = tgc_copy_(dst[i], src[i]);
        if (st != TGC_OK)
            return st;
    }
    return TGC_OK;
}

static tgc_status sgd_update(const tgc_optim *o, int i, tgc_tensor *g, const step_scalars *s)
{
    tgc_tensor *p = o->params[i], *dst[2], *src[2];
    int n = 0;
    if (o->maximize)
        g = tgc_neg(g);
    if (o->weight_decay != 0)
        g = tgc_add(g, tgc_mul_scalar(p, o->weight_decay));
    if (o->momentum != 0) {
        tgc_tensor *buf = state_of(o, i, 0);
        tgc_tensor *b =
            tgc_add(tgc_mul_scalar(buf, o->momentum), s->damp ? tgc_mul(g, s->damp) : g);
        g = o->nesterov ? tgc_add(g, tgc_mul_scalar(b, o->momentum)) : b;
        dst[n] = buf;
        src[n++] = b;
    }
    dst[n] = p;
    src[n++] = tgc_add(p, tgc_mul(g, s->neg_lr));
    return write_all(dst, src, n);
}

static tgc_status adam_update(const tgc_optim *o, int i, tgc_tensor *g, const step_scalars *s)
{
    tgc_tensor *p = o->params[i], *m = state_of(o, i, 0), *v = state_of(o, i, 1);
    tgc_tensor *dst[4] = {m, v}, *src[4];
    int n = 2;
    if (o->maximize)
        g = tgc_neg(g);
    tgc_tensor *pd = p;
    if (o->kind == OPTIM_ADAM && o->weight_decay != 0)
        g = tgc_add(g, tgc_mul_scalar(p, o->weight_decay));
    else if (s->decay)
        pd = tgc_mul(p, s->decay);
    double w = 1.0 - o->beta1; /* torch.lerp(m, g, w), in its two forms */
    tgc_tensor *gm = tgc_sub(g, m);
    src[0] = w < 0.5 ? tgc_add(m, tgc_mul_scalar(gm, w)) : tgc_sub(g, tgc_mul_scalar(gm, 1.0 - w));
    src[1] = tgc_add(tgc_mul_scalar(v, o->beta2), tgc_mul(tgc_mul_scalar(g, 1.0 - o->beta2), g));
    tgc_tensor *vv = src[1];
    if (o->amsgrad) {
        dst[n] = state_of(o, i, 2);
        vv = src[n++] = tgc_maximum(state_of(o, i, 2), src[1]);
    }
    tgc_tensor *denom = tgc_add_scalar(tgc_div(tgc_sqrt(vv), s->bc2_sqrt), o->eps);
    dst[n] = p;
    src[n++] = tgc_add(pd, tgc_div(tgc_mul(src[0], s->neg_step_size), denom));
    return write_all(dst, src, n);
}

/* Every gradient given must match its parameter (shape, dtype, device) and every parameter
 * must be on the optimizer's device, so that a step either updates all or fails first. */
static tgc_status check_grads(const tgc_optim *o, tgc_tensor *const *grads)
{
    const tgc_tensor *step = o->state[STATE_STEP].t;
    for (int i = 0; i < o->n_params; i++) {
        const tgc_tensor *p = o->params[i], *g = grads[i];
        if (!g)
            continue;
        char a[160], b[160];
        if (!tgc_device_equal(p->device, step->device) || !tgc_device_equal(g->device, p->device))
            return tgc_set_error(TGC_ERR_DEVICE,
                                 "tgc_optim_step: parameter '%s', its gradient and the "
                                 "optimizer's state must be on one device (move the module "
                                 "with tgc_module_to, which moves all three)",
                                 o->pnames[i]);
        if (g->dtype != p->dtype)
            return tgc_set_error(TGC_ERR_DTYPE,
                                 "tgc_optim_step: the gradient of '%s' is %s but the parameter "
                                 "is %s",
                                 o->pnames[i], tgc_dtype_name(g->dtype), tgc_dtype_name(p->dtype));
        if (g->ndim != p->ndim ||
            memcmp(g->shape, p->shape, (size_t)p->ndim * sizeof *p->shape) != 0)
            return tgc_set_error(TGC_ERR_SHAPE,
                                 "tgc_optim_step: the gradient of '%s' is %s but the parameter "
                                 "is %s",
                                 o->pnames[i], tgc_format_dims(g->shape, g->ndim, a, sizeof a),
                                 tgc_format_dims(p->shape, p->ndim, b, sizeof b));
    }
    return TGC_OK;
}

/* Everything that can be checked is checked before the first write; an op failing later
 * (out of memory) leaves the parameters before it updated. */
static tgc_status run_step(tgc_optim *o, tgc_tensor *const *grads)
{
    tgc_status st = check_grads(o, grads);
    if (st != TGC_OK)
        return st;
    tgc_tensor *step = o->state[STATE_STEP].t;
    tgc_tensor *step1 = tgc_add_scalar(step, 1.0);
    tgc_tensor *step64 = tgc_cast(step1, TGC_F64), *lr64 = tgc_cast(o->state[STATE_LR].t, TGC_F64);
    step_scalars sc[TGC_DTYPE_COUNT] = {{0}};
    /* every dtype's scalars before the first update: in a trace they are then one kernel
     * ahead of all the updates, which fuse without waiting for it */
    for (int i = 0; i < o->n_params; i++)
        if (grads[i] && !sc[o->params[i]->dtype].ready)
            make_scalars(o, step64, lr64, o->params[i]->dtype, &sc[o->params[i]->dtype]);
    for (int i = 0; i < o->n_params && st == TGC_OK; i++) {
        if (!grads[i])
            continue;
        const step_scalars *s = &sc[o->params[i]->dtype];
        st = o->kind == OPTIM_SGD ? sgd_update(o, i, grads[i], s) : adam_update(o, i, grads[i], s);
    }
    if (st == TGC_OK)
        st = tgc_copy_(step, step1);
    return st;
}

static int usable(const tgc_optim *o, const char *fn)
{
    if (!o) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: optimizer is NULL", fn);
        return 0;
    }
    if (!o->module) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: the module this %s optimizer was created over was freed; free the "
                      "optimizer (tgc_optim_free) before its module",
                      fn, kind_name[o->kind]);
        return 0;
    }
    return 1;
}

/* The update in a scope of its own (its temporaries freed at the end), not recorded. */
tgc_status tgc_optim_step_grads(tgc_optim *o, tgc_tensor *const *grads)
{
    if (!usable(o, "tgc_optim_step"))
        return tgc_last_status();
    if (!grads && o->n_params > 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_optim_step: grads is NULL");
    tgc_autograd_pause();
    tgc_scope_push();
    tgc_status st = run_step(o, grads);
    tgc_status pop = tgc_scope_pop();
    tgc_autograd_resume();
    return st != TGC_OK ? st : pop;
}

tgc_status tgc_optim_step(tgc_optim *o)
{
    if (!usable(o, "tgc_optim_step"))
        return tgc_last_status();
    tgc_tensor **grads = calloc((size_t)o->n_params + 1, sizeof *grads);
    if (!grads)
        return tgc_set_error(TGC_ERR_OOM, "tgc_optim_step: out of memory");
    for (int i = 0; i < o->n_params; i++)
        grads[i] = tgc_grad(o->params[i]);
    tgc_status st = tgc_optim_step_grads(o, grads);
    free(grads);
    return st;
}

/* tgc_zero_grad's rule over the optimizer's parameters: a parameter without a .grad gets one,
 * so a compiled step that starts with this binds the same gradients on its first call. */
tgc_status tgc_optim_zero_grad(tgc_optim *o)
{
    if (!usable(o, "tgc_optim_zero_grad"))
        return tgc_last_status();
    tgc_status st = TGC_OK;
    int tracing = tgc_trace_current() != NULL;
    tgc_autograd_pause();
    tgc_scope_push();
    for (int i = 0; i < o->n_params && st == TGC_OK; i++) {
        if ((st = tgc_autograd_ensure_grad(o->params[i])) != TGC_OK)
            break;
        tgc_tensor *g = tgc_grad(o->params[i]);
        /* while tracing, a broadcast 0-d zero: no constant of the gradient's size */
        tgc_tensor *z = tracing ? tgc_expand_as(tgc_zeros(NULL, 0, g->dtype, g->device), g)
                                : tgc_zeros(g->shape, g->ndim, g->dtype, g->device);
        st = tgc_copy_(g, z);
    }
    tgc_status pop = tgc_scope_pop();
    tgc_autograd_resume();
    return st != TGC_OK ? st : pop;
}

tgc_status tgc_optim_set_lr(tgc_optim *o, double lr)
{
    if (!usable(o, "tgc_optim_set_lr"))
        return tgc_last_status();
    if (!lr_ok(lr))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_optim_set_lr: lr is %g; it must be > 0 and finite (and "
                             "representable in f32)",
                             lr);
    tgc_tensor *t = o->state[STATE_LR].t;
    tgc_scope_push();
    tgc_status st = tgc_copy_(t, tgc_full(NULL, 0, lr, TGC_F32, t->device));
    tgc_status pop = tgc_scope_pop();
    return st != TGC_OK ? st : pop;
}

/* Read from the "lr" tensor (so a loaded checkpoint's lr shows), on any device. */
double tgc_optim_lr(const tgc_optim *o)
{
    float lr = 0;
    if (!o) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_optim_lr: optimizer is NULL");
        return 0;
    }
    if (tgc_tensor_read_item("tgc_optim_lr", o->state[STATE_LR].t, &lr) != TGC_OK)
        return 0;
    return lr;
}

/* ---- state and internals ---- */

int tgc_optim_num_state(const tgc_optim *o)
{
    if (!o) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_optim_num_state: optimizer is NULL");
        return 0;
    }
    return o->n_state;
}

tgc_tensor *tgc_optim_state(const tgc_optim *o, int i, const char **name)
{
    if (!o || i < 0 || i >= o->n_state) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_optim_state: %s",
                      !o ? "optimizer is NULL" : "index out of range");
        return NULL;
    }
    if (name)
        *name = o->state[i].name;
    return o->state[i].t;
}

const char *tgc_optim_kind(const tgc_optim *o)
{
    return o ? kind_name[o->kind] : NULL;
}

tgc_module *tgc_optim_module(const tgc_optim *o)
{
    return o ? o->module : NULL;
}

tgc_tensor *const *tgc_optim_params(const tgc_optim *o, int *n)
{
    *n = o ? o->n_params : 0;
    return o ? o->params : NULL;
}

tgc_tensor *tgc_optim_state_param(const tgc_optim *o, int i)
{
    if (!o || i < 0 || i >= o->n_state || o->state[i].param < 0 || o->state[i].param >= o->n_params)
        return NULL;
    return o->params[o->state[i].param];
}

/* v in the shortest %g form that reads back to the same double (as_float: float). */
static void shortest(char *buf, size_t n, double v, int as_float)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (as_float ? (float)back == (float)v : back == v)
            return;
    }
}

int tgc_optim_hparams(const tgc_optim *o, char *buf, size_t n)
{
    if (!o)
        return -1;
    char lr[40], a[40], b[40], c[40], d[40];
    shortest(lr, sizeof lr, tgc_optim_lr(o), 1);
    if (o->kind == OPTIM_SGD) {
        shortest(a, sizeof a, o->momentum, 0);
        shortest(b, sizeof b, o->dampening, 0);
        shortest(c, sizeof c, o->weight_decay, 0);
        return snprintf(buf, n,
                        "{\"lr\":%s,\"momentum\":%s,\"dampening\":%s,\"weight_decay\":%s,"
                        "\"nesterov\":%s,\"maximize\":%s}",
                        lr, a, b, c, o->nesterov ? "true" : "false",
                        o->maximize ? "true" : "false");
    }
    shortest(a, sizeof a, o->beta1, 0);
    shortest(b, sizeof b, o->beta2, 0);
    shortest(c, sizeof c, o->eps, 0);
    shortest(d, sizeof d, o->weight_decay, 0);
    return snprintf(buf, n,
                    "{\"lr\":%s,\"betas\":[%s,%s],\"eps\":%s,\"weight_decay\":%s,\"amsgrad\":%s,"
                    "\"maximize\":%s}",
                    lr, a, b, c, d, o->amsgrad ? "true" : "false", o->maximize ? "true" : "false");
}
