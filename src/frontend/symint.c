/* tgc_symint: sizes a model can compute with and pass to reshape, expand, full and arange
 * without reading (and so specializing) them. Outside tracing a symint is a number; while
 * tracing a dynamic dim it holds a tgc_sdim of the trace's symbol table, and the trace's
 * serial number, so that one from an earlier trace (whose table is gone) is refused. */
#include <stdatomic.h>

#include "frontend/apply.h"
#include "frontend/trace.h"
#include "ir/sym.h"
#include "support/error.h"
#include "tgc/ops.h"

static atomic_uint_fast64_t next_serial;

static uint64_t serial_of(tgc_trace *tr)
{
    if (!tr->serial)
        tr->serial = (uint64_t)atomic_fetch_add(&next_serial, 1) + 1;
    return tr->serial;
}

static tgc_symint invalid(void)
{
    return (tgc_symint){0, 0, 1};
}
static tgc_symint plain(int64_t v)
{
    return (tgc_symint){v, 0, 0};
}

static tgc_symint symbolic(tgc_trace *tr, tgc_sdim d)
{
    return TGC_SDIM_IS_CONST(d) ? plain(d) : (tgc_symint){d, serial_of(tr), 0};
}

/* s as a tgc_sdim usable here: in the current trace, or a plain number. 0 with the error
 * set (invalid symints keep the first error). */
static int resolve(const char *fn, tgc_symint s, tgc_sdim *out)
{
    if (s.invalid_) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: a size is an invalid tgc_symint", fn);
        return 0;
    }
    if (!s.trace_) {
        if (!TGC_SDIM_IS_CONST(s.expr_) && tgc_trace_current()) {
            tgc_set_error(TGC_ERR_SHAPE, "%s: size %lld is out of range", fn, (long long)s.expr_);
            return 0;
        }
        *out = s.expr_;
        return 1;
    }
    tgc_trace *tr = tgc_trace_current();
    if (!tr || serial_of(tr) != s.trace_) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: a symbolic tgc_symint used outside the trace that made it (symints "
                      "from tgc_sym_size are valid only while that trace runs)",
                      fn);
        return 0;
    }
    *out = s.expr_;
    return 1;
}

tgc_symint tgc_sym_size(const tgc_tensor *t, int dim)
{
    if (!t) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_sym_size: tensor is NULL");
        return invalid();
    }
    int d = tgc_norm_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_sym_size: dim %d is out of range for rank %d", dim,
                      t->ndim);
        return invalid();
    }
    if (!t->trace || TGC_SDIM_IS_CONST(t->sshape[d]))
        return plain(t->shape[d]);
    if (t->trace != tgc_trace_current()) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_sym_size: the tensor is a traced tensor that escaped its trace");
        return invalid();
    }
    return symbolic(t->trace, t->sshape[d]);
}

tgc_symint tgc_symint_const(int64_t v)
{
    return plain(v);
}

typedef enum { SI_ADD, SI_SUB, SI_MUL, SI_FLOORDIV } si_op;

static const char *const op_fn[] = {"tgc_symint_add", "tgc_symint_sub", "tgc_symint_mul",
                                    "tgc_symint_floordiv"};

/* a op b on numbers: 0 on overflow or a bad divisor (error set). */
static int number_op(si_op op, int64_t a, int64_t b, int64_t *r)
{
    int over = 0;
    switch (op) {
    case SI_ADD: over = __builtin_add_overflow(a, b, r); break;
    case SI_SUB: over = __builtin_sub_overflow(a, b, r); break;
    case SI_MUL: over = __builtin_mul_overflow(a, b, r); break;
    case SI_FLOORDIV:
        if (b <= 0) {
            tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_symint_floordiv: divisor must be > 0, got %lld",
                          (long long)b);
            return 0;
        }
        *r = a / b - (a % b != 0 && a < 0);
        break;
    }
    if (over)
        tgc_set_error(TGC_ERR_SHAPE, "%s: %lld and %lld overflow int64", op_fn[op], (long long)a,
                      (long long)b);
    return !over;
}

static tgc_symint binary(si_op op, tgc_symint a, tgc_symint b)
{
    tgc_sdim x, y;
    if (!resolve(op_fn[op], a, &x) || !resolve(op_fn[op], b, &y))
        return invalid();
    int64_t r;
    if (!a.trace_ && !b.trace_)
        return number_op(op, a.expr_, b.expr_, &r) ? plain(r) : invalid();
    tgc_trace *tr = tgc_trace_current(); /* resolve() checked it is theirs */
    tgc_symtab *t = tr->g->syms;
    int64_t hx = tgc_sym_hint(t, x), hy = tgc_sym_hint(t, y);
    if (!number_op(op, hx, hy, &r))
        return invalid();
    if (!TGC_SDIM_IS_CONST(r)) {
        tgc_set_error(TGC_ERR_SHAPE, "%s: the result %lld is out of range", op_fn[op],
                      (long long)r);
        return invalid();
    }
    switch (op) {
    case SI_ADD: return symbolic(tr, tgc_sym_add(t, x, y));
    case SI_SUB: return symbolic(tr, tgc_sym_sub(t, x, y));
    case SI_MUL: return symbolic(tr, tgc_sym_mul(t, x, y));
    case SI_FLOORDIV:
        tgc_sym_assume_ge(t, y, 1); /* holds at trace time (checked above): a guard */
        return symbolic(tr, tgc_sym_floordiv(t, x, y));
    }
    return invalid();
}

tgc_symint tgc_symint_add(tgc_symint a, tgc_symint b)
{
    return binary(SI_ADD, a, b);
}
tgc_symint tgc_symint_sub(tgc_symint a, tgc_symint b)
{
    return binary(SI_SUB, a, b);
}
tgc_symint tgc_symint_mul(tgc_symint a, tgc_symint b)
{
    return binary(SI_MUL, a, b);
}
tgc_symint tgc_symint_floordiv(tgc_symint a, tgc_symint b)
{
    return binary(SI_FLOORDIV, a, b);
}

int64_t tgc_symint_value(tgc_symint s, int *ok)
{
    tgc_sdim d;
    int good = resolve("tgc_symint_value", s, &d);
    if (ok)
        *ok = good;
    if (!good)
        return 0;
    if (!s.trace_)
        return d;
    return tgc_trace_read_sdim(tgc_trace_current(), d, "tgc_symint_value");
}

/* ---- ops taking symints ---- */

/* shape[0..ndim) into at->shape.dims; *any_sym says whether one is symbolic (then
 * at->shape.symbolic = 1 marks the target as holding tgc_sdims, as ops.def lays out). */
static int shape_attrs(const char *fn, const tgc_symint *shape, int ndim, tgc_attrs *at,
                       int *any_sym)
{
    *any_sym = 0;
    if (ndim < 0 || ndim > TGC_MAX_DIMS || (ndim > 0 && !shape)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: shape must have 0 to %d dims, got ndim = %d%s", fn,
                      TGC_MAX_DIMS, ndim, ndim > 0 && !shape ? " with shape NULL" : "");
        return 0;
    }
    for (int k = 0; k < ndim; k++) {
        if (!resolve(fn, shape[k], &at->shape.dims[k]))
            return 0;
        *any_sym |= !TGC_SDIM_IS_CONST(at->shape.dims[k]);
    }
    at->ni = ndim;
    if (*any_sym) {
        at->shape.symbolic = 1.0;
        at->nf = 1;
    }
    return 1;
}

static tgc_tensor *view_sym(tgc_op op, const char *fn, tgc_tensor *t, const tgc_symint *shape,
                            int ndim)
{
    tgc_attrs at = tgc_attrs_none();
    int any_sym;
    if (!t)
        return tgc_apply(op, &t, 1, &at); /* keeps the first error */
    if (!shape_attrs(fn, shape, ndim, &at, &any_sym))
        return NULL;
    if (!any_sym) /* numbers: the plain op, with its checks */
        return op == TGC_OP_RESHAPE ? tgc_reshape(t, at.shape.dims, ndim)
                                    : tgc_expand(t, at.shape.dims, ndim);
    return tgc_apply(op, &t, 1, &at);
}

tgc_tensor *tgc_reshape_sym(tgc_tensor *t, const tgc_symint *shape, int ndim)
{
    return view_sym(TGC_OP_RESHAPE, "tgc_reshape_sym", t, shape, ndim);
}

tgc_tensor *tgc_expand_sym(tgc_tensor *t, const tgc_symint *shape, int ndim)
{
    return view_sym(TGC_OP_EXPAND, "tgc_expand_sym", t, shape, ndim);
}

/* other's sizes as symints; 0 (error kept) when other is NULL. */
static int sizes_of(const char *fn, const tgc_tensor *other, tgc_symint *s, int *ndim)
{
    if (!other) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: other is NULL", fn);
        return 0;
    }
    *ndim = tgc_ndim(other);
    for (int d = 0; d < *ndim; d++)
        s[d] = tgc_sym_size(other, d);
    return 1;
}

tgc_tensor *tgc_reshape_as(tgc_tensor *t, tgc_tensor *other)
{
    tgc_symint s[TGC_MAX_DIMS];
    int nd;
    if (!t || !sizes_of("tgc_reshape_as", other, s, &nd))
        return tgc_reshape_sym(NULL, NULL, 0);
    return view_sym(TGC_OP_RESHAPE, "tgc_reshape_as", t, s, nd);
}

tgc_tensor *tgc_expand_as(tgc_tensor *t, tgc_tensor *other)
{
    tgc_symint s[TGC_MAX_DIMS];
    int nd;
    if (!t || !sizes_of("tgc_expand_as", other, s, &nd))
        return tgc_expand_sym(NULL, NULL, 0);
    return view_sym(TGC_OP_EXPAND, "tgc_expand_as", t, s, nd);
}

/* The dtype and device checks of the creation functions. */
static int creation_ok(const char *fn, tgc_dtype dt, tgc_device dev)
{
    if ((unsigned)dt >= TGC_DTYPE_COUNT) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dt);
        return 0;
    }
    /* a traced creation makes a value of the variant, on the variant's device */
    return tgc_device_check(fn, dev);
}

tgc_tensor *tgc_full_sym(const tgc_symint *shape, int ndim, double value, tgc_dtype dt,
                         tgc_device dev)
{
    tgc_attrs at = tgc_attrs_none();
    int any_sym;
    if (!shape_attrs("tgc_full_sym", shape, ndim, &at, &any_sym))
        return NULL;
    if (!any_sym)
        return tgc_full(at.shape.dims, ndim, value, dt, dev);
    if (!creation_ok("tgc_full_sym", dt, dev))
        return NULL;
    /* one element, stretched to the symbolic shape and materialized as a fresh tensor */
    const int64_t ones[TGC_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    tgc_tensor *one = tgc_full(ones, ndim, value, dt, dev);
    tgc_tensor *big = one ? tgc_apply(TGC_OP_EXPAND, &one, 1, &at) : NULL;
    return big ? tgc_contiguous(big) : NULL;
}

tgc_tensor *tgc_arange_sym(int64_t start, tgc_symint end, int64_t step, tgc_dtype dt,
                           tgc_device dev)
{
    tgc_sdim e;
    if (!resolve("tgc_arange_sym", end, &e))
        return NULL;
    if (step == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_arange_sym: step must be nonzero");
        return NULL;
    }
    if (!end.trace_)
        return tgc_arange((double)start, (double)e, (double)step, dt, dev);
    if (!creation_ok("tgc_arange_sym", dt, dev))
        return NULL;
    tgc_trace *tr = tgc_trace_current();
    tgc_symtab *t = tr->g->syms;
    int64_t span;
    if (__builtin_sub_overflow(tgc_sym_hint(t, e), start, &span) || step == INT64_MIN) {
        tgc_set_error(TGC_ERR_SHAPE, "tgc_arange_sym: start %lld, step %lld overflow",
                      (long long)start, (long long)step);
        return NULL;
    }
    if (step > 0 ? span <= 0 : span >= 0) { /* empty at this size: not worth a symbol */
        int64_t v = tgc_trace_read_sdim(tr, e, "tgc_arange_sym");
        return tgc_arange((double)start, (double)v, (double)step, dt, dev);
    }
    tgc_sdim d = tgc_sym_sub(t, e, start);
    tgc_sdim count =
        step > 0 ? tgc_sym_ceildiv(t, d, step) : tgc_sym_ceildiv(t, tgc_sym_mul(t, d, -1), -step);
    tgc_attrs at = tgc_attrs_of(TGC_OP_ARANGE);
    at.arange.n = count;
    at.arange.start = (double)start;
    at.arange.step = (double)step;
    at.dtype = dt;
    return tgc_apply(TGC_OP_ARANGE, NULL, 0, &at);
}
