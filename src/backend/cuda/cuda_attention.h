/* Fused attention on CUDA: scaled_dot_product_attention (SDPA) as one flash-attention style
 * kernel per call (online softmax, optional bool / float mask, causal, dropout with the CPU's
 * Philox bits), never materializing the L x S score matrix.
 *
 * The kernels are CUDA C compiled with NVRTC once per device, lazily and thread-safely; both
 * entry points may be called from any thread. */
#ifndef TGC_BACKEND_CUDA_ATTENTION_H
#define TGC_BACKEND_CUDA_ATTENTION_H

#include <stdint.h>

#include "backend/plan.h"
#include "ir/graph.h"
#include "tensor/tensor_impl.h"

/* Runs SDPA node nd natively on env->device, with run_node's rules (backend/backend.h): ins
 * are the node's inputs as device tensors (any strides), shape its evaluated output shape;
 * on success *out is a new contiguous tensor on env->device in the current scope. The work is
 * queued on env->stream (NULL: tgc_cuda_stream(env->device.index)). With dropout it draws
 * from the Philox stream in the node's turn exactly as interp does (numel of the [batch...,
 * L, S] weights). TGC_ERR_UNSUPPORTED with no error kept for a case it does not cover (the
 * caller then stages the node through interp). */
tgc_status tgc_cuda_attention_run(const tgc_node *nd, tgc_tensor *const *ins,
                                  const int64_t *shape, tgc_tensor **out,
                                  const struct tgc_launch_env *env);

/* 1 when tgc_cuda_attention_run covers node nd judging by its op, attributes and dtypes
 * alone (shapes are checked at run time); 0 otherwise. */
int tgc_cuda_attention_supported(const tgc_node *nd);

#endif
