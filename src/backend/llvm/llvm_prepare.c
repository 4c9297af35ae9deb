/* Graph preparation for the LLVM backend (see llvm_prepare.h): its own rewrites, then the
 * shared ones (backend/prepare.c); its fusion hooks (backend/classify.c for its target). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/classify.h"
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_prepare.h"
#include "backend/prepare.h"
#include "tensor/tensor_impl.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "support/error.h"
#include "tensor/dtype.h"

/* ---- classification for fusion: the shared classifier for the LLVM target ---- */

static tgc_fuse_class classify(const tgc_graph *g, int32_t i)
{
    return tgc_backend_classify(g, i, tgc_llvm_kir_target());
}

const char *tgc_llvm_opaque_reason(const tgc_graph *g, int32_t node)
{
    const tgc_node *nd = &g->nodes[node];
    if (classify(g, node) != TGC_FUSE_OPAQUE)
        return NULL;
    if (nd->flags & TGC_NODE_MUTATES)
        return "it writes its input in place, which no llvm kernel does";
    switch (tgc_op_fusion_class(nd->op)) {
    case TGC_OPF_POINTWISE: return "no llvm kernel for this op with these dtypes";
    case TGC_OPF_COPY: return "the llvm copy kernels take f32 and f64 only";
    case TGC_OPF_REDUCE: return "the llvm reductions take float inputs and keep their dtype";
    case TGC_OPF_POOL:
        return (nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) &&
                       nd->attrs.pool.exclude_padding
                   ? "the llvm window kernels divide by the whole window (no exclude_padding)"
                   : "the llvm pool kernels take f32 and f64 only";
    case TGC_OPF_TEMPLATE:
        return "the llvm GEMM and conv templates take f32 operands whose views they can stride "
               "through and whose batch dims flatten into one";
    case TGC_OPF_RANDOM: return "the llvm random draws make float dtypes only";
    case TGC_OPF_INDEX: return "the llvm arange kernels make i32, i64, f32 and f64 only";
    case TGC_OPF_OPAQUE:
        if (nd->op == TGC_OP_SDPA)
            return "attention is native on llvm in f32 only";
        if (nd->op == TGC_OP_ALL_REDUCE || nd->op == TGC_OP_COMM_WAIT)
            return "collectives run through the host communicator";
        switch (nd->op) { /* the gradients llvm_ops.c runs natively, for f32 */
        case TGC_OP_CONV2D_GRAD_INPUT:
        case TGC_OP_CONV2D_GRAD_WEIGHT:
        case TGC_OP_MAX_POOL2D_GRAD:
        case TGC_OP_AVG_POOL2D_GRAD:
        case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD:
        case TGC_OP_EMBEDDING_GRAD: return "the llvm kernels for this gradient take f32 only";
        default: break;
        }
        return "no llvm kernel for this op";
    case TGC_OPF_FREE:
    case TGC_OPF_COUNT: break;
    }
    return NULL;
}

static const tgc_fuse_hooks hooks = {classify, kir_epilogue_operand_ok, NULL};

const tgc_fuse_hooks *tgc_llvm_fuse_hooks(void)
{
    return &hooks;
}

/* The averaging matrix of an adaptive pool along one dim: [out, in] (or its transpose),
 * row i weighting input window [floor(i*in/out), ceil((i+1)*in/out)) equally. Outside any
 * scope, for tgc_rw_emit_const. */
static tgc_tensor *pool_matrix(int64_t in, int64_t out, int transpose)
{
    int64_t shape[2] = {transpose ? in : out, transpose ? out : in};
    tgc_tensor *t = tgc_tensor_new(shape, 2, TGC_F32, tgc_cpu());
    if (!t)
        return NULL;
    float *d = tgc_host_data(t);
    memset(d, 0, (size_t)(in * out) * sizeof(float));
    for (int64_t i = 0; i < out; i++) {
        int64_t lo = i * in / out, hi = ((i + 1) * in + out - 1) / out;
        for (int64_t k = lo; k < hi; k++)
            d[transpose ? k * out + i : i * in + k] = 1.0f / (float)(hi - lo);
    }
    tgc_scope_release(t);
    return t;
}

/* A 0-d f32 constant of the graph. */
static int32_t emit_scalar_const(tgc_rewriter *rw, float v)
{
    tgc_tensor *t = tgc_tensor_new(NULL, 0, TGC_F32, tgc_cpu());
    if (t) {
        *(float *)tgc_host_data(t) = v;
        tgc_scope_release(t);
    }
    return tgc_rw_emit_const(rw, t);
}

/* An adaptive average pool to other than 1x1, over constant sizes. */
static int adaptive_pool_to_gemm(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op != TGC_OP_ADAPTIVE_AVG_POOL2D)
        return 0;
    const tgc_vinfo *x = &g->nodes[nd->in[0]].out;
    return x->dtype == TGC_F32 && x->ndim >= 3 && TGC_SDIM_IS_CONST(x->shape[x->ndim - 1]) &&
           TGC_SDIM_IS_CONST(x->shape[x->ndim - 2]) &&
           !(nd->attrs.adaptive_pool.out_h == 1 && nd->attrs.adaptive_pool.out_w == 1);
}

/* Such a pool (whose windows move by a non-integer step, so no affine window load expresses
 * it) is out = P_h . x . P_w^T with constant averaging matrices: two small GEMMs instead of
 * an interp call. */
static int32_t emit_adaptive_pool(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    const tgc_vinfo *x = &g->nodes[nd->in[0]].out;
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    tgc_attrs none = {0};
    int32_t pw = tgc_rw_emit_const(rw, pool_matrix(W, nd->attrs.adaptive_pool.out_w, 1));
    int32_t ph =
        pw >= 0 ? tgc_rw_emit_const(rw, pool_matrix(H, nd->attrs.adaptive_pool.out_h, 0)) : -1;
    int32_t a[2] = {tgc_rw_new(rw, nd->in[0]), pw};
    int32_t y = ph >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, a, 2, &none) : -1;
    int32_t b[2] = {ph, y};
    return y >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, b, 2, &none) : -1;
}

static int sdpa_decomposable(const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op != TGC_OP_SDPA || nd->out.dtype != TGC_F32)
        return 0;
    for (int k = 0; k < 3; k++)
        if (g->nodes[nd->in[k]].out.ndim < 2)
            return 0;
    return 1;
}

/* -inf where key position j > query position i (top-left aligned, PyTorch's is_causal),
 * else the scores sc: the positions are aranges (KV_INDEX values), so the mask is computed
 * in the kernel that reads it, never stored or loaded. */
static int32_t emit_causal(tgc_rewriter *rw, const tgc_graph *g, const tgc_node *nd, int32_t sc)
{
    const tgc_vinfo *q = &g->nodes[nd->in[0]].out, *k = &g->nodes[nd->in[1]].out;
    tgc_attrs ar = {.ni = 1, .nf = 2, .dtype = TGC_I64};
    ar.arange.n = q->shape[q->ndim - 2];
    ar.arange.step = 1.0;
    int32_t qi = tgc_rw_emit(rw, TGC_OP_ARANGE, NULL, 0, &ar);
    ar.arange.n = k->shape[k->ndim - 2];
    int32_t kj = qi >= 0 ? tgc_rw_emit(rw, TGC_OP_ARANGE, NULL, 0, &ar) : -1;
    tgc_attrs col = {.ni = 1}, row = {.ni = 1};
    col.dim.dim = 1;
    row.dim.dim = 0;
    qi = kj >= 0 ? tgc_rw_emit(rw, TGC_OP_UNSQUEEZE, &qi, 1, &col) : -1; /* [L, 1] */
    kj = qi >= 0 ? tgc_rw_emit(rw, TGC_OP_UNSQUEEZE, &kj, 1, &row) : -1; /* [1, S] */
    int32_t ji[2] = {kj, qi};
    int32_t later = kj >= 0 ? tgc_rw_emit(rw, TGC_OP_GT, ji, 2, &(tgc_attrs){0}) : -1;
    int32_t ninf = later >= 0 ? emit_scalar_const(rw, -INFINITY) : -1;
    int32_t w[3] = {later, ninf, sc};
    return ninf >= 0 ? tgc_rw_emit(rw, TGC_OP_WHERE, w, 3, &(tgc_attrs){0}) : -1;
}

/* Dropout on the weights p as interp's attention draws it (k_nn.c): one draw over the
 * row-major [out batch..., L, S] weights, element (b, i, j) at counter base + (b L + i) S + j,
 * kept iff tgc_philox_uniform >= dropout_p and scaled by 1 / (1 - dropout_p). The weights are
 * expanded to the result's batch dims first, so the dropout node draws exactly those counters
 * (the same count, at the attention node's place in the graph's random order). */
static int32_t emit_attention_dropout(tgc_rewriter *rw, const tgc_node *nd, int32_t p)
{
    const int nb = nd->out.ndim - 2;
    tgc_attrs ex = {.ni = nb + 2, .nf = 1};
    ex.shape.symbolic = 1; /* the targets are the result's (possibly symbolic) dims */
    for (int d = 0; d < nb; d++)
        ex.shape.dims[d] = nd->out.shape[d];
    ex.shape.dims[nb] = ex.shape.dims[nb + 1] = -1;
    int32_t pe = tgc_rw_emit(rw, TGC_OP_EXPAND, &p, 1, &ex);
    tgc_attrs dr = {.nf = 1};
    dr.dropout.p = nd->attrs.sdpa.dropout_p;
    return pe >= 0 ? tgc_rw_emit(rw, TGC_OP_DROPOUT, &pe, 1, &dr) : -1;
}

/* scaled_dot_product_attention as the GEMMs and the softmax the fuser knows:
 * matmul(q, k^T) * scale (+ float mask, or -inf where a bool mask is false; then -inf past
 * the diagonal when causal, whatever the mask adds there), a softmax whose fully masked rows
 * (max -inf) give zeros (interp's semantics; rows with NaN scores stay NaN), dropout with
 * interp's counters, then matmul(., v). The scores' epilogue and the softmax fuse; both GEMMs
 * are templates. */
static int32_t emit_sdpa(tgc_rewriter *rw, const tgc_graph *g, int32_t i)
{
    const tgc_node *nd = &g->nodes[i];
    tgc_attrs none = {0};
    int32_t q = tgc_rw_new(rw, nd->in[0]), k = tgc_rw_new(rw, nd->in[1]),
            v = tgc_rw_new(rw, nd->in[2]);
    int rk = g->nodes[nd->in[1]].out.ndim;
    tgc_attrs perm = {.ni = rk};
    for (int d = 0; d < rk; d++)
        perm.perm.perm[d] = d;
    perm.perm.perm[rk - 2] = rk - 1;
    perm.perm.perm[rk - 1] = rk - 2;
    int32_t kt = tgc_rw_emit(rw, TGC_OP_PERMUTE, &k, 1, &perm);
    int32_t qk[2] = {q, kt};
    int32_t sc = kt >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, qk, 2, &none) : -1;
    tgc_attrs mul = {.nf = 1};
    mul.scalar.value = nd->attrs.sdpa.scale;
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
    if (sc >= 0 && nd->attrs.sdpa.causal)
        sc = emit_causal(rw, g, nd, sc);
    if (sc < 0)
        return -1;
    int r = tgc_rw_type(rw, sc)->ndim;
    tgc_attrs red = {.ni = 2};
    red.reduce.mask = (int64_t)1 << (r - 1);
    red.reduce.keepdim = 1;
    int32_t mx = tgc_rw_emit(rw, TGC_OP_MAX, &sc, 1, &red);
    int32_t sd[2] = {sc, mx};
    int32_t d = mx >= 0 ? tgc_rw_emit(rw, TGC_OP_SUB, sd, 2, &none) : -1;
    int32_t e = d >= 0 ? tgc_rw_emit(rw, TGC_OP_EXP, &d, 1, &none) : -1;
    int32_t z = e >= 0 ? tgc_rw_emit(rw, TGC_OP_SUM, &e, 1, &red) : -1;
    int32_t ez[2] = {e, z};
    int32_t pr = z >= 0 ? tgc_rw_emit(rw, TGC_OP_DIV, ez, 2, &none) : -1;
    /* A row is fully masked when its max is -inf; NaN scores are not masked and stay NaN. */
    int32_t zero = pr >= 0 ? emit_scalar_const(rw, 0.0f) : -1;
    int32_t ninf = zero >= 0 ? emit_scalar_const(rw, -INFINITY) : -1;
    int32_t mn[2] = {mx, ninf};
    int32_t ok = ninf >= 0 ? tgc_rw_emit(rw, TGC_OP_NE, mn, 2, &none) : -1;
    int32_t w[3] = {ok, pr, zero};
    int32_t p = ok >= 0 ? tgc_rw_emit(rw, TGC_OP_WHERE, w, 3, &none) : -1;
    if (p >= 0 && nd->attrs.sdpa.dropout_p > 0.0)
        p = emit_attention_dropout(rw, nd, p);
    int32_t pv[2] = {p, v};
    return p >= 0 ? tgc_rw_emit(rw, TGC_OP_MATMUL, pv, 2, &none) : -1;
}

tgc_status tgc_llvm_prepare(tgc_graph *g)
{
    tgc_status st = tgc_rw_nodes(g, adaptive_pool_to_gemm, emit_adaptive_pool, NULL);
    if (st == TGC_OK)
        st = tgc_rw_nodes(g, sdpa_decomposable, emit_sdpa, NULL);
    return st == TGC_OK ? tgc_prepare_for_target(g, tgc_llvm_kir_target()) : st;
}
