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
 * Writes of a model function being traced are refused: a checkpoint is loaded eagerly.
 *
 * Optimizer files carry the metadata "format": "tgc-optim", "kind" (tgc_optim_kind) and
 * "hparams" (tgc_optim_hparams' JSON). Loading checks the format and the kind; the
 * hyperparameters are a record for readers (the learning rate itself is the "lr" state
 * tensor, which loads like the others).
 *
 * Threading: as the module and the optimizer (no concurrent use while saving or loading). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
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

/* The tree's tensors in pre-order (tgc_module_flat's order) with their dotted paths, read
 * from the lines of tgc_module_describe ("self.fc1.weight: param f32[4, 3] cpu"): a member
 * name holds no ' ', ':', '=' or newline, so the path ends at the first of those, and a
 * tensor's line is the one where it is ':'. Each path is looked up again and must give the
 * flat list's tensor at that position. */
static tgc_status module_items(const char *fn, const tgc_module *cm, ckpt_list *out)
{
    *out = (ckpt_list){0};
    tgc_module *m = (tgc_module *)cm; /* the flat list is a cache of the tree */
    int n;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    if (!flat && tgc_module_num_tensors(m) > 0)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    char *desc = tgc_module_describe(m);
    out->items = calloc((size_t)n + 1, sizeof *out->items);
    if (!desc || !out->items) {
        free(desc);
        free(out->items);
        out->items = NULL;
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    }
    tgc_status st = TGC_OK;
    for (char *line = desc; *line && st == TGC_OK;) {
        char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        size_t k = strcspn(line, " :=\n");
        if (k < len && line[k] == ':' && k > 5 && strncmp(line, "self.", 5) == 0) {
            if (out->n == n) {
                st = tgc_set_error(TGC_ERR_INTERNAL, "%s: the module lists more tensors than %d",
                                   fn, n);
                break;
            }
            char *name = malloc(k - 4);
            if (!name) {
                st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
                break;
            }
            memcpy(name, line + 5, k - 5);
            name[k - 5] = 0;
            out->items[out->n] = (ckpt_item){name, flat[out->n]};
            if (lookup_path(m, name) != flat[out->n])
                st = tgc_set_error(TGC_ERR_INTERNAL,
                                   "%s: tensor %d of the module, '%s', is not found under its "
                                   "name (a path over 500 bytes?)",
                                   fn, out->n, name);
            out->n++;
        }
        line += len + (eol ? 1 : 0);
    }
    free(desc);
    if (st == TGC_OK && out->n != n)
        st = tgc_set_error(TGC_ERR_INTERNAL, "%s: found %d named tensors of %d", fn, out->n, n);
    if (st != TGC_OK)
        list_free(out);
    return st;
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
    for (int k = 0; k < f->n_entries; k++) {
        int found = 0;
        for (int i = 0; i < l->n && !found; i++)
            found = entries[i] == &f->entries[k];
        if (!found) {
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
    if (tgc_trace_current())
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: called while a model function is traced; load checkpoints "
                             "eagerly, before tgc_call",
                             fn);
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
