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
/* What every compiled backend's prepare does, for target t (t->name in messages): the copies
 * of tgc_prepare_views and tgc_prepare_template_operands, then tgc_prepare_hoist_input_only. */
tgc_status tgc_prepare_for_target(tgc_graph *g, const kir_target *t);

#endif
