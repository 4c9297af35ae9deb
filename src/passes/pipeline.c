/* The pass pipeline run on every traced graph before fusion. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "support/log.h"

#define PIPELINE_MAX_ROUNDS 4

/* A fingerprint of the node array: a round that leaves it unchanged reached the fixed
 * point (cheaper than comparing text, and blind only to hash collisions, which merely end
 * the iteration one round early). */
static uint64_t graph_fingerprint(const tgc_graph *g)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        MIX(nd->op);
        for (int k = 0; k < nd->n_in; k++)
            MIX(nd->in[k]);
        for (int k = 0; k < nd->attrs.ni && k < TGC_MAX_IATTR; k++)
            MIX(nd->attrs.i[k]);
        for (int k = 0; k < nd->attrs.nf && k < TGC_MAX_FATTR; k++) {
            uint64_t bits;
            memcpy(&bits, &nd->attrs.f[k], sizeof bits);
            MIX(bits);
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        MIX(g->outputs[i]);
#undef MIX
    return h;
}

static void log_graph(const tgc_config *cfg, const tgc_graph *g, const char *name, const char *when)
{
    if (!cfg || !(cfg->log & TGC_LOG_GRAPH))
        return;
    char *text = tgc_graph_to_text(g);
    if (text)
        tgc_log_msg(cfg, TGC_LOG_GRAPH, "tgc: graph of '%s' %s passes (%d nodes):\n%s",
                    name ? name : "?", when, g->n_nodes, text);
    free(text);
}

tgc_status tgc_passes_run(tgc_graph *g, const tgc_config *cfg, const char *name,
                          tgc_node_eval_fn eval)
{
    return tgc_passes_run_opts(g, cfg, name, 0, eval);
}

tgc_status tgc_passes_run_opts(tgc_graph *g, const tgc_config *cfg, const char *name,
                               unsigned keep, tgc_node_eval_fn eval)
{
    if (!g)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_passes_run: graph is NULL");
    /* the passes index by value id: an invalid graph would make them read out of bounds */
    tgc_status st = tgc_graph_verify(g);
    if (st != TGC_OK)
        return st;
    log_graph(cfg, g, name, "before");
    st = tgc_pass_decompose_opts(g, keep);
    if (st == TGC_OK)
        st = tgc_pass_fold_constants(g, eval);
    for (int round = 0; st == TGC_OK && round < PIPELINE_MAX_ROUNDS; round++) {
        uint64_t before = graph_fingerprint(g);
        st = tgc_pass_simplify(g);
        if (st == TGC_OK)
            st = tgc_pass_cse(g);
        if (st == TGC_OK)
            st = tgc_pass_dce(g);
        if (st == TGC_OK && graph_fingerprint(g) == before)
            break;
    }
    if (st == TGC_OK)
        st = tgc_graph_verify(g);
    if (st == TGC_OK)
        log_graph(cfg, g, name, "after");
    return st;
}
