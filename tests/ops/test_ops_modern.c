/* sin, cos, logsumexp, rms_norm and group_norm on the host (cases: ops_modern_cases.h):
 * the interp oracle against double loops of PyTorch's definitions, then eager ops on the
 * default backend (LLVM's cached kernels when built with LLVM) and compiled calls on the
 * default backend and on interp against the oracle; argument errors; default eps. */
#include "ops/ops_modern_cases.h"
#include "passes/passes.h"
#include "unit/graph_build_util.h"

static void test_cases_host(void **state)
{
    (void)state;
    for (int ci = 0; ci < N_OF(m_cases); ci++) {
        const m_case *c = &m_cases[ci];
        tgc_scope_push();
        m_inputs in = m_inputs_of(c, ci);
        double *want;
        int64_t nw;
        m_oracle(c, &in, &want, &nw);
        m_expect_near("eager (default backend)", c, m_apply(c, in.t, in.n), want, nw);
        static const tgc_backend_kind be[] = {TGC_BACKEND_AUTO, TGC_BACKEND_INTERP};
        for (int k = 0; k < N_OF(be); k++)
            m_expect_near(k ? "compiled (interp)" : "compiled (default backend)", c,
                          m_compiled(c, be[k], in.t, in.n), want, nw);
        free(want);
        tgc_scope_pop();
    }
}

/* The values PyTorch gives for the edge rows, written out. */
static void test_logsumexp_infinities(void **state)
{
    (void)state;
    const double x[] = {-INFINITY, -INFINITY, -INFINITY, 1.0,       INFINITY, 2.0,
                        INFINITY,  -INFINITY, 0.0,       -INFINITY, 0.0,      0.0};
    tgc_tensor *t = from_doubles(x, SHAPE(4, 3), 2, TGC_F32);
    const double want[] = {-INFINITY, INFINITY, INFINITY, log(2.0)};
    expect_values_near(tgc_logsumexp(t, (const int[]){1}, 1, 0), TGC_F32, SHAPE(4), 1, want, 1e-6,
                       TOL_SCALE_REL);
    /* keepdim, over dim 0: columns (-inf, 1, inf, -inf), (-inf, inf, -inf, 0), (-inf, 2, 0, 0) */
    expect_values_near(tgc_logsumexp(t, (const int[]){0}, 1, 1), TGC_F32, SHAPE(1, 3), 2,
                       VALS(INFINITY, INFINITY, log(exp(2.0) + 2.0)), 1e-6, TOL_SCALE_REL);
    /* an empty reduction is -inf; integer input gives f32 */
    tgc_tensor *e = from_doubles(x, SHAPE(2, 0), 2, TGC_F32);
    expect_values_near(tgc_logsumexp(e, (const int[]){1}, 1, 0), TGC_F32, SHAPE(2), 1,
                       VALS(-INFINITY, -INFINITY), 0, TOL_SCALE_REL);
    tgc_tensor *i = from_doubles(VALS(0, 0), SHAPE(2), 1, TGC_I64);
    expect_values_near(tgc_logsumexp(i, NULL, 0, 0), TGC_F32, SHAPE(), 0, VALS(log(2.0)), 1e-6,
                       TOL_SCALE_REL);
}

/* eps=None is torch.finfo(x.dtype).eps: on a row of tiny values the result is
 * x / sqrt(mean(x^2) + eps), not x / sqrt(mean(x^2)) (which would be +-1). */
static void test_rms_norm_default_eps(void **state)
{
    (void)state;
    const double v[] = {1e-4, -1e-4};
    tgc_tensor *x = from_doubles(v, SHAPE(1, 2), 2, TGC_F32);
    const double e32 = 0x1p-23, w32 = 1e-4 / sqrt(1e-8 + e32);
    expect_values_near(tgc_rms_norm(x, 1, NULL, -1.0), TGC_F32, SHAPE(1, 2), 2, VALS(w32, -w32),
                       1e-5, TOL_SCALE_REL);
    /* an explicit eps is used as given */
    expect_values_near(tgc_rms_norm(x, 1, NULL, 0.0), TGC_F32, SHAPE(1, 2), 2, VALS(1.0, -1.0),
                       1e-5, TOL_SCALE_REL);
    tgc_tensor *x64 = from_doubles(v, SHAPE(2), 1, TGC_F64);
    const double w64 = 1e-4 / sqrt(1e-8 + 2.220446049250313e-16);
    expect_values_near(tgc_rms_norm(x64, 1, NULL, NAN), TGC_F64, SHAPE(2), 1, VALS(w64, -w64),
                       1e-12, TOL_SCALE_REL);
}

static void test_errors(void **state)
{
    (void)state;
    tgc_tensor *x = iota(SHAPE(2, 6, 3), 3, TGC_F32);
    assert_null(tgc_group_norm(x, 4, NULL, NULL, 1e-5));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_null(tgc_group_norm(x, 0, NULL, NULL, 1e-5));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_tensor *w5 = iota(SHAPE(5), 1, TGC_F32);
    assert_null(tgc_group_norm(x, 3, w5, NULL, 1e-5));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_null(tgc_rms_norm(x, 1, w5, 1e-5));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_null(tgc_rms_norm(x, 4, NULL, 1e-5));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_tensor *v = iota(SHAPE(6), 1, TGC_F32);
    assert_null(tgc_group_norm(v, 1, NULL, NULL, 1e-5)); /* rank 1 */
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    tgc_tensor *ints = iota(SHAPE(2, 4), 2, TGC_I32);
    assert_null(tgc_rms_norm(ints, 1, NULL, -1.0));
    assert_int_equal(tgc_last_status(), TGC_ERR_DTYPE);
    assert_null(tgc_logsumexp(x, (const int[]){3}, 1, 0));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
}

static int count_op(const tgc_graph *g, tgc_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

/* The compiled backends see logsumexp, rms_norm and group_norm only as their ops.def
 * decompositions, for constant and symbolic dims (the eager kernels' graphs have symbolic
 * ones) and every float dtype. */
static void test_decompositions_apply(void **state)
{
    (void)state;
    static const tgc_dtype dts[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};
    for (int d = 0; d < N_OF(dts); d++)
        for (int sym = 0; sym < 2; sym++)
            for (int op = 0; op < 3; op++) {
                tgc_graph *g = tgc_graph_create();
                tgc_sdim s[4] = {2, 6, 3, 4}, sc[1] = {6}, sw[2] = {3, 4};
                if (sym) { /* the parameters share x's symbols, as traced graphs do */
                    for (int k = 0; k < 4; k++)
                        s[k] = tgc_sym_new(g->syms, s[k], 0, k);
                    sc[0] = s[1];
                    sw[0] = s[2];
                    sw[1] = s[3];
                }
                int32_t in[3] = {gb_input(g, dts[d], 4, s)}, o;
                tgc_attrs a = {.ni = 2, .nf = 1};
                a.f[0] = 1e-5;
                tgc_op which = op == 0   ? TGC_OP_LOGSUMEXP
                               : op == 1 ? TGC_OP_RMS_NORM
                                         : TGC_OP_GROUP_NORM;
                if (op == 0) {
                    a = (tgc_attrs){.ni = 2};
                    a.i[0] = 10; /* dims 1 and 3 */
                    o = gb_op(g, which, in, 1, &a);
                } else if (op == 1) {
                    in[1] = gb_input(g, dts[d], 2, sw);
                    a.i[0] = 2;
                    a.i[1] = TGC_LN_HAS_WEIGHT;
                    o = gb_op(g, which, in, 2, &a);
                } else {
                    in[1] = gb_input(g, dts[d], 1, sc);
                    in[2] = gb_input(g, dts[d], 1, sc);
                    a.i[0] = 3;
                    a.i[1] = TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS;
                    o = gb_op(g, which, in, 3, &a);
                }
                assert_int_equal(tgc_graph_set_outputs(g, &o, 1), TGC_OK);
                assert_int_equal(tgc_pass_decompose(g), TGC_OK);
                if (count_op(g, which))
                    fail_msg("%s (%s, %s dims) was not decomposed", tgc_op_name(which),
                             tgc_dtype_name(dts[d]), sym ? "symbolic" : "constant");
                tgc_graph_free(g);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cases_host, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_logsumexp_infinities, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_rms_norm_default_eps, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_errors, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_decompositions_apply, scope_setup, scope_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
