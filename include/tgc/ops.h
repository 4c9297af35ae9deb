/* libtgc — forward tensor ops.
 *
 * Every op returns a new tensor in the calling thread's innermost scope, or NULL on error
 * with tgc_last_error() naming the op and the offending shapes. An op given a NULL input
 * returns NULL and keeps the first error, so a model function may check once at its end.
 * Outside tgc_call the ops run eagerly; inside a trace they record graph nodes.
 *
 * Dims: negative dims count from the end (-1 is the last).
 *
 * Broadcasting (elementwise ops): shapes are aligned at the trailing dim; a dim of size 1
 * stretches to the other's size; otherwise sizes must be equal (TGC_ERR_SHAPE).
 *
 * Dtype promotion (binary elementwise ops, where, cat, stack):
 *   - same dtypes: that dtype;
 *   - bool with anything: the other dtype;
 *   - i32 with i64: i64;
 *   - an integer with a float: the float dtype;
 *   - f16 with bf16: f32; a float with a wider float: the wider (f16/bf16 < f32 < f64).
 *   Scalar forms (tgc_add_scalar ...) keep the tensor's dtype, except that an integer or bool
 *   tensor with a non-integral scalar becomes f32.
 * Unary float math (exp, log, sqrt, rsqrt, tanh, sigmoid, gelu, silu, erf, sin, cos, softmax,
 * mean, var, logsumexp ...) on integer or bool inputs computes in f32 and returns f32; neg of a
 * bool tensor is TGC_ERR_DTYPE (as PyTorch).
 * div always returns a float dtype (true division). Comparisons return bool. argmax returns
 * i64. sum of bool/i32 returns i64. Indices (embedding, gather, index_select, targets)
 * must be i32 or i64.
 * matmul, linear, conv2d, pools, batch_norm, layer_norm, rms_norm, group_norm and attention
 * need float operands
 * of one dtype (TGC_ERR_DTYPE otherwise); cast first for mixed precision.
 * Half types (f16, bf16) are stored in 16 bits and computed at f32 precision or better.
 * Precision: the interp oracle computes every op in double and rounds once. The LLVM backend
 * (compiled calls, and eager ops on its cached kernels) computes f32 in f32 with its own
 * vector exp/log/tanh/erf, keeps fused intermediates unrounded, sums in double and reorders
 * sums for SIMD: results agree with interp within torch.testing's default tolerances
 * (f32: 1e-5 absolute + 1.3e-6 relative; f16: 1e-5 + 1e-3; bf16: 1e-5 + 1.6e-2; f64: 1e-7),
 * except where the f32 rounding of the inputs is amplified: layer_norm of a row whose mean
 * is large against its spread (x - mean cancels) agrees within that tolerance plus
 * 2 * 2^-24 * max|x_row| / sqrt(var_row + eps) * |weight| (measured: never above the
 * tolerance plus 1.02 * 2^-24 * ..., for mean/std from 1 to 1e7 and rows of 16 to 4096);
 * integer and bool results, and dropout masks, are exact. TGC_BACKEND=interp runs everything
 * on the oracle.
 * Float to integer conversion saturates (NaN becomes 0); integer to narrower integer wraps. */
#ifndef TGC_OPS_H
#define TGC_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, binary (broadcasting) ---- */
TGC_API tgc_tensor *tgc_add(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_sub(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_mul(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_div(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_pow(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_maximum(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_minimum(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_eq(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_ne(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_lt(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_le(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_gt(tgc_tensor *a, tgc_tensor *b);
TGC_API tgc_tensor *tgc_ge(tgc_tensor *a, tgc_tensor *b);
/* cond ? a : b, all three broadcast together; cond must be bool. */
TGC_API tgc_tensor *tgc_where(tgc_tensor *cond, tgc_tensor *a, tgc_tensor *b);

/* ---- scalar forms: t op s ---- */
TGC_API tgc_tensor *tgc_add_scalar(tgc_tensor *t, double s);
TGC_API tgc_tensor *tgc_sub_scalar(tgc_tensor *t, double s);
TGC_API tgc_tensor *tgc_mul_scalar(tgc_tensor *t, double s);
TGC_API tgc_tensor *tgc_div_scalar(tgc_tensor *t, double s);
TGC_API tgc_tensor *tgc_pow_scalar(tgc_tensor *t, double s);
TGC_API tgc_tensor *tgc_clamp(tgc_tensor *t, double lo, double hi);

/* ---- elementwise, unary ---- */
TGC_API tgc_tensor *tgc_neg(tgc_tensor *t);
TGC_API tgc_tensor *tgc_abs(tgc_tensor *t);
TGC_API tgc_tensor *tgc_exp(tgc_tensor *t);
TGC_API tgc_tensor *tgc_log(tgc_tensor *t);
TGC_API tgc_tensor *tgc_sqrt(tgc_tensor *t);
TGC_API tgc_tensor *tgc_rsqrt(tgc_tensor *t);
TGC_API tgc_tensor *tgc_tanh(tgc_tensor *t);
TGC_API tgc_tensor *tgc_sigmoid(tgc_tensor *t);
TGC_API tgc_tensor *tgc_relu(tgc_tensor *t);
/* gelu: exact (erf) form; gelu_tanh: the tanh approximation. */
TGC_API tgc_tensor *tgc_gelu(tgc_tensor *t);
TGC_API tgc_tensor *tgc_gelu_tanh(tgc_tensor *t);
TGC_API tgc_tensor *tgc_silu(tgc_tensor *t);
TGC_API tgc_tensor *tgc_erf(tgc_tensor *t);
/* torch.sin / torch.cos: elementwise, radians; integer and bool inputs give f32 (PyTorch's
 * default float dtype), NaN and +-inf give NaN. */
TGC_API tgc_tensor *tgc_sin(tgc_tensor *t);
TGC_API tgc_tensor *tgc_cos(tgc_tensor *t);
TGC_API tgc_tensor *tgc_cast(tgc_tensor *t, tgc_dtype dt);

/* ---- reductions (dims: list of n dims; n = 0 reduces over all dims) ---- */
TGC_API tgc_tensor *tgc_sum(tgc_tensor *t, const int *dims, int n, int keepdim);
TGC_API tgc_tensor *tgc_mean(tgc_tensor *t, const int *dims, int n, int keepdim);
TGC_API tgc_tensor *tgc_max(tgc_tensor *t, const int *dims, int n, int keepdim);
/* Index of the first maximum along one dim (i64). */
TGC_API tgc_tensor *tgc_argmax(tgc_tensor *t, int dim, int keepdim);
/* correction: 0 = population variance, 1 = unbiased (Bessel). */
TGC_API tgc_tensor *tgc_var(tgc_tensor *t, const int *dims, int n, int correction, int keepdim);
TGC_API tgc_tensor *tgc_softmax(tgc_tensor *t, int dim);
TGC_API tgc_tensor *tgc_log_softmax(tgc_tensor *t, int dim);
/* torch.logsumexp(input, dim, keepdim): log(sum(exp(t))) over dims (n = 0: every dim),
 * computed stably as m + log(sum(exp(t - m))) with m the max of the reduced elements, where
 * an infinite m is replaced by 0 (torch's rule): a reduced set holding +inf gives +inf, one
 * of only -inf gives -inf (not NaN), an empty one gives -inf, NaN propagates. Integer and
 * bool inputs give f32. */
TGC_API tgc_tensor *tgc_logsumexp(tgc_tensor *t, const int *dims, int n, int keepdim);

/* ---- views and movement ---- */
/* ONNX rules: 0 copies the input's dim at that position, one -1 is inferred. A view when
 * the strides allow it, else a copy. */
TGC_API tgc_tensor *tgc_reshape(tgc_tensor *t, const int64_t *shape, int ndim);
/* tgc_reshape with symint sizes (tensor.h; plain ones keep the 0/-1 rules): while tracing,
 * symbolic sizes stay symbolic, so nothing is specialized. */
TGC_API tgc_tensor *tgc_reshape_sym(tgc_tensor *t, const tgc_symint *shape, int ndim);
/* t reshaped / expanded to other's shape (other's values are not read); symbolic while
 * tracing. */
TGC_API tgc_tensor *tgc_reshape_as(tgc_tensor *t, tgc_tensor *other);
TGC_API tgc_tensor *tgc_permute(tgc_tensor *t, const int *perm, int ndim);
TGC_API tgc_tensor *tgc_transpose(tgc_tensor *t, int d0, int d1);
/* Size -1 keeps a dim; new leading dims may be added; size-1 dims stretch (stride 0). */
TGC_API tgc_tensor *tgc_expand(tgc_tensor *t, const int64_t *shape, int ndim);
/* tgc_expand with symint sizes (a plain -1 keeps a dim). */
TGC_API tgc_tensor *tgc_expand_sym(tgc_tensor *t, const tgc_symint *shape, int ndim);
TGC_API tgc_tensor *tgc_expand_as(tgc_tensor *t, tgc_tensor *other);
/* Removes dim if it has size 1 (dim = TGC_ALL_DIMS removes every size-1 dim). */
#define TGC_ALL_DIMS (-1000)
TGC_API tgc_tensor *tgc_squeeze(tgc_tensor *t, int dim);
TGC_API tgc_tensor *tgc_unsqueeze(tgc_tensor *t, int dim);
/* Elements start, start+step, ... below end along dim (python slice rules, step > 0,
 * start/end clamped, negative start/end count from the end). */
TGC_API tgc_tensor *tgc_slice(tgc_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Merges dims start..end (inclusive; negative count from the end) into one:
 * tgc_flatten(t, 1, -1) keeps the batch dim, symbolic while tracing. */
TGC_API tgc_tensor *tgc_flatten(tgc_tensor *t, int start_dim, int end_dim);
/* A row-major copy, or t's own view when already contiguous. */
TGC_API tgc_tensor *tgc_contiguous(tgc_tensor *t);
TGC_API tgc_tensor *tgc_cat(tgc_tensor *const *ts, int n, int dim);
TGC_API tgc_tensor *tgc_stack(tgc_tensor *const *ts, int n, int dim);
/* pads[2*i], pads[2*i+1] = before/after counts for the i-th LAST dim (PyTorch F.pad order),
 * n_pairs <= ndim; constant value. */
TGC_API tgc_tensor *tgc_pad(tgc_tensor *t, const int64_t *pads, int n_pairs, double value);
/* A copy with the order of elements reversed along each of dims[0..n) (torch.flip; negative
 * dims count from the end, each at most once; n = 0: a plain copy). */
TGC_API tgc_tensor *tgc_flip(tgc_tensor *t, const int *dims, int n);

/* ---- indexing ---- */
/* weight [V, D], idx any shape of i32/i64 -> idx.shape + [D]. */
TGC_API tgc_tensor *tgc_embedding(tgc_tensor *weight, tgc_tensor *idx);
/* out[i][j] = t[idx[i][j]][j] (dim 0), idx has t's rank. */
TGC_API tgc_tensor *tgc_gather(tgc_tensor *t, int dim, tgc_tensor *idx);
/* idx 1-D: picks those positions of dim. */
TGC_API tgc_tensor *tgc_index_select(tgc_tensor *t, int dim, tgc_tensor *idx);

/* ---- linear algebra ---- */
/* numpy matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast. */
TGC_API tgc_tensor *tgc_matmul(tgc_tensor *a, tgc_tensor *b);
/* x [..., in] @ w[out, in]^T + bias[out] (bias may be NULL). */
TGC_API tgc_tensor *tgc_linear(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias);

/* ---- neural network ---- */
/* Options of tgc_conv2d, meant for designated initializers:
 *   tgc_conv2d(x, w, b, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}})
 * Pairs are {height, width}. A zero field takes its default: stride 1, padding 0,
 * dilation 1, groups 1; NULL opts means all defaults. Negative values are errors
 * (TGC_ERR_INVALID_ARG). The struct is only read during the call. */
typedef struct tgc_conv2d_opts {
    int stride[2];
    int padding[2];
    int dilation[2];
    int groups;
} tgc_conv2d_opts;
/* x [N, C, H, W], w [O, C/groups, kh, kw], bias [O] or NULL. The size of opts reaches the
 * library (config.h: structs that grow). */
TGC_API tgc_tensor *tgc_conv2d_sized(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias,
                                     const tgc_conv2d_opts *opts, size_t opts_size);
static inline tgc_tensor *tgc_conv2d(tgc_tensor *x, tgc_tensor *w, tgc_tensor *bias,
                                     const tgc_conv2d_opts *opts)
{
    return tgc_conv2d_sized(x, w, bias, opts, sizeof *opts);
}
/* Options of the max and avg pools, meant for designated initializers:
 *   tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})
 * Pairs are {height, width}. kernel is required (>= 1; NULL opts is TGC_ERR_INVALID_ARG).
 * A zero stride means stride = kernel, zero padding means none (at most half the kernel;
 * max pads with -inf), dilation is 1. exclude_padding (avg_pool2d only) divides each window
 * by the taps inside x (PyTorch's count_include_pad=False); 0, the default, divides by the
 * window clipped to the padded input, like PyTorch's default. Negative values are errors
 * (TGC_ERR_INVALID_ARG). */
typedef struct tgc_pool2d_opts {
    int kernel[2];
    int stride[2];
    int padding[2];
    int exclude_padding;
} tgc_pool2d_opts;
TGC_API tgc_tensor *tgc_max_pool2d_sized(tgc_tensor *x, const tgc_pool2d_opts *opts,
                                         size_t opts_size);
TGC_API tgc_tensor *tgc_avg_pool2d_sized(tgc_tensor *x, const tgc_pool2d_opts *opts,
                                         size_t opts_size);
static inline tgc_tensor *tgc_max_pool2d(tgc_tensor *x, const tgc_pool2d_opts *opts)
{
    return tgc_max_pool2d_sized(x, opts, sizeof *opts);
}
static inline tgc_tensor *tgc_avg_pool2d(tgc_tensor *x, const tgc_pool2d_opts *opts)
{
    return tgc_avg_pool2d_sized(x, opts, sizeof *opts);
}
TGC_API tgc_tensor *tgc_adaptive_avg_pool2d(tgc_tensor *x, int out_h, int out_w);
/* x [N, C, ...]. training: normalizes with batch statistics and updates running_mean and
 * running_var in place (momentum, unbiased variance), and adds 1 to the buffer
 * num_batches_tracked (i64, one element) of running_mean's module when it has one, as
 * PyTorch does (tgc_module_add_batch_norm makes that state); else uses the running stats.
 * weight, bias may be NULL; running stats may be NULL only in training. */
TGC_API tgc_tensor *tgc_batch_norm(tgc_tensor *x, tgc_tensor *running_mean, tgc_tensor *running_var,
                                   tgc_tensor *weight, tgc_tensor *bias, int training,
                                   double momentum, double eps);
/* Normalizes over the last n_norm dims; weight/bias (that shape) may be NULL. */
TGC_API tgc_tensor *tgc_layer_norm(tgc_tensor *x, int n_norm, tgc_tensor *weight, tgc_tensor *bias,
                                   double eps);
/* torch.nn.functional.rms_norm(input, normalized_shape, weight=None, eps=None) with
 * normalized_shape the last n_norm dims of x: x * rsqrt(mean(x^2 over those dims) + eps)
 * [* weight, of that shape]. eps < 0 (or NaN) is eps=None: torch.finfo(x's dtype).eps
 * (f32 1.1920929e-07, f64 2.220446049250313e-16, f16 9.765625e-04, bf16 7.8125e-03).
 * Computed in f32 for f16/bf16 (f64 for f64) and rounded once. */
TGC_API tgc_tensor *tgc_rms_norm(tgc_tensor *x, int n_norm, tgc_tensor *weight, double eps);
/* torch.nn.functional.group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
 * x [N, C, *] (rank >= 2, C divisible by num_groups): each sample's C / num_groups channels
 * of a group and all their spatial elements are normalized together with the biased
 * variance, (x - mean) / sqrt(var + eps), then * weight + bias per channel ([C] each, may be
 * NULL). Computed in f32 for f16/bf16 (f64 for f64) and rounded once. */
TGC_API tgc_tensor *tgc_group_norm(tgc_tensor *x, int num_groups, tgc_tensor *weight,
                                   tgc_tensor *bias, double eps);
/* Zeroes each element with probability p and scales the rest by 1/(1-p), with bits from the
 * process Philox4x32-10 stream: compiled code draws exactly the bits eager would. Identity
 * when !training or p == 0. */
TGC_API tgc_tensor *tgc_dropout(tgc_tensor *x, double p, int training);
/* logits [N, C] (or [N, C, d...]), target i64/i32 class indices [N] (or [N, d...]);
 * reduction: 0 none, 1 mean, 2 sum; ignore_index as in PyTorch; label_smoothing in [0,1]. */
#define TGC_REDUCE_NONE 0
#define TGC_REDUCE_MEAN 1
#define TGC_REDUCE_SUM  2
TGC_API tgc_tensor *tgc_cross_entropy(tgc_tensor *logits, tgc_tensor *target, int reduction,
                                      int64_t ignore_index, double label_smoothing);
/* logp [N, C] (or [N, C, d...], or unbatched [C]) log-probabilities. */
TGC_API tgc_tensor *tgc_nll_loss(tgc_tensor *logp, tgc_tensor *target, int reduction,
                                 int64_t ignore_index);
/* q [..., L, E], k [..., S, E], v [..., S, Ev]; mask NULL, bool (true = attend) or float
 * (added to scores), broadcast to [..., L, S]; causal masks j > i; scale 0 means
 * 1/sqrt(E); dropout_p applied to the attention weights (Philox stream, as tgc_dropout:
 * one counter per element of the row-major [batch..., L, S] weights). A row whose every
 * position is masked out gives zeros (as PyTorch's math path does), not NaN. */
TGC_API tgc_tensor *tgc_scaled_dot_product_attention(tgc_tensor *q, tgc_tensor *k, tgc_tensor *v,
                                                     tgc_tensor *mask, double dropout_p, int causal,
                                                     double scale);

#ifdef __cplusplus
}
#endif
#endif
