/* Symbolic dims (src/ir/sym.h): constant folding, canonical ordering and hash-consing,
 * the simplifications, hints, evaluation, assumptions from unify and specialize, and the
 * text form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ir/sym.h"

static tgc_symtab *T;

static int setup(void **state)
{
    (void)state;
    T = tgc_symtab_create();
    return T ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tgc_symtab_free(T);
    T = NULL;
    return 0;
}

static void check_format(tgc_sdim d, const char *want)
{
    char buf[256];
    int n = tgc_sym_format(T, d, buf, sizeof buf);
    assert_string_equal(buf, want);
    assert_int_equal(n, (int)strlen(want));
}

/* ---- constants ---- */

static void test_constant_folding(void **state)
{
    (void)state;
    /* with a table and without one: constants never need it */
    tgc_symtab *tabs[] = {T, NULL};
    for (int k = 0; k < 2; k++) {
        tgc_symtab *t = tabs[k];
        assert_int_equal(tgc_sym_add(t, 3, 4), 7);
        assert_int_equal(tgc_sym_add(t, -3, 4), 1);
        assert_int_equal(tgc_sym_sub(t, 5, 8), -3);
        assert_int_equal(tgc_sym_mul(t, 6, 7), 42);
        assert_int_equal(tgc_sym_mul(t, 6, 0), 0);
        assert_int_equal(tgc_sym_floordiv(t, 7, 2), 3);
        assert_int_equal(tgc_sym_floordiv(t, -7, 2), -4); /* floor, not truncation */
        assert_int_equal(tgc_sym_floordiv(t, 8, 2), 4);
        assert_int_equal(tgc_sym_ceildiv(t, 7, 2), 4);
        assert_int_equal(tgc_sym_ceildiv(t, 8, 2), 4);
        assert_int_equal(tgc_sym_ceildiv(t, -7, 2), -3);
        assert_int_equal(tgc_sym_ceildiv(t, 0, 5), 0);
        assert_int_equal(tgc_sym_hint(t, 123), 123);
        assert_int_equal(tgc_sym_eval(t, 99, NULL), 99);
        assert_int_equal(tgc_sym_specialize(t, 17), 17);
        assert_int_equal(tgc_sym_unify(t, 5, 5), 1);
        assert_int_equal(tgc_sym_unify(t, 5, 6), 0);
        assert_int_equal(tgc_sym_n_assumptions(t), 0);
        assert_true(tgc_sym_same(64, 64));
        assert_false(tgc_sym_same(64, 65));
    }
    assert_true(TGC_SDIM_IS_CONST(0));
    assert_true(TGC_SDIM_IS_CONST(-5));
    assert_true(TGC_SDIM_IS_CONST(INT64_MAX));
    assert_int_equal(tgc_sym_count(T), 0);
    assert_int_equal(tgc_sym_count(NULL), 0);
}

/* ---- symbols ---- */

static void test_symbols(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(T, 32, 0, 0), s1 = tgc_sym_new(T, 128, 1, 2);
    assert_false(TGC_SDIM_IS_CONST(s0));
    assert_false(TGC_SDIM_IS_CONST(s1));
    assert_false(tgc_sym_same(s0, s1));
    /* two symbols with one hint are still two symbols */
    tgc_sdim s2 = tgc_sym_new(T, 32, 2, 0);
    assert_false(tgc_sym_same(s0, s2));
    assert_int_equal(tgc_sym_count(T), 3);
    assert_int_equal(tgc_sym_hint(T, s0), 32);
    assert_int_equal(tgc_sym_hint(T, s1), 128);
    int in, dim;
    tgc_sym_origin(T, 1, &in, &dim);
    assert_int_equal(in, 1);
    assert_int_equal(dim, 2);
    tgc_sym_origin(T, 2, &in, &dim);
    assert_int_equal(in, 2);
    assert_int_equal(dim, 0);
    assert_true(tgc_sym_same(tgc_sym_symbol(T, 0), s0));
    assert_true(tgc_sym_same(tgc_sym_symbol(T, 1), s1));
    assert_true(tgc_sym_same(tgc_sym_symbol(T, 2), s2));
    check_format(s0, "s0");
    check_format(s1, "s1");
    check_format(s2, "s2");
    check_format(64, "64");
    check_format(-3, "-3");
    assert_int_equal(tgc_sym_n_assumptions(T), 0);
}

/* ---- canonical forms ---- */

static void test_canonical_ordering(void **state)
{
    (void)state;
    tgc_sdim a = tgc_sym_new(T, 3, 0, 0), b = tgc_sym_new(T, 5, 0, 1);
    assert_true(tgc_sym_same(tgc_sym_add(T, a, b), tgc_sym_add(T, b, a)));
    assert_true(tgc_sym_same(tgc_sym_mul(T, a, b), tgc_sym_mul(T, b, a)));
    assert_true(tgc_sym_same(tgc_sym_add(T, a, 4), tgc_sym_add(T, 4, a)));
    assert_true(tgc_sym_same(tgc_sym_mul(T, a, 4), tgc_sym_mul(T, 4, a)));
    assert_false(tgc_sym_same(tgc_sym_add(T, a, b), tgc_sym_mul(T, a, b)));
    /* hash-consing: the same expression built twice is one handle */
    tgc_sdim e1 = tgc_sym_mul(T, tgc_sym_add(T, a, b), 2);
    tgc_sdim e2 = tgc_sym_mul(T, 2, tgc_sym_add(T, b, a));
    assert_true(tgc_sym_same(e1, e2));
    assert_int_equal(tgc_sym_hint(T, e1), 16);
    check_format(tgc_sym_add(T, b, a), "(s0 + s1)");
    check_format(tgc_sym_add(T, 4, a), "(s0 + 4)");
    check_format(tgc_sym_mul(T, b, a), "s0*s1");
    check_format(tgc_sym_mul(T, 128, a), "s0*128");
}

static void test_identities_and_merging(void **state)
{
    (void)state;
    tgc_sdim s = tgc_sym_new(T, 6, 0, 0), r = tgc_sym_new(T, 10, 0, 1);
    assert_true(tgc_sym_same(tgc_sym_add(T, s, 0), s));
    assert_true(tgc_sym_same(tgc_sym_add(T, 0, s), s));
    assert_true(tgc_sym_same(tgc_sym_mul(T, s, 1), s));
    assert_true(tgc_sym_same(tgc_sym_mul(T, 1, s), s));
    assert_int_equal(tgc_sym_mul(T, s, 0), 0);
    assert_int_equal(tgc_sym_mul(T, 0, s), 0);
    assert_int_equal(tgc_sym_sub(T, s, s), 0);
    assert_true(tgc_sym_same(tgc_sym_sub(T, s, 0), s));
    /* nested constants merge */
    tgc_sdim s7 = tgc_sym_add(T, s, 7);
    assert_true(tgc_sym_same(tgc_sym_add(T, tgc_sym_add(T, s, 3), 4), s7));
    assert_true(tgc_sym_same(tgc_sym_add(T, 3, tgc_sym_add(T, 4, s)), s7));
    assert_true(tgc_sym_same(tgc_sym_sub(T, tgc_sym_add(T, s, 10), 3), s7));
    assert_true(tgc_sym_same(tgc_sym_sub(T, tgc_sym_add(T, s, 4), 4), s)); /* (s+4)-4 = s */
    assert_true(tgc_sym_same(tgc_sym_add(T, tgc_sym_add(T, s, 5), -5), s));
    tgc_sdim s6 = tgc_sym_mul(T, s, 6);
    assert_true(tgc_sym_same(tgc_sym_mul(T, tgc_sym_mul(T, s, 2), 3), s6));
    assert_true(tgc_sym_same(tgc_sym_mul(T, 2, tgc_sym_mul(T, 3, s)), s6));
    assert_false(tgc_sym_same(s6, s));
    check_format(tgc_sym_sub(T, s, 3), "(s0 - 3)");
    check_format(tgc_sym_add(T, tgc_sym_mul(T, s, 2), 1), "(s0*2 + 1)");
    /* r - s evaluates right, whatever its form */
    tgc_sdim d = tgc_sym_sub(T, r, s);
    assert_int_equal(tgc_sym_hint(T, d), 4);
    const int64_t vals[] = {100, 30};
    assert_int_equal(tgc_sym_eval(T, d, vals), -70);
    assert_int_equal(tgc_sym_eval(T, tgc_sym_sub(T, 3, s), vals), -97);
}

static void test_division_simplification(void **state)
{
    (void)state;
    tgc_sdim s = tgc_sym_new(T, 5, 0, 0), r = tgc_sym_new(T, 3, 1, 0);
    /* (s*4)//4 == s, for floor and ceil division */
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_mul(T, s, 4), 4), s));
    assert_true(tgc_sym_same(tgc_sym_ceildiv(T, tgc_sym_mul(T, s, 4), 4), s));
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_mul(T, 4, s), 4), s));
    /* (s*8)//4 == s*2 */
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_mul(T, s, 8), 4), tgc_sym_mul(T, s, 2)));
    /* x // 1 == x, x // x == 1, (s*r)//r == s, (s*r)//s == r */
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, s, 1), s));
    assert_true(tgc_sym_same(tgc_sym_ceildiv(T, s, 1), s));
    assert_int_equal(tgc_sym_floordiv(T, s, s), 1);
    tgc_sdim sr = tgc_sym_mul(T, s, r);
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, sr, r), s));
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, sr, s), r));
    /* inexact divisions stay expressions, with the right hints and values */
    tgc_sdim q = tgc_sym_floordiv(T, tgc_sym_mul(T, s, 6), 4);
    assert_false(TGC_SDIM_IS_CONST(q));
    assert_int_equal(tgc_sym_hint(T, q), 7); /* 30 // 4 */
    check_format(q, "(s0 + (s0 // 2))");     /* s*6 // 4 = s + (s*2 // 4) = s + s // 2 */
    tgc_sdim c = tgc_sym_ceildiv(T, s, 2);
    assert_int_equal(tgc_sym_hint(T, c), 3);
    check_format(c, "((s0 + 1) // 2)"); /* ceil(s / 2) = (s + 1) // 2: one normal form */
    const int64_t vals[] = {7, 3};
    assert_int_equal(tgc_sym_eval(T, q, vals), 10); /* 42 // 4 */
    assert_int_equal(tgc_sym_eval(T, c, vals), 4);  /* ceil(7 / 2) */
    tgc_sdim sd = tgc_sym_floordiv(T, s, r);
    assert_int_equal(tgc_sym_hint(T, sd), 1);
    assert_int_equal(tgc_sym_eval(T, sd, vals), 2);
    /* the same division twice is one handle */
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_mul(T, s, 6), 4), q));
}

static void test_hints_and_eval(void **state)
{
    (void)state;
    tgc_sdim b = tgc_sym_new(T, 8, 0, 0), l = tgc_sym_new(T, 128, 0, 1);
    /* conv output size: (l + 2*1 - 3) // 2 + 1 */
    tgc_sdim o = tgc_sym_add(T, tgc_sym_floordiv(T, tgc_sym_sub(T, tgc_sym_add(T, l, 2), 3), 2), 1);
    assert_int_equal(tgc_sym_hint(T, o), 64);
    tgc_sdim n = tgc_sym_mul(T, tgc_sym_mul(T, b, o), 16); /* numel of [b, o, 16] */
    assert_int_equal(tgc_sym_hint(T, n), 8 * 64 * 16);
    const int64_t vals1[] = {8, 128}, vals2[] = {3, 33}, vals3[] = {1, 1};
    assert_int_equal(tgc_sym_eval(T, o, vals1), 64);
    assert_int_equal(tgc_sym_eval(T, n, vals1), 8 * 64 * 16);
    assert_int_equal(tgc_sym_eval(T, o, vals2), 17); /* (33 - 1) // 2 + 1 */
    assert_int_equal(tgc_sym_eval(T, n, vals2), 3 * 17 * 16);
    assert_int_equal(tgc_sym_eval(T, o, vals3), 1); /* (1 - 1) // 2 + 1 */
    assert_int_equal(tgc_sym_eval(T, b, vals2), 3);
    assert_int_equal(tgc_sym_eval(T, 5, vals2), 5);
    /* floor division of a negative intermediate rounds down */
    tgc_sdim neg = tgc_sym_floordiv(T, tgc_sym_sub(T, l, 10), 4);
    const int64_t vals4[] = {0, 3};
    assert_int_equal(tgc_sym_eval(T, neg, vals4), -2); /* -7 // 4 */
    tgc_sdim cneg = tgc_sym_ceildiv(T, tgc_sym_sub(T, l, 10), 4);
    assert_int_equal(tgc_sym_eval(T, cneg, vals4), -1); /* ceil(-7 / 4) */
}

/* ---- assumptions ---- */

static void test_unify(void **state)
{
    (void)state;
    tgc_sdim a = tgc_sym_new(T, 16, 0, 0), b = tgc_sym_new(T, 16, 1, 0),
             c = tgc_sym_new(T, 9, 2, 0);
    tgc_sdim x, y;
    /* the same expression: known, nothing assumed */
    assert_int_equal(tgc_sym_unify(T, a, a), 1);
    assert_int_equal(tgc_sym_unify(T, tgc_sym_mul(T, a, 2), tgc_sym_mul(T, 2, a)), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 0);
    /* different hints: not equal, nothing assumed */
    assert_int_equal(tgc_sym_unify(T, a, c), 0);
    assert_int_equal(tgc_sym_unify(T, a, 17), 0);
    assert_int_equal(tgc_sym_unify(T, 17, a), 0);
    assert_int_equal(tgc_sym_n_assumptions(T), 0);
    /* equal hints: assumed, and recorded once */
    assert_int_equal(tgc_sym_unify(T, a, b), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 1);
    tgc_sym_assumption(T, 0, &x, &y);
    assert_true(tgc_sym_same(x, a));
    assert_true(tgc_sym_same(y, b));
    assert_int_equal(tgc_sym_unify(T, a, b), 1);
    assert_int_equal(tgc_sym_unify(T, b, a), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 1);
    /* a symbol against a constant */
    assert_int_equal(tgc_sym_unify(T, c, 9), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 2);
    tgc_sym_assumption(T, 1, &x, &y);
    assert_true(tgc_sym_same(x, c));
    assert_int_equal(y, 9);
    /* an expression against a constant */
    assert_int_equal(tgc_sym_unify(T, tgc_sym_mul(T, c, 2), 18), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 3);
    tgc_sym_assumption(T, 2, &x, &y);
    assert_true(tgc_sym_same(x, tgc_sym_mul(T, c, 2)));
    assert_int_equal(y, 18);
    /* the symbols themselves are unchanged */
    assert_false(tgc_sym_same(a, b));
    assert_int_equal(tgc_sym_count(T), 3);
}

static void test_specialize(void **state)
{
    (void)state;
    tgc_sdim s = tgc_sym_new(T, 12, 0, 0);
    tgc_sdim a, b;
    assert_int_equal(tgc_sym_specialize(T, 12), 12); /* a constant: nothing to assume */
    assert_int_equal(tgc_sym_n_assumptions(T), 0);
    assert_int_equal(tgc_sym_specialize(T, s), 12);
    assert_int_equal(tgc_sym_n_assumptions(T), 1);
    tgc_sym_assumption(T, 0, &a, &b);
    assert_true(tgc_sym_same(a, s));
    assert_int_equal(b, 12);
    assert_int_equal(tgc_sym_specialize(T, s), 12); /* once */
    assert_int_equal(tgc_sym_n_assumptions(T), 1);
    tgc_sdim e = tgc_sym_ceildiv(T, s, 5);
    assert_int_equal(tgc_sym_specialize(T, e), 3);
    assert_int_equal(tgc_sym_n_assumptions(T), 2);
    tgc_sym_assumption(T, 1, &a, &b);
    assert_true(tgc_sym_same(a, e));
    assert_int_equal(b, 3);
    /* unify of the same pair after specialize adds nothing */
    assert_int_equal(tgc_sym_unify(T, s, 12), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 2);
}

/* ---- text ---- */

static void test_format(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(T, 4, 0, 0), s1 = tgc_sym_new(T, 6, 0, 1);
    check_format(tgc_sym_add(T, tgc_sym_mul(T, s0, s1), 1), "(s0*s1 + 1)");
    check_format(tgc_sym_mul(T, tgc_sym_add(T, s0, 1), 2), "(s0*2 + 2)"); /* distributed */
    check_format(tgc_sym_sub(T, s1, s0), "(-s0 + s1)");
    check_format(tgc_sym_sub(T, tgc_sym_mul(T, s0, 3), tgc_sym_mul(T, s1, 2)), "(s0*3 - s1*2)");
    check_format(tgc_sym_sub(T, 4, s0), "(-s0 + 4)");
    check_format(tgc_sym_mul(T, s0, -1), "-s0");
    check_format(tgc_sym_mul(T, s0, -5), "-s0*5");
    check_format(tgc_sym_floordiv(T, tgc_sym_add(T, s0, s1), 2), "((s0 + s1) // 2)");
    check_format(tgc_sym_add(T, s0, -1), "(s0 - 1)");
    /* a short buffer is truncated and terminated, and the full length is reported */
    char small[4];
    memset(small, 'x', sizeof small);
    int n = tgc_sym_format(T, tgc_sym_add(T, s0, s1), small, sizeof small);
    assert_int_equal(n, (int)strlen("(s0 + s1)"));
    assert_int_equal(small[3], 0);
    assert_string_equal(small, "(s0");
}

/* Long expressions are written in full: nested operands are not cut at a fixed length
 * (graph text is also what the persistent cache key hashes). */
static void test_format_long_expression(void **state)
{
    (void)state;
    tgc_sdim s[2] = {tgc_sym_new(T, 100, 0, 2), tgc_sym_new(T, 80, 0, 3)};
    tgc_sdim e[2];
    for (int k = 0; k < 2; k++) {
        tgc_sdim x = s[k];
        tgc_sdim t = tgc_sym_add(T, tgc_sym_floordiv(T, tgc_sym_add(T, x, 3), 2),
                                 tgc_sym_floordiv(T, tgc_sym_mul(T, x, 5), 3));
        t = tgc_sym_add(T, t, tgc_sym_ceildiv(T, tgc_sym_mul(T, x, 7), 4));
        e[k] = tgc_sym_add(T, t, tgc_sym_floordiv(T, tgc_sym_mul(T, x, 9), 8));
    }
    char t0[512], t1[512], prod[1024], want[1100], got[1100];
    tgc_sym_format(T, e[0], t0, sizeof t0);
    tgc_sym_format(T, e[1], t1, sizeof t1);
    assert_true(strlen(t0) < 120 && strlen(t1) < 120);
    /* a division by a sum stays one atom, its operands written out in full */
    tgc_sdim p = tgc_sym_floordiv(T, e[0], e[1]);
    tgc_sym_format(T, p, prod, sizeof prod);
    snprintf(want, sizeof want, "(%s // %s)", t0, t1);
    assert_string_equal(prod, want);
    p = tgc_sym_mul(T, e[0], e[1]); /* distributed: many terms */
    tgc_sym_format(T, p, prod, sizeof prod);
    assert_true(strlen(prod) > 130); /* longer than any fixed 128-byte operand buffer */
    /* p's constant is 1 (1*1); adding 1 merges into it */
    snprintf(want, sizeof want, "%s", prod);
    assert_string_equal(want + strlen(want) - 5, " + 1)");
    want[strlen(want) - 2] = '2';
    int n = tgc_sym_format(T, tgc_sym_add(T, p, 1), got, sizeof got);
    assert_string_equal(got, want);
    assert_int_equal(n, (int)strlen(want));
    tgc_sym_format(T, tgc_sym_floordiv(T, p, tgc_sym_add(T, p, 0)), got, sizeof got);
    assert_string_equal(got, "1"); /* p // p */
    tgc_sdim s01 = tgc_sym_add(T, s[0], s[1]);
    snprintf(want, sizeof want, "(%s // (s0 + s1))", prod);
    tgc_sym_format(T, tgc_sym_floordiv(T, p, s01), got, sizeof got);
    assert_string_equal(got, want);
}

/* ---- many expressions: the interning table grows and keeps every handle ---- */

static void test_many_expressions(void **state)
{
    (void)state;
    tgc_sdim s = tgc_sym_new(T, 3, 0, 0), r = tgc_sym_new(T, 7, 0, 1);
    enum { N = 5000 };
    static tgc_sdim first[N];
    for (int k = 0; k < N; k++)
        first[k] = tgc_sym_add(T, tgc_sym_mul(T, s, k + 2), r);
    for (int k = 0; k < N; k++) {
        tgc_sdim again = tgc_sym_add(T, r, tgc_sym_mul(T, k + 2, s));
        if (!tgc_sym_same(again, first[k]))
            fail_msg("s*%d + r interned twice", k + 2);
        assert_int_equal(tgc_sym_hint(T, again), 3 * (k + 2) + 7);
    }
    for (int k = 1; k < N; k++)
        assert_false(tgc_sym_same(first[k], first[k - 1]));
    /* more symbols after the growth still work */
    tgc_sdim u = tgc_sym_new(T, 11, 1, 0);
    assert_int_equal(tgc_sym_count(T), 3);
    check_format(tgc_sym_add(T, u, s), "(s0 + s2)");
}

/* ---- the normal form ---- */

/* Polynomials with like terms combined: however an expression is built, equal
 * polynomials are one handle, and differences that cancel are constants. */
static void test_normal_form(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(T, 7, 0, 0), s1 = tgc_sym_new(T, 3, 0, 1);
    /* the slice x[:, -1:]: end - start = s0 - (s0 - 1) */
    assert_int_equal(tgc_sym_sub(T, s0, tgc_sym_add(T, s0, -1)), 1);
    assert_int_equal(tgc_sym_add(T, s0, tgc_sym_mul(T, tgc_sym_sub(T, s0, 1), -1)), 1);
    /* distribution and like terms */
    tgc_sdim a = tgc_sym_mul(T, tgc_sym_add(T, s0, s1), tgc_sym_sub(T, s0, s1)); /* s0^2 - s1^2 */
    tgc_sdim b = tgc_sym_sub(T, tgc_sym_mul(T, s0, s0), tgc_sym_mul(T, s1, s1));
    assert_true(tgc_sym_same(a, b));
    assert_int_equal(tgc_sym_hint(T, a), 40);
    check_format(a, "(s0*s0 - s1*s1)");
    assert_int_equal(tgc_sym_sub(T, a, b), 0);
    tgc_sdim c = tgc_sym_add(T, tgc_sym_mul(T, s1, 2), tgc_sym_add(T, s0, tgc_sym_mul(T, s1, -2)));
    assert_true(tgc_sym_same(c, s0));
    /* products commute and associate */
    tgc_sdim p1 = tgc_sym_mul(T, tgc_sym_mul(T, s0, s1), s0);
    tgc_sdim p2 = tgc_sym_mul(T, s0, tgc_sym_mul(T, s0, s1));
    assert_true(tgc_sym_same(p1, p2));
    check_format(p1, "s0*s0*s1");
    /* divisions: constant divisors come out of the quotient where exact */
    tgc_sdim d = tgc_sym_floordiv(T, tgc_sym_add(T, tgc_sym_mul(T, s0, 4), 6), 2);
    assert_true(tgc_sym_same(d, tgc_sym_add(T, tgc_sym_mul(T, s0, 2), 3)));
    tgc_sdim e = tgc_sym_floordiv(T, tgc_sym_add(T, tgc_sym_mul(T, s0, 4), 5), 2);
    assert_true(tgc_sym_same(e, tgc_sym_add(T, tgc_sym_mul(T, s0, 2), 2))); /* floor(1/2) = 0 */
    /* ceil(x / 2) and floor((x + 1) / 2) are one expression; conv's (l + 2 - 3) // 2 + 1 */
    assert_true(
        tgc_sym_same(tgc_sym_ceildiv(T, s0, 2), tgc_sym_floordiv(T, tgc_sym_add(T, s0, 1), 2)));
    tgc_sdim conv = tgc_sym_add(T, tgc_sym_floordiv(T, tgc_sym_sub(T, s0, 1), 2), 1);
    assert_true(tgc_sym_same(conv, tgc_sym_ceildiv(T, s0, 2)));
    /* a term the divisor divides comes out: (s0*s1 + s0) // s0 = s1 + 1, (s0*s1 + 1) // s1 */
    assert_true(tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_add(T, tgc_sym_mul(T, s0, s1), s0), s0),
                             tgc_sym_add(T, s1, 1)));
    tgc_sdim q = tgc_sym_floordiv(T, tgc_sym_add(T, tgc_sym_mul(T, s0, s1), 1), s1);
    check_format(q, "(s0 + (1 // s1))");
    const int64_t vals[] = {10, 4};
    assert_int_equal(tgc_sym_eval(T, q, vals), 10);
    /* negative divisors */
    assert_true(
        tgc_sym_same(tgc_sym_floordiv(T, tgc_sym_mul(T, s0, -6), -3), tgc_sym_mul(T, s0, 2)));
    /* every result evaluates like plain arithmetic */
    for (int64_t v0 = 2; v0 < 9; v0++)
        for (int64_t v1 = 2; v1 < 6; v1++) {
            const int64_t w[] = {v0, v1};
            assert_int_equal(tgc_sym_eval(T, a, w), v0 * v0 - v1 * v1);
            assert_int_equal(tgc_sym_eval(T, e, w), (4 * v0 + 5) / 2);
            assert_int_equal(tgc_sym_eval(T, conv, w), (v0 + 1) / 2);
            assert_int_equal(tgc_sym_eval(T, q, w), (v0 * v1 + 1) / v1);
        }
}

/* Every fold and every hint is checked: an overflow is TGC_SDIM_INVALID, which
 * propagates and is neither a constant nor an expression, never a wrapped value or a
 * handle into the table. */
static void test_overflow(void **state)
{
    (void)state;
    tgc_symtab *tabs[] = {T, NULL};
    for (int k = 0; k < 2; k++) {
        tgc_symtab *t = tabs[k];
        assert_int_equal(tgc_sym_add(t, INT64_MAX, 1), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_add(t, INT64_MAX, INT64_MAX), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_sub(t, -((int64_t)1 << 62), (int64_t)1 << 62), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_mul(t, (int64_t)1 << 62, 8), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_mul(t, (int64_t)1 << 32, (int64_t)1 << 31), TGC_SDIM_INVALID);
        /* constants at the bottom of int64 are expression handles: not representable */
        assert_int_equal(tgc_sym_add(t, INT64_MIN + 5, 0), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_floordiv(t, 7, 0), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_ceildiv(t, 7, 0), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_add(t, TGC_SDIM_INVALID, 1), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_mul(t, 0, TGC_SDIM_INVALID), TGC_SDIM_INVALID);
        assert_int_equal(tgc_sym_floordiv(t, TGC_SDIM_INVALID, 1), TGC_SDIM_INVALID);
        assert_false(TGC_SDIM_IS_CONST(TGC_SDIM_INVALID));
        assert_false(tgc_sym_same(TGC_SDIM_INVALID, TGC_SDIM_INVALID));
        assert_int_equal(tgc_sym_unify(t, TGC_SDIM_INVALID, TGC_SDIM_INVALID), 0);
        assert_int_equal(tgc_sym_hint(t, TGC_SDIM_INVALID), 0);
        assert_int_equal(tgc_sym_eval(t, TGC_SDIM_INVALID, NULL), 0);
        assert_int_equal(tgc_sym_assume_ge(t, TGC_SDIM_INVALID, 0), 0);
        assert_int_equal(tgc_sym_n_assumptions(t), 0);
        /* the largest sums that fit still fold */
        assert_int_equal(tgc_sym_add(t, INT64_MAX - 1, 1), INT64_MAX);
        assert_int_equal(tgc_sym_ceildiv(t, INT64_MAX, 2), ((int64_t)1 << 62));
    }
    /* symbolic: the constant part and the hint overflow */
    tgc_sdim s = tgc_sym_new(T, 5, 0, 0);
    assert_int_equal(tgc_sym_add(T, tgc_sym_add(T, s, INT64_MAX), 1), TGC_SDIM_INVALID);
    assert_int_equal(tgc_sym_add(T, s, INT64_MAX - 2), TGC_SDIM_INVALID); /* hint 5 + ... */
    assert_int_equal(tgc_sym_mul(T, tgc_sym_mul(T, s, (int64_t)1 << 40), (int64_t)1 << 30),
                     TGC_SDIM_INVALID);
    assert_int_equal(tgc_sym_sub(T, TGC_SDIM_INVALID, s), TGC_SDIM_INVALID);
    char buf[32];
    tgc_sym_format(T, TGC_SDIM_INVALID, buf, sizeof buf);
    assert_string_equal(buf, "<overflow>");
    /* a coefficient at the bottom of int64 cannot be written as a constant operand */
    assert_int_equal(tgc_sym_mul(T, s, INT64_MIN + 7), TGC_SDIM_INVALID);
    assert_int_equal(tgc_sym_mul(T, tgc_sym_mul(T, s, -((int64_t)1 << 62)), 2), TGC_SDIM_INVALID);
    /* a large coefficient that fits */
    tgc_sdim big = tgc_sym_mul(T, s, (int64_t)1 << 58);
    assert_false(TGC_SDIM_IS_CONST(big));
    assert_int_equal(tgc_sym_hint(T, big), (int64_t)5 << 58);
}

/* Lower bounds (a symbol is >= 2) prove sizes without guards where they can. */
static void test_assume_ge_lower_bounds(void **state)
{
    (void)state;
    tgc_sdim s0 = tgc_sym_new(T, 9, 0, 0), s1 = tgc_sym_new(T, 4, 0, 1);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_sub(T, s0, 1), 1), 1);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_sub(T, s0, 2), 0), 1);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_mul(T, s0, s1), 4), 1);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_floordiv(T, tgc_sym_add(T, s0, 1), 2), 1), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 0);
    /* not provable: guarded by the hint */
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_sub(T, s0, 3), 0), 1);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_sub(T, s0, s1), 0), 1);
    assert_int_equal(tgc_sym_n_assumptions(T), 2);
    assert_int_equal(tgc_sym_assume_ge(T, tgc_sym_sub(T, s1, s0), 0), 0); /* hint -5 */
    assert_int_equal(tgc_sym_n_assumptions(T), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_constant_folding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symbols, setup, teardown),
        cmocka_unit_test_setup_teardown(test_canonical_ordering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_identities_and_merging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_division_simplification, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hints_and_eval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_specialize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_long_expression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_expressions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normal_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assume_ge_lower_bounds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
