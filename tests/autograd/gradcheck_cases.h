/* The gradcheck cases shared by test_gradcheck.c (CPU: finite differences on f64, then every
 * CPU backend against interp) and test_cuda_gradcheck.c (the same cases on cuda:0 against
 * interp), and the harness both use (header only; tests only; main thread only).
 *
 * A case is a function of its inputs that applies one op (sometimes after a view that makes
 * an operand non-contiguous, or with broadcasting and size-1 dims). The checked loss is
 * L = sum(cast(op(x), f64) * r) with a fixed r of the result's shape, so every output element
 * gets its own weight. Differentiable inputs (GC_F) are leaves; the others are indices,
 * bool masks, float constants (GC_FC, call inputs) and module buffers (GC_BUF: batch_norm's
 * running statistics, written in place). Values are a fixed hash of (case, input, element),
 * uniform in [lo, hi] (GC_IDX: integers in [lo, hi)), so every run sees the same numbers.
 *
 * Eager grads: leaves made with tgc_requires_grad, tgc_backward(L), tgc_grad(leaf).
 * Compiled grads: the leaves are parameters of a module (buffers for GC_BUF), the model
 * function zeroes the grads, computes L, calls tgc_backward and returns L; the grads are
 * the parameters' .grad after tgc_call (written in place by the compiled variant). The
 * random stream is reseeded before every forward, so dropout draws the same bits each time. */
#ifndef TGC_TESTS_AUTOGRAD_GRADCHECK_CASES_H
#define TGC_TESTS_AUTOGRAD_GRADCHECK_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgc/tgc.h"

typedef enum { GC_F, GC_FC, GC_BUF, GC_IDX, GC_IDX32, GC_BOOL } gc_kind;

typedef struct gc_in {
    gc_kind kind;
    int nd;
    int64_t shape[6];
    double lo, hi; /* both 0: [-1, 1] */
} gc_in;

typedef tgc_tensor *(*gc_fn)(tgc_tensor *const *x);

enum {
    GC_HALF = 1,  /* also checked in f16 and bf16 */
    GC_MM = 2,    /* a matrix product: GPU f32 uses TF32-class tolerances */
    GC_LOOSE = 4, /* long chains of rounding in low precision: 4x the dtype tolerance */
};

typedef struct gc_case {
    const char *name;
    gc_fn fn;
    int n_in;
    gc_in in[5];
    unsigned flags;
    double fd_h, fd_tol; /* 0: 1e-6 and 1e-6 */
} gc_case;

#define GC_SHAPE(...)                                                                              \
    .nd = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .shape = {__VA_ARGS__}
#define F(...)                                                                                     \
    {                                                                                              \
        .kind = GC_F, GC_SHAPE(__VA_ARGS__)                                                        \
    }
#define FR(lo_, hi_, ...)                                                                          \
    {                                                                                              \
        .kind = GC_F, GC_SHAPE(__VA_ARGS__), .lo = lo_, .hi = hi_                                  \
    }
#define FC(lo_, hi_, ...)                                                                          \
    {                                                                                              \
        .kind = GC_FC, GC_SHAPE(__VA_ARGS__), .lo = lo_, .hi = hi_                                 \
    }
#define BUF(lo_, hi_, ...)                                                                         \
    {                                                                                              \
        .kind = GC_BUF, GC_SHAPE(__VA_ARGS__), .lo = lo_, .hi = hi_                                \
    }
#define IDX(hi_, ...)                                                                              \
    {                                                                                              \
        .kind = GC_IDX, GC_SHAPE(__VA_ARGS__), .lo = 0, .hi = hi_                                  \
    }
#define IDX32(hi_, ...)                                                                            \
    {                                                                                              \
        .kind = GC_IDX32, GC_SHAPE(__VA_ARGS__), .lo = 0, .hi = hi_                                \
    }
#define BOOLS(...)                                                                                 \
    {                                                                                              \
        .kind = GC_BOOL, GC_SHAPE(__VA_ARGS__)                                                     \
    }
/* 0-d */
#define F0                                                                                         \
    {                                                                                              \
        .kind = GC_F, .nd = 0                                                                      \
    }

/* ---- the ops ---- */

#define BIN(name, op)                                                                              \
    static tgc_tensor *c_##name(tgc_tensor *const *x)                                              \
    {                                                                                              \
        return op(x[0], x[1]);                                                                     \
    }
#define UN(name, op)                                                                               \
    static tgc_tensor *c_##name(tgc_tensor *const *x)                                              \
    {                                                                                              \
        return op(x[0]);                                                                           \
    }
BIN(add, tgc_add)
BIN(sub, tgc_sub)
BIN(mul, tgc_mul)
BIN(div, tgc_div)
BIN(pow, tgc_pow)
BIN(maximum, tgc_maximum)
BIN(minimum, tgc_minimum)
BIN(matmul, tgc_matmul)
UN(neg, tgc_neg)
UN(abs, tgc_abs)
UN(exp, tgc_exp)
UN(log, tgc_log)
UN(sqrt, tgc_sqrt)
UN(rsqrt, tgc_rsqrt)
UN(tanh, tgc_tanh)
UN(sigmoid, tgc_sigmoid)
UN(relu, tgc_relu)
UN(gelu, tgc_gelu)
UN(gelu_tanh, tgc_gelu_tanh)
UN(silu, tgc_silu)
UN(erf, tgc_erf)
UN(sin, tgc_sin)
UN(cos, tgc_cos)
/* logsumexp over one dim, keepdim; over two dims without it */
static tgc_tensor *c_lse(tgc_tensor *const *x)
{
    return tgc_logsumexp(x[0], (const int[]){1}, 1, 1);
}
static tgc_tensor *c_lse2(tgc_tensor *const *x)
{
    return tgc_logsumexp(x[0], (const int[]){0, 2}, 2, 0);
}
static tgc_tensor *c_rms(tgc_tensor *const *x)
{
    return tgc_rms_norm(x[0], 2, x[1], 1e-5);
}
static tgc_tensor *c_rms_plain(tgc_tensor *const *x)
{
    return tgc_rms_norm(x[0], 1, NULL, -1.0);
}
static tgc_tensor *c_gn(tgc_tensor *const *x)
{
    return tgc_group_norm(x[0], 2, x[1], x[2], 1e-5);
}
static tgc_tensor *c_gn_plain(tgc_tensor *const *x)
{
    return tgc_group_norm(x[0], 3, NULL, NULL, 1e-5);
}
UN(contiguous_t, tgc_contiguous)

/* x transposed (last two dims) first: a non-contiguous operand */
static tgc_tensor *c_exp_t(tgc_tensor *const *x)
{
    return tgc_exp(tgc_transpose(x[0], 0, 1));
}
static tgc_tensor *c_mul_t(tgc_tensor *const *x)
{
    return tgc_mul(tgc_transpose(x[0], 0, 1), x[1]);
}
static tgc_tensor *c_add_self(tgc_tensor *const *x)
{
    return tgc_mul(x[0], x[0]);
}
static tgc_tensor *c_where(tgc_tensor *const *x)
{
    return tgc_where(x[0], x[1], x[2]);
}
static tgc_tensor *c_add_s(tgc_tensor *const *x)
{
    return tgc_add_scalar(x[0], 1.5);
}
static tgc_tensor *c_sub_s(tgc_tensor *const *x)
{
    return tgc_sub_scalar(x[0], -0.5);
}
static tgc_tensor *c_mul_s(tgc_tensor *const *x)
{
    return tgc_mul_scalar(x[0], -2.5);
}
static tgc_tensor *c_div_s(tgc_tensor *const *x)
{
    return tgc_div_scalar(x[0], 3.0);
}
static tgc_tensor *c_pow_s(tgc_tensor *const *x)
{
    return tgc_pow_scalar(x[0], 2.5);
}
static tgc_tensor *c_pow_s0(tgc_tensor *const *x)
{
    return tgc_add(tgc_pow_scalar(x[0], 0.0), x[0]);
}
static tgc_tensor *c_clamp(tgc_tensor *const *x)
{
    return tgc_clamp(x[0], -0.5, 0.6);
}
/* cast and back: the gradient goes through both casts */
static tgc_tensor *c_cast(tgc_tensor *const *x)
{
    tgc_dtype dt = tgc_dtype_of(x[0]);
    return tgc_mul(tgc_cast(tgc_cast(x[0], dt == TGC_F64 ? TGC_F32 : TGC_F64), dt), x[0]);
}

/* reductions */
static tgc_tensor *c_sum02(tgc_tensor *const *x)
{
    const int d[2] = {0, 2};
    return tgc_sum(x[0], d, 2, 0);
}
static tgc_tensor *c_sum_all(tgc_tensor *const *x)
{
    return tgc_sum(x[0], NULL, 0, 0);
}
static tgc_tensor *c_mean1k(tgc_tensor *const *x)
{
    const int d = 1;
    return tgc_mean(x[0], &d, 1, 1);
}
static tgc_tensor *c_mean_all(tgc_tensor *const *x)
{
    return tgc_mean(x[0], NULL, 0, 0);
}
static tgc_tensor *c_max1(tgc_tensor *const *x)
{
    const int d = 1;
    return tgc_max(x[0], &d, 1, 0);
}
static tgc_tensor *c_max_all(tgc_tensor *const *x)
{
    return tgc_max(x[0], NULL, 0, 1);
}
static tgc_tensor *c_var02(tgc_tensor *const *x)
{
    const int d[2] = {0, 2};
    return tgc_var(x[0], d, 2, 1, 0);
}
static tgc_tensor *c_var_all(tgc_tensor *const *x)
{
    return tgc_var(x[0], NULL, 0, 0, 1);
}
static tgc_tensor *c_softmax(tgc_tensor *const *x)
{
    return tgc_softmax(x[0], 1);
}
static tgc_tensor *c_log_softmax(tgc_tensor *const *x)
{
    return tgc_log_softmax(x[0], -1);
}

/* views and movement */
static tgc_tensor *c_reshape(tgc_tensor *const *x)
{
    const int64_t s[2] = {-1, 5};
    return tgc_reshape(x[0], s, 2);
}
static tgc_tensor *c_reshape_t(tgc_tensor *const *x) /* not a view: a copy */
{
    const int64_t s[1] = {-1};
    return tgc_reshape(tgc_transpose(x[0], 0, 1), s, 1);
}
static tgc_tensor *c_permute(tgc_tensor *const *x)
{
    const int p[3] = {2, 0, 1};
    return tgc_permute(x[0], p, 3);
}
static tgc_tensor *c_expand(tgc_tensor *const *x)
{
    const int64_t s[4] = {2, 3, 4, -1};
    return tgc_expand(x[0], s, 4);
}
static tgc_tensor *c_squeeze(tgc_tensor *const *x)
{
    return tgc_squeeze(x[0], 1);
}
static tgc_tensor *c_squeeze_all(tgc_tensor *const *x)
{
    return tgc_squeeze(x[0], TGC_ALL_DIMS);
}
static tgc_tensor *c_unsqueeze(tgc_tensor *const *x)
{
    return tgc_unsqueeze(x[0], -1);
}
static tgc_tensor *c_slice1(tgc_tensor *const *x)
{
    return tgc_slice(x[0], 1, 1, 4, 1);
}
static tgc_tensor *c_slice_step(tgc_tensor *const *x)
{
    return tgc_slice(x[0], 0, 1, 100, 3);
}
static tgc_tensor *c_slice_neg(tgc_tensor *const *x)
{
    return tgc_slice(x[0], -1, -4, -1, 2);
}
static tgc_tensor *c_flatten(tgc_tensor *const *x)
{
    return tgc_flatten(x[0], 1, -1);
}
static tgc_tensor *c_contig(tgc_tensor *const *x)
{
    return tgc_contiguous(tgc_transpose(x[0], 0, 2));
}
static tgc_tensor *c_cat(tgc_tensor *const *x)
{
    return tgc_cat(x, 3, 1);
}
static tgc_tensor *c_stack(tgc_tensor *const *x)
{
    return tgc_stack(x, 2, -1);
}
static tgc_tensor *c_pad(tgc_tensor *const *x)
{
    const int64_t p[4] = {1, 2, 0, 1};
    return tgc_pad(x[0], p, 2, 0.5);
}
static tgc_tensor *c_pad_crop(tgc_tensor *const *x)
{
    const int64_t p[4] = {-1, 2, 1, -2};
    return tgc_pad(x[0], p, 2, 0.0);
}
static tgc_tensor *c_flip(tgc_tensor *const *x)
{
    return tgc_flip(x[0], (const int[]){0, -1}, 2);
}
static tgc_tensor *c_embedding(tgc_tensor *const *x)
{
    return tgc_embedding(x[0], x[1]);
}
static tgc_tensor *c_gather(tgc_tensor *const *x)
{
    return tgc_gather(x[0], 1, x[1]);
}
static tgc_tensor *c_index_select(tgc_tensor *const *x)
{
    return tgc_index_select(x[0], 0, x[1]);
}

/* linear algebra */
static tgc_tensor *c_matmul_tb(tgc_tensor *const *x)
{
    return tgc_matmul(x[0], tgc_transpose(x[1], -2, -1));
}
static tgc_tensor *c_linear(tgc_tensor *const *x)
{
    return tgc_linear(x[0], x[1], x[2]);
}
static tgc_tensor *c_linear_nb(tgc_tensor *const *x)
{
    return tgc_linear(x[0], x[1], NULL);
}
static tgc_tensor *c_conv(tgc_tensor *const *x)
{
    return tgc_conv2d(x[0], x[1], x[2], &(tgc_conv2d_opts){.stride = {2, 1}, .padding = {1, 1}});
}
static tgc_tensor *c_conv_g(tgc_tensor *const *x)
{
    return tgc_conv2d(x[0], x[1], NULL,
                      &(tgc_conv2d_opts){.dilation = {2, 1}, .padding = {2, 0}, .groups = 2});
}
static tgc_tensor *c_maxpool(tgc_tensor *const *x)
{
    return tgc_max_pool2d(
        x[0], &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
}
static tgc_tensor *c_avgpool(tgc_tensor *const *x)
{
    return tgc_avg_pool2d(
        x[0], &(tgc_pool2d_opts){.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}});
}
static tgc_tensor *c_avgpool_ex(tgc_tensor *const *x)
{
    return tgc_avg_pool2d(
        x[0], &(tgc_pool2d_opts){
                  .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_padding = 1});
}
static tgc_tensor *c_adaptive(tgc_tensor *const *x)
{
    return tgc_adaptive_avg_pool2d(x[0], 2, 3);
}

/* normalization, dropout */
static tgc_tensor *c_bn_train(tgc_tensor *const *x)
{
    return tgc_batch_norm(x[0], x[3], x[4], x[1], x[2], 1, 0.1, 1e-5);
}
static tgc_tensor *c_bn_train_plain(tgc_tensor *const *x)
{
    return tgc_batch_norm(x[0], NULL, NULL, NULL, NULL, 1, 0.1, 1e-5);
}
static tgc_tensor *c_bn_eval(tgc_tensor *const *x)
{
    return tgc_batch_norm(x[0], x[3], x[4], x[1], x[2], 0, 0.1, 1e-5);
}
static tgc_tensor *c_ln(tgc_tensor *const *x)
{
    return tgc_layer_norm(x[0], 2, x[1], x[2], 1e-5);
}
static tgc_tensor *c_ln_plain(tgc_tensor *const *x)
{
    return tgc_layer_norm(x[0], 1, NULL, NULL, 1e-5);
}
static tgc_tensor *c_dropout(tgc_tensor *const *x)
{
    return tgc_dropout(x[0], 0.3, 1);
}
static tgc_tensor *c_dropout_eval(tgc_tensor *const *x)
{
    return tgc_dropout(x[0], 0.3, 0);
}

/* losses */
static tgc_tensor *c_ce_mean(tgc_tensor *const *x)
{
    return tgc_cross_entropy(x[0], x[1], TGC_REDUCE_MEAN, 2, 0.0);
}
static tgc_tensor *c_ce_none_ls(tgc_tensor *const *x)
{
    return tgc_cross_entropy(x[0], x[1], TGC_REDUCE_NONE, -100, 0.1);
}
static tgc_tensor *c_ce_sum_ls_ignore(tgc_tensor *const *x)
{
    return tgc_cross_entropy(x[0], x[1], TGC_REDUCE_SUM, 1, 0.2);
}
static tgc_tensor *c_ce_mean_ls_ignore(tgc_tensor *const *x)
{
    return tgc_cross_entropy(x[0], x[1], TGC_REDUCE_MEAN, 0, 0.3);
}
static tgc_tensor *c_nll_mean(tgc_tensor *const *x)
{
    return tgc_nll_loss(x[0], x[1], TGC_REDUCE_MEAN, 3);
}
static tgc_tensor *c_nll_none(tgc_tensor *const *x)
{
    return tgc_nll_loss(x[0], x[1], TGC_REDUCE_NONE, -100);
}

static tgc_tensor *c_cat_t(tgc_tensor *const *x)
{
    tgc_tensor *ts[2] = {tgc_transpose(x[0], 0, 1), x[1]};
    return tgc_cat(ts, 2, 0);
}
static tgc_tensor *c_slice_one(tgc_tensor *const *x)
{
    return tgc_slice(x[0], 0, 2, 3, 1);
}
static tgc_tensor *c_ln_w(tgc_tensor *const *x)
{
    return tgc_layer_norm(x[0], 1, x[1], NULL, 1e-3);
}
static tgc_tensor *c_bn_eval_nw(tgc_tensor *const *x)
{
    return tgc_batch_norm(x[0], x[1], x[2], NULL, NULL, 0, 0.1, 1e-5);
}
static tgc_tensor *c_softmax0(tgc_tensor *const *x)
{
    return tgc_softmax(x[0], 0);
}
static tgc_tensor *c_gather0(tgc_tensor *const *x)
{
    return tgc_gather(x[0], 0, x[1]);
}
static tgc_tensor *c_expand_lead(tgc_tensor *const *x)
{
    const int64_t s[3] = {2, 3, 4};
    return tgc_expand(x[0], s, 3);
}
static tgc_tensor *c_mean_size1(tgc_tensor *const *x)
{
    const int d[2] = {1, 2};
    return tgc_mean(x[0], d, 2, 0);
}
static tgc_tensor *c_maxpool_s1(tgc_tensor *const *x)
{
    return tgc_max_pool2d(x[0], &(tgc_pool2d_opts){.kernel = {2, 3}, .stride = {1, 1}});
}

/* attention */
static tgc_tensor *c_sdpa(tgc_tensor *const *x)
{
    return tgc_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, 0, 0.0);
}
static tgc_tensor *c_sdpa_causal(tgc_tensor *const *x)
{
    return tgc_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, 1, 0.7);
}
static tgc_tensor *c_sdpa_causal_rect(tgc_tensor *const *x)
{
    return tgc_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, 1, 0.0);
}
static tgc_tensor *c_sdpa_mask(tgc_tensor *const *x)
{
    return tgc_scaled_dot_product_attention(x[0], x[1], x[2], x[3], 0.0, 0, 0.0);
}
static tgc_tensor *c_sdpa_drop(tgc_tensor *const *x)
{
    return tgc_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.25, 0, 0.0);
}

/* positional case entries leave fd_h / fd_tol (and input ranges) at 0: the defaults */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const gc_case gc_cases[] = {
    /* binary, with broadcasting (leading and size-1 dims) */
    {"add", c_add, 2, {F(3, 1, 5), F(4, 5)}, GC_HALF},
    {"sub", c_sub, 2, {F(4, 1), F(3)}, GC_HALF},
    {"mul", c_mul, 2, {F(2, 3, 4), F(1, 4)}, GC_HALF},
    {"mul_same_input", c_add_self, 1, {F(7)}, GC_HALF},
    {"mul_noncontig", c_mul_t, 2, {F(5, 3), F(3, 5)}, GC_HALF},
    {"mul_scalar_tensor", c_mul, 2, {F(3, 2), F0}, GC_HALF},
    {"div", c_div, 2, {F(3, 4), FR(0.5, 2.0, 3, 1)}, GC_HALF},
    {"pow", c_pow, 2, {FR(0.5, 2.0, 2, 3), F(3)}, GC_HALF},
    {"maximum", c_maximum, 2, {F(3, 4), F(4)}, GC_HALF},
    {"minimum", c_minimum, 2, {F(1, 4), F(3, 1)}, GC_HALF},
    {"where", c_where, 3, {BOOLS(3, 4), F(3, 4), F(4)}, GC_HALF},
    /* scalar forms */
    {"add_scalar", c_add_s, 1, {F(5, 3)}, GC_HALF},
    {"sub_scalar", c_sub_s, 1, {F(4)}, GC_HALF},
    {"mul_scalar", c_mul_s, 1, {F(2, 3)}, GC_HALF},
    {"div_scalar", c_div_s, 1, {F(3, 1)}, GC_HALF},
    {"pow_scalar", c_pow_s, 1, {FR(0.2, 2.0, 6)}, GC_HALF},
    {"pow_scalar_0", c_pow_s0, 1, {F(6)}, GC_HALF},
    {"clamp", c_clamp, 1, {F(4, 5)}, GC_HALF},
    /* unary */
    {"neg", c_neg, 1, {F(5)}, GC_HALF},
    {"abs", c_abs, 1, {F(3, 3)}, GC_HALF},
    {"exp", c_exp, 1, {F(3, 4)}, GC_HALF},
    {"exp_noncontig", c_exp_t, 1, {F(4, 3)}, GC_HALF},
    {"log", c_log, 1, {FR(0.2, 3.0, 7)}, GC_HALF},
    {"sqrt", c_sqrt, 1, {FR(0.2, 3.0, 2, 3)}, GC_HALF},
    {"rsqrt", c_rsqrt, 1, {FR(0.2, 3.0, 5)}, GC_HALF},
    {"tanh", c_tanh, 1, {F(2, 5)}, GC_HALF},
    {"sigmoid", c_sigmoid, 1, {F(5, 2)}, GC_HALF},
    {"relu", c_relu, 1, {F(3, 5)}, GC_HALF},
    {"gelu", c_gelu, 1, {FR(-3, 3, 9)}, GC_HALF},
    {"gelu_tanh", c_gelu_tanh, 1, {FR(-3, 3, 9)}, GC_HALF},
    {"silu", c_silu, 1, {FR(-3, 3, 9)}, GC_HALF},
    {"erf", c_erf, 1, {F(2, 4)}, GC_HALF},
    {"cast", c_cast, 1, {F(4, 3)}, GC_HALF, 1e-3, 1e-4},
    /* reductions */
    {"sum_dims", c_sum02, 1, {F(3, 4, 5)}, GC_HALF},
    {"sum_all", c_sum_all, 1, {F(2, 3)}, GC_HALF},
    {"mean_keepdim", c_mean1k, 1, {F(3, 4, 2)}, GC_HALF},
    {"mean_all", c_mean_all, 1, {F(5, 1, 3)}, GC_HALF},
    {"max_dim", c_max1, 1, {F(3, 5, 2)}, GC_HALF},
    {"max_all_keepdim", c_max_all, 1, {F(4, 3)}, GC_HALF},
    {"var_dims", c_var02, 1, {F(3, 4, 5)}, GC_HALF | GC_LOOSE},
    {"var_all", c_var_all, 1, {F(2, 7)}, GC_HALF | GC_LOOSE},
    {"softmax", c_softmax, 1, {F(3, 5, 2)}, GC_HALF},
    {"log_softmax", c_log_softmax, 1, {F(4, 6)}, GC_HALF},
    /* views and movement */
    {"reshape", c_reshape, 1, {F(3, 4, 5)}, GC_HALF},
    {"reshape_noncontig", c_reshape_t, 1, {F(3, 4)}, GC_HALF},
    {"permute", c_permute, 1, {F(2, 3, 4)}, GC_HALF},
    {"expand", c_expand, 1, {F(3, 1, 5)}, GC_HALF},
    {"squeeze", c_squeeze, 1, {F(3, 1, 4)}, GC_HALF},
    {"squeeze_all", c_squeeze_all, 1, {F(1, 3, 1)}, GC_HALF},
    {"unsqueeze", c_unsqueeze, 1, {F(3, 2)}, GC_HALF},
    {"slice", c_slice1, 1, {F(3, 6)}, GC_HALF},
    {"slice_step", c_slice_step, 1, {F(8, 2)}, GC_HALF},
    {"slice_negative", c_slice_neg, 1, {F(2, 9)}, GC_HALF},
    {"flatten", c_flatten, 1, {F(2, 3, 4)}, GC_HALF},
    {"contiguous", c_contig, 1, {F(2, 3, 4)}, GC_HALF},
    {"contiguous_view", c_contiguous_t, 1, {F(3, 2)}, GC_HALF},
    {"cat", c_cat, 3, {F(2, 3, 2), F(2, 1, 2), F(2, 4, 2)}, GC_HALF},
    {"stack", c_stack, 2, {F(3, 2), F(3, 2)}, GC_HALF},
    {"pad", c_pad, 1, {F(3, 4)}, GC_HALF},
    {"pad_crop", c_pad_crop, 1, {F(5, 6)}, GC_HALF},
    {"flip", c_flip, 1, {F(3, 4, 2)}, GC_HALF},
    /* indexing (repeated indices accumulate) */
    {"embedding", c_embedding, 2, {F(7, 3), IDX(7, 2, 5)}, GC_HALF},
    {"gather", c_gather, 2, {F(3, 5), IDX(5, 3, 7)}, GC_HALF},
    {"index_select", c_index_select, 2, {F(4, 3), IDX(4, 9)}, GC_HALF},
    /* linear algebra: numpy matmul rules, broadcast batch dims */
    {"matmul", c_matmul, 2, {F(2, 3, 4), F(4, 5)}, GC_HALF | GC_MM},
    {"matmul_1d_left", c_matmul, 2, {F(4), F(2, 4, 3)}, GC_HALF | GC_MM},
    {"matmul_1d_right", c_matmul, 2, {F(3, 4), F(4)}, GC_HALF | GC_MM},
    {"matmul_dot", c_matmul, 2, {F(5), F(5)}, GC_HALF | GC_MM},
    {"matmul_broadcast", c_matmul, 2, {F(2, 1, 3, 4), F(3, 4, 2)}, GC_HALF | GC_MM},
    {"matmul_noncontig", c_matmul_tb, 2, {F(3, 4), F(5, 4)}, GC_HALF | GC_MM},
    {"linear", c_linear, 3, {F(2, 3, 4), F(5, 4), F(5)}, GC_HALF | GC_MM},
    {"linear_1d_nobias", c_linear_nb, 2, {F(4), F(3, 4)}, GC_HALF | GC_MM},
    {"conv2d", c_conv, 3, {F(2, 3, 5, 4), F(4, 3, 3, 2), F(4)}, GC_HALF | GC_MM},
    {"conv2d_groups_dilation", c_conv_g, 2, {F(1, 4, 6, 5), F(2, 2, 2, 3)}, GC_HALF | GC_MM},
    {"max_pool2d", c_maxpool, 1, {F(2, 2, 5, 6)}, GC_HALF},
    {"avg_pool2d", c_avgpool, 1, {F(1, 3, 5, 4)}, GC_HALF},
    {"avg_pool2d_exclude", c_avgpool_ex, 1, {F(2, 1, 5, 5)}, GC_HALF},
    {"adaptive_avg_pool2d", c_adaptive, 1, {F(1, 2, 5, 7)}, GC_HALF},
    /* normalization and dropout */
    {"batch_norm_train",
     c_bn_train,
     5,
     {F(4, 3, 2, 3), F(3), F(3), BUF(-0.5, 0.5, 3), BUF(0.5, 2, 3)},
     GC_HALF | GC_LOOSE},
    {"batch_norm_train_2d", c_bn_train_plain, 1, {F(5, 4)}, GC_HALF | GC_LOOSE},
    {"batch_norm_eval",
     c_bn_eval,
     5,
     {F(3, 2, 4), F(2), F(2), FC(-0.5, 0.5, 2), FC(0.5, 2, 2)},
     GC_HALF | GC_LOOSE},
    {"layer_norm", c_ln, 3, {F(2, 3, 4), F(3, 4), F(3, 4)}, GC_HALF | GC_LOOSE},
    {"layer_norm_plain", c_ln_plain, 1, {F(3, 5)}, GC_HALF | GC_LOOSE},
    {"rms_norm", c_rms, 2, {F(2, 3, 4), F(3, 4)}, GC_HALF | GC_LOOSE},
    {"rms_norm_plain", c_rms_plain, 1, {F(3, 5)}, GC_HALF | GC_LOOSE},
    {"group_norm", c_gn, 3, {F(2, 4, 3, 2), F(4), F(4)}, GC_HALF | GC_LOOSE},
    {"group_norm_3d", c_gn_plain, 1, {F(2, 6, 5)}, GC_HALF | GC_LOOSE},
    {"logsumexp", c_lse, 1, {F(3, 4, 2)}, GC_HALF},
    {"logsumexp_2dims", c_lse2, 1, {F(3, 4, 2)}, GC_HALF},
    {"sin", c_sin, 1, {FR(-4, 4, 3, 5)}, GC_HALF},
    {"cos", c_cos, 1, {FR(-4, 4, 3, 5)}, GC_HALF},
    {"dropout", c_dropout, 1, {F(4, 7)}, GC_HALF},
    {"dropout_eval", c_dropout_eval, 1, {F(3, 2)}, GC_HALF},
    /* losses: ignore_index, label smoothing, reductions, spatial and unbatched */
    {"cross_entropy_mean", c_ce_mean, 2, {F(5, 4), IDX(4, 5)}, GC_HALF},
    {"cross_entropy_none_smooth", c_ce_none_ls, 2, {F(2, 3, 4), IDX(3, 2, 4)}, GC_HALF},
    {"cross_entropy_sum_smooth_ignore", c_ce_sum_ls_ignore, 2, {F(6, 3), IDX(3, 6)}, GC_HALF},
    {"cross_entropy_unbatched",
     c_ce_mean_ls_ignore,
     2,
     {F(5), {.kind = GC_IDX, .nd = 0, .lo = 2, .hi = 3}},
     GC_HALF},
    {"nll_loss_mean_ignore", c_nll_mean, 2, {F(6, 4), IDX(4, 6)}, GC_HALF},
    {"nll_loss_none", c_nll_none, 2, {F(3, 4, 2), IDX(4, 3, 2)}, GC_HALF},
    /* attention: broadcast batch, causal, bool and float masks, dropout */
    {"sdpa", c_sdpa, 3, {F(2, 3, 4), F(2, 5, 4), F(1, 5, 3)}, GC_HALF | GC_MM},
    {"sdpa_causal", c_sdpa_causal, 3, {F(2, 4, 3), F(2, 4, 3), F(2, 4, 2)}, GC_HALF | GC_MM},
    {"sdpa_bool_mask",
     c_sdpa_mask,
     4,
     {F(2, 3, 4), F(2, 5, 4), F(2, 5, 2), BOOLS(3, 5)},
     GC_HALF | GC_MM},
    {"sdpa_float_mask", c_sdpa_mask, 4, {F(3, 4), F(5, 4), F(5, 3), F(1, 5)}, GC_HALF | GC_MM},
    {"sdpa_causal_rectangular",
     c_sdpa_causal_rect,
     3,
     {F(1, 3, 4), F(2, 5, 4), F(2, 5, 2)},
     GC_HALF | GC_MM},
    /* more shapes: non-contiguous cat input, a slice of one, i32 indices, size-1 reduced dims,
     * weight-only layer_norm, batch_norm eval without affine, overlapping pool windows */
    {"cat_noncontig", c_cat_t, 2, {F(3, 4), F(2, 3)}, GC_HALF},
    {"slice_to_one", c_slice_one, 1, {F(4, 3)}, GC_HALF},
    {"embedding_i32", c_embedding, 2, {F(5, 4), IDX32(5, 7)}, GC_HALF},
    {"gather_dim0_i32", c_gather0, 2, {F(4, 3), IDX32(4, 6, 3)}, GC_HALF},
    {"index_select_i32", c_index_select, 2, {F(3, 2, 2), IDX32(3, 5)}, GC_HALF},
    {"cross_entropy_i32", c_ce_mean, 2, {F(4, 5), IDX32(5, 4)}, GC_HALF},
    {"nll_loss_i32", c_nll_none, 2, {F(5, 3), IDX32(3, 5)}, GC_HALF},
    {"softmax_dim0", c_softmax0, 1, {F(4, 3)}, GC_HALF},
    {"expand_leading", c_expand_lead, 1, {F(4)}, GC_HALF},
    {"mean_size1_dims", c_mean_size1, 1, {F(3, 1, 4)}, GC_HALF},
    {"where_broadcast_cond", c_where, 3, {BOOLS(4), F(3, 4), F(3, 1)}, GC_HALF},
    {"layer_norm_weight_only", c_ln_w, 2, {F(4, 6), F(6)}, GC_HALF | GC_LOOSE},
    {"batch_norm_eval_no_affine",
     c_bn_eval_nw,
     3,
     {F(2, 3, 2, 2), FC(-0.5, 0.5, 3), FC(0.5, 2, 3)},
     GC_HALF | GC_LOOSE},
    {"max_pool2d_overlapping", c_maxpool_s1, 1, {F(1, 2, 4, 5)}, GC_HALF},
    {"linear_4d", c_linear, 3, {F(2, 1, 3, 4), F(2, 4), F(2)}, GC_HALF | GC_MM},
    {"sdpa_dropout", c_sdpa_drop, 3, {F(2, 3, 4), F(2, 5, 4), F(2, 5, 3)}, GC_HALF | GC_MM},
};
#pragma GCC diagnostic pop
#define GC_N_CASES ((int)(sizeof gc_cases / sizeof gc_cases[0]))

#undef F
#undef FR
#undef FC
#undef BUF
#undef IDX
#undef BOOLS
#undef IDX32
#undef F0

/* ---- the harness ---- */

static uint64_t gc_hash(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [0, 1) from (case, input, element). */
static double gc_u(int ci, int k, int64_t i)
{
    return (double)(gc_hash(((uint64_t)ci << 40) ^ ((uint64_t)k << 32) ^ (uint64_t)i) >> 11) *
           0x1p-53;
}

static int64_t gc_numel(const gc_in *in)
{
    int64_t n = 1;
    for (int d = 0; d < in->nd; d++)
        n *= in->shape[d];
    return n;
}

/* The values of input k of case ci (doubles; indices and bools as their numbers). */
static double *gc_values(int ci, int k)
{
    const gc_in *in = &gc_cases[ci].in[k];
    int64_t n = gc_numel(in);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double lo = in->lo, hi = in->hi;
    if (lo == 0 && hi == 0)
        lo = -1, hi = 1;
    for (int64_t i = 0; i < n; i++) {
        double u = gc_u(ci, k, i);
        switch (in->kind) {
        case GC_IDX:
        case GC_IDX32: v[i] = floor(lo + u * (hi - lo)); break;
        case GC_BOOL: v[i] = u < 0.65; break;
        default: v[i] = lo + u * (hi - lo); break;
        }
    }
    return v;
}

/* Input k of case ci made from vals, of float dtype dt, on dev (eager, current scope). */
static tgc_tensor *gc_make(int ci, int k, const double *vals, tgc_dtype dt, tgc_device dev)
{
    const gc_in *in = &gc_cases[ci].in[k];
    int64_t n = gc_numel(in);
    tgc_tensor *t = NULL;
    tgc_scope_push();
    if (in->kind == GC_IDX || in->kind == GC_IDX32) {
        int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (int64_t i = 0; i < n; i++)
            iv[i] = (int64_t)vals[i];
        t = tgc_from_data(iv, (size_t)n * sizeof *iv, in->shape, in->nd, TGC_I64, tgc_cpu());
        free(iv);
        if (t && in->kind == GC_IDX32)
            t = tgc_cast(t, TGC_I32);
    } else if (in->kind == GC_BOOL) {
        uint8_t *bv = malloc((size_t)(n ? n : 1));
        for (int64_t i = 0; i < n; i++)
            bv[i] = vals[i] != 0;
        t = tgc_from_data(bv, (size_t)n, in->shape, in->nd, TGC_BOOL, tgc_cpu());
        free(bv);
    } else {
        t = tgc_from_data(vals, (size_t)n * sizeof(double), in->shape, in->nd, TGC_F64, tgc_cpu());
        if (t && dt != TGC_F64)
            t = tgc_cast(t, dt);
    }
    if (t)
        t = tgc_to(t, dev);
    if (t)
        tgc_scope_keep(t);
    tgc_scope_pop();
    return t;
}

/* The loss weights r: a fixed f64 tensor of y's shape on y's device. */
static tgc_tensor *gc_weights(const tgc_tensor *y)
{
    int64_t s[TGC_MAX_DIMS];
    int nd = tgc_shape(y, s);
    int64_t n = tgc_numel(y);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = 2.0 * gc_u(999, 7, i) - 1.0;
    tgc_tensor *r = tgc_from_data(v, (size_t)n * sizeof(double), s, nd, TGC_F64, tgc_cpu());
    free(v);
    return r ? tgc_to(r, tgc_device_of(y)) : NULL;
}

static tgc_tensor *gc_loss(const gc_case *c, tgc_tensor *const *x, tgc_tensor *r)
{
    tgc_manual_seed(1234); /* dropout draws the same bits every time */
    tgc_tensor *y = c->fn(x);
    return tgc_sum(tgc_mul(tgc_cast(y, TGC_F64), r), NULL, 0, 0);
}

/* Every input of case ci (vals[k] its values) made for dt on dev. */
static int gc_inputs(int ci, double *const *vals, tgc_dtype dt, tgc_device dev, tgc_tensor **x)
{
    for (int k = 0; k < gc_cases[ci].n_in; k++)
        if (!(x[k] = gc_make(ci, k, vals[k], dt, dev)))
            return 0;
    return 1;
}

/* The shape of y (the op's result) for case ci: its loss weights, made once. */
static tgc_tensor *gc_case_weights(int ci, double *const *vals, tgc_device dev)
{
    tgc_tensor *x[5], *r = NULL;
    tgc_scope_push();
    tgc_no_grad_push();
    tgc_manual_seed(1234);
    tgc_tensor *y = gc_inputs(ci, vals, TGC_F64, dev, x) ? gc_cases[ci].fn(x) : NULL;
    if (y && (r = gc_weights(y)))
        tgc_scope_keep(r);
    tgc_no_grad_pop();
    tgc_scope_pop();
    return r;
}

/* Host copies of the gradients of the GC_F inputs (NULL entries for the others; a missing
 * .grad is all zeros). */
typedef struct gc_grads {
    double *g[5];
    int64_t n[5];
} gc_grads;

static void gc_grads_free(gc_grads *g)
{
    for (int k = 0; k < 5; k++)
        free(g->g[k]);
    memset(g, 0, sizeof *g);
}

static double *gc_host(const tgc_tensor *t, int64_t n)
{
    double *v = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!t)
        return v;
    tgc_scope_push();
    tgc_tensor *h = tgc_cast(tgc_to((tgc_tensor *)t, tgc_cpu()), TGC_F64);
    if (!h || tgc_numel(h) != n || tgc_copy_to_host(h, v, (size_t)n * sizeof(double)) != TGC_OK) {
        free(v);
        v = NULL;
    }
    tgc_scope_pop();
    return v;
}

/* Eager backward of case ci in dtype dt on dev. TGC_OK or the failing status. */
static tgc_status gc_eager_grads(int ci, double *const *vals, tgc_dtype dt, tgc_device dev,
                                 tgc_tensor *r, gc_grads *out)
{
    const gc_case *c = &gc_cases[ci];
    tgc_tensor *x[5];
    tgc_status st = TGC_OK;
    memset(out, 0, sizeof *out);
    tgc_scope_push();
    if (!gc_inputs(ci, vals, dt, dev, x))
        st = tgc_last_status();
    for (int k = 0; k < c->n_in && st == TGC_OK; k++)
        if (c->in[k].kind == GC_F)
            st = tgc_requires_grad(x[k], 1);
    tgc_tensor *L = st == TGC_OK ? gc_loss(c, x, r) : NULL;
    if (st == TGC_OK)
        st = L ? tgc_backward(L) : tgc_last_status();
    for (int k = 0; k < c->n_in && st == TGC_OK; k++) {
        if (c->in[k].kind != GC_F)
            continue;
        out->n[k] = gc_numel(&c->in[k]);
        if (!(out->g[k] = gc_host(tgc_grad(x[k]), out->n[k])))
            st = tgc_last_status() ? tgc_last_status() : TGC_ERR_INTERNAL;
    }
    tgc_scope_pop();
    return st;
}

/* The compiled step: parameters p<k> (GC_F), buffers b<k> (GC_BUF), the other inputs and r
 * as call inputs. */
static tgc_status gc_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)n_out;
    const gc_case *c = tgc_module_userdata(self);
    tgc_tensor *x[5];
    int j = 0;
    for (int k = 0; k < c->n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "%c%d", c->in[k].kind == GC_BUF ? 'b' : 'p', k);
        x[k] =
            c->in[k].kind == GC_F || c->in[k].kind == GC_BUF ? tgc_module_get(self, name) : in[j++];
    }
    if (j != n_in - 1)
        return TGC_ERR_INTERNAL;
    tgc_status st = tgc_zero_grad(self);
    if (st != TGC_OK)
        return st;
    tgc_tensor *L = gc_loss(c, x, in[n_in - 1]);
    if (!L)
        return tgc_last_status();
    if ((st = tgc_backward(L)) != TGC_OK)
        return st;
    out[0] = L;
    return TGC_OK;
}

/* Compiled backward of case ci with backend b; *stats_out (optional) gets the fn's stats. */
static tgc_status gc_compiled_grads(int ci, double *const *vals, tgc_dtype dt, tgc_device dev,
                                    tgc_tensor *r, tgc_backend_kind b, gc_grads *out)
{
    const gc_case *c = &gc_cases[ci];
    tgc_status st = TGC_OK;
    memset(out, 0, sizeof *out);
    tgc_module *m = tgc_module_create("gc", (void *)c);
    tgc_tensor *in[6];
    int n = 0;
    tgc_scope_push();
    for (int k = 0; k < c->n_in && st == TGC_OK; k++) {
        tgc_tensor *t = gc_make(ci, k, vals[k], dt, dev);
        char name[16];
        snprintf(name, sizeof name, "%c%d", c->in[k].kind == GC_BUF ? 'b' : 'p', k);
        if (!t)
            st = tgc_last_status();
        else if (c->in[k].kind == GC_F)
            st = tgc_module_param(m, name, t) ? tgc_requires_grad(tgc_module_get(m, name), 1)
                                              : tgc_last_status();
        else if (c->in[k].kind == GC_BUF)
            st = tgc_module_buffer(m, name, t) ? TGC_OK : tgc_last_status();
        else
            in[n++] = t;
    }
    in[n++] = r;
    tgc_fn *f = NULL;
    if (st == TGC_OK) {
        tgc_config cfg = tgc_config_default();
        cfg.backend = b;
        cfg.fullgraph = 1;
        f = tgc_compile(gc_step, c->name, &cfg);
        tgc_tensor *o[1] = {NULL};
        st = f ? tgc_call(f, m, in, n, o, 1) : tgc_last_status();
    }
    for (int k = 0; k < c->n_in && st == TGC_OK; k++) {
        if (c->in[k].kind != GC_F)
            continue;
        char name[16];
        snprintf(name, sizeof name, "p%d", k);
        out->n[k] = gc_numel(&c->in[k]);
        if (!(out->g[k] = gc_host(tgc_grad(tgc_module_get(m, name)), out->n[k])))
            st = tgc_last_status() ? tgc_last_status() : TGC_ERR_INTERNAL;
    }
    tgc_fn_free(f);
    tgc_scope_pop();
    tgc_module_free(m);
    return st;
}

/* The normwise tolerance of a gradient in dtype dt, against the reference's largest
 * magnitude: |got - want| <= tol * max(1, max |want|). */
static double gc_tol(const gc_case *c, tgc_dtype dt, int gpu)
{
    double t;
    switch (dt) {
    case TGC_F64: t = 1e-9; break;
    case TGC_F16: t = 1e-2; break;
    case TGC_BF16: t = 6e-2; break;
    default: t = gpu && (c->flags & GC_MM) ? 4e-3 : 1e-4; break;
    }
    return c->flags & GC_LOOSE ? 4 * t : t;
}

/* Compares two sets of gradients; prints the first mismatch of each input. Returns the
 * number of inputs out of tolerance. */
static int gc_compare(const gc_case *c, const char *what, const gc_grads *got, const gc_grads *want,
                      double tol)
{
    int bad = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].kind != GC_F)
            continue;
        double scale = 1;
        for (int64_t i = 0; i < want->n[k]; i++)
            scale = fmax(scale, fabs(want->g[k][i]));
        double worst = 0;
        for (int64_t i = 0; i < want->n[k]; i++)
            worst = fmax(worst, fabs(got->g[k][i] - want->g[k][i]) / (tol * scale));
        if (getenv("TGC_GRADCHECK_MARGINS") && worst > 0.1)
            printf("  %s: %s: input %d uses %.0f%% of its tolerance\n", c->name, what, k,
                   100 * worst);
        for (int64_t i = 0; i < want->n[k]; i++) {
            double d = fabs(got->g[k][i] - want->g[k][i]);
            if (!(d <= tol * scale)) {
                printf("  %s: %s: input %d element %lld: got %.9g, want %.9g (tol %.3g)\n", c->name,
                       what, k, (long long)i, got->g[k][i], want->g[k][i], tol * scale);
                bad++;
                break;
            }
        }
    }
    return bad;
}

#endif
