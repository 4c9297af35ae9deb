/* The process-wide f32 kernels the conv2d backward drivers (runtime/conv_grad.h) run on: one
 * GEMM kernel and one conv kernel with dynamic geometry, emitted into one unit (they share the
 * micro-kernel and packing routines) and compiled on first use. Their code lives until the
 * process exits (the JIT's teardown order makes releasing it at exit unsafe, as for eager
 * kernels). Thread-safe: built once under pthread_once, immutable afterwards. */
#ifndef TGC_BACKEND_LLVM_CONV_GRAD_H
#define TGC_BACKEND_LLVM_CONV_GRAD_H

#include "runtime/gemm.h"

/* The bound kernels. TGC_ERR_COMPILE (with LLVM's reason; every later call fails the same
 * way) when they cannot be built. */
tgc_status tgc_llvm_conv_grad_kernels(const tgc_gemm_kernel **gemm, const tgc_gemm_kernel **conv);

#endif
