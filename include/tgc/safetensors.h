/* libtgc — reading safetensors files: list a file's tensors and metadata and read each
 * tensor into a new tensor, with no module or buffer prepared beforehand (checkpoints that
 * load into a module's own tensors are tgc_module_load in module.h).
 *
 * A file is read and checked whole at open, by the same strict reader tgc_module_load uses:
 * the header, every dtype, shape and offset, and the CRC-32 of each tensor where the file
 * carries one (tgc_module_save writes them into the metadata as "tgc.crc32:<name>"; files
 * of other writers, PyTorch's included, have none and are read as they are). A missing,
 * unreadable, malformed or damaged file is TGC_ERR_IO naming the path and the fault. The
 * whole file is held in memory until tgc_safetensors_close.
 *
 * Ownership: tgc_safetensors_open gives a handle freed by tgc_safetensors_close. Strings it
 * returns (names, metadata keys and values) belong to the handle: valid until it is closed.
 * tgc_safetensors_read returns a new tensor owned by the caller's innermost scope (as an op's
 * result), independent of the handle.
 *
 * Threading: every function but close only reads the handle: any number of threads may use
 * one handle at once; close must not overlap them. */
#ifndef TGC_SAFETENSORS_H
#define TGC_SAFETENSORS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_safetensors tgc_safetensors;

/* Opens and checks the file at path; *out is the handle, or NULL on error (TGC_ERR_IO, as
 * above; TGC_ERR_OOM; TGC_ERR_INVALID_ARG for a NULL argument). */
TGC_API tgc_status tgc_safetensors_open(const char *path, tgc_safetensors **out);
/* NULL is a no-op. */
TGC_API void tgc_safetensors_close(tgc_safetensors *st);

/* The file's tensors, i in [0, tgc_safetensors_num_tensors) in name order (strcmp, as
 * PyTorch's safe_open keys()). A NULL handle: -1; an index out of range: NULL; each with
 * TGC_ERR_INVALID_ARG. */
TGC_API int tgc_safetensors_num_tensors(const tgc_safetensors *st);
TGC_API const char *tgc_safetensors_name(const tgc_safetensors *st, int i);

/* The dtype and shape of tensor name: *ndim dims into shape[0..TGC_MAX_DIMS). Each output may
 * be NULL. A dtype of the format that libtgc has no dtype for (U8, I16, F8_E4M3, ...) is
 * TGC_ERR_DTYPE naming it, with *ndim and shape still filled; a name the file lacks is
 * TGC_ERR_INVALID_ARG. */
TGC_API tgc_status tgc_safetensors_tensor_info(const tgc_safetensors *st, const char *name,
                                               tgc_dtype *dtype, int *ndim, int64_t *shape);
/* Tensor name as a new contiguous tensor of the file's dtype and shape on dev (read on the
 * host, then copied to dev). NULL on error: a name the file lacks (TGC_ERR_INVALID_ARG), a
 * dtype libtgc lacks (TGC_ERR_DTYPE), dev unavailable (TGC_ERR_DEVICE), TGC_ERR_OOM, or a
 * call while a model function is traced (TGC_ERR_INVALID_ARG: files are read eagerly). */
TGC_API tgc_tensor *tgc_safetensors_read(const tgc_safetensors *st, const char *name,
                                         tgc_device dev);

/* The file's metadata ("__metadata__", string to string). tgc_safetensors_metadata gives the
 * value of key, or NULL with TGC_ERR_INVALID_ARG when the file has no such key. Keys are
 * listed by index in the file's order. */
TGC_API const char *tgc_safetensors_metadata(const tgc_safetensors *st, const char *key);
TGC_API int tgc_safetensors_num_metadata(const tgc_safetensors *st);
TGC_API const char *tgc_safetensors_metadata_key(const tgc_safetensors *st, int i);

#ifdef __cplusplus
}
#endif
#endif
