/* interp kernels: pools, batch_norm, layer_norm, rms_norm, group_norm, dropout, losses,
 * attention.
 *
 * Every kernel reads its (possibly strided) inputs through row-major walks, computes in
 * double and writes the contiguous, preallocated `out` once per element. Half types are
 * widened on load and rounded on store by the shared element helpers. Random ops draw from
 * the process Philox stream exactly as runtime/philox.h describes, so compiled code can
 * reproduce their bits. */
#include "backend/interp/interp.h"
#include "runtime/philox.h"
#include "support/error.h"
#include "tgc/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- element access ---- */

static inline double ld(const void *base, tgc_dtype dt, int64_t off)
{
    switch (dt) {
    case TGC_F32: return ((const float *)base)[off];
    case TGC_F64: return ((const double *)base)[off];
    default: return tgc_load(base, dt, off);
    }
}

static inline void st(void *base, tgc_dtype dt, int64_t off, double v)
{
    switch (dt) {
    case TGC_F32: ((float *)base)[off] = (float)v; break;
    case TGC_F64: ((double *)base)[off] = v; break;
    default: tgc_store(base, dt, off, v); break;
    }
}

/* ---- row-major walks over strided tensors ---- */

/* Iterates a tensor's elements in row-major order as runs along its innermost (collapsed)
 * dim: size-1 dims are dropped and dims that are laid out back to back are merged, so a
 * contiguous tensor is one run. */
typedef struct walk {
    int nd;
    int64_t shape[TGC_MAX_DIMS], stride[TGC_MAX_DIMS], idx[TGC_MAX_DIMS];
    int64_t off;
} walk;

/* Positions w at row-major element `start` of t (t must have at least one element). */
static void walk_init(walk *w, const tgc_tensor *t, int64_t start)
{
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1)
            continue;
        if (nd > 0 && w->stride[nd - 1] == t->strides[d] * t->shape[d]) {
            w->shape[nd - 1] *= t->shape[d];
            w->stride[nd - 1] = t->strides[d];
        } else {
            w->shape[nd] = t->shape[d];
            w->stride[nd] = t->strides[d];
            nd++;
        }
    }
    if (nd == 0) {
        w->shape[0] = 1;
        w->stride[0] = 0;
        nd = 1;
    }
    w->nd = nd;
    w->off = t->offset;
    for (int d = nd - 1; d >= 0; d--) {
        w->idx[d] = start % w->shape[d];
        start /= w->shape[d];
        w->off += w->idx[d] * w->stride[d];
    }
}

/* The next run of at most `max` elements: its first offset and its stride; returns its
 * length and advances past it. */
static int64_t walk_run(walk *w, int64_t max, int64_t *off, int64_t *stride)
{
    int d = w->nd - 1;
    int64_t run = w->shape[d] - w->idx[d];
    if (run > max)
        run = max;
    *off = w->off;
    *stride = w->stride[d];
    w->idx[d] += run;
    w->off += run * w->stride[d];
    if (w->idx[d] == w->shape[d]) {
        w->off -= w->shape[d] * w->stride[d];
        w->idx[d] = 0;
        for (d--; d >= 0; d--) {
            w->idx[d]++;
            w->off += w->stride[d];
            if (w->idx[d] < w->shape[d])
                break;
            w->off -= w->shape[d] * w->stride[d];
            w->idx[d] = 0;
        }
    }
    return run;
}

/* Row-major elements [start, start + n) of t, as doubles. */
static void gather(const tgc_tensor *t, int64_t start, int64_t n, double *dst)
{
    if (n <= 0)
        return;
    const void *base = tgc_host_data(t);
    walk w;
    walk_init(&w, t, start);
    for (int64_t k = 0; k < n;) {
        int64_t off, s;
        int64_t r = walk_run(&w, n - k, &off, &s);
        double *o = dst + k;
        if (t->dtype == TGC_F32) {
            const float *p = (const float *)base + off;
            if (s == 1)
                for (int64_t j = 0; j < r; j++)
                    o[j] = p[j];
            else
                for (int64_t j = 0; j < r; j++)
                    o[j] = p[j * s];
        } else {
            for (int64_t j = 0; j < r; j++)
                o[j] = ld(base, t->dtype, off + j * s);
        }
        k += r;
    }
}

/* Row-major elements [start, start + n) of an integer tensor, exactly. */
static void gather_i64(const tgc_tensor *t, int64_t start, int64_t n, int64_t *dst)
{
    if (n <= 0)
        return;
    const void *base = tgc_host_data(t);
    walk w;
    walk_init(&w, t, start);
    for (int64_t k = 0; k < n;) {
        int64_t off, s;
        int64_t r = walk_run(&w, n - k, &off, &s);
        for (int64_t j = 0; j < r; j++) {
            int64_t o = off + j * s;
            switch (t->dtype) {
            case TGC_I64: dst[k + j] = ((const int64_t *)base)[o]; break;
            case TGC_I32: dst[k + j] = ((const int32_t *)base)[o]; break;
            default: dst[k + j] = (int64_t)tgc_load(base, t->dtype, o); break;
            }
        }
        k += r;
    }
}

/* Writes n values at row-major position start of the contiguous out. */
static void scatter_out(tgc_tensor *out, int64_t start, int64_t n, const double *src)
{
    if (n <= 0)
        return;
    void *base = tgc_host_data(out);
    int64_t o = out->offset + start;
    if (out->dtype == TGC_F32) {
        float *p = (float *)base + o;
        for (int64_t j = 0; j < n; j++)
            p[j] = (float)src[j];
    } else {
        for (int64_t j = 0; j < n; j++)
            st(base, out->dtype, o + j, src[j]);
    }
}

static tgc_status oom(const char *op)
{
    return tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory for scratch space", op);
}

static tgc_status bad_inputs(tgc_op op, int n_in)
{
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_nn: %s given %d inputs, attrs disagree",
                         tgc_op_name(op), n_in);
}

static int64_t prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= shape[d];
    return p;
}

/* ---- pools: x [..., H, W] -> out [..., OH, OW]; every leading position is one plane ---- */

/* One output index's window along one axis: input range [lo, hi) and its share of the
 * averaging divisor. */
typedef struct window {
    int64_t lo, hi, span;
} window;

/* Windows along an axis of n inputs and m outputs. k == 0 selects adaptive pooling
 * (PyTorch: start = floor(i * n / m), end = ceil((i + 1) * n / m)); otherwise window k,
 * stride s, padding p. With count_include_pad (exclude_pad == 0) the span is the window
 * clipped to the padded input; with exclude_pad it is the window clipped to the input. */
static void pool_windows(window *win, int64_t m, int64_t n, int64_t k, int64_t s, int64_t p,
                         int exclude_pad)
{
    for (int64_t i = 0; i < m; i++) {
        int64_t lo, hi, span;
        if (k == 0) {
            lo = i * n / m;
            hi = ((i + 1) * n + m - 1) / m;
            span = hi - lo;
        } else {
            lo = i * s - p;
            hi = lo + k;
            span = (hi < n + p ? hi : n + p) - lo;
        }
        win[i].lo = lo > 0 ? lo : 0;
        win[i].hi = hi < n ? hi : n;
        win[i].span = exclude_pad ? win[i].hi - win[i].lo : span;
    }
}

static tgc_status pool2d(tgc_op op, const tgc_tensor *x, const tgc_attrs *a, tgc_tensor *out)
{
    const int r = x->ndim;
    const int64_t H = x->shape[r - 2], W = x->shape[r - 1];
    const int64_t OH = out->shape[r - 2], OW = out->shape[r - 1];
    const int64_t planes = prod(x->shape, 0, r - 2);
    double *plane = malloc((size_t)(H * W + OW) * sizeof *plane);
    window *win = malloc((size_t)(OH + OW) * sizeof *win);
    if (!plane || !win) {
        free(plane);
        free(win);
        return oom(tgc_op_name(op));
    }
    double *row = plane + H * W;
    window *wh = win, *ww = win + OH;
    if (op == TGC_OP_ADAPTIVE_AVG_POOL2D) {
        pool_windows(wh, OH, H, 0, 1, 0, 0);
        pool_windows(ww, OW, W, 0, 1, 0, 0);
    } else {
        pool_windows(wh, OH, H, a->pool.kh, a->pool.sh, a->pool.ph, a->pool.exclude_padding != 0);
        pool_windows(ww, OW, W, a->pool.kw, a->pool.sw, a->pool.pw, a->pool.exclude_padding != 0);
    }

    for (int64_t p = 0; p < planes; p++) {
        gather(x, p * H * W, H * W, plane);
        for (int64_t oh = 0; oh < OH; oh++) {
            const window h = wh[oh];
            if (op == TGC_OP_MAX_POOL2D) {
                for (int64_t ow = 0; ow < OW; ow++) {
                    const window w = ww[ow];
                    double acc = -INFINITY;
                    for (int64_t i = h.lo; i < h.hi; i++) {
                        const double *src = plane + i * W;
                        for (int64_t j = w.lo; j < w.hi; j++) {
                            /* NaN wins and stays, as in PyTorch; written as a select */
                            double v = src[j];
                            acc = ((v > acc) | (v != v)) ? v : acc;
                        }
                    }
                    row[ow] = acc;
                }
            } else {
                for (int64_t ow = 0; ow < OW; ow++) {
                    const window w = ww[ow];
                    double acc = 0;
                    for (int64_t i = h.lo; i < h.hi; i++) {
                        const double *src = plane + i * W;
                        for (int64_t j = w.lo; j < w.hi; j++)
                            acc += src[j];
                    }
                    row[ow] = acc / (double)(h.span * w.span);
                }
            }
            scatter_out(out, (p * OH + oh) * OW, OW, row);
        }
    }
    free(plane);
    free(win);
    return TGC_OK;
}

/* ---- batch_norm: x [N, C, ...] ---- */

static tgc_status batch_norm(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *x = in[0];
    const int training = a->batch_norm.training != 0;
    const int64_t bits = a->batch_norm.has;
    const double momentum = a->batch_norm.momentum, eps = a->batch_norm.eps;
    tgc_tensor *rm = NULL, *rv = NULL;
    const tgc_tensor *wt = NULL, *bs = NULL;
    int k = 1;
    if (bits & TGC_BN_HAS_STATS) {
        if (k + 2 > n_in)
            return bad_inputs(TGC_OP_BATCH_NORM, n_in);
        rm = in[k++];
        rv = in[k++];
    }
    if (bits & TGC_BN_HAS_WEIGHT) {
        if (k + 1 > n_in)
            return bad_inputs(TGC_OP_BATCH_NORM, n_in);
        wt = in[k++];
    }
    if (bits & TGC_BN_HAS_BIAS) {
        if (k + 1 > n_in)
            return bad_inputs(TGC_OP_BATCH_NORM, n_in);
        bs = in[k++];
    }
    if (k != n_in || (!training && !rm)) /* eval needs the stats: inference checks it */
        return bad_inputs(TGC_OP_BATCH_NORM, n_in);

    const int64_t N = x->shape[0], C = x->shape[1];
    const int64_t S = prod(x->shape, 2, x->ndim);
    const int64_t cnt = N * S; /* > 1 in training: shape inference checks it */

    double *buf = malloc((size_t)cnt * sizeof *buf);
    if (!buf)
        return oom("batch_norm");
    void *rm_base = rm ? tgc_host_data(rm) : NULL;
    void *rv_base = rv ? tgc_host_data(rv) : NULL;

    for (int64_t c = 0; c < C; c++) {
        for (int64_t n = 0; n < N; n++)
            gather(x, (n * C + c) * S, S, buf + n * S);
        double mean, var;
        if (training) {
            double s = 0;
            for (int64_t j = 0; j < cnt; j++)
                s += buf[j];
            mean = s / (double)cnt;
            double q = 0;
            for (int64_t j = 0; j < cnt; j++) {
                double d = buf[j] - mean;
                q += d * d;
            }
            var = q / (double)cnt;
            if (rm) {
                int64_t om = rm->offset + c * rm->strides[0];
                int64_t ov = rv->offset + c * rv->strides[0];
                double unbiased = q / (double)(cnt - 1);
                st(rm_base, rm->dtype, om,
                   (1.0 - momentum) * ld(rm_base, rm->dtype, om) + momentum * mean);
                st(rv_base, rv->dtype, ov,
                   (1.0 - momentum) * ld(rv_base, rv->dtype, ov) + momentum * unbiased);
            }
        } else {
            mean = ld(rm_base, rm->dtype, rm->offset + c * rm->strides[0]);
            var = ld(rv_base, rv->dtype, rv->offset + c * rv->strides[0]);
        }
        double scale = 1.0 / sqrt(var + eps), shift = 0;
        if (wt)
            scale *= ld(tgc_host_data(wt), wt->dtype, wt->offset + c * wt->strides[0]);
        if (bs)
            shift = ld(tgc_host_data(bs), bs->dtype, bs->offset + c * bs->strides[0]);
        for (int64_t j = 0; j < cnt; j++)
            buf[j] = (buf[j] - mean) * scale + shift;
        for (int64_t n = 0; n < N; n++)
            scatter_out(out, (n * C + c) * S, S, buf + n * S);
    }
    free(buf);
    if (training && rm) {
        tgc_storage_bump(rm->storage);
        tgc_storage_bump(rv->storage);
    }
    return TGC_OK;
}

/* ---- the norms over rows: layer_norm, rms_norm, group_norm ---- */

/* The optional weight and bias inputs the TGC_LN_HAS_* bits announce, after x; 0 when the
 * inputs do not match the bits. */
static int norm_affine_inputs(tgc_tensor *const *in, int n_in, int64_t bits, const tgc_tensor **wt,
                              const tgc_tensor **bs)
{
    int k = 1;
    *wt = *bs = NULL;
    if (bits & TGC_LN_HAS_WEIGHT)
        *wt = k < n_in ? in[k++] : NULL;
    if (bits & TGC_LN_HAS_BIAS)
        *bs = k < n_in ? in[k++] : NULL;
    return k == n_in && (!(bits & TGC_LN_HAS_WEIGHT) || *wt) && (!(bits & TGC_LN_HAS_BIAS) || *bs);
}

/* w[0..n) = the weight's values or 1, b[0..n) = the bias's or 0. */
static void norm_affine_values(const tgc_tensor *wt, const tgc_tensor *bs, int64_t n, double *w,
                               double *b)
{
    if (wt)
        gather(wt, 0, n, w);
    else
        for (int64_t j = 0; j < n; j++)
            w[j] = 1.0;
    if (bs)
        gather(bs, 0, n, b);
    else
        memset(b, 0, (size_t)n * sizeof *b);
}

/* The mean of v[0..m) and 1 / sqrt(var + eps) with the population variance, in two passes. */
static double row_rstd(const double *v, int64_t m, double eps, double *mean)
{
    double s = 0;
    for (int64_t j = 0; j < m; j++)
        s += v[j];
    double mu = s / (double)m, q = 0;
    for (int64_t j = 0; j < m; j++) {
        double d = v[j] - mu;
        q += d * d;
    }
    *mean = mu;
    return 1.0 / sqrt(q / (double)m + eps);
}

/* ---- layer_norm over the last n_norm dims ---- */

static tgc_status layer_norm(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *x = in[0];
    const int n_norm = (int)a->layer_norm.n_norm;
    const int64_t bits = a->layer_norm.has;
    const double eps = a->layer_norm.eps;
    const tgc_tensor *wt, *bs;
    if (!norm_affine_inputs(in, n_in, bits, &wt, &bs) || n_norm < 0 || n_norm > x->ndim)
        return bad_inputs(TGC_OP_LAYER_NORM, n_in);

    const int64_t M = prod(x->shape, x->ndim - n_norm, x->ndim);
    const int64_t rows = prod(x->shape, 0, x->ndim - n_norm);
    double *buf = malloc((size_t)M * 3 * sizeof *buf);
    if (!buf)
        return oom("layer_norm");
    double *w = buf + M, *b = buf + 2 * M;
    norm_affine_values(wt, bs, M, w, b);
    for (int64_t r = 0; r < rows; r++) {
        gather(x, r * M, M, buf);
        double mean, rstd = row_rstd(buf, M, eps, &mean);
        for (int64_t j = 0; j < M; j++)
            buf[j] = (buf[j] - mean) * rstd * w[j] + b[j];
        scatter_out(out, r * M, M, buf);
    }
    free(buf);
    return TGC_OK;
}

/* ---- rms_norm over the last n_norm dims: x / sqrt(mean(x^2) + eps) * weight ---- */

static tgc_status rms_norm(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *x = in[0];
    const int n_norm = (int)a->layer_norm.n_norm;
    const int64_t bits = a->layer_norm.has;
    const double eps = a->layer_norm.eps;
    const tgc_tensor *wt = (bits & TGC_LN_HAS_WEIGHT) && n_in > 1 ? in[1] : NULL;
    if (n_in != 1 + !!wt || (bits & ~(int64_t)TGC_LN_HAS_WEIGHT) ||
        ((bits & TGC_LN_HAS_WEIGHT) && !wt) || n_norm < 0 || n_norm > x->ndim)
        return bad_inputs(TGC_OP_RMS_NORM, n_in);
    const int64_t M = prod(x->shape, x->ndim - n_norm, x->ndim);
    const int64_t rows = prod(x->shape, 0, x->ndim - n_norm);
    double *buf = malloc((size_t)(M ? M : 1) * 2 * sizeof *buf);
    if (!buf)
        return oom("rms_norm");
    double *w = buf + M;
    if (wt)
        gather(wt, 0, M, w);
    for (int64_t r = 0; r < rows; r++) {
        gather(x, r * M, M, buf);
        double q = 0;
        for (int64_t j = 0; j < M; j++)
            q += buf[j] * buf[j];
        double rr = 1.0 / sqrt(q / (double)M + eps);
        for (int64_t j = 0; j < M; j++)
            buf[j] = wt ? buf[j] * rr * w[j] : buf[j] * rr;
        scatter_out(out, r * M, M, buf);
    }
    free(buf);
    return TGC_OK;
}

/* ---- group_norm: x [N, C, *], per sample and group of C / G channels (contiguous in x's
 * row-major order with their spatial elements): mean, then the mean of squared deviations
 * (two passes, as layer_norm), (x - mean) / sqrt(var + eps) * w[c] + b[c] ---- */

static tgc_status group_norm(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *x = in[0];
    const int64_t G = a->group_norm.groups, bits = a->group_norm.has;
    const double eps = a->group_norm.eps;
    const tgc_tensor *wt, *bs;
    if (!norm_affine_inputs(in, n_in, bits, &wt, &bs) || x->ndim < 2 || G < 1 ||
        x->shape[1] % G != 0)
        return bad_inputs(TGC_OP_GROUP_NORM, n_in);
    const int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    const int64_t M = C / G * S; /* elements of one group */
    double *buf = malloc((size_t)(M + 2 * C + 1) * sizeof *buf);
    if (!buf)
        return oom("group_norm");
    double *w = buf + M, *b = w + C;
    norm_affine_values(wt, bs, C, w, b);
    for (int64_t r = 0; r < N * G; r++) {
        gather(x, r * M, M, buf);
        double mean, rstd = row_rstd(buf, M, eps, &mean);
        const int64_t c0 = r % G * (C / G);
        for (int64_t j = 0; j < M; j++) {
            const int64_t ch = c0 + j / S;
            buf[j] = (buf[j] - mean) * rstd * w[ch] + b[ch];
        }
        scatter_out(out, r * M, M, buf);
    }
    free(buf);
    return TGC_OK;
}

/* ---- dropout: element i keeps iff uniform(seed, base + i) >= p ---- */

static tgc_status dropout(const tgc_tensor *x, const tgc_attrs *a, tgc_tensor *out)
{
    enum { CHUNK = 1024 };
    const double p = a->dropout.p;
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    const int64_t n = tgc_shape_numel(out->shape, out->ndim);
    uint64_t seed;
    const uint64_t base = tgc_rng_draw((uint64_t)n, &seed);
    double buf[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        gather(x, i0, m, buf);
        for (int64_t j = 0; j < m; j++) {
            int keep = tgc_philox_uniform(seed, base + (uint64_t)(i0 + j)) >= p;
            /* multiply (not select) so NaN and -0 propagate as in PyTorch */
            buf[j] *= keep ? scale : 0.0;
        }
        scatter_out(out, i0, m, buf);
    }
    return TGC_OK;
}

/* ---- cross_entropy / nll_loss: x [N, C, d...] or [C], target [N, d...] or [] ---- */

static tgc_status loss(tgc_op op, tgc_tensor *const *in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *x = in[0], *tg = in[1];
    const char *name = op == TGC_OP_CROSS_ENTROPY ? "cross_entropy" : "nll_loss";
    const int reduction = (int)a->loss.reduction;
    const int64_t ignore = a->loss.ignore_index;
    const double eps = op == TGC_OP_CROSS_ENTROPY ? a->loss.label_smoothing : 0.0;
    const int cdim = x->ndim == 1 ? 0 : 1;
    const int64_t N = x->ndim == 1 ? 1 : x->shape[0];
    const int64_t C = x->shape[cdim];
    const int64_t D = prod(x->shape, cdim + 1, x->ndim);
    const int64_t P = N * D; /* target positions */
    const int64_t cstride = x->strides[cdim];

    int64_t *t = malloc((size_t)(P > 0 ? P : 1) * sizeof *t);
    double *losses = malloc((size_t)(P > 0 ? P : 1) * sizeof *losses);
    if (!t || !losses) {
        free(t);
        free(losses);
        return oom(name);
    }
    gather_i64(tg, 0, P, t);
    for (int64_t p = 0; p < P; p++) {
        if (t[p] != ignore && (t[p] < 0 || t[p] >= C)) {
            tgc_status s = tgc_set_error(TGC_ERR_INVALID_ARG,
                                         "tgc_%s: target %lld out of range [0, %lld) at "
                                         "position %lld",
                                         name, (long long)t[p], (long long)C, (long long)p);
            free(t);
            free(losses);
            return s;
        }
    }

    const void *xb = tgc_host_data(x);
    double total = 0;
    int64_t count = 0;
    for (int64_t p = 0; p < P; p++) {
        if (t[p] == ignore) {
            losses[p] = 0.0;
            continue;
        }
        const int64_t n = p / D, d = p % D;
        const int64_t off0 = tgc_tensor_elem_offset(x, n * C * D + d);
        double l;
        if (op == TGC_OP_NLL_LOSS) {
            l = -ld(xb, x->dtype, off0 + t[p] * cstride);
        } else {
            double m = -INFINITY, sumx = 0;
            for (int64_t c = 0; c < C; c++) {
                double v = ld(xb, x->dtype, off0 + c * cstride);
                m = v > m ? v : m;
                sumx += v;
            }
            double se = 0;
            for (int64_t c = 0; c < C; c++)
                se += exp(ld(xb, x->dtype, off0 + c * cstride) - m);
            const double lse = m + log(se);
            l = lse - ld(xb, x->dtype, off0 + t[p] * cstride);
            if (eps != 0.0) {
                /* smoothing term: -sum_c log_softmax_c / C */
                double smooth = ((double)C * lse - sumx) / (double)C;
                l = (1.0 - eps) * l + eps * smooth;
            }
        }
        losses[p] = l;
        total += l;
        count++;
    }

    if (reduction == TGC_REDUCE_NONE) {
        scatter_out(out, 0, P, losses);
    } else {
        /* mean over the non-ignored targets; 0/0 = NaN when all are ignored, as in PyTorch */
        double r = reduction == TGC_REDUCE_MEAN ? total / (double)count : total;
        scatter_out(out, 0, 1, &r);
    }
    free(t);
    free(losses);
    return TGC_OK;
}

/* ---- scaled_dot_product_attention ---- */

/* Offset of the batch position `bidx` (over out's nb batch dims) in t, whose dims before
 * its last `inner` are batch dims aligned at the right and broadcast where size 1. */
static int64_t batch_offset(const tgc_tensor *t, int inner, const int64_t *bidx, int nb)
{
    int64_t off = t->offset;
    int tb = t->ndim - inner;
    for (int d = 0; d < tb; d++) {
        int od = nb - tb + d;
        if (od >= 0 && t->shape[d] != 1)
            off += bidx[od] * t->strides[d];
    }
    return off;
}

static tgc_status sdpa(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_tensor *q = in[0], *k = in[1], *v = in[2];
    const tgc_tensor *mask = n_in > 3 ? in[3] : NULL;
    const int causal = a->sdpa.causal != 0;
    const double p = a->sdpa.dropout_p, scale = a->sdpa.scale;
    const int nb = out->ndim - 2;
    const int64_t B = prod(out->shape, 0, nb);
    const int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
    const int64_t S = k->shape[k->ndim - 2];
    const int64_t Ev = v->shape[v->ndim - 1];
    const int64_t qsl = q->strides[q->ndim - 2], qse = q->strides[q->ndim - 1];
    const int64_t ksl = k->strides[k->ndim - 2], kse = k->strides[k->ndim - 1];
    const int64_t vsl = v->strides[v->ndim - 2], vse = v->strides[v->ndim - 1];
    /* the mask broadcasts to [..., L, S]; it may have fewer than two dims */
    int64_t msl = 0, mss = 0;
    int mask_inner = 0, mask_bool = 0;
    if (mask) {
        mask_inner = mask->ndim < 2 ? mask->ndim : 2;
        if (mask->ndim >= 1 && mask->shape[mask->ndim - 1] != 1)
            mss = mask->strides[mask->ndim - 1];
        if (mask->ndim >= 2 && mask->shape[mask->ndim - 2] != 1)
            msl = mask->strides[mask->ndim - 2];
        mask_bool = mask->dtype == TGC_BOOL;
    }
    /* Dropout on the attention weights, viewed as a row-major [out batch..., L, S] tensor:
     * weight element e keeps iff uniform(seed, base + e) >= p. */
    uint64_t seed = 0, base = 0;
    const double keep_scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    if (p > 0) {
        base = tgc_rng_draw((uint64_t)(B * L * S), &seed);
    }

    double *scratch = malloc((size_t)(E + S + Ev + 1) * sizeof *scratch);
    if (!scratch)
        return oom("scaled_dot_product_attention");
    double *qrow = scratch, *w = qrow + E, *acc = w + S;

    const void *qb = tgc_host_data(q), *kb = tgc_host_data(k), *vb = tgc_host_data(v);
    const void *mb = mask ? tgc_host_data(mask) : NULL;
    int64_t bidx[TGC_MAX_DIMS] = {0};
    for (int64_t b = 0; b < B; b++) {
        const int64_t qo = batch_offset(q, 2, bidx, nb);
        const int64_t ko = batch_offset(k, 2, bidx, nb);
        const int64_t vo = batch_offset(v, 2, bidx, nb);
        const int64_t mo = mask ? batch_offset(mask, mask_inner, bidx, nb) : 0;
        for (int64_t i = 0; i < L; i++) {
            for (int64_t e = 0; e < E; e++)
                qrow[e] = ld(qb, q->dtype, qo + i * qsl + e * qse);
            int all_masked = 1;
            double m = -INFINITY;
            for (int64_t j = 0; j < S; j++) {
                double s;
                int masked = causal && j > i;
                double bias = 0;
                if (!masked && mask) {
                    double mv = ld(mb, mask->dtype, mo + i * msl + j * mss);
                    if (mask_bool)
                        masked = mv == 0.0;
                    else
                        bias = mv;
                }
                if (masked) {
                    s = -INFINITY;
                } else {
                    double dot = 0;
                    const int64_t kr = ko + j * ksl;
                    for (int64_t e = 0; e < E; e++)
                        dot += qrow[e] * ld(kb, k->dtype, kr + e * kse);
                    s = dot * scale + bias;
                }
                w[j] = s;
                if (s != -INFINITY)
                    all_masked = 0;
                if (s > m)
                    m = s;
            }
            for (int64_t c = 0; c < Ev; c++)
                acc[c] = 0;
            /* A row whose scores are all -inf attends to nothing and gives zeros (PyTorch's
             * _safe_softmax in the math backend). */
            if (!all_masked) {
                double sum = 0;
                for (int64_t j = 0; j < S; j++) {
                    w[j] = exp(w[j] - m);
                    sum += w[j];
                }
                const uint64_t row0 = base + (uint64_t)((b * L + i) * S);
                for (int64_t j = 0; j < S; j++) {
                    double wj = w[j] / sum;
                    if (p > 0)
                        wj *= tgc_philox_uniform(seed, row0 + (uint64_t)j) >= p ? keep_scale : 0.0;
                    const int64_t vr = vo + j * vsl;
                    for (int64_t c = 0; c < Ev; c++)
                        acc[c] += wj * ld(vb, v->dtype, vr + c * vse);
                }
            }
            scatter_out(out, (b * L + i) * Ev, Ev, acc);
        }
        for (int d = nb - 1; d >= 0; d--) {
            if (++bidx[d] < out->shape[d])
                break;
            bidx[d] = 0;
        }
    }
    free(scratch);
    return TGC_OK;
}

tgc_status tgc_interp_nn(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                         tgc_tensor *out)
{
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_nn: %s given %d inputs", tgc_op_name(op),
                             n_in);
    switch (op) {
    case TGC_OP_MAX_POOL2D:
    case TGC_OP_AVG_POOL2D:
    case TGC_OP_ADAPTIVE_AVG_POOL2D:
    case TGC_OP_BATCH_NORM:
    case TGC_OP_LAYER_NORM:
    case TGC_OP_RMS_NORM:
    case TGC_OP_GROUP_NORM:
    case TGC_OP_DROPOUT:
    case TGC_OP_CROSS_ENTROPY:
    case TGC_OP_NLL_LOSS:
    case TGC_OP_SDPA: break;
    default:
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_interp_nn: %s is not a pool, nn, random, loss or attention op",
                             tgc_op_name(op));
    }
    /* Nothing to write (an empty batch also leaves batch_norm's running stats alone, as in
     * PyTorch; a reduced loss always has one element). Attention still reserves its dropout
     * counters, so the stream advances as in compiled code. */
    if (op != TGC_OP_SDPA && tgc_shape_numel(out->shape, out->ndim) == 0)
        return TGC_OK;
    switch (op) {
    case TGC_OP_MAX_POOL2D:
    case TGC_OP_AVG_POOL2D:
    case TGC_OP_ADAPTIVE_AVG_POOL2D: return pool2d(op, in[0], a, out);
    case TGC_OP_BATCH_NORM: return batch_norm(in, n_in, a, out);
    case TGC_OP_LAYER_NORM: return layer_norm(in, n_in, a, out);
    case TGC_OP_RMS_NORM: return rms_norm(in, n_in, a, out);
    case TGC_OP_GROUP_NORM: return group_norm(in, n_in, a, out);
    case TGC_OP_DROPOUT: return dropout(in[0], a, out);
    case TGC_OP_CROSS_ENTROPY:
    case TGC_OP_NLL_LOSS: return loss(op, in, a, out);
    default: return sdpa(in, n_in, a, out);
    }
}
