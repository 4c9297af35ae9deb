/* REDUCE_OVERHEAD: a plan's whole call recorded once into a device graph (a CUDA graph on the
 * CUDA backend, through its capture ops, backend.h) and replayed, so a call costs one graph
 * launch on the host instead of one launch per kernel.
 *
 * The first call of a plan on a stream runs step by step (the warm-up: lazily compiled native
 * kernels get loaded, the allocator's cache fills). The second records: the steps run under the
 * backend's capture (memory allocated meanwhile stays the recording's: the graph keeps
 * pointing at it), and the outputs the steps produce become the recording's static outputs.
 * The first recording reads the call's arguments where they are ("direct"): a later call
 * whose arguments sit at the same addresses (a loop reusing its input buffers, or the
 * allocator handing the same block back) replays with no copy at all. A recording made
 * because the arguments moved reads static input buffers of its own instead, into which each
 * call's arguments are copied on the stream before the launch, so it serves any address.
 * Every later call that matches a recording (the same symbol values; module and captured
 * tensors, and for a direct one the arguments, at the addresses recorded) launches the graph
 * and hands out views of the static outputs.
 *
 * A replay overwrites its static outputs, so a recording is reused only when every output
 * view handed out by its last replay has been freed (its storages' reference counts are back
 * to the recording's own); otherwise a second recording is made (up to REPLAY_SLOTS), and
 * when all are still in use the call runs step by step: never a silent overwrite of what the
 * caller holds. A capture that fails (a step that would synchronize, such as a node staged
 * through the host) disables replay for the plan, once, with a perf-channel line.
 *
 * In-place writes (a training step's parameter, gradient and optimizer-state updates, batch
 * norm's running statistics) are recorded like any other work: they go to the module,
 * gradient and captured tensors at the addresses the recording checks on every call, and
 * each replay bumps those tensors' versions as a step-by-step call does.
 *
 * Kept values (kept.c): when the plan writes none of the inputs its kept steps read (an
 * inference variant's weights), a recording leaves those steps out. It holds kept values of
 * its own, computed before the capture, which the graph reads at their addresses; before
 * each replay the kept steps run outside the graph, on the stream ahead of it, only when
 * their key (the weights' versions) changed. A plan that writes them records them too.
 *
 * Not replayed at all (tgc_replay_new says why on the perf channel): plans that draw random
 * numbers (a graph would repeat the same bits every call) and plans that write one of their
 * arguments in place (a recording may read a static copy of the arguments, so the write
 * would be lost). A call whose written inputs are not contiguous is not recorded either (the
 * write goes through a copy that is written back after a synchronization).
 *
 * Streams: a recording belongs to the stream it was recorded on (its key, backend.h's
 * stream_key) and is replayed only there. Its memory (the capture pool: static outputs and
 * every intermediate, the static inputs) is then only ever used by work queued on that one
 * stream, in stream order, so a replay on one thread's stream never overwrites what a replay
 * on another thread's stream is still computing or reading, and a released recording's
 * blocks go back to the allocator's cache of that stream. Each stream has its own
 * recordings (up to REPLAY_SLOTS) and its own warm-up call; up to REPLAY_STREAMS streams
 * keep recordings at once (the least recently used idle one is dropped for a new stream).
 *
 * Thread-safety: r->lock guards the table of streams (held only to find, add or drop an
 * entry); one call replays per stream at a time (the entry's trylock), and a call on a
 * stream whose entry another thread holds (two threads sharing one stream) runs step by
 * step. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plan.h"
#include "ir/op.h"
#include "runtime/comm.h"
#include "support/error.h"
#include "support/log.h"
#include "tensor/copy.h"
#include "tensor/scope.h"
#include "tensor/tensor_impl.h"

#define REPLAY_SLOTS   3
#define REPLAY_STREAMS 8

typedef struct out_geo {
    tgc_dtype dtype;
    int ndim;
    int64_t shape[TGC_MAX_DIMS], strides[TGC_MAX_DIMS], offset;
} out_geo;

typedef struct replay_slot {
    void *graph; /* NULL: unused */
    /* 1: the graph reads the arguments where they were when it was recorded (in_ptrs), so a
     * call whose arguments sit at those addresses replays with no copy; 0: it reads static
     * input buffers the call's arguments are copied into */
    int direct;
    int64_t *symvals;
    tgc_storage **in_store; /* per ARG binding: the static input buffer */
    size_t *in_bytes;
    void **in_ptrs; /* per INPUT node (r->inputs order): the address recorded */
    /* the kept values the graph reads (kept_outside): refreshed before each replay, outside
     * it, into the buffers at kept_ptrs (per kept value, recorded) */
    tgc_kept_cache kept;
    void **kept_ptrs;
    tgc_storage **out_store; /* per output */
    int *out_refs;           /* the output storages' reference counts while nothing is out */
    out_geo *out_geo;
} replay_slot;

/* The recordings of one stream. */
typedef struct replay_stream {
    uint64_t key;         /* the backend's stream_key; 0: unused */
    uint64_t last_call;   /* r->n_calls at its last use */
    pthread_mutex_t lock; /* held by the call replaying or recording on the stream */
    int calls;            /* calls seen on the stream (the first warms up) */
    replay_slot slots[REPLAY_SLOTS];
} replay_stream;

struct tgc_replay {
    pthread_mutex_t lock; /* guards the keys of streams[], n_streams and n_calls */
    atomic_int disabled;
    /* the plan's kept steps (plan.h) stay out of the recordings: none of their inputs is
     * written by the plan, so between changes of the weights a replay runs none of them */
    int kept_outside;
    int n_syms;
    int32_t *inputs; /* INPUT node ids */
    int n_inputs;
    int n_args; /* ARG bindings: max index + 1 */
    int n_outputs;
    int64_t *comms; /* the distinct communicator handles of the plan's collectives */
    int n_comms;
    tgc_config log; /* the function's log channels (log, log_fn, log_user only) */
    replay_stream streams[REPLAY_STREAMS];
    int n_streams;
    uint64_t n_calls;
};

tgc_replay *tgc_replay_new(const tgc_plan *p, const tgc_config *cfg, const char *name)
{
    const tgc_graph *g = p->g;
    const char *why = NULL;
    for (int i = 0; i < p->n_kernels && !why; i++)
        if (p->kernels[i].k->n_rands)
            why = "it draws random numbers (a recording would repeat the same bits)";
    for (int32_t i = 0; i < g->n_nodes && !why; i++) {
        unsigned e = tgc_op_effects(g->nodes[i].op, &g->nodes[i].attrs);
        if (e & TGC_EFFECT_RANDOM)
            why = "it draws random numbers (a recording would repeat the same bits)";
    }
    for (int32_t i = 0; i < g->n_nodes && !why; i++)
        if (p->mutated && p->mutated[i] && g->nodes[i].op == TGC_OP_INPUT &&
            g->nodes[i].attrs.input.kind == TGC_BIND_ARG)
            why = "it writes one of its arguments in place";
    if (why) {
        tgc_log_msg(cfg, TGC_LOG_PERF,
                    "tgc: '%s' is not recorded as a graph (mode REDUCE_OVERHEAD): %s; its "
                    "kernels are launched one by one",
                    name, why);
        return NULL;
    }
    tgc_replay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    for (int i = 0; i < REPLAY_STREAMS; i++)
        pthread_mutex_init(&r->streams[i].lock, NULL);
    r->log.struct_size = sizeof r->log;
    r->log.log = cfg->log;
    r->log.log_fn = cfg->log_fn;
    r->log.log_user = cfg->log_user;
    r->n_syms = tgc_sym_count(g->syms);
    r->kept_outside = p->kept.n_steps > 0;
    for (int i = 0; i < p->kept.n_inputs && p->mutated; i++)
        if (p->mutated[p->kept.inputs[i]])
            r->kept_outside = 0;
    r->n_outputs = g->n_outputs;
    r->inputs = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *r->inputs);
    r->comms = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *r->comms);
    if (!r->inputs || !r->comms) {
        free(r->inputs);
        free(r->comms);
        for (int i = 0; i < REPLAY_STREAMS; i++)
            pthread_mutex_destroy(&r->streams[i].lock);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != TGC_OP_ALL_REDUCE)
            continue;
        int seen = 0;
        for (int k = 0; k < r->n_comms && !seen; k++)
            seen = r->comms[k] == g->nodes[i].attrs.all_reduce.comm;
        if (!seen)
            r->comms[r->n_comms++] = g->nodes[i].attrs.all_reduce.comm;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == TGC_OP_INPUT) {
            r->inputs[r->n_inputs++] = i;
            if (g->nodes[i].attrs.input.kind == TGC_BIND_ARG &&
                g->nodes[i].attrs.input.index + 1 > r->n_args)
                r->n_args = (int)g->nodes[i].attrs.input.index + 1;
        }
    return r;
}

static void slot_clear(const tgc_plan *p, replay_slot *s, int n_args, int n_outputs)
{
    if (s->graph)
        p->backend->capture->release(s->graph);
    for (int i = 0; s->in_store && i < n_args; i++)
        if (s->in_store[i])
            tgc_storage_unref(s->in_store[i]);
    for (int i = 0; s->out_store && i < n_outputs; i++)
        if (s->out_store[i])
            tgc_storage_unref(s->out_store[i]);
    tgc_kept_cache_clear(p, &s->kept);
    free(s->kept_ptrs);
    free(s->symvals);
    free(s->in_store);
    free(s->in_bytes);
    free(s->in_ptrs);
    free(s->out_store);
    free(s->out_refs);
    free(s->out_geo);
    memset(s, 0, sizeof *s);
}

/* Frees r; p is the plan it belongs to (its backend releases the graphs). */
static void replay_free_of(const tgc_plan *p, tgc_replay *r)
{
    for (int k = 0; k < REPLAY_STREAMS; k++) {
        for (int i = 0; i < REPLAY_SLOTS; i++)
            slot_clear(p, &r->streams[k].slots[i], r->n_args, r->n_outputs);
        pthread_mutex_destroy(&r->streams[k].lock);
    }
    free(r->inputs);
    free(r->comms);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* The tensor bound to INPUT node nd in this call. */
static tgc_tensor *input_of(const tgc_plan *p, const tgc_exec_args *x, int32_t node)
{
    return tgc_exec_input(p->g, &p->g->nodes[node], x);
}

/* A tensor view of storage s with geometry o, in the current scope. */
static tgc_tensor *view_of(tgc_storage *s, const out_geo *o)
{
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    t->dtype = o->dtype;
    t->ndim = o->ndim;
    memcpy(t->shape, o->shape, sizeof t->shape);
    memcpy(t->strides, o->strides, sizeof t->strides);
    t->offset = o->offset;
    t->device = s->device;
    t->storage = s;
    tgc_storage_ref(s);
    tgc_scope_adopt(t);
    return t;
}

static int slot_matches(const tgc_plan *p, const tgc_replay *r, const replay_slot *s,
                        const tgc_exec_args *x)
{
    if (!s->graph)
        return 0;
    for (int i = 0; i < r->n_syms; i++)
        if (s->symvals[i] != x->symvals[i])
            return 0;
    for (int i = 0; i < r->n_inputs; i++) {
        const tgc_node *nd = &p->g->nodes[r->inputs[i]];
        if (nd->attrs.input.kind == TGC_BIND_ARG && !s->direct)
            continue; /* copied into the static input */
        tgc_tensor *t = input_of(p, x, r->inputs[i]);
        if (!t || tgc_device_ptr(t) != s->in_ptrs[i] ||
            (nd->attrs.input.kind == TGC_BIND_ARG && !tgc_tensor_is_contiguous(t)))
            return 0;
    }
    return 1;
}

/* What a step-by-step call does after writing its inputs in place (exec.c's write_back):
 * bump the versions of the tensors the graph wrote. */
static void bump_written(const tgc_plan *p, const tgc_replay *r, const tgc_exec_args *x)
{
    for (int i = 0; p->mutated && i < r->n_inputs; i++) {
        tgc_tensor *t = p->mutated[r->inputs[i]] ? input_of(p, x, r->inputs[i]) : NULL;
        if (t && t->storage)
            tgc_storage_bump(t->storage);
    }
}

/* 1 when every input the graph writes is contiguous: then the steps write it in place and a
 * recording writes the tensor itself. */
static int written_inputs_contiguous(const tgc_plan *p, const tgc_replay *r, const tgc_exec_args *x)
{
    for (int i = 0; p->mutated && i < r->n_inputs; i++) {
        tgc_tensor *t = p->mutated[r->inputs[i]] ? input_of(p, x, r->inputs[i]) : NULL;
        if (t && !tgc_tensor_is_contiguous(t))
            return 0;
    }
    return 1;
}

static int slot_free(const tgc_replay *r, const replay_slot *s)
{
    for (int i = 0; i < r->n_outputs; i++)
        if (atomic_load(&s->out_store[i]->refs) != s->out_refs[i])
            return 0;
    return 1;
}

/* Views of slot s's outputs for the caller. */
static tgc_status hand_out(const tgc_replay *r, const replay_slot *s, tgc_tensor **outs)
{
    for (int i = 0; i < r->n_outputs; i++) {
        outs[i] = view_of(s->out_store[i], &s->out_geo[i]);
        if (!outs[i]) {
            for (int j = 0; j < i; j++) {
                tgc_tensor_free(outs[j]);
                outs[j] = NULL;
            }
            return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory");
        }
    }
    return TGC_OK;
}

/* Copies this call's arguments into slot s's static inputs (on the stream, before the
 * graph). A strided argument is made contiguous first. */
static tgc_status copy_args(const tgc_plan *p, const tgc_replay *r, replay_slot *s,
                            const tgc_exec_args *x)
{
    const tgc_capture_ops *c = p->backend->capture;
    for (int a = 0; a < r->n_args && a < x->n_args && !s->direct; a++) {
        if (!s->in_store[a])
            continue;
        tgc_tensor *t = x->args[a];
        tgc_tensor *tmp = NULL;
        if (!tgc_tensor_is_contiguous(t) &&
            !(t = tmp = tgc_tensor_copy_to("tgc_call", t, p->device)))
            return tgc_last_status();
        void *src = tgc_device_ptr(t);
        tgc_status st = src == s->in_store[a]->data
                            ? TGC_OK
                            : c->copy_async(p->device, s->in_store[a]->data, src, s->in_bytes[a]);
        if (tmp)
            tgc_tensor_free(tmp);
        if (st != TGC_OK)
            return st;
    }
    return TGC_OK;
}

static void disable(const tgc_plan *p, tgc_replay *r, const char *why)
{
    atomic_store(&r->disabled, 1);
    (void)p;
    tgc_log_msg(&r->log, TGC_LOG_PERF,
                "tgc: recording the call as a graph failed (%s); it runs kernel by kernel from "
                "now on",
                why);
}

/* Records slot s from this call (the outputs of the recorded call go to outs); direct: the
 * graph reads the arguments in place (all contiguous). */
/* The communicators a recording's collectives use: before a replay, a failed one fails the
 * call (a replay would wait for a dead peer); after it, the watchdog gets an event behind
 * the replay (tgc_comm_watch), so one stuck on a dead peer is aborted after the timeout. */
static tgc_status comms_check(const tgc_replay *r, int after)
{
    for (int k = 0; k < r->n_comms; k++) {
        tgc_comm *c = tgc_comm_live(r->comms[k], "tgc replay");
        tgc_status st = !c ? tgc_last_status() : after ? tgc_comm_watch(c, NULL) : TGC_OK;
        if (st != TGC_OK)
            return st;
    }
    return TGC_OK;
}

/* The addresses of the kept values a recording reads (it was just recorded from s->kept). */
static tgc_status kept_ptrs_save(const tgc_plan *p, replay_slot *s)
{
    if (!s->kept.valid || !s->kept.bufs)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc: a recording's kept values were not made");
    s->kept_ptrs = calloc((size_t)p->kept.n_values, sizeof *s->kept_ptrs);
    if (!s->kept_ptrs)
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory recording a graph");
    for (int j = 0; j < p->kept.n_values; j++)
        s->kept_ptrs[j] = s->kept.bufs[j] ? s->kept.bufs[j]->data : NULL;
    return TGC_OK;
}

/* Before a replay of s: its kept values computed again (outside the graph, on the stream,
 * before it) when the weights they read changed, into the buffers the graph reads. 1: the
 * recording can be replayed. */
static int kept_refresh(tgc_plan *p, replay_slot *s, const tgc_exec_args *x, tgc_status *st)
{
    if (!s->kept_ptrs)
        return 1;
    *st = tgc_plan_refresh_kept(p, x, &s->kept);
    if (*st != TGC_OK)
        return 0;
    for (int j = 0; j < p->kept.n_values; j++)
        if (!s->kept.bufs[j] || s->kept.bufs[j]->data != s->kept_ptrs[j])
            return 0; /* a buffer moved (not for the sizes it was recorded at) */
    return 1;
}

static tgc_status record(tgc_plan *p, tgc_replay *r, replay_slot *s, const tgc_exec_args *x,
                         tgc_tensor **outs, int direct)
{
    const tgc_capture_ops *c = p->backend->capture;
    const tgc_graph *g = p->g;
    size_t na = (size_t)(r->n_args ? r->n_args : 1), no = (size_t)(r->n_outputs ? r->n_outputs : 1);
    s->symvals = calloc((size_t)(r->n_syms ? r->n_syms : 1), sizeof *s->symvals);
    s->in_store = calloc(na, sizeof *s->in_store);
    s->in_bytes = calloc(na, sizeof *s->in_bytes);
    s->in_ptrs = calloc((size_t)(r->n_inputs ? r->n_inputs : 1), sizeof *s->in_ptrs);
    s->out_store = calloc(no, sizeof *s->out_store);
    s->out_refs = calloc(no, sizeof *s->out_refs);
    s->out_geo = calloc(no, sizeof *s->out_geo);
    tgc_tensor **args = calloc(na, sizeof *args);
    if (!s->symvals || !s->in_store || !s->in_bytes || !s->in_ptrs || !s->out_store ||
        !s->out_refs || !s->out_geo || !args) {
        free(args);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory recording a graph");
    }
    memcpy(s->symvals, x->symvals, (size_t)r->n_syms * sizeof *s->symvals);
    s->direct = direct;
    tgc_status st = TGC_OK;
    tgc_scope_push();
    /* static inputs: the arguments' own geometry, contiguous, in storage the slot owns */
    for (int a = 0; a < r->n_args && a < x->n_args && st == TGC_OK && !direct; a++) {
        tgc_tensor *t = x->args[a];
        size_t bytes = (size_t)tgc_shape_numel(t->shape, t->ndim) * tgc_dtype_size(t->dtype);
        s->in_bytes[a] = bytes;
        s->in_store[a] = tgc_storage_new(bytes ? bytes : 64, p->device);
        out_geo o = {t->dtype, t->ndim, {0}, {0}, 0};
        memcpy(o.shape, t->shape, sizeof o.shape);
        tgc_contiguous_strides(o.shape, o.ndim, o.strides);
        if (!s->in_store[a] || !(args[a] = view_of(s->in_store[a], &o)))
            st = tgc_keep_error(TGC_ERR_OOM, "tgc: out of memory recording a graph");
    }
    if (st == TGC_OK)
        st = copy_args(p, r, s, x);
    tgc_exec_args rx = *x;
    if (!direct)
        rx.args = args;
    tgc_kept_cache *kept = r->kept_outside ? &s->kept : NULL;
    if (st == TGC_OK && kept) /* outside the recording, which reads them */
        st = tgc_plan_refresh_kept(p, x, kept);
    void *cap = NULL;
    if (st == TGC_OK)
        st = c->begin(p->device, &cap);
    tgc_tensor *res[64], **ro = r->n_outputs <= 64 ? res : calloc(no, sizeof *ro);
    if (st == TGC_OK && !ro)
        st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory recording a graph");
    if (st == TGC_OK) {
        tgc_status rs = tgc_plan_run_steps(p, &rx, ro, 1, kept);
        tgc_status es = c->end(p->device, cap, &s->graph);
        st = rs != TGC_OK ? rs : es;
    }
    for (int i = 0; st == TGC_OK && i < r->n_inputs; i++) {
        tgc_tensor *t = g->nodes[r->inputs[i]].attrs.input.kind == TGC_BIND_ARG && !direct
                            ? NULL
                            : input_of(p, x, r->inputs[i]);
        s->in_ptrs[i] = t ? tgc_device_ptr(t) : NULL;
    }
    if (st == TGC_OK && kept)
        st = kept_ptrs_save(p, s);
    for (int i = 0; st == TGC_OK && i < r->n_outputs; i++) {
        tgc_tensor *t = ro[i];
        s->out_store[i] = t->storage;
        tgc_storage_ref(t->storage);
        out_geo *o = &s->out_geo[i];
        o->dtype = t->dtype;
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        memcpy(o->strides, t->strides, sizeof o->strides);
        o->offset = t->offset;
    }
    tgc_scope_pop(); /* the recorded call's tensor objects; the slot keeps the storages */
    if (ro != res)
        free(ro);
    free(args);
    if (st == TGC_OK)
        for (int i = 0; i < r->n_outputs; i++)
            s->out_refs[i] = atomic_load(&s->out_store[i]->refs);
    /* the recording has not run: replay it once for this call's results */
    if (st == TGC_OK)
        st = comms_check(r, 0);
    if (st == TGC_OK)
        st = c->launch(p->device, s->graph);
    if (st == TGC_OK)
        st = comms_check(r, 1);
    if (st == TGC_OK)
        bump_written(p, r, x);
    if (st == TGC_OK)
        st = hand_out(r, s, outs);
    return st;
}

/* The entry of the stream with this key, its lock held; NULL when another call holds it (or
 * every entry is held by calls on other streams). */
static replay_stream *take_stream(const tgc_plan *p, tgc_replay *r, uint64_t key)
{
    pthread_mutex_lock(&r->lock);
    uint64_t now = ++r->n_calls;
    replay_stream *e = NULL;
    for (int i = 0; i < r->n_streams && !e; i++)
        if (r->streams[i].key == key)
            e = &r->streams[i];
    if (e) {
        if (pthread_mutex_trylock(&e->lock) != 0)
            e = NULL;
    } else if (r->n_streams < REPLAY_STREAMS) {
        e = &r->streams[r->n_streams++];
        pthread_mutex_lock(&e->lock); /* nobody else can hold a new entry */
        e->key = key;
    } else { /* a new stream: the recordings of the least recently used idle one go */
        replay_stream *old = &r->streams[0];
        for (int i = 1; i < r->n_streams; i++)
            if (r->streams[i].last_call < old->last_call)
                old = &r->streams[i];
        if (pthread_mutex_trylock(&old->lock) == 0) {
            e = old;
            /* their memory goes back to the cache of the stream they ran on, whose later
             * work alone reuses it */
            for (int i = 0; i < REPLAY_SLOTS; i++)
                slot_clear(p, &e->slots[i], r->n_args, r->n_outputs);
            e->calls = 0;
            e->key = key;
        }
    }
    if (e)
        e->last_call = now;
    pthread_mutex_unlock(&r->lock);
    return e;
}

static tgc_status replay_on(tgc_plan *p, tgc_replay *r, replay_stream *rs, const tgc_exec_args *x,
                            tgc_tensor **outs, int *done);

tgc_status tgc_replay_run(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs, int *done)
{
    tgc_replay *r = p->replay;
    *done = 0;
    if (atomic_load(&r->disabled))
        return TGC_OK;
    for (int a = 0; a < r->n_args && a < x->n_args; a++)
        if (!tgc_device_equal(x->args[a]->device, p->device))
            return TGC_OK; /* the steps report it */
    uint64_t key = p->backend->stream_key ? p->backend->stream_key(p->device) : 1;
    if (!key) {
        tgc_clear_error(); /* the steps report a stream that cannot be had */
        return TGC_OK;
    }
    replay_stream *rs = take_stream(p, r, key);
    if (!rs)
        return TGC_OK;
    tgc_status st = TGC_OK;
    if (rs->calls++ > 0) /* the first call on a stream warms up, step by step */
        st = replay_on(p, r, rs, x, outs, done);
    pthread_mutex_unlock(&rs->lock);
    return st;
}

/* Serves the call from one of the stream's recordings, or records one (rs is held). */
static tgc_status replay_on(tgc_plan *p, tgc_replay *r, replay_stream *rs, const tgc_exec_args *x,
                            tgc_tensor **outs, int *done)
{
    tgc_status st = TGC_OK;
    replay_slot *use = NULL, *empty = NULL, *stale = NULL;
    int have_direct = 0, args_contiguous = 1;
    for (int a = 0; a < r->n_args && a < x->n_args; a++)
        args_contiguous &= tgc_tensor_is_contiguous(x->args[a]);
    for (int i = 0; i < REPLAY_SLOTS; i++) {
        replay_slot *s = &rs->slots[i];
        have_direct |= s->graph && s->direct;
        if (!s->graph) {
            if (!empty)
                empty = s;
        } else if (slot_matches(p, r, s, x)) {
            if (!use && slot_free(r, s))
                use = s;
        } else if (!stale && slot_free(r, s)) {
            stale = s; /* recorded for other sizes or tensors, and not in use */
        }
    }
    if (use && !kept_refresh(p, use, x, &st)) {
        slot_clear(p, use, r->n_args, r->n_outputs); /* recorded again below */
        if (st != TGC_OK)
            return st;
        empty = use;
        use = NULL;
    }
    if (use) {
        st = copy_args(p, r, use, x);
        if (st == TGC_OK)
            st = comms_check(r, 0);
        if (st == TGC_OK)
            st = p->backend->capture->launch(p->device, use->graph);
        if (st == TGC_OK)
            st = comms_check(r, 1);
        if (st == TGC_OK)
            bump_written(p, r, x);
        if (st == TGC_OK)
            st = hand_out(r, use, outs);
        *done = 1;
    } else if ((empty || stale) && written_inputs_contiguous(p, r, x)) {
        replay_slot *s = empty ? empty : stale;
        slot_clear(p, s, r->n_args, r->n_outputs);
        /* the first recording reads the arguments in place (a loop that passes the same
         * buffers replays with no copy); a later one, made because they moved, copies them
         * into buffers of its own, which serves every address */
        st = record(p, r, s, x, outs, args_contiguous && !have_direct);
        if (st != TGC_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", tgc_last_error());
            slot_clear(p, s, r->n_args, r->n_outputs);
            disable(p, r, why);
            tgc_clear_error();
            st = TGC_OK; /* this call runs step by step */
        } else {
            *done = 1;
        }
    }
    return st;
}

void tgc_replay_release(tgc_plan *p)
{
    if (p->replay)
        replay_free_of(p, p->replay);
    p->replay = NULL;
}
