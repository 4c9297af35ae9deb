/* conv2d through the public API: a compiled function returning tgc_conv2d of an NCHW f32 batch
 * (default N=64, 64 -> 64 channels, 32x32, 3x3, pad 1, stride 1) at cfg.num_threads = 1 and 2,
 * against oneDNN at the same thread counts, and a compiled conv + bias + relu (where fusion
 * shows) against oneDNN's convolution with a bias and an eltwise relu post-op.
 *
 * oneDNN gets src/weights/dst descriptors of format `any`, so it picks its fastest layout
 * (brgconv on AVX-512); the inputs are reordered into those layouts outside the timed region
 * and only the primitive's execution is timed. Its plain-NCHW convolution (the layout tgc
 * takes) is printed too. Debian's oneDNN threads with OpenMP: the thread count is set with
 * omp_set_num_threads before each primitive is created. The tgc outputs are checked against
 * oneDNN's.
 *
 * Each measurement: one warmup call (the first tgc call also compiles and is reported), then
 * the median of --iters runs (fewer when --budget seconds run out); tgc outputs are freed
 * every iteration. One line per measurement; compare ratios within one run. Not a timed test.
 *
 *   bench_conv [--quick] [--batch N] [--channels C] [--hw H] [--threads 1,2] [--iters N]
 *              [--budget SECONDS] [--backend auto|llvm|interp|eager] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tgc/tgc.h"

#ifdef TGC_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef TGC_BENCH_HAVE_OMP
#include <omp.h>
#endif

#define MAX_THREADS 8

typedef struct options {
    int64_t batch, channels, hw;
    int threads[MAX_THREADS];
    int n_threads;
    int iters;
    double budget;
    int backend_set;
    tgc_backend_kind backend;
} options;

/* The problem and its host data, shared by both sides. */
typedef struct problem {
    int64_t n, c, o, h, w; /* output spatial = input spatial (pad 1, 3x3, stride 1) */
    float *x, *wt, *bias;
    double flops;
} problem;

static void fill_random(float *p, int64_t n, uint64_t seed, float scale)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = scale * (float)((double)(s >> 40) / (double)(1 << 24) - 0.5);
    }
}

static const char *backend_str(tgc_backend_kind b)
{
    switch (b) {
    case TGC_BACKEND_AUTO: return "auto";
    case TGC_BACKEND_LLVM: return "llvm";
    case TGC_BACKEND_CUDA: return "cuda";
    case TGC_BACKEND_EAGER: return "eager";
    case TGC_BACKEND_INTERP: return "interp";
    }
    return "?";
}

static int parse_backend(const char *s, tgc_backend_kind *b)
{
    static const char *const names[] = {"auto", "llvm", "cuda", "eager", "interp"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *b = (tgc_backend_kind)i;
            return 0;
        }
    return -1;
}

static int parse_threads(const char *s, options *o)
{
    o->n_threads = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256 || o->n_threads == MAX_THREADS)
            return -1;
        o->threads[o->n_threads++] = (int)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return o->n_threads > 0 ? 0 : -1;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: bench_conv [--quick] [--batch N] [--channels C] [--hw H] [--threads 1,2]\n"
                "                  [--iters N] [--budget SECONDS] [--backend NAME]\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    const char *threads = "1,2";
    o->batch = 64, o->channels = 64, o->hw = 32;
    o->iters = 5;
    o->budget = 20.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->batch = 8, o->iters = 3, o->budget = 3.0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (v && strcmp(a, "--batch") == 0) {
            o->batch = atoll(v), i++;
        } else if (v && strcmp(a, "--channels") == 0) {
            o->channels = atoll(v), i++;
        } else if (v && strcmp(a, "--hw") == 0) {
            o->hw = atoll(v), i++;
        } else if (v && strcmp(a, "--threads") == 0) {
            threads = v, i++;
        } else if (v && strcmp(a, "--iters") == 0) {
            o->iters = atoi(v), i++;
        } else if (v && strcmp(a, "--budget") == 0) {
            o->budget = atof(v), i++;
        } else if (v && strcmp(a, "--backend") == 0) {
            if (parse_backend(v, &o->backend) != 0)
                return -1;
            o->backend_set = 1, i++;
        } else {
            return -1;
        }
    }
    if (o->batch < 1 || o->channels < 1 || o->hw < 1 || o->iters < 1 || o->budget <= 0)
        return -1;
    return parse_threads(threads, o);
}

/* ---- tgc side ---- */

static tgc_status conv_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_conv2d(in[0], in[1], NULL, &(tgc_conv2d_opts){.padding = {1, 1}});
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status conv_bias_relu_fn(tgc_module *self, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_relu(tgc_conv2d(in[0], in[1], in[2], &(tgc_conv2d_opts){.padding = {1, 1}}));
    return out[0] ? TGC_OK : tgc_last_status();
}

typedef struct tgc_ctx {
    tgc_fn *f;
    tgc_tensor *in[3];
    int n_in;
} tgc_ctx;

static int tgc_run(void *p)
{
    tgc_ctx *x = p;
    tgc_tensor *y = NULL;
    if (tgc_call(x->f, NULL, x->in, x->n_in, &y, 1) != TGC_OK) {
        fprintf(stderr, "bench_conv: %s\n", tgc_last_error());
        return -1;
    }
    tgc_tensor_free(y);
    return 0;
}

typedef struct tgc_result {
    double sec;          /* median seconds per call */
    double first_call_s; /* trace + compile + run */
    char backend[32];
    float *out; /* host copy of the output (NCHW), freed by the caller */
} tgc_result;

static int tgc_measure(const options *o, tgc_model_fn fn, const char *name, int threads,
                       tgc_backend_kind backend, int force_backend, tgc_tensor *const *in, int n_in,
                       size_t out_bytes, tgc_result *r)
{
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = threads;
    if (force_backend)
        cfg.backend = backend;
    else if (o->backend_set)
        cfg.backend = o->backend;
    tgc_fn *f = tgc_compile(fn, name, &cfg);
    if (!f) {
        fprintf(stderr, "bench_conv: %s\n", tgc_last_error());
        return -1;
    }
    tgc_ctx ctx = {f, {in[0], in[1], n_in > 2 ? in[2] : NULL}, n_in};
    tgc_tensor *y = NULL;
    double t0 = now();
    tgc_status st = tgc_call(f, NULL, ctx.in, n_in, &y, 1);
    r->first_call_s = now() - t0;
    if (st != TGC_OK) {
        fprintf(stderr, "bench_conv: %s\n", tgc_last_error());
        tgc_fn_free(f);
        return -1;
    }
    r->out = malloc(out_bytes);
    if (!r->out || tgc_copy_to_host(y, r->out, out_bytes) != TGC_OK) {
        free(r->out);
        r->out = NULL;
    }
    tgc_tensor_free(y);
    backend_of(f, r->backend, sizeof r->backend);
    r->sec = time_runs(tgc_run, &ctx, o->iters, o->budget, NULL);
    tgc_fn_free(f);
    return r->sec > 0 ? 0 : -1;
}

/* ---- oneDNN side ---- */

#ifdef TGC_BENCH_HAVE_DNNL
/* Largest |a - b| relative to max(1, |b|). */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= worst))
            worst = d;
    }
    return worst;
}

#define DNNL_CHECK(call)                                                                           \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "bench_conv: %s failed (%d)\n", #call, (int)s_);                       \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

typedef struct dnnl_result {
    double sec;
    char impl[96];
    float *out; /* NCHW host copy, freed by the caller */
} dnnl_result;

typedef struct dnnl_ctx {
    dnnl_primitive_t conv;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[4];
    int n_args;
} dnnl_ctx;

static int dnnl_run(void *p)
{
    dnnl_ctx *x = p;
    if (dnnl_primitive_execute(x->conv, x->stream, x->n_args, x->args) != dnnl_success ||
        dnnl_stream_wait(x->stream) != dnnl_success)
        return -1;
    return 0;
}

/* Copies `from` into `to` (layouts may differ) with a reorder primitive, run at once. */
static int dnnl_copy(dnnl_engine_t eng, dnnl_stream_t stream, dnnl_memory_t from, dnnl_memory_t to)
{
    const dnnl_memory_desc_t *fmd, *tmd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    int rc = -1;
    DNNL_CHECK(dnnl_memory_get_memory_desc(from, &fmd));
    DNNL_CHECK(dnnl_memory_get_memory_desc(to, &tmd));
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, fmd, eng, tmd, eng, NULL));
    DNNL_CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_CHECK(dnnl_primitive_execute(prim, stream, 2, args));
    DNNL_CHECK(dnnl_stream_wait(stream));
    rc = 0;
fail:
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* A memory in the layout `md` holding the user's plain data (reordered when md differs). */
static int dnnl_input(dnnl_engine_t eng, dnnl_stream_t stream, const dnnl_memory_desc_t *user_md,
                      void *data, const dnnl_memory_desc_t *md, dnnl_memory_t *out)
{
    dnnl_memory_t user = NULL;
    *out = NULL;
    DNNL_CHECK(dnnl_memory_create(&user, user_md, eng, data));
    if (dnnl_memory_desc_equal(user_md, md)) {
        *out = user;
        return 0;
    }
    DNNL_CHECK(dnnl_memory_create(out, md, eng, DNNL_MEMORY_ALLOCATE));
    if (dnnl_copy(eng, stream, user, *out) != 0)
        goto fail;
    dnnl_memory_destroy(user);
    return 0;
fail:
    if (*out)
        dnnl_memory_destroy(*out);
    *out = NULL;
    if (user)
        dnnl_memory_destroy(user);
    return -1;
}

/* plain: NCHW/OIHW descriptors instead of `any`; with_bias_relu: bias + eltwise relu post-op. */
static int dnnl_measure(const options *o, const problem *p, int threads, int plain,
                        int with_bias_relu, dnnl_result *r)
{
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t conv = NULL;
    dnnl_memory_t src = NULL, wei = NULL, bia = NULL, dst = NULL, user_dst = NULL;
    int rc = -1;
    size_t out_elems = (size_t)(p->n * p->o * p->h * p->w);
    r->out = NULL;
#ifdef TGC_BENCH_HAVE_OMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    DNNL_CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));

    dnnl_dims_t src_dims = {p->n, p->c, p->h, p->w}, wei_dims = {p->o, p->c, 3, 3};
    dnnl_dims_t dst_dims = {p->n, p->o, p->h, p->w}, bia_dims = {p->o};
    dnnl_dims_t strides = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t user_src_md, user_wei_md, user_dst_md, user_bia_md;
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_src_md, 4, src_dims, dnnl_f32, dnnl_nchw));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_wei_md, 4, wei_dims, dnnl_f32, dnnl_oihw));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_dst_md, 4, dst_dims, dnnl_f32, dnnl_nchw));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_bia_md, 1, bia_dims, dnnl_f32, dnnl_x));
    dnnl_format_tag_t act = plain ? dnnl_nchw : dnnl_format_tag_any;
    dnnl_format_tag_t wtag = plain ? dnnl_oihw : dnnl_format_tag_any;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, act));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wei_md, 4, wei_dims, dnnl_f32, wtag));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, act));
    dnnl_convolution_desc_t cd;
    DNNL_CHECK(dnnl_convolution_forward_desc_init(
        &cd, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &wei_md,
        with_bias_relu ? &user_bia_md : NULL, &dst_md, strides, pad, pad));
    if (with_bias_relu) {
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        DNNL_CHECK(dnnl_primitive_attr_create(&attr));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    const char *impl = NULL;
    DNNL_CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    snprintf(r->impl, sizeof r->impl, "%s", impl ? impl : "?");
    DNNL_CHECK(dnnl_primitive_create(&conv, pd));

    const dnnl_memory_desc_t *q_src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *q_wei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *q_dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!q_src || !q_wei || !q_dst)
        goto fail;
    if (dnnl_input(eng, stream, &user_src_md, p->x, q_src, &src) != 0 ||
        dnnl_input(eng, stream, &user_wei_md, p->wt, q_wei, &wei) != 0)
        goto fail;
    if (with_bias_relu) {
        const dnnl_memory_desc_t *q_bia =
            dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
        if (!q_bia || dnnl_input(eng, stream, &user_bia_md, p->bias, q_bia, &bia) != 0)
            goto fail;
    }
    DNNL_CHECK(dnnl_memory_create(&dst, q_dst, eng, DNNL_MEMORY_ALLOCATE));

    dnnl_ctx ctx = {
        conv, stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}}, 3};
    if (with_bias_relu)
        ctx.args[ctx.n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bia};
    r->sec = time_runs(dnnl_run, &ctx, o->iters, o->budget, NULL);
    if (r->sec <= 0)
        goto fail;

    r->out = malloc(out_elems * sizeof(float));
    if (!r->out)
        goto fail;
    DNNL_CHECK(dnnl_memory_create(&user_dst, &user_dst_md, eng, r->out));
    if (dnnl_copy(eng, stream, dst, user_dst) != 0)
        goto fail;
    rc = 0;
fail:
    if (rc != 0) {
        free(r->out);
        r->out = NULL;
    }
    dnnl_memory_t mems[] = {src, wei, bia, dst, user_dst};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    if (conv)
        dnnl_primitive_destroy(conv);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (po)
        dnnl_post_ops_destroy(po);
    if (stream)
        dnnl_stream_destroy(stream);
    if (eng)
        dnnl_engine_destroy(eng);
    return rc;
}

static void print_check(const char *what, const float *a, const float *b, size_t n)
{
    if (!a || !b)
        return;
    double d = max_rel_diff(a, b, n);
    printf("  check %s: max rel diff %.2e%s\n", what, d, d <= 1e-3 ? "" : "  CHECK FAILED");
}
#endif

/* ---- report ---- */

static int run_threads(const options *o, const problem *p, int threads, tgc_tensor *const *in)
{
    size_t out_elems = (size_t)(p->n * p->o * p->h * p->w), out_bytes = out_elems * sizeof(float);
    double gf = p->flops * 1e-9;
    char shape[96];
    snprintf(shape, sizeof shape, "N=%lld %lld->%lld %lldx%lld 3x3 p1 s1 t=%d", (long long)p->n,
             (long long)p->c, (long long)p->o, (long long)p->h, (long long)p->w, threads);
    int failed = 0;

    tgc_result conv = {0}, cbr = {0}, eager = {0};
    if (tgc_measure(o, conv_fn, "conv", threads, TGC_BACKEND_AUTO, 0, in, 2, out_bytes, &conv) != 0)
        failed = 1, conv.sec = -1;
    if (tgc_measure(o, conv_bias_relu_fn, "conv_bias_relu", threads, TGC_BACKEND_AUTO, 0, in, 3,
                    out_bytes, &cbr) != 0)
        failed = 1, cbr.sec = -1;
    if (tgc_measure(o, conv_bias_relu_fn, "conv_bias_relu_eager", threads, TGC_BACKEND_EAGER, 1, in,
                    3, out_bytes, &eager) != 0)
        failed = 1, eager.sec = -1;

#ifdef TGC_BENCH_HAVE_DNNL
    dnnl_result d_any = {0}, d_plain = {0}, d_cbr = {0};
    if (dnnl_measure(o, p, threads, 0, 0, &d_any) != 0)
        d_any.sec = -1;
    if (dnnl_measure(o, p, threads, 1, 0, &d_plain) != 0)
        d_plain.sec = -1;
    if (dnnl_measure(o, p, threads, 0, 1, &d_cbr) != 0)
        d_cbr.sec = -1;
#endif

    if (conv.sec > 0) {
        printf("conv2d %s  tgc[%s] %.1f GFLOP/s (%.2f ms, first call %.3f s)", shape, conv.backend,
               gf / conv.sec, 1e3 * conv.sec, conv.first_call_s);
#ifdef TGC_BENCH_HAVE_DNNL
        if (d_any.sec > 0)
            printf("  onednn[%s] %.1f (%.2f ms)  tgc/onednn %.2f", d_any.impl, gf / d_any.sec,
                   1e3 * d_any.sec, d_any.sec / conv.sec);
        else
            printf("  onednn FAILED");
#else
        printf("  onednn: not installed (apt-get install libdnnl-dev)");
#endif
        printf("\n");
    } else {
        printf("conv2d %s  tgc FAILED\n", shape);
    }
#ifdef TGC_BENCH_HAVE_DNNL
    if (d_plain.sec > 0) {
        printf("conv2d %s  onednn plain nchw/oihw[%s] %.1f GFLOP/s (%.2f ms)", shape, d_plain.impl,
               gf / d_plain.sec, 1e3 * d_plain.sec);
        if (conv.sec > 0)
            printf("  tgc/onednn-nchw %.2f", d_plain.sec / conv.sec);
        printf("\n");
    }
#endif
    if (cbr.sec > 0) {
        printf("conv2d+bias+relu %s  tgc[%s] %.1f GFLOP/s (%.2f ms)", shape, cbr.backend,
               gf / cbr.sec, 1e3 * cbr.sec);
        if (conv.sec > 0)
            printf("  cbr/conv time %.2f", cbr.sec / conv.sec);
        if (eager.sec > 0)
            printf("  eager %.2f ms, eager/compiled %.2f", 1e3 * eager.sec, eager.sec / cbr.sec);
#ifdef TGC_BENCH_HAVE_DNNL
        if (d_cbr.sec > 0)
            printf("  onednn[%s]+relu %.1f (%.2f ms)  tgc/onednn %.2f", d_cbr.impl, gf / d_cbr.sec,
                   1e3 * d_cbr.sec, d_cbr.sec / cbr.sec);
#endif
        printf("\n");
    } else {
        printf("conv2d+bias+relu %s  tgc FAILED\n", shape);
    }
#ifdef TGC_BENCH_HAVE_DNNL
    print_check("tgc conv vs onednn", conv.out, d_any.out, out_elems);
    print_check("tgc conv+bias+relu vs onednn", cbr.out, d_cbr.out, out_elems);
    if ((conv.out && d_any.out && max_rel_diff(conv.out, d_any.out, out_elems) > 1e-3) ||
        (cbr.out && d_cbr.out && max_rel_diff(cbr.out, d_cbr.out, out_elems) > 1e-3))
        failed = 1;
    free(d_any.out), free(d_plain.out), free(d_cbr.out);
#endif
    free(conv.out), free(cbr.out), free(eager.out);
    fflush(stdout);
    return failed;
}

int main(int argc, char **argv)
{
    options o = {0};
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    problem p = {o.batch, o.channels, o.channels, o.hw, o.hw, NULL, NULL, NULL, 0};
    p.flops = 2.0 * (double)p.n * (double)p.o * (double)p.h * (double)p.w * (double)p.c * 9.0;
    int64_t xn = p.n * p.c * p.h * p.w, wn = p.o * p.c * 9;
    p.x = malloc((size_t)xn * sizeof(float));
    p.wt = malloc((size_t)wn * sizeof(float));
    p.bias = malloc((size_t)p.o * sizeof(float));
    if (!p.x || !p.wt || !p.bias) {
        fprintf(stderr, "bench_conv: out of memory\n");
        free(p.x), free(p.wt), free(p.bias);
        return 1;
    }
    fill_random(p.x, xn, 1, 2.0f);
    fill_random(p.wt, wn, 2, 2.0f / sqrtf((float)(p.c * 9)));
    fill_random(p.bias, p.o, 3, 0.5f);

    tgc_config def = tgc_config_default();
    printf("tgc: backend requested %s%s; conv2d f32 NCHW, %.2f GFLOP per call, median of up to "
           "%d runs\n",
           backend_str(o.backend_set ? o.backend : def.backend),
           o.backend_set ? " (--backend)" : " (tgc_config_default / TGC_BACKEND)", p.flops * 1e-9,
           o.iters);
#ifdef TGC_BENCH_HAVE_DNNL
    const dnnl_version_t *v = dnnl_version();
    printf("onednn %d.%d.%d (cpu runtime %s), threads set with %s\n", v->major, v->minor, v->patch,
           v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
#ifdef TGC_BENCH_HAVE_OMP
           "omp_set_num_threads"
#else
           "OMP_NUM_THREADS only (built without OpenMP)"
#endif
    );
#else
    printf("onednn: not installed (apt-get install libdnnl-dev, or tests/bench/deps.sh)\n");
#endif
    fflush(stdout);

    int failed = 0;
    tgc_scope_push();
    int64_t xs[4] = {p.n, p.c, p.h, p.w}, ws[4] = {p.o, p.c, 3, 3}, bs[1] = {p.o};
    tgc_tensor *in[3] = {
        tgc_from_data(p.x, (size_t)xn * sizeof(float), xs, 4, TGC_F32, tgc_cpu()),
        tgc_from_data(p.wt, (size_t)wn * sizeof(float), ws, 4, TGC_F32, tgc_cpu()),
        tgc_from_data(p.bias, (size_t)p.o * sizeof(float), bs, 1, TGC_F32, tgc_cpu()),
    };
    if (!in[0] || !in[1] || !in[2]) {
        fprintf(stderr, "bench_conv: inputs: %s\n", tgc_last_error());
        failed = 1;
    }
    for (int t = 0; t < o.n_threads && !failed; t++)
        failed |= run_threads(&o, &p, o.threads[t], in);
    tgc_scope_pop();
    free(p.x), free(p.wt), free(p.bias);
    tgc_shutdown();
    return failed;
}
