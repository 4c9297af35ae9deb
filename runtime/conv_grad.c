/* The conv2d backward drivers around the JIT'd GEMM pieces (see conv_grad.h).
 *
 * Both gradients reuse the forward's register-blocked micro-kernel and its packing routines;
 * what is new here is how their operands are laid out: the im2col rows of a chunk of the
 * reduction (dW), and the scatter of W^T . dY back onto the input (dX, col2im). Work buffers are
 * per thread and reused across calls (tbuf), never allocated per block. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/conv_grad.h"
#include "runtime/parallel.h"
#include "support/error.h"

typedef struct cg_geom {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t cg, og, kg, oh, ow, p; /* per group: channels, outputs, im2col rows; pixels */
} cg_geom;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* ceil(a / b) for b > 0 and any sign of a */
static int64_t ceil_div(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static cg_geom geom_of(const tgc_conv_params *p)
{
    cg_geom g = {.n = p->n,
                 .c = p->c,
                 .h = p->h,
                 .w = p->w,
                 .o = p->o,
                 .kh = p->kh,
                 .kw = p->kw,
                 .sh = p->stride_h,
                 .sw = p->stride_w,
                 .ph = p->pad_h,
                 .pw = p->pad_w,
                 .dh = p->dil_h,
                 .dw = p->dil_w,
                 .groups = p->groups};
    g.cg = p->c / p->groups;
    g.og = p->o / p->groups;
    g.kg = g.cg * p->kh * p->kw;
    g.oh = tgc_conv_out_h(p);
    g.ow = tgc_conv_out_w(p);
    g.p = g.oh * g.ow;
    return g;
}

/* Per-thread work buffers, grown on demand and reused across calls (a call's buffers are a
 * few hundred KiB to a few MiB: allocating them every call costs page faults), freed when
 * the thread exits. Slots 0..2 belong to the tasks, slot 3 to the calling thread's setup,
 * which is also a worker. */
enum { CG_SLOTS = 4 };
typedef struct cg_bufs {
    float *p[CG_SLOTS];
    size_t cap[CG_SLOTS];
} cg_bufs;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

static void bufs_free(void *v)
{
    cg_bufs *b = v;
    for (int i = 0; b && i < CG_SLOTS; i++)
        free(b->p[i]);
    free(b);
}

static void key_init(void)
{
    g_key_ok = pthread_key_create(&g_key, bufs_free) == 0;
}

/* Slot `slot` of the calling thread's buffers with room for n floats, 64-byte aligned; NULL
 * when out of memory. */
static float *tbuf(int slot, size_t n)
{
    pthread_once(&g_key_once, key_init);
    if (!g_key_ok)
        return NULL;
    cg_bufs *b = pthread_getspecific(g_key);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b || pthread_setspecific(g_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->cap[slot] < n) {
        size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
        float *q = aligned_alloc(64, bytes);
        if (!q)
            return NULL;
        free(b->p[slot]);
        b->p[slot] = q;
        b->cap[slot] = bytes / sizeof(float);
    }
    return b->p[slot];
}

/* The output columns [ow0, ow0 + run) of one output row whose tap (.., b) reads inside the
 * input row: q in [*qlo, *qhi) reads iw = (ow0 + q) * sw - pw + b * dw in [0, W). */
static void valid_run(const cg_geom *g, int64_t b, int64_t ow0, int64_t run, int64_t *qlo,
                      int64_t *qhi)
{
    int64_t t = g->pw - b * g->dw; /* iw = (ow0 + q) * sw - t */
    int64_t lo = max64(0, ceil_div(t, g->sw) - ow0);
    int64_t hi = min64(run, ceil_div(g->w + t, g->sw) - ow0);
    *qlo = min64(lo, run);
    *qhi = max64(hi, *qlo);
}

/* The position (image, output row, output column) of reduction column r = n * P + p. */
typedef struct cg_pos {
    int64_t n, oh, ow;
} cg_pos;

static cg_pos pos_of(const cg_geom *g, int64_t r)
{
    int64_t p = r % g->p;
    return (cg_pos){r / g->p, p / g->ow, p % g->ow};
}

static void pos_advance(const cg_geom *g, cg_pos *s, int64_t run)
{
    s->ow += run;
    if (s->ow == g->ow) {
        s->ow = 0;
        if (++s->oh == g->oh) {
            s->oh = 0;
            s->n++;
        }
    }
}

/* ---- dW ---- */

static void zero_f32(float *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = 0.0f;
}

/* One im2col row over the pixels [p0, p1) of one image, for stride 1 with OW == W: pixel p
 * reads the plane at p + shift, so the row is one contiguous copy, the rows of the window
 * outside the input zeroed, then the few columns that wrapped around an edge. */
static void cols_row_flat(const cg_geom *g, const float *plane, int64_t a, int64_t b, int64_t p0,
                          int64_t p1, float *d)
{
    int64_t W = g->w, dh = a * g->dh - g->ph, dw = b * g->dw - g->pw;
    int64_t shift = dh * W + dw;
    int64_t v0 = max64(p0, max64(0, -dh) * W), v1 = min64(p1, min64(g->oh, g->h - dh) * W);
    if (v0 >= v1) {
        zero_f32(d, p1 - p0);
        return;
    }
    /* the first and last valid rows' wrapped columns would read just outside the plane:
     * they are zeros anyway */
    int64_t c0 = max64(v0, -shift), c1 = max64(c0, min64(v1, g->h * W - shift));
    zero_f32(d, c0 - p0);
    memcpy(d + (c0 - p0), plane + c0 + shift, (size_t)(c1 - c0) * sizeof(float));
    zero_f32(d + (c1 - p0), p1 - c1);
    int64_t left = max64(0, -dw), right = max64(0, dw); /* columns [0,left), [W-right,W) */
    if (!left && !right)
        return;
    for (int64_t row0 = v0 / W * W; row0 < v1; row0 += W) {
        for (int64_t q = max64(row0, v0); q < min64(row0 + left, v1); q++)
            d[q - p0] = 0.0f;
        for (int64_t q = max64(row0 + W - right, v0); q < min64(row0 + W, v1); q++)
            d[q - p0] = 0.0f;
    }
}

/* dst[i * ld + rr] = im2col(x)[k0 + i, r0 + rr] for one group: rows k = (c, a, b), columns
 * r = (image, output pixel), padding as zeros. Per image segment: one shifted copy for
 * stride 1 "same"-width convs, else output row by output row. */
static void build_cols(const cg_geom *g, const float *x, int64_t grp, int64_t k0, int64_t mk,
                       int64_t r0, int64_t rc, float *dst, int64_t ld)
{
    int64_t taps = g->kh * g->kw;
    int flat = g->sh == 1 && g->sw == 1 && g->ow == g->w;
    for (int64_t i = 0; i < mk; i++) {
        int64_t k = k0 + i, c = k / taps, a = k % taps / g->kw, b = k % g->kw;
        float *d = dst + i * ld;
        int64_t qlo_row, qhi_row; /* the valid columns of a whole output row */
        valid_run(g, b, 0, g->ow, &qlo_row, &qhi_row);
        cg_pos s = pos_of(g, r0);
        for (int64_t rr = 0; rr < rc;) {
            const float *plane = x + (s.n * g->c + grp * g->cg + c) * g->h * g->w;
            if (flat) { /* the rest of this image, or of the chunk */
                int64_t p0 = s.oh * g->ow + s.ow, p1 = min64(g->p, p0 + rc - rr);
                cols_row_flat(g, plane, a, b, p0, p1, d + rr);
                rr += p1 - p0;
                s = (cg_pos){s.n + 1, 0, 0};
                continue;
            }
            int64_t run = min64(g->ow - s.ow, rc - rr);
            int64_t ih = s.oh * g->sh - g->ph + a * g->dh;
            if (ih < 0 || ih >= g->h) {
                zero_f32(d + rr, run);
            } else {
                const float *src = plane + ih * g->w;
                int64_t qlo = qlo_row, qhi = qhi_row, iw0 = s.ow * g->sw - g->pw + b * g->dw;
                if (s.ow != 0 || run != g->ow)
                    valid_run(g, b, s.ow, run, &qlo, &qhi);
                float *dd = d + rr;
                zero_f32(dd, qlo);
                if (g->sw == 1)
                    for (int64_t q = qlo; q < qhi; q++)
                        dd[q] = src[iw0 + q];
                else
                    for (int64_t q = qlo; q < qhi; q++)
                        dd[q] = src[iw0 + q * g->sw];
                zero_f32(dd + qhi, run - qhi);
            }
            rr += run;
            pos_advance(g, &s, run);
        }
    }
}

/* B panels of dY^T for reduction columns [r0, r0 + rc): ceil(og / NR) panels of [rc][NR],
 * element (rr, j) = dY[n, grp * og + j, p], zero past og. */
static void pack_dyt(const cg_geom *g, const float *dy, int64_t grp, int64_t r0, int64_t rc,
                     int64_t nr, float *bp)
{
    int64_t npan = (g->og + nr - 1) / nr;
    for (int64_t jp = 0; jp < npan; jp++) {
        float *dst = bp + jp * rc * nr;
        int64_t j1 = min64(nr, g->og - jp * nr);
        cg_pos s = pos_of(g, r0);
        for (int64_t rr = 0; rr < rc; rr++) {
            const float *src =
                dy + (s.n * g->o + grp * g->og + jp * nr) * g->p + s.oh * g->ow + s.ow;
            float *d = dst + rr * nr;
            for (int64_t j = 0; j < j1; j++)
                d[j] = src[j * g->p];
            for (int64_t j = j1; j < nr; j++)
                d[j] = 0.0f;
            pos_advance(g, &s, 1);
        }
    }
}

typedef struct dw_job {
    const tgc_gemm_kernel *k;
    cg_geom g;
    const float *x, *dy;
    float *dw, *dwt; /* dwt: [groups][kg][og], the GEMM's row-major result */
    int64_t ms, r;   /* M (or N) slices per group; reduction chunk */
    int64_t ncb;     /* dw_tasks_direct: columns k per im2col block */
    atomic_int oom;  /* set by any worker, read after the join */
} dw_job;

/* Tasks [lo, hi): (group, slice of the rows k). */
static void dw_tasks(void *ctx, int64_t lo, int64_t hi)
{
    dw_job *j = ctx;
    const tgc_gemm_kernel *k = j->k;
    const cg_geom *g = &j->g;
    int64_t R = j->r, mc_max = k->mc, npan = (g->og + k->nr - 1) / k->nr;
    float *bp = tbuf(0, (size_t)(npan * k->nr * R));
    float *cols = tbuf(1, (size_t)(mc_max * R));
    float *ap = tbuf(2, (size_t)(mc_max * R));
    if (!bp || !cols || !ap) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t mt = (g->kg + k->mr - 1) / k->mr, red = g->n * g->p;
    for (int64_t t = lo; t < hi; t++) {
        int64_t grp = t / j->ms, mi = t % j->ms;
        int64_t m_lo = mt * mi / j->ms * k->mr, m_hi = min64(g->kg, mt * (mi + 1) / j->ms * k->mr);
        if (m_lo >= m_hi)
            continue;
        float *acc = j->dwt + grp * g->kg * g->og;
        for (int64_t r0 = 0; r0 < red; r0 += R) {
            int64_t rc = min64(R, red - r0);
            int32_t flags = r0 > 0 ? TGC_GEMM_UKR_ACCUM : 0;
            pack_dyt(g, j->dy, grp, r0, rc, k->nr, bp);
            for (int64_t ic = m_lo; ic < m_hi; ic += mc_max) {
                int64_t mc = min64(mc_max, m_hi - ic);
                build_cols(g, j->x, grp, ic, mc, r0, rc, cols, rc);
                k->pack_a(cols, rc, 1, mc, rc, ap);
                for (int64_t jp = 0; jp < npan; jp++) {
                    int64_t nr = min64(k->nr, g->og - jp * k->nr);
                    for (int64_t ir = 0; ir < mc; ir += k->mr)
                        k->ukr(rc, ap + ir * rc, bp + jp * rc * k->nr,
                               acc + (ic + ir) * g->og + jp * k->nr, g->og, min64(k->mr, mc - ir),
                               nr, flags);
                }
            }
        }
        /* dW[grp * og + o, k] = acc[k, o] for this task's rows, in 16 x 16 tiles */
        for (int64_t k0 = m_lo; k0 < m_hi; k0 += 16)
            for (int64_t o0 = 0; o0 < g->og; o0 += 16)
                for (int64_t o = o0; o < min64(o0 + 16, g->og); o++) {
                    float *d = j->dw + (grp * g->og + o) * g->kg;
                    for (int64_t kk = k0; kk < min64(k0 + 16, m_hi); kk++)
                        d[kk] = acc[kk * g->og + o];
                }
    }
}

/* A panels of dY for reduction columns [r0, r0 + rc): ceil(og / MR) panels of [rc][MR],
 * element (rr, i) = dY[n, grp * og + i, p], zero past og. */
static void pack_dy_a(const cg_geom *g, const float *dy, int64_t grp, int64_t r0, int64_t rc,
                      int64_t mr, float *ap)
{
    int64_t npan = (g->og + mr - 1) / mr;
    for (int64_t ip = 0; ip < npan; ip++) {
        float *dst = ap + ip * rc * mr;
        int64_t i1 = min64(mr, g->og - ip * mr);
        cg_pos s = pos_of(g, r0);
        for (int64_t rr = 0; rr < rc; rr++) {
            const float *src =
                dy + (s.n * g->o + grp * g->og + ip * mr) * g->p + s.oh * g->ow + s.ow;
            float *d = dst + rr * mr;
            for (int64_t i = 0; i < i1; i++)
                d[i] = src[i * g->p];
            for (int64_t i = i1; i < mr; i++)
                d[i] = 0.0f;
            pos_advance(g, &s, 1);
        }
    }
}

/* The other orientation, for many output channels or a short reduction: dW[o, k] directly
 * (C = dY . im2col^T: rows o, columns k), so no [kg][og] scratch and no transpose; the im2col
 * block is transposed into B panels by pack_b instead, which costs one pass per element of
 * the reduction but feeds og >= 128 rows. Tasks: (group, slice of the columns k). */
static void dw_tasks_direct(void *ctx, int64_t lo, int64_t hi)
{
    dw_job *j = ctx;
    const tgc_gemm_kernel *k = j->k;
    const cg_geom *g = &j->g;
    int64_t R = j->r, nc_max = j->ncb, mpad = (g->og + k->mr - 1) / k->mr * k->mr;
    float *ap = tbuf(0, (size_t)(mpad * R));
    float *cols = tbuf(1, (size_t)(nc_max * R));
    float *bp = tbuf(2, (size_t)(nc_max * R));
    if (!bp || !cols || !ap) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t nt = (g->kg + k->nr - 1) / k->nr, red = g->n * g->p;
    for (int64_t t = lo; t < hi; t++) {
        int64_t grp = t / j->ms, ni = t % j->ms;
        int64_t n_lo = nt * ni / j->ms * k->nr, n_hi = min64(g->kg, nt * (ni + 1) / j->ms * k->nr);
        if (n_lo >= n_hi)
            continue;
        float *c0 = j->dw + grp * g->og * g->kg;
        for (int64_t r0 = 0; r0 < red; r0 += R) {
            int64_t rc = min64(R, red - r0);
            int32_t flags = r0 > 0 ? TGC_GEMM_UKR_ACCUM : 0;
            pack_dy_a(g, j->dy, grp, r0, rc, k->mr, ap);
            for (int64_t jc = n_lo; jc < n_hi; jc += nc_max) {
                int64_t nc = min64(nc_max, n_hi - jc);
                build_cols(g, j->x, grp, jc, nc, r0, rc, cols, rc);
                k->pack_b(cols, 1, rc, rc, nc, bp);
                for (int64_t jr = 0; jr < nc; jr += k->nr) {
                    int64_t nr = min64(k->nr, nc - jr);
                    for (int64_t ir = 0; ir < g->og; ir += k->mr)
                        k->ukr(rc, ap + ir * rc, bp + jr * rc, c0 + ir * g->kg + jc + jr, g->kg,
                               min64(k->mr, g->og - ir), nr, flags);
                }
            }
        }
    }
}

/* Few output channels per group (depthwise): a GEMM of width og would waste the micro-tile;
 * one task per output channel sums its taps directly, in a fixed order. */
typedef struct direct_job {
    cg_geom g;
    const float *x, *dy;
    float *dw;
} direct_job;

static void dw_direct(void *ctx, int64_t lo, int64_t hi)
{
    const direct_job *j = ctx;
    const cg_geom *g = &j->g;
    int64_t taps = g->kh * g->kw;
    for (int64_t oc = lo; oc < hi; oc++) {
        int64_t grp = oc / g->og;
        for (int64_t k = 0; k < g->kg; k++) {
            int64_t c = k / taps, a = k % taps / g->kw, b = k % g->kw;
            float s = 0.0f;
            for (int64_t n = 0; n < g->n; n++) {
                const float *xc = j->x + (n * g->c + grp * g->cg + c) * g->h * g->w;
                const float *dyo = j->dy + (n * g->o + oc) * g->p;
                for (int64_t oh = 0; oh < g->oh; oh++) {
                    int64_t ih = oh * g->sh - g->ph + a * g->dh;
                    if (ih < 0 || ih >= g->h)
                        continue;
                    int64_t qlo, qhi, iw0 = -g->pw + b * g->dw;
                    valid_run(g, b, 0, g->ow, &qlo, &qhi);
                    const float *xr = xc + ih * g->w + iw0;
                    const float *dr = dyo + oh * g->ow;
                    for (int64_t q = qlo; q < qhi; q++)
                        s += dr[q] * xr[q * g->sw];
                }
            }
            j->dw[oc * g->kg + k] = s;
        }
    }
}

static tgc_status check_args(const tgc_gemm_kernel *k, const tgc_conv_params *p, const void *a,
                             const void *b, const void *out, const char *fn)
{
    if (!k || k->kind != TGC_GEMM_KIND_GEMM || !k->ukr || !k->pack_a || !k->pack_b)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: needs a GEMM kernel bound with tgc_gemm_kernel_bind", fn);
    tgc_status st = tgc_conv_params_check(p);
    if (st != TGC_OK)
        return st;
    if (p->n > 0 && (!a || !b || !out))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: NULL operand pointer", fn);
    return TGC_OK;
}

static int threads_for(double flops, int nthreads)
{
    return flops < 4e6 ? 1 : tgc_threads_resolve(nthreads);
}

tgc_status tgc_conv_grad_weight_run(const tgc_gemm_kernel *k, const tgc_conv_params *p,
                                    const float *x, const float *dy, float *dw, int nthreads)
{
    tgc_status st = check_args(k, p, x, dy, dw, "tgc_conv_grad_weight_run");
    if (st != TGC_OK)
        return st;
    cg_geom g = geom_of(p);
    if (!dw)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_conv_grad_weight_run: NULL dw");
    if (g.n == 0) {
        memset(dw, 0, (size_t)(g.o * g.kg) * sizeof(float));
        return TGC_OK;
    }
    double flops = 2.0 * (double)g.n * (double)g.p * (double)g.o * (double)g.kg;
    int t = threads_for(flops, nthreads);
    if (g.og < 4) {
        direct_job dj = {g, x, dy, dw};
        tgc_parallel_for(g.o, 1, t, dw_direct, &dj);
        return TGC_OK;
    }
    dw_job j = {.k = k, .g = g, .x = x, .dy = dy, .dw = dw};
    atomic_init(&j.oom, 0);
    /* the chunk fixes the order of every element's sum: it depends on the kernel only */
    j.r = min64(256, k->kc) / 8 * 8;
    if (j.r < 8)
        j.r = 8;
    if (g.og >= 128 || g.n * g.p <= j.r) {
        int64_t nt = (g.kg + k->nr - 1) / k->nr;
        j.ms = g.groups >= t ? 1 : min64(nt, t);
        j.ncb = k->nr * 8;
        tgc_parallel_for(g.groups * j.ms, 1, t, dw_tasks_direct, &j);
        if (atomic_load(&j.oom))
            return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_weight_run: out of memory");
        return TGC_OK;
    }
    int64_t mt = (g.kg + k->mr - 1) / k->mr;
    j.ms = g.groups >= t ? 1 : min64(mt, t);
    j.dwt = tbuf(3, (size_t)(g.o * g.kg));
    if (!j.dwt)
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_weight_run: out of memory");
    tgc_parallel_for(g.groups * j.ms, 1, t, dw_tasks, &j);
    if (atomic_load(&j.oom))
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_weight_run: out of memory");
    return TGC_OK;
}

/* ---- dX ---- */

/* Stride 1 with padding at most dil * (k - 1): dX is the conv of dY with the kernel flipped
 * and input/output channels swapped per group, padded by dil * (k - 1) - pad. */
static int grad_input_is_conv(const cg_geom *g)
{
    return g->sh == 1 && g->sw == 1 && g->ph <= g->dh * (g->kh - 1) && g->pw <= g->dw * (g->kw - 1);
}

typedef struct flip_job {
    const cg_geom *g;
    const float *w;
    float *wf;
} flip_job;

/* Rows [lo, hi) of (group, 16 output channels) tiles of wf[grp*cg + c][o][taps reversed] =
 * w[grp*og + o][c][taps], in 16 x 16 tiles of (o, c) so reads and writes stay within a few
 * pages per tile. */
static void flip_tiles(void *ctx, int64_t lo, int64_t hi)
{
    const flip_job *j = ctx;
    const cg_geom *g = j->g;
    int64_t taps = g->kh * g->kw, ot = (g->og + 15) / 16;
    for (int64_t r = lo; r < hi; r++) {
        int64_t grp = r / ot, o0 = r % ot * 16;
        for (int64_t c0 = 0; c0 < g->cg; c0 += 16)
            for (int64_t c = c0; c < min64(c0 + 16, g->cg); c++)
                for (int64_t o = o0; o < min64(o0 + 16, g->og); o++) {
                    const float *src = j->w + ((grp * g->og + o) * g->cg + c) * taps;
                    float *dst = j->wf + ((grp * g->cg + c) * g->og + o) * taps;
                    for (int64_t t = 0; t < taps; t++)
                        dst[t] = src[taps - 1 - t];
                }
    }
}

static tgc_status grad_input_conv(const tgc_gemm_kernel *conv, const cg_geom *g, const float *dy,
                                  const float *w, float *dx, int nthreads)
{
    float *wf = tbuf(3, (size_t)(g->o * g->kg));
    if (!wf)
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_input_run: out of memory");
    flip_job fj = {g, w, wf};
    int64_t rows = g->groups * ((g->og + 15) / 16);
    tgc_parallel_for(rows, 1 + 65536 / (16 * g->kg), g->o * g->kg < 65536 ? 1 : nthreads,
                     flip_tiles, &fj);
    tgc_conv_args a = {
        .p = {g->n, g->o, g->oh, g->ow, g->c, g->kh, g->kw, 1, 1, g->dh * (g->kh - 1) - g->ph,
              g->dw * (g->kw - 1) - g->pw, g->dh, g->dw, g->groups},
        .x = dy,
        .w = wf,
        .y = dx,
    };
    return tgc_conv_run(conv, &a, nthreads);
}

typedef struct dx_job {
    const tgc_gemm_kernel *k;
    cg_geom g;
    const float *dy, *apack; /* apack: W^T of every group packed for every (K block, M block) */
    float *dx;
    int64_t mpad, kcb, pb; /* rows per packed K block; K block; columns per block */
    int64_t cs;            /* channel slices per group */
    atomic_int oom;
} dx_job;

/* dX[., group channels] += col2im(dcols) for im2col rows [k_lo, k_hi) (dcols holds row k_lo
 * first) and reduction columns [r0, r0 + rc), which may span several images. */
static void col2im_add(const cg_geom *g, const float *dcols, int64_t ld, int64_t grp, int64_t k_lo,
                       int64_t k_hi, int64_t r0, int64_t rc, float *dx)
{
    int64_t taps = g->kh * g->kw;
    for (int64_t k = k_lo; k < k_hi; k++) {
        int64_t c = k / taps, a = k % taps / g->kw, b = k % g->kw;
        const float *d = dcols + (k - k_lo) * ld;
        int64_t qlo_row, qhi_row; /* the valid columns of a whole output row */
        valid_run(g, b, 0, g->ow, &qlo_row, &qhi_row);
        cg_pos s = pos_of(g, r0);
        for (int64_t rr = 0; rr < rc;) {
            int64_t run = min64(g->ow - s.ow, rc - rr);
            int64_t ih = s.oh * g->sh - g->ph + a * g->dh;
            if (ih >= 0 && ih < g->h) {
                float *dst = dx + ((s.n * g->c + grp * g->cg + c) * g->h + ih) * g->w;
                int64_t qlo = qlo_row, qhi = qhi_row, iw0 = s.ow * g->sw - g->pw + b * g->dw;
                if (s.ow != 0 || run != g->ow)
                    valid_run(g, b, s.ow, run, &qlo, &qhi);
                if (g->sw == 1)
                    for (int64_t q = qlo; q < qhi; q++)
                        dst[iw0 + q] += d[rr + q];
                else
                    for (int64_t q = qlo; q < qhi; q++)
                        dst[iw0 + q * g->sw] += d[rr + q];
            }
            rr += run;
            pos_advance(g, &s, run);
        }
    }
}

/* B panels [kc][NR] of dY rows [o0, o0 + kc) of one group over reduction columns
 * [r0, r0 + rc), which may span images (zeros past rc). */
static void pack_dy_cols(const cg_geom *g, const float *dy, int64_t grp, int64_t o0, int64_t kc,
                         int64_t r0, int64_t rc, int64_t nr, float *bp)
{
    int64_t npan = (rc + nr - 1) / nr;
    for (int64_t jp = 0; jp < npan; jp++) {
        float *dst = bp + jp * kc * nr;
        for (int64_t j = 0; j < nr; j++) {
            int64_t r = r0 + jp * nr + j;
            if (jp * nr + j >= rc) {
                for (int64_t kk = 0; kk < kc; kk++)
                    dst[kk * nr + j] = 0.0f;
                continue;
            }
            const float *src = dy + (r / g->p * g->o + grp * g->og + o0) * g->p + r % g->p;
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * nr + j] = src[kk * g->p];
        }
    }
}

/* Tasks [lo, hi): (group, slice of its input channels). A task owns dX of its channels in
 * every image: it walks all reduction columns (images x pixels) in blocks, and per block of
 * its im2col rows computes dcols = W^T . dY, then scatters it. The A block stays in L2
 * across column blocks; dY's block is packed once for all row blocks. */
static void dx_tasks(void *ctx, int64_t lo, int64_t hi)
{
    dx_job *j = ctx;
    const tgc_gemm_kernel *k = j->k;
    const cg_geom *g = &j->g;
    int64_t PB = j->pb, taps = g->kh * g->kw, red = g->n * g->p;
    float *dcols = tbuf(0, (size_t)(k->mc * PB));
    float *bp = tbuf(1, (size_t)(g->og * PB));
    if (!dcols || !bp) {
        atomic_store(&j->oom, 1);
        return;
    }
    for (int64_t t = lo; t < hi; t++) {
        int64_t grp = t / j->cs, si = t % j->cs;
        int64_t c_lo = g->cg * si / j->cs, c_hi = g->cg * (si + 1) / j->cs;
        if (c_lo >= c_hi)
            continue;
        int64_t m_lo = c_lo * taps, m_hi = c_hi * taps;
        for (int64_t n = 0; n < g->n; n++)
            memset(j->dx + ((n * g->c + grp * g->cg + c_lo) * g->h) * g->w, 0,
                   (size_t)((c_hi - c_lo) * g->h * g->w) * sizeof(float));
        for (int64_t r0 = 0; r0 < red; r0 += PB) {
            int64_t rc = min64(PB, red - r0);
            int one_image = r0 / g->p == (r0 + rc - 1) / g->p;
            /* packed A panels start at multiples of MR: rows before m_lo are computed and
             * dropped */
            /* dY's columns of this block for every K block, packed once */
            for (int64_t pc = 0; pc < g->og; pc += j->kcb) {
                int64_t kc = min64(j->kcb, g->og - pc);
                float *b = bp + pc * PB;
                if (one_image)
                    k->pack_b(j->dy + (r0 / g->p * g->o + grp * g->og + pc) * g->p + r0 % g->p,
                              g->p, 1, kc, rc, b);
                else
                    pack_dy_cols(g, j->dy, grp, pc, kc, r0, rc, k->nr, b);
            }
            for (int64_t ic = m_lo / k->mr * k->mr; ic < m_hi; ic += k->mc) {
                int64_t mc = min64(k->mc, m_hi - ic);
                for (int64_t pc = 0; pc < g->og; pc += j->kcb) {
                    int64_t kc = min64(j->kcb, g->og - pc);
                    int32_t flags = pc > 0 ? TGC_GEMM_UKR_ACCUM : 0;
                    const float *b = bp + pc * PB;
                    const float *ap = j->apack + grp * j->mpad * g->og + pc * j->mpad + ic * kc;
                    for (int64_t jr = 0; jr < rc; jr += k->nr) {
                        int64_t nr = min64(k->nr, rc - jr);
                        for (int64_t ir = 0; ir < mc; ir += k->mr)
                            k->ukr(kc, ap + ir * kc, b + jr * kc, dcols + ir * PB + jr, PB,
                                   min64(k->mr, mc - ir), nr, flags);
                    }
                }
                int64_t k0 = max64(ic, m_lo);
                col2im_add(g, dcols + (k0 - ic) * PB, PB, grp, k0, ic + mc, r0, rc, j->dx);
            }
        }
    }
}

/* W^T of every group, packed as the A operand (rows k, depth o) for every K and M block:
 * panel element (kk, i) = W[o0 + kk, k0 + i], a contiguous run of MR floats of W's row. */
typedef struct wt_job {
    const tgc_gemm_kernel *k;
    const cg_geom *g;
    const float *w;
    float *ap;
    int64_t mpad, kcb;
} wt_job;

/* Panels [lo, hi) of (group, MR rows k): every K block of each. */
static void wt_panels(void *ctx, int64_t lo, int64_t hi)
{
    const wt_job *j = ctx;
    const cg_geom *g = j->g;
    int64_t mr = j->k->mr, np = j->mpad / mr;
    for (int64_t t = lo; t < hi; t++) {
        int64_t grp = t / np, ic = t % np * mr, m = min64(mr, g->kg - ic);
        const float *wg = j->w + grp * g->og * g->kg;
        for (int64_t pc = 0; pc < g->og; pc += j->kcb) {
            int64_t kc = min64(j->kcb, g->og - pc);
            float *dst = j->ap + grp * j->mpad * g->og + pc * j->mpad + ic * kc;
            for (int64_t kk = 0; kk < kc; kk++) {
                const float *src = wg + (pc + kk) * g->kg + ic;
                float *d = dst + kk * mr;
                for (int64_t i = 0; i < m; i++)
                    d[i] = src[i];
                for (int64_t i = m; i < mr; i++)
                    d[i] = 0.0f;
            }
        }
    }
}

static float *pack_wt(const tgc_gemm_kernel *k, const cg_geom *g, const float *w, int64_t mpad,
                      int64_t kcb, int nthreads)
{
    float *ap = tbuf(3, (size_t)(g->groups * mpad * g->og));
    if (!ap)
        return NULL;
    wt_job j = {k, g, w, ap, mpad, kcb};
    int64_t panels = g->groups * (mpad / k->mr);
    tgc_parallel_for(panels, 1 + 65536 / (k->mr * g->og), g->o * g->kg < 65536 ? 1 : nthreads,
                     wt_panels, &j);
    return ap;
}

tgc_status tgc_conv_grad_input_run(const tgc_gemm_kernel *k, const tgc_gemm_kernel *conv,
                                   const tgc_conv_params *p, const float *dy, const float *w,
                                   float *dx, int nthreads)
{
    tgc_status st = check_args(k, p, dy, w, dx, "tgc_conv_grad_input_run");
    if (st != TGC_OK)
        return st;
    if (conv && (conv->kind != TGC_GEMM_KIND_CONV || conv->has_static || !conv->ukr))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_conv_grad_input_run: conv must be a bound conv kernel with "
                             "dynamic geometry (or NULL)");
    cg_geom g = geom_of(p);
    if (g.n == 0)
        return TGC_OK;
    if (conv && grad_input_is_conv(&g))
        return grad_input_conv(conv, &g, dy, w, dx, nthreads);
    dx_job j = {.k = k, .g = g, .dy = dy, .dx = dx};
    atomic_init(&j.oom, 0);
    int64_t nk = (g.og + k->kc - 1) / k->kc;
    j.kcb = min64(k->kc, ((g.og + nk - 1) / nk + 7) / 8 * 8);
    j.mpad = (g.kg + k->mr - 1) / k->mr * k->mr;
    /* a block of dcols (kg x pb) of about 256 KiB: written by the micro-kernel, read back by
     * the scatter while still in L2 */
    /* column blocks of 128: dcols (MC x 128) stays in L2, and each A element packed once
     * per call feeds 128 columns per pass */
    j.pb = min64(128, (g.n * g.p + k->nr - 1) / k->nr * k->nr);
    float *ap = pack_wt(
        k, &g, w, j.mpad, j.kcb,
        threads_for(2.0 * (double)g.n * (double)g.p * (double)g.o * (double)g.kg, nthreads));
    if (!ap)
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_input_run: out of memory");
    j.apack = ap;
    double flops = 2.0 * (double)g.n * (double)g.p * (double)g.o * (double)g.kg;
    int t = threads_for(flops, nthreads);
    j.cs = g.groups >= t ? 1 : min64(g.cg, t);
    tgc_parallel_for(g.groups * j.cs, 1, t, dx_tasks, &j);
    if (atomic_load(&j.oom))
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_grad_input_run: out of memory");
    return TGC_OK;
}
