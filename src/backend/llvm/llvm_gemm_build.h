/* One call that builds a unit holding a single GEMM or conv kernel with no epilogue, for
 * callers that do not speak LLVM (benchmarks, a plain matmul). Needs no LLVM headers. */
#ifndef TGC_BACKEND_LLVM_GEMM_BUILD_H
#define TGC_BACKEND_LLVM_GEMM_BUILD_H

#include "runtime/gemm.h"

/* kind: TGC_GEMM_KIND_GEMM or TGC_GEMM_KIND_CONV (static_params: as tgc_llvm_conv_emit; ignored
 * for GEMM). cfg NULL = defaults. On success *code holds the compiled code (free it with
 * tgc_llvm_gemm_build_free after the last run) and k is bound. */
tgc_status tgc_llvm_gemm_build(int kind, const tgc_conv_params *static_params,
                               const tgc_gemm_config *cfg, tgc_gemm_kernel *k, void **code);
void tgc_llvm_gemm_build_free(void *code);

#endif
