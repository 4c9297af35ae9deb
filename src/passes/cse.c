/* Common subexpression elimination: a node equal to an earlier one (same op, same inputs
 * after renumbering, same attributes with floats compared bitwise, same type) is replaced
 * by it. One pass in topological order merges whole equal chains. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "support/error.h"

/* Mixes the node's op, inputs (new ids), attributes and type. Attributes are hashed and
 * compared whole (all slots, not only the first ni): nodes are built from zeroed attrs. */
static uint64_t node_hash(const tgc_node *nd, const int32_t *in)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(nd->op);
    MIX(nd->n_in);
    for (int k = 0; k < nd->n_in; k++)
        MIX(in[k]);
    for (int k = 0; k < TGC_MAX_IATTR; k++)
        MIX(nd->attrs.i[k]);
    for (int k = 0; k < TGC_MAX_FATTR; k++) {
        uint64_t bits;
        memcpy(&bits, &nd->attrs.f[k], sizeof bits);
        MIX(bits);
    }
    MIX(nd->attrs.dtype);
    MIX(nd->out.dtype);
#undef MIX
    return h;
}

static int same_node(const tgc_node *a, const tgc_node *b)
{
    if (a->op != b->op || a->n_in != b->n_in || a->flags != b->flags)
        return 0;
    if (a->n_in && memcmp(a->in, b->in, (size_t)a->n_in * sizeof *a->in))
        return 0;
    if (memcmp(a->attrs.i, b->attrs.i, sizeof a->attrs.i) || a->attrs.ni != b->attrs.ni ||
        a->attrs.nf != b->attrs.nf || a->attrs.dtype != b->attrs.dtype)
        return 0;
    if (memcmp(a->attrs.f, b->attrs.f, sizeof a->attrs.f)) /* bitwise: -0.0 != 0.0, NaN == NaN */
        return 0;
    return tgc_vinfo_same(&a->out, &b->out);
}

static int mergeable(const tgc_node *nd, int32_t id, const uint8_t *mutated)
{
    if (nd->op == TGC_OP_INPUT || tgc_node_effects(nd) != 0 || (nd->flags & TGC_NODE_MUTATES) ||
        mutated[id])
        return 0;
    for (int k = 0; k < nd->n_in; k++)
        if (mutated[nd->in[k]]) /* its value depends on where it sits relative to the write */
            return 0;
    return 1;
}

tgc_status tgc_pass_cse(tgc_graph *g)
{
    tgc_rewriter rw;
    if (tgc_rw_begin(&rw, g) != TGC_OK)
        return rw.st;
    int cap = 64;
    while (cap < 2 * g->n_nodes)
        cap *= 2;
    int32_t *table = malloc((size_t)cap * sizeof *table); /* new ids; -1 empty */
    uint8_t *mutated = tgc_pass_mutated_values(g);
    if (!table || !mutated) {
        free(table);
        free(mutated);
        tgc_rw_abort(&rw);
        return tgc_set_error(TGC_ERR_OOM, "tgc_pass_cse: out of memory");
    }
    for (int k = 0; k < cap; k++)
        table[k] = -1;
    for (int i = 0; i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        int32_t id = tgc_rw_copy(&rw, i);
        if (id < 0 || !mergeable(nd, i, mutated))
            continue;
        const tgc_node *copy = &rw.next.nodes[id];
        uint64_t slot = node_hash(copy, copy->in) & (uint64_t)(cap - 1);
        while (table[slot] >= 0 && !same_node(&rw.next.nodes[table[slot]], copy))
            slot = (slot + 1) & (uint64_t)(cap - 1);
        if (table[slot] >= 0) { /* an equal node exists: drop the copy */
            tgc_rw_rollback(&rw, id);
            rw.map[i] = table[slot];
            rw.changed = 1;
        } else {
            table[slot] = id;
        }
    }
    free(table);
    free(mutated);
    return tgc_rw_finish(&rw);
}
