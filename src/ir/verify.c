/* The graph verifier: structure, arity and re-inferred types. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "ir/graph.h"
#include "ir/shape_infer.h"
#include "support/error.h"

static int same_vinfo(const tgc_vinfo *a, const tgc_vinfo *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (!tgc_sym_same(a->shape[i], b->shape[i]))
            return 0;
    return 1;
}

/* A graph-owned constant must exist and match its node's type exactly. */
static tgc_status check_folded(const tgc_graph *g, int i)
{
    const tgc_node *nd = &g->nodes[i];
    int64_t k = nd->attrs.input.index;
    const tgc_tensor *t = k >= 0 && k < g->n_consts ? g->consts[k] : NULL;
    int ok = t && t->dtype == nd->out.dtype && t->ndim == nd->out.ndim;
    for (int d = 0; ok && d < t->ndim; d++)
        ok = TGC_SDIM_IS_CONST(nd->out.shape[d]) && nd->out.shape[d] == t->shape[d];
    if (!ok)
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc verify: node %%%d (input) names graph constant %lld of %d, "
                             "which is missing or of another type",
                             i, (long long)k, g->n_consts);
    return TGC_OK;
}

static tgc_status check_node(const tgc_graph *g, int i)
{
    const tgc_node *nd = &g->nodes[i];
    const tgc_op_info *info = tgc_op_info_of(nd->op);
    if (!info)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc verify: node %%%d has unknown op %d", i,
                             (int)nd->op);
    if (nd->n_in < info->min_inputs || (info->max_inputs >= 0 && nd->n_in > info->max_inputs))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc verify: node %%%d (%s) has %d inputs", i,
                             info->name, nd->n_in);
    if (nd->out.ndim < 0 || nd->out.ndim > TGC_MAX_DIMS ||
        (unsigned)nd->out.dtype >= TGC_DTYPE_COUNT)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc verify: node %%%d (%s) has rank %d, dtype %d",
                             i, info->name, nd->out.ndim, (int)nd->out.dtype);
    for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k] < 0 || nd->in[k] >= i)
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc verify: node %%%d (%s) uses %%%d, which is not defined "
                                 "before it",
                                 i, info->name, nd->in[k]);
    if (nd->op == TGC_OP_INPUT)
        return nd->attrs.input.kind == TGC_BIND_FOLDED ? check_folded(g, i) : TGC_OK;
    tgc_vinfo *in = malloc((size_t)nd->n_in * sizeof *in);
    if (!in)
        return tgc_set_error(TGC_ERR_OOM, "tgc verify: out of memory");
    for (int k = 0; k < nd->n_in; k++)
        in[k] = g->nodes[nd->in[k]].out;
    tgc_vinfo out;
    tgc_status st = tgc_infer(nd->op, in, nd->n_in, &nd->attrs, g->syms, &out);
    free(in);
    if (st != TGC_OK) {
        char why[512]; /* copied: the message is rewritten below */
        snprintf(why, sizeof why, "%s", tgc_last_error());
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc verify: node %%%d (%s) fails inference: %s", i,
                             info->name, why);
    }
    if (!same_vinfo(&out, &nd->out))
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc verify: node %%%d (%s) records a type that inference does "
                             "not reproduce",
                             i, info->name);
    return TGC_OK;
}

tgc_status tgc_graph_verify(const tgc_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        tgc_status st = check_node(g, i);
        if (st != TGC_OK)
            return st;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->n_nodes)
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc verify: output %d names %%%d", i,
                                 g->outputs[i]);
    return TGC_OK;
}
