/* Checkpoints (tgc/module.h, tgc/autograd.h): a module's parameters and buffers, and an
 * optimizer's state, as safetensors files (serialize/safetensors.h).
 *
 * Saving reads each tensor to the host one at a time (from any device) and writes a
 * temporary file that is renamed onto the path. Loading happens in three phases, so that
 * a failure leaves every tensor as it was:
 *   1. read and check the whole file, then match it against the targets: each target
 *      present in the file has its shape, and a dtype libtgc has (equal, for optimizer
 *      state); with strict, every target is present and the file has no other name
 *      (without, the missing and the unexpected names are reported: tgc_load_report);
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
#include "train/optim_impl.h"
#include "serialize/safetensors.h"
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

/* The tree's tensors in pre-order (tgc_module_flat's order) with their dotted paths
 * (tgc_module_flat_name). Each path is looked up again (tgc_module_get takes dotted paths)
 * and must give the flat list's tensor at that position. */
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
        if (tgc_module_get(m, name) != flat[i])
            st = tgc_set_error(TGC_ERR_INTERNAL,
                               "%s: tensor %d of the module, '%s', is not found under its name", fn,
                               i, name);
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

/* What a load matched (tgc/module.h): names copied, in tree order and in the file's order. */
struct tgc_load_report {
    char **missing, **unexpected;
    int n_missing, n_unexpected;
};

void tgc_load_report_free(tgc_load_report *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_missing; i++)
        free(r->missing[i]);
    for (int i = 0; i < r->n_unexpected; i++)
        free(r->unexpected[i]);
    free(r->missing);
    free(r->unexpected);
    free(r);
}

static int report_add(char ***list, int *n, const char *name)
{
    size_t len = strlen(name) + 1;
    char *copy = malloc(len);
    char **p = copy ? realloc(*list, (size_t)(*n + 1) * sizeof *p) : NULL;
    if (!p) {
        free(copy);
        return 0;
    }
    memcpy(copy, name, len);
    p[(*n)++] = copy;
    *list = p;
    return 1;
}

/* The report of items against file f (entries[i] NULL: item i is missing); NULL on OOM. */
static tgc_load_report *make_report(const tgc_st_file *f, const ckpt_list *l,
                                    const tgc_st_entry **entries)
{
    tgc_load_report *r = calloc(1, sizeof *r);
    unsigned char *used = calloc((size_t)f->n_entries + 1, 1);
    int ok = r && used;
    for (int i = 0; ok && i < l->n; i++) {
        if (entries[i])
            used[entries[i] - f->entries] = 1;
        else
            ok = report_add(&r->missing, &r->n_missing, l->items[i].name);
    }
    for (int k = 0; ok && k < f->n_entries; k++) /* the file's order */
        if (!used[k])
            ok = report_add(&r->unexpected, &r->n_unexpected, f->entries[k].name);
    free(used);
    if (!ok) {
        tgc_load_report_free(r);
        return NULL;
    }
    return r;
}

/* A name from a file as a message quotes it. */
static const char *shown_name(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%.80s%s", name, strlen(name) > 80 ? "..." : "");
    return buf;
}

/* Phase 1: the file's entry for each item, checked (see the top of the file); entries[i]
 * NULL for an item the file lacks (an error when strict). *report gets what matched (on
 * success, and on a strict refusal for names); NULL when report is NULL. */
static tgc_status match_items(const char *fn, const tgc_st_file *f, const ckpt_list *l, int strict,
                              int exact_dtype, const tgc_st_entry **entries,
                              tgc_load_report **report)
{
    for (int i = 0; i < l->n; i++) {
        const char *name = l->items[i].name;
        const tgc_tensor *t = l->items[i].t;
        const tgc_st_entry *e = tgc_st_find(f, name);
        entries[i] = e;
        if (!e)
            continue;
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
    }
    tgc_load_report *r = make_report(f, l, entries);
    if (!r)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
    tgc_status st = TGC_OK;
    char nb[100];
    if (strict && r->n_missing)
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "%s: '%s': tensor '%s' is not in the file (%d of %d tensors missing); "
                           "load with strict 0 to load the others",
                           fn, f->path, shown_name(r->missing[0], nb, sizeof nb), r->n_missing,
                           l->n);
    else if (strict && r->n_unexpected)
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "%s: '%s': the file has tensor '%s', which is not here (%d of the "
                           "file's %d tensors are not here; load with strict 0 to ignore extra "
                           "names)",
                           fn, f->path, shown_name(r->unexpected[0], nb, sizeof nb),
                           r->n_unexpected, f->n_entries);
    if (report)
        *report = r;
    else
        tgc_load_report_free(r);
    return st;
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
                             int exact_dtype, file_check_fn check, void *check_ctx,
                             tgc_load_report **report)
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
        st = match_items(fn, f, l, strict, exact_dtype, entries, report);
    for (int i = 0; i < l->n && st == TGC_OK; i++)
        if (entries[i] && !(staged[i] = stage(fn, f, entries[i], l->items[i].t)))
            st = tgc_last_status();
    free(entries);
    tgc_st_close(f); /* the staged values are all that is needed now */
    /* Phase 3: same shapes, dtypes and devices. A failure here would be a device failing
     * between two copies: reported, with the tensors before it written. */
    tgc_no_grad_push();
    for (int i = 0; i < l->n && st == TGC_OK; i++)
        if (staged[i])
            st = tgc_copy_(l->items[i].t, staged[i]);
    tgc_no_grad_pop();
    for (int i = 0; i < l->n && staged; i++)
        tgc_tensor_free(staged[i]);
    free(staged);
    return st;
}

static tgc_status module_load(const char *fn, tgc_module *m, const char *path, int strict,
                              tgc_load_report **report)
{
    if (!m || !path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !m ? "module" : "path");
    ckpt_list l;
    tgc_status st = module_items(fn, m, &l);
    if (st != TGC_OK)
        return st;
    tgc_load_report *r = NULL;
    st = load_items(fn, path, &l, strict, 0, NULL, NULL, report ? &r : NULL);
    list_free(&l);
    /* the report outlives a refusal only when that refusal is about names */
    if (r && st != TGC_OK && !(strict && (r->n_missing || r->n_unexpected))) {
        tgc_load_report_free(r);
        r = NULL;
    }
    if (report)
        *report = r;
    return st;
}

tgc_status tgc_module_load(tgc_module *m, const char *path, int strict)
{
    return module_load("tgc_module_load", m, path, strict, NULL);
}

tgc_status tgc_module_load_report(tgc_module *m, const char *path, int strict,
                                  tgc_load_report **report)
{
    if (report)
        *report = NULL;
    return module_load("tgc_module_load_report", m, path, strict, report);
}

static int report_index(const tgc_load_report *r, int i, int n, const char *fn)
{
    if (!r)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: report is NULL", fn);
    else if (i < 0 || i >= n)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: index %d is out of range (%d names)", fn, i, n);
    return r && i >= 0 && i < n;
}

int tgc_load_report_num_missing(const tgc_load_report *r)
{
    if (!r)
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_load_report_num_missing: report is NULL");
    return r ? r->n_missing : -1;
}

int tgc_load_report_num_unexpected(const tgc_load_report *r)
{
    if (!r)
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_load_report_num_unexpected: report is NULL");
    return r ? r->n_unexpected : -1;
}

const char *tgc_load_report_missing(const tgc_load_report *r, int i)
{
    return report_index(r, i, r ? r->n_missing : 0, "tgc_load_report_missing") ? r->missing[i]
                                                                               : NULL;
}

const char *tgc_load_report_unexpected(const tgc_load_report *r, int i)
{
    return report_index(r, i, r ? r->n_unexpected : 0, "tgc_load_report_unexpected")
               ? r->unexpected[i]
               : NULL;
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
    st = load_items(fn, path, &l, 1, 1, check_optim_file, o, NULL);
    list_free(&l);
    return st;
}
