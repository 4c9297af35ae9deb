/* Graph passes: each pass leaves a verified graph of the expected structure that computes
 * what the traced graph computes, under interp, on fresh random inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/eager.h"
#include "backend/prepare.h"
#include "backend/interp/interp.h"
#include "frontend/ops_grad.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_prepare.h"
#endif
#include "jit/jit.h"
#include "ir/conv_taps.h"
#include "passes/passes.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

/* ---- fixture: trace a function on interp, take its graph ---- */

typedef struct fx {
    tgc_fn *f;
    tgc_variant *v;
    tgc_graph *g; /* a clone of the variant's graph, constants imported: what passes get */
} fx;

/* Constant folding through the oracle, as the compile driver runs it. */
static tgc_status fold_interp(tgc_graph *g)
{
    return tgc_pass_fold_constants(g, tgc_interp_eval_contiguous);
}

static void fx_trace(fx *x, tgc_model_fn fn, tgc_tensor **in, int n_in, int n_out, tgc_dynamic dyn)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_INTERP;
    cfg.dynamic = dyn;
    x->f = tgc_compile(fn, "traced", &cfg);
    assert_non_null(x->f);
    tgc_tensor *out[8] = {0};
    assert_true(n_out <= N_OF(out));
    assert_int_equal(tgc_call(x->f, NULL, in, n_in, out, n_out), TGC_OK);
    x->v = x->f->variants;
    assert_non_null(x->v);
    assert_false(x->v->is_eager);
    x->g = tgc_graph_clone(x->v->graph);
    assert_non_null(x->g);
    assert_int_equal(tgc_graph_import_consts(x->g, x->v->bound, x->v->guards.n_captured), TGC_OK);
    assert_int_equal(tgc_graph_verify(x->g), TGC_OK);
}

static void fx_free(fx *x)
{
    tgc_graph_free(x->g);
    tgc_fn_free(x->f);
}

/* Runs g on interp with the variant's bindings. */
static void run_graph(const fx *x, const tgc_graph *g, tgc_tensor **in, int n_in, tgc_tensor **out)
{
    int64_t symvals[16] = {0};
    for (int k = 0; k < tgc_sym_count(g->syms) && k < 16; k++) {
        int input, dim;
        tgc_sym_origin(g->syms, k, &input, &dim);
        symvals[k] = tgc_size(in[input], dim);
    }
    tgc_exec_args a = {in, n_in, NULL, 0, x->v->bound, x->v->guards.n_captured, symvals};
    gb_run_interp(g, &a, out);
}

static double *host_f64(tgc_tensor *t)
{
    tgc_tensor *c = tgc_cast(t, TGC_F64);
    assert_non_null(c);
    size_t n = (size_t)tgc_numel(c);
    double *p = malloc((n ? n : 1) * sizeof *p);
    assert_int_equal(tgc_copy_to_host(c, p, n * sizeof *p), TGC_OK);
    return p;
}

static void expect_close(tgc_tensor *a, tgc_tensor *b, double rtol, double atol)
{
    assert_int_equal(tgc_dtype_of(a), tgc_dtype_of(b));
    assert_int_equal(tgc_ndim(a), tgc_ndim(b));
    for (int d = 0; d < tgc_ndim(a); d++)
        assert_int_equal(tgc_size(a, d), tgc_size(b, d));
    double *x = host_f64(a), *y = host_f64(b);
    for (int64_t i = 0; i < tgc_numel(a); i++)
        if (!(fabs(x[i] - y[i]) <= atol + rtol * fabs(y[i])) && !(isnan(x[i]) && isnan(y[i])))
            fail_msg("element %lld: %.9g vs %.9g", (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

/* The pass result computes the original graph's outputs on these inputs. */
static void expect_same_outputs(const fx *x, tgc_graph *before, tgc_tensor **in, int n_in,
                                int n_out, double rtol)
{
    tgc_tensor *want[4] = {0}, *got[4] = {0};
    run_graph(x, before, in, n_in, want);
    run_graph(x, x->g, in, n_in, got);
    for (int k = 0; k < n_out; k++)
        expect_close(got[k], want[k], rtol, rtol);
}

static int count_op(const tgc_graph *g, tgc_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static tgc_tensor *randn(int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    return tgc_randn(s, nd, TGC_F32, tgc_cpu());
}

static tgc_tensor *rand01(int nd, int64_t d0, int64_t d1)
{
    int64_t s[2] = {d0, d1};
    return tgc_rand(s, nd, TGC_F32, tgc_cpu());
}

typedef tgc_status (*pass_fn)(tgc_graph *g);

/* Applies pass to the fixture's graph, checks it verifies and still computes the same
 * outputs on `in`; returns the graph as it was before (caller frees). */
static tgc_graph *apply(fx *x, pass_fn pass, tgc_tensor **in, int n_in, int n_out, double rtol)
{
    tgc_graph *before = tgc_graph_clone(x->g);
    assert_non_null(before);
    assert_int_equal(pass(x->g), TGC_OK);
    if (tgc_graph_verify(x->g) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    expect_same_outputs(x, before, in, n_in, n_out, rtol);
    return before;
}

/* ---- traced functions ---- */

static tgc_status fn_softmax(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_softmax(in[0], 1);
    out[1] = tgc_log_softmax(in[0], 0);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_layer_norm_wb(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                   int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_layer_norm_plain(tgc_module *m, tgc_tensor *const *in, int n_in,
                                      tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_layer_norm(in[0], 2, NULL, NULL, 1e-3);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_activations(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_gelu(in[0]);
    out[1] = tgc_gelu_tanh(in[0]);
    out[2] = tgc_silu(in[0]);
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

/* in: x, running_mean, running_var, weight, bias */
static tgc_status fn_bn_eval(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_batch_norm(in[0], in[1], in[2], in[3], in[4], 0, 0.1, 1e-5);
    out[1] = tgc_batch_norm(in[0], in[1], in[2], NULL, NULL, 0, 0.1, 1e-3);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_bn_train(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_batch_norm(in[0], in[1], in[2], NULL, NULL, 1, 0.1, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_bn_train_affine(tgc_module *m, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_batch_norm(in[0], in[1], in[2], in[3], in[4], 1, 0.1, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_cross_entropy(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                   int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_cross_entropy(in[0], in[1], TGC_REDUCE_MEAN, 2, 0.0);
    out[1] = tgc_cross_entropy(in[0], in[1], TGC_REDUCE_NONE, -100, 0.0);
    out[2] = tgc_cross_entropy(in[0], in[1], TGC_REDUCE_SUM, -100, 0.1);
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_var(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                         int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int d1[] = {1}, d01[] = {0, 1};
    out[0] = tgc_var(in[0], d1, 1, 1, 0);
    out[1] = tgc_var(in[0], d01, 2, 0, 1);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

/* A constant built at trace time and transformed: all of it folds. */
static tgc_status fn_fold_chain(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int64_t s[2] = {3, 4};
    tgc_tensor *c = tgc_arange(0, 12, 1, TGC_F32, tgc_cpu());
    tgc_tensor *k = tgc_exp(tgc_mul_scalar(tgc_reshape(c, s, 2), 0.25));
    out[0] = tgc_add(in[0], k);
    out[1] = tgc_sum(k, NULL, 0, 0);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_identities(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *x = in[0];
    int64_t same[2] = {tgc_size(x, 0), tgc_size(x, 1)};
    int id[2] = {0, 1};
    tgc_tensor *y = tgc_mul_scalar(x, 1.0);
    y = tgc_div_scalar(y, 1.0);
    y = tgc_sub_scalar(y, 0.0);
    y = tgc_add_scalar(y, -0.0);
    y = tgc_neg(tgc_neg(y));
    y = tgc_cast(y, TGC_F32);
    y = tgc_reshape(y, same, 2);
    y = tgc_permute(y, id, 2);
    y = tgc_expand(y, same, 2);
    y = tgc_slice(y, 1, 0, INT64_MAX, 1);
    y = tgc_contiguous(tgc_exp(y));
    out[0] = y;
    out[1] = tgc_add_scalar(x, 0.0); /* not exact for -0: stays */
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_view_chains(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *x = in[0]; /* [2, 3, 4] */
    int64_t s1[2] = {6, 4}, s2[3] = {3, 2, 4};
    int p1[3] = {2, 0, 1}, p2[3] = {1, 2, 0}, p3[3] = {0, 2, 1};
    out[0] = tgc_reshape(tgc_reshape(x, s1, 2), s2, 3);
    out[1] = tgc_permute(tgc_permute(x, p1, 3), p2, 3); /* identity */
    out[2] = tgc_permute(tgc_permute(x, p1, 3), p3, 3);
    out[3] = tgc_flatten(tgc_unsqueeze(tgc_squeeze(tgc_unsqueeze(x, 0), 0), 3), 1, 3);
    return out[0] && out[1] && out[2] && out[3] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_scale_chain(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_mul_scalar(tgc_mul_scalar(in[0], 3.0), 0.5); /* merges */
    out[1] = tgc_mul_scalar(tgc_mul_scalar(in[0], 3.0), 0.1); /* two roundings: stays */
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_dynamic_views(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                   int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *x = in[0]; /* [s0, 4, 6] */
    int64_t t1[2] = {0, 24}, t2[3] = {-1, 4, 6};
    out[0] = tgc_reshape(tgc_reshape(x, t1, 2), t2, 3);
    out[1] = tgc_softmax(tgc_flatten(x, 1, 2), 1);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_common(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *a = tgc_exp(tgc_add(in[0], in[1]));
    tgc_tensor *b = tgc_exp(tgc_add(in[0], in[1]));
    tgc_tensor *c = tgc_mul_scalar(in[0], 2.0);
    tgc_tensor *d = tgc_mul_scalar(in[0], 2.0000001);
    int64_t s[2] = {tgc_size(in[0], 0), tgc_size(in[0], 1)};
    tgc_tensor *r1 = tgc_rand(s, 2, TGC_F32, tgc_cpu());
    tgc_tensor *r2 = tgc_rand(s, 2, TGC_F32, tgc_cpu());
    out[0] = tgc_mul(a, b);
    out[1] = tgc_add(c, d);
    out[2] = tgc_sub(r1, r2);
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_dead(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_tensor *dead = tgc_exp(tgc_mul(in[0], in[0]));
    (void)dead;
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_model(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int64_t s[1] = {8};
    tgc_tensor *w = tgc_full(s, 1, 2.0, TGC_F32, tgc_cpu());
    tgc_tensor *h = tgc_layer_norm(in[0], 1, tgc_mul_scalar(w, 0.5), NULL, 1e-5);
    h = tgc_gelu(tgc_mul_scalar(h, 1.0));
    tgc_tensor *h2 = tgc_gelu(tgc_mul_scalar(h, 1.0));
    out[0] = tgc_softmax(tgc_add(h, h2), 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* Dead random draws (dropout, attention dropout, rand) before a live dropout. */
static tgc_status fn_dead_random(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int64_t s[1] = {5};
    tgc_tensor *d1 = tgc_dropout(in[0], 0.5, 1);
    tgc_tensor *d2 = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0);
    tgc_tensor *d3 = tgc_rand(s, 1, TGC_F32, tgc_cpu());
    tgc_tensor *d4 = tgc_exp(in[0]);
    if (!d1 || !d2 || !d3 || !d4)
        return tgc_last_status();
    out[0] = tgc_dropout(in[0], 0.5, 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* Equal random draws of one input: each must draw its own bits. */
static tgc_status fn_equal_draws(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                 int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_dropout(in[0], 0.5, 1);
    out[1] = tgc_dropout(in[0], 0.5, 1);
    out[2] = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0);
    out[3] = tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0);
    return out[0] && out[1] && out[2] && out[3] ? TGC_OK : tgc_last_status();
}

/* Captured running stats that batch_norm in training writes, read before and after. */
static tgc_tensor *g_rm, *g_rv, *g_w;

static tgc_status fn_bn_readers(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_mul_scalar(g_rv, 3.0); /* reads the value from before the write */
    tgc_tensor *h = tgc_relu(in[0]);
    tgc_tensor *y = tgc_batch_norm(h, g_rm, g_rv, NULL, NULL, 1, 0.1, 1e-5);
    out[1] = tgc_matmul(g_rv, g_w);    /* parameter-only: what hoisting moves */
    out[2] = tgc_minimum(g_w, g_rv);   /* likewise */
    out[3] = tgc_add(h, g_rv);         /* pointwise over relu's group */
    out[4] = tgc_mul_scalar(g_w, 2.0); /* not ordered by the write */
    out[5] = y;
    for (int k = 0; k < 6; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

/* Trace constants as running stats: folding must not evaluate a reader of them. */
static tgc_status fn_bn_const_stats(tgc_module *m, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    int64_t s[1] = {3};
    tgc_tensor *rm = tgc_zeros(s, 1, TGC_F32, tgc_cpu());
    tgc_tensor *rv = tgc_ones(s, 1, TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_full(s, 1, 2.0, TGC_F32, tgc_cpu());
    out[0] = tgc_mul_scalar(rv, 3.0);
    tgc_tensor *y = tgc_batch_norm(in[0], rm, rv, NULL, NULL, 1, 0.1, 1e-5);
    out[1] = tgc_mul_scalar(rv, 2.0);
    out[2] = tgc_mul_scalar(w, 4.0); /* a constant no one writes: folded */
    out[3] = y;
    return out[0] && out[1] && out[2] && out[3] ? TGC_OK : tgc_last_status();
}

/* ---- clone ---- */

static void clone_is_deep_and_independent(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_fold_chain, in, 1, 2, TGC_DYNAMIC_ALWAYS);
    assert_true(tgc_sym_count(x.g->syms) > 0);
    assert_int_equal(x.g->n_consts, 1); /* arange, imported */
    tgc_graph *c = tgc_graph_clone(x.g);
    assert_non_null(c);
    char *t1 = tgc_graph_to_text(x.g), *t2 = tgc_graph_to_text(c);
    assert_string_equal(t1, t2);
    assert_non_null(strstr(t1, "{folded 0}"));
    assert_ptr_not_equal(c->syms, x.g->syms);
    assert_ptr_equal(c->consts[0], x.g->consts[0]);
    tgc_graph_free(x.g); /* the clone keeps its own symbols and constant reference */
    x.g = c;
    assert_int_equal(tgc_graph_verify(c), TGC_OK);
    char *t3 = tgc_graph_to_text(c);
    assert_string_equal(t1, t3);
    tgc_tensor *out[2];
    run_graph(&x, c, in, 1, out);
    assert_int_equal(tgc_size(out[0], 0), 3);
    free(t1);
    free(t2);
    free(t3);
    fx_free(&x);
}

/* ---- decompose ---- */

static void decompose_softmax_static(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 6, 9, 0, 0)};
    fx_trace(&x, fn_softmax, in, 1, 2, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 1, 2, 1e-5);
    assert_int_equal(count_op(before, TGC_OP_SOFTMAX), 1);
    assert_int_equal(count_op(x.g, TGC_OP_SOFTMAX) + count_op(x.g, TGC_OP_LOG_SOFTMAX), 0);
    assert_int_equal(count_op(x.g, TGC_OP_MAX), 2);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 2);
    assert_int_equal(count_op(x.g, TGC_OP_LOG), 1);
    /* rows of the softmax sum to 1 */
    tgc_tensor *out[2];
    run_graph(&x, x.g, in, 1, out);
    int d1[] = {1};
    tgc_tensor *rows = tgc_sum(out[0], d1, 1, 0);
    double *r = host_f64(rows);
    for (int i = 0; i < 6; i++)
        assert_true(fabs(r[i] - 1.0) < 1e-6);
    free(r);
    tgc_graph_free(before);
    fx_free(&x);
}

static void decompose_softmax_symbolic(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 5, 7, 0, 0)};
    fx_trace(&x, fn_softmax, in, 1, 2, TGC_DYNAMIC_ALWAYS);
    assert_int_equal(tgc_sym_count(x.g->syms), 2);
    tgc_tensor *other[1] = {randn(2, 3, 11, 0, 0)}; /* other sizes, same graph */
    tgc_graph *before = apply(&x, tgc_pass_decompose, other, 1, 2, 1e-5);
    expect_same_outputs(&x, before, in, 1, 2, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_SOFTMAX), 0);
    tgc_graph_free(before);
    fx_free(&x);
}

static void decompose_layer_norm_with_and_without_affine(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[3] = {randn(3, 2, 5, 8, 0), randn(1, 8, 0, 0, 0), randn(1, 8, 0, 0, 0)};
    fx_trace(&x, fn_layer_norm_wb, in, 3, 1, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 3, 1, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_LAYER_NORM), 0);
    assert_int_equal(count_op(x.g, TGC_OP_MEAN), 2);
    assert_int_equal(count_op(x.g, TGC_OP_RSQRT), 1);
    assert_int_equal(count_op(x.g, TGC_OP_ADD), 1); /* bias */
    tgc_graph_free(before);
    fx_free(&x);

    tgc_tensor *in2[1] = {randn(3, 4, 6, 10, 0)};
    fx_trace(&x, fn_layer_norm_plain, in2, 1, 1, TGC_DYNAMIC_ALWAYS);
    before = apply(&x, tgc_pass_decompose, in2, 1, 1, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_LAYER_NORM), 0);
    assert_int_equal(count_op(x.g, TGC_OP_ADD), 0);
    tgc_tensor *in3[1] = {randn(3, 2, 3, 7, 0)};
    expect_same_outputs(&x, before, in3, 1, 1, 1e-5);
    tgc_graph_free(before);
    fx_free(&x);
}

static void decompose_activations(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {tgc_mul_scalar(randn(2, 7, 13, 0, 0), 3.0)};
    fx_trace(&x, fn_activations, in, 1, 3, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 1, 3, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_GELU) + count_op(x.g, TGC_OP_GELU_TANH) +
                         count_op(x.g, TGC_OP_SILU),
                     0);
    assert_int_equal(count_op(x.g, TGC_OP_ERF), 1);
    assert_int_equal(count_op(x.g, TGC_OP_TANH), 1);
    assert_int_equal(count_op(x.g, TGC_OP_SIGMOID), 1);
    tgc_graph_free(before);
    fx_free(&x);
}

static void decompose_batch_norm_eval_4d_and_2d(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[5] = {randn(4, 2, 3, 5, 4), rand01(1, 3, 0),
                         tgc_add_scalar(rand01(1, 3, 0), 0.5), randn(1, 3, 0, 0, 0),
                         randn(1, 3, 0, 0, 0)};
    fx_trace(&x, fn_bn_eval, in, 5, 2, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 5, 2, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_BATCH_NORM), 0);
    assert_int_equal(count_op(x.g, TGC_OP_RESHAPE), 4); /* scale and shift, twice */
    tgc_graph_free(before);
    fx_free(&x);

    /* 2-D input, every size symbolic (C too) */
    tgc_tensor *in2[5] = {randn(2, 6, 4, 0, 0), rand01(1, 4, 0),
                          tgc_add_scalar(rand01(1, 4, 0), 0.5), randn(1, 4, 0, 0, 0),
                          randn(1, 4, 0, 0, 0)};
    fx_trace(&x, fn_bn_eval, in2, 5, 2, TGC_DYNAMIC_ALWAYS);
    before = apply(&x, tgc_pass_decompose, in2, 5, 2, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_BATCH_NORM), 0);
    tgc_graph_free(before);
    fx_free(&x);
}

/* batch_norm in training: kept whole under TGC_DECOMPOSE_KEEP_BATCH_NORM (its kernel writes
 * the running statistics); otherwise the statistics' ops, the normalization and two
 * assignments of the running statistics, which compute what interp's kernel computes: the
 * output and the updated statistics, with constant sizes and with every size symbolic (the
 * unbiased variance then a var node). */
static void decompose_training_batch_norm(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[3] = {randn(4, 2, 3, 2, 2), tgc_zeros((int64_t[]){3}, 1, TGC_F32, tgc_cpu()),
                         tgc_ones((int64_t[]){3}, 1, TGC_F32, tgc_cpu())};
    fx_trace(&x, fn_bn_train, in, 3, 1, TGC_DYNAMIC_NEVER);
    int n = x.g->n_nodes;
    assert_int_equal(tgc_pass_decompose_opts(x.g, TGC_DECOMPOSE_KEEP_BATCH_NORM), TGC_OK);
    assert_int_equal(x.g->n_nodes, n);
    assert_int_equal(count_op(x.g, TGC_OP_BATCH_NORM), 1);
    assert_true(x.g->nodes[x.g->outputs[0]].flags & TGC_NODE_MUTATES);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    assert_int_equal(tgc_pass_cse(x.g), TGC_OK);
    assert_int_equal(count_op(x.g, TGC_OP_BATCH_NORM), 1);
    fx_free(&x);

    for (int dyn = 0; dyn < 2; dyn++) {
        /* x far from zero (mean 3), stats, weight, bias */
        tgc_tensor *xin = tgc_add_scalar(randn(4, 5, 3, 4, 2), 3.0);
        tgc_tensor *bn[5] = {xin, tgc_mul_scalar(rand01(1, 3, 0), 0.5),
                             tgc_add_scalar(rand01(1, 3, 0), 0.5), randn(1, 3, 0, 0, 0),
                             randn(1, 3, 0, 0, 0)};
        fx_trace(&x, fn_bn_train_affine, bn, 5, 1, dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER);
        tgc_graph *before = tgc_graph_clone(x.g);
        assert_non_null(before);
        assert_int_equal(tgc_pass_decompose(x.g), TGC_OK);
        if (tgc_graph_verify(x.g) != TGC_OK)
            fail_msg("%s", tgc_last_error());
        assert_int_equal(count_op(x.g, TGC_OP_BATCH_NORM), 0);
        assert_int_equal(count_op(x.g, TGC_OP_ASSIGN), 2);
        assert_int_equal(count_op(x.g, TGC_OP_VAR), dyn);
        /* each graph on its own copy of the running statistics */
        tgc_tensor *ia[5] = {xin, tgc_mul_scalar(bn[1], 1.0), tgc_mul_scalar(bn[2], 1.0), bn[3],
                             bn[4]};
        tgc_tensor *ib[5] = {xin, tgc_mul_scalar(bn[1], 1.0), tgc_mul_scalar(bn[2], 1.0), bn[3],
                             bn[4]};
        tgc_tensor *oa[1] = {0}, *ob[1] = {0};
        run_graph(&x, before, ia, 5, oa);
        run_graph(&x, x.g, ib, 5, ob);
        expect_close(ob[0], oa[0], 1e-5, 1e-5);
        expect_close(ib[1], ia[1], 1e-5, 1e-6); /* running_mean, moved */
        expect_close(ib[2], ia[2], 1e-5, 1e-6); /* running_var */
        double *moved = host_f64(ia[1]), *was = host_f64(bn[1]);
        assert_true(fabs(moved[0] - was[0]) > 1e-3);
        free(moved);
        free(was);
        tgc_graph_free(before);
        fx_free(&x);
    }
}

/* conv2d_grad_input of the geometry in t_cg (stride, padding, dilation: [0..6), groups [6])
 * of dy (in[0]) and w (in[1]); in[2] is x, read for its sizes only */
static int64_t t_cg[7];

/* conv2d's attributes of the geometry in t_cg */
static tgc_attrs t_cg_attrs(void)
{
    tgc_attrs a = tgc_attrs_of(TGC_OP_CONV2D);
    a.conv2d.stride_h = t_cg[0];
    a.conv2d.stride_w = t_cg[1];
    a.conv2d.pad_h = t_cg[2];
    a.conv2d.pad_w = t_cg[3];
    a.conv2d.dil_h = t_cg[4];
    a.conv2d.dil_w = t_cg[5];
    a.conv2d.groups = t_cg[6];
    return a;
}

static tgc_status fn_conv_grad_input(tgc_module *m, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_attrs a = t_cg_attrs();
    out[0] = tgc_conv2d_grad_input(in[0], in[1], &a, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* stride 1, one group: conv2d(dy, flip(w^T)) equal to interp's input gradient (3x3 and 1x1
 * kernels, rectangular ones with padding and dilation); kept under the flag, for strides,
 * groups, padding past the window and symbolic kernel sizes (every size of an argument is
 * symbolic under TGC_DYNAMIC_ALWAYS) */
static void decompose_conv_grad_input_as_conv(void **state)
{
    (void)state;
    static const struct {
        int64_t n, c, h, w, o, kh, kw, g[7];
        int dyn, as_conv;
    } cases[] = {
        {2, 3, 6, 5, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 0, 1},
        {2, 5, 4, 4, 3, 1, 1, {1, 1, 0, 0, 1, 1, 1}, 0, 1},
        {1, 2, 7, 6, 3, 3, 2, {1, 1, 2, 0, 2, 1, 1}, 0, 1}, /* dilated, rectangular */
        {1, 2, 5, 5, 2, 3, 3, {1, 1, 0, 0, 1, 1, 1}, 0, 1}, /* no padding */
        {2, 3, 6, 6, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 1, 0}, /* symbolic kernel sizes */
        {2, 3, 6, 6, 4, 3, 3, {2, 2, 1, 1, 1, 1, 1}, 0, 0}, /* stride 2 */
        {1, 4, 5, 5, 4, 3, 3, {1, 1, 1, 1, 1, 1, 2}, 0, 0}, /* two groups */
        {1, 2, 5, 5, 2, 3, 3, {1, 1, 3, 3, 1, 1, 1}, 0, 0}, /* padding past the window */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        memcpy(t_cg, cases[t].g, sizeof t_cg);
        const int64_t *g = cases[t].g;
        const int64_t oh = (cases[t].h + 2 * g[2] - g[4] * (cases[t].kh - 1) - 1) / g[0] + 1,
                      ow = (cases[t].w + 2 * g[3] - g[5] * (cases[t].kw - 1) - 1) / g[1] + 1;
        tgc_tensor *in[3] = {randn(4, cases[t].n, cases[t].o, oh, ow),
                             randn(4, cases[t].o, cases[t].c / g[6], cases[t].kh, cases[t].kw),
                             randn(4, cases[t].n, cases[t].c, cases[t].h, cases[t].w)};
        fx x;
        fx_trace(&x, fn_conv_grad_input, in, 3, 1,
                 cases[t].dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER);
        assert_int_equal(tgc_pass_decompose_opts(x.g, TGC_DECOMPOSE_KEEP_CONV_GRAD_INPUT), TGC_OK);
        assert_int_equal(count_op(x.g, TGC_OP_CONV2D_GRAD_INPUT), 1);
        tgc_graph *before = apply(&x, tgc_pass_decompose, in, 3, 1, 1e-5);
        assert_int_equal(count_op(x.g, TGC_OP_CONV2D_GRAD_INPUT), !cases[t].as_conv);
        assert_int_equal(count_op(x.g, TGC_OP_CONV2D), cases[t].as_conv);
        assert_int_equal(count_op(x.g, TGC_OP_FLIP), cases[t].as_conv);
        tgc_graph_free(before);
        fx_free(&x);
    }
}

/* conv2d (op 0: x, w), conv2d_grad_input (1: dy, w, x for its sizes) and
 * conv2d_grad_weight (2: x, dy, w for its sizes) of the geometry in t_cg */
static int t_conv_op;

static tgc_status fn_conv_any(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    tgc_attrs a = t_cg_attrs();
    if (t_conv_op == 0)
        out[0] = tgc_conv2d(in[0], in[1], NULL,
                            &(tgc_conv2d_opts){.stride = {t_cg[0], t_cg[1]},
                                               .padding = {t_cg[2], t_cg[3]},
                                               .dilation = {t_cg[4], t_cg[5]},
                                               .groups = t_cg[6]});
    else if (t_conv_op == 1)
        out[0] = tgc_conv2d_grad_input(in[0], in[1], &a, in[2]);
    else
        out[0] = tgc_conv2d_grad_weight(in[0], in[1], &a, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* the live-tap runs of one axis (ir/conv_taps.h) */
static void conv_axis_trim_runs(void **state)
{
    (void)state;
    static const struct {
        int64_t n, k, s, p, d, trims, first, count, pad;
    } cases[] = {
        {1, 3, 1, 1, 1, 1, 1, 1, 0}, /* a 1x1 image: the centre tap */
        {2, 3, 2, 1, 1, 1, 1, 2, 0}, /* 2 -> 1 at stride 2: taps 1 and 2 */
        {2, 3, 1, 1, 1, 0, 0, 3, 1}, /* every tap reads the image somewhere */
        {2, 3, 1, 2, 2, 1, 1, 1, 0}, /* dilated: only the middle tap */
        {8, 3, 1, 1, 1, 0, 0, 3, 1}, {1, 1, 1, 0, 1, 0, 0, 1, 0}, {1, 5, 1, 2, 1, 1, 2, 1, 0},
        {3, 7, 2, 3, 1, 1, 1, 5, 2}, /* 3 -> 2 at stride 2 (a stem on a tiny image) */
        {1, 3, 1, 3, 1, 0, 0, 3, 3}, /* padding past the window: no padding reproduces it */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int64_t f = -1, n = -1, p = -1;
        int got = tgc_conv_axis_trim(cases[t].n, cases[t].k, cases[t].s, cases[t].p, cases[t].d, &f,
                                     &n, &p);
        if (got != (int)cases[t].trims || f != cases[t].first || n != cases[t].count ||
            p != cases[t].pad)
            fail_msg("case %zu: %d first %lld count %lld pad %lld", t, got, (long long)f,
                     (long long)n, (long long)p);
    }
}

/* taps that read only padding dropped from conv2d and both gradients, equal to interp's
 * results of the whole kernel; every tap kept when all read the image, when sizes are
 * symbolic and under the flag */
static void decompose_conv_dead_taps(void **state)
{
    (void)state;
    static const struct {
        int64_t n, c, h, w, o, kh, kw, g[7];
        int dyn, trims;
    } cases[] = {
        {2, 4, 1, 1, 5, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 0, 1}, /* 1x1 image: the centre */
        {2, 4, 2, 2, 6, 3, 3, {2, 2, 1, 1, 1, 1, 1}, 0, 1}, /* 2x2 -> 1x1, stride 2 */
        {1, 3, 1, 4, 2, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 0, 1}, /* rows only */
        {1, 4, 2, 2, 4, 3, 3, {1, 1, 2, 2, 2, 2, 2}, 0, 1}, /* dilated, two groups */
        {2, 3, 2, 2, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 0, 0}, /* every tap live */
        {2, 4, 1, 1, 5, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 1, 0}, /* symbolic sizes */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++)
        for (t_conv_op = 0; t_conv_op < 3; t_conv_op++) {
            memcpy(t_cg, cases[t].g, sizeof t_cg);
            const int64_t *g = cases[t].g;
            const int64_t oh = (cases[t].h + 2 * g[2] - g[4] * (cases[t].kh - 1) - 1) / g[0] + 1,
                          ow = (cases[t].w + 2 * g[3] - g[5] * (cases[t].kw - 1) - 1) / g[1] + 1;
            tgc_tensor *x = randn(4, cases[t].n, cases[t].c, cases[t].h, cases[t].w),
                       *w = randn(4, cases[t].o, cases[t].c / g[6], cases[t].kh, cases[t].kw),
                       *dy = randn(4, cases[t].n, cases[t].o, oh, ow);
            tgc_tensor *in[3] = {t_conv_op == 1 ? dy : x,
                                 t_conv_op == 0   ? w
                                 : t_conv_op == 1 ? w
                                                  : dy,
                                 t_conv_op == 1 ? x : w};
            const int n_in = t_conv_op == 0 ? 2 : 3;
            const tgc_op op = t_conv_op == 0   ? TGC_OP_CONV2D
                              : t_conv_op == 1 ? TGC_OP_CONV2D_GRAD_INPUT
                                               : TGC_OP_CONV2D_GRAD_WEIGHT;
            fx x0;
            fx_trace(&x0, fn_conv_any, in, n_in, 1,
                     cases[t].dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER);
            assert_int_equal(tgc_pass_decompose_opts(x0.g, TGC_DECOMPOSE_KEEP_CONV_TAPS |
                                                               TGC_DECOMPOSE_KEEP_CONV_GRAD_INPUT),
                             TGC_OK);
            assert_int_equal(count_op(x0.g, TGC_OP_SLICE) + count_op(x0.g, TGC_OP_PAD), 0);
            fx_free(&x0);
            fx xf;
            fx_trace(&xf, fn_conv_any, in, n_in, 1,
                     cases[t].dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER);
            tgc_graph *before = apply(&xf, tgc_pass_decompose, in, n_in, 1, 1e-5);
            int trims = cases[t].trims;
            if (t_conv_op == 2)
                assert_int_equal(count_op(xf.g, TGC_OP_PAD), trims);
            else
                assert_true((count_op(xf.g, TGC_OP_SLICE) > 0) == trims);
            /* the kernel that runs has only the live taps (sizes are constants) */
            for (int i = 0; i < xf.g->n_nodes && !cases[t].dyn; i++) {
                const tgc_node *nd = &xf.g->nodes[i];
                if (nd->op != op && !(op == TGC_OP_CONV2D_GRAD_INPUT && nd->op == TGC_OP_CONV2D))
                    continue;
                int64_t taps =
                    nd->op == TGC_OP_CONV2D_GRAD_WEIGHT
                        ? nd->out.shape[2] * nd->out.shape[3]
                        : xf.g->nodes[nd->in[1]].out.shape[2] * xf.g->nodes[nd->in[1]].out.shape[3];
                assert_true((taps < cases[t].kh * cases[t].kw) == trims);
            }
            tgc_graph_free(before);
            fx_free(&xf);
        }
}

static void decompose_cross_entropy_and_var(void **state)
{
    (void)state;
    fx x;
    int64_t tg[6] = {0, 2, 4, 1, 2, 3}, ts[1] = {6};
    tgc_tensor *in[2] = {randn(2, 6, 5, 0, 0),
                         tgc_from_data(tg, sizeof tg, ts, 1, TGC_I64, tgc_cpu())};
    fx_trace(&x, fn_cross_entropy, in, 2, 3, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 2, 3, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_CROSS_ENTROPY), 1); /* the smoothed one stays */
    assert_int_equal(count_op(x.g, TGC_OP_NLL_LOSS), 2);
    assert_int_equal(count_op(x.g, TGC_OP_LOG_SOFTMAX), 0);
    tgc_graph_free(before);
    fx_free(&x);

    tgc_tensor *in2[1] = {randn(2, 5, 9, 0, 0)};
    fx_trace(&x, fn_var, in2, 1, 2, TGC_DYNAMIC_NEVER);
    before = apply(&x, tgc_pass_decompose, in2, 1, 2, 1e-5);
    assert_int_equal(count_op(x.g, TGC_OP_VAR), 0);
    assert_int_equal(count_op(x.g, TGC_OP_DIV_SCALAR), 2);
    tgc_graph_free(before);
    fx_free(&x);
}

static void decompose_half_precision_computes_in_f32(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {tgc_cast(randn(2, 4, 16, 0, 0), TGC_BF16)};
    fx_trace(&x, fn_softmax, in, 1, 2, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_decompose, in, 1, 2, 1e-2);
    assert_int_equal(count_op(x.g, TGC_OP_CAST), 4); /* up and down, per op */
    assert_int_equal(tgc_pass_cse(x.g), TGC_OK);
    assert_int_equal(count_op(x.g, TGC_OP_CAST), 3); /* x cast up once */
    assert_int_equal(x.g->nodes[x.g->outputs[0]].out.dtype, TGC_BF16);
    tgc_graph_free(before);
    fx_free(&x);
}

/* ---- fold ---- */

static void fold_constant_chain(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_fold_chain, in, 1, 2, TGC_DYNAMIC_NEVER);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 1);
    tgc_graph *before = apply(&x, fold_interp, in, 1, 2, 0);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    expect_same_outputs(&x, before, in, 1, 2, 0);
    /* only the add of the argument is left to compute */
    assert_int_equal(count_op(x.g, TGC_OP_EXP) + count_op(x.g, TGC_OP_MUL_SCALAR) +
                         count_op(x.g, TGC_OP_RESHAPE) + count_op(x.g, TGC_OP_SUM),
                     0);
    assert_int_equal(count_op(x.g, TGC_OP_ADD), 1);
    assert_int_equal(x.g->n_consts, 2); /* exp(...) and its sum; the arange was dropped */
    double *k = host_f64(x.g->consts[0]);
    for (int i = 0; i < 12; i++)
        assert_true(fabs(k[i] - (double)expf((float)i * 0.25f)) < 1e-5 * k[i]);
    free(k);
    double *s = host_f64(x.g->consts[1]);
    assert_int_equal(tgc_numel(x.g->consts[1]), 1);
    assert_true(s[0] > 67.1 && s[0] < 67.3); /* sum_{i<12} e^{i/4} = 67.197... */
    free(s);
    char *text = tgc_graph_to_text(x.g);
    assert_non_null(strstr(text, "{folded 1}"));
    free(text);
    tgc_graph_free(before);
    fx_free(&x);
}

static void fold_leaves_random_and_arguments(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[2] = {randn(2, 3, 4, 0, 0), randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_common, in, 2, 3, TGC_DYNAMIC_NEVER);
    int n = x.g->n_nodes;
    assert_int_equal(fold_interp(x.g), TGC_OK);
    assert_int_equal(x.g->n_nodes, n);
    assert_int_equal(x.g->n_consts, 0);
    assert_int_equal(count_op(x.g, TGC_OP_RAND), 2);
    fx_free(&x);
}

/* ---- simplify ---- */

static void simplify_removes_exact_identities(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 4, 5, 0, 0)};
    fx_trace(&x, fn_identities, in, 1, 2, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_simplify, in, 1, 2, 0);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    expect_same_outputs(&x, before, in, 1, 2, 0);
    /* left: input, exp, add_scalar(+0) */
    assert_int_equal(x.g->n_nodes, 3);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 1);
    assert_int_equal(count_op(x.g, TGC_OP_ADD_SCALAR), 1);
    /* -0.0 + 0.0 is +0.0: that add must stay */
    int64_t s1[2] = {4, 5};
    tgc_tensor *neg_zero[1] = {tgc_full(s1, 2, -0.0, TGC_F32, tgc_cpu())};
    tgc_tensor *out[2];
    run_graph(&x, x.g, neg_zero, 1, out);
    double *z = host_f64(out[1]);
    assert_true(z[0] == 0.0 && !signbit(z[0]));
    free(z);
    tgc_graph_free(before);
    fx_free(&x);
}

static void simplify_canonicalizes_view_chains(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(3, 2, 3, 4, 0)};
    fx_trace(&x, fn_view_chains, in, 1, 4, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_simplify, in, 1, 4, 0);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    expect_same_outputs(&x, before, in, 1, 4, 0);
    assert_int_equal(x.g->outputs[1], 0); /* permute of its inverse is x itself */
    assert_int_equal(count_op(x.g, TGC_OP_PERMUTE), 1);
    assert_int_equal(count_op(x.g, TGC_OP_SQUEEZE) + count_op(x.g, TGC_OP_UNSQUEEZE) +
                         count_op(x.g, TGC_OP_FLATTEN),
                     0);
    assert_int_equal(count_op(x.g, TGC_OP_RESHAPE), 2); /* one per reshaped output */
    const tgc_node *p = &x.g->nodes[x.g->outputs[2]];
    assert_int_equal(p->op, TGC_OP_PERMUTE);
    assert_int_equal(p->in[0], 0);
    assert_int_equal(p->attrs.i[0], 2); /* [2,0,1] then [0,2,1] = [2,1,0] */
    assert_int_equal(p->attrs.i[1], 1);
    assert_int_equal(p->attrs.i[2], 0);
    tgc_graph_free(before);
    fx_free(&x);
}

static void simplify_merges_power_of_two_scales_only(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 8, 8, 0, 0)};
    fx_trace(&x, fn_scale_chain, in, 1, 2, TGC_DYNAMIC_NEVER);
    tgc_graph *before = apply(&x, tgc_pass_simplify, in, 1, 2, 0);
    const tgc_node *m = &x.g->nodes[x.g->outputs[0]];
    assert_int_equal(m->op, TGC_OP_MUL_SCALAR);
    assert_int_equal(m->in[0], 0);
    assert_true(m->attrs.f[0] == 1.5);
    const tgc_node *k = &x.g->nodes[x.g->outputs[1]];
    assert_int_not_equal(k->in[0], 0);
    tgc_graph_free(before);
    fx_free(&x);
}

static void simplify_keeps_symbolic_shapes(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(3, 5, 4, 6, 0)};
    fx_trace(&x, fn_dynamic_views, in, 1, 2, TGC_DYNAMIC_AUTO);
    tgc_graph_free(x.g);
    tgc_fn_free(x.f);
    /* mark dim 0 dynamic: the other dims stay constant */
    tgc_mark_dynamic(in[0], 0);
    fx_trace(&x, fn_dynamic_views, in, 1, 2, TGC_DYNAMIC_AUTO);
    assert_int_equal(tgc_sym_count(x.g->syms), 1);
    tgc_tensor *other[1] = {randn(3, 9, 4, 6, 0)};
    tgc_graph *before = apply(&x, tgc_pass_simplify, other, 1, 2, 0);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    expect_same_outputs(&x, before, other, 1, 2, 0);
    /* reshape(reshape x) back to x's own shape is x; flatten became a reshape ([0, 24]:
     * the symbolic dim is copied in place) */
    assert_int_equal(x.g->outputs[0], 0);
    assert_int_equal(count_op(x.g, TGC_OP_FLATTEN), 0);
    assert_int_equal(count_op(x.g, TGC_OP_RESHAPE), 1);
    tgc_graph_free(before);
    fx_free(&x);
}

/* ---- cse, dce ---- */

static void cse_merges_equal_nodes_but_not_random(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[2] = {randn(2, 3, 4, 0, 0), randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_common, in, 2, 3, TGC_DYNAMIC_ALWAYS);
    assert_int_equal(count_op(x.g, TGC_OP_ADD), 3);
    assert_int_equal(tgc_pass_cse(x.g), TGC_OK);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    assert_int_equal(count_op(x.g, TGC_OP_ADD), 2);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 1);
    assert_int_equal(count_op(x.g, TGC_OP_MUL_SCALAR), 2); /* 2.0 vs 2.0000001 */
    assert_int_equal(count_op(x.g, TGC_OP_RAND), 2);
    const tgc_node *m = &x.g->nodes[x.g->outputs[0]];
    assert_int_equal(m->in[0], m->in[1]);
    /* outputs 0 and 1 are deterministic: compare on other sizes */
    tgc_tensor *o[2] = {randn(2, 5, 2, 0, 0), randn(2, 5, 2, 0, 0)};
    tgc_tensor *got[3], *want[3];
    run_graph(&x, x.g, o, 2, got);
    run_graph(&x, x.v->graph, o, 2, want);
    expect_close(got[0], want[0], 0, 0);
    expect_close(got[1], want[1], 0, 0);
    fx_free(&x);
}

static void dce_removes_dead_nodes(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_dead, in, 1, 1, TGC_DYNAMIC_NEVER);
    assert_int_equal(x.g->n_nodes, 4);
    tgc_graph *before = apply(&x, tgc_pass_dce, in, 1, 1, 0);
    assert_int_equal(x.g->n_nodes, 2);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 0);
    assert_int_equal(count_op(x.g, TGC_OP_MUL), 0);
    assert_int_equal(x.g->nodes[x.g->outputs[0]].op, TGC_OP_ADD_SCALAR);
    tgc_graph_free(before);
    fx_free(&x);
}

/* Regression test (fuzz new-2): a dead dropout was removed, shifting later draws. */
static void dce_keeps_dead_random_draws(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_dead_random, in, 1, 1, TGC_DYNAMIC_NEVER);
    tgc_graph *before = tgc_graph_clone(x.g);
    assert_non_null(before);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    assert_int_equal(count_op(x.g, TGC_OP_DROPOUT), 2);
    assert_int_equal(count_op(x.g, TGC_OP_SDPA), 1);
    assert_int_equal(count_op(x.g, TGC_OP_RAND), 1);
    assert_int_equal(count_op(x.g, TGC_OP_EXP), 0); /* dead and without effect: removed */
    /* the live dropout draws the bits eager draws, with and without the pass */
    tgc_tensor *want[1], *got[1], *orig[1];
    tgc_manual_seed(77);
    assert_int_equal(fn_dead_random(NULL, in, 1, want, 1), TGC_OK);
    tgc_manual_seed(77);
    run_graph(&x, x.g, in, 1, got);
    tgc_manual_seed(77);
    run_graph(&x, before, in, 1, orig);
    expect_close(got[0], want[0], 0, 0);
    expect_close(orig[0], want[0], 0, 0);
    tgc_graph_free(before);
    fx_free(&x);
}

static void cse_keeps_equal_random_draws_apart(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 6, 5, 0, 0)};
    fx_trace(&x, fn_equal_draws, in, 1, 4, TGC_DYNAMIC_NEVER);
    assert_int_equal(tgc_pass_cse(x.g), TGC_OK);
    assert_int_equal(tgc_pass_dce(x.g), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    assert_int_equal(count_op(x.g, TGC_OP_DROPOUT), 2);
    assert_int_equal(count_op(x.g, TGC_OP_SDPA), 2);
    assert_int_not_equal(x.g->outputs[0], x.g->outputs[1]);
    assert_int_not_equal(x.g->outputs[2], x.g->outputs[3]);
    tgc_tensor *want[4], *got[4];
    tgc_manual_seed(5);
    tgc_eager_force_interp(1); /* the oracle, bit for bit (LLVM's attention rounds in f32) */
    assert_int_equal(fn_equal_draws(NULL, in, 1, want, 4), TGC_OK);
    tgc_eager_force_interp(0);
    tgc_manual_seed(5);
    run_graph(&x, x.g, in, 1, got);
    for (int k = 0; k < 4; k++)
        expect_close(got[k], want[k], 0, 0);
    /* the two dropouts differ (30 elements at p = 0.5) */
    double *a = host_f64(got[0]), *b = host_f64(got[1]);
    int differ = 0;
    for (int i = 0; i < 30; i++)
        differ |= a[i] != b[i];
    assert_true(differ);
    free(a);
    free(b);
    fx_free(&x);
}

static void order_pinned_marks_effects_and_readers_of_written_values(void **state)
{
    (void)state;
    int64_t s[1] = {4};
    g_rm = tgc_zeros(s, 1, TGC_F32, tgc_cpu());
    g_rv = tgc_ones(s, 1, TGC_F32, tgc_cpu());
    g_w = tgc_full(s, 1, 0.5, TGC_F32, tgc_cpu());
    fx x;
    tgc_tensor *in[1] = {randn(2, 6, 4, 0, 0)};
    fx_trace(&x, fn_bn_readers, in, 1, 6, TGC_DYNAMIC_NEVER);
    uint8_t *pin = tgc_pass_order_pinned(x.g);
    assert_non_null(pin);
    const int32_t *o = x.g->outputs;
    for (int k = 0; k < 4; k++)
        assert_int_equal(pin[o[k]], 1); /* readers of running_var, before and after */
    assert_int_equal(pin[o[4]], 0);
    assert_int_equal(pin[o[5]], 1); /* the writer */
    for (int i = 0; i < x.g->n_nodes; i++) {
        const tgc_node *nd = &x.g->nodes[i];
        if (nd->op == TGC_OP_INPUT || nd->op == TGC_OP_RELU)
            assert_int_equal(pin[i], 0);
    }
    free(pin);
    fx_free(&x);
    /* random draws are pinned too */
    tgc_tensor *in2[1] = {randn(2, 3, 4, 0, 0)};
    fx_trace(&x, fn_equal_draws, in2, 1, 4, TGC_DYNAMIC_NEVER);
    pin = tgc_pass_order_pinned(x.g);
    assert_non_null(pin);
    for (int k = 0; k < 4; k++)
        assert_int_equal(pin[x.g->outputs[k]], 1);
    free(pin);
    fx_free(&x);
}

static void fold_keeps_readers_of_in_place_writes(void **state)
{
    (void)state;
    fx x;
    int64_t s[2] = {4, 3};
    const float xv[12] = {1, 2, 3, 4, 6, 8, 0, -1, 5, 2, 2, 2};
    tgc_tensor *in[1] = {tgc_from_data(xv, sizeof xv, s, 2, TGC_F32, tgc_cpu())};
    fx_trace(&x, fn_bn_const_stats, in, 1, 4, TGC_DYNAMIC_NEVER);
    assert_int_equal(count_op(x.g, TGC_OP_MUL_SCALAR), 3);
    assert_int_equal(fold_interp(x.g), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    /* rv * 3 and rv * 2 read a value the batch_norm writes: kept; w * 4 folded */
    assert_int_equal(count_op(x.g, TGC_OP_MUL_SCALAR), 2);
    const tgc_node *bn = NULL;
    for (int i = 0; i < x.g->n_nodes; i++)
        if (x.g->nodes[i].op == TGC_OP_BATCH_NORM)
            bn = &x.g->nodes[i];
    assert_non_null(bn);
    const tgc_node *rv_in = &x.g->nodes[bn->in[2]];
    assert_int_equal(rv_in->op, TGC_OP_INPUT);
    assert_int_equal(rv_in->attrs.i[0], TGC_BIND_FOLDED);
    tgc_tensor *rv = x.g->consts[rv_in->attrs.i[1]];
    double *rv0 = host_f64(rv);
    tgc_tensor *got[4];
    run_graph(&x, x.g, in, 1, got);
    double *rv1 = host_f64(rv), *early = host_f64(got[0]), *late = host_f64(got[1]),
           *w4 = host_f64(got[2]);
    /* by hand: running_var <- 0.9 running_var + 0.1 (unbiased column variance of xv) */
    for (int c = 0; c < 3; c++) {
        double m = 0, v = 0;
        for (int r = 0; r < 4; r++)
            m += xv[r * 3 + c] / 4.0;
        for (int r = 0; r < 4; r++)
            v += (xv[r * 3 + c] - m) * (xv[r * 3 + c] - m) / 3.0;
        assert_true(fabs(rv1[c] - (0.9 * rv0[c] + 0.1 * v)) < 1e-5);
        assert_true(fabs(early[c] - 3.0 * rv0[c]) < 1e-6);
        assert_true(fabs(late[c] - 2.0 * rv1[c]) < 1e-5);
        assert_true(fabs(w4[c] - 8.0) == 0);
    }
    free(rv0);
    free(rv1);
    free(early);
    free(late);
    free(w4);
    fx_free(&x);
}

/* An optimizer's step: 0-d values of a step count written at the end, a parameter-sized one of
 * a weight written at the end, and a read of the count after its write. */
static tgc_tensor *g_step;

static tgc_status fn_step_readers(tgc_module *m, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                  int n_out)
{
    (void)m, (void)n_in, (void)n_out;
    out[0] = tgc_relu(in[0]);
    out[1] = tgc_exp(tgc_mul_scalar(g_step, -0.5)); /* 0-d: hoisted above relu */
    out[2] = tgc_mul_scalar(g_w, 3.0);              /* weight-sized: stays */
    tgc_tensor *w1 = tgc_add(g_w, out[1]), *s1 = tgc_add_scalar(g_step, 1.0);
    if (!w1 || !s1 || tgc_copy_(g_w, w1) != TGC_OK || tgc_copy_(g_step, s1) != TGC_OK)
        return tgc_last_status();
    out[3] = tgc_mul_scalar(g_step, 5.0); /* after the write: the new count */
    for (int k = 0; k < 4; k++)
        if (!out[k])
            return tgc_last_status();
    return TGC_OK;
}

static void hoist_moves_zero_d_readers_of_state_written_later(void **state)
{
    (void)state;
    g_step = tgc_zeros(NULL, 0, TGC_F32, tgc_cpu());
    g_w = tgc_full((int64_t[]){4}, 1, 0.5, TGC_F32, tgc_cpu());
    fx x;
    tgc_tensor *in[1] = {randn(2, 6, 4, 0, 0)};
    fx_trace(&x, fn_step_readers, in, 1, 4, TGC_DYNAMIC_NEVER);
    assert_int_equal(tgc_prepare_hoist_input_only(x.g, "test"), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    const int32_t *o = x.g->outputs;
    assert_true(o[1] < o[0]);
    assert_true(o[2] > o[0]);
    /* the trace's call left step 1 and w 1.5; the hoisted graph still reads the count before
     * its write and the new count after it */
    tgc_tensor *out[4] = {0};
    run_graph(&x, x.g, in, 1, out);
    assert_true(fabs(tgc_item_f64(out[1]) - exp(-0.5)) < 1e-6);
    assert_true(fabs(tgc_item_f64(out[3]) - 10.0) < 1e-6);
    assert_true(tgc_item_f64(g_step) == 2.0);
    fx_free(&x);
}

#ifdef TGC_HAVE_LLVM
/* Regression test (fuzz new-1): the LLVM pre-pass hoisted parameter-only readers of
 * running_var above the batch_norm that writes it, and fusion may put a pointwise reader into
 * a group that runs before the writer. */
static void llvm_hoist_and_fusion_keep_readers_after_in_place_write(void **state)
{
    (void)state;
    int64_t s[1] = {4};
    g_rm = tgc_zeros(s, 1, TGC_F32, tgc_cpu());
    g_rv = tgc_ones(s, 1, TGC_F32, tgc_cpu());
    g_w = tgc_full(s, 1, 0.5, TGC_F32, tgc_cpu());
    fx x;
    tgc_tensor *in[1] = {randn(2, 6, 4, 0, 0)};
    fx_trace(&x, fn_bn_readers, in, 1, 6, TGC_DYNAMIC_NEVER);
    assert_int_equal(tgc_llvm_prepare(x.g), TGC_OK);
    assert_int_equal(tgc_graph_verify(x.g), TGC_OK);
    const int32_t *o = x.g->outputs;
    int32_t bn = o[5];
    assert_int_equal(x.g->nodes[bn].op, TGC_OP_BATCH_NORM);
    assert_true(o[0] < bn); /* the early reader stays before the write */
    for (int k = 1; k < 4; k++)
        assert_true(o[k] > bn); /* the later ones after it */
    tgc_fusion f;
    assert_int_equal(tgc_pass_fuse(x.g, tgc_llvm_fuse_hooks(), &f), TGC_OK);
    int gbn = f.group_of[bn];
    assert_true(gbn >= 0);
    assert_true(f.group_of[o[0]] < gbn);
    for (int k = 1; k < 4; k++)
        assert_true(f.group_of[o[k]] > gbn);
    tgc_fusion_free(&f);
    fx_free(&x);
}
#endif

/* ---- pipeline ---- */

static char log_text[65536];
static int log_lines;

static void capture(unsigned channel, const char *msg, void *user)
{
    (void)user;
    if (channel != TGC_LOG_GRAPH)
        return;
    log_lines++;
    strncat(log_text, msg, sizeof log_text - strlen(log_text) - 1);
}

static void pipeline_optimizes_and_logs(void **state)
{
    (void)state;
    fx x;
    tgc_tensor *in[1] = {randn(2, 4, 8, 0, 0)};
    fx_trace(&x, fn_model, in, 1, 1, TGC_DYNAMIC_NEVER);
    tgc_graph *before = tgc_graph_clone(x.g);
    tgc_config cfg = tgc_config_default();
    cfg.log = TGC_LOG_GRAPH;
    cfg.log_fn = capture;
    log_text[0] = 0;
    log_lines = 0;
    assert_int_equal(tgc_passes_run(x.g, &cfg, "model_fwd", tgc_interp_eval_contiguous), TGC_OK);
    assert_int_equal(log_lines, 2);
    assert_non_null(strstr(log_text, "'model_fwd' before passes"));
    assert_non_null(strstr(log_text, "'model_fwd' after passes"));
    assert_non_null(strstr(log_text, "layer_norm("));
    assert_non_null(strstr(log_text, "{folded 0}"));
    expect_same_outputs(&x, before, in, 1, 1, 1e-5);
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        tgc_op_kind k = tgc_op_info_of((tgc_op)op)->kind;
        if (k == TGC_KIND_NN || k == TGC_KIND_NORM)
            assert_int_equal(count_op(x.g, (tgc_op)op), 0);
    }
    assert_int_equal(count_op(x.g, TGC_OP_ERF), 2);        /* two distinct gelus */
    assert_int_equal(count_op(x.g, TGC_OP_MUL_SCALAR), 4); /* the *1.0 are gone */
    /* a second run changes nothing */
    char *t1 = tgc_graph_to_text(x.g);
    cfg.log = 0;
    assert_int_equal(tgc_passes_run(x.g, &cfg, "model_fwd", tgc_interp_eval_contiguous), TGC_OK);
    char *t2 = tgc_graph_to_text(x.g);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    tgc_graph_free(before);
    fx_free(&x);
}

static void pipeline_rejects_invalid_graph(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_vinfo v = {.dtype = TGC_F32, .ndim = 1, .shape = {4}};
    tgc_attrs a = {.ni = 2};
    assert_int_equal(tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &a, &v), 0);
    int32_t bad[1] = {5}; /* uses a value defined nowhere */
    assert_int_equal(tgc_graph_add(g, TGC_OP_EXP, bad, 1, NULL, &v), 1);
    int32_t o = 1;
    assert_int_equal(tgc_graph_set_outputs(g, &o, 1), TGC_OK);
    tgc_config cfg = tgc_config_default();
    check_error(tgc_passes_run(g, &cfg, "bad", tgc_interp_eval_contiguous), TGC_ERR_INTERNAL,
                "not defined before it");
    check_error(tgc_passes_run(NULL, &cfg, "bad", tgc_interp_eval_contiguous), TGC_ERR_INVALID_ARG,
                "graph is NULL");
    tgc_graph_free(g);

    /* a folded input naming a missing constant does not verify */
    g = tgc_graph_create();
    a.i[0] = TGC_BIND_FOLDED;
    a.i[1] = 0;
    assert_int_equal(tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &a, &v), 0);
    o = 0;
    assert_int_equal(tgc_graph_set_outputs(g, &o, 1), TGC_OK);
    check_error(tgc_passes_run(g, &cfg, "bad", tgc_interp_eval_contiguous), TGC_ERR_INTERNAL,
                "graph constant 0");
    tgc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(clone_is_deep_and_independent, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_softmax_static, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_softmax_symbolic, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_layer_norm_with_and_without_affine, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_activations, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_batch_norm_eval_4d_and_2d, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(hoist_moves_zero_d_readers_of_state_written_later,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_training_batch_norm, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_cross_entropy_and_var, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(conv_axis_trim_runs, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_conv_dead_taps, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_conv_grad_input_as_conv, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(decompose_half_precision_computes_in_f32, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(fold_constant_chain, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(fold_leaves_random_and_arguments, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(simplify_removes_exact_identities, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(simplify_canonicalizes_view_chains, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(simplify_merges_power_of_two_scales_only, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(simplify_keeps_symbolic_shapes, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(cse_merges_equal_nodes_but_not_random, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(dce_removes_dead_nodes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(dce_keeps_dead_random_draws, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(cse_keeps_equal_random_draws_apart, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(order_pinned_marks_effects_and_readers_of_written_values,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(fold_keeps_readers_of_in_place_writes, scoped_setup,
                                        scoped_teardown),
#ifdef TGC_HAVE_LLVM
        cmocka_unit_test_setup_teardown(llvm_hoist_and_fusion_keep_readers_after_in_place_write,
                                        scoped_setup, scoped_teardown),
#endif
        cmocka_unit_test_setup_teardown(pipeline_optimizes_and_logs, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(pipeline_rejects_invalid_graph, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
