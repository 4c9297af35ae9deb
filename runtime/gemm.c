/* GEMM / conv2d driver around the JIT'd micro-kernel and packing routines (see gemm.h).
 *
 * Loop nest per region of C (BLIS order): jc over NC columns -> pc over KC depth (pack a
 * KC x NC block of B, ~L3) -> ic over MC rows (pack an MC x KC block of A, ~L2) -> jr over NR
 * columns (one B micro-panel, ~L1) -> ir over MR rows (the micro-kernel). Partial sums of
 * earlier KC blocks stay in C, so the fused epilogue runs once, on the last block.
 *
 * Threads: the problem is cut into tasks (batch items, and when they do not divide evenly
 * among the threads, pieces of M or N aligned to the micro-tile) and each thread runs its
 * contiguous share with its own packing buffers: no barriers, no shared packed panels. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm.h"
#include "runtime/parallel.h"
#include "support/error.h"

/* ---- per-thread packing buffers ---- */

typedef struct pack_bufs {
    float *a, *b;
    size_t na, nb;      /* capacity in floats */
    float *cols, *ctmp; /* batched small-image conv: im2col of all images, C before scatter */
    size_t ncols, nctmp;
    float *wpack; /* conv weights packed once per call, shared by every image */
    size_t nwpack;
} pack_bufs;

static pthread_key_t g_buf_key;
static pthread_once_t g_buf_once = PTHREAD_ONCE_INIT;
static int g_buf_key_ok;

static void bufs_free(void *p)
{
    pack_bufs *t = p;
    if (!t)
        return;
    free(t->a);
    free(t->b);
    free(t->cols);
    free(t->ctmp);
    free(t->wpack);
    free(t);
}

static void buf_key_init(void)
{
    g_buf_key_ok = pthread_key_create(&g_buf_key, bufs_free) == 0;
}

/* Makes *p hold at least n floats, 64-byte aligned; 0 on OOM. */
static int grow(float **p, size_t *cap, size_t n)
{
    if (*cap >= n)
        return 1;
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *q = aligned_alloc(64, bytes);
    if (!q)
        return 0;
    free(*p);
    *p = q;
    *cap = bytes / sizeof(float);
    return 1;
}

/* The calling thread's buffers, grown to na / nb floats; NULL on OOM. They live until the
 * thread exits (the key's destructor frees them), so repeated calls allocate nothing. */
static pack_bufs *bufs_get(size_t na, size_t nb)
{
    pthread_once(&g_buf_once, buf_key_init);
    if (!g_buf_key_ok)
        return NULL;
    pack_bufs *t = pthread_getspecific(g_buf_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || pthread_setspecific(g_buf_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (!grow(&t->a, &t->na, na) || !grow(&t->b, &t->nb, nb))
        return NULL;
    return t;
}

/* ---- problem description ---- */

/* One batch item (GEMM) or image x group (conv): where its operands are. */
typedef struct gemm_item {
    const float *a;
    int64_t a_rs, a_cs;
    const float *b; /* strided B, or for im2col the image+group's first input channel */
    int64_t b_rs, b_cs;
    float *c;
    int64_t ldc;
    int64_t batch, m_off; /* what the epilogue sees */
    int64_t group;
} gemm_item;

typedef struct gemm_job {
    const tgc_gemm_kernel *k;
    int64_t m, n, kdim, kc;
    int64_t items, ms, ns; /* tasks = items * ms * ns */
    const tgc_gemm_args *ga;
    const tgc_conv_args *ca;
    int im2col;
    int64_t groups, mg, kg, cg, ohw;
    int64_t geom[TGC_CONV_GEOM_COUNT];
    void *ep_args;
    int no_ep;          /* the epilogue runs later (batched small-image conv) */
    const float *apack; /* conv: A (the weights of group 0..) packed for every (pc, ic) */
    int64_t mpad;       /* rows of apack per K block: m rounded up to MR */
    atomic_int oom;
} gemm_job;

static void job_item(const gemm_job *j, int64_t idx, gemm_item *it)
{
    if (j->ga) {
        const tgc_gemm_args *a = j->ga;
        *it = (gemm_item){
            .a = a->a + idx * a->a_bs,
            .a_rs = a->a_rs,
            .a_cs = a->a_cs,
            .b = a->b + idx * a->b_bs,
            .b_rs = a->b_rs,
            .b_cs = a->b_cs,
            .c = a->c + idx * a->c_bs,
            .ldc = a->c_rs,
            .batch = idx,
            .m_off = 0,
        };
        return;
    }
    const tgc_conv_params *p = &j->ca->p;
    int64_t n = idx / j->groups, g = idx % j->groups;
    *it = (gemm_item){
        .a = j->ca->w + g * j->mg * j->kg,
        .a_rs = j->kg,
        .a_cs = 1,
        .b = j->ca->x + (n * p->c + g * j->cg) * p->h * p->w,
        .b_rs = p->h * p->w,
        .b_cs = 1,
        .c = j->ca->y + (n * p->o + g * j->mg) * j->ohw,
        .ldc = j->ohw,
        .batch = n,
        .m_off = g * j->mg,
        .group = g,
    };
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void run_region(const gemm_job *j, const gemm_item *it, int64_t m_lo, int64_t m_hi,
                       int64_t n_lo, int64_t n_hi, pack_bufs *pb)
{
    const tgc_gemm_kernel *k = j->k;
    int64_t K = j->kdim;
    for (int64_t jc = n_lo; jc < n_hi; jc += k->nc) {
        int64_t nc = min64(k->nc, n_hi - jc);
        int64_t pc = 0;
        do {
            int64_t kc = min64(j->kc, K - pc);
            int32_t flags = pc > 0 ? TGC_GEMM_UKR_ACCUM : 0;
            tgc_gemm_ep_fn ep = pc + kc >= K && !j->no_ep ? k->ep : NULL;
            if (kc > 0) {
                if (j->im2col)
                    k->conv_pack_b(it->b, j->geom, pc, kc, jc, nc, pb->b);
                else
                    k->pack_b(it->b + pc * it->b_rs + jc * it->b_cs, it->b_rs, it->b_cs, kc, nc,
                              pb->b);
            }
            for (int64_t ic = m_lo; ic < m_hi; ic += k->mc) {
                int64_t mc = min64(k->mc, m_hi - ic);
                const float *ap = pb->a;
                if (j->apack)
                    ap = j->apack + it->group * j->mpad * K + pc * j->mpad + ic * kc;
                else if (kc > 0)
                    k->pack_a(it->a + ic * it->a_rs + pc * it->a_cs, it->a_rs, it->a_cs, mc, kc,
                              pb->a);
                for (int64_t jr = 0; jr < nc; jr += k->nr) {
                    for (int64_t ir = 0; ir < mc; ir += k->mr) {
                        float *c = it->c + (ic + ir) * it->ldc + jc + jr;
                        int64_t mr = min64(k->mr, mc - ir), nr = min64(k->nr, nc - jr);
                        k->ukr(kc, ap + ir * kc, pb->b + jr * kc, c, it->ldc, mr, nr, flags);
                        if (ep) /* while the tile is still in L1 */
                            ep(c, it->ldc, mr, nr, j->ep_args, it->batch, it->m_off + ic + ir,
                               jc + jr);
                    }
                }
            }
            pc += kc;
        } while (pc < K);
    }
}

static void run_tasks(void *ctx, int64_t lo, int64_t hi)
{
    gemm_job *j = ctx;
    const tgc_gemm_kernel *k = j->k;
    /* K == 0 still runs the micro-kernel (zeros through the epilogue): keep buffers non-NULL */
    size_t kc = j->kc > 0 ? (size_t)j->kc : 1;
    pack_bufs *pb = bufs_get((size_t)k->mc * kc, kc * (size_t)k->nc);
    if (!pb) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t per = j->ms * j->ns;
    int64_t mt = (j->m + k->mr - 1) / k->mr, nt = (j->n + k->nr - 1) / k->nr;
    for (int64_t t = lo; t < hi; t++) {
        int64_t idx = t / per, r = t % per, mi = r / j->ns, ni = r % j->ns;
        int64_t m_lo = mt * mi / j->ms * k->mr, m_hi = min64(j->m, mt * (mi + 1) / j->ms * k->mr);
        int64_t n_lo = nt * ni / j->ns * k->nr, n_hi = min64(j->n, nt * (ni + 1) / j->ns * k->nr);
        if (m_lo >= m_hi || n_lo >= n_hi)
            continue;
        gemm_item it;
        job_item(j, idx, &it);
        run_region(j, &it, m_lo, m_hi, n_lo, n_hi, pb);
    }
}

/* Equal KC blocks: 576 = 2 x 288 beats 256 + 256 + 64. */
static void prepare_kc(gemm_job *j)
{
    const tgc_gemm_kernel *k = j->k;
    int64_t nk = j->kdim > 0 ? (j->kdim + k->kc - 1) / k->kc : 1;
    j->kc = j->kdim > 0 ? ((j->kdim + nk - 1) / nk + 7) / 8 * 8 : 0;
    if (j->kc > k->kc)
        j->kc = k->kc;
}

/* Splits the work into tasks and runs them. */
static tgc_status run_job(gemm_job *j, int nthreads)
{
    const tgc_gemm_kernel *k = j->k;
    prepare_kc(j);
    int t = tgc_threads_resolve(nthreads);
    double flops = 2.0 * (double)j->items * (double)j->m * (double)j->n * (double)j->kdim;
    if (flops < 4e6) /* thread start-up costs more than it saves */
        t = 1;
    j->ms = j->ns = 1;
    if (t > 1 && j->items % t != 0 && j->items < 8 * t) {
        int64_t mt = (j->m + k->mr - 1) / k->mr, nt = (j->n + k->nr - 1) / k->nr;
        if (nt >= mt)
            j->ns = min64(t, nt);
        else
            j->ms = min64(t, mt);
    }
    atomic_init(&j->oom, 0);
    int64_t tasks = j->items * j->ms * j->ns;
    tgc_parallel_for(tasks, 1, t, run_tasks, j);
    if (atomic_load(&j->oom))
        return tgc_set_error(TGC_ERR_OOM, "tgc_gemm_run: cannot allocate packing buffers");
    return TGC_OK;
}

/* ---- GEMM ---- */

tgc_status tgc_gemm_run(const tgc_gemm_kernel *k, const tgc_gemm_args *a, int nthreads)
{
    if (!k || !a || k->kind != TGC_GEMM_KIND_GEMM || !k->ukr)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_gemm_run: needs a GEMM kernel bound with "
                                                  "tgc_gemm_kernel_bind and arguments");
    if (a->batch < 0 || a->m < 0 || a->n < 0 || a->k < 0)
        return tgc_set_error(
            TGC_ERR_INVALID_ARG, "tgc_gemm_run: negative size (batch=%lld m=%lld n=%lld k=%lld)",
            (long long)a->batch, (long long)a->m, (long long)a->n, (long long)a->k);
    if (a->batch == 0 || a->m == 0 || a->n == 0)
        return TGC_OK;
    if (!a->c || (a->k > 0 && (!a->a || !a->b)))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_gemm_run: NULL operand pointer");
    if (a->m > 1 && a->c_rs < a->n)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_gemm_run: c_rs=%lld is less than n=%lld (rows of C overlap)",
                             (long long)a->c_rs, (long long)a->n);
    gemm_job j = {.k = k,
                  .m = a->m,
                  .n = a->n,
                  .kdim = a->k,
                  .items = a->batch,
                  .ga = a,
                  .ep_args = a->ep_args};
    return run_job(&j, nthreads);
}

/* ---- conv2d ---- */

int64_t tgc_conv_out_h(const tgc_conv_params *p)
{
    if (p->stride_h < 1)
        return 0;
    return (p->h + 2 * p->pad_h - p->dil_h * (p->kh - 1) - 1) / p->stride_h + 1;
}

int64_t tgc_conv_out_w(const tgc_conv_params *p)
{
    if (p->stride_w < 1)
        return 0;
    return (p->w + 2 * p->pad_w - p->dil_w * (p->kw - 1) - 1) / p->stride_w + 1;
}

tgc_status tgc_conv_params_check(const tgc_conv_params *p)
{
    if (!p)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc conv: NULL params");
    const char *bad = p->n < 0                               ? "n < 0"
                      : p->c < 1 || p->h < 1 || p->w < 1     ? "input c/h/w < 1"
                      : p->o < 1 || p->kh < 1 || p->kw < 1   ? "o/kh/kw < 1"
                      : p->stride_h < 1 || p->stride_w < 1   ? "stride < 1"
                      : p->dil_h < 1 || p->dil_w < 1         ? "dilation < 1"
                      : p->pad_h < 0 || p->pad_w < 0         ? "padding < 0"
                      : p->groups < 1                        ? "groups < 1"
                      : p->c % p->groups || p->o % p->groups ? "c or o not divisible by groups"
                      : tgc_conv_out_h(p) < 1 || tgc_conv_out_w(p) < 1
                          ? "the dilated kernel is larger than the padded input"
                          : NULL;
    if (bad)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc conv: bad params (%s): n=%lld c=%lld h=%lld w=%lld o=%lld "
                             "k=%lldx%lld stride=%lld,%lld pad=%lld,%lld dil=%lld,%lld "
                             "groups=%lld",
                             bad, (long long)p->n, (long long)p->c, (long long)p->h,
                             (long long)p->w, (long long)p->o, (long long)p->kh, (long long)p->kw,
                             (long long)p->stride_h, (long long)p->stride_w, (long long)p->pad_h,
                             (long long)p->pad_w, (long long)p->dil_h, (long long)p->dil_w,
                             (long long)p->groups);
    return TGC_OK;
}

static int same_geometry(const tgc_conv_params *a, const tgc_conv_params *b)
{
    tgc_conv_params x = *a, y = *b;
    x.n = y.n = 0;
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Small images (deep layers: 4x4, 2x2, 1x1 outputs) give per-image GEMMs a handful of
 * columns, far below the micro-tile's width. Batched instead: the im2col of every image
 * side by side as one [K, n*OH*OW] matrix, one GEMM over all images into a [O, n*OH*OW]
 * scratch, then a scatter into NCHW with the epilogue applied per image tile. 1x1 kernels
 * too (their im2col is a copy): per image, a 1x1 map is a GEMM of one column. */
#ifndef TGC_CONV_BATCH_BELOW
#define TGC_CONV_BATCH_BELOW 64
#endif

typedef struct small_conv {
    const tgc_conv_params *p;
    const tgc_gemm_kernel *k;
    const float *x;
    float *cols, *ctmp, *y;
    int64_t oh, ow, K, cols_n;
    void *ep_args;
} small_conv;

/* Rows [lo, hi) of the batched im2col: row r = (c, ki, kj) holds, for every image and
 * output pixel, the input element the tap reads (0 over padding). The source offset of a
 * pixel within its image's plane depends only on (ki, kj): it is computed once per row
 * into a small table, and the copy over the images is a table-driven gather. */
static void im2col_rows(void *ctx, int64_t lo, int64_t hi)
{
    const small_conv *s = ctx;
    const tgc_conv_params *p = s->p;
    int64_t ohw = s->oh * s->ow;
    int32_t off[TGC_CONV_BATCH_BELOW];
    for (int64_t r = lo; r < hi; r++) {
        int64_t c = r / (p->kh * p->kw), kk = r % (p->kh * p->kw);
        int64_t ki = kk / p->kw, kj = kk % p->kw;
        for (int64_t oy = 0; oy < s->oh; oy++) {
            int64_t iy = oy * p->stride_h - p->pad_h + ki * p->dil_h;
            for (int64_t ox = 0; ox < s->ow; ox++) {
                int64_t ix = ox * p->stride_w - p->pad_w + kj * p->dil_w;
                int in = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w;
                off[oy * s->ow + ox] = in ? (int32_t)(iy * p->w + ix) : -1;
            }
        }
        float *dst = s->cols + r * s->cols_n;
        const float *src = s->x + c * p->h * p->w;
        int64_t plane = p->c * p->h * p->w;
        for (int64_t n = 0; n < p->n; n++, dst += ohw, src += plane)
            for (int64_t q = 0; q < ohw; q++)
                dst[q] = off[q] >= 0 ? src[off[q]] : 0.0f;
    }
}

static void scatter_images(void *ctx, int64_t lo, int64_t hi)
{
    const small_conv *s = ctx;
    const tgc_conv_params *p = s->p;
    int64_t ohw = s->oh * s->ow;
    for (int64_t n = lo; n < hi; n++) {
        float *yn = s->y + n * p->o * ohw;
        const float *cn = s->ctmp + n * ohw;
        for (int64_t o = 0; o < p->o; o++)
            for (int64_t q = 0; q < ohw; q++) /* rows of a few floats: no memcpy call */
                yn[o * ohw + q] = cn[o * s->cols_n + q];
        if (!s->k->ep)
            continue;
        /* the epilogue walks any number of rows: one call per image and column block */
        for (int64_t n0 = 0; n0 < ohw; n0 += s->k->nr)
            s->k->ep(yn + n0, ohw, p->o, min64(s->k->nr, ohw - n0), s->ep_args, n, 0, n0);
    }
}

static tgc_status conv_small_images(gemm_job *j, const tgc_conv_params *p, int nthreads)
{
    small_conv s = {p,     j->k,          j->ca->x,           NULL,
                    NULL,  j->ca->y,      j->geom[TGC_CG_OH], j->geom[TGC_CG_OW],
                    j->kg, p->n * j->ohw, j->ep_args};
    pack_bufs *pb = bufs_get(0, 0);
    if (!pb || !grow(&pb->cols, &pb->ncols, (size_t)(s.K * s.cols_n)) ||
        !grow(&pb->ctmp, &pb->nctmp, (size_t)(p->o * s.cols_n)))
        return tgc_set_error(TGC_ERR_OOM, "tgc_conv_run: cannot allocate im2col buffers");
    s.cols = pb->cols;
    s.ctmp = pb->ctmp;
    int t = tgc_threads_resolve(nthreads);
    tgc_parallel_for(s.K, 16, t, im2col_rows, &s);
    gemm_job g = *j;
    g.ca = NULL;
    g.im2col = 0;
    g.no_ep = 1;
    g.items = 1;
    g.m = p->o;
    g.n = s.cols_n;
    g.kdim = s.K;
    tgc_gemm_args ga = {.batch = 1,
                        .m = p->o,
                        .n = s.cols_n,
                        .k = s.K,
                        .a = j->ca->w,
                        .a_rs = s.K,
                        .a_cs = 1,
                        .b = s.cols,
                        .b_rs = s.cols_n,
                        .b_cs = 1,
                        .c = s.ctmp,
                        .c_rs = s.cols_n};
    g.ga = &ga;
    tgc_status st = run_job(&g, nthreads);
    if (st != TGC_OK)
        return st;
    tgc_parallel_for(p->n, 1, t, scatter_images, &s);
    return TGC_OK;
}

tgc_status tgc_conv_run(const tgc_gemm_kernel *k, const tgc_conv_args *a, int nthreads)
{
    if (!k || !a || k->kind != TGC_GEMM_KIND_CONV || !k->ukr)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_conv_run: needs a conv kernel bound with "
                                                  "tgc_gemm_kernel_bind and arguments");
    const tgc_conv_params *p = &a->p;
    tgc_status st = tgc_conv_params_check(p);
    if (st != TGC_OK)
        return st;
    if (k->has_static && !same_geometry(p, &k->static_params))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_conv_run: params differ from the static ones the kernel was "
                             "emitted for (only n may change); emit with NULL static params "
                             "for dynamic shapes");
    if (p->n == 0)
        return TGC_OK;
    if (!a->x || !a->w || !a->y)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_conv_run: NULL x, w or y");
    gemm_job j = {.k = k, .ca = a, .ep_args = a->ep_args, .groups = p->groups};
    j.cg = p->c / p->groups;
    j.mg = p->o / p->groups;
    j.kg = j.cg * p->kh * p->kw;
    int64_t oh = tgc_conv_out_h(p), ow = tgc_conv_out_w(p);
    j.ohw = oh * ow;
    j.m = j.mg;
    j.n = j.ohw;
    j.kdim = j.kg;
    j.items = p->n * p->groups;
    /* a 1x1, stride 1, unpadded conv is a plain GEMM on the image */
    j.im2col = !(p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                 p->pad_h == 0 && p->pad_w == 0);
    int64_t g[TGC_CONV_GEOM_COUNT] = {
        [TGC_CG_C] = j.cg,         [TGC_CG_H] = p->h,      [TGC_CG_W] = p->w,
        [TGC_CG_KH] = p->kh,       [TGC_CG_KW] = p->kw,    [TGC_CG_SH] = p->stride_h,
        [TGC_CG_SW] = p->stride_w, [TGC_CG_PH] = p->pad_h, [TGC_CG_PW] = p->pad_w,
        [TGC_CG_DH] = p->dil_h,    [TGC_CG_DW] = p->dil_w, [TGC_CG_OH] = oh,
        [TGC_CG_OW] = ow,
    };
    memcpy(j.geom, g, sizeof g);
    if (p->groups == 1 && p->n > 1 && j.ohw < TGC_CONV_BATCH_BELOW)
        return conv_small_images(&j, p, nthreads);
    if (p->n > 1) {
        /* every image multiplies the same weights: pack them once, not once per image */
        prepare_kc(&j);
        j.mpad = (j.m + k->mr - 1) / k->mr * k->mr;
        pack_bufs *pb = bufs_get(0, 0);
        size_t need = (size_t)(p->groups * j.mpad * (j.kdim > 0 ? j.kdim : 1));
        if (pb && grow(&pb->wpack, &pb->nwpack, need)) {
            for (int64_t g = 0; g < p->groups; g++)
                for (int64_t pc = 0; pc < j.kdim; pc += j.kc) {
                    int64_t kc = min64(j.kc, j.kdim - pc);
                    for (int64_t ic = 0; ic < j.m; ic += k->mc)
                        k->pack_a(a->w + g * j.mg * j.kg + ic * j.kg + pc, j.kg, 1,
                                  min64(k->mc, j.m - ic), kc,
                                  pb->wpack + g * j.mpad * j.kdim + pc * j.mpad + ic * kc);
                }
            j.apack = pb->wpack;
        }
    }
    return run_job(&j, nthreads);
}
