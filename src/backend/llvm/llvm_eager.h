/* Eager ops through cached per-signature LLVM kernels (see llvm_eager.c). */
#ifndef TGC_BACKEND_LLVM_EAGER_H
#define TGC_BACKEND_LLVM_EAGER_H

#include "tensor/tensor_impl.h"
#include "ir/op.h"

/* Runs op eagerly on native kernels. *handled = 0 when the op should run on interp instead
 * (not a candidate, TGC_EAGER=interp, or this signature does not compile); otherwise the
 * result (NULL on failure, error set) lives in the innermost scope. */
tgc_tensor *tgc_llvm_eager(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           int *handled);

/* Tests: while on, this thread's eager ops run on interp (the oracle side of a
 * comparison). */
void tgc_llvm_eager_force_interp(int on);

#endif
