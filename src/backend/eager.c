/* Eager ops, for every compiled backend: an op on tensors of a device runs on that device's
 * compiled backend (registry.h: LLVM on CPU), compiled once per signature through the
 * shared driver into a plan (one node graph) cached for the life of the process; anything
 * the backend would only hand back to interp (a plan without kernels, a signature that does
 * not compile, an op that is no candidate) runs on interp, the reference, on CPU.
 * TGC_EAGER=interp or TGC_BACKEND=interp (support/config_env.h) and the test hook
 * tgc_eager_force_interp send every op to interp.
 *
 * A signature is the backend, the op, its attributes, input dtypes and ranks, the pattern of
 * sizes (which dims are 1 and which dims equal an earlier one) and, for ops with matrix
 * products, the matmul precision of the function running eagerly (tgc_eager_opts_push; -1:
 * the default of tgc_config_default(), read when the entry compiles); a convolution's kernel
 * sizes are part of it too, as its attributes are, and so are its image's sizes when some taps
 * of its kernel read only padding at them (fixed_dim). Every other size is a symbol,
 * so a sweep over sequence lengths or batch sizes reuses one kernel. Shape inference may still have
 * decided something from the first call's sizes (a window that fits); those decisions are the
 * graph's assumptions, checked on every call: a call that breaks one runs on interp.
 *
 * The cache is never emptied: its entries stay reachable until the process exits, when
 * a JIT's teardown order (LLVM's) makes releasing its code unsafe.
 *
 * Threads: the table is guarded by g_lock, held only to find or insert an entry, never
 * while compiling, so eager ops of other signatures (and compiled functions) keep running
 * and compiling on other threads meanwhile. A new entry is inserted "not ready" before its
 * compile; a thread wanting the same signature waits on g_ready until it is, so every
 * signature compiles once. An entry never changes after it is ready. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/eager.h"
#include "backend/interp/interp.h"
#include "backend/plan.h"
#include "backend/registry.h"
#include "ir/conv_taps.h"
#include "ir/shape_infer.h"
#include "support/config_env.h"
#include "support/error.h"

#define EAGER_MAX_IN 16 /* cat / stack of more inputs run on interp (host tensors only) */

typedef struct ekey {
    const tgc_backend *backend;
    int dev_index; /* the device (of the backend's type) its code is loaded on */
    tgc_op op;
    int n_in;
    tgc_dtype dt[EAGER_MAX_IN];
    int8_t ndim[EAGER_MAX_IN];
    /* per input dim: 0 for size 1, CLS_FIXED for a size the graph takes as a constant
     * (fixed_dim), else 1 + the flat index of the first equal dim */
    uint16_t cls[EAGER_MAX_IN][TGC_MAX_DIMS];
    int64_t fixed[8]; /* the CLS_FIXED sizes, in input and dim order */
    int64_t ai[TGC_MAX_IATTR];
    double af[TGC_MAX_FATTR];
    int ni, nf;
    tgc_dtype adt;
    int precision; /* cfg.matmul_precision its plan compiles with; -1: the default */
} ekey;

typedef struct eentry {
    ekey key;
    uint64_t hash;
    tgc_graph *g;
    void *art;                      /* the backend's plan; NULL: this signature runs on interp */
    tgc_matmul_precision precision; /* cfg.matmul_precision art was compiled with */
    int ready;                      /* g and art are final (under g_lock) */
    struct eentry *next;
} eentry;

#define EAGER_BUCKETS 1024
static eentry *g_table[EAGER_BUCKETS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ready = PTHREAD_COND_INITIALIZER;
static _Thread_local int t_force_interp;
static _Thread_local tgc_eager_opts t_opts;

tgc_eager_opts tgc_eager_opts_push(const tgc_config *cfg)
{
    tgc_eager_opts prev = t_opts;
    t_opts = cfg ? (tgc_eager_opts){1, cfg->matmul_precision, cfg}
                 : (tgc_eager_opts){0, TGC_PRECISION_HIGHEST, NULL};
    return prev;
}

void tgc_eager_opts_pop(tgc_eager_opts prev)
{
    t_opts = prev;
}

/* 1 when op's result depends on cfg.matmul_precision on some backend: its f32 matrix
 * products (GEMM and conv templates, the conv gradients, attention's products) round to it. */
static int precision_matters(tgc_op op)
{
    switch (tgc_op_info_of(op)->kind) {
    case TGC_KIND_MATMUL:
    case TGC_KIND_CONV:
    case TGC_KIND_ATTENTION: return 1;
    default: return op == TGC_OP_CONV2D_GRAD_INPUT || op == TGC_OP_CONV2D_GRAD_WEIGHT;
    }
}

void tgc_eager_force_interp(int on)
{
    t_force_interp = on;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#define CLS_FIXED 0xFFFFu

/* 1 when a conv2d / conv2d_grad_weight call has taps that read only padding at its sizes
 * (ir/conv_taps.h), which the compile drops: its image sizes then decide its graph. */
static int dead_taps(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a)
{
    tgc_conv_taps t;
    if (n_in < 2 || in[0]->ndim != 4)
        return 0;
    if (op == TGC_OP_CONV2D && in[1]->ndim == 4)
        return tgc_conv_trim(a, in[0]->shape[2], in[0]->shape[3], in[1]->shape[2], in[1]->shape[3],
                             &t);
    if (op == TGC_OP_CONV2D_GRAD_WEIGHT)
        return tgc_conv_trim(a, in[0]->shape[2], in[0]->shape[3], a->conv2d_grad_weight.kh,
                             a->conv2d_grad_weight.kw, &t);
    return 0;
}

/* Dims whose size is part of the signature instead of a symbol: a convolution's kernel sizes
 * (its weight's dims 2 and 3, or those of the weight its input gradient reads), which decide
 * the kernel's window the way attributes do (a stride-1 input gradient runs as a convolution
 * whose padding is computed from them), and, where some taps read only padding (dead), the
 * image sizes of conv2d (x) and conv2d_grad_weight (x and dy), which decide the taps it keeps.
 * Sizes of weights, and the small images that have dead taps, take few values in a model. */
static int fixed_dim(tgc_op op, int i, int d, int dead)
{
    if (d < 2)
        return 0;
    if ((op == TGC_OP_CONV2D || op == TGC_OP_CONV2D_GRAD_INPUT) && i == 1)
        return 1;
    return dead && (i == 0 || op == TGC_OP_CONV2D_GRAD_WEIGHT);
}

static void make_key(ekey *k, const tgc_backend *b, tgc_op op, tgc_tensor *const *in, int n_in,
                     const tgc_attrs *a)
{
    memset(k, 0, sizeof *k);
    k->backend = b;
    k->dev_index = n_in > 0 && in[0]->device.type == b->device ? in[0]->device.index : 0;
    k->op = op;
    k->n_in = n_in;
    int64_t flat_size[EAGER_MAX_IN * TGC_MAX_DIMS];
    int nflat = 0, nfixed = 0, dead = dead_taps(op, in, n_in, a);
    for (int i = 0; i < n_in; i++) {
        k->dt[i] = in[i]->dtype;
        k->ndim[i] = (int8_t)in[i]->ndim;
        for (int d = 0; d < in[i]->ndim; d++) {
            int64_t s = in[i]->shape[d];
            int c = 0;
            if (fixed_dim(op, i, d, dead) && in[i]->ndim == 4 && nfixed < 8) {
                c = CLS_FIXED;
                k->fixed[nfixed++] = s;
            } else if (s != 1) {
                c = nflat + 1;
                for (int j = 0; j < nflat; j++)
                    if (flat_size[j] == s) {
                        c = j + 1;
                        break;
                    }
            }
            k->cls[i][d] = (uint16_t)c;
            flat_size[nflat++] = s;
        }
    }
    /* the key copies every raw word, whatever the op's layout */
    memcpy(k->ai, a->i, sizeof k->ai);
    memcpy(k->af, a->f, sizeof k->af);
    k->ni = a->ni;
    k->nf = a->nf;
    k->adt = a->dtype;
    k->precision = t_opts.set && precision_matters(op) ? (int)t_opts.precision : -1;
}

/* Ops worth a native kernel in eager mode: what the fuser turns into loop or template
 * kernels (pointwise, reductions, norms, matmul, conv). */
/* Ops whose one-node graph compiles to kernels on backend b. On a device every op but the
 * sources and views is one (its backend runs what it has no fused kernel for natively, and
 * interp could not read device memory anyway); on the host, those the LLVM kernels cover. */
static int eager_candidate(const tgc_backend *b, tgc_op op)
{
    tgc_op_kind kind = tgc_op_info_of(op)->kind;
    if (b->device != TGC_DEVICE_CPU)
        return kind != TGC_KIND_SOURCE && kind != TGC_KIND_VIEW && kind != TGC_KIND_CREATE;
    switch (kind) {
    case TGC_KIND_BINARY:
    case TGC_KIND_COMPARE:
    case TGC_KIND_TERNARY:
    case TGC_KIND_SCALAR:
    case TGC_KIND_UNARY:
    case TGC_KIND_MATMUL:
    case TGC_KIND_CONV: return 1;
    case TGC_KIND_REDUCE: return op != TGC_OP_ARGMAX;
    case TGC_KIND_NORM: return 1;
    case TGC_KIND_POOL: return 1;      /* adaptive pools other than 1x1 fall back by kernel count */
    case TGC_KIND_ATTENTION: return 1; /* f32: GEMMs, a softmax, causal mask and dropout */
    case TGC_KIND_NN: return op != TGC_OP_BATCH_NORM; /* training writes its running stats */
    case TGC_KIND_GRAD: return 1; /* the backend's own kernels (run_node) where it has them */
    default: return 0;
    }
}

static tgc_graph *build_graph(const ekey *k, tgc_op op, tgc_tensor *const *in, int n_in,
                              const tgc_attrs *a)
{
    tgc_graph *g = tgc_graph_create();
    if (!g)
        return NULL;
    tgc_sdim flat_sym[EAGER_MAX_IN * TGC_MAX_DIMS];
    int nflat = 0;
    int32_t ids[EAGER_MAX_IN];
    tgc_vinfo v[EAGER_MAX_IN];
    for (int i = 0; i < n_in; i++) {
        v[i].dtype = in[i]->dtype;
        v[i].ndim = in[i]->ndim;
        for (int d = 0; d < in[i]->ndim; d++) {
            int c = k->cls[i][d];
            tgc_sdim s;
            if (c == 0)
                s = 1;
            else if (c == (int)CLS_FIXED)
                s = in[i]->shape[d]; /* a constant */
            else if (c - 1 < nflat)
                s = flat_sym[c - 1];
            else
                s = tgc_sym_new(g->syms, in[i]->shape[d], i, d);
            flat_sym[nflat++] = s;
            v[i].shape[d] = s;
        }
        tgc_attrs ia = tgc_attrs_of(TGC_OP_INPUT);
        ia.input.kind = TGC_BIND_ARG;
        ia.input.index = i;
        ids[i] = tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &ia, &v[i]);
    }
    tgc_vinfo out;
    int32_t id = -1;
    if (tgc_infer(op, v, n_in, a, g->syms, &out) == TGC_OK)
        id = tgc_graph_add(g, op, ids, n_in, a, &out);
    if (id < 0 || tgc_graph_set_outputs(g, &id, 1) != TGC_OK) {
        tgc_graph_free(g);
        return NULL;
    }
    return g;
}

/* Builds and compiles a new entry's graph (outside g_lock). A failed build or compile leaves
 * art NULL: "use interp" for this signature. The caller's error state is kept. */
static void compile_entry(eentry *e, tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a)
{
    tgc_status saved = tgc_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    e->g = build_graph(&e->key, op, in, n_in, a);
    if (e->g) {
        tgc_config cfg = tgc_config_default();
        cfg.log = 0;
        cfg.dump_dir = NULL;
        /* no stream in cfg: the plan is shared, the stream is the call's (run_compiled) */
        if (e->key.precision >= 0)
            cfg.matmul_precision = (tgc_matmul_precision)e->key.precision;
        e->precision = cfg.matmul_precision;
        char name[64];
        snprintf(name, sizeof name, "eager_%s", tgc_op_name(op));
        const tgc_backend *b = e->key.backend;
        tgc_device dev = {b->device, e->key.dev_index};
        if (tgc_backend_compile(b, e->g, &cfg, dev, name, &e->art) != TGC_OK)
            e->art = NULL;
        else if (tgc_backend_kernel_count(b, e->art) == 0 && b->device == TGC_DEVICE_CPU &&
                 !(b->node_supported && b->node_supported(&e->g->nodes[e->g->n_nodes - 1]))) {
            /* on the host interp is as good, unless the backend runs the node itself
             * (run_node: the conv gradients); on a device its plan keeps the data there
             * (native opaque steps, run_node) */
            tgc_backend_release(b, e->art);
            e->art = NULL;
        }
    }
    if (saved != TGC_OK)
        tgc_set_error(saved, "%s", msg);
    else
        tgc_clear_error();
}

/* The ready entry of this signature, compiled by this thread or another; NULL when out of
 * memory. */
static eentry *lookup_or_compile(const tgc_backend *b, tgc_op op, tgc_tensor *const *in, int n_in,
                                 const tgc_attrs *a)
{
    ekey k;
    make_key(&k, b, op, in, n_in, a);
    uint64_t h = hash_bytes(&k, sizeof k);
    eentry **slot = &g_table[h % EAGER_BUCKETS];
    pthread_mutex_lock(&g_lock);
    eentry *e = *slot;
    while (e && !(e->hash == h && memcmp(&e->key, &k, sizeof k) == 0))
        e = e->next;
    if (e) {
        while (!e->ready)
            pthread_cond_wait(&g_ready, &g_lock);
        pthread_mutex_unlock(&g_lock);
        return e;
    }
    e = calloc(1, sizeof *e);
    if (e) {
        e->key = k;
        e->hash = h;
        e->next = *slot;
        *slot = e;
    }
    pthread_mutex_unlock(&g_lock);
    if (!e)
        return NULL;
    compile_entry(e, op, in, n_in, a);
    pthread_mutex_lock(&g_lock);
    e->ready = 1;
    pthread_cond_broadcast(&g_ready);
    pthread_mutex_unlock(&g_lock);
    return e;
}

/* The op on the compiled backend b's cached kernels; *handled = 0 when interp should run it
 * instead (this signature does not compile to kernels, or a call breaks an assumption its
 * kernels were compiled under). */
static tgc_tensor *run_compiled(const tgc_backend *b, tgc_op op, tgc_tensor *const *in, int n_in,
                                const tgc_attrs *a, int *handled)
{
    *handled = 0;
    eentry *e = lookup_or_compile(b, op, in, n_in, a);
    if (!e || !e->art)
        return NULL;
    int64_t symvals[EAGER_MAX_IN * TGC_MAX_DIMS];
    int ns = tgc_sym_count(e->g->syms);
    for (int s = 0; s < ns; s++) {
        int inp, dim;
        tgc_sym_origin(e->g->syms, s, &inp, &dim);
        symvals[s] = in[inp]->shape[dim];
    }
    for (int k = 0; k < tgc_sym_n_assumptions(e->g->syms); k++)
        if (!tgc_sym_assumption_holds(e->g->syms, k, symvals))
            return NULL;
    tgc_exec_args x = {in, n_in, NULL, 0, NULL, 0, symvals};
    tgc_tensor *out = NULL;
    *handled = 1;
    /* the stream of the function running eagerly, for this op (as its variants use it) */
    tgc_device dev = {b->device, e->key.dev_index};
    void *stream = t_opts.set ? tgc_backend_config_stream(b, t_opts.cfg) : NULL;
    void *prev = stream && b->use_stream ? b->use_stream(dev, stream) : NULL;
    tgc_status st = tgc_backend_run(b, e->art, e->g, &x, &out);
    if (stream && b->use_stream)
        b->use_stream(dev, prev);
    return st == TGC_OK ? out : NULL;
}

int tgc_eager_cache_count(tgc_op op, int p)
{
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int h = 0; h < EAGER_BUCKETS; h++)
        for (const eentry *e = g_table[h]; e; e = e->next) {
            if (!e->ready || e->key.op != op)
                continue;
            const int plan = e->art && !e->key.backend->graph;
            n += p < 0 || (plan && (int)e->precision == p);
        }
    pthread_mutex_unlock(&g_lock);
    return n;
}

tgc_tensor *tgc_eager_run(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                          const tgc_vinfo *out)
{
    tgc_device_type dev = n_in > 0 ? in[0]->device.type : TGC_DEVICE_CPU;
    const tgc_backend *b = tgc_backend_for_device(dev);
    if (b && !tgc_env_eager_interp() && !t_force_interp && n_in <= EAGER_MAX_IN && n_in >= 1 &&
        eager_candidate(b, op)) {
        int handled;
        tgc_tensor *r = run_compiled(b, op, in, n_in, a, &handled);
        if (handled)
            return r;
    }
    /* The reference on the host. On a device without a backend, interp still makes views (they
     * are geometry only) and refuses anything that reads elements with TGC_ERR_DEVICE, naming
     * the op, the input and its device. */
    tgc_tensor *r = tgc_interp_run(op, in, n_in, a, out->dtype, out->shape, out->ndim);
    if (!r && b && b->device != TGC_DEVICE_CPU && n_in >= 1 && n_in <= EAGER_MAX_IN &&
        tgc_op_info_of(op)->kind == TGC_KIND_VIEW && tgc_last_status() == TGC_ERR_DEVICE &&
        !tgc_env_eager_interp() && !t_force_interp) {
        /* a view that needs a copy (contiguous, a reshape of a permuted tensor): the device
         * backend's copy kernel makes it */
        tgc_clear_error();
        int handled;
        r = run_compiled(b, op, in, n_in, a, &handled);
        if (!handled && !r)
            tgc_set_error(TGC_ERR_DEVICE, "tgc_%s: the %s backend has no kernel for this view",
                          tgc_op_name(op), b->name);
    }
    return r;
}
