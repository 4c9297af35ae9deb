/* The shared compile driver and executor (backend/plan.h) with a second compiled backend
 * that implements only the vtable: "mini", defined here, fuses f32 add / sub / mul into LOOP
 * kernels and runs them by interpreting their kernel IR; everything else is opaque and runs
 * on interp through the executor's fallback step. Its results are checked against the interp
 * backend bit for bit. Also: the shared memory planner (slot reuse, outputs never in the
 * arena), the arenas and REDUCE_OVERHEAD recordings a backend with streams keeps per stream,
 * and the perf-log line of an opaque fallback. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/memplan.h"
#include "backend/plan.h"
#include "runtime/alloc.h"
#include "ir/view_access.h"
#include "support/error.h"
#include "tensor/tensor_impl.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

/* ---- the "mini" backend ---- */

static int mini_compiles;     /* compile calls */
static int mini_kernels_seen; /* kernels handed to those calls */
static int mini_launches;

static tgc_fuse_class mini_classify(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op == TGC_OP_INPUT || tgc_is_view_op(nd->op))
        return TGC_FUSE_FREE;
    int f32 = nd->out.dtype == TGC_F32;
    for (int k = 0; k < nd->n_in; k++)
        f32 &= g->nodes[nd->in[k]].out.dtype == TGC_F32;
    if (f32 && (nd->op == TGC_OP_ADD || nd->op == TGC_OP_SUB || nd->op == TGC_OP_MUL))
        return TGC_FUSE_POINTWISE;
    return TGC_FUSE_OPAQUE;
}

static int mini_epilogue_ok(const tgc_graph *g, int32_t tpl, int32_t node, int32_t operand)
{
    (void)g, (void)tpl, (void)node, (void)operand;
    return 0;
}

static const tgc_fuse_hooks mini_hooks = {mini_classify, mini_epilogue_ok, NULL};

/* "Compiling" keeps the kernel IR as the code: launch interprets it. */
static tgc_status mini_compile(const tgc_config *cfg, tgc_device dev, const char *name,
                               const tgc_graph *g, tgc_plan_kernel *ks, int n, void **code)
{
    (void)cfg, (void)dev, (void)name, (void)g;
    mini_compiles++;
    mini_kernels_seen += n;
    for (int i = 0; i < n; i++) {
        const kir_kernel *k = ks[i].k;
        if (k->kind != KIR_LOOP || k->n_reduces || k->n_phases != 1)
            return tgc_set_error(TGC_ERR_COMPILE, "mini: kernel %s is not pointwise", ks[i].name);
        ks[i].handle = ks[i].k;
    }
    *code = calloc(1, 1); /* something to release */
    return *code ? TGC_OK : TGC_ERR_OOM;
}

static int64_t mini_dim(const tgc_plan_kernel *pk, const int64_t *sizes, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ? d : sizes[kir_args_slot(&pk->slots, d)];
}

static int64_t mini_index(const tgc_plan_kernel *pk, const int64_t *sizes, const kir_access *at,
                          const int64_t *var, int nd)
{
    int64_t i = mini_dim(pk, sizes, at->off);
    for (int d = 0; d < nd; d++)
        i += mini_dim(pk, sizes, at->stride[d]) * var[d];
    return i;
}

/* While a fake capture records (below), each launch is also kept in its graph, which a
 * replay launches again. */
static void (*mini_on_launch)(const tgc_plan_kernel *pk, void *const *bufs, const int64_t *sizes);

static tgc_status mini_launch(const tgc_plan_kernel *pk, void *const *bufs, const int64_t *sizes,
                              const tgc_launch_env *env)
{
    (void)env;
    mini_launches++;
    if (mini_on_launch)
        mini_on_launch(pk, bufs, sizes);
    const kir_kernel *k = pk->handle;
    int nd = k->n_outer + k->n_inner;
    int64_t ext[KIR_MAX_DIMS], var[KIR_MAX_DIMS] = {0}, total = 1;
    for (int d = 0; d < nd; d++)
        total *= ext[d] = mini_dim(pk, sizes, k->extent[d]);
    double *v = malloc((size_t)(k->n_vals ? k->n_vals : 1) * sizeof *v);
    if (!v)
        return TGC_ERR_OOM;
    for (int64_t e = 0; e < total; e++) {
        for (int i = 0; i < k->n_vals; i++) {
            const kir_val *x = &k->vals[i];
            if (x->kind == KV_LOAD) {
                const kir_load *l = &k->loads[x->index];
                v[i] = ((const float *)bufs[l->at.buf])[mini_index(pk, sizes, &l->at, var, nd)];
            } else if (x->kind == KV_CONST) {
                v[i] = x->cval;
            } else { /* KV_OP: add, sub or mul, rounded to f32 like interp */
                double a = v[x->in[0]], b = v[x->in[1]];
                v[i] = (float)(x->op == TGC_OP_ADD ? a + b : x->op == TGC_OP_SUB ? a - b : a * b);
            }
        }
        for (int s = 0; s < k->n_stores; s++) {
            const kir_store *st = &k->stores[s];
            ((float *)bufs[st->at.buf])[mini_index(pk, sizes, &st->at, var, nd)] =
                (float)v[st->val];
        }
        for (int d = nd - 1; d >= 0 && ++var[d] == ext[d]; d--)
            var[d] = 0;
    }
    free(v);
    return TGC_OK;
}

static void mini_release(void *code)
{
    free(code);
}

/* A scalar machine: no SIMD, no split of flat domains, no templates; its launch walks the
 * whole domain. */
static const kir_target *mini_target(void)
{
    static const kir_target t = {
        .name = "mini",
        .lanes = {1, 1, 1, 1, 1, 1, 1},
        .min_lanes = 1,
    };
    return &t;
}

static const tgc_backend mini = {
    .name = "mini",
    .device = TGC_DEVICE_CPU,
    .fuse = &mini_hooks,
    .target = mini_target,
    .compile = mini_compile,
    .launch = mini_launch,
    .release_code = mini_release,
};

/* ---- helpers ---- */

typedef struct logs {
    char text[4096];
    int n;
} logs;

static void capture(unsigned channel, const char *message, void *user)
{
    logs *l = user;
    if (channel != TGC_LOG_PERF)
        return;
    l->n++;
    strncat(l->text, message, sizeof l->text - strlen(l->text) - 2);
    strcat(l->text, "\n");
}

/* A parameter input (TGC_BIND_PARAM index idx). */
static int32_t gb_param(tgc_graph *g, int idx, int ndim, const tgc_sdim *shape)
{
    return gb_input_bound(g, TGC_BIND_PARAM, idx, TGC_F32, ndim, shape);
}

static tgc_tensor *rnd(int64_t d0, int64_t d1)
{
    int64_t s[2] = {d0, d1};
    tgc_tensor *t = tgc_randn(s, d1 ? 2 : 1, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* Runs g on backend b over in; outs owned by the current scope. */
static void run_on(const tgc_backend *b, const tgc_graph *g, const tgc_config *cfg, tgc_tensor **in,
                   int n_in, tgc_tensor **out)
{
    void *art = NULL;
    if (tgc_backend_compile(b, g, cfg, tgc_cpu(), "drv", &art) != TGC_OK)
        fail_msg("compile on %s: %s", b->name, tgc_last_error());
    int64_t symvals[1] = {0};
    tgc_exec_args x = {in, n_in, NULL, 0, NULL, 0, symvals};
    if (tgc_backend_run(b, art, g, &x, out) != TGC_OK)
        fail_msg("run on %s: %s", b->name, tgc_last_error());
    tgc_backend_release(b, art);
}

/* The same bits on mini as on interp. */
static void assert_same(const tgc_tensor *a, const tgc_tensor *b)
{
    assert_int_equal(tgc_numel(a), tgc_numel(b));
    assert_true(tgc_tensor_is_contiguous(a) && tgc_tensor_is_contiguous(b));
    assert_memory_equal(tgc_host_data(a), tgc_host_data(b), (size_t)tgc_numel(a) * sizeof(float));
}

static const tgc_sdim s45[2] = {4, 5}, s5[1] = {5};

/* ---- tests ---- */

/* (a + b) * c - a with a broadcast operand: one LOOP kernel, compiled once per variant. */
static void test_pointwise_kernel(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45), b = gb_input(g, TGC_F32, 1, s5),
            c = gb_input(g, TGC_F32, 2, s45);
    int32_t r = gb_bin(g, TGC_OP_SUB, gb_bin(g, TGC_OP_MUL, gb_bin(g, TGC_OP_ADD, a, b), c), a);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_tensor *in[3] = {rnd(4, 5), rnd(5, 0), rnd(4, 5)};
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    mini_compiles = mini_kernels_seen = mini_launches = 0;
    tgc_tensor *want = NULL, *got = NULL;
    run_on(tgc_backend_interp(), g, &cfg, in, 3, &want);
    run_on(&mini, g, &cfg, in, 3, &got);
    assert_int_equal(mini_compiles, 1);
    assert_int_equal(mini_kernels_seen, 1);
    assert_int_equal(mini_launches, 1);
    assert_same(got, want);
    assert_float_equal(
        ((float *)tgc_host_data(got))[7],
        (float)((float)(((float *)tgc_host_data(in[0]))[7] + ((float *)tgc_host_data(in[1]))[2]) *
                ((float *)tgc_host_data(in[2]))[7]) -
            ((float *)tgc_host_data(in[0]))[7],
        1e-6);
    tgc_graph_free(g);
}

/* kernel -> exp (opaque: interp) -> kernel, with a transposed (strided) input that the
 * executor copies: two kernels, one fallback named once on the perf channel, and the first
 * kernel's result (read by the fallback) in the arena while the output is not. */
static void test_opaque_fallback(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45), b = gb_input(g, TGC_F32, 2, s45);
    int32_t s = gb_bin(g, TGC_OP_ADD, a, b);
    int32_t e1 = gb_un(g, TGC_OP_EXP, s);
    int32_t e2 = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_MUL, e1, b));
    int32_t r = gb_bin(g, TGC_OP_MUL, e2, a);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_tensor *bt = tgc_transpose(rnd(5, 4), 0, 1);
    assert_non_null(bt);
    assert_false(tgc_tensor_is_contiguous(bt));
    tgc_tensor *in[2] = {rnd(4, 5), bt};
    logs l = {0};
    tgc_config cfg = tgc_config_default();
    cfg.log = TGC_LOG_PERF;
    cfg.log_fn = capture;
    cfg.log_user = &l;
    tgc_tensor *want = NULL, *got = NULL;
    run_on(tgc_backend_interp(), g, &cfg, in, 2, &want);
    assert_int_equal(l.n, 0); /* interp has no fallbacks */

    mini_launches = 0;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&mini, g, &cfg, tgc_cpu(), "drv_fn", &p), TGC_OK);
    assert_int_equal(p->n_kernels, 3);
    assert_int_equal(p->n_steps, 5);
    assert_int_equal(l.n, 1);
    assert_non_null(strstr(l.text, "'drv_fn' runs exp on interp (2 nodes)"));
    assert_non_null(strstr(l.text, "mini"));
    assert_true(p->mem.n_slots >= 1);
    int64_t symvals[1] = {0};
    tgc_exec_args x = {in, 2, NULL, 0, NULL, 0, symvals};
    assert_int_equal(tgc_plan_run(p, &x, &got), TGC_OK);
    assert_int_equal(mini_launches, 3);
    assert_non_null(p->streams[0].arena); /* the host's one arena */
    assert_ptr_not_equal(got->storage, p->streams[0].arena);
    assert_same(got, want);
    /* a second call reuses the arena and gives the same bits */
    tgc_storage *arena = p->streams[0].arena;
    tgc_tensor *again = NULL;
    assert_int_equal(tgc_plan_run(p, &x, &again), TGC_OK);
    assert_ptr_equal(p->streams[0].arena, arena);
    assert_same(again, want);
    assert_int_equal(l.n, 1); /* calls log nothing */
    tgc_plan_free(p);
    tgc_graph_free(g);
}

/* Another call holding an arena entry: a thread that takes its lock and keeps it until
 * entry_release (the test's own thread never holds an entry while it calls in, which would
 * order the entry's lock before the table's). */
typedef struct entry_holder {
    pthread_t th;
    pthread_mutex_t *lock;
    pthread_barrier_t taken, done;
} entry_holder;

static void *hold_entry(void *arg)
{
    entry_holder *h = arg;
    pthread_mutex_lock(h->lock);
    pthread_barrier_wait(&h->taken);
    pthread_barrier_wait(&h->done);
    pthread_mutex_unlock(h->lock);
    return NULL;
}

static void entry_hold(entry_holder *h, pthread_mutex_t *lock)
{
    h->lock = lock;
    assert_int_equal(pthread_barrier_init(&h->taken, NULL, 2), 0);
    assert_int_equal(pthread_barrier_init(&h->done, NULL, 2), 0);
    assert_int_equal(pthread_create(&h->th, NULL, hold_entry, h), 0);
    pthread_barrier_wait(&h->taken);
}

static void entry_release(entry_holder *h)
{
    pthread_barrier_wait(&h->done);
    pthread_join(h->th, NULL);
    pthread_barrier_destroy(&h->taken);
    pthread_barrier_destroy(&h->done);
}

/* A backend whose launches go to streams (stream_key): the plan keeps one arena per stream,
 * so a call never shares an arena with a call on another stream whose kernels may still run;
 * a call on the same stream reuses its stream's arena; with more streams than entries the
 * least recently used idle one is taken over; a call finding its stream's arena held, or
 * without a stream, runs in a private arena. */
static uint64_t g_stream_key;

static uint64_t mini_stream_key(tgc_device dev)
{
    (void)dev;
    return g_stream_key;
}

static void run_keyed(tgc_plan *p, uint64_t key, tgc_tensor **in, const tgc_tensor *want)
{
    g_stream_key = key;
    int64_t symvals[1] = {0};
    tgc_exec_args x = {in, 2, NULL, 0, NULL, 0, symvals};
    tgc_tensor *got = NULL;
    assert_int_equal(tgc_plan_run(p, &x, &got), TGC_OK);
    assert_same(got, want);
    tgc_tensor_free(got);
}

static void test_arenas_per_stream(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45), b = gb_input(g, TGC_F32, 2, s45);
    int32_t e = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_ADD, a, b)); /* a slot: the sum */
    int32_t r = gb_bin(g, TGC_OP_MUL, e, a);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_tensor *in[2] = {rnd(4, 5), rnd(4, 5)}, *want = NULL;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    run_on(tgc_backend_interp(), g, &cfg, in, 2, &want);
    tgc_backend streamed = mini;
    streamed.stream_key = mini_stream_key;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&streamed, g, &cfg, tgc_cpu(), "streams", &p), TGC_OK);
    assert_true(p->mem.n_slots >= 1);

    run_keyed(p, 11, in, want);
    assert_int_equal(p->n_streams, 1);
    tgc_storage *a11 = p->streams[0].arena;
    assert_non_null(a11);
    assert_true(p->streams[0].key == 11);
    run_keyed(p, 12, in, want); /* another stream: an arena of its own */
    assert_int_equal(p->n_streams, 2);
    assert_true(p->streams[1].key == 12);
    assert_non_null(p->streams[1].arena);
    assert_ptr_not_equal(p->streams[1].arena, a11);
    run_keyed(p, 11, in, want); /* back on the first: its arena again */
    assert_int_equal(p->n_streams, 2);
    assert_ptr_equal(p->streams[0].arena, a11);
    assert_int_equal(tgc_backend_arena_bytes(&streamed, p),
                     a11->nbytes + p->streams[1].arena->nbytes);

    for (uint64_t k = 13; k < 11 + TGC_PLAN_STREAMS; k++)
        run_keyed(p, k, in, want);
    assert_int_equal(p->n_streams, TGC_PLAN_STREAMS);
    run_keyed(p, 100, in, want); /* full: 12, used least recently, gives way */
    assert_int_equal(p->n_streams, TGC_PLAN_STREAMS);
    assert_true(p->streams[1].key == 100);
    assert_true(p->streams[0].key == 11);
    for (int i = 0; i < p->n_streams; i++)
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(p->streams[i].arena, p->streams[j].arena);

    /* stream 11's arena held by another call (on the same stream): a private one */
    entry_holder h;
    entry_hold(&h, &p->streams[0].lock);
    run_keyed(p, 11, in, want);
    assert_ptr_equal(p->streams[0].arena, a11);
    entry_release(&h);
    run_keyed(p, 0, in, want); /* no stream to be had: a private one */
    assert_int_equal(p->n_streams, TGC_PLAN_STREAMS);
    tgc_plan_free(p);
    tgc_graph_free(g);
}

/* REDUCE_OVERHEAD on a backend with streams: a recording is made and replayed per stream
 * (each stream warms up once, then records), and a graph is only ever launched on the stream
 * it was recorded on. The fake capture below "records" nothing (the steps run while it
 * records, so the recorded call's outputs are right; its replays recompute nothing, so the
 * calls here pass the same inputs every time) and counts what it is asked. */
static struct {
    int begins, launches, wrong_stream, releases;
} g_cap;

/* A fake graph: with g_fake_replays, the mini launches made while it was recorded (their
 * kernels, buffers and sizes), which fake_launch runs again; other steps (interp's) are not
 * replayed. Only for plans whose recorded kernels touch no arena slot: unlike a CUDA graph's
 * capture pool, the private arena of the capture is freed after it. */
static int g_fake_replays;

typedef struct fake_launch_rec {
    const tgc_plan_kernel *pk;
    void *bufs[16];
    int64_t sizes[32];
} fake_launch_rec;

typedef struct fake_graph {
    uint64_t key;
    int n;
    fake_launch_rec rec[16];
} fake_graph;

static fake_graph *g_recording;

static void fake_record(const tgc_plan_kernel *pk, void *const *bufs, const int64_t *sizes)
{
    fake_graph *g = g_recording;
    int nb = pk->k->n_bufs, nw = kir_args_words(&pk->slots);
    assert_true(g->n < 16 && nb <= 16 && nw <= 32);
    fake_launch_rec *r = &g->rec[g->n++];
    r->pk = pk;
    memcpy(r->bufs, bufs, (size_t)nb * sizeof *bufs);
    memcpy(r->sizes, sizes, (size_t)nw * sizeof *sizes);
}

static tgc_status fake_begin(tgc_device dev, void **cap)
{
    (void)dev;
    g_cap.begins++;
    fake_graph *g = calloc(1, sizeof *g);
    if (!g)
        return TGC_ERR_OOM;
    g->key = g_stream_key;
    g_recording = g;
    mini_on_launch = g_fake_replays ? fake_record : NULL;
    *cap = g;
    return TGC_OK;
}

static tgc_status fake_end(tgc_device dev, void *cap, void **graph)
{
    (void)dev;
    g_recording = NULL;
    mini_on_launch = NULL;
    *graph = cap;
    return TGC_OK;
}

static tgc_status fake_launch(tgc_device dev, void *graph)
{
    (void)dev;
    const fake_graph *g = graph;
    g_cap.launches++;
    g_cap.wrong_stream += g->key != g_stream_key;
    for (int i = 0; i < g->n; i++) {
        tgc_launch_env env = {0};
        int before = mini_launches;
        tgc_status st = mini_launch(g->rec[i].pk, g->rec[i].bufs, g->rec[i].sizes, &env);
        mini_launches = before; /* a replay, not a launch of the executor's */
        if (st != TGC_OK)
            return st;
    }
    return TGC_OK;
}

static void fake_release(void *graph)
{
    g_cap.releases++;
    free(graph);
}

static tgc_status fake_copy(tgc_device dev, void *dst, const void *src, size_t n)
{
    (void)dev;
    memcpy(dst, src, n);
    return TGC_OK;
}

static const tgc_capture_ops fake_capture = {fake_begin, fake_end, fake_launch, fake_release,
                                             fake_copy};

static void test_recordings_per_stream(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45), b = gb_input(g, TGC_F32, 2, s45);
    int32_t r = gb_bin(g, TGC_OP_MUL, gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_ADD, a, b)), a);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_tensor *in[2] = {rnd(4, 5), rnd(4, 5)}, *want = NULL;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    run_on(tgc_backend_interp(), g, &cfg, in, 2, &want);
    tgc_backend streamed = mini;
    streamed.stream_key = mini_stream_key;
    streamed.capture = &fake_capture;
    cfg.mode = TGC_MODE_REDUCE_OVERHEAD;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&streamed, g, &cfg, tgc_cpu(), "recorded", &p), TGC_OK);
    assert_non_null(p->replay);
    memset(&g_cap, 0, sizeof g_cap);
    run_keyed(p, 11, in, want); /* warm-up */
    assert_int_equal(g_cap.begins, 0);
    run_keyed(p, 11, in, want); /* recorded, and replayed once */
    assert_int_equal(g_cap.begins, 1);
    assert_int_equal(g_cap.launches, 1);
    run_keyed(p, 11, in, want); /* replayed */
    assert_int_equal(g_cap.launches, 2);
    run_keyed(p, 12, in, want); /* another stream: its own warm-up, not 11's recording */
    assert_int_equal(g_cap.launches, 2);
    run_keyed(p, 12, in, want); /* its own recording */
    assert_int_equal(g_cap.begins, 2);
    run_keyed(p, 12, in, want);
    run_keyed(p, 11, in, want);
    assert_int_equal(g_cap.launches, 5);
    assert_int_equal(g_cap.wrong_stream, 0);
    /* more streams than the table holds: the least recently used idle one (12) gives way */
    for (uint64_t k = 13; k < 20; k++) {
        run_keyed(p, k, in, want);
        run_keyed(p, k, in, want);
    }
    assert_int_equal(g_cap.begins, 9);
    assert_int_equal(g_cap.releases, 1);
    run_keyed(p, 11, in, want); /* kept: replayed */
    assert_int_equal(g_cap.begins, 9);
    assert_int_equal(g_cap.wrong_stream, 0);
    tgc_plan_free(p);
    assert_int_equal(g_cap.releases, 9);
    tgc_graph_free(g);
}

/* REDUCE_OVERHEAD with kept values: a recording leaves out the leading steps that read only
 * parameters (t = w + u here, broadcast into y = x * t) and reads a copy of their results
 * that it refreshes, outside the graph, before a replay when a parameter changed; the
 * replays (fake_launch runs the recorded kernels again) then see the new values. */
static void test_recordings_refresh_kept_values(void **state)
{
    (void)state;
    static const tgc_sdim s345[3] = {3, 4, 5};
    tgc_graph *g = tgc_graph_create();
    int32_t x = gb_input(g, TGC_F32, 3, s345), w = gb_param(g, 0, 2, s45),
            u = gb_param(g, 1, 2, s45);
    int32_t y = gb_bin(g, TGC_OP_MUL, x, gb_bin(g, TGC_OP_ADD, w, u));
    assert_int_equal(tgc_graph_set_outputs(g, &y, 1), TGC_OK);
    tgc_backend streamed = mini;
    streamed.stream_key = mini_stream_key;
    streamed.capture = &fake_capture;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    cfg.mode = TGC_MODE_REDUCE_OVERHEAD;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&streamed, g, &cfg, tgc_cpu(), "recorded", &p), TGC_OK);
    assert_non_null(p->replay);
    assert_int_equal(p->kept.n_steps, 1);
    memset(&g_cap, 0, sizeof g_cap);
    g_stream_key = 21;
    g_fake_replays = 1; /* the recorded kernel reads x, the kept t and writes the output */
    int64_t x_shape[3] = {3, 4, 5};
    tgc_tensor *xin = tgc_randn(x_shape, 3, TGC_F32, tgc_cpu()),
               *params[2] = {rnd(4, 5), rnd(4, 5)};
    /* the call, with the expected launches of the executor's kernels and of graphs */
    int expect_kernels[] = {2, 2, 0, 0, 1, 0}; /* the recording call runs its kernels once */
    int expect_graphs[] = {0, 1, 2, 3, 4, 5};
    for (int call = 0; call < 6; call++) {
        if (call == 4) /* a new weight: the kept step runs once more, before the replay */
            assert_int_equal(tgc_copy_(params[0], rnd(4, 5)), TGC_OK);
        int64_t symvals[1] = {0};
        tgc_exec_args ex = {&xin, 1, params, 2, NULL, 0, symvals};
        tgc_tensor *got = NULL;
        mini_launches = 0;
        if (tgc_plan_run(p, &ex, &got) != TGC_OK)
            fail_msg("call %d: %s", call, tgc_last_error());
        assert_int_equal(mini_launches, expect_kernels[call]);
        assert_int_equal(g_cap.launches, expect_graphs[call]);
        /* interp: y = x * (w + u) */
        void *art = NULL;
        tgc_config icfg = tgc_config_default();
        icfg.log = 0;
        assert_int_equal(
            tgc_backend_compile(tgc_backend_interp(), g, &icfg, tgc_cpu(), "drv", &art), TGC_OK);
        tgc_tensor *want = NULL;
        assert_int_equal(tgc_backend_run(tgc_backend_interp(), art, g, &ex, &want), TGC_OK);
        tgc_backend_release(tgc_backend_interp(), art);
        assert_same(got, want);
        tgc_tensor_free(got);
        tgc_tensor_free(want);
    }
    g_fake_replays = 0;
    assert_int_equal(g_cap.begins, 1);
    assert_int_equal(g_cap.wrong_stream, 0);
    tgc_plan_free(p);
    tgc_graph_free(g);
}

/* ---- a backend off the host ---- */

/* A "device" for TGC_DEVICE_CUDA whose memory is host malloc, so mini's launch can still read
 * it; it counts what crosses between it and the host. */
static struct {
    int h2d, d2h, d2d, syncs;
} g_dev;

static tgc_block dev_alloc(void *ctx, int index, size_t nbytes)
{
    (void)ctx;
    (void)index;
    void *p = malloc(nbytes ? nbytes : 1);
    return (tgc_block){p, p ? (nbytes ? nbytes : 1) : 0};
}

static void dev_free(void *ctx, int index, tgc_block b)
{
    (void)ctx;
    (void)index;
    free(b.ptr);
}

static tgc_status dev_copy(void *ctx, void *dst, tgc_device ddev, const void *src, tgc_device sdev,
                           size_t n)
{
    (void)ctx;
    if (ddev.type == TGC_DEVICE_CPU)
        g_dev.d2h++;
    else if (sdev.type == TGC_DEVICE_CPU)
        g_dev.h2d++;
    else
        g_dev.d2d++;
    memcpy(dst, src, n);
    return TGC_OK;
}

static tgc_mem_stats dev_stats(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return (tgc_mem_stats){0, 0, 0};
}

static void dev_empty(void *ctx)
{
    (void)ctx;
}

static const tgc_allocator dev_allocator = {
    .name = "cuda",
    .alloc = dev_alloc,
    .free = dev_free,
    .copy = dev_copy,
    .stats = dev_stats,
    .empty_cache = dev_empty,
};

static tgc_status mini_dev_sync(tgc_device dev)
{
    assert_int_equal(dev.type, TGC_DEVICE_CUDA);
    g_dev.syncs++;
    return TGC_OK;
}

/* mini on the device: kernel -> exp (opaque) -> kernel -> exp -> kernel. Each fallback step
 * synchronizes, copies its input to the host, runs interp and copies its result back; the
 * kernels read and write device memory only; the perf line says the data is staged; the
 * values equal interp's on the host. */
static void test_opaque_fallback_stages_off_host(void **state)
{
    (void)state;
    assert_int_equal(tgc_allocator_register(TGC_DEVICE_CUDA, &dev_allocator), TGC_OK);
    tgc_backend dev_mini = mini;
    dev_mini.name = "mini-dev";
    dev_mini.device = TGC_DEVICE_CUDA;
    dev_mini.synchronize = mini_dev_sync;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45), b = gb_input(g, TGC_F32, 2, s45);
    int32_t e1 = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_ADD, a, b));
    int32_t e2 = gb_un(g, TGC_OP_EXP, gb_bin(g, TGC_OP_MUL, e1, b));
    int32_t r = gb_bin(g, TGC_OP_MUL, e2, a);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_tensor *host[2] = {rnd(4, 5), rnd(4, 5)};
    tgc_config cfg = tgc_config_default();
    tgc_tensor *want = NULL;
    cfg.log = 0;
    run_on(tgc_backend_interp(), g, &cfg, host, 2, &want);

    memset(&g_dev, 0, sizeof g_dev);
    tgc_tensor *in[2] = {tgc_to(host[0], tgc_cuda(0)), tgc_to(host[1], tgc_cuda(0))};
    assert_non_null(in[0]);
    assert_non_null(in[1]);
    assert_int_equal(g_dev.h2d, 2);
    logs l = {0};
    cfg.log = TGC_LOG_PERF;
    cfg.log_fn = capture;
    cfg.log_user = &l;
    tgc_plan *p = NULL;
    assert_int_equal(
        tgc_plan_compile(&dev_mini, g, &cfg, (tgc_device){dev_mini.device, 0}, "dev_fn", &p),
        TGC_OK);
    assert_int_equal(l.n, 1);
    assert_non_null(strstr(l.text, "'dev_fn' runs exp on interp (2 nodes)"));
    assert_non_null(strstr(l.text, "its data is staged to the host"));
    int64_t symvals[1] = {0};
    tgc_exec_args x = {in, 2, NULL, 0, NULL, 0, symvals};
    tgc_tensor *got = NULL;
    memset(&g_dev, 0, sizeof g_dev);
    assert_int_equal(tgc_plan_run(p, &x, &got), TGC_OK);
    assert_int_equal(tgc_device_of(got).type, TGC_DEVICE_CUDA);
    assert_int_equal(g_dev.d2h, 2); /* one input per fallback step */
    assert_int_equal(g_dev.h2d, 2); /* one result per fallback step */
    assert_true(g_dev.syncs >= 2);
    tgc_tensor *back = tgc_to(got, tgc_cpu());
    assert_non_null(back);
    assert_same(back, want);
    tgc_plan_free(p);
    tgc_graph_free(g);
    tgc_tensor_free(in[0]);
    tgc_tensor_free(in[1]);
    tgc_tensor_free(got);
    tgc_allocator_unregister(TGC_DEVICE_CUDA); /* its last storage is gone */
}

/* A backend whose fuse hooks make sums reductions: the LOOP kernel it then receives has an
 * accumulator, which mini's compile refuses; the variant fails with its message. */
static tgc_fuse_class reduce_classify(const tgc_graph *g, int32_t i)
{
    if (g->nodes[i].op == TGC_OP_SUM && g->nodes[i].out.dtype == TGC_F32)
        return TGC_FUSE_REDUCE;
    return mini_classify(g, i);
}

static const tgc_fuse_hooks reduce_hooks = {reduce_classify, mini_epilogue_ok, NULL};

static void test_backend_compile_error(void **state)
{
    (void)state;
    tgc_backend reducing = mini;
    reducing.fuse = &reduce_hooks;
    tgc_graph *g = tgc_graph_create();
    int32_t a = gb_input(g, TGC_F32, 2, s45);
    tgc_attrs red = {.ni = 2};
    red.i[0] = 2; /* dim 1 */
    red.i[1] = 0;
    int32_t r = gb_op(g, TGC_OP_SUM, &a, 1, &red);
    assert_int_equal(tgc_graph_set_outputs(g, &r, 1), TGC_OK);
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    void *art = NULL;
    mini_compiles = 0;
    check_error(tgc_backend_compile(&reducing, g, &cfg, tgc_cpu(), "drv_err", &art),
                TGC_ERR_COMPILE, "is not pointwise");
    assert_int_equal(mini_compiles, 1);
    assert_null(art);
    /* the same graph on mini itself: the sum is opaque, nothing to compile */
    assert_int_equal(tgc_backend_compile(&mini, g, &cfg, tgc_cpu(), "drv_ok", &art), TGC_OK);
    assert_int_equal(tgc_backend_kernel_count(&mini, art), 0);
    tgc_backend_release(&mini, art);
    tgc_graph_free(g);
}

/* The planner on a chain x -> a -> b -> c -> d -> view(d) (output), one node per step:
 * a and c share slot 0 (a is dead after b reads it), b gets slot 1, the output d (viewed by
 * the graph's output) and the input never get one. */
static void test_memplan_slots(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    int32_t x = gb_input(g, TGC_F32, 2, s45);
    int32_t a = gb_un(g, TGC_OP_EXP, x), b = gb_un(g, TGC_OP_EXP, a), c = gb_un(g, TGC_OP_EXP, b),
            d = gb_un(g, TGC_OP_EXP, c);
    int64_t shape[1] = {20};
    int32_t v = gb_ints(g, TGC_OP_RESHAPE, d, shape, 1);
    assert_int_equal(tgc_graph_set_outputs(g, &v, 1), TGC_OK);
    int32_t start[7];
    tgc_mem_use uses[16];
    int u = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        start[i] = u;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            uses[u++] = (tgc_mem_use){g->nodes[i].in[k], 0};
        uses[u++] = (tgc_mem_use){i, 1};
    }
    start[g->n_nodes] = u;
    tgc_mem_steps ms = {g->n_nodes, start, uses};
    tgc_memplan m;
    assert_int_equal(
        tgc_memplan_build(g, &ms, TGC_MEMPLAN_VIEWS_ALIAS | TGC_MEMPLAN_SLOTS, NULL, NULL, &m),
        TGC_OK);
    assert_int_equal(m.n_slots, 2);
    assert_int_equal(m.slot_of[x], -1);
    assert_int_equal(m.slot_of[a], 0);
    assert_int_equal(m.slot_of[b], 1);
    assert_int_equal(m.slot_of[c], 0);
    assert_int_equal(m.slot_of[d], -1); /* viewed by the output: a fresh tensor */
    assert_int_equal(m.slot_of[v], -1);
    assert_int_equal(m.last_use[a], 2);
    assert_int_equal(m.last_use[d], g->n_nodes); /* through the view: live past the end */
    tgc_memplan_free(&m);

    /* interp's use: no aliasing, no slots; the view itself is the output */
    assert_int_equal(tgc_memplan_build(g, &ms, 0, NULL, NULL, &m), TGC_OK);
    assert_null(m.slot_of);
    assert_int_equal(m.last_use[d], v);
    assert_int_equal(m.last_use[v], g->n_nodes);
    assert_int_equal(m.last_use[x], a);
    tgc_memplan_free(&m);

    /* only steps marked slotted put their results in the arena */
    uint8_t slotted[6] = {1, 1, 0, 1, 1, 1};
    assert_int_equal(
        tgc_memplan_build(g, &ms, TGC_MEMPLAN_VIEWS_ALIAS | TGC_MEMPLAN_SLOTS, NULL, slotted, &m),
        TGC_OK);
    assert_int_equal(m.slot_of[b], -1);
    assert_int_equal(m.slot_of[a], 0);
    assert_int_equal(m.slot_of[c], 0); /* a died at step 2, b took no slot */
    assert_int_equal(m.n_slots, 1);
    tgc_memplan_free(&m);
    tgc_graph_free(g);
}

/* ---- kept values ---- */

/* y = x @ (w + u) on interp, for the parameters given. */
static tgc_tensor *kept_want(const tgc_graph *g, tgc_tensor *x, tgc_tensor *const *params)
{
    void *art = NULL;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    assert_int_equal(tgc_backend_compile(tgc_backend_interp(), g, &cfg, tgc_cpu(), "drv", &art),
                     TGC_OK);
    int64_t symvals[1] = {0};
    tgc_exec_args ex = {&x, 1, params, 2, NULL, 0, symvals};
    tgc_tensor *out = NULL;
    assert_int_equal(tgc_backend_run(tgc_backend_interp(), art, g, &ex, &out), TGC_OK);
    tgc_backend_release(tgc_backend_interp(), art);
    return out;
}

static void kept_call(tgc_plan *p, const tgc_graph *g, tgc_tensor *x, tgc_tensor *const *params,
                      int launches)
{
    int64_t symvals[1] = {0};
    tgc_exec_args ex = {&x, 1, params, 2, NULL, 0, symvals};
    tgc_tensor *got = NULL;
    mini_launches = 0;
    if (tgc_plan_run(p, &ex, &got) != TGC_OK)
        fail_msg("run: %s", tgc_last_error());
    assert_int_equal(mini_launches, launches);
    tgc_tensor *want = kept_want(g, x, params);
    assert_same(got, want);
    tgc_tensor_free(got);
    tgc_tensor_free(want);
}

/* The leading kernel of y = x @ (w + u) reads parameters only: its result is kept between
 * calls and the kernel runs again only when w or u changes (an in-place write bumps the
 * version), when other tensors are bound (a storage is known by its id, not its address), or
 * when a call holds no arena of its own. A kernel whose result is an output is never kept. */
static void test_kept_values(void **state)
{
    (void)state;
    static const tgc_sdim s23[2] = {2, 3}, s34[2] = {3, 4};
    tgc_graph *g = tgc_graph_create();
    int32_t x = gb_input(g, TGC_F32, 2, s23), w = gb_param(g, 0, 2, s34),
            u = gb_param(g, 1, 2, s34);
    int32_t t = gb_bin(g, TGC_OP_ADD, w, u);
    tgc_attrs mm = tgc_attrs_of(TGC_OP_MATMUL);
    int32_t y = gb_op(g, TGC_OP_MATMUL, (int32_t[]){x, t}, 2, &mm);
    assert_int_equal(tgc_graph_set_outputs(g, &y, 1), TGC_OK);
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&mini, g, &cfg, tgc_cpu(), "kept", &p), TGC_OK);
    assert_int_equal(p->n_steps, 2);
    assert_int_equal(p->kept.n_steps, 1);
    assert_int_equal(p->kept.n_values, 1);
    assert_int_equal(p->kept.n_inputs, 2);
    int32_t kt = p->kept.values[0];
    assert_int_equal(p->mem.slot_of[kt], -1); /* its own buffer, not an arena slot */

    tgc_tensor *xin = rnd(2, 3), *params[2] = {rnd(3, 4), rnd(3, 4)};
    kept_call(p, g, xin, params, 1);
    assert_true(p->streams[0].kept.valid);
    kept_call(p, g, xin, params, 0);       /* the parameters are unchanged: skipped */
    kept_call(p, g, rnd(2, 3), params, 0); /* other arguments read the same kept value */
    size_t bytes = tgc_plan_arena_bytes(p);
    assert_true(bytes >= 12 * sizeof(float));

    /* an in-place write of a parameter recomputes it */
    assert_int_equal(tgc_copy_(params[0], rnd(3, 4)), TGC_OK);
    kept_call(p, g, xin, params, 1);
    kept_call(p, g, xin, params, 0);
    /* another tensor bound in its place, and back */
    tgc_tensor *other[2] = {rnd(3, 4), params[1]};
    kept_call(p, g, xin, other, 1);
    kept_call(p, g, xin, params, 1);
    /* a transposed binding of the same storage: other strides, recomputed */
    tgc_tensor *sq = rnd(512, 512), *sqt = tgc_transpose(sq, 0, 1);
    static const tgc_sdim s44[2] = {512, 512};
    tgc_plan_free(p);
    tgc_graph_free(g);

    /* square parameters, so one storage can be bound transposed; of 1 MiB, a size the host
     * allocator caches when freed and hands back */
    g = tgc_graph_create();
    static const tgc_sdim s24[2] = {2, 512};
    x = gb_input(g, TGC_F32, 2, s24);
    w = gb_param(g, 0, 2, s44);
    u = gb_param(g, 1, 2, s44);
    t = gb_bin(g, TGC_OP_ADD, w, u);
    y = gb_op(g, TGC_OP_MATMUL, (int32_t[]){x, t}, 2, &mm);
    assert_int_equal(tgc_graph_set_outputs(g, &y, 1), TGC_OK);
    assert_int_equal(tgc_plan_compile(&mini, g, &cfg, tgc_cpu(), "kept", &p), TGC_OK);
    assert_int_equal(p->kept.n_steps, 1);
    tgc_tensor *x24 = rnd(2, 512), *pa[2] = {sq, sq}, *pb[2] = {sq, sqt};
    kept_call(p, g, x24, pa, 1);
    kept_call(p, g, x24, pb, 1);
    kept_call(p, g, x24, pb, 0);
    kept_call(p, g, x24, pa, 1);

    /* a fresh tensor where a freed one was, at the same version: the same storage address
     * and version, another storage (its id) */
    tgc_tensor *src[2] = {rnd(512, 512), rnd(512, 512)};
    tgc_tensor *fresh = tgc_empty((int64_t[]){512, 512}, 2, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(fresh, src[0]), TGC_OK);
    tgc_tensor *pf[2] = {fresh, sq};
    kept_call(p, g, x24, pf, 1);
    const void *old_data = tgc_host_data(fresh);
    uint64_t old_version = atomic_load(&fresh->storage->version);
    const tgc_allocator *host = tgc_allocator_of(TGC_DEVICE_CPU);
    host->empty_cache(host->ctx); /* fresh's block becomes the only one cached */
    tgc_tensor_free(fresh);
    fresh = tgc_empty((int64_t[]){512, 512}, 2, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(fresh, src[1]), TGC_OK);
    assert_ptr_equal(tgc_host_data(fresh), old_data);
    assert_int_equal(atomic_load(&fresh->storage->version), old_version);
    pf[0] = fresh;
    kept_call(p, g, x24, pf, 1);
    kept_call(p, g, x24, pf, 0);
    kept_call(p, g, x24, pa, 1);

    /* a call that finds the arena held runs in a private one and computes everything, and
     * leaves the stream's kept values as they were */
    entry_holder h;
    entry_hold(&h, &p->streams[0].lock);
    kept_call(p, g, x24, pa, 1);
    entry_release(&h);
    kept_call(p, g, x24, pa, 0);
    tgc_plan_free(p);
    tgc_graph_free(g);

    /* w + u is also an output: computed every call, never kept */
    g = tgc_graph_create();
    x = gb_input(g, TGC_F32, 2, s23);
    w = gb_param(g, 0, 2, s34);
    u = gb_param(g, 1, 2, s34);
    t = gb_bin(g, TGC_OP_ADD, w, u);
    y = gb_op(g, TGC_OP_MATMUL, (int32_t[]){x, t}, 2, &mm);
    assert_int_equal(tgc_graph_set_outputs(g, (int32_t[]){y, t}, 2), TGC_OK);
    assert_int_equal(tgc_plan_compile(&mini, g, &cfg, tgc_cpu(), "kept", &p), TGC_OK);
    assert_int_equal(p->kept.n_steps, 0);
    assert_null(p->kept.index);
    tgc_plan_free(p);
    tgc_graph_free(g);
}

/* ---- batched launches ---- */

/* A mini that batches up to batch_cap kernels and runs a batch's kernels in reverse order
 * (in order when told one by one), so a batch holding a kernel that depends on another one
 * of it gives wrong values. */
static int batch_cap, batch_calls, batch_members, batch_serial;

static int mini_batch_fits(const tgc_plan_kernel *ks, int n)
{
    (void)ks;
    return n <= batch_cap;
}

static tgc_status mini_launch_batch(const tgc_plan_kernel *ks, int n, void *const *const *bufs,
                                    const int64_t *const *sizes, int one_by_one,
                                    const tgc_launch_env *env)
{
    batch_calls++;
    batch_members += n;
    batch_serial += one_by_one != 0;
    for (int j = 0; j < n; j++) {
        int m = one_by_one ? j : n - 1 - j;
        tgc_status st = mini_launch(&ks[m], bufs[m], sizes[m], env);
        if (st != TGC_OK)
            return st;
    }
    return TGC_OK;
}

static float host_at(const tgc_tensor *t, int i)
{
    return ((const float *)tgc_host_data(t))[i];
}

/* p_i <- p_i - g_i for three parameters of three shapes (an optimizer's updates: fusion
 * makes one kernel of each shape), y = q * q and z = y^T * y^T (reading y's buffer): the
 * updates and y launch as one batch, z after it; values as in plan order. With
 * g_2 bound to p_1's tensor (one storage under two inputs) the batch runs one by one, so p_2
 * reads p_1 updated, as plan order has it. A backend that batches one kernel at a time gets
 * no batch. */
static void test_batched_launches(void **state)
{
    (void)state;
    static const tgc_sdim s20[1] = {20}, s2x10[2] = {2, 10}, s32[2] = {3, 2};
    const tgc_sdim *shapes[3] = {s45, s20, s2x10};
    const int ranks[3] = {2, 1, 2};
    tgc_graph *g = tgc_graph_create();
    int32_t pv[3], gv[3];
    for (int i = 0; i < 3; i++) {
        pv[i] = gb_input(g, TGC_F32, ranks[i], shapes[i]);
        gv[i] = gb_input(g, TGC_F32, ranks[i], shapes[i]);
    }
    int32_t q = gb_input(g, TGC_F32, 2, s32);
    for (int i = 0; i < 3; i++)
        gb_bin(g, TGC_OP_ASSIGN, pv[i], gb_bin(g, TGC_OP_SUB, pv[i], gv[i]));
    int32_t y = gb_bin(g, TGC_OP_MUL, q, q);
    int32_t yt = gb_ints(g, TGC_OP_PERMUTE, y, (int64_t[]){1, 0}, 2);
    int32_t z = gb_bin(g, TGC_OP_MUL, yt, yt);
    gb_outputs(g, (int32_t[]){y, z}, 2);
    tgc_backend batched = mini;
    batched.batch_fits = mini_batch_fits;
    batched.launch_batch = mini_launch_batch;
    tgc_config cfg = tgc_config_default();
    cfg.log = 0;
    batch_cap = 8;
    tgc_plan *p = NULL;
    assert_int_equal(tgc_plan_compile(&batched, g, &cfg, tgc_cpu(), "batch", &p), TGC_OK);
    assert_non_null(p->write_to); /* the updates store straight into the parameters */
    assert_int_equal(p->n_kernels, 5);
    assert_int_equal(p->kernels[0].batch, 4);
    for (int i = 1; i < 4; i++)
        assert_int_equal(p->kernels[i].batch, 0);
    assert_int_equal(p->kernels[4].batch, 1);
    int n_launches = 0;
    assert_int_equal(tgc_plan_batched(p, &n_launches), 4);
    assert_int_equal(n_launches, 1);

    for (int alias = 0; alias < 2; alias++) {
        tgc_tensor *in[7];
        float p0[20], p1[20], p2[20], g0[20], g1[20], g2[20], qh[6];
        static const int64_t d0[3] = {4, 20, 2}, d1[3] = {5, 0, 10};
        for (int i = 0; i < 6; i++)
            in[i] = rnd(d0[i / 2], d1[i / 2]);
        in[6] = rnd(3, 2);
        if (alias)
            in[5] = in[2]; /* g_2 is p_1 */
        for (int e = 0; e < 20; e++) {
            p0[e] = host_at(in[0], e), g0[e] = host_at(in[1], e);
            p1[e] = host_at(in[2], e), g1[e] = host_at(in[3], e);
            p2[e] = host_at(in[4], e), g2[e] = host_at(in[5], e);
        }
        for (int e = 0; e < 6; e++)
            qh[e] = host_at(in[6], e);
        int64_t symvals[1] = {0};
        tgc_exec_args ex = {in, 7, NULL, 0, NULL, 0, symvals};
        tgc_tensor *outs[2] = {NULL, NULL};
        batch_calls = batch_members = batch_serial = 0;
        mini_launches = 0;
        assert_int_equal(tgc_plan_run(p, &ex, outs), TGC_OK);
        assert_int_equal(batch_calls, 1);
        assert_int_equal(batch_members, 4);
        assert_int_equal(batch_serial, alias);
        assert_int_equal(mini_launches, 5);
        for (int e = 0; e < 20; e++) {
            float n0 = p0[e] - g0[e], n1 = p1[e] - g1[e];
            assert_true(host_at(in[0], e) == n0);
            assert_true(host_at(in[2], e) == n1);
            assert_true(host_at(in[4], e) == p2[e] - (alias ? n1 : g2[e]));
        }
        for (int e = 0; e < 6; e++) {
            float yv = qh[e] * qh[e];
            assert_true(host_at(outs[0], e) == yv);
            assert_true(host_at(outs[1], (e % 2) * 3 + e / 2) == yv * yv); /* z[j][i] */
        }
        tgc_tensor_free(outs[0]);
        tgc_tensor_free(outs[1]);
    }
    tgc_plan_free(p);

    batch_cap = 1;
    assert_int_equal(tgc_plan_compile(&batched, g, &cfg, tgc_cpu(), "batch", &p), TGC_OK);
    assert_int_equal(tgc_plan_batched(p, &n_launches), 0);
    assert_int_equal(n_launches, 0);
    for (int i = 0; i < p->n_kernels; i++)
        assert_int_equal(p->kernels[i].batch, 1);
    tgc_plan_free(p);
    tgc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pointwise_kernel, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_opaque_fallback, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_arenas_per_stream, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_recordings_per_stream, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_recordings_refresh_kept_values, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_opaque_fallback_stages_off_host, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_backend_compile_error, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_memplan_slots, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_kept_values, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_batched_launches, scoped_setup, scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
