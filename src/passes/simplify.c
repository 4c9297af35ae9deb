/* Algebraic simplification and view canonicalization.
 *
 * Only identities that are exact in floating point: x*1, x/1, x-(+0) and x+(-0) give x
 * bit for bit (x+(+0) does not: -0 + 0 = +0, so it stays unless x is an integer).
 * mul_scalar chains merge when one factor is a power of two: scaling by 2^k commutes with
 * rounding, so x*a*b == x*(a*b) except where the intermediate overflows or underflows
 * (the merged form then is the more accurate one). View chains collapse to one reshape or
 * one permute; squeeze/unsqueeze/flatten with constant dims become reshapes, so the
 * lowering meets fewer view kinds. Each rewrite is checked by re-inferring its type. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/shape_infer.h"
#include "passes/passes.h"
#include "support/error.h"

typedef struct sp {
    tgc_rewriter *rw;
    const uint8_t *mutated; /* old ids */
} sp;

static const tgc_node *producer(const sp *c, int32_t v)
{
    return &c->rw->next.nodes[v];
}

static int is_reshape_like(tgc_op op)
{
    return op == TGC_OP_RESHAPE || op == TGC_OP_FLATTEN || op == TGC_OP_SQUEEZE ||
           op == TGC_OP_UNSQUEEZE;
}

static int is_pow2(double s)
{
    int e;
    return isfinite(s) && s != 0.0 && fabs(frexp(s, &e)) == 0.5;
}

/* x op scalar == x exactly (the node keeps x's dtype). */
static int scalar_identity(const tgc_node *nd, tgc_dtype xdt)
{
    double s = nd->op == TGC_OP_CLAMP ? 0.0 : nd->attrs.scalar.value; /* CLAMP: never */
    int is_int = !tgc_dtype_is_float(xdt);
    switch (nd->op) {
    case TGC_OP_MUL_SCALAR:
    case TGC_OP_DIV_SCALAR: return s == 1.0;
    case TGC_OP_ADD_SCALAR: return s == 0.0 && (signbit(s) || is_int);
    case TGC_OP_SUB_SCALAR: return s == 0.0 && (!signbit(s) || is_int);
    default: return 0;
    }
}

/* A value equal to x (a copy or a view of it), or -1. in: the node's new input ids. */
static int32_t forward_to(const sp *c, const tgc_node *nd, const int32_t *in)
{
    if (nd->n_in < 1)
        return -1;
    const tgc_node *x = producer(c, in[0]);
    const int copies = c->mutated[nd->in[0]]; /* a copy of a written value must stay a copy */
    const tgc_op_kind kind = tgc_op_info_of(nd->op)->kind;
    if (!tgc_vinfo_same(&nd->out, &x->out)) {
        /* neg(neg y): the type is y's */
        if (nd->op == TGC_OP_NEG && x->op == TGC_OP_NEG && !copies &&
            tgc_vinfo_same(&nd->out, &producer(c, x->in[0])->out))
            return x->in[0];
        return -1;
    }
    if (kind == TGC_KIND_SCALAR && !copies && scalar_identity(nd, x->out.dtype))
        return in[0];
    if (nd->op == TGC_OP_CAST && !copies)
        return in[0];
    if (nd->op == TGC_OP_NEG && x->op == TGC_OP_NEG && !copies)
        return x->in[0];
    if (nd->op == TGC_OP_CONTIGUOUS && !copies) {
        /* kernels write dense results; folded constants are dense; arguments may not be */
        tgc_op_kind pk = tgc_op_info_of(x->op)->kind;
        int dense =
            x->op == TGC_OP_INPUT ? x->attrs.input.kind == TGC_BIND_FOLDED : pk != TGC_KIND_VIEW;
        return dense ? in[0] : -1;
    }
    if (nd->op == TGC_OP_PERMUTE) {
        for (int k = 0; k < nd->attrs.ni; k++)
            if (nd->attrs.perm.perm[k] != k)
                return -1;
        return in[0];
    }
    /* same shape: reshape, flatten and expand change nothing; a slice takes everything */
    if (kind == TGC_KIND_VIEW && nd->op != TGC_OP_CONTIGUOUS)
        return in[0];
    return -1;
}

/* reshape targets for `want` from an input of type `from`: constant dims as they are,
 * a symbolic dim copied (0) where `from` has the same dim at that position, at most one
 * other symbolic dim inferred (-1). Returns 0 when not expressible. */
static int reshape_attrs(const tgc_vinfo *from, const tgc_vinfo *want, tgc_attrs *a)
{
    int inferred = 0;
    memset(a, 0, sizeof *a);
    a->ni = want->ndim;
    for (int d = 0; d < want->ndim; d++) {
        tgc_sdim w = want->shape[d];
        if (TGC_SDIM_IS_CONST(w) && w != 0)
            a->shape.dims[d] = w;
        else if (d < from->ndim && tgc_sym_same(from->shape[d], w))
            a->shape.dims[d] = 0;
        else if (!inferred++)
            a->shape.dims[d] = -1;
        else
            return 0;
    }
    return 1;
}

/* A rewrite of nd over new values, or -1. */
static int32_t rewrite(sp *c, const tgc_node *nd, const int32_t *in)
{
    tgc_rewriter *rw = c->rw;
    if (nd->n_in < 1)
        return -1;
    const tgc_node *x = producer(c, in[0]);
    if (nd->op == TGC_OP_MUL_SCALAR && x->op == TGC_OP_MUL_SCALAR &&
        tgc_dtype_is_float(nd->out.dtype) && x->out.dtype == nd->out.dtype &&
        producer(c, x->in[0])->out.dtype == nd->out.dtype &&
        (is_pow2(nd->attrs.scalar.value) || is_pow2(x->attrs.scalar.value))) {
        double s = nd->attrs.scalar.value * x->attrs.scalar.value;
        if (!isfinite(s))
            return -1;
        tgc_attrs a = tgc_attrs_of(TGC_OP_MUL_SCALAR);
        a.scalar.value = s;
        int32_t base = x->in[0];
        return tgc_rw_emit(rw, TGC_OP_MUL_SCALAR, &base, 1, &a);
    }
    if (nd->op == TGC_OP_PERMUTE && x->op == TGC_OP_PERMUTE) {
        tgc_attrs a = nd->attrs;
        int identity = 1;
        for (int k = 0; k < nd->attrs.ni; k++) { /* out[k] = y[p1[p2[k]]] */
            a.perm.perm[k] = x->attrs.perm.perm[nd->attrs.perm.perm[k]];
            identity &= a.perm.perm[k] == k;
        }
        int32_t base = x->in[0];
        if (identity)
            return base;
        return tgc_rw_emit(rw, TGC_OP_PERMUTE, &base, 1, &a);
    }
    if (is_reshape_like(nd->op)) {
        /* squeeze/unsqueeze/flatten become reshapes wherever the target is expressible
         * (constant dims, symbolic dims copied in place, one inferred) */
        int chain = is_reshape_like(x->op) && !c->mutated[nd->in[0]];
        if (!chain && nd->op == TGC_OP_RESHAPE)
            return -1;
        int32_t base = chain ? x->in[0] : in[0];
        if (tgc_vinfo_same(&producer(c, base)->out, &nd->out))
            return base;
        tgc_attrs a;
        if (!reshape_attrs(&producer(c, base)->out, &nd->out, &a))
            return -1;
        return tgc_rw_emit(rw, TGC_OP_RESHAPE, &base, 1, &a);
    }
    return -1;
}

tgc_status tgc_pass_simplify(tgc_graph *g)
{
    tgc_rewriter rw;
    if (tgc_rw_begin(&rw, g) != TGC_OK)
        return rw.st;
    uint8_t *mutated = tgc_pass_mutated_values(g);
    if (!mutated) {
        tgc_rw_abort(&rw);
        return tgc_last_status();
    }
    sp c = {&rw, mutated};
    for (int i = 0; i < g->n_nodes && rw.st == TGC_OK; i++) {
        const tgc_node *nd = &g->nodes[i];
        int32_t in[8];
        int32_t r = -1;
        if (nd->op != TGC_OP_INPUT && nd->n_in <= 8 && !(nd->flags & TGC_NODE_MUTATES)) {
            for (int k = 0; k < nd->n_in; k++)
                in[k] = tgc_rw_new(&rw, nd->in[k]);
            r = forward_to(&c, nd, in);
            if (r < 0) {
                int mark = rw.next.n_nodes;
                r = rewrite(&c, nd, in);
                /* keep a rewrite only if it reproduces the node's type exactly */
                if (r < 0 || !tgc_vinfo_same(tgc_rw_type(&rw, r), &nd->out)) {
                    tgc_rw_rollback(&rw, mark);
                    r = -1;
                }
            }
        }
        if (r >= 0) {
            rw.map[i] = r;
            rw.changed = 1;
        } else {
            tgc_rw_copy(&rw, i);
        }
    }
    free(mutated);
    return tgc_rw_finish(&rw);
}
