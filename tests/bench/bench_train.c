/* Training-step benchmark: the seed CNN and ResNet18 (torchvision layout, width 64), batch 64,
 * 3x32x32, Adam (lr 1e-3), one step = forward, cross entropy, backward, Adam, zero_grad:
 *   eager                  the step function called directly (every op eagerly)
 *   compiled default       tgc_compile, cfg.mode DEFAULT (one variant: forward, backward and
 *                          update fused and memory-planned together)
 *   compiled reduce-overhead  cfg.mode REDUCE_OVERHEAD (the variant replayed as one CUDA
 *                          graph; --device cuda only)
 * the cold compile of each model's training step (the first call's wall time minus the fastest
 * warm call, and tgc_stats compile_seconds), and one CIFAR-10 epoch of the seed CNN end to end
 * on the device (examples/data/cifar.h: files read, the prefetch thread normalizing and
 * copying batches, 781 compiled steps in the best mode, the first one's compile included;
 * a synthetic set in the CIFAR-10 format is written to --data when it has none).
 *
 *   bench_train [--device cpu|cuda] [--threads 2] [--iters 20] [--warmup 3] [--budget 20]
 *               [--only cnn,resnet18,epoch] [--precision highest|high|medium]
 *               [--data DIR] [--epoch-steps N] [--torch-ref FILE]... [--json out.json]
 *
 * Each step figure is the median of up to --iters timed steps after --warmup steps (stopping
 * after --budget seconds, at least one timed step); every step waits for its device
 * (tgc_cuda_synchronize) so a figure covers the work. Each mode trains its own model and
 * optimizer (a compiled step is traced with one optimizer). One line per measurement:
 *   seed_cnn_train_b64  cpu   compiled default     21.30 ms  eager/compiled 2.10x
 * --torch-ref reads PyTorch's figures from the same run and prints ratios (PyTorch's time /
 * libtgc's, > 1 means libtgc is faster), from any of:
 *   tests/bench/torch_cpu_ref.py --train --json F    (CPU: eager and torch.compile steps)
 *   torch_ref.py cnn|resnet OUTDIR                   (GPU: OUTDIR/cnn.json, resnet.json)
 *   torch_graph_ref.py OUTDIR                        (GPU: OUTDIR/graph.json, whole-step CUDA
 *                                                     graph with fused Adam: PyTorch's best)
 * Not a timed test: nothing here is run by ctest. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tgc/cuda.h"
#include "tgc/tgc.h"

#include "examples/data/cifar.h"
#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

#define MAX_REFS 8

typedef struct options {
    tgc_device dev;
    int threads, iters, warmup;
    double budget;
    const char *only, *json, *data;
    const char *refs[MAX_REFS];
    int n_refs;
    long long epoch_steps;
    tgc_matmul_precision precision;
} options;

typedef struct model_result {
    const char *name;       /* "seed_cnn_train_b64" */
    const char *torch_name; /* the GPU scripts' workload: "cnn_train_bs64" */
    double eager_ms, default_ms, ro_ms;
    double cold_ms, cold_first_ms, cold_stats_ms;
    int have;
} model_result;

typedef struct bench_state {
    options o;
    model_result m[2];
    double epoch_s, epoch_first_step_s, epoch_step_ms, epoch_images_s, epoch_wait_ms;
    long long epoch_steps_done;
    int epoch_synthetic, have_epoch;
    char backend[16];
} bench_state;

/* ---- the step ---- */
static tgc_optim *g_opt;
static tgc_model_fn g_fwd;

static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (n_in != 2 || n_out != 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL, *loss = NULL;
    tgc_status st = g_fwd(self, in, 1, &logits, 1);
    if (st == TGC_OK) {
        loss = tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, -100, 0.0);
        st = loss ? tgc_backward(loss) : tgc_last_status();
    }
    if (st == TGC_OK)
        st = tgc_optim_step(g_opt);
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(g_opt); /* as examples/train_cifar.c */
    out[0] = st == TGC_OK ? tgc_detach(loss) : NULL;
    return st;
}

static int sync_dev(tgc_device d)
{
    return d.type == TGC_DEVICE_CPU || tgc_cuda_synchronize(d.index) == TGC_OK;
}

static tgc_module *make_model(int resnet, tgc_device dev)
{
    tgc_module *net;
    if (resnet) {
        resnet18_config c = resnet18_default_config();
        net = resnet18_create(&c);
    } else {
        tgc_manual_seed(1234);
        net = seed_cnn_create();
    }
    if (!net) {
        fprintf(stderr, "model: %s\n", tgc_last_error());
        return NULL;
    }
    tgc_module_train(net, 1);
    if (dev.type != TGC_DEVICE_CPU && tgc_module_to(net, dev) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        tgc_module_free(net);
        return NULL;
    }
    return net;
}

typedef struct step_ctx {
    tgc_fn *f; /* NULL: eager */
    tgc_module *net;
    tgc_tensor *x[4], *y[4];
    tgc_device dev;
    int i;
} step_ctx;

static int one_step(void *p)
{
    step_ctx *c = p;
    tgc_scope_push();
    tgc_tensor *in[2] = {c->x[c->i % 4], c->y[c->i % 4]}, *loss = NULL;
    c->i++;
    tgc_status st =
        c->f ? tgc_call(c->f, c->net, in, 2, &loss, 1) : train_step(c->net, in, 2, &loss, 1);
    int ok = st == TGC_OK && sync_dev(c->dev);
    tgc_scope_pop();
    if (!ok)
        fprintf(stderr, "%s step: %s (%s)\n", c->f ? "compiled" : "eager", tgc_last_error(),
                tgc_status_str(st));
    return ok ? 0 : 1;
}

/* Median ms over the options' iterations; cold: *first_ms gets the first call (compile). */
static double time_mode(const options *o, step_ctx *c, double *first_ms, double *min_ms)
{
    double t0 = now();
    if (one_step(c) != 0)
        return -1;
    if (first_ms)
        *first_ms = 1e3 * (now() - t0);
    for (int i = 1; i < o->warmup; i++)
        if (one_step(c) != 0)
            return -1;
    double t[512];
    int n = 0, iters = o->iters < 512 ? o->iters : 512;
    double start = now();
    while (n < iters && (n == 0 || now() - start < o->budget)) {
        double s = now();
        if (one_step(c) != 0)
            return -1;
        t[n++] = 1e3 * (now() - s);
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    if (min_ms)
        *min_ms = t[0];
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static const char *dev_name(tgc_device d)
{
    return d.type == TGC_DEVICE_CPU ? "cpu" : "cuda";
}

/* One mode of one model: fresh model, optimizer and (compiled) function. */
static double bench_mode(bench_state *bs, int resnet, int compiled, tgc_mode mode, model_result *r)
{
    const options *o = &bs->o;
    tgc_module *net = make_model(resnet, o->dev);
    if (!net)
        return -1;
    g_fwd = resnet ? resnet18_forward : seed_cnn_forward;
    g_opt = tgc_adam(net, &(tgc_adam_opts){.lr = 1e-3});
    double ms = -1;
    step_ctx c = {NULL, net, {NULL}, {NULL}, o->dev, 0};
    tgc_scope_push();
    if (!g_opt) {
        fprintf(stderr, "tgc_adam: %s\n", tgc_last_error());
        goto done;
    }
    tgc_manual_seed(99);
    int64_t xs[4] = {64, 3, 32, 32}, ys[1] = {64};
    for (int k = 0; k < 4; k++) {
        tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
        tgc_tensor *u = tgc_mul_scalar(tgc_rand(ys, 1, TGC_F32, tgc_cpu()), 10.0);
        tgc_tensor *y = tgc_clamp(tgc_cast(u, TGC_I64), 0, 9);
        c.x[k] = o->dev.type == TGC_DEVICE_CPU ? x : tgc_to(x, o->dev);
        c.y[k] = o->dev.type == TGC_DEVICE_CPU ? y : tgc_to(y, o->dev);
        if (!c.x[k] || !c.y[k]) {
            fprintf(stderr, "inputs: %s\n", tgc_last_error());
            goto done;
        }
    }
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = o->threads;
    cfg.mode = mode;
    cfg.matmul_precision = o->precision;
    if (compiled) {
        c.f = tgc_compile(train_step, resnet ? "resnet18_train_step" : "seed_cnn_train_step", &cfg);
        if (!c.f) {
            fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
            goto done;
        }
    }
    double first = 0, min_ms = 0;
    ms = time_mode(o, &c, compiled ? &first : NULL, &min_ms);
    if (ms >= 0) {
        const char *label = !compiled                          ? "eager"
                            : mode == TGC_MODE_REDUCE_OVERHEAD ? "compiled reduce-overhead"
                                                               : "compiled default";
        printf("%-20s %-4s  %-26s %9.3f ms", r->name, dev_name(o->dev), label, ms);
        if (compiled && r->eager_ms > 0)
            printf("  eager/compiled %5.2fx", r->eager_ms / ms);
        else if (!compiled && r->default_ms > 0)
            printf("  eager/compiled default %5.2fx", ms / r->default_ms);
        printf("\n");
    }
    if (ms >= 0 && compiled) {
        tgc_stats s;
        if (tgc_fn_stats(c.f, &s) == TGC_OK) {
            snprintf(bs->backend, sizeof bs->backend, "%s", s.backend);
            if (mode == TGC_MODE_DEFAULT) {
                r->cold_first_ms = first;
                r->cold_ms = first - min_ms;
                r->cold_stats_ms = 1e3 * s.compile_seconds;
                printf("%-20s %-4s  %-26s %9.1f ms  (first call %.1f ms - fastest warm call "
                       "%.2f ms; compile_seconds %.1f ms; %d kernels; %llu compiles)\n",
                       r->name, dev_name(o->dev), "cold compile", r->cold_ms, first, min_ms,
                       r->cold_stats_ms, s.kernels_last_variant, (unsigned long long)s.compiles);
            }
            if (s.compiles != 1 || s.eager_fallbacks != 0)
                printf("%-20s note: %llu compiles, %llu eager calls (%s)\n", r->name,
                       (unsigned long long)s.compiles, (unsigned long long)s.eager_fallbacks,
                       s.last_recompile_reason);
        }
    }
    fflush(stdout);
done:
    tgc_scope_pop();
    tgc_fn_free(c.f);
    tgc_optim_free(g_opt);
    g_opt = NULL;
    tgc_module_free(net);
    return ms;
}

/* ---- one epoch end to end ---- */
static int bench_epoch(bench_state *bs)
{
    const options *o = &bs->o;
    double t_start = now();
    int synthetic = 0;
    cifar_set train = {0};
    if (!cifar_open_dir(o->data, 50000, 10000, &synthetic) || !cifar_load(o->data, 1, &train))
        return 0;
    tgc_module *net = make_model(0, o->dev);
    if (!net) {
        cifar_free(&train);
        return 0;
    }
    g_fwd = seed_cnn_forward;
    g_opt = tgc_adam(net, &(tgc_adam_opts){.lr = 1e-3});
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = o->threads;
    cfg.matmul_precision = o->precision;
    cfg.mode = o->dev.type == TGC_DEVICE_CPU ? TGC_MODE_DEFAULT : TGC_MODE_REDUCE_OVERHEAD;
    tgc_fn *f = g_opt ? tgc_compile(train_step, "seed_cnn_epoch_step", &cfg) : NULL;
    cifar_loader ld;
    int ok = f && cifar_loader_start(&ld, &train, 64, 1, o->dev, 1, 1);
    if (!ok) {
        fprintf(stderr, "epoch setup: %s\n", tgc_last_error());
        tgc_fn_free(f);
        tgc_optim_free(g_opt);
        tgc_module_free(net);
        cifar_free(&train);
        return 0;
    }
    long long steps = 0;
    double first = 0, wait = 0, t_loop = now(), last_loss = 0;
    cifar_batch *b;
    for (;;) {
        double tw = now();
        b = cifar_loader_next(&ld);
        wait += now() - tw;
        if (!b)
            break;
        tgc_scope_push();
        tgc_tensor *in[2] = {b->x, b->y}, *loss = NULL;
        double t0 = now();
        tgc_status st = tgc_call(f, net, in, 2, &loss, 1);
        int final = b->last || (o->epoch_steps > 0 && steps + 1 >= o->epoch_steps);
        if (st == TGC_OK && ((steps + 1) % 100 == 0 || final))
            last_loss = tgc_item_f64(loss);
        ok = st == TGC_OK && sync_dev(o->dev); /* before the batch goes back to the loader */
        tgc_scope_pop();
        cifar_loader_release(&ld, b);
        if (!ok) {
            fprintf(stderr, "epoch step %lld: %s (%s)\n", steps, tgc_last_error(),
                    tgc_status_str(st));
            break;
        }
        if (steps == 0)
            first = now() - t0;
        steps++;
        if (o->epoch_steps > 0 && steps >= o->epoch_steps)
            break;
    }
    if (ok && cifar_loader_error(&ld)) {
        fprintf(stderr, "epoch data: %s\n", cifar_loader_error(&ld));
        ok = 0;
    }
    cifar_loader_stop(&ld);
    double loop_s = now() - t_loop, total_s = now() - t_start;
    if (ok && steps > 0) {
        bs->have_epoch = 1;
        bs->epoch_s = total_s;
        bs->epoch_first_step_s = first;
        bs->epoch_steps_done = steps;
        bs->epoch_step_ms = steps > 1 ? 1e3 * (loop_s - first) / (double)(steps - 1) : 0;
        bs->epoch_images_s = (double)(steps * 64) / loop_s;
        bs->epoch_wait_ms = 1e3 * wait;
        bs->epoch_synthetic = synthetic;
        printf("%-20s %-4s  %-26s %9.2f s   (%lld steps%s, %s mode; files read + loop; first "
               "step %.3f s incl. compile; later steps %.3f ms; %.0f images/s; waited %.1f ms "
               "for data; loss %.3f at step %lld)\n",
               "seed_cnn_epoch_b64", dev_name(o->dev),
               synthetic ? "one epoch (synthetic)" : "one epoch (CIFAR-10)", total_s, steps,
               o->epoch_steps > 0 ? ", cut by --epoch-steps" : "",
               cfg.mode == TGC_MODE_DEFAULT ? "default" : "reduce-overhead", first,
               bs->epoch_step_ms, bs->epoch_images_s, bs->epoch_wait_ms, last_loss, steps);
    }
    fflush(stdout);
    tgc_fn_free(f);
    tgc_optim_free(g_opt);
    g_opt = NULL;
    tgc_module_free(net);
    cifar_free(&train);
    return ok;
}

/* ---- PyTorch references (a tolerant scan of the scripts' JSON, no JSON library) ---- */
static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(fp);
    return s;
}

/* The number after "key": within [p, end); NAN when absent. */
static double num_field(const char *p, const char *end, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    for (const char *q = strstr(p, pat); q && q < end; q = strstr(q + 1, pat)) {
        char *stop;
        double v = strtod(q + strlen(pat), &stop);
        if (stop != q + strlen(pat))
            return v;
    }
    return NAN;
}

/* 1 when "key": true|false within [p, end) equals want. */
static int bool_field(const char *p, const char *end, const char *key, int want)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": %s", key, want ? "true" : "false");
    const char *q = strstr(p, pat);
    return q && q < end;
}

static int str_field(const char *p, const char *end, const char *key, const char *value)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": \"%s\"", key, value);
    const char *q = strstr(p, pat);
    return q && q < end;
}

typedef struct torch_figs {
    double eager, compiled, ro, graph, graph_cl, first_call_ms;
} torch_figs;

static double fmin_nan(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : fmin(a, b);
}

/* Collects r's PyTorch figures from every --torch-ref file. */
static torch_figs torch_lookup(const bench_state *bs, const model_result *r)
{
    torch_figs t = {NAN, NAN, NAN, NAN, NAN, NAN};
    int tf32 = bs->o.precision != TGC_PRECISION_HIGHEST;
    for (int i = 0; i < bs->o.n_refs; i++) {
        char *s = read_text(bs->o.refs[i]);
        if (!s) {
            fprintf(stderr, "--torch-ref %s: cannot read\n", bs->o.refs[i]);
            continue;
        }
        /* torch_cpu_ref.py: "results": {"<name>": {...}} */
        char key[96];
        snprintf(key, sizeof key, "\"%s\": {", r->name);
        const char *p = strstr(s, key);
        if (p) {
            const char *end = strchr(p, '}');
            t.eager = num_field(p, end, "eager_ms");
            t.compiled = num_field(p, end, "compiled_ms");
            t.first_call_ms = num_field(p, end, "compile_first_call_ms");
        }
        /* the GPU scripts: lists of flat records with "workload" */
        for (const char *q = strchr(s, '{'); q; q = strchr(q + 1, '{')) {
            const char *end = strchr(q, '}');
            if (!end)
                break;
            if (!str_field(q, end, "workload", r->torch_name))
                continue;
            double med = num_field(q, end, "step_ms_median");
            if (str_field(q, end, "mode", "eager"))
                t.eager = med;
            else if (str_field(q, end, "mode", "default"))
                t.compiled = med, t.first_call_ms = 1e3 * num_field(q, end, "warmup_s");
            else if (str_field(q, end, "mode", "reduce-overhead"))
                t.ro = med;
            double g = num_field(q, end, "cudagraph_whole_step_ms");
            /* the same precision only: a bf16 autocast record ("amp": "bf16") is not TF32's */
            const char *amp = strstr(q, "\"amp\": \"");
            if (!isnan(g) && bool_field(q, end, "tf32", tf32) && !(amp && amp < end)) {
                if (bool_field(q, end, "channels_last", 1))
                    t.graph_cl = g;
                else
                    t.graph = g;
            }
        }
        free(s);
    }
    return t;
}

static void print_ratios(const bench_state *bs)
{
    if (bs->o.n_refs == 0)
        return;
    for (int k = 0; k < 2; k++) {
        const model_result *r = &bs->m[k];
        if (!r->have)
            continue;
        torch_figs t = torch_lookup(bs, r);
        double best_tgc =
            fmin_nan(r->default_ms > 0 ? r->default_ms : NAN, r->ro_ms > 0 ? r->ro_ms : NAN);
        double best_torch =
            fmin_nan(fmin_nan(fmin_nan(t.eager, t.compiled), t.ro), fmin_nan(t.graph, t.graph_cl));
        printf("%-20s vs torch: eager %.3f, torch.compile %.3f, reduce-overhead %.3f, "
               "whole-step CUDA graph %.3f (channels-last %.3f) ms\n",
               r->name, t.eager, t.compiled, t.ro, t.graph, t.graph_cl);
        if (!isnan(best_torch) && !isnan(best_tgc))
            printf("%-20s ratio torch best / tgc best = %.2fx (target >= 1.5x)\n", r->name,
                   best_torch / best_tgc);
        if (!isnan(t.compiled) && r->default_ms > 0)
            printf("%-20s ratio torch.compile default / tgc default = %.2fx (target > 1x)\n",
                   r->name, t.compiled / r->default_ms);
        if (!isnan(t.eager) && r->default_ms > 0)
            printf("%-20s ratio torch eager / tgc default = %.2fx; torch eager / tgc eager = "
                   "%.2fx\n",
                   r->name, t.eager / r->default_ms, r->eager_ms > 0 ? t.eager / r->eager_ms : NAN);
        if (!isnan(t.first_call_ms) && r->cold_ms > 0)
            printf("%-20s cold compile: torch.compile first call %.1f s, tgc %.3f s (%.0fx)\n",
                   r->name, t.first_call_ms / 1e3, r->cold_ms / 1e3, t.first_call_ms / r->cold_ms);
    }
}

static int write_json(const bench_state *bs)
{
    FILE *fp = fopen(bs->o.json, "w");
    if (!fp) {
        perror(bs->o.json);
        return 0;
    }
    fprintf(fp,
            "{\n  \"tool\": \"libtgc\",\n  \"bench\": \"train\",\n  \"device\": \"%s\",\n"
            "  \"backend\": \"%s\",\n  \"threads\": %d,\n  \"precision\": %d,\n"
            "  \"results\": {",
            dev_name(bs->o.dev), bs->backend, bs->o.threads, (int)bs->o.precision);
    int first = 1;
    for (int k = 0; k < 2; k++) {
        const model_result *r = &bs->m[k];
        if (!r->have)
            continue;
        fprintf(fp,
                "%s\n    \"%s\": {\"eager_ms\": %.4f, \"compiled_ms\": %.4f, "
                "\"reduce_overhead_ms\": %.4f, \"cold_compile_ms\": %.3f, "
                "\"first_call_ms\": %.3f, \"stats_compile_ms\": %.3f}",
                first ? "" : ",", r->name, r->eager_ms, r->default_ms, r->ro_ms, r->cold_ms,
                r->cold_first_ms, r->cold_stats_ms);
        first = 0;
    }
    fprintf(fp, "\n  }");
    if (bs->have_epoch)
        fprintf(fp,
                ",\n  \"seed_cnn_epoch_b64\": {\"seconds\": %.3f, \"steps\": %lld, "
                "\"first_step_s\": %.4f, \"step_ms\": %.4f, \"images_per_s\": %.1f, "
                "\"data_wait_ms\": %.2f, \"synthetic\": %s}",
                bs->epoch_s, bs->epoch_steps_done, bs->epoch_first_step_s, bs->epoch_step_ms,
                bs->epoch_images_s, bs->epoch_wait_ms, bs->epoch_synthetic ? "true" : "false");
    fprintf(fp, "\n}\n");
    return fclose(fp) == 0;
}

static int wanted(const options *o, const char *key)
{
    if (!o->only)
        return 1;
    size_t n = strlen(key);
    for (const char *p = o->only; (p = strstr(p, key)) != NULL; p += n)
        if ((p == o->only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            goto usage;
        if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cpu") == 0)
                o->dev = tgc_cpu();
            else if (strncmp(v, "cuda", 4) == 0)
                o->dev = tgc_cuda(v[4] == ':' ? atoi(v + 5) : 0);
            else
                goto usage;
        } else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--iters") == 0)
            o->iters = atoi(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atoi(v);
        else if (strcmp(a, "--budget") == 0)
            o->budget = atof(v);
        else if (strcmp(a, "--only") == 0)
            o->only = v;
        else if (strcmp(a, "--json") == 0)
            o->json = v;
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--epoch-steps") == 0)
            o->epoch_steps = atoll(v);
        else if (strcmp(a, "--torch-ref") == 0 && o->n_refs < MAX_REFS)
            o->refs[o->n_refs++] = v;
        else if (strcmp(a, "--precision") == 0) {
            if (strcmp(v, "highest") == 0)
                o->precision = TGC_PRECISION_HIGHEST;
            else if (strcmp(v, "high") == 0)
                o->precision = TGC_PRECISION_HIGH;
            else if (strcmp(v, "medium") == 0)
                o->precision = TGC_PRECISION_MEDIUM;
            else
                goto usage;
        } else
            goto usage;
    }
    if (o->threads >= 0 && o->iters >= 1 && o->warmup >= 1 && o->budget > 0 && o->epoch_steps >= 0)
        return 1;
usage:
    fprintf(stderr,
            "usage: %s [--device cpu|cuda] [--threads N] [--iters N] [--warmup N >= 1] "
            "[--budget S] [--only cnn,resnet18,epoch] [--precision highest|high|medium] "
            "[--data DIR] [--epoch-steps N] [--torch-ref FILE]... [--json out.json]\n",
            argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    static bench_state bs;
    bs.o = (options){tgc_cpu(), 2,    20,   3,
                     20.0,      NULL, NULL, "/tmp/tgc_cifar10_synthetic",
                     {NULL},    0,    0,    TGC_PRECISION_HIGHEST};
    bs.m[0] = (model_result){"seed_cnn_train_b64", "cnn_train_bs64", -1, -1, -1, -1, -1, -1, 0};
    bs.m[1] = (model_result){"resnet18_train_b64", "resnet_train_bs64", -1, -1, -1, -1, -1, -1, 0};
    snprintf(bs.backend, sizeof bs.backend, "?");
    if (!parse_args(argc, argv, &bs.o))
        return 2;
    int gpu = bs.o.dev.type != TGC_DEVICE_CPU;
    if (gpu && tgc_cuda_check() != TGC_OK) {
        fprintf(stderr, "bench_train: --device cuda: %s\n", tgc_last_error());
        return 1;
    }
    printf("bench_train: training step (forward, cross entropy, backward, Adam, zero_grad), "
           "batch 64, 3x32x32, on %s, cfg.num_threads %d, precision %s; median of up to %d "
           "steps after %d warmup\n",
           dev_name(bs.o.dev), bs.o.threads,
           bs.o.precision == TGC_PRECISION_HIGHEST ? "highest (fp32)"
           : bs.o.precision == TGC_PRECISION_HIGH  ? "high (TF32)"
                                                   : "medium (bf16)",
           bs.o.iters, bs.o.warmup);
    fflush(stdout);
    int ok = 1;
    /* ResNet18 first, so that its cold compile is the process's first */
    for (int k = 1; ok && k >= 0; k--) {
        model_result *r = &bs.m[k];
        if (!wanted(&bs.o, k ? "resnet18" : "cnn"))
            continue;
        r->default_ms = bench_mode(&bs, k, 1, TGC_MODE_DEFAULT, r);
        r->eager_ms = r->default_ms < 0 ? -1 : bench_mode(&bs, k, 0, TGC_MODE_DEFAULT, r);
        ok = r->eager_ms >= 0;
        if (ok && gpu) {
            r->ro_ms = bench_mode(&bs, k, 1, TGC_MODE_REDUCE_OVERHEAD, r);
            ok = r->ro_ms >= 0;
        }
        r->have = ok;
    }
    if (ok && wanted(&bs.o, "epoch"))
        ok = bench_epoch(&bs);
    printf("backend: %s\n", bs.backend);
    print_ratios(&bs);
    if (ok && bs.o.json)
        ok = write_json(&bs);
    tgc_shutdown();
    return ok ? 0 : 1;
}
