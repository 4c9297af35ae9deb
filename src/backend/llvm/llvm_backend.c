/* The LLVM CPU backend: graph -> passes -> fusion -> kernel IR -> one LLVM module per
 * variant -> native code; and the executor that runs it.
 *
 * Compile: the variant's graph is cloned and optimized (passes.h), views that no affine
 * access can express get a contiguous copy in front of them, the graph is fused
 * (fuse.h), each LOOP / TEMPLATE group lowered to a kernel (lower.h) and emitted into one
 * unit (one O3 run, one JIT add). OPAQUE groups run on interp at call time.
 *
 * Memory: every intermediate buffer gets a slot by lifetime (values whose live ranges do
 * not overlap share a slot); a call sizes the slots from its symbol values and carves them
 * out of one arena the artifact keeps between calls. Outputs are fresh tensors. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/interp/interp.h"
#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "kir/access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "runtime/parallel.h"
#include "support/error.h"
#include "support/log.h"
#include "support/strbuf.h"
#include "tgc/ops.h"

typedef void (*loop_fn)(void **bufs, const int64_t *sizes, int64_t lo, int64_t hi);

typedef enum { STEP_LOOP, STEP_TEMPLATE, STEP_OPAQUE } step_kind;

typedef struct step {
    step_kind kind;
    kir_kernel *k;       /* LOOP / TEMPLATE */
    int32_t node;        /* OPAQUE: the node */
    char name[48];
    tgc_llvm_slots slots;
    loop_fn fn;
    tgc_gemm_kernel gk;
    int64_t inner_work;  /* for the parallel grain: elements per row if constant, else 0 */
} step;

typedef struct llvm_art {
    tgc_graph *g; /* optimized clone */
    step *steps;
    int n_steps;
    tgc_llvm_code *code;
    int n_threads;
    /* memory plan: per node, its slot (-1: not planned: an input, output or interp value) */
    int32_t *slot_of;
    int n_slots;
    int32_t *last_use; /* per node: last step reading it (n_steps: a graph output) */
    int32_t *def_step;
    /* the arena kept between calls */
    pthread_mutex_t arena_lock;
    tgc_storage *arena;
    int kernels;
} llvm_art;

/* ---- classification for fusion ---- */

static tgc_fuse_class classify(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op == TGC_OP_INPUT || kir_is_view_op(nd->op))
        return TGC_FUSE_FREE;
    if (nd->flags & TGC_NODE_MUTATES)
        return TGC_FUSE_OPAQUE;
    tgc_op_kind kind = tgc_op_info_of(nd->op)->kind;
    tgc_dtype in[3];
    for (int k = 0; k < nd->n_in && k < 3; k++)
        in[k] = g->nodes[nd->in[k]].out.dtype;
    switch (kind) {
    case TGC_KIND_BINARY:
    case TGC_KIND_COMPARE:
    case TGC_KIND_TERNARY:
    case TGC_KIND_SCALAR:
    case TGC_KIND_UNARY:
        return tgc_llvm_pointwise_supported(nd->op, nd->out.dtype, in, nd->n_in)
                   ? TGC_FUSE_POINTWISE
                   : TGC_FUSE_OPAQUE;
    case TGC_KIND_VIEW: /* contiguous: an identity copy */
        return nd->out.dtype == TGC_F32 || nd->out.dtype == TGC_F64 ? TGC_FUSE_POINTWISE
                                                                   : TGC_FUSE_OPAQUE;
    case TGC_KIND_REDUCE:
        if (nd->op == TGC_OP_SUM || nd->op == TGC_OP_MEAN || nd->op == TGC_OP_MAX) {
            tgc_dtype x = in[0];
            int fl = x == TGC_F32 || x == TGC_F64 || x == TGC_F16 || x == TGC_BF16;
            return fl && nd->out.dtype == x ? TGC_FUSE_REDUCE : TGC_FUSE_OPAQUE;
        }
        return TGC_FUSE_OPAQUE;
    case TGC_KIND_POOL:
        if ((nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) &&
            (in[0] == TGC_F32 || in[0] == TGC_F64) && nd->out.ndim >= 3)
            return TGC_FUSE_WINDOW;
        if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && nd->attrs.i[0] == 1 && nd->attrs.i[1] == 1 &&
            (in[0] == TGC_F32 || in[0] == TGC_F64))
            return TGC_FUSE_REDUCE;
        return TGC_FUSE_OPAQUE;
    case TGC_KIND_MATMUL:
    case TGC_KIND_CONV: return kir_template_ok(g, i) ? TGC_FUSE_TEMPLATE : TGC_FUSE_OPAQUE;
    default: return TGC_FUSE_OPAQUE;
    }
}

static const tgc_fuse_hooks hooks = {classify, kir_epilogue_operand_ok};

/* Puts a contiguous copy in front of every view whose chain no affine access expresses
 * (a reshape merging dims of a permuted tensor), so lowering only sees affine views. */
static tgc_status materialize_views(tgc_graph *g)
{
    for (int round = 0; round < 8; round++) {
        /* a view fails on its own when its input's view is affine */
        uint8_t *bad = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
        if (!bad)
            return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
        int n_bad = 0;
        for (int32_t i = 0; i < g->n_nodes; i++) {
            kir_view v;
            const tgc_node *nd = &g->nodes[i];
            if (kir_is_view_op(nd->op) && !kir_view_of(g, i, &v) &&
                kir_view_of(g, nd->in[0], &v)) {
                bad[i] = 1;
                n_bad++;
            }
        }
        if (!n_bad) {
            free(bad);
            return TGC_OK;
        }
        tgc_rewriter rw;
        tgc_status st = tgc_rw_begin(&rw, g);
        for (int32_t i = 0; st == TGC_OK && i < g->n_nodes && rw.st == TGC_OK; i++) {
            if (!bad[i]) {
                tgc_rw_copy(&rw, i);
                continue;
            }
            const tgc_node *nd = &g->nodes[i];
            int32_t src = tgc_rw_new(&rw, nd->in[0]);
            tgc_attrs none = {0};
            int32_t cont = tgc_rw_emit(&rw, TGC_OP_CONTIGUOUS, &src, 1, &none);
            int32_t v = cont >= 0 ? tgc_rw_emit(&rw, nd->op, &cont, 1, &nd->attrs) : -1;
            if (v >= 0)
                rw.map[i] = v;
        }
        free(bad);
        if (st == TGC_OK && rw.st != TGC_OK) {
            st = rw.st;
            tgc_rw_abort(&rw);
        } else if (st == TGC_OK) {
            st = tgc_rw_finish(&rw);
        }
        if (st != TGC_OK)
            return st;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        kir_view v;
        if (kir_is_view_op(g->nodes[i].op) && !kir_view_of(g, i, &v))
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc llvm: view %%%d (%s) is still not affine after copies", i,
                                 tgc_op_name(g->nodes[i].op));
    }
    return TGC_OK;
}

/* The averaging matrix of an adaptive pool along one dim: [out, in] (or its transpose),
 * row i weighting input window [floor(i*in/out), ceil((i+1)*in/out)) equally. */
static tgc_tensor *pool_matrix(int64_t in, int64_t out, int transpose)
{
    int64_t shape[2] = {transpose ? in : out, transpose ? out : in};
    tgc_tensor *t = tgc_tensor_new(shape, 2, TGC_F32, tgc_cpu());
    if (!t)
        return NULL;
    float *d = tgc_tensor_base(t);
    memset(d, 0, (size_t)(in * out) * sizeof(float));
    for (int64_t i = 0; i < out; i++) {
        int64_t lo = i * in / out, hi = ((i + 1) * in + out - 1) / out;
        for (int64_t k = lo; k < hi; k++)
            d[transpose ? k * out + i : i * in + k] = 1.0f / (float)(hi - lo);
    }
    tgc_scope_release(t);
    return t;
}

static int32_t emit_const(tgc_rewriter *rw, tgc_tensor *t)
{
    int k = t ? tgc_graph_add_const(rw->g, t) : -1;
    if (t)
        tgc_tensor_unref(t); /* the graph holds the only reference now */
    if (k < 0) {
        rw->st = t ? tgc_last_status() : TGC_ERR_OOM;
        return -1;
    }
    tgc_attrs a = {.ni = 2};
    a.i[0] = TGC_BIND_FOLDED;
    a.i[1] = k;
    tgc_vinfo v = {.dtype = TGC_F32, .ndim = 2};
    v.shape[0] = t->shape[0];
    v.shape[1] = t->shape[1];
    return tgc_rw_emit_typed(rw, TGC_OP_INPUT, NULL, 0, &a, &v);
}

/* An adaptive average pool to other than 1x1 (whose windows move by a non-integer step,
 * so no affine window load expresses it) is out = P_h . x . P_w^T with constant averaging
 * matrices: two small GEMMs instead of an interp call. */
static tgc_status adaptive_pool_as_matmuls(tgc_graph *g)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        const tgc_vinfo *x = nd->n_in ? &g->nodes[nd->in[0]].out : NULL;
        if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && x->dtype == TGC_F32 && x->ndim >= 3 &&
            TGC_SDIM_IS_CONST(x->shape[x->ndim - 1]) && TGC_SDIM_IS_CONST(x->shape[x->ndim - 2]) &&
            !(nd->attrs.i[0] == 1 && nd->attrs.i[1] == 1))
            n++;
    }
    if (!n)
        return TGC_OK;
    tgc_rewriter rw;
    tgc_status st = tgc_rw_begin(&rw, g);
    for (int32_t i = 0; st == TGC_OK && i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        const tgc_vinfo *x = nd->n_in ? &g->nodes[nd->in[0]].out : NULL;
        if (!(nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D && x->dtype == TGC_F32 && x->ndim >= 3 &&
              TGC_SDIM_IS_CONST(x->shape[x->ndim - 1]) &&
              TGC_SDIM_IS_CONST(x->shape[x->ndim - 2]) &&
              !(nd->attrs.i[0] == 1 && nd->attrs.i[1] == 1))) {
            tgc_rw_copy(&rw, i);
            continue;
        }
        int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
        tgc_attrs none = {0};
        int32_t pw = emit_const(&rw, pool_matrix(W, nd->attrs.i[1], 1));
        int32_t ph = emit_const(&rw, pool_matrix(H, nd->attrs.i[0], 0));
        int32_t a[2] = {tgc_rw_new(&rw, nd->in[0]), pw};
        int32_t y = pw >= 0 && ph >= 0 ? tgc_rw_emit(&rw, TGC_OP_MATMUL, a, 2, &none) : -1;
        int32_t b[2] = {ph, y};
        int32_t z = y >= 0 ? tgc_rw_emit(&rw, TGC_OP_MATMUL, b, 2, &none) : -1;
        if (z >= 0)
            rw.map[i] = z;
    }
    if (st == TGC_OK && rw.st != TGC_OK) {
        st = rw.st;
        tgc_rw_abort(&rw);
    } else if (st == TGC_OK) {
        st = tgc_rw_finish(&rw);
    }
    return st;
}

/* A 0-d f32 constant of the graph. */
static int32_t emit_scalar_const(tgc_rewriter *rw, float v)
{
    tgc_tensor *t = tgc_tensor_new(NULL, 0, TGC_F32, tgc_cpu());
    if (!t) {
        rw->st = TGC_ERR_OOM;
        return -1;
    }
    *(float *)tgc_tensor_base(t) = v;
    tgc_scope_release(t);
    int k = tgc_graph_add_const(rw->g, t);
    tgc_tensor_unref(t);
    if (k < 0) {
        rw->st = tgc_last_status();
        return -1;
    }
    tgc_attrs a = {.ni = 2};
    a.i[0] = TGC_BIND_FOLDED;
    a.i[1] = k;
    tgc_vinfo v0 = {.dtype = TGC_F32, .ndim = 0};
    return tgc_rw_emit_typed(rw, TGC_OP_INPUT, NULL, 0, &a, &v0);
}

static int sdpa_decomposable(const tgc_graph *g, const tgc_node *nd)
{
    if (nd->op != TGC_OP_SDPA || nd->out.dtype != TGC_F32 || nd->attrs.i[0] != 0 ||
        nd->attrs.f[0] != 0.0)
        return 0;
    for (int k = 0; k < 3; k++)
        if (g->nodes[nd->in[k]].out.ndim < 2)
            return 0;
    return 1;
}

/* scaled_dot_product_attention without dropout or causal masking, as the GEMMs and the
 * softmax the fuser knows: matmul(q, k^T) * scale (+ float mask, or -inf where a bool mask
 * is false), a softmax whose fully masked rows give zeros (interp's semantics), then
 * matmul(., v). The scores' epilogue and the softmax fuse; both GEMMs are templates. */
static int32_t emit_sdpa(tgc_rewriter *rw, const tgc_graph *g, const tgc_node *nd)
{
    tgc_attrs none = {0};
    int32_t q = tgc_rw_new(rw, nd->in[0]), k = tgc_rw_new(rw, nd->in[1]),
            v = tgc_rw_new(rw, nd->in[2]);
    int rk = g->nodes[nd->in[1]].out.ndim;
    tgc_attrs perm = {.ni = rk};
    for (int d = 0; d < rk; d++)
        perm.i[d] = d;
    perm.i[rk - 2] = rk - 1;
    perm.i[rk - 1] = rk - 2;
    int32_t kt = tgc_rw_emit(rw, TGC_OP_PERMUTE, &k, 1, &perm);
    int32_t qk[2] = {q, kt};
    int32_t sc = kt >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, qk, 2, &none) : -1;
    tgc_attrs mul = {.nf = 1};
    mul.f[0] = nd->attrs.f[1];
    if (sc >= 0)
        sc = tgc_rw_emit(rw, TGC_OP_MUL_SCALAR, &sc, 1, &mul);
    if (sc >= 0 && nd->n_in > 3) {
        int32_t m = tgc_rw_new(rw, nd->in[3]);
        if (g->nodes[nd->in[3]].out.dtype == TGC_BOOL) {
            int32_t ninf = emit_scalar_const(rw, -INFINITY);
            int32_t w[3] = {m, sc, ninf};
            sc = ninf >= 0 ? tgc_rw_emit(rw, TGC_OP_WHERE, w, 3, &none) : -1;
        } else {
            int32_t ad[2] = {sc, m};
            sc = tgc_rw_emit(rw, TGC_OP_ADD, ad, 2, &none);
        }
    }
    if (sc < 0)
        return -1;
    int r = tgc_rw_type(rw, sc)->ndim;
    tgc_attrs red = {.ni = 2};
    red.i[0] = (int64_t)1 << (r - 1);
    red.i[1] = 1;
    int32_t mx = tgc_rw_emit(rw, TGC_OP_MAX, &sc, 1, &red);
    int32_t sd[2] = {sc, mx};
    int32_t d = mx >= 0 ? tgc_rw_emit(rw, TGC_OP_SUB, sd, 2, &none) : -1;
    int32_t e = d >= 0 ? tgc_rw_emit(rw, TGC_OP_EXP, &d, 1, &none) : -1;
    int32_t z = e >= 0 ? tgc_rw_emit(rw, TGC_OP_SUM, &e, 1, &red) : -1;
    int32_t ez[2] = {e, z};
    int32_t pr = z >= 0 ? tgc_rw_emit(rw, TGC_OP_DIV, ez, 2, &none) : -1;
    int32_t zero = pr >= 0 ? emit_scalar_const(rw, 0.0f) : -1;
    int32_t zz[2] = {z, zero};
    int32_t ok = zero >= 0 ? tgc_rw_emit(rw, TGC_OP_GT, zz, 2, &none) : -1;
    int32_t w[3] = {ok, pr, zero};
    int32_t p = ok >= 0 ? tgc_rw_emit(rw, TGC_OP_WHERE, w, 3, &none) : -1;
    int32_t pv[2] = {p, v};
    return p >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, pv, 2, &none) : -1;
}

static tgc_status decompose_attention(tgc_graph *g)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n += sdpa_decomposable(g, &g->nodes[i]);
    if (!n)
        return TGC_OK;
    tgc_rewriter rw;
    tgc_status st = tgc_rw_begin(&rw, g);
    for (int32_t i = 0; st == TGC_OK && i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (!sdpa_decomposable(g, nd)) {
            tgc_rw_copy(&rw, i);
            continue;
        }
        int mark = rw.next.n_nodes;
        int32_t r = emit_sdpa(&rw, g, nd);
        if (r >= 0 && tgc_vinfo_same(tgc_rw_type(&rw, r), &nd->out)) {
            rw.map[i] = r;
        } else { /* keep the node when the rewrite does not reproduce its type */
            tgc_rw_rollback(&rw, mark);
            tgc_rw_copy(&rw, i);
        }
    }
    if (st == TGC_OK && rw.st != TGC_OK) {
        st = rw.st;
        tgc_rw_abort(&rw);
    } else if (st == TGC_OK) {
        st = tgc_rw_finish(&rw);
    }
    return st;
}

/* A matmul, linear or conv whose operands are views the template cannot stride through
 * (attention's per-head q and k: batch dims that do not flatten into one stride) reads
 * contiguous copies instead: one pass over the operand buys the packed GEMM. */
static tgc_status contiguous_template_operands(tgc_graph *g)
{
    uint8_t *fix = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!fix)
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    int n_fix = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        tgc_op_kind kind = tgc_op_info_of(nd->op)->kind;
        if ((kind != TGC_KIND_MATMUL && kind != TGC_KIND_CONV) || nd->out.dtype != TGC_F32 ||
            kir_template_ok(g, i))
            continue;
        for (int k = 0; k < 2 && k < nd->n_in; k++)
            if (kir_is_view_op(g->nodes[nd->in[k]].op) && g->nodes[nd->in[k]].out.ndim >= 2)
                fix[i] = 1;
        n_fix += fix[i];
    }
    tgc_status st = TGC_OK;
    if (n_fix) {
        tgc_rewriter rw;
        st = tgc_rw_begin(&rw, g);
        for (int32_t i = 0; st == TGC_OK && i < g->n_nodes && rw.st == TGC_OK; i++) {
            if (!fix[i]) {
                tgc_rw_copy(&rw, i);
                continue;
            }
            const tgc_node *nd = &g->nodes[i];
            int32_t in[3];
            tgc_attrs none = {0};
            for (int k = 0; k < nd->n_in; k++) {
                in[k] = tgc_rw_new(&rw, nd->in[k]);
                if (k < 2 && kir_is_view_op(g->nodes[nd->in[k]].op))
                    in[k] = tgc_rw_emit(&rw, TGC_OP_CONTIGUOUS, &in[k], 1, &none);
            }
            int32_t v = tgc_rw_emit(&rw, nd->op, in, nd->n_in, &nd->attrs);
            if (v >= 0)
                rw.map[i] = v;
        }
        if (st == TGC_OK && rw.st != TGC_OK) {
            st = rw.st;
            tgc_rw_abort(&rw);
        } else if (st == TGC_OK) {
            st = tgc_rw_finish(&rw);
        }
    }
    free(fix);
    return st;
}

/* Moves every node that depends only on parameters and constants (batch-norm scale and shift from the
 * parameters, masks from constants) ahead of the rest, keeping order otherwise. Fusion
 * lets a node join a group only when its other operands come from older groups, so this
 * is what lets a conv's epilogue take a scale computed from parameters. */
static tgc_status hoist_input_only(tgc_graph *g)
{
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    uint8_t *only = calloc(n, 1);
    if (!only)
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    int moved = 0, seen_other = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        /* parameters and constants qualify; the call's arguments (activations) do not */
        int ok = !(nd->flags & TGC_NODE_MUTATES) && nd->op != TGC_OP_RAND &&
                 nd->op != TGC_OP_DROPOUT &&
                 !(nd->op == TGC_OP_INPUT && nd->attrs.i[0] == TGC_BIND_ARG);
        for (int k = 0; k < nd->n_in && ok; k++)
            ok = only[nd->in[k]];
        only[i] = (uint8_t)ok;
        if (ok && seen_other)
            moved = 1;
        if (!ok)
            seen_other = 1;
    }
    tgc_status st = TGC_OK;
    if (moved) {
        tgc_rewriter rw;
        st = tgc_rw_begin(&rw, g);
        for (int pass = 0; pass < 2 && st == TGC_OK; pass++)
            for (int32_t i = 0; i < g->n_nodes && rw.st == TGC_OK; i++)
                if (only[i] == (pass == 0))
                    tgc_rw_copy(&rw, i);
        if (st == TGC_OK && rw.st != TGC_OK) {
            st = rw.st;
            tgc_rw_abort(&rw);
        } else if (st == TGC_OK) {
            st = tgc_rw_finish(&rw);
        }
    }
    free(only);
    return st;
}

/* ---- compile ---- */

typedef struct ep_ctx {
    const kir_kernel *k;
    const tgc_llvm_slots *slots;
    int failed;
} ep_ctx;

static LLVMValueRef ep_emit(void *ctx, tgc_llvm_unit *u, LLVMValueRef acc, const tgc_gemm_ep_pos *pos)
{
    ep_ctx *e = ctx;
    LLVMValueRef r = tgc_llvm_epilogue_emit(u, e->k, e->slots, acc, pos);
    if (!r) { /* keep the IR well formed; the step reports the failure */
        e->failed = 1;
        return acc;
    }
    return r;
}

/* The conv's GEMM has M = output channels, often a multiple of 8 but not of the default
 * 14-row micro-tile (64 = 4 x 14 + 8 wastes 9% of every pass): on AVX-512 such convs get
 * an 8 x 32 tile (measured 398 vs 363 GFLOP/s on 64 -> 64, 32 x 32, 3 x 3, 2 threads). */
static const tgc_gemm_config *conv_config(const tgc_llvm_unit *u, const kir_kernel *k)
{
    static const tgc_gemm_config mr8 = {.mr = 8};
    tgc_sdim co = k->tpl.co;
    if (u->target->vec_bits == 512 && TGC_SDIM_IS_CONST(co) && co % 14 != 0 && co % 8 == 0)
        return &mr8;
    return NULL;
}

static void art_free(llvm_art *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n_steps; i++) {
        kir_kernel_free(a->steps[i].k);
        tgc_llvm_slots_free(&a->steps[i].slots);
    }
    free(a->steps);
    tgc_llvm_code_free(a->code);
    tgc_graph_free(a->g);
    free(a->slot_of);
    free(a->last_use);
    free(a->def_step);
    if (a->arena)
        tgc_storage_unref(a->arena);
    pthread_mutex_destroy(&a->arena_lock);
    free(a);
}

static int64_t const_product(const kir_kernel *k, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (!TGC_SDIM_IS_CONST(k->extent[d]))
            return 0;
        p *= k->extent[d];
    }
    return p;
}

static void dump_text(const tgc_config *cfg, const char *name, const char *suffix, const char *text)
{
    if (!cfg->dump_dir || !text)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", cfg->dump_dir, name, suffix);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static tgc_status emit_steps(llvm_art *a, const tgc_fusion *fu, const uint8_t *mat,
                             const tgc_config *cfg, const char *name)
{
    tgc_llvm_unit u;
    tgc_status st = tgc_llvm_unit_begin(&u, name);
    if (st != TGC_OK)
        return st;
    ep_ctx *eps = calloc((size_t)(fu->n_groups ? fu->n_groups : 1), sizeof *eps);
    a->steps = calloc((size_t)(fu->n_groups ? fu->n_groups : 1), sizeof *a->steps);
    if (!eps || !a->steps) {
        free(eps);
        tgc_llvm_unit_abort(&u);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    tgc_strbuf kir_text = {0};
    for (int gi = 0; gi < fu->n_groups && st == TGC_OK; gi++) {
        step *s = &a->steps[a->n_steps];
        const tgc_group *gr = &fu->groups[gi];
        if (gr->kind == TGC_GROUP_OPAQUE) {
            s->kind = STEP_OPAQUE;
            s->node = gr->anchor;
            a->n_steps++;
            continue;
        }
        st = kir_lower_group(a->g, fu, gi, mat, &s->k);
        if (st != TGC_OK || !s->k)
            break;
        if (s->k->n_stores == 0 && s->k->kind == KIR_LOOP) {
            kir_kernel_free(s->k); /* nothing read outside: dead after fusion */
            s->k = NULL;
            continue;
        }
        char base[32];
        snprintf(base, sizeof base, "k%d", gi);
        tgc_llvm_unit_name(&u, base, s->name, sizeof s->name);
        if (cfg->dump_dir || (cfg->log & TGC_LOG_KERNELS)) {
            char *t = kir_kernel_to_text(s->k, a->g->syms);
            if (t)
                tgc_sb_puts(&kir_text, t);
            free(t);
        }
        if (s->k->kind == KIR_LOOP) {
            s->kind = STEP_LOOP;
            s->inner_work = const_product(s->k, s->k->n_outer, s->k->n_outer + s->k->n_inner);
            st = tgc_llvm_emit_loop(&u, s->k, s->name, &s->slots);
        } else {
            s->kind = STEP_TEMPLATE;
            st = tgc_llvm_epilogue_slots(s->k, &s->slots);
            eps[gi].k = s->k;
            eps[gi].slots = &s->slots;
            tgc_gemm_epilogue ep = {ep_emit, &eps[gi]};
            if (st == TGC_OK && s->k->kind == KIR_GEMM)
                st = tgc_llvm_gemm_emit(&u, s->name, &ep, &s->gk);
            else if (st == TGC_OK)
                st = tgc_llvm_conv_emit_cfg(&u, s->name, NULL, &ep, conv_config(&u, s->k), &s->gk);
            if (st == TGC_OK && eps[gi].failed)
                st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: the epilogue of kernel k%d uses an "
                                   "op the LLVM codegen does not support", gi);
        }
        a->n_steps++;
        a->kernels++;
    }
    free(eps);
    char *kt = tgc_sb_take(&kir_text);
    if (kt && (cfg->log & TGC_LOG_KERNELS))
        tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc: kernels of '%s':\n%s", name, kt);
    dump_text(cfg, name, "kir.txt", kt);
    free(kt);
    if (st != TGC_OK) {
        tgc_llvm_unit_abort(&u);
        return st;
    }
    char *ir_before = NULL, *ir_after = NULL;
    int want_ir = cfg->dump_dir != NULL;
    st = tgc_llvm_unit_finish(&u, &a->code, want_ir ? &ir_before : NULL, want_ir ? &ir_after : NULL);
    dump_text(cfg, name, "ll", ir_before);
    dump_text(cfg, name, "opt.ll", ir_after);
    free(ir_before);
    free(ir_after);
    for (int i = 0; st == TGC_OK && i < a->n_steps; i++) {
        step *s = &a->steps[i];
        if (s->kind == STEP_LOOP) {
            char base[32];
            snprintf(base, sizeof base, "k%d", s->k->id);
            s->fn = (loop_fn)tgc_llvm_code_lookup(a->code, base);
            if (!s->fn)
                st = TGC_ERR_COMPILE;
        } else if (s->kind == STEP_TEMPLATE) {
            st = tgc_gemm_kernel_bind(&s->gk, a->code);
        }
    }
    return st;
}

/* Buffer slots by lifetime: a value is live from the step that writes it to the last
 * step that reads it; a slot is reused once its value is dead. */
static tgc_status plan_memory(llvm_art *a, const uint8_t *mat)
{
    const tgc_graph *g = a->g;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    a->slot_of = malloc(n * sizeof(int32_t));
    a->last_use = malloc(n * sizeof(int32_t));
    a->def_step = malloc(n * sizeof(int32_t));
    int32_t *slot_free_after = malloc(n * sizeof(int32_t));
    int32_t *base = malloc(n * sizeof(int32_t));
    uint8_t *is_out = calloc(n, 1);
    if (!a->slot_of || !a->last_use || !a->def_step || !slot_free_after || !is_out || !base) {
        free(slot_free_after);
        free(is_out);
        free(base);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        a->last_use[i] = -1;
        a->def_step[i] = -1;
        base[i] = kir_is_view_op(g->nodes[i].op) ? base[g->nodes[i].in[0]] : i;
    }
    for (int i = 0; i < g->n_outputs; i++)
        is_out[base[g->outputs[i]]] = 1;
    for (int si = 0; si < a->n_steps; si++) {
        step *s = &a->steps[si];
        if (s->kind == STEP_OPAQUE) {
            const tgc_node *nd = &g->nodes[s->node];
            for (int k = 0; k < nd->n_in; k++)
                a->last_use[base[nd->in[k]]] = si;
            a->def_step[s->node] = si;
            continue;
        }
        for (int b = 0; b < s->k->n_bufs; b++) {
            int32_t v = s->k->bufs[b].value;
            if (s->k->bufs[b].written) {
                if (a->def_step[v] < 0)
                    a->def_step[v] = si;
            } else {
                a->last_use[v] = si;
            }
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        a->slot_of[i] = -1;
    a->n_slots = 0;
    for (int si = 0; si < a->n_steps; si++) {
        step *s = &a->steps[si];
        if (s->kind == STEP_OPAQUE)
            continue;
        for (int b = 0; b < s->k->n_bufs; b++) {
            int32_t v = s->k->bufs[b].value;
            if (!s->k->bufs[b].written || a->def_step[v] != si || is_out[v] || !mat[v] ||
                g->nodes[v].op == TGC_OP_INPUT)
                continue;
            int slot = -1;
            for (int q = 0; q < a->n_slots && slot < 0; q++)
                if (slot_free_after[q] < si)
                    slot = q;
            if (slot < 0)
                slot = a->n_slots++;
            a->slot_of[v] = slot;
            /* live through its last read (a value nobody reads dies at once) */
            slot_free_after[slot] = a->last_use[v] > si ? a->last_use[v] : si;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        a->last_use[base[g->outputs[i]]] = a->n_steps;
    free(base);
    free(slot_free_after);
    free(is_out);
    return TGC_OK;
}

static tgc_status llvm_compile_named(const tgc_graph *src, const tgc_config *cfg,
                                     const char *name, void **artifact)
{
    llvm_art *a = calloc(1, sizeof *a);
    if (!a)
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    pthread_mutex_init(&a->arena_lock, NULL);
    a->n_threads = tgc_threads_resolve(cfg->num_threads);
    a->g = tgc_graph_clone(src);
    tgc_status st = a->g ? TGC_OK : TGC_ERR_OOM;
    if (st == TGC_OK)
        st = tgc_passes_run_opts(a->g, cfg, name, TGC_DECOMPOSE_KEEP_ACTIVATIONS);
    if (st == TGC_OK)
        st = adaptive_pool_as_matmuls(a->g);
    if (st == TGC_OK)
        st = decompose_attention(a->g);
    if (st == TGC_OK)
        st = materialize_views(a->g);
    if (st == TGC_OK)
        st = contiguous_template_operands(a->g);
    if (st == TGC_OK)
        st = hoist_input_only(a->g);
    tgc_fusion fu = {0};
    uint8_t *mat = NULL;
    if (st == TGC_OK)
        st = tgc_pass_fuse(a->g, &hooks, &fu);
    if (st == TGC_OK && (cfg->log & TGC_LOG_GRAPH)) {
        char *t = tgc_fusion_to_text(a->g, &fu);
        tgc_log_msg(cfg, TGC_LOG_GRAPH, "tgc: fusion groups of '%s':\n%s", name, t ? t : "");
        free(t);
    }
    if (st == TGC_OK && !(mat = kir_materialized(a->g, &fu)))
        st = TGC_ERR_OOM;
    if (st == TGC_OK)
        st = emit_steps(a, &fu, mat, cfg, name);
    if (st == TGC_OK)
        st = plan_memory(a, mat);
    free(mat);
    tgc_fusion_free(&fu);
    if (st != TGC_OK) {
        art_free(a);
        return st == TGC_ERR_OOM && !tgc_last_error()[0]
                   ? tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory")
                   : tgc_keep_error(st, "tgc llvm: compiling '%s' failed", name);
    }
    *artifact = a;
    return TGC_OK;
}

static tgc_status llvm_compile(const tgc_graph *g, const tgc_config *cfg, const char *name,
                               void **artifact)
{
    return llvm_compile_named(g, cfg, name ? name : "graph", artifact);
}

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

static tgc_tensor *bound_input(const llvm_art *a, const tgc_node *nd, const tgc_exec_args *x)
{
    int64_t idx = nd->attrs.i[1];
    switch ((tgc_bind_kind)nd->attrs.i[0]) {
    case TGC_BIND_ARG: return idx < x->n_args ? x->args[idx] : NULL;
    case TGC_BIND_PARAM: return idx < x->n_params ? x->params[idx] : NULL;
    case TGC_BIND_CAPTURED:
    case TGC_BIND_CONST: return idx < x->n_bound ? x->bound[idx] : NULL;
    case TGC_BIND_FOLDED: return idx < a->g->n_consts ? a->g->consts[idx] : NULL;
    }
    return NULL;
}

/* The tensor of value v: computed values are in vals; views are made on demand. */
static tgc_tensor *value_tensor(run_ctx *r, int32_t v)
{
    if (r->vals[v])
        return r->vals[v];
    const tgc_node *nd = &r->a->g->nodes[v];
    if (!kir_is_view_op(nd->op))
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
        ca.p = (tgc_conv_params){ev(r, t->cn), ev(r, t->cc), ev(r, t->ch), ev(r, t->cw),
                                 ev(r, t->co), ev(r, t->kh), ev(r, t->kw), at[0], at[1], at[2],
                                 at[3], at[4], at[5], at[6]};
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
    r->vals[s->node] = tgc_interp_run(nd->op, ins, nd->n_in, &nd->attrs, nd->out.dtype, shape,
                                      nd->out.ndim);
    return r->vals[s->node] ? TGC_OK
                            : tgc_keep_error(TGC_ERR_INTERNAL, "tgc llvm: %s failed",
                                             tgc_op_name(nd->op));
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

/* TGC_PROFILE=1: one line per step and call on stderr (a debugging aid). */
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

static tgc_status llvm_run(void *artifact, const tgc_graph *g0, const tgc_exec_args *x,
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
    for (int32_t i = 0; i < g->n_nodes && st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op != TGC_OP_INPUT)
            continue;
        tgc_tensor *t = bound_input(a, nd, x);
        if (!t)
            st = tgc_set_error(TGC_ERR_INTERNAL, "tgc llvm: input %%%d is not bound", i);
        else if (!tgc_tensor_is_contiguous(t))
            t = tgc_contiguous(t); /* kernels index inputs as row-major */
        r.vals[i] = t;
        if (st == TGC_OK && !t)
            st = tgc_keep_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    int held = st == TGC_OK ? take_arena(&r) : 0;
    void *bufs_small[64];
    int64_t sizes_small[256];
    static int prof = -1;
    if (prof < 0)
        prof = getenv("TGC_PROFILE") != NULL;
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
        int64_t *sizes = s->slots.n <= 256 ? sizes_small : malloc((size_t)s->slots.n * sizeof *sizes);
        if (!bufs || !sizes)
            st = tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
        if (st == TGC_OK)
            st = bind_buffers(&r, s, bufs, sizes);
        if (st == TGC_OK && s->kind == STEP_LOOP) {
            const kir_kernel *k = s->k;
            int64_t rows = 1, row_work = s->inner_work;
            if (k->chunk > 0) {
                int64_t e = ev(&r, k->extent[0]);
                rows = (e + k->chunk - 1) / k->chunk;
                row_work = k->chunk;
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
    return st;
}

static int llvm_supports(tgc_op op)
{
    return op != TGC_OP_INPUT;
}

static int llvm_kernel_count(const void *artifact)
{
    return ((const llvm_art *)artifact)->kernels;
}

static void llvm_release(void *artifact)
{
    art_free(artifact);
}

const tgc_backend *tgc_backend_llvm(void)
{
    static const tgc_backend b = {"llvm",      llvm_supports,     llvm_compile,
                                  llvm_run,    llvm_kernel_count, llvm_release};
    return &b;
}
