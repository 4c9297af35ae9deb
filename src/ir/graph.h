/* Graph IR: SSA nodes in topological order. Value ids are node indices; every node has one
 * output with a dtype and a symbolic shape. Graph inputs are INPUT nodes (attrs say where
 * the tensor comes from at call time). The graph owns its symbol table. */
#ifndef TGC_IR_GRAPH_H
#define TGC_IR_GRAPH_H

#include "ir/op.h"
#include "ir/sym.h"

typedef struct tgc_vinfo {
    tgc_dtype dtype;
    int ndim;
    tgc_sdim shape[TGC_MAX_DIMS];
} tgc_vinfo;

enum {
    TGC_NODE_MUTATES = 1u << 0, /* the kernel writes one of its inputs: never removed */
};

typedef struct tgc_node {
    tgc_op op;
    int n_in;
    int32_t *in; /* value ids, each < this node's id */
    tgc_attrs attrs;
    tgc_vinfo out;
    uint32_t flags;
    /* The user's op this node is part of when a pass decomposed that op (origin - 1 is its
     * tgc_op), so errors name what the user called; 0 when the node is its own op. */
    int16_t origin;
} tgc_node;

/* The public op a node stands for: its origin when decomposed, else its own op. */
static inline tgc_op tgc_node_user_op(const tgc_node *nd)
{
    return nd->origin ? (tgc_op)(nd->origin - 1) : nd->op;
}

typedef struct tgc_graph {
    tgc_node *nodes;
    int n_nodes, cap;
    int32_t *outputs;
    int n_outputs;
    tgc_symtab *syms;
    /* Constants owned by the graph (one reference each), read by INPUT nodes bound
     * TGC_BIND_FOLDED with i[1] = index: results of constant folding, and trace constants
     * moved in by tgc_graph_import_consts. */
    tgc_tensor **consts;
    int n_consts, cap_consts;
} tgc_graph;

tgc_graph *tgc_graph_create(void);
void tgc_graph_free(tgc_graph *g);
/* Appends a node; returns its value id, or -1 on allocation failure (error set). */
int32_t tgc_graph_add(tgc_graph *g, tgc_op op, const int32_t *in, int n_in,
                      const tgc_attrs *a, const tgc_vinfo *out);
tgc_status tgc_graph_set_outputs(tgc_graph *g, const int32_t *ids, int n);
/* Appends t to g->consts, taking a new reference (the caller keeps its own). Returns its
 * index, or -1 on allocation failure (error set). */
int tgc_graph_add_const(tgc_graph *g, tgc_tensor *t);
/* Rebinds every INPUT bound TGC_BIND_CONST (index into bound[0..n_bound)) as
 * TGC_BIND_FOLDED to a graph-owned reference of the same tensor, so the graph carries its
 * trace constants and constant folding can read them. bound is the variant's bound list
 * (tgc_exec_args.bound); the tensors must be concrete. */
tgc_status tgc_graph_import_consts(tgc_graph *g, tgc_tensor *const *bound, int n_bound);
/* Checks SSA order, arity against ops.def, and that shape inference reproduces every
 * node's dtype and shape. TGC_ERR_INTERNAL with a message naming the node otherwise. */
tgc_status tgc_graph_verify(const tgc_graph *g);
/* Text form, one node a line ("%3 = conv2d(%0, %1, %2) {stride=1,1 ...} : f32[s0, 32, 34, 34]").
 * Caller frees. */
char *tgc_graph_to_text(const tgc_graph *g);
/* Graphviz DOT. Caller frees. */
char *tgc_graph_to_dot(const tgc_graph *g);
/* Formats a shape ("[s0, 3, 32, 32]") into buf. */
int tgc_vinfo_format_shape(const tgc_symtab *t, const tgc_vinfo *v, char *buf, size_t n);

#endif
