/* Lowering fused groups to kernel IR. */
#ifndef TGC_KIR_LOWER_H
#define TGC_KIR_LOWER_H

#include "kir/kir.h"
#include "passes/fuse.h"

/* Per node: 1 when its value needs a buffer (read by another group, directly or through
 * views, or a graph output). Caller frees; NULL on OOM. */
uint8_t *kir_materialized(const tgc_graph *g, const tgc_fusion *f);

/* 1 when matmul / linear / conv2d node `node` maps onto the GEMM or conv template: a dtype
 * the target has that template for (kir_target_has_template), operands of that dtype whose
 * views the template can stride through, batch dims that flatten. */
int kir_template_ok(const tgc_graph *g, int32_t node, const kir_target *target);
/* 1 when u is a channels-last view of its 4-D logical shape [N, C, H, W] (the permute to
 * NCHW of a contiguous NHWC buffer, offset 0; also OIHW over OHWI weights), with *base the
 * viewed value. A conv whose x and w both are has kir_template.cl set. */
int kir_is_channels_last_view(const tgc_graph *g, int32_t u, int32_t *base);
/* The fusion hook: 1 when `node` (of the template's output shape) reading `operand` can be
 * part of template `tpl`'s epilogue. */
int kir_epilogue_operand_ok(const tgc_graph *g, int32_t tpl, int32_t node, int32_t operand);

/* The fusion hook of a target whose conv template stores channels-last (kir_template.out_cl):
 * 1 when `node` is a contiguous copy of the NHWC permute of conv `tpl`'s result, of its dtype
 * (the template's epilogue then writes that copy instead of the NCHW result). */
int kir_permuted_store_ok(const tgc_graph *g, int32_t tpl, int32_t node);

/* Builds the kernel of LOOP or TEMPLATE group gid for `target` (a LOOP kernel's schedule,
 * kir/schedule.h, comes from it). *out is NULL for an empty group. RAND members become
 * KV_RAND draws, DROPOUT members a draw and the keep-and-scale arithmetic. */
tgc_status kir_lower_group(const tgc_graph *g, const tgc_fusion *f, int gid,
                           const uint8_t *materialized, const kir_target *target, kir_kernel **out);

#endif
