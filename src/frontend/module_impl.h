/* Module internals shared with the tracer and the guards. */
#ifndef TGC_FRONTEND_MODULE_IMPL_H
#define TGC_FRONTEND_MODULE_IMPL_H

#include "tgc/module.h"

/* The module tree's parameters and buffers in pre-order (own tensors in insertion order,
 * then each child's), cached until the structure changes. *n = 0 for an empty tree; NULL
 * with *n = 0 only on an allocation failure. */
tgc_tensor *const *tgc_module_flat(tgc_module *m, int *n);
/* One line per module and tensor ("self.fc.training = true",
 * "self.fc.weight: param f32[10, 8192] cpu requires_grad"): the text behind the signature,
 * used to explain a signature mismatch. Caller frees. */
char *tgc_module_describe(const tgc_module *m);
/* Forget cached signatures and flat lists of m and its ancestors. */
void tgc_module_invalidate(tgc_module *m);

#endif
