/* Interp kernels for views and data movement.
 *
 * View geometry: the strides and offset that let reshape, permute, expand, squeeze,
 * unsqueeze, slice, flatten and contiguous share their input's storage.
 *
 * The strided copy: every path that reads a non-contiguous tensor (a view op that must
 * copy, cat, stack, pad, index_select, embedding, tgc_copy_) goes through
 * tgc_interp_copy_strided, which drops size-1 dims, merges dims that are contiguous in both
 * source and destination, and then moves memcpy runs, strided runs, or 32x32 tiles for
 * transposes.
 *
 * Copying ops: cat, stack, pad, embedding, gather, index_select. Out-of-range indices are
 * the only data-dependent errors (TGC_ERR_INVALID_ARG naming the op, the index and its
 * position); shape disagreements that inference should have caught are TGC_ERR_INTERNAL
 * and never turn into out-of-bounds accesses. */
#include "backend/interp/interp.h"
#include "support/error.h"
#include "tgc/ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILE 32

/* ------------------------------------------------------------------------------------ */
/* Small geometry helpers                                                                */
/* ------------------------------------------------------------------------------------ */

static int norm_axis(int64_t d, int nd)
{
    if (d < 0)
        d += nd;
    return d >= 0 && d < nd ? (int)d : -1;
}

static int64_t numel_of(const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

static void row_major(const int64_t *shape, int nd, int64_t *st)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
}

static int same_shape(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na != nb)
        return 0;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

/* Dense row-major: the strides of every dim of size > 1 are the contiguous ones. */
static int dense(const int64_t *shape, const int64_t *st, int nd)
{
    int64_t want = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] == 0)
            return 1;
        if (shape[d] != 1 && st[d] != want)
            return 0;
        want *= shape[d];
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* View geometry                                                                         */
/* ------------------------------------------------------------------------------------ */

/* PyTorch's computeStride: old dims are split into chunks that are contiguous among
 * themselves; a view exists when the new shape splits at chunk boundaries only. */
static int reshape_strides(const int64_t *oshape, const int64_t *ostr, int ond,
                           const int64_t *nshape, int nnd, int64_t *nstr)
{
    int64_t numel = numel_of(oshape, ond);
    if (numel != numel_of(nshape, nnd))
        return 0;
    if (ond == 0) {
        for (int d = 0; d < nnd; d++)
            nstr[d] = 1;
        return 1;
    }
    if (numel == 0) {
        if (same_shape(oshape, ond, nshape, nnd))
            memcpy(nstr, ostr, sizeof(int64_t) * (size_t)nnd);
        else
            row_major(nshape, nnd, nstr);
        return 1;
    }
    int vd = nnd - 1;
    int64_t base = ostr[ond - 1], tnumel = 1, vnumel = 1;
    for (int td = ond - 1; td >= 0; td--) {
        tnumel *= oshape[td];
        if (td > 0 && (oshape[td - 1] == 1 || ostr[td - 1] == tnumel * base))
            continue;
        while (vd >= 0 && (vnumel < tnumel || nshape[vd] == 1)) {
            nstr[vd] = vnumel * base;
            vnumel *= nshape[vd];
            vd--;
        }
        if (vnumel != tnumel)
            return 0;
        if (td > 0) {
            base = ostr[td - 1];
            tnumel = 1;
            vnumel = 1;
        }
    }
    return vd == -1;
}

static int permute_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                            int out_ndim, int64_t *strides)
{
    unsigned seen = 0;
    if (a->ni != in->ndim || out_ndim != in->ndim)
        return 0;
    for (int j = 0; j < out_ndim; j++) {
        int p = norm_axis(a->i[j], in->ndim);
        if (p < 0 || (seen & (1u << p)) || out_shape[j] != in->shape[p])
            return 0;
        seen |= 1u << p;
        strides[j] = in->strides[p];
    }
    return 1;
}

static int expand_geometry(const tgc_tensor *in, const int64_t *out_shape, int out_ndim,
                           int64_t *strides)
{
    int lead = out_ndim - in->ndim;
    if (lead < 0)
        return 0;
    for (int j = 0; j < out_ndim; j++) {
        int k = j - lead;
        if (k < 0)
            strides[j] = 0;
        else if (in->shape[k] == out_shape[j])
            strides[j] = in->strides[k];
        else if (in->shape[k] == 1)
            strides[j] = 0;
        else
            return 0;
    }
    return 1;
}

static int squeeze_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                            int out_ndim, int64_t *strides)
{
    int k = 0;
    if (a->i[0] == TGC_ALL_DIMS) {
        for (int d = 0; d < in->ndim; d++) {
            if (in->shape[d] == 1)
                continue;
            if (k >= out_ndim || out_shape[k] != in->shape[d])
                return 0;
            strides[k++] = in->strides[d];
        }
        return k == out_ndim;
    }
    if (same_shape(in->shape, in->ndim, out_shape, out_ndim)) {
        memcpy(strides, in->strides, sizeof(int64_t) * (size_t)out_ndim);
        return 1; /* the dim is not of size 1: squeeze leaves the tensor as it is */
    }
    int drop = norm_axis(a->i[0], in->ndim);
    if (drop < 0 || in->shape[drop] != 1 || out_ndim != in->ndim - 1)
        return 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == drop)
            continue;
        if (out_shape[k] != in->shape[d])
            return 0;
        strides[k++] = in->strides[d];
    }
    return 1;
}

static int unsqueeze_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                              int out_ndim, int64_t *strides)
{
    int at = norm_axis(a->i[0], out_ndim);
    if (at < 0 || out_ndim != in->ndim + 1 || out_shape[at] != 1)
        return 0;
    for (int j = 0, d = 0; j < out_ndim; j++) {
        if (j == at) {
            /* PyTorch's choice: the stride that the dim would have if it were dense. */
            strides[j] = at < in->ndim ? in->shape[at] * in->strides[at] : 1;
            continue;
        }
        if (out_shape[j] != in->shape[d])
            return 0;
        strides[j] = in->strides[d++];
    }
    return 1;
}

static int slice_geometry(const tgc_tensor *in, const tgc_attrs *a, const int64_t *out_shape,
                          int out_ndim, int64_t *strides, int64_t *offset)
{
    int dim = norm_axis(a->i[0], in->ndim);
    int64_t start = a->i[1], end = a->i[2], step = a->i[3];
    if (dim < 0 || step <= 0 || out_ndim != in->ndim)
        return 0;
    int64_t size = in->shape[dim];
    if (start < 0)
        start += size;
    if (end < 0)
        end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t len = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for any step */
    for (int d = 0; d < out_ndim; d++) {
        if (out_shape[d] != (d == dim ? len : in->shape[d]))
            return 0;
        strides[d] = in->strides[d];
    }
    if (len > 1) /* (len - 1) * step < size: the stride fits; a size-1 dim keeps its own */
        strides[dim] *= step;
    *offset += start * in->strides[dim];
    return 1;
}

int tgc_interp_view_geometry(tgc_op op, const tgc_tensor *in, const tgc_attrs *a,
                             const int64_t *out_shape, int out_ndim, int64_t *strides,
                             int64_t *offset)
{
    *offset = in->offset;
    if (out_ndim < 0 || out_ndim > TGC_MAX_DIMS)
        return 0;
    switch (op) {
    case TGC_OP_RESHAPE:
    case TGC_OP_FLATTEN:
        return reshape_strides(in->shape, in->strides, in->ndim, out_shape, out_ndim, strides);
    case TGC_OP_CONTIGUOUS:
        if (!same_shape(in->shape, in->ndim, out_shape, out_ndim) || !tgc_tensor_is_contiguous(in))
            return 0;
        memcpy(strides, in->strides, sizeof(int64_t) * (size_t)out_ndim);
        return 1;
    case TGC_OP_PERMUTE: return permute_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_EXPAND: return expand_geometry(in, out_shape, out_ndim, strides);
    case TGC_OP_SQUEEZE: return squeeze_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_UNSQUEEZE: return unsqueeze_geometry(in, a, out_shape, out_ndim, strides);
    case TGC_OP_SLICE: return slice_geometry(in, a, out_shape, out_ndim, strides, offset);
    default: return 0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* The strided copy                                                                      */
/* ------------------------------------------------------------------------------------ */

enum copy_mode { RUN_MEMCPY, RUN_STRIDED, RUN_TILE, RUN_CONVERT };

/* What one innermost run moves; the outer dims are walked by copy_outer. Strides in
 * elements; base pointers point at element 0 of each buffer. */
typedef struct copy_run {
    enum copy_mode mode;
    char *dbase;
    const char *sbase;
    tgc_dtype ddt, sdt;
    size_t esz; /* element size (same-dtype modes) */
    int64_t n;  /* elements along the inner dim */
    int64_t dstep, sstep;
    int64_t rows; /* RUN_TILE: second dim, stride 1 in src, drow in dst */
    int64_t drow;
} copy_run;

static inline __attribute__((always_inline)) void strided_run(char *d, int64_t ds, const char *s,
                                                              int64_t ss, int64_t n, size_t esz)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(d + i * ds, s + i * ss, esz);
}

/* dst row r, col c at d + r*drow + c*esz; src row r, col c at s + r*esz + c*scol. Tiles keep
 * the strided reads of a transpose inside a few cache lines. */
static inline __attribute__((always_inline)) void
tile_run(char *d, int64_t drow, const char *s, int64_t scol, int64_t rows, int64_t cols, size_t esz)
{
    for (int64_t r0 = 0; r0 < rows; r0 += TILE) {
        int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
        for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
            int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
            for (int64_t r = r0; r < r1; r++) {
                char *dr = d + r * drow;
                const char *sr = s + (size_t)r * esz;
                for (int64_t c = c0; c < c1; c++)
                    memcpy(dr + (size_t)c * esz, sr + c * scol, esz);
            }
        }
    }
}

static void do_run(const copy_run *r, int64_t doff, int64_t soff)
{
    switch (r->mode) {
    case RUN_MEMCPY:
        memcpy(r->dbase + doff * (int64_t)r->esz, r->sbase + soff * (int64_t)r->esz,
               (size_t)r->n * r->esz);
        return;
    case RUN_STRIDED: {
        char *d = r->dbase + doff * (int64_t)r->esz;
        const char *s = r->sbase + soff * (int64_t)r->esz;
        int64_t ds = r->dstep * (int64_t)r->esz, ss = r->sstep * (int64_t)r->esz;
        switch (r->esz) {
        case 1: strided_run(d, ds, s, ss, r->n, 1); return;
        case 2: strided_run(d, ds, s, ss, r->n, 2); return;
        case 4: strided_run(d, ds, s, ss, r->n, 4); return;
        case 8: strided_run(d, ds, s, ss, r->n, 8); return;
        default: strided_run(d, ds, s, ss, r->n, r->esz); return;
        }
    }
    case RUN_TILE: {
        char *d = r->dbase + doff * (int64_t)r->esz;
        const char *s = r->sbase + soff * (int64_t)r->esz;
        int64_t drow = r->drow * (int64_t)r->esz, scol = r->sstep * (int64_t)r->esz;
        switch (r->esz) {
        case 1: tile_run(d, drow, s, scol, r->rows, r->n, 1); return;
        case 2: tile_run(d, drow, s, scol, r->rows, r->n, 2); return;
        case 4: tile_run(d, drow, s, scol, r->rows, r->n, 4); return;
        case 8: tile_run(d, drow, s, scol, r->rows, r->n, 8); return;
        default: tile_run(d, drow, s, scol, r->rows, r->n, r->esz); return;
        }
    }
    case RUN_CONVERT:
        for (int64_t i = 0; i < r->n; i++)
            tgc_store(r->dbase, r->ddt, doff + i * r->dstep,
                      tgc_load(r->sbase, r->sdt, soff + i * r->sstep));
        return;
    }
}

/* Walks the m outer dims in row-major order and runs the inner copy at each position. */
static void copy_outer(const copy_run *r, int m, const int64_t *shape, const int64_t *dst,
                       const int64_t *sst, int64_t doff, int64_t soff)
{
    int64_t idx[TGC_MAX_DIMS] = {0};
    for (;;) {
        do_run(r, doff, soff);
        int k = m - 1;
        for (; k >= 0; k--) {
            doff += dst[k];
            soff += sst[k];
            if (++idx[k] < shape[k])
                break;
            doff -= dst[k] * shape[k];
            soff -= sst[k] * shape[k];
            idx[k] = 0;
        }
        if (k < 0)
            return;
    }
}

/* Drops size-1 dims and merges neighbours that are contiguous in both layouts; returns the
 * remaining rank, or -1 when the shape is empty. */
static int coalesce(const int64_t *shape, const int64_t *dstr, const int64_t *sstr, int nd,
                    int64_t *sh, int64_t *ds, int64_t *ss)
{
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0)
            return -1;
        if (shape[d] == 1)
            continue;
        if (n > 0 && ds[n - 1] == dstr[d] * shape[d] && ss[n - 1] == sstr[d] * shape[d]) {
            sh[n - 1] *= shape[d];
            ds[n - 1] = dstr[d];
            ss[n - 1] = sstr[d];
            continue;
        }
        sh[n] = shape[d];
        ds[n] = dstr[d];
        ss[n] = sstr[d];
        n++;
    }
    return n;
}

/* Removes dim k from the three arrays of length n. */
static void drop_dim(int64_t *sh, int64_t *ds, int64_t *ss, int n, int k)
{
    for (int d = k; d < n - 1; d++) {
        sh[d] = sh[d + 1];
        ds[d] = ds[d + 1];
        ss[d] = ss[d + 1];
    }
}

void tgc_interp_copy_strided(void *dst, tgc_dtype ddt, int64_t doff, const int64_t *dstrides,
                             const void *src, tgc_dtype sdt, int64_t soff, const int64_t *sstrides,
                             const int64_t *shape, int ndim)
{
    int64_t sh[TGC_MAX_DIMS], ds[TGC_MAX_DIMS], ss[TGC_MAX_DIMS];
    int n = coalesce(shape, dstrides, sstrides, ndim, sh, ds, ss);
    if (n < 0)
        return;
    copy_run r = {.dbase = dst,
                  .sbase = src,
                  .ddt = ddt,
                  .sdt = sdt,
                  .esz = tgc_dtype_size(ddt),
                  .n = 1,
                  .dstep = 1,
                  .sstep = 1};
    if (n > 0) {
        r.n = sh[n - 1];
        r.dstep = ds[n - 1];
        r.sstep = ss[n - 1];
        n--;
    }
    if (ddt != sdt) {
        r.mode = RUN_CONVERT;
    } else if (r.dstep == 1 && r.sstep == 1) {
        r.mode = RUN_MEMCPY;
    } else {
        r.mode = RUN_STRIDED;
        /* A transpose: some outer dim is the source's unit-stride dim while the inner one
         * writes the destination densely. Tile those two dims. */
        for (int k = n - 1; k >= 0 && r.dstep == 1; k--) {
            if (ss[k] != 1 || sh[k] < 4 || r.n < 4)
                continue;
            r.mode = RUN_TILE;
            r.rows = sh[k];
            r.drow = ds[k];
            drop_dim(sh, ds, ss, n, k);
            n--;
            break;
        }
    }
    copy_outer(&r, n, sh, ds, ss, doff, soff);
}

/* One side of a copy: a buffer and where its elements are. */
typedef struct layout {
    void *base;
    tgc_dtype dt;
    int64_t off;
    int nd;
    const int64_t *shape, *st;
} layout;

static layout layout_of(const tgc_tensor *t)
{
    return (layout){tgc_tensor_base(t), t->dtype, t->offset, t->ndim, t->shape, t->strides};
}

static void copy_same_shape(layout d, layout s)
{
    tgc_interp_copy_strided(d.base, d.dt, d.off, d.st, s.base, s.dt, s.off, s.st, s.shape, s.nd);
}

/* Row-major element copy between two layouts of equal numel whose shapes may differ; fn
 * names the caller in an out-of-memory message. */
static tgc_status copy_layout(const char *fn, layout d, layout s)
{
    int64_t cst[TGC_MAX_DIMS];
    if (same_shape(d.shape, d.nd, s.shape, s.nd)) {
        copy_same_shape(d, s);
        return TGC_OK;
    }
    /* A dense side can take the other side's shape with row-major strides. */
    if (dense(d.shape, d.st, d.nd)) {
        row_major(s.shape, s.nd, cst);
        copy_same_shape((layout){d.base, d.dt, d.off, s.nd, s.shape, cst}, s);
        return TGC_OK;
    }
    if (dense(s.shape, s.st, s.nd)) {
        row_major(d.shape, d.nd, cst);
        copy_same_shape(d, (layout){s.base, s.dt, s.off, d.nd, d.shape, cst});
        return TGC_OK;
    }
    /* Both strided: through a dense temporary in the source's dtype. */
    int64_t n = numel_of(s.shape, s.nd);
    void *tmp = malloc((size_t)n * tgc_dtype_size(s.dt));
    if (!tmp)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %" PRId64 "-element temporary",
                             fn, n);
    row_major(s.shape, s.nd, cst);
    copy_same_shape((layout){tmp, s.dt, 0, s.nd, s.shape, cst}, s);
    tgc_status st = copy_layout(fn, d, (layout){tmp, s.dt, 0, s.nd, s.shape, cst});
    free(tmp);
    return st;
}

/* Storage byte range [lo, hi) that t's elements occupy (t not empty). */
static void byte_extent(const tgc_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t a = t->offset, b = t->offset, es = (int64_t)tgc_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        int64_t span = (t->shape[d] - 1) * t->strides[d];
        if (span < 0)
            a += span;
        else
            b += span;
    }
    *lo = a * es;
    *hi = (b + 1) * es;
}

static int same_layout(const tgc_tensor *a, const tgc_tensor *b)
{
    return a->dtype == b->dtype && a->offset == b->offset &&
           same_shape(a->shape, a->ndim, b->shape, b->ndim) &&
           !memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim);
}

tgc_status tgc_interp_copy(tgc_tensor *dst, const tgc_tensor *src)
{
    char b1[96], b2[96];
    int64_t n = numel_of(src->shape, src->ndim);
    if (n != numel_of(dst->shape, dst->ndim))
        return tgc_set_error(TGC_ERR_SHAPE, "tgc_copy_: dst is %s but src is %s",
                             tgc_format_dims(dst->shape, dst->ndim, b1, sizeof b1),
                             tgc_format_dims(src->shape, src->ndim, b2, sizeof b2));
    if (n == 0)
        return TGC_OK;
    layout d = layout_of(dst), s = layout_of(src);
    if (!d.base || !s.base)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_copy_: a tensor without host storage");
    int64_t dlo, dhi, slo, shi;
    byte_extent(dst, &dlo, &dhi);
    byte_extent(src, &slo, &shi);
    if (d.base != s.base || shi <= dlo || dhi <= slo)
        return copy_layout("tgc_copy_", d, s);
    if (same_layout(dst, src))
        return TGC_OK; /* copying a tensor onto itself */
    /* Overlapping storage: snapshot the source first. */
    int64_t cst[TGC_MAX_DIMS];
    void *tmp = malloc((size_t)n * tgc_dtype_size(src->dtype));
    if (!tmp)
        return tgc_set_error(TGC_ERR_OOM,
                             "tgc_copy_: out of memory for a %" PRId64 "-element temporary", n);
    row_major(src->shape, src->ndim, cst);
    layout snap = {tmp, s.dt, 0, s.nd, s.shape, cst};
    copy_same_shape(snap, s);
    tgc_status st = copy_layout("tgc_copy_", d, snap);
    free(tmp);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Copying ops                                                                           */
/* ------------------------------------------------------------------------------------ */

static tgc_status shape_mismatch(tgc_op op, const char *what, const tgc_tensor *t,
                                 const tgc_tensor *out)
{
    char b1[96], b2[96];
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: %s %s does not fit output %s", tgc_op_name(op),
                         what, tgc_format_dims(t->shape, t->ndim, b1, sizeof b1),
                         tgc_format_dims(out->shape, out->ndim, b2, sizeof b2));
}

/* Copies src (its own geometry) into out's region at doff with strides dst. */
static void copy_into(tgc_tensor *out, int64_t doff, const int64_t *dst, const tgc_tensor *src,
                      int64_t soff, const int64_t *shape, int nd)
{
    tgc_interp_copy_strided(tgc_tensor_base(out), out->dtype, doff, dst, tgc_tensor_base(src),
                            src->dtype, soff, src->strides, shape, nd);
}

static tgc_status view_copy(tgc_op op, const tgc_tensor *in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t st[TGC_MAX_DIMS], off, ost[TGC_MAX_DIMS];
    row_major(out->shape, out->ndim, ost);
    if (tgc_interp_view_geometry(op, in, a, out->shape, out->ndim, st, &off)) {
        tgc_interp_copy_strided(tgc_tensor_base(out), out->dtype, out->offset, ost,
                                tgc_tensor_base(in), in->dtype, off, st, out->shape, out->ndim);
        return TGC_OK;
    }
    if ((op != TGC_OP_RESHAPE && op != TGC_OP_FLATTEN && op != TGC_OP_CONTIGUOUS) ||
        numel_of(in->shape, in->ndim) != numel_of(out->shape, out->ndim))
        return shape_mismatch(op, "input", in, out);
    char fn[48];
    snprintf(fn, sizeof fn, "tgc_%s", tgc_op_name(op));
    layout d = layout_of(out);
    d.st = ost;
    return copy_layout(fn, d, layout_of(in));
}

static tgc_status cat_kernel(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t ost[TGC_MAX_DIMS], total = 0;
    int dim = norm_axis(a->i[0], out->ndim);
    if (dim < 0)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_cat: dim %" PRId64 " out of range", a->i[0]);
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (numel_of(t->shape, t->ndim) == 0)
            continue; /* empty pieces add nothing */
        if (t->ndim != out->ndim)
            return shape_mismatch(TGC_OP_CAT, "piece", t, out);
        for (int d = 0; d < out->ndim; d++)
            if (d != dim && t->shape[d] != out->shape[d])
                return shape_mismatch(TGC_OP_CAT, "piece", t, out);
        total += t->shape[dim];
    }
    if (numel_of(out->shape, out->ndim) > 0 && total != out->shape[dim])
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_cat: pieces add up to %" PRId64
                             " along dim %d, output has %" PRId64,
                             total, dim, out->shape[dim]);
    row_major(out->shape, out->ndim, ost);
    int64_t at = 0;
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (numel_of(t->shape, t->ndim) == 0)
            continue;
        copy_into(out, out->offset + at * ost[dim], ost, t, t->offset, t->shape, t->ndim);
        at += t->shape[dim];
    }
    return TGC_OK;
}

static tgc_status stack_kernel(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t ost[TGC_MAX_DIMS], pst[TGC_MAX_DIMS];
    int dim = norm_axis(a->i[0], out->ndim);
    if (dim < 0 || out->shape[dim] != n_in)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_stack: dim %" PRId64 " does not hold %d pieces",
                             a->i[0], n_in);
    row_major(out->shape, out->ndim, ost);
    for (int d = 0, k = 0; d < out->ndim; d++)
        if (d != dim)
            pst[k++] = ost[d];
    for (int k = 0; k < n_in; k++) {
        const tgc_tensor *t = in[k];
        if (t->ndim != out->ndim - 1)
            return shape_mismatch(TGC_OP_STACK, "piece", t, out);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != out->shape[d < dim ? d : d + 1])
                return shape_mismatch(TGC_OP_STACK, "piece", t, out);
    }
    for (int k = 0; k < n_in; k++)
        copy_into(out, out->offset + k * ost[dim], pst, in[k], in[k]->offset, in[k]->shape,
                  in[k]->ndim);
    return TGC_OK;
}

/* Writes value into every element of the dense out. */
static void fill_value(tgc_tensor *out, double value)
{
    int64_t n = numel_of(out->shape, out->ndim);
    size_t esz = tgc_dtype_size(out->dtype);
    if (n == 0)
        return;
    char *p = (char *)tgc_tensor_base(out) + out->offset * (int64_t)esz;
    tgc_store(p, out->dtype, 0, value);
    int zero = 1;
    for (size_t b = 0; b < esz; b++)
        zero &= p[b] == 0;
    size_t total = (size_t)n * esz, have = esz;
    if (zero) {
        memset(p, 0, total);
        return;
    }
    while (have < total) {
        size_t c = have < total - have ? have : total - have;
        memcpy(p + have, p, c);
        have += c;
    }
}

static tgc_status pad_kernel(const tgc_tensor *in, const tgc_attrs *a, tgc_tensor *out)
{
    int64_t before[TGC_MAX_DIMS] = {0}, after[TGC_MAX_DIMS] = {0};
    int64_t ost[TGC_MAX_DIMS], cnt[TGC_MAX_DIMS];
    int nd = in->ndim;
    int64_t pairs = a->i[0];
    if (pairs < 0 || pairs > nd || out->ndim != nd)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_pad: %" PRId64 " pairs for a %d-d input", pairs,
                             nd);
    for (int k = 0; k < pairs; k++) {
        before[nd - 1 - k] = a->i[1 + 2 * k];
        after[nd - 1 - k] = a->i[2 + 2 * k];
    }
    for (int d = 0; d < nd; d++)
        if (out->shape[d] != in->shape[d] + before[d] + after[d])
            return shape_mismatch(TGC_OP_PAD, "padded input", in, out);
    fill_value(out, a->f[0]);
    row_major(out->shape, nd, ost);
    int64_t soff = in->offset, doff = out->offset;
    for (int d = 0; d < nd; d++) {
        /* input index i lands at i + before; negative pads crop */
        int64_t lo = before[d] < 0 ? -before[d] : 0;
        int64_t hi = after[d] < 0 ? in->shape[d] + after[d] : in->shape[d];
        cnt[d] = hi - lo;
        if (cnt[d] <= 0)
            return TGC_OK;
        soff += lo * in->strides[d];
        doff += (lo + before[d]) * ost[d];
    }
    copy_into(out, doff, ost, in, soff, cnt, nd);
    return TGC_OK;
}

static int64_t read_index(const void *base, tgc_dtype dt, int64_t off)
{
    if (dt == TGC_I64) {
        int64_t v;
        memcpy(&v, (const char *)base + off * 8, 8);
        return v;
    }
    if (dt == TGC_I32) {
        int32_t v;
        memcpy(&v, (const char *)base + off * 4, 4);
        return v;
    }
    double v = tgc_load(base, dt, off);
    return v >= -9.0e18 && v <= 9.0e18 ? (int64_t)v : INT64_MIN;
}

static tgc_status index_error(tgc_op op, int64_t v, int64_t limit, int64_t pos)
{
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc_%s: index %" PRId64 " out of range [0, %" PRId64
                         ") at position %" PRId64,
                         tgc_op_name(op), v, limit, pos);
}

/* Reads idx's values in row-major order into ids, checking each against [0, limit). */
static tgc_status read_indices(tgc_op op, const tgc_tensor *idx, int64_t limit, int64_t *ids)
{
    int64_t n = numel_of(idx->shape, idx->ndim), ost[TGC_MAX_DIMS] = {0};
    if (n == 0)
        return TGC_OK;
    if (idx->dtype == TGC_I64) {
        row_major(idx->shape, idx->ndim, ost);
        tgc_interp_copy_strided(ids, TGC_I64, 0, ost, tgc_tensor_base(idx), TGC_I64, idx->offset,
                                idx->strides, idx->shape, idx->ndim);
    } else {
        const int64_t *ist = idx->strides;
        int64_t pos[TGC_MAX_DIMS] = {0}, off = idx->offset;
        for (int64_t p = 0; p < n; p++) {
            ids[p] = read_index(tgc_tensor_base(idx), idx->dtype, off);
            for (int k = idx->ndim - 1; k >= 0; k--) {
                off += ist[k];
                if (++pos[k] < idx->shape[k])
                    break;
                off -= ist[k] * idx->shape[k];
                pos[k] = 0;
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        if (ids[p] < 0 || ids[p] >= limit)
            return index_error(op, ids[p], limit, p);
    return TGC_OK;
}

/* out = t with dim replaced by the n positions ids (already checked), one slice per id. */
static void select_slices(const tgc_tensor *t, int dim, const int64_t *ids, int64_t n,
                          tgc_tensor *out)
{
    int64_t shape[TGC_MAX_DIMS], tst[TGC_MAX_DIMS], ost[TGC_MAX_DIMS];
    int nd = t->ndim;
    memcpy(shape, t->shape, sizeof shape);
    memcpy(tst, t->strides, sizeof tst);
    if (nd == 0) { /* a 0-d tensor indexes like a 1-element vector */
        nd = 1;
        shape[0] = 1;
        tst[0] = 0;
    }
    shape[dim] = n;
    row_major(shape, nd, ost);
    shape[dim] = 1;
    for (int64_t j = 0; j < n; j++)
        tgc_interp_copy_strided(tgc_tensor_base(out), out->dtype, out->offset + j * ost[dim], ost,
                                tgc_tensor_base(t), t->dtype, t->offset + ids[j] * tst[dim], tst,
                                shape, nd);
}

static tgc_status select_kernel(tgc_op op, const tgc_tensor *t, int dim, const tgc_tensor *idx,
                                tgc_tensor *out)
{
    int64_t n = numel_of(idx->shape, idx->ndim);
    int64_t limit = t->ndim ? t->shape[dim] : 1, want = n;
    for (int d = 0; d < t->ndim; d++)
        want *= d == dim ? 1 : t->shape[d];
    if (numel_of(out->shape, out->ndim) != want)
        return shape_mismatch(op, "selection from", t, out);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!ids)
        return tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory for %" PRId64 " indices",
                             tgc_op_name(op), n);
    tgc_status s = read_indices(op, idx, limit, ids);
    if (s == TGC_OK && want > 0)
        select_slices(t, dim, ids, n, out);
    free(ids);
    return s;
}

/* One element of a same-dtype copy; the switch keeps the common sizes as plain moves. */
static inline void copy_elem(char *d, const char *s, size_t esz)
{
    switch (esz) {
    case 1: memcpy(d, s, 1); return;
    case 2: memcpy(d, s, 2); return;
    case 4: memcpy(d, s, 4); return;
    case 8: memcpy(d, s, 8); return;
    default: memcpy(d, s, esz); return;
    }
}

static tgc_status gather_kernel(const tgc_tensor *t, const tgc_attrs *a, const tgc_tensor *idx,
                                tgc_tensor *out)
{
    char b1[96], b2[96];
    int nd = idx->ndim;
    int dim = nd ? norm_axis(a->i[0], nd) : 0;
    if (dim < 0 || t->ndim != nd || !same_shape(idx->shape, nd, out->shape, out->ndim))
        return shape_mismatch(TGC_OP_GATHER, "index", idx, out);
    for (int d = 0; d < nd; d++)
        if (d != dim && idx->shape[d] > t->shape[d])
            return tgc_set_error(TGC_ERR_SHAPE,
                                 "tgc_gather: index %s is larger than input %s at dim %d",
                                 tgc_format_dims(idx->shape, nd, b1, sizeof b1),
                                 tgc_format_dims(t->shape, nd, b2, sizeof b2), d);
    int64_t n = numel_of(idx->shape, nd);
    int64_t limit = nd ? t->shape[dim] : 1, tdim = nd ? t->strides[dim] : 0;
    int64_t pos[TGC_MAX_DIMS] = {0}, ioff = idx->offset, toff = t->offset;
    const char *ibase = tgc_tensor_base(idx), *tbase = tgc_tensor_base(t);
    char *obase = tgc_tensor_base(out);
    size_t esz = tgc_dtype_size(out->dtype);
    int same = t->dtype == out->dtype;
    for (int64_t p = 0; p < n; p++) {
        int64_t v = read_index(ibase, idx->dtype, ioff);
        if (v < 0 || v >= limit)
            return index_error(TGC_OP_GATHER, v, limit, p);
        int64_t src = toff + v * tdim, dst = out->offset + p;
        if (same)
            copy_elem(obase + dst * (int64_t)esz, tbase + src * (int64_t)esz, esz);
        else
            tgc_store(obase, out->dtype, dst, tgc_load(tbase, t->dtype, src));
        for (int k = nd - 1; k >= 0; k--) {
            int64_t ts = k == dim ? 0 : t->strides[k];
            ioff += idx->strides[k];
            toff += ts;
            if (++pos[k] < idx->shape[k])
                break;
            ioff -= idx->strides[k] * idx->shape[k];
            toff -= ts * idx->shape[k];
            pos[k] = 0;
        }
    }
    return TGC_OK;
}

static tgc_status check_host(tgc_op op, const tgc_tensor *t)
{
    if (tgc_tensor_base(t) || numel_of(t->shape, t->ndim) == 0)
        return TGC_OK;
    return tgc_set_error(TGC_ERR_INTERNAL,
                         "tgc_%s: a tensor without host storage reached "
                         "the interp backend",
                         tgc_op_name(op));
}

tgc_status tgc_interp_movement(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                               tgc_tensor *out)
{
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_movement: op %d with %d inputs", (int)op,
                             n_in);
    for (int k = 0; k < n_in; k++) {
        if (!in[k])
            return tgc_set_error(TGC_ERR_INTERNAL, "tgc_%s: input %d is NULL", tgc_op_name(op), k);
        tgc_status s = check_host(op, in[k]);
        if (s != TGC_OK)
            return s;
    }
    tgc_status s = check_host(op, out);
    if (s != TGC_OK)
        return s;
    switch (op) {
    case TGC_OP_RESHAPE:
    case TGC_OP_PERMUTE:
    case TGC_OP_EXPAND:
    case TGC_OP_SQUEEZE:
    case TGC_OP_UNSQUEEZE:
    case TGC_OP_SLICE:
    case TGC_OP_FLATTEN:
    case TGC_OP_CONTIGUOUS: return view_copy(op, in[0], a, out);
    case TGC_OP_CAT: return cat_kernel(in, n_in, a, out);
    case TGC_OP_STACK: return stack_kernel(in, n_in, a, out);
    case TGC_OP_PAD: return pad_kernel(in[0], a, out);
    case TGC_OP_EMBEDDING:
        if (in[0]->ndim != 2)
            return shape_mismatch(op, "weight", in[0], out);
        return select_kernel(op, in[0], 0, in[1], out);
    case TGC_OP_INDEX_SELECT: {
        int dim = in[0]->ndim ? norm_axis(a->i[0], in[0]->ndim) : 0;
        if (dim < 0 || in[1]->ndim > 1)
            return shape_mismatch(op, "index", in[1], out);
        return select_kernel(op, in[0], dim, in[1], out);
    }
    case TGC_OP_GATHER: return gather_kernel(in[0], a, in[1], out);
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_movement: '%s' is not a movement op",
                             tgc_op_name(op));
    }
}
