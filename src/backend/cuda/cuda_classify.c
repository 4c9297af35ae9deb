/* CUDA fusion classification and preparation (see cuda_classify.h). The rewrites are the
 * LLVM backend's (llvm_prepare.c), repeated here because that file is only built with
 * LLVM. */
#include <assert.h>
#include <stdlib.h>

#include "backend/cuda/cuda_classify.h"
#include "backend/cuda/cuda_target.h"
#include "backend/prepare.h"
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
#define PLAN_ASSIGN              CP_OPAQUE /* the executor writes dst (exec.c) */
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
/* backward ops: native kernels of cuda_ops.c (conv grads: cuda_conv_grad.h) */
#define PLAN_CONV2D_GRAD_INPUT        CP_OPAQUE
#define PLAN_CONV2D_GRAD_WEIGHT       CP_OPAQUE
#define PLAN_MAX_POOL2D_GRAD          CP_OPAQUE
#define PLAN_AVG_POOL2D_GRAD          CP_OPAQUE
#define PLAN_ADAPTIVE_AVG_POOL2D_GRAD CP_OPAQUE
#define PLAN_EMBEDDING_GRAD           CP_OPAQUE
#define PLAN_GATHER_GRAD              CP_OPAQUE
#define PLAN_INDEX_SELECT_GRAD        CP_OPAQUE
#define PLAN_ALL_REDUCE               CP_OPAQUE /* runtime/comm.c on the comm stream */
#define PLAN_COMM_WAIT                CP_OPAQUE

/* sin, cos, logsumexp, rms_norm, group_norm (one line per op, for ops.def's columns): the math
 * ops render by their MATH_FN name, the others arrive decomposed by the passes (no native
 * kernel: tgc_cuda_op_supported refuses them, interp runs what did not decompose) */
#define PLAN_SIN        CP_POINTWISE
#define PLAN_COS        CP_POINTWISE
#define PLAN_LOGSUMEXP  CP_OPAQUE
#define PLAN_RMS_NORM   CP_OPAQUE
#define PLAN_GROUP_NORM CP_OPAQUE

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
        if ((nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) &&
            !nd->attrs.pool.exclude_padding && tgc_dtype_is_float(in[0]) && nd->out.ndim >= 3)
            return TGC_FUSE_WINDOW;
        if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && nd->attrs.adaptive_pool.out_h == 1 &&
            nd->attrs.adaptive_pool.out_w == 1 && tgc_dtype_is_float(in[0]))
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

tgc_status tgc_cuda_prepare(tgc_graph *g)
{
    tgc_status st = tgc_prepare_views(g, "cuda");
    if (st == TGC_OK)
        st = tgc_prepare_template_operands(g, tgc_cuda_kir_target());
    if (st == TGC_OK)
        st = tgc_prepare_hoist_input_only(g, "cuda");
    return st;
}
