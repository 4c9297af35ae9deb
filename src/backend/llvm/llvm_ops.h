/* The LLVM backend's native kernels for nodes its fusion hooks leave OPAQUE (the vtable's
 * run_node / node_supported, backend.h), all f32: the conv2d backward ops on the JIT'd GEMM
 * pieces (runtime/conv_grad.h), the pool backward ops and EMBEDDING_GRAD as threaded loops
 * (runtime/pool_grad.h). Everything else, other dtypes, and calls a kernel declines (an
 * out-of-range index, whose error interp reports) go to interp (TGC_ERR_UNSUPPORTED).
 * Thread-safe: no state beyond the process-wide kernels. */
#ifndef TGC_BACKEND_LLVM_OPS_H
#define TGC_BACKEND_LLVM_OPS_H

#include "backend/backend.h"

/* 1 when tgc_llvm_run_node has a kernel for nd (by op and dtype; a call may still decline an
 * unusual input and leave it to interp). */
int tgc_llvm_node_supported(const tgc_node *nd);
/* Runs nd on the host (ins: its inputs, any strides; shape: its output shape); *out a new
 * tensor in the current scope. TGC_ERR_UNSUPPORTED (no error kept) when it has no kernel. */
tgc_status tgc_llvm_run_node(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                             tgc_tensor **out, const struct tgc_launch_env *env);

#endif
