/* Symbolic dims: hash-consed expressions with trace-time hints. */
#include "ir/sym.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/sym_impl.h"

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 1;
    int c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

tgc_symtab *tgc_symtab_create(void) { return calloc(1, sizeof(tgc_symtab)); }

void tgc_symtab_free(tgc_symtab *t)
{
    if (!t)
        return;
    free(t->exprs);
    free(t->table);
    free(t->syms);
    free(t->assume);
    free(t);
}

static tgc_sdim handle_of(int k) { return TGC_SDIM_EXPR_MAX - k; }
static int index_of(tgc_sdim d) { return (int)(TGC_SDIM_EXPR_MAX - d); }
static const expr *get(const tgc_symtab *t, tgc_sdim d) { return &t->exprs[index_of(d)]; }

int64_t tgc_sym_hint(const tgc_symtab *t, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ? d : get(t, d)->hint;
}

static uint64_t hash3(int op, tgc_sdim a, tgc_sdim b)
{
    uint64_t h = (uint64_t)op * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)a + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)b + 0x85EBCA77C2B2AE63ull + (h << 6) + (h >> 2);
    return h;
}

static int rehash(tgc_symtab *t)
{
    int cap = t->table_cap ? t->table_cap * 2 : 64;
    int *tab = calloc((size_t)cap, sizeof(int));
    if (!tab)
        return 0;
    for (int k = 0; k < t->n_exprs; k++) {
        const expr *e = &t->exprs[k];
        if (e->op == E_SYM)
            continue;
        uint64_t h = hash3(e->op, e->a, e->b) & (uint64_t)(cap - 1);
        while (tab[h])
            h = (h + 1) & (uint64_t)(cap - 1);
        tab[h] = k + 1;
    }
    free(t->table);
    t->table = tab;
    t->table_cap = cap;
    return 1;
}

/* The interned node (op, a, b); hint computed by the caller. Returns 0 on OOM (a constant
 * handle would be wrong, so callers treat 0 as "no symbol": shape inference then fails
 * its numel checks rather than silently succeeding). */
static tgc_sdim intern(tgc_symtab *t, expr_op op, tgc_sdim a, tgc_sdim b, int64_t hint)
{
    if ((t->n_exprs + 1) * 2 > t->table_cap && !rehash(t))
        return 0;
    uint64_t mask = (uint64_t)(t->table_cap - 1);
    uint64_t h = hash3(op, a, b) & mask;
    while (t->table[h]) {
        const expr *e = &t->exprs[t->table[h] - 1];
        if (e->op == op && e->a == a && e->b == b)
            return handle_of(t->table[h] - 1);
        h = (h + 1) & mask;
    }
    if (!grow((void **)&t->exprs, &t->cap_exprs, t->n_exprs + 1, sizeof(expr)))
        return 0;
    t->exprs[t->n_exprs] = (expr){op, a, b, hint, -1};
    t->table[h] = ++t->n_exprs;
    return handle_of(t->n_exprs - 1);
}

tgc_sdim tgc_sym_new(tgc_symtab *t, int64_t hint, int input, int dim)
{
    if (!grow((void **)&t->exprs, &t->cap_exprs, t->n_exprs + 1, sizeof(expr)) ||
        !grow((void **)&t->syms, &t->cap_syms, t->n_syms + 1, sizeof(sym_origin)))
        return hint;
    tgc_sdim d = handle_of(t->n_exprs);
    t->exprs[t->n_exprs++] = (expr){E_SYM, 0, 0, hint, t->n_syms};
    t->syms[t->n_syms++] = (sym_origin){input, dim, d};
    return d;
}

int tgc_sym_count(const tgc_symtab *t) { return t ? t->n_syms : 0; }

void tgc_sym_origin(const tgc_symtab *t, int k, int *input, int *dim)
{
    *input = t->syms[k].input;
    *dim = t->syms[k].dim;
}

tgc_sdim tgc_sym_symbol(const tgc_symtab *t, int k) { return t->syms[k].handle; }

static int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int is_op(const tgc_symtab *t, tgc_sdim d, expr_op op)
{
    return !TGC_SDIM_IS_CONST(d) && get(t, d)->op == op;
}

tgc_sdim tgc_sym_add(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b))
        return a + b;
    if (TGC_SDIM_IS_CONST(a)) { /* constants go right */
        tgc_sdim s = a;
        a = b;
        b = s;
    }
    if (TGC_SDIM_IS_CONST(b)) {
        if (b == 0)
            return a;
        if (is_op(t, a, E_ADD) && TGC_SDIM_IS_CONST(get(t, a)->b)) {
            const expr *e = get(t, a);
            return tgc_sym_add(t, e->a, e->b + b);
        }
    } else if (a < b) { /* order symbolic operands canonically */
        tgc_sdim s = a;
        a = b;
        b = s;
    }
    return intern(t, E_ADD, a, b, tgc_sym_hint(t, a) + tgc_sym_hint(t, b));
}

tgc_sdim tgc_sym_mul(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b))
        return a * b;
    if (TGC_SDIM_IS_CONST(a)) {
        tgc_sdim s = a;
        a = b;
        b = s;
    }
    if (TGC_SDIM_IS_CONST(b)) {
        if (b == 0)
            return 0;
        if (b == 1)
            return a;
        if (is_op(t, a, E_MUL) && TGC_SDIM_IS_CONST(get(t, a)->b)) {
            const expr *e = get(t, a);
            return tgc_sym_mul(t, e->a, e->b * b);
        }
    } else if (a < b) {
        tgc_sdim s = a;
        a = b;
        b = s;
    }
    return intern(t, E_MUL, a, b, tgc_sym_hint(t, a) * tgc_sym_hint(t, b));
}

tgc_sdim tgc_sym_sub(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (TGC_SDIM_IS_CONST(b))
        return tgc_sym_add(t, a, -b);
    if (tgc_sym_same(a, b))
        return 0;
    return tgc_sym_add(t, a, tgc_sym_mul(t, b, -1));
}

static tgc_sdim div_common(tgc_symtab *t, tgc_sdim a, tgc_sdim b, expr_op op)
{
    if (TGC_SDIM_IS_CONST(b) && b == 1)
        return a;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b))
        return op == E_FDIV ? floordiv64(a, b) : -floordiv64(-a, b);
    if (tgc_sym_same(a, b))
        return 1;
    /* (x * c1) / c2 with c2 | c1 is exact: x * (c1 / c2). */
    if (TGC_SDIM_IS_CONST(b) && is_op(t, a, E_MUL) && TGC_SDIM_IS_CONST(get(t, a)->b) &&
        get(t, a)->b % b == 0)
        return tgc_sym_mul(t, get(t, a)->a, get(t, a)->b / b);
    /* (x * y) / y = x */
    if (is_op(t, a, E_MUL) && (tgc_sym_same(get(t, a)->b, b) || tgc_sym_same(get(t, a)->a, b)))
        return tgc_sym_same(get(t, a)->b, b) ? get(t, a)->a : get(t, a)->b;
    int64_t ha = tgc_sym_hint(t, a), hb = tgc_sym_hint(t, b);
    int64_t hint = hb ? (op == E_FDIV ? floordiv64(ha, hb) : -floordiv64(-ha, hb)) : 0;
    return intern(t, op, a, b, hint);
}

tgc_sdim tgc_sym_floordiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    return div_common(t, a, b, E_FDIV);
}

tgc_sdim tgc_sym_ceildiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    return div_common(t, a, b, E_CDIV);
}

int tgc_sym_same(tgc_sdim a, tgc_sdim b) { return a == b; }

static void add_assumption(tgc_symtab *t, tgc_sdim a, tgc_sdim b, tgc_assume_kind kind)
{
    for (int k = 0; k < t->n_assume; k++) {
        const struct assumption *x = &t->assume[k];
        if (x->kind == kind && ((x->a == a && x->b == b) ||
                                (kind == TGC_ASSUME_EQ && x->a == b && x->b == a)))
            return;
    }
    if (!grow((void **)&t->assume, &t->cap_assume, t->n_assume + 1, sizeof *t->assume))
        return;
    t->assume[t->n_assume++] = (struct assumption){a, b, kind};
}

int tgc_sym_unify(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (tgc_sym_same(a, b))
        return 1;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b))
        return 0;
    if (tgc_sym_hint(t, a) != tgc_sym_hint(t, b))
        return 0;
    add_assumption(t, a, b, TGC_ASSUME_EQ);
    return 1;
}

int64_t tgc_sym_specialize(tgc_symtab *t, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d))
        return d;
    int64_t h = get(t, d)->hint;
    add_assumption(t, d, h, TGC_ASSUME_EQ);
    return h;
}

/* A lower bound of d that holds for every binding (symbols cover sizes >= 2), or
 * INT64_MIN when none is known cheaply. */
static int64_t lower_bound(const tgc_symtab *t, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d))
        return d;
    const expr *e = get(t, d);
    int64_t a, b;
    switch (e->op) {
    case E_SYM: return 2;
    case E_ADD:
        a = lower_bound(t, e->a);
        b = lower_bound(t, e->b);
        return a == INT64_MIN || b == INT64_MIN ? INT64_MIN : a + b;
    case E_MUL:
        a = lower_bound(t, e->a);
        b = lower_bound(t, e->b);
        return a >= 0 && b >= 0 ? a * b : INT64_MIN;
    default: return INT64_MIN;
    }
}

int tgc_sym_assume_ge(tgc_symtab *t, tgc_sdim a, int64_t bound)
{
    if (TGC_SDIM_IS_CONST(a))
        return a >= bound;
    if (lower_bound(t, a) >= bound) /* holds for every binding: no guard needed */
        return 1;
    if (tgc_sym_hint(t, a) < bound)
        return 0;
    add_assumption(t, a, bound, TGC_ASSUME_GE);
    return 1;
}

int tgc_sym_n_assumptions(const tgc_symtab *t) { return t ? t->n_assume : 0; }

tgc_assume_kind tgc_sym_assumption(const tgc_symtab *t, int k, tgc_sdim *a, tgc_sdim *b)
{
    *a = t->assume[k].a;
    *b = t->assume[k].b;
    return t->assume[k].kind;
}

int tgc_sym_assumption_holds(const tgc_symtab *t, int k, const int64_t *vals)
{
    int64_t a = tgc_sym_eval(t, t->assume[k].a, vals), b = tgc_sym_eval(t, t->assume[k].b, vals);
    return t->assume[k].kind == TGC_ASSUME_EQ ? a == b : a >= b;
}

int64_t tgc_sym_eval(const tgc_symtab *t, tgc_sdim d, const int64_t *vals)
{
    if (TGC_SDIM_IS_CONST(d))
        return d;
    const expr *e = get(t, d);
    if (e->op == E_SYM)
        return vals[e->sym];
    int64_t a = tgc_sym_eval(t, e->a, vals), b = tgc_sym_eval(t, e->b, vals);
    switch (e->op) {
    case E_ADD: return a + b;
    case E_MUL: return a * b;
    case E_FDIV: return b ? floordiv64(a, b) : 0;
    case E_CDIV: return b ? -floordiv64(-a, b) : 0;
    case E_SYM: break;
    }
    return 0;
}

/* Appends one short piece at buf + *len (snprintf semantics: what does not fit is cut, the
 * buffer stays terminated, and *len counts the full length). */
static void put(char *buf, size_t n, size_t *len, const char *fmt, long long v)
{
    char piece[32];
    int k = snprintf(piece, sizeof piece, fmt, v);
    if (*len < n)
        snprintf(buf + *len, n - *len, "%s", piece);
    *len += (size_t)(k > 0 ? k : 0);
}

static void format_into(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n, size_t *len)
{
    if (TGC_SDIM_IS_CONST(d)) {
        put(buf, n, len, "%lld", (long long)d);
        return;
    }
    const expr *e = get(t, d);
    if (e->op == E_SYM) {
        put(buf, n, len, "s%lld", e->sym);
        return;
    }
    static const char *const open[] = {"", "(", "", "(", "ceil("};
    put(buf, n, len, open[e->op], 0);
    format_into(t, e->a, buf, n, len);
    if (e->op == E_ADD && TGC_SDIM_IS_CONST(e->b) && e->b < 0) {
        put(buf, n, len, " - %lld)", -(long long)e->b);
        return;
    }
    static const char *const mid[] = {"", " + ", "*", " // ", " / "};
    put(buf, n, len, mid[e->op], 0);
    format_into(t, e->b, buf, n, len);
    put(buf, n, len, e->op == E_MUL ? "" : ")", 0);
}

int tgc_sym_format(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    format_into(t, d, buf, n, &len);
    return (int)len;
}
