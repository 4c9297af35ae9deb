/* Slices and pads of a dynamic dim against eager.
 *
 * Each form (slice start:end:step, or pad before/after, on dim 1 of x [R, W]) is compiled
 * twice per backend (the default one and interp): once with dim 1 marked dynamic, once with
 * dynamic = AUTO, where the second size makes it symbolic. Every call's outputs (the
 * slice, its squeeze and a pointwise op on it) must match eager x's in status, rank,
 * shape and values, over sizes W = 2..7, and no form may recompile for every size. */
#include "ops/op_test_util.h"

#include <stdio.h>

#include "ir/sym.h"

enum { FORM_SLICE, FORM_PAD, FORM_ADD_LAST };

static struct form {
    int kind;
    int64_t a, b, step;
} g_form;

static tgc_tensor *apply_form(tgc_tensor *x)
{
    switch (g_form.kind) {
    case FORM_SLICE: return tgc_slice(x, 1, g_form.a, g_form.b, g_form.step);
    case FORM_PAD: return tgc_pad(x, (const int64_t[]){g_form.a, g_form.b}, 1, -1.0);
    default: return tgc_add(x, tgc_slice(x, 1, -1, INT64_MAX, 1)); /* x + x[:, -1:] */
    }
}

/* out: the form's result, its squeeze (all size-1 dims), and y * 2 + 1 */
static tgc_status model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    tgc_tensor *y = apply_form(in[0]);
    out[0] = y;
    out[1] = tgc_squeeze(y, TGC_ALL_DIMS);
    out[2] = tgc_add_scalar(tgc_mul_scalar(y, 2.0), 1.0);
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

static tgc_tensor *input(int64_t r, int64_t w)
{
    return iota((const int64_t[]){r, w}, 2, TGC_F32);
}

static void describe(char *buf, size_t n)
{
    if (g_form.kind == FORM_SLICE)
        snprintf(buf, n, "slice(%lld, %lld, %lld)", (long long)g_form.a, (long long)g_form.b,
                 (long long)g_form.step);
    else if (g_form.kind == FORM_PAD)
        snprintf(buf, n, "pad(%lld, %lld)", (long long)g_form.a, (long long)g_form.b);
    else
        snprintf(buf, n, "x + x[:, -1:]");
}

static void same_tensor(const tgc_tensor *got, const tgc_tensor *want, const char *what, int k)
{
    int nd = tgc_ndim(want);
    if (tgc_ndim(got) != nd)
        fail_msg("%s: output %d has %d dims, eager %d", what, k, tgc_ndim(got), nd);
    for (int d = 0; d < nd; d++)
        if (tgc_size(got, d) != tgc_size(want, d))
            fail_msg("%s: output %d dim %d is %lld, eager %lld", what, k, d,
                     (long long)tgc_size(got, d), (long long)tgc_size(want, d));
    double *g = values_of(got), *w = values_of(want);
    for (int64_t i = 0; i < tgc_numel(want); i++)
        if (g[i] != w[i])
            fail_msg("%s: output %d element %lld is %g, eager %g", what, k, (long long)i, g[i],
                     w[i]);
    free(g);
    free(w);
}

/* One compiled function over the sizes; returns its compile count. */
static uint64_t run_sizes(tgc_backend_kind backend, int mark, int64_t rows, const int64_t *ws,
                          int n_ws)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = backend;
    cfg.dynamic = TGC_DYNAMIC_AUTO;
    cfg.log = 0;
    cfg.on_cache_limit = TGC_ON_LIMIT_ERROR;
    tgc_fn *f = tgc_compile(model, "dynamic_slices", &cfg);
    assert_non_null(f);
    char what[160], form[64];
    describe(form, sizeof form);
    for (int k = 0; k < n_ws; k++) {
        tgc_scope_push();
        snprintf(what, sizeof what, "%s on [%lld, %lld] (%s, %s)", form, (long long)rows,
                 (long long)ws[k], backend == TGC_BACKEND_INTERP ? "interp" : "default",
                 mark ? "marked dynamic" : "dynamic AUTO");
        tgc_tensor *x = input(rows, ws[k]);
        tgc_tensor *want[3] = {0}, *got[3] = {0};
        tgc_clear_error();
        tgc_status se = model(NULL, &x, 1, want, 3);
        tgc_clear_error();
        if (mark)
            tgc_mark_dynamic(x, 1);
        tgc_status sc = tgc_call(f, NULL, &x, 1, got, 3);
        if (se != sc)
            fail_msg("%s: compiled %s (%s), eager %s", what, tgc_status_str(sc), tgc_last_error(),
                     tgc_status_str(se));
        for (int o = 0; se == TGC_OK && o < 3; o++)
            same_tensor(got[o], want[o], what, o);
        tgc_scope_pop();
    }
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    tgc_fn_free(f);
    return st.compiles;
}

static const tgc_backend_kind backends[] = {TGC_BACKEND_AUTO, TGC_BACKEND_INTERP};
static const int64_t sizes[] = {5, 3, 2, 7, 4, 6, 2};

/* Every form, both backends, both ways of going dynamic, rows 1 (squeeze to fewer dims)
 * and 3. The compile count stays below one per size (6 distinct): guards split sizes into
 * the cases of python's rules (a bound before, at or inside the dim; a result of 0, 1 or
 * more), never one variant per size. */
static void sweep(void)
{
    for (int b = 0; b < N_OF(backends); b++)
        for (int mark = 0; mark < 2; mark++)
            for (int64_t rows = 1; rows <= 3; rows += 2) {
                uint64_t compiles = run_sizes(backends[b], mark, rows, sizes, N_OF(sizes));
                if (compiles > 5) {
                    char form[64];
                    describe(form, sizeof form);
                    fail_msg("%s: %llu compiles for %d calls", form, (unsigned long long)compiles,
                             N_OF(sizes));
                }
            }
}

static void test_slice_forms(void **state)
{
    (void)state;
    const int64_t bounds[] = {0, 1, 2, 4, -1, -2, -3, -100, 100, INT64_MIN, INT64_MAX};
    for (int s = 0; s < N_OF(bounds); s++)
        for (int e = 0; e < N_OF(bounds); e++)
            for (int64_t step = 1; step <= 3; step++) {
                /* a sample of the pairs keeps the run short; every start and every end is
                 * still met with every step */
                if ((s + e) % 3 != 0 && bounds[e] != INT64_MAX && bounds[s] != 0)
                    continue;
                g_form = (struct form){FORM_SLICE, bounds[s], bounds[e], step};
                sweep();
            }
    /* steps beyond any size: one element (strides times the step would overflow) */
    const int64_t huge[] = {(int64_t)1 << 62, INT64_MAX};
    for (int s = 0; s < N_OF(bounds); s += 2)
        for (int k = 0; k < N_OF(huge); k++) {
            g_form = (struct form){FORM_SLICE, bounds[s], s % 4 ? -1 : INT64_MAX, huge[k]};
            sweep();
        }
}

static void test_pad_forms(void **state)
{
    (void)state;
    const int64_t pads[][2] = {{0, 0},   {1, 2},  {-1, 0}, {0, -1},
                               {-1, -1}, {2, -1}, {-2, 3}, {-3, 0}};
    for (int k = 0; k < N_OF(pads); k++) {
        g_form = (struct form){FORM_PAD, pads[k][0], pads[k][1], 1};
        sweep();
    }
}

/* The reported case: x[:, -1:] on a dynamic dim has size 1 (not s0 + (s0 - 1)*-1), so
 * x + x[:, -1:] broadcasts on every call, with one compile, and squeeze on [1, W] gives a
 * 0-d tensor. */
static void test_last_column(void **state)
{
    (void)state;
    g_form = (struct form){FORM_ADD_LAST, 0, 0, 1};
    for (int b = 0; b < N_OF(backends); b++) {
        assert_int_equal(run_sizes(backends[b], 1, 3, sizes, N_OF(sizes)), 1);
        assert_int_equal(run_sizes(backends[b], 0, 3, sizes, N_OF(sizes)), 2);
    }
    g_form = (struct form){FORM_SLICE, -1, INT64_MAX, 1};
    for (int b = 0; b < N_OF(backends); b++) {
        assert_int_equal(run_sizes(backends[b], 1, 1, sizes, N_OF(sizes)), 1);
        tgc_config cfg = tgc_config_default();
        cfg.backend = backends[b];
        tgc_fn *f = tgc_compile(model, "last_column", &cfg);
        tgc_tensor *x = input(1, 6), *y[3];
        tgc_mark_dynamic(x, 1);
        assert_int_equal(tgc_call(f, NULL, &x, 1, y, 3), TGC_OK);
        assert_int_equal(tgc_ndim(y[1]), 0);
        assert_true(tgc_item_f64(y[1]) == 5.0);
        /* the graph's slice has the constant size 1 */
        char *g = tgc_fn_graph(f, 0, 0);
        assert_non_null(g);
        if (!strstr(g, "f32[1, 1]"))
            fail_msg("the slice is not [1, 1] in the graph:\n%s", g);
        tgc_free(g);
        tgc_fn_free(f);
    }
}

/* A shape error raised while tracing a dynamic variant shows this call's sizes. */
static tgc_status add_fixed(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = tgc_add(in[0], tgc_zeros((const int64_t[]){3, 5}, 2, TGC_F32, tgc_cpu()));
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_dynamic_messages(void **state)
{
    (void)state;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    tgc_fn *f = tgc_compile(add_fixed, "messages", &cfg);
    tgc_tensor *x = input(3, 5), *y = NULL;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    x = input(3, 7);
    tgc_mark_dynamic(x, 1);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_SHAPE);
    if (!strstr(tgc_last_error(), "tgc_add: shapes [3, 7] and [3, 5] do not broadcast"))
        fail_msg("message: %s", tgc_last_error());
    tgc_clear_error();
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_last_column, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_messages, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_slice_forms, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_pad_forms, scope_setup, scope_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
