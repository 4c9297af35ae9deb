/* libtgc — modules: the `self` of a model function.
 *
 * A module holds named parameters and buffers, child modules, typed attributes
 * (hyperparameters: integers, floats, strings), a training flag and a userdata pointer to
 * the caller's own struct (never freed by the library).
 *
 * Ownership: tgc_module_param/buffer copy `init` into a tensor owned by the module (the
 * returned tensor belongs to the module, not to a scope; do not tgc_tensor_free it).
 * tgc_module_child makes `child` owned by `parent`: freeing the parent frees it.
 * tgc_module_free frees a root module with its children, parameters and buffers. Handles
 * over the tree need not be freed first: an optimizer (autograd.h) or a data-parallel
 * wrapper (tgc_ddp, dist.h) whose module was freed is detached, not left dangling: its later
 * calls fail with TGC_ERR_INVALID_ARG, and its own free still frees it.
 * Queries on a NULL module (tgc_module_num_tensors, _is_training, _userdata, _name) return
 * 0 or NULL and set TGC_ERR_INVALID_ARG, keeping an earlier error.
 *
 * Compiled functions bind parameters by their position in the module tree, not by pointer,
 * so two modules of one structure share compiled variants. The structure signature covers
 * names, shapes, dtypes, devices, requires_grad and training flags of the whole tree, and the
 * names, types and values of its attributes; it is recomputed at each change, so reading it
 * (every tgc_call does) is one load. Changing an attribute a compiled function was traced
 * with recompiles it, and the reason names it ("self.encoder.scale changed (0.5 -> 0.25)").
 *
 * Userdata is invisible to guards: a compiled function that reads a value through the
 * userdata pointer keeps the value it saw when it was traced, with no recompile and no log.
 * Keep every value the model computes with in a parameter, a buffer or an attribute.
 *
 * Threading: tgc_call may use one module from many threads at once (it only reads it);
 * changing a module (adding members, setting attributes, tgc_module_train,
 * tgc_requires_grad on a parameter) must not overlap calls that use it. */
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

/* Adds a parameter (requires_grad on) initialised from a copy of init. Names (of tensors,
 * children and attributes) are unique within a module and contain no '.', '=', ':', space
 * or newline (TGC_ERR_INVALID_ARG). init must be floating point (f32, f16, bf16, f64):
 * an integer or bool init fails with TGC_ERR_DTYPE (keep such state in a buffer). Returns
 * the module's tensor, or NULL on error. */
TGC_API tgc_tensor *tgc_module_param(tgc_module *m, const char *name, const tgc_tensor *init);
/* Adds a buffer (state that is not trained, e.g. batch-norm running stats). */
TGC_API tgc_tensor *tgc_module_buffer(tgc_module *m, const char *name, const tgc_tensor *init);
/* Attaches child under name; child must not already have a parent. */
TGC_API tgc_status tgc_module_child(tgc_module *parent, const char *name, tgc_module *child);

/* Attributes: hyperparameters the model reads (a number of heads, a scale, an activation's
 * name), part of the structure signature with their values (see above), so reading one
 * while tracing is as good as a guard on it. Setting an existing attribute changes its
 * value; its type stays (another type: TGC_ERR_DTYPE). A new name must be free (see
 * tgc_module_param) and not "training" (the flag of tgc_module_train): TGC_ERR_INVALID_ARG
 * otherwise, as for a NULL module or name.
 * tgc_module_set_str copies value (NULL: TGC_ERR_INVALID_ARG). */
TGC_API tgc_status tgc_module_set_i64(tgc_module *m, const char *name, int64_t value);
TGC_API tgc_status tgc_module_set_f64(tgc_module *m, const char *name, double value);
TGC_API tgc_status tgc_module_set_str(tgc_module *m, const char *name, const char *value);
/* Reads attribute name of m into *out; a dotted name reads a child's ("encoder.scale"). A
 * missing attribute is an error, not a default: TGC_ERR_INVALID_ARG, as for a NULL argument;
 * reading with another type's reader is TGC_ERR_DTYPE. *out is left unchanged on error.
 * The string of tgc_module_attr_str belongs to the module: valid until that attribute is set
 * again or the module is freed. Model functions call these freely, eagerly or while
 * tracing. */
TGC_API tgc_status tgc_module_attr_i64(const tgc_module *m, const char *name, int64_t *out);
TGC_API tgc_status tgc_module_attr_f64(const tgc_module *m, const char *name, double *out);
TGC_API tgc_status tgc_module_attr_str(const tgc_module *m, const char *name, const char **out);

/* Lookup by name: a local name ("weight") or a dotted path through children ("fc1.weight",
 * "layer1.0.bn1", PyTorch's state_dict names). NULL when absent, with TGC_ERR_INVALID_ARG and
 * a message naming the part that is missing (as for a NULL argument). */
TGC_API tgc_tensor *tgc_module_get(const tgc_module *m, const char *name);
TGC_API tgc_module *tgc_module_get_child(const tgc_module *m, const char *name);
/* Number of parameters and buffers in the whole tree. */
TGC_API int tgc_module_num_tensors(const tgc_module *m);
/* Listing the tree's tensors: index i in [0, tgc_module_num_tensors(m)) in pre-order (m's
 * own tensors in the order they were added, then each child's in turn), the order and the
 * names tgc_module_save writes. tgc_module_tensor_at returns the module's tensor (owned by
 * the module, as tgc_module_get's: its shape, dtype and device through tensor.h's queries)
 * and, when is_buffer is not NULL, sets *is_buffer to 1 for a buffer and 0 for a parameter.
 * tgc_module_tensor_name writes its dotted path below m ("fc1.weight", m's own name left
 * out) snprintf-style into the caller's buf (at most n bytes with the NUL; buf may be NULL
 * when n is 0) and returns the length of the whole path, so a first call with n = 0 sizes
 * the buffer. A NULL module or an index out of range: NULL / -1 with TGC_ERR_INVALID_ARG.
 * Indexes hold until the tree changes (a member added). */
TGC_API tgc_tensor *tgc_module_tensor_at(const tgc_module *m, int i, int *is_buffer);
TGC_API int tgc_module_tensor_name(const tgc_module *m, int i, char *buf, size_t n);

/* Sets the training flag of m and all its children. */
TGC_API void tgc_module_train(tgc_module *m, int on);
TGC_API int tgc_module_is_training(const tgc_module *m);
/* Moves every parameter and buffer of the tree to dev (copies; the tensors keep their
 * identity, so handles from tgc_module_get stay valid; views made of them earlier keep the
 * old memory), with their gradients (tgc_grad) and the state of every optimizer over the
 * tree or over an ancestor: each parameter's state moves with it, and an optimizer's "step"
 * and "lr" once all its parameters are on dev. On an error (TGC_ERR_DEVICE: dev unavailable
 * or a copy failed; TGC_ERR_OOM) nothing is moved. */
TGC_API tgc_status tgc_module_to(tgc_module *m, tgc_device dev);
/* The userdata pointer given to tgc_module_create. Not guarded: see above. */
TGC_API void *tgc_module_userdata(const tgc_module *m);
TGC_API const char *tgc_module_name(const tgc_module *m);
/* 64-bit hash of the structure (see above); equal for modules of one structure. */
TGC_API uint64_t tgc_module_signature(const tgc_module *m);

/* ---- layers whose state libtgc makes ---- */
/* Gives m the state of PyTorch's BatchNorm1d/2d/3d(num_features) under its state_dict names:
 * parameters weight (ones) and bias (zeros), buffers running_mean (zeros) and running_var
 * (ones), each [num_features] of dtype (floating point: else TGC_ERR_DTYPE), and
 * num_batches_tracked (i64, 0-d, 0), all on dev; so a PyTorch state_dict of the layer loads
 * strictly. tgc_batch_norm in training adds 1 to num_batches_tracked (eagerly and in
 * compiled code, in place, as the running statistics). A NULL module, num_features < 1 or a
 * name already taken in m: TGC_ERR_INVALID_ARG and nothing added. */
TGC_API tgc_status tgc_module_add_batch_norm(tgc_module *m, int64_t num_features, tgc_dtype dtype,
                                             tgc_device dev);
/* tgc_batch_norm of x with that state of bn, in bn's training mode (tgc_module_train). NULL
 * on error (bn lacking the state: TGC_ERR_INVALID_ARG). */
TGC_API tgc_tensor *tgc_module_batch_norm(tgc_module *bn, tgc_tensor *x, double momentum,
                                          double eps);

/* ---- checkpoints: safetensors files (PyTorch's safetensors.torch.save_file/load_file and
 * other tools read and write them) ---- */
/* Writes every parameter and buffer of the tree under its dotted name without the root
 * ("conv1.weight", "layer1.0.bn1.running_mean": PyTorch's state_dict names), from any
 * device, in its own dtype, with the CRC-32 (zlib's) of each tensor's bytes in the file's
 * metadata ("tgc.crc32:conv1.weight": "8 hex digits"; PyTorch's readers ignore it, libtgc's
 * check it). Written to a temporary file beside path ("<path>.tmp.<pid>.<n>"), fsynced,
 * renamed onto path, and the directory fsynced: a failed save (TGC_ERR_IO, naming the path
 * and the reason) leaves no partial file, and a crash leaves the old file or the new one
 * whole. Temporary files of earlier saves to path whose process no longer exists and that
 * nobody wrote for a minute (a killed save's) are removed. */
TGC_API tgc_status tgc_module_save(const tgc_module *m, const char *path);
/* Reads a safetensors file into the tree's parameters and buffers (copied to each tensor's
 * device; a file dtype other than the tensor's is converted), as PyTorch's load_state_dict:
 * with `strict`, every tensor of the tree must be in the file and every tensor of the file in
 * the tree (TGC_ERR_INVALID_ARG naming the first one otherwise); with strict 0 the tensors
 * present in both are loaded, the tree's tensors the file lacks keep their values and the
 * file's tensors the tree lacks are ignored (tgc_module_load_report lists both). A missing,
 * truncated, damaged (a tensor that does not match the checksum tgc_module_save wrote) or
 * malformed file is TGC_ERR_IO; a shape mismatch is TGC_ERR_SHAPE and an unsupported dtype
 * TGC_ERR_DTYPE, strict or not, each naming the tensor. On any error nothing is changed: the
 * whole file is checked before the first tensor is written. Bumps the versions of the
 * tensors it writes. */
TGC_API tgc_status tgc_module_load(tgc_module *m, const char *path, int strict);

/* What a load matched: the tree's tensors that the file lacks ("missing", in tree order) and
 * the file's tensors that the tree lacks ("unexpected", in the file's order), PyTorch's
 * missing_keys and unexpected_keys. */
typedef struct tgc_load_report tgc_load_report;
/* tgc_module_load that also returns *report (free it with tgc_load_report_free), on success
 * and on a strict load refused for missing or unexpected names (so that all of them can be
 * listed); on any other error *report is NULL. report NULL: as tgc_module_load. */
TGC_API tgc_status tgc_module_load_report(tgc_module *m, const char *path, int strict,
                                          tgc_load_report **report);
/* Counts and names (i from 0; NULL, with TGC_ERR_INVALID_ARG, out of range). The names belong
 * to the report: valid until tgc_load_report_free. A report is read-only: any thread may read
 * it at once. */
TGC_API int tgc_load_report_num_missing(const tgc_load_report *r);
TGC_API const char *tgc_load_report_missing(const tgc_load_report *r, int i);
TGC_API int tgc_load_report_num_unexpected(const tgc_load_report *r);
TGC_API const char *tgc_load_report_unexpected(const tgc_load_report *r, int i);
TGC_API void tgc_load_report_free(tgc_load_report *r);

#ifdef __cplusplus
}
#endif
#endif
