/* tgc_cuda_op_supported / tgc_cuda_op_run: the host side of the native-op kernels
 * (cuda_ops_kernels.cu). For each op it derives interp's geometry (the same helpers'
 * logic as src/backend/interp, re-derived here from the tensors' shapes and strides), fills
 * the kernel's argument struct and launches through cuda_ops_launch.c. Inputs are read in
 * place on the device with their own strides; nothing is copied to the host except the
 * 16-byte bounds flag of indexing ops and losses. Thread-safe: no state of its own. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_conv_grad.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/interp/interp.h"
#include "ir/formula.h"
#include "ir/op.h"
#include "ir/view_geometry.h"
#include "runtime/comm.h"
#include "runtime/philox.h"
#include "runtime/storage.h"
#include "runtime/cuda.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/dtype.h"
#include "tgc/ops.h"

/* ---- small helpers ---- */

static tgc_status unsupported(void)
{
    tgc_clear_error();
    return TGC_ERR_UNSUPPORTED;
}

static int64_t numel(const tgc_tensor *t)
{
    return tgc_shape_numel(t->shape, t->ndim);
}

static int64_t prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= shape[d];
    return p;
}

static ops_tv tv_of(const tgc_tensor *t)
{
    ops_tv v;
    memset(&v, 0, sizeof v);
    v.nd = t->ndim;
    v.dt = (int)t->dtype;
    for (int d = 0; d < t->ndim; d++) {
        v.shape[d] = t->shape[d];
        v.st[d] = t->strides[d];
    }
    return v;
}

static ops_tv tv_make(const int64_t *shape, const int64_t *st, int nd, tgc_dtype dt)
{
    ops_tv v;
    memset(&v, 0, sizeof v);
    v.nd = nd;
    v.dt = (int)dt;
    for (int d = 0; d < nd; d++) {
        v.shape[d] = shape[d];
        v.st[d] = st[d];
    }
    return v;
}

static ops_tv tv_contig(const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t st[TGC_MAX_DIMS];
    tgc_row_major_strides(shape, nd, st);
    return tv_make(shape, st, nd, dt);
}

/* Device address of element 0 of t's view (NULL for a tensor without storage). */
static void *dptr(const tgc_tensor *t)
{
    return t && t->storage ? tgc_device_ptr(t) : NULL;
}

static void *dptr_at(const tgc_tensor *t, int64_t elem_off)
{
    return (char *)t->storage->data + elem_off * (int64_t)tgc_dtype_size(t->dtype);
}

static int norm_axis(int64_t d, int nd)
{
    if (d < 0)
        d += nd;
    return d >= 0 && d < nd ? (int)d : -1;
}

static tgc_status new_out(const ops_ctx *c, const int64_t *shape, int nd, tgc_dtype dt,
                          tgc_tensor **out)
{
    *out = tgc_tensor_new(shape, nd, dt, c->dev);
    if (*out)
        return TGC_OK;
    if (tgc_last_status() == TGC_ERR_OOM) {
        char dims[160];
        return tgc_set_error(
            TGC_ERR_OOM, "tgc_%s: out of memory for its %s result of shape %s on cuda:%d", c->op,
            tgc_dtype_name(dt), tgc_format_dims(shape, nd, dims, sizeof dims), c->dev.index);
    }
    return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_OOM;
}

static tgc_status launch(const ops_ctx *c, ops_kernel k, ops_shape shape, int64_t work,
                         void **params)
{
    return tgc_ops_launch(c, k, shape, work, 0, params);
}

/* one block per row of row_len elements, the block sized to the row */
static tgc_status launch_rows(const ops_ctx *c, ops_kernel k, int64_t rows, int64_t row_len,
                              void **params)
{
    return tgc_ops_launch(c, k, OPS_BLOCKS, rows, tgc_ops_block_for(row_len), params);
}

void tgc_ops_merge(ops_tv *const *tvs, int n)
{
    if (n <= 0)
        return;
    const int nd = tvs[0]->nd;
    int out = 0;
    for (int d = 0; d < nd; d++) {
        int64_t sz = tvs[0]->shape[d];
        if (sz == 1)
            continue;
        int merge = out > 0;
        for (int k = 0; merge && k < n; k++)
            merge = tvs[k]->st[out - 1] == tvs[k]->st[d] * sz;
        for (int k = 0; k < n; k++) {
            ops_tv *t = tvs[k];
            if (merge) {
                t->shape[out - 1] *= sz;
                t->st[out - 1] = t->st[d];
            } else {
                t->shape[out] = sz;
                t->st[out] = t->st[d];
            }
        }
        out += !merge;
    }
    for (int k = 0; k < n; k++) {
        for (int d = out; d < OPS_MAXD; d++) {
            tvs[k]->shape[d] = 0;
            tvs[k]->st[d] = 0;
        }
        tvs[k]->nd = out;
    }
}

static void merge1(ops_tv *t)
{
    tgc_ops_merge(&t, 1);
}

/* ---- bounds flag: [0] smallest bad position (~0: none), [1] the value found there ---- */

typedef struct flag_buf {
    tgc_tensor *t;
} flag_buf;

/* While the stream is being captured into a CUDA graph nothing could be read back (and the
 * allocator refuses new blocks): no flag; the kernels skip bad indices, so the result stays
 * in bounds, unreported. */
static tgc_status flag_begin(const ops_ctx *c, flag_buf *f)
{
    f->t = NULL;
    if (tgc_ops_capturing(c))
        return TGC_OK;
    int64_t two = 2;
    f->t = tgc_tensor_new(&two, 1, TGC_I64, c->dev);
    if (!f->t)
        return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_OOM;
    void *p = dptr(f->t);
    void *args[] = {&p};
    return launch(c, OPS_K_FLAG_INIT, OPS_SINGLE, 1, args);
}

/* Queues the check of n indices of ix against [0, limit) (skipping `ignore` when has_ignore). */
static tgc_status flag_check(const ops_ctx *c, flag_buf *f, const tgc_tensor *ix, int64_t n,
                             int64_t limit, int has_ignore, int64_t ignore)
{
    if (!f->t)
        return TGC_OK;
    ops_tv v = tv_of(ix);
    merge1(&v);
    void *ip = dptr(ix), *fp = dptr(f->t);
    void *a1[] = {&v, &ip, &n, &limit, &has_ignore, &ignore, &fp};
    tgc_status s = launch(c, OPS_K_CHECK_INDEX, OPS_GRID, n, a1);
    void *a2[] = {&v, &ip, &fp};
    return s != TGC_OK ? s : launch(c, OPS_K_INDEX_REPORT, OPS_SINGLE, 1, a2);
}

/* Synchronizes and reads the flag: *bad = 1 with the position and value when one was out of
 * range. */
static tgc_status flag_end(const ops_ctx *c, flag_buf *f, int *bad, int64_t *pos, int64_t *val)
{
    *bad = 0;
    tgc_status s = TGC_OK;
    if (!tgc_ops_capturing(c)) {
        s = tgc_ops_sync(c);
        uint64_t v[2] = {~(uint64_t)0, 0};
        if (s == TGC_OK) {
            char fn[48];
            snprintf(fn, sizeof fn, "tgc_%s", c->op);
            s = tgc_tensor_read(fn, f->t, v);
        }
        if (s == TGC_OK && v[0] != ~(uint64_t)0) {
            *bad = 1;
            *pos = (int64_t)v[0];
            *val = (int64_t)v[1];
        }
    }
    tgc_tensor_free(f->t);
    f->t = NULL;
    return s;
}

/* ---- pointwise (and cast): k_pointwise.c's three paths as two (its f32 path equals its
 * double path bit for bit) ---- */

static int all_integer_pw(tgc_tensor *const *in, int n_in, tgc_dtype odt)
{
    if (tgc_dtype_is_float(odt))
        return 0;
    for (int k = 0; k < n_in; k++)
        if (tgc_dtype_is_float(in[k]->dtype))
            return 0;
    return 1;
}

static int is_int_scalar(double s)
{
    return s == (double)(int64_t)s && s > -9223372036854775808.0 && s < 9223372036854775808.0;
}

static int64_t sat_i64(double v)
{
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    return (int64_t)v;
}

static double floor_d(double v)
{
    double t = (double)(int64_t)v;
    return t > v ? t - 1 : t;
}

static double ceil_d(double v)
{
    double t = (double)(int64_t)v;
    return t < v ? t + 1 : t;
}

/* The integer forms of a step's scalars (prepare_int_path of k_pointwise.c): 0 when the
 * integer path cannot take them. */
static int int_scalars(int op, double lo, double hi, int64_t *s0, int64_t *s1)
{
    switch (op) {
    case OPS_PW_CONST:
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR:
    case TGC_OP_MUL_SCALAR:
        if (!(lo == lo) || !is_int_scalar(lo))
            return 0;
        *s0 = (int64_t)lo;
        return 1;
    case TGC_OP_CLAMP:
        if (lo != lo || hi != hi)
            return 0;
        /* saturate first: huge bounds do not fit the int64 round trip of ceil/floor */
        *s0 = lo <= -9.2e18 ? INT64_MIN : lo >= 9.2e18 ? INT64_MAX : sat_i64(ceil_d(lo));
        *s1 = hi <= -9.2e18 ? INT64_MIN : hi >= 9.2e18 ? INT64_MAX : sat_i64(floor_d(hi));
        return 1;
    default: return 1;
    }
}

/* prepare_int_path of k_pointwise.c, decided by the node's op as interp decides; every
 * step's scalars then take their integer forms. */
static int int_path(tgc_op op, tgc_op_kind kind, tgc_tensor *const *in, int n_in, tgc_dtype odt,
                    ops_pw *pw)
{
    if (!all_integer_pw(in, n_in, odt))
        return 0;
    switch (op) {
    case TGC_OP_DIV:
    case TGC_OP_POW:
    case TGC_OP_DIV_SCALAR:
    case TGC_OP_POW_SCALAR: return 0;
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR:
    case TGC_OP_MUL_SCALAR:
    case TGC_OP_CLAMP: break;
    default:
        if (kind == TGC_KIND_UNARY && op != TGC_OP_CAST && op != TGC_OP_NEG && op != TGC_OP_ABS &&
            op != TGC_OP_RELU)
            return 0;
    }
    for (int k = 0; k < pw->n_steps; k++) {
        ops_pw_step *st = &pw->step[k];
        if (!int_scalars(st->op, st->f0, st->f1, &st->s0, &st->s1))
            return 0;
    }
    return 1;
}

/* ---- the program of a pointwise node: a builder of steps (ir/formula.h) ---- */

typedef struct pw_prog {
    ops_pw *pw;
    tgc_formula_builder b; /* ctx: this */
} pw_prog;

static int32_t pw_step(pw_prog *p, int op, const int32_t *in, int n_in, double f0, double f1)
{
    ops_pw *pw = p->pw;
    if (pw->n_steps >= OPS_PW_STEPS) {
        tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc cuda: a pointwise formula of more than %d steps",
                      OPS_PW_STEPS);
        return -1;
    }
    ops_pw_step *st = &pw->step[pw->n_steps];
    memset(st, 0, sizeof *st);
    st->op = op;
    st->a = n_in > 0 ? in[0] : 0;
    st->b = n_in > 1 ? in[1] : st->a;
    st->c = n_in > 2 ? in[2] : st->a;
    st->f0 = f0;
    st->f1 = f1;
    return 3 + pw->n_steps++;
}

static const tgc_formula_builder *pw_builder(pw_prog *p);

/* A step of op, or its formula's steps: the kernel computes in double (interp's double
 * path), so a nested formula's dtype is immaterial. */
static int32_t pwb_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    pw_prog *p = ctx;
    if (tgc_op_has_formula(op))
        return tgc_op_formula(op, pw_builder(p), in, n_in, a, TGC_F64);
    return pw_step(p, (int)op, in, n_in, a->f[0], a->f[1]);
}

static int32_t pwb_const(void *ctx, double v, tgc_dtype dt)
{
    (void)dt;
    return pw_step(ctx, OPS_PW_CONST, NULL, 0, v, 0.0);
}

/* The inputs arrive rounded to the compute dtype (cast_dt) and the store converts to the
 * result's: a formula's casts are those two, nothing to compute in between. */
static int32_t pwb_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    (void)ctx, (void)dt;
    return x;
}

static const tgc_formula_builder *pw_builder(pw_prog *p)
{
    p->b = (tgc_formula_builder){p, pwb_op, pwb_const, pwb_cast, NULL};
    return &p->b;
}

int tgc_cuda_ops_pw_program(tgc_op op, const tgc_attrs *a, int n_in, ops_pw *pw)
{
    static const tgc_attrs none;
    pw_prog p = {pw, {0}};
    const int32_t in[3] = {0, 1, 2};
    pw->n_steps = 0;
    if (n_in < 1 || n_in > 3)
        return 0;
    int32_t r = pwb_op(&p, op, in, n_in, a ? a : &none);
    /* the value must be the last step's (a formula whose value is an operand or an earlier
     * step ends with a copy: CAST's step is the identity) */
    if (r >= 0 && r != 2 + pw->n_steps)
        r = pw_step(&p, TGC_OP_CAST, &r, 1, 0.0, 0.0);
    return r >= 0;
}

static int broadcast_strides(const tgc_tensor *t, const int64_t *shape, int nd, int64_t *st)
{
    int lead = nd - t->ndim;
    if (lead < 0)
        return 0;
    for (int d = 0; d < nd; d++) {
        int k = d - lead;
        if (k < 0 || t->shape[k] == 1)
            st[d] = 0;
        else if (t->shape[k] == shape[d])
            st[d] = t->strides[k];
        else
            return 0;
    }
    return 1;
}

static tgc_status run_pointwise(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                const int64_t *shape, tgc_tensor **out)
{
    const tgc_op op = nd->op;
    const tgc_op_kind kind = tgc_op_info_of(op)->kind;
    const int n_in = nd->n_in, ndim = nd->out.ndim;
    const tgc_dtype odt = nd->out.dtype;
    if (n_in < 1 || n_in > 3)
        return unsupported();
    ops_pw pw;
    memset(&pw, 0, sizeof pw);
    pw.o = tv_contig(shape, ndim, odt);
    pw.nin = n_in;
    if (!tgc_cuda_ops_pw_program(op, &nd->attrs, n_in, &pw))
        return unsupported(); /* interp runs it */
    tgc_dtype cdt = TGC_DTYPE_COUNT;
    if (kind == TGC_KIND_COMPARE)
        cdt = tgc_promote(in[0]->dtype, in[1]->dtype);
    else if (kind != TGC_KIND_TERNARY && op != TGC_OP_CAST)
        cdt = odt;
    for (int k = 0; k < n_in; k++) {
        int64_t st[TGC_MAX_DIMS];
        if (!broadcast_strides(in[k], shape, ndim, st))
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc_%s: input %d does not broadcast to the output's shape", c->op,
                                 k);
        pw.in[k] = tv_make(shape, st, ndim, in[k]->dtype);
        pw.cast_dt[k] = (int)(cdt == TGC_DTYPE_COUNT ? in[k]->dtype : cdt);
    }
    pw.int_path = int_path(op, kind, in, n_in, odt, &pw);
    ops_tv *all[4] = {&pw.o, &pw.in[0], &pw.in[1], &pw.in[2]};
    tgc_ops_merge(all, 1 + n_in);
    tgc_status s = new_out(c, shape, ndim, odt, out);
    if (s != TGC_OK)
        return s;
    int64_t n = numel(*out);
    void *o = dptr(*out), *a = dptr(in[0]), *b = n_in > 1 ? dptr(in[1]) : NULL;
    void *cc = n_in > 2 ? dptr(in[2]) : NULL;
    void *args[] = {&pw, &o, &a, &b, &cc, &n};
    return launch(c, OPS_K_POINTWISE, OPS_GRID, n, args);
}

/* ---- copies ---- */

/* dst region (base pointer dp, strides dst over src's shape) = src (its own geometry) */
static tgc_status copy_into(const ops_ctx *c, void *dp, const int64_t *dst, tgc_dtype ddt,
                            const tgc_tensor *src, void *sp, const int64_t *shape, int nd,
                            const int64_t *sst)
{
    ops_tv d = tv_make(shape, dst, nd, ddt), s = tv_make(shape, sst, nd, src->dtype);
    int64_t n = prod(shape, 0, nd);
    ops_tv *both[2] = {&d, &s};
    tgc_ops_merge(both, 2);
    void *args[] = {&d, &dp, &s, &sp, &n};
    return launch(c, OPS_K_COPY, OPS_GRID, n, args);
}

static tgc_status run_view_copy(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const int ndim = nd->out.ndim;
    int64_t st[TGC_MAX_DIMS], off = x->offset, ost[TGC_MAX_DIMS];
    int view = tgc_view_geometry(nd->op, x, &nd->attrs, shape, ndim, st, &off);
    if (!view && nd->op != TGC_OP_RESHAPE && nd->op != TGC_OP_FLATTEN &&
        nd->op != TGC_OP_CONTIGUOUS)
        return unsupported();
    if (!view && numel(x) != prod(shape, 0, ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, ndim, nd->out.dtype, out);
    if (s != TGC_OK || numel(*out) == 0)
        return s;
    if (view) {
        tgc_row_major_strides(shape, ndim, ost);
        return copy_into(c, dptr(*out), ost, (*out)->dtype, x, dptr_at(x, off), shape, ndim, st);
    }
    /* a reshape that is not a view: x's elements in row-major order */
    tgc_row_major_strides(x->shape, x->ndim, ost);
    return copy_into(c, dptr(*out), ost, (*out)->dtype, x, dptr(x), x->shape, x->ndim, x->strides);
}

static int is_contiguous(const tgc_tensor *t);

/* cat of dense inputs of out's dtype along a dim nothing precedes: each input is one range of
 * out, so OPS_CAT_MAX inputs per launch (tgc_ops_cat_dense) instead of one copy each. */
static tgc_status cat_dense(const ops_ctx *c, tgc_tensor *const *in, int n, tgc_tensor *out)
{
    size_t esz = tgc_dtype_size(out->dtype);
    char *dst = dptr(out);
    int64_t at = 0; /* bytes into out */
    tgc_status s = TGC_OK;
    for (int k0 = 0; k0 < n && s == TGC_OK;) {
        ops_catd d;
        memset(&d, 0, sizeof d);
        char *base = dst + at;
        int64_t bytes = 0;
        uintptr_t align = (uintptr_t)base;
        int k = k0;
        for (; k < n && d.n < OPS_CAT_MAX; k++) {
            int64_t nb = numel(in[k]) * (int64_t)esz;
            if (nb == 0)
                continue;
            d.src[d.n] = dptr(in[k]);
            d.off[d.n++] = bytes;
            align |= (uintptr_t)d.src[d.n - 1] | (uintptr_t)bytes;
            bytes += nb;
        }
        align |= (uintptr_t)bytes;
        d.w = align % 16 == 0 ? 16 : align % 8 == 0 ? 8 : align % 4 == 0 ? 4 : 1;
        for (int i = 0; i < d.n; i++)
            d.off[i] /= d.w;
        d.off[d.n] = bytes / d.w;
        if (d.n) {
            void *args[] = {&d, &base};
            s = launch(c, OPS_K_CAT_DENSE, OPS_GRID, d.off[d.n], args);
        }
        at += bytes;
        k0 = k;
    }
    return s;
}

static tgc_status run_cat(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                          const int64_t *shape, tgc_tensor **out)
{
    const int ndim = nd->out.ndim;
    int dim = norm_axis(nd->attrs.dim.dim, ndim);
    if (dim < 0)
        return unsupported();
    int64_t ost[TGC_MAX_DIMS], total = 0;
    for (int k = 0; k < nd->n_in; k++) {
        const tgc_tensor *t = in[k];
        if (numel(t) == 0)
            continue;
        if (t->ndim != ndim)
            return unsupported();
        for (int d = 0; d < ndim; d++)
            if (d != dim && t->shape[d] != shape[d])
                return unsupported();
        total += t->shape[dim];
    }
    if (prod(shape, 0, ndim) > 0 && total != shape[dim])
        return unsupported();
    tgc_status s = new_out(c, shape, ndim, nd->out.dtype, out);
    if (s != TGC_OK)
        return s;
    if (dim == 0 || prod(shape, 0, dim) == 1) {
        int dense = 1;
        for (int k = 0; k < nd->n_in && dense; k++)
            dense = in[k]->dtype == nd->out.dtype && is_contiguous(in[k]);
        if (dense)
            return cat_dense(c, in, nd->n_in, *out);
    }
    tgc_row_major_strides(shape, ndim, ost);
    int64_t at = 0;
    size_t esz = tgc_dtype_size(nd->out.dtype);
    for (int k = 0; k < nd->n_in && s == TGC_OK; k++) {
        const tgc_tensor *t = in[k];
        if (numel(t) == 0)
            continue;
        void *dp = (char *)dptr(*out) + at * ost[dim] * (int64_t)esz;
        s = copy_into(c, dp, ost, nd->out.dtype, t, dptr(t), t->shape, t->ndim, t->strides);
        at += t->shape[dim];
    }
    return s;
}

static tgc_status run_stack(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                            const int64_t *shape, tgc_tensor **out)
{
    const int ndim = nd->out.ndim;
    int dim = norm_axis(nd->attrs.dim.dim, ndim);
    if (dim < 0 || shape[dim] != nd->n_in)
        return unsupported();
    int64_t ost[TGC_MAX_DIMS], pst[TGC_MAX_DIMS];
    tgc_row_major_strides(shape, ndim, ost);
    for (int d = 0, k = 0; d < ndim; d++)
        if (d != dim)
            pst[k++] = ost[d];
    for (int k = 0; k < nd->n_in; k++) {
        const tgc_tensor *t = in[k];
        if (t->ndim != ndim - 1)
            return unsupported();
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != shape[d < dim ? d : d + 1])
                return unsupported();
    }
    tgc_status s = new_out(c, shape, ndim, nd->out.dtype, out);
    size_t esz = tgc_dtype_size(nd->out.dtype);
    for (int k = 0; k < nd->n_in && s == TGC_OK; k++) {
        const tgc_tensor *t = in[k];
        if (numel(t) == 0)
            continue;
        void *dp = (char *)dptr(*out) + k * ost[dim] * (int64_t)esz;
        s = copy_into(c, dp, pst, nd->out.dtype, t, dptr(t), t->shape, t->ndim, t->strides);
    }
    return s;
}

/* FLIP (a fallback: a CUDA plan lowers it as a loop kernel): one strided copy through
 * tgc_flip_geometry. */
static tgc_status run_flip(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                           const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const int ndim = x->ndim;
    if (nd->out.ndim != ndim || !tgc_shape_equal(shape, ndim, x->shape, ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, ndim, nd->out.dtype, out);
    if (s != TGC_OK || numel(*out) == 0)
        return s;
    int64_t sst[TGC_MAX_DIMS], ost[TGC_MAX_DIMS], off;
    tgc_flip_geometry(x, nd->attrs.flip.mask, sst, &off);
    tgc_row_major_strides(shape, ndim, ost);
    return copy_into(c, dptr(*out), ost, (*out)->dtype, x, dptr_at(x, off), shape, ndim, sst);
}

static tgc_status run_pad(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                          const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const tgc_attrs *a = &nd->attrs;
    int64_t before[TGC_MAX_DIMS] = {0}, after[TGC_MAX_DIMS] = {0};
    int64_t ost[TGC_MAX_DIMS], cnt[TGC_MAX_DIMS];
    const int ndim = x->ndim;
    int64_t pairs = a->pad.n_pairs;
    if (pairs < 0 || pairs > ndim || nd->out.ndim != ndim || 1 + 2 * pairs > a->ni)
        return unsupported();
    for (int k = 0; k < pairs; k++) {
        before[ndim - 1 - k] = a->pad.pads[2 * k];
        after[ndim - 1 - k] = a->pad.pads[2 * k + 1];
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] != x->shape[d] + before[d] + after[d])
            return unsupported();
    tgc_status s = new_out(c, shape, ndim, nd->out.dtype, out);
    if (s != TGC_OK)
        return s;
    int64_t n = numel(*out);
    if (n == 0)
        return TGC_OK;
    void *o = dptr(*out);
    int dt = (int)nd->out.dtype;
    double v = a->pad.value;
    void *fa[] = {&o, &dt, &n, &v};
    s = launch(c, OPS_K_FILL, OPS_GRID, n, fa);
    tgc_row_major_strides(shape, ndim, ost);
    int64_t soff = x->offset, doff = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t lo = before[d] < 0 ? -before[d] : 0;
        int64_t hi = after[d] < 0 ? x->shape[d] + after[d] : x->shape[d];
        cnt[d] = hi - lo;
        if (cnt[d] <= 0)
            return s;
        soff += lo * x->strides[d];
        doff += (lo + before[d]) * ost[d];
    }
    if (s != TGC_OK)
        return s;
    void *dp = (char *)o + doff * (int64_t)tgc_dtype_size(nd->out.dtype);
    return copy_into(c, dp, ost, nd->out.dtype, x, dptr_at(x, soff), cnt, ndim, x->strides);
}

/* ---- indexing ---- */

static tgc_status index_error(const ops_ctx *c, int64_t v, int64_t limit, int64_t pos)
{
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc_%s: index %" PRId64 " out of range [0, %" PRId64
                         ") at position %" PRId64,
                         c->op, v, limit, pos);
}

/* embedding and index_select: out = t with dim replaced by the ids of ix */
static tgc_status run_select(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *t = in[0], *ix = in[1];
    int dim = 0;
    if (nd->op == TGC_OP_EMBEDDING) {
        if (t->ndim != 2)
            return unsupported();
    } else {
        dim = t->ndim ? norm_axis(nd->attrs.dim.dim, t->ndim) : 0;
        if (dim < 0 || ix->ndim > 1)
            return unsupported();
    }
    if (ix->dtype != TGC_I32 && ix->dtype != TGC_I64)
        return unsupported();
    int64_t n = numel(ix), limit = t->ndim ? t->shape[dim] : 1, want = n;
    for (int d = 0; d < t->ndim; d++)
        want *= d == dim ? 1 : t->shape[d];
    if (prod(shape, 0, nd->out.ndim) != want)
        return unsupported();
    ops_tv tv = tv_of(t);
    if (t->ndim == 0) {
        tv.nd = 1;
        tv.shape[0] = 1;
        tv.st[0] = 0;
    }
    int64_t inner = prod(tv.shape, dim + 1, tv.nd);
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || n == 0)
        return s;
    flag_buf f = {0};
    s = flag_begin(c, &f);
    if (s == TGC_OK)
        s = flag_check(c, &f, ix, n, limit, 0, 0);
    ops_tv iv = tv_of(ix);
    void *tp = dptr(t), *ip = dptr(ix), *op = dptr(*out);
    int odt = (int)nd->out.dtype;
    void *args[] = {&tv, &tp, &iv, &ip, &op, &odt, &dim, &n, &inner, &limit, &want};
    if (s == TGC_OK && want > 0)
        s = launch(c, OPS_K_SELECT, OPS_GRID, want, args);
    int bad = 0;
    int64_t pos = 0, val = 0;
    if (f.t) {
        tgc_status s2 = flag_end(c, &f, &bad, &pos, &val);
        s = s != TGC_OK ? s : s2;
    }
    if (s == TGC_OK && bad)
        s = index_error(c, val, limit, pos);
    return s;
}

static tgc_status run_gather(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *t = in[0], *ix = in[1];
    const int r = ix->ndim;
    int dim = r ? norm_axis(nd->attrs.dim.dim, r) : 0;
    if (dim < 0 || t->ndim != r || !tgc_shape_equal(ix->shape, r, shape, nd->out.ndim) ||
        (ix->dtype != TGC_I32 && ix->dtype != TGC_I64))
        return unsupported();
    for (int d = 0; d < r; d++)
        if (d != dim && ix->shape[d] > t->shape[d]) {
            char b1[96], b2[96];
            return tgc_set_error(TGC_ERR_SHAPE,
                                 "tgc_gather: index %s is larger than input %s at dim %d",
                                 tgc_format_dims(ix->shape, r, b1, sizeof b1),
                                 tgc_format_dims(t->shape, r, b2, sizeof b2), d);
        }
    int64_t n = numel(ix), limit = r ? t->shape[dim] : 1;
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || n == 0)
        return s;
    flag_buf f = {0};
    s = flag_begin(c, &f);
    if (s == TGC_OK)
        s = flag_check(c, &f, ix, n, limit, 0, 0);
    ops_tv tv = tv_of(t), iv = tv_of(ix);
    void *tp = dptr(t), *ip = dptr(ix), *op = dptr(*out);
    int odt = (int)nd->out.dtype;
    void *args[] = {&tv, &tp, &iv, &ip, &op, &odt, &dim, &limit, &n};
    if (s == TGC_OK)
        s = launch(c, OPS_K_GATHER, OPS_GRID, n, args);
    int bad = 0;
    int64_t pos = 0, val = 0;
    if (f.t) {
        tgc_status s2 = flag_end(c, &f, &bad, &pos, &val);
        s = s != TGC_OK ? s : s2;
    }
    if (s == TGC_OK && bad)
        s = index_error(c, val, limit, pos);
    return s;
}

/* ---- reductions, softmax ---- */

static tgc_status run_reduce(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const tgc_op op = nd->op;
    const tgc_attrs *a = &nd->attrs;
    uint64_t mask;
    if (op == TGC_OP_ARGMAX) {
        if (a->argmax.dim < 0 || a->argmax.dim >= (x->ndim > 0 ? x->ndim : 1))
            return unsupported();
        mask = (uint64_t)1 << a->argmax.dim;
    } else {
        mask = (uint64_t)a->reduce.mask;
    }
    if (x->ndim == 0)
        mask &= ~(uint64_t)1;
    if (mask >> x->ndim)
        return unsupported();
    ops_rg g;
    memset(&g, 0, sizeof g);
    g.count = 1;
    for (int d = 0; d < x->ndim; d++) {
        ops_tv *v = (mask >> d & 1) ? &g.red : &g.keep;
        v->shape[v->nd] = x->shape[d];
        v->st[v->nd++] = x->strides[d];
        if (mask >> d & 1)
            g.count *= x->shape[d];
    }
    g.red.dt = (int)x->dtype;
    g.keep.dt = (int)x->dtype;
    g.op = (int)op;
    g.as_int = !tgc_dtype_is_float(x->dtype) &&
               (op == TGC_OP_SUM || op == TGC_OP_MAX || op == TGC_OP_ARGMAX);
    g.odt = (int)nd->out.dtype;
    g.correction = op == TGC_OP_VAR ? (double)a->reduce.correction : 0.0;
    g.nout = prod(g.keep.shape, 0, g.keep.nd);
    if (g.nout != prod(shape, 0, nd->out.ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || g.nout == 0)
        return s;
    merge1(&g.keep);
    merge1(&g.red);
    void *xp = dptr(x), *op_ = dptr(*out);
    void *args[] = {&g, &xp, &op_};
    return launch_rows(c, OPS_K_REDUCE, g.nout, g.count, args);
}

static tgc_status run_softmax(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                              const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    int dim = (int)nd->attrs.dim.dim;
    if (dim < 0 || dim >= (x->ndim > 0 ? x->ndim : 1) ||
        !tgc_shape_equal(x->shape, x->ndim, shape, nd->out.ndim))
        return unsupported();
    int64_t full[TGC_MAX_DIMS];
    tgc_row_major_strides(x->shape, x->ndim, full);
    ops_sg g;
    memset(&g, 0, sizeof g);
    g.n = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) {
            g.n = x->shape[d];
            g.xst = x->strides[d];
            g.ost = full[d];
            continue;
        }
        g.keep.shape[g.keep.nd] = x->shape[d];
        g.keep.st[g.keep.nd++] = x->strides[d];
        g.okeep.shape[g.okeep.nd] = x->shape[d];
        g.okeep.st[g.okeep.nd++] = full[d];
    }
    g.rows = prod(g.keep.shape, 0, g.keep.nd);
    g.odt = (int)nd->out.dtype;
    g.log_ = nd->op == TGC_OP_LOG_SOFTMAX;
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || numel(*out) == 0)
        return s;
    void *xp = dptr(x), *op = dptr(*out);
    int xdt = (int)x->dtype;
    void *args[] = {&g, &xp, &op, &xdt};
    ops_tv *keeps[2] = {&g.keep, &g.okeep};
    tgc_ops_merge(keeps, 2);
    return launch_rows(c, OPS_K_SOFTMAX, g.rows, g.n, args);
}

/* ---- norms ---- */

static ops_pv pv_of(const tgc_tensor *t)
{
    ops_pv p;
    memset(&p, 0, sizeof p);
    if (t) {
        p.v = tv_of(t);
        p.present = 1;
    }
    return p;
}

static tgc_status run_layer_norm(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                 const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0], *wt = NULL, *bs = NULL;
    const int n_norm = (int)nd->attrs.layer_norm.n_norm;
    const int64_t bits = nd->attrs.layer_norm.has;
    int k = 1;
    if (bits & TGC_LN_HAS_WEIGHT)
        wt = k < nd->n_in ? in[k++] : NULL;
    if (bits & TGC_LN_HAS_BIAS)
        bs = k < nd->n_in ? in[k++] : NULL;
    if (k != nd->n_in || ((bits & TGC_LN_HAS_WEIGHT) && !wt) || ((bits & TGC_LN_HAS_BIAS) && !bs) ||
        n_norm < 0 || n_norm > x->ndim)
        return unsupported();
    int64_t M = prod(x->shape, x->ndim - n_norm, x->ndim);
    int64_t rows = prod(x->shape, 0, x->ndim - n_norm);
    if ((wt && numel(wt) != M) || (bs && numel(bs) != M))
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || numel(*out) == 0)
        return s;
    ops_tv xv = tv_of(x);
    merge1(&xv);
    ops_pv wv = pv_of(wt), bv = pv_of(bs);
    merge1(&wv.v);
    merge1(&bv.v);
    void *xp = dptr(x), *op = dptr(*out), *wp = dptr(wt), *bp = dptr(bs);
    int odt = (int)nd->out.dtype;
    double eps = nd->attrs.layer_norm.eps;
    void *args[] = {&xv, &xp, &op, &odt, &rows, &M, &eps, &wv, &wp, &bv, &bp};
    return launch_rows(c, OPS_K_LAYER_NORM, rows, M, args);
}

static tgc_status run_batch_norm(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                 const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const int training = nd->attrs.batch_norm.training != 0;
    const int64_t bits = nd->attrs.batch_norm.has;
    tgc_tensor *rm = NULL, *rv = NULL;
    const tgc_tensor *wt = NULL, *bs = NULL;
    int k = 1, n_in = nd->n_in;
    if (bits & TGC_BN_HAS_STATS) {
        if (k + 2 > n_in)
            return unsupported();
        rm = in[k++];
        rv = in[k++];
    }
    if (bits & TGC_BN_HAS_WEIGHT) {
        if (k + 1 > n_in)
            return unsupported();
        wt = in[k++];
    }
    if (bits & TGC_BN_HAS_BIAS) {
        if (k + 1 > n_in)
            return unsupported();
        bs = in[k++];
    }
    if (k != n_in || (!training && !rm) || x->ndim < 2)
        return unsupported();
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || numel(*out) == 0)
        return s; /* an empty batch leaves the running stats alone, as interp */
    ops_tv xv = tv_of(x);
    merge1(&xv);
    ops_pv mv = pv_of(rm), vv = pv_of(rv), wv = pv_of(wt), bv = pv_of(bs);
    void *xp = dptr(x), *op = dptr(*out), *mp = dptr(rm), *vp = dptr(rv), *wp = dptr(wt),
         *bp = dptr(bs);
    int odt = (int)nd->out.dtype, tr = training;
    double momentum = nd->attrs.batch_norm.momentum, eps = nd->attrs.batch_norm.eps;
    /* statistics in parts: about 4 blocks per SM over the channels, each part at least 4096
     * values (one part per channel for small ones) */
    const tgc_cuda_props *pr = tgc_cuda_props_of(c->dev.index);
    const int64_t sms = pr && pr->sms > 0 ? pr->sms : 132;
    const int64_t cnt = N * S, total = cnt * C;
    int64_t P = training ? (cnt + 4095) / 4096 : 0; /* >= 1 in training: cnt > 0 here */
    if (P > (4 * sms + C - 1) / C)
        P = (4 * sms + C - 1) / C;
    int small = total < ((int64_t)1 << 31);
    int vec4 = S % 4 == 0 && xv.nd == 1 && xv.st[0] == 1 && x->dtype == TGC_F32 &&
               nd->out.dtype == TGC_F32 && (uintptr_t)xp % 16 == 0 && (uintptr_t)op % 16 == 0;
    size_t wsb = (size_t)(2 * C * P + 3 * C) * sizeof(double);
    tgc_storage *ws = tgc_storage_new(wsb, c->dev);
    if (!ws)
        return tgc_keep_error(TGC_ERR_OOM,
                              "tgc_batch_norm: out of memory for its statistics (%zu bytes)", wsb);
    double *w1 = (double *)ws->data, *w2 = w1 + 2 * C * P;
    void *sa[] = {&xv, &xp, &N, &C, &S, &P, &small, &vec4, &w1};
    void *fa[] = {&xv, &xp, &N,  &C,  &S,  &P,  &tr, &momentum, &eps, &w1,
                  &w2, &mv, &mp, &vv, &vp, &wv, &wp, &bv,       &bp};
    void *aa[] = {&xv, &xp, &op, &odt, &N, &C, &S, &small, &vec4, &w2};
    s = training ? tgc_ops_launch(c, OPS_K_BN_STATS, OPS_BLOCKS, C * P, 256, sa) : TGC_OK;
    if (s == TGC_OK)
        s = launch(c, OPS_K_BN_FINAL, OPS_GRID, C, fa);
    if (s == TGC_OK)
        s = launch(c, OPS_K_BN_APPLY, OPS_GRID, vec4 ? total / 4 : total, aa);
    tgc_storage_unref(ws); /* stream-ordered: reused only by later work on this stream */
    if (s == TGC_OK && training && rm) {
        tgc_storage_bump(rm->storage);
        tgc_storage_bump(rv->storage);
    }
    return s;
}

/* ---- pools ---- */

static tgc_status run_pool(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                           const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    const tgc_attrs *a = &nd->attrs;
    const int r = x->ndim;
    if (r < 2 || nd->out.ndim != r)
        return unsupported();
    int64_t H = x->shape[r - 2], W = x->shape[r - 1], OH = shape[r - 2], OW = shape[r - 1];
    int kind = nd->op == TGC_OP_MAX_POOL2D ? 0 : nd->op == TGC_OP_AVG_POOL2D ? 1 : 2;
    int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;
    int excl = 0;
    if (kind != 2) {
        kh = a->pool.kh;
        kw = a->pool.kw;
        sh = a->pool.sh;
        sw = a->pool.sw;
        ph = a->pool.ph;
        pw = a->pool.pw;
        excl = a->pool.exclude_padding != 0;
        if (kh < 1 || kw < 1 || sh < 1 || sw < 1)
            return unsupported();
    } else if (OH < 1 || OW < 1) {
        if (prod(shape, 0, r) != 0)
            return unsupported();
    }
    tgc_status s = new_out(c, shape, r, nd->out.dtype, out);
    int64_t n = numel(*out ? *out : x);
    if (s != TGC_OK || n == 0)
        return s;
    ops_tv planes = tv_make(x->shape, x->strides, r - 2, x->dtype);
    merge1(&planes);
    void *xp = dptr(x), *op = dptr(*out);
    int xdt = (int)x->dtype, odt = (int)nd->out.dtype;
    int64_t hs = x->strides[r - 2], ws = x->strides[r - 1];
    void *args[] = {&planes, &xp,   &xdt, &hs, &ws, &H,  &W,  &op, &odt,  &OH,
                    &OW,     &kind, &kh,  &kw, &sh, &sw, &ph, &pw, &excl, &n};
    return launch(c, OPS_K_POOL2D, OPS_GRID, n, args);
}

/* ---- losses ---- */

static tgc_status run_loss(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                           const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0], *tg = in[1];
    int ce = nd->op == TGC_OP_CROSS_ENTROPY;
    const int reduction = (int)nd->attrs.loss.reduction;
    int64_t ignore = nd->attrs.loss.ignore_index;
    double eps = ce ? nd->attrs.loss.label_smoothing : 0.0;
    if (x->ndim < 1 || (tg->dtype != TGC_I32 && tg->dtype != TGC_I64) ||
        (reduction != TGC_REDUCE_NONE && reduction != TGC_REDUCE_MEAN &&
         reduction != TGC_REDUCE_SUM))
        return unsupported();
    const int cdim = x->ndim == 1 ? 0 : 1;
    int64_t N = x->ndim == 1 ? 1 : x->shape[0], C = x->shape[cdim];
    int64_t D = prod(x->shape, cdim + 1, x->ndim), P = N * D, cstride = x->strides[cdim];
    if (numel(tg) != P)
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK)
        return s;
    if (reduction == TGC_REDUCE_NONE && P == 0)
        return TGC_OK;
    flag_buf f = {0};
    tgc_tensor *scratch = NULL;
    if (P > 0) {
        s = flag_begin(c, &f);
        if (s == TGC_OK)
            s = flag_check(c, &f, tg, P, C, 1, ignore);
    }
    if (s == TGC_OK && reduction != TGC_REDUCE_NONE) {
        int64_t two_p = 2 * (P > 0 ? P : 1);
        scratch = tgc_tensor_new(&two_p, 1, TGC_F64, c->dev);
        if (!scratch)
            s = tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_OOM;
    }
    ops_tv xv = tv_of(x), tv = tv_of(tg);
    merge1(&xv);
    merge1(&tv);
    void *xp = dptr(x), *tp = dptr(tg), *op = dptr(*out), *sp = dptr(scratch);
    int odt = (int)nd->out.dtype, none = reduction == TGC_REDUCE_NONE;
    void *args[] = {&xv,     &xp, &tv,  &tp,   &P,  &C,   &D, &cstride,
                    &ignore, &ce, &eps, &none, &op, &odt, &sp};
    if (s == TGC_OK && P > 0)
        s = launch(c, OPS_K_LOSS, OPS_WARPS, P, args);
    int mean = reduction == TGC_REDUCE_MEAN;
    void *rargs[] = {&sp, &P, &mean, &op, &odt};
    if (s == TGC_OK && !none)
        s = launch(c, OPS_K_LOSS_REDUCE, OPS_SINGLE, 1, rargs);
    int bad = 0;
    int64_t pos = 0, val = 0;
    if (f.t) {
        tgc_status s2 = flag_end(c, &f, &bad, &pos, &val);
        s = s != TGC_OK ? s : s2;
    } else if (scratch && s == TGC_OK && !tgc_ops_capturing(c)) {
        s = tgc_ops_sync(c); /* the scratch is freed below: let the kernels finish first */
    }
    tgc_tensor_free(scratch);
    if (s == TGC_OK && bad)
        s = tgc_set_error(
            TGC_ERR_INVALID_ARG, "tgc_%s: target %lld out of range [0, %lld) at position %lld",
            ce ? "cross_entropy" : "nll_loss", (long long)val, (long long)C, (long long)pos);
    return s;
}

/* ---- creation and random ---- */

static tgc_status run_create(const ops_ctx *c, const tgc_node *nd, const int64_t *shape,
                             tgc_tensor **out)
{
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK)
        return s;
    int64_t n = numel(*out);
    void *op = dptr(*out);
    int dt = (int)nd->out.dtype;
    if (nd->op == TGC_OP_ARANGE) {
        double start = nd->attrs.arange.start, step = nd->attrs.arange.step;
        void *args[] = {&op, &dt, &n, &start, &step};
        return launch(c, OPS_K_ARANGE, OPS_GRID, n, args);
    }
    uint64_t seed, base = tgc_rng_draw((uint64_t)n, &seed);
    int normal = nd->attrs.rand.normal != 0;
    void *args[] = {&op, &dt, &n, &seed, &base, &normal};
    return launch(c, OPS_K_RAND, OPS_GRID, n, args);
}

static tgc_status run_dropout(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                              const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0];
    if (!tgc_shape_equal(x->shape, x->ndim, shape, nd->out.ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    int64_t n = s == TGC_OK ? numel(*out) : 0;
    if (s != TGC_OK || n == 0)
        return s; /* interp draws nothing for an empty tensor */
    const double p = nd->attrs.dropout.p, scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    uint64_t seed, base = tgc_rng_draw((uint64_t)n, &seed);
    ops_tv xv = tv_of(x);
    merge1(&xv);
    void *xp = dptr(x), *op = dptr(*out);
    int odt = (int)nd->out.dtype;
    double pp = p, sc = scale;
    void *args[] = {&xv, &xp, &op, &odt, &n, &seed, &base, &pp, &sc};
    return launch(c, OPS_K_DROPOUT, OPS_GRID, n, args);
}

/* ---- linear algebra (double accumulation, every dtype) ---- */

static tgc_status run_matmul(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *a = in[0], *b = in[1];
    if (a->ndim < 1 || b->ndim < 1)
        return unsupported();
    ops_mm g;
    memset(&g, 0, sizeof g);
    int64_t kb;
    int na, nb;
    if (a->ndim == 1) {
        g.m = 1;
        g.k = a->shape[0];
        g.a_rs = 0;
        g.a_cs = a->strides[0];
        na = 0;
    } else {
        g.m = a->shape[a->ndim - 2];
        g.k = a->shape[a->ndim - 1];
        g.a_rs = a->strides[a->ndim - 2];
        g.a_cs = a->strides[a->ndim - 1];
        na = a->ndim - 2;
    }
    if (b->ndim == 1) {
        kb = b->shape[0];
        g.n = 1;
        g.b_rs = b->strides[0];
        g.b_cs = 0;
        nb = 0;
    } else {
        kb = b->shape[b->ndim - 2];
        g.n = b->shape[b->ndim - 1];
        g.b_rs = b->strides[b->ndim - 2];
        g.b_cs = b->strides[b->ndim - 1];
        nb = b->ndim - 2;
    }
    if (kb != g.k)
        return unsupported();
    int nbat = na > nb ? na : nb;
    int64_t batch = 1;
    g.batch.nd = nbat;
    for (int d = 0; d < nbat; d++) {
        int da = d - (nbat - na), db = d - (nbat - nb);
        int64_t za = da >= 0 ? a->shape[da] : 1, zb = db >= 0 ? b->shape[db] : 1;
        if (za != zb && za != 1 && zb != 1)
            return unsupported();
        g.batch.shape[d] = za == 0 || zb == 0 ? 0 : za > zb ? za : zb;
        g.batch.st[d] = za == 1 ? 0 : a->strides[da];
        g.sb[d] = zb == 1 ? 0 : b->strides[db];
        batch *= g.batch.shape[d];
    }
    g.adt = (int)a->dtype;
    g.bdt = (int)b->dtype;
    g.odt = (int)nd->out.dtype;
    int64_t total = batch * g.m * g.n;
    if (total != prod(shape, 0, nd->out.ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || total == 0)
        return s;
    void *ap = dptr(a), *bp = dptr(b), *op = dptr(*out);
    void *args[] = {&g, &ap, &bp, &op, &total};
    return launch(c, OPS_K_MATMUL, OPS_GRID, total, args);
}

static tgc_status run_linear(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0], *w = in[1], *bias = nd->n_in == 3 ? in[2] : NULL;
    if (x->ndim < 1 || w->ndim != 2 || (bias && bias->ndim != 1))
        return unsupported();
    int64_t in_f = x->shape[x->ndim - 1], out_f = w->shape[0];
    if (w->shape[1] != in_f || (bias && bias->shape[0] != out_f))
        return unsupported();
    ops_tv xl = tv_make(x->shape, x->strides, x->ndim - 1, x->dtype);
    merge1(&xl);
    int64_t rows = prod(x->shape, 0, x->ndim - 1), total = rows * out_f;
    if (total != prod(shape, 0, nd->out.ndim))
        return unsupported();
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK || total == 0)
        return s;
    void *xp = dptr(x), *wp = dptr(w), *bp = dptr(bias), *op = dptr(*out);
    int64_t xk = x->strides[x->ndim - 1], w0 = w->strides[0], w1 = w->strides[1];
    int64_t bst = bias ? bias->strides[0] : 0;
    int wdt = (int)w->dtype, bdt = bias ? (int)bias->dtype : 0, odt = (int)nd->out.dtype;
    void *args[] = {&xl,  &xp,  &xk, &wp,  &wdt,  &w0,    &w1,   &bp,
                    &bdt, &bst, &op, &odt, &in_f, &out_f, &total};
    return launch(c, OPS_K_LINEAR, OPS_GRID, total, args);
}

static int64_t conv_out_size(int64_t n, int64_t pad, int64_t dil, int64_t k, int64_t stride)
{
    int64_t span = n + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

static tgc_status run_conv2d(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                             const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *x = in[0], *w = in[1], *bias = nd->n_in == 3 ? in[2] : NULL;
    const tgc_attrs *a = &nd->attrs;
    if (x->ndim != 4 || w->ndim != 4 || (bias && bias->ndim != 1))
        return unsupported();
    ops_cv g;
    memset(&g, 0, sizeof g);
    g.sh = a->conv2d.stride_h;
    g.sw = a->conv2d.stride_w;
    g.ph = a->conv2d.pad_h;
    g.pw = a->conv2d.pad_w;
    g.dh = a->conv2d.dil_h;
    g.dw = a->conv2d.dil_w;
    int64_t groups = a->conv2d.groups;
    if (g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 || g.dh < 1 || g.dw < 1 || groups < 1)
        return unsupported();
    g.n = x->shape[0];
    g.c = x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.o = w->shape[0];
    g.cg = w->shape[1];
    g.kh = w->shape[2];
    g.kw = w->shape[3];
    g.og = g.o / groups;
    g.oh = conv_out_size(g.h, g.ph, g.dh, g.kh, g.sh);
    g.ow = conv_out_size(g.w, g.pw, g.dw, g.kw, g.sw);
    int64_t want[4] = {g.n, g.o, g.oh, g.ow};
    if (g.cg * groups != g.c || g.og * groups != g.o || (bias && bias->shape[0] != g.o) ||
        !tgc_shape_equal(shape, nd->out.ndim, want, 4))
        return unsupported();
    for (int d = 0; d < 4; d++) {
        g.xs[d] = x->strides[d];
        g.ws[d] = w->strides[d];
    }
    g.bst = bias ? bias->strides[0] : 0;
    g.xdt = (int)x->dtype;
    g.wdt = (int)w->dtype;
    g.bdt = bias ? (int)bias->dtype : 0;
    g.odt = (int)nd->out.dtype;
    tgc_status s = new_out(c, shape, 4, nd->out.dtype, out);
    int64_t total = s == TGC_OK ? numel(*out) : 0;
    if (s != TGC_OK || total == 0)
        return s;
    void *xp = dptr(x), *wp = dptr(w), *bp = dptr(bias), *op = dptr(*out);
    void *args[] = {&g, &xp, &wp, &bp, &op, &total};
    return launch(c, OPS_K_CONV2D, OPS_GRID, total, args);
}

/* ---- backward ops ---- */

static int is_contiguous(const tgc_tensor *t)
{
    int64_t st[TGC_MAX_DIMS];
    tgc_row_major_strides(t->shape, t->ndim, st);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != 1 && t->strides[d] != st[d])
            return 0;
    return 1;
}

/* t itself when contiguous, else a contiguous copy in *tmp (the caller frees it) */
static tgc_status contiguous_of(const ops_ctx *c, const tgc_tensor *t, const tgc_tensor **res,
                                tgc_tensor **tmp)
{
    *tmp = NULL;
    *res = t;
    if (is_contiguous(t))
        return TGC_OK;
    tgc_status s = new_out(c, t->shape, t->ndim, t->dtype, tmp);
    if (s != TGC_OK)
        return s;
    int64_t st[TGC_MAX_DIMS];
    tgc_row_major_strides(t->shape, t->ndim, st);
    *res = *tmp;
    return copy_into(c, dptr(*tmp), st, t->dtype, t, dptr(t), t->shape, t->ndim, t->strides);
}

/* the NHWC strides of a 4-D shape [n, c, h, w] */
static void nhwc_strides(const int64_t *sh, int64_t *st)
{
    st[1] = 1;
    st[3] = sh[1];
    st[2] = sh[3] * sh[1];
    st[0] = sh[2] * st[2];
}

/* 1 when 4-D t [n, c, h, w] is channels-last: NHWC contiguous (and not NCHW contiguous) */
static int is_nhwc(const tgc_tensor *t)
{
    int64_t st[4];
    if (t->ndim != 4 || is_contiguous(t))
        return 0;
    nhwc_strides(t->shape, st);
    for (int d = 0; d < 4; d++)
        if (t->shape[d] != 1 && t->strides[d] != st[d])
            return 0;
    return 1;
}

/* t itself when channels-last, else an NHWC copy in *tmp (the caller frees it; *res then is
 * that buffer as an NCHW tensor: only its data pointer may be used) */
static tgc_status nhwc_of(const ops_ctx *c, const tgc_tensor *t, const tgc_tensor **res,
                          tgc_tensor **tmp)
{
    *tmp = NULL;
    *res = t;
    if (is_nhwc(t))
        return TGC_OK;
    tgc_status s = new_out(c, t->shape, t->ndim, t->dtype, tmp);
    if (s != TGC_OK)
        return s;
    int64_t st[4];
    nhwc_strides(t->shape, st);
    *res = *tmp;
    return copy_into(c, dptr(*tmp), st, t->dtype, t, dptr(t), t->shape, t->ndim, t->strides);
}

/* CONV2D_GRAD_INPUT(dy, w) -> dx [N, C, H, W]; CONV2D_GRAD_WEIGHT(x, dy) -> dw. f32 with a
 * geometry the templates take: cuda_conv_grad.h, reading channels-last operands in place
 * (dgrad: dy NHWC; wgrad: x or dy NHWC, the other made NHWC when it is not); else the generic
 * double kernel. */
static tgc_status run_conv_grad(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                const int64_t *shape, tgc_tensor **out)
{
    const int wgrad = nd->op == TGC_OP_CONV2D_GRAD_WEIGHT;
    const tgc_tensor *dy = wgrad ? in[1] : in[0], *other = wgrad ? in[0] : in[1];
    const tgc_attrs *a = &nd->attrs;
    if (dy->ndim != 4 || other->ndim != 4 || nd->out.ndim != 4)
        return unsupported();
    ops_cv g;
    memset(&g, 0, sizeof g);
    /* both grads' layouts begin with the forward's conv2d fields: read them through it */
    g.sh = a->conv2d.stride_h;
    g.sw = a->conv2d.stride_w;
    g.ph = a->conv2d.pad_h;
    g.pw = a->conv2d.pad_w;
    g.dh = a->conv2d.dil_h;
    g.dw = a->conv2d.dil_w;
    int64_t groups = a->conv2d.groups;
    if (g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 || g.dh < 1 || g.dw < 1 || groups < 1)
        return unsupported();
    const int64_t *xs = wgrad ? other->shape : shape, *wsh = wgrad ? shape : other->shape;
    g.n = xs[0];
    g.c = xs[1];
    g.h = xs[2];
    g.w = xs[3];
    g.o = wsh[0];
    g.cg = wsh[1];
    g.kh = wsh[2];
    g.kw = wsh[3];
    g.og = g.o / groups;
    g.oh = dy->shape[2];
    g.ow = dy->shape[3];
    if (g.cg * groups != g.c || g.og * groups != g.o || dy->shape[0] != g.n ||
        dy->shape[1] != g.o || g.oh != conv_out_size(g.h, g.ph, g.dh, g.kh, g.sh) ||
        g.ow != conv_out_size(g.w, g.pw, g.dw, g.kw, g.sw))
        return unsupported();
    tgc_status s = new_out(c, shape, 4, nd->out.dtype, out);
    int64_t total = s == TGC_OK ? numel(*out) : 0;
    if (s != TGC_OK || total == 0)
        return s;
    if (numel(dy) == 0) { /* no output pixel: a zero gradient */
        void *op = dptr(*out);
        int dt = (int)nd->out.dtype;
        double zero = 0;
        void *fa[] = {&op, &dt, &total, &zero};
        return launch(c, OPS_K_FILL, OPS_GRID, total, fa);
    }
    if (dy->dtype == TGC_F32 && other->dtype == TGC_F32 && nd->out.dtype == TGC_F32) {
        tgc_cg_args ca;
        memset(&ca, 0, sizeof ca);
        ca.wgrad = wgrad;
        ca.n = g.n;
        ca.c = g.c;
        ca.h = g.h;
        ca.w = g.w;
        ca.o = g.o;
        ca.kh = g.kh;
        ca.kw = g.kw;
        ca.oh = g.oh;
        ca.ow = g.ow;
        ca.sh = g.sh;
        ca.sw = g.sw;
        ca.ph = g.ph;
        ca.pw = g.pw;
        ca.dh = g.dh;
        ca.dw = g.dw;
        ca.groups = groups;
        if (tgc_cuda_conv_grad_fits(&ca)) {
            const tgc_tensor *dyc = dy, *xc = other;
            tgc_tensor *t1 = NULL, *t2 = NULL;
            ca.cl = is_nhwc(dy) || (wgrad && is_nhwc(other));
            s = ca.cl ? nhwc_of(c, dy, &dyc, &t1) : contiguous_of(c, dy, &dyc, &t1);
            if (s == TGC_OK && wgrad)
                s = ca.cl ? nhwc_of(c, other, &xc, &t2) : contiguous_of(c, other, &xc, &t2);
            if (s == TGC_OK) {
                ca.dy = dptr(dyc);
                ca.x = wgrad ? dptr(xc) : NULL;
                ca.wt = wgrad ? NULL : dptr(other);
                for (int d = 0; d < 4 && !wgrad; d++)
                    ca.wst[d] = other->strides[d];
                ca.out = dptr(*out);
                s = tgc_cuda_conv_grad_run(&ca, c->precision, c->dev.index, c->stream,
                                           c->cache_dir);
            }
            /* stream-ordered reuse: the copies may go back before the kernels ran */
            tgc_tensor_free(t1);
            tgc_tensor_free(t2);
            return s;
        }
    }
    const tgc_tensor *xw = other; /* x (wgrad) or w (dgrad) */
    for (int d = 0; d < 4; d++) {
        g.xs[d] = wgrad ? xw->strides[d] : dy->strides[d];
        g.ws[d] = wgrad ? dy->strides[d] : xw->strides[d];
    }
    g.xdt = wgrad ? (int)xw->dtype : 0;
    g.wdt = wgrad ? 0 : (int)xw->dtype;
    g.odt = (int)nd->out.dtype;
    int ydt = (int)dy->dtype;
    void *yp = dptr(dy), *op2 = dptr(xw), *op = dptr(*out);
    if (wgrad) {
        void *args[] = {&g, &op2, &yp, &ydt, &op, &total};
        return tgc_ops_launch(c, OPS_K_CONV2D_GRAD_WEIGHT, OPS_WARPS, total, 256, args);
    }
    void *args[] = {&g, &yp, &ydt, &op2, &op, &total};
    return launch(c, OPS_K_CONV2D_GRAD_INPUT, OPS_GRID, total, args);
}

/* MAX_POOL2D_GRAD(x, dy), AVG_POOL2D_GRAD(dy), ADAPTIVE_AVG_POOL2D_GRAD(dy) -> dx */
static tgc_status run_pool_grad(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                const int64_t *shape, tgc_tensor **out)
{
    const int kind = nd->op == TGC_OP_MAX_POOL2D_GRAD   ? 0
                     : nd->op == TGC_OP_AVG_POOL2D_GRAD ? 1
                                                        : 2;
    const tgc_tensor *x = kind == 0 ? in[0] : NULL, *dy = kind == 0 ? in[1] : in[0];
    const int r = nd->out.ndim;
    const tgc_attrs *a = &nd->attrs;
    if (r < 2 || dy->ndim != r || (x && !tgc_shape_equal(x->shape, x->ndim, shape, r)))
        return unsupported();
    for (int d = 0; d < r - 2; d++)
        if (dy->shape[d] != shape[d])
            return unsupported();
    int64_t H = shape[r - 2], W = shape[r - 1], OH = dy->shape[r - 2], OW = dy->shape[r - 1];
    int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;
    int excl = 0;
    if (kind != 2) {
        /* MAX_POOL2D_GRAD's layout is pool, AVG_POOL2D_GRAD's pool_grad begins with it */
        kh = a->pool.kh;
        kw = a->pool.kw;
        sh = a->pool.sh;
        sw = a->pool.sw;
        ph = a->pool.ph;
        pw = a->pool.pw;
        excl = kind == 1 && a->pool.exclude_padding != 0;
        if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0)
            return unsupported();
    } else if ((OH < 1 || OW < 1) && prod(shape, 0, r) != 0) {
        return unsupported();
    }
    tgc_status s = new_out(c, shape, r, nd->out.dtype, out);
    int64_t n = s == TGC_OK ? numel(*out) : 0;
    if (s != TGC_OK || n == 0)
        return s;
    ops_tv ypl = tv_make(dy->shape, dy->strides, r - 2, dy->dtype), xpl;
    memset(&xpl, 0, sizeof xpl);
    if (x)
        xpl = tv_make(x->shape, x->strides, r - 2, x->dtype);
    ops_tv *both[2] = {&ypl, &xpl};
    tgc_ops_merge(both, x ? 2 : 1);
    void *xp = x ? dptr(x) : NULL, *yp = dptr(dy), *op = dptr(*out);
    int64_t xhs = x ? x->strides[r - 2] : 0, xws = x ? x->strides[r - 1] : 0;
    int64_t yhs = dy->strides[r - 2], yws = dy->strides[r - 1];
    int odt = (int)nd->out.dtype, k = kind;
    if (numel(dy) == 0) {
        double zero = 0;
        void *fa[] = {&op, &odt, &n, &zero};
        return launch(c, OPS_K_FILL, OPS_GRID, n, fa);
    }
    /* contiguous f32 with 32-bit indices: the float kernel */
    if (dy->dtype == TGC_F32 && nd->out.dtype == TGC_F32 && is_contiguous(dy) &&
        (!x || (x->dtype == TGC_F32 && is_contiguous(x))) && n < INT32_MAX &&
        numel(dy) < INT32_MAX && kh < INT32_MAX / 2 && kw < INT32_MAX / 2 && sh < INT32_MAX / 2 &&
        sw < INT32_MAX / 2 && ph < INT32_MAX / 4 && pw < INT32_MAX / 4 && H + 2 * ph < INT32_MAX &&
        W + 2 * pw < INT32_MAX) {
        int a32[14] = {(int)H,  (int)W,  (int)OH, (int)OW, kind, (int)kh, (int)kw,
                       (int)sh, (int)sw, (int)ph, (int)pw, excl, (int)n,  (int)numel(dy)};
        /* max pooling: each window's argmax once (a window overlapping its neighbours would
         * be scanned again for every element it holds), then the sums */
        tgc_storage *arg = NULL;
        void *ap = NULL;
        if (kind == 0) {
            arg = tgc_storage_new((size_t)a32[13] * sizeof(int), c->dev);
            if (!arg)
                return tgc_keep_error(TGC_ERR_OOM,
                                      "tgc_max_pool2d_grad: out of memory for the windows' "
                                      "argmax (%lld bytes)",
                                      (long long)a32[13] * 4);
            ap = arg->data;
            void *ma[] = {&xp,     &ap,     &a32[0], &a32[1], &a32[2],  &a32[3], &a32[5],
                          &a32[6], &a32[7], &a32[8], &a32[9], &a32[10], &a32[13]};
            s = launch(c, OPS_K_POOL2D_ARGMAX_F32, OPS_GRID, a32[13], ma);
        }
        void *fa[] = {&ap,     &yp,     &op,     &a32[0], &a32[1], &a32[2],  &a32[3],  &a32[4],
                      &a32[5], &a32[6], &a32[7], &a32[8], &a32[9], &a32[10], &a32[11], &a32[12]};
        if (s == TGC_OK)
            s = launch(c, OPS_K_POOL2D_GRAD_F32, OPS_GRID, n, fa);
        if (arg)
            tgc_storage_unref(arg); /* stream-ordered: reused only by later work on this stream */
        return s;
    }
    void *args[] = {&xpl, &xp, &xhs, &xws, &ypl, &yp, &yhs, &yws, &H,  &W,    &op, &odt,
                    &OH,  &OW, &k,   &kh,  &kw,  &sh, &sw,  &ph,  &pw, &excl, &n};
    return launch(c, OPS_K_POOL2D_GRAD, OPS_GRID, n, args);
}

/* EMBEDDING_GRAD(dy, idx), INDEX_SELECT_GRAD(dy, idx), GATHER_GRAD(dy, idx): zeros of the
 * result's shape with dy scatter-added at idx. Deterministic without atomics or sorting:
 * every output element is summed by one lane, in index order, in double (interp's order and
 * arithmetic, so the results are interp's bits). Index-add: a warp per output row finds the
 * indices equal to its row 32 at a time with a ballot (outer x L x n / 32 index reads, then
 * only the matching dy rows); gather: a thread per output element over its line along dim. */
static tgc_status run_scatter_grad(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                                   const int64_t *shape, tgc_tensor **out)
{
    const tgc_tensor *dy = in[0], *ix = in[1];
    const int r = nd->out.ndim;
    if (ix->dtype != TGC_I32 && ix->dtype != TGC_I64)
        return unsupported();
    int dim = 0;
    int64_t limit, n = numel(ix), outer = 1, inner = 1;
    if (nd->op == TGC_OP_EMBEDDING_GRAD) {
        if (r != 2 || dy->ndim != ix->ndim + 1 || dy->shape[dy->ndim - 1] != shape[1] ||
            numel(dy) != n * shape[1])
            return unsupported();
        limit = shape[0];
        inner = shape[1];
    } else {
        dim = nd->op == TGC_OP_GATHER_GRAD ? (int)nd->attrs.gather_grad.dim
                                           : (int)nd->attrs.index_select_grad.dim;
        if (r ? dim < 0 || dim >= r : dim != 0)
            return unsupported();
        limit = r ? shape[dim] : 1;
        if (nd->op == TGC_OP_GATHER_GRAD) {
            if (dy->ndim != r || !tgc_shape_equal(dy->shape, dy->ndim, ix->shape, ix->ndim))
                return unsupported();
            for (int d = 0; d < r; d++)
                if (d != dim && ix->shape[d] > shape[d])
                    return unsupported();
        } else {
            if (ix->ndim > 1 || dy->ndim != r)
                return unsupported();
            for (int d = 0; d < r; d++)
                if (dy->shape[d] != (d == dim ? n : shape[d]))
                    return unsupported();
            outer = prod(shape, 0, dim);
            inner = prod(shape, dim + 1, r);
        }
    }
    tgc_status s = new_out(c, shape, r, nd->out.dtype, out);
    int64_t total = s == TGC_OK ? numel(*out) : 0;
    if (s != TGC_OK)
        return s;
    flag_buf f = {0};
    if (n > 0) {
        s = flag_begin(c, &f);
        if (s == TGC_OK)
            s = flag_check(c, &f, ix, n, limit, 0, 0);
    }
    void *yp = dptr(dy), *ip = dptr(ix), *op = dptr(*out);
    int odt = (int)nd->out.dtype;
    ops_tv iv = tv_of(ix);
    if (s == TGC_OK && total > 0 && nd->op == TGC_OP_GATHER_GRAD) {
        ops_tv ov = tv_make(shape, dy->strides, r, dy->dtype);
        void *args[] = {&ov, &yp, &iv, &ip, &op, &odt, &dim, &total};
        s = launch(c, OPS_K_GATHER_GRAD, OPS_GRID, total, args);
    } else if (s == TGC_OK && total > 0) {
        ops_tv yt = tv_of(dy);
        merge1(&yt);
        merge1(&iv);
        int64_t items = outer * limit * ((inner + 255) / 256);
        void *args[] = {&yt, &yp, &iv, &ip, &op, &odt, &limit, &n, &inner, &items};
        s = tgc_ops_launch(c, OPS_K_INDEX_ADD, OPS_WARPS, items, 256, args);
    }
    int bad = 0;
    int64_t pos = 0, val = 0;
    if (f.t) {
        tgc_status s2 = flag_end(c, &f, &bad, &pos, &val);
        s = s != TGC_OK ? s : s2;
    }
    if (s == TGC_OK && bad)
        s = index_error(c, val, limit, pos);
    return s;
}

static tgc_status run_grad(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                           const int64_t *shape, tgc_tensor **out)
{
    switch (nd->op) {
    case TGC_OP_CONV2D_GRAD_INPUT:
    case TGC_OP_CONV2D_GRAD_WEIGHT: return run_conv_grad(c, nd, in, shape, out);
    case TGC_OP_MAX_POOL2D_GRAD:
    case TGC_OP_AVG_POOL2D_GRAD:
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD: return run_pool_grad(c, nd, in, shape, out);
    case TGC_OP_EMBEDDING_GRAD:
    case TGC_OP_GATHER_GRAD:
    case TGC_OP_INDEX_SELECT_GRAD: return run_scatter_grad(c, nd, in, shape, out);
    default: return unsupported();
    }
}

/* ---- collectives (runtime/comm.h) ---- */

/* ALL_REDUCE(x): queued on the communicator's stream after the work on this stream, into a
 * new tensor (a strided x is first copied into it and reduced in place); COMM_WAIT(y, x):
 * this stream waits for y's all-reduce, the result is a view of y. */
static tgc_status run_comm(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *in,
                           const int64_t *shape, tgc_tensor **out)
{
    char who[32], where[48], step[48];
    snprintf(who, sizeof who, "tgc_%s", tgc_op_name(nd->op));
    tgc_comm *cm = tgc_comm_live(
        nd->op == TGC_OP_ALL_REDUCE ? nd->attrs.all_reduce.comm : nd->attrs.comm.comm, who);
    if (!cm)
        return tgc_last_status();
    if (!tgc_device_equal(tgc_comm_device(cm), c->dev))
        return tgc_set_error(TGC_ERR_DEVICE, "%s: the process group is on %s, the step on %s", who,
                             tgc_format_device(tgc_comm_device(cm), where, sizeof where),
                             tgc_format_device(c->dev, step, sizeof step));
    const tgc_tensor *x = in[0];
    if (nd->op == TGC_OP_COMM_WAIT) {
        tgc_status s = tgc_comm_wait(cm, dptr(x), c->stream);
        if (s != TGC_OK)
            return s;
        *out = tgc_tensor_view((tgc_tensor *)x, x->shape, x->strides, x->ndim, x->offset);
        return *out ? TGC_OK : tgc_last_status();
    }
    tgc_status s = new_out(c, shape, nd->out.ndim, nd->out.dtype, out);
    if (s != TGC_OK)
        return s;
    const void *send = dptr(x);
    if (!is_contiguous(x) && numel(x) > 0) {
        int64_t ost[TGC_MAX_DIMS];
        tgc_row_major_strides(shape, nd->out.ndim, ost);
        s = copy_into(c, dptr(*out), ost, x->dtype, x, dptr(x), x->shape, x->ndim, x->strides);
        send = dptr(*out);
    }
    if (s == TGC_OK)
        s = tgc_comm_all_reduce_start(cm, send, dptr(*out), (size_t)numel(*out), x->dtype,
                                      (tgc_dist_op)nd->attrs.all_reduce.op, c->stream);
    return s;
}

/* ---- entry points ---- */

/* The ops with an ops.def DECOMPOSITION that have a native kernel here all the same (eager
 * calls, and the forms a decomposition leaves alone: batch_norm in training). Every other
 * decomposed op runs as its decomposition only. */
static int native_despite_decomposition(tgc_op op)
{
    return op == TGC_OP_SOFTMAX || op == TGC_OP_LOG_SOFTMAX || op == TGC_OP_LAYER_NORM ||
           op == TGC_OP_BATCH_NORM;
}

int tgc_cuda_op_supported(const tgc_node *nd)
{
    if (!nd || (unsigned)nd->op >= TGC_OP_COUNT || (unsigned)nd->out.dtype >= TGC_DTYPE_COUNT)
        return 0;
    if (tgc_op_has_decomposition(nd->op) && !native_despite_decomposition(nd->op))
        return 0;
    switch (tgc_op_info_of(nd->op)->kind) {
    case TGC_KIND_SOURCE: return 0;
    case TGC_KIND_ATTENTION: return tgc_cuda_attention_supported(nd);
    case TGC_KIND_LOSS:
        return nd->attrs.loss.reduction == TGC_REDUCE_NONE ||
               nd->attrs.loss.reduction == TGC_REDUCE_MEAN ||
               nd->attrs.loss.reduction == TGC_REDUCE_SUM;
    default: return 1;
    }
}

static tgc_status dispatch(const ops_ctx *c, const tgc_node *nd, tgc_tensor *const *ins,
                           const int64_t *shape, tgc_tensor **out)
{
    switch (tgc_op_info_of(nd->op)->kind) {
    case TGC_KIND_BINARY:
    case TGC_KIND_COMPARE:
    case TGC_KIND_TERNARY:
    case TGC_KIND_SCALAR:
    case TGC_KIND_UNARY: return run_pointwise(c, nd, ins, shape, out);
    case TGC_KIND_REDUCE: return run_reduce(c, nd, ins, shape, out);
    case TGC_KIND_NORM: return run_softmax(c, nd, ins, shape, out);
    case TGC_KIND_VIEW: return run_view_copy(c, nd, ins, shape, out);
    case TGC_KIND_MOVE:
        return nd->op == TGC_OP_CAT     ? run_cat(c, nd, ins, shape, out)
               : nd->op == TGC_OP_STACK ? run_stack(c, nd, ins, shape, out)
               : nd->op == TGC_OP_FLIP  ? run_flip(c, nd, ins, shape, out)
                                        : run_pad(c, nd, ins, shape, out);
    case TGC_KIND_INDEX:
        return nd->op == TGC_OP_GATHER ? run_gather(c, nd, ins, shape, out)
                                       : run_select(c, nd, ins, shape, out);
    case TGC_KIND_MATMUL:
        return nd->op == TGC_OP_MATMUL ? run_matmul(c, nd, ins, shape, out)
                                       : run_linear(c, nd, ins, shape, out);
    case TGC_KIND_CONV: return run_conv2d(c, nd, ins, shape, out);
    case TGC_KIND_POOL: return run_pool(c, nd, ins, shape, out);
    case TGC_KIND_NN:
        return nd->op == TGC_OP_BATCH_NORM ? run_batch_norm(c, nd, ins, shape, out)
                                           : run_layer_norm(c, nd, ins, shape, out);
    case TGC_KIND_RANDOM: return run_dropout(c, nd, ins, shape, out);
    case TGC_KIND_CREATE: return run_create(c, nd, shape, out);
    case TGC_KIND_LOSS: return run_loss(c, nd, ins, shape, out);
    case TGC_KIND_GRAD: return run_grad(c, nd, ins, shape, out);
    case TGC_KIND_COMM: return run_comm(c, nd, ins, shape, out);
    default: return unsupported();
    }
}

tgc_status tgc_cuda_op_run(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                           tgc_tensor **out, const struct tgc_launch_env *env)
{
    *out = NULL;
    if (!nd || !env || env->device.type != TGC_DEVICE_CUDA || !tgc_cuda_op_supported(nd))
        return unsupported();
    if (nd->op == TGC_OP_SDPA)
        return tgc_cuda_attention_run(nd, ins, shape, out, env);
    const tgc_op_info *info = tgc_op_info_of(nd->op);
    if (nd->n_in < info->min_inputs || (info->max_inputs >= 0 && nd->n_in > info->max_inputs) ||
        nd->out.ndim < 0 || nd->out.ndim > TGC_MAX_DIMS)
        return unsupported();
    for (int k = 0; k < nd->n_in; k++) {
        const tgc_tensor *t = ins[k];
        if (!t || t->trace || t->ndim > TGC_MAX_DIMS || (unsigned)t->dtype >= TGC_DTYPE_COUNT)
            return unsupported();
        /* every input must be on this device (an empty one may have no storage) */
        if (numel(t) > 0 && (!t->storage || t->storage->device.type != TGC_DEVICE_CUDA ||
                             t->storage->device.index != env->device.index))
            return unsupported();
    }
    /* what the variant's compile decided (cuda_backend.c): the function's cfg.matmul_precision
     * (eager plans: the process default, TGC_MATMUL_PRECISION) and cfg.cache_dir */
    const tgc_cuda_native *nv = tgc_cuda_native_of(env);
    ops_ctx c = {env->device, env->stream, tgc_op_name(nd->op), nv->precision, nv->cache_dir};
    tgc_status s = dispatch(&c, nd, ins, shape, out);
    if (s != TGC_OK) {
        if (*out)
            tgc_tensor_free(*out);
        *out = NULL;
        if (s == TGC_ERR_UNSUPPORTED)
            tgc_clear_error();
        else
            tgc_interp_name_user_op(nd);
    }
    return s;
}
