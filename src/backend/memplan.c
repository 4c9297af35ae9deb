/* The last-use / slot planner (see memplan.h): one pass for lifetimes, one greedy pass that
 * gives each new intermediate the first slot whose value died before the step writing it. */
#include "backend/memplan.h"

#include <stdlib.h>

#include "ir/view_access.h"
#include "support/error.h"

void tgc_memplan_free(tgc_memplan *m)
{
    free(m->last_use);
    free(m->slot_of);
    m->last_use = m->slot_of = NULL;
    m->n_slots = 0;
}

static tgc_status assign_slots(const tgc_graph *g, const tgc_mem_steps *s, const int32_t *base,
                               const uint8_t *mat, const uint8_t *slotted, tgc_memplan *m)
{
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int32_t *def_step = malloc(n * sizeof(int32_t));
    int32_t *free_after = malloc(n * sizeof(int32_t)); /* per slot: the last step using it */
    uint8_t *is_out = calloc(n, 1);
    m->slot_of = malloc(n * sizeof(int32_t));
    if (!def_step || !free_after || !is_out || !m->slot_of) {
        free(def_step);
        free(free_after);
        free(is_out);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        def_step[i] = m->slot_of[i] = -1;
    for (int i = 0; i < g->n_outputs; i++)
        is_out[base[g->outputs[i]]] = 1;
    for (int si = 0; si < s->n_steps; si++)
        for (int32_t u = s->start[si]; u < s->start[si + 1]; u++)
            if (s->uses[u].written && def_step[s->uses[u].value] < 0)
                def_step[s->uses[u].value] = si;
    for (int si = 0; si < s->n_steps; si++) {
        if (slotted && !slotted[si])
            continue;
        for (int32_t u = s->start[si]; u < s->start[si + 1]; u++) {
            int32_t v = s->uses[u].value;
            /* base[v] != v: a view, which has no buffer of its own */
            if (!s->uses[u].written || def_step[v] != si || base[v] != v || is_out[v] ||
                (mat && !mat[v]) || g->nodes[v].op == TGC_OP_INPUT || m->slot_of[v] >= 0)
                continue;
            int slot = -1;
            for (int q = 0; q < m->n_slots && slot < 0; q++)
                if (free_after[q] < si)
                    slot = q;
            if (slot < 0)
                slot = m->n_slots++;
            m->slot_of[v] = slot;
            /* live through its last read (a value nobody reads dies at once) */
            free_after[slot] = m->last_use[v] > si ? m->last_use[v] : si;
        }
    }
    free(def_step);
    free(free_after);
    free(is_out);
    return TGC_OK;
}

tgc_status tgc_memplan_build(const tgc_graph *g, const tgc_mem_steps *s, unsigned flags,
                             const uint8_t *materialized, const uint8_t *slotted, tgc_memplan *out)
{
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    tgc_memplan m = {0};
    m.last_use = malloc(n * sizeof(int32_t));
    int32_t *base = malloc(n * sizeof(int32_t));
    if (!m.last_use || !base) {
        free(m.last_use);
        free(base);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
    }
    int alias = (flags & TGC_MEMPLAN_VIEWS_ALIAS) != 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        m.last_use[i] = -1;
        base[i] = alias && tgc_is_view_op(g->nodes[i].op) ? base[g->nodes[i].in[0]] : i;
    }
    for (int si = 0; si < s->n_steps; si++)
        for (int32_t u = s->start[si]; u < s->start[si + 1]; u++)
            if (!s->uses[u].written)
                m.last_use[base[s->uses[u].value]] = si;
    tgc_status st = TGC_OK;
    if (flags & TGC_MEMPLAN_SLOTS)
        st = assign_slots(g, s, base, materialized, slotted, &m);
    for (int i = 0; i < g->n_outputs; i++)
        m.last_use[base[g->outputs[i]]] = s->n_steps;
    free(base);
    if (st != TGC_OK) {
        tgc_memplan_free(&m);
        return st;
    }
    *out = m;
    return TGC_OK;
}
