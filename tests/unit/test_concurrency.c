/* Many threads at once: threads making the first tgc_call of their own
 * tgc_fn (so compiling distinct functions: GEMM, linear, conv, batched matmul, pointwise and
 * reduction kernels), threads running eager ops (which compile and cache per-op kernels),
 * and threads calling one shared tgc_fn, all started together. Every result is checked
 * against a reference computed here with plain C loops.
 *
 * Before the fix, two threads binding the kernels of different functions ran LLVM's code
 * generator concurrently on the JIT's one TargetMachine: segfaults, "JIT session error:
 * Missing definitions" or corrupt objects. Also threads calling one function with two
 * modules, whose weight-only results the function keeps between calls. `make test-tsan` runs
 * this test under ThreadSanitizer too. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

#define THREADS 8
#define MAX_IN  3
#define MAX_OUT 4096

/* ---- models and their references ---- */

typedef void (*ref_fn)(float *const *in, float *out);

typedef struct model_case {
    const char *name;
    tgc_model_fn fn;
    ref_fn ref;
    int n_in;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][4];
    int64_t out_numel;
} model_case;

static tgc_status finish(tgc_tensor *y, tgc_tensor **out)
{
    out[0] = y;
    return y ? TGC_OK : tgc_last_status();
}

/* C[m][n] = sum_k A[m][k] * B(k, n), B read through strides. */
static void ref_gemm(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
                     int64_t b_ks, int64_t b_ns)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)a[i * k + p] * b[p * b_ks + j * b_ns];
            c[i * n + j] = (float)s;
        }
}

/* relu(x @ x^T), x [24, 40] */
static tgc_status m_relu_mm(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    return finish(tgc_relu(tgc_matmul(in[0], tgc_transpose(in[0], 0, 1))), out);
}
static void r_relu_mm(float *const *in, float *out)
{
    ref_gemm(in[0], in[0], out, 24, 24, 40, 1, 40);
    for (int i = 0; i < 24 * 24; i++)
        out[i] = out[i] > 0 ? out[i] : 0;
}

/* relu(linear(x, w, b)) * 0.5 + 1, x [20, 36], w [28, 36], b [28] */
static tgc_status m_linear(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *y = tgc_relu(tgc_linear(in[0], in[1], in[2]));
    return finish(tgc_add_scalar(tgc_mul_scalar(y, 0.5), 1.0), out);
}
static void r_linear(float *const *in, float *out)
{
    ref_gemm(in[0], in[1], out, 20, 28, 36, 1, 36);
    for (int i = 0; i < 20; i++)
        for (int j = 0; j < 28; j++) {
            float v = out[i * 28 + j] + in[2][j];
            out[i * 28 + j] = (v > 0 ? v : 0) * 0.5f + 1.0f;
        }
}

/* The one place this file calls tgc_conv2d. */
static tgc_tensor *conv_s1_p1(tgc_tensor *x, tgc_tensor *w, tgc_tensor *b)
{
    return tgc_conv2d(x, w, b, &(tgc_conv2d_opts){.padding = {1, 1}});
}

/* relu(conv2d(x, w, b, stride 1, padding 1)), x [2, 3, 9, 10], w [4, 3, 3, 3], b [4] */
static tgc_status m_conv(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    return finish(tgc_relu(conv_s1_p1(in[0], in[1], in[2])), out);
}
static void ref_conv(const float *x, const float *w, const float *b, float *out, int relu)
{
    enum { N = 2, C = 3, H = 9, W = 10, O = 4, K = 3 };
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int h = 0; h < H; h++)
                for (int v = 0; v < W; v++) {
                    double s = b[o];
                    for (int c = 0; c < C; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                int hh = h + i - 1, ww = v + j - 1;
                                if (hh >= 0 && hh < H && ww >= 0 && ww < W)
                                    s += (double)x[((n * C + c) * H + hh) * W + ww] *
                                         w[((o * C + c) * K + i) * K + j];
                            }
                    float f = (float)s;
                    out[((n * O + o) * H + h) * W + v] = relu && f < 0 ? 0 : f;
                }
}
static void r_conv(float *const *in, float *out)
{
    ref_conv(in[0], in[1], in[2], out, 1);
}

/* softmax(x, 1), x [16, 33] */
static tgc_status m_softmax(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    return finish(tgc_softmax(in[0], 1), out);
}
static void r_softmax(float *const *in, float *out)
{
    for (int i = 0; i < 16; i++) {
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < 33; j++)
            mx = fmax(mx, in[0][i * 33 + j]);
        for (int j = 0; j < 33; j++)
            s += exp(in[0][i * 33 + j] - mx);
        for (int j = 0; j < 33; j++)
            out[i * 33 + j] = (float)(exp(in[0][i * 33 + j] - mx) / s);
    }
}

/* x - mean(x, {1}, keepdim), x [12, 50] */
static tgc_status m_center(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int d = 1;
    return finish(tgc_sub(in[0], tgc_mean(in[0], &d, 1, 1)), out);
}
static void r_center(float *const *in, float *out)
{
    for (int i = 0; i < 12; i++) {
        double s = 0;
        for (int j = 0; j < 50; j++)
            s += in[0][i * 50 + j];
        for (int j = 0; j < 50; j++)
            out[i * 50 + j] = (float)(in[0][i * 50 + j] - s / 50);
    }
}

/* matmul(a, b) + 1, a [2, 8, 12], b [12, 20] (batched GEMM) */
static tgc_status m_bmm(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    return finish(tgc_add_scalar(tgc_matmul(in[0], in[1]), 1.0), out);
}
static void r_bmm(float *const *in, float *out)
{
    for (int bi = 0; bi < 2; bi++)
        ref_gemm(in[0] + bi * 8 * 12, in[1], out + bi * 8 * 20, 8, 20, 12, 20, 1);
    for (int i = 0; i < 2 * 8 * 20; i++)
        out[i] += 1.0f;
}

/* exp(x - max(x, {1}, keepdim)) * 3, x [10, 17] */
static tgc_status m_expmax(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int d = 1;
    return finish(tgc_mul_scalar(tgc_exp(tgc_sub(in[0], tgc_max(in[0], &d, 1, 1))), 3.0), out);
}
static void r_expmax(float *const *in, float *out)
{
    for (int i = 0; i < 10; i++) {
        float mx = -INFINITY;
        for (int j = 0; j < 17; j++)
            mx = fmaxf(mx, in[0][i * 17 + j]);
        for (int j = 0; j < 17; j++)
            out[i * 17 + j] = 3.0f * expf(in[0][i * 17 + j] - mx);
    }
}

/* sum(linear(x, w), {1}), x [18, 24], w [30, 24]: a GEMM, then a reduction */
static tgc_status m_linsum(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int d = 1;
    return finish(tgc_sum(tgc_linear(in[0], in[1], NULL), &d, 1, 0), out);
}
static void r_linsum(float *const *in, float *out)
{
    float y[18 * 30];
    ref_gemm(in[0], in[1], y, 18, 30, 24, 1, 24);
    for (int i = 0; i < 18; i++) {
        double s = 0;
        for (int j = 0; j < 30; j++)
            s += y[i * 30 + j];
        out[i] = (float)s;
    }
}

static const model_case g_models[] = {
    {"relu_mm", m_relu_mm, r_relu_mm, 1, {2}, {{24, 40}}, 24 * 24},
    {"linear", m_linear, r_linear, 3, {2, 2, 1}, {{20, 36}, {28, 36}, {28}}, 20 * 28},
    {"conv", m_conv, r_conv, 3, {4, 4, 1}, {{2, 3, 9, 10}, {4, 3, 3, 3}, {4}}, 2 * 4 * 9 * 10},
    {"softmax", m_softmax, r_softmax, 1, {2}, {{16, 33}}, 16 * 33},
    {"center", m_center, r_center, 1, {2}, {{12, 50}}, 12 * 50},
    {"bmm", m_bmm, r_bmm, 2, {3, 2}, {{2, 8, 12}, {12, 20}}, 2 * 8 * 20},
    {"expmax", m_expmax, r_expmax, 1, {2}, {{10, 17}}, 10 * 17},
    {"linsum", m_linsum, r_linsum, 2, {2, 2}, {{18, 24}, {30, 24}}, 18},
};
#define N_MODELS ((int)(sizeof g_models / sizeof g_models[0]))

/* ---- helpers ---- */

static int64_t numel_of(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* Small multiples of 1/8 in [-0.75, 0.5]: products and short sums are exact in f32. */
static void fill(float *p, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 7 + seed * 5) % 11 - 6) * 0.125f;
}

/* Compares t with want; on a mismatch prints one line and returns 1. */
static int check_values(const char *who, tgc_tensor *t, const float *want, int64_t n)
{
    if (!t || tgc_numel(t) != n || n > MAX_OUT) {
        printf("%s: wrong result (%s; numel %lld, want %lld)\n", who, t ? "tensor" : "NULL",
               t ? (long long)tgc_numel(t) : -1LL, (long long)n);
        return 1;
    }
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf || tgc_copy_to_host(t, buf, (size_t)n * sizeof *buf) != TGC_OK) {
        printf("%s: tgc_copy_to_host failed: %s\n", who, tgc_last_error());
        free(buf);
        return 1;
    }
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++)
        if (!(fabsf(buf[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])))) {
            printf("%s: element %lld is %.7g, want %.7g\n", who, (long long)i, buf[i], want[i]);
            bad = 1;
        }
    free(buf);
    return bad;
}

/* Builds the inputs of model m (values from seed), runs fn (or, with f NULL, the model
 * eagerly) and checks the result. Returns the number of failures (0 or 1). */
static int run_case(const char *who, const model_case *m, tgc_fn *f, int seed)
{
    float *host[MAX_IN] = {0};
    tgc_tensor *in[MAX_IN] = {0};
    float want[MAX_OUT];
    int bad = 0;
    tgc_scope_push();
    for (int i = 0; i < m->n_in; i++) {
        int64_t n = numel_of(m->shape[i], m->ndim[i]);
        host[i] = malloc((size_t)n * sizeof(float));
        if (!host[i]) {
            bad = 1;
            break;
        }
        fill(host[i], n, seed + 3 * i);
        in[i] = tgc_from_data(host[i], (size_t)n * sizeof(float), m->shape[i], m->ndim[i], TGC_F32,
                              tgc_cpu());
    }
    if (!bad) {
        m->ref(host, want);
        tgc_tensor *y = NULL;
        tgc_status st = f ? tgc_call(f, NULL, in, m->n_in, &y, 1) : m->fn(NULL, in, m->n_in, &y, 1);
        if (st != TGC_OK) {
            printf("%s: %s failed: %s\n", who, m->name, tgc_last_error());
            bad = 1;
        } else {
            bad = check_values(who, y, want, m->out_numel);
        }
    }
    tgc_scope_pop();
    for (int i = 0; i < MAX_IN; i++)
        free(host[i]);
    return bad;
}

static tgc_fn *compile_llvm(const model_case *m)
{
    tgc_config c = tgc_config_default();
    c.log = 0;
    return tgc_compile(m->fn, m->name, &c);
}

/* ---- the mixed workload ---- */

static pthread_barrier_t g_start;
static tgc_fn *g_shared;

typedef struct worker_arg {
    int id;
    int failures;
} worker_arg;

/* Starts THREADS threads of fn (each with its worker_arg, released together by g_start) and
 * returns the failures they counted. */
static int run_threads(void *(*fn)(void *))
{
    assert_int_equal(pthread_barrier_init(&g_start, NULL, THREADS), 0);
    pthread_t t[THREADS];
    worker_arg w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_arg){i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, fn, &w[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
    }
    pthread_barrier_destroy(&g_start);
    return failures;
}

/* Threads 0-3: two distinct models each, compiled and called three times. */
static void compile_distinct(worker_arg *w)
{
    char who[64];
    for (int k = 0; k < 2; k++) {
        const model_case *m = &g_models[2 * w->id + k];
        snprintf(who, sizeof who, "thread %d (%s, compiled)", w->id, m->name);
        tgc_fn *f = compile_llvm(m);
        if (!f) {
            printf("%s: tgc_compile failed: %s\n", who, tgc_last_error());
            w->failures++;
            continue;
        }
        for (int call = 0; call < 3; call++)
            w->failures += run_case(who, m, f, call + w->id);
        tgc_stats s;
        if (tgc_fn_stats(f, &s) != TGC_OK || s.compiles != 1 || s.cache_hits != 2) {
            printf("%s: %llu compiles and %llu hits, want 1 and 2\n", who,
                   (unsigned long long)s.compiles, (unsigned long long)s.cache_hits);
            w->failures++;
        }
        tgc_fn_free(f);
    }
}

/* Threads 4-5: every model run eagerly (per-op kernels compile on first use). */
static void run_eager(worker_arg *w)
{
    char who[64];
    for (int rep = 0; rep < 2; rep++)
        for (int k = 0; k < N_MODELS; k++) {
            const model_case *m = &g_models[(k + 3 * w->id) % N_MODELS];
            snprintf(who, sizeof who, "thread %d (%s, eager)", w->id, m->name);
            w->failures += run_case(who, m, NULL, rep + k + w->id);
        }
}

/* Threads 6-7: one tgc_fn shared by both, its first call included. */
static void call_shared(worker_arg *w)
{
    char who[64];
    snprintf(who, sizeof who, "thread %d (shared relu_mm)", w->id);
    for (int call = 0; call < 10; call++)
        w->failures += run_case(who, &g_models[0], g_shared, call + w->id);
}

static void *worker(void *arg)
{
    worker_arg *w = arg;
    pthread_barrier_wait(&g_start);
    if (w->id < 4)
        compile_distinct(w);
    else if (w->id < 6)
        run_eager(w);
    else
        call_shared(w);
    tgc_shutdown();
    return NULL;
}

static void compiles_eager_ops_and_shared_calls_at_once(void **state)
{
    (void)state;
    g_shared = compile_llvm(&g_models[0]);
    assert_non_null(g_shared);
    assert_int_equal(run_threads(worker), 0);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(g_shared, &s), TGC_OK);
    assert_int_equal(s.calls, 20);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 19);
    tgc_fn_free(g_shared);
    g_shared = NULL;
}

/* ---- the reproducer: first calls of separate tgc_fns of one model at once ---- */

static void *first_call(void *arg)
{
    worker_arg *w = arg;
    char who[64];
    snprintf(who, sizeof who, "thread %d (own relu_mm)", w->id);
    tgc_fn *f = compile_llvm(&g_models[0]);
    pthread_barrier_wait(&g_start);
    w->failures += f ? run_case(who, &g_models[0], f, w->id) : 1;
    tgc_fn_free(f);
    tgc_shutdown();
    return NULL;
}

static void first_calls_of_separate_fns_at_once(void **state)
{
    (void)state;
    assert_int_equal(run_threads(first_call), 0);
}

/* ---- kept values under concurrent calls ---- */

/* conv2d(x, w, padding 1) * (s + 1), x [2, 4, 1, 1], w [6, 4, 3, 3], s [6]: on a 1x1 image
 * only the centre tap of w reads x, so the variant begins with steps that read only the
 * module (w's live tap, s + 1), whose results the shared function keeps between calls. */
static tgc_status m_kept(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)n_in, (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w"), *sc = tgc_module_get(self, "s");
    tgc_tensor *y = tgc_conv2d(in[0], w, NULL, &(tgc_conv2d_opts){.padding = {1, 1}});
    tgc_tensor *s1 = tgc_reshape(tgc_add_scalar(sc, 1.0), (int64_t[]){1, 6, 1, 1}, 4);
    return finish(tgc_mul(y, s1), out);
}

typedef struct kept_model {
    tgc_module *m;
    float w[6 * 4 * 9], s[6];
} kept_model;

static kept_model g_kept[2];
static tgc_fn *g_kept_fn;

static int kept_call(const char *who, const kept_model *km, int seed)
{
    float x[8], want[12];
    fill(x, 8, seed);
    for (int n = 0; n < 2; n++)
        for (int o = 0; o < 6; o++) {
            float acc = 0;
            for (int c = 0; c < 4; c++)
                acc += x[n * 4 + c] * km->w[(o * 4 + c) * 9 + 4];
            want[n * 6 + o] = acc * (km->s[o] + 1.0f);
        }
    tgc_scope_push();
    tgc_tensor *xt = tgc_from_data(x, sizeof x, (int64_t[]){2, 4, 1, 1}, 4, TGC_F32, tgc_cpu()),
               *y = NULL;
    int bad = 0;
    if (tgc_call(g_kept_fn, km->m, &xt, 1, &y, 1) != TGC_OK) {
        printf("%s: tgc_call failed: %s\n", who, tgc_last_error());
        bad = 1;
    } else {
        bad = check_values(who, y, want, 12);
    }
    tgc_scope_pop();
    return bad;
}

static void *kept_worker(void *arg)
{
    worker_arg *w = arg;
    char who[64];
    pthread_barrier_wait(&g_start);
    for (int call = 0; call < 20; call++) {
        int which = (call + w->id) % 2;
        snprintf(who, sizeof who, "thread %d (module %c)", w->id, 'A' + which);
        w->failures += kept_call(who, &g_kept[which], call + w->id);
    }
    tgc_shutdown();
    return NULL;
}

/* Threads calling one function with two modules of one structure, interleaved: one call at a
 * time holds the host's arena and its kept values, the others run in private arenas, and
 * every result is the one of the module it was called with. */
static void shared_calls_keep_values_per_module(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        kept_model *km = &g_kept[k];
        fill(km->w, 6 * 4 * 9, 7 + k);
        fill(km->s, 6, 3 + 2 * k);
        km->m = tgc_module_create("kept", NULL);
        assert_non_null(km->m);
        tgc_scope_push();
        assert_non_null(tgc_module_param(
            km->m, "w",
            tgc_from_data(km->w, sizeof km->w, (int64_t[]){6, 4, 3, 3}, 4, TGC_F32, tgc_cpu())));
        assert_non_null(tgc_module_param(
            km->m, "s", tgc_from_data(km->s, sizeof km->s, (int64_t[]){6}, 1, TGC_F32, tgc_cpu())));
        tgc_scope_pop();
    }
    tgc_config c = tgc_config_default();
    c.log = 0;
    g_kept_fn = tgc_compile(m_kept, "kept", &c);
    assert_non_null(g_kept_fn);
    assert_int_equal(kept_call("main", &g_kept[0], 1), 0);
    char *ex = tgc_fn_explain(g_kept_fn);
    assert_non_null(ex);
    assert_non_null(strstr(ex, "read only module tensors and constants"));
    tgc_free(ex);
    assert_int_equal(run_threads(kept_worker), 0);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(g_kept_fn, &st), TGC_OK);
    assert_int_equal(st.compiles, 1);
    tgc_fn_free(g_kept_fn);
    g_kept_fn = NULL;
    for (int k = 0; k < 2; k++)
        tgc_module_free(g_kept[k].m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_calls_of_separate_fns_at_once),
        cmocka_unit_test(compiles_eager_ops_and_shared_calls_at_once),
        cmocka_unit_test(shared_calls_keep_values_per_module),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
