/* The tensor core's element copies (tensor/copy.h): the strided copy every layer moves
 * elements with on the host, and the one tensor-to-tensor copy behind tgc_copy_, tgc_to and
 * tgc_copy_to_host, between any devices: host to host is the strided copy; anything else
 * moves contiguous bytes through the device allocators' copy (runtime/alloc.h), staging
 * strided or converting copies through a host image of the bytes the elements span. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/dtype.h"

#define TILE 32

/* ---- geometry the copies need ---- */

void tgc_row_major_strides(const int64_t *shape, int nd, int64_t *st)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
}

int tgc_shape_equal(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na != nb)
        return 0;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

/* Dense row-major: the strides of every dim of size > 1 are the contiguous ones. */
int tgc_strides_dense(const int64_t *shape, const int64_t *st, int nd)
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

void tgc_copy_strided(void *dst, tgc_dtype ddt, int64_t doff, const int64_t *dstrides,
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

/* One side of a copy: a buffer and where its elements are. On a device, base is a device
 * address (this file is the one place that holds one) and alloc the allocator that reaches
 * it; on the host, alloc is NULL. */
typedef struct layout {
    void *base;
    tgc_dtype dt;
    int64_t off;
    int nd;
    const int64_t *shape, *st;
    tgc_device dev;
    const tgc_allocator *alloc;
} layout;

static layout host_layout(void *base, tgc_dtype dt, int64_t off, int nd, const int64_t *shape,
                          const int64_t *st)
{
    return (layout){base, dt, off, nd, shape, st, {TGC_DEVICE_CPU, 0}, NULL};
}

static layout layout_of(const tgc_tensor *t)
{
    if (!tgc_on_host(t))
        return (layout){t->storage->data, t->dtype,   t->offset,          t->ndim,
                        t->shape,         t->strides, t->storage->device, t->storage->alloc};
    return host_layout(tgc_host_data(t), t->dtype, t->offset, t->ndim, t->shape, t->strides);
}

/* A dense row-major host buffer holding elements of shape (nd dims) in dtype dt. */
static layout host_buffer(void *p, tgc_dtype dt, const int64_t *shape, int nd, int64_t *st)
{
    tgc_row_major_strides(shape, nd, st);
    return host_layout(p, dt, 0, nd, shape, st);
}

static void copy_same_shape(layout d, layout s)
{
    tgc_copy_strided(d.base, d.dt, d.off, d.st, s.base, s.dt, s.off, s.st, s.shape, s.nd);
}

/* Row-major element copy between two host layouts of equal numel whose shapes may differ;
 * fn names the caller in an out-of-memory message. */
static tgc_status copy_layout(const char *fn, layout d, layout s)
{
    int64_t cst[TGC_MAX_DIMS];
    if (tgc_shape_equal(d.shape, d.nd, s.shape, s.nd)) {
        copy_same_shape(d, s);
        return TGC_OK;
    }
    /* A dense side can take the other side's shape with row-major strides. */
    if (tgc_strides_dense(d.shape, d.st, d.nd)) {
        tgc_row_major_strides(s.shape, s.nd, cst);
        copy_same_shape(host_layout(d.base, d.dt, d.off, s.nd, s.shape, cst), s);
        return TGC_OK;
    }
    if (tgc_strides_dense(s.shape, s.st, s.nd)) {
        tgc_row_major_strides(d.shape, d.nd, cst);
        copy_same_shape(d, host_layout(s.base, s.dt, s.off, d.nd, d.shape, cst));
        return TGC_OK;
    }
    /* Both strided: through a dense temporary in the source's dtype. */
    int64_t n = tgc_shape_numel(s.shape, s.nd);
    void *tmp = malloc((size_t)n * tgc_dtype_size(s.dt));
    if (!tmp)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %" PRId64 "-element temporary",
                             fn, n);
    tgc_row_major_strides(s.shape, s.nd, cst);
    copy_same_shape(host_layout(tmp, s.dt, 0, s.nd, s.shape, cst), s);
    tgc_status st = copy_layout(fn, d, host_layout(tmp, s.dt, 0, s.nd, s.shape, cst));
    free(tmp);
    return st;
}

/* Element range [lo, hi) from the buffer start that l's elements occupy (l not empty). */
static void extent(layout l, int64_t *lo, int64_t *hi)
{
    int64_t a = l.off, b = l.off;
    for (int d = 0; d < l.nd; d++) {
        int64_t span = (l.shape[d] - 1) * l.st[d];
        if (span < 0)
            a += span;
        else
            b += span;
    }
    *lo = a;
    *hi = b + 1;
}

static int overlap(layout a, layout b)
{
    if (a.base != b.base || !tgc_device_equal(a.dev, b.dev))
        return 0;
    int64_t alo, ahi, blo, bhi, ea = (int64_t)tgc_dtype_size(a.dt),
                                eb = (int64_t)tgc_dtype_size(b.dt);
    extent(a, &alo, &ahi);
    extent(b, &blo, &bhi);
    return alo * ea < bhi * eb && blo * eb < ahi * ea;
}

static int same_layout(layout a, layout b)
{
    return a.base == b.base && tgc_device_equal(a.dev, b.dev) && a.dt == b.dt && a.off == b.off &&
           tgc_shape_equal(a.shape, a.nd, b.shape, b.nd) &&
           !memcmp(a.st, b.st, sizeof(int64_t) * (size_t)a.nd);
}

/* nbytes contiguous bytes from src to dst, at least one of them on a device (its allocator
 * non-NULL), through the allocators' copy: one call when one allocator reaches both sides,
 * else through a host buffer. */
static tgc_status move_bytes(const char *fn, void *dst, tgc_device ddev, const tgc_allocator *da,
                             const void *src, tgc_device sdev, const tgc_allocator *sa,
                             size_t nbytes)
{
    tgc_status st;
    if (da && sa && da != sa) {
        void *tmp = malloc(nbytes ? nbytes : 1);
        if (!tmp)
            return tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %zu-byte staging buffer", fn,
                                 nbytes);
        st = move_bytes(fn, tmp, tgc_cpu(), NULL, src, sdev, sa, nbytes);
        if (st == TGC_OK)
            st = move_bytes(fn, dst, ddev, da, tmp, tgc_cpu(), NULL, nbytes);
        free(tmp);
        return st;
    }
    const tgc_allocator *a = sa ? sa : da;
    st = a->copy(a->ctx, dst, ddev, src, sdev, nbytes);
    if (st != TGC_OK) {
        char why[512], dn[48], sn[48];
        snprintf(why, sizeof why, "%s", tgc_last_error());
        tgc_set_error(st, "%s: copying %zu bytes from %s to %s failed: %s", fn, nbytes,
                      tgc_format_device(sdev, sn, sizeof sn),
                      tgc_format_device(ddev, dn, sizeof dn), why);
    }
    return st;
}

/* A host image of l: l itself on the host; on a device a malloc'd copy (*buf, to free) of
 * the elements' byte range, read from the device when `read`, with the layout rebased onto
 * it. *lo: where the range starts, in elements. */
static tgc_status stage(const char *fn, layout l, int read, layout *h, void **buf, int64_t *lo)
{
    *h = l;
    *buf = NULL;
    if (!l.alloc)
        return TGC_OK;
    int64_t hi;
    extent(l, lo, &hi);
    size_t es = tgc_dtype_size(l.dt), nb = (size_t)(hi - *lo) * es;
    *buf = malloc(nb);
    if (!*buf)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %zu-byte staging buffer", fn,
                             nb);
    tgc_status st = TGC_OK;
    if (read)
        st = move_bytes(fn, *buf, tgc_cpu(), NULL, (char *)l.base + *lo * (int64_t)es, l.dev,
                        l.alloc, nb);
    *h = host_layout(*buf, l.dt, l.off - *lo, l.nd, l.shape, l.st);
    return st;
}

/* Row-major copy of s's elements into d (equal numel > 0, shapes may differ), on the host
 * (d and s do not overlap) or with either side on a device. */
static tgc_status copy_any(const char *fn, layout d, layout s)
{
    if (!d.alloc && !s.alloc)
        return copy_layout(fn, d, s);
    int d_dense = tgc_strides_dense(d.shape, d.st, d.nd);
    if (d.dt == s.dt && d_dense && tgc_strides_dense(s.shape, s.st, s.nd) && !overlap(d, s)) {
        int64_t es = (int64_t)tgc_dtype_size(s.dt), n = tgc_shape_numel(s.shape, s.nd);
        return move_bytes(fn, (char *)d.base + d.off * es, d.dev, d.alloc,
                          (const char *)s.base + s.off * es, s.dev, s.alloc, (size_t)(n * es));
    }
    /* Strided, converting or overlapping: the elements move on the host between images of
     * both sides; a dense destination is written whole, so only a strided one is read. */
    layout hs, hd;
    void *sbuf, *dbuf;
    int64_t slo = 0, dlo = 0;
    tgc_status st = stage(fn, s, 1, &hs, &sbuf, &slo);
    if (st == TGC_OK)
        st = stage(fn, d, !d_dense, &hd, &dbuf, &dlo);
    else
        dbuf = NULL;
    if (st == TGC_OK)
        st = copy_layout(fn, hd, hs);
    if (st == TGC_OK && d.alloc) {
        int64_t lo, hi, es = (int64_t)tgc_dtype_size(d.dt);
        extent(d, &lo, &hi);
        st = move_bytes(fn, (char *)d.base + lo * es, d.dev, d.alloc, dbuf, tgc_cpu(), NULL,
                        (size_t)((hi - lo) * es));
    }
    free(sbuf);
    free(dbuf);
    return st;
}

tgc_status tgc_copy_reshape(const char *fn, tgc_tensor *dst, const tgc_tensor *src)
{
    if (tgc_shape_numel(src->shape, src->ndim) == 0)
        return TGC_OK;
    return copy_any(fn, layout_of(dst), layout_of(src));
}

static tgc_status copy_tensors(const char *fn, tgc_tensor *dst, const tgc_tensor *src)
{
    char b1[96], b2[96];
    int64_t n = tgc_shape_numel(src->shape, src->ndim);
    if (n != tgc_shape_numel(dst->shape, dst->ndim))
        return tgc_set_error(TGC_ERR_SHAPE, "%s: dst is %s but src is %s", fn,
                             tgc_format_dims(dst->shape, dst->ndim, b1, sizeof b1),
                             tgc_format_dims(src->shape, src->ndim, b2, sizeof b2));
    if (n == 0)
        return TGC_OK;
    layout d = layout_of(dst), s = layout_of(src);
    if (!d.base || !s.base)
        return tgc_set_error(TGC_ERR_INTERNAL, "%s: a tensor without storage", fn);
    if (same_layout(d, s))
        return TGC_OK; /* copying a tensor onto itself */
    if (d.alloc || s.alloc || !overlap(d, s))
        return copy_any(fn, d, s); /* a device side is staged: overlap is handled there */
    /* Overlapping host storage: snapshot the source first. */
    int64_t cst[TGC_MAX_DIMS];
    void *tmp = malloc((size_t)n * tgc_dtype_size(src->dtype));
    if (!tmp)
        return tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %" PRId64 "-element temporary",
                             fn, n);
    layout snap = host_buffer(tmp, s.dt, s.shape, s.nd, cst);
    copy_same_shape(snap, s);
    tgc_status st = copy_layout(fn, d, snap);
    free(tmp);
    return st;
}

tgc_status tgc_tensor_copy(tgc_tensor *dst, const tgc_tensor *src)
{
    return copy_tensors("tgc_copy_", dst, src);
}

tgc_tensor *tgc_tensor_copy_to(const char *fn, const tgc_tensor *t, tgc_device dev)
{
    tgc_tensor *r = tgc_tensor_new_checked(fn, t->shape, t->ndim, t->dtype, dev);
    if (r && copy_tensors(fn, r, t) != TGC_OK) {
        tgc_tensor_free(r);
        return NULL;
    }
    return r;
}

tgc_status tgc_tensor_read(const char *fn, const tgc_tensor *t, void *dst)
{
    int64_t st[TGC_MAX_DIMS];
    if (tgc_shape_numel(t->shape, t->ndim) == 0)
        return TGC_OK;
    return copy_any(fn, host_buffer(dst, t->dtype, t->shape, t->ndim, st), layout_of(t));
}

tgc_status tgc_tensor_write(const char *fn, tgc_tensor *t, const void *src)
{
    int64_t st[TGC_MAX_DIMS];
    if (tgc_shape_numel(t->shape, t->ndim) == 0)
        return TGC_OK;
    return copy_any(fn, layout_of(t), host_buffer((void *)src, t->dtype, t->shape, t->ndim, st));
}

tgc_status tgc_tensor_read_item(const char *fn, const tgc_tensor *t, void *dst)
{
    layout s = layout_of(t);
    s.nd = 0; /* the one element at t's offset */
    return copy_any(fn, host_layout(dst, t->dtype, 0, 0, t->shape, t->strides), s);
}
