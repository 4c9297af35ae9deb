/* A function's automatic-dynamic state in a file (tgc_fn_save_state / tgc_fn_load_state), so
 * a run resumed from a checkpoint compiles the dims the interrupted run had made dynamic as
 * dynamic from its first call, and runs the variant the uninterrupted run would have run.
 *
 * The file is a safetensors file (the checkpoint format): metadata {"format": "tgc-fn-state",
 * "function": name}, and three I64 tensors over the inputs seen at compiles: "seen_ndim"
 * [n] (-1: not seen yet), "seen_sizes" [n, TGC_MAX_DIMS] (the sizes at the latest compile),
 * "dynamic_dims" [n] (bit d: dim d is symbolic from now on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serialize/safetensors.h"
#include "jit/jit.h"
#include "support/error.h"

#define STATE_FORMAT "tgc-fn-state"

typedef struct state_image {
    int n;
    int64_t *ndim, *sizes, *dyn;
} state_image;

static void image_free(state_image *s)
{
    free(s->ndim);
    free(s->sizes);
    free(s->dyn);
}

static tgc_status image_alloc(state_image *s, int n, const char *fn)
{
    s->n = n;
    s->ndim = calloc((size_t)n + 1, sizeof *s->ndim);
    s->sizes = calloc((size_t)n * TGC_MAX_DIMS + 1, sizeof *s->sizes);
    s->dyn = calloc((size_t)n + 1, sizeof *s->dyn);
    if (!s->ndim || !s->sizes || !s->dyn) {
        image_free(s);
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    }
    return TGC_OK;
}

static tgc_status fill_state(void *ctx, int i, void *dst, size_t nbytes)
{
    const state_image *s = ctx;
    const int64_t *src = i == 0 ? s->ndim : i == 1 ? s->sizes : s->dyn;
    memcpy(dst, src, nbytes);
    return TGC_OK;
}

tgc_status tgc_fn_save_state(const tgc_fn *f, const char *path)
{
    const char *fn = "tgc_fn_save_state";
    if (!f || !path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, f ? "path" : "function");
    tgc_fn *mf = (tgc_fn *)f; /* the lock only */
    pthread_mutex_lock(&mf->compile_lock);
    state_image s;
    tgc_status st = image_alloc(&s, f->n_seen, fn);
    if (st == TGC_OK)
        for (int i = 0; i < f->n_seen; i++) {
            s.ndim[i] = f->seen_ndim[i];
            memcpy(&s.sizes[(size_t)i * TGC_MAX_DIMS], f->seen[i], sizeof f->seen[i]);
            s.dyn[i] = f->dynamic_dims[i];
        }
    pthread_mutex_unlock(&mf->compile_lock);
    if (st != TGC_OK)
        return st;
    int64_t n = s.n, sizes_shape[2] = {n, TGC_MAX_DIMS};
    tgc_st_out outs[3] = {{"seen_ndim", TGC_I64, 1, &n},
                          {"seen_sizes", TGC_I64, 2, sizes_shape},
                          {"dynamic_dims", TGC_I64, 1, &n}};
    tgc_st_meta meta[2] = {{"format", STATE_FORMAT}, {"function", f->name}};
    st = tgc_st_write(fn, path, outs, 3, meta, 2, fill_state, &s);
    image_free(&s);
    return st;
}

/* The I64 entry name of shape [n] (cols 0) or [n, cols], copied into dst; n from the first. */
static tgc_status read_entry(const tgc_st_file *file, const char *name, int cols, int *n,
                             int64_t **dst, const char *fn)
{
    const tgc_st_entry *e = tgc_st_find(file, name);
    int want_ndim = cols ? 2 : 1;
    if (!e || e->dtype_name == NULL || !e->supported || e->dtype != TGC_I64 ||
        e->ndim != want_ndim || (cols && e->shape[1] != cols) || (*n >= 0 && e->shape[0] != *n) ||
        e->shape[0] > 4096)
        return tgc_set_error(TGC_ERR_IO,
                             "%s: %s is not a function state file: '%s' is missing or is not "
                             "an I64 tensor of the expected shape",
                             fn, file->path, name);
    *n = (int)e->shape[0];
    size_t bytes = (size_t)e->numel * sizeof(int64_t);
    *dst = malloc(bytes + sizeof(int64_t));
    if (!*dst)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    memcpy(*dst, tgc_st_data(file, e), bytes);
    return TGC_OK;
}

/* The arrays read from a file, checked: ndim in [-1, TGC_MAX_DIMS], sizes >= 0, dynamic bits
 * only below ndim. */
static tgc_status check_image(const state_image *s, const char *path, const char *fn)
{
    for (int i = 0; i < s->n; i++) {
        int64_t nd = s->ndim[i];
        int ok = nd >= -1 && nd <= TGC_MAX_DIMS && s->dyn[i] >= 0 &&
                 s->dyn[i] < (nd > 0 ? (int64_t)1 << nd : 1);
        for (int d = 0; ok && d < TGC_MAX_DIMS; d++)
            ok = s->sizes[(size_t)i * TGC_MAX_DIMS + d] >= 0;
        if (!ok)
            return tgc_set_error(TGC_ERR_IO,
                                 "%s: %s: the state of input %d is malformed (rank %lld, dynamic "
                                 "dims %#llx)",
                                 fn, path, i, (long long)nd, (unsigned long long)s->dyn[i]);
    }
    return TGC_OK;
}

static tgc_status read_state(const char *path, const char *name, state_image *s, const char *fn)
{
    tgc_st_file file;
    tgc_status st = tgc_st_read(fn, path, &file);
    if (st != TGC_OK)
        return st;
    const char *format = tgc_st_meta_get(&file, "format");
    const char *of = tgc_st_meta_get(&file, "function");
    if (!format || strcmp(format, STATE_FORMAT) != 0 || !of)
        st = tgc_set_error(TGC_ERR_IO,
                           "%s: %s is not a function state file (its metadata has no \"format\": "
                           "\"" STATE_FORMAT "\" and \"function\"; tgc_fn_save_state writes one)",
                           fn, path);
    else if (strcmp(of, name) != 0)
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "%s: %s holds the state of function '%s', not of '%s'", fn, path, of,
                           name);
    int n = -1;
    *s = (state_image){0};
    if (st == TGC_OK)
        st = read_entry(&file, "seen_ndim", 0, &n, &s->ndim, fn);
    if (st == TGC_OK)
        st = read_entry(&file, "seen_sizes", TGC_MAX_DIMS, &n, &s->sizes, fn);
    if (st == TGC_OK)
        st = read_entry(&file, "dynamic_dims", 0, &n, &s->dyn, fn);
    s->n = n < 0 ? 0 : n;
    if (st == TGC_OK)
        st = check_image(s, path, fn);
    tgc_st_close(&file);
    if (st != TGC_OK)
        image_free(s);
    return st;
}

tgc_status tgc_fn_load_state(tgc_fn *f, const char *path)
{
    const char *fn = "tgc_fn_load_state";
    if (!f || !path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, f ? "path" : "function");
    state_image s;
    tgc_status st = read_state(path, f->name, &s, fn);
    if (st != TGC_OK)
        return st;
    int64_t(*seen)[TGC_MAX_DIMS] = calloc((size_t)s.n + 1, sizeof *seen);
    int *nd = calloc((size_t)s.n + 1, sizeof *nd);
    uint8_t *dd = calloc((size_t)s.n + 1, 1);
    if (!seen || !nd || !dd)
        st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; st == TGC_OK && i < s.n; i++) {
        memcpy(seen[i], &s.sizes[(size_t)i * TGC_MAX_DIMS], sizeof seen[i]);
        nd[i] = (int)s.ndim[i];
        dd[i] = (uint8_t)s.dyn[i];
    }
    image_free(&s);
    pthread_mutex_lock(&f->compile_lock);
    pthread_mutex_lock(&f->lock);
    int n_variants = f->n_variants;
    pthread_mutex_unlock(&f->lock);
    if (st == TGC_OK && n_variants > 0)
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "%s: '%s' has compiled %d variant%s already; load its state before "
                           "its first tgc_call",
                           fn, f->name, n_variants, n_variants == 1 ? "" : "s");
    if (st == TGC_OK) {
        free(f->seen);
        free(f->seen_ndim);
        free(f->dynamic_dims);
        f->seen = seen;
        f->seen_ndim = nd;
        f->dynamic_dims = dd;
        f->n_seen = s.n;
        seen = NULL;
        nd = NULL;
        dd = NULL;
    }
    pthread_mutex_unlock(&f->compile_lock);
    free(seen);
    free(nd);
    free(dd);
    return st;
}
