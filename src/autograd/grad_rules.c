/* The backward rule of every op of ops.def. The table is generated from the grad column of
 * ops.def's DESC lines: a rule token (tgc_grad_rule_<token>, run in a scope of its own), or
 * none when the result never requires a gradient: sources and creation
 * (input, rand, arange), comparisons and argmax (bool and i64 results), the backward ops
 * themselves (no gradients of gradients), assignment and collectives. A cast's rule applies
 * to float targets only (tgc_grad_rule_for). */

#include "autograd/grad_rules_impl.h"
#include "support/error.h"
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

/* The table entry of an op without a gradient: tgc_grad_rule_for gives NULL for it, so it
 * never runs. */
tgc_status tgc_grad_rule_none(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    (void)gy;
    (void)gin;
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_backward: %s has no gradient", tgc_op_name(c->op));
}

/* ops.def's DESC lines name each op's rule (their grad column); op_table.c checks that every op
 * has one. */
static const tgc_grad_rule rules[TGC_OP_COUNT] = {
#define DESC(e, fusion, dtype, shape, grad) [TGC_OP_##e] = tgc_grad_rule_##grad,
#include "ir/ops.def"
#undef DESC
};

/* What tgc_grad_rule_for hands out: the op's rule (the context names the op), in a scope. */
static tgc_status scoped(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    if ((unsigned)c->op >= TGC_OP_COUNT)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_backward: unknown op %d", (int)c->op);
    return run_scoped(rules[c->op], c, gy, gin);
}

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
    return rules[op] == tgc_grad_rule_none ? NULL : scoped;
}
