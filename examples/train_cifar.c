/* Training on CIFAR-10 with libtgc: one compiled training step (forward, cross entropy,
 * backward and the Adam update, fused into one variant), a compiled evaluation function over
 * the same module, a prefetch thread for the data, and a checkpoint at the end.
 *
 *   ./build/examples/train_cifar [--model cnn|resnet18] [--data DIR] [--epochs N] [--batch 64]
 *                                [--lr 1e-3] [--max-steps N] [--report N] [--seed N]
 *                                [--checkpoint PATH] [--resume PATH] [--width 64]
 *                                [--synthetic-train N] [--synthetic-test N] [--threads N]
 *                                [--device cpu|cuda|cuda:N] [--precision highest|high|medium]
 *                                [--mode default|reduce-overhead]
 *
 * --data DIR holds CIFAR-10's binary version (data_batch_1.bin ... data_batch_5.bin,
 * test_batch.bin). When DIR has no data_batch_1.bin, a synthetic set in the same format is
 * written there first (examples/data/cifar.h: class-dependent patterns, 50000 + 10000 images
 * unless --synthetic-train/--synthetic-test say otherwise) and every line that reports
 * accuracy says "synthetic". --model cnn is the seed's CNN (examples/models/seed_cnn.h),
 * resnet18 torchvision's layout (examples/models/resnet18.h, --width channels in layer1).
 * --max-steps stops training after that many steps (0: the full --epochs); --report prints a
 * progress line every N steps (mean loss over the period, images/s, step time). At each epoch
 * end the test set is evaluated (loss and accuracy; with --max-steps the run ends with one
 * evaluation). --checkpoint PATH writes the module (tgc_module_save, PATH) and the optimizer
 * (tgc_optim_save, PATH with ".optim" before its extension) at the end; --resume PATH loads both
 * before training.
 *
 * How the compiled step works. train_step below is an ordinary C function of tgc ops:
 * forward, tgc_cross_entropy, tgc_backward, tgc_optim_step, then tgc_optim_zero_grad, so the
 * gradients are zero between steps (the same numbers as zeroing them first, as PyTorch's loop
 * does, and the gradients exist from the first trace on). tgc_compile traces
 * it once into one variant; the parameter updates, .grad writes, Adam's moments and step
 * count, and batch-norm running statistics are in-place writes of module and optimizer
 * storage, bound by position, so later calls are cache hits that change no guard. The
 * optimizer is reached through a static (g_opt): model functions only get `self`, and the
 * userdata of a module is not guarded (include/tgc/compile.h) — fine here, because the
 * optimizer object never changes during the run. eval_step is a second compiled function
 * over the same module, called in eval mode (tgc_module_train(net, 0)) and with grad mode
 * off: each function keeps its own variant, so switching between training and testing never
 * forces either to recompile (the stats at the end show one compile each). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tgc/tgc.h>

#include "data/cifar.h"
#include "device_opts.h"
#include "models/resnet18.h"
#include "models/seed_cnn.h"

typedef struct options {
    const char *model, *data, *checkpoint, *resume;
    int epochs, batch, report, width, threads;
    long long max_steps, synth_train, synth_test;
    double lr;
    uint64_t seed;
    tgc_device device;
    tgc_matmul_precision precision;
    tgc_mode mode;
} options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the two compiled functions ---- */

static tgc_optim *g_opt;       /* the optimizer of train_step (see the file comment) */
static tgc_model_fn g_forward; /* the model's forward: seed_cnn_forward or resnet18_forward */

/* in: x [N, 3, 32, 32], y i64 [N]; out[0]: the batch's mean loss (a scalar). */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (n_in != 2 || n_out != 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL;
    tgc_status st = g_forward(self, in, 1, &logits, 1);
    tgc_tensor *loss =
        st == TGC_OK ? tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, CIFAR_IGNORE, 0.0) : NULL;
    if (st == TGC_OK && !loss)
        st = tgc_last_status();
    if (st == TGC_OK)
        st = tgc_backward(loss);
    if (st == TGC_OK)
        st = tgc_optim_step(g_opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(g_opt); /* the gradients are zero between steps */
    out[0] = st == TGC_OK ? tgc_detach(loss) : NULL;
    return st;
}

/* in: x, y (padding rows labelled CIFAR_IGNORE); out[0]: summed loss, out[1]: i64 count of
 * correct predictions. Called in eval mode with grad mode off. */
static tgc_status eval_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    if (n_in != 2 || n_out != 2)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL;
    tgc_status st = g_forward(self, in, 1, &logits, 1);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_cross_entropy(logits, in[1], TGC_REDUCE_SUM, CIFAR_IGNORE, 0.0);
    out[1] = tgc_sum(tgc_eq(tgc_argmax(logits, 1, 0), in[1]), NULL, 0, 0);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

/* ---- options ---- */

static void usage(FILE *fp, const char *prog)
{
    fprintf(fp,
            "usage: %s [--model cnn|resnet18] [--data DIR] [--epochs N] [--batch N] [--lr X]\n"
            "          [--max-steps N] [--report N] [--seed N] [--checkpoint PATH] "
            "[--resume PATH]\n"
            "          [--width N] [--synthetic-train N] [--synthetic-test N] [--threads "
            "N]\n" EXAMPLE_DEVICE_USAGE
            "--data DIR: CIFAR-10 binary files; a synthetic set is written there when missing\n"
            "--max-steps 0: the full --epochs; --report N: a progress line every N steps\n"
            "--checkpoint PATH: module at PATH, optimizer at PATH with .optim before the "
            "extension\n",
            prog);
}

/* 1 run, 0 bad arguments, -1 help. */
static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        int d = example_device_option(argc, argv, &i, &o->device, &o->precision, &o->mode);
        if (d < 0) {
            fprintf(stderr, "%s: bad value for '%s'\n", argv[0], a);
            return 0;
        }
        if (d > 0)
            continue;
        if (!v) {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], a);
            return 0;
        }
        i++;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--checkpoint") == 0)
            o->checkpoint = v;
        else if (strcmp(a, "--resume") == 0)
            o->resume = v;
        else if (strcmp(a, "--epochs") == 0)
            o->epochs = atoi(v);
        else if (strcmp(a, "--batch") == 0)
            o->batch = atoi(v);
        else if (strcmp(a, "--report") == 0)
            o->report = atoi(v);
        else if (strcmp(a, "--width") == 0)
            o->width = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--max-steps") == 0)
            o->max_steps = atoll(v);
        else if (strcmp(a, "--synthetic-train") == 0)
            o->synth_train = atoll(v);
        else if (strcmp(a, "--synthetic-test") == 0)
            o->synth_test = atoll(v);
        else if (strcmp(a, "--lr") == 0)
            o->lr = atof(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 0);
        else {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
            return 0;
        }
    }
    if (strcmp(o->model, "cnn") != 0 && strcmp(o->model, "resnet18") != 0) {
        fprintf(stderr, "%s: --model is cnn or resnet18\n", argv[0]);
        return 0;
    }
    if (o->epochs < 1 || o->batch < 1 || o->report < 1 || o->width < 1 || o->threads < 0 ||
        o->max_steps < 0 || o->lr <= 0 || o->synth_train < 5 || o->synth_test < 1) {
        fprintf(stderr, "%s: epochs, batch, report, width >= 1; lr > 0; max-steps, threads >= 0\n",
                argv[0]);
        return 0;
    }
    return 1;
}

/* PATH with ".optim" before its extension ("ck.safetensors" -> "ck.optim.safetensors"). */
static void optim_path(const char *path, char *buf, size_t n)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash) && dot != path)
        snprintf(buf, n, "%.*s.optim%s", (int)(dot - path), path, dot);
    else
        snprintf(buf, n, "%s.optim", path);
}

static void print_stats(const char *what, const tgc_fn *f)
{
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK)
        return;
    printf("%-10s %llu calls, %llu compiles, %llu recompiles, %llu eager calls, %d variants, "
           "compile_seconds %.3f, %d kernels, backend %s%s%s\n",
           what, (unsigned long long)s.calls, (unsigned long long)s.compiles,
           (unsigned long long)s.recompiles, (unsigned long long)s.eager_fallbacks, s.variants,
           s.compile_seconds, s.kernels_last_variant, s.backend,
           s.last_recompile_reason[0] ? "; last recompile: " : "", s.last_recompile_reason);
}

/* Evaluates the whole test set; 1 on success. */
static int evaluate(tgc_fn *eval, tgc_module *net, const cifar_set *test, const options *o,
                    int synthetic, long long epoch)
{
    cifar_loader ld;
    if (!cifar_loader_start(&ld, test, o->batch, 0, o->device, 0, 1))
        return 0;
    tgc_module_train(net, 0);
    tgc_no_grad_push();
    double loss = 0, t0 = now_s();
    long long correct = 0, seen = 0;
    int ok = 1;
    cifar_batch *b;
    while ((b = cifar_loader_next(&ld)) != NULL) {
        tgc_scope_push();
        tgc_tensor *in[2] = {b->x, b->y}, *out[2] = {NULL, NULL};
        tgc_status st = tgc_call(eval, net, in, 2, out, 2);
        if (st == TGC_OK) {
            loss += tgc_item_f64(out[0]); /* waits for the GPU before the batch is released */
            correct += tgc_item_i64(out[1]);
            seen += b->valid;
        } else {
            fprintf(stderr, "eval tgc_call: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
            ok = 0;
        }
        tgc_scope_pop();
        cifar_loader_release(&ld, b);
        if (!ok)
            break;
    }
    if (ok && cifar_loader_error(&ld)) {
        fprintf(stderr, "test data: %s\n", cifar_loader_error(&ld));
        ok = 0;
    }
    cifar_loader_stop(&ld);
    tgc_no_grad_pop();
    tgc_module_train(net, 1);
    if (ok && seen > 0)
        printf("epoch %lld test%s: loss %.4f  accuracy %.2f%% (%lld / %lld)  %.1f s\n", epoch,
               synthetic ? " (synthetic data)" : "", loss / (double)seen,
               100.0 * (double)correct / (double)seen, correct, seen, now_s() - t0);
    fflush(stdout);
    return ok;
}

static tgc_module *make_model(const options *o)
{
    tgc_module *net;
    if (strcmp(o->model, "cnn") == 0) {
        tgc_manual_seed(o->seed);
        net = seed_cnn_create();
        g_forward = seed_cnn_forward;
    } else {
        resnet18_config rc = resnet18_default_config();
        rc.width = o->width;
        rc.seed ^= o->seed;
        net = resnet18_create(&rc);
        g_forward = resnet18_forward;
    }
    if (!net) {
        fprintf(stderr, "creating the model: %s\n", tgc_last_error());
        return NULL;
    }
    tgc_module_train(net, 1); /* resnet18_create makes an eval-mode model */
    if (o->device.type != TGC_DEVICE_CPU && tgc_module_to(net, o->device) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        tgc_module_free(net);
        return NULL;
    }
    return net;
}

int main(int argc, char **argv)
{
    options o = {.model = "cnn",
                 .data = "data/cifar-10-batches-bin",
                 .epochs = 1,
                 .batch = 64,
                 .report = 50,
                 .width = 64,
                 .synth_train = 50000,
                 .synth_test = 10000,
                 .lr = 1e-3,
                 .seed = 1234,
                 .device = tgc_cpu(),
                 .precision = TGC_PRECISION_HIGHEST,
                 .mode = TGC_MODE_DEFAULT};
    int parsed = parse_args(argc, argv, &o);
    if (parsed <= 0) {
        usage(parsed < 0 ? stdout : stderr, argv[0]);
        return parsed < 0 ? 0 : 2;
    }
    int synthetic = 0, rc = 1;
    tgc_fn *step = NULL, *eval = NULL;
    cifar_set train = {0}, test = {0};
    double t_load = now_s();
    if (!cifar_open_dir(o.data, o.synth_train, o.synth_test, &synthetic) ||
        !cifar_load(o.data, 1, &train) || !cifar_load(o.data, 0, &test))
        return 1;
    char dev[32];
    printf("CIFAR-10%s from %s: %lld training, %lld test images (read in %.2f s)\n",
           synthetic ? " (SYNTHETIC: generated stand-in, not the real data)" : "", o.data,
           (long long)train.n, (long long)test.n, now_s() - t_load);

    tgc_module *net = make_model(&o);
    if (!net)
        goto free_data;
    g_opt = tgc_adam(net, &(tgc_adam_opts){.lr = o.lr});
    if (!g_opt) {
        fprintf(stderr, "tgc_adam: %s\n", tgc_last_error());
        goto free_net;
    }
    if (o.resume) {
        char op[4096];
        optim_path(o.resume, op, sizeof op);
        if (tgc_module_load(net, o.resume, 1) != TGC_OK || tgc_optim_load(g_opt, op) != TGC_OK) {
            fprintf(stderr, "--resume %s: %s\n", o.resume, tgc_last_error());
            goto free_opt;
        }
        printf("resumed from %s and %s\n", o.resume, op);
    }
    tgc_config cfg = tgc_config_default();
    cfg.matmul_precision = o.precision;
    cfg.mode = o.mode;
    cfg.num_threads = o.threads;
    step = tgc_compile(train_step, "train_step", &cfg);
    eval = tgc_compile(eval_step, "eval_step", &cfg);
    if (!step || !eval) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        goto free_fns;
    }
    printf("model %s (%d parameter tensors and buffers) on %s, Adam lr %g, batch %d, %s mode, "
           "precision %s\n",
           o.model, tgc_module_num_tensors(net), example_device_name(o.device, dev, sizeof dev),
           o.lr, o.batch, o.mode == TGC_MODE_REDUCE_OVERHEAD ? "reduce-overhead" : "default",
           o.precision == TGC_PRECISION_HIGHEST ? "highest"
           : o.precision == TGC_PRECISION_HIGH  ? "high"
                                                : "medium");
    fflush(stdout);

    cifar_loader ld;
    if (!cifar_loader_start(&ld, &train, o.batch, o.seed, o.device, 1, o.epochs))
        goto free_fns;
    long long steps = 0, period_steps = 0;
    double period_loss = 0, period_t0 = now_s(), first_call_s = 0, t_run = now_s();
    double step_s_sum = 0, wait_s_sum = 0;
    int ok = 1;
    cifar_batch *b;
    for (;;) {
        double tw = now_s();
        b = cifar_loader_next(&ld);
        wait_s_sum += now_s() - tw;
        if (!b)
            break;
        tgc_scope_push();
        tgc_tensor *in[2] = {b->x, b->y}, *loss = NULL;
        double t0 = now_s();
        tgc_status st = tgc_call(step, net, in, 2, &loss, 1);
        double lv = st == TGC_OK ? tgc_item_f64(loss) : NAN; /* waits for the step */
        double dt = now_s() - t0;
        tgc_scope_pop();
        int last = b->last;
        long long epoch = b->epoch;
        cifar_loader_release(&ld, b);
        if (st != TGC_OK) {
            fprintf(stderr, "train tgc_call: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
            ok = 0;
            break;
        }
        if (steps == 0) {
            first_call_s = dt;
            tgc_stats s;
            if (tgc_fn_stats(step, &s) == TGC_OK)
                printf("first step: %.3f s (compile_seconds %.3f: trace, joint graph, code), "
                       "loss %.4f\n",
                       dt, s.compile_seconds, lv);
        } else {
            step_s_sum += dt;
        }
        steps++;
        period_steps++;
        period_loss += lv;
        if (!isfinite(lv)) {
            fprintf(stderr, "step %lld: loss is %g\n", steps, lv);
            ok = 0;
            break;
        }
        if (period_steps == o.report || last) {
            double el = now_s() - period_t0;
            printf("epoch %lld step %6lld  loss %.4f  %.0f images/s  step %.2f ms\n", epoch, steps,
                   period_loss / (double)period_steps, (double)(period_steps * o.batch) / el,
                   1e3 * el / (double)period_steps);
            fflush(stdout);
            period_steps = 0;
            period_loss = 0;
            period_t0 = now_s();
        }
        int stop = o.max_steps > 0 && steps >= o.max_steps;
        if (last || stop) {
            double te = now_s();
            if (!evaluate(eval, net, &test, &o, synthetic, epoch)) {
                ok = 0;
                break;
            }
            period_t0 += now_s() - te; /* the evaluation is not training time */
        }
        if (stop)
            break;
    }
    if (ok && cifar_loader_error(&ld)) {
        fprintf(stderr, "training data: %s\n", cifar_loader_error(&ld));
        ok = 0;
    }
    cifar_loader_stop(&ld);
    double run_s = now_s() - t_run;
    if (ok && steps > 0) {
        printf("trained %lld steps (%lld images) in %.1f s%s; first step %.3f s; mean later step "
               "%.2f ms; waited %.1f ms for data in all\n",
               steps, steps * o.batch, run_s, synthetic ? " on synthetic data" : "", first_call_s,
               steps > 1 ? 1e3 * step_s_sum / (double)(steps - 1) : 0.0, 1e3 * wait_s_sum);
        print_stats("train_step", step);
        print_stats("eval_step", eval);
    }
    if (ok && o.checkpoint) {
        char op[4096];
        optim_path(o.checkpoint, op, sizeof op);
        if (tgc_module_save(net, o.checkpoint) != TGC_OK || tgc_optim_save(g_opt, op) != TGC_OK) {
            fprintf(stderr, "checkpoint: %s\n", tgc_last_error());
            ok = 0;
        } else {
            printf("checkpoint: %s (module), %s (optimizer)\n", o.checkpoint, op);
        }
    }
    rc = ok ? 0 : 1;
free_fns:
    tgc_fn_free(step);
    tgc_fn_free(eval);
free_opt:
    tgc_optim_free(g_opt);
free_net:
    tgc_module_free(net);
free_data:
    cifar_free(&train);
    cifar_free(&test);
    tgc_shutdown();
    return rc;
}
