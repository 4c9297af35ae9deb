/* Graph preparations shared by the compiled backends (prepare.c). */
#ifndef TGC_BACKEND_PREPARE_H
#define TGC_BACKEND_PREPARE_H

#include "ir/graph.h"
#include "kir/schedule.h"

/* A contiguous copy in front of every view whose chain no affine access expresses.
 * TGC_ERR_OOM, TGC_ERR_INTERNAL. */
tgc_status tgc_prepare_views(tgc_graph *g, const char *who);
/* Contiguous copies of the view operands of matmul / linear / conv2d nodes target t has a
 * template for but cannot stride through. */
tgc_status tgc_prepare_template_operands(tgc_graph *g, const kir_target *t);
/* Parameter- and constant-only nodes moved ahead of the rest (order kept otherwise; nodes
 * pinned by an effect stay). */
tgc_status tgc_prepare_hoist_input_only(tgc_graph *g, const char *who);
/* Sums, means and maxes over dims that are not one contiguous block (N, H, W of NCHW: batch
 * norm's statistics and gradients) as two reductions: the reduced dims that end the shape
 * first (contiguous rows), then the rest. A device whose column reductions get one thread
 * per output (a few hundred channels reducing tens of thousands of values each) wants it. */
tgc_status tgc_prepare_split_reductions(tgc_graph *g);

#endif
