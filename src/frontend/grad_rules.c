/* The backward rule of every op of ops.def (scoped_for). The table is generated from
 * the op list: every op needs a GRAD_<ENUM> entry here (a rule, or NULL when its result
 * never requires a gradient), so an op added to ops.def without one fails to compile.
 *
 * NULL: sources and creation (input, rand, arange), comparisons and argmax (bool and i64
 * results), the backward ops themselves (no gradients of gradients), and assignment. */
#include <assert.h>

#include "frontend/grad_rules_impl.h"
#include "tensor/dtype.h"

/* Every rule runs in a scope of its own: its intermediate tensors are freed when it returns
 * and only its gradients move out, so an eager backward holds the gradients in flight, not
 * every temporary of every rule until the caller's scope closes. A gradient that is one of
 * the tensors the rule was handed (gy, an input, a saved tensor) already lives outside. */
static int handed_in(const tgc_grad_ctx *c, const tgc_tensor *gy, const tgc_tensor *t)
{
    if (t == gy || t == c->out)
        return 1;
    for (int k = 0; k < c->n_in; k++)
        if (t == c->in[k])
            return 1;
    for (int k = 0; k < c->n_saved; k++)
        if (t == c->saved[k])
            return 1;
    return 0;
}

static tgc_status run_scoped(tgc_grad_rule rule, const tgc_grad_ctx *c, tgc_tensor *gy,
                             tgc_tensor **gin)
{
    tgc_scope_push();
    tgc_status st = rule(c, gy, gin);
    for (int k = 0; k < c->n_in && st == TGC_OK; k++) {
        int first = 1;
        for (int j = 0; j < k && first; j++)
            first = gin[j] != gin[k];
        if (gin[k] && first && !handed_in(c, gy, gin[k]))
            st = tgc_scope_keep(gin[k]);
    }
    if (st != TGC_OK)
        for (int k = 0; k < c->n_in; k++)
            gin[k] = NULL;
    tgc_scope_pop();
    return st;
}

#define SCOPED(rule)                                                                               \
    static tgc_status scoped_##rule(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)       \
    {                                                                                              \
        return run_scoped(tgc_grad_rule_##rule, c, gy, gin);                                       \
    }
SCOPED(binary)
SCOPED(where)
SCOPED(scalar)
SCOPED(unary)
SCOPED(reduce)
SCOPED(softmax)
SCOPED(view)
SCOPED(move)
SCOPED(index)
SCOPED(matmul)
SCOPED(conv)
SCOPED(pool)
SCOPED(batch_norm)
SCOPED(layer_norm)
SCOPED(rms_norm)
SCOPED(group_norm)
SCOPED(dropout)
SCOPED(loss)
SCOPED(sdpa)

#define GRAD_INPUT               NULL
#define GRAD_ADD                 scoped_binary
#define GRAD_SUB                 scoped_binary
#define GRAD_MUL                 scoped_binary
#define GRAD_DIV                 scoped_binary
#define GRAD_POW                 scoped_binary
#define GRAD_MAXIMUM             scoped_binary
#define GRAD_MINIMUM             scoped_binary
#define GRAD_EQ                  NULL
#define GRAD_NE                  NULL
#define GRAD_LT                  NULL
#define GRAD_LE                  NULL
#define GRAD_GT                  NULL
#define GRAD_GE                  NULL
#define GRAD_WHERE               scoped_where
#define GRAD_ADD_SCALAR          scoped_scalar
#define GRAD_SUB_SCALAR          scoped_scalar
#define GRAD_MUL_SCALAR          scoped_scalar
#define GRAD_DIV_SCALAR          scoped_scalar
#define GRAD_POW_SCALAR          scoped_scalar
#define GRAD_CLAMP               scoped_scalar
#define GRAD_NEG                 scoped_unary
#define GRAD_ABS                 scoped_unary
#define GRAD_EXP                 scoped_unary
#define GRAD_LOG                 scoped_unary
#define GRAD_SQRT                scoped_unary
#define GRAD_RSQRT               scoped_unary
#define GRAD_TANH                scoped_unary
#define GRAD_SIGMOID             scoped_unary
#define GRAD_RELU                scoped_unary
#define GRAD_GELU                scoped_unary
#define GRAD_GELU_TANH           scoped_unary
#define GRAD_SILU                scoped_unary
#define GRAD_ERF                 scoped_unary
#define GRAD_CAST                scoped_unary /* float targets only: see below */
#define GRAD_SUM                 scoped_reduce
#define GRAD_MEAN                scoped_reduce
#define GRAD_MAX                 scoped_reduce
#define GRAD_VAR                 scoped_reduce
#define GRAD_ARGMAX              NULL
#define GRAD_SOFTMAX             scoped_softmax
#define GRAD_LOG_SOFTMAX         scoped_softmax
#define GRAD_RESHAPE             scoped_view
#define GRAD_PERMUTE             scoped_view
#define GRAD_EXPAND              scoped_view
#define GRAD_SQUEEZE             scoped_view
#define GRAD_UNSQUEEZE           scoped_view
#define GRAD_SLICE               scoped_view
#define GRAD_FLATTEN             scoped_view
#define GRAD_CONTIGUOUS          scoped_view
#define GRAD_CAT                 scoped_move
#define GRAD_STACK               scoped_move
#define GRAD_PAD                 scoped_move
#define GRAD_EMBEDDING           scoped_index
#define GRAD_GATHER              scoped_index
#define GRAD_INDEX_SELECT        scoped_index
#define GRAD_MATMUL              scoped_matmul
#define GRAD_LINEAR              scoped_matmul
#define GRAD_CONV2D              scoped_conv
#define GRAD_MAX_POOL2D          scoped_pool
#define GRAD_AVG_POOL2D          scoped_pool
#define GRAD_ADAPTIVE_AVG_POOL2D scoped_pool
#define GRAD_BATCH_NORM          scoped_batch_norm
#define GRAD_LAYER_NORM          scoped_layer_norm
#define GRAD_DROPOUT             scoped_dropout
#define GRAD_RAND                NULL
#define GRAD_ARANGE              NULL
#define GRAD_CROSS_ENTROPY       scoped_loss
#define GRAD_NLL_LOSS            scoped_loss
#define GRAD_SDPA                scoped_sdpa
/* the backward ops (no second derivatives) and the in-place assignment */
#define GRAD_CONV2D_GRAD_INPUT        NULL
#define GRAD_CONV2D_GRAD_WEIGHT       NULL
#define GRAD_MAX_POOL2D_GRAD          NULL
#define GRAD_AVG_POOL2D_GRAD          NULL
#define GRAD_ADAPTIVE_AVG_POOL2D_GRAD NULL
#define GRAD_EMBEDDING_GRAD           NULL
#define GRAD_GATHER_GRAD              NULL
#define GRAD_INDEX_SELECT_GRAD        NULL
#define GRAD_ASSIGN                   NULL
#define GRAD_ALL_REDUCE               NULL /* collectives carry no gradient */
#define GRAD_COMM_WAIT                NULL

/* sin, cos, logsumexp, rms_norm, group_norm (one line per op, for ops.def's columns) */
#define GRAD_SIN        scoped_unary
#define GRAD_COS        scoped_unary
#define GRAD_LOGSUMEXP  scoped_reduce
#define GRAD_RMS_NORM   scoped_rms_norm
#define GRAD_GROUP_NORM scoped_group_norm

static const tgc_grad_rule rules[] = {
#define X(e, name, mn, mx, kind) GRAD_##e,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof rules / sizeof rules[0] == TGC_OP_COUNT,
              "grad_rules.c: every op of ops.def needs a GRAD_ entry");

int tgc_grad_rule_needs_out(tgc_op op, const tgc_attrs *a)
{
    (void)a;
    switch (op) {
    case TGC_OP_EXP:
    case TGC_OP_SQRT:
    case TGC_OP_RSQRT:
    case TGC_OP_TANH:
    case TGC_OP_SIGMOID:
    case TGC_OP_POW:
    case TGC_OP_MAX:
    case TGC_OP_SOFTMAX:
    case TGC_OP_LOG_SOFTMAX: return 1;
    default: return 0;
    }
}

tgc_grad_rule tgc_grad_rule_for(tgc_op op, const tgc_attrs *a)
{
    if ((unsigned)op >= TGC_OP_COUNT)
        return NULL;
    /* a cast to an integer or bool dtype has no gradient */
    if (op == TGC_OP_CAST && (!a || !tgc_dtype_is_float(a->dtype)))
        return NULL;
    return rules[op];
}
