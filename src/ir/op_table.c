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

int tgc_op_mutates_inputs(tgc_op op, const tgc_attrs *a)
{
    return op == TGC_OP_BATCH_NORM && a->i[0] && (a->i[1] & TGC_BN_HAS_STATS);
}
