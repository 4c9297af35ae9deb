/* Fusion: partitions a graph's compute nodes into groups, each of which becomes one kernel.
 *
 *  - LOOP groups: pointwise chains, with at most one reduction domain: reductions over the
 *    same dims of the same input shape (softmax's max and sum, layer_norm's mean and
 *    variance) join one group, with their prologues (pointwise producers of the reduced
 *    input) and epilogues (pointwise consumers of full or reduced shape).
 *  - TEMPLATE groups: a matmul, linear or conv2d and the chain of pointwise consumers of
 *    its exact output shape (bias, activation, residual add, batch-norm scale/shift) as its
 *    epilogue.
 *  - OPAQUE groups: one node the backend runs through its fallback (interp).
 *
 * A contiguous copy of a permute of a value that only the copy reads joins the value's group
 * as its store in the copy's dim order (the value itself gets no buffer): a LOOP group's
 * member, or a template's result where the backend stores it so (a conv's output written
 * channels-last).
 *
 * Views (except contiguous) belong to no group: consumers read through them. Every group
 * reads only values of earlier groups, so running groups in id order is a valid schedule. */
#ifndef TGC_PASSES_FUSE_H
#define TGC_PASSES_FUSE_H

#include "ir/graph.h"

typedef enum { TGC_GROUP_LOOP, TGC_GROUP_TEMPLATE, TGC_GROUP_OPAQUE } tgc_group_kind;

/* How the backend can run a node, as the fusion pass asks it. */
typedef enum {
    TGC_FUSE_FREE,      /* INPUT, views: no kernel */
    TGC_FUSE_POINTWISE, /* elementwise with broadcasting (contiguous: an identity copy) */
    TGC_FUSE_REDUCE,    /* sum / mean / max over a dim mask (see tgc_fuse_reduce_dims) */
    TGC_FUSE_TEMPLATE,  /* matmul / linear / conv2d the backend has a template for */
    TGC_FUSE_WINDOW,    /* max / avg pool, flip, pad: reads its input elsewhere than at its
                         * own position (a window, the reversed one, a shifted one), so the
                         * input is loaded */
    TGC_FUSE_OPAQUE
} tgc_fuse_class;

typedef struct tgc_group {
    tgc_group_kind kind;
    int32_t anchor;    /* LOOP: first reduction (-1: none); TEMPLATE / OPAQUE: the node */
    int32_t tip;       /* TEMPLATE: last node of the epilogue chain */
    tgc_vinfo domain;  /* LOOP: the iteration shape (a reduction's input shape) */
    uint32_t red_mask; /* LOOP: dims of domain that are reduced */
    int32_t *members;  /* node ids, in order */
    int n_members, cap;
} tgc_group;

typedef struct tgc_fusion {
    int32_t *group_of; /* per node: its group, or -1 */
    uint8_t *level;    /* per node in a LOOP group: the phase that computes it */
    uint8_t *is_row;   /* per node in a LOOP group: depends only on the kept (outer) dims */
    tgc_group *groups;
    int n_groups;
} tgc_fusion;

/* What the backend tells the fusion pass. */
typedef struct tgc_fuse_hooks {
    tgc_fuse_class (*classify)(const tgc_graph *g, int32_t node);
    /* 1 when `node`, reading `operand` (not computed by the template group), can join the
     * epilogue of template node `tpl` (the backend can index the operand there). */
    int (*epilogue_ok)(const tgc_graph *g, int32_t tpl, int32_t node, int32_t operand);
    /* Optional: 1 when the epilogue of template node `tpl` can store its result as `node`,
     * a contiguous copy of a permute of that result (tgc_permuted_copy_of): a conv's output
     * stored channels-last. NULL: templates store in their own order only (LOOP groups
     * always take such a copy, as a store with the copy's strides). */
    int (*permuted_store_ok)(const tgc_graph *g, int32_t tpl, int32_t node);
} tgc_fuse_hooks;

/* Reduced-dim mask of a REDUCE-class node (sum/mean/max, adaptive_avg_pool2d to 1x1). */
uint32_t tgc_fuse_reduce_dims(const tgc_graph *g, int32_t node);

tgc_status tgc_pass_fuse(const tgc_graph *g, const tgc_fuse_hooks *hooks, tgc_fusion *out);
void tgc_fusion_free(tgc_fusion *f);
/* One line per group for TGC_LOG=graph ("group 3 loop [s0, 64] reduce {1}: %4 %5 %6"). */
char *tgc_fusion_to_text(const tgc_graph *g, const tgc_fusion *f);

#endif
