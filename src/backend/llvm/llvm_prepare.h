/* Graph preparation for the LLVM backend, after the generic passes and before fusion:
 * the rewrites that depend on what this backend's kernels can do, and the fusion hooks.
 *
 *  - adaptive average pools (not 1x1) as two GEMMs with constant averaging matrices;
 *  - scaled_dot_product_attention without dropout or causal masking as GEMMs and a softmax;
 *  - a contiguous copy in front of views no affine access expresses, and of GEMM / conv
 *    operands the templates cannot stride through;
 *  - parameter-only subgraphs moved first, so their results can join conv epilogues. */
#ifndef TGC_BACKEND_LLVM_PREPARE_H
#define TGC_BACKEND_LLVM_PREPARE_H

#include "ir/graph.h"
#include "passes/fuse.h"

tgc_status tgc_llvm_prepare(tgc_graph *g);
/* How this backend classifies nodes and accepts epilogue operands. */
const tgc_fuse_hooks *tgc_llvm_fuse_hooks(void);
/* Why the hooks leave node OPAQUE (the vtable's opaque_reason); NULL when they do not. */
const char *tgc_llvm_opaque_reason(const tgc_graph *g, int32_t node);

#endif
