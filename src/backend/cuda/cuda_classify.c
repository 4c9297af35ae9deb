/* CUDA fusion classification and preparation (see cuda_classify.h). The rewrites are the
 * LLVM backend's (llvm_prepare.c), repeated here because that file is only built with
 * LLVM. */
#include <assert.h>
#include <stdlib.h>

#include "backend/cuda/cuda_classify.h"
#include "backend/cuda/cuda_target.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "support/error.h"
#include "tensor/dtype.h"

/* What the CUDA backend does with each op: one entry per op of ops.def, so adding an op
 * without deciding fails to compile (an undefined PLAN_ macro or the static_assert). */
typedef enum {
    CP_FREE,      /* INPUT and views: no kernel */
    CP_POINTWISE, /* a kernel-IR value the renderer computes for every dtype */
    CP_COPY,      /* contiguous: an identity copy (any dtype) */
    CP_REDUCE,    /* sum / mean / max, every dtype (floats sum in double, ints in i64) */
    CP_POOL,      /* max / avg windows (guarded loads), global average pools (a reduction) */
    CP_TEMPLATE,  /* matmul / linear / conv2d: cuda_gemm.h */
    CP_RANDOM,    /* Philox draws (rand, dropout): KV_RAND values */
    CP_OPAQUE     /* a native kernel of cuda_ops.h; softmax, log_softmax, var, layer_norm and
                   * batch_norm in eval arrive decomposed by the passes */
} cuda_plan;

#define PLAN_INPUT               CP_FREE
#define PLAN_ADD                 CP_POINTWISE
#define PLAN_SUB                 CP_POINTWISE
#define PLAN_MUL                 CP_POINTWISE
#define PLAN_DIV                 CP_POINTWISE
#define PLAN_POW                 CP_POINTWISE
#define PLAN_MAXIMUM             CP_POINTWISE
#define PLAN_MINIMUM             CP_POINTWISE
#define PLAN_EQ                  CP_POINTWISE
#define PLAN_NE                  CP_POINTWISE
#define PLAN_LT                  CP_POINTWISE
#define PLAN_LE                  CP_POINTWISE
#define PLAN_GT                  CP_POINTWISE
#define PLAN_GE                  CP_POINTWISE
#define PLAN_WHERE               CP_POINTWISE
#define PLAN_ADD_SCALAR          CP_POINTWISE
#define PLAN_SUB_SCALAR          CP_POINTWISE
#define PLAN_MUL_SCALAR          CP_POINTWISE
#define PLAN_DIV_SCALAR          CP_POINTWISE
#define PLAN_POW_SCALAR          CP_POINTWISE
#define PLAN_CLAMP               CP_POINTWISE
#define PLAN_NEG                 CP_POINTWISE
#define PLAN_ABS                 CP_POINTWISE
#define PLAN_EXP                 CP_POINTWISE
#define PLAN_LOG                 CP_POINTWISE
#define PLAN_SQRT                CP_POINTWISE
#define PLAN_RSQRT               CP_POINTWISE
#define PLAN_TANH                CP_POINTWISE
#define PLAN_SIGMOID             CP_POINTWISE
#define PLAN_RELU                CP_POINTWISE
#define PLAN_GELU                CP_POINTWISE
#define PLAN_GELU_TANH           CP_POINTWISE
#define PLAN_SILU                CP_POINTWISE
#define PLAN_ERF                 CP_POINTWISE
#define PLAN_CAST                CP_POINTWISE
#define PLAN_SUM                 CP_REDUCE
#define PLAN_MEAN                CP_REDUCE
#define PLAN_MAX                 CP_REDUCE
#define PLAN_VAR                 CP_OPAQUE
#define PLAN_ARGMAX              CP_OPAQUE
#define PLAN_SOFTMAX             CP_OPAQUE
#define PLAN_LOG_SOFTMAX         CP_OPAQUE
#define PLAN_RESHAPE             CP_FREE
#define PLAN_PERMUTE             CP_FREE
#define PLAN_EXPAND              CP_FREE
#define PLAN_SQUEEZE             CP_FREE
#define PLAN_UNSQUEEZE           CP_FREE
#define PLAN_SLICE               CP_FREE
#define PLAN_FLATTEN             CP_FREE
#define PLAN_CONTIGUOUS          CP_COPY
#define PLAN_CAT                 CP_OPAQUE
#define PLAN_STACK               CP_OPAQUE
#define PLAN_PAD                 CP_OPAQUE
#define PLAN_EMBEDDING           CP_OPAQUE
#define PLAN_GATHER              CP_OPAQUE
#define PLAN_INDEX_SELECT        CP_OPAQUE
#define PLAN_MATMUL              CP_TEMPLATE
#define PLAN_LINEAR              CP_TEMPLATE
#define PLAN_CONV2D              CP_TEMPLATE
#define PLAN_MAX_POOL2D          CP_POOL
#define PLAN_AVG_POOL2D          CP_POOL
#define PLAN_ADAPTIVE_AVG_POOL2D CP_POOL
#define PLAN_BATCH_NORM          CP_OPAQUE
#define PLAN_LAYER_NORM          CP_OPAQUE
#define PLAN_DROPOUT             CP_RANDOM
#define PLAN_RAND                CP_RANDOM
#define PLAN_ARANGE              CP_OPAQUE
#define PLAN_CROSS_ENTROPY       CP_OPAQUE
#define PLAN_NLL_LOSS            CP_OPAQUE
#define PLAN_SDPA                CP_OPAQUE

static const unsigned char plans[] = {
#define X(e, nm, mn, mx, kind) PLAN_##e,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof(plans) / sizeof(plans[0]) == TGC_OP_COUNT, "CUDA op plans out of sync");

static int known_dtype(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT;
}

static tgc_fuse_class classify(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    cuda_plan plan = (unsigned)nd->op < TGC_OP_COUNT ? (cuda_plan)plans[nd->op] : CP_OPAQUE;
    if (plan == CP_FREE)
        return TGC_FUSE_FREE;
    if (nd->flags & TGC_NODE_MUTATES)
        return TGC_FUSE_OPAQUE;
    if (!known_dtype(nd->out.dtype))
        return TGC_FUSE_OPAQUE;
    tgc_dtype in[3] = {TGC_F32, TGC_F32, TGC_F32};
    for (int k = 0; k < nd->n_in && k < 3; k++) {
        in[k] = g->nodes[nd->in[k]].out.dtype;
        if (!known_dtype(in[k]))
            return TGC_FUSE_OPAQUE;
    }
    switch (plan) {
    case CP_POINTWISE:
    case CP_COPY: return TGC_FUSE_POINTWISE;
    case CP_REDUCE: return TGC_FUSE_REDUCE;
    case CP_POOL:
        /* the window lowering divides by kh*kw: exclude_padding runs natively (cuda_ops) */
        if ((nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) && !nd->attrs.i[6] &&
            tgc_dtype_is_float(in[0]) && nd->out.ndim >= 3)
            return TGC_FUSE_WINDOW;
        if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && nd->attrs.i[0] == 1 && nd->attrs.i[1] == 1 &&
            tgc_dtype_is_float(in[0]))
            return TGC_FUSE_REDUCE;
        return TGC_FUSE_OPAQUE;
    case CP_TEMPLATE:
        return kir_template_ok(g, i, tgc_cuda_kir_target()) ? TGC_FUSE_TEMPLATE : TGC_FUSE_OPAQUE;
    case CP_RANDOM:
        /* a draw is a pointwise value of its element's counter (dropout: of its input too) */
        return tgc_dtype_is_float(nd->out.dtype) ? TGC_FUSE_POINTWISE : TGC_FUSE_OPAQUE;
    default: return TGC_FUSE_OPAQUE;
    }
}

static const tgc_fuse_hooks hooks = {classify, kir_epilogue_operand_ok};

const tgc_fuse_hooks *tgc_cuda_fuse_hooks(void)
{
    return &hooks;
}

unsigned tgc_cuda_decompose_keep(void)
{
    return TGC_DECOMPOSE_KEEP_ACTIVATIONS;
}

/* ---- preparation (as llvm_prepare.c) ---- */

/* A view that fails on its own: its input's view is affine, its own is not. */
static int view_not_affine(const tgc_graph *g, int32_t i)
{
    tgc_view v;
    const tgc_node *nd = &g->nodes[i];
    return tgc_is_view_op(nd->op) && !tgc_view_of(g, i, &v) && tgc_view_of(g, nd->in[0], &v);
}

/* The same view over a contiguous copy of its input. */
static int32_t emit_view_of_copy(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    int32_t src = tgc_rw_new(rw, nd->in[0]);
    tgc_attrs none = {0};
    int32_t cont = tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &src, 1, &none);
    return cont >= 0 ? tgc_rw_emit(rw, nd->op, &cont, 1, &nd->attrs) : -1;
}

static tgc_status materialize_views(tgc_graph *g)
{
    int n_views = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n_views += tgc_is_view_op(g->nodes[i].op);
    for (int round = 0; round < n_views; round++) {
        int n = 0;
        tgc_status st = tgc_rw_nodes(g, view_not_affine, emit_view_of_copy, &n);
        if (st != TGC_OK)
            return st;
        if (!n)
            break;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        tgc_view v;
        if (tgc_is_view_op(g->nodes[i].op) && !tgc_view_of(g, i, &v))
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc cuda: view %%%d (%s) is still not affine after copies", i,
                                 tgc_op_name(g->nodes[i].op));
    }
    return TGC_OK;
}

/* A matmul, linear or conv whose operands are views the template cannot stride through. */
static int operands_unstridable(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    tgc_op_kind kind = tgc_op_info_of(nd->op)->kind;
    const kir_target *t = tgc_cuda_kir_target();
    kir_tpl_kind tpl = kind == TGC_KIND_CONV ? KIR_TPL_CONV : KIR_TPL_GEMM;
    if ((kind != TGC_KIND_MATMUL && kind != TGC_KIND_CONV) ||
        !kir_target_has_template(t, tpl, nd->out.dtype) || kir_template_ok(g, i, t))
        return 0;
    for (int k = 0; k < 2 && k < nd->n_in; k++)
        if (tgc_is_view_op(g->nodes[nd->in[k]].op) && g->nodes[nd->in[k]].out.ndim >= 2)
            return 1;
    return 0;
}

static int32_t emit_on_copies(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    int32_t in[3];
    tgc_attrs none = {0};
    for (int k = 0; k < nd->n_in; k++) {
        in[k] = tgc_rw_new(rw, nd->in[k]);
        if (k < 2 && tgc_is_view_op(g->nodes[nd->in[k]].op))
            in[k] = tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &in[k], 1, &none);
    }
    return tgc_rw_emit(rw, nd->op, in, nd->n_in, &nd->attrs);
}

/* Parameter- and constant-only nodes first (order kept otherwise; pinned nodes stay). */
static tgc_status hoist_input_only(tgc_graph *g)
{
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    uint8_t *only = calloc(n, 1);
    uint8_t *pinned = tgc_pass_order_pinned(g);
    if (!only || !pinned) {
        free(only);
        free(pinned);
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    }
    int moved = 0, seen_other = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        int ok = !pinned[i] && !(nd->op == TGC_OP_INPUT && nd->attrs.i[0] == TGC_BIND_ARG);
        for (int k = 0; k < nd->n_in && ok; k++)
            ok = only[nd->in[k]];
        only[i] = (uint8_t)ok;
        if (ok && seen_other)
            moved = 1;
        if (!ok)
            seen_other = 1;
    }
    tgc_status st = TGC_OK;
    tgc_rewriter rw;
    if (moved && (st = tgc_rw_begin(&rw, g)) == TGC_OK) {
        for (int pass = 0; pass < 2; pass++)
            for (int32_t i = 0; i < g->n_nodes && rw.st == TGC_OK; i++)
                if (only[i] == (pass == 0))
                    tgc_rw_copy(&rw, i);
        st = tgc_rw_finish(&rw);
    }
    free(only);
    free(pinned);
    return st;
}

tgc_status tgc_cuda_prepare(tgc_graph *g)
{
    tgc_status st = materialize_views(g);
    if (st == TGC_OK)
        st = tgc_rw_nodes(g, operands_unstridable, emit_on_copies, NULL);
    if (st == TGC_OK)
        st = hoist_input_only(g);
    return st;
}
