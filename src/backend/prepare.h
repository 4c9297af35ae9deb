/* Graph preparations shared by the compiled backends (prepare.c). */
#ifndef TGC_BACKEND_PREPARE_H
#define TGC_BACKEND_PREPARE_H

#include "ir/graph.h"
#include "kir/schedule.h"

/* A contiguous copy in front of every view whose chain no affine access expresses.
 * TGC_ERR_OOM, TGC_ERR_INTERNAL. */
tgc_status tgc_prepare_views(tgc_graph *g, const char *who);
/* Where target t's conv templates read and store channels-last (t->conv_channels_last): every
 * 4-D activation that a conv reads as its input, and that only kernels reading through
 * strides read otherwise, made NHWC: its uses read an NCHW view (permute) of a channels-last
 * copy (contiguous of the NHWC permute), which fusion makes the producing kernel's store
 * (tgc_pass_fuse). The convs then read it in place
 * (kir_template.cl; the weights get OHWI copies from tgc_prepare_template_operands). Graph
 * inputs and outputs, values read by conv gradients, opaque nodes, matmuls or views stay NCHW.
 * *n_values (may be NULL): how many values became NHWC. TGC_ERR_OOM. */
tgc_status tgc_prepare_channels_last(tgc_graph *g, const kir_target *t, int *n_values);
/* 1 when tgc_prepare_for_target keeps activations channels-last: the environment's
 * TGC_CHANNELS_LAST (1 on, 0 off; read once per process), else on. Thread-safe. */
int tgc_prepare_channels_last_on(void);
/* Contiguous copies of the view operands of matmul / linear / conv2d nodes target t has a
 * template for but cannot stride through. */
tgc_status tgc_prepare_template_operands(tgc_graph *g, const kir_target *t);
/* Parameter- and constant-only nodes moved ahead of the rest (order kept otherwise; nodes
 * pinned by an effect stay). */
tgc_status tgc_prepare_hoist_input_only(tgc_graph *g, const char *who);
/* What every compiled backend's prepare does, for target t (t->name in messages): the copies
 * of tgc_prepare_views, tgc_prepare_channels_last (where tgc_prepare_channels_last_on) and
 * tgc_prepare_template_operands, then tgc_prepare_hoist_input_only. */
tgc_status tgc_prepare_for_target(tgc_graph *g, const kir_target *t);

#endif
