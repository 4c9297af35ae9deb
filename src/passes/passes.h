/* Graph-level optimization passes, run on a traced graph before fusion and lowering.
 *
 * Every pass rewrites the graph in place and leaves it verified-clean (tgc_graph_verify)
 * and computing the same outputs under interp (up to per-dtype rounding where a
 * decomposition rounds intermediates). A pass may rebuild g->nodes: nodes stay in
 * topological order, value ids are renumbered and g->outputs follow. g->syms and
 * g->consts stay with the graph (new constants are appended to g->consts). On failure a
 * pass returns the status with the error set; the graph is then unchanged (a pass builds
 * its new node array aside and swaps it in only when complete).
 *
 * Effects (tgc_op_effects, ir/op.h) are respected by every pass through the queries below:
 * values that a node writes in place (TGC_EFFECT_WRITES_INPUTS, flagged TGC_NODE_MUTATES, and
 * views of them) are never folded, forwarded or merged and their readers never move across
 * the writer: their contents change at that node, so node order matters there. Random nodes
 * (TGC_EFFECT_RANDOM) advance the Philox stream: never removed, merged, folded or reordered
 * against each other, so compiled calls draw exactly the bits eager ones do. */
#ifndef TGC_PASSES_PASSES_H
#define TGC_PASSES_PASSES_H

#include "ir/graph.h"
#include "tgc/config.h"

/* A deep copy: nodes, outputs, the symbol table (every tgc_sdim of g stays valid in the
 * copy) and new references to g's constants. NULL on OOM (error set). Free with
 * tgc_graph_free. */
tgc_graph *tgc_graph_clone(const tgc_graph *g);

/* Rewrites composite ops into primitive pointwise and reduction ops: softmax,
 * log_softmax, layer_norm, gelu, gelu_tanh, silu, batch_norm in eval with running stats,
 * cross_entropy without label smoothing (log_softmax + nll_loss), var, batch_norm in
 * training, conv2d_grad_input of stride 1, and convolutions (conv2d and its two gradients)
 * with taps that read only padding, over their live taps alone (unless kept:
 * TGC_DECOMPOSE_KEEP_*). f16/bf16 inputs
 * compute in f32 and cast back once, as interp does in double. */
tgc_status tgc_pass_decompose(tgc_graph *g);
/* What a backend computes natively and wants kept whole. */
enum {
    TGC_DECOMPOSE_KEEP_ACTIVATIONS = 1u << 0, /* gelu, gelu_tanh, silu */
    /* batch_norm with batch statistics (training) stays one node: its own kernel, rounding
     * once as interp's, the numbers eager ops give; without it the node becomes the
     * statistics' ops and assignments of the running statistics, which fuse */
    TGC_DECOMPOSE_KEEP_BATCH_NORM = 1u << 1,
    /* conv2d_grad_input stays one node: the backend's own input-gradient kernel; without it
     * one of stride 1, one group and constant kernel sizes becomes a convolution of dy with
     * the weights flipped and transposed (conv2d(dy, flip(w^T)), padding dil (k - 1) - pad),
     * which runs on the forward convolution's kernels and takes their epilogues */
    TGC_DECOMPOSE_KEEP_CONV_GRAD_INPUT = 1u << 2,
    /* convolutions keep every tap; without it conv2d, conv2d_grad_input and
     * conv2d_grad_weight with constant sizes whose kernel has taps that read only padding
     * (ir/conv_taps.h: a 3x3 kernel of padding 1 on a 1x1 image has one live tap) run over
     * the live taps alone: the weights sliced, the padding reduced, and the weight gradient
     * padded back with zeros to the kernel's size */
    TGC_DECOMPOSE_KEEP_CONV_TAPS = 1u << 3
};
tgc_status tgc_pass_decompose_opts(tgc_graph *g, unsigned keep);
/* Evaluates node nd on concrete inputs; shape is its concrete output shape. Returns a new
 * contiguous tensor in the innermost scope, or NULL (error set) when the kernel fails on these
 * values. Passes evaluate only through this callback, so they never include a backend: the
 * compile driver hands them interp's (tgc_interp_eval_contiguous, backend/interp/interp.h). */
typedef tgc_tensor *(*tgc_node_eval_fn)(const tgc_node *nd, tgc_tensor *const *in,
                                        const int64_t *shape);
/* Evaluates, once, every node whose inputs are all constants (TGC_BIND_FOLDED inputs and
 * earlier folded results) through eval and replaces it by a graph constant (eval NULL: no
 * folding).
 * Trace constants (TGC_BIND_CONST) count only after tgc_graph_import_consts. Never folds
 * nodes with effects (random draws, in-place writers), values written in place, or results
 * over 1 Mi elements. */
tgc_status tgc_pass_fold_constants(tgc_graph *g, tgc_node_eval_fn eval);
/* Exact algebraic identities (x*1, x/1, x-0, x+(-0), neg(neg x), cast or reshape or
 * expand to the same type, identity permute, contiguous of a non-view, full slices),
 * power-of-two mul_scalar chains merged, and view chains canonicalized (reshape of
 * reshape, permute of permute, squeeze/unsqueeze/flatten with constant dims as reshape). */
tgc_status tgc_pass_simplify(tgc_graph *g);
/* Merges nodes with the same op, inputs, attributes (floats bitwise) and type. Never
 * merges INPUT nodes, nodes with effects (random draws, in-place writers) or readers of values
 * written in place. */
tgc_status tgc_pass_cse(tgc_graph *g);
/* Removes nodes no output depends on, except nodes with effects (in-place writers and random
 * draws, and what they read), and drops graph constants no node reads any more. */
tgc_status tgc_pass_dce(tgc_graph *g);
/* decompose, fold (through eval), then simplify/cse/dce until nothing changes (at most a few
 * rounds), then tgc_graph_verify. With the graph log channel on, logs the graph before and after
 * through tgc_log_msg, naming the function `name`. Returns the first failing status. */
tgc_status tgc_passes_run(tgc_graph *g, const tgc_config *cfg, const char *name,
                          tgc_node_eval_fn eval);
/* The same, with the decompositions a backend wants kept (TGC_DECOMPOSE_KEEP_*). */
tgc_status tgc_passes_run_opts(tgc_graph *g, const tgc_config *cfg, const char *name, unsigned keep,
                               tgc_node_eval_fn eval);

/* ---- shared by the passes (rewrite.c) ---- */

/* A rebuild of g: the passes walk g's nodes in order and, for each, either copy it
 * (tgc_rw_copy), emit replacement nodes (tgc_rw_emit) or forward it to an existing new
 * value (tgc_rw_forward). tgc_rw_finish swaps the new nodes into g; tgc_rw_abort drops
 * them. The first error sticks in rw->st and makes later calls return -1. */
typedef struct tgc_rewriter {
    tgc_graph *g;   /* the graph being rewritten (its nodes are read until finish) */
    tgc_graph next; /* the new node array; shares g->syms */
    int32_t *map;   /* old value id -> new value id (-1: not yet / dropped) */
    tgc_status st;
    int changed; /* set by the pass when it rewrote something */
} tgc_rewriter;

tgc_status tgc_rw_begin(tgc_rewriter *rw, tgc_graph *g);
/* Copies old node i with its inputs remapped; returns the new id. */
int32_t tgc_rw_copy(tgc_rewriter *rw, int32_t i);
/* Appends a node over new value ids, its type from shape inference; returns the new id. */
int32_t tgc_rw_emit(tgc_rewriter *rw, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a);
/* Appends a node with a given type (for INPUT nodes). */
int32_t tgc_rw_emit_typed(tgc_rewriter *rw, tgc_op op, const int32_t *in, int n_in,
                          const tgc_attrs *a, const tgc_vinfo *out);
/* Makes t (a concrete, contiguous tensor outside any scope, whose reference the call takes
 * over) a graph constant and appends the TGC_BIND_FOLDED input that reads it; returns the
 * new id, or -1 with rw->st set. t may be NULL (an allocation that failed: TGC_ERR_OOM). */
int32_t tgc_rw_emit_const(tgc_rewriter *rw, tgc_tensor *t);
/* The new id of old value i. */
static inline int32_t tgc_rw_new(const tgc_rewriter *rw, int32_t i)
{
    return rw->map[i];
}
/* The type of new value v. */
static inline const tgc_vinfo *tgc_rw_type(const tgc_rewriter *rw, int32_t v)
{
    return &rw->next.nodes[v].out;
}
/* Undoes every node emitted since mark = rw->next.n_nodes and clears a pending error, so a
 * pass can fall back to copying a node it failed to rewrite. */
void tgc_rw_rollback(tgc_rewriter *rw, int mark);
/* Replaces the nodes of g by the new ones and remaps the outputs. */
tgc_status tgc_rw_finish(tgc_rewriter *rw);
void tgc_rw_abort(tgc_rewriter *rw);
/* Replaces every node `wants` selects by what `emit` appends for it (its new value id), in
 * one rebuild of g. A node whose emission fails, or does not reproduce the node's type, is
 * kept as it was (its partial output rolled back). *n_selected (may be NULL) counts the
 * selected nodes; with none, g is left untouched. */
typedef int (*tgc_node_pred)(const tgc_graph *g, int32_t i);
typedef int32_t (*tgc_node_emit)(tgc_rewriter *rw, const tgc_graph *g, int32_t i);
tgc_status tgc_rw_nodes(tgc_graph *g, tgc_node_pred wants, tgc_node_emit emit, int *n_selected);

/* Per value: 1 when a mutating node writes it or a view of it (so its contents at a node
 * depend on node order). Caller frees; NULL on OOM (error set). */
uint8_t *tgc_pass_mutated_values(const tgc_graph *g);
/* The node's effects (TGC_EFFECT_* of ir/op.h): what no pass may drop, merge, fold or
 * reorder across. */
static inline unsigned tgc_node_effects(const tgc_node *nd)
{
    return tgc_op_effects(nd->op, &nd->attrs);
}
/* 1 when the node draws random numbers at run time (rand, dropout, attention dropout):
 * never removed, folded or merged, and kept in order against other draws. */
int tgc_node_is_random(const tgc_node *nd);
/* Per node: 1 when its place relative to the effect nodes matters: it has an effect itself
 * (writes an input in place, draws random numbers) or reads a value that some node writes in
 * place (or a view of one: tgc_pass_mutated_values). A pass that moves nodes (hoisting) keeps
 * pinned nodes in their order relative to every effect node; a node that reads a pinned node
 * moves only with it, since it must come after it anyway. Caller frees; NULL on OOM (error
 * set). */
uint8_t *tgc_pass_order_pinned(const tgc_graph *g);
/* 1 when two vinfos have the same dtype, rank and dims (tgc_sym_same). */
int tgc_vinfo_same(const tgc_vinfo *a, const tgc_vinfo *b);

#endif
