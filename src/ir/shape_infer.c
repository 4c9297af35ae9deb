/* Shape and dtype inference: the helpers every rule shares, dtype promotion, and the
 * pointwise, reduction and random rules. Views, movement and indexing are in
 * shape_infer_view.c; linear algebra and nn ops in shape_infer_nn.c, their gradients in
 * shape_infer_grad.c; tgc_infer, which dispatches to the rules, in shape_infer_dispatch.c. */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/shape_infer_impl.h"
#include "tgc/dist.h"
#include "support/checked.h"

/* ---- dtypes ---- */

tgc_dtype si_float_of(tgc_dtype dt)
{
    return tgc_dtype_is_float(dt) ? dt : TGC_F32;
}

/* ---- messages ---- */

tgc_status si_fail(si_ctx *c, tgc_status s, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tgc_set_error(s, "tgc_%s: %s", tgc_op_name(c->op), msg);
}

static char *next_buf(si_ctx *c)
{
    char *b = c->buf[c->next_buf];
    c->next_buf = (c->next_buf + 1) % SI_NBUF;
    return b;
}

/* Messages show this call's sizes (a symbolic dim's trace-time value), as an eager call
 * would, not the symbols of a dynamic variant. */
static tgc_sdim concrete(const si_ctx *c, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) || !TGC_SDIM_IS_VALID(d) ? d : tgc_sym_hint(c->syms, d);
}

const char *si_shape(si_ctx *c, const tgc_vinfo *v)
{
    char *b = next_buf(c);
    tgc_vinfo cv = *v;
    for (int k = 0; k < cv.ndim && k < TGC_MAX_DIMS; k++)
        cv.shape[k] = concrete(c, cv.shape[k]);
    tgc_vinfo_format_shape(NULL, &cv, b, SI_BUFLEN);
    return b;
}

const char *si_dims(si_ctx *c, const tgc_sdim *d, int n)
{
    tgc_vinfo v = {.dtype = TGC_F32, .ndim = n};
    memcpy(v.shape, d, sizeof(tgc_sdim) * (size_t)n);
    return si_shape(c, &v);
}

const char *si_dim(si_ctx *c, tgc_sdim d)
{
    char *b = next_buf(c);
    tgc_sym_format(NULL, concrete(c, d), b, SI_BUFLEN);
    return b;
}

/* ---- dims ---- */

int64_t si_hint(const si_ctx *c, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ? d : tgc_sym_hint(c->syms, d);
}

int si_ge(si_ctx *c, tgc_sdim d, int64_t bound)
{
    if (TGC_SDIM_IS_CONST(d) || !c->syms)
        return TGC_SDIM_IS_CONST(d) && d >= bound;
    return tgc_sym_assume_ge(c->syms, d, bound);
}

int si_eq(si_ctx *c, tgc_sdim a, tgc_sdim b)
{
    if (tgc_sym_same(a, b))
        return 1;
    if ((TGC_SDIM_IS_CONST(a) && TGC_SDIM_IS_CONST(b)) || !c->syms)
        return 0;
    return tgc_sym_unify(c->syms, a, b);
}

static int broadcast_dim(si_ctx *c, tgc_sdim a, tgc_sdim b, tgc_sdim *r)
{
    if (tgc_sym_same(a, b) || b == 1) {
        *r = a;
        return 1;
    }
    if (a == 1) {
        *r = b;
        return 1;
    }
    if (!si_eq(c, a, b))
        return 0;
    *r = TGC_SDIM_IS_CONST(b) ? b : a; /* keep the more specific dim */
    return 1;
}

int si_broadcast_dims(si_ctx *c, const tgc_sdim *x, int nx, const tgc_sdim *y, int ny, tgc_sdim *r,
                      int *nr)
{
    int n = nx > ny ? nx : ny;
    for (int k = 0; k < n; k++) {
        int ix = nx - n + k, iy = ny - n + k;
        if (ix < 0)
            r[k] = y[iy];
        else if (iy < 0)
            r[k] = x[ix];
        else if (!broadcast_dim(c, x[ix], y[iy], &r[k]))
            return 0;
    }
    *nr = n;
    return 1;
}

tgc_sdim si_prod(si_ctx *c, const tgc_sdim *d, int n)
{
    tgc_sdim p = 1;
    for (int k = 0; k < n; k++)
        p = tgc_sym_mul(c->syms, p, d[k]);
    return p;
}

/* ---- checks ---- */

tgc_status si_need_rank(si_ctx *c, int k, const char *name, int lo, int hi)
{
    int nd = c->in[k].ndim;
    if (nd >= lo && nd <= hi)
        return TGC_OK;
    if (lo == hi)
        return si_fail(c, TGC_ERR_SHAPE, "%s must have %d dims, got %s", name, lo,
                       si_shape(c, &c->in[k]));
    if (hi >= TGC_MAX_DIMS)
        return si_fail(c, TGC_ERR_SHAPE, "%s must have at least %d dims, got %s", name, lo,
                       si_shape(c, &c->in[k]));
    return si_fail(c, TGC_ERR_SHAPE, "%s must have %d to %d dims, got %s", name, lo, hi,
                   si_shape(c, &c->in[k]));
}

tgc_status si_need_index(si_ctx *c, int k, const char *name)
{
    tgc_dtype dt = c->in[k].dtype;
    if (dt == TGC_I32 || dt == TGC_I64)
        return TGC_OK;
    return si_fail(c, TGC_ERR_DTYPE, "%s must be i32 or i64, got %s", name, tgc_dtype_name(dt));
}

tgc_status si_need_float(si_ctx *c, const int *idx, const char *const *names, int n)
{
    for (int k = 0; k < n; k++) {
        tgc_dtype dt = c->in[idx[k]].dtype, d0 = c->in[idx[0]].dtype;
        if (!tgc_dtype_is_float(dt))
            return si_fail(c, TGC_ERR_DTYPE, "%s must be a float tensor, got %s", names[k],
                           tgc_dtype_name(dt));
        if (dt != d0)
            return si_fail(c, TGC_ERR_DTYPE, "dtypes differ: %s is %s, %s is %s", names[0],
                           tgc_dtype_name(d0), names[k], tgc_dtype_name(dt));
    }
    return TGC_OK;
}

tgc_status si_need_inputs(si_ctx *c, int want)
{
    if (c->n_in == want)
        return TGC_OK;
    return si_fail(c, TGC_ERR_INTERNAL, "node has %d inputs, its attributes say %d", c->n_in, want);
}

tgc_status si_need_dim(si_ctx *c, int64_t dim, int ndim)
{
    if ((dim >= 0 && dim < ndim) || (ndim == 0 && dim == 0))
        return TGC_OK;
    return si_fail(c, TGC_ERR_INVALID_ARG, "dim %lld is out of range for a %d-d tensor",
                   (long long)dim, ndim);
}

tgc_status si_set_out(si_ctx *c, tgc_dtype dt, const tgc_sdim *d, int n)
{
    if (n > TGC_MAX_DIMS)
        return si_fail(c, TGC_ERR_INVALID_ARG, "the result would have %d dims (at most %d)", n,
                       TGC_MAX_DIMS);
    /* One limit for every tensor, view and intermediate (tgc/tensor.h): sizes that fit in
     * int64, none negative, and an extent (0 counted as 1) of at most TGC_MAX_NUMEL, so
     * numel, strides, offsets and byte sizes computed from them cannot overflow. */
    int64_t hints[TGC_MAX_DIMS], extent;
    for (int k = 0; k < n; k++) {
        if (!TGC_SDIM_IS_VALID(d[k]))
            return si_fail(c, TGC_ERR_SHAPE, "size %d of the result %s overflows int64", k,
                           si_dims(c, d, n));
        hints[k] = si_hint(c, d[k]);
        if (hints[k] < 0)
            return si_fail(c, TGC_ERR_SHAPE, "size %d of the result %s is negative (%lld)", k,
                           si_dims(c, d, n), (long long)hints[k]);
    }
    if (!tgc_extent_ok(hints, n, &extent) || extent > TGC_MAX_NUMEL)
        return si_fail(c, TGC_ERR_SHAPE,
                       "the result %s is too large: its sizes multiply to more than "
                       "TGC_MAX_NUMEL (2^56)",
                       si_dims(c, d, n));
    tgc_sdim tmp[TGC_MAX_DIMS] = {0}; /* d may alias out */
    memcpy(tmp, d, sizeof(tgc_sdim) * (size_t)n);
    /* 1-specialization, as for input sizes: a computed size that is 1 at trace time becomes
     * the constant 1 (guarded), the 1 that broadcasting, squeeze, expand and code generation
     * recognize (x[:, 1:] of [N, 2]). A computed 0 stays symbolic: the rules that depend on
     * emptiness guard it where they decide (slices, max, argmax). */
    for (int k = 0; k < n; k++)
        if (!TGC_SDIM_IS_CONST(tmp[k]) && hints[k] == 1)
            tmp[k] = tgc_sym_specialize(c->syms, tmp[k]);
    c->out->dtype = dt;
    c->out->ndim = n;
    memcpy(c->out->shape, tmp, sizeof tmp);
    return TGC_OK;
}

/* ---- pointwise ---- */

/* Broadcasts in[0..n) together into out with dtype dt. */
static tgc_status elementwise(si_ctx *c, int n, tgc_dtype dt)
{
    tgc_sdim r[TGC_MAX_DIMS];
    int nr = c->in[0].ndim;
    memcpy(r, c->in[0].shape, sizeof(tgc_sdim) * (size_t)nr);
    for (int k = 1; k < n; k++) {
        tgc_sdim prev[TGC_MAX_DIMS];
        int np = nr;
        memcpy(prev, r, sizeof(tgc_sdim) * (size_t)np);
        if (!si_broadcast_dims(c, prev, np, c->in[k].shape, c->in[k].ndim, r, &nr)) {
            if (n == 2)
                return si_fail(c, TGC_ERR_SHAPE, "shapes %s and %s do not broadcast",
                               si_shape(c, &c->in[0]), si_shape(c, &c->in[1]));
            return si_fail(c, TGC_ERR_SHAPE, "shapes %s, %s and %s do not broadcast",
                           si_shape(c, &c->in[0]), si_shape(c, &c->in[1]), si_shape(c, &c->in[2]));
        }
    }
    return si_set_out(c, dt, r, nr);
}

tgc_status si_rule_SOURCE(si_ctx *c)
{
    return si_fail(c, TGC_ERR_INTERNAL, "graph inputs have no shape rule");
}

tgc_status si_rule_BINARY(si_ctx *c)
{
    tgc_dtype dt = tgc_promote(c->in[0].dtype, c->in[1].dtype);
    if (c->op == TGC_OP_DIV)
        dt = si_float_of(dt); /* true division */
    return elementwise(c, 2, dt);
}

tgc_status si_rule_COMPARE(si_ctx *c)
{
    return elementwise(c, 2, TGC_BOOL);
}

tgc_status si_rule_TERNARY(si_ctx *c)
{
    if (c->in[0].dtype != TGC_BOOL)
        return si_fail(c, TGC_ERR_DTYPE, "cond must be bool, got %s",
                       tgc_dtype_name(c->in[0].dtype));
    return elementwise(c, 3, tgc_promote(c->in[1].dtype, c->in[2].dtype));
}

static int is_integral(double s)
{
    return isfinite(s) && s == floor(s);
}

/* Does an integer or bool tensor need f32 for this op's scalars? Infinite clamp bounds
 * mean "no bound" and keep the dtype. */
static int scalar_needs_float(const si_ctx *c)
{
    const double *f = c->a->f;
    switch (c->op) {
    case TGC_OP_DIV_SCALAR: return 1;
    case TGC_OP_CLAMP:
        return (!isinf(f[0]) && !is_integral(f[0])) || (!isinf(f[1]) && !is_integral(f[1]));
    default: return !is_integral(f[0]);
    }
}

tgc_status si_rule_SCALAR(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    tgc_dtype dt = x->dtype;
    if (!tgc_dtype_is_float(dt) && scalar_needs_float(c))
        dt = TGC_F32;
    return si_set_out(c, dt, x->shape, x->ndim);
}

static int is_float_math(tgc_op op)
{
    switch (op) {
    case TGC_OP_EXP:
    case TGC_OP_LOG:
    case TGC_OP_SQRT:
    case TGC_OP_RSQRT:
    case TGC_OP_TANH:
    case TGC_OP_SIGMOID:
    case TGC_OP_GELU:
    case TGC_OP_GELU_TANH:
    case TGC_OP_SILU:
    case TGC_OP_ERF: return 1;
    default: return tgc_op_math_fn(op) != NULL; /* every MATH_FN op (sin, cos) */
    }
}

tgc_status si_rule_UNARY(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    tgc_dtype dt = x->dtype;
    if (c->op == TGC_OP_CAST) {
        dt = c->a->dtype;
        if ((unsigned)dt >= TGC_DTYPE_COUNT)
            return si_fail(c, TGC_ERR_INVALID_ARG, "unknown target dtype %d", (int)dt);
    } else if (is_float_math(c->op)) {
        dt = si_float_of(dt);
    } else if (c->op == TGC_OP_NEG && dt == TGC_BOOL) { /* as PyTorch */
        return si_fail(c, TGC_ERR_DTYPE,
                       "negation of a bool tensor is not supported; to invert a mask use "
                       "tgc_eq(mask, false) or tgc_where");
    }
    return si_set_out(c, dt, x->shape, x->ndim);
}

/* ---- reductions ---- */

static tgc_dtype reduce_dtype(tgc_op op, tgc_dtype dt)
{
    switch (op) {
    case TGC_OP_SUM: return dt == TGC_BOOL || dt == TGC_I32 ? TGC_I64 : dt;
    case TGC_OP_MEAN:
    case TGC_OP_VAR:
    case TGC_OP_LOGSUMEXP: return si_float_of(dt);
    case TGC_OP_ARGMAX: return TGC_I64;
    default: return dt;
    }
}

/* The reduced dims as a bitmask (validated against the rank). */
static tgc_status reduce_mask(si_ctx *c, uint64_t *mask)
{
    int nd = c->in[0].ndim;
    int64_t m = c->a->i[0];
    if (c->op == TGC_OP_ARGMAX) {
        tgc_status s = si_need_dim(c, m, nd);
        *mask = !s && nd ? (uint64_t)1 << m : 0;
        return s;
    }
    if (m < 0 || (uint64_t)m >> nd)
        return si_fail(c, TGC_ERR_INVALID_ARG, "dims mask 0x%llx names dims beyond a %d-d tensor",
                       (unsigned long long)m, nd);
    if (c->op == TGC_OP_VAR && c->a->i[2] < 0)
        return si_fail(c, TGC_ERR_INVALID_ARG, "correction must be >= 0, got %lld",
                       (long long)c->a->i[2]);
    *mask = (uint64_t)m;
    return TGC_OK;
}

tgc_status si_rule_REDUCE(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    uint64_t mask;
    tgc_status s = reduce_mask(c, &mask);
    if (s)
        return s;
    int keep = c->a->i[1] != 0, needs_elems = c->op == TGC_OP_MAX || c->op == TGC_OP_ARGMAX;
    tgc_sdim r[TGC_MAX_DIMS];
    int nr = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (!(mask >> k & 1))
            r[nr++] = x->shape[k];
        else if (needs_elems && !si_ge(c, x->shape[k], 1)) /* guarded where symbolic */
            return si_fail(c, TGC_ERR_SHAPE, "cannot reduce over the empty dim %d of %s", k,
                           si_shape(c, x));
        else if (keep)
            r[nr++] = 1;
    }
    return si_set_out(c, reduce_dtype(c->op, x->dtype), r, nr);
}

tgc_status si_rule_NORM(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    tgc_status s = si_need_dim(c, c->a->i[0], x->ndim);
    return s ? s : si_set_out(c, si_float_of(x->dtype), x->shape, x->ndim);
}

tgc_status si_rule_RANDOM(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    double p = c->a->f[0];
    if (!(p >= 0.0 && p <= 1.0))
        return si_fail(c, TGC_ERR_INVALID_ARG, "p must be in [0, 1], got %g", p);
    if (!tgc_dtype_is_float(x->dtype))
        return si_fail(c, TGC_ERR_DTYPE, "x must be a float tensor, got %s",
                       tgc_dtype_name(x->dtype));
    return si_set_out(c, x->dtype, x->shape, x->ndim);
}

tgc_status si_rule_CREATE(si_ctx *c)
{
    const tgc_attrs *a = c->a;
    tgc_sdim r[TGC_MAX_DIMS];
    if (a->ni < 0 || a->ni > TGC_MAX_DIMS || (unsigned)a->dtype >= TGC_DTYPE_COUNT)
        return si_fail(c, TGC_ERR_INTERNAL, "malformed creation node");
    if (c->op == TGC_OP_ARANGE) { /* i[0]: the element count, symbolic from tgc_arange_sym */
        if (a->ni != 1 || (!TGC_SDIM_IS_CONST(a->i[0]) && !c->syms))
            return si_fail(c, TGC_ERR_INTERNAL, "malformed arange node");
        if (!si_ge(c, a->i[0], 0))
            return si_fail(c, TGC_ERR_INVALID_ARG, "negative element count %s", si_dim(c, a->i[0]));
        return si_set_out(c, a->dtype, a->i, 1);
    }
    if (!tgc_dtype_is_float(a->dtype))
        return si_fail(c, TGC_ERR_DTYPE, "random tensors must be a float dtype, got %s",
                       tgc_dtype_name(a->dtype));
    for (int d = 0; d < a->ni; d++) {
        if (a->i[d] < 0)
            return si_fail(c, TGC_ERR_INVALID_ARG, "negative size %lld at dim %d",
                           (long long)a->i[d], d);
        r[d] = a->i[d];
    }
    return si_set_out(c, a->dtype, r, a->ni);
}

/* ALL_REDUCE(x): x's shape and dtype (reductions over ranks: numbers and f16/bf16; bool is
 * refused, AVG and PROD need floating point). COMM_WAIT(y, x): y's shape and dtype; x has
 * as many elements as y. i[0] is a communicator handle (>= 1). */
tgc_status si_rule_COMM(si_ctx *c)
{
    const tgc_vinfo *x = &c->in[0];
    if (c->a->ni < (c->op == TGC_OP_ALL_REDUCE ? 2 : 1) || c->a->i[0] < 1)
        return si_fail(c, TGC_ERR_INTERNAL, "malformed node (no communicator)");
    if (c->op == TGC_OP_ALL_REDUCE) {
        int64_t op = c->a->i[1];
        int fl = x->dtype == TGC_F32 || x->dtype == TGC_F16 || x->dtype == TGC_BF16 ||
                 x->dtype == TGC_F64;
        if (op < TGC_DIST_SUM || op > TGC_DIST_AVG)
            return si_fail(c, TGC_ERR_INVALID_ARG, "unknown reduction %lld", (long long)op);
        if (x->dtype == TGC_BOOL || (!fl && (op == TGC_DIST_AVG || op == TGC_DIST_PROD)))
            return si_fail(c, TGC_ERR_DTYPE, "%s cannot reduce %s tensors",
                           op == TGC_DIST_AVG    ? "the average"
                           : op == TGC_DIST_PROD ? "the product"
                                                 : "a collective",
                           tgc_dtype_name(x->dtype));
        return si_set_out(c, x->dtype, x->shape, x->ndim);
    }
    const tgc_vinfo *src = &c->in[1];
    if (!si_eq(c, si_prod(c, x->shape, x->ndim), si_prod(c, src->shape, src->ndim)))
        return si_fail(c, TGC_ERR_INTERNAL, "malformed node (the input has another size)");
    return si_set_out(c, x->dtype, x->shape, x->ndim);
}
