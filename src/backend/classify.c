/* How a compiled backend runs each node (see classify.h). The op decides the class
 * (ops.def's DESC fusion column), the target the dtypes it has kernels for (kir_caps):
 * a node outside them is OPAQUE, which the backend runs natively (run_node) or on interp. */
#include "backend/classify.h"
#include "kir/lower.h"
#include "tensor/dtype.h"

static int in_set(uint32_t set, tgc_dtype dt)
{
    return (set >> dt) & 1u;
}

/* Pools: max / avg windows are window loads (the lowering divides by kh * kw, so
 * exclude_padding is OPAQUE), a global average pool to 1x1 is a reduction. */
static tgc_fuse_class classify_pool(const tgc_node *nd, tgc_dtype x, const kir_caps *caps)
{
    if (!in_set(caps->pool_dtypes, x))
        return TGC_FUSE_OPAQUE;
    if ((nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) &&
        !nd->attrs.pool.exclude_padding && nd->out.ndim >= 3)
        return TGC_FUSE_WINDOW;
    if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && nd->attrs.adaptive_pool.out_h == 1 &&
        nd->attrs.adaptive_pool.out_w == 1)
        return TGC_FUSE_REDUCE;
    return TGC_FUSE_OPAQUE;
}

/* A pad the loop kernels load (kir/lower.c): a float result (the pad value is a float
 * constant of the kernel) and at most KIR_MAX_GUARDS dims with a nonzero pad. */
static int pad_loadable(const tgc_node *nd)
{
    int padded = 0;
    for (int k = 0; k < nd->attrs.pad.n_pairs; k++)
        padded += nd->attrs.pad.pads[2 * k] != 0 || nd->attrs.pad.pads[2 * k + 1] != 0;
    return tgc_dtype_is_float(nd->out.dtype) && padded <= KIR_MAX_GUARDS;
}

tgc_fuse_class tgc_backend_classify(const tgc_graph *g, int32_t i, const kir_target *t)
{
    const tgc_node *nd = &g->nodes[i];
    tgc_op_fusion cls = tgc_op_fusion_class(nd->op);
    if (cls == TGC_OPF_FREE)
        return TGC_FUSE_FREE;
    if (nd->flags & TGC_NODE_MUTATES)
        return TGC_FUSE_OPAQUE;
    tgc_dtype out = nd->out.dtype, in[3] = {TGC_F32, TGC_F32, TGC_F32};
    if ((unsigned)out >= TGC_DTYPE_COUNT)
        return TGC_FUSE_OPAQUE;
    for (int k = 0; k < nd->n_in && k < 3; k++) {
        in[k] = g->nodes[nd->in[k]].out.dtype;
        if ((unsigned)in[k] >= TGC_DTYPE_COUNT)
            return TGC_FUSE_OPAQUE;
    }
    const kir_caps *caps = &t->caps;
    int ok;
    switch (cls) {
    case TGC_OPF_POINTWISE:
        ok = !caps->pointwise_ok || caps->pointwise_ok(nd->op, out, in, nd->n_in);
        return ok ? TGC_FUSE_POINTWISE : TGC_FUSE_OPAQUE;
    case TGC_OPF_COPY:
        /* flip reads its input's element at the reversed position, pad at a shifted one
         * (a guarded load, the pad value outside: floats, at most KIR_MAX_GUARDS padded
         * dims): loaded, as a window */
        if (!in_set(caps->copy_dtypes, out))
            return TGC_FUSE_OPAQUE;
        if (nd->op == TGC_OP_PAD)
            return pad_loadable(nd) ? TGC_FUSE_WINDOW : TGC_FUSE_OPAQUE;
        return nd->op == TGC_OP_FLIP ? TGC_FUSE_WINDOW : TGC_FUSE_POINTWISE;
    case TGC_OPF_REDUCE:
        ok = in_set(caps->reduce_dtypes, in[0]) && (!caps->reduce_keeps_dtype || out == in[0]);
        return ok ? TGC_FUSE_REDUCE : TGC_FUSE_OPAQUE;
    case TGC_OPF_POOL: return classify_pool(nd, in[0], caps);
    case TGC_OPF_TEMPLATE: return kir_template_ok(g, i, t) ? TGC_FUSE_TEMPLATE : TGC_FUSE_OPAQUE;
    case TGC_OPF_RANDOM:
        /* a draw is a pointwise value of its element's counter (dropout: of its input too);
         * the fuser keeps draws in graph order (fuse.c) */
        return in_set(caps->random_dtypes, out) ? TGC_FUSE_POINTWISE : TGC_FUSE_OPAQUE;
    case TGC_OPF_INDEX:
        return in_set(caps->index_dtypes, out) ? TGC_FUSE_POINTWISE : TGC_FUSE_OPAQUE;
    default: return TGC_FUSE_OPAQUE;
    }
}
