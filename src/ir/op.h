/* Op identifiers, kinds and attributes, generated from ops.def. */
#ifndef TGC_IR_OP_H
#define TGC_IR_OP_H

#include <stdint.h>

#include "tgc/tensor.h"

typedef enum tgc_op_kind {
    TGC_KIND_SOURCE,
    TGC_KIND_BINARY,
    TGC_KIND_COMPARE,
    TGC_KIND_TERNARY,
    TGC_KIND_SCALAR,
    TGC_KIND_UNARY,
    TGC_KIND_REDUCE,
    TGC_KIND_NORM,
    TGC_KIND_VIEW,
    TGC_KIND_MOVE,
    TGC_KIND_INDEX,
    TGC_KIND_MATMUL,
    TGC_KIND_CONV,
    TGC_KIND_POOL,
    TGC_KIND_NN,
    TGC_KIND_RANDOM,
    TGC_KIND_CREATE,
    TGC_KIND_LOSS,
    TGC_KIND_ATTENTION,
    TGC_KIND_GRAD, /* backward ops: gradients of one forward op's input */
    TGC_KIND_COMM  /* collectives over a communicator of a process group */
} tgc_op_kind;

typedef enum tgc_op {
#define X(e, name, mn, mx, kind) TGC_OP_##e,
#include "ops.def"
#undef X
    TGC_OP_COUNT
} tgc_op;

typedef struct tgc_op_info {
    const char *name;
    int min_inputs, max_inputs; /* max -1: variadic */
    tgc_op_kind kind;
} tgc_op_info;

const tgc_op_info *tgc_op_info_of(tgc_op op);
const char *tgc_op_name(tgc_op op);
/* The libm base name ("exp", "log", "sqrt", "tanh", "erf") of a primitive unary math op
 * (ops.def's MATH_FN section: f64 calls name, f32 name + "f"); NULL for every other op. */
const char *tgc_op_math_fn(tgc_op op);

/* How a compiled backend may run an op (ops.def's DESC fusion column; the shared classifier,
 * backend/classify.c, narrows it by what the target computes natively). */
typedef enum tgc_op_fusion {
    TGC_OPF_FREE,      /* INPUT and views: no kernel */
    TGC_OPF_POINTWISE, /* a kernel-IR value */
    TGC_OPF_COPY,      /* contiguous: identity; flip: reversed; pad: shifted, pad value around */
    TGC_OPF_REDUCE,    /* sum / mean / max over a dim mask */
    TGC_OPF_POOL,      /* max / avg windows, global average pools (a reduction) */
    TGC_OPF_TEMPLATE,  /* matmul / linear / conv2d: the target's templates */
    TGC_OPF_RANDOM,    /* Philox draws (rand, dropout): KV_RAND values */
    TGC_OPF_INDEX,     /* positions (arange): KV_INDEX values, computed where read */
    TGC_OPF_OPAQUE,    /* a native kernel of the backend, or interp */
    TGC_OPF_COUNT
} tgc_op_fusion;

/* How the result's dtype follows from the operands (ops.def's DESC dtype column). */
typedef enum tgc_dtype_rule {
    TGC_DTR_OWN,           /* the shape rule decides */
    TGC_DTR_SAME,          /* operand 0's */
    TGC_DTR_PROMOTE,       /* tgc_promote over every operand */
    TGC_DTR_PROMOTE_FLOAT, /* the same, then the float dtype of it (true division) */
    TGC_DTR_BRANCHES,      /* tgc_promote of operands 1 and 2 (where) */
    TGC_DTR_BOOL,
    TGC_DTR_I64,
    TGC_DTR_FLOAT, /* operand 0's float dtype (f32 for integers and bool) */
    TGC_DTR_SUM,   /* operand 0's, i64 for bool and i32 */
    TGC_DTR_ATTR,  /* attrs.dtype (cast, rand, arange) */
    TGC_DTR_COUNT
} tgc_dtype_rule;

tgc_op_fusion tgc_op_fusion_class(tgc_op op);    /* TGC_OPF_OPAQUE for an unknown op */
tgc_dtype_rule tgc_op_dtype_rule(tgc_op op);     /* TGC_DTR_OWN for an unknown op */
const char *tgc_op_fusion_name(tgc_op_fusion f); /* "pointwise", ... */

#define TGC_MAX_IATTR 20
#define TGC_MAX_FATTR 4

/* One struct per attribute layout of ops.def (LAYOUT lines): tgc_conv2d_attrs, ...; each
 * overlays tgc_attrs' storage, its integer fields over i[] and its floats over f[], in the
 * order ops.def gives (the trailing _iend / _fend words only count the fields). */
#define I(n)     int64_t n;
#define IA(n, k) int64_t n[k];
#define F(n)     double n;
#define LAYOUT(name, ints, floats)                                                                 \
    typedef struct tgc_##name##_attrs {                                                            \
        union {                                                                                    \
            int64_t i_[TGC_MAX_IATTR];                                                             \
            struct {                                                                               \
                ints int64_t _iend;                                                                \
            };                                                                                     \
        };                                                                                         \
        union {                                                                                    \
            double f_[TGC_MAX_FATTR];                                                              \
            struct {                                                                               \
                floats double _fend;                                                               \
            };                                                                                     \
        };                                                                                         \
    } tgc_##name##_attrs;
#include "ops.def"
#undef LAYOUT

/* Attributes of one node: the raw words (i[0..ni), f[0..nf): what hashing, equality and
 * the canonical text walk) and, over the same storage, one named view per layout
 * (`a.conv2d.groups`, `a.reduce.mask`: ATTRS(op, layout) in ops.def says which an op has). */
typedef struct tgc_attrs {
    union {
        struct {
            int64_t i[TGC_MAX_IATTR];
            double f[TGC_MAX_FATTR];
        };
#define LAYOUT(name, ints, floats) tgc_##name##_attrs name;
#include "ops.def"
#undef LAYOUT
    };
    int ni, nf;
    tgc_dtype dtype; /* CAST target, RAND and ARANGE dtype */
} tgc_attrs;
#undef I
#undef IA
#undef F

/* Zeroed attributes of op's layout with ni and nf set to its fixed fields (a layout with an
 * array, as RESHAPE's dims, counts it whole: set ni to the entries used). */
tgc_attrs tgc_attrs_of(tgc_op op);
/* The layout name of op's attributes ("conv2d", "none"). */
const char *tgc_op_layout_name(tgc_op op);

/* INPUT bindings: where a graph input's tensor comes from at call time. */
typedef enum tgc_bind_kind {
    TGC_BIND_ARG = 0,  /* in[i] of tgc_call */
    TGC_BIND_PARAM,    /* i-th tensor of the module tree (params and buffers, pre-order) */
    TGC_BIND_CAPTURED, /* a tensor from outside the function, kept by the variant, guarded */
    TGC_BIND_CONST,    /* a tensor created during tracing, kept by the variant */
    TGC_BIND_FOLDED,   /* g->consts[i]: a constant owned by the graph (folded, or imported) */
    TGC_BIND_GRAD      /* the .grad of the i-th tensor of the module tree (autograd) */
} tgc_bind_kind;

enum { TGC_BN_HAS_STATS = 1, TGC_BN_HAS_WEIGHT = 2, TGC_BN_HAS_BIAS = 4 };
enum { TGC_LN_HAS_WEIGHT = 1, TGC_LN_HAS_BIAS = 2 };

/* Effects of a node beyond computing its output from its inputs: what every pass that
 * removes, merges, folds, hoists or reorders nodes must respect (one query, tgc_op_effects).
 *   TGC_EFFECT_WRITES_INPUTS: the kernel writes one of its inputs in place (batch_norm in
 *     training writes running_mean / running_var). Never removed; a node reading a value it
 *     writes must stay after it (and a reader before it, before it).
 *   TGC_EFFECT_RANDOM: the kernel draws from the process Philox stream (rand, dropout,
 *     attention with dropout_p > 0), advancing it. Never removed (a later draw would see other
 *     bits than eager), merged with another draw, folded, or reordered against another draw.
 *   TGC_EFFECT_COLLECTIVE: the node communicates with the other ranks of a process group
 *     (ALL_REDUCE, COMM_WAIT). Never removed, merged, folded, or reordered against another
 *     collective: every rank must issue the same collectives in the same order. */
enum {
    TGC_EFFECT_WRITES_INPUTS = 1u << 0,
    TGC_EFFECT_RANDOM = 1u << 1,
    TGC_EFFECT_COLLECTIVE = 1u << 2
};
unsigned tgc_op_effects(tgc_op op, const struct tgc_attrs *a);
/* Ops whose kernel writes one of its inputs: tgc_op_effects & TGC_EFFECT_WRITES_INPUTS. */
int tgc_op_mutates_inputs(tgc_op op, const struct tgc_attrs *a);
/* 1 when such an op writes its operand k in place (batch_norm: running_mean, running_var). */
int tgc_op_writes_operand(tgc_op op, const struct tgc_attrs *a, int k);

#endif
