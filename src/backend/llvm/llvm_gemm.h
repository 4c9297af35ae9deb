/* Fast f32 GEMM and conv2d for the LLVM backend: emits into a caller's unit the pieces the
 * runtime driver (runtime/gemm.h) calls:
 *   - a register-blocked micro-kernel: MR x NV accumulators of <VL x float> (VL = the target's
 *     vector width; AVX-512 14 x 32, AVX2 6 x 16, SSE 6 x 8), llvm.fmuladd, k loop unrolled
 *     KU times, masked partial tiles, partial sums of earlier K blocks added from C;
 *   - packing of A panels (row-major A is transposed in registers), of B panels from a
 *     strided matrix, and of B panels read from an NCHW image with im2col indexing (padding
 *     as zeros, contiguous masked loads for stride-1 rows, gathers otherwise);
 *   - per kernel, the fused epilogue: a small function the driver calls on each C tile
 *     right after the micro-kernel stored its final sums (the tile is still in L1). The
 *     epilogue therefore runs exactly once per element, on the complete sum.
 * The micro-kernel and packing routines depend only on the blocking, so every kernel of a
 * unit shares them (emitted once, found by name): a model's ~20 GEMMs/convs cost one
 * micro-kernel's compile time plus one small epilogue function each.
 *
 * Usage: tgc_llvm_unit_begin; any number of tgc_llvm_gemm_emit / tgc_llvm_conv_emit (names
 * derive from `base`, which must be unique within the unit); tgc_llvm_unit_finish;
 * tgc_gemm_kernel_bind on each kernel; then tgc_gemm_run / tgc_conv_run any number of times,
 * from any threads, while the tgc_llvm_code lives.
 *
 * Ownership: the emitters only add functions to the unit (the builder's position is
 * restored); a tgc_gemm_kernel is plain data whose function pointers borrow the
 * tgc_llvm_code (free the code after the last run). */
#ifndef TGC_BACKEND_LLVM_GEMM_H
#define TGC_BACKEND_LLVM_GEMM_H

#include "backend/llvm/llvm_jit.h"
#include "runtime/gemm.h"

/* Where the epilogue's accumulator vector sits. */
typedef struct tgc_gemm_ep_pos {
    LLVMValueRef args;  /* ptr: the opaque `ep_args` pointer given to the run call */
    LLVMValueRef batch; /* i64: GEMM batch index; for conv: the image index n */
    LLVMValueRef m;     /* i64: row of C; for conv: the output channel o (global, across groups) */
    LLVMValueRef n0;    /* i64: first column of this vector; for conv: output pixel oh*OW+ow */
    LLVMValueRef mask;  /* <VL x i1> valid lanes, or NULL when all VL lanes are valid */
    int vl;
    LLVMValueRef c_ptr; /* ptr: where this vector is stored (C + batch*c_bs + m*c_rs + n0) */
} tgc_gemm_ep_pos;

typedef struct tgc_gemm_epilogue {
    /* Returns the <VL x float> to store in place of acc. NULL emit = identity. Emitted code
     * may load from memory through pos->args (the lead's data), must not store. It is called
     * twice per kernel (full vectors, then masked ones) with u->b positioned inside the
     * kernel's epilogue function; it may add basic blocks but must leave the builder at the
     * end of the block where the result is available. */
    LLVMValueRef (*emit)(void *ctx, tgc_llvm_unit *u, LLVMValueRef acc, const tgc_gemm_ep_pos *pos);
    void *ctx;
} tgc_gemm_epilogue;

/* Emits the GEMM functions "<base>_ukr" (and, once per unit, the packing routines) and fills
 * k's blocking and names. cfg may be NULL (defaults for the target). ep may be NULL
 * (identity). Errors: TGC_ERR_INVALID_ARG (NULL/too long base, bad cfg). */
tgc_status tgc_llvm_gemm_emit(tgc_llvm_unit *u, const char *base, const tgc_gemm_epilogue *ep,
                              tgc_gemm_kernel *k);
tgc_status tgc_llvm_gemm_emit_cfg(tgc_llvm_unit *u, const char *base, const tgc_gemm_epilogue *ep,
                                  const tgc_gemm_config *cfg, tgc_gemm_kernel *k);

/* Emits a conv2d kernel. static_params NULL = every size a runtime argument; otherwise the
 * geometry (all but n) is baked into the im2col packing and runs must pass the same params
 * (any n). Errors: TGC_ERR_INVALID_ARG (bad base or static params). */
tgc_status tgc_llvm_conv_emit(tgc_llvm_unit *u, const char *base,
                              const tgc_conv_params *static_params, const tgc_gemm_epilogue *ep,
                              tgc_gemm_kernel *k);
tgc_status tgc_llvm_conv_emit_cfg(tgc_llvm_unit *u, const char *base,
                                  const tgc_conv_params *static_params, const tgc_gemm_epilogue *ep,
                                  const tgc_gemm_config *cfg, tgc_gemm_kernel *k);

/* After tgc_llvm_unit_finish: looks up k's functions in code. TGC_ERR_COMPILE when absent. */
tgc_status tgc_gemm_kernel_bind(tgc_gemm_kernel *k, tgc_llvm_code *code);

#endif
