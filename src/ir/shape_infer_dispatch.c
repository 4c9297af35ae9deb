/* tgc_infer (ir/shape_infer.h): checks that a node is well formed and runs the rule of its
 * op's kind (the table is generated from ops.def). Above every rule file (shape_infer*.c),
 * which share the helpers of shape_infer.c and never call back here. */
#include <assert.h>

#include "ir/shape_infer_impl.h"

typedef tgc_status (*si_rule)(si_ctx *c);

static const si_rule rules[] = {
#define X(e, nm, mn, mx, kind) si_rule_##kind,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof(rules) / sizeof(rules[0]) == TGC_OP_COUNT, "shape rules out of sync");

/* A malformed node (the caller's bug, not the user's): arity, ranks, dtypes in range. */
static tgc_status check_node(si_ctx *c)
{
    const tgc_op_info *info = tgc_op_info_of(c->op);
    if (!info)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_infer: unknown op %d", (int)c->op);
    if (!c->a || !c->out || (c->n_in > 0 && !c->in) || c->n_in < info->min_inputs ||
        (info->max_inputs >= 0 && c->n_in > info->max_inputs))
        return si_fail(c, TGC_ERR_INTERNAL, "malformed node (%d inputs)", c->n_in);
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k].ndim < 0 || c->in[k].ndim > TGC_MAX_DIMS ||
            (unsigned)c->in[k].dtype >= TGC_DTYPE_COUNT)
            return si_fail(c, TGC_ERR_INTERNAL, "input %d has rank %d, dtype %d", k, c->in[k].ndim,
                           (int)c->in[k].dtype);
    return TGC_OK;
}

tgc_status tgc_infer(tgc_op op, const tgc_vinfo *in, int n_in, const tgc_attrs *a, tgc_symtab *syms,
                     tgc_vinfo *out)
{
    si_ctx c = {.op = op, .in = in, .n_in = n_in, .a = a, .syms = syms, .out = out};
    tgc_status s = check_node(&c);
    return s ? s : rules[op](&c);
}
