/* Graph preparations the compiled backends share (their prepare hooks call them): contiguous
 * copies in front of views no affine access expresses, channels-last activations between
 * convs (targets whose conv templates read and store NHWC), contiguous copies of GEMM / conv
 * operands a target's templates cannot stride through, and parameter-only nodes moved first
 * so their results can join template epilogues. Each takes the driver's clone of the graph;
 * `who` names the backend in messages. Thread-safe (the target of the operand pass is
 * thread-local for the call). */
#include <stdlib.h>
#include <string.h>

#include "backend/classify.h"
#include "backend/prepare.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "support/config_env.h"
#include "support/error.h"

/* The target tgc_prepare_template_operands is working for (the rewriter's predicates take
 * no context). */
static _Thread_local const kir_target *t_target;

/* A view that fails on its own: its input's view is affine, its own is not. */
static int view_not_affine(const tgc_graph *g, int32_t i)
{
    tgc_view v;
    const tgc_node *nd = &g->nodes[i];
    return tgc_is_view_op(nd->op) && !tgc_view_of(g, i, &v) && tgc_view_of(g, nd->in[0], &v);
}

/* The same view over a contiguous copy of its input. */
static int32_t emit_view_of_copy(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    int32_t src = tgc_rw_new(rw, nd->in[0]);
    tgc_attrs none = {0};
    int32_t cont = tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &src, 1, &none);
    return cont >= 0 ? tgc_rw_emit(rw, nd->op, &cont, 1, &nd->attrs) : -1;
}

/* Puts a contiguous copy in front of every view whose chain no affine access expresses (a
 * reshape merging dims of a permuted tensor), so lowering only sees affine views. A chain
 * with several such views takes one round each (a view is only selected once its input is
 * affine), so there are at most as many rounds as views. */
tgc_status tgc_prepare_views(tgc_graph *g, const char *who)
{
    int n_views = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n_views += tgc_is_view_op(g->nodes[i].op);
    for (int round = 0; round < n_views; round++) {
        int n = 0;
        tgc_status st = tgc_rw_nodes(g, view_not_affine, emit_view_of_copy, &n);
        if (st != TGC_OK)
            return st;
        if (!n)
            break;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        tgc_view v;
        if (tgc_is_view_op(g->nodes[i].op) && !tgc_view_of(g, i, &v))
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc %s: view %%%d (%s) is still not affine after copies", who, i,
                                 tgc_op_name(g->nodes[i].op));
    }
    return TGC_OK;
}

/* A matmul, linear or conv whose operands are views the template cannot stride through
 * (attention's per-head q and k: batch dims that do not flatten into one stride) reads
 * contiguous copies instead: one pass over the operand buys the packed GEMM. */
static int operands_unstridable(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    tgc_op_kind kind = tgc_op_info_of(nd->op)->kind;
    const kir_target *t = t_target;
    kir_tpl_kind tpl = kind == TGC_KIND_CONV ? KIR_TPL_CONV : KIR_TPL_GEMM;
    if ((kind != TGC_KIND_MATMUL && kind != TGC_KIND_CONV) ||
        !kir_target_has_template(t, tpl, nd->out.dtype) || kir_template_ok(g, i, t))
        return 0;
    for (int k = 0; k < 2 && k < nd->n_in; k++)
        if (tgc_is_view_op(g->nodes[nd->in[k]].op) && g->nodes[nd->in[k]].out.ndim >= 2)
            return 1;
    return 0;
}

/* NCHW -> NHWC (and OIHW -> OHWI), and back */
static const int64_t to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

/* A permute of v by the 4-element order p. */
static int32_t emit_permute(tgc_rewriter *rw, int32_t v, const int64_t *p)
{
    tgc_attrs a = {.ni = 4};
    memcpy(a.i, p, 4 * sizeof *p);
    return tgc_rw_emit(rw, TGC_OP_PERMUTE, &v, 1, &a);
}

/* The node over contiguous copies of its view operands; a conv of a channels-last x on a
 * target whose template reads it in place keeps x and gets channels-last weights instead
 * (OIHW viewed over an OHWI copy: one small pass over the weights, kept between calls where
 * they come from parameters only). */
static int32_t emit_on_copies(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    int32_t in[3], base;
    tgc_attrs none = {0};
    const int cl = tgc_op_info_of(nd->op)->kind == TGC_KIND_CONV && t_target->conv_channels_last &&
                   kir_is_channels_last_view(g, nd->in[0], &base);
    for (int k = 0; k < nd->n_in; k++) {
        in[k] = tgc_rw_new(rw, nd->in[k]);
        if (cl && k == 1) {
            int32_t t = emit_permute(rw, in[k], to_nhwc);
            t = tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &t, 1, &none);
            in[k] = emit_permute(rw, t, to_nchw);
        } else if (k < 2 && !(cl && k == 0) && tgc_is_view_op(g->nodes[nd->in[k]].op)) {
            in[k] = tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &in[k], 1, &none);
        }
    }
    return tgc_rw_emit(rw, nd->op, in, nd->n_in, &nd->attrs);
}

/* ---- channels-last activations ---- */

int tgc_prepare_channels_last_on(void)
{
    return tgc_env_channels_last();
}

/* The values tgc_prepare_channels_last stores NHWC, for its rewrite's predicate. */
static _Thread_local const uint8_t *t_cl;

static int cl_selected(const tgc_graph *g, int32_t i)
{
    (void)g;
    return t_cl[i];
}

/* v, stored NHWC: its NCHW view over a channels-last copy (fusion makes the copy v's store). */
static int32_t emit_channels_last(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    (void)g;
    tgc_attrs none = {0};
    int32_t v = tgc_rw_copy(rw, i);
    int32_t t = v < 0 ? -1 : emit_permute(rw, v, to_nhwc);
    t = t < 0 ? -1 : tgc_rw_emit(rw, TGC_OP_CONTIGUOUS, &t, 1, &none);
    return t < 0 ? -1 : emit_permute(rw, t, to_nchw);
}

/* 1 when value v of g may be stored NHWC: a 4-D activation of a dtype the conv template has,
 * computed by a kernel that can store it in another order (a conv template, a pointwise or
 * window loop), no graph output and never written in place, read directly (no view) by at
 * least one conv as its input (convs[v]; with conv gradients on, an input gradient's dy
 * counts: it is a conv of dy) and otherwise only by kernels that read it through strides
 * (bad[v] 0: pointwise, reductions, pools, and where conv_grad_reads_nhwc the conv
 * gradients; not other opaque nodes, matmuls or views). */
static int wants_channels_last(const tgc_graph *g, int32_t v, const kir_target *t,
                               const uint8_t *is_output, const uint8_t *written,
                               const uint8_t *convs, const uint8_t *bad)
{
    const tgc_node *nd = &g->nodes[v];
    if (!convs[v] || bad[v] || nd->out.ndim != 4 || nd->op == TGC_OP_INPUT ||
        tgc_is_view_op(nd->op) || is_output[v] || written[v] || (nd->flags & TGC_NODE_MUTATES) ||
        tgc_node_effects(nd) || !kir_target_has_template(t, KIR_TPL_CONV, nd->out.dtype))
        return 0;
    tgc_fuse_class pc = tgc_backend_classify(g, v, t);
    return pc == TGC_FUSE_POINTWISE || pc == TGC_FUSE_WINDOW ||
           (pc == TGC_FUSE_TEMPLATE && nd->op == TGC_OP_CONV2D);
}

/* 1 when reader u's operand k is one a conv-gradient kernel reads channels-last in place: the
 * weight gradient's x and dy, the input gradient's dy (target t and the environment allowing) */
static int conv_grad_reads_nhwc(const tgc_node *u, int k, const kir_target *t)
{
    if (!t->conv_grad_channels_last || !tgc_env_channels_last_grad())
        return 0;
    return (u->op == TGC_OP_CONV2D_GRAD_WEIGHT && k < 2) ||
           (u->op == TGC_OP_CONV2D_GRAD_INPUT && k == 0);
}

tgc_status tgc_prepare_channels_last(tgc_graph *g, const kir_target *t, int *n_values)
{
    int n = 0;
    if (n_values)
        *n_values = 0;
    if (!t->conv_channels_last)
        return TGC_OK;
    size_t sz = (size_t)(g->n_nodes ? g->n_nodes : 1);
    uint8_t *sel = calloc(sz, 1), *is_output = calloc(sz, 1), *convs = calloc(sz, 1),
            *bad = calloc(sz, 1);
    uint8_t *written = tgc_pass_mutated_values(g);
    tgc_status st = TGC_OK;
    if (!sel || !is_output || !convs || !bad || !written)
        st = tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", t->name);
    for (int i = 0; st == TGC_OK && i < g->n_outputs; i++)
        is_output[g->outputs[i]] = 1;
    /* each reader once: a conv reading its input (convs), or one that cannot read NHWC (bad) */
    for (int32_t j = 0; st == TGC_OK && j < g->n_nodes; j++) {
        const tgc_node *u = &g->nodes[j];
        if (!u->n_in)
            continue;
        int view = tgc_is_view_op(u->op);
        tgc_fuse_class c = view ? TGC_FUSE_FREE : tgc_backend_classify(g, j, t);
        for (int k = 0; k < u->n_in; k++) {
            int32_t v = u->in[k];
            if (!view && c == TGC_FUSE_TEMPLATE && u->op == TGC_OP_CONV2D && k == 0 &&
                u->out.dtype == g->nodes[v].out.dtype)
                convs[v] = 1;
            else if (!view && conv_grad_reads_nhwc(u, k, t))
                convs[v] |= (uint8_t)(u->op == TGC_OP_CONV2D_GRAD_INPUT);
            else if (view ||
                     (c != TGC_FUSE_POINTWISE && c != TGC_FUSE_REDUCE && c != TGC_FUSE_WINDOW))
                bad[v] = 1;
        }
    }
    for (int32_t i = 0; st == TGC_OK && i < g->n_nodes; i++)
        n += sel[i] = (uint8_t)wants_channels_last(g, i, t, is_output, written, convs, bad);
    if (st == TGC_OK && n) {
        t_cl = sel;
        st = tgc_rw_nodes(g, cl_selected, emit_channels_last, NULL);
        t_cl = NULL;
    }
    free(sel);
    free(is_output);
    free(convs);
    free(bad);
    free(written);
    if (st == TGC_OK && n_values)
        *n_values = n;
    return st;
}

/* Moves every node that depends only on parameters and constants (batch-norm scale and shift from
 * the parameters, masks from constants) ahead of the rest, keeping order otherwise. Fusion lets a
 * node join a group only when its other operands come from older groups, so this is what lets a
 * conv's epilogue take a scale computed from parameters. Nodes pinned by an effect
 * (tgc_pass_order_pinned: random draws, in-place writers, readers of a value written in place,
 * such as a matmul of the running_var that batch_norm in training updates) stay where they are:
 * hoisted, a reader would see the value from before the write. One kind of reader moves: a 0-d
 * value read from state that only later nodes write (an optimizer's bias corrections from its
 * step count, written at the end of the step); it still comes before the writes, and ahead of
 * the gradients every parameter's update can fuse with the kernel that makes its gradient.
 * Larger readers stay (hoisted, they would be written to memory and read back). */
tgc_status tgc_prepare_hoist_input_only(tgc_graph *g, const char *who)
{
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    uint8_t *only = calloc(n, 1), *written = calloc(n, 1);
    int32_t *root = malloc(n * sizeof *root);
    uint8_t *pinned = tgc_pass_order_pinned(g);
    if (!only || !written || !root || !pinned) {
        free(only);
        free(written);
        free(root);
        free(pinned);
        return tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", who);
    }
    int moved = 0, seen_other = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        root[i] = tgc_is_view_op(nd->op) ? root[nd->in[0]] : i;
        int effect = tgc_node_effects(nd) != 0 || (nd->flags & TGC_NODE_MUTATES);
        /* parameters and constants qualify; the call's arguments (activations) do not */
        int ok = !effect && !(nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_ARG);
        for (int k = 0; k < nd->n_in && ok; k++)
            ok = only[nd->in[k]] && !written[root[nd->in[k]]];
        if (ok && pinned[i]) /* it reads state written later on */
            ok = nd->out.ndim == 0;
        only[i] = (uint8_t)ok;
        if (ok && seen_other)
            moved = 1;
        if (!ok)
            seen_other = 1;
        if (effect)
            for (int k = 0; k < nd->n_in; k++)
                if (tgc_op_writes_operand(nd->op, &nd->attrs, k))
                    written[root[nd->in[k]]] = 1;
    }
    tgc_status st = TGC_OK;
    tgc_rewriter rw;
    if (moved && (st = tgc_rw_begin(&rw, g)) == TGC_OK) {
        for (int pass = 0; pass < 2; pass++)
            for (int32_t i = 0; i < g->n_nodes && rw.st == TGC_OK; i++)
                if (only[i] == (pass == 0))
                    tgc_rw_copy(&rw, i);
        st = tgc_rw_finish(&rw);
    }
    free(only);
    free(written);
    free(root);
    free(pinned);
    return st;
}

tgc_status tgc_prepare_template_operands(tgc_graph *g, const kir_target *t)
{
    t_target = t;
    tgc_status st = tgc_rw_nodes(g, operands_unstridable, emit_on_copies, NULL);
    t_target = NULL;
    return st;
}

tgc_status tgc_prepare_for_target(tgc_graph *g, const kir_target *t)
{
    tgc_status st = tgc_prepare_views(g, t->name);
    /* activations between convs channels-last, where the target has it */
    if (st == TGC_OK && tgc_prepare_channels_last_on())
        st = tgc_prepare_channels_last(g, t, NULL);
    if (st == TGC_OK) /* copies of GEMM / conv operands the templates cannot stride through
                       * (attention's per-head q and k), channels-last weights for the convs
                       * of channels-last activations: one pass buys the packed GEMM */
        st = tgc_prepare_template_operands(g, t);
    if (st == TGC_OK)
        st = tgc_prepare_hoist_input_only(g, t->name);
    return st;
}
