/* Graph IR construction. */
#include "ir/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "support/error.h"

tgc_graph *tgc_graph_create(void)
{
    tgc_graph *g = calloc(1, sizeof *g);
    if (g)
        g->syms = tgc_symtab_create();
    if (!g || !g->syms) {
        free(g);
        tgc_set_error(TGC_ERR_OOM, "tgc: out of memory creating a graph");
        return NULL;
    }
    return g;
}

void tgc_graph_free(tgc_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        free(g->nodes[i].in);
    free(g->nodes);
    free(g->outputs);
    for (int i = 0; i < g->n_consts; i++)
        tgc_tensor_unref(g->consts[i]);
    free(g->consts);
    tgc_symtab_free(g->syms);
    free(g);
}

int32_t tgc_graph_add(tgc_graph *g, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a,
                      const tgc_vinfo *out)
{
    if (g->n_nodes == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        tgc_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory growing a graph");
            return -1;
        }
        g->nodes = p;
        g->cap = cap;
    }
    tgc_node *nd = &g->nodes[g->n_nodes];
    memset(nd, 0, sizeof *nd);
    if (n_in > 0) {
        nd->in = malloc((size_t)n_in * sizeof(int32_t));
        if (!nd->in) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory growing a graph");
            return -1;
        }
        memcpy(nd->in, in, (size_t)n_in * sizeof(int32_t));
    }
    nd->op = op;
    nd->n_in = n_in;
    if (a)
        nd->attrs = *a;
    nd->out = *out;
    if (a && tgc_op_mutates_inputs(op, a))
        nd->flags |= TGC_NODE_MUTATES;
    return g->n_nodes++;
}

tgc_status tgc_graph_set_outputs(tgc_graph *g, const int32_t *ids, int n)
{
    int32_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p)
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory");
    if (n > 0)
        memcpy(p, ids, (size_t)n * sizeof *p);
    free(g->outputs);
    g->outputs = p;
    g->n_outputs = n;
    return TGC_OK;
}

int tgc_graph_add_const(tgc_graph *g, tgc_tensor *t)
{
    if (g->n_consts == g->cap_consts) {
        int cap = g->cap_consts ? g->cap_consts * 2 : 8;
        tgc_tensor **p = realloc(g->consts, (size_t)cap * sizeof *p);
        if (!p) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory adding a graph constant");
            return -1;
        }
        g->consts = p;
        g->cap_consts = cap;
    }
    tgc_tensor_ref(t);
    g->consts[g->n_consts] = t;
    return g->n_consts++;
}

tgc_status tgc_graph_import_consts(tgc_graph *g, tgc_tensor *const *bound, int n_bound)
{
    for (int i = 0; i < g->n_nodes; i++) {
        tgc_node *nd = &g->nodes[i];
        if (nd->op != TGC_OP_INPUT || nd->attrs.input.kind != TGC_BIND_CONST)
            continue;
        int64_t idx = nd->attrs.input.index;
        if (idx < 0 || idx >= n_bound || !bound[idx] || !bound[idx]->storage)
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc_graph_import_consts: node %%%d names constant %lld of %d", i,
                                 (long long)idx, n_bound);
        int k = tgc_graph_add_const(g, bound[idx]);
        if (k < 0)
            return tgc_last_status();
        nd->attrs.input.kind = TGC_BIND_FOLDED;
        nd->attrs.input.index = k;
    }
    return TGC_OK;
}

int tgc_vinfo_format_shape(const tgc_symtab *t, const tgc_vinfo *v, char *buf, size_t n)
{
    size_t len = 0;
    if (n == 0)
        return 0;
    buf[0] = 0;
    len += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < v->ndim && len < n; i++) {
        if (i)
            len += (size_t)snprintf(buf + len, n - len, ", ");
        if (len < n)
            len += (size_t)tgc_sym_format(t, v->shape[i], buf + len, n - len);
    }
    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "]");
    return (int)(len < n ? len : n - 1);
}
