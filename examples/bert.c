/* BERT inference with libtgc: compiled vs eager, then a sweep of sequence lengths that shows
 * dynamic shapes at work.
 *
 * The model (a BERT encoder, Hugging Face's BertModel layout without the pooler) is in
 * models/bert.h. Part 1 runs one batch eagerly and through tgc_compile and prints the time
 * per call and how far apart the outputs are. Part 2 calls the compiled model on 15 sequence
 * lengths from 32 to 512:
 *   - with cfg.dynamic = TGC_DYNAMIC_AUTO, the first length compiles a static variant, the
 *     second recompiles with the sequence dim symbolic, and every later length hits it;
 *   - with cfg.dynamic = TGC_DYNAMIC_NEVER every length is a new variant until
 *     cache_size_limit (8); the library then warns once and runs later lengths eagerly.
 *
 *   ./build/examples/bert [--layers 12] [--hidden 768] [--heads 12] [--intermediate 3072]
 *                         [--vocab 30522] [--batch 1] [--seq 128] [--iters 3] [--warmup 0]
 *                         [--threads 0] [--backend auto|llvm|interp|eager] [--sdpa]
 *                         [--sweep-batch 1] [--sweep-layers 2] [--no-sweep]
 *                         [--device cpu|cuda] [--precision highest|high|medium]
 *                         [--mode default|reduce-overhead]
 *
 * The defaults are BERT-base. The sweep runs a model of the same width with --sweep-layers
 * encoder layers (default 2; 0 = all of --layers): depth does not change what the sweep
 * shows, only its cost. Small and quick: --layers 2 --hidden 128 --heads 2 --intermediate 512.
 * --threads 0 means all cores (cfg.num_threads). --device cuda moves the model to tgc_cuda(0)
 * with tgc_module_to and its inputs with tgc_to (backend auto then compiles with CUDA);
 * --precision sets cfg.matmul_precision (GPU: TF32 = high, bf16 = medium), --mode cfg.mode
 * (reduce-overhead: each call replays one CUDA graph). GPU timings wait for the output. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tgc/tgc.h>

#include "device_opts.h"
#include "models/bert.h"

typedef struct options {
    int layers, hidden, heads, intermediate, vocab;
    int batch, seq, iters, warmup, threads;
    int sweep_batch, sweep_layers, sweep, sdpa;
    tgc_backend_kind backend;
    tgc_device device;
    tgc_matmul_precision precision;
    tgc_mode mode;
} options;

/* --device: set once by main, read by the helpers below. */
static tgc_device example_device;

/* bert_make_inputs, then the inputs moved to --device. */
static tgc_status make_inputs(const bert_config *c, int64_t batch, int64_t seq, int64_t pad,
                              uint64_t seed, tgc_tensor **in)
{
    tgc_status st = bert_make_inputs(c, batch, seq, pad, seed, in);
    for (int k = 0; st == TGC_OK && k < 4; k++)
        if (!(in[k] = example_to(in[k], example_device)))
            st = tgc_last_status();
    return st;
}

#define N_SWEEP 15

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_backend(const char *s, tgc_backend_kind *out)
{
    static const struct {
        const char *name;
        tgc_backend_kind kind;
    } names[] = {{"auto", TGC_BACKEND_AUTO},
                 {"llvm", TGC_BACKEND_LLVM},
                 {"cuda", TGC_BACKEND_CUDA},
                 {"interp", TGC_BACKEND_INTERP},
                 {"eager", TGC_BACKEND_EAGER}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].kind;
            return 1;
        }
    return 0;
}

static void print_usage(FILE *fp, const char *prog)
{
    fprintf(fp,
            "usage: %s [--layers N] [--hidden N] [--heads N] [--intermediate N] [--vocab N]\n"
            "          [--batch N] [--seq N (<= 512)] [--iters N] [--warmup N]\n"
            "          [--threads N (0 = all cores)] [--backend auto|llvm|cuda|interp|eager]\n"
            "          [--sdpa] [--sweep-batch N] [--sweep-layers N (0 = --layers)] "
            "[--no-sweep]\n" EXAMPLE_DEVICE_USAGE
            "defaults: BERT-base (12 layers, hidden 768, 12 heads, intermediate 3072, vocab\n"
            "30522), batch 1, seq 128, iters 3; the sweep uses 2 layers of the same width.\n"
            "--device cuda: the model and inputs on tgc_cuda(0) (backend auto compiles for it);\n"
            "--precision: cfg.matmul_precision (GPU: highest = fp32, high = TF32, medium = bf16);\n"
            "--mode reduce-overhead: each compiled call replays one CUDA graph\n",
            prog);
}

/* 1: run; 0: bad arguments; -1: --help. */
static int parse_args(int argc, char **argv, options *o)
{
    static const char *const names[] = {"--layers", "--hidden",  "--heads",       "--intermediate",
                                        "--vocab",  "--batch",   "--seq",         "--iters",
                                        "--warmup", "--threads", "--sweep-batch", "--sweep-layers"};
    int *const dsts[] = {&o->layers, &o->hidden,  &o->heads,       &o->intermediate,
                         &o->vocab,  &o->batch,   &o->seq,         &o->iters,
                         &o->warmup, &o->threads, &o->sweep_batch, &o->sweep_layers};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        int matched = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && !matched; k++)
            if (strcmp(a, names[k]) == 0 && v) {
                *dsts[k] = atoi(v);
                matched = 1;
                i++;
            }
        if (matched)
            continue;
        int dev_opt = example_device_option(argc, argv, &i, &o->device, &o->precision, &o->mode);
        if (dev_opt < 0) {
            fprintf(stderr, "%s: bad value for '%s'\n", argv[0], a);
            return 0;
        }
        if (dev_opt > 0)
            continue;
        if (strcmp(a, "--sdpa") == 0) {
            o->sdpa = 1;
        } else if (strcmp(a, "--no-sweep") == 0) {
            o->sweep = 0;
        } else if (strcmp(a, "--backend") == 0 && v && parse_backend(v, &o->backend)) {
            i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], a);
            return 0;
        }
    }
    if (o->layers < 1 || o->hidden < 1 || o->heads < 1 || o->hidden % o->heads ||
        o->intermediate < 1 || o->vocab < 1 || o->batch < 1 || o->seq < 1 || o->seq > 512 ||
        o->iters < 1 || o->warmup < 0 || o->threads < 0 || o->sweep_batch < 1 ||
        o->sweep_layers < 0) {
        fprintf(stderr, "%s: bad sizes (heads must divide hidden, seq <= 512)\n", argv[0]);
        return 0;
    }
    return 1;
}

/* Library messages (recompiles, the dynamic channel, warnings) arrive here. */
static void print_log(unsigned channel, const char *msg, void *user)
{
    (void)user;
    printf("    [%s] %s\n", channel == 0 ? "warning" : "log", msg);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One call, compiled when f is set, else eager; the output is freed. Returns seconds or -1. */
static double timed_call(tgc_fn *f, tgc_module *m, tgc_tensor *const *in)
{
    tgc_scope_push();
    tgc_tensor *y = NULL;
    double t0 = now();
    tgc_status st = f ? tgc_call(f, m, in, 4, &y, 1) : bert_forward(m, in, 4, &y, 1);
    if (st == TGC_OK)
        example_sync(y); /* a GPU call returns before its kernels finish */
    double dt = now() - t0;
    tgc_scope_pop();
    if (st != TGC_OK) {
        fprintf(stderr, "%s: %s (%s)\n", f ? "tgc_call" : "bert_forward", tgc_last_error(),
                tgc_status_str(st));
        return -1;
    }
    return dt;
}

/* Median seconds of iters calls after warmup calls, or -1. */
static double median_calls(tgc_fn *f, tgc_module *m, tgc_tensor *const *in, int warmup, int iters)
{
    double *t = malloc((size_t)iters * sizeof(double)), median = -1;
    if (!t)
        return -1;
    int i = 0;
    for (; i < warmup + iters; i++) {
        double dt = timed_call(f, m, in);
        if (dt < 0)
            break;
        if (i >= warmup)
            t[i - warmup] = dt;
    }
    if (i == warmup + iters) {
        qsort(t, (size_t)iters, sizeof(double), cmp_double);
        median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    }
    free(t);
    return median;
}

/* Eager and compiled outputs for the same inputs; prints max |diff|. Returns 0 on error. */
static int check_against_eager(tgc_fn *f, tgc_module *m, tgc_tensor *const *in)
{
    tgc_scope_push();
    tgc_tensor *yc = NULL, *ye = NULL;
    tgc_status st = tgc_call(f, m, in, 4, &yc, 1);
    if (st == TGC_OK)
        st = bert_forward(m, in, 4, &ye, 1);
    tgc_tensor *d = tgc_max(tgc_abs(tgc_sub(yc, ye)), NULL, 0, 0);
    tgc_tensor *r = tgc_max(tgc_abs(ye), NULL, 0, 0);
    if (st == TGC_OK && d && r) {
        double diff = tgc_item_f64(d), ref = tgc_item_f64(r);
        printf("max |compiled - eager| = %.3g (max |eager| = %.3g, relative %.3g)\n", diff, ref,
               ref > 0 ? diff / ref : diff);
    } else {
        fprintf(stderr, "compare: %s\n", tgc_last_error());
    }
    tgc_scope_pop();
    return st == TGC_OK && d && r;
}

static void print_stats(const char *label, const tgc_fn *f)
{
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK) {
        fprintf(stderr, "tgc_fn_stats: %s\n", tgc_last_error());
        return;
    }
    printf("%s: %llu calls, %llu compiles (%llu recompiles), %llu cache hits, %llu eager "
           "calls, %d variants, cache limit hit: %s, compile time %.1f ms in all\n",
           label, (unsigned long long)s.calls, (unsigned long long)s.compiles,
           (unsigned long long)s.recompiles, (unsigned long long)s.cache_hits,
           (unsigned long long)s.eager_fallbacks, s.variants, s.cache_limit_hit ? "yes" : "no",
           1e3 * s.compile_seconds);
    if (s.last_recompile_reason[0])
        printf("    last recompile reason: %s\n", s.last_recompile_reason);
}

/* Part 1: one shape, compiled vs eager. */
static int run_compare(const options *o, const bert_config *bc, tgc_module *m,
                       const tgc_config *cfg)
{
    tgc_fn *f = tgc_compile(bert_forward, "bert_forward", cfg);
    if (!f) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        return 0;
    }
    int ok = 0;
    tgc_scope_push();
    tgc_tensor *in[4];
    tgc_status st = make_inputs(bc, o->batch, o->seq, o->seq / 4, 1, in);
    if (st != TGC_OK) {
        fprintf(stderr, "bert_make_inputs: %s\n", tgc_last_error());
        goto done;
    }
    printf("1. batch %d, seq %d (odd batch rows padded at the last %d positions)\n", o->batch,
           o->seq, o->seq / 4);
    double first = timed_call(f, m, in);
    if (first < 0)
        goto done;
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK)
        goto done;
    char *report = tgc_fn_explain(f), *eol = report ? strchr(report, '\n') : NULL;
    printf("first call %.1f ms (trace + compile %.1f ms, %d kernels); %.*s\n", 1e3 * first,
           1e3 * s.compile_seconds, s.kernels_last_variant, eol ? (int)(eol - report) : 0,
           report ? report : "");
    tgc_free(report);
    if (!check_against_eager(f, m, in))
        goto done;
    double tc = median_calls(f, m, in, o->warmup, o->iters);
    double te = tc < 0 ? -1 : median_calls(NULL, m, in, o->warmup, o->iters);
    if (te < 0)
        goto done;
    printf("per call (median of %d): compiled %.1f ms, eager %.1f ms, eager/compiled %.2fx\n\n",
           o->iters, 1e3 * tc, 1e3 * te, te / tc);
    ok = 1;
done:
    tgc_scope_pop();
    tgc_fn_free(f);
    return ok;
}

/* Part 2: the sequence-length sweep with one dynamic mode. */
static int run_sweep(const options *o, const bert_config *bc, tgc_module *m, tgc_config cfg,
                     tgc_dynamic dynamic, const char *name)
{
    cfg.dynamic = dynamic;
    cfg.log |= TGC_LOG_RECOMPILES | TGC_LOG_DYNAMIC;
    cfg.log_fn = print_log;
    tgc_fn *f = tgc_compile(bert_forward, name, &cfg);
    if (!f) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        return 0;
    }
    int ok = 1;
    printf("   seq   ms/call  compiles  eager calls\n");
    for (int i = 0; i < N_SWEEP && ok; i++) {
        /* 15 lengths evenly spread over [32, 512]: 32, 66, 101, ..., 478, 512 */
        int64_t seq = 32 + (480 * i + (N_SWEEP - 1) / 2) / (N_SWEEP - 1);
        tgc_scope_push();
        tgc_tensor *in[4];
        ok = make_inputs(bc, o->sweep_batch, seq, seq / 8, 100 + (uint64_t)i, in) == TGC_OK;
        double dt = ok ? timed_call(f, m, in) : -1;
        tgc_stats s;
        ok = dt >= 0 && tgc_fn_stats(f, &s) == TGC_OK;
        if (ok)
            printf("  %4lld  %8.1f  %8llu  %11llu\n", (long long)seq, 1e3 * dt,
                   (unsigned long long)s.compiles, (unsigned long long)s.eager_fallbacks);
        /* the values at the longest length, against eager */
        if (ok && i == N_SWEEP - 1) {
            printf("    at seq %lld: ", (long long)seq);
            ok = check_against_eager(f, m, in);
        }
        tgc_scope_pop();
    }
    if (ok)
        print_stats(name, f);
    if (ok && dynamic == TGC_DYNAMIC_AUTO) {
        char *report = tgc_fn_explain(f);
        printf("tgc_fn_explain:\n%s", report ? report : "(none)\n");
        tgc_free(report);
    }
    tgc_fn_free(f);
    return ok;
}

int main(int argc, char **argv)
{
    bert_config bc = bert_base_config();
    options o = {bc.layers,
                 bc.hidden,
                 bc.heads,
                 bc.intermediate,
                 bc.vocab,
                 1,
                 128,
                 3,
                 0,
                 0,
                 1,
                 2,
                 1,
                 0,
                 TGC_BACKEND_AUTO,
                 tgc_cpu(),
                 TGC_PRECISION_HIGHEST,
                 TGC_MODE_DEFAULT};
    int parsed = parse_args(argc, argv, &o);
    if (parsed <= 0) {
        print_usage(parsed < 0 ? stdout : stderr, argv[0]);
        return parsed < 0 ? 0 : 2;
    }
    bc.layers = o.layers;
    bc.hidden = o.hidden;
    bc.heads = o.heads;
    bc.intermediate = o.intermediate;
    bc.vocab = o.vocab;
    bc.use_sdpa = o.sdpa;
    example_device = o.device;
    char dev[32];

    printf("BERT encoder: %d layers, hidden %d, %d heads, intermediate %d, vocab %d, "
           "attention via %s; on %s, num_threads %d%s\n",
           bc.layers, bc.hidden, bc.heads, bc.intermediate, bc.vocab,
           bc.use_sdpa ? "tgc_scaled_dot_product_attention" : "matmul + softmax + matmul",
           example_device_name(o.device, dev, sizeof dev), o.threads,
           o.threads ? "" : " (all cores)");
    tgc_module *m = bert_create(&bc);
    if (!m || (o.device.type != TGC_DEVICE_CPU && tgc_module_to(m, o.device) != TGC_OK)) {
        fprintf(stderr, "bert_create / tgc_module_to: %s\n", tgc_last_error());
        bert_free(m);
        return 1;
    }
    tgc_config cfg = tgc_config_default(); /* defaults, then the TGC_* environment */
    cfg.backend = o.backend;
    cfg.num_threads = o.threads;
    cfg.matmul_precision = o.precision;
    cfg.mode = o.mode;
    tgc_no_grad_push(); /* inference: like torch.no_grad(), compiled variants guard on it */
    int ok = run_compare(&o, &bc, m, &cfg);

    if (ok && o.sweep) {
        /* The sweep model: same width, possibly fewer layers (see the top of this file). */
        bert_config sc = bc;
        if (o.sweep_layers > 0 && o.sweep_layers != bc.layers)
            sc.layers = o.sweep_layers;
        tgc_module *sm = sc.layers == bc.layers ? m : bert_create(&sc);
        if (sm && sm != m && o.device.type != TGC_DEVICE_CPU &&
            tgc_module_to(sm, o.device) != TGC_OK) {
            bert_free(sm);
            sm = NULL;
        }
        if (!sm) {
            fprintf(stderr, "bert_create: %s\n", tgc_last_error());
            ok = 0;
        } else {
            printf("2. sequence-length sweep, batch %d, %d layers (15 lengths, 32..512)\n",
                   o.sweep_batch, sc.layers);
            printf("2a. dynamic = AUTO: static first, then the sequence dim becomes symbolic\n");
            ok = run_sweep(&o, &sc, sm, cfg, TGC_DYNAMIC_AUTO, "bert_dynamic_auto");
            printf("\n2b. dynamic = NEVER: one variant per length until cache_size_limit "
                   "(%d), then eager\n",
                   cfg.cache_size_limit);
            ok = ok && run_sweep(&o, &sc, sm, cfg, TGC_DYNAMIC_NEVER, "bert_dynamic_never");
            if (sm != m)
                bert_free(sm);
        }
    }
    tgc_no_grad_pop();
    bert_free(m);
    tgc_shutdown();
    return ok ? 0 : 1;
}
