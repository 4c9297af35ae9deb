/* Fused groups -> kernel IR (see lower.h, kir.h).
 *
 * A LOOP group's domain is its reduction input shape (or its pointwise shape): kept dims
 * become outer vars, reduced dims inner vars (a pointwise group keeps only its last dim
 * inner). Every value read from outside the group becomes a load whose access composes the
 * view chain with broadcasting; values other groups read are stored at the phase that
 * computes them. Adjacent vars that every access walks as one are then merged, so
 * contiguous pointwise kernels run as one flat loop and broadcasts stay strided.
 *
 * A composite pointwise op (one with a FORMULA in ops.def: gelu, gelu_tanh, silu, sigmoid,
 * rsqrt) becomes its formula's primitive values here, nested formulas included, wherever
 * it is lowered (loop bodies, values recomputed where read, template epilogues): backends
 * render primitives only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/formula.h"
#include "ir/shape_infer.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "support/error.h"

typedef struct lctx {
    const tgc_graph *g;
    const kir_target *target;
    tgc_symtab *t;
    const tgc_fusion *f;
    const tgc_group *gr;
    kir_kernel *k;
    int32_t *val_of;
    const uint8_t *mat;
    int var_of_dim[TGC_MAX_DIMS];
    const struct tpl_geo *geo; /* a template's epilogue: the accesses are its vars' */
} lctx;

static int is_reduce_op(tgc_op op)
{
    return op == TGC_OP_SUM || op == TGC_OP_MEAN || op == TGC_OP_MAX ||
           op == TGC_OP_ADAPTIVE_AVG_POOL2D;
}

/* An arange its backend computes in a loop kernel: every kernel reading it computes its
 * values from the read's position instead of loading them (arange_value). */
static int inlined_arange(const tgc_graph *g, const tgc_fusion *f, int32_t b)
{
    return g->nodes[b].op == TGC_OP_ARANGE && f->group_of[b] >= 0 &&
           f->groups[f->group_of[b]].kind == TGC_GROUP_LOOP;
}

static int32_t view_base(const tgc_graph *g, int32_t u)
{
    while (tgc_is_view_op(g->nodes[u].op))
        u = g->nodes[u].in[0];
    return u;
}

static int recomputable(const tgc_graph *g, const tgc_fusion *f, int32_t b, int depth);

/* Value u is computed where it is read, never loaded: an arange computed natively (through
 * any view: its element is an affine function of the read's position), or a pointwise node
 * over such values (a causal mask's j > i), read without a view, so the reader's
 * right-aligned broadcast lines its dims up with the node's and with its operands'. */
static int computed_where_read(const tgc_graph *g, const tgc_fusion *f, int32_t u, int depth)
{
    int32_t b = view_base(g, u);
    return inlined_arange(g, f, b) || (u == b && recomputable(g, f, b, depth));
}

/* A pointwise node of a loop group whose operands are all computed where they are read
 * (depth bounds the expression recomputed at each read). */
static int recomputable(const tgc_graph *g, const tgc_fusion *f, int32_t b, int depth)
{
    const tgc_node *nd = &g->nodes[b];
    if (depth <= 0 || nd->n_in == 0 || nd->n_in > 3 || f->group_of[b] < 0 ||
        f->groups[f->group_of[b]].kind != TGC_GROUP_LOOP || tgc_node_effects(nd) ||
        (nd->flags & TGC_NODE_MUTATES) || is_reduce_op(nd->op) || nd->op == TGC_OP_MAX_POOL2D ||
        nd->op == TGC_OP_AVG_POOL2D || nd->op == TGC_OP_RAND || nd->op == TGC_OP_DROPOUT)
        return 0;
    for (int k = 0; k < nd->n_in; k++)
        if (!computed_where_read(g, f, nd->in[k], depth - 1))
            return 0;
    return 1;
}

#define RECOMPUTE_DEPTH 4

/* Element `at` of arange node nd, as interp computes it (k_create.c): start + i * step in
 * double, converted once to the node's dtype. */
static int32_t arange_value(kir_kernel *k, const tgc_node *nd, const kir_access *at)
{
    int32_t i = kir_add_index_val(k, at);
    const double start = nd->attrs.arange.start, step = nd->attrs.arange.step;
    if (i < 0 || (nd->out.dtype == TGC_I64 && start == 0.0 && step == 1.0))
        return i;
    kir_val d = {.kind = KV_OP, .op = TGC_OP_CAST, .dtype = TGC_F64, .n_in = 1, .in = {i}};
    int32_t v = kir_add_val(k, &d);
    kir_val m = {.kind = KV_OP, .op = TGC_OP_MUL_SCALAR, .dtype = TGC_F64, .n_in = 1, .f = {step}};
    m.in[0] = v;
    v = v < 0 ? -1 : kir_add_val(k, &m);
    kir_val a = {.kind = KV_OP, .op = TGC_OP_ADD_SCALAR, .dtype = TGC_F64, .n_in = 1, .f = {start}};
    a.in[0] = v;
    v = v < 0 ? -1 : kir_add_val(k, &a);
    kir_val o = {.kind = KV_OP, .op = TGC_OP_CAST, .dtype = nd->out.dtype, .n_in = 1};
    o.in[0] = v;
    return v < 0 ? -1 : kir_add_val(k, &o);
}

/* Node i reads its operands through read_value (so it can compute them where it reads
 * them): members of loop groups but windows, which load their taps themselves, and template
 * epilogue members (the template's own operands are buffers). */
static int reads_through_values(const tgc_graph *g, const tgc_fusion *f, int32_t i)
{
    if (f->group_of[i] < 0)
        return 0;
    const tgc_group *gr = &f->groups[f->group_of[i]];
    tgc_op op = g->nodes[i].op;
    if (gr->kind == TGC_GROUP_LOOP)
        return op != TGC_OP_MAX_POOL2D && op != TGC_OP_AVG_POOL2D;
    return gr->kind == TGC_GROUP_TEMPLATE && i != gr->anchor;
}

/* 1 when node i is the store of a value *src of its own group in another dim order (a
 * contiguous copy of a permute of *src that fusion joined to *src's group). */
static int permuted_member(const tgc_graph *g, const tgc_fusion *f, int32_t i, int32_t *src)
{
    return f->group_of[i] >= 0 && tgc_permuted_copy_of(g, i, src, NULL) &&
           f->group_of[*src] == f->group_of[i];
}

uint8_t *kir_materialized(const tgc_graph *g, const tgc_fusion *f)
{
    uint8_t *m = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    int32_t *base = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *base);
    if (!m || !base) {
        free(m);
        free(base);
        tgc_set_error(TGC_ERR_OOM, "tgc: out of memory lowering a graph");
        return NULL;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        base[i] = tgc_is_view_op(nd->op) ? base[nd->in[0]] : i;
        int32_t src;
        if (tgc_is_view_op(nd->op) || permuted_member(g, f, i, &src))
            continue;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t u = nd->in[k], b = base[u];
            if (reads_through_values(g, f, i) && computed_where_read(g, f, u, RECOMPUTE_DEPTH))
                continue;
            if (f->group_of[b] != f->group_of[i] || u != b || f->group_of[i] < 0)
                m[b] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        m[base[g->outputs[i]]] = 1;
    free(base);
    return m;
}

/* ---- template geometry ---- */

typedef struct tpl_geo {
    kir_template t;
    int vlo[3], vhi[3]; /* output dims of the epilogue vars */
    int32_t a_base, b_base;
} tpl_geo;

/* Strides of operand u's view broadcast (right-aligned) onto shape S. */
static int broadcast_strides(const tgc_graph *g, int32_t u, const tgc_vinfo *S, int32_t *base,
                             tgc_sdim *off, tgc_sdim *strides)
{
    tgc_view vw;
    if (!tgc_view_of(g, u, &vw))
        return 0;
    const tgc_vinfo *U = &g->nodes[u].out;
    int lead = S->ndim - U->ndim;
    if (lead < 0)
        return 0;
    for (int j = 0; j < S->ndim; j++) {
        int kk = j - lead;
        strides[j] = kk < 0 || (tgc_sdim_is(U->shape[kk], 1) && !tgc_sdim_is(S->shape[j], 1))
                         ? 0
                         : vw.stride[kk];
    }
    *base = vw.base;
    *off = vw.off;
    return 1;
}

static int is_contiguous_view(const tgc_graph *g, int32_t u, int32_t *base)
{
    tgc_view vw;
    if (!tgc_view_of(g, u, &vw) || !tgc_sdim_is(vw.off, 0))
        return 0;
    tgc_sdim cs[TGC_MAX_DIMS];
    const tgc_vinfo *U = &g->nodes[u].out;
    tgc_sym_contiguous_strides(g->syms, U, cs);
    for (int d = 0; d < U->ndim; d++)
        if (!tgc_sdim_is(U->shape[d], 1) && !tgc_sdim_same(cs[d], vw.stride[d]))
            return 0;
    *base = vw.base;
    return 1;
}

/* u is a channels-last view of 4-D shape [A, B, C, D]: a permute of a contiguous [A, C, D, B]
 * buffer (strides C D B, 1, D B, B; size-1 dims' strides free) at offset 0. */
int kir_is_channels_last_view(const tgc_graph *g, int32_t u, int32_t *base)
{
    tgc_view vw;
    const tgc_vinfo *U = &g->nodes[u].out;
    if (U->ndim != 4 || !tgc_view_of(g, u, &vw) || !tgc_sdim_is(vw.off, 0))
        return 0;
    tgc_symtab *t = g->syms;
    tgc_sdim want[4];
    want[1] = 1;
    want[3] = U->shape[1];
    want[2] = tgc_sym_mul(t, U->shape[3], U->shape[1]);
    want[0] = tgc_sym_mul(t, U->shape[2], want[2]);
    for (int d = 0; d < 4; d++)
        if (!tgc_sdim_is(U->shape[d], 1) && !tgc_sdim_same(want[d], vw.stride[d]))
            return 0;
    *base = vw.base;
    return 1;
}

static int tpl_geometry(const tgc_graph *g, int32_t node, tpl_geo *geo)
{
    tgc_symtab *t = g->syms;
    const tgc_node *nd = &g->nodes[node];
    const tgc_vinfo *S = &nd->out;
    memset(geo, 0, sizeof *geo);
    kir_template *p = &geo->t;
    p->op = nd->op;
    p->attrs = nd->attrs;
    /* one dtype for operands and result, accumulated in that dtype (the float32 templates
     * accumulate in float32, as interp's matmul does) */
    p->dtype = p->acc_dtype = p->out_dtype = S->dtype;
    for (int k = 0; k < nd->n_in; k++)
        if (g->nodes[nd->in[k]].out.dtype != S->dtype)
            return 0;
    if (nd->op == TGC_OP_CONV2D) {
        const tgc_vinfo *x = &g->nodes[nd->in[0]].out, *w = &g->nodes[nd->in[1]].out;
        if (x->ndim != 4)
            return 0;
        /* both operands contiguous, else both channels-last (a conv of channels-last x
         * and a contiguous w: the prepare pass gives w a channels-last copy) */
        if (!is_contiguous_view(g, nd->in[0], &geo->a_base) ||
            !is_contiguous_view(g, nd->in[1], &geo->b_base)) {
            if (!kir_is_channels_last_view(g, nd->in[0], &geo->a_base) ||
                !kir_is_channels_last_view(g, nd->in[1], &geo->b_base))
                return 0;
            p->cl = 1;
        }
        p->cn = x->shape[0];
        p->cc = x->shape[1];
        p->ch = x->shape[2];
        p->cw = x->shape[3];
        p->co = w->shape[0];
        p->kh = w->shape[2];
        p->kw = w->shape[3];
        p->oh = S->shape[2];
        p->ow = S->shape[3];
        geo->vlo[0] = geo->vhi[0] = 0;
        geo->vlo[1] = geo->vhi[1] = 1;
        geo->vlo[2] = 2;
        geo->vhi[2] = 3;
        return 1;
    }
    int r = S->ndim;
    tgc_sdim sa[TGC_MAX_DIMS], sb[TGC_MAX_DIMS], sc[TGC_MAX_DIMS];
    tgc_sym_contiguous_strides(t, S, sc);
    if (nd->op == TGC_OP_LINEAR) {
        const tgc_vinfo *x = &g->nodes[nd->in[0]].out, *w = &g->nodes[nd->in[1]].out;
        tgc_view vx, vw;
        if (w->ndim != 2 || x->ndim < 1 || !tgc_view_of(g, nd->in[0], &vx) ||
            !tgc_view_of(g, nd->in[1], &vw))
            return 0;
        tgc_sdim m_stride = 0;
        if (x->ndim >= 2 && !tgc_dims_mergeable(t, x->shape, vx.stride, 0, x->ndim - 2, &m_stride))
            return 0;
        p->batch = 1;
        p->M = 1;
        for (int d = 0; d < x->ndim - 1; d++)
            p->M = tgc_sym_mul(t, p->M, x->shape[d]);
        p->N = w->shape[0];
        p->K = w->shape[1];
        p->a_off = vx.off;
        p->a_rs = m_stride;
        p->a_cs = vx.stride[x->ndim - 1];
        p->b_off = vw.off;
        p->b_rs = vw.stride[1];
        p->b_cs = vw.stride[0];
        p->c_rs = p->N;
        p->a_bs = p->b_bs = p->c_bs = 0;
        geo->a_base = vx.base;
        geo->b_base = vw.base;
        geo->vlo[0] = 0;
        geo->vhi[0] = -1; /* no batch dims */
        geo->vlo[1] = 0;
        geo->vhi[1] = r - 2;
        geo->vlo[2] = geo->vhi[2] = r - 1;
        return 1;
    }
    /* MATMUL: both operands at least 2-D */
    const tgc_vinfo *A = &g->nodes[nd->in[0]].out, *B = &g->nodes[nd->in[1]].out;
    if (A->ndim < 2 || B->ndim < 2 || r < 2)
        return 0;
    tgc_vinfo SA = *S, SB = *S;
    SA.shape[r - 1] = A->shape[A->ndim - 1]; /* [..batch, M, K] */
    SB.shape[r - 2] = B->shape[B->ndim - 2]; /* [..batch, K, N] */
    tgc_sdim offa, offb;
    if (!broadcast_strides(g, nd->in[0], &SA, &geo->a_base, &offa, sa) ||
        !broadcast_strides(g, nd->in[1], &SB, &geo->b_base, &offb, sb))
        return 0;
    p->M = S->shape[r - 2];
    p->N = S->shape[r - 1];
    p->K = SA.shape[r - 1];
    p->a_off = offa;
    p->b_off = offb;
    p->a_rs = sa[r - 2];
    p->a_cs = sa[r - 1];
    p->b_rs = sb[r - 2];
    p->b_cs = sb[r - 1];
    p->c_rs = sc[r - 2];
    p->batch = 1;
    for (int d = 0; d < r - 2; d++)
        p->batch = tgc_sym_mul(t, p->batch, S->shape[d]);
    p->a_bs = p->b_bs = p->c_bs = 0;
    if (r > 2 && (!tgc_dims_mergeable(t, S->shape, sa, 0, r - 3, &p->a_bs) ||
                  !tgc_dims_mergeable(t, S->shape, sb, 0, r - 3, &p->b_bs) ||
                  !tgc_dims_mergeable(t, S->shape, sc, 0, r - 3, &p->c_bs)))
        return 0;
    geo->vlo[0] = 0;
    geo->vhi[0] = r - 3;
    geo->vlo[1] = geo->vhi[1] = r - 2;
    geo->vlo[2] = geo->vhi[2] = r - 1;
    /* a weight shared by the whole batch: fold the batch into M (one big GEMM) */
    if (r > 2 && tgc_sdim_is(p->b_bs, 0) && tgc_sdim_same(p->a_bs, tgc_sym_mul(t, p->M, p->a_rs)) &&
        tgc_sdim_same(p->c_bs, tgc_sym_mul(t, p->M, p->c_rs))) {
        p->M = tgc_sym_mul(t, p->batch, p->M);
        p->batch = 1;
        p->a_bs = p->c_bs = 0;
        geo->vhi[0] = -1;
        geo->vlo[1] = 0;
    }
    return 1;
}

int kir_template_ok(const tgc_graph *g, int32_t node, const kir_target *target)
{
    tpl_geo geo;
    kir_tpl_kind kind = g->nodes[node].op == TGC_OP_CONV2D ? KIR_TPL_CONV : KIR_TPL_GEMM;
    return tpl_geometry(g, node, &geo) && kir_target_has_template(target, kind, geo.t.dtype) &&
           (!geo.t.cl || target->conv_channels_last);
}

/* Epilogue strides of operand u read at output shape S: one merged stride per var. */
static int epilogue_access(const tgc_graph *g, const tpl_geo *geo, const tgc_vinfo *S, int32_t u,
                           kir_access *acc, int32_t *base)
{
    tgc_sdim st[TGC_MAX_DIMS], off;
    if (!broadcast_strides(g, u, S, base, &off, st))
        return 0;
    memset(acc, 0, sizeof *acc);
    acc->off = off;
    for (int v = 0; v < 3; v++)
        if (geo->vhi[v] >= geo->vlo[v] &&
            !tgc_dims_mergeable(g->syms, S->shape, st, geo->vlo[v], geo->vhi[v], &acc->stride[v]))
            return 0;
    return 1;
}

int kir_permuted_store_ok(const tgc_graph *g, int32_t tpl, int32_t node)
{
    int32_t src;
    const tgc_node *t = &g->nodes[tpl];
    return t->op == TGC_OP_CONV2D && tgc_nhwc_copy_of(g, node, &src) &&
           g->nodes[node].out.dtype == t->out.dtype;
}

int kir_epilogue_operand_ok(const tgc_graph *g, int32_t tpl, int32_t node, int32_t operand)
{
    tpl_geo geo;
    kir_access acc;
    int32_t base;
    /* tpl passed kir_template_ok for the target: its dtype is one the template has */
    if (!tpl_geometry(g, tpl, &geo))
        return 0;
    if (g->nodes[node].out.dtype != geo.t.out_dtype)
        return 0;
    return epilogue_access(g, &geo, &g->nodes[node].out, operand, &acc, &base);
}

/* ---- loop kernels ---- */

/* Domain dim of each dim of a value of shape v in this group (full or row shaped). */
static void node_dims(const lctx *c, const tgc_vinfo *v, int *dd)
{
    const tgc_vinfo *D = &c->gr->domain;
    if (v->ndim == D->ndim) {
        for (int j = 0; j < v->ndim; j++)
            dd[j] = j;
        return;
    }
    int j = 0;
    for (int d = 0; d < D->ndim && j < v->ndim; d++)
        if (!((c->gr->red_mask >> d) & 1))
            dd[j++] = d;
}

/* The access reading value u at shape node_shape (right-aligned broadcast): over the loop
 * kernel's vars, or in a template's epilogue over its vars (batch, m, n). 0 when the view
 * is not affine. */
static int read_access(lctx *c, int32_t u, const tgc_vinfo *node_shape, kir_access *at,
                       int32_t *base)
{
    memset(at, 0, sizeof *at);
    if (c->geo)
        return epilogue_access(c->g, c->geo, node_shape, u, at, base);
    tgc_sdim st[TGC_MAX_DIMS], off;
    int dd[TGC_MAX_DIMS];
    if (!broadcast_strides(c->g, u, node_shape, base, &off, st))
        return 0;
    node_dims(c, node_shape, dd);
    at->off = off;
    /* a size-1 dim of the node is index 0 whatever var walks its domain dim (a row-shaped
     * node keeps the reduced dims as 1 while their inner vars run): it adds no stride */
    for (int j = 0; j < node_shape->ndim; j++)
        if (!tgc_sdim_is(st[j], 0) && !tgc_sdim_is(node_shape->shape[j], 1))
            at->stride[c->var_of_dim[dd[j]]] = st[j];
    return 1;
}

/* ---- pointwise values: composite ops expanded through their formulas (ir/formula.h) ---- */

static int32_t val_of_op(lctx *c, tgc_op op, tgc_dtype dt, const int32_t *ins, int n_in,
                         const tgc_attrs *a);

static int32_t kb_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    lctx *c = ctx;
    tgc_op_kind kind = tgc_op_info_of(op) ? tgc_op_info_of(op)->kind : TGC_KIND_SOURCE;
    if (n_in > 3 ||
        (kind != TGC_KIND_BINARY && kind != TGC_KIND_COMPARE && kind != TGC_KIND_TERNARY &&
         kind != TGC_KIND_SCALAR && kind != TGC_KIND_UNARY)) {
        tgc_set_error(TGC_ERR_INTERNAL, "tgc lower: a formula uses %s, which is not pointwise",
                      tgc_op_name(op));
        return -1;
    }
    /* the dtype rule of the op, from shape inference over scalars */
    tgc_vinfo iv[3], out;
    for (int k = 0; k < n_in; k++)
        iv[k] = (tgc_vinfo){.dtype = c->k->vals[in[k]].dtype, .ndim = 0};
    if (tgc_infer(op, iv, n_in, a, NULL, &out) != TGC_OK)
        return -1;
    return val_of_op(c, op, out.dtype, in, n_in, a);
}

static int32_t kb_const(void *ctx, double v, tgc_dtype dt)
{
    lctx *c = ctx;
    kir_val k = {.kind = KV_CONST, .dtype = dt, .cval = v};
    return kir_add_val(c->k, &k);
}

static int32_t kb_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    lctx *c = ctx;
    if (c->k->vals[x].dtype == dt)
        return x;
    kir_val k = {.kind = KV_OP, .op = TGC_OP_CAST, .dtype = dt, .n_in = 1, .in = {x}};
    return kir_add_val(c->k, &k);
}

/* The value of op over ins with result dtype dt: a primitive is one KV_OP, a composite op
 * its formula's primitives, so backends only ever see primitives. */
static int32_t val_of_op(lctx *c, tgc_op op, tgc_dtype dt, const int32_t *ins, int n_in,
                         const tgc_attrs *a)
{
    if (tgc_op_has_formula(op)) {
        const tgc_formula_builder b = {c, kb_op, kb_const, kb_cast, NULL};
        return tgc_op_formula(op, &b, ins, n_in, a, dt);
    }
    kir_val v = {.kind = KV_OP, .op = op, .dtype = dt, .n_in = n_in};
    for (int k = 0; k < n_in && k < 3; k++)
        v.in[k] = ins[k];
    v.f[0] = a->f[0];
    v.f[1] = a->f[1];
    return kir_add_val(c->k, &v);
}

static int32_t add_op(lctx *c, const tgc_node *nd, const int32_t *ins)
{
    return val_of_op(c, nd->op, nd->out.dtype, ins, nd->n_in, &nd->attrs);
}

/* Value u read at shape node_shape from outside the group: a load, or the value computed
 * right there when it is one (computed_where_read). */
static int32_t read_value(lctx *c, int32_t u, const tgc_vinfo *node_shape, int depth)
{
    const tgc_graph *g = c->g;
    int32_t b = view_base(g, u);
    if (u == b && !inlined_arange(g, c->f, b) && recomputable(g, c->f, b, depth)) {
        const tgc_node *nd = &g->nodes[b];
        int32_t ins[3];
        for (int j = 0; j < nd->n_in; j++)
            if ((ins[j] = read_value(c, nd->in[j], node_shape, depth - 1)) < 0)
                return -1;
        return add_op(c, nd, ins);
    }
    kir_load ld = {0};
    int32_t base;
    if (!read_access(c, u, node_shape, &ld.at, &base)) {
        tgc_set_error(TGC_ERR_INTERNAL,
                      "tgc lower: value %%%d is read through a view that is "
                      "not affine",
                      u);
        return -1;
    }
    if (inlined_arange(g, c->f, base))
        return arange_value(c->k, &g->nodes[base], &ld.at);
    ld.at.buf = kir_buf_of(c->k, base, g->nodes[base].out.dtype, 0);
    ld.dtype = g->nodes[base].out.dtype;
    return kir_add_load_val(c->k, &ld);
}

static int32_t operand(lctx *c, int32_t u, const tgc_vinfo *node_shape)
{
    if (c->f->group_of[u] == (int)(c->gr - c->f->groups) && c->val_of[u] >= 0)
        return c->val_of[u];
    return read_value(c, u, node_shape, RECOMPUTE_DEPTH);
}

/* A load of node u's view at the view's offset (its buffer and dtype; the caller sets the
 * strides, guards and fill): 0 (error set, naming what reads it) when u is not affine. */
static int view_load(lctx *c, int32_t u, const char *what, tgc_view *vw, kir_load *ld)
{
    if (!tgc_view_of(c->g, u, vw)) {
        tgc_set_error(TGC_ERR_INTERNAL, "tgc lower: %s input %%%d is not affine", what, u);
        return 0;
    }
    const tgc_dtype dt = c->g->nodes[vw->base].out.dtype;
    memset(ld, 0, sizeof *ld);
    ld->at.buf = kir_buf_of(c->k, vw->base, dt, 0);
    ld->dtype = dt;
    ld->at.off = vw->off;
    return 1;
}

/* flip: one load of its input's view with the reversed dims' strides negated, from their last
 * element (the group's domain is its output's shape, which is its input's). */
static int32_t lower_flip(lctx *c, int32_t i)
{
    const tgc_node *nd = &c->g->nodes[i];
    const tgc_vinfo *O = &nd->out;
    tgc_view vw;
    kir_load ld;
    if (!view_load(c, nd->in[0], "flip", &vw, &ld))
        return -1;
    for (int d = 0; d < O->ndim; d++) {
        if (!((nd->attrs.flip.mask >> d) & 1)) {
            ld.at.stride[c->var_of_dim[d]] = vw.stride[d];
            continue;
        }
        ld.at.off = tgc_sym_add(
            c->t, ld.at.off, tgc_sym_mul(c->t, tgc_sym_add(c->t, O->shape[d], -1), vw.stride[d]));
        ld.at.stride[c->var_of_dim[d]] = tgc_sym_mul(c->t, -1, vw.stride[d]);
    }
    return kir_add_load_val(c->k, &ld);
}

/* PAD: one load of the input at the output's position less each padded dim's leading pad,
 * guarded along the padded dims (at most KIR_MAX_GUARDS: tgc_backend_classify), the pad
 * value outside. Negative pads crop: the same load, its guard then always true there. */
static int32_t lower_pad(lctx *c, int32_t i)
{
    const tgc_node *nd = &c->g->nodes[i];
    const tgc_vinfo *X = &c->g->nodes[nd->in[0]].out, *O = &nd->out;
    tgc_view vw;
    kir_load ld;
    if (!view_load(c, nd->in[0], "pad", &vw, &ld))
        return -1;
    ld.fill = nd->attrs.pad.value;
    for (int d = 0; d < O->ndim; d++)
        ld.at.stride[c->var_of_dim[d]] = vw.stride[d];
    for (int k = 0; k < nd->attrs.pad.n_pairs; k++) {
        int d = O->ndim - 1 - k;
        int64_t before = nd->attrs.pad.pads[2 * k], after = nd->attrs.pad.pads[2 * k + 1];
        if (before == 0 && after == 0)
            continue;
        if (ld.n_guards == KIR_MAX_GUARDS) {
            tgc_set_error(TGC_ERR_INTERNAL, "tgc lower: pad %%%d pads more than %d dims", i,
                          KIR_MAX_GUARDS);
            return -1;
        }
        ld.at.off = tgc_sym_add(c->t, ld.at.off, tgc_sym_mul(c->t, -before, vw.stride[d]));
        kir_access *g = &ld.guard[ld.n_guards];
        g->off = -before;
        g->stride[c->var_of_dim[d]] = 1;
        ld.bound[ld.n_guards++] = X->shape[d];
    }
    return kir_add_load_val(c->k, &ld);
}

/* A max / avg pool over the last two dims: one guarded load per window tap, combined in
 * the DAG (taps outside the input read -inf for max, 0 for avg; avg divides by kh*kw,
 * counting padding as PyTorch's default does). */
static int32_t lower_window(lctx *c, int32_t i)
{
    const tgc_node *nd = &c->g->nodes[i];
    const tgc_attrs *a = &nd->attrs;
    const tgc_vinfo *X = &c->g->nodes[nd->in[0]].out, *O = &nd->out;
    tgc_view vw;
    kir_load base;
    if (!view_load(c, nd->in[0], "pool", &vw, &base))
        return -1;
    int r = O->ndim, is_max = nd->op == TGC_OP_MAX_POOL2D;
    const tgc_pool_attrs *pa = &a->pool;
    int64_t kh = pa->kh, kw = pa->kw, sh = pa->sh, sw = pa->sw, ph = pa->ph, pw = pa->pw;
    int vh = c->var_of_dim[r - 2], vwv = c->var_of_dim[r - 1];
    int32_t acc = -1;
    for (int64_t y = 0; y < kh; y++)
        for (int64_t x = 0; x < kw; x++) {
            kir_load ld = base;
            tgc_sdim tap = tgc_sym_add(c->t, tgc_sym_mul(c->t, y - ph, vw.stride[r - 2]),
                                       tgc_sym_mul(c->t, x - pw, vw.stride[r - 1]));
            ld.at.off = tgc_sym_add(c->t, vw.off, tap);
            for (int d = 0; d < r - 2; d++)
                ld.at.stride[c->var_of_dim[d]] = vw.stride[d];
            ld.at.stride[vh] = tgc_sym_mul(c->t, sh, vw.stride[r - 2]);
            ld.at.stride[vwv] = tgc_sym_mul(c->t, sw, vw.stride[r - 1]);
            ld.n_guards = 2;
            ld.guard[0].off = y - ph;
            ld.guard[0].stride[vh] = sh;
            ld.bound[0] = X->shape[r - 2];
            ld.guard[1].off = x - pw;
            ld.guard[1].stride[vwv] = sw;
            ld.bound[1] = X->shape[r - 1];
            ld.fill = is_max ? -INFINITY : 0.0;
            int32_t v = kir_add_load_val(c->k, &ld);
            if (v < 0)
                return -1;
            if (acc < 0) {
                acc = v;
                continue;
            }
            kir_val comb = {.kind = KV_OP,
                            .op = is_max ? TGC_OP_MAXIMUM : TGC_OP_ADD,
                            .dtype = O->dtype,
                            .n_in = 2,
                            .in = {v, acc}};
            if ((acc = kir_add_val(c->k, &comb)) < 0)
                return -1;
        }
    if (is_max)
        return acc;
    kir_val div = {.kind = KV_OP,
                   .op = TGC_OP_DIV_SCALAR,
                   .dtype = O->dtype,
                   .n_in = 1,
                   .in = {acc},
                   .f = {(double)(kh * kw), 0}};
    return kir_add_val(c->k, &div);
}

static int32_t lower_reduce(lctx *c, int32_t i)
{
    const tgc_node *nd = &c->g->nodes[i];
    const tgc_vinfo *D = &c->gr->domain;
    int32_t x = nd->in[0];
    int in_group = c->f->group_of[x] == c->f->group_of[i];
    int32_t xv = operand(c, x, D);
    if (xv < 0)
        return -1;
    kir_reduce r = {nd->op == TGC_OP_MAX ? KR_MAX : KR_SUM, xv, in_group ? c->f->level[x] : 0};
    int32_t ri = kir_add_reduce(c->k, &r);
    int mean = nd->op != TGC_OP_SUM && nd->op != TGC_OP_MAX;
    /* a mean divides the double accumulator and rounds once, to the output dtype */
    tgc_dtype at = mean ? TGC_F64 : nd->out.dtype;
    kir_val acc = {.kind = KV_ACC, .dtype = at, .index = ri};
    int32_t av = ri < 0 ? -1 : kir_add_val(c->k, &acc);
    if (av < 0 || !mean)
        return av;
    tgc_sdim count = 1;
    for (int d = 0; d < D->ndim; d++)
        if ((c->gr->red_mask >> d) & 1)
            count = tgc_sym_mul(c->t, count, D->shape[d]);
    kir_val cnt = {.kind = KV_SIZE, .dtype = at, .sdim = count};
    int32_t cv = kir_add_val(c->k, &cnt);
    kir_val div = {.kind = KV_OP, .op = TGC_OP_DIV, .dtype = at, .n_in = 2, .in = {av, cv}};
    int32_t dv = cv < 0 ? -1 : kir_add_val(c->k, &div);
    kir_val cast = {
        .kind = KV_OP, .op = TGC_OP_CAST, .dtype = nd->out.dtype, .n_in = 1, .in = {dv}};
    return dv < 0 ? -1 : kir_add_val(c->k, &cast);
}

/* The row-major access of a value of shape v in its own contiguous buffer (offset 0): how a
 * node's result is stored, and which counter each element of a draw takes. at's other fields
 * (buf) are the caller's. */
static void own_access(lctx *c, const tgc_vinfo *v, kir_access *at)
{
    tgc_sdim cs[TGC_MAX_DIMS];
    int dd[TGC_MAX_DIMS];
    tgc_sym_contiguous_strides(c->t, v, cs);
    node_dims(c, v, dd);
    at->off = 0;
    for (int j = 0; j < v->ndim; j++)
        if (!tgc_sdim_is(v->shape[j], 1))
            at->stride[c->var_of_dim[dd[j]]] = cs[j];
}

/* The draw of random node i: its counters are the row-major positions of its elements, so
 * the index is a contiguous access of the node's own shape. */
static int32_t add_rand(lctx *c, int32_t i, kir_rand_dist dist, tgc_dtype dt)
{
    const tgc_vinfo *v = &c->g->nodes[i].out;
    kir_rand r = {0};
    own_access(c, v, &r.at);
    r.at.buf = -1;
    r.node = i;
    r.numel = 1;
    for (int j = 0; j < v->ndim; j++)
        r.numel = tgc_sym_mul(c->t, r.numel, v->shape[j]);
    int32_t ri = kir_add_rand(c->k, &r);
    kir_val rv = {.kind = KV_RAND, .dtype = dt, .index = ri, .dist = dist};
    return ri < 0 ? -1 : kir_add_val(c->k, &rv);
}

/* dropout(x) as interp computes it (k_nn.c): in double, x * (u >= p ? 1 / (1 - p) : 0)
 * with u = tgc_philox_uniform of the element's counter, rounded once to x's dtype. A
 * multiply, not a select, so NaN and -0 propagate. */
static int32_t lower_dropout(lctx *c, int32_t i, int32_t x)
{
    const tgc_node *nd = &c->g->nodes[i];
    const double p = nd->attrs.dropout.p;
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    int32_t u = add_rand(c, i, KIR_RAND_UNIFORM24, TGC_F32);
    kir_val pv = {.kind = KV_CONST, .dtype = TGC_F64, .cval = p};
    int32_t pc = u < 0 ? -1 : kir_add_val(c->k, &pv);
    kir_val ge = {.kind = KV_OP, .op = TGC_OP_GE, .dtype = TGC_BOOL, .n_in = 2, .in = {u, pc}};
    int32_t keep = pc < 0 ? -1 : kir_add_val(c->k, &ge);
    kir_val sv = {.kind = KV_CONST, .dtype = TGC_F64, .cval = scale};
    int32_t sc = keep < 0 ? -1 : kir_add_val(c->k, &sv);
    kir_val zv = {.kind = KV_CONST, .dtype = TGC_F64, .cval = 0.0};
    int32_t zc = sc < 0 ? -1 : kir_add_val(c->k, &zv);
    kir_val w = {
        .kind = KV_OP, .op = TGC_OP_WHERE, .dtype = TGC_F64, .n_in = 3, .in = {keep, sc, zc}};
    int32_t f = zc < 0 ? -1 : kir_add_val(c->k, &w);
    kir_val xd = {.kind = KV_OP, .op = TGC_OP_CAST, .dtype = TGC_F64, .n_in = 1, .in = {x}};
    int32_t xv = f < 0 ? -1 : kir_add_val(c->k, &xd);
    kir_val m = {.kind = KV_OP, .op = TGC_OP_MUL, .dtype = TGC_F64, .n_in = 2, .in = {xv, f}};
    int32_t mv = xv < 0 ? -1 : kir_add_val(c->k, &m);
    kir_val out = {.kind = KV_OP, .op = TGC_OP_CAST, .dtype = nd->out.dtype, .n_in = 1, .in = {mv}};
    return mv < 0 ? -1 : kir_add_val(c->k, &out);
}

static int add_store(lctx *c, int32_t i, int32_t val, int phase)
{
    const tgc_vinfo *v = &c->g->nodes[i].out;
    kir_store s = {0};
    int32_t src;
    if (permuted_member(c->g, c->f, i, &src)) {
        /* src's elements, in i's order: i's strides per dim of src, over src's vars */
        const tgc_vinfo *sv = &c->g->nodes[src].out;
        tgc_sdim st[TGC_MAX_DIMS];
        int dd[TGC_MAX_DIMS];
        tgc_permuted_copy_strides(c->g, i, st);
        node_dims(c, sv, dd);
        for (int j = 0; j < sv->ndim; j++)
            if (!tgc_sdim_is(sv->shape[j], 1))
                s.at.stride[c->var_of_dim[dd[j]]] = st[j];
    } else {
        own_access(c, v, &s.at);
    }
    s.at.buf = kir_buf_of(c->k, i, v->dtype, 1);
    s.val = val;
    s.dtype = v->dtype;
    s.phase = phase;
    return kir_add_store(c->k, &s) >= 0;
}

/* Every access of k (loads, their guards, stores, draws' indices), as pointers; caller frees. NULL
 * on OOM. */
static kir_access **accesses(kir_kernel *k, int *n)
{
    int cap = k->n_stores + k->n_rands + k->n_iotas;
    for (int i = 0; i < k->n_loads; i++)
        cap += 1 + k->loads[i].n_guards;
    kir_access **out = malloc((size_t)(cap ? cap : 1) * sizeof *out);
    *n = 0;
    if (!out)
        return NULL;
    for (int i = 0; i < k->n_loads; i++) {
        out[(*n)++] = &k->loads[i].at;
        for (int g = 0; g < k->loads[i].n_guards; g++)
            out[(*n)++] = &k->loads[i].guard[g];
    }
    for (int i = 0; i < k->n_stores; i++)
        out[(*n)++] = &k->stores[i].at;
    for (int i = 0; i < k->n_rands; i++)
        out[(*n)++] = &k->rands[i].at;
    for (int i = 0; i < k->n_iotas; i++)
        out[(*n)++] = &k->iotas[i];
    return out;
}

static int drop_var(kir_kernel *k, int v)
{
    int nv = k->n_outer + k->n_inner, na;
    kir_access **acc = accesses(k, &na);
    if (!acc)
        return 0;
    for (int a = 0; a < na; a++) {
        memmove(&acc[a]->stride[v], &acc[a]->stride[v + 1],
                (size_t)(nv - v - 1) * sizeof(tgc_sdim));
        acc[a]->stride[nv - 1] = 0;
    }
    free(acc);
    memmove(&k->extent[v], &k->extent[v + 1], (size_t)(nv - v - 1) * sizeof(tgc_sdim));
    if (v < k->n_outer)
        k->n_outer--;
    else
        k->n_inner--;
    return 1;
}

/* Merges var v into var v+1 when every access walks them as one. */
static int try_merge(kir_kernel *k, tgc_symtab *t, int v)
{
    int na;
    kir_access **acc = accesses(k, &na);
    if (!acc)
        return 0;
    int ok = 1;
    for (int a = 0; a < na && ok; a++)
        ok = tgc_sdim_same(acc[a]->stride[v],
                           tgc_sym_mul(t, acc[a]->stride[v + 1], k->extent[v + 1]));
    free(acc);
    if (!ok)
        return 0;
    tgc_sdim merged = tgc_sym_mul(t, k->extent[v], k->extent[v + 1]);
    if (!drop_var(k, v))
        return 0;
    k->extent[v] = merged; /* var v + 1 moved down to v */
    return 1;
}

static void collapse(kir_kernel *k, tgc_symtab *t)
{
    /* size-1 vars go first (keep one so a kernel always has a var) */
    for (int v = k->n_outer + k->n_inner - 1; v >= 0; v--)
        if (tgc_sdim_is(k->extent[v], 1) && k->n_outer + k->n_inner > 1 &&
            !(v >= k->n_outer && k->n_inner == 1))
            drop_var(k, v);
    for (int v = k->n_outer - 2; v >= 0; v--)
        if (v + 1 < k->n_outer)
            try_merge(k, t, v);
    for (int v = k->n_outer + k->n_inner - 2; v >= k->n_outer; v--)
        try_merge(k, t, v);
}

static tgc_status lower_loop(lctx *c)
{
    const tgc_group *gr = c->gr;
    const tgc_vinfo *D = &gr->domain;
    kir_kernel *k = c->k;
    int pure = gr->anchor < 0;
    uint32_t inner_mask = pure ? (D->ndim ? 1u << (D->ndim - 1) : 0) : gr->red_mask;
    int nv = 0;
    for (int d = 0; d < D->ndim; d++)
        if (!((inner_mask >> d) & 1))
            c->var_of_dim[d] = nv++;
    k->n_outer = nv;
    for (int d = 0; d < D->ndim; d++)
        if ((inner_mask >> d) & 1)
            c->var_of_dim[d] = nv++;
    k->n_inner = nv - k->n_outer;
    for (int d = 0; d < D->ndim; d++)
        k->extent[c->var_of_dim[d]] = D->shape[d];
    if (nv == 0) { /* a scalar: one inner iteration */
        k->extent[0] = 1;
        k->n_inner = 1;
    }
    int max_phase = 0;
    for (int m = 0; m < gr->n_members; m++) {
        int32_t i = gr->members[m];
        const tgc_node *nd = &c->g->nodes[i];
        int32_t v, src;
        if (permuted_member(c->g, c->f, i, &src)) {
            v = c->val_of[src]; /* src's value, stored in i's order (add_store) */
        } else if (nd->op == TGC_OP_MAX_POOL2D || nd->op == TGC_OP_AVG_POOL2D) {
            v = lower_window(c, i);
        } else if (nd->op == TGC_OP_FLIP) {
            v = lower_flip(c, i);
        } else if (nd->op == TGC_OP_PAD) {
            v = lower_pad(c, i);
        } else if (nd->op == TGC_OP_RAND) {
            v = add_rand(c, i, nd->attrs.rand.normal != 0 ? KIR_RAND_NORMAL : KIR_RAND_UNIFORM,
                         nd->out.dtype);
        } else if (nd->op == TGC_OP_ARANGE) {
            kir_access at = {0};
            own_access(c, &nd->out, &at);
            v = arange_value(k, nd, &at);
        } else if (nd->op == TGC_OP_DROPOUT) {
            int32_t x = operand(c, nd->in[0], &nd->out);
            v = x < 0 ? -1 : lower_dropout(c, i, x);
        } else if (is_reduce_op(nd->op) && gr->anchor >= 0 && c->f->is_row[i] &&
                   c->g->nodes[nd->in[0]].out.ndim == D->ndim) {
            v = lower_reduce(c, i);
            if (v >= 0 && k->reduces[k->n_reduces - 1].phase > max_phase)
                max_phase = k->reduces[k->n_reduces - 1].phase;
        } else {
            int32_t ins[3];
            for (int j = 0; j < nd->n_in && j < 3; j++)
                if ((ins[j] = operand(c, nd->in[j], &nd->out)) < 0)
                    return tgc_keep_error(TGC_ERR_INTERNAL, "tgc lower: group %d",
                                          (int)(gr - c->f->groups));
            v = add_op(c, nd, ins);
        }
        if (v < 0)
            return tgc_keep_error(TGC_ERR_INTERNAL, "tgc lower: group %d",
                                  (int)(gr - c->f->groups));
        c->val_of[i] = v;
        int row = !pure && c->f->is_row[i];
        if (!row && c->f->level[i] > max_phase)
            max_phase = c->f->level[i];
    }
    for (int m = 0; m < gr->n_members; m++) {
        int32_t i = gr->members[m];
        int row = !pure && c->f->is_row[i];
        if (c->mat[i] && !add_store(c, i, c->val_of[i], row ? -1 : c->f->level[i]))
            return tgc_keep_error(TGC_ERR_OOM, "tgc lower: out of memory");
    }
    k->n_phases = max_phase + 1;
    collapse(k, c->t);
    /* a pointwise domain may also merge across its last dim */
    while (pure && k->n_outer > 0 && try_merge(k, c->t, k->n_outer - 1))
        ;
    kir_schedule_kernel(k, c->target);
    return TGC_OK;
}

static tgc_status lower_template(lctx *c)
{
    const tgc_group *gr = c->gr;
    const tgc_graph *g = c->g;
    kir_kernel *k = c->k;
    int32_t T = gr->anchor;
    const tgc_node *tn = &g->nodes[T];
    tpl_geo geo;
    if (!tpl_geometry(g, T, &geo))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc lower: %%%d does not fit the %s template", T,
                             tgc_op_name(tn->op));
    k->kind = tn->op == TGC_OP_CONV2D ? KIR_CONV : KIR_GEMM;
    k->tpl = geo.t;
    c->geo = &geo;
    const tgc_dtype dt = k->tpl.dtype;
    k->tpl.a = kir_buf_of(k, geo.a_base, dt, 0);
    k->tpl.b = kir_buf_of(k, geo.b_base, dt, 0);
    k->tpl.out = kir_buf_of(k, gr->tip, k->tpl.out_dtype, 1);
    const tgc_vinfo *S = &tn->out;
    kir_val acc = {.kind = KV_ACC, .dtype = k->tpl.acc_dtype, .index = 0};
    int32_t v = kir_add_val(k, &acc);
    if (v >= 0 && tn->n_in == 3) {
        /* bias: per column for linear, per output channel (var m) for conv */
        kir_load ld = {0};
        tgc_view vb;
        if (!tgc_view_of(g, tn->in[2], &vb))
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc lower: bias view of %%%d", T);
        ld.at.buf = kir_buf_of(k, vb.base, dt, 0);
        ld.at.off = vb.off;
        ld.at.stride[tn->op == TGC_OP_CONV2D ? 1 : 2] = vb.stride[0];
        ld.dtype = dt;
        int32_t bv = kir_add_load_val(k, &ld);
        kir_val add = {.kind = KV_OP, .op = TGC_OP_ADD, .dtype = dt, .n_in = 2, .in = {v, bv}};
        v = bv < 0 ? -1 : kir_add_val(k, &add);
    }
    if (v < 0)
        return tgc_keep_error(TGC_ERR_OOM, "tgc lower: out of memory");
    c->val_of[T] = v;
    for (int m = 1; m < gr->n_members; m++) {
        int32_t i = gr->members[m];
        const tgc_node *nd = &g->nodes[i];
        int32_t ins[3], src;
        if (permuted_member(g, c->f, i, &src)) {
            /* the result stored channels-last (fusion takes such a copy only as the tip of
             * a conv whose backend said it can, kir_permuted_store_ok) */
            if (i != gr->tip || tn->op != TGC_OP_CONV2D || !tgc_nhwc_copy_of(g, i, &src))
                return tgc_set_error(TGC_ERR_INTERNAL,
                                     "tgc lower: %%%d is no channels-last store of conv %%%d", i,
                                     T);
            k->tpl.out_cl = 1;
            c->val_of[i] = c->val_of[src];
            continue;
        }
        for (int j = 0; j < nd->n_in && j < 3; j++) {
            int32_t u = nd->in[j];
            if (c->f->group_of[u] == c->f->group_of[i]) {
                ins[j] = c->val_of[u];
                continue;
            }
            if ((ins[j] = read_value(c, u, S, RECOMPUTE_DEPTH)) < 0)
                return tgc_keep_error(TGC_ERR_INTERNAL, "tgc lower: epilogue operand %%%d", u);
        }
        if ((c->val_of[i] = add_op(c, nd, ins)) < 0)
            return tgc_keep_error(TGC_ERR_OOM, "tgc lower: out of memory");
    }
    k->result = c->val_of[gr->tip];
    return TGC_OK;
}

tgc_status kir_lower_group(const tgc_graph *g, const tgc_fusion *f, int gid,
                           const uint8_t *materialized, const kir_target *target, kir_kernel **out)
{
    *out = NULL;
    const tgc_group *gr = &f->groups[gid];
    if (gr->kind == TGC_GROUP_OPAQUE)
        return TGC_OK;
    lctx c = {g,
              target,
              g->syms,
              f,
              gr,
              kir_kernel_new(KIR_LOOP),
              malloc((size_t)g->n_nodes * sizeof(int32_t)),
              materialized,
              {0},
              NULL};
    if (!c.k || !c.val_of) {
        kir_kernel_free(c.k);
        free(c.val_of);
        return tgc_set_error(TGC_ERR_OOM, "tgc lower: out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++)
        c.val_of[i] = -1;
    c.k->id = gid;
    tgc_status st = gr->kind == TGC_GROUP_LOOP ? lower_loop(&c) : lower_template(&c);
    free(c.val_of);
    if (st != TGC_OK) {
        kir_kernel_free(c.k);
        return st;
    }
    *out = c.k;
    return TGC_OK;
}
