/* The fusion classification both compiled backends use (classify.c): ops.def's fusion class
 * of a node's op (tgc_op_fusion_class), narrowed by what the target computes natively (its
 * kir_target's caps and templates). A backend's fusion hooks call it with its target. */
#ifndef TGC_BACKEND_CLASSIFY_H
#define TGC_BACKEND_CLASSIFY_H

#include "ir/graph.h"
#include "kir/schedule.h"
#include "passes/fuse.h"

tgc_fuse_class tgc_backend_classify(const tgc_graph *g, int32_t node, const kir_target *t);

#endif
