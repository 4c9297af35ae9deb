/* Decomposition of composite ops into pointwise and reduction primitives, so the fuser
 * only meets simple ops.
 *
 * The arithmetic follows interp's kernels step by step (the same subtraction of the max
 * before exp, the same two-pass variance, eps added to the variance before rsqrt), but
 * rounds each intermediate to the compute dtype where interp keeps doubles: f32 for
 * f32/f16/bf16 and integer inputs (16-bit inputs are cast up once and the result cast
 * back once), f64 for f64. A node whose rewrite does not infer (an empty reduced dim, a
 * reshape that cannot be expressed) is kept as it is. */
#include <math.h>
#include <string.h>

#include "ir/shape_infer.h"
#include "passes/passes.h"
#include "support/error.h"

/* interp's constants (k_pointwise.c) */
static const double DC_SQRT1_2 = 0.70710678118654752440;   /* 1/sqrt(2) */
static const double DC_SQRT_2_PI = 0.79788456080286535588; /* sqrt(2/pi) */

typedef struct dc {
    tgc_rewriter *rw;
} dc;

static tgc_dtype compute_dtype(tgc_dtype dt)
{
    return dt == TGC_F64 ? TGC_F64 : TGC_F32;
}

static tgc_dtype dtype_of(dc *c, int32_t v)
{
    return v >= 0 ? tgc_rw_type(c->rw, v)->dtype : TGC_F32;
}

static int ndim_of(dc *c, int32_t v)
{
    return v >= 0 ? tgc_rw_type(c->rw, v)->ndim : 0;
}

static int32_t unary(dc *c, tgc_op op, int32_t x)
{
    return x < 0 ? -1 : tgc_rw_emit(c->rw, op, &x, 1, NULL);
}

static int32_t binary(dc *c, tgc_op op, int32_t x, int32_t y)
{
    int32_t in[2] = {x, y};
    return x < 0 || y < 0 ? -1 : tgc_rw_emit(c->rw, op, in, 2, NULL);
}

static int32_t scalar(dc *c, tgc_op op, int32_t x, double s)
{
    tgc_attrs a = {.nf = 1};
    a.f[0] = s;
    return x < 0 ? -1 : tgc_rw_emit(c->rw, op, &x, 1, &a);
}

static int32_t cast(dc *c, int32_t x, tgc_dtype dt)
{
    if (x < 0 || dtype_of(c, x) == dt)
        return x;
    tgc_attrs a = {.dtype = dt};
    return tgc_rw_emit(c->rw, TGC_OP_CAST, &x, 1, &a);
}

static int32_t reduce(dc *c, tgc_op op, int32_t x, uint64_t mask, int keep)
{
    tgc_attrs a = {.ni = 2};
    a.i[0] = (int64_t)mask;
    a.i[1] = keep;
    return x < 0 ? -1 : tgc_rw_emit(c->rw, op, &x, 1, &a);
}

/* The mask of dim d; a 0-d tensor's dim 0 reduces nothing. */
static uint64_t dim_mask(int ndim, int64_t d)
{
    return ndim ? (uint64_t)1 << d : 0;
}

/* x - max(x) along the mask, kept for broadcasting. */
static int32_t shifted(dc *c, int32_t x, uint64_t mask)
{
    return binary(c, TGC_OP_SUB, x, reduce(c, TGC_OP_MAX, x, mask, 1));
}

static int32_t softmax(dc *c, int32_t x, int64_t d, int log_form)
{
    tgc_dtype out = tgc_dtype_is_float(dtype_of(c, x)) ? dtype_of(c, x) : TGC_F32;
    x = cast(c, x, compute_dtype(out));
    uint64_t mask = dim_mask(ndim_of(c, x), d);
    int32_t s = shifted(c, x, mask);
    int32_t e = unary(c, TGC_OP_EXP, s);
    int32_t z = reduce(c, TGC_OP_SUM, e, mask, 1);
    int32_t r =
        log_form ? binary(c, TGC_OP_SUB, s, unary(c, TGC_OP_LOG, z)) : binary(c, TGC_OP_DIV, e, z);
    return cast(c, r, out);
}

static int32_t layer_norm(dc *c, const tgc_node *nd, const int32_t *in)
{
    int32_t x = in[0];
    tgc_dtype out = nd->out.dtype, ct = compute_dtype(out);
    int n = ndim_of(c, x), n_norm = (int)nd->attrs.i[0], k = 1;
    uint64_t mask = 0;
    for (int d = n - n_norm; d < n; d++)
        mask |= (uint64_t)1 << d;
    x = cast(c, x, ct);
    int32_t centered = binary(c, TGC_OP_SUB, x, reduce(c, TGC_OP_MEAN, x, mask, 1));
    int32_t var = reduce(c, TGC_OP_MEAN, binary(c, TGC_OP_MUL, centered, centered), mask, 1);
    int32_t rstd = unary(c, TGC_OP_RSQRT, scalar(c, TGC_OP_ADD_SCALAR, var, nd->attrs.f[0]));
    int32_t y = binary(c, TGC_OP_MUL, centered, rstd);
    /* weight and bias have the normalized shape: they broadcast over the leading dims */
    if (nd->attrs.i[1] & TGC_LN_HAS_WEIGHT)
        y = binary(c, TGC_OP_MUL, y, cast(c, in[k++], ct));
    if (nd->attrs.i[1] & TGC_LN_HAS_BIAS)
        y = binary(c, TGC_OP_ADD, y, cast(c, in[k], ct));
    return cast(c, y, out);
}

static int32_t activation(dc *c, tgc_op op, int32_t x, tgc_dtype out)
{
    x = cast(c, x, compute_dtype(out));
    int32_t y;
    if (op == TGC_OP_SILU) {
        y = binary(c, TGC_OP_MUL, x, unary(c, TGC_OP_SIGMOID, x));
    } else {
        int32_t inner;
        if (op == TGC_OP_GELU) {
            inner = unary(c, TGC_OP_ERF, scalar(c, TGC_OP_MUL_SCALAR, x, DC_SQRT1_2));
        } else { /* tanh form: tanh(sqrt(2/pi) * (x + 0.044715 x^3)) */
            int32_t cube = binary(c, TGC_OP_MUL, binary(c, TGC_OP_MUL, x, x), x);
            int32_t poly = binary(c, TGC_OP_ADD, x, scalar(c, TGC_OP_MUL_SCALAR, cube, 0.044715));
            inner = unary(c, TGC_OP_TANH, scalar(c, TGC_OP_MUL_SCALAR, poly, DC_SQRT_2_PI));
        }
        int32_t half = scalar(c, TGC_OP_MUL_SCALAR, x, 0.5);
        y = binary(c, TGC_OP_MUL, half, scalar(c, TGC_OP_ADD_SCALAR, inner, 1.0));
    }
    return cast(c, y, out);
}

/* [C] -> [1, C, 1, ...] for an x of rank n (-1 keeps C symbolic if it is). */
static int32_t per_channel(dc *c, int32_t v, int n)
{
    tgc_attrs a = {.ni = n};
    for (int d = 0; d < n; d++)
        a.i[d] = d == 1 ? -1 : 1;
    return v < 0 ? -1 : tgc_rw_emit(c->rw, TGC_OP_RESHAPE, &v, 1, &a);
}

/* Eval batch_norm as x * scale + shift, with scale = weight * rsqrt(var + eps) and
 * shift = bias - mean * scale computed on the [C] vectors. */
static int32_t batch_norm(dc *c, const tgc_node *nd, const int32_t *in)
{
    tgc_dtype out = nd->out.dtype, ct = compute_dtype(out);
    int64_t has = nd->attrs.i[1];
    int k = 3, n = ndim_of(c, in[0]);
    int32_t mean = cast(c, in[1], ct), var = cast(c, in[2], ct);
    int32_t scale = unary(c, TGC_OP_RSQRT, scalar(c, TGC_OP_ADD_SCALAR, var, nd->attrs.f[1]));
    if (has & TGC_BN_HAS_WEIGHT)
        scale = binary(c, TGC_OP_MUL, scale, cast(c, in[k++], ct));
    int32_t shift = binary(c, TGC_OP_MUL, mean, scale);
    if (has & TGC_BN_HAS_BIAS)
        shift = binary(c, TGC_OP_SUB, cast(c, in[k], ct), shift);
    else
        shift = unary(c, TGC_OP_NEG, shift);
    int32_t x = cast(c, in[0], ct);
    int32_t y = binary(c, TGC_OP_MUL, x, per_channel(c, scale, n));
    y = binary(c, TGC_OP_ADD, y, per_channel(c, shift, n));
    return cast(c, y, out);
}

static int32_t cross_entropy(dc *c, const tgc_node *nd, const int32_t *in)
{
    int n = ndim_of(c, in[0]);
    int32_t logp = softmax(c, cast(c, in[0], compute_dtype(nd->out.dtype)), n == 1 ? 0 : 1, 1);
    int32_t ops[2] = {logp, in[1]};
    tgc_attrs a = {.ni = 2};
    a.i[0] = nd->attrs.i[0];
    a.i[1] = nd->attrs.i[1];
    int32_t l = logp < 0 ? -1 : tgc_rw_emit(c->rw, TGC_OP_NLL_LOSS, ops, 2, &a);
    return cast(c, l, nd->out.dtype);
}

/* Two passes as in interp: mean, then the mean-free sum of squares over the count less the
 * correction. Only for constant reduced dims (the count is a scalar attribute). */
static int32_t variance(dc *c, const tgc_node *nd, int32_t x)
{
    const tgc_vinfo *xv = tgc_rw_type(c->rw, x);
    uint64_t mask = (uint64_t)nd->attrs.i[0];
    int64_t count = 1;
    for (int d = 0; d < xv->ndim; d++)
        if (mask >> d & 1) {
            if (!TGC_SDIM_IS_CONST(xv->shape[d]))
                return -2;
            count *= xv->shape[d];
        }
    tgc_dtype out = nd->out.dtype;
    x = cast(c, x, compute_dtype(out));
    int32_t d = binary(c, TGC_OP_SUB, x, reduce(c, TGC_OP_MEAN, x, mask, 1));
    int32_t s = reduce(c, TGC_OP_SUM, binary(c, TGC_OP_MUL, d, d), mask, (int)nd->attrs.i[1]);
    double denom = fmax(0.0, (double)count - (double)nd->attrs.i[2]);
    return cast(c, scalar(c, TGC_OP_DIV_SCALAR, s, denom), out);
}

/* The replacement of node nd (inputs already remapped), or -2 when it stays as it is. */
static int32_t decompose_node(dc *c, const tgc_node *nd, const int32_t *in, unsigned keep)
{
    switch (nd->op) {
    case TGC_OP_SOFTMAX:
    case TGC_OP_LOG_SOFTMAX: return softmax(c, in[0], nd->attrs.i[0], nd->op == TGC_OP_LOG_SOFTMAX);
    case TGC_OP_LAYER_NORM: return layer_norm(c, nd, in);
    case TGC_OP_GELU:
    case TGC_OP_GELU_TANH:
    case TGC_OP_SILU:
        if (keep & TGC_DECOMPOSE_KEEP_ACTIVATIONS)
            return -2;
        return activation(c, nd->op, in[0], nd->out.dtype);
    case TGC_OP_BATCH_NORM:
        /* training writes the running stats: left to its kernel */
        if (nd->attrs.i[0] || !(nd->attrs.i[1] & TGC_BN_HAS_STATS) ||
            (nd->flags & TGC_NODE_MUTATES))
            return -2;
        return batch_norm(c, nd, in);
    case TGC_OP_CROSS_ENTROPY:
        /* label smoothing masks ignored targets out of its extra term: kept whole */
        return nd->attrs.f[0] == 0.0 ? cross_entropy(c, nd, in) : -2;
    case TGC_OP_VAR: return variance(c, nd, in[0]);
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
    dc c = {&rw};
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
