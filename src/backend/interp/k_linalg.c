/* Interp kernels for MATMUL, LINEAR and CONV2D.
 *
 * Two paths per op:
 *   - f32 (every input and the output f32): inputs are packed into contiguous f32 panels and
 *     multiplied by a cache-blocked GEMM whose fixed-size micro-kernel the compiler
 *     vectorizes at -O2 without intrinsics; conv2d is im2col per image and group plus that
 *     GEMM. The interp runs eager CNNs, so this path has to be fast, not just correct.
 *   - every other dtype mix: plain loops through tgc_load/tgc_store with double
 *     accumulation, the obviously-correct oracle.
 *
 * This SGEMM stays independent of runtime/gemm.c on purpose. interp is the oracle the LLVM
 * GEMM and conv templates are tested against; if both used the runtime's blocking, packing and
 * threading, a defect there would be invisible to every comparison. The runtime's driver also
 * needs JIT-compiled micro-kernels, which a build without LLVM does not have, while interp must
 * run everywhere. The two share nothing but the problem statement.
 *
 * Inputs may have any strides (0 included); out is contiguous and already has the
 * inferred dtype and shape, which the kernels re-derive and check so that an inference bug
 * becomes TGC_ERR_INTERNAL instead of a memory error. */
#include <stdlib.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "support/error.h"

/* ------------------------------------------------------------------------------------
 * Geometry helpers
 * ---------------------------------------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t numel_of(const tgc_tensor *t)
{
    return tgc_shape_numel(t->shape, t->ndim);
}

/* Whether dims [0, nd) of a layout can be walked as one dim in row-major order; if so,
 * *stride is that dim's stride. Size-1 dims are skipped because their stride is never
 * used. Lets a [B, T, in] activation be one [B*T, in] matrix without a copy. */
static int collapse_dims(const int64_t *shape, const int64_t *strides, int nd, int64_t *stride)
{
    int64_t inner_stride = 0, inner_span = 0;
    int seen = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] == 1)
            continue;
        if (seen && strides[d] != inner_span)
            return 0;
        if (!seen)
            inner_stride = strides[d];
        seen = 1;
        inner_span = strides[d] * shape[d];
    }
    *stride = inner_stride;
    return 1;
}

/* Storage offset of row r of t viewed as [rows, t->shape[nd-1]]. */
static int64_t row_offset(const tgc_tensor *t, int64_t r)
{
    int64_t off = t->offset;
    for (int d = t->ndim - 2; d >= 0; d--) {
        off += (r % t->shape[d]) * t->strides[d];
        r /= t->shape[d];
    }
    return off;
}

static const float *f32_ptr(const tgc_tensor *t)
{
    return (const float *)tgc_host_data(t) + t->offset;
}

static tgc_status oom(const char *what)
{
    return tgc_set_error(TGC_ERR_OOM, "tgc_interp_linalg: out of memory for %s scratch", what);
}

/* A contiguous f32 copy of t, or t's own data when it already is contiguous. *owned is
 * set to the buffer the caller must free (NULL when nothing was allocated). */
static tgc_status contiguous_f32(const tgc_tensor *t, const float **data, float **owned)
{
    *owned = NULL;
    if (tgc_tensor_is_contiguous(t)) {
        *data = f32_ptr(t);
        return TGC_OK;
    }
    int64_t n = numel_of(t);
    const float *base = (const float *)tgc_host_data(t);
    float *buf = malloc((size_t)n * sizeof(float));
    if (!buf)
        return oom("input copy");
    for (int64_t i = 0; i < n; i++)
        buf[i] = base[tgc_tensor_elem_offset(t, i)];
    *owned = buf;
    *data = buf;
    return TGC_OK;
}

static int all_f32(tgc_tensor *const *in, int n_in, const tgc_tensor *out)
{
    if (out->dtype != TGC_F32)
        return 0;
    for (int i = 0; i < n_in; i++)
        if (in[i]->dtype != TGC_F32)
            return 0;
    return 1;
}

static tgc_status shape_mismatch(const char *op, const tgc_tensor *out, const int64_t *want,
                                 int want_nd)
{
    char got[128], exp[128];
    tgc_format_dims(out->shape, out->ndim, got, sizeof got);
    tgc_format_dims(want, want_nd, exp, sizeof exp);
    return tgc_set_error(TGC_ERR_INTERNAL,
                         "tgc_interp_linalg: %s output is %s but its inputs give %s", op, got, exp);
}

static int same_dims(const tgc_tensor *t, const int64_t *shape, int nd)
{
    if (t->ndim != nd)
        return 0;
    for (int d = 0; d < nd; d++)
        if (t->shape[d] != shape[d])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------------------
 * f32 GEMM: C[M, N] (row stride ldc) = A[M, K] B[K, N] + bias_m[i] + bias_n[j]
 *
 * BLIS-style blocking: B is packed into KC x NC blocks of NR-wide column panels, A into
 * MC x KC blocks of MR-tall row panels, so the micro-kernel streams both from L1/L2 with
 * unit stride. The micro-kernel's loops have constant trip counts and no tails (panels are
 * zero-padded), which is what lets GCC and Clang vectorize it at -O2.
 * ---------------------------------------------------------------------------------- */

enum { MR = 4, NR = 16, KC = 256, MC = 128, NC = 1024 };

typedef struct fmat {
    const float *p;
    int64_t rs, cs; /* element (r, c) is p[r * rs + c * cs] */
} fmat;

typedef struct sgemm_args {
    int64_t m, n, k;
    fmat a, b;
    float *c;
    int64_t ldc;
    const float *bias_m; /* per row of C, or NULL */
    const float *bias_n; /* per column of C, or NULL */
} sgemm_args;

typedef struct gemm_ws {
    float *a, *b;
} gemm_ws;

static int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

/* Packing buffers sized for an M x N x K problem; reused across batches and images. */
static tgc_status ws_init(gemm_ws *ws, int64_t m, int64_t n, int64_t k)
{
    int64_t kc = k > 0 ? min64(k, KC) : 1;
    size_t na = (size_t)(round_up(min64(m > 0 ? m : 1, MC), MR) * kc);
    size_t nb = (size_t)(round_up(min64(n > 0 ? n : 1, NC), NR) * kc);
    ws->a = malloc(na * sizeof(float));
    ws->b = malloc(nb * sizeof(float));
    if (!ws->a || !ws->b) {
        free(ws->a);
        free(ws->b);
        ws->a = ws->b = NULL;
        return oom("GEMM packing");
    }
    return TGC_OK;
}

static void ws_free(gemm_ws *ws)
{
    free(ws->a);
    free(ws->b);
}

/* Rows [i0, i0+mc) x cols [k0, k0+kc) of A into MR-row panels, k-major inside a panel. */
static void pack_a(const fmat *a, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                   float *restrict dst)
{
    for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * kc) {
        for (int r = 0; r < MR; r++) {
            if (ip + r >= mc) {
                for (int64_t k = 0; k < kc; k++)
                    dst[k * MR + r] = 0.0f;
                continue;
            }
            const float *src = a->p + (i0 + ip + r) * a->rs + k0 * a->cs;
            for (int64_t k = 0; k < kc; k++)
                dst[k * MR + r] = src[k * a->cs];
        }
    }
}

/* One NR-wide panel of B: rows [k0, k0+kc), cols [j0, j0+nr), zero-padded to NR. Loops in
 * the order that reads B with the smaller stride (a transposed weight reads down rows). */
static void pack_b_panel(const fmat *b, int64_t k0, int64_t kc, int64_t j0, int64_t nr,
                         float *restrict dst)
{
    const float *src = b->p + k0 * b->rs + j0 * b->cs;
    if (nr < NR)
        memset(dst, 0, (size_t)(kc * NR) * sizeof(float));
    if (b->cs <= b->rs || nr == 1) {
        for (int64_t k = 0; k < kc; k++)
            for (int64_t j = 0; j < nr; j++)
                dst[k * NR + j] = src[k * b->rs + j * b->cs];
    } else {
        for (int64_t j = 0; j < nr; j++)
            for (int64_t k = 0; k < kc; k++)
                dst[k * NR + j] = src[k * b->rs + j * b->cs];
    }
}

static void pack_b(const fmat *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                   float *restrict dst)
{
    for (int64_t jp = 0; jp < nc; jp += NR, dst += NR * kc)
        pack_b_panel(b, k0, kc, j0 + jp, min64(NR, nc - jp), dst);
}

/* tile[MR][NR] = sum_k a[k][r] * b[k][j] over one packed panel pair. The accumulator is a
 * local array with constant bounds so the compiler keeps it in vector registers or L1. */
static void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                         float *restrict tile)
{
    float acc[MR * NR];
    for (int i = 0; i < MR * NR; i++)
        acc[i] = 0.0f;
    for (int64_t k = 0; k < kc; k++) {
        const float *restrict ak = a + k * MR;
        const float *restrict bk = b + k * NR;
        for (int r = 0; r < MR; r++) {
            float av = ak[r];
            for (int j = 0; j < NR; j++)
                acc[r * NR + j] += av * bk[j];
        }
    }
    for (int i = 0; i < MR * NR; i++)
        tile[i] = acc[i];
}

/* Writes the valid mr x nr corner of a tile at C[i0, j0]: the first K block initialises C
 * (bias fused here so C is written once), later blocks accumulate. */
static void store_tile(const sgemm_args *g, int64_t i0, int64_t j0, int64_t mr, int64_t nr,
                       const float *tile, int first)
{
    for (int64_t r = 0; r < mr; r++) {
        float *restrict c = g->c + (i0 + r) * g->ldc + j0;
        const float *t = tile + r * NR;
        if (!first) {
            for (int64_t j = 0; j < nr; j++)
                c[j] += t[j];
            continue;
        }
        float bm = g->bias_m ? g->bias_m[i0 + r] : 0.0f;
        const float *bn = g->bias_n ? g->bias_n + j0 : NULL;
        for (int64_t j = 0; j < nr; j++)
            c[j] = t[j] + bm + (bn ? bn[j] : 0.0f);
    }
}

/* C block [i0, i0+mc) x [j0, j0+nc) += packed A block x packed B block. */
static void macro_kernel(const sgemm_args *g, const gemm_ws *ws, int64_t i0, int64_t mc, int64_t j0,
                         int64_t nc, int64_t kc, int first)
{
    float tile[MR * NR];
    for (int64_t jr = 0; jr < nc; jr += NR) {
        const float *bp = ws->b + jr * kc;
        for (int64_t ir = 0; ir < mc; ir += MR) {
            micro_kernel(kc, ws->a + ir * kc, bp, tile);
            store_tile(g, i0 + ir, j0 + jr, min64(MR, mc - ir), min64(NR, nc - jr), tile, first);
        }
    }
}

/* K == 0: the product is empty, so C is just the bias (or zeros). */
static void fill_bias(const sgemm_args *g)
{
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++)
            g->c[i * g->ldc + j] =
                (g->bias_m ? g->bias_m[i] : 0.0f) + (g->bias_n ? g->bias_n[j] : 0.0f);
}

static void sgemm(const sgemm_args *g, const gemm_ws *ws)
{
    if (g->k == 0) {
        fill_bias(g);
        return;
    }
    for (int64_t jc = 0; jc < g->n; jc += NC) {
        int64_t nc = min64(NC, g->n - jc);
        for (int64_t pc = 0; pc < g->k; pc += KC) {
            int64_t kc = min64(KC, g->k - pc);
            pack_b(&g->b, pc, kc, jc, nc, ws->b);
            for (int64_t ic = 0; ic < g->m; ic += MC) {
                int64_t mc = min64(MC, g->m - ic);
                pack_a(&g->a, ic, mc, pc, kc, ws->a);
                macro_kernel(g, ws, ic, mc, jc, nc, kc, pc == 0);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------
 * Generic GEMM in double over any dtypes: the oracle for every non-f32 combination.
 * ---------------------------------------------------------------------------------- */

typedef struct gmat {
    const void *base;
    tgc_dtype dt;
    int64_t off, rs, cs;
} gmat;

typedef struct dgemm_args {
    int64_t m, n, k;
    gmat a, b;
    const tgc_tensor *bias; /* per column of C (linear), or NULL */
    void *c;
    tgc_dtype c_dt;
    int64_t c_off, ldc;
} dgemm_args;

static double gload(const gmat *x, int64_t r, int64_t c)
{
    return tgc_load(x->base, x->dt, x->off + r * x->rs + c * x->cs);
}

static void dgemm(const dgemm_args *g)
{
    const tgc_tensor *bias = g->bias;
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->n; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < g->k; k++)
                acc += gload(&g->a, i, k) * gload(&g->b, k, j);
            if (bias)
                acc +=
                    tgc_load(tgc_host_data(bias), bias->dtype, bias->offset + j * bias->strides[0]);
            tgc_store(g->c, g->c_dt, g->c_off + i * g->ldc + j, acc);
        }
    }
}

/* ------------------------------------------------------------------------------------
 * MATMUL: numpy semantics. A 1-D a is a [1, K] row, a 1-D b a [K, 1] column; the added dim
 * is absent from out, which leaves out's contiguous layout identical to [batch..., M, N].
 * ---------------------------------------------------------------------------------- */

typedef struct mm_geom {
    int64_t m, n, k;
    int64_t a_rs, a_cs, b_rs, b_cs;
    int nb;                                     /* batch dims of out */
    int64_t bshape[TGC_MAX_DIMS];               /* broadcast batch shape */
    int64_t sa[TGC_MAX_DIMS], sb[TGC_MAX_DIMS]; /* batch strides, 0 where broadcast */
    int64_t batch;
} mm_geom;

/* Matrix part of one operand: rows/cols and their strides; returns its batch rank. */
static int mm_operand(const tgc_tensor *t, int is_a, int64_t *rows, int64_t *cols, int64_t *rs,
                      int64_t *cs)
{
    int nd = t->ndim;
    if (nd == 1) {
        /* a vector: a row for a, a column for b; the stride of the size-1 side is unused */
        *rows = is_a ? 1 : t->shape[0];
        *cols = is_a ? t->shape[0] : 1;
        *rs = is_a ? 0 : t->strides[0];
        *cs = is_a ? t->strides[0] : 0;
        return 0;
    }
    *rows = t->shape[nd - 2];
    *cols = t->shape[nd - 1];
    *rs = t->strides[nd - 2];
    *cs = t->strides[nd - 1];
    return nd - 2;
}

/* Broadcasts the batch dims of a (rank na) and b (rank nb) aligned at the right. */
static int mm_batch(const tgc_tensor *a, int na, const tgc_tensor *b, int nb, mm_geom *g)
{
    g->nb = na > nb ? na : nb;
    g->batch = 1;
    for (int d = 0; d < g->nb; d++) {
        int da = d - (g->nb - na), db = d - (g->nb - nb);
        int64_t za = da >= 0 ? a->shape[da] : 1, zb = db >= 0 ? b->shape[db] : 1;
        if (za != zb && za != 1 && zb != 1)
            return 0;
        g->bshape[d] = za > zb ? za : zb;
        if (za == 0 || zb == 0)
            g->bshape[d] = 0;
        g->sa[d] = (za == 1) ? 0 : a->strides[da];
        g->sb[d] = (zb == 1) ? 0 : b->strides[db];
        g->batch *= g->bshape[d];
    }
    return 1;
}

static tgc_status mm_geometry(const tgc_tensor *a, const tgc_tensor *b, const tgc_tensor *out,
                              mm_geom *g)
{
    if (a->ndim < 1 || b->ndim < 1)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: matmul of a 0-d tensor");
    int64_t kb;
    int na = mm_operand(a, 1, &g->m, &g->k, &g->a_rs, &g->a_cs);
    int nb = mm_operand(b, 0, &kb, &g->n, &g->b_rs, &g->b_cs);
    int64_t want[TGC_MAX_DIMS];
    int nd = 0;
    if (kb != g->k || !mm_batch(a, na, b, nb, g)) {
        char sa[128], sb[128];
        tgc_format_dims(a->shape, a->ndim, sa, sizeof sa);
        tgc_format_dims(b->shape, b->ndim, sb, sizeof sb);
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_interp_linalg: matmul operands do not fit: a is %s, b is %s", sa,
                             sb);
    }
    for (int d = 0; d < g->nb; d++)
        want[nd++] = g->bshape[d];
    if (a->ndim > 1)
        want[nd++] = g->m;
    if (b->ndim > 1)
        want[nd++] = g->n;
    if (!same_dims(out, want, nd))
        return shape_mismatch("matmul", out, want, nd);
    return TGC_OK;
}

/* Storage offsets of batch element bi in a and b. */
static void mm_batch_offsets(const mm_geom *g, int64_t bi, int64_t *oa, int64_t *ob)
{
    *oa = 0;
    *ob = 0;
    for (int d = g->nb - 1; d >= 0; d--) {
        int64_t idx = bi % g->bshape[d];
        bi /= g->bshape[d];
        *oa += idx * g->sa[d];
        *ob += idx * g->sb[d];
    }
}

static tgc_status matmul_f32(const tgc_tensor *a, const tgc_tensor *b, tgc_tensor *out,
                             const mm_geom *g)
{
    float *c = (float *)tgc_host_data(out) + out->offset;
    if (g->k == 0) {
        /* an empty sum; the operands may be empty, so no pointer into them is formed */
        memset(c, 0, (size_t)(g->batch * g->m * g->n) * sizeof(float));
        return TGC_OK;
    }
    gemm_ws ws = {0};
    tgc_status s = ws_init(&ws, g->m, g->n, g->k);
    if (s != TGC_OK)
        return s;
    for (int64_t bi = 0; bi < g->batch; bi++) {
        int64_t oa, ob;
        mm_batch_offsets(g, bi, &oa, &ob);
        sgemm_args ga = {.m = g->m,
                         .n = g->n,
                         .k = g->k,
                         .a = {f32_ptr(a) + oa, g->a_rs, g->a_cs},
                         .b = {f32_ptr(b) + ob, g->b_rs, g->b_cs},
                         .c = c + bi * g->m * g->n,
                         .ldc = g->n};
        sgemm(&ga, &ws);
    }
    ws_free(&ws);
    return TGC_OK;
}

static void matmul_generic(const tgc_tensor *a, const tgc_tensor *b, tgc_tensor *out,
                           const mm_geom *g)
{
    for (int64_t bi = 0; bi < g->batch; bi++) {
        int64_t oa, ob;
        mm_batch_offsets(g, bi, &oa, &ob);
        dgemm_args ga = {.m = g->m,
                         .n = g->n,
                         .k = g->k,
                         .a = {tgc_host_data(a), a->dtype, a->offset + oa, g->a_rs, g->a_cs},
                         .b = {tgc_host_data(b), b->dtype, b->offset + ob, g->b_rs, g->b_cs},
                         .c = tgc_host_data(out),
                         .c_dt = out->dtype,
                         .c_off = out->offset + bi * g->m * g->n,
                         .ldc = g->n};
        dgemm(&ga);
    }
}

static tgc_status run_matmul(tgc_tensor *const *in, int n_in, tgc_tensor *out)
{
    mm_geom g = {0};
    tgc_status s = mm_geometry(in[0], in[1], out, &g);
    if (s != TGC_OK || numel_of(out) == 0)
        return s;
    if (all_f32(in, n_in, out))
        return matmul_f32(in[0], in[1], out, &g);
    matmul_generic(in[0], in[1], out, &g);
    return TGC_OK;
}

/* ------------------------------------------------------------------------------------
 * LINEAR: x [..., in] viewed as rows x in, times w^T (w is [out, in]), plus bias[out].
 * ---------------------------------------------------------------------------------- */

typedef struct lin_geom {
    int64_t rows, in_f, out_f;
} lin_geom;

static tgc_status lin_geometry(tgc_tensor *const *in, int n_in, const tgc_tensor *out, lin_geom *g)
{
    const tgc_tensor *x = in[0], *w = in[1];
    int64_t want[TGC_MAX_DIMS];
    if (x->ndim < 1 || w->ndim != 2 || (n_in == 3 && in[2]->ndim != 1))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: linear given bad ranks");
    g->in_f = x->shape[x->ndim - 1];
    g->out_f = w->shape[0];
    g->rows = tgc_shape_numel(x->shape, x->ndim - 1);
    memcpy(want, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    want[x->ndim - 1] = g->out_f;
    if (w->shape[1] != g->in_f || (n_in == 3 && in[2]->shape[0] != g->out_f) ||
        !same_dims(out, want, x->ndim))
        return shape_mismatch("linear", out, want, x->ndim);
    return TGC_OK;
}

static tgc_status linear_f32(tgc_tensor *const *in, int n_in, tgc_tensor *out, const lin_geom *g)
{
    const tgc_tensor *x = in[0], *w = in[1];
    float *x_copy = NULL, *b_copy = NULL;
    const float *bias = NULL;
    gemm_ws ws = {0};
    sgemm_args ga = {.m = g->rows,
                     .n = g->out_f,
                     .k = g->in_f,
                     .b = {f32_ptr(w), w->strides[1], w->strides[0]},
                     .c = (float *)tgc_host_data(out) + out->offset,
                     .ldc = g->out_f};
    int64_t rs = 0;
    tgc_status s = TGC_OK;
    ga.a = (fmat){f32_ptr(x), 0, x->strides[x->ndim - 1]};
    if (collapse_dims(x->shape, x->strides, x->ndim - 1, &rs)) {
        ga.a.rs = rs;
    } else {
        /* leading dims not walkable with one stride: pay one copy instead of per-row GEMMs */
        const float *xd = NULL;
        s = contiguous_f32(x, &xd, &x_copy);
        ga.a = (fmat){xd, g->in_f, 1};
    }
    if (s == TGC_OK && n_in == 3)
        s = contiguous_f32(in[2], &bias, &b_copy);
    ga.bias_n = bias;
    if (s == TGC_OK && g->in_f > 0)
        s = ws_init(&ws, g->rows, g->out_f, g->in_f);
    if (s == TGC_OK)
        sgemm(&ga, &ws);
    ws_free(&ws);
    free(x_copy);
    free(b_copy);
    return s;
}

static void linear_generic(tgc_tensor *const *in, int n_in, tgc_tensor *out, const lin_geom *g)
{
    const tgc_tensor *x = in[0], *w = in[1];
    /* one row at a time: row_offset handles any layout of the leading dims */
    for (int64_t r = 0; r < g->rows; r++) {
        dgemm_args ga = {
            .m = 1,
            .n = g->out_f,
            .k = g->in_f,
            .a = {tgc_host_data(x), x->dtype, row_offset(x, r), 0, x->strides[x->ndim - 1]},
            .b = {tgc_host_data(w), w->dtype, w->offset, w->strides[1], w->strides[0]},
            .bias = n_in == 3 ? in[2] : NULL,
            .c = tgc_host_data(out),
            .c_dt = out->dtype,
            .c_off = out->offset + r * g->out_f,
            .ldc = g->out_f};
        dgemm(&ga);
    }
}

static tgc_status run_linear(tgc_tensor *const *in, int n_in, tgc_tensor *out)
{
    lin_geom g = {0};
    tgc_status s = lin_geometry(in, n_in, out, &g);
    if (s != TGC_OK || numel_of(out) == 0)
        return s;
    if (all_f32(in, n_in, out))
        return linear_f32(in, n_in, out, &g);
    linear_generic(in, n_in, out, &g);
    return TGC_OK;
}

/* ------------------------------------------------------------------------------------
 * CONV2D: x [N, C, H, W], w [O, C/groups, kh, kw], zero padding.
 * ---------------------------------------------------------------------------------- */

typedef struct conv_geom {
    int64_t n, c, h, w;     /* input */
    int64_t o, cg, og;      /* out channels, channels per group (in, out) */
    int64_t kh, kw, oh, ow; /* kernel and output spatial sizes */
    int64_t sh, sw, ph, pw, dh, dw, groups;
} conv_geom;

static tgc_status conv_attrs(const tgc_attrs *a, conv_geom *g)
{
    if (!a)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: conv2d without attrs");
    g->sh = a->conv2d.stride_h;
    g->sw = a->conv2d.stride_w;
    g->ph = a->conv2d.pad_h;
    g->pw = a->conv2d.pad_w;
    g->dh = a->conv2d.dil_h;
    g->dw = a->conv2d.dil_w;
    g->groups = a->conv2d.groups;
    if (g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0 || g->dh < 1 || g->dw < 1 || g->groups < 1)
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_interp_linalg: conv2d attrs out of range (stride %lld,%lld "
                             "pad %lld,%lld dilation %lld,%lld groups %lld)",
                             (long long)g->sh, (long long)g->sw, (long long)g->ph, (long long)g->pw,
                             (long long)g->dh, (long long)g->dw, (long long)g->groups);
    return TGC_OK;
}

static int64_t conv_out_size(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride)
{
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

static tgc_status conv_geometry(tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                                const tgc_tensor *out, conv_geom *g)
{
    const tgc_tensor *x = in[0], *w = in[1];
    tgc_status s = conv_attrs(a, g);
    if (s != TGC_OK)
        return s;
    if (x->ndim != 4 || w->ndim != 4 || (n_in == 3 && in[2]->ndim != 1))
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: conv2d given bad ranks");
    g->n = x->shape[0];
    g->c = x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->o = w->shape[0];
    g->cg = w->shape[1];
    g->kh = w->shape[2];
    g->kw = w->shape[3];
    g->og = g->o / g->groups;
    g->oh = conv_out_size(g->h, g->ph, g->dh, g->kh, g->sh);
    g->ow = conv_out_size(g->w, g->pw, g->dw, g->kw, g->sw);
    int64_t want[4] = {g->n, g->o, g->oh, g->ow};
    if (g->cg * g->groups != g->c || g->og * g->groups != g->o ||
        (n_in == 3 && in[2]->shape[0] != g->o) || !same_dims(out, want, 4))
        return shape_mismatch("conv2d", out, want, 4);
    return TGC_OK;
}

/* Output positions ow in [*lo, *hi) read an in-range input column: iw = ow*s + off. */
static void valid_range(int64_t off, int64_t s, int64_t in, int64_t n_out, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = (in - 1 - off) < 0 ? 0 : (in - 1 - off) / s + 1;
    *lo = l < n_out ? l : n_out;
    *hi = h < n_out ? h : n_out;
    if (*hi < *lo)
        *hi = *lo;
}

/* One im2col row: for kernel tap (ki, kj) of input channel plane src, the OH x OW values it
 * meets, zeros where the tap falls into padding. */
static void im2col_row(const conv_geom *g, const float *src, int64_t s_h, int64_t s_w, int64_t ki,
                       int64_t kj, float *restrict dst)
{
    int64_t lo, hi, off_w = kj * g->dw - g->pw;
    valid_range(off_w, g->sw, g->w, g->ow, &lo, &hi);
    for (int64_t oh = 0; oh < g->oh; oh++, dst += g->ow) {
        int64_t ih = oh * g->sh - g->ph + ki * g->dh;
        if (ih < 0 || ih >= g->h) {
            memset(dst, 0, (size_t)g->ow * sizeof(float));
            continue;
        }
        const float *row = src + ih * s_h;
        for (int64_t ow = 0; ow < lo; ow++)
            dst[ow] = 0.0f;
        for (int64_t ow = lo; ow < hi; ow++)
            dst[ow] = row[(ow * g->sw + off_w) * s_w];
        for (int64_t ow = hi; ow < g->ow; ow++)
            dst[ow] = 0.0f;
    }
}

/* col [cg*kh*kw, oh*ow] for image n, group gi. */
static void im2col(const conv_geom *g, const tgc_tensor *x, int64_t n, int64_t gi,
                   float *restrict col)
{
    const int64_t *st = x->strides;
    int64_t plane = g->oh * g->ow;
    for (int64_t c = 0; c < g->cg; c++) {
        const float *src = f32_ptr(x) + n * st[0] + (gi * g->cg + c) * st[1];
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++, col += plane)
                im2col_row(g, src, st[2], st[3], ki, kj, col);
    }
}

/* A 1x1, stride-1, unpadded conv reads x directly: its im2col matrix is x's [C, H*W]. */
static int conv_is_pointwise(const conv_geom *g, const tgc_tensor *x, int64_t *hw_stride)
{
    if (g->kh != 1 || g->kw != 1 || g->sh != 1 || g->sw != 1 || g->ph != 0 || g->pw != 0)
        return 0;
    return collapse_dims(x->shape + 2, x->strides + 2, 2, hw_stride);
}

typedef struct conv_bufs {
    const float *w, *bias;
    float *w_copy, *b_copy, *col;
    gemm_ws ws;
} conv_bufs;

static void conv_bufs_free(conv_bufs *b)
{
    free(b->w_copy);
    free(b->b_copy);
    free(b->col);
    ws_free(&b->ws);
}

static tgc_status conv_bufs_init(tgc_tensor *const *in, int n_in, const conv_geom *g, int pointwise,
                                 conv_bufs *b)
{
    int64_t k = g->cg * g->kh * g->kw, plane = g->oh * g->ow;
    tgc_status s = contiguous_f32(in[1], &b->w, &b->w_copy);
    if (s == TGC_OK && n_in == 3)
        s = contiguous_f32(in[2], &b->bias, &b->b_copy);
    if (s == TGC_OK && !pointwise && k > 0) {
        b->col = malloc((size_t)(k * plane) * sizeof(float));
        if (!b->col)
            s = oom("im2col");
    }
    if (s == TGC_OK && k > 0)
        s = ws_init(&b->ws, g->og, plane, k);
    return s;
}

static tgc_status conv_f32(tgc_tensor *const *in, int n_in, tgc_tensor *out, const conv_geom *g)
{
    const tgc_tensor *x = in[0];
    int64_t k = g->cg * g->kh * g->kw, plane = g->oh * g->ow, hw_stride = 0;
    int pointwise = conv_is_pointwise(g, x, &hw_stride);
    conv_bufs b = {0};
    tgc_status s = conv_bufs_init(in, n_in, g, pointwise, &b);
    float *c = (float *)tgc_host_data(out) + out->offset;
    for (int64_t n = 0; s == TGC_OK && n < g->n; n++) {
        for (int64_t gi = 0; gi < g->groups; gi++) {
            sgemm_args ga = {.m = g->og,
                             .n = plane,
                             .k = k,
                             .a = {b.w + gi * g->og * k, k, 1},
                             .b = {b.col, plane, 1},
                             .c = c + (n * g->o + gi * g->og) * plane,
                             .ldc = plane,
                             .bias_m = b.bias ? b.bias + gi * g->og : NULL};
            if (k > 0 && pointwise)
                ga.b = (fmat){f32_ptr(x) + n * x->strides[0] + gi * g->cg * x->strides[1],
                              x->strides[1], hw_stride};
            else if (k > 0)
                im2col(g, x, n, gi, b.col);
            sgemm(&ga, &b.ws);
        }
    }
    conv_bufs_free(&b);
    return s;
}

/* One output element of the generic conv, accumulated in double. */
static double conv_point(const tgc_tensor *x, const tgc_tensor *w, const conv_geom *g, int64_t n,
                         int64_t o, int64_t oh, int64_t ow)
{
    const void *xb = tgc_host_data(x), *wb = tgc_host_data(w);
    const int64_t *xs = x->strides, *ws = w->strides;
    int64_t c0 = (o / g->og) * g->cg;
    double acc = 0.0;
    for (int64_t c = 0; c < g->cg; c++) {
        for (int64_t ki = 0; ki < g->kh; ki++) {
            int64_t ih = oh * g->sh - g->ph + ki * g->dh;
            if (ih < 0 || ih >= g->h)
                continue;
            for (int64_t kj = 0; kj < g->kw; kj++) {
                int64_t iw = ow * g->sw - g->pw + kj * g->dw;
                if (iw < 0 || iw >= g->w)
                    continue;
                int64_t xo = x->offset + n * xs[0] + (c0 + c) * xs[1] + ih * xs[2] + iw * xs[3];
                int64_t wo = w->offset + o * ws[0] + c * ws[1] + ki * ws[2] + kj * ws[3];
                acc += tgc_load(xb, x->dtype, xo) * tgc_load(wb, w->dtype, wo);
            }
        }
    }
    return acc;
}

static void conv_generic(tgc_tensor *const *in, int n_in, tgc_tensor *out, const conv_geom *g)
{
    const tgc_tensor *bias = n_in == 3 ? in[2] : NULL;
    int64_t idx = out->offset;
    for (int64_t n = 0; n < g->n; n++) {
        for (int64_t o = 0; o < g->o; o++) {
            double b = bias ? tgc_load(tgc_host_data(bias), bias->dtype,
                                       bias->offset + o * bias->strides[0])
                            : 0.0;
            for (int64_t oh = 0; oh < g->oh; oh++)
                for (int64_t ow = 0; ow < g->ow; ow++)
                    tgc_store(tgc_host_data(out), out->dtype, idx++,
                              b + conv_point(in[0], in[1], g, n, o, oh, ow));
        }
    }
}

static tgc_status run_conv2d(tgc_tensor *const *in, int n_in, const tgc_attrs *a, tgc_tensor *out)
{
    conv_geom g = {0};
    tgc_status s = conv_geometry(in, n_in, a, out, &g);
    if (s != TGC_OK || numel_of(out) == 0)
        return s;
    if (all_f32(in, n_in, out))
        return conv_f32(in, n_in, out, &g);
    conv_generic(in, n_in, out, &g);
    return TGC_OK;
}

/* ------------------------------------------------------------------------------------
 * Entry point
 * ---------------------------------------------------------------------------------- */

static tgc_status check_inputs(tgc_op op, tgc_tensor *const *in, int n_in, tgc_tensor *out)
{
    int max_in = op == TGC_OP_MATMUL ? 2 : 3;
    if (!in || !out || n_in < 2 || n_in > max_in)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: %s given %d inputs",
                             tgc_op_name(op), n_in);
    for (int i = 0; i < n_in; i++)
        if (!in[i] || (!in[i]->storage && numel_of(in[i]) > 0))
            return tgc_set_error(TGC_ERR_INTERNAL,
                                 "tgc_interp_linalg: %s input %d is not a concrete tensor",
                                 tgc_op_name(op), i);
    if (!out->storage && numel_of(out) > 0)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: %s output has no storage",
                             tgc_op_name(op));
    return TGC_OK;
}

tgc_status tgc_interp_linalg(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out)
{
    if (op != TGC_OP_MATMUL && op != TGC_OP_LINEAR && op != TGC_OP_CONV2D)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_linalg: '%s' is not a linalg op",
                             tgc_op_name(op));
    tgc_status s = check_inputs(op, in, n_in, out);
    if (s != TGC_OK)
        return s;
    switch (op) {
    case TGC_OP_MATMUL: return run_matmul(in, n_in, out);
    case TGC_OP_LINEAR: return run_linear(in, n_in, out);
    default: return run_conv2d(in, n_in, a, out);
    }
}
