/* The CUDA backend's fusion decisions and graph preparation: which ops its generated
 * kernels compute (pointwise, reductions, windows, draws), which go to the templates
 * (matmul / linear / conv2d, rendered by cuda_gemm.h) and which stay OPAQUE (run natively
 * by cuda_ops.h's kernels: cat, stack, pad, embedding, gather, index_select, argmax, arange,
 * losses, attention, batch_norm in training, exclude-padding avg pools, adaptive pools to
 * other than 1x1). Stateless; thread-safe. */
#ifndef TGC_BACKEND_CUDA_CLASSIFY_H
#define TGC_BACKEND_CUDA_CLASSIFY_H

#include "ir/graph.h"
#include "passes/fuse.h"

/* Fusion hooks: tgc_backend_classify for the CUDA target (ops.def's fusion classes, the
 * target's caps), epilogue operands as kir_epilogue_operand_ok. */
const tgc_fuse_hooks *tgc_cuda_fuse_hooks(void);

/* Rewrites before fusion (g is the driver's clone; tgc_prepare_for_target): a contiguous copy in
 * front of every view no affine access expresses, contiguous copies of GEMM / conv operands the
 * templates cannot stride through, and parameter-only subgraphs moved first (so their results can
 * join template epilogues, as on LLVM). Errors: TGC_ERR_OOM, TGC_ERR_INTERNAL. */
tgc_status tgc_cuda_prepare(tgc_graph *g);

/* TGC_DECOMPOSE_KEEP_* flags (passes.h): the composites the renderer computes itself
 * (gelu, gelu_tanh, silu). */
unsigned tgc_cuda_decompose_keep(void);

#endif
