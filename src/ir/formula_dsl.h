/* The expression language of ops.def's FORMULA and DECOMPOSITION entries (ir/formula.h).
 *
 * Each macro is a constant expression (a pointer to a file-scope compound literal), so an
 * expression is static data: a table of formulas is initialized with them at compile time.
 * Include this only where expressions are written (ir/formula.c, tests): the names are short.
 *
 *   X0 .. X4            the operands
 *   CONST(v)            the constant v in the compute dtype
 *   CAST(e, COMPUTE)    e cast to the compute dtype; CAST(e, OUT): to the result's dtype
 *   OP1(ENUM, a) OP2(ENUM, a, b) OP3(ENUM, a, b, c)
 *                       any op of ops.def without attributes
 *   OPC(ENUM, a, s)     a scalar op with the literal scalar s (f[0]); OPA(ENUM, a, k): with
 *                       the formula's op attribute f[k]
 *   OPI(ENUM, a, n, items...) an op with n integer attributes, each I_LIT(v), I_ATTR(k)
 *                       (attrs.i[k]), DIM_OF(k) or LAST_DIMS(k) (masks over a's dims)
 *   REDUCE(ENUM, a, dims, keep) SUM / MEAN / MAX over the dims item, keep an item
 *   SUM_KEEP(a, dims) MEAN_KEEP(a, dims) MAX_KEEP(a, dims)   ... with keepdim
 *   ADD SUB MUL DIV (a, b); NEG EXP LOG SQRT RSQRT TANH ERF SIGMOID (a);
 *   ADDC SUBC MULC DIVC (a, s); ADDA (a, k)
 *   PER_CHANNEL(v, like) v ([C]) reshaped to [1, C, 1, ...] of like's rank
 *   RESHAPE_AS(v, like) v reshaped to like's shape
 *   IF(cond, a, b)      a where cond holds for the op's attributes, else b
 *   REQUIRE(cond, e)    e, or the op is left as it is
 *   cond: HAS(k, bits)  attrs.i[k] & bits; ATTR_IS(k, v) attrs.i[k] == v; FATTR_IS(k, v)
 *         attrs.f[k] == v; COND_NOT(c); COND_AND(c1, c2) */
#ifndef TGC_IR_FORMULA_DSL_H
#define TGC_IR_FORMULA_DSL_H

#include "ir/formula.h"

#define TGC_FX_(...) (&(const tgc_fexpr){__VA_ARGS__})
#define TGC_FC_(...) (&(const tgc_fcond){__VA_ARGS__})

#define TGC_FX_IN_(k) TGC_FX_(.kind = TGC_FX_INPUT, .index = (k))
#define X0            TGC_FX_IN_(0)
#define X1            TGC_FX_IN_(1)
#define X2            TGC_FX_IN_(2)
#define X3            TGC_FX_IN_(3)
#define X4            TGC_FX_IN_(4)

#define CONST(c)   TGC_FX_(.kind = TGC_FX_CONST, .v = (c), .dt = TGC_FD_COMPUTE)
#define CAST(a, d) TGC_FX_(.kind = TGC_FX_CAST, .n_in = 1, .in = {(a)}, .dt = TGC_FD_##d)

#define OP1(e, a)    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 1, .in = {(a)})
#define OP2(e, a, b) TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 2, .in = {(a), (b)})
#define OP3(e, a, b, c)                                                                            \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 3, .in = {(a), (b), (c)})
#define OPC(e, a, s)                                                                               \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 1, .in = {(a)}, .nf = 1,                  \
            .f = {{TGC_FA_LIT, 0, (s)}})
#define OPA(e, a, k)                                                                               \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 1, .in = {(a)}, .nf = 1,                  \
            .f = {{TGC_FA_ATTR, (k), 0}})
#define OPI(e, a, n, ...)                                                                          \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 1, .in = {(a)}, .ni = (n),                \
            .i = {__VA_ARGS__})

/* braced items, one line each */
// clang-format off
#define I_LIT(c)     {TGC_FA_LIT, 0, (c)}
#define I_ATTR(k)    {TGC_FA_ATTR, (k), 0}
#define DIM_OF(k)    {TGC_FA_DIM_MASK, (k), 0}
#define LAST_DIMS(k) {TGC_FA_LAST_DIMS, (k), 0}
// clang-format on

/* Items hold commas once expanded: a macro taking one hands it straight to the variadic
 * TGC_FX_ (through another macro of fixed arity it would count as several arguments). */
#define REDUCE(e, a, dims, keep)                                                                   \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_##e, .n_in = 1, .in = {(a)}, .ni = 2, .i = {dims, keep})
#define SUM_KEEP(a, dims)                                                                          \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_SUM, .n_in = 1, .in = {(a)}, .ni = 2,                  \
            .i = {dims, I_LIT(1)})
#define MEAN_KEEP(a, dims)                                                                         \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_MEAN, .n_in = 1, .in = {(a)}, .ni = 2,                 \
            .i = {dims, I_LIT(1)})
#define MAX_KEEP(a, dims)                                                                          \
    TGC_FX_(.kind = TGC_FX_OP, .op = TGC_OP_MAX, .n_in = 1, .in = {(a)}, .ni = 2,                  \
            .i = {dims, I_LIT(1)})

#define ADD(a, b)  OP2(ADD, a, b)
#define SUB(a, b)  OP2(SUB, a, b)
#define MUL(a, b)  OP2(MUL, a, b)
#define DIV(a, b)  OP2(DIV, a, b)
#define NEG(a)     OP1(NEG, a)
#define EXP(a)     OP1(EXP, a)
#define LOG(a)     OP1(LOG, a)
#define SQRT(a)    OP1(SQRT, a)
#define RSQRT(a)   OP1(RSQRT, a)
#define TANH(a)    OP1(TANH, a)
#define ERF(a)     OP1(ERF, a)
#define SIGMOID(a) OP1(SIGMOID, a)
#define ADDC(a, s) OPC(ADD_SCALAR, a, s)
#define SUBC(a, s) OPC(SUB_SCALAR, a, s)
#define MULC(a, s) OPC(MUL_SCALAR, a, s)
#define DIVC(a, s) OPC(DIV_SCALAR, a, s)
#define ADDA(a, k) OPA(ADD_SCALAR, a, k)

#define PER_CHANNEL(v, like) TGC_FX_(.kind = TGC_FX_PER_CHANNEL, .n_in = 2, .in = {(v), (like)})
#define RESHAPE_AS(v, like)  TGC_FX_(.kind = TGC_FX_RESHAPE_AS, .n_in = 2, .in = {(v), (like)})

#define IF(c, a, b)   TGC_FX_(.kind = TGC_FX_IF, .cond = (c), .n_in = 2, .in = {(a), (b)})
#define REQUIRE(c, a) TGC_FX_(.kind = TGC_FX_REQUIRE, .cond = (c), .n_in = 1, .in = {(a)})

#define HAS(k, bits)     TGC_FC_(.kind = TGC_FC_HAS, .index = (k), .v = (bits))
#define ATTR_IS(k, c)    TGC_FC_(.kind = TGC_FC_IS, .index = (k), .v = (c))
#define FATTR_IS(k, c)   TGC_FC_(.kind = TGC_FC_FIS, .index = (k), .v = (c))
#define COND_NOT(c)      TGC_FC_(.kind = TGC_FC_NOT, .a = (c))
#define COND_AND(c1, c2) TGC_FC_(.kind = TGC_FC_AND, .a = (c1), .b = (c2))

#endif
