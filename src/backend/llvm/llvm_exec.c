/* The LLVM backend's executor: binds inputs, sizes the buffer slots of a call in the
 * artifact's arena, runs loop kernels over rows split across threads, GEMM / conv
 * templates through the runtime driver, and OPAQUE nodes on interp; hands out the outputs.
 * Thread-safe: calls share the artifact, the arena is taken with a trylock (a concurrent
 * call allocates its own). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/interp/interp.h"
#include "backend/llvm/llvm_artifact.h"
#include "tensor/tensor_impl.h"
#include "ir/view_access.h"
#include "passes/passes.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tgc/ops.h"

/* ---- run ---- */

typedef struct run_ctx {
    llvm_art *a;
    const tgc_exec_args *x;
    tgc_tensor **vals;
    tgc_storage *arena;
    int64_t *slot_off; /* byte offset of each slot in the arena */
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

static void eval_shape(const llvm_art *a, const tgc_vinfo *v, const int64_t *symvals,
                       int64_t *shape)
{
    for (int d = 0; d < v->ndim; d++)
        shape[d] = tgc_sym_eval(a->g->syms, v->shape[d], symvals);
}

/* The tensor of value v: computed values are in vals; views are made on demand. */
static tgc_tensor *value_tensor(run_ctx *r, int32_t v)
{
    if (r->vals[v])
        return r->vals[v];
    const tgc_node *nd = &r->a->g->nodes[v];
    if (!tgc_is_view_op(nd->op))
        return NULL;
    tgc_tensor *src = value_tensor(r, nd->in[0]);
    if (!src)
        return NULL;
    int64_t shape[TGC_MAX_DIMS];
    eval_shape(r->a, &nd->out, r->x->symvals, shape);
    r->vals[v] = tgc_interp_run(nd->op, &src, 1, &nd->attrs, nd->out.dtype, shape, nd->out.ndim);
    return r->vals[v];
}

/* Makes sure value v has a buffer (a planned slot or a fresh tensor). */
static tgc_tensor *ensure_buffer(run_ctx *r, int32_t v)
{
    if (r->vals[v])
        return r->vals[v];
    const tgc_vinfo *vi = &r->a->g->nodes[v].out;
    int64_t shape[TGC_MAX_DIMS];
    eval_shape(r->a, vi, r->x->symvals, shape);
    int slot = r->a->slot_of[v];
    if (slot >= 0 && r->arena)
        r->vals[v] = wrap(r->arena, r->slot_off[slot], vi->dtype, shape, vi->ndim);
    else
        r->vals[v] = tgc_tensor_new(shape, vi->ndim, vi->dtype, tgc_cpu());
    return r->vals[v];
}

static void *data_ptr(const tgc_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)tgc_dtype_size(t->dtype);
}

typedef struct loop_call {
    loop_fn fn;
    void **bufs;
    const int64_t *sizes;
} loop_call;

static void run_rows(void *ctx, int64_t lo, int64_t hi)
{
    const loop_call *c = ctx;
    c->fn(c->bufs, c->sizes, lo, hi);
}

/* The random draws of kernel k (kir/abi.h): one tgc_rng_draw per draw, in the kernel's order
 * (graph node order; steps run draws in node order, fuse.c), its seed and base counter
 * written after the size slots, as interp's kernels draw at the same point of the call. */
static void fill_draws(run_ctx *r, const kir_kernel *k, const kir_args *slots, int64_t *sizes)
{
    for (int i = 0; i < k->n_rands; i++) {
        int64_t n = tgc_sym_eval(r->a->g->syms, k->rands[i].numel, r->x->symvals);
        uint64_t seed, base = tgc_rng_draw((uint64_t)n, &seed);
        int w = kir_args_rand_word(slots, i);
        sizes[w] = (int64_t)seed;
        sizes[w + 1] = (int64_t)base;
    }
}

static tgc_status bind_buffers(run_ctx *r, const step *s, void **bufs, int64_t *sizes)
{
    const kir_kernel *k = s->k;
    for (int b = 0; b < k->n_bufs; b++) {
        int32_t v = k->bufs[b].value;
        tgc_tensor *t = k->bufs[b].written ? ensure_buffer(r, v) : value_tensor(r, v);
        if (!t)
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc llvm: no buffer for value %%%d", v);
        bufs[b] = data_ptr(t);
        if (k->bufs[b].written && t->storage)
            tgc_storage_bump(t->storage);
    }
    for (int j = 0; j < s->slots.n; j++)
        sizes[j] = tgc_sym_eval(r->a->g->syms, s->slots.dims[j], r->x->symvals);
    fill_draws(r, k, &s->slots, sizes);
    return TGC_OK;
}

static int64_t ev(run_ctx *r, tgc_sdim d)
{
    return tgc_sym_eval(r->a->g->syms, d, r->x->symvals);
}

static tgc_status run_template(run_ctx *r, const step *s, void **bufs, int64_t *sizes)
{
    const kir_template *t = &s->k->tpl;
    void *ep_args[2] = {bufs, sizes};
    if (s->k->kind == KIR_CONV) {
        tgc_conv_args ca = {0};
        const int64_t *at = t->attrs.i;
        ca.p =
            (tgc_conv_params){ev(r, t->cn), ev(r, t->cc), ev(r, t->ch), ev(r, t->cw), ev(r, t->co),
                              ev(r, t->kh), ev(r, t->kw), at[0],        at[1],        at[2],
                              at[3],        at[4],        at[5],        at[6]};
        ca.x = bufs[t->a];
        ca.w = bufs[t->b];
        ca.y = bufs[t->out];
        ca.ep_args = ep_args;
        return tgc_conv_run(&s->gk, &ca, r->a->n_threads);
    }
    tgc_gemm_args ga = {0};
    ga.batch = ev(r, t->batch);
    ga.m = ev(r, t->M);
    ga.n = ev(r, t->N);
    ga.k = ev(r, t->K);
    ga.a = (const float *)bufs[t->a] + ev(r, t->a_off);
    ga.a_bs = ev(r, t->a_bs);
    ga.a_rs = ev(r, t->a_rs);
    ga.a_cs = ev(r, t->a_cs);
    ga.b = (const float *)bufs[t->b] + ev(r, t->b_off);
    ga.b_bs = ev(r, t->b_bs);
    ga.b_rs = ev(r, t->b_rs);
    ga.b_cs = ev(r, t->b_cs);
    ga.c = bufs[t->out];
    ga.c_bs = ev(r, t->c_bs);
    ga.c_rs = ev(r, t->c_rs);
    ga.ep_args = ep_args;
    return tgc_gemm_run(&s->gk, &ga, r->a->n_threads);
}

static tgc_status run_opaque(run_ctx *r, const step *s)
{
    const tgc_node *nd = &r->a->g->nodes[s->node];
    tgc_tensor *ins[8];
    if (nd->n_in > 8)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc llvm: %s with %d inputs", tgc_op_name(nd->op),
                             nd->n_in);
    for (int k = 0; k < nd->n_in; k++)
        if (!(ins[k] = value_tensor(r, nd->in[k])))
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc llvm: input of %s missing",
                                  tgc_op_name(nd->op));
    int64_t shape[TGC_MAX_DIMS];
    eval_shape(r->a, &nd->out, r->x->symvals, shape);
    r->vals[s->node] = tgc_interp_run_node(nd, ins, shape);
    return r->vals[s->node]
               ? TGC_OK
               : tgc_keep_error(TGC_ERR_INTERNAL, "tgc llvm: %s failed", tgc_op_name(nd->op));
}

/* Sizes the slots for this call and takes the cached arena (or a private one when another
 * call holds it). Returns 1 when the cached arena is held (release it after the call). */
static int take_arena(run_ctx *r)
{
    llvm_art *a = r->a;
    if (!a->n_slots)
        return 0;
    int64_t *need = calloc((size_t)a->n_slots, sizeof *need);
    if (!need)
        return 0;
    for (int32_t v = 0; v < a->g->n_nodes; v++) {
        int s = a->slot_of[v];
        if (s < 0)
            continue;
        const tgc_vinfo *vi = &a->g->nodes[v].out;
        int64_t shape[TGC_MAX_DIMS];
        eval_shape(a, vi, r->x->symvals, shape);
        int64_t bytes = tgc_shape_numel(shape, vi->ndim) * (int64_t)tgc_dtype_size(vi->dtype);
        bytes = (bytes + 63) & ~(int64_t)63;
        if (bytes > need[s])
            need[s] = bytes;
    }
    int64_t total = 0;
    for (int s = 0; s < a->n_slots; s++) {
        r->slot_off[s] = total;
        total += need[s];
    }
    free(need);
    int held = pthread_mutex_trylock(&a->arena_lock) == 0;
    if (held) {
        if (!a->arena || a->arena->nbytes < (size_t)total) {
            if (a->arena)
                tgc_storage_unref(a->arena);
            a->arena = tgc_storage_new((size_t)(total ? total : 64), tgc_cpu());
        }
        r->arena = a->arena;
        if (!r->arena) {
            pthread_mutex_unlock(&a->arena_lock);
            held = 0;
        }
    }
    if (!held)
        r->arena = tgc_storage_new((size_t)(total ? total : 64), tgc_cpu());
    else
        tgc_storage_ref(r->arena);
    return held;
}

/* TGC_PROFILE=1: one line per step and call on stderr (a debugging aid). Read once: calls run
 * on many threads at once. */
static pthread_once_t g_prof_once = PTHREAD_ONCE_INIT;
static int g_prof;

static void read_profile_env(void)
{
    g_prof = getenv("TGC_PROFILE") != NULL;
}

static void profile_line(const llvm_art *a, int si, const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const step *s = &a->steps[si];
    fprintf(stderr, "tgc profile: step %d %s %.3f ms\n", si,
            s->kind == STEP_LOOP       ? "loop"
            : s->kind == STEP_TEMPLATE ? tgc_op_name(s->k->tpl.op)
                                       : tgc_op_name(a->g->nodes[s->node].op),
            (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-6);
}

/* Kernels index inputs as row-major, so a strided input is read through a contiguous copy.
 * An input the graph writes in place (batch_norm's running statistics, through views or not)
 * gets the copy's final contents written back after the call, or the write would be lost.
 * Returns per node 1 for such inputs (NULL when the graph writes none, or on OOM with the
 * error set and *st changed). */
static uint8_t *written_inputs(const tgc_graph *g, tgc_status *st)
{
    int any = 0;
    for (int32_t i = 0; i < g->n_nodes && !any; i++)
        any = (g->nodes[i].flags & TGC_NODE_MUTATES) != 0;
    if (!any)
        return NULL;
    uint8_t *w = tgc_pass_mutated_values(g);
    if (!w)
        *st = tgc_last_status();
    return w;
}

static tgc_status write_back(tgc_tensor *const *orig, tgc_tensor *const *vals, int32_t n,
                             const uint8_t *written)
{
    tgc_status st = TGC_OK;
    for (int32_t i = 0; i < n && st == TGC_OK; i++)
        if (written && written[i] && orig[i] && vals[i] && orig[i] != vals[i])
            if ((st = tgc_tensor_copy(orig[i], vals[i])) == TGC_OK)
                tgc_storage_bump(orig[i]->storage);
    return st;
}

tgc_status tgc_llvm_run(void *artifact, const tgc_graph *g0, const tgc_exec_args *x,
                        tgc_tensor **outs)
{
    (void)g0;
    llvm_art *a = artifact;
    const tgc_graph *g = a->g;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    run_ctx r = {a, x, calloc(n, sizeof(tgc_tensor *)), NULL,
                 calloc((size_t)(a->n_slots ? a->n_slots : 1), sizeof(int64_t))};
    unsigned char *given = calloc(n, 1);
    if (!r.vals || !given || !r.slot_off) {
        free(r.vals);
        free(given);
        free(r.slot_off);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    tgc_scope_push();
    tgc_status st = TGC_OK;
    uint8_t *written = written_inputs(g, &st);
    tgc_tensor **orig = written ? calloc(n, sizeof *orig) : NULL;
    if (written && !orig)
        st = tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    for (int32_t i = 0; i < g->n_nodes && st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op != TGC_OP_INPUT)
            continue;
        tgc_tensor *t = tgc_exec_input(a->g, nd, x);
        if (orig)
            orig[i] = t;
        if (!t)
            st = tgc_set_error(TGC_ERR_INTERNAL, "tgc llvm: input %%%d is not bound", i);
        else if (!tgc_tensor_is_contiguous(t))
            /* kernels index inputs as row-major (see written_inputs) */
            t = tgc_interp_run(TGC_OP_CONTIGUOUS, &t, 1, &(tgc_attrs){0}, t->dtype, t->shape,
                               t->ndim);
        r.vals[i] = t;
        if (st == TGC_OK && !t)
            st = tgc_keep_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    int held = st == TGC_OK ? take_arena(&r) : 0;
    void *bufs_small[64];
    int64_t sizes_small[256];
    pthread_once(&g_prof_once, read_profile_env);
    int prof = g_prof;
    for (int si = 0; si < a->n_steps && st == TGC_OK; si++) {
        const step *s = &a->steps[si];
        struct timespec t0;
        if (prof)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (s->kind == STEP_OPAQUE) {
            st = run_opaque(&r, s);
            if (prof)
                profile_line(a, si, &t0);
            continue;
        }
        void **bufs = s->k->n_bufs <= 64 ? bufs_small : malloc((size_t)s->k->n_bufs * sizeof *bufs);
        int n_words = kir_args_words(&s->slots);
        int64_t *sizes = n_words <= 256 ? sizes_small : malloc((size_t)n_words * sizeof *sizes);
        if (!bufs || !sizes)
            st = tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
        if (st == TGC_OK)
            st = bind_buffers(&r, s, bufs, sizes);
        if (st == TGC_OK && s->kind == STEP_LOOP) {
            const kir_kernel *k = s->k;
            int64_t rows = 1, row_work = s->inner_work;
            if (k->sched.split_axis >= 0) {
                int64_t e = ev(&r, k->extent[0]), chunk = k->sched.split;
                rows = (e + chunk - 1) / chunk;
                row_work = chunk;
            } else {
                for (int d = 0; d < k->n_outer; d++)
                    rows *= ev(&r, k->extent[d]);
                if (!row_work) {
                    row_work = 1;
                    for (int d = k->n_outer; d < k->n_outer + k->n_inner; d++)
                        row_work *= ev(&r, k->extent[d]);
                }
            }
            loop_call lc = {s->fn, bufs, sizes};
            int64_t grain = row_work > 0 ? 1 + 16384 / (row_work * (k->n_phases)) : 1;
            tgc_parallel_for(rows, grain, a->n_threads, run_rows, &lc);
        } else if (st == TGC_OK) {
            st = run_template(&r, s, bufs, sizes);
        }
        if (bufs != bufs_small)
            free(bufs);
        if (sizes != sizes_small)
            free(sizes);
        if (prof)
            profile_line(a, si, &t0);
    }
    if (st == TGC_OK && orig)
        st = write_back(orig, r.vals, g->n_nodes, written);
    for (int i = 0; i < g->n_outputs && st == TGC_OK; i++) {
        int32_t v = g->outputs[i];
        tgc_tensor *t = value_tensor(&r, v);
        if (!t) {
            st = tgc_keep_error(TGC_ERR_INTERNAL, "tgc llvm: output %d missing", i);
            break;
        }
        int owned = g->nodes[v].op != TGC_OP_INPUT && !given[v] && t->storage != r.arena;
        outs[i] = owned ? t : tgc_tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
        given[v] = 1;
        if (!outs[i] || tgc_scope_keep(outs[i]) != TGC_OK)
            st = tgc_keep_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    if (st != TGC_OK)
        for (int i = 0; i < g->n_outputs; i++)
            outs[i] = NULL;
    tgc_scope_pop();
    if (r.arena)
        tgc_storage_unref(r.arena);
    if (held)
        pthread_mutex_unlock(&a->arena_lock);
    free(r.vals);
    free(r.slot_off);
    free(given);
    free(written);
    free(orig);
    return st;
}
