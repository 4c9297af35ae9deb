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
/* m's own tensor name (no path, no error when absent): for lookups that probe. */
tgc_tensor *tgc_module_find_local(const tgc_module *m, const char *name);
/* 1 when m has a tensor, a child or an attribute of that local name. */
int tgc_module_name_taken(const tgc_module *m, const char *name);
/* Forget cached signatures and flat lists of m and its ancestors. */
void tgc_module_invalidate(tgc_module *m);

/* The dotted path below m of tensor i of tgc_module_flat(m) ("conv1.weight", "layer1.0.bn1.
 * running_mean": m's own name left out, PyTorch's state_dict names), written snprintf-style
 * into buf (returns the length it needs; -1 when i is out of range); *is_buffer, when not
 * NULL, is 1 for a buffer and 0 for a parameter. */
int tgc_module_flat_name(const tgc_module *m, int i, char *buf, size_t n, int *is_buffer);

/* The data-parallel wrapper of m (ddp.c) and its sync flag, both part of m's structure
 * signature (with key, its communicator's handle, which is never reused) and description
 * ("self.ddp sync = on"), so a compiled step recompiles when either changes. d NULL
 * detaches. A second wrapper: TGC_ERR_INVALID_ARG. The module never calls the wrapper: d is
 * its identity. */
struct tgc_ddp;
tgc_status tgc_module_set_ddp(tgc_module *m, struct tgc_ddp *d, uint64_t key, int sync);
struct tgc_ddp *tgc_module_ddp(const tgc_module *m);

/* The handles watching m (frontend/watch.h: the optimizers created over it and its
 * data-parallel wrapper put a watch on at creation and take it off in their free):
 * tgc_module_free of the tree calls each one's gone, and tgc_module_to of m, of an ancestor
 * or of a module below it asks each one's moving what moves too. watch: TGC_ERR_OOM. */
struct tgc_watch;
tgc_status tgc_module_watch(tgc_module *m, struct tgc_watch *w);
void tgc_module_unwatch(tgc_module *m, struct tgc_watch *w);
/* 1 when module m is root or below it (m NULL: 0). */
int tgc_module_in_subtree(const tgc_module *m, const tgc_module *root);

#endif
