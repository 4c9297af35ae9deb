/* Attention on the LLVM backend against the interp oracle: causal masking (computed from
 * aranges inside the kernels, never loaded), masks combined with it, odd and broadcast sizes,
 * symbolic shapes, eager calls, and dropout whose kept elements are interp's exactly (the same
 * Philox counters, the stream left where interp leaves it). Also what tgc_fn_explain and the
 * perf log say about steps that run on interp: every real fallback with its reason, and no
 * ASSIGN (the executor's own copy). Skipped when built without LLVM. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TGC_HAVE_LLVM
#include "backend/eager.h"
#include "tgc/tgc.h"
#include "unit/unit_test_util.h"

#define SHAPE(...)                                                                                 \
    ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define MODEL(name)                                                                                \
    static tgc_status name(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,    \
                           int n_out)
#define MAX_OUT 8

static tgc_tensor *normal(const int64_t *shape, int ndim, tgc_dtype dt)
{
    tgc_eager_force_interp(1);
    tgc_tensor *t = tgc_randn(shape, ndim, TGC_F32, tgc_cpu());
    if (dt != TGC_F32)
        t = tgc_cast(t, dt);
    tgc_eager_force_interp(0);
    assert_non_null(t);
    return t;
}

static tgc_tensor *from_f64(const double *v, const int64_t *shape, int ndim, tgc_dtype dt)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    tgc_eager_force_interp(1);
    tgc_tensor *t = tgc_from_data(v, (size_t)n * sizeof *v, shape, ndim, TGC_F64, tgc_cpu());
    if (dt != TGC_F64)
        t = tgc_cast(t, dt);
    tgc_eager_force_interp(0);
    assert_non_null(t);
    return t;
}

static double *host_f64(tgc_tensor *t)
{
    tgc_eager_force_interp(1);
    tgc_tensor *c = tgc_cast(t, TGC_F64);
    tgc_eager_force_interp(0);
    assert_non_null(c);
    size_t n = (size_t)tgc_numel(c);
    double *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    assert_int_equal(tgc_copy_to_host(c, p, n * sizeof *p), TGC_OK);
    return p;
}

/* f32 results within torch.testing's defaults (rtol 1.3e-6, atol 1e-5); exact zeros where
 * interp has exact zeros (masked rows, dropped elements) and NaN where it has NaN. */
static void expect_close(const char *what, int k, tgc_tensor *got, tgc_tensor *want)
{
    if (!got || !want)
        fail_msg("%s: output %d missing", what, k);
    assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
    assert_int_equal(tgc_ndim(got), tgc_ndim(want));
    for (int d = 0; d < tgc_ndim(got); d++)
        assert_int_equal(tgc_size(got, d), tgc_size(want, d));
    double *x = host_f64(got), *y = host_f64(want);
    int64_t n = tgc_numel(want), bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        int ok = isnan(y[i]) ? isnan(x[i])
                 : y[i] == 0 ? x[i] == 0
                             : fabs(x[i] - y[i]) <= 1e-5 + 1.3e-6 * fabs(y[i]);
        if (!ok && bad++ == 0)
            first = i;
    }
    if (bad)
        fail_msg("%s: output %d: %lld of %lld elements differ; first at %lld: got %.9g, want %.9g",
                 what, k, (long long)bad, (long long)n, (long long)first, x[first], y[first]);
    free(x);
    free(y);
}

static tgc_fn *compile_llvm(tgc_model_fn fn, const char *name, tgc_dynamic dyn)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    cfg.dynamic = dyn;
    tgc_fn *f = tgc_compile(fn, name, &cfg);
    assert_non_null(f);
    return f;
}

/* One call of f (compiled) and of fn eagerly on interp, each after tgc_manual_seed(seed);
 * outputs compared. */
static void expect_call(tgc_fn *f, tgc_model_fn fn, const char *what, tgc_tensor **in, int n_in,
                        int n_out, uint64_t seed)
{
    tgc_tensor *got[MAX_OUT] = {0}, *want[MAX_OUT] = {0};
    tgc_manual_seed(seed);
    if (tgc_call(f, NULL, in, n_in, got, n_out) != TGC_OK)
        fail_msg("%s: %s", what, tgc_last_error());
    tgc_manual_seed(seed);
    tgc_eager_force_interp(1);
    tgc_status st = fn(NULL, in, n_in, want, n_out);
    tgc_eager_force_interp(0);
    if (st != TGC_OK)
        fail_msg("%s (interp): %s", what, tgc_last_error());
    for (int k = 0; k < n_out; k++)
        expect_close(what, k, got[k], want[k]);
}

/* The explain text of f; asserts that it holds `needle` (or, want == 0, does not). */
static void expect_explain(const tgc_fn *f, const char *needle, int want)
{
    char *e = tgc_fn_explain(f);
    assert_non_null(e);
    if ((strstr(e, needle) != NULL) != want)
        fail_msg("explain %s \"%s\":\n%s", want ? "lacks" : "has", needle, e);
    tgc_free(e);
}

static tgc_status all_set(tgc_tensor **out, int n)
{
    for (int i = 0; i < n; i++)
        if (!out[i])
            return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_INTERNAL;
    return TGC_OK;
}

/* ---- causal masking ---- */

/* q [2, 3, L, 5], k [2, 3, S, 5], v [2, 3, S, 6]; a bool mask [L, S] and a float mask
 * [3, L, S] with -inf entries, each with causal; and L > S on other inputs. */
MODEL(fn_causal)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, 1, 0.0);
    out[1] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, 1, 0.0);
    out[2] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[4], 0.0, 1, 0.3);
    out[3] = tgc_scaled_dot_product_attention(in[5], in[6], in[7], NULL, 0.0, 1, 0.0);
    return all_set(out, 4);
}

static void causal_inputs(int64_t L, int64_t S, tgc_tensor **in)
{
    in[0] = normal(SHAPE(2, 3, L, 5), TGC_F32);
    in[1] = normal(SHAPE(2, 3, S, 5), TGC_F32);
    in[2] = normal(SHAPE(2, 3, S, 6), TGC_F32);
    double *bm = malloc((size_t)(L * S) * sizeof *bm),
           *fm = malloc((size_t)(3 * L * S) * sizeof *fm);
    assert_true(bm && fm);
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++)
            bm[i * S + j] = i == 1 ? 0.0 : (i + 2 * j) % 3 != 0; /* row 1 fully masked */
    for (int64_t e = 0; e < 3 * L * S; e++)
        fm[e] = e % 5 == 0 ? -INFINITY : 0.25 * (double)(e % 7) - 0.5;
    fm[0 * S + 3] = INFINITY; /* past the diagonal: causal masks it whatever it adds */
    in[3] = from_f64(bm, SHAPE(L, S), TGC_BOOL);
    in[4] = from_f64(fm, SHAPE(3, L, S), TGC_F32);
    free(bm);
    free(fm);
    in[5] = normal(SHAPE(4, L + 6, 3), TGC_F32); /* L + 6 queries over L keys */
    in[6] = normal(SHAPE(4, L, 3), TGC_F32);
    in[7] = normal(SHAPE(4, L, 7), TGC_F32);
    in[8] = normal(SHAPE(3, S, 5), TGC_F32); /* k broadcast over q's batch */
}

/* k's batch broadcast over q's (the GEMMs of such batches run on interp: values only) */
MODEL(fn_causal_broadcast)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[8], in[2], in[3], 0.0, 1, 0.0);
    return all_set(out, 1);
}

static void causal_attention_matches_interp(void **state)
{
    (void)state;
    tgc_tensor *in[9];
    causal_inputs(7, 11, in);
    tgc_fn *f = compile_llvm(fn_causal, "causal", TGC_DYNAMIC_NEVER);
    expect_call(f, fn_causal, "causal", in, 9, 4, 1);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.eager_fallbacks, 0);
    expect_explain(f, "no step on interp", 1);
    tgc_fn_free(f);

    /* symbolic L and S: one compile serves both sizes */
    f = compile_llvm(fn_causal, "causal_dyn", TGC_DYNAMIC_ALWAYS);
    expect_call(f, fn_causal, "causal_dyn", in, 9, 4, 1);
    tgc_tensor *in2[9];
    causal_inputs(13, 4, in2);
    expect_call(f, fn_causal, "causal_dyn", in2, 9, 4, 1);
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    tgc_fn_free(f);
    f = compile_llvm(fn_causal_broadcast, "causal_broadcast", TGC_DYNAMIC_NEVER);
    expect_call(f, fn_causal_broadcast, "causal_broadcast", in, 9, 1, 1);
    tgc_fn_free(f);

    /* eager: the one-node graph compiles to the same kernels */
    tgc_tensor *e = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[4], 0.0, 1, 0.3);
    tgc_eager_force_interp(1);
    tgc_tensor *w = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[4], 0.0, 1, 0.3);
    tgc_eager_force_interp(0);
    expect_close("causal eager", 0, e, w);
}

typedef struct log_sink {
    char kernels[1 << 17];
    char perf[1 << 14];
} log_sink;

static void collect_log(unsigned channel, const char *message, void *user)
{
    log_sink *s = user;
    char *dst = channel == TGC_LOG_KERNELS ? s->kernels : channel == TGC_LOG_PERF ? s->perf : NULL;
    if (!dst)
        return;
    size_t cap = channel == TGC_LOG_KERNELS ? sizeof s->kernels : sizeof s->perf;
    strncat(dst, message, cap - strlen(dst) - 2);
    strcat(dst, "\n");
}

static tgc_fn *compile_logged(tgc_model_fn fn, const char *name, log_sink *sink)
{
    memset(sink, 0, sizeof *sink);
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    cfg.dynamic = TGC_DYNAMIC_NEVER;
    cfg.log = TGC_LOG_KERNELS | TGC_LOG_PERF;
    cfg.log_fn = collect_log;
    cfg.log_user = sink;
    tgc_fn *f = tgc_compile(fn, name, &cfg);
    assert_non_null(f);
    return f;
}

MODEL(fn_causal_only)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, 1, 0.0);
    return all_set(out, 1);
}

/* The kernels compute the positions (KV_INDEX values) and read no bool buffer: the causal
 * mask is never stored or loaded. */
static void causal_mask_is_computed_in_the_kernels(void **state)
{
    (void)state;
    static log_sink sink;
    tgc_fn *f = compile_logged(fn_causal_only, "causal_ir", &sink);
    tgc_tensor *in[3] = {normal(SHAPE(2, 9, 4), TGC_F32), normal(SHAPE(2, 9, 4), TGC_F32),
                         normal(SHAPE(2, 9, 4), TGC_F32)};
    expect_call(f, fn_causal_only, "causal_ir", in, 3, 1, 1);
    tgc_fn_free(f);
    if (!strstr(sink.kernels, "= index "))
        fail_msg("no kernel computes positions:\n%s", sink.kernels);
    for (const char *l = sink.kernels; (l = strstr(l, "\n  buf")) != NULL; l++) {
        const char *eol = strchr(l + 1, '\n');
        const char *b = strstr(l, " bool");
        if (b && (!eol || b < eol))
            fail_msg("a kernel reads or writes a bool buffer:\n%s", sink.kernels);
    }
    if (strstr(sink.perf, "on interp"))
        fail_msg("a step runs on interp:\n%s", sink.perf);
}

/* arange itself on LLVM, as interp computes it (f[0] + i * f[1] in double, then the dtype).
 * A static arange is a constant of the trace; one of a symbolic length is a graph node: a
 * graph output (stored), read through a view by a loop kernel and by a GEMM's epilogue
 * (computed there), and as a GEMM operand and under a pool window, which read buffers (so it
 * is stored for them). */
MODEL(fn_aranges)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_symint n = tgc_sym_size(in[0], 0);
    tgc_tensor *a = tgc_arange_sym(0, n, 1, TGC_F32, tgc_cpu());
    tgc_tensor *b = tgc_arange_sym(0, n, 1, TGC_I32, tgc_cpu());
    tgc_tensor *col = tgc_unsqueeze(a, 1); /* [n, 1] */
    out[0] = a;
    out[1] = tgc_mul(in[0], col);
    out[2] = tgc_add(b, b);
    out[3] = tgc_add(tgc_matmul(in[0], in[1]), col);
    /* read by nothing else (other dtypes than a, so no CSE merges them with it) */
    tgc_tensor *ci = tgc_cast(tgc_unsqueeze(tgc_arange_sym(0, n, 1, TGC_I64, tgc_cpu()), 1),
                              TGC_F32); /* a pointwise node of an arange: computed where read */
    out[4] = tgc_matmul(tgc_transpose(in[0], 0, 1), ci);
    tgc_symint s4[4] = {tgc_symint_const(1), tgc_symint_const(1), n, tgc_symint_const(1)};
    tgc_tensor *d = tgc_arange_sym(0, n, 1, TGC_F64, tgc_cpu());
    out[5] = tgc_max_pool2d(tgc_reshape_sym(d, s4, 4),
                            &(tgc_pool2d_opts){.kernel = {2, 1}, .stride = {1, 1}});
    return all_set(out, 6);
}

static void arange_runs_natively_as_interp_computes_it(void **state)
{
    (void)state;
    static log_sink sink;
    memset(&sink, 0, sizeof sink);
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    cfg.dynamic = TGC_DYNAMIC_ALWAYS;
    cfg.log = TGC_LOG_KERNELS | TGC_LOG_PERF;
    cfg.log_fn = collect_log;
    cfg.log_user = &sink;
    tgc_fn *f = tgc_compile(fn_aranges, "aranges", &cfg);
    assert_non_null(f);
    tgc_tensor *in[2] = {normal(SHAPE(9, 5), TGC_F32), normal(SHAPE(5, 6), TGC_F32)};
    expect_call(f, fn_aranges, "aranges", in, 2, 6, 1);
    tgc_tensor *in2[2] = {normal(SHAPE(4, 5), TGC_F32), in[1]};
    expect_call(f, fn_aranges, "aranges", in2, 2, 6, 1);
    tgc_fn_free(f);
    if (!strstr(sink.kernels, "= index "))
        fail_msg("no kernel computes an arange:\n%s", sink.kernels);
    if (strstr(sink.perf, "runs arange"))
        fail_msg("arange runs on interp:\n%s", sink.perf);
}

/* ---- dropout ---- */

/* With v the identity, the output is the dropped weights themselves. */
MODEL(fn_dropout)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.4, 0, 0.0);
    out[1] = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.25, 1, 0.0);
    /* a draw after the attention's: the stream is where interp leaves it */
    out[2] = tgc_rand(SHAPE(5), TGC_F32, tgc_cpu());
    return all_set(out, 3);
}

static void dropout_inputs(tgc_tensor **in)
{
    double eye[9 * 9] = {0}, m[9];
    for (int i = 0; i < 9; i++) {
        eye[i * 9 + i] = 1.0;
        m[i] = i % 4 != 2;
    }
    in[0] = normal(SHAPE(2, 3, 7, 4), TGC_F32);
    in[1] = normal(SHAPE(2, 3, 9, 4), TGC_F32);
    in[2] = from_f64(eye, SHAPE(9, 9), TGC_F32);
    in[3] = from_f64(m, SHAPE(9), TGC_BOOL);
}

static void attention_dropout_keeps_interps_elements(void **state)
{
    (void)state;
    tgc_tensor *in[4];
    dropout_inputs(in);
    tgc_fn *f = compile_llvm(fn_dropout, "dropout", TGC_DYNAMIC_NEVER);
    for (uint64_t seed = 1; seed <= 3; seed++)
        expect_call(f, fn_dropout, "dropout", in, 4, 3, seed);
    expect_explain(f, "no step on interp", 1);
    /* the kept elements of a call are exactly interp's: zeros where it dropped, and some of
     * each (the pattern is not all or nothing) */
    tgc_tensor *got[3], *want[3];
    tgc_manual_seed(5);
    assert_int_equal(tgc_call(f, NULL, in, 4, got, 3), TGC_OK);
    tgc_manual_seed(5);
    tgc_eager_force_interp(1);
    assert_int_equal(fn_dropout(NULL, in, 4, want, 3), TGC_OK);
    tgc_eager_force_interp(0);
    double *x = host_f64(got[0]), *y = host_f64(want[0]);
    int64_t n = tgc_numel(want[0]), zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(x[i] == 0.0, y[i] == 0.0);
        zeros += y[i] == 0.0;
    }
    assert_true(zeros > n / 5 && zeros < n * 3 / 5); /* p = 0.4 */
    free(x);
    free(y);
    tgc_fn_free(f);

    /* eagerly on the LLVM kernels, the same bits */
    tgc_manual_seed(9);
    tgc_tensor *e = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.25, 1, 0.0);
    tgc_tensor *er = tgc_rand(SHAPE(5), TGC_F32, tgc_cpu());
    tgc_manual_seed(9);
    tgc_eager_force_interp(1);
    tgc_tensor *w = tgc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.25, 1, 0.0);
    tgc_tensor *wr = tgc_rand(SHAPE(5), TGC_F32, tgc_cpu());
    tgc_eager_force_interp(0);
    expect_close("dropout eager", 0, e, w);
    expect_close("dropout eager stream", 1, er, wr);
}

/* ---- what explain and the perf log say about interp steps ---- */

MODEL(fn_f64_attention)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_exp(tgc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, 1, 0.0));
    out[1] = tgc_argmax(in[3], 0, 0);
    out[2] = tgc_mul_scalar(in[4], 3.0); /* the llvm scalar ops are float ops */
    return all_set(out, 3);
}

static void explain_lists_each_interp_step_with_its_reason(void **state)
{
    (void)state;
    static log_sink sink;
    tgc_fn *f = compile_logged(fn_f64_attention, "f64_attention", &sink);
    tgc_tensor *in[5] = {normal(SHAPE(2, 5, 3), TGC_F64), normal(SHAPE(2, 6, 3), TGC_F64),
                         normal(SHAPE(2, 6, 4), TGC_F64), normal(SHAPE(7, 3), TGC_F32),
                         from_f64((const double[]){1, -2, 3, 4, 5}, SHAPE(5), TGC_I32)};
    expect_call(f, fn_f64_attention, "f64_attention", in, 5, 3, 1);
    char *e = tgc_fn_explain(f);
    assert_non_null(e);
    const char *steps = strstr(e, "3 steps on interp:\n");
    if (!steps)
        fail_msg("explain lacks the interp steps:\n%s", e);
    const char *sdpa = strstr(steps, ": scaled_dot_product_attention f64[2, 5, 4] on interp: "
                                     "attention is native on llvm in f32 only\n");
    const char *am = strstr(steps, ": argmax i64[3] on interp: no llvm kernel for this op\n");
    const char *ms = strstr(steps, ": mul_scalar i32[5] on interp: no llvm kernel for this op "
                                   "with these dtypes\n");
    if (!sdpa || !am || !ms)
        fail_msg("explain lacks a step or its reason:\n%s", e);
    assert_null(strstr(e, "no step on interp"));
    tgc_free(e);
    tgc_fn_free(f);
    assert_non_null(strstr(sink.perf,
                           "'f64_attention_v1' runs scaled_dot_product_attention on interp "
                           "(1 node): the llvm backend has no kernel for it (attention "
                           "is native on llvm in f32 only)"));
    assert_non_null(strstr(sink.perf, "'f64_attention_v1' runs argmax on interp (1 node): the llvm "
                                      "backend has no kernel for it (no llvm kernel for this op)"));
}

/* An in-place write of a module buffer is an ASSIGN step, a copy the executor makes itself:
 * not an interp fallback, on the perf log or in explain. */
MODEL(fn_counter)
{
    (void)n_in, (void)n_out;
    tgc_tensor *c = tgc_module_get(self, "count");
    tgc_status st = tgc_copy_(c, tgc_add_scalar(c, 1.0));
    out[0] = tgc_exp(in[0]);
    return st != TGC_OK ? st : all_set(out, 1);
}

static void assign_steps_are_not_interp_fallbacks(void **state)
{
    (void)state;
    static log_sink sink;
    tgc_module *m = tgc_module_create("counter", NULL);
    assert_non_null(m);
    assert_non_null(tgc_module_buffer(m, "count", tgc_zeros(SHAPE(3), TGC_F32, tgc_cpu())));
    tgc_fn *f = compile_logged(fn_counter, "counter", &sink);
    tgc_tensor *in[1] = {normal(SHAPE(4), TGC_F32)}, *out[1];
    for (int i = 0; i < 2; i++)
        assert_int_equal(tgc_call(f, m, in, 1, out, 1), TGC_OK);
    assert_true(tgc_item_f64(tgc_module_get(m, "count")) == 2.0);
    char *g = tgc_fn_graph(f, 0, 0);
    assert_non_null(g);
    assert_non_null(strstr(g, "assign")); /* the variant has its ASSIGN step */
    tgc_free(g);
    expect_explain(f, "no step on interp", 1);
    expect_explain(f, "assign", 0);
    if (strstr(sink.perf, "assign"))
        fail_msg("the perf log names the assign:\n%s", sink.perf);
    tgc_fn_free(f);
    tgc_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(causal_attention_matches_interp, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(causal_mask_is_computed_in_the_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(arange_runs_natively_as_interp_computes_it, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(attention_dropout_keeps_interps_elements, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(explain_lists_each_interp_step_with_its_reason,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(assign_steps_are_not_interp_fallbacks, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}

#else
static void test_llvm_absent(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llvm_absent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
