/* Constant folding: a node whose inputs are all graph constants is run once, at compile
 * time, through the evaluator the driver passes (interp's), and becomes a graph constant
 * (TGC_BIND_FOLDED). */
#include <stdlib.h>

#include "passes/passes.h"
#include "tensor/tensor_impl.h"
#include "support/error.h"

/* A folded constant lives as long as the variant; beyond this many elements it would
 * cost more memory (and compile time) than recomputing it costs at run time, and a fused
 * kernel would read it from memory instead of computing it in registers. */
#define FOLD_MAX_ELEMS ((int64_t)1 << 20)

static int foldable(const tgc_graph *g, int i, tgc_tensor *const *val, const uint8_t *mutated)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op == TGC_OP_INPUT || nd->n_in == 0 || tgc_node_effects(nd) != 0 ||
        (nd->flags & TGC_NODE_MUTATES) || mutated[i])
        return 0;
    for (int k = 0; k < nd->n_in; k++)
        if (!val[nd->in[k]] || mutated[nd->in[k]])
            return 0;
    int64_t n = 1;
    for (int d = 0; d < nd->out.ndim; d++) {
        if (!TGC_SDIM_IS_CONST(nd->out.shape[d]))
            return 0;
        n *= nd->out.shape[d];
        if (n > FOLD_MAX_ELEMS)
            return 0;
    }
    return 1;
}

/* Runs node i on its constant inputs; a contiguous result owned by the caller (outside
 * any scope), or NULL when the kernel fails on these values (the node then stays). */
static tgc_tensor *evaluate(const tgc_graph *g, int i, tgc_tensor *const *val,
                            tgc_node_eval_fn eval)
{
    const tgc_node *nd = &g->nodes[i];
    tgc_tensor *ins[8];
    int64_t shape[TGC_MAX_DIMS];
    if (nd->n_in > 8)
        return NULL;
    for (int k = 0; k < nd->n_in; k++)
        ins[k] = val[nd->in[k]];
    for (int d = 0; d < nd->out.ndim; d++)
        shape[d] = nd->out.shape[d];
    tgc_tensor *r = eval(nd, ins, shape); /* contiguous: backends read constants densely */
    if (r)
        tgc_scope_release(r);
    return r;
}

tgc_status tgc_pass_fold_constants(tgc_graph *g, tgc_node_eval_fn eval)
{
    if (!eval)
        return TGC_OK;
    tgc_rewriter rw;
    if (tgc_rw_begin(&rw, g) != TGC_OK)
        return rw.st;
    tgc_tensor **val = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *val);
    uint8_t *mutated = tgc_pass_mutated_values(g);
    if (!val || !mutated) {
        free(val);
        free(mutated);
        tgc_rw_abort(&rw);
        return tgc_set_error(TGC_ERR_OOM, "tgc_pass_fold_constants: out of memory");
    }
    tgc_scope_push(); /* kernel temporaries; folded results are released from it */
    for (int i = 0; i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_FOLDED && !mutated[i]) {
            int64_t k = nd->attrs.input.index;
            val[i] = k >= 0 && k < g->n_consts ? g->consts[k] : NULL;
        }
        tgc_tensor *t = foldable(g, i, val, mutated) ? evaluate(g, i, val, eval) : NULL;
        if (!t) {
            tgc_clear_error();
            tgc_rw_copy(&rw, i);
            continue;
        }
        val[i] = t;
        rw.map[i] = tgc_rw_emit_const(&rw, t);
        rw.changed = 1;
    }
    tgc_scope_pop();
    free(val);
    free(mutated);
    return tgc_rw_finish(&rw);
}
