/* The interp backend, a graph runner (backend.h: it sets `graph`): runs a graph node by node
 * through the interp kernels, freeing each intermediate after its last use as the shared
 * last-use planner (memplan.h) computed it, one step per node. */
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/interp/interp.h"
#include "backend/memplan.h"
#include "support/error.h"

typedef struct interp_plan {
    tgc_memplan mem; /* last_use per node: the last node that reads it (n_nodes: an output) */
    int kernels;
} interp_plan;

static tgc_status interp_compile(const tgc_graph *g, const tgc_config *cfg, const char *name,
                                 void **artifact)
{
    (void)cfg;
    (void)name;
    interp_plan *p = calloc(1, sizeof *p);
    int n_uses = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n_uses += 1 + g->nodes[i].n_in;
    int32_t *start = malloc((size_t)(g->n_nodes + 1) * sizeof *start);
    tgc_mem_use *uses = malloc((size_t)(n_uses ? n_uses : 1) * sizeof *uses);
    tgc_status st = p && start && uses ? TGC_OK : TGC_ERR_OOM;
    if (st == TGC_OK) {
        int32_t u = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const tgc_node *nd = &g->nodes[i];
            start[i] = u;
            if (nd->op != TGC_OP_INPUT && tgc_op_info_of(nd->op)->kind != TGC_KIND_VIEW)
                p->kernels++;
            for (int k = 0; k < nd->n_in; k++)
                uses[u++] = (tgc_mem_use){nd->in[k], 0};
            uses[u++] = (tgc_mem_use){i, 1};
        }
        start[g->n_nodes] = u;
        tgc_mem_steps ms = {g->n_nodes, start, uses};
        st = tgc_memplan_build(g, &ms, 0, NULL, NULL, &p->mem);
    }
    free(start);
    free(uses);
    if (st != TGC_OK) {
        free(p);
        return tgc_set_error(TGC_ERR_OOM, "tgc interp: out of memory planning a graph");
    }
    *artifact = p;
    return TGC_OK;
}

static tgc_tensor *run_node(const tgc_graph *g, const tgc_node *nd, tgc_tensor **vals,
                            const int64_t *symvals)
{
    tgc_tensor *ins_buf[8];
    tgc_tensor **ins = nd->n_in <= 8 ? ins_buf : malloc((size_t)nd->n_in * sizeof *ins);
    if (!ins) {
        tgc_set_error(TGC_ERR_OOM, "tgc interp: out of memory");
        return NULL;
    }
    for (int k = 0; k < nd->n_in; k++)
        ins[k] = vals[nd->in[k]];
    int64_t shape[TGC_MAX_DIMS];
    for (int d = 0; d < nd->out.ndim; d++)
        shape[d] = tgc_sym_eval(g->syms, nd->out.shape[d], symvals);
    tgc_tensor *r = tgc_interp_run_node(nd, ins, shape);
    if (ins != ins_buf)
        free(ins);
    return r;
}

/* A caller-owned handle for output i: the value itself the first time it is handed out
 * (when the run created it), else a fresh view of it. */
static tgc_tensor *hand_out(tgc_tensor *t, int owned_by_run)
{
    if (owned_by_run)
        return t;
    return tgc_tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
}

static tgc_status interp_run(void *artifact, const tgc_graph *g, const tgc_exec_args *x,
                             tgc_tensor **outs)
{
    const interp_plan *p = artifact;
    tgc_tensor **vals = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *vals);
    unsigned char *given = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    tgc_status st = TGC_OK;
    if (!vals || !given) {
        free(vals);
        free(given);
        return tgc_set_error(TGC_ERR_OOM, "tgc interp: out of memory");
    }
    tgc_scope_push();
    for (int i = 0; i < g->n_nodes && st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        vals[i] =
            nd->op == TGC_OP_INPUT ? tgc_exec_input(g, nd, x) : run_node(g, nd, vals, x->symvals);
        if (!vals[i]) {
            st = tgc_keep_error(TGC_ERR_INTERNAL, "tgc interp: node %%%d (%s) failed", i,
                                tgc_op_name(nd->op));
            break;
        }
        for (int k = 0; k < nd->n_in; k++) {
            int32_t v = nd->in[k];
            if (p->mem.last_use[v] == i && g->nodes[v].op != TGC_OP_INPUT) {
                tgc_tensor_free(vals[v]);
                vals[v] = NULL;
            }
        }
    }
    for (int i = 0; i < g->n_outputs && st == TGC_OK; i++) {
        int32_t v = g->outputs[i];
        int owned = g->nodes[v].op != TGC_OP_INPUT && !given[v];
        outs[i] = hand_out(vals[v], owned);
        given[v] = 1;
        if (!outs[i] || tgc_scope_keep(outs[i]) != TGC_OK)
            st = tgc_keep_error(TGC_ERR_OOM, "tgc interp: out of memory");
    }
    if (st != TGC_OK)
        for (int i = 0; i < g->n_outputs; i++)
            outs[i] = NULL;
    tgc_scope_pop();
    free(vals);
    free(given);
    return st;
}

static int interp_kernel_count(const void *artifact)
{
    return ((const interp_plan *)artifact)->kernels;
}

static void interp_release(void *artifact)
{
    interp_plan *p = artifact;
    if (p)
        tgc_memplan_free(&p->mem);
    free(p);
}

static const char interp_name[] = "interp";

const tgc_backend *tgc_backend_interp(void)
{
    static const tgc_graph_ops ops = {interp_compile, interp_run, interp_kernel_count,
                                      interp_release};
    static const tgc_backend b = {.name = interp_name,
                                  .device = TGC_DEVICE_CPU,
                                  .graph = &ops,
                                  .reg = &tgc_interp_backend_reg};
    return &b;
}

/* The reference on the host: cfg.backend INTERP and EAGER (whose eager ops fall back to it),
 * and AUTO's choice where no compiled host backend is available. */
const tgc_backend_reg tgc_interp_backend_reg = {
    .name = interp_name,
    .kinds = {{TGC_BACKEND_INTERP, NULL}, {TGC_BACKEND_EAGER, "eager"}},
    .n_kinds = 2,
    .device = TGC_DEVICE_CPU,
    .priority = 1,
    .get = tgc_backend_interp,
};
