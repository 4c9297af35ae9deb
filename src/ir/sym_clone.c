/* Deep copy of a symbol table: handles are indices, so a copy of the arrays keeps every
 * tgc_sdim of the source valid in the copy. */
#include <stdlib.h>
#include <string.h>

#include "ir/sym_impl.h"

static int copy_array(void **dst, const void *src, int n, size_t elem)
{
    *dst = NULL;
    if (n <= 0 || !src)
        return 1;
    *dst = malloc((size_t)n * elem);
    if (!*dst)
        return 0;
    memcpy(*dst, src, (size_t)n * elem);
    return 1;
}

tgc_symtab *tgc_symtab_clone(const tgc_symtab *t)
{
    tgc_symtab *c = calloc(1, sizeof *c);
    if (!c || !t)
        return c;
    int ok = copy_array((void **)&c->exprs, t->exprs, t->cap_exprs, sizeof *t->exprs) &&
             copy_array((void **)&c->table, t->table, t->table_cap, sizeof *t->table) &&
             copy_array((void **)&c->syms, t->syms, t->cap_syms, sizeof *t->syms) &&
             copy_array((void **)&c->assume, t->assume, t->cap_assume, sizeof *t->assume);
    if (!ok) {
        tgc_symtab_free(c);
        return NULL;
    }
    c->n_exprs = t->n_exprs;
    c->cap_exprs = c->exprs ? t->cap_exprs : 0;
    c->table_cap = c->table ? t->table_cap : 0;
    c->n_syms = t->n_syms;
    c->cap_syms = c->syms ? t->cap_syms : 0;
    c->n_assume = t->n_assume;
    c->cap_assume = c->assume ? t->cap_assume : 0;
    return c;
}
