/* Graph IR (src/ir/graph.h) built by hand: nodes with symbolic shapes, the verifier on good
 * and corrupt graphs (each corruption is TGC_ERR_INTERNAL with a message naming the node),
 * and the text and DOT printers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ir/shape_infer.h"

static tgc_graph *g;
static tgc_sdim s0;

static int setup(void **state)
{
    (void)state;
    tgc_clear_error();
    g = tgc_graph_create();
    if (!g)
        return -1;
    s0 = tgc_sym_new(g->syms, 2, 0, 0); /* the batch size of input 0, 2 at trace time */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tgc_graph_free(g);
    g = NULL;
    return 0;
}

static tgc_vinfo vi(tgc_dtype dt, int nd, tgc_sdim d0, tgc_sdim d1)
{
    tgc_vinfo v = {.dtype = dt, .ndim = nd};
    v.shape[0] = d0;
    v.shape[1] = d1;
    return v;
}

static int32_t add_input(tgc_bind_kind kind, int index, tgc_vinfo v)
{
    tgc_attrs a = {0};
    a.i[0] = kind;
    a.i[1] = index;
    a.ni = 2;
    int32_t id = tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &a, &v);
    assert_true(id >= 0);
    return id;
}

static int32_t add_node(tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a, tgc_vinfo v)
{
    int32_t id = tgc_graph_add(g, op, in, n_in, a, &v);
    assert_true(id >= 0);
    return id;
}

/* %0 = input {arg 0} f32[s0, 4]; %1 = input {arg 1} f32[s0, 4]; %2 = input {param 0} f32[4, 8]
 * %3 = add(%0, %1) f32[s0, 4]; %4 = matmul(%3, %2) f32[s0, 8] */
static void build_base(void)
{
    assert_int_equal(add_input(TGC_BIND_ARG, 0, vi(TGC_F32, 2, s0, 4)), 0);
    assert_int_equal(add_input(TGC_BIND_ARG, 1, vi(TGC_F32, 2, s0, 4)), 1);
    assert_int_equal(add_input(TGC_BIND_PARAM, 0, vi(TGC_F32, 2, 4, 8)), 2);
    assert_int_equal(add_node(TGC_OP_ADD, (int32_t[]){0, 1}, 2, NULL, vi(TGC_F32, 2, s0, 4)), 3);
    assert_int_equal(add_node(TGC_OP_MATMUL, (int32_t[]){3, 2}, 2, NULL, vi(TGC_F32, 2, s0, 8)), 4);
}

/* + %5 = sum(%4) {i=2,0} f32[s0]; %6 = mul_scalar(%5) {f=0.5} f32[s0];
 *   %7 = cast(%6) {to=f16} f16[s0]; return %4, %7 */
static void build_full(void)
{
    build_base();
    tgc_attrs sum = {0};
    sum.i[0] = 2; /* reduce dim 1 */
    sum.i[1] = 0;
    sum.ni = 2;
    assert_int_equal(add_node(TGC_OP_SUM, (int32_t[]){4}, 1, &sum, vi(TGC_F32, 1, s0, 0)), 5);
    tgc_attrs ms = {0};
    ms.f[0] = 0.5;
    ms.nf = 1;
    assert_int_equal(add_node(TGC_OP_MUL_SCALAR, (int32_t[]){5}, 1, &ms, vi(TGC_F32, 1, s0, 0)), 6);
    tgc_attrs cast = {0};
    cast.dtype = TGC_F16;
    assert_int_equal(add_node(TGC_OP_CAST, (int32_t[]){6}, 1, &cast, vi(TGC_F16, 1, s0, 0)), 7);
    assert_int_equal(tgc_graph_set_outputs(g, (int32_t[]){4, 7}, 2), TGC_OK);
}

/* ---- construction and verification ---- */

static void test_build_and_verify(void **state)
{
    (void)state;
    build_full();
    assert_int_equal(g->n_nodes, 8);
    assert_int_equal(g->n_outputs, 2);
    assert_int_equal(g->outputs[0], 4);
    assert_int_equal(g->outputs[1], 7);
    assert_int_equal(g->nodes[4].op, TGC_OP_MATMUL);
    assert_int_equal(g->nodes[4].n_in, 2);
    assert_int_equal(g->nodes[4].in[0], 3);
    assert_int_equal(g->nodes[4].in[1], 2);
    assert_true(tgc_sym_same(g->nodes[4].out.shape[0], s0));
    assert_int_equal(g->nodes[4].flags, 0);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    assert_int_equal(tgc_last_status(), TGC_OK);
    /* the recorded types are what inference computes */
    tgc_vinfo in[2] = {g->nodes[3].out, g->nodes[2].out}, out;
    tgc_attrs none = {0};
    assert_int_equal(tgc_infer(TGC_OP_MATMUL, in, 2, &none, g->syms, &out), TGC_OK);
    assert_int_equal(out.ndim, 2);
    assert_true(tgc_sym_same(out.shape[0], s0));
    assert_int_equal(out.shape[1], 8);
    /* the caller's input array was copied */
    int32_t ids[2] = {0, 1};
    int32_t id = add_node(TGC_OP_SUB, ids, 2, NULL, vi(TGC_F32, 2, s0, 4));
    ids[0] = 7;
    assert_int_equal(g->nodes[id].in[0], 0);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
}

static void test_empty_graph_verifies(void **state)
{
    (void)state;
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    char *t = tgc_graph_to_text(g);
    assert_non_null(t);
    assert_string_equal(t, "symbols: s0=in0.size(0)\nreturn\n");
    free(t);
}

static void test_many_nodes(void **state)
{
    (void)state;
    /* beyond the initial capacity: a chain of 300 adds */
    int32_t prev = add_input(TGC_BIND_ARG, 0, vi(TGC_F32, 2, s0, 4));
    int32_t x = prev;
    for (int i = 0; i < 300; i++)
        prev = add_node(TGC_OP_ADD, (int32_t[]){prev, x}, 2, NULL, vi(TGC_F32, 2, s0, 4));
    assert_int_equal(prev, 300);
    assert_int_equal(tgc_graph_set_outputs(g, &prev, 1), TGC_OK);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    /* replacing the outputs */
    assert_int_equal(tgc_graph_set_outputs(g, (int32_t[]){1, 2, 3}, 3), TGC_OK);
    assert_int_equal(g->n_outputs, 3);
    assert_int_equal(g->outputs[2], 3);
    assert_int_equal(tgc_graph_set_outputs(g, NULL, 0), TGC_OK);
    assert_int_equal(g->n_outputs, 0);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
}

static void test_mutating_node_flag(void **state)
{
    (void)state;
    /* batch_norm in training with running stats writes its inputs */
    tgc_vinfo x = {.dtype = TGC_F32, .ndim = 4, .shape = {0, 3, 4, 4}};
    x.shape[0] = s0;
    add_input(TGC_BIND_ARG, 0, x);
    add_input(TGC_BIND_PARAM, 0, vi(TGC_F32, 1, 3, 0));
    add_input(TGC_BIND_PARAM, 1, vi(TGC_F32, 1, 3, 0));
    tgc_attrs bn = {0};
    bn.i[0] = 1;
    bn.i[1] = TGC_BN_HAS_STATS;
    bn.ni = 2;
    bn.f[0] = 0.1;
    bn.f[1] = 1e-5;
    bn.nf = 2;
    int32_t id = add_node(TGC_OP_BATCH_NORM, (int32_t[]){0, 1, 2}, 3, &bn, x);
    assert_true(g->nodes[id].flags & TGC_NODE_MUTATES);
    bn.i[0] = 0; /* eval: reads only */
    int32_t id2 = add_node(TGC_OP_BATCH_NORM, (int32_t[]){0, 1, 2}, 3, &bn, x);
    assert_false(g->nodes[id2].flags & TGC_NODE_MUTATES);
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    char *t = tgc_graph_to_text(g);
    assert_non_null(t);
    if (!strstr(t, "%3 = batch_norm(%0, %1, %2) {i=1,1 f=0.1,1e-05} : f32[s0, 3, 4, 4]  ; "
                   "writes its inputs\n"))
        fail_msg("text lacks the training batch_norm line:\n%s", t);
    if (!strstr(t, "%4 = batch_norm(%0, %1, %2) {i=0,1 f=0.1,1e-05} : f32[s0, 3, 4, 4]\n"))
        fail_msg("text lacks the eval batch_norm line:\n%s", t);
    free(t);
}

/* ---- corrupt graphs ---- */

static void test_verify_input_not_defined_before(void **state)
{
    (void)state;
    build_base();
    /* %5 uses itself */
    add_node(TGC_OP_ADD, (int32_t[]){4, 5}, 2, NULL, vi(TGC_F32, 2, s0, 8));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL,
                "tgc verify: node %5 (add) uses %5, which is not defined before it");
}

static void test_verify_forward_reference(void **state)
{
    (void)state;
    build_base();
    g->nodes[3].in[1] = 4; /* add reads the matmul that follows it */
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) uses %4");
    g->nodes[3].in[1] = -1;
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) uses %-1");
    g->nodes[3].in[1] = 1000;
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) uses %1000");
}

static void test_verify_wrong_arity(void **state)
{
    (void)state;
    build_base();
    add_node(TGC_OP_ADD, (int32_t[]){0}, 1, NULL, vi(TGC_F32, 2, s0, 4));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "tgc verify: node %5 (add) has 1 inputs");
    tgc_graph_free(g);

    g = tgc_graph_create();
    s0 = tgc_sym_new(g->syms, 2, 0, 0);
    build_base();
    add_node(TGC_OP_MATMUL, (int32_t[]){3, 2, 2}, 3, NULL, vi(TGC_F32, 2, s0, 8));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %5 (matmul) has 3 inputs");
    tgc_graph_free(g);

    g = tgc_graph_create();
    s0 = tgc_sym_new(g->syms, 2, 0, 0);
    add_input(TGC_BIND_ARG, 0, vi(TGC_F32, 2, s0, 4));
    tgc_attrs a = {0};
    a.ni = 2;
    add_node(TGC_OP_INPUT, (int32_t[]){0}, 1, &a, vi(TGC_F32, 2, s0, 4));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %1 (input) has 1 inputs");
}

static void test_verify_wrong_recorded_type(void **state)
{
    (void)state;
    build_base();
    tgc_vinfo good = g->nodes[3].out;

    g->nodes[3].out.shape[1] = 5; /* add recorded as [s0, 5] */
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL,
                "tgc verify: node %3 (add) records a type that inference does not reproduce");
    g->nodes[3].out = good;
    g->nodes[3].out.shape[0] = 2; /* the hint instead of the symbol */
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) records a type");
    g->nodes[3].out = good;
    g->nodes[3].out.dtype = TGC_F16; /* dtype */
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) records a type");
    g->nodes[3].out = good;
    g->nodes[3].out.ndim = 3; /* rank */
    g->nodes[3].out.shape[2] = 1;
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %3 (add) records a type");
    g->nodes[3].out = good;
    tgc_clear_error();
    assert_int_equal(tgc_graph_verify(g), TGC_OK);

    g->nodes[4].out.shape[1] = 4; /* matmul recorded as [s0, 4] */
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL,
                "node %4 (matmul) records a type that inference does not reproduce");
}

static void test_verify_inference_failure(void **state)
{
    (void)state;
    build_base();
    /* the weight's recorded type no longer fits the matmul */
    g->nodes[2].out.shape[0] = 5;
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL,
                "tgc verify: node %4 (matmul) fails inference: tgc_matmul: inner dims differ");
}

static void test_verify_unknown_op(void **state)
{
    (void)state;
    build_base();
    add_node(TGC_OP_COUNT, (int32_t[]){4}, 1, NULL, vi(TGC_F32, 2, s0, 8));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "tgc verify: node %5 has unknown op");
}

static void test_verify_bad_outputs(void **state)
{
    (void)state;
    build_base();
    assert_int_equal(tgc_graph_set_outputs(g, (int32_t[]){4, 9}, 2), TGC_OK);
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "tgc verify: output 1 names %9");
    assert_int_equal(tgc_graph_set_outputs(g, (int32_t[]){-2}, 1), TGC_OK);
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "output 0 names %-2");
}

/* An INPUT node's recorded type is all there is to check; a corrupt one is an error too. */
static void test_verify_corrupt_input_type(void **state)
{
    (void)state;
    build_base();
    g->nodes[1].out.ndim = TGC_MAX_DIMS + 1;
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "tgc verify: node %1 (input)");
    g->nodes[1].out.ndim = 2;
    tgc_clear_error();
    assert_int_equal(tgc_graph_verify(g), TGC_OK);
    /* an unused input with an unknown dtype */
    add_input(TGC_BIND_ARG, 2, vi((tgc_dtype)99, 1, 3, 0));
    check_error(tgc_graph_verify(g), TGC_ERR_INTERNAL, "node %5 (input)");
}

/* ---- printers ---- */

static void test_text(void **state)
{
    (void)state;
    build_full();
    char *t = tgc_graph_to_text(g);
    assert_non_null(t);
    assert_string_equal(t, "symbols: s0=in0.size(0)\n"
                           "%0 = input() {arg 0} : f32[s0, 4]\n"
                           "%1 = input() {arg 1} : f32[s0, 4]\n"
                           "%2 = input() {param 0} : f32[4, 8]\n"
                           "%3 = add(%0, %1) : f32[s0, 4]\n"
                           "%4 = matmul(%3, %2) : f32[s0, 8]\n"
                           "%5 = sum(%4) {i=2,0} : f32[s0]\n"
                           "%6 = mul_scalar(%5) {f=0.5} : f32[s0]\n"
                           "%7 = cast(%6) {to=f16} : f16[s0]\n"
                           "return %4, %7\n");
    free(t);
}

static void test_text_symbols_and_bindings(void **state)
{
    (void)state;
    tgc_sdim s1 = tgc_sym_new(g->syms, 7, 1, 2);
    tgc_vinfo x = {.dtype = TGC_BF16, .ndim = 3};
    x.shape[0] = s0;
    x.shape[1] = tgc_sym_mul(g->syms, s1, 2);
    x.shape[2] = 1;
    add_input(TGC_BIND_CAPTURED, 3, x);
    add_input(TGC_BIND_CONST, 0, vi(TGC_I64, 0, 0, 0));
    char *t = tgc_graph_to_text(g);
    assert_non_null(t);
    assert_string_equal(t, "symbols: s0=in0.size(0) s1=in1.size(2)\n"
                           "%0 = input() {captured 3} : bf16[s0, s1*2, 1]\n"
                           "%1 = input() {const 0} : i64[]\n"
                           "return\n");
    free(t);
    char buf[64];
    tgc_vinfo_format_shape(g->syms, &x, buf, sizeof buf);
    assert_string_equal(buf, "[s0, s1*2, 1]");
    /* truncation is safe and terminated */
    char small[6];
    memset(small, 'x', sizeof small);
    int n = tgc_vinfo_format_shape(g->syms, &x, small, sizeof small);
    assert_int_equal(small[5], 0);
    assert_int_equal(n, (int)strlen(small));
    assert_memory_equal(small, "[s0, ", 5);
}

static void check_has(const char *text, const char *line)
{
    if (!strstr(text, line))
        fail_msg("DOT output lacks \"%s\":\n%s", line, text);
}

static void test_dot(void **state)
{
    (void)state;
    build_full();
    char *d = tgc_graph_to_dot(g);
    assert_non_null(d);
    assert_memory_equal(d, "digraph tgc {\n", 14);
    check_has(d, "  node [shape=box, fontname=\"monospace\"];\n");
    check_has(d, "  n0 [label=\"%0 input\\nf32[s0, 4]\", style=filled, fillcolor=lightgrey];\n");
    check_has(d, "  n2 [label=\"%2 input\\nf32[4, 8]\", style=filled, fillcolor=lightgrey];\n");
    check_has(d, "  n3 [label=\"%3 add\\nf32[s0, 4]\"];\n");
    check_has(d, "  n4 [label=\"%4 matmul\\nf32[s0, 8]\"];\n");
    check_has(d, "  n7 [label=\"%7 cast\\nf16[s0]\"];\n");
    check_has(d, "  n0 -> n3;\n");
    check_has(d, "  n1 -> n3;\n");
    check_has(d, "  n3 -> n4;\n");
    check_has(d, "  n2 -> n4;\n");
    check_has(d, "  n6 -> n7;\n");
    check_has(d, "  out0 [shape=oval, label=\"out 0\"];\n");
    check_has(d, "  n4 -> out0;\n");
    check_has(d, "  out1 [shape=oval, label=\"out 1\"];\n");
    check_has(d, "  n7 -> out1;\n");
    size_t len = strlen(d);
    assert_true(len > 2);
    assert_string_equal(d + len - 2, "}\n");
    /* exactly one edge per node input, plus one per output */
    int edges = 0;
    for (const char *p = d; (p = strstr(p, " -> ")); p++)
        edges++;
    assert_int_equal(edges, 2 + 2 + 1 + 1 + 1 + 2);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_build_and_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_graph_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mutating_node_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_input_not_defined_before, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_forward_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_wrong_arity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_wrong_recorded_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_inference_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_unknown_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_bad_outputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_corrupt_input_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_symbols_and_bindings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
