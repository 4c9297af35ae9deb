/* The op table, generated from ops.def. */
#include <assert.h>
#include <stddef.h>

#include "ir/op.h"

static const tgc_op_info op_infos[] = {
#define X(e, nm, mn, mx, kind) {nm, mn, mx, TGC_KIND_##kind},
#include "ops.def"
#undef X
};
static_assert(sizeof(op_infos) / sizeof(op_infos[0]) == TGC_OP_COUNT, "op table out of sync");

/* Every layout overlays the raw storage exactly: integer fields within i[], floats within
 * f[] (a layout with too many fields fails here). */
#define LAYOUT(name, ints, floats)                                                                 \
    static_assert(offsetof(tgc_##name##_attrs, _iend) < sizeof(int64_t) * TGC_MAX_IATTR,           \
                  "layout " #name ": too many integer fields");                                    \
    static_assert(offsetof(tgc_##name##_attrs, f_) == offsetof(tgc_attrs, f),                      \
                  "layout " #name ": floats misplaced");                                           \
    static_assert(offsetof(tgc_##name##_attrs, _fend) - offsetof(tgc_##name##_attrs, f_) <         \
                      sizeof(double) * TGC_MAX_FATTR,                                              \
                  "layout " #name ": too many float fields");                                      \
    static_assert(sizeof(tgc_##name##_attrs) == offsetof(tgc_attrs, ni),                           \
                  "layout " #name ": size differs from the raw words");
#include "ops.def"
#undef LAYOUT

typedef struct layout_info {
    const char *name;
    int ni, nf;
} layout_info;

enum {
#define LAYOUT(name, ints, floats) LAYOUT_##name,
#include "ops.def"
#undef LAYOUT
    LAYOUT_COUNT
};

static const layout_info layouts[] = {
#define LAYOUT(name, ints, floats)                                                                 \
    {#name, (int)(offsetof(tgc_##name##_attrs, _iend) / sizeof(int64_t)),                          \
     (int)((offsetof(tgc_##name##_attrs, _fend) - offsetof(tgc_##name##_attrs, f_)) /              \
           sizeof(double))},
#include "ops.def"
#undef LAYOUT
};
static_assert(sizeof(layouts) / sizeof(layouts[0]) == LAYOUT_COUNT, "layout table out of sync");

static const unsigned char op_layout[] = {
#define ATTRS(e, layout) [TGC_OP_##e] = LAYOUT_##layout,
#include "ops.def"
#undef ATTRS
};
static_assert(sizeof(op_layout) == TGC_OP_COUNT, "every op needs an ATTRS line");

/* ops.def's DESC columns ir/ knows (the shape rules are shape_infer_dispatch.c's table, the
 * gradient rules the frontend's). */
enum {
    DESC_COUNT = 0
#define DESC(e, fusion, dtype, shape, grad) +1
#include "ops.def"
#undef DESC
};
static_assert((int)DESC_COUNT == (int)TGC_OP_COUNT, "every op needs one DESC line");

static const unsigned char op_fusion[TGC_OP_COUNT] = {
#define DESC(e, fusion, dtype, shape, grad) [TGC_OP_##e] = TGC_OPF_##fusion,
#include "ops.def"
#undef DESC
};

static const unsigned char op_dtype_rule[TGC_OP_COUNT] = {
#define DESC(e, fusion, dtype, shape, grad) [TGC_OP_##e] = TGC_DTR_##dtype,
#include "ops.def"
#undef DESC
};

tgc_op_fusion tgc_op_fusion_class(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? (tgc_op_fusion)op_fusion[op] : TGC_OPF_OPAQUE;
}

tgc_dtype_rule tgc_op_dtype_rule(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? (tgc_dtype_rule)op_dtype_rule[op] : TGC_DTR_OWN;
}

const char *tgc_op_fusion_name(tgc_op_fusion f)
{
    static const char *const names[TGC_OPF_COUNT] = {
        "free", "pointwise", "copy", "reduce", "pool", "template", "random", "index", "opaque"};
    return (unsigned)f < TGC_OPF_COUNT ? names[f] : "?";
}

tgc_attrs tgc_attrs_of(tgc_op op)
{
    tgc_attrs a = {.ni = 0};
    if ((unsigned)op < TGC_OP_COUNT) {
        a.ni = layouts[op_layout[op]].ni;
        a.nf = layouts[op_layout[op]].nf;
    }
    return a;
}

const char *tgc_op_layout_name(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT ? layouts[op_layout[op]].name : "?";
}

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
        return a->batch_norm.training && (a->batch_norm.has & TGC_BN_HAS_STATS)
                   ? TGC_EFFECT_WRITES_INPUTS
                   : 0u;
    case TGC_OP_ASSIGN: return TGC_EFFECT_WRITES_INPUTS;
    case TGC_OP_DROPOUT:
    case TGC_OP_RAND: return TGC_EFFECT_RANDOM;
    case TGC_OP_SDPA: return a->sdpa.dropout_p != 0.0 ? TGC_EFFECT_RANDOM : 0u;
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
