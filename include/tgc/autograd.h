/* libtgc — gradient mode.
 *
 * Grad mode is per thread and on by default; compiled variants are guarded on it.
 * Backward rules, tgc_backward and the optimizers arrive with the autograd work; this
 * header already carries the flags that guards and module signatures depend on. */
#ifndef TGC_AUTOGRAD_H
#define TGC_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns gradient tracking of t on or off. Only floating-point tensors (f32, f16, bf16, f64)
 * can require gradients: turning it on for an integer or bool tensor fails with
 * TGC_ERR_DTYPE and leaves t unchanged. NULL: TGC_ERR_INVALID_ARG. On a module parameter
 * it changes the module's structure signature (compiled variants recompile). */
TGC_API tgc_status tgc_requires_grad(tgc_tensor *t, int on);
TGC_API int tgc_requires_grad_of(const tgc_tensor *t);
/* Disable grad mode on this thread until the matching pop (nests). Inside a model function
 * the levels its caller pushed are protected: popping one is refused (TGC_ERR_INVALID_ARG,
 * grad mode unchanged), and levels the function leaves pushed are undone when it returns,
 * which then fails with TGC_ERR_INVALID_ARG. */
TGC_API void tgc_no_grad_push(void);
TGC_API void tgc_no_grad_pop(void);
TGC_API int tgc_grad_enabled(void);

#ifdef __cplusplus
}
#endif
#endif
