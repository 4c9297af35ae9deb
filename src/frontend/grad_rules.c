/* Placeholder rule table for the autograd core's own tests: add, sub, mul, sum, relu,
 * mul_scalar (no broadcasting). Replaced by the full table (grad_rules*.c). */
#include "frontend/autograd.h"
#include "tgc/ops.h"

static tgc_status rule_add(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    gin[0] = c->needs[0] ? gy : NULL;
    gin[1] = c->needs[1] ? (c->op == TGC_OP_SUB ? tgc_neg(gy) : gy) : NULL;
    return TGC_OK;
}

static tgc_status rule_mul(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    gin[0] = c->needs[0] ? tgc_mul(gy, c->in[1]) : NULL;
    gin[1] = c->needs[1] ? tgc_mul(gy, c->in[0]) : NULL;
    return TGC_OK;
}

static tgc_status rule_mul_scalar(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    gin[0] = tgc_mul_scalar(gy, c->a->f[0]);
    return TGC_OK;
}

static tgc_status rule_sum(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    gin[0] = tgc_expand_as(tgc_reshape_as(gy, tgc_sum(c->in[0], NULL, 0, 1)), c->in[0]);
    return TGC_OK;
}

static tgc_status rule_relu(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    gin[0] = tgc_where(tgc_gt(c->out, tgc_mul_scalar(c->out, 0)), gy, tgc_mul_scalar(gy, 0));
    return TGC_OK;
}

tgc_grad_rule tgc_grad_rule_for(tgc_op op, const tgc_attrs *a)
{
    (void)a;
    switch (op) {
    case TGC_OP_ADD:
    case TGC_OP_SUB: return rule_add;
    case TGC_OP_MUL: return rule_mul;
    case TGC_OP_MUL_SCALAR: return rule_mul_scalar;
    case TGC_OP_SUM: return rule_sum;
    case TGC_OP_RELU: return rule_relu;
    default: return NULL;
    }
}
