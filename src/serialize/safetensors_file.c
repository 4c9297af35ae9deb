/* Reading safetensors files into new tensors (tgc/safetensors.h), over the one strict reader
 * of serialize/safetensors.h: the handle is a checked tgc_st_file. */
#include <stdlib.h>
#include <string.h>

#include "serialize/safetensors.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/safetensors.h"

struct tgc_safetensors {
    tgc_st_file f;
};

tgc_status tgc_safetensors_open(const char *path, tgc_safetensors **out)
{
    const char *fn = "tgc_safetensors_open";
    if (out)
        *out = NULL;
    if (!path || !out)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !path ? "path" : "out");
    tgc_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    tgc_status s = tgc_st_read(fn, path, &st->f);
    if (s != TGC_OK) {
        free(st);
        return s;
    }
    *out = st;
    return TGC_OK;
}

void tgc_safetensors_close(tgc_safetensors *st)
{
    if (!st)
        return;
    tgc_st_close(&st->f);
    free(st);
}

int tgc_safetensors_num_tensors(const tgc_safetensors *st)
{
    if (!st) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_safetensors_num_tensors: the handle is NULL");
        return -1;
    }
    return st->f.n_entries;
}

const char *tgc_safetensors_name(const tgc_safetensors *st, int i)
{
    const char *fn = "tgc_safetensors_name";
    if (!st || i < 0 || i >= st->f.n_entries) {
        if (!st)
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: the handle is NULL", fn);
        else
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: index %d is out of range ('%s' has %d tensors)",
                          fn, i, st->f.path, st->f.n_entries);
        return NULL;
    }
    return st->f.entries[st->f.by_name[i]].name;
}

/* The entry named name, or NULL with the error set (fn). */
static const tgc_st_entry *entry(const tgc_safetensors *st, const char *name, const char *fn)
{
    if (!st || !name) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !st ? "the handle" : "name");
        return NULL;
    }
    const tgc_st_entry *e = tgc_st_find(&st->f, name);
    if (!e)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s' has no tensor '%.200s' (%d tensors)", fn,
                      st->f.path, name, st->f.n_entries);
    return e;
}

static tgc_status unsupported(const tgc_safetensors *st, const tgc_st_entry *e, const char *fn)
{
    return tgc_set_error(TGC_ERR_DTYPE,
                         "%s: '%s': tensor '%.200s' is %s, a dtype libtgc does not have (F32, "
                         "F16, BF16, F64, I32, I64, BOOL)",
                         fn, st->f.path, e->name, e->dtype_name);
}

tgc_status tgc_safetensors_tensor_info(const tgc_safetensors *st, const char *name,
                                       tgc_dtype *dtype, int *ndim, int64_t *shape)
{
    const char *fn = "tgc_safetensors_tensor_info";
    const tgc_st_entry *e = entry(st, name, fn);
    if (!e)
        return tgc_last_status();
    if (ndim)
        *ndim = e->ndim;
    if (shape)
        memcpy(shape, e->shape, (size_t)e->ndim * sizeof *shape);
    if (!e->supported)
        return unsupported(st, e, fn);
    if (dtype)
        *dtype = e->dtype;
    return TGC_OK;
}

tgc_tensor *tgc_safetensors_read(const tgc_safetensors *st, const char *name, tgc_device dev)
{
    const char *fn = "tgc_safetensors_read";
    const tgc_st_entry *e = entry(st, name, fn);
    if (!e)
        return NULL;
    if (!e->supported) {
        unsupported(st, e, fn);
        return NULL;
    }
    if (tgc_trace_current()) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: called while a model function is traced (it would run once, at trace "
                      "time); read files eagerly, outside tgc_call",
                      fn);
        return NULL;
    }
    if (!tgc_device_check(fn, dev))
        return NULL;
    tgc_tensor *host = tgc_tensor_new_checked(fn, e->shape, e->ndim, e->dtype, tgc_cpu());
    if (!host)
        return NULL;
    if (e->end > e->begin)
        memcpy(tgc_host_data(host), tgc_st_data(&st->f, e), (size_t)(e->end - e->begin));
    if (dev.type == TGC_DEVICE_CPU)
        return host;
    tgc_tensor *t = tgc_tensor_new_checked(fn, e->shape, e->ndim, e->dtype, dev);
    if (t && tgc_tensor_copy(t, host) != TGC_OK) {
        tgc_tensor_free(t);
        t = NULL;
    }
    tgc_tensor_free(host);
    return t;
}

const char *tgc_safetensors_metadata(const tgc_safetensors *st, const char *key)
{
    const char *fn = "tgc_safetensors_metadata";
    if (!st || !key) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !st ? "the handle" : "key");
        return NULL;
    }
    const char *v = tgc_st_meta_get(&st->f, key);
    if (!v)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s' has no metadata key '%.200s'", fn, st->f.path,
                      key);
    return v;
}

int tgc_safetensors_num_metadata(const tgc_safetensors *st)
{
    if (!st) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_safetensors_num_metadata: the handle is NULL");
        return -1;
    }
    return st->f.n_meta;
}

const char *tgc_safetensors_metadata_key(const tgc_safetensors *st, int i)
{
    const char *fn = "tgc_safetensors_metadata_key";
    if (!st || i < 0 || i >= st->f.n_meta) {
        if (!st)
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: the handle is NULL", fn);
        else
            tgc_set_error(TGC_ERR_INVALID_ARG,
                          "%s: index %d is out of range ('%s' has %d metadata keys)", fn, i,
                          st->f.path, st->f.n_meta);
        return NULL;
    }
    return st->f.meta[i].key;
}
