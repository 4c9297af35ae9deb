/* Formulas and decompositions of ops, written once in ops.def and evaluated here through a
 * builder of the caller's values.
 *
 * An expression (tgc_fexpr, written with ir/formula_dsl.h's macros) is a tree over the
 * op's operands: ops of ops.def with their attributes (literals, or the op's own attributes:
 * a scalar, a dim, the last n dims as a reduction mask), constants, casts to the compute
 * dtype or the result's, reshapes of a per-channel vector against another value, and
 * choices by the op's attributes. tgc_formula_eval walks it once, operands before their
 * users and left to right, and hands every op, constant and cast to the builder: one over
 * kernel-IR values (kir/lower.c), one over graph nodes (passes/decompose.c), one over the
 * steps of a native kernel (backend/cuda/cuda_ops.c), or one that only checks support.
 * Within one evaluation the same op over the same values with the same attributes is built
 * once, so an expression may repeat a subexpression instead of naming it.
 *
 * Results: a value id of the builder (>= 0); -2 when the op has no formula (or its
 * REQUIRE fails: the op stays as it is); -1 when the builder failed (its error is set, or
 * TGC_ERR_INTERNAL names what the expression asked that the builder cannot give). */
#ifndef TGC_IR_FORMULA_H
#define TGC_IR_FORMULA_H

#include "ir/op.h"
#include "ir/sym.h"

/* What a builder gives the evaluator: value ids are the builder's own (>= 0; -1: failed). */
typedef struct tgc_formula_builder {
    void *ctx;
    /* op of ops.def over values in[0..n_in) with attributes a (scalars in f[], a reduction's
     * mask and keepdim in i[0..1], a reshape's target in i[]); the builder infers the type */
    int32_t (*op)(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a);
    /* the constant v of dtype dt */
    int32_t (*constant)(void *ctx, double v, tgc_dtype dt);
    /* x converted to dt (x itself when it already is of dt) */
    int32_t (*cast)(void *ctx, int32_t x, tgc_dtype dt);
    /* x's rank, its dims in shape[] when not NULL; -1 when the builder's values have no
     * shape (kernel-IR values are scalars): then expressions that need one fail */
    int (*shape)(void *ctx, int32_t x, tgc_sdim *shape);
} tgc_formula_builder;

/* ---- expressions (build them with ir/formula_dsl.h) ---- */

typedef enum tgc_fx_kind {
    TGC_FX_INPUT,       /* operand index */
    TGC_FX_CONST,       /* v, of dtype dt */
    TGC_FX_CAST,        /* in[0] to dtype dt */
    TGC_FX_OP,          /* op over in[0..n_in) with attributes i[0..ni), f[0..nf) */
    TGC_FX_IF,          /* cond ? in[0] : in[1], decided by the op's attributes */
    TGC_FX_REQUIRE,     /* cond ? in[0] : not applicable (-2) */
    TGC_FX_PER_CHANNEL, /* in[0] ([C]) reshaped to [1, C, 1, ...] of in[1]'s rank */
    TGC_FX_RESHAPE_AS   /* in[0] reshaped to in[1]'s shape */
} tgc_fx_kind;

/* The dtype of a CONST or CAST: the compute dtype, or the result's. */
typedef enum tgc_fx_dtype { TGC_FD_COMPUTE, TGC_FD_OUT } tgc_fx_dtype;

/* An attribute of an OP node, resolved against the formula's op attributes `a` and the
 * node's first operand x. */
typedef enum tgc_fa_kind {
    TGC_FA_LIT,       /* v */
    TGC_FA_ATTR,      /* a->i[index] (integer attributes) or a->f[index] (scalars) */
    TGC_FA_DIM_MASK,  /* the mask of dim a->i[index] of x (0 for a 0-d x) */
    TGC_FA_LAST_DIMS, /* the mask of the last a->i[index] dims of x */
} tgc_fa_kind;

typedef struct tgc_farg {
    tgc_fa_kind kind;
    int index;
    double v;
} tgc_farg;

typedef enum tgc_fc_kind {
    TGC_FC_HAS, /* a->i[index] & (int64_t)v */
    TGC_FC_IS,  /* a->i[index] == v */
    TGC_FC_FIS, /* a->f[index] == v */
    TGC_FC_NOT, /* !a */
    TGC_FC_AND  /* a && b */
} tgc_fc_kind;

typedef struct tgc_fcond {
    tgc_fc_kind kind;
    int index;
    double v;
    const struct tgc_fcond *a, *b;
} tgc_fcond;

#define TGC_FX_MAX_IN 3
#define TGC_FX_MAX_I  8

typedef struct tgc_fexpr {
    tgc_fx_kind kind;
    tgc_op op;
    int index;       /* INPUT */
    double v;        /* CONST */
    tgc_fx_dtype dt; /* CONST, CAST */
    int n_in;
    const struct tgc_fexpr *in[TGC_FX_MAX_IN];
    int ni, nf;
    tgc_farg i[TGC_FX_MAX_I], f[2];
    const tgc_fcond *cond; /* IF, REQUIRE */
} tgc_fexpr;

/* ---- the formulas and decompositions of ops.def ---- */

/* When the graph pass expands a FORMULA (ops.def's decompose column). */
typedef enum tgc_formula_decompose {
    TGC_FORMULA_DECOMPOSE_NEVER,
    TGC_FORMULA_DECOMPOSE_ACTIVATIONS
} tgc_formula_decompose;

/* 1 when op is a composite pointwise op (it has a FORMULA). */
int tgc_op_has_formula(tgc_op op);
/* Its decompose column (NEVER for an op without a formula). */
tgc_formula_decompose tgc_op_formula_decompose(tgc_op op);
/* 1 when op has a DECOMPOSITION. */
int tgc_op_has_decomposition(tgc_op op);
/* The op's FORMULA (a DECOMPOSITION) over the builder's values in[0..n_in), for a node with
 * attributes a (NULL: none) whose result has dtype out. */
int32_t tgc_op_formula(tgc_op op, const tgc_formula_builder *b, const int32_t *in, int n_in,
                       const tgc_attrs *a, tgc_dtype out);
int32_t tgc_op_decomposition(tgc_op op, const tgc_formula_builder *b, const int32_t *in, int n_in,
                             const tgc_attrs *a, tgc_dtype out);
/* The expression e, as a FORMULA (pointwise: operands cast to the compute dtype, the value
 * cast to out) or as a DECOMPOSITION (pointwise 0). */
int32_t tgc_formula_eval(const tgc_fexpr *e, int pointwise, const tgc_formula_builder *b,
                         const int32_t *in, int n_in, const tgc_attrs *a, tgc_dtype out);
/* The dtype a formula for a result of dtype out computes in. */
tgc_dtype tgc_formula_compute_dtype(tgc_dtype out);

/* Whether a backend computes composite op for these dtypes: 1 when every primitive its
 * formula expands into (nested formulas expanded, each at the dtypes shape inference gives
 * it; casts as CAST from the value's dtype) is one prim accepts. 0 for an op without a
 * formula. */
typedef int (*tgc_formula_prim_fn)(void *ctx, tgc_op op, tgc_dtype out, const tgc_dtype *in,
                                   int n_in);
int tgc_op_formula_supported(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in,
                             tgc_formula_prim_fn prim, void *ctx);

#endif
