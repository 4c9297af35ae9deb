/* Decomposition of composite ops into pointwise and reduction primitives, so the fuser
 * only meets simple ops.
 *
 * The decompositions are ops.def's (DECOMPOSITION entries: softmax, log_softmax,
 * layer_norm, batch_norm in eval; FORMULA entries marked ACTIVATIONS: gelu, gelu_tanh,
 * silu, unless the backend keeps them), built here as graph nodes through ir/formula.h; a
 * decomposed op inside a decomposition is decomposed too. Cross entropy (log_softmax, then
 * nll_loss), var (two passes over constant reduced dims) and batch_norm with batch
 * statistics (the backward's own statistics ops, and assignments of the running ones) are
 * written below.
 *
 * The arithmetic follows interp's kernels step by step (the same subtraction of the max
 * before exp, the same two-pass variance, eps added to the variance before rsqrt), but
 * rounds each intermediate to the compute dtype where interp keeps doubles: f32 for
 * f32/f16/bf16 and integer inputs (16-bit inputs are cast up once and the result cast
 * back once), f64 for f64. A node whose rewrite does not infer (an empty reduced dim, a
 * reshape that cannot be expressed) is kept as it is. */
#include <math.h>
#include <string.h>

#include "ir/conv_taps.h"
#include "ir/formula.h"
#include "ir/shape_infer.h"
#include "passes/passes.h"
#include "support/error.h"
#include "tensor/tensor_impl.h"

typedef struct dc {
    tgc_rewriter *rw;
    tgc_formula_builder b; /* over the new graph's values; ctx: this */
} dc;

static tgc_dtype compute_dtype(tgc_dtype dt)
{
    return tgc_formula_compute_dtype(tgc_dtype_is_float(dt) ? dt : TGC_F32);
}

static tgc_dtype dtype_of(dc *c, int32_t v)
{
    return v >= 0 ? tgc_rw_type(c->rw, v)->dtype : TGC_F32;
}

static int ndim_of(dc *c, int32_t v)
{
    return v >= 0 ? tgc_rw_type(c->rw, v)->ndim : 0;
}

static int32_t cast(dc *c, int32_t x, tgc_dtype dt)
{
    if (x < 0 || dtype_of(c, x) == dt)
        return x;
    tgc_attrs a = {.dtype = dt};
    return tgc_rw_emit(c->rw, TGC_OP_CAST, &x, 1, &a);
}

/* ---- the graph builder of ops.def's formulas and decompositions ---- */

static int32_t gb_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    dc *c = ctx;
    for (int k = 0; k < n_in; k++)
        if (in[k] < 0)
            return -1;
    if (tgc_op_has_decomposition(op) && n_in <= 8) {
        /* a decomposed op inside a decomposition is decomposed too */
        tgc_vinfo iv[8], out;
        for (int k = 0; k < n_in; k++)
            iv[k] = *tgc_rw_type(c->rw, in[k]);
        if (tgc_infer(op, iv, n_in, a, c->rw->g->syms, &out) != TGC_OK)
            return -1;
        int32_t r = tgc_op_decomposition(op, &c->b, in, n_in, a, out.dtype);
        if (r != -2)
            return r;
    }
    return tgc_rw_emit(c->rw, op, in, n_in, a);
}

/* A 0-d graph constant of dtype dt. */
static int32_t gb_const(void *ctx, double v, tgc_dtype dt)
{
    dc *c = ctx;
    tgc_tensor *t = tgc_tensor_new(NULL, 0, dt, tgc_cpu());
    if (t) {
        tgc_store(tgc_host_data(t), dt, 0, v);
        tgc_scope_release(t);
    }
    return tgc_rw_emit_const(c->rw, t);
}

static int32_t gb_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    return cast(ctx, x, dt);
}

static int gb_shape(void *ctx, int32_t x, tgc_sdim *shape)
{
    dc *c = ctx;
    if (x < 0)
        return -1;
    const tgc_vinfo *v = tgc_rw_type(c->rw, x);
    if (shape)
        memcpy(shape, v->shape, sizeof(tgc_sdim) * (size_t)v->ndim);
    return v->ndim;
}

/* log_softmax over the class dim (1, or 0 for a 1-d input: PyTorch's), then nll_loss. */
static int32_t cross_entropy(dc *c, const tgc_node *nd, const int32_t *in)
{
    int n = ndim_of(c, in[0]);
    tgc_dtype ct = compute_dtype(nd->out.dtype);
    int32_t x = cast(c, in[0], ct);
    tgc_attrs sa = tgc_attrs_of(TGC_OP_LOG_SOFTMAX);
    sa.dim.dim = n == 1 ? 0 : 1;
    int32_t logp = x < 0 ? -1 : tgc_op_decomposition(TGC_OP_LOG_SOFTMAX, &c->b, &x, 1, &sa, ct);
    int32_t ops[2] = {logp, in[1]};
    tgc_attrs a = {.ni = 2}; /* NLL_LOSS: no label smoothing (nf 0, as tgc_nll_loss) */
    a.loss.reduction = nd->attrs.loss.reduction;
    a.loss.ignore_index = nd->attrs.loss.ignore_index;
    int32_t l = logp < 0 ? -1 : tgc_rw_emit(c->rw, TGC_OP_NLL_LOSS, ops, 2, &a);
    return cast(c, l, nd->out.dtype);
}

/* Two passes as in interp: mean, then the mean-free sum of squares over the count less the
 * correction. Only for constant reduced dims (the count is a scalar attribute). */
static int32_t variance(dc *c, const tgc_node *nd, int32_t x)
{
    const tgc_vinfo *xv = tgc_rw_type(c->rw, x);
    uint64_t mask = (uint64_t)nd->attrs.reduce.mask;
    int64_t count = 1;
    for (int d = 0; d < xv->ndim; d++)
        if (mask >> d & 1) {
            if (!TGC_SDIM_IS_CONST(xv->shape[d]))
                return -2;
            count *= xv->shape[d];
        }
    tgc_dtype out = nd->out.dtype;
    x = cast(c, x, compute_dtype(out));
    tgc_attrs mean = {.ni = 2}, sum = {.ni = 2}, div = tgc_attrs_of(TGC_OP_DIV_SCALAR);
    mean.reduce.mask = sum.reduce.mask = (int64_t)mask;
    mean.reduce.keepdim = 1;
    sum.reduce.keepdim = nd->attrs.reduce.keepdim;
    div.scalar.value = fmax(0.0, (double)count - (double)nd->attrs.reduce.correction);
    int32_t m = gb_op(c, TGC_OP_MEAN, &x, 1, &mean);
    int32_t d = gb_op(c, TGC_OP_SUB, (int32_t[]){x, m}, 2, NULL);
    int32_t sq = gb_op(c, TGC_OP_MUL, (int32_t[]){d, d}, 2, NULL);
    int32_t s = gb_op(c, TGC_OP_SUM, &sq, 1, &sum);
    return cast(c, gb_op(c, TGC_OP_DIV_SCALAR, &s, 1, &div), out);
}

/* x's per-channel [C] parameter p as [1, C, 1, ...] in dtype dt (a view of the cast). */
static int32_t per_channel(dc *c, int32_t p, int nd, tgc_dtype dt)
{
    tgc_attrs a = {.ni = nd};
    for (int d = 0; d < nd; d++)
        a.shape.dims[d] = d == 1 ? -1 : 1;
    return gb_op(c, TGC_OP_RESHAPE, (int32_t[]){cast(c, p, dt)}, 1, &a);
}

/* (1 - momentum) running + momentum stat, the next value of a module's running statistic,
 * computed in the compute dtype as interp's kernel does in double, then rounded to the
 * buffer's dtype. The arithmetic is on [1, C, 1, ...] (the buffer viewed so), the shape of
 * the statistics, so it joins their kernel as per-channel values. */
static int32_t new_running(dc *c, int32_t running, int32_t stat, double momentum, tgc_dtype ct)
{
    const tgc_vinfo *rv = tgc_rw_type(c->rw, running);
    tgc_attrs flat = {.ni = 1};
    flat.shape.dims[0] = -1;
    tgc_attrs keep = tgc_attrs_of(TGC_OP_MUL_SCALAR), take = keep;
    keep.scalar.value = 1.0 - momentum;
    take.scalar.value = momentum;
    int32_t r = per_channel(c, running, tgc_rw_type(c->rw, stat)->ndim, ct);
    int32_t old = gb_op(c, TGC_OP_MUL_SCALAR, &r, 1, &keep);
    int32_t add = gb_op(c, TGC_OP_MUL_SCALAR, &stat, 1, &take);
    int32_t v = cast(c, gb_op(c, TGC_OP_ADD, (int32_t[]){old, add}, 2, NULL), rv->dtype);
    return gb_op(c, TGC_OP_RESHAPE, &v, 1, &flat);
}

/* batch_norm with batch statistics (training; or eval without running statistics), as the
 * ops its backward recomputes them with (tgc_gr_bn_stats: mean, mean of the squared
 * deviations, eps, rsqrt; CSE makes them one), so forward, statistics, ReLU and backward fuse
 * into a few kernels: xhat = (x - mean) rstd, y = xhat [* weight] [+ bias]. In training the
 * running statistics (module buffers, graph inputs) are assigned (1 - m) r + m s with the
 * unbiased variance (sum of squared deviations over count - 1; var with correction 1 where the
 * count is symbolic), as interp's kernel updates them. Eager ops (symbolic sizes) and compiled
 * variants (constant sizes) build the same arithmetic, so they give the same numbers. Kept
 * whole (its own kernel) where a running statistic is not a graph input. */
static int32_t batch_norm_batch_stats(dc *c, const tgc_node *nd, const int32_t *in)
{
    const tgc_attrs *at = &nd->attrs;
    const int64_t bits = at->batch_norm.has;
    const int training = at->batch_norm.training != 0;
    const tgc_vinfo *xv = tgc_rw_type(c->rw, in[0]);
    int64_t mask = 0, count = 1;
    for (int d = 0; d < xv->ndim; d++)
        if (d != 1) {
            mask |= (int64_t)1 << d;
            count = count < 0 || !TGC_SDIM_IS_CONST(xv->shape[d]) ? -1 : count * xv->shape[d];
        }
    int k = 1, rm = -1, rv = -1, w = -1, b = -1;
    if (bits & TGC_BN_HAS_STATS) {
        rm = in[k++];
        rv = in[k++];
        if (c->rw->next.nodes[rm].op != TGC_OP_INPUT || c->rw->next.nodes[rv].op != TGC_OP_INPUT)
            return -2;
    }
    if (bits & TGC_BN_HAS_WEIGHT)
        w = in[k++];
    if (bits & TGC_BN_HAS_BIAS)
        b = in[k++];
    if (k != nd->n_in || xv->ndim < 2 || count == 0 || count == 1)
        return -2;
    const tgc_dtype ct = compute_dtype(nd->out.dtype);
    int32_t x = cast(c, in[0], ct);
    tgc_attrs mean = {.ni = 2}, eps = tgc_attrs_of(TGC_OP_ADD_SCALAR);
    mean.reduce.mask = mask;
    mean.reduce.keepdim = 1;
    eps.scalar.value = at->batch_norm.eps;
    int32_t m = gb_op(c, TGC_OP_MEAN, &x, 1, &mean);
    int32_t d = gb_op(c, TGC_OP_SUB, (int32_t[]){x, m}, 2, NULL);
    int32_t sq = gb_op(c, TGC_OP_MUL, (int32_t[]){d, d}, 2, NULL);
    int32_t var = gb_op(c, TGC_OP_MEAN, &sq, 1, &mean);
    int32_t rstd =
        gb_op(c, TGC_OP_RSQRT, (int32_t[]){gb_op(c, TGC_OP_ADD_SCALAR, &var, 1, &eps)}, 1, NULL);
    int32_t y = gb_op(c, TGC_OP_MUL, (int32_t[]){d, rstd}, 2, NULL);
    if (w >= 0)
        y = gb_op(c, TGC_OP_MUL, (int32_t[]){y, per_channel(c, w, xv->ndim, ct)}, 2, NULL);
    if (b >= 0)
        y = gb_op(c, TGC_OP_ADD, (int32_t[]){y, per_channel(c, b, xv->ndim, ct)}, 2, NULL);
    if (y >= 0 && training && rm >= 0) {
        int32_t unbiased;
        if (count > 0) {
            tgc_attrs sum = mean, div = tgc_attrs_of(TGC_OP_DIV_SCALAR);
            div.scalar.value = (double)(count - 1);
            unbiased = gb_op(c, TGC_OP_DIV_SCALAR, (int32_t[]){gb_op(c, TGC_OP_SUM, &sq, 1, &sum)},
                             1, &div);
        } else {
            tgc_attrs va = {.ni = 3};
            va.reduce.mask = mask;
            va.reduce.keepdim = 1;
            va.reduce.correction = 1;
            unbiased = gb_op(c, TGC_OP_VAR, &x, 1, &va);
        }
        /* both values before either assignment, so both join the statistics' kernel */
        const double mom = at->batch_norm.momentum;
        int32_t nm = new_running(c, rm, m, mom, ct);
        int32_t nv = new_running(c, rv, unbiased, mom, ct);
        if (nm < 0 || nv < 0 ||
            tgc_rw_emit(c->rw, TGC_OP_ASSIGN, (int32_t[]){rm, nm}, 2, NULL) < 0 ||
            tgc_rw_emit(c->rw, TGC_OP_ASSIGN, (int32_t[]){rv, nv}, 2, NULL) < 0)
            return -1;
    }
    return cast(c, y, nd->out.dtype);
}

/* dx of conv2d(x, w) at stride 1, one group: the same sums as a convolution of dy with each
 * kernel flipped and the channel dims swapped, wt[c][o][r][s] = w[o][c][KH-1-r][KW-1-s], at
 * padding dil (K - 1) - pad: dx[c][h] = sum over (o, r) of dy[o][h + pad - dil r] w[o][c][r].
 * Kernel sizes must be constants (the padding is an attribute); a padding past dil (K - 1)
 * (taps that read only padding) keeps the node. */
static int32_t conv_grad_input_as_conv(dc *c, const tgc_attrs *at, int32_t dy, int32_t wid)
{
    const tgc_conv2d_grad_input_attrs *a = &at->conv2d_grad_input;
    const tgc_vinfo *w = tgc_rw_type(c->rw, wid);
    if (a->stride_h != 1 || a->stride_w != 1 || a->groups != 1 || w->ndim != 4 ||
        !TGC_SDIM_IS_CONST(w->shape[2]) || !TGC_SDIM_IS_CONST(w->shape[3]))
        return -2;
    const int64_t kh = w->shape[2], kw = w->shape[3]; /* constants are their values */
    const int64_t ph = a->dil_h * (kh - 1) - a->pad_h, pw = a->dil_w * (kw - 1) - a->pad_w;
    if (kh < 1 || kw < 1 || ph < 0 || pw < 0)
        return -2;
    tgc_attrs pa = tgc_attrs_of(TGC_OP_PERMUTE), fa = tgc_attrs_of(TGC_OP_FLIP),
              ca = tgc_attrs_of(TGC_OP_CONV2D);
    pa.ni = 4;
    pa.perm.perm[0] = 1;
    pa.perm.perm[1] = 0;
    pa.perm.perm[2] = 2;
    pa.perm.perm[3] = 3;
    fa.flip.mask = (1 << 2) | (1 << 3);
    ca.conv2d.stride_h = ca.conv2d.stride_w = 1;
    ca.conv2d.pad_h = ph;
    ca.conv2d.pad_w = pw;
    ca.conv2d.dil_h = a->dil_h;
    ca.conv2d.dil_w = a->dil_w;
    ca.conv2d.groups = 1;
    int32_t wt = gb_op(c, TGC_OP_FLIP, (int32_t[]){gb_op(c, TGC_OP_PERMUTE, &wid, 1, &pa)}, 1, &fa);
    return gb_op(c, TGC_OP_CONV2D, (int32_t[]){dy, wt}, 2, &ca);
}

/* ---- convolutions over their live taps ---- */

/* The live-tap runs of a conv node (ir/conv_taps.h) when its sizes are constants: 1 when
 * some axis trims. */
static int live_taps(const tgc_node *nd, tgc_sdim h, tgc_sdim w, tgc_sdim kh, tgc_sdim kw,
                     tgc_conv_taps *t)
{
    return TGC_SDIM_IS_CONST(h) && TGC_SDIM_IS_CONST(w) && TGC_SDIM_IS_CONST(kh) &&
           TGC_SDIM_IS_CONST(kw) && tgc_conv_trim(&nd->attrs, h, w, kh, kw, t);
}

/* w[:, :, the live rows, the live columns], a view */
static int32_t slice_taps(dc *c, int32_t w, const tgc_conv_taps *t)
{
    for (int ax = 0; ax < 2 && w >= 0; ax++) {
        tgc_attrs a = tgc_attrs_of(TGC_OP_SLICE);
        a.ni = 4;
        a.slice.dim = 2 + ax;
        a.slice.start = t->first[ax];
        a.slice.end = t->first[ax] + t->count[ax];
        a.slice.step = 1;
        w = gb_op(c, TGC_OP_SLICE, &w, 1, &a);
    }
    return w;
}

/* conv2d(x, w[, bias]) with dead taps: the same over the live ones (the sliced weights made
 * contiguous, as the templates read them). */
static int32_t conv_live(dc *c, const tgc_node *nd, const int32_t *in)
{
    const tgc_vinfo *x = tgc_rw_type(c->rw, in[0]), *w = tgc_rw_type(c->rw, in[1]);
    tgc_conv_taps t;
    if (x->ndim != 4 || w->ndim != 4 ||
        !live_taps(nd, x->shape[2], x->shape[3], w->shape[2], w->shape[3], &t))
        return -2;
    tgc_attrs a = nd->attrs, ca = tgc_attrs_of(TGC_OP_CONTIGUOUS);
    a.conv2d.pad_h = t.pad[0];
    a.conv2d.pad_w = t.pad[1];
    int32_t wt = gb_op(c, TGC_OP_CONTIGUOUS, (int32_t[]){slice_taps(c, in[1], &t)}, 1, &ca);
    return gb_op(c, TGC_OP_CONV2D, (int32_t[]){in[0], wt, nd->n_in > 2 ? in[2] : -1}, nd->n_in, &a);
}

/* conv2d_grad_weight(x, dy) with dead taps: the gradient of the live taps, zeros elsewhere. */
static int32_t conv_grad_weight_live(dc *c, const tgc_node *nd, const int32_t *in)
{
    const tgc_conv2d_grad_weight_attrs *at = &nd->attrs.conv2d_grad_weight;
    const tgc_vinfo *x = tgc_rw_type(c->rw, in[0]);
    tgc_conv_taps t;
    if (x->ndim != 4 || !live_taps(nd, x->shape[2], x->shape[3], at->kh, at->kw, &t))
        return -2;
    tgc_attrs a = nd->attrs, pa = tgc_attrs_of(TGC_OP_PAD);
    a.conv2d_grad_weight.pad_h = t.pad[0];
    a.conv2d_grad_weight.pad_w = t.pad[1];
    a.conv2d_grad_weight.kh = t.count[0];
    a.conv2d_grad_weight.kw = t.count[1];
    pa.pad.n_pairs = 2;
    pa.ni = 5;
    pa.pad.pads[0] = t.first[1]; /* the last dim first */
    pa.pad.pads[1] = at->kw - t.first[1] - t.count[1];
    pa.pad.pads[2] = t.first[0];
    pa.pad.pads[3] = at->kh - t.first[0] - t.count[0];
    pa.pad.value = 0.0;
    pa.nf = 1;
    int32_t gw = gb_op(c, TGC_OP_CONV2D_GRAD_WEIGHT, in, 2, &a);
    return gb_op(c, TGC_OP_PAD, &gw, 1, &pa);
}

/* conv2d_grad_input(dy, w): over the live taps when some are dead (the weights sliced), then
 * as a convolution where it is one (conv_grad_input_as_conv); -2 when neither applies. */
static int32_t conv_grad_input(dc *c, const tgc_node *nd, const int32_t *in, unsigned keep)
{
    tgc_attrs a = nd->attrs;
    int32_t w = in[1];
    const tgc_vinfo *wv = tgc_rw_type(c->rw, w);
    tgc_conv_taps t;
    int trimmed =
        !(keep & TGC_DECOMPOSE_KEEP_CONV_TAPS) && wv->ndim == 4 &&
        live_taps(nd, a.conv2d_grad_input.h, a.conv2d_grad_input.w, wv->shape[2], wv->shape[3], &t);
    if (trimmed) {
        a.conv2d_grad_input.pad_h = t.pad[0];
        a.conv2d_grad_input.pad_w = t.pad[1];
        w = slice_taps(c, w, &t);
    }
    int32_t v =
        keep & TGC_DECOMPOSE_KEEP_CONV_GRAD_INPUT ? -2 : conv_grad_input_as_conv(c, &a, in[0], w);
    if (v == -2 && trimmed)
        v = gb_op(c, TGC_OP_CONV2D_GRAD_INPUT, (int32_t[]){in[0], w}, 2, &a);
    return v;
}

/* The replacement of node nd (inputs already remapped), or -2 when it stays as it is. */
static int32_t decompose_node(dc *c, const tgc_node *nd, const int32_t *in, unsigned keep)
{
    if (nd->op == TGC_OP_BATCH_NORM &&
        (nd->attrs.batch_norm.training || !(nd->attrs.batch_norm.has & TGC_BN_HAS_STATS)))
        return keep & TGC_DECOMPOSE_KEEP_BATCH_NORM ? -2 : batch_norm_batch_stats(c, nd, in);
    if (nd->flags & TGC_NODE_MUTATES) /* it writes its inputs: left to its kernel */
        return -2;
    if (tgc_op_has_decomposition(nd->op))
        return tgc_op_decomposition(nd->op, &c->b, in, nd->n_in, &nd->attrs, nd->out.dtype);
    if (tgc_op_formula_decompose(nd->op) == TGC_FORMULA_DECOMPOSE_ACTIVATIONS)
        return keep & TGC_DECOMPOSE_KEEP_ACTIVATIONS
                   ? -2
                   : tgc_op_formula(nd->op, &c->b, in, nd->n_in, &nd->attrs, nd->out.dtype);
    switch (nd->op) {
    case TGC_OP_CROSS_ENTROPY:
        /* label smoothing masks ignored targets out of its extra term: kept whole */
        return nd->attrs.loss.label_smoothing == 0.0 ? cross_entropy(c, nd, in) : -2;
    case TGC_OP_VAR: return variance(c, nd, in[0]);
    case TGC_OP_CONV2D: return keep & TGC_DECOMPOSE_KEEP_CONV_TAPS ? -2 : conv_live(c, nd, in);
    case TGC_OP_CONV2D_GRAD_INPUT: return conv_grad_input(c, nd, in, keep);
    case TGC_OP_CONV2D_GRAD_WEIGHT:
        return keep & TGC_DECOMPOSE_KEEP_CONV_TAPS ? -2 : conv_grad_weight_live(c, nd, in);
    default: return -2;
    }
}

tgc_status tgc_pass_decompose(tgc_graph *g)
{
    return tgc_pass_decompose_opts(g, 0);
}

tgc_status tgc_pass_decompose_opts(tgc_graph *g, unsigned keep)
{
    tgc_rewriter rw;
    if (tgc_rw_begin(&rw, g) != TGC_OK)
        return rw.st;
    dc c = {&rw, {0}};
    c.b = (tgc_formula_builder){&c, gb_op, gb_const, gb_cast, gb_shape};
    for (int i = 0; i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        int32_t in[8];
        int32_t r = -2;
        int mark = rw.next.n_nodes;
        if (nd->n_in <= 8) {
            for (int k = 0; k < nd->n_in; k++)
                in[k] = tgc_rw_new(&rw, nd->in[k]);
            mark = rw.next.n_nodes;
            r = decompose_node(&c, nd, in, keep);
            /* the rewrite must reproduce the node's type exactly, or it is not used */
            if (r >= 0 && !tgc_vinfo_same(tgc_rw_type(&rw, r), &nd->out))
                r = -1;
            if (r < 0)
                tgc_rw_rollback(&rw, mark);
        }
        if (r >= 0) {
            /* the parts raise errors under the name of the op the user called */
            int16_t origin = nd->origin ? nd->origin : (int16_t)(nd->op + 1);
            for (int k = mark; k < rw.next.n_nodes; k++)
                if (!rw.next.nodes[k].origin)
                    rw.next.nodes[k].origin = origin;
            rw.map[i] = r;
            rw.changed = 1;
        } else {
            tgc_rw_copy(&rw, i);
        }
    }
    return tgc_rw_finish(&rw);
}
