/* Kernel IR -> LLVM IR.
 *
 * A LOOP kernel becomes `void name(ptr bufs, ptr sizes, i64 lo, i64 hi)`: bufs[i] points at
 * element 0 of kernel buffer i; sizes[j] is the value of size slot j (a symbolic extent,
 * stride or offset, evaluated by the executor from the call's symbol values), followed by
 * each random draw's seed and base (kir/abi.h); [lo, hi) is
 * the range of parallel rows this call handles: the flattened grid axes of the kernel's
 * schedule, or chunks of its strip-mined axis. The schedule's vector axis (the innermost)
 * runs as <lanes x T> vectors with a lane mask for the tail; contiguous accesses are
 * (masked) vector loads and stores, broadcasts are splats, other strides are gathers.
 *
 * A template epilogue is emitted inside the GEMM / conv micro-kernel through
 * tgc_llvm_epilogue_emit, reading its operands through the same bufs / sizes pair, passed
 * as the template's ep_args (a pointer to {bufs, sizes}). */
#ifndef TGC_BACKEND_LLVM_CODEGEN_H
#define TGC_BACKEND_LLVM_CODEGEN_H

#include "backend/llvm/llvm_jit.h"
#include "kir/abi.h"

/* The kernel-IR target this codegen compiles for (kir/schedule.h): vector widths from the
 * host CPU (tgc_llvm_host, TGC_LLVM_CPU included), the flat-domain split, the f32 GEMM and
 * conv templates. Lower kernels for it before tgc_llvm_emit_loop. */
const kir_target *tgc_llvm_kir_target(void);

/* 1 when the LOOP codegen handles every value of node-level dtype/op combination. */
int tgc_llvm_pointwise_supported(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in);

/* Emits LOOP kernel k as function `name` (already unit-unique), reading its sizes through
 * slots, the kernel's ABI as the driver collected it (kir_args_collect, kir/abi.h). */
tgc_status tgc_llvm_emit_loop(tgc_llvm_unit *u, const kir_kernel *k, const char *name,
                              const kir_args *slots);

/* The epilogue of template kernel k applied to accumulator vector acc (see llvm_gemm.h for
 * the position); slots as filled by kir_args_collect. */
struct tgc_gemm_ep_pos;
LLVMValueRef tgc_llvm_epilogue_emit(tgc_llvm_unit *u, const kir_kernel *k, const kir_args *slots,
                                    LLVMValueRef acc, const struct tgc_gemm_ep_pos *pos);

#endif
