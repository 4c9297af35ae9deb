/* libtgc — modules: the `self` of a model function.
 *
 * A module holds named parameters and buffers, child modules, a training flag and a
 * userdata pointer to the caller's own struct (never freed by the library).
 *
 * Ownership: tgc_module_param/buffer copy `init` into a tensor owned by the module (the
 * returned tensor belongs to the module, not to a scope; do not tgc_tensor_free it).
 * tgc_module_child makes `child` owned by `parent`: freeing the parent frees it.
 * tgc_module_free frees a root module with its children, parameters and buffers.
 *
 * Compiled functions bind parameters by their position in the module tree, not by pointer,
 * so two modules of one structure share compiled variants. The structure signature covers
 * names, shapes, dtypes, devices, requires_grad and training flags of the whole tree; it is
 * recomputed at each change, so reading it (every tgc_call does) is one load.
 *
 * Threading: tgc_call may use one module from many threads at once (it only reads it);
 * changing a module (adding members, tgc_module_train, tgc_requires_grad on a parameter)
 * must not overlap calls that use it. */
#ifndef TGC_MODULE_H
#define TGC_MODULE_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_module tgc_module;

/* name is copied. Returns NULL on a NULL/empty name. New modules are in training mode. */
TGC_API tgc_module *tgc_module_create(const char *name, void *userdata);
TGC_API void tgc_module_free(tgc_module *m);

/* Adds a parameter (requires_grad on) initialised from a copy of init. Names are unique
 * within a module. Returns the module's tensor, or NULL on error. */
TGC_API tgc_tensor *tgc_module_param(tgc_module *m, const char *name, const tgc_tensor *init);
/* Adds a buffer (state that is not trained, e.g. batch-norm running stats). */
TGC_API tgc_tensor *tgc_module_buffer(tgc_module *m, const char *name, const tgc_tensor *init);
/* Attaches child under name; child must not already have a parent. */
TGC_API tgc_status tgc_module_child(tgc_module *parent, const char *name, tgc_module *child);

/* Lookup by local name; NULL when absent (no error is set). */
TGC_API tgc_tensor *tgc_module_get(const tgc_module *m, const char *name);
TGC_API tgc_module *tgc_module_get_child(const tgc_module *m, const char *name);
/* Number of parameters and buffers in the whole tree. */
TGC_API int tgc_module_num_tensors(const tgc_module *m);

/* Sets the training flag of m and all its children. */
TGC_API void tgc_module_train(tgc_module *m, int on);
TGC_API int tgc_module_is_training(const tgc_module *m);
TGC_API tgc_status tgc_module_to(tgc_module *m, tgc_device dev);
TGC_API void *tgc_module_userdata(const tgc_module *m);
TGC_API const char *tgc_module_name(const tgc_module *m);
/* 64-bit hash of the structure (see above); equal for modules of one structure. */
TGC_API uint64_t tgc_module_signature(const tgc_module *m);

#ifdef __cplusplus
}
#endif
#endif
