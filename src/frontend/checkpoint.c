/* Checkpoints (tgc/module.h, tgc/autograd.h): a module's parameters and buffers, and an
 * optimizer's state, as safetensors files (frontend/safetensors.h).
 *
 * Saving reads each tensor to the host one at a time (from any device) and writes a
 * temporary file that is renamed onto the path. Loading happens in three phases, so that
 * a failure leaves every tensor as it was:
 *   1. read and check the whole file, then match it against the targets: every target's
 *      name present, its shape equal, its dtype one libtgc has (and equal, for optimizer
 *      state); with strict, no name the targets lack;
 *   2. stage each target's new value in a fresh tensor of the target's dtype on its device
 *      (the dtype conversion and the device copy happen here, where they can still fail);
 *   3. write the staged values with tgc_copy_ (same dtype, same device), which bumps each
 *      target's version.
 * Saving and loading are refused while a model function is traced (they would run once, at
 * trace time): checkpoints are eager.
 *
 * Optimizer files carry the metadata "format": "tgc-optim", "kind" (tgc_optim_kind) and
 * "hparams" (tgc_optim_hparams' JSON). Loading checks the format and the kind; the
 * hyperparameters are a record for readers (the learning rate itself is the "lr" state
 * tensor, which loads like the others).
 *
 * Threading: as the module and the optimizer (no concurrent use while saving or loading). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
#include "frontend/optim_impl.h"
#include "frontend/safetensors.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"
#include "tgc/module.h"

/* A tensor a checkpoint saves or loads, under its name in the file. */
typedef struct ckpt_item {
    char *name;
    tgc_tensor *t;
} ckpt_item;

typedef struct ckpt_list {
    ckpt_item *items;
    int n;
} ckpt_list;

static void list_free(ckpt_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->items[i].name);
    free(l->items);
    *l = (ckpt_list){0};
}

/* ---- the module tree's tensors with their dotted names ---- */

/* Tensor `path` below m ("fc1.weight"), found through the public lookups; NULL if absent. */
static tgc_tensor *lookup_path(const tgc_module *m, const char *path)
{
    char part[512];
    for (;;) {
        const char *dot = strchr(path, '.');
        if (!dot)
            return tgc_module_get(m, path);
        size_t k = (size_t)(dot - path);
        if (k >= sizeof part)
            return NULL;
        memcpy(part, path, k);
        part[k] = 0;
        if (!(m = tgc_module_get_child(m, part)))
            return NULL;
        path = dot + 1;
    }
}

/* The tree's tensors in pre-order (tgc_module_flat's order) with their dotted paths
 * (tgc_module_flat_name). Each path is looked up again and must give the flat list's tensor
 * at that position (a path too long for the namer would not). */
static tgc_status module_items(const char *fn, const tgc_module *cm, ckpt_list *out)
{
    *out = (ckpt_list){0};
    tgc_module *m = (tgc_module *)cm; /* the flat list is a cache of the tree */
    int n;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    if (!flat && tgc_module_num_tensors(m) > 0)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    out->items = calloc((size_t)n + 1, sizeof *out->items);
    if (!out->items)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    tgc_status st = TGC_OK;
    for (int i = 0; i < n && st == TGC_OK; i++) {
        int len = tgc_module_flat_name(m, i, NULL, 0, NULL);
        char *name = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (len < 0) {
            st = tgc_set_error(TGC_ERR_INTERNAL, "%s: tensor %d of the module has no name", fn, i);
            break;
        }
        if (!name) {
            st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
            break;
        }
        tgc_module_flat_name(m, i, name, (size_t)len + 1, NULL);
        out->items[out->n++] = (ckpt_item){name, flat[i]};
        if (lookup_path(m, name) != flat[i])
            st = tgc_set_error(TGC_ERR_INTERNAL,
                               "%s: tensor %d of the module, '%s', is not found under its name "
                               "(a path over 500 bytes?)",
                               fn, i, name);
    }
    if (st != TGC_OK)
        list_free(out);
    return st;
}

/* Checkpoints are read and written eagerly: inside a trace, a save or a load would run
 * once, when the function is traced, not at each call. 0 with the error set while tracing. */
static int not_tracing(const char *fn)
{
    if (!tgc_trace_current())
        return 1;
    tgc_set_error(TGC_ERR_INVALID_ARG,
                  "%s: called while a model function is traced (it would run once, at trace "
                  "time); save and load checkpoints eagerly, outside tgc_call",
                  fn);
    return 0;
}

/* ---- saving ---- */

static tgc_status fill_item(void *ctx, int i, void *dst, size_t nbytes)
{
    const ckpt_list *l = ctx;
    return tgc_copy_to_host(l->items[i].t, dst, nbytes);
}

static tgc_status save_items(const char *fn, const char *path, const ckpt_list *l,
                             const tgc_st_meta *meta, int n_meta)
{
    if (!not_tracing(fn))
        return TGC_ERR_INVALID_ARG;
    tgc_st_out *outs = calloc((size_t)l->n + 1, sizeof *outs);
    if (!outs)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; i < l->n; i++) {
        const tgc_tensor *t = l->items[i].t;
        outs[i] = (tgc_st_out){l->items[i].name, t->dtype, t->ndim, t->shape};
    }
    tgc_status st = tgc_st_write(fn, path, outs, l->n, meta, n_meta, fill_item, (void *)l);
    free(outs);
    return st;
}

tgc_status tgc_module_save(const tgc_module *m, const char *path)
{
    const char *fn = "tgc_module_save";
    if (!m || !path || !*path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s", fn,
                             !m ? "module is NULL" : "path is NULL or empty");
    ckpt_list l;
    tgc_status st = module_items(fn, m, &l);
    if (st != TGC_OK)
        return st;
    st = save_items(fn, path, &l, NULL, 0);
    list_free(&l);
    return st;
}

/* ---- loading ---- */

/* Phase 1: the file's entry for each item, checked (see the top of the file). */
static tgc_status match_items(const char *fn, const tgc_st_file *f, const ckpt_list *l, int strict,
                              int exact_dtype, const tgc_st_entry **entries)
{
    for (int i = 0; i < l->n; i++) {
        const char *name = l->items[i].name;
        const tgc_tensor *t = l->items[i].t;
        const tgc_st_entry *e = tgc_st_find(f, name);
        if (!e) {
            int missing = 0;
            for (int k = i; k < l->n; k++)
                missing += tgc_st_find(f, l->items[k].name) == NULL;
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: '%s': tensor '%s' is not in the file (%d of %d tensors "
                                 "missing)",
                                 fn, f->path, name, missing, l->n);
        }
        if (!e->supported)
            return tgc_set_error(TGC_ERR_DTYPE,
                                 "%s: '%s': tensor '%s' is %s in the file, a dtype libtgc does "
                                 "not have (F32, F16, BF16, F64, I32, I64, BOOL)",
                                 fn, f->path, name, e->dtype_name);
        if (e->ndim != t->ndim ||
            memcmp(e->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) != 0) {
            char a[160], b[160];
            return tgc_set_error(TGC_ERR_SHAPE,
                                 "%s: '%s': tensor '%s' is %s in the file but %s here", fn, f->path,
                                 name, tgc_format_dims(e->shape, e->ndim, a, sizeof a),
                                 tgc_format_dims(t->shape, t->ndim, b, sizeof b));
        }
        if (exact_dtype && e->dtype != t->dtype)
            return tgc_set_error(TGC_ERR_DTYPE,
                                 "%s: '%s': tensor '%s' is %s in the file but %s here", fn, f->path,
                                 name, tgc_dtype_name(e->dtype), tgc_dtype_name(t->dtype));
        entries[i] = e;
    }
    if (!strict)
        return TGC_OK;
    unsigned char *used = calloc((size_t)f->n_entries + 1, 1);
    if (!used)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; i < l->n; i++)
        used[entries[i] - f->entries] = 1;
    for (int k = 0; k < f->n_entries; k++) {
        if (!used[k]) {
            free(used);
            char nb[100];
            snprintf(nb, sizeof nb, "%.80s%s", f->entries[k].name,
                     strlen(f->entries[k].name) > 80 ? "..." : "");
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: '%s': the file has tensor '%s', which is not here (%d "
                                 "tensors in the file, %d here; load with strict 0 to ignore "
                                 "extra names)",
                                 fn, f->path, nb, f->n_entries, l->n);
        }
    }
    free(used);
    return TGC_OK;
}

/* Phase 2: entry e's value as a tensor of t's dtype on t's device (in the innermost scope),
 * or NULL with the error set. */
static tgc_tensor *stage(const char *fn, const tgc_st_file *f, const tgc_st_entry *e,
                         const tgc_tensor *t)
{
    tgc_tensor *host = tgc_tensor_new_checked(fn, e->shape, e->ndim, e->dtype, tgc_cpu());
    if (!host)
        return NULL;
    if (e->end > e->begin)
        memcpy(tgc_host_data(host), tgc_st_data(f, e), (size_t)(e->end - e->begin));
    if (e->dtype == t->dtype && t->device.type == TGC_DEVICE_CPU)
        return host;
    tgc_tensor *dev = tgc_tensor_new_checked(fn, t->shape, t->ndim, t->dtype, t->device);
    if (dev && tgc_tensor_copy(dev, host) != TGC_OK) {
        tgc_tensor_free(dev);
        dev = NULL;
    }
    tgc_tensor_free(host);
    return dev;
}

/* Checks of a file's metadata before its tensors are matched (optimizer files). */
typedef tgc_status (*file_check_fn)(const char *fn, const tgc_st_file *f, void *ctx);

/* The three phases over the items, for the file at path. */
static tgc_status load_items(const char *fn, const char *path, const ckpt_list *l, int strict,
                             int exact_dtype, file_check_fn check, void *check_ctx)
{
    if (!not_tracing(fn))
        return TGC_ERR_INVALID_ARG;
    tgc_st_file file, *f = &file;
    tgc_status st = tgc_st_read(fn, path, f);
    if (st != TGC_OK)
        return st;
    if (check && (st = check(fn, f, check_ctx)) != TGC_OK) {
        tgc_st_close(f);
        return st;
    }
    const tgc_st_entry **entries = calloc((size_t)l->n + 1, sizeof *entries);
    tgc_tensor **staged = calloc((size_t)l->n + 1, sizeof *staged);
    if (!entries || !staged)
        st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    if (st == TGC_OK)
        st = match_items(fn, f, l, strict, exact_dtype, entries);
    for (int i = 0; i < l->n && st == TGC_OK; i++)
        if (!(staged[i] = stage(fn, f, entries[i], l->items[i].t)))
            st = tgc_last_status();
    free(entries);
    tgc_st_close(f); /* the staged values are all that is needed now */
    /* Phase 3: same shapes, dtypes and devices. A failure here would be a device failing
     * between two copies: reported, with the tensors before it written. */
    tgc_no_grad_push();
    for (int i = 0; i < l->n && st == TGC_OK; i++)
        st = tgc_copy_(l->items[i].t, staged[i]);
    tgc_no_grad_pop();
    for (int i = 0; i < l->n && staged; i++)
        tgc_tensor_free(staged[i]);
    free(staged);
    return st;
}

tgc_status tgc_module_load(tgc_module *m, const char *path, int strict)
{
    const char *fn = "tgc_module_load";
    if (!m || !path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !m ? "module" : "path");
    ckpt_list l;
    tgc_status st = module_items(fn, m, &l);
    if (st != TGC_OK)
        return st;
    st = load_items(fn, path, &l, strict, 0, NULL, NULL);
    list_free(&l);
    return st;
}

/* ---- optimizers ---- */

static tgc_status optim_items(const char *fn, const tgc_optim *o, ckpt_list *out)
{
    *out = (ckpt_list){0};
    int n = tgc_optim_num_state(o);
    if (n < 0)
        return tgc_last_status();
    out->items = calloc((size_t)n + 1, sizeof *out->items);
    if (!out->items)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        tgc_tensor *t = tgc_optim_state(o, i, &name);
        if (!t || !name) {
            list_free(out);
            return tgc_keep_error(TGC_ERR_INTERNAL, "%s: optimizer state %d is missing", fn, i);
        }
        size_t len = strlen(name) + 1;
        char *copy = malloc(len);
        if (!copy) {
            list_free(out);
            return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
        }
        memcpy(copy, name, len);
        out->items[out->n++] = (ckpt_item){copy, t};
    }
    return TGC_OK;
}

tgc_status tgc_optim_save(const tgc_optim *o, const char *path)
{
    const char *fn = "tgc_optim_save";
    if (!o || !path || !*path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s", fn,
                             !o ? "optimizer is NULL" : "path is NULL or empty");
    int len = tgc_optim_hparams(o, NULL, 0);
    char *hparams = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!hparams)
        return len < 0 ? tgc_keep_error(TGC_ERR_INTERNAL, "%s: no hyperparameters", fn)
                       : tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    tgc_optim_hparams(o, hparams, (size_t)len + 1);
    ckpt_list l;
    tgc_status st = optim_items(fn, o, &l);
    if (st == TGC_OK) {
        const tgc_st_meta meta[3] = {
            {"format", "tgc-optim"}, {"kind", (char *)tgc_optim_kind(o)}, {"hparams", hparams}};
        st = save_items(fn, path, &l, meta, 3);
        list_free(&l);
    }
    free(hparams);
    return st;
}

/* The file is an optimizer checkpoint of o's kind. */
/* The learning rate and the step count are options too: a file cannot bring a NaN, infinite
 * or non-positive "lr", nor a negative, infinite or fractional "step". Entries of another
 * dtype or shape are left to the name and shape checks. */
static tgc_status check_optim_scalars(const char *fn, const tgc_st_file *f)
{
    const char *names[2] = {"lr", "step"};
    for (int k = 0; k < 2; k++) {
        const tgc_st_entry *e = tgc_st_find(f, names[k]);
        if (!e || !e->supported || e->dtype != TGC_F32 || e->numel != 1)
            continue;
        float v;
        memcpy(&v, tgc_st_data(f, e), sizeof v);
        int ok = isfinite(v) && (k == 0 ? v > 0 : v >= 0 && v == floorf(v));
        if (!ok)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: '%s' holds %s %g; it must be finite and %s", fn, f->path,
                                 names[k], (double)v, k == 0 ? "> 0" : "a whole number >= 0");
    }
    return TGC_OK;
}

static tgc_status check_optim_file(const char *fn, const tgc_st_file *f, void *ctx)
{
    const tgc_optim *o = ctx;
    const char *format = tgc_st_meta_get(f, "format");
    if (!format || strcmp(format, "tgc-optim") != 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: '%s' is not an optimizer checkpoint (its metadata has no "
                             "\"format\": \"tgc-optim\"; tgc_optim_save writes those, and a "
                             "module's file loads with tgc_module_load)",
                             fn, f->path);
    const char *kind = tgc_st_meta_get(f, "kind"), *mine = tgc_optim_kind(o);
    if (!kind || strcmp(kind, mine) != 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: '%s' holds the state of %s optimizer, but this one is %s; load "
                             "it into an optimizer of the same kind",
                             fn, f->path, kind ? kind : "an unnamed", mine);
    return check_optim_scalars(fn, f);
}

tgc_status tgc_optim_load(tgc_optim *o, const char *path)
{
    const char *fn = "tgc_optim_load";
    if (!o || !path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !o ? "optimizer" : "path");
    ckpt_list l;
    tgc_status st = optim_items(fn, o, &l);
    if (st != TGC_OK)
        return st;
    st = load_items(fn, path, &l, 1, 1, check_optim_file, o);
    list_free(&l);
    return st;
}
