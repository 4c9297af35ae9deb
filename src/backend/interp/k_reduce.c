/* Interp kernels for reductions (sum, mean, max, var, argmax, logsumexp) and for softmax and
 * log_softmax.
 *
 * The input's dims split into kept dims (one output element per index, in row-major order)
 * and reduced dims. For each output element the reduced elements are visited in row-major
 * order, a block at a time, and folded into an accumulator: double for floats, int64 for
 * integer sums, max and argmax (exact beyond 2^53; sums wrap like PyTorch's). var makes two
 * passes (mean, then squared deviations) because that stays accurate where the one-pass
 * formula cancels. softmax and log_softmax subtract the row's max before exp; a long row
 * is streamed in three passes (max, sum of exp, write), so no row needs heap memory. */
#include <math.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "backend/interp/interp_rows.h"
#include "ir/shape_infer.h"
#include "support/error.h"

#define RED_BLOCK 256          /* elements loaded per step */
#define SOFTMAX_ROW_CACHE 1024 /* softmax rows up to this long are kept on the stack */

/* The input's dims, split. Output strides follow the kept dims: contiguous over the kept
 * dims for reductions, or over the input's full shape for softmax (out is input-shaped). */
typedef struct red_geom {
    int n_keep, n_red;
    int64_t keep_shape[TGC_MAX_DIMS], keep_xst[TGC_MAX_DIMS], keep_ost[TGC_MAX_DIMS];
    int64_t red_shape[TGC_MAX_DIMS], red_xst[TGC_MAX_DIMS];
    int64_t row_ost; /* softmax: out's stride along the reduced dim */
    int64_t count;   /* reduced elements per output element */
} red_geom;

typedef struct red_call {
    tgc_op op;
    const tgc_attrs *a;
    const void *xbase;
    tgc_dtype xdt;
    int as_int; /* fold integer inputs as int64 */
    void *obase;
    tgc_dtype odt;
    red_geom g;
} red_call;

/* Folds n values (f or i, whichever the call loads) into an accumulator. */
typedef void (*red_fold_fn)(void *acc, const double *f, const int64_t *i, int64_t n);

/* ---- element access (the row loads and stores are in interp_rows.h) ---- */

/* An integer result goes in without passing through double when out is an integer. */
static void store_int(void *base, tgc_dtype dt, int64_t off, int64_t v)
{
    switch (dt) {
    case TGC_I32: ((int32_t *)base)[off] = (int32_t)v; break;
    case TGC_I64: ((int64_t *)base)[off] = v; break;
    case TGC_BOOL: tgc_store(base, dt, off, v != 0); break;
    default: tgc_store(base, dt, off, (double)v); break;
    }
}

/* ---- walking ---- */

/* A row-major multi-index over nd dims and two offsets that follow it. */
typedef struct red_walk {
    int nd;
    const int64_t *shape, *st[2];
    int64_t idx[TGC_MAX_DIMS];
    int64_t off[2];
} red_walk;

/* st1 may be NULL when only one offset is needed. */
static void walk_init(red_walk *w, int nd, const int64_t *shape, const int64_t *st0,
                      const int64_t *st1, int64_t off0, int64_t off1)
{
    static const int64_t zeros[TGC_MAX_DIMS];
    memset(w, 0, sizeof *w);
    w->nd = nd;
    w->shape = shape;
    w->st[0] = st0;
    w->st[1] = st1 ? st1 : zeros;
    w->off[0] = off0;
    w->off[1] = off1;
}

/* Advances to the next index; returns 0 after the last one (an empty range has none). */
static int walk_next(red_walk *w)
{
    for (int d = w->nd - 1; d >= 0; d--) {
        w->off[0] += w->st[0][d];
        w->off[1] += w->st[1][d];
        if (++w->idx[d] < w->shape[d]) return 1;
        w->off[0] -= w->st[0][d] * w->shape[d];
        w->off[1] -= w->st[1][d] * w->shape[d];
        w->idx[d] = 0;
    }
    return 0;
}

/* Feeds the reduced elements of the output element whose input offset is xoff to fold(),
 * in row-major order. The innermost reduced dim is the row, loaded a block at a time. */
static void visit(const red_call *c, int64_t xoff, red_fold_fn fold, void *acc)
{
    const red_geom *g = &c->g;
    if (g->count == 0) return;
    const int last = g->n_red - 1;
    const int64_t n = g->red_shape[last], st = g->red_xst[last];
    double f[RED_BLOCK];
    int64_t iv[RED_BLOCK];
    red_walk w;
    walk_init(&w, last, g->red_shape, g->red_xst, NULL, xoff, 0);
    do {
        for (int64_t s = 0; s < n; s += RED_BLOCK) {
            int64_t m = n - s < RED_BLOCK ? n - s : RED_BLOCK;
            if (c->as_int) {
                load_i64(c->xbase, c->xdt, w.off[0] + s * st, st, m, iv);
                fold(acc, NULL, iv, m);
            } else {
                load_f64(c->xbase, c->xdt, w.off[0] + s * st, st, m, f);
                fold(acc, f, NULL, m);
            }
        }
    } while (walk_next(&w));
}

/* ---- accumulators ---- */

typedef struct red_acc {
    double sum, max, ref; /* ref: the value subtracted before squaring or exp */
    int64_t isum, imax;
    int64_t pos, best_pos; /* argmax */
    double best;
    int64_t ibest;
} red_acc;

static red_acc acc_new(double ref)
{
    red_acc a = {0};
    a.max = a.best = -INFINITY;
    a.imax = a.ibest = INT64_MIN;
    a.best_pos = -1;
    a.ref = ref;
    return a;
}

/* The folds accumulate in locals: f may alias the accumulator's doubles as far as the
 * compiler knows, which would force a store per element. */
static void fold_sum(void *acc, const double *f, const int64_t *iv, int64_t n)
{
    red_acc *a = acc;
    if (f) {
        double s = a->sum;
        for (int64_t k = 0; k < n; k++) s += f[k];
        a->sum = s;
        return;
    }
    uint64_t s = (uint64_t)a->isum; /* wraps like PyTorch's int64 sum instead of overflowing */
    for (int64_t k = 0; k < n; k++) s += (uint64_t)iv[k];
    a->isum = (int64_t)s;
}

/* NaN wins: once max is NaN no value compares greater and it stays. */
static void fold_max(void *acc, const double *f, const int64_t *iv, int64_t n)
{
    red_acc *a = acc;
    if (f) {
        double m = a->max;
        for (int64_t k = 0; k < n; k++) m = f[k] > m || isnan(f[k]) ? f[k] : m;
        a->max = m;
        return;
    }
    int64_t m = a->imax;
    for (int64_t k = 0; k < n; k++) m = iv[k] > m ? iv[k] : m;
    a->imax = m;
}

static void fold_sq_dev(void *acc, const double *f, const int64_t *iv, int64_t n)
{
    red_acc *a = acc;
    double s = a->sum;
    (void)iv; /* var always loads doubles */
    for (int64_t k = 0; k < n; k++) s += (f[k] - a->ref) * (f[k] - a->ref);
    a->sum = s;
}

static void fold_exp_sum(void *acc, const double *f, const int64_t *iv, int64_t n)
{
    red_acc *a = acc;
    double s = a->sum;
    (void)iv; /* softmax always loads doubles */
    for (int64_t k = 0; k < n; k++) s += exp(f[k] - a->ref);
    a->sum = s;
}

/* First maximum; the first NaN counts as the maximum, as in PyTorch. */
static void fold_argmax(void *acc, const double *f, const int64_t *iv, int64_t n)
{
    red_acc *a = acc;
    for (int64_t k = 0; k < n; k++, a->pos++) {
        int take;
        if (f) {
            take = a->best_pos < 0 || (!isnan(a->best) && (f[k] > a->best || isnan(f[k])));
            if (take) a->best = f[k];
        } else {
            take = a->best_pos < 0 || iv[k] > a->ibest;
            if (take) a->ibest = iv[k];
        }
        if (take) a->best_pos = a->pos;
    }
}

/* ---- the ops ---- */

static void reduce_one(const red_call *c, int64_t xoff, int64_t ooff)
{
    red_acc a = acc_new(0);
    double n = (double)c->g.count;
    switch (c->op) {
    case TGC_OP_SUM:
        visit(c, xoff, fold_sum, &a);
        if (c->as_int)
            store_int(c->obase, c->odt, ooff, a.isum);
        else
            store_f64(c->obase, c->odt, ooff, 1, 1, &a.sum);
        break;
    case TGC_OP_MEAN: /* an empty mean is 0/0 = NaN, as in PyTorch */
        visit(c, xoff, fold_sum, &a);
        a.sum /= n;
        store_f64(c->obase, c->odt, ooff, 1, 1, &a.sum);
        break;
    case TGC_OP_MAX:
        visit(c, xoff, fold_max, &a);
        if (c->as_int)
            store_int(c->obase, c->odt, ooff, a.imax);
        else
            store_f64(c->obase, c->odt, ooff, 1, 1, &a.max);
        break;
    case TGC_OP_VAR: {
        visit(c, xoff, fold_sum, &a);
        red_acc d = acc_new(a.sum / n);
        visit(c, xoff, fold_sq_dev, &d);
        /* PyTorch divides by max(0, n - correction): 0 gives inf, or NaN for 0/0 */
        double denom = fmax(0.0, n - (double)c->a->reduce.correction);
        d.sum /= denom;
        store_f64(c->obase, c->odt, ooff, 1, 1, &d.sum);
        break;
    }
    case TGC_OP_LOGSUMEXP: { /* torch's: an infinite max is taken out as 0 */
        visit(c, xoff, fold_max, &a);
        double m = c->g.count == 0 || isinf(a.max) ? 0.0 : a.max;
        red_acc e = acc_new(m);
        visit(c, xoff, fold_exp_sum, &e);
        double r = log(e.sum) + m;
        store_f64(c->obase, c->odt, ooff, 1, 1, &r);
        break;
    }
    default: /* ARGMAX; an empty dim (rejected by inference) gives 0 */
        visit(c, xoff, fold_argmax, &a);
        store_int(c->obase, c->odt, ooff, a.best_pos < 0 ? 0 : a.best_pos);
        break;
    }
}

/* softmax and log_softmax, one row (the single reduced dim) at a time. A row up to
 * SOFTMAX_ROW_CACHE long is loaded once and each element exp'd once; a longer row is
 * streamed in three passes instead. Both do the same arithmetic in the same order. */
static void softmax_row_cached(const red_call *c, int64_t xoff, int64_t ooff)
{
    const int64_t n = c->g.count;
    const int soft = c->op == TGC_OP_SOFTMAX;
    double v[SOFTMAX_ROW_CACHE], sum = 0;
    red_acc mx = acc_new(0);
    load_f64(c->xbase, c->xdt, xoff, c->g.red_xst[0], n, v);
    fold_max(&mx, v, NULL, n);
    for (int64_t k = 0; k < n; k++) {
        double e = exp(v[k] - mx.max);
        sum += e;
        v[k] = soft ? e : v[k] - mx.max;
    }
    const double log_sum = log(sum);
    for (int64_t k = 0; k < n; k++) v[k] = soft ? v[k] / sum : v[k] - log_sum;
    store_f64(c->obase, c->odt, ooff, c->g.row_ost, n, v);
}

static void softmax_row_streamed(const red_call *c, int64_t xoff, int64_t ooff)
{
    red_acc mx = acc_new(0);
    visit(c, xoff, fold_max, &mx);
    red_acc e = acc_new(mx.max);
    visit(c, xoff, fold_exp_sum, &e);
    const double log_sum = log(e.sum);
    const int64_t n = c->g.count, xst = c->g.red_xst[0], ost = c->g.row_ost;
    double v[RED_BLOCK];
    for (int64_t s = 0; s < n; s += RED_BLOCK) {
        int64_t m = n - s < RED_BLOCK ? n - s : RED_BLOCK;
        load_f64(c->xbase, c->xdt, xoff + s * xst, xst, m, v);
        for (int64_t k = 0; k < m; k++)
            v[k] = c->op == TGC_OP_SOFTMAX ? exp(v[k] - mx.max) / e.sum
                                           : v[k] - mx.max - log_sum;
        store_f64(c->obase, c->odt, ooff + s * ost, ost, m, v);
    }
}

/* ---- setup ---- */

/* Drops size-1 dims and merges neighbours that are one linear run in both stride lists;
 * the visiting order is unchanged. Returns the new dim count. */
static int merge_dims(int nd, int64_t *shape, int64_t *st0, int64_t *st1)
{
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        int merge = n > 0 && st0[n - 1] == st0[d] * shape[d] && st1[n - 1] == st1[d] * shape[d];
        int at = merge ? n - 1 : n;
        shape[at] = merge ? shape[at] * shape[d] : shape[d];
        st0[at] = st0[d];
        st1[at] = st1[d];
        n = at + 1;
    }
    return n;
}

static void geom_init(red_geom *g, const tgc_tensor *x, uint64_t mask, int x_shaped_out)
{
    int64_t full[TGC_MAX_DIMS], unused[TGC_MAX_DIMS] = {0};
    tgc_contiguous_strides(x->shape, x->ndim, full);
    memset(g, 0, sizeof *g);
    g->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (mask >> d & 1) {
            g->red_shape[g->n_red] = x->shape[d];
            g->red_xst[g->n_red++] = x->strides[d];
            g->count *= x->shape[d];
            g->row_ost = full[d];
        } else {
            g->keep_shape[g->n_keep] = x->shape[d];
            g->keep_xst[g->n_keep] = x->strides[d];
            g->keep_ost[g->n_keep++] = full[d];
        }
    }
    if (!x_shaped_out) tgc_contiguous_strides(g->keep_shape, g->n_keep, g->keep_ost);
    g->n_keep = merge_dims(g->n_keep, g->keep_shape, g->keep_xst, g->keep_ost);
    if (!x_shaped_out) /* softmax keeps its one reduced dim: row_ost belongs to it */
        g->n_red = merge_dims(g->n_red, g->red_shape, g->red_xst, unused);
    if (g->n_red == 0) { /* nothing reduced: each output element sees its own input */
        g->red_shape[0] = 1;
        g->red_xst[0] = 0;
        g->n_red = 1;
    }
}

static tgc_status red_fail(tgc_op op, const char *what)
{
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_reduce: %s: %s", tgc_op_name(op), what);
}

/* The reduced dims as a bitmask. A 0-d input may name dim 0 (PyTorch allows dim 0 and -1
 * on scalars); it then reduces nothing. Returns 0 for a dim out of range. */
static int reduced_mask(tgc_op op, const tgc_attrs *a, int ndim, uint64_t *mask)
{
    int one_dim = op == TGC_OP_ARGMAX || op == TGC_OP_SOFTMAX || op == TGC_OP_LOG_SOFTMAX;
    int64_t dim = op == TGC_OP_ARGMAX ? a->argmax.dim : a->dim.dim; /* one_dim ops */
    if (one_dim && (dim < 0 || dim >= (ndim > 0 ? ndim : 1))) return 0;
    *mask = one_dim ? (uint64_t)1 << dim : (uint64_t)a->reduce.mask;
    if (ndim == 0) *mask &= ~(uint64_t)1;
    return *mask >> ndim == 0;
}

static tgc_status red_setup(red_call *c, tgc_op op, tgc_tensor *const *in, int n_in,
                            const tgc_attrs *a, tgc_tensor *out)
{
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || (info->kind != TGC_KIND_REDUCE && info->kind != TGC_KIND_NORM))
        return red_fail(op, "not a reduction");
    if (!in || n_in != 1 || !in[0] || !out || !a)
        return red_fail(op, "expects one input, attributes and an output");
    const tgc_tensor *x = in[0];
    uint64_t mask;
    if (!reduced_mask(op, a, x->ndim, &mask)) return red_fail(op, "reduced dim out of range");
    memset(c, 0, sizeof *c);
    c->op = op;
    c->a = a;
    c->xbase = tgc_host_data(x);
    c->xdt = x->dtype;
    c->obase = tgc_host_data(out);
    c->odt = out->dtype;
    c->as_int = !tgc_dtype_is_float(x->dtype) &&
                (op == TGC_OP_SUM || op == TGC_OP_MAX || op == TGC_OP_ARGMAX);
    int x_shaped = info->kind == TGC_KIND_NORM;
    geom_init(&c->g, x, mask, x_shaped);
    int64_t want = x_shaped ? tgc_shape_numel(x->shape, x->ndim)
                            : tgc_shape_numel(c->g.keep_shape, c->g.n_keep);
    if (tgc_shape_numel(out->shape, out->ndim) != want)
        return red_fail(op, "output size does not match the input's kept dims");
    return TGC_OK;
}

tgc_status tgc_interp_reduce(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out)
{
    red_call c;
    tgc_status s = red_setup(&c, op, in, n_in, a, out);
    if (s != TGC_OK) return s;
    if (tgc_shape_numel(out->shape, out->ndim) == 0) return TGC_OK;
    if (!c.obase || (!c.xbase && c.g.count > 0)) return red_fail(op, "an operand has no storage");
    const int norm = op == TGC_OP_SOFTMAX || op == TGC_OP_LOG_SOFTMAX;
    red_walk w;
    walk_init(&w, c.g.n_keep, c.g.keep_shape, c.g.keep_xst, c.g.keep_ost, in[0]->offset,
              out->offset);
    do {
        if (norm && c.g.count <= SOFTMAX_ROW_CACHE)
            softmax_row_cached(&c, w.off[0], w.off[1]);
        else if (norm)
            softmax_row_streamed(&c, w.off[0], w.off[1]);
        else
            reduce_one(&c, w.off[0], w.off[1]);
    } while (walk_next(&w));
    return TGC_OK;
}
