/* Whole models, libtgc compiled vs libtgc eager (inference, no grad):
 *   resnet18_b64      torchvision ResNet18, 64 x 3 x 32 x 32 (examples/models/resnet18.h)
 *   bert_base_b8_s128 BERT-base encoder, batch 8, seq 128    (examples/models/bert.h)
 *   seed_cnn_b64      the seed's CNN, 64 x 3 x 32 x 32        (examples/models/seed_cnn.h)
 *   attention_*       causal attention over q, k, v [4, 8, 512, 64], three ways:
 *                     tgc_scaled_dot_product_attention(causal = 1), the same with causal = 0
 *                     and a boolean lower-triangular mask, and written out as
 *                     softmax(q k^T * scale + mask) v with an additive (0 / -inf) mask; then
 *                     the ratios of the first two to the written-out form
 * and the cold compile time of ResNet18 inference: the first tgc_call's wall time (trace,
 * compile, run) minus one warm call (the fastest one timed). ResNet18 runs first so that nothing
 * before it has warmed the compiler.
 *
 *   bench_models [--threads 2] [--iters 5] [--warmup 3] [--budget 10] [--backend auto]
 *                [--only resnet18,bert,seed_cnn,attention] [--bert-layers 12] [--json out.json]
 *
 * Each figure is the median of --iters timed calls after --warmup calls; a measurement stops
 * early, after at least one timed call, once it has spent --budget seconds (the slow interp
 * backend would otherwise take minutes on BERT-base). cfg.num_threads = --threads; eager
 * calls run the library's eager kernels, which take no config. One line per measurement:
 *   resnet18_b64  compiled 41.2 ms  eager 95.0 ms  eager/compiled 2.31x
 * Not a timed test: nothing here is run by ctest. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tgc/tgc.h"

#include "examples/models/bert.h"
#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

typedef struct options {
    int threads, iters, warmup, bert_layers;
    double budget;
    const char *only, *json;
    tgc_backend_kind backend;
} options;

typedef struct result {
    char name[32];
    double compiled_ms, eager_ms, compiled_min_ms;
    int compiled_iters, eager_iters;
} result;

#define MAX_RESULTS 8

typedef struct run_state {
    options opt;
    char backend[32];
    result results[MAX_RESULTS];
    int n_results;
    double cold_first_ms, cold_warm_ms, cold_compile_ms, cold_stats_ms;
    int have_cold;
} run_state;

/* One call of a model, compiled (f) or eager (fn); its outputs are freed. Seconds, or -1. */
static double one_call(tgc_fn *f, tgc_model_fn fn, tgc_module *m, tgc_tensor *const *in, int n_in)
{
    tgc_scope_push();
    tgc_tensor *y = NULL;
    double t0 = now();
    tgc_status st = f ? tgc_call(f, m, in, n_in, &y, 1) : fn(m, in, n_in, &y, 1);
    double dt = now() - t0;
    tgc_scope_pop();
    if (st != TGC_OK) {
        fprintf(stderr, "%s: %s (%s)\n", f ? "tgc_call" : "eager call", tgc_last_error(),
                tgc_status_str(st));
        return -1;
    }
    return dt;
}

/* Median ms of up to opt->iters timed calls after the warmup calls, within the budget; the
 * fastest call's ms in *min_ms. */
static double measure(const options *opt, tgc_fn *f, tgc_model_fn fn, tgc_module *m,
                      tgc_tensor *const *in, int n_in, int warmup, int *iters_done, double *min_ms)
{
    double *t = malloc((size_t)opt->iters * sizeof(double)), start = now();
    int n = 0;
    if (!t)
        return -1;
    for (int i = 0; i < warmup && now() - start < opt->budget; i++)
        if (one_call(f, fn, m, in, n_in) < 0)
            goto fail;
    start = now();
    while (n < opt->iters && (n == 0 || now() - start < opt->budget)) {
        double dt = one_call(f, fn, m, in, n_in);
        if (dt < 0)
            goto fail;
        t[n++] = dt;
    }
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    double median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    *min_ms = 1e3 * t[0];
    free(t);
    *iters_done = n;
    return 1e3 * median;
fail:
    free(t);
    return -1;
}

/* The backend of the function's most recently used variant. */
static void backend_name(const tgc_fn *f, char *buf, size_t size)
{
    tgc_stats s;
    if (tgc_fn_stats(f, &s) == TGC_OK)
        snprintf(buf, size, "%s", s.backend);
}

/* Compiled (with a fresh tgc_fn, whose first call is timed) and eager figures for one
 * workload; cold: also report the cold compile time. Returns 0 on error. */
static int bench_workload(run_state *rs, const char *name, tgc_model_fn fn, tgc_module *m,
                          tgc_tensor *const *in, int n_in, int cold)
{
    const options *o = &rs->opt;
    tgc_config cfg = tgc_config_default();
    cfg.backend = o->backend;
    cfg.num_threads = o->threads;
    tgc_fn *f = tgc_compile(fn, name, &cfg);
    if (!f) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        return 0;
    }
    result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    double eager_min = 0;
    double first = one_call(f, fn, m, in, n_in); /* trace + compile + run */
    int ok = first >= 0;
    if (ok) {
        backend_name(f, rs->backend, sizeof rs->backend);
        /* the first call was one warmup call already */
        r.compiled_ms =
            measure(o, f, fn, m, in, n_in, o->warmup - 1, &r.compiled_iters, &r.compiled_min_ms);
        r.eager_ms = r.compiled_ms < 0
                         ? -1
                         : measure(o, NULL, fn, m, in, n_in, o->warmup, &r.eager_iters, &eager_min);
        ok = r.eager_ms >= 0;
    }
    if (ok) {
        printf("%-18s compiled %8.1f ms  eager %8.1f ms  eager/compiled %5.2fx  "
               "(median of %d / %d)\n",
               name, r.compiled_ms, r.eager_ms, r.eager_ms / r.compiled_ms, r.compiled_iters,
               r.eager_iters);
        if (rs->n_results < MAX_RESULTS)
            rs->results[rs->n_results++] = r;
    }
    if (ok && cold) {
        tgc_stats s;
        ok = tgc_fn_stats(f, &s) == TGC_OK;
        rs->have_cold = ok;
        rs->cold_first_ms = 1e3 * first;
        rs->cold_warm_ms = r.compiled_min_ms; /* the fastest warm call: noise only adds */
        rs->cold_compile_ms = 1e3 * first - r.compiled_min_ms;
        rs->cold_stats_ms = 1e3 * s.compile_seconds;
        printf("%-18s cold compile %8.1f ms  (first call %.1f ms - fastest warm call %.1f ms; "
               "tgc_stats compile_seconds %.1f ms)\n",
               name, rs->cold_compile_ms, rs->cold_first_ms, rs->cold_warm_ms, rs->cold_stats_ms);
    }
    fflush(stdout);
    tgc_fn_free(f);
    return ok;
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

static int bench_resnet18(run_state *rs)
{
    resnet18_config c = resnet18_default_config();
    tgc_module *m = resnet18_create(&c);
    if (!m) {
        fprintf(stderr, "resnet18_create: %s\n", tgc_last_error());
        return 0;
    }
    tgc_scope_push();
    int64_t xs[4] = {64, 3, 32, 32};
    tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
    int ok = x && bench_workload(rs, "resnet18_b64", resnet18_forward, m, &x, 1, 1);
    tgc_scope_pop();
    tgc_module_free(m);
    return ok;
}

static int bench_bert(run_state *rs)
{
    bert_config c = bert_base_config();
    c.layers = rs->opt.bert_layers;
    tgc_module *m = bert_create(&c);
    if (!m) {
        fprintf(stderr, "bert_create: %s\n", tgc_last_error());
        return 0;
    }
    char name[32];
    if (c.layers == 12)
        snprintf(name, sizeof name, "bert_base_b8_s128");
    else
        snprintf(name, sizeof name, "bert_base_l%d_b8_s128", c.layers);
    tgc_scope_push();
    tgc_tensor *in[4];
    int ok = bert_make_inputs(&c, 8, 128, 16, 1, in) == TGC_OK &&
             bench_workload(rs, name, bert_forward, m, in, 4, 0);
    tgc_scope_pop();
    bert_free(m);
    return ok;
}

static int bench_seed_cnn(run_state *rs)
{
    tgc_manual_seed(1234);
    tgc_module *m = seed_cnn_create();
    if (!m) {
        fprintf(stderr, "seed_cnn_create: %s\n", tgc_last_error());
        return 0;
    }
    tgc_module_train(m, 0);
    tgc_scope_push();
    int64_t xs[4] = {64, 3, 32, 32};
    tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
    int ok = x && bench_workload(rs, "seed_cnn_b64", seed_cnn_forward, m, &x, 1, 0);
    tgc_scope_pop();
    tgc_module_free(m);
    return ok;
}

#define ATTN_B 4
#define ATTN_H 8
#define ATTN_L 512
#define ATTN_E 64

static tgc_status attn_causal(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, 1, 0.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status attn_bool_mask(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, 0, 0.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status attn_written_out(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                   int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *s = tgc_mul_scalar(tgc_matmul(in[0], tgc_transpose(in[1], 2, 3)), 0.125);
    out[0] = tgc_matmul(tgc_softmax(tgc_add(s, in[3]), 3), in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* The three attention workloads; the ratios compare them within this run. */
static int bench_attention(run_state *rs)
{
    static float addmask[ATTN_L * ATTN_L];
    static unsigned char boolmask[ATTN_L * ATTN_L];
    for (int i = 0; i < ATTN_L; i++)
        for (int j = 0; j < ATTN_L; j++) {
            boolmask[i * ATTN_L + j] = j <= i;
            addmask[i * ATTN_L + j] = j <= i ? 0.0f : -INFINITY;
        }
    tgc_manual_seed(1234);
    tgc_scope_push();
    const int64_t qs[4] = {ATTN_B, ATTN_H, ATTN_L, ATTN_E}, ms[2] = {ATTN_L, ATTN_L};
    tgc_tensor *in[5] = {tgc_randn(qs, 4, TGC_F32, tgc_cpu()), tgc_randn(qs, 4, TGC_F32, tgc_cpu()),
                         tgc_randn(qs, 4, TGC_F32, tgc_cpu()),
                         tgc_from_data(boolmask, sizeof boolmask, ms, 2, TGC_BOOL, tgc_cpu()),
                         tgc_from_data(addmask, sizeof addmask, ms, 2, TGC_F32, tgc_cpu())};
    int ok = in[0] && in[1] && in[2] && in[3] && in[4];
    int first = rs->n_results;
    tgc_tensor *add_in[4] = {in[0], in[1], in[2], in[4]};
    ok = ok && bench_workload(rs, "attention_causal", attn_causal, NULL, in, 3, 0);
    ok = ok && bench_workload(rs, "attention_boolmask", attn_bool_mask, NULL, in, 4, 0);
    ok = ok && bench_workload(rs, "attention_matmul", attn_written_out, NULL, add_in, 4, 0);
    tgc_scope_pop();
    if (ok && rs->n_results == first + 3) {
        const result *c = &rs->results[first], *b = c + 1, *w = c + 2;
        printf("attention [%d, %d, %d, %d]  causal / matmul+softmax: compiled %.2fx eager %.2fx"
               "  boolmask / matmul+softmax: compiled %.2fx eager %.2fx\n",
               ATTN_B, ATTN_H, ATTN_L, ATTN_E, c->compiled_ms / w->compiled_ms,
               c->eager_ms / w->eager_ms, b->compiled_ms / w->compiled_ms,
               b->eager_ms / w->eager_ms);
    }
    return ok;
}

static int write_json(const run_state *rs)
{
    FILE *fp = fopen(rs->opt.json, "w");
    if (!fp) {
        perror(rs->opt.json);
        return 0;
    }
    fprintf(fp, "{\n  \"tool\": \"libtgc\",\n  \"backend\": \"%s\",\n  \"threads\": %d,\n",
            rs->backend, rs->opt.threads);
    fprintf(fp, "  \"results\": {");
    for (int i = 0; i < rs->n_results; i++) {
        const result *r = &rs->results[i];
        fprintf(fp,
                "%s\n    \"%s\": {\"compiled_ms\": %.4f, \"eager_ms\": %.4f, "
                "\"compiled_iters\": %d, \"eager_iters\": %d}",
                i ? "," : "", r->name, r->compiled_ms, r->eager_ms, r->compiled_iters,
                r->eager_iters);
    }
    fprintf(fp, "\n  }");
    if (rs->have_cold)
        fprintf(fp,
                ",\n  \"resnet18_b64_cold\": {\"first_call_ms\": %.4f, \"warm_call_ms\": %.4f, "
                "\"compile_ms\": %.4f, \"stats_compile_ms\": %.4f}",
                rs->cold_first_ms, rs->cold_warm_ms, rs->cold_compile_ms, rs->cold_stats_ms);
    fprintf(fp, "\n}\n");
    return fclose(fp) == 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i += 2) { /* every option takes one value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            goto usage;
        if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--iters") == 0)
            o->iters = atoi(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atoi(v);
        else if (strcmp(a, "--budget") == 0)
            o->budget = atof(v);
        else if (strcmp(a, "--bert-layers") == 0)
            o->bert_layers = atoi(v);
        else if (strcmp(a, "--only") == 0)
            o->only = v;
        else if (strcmp(a, "--json") == 0)
            o->json = v;
        else if (strcmp(a, "--backend") == 0 && strcmp(v, "auto") == 0)
            o->backend = TGC_BACKEND_AUTO;
        else if (strcmp(a, "--backend") == 0 && strcmp(v, "llvm") == 0)
            o->backend = TGC_BACKEND_LLVM;
        else if (strcmp(a, "--backend") == 0 && strcmp(v, "interp") == 0)
            o->backend = TGC_BACKEND_INTERP;
        else
            goto usage;
    }
    if (o->threads >= 0 && o->iters >= 1 && o->warmup >= 1 && o->budget > 0 && o->bert_layers >= 1)
        return 1;
usage:
    fprintf(stderr,
            "usage: %s [--threads N (0 = all cores)] [--iters N] [--warmup N >= 1] "
            "[--budget SECONDS] [--backend auto|llvm|interp] "
            "[--only resnet18,bert,seed_cnn,attention] "
            "[--bert-layers N] [--json out.json]\n",
            argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    static run_state rs;
    rs.opt = (options){2, 5, 3, 12, 10.0, NULL, NULL, TGC_BACKEND_AUTO};
    snprintf(rs.backend, sizeof rs.backend, "?");
    if (!parse_args(argc, argv, &rs.opt))
        return 2;
    printf("bench_models: inference, no grad, cfg.num_threads %d, median of up to %d calls "
           "after %d warmup (budget %.0f s per measurement)\n",
           rs.opt.threads, rs.opt.iters, rs.opt.warmup, rs.opt.budget);
    fflush(stdout);
    tgc_no_grad_push();
    int ok = 1;
    if (ok && wanted(&rs.opt, "resnet18"))
        ok = bench_resnet18(&rs);
    if (ok && wanted(&rs.opt, "bert"))
        ok = bench_bert(&rs);
    if (ok && wanted(&rs.opt, "seed_cnn"))
        ok = bench_seed_cnn(&rs);
    if (ok && wanted(&rs.opt, "attention"))
        ok = bench_attention(&rs);
    tgc_no_grad_pop();
    printf("backend: %s\n", rs.backend);
    if (ok && rs.opt.json)
        ok = write_json(&rs);
    tgc_shutdown();
    return ok ? 0 : 1;
}
