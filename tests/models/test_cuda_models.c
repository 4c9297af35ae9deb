/* Whole models on the GPU, through the public API only (label `gpu`; skips without a GPU).
 *
 * The seed CNN (batch 4), a small ResNet18 (width 16, batch 4, eval and training mode) and a
 * tiny BERT (2 layers, hidden 128, 2 heads, batch 2, sequence 33, both attention forms),
 * from examples/models/, run:
 *   cpu eager       the reference (the model function called on CPU tensors);
 *   gpu eager       the same call on tgc_cuda(0) tensors and a module moved with
 *                   tgc_module_to (per-op GPU kernels);
 *   gpu compiled    cfg.backend = CUDA: DEFAULT (two calls), REDUCE_OVERHEAD (capture and
 *                   replay, which must equal DEFAULT within the HIGHEST tolerance; whether
 *                   they are bit-equal is printed), HIGH and MEDIUM precision, and a batch
 *                   sweep with dynamic = AUTO (at most 2 compiles).
 * Compiled results are compared with both the CPU reference and GPU eager.
 *
 * Tolerances, row-norm rule of tests/gpu_test_util.h (errors of a whole network compound, so
 * they are looser than one op's): HIGHEST 1e-4, HIGH (TF32) 1e-2, MEDIUM (bf16) 5e-2 of the
 * rms of each output row. In training mode the batch-norm running statistics are compared
 * after the call too (HIGHEST, elementwise 1e-4). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_skip.h"
#include "gpu_test_util.h"
#include "tgc/tgc.h"

#include "examples/models/bert.h"
#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

static double model_tol(tgc_matmul_precision p)
{
    return p == TGC_PRECISION_MEDIUM ? 5e-2 : p == TGC_PRECISION_HIGH ? 1e-2 : 1e-4;
}

typedef struct model_case {
    const char *name;
    tgc_model_fn fn;
    tgc_module *(*create)(void);
    int n_in;
    /* inputs on the CPU for a batch size */
    tgc_status (*inputs)(int64_t batch, tgc_tensor **in);
    int64_t batch;
    int training;
} model_case;

static tgc_module *make_cnn(void)
{
    tgc_manual_seed(1234);
    return seed_cnn_create();
}

static tgc_module *make_resnet(void)
{
    resnet18_config c = resnet18_default_config();
    c.width = 16;
    return resnet18_create(&c);
}

static bert_config tiny_bert(int sdpa)
{
    bert_config c = bert_base_config();
    c.layers = 2;
    c.hidden = 128;
    c.heads = 2;
    c.intermediate = 512;
    c.vocab = 1000;
    c.use_sdpa = sdpa;
    return c;
}

static tgc_module *make_bert(void)
{
    bert_config c = tiny_bert(0);
    return bert_create(&c);
}

static tgc_module *make_bert_sdpa(void)
{
    bert_config c = tiny_bert(1);
    return bert_create(&c);
}

static tgc_status image_inputs(int64_t batch, tgc_tensor **in)
{
    int64_t s[4] = {batch, 3, 32, 32};
    tgc_manual_seed(2024 + (uint64_t)batch);
    in[0] = tgc_randn(s, 4, TGC_F32, tgc_cpu());
    return in[0] ? TGC_OK : tgc_last_status();
}

static tgc_status bert_inputs(int64_t batch, tgc_tensor **in)
{
    bert_config c = tiny_bert(0);
    return bert_make_inputs(&c, batch, 33, 5, 7 + (uint64_t)batch, in);
}

static const model_case cases[] = {
    {"seed_cnn", seed_cnn_forward, make_cnn, 1, image_inputs, 4, 0},
    {"resnet18_small", resnet18_forward, make_resnet, 1, image_inputs, 4, 0},
    {"resnet18_small_train", resnet18_forward, make_resnet, 1, image_inputs, 4, 1},
    {"bert_tiny", bert_forward, make_bert, 4, bert_inputs, 2, 0},
    {"bert_tiny_sdpa", bert_forward, make_bert_sdpa, 4, bert_inputs, 2, 0},
};

static int failures;

static void check(const char *model, const char *what, const tgc_tensor *got,
                  const tgc_tensor *want, double tol)
{
    gpu_cmp r = gpu_compare(got, want, tol, 1.0);
    if (!r.ok) {
        failures++;
        print_message("FAIL %s: %s: %s\n", model, what, r.msg);
    } else {
        print_message("ok   %s: %s (worst error %.3g of the allowed)\n", model, what, r.worst);
    }
}

/* A fresh module on dev (training flag as the case says). */
static tgc_module *model_on(const model_case *c, tgc_device dev)
{
    tgc_module *m = c->create();
    assert_non_null(m);
    tgc_module_train(m, c->training);
    if (dev.type != TGC_DEVICE_CPU) {
        tgc_status st = tgc_module_to(m, dev);
        if (st != TGC_OK)
            fail_msg("%s: tgc_module_to(cuda:0): %s", c->name, tgc_last_error());
    }
    return m;
}

/* The module's batch-norm running statistics equal the reference module's (training). */
static void check_running_stats(const model_case *c, const char *what, tgc_module *got,
                                tgc_module *want)
{
    if (!c->training)
        return;
    tgc_module *gb = tgc_module_get_child(got, "bn1"), *wb = tgc_module_get_child(want, "bn1");
    char label[128];
    snprintf(label, sizeof label, "%s: bn1.running_mean", what);
    check(c->name, label, tgc_module_get(gb, "running_mean"), tgc_module_get(wb, "running_mean"),
          0);
    snprintf(label, sizeof label, "%s: bn1.running_var", what);
    check(c->name, label, tgc_module_get(gb, "running_var"), tgc_module_get(wb, "running_var"), 0);
}

static tgc_tensor *run(const model_case *c, tgc_fn *f, tgc_module *m, tgc_tensor **in,
                       const char *what)
{
    tgc_tensor *y = NULL;
    tgc_clear_error();
    tgc_status st = f ? tgc_call(f, m, in, c->n_in, &y, 1) : c->fn(m, in, c->n_in, &y, 1);
    if (st != TGC_OK)
        fail_msg("%s: %s: %s: %s", c->name, what, tgc_status_str(st), tgc_last_error());
    return y;
}

static tgc_fn *compile_cuda(const model_case *c, tgc_mode mode, tgc_matmul_precision p)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_CUDA;
    cfg.mode = mode;
    cfg.matmul_precision = p;
    tgc_fn *f = tgc_compile(c->fn, c->name, &cfg);
    assert_non_null(f);
    return f;
}

static void to_gpu(tgc_tensor **in, tgc_tensor **gin, int n)
{
    for (int k = 0; k < n; k++) {
        gin[k] = tgc_to(in[k], tgc_cuda(0));
        if (!gin[k])
            fail_msg("tgc_to(cuda:0): %s", tgc_last_error());
    }
}

static void test_model(void **state)
{
    GPU_REQUIRE();
    const model_case *c = *state;
    failures = 0;
    tgc_no_grad_push();
    tgc_scope_push();
    tgc_tensor *in[4], *gin[4];
    assert_int_equal(c->inputs(c->batch, in), TGC_OK);
    to_gpu(in, gin, c->n_in);

    tgc_module *mc = model_on(c, tgc_cpu());
    tgc_tensor *want = run(c, NULL, mc, in, "cpu eager");
    tgc_module *me = model_on(c, tgc_cuda(0));
    tgc_tensor *eager = run(c, NULL, me, gin, "gpu eager");
    check(c->name, "gpu eager vs cpu eager", eager, want, model_tol(TGC_PRECISION_HIGHEST));
    check_running_stats(c, "gpu eager", me, mc);

    /* DEFAULT, two calls; REDUCE_OVERHEAD, capture and replay */
    tgc_fn *fd = compile_cuda(c, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
    tgc_fn *fg = compile_cuda(c, TGC_MODE_REDUCE_OVERHEAD, TGC_PRECISION_HIGHEST);
    tgc_tensor *yd = NULL;
    for (int call = 0; call < 2; call++) {
        tgc_module *m = model_on(c, tgc_cuda(0));
        tgc_tensor *y = run(c, fd, m, gin, "default");
        char what[64];
        snprintf(what, sizeof what, "default call %d vs cpu eager", call + 1);
        check(c->name, what, y, want, model_tol(TGC_PRECISION_HIGHEST));
        snprintf(what, sizeof what, "default call %d vs gpu eager", call + 1);
        check(c->name, what, y, eager, model_tol(TGC_PRECISION_HIGHEST));
        check_running_stats(c, "default", m, mc);
        tgc_module_free(m);
        yd = y;
    }
    for (int call = 0; call < 2; call++) {
        tgc_module *m = model_on(c, tgc_cuda(0));
        tgc_tensor *y = run(c, fg, m, gin, "reduce-overhead");
        char what[64];
        snprintf(what, sizeof what, "reduce-overhead %s vs cpu eager", call ? "replay" : "capture");
        check(c->name, what, y, want, model_tol(TGC_PRECISION_HIGHEST));
        snprintf(what, sizeof what, "reduce-overhead %s vs default", call ? "replay" : "capture");
        check(c->name, what, y, yd, model_tol(TGC_PRECISION_HIGHEST));
        print_message("     %s: reduce-overhead %s bit-equal to default: %s\n", c->name,
                      call ? "replay" : "capture", gpu_bit_equal(y, yd) ? "yes" : "no");
        check_running_stats(c, "reduce-overhead", m, mc);
        tgc_module_free(m);
    }
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(fd, &s), TGC_OK);
    print_message("     %s: backend %s, %d kernels, compile %.1f ms\n", c->name, s.backend,
                  s.kernels_last_variant, 1e3 * s.compile_seconds);
    if (strcmp(s.backend, "cuda") != 0 || s.compiles != 1 || s.eager_fallbacks) {
        failures++;
        print_message("FAIL %s: default: backend %s, %llu compiles, %llu eager fallbacks\n",
                      c->name, s.backend, (unsigned long long)s.compiles,
                      (unsigned long long)s.eager_fallbacks);
    }
    tgc_fn_free(fd);
    tgc_fn_free(fg);

    /* precisions */
    for (int p = TGC_PRECISION_HIGH; p <= TGC_PRECISION_MEDIUM; p++) {
        tgc_fn *f = compile_cuda(c, TGC_MODE_DEFAULT, (tgc_matmul_precision)p);
        tgc_module *m = model_on(c, tgc_cuda(0));
        tgc_tensor *y = run(c, f, m, gin, p == TGC_PRECISION_HIGH ? "HIGH" : "MEDIUM");
        /* in training, batch-norm normalizes by the statistics of a 4-image batch, which
         * amplifies the inputs' rounding by the ratio of the activations to their spread */
        check(c->name,
              p == TGC_PRECISION_HIGH ? "HIGH (tf32) vs cpu eager" : "MEDIUM (bf16) vs cpu eager",
              y, want, model_tol((tgc_matmul_precision)p) * (c->training ? 8 : 1));
        tgc_module_free(m);
        tgc_fn_free(f);
    }

    /* a batch (BERT: batch) sweep with dynamic = AUTO: at most 2 compiles */
    if (!c->training) {
        tgc_fn *f = compile_cuda(c, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
        const int64_t batches[3] = {c->batch, c->batch + 2, c->batch + 1};
        for (int k = 0; k < 3; k++) {
            tgc_scope_push();
            tgc_tensor *bin[4], *bgin[4];
            assert_int_equal(c->inputs(batches[k], bin), TGC_OK);
            to_gpu(bin, bgin, c->n_in);
            tgc_tensor *ref = run(c, NULL, mc, bin, "cpu eager (sweep)");
            tgc_tensor *y = run(c, f, me, bgin, "dynamic sweep");
            char what[64];
            snprintf(what, sizeof what, "dynamic AUTO, batch %lld vs cpu eager",
                     (long long)batches[k]);
            check(c->name, what, y, ref, model_tol(TGC_PRECISION_HIGHEST));
            tgc_scope_pop();
        }
        assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
        if (s.compiles > 2) {
            failures++;
            print_message("FAIL %s: the batch sweep compiled %llu times (at most 2): %s\n", c->name,
                          (unsigned long long)s.compiles, s.last_recompile_reason);
        }
        tgc_fn_free(f);
    }

    tgc_module_free(mc);
    tgc_module_free(me);
    tgc_scope_pop();
    tgc_no_grad_pop();
    if (failures)
        fail_msg("%s: %d failed checks (listed above)", c->name, failures);
}

int main(void)
{
    struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, test_model, NULL, NULL, (void *)&cases[i]};
    int rc =
        _cmocka_run_group_tests("cuda_models", tests, sizeof tests / sizeof tests[0], NULL, NULL);
    tgc_shutdown();
    return gpu_skip_finish(rc);
}
