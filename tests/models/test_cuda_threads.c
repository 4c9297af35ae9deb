/* One tgc_fn called on the GPU from many threads at once (label `gpu`; skips without a GPU).
 *
 * Each of THREADS threads has its own inputs (two, used in turn) and its own stream (the
 * runtime's per-thread stream), and calls the shared function CALLS times; every result is
 * compared with the result the same function gave for the same input on the main thread
 * before any worker started (single-threaded). The modes: DEFAULT (cfg.backend = CUDA),
 * REDUCE_OVERHEAD (recorded and replayed CUDA graphs) and eager (backend EAGER: every op on
 * the eager engine's shared per-op plans). The models, batch 32:
 *   mlp   linear 512 -> 1024, GELU, layer norm, linear 1024 -> 256, softmax (both GEMMs
 *         have so few output tiles that they run split-K through a workspace);
 *   conv  conv2d 8 -> 16 (3x3, padding 1) on 16x16 images, GELU.
 * A result is wrong when an element differs from the single-threaded one by more than
 * 1e-5 + 1e-5 |want| (the kernels are deterministic: a race gives another call's values or
 * garbage); each mode prints "tgc threads: <model> <mode>: W of N results wrong (...)". The
 * single-threaded results themselves are checked against the CPU (row-norm rule of
 * gpu_test_util.h, HIGHEST).
 *
 * A second group checks that a function's matmul precision survives its eager fallback: a
 * function with matmul_precision HIGH (TF32) that hits its cache limit runs its matmul
 * eagerly in TF32 too (visibly different from fp32, within TF32's tolerance of the CPU), and
 * a HIGHEST one in fp32. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_skip.h"
#include "gpu_test_util.h"
#include "tgc/tgc.h"

#define THREADS 8
#define CALLS   60
#define INPUTS  2 /* per thread */
#define BATCH   32

enum { MLP, CONV };

static const int64_t mlp_in[2] = {BATCH, 512};
static const int64_t conv_in[4] = {BATCH, 8, 16, 16};

static tgc_status mlp_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)n_in, (void)n_out;
    tgc_tensor *h =
        tgc_gelu(tgc_linear(in[0], tgc_module_get(self, "w1"), tgc_module_get(self, "b1")));
    h = tgc_layer_norm(h, 1, tgc_module_get(self, "ln_w"), tgc_module_get(self, "ln_b"), 1e-5);
    out[0] = tgc_softmax(tgc_linear(h, tgc_module_get(self, "w2"), tgc_module_get(self, "b2")), 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status conv_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)n_in, (void)n_out;
    tgc_conv2d_opts o = {.padding = {1, 1}};
    out[0] =
        tgc_gelu(tgc_conv2d(in[0], tgc_module_get(self, "wc"), tgc_module_get(self, "bc"), &o));
    return out[0] ? TGC_OK : tgc_last_status();
}

/* Deterministic host values (an LCG), so threads need no shared generator. */
static float *host_values(int64_t n, uint64_t seed, double scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; v && i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)(((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0) * scale);
    }
    return v;
}

static tgc_tensor *tensor_of(const int64_t *shape, int ndim, uint64_t seed, double scale,
                             tgc_device dev)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = host_values(n, seed, scale);
    tgc_tensor *t = v ? tgc_from_data(v, (size_t)n * sizeof *v, shape, ndim, TGC_F32, dev) : NULL;
    free(v);
    return t;
}

static void add_param(tgc_module *m, const char *name, const int64_t *shape, int ndim,
                      uint64_t seed, double scale)
{
    tgc_scope_push();
    tgc_tensor *t = tensor_of(shape, ndim, seed, scale, tgc_cpu());
    assert_non_null(t);
    assert_non_null(tgc_module_param(m, name, t));
    tgc_scope_pop();
}

static tgc_module *make_module(int model)
{
    tgc_module *m = tgc_module_create(model == MLP ? "mlp" : "conv", NULL);
    assert_non_null(m);
    if (model == MLP) {
        const int64_t w1[2] = {1024, 512}, b1[1] = {1024}, w2[2] = {256, 1024}, b2[1] = {256};
        add_param(m, "w1", w1, 2, 1, 0.05);
        add_param(m, "b1", b1, 1, 2, 0.1);
        add_param(m, "ln_w", b1, 1, 3, 1.0);
        add_param(m, "ln_b", b1, 1, 4, 0.1);
        add_param(m, "w2", w2, 2, 5, 0.03);
        add_param(m, "b2", b2, 1, 6, 0.1);
    } else {
        const int64_t wc[4] = {16, 8, 3, 3}, bc[1] = {16};
        add_param(m, "wc", wc, 4, 7, 0.2);
        add_param(m, "bc", bc, 1, 8, 0.1);
    }
    return m;
}

static tgc_tensor *input_of(int model, int thread, int k, tgc_device dev)
{
    uint64_t seed = 1000 + 100 * (uint64_t)thread + (uint64_t)k;
    return model == MLP ? tensor_of(mlp_in, 2, seed, 1.0, dev)
                        : tensor_of(conv_in, 4, seed, 1.0, dev);
}

/* ---- the shared function, the references and the workers ---- */

typedef struct shared {
    int model;
    tgc_fn *fn;
    tgc_module *m;
    float *ref[THREADS][INPUTS]; /* single-threaded results */
    int64_t n;                   /* elements of a result */
} shared;

typedef struct worker_arg {
    shared *s;
    int thread;
    int64_t wrong, exact, failed; /* results out of tolerance, not bit-equal, calls failed */
    char first[256];
} worker_arg;

/* Calls the function on x and copies its result to the host (the copy waits for this
 * thread's stream). */
static float *call_once(const shared *s, tgc_tensor *x, int64_t *n)
{
    tgc_scope_push();
    tgc_tensor *y = NULL;
    float *v = NULL;
    if (tgc_call(s->fn, s->m, &x, 1, &y, 1) == TGC_OK && y) {
        *n = tgc_numel(y);
        v = malloc((size_t)*n * sizeof *v);
        if (v && tgc_copy_to_host(y, v, (size_t)*n * sizeof *v) != TGC_OK) {
            free(v);
            v = NULL;
        }
    }
    tgc_scope_pop();
    return v;
}

static void *worker(void *p)
{
    worker_arg *a = p;
    const shared *s = a->s;
    tgc_tensor *x[INPUTS];
    for (int k = 0; k < INPUTS; k++)
        x[k] = input_of(s->model, a->thread, k, tgc_cuda(0));
    for (int i = 0; i < CALLS; i++) {
        int k = i % INPUTS;
        int64_t n = 0;
        float *v = x[k] ? call_once(s, x[k], &n) : NULL;
        if (!v || n != s->n) {
            if (!a->failed++)
                snprintf(a->first, sizeof a->first, "thread %d call %d failed: %s", a->thread, i,
                         tgc_last_error());
            free(v);
            continue;
        }
        const float *want = s->ref[a->thread][k];
        int bad = 0, diff = 0;
        for (int64_t e = 0; e < n; e++) {
            double d = fabs((double)v[e] - (double)want[e]);
            diff |= v[e] != want[e];
            if (!(d <= 1e-5 + 1e-5 * fabs((double)want[e]))) {
                if (!bad && !a->wrong)
                    snprintf(a->first, sizeof a->first,
                             "thread %d call %d element %lld: %.7g, single-threaded %.7g",
                             a->thread, i, (long long)e, (double)v[e], (double)want[e]);
                bad = 1;
            }
        }
        a->wrong += bad;
        a->exact += diff;
        free(v);
    }
    tgc_shutdown(); /* this thread's root scope: its inputs */
    return NULL;
}

static const char *mode_name(tgc_backend_kind b, tgc_mode m)
{
    return b == TGC_BACKEND_EAGER          ? "eager"
           : m == TGC_MODE_REDUCE_OVERHEAD ? "REDUCE_OVERHEAD"
                                           : "DEFAULT";
}

/* The CPU's result for thread 0's first input, against the GPU's single-threaded one. */
static void check_against_cpu(const shared *s)
{
    tgc_scope_push();
    tgc_module *mc = make_module(s->model);
    tgc_tensor *x = input_of(s->model, 0, 0, tgc_cpu()), *y = NULL;
    assert_int_equal(s->model == MLP ? mlp_fn(mc, &x, 1, &y, 1) : conv_fn(mc, &x, 1, &y, 1),
                     TGC_OK);
    int64_t shape[TGC_MAX_DIMS];
    int nd = tgc_shape(y, shape);
    tgc_tensor *g =
        tgc_from_data(s->ref[0][0], (size_t)s->n * sizeof(float), shape, nd, TGC_F32, tgc_cpu());
    gpu_cmp c = gpu_compare(g, y, gpu_precision_tol(TGC_PRECISION_HIGHEST), 5.0);
    if (!c.ok)
        fail_msg("the single-threaded GPU result differs from the CPU's: %s", c.msg);
    tgc_module_free(mc);
    tgc_scope_pop();
}

static void run_mode(int model, tgc_backend_kind backend, tgc_mode mode)
{
    GPU_REQUIRE();
    shared s;
    memset(&s, 0, sizeof s);
    s.model = model;
    s.m = make_module(model);
    assert_int_equal(tgc_module_to(s.m, tgc_cuda(0)), TGC_OK);
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    cfg.backend = backend;
    cfg.mode = mode;
    s.fn = tgc_compile(model == MLP ? mlp_fn : conv_fn, model == MLP ? "mlp" : "conv", &cfg);
    assert_non_null(s.fn);
    /* single-threaded references, each input called twice (a REDUCE_OVERHEAD plan warms up
     * and records on the main thread's stream too) */
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < INPUTS; k++) {
            tgc_scope_push();
            tgc_tensor *x = input_of(model, t, k, tgc_cuda(0));
            assert_non_null(x);
            for (int rep = 0; rep < 2; rep++) {
                free(s.ref[t][k]);
                s.ref[t][k] = call_once(&s, x, &s.n);
                if (!s.ref[t][k])
                    fail_msg("single-threaded call failed: %s", tgc_last_error());
            }
            tgc_scope_pop();
        }
    check_against_cpu(&s);
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    memset(args, 0, sizeof args);
    for (int t = 0; t < THREADS; t++) {
        args[t].s = &s;
        args[t].thread = t;
        assert_int_equal(pthread_create(&th[t], NULL, worker, &args[t]), 0);
    }
    int64_t wrong = 0, exact = 0, failed = 0;
    const char *first = NULL;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        wrong += args[t].wrong;
        exact += args[t].exact;
        failed += args[t].failed;
        if (!first && args[t].first[0])
            first = args[t].first;
    }
    printf("tgc threads: %s %s: %lld of %d results wrong (%d threads x %d calls, one tgc_fn; "
           "%lld not bit-equal, %lld calls failed)%s%s\n",
           model == MLP ? "mlp" : "conv", mode_name(backend, mode), (long long)wrong,
           THREADS * CALLS, THREADS, CALLS, (long long)exact, (long long)failed,
           first ? "; first: " : "", first ? first : "");
    fflush(stdout);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(s.fn, &st), TGC_OK);
    assert_int_equal(st.calls, 2 * THREADS * INPUTS + THREADS * CALLS);
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < INPUTS; k++)
            free(s.ref[t][k]);
    tgc_fn_free(s.fn);
    tgc_module_free(s.m);
    assert_int_equal(failed, 0);
    assert_int_equal(wrong, 0);
}

static void mlp_default(void **state)
{
    (void)state;
    run_mode(MLP, TGC_BACKEND_CUDA, TGC_MODE_DEFAULT);
}

static void mlp_reduce_overhead(void **state)
{
    (void)state;
    run_mode(MLP, TGC_BACKEND_CUDA, TGC_MODE_REDUCE_OVERHEAD);
}

static void mlp_eager(void **state)
{
    (void)state;
    run_mode(MLP, TGC_BACKEND_EAGER, TGC_MODE_DEFAULT);
}

static void conv_default(void **state)
{
    (void)state;
    run_mode(CONV, TGC_BACKEND_CUDA, TGC_MODE_DEFAULT);
}

static void conv_reduce_overhead(void **state)
{
    (void)state;
    run_mode(CONV, TGC_BACKEND_CUDA, TGC_MODE_REDUCE_OVERHEAD);
}

static void conv_eager(void **state)
{
    (void)state;
    run_mode(CONV, TGC_BACKEND_EAGER, TGC_MODE_DEFAULT);
}

/* ---- the precision of an eager fallback ---- */

static tgc_status matmul_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_matmul(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* max |a - b| over the rms of b */
static double rel_diff(const tgc_tensor *a, const tgc_tensor *b)
{
    int64_t n = 0, m = 0;
    double *x = gpu_values(a, &n), *y = gpu_values(b, &m);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(n, m);
    double worst = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        ss += y[i] * y[i];
        worst = fmax(worst, fabs(x[i] - y[i]));
    }
    free(x);
    free(y);
    return worst / sqrt(ss / (double)(n ? n : 1));
}

/* The eager fallback (cache limit 1: the second shape runs eagerly) of a function compiled
 * at precision p, on a [48, 1024] x [1024, 256] product. */
static tgc_tensor *fallback_result(tgc_matmul_precision p, tgc_tensor *a, tgc_tensor *b)
{
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    cfg.backend = TGC_BACKEND_CUDA;
    cfg.matmul_precision = p;
    cfg.cache_size_limit = 1;
    tgc_fn *f = tgc_compile(matmul_fn, "matmul", &cfg);
    assert_non_null(f);
    const int64_t s0[2] = {32, 1024};
    tgc_tensor *a0 = tensor_of(s0, 2, 77, 1.0, tgc_cuda(0)), *y = NULL;
    tgc_tensor *in0[2] = {a0, b};
    assert_int_equal(tgc_call(f, NULL, in0, 2, &y, 1), TGC_OK); /* compiled */
    tgc_tensor *in[2] = {a, b};
    assert_int_equal(tgc_call(f, NULL, in, 2, &y, 1), TGC_OK); /* the limit: eager */
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.eager_fallbacks, 1);
    tgc_fn_free(f);
    return y;
}

static void eager_fallback_keeps_tf32(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    const int64_t sa[2] = {48, 1024}, sb[2] = {1024, 256};
    tgc_tensor *a = tensor_of(sa, 2, 11, 1.0, tgc_cuda(0)),
               *b = tensor_of(sb, 2, 12, 1.0, tgc_cuda(0));
    assert_non_null(a);
    assert_non_null(b);
    tgc_tensor *ac = tgc_to(a, tgc_cpu()), *bc = tgc_to(b, tgc_cpu());
    tgc_tensor *ref = tgc_matmul(ac, bc); /* the CPU: fp32 */
    tgc_tensor *high = fallback_result(TGC_PRECISION_HIGH, a, b);
    tgc_tensor *highest = fallback_result(TGC_PRECISION_HIGHEST, a, b);
    double d_high = rel_diff(high, ref), d_highest = rel_diff(highest, ref);
    printf("tgc threads: eager fallback of a [48, 1024] x [1024, 256] matmul: HIGH %.3g, HIGHEST "
           "%.3g of the row rms from the CPU\n",
           d_high, d_highest);
    /* fp32 in another order: ~1e-6; TF32 (10-bit mantissas): ~1e-3 */
    assert_true(d_highest < gpu_precision_tol(TGC_PRECISION_HIGHEST));
    assert_true(d_high < gpu_precision_tol(TGC_PRECISION_HIGH));
    assert_true(d_high > 1e-4); /* visibly TF32, not the fp32 of the default config */
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_default),
        cmocka_unit_test(mlp_reduce_overhead),
        cmocka_unit_test(mlp_eager),
        cmocka_unit_test(conv_default),
        cmocka_unit_test(conv_reduce_overhead),
        cmocka_unit_test(conv_eager),
        cmocka_unit_test(eager_fallback_keeps_tf32),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
