/* The executor of compiled plans (plan.h), the same for every compiled backend: binds the
 * call's inputs (a contiguous copy of a strided one, since kernels index inputs as
 * row-major), sizes the arena slots from the call's symbol values, runs the steps (kernels
 * through the backend's launch / run_template, opaque nodes on interp through one staging
 * step), writes back inputs the graph writes in place, and hands out the outputs.
 *
 * Thread-safe: calls share the plan; the arena kept between calls is per stream (plan.h:
 * a device's launches are asynchronous, so calls on two streams must never share one) and
 * taken with a trylock (a concurrent call on the same stream allocates a private one, on
 * that stream). The per-call path allocates the same few
 * arrays whatever the number of steps; a step allocates nothing unless it has more than 64
 * buffers or 256 size slots. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/interp/interp.h"
#include "backend/plan.h"
#include "ir/view_access.h"
#include "ir/view_geometry.h"
#include "runtime/philox.h"
#include "support/config_env.h"
#include "support/error.h"
#include "support/log.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/ops.h"

tgc_tensor *tgc_exec_input(const tgc_graph *g, const tgc_node *nd, const tgc_exec_args *x)
{
    int64_t idx = nd->attrs.input.index;
    switch ((tgc_bind_kind)nd->attrs.input.kind) {
    case TGC_BIND_ARG: return idx < x->n_args ? x->args[idx] : NULL;
    case TGC_BIND_PARAM: return idx < x->n_params ? x->params[idx] : NULL;
    case TGC_BIND_CAPTURED:
    case TGC_BIND_CONST: return idx < x->n_bound ? x->bound[idx] : NULL;
    case TGC_BIND_FOLDED: return idx >= 0 && idx < g->n_consts ? g->consts[idx] : NULL;
    case TGC_BIND_GRAD: return idx < x->n_params ? x->params[idx]->grad : NULL;
    }
    return NULL;
}

typedef struct run_ctx {
    tgc_plan *p;
    const tgc_exec_args *x;
    tgc_tensor **vals;
    tgc_storage *arena;
    int64_t *slot_off;    /* byte offset of each slot in the arena */
    int capturing;        /* the launches are being recorded (replay.c): nothing may sync */
    tgc_kept_cache *kept; /* the kept values (kept.c) of the stream's arena entry or of a
                           * recording; NULL: none (a private arena) */
} run_ctx;

static tgc_tensor *wrap(tgc_storage *s, int64_t byte_off, tgc_dtype dt, const int64_t *shape,
                        int ndim)
{
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    tgc_contiguous_strides(t->shape, ndim, t->strides);
    t->offset = byte_off / (int64_t)tgc_dtype_size(dt);
    t->storage = s;
    tgc_storage_ref(s);
    tgc_scope_adopt(t);
    return t;
}

static void eval_shape(const run_ctx *r, const tgc_vinfo *v, int64_t *shape)
{
    for (int d = 0; d < v->ndim; d++)
        shape[d] = tgc_sym_eval(r->p->g->syms, v->shape[d], r->x->symvals);
}

/* The tensor of value v: computed values are in vals; views are made on demand. */
static tgc_tensor *value_tensor(run_ctx *r, int32_t v)
{
    if (r->vals[v])
        return r->vals[v];
    const tgc_node *nd = &r->p->g->nodes[v];
    if (!tgc_is_view_op(nd->op))
        return NULL;
    tgc_tensor *src = value_tensor(r, nd->in[0]);
    if (!src)
        return NULL;
    int64_t shape[TGC_MAX_DIMS], strides[TGC_MAX_DIMS], off;
    eval_shape(r, &nd->out, shape);
    if (src->dtype == nd->out.dtype &&
        tgc_view_geometry(nd->op, src, &nd->attrs, shape, nd->out.ndim, strides, &off))
        r->vals[v] = tgc_tensor_view(src, shape, strides, nd->out.ndim, off);
    else /* no view of this layout (a reshape that must copy): interp copies, on the host */
        r->vals[v] =
            tgc_interp_run(nd->op, &src, 1, &nd->attrs, nd->out.dtype, shape, nd->out.ndim);
    return r->vals[v];
}

/* Kept value j (kept.c) over the stream's buffer for it. */
static tgc_tensor *kept_tensor(run_ctx *r, int j, const int64_t *shape)
{
    const tgc_vinfo *vi = &r->p->g->nodes[r->p->kept.values[j]].out;
    size_t bytes = (size_t)tgc_shape_numel(shape, vi->ndim) * tgc_dtype_size(vi->dtype);
    tgc_storage *s = tgc_kept_buffer(r->p, r->kept, j, bytes);
    return s ? wrap(s, 0, vi->dtype, shape, vi->ndim) : NULL;
}

/* Makes sure value v has a buffer (a planned slot, a kept value's or a fresh tensor). */
static tgc_tensor *ensure_buffer(run_ctx *r, int32_t v)
{
    if (r->vals[v])
        return r->vals[v];
    if (r->p->write_to && r->p->write_to[v] >= 0) /* stored straight into an ASSIGN's input */
        return r->vals[v] = r->vals[r->p->write_to[v]];
    const tgc_vinfo *vi = &r->p->g->nodes[v].out;
    int64_t shape[TGC_MAX_DIMS];
    eval_shape(r, vi, shape);
    int slot = r->p->mem.slot_of[v];
    int kept = r->kept && r->p->kept.index ? r->p->kept.index[v] : -1;
    if (kept >= 0)
        r->vals[v] = kept_tensor(r, kept, shape);
    else if (slot >= 0 && r->arena)
        r->vals[v] = wrap(r->arena, r->slot_off[slot], vi->dtype, shape, vi->ndim);
    else
        r->vals[v] = tgc_tensor_new(shape, vi->ndim, vi->dtype, r->p->device);
    return r->vals[v];
}

/* The random draws of kernel k (kir/abi.h): one tgc_rng_draw per draw, in the kernel's order
 * (graph node order; steps run draws in node order, fuse.c), its seed and base counter
 * written after the size slots, as interp's kernels draw at the same point of the call. */
static void fill_draws(run_ctx *r, const tgc_plan_kernel *pk, int64_t *sizes)
{
    const kir_kernel *k = pk->k;
    for (int i = 0; i < k->n_rands; i++) {
        int64_t n = tgc_sym_eval(r->p->g->syms, k->rands[i].numel, r->x->symvals);
        uint64_t seed, base = tgc_rng_draw((uint64_t)n, &seed);
        int w = kir_args_rand_word(&pk->slots, i);
        sizes[w] = (int64_t)seed;
        sizes[w + 1] = (int64_t)base;
    }
}

/* THE kernel binding: bufs[i] = element 0 of kernel buffer i (written buffers get a slot or a
 * fresh tensor, and their storage's version bumped), sizes[j] = size slot j of this call,
 * then the seed and base counter of each random draw (kir/abi.h). */
static tgc_status bind_kernel(run_ctx *r, const tgc_plan_kernel *pk, void **bufs, int64_t *sizes)
{
    const kir_kernel *k = pk->k;
    for (int b = 0; b < k->n_bufs; b++) {
        int32_t v = k->bufs[b].value;
        tgc_tensor *t = k->bufs[b].written ? ensure_buffer(r, v) : value_tensor(r, v);
        if (!t)
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: no buffer for value %%%d",
                                  r->p->backend->name, v);
        bufs[b] = tgc_device_ptr(t);
        if (k->bufs[b].written && t->storage)
            tgc_storage_bump(t->storage);
    }
    for (int j = 0; j < pk->slots.n; j++)
        sizes[j] = tgc_sym_eval(r->p->g->syms, pk->slots.dims[j], r->x->symvals);
    fill_draws(r, pk, sizes);
    return TGC_OK;
}

static tgc_status run_kernel(run_ctx *r, const tgc_plan_kernel *pk)
{
    void *bufs_small[64];
    int64_t sizes_small[256];
    const kir_kernel *k = pk->k;
    void **bufs = k->n_bufs <= 64 ? bufs_small : malloc((size_t)k->n_bufs * sizeof *bufs);
    int n_words = kir_args_words(&pk->slots);
    int64_t *sizes = n_words <= 256 ? sizes_small : malloc((size_t)n_words * sizeof *sizes);
    tgc_status st = TGC_OK;
    if (!bufs || !sizes)
        st = tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", r->p->backend->name);
    if (st == TGC_OK)
        st = bind_kernel(r, pk, bufs, sizes);
    tgc_launch_env env = {r->p->g->syms, r->x->symvals, r->p->n_threads,
                          r->p->device,  r->p->stream,  r->p->code};
    if (st == TGC_OK)
        st = k->kind == KIR_LOOP ? r->p->backend->launch(pk, bufs, sizes, &env)
                                 : r->p->backend->run_template(pk, bufs, sizes, &env);
    if (bufs != bufs_small)
        free(bufs);
    if (sizes != sizes_small)
        free(sizes);
    return st;
}

/* One storage of an input that batch member `member` touches (written or only read). */
typedef struct batch_use {
    const tgc_storage *storage;
    int member;
    int written;
} batch_use;

/* 1 when two members of a batch touch one input storage and one of them writes it: inputs
 * the compile took for distinct (a caller passing one tensor twice), which only launches in
 * plan order keep right. An open-addressing table of the inputs' storages. */
static int batch_inputs_overlap(run_ctx *r, const tgc_plan_kernel *ks, int n)
{
    const tgc_graph *g = r->p->g;
    int count = 0;
    for (int j = 0; j < n; j++)
        count += ks[j].k->n_bufs;
    size_t cap = 16;
    while (cap < 2 * (size_t)count)
        cap *= 2;
    batch_use *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return 1; /* unknown: the safe answer */
    int overlap = 0;
    for (int j = 0; j < n && !overlap; j++) {
        const kir_kernel *k = ks[j].k;
        for (int b = 0; b < k->n_bufs && !overlap; b++) {
            int32_t v = tgc_plan_root(r->p, k->bufs[b].value);
            if (g->nodes[v].op != TGC_OP_INPUT || !r->vals[v] || !r->vals[v]->storage)
                continue;
            const tgc_storage *st = r->vals[v]->storage;
            size_t h = ((uintptr_t)st >> 4) * 0x9e3779b97f4a7c15ull & (cap - 1);
            for (;; h = (h + 1) & (cap - 1)) {
                batch_use *e = &tab[h];
                if (!e->storage) {
                    *e = (batch_use){st, j, k->bufs[b].written != 0};
                    break;
                }
                if (e->storage != st)
                    continue;
                if (e->member != j && (e->written || k->bufs[b].written)) {
                    overlap = 1;
                    break;
                }
                /* the same member again, or reads only: keep probing for other entries */
                if (e->member == j) {
                    e->written |= k->bufs[b].written != 0;
                    break;
                }
            }
        }
    }
    free(tab);
    return overlap;
}

/* Batch ks[0..n) (plan.h): every member bound in plan order (their draws and buffers as
 * their own steps would take them), then one launch; when inputs overlap, launch_batch runs
 * the members one by one (the backend has the batch's kernels as one program, no others). */
static tgc_status run_batch(run_ctx *r, const tgc_plan_kernel *ks, int n)
{
    int words = 0, nb = 0;
    for (int j = 0; j < n; j++) {
        nb += ks[j].k->n_bufs;
        words += kir_args_words(&ks[j].slots);
    }
    /* one spare word each: a member without buffers or size words still passes a struct of
     * one word (render_c.c), read from where its arguments would start */
    void **bufs = calloc((size_t)nb + 1, sizeof *bufs);
    int64_t *sizes = calloc((size_t)words + 1, sizeof *sizes);
    void **bp = malloc((size_t)n * sizeof *bp);
    int64_t **sp = malloc((size_t)n * sizeof *sp);
    tgc_status st = TGC_OK;
    if (!bufs || !sizes || !bp || !sp)
        st = tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", r->p->backend->name);
    for (int j = 0, ob = 0, ow = 0; j < n && st == TGC_OK; j++) {
        bp[j] = &bufs[ob];
        sp[j] = &sizes[ow];
        st = bind_kernel(r, &ks[j], &bufs[ob], &sizes[ow]);
        ob += ks[j].k->n_bufs;
        ow += kir_args_words(&ks[j].slots);
    }
    tgc_launch_env env = {r->p->g->syms, r->x->symvals, r->p->n_threads,
                          r->p->device,  r->p->stream,  r->p->code};
    if (st == TGC_OK)
        st =
            r->p->backend->launch_batch(ks, n, (void *const *const *)bp, (const int64_t *const *)sp,
                                        batch_inputs_overlap(r, ks, n), &env);
    free(bufs);
    free(sizes);
    free(bp);
    free(sp);
    return st;
}

/* ASSIGN(dst, src): src's elements into dst's buffer (the bound input, or its contiguous copy
 * that write_back returns), on the plan's device: a device copy queued on the stream where
 * the backend can (so it is also recorded by a capture), else the tensor core's copy. */
static tgc_status run_assign(run_ctx *r, int32_t node)
{
    const tgc_plan *p = r->p;
    const tgc_node *nd = &p->g->nodes[node];
    tgc_tensor *dst = value_tensor(r, nd->in[0]), *src = value_tensor(r, nd->in[1]);
    if (!dst || !src)
        return tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: assign without its operands",
                              p->backend->name);
    tgc_status st;
    size_t nbytes = (size_t)tgc_shape_numel(dst->shape, dst->ndim) * tgc_dtype_size(dst->dtype);
    if (nbytes == 0 || tgc_device_ptr(dst) == tgc_device_ptr(src))
        st = TGC_OK;
    else if (p->device.type != TGC_DEVICE_CPU && p->backend->capture &&
             tgc_tensor_is_contiguous(dst) && tgc_tensor_is_contiguous(src) &&
             dst->dtype == src->dtype)
        st = p->backend->capture->copy_async(p->device, tgc_device_ptr(dst), tgc_device_ptr(src),
                                             nbytes);
    else
        st = tgc_tensor_copy(dst, src);
    if (st == TGC_OK && dst->storage)
        tgc_storage_bump(dst->storage);
    r->vals[node] = dst; /* an alias: nothing reads it */
    return st;
}

/* A node the backend has no kernel for, on interp. On a device other than the host, its
 * inputs are copied to the host and its result back (the compile named the op on the perf
 * channel); on the host the values are used in place. */
static tgc_status run_opaque_with(run_ctx *r, int32_t node, tgc_tensor **ins);

static tgc_status run_opaque(run_ctx *r, int32_t node)
{
    const tgc_plan *p = r->p;
    const tgc_node *nd = &p->g->nodes[node];
    if (nd->op == TGC_OP_ASSIGN)
        return run_assign(r, node);
    /* cat and stack take any number of inputs (a data-parallel bucket: one per parameter) */
    tgc_tensor *ins_small[8], **ins = ins_small;
    if (nd->n_in > 8 && !(ins = malloc((size_t)nd->n_in * sizeof *ins)))
        return tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", p->backend->name);
    tgc_status st = run_opaque_with(r, node, ins);
    if (ins != ins_small)
        free(ins);
    return st;
}

static tgc_status run_opaque_with(run_ctx *r, int32_t node, tgc_tensor **ins)
{
    const tgc_plan *p = r->p;
    const tgc_node *nd = &p->g->nodes[node];
    const char *fn = tgc_op_name(nd->op);
    int64_t shape[TGC_MAX_DIMS];
    eval_shape(r, &nd->out, shape);
    if (p->backend->run_node) { /* the backend's own kernel for it, on its device */
        for (int k = 0; k < nd->n_in; k++)
            if (!(ins[k] = value_tensor(r, nd->in[k])))
                return tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: input of %s missing",
                                      p->backend->name, fn);
        tgc_launch_env env = {p->g->syms, r->x->symvals, p->n_threads,
                              p->device,  p->stream,     p->code};
        tgc_tensor *res = NULL;
        tgc_status st = p->backend->run_node(nd, ins, shape, &res, &env);
        if (st == TGC_OK) {
            r->vals[node] = res;
            return res ? TGC_OK
                       : tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: %s gave no result",
                                        p->backend->name, fn);
        }
        if (st != TGC_ERR_UNSUPPORTED)
            return st;
        tgc_clear_error();
    }
    int staged = p->device.type != TGC_DEVICE_CPU;
    if (staged && r->capturing)
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "tgc %s: %s would be staged through the host, which a captured "
                             "graph cannot do",
                             p->backend->name, fn);
    tgc_status st = staged && p->backend->synchronize ? p->backend->synchronize(p->device) : TGC_OK;
    for (int k = 0; k < nd->n_in && st == TGC_OK; k++) {
        if (!(ins[k] = value_tensor(r, nd->in[k])))
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: input of %s missing", p->backend->name,
                                  fn);
        if (staged && !(ins[k] = tgc_tensor_copy_to(fn, ins[k], tgc_cpu())))
            st = tgc_last_status();
    }
    if (st != TGC_OK)
        return st;
    tgc_tensor *res = tgc_interp_run_node(nd, ins, shape);
    if (res && staged)
        res = tgc_tensor_copy_to(fn, res, p->device);
    r->vals[node] = res;
    return res ? TGC_OK
               : tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: %s failed", p->backend->name, fn);
}

void tgc_plan_streams_init(tgc_plan *p)
{
    pthread_mutex_init(&p->streams_lock, NULL);
    for (int i = 0; i < TGC_PLAN_STREAMS; i++)
        pthread_mutex_init(&p->streams[i].lock, NULL);
}

void tgc_plan_streams_free(tgc_plan *p)
{
    /* an arena's block goes back to the allocator's cache of the stream it was allocated on,
     * which hands it out again only to work queued there later (after this plan's) */
    for (int i = 0; i < TGC_PLAN_STREAMS; i++) {
        if (p->streams[i].arena)
            tgc_storage_unref(p->streams[i].arena);
        tgc_kept_cache_clear(p, &p->streams[i].kept);
        pthread_mutex_destroy(&p->streams[i].lock);
    }
    pthread_mutex_destroy(&p->streams_lock);
}

size_t tgc_plan_arena_bytes(tgc_plan *p)
{
    pthread_mutex_lock(&p->streams_lock);
    int n = p->backend && p->backend->stream_key ? p->n_streams : 1;
    pthread_mutex_unlock(&p->streams_lock);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&p->streams[i].lock);
        bytes += p->streams[i].arena ? p->streams[i].arena->nbytes : 0;
        bytes += tgc_kept_bytes(p, &p->streams[i].kept);
        pthread_mutex_unlock(&p->streams[i].lock);
    }
    return bytes;
}

/* The arena entry of the stream this call runs on, its lock held; NULL when another call on
 * the same stream holds it, or every entry is taken by other streams' calls (the call then
 * uses a private arena, allocated on its stream and freed after its work was queued: the
 * allocator reuses the block only for later work on that stream). On the host (no
 * stream_key) there is one entry, taken with a trylock as before streams existed. */
static tgc_plan_stream *take_stream(tgc_plan *p)
{
    if (!p->backend->stream_key) {
        tgc_plan_stream *e = &p->streams[0];
        return pthread_mutex_trylock(&e->lock) == 0 ? e : NULL;
    }
    uint64_t key = p->backend->stream_key(p->device);
    if (!key)
        return NULL;
    pthread_mutex_lock(&p->streams_lock);
    uint64_t now = ++p->n_calls;
    tgc_plan_stream *e = NULL;
    for (int i = 0; i < p->n_streams && !e; i++)
        if (p->streams[i].key == key)
            e = &p->streams[i];
    if (e) {
        if (pthread_mutex_trylock(&e->lock) != 0)
            e = NULL;
    } else if (p->n_streams < TGC_PLAN_STREAMS) {
        e = &p->streams[p->n_streams++];
        pthread_mutex_lock(&e->lock); /* nobody else can hold a new entry */
        e->key = key;
    } else { /* a new stream: the least recently used entry that no call holds */
        tgc_plan_stream *old = &p->streams[0];
        for (int i = 1; i < p->n_streams; i++)
            if (p->streams[i].last_call < old->last_call)
                old = &p->streams[i];
        if (pthread_mutex_trylock(&old->lock) == 0) {
            e = old;
            if (e->arena) /* back to its own stream's cache: reused after that stream's work */
                tgc_storage_unref(e->arena);
            e->arena = NULL;
            tgc_kept_cache_clear(p, &e->kept); /* the same for the kept values */
            e->key = key;
        }
    }
    if (e)
        e->last_call = now;
    pthread_mutex_unlock(&p->streams_lock);
    return e;
}

/* Sizes the slots for this call and takes the arena of its stream (or a private one when
 * another call holds it, or while capturing: a recording keeps the memory it was recorded
 * with, from its capture pool). Returns the entry whose lock is held (release it after the
 * call), or NULL. */
static tgc_plan_stream *take_arena(run_ctx *r)
{
    tgc_plan *p = r->p;
    if (!p->mem.n_slots && !p->kept.n_steps) /* the entry also holds the kept values */
        return NULL;
    int64_t *need = calloc((size_t)(p->mem.n_slots ? p->mem.n_slots : 1), sizeof *need);
    if (!need)
        return NULL;
    for (int32_t v = 0; v < p->g->n_nodes; v++) {
        int s = p->mem.slot_of[v];
        if (s < 0)
            continue;
        const tgc_vinfo *vi = &p->g->nodes[v].out;
        int64_t shape[TGC_MAX_DIMS];
        eval_shape(r, vi, shape);
        int64_t bytes = tgc_shape_numel(shape, vi->ndim) * (int64_t)tgc_dtype_size(vi->dtype);
        bytes = (bytes + 63) & ~(int64_t)63;
        if (bytes > need[s])
            need[s] = bytes;
    }
    int64_t total = 0;
    for (int s = 0; s < p->mem.n_slots; s++) {
        r->slot_off[s] = total;
        total += need[s];
    }
    free(need);
    tgc_plan_stream *e = r->capturing || r->kept ? NULL : take_stream(p);
    if (e) {
        if (!e->arena || e->arena->nbytes < (size_t)total) {
            if (e->arena)
                tgc_storage_unref(e->arena);
            e->arena = tgc_storage_new((size_t)(total ? total : 64), p->device);
        }
        r->arena = e->arena;
        if (!r->arena) {
            pthread_mutex_unlock(&e->lock);
            e = NULL;
        }
    }
    if (!e)
        r->arena = tgc_storage_new((size_t)(total ? total : 64), p->device);
    else
        tgc_storage_ref(r->arena);
    return e;
}

/* TGC_PROFILE=1 (support/config_env.h): one line per step and call, to the function's log
 * callback, else the process-wide one, else stderr (support/log.h). On a device
 * each step is waited for, so the time is the step's own (and the call runs synchronously). */
static void profile_line(const tgc_plan *p, int si, const struct timespec *t0)
{
    if (p->backend->synchronize)
        p->backend->synchronize(p->device);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const tgc_step *s = &p->steps[si];
    const kir_kernel *k = s->kernel >= 0 ? p->kernels[s->kernel].k : NULL;
    char line[128];
    /* the kernel's name (or the node's %id) last, to find it in a TGC_DUMP_DIR dump */
    char who[40];
    if (k)
        snprintf(who, sizeof who, p->kernels[s->kernel].batch > 1 ? "%s+%d" : "%s",
                 p->kernels[s->kernel].name, p->kernels[s->kernel].batch - 1);
    else
        snprintf(who, sizeof who, "%%%d", (int)s->node);
    snprintf(line, sizeof line, "tgc profile: step %d %s %.3f ms %s", si,
             !k                    ? tgc_op_name(p->g->nodes[s->node].op)
             : k->kind == KIR_LOOP ? "loop"
                                   : tgc_op_name(k->tpl.op),
             (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-6,
             who);
    tgc_config cfg = {.struct_size = sizeof cfg, .log_fn = p->log_fn, .log_user = p->log_user};
    tgc_log_write(&cfg, TGC_LOG_PROFILE, line);
}

/* The kept values of the stream's last call, when they hold for this one (kept.c): binds them
 * and returns the number of leading steps to skip, else 0 (the steps fill them again). */
static int reuse_kept(run_ctx *r)
{
    const tgc_plan *p = r->p;
    tgc_kept_key_begin(r->kept, r->x->symvals, tgc_sym_count(p->g->syms));
    for (int i = 0; i < p->kept.n_inputs; i++)
        tgc_kept_key_input(r->kept, tgc_exec_input(p->g, &p->g->nodes[p->kept.inputs[i]], r->x));
    if (!tgc_kept_key_end(r->kept))
        return 0;
    int ok = 1;
    for (int j = 0; j < p->kept.n_values && ok; j++)
        ok = ensure_buffer(r, p->kept.values[j]) != NULL;
    return ok && r->kept->valid ? p->kept.n_steps : 0;
}

static void profile_kept(const tgc_plan *p)
{
    char line[128];
    snprintf(line, sizeof line,
             "tgc profile: steps 0-%d kept (the module tensors they read are unchanged)",
             p->kept.n_steps - 1);
    tgc_config cfg = {.struct_size = sizeof cfg, .log_fn = p->log_fn, .log_user = p->log_user};
    tgc_log_write(&cfg, TGC_LOG_PROFILE, line);
}

/* Binds the inputs. Kernels index inputs as row-major, so a strided input is read through
 * a contiguous copy; when the graph writes inputs in place (batch_norm's running statistics,
 * through views or not), *orig keeps the callers' tensors so the copies' final contents can
 * be written back (write_back), or the write would be lost. */
static tgc_status bind_inputs(run_ctx *r, tgc_tensor ***orig)
{
    const tgc_graph *g = r->p->g;
    tgc_status st = TGC_OK;
    if (r->p->mutated && !(*orig = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof **orig)))
        return tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", r->p->backend->name);
    for (int32_t i = 0; i < g->n_nodes && st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op != TGC_OP_INPUT)
            continue;
        tgc_tensor *t = tgc_exec_input(g, nd, r->x);
        if (*orig)
            (*orig)[i] = t;
        if (!t)
            st = tgc_set_error(TGC_ERR_INTERNAL, "tgc %s: input %%%d is not bound",
                               r->p->backend->name, i);
        else if (!tgc_tensor_is_contiguous(t)) /* on the input's own device */
            t = tgc_tensor_copy_to("tgc_call", t, t->device);
        r->vals[i] = t;
        if (st == TGC_OK && !t)
            st = tgc_keep_error(TGC_ERR_OOM, "tgc %s: out of memory", r->p->backend->name);
    }
    return st;
}

static tgc_status write_back(const tgc_plan *p, tgc_tensor *const *orig, tgc_tensor *const *vals)
{
    /* inputs written in place directly only get their versions bumped; a strided input was
     * written through its contiguous copy, which goes back (after the device is done) */
    int copies = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        copies |= p->mutated[i] && orig[i] && vals[i] && orig[i] != vals[i];
    tgc_status st = copies && p->backend->synchronize ? p->backend->synchronize(p->device) : TGC_OK;
    for (int32_t i = 0; i < p->g->n_nodes && st == TGC_OK; i++) {
        if (!p->mutated[i] || !orig[i] || !vals[i])
            continue;
        if (orig[i] != vals[i])
            st = tgc_tensor_copy(orig[i], vals[i]);
        if (st == TGC_OK && orig[i]->storage)
            tgc_storage_bump(orig[i]->storage);
    }
    return st;
}

/* Output i as a caller-owned handle: the value itself when this call created it outside the
 * arena and has not handed it out yet, else a fresh view of it. */
static tgc_status hand_out(run_ctx *r, unsigned char *given, tgc_tensor **outs)
{
    const tgc_graph *g = r->p->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int32_t v = g->outputs[i];
        tgc_tensor *t = value_tensor(r, v);
        if (!t)
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc %s: output %d missing",
                                  r->p->backend->name, i);
        int owned = g->nodes[v].op != TGC_OP_INPUT && !given[v] && t->storage != r->arena;
        outs[i] = owned ? t : tgc_tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
        given[v] = 1;
        if (!outs[i] || tgc_scope_keep(outs[i]) != TGC_OK)
            return tgc_keep_error(TGC_ERR_OOM, "tgc %s: out of memory", r->p->backend->name);
    }
    return TGC_OK;
}

/* The steps of p for this call: all of them (outs set), or with only_kept the kept steps
 * alone, when own's values do not hold for the call (no outputs). own: the kept values of a
 * recording (replay.c) instead of the stream entry's; the call then runs in a private arena. */
static tgc_status run_plan(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs, int capturing,
                           tgc_kept_cache *own, int only_kept)
{
    const tgc_graph *g = p->g;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    run_ctx r = {p,
                 x,
                 calloc(n, sizeof(tgc_tensor *)),
                 NULL,
                 calloc((size_t)(p->mem.n_slots ? p->mem.n_slots : 1), sizeof(int64_t)),
                 capturing,
                 own};
    unsigned char *given = calloc(n, 1);
    if (!r.vals || !given || !r.slot_off) {
        free(r.vals);
        free(given);
        free(r.slot_off);
        return tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", p->backend->name);
    }
    tgc_scope_push();
    tgc_tensor **orig = NULL;
    tgc_status st = bind_inputs(&r, &orig);
    tgc_plan_stream *held = st == TGC_OK ? take_arena(&r) : NULL;
    int prof = tgc_env_profile();
    int first = 0, last = only_kept ? p->kept.n_steps : p->n_steps;
    if (held && !own)
        r.kept = &held->kept;
    if (r.kept && p->kept.n_steps && st == TGC_OK) {
        first = reuse_kept(&r);
        if (prof && first)
            profile_kept(p);
    }
    for (int si = first; si < last && st == TGC_OK; si++) {
        const tgc_step *s = &p->steps[si];
        struct timespec t0;
        if (prof)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        const tgc_plan_kernel *pk = s->kernel >= 0 ? &p->kernels[s->kernel] : NULL;
        /* a batch's later kernels were launched with it, at its first step */
        if (!pk || pk->batch) {
            st = !pk             ? run_opaque(&r, s->node)
                 : pk->batch > 1 ? run_batch(&r, pk, pk->batch)
                                 : run_kernel(&r, pk);
            if (prof)
                profile_line(p, si, &t0);
        }
        if (st == TGC_OK && r.kept && si == p->kept.n_steps - 1)
            tgc_kept_filled(r.kept);
    }
    if (st == TGC_OK && orig && !only_kept)
        st = write_back(p, orig, r.vals);
    if (st == TGC_OK && !only_kept)
        st = hand_out(&r, given, outs);
    if (st != TGC_OK && !only_kept)
        for (int i = 0; i < g->n_outputs; i++)
            outs[i] = NULL;
    tgc_scope_pop();
    if (r.arena)
        tgc_storage_unref(r.arena);
    if (held)
        pthread_mutex_unlock(&held->lock);
    free(r.vals);
    free(r.slot_off);
    free(given);
    free(orig);
    return st;
}

tgc_status tgc_plan_run_steps(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs, int capturing,
                              tgc_kept_cache *kept)
{
    return run_plan(p, x, outs, capturing, kept, 0);
}

tgc_status tgc_plan_refresh_kept(tgc_plan *p, const tgc_exec_args *x, tgc_kept_cache *kept)
{
    return p->kept.n_steps ? run_plan(p, x, NULL, 0, kept, 1) : TGC_OK;
}
