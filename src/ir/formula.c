/* The formulas and decompositions of ops.def, and their evaluation (see formula.h). */
#include <math.h> /* INFINITY in ops.def's expressions */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/formula.h"
#include "ir/shape_infer.h"
#include "support/error.h"
/* last: its short macro names must not meet the headers above */
#include "ir/formula_dsl.h"

typedef struct entry {
    const tgc_fexpr *formula, *decomposition;
    tgc_formula_decompose decompose;
} entry;

/* One row per op with either; -Woverride-init would flag an op listed twice. */
static const entry g_entries[TGC_OP_COUNT] = {
#define X(e, name, mn, mx, kind)
#define FORMULA(e, when, expr)                                                                     \
    [TGC_OP_##e].formula = (expr), [TGC_OP_##e].decompose = TGC_FORMULA_DECOMPOSE_##when,
#define DECOMPOSITION(e, expr) [TGC_OP_##e].decomposition = (expr),
#include "ir/ops.def"
#undef X
#undef FORMULA
#undef DECOMPOSITION
};

int tgc_op_has_formula(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT && g_entries[op].formula;
}

tgc_formula_decompose tgc_op_formula_decompose(tgc_op op)
{
    return tgc_op_has_formula(op) ? g_entries[op].decompose : TGC_FORMULA_DECOMPOSE_NEVER;
}

int tgc_op_has_decomposition(tgc_op op)
{
    return (unsigned)op < TGC_OP_COUNT && g_entries[op].decomposition;
}

tgc_dtype tgc_formula_compute_dtype(tgc_dtype out)
{
    if (!tgc_dtype_is_float(out))
        return out;
    return out == TGC_F64 ? TGC_F64 : TGC_F32;
}

/* ---- evaluation ---- */

/* What was built in one evaluation, so equal requests give one value. */
typedef struct memo {
    int tag; /* 1 + tgc_fx_kind */
    tgc_op op;
    int n_in;
    int32_t in[TGC_FX_MAX_IN];
    tgc_attrs a;
    double v;
    int32_t id;
} memo;

#define MEMO_CAP 48

typedef struct fx_eval {
    const tgc_formula_builder *b;
    const int32_t *x;
    int nx;
    int pointwise;
    const tgc_attrs *a;
    tgc_dtype out, compute;
    int n_memo;
    memo m[MEMO_CAP];
} fx_eval;

static int32_t fx_fail(const char *what)
{
    tgc_set_error(TGC_ERR_INTERNAL, "tgc formula: %s", what);
    return -1;
}

static memo *memo_find(fx_eval *e, const memo *k)
{
    for (int i = 0; i < e->n_memo; i++) {
        memo *m = &e->m[i];
        if (m->tag == k->tag && m->op == k->op && m->n_in == k->n_in && m->v == k->v &&
            !memcmp(m->in, k->in, sizeof m->in) && !memcmp(&m->a, &k->a, sizeof m->a))
            return m;
    }
    return NULL;
}

static void memo_add(fx_eval *e, memo *k, int32_t id)
{
    if (id >= 0 && e->n_memo < MEMO_CAP) {
        k->id = id;
        e->m[e->n_memo++] = *k;
    }
}

static memo memo_key(int tag)
{
    memo k;
    memset(&k, 0, sizeof k); /* the attrs' padding too: keys are compared bytewise */
    k.tag = tag;
    return k;
}

static tgc_dtype fx_dtype(const fx_eval *e, tgc_fx_dtype d)
{
    return d == TGC_FD_OUT ? e->out : e->compute;
}

static int attr_ok(int k, int n)
{
    return k >= 0 && k < n;
}

static int cond_holds(const fx_eval *e, const tgc_fcond *c, int *ok)
{
    if (!c) {
        *ok = 0;
        return 0;
    }
    switch (c->kind) {
    case TGC_FC_HAS:
    case TGC_FC_IS:
    case TGC_FC_FIS:
        if (!attr_ok(c->index, c->kind == TGC_FC_FIS ? TGC_MAX_FATTR : TGC_MAX_IATTR)) {
            *ok = 0;
            return 0;
        }
        if (c->kind == TGC_FC_HAS)
            return (e->a->i[c->index] & (int64_t)c->v) != 0;
        if (c->kind == TGC_FC_IS)
            return e->a->i[c->index] == (int64_t)c->v;
        return e->a->f[c->index] == c->v;
    case TGC_FC_NOT: return !cond_holds(e, c->a, ok);
    case TGC_FC_AND: return cond_holds(e, c->a, ok) && cond_holds(e, c->b, ok);
    }
    *ok = 0;
    return 0;
}

static int32_t ev(fx_eval *e, const tgc_fexpr *x);

/* An integer attribute item of an op over first operand x0. */
static int item_value(fx_eval *e, const tgc_farg *it, int32_t x0, int64_t *out)
{
    switch (it->kind) {
    case TGC_FA_LIT: *out = (int64_t)it->v; return 1;
    case TGC_FA_ATTR:
        if (!attr_ok(it->index, TGC_MAX_IATTR))
            return 0;
        *out = e->a->i[it->index];
        return 1;
    case TGC_FA_DIM_MASK:
    case TGC_FA_LAST_DIMS: {
        int n = e->b->shape ? e->b->shape(e->b->ctx, x0, NULL) : -1;
        if (n < 0 || !attr_ok(it->index, TGC_MAX_IATTR))
            return 0;
        int64_t d = e->a->i[it->index];
        if (it->kind == TGC_FA_DIM_MASK) {
            if (d < 0 || d >= (n ? n : 1))
                return 0;
            *out = n ? (int64_t)((uint64_t)1 << d) : 0; /* a 0-d value's dim 0: nothing */
            return 1;
        }
        if (d < 0 || d > n)
            return 0;
        uint64_t m = 0;
        for (int k = n - (int)d; k < n; k++)
            m |= (uint64_t)1 << k;
        *out = (int64_t)m;
        return 1;
    }
    }
    return 0;
}

static int32_t ev_op(fx_eval *e, const tgc_fexpr *x)
{
    memo k = memo_key(1 + TGC_FX_OP);
    k.op = x->op;
    if (x->n_in < 0 || x->n_in > TGC_FX_MAX_IN || x->ni < 0 || x->ni > TGC_FX_MAX_I || x->nf < 0 ||
        x->nf > 2)
        return fx_fail("an op node out of bounds");
    k.n_in = x->n_in;
    for (int j = 0; j < x->n_in; j++)
        if ((k.in[j] = ev(e, x->in[j])) < 0)
            return k.in[j];
    k.a.ni = x->ni;
    k.a.nf = x->nf;
    for (int j = 0; j < x->ni; j++)
        if (!item_value(e, &x->i[j], x->n_in ? k.in[0] : -1, &k.a.i[j]))
            return fx_fail("an integer attribute the operand or the op does not have");
    for (int j = 0; j < x->nf; j++) {
        const tgc_farg *f = &x->f[j];
        if (f->kind == TGC_FA_ATTR && !attr_ok(f->index, TGC_MAX_FATTR))
            return fx_fail("a scalar attribute out of range");
        k.a.f[j] = f->kind == TGC_FA_ATTR ? e->a->f[f->index] : f->v;
    }
    memo *m = memo_find(e, &k);
    if (m)
        return m->id;
    int32_t id = e->b->op(e->b->ctx, x->op, k.in, x->n_in, &k.a);
    memo_add(e, &k, id);
    return id;
}

/* in[0] reshaped against in[1]: per channel ([1, C, 1, ...]) or to its whole shape. */
static int32_t ev_reshape(fx_eval *e, const tgc_fexpr *x)
{
    memo k = memo_key(1 + (int)x->kind);
    k.op = TGC_OP_RESHAPE;
    k.n_in = 2;
    for (int j = 0; j < 2; j++)
        if ((k.in[j] = ev(e, x->in[j])) < 0)
            return k.in[j];
    memo *m = memo_find(e, &k);
    if (m)
        return m->id;
    tgc_sdim shape[TGC_MAX_DIMS];
    int n = e->b->shape ? e->b->shape(e->b->ctx, k.in[1], shape) : -1;
    if (n < 0)
        return fx_fail("a reshape of values without shapes");
    tgc_attrs a;
    memset(&a, 0, sizeof a);
    a.ni = n;
    int sym = 0;
    for (int d = 0; d < n; d++) {
        if (x->kind == TGC_FX_PER_CHANNEL) {
            a.shape.dims[d] = d == 1 ? -1 : 1; /* -1 keeps C symbolic if it is */
        } else {
            a.shape.dims[d] = shape[d];
            sym |= !TGC_SDIM_IS_CONST(shape[d]);
        }
    }
    if (sym) { /* a target of symbolic dims (ops.def's RESHAPE) */
        a.nf = 1;
        a.shape.symbolic = 1;
    }
    int32_t id = e->b->op(e->b->ctx, TGC_OP_RESHAPE, &k.in[0], 1, &a);
    memo_add(e, &k, id);
    return id;
}

static int32_t ev_cast(fx_eval *e, int32_t v, tgc_dtype dt)
{
    if (v < 0)
        return v;
    memo k = memo_key(1 + TGC_FX_CAST);
    k.n_in = 1;
    k.in[0] = v;
    k.a.dtype = dt;
    memo *m = memo_find(e, &k);
    if (m)
        return m->id;
    int32_t id = e->b->cast(e->b->ctx, v, dt);
    memo_add(e, &k, id);
    return id;
}

static int32_t ev(fx_eval *e, const tgc_fexpr *x)
{
    if (!x)
        return fx_fail("an empty expression");
    switch (x->kind) {
    case TGC_FX_INPUT:
        if (x->index < 0 || x->index >= e->nx)
            return fx_fail("an operand the op does not have");
        /* a formula's operands are in the compute dtype */
        return e->pointwise ? ev_cast(e, e->x[x->index], e->compute) : e->x[x->index];
    case TGC_FX_CONST: {
        memo k = memo_key(1 + TGC_FX_CONST);
        k.v = x->v;
        k.a.dtype = fx_dtype(e, x->dt);
        memo *m = memo_find(e, &k);
        if (m)
            return m->id;
        int32_t id = e->b->constant(e->b->ctx, x->v, k.a.dtype);
        memo_add(e, &k, id);
        return id;
    }
    case TGC_FX_CAST:
        return x->n_in == 1 ? ev_cast(e, ev(e, x->in[0]), fx_dtype(e, x->dt))
                            : fx_fail("a cast of other than one value");
    case TGC_FX_OP: return ev_op(e, x);
    case TGC_FX_IF:
    case TGC_FX_REQUIRE: {
        int ok = 1, c = cond_holds(e, x->cond, &ok);
        if (!ok || x->n_in != (x->kind == TGC_FX_IF ? 2 : 1))
            return fx_fail("a condition on attributes the op does not have");
        if (x->kind == TGC_FX_REQUIRE && !c)
            return -2;
        return ev(e, x->in[c ? 0 : 1]);
    }
    case TGC_FX_PER_CHANNEL:
    case TGC_FX_RESHAPE_AS: return x->n_in == 2 ? ev_reshape(e, x) : fx_fail("a bad reshape");
    }
    return fx_fail("an unknown expression node");
}

int32_t tgc_formula_eval(const tgc_fexpr *x, int pointwise, const tgc_formula_builder *b,
                         const int32_t *in, int n_in, const tgc_attrs *a, tgc_dtype out)
{
    static const tgc_attrs none;
    if (!x)
        return -2;
    if (!b || !b->op || !b->constant || !b->cast || (n_in > 0 && !in))
        return fx_fail("an incomplete builder");
    for (int k = 0; k < n_in; k++)
        if (in[k] < 0)
            return -1;
    fx_eval *e = malloc(sizeof *e);
    if (!e) {
        tgc_set_error(TGC_ERR_OOM, "tgc formula: out of memory");
        return -1;
    }
    e->b = b;
    e->x = in;
    e->nx = n_in;
    e->pointwise = pointwise;
    e->a = a ? a : &none;
    e->out = out;
    e->compute = tgc_formula_compute_dtype(out);
    e->n_memo = 0;
    int32_t r = ev(e, x);
    if (pointwise)
        r = ev_cast(e, r, out);
    free(e);
    return r;
}

int32_t tgc_op_formula(tgc_op op, const tgc_formula_builder *b, const int32_t *in, int n_in,
                       const tgc_attrs *a, tgc_dtype out)
{
    if (!tgc_op_has_formula(op))
        return -2;
    return tgc_formula_eval(g_entries[op].formula, 1, b, in, n_in, a, out);
}

int32_t tgc_op_decomposition(tgc_op op, const tgc_formula_builder *b, const int32_t *in, int n_in,
                             const tgc_attrs *a, tgc_dtype out)
{
    if (!tgc_op_has_decomposition(op))
        return -2;
    return tgc_formula_eval(g_entries[op].decomposition, 0, b, in, n_in, a, out);
}

/* ---- support: a builder of dtypes only ---- */

#define SUP_CAP 64

typedef struct sup {
    tgc_formula_builder b; /* ctx: this */
    tgc_dtype dt[SUP_CAP];
    int n;
    int ok;
    tgc_formula_prim_fn prim;
    void *ctx;
} sup;

static int32_t sup_new(sup *s, tgc_dtype dt)
{
    if (s->n >= SUP_CAP) {
        s->ok = 0;
        return -1;
    }
    s->dt[s->n] = dt;
    return s->n++;
}

static int32_t sup_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    sup *s = ctx;
    tgc_vinfo iv[TGC_FX_MAX_IN], out;
    tgc_dtype dts[TGC_FX_MAX_IN];
    for (int k = 0; k < n_in; k++) {
        memset(&iv[k], 0, sizeof iv[k]);
        iv[k].dtype = dts[k] = s->dt[in[k]];
    }
    if (tgc_infer(op, iv, n_in, a, NULL, &out) != TGC_OK) {
        s->ok = 0;
        return -1;
    }
    if (tgc_op_has_formula(op)) {
        int32_t r = tgc_op_formula(op, &s->b, in, n_in, a, out.dtype);
        if (r < 0)
            s->ok = 0;
        return r;
    }
    if (!s->prim(s->ctx, op, out.dtype, dts, n_in))
        s->ok = 0;
    return sup_new(s, out.dtype);
}

static int32_t sup_const(void *ctx, double v, tgc_dtype dt)
{
    (void)v;
    return sup_new(ctx, dt);
}

static int32_t sup_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    sup *s = ctx;
    if (s->dt[x] == dt)
        return x;
    if (!s->prim(s->ctx, TGC_OP_CAST, dt, &s->dt[x], 1))
        s->ok = 0;
    return sup_new(s, dt);
}

int tgc_op_formula_supported(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in,
                             tgc_formula_prim_fn prim, void *ctx)
{
    if (!tgc_op_has_formula(op) || !prim || n_in < 0 || n_in > TGC_FX_MAX_IN)
        return 0;
    sup *s = malloc(sizeof *s);
    if (!s)
        return 0;
    s->b = (tgc_formula_builder){s, sup_op, sup_const, sup_cast, NULL};
    s->n = 0;
    s->ok = 1;
    s->prim = prim;
    s->ctx = ctx;
    int32_t ids[TGC_FX_MAX_IN];
    for (int k = 0; k < n_in; k++)
        ids[k] = sup_new(s, in[k]);
    /* a question, not a failure: the caller's error state is kept */
    tgc_status saved = tgc_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    int32_t r = tgc_op_formula(op, &s->b, ids, n_in, NULL, out);
    int ok = s->ok && r >= 0;
    free(s);
    if (saved != TGC_OK)
        tgc_set_error(saved, "%s", msg);
    else
        tgc_clear_error();
    return ok;
}
