/* tgc_prepare_split_reductions (backend/prepare.c): a sum, mean or max over N, H and W of an
 * NCHW tensor becomes a reduction over H, W (contiguous rows) then over N, with the same
 * type and values; reductions that already end the shape, or that keep the last dim, and
 * half-precision ones, are left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backend/interp/interp.h"
#include "backend/prepare.h"
#include "ir/graph.h"
#include "ir/shape_infer.h"
#include "tensor/tensor_impl.h"
#include "tgc/tgc.h"

/* x [4, 3, 5, 6] -> op over mask with keepdim; returns the graph. */
static tgc_graph *reduce_graph(tgc_op op, int64_t mask, int keepdim, tgc_dtype dt)
{
    tgc_graph *g = tgc_graph_create();
    assert_non_null(g);
    tgc_attrs in = {0};
    in.i[0] = TGC_BIND_ARG;
    in.ni = 2;
    tgc_vinfo v = {dt, 4, {4, 3, 5, 6}}, out;
    int32_t x = tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &in, &v);
    tgc_attrs r = {0};
    r.i[0] = mask;
    r.i[1] = keepdim;
    r.ni = 2;
    assert_int_equal(tgc_infer(op, &v, 1, &r, g->syms, &out), TGC_OK);
    int32_t y = tgc_graph_add(g, op, &x, 1, &r, &out);
    assert_int_equal(tgc_graph_set_outputs(g, &y, 1), TGC_OK);
    return g;
}

static int count_op(const tgc_graph *g, tgc_op op)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

/* Runs g node by node on interp with x as its input; returns its output. */
static tgc_tensor *eval(const tgc_graph *g, tgc_tensor *x)
{
    tgc_tensor *vals[8] = {0};
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op == TGC_OP_INPUT) {
            vals[i] = x;
            continue;
        }
        int64_t shape[TGC_MAX_DIMS];
        for (int d = 0; d < nd->out.ndim; d++)
            shape[d] = nd->out.shape[d];
        tgc_tensor *in[1] = {vals[nd->in[0]]};
        vals[i] = tgc_interp_run_node(nd, in, shape);
        assert_non_null(vals[i]);
    }
    return vals[g->outputs[0]];
}

static void check(tgc_op op, int64_t mask, int keepdim, tgc_dtype dt, int want_split)
{
    tgc_scope_push();
    tgc_graph *g = reduce_graph(op, mask, keepdim, dt);
    int64_t xs[4] = {4, 3, 5, 6};
    tgc_tensor *x = tgc_cast(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), dt);
    tgc_tensor *before = eval(g, x);
    tgc_vinfo type = g->nodes[g->outputs[0]].out;
    assert_int_equal(tgc_prepare_split_reductions(g), TGC_OK);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    assert_int_equal(count_op(g, op), want_split ? 2 : 1);
    const tgc_vinfo *t = &g->nodes[g->outputs[0]].out;
    assert_int_equal(t->dtype, type.dtype);
    assert_int_equal(t->ndim, type.ndim);
    for (int d = 0; d < t->ndim; d++)
        assert_int_equal(t->shape[d], type.shape[d]);
    if (want_split) /* the inner reduction sweeps H and W */
        assert_int_equal(g->nodes[g->nodes[g->outputs[0]].in[0]].attrs.i[0], 0xc);
    tgc_tensor *after = eval(g, x);
    int64_t n = tgc_numel(before);
    double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    tgc_tensor *a64 = tgc_cast(before, TGC_F64), *b64 = tgc_cast(after, TGC_F64);
    assert_int_equal(tgc_copy_to_host(a64, a, (size_t)n * sizeof *a), TGC_OK);
    assert_int_equal(tgc_copy_to_host(b64, b, (size_t)n * sizeof *b), TGC_OK);
    for (int64_t i = 0; i < n; i++)
        assert_true(fabs(a[i] - b[i]) <= 1e-5 * (1 + fabs(a[i])));
    free(a);
    free(b);
    tgc_graph_free(g);
    tgc_scope_pop();
}

static void test_split(void **state)
{
    (void)state;
    check(TGC_OP_SUM, 0xd, 0, TGC_F32, 1);  /* N, H, W */
    check(TGC_OP_SUM, 0xd, 1, TGC_F32, 1);  /* keepdim */
    check(TGC_OP_MEAN, 0xd, 1, TGC_F64, 1); /* mean of means */
    check(TGC_OP_MAX, 0xd, 0, TGC_F32, 1);
}

static void test_left_alone(void **state)
{
    (void)state;
    check(TGC_OP_SUM, 0xc, 0, TGC_F32, 0);  /* H, W: already contiguous rows */
    check(TGC_OP_SUM, 0x5, 0, TGC_F32, 0);  /* N, H: the last dim is kept */
    check(TGC_OP_SUM, 0xf, 0, TGC_F32, 0);  /* everything */
    check(TGC_OP_SUM, 0xd, 0, TGC_F16, 0);  /* half: no rounded intermediate */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_left_alone),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return r;
}
