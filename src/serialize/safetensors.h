/* The safetensors file format: a strict reader and a writer.
 *
 * A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 *   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * (padded with spaces), then the data: each tensor's row-major little-endian bytes at
 * [begin, end) of it, tensors back to back with no gap, in any order.
 *
 * The reader trusts nothing in a file: the header length, the JSON, every dtype, shape and
 * offset are checked before a caller sees an entry (what safetensors' own loader rejects,
 * and more: duplicate names and keys, shapes over TGC_MAX_NUMEL or TGC_MAX_DIMS, BOOL bytes
 * other than 0 and 1), each failure TGC_ERR_IO with a message naming the file and what is
 * wrong. Dtypes of the format that libtgc has no dtype for (U8, F8_E4M3, ...) are read and
 * checked like the others; their entries have `supported` 0.
 *
 * Ownership: tgc_st_read / tgc_st_parse fill a tgc_st_file that owns its memory (the file's
 * bytes, names, metadata) until tgc_st_close. Threading: no shared state; a tgc_st_file is
 * used by one thread at a time. */
#ifndef TGC_FRONTEND_SAFETENSORS_H
#define TGC_FRONTEND_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tgc/tensor.h"

/* The writer puts the CRC-32 (zlib's) of each tensor's bytes into the metadata, under this
 * prefix and the tensor's name ("tgc.crc32:fc.weight": "1c291ca3"); the reader checks every
 * such value against its tensor (a mismatch is TGC_ERR_IO naming the tensor). Files without
 * them, as PyTorch writes, are read unchecked. */
#define TGC_ST_CRC_PREFIX "tgc.crc32:"

/* The largest header the reader accepts (safetensors' own limit). */
#define TGC_ST_MAX_HEADER ((uint64_t)100000000)

typedef struct tgc_st_entry {
    char *name;             /* UTF-8, no NUL inside */
    const char *dtype_name; /* the file's spelling: "F32", "U8", ... (static) */
    int supported;          /* 1 when dtype is a libtgc dtype */
    tgc_dtype dtype;        /* valid when supported */
    int ndim;
    int64_t shape[TGC_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* bytes, relative to the data section */
} tgc_st_entry;

typedef struct tgc_st_meta {
    char *key, *value;
} tgc_st_meta;

typedef struct tgc_st_file {
    char *path;           /* for messages */
    unsigned char *bytes; /* the whole file */
    size_t size;
    const unsigned char *data; /* the data section: bytes + 8 + N */
    uint64_t data_size;
    tgc_st_entry *entries; /* in header order */
    int n_entries;
    int *by_name; /* indexes of entries in name order (tgc_st_find) */
    tgc_st_meta *meta;
    int n_meta;
} tgc_st_file;

/* Reads and checks the whole file. On error (TGC_ERR_IO: missing, unreadable or malformed;
 * TGC_ERR_OOM) *f is left empty (tgc_st_close on it is a no-op) and the message names path
 * (NULL path: TGC_ERR_INVALID_ARG). fn names the caller in messages. */
tgc_status tgc_st_read(const char *fn, const char *path, tgc_st_file *f);
/* The same checks on a file image in memory (copied); `path` only names it in messages. */
tgc_status tgc_st_parse(const char *fn, const char *path, const void *bytes, size_t size,
                        tgc_st_file *f);
void tgc_st_close(tgc_st_file *f);

/* The entry named name, or NULL. */
const tgc_st_entry *tgc_st_find(const tgc_st_file *f, const char *name);
/* The value of metadata key, or NULL. */
const char *tgc_st_meta_get(const tgc_st_file *f, const char *key);
/* The host address of an entry's bytes (inside f->bytes; unaligned in general). */
static inline const void *tgc_st_data(const tgc_st_file *f, const tgc_st_entry *e)
{
    return f->data + e->begin;
}

/* ---- writing ---- */

typedef struct tgc_st_out {
    const char *name; /* unique, non-empty, no NUL */
    tgc_dtype dtype;
    int ndim;
    const int64_t *shape;
} tgc_st_out;

/* Fills dst with the bytes of tensor i (row-major, nbytes = numel * dtype size). */
typedef tgc_status (*tgc_st_fill_fn)(void *ctx, int i, void *dst, size_t nbytes);

/* Writes n tensors (data asked of fill one at a time, in order), the metadata pairs
 * meta[0..n_meta) (keys unique, none starting with TGC_ST_CRC_PREFIX) and each tensor's
 * checksum to a temporary file beside path ("<path>.tmp.<pid>.<n>"), fsyncs it, renames it
 * onto path and fsyncs the directory: on any failure before the rename (TGC_ERR_IO naming
 * path and the reason, or fill's status) no file is left and an existing file at path is
 * untouched. Temporary files of earlier saves to path whose process is gone and that were not
 * written for a minute (a killed save's leftovers) are removed first. */
tgc_status tgc_st_write(const char *fn, const char *path, const tgc_st_out *ts, int n,
                        const tgc_st_meta *meta, int n_meta, tgc_st_fill_fn fill, void *ctx);

#endif
