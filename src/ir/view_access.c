/* View chains as affine accesses (see view_access.h). */
#include "ir/view_access.h"

#define SLICE_TO_END ((int64_t)1 << 62)

int tgc_is_view_op(tgc_op op)
{
    return tgc_op_info_of(op)->kind == TGC_KIND_VIEW && op != TGC_OP_CONTIGUOUS;
}

void tgc_sym_contiguous_strides(tgc_symtab *t, const tgc_vinfo *v, tgc_sdim *strides)
{
    tgc_sdim s = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s = tgc_sym_mul(t, s, v->shape[d]);
    }
}

int tgc_dims_mergeable(tgc_symtab *t, const tgc_sdim *sizes, const tgc_sdim *strides, int a, int b,
                       tgc_sdim *merged)
{
    int inner = -1;
    for (int d = b; d >= a; d--) {
        if (tgc_sdim_is(sizes[d], 1))
            continue;
        if (inner >= 0 && !tgc_sdim_same(strides[d], tgc_sym_mul(t, strides[inner], sizes[inner])))
            return 0;
        inner = d;
    }
    /* the walked stride is the innermost non-1 dim's; all size 1: anything works */
    if (merged) {
        int last = -1;
        for (int d = b; d >= a && last < 0; d--)
            if (!tgc_sdim_is(sizes[d], 1))
                last = d;
        *merged = last >= 0 ? strides[last] : 0;
    }
    return 1;
}

static tgc_sdim slice_start(tgc_symtab *t, tgc_sdim len, int64_t v)
{
    if (v == 0)
        return 0;
    if (v >= SLICE_TO_END)
        return len;
    if (v < 0) {
        tgc_sdim pos = tgc_sym_add(t, len, v);
        return tgc_sym_hint(t, pos) < 0 ? 0 : pos;
    }
    return tgc_sym_hint(t, len) < v ? len : v;
}

static int has_zero_dim(const tgc_vinfo *v)
{
    for (int d = 0; d < v->ndim; d++)
        if (tgc_sdim_is(v->shape[d], 0))
            return 1;
    return 0;
}

/* Reshape: pairs groups of input and output dims with equal products and rewrites the
 * strides group by group. */
static int reshape_view(tgc_symtab *t, const tgc_vinfo *in, const tgc_sdim *is,
                        const tgc_vinfo *out, tgc_sdim *os)
{
    /* no elements: no access is ever made, so any strides describe the view (pairing by
     * products would stop at the first 0 with dims of both sides left over) */
    if (has_zero_dim(in) || has_zero_dim(out)) {
        tgc_sym_contiguous_strides(t, out, os);
        return 1;
    }
    int i = 0, o = 0;
    while (i < in->ndim || o < out->ndim) {
        /* size-1 dims pair with nothing */
        if (i < in->ndim && tgc_sdim_is(in->shape[i], 1)) {
            i++;
            continue;
        }
        if (o < out->ndim && tgc_sdim_is(out->shape[o], 1)) {
            os[o++] = 0;
            continue;
        }
        if (i >= in->ndim || o >= out->ndim)
            return 0;
        int i0 = i, o0 = o;
        tgc_sdim pi = in->shape[i++], po = out->shape[o++];
        while (!tgc_sdim_same(pi, po)) {
            int64_t hi = tgc_sym_hint(t, pi), ho = tgc_sym_hint(t, po);
            if (hi < ho && i < in->ndim) {
                pi = tgc_sym_mul(t, pi, in->shape[i++]);
            } else if (ho < hi && o < out->ndim) {
                po = tgc_sym_mul(t, po, out->shape[o++]);
            } else {
                /* equal at trace time but not provably equal (s0*s1 // 6 against s0):
                 * the rest of both shapes has the same element count, so pair it whole */
                i = in->ndim;
                o = out->ndim;
                break;
            }
        }
        tgc_sdim inner;
        if (!tgc_dims_mergeable(t, in->shape, is, i0, i - 1, &inner))
            return 0;
        tgc_sdim s = inner;
        for (int d = o - 1; d >= o0; d--) {
            os[d] = s;
            s = tgc_sym_mul(t, s, out->shape[d]);
        }
    }
    return 1;
}

int tgc_view_of(const tgc_graph *g, int32_t v, tgc_view *out)
{
    tgc_symtab *t = g->syms;
    const tgc_node *nd = &g->nodes[v];
    if (!tgc_is_view_op(nd->op)) {
        out->base = v;
        out->off = 0;
        tgc_sym_contiguous_strides(t, &nd->out, out->stride);
        return 1;
    }
    tgc_view src;
    if (!tgc_view_of(g, nd->in[0], &src))
        return 0;
    const tgc_vinfo *in = &g->nodes[nd->in[0]].out, *o = &nd->out;
    const tgc_attrs *a = &nd->attrs;
    out->base = src.base;
    out->off = src.off;
    switch (nd->op) {
    case TGC_OP_PERMUTE:
        for (int d = 0; d < o->ndim; d++)
            out->stride[d] = src.stride[a->perm.perm[d]];
        return 1;
    case TGC_OP_EXPAND: {
        int lead = o->ndim - in->ndim;
        for (int d = 0; d < o->ndim; d++) {
            int di = d - lead;
            out->stride[d] =
                di < 0 || (tgc_sdim_is(in->shape[di], 1) && !tgc_sdim_is(o->shape[d], 1))
                    ? 0
                    : src.stride[di];
        }
        return 1;
    }
    case TGC_OP_SLICE: {
        int dim = (int)a->slice.dim;
        tgc_sdim start = slice_start(t, in->shape[dim], a->slice.start);
        for (int d = 0; d < o->ndim; d++)
            out->stride[d] = src.stride[d];
        out->stride[dim] = tgc_sym_mul(t, src.stride[dim], a->slice.step);
        out->off = tgc_sym_add(t, src.off, tgc_sym_mul(t, start, src.stride[dim]));
        return 1;
    }
    case TGC_OP_RESHAPE:
    case TGC_OP_SQUEEZE:
    case TGC_OP_UNSQUEEZE:
    case TGC_OP_FLATTEN:
        /* all of these keep the row-major order: a reshape */
        return reshape_view(t, in, src.stride, o, out->stride);
    default: return 0;
    }
}

int tgc_permuted_copy_of(const tgc_graph *g, int32_t i, int32_t *src, int64_t *perm)
{
    const tgc_node *nd = &g->nodes[i];
    if (nd->op != TGC_OP_CONTIGUOUS || nd->n_in != 1)
        return 0;
    const tgc_node *p = &g->nodes[nd->in[0]];
    if (p->op != TGC_OP_PERMUTE || p->n_in != 1 || tgc_is_view_op(g->nodes[p->in[0]].op) ||
        p->attrs.ni != p->out.ndim)
        return 0;
    *src = p->in[0];
    if (perm)
        for (int j = 0; j < p->attrs.ni; j++)
            perm[j] = p->attrs.i[j];
    return 1;
}

int tgc_nhwc_copy_of(const tgc_graph *g, int32_t i, int32_t *src)
{
    int64_t p[TGC_MAX_DIMS];
    return g->nodes[i].out.ndim == 4 && tgc_permuted_copy_of(g, i, src, p) && p[0] == 0 &&
           p[1] == 2 && p[2] == 3 && p[3] == 1;
}

void tgc_permuted_copy_strides(const tgc_graph *g, int32_t i, tgc_sdim *strides)
{
    int32_t src;
    int64_t perm[TGC_MAX_DIMS];
    tgc_sdim cs[TGC_MAX_DIMS];
    const tgc_vinfo *v = &g->nodes[i].out;
    if (!tgc_permuted_copy_of(g, i, &src, perm))
        return;
    tgc_sym_contiguous_strides(g->syms, v, cs);
    for (int j = 0; j < v->ndim; j++)
        strides[perm[j]] = cs[j];
}
