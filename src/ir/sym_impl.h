/* Private to the symbol table (sym.c, sym_clone.c): the expression table's layout. */
#ifndef TGC_IR_SYM_IMPL_H
#define TGC_IR_SYM_IMPL_H

#include "ir/sym.h"

/* Every expression is in one normal form, so that equal polynomials are one handle:
 *   atom     = E_SYM | E_FDIV(poly, divisor)        (divisor: a constant >= 2 or a poly)
 *   monomial = atom | E_MUL(monomial, atom)         (atoms in handle order, repeats allowed)
 *   term     = monomial | E_MUL(monomial, k)        (k a constant other than 0 and 1)
 *   poly     = term | E_ADD(poly, term) | E_ADD(poly, c)
 * A poly lists its terms in monomial order, each monomial once, its constant (not 0) last. */
typedef enum { E_SYM, E_ADD, E_MUL, E_FDIV } expr_op;

typedef struct expr {
    expr_op op;
    tgc_sdim a, b;
    int64_t hint;
    int sym; /* E_SYM: symbol index */
} expr;

typedef struct sym_origin {
    int input, dim;
    tgc_sdim handle;
} sym_origin;

struct tgc_symtab {
    expr *exprs;
    int n_exprs, cap_exprs;
    int *table; /* open addressing: expr index + 1, 0 = empty */
    int table_cap;
    sym_origin *syms;
    int n_syms, cap_syms;
    struct assumption {
        tgc_sdim a, b;
        tgc_assume_kind kind;
    } * assume;
    int n_assume, cap_assume;
};

#endif
