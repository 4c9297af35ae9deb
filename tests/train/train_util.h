/* Shared pieces of the training tests (header only; include after <cmocka.h>): the batches
 * of tests/train/gen_golden_train.py, the two golden models with their tensor names, the
 * training step (eager or compiled) and comparisons of whole modules.
 *
 * Threading: one test thread (static state: the optimizer and forward the step uses). */
#ifndef TGC_TESTS_TRAIN_UTIL_H
#define TGC_TESTS_TRAIN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgc/tgc.h"

#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

#ifndef TGC_TRAIN_GOLDEN_DIR
#error "TGC_TRAIN_GOLDEN_DIR must name tests/train/golden"
#endif

#define TRAIN_STEPS        20 /* gen_golden_train.py STEPS */
#define TRAIN_BATCH        8  /* BATCH */
#define TRAIN_RESNET_WIDTH 4  /* RESNET_WIDTH */

/* ---- batches: gen_golden_train.py's batch(step) ---- */
static inline uint64_t train_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* x f32 [n, 3, 32, 32] and y i64 [n] of batch `step` on dev, in the current scope. */
static inline void train_batch(int step, int n, tgc_device dev, tgc_tensor **x, tgc_tensor **y)
{
    int64_t count = (int64_t)n * 3 * 32 * 32;
    float *xs = malloc((size_t)count * sizeof(float));
    int64_t *ys = malloc((size_t)n * sizeof(int64_t));
    assert_non_null(xs);
    assert_non_null(ys);
    for (int64_t i = 0; i < count; i++) {
        uint64_t k = train_mix64(((uint64_t)step << 32) | (uint64_t)i) >> 40;
        xs[i] = (float)((double)k * 0x1p-22 - 2.0);
    }
    for (int i = 0; i < n; i++)
        ys[i] = (int64_t)((train_mix64(((uint64_t)(step + 1000) << 32) | (uint64_t)i) >> 33) % 10);
    int64_t xshape[4] = {n, 3, 32, 32}, yshape[1] = {n};
    tgc_tensor *hx =
        tgc_from_data(xs, (size_t)count * sizeof(float), xshape, 4, TGC_F32, tgc_cpu());
    tgc_tensor *hy = tgc_from_data(ys, (size_t)n * sizeof(int64_t), yshape, 1, TGC_I64, tgc_cpu());
    free(xs);
    free(ys);
    assert_non_null(hx);
    assert_non_null(hy);
    *x = dev.type == TGC_DEVICE_CPU ? hx : tgc_to(hx, dev);
    *y = dev.type == TGC_DEVICE_CPU ? hy : tgc_to(hy, dev);
    assert_non_null(*x);
    assert_non_null(*y);
}

/* ---- models ---- */
typedef enum train_model { TRAIN_CNN = 0, TRAIN_RESNET = 1 } train_model;

static inline const char *train_model_name(train_model m)
{
    return m == TRAIN_CNN ? "cnn" : "resnet";
}

/* The golden file of a model: "init", "sgd" or "adam". */
static inline void train_golden_path(char *buf, size_t n, train_model m, const char *what)
{
    snprintf(buf, n, "%s/%s_%s.safetensors", TGC_TRAIN_GOLDEN_DIR, train_model_name(m), what);
}

/* The dotted names of every parameter and buffer of the model (tgc's == state_dict's);
 * returns the count. names: at least 128 entries of 64 bytes. */
static inline int train_tensor_names(train_model m, char (*names)[64])
{
    int n = 0;
    static const char *const bn[4] = {"weight", "bias", "running_mean", "running_var"};
    if (m == TRAIN_CNN) {
        static const char *const layers[4] = {"conv1", "conv2", "conv3", "fc"};
        for (int l = 0; l < 4; l++) {
            snprintf(names[n++], 64, "%s.weight", layers[l]);
            snprintf(names[n++], 64, "%s.bias", layers[l]);
        }
        return n;
    }
    snprintf(names[n++], 64, "conv1.weight");
    for (int k = 0; k < 4; k++)
        snprintf(names[n++], 64, "bn1.%s", bn[k]);
    for (int l = 1; l <= 4; l++)
        for (int b = 0; b < 2; b++) {
            for (int c = 1; c <= 2; c++) {
                snprintf(names[n++], 64, "layer%d.%d.conv%d.weight", l, b, c);
                for (int k = 0; k < 4; k++)
                    snprintf(names[n++], 64, "layer%d.%d.bn%d.%s", l, b, c, bn[k]);
            }
            if (l > 1 && b == 0) {
                snprintf(names[n++], 64, "layer%d.0.downsample.0.weight", l);
                for (int k = 0; k < 4; k++)
                    snprintf(names[n++], 64, "layer%d.0.downsample.1.%s", l, bn[k]);
            }
        }
    snprintf(names[n++], 64, "fc.weight");
    snprintf(names[n++], 64, "fc.bias");
    return n;
}

/* The tensor of a module tree under a dotted name, or NULL. */
static inline tgc_tensor *train_lookup(tgc_module *m, const char *dotted)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", dotted);
    char *part = buf;
    for (char *dot; m && (dot = strchr(part, '.')) != NULL; part = dot + 1) {
        *dot = 0;
        m = tgc_module_get_child(m, part);
    }
    return m ? tgc_module_get(m, part) : NULL;
}

/* The model with the golden initial weights (tgc_module_load, strict), in training mode, on
 * dev. */
static inline tgc_module *train_make_model(train_model m, tgc_device dev)
{
    tgc_module *net;
    if (m == TRAIN_CNN) {
        tgc_manual_seed(1);
        net = seed_cnn_create();
    } else {
        resnet18_config c = resnet18_default_config();
        c.width = TRAIN_RESNET_WIDTH;
        net = resnet18_create(&c);
    }
    assert_non_null(net);
    char path[1024];
    train_golden_path(path, sizeof path, m, "init");
    tgc_status st = tgc_module_load(net, path, 1);
    if (st != TGC_OK)
        fail_msg("tgc_module_load(%s): %s (%s)", path, tgc_last_error(), tgc_status_str(st));
    tgc_module_train(net, 1);
    if (dev.type != TGC_DEVICE_CPU)
        assert_int_equal(tgc_module_to(net, dev), TGC_OK);
    return net;
}

static inline tgc_model_fn train_forward_of(train_model m)
{
    return m == TRAIN_CNN ? seed_cnn_forward : resnet18_forward;
}

/* The golden optimizers of gen_golden_train.py: SGD (lr 1e-3 for the CNN, 3e-4 for the
 * ResNet; momentum 0.9, weight decay 5e-4) and Adam (lr 1e-3 / 3e-4, eps 1e-4). */
static inline tgc_optim *train_make_optim(tgc_module *net, train_model m, const char *kind)
{
    tgc_optim *o =
        strcmp(kind, "sgd") == 0
            ? tgc_sgd(net, &(tgc_sgd_opts){.lr = m == TRAIN_CNN ? 1e-3 : 3e-4,
                                           .momentum = 0.9,
                                           .weight_decay = 5e-4})
            : tgc_adam(net, &(tgc_adam_opts){.lr = m == TRAIN_CNN ? 1e-3 : 3e-4, .eps = 1e-4});
    if (!o)
        fail_msg("optimizer %s: %s", kind, tgc_last_error());
    return o;
}

/* ---- the training step ---- */
static tgc_optim *train_opt_;       /* the optimizer train_step updates */
static tgc_model_fn train_forward_; /* the model's forward */
/* 0: zero_grad first (PyTorch's loop); 1: zero_grad after the update (the gradients are zero
 * between steps, and exist from the first compiled call's trace on). Both must give the
 * same numbers; train_step reads it when it runs (at trace time for a compiled call). */
static int train_zero_after_;

/* zero_grad, forward, cross entropy (mean), backward, optimizer step (zero_grad last when
 * train_zero_after_); out[0]: the loss. */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (n_in != 2 || n_out != 1)
        return TGC_ERR_INVALID_ARG;
    tgc_status st = train_zero_after_ ? TGC_OK : tgc_optim_zero_grad(train_opt_);
    tgc_tensor *logits = NULL, *loss = NULL;
    if (st == TGC_OK)
        st = train_forward_(self, in, 1, &logits, 1);
    if (st == TGC_OK) {
        loss = tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, -100, 0.0);
        st = loss ? tgc_backward(loss) : tgc_last_status();
    }
    if (st == TGC_OK)
        st = tgc_optim_step(train_opt_);
    if (st == TGC_OK && train_zero_after_)
        st = tgc_optim_zero_grad(train_opt_);
    out[0] = st == TGC_OK ? tgc_detach(loss) : NULL;
    return st;
}

/* Runs steps [first, first + n) of batches step % TRAIN_STEPS through train_step, eagerly
 * (f NULL) or compiled; losses[i] (may be NULL) gets each step's loss. The optimizer must be
 * the one the compiled function was traced with. */
static inline void train_run(tgc_fn *f, tgc_module *net, tgc_optim *opt, tgc_model_fn fwd,
                             tgc_device dev, int first, int n, double *losses)
{
    train_opt_ = opt;
    train_forward_ = fwd;
    for (int s = first; s < first + n; s++) {
        tgc_scope_push();
        tgc_tensor *in[2], *loss = NULL;
        train_batch(s % TRAIN_STEPS, TRAIN_BATCH, dev, &in[0], &in[1]);
        tgc_status st = f ? tgc_call(f, net, in, 2, &loss, 1) : train_step(net, in, 2, &loss, 1);
        if (st != TGC_OK)
            fail_msg("%s step %d: %s (%s)", f ? "compiled" : "eager", s, tgc_last_error(),
                     tgc_status_str(st));
        double v = tgc_item_f64(loss);
        if (losses)
            losses[s - first] = v;
        tgc_scope_pop();
    }
}

/* max |a - b| / max |b| over one pair of same-shaped f32 tensors (any device); 0 for b == 0
 * everywhere and a == b. */
static inline double train_rel_diff(tgc_tensor *a, tgc_tensor *b)
{
    assert_non_null(a);
    assert_non_null(b);
    int64_t n = tgc_numel(b);
    assert_int_equal(tgc_numel(a), n);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(tgc_copy_to_host(a, x, (size_t)n * sizeof(float)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(b, y, (size_t)n * sizeof(float)), TGC_OK);
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i]))
            fail_msg("non-finite value at %lld: %g vs %g", (long long)i, x[i], y[i]);
        diff = fmax(diff, fabs((double)x[i] - (double)y[i]));
        ref = fmax(ref, fabs((double)y[i]));
    }
    free(x);
    free(y);
    return ref > 0 ? diff / ref : diff;
}

/* Every parameter and buffer of got against want (same structure): relative difference at
 * most rtol for each (0: bit for bit). Prints the worst. */
static inline void train_assert_modules_close(train_model m, tgc_module *got, tgc_module *want,
                                              double rtol, const char *what)
{
    char names[128][64];
    int n = train_tensor_names(m, names);
    assert_int_equal(n, tgc_module_num_tensors(got));
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < n; i++) {
        tgc_tensor *a = train_lookup(got, names[i]), *b = train_lookup(want, names[i]);
        if (!a || !b)
            fail_msg("%s: no tensor %s", what, names[i]);
        double d = train_rel_diff(a, b);
        if (d > worst || i == 0) {
            worst = d;
            worst_i = i;
        }
    }
    printf("  %s: worst relative difference %.3g (%s), tolerance %.3g\n", what, worst,
           names[worst_i], rtol);
    if (worst > rtol)
        fail_msg("%s: %s differs by %.3g relative (> %.3g)", what, names[worst_i], worst, rtol);
}

/* The updates: max |got - want| / max |want - init| per tensor (how far the trained tensors
 * are apart, relative to how far training moved them) at most rtol. The tensor-relative
 * bound above cannot see an update that is wrong by a few percent when training moves the
 * weights little; this one can. Tensors that training leaves unchanged are skipped. */
static inline void train_assert_updates_close(train_model m, tgc_module *got, tgc_module *want,
                                              tgc_module *init, double rtol, const char *what)
{
    char names[128][64];
    int n = train_tensor_names(m, names);
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < n; i++) {
        tgc_scope_push();
        tgc_tensor *a = train_lookup(got, names[i]), *b = train_lookup(want, names[i]);
        tgc_tensor *c = train_lookup(init, names[i]);
        if (!a || !b || !c)
            fail_msg("%s: no tensor %s", what, names[i]);
        tgc_tensor *ah = tgc_to(a, tgc_cpu()), *bh = tgc_to(b, tgc_cpu()),
                   *ch = tgc_to(c, tgc_cpu());
        double moved = tgc_item_f64(tgc_max(tgc_abs(tgc_sub(bh, ch)), NULL, 0, 0));
        double diff = tgc_item_f64(tgc_max(tgc_abs(tgc_sub(ah, bh)), NULL, 0, 0));
        tgc_scope_pop();
        if (moved == 0)
            continue;
        if (diff / moved > worst) {
            worst = diff / moved;
            worst_i = i;
        }
    }
    printf("  %s: worst difference of the updates %.3g (%s), tolerance %.3g\n", what, worst,
           names[worst_i], rtol);
    if (worst > rtol)
        fail_msg("%s: the update of %s differs by %.3g of itself (> %.3g)", what, names[worst_i],
                 worst, rtol);
}

/* losses within rtol of want (relative to each |want|; 0: equal). */
static inline void train_assert_losses_close(const double *got, const double *want, int n,
                                             double rtol, const char *what)
{
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            fail_msg("%s: loss %d is %g", what, i, got[i]);
        double d = fabs(got[i] - want[i]) / fmax(fabs(want[i]), 1e-30);
        if (d > worst) {
            worst = d;
            worst_i = i;
        }
    }
    printf("  %s: losses %.6f -> %.6f, worst relative difference %.3g (step %d), tolerance "
           "%.3g\n",
           what, got[0], got[n - 1], worst, worst_i, rtol);
    if (worst > rtol)
        fail_msg("%s: loss of step %d is %.9g, want %.9g (relative %.3g > %.3g)", what, worst_i,
                 got[worst_i], want[worst_i], worst, rtol);
}

/* The golden losses of <model>_<opt>.safetensors ("losses" [TRAIN_STEPS]), read with
 * tgc_module_load (strict 0) into a module holding just that tensor. */
static inline void train_golden_losses(train_model m, const char *opt, double *losses)
{
    char path[1024];
    train_golden_path(path, sizeof path, m, opt);
    tgc_module *h = tgc_module_create("golden", NULL);
    assert_non_null(h);
    tgc_scope_push();
    int64_t n = TRAIN_STEPS;
    tgc_tensor *l = tgc_module_buffer(h, "losses", tgc_zeros(&n, 1, TGC_F32, tgc_cpu()));
    assert_non_null(l);
    tgc_status st = tgc_module_load(h, path, 0);
    if (st != TGC_OK)
        fail_msg("tgc_module_load(%s): %s (%s)", path, tgc_last_error(), tgc_status_str(st));
    float v[TRAIN_STEPS];
    assert_int_equal(tgc_copy_to_host(l, v, sizeof v), TGC_OK);
    for (int i = 0; i < TRAIN_STEPS; i++)
        losses[i] = v[i];
    tgc_scope_pop();
    tgc_module_free(h);
}

/* A model holding the golden final weights of <model>_<opt> (strict 0: the file also has
 * "losses"). */
static inline tgc_module *train_golden_final(train_model m, const char *opt)
{
    tgc_module *ref = train_make_model(m, tgc_cpu());
    char path[1024];
    train_golden_path(path, sizeof path, m, opt);
    tgc_status st = tgc_module_load(ref, path, 0);
    if (st != TGC_OK)
        fail_msg("tgc_module_load(%s): %s (%s)", path, tgc_last_error(), tgc_status_str(st));
    return ref;
}

#endif
