/* Data-parallel modules (include/tgc/dist.h, tgc_ddp): the structure check and the broadcast
 * at creation, and the gradient averaging a backward drives through the gradient hook the
 * wrapper puts on each parameter it averages (tgc_grad_hook, autograd/autograd.h):
 *  - ready: a parameter's gradient of this backward is final (autograd calls it as soon
 *    as the parameter's last contribution is added into its .grad). The
 *    parameters are in fixed buckets (reverse tree order, one dtype each); once every
 *    parameter of the next bucket in order is ready, its gradients are concatenated and its
 *    all-reduce (AVG) is started: queued on the communicator's stream, overlapping the rest
 *    of backward. Buckets start strictly in order, so every rank issues the same collectives
 *    in the same order.
 *  - finish: the remaining buckets start (their parameters got no gradient in
 *    this backward, and contribute their .grad as it is), then each bucket is joined
 *    (COMM_WAIT) and its averaged slices are written into the .grads (tgc_copy_).
 * Everything is ops, so inside a compiled function the same code records ALL_REDUCE and
 * COMM_WAIT nodes: the joins come after the whole backward in node order, the starts right
 * after the gradients they need.
 * With sync off (tgc_ddp_set_sync) the hook does nothing: gradients accumulate locally.
 * The wrapper watches its module and its process group (frontend/watch.h), which tell it
 * when they are freed. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dist/dist_impl.h"
#include "frontend/module_impl.h"
#include "frontend/watch.h"
#include "support/error.h"
#include "support/struct_size.h"
#include "tensor/copy.h"
#include "tgc/autograd.h"
#include "tgc/ops.h"

typedef struct bucket {
    int first, n;     /* params[first .. first + n) */
    int64_t numel;    /* elements of all its gradients */
    tgc_tensor *flat; /* this backward: the concatenated gradients (the all-reduce's input) */
    tgc_tensor *red;  /* and the started all-reduce */
} bucket;

struct tgc_ddp {
    tgc_grad_hook hook;     /* on each of params: autograd calls ready and finish */
    tgc_watch group_watch;  /* on pg's list: group_gone */
    tgc_watch module_watch; /* on m's list: module_gone */
    tgc_dist *pg;           /* NULL once the group was freed (group_gone) */
    tgc_module *m;          /* NULL once the module was freed (module_gone) */
    char *name;             /* the module's name, for messages after it is gone */
    int sync;
    tgc_tensor **params; /* the parameters that require a gradient, in bucket order */
    int n_params;
    int64_t *offset; /* per parameter: its first element in its bucket */
    int *bucket_of;
    uint8_t *ready;
    bucket *buckets;
    int n_buckets;
    int next_start; /* this backward: the next bucket to start */
    int started;    /* this backward handed it a gradient to average */
};

#define DDP_OF(p, member) ((tgc_ddp *)(void *)((char *)(p)-offsetof(tgc_ddp, member)))
static tgc_status hook_ready(tgc_grad_hook *h, tgc_tensor *leaf);
static tgc_status hook_finish(tgc_grad_hook *h);
static void group_gone(tgc_watch *w);
static void module_gone(tgc_watch *w);

/* ---- creation ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The hash every rank must agree on: names, kinds, dtypes, shapes and requires_grad of the
 * module tree's tensors (not their devices, which differ per rank). */
static uint64_t structure_hash(tgc_module *m)
{
    int n = 0;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    uint64_t h = fnv(0xcbf29ce484222325ull, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        char name[512];
        int is_buffer = 0;
        tgc_module_flat_name(m, i, name, sizeof name, &is_buffer);
        const tgc_tensor *t = flat[i];
        int meta[4] = {is_buffer, (int)t->dtype, t->ndim, (t->flags & TGC_T_REQUIRES_GRAD) != 0};
        h = fnv(h, name, strlen(name) + 1);
        h = fnv(h, meta, sizeof meta);
        h = fnv(h, t->shape, (size_t)t->ndim * sizeof(int64_t));
    }
    return h;
}

/* Every rank's hash against this one's: the maxima of (hi, lo, -hi, -lo) equal this rank's
 * values exactly when all ranks have the same hash. */
static tgc_status check_structure(tgc_dist *pg, tgc_module *m)
{
    uint64_t h = structure_hash(m);
    int64_t hi = (int64_t)(h >> 32), lo = (int64_t)(h & 0xffffffffu);
    int64_t mine[4] = {hi, lo, -hi, -lo}, all[4] = {0, 0, 0, 0};
    tgc_scope_push();
    tgc_tensor *t = tgc_from_data(mine, sizeof mine, (int64_t[]){4}, 1, TGC_I64, tgc_cpu());
    tgc_device dev = tgc_dist_device(pg);
    if (t && dev.type != TGC_DEVICE_CPU)
        t = tgc_to(t, dev);
    tgc_tensor *r = t ? tgc_dist_all_reduce_in("tgc_ddp_create", pg, t, TGC_DIST_MAX) : NULL;
    tgc_status st = r ? tgc_copy_to_host(r, all, sizeof all) : tgc_last_status();
    tgc_scope_pop();
    if (st != TGC_OK)
        return st;
    if (memcmp(mine, all, sizeof mine) != 0)
        return tgc_set_error(TGC_ERR_MISMATCH,
                             "tgc_ddp_create: the ranks disagree on the structure of module '%s' "
                             "(names, shapes, dtypes or requires_grad of its tensors; rank %d's "
                             "hash is %016llx)",
                             tgc_module_name(m), tgc_dist_rank(pg), (unsigned long long)h);
    return TGC_OK;
}

/* Rank 0's parameters and buffers to every rank. */
static tgc_status broadcast_all(tgc_dist *pg, tgc_module *m)
{
    int n = 0;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    tgc_status st = TGC_OK;
    for (int i = 0; i < n && st == TGC_OK; i++)
        st = tgc_dist_broadcast_in("tgc_ddp_create", pg, flat[i], 0);
    if (st == TGC_OK)
        st = tgc_comm_synchronize(tgc_dist_comm(pg), NULL);
    return st;
}

static tgc_status check_devices(tgc_dist *pg, tgc_module *m)
{
    int n = 0;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    tgc_device d = tgc_dist_device(pg);
    for (int i = 0; i < n; i++)
        if (!tgc_device_equal(flat[i]->device, d)) {
            char name[512], td[48], gd[48];
            tgc_module_flat_name(m, i, name, sizeof name, NULL);
            return tgc_set_error(TGC_ERR_DEVICE,
                                 "tgc_ddp_create: %s is on %s, the process group on %s "
                                 "(tgc_module_to the group's device first)",
                                 name, tgc_format_device(flat[i]->device, td, sizeof td),
                                 tgc_format_device(d, gd, sizeof gd));
        }
    return TGC_OK;
}

/* Buckets over the parameters in reverse tree order (about the order backward finishes
 * them), a new one at a dtype change or when the next would pass the cap. */
static tgc_status make_buckets(tgc_ddp *d, size_t first_cap, size_t cap)
{
    int n = 0;
    tgc_tensor *const *flat = tgc_module_flat(d->m, &n);
    d->params = calloc((size_t)(n ? n : 1), sizeof *d->params);
    d->offset = calloc((size_t)(n ? n : 1), sizeof *d->offset);
    d->bucket_of = calloc((size_t)(n ? n : 1), sizeof *d->bucket_of);
    d->ready = calloc((size_t)(n ? n : 1), 1);
    d->buckets = calloc((size_t)(n ? n : 1), sizeof *d->buckets);
    if (!d->params || !d->offset || !d->bucket_of || !d->ready || !d->buckets)
        return tgc_set_error(TGC_ERR_OOM, "tgc_ddp_create: out of memory");
    size_t bytes = 0;
    for (int i = n - 1; i >= 0; i--) {
        tgc_tensor *t = flat[i];
        if (!(t->flags & TGC_T_REQUIRES_GRAD))
            continue;
        size_t nb = (size_t)tgc_shape_numel(t->shape, t->ndim) * tgc_dtype_size(t->dtype);
        bucket *b = d->n_buckets ? &d->buckets[d->n_buckets - 1] : NULL;
        size_t limit = d->n_buckets == 1 ? first_cap : cap;
        if (!b || d->params[b->first]->dtype != t->dtype || (b->n && bytes + nb > limit)) {
            b = &d->buckets[d->n_buckets++];
            b->first = d->n_params;
            bytes = 0;
        }
        int k = d->n_params++;
        d->params[k] = t;
        d->offset[k] = b->numel;
        d->bucket_of[k] = d->n_buckets - 1;
        b->n++;
        b->numel += tgc_shape_numel(t->shape, t->ndim);
        bytes += nb;
    }
    return TGC_OK;
}

static void detach_params(tgc_ddp *d)
{
    for (int i = 0; i < d->n_params; i++)
        if (d->params[i] && d->params[i]->grad_hook == &d->hook)
            d->params[i]->grad_hook = NULL;
}

static void ddp_destroy(tgc_ddp *d)
{
    if (d->params)
        detach_params(d);
    free(d->name);
    free(d->params);
    free(d->offset);
    free(d->bucket_of);
    free(d->ready);
    free(d->buckets);
    free(d);
}

tgc_ddp *tgc_ddp_create_sized(tgc_dist *pg, tgc_module *m, const tgc_ddp_opts *user,
                              size_t opts_size)
{
    tgc_ddp_opts full = {0}; /* the fields past the caller's opts_size: 0, their defaults */
    if (user && TGC_READ_OPTS("tgc_ddp_create", tgc_ddp_opts, bucket_bytes, &full, user,
                              opts_size) != TGC_OK)
        return NULL;
    const tgc_ddp_opts *opts = user ? &full : NULL;
    if (!pg || !m) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_ddp_create: %s is NULL", !pg ? "pg" : "m");
        return NULL;
    }
    if (tgc_module_ddp(m)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_ddp_create: module '%s' is already data-parallel",
                      tgc_module_name(m));
        return NULL;
    }
    tgc_status st = tgc_comm_status(tgc_dist_comm(pg));
    if (st == TGC_OK)
        st = check_devices(pg, m);
    if (st == TGC_OK)
        st = check_structure(pg, m);
    if (st == TGC_OK && !(opts && opts->no_broadcast))
        st = broadcast_all(pg, m);
    if (st != TGC_OK) {
        tgc_error_prefix(st, "tgc_ddp_create");
        return NULL;
    }
    tgc_ddp *d = calloc(1, sizeof *d);
    const char *mname = tgc_module_name(m);
    if (d && (d->name = malloc(strlen(mname) + 1)))
        memcpy(d->name, mname, strlen(mname) + 1);
    if (!d || !d->name) {
        free(d);
        tgc_set_error(TGC_ERR_OOM, "tgc_ddp_create: out of memory");
        return NULL;
    }
    d->hook = (tgc_grad_hook){.ready = hook_ready, .finish = hook_finish};
    d->group_watch = (tgc_watch){.gone = group_gone};
    d->module_watch = (tgc_watch){.gone = module_gone};
    d->pg = pg;
    d->m = m;
    d->sync = 1;
    size_t cap = opts && opts->bucket_bytes ? opts->bucket_bytes : (size_t)25 << 20;
    size_t first = opts && opts->first_bucket_bytes ? opts->first_bucket_bytes : (size_t)1 << 20;
    st = make_buckets(d, first, cap);
    int watching_group = 0, watching_module = 0;
    if (st == TGC_OK)
        watching_group = (st = tgc_dist_watch(pg, &d->group_watch)) == TGC_OK;
    if (st == TGC_OK)
        watching_module = (st = tgc_module_watch(m, &d->module_watch)) == TGC_OK;
    if (st == TGC_OK)
        st = tgc_module_set_ddp(m, d, (uint64_t)tgc_comm_handle(tgc_dist_comm(pg)), 1);
    if (st != TGC_OK) {
        if (watching_group)
            tgc_dist_unwatch(pg, &d->group_watch);
        if (watching_module)
            tgc_module_unwatch(m, &d->module_watch);
        ddp_destroy(d);
        return NULL;
    }
    for (int i = 0; i < d->n_params; i++) {
        d->params[i]->grad_hook = &d->hook;
        d->params[i]->grad_hook_slot = i;
    }
    return d;
}

/* A wrapper whose module or group was freed: what is left of it can only be freed. */
static tgc_status check_live(const tgc_ddp *d, const char *fn)
{
    if (d->m && d->pg)
        return TGC_OK;
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "%s: the data-parallel wrapper of module '%s' is detached: its %s was "
                         "freed first (free the tgc_ddp before its module and its process group)",
                         fn, d->name, !d->m ? "module" : "process group");
}

tgc_status tgc_ddp_set_sync(tgc_ddp *d, int on)
{
    if (!d)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_ddp_set_sync: d is NULL");
    tgc_status st = check_live(d, "tgc_ddp_set_sync");
    if (st != TGC_OK)
        return st;
    if (d->started)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_ddp_set_sync: not during a backward");
    d->sync = on != 0;
    return tgc_module_set_ddp(d->m, d, (uint64_t)tgc_comm_handle(tgc_dist_comm(d->pg)), d->sync);
}

/* The queries' NULL check, as a tensor query's: keeps an earlier error (the NULL is usually
 * a failed tgc_ddp_create's), else TGC_ERR_INVALID_ARG. */
static int null_ddp(const tgc_ddp *d, const char *fn)
{
    if (d)
        return 0;
    tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: d is NULL", fn);
    return 1;
}

int tgc_ddp_sync(const tgc_ddp *d)
{
    return null_ddp(d, "tgc_ddp_sync") ? 0 : d->sync;
}

int tgc_ddp_num_buckets(const tgc_ddp *d)
{
    return null_ddp(d, "tgc_ddp_num_buckets") ? 0 : d->n_buckets;
}

int tgc_ddp_bucket_size(const tgc_ddp *d, int i)
{
    if (null_ddp(d, "tgc_ddp_bucket_size"))
        return 0;
    if (i < 0 || i >= d->n_buckets) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_ddp_bucket_size: bucket %d is out of range (the wrapper has %d)", i,
                      d->n_buckets);
        return 0;
    }
    return d->buckets[i].n;
}

tgc_dist *tgc_ddp_group(const tgc_ddp *d)
{
    if (null_ddp(d, "tgc_ddp_group"))
        return NULL;
    if (!d->pg)
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_ddp_group: the process group of module '%s''s wrapper was freed",
                      d->name);
    return d->pg;
}

/* tgc_dist_free of the group: a later backward through the wrapper fails (check_live). */
static void group_gone(tgc_watch *w)
{
    DDP_OF(w, group_watch)->pg = NULL;
}

/* tgc_module_free of the module's tree: its parameters forget the wrapper, which no backward
 * reaches from then on. */
static void module_gone(tgc_watch *w)
{
    tgc_ddp *d = DDP_OF(w, module_watch);
    detach_params(d); /* the parameters may outlive the module (a caller's reference) */
    d->m = NULL;
    d->n_params = 0;
}

void tgc_ddp_free(tgc_ddp *d)
{
    if (!d)
        return;
    if (d->m) {
        tgc_module_set_ddp(d->m, NULL, 0, 0);
        tgc_module_unwatch(d->m, &d->module_watch);
    }
    if (d->pg)
        tgc_dist_unwatch(d->pg, &d->group_watch);
    ddp_destroy(d);
}

/* ---- the gradient hook ---- */

/* Concatenates bucket b's gradients (a parameter without one gets zeros) and starts their
 * average. */
static tgc_status start_bucket(tgc_ddp *d, int b)
{
    bucket *bk = &d->buckets[b];
    tgc_tensor *small[16], **parts = bk->n <= 16 ? small : malloc((size_t)bk->n * sizeof *parts);
    if (!parts)
        return tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
    tgc_status st = TGC_OK;
    for (int i = 0; i < bk->n && st == TGC_OK; i++) {
        tgc_tensor *p = d->params[bk->first + i];
        st = tgc_autograd_ensure_grad(p);
        parts[i] = st == TGC_OK ? tgc_reshape(p->grad, (int64_t[]){-1}, 1) : NULL;
        if (st == TGC_OK && !parts[i])
            st = tgc_last_status();
    }
    if (st == TGC_OK) {
        bk->flat = bk->n == 1 ? tgc_contiguous(parts[0]) : tgc_cat(parts, bk->n, 0);
        bk->red =
            bk->flat ? tgc_dist_reduce_start("tgc_backward", d->pg, bk->flat, TGC_DIST_AVG) : NULL;
        if (!bk->red)
            st = tgc_last_status();
    }
    if (parts != small)
        free(parts);
    return st;
}

static tgc_status start_ready(tgc_ddp *d)
{
    tgc_status st = TGC_OK;
    while (st == TGC_OK && d->next_start < d->n_buckets) {
        const bucket *bk = &d->buckets[d->next_start];
        int all = 1;
        for (int i = 0; i < bk->n && all; i++)
            all = d->ready[bk->first + i];
        if (!all)
            break;
        st = start_bucket(d, d->next_start++);
    }
    return st;
}

static tgc_status hook_ready(tgc_grad_hook *h, tgc_tensor *leaf)
{
    tgc_ddp *d = DDP_OF(h, hook);
    int slot = leaf->grad_hook_slot;
    if (!d->sync || slot < 0 || slot >= d->n_params || d->params[slot] != leaf)
        return TGC_OK;
    if (!d->pg) /* averaging was asked for and cannot happen: say so, never skip it silently */
        return check_live(d, "tgc_backward");
    d->started = 1;
    d->ready[slot] = 1;
    return start_ready(d);
}

/* Starts what is left, joins every bucket and writes the averages into the .grads. */
static tgc_status finish(tgc_ddp *d)
{
    tgc_status st = TGC_OK;
    while (st == TGC_OK && d->next_start < d->n_buckets)
        st = start_bucket(d, d->next_start++);
    for (int b = 0; b < d->n_buckets && st == TGC_OK; b++) {
        bucket *bk = &d->buckets[b];
        tgc_tensor *avg = tgc_dist_reduce_wait(d->pg, bk->red, bk->flat);
        if (!avg)
            st = tgc_last_status();
        for (int i = 0; i < bk->n && st == TGC_OK; i++) {
            int k = bk->first + i;
            tgc_tensor *p = d->params[k];
            int64_t n = tgc_shape_numel(p->shape, p->ndim);
            tgc_tensor *s = tgc_slice(avg, 0, d->offset[k], d->offset[k] + n, 1);
            tgc_tensor *v = s ? tgc_reshape(s, p->shape, p->ndim) : NULL;
            st = v ? tgc_copy_(p->grad, v) : tgc_last_status();
        }
    }
    return st;
}

static tgc_status hook_finish(tgc_grad_hook *h)
{
    tgc_ddp *d = DDP_OF(h, hook);
    if (!d->started) /* sync off, or nothing of this wrapper's in the backward */
        return TGC_OK;
    tgc_status st = finish(d); /* even after an error: every rank joins what it started */
    d->started = 0;
    d->next_start = 0;
    memset(d->ready, 0, (size_t)d->n_params);
    for (int b = 0; b < d->n_buckets; b++)
        d->buckets[b].flat = d->buckets[b].red = NULL;
    return st;
}
