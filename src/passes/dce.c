/* Dead code elimination: keeps what an output depends on, every node with an effect (an
 * in-place write, a random draw) and the graph's argument inputs (the call's signature); then drops
 * graph constants that no node reads any more. */
#include <stdlib.h>

#include "tensor/tensor_impl.h"
#include "passes/passes.h"
#include "support/error.h"

/* Effects are roots: an in-place write is the point of its node, and a random draw advances
 * the Philox stream, so dropping a dead one would shift every later draw. */
static int is_root(const tgc_node *nd)
{
    return tgc_node_effects(nd) != 0 || (nd->flags & TGC_NODE_MUTATES) ||
           (nd->op == TGC_OP_INPUT && nd->attrs.input.kind != TGC_BIND_FOLDED);
}

/* Renumbers the constants that FOLDED inputs still name and releases the rest. */
static tgc_status compact_consts(tgc_graph *g)
{
    if (g->n_consts == 0)
        return TGC_OK;
    int *remap = malloc((size_t)g->n_consts * sizeof *remap);
    if (!remap)
        return tgc_set_error(TGC_ERR_OOM, "tgc_pass_dce: out of memory");
    for (int k = 0; k < g->n_consts; k++)
        remap[k] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_FOLDED &&
            nd->attrs.input.index >= 0 && nd->attrs.input.index < g->n_consts)
            remap[nd->attrs.input.index] = 0;
    }
    int n = 0;
    for (int k = 0; k < g->n_consts; k++) {
        if (remap[k] < 0) {
            tgc_tensor_unref(g->consts[k]);
            continue;
        }
        remap[k] = n;
        g->consts[n++] = g->consts[k];
    }
    g->n_consts = n;
    for (int i = 0; i < g->n_nodes; i++) {
        tgc_node *nd = &g->nodes[i];
        if (nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_FOLDED &&
            nd->attrs.input.index >= 0)
            nd->attrs.input.index = remap[nd->attrs.input.index];
    }
    free(remap);
    return TGC_OK;
}

tgc_status tgc_pass_dce(tgc_graph *g)
{
    uint8_t *live = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!live)
        return tgc_set_error(TGC_ERR_OOM, "tgc_pass_dce: out of memory");
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && g->outputs[i] < g->n_nodes)
            live[g->outputs[i]] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tgc_node *nd = &g->nodes[i];
        if (!live[i] && !is_root(nd))
            continue;
        live[i] = 1;
        for (int k = 0; k < nd->n_in; k++)
            live[nd->in[k]] = 1;
    }
    tgc_rewriter rw;
    tgc_status st = tgc_rw_begin(&rw, g);
    int removed = 0;
    for (int i = 0; st == TGC_OK && i < g->n_nodes && rw.st == TGC_OK; i++) {
        if (live[i])
            tgc_rw_copy(&rw, i);
        else
            removed++;
    }
    free(live);
    if (st != TGC_OK)
        return st;
    if (removed == 0) { /* nothing to drop: keep the node array as it is */
        tgc_rw_abort(&rw);
        return compact_consts(g);
    }
    st = tgc_rw_finish(&rw);
    return st == TGC_OK ? compact_consts(g) : st;
}
