/* interp kernels of the backward ops (ops.def's GRAD kind).
 *
 * Each kernel reads its (possibly strided) inputs into row-major double buffers, accumulates
 * the gradient in a double buffer of the result's size, and writes `out` once, rounded once
 * to its dtype. Sizes come from the tensors (the result's shape carries the forward sizes
 * that the node's size attributes hold symbolically); only the window attributes (stride,
 * padding, dilation, groups, kernel, exclude_padding) are read from the node.
 *
 * Semantics are PyTorch's: a max pool window's gradient goes to the element the forward
 * picks (the first maximum in row-major window order, or the last NaN); average pools divide
 * as the forward does (count_include_pad unless exclude_padding; adaptive windows
 * [floor(i*n/m), ceil((i+1)*n/m))); the scatter-adds reject indices outside [0, size), as the
 * forward ops do (TGC_ERR_INVALID_ARG naming the op, the index and its position). */
#include "backend/interp/interp.h"
#include "support/error.h"
#include "tensor/copy.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static tgc_status oom(tgc_op op)
{
    return tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory for its work buffers",
                         tgc_op_name(op));
}

static int64_t numel(const tgc_tensor *t)
{
    return tgc_shape_numel(t->shape, t->ndim);
}

/* t's elements in row-major order into buf (numel(t) of elem_dt: TGC_F64 or TGC_I64). */
static void read_rows(const tgc_tensor *t, tgc_dtype elem_dt, void *buf)
{
    int64_t st[TGC_MAX_DIMS];
    if (numel(t) == 0)
        return;
    tgc_row_major_strides(t->shape, t->ndim, st);
    tgc_copy_strided(buf, elem_dt, 0, st, tgc_host_data(t), t->dtype, t->offset, t->strides,
                     t->shape, t->ndim);
}

/* acc (row-major, out's shape) into out, rounded once to its dtype. */
static void write_out(tgc_tensor *out, const double *acc)
{
    int64_t st[TGC_MAX_DIMS];
    if (numel(out) == 0)
        return;
    tgc_row_major_strides(out->shape, out->ndim, st);
    tgc_copy_strided(tgc_host_data(out), out->dtype, out->offset, st, acc, TGC_F64, 0, st,
                     out->shape, out->ndim);
}

static double *alloc_f64(int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

/* ---- convolution ---- */

/* The geometry of a conv2d: x [N, C_in, H, W], w [C_out, C_in / G, KH, KW],
 * y [N, C_out, OH, OW]. */
typedef struct conv_geom {
    int64_t N, Ci, H, W, Co, KH, KW, OH, OW, G;
    int64_t sh, sw, ph, pw, dh, dw;
} conv_geom;

static conv_geom conv_geom_of(const int64_t *x, const int64_t *w, const int64_t *y,
                              const tgc_attrs *a)
{
    const tgc_conv2d_attrs *v = &a->conv2d; /* both grads' layouts begin with conv2d's */
    conv_geom c = {x[0],     x[1],     x[2],     x[3],      w[0],        w[2],
                   w[3],     y[2],     y[3],     v->groups, v->stride_h, v->stride_w,
                   v->pad_h, v->pad_w, v->dil_h, v->dil_w};
    return c;
}

/* The two conv gradients walk the forward's taps y[yi] += x[xi] * w[wi] (those inside x):
 * dx[xi] += dy[yi] * w[wi] (to_input), or dw[wi] += dy[yi] * x[xi]. operand is w or x. */
static void conv_taps(const conv_geom *c, int to_input, const double *dy, const double *operand,
                      double *acc)
{
    const int64_t cig = c->Ci / c->G, cog = c->Co / c->G;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t co = 0; co < c->Co; co++) {
            const int64_t ci0 = co / cog * cig;
            for (int64_t oh = 0; oh < c->OH; oh++)
                for (int64_t ow = 0; ow < c->OW; ow++) {
                    const double g = dy[((n * c->Co + co) * c->OH + oh) * c->OW + ow];
                    for (int64_t cj = 0; cj < cig; cj++)
                        for (int64_t kh = 0; kh < c->KH; kh++) {
                            const int64_t ih = oh * c->sh - c->ph + kh * c->dh;
                            if (ih < 0 || ih >= c->H)
                                continue;
                            const int64_t xrow = ((n * c->Ci + ci0 + cj) * c->H + ih) * c->W;
                            const int64_t wrow = ((co * cig + cj) * c->KH + kh) * c->KW;
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                const int64_t iw = ow * c->sw - c->pw + kw * c->dw;
                                if (iw < 0 || iw >= c->W)
                                    continue;
                                if (to_input)
                                    acc[xrow + iw] += g * operand[wrow + kw];
                                else
                                    acc[wrow + kw] += g * operand[xrow + iw];
                            }
                        }
                }
        }
}

/* CONV2D_GRAD_INPUT(dy, w) -> dx, CONV2D_GRAD_WEIGHT(x, dy) -> dw. */
static tgc_status conv_grad(tgc_op op, const tgc_tensor *dy, const tgc_tensor *operand,
                            const tgc_attrs *a, tgc_tensor *out)
{
    int to_input = op == TGC_OP_CONV2D_GRAD_INPUT;
    const tgc_tensor *x = to_input ? out : operand, *w = to_input ? operand : out;
    conv_geom c = conv_geom_of(x->shape, w->shape, dy->shape, a);
    double *g = alloc_f64(numel(dy)), *v = alloc_f64(numel(operand)), *acc = alloc_f64(numel(out));
    if (!g || !v || !acc) {
        free(g);
        free(v);
        free(acc);
        return oom(op);
    }
    read_rows(dy, TGC_F64, g);
    read_rows(operand, TGC_F64, v);
    memset(acc, 0, sizeof(double) * (size_t)numel(out));
    conv_taps(&c, to_input, g, v, acc);
    write_out(out, acc);
    free(g);
    free(v);
    free(acc);
    return TGC_OK;
}

/* ---- pools: dx [..., H, W] from dy [..., OH, OW]; every leading position is one plane ---- */

/* One output index's window along an axis: inputs [lo, hi) and its share of the divisor. */
typedef struct span {
    int64_t lo, hi, count;
} span;

/* The forward's windows (k_nn.c's pool_windows): k == 0 adaptive, else window k, stride s,
 * padding p, the divisor counting the padding unless exclude_pad. */
static void windows(span *win, int64_t m, int64_t n, int64_t k, int64_t s, int64_t p,
                    int exclude_pad)
{
    for (int64_t i = 0; i < m; i++) {
        int64_t lo, hi, count;
        if (k == 0) {
            lo = i * n / m;
            hi = ((i + 1) * n + m - 1) / m;
            count = hi - lo;
        } else {
            lo = i * s - p;
            hi = lo + k;
            count = (hi < n + p ? hi : n + p) - lo;
        }
        win[i].lo = lo > 0 ? lo : 0;
        win[i].hi = hi < n ? hi : n;
        win[i].count = exclude_pad ? win[i].hi - win[i].lo : count;
    }
}

/* MAX_POOL2D_GRAD(x, dy), AVG_POOL2D_GRAD(dy), ADAPTIVE_AVG_POOL2D_GRAD(dy). */
static tgc_status pool_grad(tgc_op op, const tgc_tensor *x, const tgc_tensor *dy,
                            const tgc_attrs *a, tgc_tensor *out)
{
    const int r = out->ndim;
    const int64_t H = out->shape[r - 2], W = out->shape[r - 1];
    const int64_t OH = dy->shape[r - 2], OW = dy->shape[r - 1];
    const int64_t planes = H > 0 && W > 0 ? numel(out) / (H * W) : 0;
    double *g = alloc_f64(numel(dy)), *acc = alloc_f64(numel(out));
    double *v = x ? alloc_f64(numel(x)) : NULL;
    span *win = malloc((size_t)(OH + OW > 0 ? OH + OW : 1) * sizeof *win);
    if (!g || !acc || !win || (x && !v)) {
        free(g);
        free(acc);
        free(v);
        free(win);
        return oom(op);
    }
    span *wh = win, *ww = win + OH;
    if (op == TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD) {
        windows(wh, OH, H, 0, 1, 0, 0);
        windows(ww, OW, W, 0, 1, 0, 0);
    } else {
        int excl = op == TGC_OP_AVG_POOL2D_GRAD && a->pool_grad.exclude_padding != 0;
        /* MAX_POOL2D_GRAD's layout is pool, AVG_POOL2D_GRAD's pool_grad begins with it */
        const tgc_pool_attrs *p = &a->pool;
        windows(wh, OH, H, p->kh, p->sh, p->ph, excl);
        windows(ww, OW, W, p->kw, p->sw, p->pw, excl);
    }
    read_rows(dy, TGC_F64, g);
    if (x)
        read_rows(x, TGC_F64, v);
    memset(acc, 0, sizeof(double) * (size_t)numel(out));
    for (int64_t p = 0; p < planes; p++) {
        double *dx = acc + p * H * W;
        const double *src = v ? v + p * H * W : NULL, *gp = g + p * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const span h = wh[oh], w = ww[ow];
                const double d = gp[oh * OW + ow];
                if (src) { /* the forward's pick: v > best, or a NaN (which then stays) */
                    int64_t at = h.lo * W + w.lo;
                    double best = -INFINITY;
                    for (int64_t i = h.lo; i < h.hi; i++)
                        for (int64_t j = w.lo; j < w.hi; j++) {
                            double e = src[i * W + j];
                            if (e > best || e != e) {
                                best = e;
                                at = i * W + j;
                            }
                        }
                    if (h.lo < h.hi && w.lo < w.hi)
                        dx[at] += d;
                } else {
                    const double share = d / (double)(h.count * w.count);
                    for (int64_t i = h.lo; i < h.hi; i++)
                        for (int64_t j = w.lo; j < w.hi; j++)
                            dx[i * W + j] += share;
                }
            }
    }
    write_out(out, acc);
    free(g);
    free(acc);
    free(v);
    free(win);
    return TGC_OK;
}

/* ---- scatter-adds ---- */

static tgc_status index_error(tgc_op op, int64_t v, int64_t limit, int64_t pos)
{
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc_%s: index %" PRId64 " out of range [0, %" PRId64
                         ") at position %" PRId64,
                         tgc_op_name(op), v, limit, pos);
}

/* idx's values in row-major order, each checked against [0, limit); NULL on error (set). */
static int64_t *read_indices(tgc_op op, const tgc_tensor *idx, int64_t limit)
{
    int64_t n = numel(idx);
    int64_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) {
        oom(op);
        return NULL;
    }
    read_rows(idx, TGC_I64, ids);
    for (int64_t p = 0; p < n; p++)
        if (ids[p] < 0 || ids[p] >= limit) {
            index_error(op, ids[p], limit, p);
            free(ids);
            return NULL;
        }
    return ids;
}

/* The scatter-adds as out[outer, ids[j], inner] += dy[outer, j, inner] (inner may be 0-sized
 * or a run of one): embedding (outer 1, j over idx, inner D), index_select (outer / inner
 * around dim) — and gather, whose every element has its own index (each_elem). */
static tgc_status scatter_add(tgc_op op, const tgc_tensor *dy, const tgc_tensor *idx, int dim,
                              tgc_tensor *out)
{
    const int nd = out->ndim;
    int64_t limit = op == TGC_OP_EMBEDDING_GRAD ? out->shape[0] : nd ? out->shape[dim] : 1;
    double *g = alloc_f64(numel(dy)), *acc = alloc_f64(numel(out));
    int64_t *ids = g && acc ? read_indices(op, idx, limit) : NULL;
    if (!ids) {
        free(g);
        free(acc);
        return g && acc ? tgc_last_status() : oom(op);
    }
    read_rows(dy, TGC_F64, g);
    memset(acc, 0, sizeof(double) * (size_t)numel(out));
    if (op == TGC_OP_GATHER_GRAD) {
        /* dy and idx share a shape; position p's index replaces its coordinate at dim */
        int64_t ost[TGC_MAX_DIMS], pos[TGC_MAX_DIMS] = {0}, base = 0;
        tgc_row_major_strides(out->shape, nd, ost);
        for (int64_t p = 0, n = numel(dy); p < n; p++) {
            acc[base + (nd ? ids[p] * ost[dim] : 0)] += g[p];
            for (int k = nd - 1; k >= 0; k--) { /* next position; base skips dim */
                base += k == dim ? 0 : ost[k];
                if (++pos[k] < dy->shape[k])
                    break;
                base -= k == dim ? 0 : ost[k] * dy->shape[k];
                pos[k] = 0;
            }
        }
    } else {
        int64_t outer = 1, inner = 1, n = numel(idx);
        int d = op == TGC_OP_EMBEDDING_GRAD ? 0 : dim;
        if (op == TGC_OP_EMBEDDING_GRAD) {
            inner = out->shape[1];
        } else {
            for (int k = 0; k < d; k++)
                outer *= out->shape[k];
            for (int k = d + 1; k < nd; k++)
                inner *= out->shape[k];
        }
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < n; j++) {
                double *dst = acc + (o * limit + ids[j]) * inner;
                const double *src = g + (o * n + j) * inner;
                for (int64_t e = 0; e < inner; e++)
                    dst[e] += src[e];
            }
    }
    write_out(out, acc);
    free(g);
    free(acc);
    free(ids);
    return TGC_OK;
}

/* ---- dispatch ---- */

static tgc_status check_host(tgc_op op, const tgc_tensor *t)
{
    if (tgc_host_data(t) || numel(t) == 0)
        return TGC_OK;
    return tgc_set_error(TGC_ERR_INTERNAL,
                         "tgc_%s: a tensor without host storage reached the interp backend",
                         tgc_op_name(op));
}

tgc_status tgc_interp_grad(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_tensor *out)
{
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || info->kind != TGC_KIND_GRAD || n_in != info->min_inputs || !out)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_grad: %s given %d inputs",
                             tgc_op_name(op), n_in);
    for (int k = 0; k < n_in; k++) {
        if (!in[k])
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: input %d is NULL", tgc_op_name(op), k);
        tgc_status s = check_host(op, in[k]);
        if (s != TGC_OK)
            return s;
    }
    tgc_status s = check_host(op, out);
    if (s != TGC_OK)
        return s;
    switch (op) {
    case TGC_OP_CONV2D_GRAD_INPUT: /* (dy, w) */
        return numel(out) ? conv_grad(op, in[0], in[1], a, out) : TGC_OK;
    case TGC_OP_CONV2D_GRAD_WEIGHT: /* (x, dy) */
        return numel(out) ? conv_grad(op, in[1], in[0], a, out) : TGC_OK;
    case TGC_OP_MAX_POOL2D_GRAD: /* (x, dy) */
        return numel(out) ? pool_grad(op, in[0], in[1], a, out) : TGC_OK;
    case TGC_OP_AVG_POOL2D_GRAD:
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD:
        return numel(out) ? pool_grad(op, NULL, in[0], a, out) : TGC_OK;
    case TGC_OP_EMBEDDING_GRAD: return scatter_add(op, in[0], in[1], 0, out);
    case TGC_OP_GATHER_GRAD:
    case TGC_OP_INDEX_SELECT_GRAD: {
        int dim = (int)(op == TGC_OP_GATHER_GRAD ? a->gather_grad.dim : a->index_select_grad.dim);
        if (out->ndim ? dim < 0 || dim >= out->ndim : dim != 0)
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: dim %d out of range", tgc_op_name(op),
                                 dim);
        return scatter_add(op, in[0], in[1], dim, out);
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_grad: %s is not a backward op",
                             tgc_op_name(op));
    }
}
