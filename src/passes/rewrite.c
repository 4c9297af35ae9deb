/* Graph clone and the rebuild helpers every pass uses: a pass builds a new node array
 * beside the old one and swaps it in when complete, so a failure leaves the graph alone;
 * tgc_rw_nodes replaces the nodes a predicate selects in one such rebuild. */
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "ir/shape_infer.h"
#include "passes/passes.h"
#include "support/error.h"

static tgc_status oom(const char *what)
{
    return tgc_set_error(TGC_ERR_OOM, "tgc passes: out of memory %s", what);
}

tgc_graph *tgc_graph_clone(const tgc_graph *g)
{
    tgc_graph *c = calloc(1, sizeof *c);
    if (!c) {
        oom("cloning a graph");
        return NULL;
    }
    c->syms = tgc_symtab_clone(g->syms);
    int ok = c->syms != NULL;
    for (int i = 0; ok && i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        ok = tgc_graph_add(c, nd->op, nd->in, nd->n_in, &nd->attrs, &nd->out) == i;
        if (ok) {
            c->nodes[i].flags = nd->flags;
            c->nodes[i].origin = nd->origin;
        }
    }
    if (ok)
        ok = tgc_graph_set_outputs(c, g->outputs, g->n_outputs) == TGC_OK;
    for (int i = 0; ok && i < g->n_consts; i++)
        ok = tgc_graph_add_const(c, g->consts[i]) == i;
    if (!ok) {
        tgc_graph_free(c);
        oom("cloning a graph");
        return NULL;
    }
    return c;
}

int tgc_node_is_random(const tgc_node *nd)
{
    return (tgc_node_effects(nd) & TGC_EFFECT_RANDOM) != 0;
}

uint8_t *tgc_pass_order_pinned(const tgc_graph *g)
{
    uint8_t *pin = tgc_pass_mutated_values(g);
    if (!pin)
        return NULL;
    /* pin[] holds the written values first; each node's verdict only needs its inputs' */
    uint8_t *out = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!out) {
        free(pin);
        oom("analysing a graph");
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        int p = tgc_node_effects(nd) != 0 || (nd->flags & TGC_NODE_MUTATES);
        for (int k = 0; k < nd->n_in && !p; k++)
            p = pin[nd->in[k]];
        out[i] = (uint8_t)p;
    }
    free(pin);
    return out;
}

int tgc_vinfo_same(const tgc_vinfo *a, const tgc_vinfo *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (!tgc_sym_same(a->shape[d], b->shape[d]))
            return 0;
    return 1;
}

uint8_t *tgc_pass_mutated_values(const tgc_graph *g)
{
    uint8_t *m = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!m) {
        oom("analysing a graph");
        return NULL;
    }
    /* backwards: a write through a view writes what it views */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->flags & TGC_NODE_MUTATES)
            for (int k = 0; k < nd->n_in; k++)
                m[nd->in[k]] |= (uint8_t)tgc_op_writes_operand(nd->op, &nd->attrs, k);
        if (m[i] && nd->n_in > 0 && tgc_op_info_of(nd->op)->kind == TGC_KIND_VIEW)
            m[nd->in[0]] = 1;
    }
    /* forwards: a view of a written value sees the write */
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->n_in > 0 && tgc_op_info_of(nd->op)->kind == TGC_KIND_VIEW && m[nd->in[0]])
            m[i] = 1;
    }
    return m;
}

tgc_status tgc_rw_begin(tgc_rewriter *rw, tgc_graph *g)
{
    memset(rw, 0, sizeof *rw);
    rw->g = g;
    rw->next.syms = g->syms;
    rw->map = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *rw->map);
    if (!rw->map)
        return rw->st = oom("rewriting a graph");
    for (int i = 0; i < g->n_nodes; i++)
        rw->map[i] = -1;
    return TGC_OK;
}

int32_t tgc_rw_emit_typed(tgc_rewriter *rw, tgc_op op, const int32_t *in, int n_in,
                          const tgc_attrs *a, const tgc_vinfo *out)
{
    if (rw->st != TGC_OK)
        return -1;
    for (int k = 0; k < n_in; k++)
        if (in[k] < 0 || in[k] >= rw->next.n_nodes) {
            rw->st = tgc_set_error(TGC_ERR_INTERNAL, "tgc passes: %s uses an undefined value",
                                   tgc_op_name(op));
            return -1;
        }
    int32_t id = tgc_graph_add(&rw->next, op, in, n_in, a, out);
    if (id < 0)
        rw->st = tgc_last_status();
    return id;
}

int32_t tgc_rw_emit(tgc_rewriter *rw, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    if (rw->st != TGC_OK)
        return -1;
    tgc_vinfo vin[8], out;
    static const tgc_attrs none;
    if (n_in > 8) {
        rw->st = tgc_set_error(TGC_ERR_INTERNAL, "tgc passes: %s emitted with %d inputs",
                               tgc_op_name(op), n_in);
        return -1;
    }
    for (int k = 0; k < n_in; k++) {
        if (in[k] < 0 || in[k] >= rw->next.n_nodes) {
            rw->st = tgc_set_error(TGC_ERR_INTERNAL, "tgc passes: %s uses an undefined value",
                                   tgc_op_name(op));
            return -1;
        }
        vin[k] = rw->next.nodes[in[k]].out;
    }
    tgc_status st = tgc_infer(op, vin, n_in, a ? a : &none, rw->g->syms, &out);
    if (st != TGC_OK) {
        rw->st = st;
        return -1;
    }
    return tgc_rw_emit_typed(rw, op, in, n_in, a ? a : &none, &out);
}

int32_t tgc_rw_copy(tgc_rewriter *rw, int32_t i)
{
    const tgc_node *nd = &rw->g->nodes[i];
    int32_t buf[8] = {0}, *in = nd->n_in <= 8 ? buf : malloc((size_t)nd->n_in * sizeof *in);
    if (!in) {
        rw->st = oom("rewriting a graph");
        return -1;
    }
    for (int k = 0; k < nd->n_in; k++)
        in[k] = rw->map[nd->in[k]];
    int32_t id = tgc_rw_emit_typed(rw, nd->op, in, nd->n_in, &nd->attrs, &nd->out);
    if (id >= 0) {
        rw->next.nodes[id].flags = nd->flags;
        rw->next.nodes[id].origin = nd->origin;
    }
    if (in != buf)
        free(in);
    return rw->map[i] = id;
}

static void free_nodes(tgc_node *nodes, int n)
{
    for (int i = 0; i < n; i++)
        free(nodes[i].in);
    free(nodes);
}

void tgc_rw_rollback(tgc_rewriter *rw, int mark)
{
    for (int i = mark; i < rw->next.n_nodes; i++)
        free(rw->next.nodes[i].in);
    if (mark < rw->next.n_nodes)
        rw->next.n_nodes = mark;
    rw->st = TGC_OK;
    tgc_clear_error();
}

void tgc_rw_abort(tgc_rewriter *rw)
{
    free_nodes(rw->next.nodes, rw->next.n_nodes);
    free(rw->next.outputs);
    free(rw->map);
    memset(&rw->next, 0, sizeof rw->next);
    rw->map = NULL;
}

tgc_status tgc_rw_finish(tgc_rewriter *rw)
{
    tgc_graph *g = rw->g;
    for (int i = 0; rw->st == TGC_OK && i < g->n_outputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->n_nodes || rw->map[g->outputs[i]] < 0)
            rw->st = tgc_set_error(TGC_ERR_INTERNAL,
                                   "tgc passes: output %d lost its value in a rewrite", i);
    if (rw->st != TGC_OK) {
        tgc_status st = rw->st;
        tgc_rw_abort(rw);
        return st;
    }
    for (int i = 0; i < g->n_outputs; i++)
        g->outputs[i] = rw->map[g->outputs[i]];
    free_nodes(g->nodes, g->n_nodes);
    g->nodes = rw->next.nodes;
    g->n_nodes = rw->next.n_nodes;
    g->cap = rw->next.cap;
    memset(&rw->next, 0, sizeof rw->next);
    free(rw->map);
    rw->map = NULL;
    return TGC_OK;
}

int32_t tgc_rw_emit_const(tgc_rewriter *rw, tgc_tensor *t)
{
    if (!t) {
        rw->st = tgc_set_error(TGC_ERR_OOM, "tgc passes: out of memory making a constant");
        return -1;
    }
    tgc_vinfo v = {.dtype = t->dtype, .ndim = t->ndim};
    for (int d = 0; d < t->ndim; d++)
        v.shape[d] = t->shape[d];
    int k = tgc_graph_add_const(rw->g, t);
    tgc_tensor_unref(t); /* the graph holds the only reference now */
    if (k < 0) {
        rw->st = tgc_last_status();
        return -1;
    }
    tgc_attrs a = tgc_attrs_of(TGC_OP_INPUT);
    a.input.kind = TGC_BIND_FOLDED;
    a.input.index = k;
    return tgc_rw_emit_typed(rw, TGC_OP_INPUT, NULL, 0, &a, &v);
}

/* One rebuild replacing the selected nodes (see passes.h). */
tgc_status tgc_rw_nodes(tgc_graph *g, tgc_node_pred wants, tgc_node_emit emit, int *n_selected)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n += wants(g, i) != 0;
    if (n_selected)
        *n_selected = n;
    if (!n)
        return TGC_OK;
    tgc_rewriter rw;
    if (tgc_rw_begin(&rw, g) != TGC_OK)
        return rw.st;
    for (int32_t i = 0; i < g->n_nodes && rw.st == TGC_OK; i++) {
        if (wants(g, i)) {
            int mark = rw.next.n_nodes;
            int32_t r = emit(&rw, g, i);
            if (r >= 0 && tgc_vinfo_same(tgc_rw_type(&rw, r), &g->nodes[i].out)) {
                rw.map[i] = r;
                continue;
            }
            tgc_rw_rollback(&rw, mark);
        }
        tgc_rw_copy(&rw, i);
    }
    return tgc_rw_finish(&rw);
}
