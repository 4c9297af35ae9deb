/* Public structs of the caller's size. A struct that may grow reaches the library with the
 * size the caller's header gave it (struct_size, or the size argument of a *_sized entry
 * point), and the library reads and writes only that many bytes:
 *  - a size below the end of the struct's first field is TGC_ERR_INVALID_ARG;
 *  - an older, smaller struct is read as far as it goes; the fields after it keep the
 *    defaults the destination was filled with;
 *  - a newer, larger struct is accepted when every byte after the ones this library knows is
 *    zero (the newer fields left at their defaults), else TGC_ERR_UNSUPPORTED;
 *  - a struct written for the caller gets the fields it holds, and zeros after the ones this
 *    library knows.
 * A field added to a public struct therefore goes at its end, must start at or after the
 * struct's previous size (never in its old tail padding), must mean "default" when zero (or
 * have its default filled by the struct's _default function), and is padded explicitly (a
 * reserved field) where the compiler would otherwise leave padding after the previous size. */
#ifndef TGC_SUPPORT_STRUCT_SIZE_H
#define TGC_SUPPORT_STRUCT_SIZE_H

#include <stddef.h>

#include "tgc/tensor.h"

/* The offset just past field f of struct type T: the smallest size that holds it. */
#define TGC_FIELD_END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

/* Reads the caller's struct src of size bytes into dst (known bytes, holding the defaults):
 * min(size, known) bytes are copied. min is the smallest size accepted (TGC_FIELD_END of the
 * first field). fn is the public function and what names the size in the messages
 * ("cfg->struct_size", "opts_size"); hint is advice appended to the first one (may be ""). */
tgc_status tgc_struct_read(const char *fn, const char *what, const char *hint, void *dst,
                           size_t known, size_t min, const void *src, size_t size);

/* The options struct of a *_sized entry point (zero fields mean defaults): the caller's
 * opts_size bytes of src into dst, which holds zeros. */
#define TGC_READ_OPTS(fn, T, first_field, dst, src, opts_size)                                     \
    tgc_struct_read(fn, "opts_size", "", dst, sizeof(T), TGC_FIELD_END(T, first_field), src,       \
                    opts_size)

/* Writes src (known bytes) to the caller's struct dst of size bytes: min(size, known) bytes,
 * then zeros up to size. A size below min writes nothing: TGC_ERR_INVALID_ARG. */
tgc_status tgc_struct_write(const char *fn, const char *what, void *dst, size_t size,
                            const void *src, size_t known, size_t min);

#endif
