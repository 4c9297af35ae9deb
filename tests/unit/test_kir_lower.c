/* View chains as affine accesses (tgc_view_of) and fused groups lowered to kernel IR
 * (kir_lower_group): iteration domains, strides, phases, stores and template geometry. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kir/kir.h"
#include "backend/interp/interp.h"
#include "passes/passes.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

#define END ((int64_t)1 << 62) /* a slice to the end, as the tracer records it */

static void expect_view(const tgc_graph *g, int32_t v, int32_t base, int64_t off, int n,
                        const int64_t *strides)
{
    tgc_view vw;
    assert_int_equal(tgc_view_of(g, v, &vw), 1);
    assert_int_equal(g->nodes[v].out.ndim, n);
    assert_int_equal(vw.base, base);
    assert_int_equal(vw.off, off);
    for (int d = 0; d < n; d++)
        if (vw.stride[d] != strides[d])
            fail_msg("dim %d: stride %lld, want %lld", d, (long long)vw.stride[d],
                     (long long)strides[d]);
}

/* ---- tgc_view_of ---- */

static void view_of_plain_value_is_row_major(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {2, 3, 4};
    int32_t x = gb_input(g, TGC_F32, 3, s);
    int32_t e = gb_un(g, TGC_OP_EXP, x);
    expect_view(g, x, x, 0, 3, (int64_t[]){12, 4, 1});
    expect_view(g, e, e, 0, 3, (int64_t[]){12, 4, 1});
    assert_false(tgc_is_view_op(TGC_OP_CONTIGUOUS));
    assert_true(tgc_is_view_op(TGC_OP_PERMUTE));
    tgc_graph_free(g);
}

static void view_of_permute_and_reshape_split_and_merge(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {2, 3, 4};
    int32_t x = gb_input(g, TGC_F32, 3, s);
    int32_t p = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){2, 0, 1}, 3); /* [4, 2, 3] */
    expect_view(g, p, x, 0, 3, (int64_t[]){1, 12, 4});
    int32_t m = gb_ints(g, TGC_OP_RESHAPE, x, (int64_t[]){6, 4}, 2); /* merge */
    expect_view(g, m, x, 0, 2, (int64_t[]){4, 1});
    int32_t sp = gb_ints(g, TGC_OP_RESHAPE, m, (int64_t[]){3, 2, 2, 2}, 4); /* split both */
    expect_view(g, sp, x, 0, 4, (int64_t[]){8, 4, 2, 1});
    /* [4, 6] transposed to [6, 4] (strides 1, 6); splitting the permuted 6 stays affine */
    tgc_sdim s2[2] = {4, 6};
    int32_t y = gb_input(g, TGC_F32, 2, s2);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, y, (int64_t[]){1, 0}, 2);
    int32_t ts = gb_ints(g, TGC_OP_RESHAPE, t, (int64_t[]){2, 3, 4}, 3);
    expect_view(g, ts, y, 0, 3, (int64_t[]){3, 1, 6});
    /* flatten keeps row-major order: the merge of two contiguous dims */
    int32_t fl = gb_ints(g, TGC_OP_FLATTEN, x, (int64_t[]){1, 2}, 2);
    expect_view(g, fl, x, 0, 2, (int64_t[]){12, 1});
    tgc_graph_free(g);
}

static void view_of_merge_of_permuted_dims_is_not_affine(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {2, 3, 4};
    int32_t x = gb_input(g, TGC_F32, 3, s);
    int32_t p = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){1, 0, 2}, 3); /* [3, 2, 4] */
    int32_t r = gb_ints(g, TGC_OP_RESHAPE, p, (int64_t[]){6, 4}, 2);
    tgc_view vw;
    assert_int_equal(tgc_view_of(g, r, &vw), 0);
    /* ... and so is every view built on it */
    int32_t e = gb_ints(g, TGC_OP_UNSQUEEZE, r, (int64_t[]){0}, 1);
    assert_int_equal(tgc_view_of(g, e, &vw), 0);
    /* merging the untouched trailing dims of the same permute is fine */
    int32_t q = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){2, 0, 1}, 3); /* [4, 2, 3] */
    int32_t ok = gb_ints(g, TGC_OP_RESHAPE, q, (int64_t[]){4, 6}, 2);
    expect_view(g, ok, x, 0, 2, (int64_t[]){1, 4});
    tgc_graph_free(g);
}

/* Regression test (the bug it found is fixed): reshape pairs dims by equal products, and
 * over a size-0 dim the first product (0) matched with dims of both sides left, so
 * [0, 1, 7, 3] -> [0] was "not affine" even over a contiguous copy. */
static void view_of_reshape_over_size_zero_dim_is_affine(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[4] = {0, 7, 1, 3};
    int32_t x = gb_input(g, TGC_F32, 4, s);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){0, 2, 1, 3}, 4); /* [0, 1, 7, 3] */
    int32_t r = gb_ints(g, TGC_OP_RESHAPE, t, (int64_t[]){-1}, 1);
    assert_int_equal(g->nodes[r].out.shape[0], 0);
    expect_view(g, r, x, 0, 1, (int64_t[]){1});
    int32_t sl = gb_ints(g, TGC_OP_SLICE, r, (int64_t[]){0, 1, END, 3}, 4);
    tgc_view vw;
    assert_int_equal(tgc_view_of(g, sl, &vw), 1);
    assert_int_equal(vw.base, x);
    /* [0, 7, 1, 3] -> [7, 0]: the output's 0 is not first */
    int32_t q = gb_ints(g, TGC_OP_RESHAPE, x, (int64_t[]){7, -1}, 2);
    assert_int_equal(g->nodes[q].out.shape[1], 0);
    expect_view(g, q, x, 0, 2, (int64_t[]){0, 1});
    tgc_graph_free(g);
}

static void view_of_slice_with_step_and_negative_start(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {10, 6};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    /* x[:, -5::2]: columns 1, 3, 5 */
    int32_t a = gb_ints(g, TGC_OP_SLICE, x, (int64_t[]){1, -5, END, 2}, 4);
    assert_int_equal(g->nodes[a].out.shape[1], 3);
    expect_view(g, a, x, 1, 2, (int64_t[]){6, 2});
    /* then rows 2, 5, 8: offset 2 * 6 + 1 */
    int32_t b = gb_ints(g, TGC_OP_SLICE, a, (int64_t[]){0, 2, 9, 3}, 4);
    assert_int_equal(g->nodes[b].out.shape[0], 3);
    expect_view(g, b, x, 13, 2, (int64_t[]){18, 2});
    /* a start before the beginning clamps to 0 */
    int32_t c = gb_ints(g, TGC_OP_SLICE, x, (int64_t[]){0, -100, 3, 1}, 4);
    expect_view(g, c, x, 0, 2, (int64_t[]){6, 1});
    tgc_graph_free(g);
}

static void view_of_expand_squeeze_unsqueeze(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 1};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t e = gb_ints(g, TGC_OP_EXPAND, x, (int64_t[]){2, 3, 4}, 3);
    expect_view(g, e, x, 0, 3, (int64_t[]){0, 1, 0});
    int32_t sq = gb_ints(g, TGC_OP_SQUEEZE, x, (int64_t[]){1}, 1); /* [3] */
    expect_view(g, sq, x, 0, 1, (int64_t[]){1});
    int32_t un = gb_ints(g, TGC_OP_UNSQUEEZE, sq, (int64_t[]){0}, 1); /* [1, 3] */
    expect_view(g, un, x, 0, 2, (int64_t[]){0, 1});
    /* a chain: transpose, strided slice, unsqueeze, expand */
    tgc_sdim s2[2] = {4, 6};
    int32_t y = gb_input(g, TGC_F32, 2, s2);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, y, (int64_t[]){1, 0}, 2);      /* [6, 4]: 1, 6 */
    int32_t sl = gb_ints(g, TGC_OP_SLICE, t, (int64_t[]){0, 1, 5, 2}, 4); /* [2, 4]: 2, 6 */
    int32_t u = gb_ints(g, TGC_OP_UNSQUEEZE, sl, (int64_t[]){0}, 1);      /* [1, 2, 4] */
    int32_t ex = gb_ints(g, TGC_OP_EXPAND, u, (int64_t[]){3, -1, -1}, 3); /* [3, 2, 4] */
    expect_view(g, ex, y, 1, 3, (int64_t[]){0, 2, 6});
    tgc_graph_free(g);
}

static void view_of_symbolic_dims(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s0 = tgc_sym_new(g->syms, 5, 0, 0), s1 = tgc_sym_new(g->syms, 7, 0, 1);
    tgc_sdim s[2] = {s0, s1};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    const int64_t vals[2] = {9, 11};
    tgc_view vw;
    /* transpose: strides 1, s1 */
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){1, 0}, 2);
    assert_int_equal(tgc_view_of(g, t, &vw), 1);
    assert_int_equal(vw.stride[0], 1);
    assert_int_equal(tgc_sym_eval(g->syms, vw.stride[1], vals), 11);
    /* flatten merges symbolic dims: one stride 1 */
    int32_t f = gb_ints(g, TGC_OP_RESHAPE, x, (int64_t[]){-1}, 1);
    assert_int_equal(tgc_view_of(g, f, &vw), 1);
    assert_int_equal(vw.stride[0], 1);
    assert_int_equal(tgc_sym_eval(g->syms, g->nodes[f].out.shape[0], vals), 99);
    /* split a symbolic-by-constant dim: [s0 * 12] viewed as [s0, 3, 4] */
    tgc_sdim s3[2] = {s0, 12};
    int32_t y = gb_input(g, TGC_F32, 2, s3);
    int32_t yf = gb_ints(g, TGC_OP_RESHAPE, y, (int64_t[]){-1}, 1);
    int32_t ys = gb_ints(g, TGC_OP_RESHAPE, yf, (int64_t[]){-1, 3, 4}, 3);
    expect_view(g, ys, y, 0, 3, (int64_t[]){12, 4, 1});
    /* x[-3:, :] on a symbolic dim: offset (s0 - 3) * s1 */
    int32_t sl = gb_ints(g, TGC_OP_SLICE, x, (int64_t[]){0, -3, END, 1}, 4);
    assert_int_equal(tgc_view_of(g, sl, &vw), 1);
    assert_int_equal(tgc_sym_eval(g->syms, vw.off, vals), 6 * 11);
    assert_int_equal(tgc_sym_eval(g->syms, vw.stride[0], vals), 11);
    assert_int_equal(vw.stride[1], 1);
    /* x[:, 1::2]: offset 1, stride 2 on the symbolic dim */
    int32_t st = gb_ints(g, TGC_OP_SLICE, x, (int64_t[]){1, 1, END, 2}, 4);
    assert_int_equal(tgc_view_of(g, st, &vw), 1);
    assert_int_equal(vw.off, 1);
    assert_int_equal(vw.stride[1], 2);
    assert_int_equal(tgc_sym_eval(g->syms, g->nodes[st].out.shape[1], vals), 5);
    /* unsqueeze between symbolic dims: stride 0 for the new size-1 dim */
    int32_t u = gb_ints(g, TGC_OP_UNSQUEEZE, x, (int64_t[]){1}, 1);
    assert_int_equal(tgc_view_of(g, u, &vw), 1);
    assert_int_equal(tgc_sym_eval(g->syms, vw.stride[0], vals), 11);
    assert_int_equal(vw.stride[1], 0);
    assert_int_equal(vw.stride[2], 1);
    tgc_graph_free(g);
}

static void dims_mergeable_ignores_size_one_dims(void **state)
{
    (void)state;
    tgc_symtab *t = tgc_symtab_create();
    tgc_sdim sizes[4] = {2, 1, 3, 4}, strides[4] = {12, 99, 4, 1}, merged = -1;
    assert_int_equal(tgc_dims_mergeable(t, sizes, strides, 0, 3, &merged), 1);
    assert_int_equal(merged, 1);
    tgc_sdim bad[4] = {1, 99, 4, 12}; /* dims 2 and 3 swapped */
    assert_int_equal(tgc_dims_mergeable(t, sizes, bad, 0, 3, NULL), 0);
    tgc_sdim ones[2] = {1, 1}, any[2] = {5, 7};
    assert_int_equal(tgc_dims_mergeable(t, ones, any, 0, 1, &merged), 1);
    assert_int_equal(merged, 0);
    tgc_symtab_free(t);
}

/* ---- kir_lower_group ---- */

typedef struct lowered {
    tgc_fusion f;
    uint8_t *mat;
    kir_kernel *k[8];
    int n;
} lowered;

static void lower_all(const tgc_graph *g, lowered *l)
{
    memset(l, 0, sizeof *l);
    gb_fuse(g, &l->f);
    l->mat = kir_materialized(g, &l->f);
    assert_non_null(l->mat);
    assert_true(l->f.n_groups <= 8);
    for (int i = 0; i < l->f.n_groups; i++)
        if (kir_lower_group(g, &l->f, i, l->mat, gb_target(), &l->k[i]) != TGC_OK)
            fail_msg("group %d: %s", i, tgc_last_error());
    l->n = l->f.n_groups;
}

static void lowered_free(lowered *l)
{
    for (int i = 0; i < l->n; i++)
        kir_kernel_free(l->k[i]);
    free(l->mat);
    tgc_fusion_free(&l->f);
}

/* Load number li's stride on var v. */
static tgc_sdim load_stride(const kir_kernel *k, int li, int v)
{
    assert_true(li < k->n_loads);
    return k->loads[li].at.stride[v];
}

static void lower_contiguous_pointwise_is_one_chunked_loop(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {4, 5, 6};
    int32_t x = gb_input(g, TGC_F32, 3, s), y = gb_input(g, TGC_F32, 3, s);
    int32_t o = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_ADD, x, y));
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->kind, KIR_LOOP);
    assert_int_equal(k->n_outer, 0);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->extent[0], 120);
    assert_true(k->sched.split > 0);
    assert_int_equal(k->n_phases, 1);
    assert_int_equal(k->n_loads, 2);
    assert_int_equal(load_stride(k, 0, 0), 1);
    assert_int_equal(load_stride(k, 1, 0), 1);
    assert_int_equal(k->n_stores, 1);
    assert_int_equal(k->stores[0].at.stride[0], 1);
    assert_int_equal(k->stores[0].phase, 0);
    assert_int_equal(k->n_bufs, 3);
    assert_int_equal(k->bufs[k->stores[0].at.buf].value, o);
    assert_true(k->bufs[k->stores[0].at.buf].written);
    /* the add is not stored: it lives in a register */
    assert_int_equal(k->n_reduces, 0);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_symbolic_pointwise_merges_symbolic_extents(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s0 = tgc_sym_new(g->syms, 5, 0, 0);
    tgc_sdim s[2] = {s0, 8};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t o = gb_scalar(g, TGC_OP_MUL_SCALAR, gb_un(g, TGC_OP_TANH, x), 3.0);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_outer + k->n_inner, 1);
    assert_true(k->sched.split > 0);
    const int64_t vals[1] = {13};
    assert_int_equal(tgc_sym_eval(g->syms, k->extent[0], vals), 104);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_channel_broadcast_keeps_stride_zero(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[4] = {2, 3, 4, 5}, sb[4] = {1, 3, 1, 1};
    int32_t x = gb_input(g, TGC_F32, 4, sx), b = gb_input(g, TGC_F32, 4, sb);
    int32_t o = gb_un(g, TGC_OP_RELU, gb_bin(g, TGC_OP_ADD, x, b));
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->sched.split, 0);
    /* [2, 3 | 20]: H and W merge, N and C cannot (the bias walks C only) */
    assert_int_equal(k->n_outer, 2);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->extent[0], 2);
    assert_int_equal(k->extent[1], 3);
    assert_int_equal(k->extent[2], 20);
    int lx = k->bufs[k->loads[0].at.buf].value == x ? 0 : 1, lb = 1 - lx;
    assert_int_equal(k->bufs[k->loads[lb].at.buf].value, b);
    assert_int_equal(load_stride(k, lx, 0), 60);
    assert_int_equal(load_stride(k, lx, 1), 20);
    assert_int_equal(load_stride(k, lx, 2), 1);
    assert_int_equal(load_stride(k, lb, 0), 0);
    assert_int_equal(load_stride(k, lb, 1), 1);
    assert_int_equal(load_stride(k, lb, 2), 0);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_view_operands_compose_into_loads(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {6, 4};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t t = gb_ints(g, TGC_OP_PERMUTE, x, (int64_t[]){1, 0}, 2);        /* [4, 6] */
    int32_t sl = gb_ints(g, TGC_OP_SLICE, t, (int64_t[]){1, 1, END, 2}, 4); /* [4, 3] */
    int32_t o = gb_un(g, TGC_OP_NEG, sl);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_loads, 1);
    assert_int_equal(k->bufs[k->loads[0].at.buf].value, x); /* no copy of the view */
    assert_int_equal(k->loads[0].at.off, 4);                /* row 1 of x */
    assert_int_equal(k->n_outer, 1);
    assert_int_equal(load_stride(k, 0, 0), 1);
    assert_int_equal(load_stride(k, 0, 1), 8);
    assert_int_equal(k->stores[0].at.stride[0], 3);
    assert_int_equal(k->stores[0].at.stride[1], 1);
    lowered_free(&l);
    tgc_graph_free(g);
}

/* Decomposes g (softmax, layer_norm) the way the backends see it. */
static void prepare(tgc_graph *g)
{
    tgc_config cfg = tgc_config_default();
    if (tgc_passes_run_opts(g, &cfg, "test", TGC_DECOMPOSE_KEEP_ACTIVATIONS,
                            tgc_interp_eval_contiguous) != TGC_OK)
        fail_msg("passes: %s", tgc_last_error());
}

static void lower_softmax_is_three_phases_with_last_phase_store(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {4, 10};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    tgc_attrs a = {.ni = 1};
    a.i[0] = 1;
    int32_t o = gb_op(g, TGC_OP_SOFTMAX, &x, 1, &a);
    gb_outputs(g, &o, 1);
    prepare(g);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_phases, 3);
    assert_int_equal(k->n_outer, 1);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->extent[0], 4);
    assert_int_equal(k->extent[1], 10);
    assert_int_equal(k->sched.split, 0);
    assert_int_equal(k->n_reduces, 2);
    assert_int_equal(k->reduces[0].comb, KR_MAX);
    assert_int_equal(k->reduces[0].phase, 0);
    assert_int_equal(k->reduces[1].comb, KR_SUM);
    assert_int_equal(k->reduces[1].phase, 1);
    assert_int_equal(k->n_stores, 1);
    assert_int_equal(k->stores[0].phase, k->n_phases - 1);
    assert_int_equal(k->stores[0].at.stride[0], 10);
    assert_int_equal(k->stores[0].at.stride[1], 1);
    char *txt = kir_kernel_to_text(k, g->syms);
    assert_non_null(txt);
    assert_non_null(strstr(txt, "phases 3"));
    assert_non_null(strstr(txt, "max(v"));
    assert_non_null(strstr(txt, "sum(v"));
    assert_non_null(strstr(txt, "per element"));
    assert_non_null(strstr(txt, "buf0 = %0 f32"));
    assert_non_null(strstr(txt, "(written)"));
    assert_non_null(strstr(txt, "exp(v"));
    free(txt);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_layer_norm_is_one_kernel(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[3] = {2, 3, 16}, sw[1] = {16};
    int32_t x = gb_input(g, TGC_F32, 3, s), w = gb_input(g, TGC_F32, 1, sw);
    int32_t bias = gb_input(g, TGC_F32, 1, sw);
    tgc_attrs a = {.ni = 2, .nf = 1};
    a.i[0] = 1;
    a.i[1] = TGC_LN_HAS_WEIGHT | TGC_LN_HAS_BIAS;
    a.f[0] = 1e-5;
    int32_t in[3] = {x, w, bias};
    int32_t o = gb_op(g, TGC_OP_LAYER_NORM, in, 3, &a);
    gb_outputs(g, &o, 1);
    prepare(g);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_phases, 3);
    assert_int_equal(k->n_outer, 1);
    assert_int_equal(k->extent[0], 6); /* the two leading dims merge */
    assert_int_equal(k->extent[1], 16);
    assert_int_equal(k->n_reduces, 2);
    assert_int_equal(k->n_stores, 1);
    assert_int_equal(k->stores[0].phase, 2);
    /* the weight is read per column: stride 0 across rows */
    int found = 0;
    for (int i = 0; i < k->n_loads; i++)
        if (k->bufs[k->loads[i].at.buf].value != x) {
            assert_int_equal(load_stride(k, i, 0), 0);
            assert_int_equal(load_stride(k, i, 1), 1);
            found++;
        }
    assert_int_equal(found, 2);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_sum_over_middle_dims_splits_outer_and_inner(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[4] = {2, 3, 4, 5};
    int32_t x = gb_input(g, TGC_F32, 4, s);
    int32_t o = gb_reduce(g, TGC_OP_SUM, x, 0xa, 0); /* dims 1, 3 -> [2, 4] */
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_outer, 2);
    assert_int_equal(k->n_inner, 2);
    const int64_t ext[4] = {2, 4, 3, 5}, ld[4] = {60, 5, 20, 1};
    for (int v = 0; v < 4; v++) {
        assert_int_equal(k->extent[v], ext[v]);
        assert_int_equal(load_stride(k, 0, v), ld[v]);
    }
    assert_int_equal(k->n_reduces, 1);
    assert_int_equal(k->reduces[0].comb, KR_SUM);
    assert_int_equal(k->n_stores, 1);
    assert_int_equal(k->stores[0].phase, -1); /* once per row */
    assert_int_equal(k->stores[0].at.stride[0], 4);
    assert_int_equal(k->stores[0].at.stride[1], 1);
    assert_int_equal(k->stores[0].at.stride[2], 0);
    assert_int_equal(k->stores[0].at.stride[3], 0);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_mean_over_first_dim_walks_columns(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {6, 7};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t o = gb_reduce(g, TGC_OP_MEAN, gb_un(g, TGC_OP_EXP, x), 0x1, 1); /* [1, 7] */
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1); /* the exp prologue joins */
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_outer, 1);
    assert_int_equal(k->n_inner, 1);
    assert_int_equal(k->extent[0], 7);
    assert_int_equal(k->extent[1], 6);
    assert_int_equal(load_stride(k, 0, 0), 1);
    assert_int_equal(load_stride(k, 0, 1), 7);
    /* the mean divides by the reduced count */
    int has_size = 0;
    for (int i = 0; i < k->n_vals; i++)
        if (k->vals[i].kind == KV_SIZE) {
            assert_int_equal(k->vals[i].sdim, 6);
            has_size = 1;
        }
    assert_true(has_size);
    assert_int_equal(k->stores[0].at.stride[0], 1);
    assert_int_equal(k->stores[0].at.stride[1], 0);
    lowered_free(&l);
    tgc_graph_free(g);
}

/* Regression test (the bug it found is fixed): inside a reduction group, an operand of a
 * row-shaped node (sum(x, {1}, keepdim) + sum(z, {1}, keepdim): [4, 1]) took its own
 * stride on the reduced dim although the node's size-1 dim is always index 0, so the
 * epilogue x + (that) read the first sum at the column index. */
static void lower_row_node_operands_do_not_walk_reduced_dims(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {4, 5}, s1[1] = {1};
    int32_t x = gb_input(g, TGC_F32, 2, s), z = gb_input(g, TGC_F32, 2, s);
    int32_t c = gb_input(g, TGC_F32, 1, s1);
    int32_t sx = gb_reduce(g, TGC_OP_SUM, x, 0x2, 1), sz = gb_reduce(g, TGC_OP_SUM, z, 0x2, 1);
    int32_t row = gb_bin(g, TGC_OP_ADD, gb_bin(g, TGC_OP_ADD, sx, sz), c);
    int32_t o = gb_bin(g, TGC_OP_ADD, x, row);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    int found = 0;
    for (int i = 0; i < l.n; i++) {
        const kir_kernel *k = l.k[i];
        for (int li = 0; li < k->n_loads; li++) {
            int32_t v = k->bufs[k->loads[li].at.buf].value;
            if (v != sx && v != c)
                continue;
            found++;
            /* [4 | 5]: the row var walks sx (stride 1) and not c; the column var neither */
            assert_int_equal(k->n_outer, 1);
            assert_int_equal(k->n_inner, 1);
            assert_int_equal(load_stride(k, li, 0), v == sx ? 1 : 0);
            assert_int_equal(load_stride(k, li, 1), 0);
        }
    }
    assert_int_equal(found, 2);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_full_reduction_to_scalar(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 5};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    int32_t o = gb_reduce(g, TGC_OP_MAX, x, 0x3, 0); /* a 0-d result */
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_outer, 0);
    assert_int_equal(k->n_inner, 1); /* the reduced dims merge */
    assert_int_equal(k->extent[0], 15);
    assert_int_equal(k->reduces[0].comb, KR_MAX);
    assert_int_equal(k->stores[0].phase, -1);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_linear_reads_weight_transposed(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[2] = {8, 16}, sw[2] = {4, 16}, sb[1] = {4};
    int32_t x = gb_input(g, TGC_F32, 2, sx), w = gb_input(g, TGC_F32, 2, sw);
    int32_t b = gb_input(g, TGC_F32, 1, sb);
    int32_t in[3] = {x, w, b};
    int32_t y = gb_op(g, TGC_OP_LINEAR, in, 3, NULL);
    int32_t o = gb_un(g, TGC_OP_RELU, y);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->kind, KIR_GEMM);
    const kir_template *t = &k->tpl;
    assert_int_equal(t->op, TGC_OP_LINEAR);
    assert_int_equal(t->batch, 1);
    assert_int_equal(t->M, 8);
    assert_int_equal(t->N, 4);
    assert_int_equal(t->K, 16);
    assert_int_equal(t->a_rs, 16);
    assert_int_equal(t->a_cs, 1);
    assert_int_equal(t->b_rs, 1); /* w[n, k]: k walks the row */
    assert_int_equal(t->b_cs, 16);
    assert_int_equal(t->c_rs, 4);
    assert_int_equal(k->bufs[t->a].value, x);
    assert_int_equal(k->bufs[t->b].value, w);
    assert_int_equal(k->bufs[t->out].value, o); /* the epilogue's tip is stored */
    /* epilogue: acc + bias[n], then relu */
    assert_int_equal(k->vals[k->result].op, TGC_OP_RELU);
    assert_int_equal(k->n_loads, 1);
    assert_int_equal(k->loads[0].at.stride[2], 1);
    assert_int_equal(k->loads[0].at.stride[1], 0);
    char *txt = kir_kernel_to_text(k, g->syms);
    assert_non_null(strstr(txt, "(gemm) linear batch 1 M 8 N 4 K 16"));
    assert_non_null(strstr(txt, "result = v"));
    free(txt);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_batched_matmul_with_shared_weight_folds_batch_into_m(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sa[3] = {3, 5, 6}, sb[2] = {6, 7};
    int32_t a = gb_input(g, TGC_F32, 3, sa), b = gb_input(g, TGC_F32, 2, sb);
    int32_t o = gb_bin(g, TGC_OP_MATMUL, a, b);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    const kir_template *t = &l.k[0]->tpl;
    assert_int_equal(l.k[0]->kind, KIR_GEMM);
    assert_int_equal(t->batch, 1);
    assert_int_equal(t->M, 15);
    assert_int_equal(t->N, 7);
    assert_int_equal(t->K, 6);
    assert_int_equal(t->a_bs, 0);
    assert_int_equal(t->b_bs, 0);
    assert_int_equal(t->c_bs, 0);
    assert_int_equal(t->a_rs, 6);
    assert_int_equal(t->b_rs, 7);
    assert_int_equal(t->b_cs, 1);
    assert_int_equal(t->c_rs, 7);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_attention_scores_stride_through_transposed_keys(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sq[3] = {2, 4, 8}, sk[3] = {2, 5, 8};
    int32_t q = gb_input(g, TGC_F32, 3, sq), k = gb_input(g, TGC_F32, 3, sk);
    int32_t kt = gb_ints(g, TGC_OP_PERMUTE, k, (int64_t[]){0, 2, 1}, 3); /* [2, 8, 5] */
    int32_t o = gb_scalar(g, TGC_OP_MUL_SCALAR, gb_bin(g, TGC_OP_MATMUL, q, kt), 0.125);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1); /* the scale is the epilogue */
    const kir_kernel *kk = l.k[0];
    const kir_template *t = &kk->tpl;
    assert_int_equal(kk->kind, KIR_GEMM);
    assert_int_equal(t->batch, 2);
    assert_int_equal(t->M, 4);
    assert_int_equal(t->N, 5);
    assert_int_equal(t->K, 8);
    assert_int_equal(t->a_bs, 32);
    assert_int_equal(t->a_rs, 8);
    assert_int_equal(t->a_cs, 1);
    assert_int_equal(t->b_bs, 40);
    assert_int_equal(t->b_rs, 1);
    assert_int_equal(t->b_cs, 8);
    assert_int_equal(t->c_bs, 20);
    assert_int_equal(t->c_rs, 5);
    assert_int_equal(kk->bufs[t->b].value, k); /* read through the permute */
    assert_int_equal(kk->vals[kk->result].op, TGC_OP_MUL_SCALAR);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_conv_with_bias_and_residual_epilogue(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim sx[4] = {2, 3, 8, 8}, sw[4] = {4, 3, 3, 3}, sb[1] = {4}, sr[4] = {2, 4, 8, 8};
    int32_t x = gb_input(g, TGC_F32, 4, sx), w = gb_input(g, TGC_F32, 4, sw);
    int32_t b = gb_input(g, TGC_F32, 1, sb), r = gb_input(g, TGC_F32, 4, sr);
    tgc_attrs a = {.ni = 7};
    const int64_t p[7] = {1, 1, 1, 1, 1, 1, 1};
    memcpy(a.i, p, sizeof p);
    int32_t in[3] = {x, w, b};
    int32_t c = gb_op(g, TGC_OP_CONV2D, in, 3, &a);
    int32_t o = gb_un(g, TGC_OP_RELU, gb_bin(g, TGC_OP_ADD, c, r));
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->kind, KIR_CONV);
    const kir_template *t = &k->tpl;
    const int64_t geo[9] = {t->cn, t->cc, t->ch, t->cw, t->co, t->kh, t->kw, t->oh, t->ow};
    const int64_t want[9] = {2, 3, 8, 8, 4, 3, 3, 8, 8};
    for (int i = 0; i < 9; i++)
        assert_int_equal(geo[i], want[i]);
    assert_int_equal(k->n_loads, 2);
    /* bias per output channel (var 1), the residual at [n, c, h*w] */
    assert_int_equal(k->loads[0].at.stride[1], 1);
    assert_int_equal(k->loads[0].at.stride[2], 0);
    assert_int_equal(k->loads[1].at.stride[0], 256);
    assert_int_equal(k->loads[1].at.stride[1], 64);
    assert_int_equal(k->loads[1].at.stride[2], 1);
    assert_int_equal(k->bufs[t->out].value, o);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_max_pool_reads_guarded_window_taps(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[4] = {2, 3, 8, 6};
    int32_t x = gb_input(g, TGC_F32, 4, s);
    const int64_t p[6] = {2, 2, 2, 2, 0, 0};
    int32_t o = gb_un(g, TGC_OP_RELU, gb_ints(g, TGC_OP_MAX_POOL2D, x, p, 6)); /* [2, 3, 4, 3] */
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1); /* the relu joins the pool's group */
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->kind, KIR_LOOP);
    assert_int_equal(k->n_loads, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(k->bufs[k->loads[i].at.buf].value, x);
        assert_int_equal(k->loads[i].n_guards, 2);
        assert_true(isinf(k->loads[i].fill) && k->loads[i].fill < 0);
    }
    /* tap (1, 1): one row and one column into the window */
    assert_int_equal(k->loads[3].at.off, 7);
    assert_int_equal(k->vals[k->stores[0].val].op, TGC_OP_RELU);
    assert_int_equal(k->n_stores, 1);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_padded_avg_pool_divides_by_the_window(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[4] = {1, 2, 5, 5};
    int32_t x = gb_input(g, TGC_F32, 4, s);
    const int64_t p[6] = {3, 3, 2, 2, 1, 1};
    int32_t o = gb_ints(g, TGC_OP_AVG_POOL2D, x, p, 6); /* [1, 2, 3, 3] */
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    const kir_kernel *k = l.k[0];
    assert_int_equal(k->n_loads, 9);
    assert_true(k->loads[0].fill == 0.0);
    assert_int_equal(k->loads[0].at.off, -6); /* tap (-1, -1) */
    const kir_val *r = &k->vals[k->stores[0].val];
    assert_int_equal(r->op, TGC_OP_DIV_SCALAR);
    assert_true(r->f[0] == 9.0);
    lowered_free(&l);
    tgc_graph_free(g);
}

static void lower_opaque_group_has_no_kernel(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {3, 4};
    int32_t x = gb_input(g, TGC_F32, 2, s);
    const int64_t a[2] = {1, 0};
    int32_t o = gb_ints(g, TGC_OP_ARGMAX, x, a, 2);
    gb_outputs(g, &o, 1);
    lowered l;
    lower_all(g, &l);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.f.groups[0].kind, TGC_GROUP_OPAQUE);
    assert_null(l.k[0]);
    assert_true(l.mat[o]);
    lowered_free(&l);
    tgc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(view_of_plain_value_is_row_major),
        cmocka_unit_test(view_of_permute_and_reshape_split_and_merge),
        cmocka_unit_test(view_of_merge_of_permuted_dims_is_not_affine),
        cmocka_unit_test(view_of_reshape_over_size_zero_dim_is_affine),
        cmocka_unit_test(view_of_slice_with_step_and_negative_start),
        cmocka_unit_test(view_of_expand_squeeze_unsqueeze),
        cmocka_unit_test(view_of_symbolic_dims),
        cmocka_unit_test(dims_mergeable_ignores_size_one_dims),
        cmocka_unit_test(lower_contiguous_pointwise_is_one_chunked_loop),
        cmocka_unit_test(lower_symbolic_pointwise_merges_symbolic_extents),
        cmocka_unit_test(lower_channel_broadcast_keeps_stride_zero),
        cmocka_unit_test(lower_view_operands_compose_into_loads),
        cmocka_unit_test(lower_softmax_is_three_phases_with_last_phase_store),
        cmocka_unit_test(lower_layer_norm_is_one_kernel),
        cmocka_unit_test(lower_sum_over_middle_dims_splits_outer_and_inner),
        cmocka_unit_test(lower_mean_over_first_dim_walks_columns),
        cmocka_unit_test(lower_row_node_operands_do_not_walk_reduced_dims),
        cmocka_unit_test(lower_full_reduction_to_scalar),
        cmocka_unit_test(lower_linear_reads_weight_transposed),
        cmocka_unit_test(lower_batched_matmul_with_shared_weight_folds_batch_into_m),
        cmocka_unit_test(lower_attention_scores_stride_through_transposed_keys),
        cmocka_unit_test(lower_conv_with_bias_and_residual_epilogue),
        cmocka_unit_test(lower_max_pool_reads_guarded_window_taps),
        cmocka_unit_test(lower_padded_avg_pool_divides_by_the_window),
        cmocka_unit_test(lower_opaque_group_has_no_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
