/* The fusion pass: which nodes share a kernel. Graphs are traced (on interp) or built node
 * by node, prepared the way the LLVM backend prepares them (the pass pipeline keeping the
 * activations whole), and fused with the backend's classification rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jit/jit.h"
#include "backend/interp/interp.h"
#include "passes/passes.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

/* ---- fixture ---- */

/* Traces fn on interp and returns its prepared graph (caller frees). */
static tgc_graph *trace_prepared(tgc_model_fn fn, tgc_tensor **in, int n_in, int n_out,
                                 tgc_dynamic dyn)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_INTERP;
    cfg.dynamic = dyn;
    tgc_fn *f = tgc_compile(fn, "traced", &cfg);
    assert_non_null(f);
    tgc_tensor *out[4] = {0};
    if (tgc_call(f, NULL, in, n_in, out, n_out) != TGC_OK)
        fail_msg("call: %s", tgc_last_error());
    tgc_variant *v = f->variants;
    assert_non_null(v);
    assert_false(v->is_eager);
    tgc_graph *g = tgc_graph_clone(v->graph);
    assert_non_null(g);
    assert_int_equal(tgc_graph_import_consts(g, v->bound, v->guards.n_captured), TGC_OK);
    tgc_fn_free(f);
    if (tgc_passes_run_opts(g, &cfg, "traced", TGC_DECOMPOSE_KEEP_ACTIVATIONS,
                            tgc_interp_eval_contiguous) != TGC_OK)
        fail_msg("passes: %s", tgc_last_error());
    return g;
}

static tgc_tensor *randn4(int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    tgc_tensor *t = tgc_randn(s, nd, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* Nodes that fusion must place: everything but inputs and (non-contiguous) views. */
static int n_compute(const tgc_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += gb_classify(g, i) != TGC_FUSE_FREE;
    return n;
}

/* Checks the invariants every fusion has: each compute node in exactly one group, members
 * in topological order, groups reading only older groups. */
static void expect_well_formed(const tgc_graph *g, const tgc_fusion *f)
{
    int placed = 0;
    for (int gi = 0; gi < f->n_groups; gi++) {
        const tgc_group *gr = &f->groups[gi];
        assert_true(gr->n_members >= 1);
        for (int m = 0; m < gr->n_members; m++) {
            int32_t i = gr->members[m];
            assert_int_equal(f->group_of[i], gi);
            if (m)
                assert_true(i > gr->members[m - 1]);
            placed++;
            for (int k = 0; k < g->nodes[i].n_in; k++) {
                int32_t u = g->nodes[i].in[k];
                while (tgc_is_view_op(g->nodes[u].op))
                    u = g->nodes[u].in[0];
                assert_true(f->group_of[u] <= gi);
            }
        }
    }
    assert_int_equal(placed, n_compute(g));
}

/* ---- traced functions ---- */

static tgc_status fn_pointwise_bcast(tgc_module *m, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *y = tgc_mul_scalar(tgc_exp(tgc_add(in[0], in[1])), 3.0);
    out[0] = tgc_add(tgc_relu(tgc_sub(y, in[2])), in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_softmax(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_softmax(in[0], 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_log_softmax_first(tgc_module *m, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_log_softmax(in[0], 0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_layer_norm(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_sum_middle(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int d[1] = {1};
    out[0] = tgc_mul_scalar(tgc_sum(tgc_exp(in[0]), d, 1, 0), 0.5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_two_reductions(tgc_module *m, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int d0[1] = {0}, d1[1] = {1};
    tgc_tensor *e = tgc_exp(in[0]);
    out[0] = tgc_sum(e, d0, 1, 0);
    out[1] = tgc_max(e, d1, 1, 0);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

/* conv2d(x, w, bias) + residual, then relu */
static tgc_status fn_conv_block(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *c = tgc_conv2d(in[0], in[1], in[2], &(tgc_conv2d_opts){.padding = {1, 1}});
    out[0] = tgc_relu(tgc_add(c, in[3]));
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_linear_used_twice(tgc_module *m, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *y = tgc_linear(in[0], in[1], in[2]);
    out[0] = tgc_relu(y);
    out[1] = tgc_sigmoid(y);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_linear_and_output(tgc_module *m, tgc_tensor *const *in, int n_in,
                                       tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *y = tgc_linear(in[0], in[1], NULL);
    out[0] = y;
    out[1] = tgc_gelu(y);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_linear_gelu(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_gelu(tgc_linear(in[0], in[1], in[2]));
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_pool_head(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *p = tgc_adaptive_avg_pool2d(tgc_relu(in[0]), 1, 1);
    out[0] = tgc_linear(tgc_flatten(p, 1, 3), in[1], NULL);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* ---- pointwise ---- */

static void pointwise_chain_with_broadcasting_is_one_loop_group(void **state)
{
    (void)state;
    tgc_tensor *in[3] = {randn4(2, 4, 8, 0, 0), randn4(1, 8, 0, 0, 0), randn4(2, 1, 8, 0, 0)};
    tgc_graph *g = trace_prepared(fn_pointwise_bcast, in, 3, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(gr->kind, TGC_GROUP_LOOP);
    assert_int_equal(gr->anchor, -1);
    assert_int_equal(gr->domain.ndim, 2);
    assert_int_equal(gr->domain.shape[0], 4);
    assert_int_equal(gr->domain.shape[1], 8);
    assert_int_equal(gr->n_members, 6); /* add exp mul_scalar sub relu add */
    for (int m = 0; m < gr->n_members; m++)
        assert_int_equal(f.level[gr->members[m]], 0);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void pointwise_chain_on_symbolic_shapes_is_one_group(void **state)
{
    (void)state;
    tgc_tensor *in[3] = {randn4(2, 4, 8, 0, 0), randn4(1, 8, 0, 0, 0), randn4(2, 1, 8, 0, 0)};
    tgc_graph *g = trace_prepared(fn_pointwise_bcast, in, 3, 1, TGC_DYNAMIC_ALWAYS);
    assert_true(tgc_sym_count(g->syms) >= 2);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    assert_false(TGC_SDIM_IS_CONST(f.groups[0].domain.shape[0]));
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* ---- reductions ---- */

static int max_level(const tgc_fusion *f, const tgc_group *gr)
{
    int lv = 0;
    for (int m = 0; m < gr->n_members; m++)
        if (f->level[gr->members[m]] > lv)
            lv = f->level[gr->members[m]];
    return lv;
}

static void softmax_is_one_group_of_three_phases(void **state)
{
    (void)state;
    tgc_tensor *in[1] = {randn4(2, 4, 10, 0, 0)};
    tgc_graph *g = trace_prepared(fn_softmax, in, 1, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(gr->kind, TGC_GROUP_LOOP);
    assert_int_equal(g->nodes[gr->anchor].op, TGC_OP_MAX);
    assert_int_equal(gr->red_mask, 0x2);
    assert_int_equal(gr->domain.shape[0], 4);
    assert_int_equal(gr->domain.shape[1], 10);
    assert_int_equal(gr->n_members, 5); /* max sub exp sum div */
    assert_int_equal(max_level(&f, gr), 2);
    int32_t mx = gb_find_op(g, TGC_OP_MAX, 0), sm = gb_find_op(g, TGC_OP_SUM, 0);
    int32_t ex = gb_find_op(g, TGC_OP_EXP, 0), dv = gb_find_op(g, TGC_OP_DIV, 0);
    assert_int_equal(f.level[mx], 1);
    assert_int_equal(f.level[ex], 1);
    assert_int_equal(f.level[sm], 2);
    assert_int_equal(f.level[dv], 2);
    assert_true(f.is_row[mx] && f.is_row[sm]);
    assert_false(f.is_row[ex] || f.is_row[dv]);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void log_softmax_over_first_dim_on_symbolic_shapes_is_one_group(void **state)
{
    (void)state;
    tgc_tensor *in[1] = {randn4(2, 6, 3, 0, 0)};
    tgc_graph *g = trace_prepared(fn_log_softmax_first, in, 1, 1, TGC_DYNAMIC_ALWAYS);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    assert_int_equal(f.groups[0].red_mask, 0x1);
    assert_int_equal(g->nodes[f.groups[0].anchor].op, TGC_OP_MAX);
    assert_int_equal(max_level(&f, &f.groups[0]), 2);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void layer_norm_with_affine_is_one_group(void **state)
{
    (void)state;
    tgc_tensor *in[3] = {randn4(3, 2, 3, 16, 0), randn4(1, 16, 0, 0, 0), randn4(1, 16, 0, 0, 0)};
    tgc_graph *g = trace_prepared(fn_layer_norm, in, 3, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(g->nodes[gr->anchor].op, TGC_OP_MEAN);
    assert_int_equal(gr->red_mask, 0x4);
    assert_int_equal(gr->domain.ndim, 3);
    assert_int_equal(max_level(&f, gr), 2);
    /* the variance's eps and rsqrt are per row */
    int32_t rs = gb_find_op(g, TGC_OP_RSQRT, 0);
    assert_true(f.is_row[rs]);
    assert_int_equal(f.level[rs], 2);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void sum_over_middle_dim_takes_prologue_and_row_epilogue(void **state)
{
    (void)state;
    tgc_tensor *in[1] = {randn4(3, 4, 6, 5, 0)};
    tgc_graph *g = trace_prepared(fn_sum_middle, in, 1, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(g->nodes[gr->anchor].op, TGC_OP_SUM);
    assert_int_equal(gr->red_mask, 0x2);
    assert_int_equal(gr->domain.shape[1], 6);
    int32_t ex = gb_find_op(g, TGC_OP_EXP, 0), sc = gb_find_op(g, TGC_OP_MUL_SCALAR, 0);
    assert_false(f.is_row[ex]);
    assert_true(f.is_row[sc]); /* [4, 5]: the kept dims */
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void reductions_over_different_dims_get_their_own_groups(void **state)
{
    (void)state;
    tgc_tensor *in[1] = {randn4(2, 5, 7, 0, 0)};
    tgc_graph *g = trace_prepared(fn_two_reductions, in, 1, 2, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    int32_t ex = gb_find_op(g, TGC_OP_EXP, 0), sm = gb_find_op(g, TGC_OP_SUM, 0);
    int32_t mx = gb_find_op(g, TGC_OP_MAX, 0);
    assert_int_equal(f.group_of[ex], f.group_of[sm]);
    assert_int_equal(f.groups[f.group_of[sm]].red_mask, 0x1);
    assert_int_not_equal(f.group_of[mx], f.group_of[ex]);
    assert_int_equal(f.groups[f.group_of[mx]].red_mask, 0x2);
    /* the second group reads the exp from memory */
    uint8_t *mat = kir_materialized(g, &f);
    assert_non_null(mat);
    assert_true(mat[ex]);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void adaptive_avg_pool_to_one_is_a_reduction(void **state)
{
    (void)state;
    tgc_tensor *in[2] = {randn4(4, 2, 3, 4, 4), randn4(2, 5, 3, 0, 0)};
    tgc_graph *g = trace_prepared(fn_pool_head, in, 2, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(gr->kind, TGC_GROUP_LOOP);
    assert_int_equal(g->nodes[gr->anchor].op, TGC_OP_ADAPTIVE_AVG_POOL2D);
    assert_int_equal(gr->red_mask, 0xc);
    assert_int_equal(gr->n_members, 2); /* relu, pool */
    assert_int_equal(f.groups[1].kind, TGC_GROUP_TEMPLATE);
    assert_int_equal(g->nodes[f.groups[1].anchor].op, TGC_OP_LINEAR);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void window_pool_starts_a_group_its_consumers_join(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[4] = {2, 3, 8, 8};
    int32_t x = gb_input(g, TGC_F32, 4, s);
    int32_t r = gb_un(g, TGC_OP_RELU, x);
    const int64_t p[6] = {2, 2, 2, 2, 0, 0};
    int32_t mp = gb_ints(g, TGC_OP_MAX_POOL2D, r, p, 6); /* [2, 3, 4, 4] */
    int32_t sc = gb_scalar(g, TGC_OP_MUL_SCALAR, mp, 0.5);
    const int64_t one[2] = {1, 1};
    int32_t ap = gb_ints(g, TGC_OP_ADAPTIVE_AVG_POOL2D, sc, one, 2);
    gb_outputs(g, &ap, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    assert_int_equal(f.group_of[r], 0);
    const tgc_group *gr = &f.groups[1];
    assert_int_equal(gr->kind, TGC_GROUP_LOOP);
    assert_int_equal(gr->members[0], mp);
    assert_int_equal(f.group_of[sc], 1);
    assert_int_equal(f.group_of[ap], 1);
    assert_int_equal(gr->anchor, ap);
    assert_int_equal(gr->red_mask, 0xc);
    assert_int_equal(gr->domain.shape[2], 4); /* the pool's output */
    uint8_t *mat = kir_materialized(g, &f);
    assert_true(mat[r]); /* the window reads its input from memory */
    assert_false(mat[mp]);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* ---- templates ---- */

static void conv_bias_residual_relu_is_one_template_group(void **state)
{
    (void)state;
    tgc_tensor *in[4] = {randn4(4, 2, 3, 6, 6), randn4(4, 4, 3, 3, 3), randn4(1, 4, 0, 0, 0),
                         randn4(4, 2, 4, 6, 6)};
    tgc_graph *g = trace_prepared(fn_conv_block, in, 4, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    const tgc_group *gr = &f.groups[0];
    assert_int_equal(gr->kind, TGC_GROUP_TEMPLATE);
    assert_int_equal(g->nodes[gr->anchor].op, TGC_OP_CONV2D);
    assert_int_equal(g->nodes[gr->tip].op, TGC_OP_RELU);
    assert_int_equal(gr->n_members, 3);
    assert_int_equal(g->nodes[gr->members[1]].op, TGC_OP_ADD);
    /* only the tip needs a buffer */
    uint8_t *mat = kir_materialized(g, &f);
    assert_false(mat[gr->anchor]);
    assert_false(mat[gr->members[1]]);
    assert_true(mat[gr->tip]);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void linear_gelu_keeps_gelu_whole_in_the_epilogue(void **state)
{
    (void)state;
    tgc_tensor *in[3] = {randn4(2, 5, 8, 0, 0), randn4(2, 3, 8, 0, 0), randn4(1, 3, 0, 0, 0)};
    tgc_graph *g = trace_prepared(fn_linear_gelu, in, 3, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 1);
    assert_int_equal(f.groups[0].kind, TGC_GROUP_TEMPLATE);
    assert_int_equal(g->nodes[f.groups[0].tip].op, TGC_OP_GELU);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void template_output_used_twice_stops_the_epilogue(void **state)
{
    (void)state;
    tgc_tensor *in[3] = {randn4(2, 5, 8, 0, 0), randn4(2, 3, 8, 0, 0), randn4(1, 3, 0, 0, 0)};
    tgc_graph *g = trace_prepared(fn_linear_used_twice, in, 3, 2, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    int32_t lin = gb_find_op(g, TGC_OP_LINEAR, 0), re = gb_find_op(g, TGC_OP_RELU, 0);
    int32_t sg = gb_find_op(g, TGC_OP_SIGMOID, 0);
    const tgc_group *gr = &f.groups[f.group_of[lin]];
    assert_int_equal(gr->kind, TGC_GROUP_TEMPLATE);
    assert_int_equal(gr->n_members, 1);
    assert_int_equal(gr->tip, lin);
    assert_int_not_equal(f.group_of[re], f.group_of[lin]);
    assert_int_not_equal(f.group_of[sg], f.group_of[lin]);
    assert_int_equal(f.groups[f.group_of[re]].kind, TGC_GROUP_LOOP);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void template_output_that_is_a_graph_output_stops_the_epilogue(void **state)
{
    (void)state;
    tgc_tensor *in[2] = {randn4(2, 5, 8, 0, 0), randn4(2, 3, 8, 0, 0)};
    tgc_graph *g = trace_prepared(fn_linear_and_output, in, 2, 2, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    int32_t lin = gb_find_op(g, TGC_OP_LINEAR, 0), ge = gb_find_op(g, TGC_OP_GELU, 0);
    assert_int_equal(f.n_groups, 2);
    assert_int_equal(f.groups[f.group_of[lin]].n_members, 1);
    assert_int_not_equal(f.group_of[ge], f.group_of[lin]);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void epilogue_of_another_shape_or_dtype_is_not_fused(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sa[2] = {4, 6}, sb[2] = {6, 5}, sr[1] = {5};
    int32_t a = gb_input(g, TGC_F32, 2, sa), b = gb_input(g, TGC_F32, 2, sb);
    int32_t r = gb_input(g, TGC_F32, 1, sr);
    int32_t mm = gb_bin(g, TGC_OP_MATMUL, a, b);
    int32_t s = gb_reduce(g, TGC_OP_SUM, mm, 0x2, 1); /* a reduction: never an epilogue */
    int32_t mm2 = gb_bin(g, TGC_OP_MATMUL, a, b);
    tgc_attrs c = {.dtype = TGC_F64};
    int32_t cs = gb_op(g, TGC_OP_CAST, &mm2, 1, &c); /* another dtype */
    int32_t mm3 = gb_bin(g, TGC_OP_MATMUL, a, b);
    int32_t ad = gb_bin(g, TGC_OP_ADD, mm3, r); /* a broadcast [5] operand is fine */
    int32_t outs[3] = {s, cs, ad};
    gb_outputs(g, outs, 3);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_not_equal(f.group_of[s], f.group_of[mm]);
    assert_int_not_equal(f.group_of[cs], f.group_of[mm2]);
    assert_int_equal(f.group_of[ad], f.group_of[mm3]);
    assert_int_equal(f.groups[f.group_of[mm3]].tip, ad);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* ---- scheduling rules ---- */

static void node_never_joins_a_group_older_than_its_other_operands(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[2] = {4, 8}, sw[1] = {8};
    int32_t x = gb_input(g, TGC_F32, 2, sx), w = gb_input(g, TGC_F32, 1, sw);
    int32_t a = gb_un(g, TGC_OP_EXP, x); /* group 0, [4, 8] */
    int32_t b = gb_un(g, TGC_OP_EXP, w); /* group 1, [8] */
    /* c could only join group 0 (group 1 has another domain), but it reads group 1: joining
     * group 0 would make group 0 depend on a later group */
    int32_t c = gb_bin(g, TGC_OP_ADD, a, b);
    gb_outputs(g, &c, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 3);
    assert_int_equal(f.group_of[a], 0);
    assert_int_equal(f.group_of[b], 1);
    assert_int_equal(f.group_of[c], 2);
    tgc_fusion_free(&f);

    /* the same with an opaque newer group: cat(...) cannot take the add either */
    tgc_graph *h = tgc_graph_create();
    int32_t y = gb_input(h, TGC_F32, 2, sx), z = gb_input(h, TGC_F32, 2, sx);
    int32_t e = gb_un(h, TGC_OP_EXP, y);
    int64_t half[4] = {1, 0, 4, 1}; /* [:, :4] */
    int32_t hy = gb_ints(h, TGC_OP_SLICE, y, half, 4), hz = gb_ints(h, TGC_OP_SLICE, z, half, 4);
    int32_t cin[2] = {hy, hz};
    tgc_attrs ca = {.ni = 1};
    ca.i[0] = 1;
    int32_t cat = gb_op(h, TGC_OP_CAT, cin, 2, &ca); /* [4, 8] */
    int32_t d = gb_bin(h, TGC_OP_ADD, e, cat);
    gb_outputs(h, &d, 1);
    gb_fuse(h, &f);
    expect_well_formed(h, &f);
    assert_int_equal(f.groups[f.group_of[cat]].kind, TGC_GROUP_OPAQUE);
    assert_int_equal(f.group_of[d], 2);
    assert_int_not_equal(f.group_of[d], f.group_of[e]);
    tgc_fusion_free(&f);
    tgc_graph_free(h);
    tgc_graph_free(g);
}

static void node_joins_the_newest_group_when_older_operands_allow(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[2] = {4, 8};
    int32_t x = gb_input(g, TGC_F32, 2, sx), y = gb_input(g, TGC_F32, 2, sx);
    int32_t a = gb_un(g, TGC_OP_EXP, x);                           /* group 0 */
    int32_t s = gb_reduce(g, TGC_OP_SUM, y, 0x2, 1);               /* group 1, reduces y's rows */
    int32_t c = gb_bin(g, TGC_OP_ADD, a, gb_un(g, TGC_OP_NEG, s)); /* reads 0 and 1 */
    gb_outputs(g, &c, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    assert_int_equal(f.group_of[c], 1); /* an epilogue of the reduction, reading group 0 */
    assert_false(f.is_row[c]);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* batch norm's backward: a per-channel scale made from an older kernel's value (read through
 * a view, so that kernel cannot take it) joins the newest kernel, the reduction over dy, as a
 * row value, and dx = (dy - sum) * scale follows it there: one kernel, not three */
static void node_from_older_kernels_joins_the_newest_it_fits(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[4] = {2, 3, 4, 4}, sc[1] = {3}, sp[4] = {1, 3, 1, 1};
    int32_t dy = gb_input(g, TGC_F32, 4, sx), r = gb_input(g, TGC_F32, 1, sc);
    int32_t w = gb_input(g, TGC_F32, 4, sp);
    int32_t t = gb_un(g, TGC_OP_EXP, r); /* group 0, [3] */
    int64_t pc[4] = {1, 3, 1, 1};
    int32_t tv = gb_ints(g, TGC_OP_RESHAPE, t, pc, 4);
    int32_t s = gb_reduce(g, TGC_OP_SUM, dy, 0xd, 1); /* group 1 */
    int32_t scale = gb_bin(g, TGC_OP_MUL, tv, w);
    int32_t dx = gb_bin(g, TGC_OP_MUL, gb_bin(g, TGC_OP_SUB, dy, s), scale);
    gb_outputs(g, &dx, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    assert_int_equal(f.group_of[t], 0);
    assert_int_equal(f.group_of[scale], 1);
    assert_true(f.is_row[scale]);
    assert_int_equal(f.group_of[dx], 1);
    assert_false(f.is_row[dx]);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* A write in place orders the readers of what it writes only: reading v before v's own write
 * joins the kernel of a producer older than an earlier write of u; reading u after u's write
 * waits for it. */
static void write_in_place_orders_only_readers_of_its_value(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s8[1] = {8};
    int32_t x = gb_input(g, TGC_F32, 1, s8), u = gb_input(g, TGC_F32, 1, s8);
    int32_t v = gb_input(g, TGC_F32, 1, s8);
    int32_t a = gb_un(g, TGC_OP_EXP, x); /* group 0 */
    int32_t wu = gb_bin(g, TGC_OP_ASSIGN, u, a);
    int32_t b = gb_bin(g, TGC_OP_ADD, a, v);
    int32_t wv = gb_bin(g, TGC_OP_ASSIGN, v, b);
    int32_t c = gb_bin(g, TGC_OP_MUL, u, x);
    gb_outputs(g, &c, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.group_of[b], f.group_of[a]);
    assert_true(f.group_of[wu] < f.group_of[wv]);
    assert_true(f.group_of[c] > f.group_of[wu]);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void view_of_an_in_group_value_is_read_from_memory(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {4, 4};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t a = gb_un(g, TGC_OP_EXP, x);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, a, (int64_t[]){1, 0}, 2);
    int32_t c = gb_bin(g, TGC_OP_ADD, a, t); /* a + a^T */
    int32_t d = gb_un(g, TGC_OP_RELU, c);
    gb_outputs(g, &d, 1);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.n_groups, 2);
    assert_int_equal(f.group_of[a], 0);
    assert_int_equal(f.group_of[t], -1); /* views belong to no group */
    assert_int_equal(f.group_of[c], 1);
    assert_int_equal(f.group_of[d], 1);
    uint8_t *mat = kir_materialized(g, &f);
    assert_true(mat[a]);
    assert_false(mat[c]);
    assert_true(mat[d]);
    free(mat);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

static void contiguous_copy_is_pointwise_and_other_dtypes_opaque(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 5};
    int32_t x = gb_input(g, TGC_F32, 2, s), i = gb_input(g, TGC_I32, 2, s);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){1, 0}, 2);
    int32_t c = gb_un(g, TGC_OP_CONTIGUOUS, t);
    int32_t e = gb_un(g, TGC_OP_EXP, c);
    int32_t ti = gb_ints(g, TGC_OP_PERMUTE, i, (int64_t[]){1, 0}, 2);
    int32_t ci = gb_un(g, TGC_OP_CONTIGUOUS, ti);
    int32_t outs[2] = {e, ci};
    gb_outputs(g, outs, 2);
    tgc_fusion f;
    gb_fuse(g, &f);
    expect_well_formed(g, &f);
    assert_int_equal(f.group_of[c], f.group_of[e]);
    assert_int_equal(f.groups[f.group_of[c]].kind, TGC_GROUP_LOOP);
    assert_int_equal(f.groups[f.group_of[ci]].kind, TGC_GROUP_OPAQUE);
    tgc_fusion_free(&f);
    tgc_graph_free(g);
}

/* ---- text ---- */

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void fusion_text_names_groups_domains_and_members(void **state)
{
    (void)state;
    tgc_tensor *in[1] = {randn4(2, 4, 10, 0, 0)};
    tgc_graph *g = trace_prepared(fn_softmax, in, 1, 1, TGC_DYNAMIC_NEVER);
    tgc_fusion f;
    gb_fuse(g, &f);
    char *t = tgc_fusion_to_text(g, &f);
    assert_non_null(t);
    assert_non_null(strstr(t, "group 0 loop [4, 10] reduce mask 0x2:"));
    char want[32];
    snprintf(want, sizeof want, " %%%d max", f.groups[0].anchor);
    assert_non_null(strstr(t, want));
    assert_non_null(strstr(t, " exp"));
    assert_non_null(strstr(t, " div"));
    assert_true(strstr(t, " exp") < strstr(t, " div"));
    assert_int_equal(count_lines(t), 1);
    free(t);
    tgc_fusion_free(&f);
    tgc_graph_free(g);

    tgc_tensor *cin[4] = {randn4(4, 2, 3, 6, 6), randn4(4, 4, 3, 3, 3), randn4(1, 4, 0, 0, 0),
                          randn4(4, 2, 4, 6, 6)};
    g = trace_prepared(fn_conv_block, cin, 4, 1, TGC_DYNAMIC_NEVER);
    gb_fuse(g, &f);
    t = tgc_fusion_to_text(g, &f);
    assert_non_null(strstr(t, "group 0 template [2, 4, 6, 6]:"));
    assert_non_null(strstr(t, " conv2d"));
    assert_non_null(strstr(t, " relu\n"));
    assert_null(strstr(t, "reduce mask"));
    free(t);
    tgc_fusion_free(&f);

    /* an empty fusion prints nothing */
    tgc_fusion none = {0};
    t = tgc_fusion_to_text(g, &none);
    assert_true(t == NULL || t[0] == '\0');
    free(t);
    tgc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pointwise_chain_with_broadcasting_is_one_loop_group,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(pointwise_chain_on_symbolic_shapes_is_one_group,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(softmax_is_one_group_of_three_phases, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(log_softmax_over_first_dim_on_symbolic_shapes_is_one_group,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(layer_norm_with_affine_is_one_group, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(sum_over_middle_dim_takes_prologue_and_row_epilogue,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(reductions_over_different_dims_get_their_own_groups,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(adaptive_avg_pool_to_one_is_a_reduction, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(window_pool_starts_a_group_its_consumers_join, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(conv_bias_residual_relu_is_one_template_group, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(linear_gelu_keeps_gelu_whole_in_the_epilogue, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(template_output_used_twice_stops_the_epilogue, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(template_output_that_is_a_graph_output_stops_the_epilogue,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(epilogue_of_another_shape_or_dtype_is_not_fused,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(node_never_joins_a_group_older_than_its_other_operands,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(node_joins_the_newest_group_when_older_operands_allow,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(node_from_older_kernels_joins_the_newest_it_fits,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(write_in_place_orders_only_readers_of_its_value,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(view_of_an_in_group_value_is_read_from_memory, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(contiguous_copy_is_pointwise_and_other_dtypes_opaque,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(fusion_text_names_groups_domains_and_members, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
