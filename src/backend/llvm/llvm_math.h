/* Vector math for generated kernels: exp, log, tanh, erf on float scalars or
 * vectors, written as LLVM IR (range reduction + polynomials), so a SIMD loop never drops
 * to a libm call per lane. Double precision goes to libm lane by lane: f64 kernels are
 * rare, and libm keeps them bit-identical to interp.
 *
 * Accuracy on f32 (against libm in double): exp, log, tanh within a few ulp; erf
 * within 2e-7 absolute (Abramowitz-Stegun 7.1.26 for |x| >= 0.75, Taylor below). */
#ifndef TGC_BACKEND_LLVM_MATH_H
#define TGC_BACKEND_LLVM_MATH_H

#include "backend/llvm/llvm_jit.h"

/* A constant of x's type (scalar or vector, float or double). */
LLVMValueRef tgc_lm_const(tgc_llvm_unit *u, LLVMTypeRef ty, double v);
LLVMValueRef tgc_lm_exp(tgc_llvm_unit *u, LLVMValueRef x);
LLVMValueRef tgc_lm_log(tgc_llvm_unit *u, LLVMValueRef x);
LLVMValueRef tgc_lm_tanh(tgc_llvm_unit *u, LLVMValueRef x);
LLVMValueRef tgc_lm_erf(tgc_llvm_unit *u, LLVMValueRef x);
/* The primitive math op of libm name `name` (tgc_op_math_fn) on x: the vector code above
 * where this file has it (exp, log, tanh, erf; sqrt as llvm.sqrt), else libm's name / namef
 * lane by lane, so a math primitive needs nothing here but its name. */
LLVMValueRef tgc_lm_unary(tgc_llvm_unit *u, const char *name, LLVMValueRef x);
/* 1 when tgc_lm_unary has vector code of its own for name. */
int tgc_lm_has_vector(const char *name);
LLVMValueRef tgc_lm_pow(tgc_llvm_unit *u, LLVMValueRef x, LLVMValueRef y);
/* One-operand intrinsic (llvm.sqrt, llvm.fabs, ...) overloaded on x's type. */
LLVMValueRef tgc_lm_intrinsic1(tgc_llvm_unit *u, const char *name, LLVMValueRef x);
/* libm's `name` (double) or `name`f (float) applied lane by lane; y may be NULL. */
LLVMValueRef tgc_lm_libm(tgc_llvm_unit *u, const char *name, LLVMValueRef x, LLVMValueRef y);

#endif
