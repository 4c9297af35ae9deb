/* GPU benchmarks of libtgc on tgc_cuda(0), through the public API (run by
 * tests/gpu/device_run.sh in the same device command as the PyTorch references, which it
 * joins into a table of ratios).
 *
 *   bench_gpu [--only compile,gemm,pointwise,models,eager,overhead,sweep,convgrad]
 *             [--models seed_cnn,resnet18,bert] [--iters 50] [--budget 3] [--json out.jsonl]
 *             [--quick]
 *
 * Parts (in this order; the cold compile runs first so that nothing warmed the compiler):
 *   compile    cold compile of ResNet18 inference (batch 64, DEFAULT, HIGHEST): the first
 *              tgc_call's wall time (trace, passes, NVRTC, module load, run) minus a warm call;
 *   gemm       tgc_matmul 4096^3 compiled, f32 inputs at HIGHEST, HIGH (TF32), MEDIUM (bf16)
 *              and bf16 inputs: TFLOP/s;
 *   pointwise  a chain of 8 pointwise ops on a 256 MiB f32 tensor, compiled (one fused
 *              kernel expected) and eager: GB/s counting one read and one write of 256 MiB,
 *              against a device-to-device copy of the same bytes (tgc_copy_) in the same run;
 *   models     seed CNN and ResNet18 inference, batch 64 3x32x32, and BERT-base batch 8
 *              seq 128, in DEFAULT and REDUCE_OVERHEAD and each precision: ms per call
 *              (--models: only those named);
 *   eager      ResNet18 inference with cfg.backend = EAGER on GPU tensors: ms per call;
 *   overhead   REDUCE_OVERHEAD cache hits on a tiny model (linear 16x16 + relu): host us per
 *              tgc_call (calls issued back to back, synchronized once at the end; and with a
 *              synchronize after each call);
 *   sweep      BERT-base batch 8 over the 15 lengths of torch_ref.py (32..512), dynamic AUTO:
 *              compiles and the whole sweep's wall time, compiles included (each length: a
 *              first call and 3 more, as torch_ref.py does);
 *   convgrad   the conv2d input and weight gradients (CONV2D_GRAD_INPUT / _WEIGHT, each
 *              compiled alone at each precision and replayed as a CUDA graph: the CUDA
 *              backend's conv-gradient kernels) of every conv shape of ResNet18 and the seed
 *              CNN at batch 64: GFLOP/s counting 2 * N * O * OH * OW * C/g * KH * KW.
 * Timing: every timed call is followed by a device synchronize (tgc_cuda_synchronize), as
 * torch's scripts do; the figure is the median over up to --iters calls after warm-up calls,
 * within --budget seconds per measurement. Each measurement prints one line and, with --json,
 * one JSON object per line for tests/gpu/summarize.py. Without a usable GPU it prints
 * "no GPU: <reason>" and exits 0. Not run by ctest. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tgc/tgc.h"

#if defined(TGC_HAVE_CUDA) && defined(__has_include)
#if __has_include("tgc/cuda.h")
#include "tgc/cuda.h"
#define BENCH_HAVE_CUDA_API 1
#endif
#endif
#ifndef BENCH_HAVE_CUDA_API
#define BENCH_HAVE_CUDA_API 0
#endif

#include "frontend/ops_grad.h"
#include "ir/op.h"

#include "examples/models/bert.h"
#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

typedef struct options {
    const char *only, *json, *models;
    int iters, quick;
    double budget;
} options;

static options opt = {NULL, NULL, NULL, 50, 0, 3.0};
static FILE *json_fp;
static const char *prec_names[3] = {"highest", "high", "medium"};

/* 1 when the comma-separated list (NULL: everything) names item */
static int listed(const char *list, const char *item)
{
    if (!list)
        return 1;
    size_t n = strlen(item);
    for (const char *p = list; (p = strstr(p, item)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

static int want(const char *part)
{
    return listed(opt.only, part);
}

/* One JSON object per line: "{\"bench\": ..., fields}". fmt holds the fields. */
static void emit(const char *fmt, ...)
{
    if (!json_fp)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputc('{', json_fp);
    vfprintf(json_fp, fmt, ap);
    fputs("}\n", json_fp);
    fflush(json_fp);
    va_end(ap);
}

static tgc_status gpu_sync(void)
{
#if BENCH_HAVE_CUDA_API
    return tgc_cuda_synchronize(0);
#else
    /* reading on the host waits for the stream */
    tgc_scope_push();
    int64_t one = 1;
    float v;
    tgc_tensor *t = tgc_zeros(&one, 1, TGC_F32, tgc_cuda(0));
    tgc_status st = t ? tgc_copy_to_host(t, &v, sizeof v) : tgc_last_status();
    tgc_scope_pop();
    return st;
#endif
}

/* NULL when tgc_cuda(0) works, else the reason. */
static const char *gpu_missing(void)
{
    static char reason[512];
#if BENCH_HAVE_CUDA_API
    if (tgc_cuda_check() != TGC_OK) {
        snprintf(reason, sizeof reason, "%s",
                 tgc_last_error()[0] ? tgc_last_error() : "tgc_cuda_check() failed");
        return reason;
    }
#elif !defined(TGC_HAVE_CUDA)
    return "libtgc was built without the CUDA backend";
#endif
    tgc_scope_push();
    int64_t one = 1;
    float v = 1;
    tgc_tensor *t = tgc_zeros(&one, 1, TGC_F32, tgc_cuda(0));
    int ok = t && tgc_copy_to_host(t, &v, sizeof v) == TGC_OK && v == 0.0f;
    if (!ok)
        snprintf(reason, sizeof reason, "%s",
                 tgc_last_error()[0] ? tgc_last_error() : "tgc_cuda(0) is not usable");
    tgc_scope_pop();
    return ok ? NULL : reason;
}

/* ---- timing ---- */

typedef struct job {
    tgc_fn *f; /* compiled; NULL: call fn eagerly */
    tgc_model_fn fn;
    tgc_module *m;
    tgc_tensor **in;
    int n_in;
} job;

/* One call and a synchronize; 0 on success. */
static int job_run(void *ctx)
{
    job *j = ctx;
    tgc_scope_push();
    tgc_tensor *y = NULL;
    tgc_status st =
        j->f ? tgc_call(j->f, j->m, j->in, j->n_in, &y, 1) : j->fn(j->m, j->in, j->n_in, &y, 1);
    if (st == TGC_OK)
        st = gpu_sync();
    tgc_scope_pop();
    if (st != TGC_OK) {
        fprintf(stderr, "bench_gpu: %s: %s (%s)\n", j->f ? "tgc_call" : "eager call",
                tgc_last_error(), tgc_status_str(st));
        return 1;
    }
    return 0;
}

/* Median seconds per call after `warm` calls; < 0 on error. */
static double time_job(job *j, int warm)
{
    for (int i = 0; i < warm; i++)
        if (job_run(j))
            return -1;
    int runs = 0;
    return time_runs(job_run, j, opt.iters, opt.budget, &runs);
}

static tgc_fn *compile(tgc_model_fn fn, const char *name, tgc_backend_kind be, tgc_mode mode,
                       tgc_matmul_precision p)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = be;
    cfg.mode = mode;
    cfg.matmul_precision = p;
    tgc_fn *f = tgc_compile(fn, name, &cfg);
    if (!f)
        fprintf(stderr, "bench_gpu: tgc_compile: %s\n", tgc_last_error());
    return f;
}

static int fn_kernels(const tgc_fn *f)
{
    tgc_stats s;
    return tgc_fn_stats(f, &s) == TGC_OK ? s.kernels_last_variant : -1;
}

/* ---- models ---- */

typedef struct model {
    const char *name;
    tgc_model_fn fn;
    tgc_module *m;
    tgc_tensor *in[4];
    int n_in;
} model;

static int to_device(tgc_tensor **in, int n)
{
    for (int k = 0; k < n; k++) {
        in[k] = tgc_to(in[k], tgc_cuda(0));
        if (!in[k]) {
            fprintf(stderr, "bench_gpu: tgc_to(cuda:0): %s\n", tgc_last_error());
            return 0;
        }
    }
    return 1;
}

/* The model with its inputs on the GPU (in the current scope); 0 on error. */
static int model_make(const char *name, model *mo, int64_t bert_seq)
{
    memset(mo, 0, sizeof *mo);
    mo->name = name;
    if (strcmp(name, "bert") == 0) {
        bert_config c = bert_base_config();
        mo->fn = bert_forward;
        mo->m = bert_create(&c);
        mo->n_in = 4;
        if (!mo->m || bert_make_inputs(&c, 8, bert_seq, 0, 1, mo->in) != TGC_OK)
            goto fail;
    } else {
        int64_t s[4] = {64, 3, 32, 32};
        mo->n_in = 1;
        if (strcmp(name, "resnet18") == 0) {
            resnet18_config c = resnet18_default_config();
            mo->fn = resnet18_forward;
            mo->m = resnet18_create(&c);
        } else {
            tgc_manual_seed(1234);
            mo->fn = seed_cnn_forward;
            mo->m = seed_cnn_create();
            if (mo->m)
                tgc_module_train(mo->m, 0);
        }
        tgc_manual_seed(2024);
        mo->in[0] = tgc_randn(s, 4, TGC_F32, tgc_cpu());
        if (!mo->m || !mo->in[0])
            goto fail;
    }
    if (tgc_module_to(mo->m, tgc_cuda(0)) != TGC_OK || !to_device(mo->in, mo->n_in))
        goto fail;
    return 1;
fail:
    fprintf(stderr, "bench_gpu: making %s: %s\n", name, tgc_last_error());
    tgc_module_free(mo->m);
    mo->m = NULL;
    return 0;
}

static const char *model_label(const char *name)
{
    return strcmp(name, "bert") == 0       ? "bert_base_b8_s128"
           : strcmp(name, "resnet18") == 0 ? "resnet18_infer_b64"
                                           : "seed_cnn_infer_b64";
}

static void bench_cold_compile(void)
{
    tgc_scope_push();
    model mo;
    if (!model_make("resnet18", &mo, 0)) {
        tgc_scope_pop();
        return;
    }
    tgc_fn *f =
        compile(mo.fn, "resnet18_cold", TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
    job j = {f, mo.fn, mo.m, mo.in, 1};
    double t0 = now();
    int bad = !f || job_run(&j);
    double first = now() - t0;
    double warm = bad ? -1 : time_job(&j, 1);
    tgc_stats s;
    if (!bad && warm > 0 && tgc_fn_stats(f, &s) == TGC_OK) {
        printf("cold compile resnet18_infer_b64: first call %.1f ms, warm call %.3f ms, first - "
               "warm %.1f ms (compile_seconds %.1f ms, %d kernels)\n",
               1e3 * first, 1e3 * warm, 1e3 * (first - warm), 1e3 * s.compile_seconds,
               s.kernels_last_variant);
        emit("\"bench\": \"cold_compile\", \"workload\": \"resnet18_infer_b64\", \"first_ms\": "
             "%.3f, \"warm_ms\": %.4f, \"compile_ms\": %.3f, \"stats_compile_ms\": %.3f, "
             "\"kernels\": %d",
             1e3 * first, 1e3 * warm, 1e3 * (first - warm), 1e3 * s.compile_seconds,
             s.kernels_last_variant);
    }
    tgc_fn_free(f);
    tgc_module_free(mo.m);
    tgc_scope_pop();
}

static void bench_models(void)
{
    static const char *const names[3] = {"seed_cnn", "resnet18", "bert"};
    for (int k = 0; k < 3; k++) {
        if (!listed(opt.models, names[k]))
            continue;
        tgc_scope_push();
        model mo;
        if (!model_make(names[k], &mo, 128)) {
            tgc_scope_pop();
            continue;
        }
        for (int mode = 0; mode < 2; mode++)
            for (int p = 0; p < 3; p++) {
                if (opt.quick && p == TGC_PRECISION_MEDIUM)
                    continue;
                tgc_fn *f = compile(mo.fn, names[k], TGC_BACKEND_CUDA,
                                    mode ? TGC_MODE_REDUCE_OVERHEAD : TGC_MODE_DEFAULT,
                                    (tgc_matmul_precision)p);
                job j = {f, mo.fn, mo.m, mo.in, mo.n_in};
                double t = f ? time_job(&j, 3) : -1;
                const char *ms = mode ? "reduce-overhead" : "default";
                if (t > 0) {
                    printf("model %-20s %-15s %-7s %8.3f ms per call (%d kernels)\n",
                           model_label(names[k]), ms, prec_names[p], 1e3 * t, fn_kernels(f));
                    emit("\"bench\": \"model\", \"workload\": \"%s\", \"mode\": \"%s\", "
                         "\"precision\": \"%s\", \"ms\": %.4f, \"kernels\": %d",
                         model_label(names[k]), ms, prec_names[p], 1e3 * t, fn_kernels(f));
                } else {
                    printf("model %-20s %-15s %-7s FAILED\n", model_label(names[k]), ms,
                           prec_names[p]);
                }
                tgc_fn_free(f);
            }
        tgc_module_free(mo.m);
        tgc_scope_pop();
    }
}

static void bench_eager(void)
{
    tgc_scope_push();
    model mo;
    if (model_make("resnet18", &mo, 0)) {
        tgc_fn *f = compile(mo.fn, "resnet18_eager", TGC_BACKEND_EAGER, TGC_MODE_DEFAULT,
                            TGC_PRECISION_HIGHEST);
        job j = {f, mo.fn, mo.m, mo.in, 1};
        double t = f ? time_job(&j, 3) : -1;
        if (t > 0) {
            printf("eager resnet18_infer_b64 (backend EAGER, GPU tensors): %.3f ms per call\n",
                   1e3 * t);
            emit("\"bench\": \"eager\", \"workload\": \"resnet18_infer_b64\", \"ms\": %.4f",
                 1e3 * t);
        }
        tgc_fn_free(f);
        tgc_module_free(mo.m);
    }
    tgc_scope_pop();
}

/* ---- GEMM ---- */

static tgc_status matmul_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_matmul(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void bench_gemm(void)
{
    const int64_t n = 4096;
    int64_t s[2] = {n, n};
    tgc_scope_push();
    tgc_manual_seed(1);
    tgc_tensor *a = tgc_randn(s, 2, TGC_F32, tgc_cuda(0)),
               *b = tgc_randn(s, 2, TGC_F32, tgc_cuda(0));
    tgc_tensor *in32[2] = {a, b}, *in16[2] = {tgc_cast(a, TGC_BF16), tgc_cast(b, TGC_BF16)};
    if (!a || !b || !in16[0] || !in16[1]) {
        fprintf(stderr, "bench_gpu: gemm inputs: %s\n", tgc_last_error());
        tgc_scope_pop();
        return;
    }
    for (int k = 0; k < 4; k++) {
        int bf16 = k == 3;
        tgc_matmul_precision p = bf16 ? TGC_PRECISION_HIGHEST : (tgc_matmul_precision)k;
        tgc_fn *f = compile(matmul_fn, "gemm", TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, p);
        job j = {f, matmul_fn, NULL, bf16 ? in16 : in32, 2};
        double t = f ? time_job(&j, 3) : -1;
        const char *label = bf16 ? "bf16 inputs" : prec_names[p];
        if (t > 0) {
            double tf = 2.0 * (double)n * n * n / t / 1e12;
            printf("gemm %lld^3 %-12s %8.1f TFLOP/s (%.3f ms)\n", (long long)n, label, tf, 1e3 * t);
            emit("\"bench\": \"gemm\", \"n\": %lld, \"dtype\": \"%s\", \"precision\": \"%s\", "
                 "\"tflops\": %.2f, \"ms\": %.4f",
                 (long long)n, bf16 ? "bf16" : "f32", bf16 ? "bf16" : prec_names[p], tf, 1e3 * t);
        } else {
            printf("gemm %lld^3 %-12s FAILED\n", (long long)n, label);
        }
        tgc_fn_free(f);
    }
    tgc_scope_pop();
}

/* ---- pointwise ---- */

static tgc_status chain8(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *x = tgc_mul_scalar(in[0], 1.5);                /* 1 */
    x = tgc_relu(tgc_add_scalar(x, 0.25));                     /* 2, 3 */
    x = tgc_abs(tgc_sub_scalar(tgc_mul_scalar(x, 0.75), 0.5)); /* 4, 5, 6 */
    out[0] = tgc_neg(tgc_clamp(x, -2.0, 2.0));                 /* 7, 8 */
    return out[0] ? TGC_OK : tgc_last_status();
}

typedef struct copy_job {
    tgc_tensor *dst, *src;
} copy_job;

static int copy_run(void *ctx)
{
    copy_job *c = ctx;
    tgc_status st = tgc_copy_(c->dst, c->src);
    if (st == TGC_OK)
        st = gpu_sync();
    if (st != TGC_OK) {
        fprintf(stderr, "bench_gpu: tgc_copy_: %s\n", tgc_last_error());
        return 1;
    }
    return 0;
}

static void bench_pointwise(void)
{
    int64_t s[2] = {8192, 8192}; /* 64 Mi floats, 256 MiB */
    double bytes = 2.0 * 8192.0 * 8192.0 * 4.0;
    tgc_scope_push();
    tgc_manual_seed(2);
    tgc_tensor *x = tgc_randn(s, 2, TGC_F32, tgc_cuda(0)),
               *y = tgc_empty(s, 2, TGC_F32, tgc_cuda(0));
    if (!x || !y) {
        fprintf(stderr, "bench_gpu: pointwise inputs: %s\n", tgc_last_error());
        tgc_scope_pop();
        return;
    }
    copy_job cj = {y, x};
    int runs = 0;
    copy_run(&cj);
    double tc = time_runs(copy_run, &cj, opt.iters, opt.budget, &runs);
    tgc_fn *f =
        compile(chain8, "chain8", TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
    job j = {f, chain8, NULL, &x, 1};
    double t = f ? time_job(&j, 3) : -1;
    tgc_fn *fe =
        compile(chain8, "chain8_eager", TGC_BACKEND_EAGER, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
    job je = {fe, chain8, NULL, &x, 1};
    double te = fe ? time_job(&je, 2) : -1;
    if (tc > 0 && t > 0) {
        printf("pointwise chain of 8 ops, 256 MiB f32: compiled %.3f ms = %.0f GB/s (%d kernels); "
               "device copy (tgc_copy_) %.3f ms = %.0f GB/s; compiled/copy bandwidth %.2f; eager "
               "%.3f ms (%.1fx compiled)\n",
               1e3 * t, bytes / t / 1e9, fn_kernels(f), 1e3 * tc, bytes / tc / 1e9, tc / t,
               1e3 * te, te / t);
        emit("\"bench\": \"pointwise\", \"workload\": \"chain8_256MiB\", \"ms\": %.4f, \"gbps\": "
             "%.1f, \"kernels\": %d, \"copy_ms\": %.4f, \"copy_gbps\": %.1f, \"ratio_to_copy\": "
             "%.3f, \"eager_ms\": %.4f",
             1e3 * t, bytes / t / 1e9, fn_kernels(f), 1e3 * tc, bytes / tc / 1e9, tc / t, 1e3 * te);
    } else {
        printf("pointwise chain of 8 ops: FAILED\n");
    }
    tgc_fn_free(f);
    tgc_fn_free(fe);
    tgc_scope_pop();
}

/* ---- cache-hit overhead ---- */

static tgc_status tiny_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)n_in, (void)n_out;
    out[0] = tgc_relu(tgc_linear(in[0], tgc_module_get(self, "w"), tgc_module_get(self, "b")));
    return out[0] ? TGC_OK : tgc_last_status();
}

static void bench_overhead(void)
{
    int64_t ws[2] = {16, 16}, bs[1] = {16}, xs[2] = {4, 16};
    tgc_scope_push();
    tgc_module *m = tgc_module_create("tiny", NULL);
    tgc_module_param(m, "w", tgc_randn(ws, 2, TGC_F32, tgc_cpu()));
    tgc_module_param(m, "b", tgc_randn(bs, 1, TGC_F32, tgc_cpu()));
    tgc_tensor *x = tgc_to(tgc_randn(xs, 2, TGC_F32, tgc_cpu()), tgc_cuda(0));
    if (!x || tgc_module_to(m, tgc_cuda(0)) != TGC_OK) {
        fprintf(stderr, "bench_gpu: tiny model: %s\n", tgc_last_error());
        tgc_module_free(m);
        tgc_scope_pop();
        return;
    }
    for (int mode = 1; mode >= 0; mode--) {
        tgc_fn *f =
            compile(tiny_fn, "tiny", TGC_BACKEND_CUDA,
                    mode ? TGC_MODE_REDUCE_OVERHEAD : TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
        job j = {f, tiny_fn, m, &x, 1};
        if (!f || job_run(&j) || job_run(&j)) {
            tgc_fn_free(f);
            continue;
        }
        const int n = opt.quick ? 2000 : 20000;
        int bad = 0;
        double t0 = now();
        for (int i = 0; i < n && !bad; i++) {
            tgc_scope_push();
            tgc_tensor *y = NULL;
            bad = tgc_call(f, m, &x, 1, &y, 1) != TGC_OK;
            tgc_scope_pop();
        }
        double host = now() - t0;
        bad = bad || gpu_sync() != TGC_OK;
        double all = now() - t0;
        double synced = time_job(&j, 0);
        tgc_stats s;
        tgc_fn_stats(f, &s);
        const char *ms = mode ? "reduce-overhead" : "default";
        if (!bad && synced > 0) {
            printf("cache hit, tiny model, %-15s: host %.2f us per tgc_call (%d calls back to "
                   "back; %.2f us with the final synchronize), %.2f us per call with a "
                   "synchronize each; guards %.0f ns; %d kernels\n",
                   ms, 1e6 * host / n, n, 1e6 * all / n, 1e6 * synced, s.guard_ns_per_call,
                   s.kernels_last_variant);
            emit("\"bench\": \"overhead\", \"workload\": \"tiny_linear_relu\", \"mode\": \"%s\", "
                 "\"host_us\": %.3f, \"host_us_incl_sync\": %.3f, \"synced_us\": %.3f, "
                 "\"guard_ns\": %.1f",
                 ms, 1e6 * host / n, 1e6 * all / n, 1e6 * synced, s.guard_ns_per_call);
        } else {
            fprintf(stderr, "bench_gpu: overhead (%s): %s\n", ms, tgc_last_error());
        }
        tgc_fn_free(f);
    }
    tgc_module_free(m);
    tgc_scope_pop();
}

/* ---- the BERT sequence-length sweep ---- */

static void bench_sweep(void)
{
    static const int64_t lens[15] = {32,  48,  64,  80,  96,  112, 128, 160,
                                     192, 224, 256, 320, 384, 448, 512};
    bert_config c = bert_base_config();
    tgc_module *m = bert_create(&c);
    if (!m || tgc_module_to(m, tgc_cuda(0)) != TGC_OK) {
        fprintf(stderr, "bench_gpu: bert: %s\n", tgc_last_error());
        tgc_module_free(m);
        return;
    }
    tgc_fn *f = compile(bert_forward, "bert_sweep", TGC_BACKEND_CUDA, TGC_MODE_DEFAULT,
                        TGC_PRECISION_HIGHEST);
    int bad = !f;
    char per_len[1024];
    size_t pl = 0;
    per_len[0] = '\0';
    double t_all = now();
    for (int i = 0; i < 15 && !bad; i++) {
        tgc_scope_push();
        tgc_tensor *in[4];
        bad = bert_make_inputs(&c, 8, lens[i], 0, 100 + (uint64_t)i, in) != TGC_OK ||
              !to_device(in, 4);
        job j = {f, bert_forward, m, in, 4};
        double t0 = now();
        bad = bad || job_run(&j);
        double first = now() - t0, best = 1e30;
        for (int r = 0; r < 3 && !bad; r++) {
            t0 = now();
            bad = job_run(&j);
            double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        if (!bad && pl < sizeof per_len)
            pl += (size_t)snprintf(per_len + pl, sizeof per_len - pl, "%s[%lld, %.2f, %.3f]",
                                   i ? ", " : "", (long long)lens[i], 1e3 * first, 1e3 * best);
        tgc_scope_pop();
    }
    double total = now() - t_all;
    tgc_stats s;
    if (!bad && tgc_fn_stats(f, &s) == TGC_OK) {
        printf("bert-base batch 8 sweep of 15 lengths 32..512, dynamic AUTO: %llu compiles, "
               "whole sweep %.2f s (compile %.2f s); per length [len, first ms, best ms]: %s\n",
               (unsigned long long)s.compiles, total, s.compile_seconds, per_len);
        emit("\"bench\": \"sweep\", \"workload\": \"bert_base_b8_varlen\", \"compiles\": %llu, "
             "\"total_s\": %.3f, \"compile_s\": %.3f, \"per_len_first_ms_then_min_ms\": [%s]",
             (unsigned long long)s.compiles, total, s.compile_seconds, per_len);
    } else {
        printf("bert sweep: FAILED (%s)\n", tgc_last_error());
    }
    tgc_fn_free(f);
    tgc_module_free(m);
}

/* ---- conv gradients ---- */

typedef struct cg_shape {
    const char *name;
    int64_t c, h, o, k, s, p;
} cg_shape;

static const cg_shape *g_cg;
static tgc_attrs g_cg_attrs;

static tgc_status cg_dgrad_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_conv2d_grad_input(in[0], in[1], &g_cg_attrs, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status cg_wgrad_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_conv2d_grad_weight(in[0], in[1], &g_cg_attrs, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void bench_convgrad(void)
{
    static const cg_shape shapes[] = {
        /* torchvision's ResNet18 on 3x32x32 (the examples' and bench_train's model): the
         * 7x7 stem, then the max pool leaves 8x8 for layer1 */
        {"resnet18 conv1 3-64 k7 s2", 3, 32, 64, 7, 2, 3},
        {"resnet18 layer1 64-64 k3 8x8", 64, 8, 64, 3, 1, 1},
        {"resnet18 layer2.0 64-128 k3 s2", 64, 8, 128, 3, 2, 1},
        {"resnet18 layer2 down 64-128 k1 s2", 64, 8, 128, 1, 2, 0},
        {"resnet18 layer2 128-128 k3 4x4", 128, 4, 128, 3, 1, 1},
        {"resnet18 layer3.0 128-256 k3 s2", 128, 4, 256, 3, 2, 1},
        {"resnet18 layer3 down 128-256 k1 s2", 128, 4, 256, 1, 2, 0},
        {"resnet18 layer3 256-256 k3 2x2", 256, 2, 256, 3, 1, 1},
        {"resnet18 layer4.0 256-512 k3 s2", 256, 2, 512, 3, 2, 1},
        {"resnet18 layer4 down 256-512 k1 s2", 256, 2, 512, 1, 2, 0},
        {"resnet18 layer4 512-512 k3 1x1", 512, 1, 512, 3, 1, 1},
        {"seed_cnn conv1 3-32 k3 p2", 3, 32, 32, 3, 1, 2},
        {"seed_cnn conv2 32-64 k3 p2", 32, 16, 64, 3, 1, 2},
        {"seed_cnn conv3 64-128 k3 p2", 64, 8, 128, 3, 1, 2},
    };
    const int64_t n = 64;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const cg_shape *c = &shapes[i];
        g_cg = c;
        memset(&g_cg_attrs, 0, sizeof g_cg_attrs);
        const int64_t at[7] = {c->s, c->s, c->p, c->p, 1, 1, 1};
        for (int k = 0; k < 7; k++)
            g_cg_attrs.i[k] = at[k];
        g_cg_attrs.ni = 7;
        int64_t oh = (c->h + 2 * c->p - c->k) / c->s + 1;
        int64_t xs[4] = {n, c->c, c->h, c->h}, ws[4] = {c->o, c->c, c->k, c->k},
                ys[4] = {n, c->o, oh, oh};
        tgc_scope_push();
        tgc_manual_seed(1);
        tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cuda(0)),
                   *w = tgc_randn(ws, 4, TGC_F32, tgc_cuda(0)),
                   *dy = tgc_randn(ys, 4, TGC_F32, tgc_cuda(0));
        double flop = 2.0 * (double)n * (double)c->o * (double)(oh * oh) * (double)c->c *
                      (double)(c->k * c->k);
        for (int p = 0; p < 3 && x && w && dy; p++) {
            for (int wg = 0; wg < 2; wg++) {
                if (wg == 0 && c->c == 3)
                    continue; /* the image needs no gradient */
                tgc_tensor *in[3] = {wg ? x : dy, wg ? dy : w, wg ? w : x};
                /* compiled at the precision, replayed as a CUDA graph: the kernels' time,
                 * not an eager call's host work */
                tgc_fn *f =
                    compile(wg ? cg_wgrad_fn : cg_dgrad_fn, wg ? "wgrad" : "dgrad",
                            TGC_BACKEND_CUDA, TGC_MODE_REDUCE_OVERHEAD, (tgc_matmul_precision)p);
                job j = {f, NULL, NULL, in, 3};
                double t = f ? time_job(&j, 3) : -1;
                const char *what = wg ? "wgrad" : "dgrad";
                if (t > 0) {
                    printf("convgrad %-36s %s %-7s %8.1f GFLOP/s (%.4f ms)\n", c->name, what,
                           prec_names[p], flop / t / 1e9, 1e3 * t);
                    emit("\"bench\": \"convgrad\", \"shape\": \"%s\", \"op\": \"%s\", "
                         "\"precision\": \"%s\", \"gflops\": %.1f, \"ms\": %.5f",
                         c->name, what, prec_names[p], flop / t / 1e9, 1e3 * t);
                } else {
                    printf("convgrad %-36s %s %-7s FAILED\n", c->name, what, prec_names[p]);
                }
                tgc_fn_free(f);
            }
        }
        tgc_scope_pop();
    }
}

static void usage(FILE *fp)
{
    fprintf(
        fp,
        "usage: bench_gpu [--only compile,gemm,pointwise,models,eager,overhead,sweep,convgrad]\n"
        "                 [--models seed_cnn,resnet18,bert] [--iters N] [--budget SECONDS]\n"
        "                 [--json FILE] [--quick]\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--only") == 0 && v) {
            opt.only = v, i++;
        } else if (strcmp(a, "--models") == 0 && v) {
            opt.models = v, i++;
        } else if (strcmp(a, "--json") == 0 && v) {
            opt.json = v, i++;
        } else if (strcmp(a, "--iters") == 0 && v) {
            opt.iters = atoi(v), i++;
        } else if (strcmp(a, "--budget") == 0 && v) {
            opt.budget = atof(v), i++;
        } else if (strcmp(a, "--quick") == 0) {
            opt.quick = 1;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (opt.iters < 1)
        opt.iters = 1;
    if (opt.quick && opt.iters > 10)
        opt.iters = 10;
    const char *missing = gpu_missing();
    if (missing) {
        printf("no GPU: %s\n", missing);
        return 0;
    }
    if (opt.json && !(json_fp = fopen(opt.json, "w"))) {
        fprintf(stderr, "bench_gpu: cannot write %s\n", opt.json);
        return 1;
    }
#if BENCH_HAVE_CUDA_API
    char name[256] = "?";
    tgc_cuda_device_name(0, name, sizeof name);
    printf("device: %s\n", name);
    emit("\"bench\": \"device\", \"name\": \"%s\"", name);
#endif
    tgc_no_grad_push();
    double t0 = now();
    if (want("compile"))
        bench_cold_compile();
    if (want("gemm"))
        bench_gemm();
    if (want("pointwise"))
        bench_pointwise();
    if (want("models"))
        bench_models();
    if (want("eager"))
        bench_eager();
    if (want("overhead"))
        bench_overhead();
    if (want("sweep"))
        bench_sweep();
    if (want("convgrad"))
        bench_convgrad();
    tgc_no_grad_pop();
    printf("bench_gpu: %.1f s in all\n", now() - t0);
    if (json_fp)
        fclose(json_fp);
    tgc_shutdown();
    return 0;
}
