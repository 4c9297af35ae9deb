/* Symbolic dims: a dim is an int64 constant or a hash-consed expression over symbols.
 *
 * Encoding: tgc_sdim values above TGC_SDIM_EXPR_MAX are plain constants (negative
 * constants are allowed as operands); values at or below it name expression nodes of one
 * tgc_symtab, except TGC_SDIM_INVALID. Expressions are kept in a normal form on
 * construction: a polynomial with integer coefficients over symbols and floor divisions,
 * like terms combined, terms and factors in a fixed order, constant divisors taken out
 * where exact. So equal polynomials are one handle however they were built
 * (s0 - (s0 - 1) is the constant 1, (s0 + 1)*2 is s0*2 + 2).
 *
 * Overflow: every constant fold and every hint is computed with checked int64 arithmetic.
 * A result that does not fit (or a constant at or below TGC_SDIM_EXPR_MAX, a division by
 * zero, an expression too large for the normal form, out of memory) is TGC_SDIM_INVALID,
 * which every operation propagates and shape inference reports as TGC_ERR_SHAPE.
 *
 * Every expression carries its hint: its value at trace time. Shape inference decides
 * data-dependent questions with hints and records the decision as an assumption
 * (a == b); the tracer turns assumptions into guards, so a variant is only reused where
 * every assumption still holds.
 *
 * A NULL symtab is valid wherever all operands are constants (eager shape inference). */
#ifndef TGC_IR_SYM_H
#define TGC_IR_SYM_H

#include <stddef.h>
#include <stdint.h>

typedef int64_t tgc_sdim;
#define TGC_SDIM_EXPR_MAX    (INT64_MIN + ((int64_t)1 << 40))
#define TGC_SDIM_IS_CONST(d) ((d) > TGC_SDIM_EXPR_MAX)
/* Neither a constant nor an expression: the result of arithmetic that overflowed. */
#define TGC_SDIM_INVALID     INT64_MIN
#define TGC_SDIM_IS_VALID(d) ((d) != TGC_SDIM_INVALID)

typedef struct tgc_symtab tgc_symtab;

tgc_symtab *tgc_symtab_create(void);
void tgc_symtab_free(tgc_symtab *t);
/* A deep copy (every handle of t means the same expression in the copy); NULL on OOM.
 * Free with tgc_symtab_free. */
tgc_symtab *tgc_symtab_clone(const tgc_symtab *t);

/* A new symbol whose trace-time value is hint, bound at call time to dim `dim` of input
 * `input` (tgc_call's in[input]). */
tgc_sdim tgc_sym_new(tgc_symtab *t, int64_t hint, int input, int dim);
int tgc_sym_count(const tgc_symtab *t);
/* Origin of symbol k (0-based, in creation order). */
void tgc_sym_origin(const tgc_symtab *t, int k, int *input, int *dim);
/* The expression of symbol k. */
tgc_sdim tgc_sym_symbol(const tgc_symtab *t, int k);

tgc_sdim tgc_sym_add(tgc_symtab *t, tgc_sdim a, tgc_sdim b);
tgc_sdim tgc_sym_sub(tgc_symtab *t, tgc_sdim a, tgc_sdim b);
tgc_sdim tgc_sym_mul(tgc_symtab *t, tgc_sdim a, tgc_sdim b);
/* Floor division and ceil division; a symbolic b must be positive (a size). */
tgc_sdim tgc_sym_floordiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b);
tgc_sdim tgc_sym_ceildiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b);

/* Trace-time value (0 for TGC_SDIM_INVALID). */
int64_t tgc_sym_hint(const tgc_symtab *t, tgc_sdim d);
/* 1 when a and b are the same expression (or equal constants). */
int tgc_sym_same(tgc_sdim a, tgc_sdim b);
/* 1 when a == b is known or assumed (hints equal: the assumption is recorded); else 0. */
int tgc_sym_unify(tgc_symtab *t, tgc_sdim a, tgc_sdim b);
/* Records the assumption d == hint(d) and returns the hint: specializes d. */
int64_t tgc_sym_specialize(tgc_symtab *t, tgc_sdim d);

/* 1 when a >= bound is known or assumed (hint satisfies it: the assumption is recorded);
 * else 0. Known: from lower bounds that hold for every binding (a symbol is >= 2, since 0
 * and 1 are specialized). Used where a size must stay non-negative or positive. */
int tgc_sym_assume_ge(tgc_symtab *t, tgc_sdim a, int64_t bound);

typedef enum { TGC_ASSUME_EQ, TGC_ASSUME_GE } tgc_assume_kind;
int tgc_sym_n_assumptions(const tgc_symtab *t);
/* Assumption k: a == b, or a >= b (b a constant). Returns its kind. */
tgc_assume_kind tgc_sym_assumption(const tgc_symtab *t, int k, tgc_sdim *a, tgc_sdim *b);
/* 1 when assumption k holds for these symbol values. */
int tgc_sym_assumption_holds(const tgc_symtab *t, int k, const int64_t *vals);

/* Value of d given the symbols' values vals[0..count) (arithmetic wraps on overflow
 * instead of being undefined; callers bound their inputs). */
int64_t tgc_sym_eval(const tgc_symtab *t, tgc_sdim d, const int64_t *vals);
/* Writes d as text ("s0", "s0*128", "(s0 - 2)", "64") with snprintf semantics: returns the
 * full length, even when buf was too short. */
int tgc_sym_format(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n);

#endif
