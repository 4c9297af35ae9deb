/* tgc_infer (ir/shape_infer.h): checks that a node is well formed and runs its op's shape rule
 * (the table is generated from ops.def's DESC lines). Above every rule file (shape_infer*.c),
 * which share the helpers of shape_infer.c and never call back here. */

#include "ir/shape_infer_impl.h"

typedef tgc_status (*si_rule)(si_ctx *c);

/* Every op has a DESC line (op_table.c counts them), so every entry is set. */
static const si_rule rules[TGC_OP_COUNT] = {
#define DESC(e, fusion, dtype, shape, grad) [TGC_OP_##e] = si_rule_##shape,
#include "ir/ops.def"
#undef DESC
};

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
    if (s != TGC_OK)
        return s;
    tgc_dtype want = si_dtype(&c); /* before the rule: out may be one of the inputs */
    s = rules[op](&c);
    /* ops.def's dtype column is a checked fact: a rule that disagrees is the op's bug */
    if (s == TGC_OK && tgc_op_dtype_rule(op) != TGC_DTR_OWN && out->dtype != want)
        return si_fail(&c, TGC_ERR_INTERNAL, "the shape rule gives %s, ops.def's dtype rule %s",
                       tgc_dtype_name(out->dtype), tgc_dtype_name(want));
    return s;
}
