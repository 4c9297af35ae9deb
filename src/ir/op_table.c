/* The op table, generated from ops.def. */
#include <assert.h>

#include "ir/op.h"

static const tgc_op_info op_infos[] = {
#define X(e, nm, mn, mx, kind) {nm, mn, mx, TGC_KIND_##kind},
#include "ops.def"
#undef X
};
static_assert(sizeof(op_infos) / sizeof(op_infos[0]) == TGC_OP_COUNT, "op table out of sync");

const tgc_op_info *tgc_op_info_of(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? &op_infos[op] : 0;
}

const char *tgc_op_name(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? op_infos[op].name : "?";
}

static const char *const math_fns[TGC_OP_COUNT] = {
#define X(e, nm, mn, mx, kind)
#define MATH_FN(e, name) [TGC_OP_##e] = name,
#include "ops.def"
#undef MATH_FN
#undef X
};

const char *tgc_op_math_fn(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? math_fns[op] : NULL;
}

/* The effects of ops.def's entries (documented there beside each op). */
unsigned tgc_op_effects(tgc_op op, const tgc_attrs *a)
{
    switch (op) {
    case TGC_OP_BATCH_NORM:
        return a->i[0] && (a->i[1] & TGC_BN_HAS_STATS) ? TGC_EFFECT_WRITES_INPUTS : 0u;
    case TGC_OP_ASSIGN: return TGC_EFFECT_WRITES_INPUTS;
    case TGC_OP_DROPOUT:
    case TGC_OP_RAND: return TGC_EFFECT_RANDOM;
    case TGC_OP_SDPA: return a->f[0] != 0.0 ? TGC_EFFECT_RANDOM : 0u;
    case TGC_OP_ALL_REDUCE:
    case TGC_OP_COMM_WAIT: return TGC_EFFECT_COLLECTIVE;
    default: return 0u;
    }
}

int tgc_op_mutates_inputs(tgc_op op, const tgc_attrs *a)
{
    return (tgc_op_effects(op, a) & TGC_EFFECT_WRITES_INPUTS) != 0;
}

int tgc_op_writes_operand(tgc_op op, const tgc_attrs *a, int k)
{
    if (!tgc_op_mutates_inputs(op, a))
        return 0;
    switch (op) {
    case TGC_OP_BATCH_NORM: return k == 1 || k == 2; /* running_mean, running_var */
    case TGC_OP_ASSIGN: return k == 0;
    default: return 1; /* an op added to tgc_op_effects without its operands: all of them */
    }
}
