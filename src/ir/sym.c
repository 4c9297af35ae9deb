/* Symbolic dims: hash-consed expressions with trace-time hints. */
#include "ir/sym.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/sym_impl.h"
#include "support/checked.h"

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

tgc_symtab *tgc_symtab_create(void)
{
    return calloc(1, sizeof(tgc_symtab));
}

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

static tgc_sdim handle_of(int k)
{
    return TGC_SDIM_EXPR_MAX - k;
}
static int index_of(tgc_sdim d)
{
    return (int)(TGC_SDIM_EXPR_MAX - d);
}
static const expr *get(const tgc_symtab *t, tgc_sdim d)
{
    return &t->exprs[index_of(d)];
}

/* A constant, or an expression of t: not TGC_SDIM_INVALID, nor a value in the handle
 * range that names no expression (a size below INT64_MIN + 2^40 taken as a constant). */
static int operand_ok(const tgc_symtab *t, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ||
           (TGC_SDIM_IS_VALID(d) && t && TGC_SDIM_EXPR_MAX - d < t->n_exprs);
}

int64_t tgc_sym_hint(const tgc_symtab *t, tgc_sdim d)
{
    if (!operand_ok(t, d))
        return 0;
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

int tgc_sym_count(const tgc_symtab *t)
{
    return t ? t->n_syms : 0;
}

void tgc_sym_origin(const tgc_symtab *t, int k, int *input, int *dim)
{
    *input = t->syms[k].input;
    *dim = t->syms[k].dim;
}

tgc_sdim tgc_sym_symbol(const tgc_symtab *t, int k)
{
    return t->syms[k].handle;
}

/* ---- the normal form (layout in sym_impl.h) ---- */

#define MAX_TERMS 64 /* terms of one poly, factors of one monomial */

typedef struct term {
    tgc_sdim m; /* a monomial; 0 stands for the monomial 1 while multiplying */
    int64_t k;
} term;

typedef struct poly {
    term t[MAX_TERMS + 1]; /* + 1: room for the constant as a term */
    int n;
    int64_t c;
    int bad; /* overflow, or too many terms */
} poly;

static int is_op(const tgc_symtab *t, tgc_sdim d, expr_op op)
{
    return !TGC_SDIM_IS_CONST(d) && TGC_SDIM_IS_VALID(d) && get(t, d)->op == op;
}

static tgc_sdim checked_const(int ok, int64_t v)
{
    return ok && TGC_SDIM_IS_CONST(v) ? v : TGC_SDIM_INVALID;
}

/* The node (op, a, b) with its hint from the operands' hints; INVALID when the hint
 * overflows or on OOM. */
static tgc_sdim node(tgc_symtab *t, expr_op op, tgc_sdim a, tgc_sdim b)
{
    if (!t || !TGC_SDIM_IS_VALID(a) || !TGC_SDIM_IS_VALID(b))
        return TGC_SDIM_INVALID;
    int64_t ha = tgc_sym_hint(t, a), hb = tgc_sym_hint(t, b), h = 0;
    int ok = 1;
    switch (op) {
    case E_ADD: ok = tgc_add_ok(ha, hb, &h); break;
    case E_MUL: ok = tgc_mul_ok(ha, hb, &h); break;
    case E_FDIV: ok = hb == 0 || tgc_floordiv_ok(ha, hb, &h); break; /* hint 0 if b is 0 */
    case E_SYM: ok = 0; break;
    }
    if (!ok)
        return TGC_SDIM_INVALID;
    tgc_sdim d = intern(t, op, a, b, h);
    return d ? d : TGC_SDIM_INVALID;
}

static void poly_add_term(poly *p, tgc_sdim m, int64_t k)
{
    if (m == 0) { /* the monomial 1 */
        if (!tgc_add_ok(p->c, k, &p->c))
            p->bad = 1;
        return;
    }
    for (int i = 0; i < p->n; i++)
        if (p->t[i].m == m) {
            if (!tgc_add_ok(p->t[i].k, k, &p->t[i].k))
                p->bad = 1;
            return;
        }
    if (p->n == MAX_TERMS) {
        p->bad = 1;
        return;
    }
    p->t[p->n++] = (term){m, k};
}

/* Adds d (in normal form) times k to p. */
static void poly_collect(const tgc_symtab *t, tgc_sdim d, int64_t k, poly *p)
{
    int64_t v;
    if (!TGC_SDIM_IS_VALID(d)) {
        p->bad = 1;
    } else if (TGC_SDIM_IS_CONST(d)) {
        if (!tgc_mul_ok(d, k, &v))
            p->bad = 1;
        else
            poly_add_term(p, 0, v);
    } else if (get(t, d)->op == E_ADD) {
        poly_collect(t, get(t, d)->a, k, p);
        poly_collect(t, get(t, d)->b, k, p);
    } else if (get(t, d)->op == E_MUL && TGC_SDIM_IS_CONST(get(t, d)->b)) {
        if (!tgc_mul_ok(get(t, d)->b, k, &v))
            p->bad = 1;
        else
            poly_add_term(p, get(t, d)->a, v);
    } else {
        poly_add_term(p, d, k);
    }
}

/* Older handles (larger values) first: s0 before s1. */
static int cmp_desc(tgc_sdim a, tgc_sdim b)
{
    return a > b ? -1 : a < b;
}

static tgc_sdim poly_build(tgc_symtab *t, poly *p)
{
    if (p->bad || !TGC_SDIM_IS_CONST(p->c))
        return TGC_SDIM_INVALID;
    int n = 0;
    for (int i = 0; i < p->n; i++) {       /* drop cancelled terms */
        if (!TGC_SDIM_IS_CONST(p->t[i].k)) /* a coefficient in the handle range */
            return TGC_SDIM_INVALID;
        if (p->t[i].k)
            p->t[n++] = p->t[i];
    }
    for (int i = 1; i < n; i++) /* insertion sort: a handful of terms */
        for (int j = i; j > 0 && cmp_desc(p->t[j - 1].m, p->t[j].m) > 0; j--) {
            term x = p->t[j];
            p->t[j] = p->t[j - 1];
            p->t[j - 1] = x;
        }
    tgc_sdim acc = 0;
    for (int i = 0; i < n; i++) {
        tgc_sdim x = p->t[i].k == 1 ? p->t[i].m : node(t, E_MUL, p->t[i].m, p->t[i].k);
        acc = i ? node(t, E_ADD, acc, x) : x;
    }
    if (!n)
        return p->c;
    return p->c ? node(t, E_ADD, acc, p->c) : acc;
}

/* The factors of monomial m, in order. */
static int mono_atoms(const tgc_symtab *t, tgc_sdim m, tgc_sdim *out, int n)
{
    if (m == 0)
        return n;
    if (is_op(t, m, E_MUL)) { /* not a term: monomials hold no constants */
        n = mono_atoms(t, get(t, m)->a, out, n);
        if (n < 0 || n == MAX_TERMS)
            return -1;
        out[n++] = get(t, m)->b;
        return n;
    }
    if (n == MAX_TERMS)
        return -1;
    out[n++] = m;
    return n;
}

static tgc_sdim mono_build(tgc_symtab *t, tgc_sdim *f, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cmp_desc(f[j - 1], f[j]) > 0; j--) {
            tgc_sdim x = f[j];
            f[j] = f[j - 1];
            f[j - 1] = x;
        }
    tgc_sdim acc = 0;
    for (int i = 0; i < n; i++)
        acc = i ? node(t, E_MUL, acc, f[i]) : f[i];
    return acc;
}

static tgc_sdim mono_mul(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    tgc_sdim f[2 * MAX_TERMS];
    int n = mono_atoms(t, a, f, 0);
    int m = n < 0 ? -1 : mono_atoms(t, b, f + n, 0);
    if (n < 0 || m < 0 || n + m > MAX_TERMS)
        return TGC_SDIM_INVALID;
    return mono_build(t, f, n + m);
}

/* a / b for monomials when b's factors are a sub-multiset of a's (0 when b is a itself);
 * else TGC_SDIM_INVALID. */
static tgc_sdim mono_div(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    tgc_sdim fa[MAX_TERMS], fb[MAX_TERMS];
    int na = mono_atoms(t, a, fa, 0), nb = mono_atoms(t, b, fb, 0);
    if (na < 0 || nb < 0)
        return TGC_SDIM_INVALID;
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < na && fa[i] != fb[j])
            i++;
        if (i == na)
            return TGC_SDIM_INVALID;
        fa[i] = fa[--na];
    }
    return na ? mono_build(t, fa, na) : 0;
}

static void poly_of(const tgc_symtab *t, tgc_sdim d, poly *p)
{
    p->n = 0;
    p->c = 0;
    p->bad = 0;
    poly_collect(t, d, 1, p);
}

tgc_sdim tgc_sym_add(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (!operand_ok(t, a) || !operand_ok(t, b))
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) {
        int64_t r;
        int ok = tgc_add_ok(a, b, &r);
        return checked_const(ok, r);
    }
    if (!t)
        return TGC_SDIM_INVALID;
    poly p;
    poly_of(t, a, &p);
    poly_collect(t, b, 1, &p);
    return poly_build(t, &p);
}

tgc_sdim tgc_sym_mul(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (!operand_ok(t, a) || !operand_ok(t, b))
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) {
        int64_t r;
        int ok = tgc_mul_ok(a, b, &r);
        return checked_const(ok, r);
    }
    if (!t)
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(a) || TGC_SDIM_IS_CONST(b)) {
        poly p = {.n = 0};
        poly_collect(t, TGC_SDIM_IS_CONST(a) ? b : a, TGC_SDIM_IS_CONST(a) ? a : b, &p);
        return poly_build(t, &p);
    }
    static _Thread_local poly pa, pb, r; /* too large for comfortable stack use */
    poly_of(t, a, &pa);
    poly_of(t, b, &pb);
    r.n = 0;
    r.c = 0;
    r.bad = pa.bad || pb.bad;
    pa.t[pa.n] = (term){0, pa.c}; /* the constants as terms of the monomial 1 */
    pb.t[pb.n] = (term){0, pb.c};
    for (int i = 0; i <= pa.n && !r.bad; i++)
        for (int j = 0; j <= pb.n && !r.bad; j++) {
            int64_t k;
            if (!pa.t[i].k || !pb.t[j].k)
                continue;
            tgc_sdim m = mono_mul(t, pa.t[i].m, pb.t[j].m);
            if (!tgc_mul_ok(pa.t[i].k, pb.t[j].k, &k) || !TGC_SDIM_IS_VALID(m))
                r.bad = 1;
            else
                poly_add_term(&r, m, k);
        }
    return poly_build(t, &r);
}

tgc_sdim tgc_sym_sub(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (!operand_ok(t, a) || !operand_ok(t, b))
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) {
        int64_t r;
        int ok = tgc_sub_ok(a, b, &r);
        return checked_const(ok, r);
    }
    if (tgc_sym_same(a, b))
        return 0;
    if (!t)
        return TGC_SDIM_INVALID;
    poly p;
    poly_of(t, a, &p);
    poly_collect(t, b, -1, &p);
    return poly_build(t, &p);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    uint64_t x = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, y = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    while (y) {
        uint64_t r = x % y;
        x = y;
        y = r;
    }
    return (int64_t)x;
}

/* floor(a / c) for a constant c >= 2: a = c*Q + R with R's coefficients in [0, c), so
 * floor(a / c) = Q + floor(R / c), and R / c is reduced by the gcd of its coefficients. */
static tgc_sdim floordiv_const(tgc_symtab *t, tgc_sdim a, int64_t c)
{
    static _Thread_local poly p, q, r;
    poly_of(t, a, &p);
    q.n = r.n = 0;
    q.bad = r.bad = p.bad;
    p.t[p.n] = (term){0, p.c};
    q.c = r.c = 0;
    for (int i = 0; i <= p.n; i++) {
        int64_t k = p.t[i].k, rk = k % c + (k % c < 0 ? c : 0), qk = k / c - (k % c < 0);
        poly_add_term(&q, p.t[i].m, qk);
        poly_add_term(&r, p.t[i].m, rk);
    }
    int64_t g = c;
    for (int i = 0; i < r.n; i++)
        g = gcd64(g, r.t[i].k);
    g = gcd64(g, r.c);
    int sym_rest = 0;
    for (int i = 0; i < r.n; i++) {
        sym_rest |= r.t[i].k != 0;
        r.t[i].k /= g;
    }
    r.c /= g;
    tgc_sdim qd = poly_build(t, &q);
    if (!sym_rest) /* R is a constant in [0, c): its floor division is 0 */
        return qd;
    return tgc_sym_add(t, qd, node(t, E_FDIV, poly_build(t, &r), c / g));
}

/* floor(a / b) for a symbolic b that is one term m*k (k > 0): the terms of a that b
 * divides exactly come out of the division. */
static tgc_sdim floordiv_term(tgc_symtab *t, tgc_sdim a, tgc_sdim b, tgc_sdim m, int64_t k)
{
    static _Thread_local poly p, q, r;
    poly_of(t, a, &p);
    q.n = r.n = 0;
    q.c = r.c = 0;
    q.bad = r.bad = p.bad;
    for (int i = 0; i < p.n; i++) {
        tgc_sdim d = p.t[i].k % k == 0 ? mono_div(t, p.t[i].m, m) : TGC_SDIM_INVALID;
        if (TGC_SDIM_IS_VALID(d))
            poly_add_term(&q, d, p.t[i].k / k);
        else
            poly_add_term(&r, p.t[i].m, p.t[i].k);
    }
    poly_add_term(&r, 0, p.c);
    tgc_sdim qd = poly_build(t, &q), rd = poly_build(t, &r);
    if (rd == 0)
        return qd;
    return tgc_sym_add(t, qd, node(t, E_FDIV, rd, b));
}

tgc_sdim tgc_sym_floordiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (!operand_ok(t, a) || !operand_ok(t, b))
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(b) && b == 1)
        return a;
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) {
        int64_t r;
        int ok = tgc_floordiv_ok(a, b, &r);
        return checked_const(ok, r);
    }
    if (tgc_sym_same(a, b))
        return 1;
    if (!t || b == 0)
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(b) && b < 0) /* floor(a / b) = floor(-a / -b) */
        return tgc_sym_floordiv(t, tgc_sym_mul(t, a, -1), tgc_sym_mul(t, b, -1));
    if (TGC_SDIM_IS_CONST(b))
        return floordiv_const(t, a, b);
    poly pb;
    poly_of(t, b, &pb);
    if (!pb.bad && pb.n == 1 && pb.c == 0) {
        if (pb.t[0].k < 0)
            return tgc_sym_floordiv(t, tgc_sym_mul(t, a, -1), tgc_sym_mul(t, b, -1));
        return floordiv_term(t, a, b, pb.t[0].m, pb.t[0].k);
    }
    return node(t, E_FDIV, a, b);
}

/* ceil(a / b) = floor((a + b - 1) / b) for b > 0 (one normal form for both divisions). */
tgc_sdim tgc_sym_ceildiv(tgc_symtab *t, tgc_sdim a, tgc_sdim b)
{
    if (!operand_ok(t, a) || !operand_ok(t, b))
        return TGC_SDIM_INVALID;
    if (TGC_SDIM_IS_CONST(b) && b < 0)
        return tgc_sym_ceildiv(t, tgc_sym_mul(t, a, -1), tgc_sym_mul(t, b, -1));
    if (TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) {
        int64_t q = 0;
        int ok = tgc_floordiv_ok(a, b, &q); /* b > 0 here: q + 1 cannot overflow */
        return checked_const(ok, ok && a % b ? q + 1 : q);
    }
    return tgc_sym_floordiv(t, tgc_sym_add(t, a, tgc_sym_sub(t, b, 1)), b);
}

int tgc_sym_same(tgc_sdim a, tgc_sdim b)
{
    return a == b && TGC_SDIM_IS_VALID(a);
}

static void add_assumption(tgc_symtab *t, tgc_sdim a, tgc_sdim b, tgc_assume_kind kind)
{
    for (int k = 0; k < t->n_assume; k++) {
        const struct assumption *x = &t->assume[k];
        if (x->kind == kind &&
            ((x->a == a && x->b == b) || (kind == TGC_ASSUME_EQ && x->a == b && x->b == a)))
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
    if ((TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) || !operand_ok(t, a) || !operand_ok(t, b))
        return 0;
    if (tgc_sym_hint(t, a) != tgc_sym_hint(t, b))
        return 0;
    add_assumption(t, a, b, TGC_ASSUME_EQ);
    return 1;
}

int64_t tgc_sym_specialize(tgc_symtab *t, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d) || !operand_ok(t, d))
        return TGC_SDIM_IS_CONST(d) ? d : 0;
    int64_t h = get(t, d)->hint;
    add_assumption(t, d, h, TGC_ASSUME_EQ);
    return h;
}

/* A lower bound of d that holds for every binding (symbols cover sizes >= 2), or
 * INT64_MIN when none is known cheaply. Bounds above int64 saturate (still a bound). */
static int64_t lower_bound(const tgc_symtab *t, tgc_sdim d)
{
    if (!TGC_SDIM_IS_VALID(d))
        return INT64_MIN;
    if (TGC_SDIM_IS_CONST(d))
        return d;
    const expr *e = get(t, d);
    int64_t a, b, r;
    switch (e->op) {
    case E_SYM: return 2;
    case E_ADD:
        a = lower_bound(t, e->a);
        b = lower_bound(t, e->b);
        if (a == INT64_MIN || b == INT64_MIN)
            return INT64_MIN;
        return tgc_add_ok(a, b, &r) ? r : a > 0 ? INT64_MAX : INT64_MIN;
    case E_MUL: /* factors and positive coefficients: bounds multiply if non-negative */
        a = lower_bound(t, e->a);
        b = lower_bound(t, e->b);
        if (a < 0 || b < 0)
            return INT64_MIN;
        return tgc_mul_ok(a, b, &r) ? r : INT64_MAX;
    case E_FDIV: /* floor(n / c) for a constant c >= 2, floor(n / s) >= 0 for n >= 0 */
        a = lower_bound(t, e->a);
        if (a == INT64_MIN)
            return INT64_MIN;
        if (TGC_SDIM_IS_CONST(e->b) && e->b > 0)
            return tgc_floordiv_ok(a, e->b, &r) ? r : INT64_MIN;
        return a >= 0 && lower_bound(t, e->b) >= 1 ? 0 : INT64_MIN;
    }
    return INT64_MIN;
}

int tgc_sym_assume_ge(tgc_symtab *t, tgc_sdim a, int64_t bound)
{
    if (!operand_ok(t, a))
        return 0;
    if (TGC_SDIM_IS_CONST(a))
        return a >= bound;
    if (lower_bound(t, a) >= bound) /* holds for every binding: no guard needed */
        return 1;
    if (tgc_sym_hint(t, a) < bound)
        return 0;
    add_assumption(t, a, bound, TGC_ASSUME_GE);
    return 1;
}

int tgc_sym_n_assumptions(const tgc_symtab *t)
{
    return t ? t->n_assume : 0;
}

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

/* Wrapping arithmetic (through uint64): defined for every input. */
static int64_t wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t wrap_mul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

int64_t tgc_sym_eval(const tgc_symtab *t, tgc_sdim d, const int64_t *vals)
{
    if (TGC_SDIM_IS_CONST(d) || !operand_ok(t, d))
        return TGC_SDIM_IS_CONST(d) ? d : 0;
    const expr *e = get(t, d);
    if (e->op == E_SYM)
        return vals[e->sym];
    int64_t a = tgc_sym_eval(t, e->a, vals), b = tgc_sym_eval(t, e->b, vals), q;
    switch (e->op) {
    case E_ADD: return wrap_add(a, b);
    case E_MUL: return wrap_mul(a, b);
    case E_FDIV: return tgc_floordiv_ok(a, b, &q) ? q : 0;
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

static void put_str(char *buf, size_t n, size_t *len, const char *str)
{
    if (*len < n)
        snprintf(buf + *len, n - *len, "%s", str);
    *len += strlen(str);
}

/* |k| as text (k may be INT64_MIN). */
static void put_abs(char *buf, size_t n, size_t *len, int64_t k)
{
    char piece[32];
    snprintf(piece, sizeof piece, "%llu",
             (unsigned long long)(k < 0 ? 0 - (uint64_t)k : (uint64_t)k));
    put_str(buf, n, len, piece);
}

static void format_into(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n, size_t *len);

/* One term of a sum; `first` writes a leading "-" for a negative coefficient, later
 * terms write " + " or " - ". */
static void format_term(const tgc_symtab *t, tgc_sdim d, int first, char *buf, size_t n,
                        size_t *len)
{
    int64_t k = 1;
    tgc_sdim m = d;
    if (TGC_SDIM_IS_CONST(d)) {
        k = d;
        m = 0;
    } else if (is_op(t, d, E_MUL) && TGC_SDIM_IS_CONST(get(t, d)->b)) {
        k = get(t, d)->b;
        m = get(t, d)->a;
    }
    put_str(buf, n, len, first ? (k < 0 ? "-" : "") : (k < 0 ? " - " : " + "));
    if (m) {
        format_into(t, m, buf, n, len);
        if (k != 1 && k != -1) {
            put_str(buf, n, len, "*");
            put_abs(buf, n, len, k);
        }
    } else {
        put_abs(buf, n, len, k);
    }
}

static void format_sum(const tgc_symtab *t, tgc_sdim d, int *first, char *buf, size_t n,
                       size_t *len)
{
    if (is_op(t, d, E_ADD)) {
        format_sum(t, get(t, d)->a, first, buf, n, len);
        format_sum(t, get(t, d)->b, first, buf, n, len);
        return;
    }
    format_term(t, d, *first, buf, n, len);
    *first = 0;
}

static void format_into(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n, size_t *len)
{
    if (!operand_ok(t, d)) {
        put_str(buf, n, len, "<overflow>");
        return;
    }
    if (TGC_SDIM_IS_CONST(d)) {
        put(buf, n, len, "%lld", (long long)d);
        return;
    }
    const expr *e = get(t, d);
    int first = 1;
    switch (e->op) {
    case E_SYM: put(buf, n, len, "s%lld", e->sym); return;
    case E_ADD:
        put_str(buf, n, len, "(");
        format_sum(t, d, &first, buf, n, len);
        put_str(buf, n, len, ")");
        return;
    case E_MUL:
        if (TGC_SDIM_IS_CONST(e->b)) { /* a term: m*k, or -m */
            format_term(t, d, 1, buf, n, len);
            return;
        }
        format_into(t, e->a, buf, n, len);
        put_str(buf, n, len, "*");
        format_into(t, e->b, buf, n, len);
        return;
    case E_FDIV:
        put_str(buf, n, len, "(");
        format_into(t, e->a, buf, n, len);
        put_str(buf, n, len, " // ");
        format_into(t, e->b, buf, n, len);
        put_str(buf, n, len, ")");
        return;
    }
}

int tgc_sym_format(const tgc_symtab *t, tgc_sdim d, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    format_into(t, d, buf, n, &len);
    return (int)len;
}
