/* The backward rule of every op of ops.def (tgc_grad_rule_for). The table is generated from
 * the op list: every op needs a GRAD_<ENUM> entry here (a rule, or NULL when its result
 * never requires a gradient), so an op added to ops.def without one fails to compile.
 *
 * NULL: sources and creation (input, rand, arange), comparisons and argmax (bool and i64
 * results), the backward ops themselves (no gradients of gradients), and assignment. */
#include <assert.h>

#include "frontend/grad_rules_impl.h"
#include "tensor/dtype.h"

#define GRAD_INPUT               NULL
#define GRAD_ADD                 tgc_grad_rule_binary
#define GRAD_SUB                 tgc_grad_rule_binary
#define GRAD_MUL                 tgc_grad_rule_binary
#define GRAD_DIV                 tgc_grad_rule_binary
#define GRAD_POW                 tgc_grad_rule_binary
#define GRAD_MAXIMUM             tgc_grad_rule_binary
#define GRAD_MINIMUM             tgc_grad_rule_binary
#define GRAD_EQ                  NULL
#define GRAD_NE                  NULL
#define GRAD_LT                  NULL
#define GRAD_LE                  NULL
#define GRAD_GT                  NULL
#define GRAD_GE                  NULL
#define GRAD_WHERE               tgc_grad_rule_where
#define GRAD_ADD_SCALAR          tgc_grad_rule_scalar
#define GRAD_SUB_SCALAR          tgc_grad_rule_scalar
#define GRAD_MUL_SCALAR          tgc_grad_rule_scalar
#define GRAD_DIV_SCALAR          tgc_grad_rule_scalar
#define GRAD_POW_SCALAR          tgc_grad_rule_scalar
#define GRAD_CLAMP               tgc_grad_rule_scalar
#define GRAD_NEG                 tgc_grad_rule_unary
#define GRAD_ABS                 tgc_grad_rule_unary
#define GRAD_EXP                 tgc_grad_rule_unary
#define GRAD_LOG                 tgc_grad_rule_unary
#define GRAD_SQRT                tgc_grad_rule_unary
#define GRAD_RSQRT               tgc_grad_rule_unary
#define GRAD_TANH                tgc_grad_rule_unary
#define GRAD_SIGMOID             tgc_grad_rule_unary
#define GRAD_RELU                tgc_grad_rule_unary
#define GRAD_GELU                tgc_grad_rule_unary
#define GRAD_GELU_TANH           tgc_grad_rule_unary
#define GRAD_SILU                tgc_grad_rule_unary
#define GRAD_ERF                 tgc_grad_rule_unary
#define GRAD_CAST                tgc_grad_rule_unary /* float targets only: see below */
#define GRAD_SUM                 tgc_grad_rule_reduce
#define GRAD_MEAN                tgc_grad_rule_reduce
#define GRAD_MAX                 tgc_grad_rule_reduce
#define GRAD_VAR                 tgc_grad_rule_reduce
#define GRAD_ARGMAX              NULL
#define GRAD_SOFTMAX             tgc_grad_rule_softmax
#define GRAD_LOG_SOFTMAX         tgc_grad_rule_softmax
#define GRAD_RESHAPE             tgc_grad_rule_view
#define GRAD_PERMUTE             tgc_grad_rule_view
#define GRAD_EXPAND              tgc_grad_rule_view
#define GRAD_SQUEEZE             tgc_grad_rule_view
#define GRAD_UNSQUEEZE           tgc_grad_rule_view
#define GRAD_SLICE               tgc_grad_rule_view
#define GRAD_FLATTEN             tgc_grad_rule_view
#define GRAD_CONTIGUOUS          tgc_grad_rule_view
#define GRAD_CAT                 tgc_grad_rule_move
#define GRAD_STACK               tgc_grad_rule_move
#define GRAD_PAD                 tgc_grad_rule_move
#define GRAD_EMBEDDING           tgc_grad_rule_index
#define GRAD_GATHER              tgc_grad_rule_index
#define GRAD_INDEX_SELECT        tgc_grad_rule_index
#define GRAD_MATMUL              tgc_grad_rule_matmul
#define GRAD_LINEAR              tgc_grad_rule_matmul
#define GRAD_CONV2D              tgc_grad_rule_conv
#define GRAD_MAX_POOL2D          tgc_grad_rule_pool
#define GRAD_AVG_POOL2D          tgc_grad_rule_pool
#define GRAD_ADAPTIVE_AVG_POOL2D tgc_grad_rule_pool
#define GRAD_BATCH_NORM          tgc_grad_rule_batch_norm
#define GRAD_LAYER_NORM          tgc_grad_rule_layer_norm
#define GRAD_DROPOUT             tgc_grad_rule_dropout
#define GRAD_RAND                NULL
#define GRAD_ARANGE              NULL
#define GRAD_CROSS_ENTROPY       tgc_grad_rule_loss
#define GRAD_NLL_LOSS            tgc_grad_rule_loss
#define GRAD_SDPA                tgc_grad_rule_sdpa
/* the backward ops (no second derivatives) and the in-place assignment */
#define GRAD_CONV2D_GRAD_INPUT         NULL
#define GRAD_CONV2D_GRAD_WEIGHT        NULL
#define GRAD_MAX_POOL2D_GRAD           NULL
#define GRAD_AVG_POOL2D_GRAD           NULL
#define GRAD_ADAPTIVE_AVG_POOL2D_GRAD  NULL
#define GRAD_EMBEDDING_GRAD            NULL
#define GRAD_GATHER_GRAD               NULL
#define GRAD_INDEX_SELECT_GRAD         NULL
#define GRAD_ASSIGN                    NULL

static const tgc_grad_rule rules[] = {
#define X(e, name, mn, mx, kind) GRAD_##e,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof rules / sizeof rules[0] == TGC_OP_COUNT,
              "grad_rules.c: every op of ops.def needs a GRAD_ entry");

tgc_grad_rule tgc_grad_rule_for(tgc_op op, const tgc_attrs *a)
{
    if ((unsigned)op >= TGC_OP_COUNT)
        return NULL;
    /* a cast to an integer or bool dtype has no gradient */
    if (op == TGC_OP_CAST && (!a || !tgc_dtype_is_float(a->dtype)))
        return NULL;
    return rules[op];
}
