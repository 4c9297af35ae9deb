/* Every public op on the GPU, through the public API only (label `gpu`; skips without a GPU).
 *
 * The cases are those of tests/ops/trace_eager_cases.h (one model function per op or small
 * composite, with input variants: broadcasting, promotion across f32/f16/bf16/f64/i32/i64/
 * bool, transposed, strided and expanded views, module parameters and buffers, and a size D
 * that the dynamic passes vary). For each case and variant the reference is the model
 * compiled with cfg.backend = TGC_BACKEND_INTERP on CPU tensors; against it run, on
 * tgc_cuda(0) tensors (the same values moved with tgc_to, views remade on the device, the
 * module moved with tgc_module_to):
 *   eager      the model function called directly (per-op GPU kernels);
 *   default    tgc_compile, cfg.backend = CUDA, mode DEFAULT: two calls (compile, then hit);
 *   graph      mode REDUCE_OVERHEAD: two calls (capture, then replay), also bit-compared with
 *              DEFAULT's result;
 *   dynamic    the D dims of the inputs marked with tgc_mark_dynamic, DEFAULT and
 *              REDUCE_OVERHEAD, at D = 6 then D = 9 (one compile expected when every D dim
 *              is an input's);
 *   high/medium  for cases with a matrix product: cfg.matmul_precision HIGH and MEDIUM.
 * Every run starts from the same tgc_manual_seed, so dropout (and attention dropout) must draw
 * the CPU's bits. Module tensors (batch-norm running statistics in training) are compared
 * after each run too. Tolerances: tests/gpu_test_util.h.
 *
 * After them come GPU-sized cases of this file (TE_BIG_CASES, same grammar, D of hundreds to
 * hundreds of thousands): long rows, vector tails, GEMM and conv shapes off the tile sizes.
 *
 * Further cases: creation ops on the device (tgc_rand bits equal the CPU's after the same
 * seed, randn within f32 rounding, zeros/full/arange/from_data, tgc_item_*), copies between
 * devices (tgc_to of views, tgc_copy_, tgc_module_to), the Philox stream over three calls
 * without reseeding, and the error paths: a CPU and a CUDA tensor in one op (eager and
 * compiled) is TGC_ERR_DEVICE naming both devices, an allocation larger than the GPU is
 * TGC_ERR_OOM (and the device works afterwards), tgc_cuda(99) is TGC_ERR_DEVICE.
 * TGC_GPU_TEST_STRIDE=N (environment) runs every N-th op case only (the memcheck pass);
 * TGC_GPU_TEST_SHARD=k/n a shard of the op cases (ctest runs four in parallel). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_skip.h"
#include "gpu_test_util.h"
#include "tgc/tgc.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { TE_EXACT = 0, TE_REL = 1 };

/* The device the cases' own constants (tgc_arange, tgc_zeros ... inside a model function)
 * are made on: the case table writes tgc_cpu(), which here means "the device of this run". */
static tgc_device te_run_device;
static tgc_device te_dev_(void)
{
    return te_run_device;
}

static tgc_status te_status(const tgc_tensor *t)
{
    if (t)
        return TGC_OK;
    return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_INTERNAL;
}

#define tgc_cpu() te_dev_()
#define TE_CASE(id, ops, tol, specs, ...)                                                          \
    static tgc_status te_fn_##id(tgc_module *self, tgc_tensor *const *in, int n_in,                \
                                 tgc_tensor **out, int n_out)                                      \
    {                                                                                              \
        (void)self;                                                                                \
        (void)in;                                                                                  \
        (void)n_in;                                                                                \
        (void)n_out;                                                                               \
        out[0] = (__VA_ARGS__);                                                                    \
        return te_status(out[0]);                                                                  \
    }
#include "ops/trace_eager_cases.h"
#include "ops/trace_eager_cases_more.h"
#undef TE_CASE

/* GPU-sized cases, in the same grammar, with their own sizes for D (static, then the two
 * dynamic ones): vector-load tails, many blocks, long rows (split reductions), GEMM and conv
 * shapes that are no multiple of a tile, f16/bf16 operands. Static passes use the first D. */
/* one case per line */
// clang-format off
#define TE_BIG_CASES(X) \
X(big_add_bcast, "tgc_add", 1000, 1003, 1537, "n:D,1031 n:1031 | nT:1031,D n:1,D | h:D,515 g:515 | q:D,257 m:D,257 | b:D,129 n:D,129", tgc_add(A0, A1)) \
X(big_chain, "tgc_mul_scalar tgc_add_scalar tgc_relu tgc_mul tgc_sub_scalar tgc_abs tgc_clamp tgc_neg", 1000, 1001, 2049, "n:D,4099 n:4099 | nS:D,1025 nT:D,1025", tgc_neg(tgc_clamp(tgc_abs(tgc_sub_scalar(tgc_mul(tgc_relu(tgc_add_scalar(tgc_mul_scalar(A0, 1.5), 0.25)), A1), 0.5)), -2.0, 2.0))) \
X(big_where_exp, "tgc_where tgc_gt tgc_exp", 1000, 1003, 1537, "n:D,1027 n:1027 | h:D,515 h:D,515", tgc_where(tgc_gt(A0, A1), A0, tgc_exp(A1))) \
X(big_sum_rows, "tgc_sum", 100003, 65537, 200001, "n:3,D | nT:D,7 | h:2,D | q:2,D", tgc_sum(A0, DIMS(-1), 1, 0)) \
X(big_sum_cols, "tgc_sum", 4097, 4099, 10007, "n:D,1031 | q:D,517 | b:D,33", tgc_sum(A0, DIMS(0), 1, 0)) \
X(big_mean_all, "tgc_mean", 1000, 1003, 2049, "n:D,1031 | nT:517,D", tgc_mean(A0, NULL, 0, 0)) \
X(big_var, "tgc_var", 4097, 4099, 10007, "n:64,D | nT:D,64", tgc_var(A0, DIMS(1), 1, 1, 0)) \
X(big_max_argmax, "tgc_add tgc_cast tgc_argmax tgc_max", 4097, 4099, 30522, "n:33,D | nS:17,D", tgc_add(tgc_cast(tgc_argmax(A0, -1, 0), TGC_F32), tgc_max(A0, DIMS(-1), 1, 0))) \
X(big_softmax, "tgc_softmax", 4097, 1000, 30522, "n:64,D | nT:D,64 | h:16,D", tgc_softmax(A0, -1)) \
X(big_log_softmax, "tgc_log_softmax", 30522, 1000, 4099, "n:16,D | g:8,D", tgc_log_softmax(A0, -1)) \
X(big_layer_norm, "tgc_layer_norm", 77, 128, 129, "n:8,D,768 @n:768 @n:768 | h:4,D,768 @h:768 @h:768 | n:D,4099 @n:4099 @n:4099", tgc_layer_norm(A0, 1, P0, P1, 1e-12)) \
X(big_batch_norm_train, "tgc_batch_norm", 8, 16, 5, "n:D,64,17,19 %n:64 %p:64 @n:64 @n:64", tgc_batch_norm(A0, P0, P1, P2, P3, 1, 0.1, 1e-5)) \
X(big_batch_norm_eval, "tgc_batch_norm", 8, 16, 5, "n:D,64,17,19 %n:64 %p:64 @n:64 @n:64", tgc_batch_norm(A0, P0, P1, P2, P3, 0, 0.1, 1e-5)) \
X(big_matmul, "tgc_matmul", 127, 513, 1000, "n:D,65 n:65,33 | n:D,257 n:257,129 | n:3,D,65 n:65,200 | nT:D,96 n:96,130 | h:D,128 h:128,96 | g:D,128 g:128,96 | n:D,512 n:512,1024", tgc_matmul(A0, A1)) \
X(big_bmm, "tgc_matmul", 129, 257, 200, "n:4,D,64 n:4,64,D | n:2,6,D,64 nT:2,6,64,D", tgc_matmul(A0, A1)) \
X(big_linear, "tgc_linear", 77, 128, 131, "n:2,D,768 @n:3072,768 @n:3072 | n:D,3072 @n:768,3072 @n:768", tgc_linear(A0, P0, P1)) \
X(big_linear_gelu, "tgc_gelu tgc_linear tgc_add", 77, 128, 131, "n:8,D,768 @n:768,768 @n:768", tgc_add(tgc_gelu(tgc_linear(A0, P0, P1)), A0)) \
X(big_conv, "tgc_conv2d tgc_relu", 33, 32, 17, "n:4,16,D,31 @n:32,16,3,3 @n:32 | nT:4,16,31,D @n:32,16,3,3 @n:32", tgc_relu(tgc_conv2d(A0, P0, P1, &(tgc_conv2d_opts){.padding = {1, 1}}))) \
X(big_conv_strided, "tgc_conv2d", 33, 32, 17, "n:4,16,D,31 @n:32,4,3,3", tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 4})) \
X(big_conv_1x1, "tgc_conv2d", 16, 8, 15, "n:8,64,D,D @n:128,64,1,1", tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.stride = {2, 2}})) \
X(big_conv_stem, "tgc_conv2d", 32, 64, 31, "n:8,3,D,D @n:64,3,7,7", tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {3, 3}})) \
X(big_conv_bn_res, "tgc_conv2d tgc_batch_norm tgc_add tgc_relu", 16, 8, 15, "n:8,64,D,D @n:64,64,3,3 %n:64 %p:64 @n:64 @n:64", tgc_relu(tgc_add(tgc_batch_norm(tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.padding = {1, 1}}), P1, P2, P3, P4, 0, 0.1, 1e-5), A0))) \
X(big_conv_channels_last, "tgc_conv2d tgc_relu tgc_permute", 16, 8, 15, "n:8,D,D,64 @n:128,3,3,64 @n:128 | g:8,D,D,64 @g:128,3,3,64 @g:128", tgc_relu(tgc_conv2d(tgc_permute(A0, DIMS(0, 3, 1, 2), 4), tgc_permute(P0, DIMS(0, 3, 1, 2), 4), P1, &(tgc_conv2d_opts){.padding = {1, 1}}))) \
X(big_conv_channels_last_x, "tgc_conv2d tgc_permute", 16, 8, 15, "n:8,D,D,32 @n:64,32,3,3 | n:4,D,D,36 @n:64,36,3,3", tgc_conv2d(tgc_permute(A0, DIMS(0, 3, 1, 2), 4), P0, NULL, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}})) \
X(big_max_pool, "tgc_max_pool2d", 33, 32, 17, "n:8,64,D,31 | h:2,16,D,31", tgc_max_pool2d(A0, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})) \
X(big_avg_pool, "tgc_avg_pool2d", 33, 32, 17, "n:8,64,D,31", tgc_avg_pool2d(A0, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_padding = 1})) \
X(big_adaptive_pool, "tgc_adaptive_avg_pool2d", 37, 32, 17, "n:4,64,D,37", tgc_adaptive_avg_pool2d(A0, 7, 5)) \
X(big_embedding, "tgc_embedding", 77, 128, 512, "@n:30522,64 i30522:8,D | @h:1000,768 j1000:D", tgc_embedding(P0, A0)) \
X(big_gather, "tgc_gather", 1000, 1003, 2049, "n:64,D iD:64,300", tgc_gather(A0, 1, A1)) \
X(big_index_select, "tgc_index_select", 1000, 1003, 2049, "n:D,256 iD:500 | nT:D,256 iD:77", tgc_index_select(A0, 0, A1)) \
X(big_cat, "tgc_cat", 1000, 1003, 2049, "n:64,D n:64,1 nT:64,1027", tgc_cat(TS(A0, A1, A2), 3, 1)) \
X(big_pad, "tgc_pad", 33, 32, 17, "n:8,64,D,31", tgc_pad(A0, SHAPE(1, 2, 3, 4), 2, 0.5)) \
X(big_dropout, "tgc_dropout", 1000, 1003, 2049, "n:D,1037 | h:D,515 | nT:1037,D", tgc_dropout(A0, 0.3, 1)) \
X(big_cross_entropy, "tgc_cross_entropy", 256, 300, 1031, "n:D,1000 i1000:D | nT:D,1000 j1000:D", tgc_cross_entropy(A0, A1, TGC_REDUCE_MEAN, -100, 0.1)) \
X(big_sdpa, "tgc_scaled_dot_product_attention", 129, 128, 257, "n:2,4,D,64 n:2,4,D,64 n:2,4,D,64 | n:8,12,D,64 n:8,12,D,64 n:8,12,D,64", tgc_scaled_dot_product_attention(A0, A1, A2, NULL, 0.0, 0, 0.0)) \
X(big_sdpa_mask_causal, "tgc_scaled_dot_product_attention", 129, 128, 257, "n:2,4,D,64 n:2,4,D,64 n:2,4,D,64 b:2,1,1,D | n:2,4,D,40 n:2,4,D,40 n:2,4,D,40 n:2,1,D,D", tgc_scaled_dot_product_attention(A0, A1, A2, A3, 0.0, 1, 0.0)) \
X(big_sdpa_dropout, "tgc_scaled_dot_product_attention", 129, 128, 257, "n:2,4,D,64 n:2,4,D,64 n:2,4,D,64", tgc_scaled_dot_product_attention(A0, A1, A2, NULL, 0.1, 0, 0.0))
// clang-format on

#define TE_BIG_FN(id, ops, d0, d1, d2, specs, ...) TE_CASE(id, ops, TE_REL, specs, __VA_ARGS__)
#define TE_CASE(id, ops, tol, specs, ...)                                                          \
    static tgc_status te_fn_##id(tgc_module *self, tgc_tensor *const *in, int n_in,                \
                                 tgc_tensor **out, int n_out)                                      \
    {                                                                                              \
        (void)self;                                                                                \
        (void)in;                                                                                  \
        (void)n_in;                                                                                \
        (void)n_out;                                                                               \
        out[0] = (__VA_ARGS__);                                                                    \
        return te_status(out[0]);                                                                  \
    }
TE_BIG_CASES(TE_BIG_FN)
#undef TE_CASE

typedef struct te_case {
    const char *name;
    const char *ops;
    int tol;
    const char *specs;
    tgc_model_fn fn;
    int64_t d[3]; /* D for the static pass and the two dynamic ones; 0: 5, 6, 9 */
} te_case;

static const te_case te_cases[] = {
#define TE_CASE(id, ops, tol, specs, ...) {#id, ops, tol, specs, te_fn_##id, {0, 0, 0}},
#include "ops/trace_eager_cases.h"
#undef TE_CASE
#define TE_BIG_ROW(id, ops, d0, d1, d2, specs, ...)                                                \
    {#id, ops, TE_REL, specs, te_fn_##id, {d0, d1, d2}},
    TE_BIG_CASES(TE_BIG_ROW)
#undef TE_BIG_ROW
#define TE_CASE(id, ops, tol, specs, ...) {#id, ops, tol, specs, te_fn_##id, {0, 0, 0}},
#include "ops/trace_eager_cases_more.h"
#undef TE_CASE
};
#undef tgc_cpu

/* ---- input specs (the grammar is at the top of trace_eager_cases.h) ---- */

#include "ops/trace_eager_specs.h"

/* Integer and bool data, made on the host and loaded with tgc_from_data. */
static tgc_tensor *te_host_ints(char kind, int64_t range, const int64_t *shape, int nd,
                                uint64_t *rng)
{
    tgc_dtype dt = kind == 'b' ? TGC_BOOL : kind == 'm' || kind == 'i' ? TGC_I64 : TGC_I32;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    size_t es = tgc_dtype_size(dt);
    unsigned char *buf = calloc((size_t)(n ? n : 1), es);
    if (!buf)
        return NULL;
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = te_next(rng);
        int64_t x;
        switch (kind) {
        case 'b': x = (int64_t)(r & 1); break;
        case 'q':
        case 'm': x = (int64_t)(r % 9) - 4; break;
        case 'v': x = (int64_t)(r % 6) + 1; break;
        default: x = range > 0 ? (int64_t)(r % (uint64_t)range) : 0; break;
        }
        if (dt == TGC_BOOL)
            buf[k] = (unsigned char)x;
        else if (dt == TGC_I32)
            ((int32_t *)(void *)buf)[k] = (int32_t)x;
        else
            ((int64_t *)(void *)buf)[k] = x;
    }
    tgc_tensor *t = tgc_from_data(buf, (size_t)n * es, shape, nd, dt, tgc_cpu());
    free(buf);
    return t;
}

static tgc_tensor *te_fill(char kind, int64_t range, const int64_t *shape, int nd, uint64_t *rng)
{
    switch (kind) {
    case 'n': return tgc_randn(shape, nd, TGC_F32, tgc_cpu());
    case 'u': return tgc_rand(shape, nd, TGC_F32, tgc_cpu());
    case 'p': return tgc_add_scalar(tgc_rand(shape, nd, TGC_F32, tgc_cpu()), 0.5);
    case 'h': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_F16);
    case 'g': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_BF16);
    case 'd': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_F64);
    default: return te_host_ints(kind, range, shape, nd, rng);
    }
}

/* The dense base tensor of an input at size D (on the CPU) and the view to take of it. */
static tgc_tensor *te_base(const te_input *in, int64_t D, uint64_t *rng)
{
    int nd = in->ndim;
    int64_t base[TGC_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        base[d] = in->is_d[d] ? D : in->shape[d];
    int64_t s0 = nd >= 2 ? base[nd - 2] : 0, s1 = nd >= 1 ? base[nd - 1] : 0;
    switch (in->layout) {
    case 'T':
        base[nd - 2] = s1;
        base[nd - 1] = s0;
        break;
    case 'S': base[nd - 1] = 2 * s1; break;
    case 'E': base[0] = 1; break;
    default: break;
    }
    return te_fill(in->kind, in->range_is_d ? D : in->range, base, nd, rng);
}

/* The input's view of its base (on the base's device). */
static tgc_tensor *te_view(const te_input *in, int64_t D, tgc_tensor *base)
{
    int nd = in->ndim;
    int64_t shape[TGC_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = in->is_d[d] ? D : in->shape[d];
    switch (in->layout) {
    case 'T': return tgc_transpose(base, -1, -2);
    case 'S': return tgc_slice(base, -1, 0, 2 * shape[nd - 1], 2);
    case 'E': return tgc_expand(base, shape, nd);
    default: return base;
    }
}

/* ---- one run ---- */

/* TGC_GPU_TEST_SELFTEST=1: the op cases run their "GPU" passes on the CPU with the default
 * backend instead (no GPU needed), to check this harness itself: specs, inputs, dynamic
 * marks, compile counts and tolerances. */
static int te_selftest;
static tgc_device te_gpu(void)
{
    return te_selftest ? tgc_cpu() : tgc_cuda(0);
}

typedef struct te_ctx {
    const te_case *c;
    const te_variant *v;
    int vi;
    const char *pass;
    int64_t D;
    int failures;
} te_ctx;

static void te_fail(te_ctx *x, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->failures++;
    print_message("FAIL %s [variant %d \"%s\", %s, D=%lld]: %s\n", x->c->name, x->vi,
                  x->v ? x->v->text : "", x->pass, (long long)x->D, msg);
}

/* Inputs of one (variant, D): the CPU bases, made once, so every run sees equal values. */
typedef struct te_inputs {
    int n;
    tgc_tensor *base[TE_MAX_INPUTS];
} te_inputs;

static int te_make_inputs(te_ctx *x, uint64_t seed, te_inputs *ins)
{
    uint64_t rng = seed;
    tgc_manual_seed(seed);
    ins->n = x->v->n;
    for (int k = 0; k < x->v->n; k++) {
        ins->base[k] = te_base(&x->v->in[k], x->D, &rng);
        if (!ins->base[k]) {
            te_fail(x, "making input %d failed: %s", k, tgc_last_error());
            return 0;
        }
    }
    return 1;
}

/* A run's result: the output and the module (for the tensors it updated). */
typedef struct te_result {
    tgc_tensor *out;
    tgc_module *mod;
} te_result;

enum { RUN_EAGER = -1 };

/* Runs the case on dev: eagerly (f NULL) or through f, from fresh copies of the inputs on
 * dev and a fresh module; marks D dims dynamic when mark is set. */
static int te_run(te_ctx *x, const te_inputs *ins, tgc_device dev, tgc_fn *f, int mark,
                  uint64_t seed, te_result *res)
{
    const te_variant *v = x->v;
    tgc_tensor *args[TE_MAX_INPUTS];
    int n_args = 0, n_mod = 0;
    res->out = NULL;
    res->mod = NULL;
    for (int k = 0; k < v->n; k++) {
        const te_input *in = &v->in[k];
        tgc_tensor *t = NULL;
        if (in->role == 0) {
            tgc_tensor *b = dev.type == TGC_DEVICE_CPU ? ins->base[k] : tgc_to(ins->base[k], dev);
            t = b ? te_view(in, x->D, b) : NULL;
            if (t && mark)
                for (int d = 0; d < in->ndim; d++)
                    if (in->is_d[d])
                        tgc_mark_dynamic(t, d);
            if (!t) {
                te_fail(x, "input %d on %s: %s", k, dev.type ? "cuda:0" : "cpu", tgc_last_error());
                return 0;
            }
            args[n_args++] = t;
            continue;
        }
        if (!res->mod)
            res->mod = tgc_module_create("m", NULL);
        char name[16];
        snprintf(name, sizeof name, "p%d", n_mod++);
        tgc_tensor *view = te_view(in, x->D, ins->base[k]);
        int ok = view && (in->role == 1 ? tgc_module_param(res->mod, name, view) != NULL
                                        : tgc_module_buffer(res->mod, name, view) != NULL);
        if (!ok) {
            te_fail(x, "module tensor %s: %s", name, tgc_last_error());
            return 0;
        }
    }
    if (res->mod && dev.type != TGC_DEVICE_CPU) {
        tgc_status st = tgc_module_to(res->mod, dev);
        if (st != TGC_OK) {
            te_fail(x, "tgc_module_to(cuda:0): %s: %s", tgc_status_str(st), tgc_last_error());
            return 0;
        }
    }
    te_run_device = dev;
    tgc_clear_error();
    tgc_manual_seed(seed);
    tgc_status st = f ? tgc_call(f, res->mod, args, n_args, &res->out, 1)
                      : x->c->fn(res->mod, args, n_args, &res->out, 1);
    te_run_device = tgc_cpu();
    if (st != TGC_OK) {
        te_fail(x, "%s failed: %s: %s", f ? "tgc_call" : "the eager call", tgc_status_str(st),
                tgc_last_error());
        return 0;
    }
    if (tgc_device_of(res->out).type != dev.type) {
        te_fail(x, "the output is on %s, the inputs on %s",
                tgc_device_of(res->out).type ? "cuda" : "cpu", dev.type ? "cuda" : "cpu");
        return 0;
    }
    return 1;
}

static int te_has_matmul(const te_case *c)
{
    return strstr(c->ops, "tgc_matmul") || strstr(c->ops, "tgc_linear") ||
           strstr(c->ops, "tgc_conv2d") || strstr(c->ops, "tgc_scaled_dot_product_attention");
}

/* Compares a run with the reference (output and module tensors). */
static void te_check(te_ctx *x, const te_result *ref, const te_result *got,
                     tgc_matmul_precision prec)
{
    double rowtol = te_has_matmul(x->c) ? gpu_precision_tol(prec) : 0;
    /* batch-norm after a reduced-precision product divides its rounding by the batch's
     * standard deviation (eval mode: the running variance, random in (0, 1] here): near-zero
     * rows after it (relu) see the error at up to ~4x the row rule with TF32, and 2 of
     * 131072 elements of big_conv_bn_res at 4-8x with bf16 (H200, 2026-12-01) */
    if (rowtol > 0 && prec != TGC_PRECISION_HIGHEST && strstr(x->c->ops, "tgc_batch_norm"))
        rowtol *= prec == TGC_PRECISION_MEDIUM ? 8 : 4;
    gpu_cmp r = gpu_compare(got->out, ref->out, rowtol, 1.0);
    if (!r.ok)
        te_fail(x, "output: %s", r.msg);
    for (int k = 0; ref->mod; k++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", k);
        tgc_tensor *a = tgc_module_get(ref->mod, name);
        if (!a)
            break;
        /* running statistics of a matrix product's output share its precision */
        r = gpu_compare(tgc_module_get(got->mod, name), a, rowtol, 1.0);
        if (!r.ok)
            te_fail(x, "module tensor %s after the call: %s", name, r.msg);
    }
}

static void te_free(te_result *r)
{
    tgc_module_free(r->mod);
    r->mod = NULL;
}

static tgc_fn *te_compile(te_ctx *x, tgc_backend_kind be, tgc_mode mode, tgc_matmul_precision prec)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = te_selftest && be == TGC_BACKEND_CUDA ? TGC_BACKEND_AUTO : be;
    cfg.mode = mode;
    cfg.matmul_precision = prec;
    tgc_fn *f = tgc_compile(x->c->fn, x->c->name, &cfg);
    if (!f)
        te_fail(x, "tgc_compile: %s", tgc_last_error());
    return f;
}

static void te_expect_compiles(te_ctx *x, const tgc_fn *f, uint64_t want)
{
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK) {
        te_fail(x, "tgc_fn_stats: %s", tgc_last_error());
        return;
    }
    if (s.compiles != want || s.eager_fallbacks || s.graph_breaks)
        te_fail(x,
                "%llu compiles (want %llu), %llu eager fallbacks, %llu graph breaks; backend "
                "%s; last recompile reason: %s",
                (unsigned long long)s.compiles, (unsigned long long)want,
                (unsigned long long)s.eager_fallbacks, (unsigned long long)s.graph_breaks,
                s.backend, s.last_recompile_reason);
    else if (!te_selftest && strcmp(s.backend, "cuda") != 0)
        te_fail(x, "compiled for backend \"%s\", not cuda", s.backend);
}

static uint64_t te_seed(int case_i, int vi, int64_t D)
{
    return 0xC0DAull + (uint64_t)case_i * 1000003ull + (uint64_t)vi * 1009ull + (uint64_t)D;
}

/* Reference and GPU runs of one (variant, D): the reference is made by ref_f (interp). */
static int te_reference(te_ctx *x, tgc_fn *ref_f, const te_inputs *ins, uint64_t seed,
                        te_result *ref)
{
    const char *pass = x->pass;
    x->pass = "reference (interp, cpu)";
    int ok = te_run(x, ins, tgc_cpu(), ref_f, 0, seed, ref);
    x->pass = pass;
    return ok;
}

static void te_run_case(void **state)
{
    if (!te_selftest)
        GPU_REQUIRE();
    const te_case *c = *state;
    int case_i = (int)(c - te_cases);
    te_ctx x = {c, NULL, 0, "parse", 0, 0};
    tgc_device gpu = te_gpu();
    const char *sp = c->specs;
    for (int vi = 0; *sp; vi++) {
        te_variant v;
        x.v = NULL;
        x.vi = vi;
        if (!te_parse_variant(&sp, &v)) {
            te_fail(&x, "malformed input spec near \"%s\"", sp);
            break;
        }
        x.v = &v;
        x.pass = "compile";
        tgc_scope_push();
        tgc_fn *ref_f = te_compile(&x, TGC_BACKEND_INTERP, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
        tgc_fn *fd = te_compile(&x, TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
        tgc_fn *fg =
            te_compile(&x, TGC_BACKEND_CUDA, TGC_MODE_REDUCE_OVERHEAD, TGC_PRECISION_HIGHEST);
        if (!ref_f || !fd || !fg)
            goto next;

        /* static shapes, D = 5 */
        x.D = c->d[0] ? c->d[0] : 5;
        uint64_t seed = te_seed(case_i, vi, x.D);
        te_inputs ins;
        te_result ref = {0}, r = {0}, rd = {0};
        if (!te_make_inputs(&x, seed, &ins) || !te_reference(&x, ref_f, &ins, seed, &ref))
            goto next;
        x.pass = "eager";
        if (te_run(&x, &ins, gpu, NULL, 0, seed, &r))
            te_check(&x, &ref, &r, TGC_PRECISION_HIGHEST);
        te_free(&r);
        for (int call = 0; call < 2; call++) {
            x.pass = call ? "default, cache hit" : "default, first call";
            if (te_run(&x, &ins, gpu, fd, 0, seed, call ? &r : &rd))
                te_check(&x, &ref, call ? &r : &rd, TGC_PRECISION_HIGHEST);
            if (call)
                te_free(&r);
        }
        te_expect_compiles(&x, fd, 1);
        for (int call = 0; call < 2; call++) {
            x.pass = call ? "reduce-overhead, replay" : "reduce-overhead, capture";
            if (te_run(&x, &ins, gpu, fg, 0, seed, &r)) {
                te_check(&x, &ref, &r, TGC_PRECISION_HIGHEST);
                if (rd.out && !gpu_bit_equal(r.out, rd.out))
                    print_message("note: %s [variant %d, %s]: not bit-equal to DEFAULT's "
                                  "result (within tolerance)\n",
                                  c->name, vi, x.pass);
            }
            te_free(&r);
        }
        te_expect_compiles(&x, fg, 1);
        te_free(&rd);

        /* matrix precisions */
        if (te_has_matmul(c))
            for (int p = TGC_PRECISION_HIGH; p <= TGC_PRECISION_MEDIUM; p++) {
                x.pass =
                    p == TGC_PRECISION_HIGH ? "default, HIGH (tf32)" : "default, MEDIUM (bf16)";
                tgc_fn *fp =
                    te_compile(&x, TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, (tgc_matmul_precision)p);
                if (fp && te_run(&x, &ins, gpu, fp, 0, seed, &r))
                    te_check(&x, &ref, &r, (tgc_matmul_precision)p);
                te_free(&r);
                tgc_fn_free(fp);
            }
        te_free(&ref);

        /* dynamic shapes: the D dims marked, D = 6 then 9, both modes */
        if (v.has_d) {
            tgc_fn *dyn[2] = {
                te_compile(&x, TGC_BACKEND_CUDA, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST),
                te_compile(&x, TGC_BACKEND_CUDA, TGC_MODE_REDUCE_OVERHEAD, TGC_PRECISION_HIGHEST)};
            const int64_t sizes[2] = {c->d[0] ? c->d[1] : 6, c->d[0] ? c->d[2] : 9};
            for (int k = 0; k < 2 && dyn[0] && dyn[1]; k++) {
                x.D = sizes[k];
                seed = te_seed(case_i, vi, x.D);
                tgc_scope_push();
                if (te_make_inputs(&x, seed, &ins) && te_reference(&x, ref_f, &ins, seed, &ref))
                    for (int m = 0; m < 2; m++) {
                        x.pass = m ? "dynamic, reduce-overhead" : "dynamic, default";
                        if (te_run(&x, &ins, gpu, dyn[m], 1, seed, &r))
                            te_check(&x, &ref, &r, TGC_PRECISION_HIGHEST);
                        te_free(&r);
                    }
                te_free(&ref);
                tgc_scope_pop();
            }
            x.pass = "dynamic";
            for (int m = 0; m < 2 && dyn[0] && dyn[1]; m++)
                if (v.d_only_in_args)
                    te_expect_compiles(&x, dyn[m], 1);
            tgc_fn_free(dyn[0]);
            tgc_fn_free(dyn[1]);
        }
    next:
        tgc_fn_free(ref_f);
        tgc_fn_free(fd);
        tgc_fn_free(fg);
        tgc_scope_pop();
    }
    if (x.failures)
        fail_msg("%s: %d failed checks (listed above)", c->name, x.failures);
}

/* ---- creation, copies, the random stream ---- */

#define SHAPE2(a, b) ((const int64_t[]){(a), (b)})

static void expect_equal(const char *what, const tgc_tensor *got, const tgc_tensor *want,
                         double rowtol)
{
    gpu_cmp r = gpu_compare(got, want, rowtol, 1.0);
    if (!r.ok)
        fail_msg("%s: %s", what, r.msg);
}

static void test_creation_on_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_device gpu = tgc_cuda(0);
    tgc_scope_push();
    const int64_t *s = SHAPE2(37, 1031); /* odd sizes: no multiple of a vector width */
    for (int dt = TGC_F32; dt <= TGC_BF16; dt++) {
        tgc_manual_seed(5);
        tgc_tensor *c = tgc_rand(s, 2, (tgc_dtype)dt, tgc_cpu());
        tgc_manual_seed(5);
        tgc_tensor *g = tgc_rand(s, 2, (tgc_dtype)dt, gpu);
        assert_non_null(g);
        assert_int_equal(tgc_device_of(g).type, TGC_DEVICE_CUDA);
        if (!gpu_bit_equal(g, c))
            fail_msg("tgc_rand %s on cuda:0 differs from the CPU's bits", tgc_dtype_name(dt));
        tgc_manual_seed(6);
        c = tgc_randn(s, 2, (tgc_dtype)dt, tgc_cpu());
        tgc_manual_seed(6);
        g = tgc_randn(s, 2, (tgc_dtype)dt, gpu);
        expect_equal("tgc_randn", g, c, 0);
    }
    /* the stream advances alike: rand, rand on the device equal rand, rand on the CPU */
    tgc_manual_seed(9);
    tgc_tensor *c1 = tgc_rand(s, 2, TGC_F32, tgc_cpu()), *c2 = tgc_rand(s, 2, TGC_F32, tgc_cpu());
    tgc_manual_seed(9);
    tgc_tensor *g1 = tgc_rand(s, 2, TGC_F32, gpu), *g2 = tgc_rand(s, 2, TGC_F32, gpu);
    assert_true(gpu_bit_equal(g1, c1) && gpu_bit_equal(g2, c2));

    for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++) {
        expect_equal("tgc_zeros", tgc_zeros(s, 2, (tgc_dtype)dt, gpu),
                     tgc_zeros(s, 2, (tgc_dtype)dt, tgc_cpu()), 0);
        expect_equal("tgc_ones", tgc_ones(s, 2, (tgc_dtype)dt, gpu),
                     tgc_ones(s, 2, (tgc_dtype)dt, tgc_cpu()), 0);
        expect_equal("tgc_full", tgc_full(s, 2, 3.0, (tgc_dtype)dt, gpu),
                     tgc_full(s, 2, 3.0, (tgc_dtype)dt, tgc_cpu()), 0);
    }
    expect_equal("tgc_arange", tgc_arange(-3, 1000, 7, TGC_I64, gpu),
                 tgc_arange(-3, 1000, 7, TGC_I64, tgc_cpu()), 0);
    expect_equal("tgc_arange f32", tgc_arange(0.5, 77, 0.25, TGC_F32, gpu),
                 tgc_arange(0.5, 77, 0.25, TGC_F32, tgc_cpu()), 0);
    float data[6] = {1, -2, 3.5f, 4, 5, 6e7f};
    tgc_tensor *fd = tgc_from_data(data, sizeof data, SHAPE2(2, 3), 2, TGC_F32, gpu);
    assert_non_null(fd);
    float back[6];
    assert_int_equal(tgc_copy_to_host(fd, back, sizeof back), TGC_OK);
    assert_memory_equal(back, data, sizeof data);
    assert_true(tgc_item_f64(fd) == 1.0);
    int64_t iv = 42;
    assert_true(tgc_item_i64(tgc_from_data(&iv, sizeof iv, SHAPE2(1, 1), 2, TGC_I64, gpu)) == 42);
    tgc_scope_pop();
}

static void test_copies_between_devices(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_device gpu = tgc_cuda(0);
    tgc_scope_push();
    tgc_manual_seed(3);
    tgc_tensor *c = tgc_randn(SHAPE2(33, 65), 2, TGC_F32, tgc_cpu());
    tgc_tensor *g = tgc_to(c, gpu);
    assert_non_null(g);
    assert_true(gpu_bit_equal(g, c));
    /* views on the device, moved back: transposed, sliced, expanded */
    tgc_tensor *gt = tgc_transpose(g, 0, 1), *ct = tgc_transpose(c, 0, 1);
    assert_true(gpu_bit_equal(tgc_to(gt, tgc_cpu()), ct));
    assert_true(gpu_bit_equal(tgc_slice(g, 1, 1, 60, 3), tgc_slice(c, 1, 1, 60, 3)));
    tgc_tensor *col = tgc_slice(g, 1, 0, 1, 1);
    assert_true(gpu_bit_equal(tgc_expand(col, SHAPE2(33, 9), 2),
                              tgc_expand(tgc_slice(c, 1, 0, 1, 1), SHAPE2(33, 9), 2)));
    /* tgc_to of a view onto the same device is dense */
    tgc_tensor *dense = tgc_to(gt, gpu);
    assert_non_null(dense);
    assert_true(tgc_is_contiguous(dense));
    assert_true(gpu_bit_equal(dense, ct));
    /* tgc_copy_ across devices and dtypes */
    tgc_tensor *dst = tgc_zeros(SHAPE2(65, 33), 2, TGC_F16, gpu);
    assert_int_equal(tgc_copy_(dst, ct), TGC_OK);
    expect_equal("tgc_copy_ cpu f32 -> cuda f16", dst, tgc_cast(ct, TGC_F16), 0);
    tgc_tensor *hdst = tgc_zeros(SHAPE2(65, 33), 2, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(hdst, gt), TGC_OK);
    assert_true(gpu_bit_equal(hdst, ct));
    /* tgc_module_to keeps tensor identity */
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_tensor *p = tgc_module_param(m, "w", c);
    assert_non_null(p);
    assert_int_equal(tgc_module_to(m, gpu), TGC_OK);
    assert_ptr_equal(tgc_module_get(m, "w"), p);
    assert_int_equal(tgc_device_of(p).type, TGC_DEVICE_CUDA);
    assert_true(gpu_bit_equal(p, c));
    assert_int_equal(tgc_module_to(m, tgc_cpu()), TGC_OK);
    assert_int_equal(tgc_device_of(p).type, TGC_DEVICE_CPU);
    assert_true(gpu_bit_equal(p, c));
    tgc_module_free(m);
    tgc_scope_pop();
}

static tgc_status random_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_device dev = tgc_device_of(in[0]);
    out[0] =
        tgc_add(tgc_dropout(in[0], 0.5, 1),
                tgc_mul(tgc_rand(SHAPE2(1, 257), 2, TGC_F32, dev),
                        tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0.0)));
    return te_status(out[0]);
}

/* Three calls in a row without reseeding: eager and compiled on the GPU (both modes) draw
 * the CPU's bits, call after call. */
static void test_random_stream(void **state)
{
    (void)state;
    GPU_REQUIRE();
    enum { CALLS = 3 };
    tgc_scope_push();
    tgc_manual_seed(1);
    tgc_tensor *c = tgc_randn(SHAPE2(129, 257), 2, TGC_F32, tgc_cpu());
    tgc_tensor *g = tgc_to(c, tgc_cuda(0));
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_INTERP;
    tgc_fn *ref = tgc_compile(random_fn, "random_ref", &cfg);
    cfg.backend = TGC_BACKEND_CUDA;
    tgc_fn *fd = tgc_compile(random_fn, "random_cuda", &cfg);
    cfg.mode = TGC_MODE_REDUCE_OVERHEAD;
    tgc_fn *fg = tgc_compile(random_fn, "random_cuda_graph", &cfg);
    assert_true(ref && fd && fg);
    tgc_tensor *want[CALLS], *got[CALLS];
    tgc_manual_seed(77);
    for (int k = 0; k < CALLS; k++)
        assert_int_equal(tgc_call(ref, NULL, &c, 1, &want[k], 1), TGC_OK);
    const char *names[3] = {"eager", "default", "reduce-overhead"};
    for (int path = 0; path < 3; path++) {
        tgc_manual_seed(77);
        for (int k = 0; k < CALLS; k++) {
            tgc_status st = path == 0   ? random_fn(NULL, &g, 1, &got[k], 1)
                            : path == 1 ? tgc_call(fd, NULL, &g, 1, &got[k], 1)
                                        : tgc_call(fg, NULL, &g, 1, &got[k], 1);
            if (st != TGC_OK)
                fail_msg("%s call %d: %s", names[path], k, tgc_last_error());
        }
        for (int k = 0; k < CALLS; k++) {
            gpu_cmp r = gpu_compare(got[k], want[k], gpu_precision_tol(TGC_PRECISION_HIGHEST), 1);
            if (!r.ok)
                fail_msg("%s call %d: %s", names[path], k, r.msg);
        }
    }
    tgc_fn_free(ref);
    tgc_fn_free(fd);
    tgc_fn_free(fg);
    tgc_scope_pop();
}

/* ---- errors ---- */

static int contains_ci(const char *hay, const char *needle)
{
    for (; *hay; hay++) {
        size_t k = 0;
        while (needle[k] && hay[k] && (hay[k] | 0x20) == (needle[k] | 0x20))
            k++;
        if (!needle[k])
            return 1;
    }
    return 0;
}

static tgc_status add_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add(in[0], in[1]);
    return te_status(out[0]);
}

static void test_error_device_mix(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    tgc_tensor *c = tgc_ones(SHAPE2(4, 5), 2, TGC_F32, tgc_cpu());
    tgc_tensor *g = tgc_ones(SHAPE2(4, 5), 2, TGC_F32, tgc_cuda(0));
    assert_non_null(g);
    tgc_clear_error();
    assert_null(tgc_add(c, g));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    if (!contains_ci(tgc_last_error(), "cpu") || !contains_ci(tgc_last_error(), "cuda"))
        fail_msg("the device-mix message does not name both devices: \"%s\"", tgc_last_error());
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_CUDA;
    tgc_fn *f = tgc_compile(add_fn, "add_mix", &cfg);
    assert_non_null(f);
    tgc_tensor *in[2] = {c, g}, *out = NULL;
    tgc_status st = tgc_call(f, NULL, in, 2, &out, 1);
    assert_int_equal(st, TGC_ERR_DEVICE);
    if (!contains_ci(tgc_last_error(), "cpu") || !contains_ci(tgc_last_error(), "cuda"))
        fail_msg("tgc_call's device-mix message does not name both devices: \"%s\"",
                 tgc_last_error());
    /* the function still works with inputs of one device */
    in[0] = tgc_to(c, tgc_cuda(0));
    assert_int_equal(tgc_call(f, NULL, in, 2, &out, 1), TGC_OK);
    expect_equal("add after a refused call", out,
                 tgc_full(SHAPE2(4, 5), 2, 2.0, TGC_F32, tgc_cpu()), 0);
    tgc_fn_free(f);
    tgc_scope_pop();
}

static void test_error_oom(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_scope_push();
    /* 2^38 floats = 1 TiB: more than any GPU of today */
    int64_t s[2] = {(int64_t)1 << 20, (int64_t)1 << 18};
    tgc_clear_error();
    tgc_tensor *t = tgc_empty(s, 2, TGC_F32, tgc_cuda(0));
    assert_null(t);
    assert_int_equal(tgc_last_status(), TGC_ERR_OOM);
    print_message("OOM message: %s\n", tgc_last_error());
    /* the device still works */
    tgc_tensor *ok = tgc_ones(SHAPE2(1000, 1000), 2, TGC_F32, tgc_cuda(0));
    assert_non_null(ok);
    assert_true(tgc_item_f64(tgc_sum(ok, NULL, 0, 0)) == 1e6);
    tgc_scope_pop();
}

/* Runs with or without a GPU: an index past the devices is refused. */
static void test_error_bad_index(void **state)
{
    (void)state;
    int have_gpu = gpu_available(); /* probe first: the probe clears the error state */
    tgc_scope_push();
    tgc_clear_error();
    assert_null(tgc_zeros(SHAPE2(2, 2), 2, TGC_F32, tgc_cuda(99)));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    if (have_gpu && !strstr(tgc_last_error(), "99"))
        fail_msg("the message does not name device 99: \"%s\"", tgc_last_error());
    tgc_tensor *c = tgc_ones(SHAPE2(2, 2), 2, TGC_F32, tgc_cpu());
    tgc_clear_error();
    assert_null(tgc_to(c, tgc_cuda(99)));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    tgc_module *m = tgc_module_create("m", NULL);
    assert_non_null(tgc_module_param(m, "w", c));
    assert_int_equal(tgc_module_to(m, tgc_cuda(99)), TGC_ERR_DEVICE);
    assert_int_equal(tgc_device_of(tgc_module_get(m, "w")).type, TGC_DEVICE_CPU);
    tgc_module_free(m);
    tgc_scope_pop();
}

#if TGC_TEST_HAVE_CUDA_API
static void test_cuda_header_api(void **state)
{
    (void)state;
    GPU_REQUIRE();
    assert_int_equal(tgc_cuda_check(), TGC_OK);
    assert_true(tgc_cuda_device_count() >= 1);
    char name[256] = "";
    assert_int_equal(tgc_cuda_device_name(0, name, sizeof name), TGC_OK);
    assert_true(name[0] != '\0');
    print_message("device 0: %s, %d device(s)\n", name, tgc_cuda_device_count());
    assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
    assert_non_null(tgc_cuda_current_stream(0));
    assert_int_equal(tgc_cuda_set_stream(0, NULL), TGC_OK);
    assert_int_equal(tgc_cuda_synchronize(99), TGC_ERR_DEVICE);

    /* memory statistics follow a 256 MiB tensor */
    tgc_cuda_memstats before, during, after;
    assert_int_equal(tgc_cuda_memory_stats(0, &before), TGC_OK);
    assert_true(before.device_total > 0 && before.device_free <= before.device_total);
    tgc_scope_push();
    int64_t s[2] = {8192, 8192};
    tgc_tensor *t = tgc_zeros(s, 2, TGC_F32, tgc_cuda(0));
    assert_non_null(t);
    assert_int_equal(tgc_cuda_memory_stats(0, &during), TGC_OK);
    assert_true(during.in_use >= before.in_use + ((size_t)256 << 20));
    assert_true(during.peak >= during.in_use);
    tgc_scope_pop();
    assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
    tgc_cuda_empty_cache();
    assert_int_equal(tgc_cuda_memory_stats(0, &after), TGC_OK);
    print_message("memory: in use %zu -> %zu -> %zu bytes, cached after empty_cache %zu, peak "
                  "%zu, device free %zu of %zu\n",
                  before.in_use, during.in_use, after.in_use, after.cached, after.peak,
                  after.device_free, after.device_total);
    assert_true(after.in_use + ((size_t)256 << 20) <= during.in_use);
    assert_true(after.cached == 0);
    assert_true(after.peak >= during.in_use);
    tgc_cuda_reset_peak(0);
    assert_int_equal(tgc_cuda_memory_stats(0, &after), TGC_OK);
    assert_true(after.peak == after.in_use);
}
#endif

/* cfg.cache_dir: every program NVRTC compiled is written there as one .cubin file (loading
 * them back happens in a later process: this process's module cache answers first). */
static int count_cubins(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^tgc-cuda-sm[0-9]*-[0-9a-f]*\\.cubin$'", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p)
        pclose(p);
    return n;
}

static tgc_status scale_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    /* a constant no other test uses, so its kernel text is new to this process */
    out[0] = tgc_add_scalar(tgc_mul_scalar(in[0], 3.0625), 0.4375);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_persistent_cache(void **state)
{
    (void)state;
    GPU_REQUIRE();
    char dir[] = "/tmp/tgc_cuda_cache_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tgc_scope_push();
    tgc_config cfg = tgc_config_default();
    cfg.cache_dir = dir;
    tgc_fn *f = tgc_compile(scale_fn, "cache_scale", &cfg);
    tgc_tensor *x = tgc_to(tgc_full(SHAPE2(3, 7), 2, 2.0, TGC_F32, tgc_cpu()), tgc_cuda(0));
    tgc_tensor *y = NULL;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    expect_equal("scaled", y, tgc_full(SHAPE2(3, 7), 2, 6.5625, TGC_F32, tgc_cpu()), 0);
    int n = count_cubins(dir);
    if (n < 1)
        fail_msg("cfg.cache_dir %s holds %d cubin files after a compile", dir, n);
    tgc_fn_free(f);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    tgc_scope_pop();
}

int main(void)
{
    enum { N_EXTRA = 9 };
    struct CMUnitTest *tests = calloc((size_t)N_OF(te_cases) + N_EXTRA, sizeof *tests);
    if (!tests)
        return 1;
    int n = 0;
    tests[n++] = (struct CMUnitTest){"error_bad_index", test_error_bad_index, NULL, NULL, NULL};
#if TGC_TEST_HAVE_CUDA_API
    tests[n++] = (struct CMUnitTest){"cuda_header_api", test_cuda_header_api, NULL, NULL, NULL};
#endif
    tests[n++] =
        (struct CMUnitTest){"creation_on_device", test_creation_on_device, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"copies_between_devices", test_copies_between_devices, NULL,
                                     NULL, NULL};
    tests[n++] = (struct CMUnitTest){"error_device_mix", test_error_device_mix, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"error_oom", test_error_oom, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"random_stream", test_random_stream, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"persistent_cache", test_persistent_cache, NULL, NULL, NULL};
    /* TGC_GPU_TEST_STRIDE=N runs every N-th op case only (make test-gpu's memcheck pass uses
     * it: under compute-sanitizer every launch is much slower) */
    te_selftest = getenv("TGC_GPU_TEST_SELFTEST") && atoi(getenv("TGC_GPU_TEST_SELFTEST")) > 0;
    if (te_selftest)
        print_message("TGC_GPU_TEST_SELFTEST: the op cases' GPU passes run on the CPU\n");
    const char *stride_env = getenv("TGC_GPU_TEST_STRIDE");
    int stride = stride_env ? atoi(stride_env) : 1;
    if (stride < 1)
        stride = 1;
    if (stride > 1)
        print_message("TGC_GPU_TEST_STRIDE=%d: every %d-th op case of %d\n", stride, stride,
                      N_OF(te_cases));
    /* TGC_GPU_TEST_SHARD=k/n: op cases i with i % n == k only, the other tests in shard 0
     * (ctest runs four shards in parallel: tests/CMakeLists.txt) */
    int shard = 0, shards = 1;
    const char *shard_env = getenv("TGC_GPU_TEST_SHARD");
    if (shard_env && (sscanf(shard_env, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 ||
                      shard >= shards))
        shard = 0, shards = 1;
    if (shard > 0)
        n = 0;
    for (int i = 0; i < N_OF(te_cases); i += stride)
        if ((i / stride) % shards == shard)
            tests[n++] = (struct CMUnitTest){te_cases[i].name, te_run_case, NULL, NULL,
                                             (void *)&te_cases[i]};
    int rc = _cmocka_run_group_tests("cuda_public", tests, (size_t)n, NULL, NULL);
    free(tests);
    tgc_shutdown();
    return gpu_skip_finish(rc);
}
