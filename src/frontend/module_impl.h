/* Module internals shared with the tracer and the guards. */
#ifndef TGC_FRONTEND_MODULE_IMPL_H
#define TGC_FRONTEND_MODULE_IMPL_H

#include "tgc/module.h"

/* The module tree's parameters and buffers in pre-order (own tensors in insertion order,
 * then each child's), cached until the structure changes. Returns NULL with *n = 0 on an
 * allocation failure or an empty tree. */
tgc_tensor *const *tgc_module_flat(tgc_module *m, int *n);
/* One line per module and tensor ("layer1.0.conv1.weight f32[64, 64, 3, 3] grad cpu"), the
 * text behind the signature; used to explain a signature mismatch. Caller frees. */
char *tgc_module_describe(const tgc_module *m);
/* Forget cached signatures and flat lists of m and its ancestors. */
void tgc_module_invalidate(tgc_module *m);

#endif
