/* Decomposition of composite ops into pointwise and reduction primitives, so the fuser
 * only meets simple ops.
 *
 * The decompositions are ops.def's (DECOMPOSITION entries: softmax, log_softmax,
 * layer_norm, batch_norm in eval; FORMULA entries marked ACTIVATIONS: gelu, gelu_tanh,
 * silu, unless the backend keeps them), built here as graph nodes through ir/formula.h; a
 * decomposed op inside a decomposition is decomposed too. Cross entropy (log_softmax, then
 * nll_loss) and var (two passes over constant reduced dims) are written below.
 *
 * The arithmetic follows interp's kernels step by step (the same subtraction of the max
 * before exp, the same two-pass variance, eps added to the variance before rsqrt), but
 * rounds each intermediate to the compute dtype where interp keeps doubles: f32 for
 * f32/f16/bf16 and integer inputs (16-bit inputs are cast up once and the result cast
 * back once), f64 for f64. A node whose rewrite does not infer (an empty reduced dim, a
 * reshape that cannot be expressed) is kept as it is. */
#include <math.h>
#include <string.h>

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

/* The replacement of node nd (inputs already remapped), or -2 when it stays as it is. */
static int32_t decompose_node(dc *c, const tgc_node *nd, const int32_t *in, unsigned keep)
{
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
