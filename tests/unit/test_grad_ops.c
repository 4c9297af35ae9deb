/* The backward ops of ops.def (conv2d input / weight gradients, the pool gradients, the
 * scatter-adds of embedding, gather and index_select): their builders (frontend/ops_grad.h),
 * shape inference and interp kernels.
 *
 * For each op, on odd shapes:
 *   - the kernel against a naive formula written here independently of it (the gradient as a
 *     gather over the forward's taps where the kernel scatters), in f64, f32, f16 and bf16
 *     (inputs rounded to the dtype, the formula over the rounded values, the result rounded
 *     once: within half an ulp of the dtype);
 *   - the gradient against central finite differences of the forward op in f64: with
 *     L(v) = sum(forward(v) * r) for a random r, the grad op applied to r is dL/dv;
 *   - the op through a compiled function (tgc_compile + tgc_call, on the interp backend and
 *     on the default one, statically and with every size dynamic) equal to the eager call;
 * plus PyTorch's max-pool tie rule, empty tensors, strided inputs, and the error paths of the
 * builders, shape inference and kernels with their exact statuses. */
#include "ops/op_test_util.h"

#include <stdio.h>

#include "frontend/ops_grad.h"
#include "support/error.h"

#define FD_H   1e-6
#define FD_TOL 1e-6

/* ---- data ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static double urand(void) /* [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / (double)(1ull << 52) - 1.0;
}

static double *rand_vals(int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = urand();
    return v;
}

/* n distinct values, multiples of 1/8 (exact in every float dtype for n <= 256): max pools
 * then have no ties, and no finite-difference step crosses one. */
static double *distinct_vals(int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(i - n / 2) / 8.0;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)((urand() + 1.0) / 2.0 * (double)(i + 1)) % (i + 1);
        double t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    return v;
}

static tgc_tensor *idx_tensor(const int64_t *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t n = numel_of(shape, nd);
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++)
        d[i] = (double)v[i];
    tgc_tensor *t = from_doubles(d, shape, nd, dt);
    free(d);
    return t;
}

/* Half an ulp (rounded once), relative, per dtype; with an absolute floor for the values near
 * 0 that a sum of rounded terms can land on. */
static double dtype_tol(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 1e-12;
    case TGC_F32: return 1e-6;
    case TGC_F16: return 1e-3;
    default: return 4e-3; /* bf16 */
    }
}

static void expect_near(const tgc_tensor *t, tgc_dtype dt, const int64_t *shape, int nd,
                        const double *want, double tol)
{
    expect_values_near(t, dt, shape, nd, want, tol, 1e-3);
}

/* ---- the ops, by number, for the generic checks ---- */

enum { OP_CGI, OP_CGW, OP_MPG, OP_APG, OP_AAPG, OP_EG, OP_GG, OP_ISG };

typedef struct gcase {
    int op;
    tgc_attrs a; /* the forward's attributes */
    int dim;
} gcase;

static gcase g_case; /* the case the model function applies */

/* The grad op on its inputs: CGI (dy, w, x_like), CGW (x, dy, w_like), MPG (x, dy),
 * APG / AAPG (dy, x_like), EG (dy, idx, weight_like), GG / ISG (dy, idx, t_like). */
static tgc_tensor *apply_grad(const gcase *c, tgc_tensor *const *in)
{
    switch (c->op) {
    case OP_CGI: return tgc_conv2d_grad_input(in[0], in[1], &c->a, in[2]);
    case OP_CGW: return tgc_conv2d_grad_weight(in[0], in[1], &c->a, in[2]);
    case OP_MPG: return tgc_max_pool2d_grad(in[0], in[1], &c->a);
    case OP_APG: return tgc_avg_pool2d_grad(in[0], &c->a, in[1]);
    case OP_AAPG: return tgc_adaptive_avg_pool2d_grad(in[0], &c->a, in[1]);
    case OP_EG: return tgc_embedding_grad(in[0], in[1], in[2]);
    case OP_GG: return tgc_gather_grad(in[0], in[1], c->dim, in[2]);
    default: return tgc_index_select_grad(in[0], in[1], c->dim, in[2]);
    }
}

static tgc_conv2d_opts conv_opts(const tgc_attrs *a)
{
    tgc_conv2d_opts o = {.stride = {(int)a->i[0], (int)a->i[1]},
                         .padding = {(int)a->i[2], (int)a->i[3]},
                         .dilation = {(int)a->i[4], (int)a->i[5]},
                         .groups = (int)a->i[6]};
    return o;
}

static tgc_pool2d_opts pool_opts(const tgc_attrs *a)
{
    tgc_pool2d_opts o = {.kernel = {(int)a->i[0], (int)a->i[1]},
                         .stride = {(int)a->i[2], (int)a->i[3]},
                         .padding = {(int)a->i[4], (int)a->i[5]},
                         .exclude_padding = (int)a->i[6]};
    return o;
}

static tgc_attrs conv_attrs(int sh, int sw, int ph, int pw, int dh, int dw, int groups)
{
    tgc_attrs a = {.i = {sh, sw, ph, pw, dh, dw, groups}, .ni = 7};
    return a;
}

static tgc_attrs pool_attrs(int kh, int kw, int sh, int sw, int ph, int pw, int excl)
{
    tgc_attrs a = {.i = {kh, kw, sh, sw, ph, pw, excl}, .ni = 7};
    return a;
}

/* The forward op of case c with v as the operand whose gradient the grad op makes; `other`
 * is its other operand (w, x, idx; unused by the pools). */
static tgc_tensor *apply_forward(const gcase *c, tgc_tensor *v, tgc_tensor *other)
{
    switch (c->op) {
    case OP_CGI: {
        tgc_conv2d_opts o = conv_opts(&c->a);
        return tgc_conv2d(v, other, NULL, &o);
    }
    case OP_CGW: {
        tgc_conv2d_opts o = conv_opts(&c->a);
        return tgc_conv2d(other, v, NULL, &o);
    }
    case OP_MPG: {
        tgc_pool2d_opts o = pool_opts(&c->a);
        return tgc_max_pool2d(v, &o);
    }
    case OP_APG: {
        tgc_pool2d_opts o = pool_opts(&c->a);
        return tgc_avg_pool2d(v, &o);
    }
    case OP_AAPG: return tgc_adaptive_avg_pool2d(v, (int)c->a.i[0], (int)c->a.i[1]);
    case OP_EG: return tgc_embedding(v, other);
    case OP_GG: return tgc_gather(v, c->dim, other);
    default: return tgc_index_select(v, c->dim, other);
    }
}

/* ---- finite differences ---- */

/* sum(forward(v) * r) for v's values vals (f64). */
static double loss_at(const gcase *c, const double *vals, const int64_t *vshape, int vnd,
                      tgc_tensor *other, const double *r, int64_t nr)
{
    tgc_scope_push();
    tgc_tensor *v = from_doubles(vals, vshape, vnd, TGC_F64);
    tgc_tensor *y = apply_forward(c, v, other);
    if (!y)
        fail_msg("forward failed: %s", tgc_last_error());
    assert_int_equal(tgc_numel(y), nr);
    double *yv = values_of(y), l = 0;
    for (int64_t i = 0; i < nr; i++)
        l += yv[i] * r[i];
    free(yv);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    return l;
}

/* grad (f64, v's shape) is dL/dv by central differences. */
static void expect_fd(const gcase *c, const double *vals, const int64_t *vshape, int vnd,
                      tgc_tensor *other, const double *r, int64_t nr, const tgc_tensor *grad)
{
    int64_t n = numel_of(vshape, vnd);
    double *p = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(p);
    assert_non_null(want);
    memcpy(p, vals, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        p[i] = vals[i] + FD_H;
        double lp = loss_at(c, p, vshape, vnd, other, r, nr);
        p[i] = vals[i] - FD_H;
        double lm = loss_at(c, p, vshape, vnd, other, r, nr);
        p[i] = vals[i];
        want[i] = (lp - lm) / (2 * FD_H);
    }
    expect_values_near(grad, TGC_F64, vshape, vnd, want, FD_TOL, 1.0);
    free(p);
    free(want);
}

/* ---- compiled vs eager ---- */

static tgc_status grad_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = apply_grad(&g_case, in);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* got equals want bit for bit (rel 0), or within rel * (|want| + max |want|) where the
 * backend computes in f32 with its own summation order (LLVM's GEMM-based conv gradients). */
static void expect_same(const tgc_tensor *got, const tgc_tensor *want, double rel)
{
    assert_non_null(got);
    assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
    int64_t gs[TGC_MAX_DIMS], ws[TGC_MAX_DIMS];
    int nd = tgc_shape(want, ws);
    assert_int_equal(tgc_shape(got, gs), nd);
    for (int d = 0; d < nd; d++)
        assert_int_equal(gs[d], ws[d]);
    double *g = values_of(got), *w = values_of(want), wmax = 0;
    for (int64_t i = 0; i < tgc_numel(want); i++)
        wmax = fabs(w[i]) > wmax ? fabs(w[i]) : wmax;
    for (int64_t i = 0; i < tgc_numel(want); i++)
        if (!(g[i] == w[i] || (isnan(g[i]) && isnan(w[i])) ||
              fabs(g[i] - w[i]) <= rel * (fabs(w[i]) + wmax)))
            fail_msg("element %lld: compiled %.17g, eager %.17g", (long long)i, g[i], w[i]);
    free(g);
    free(w);
}

/* The grad op of c on in[0..n) through compiled functions (interp and default backends,
 * static and dynamic) equals eager (want): one compile each, and the graph holds the op. */
static void expect_compiled(const gcase *c, tgc_tensor *const *in, int n, const tgc_tensor *want,
                            const char *op_name)
{
    static const tgc_backend_kind backends[] = {TGC_BACKEND_INTERP, TGC_BACKEND_AUTO};
    static const tgc_dynamic dyn[] = {TGC_DYNAMIC_NEVER, TGC_DYNAMIC_ALWAYS};
    g_case = *c;
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 2; d++) {
            tgc_config cfg = tgc_config_default();
            cfg.backend = backends[b];
            cfg.dynamic = dyn[d];
            tgc_fn *f = tgc_compile(grad_model, op_name, &cfg);
            assert_non_null(f);
            tgc_tensor *y = NULL;
            tgc_status st = tgc_call(f, NULL, in, n, &y, 1);
            if (st != TGC_OK)
                fail_msg("%s compiled (backend %d, dynamic %d): %s", op_name, b, d,
                         tgc_last_error());
            /* interp is exact; the default backend's native conv gradients sum in f32 */
            expect_same(y, want, b == 0 ? 0.0 : 4e-6);
            tgc_stats s;
            assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
            assert_int_equal(s.compiles, 1);
            assert_int_equal(s.eager_fallbacks, 0);
            char *text = tgc_fn_graph(f, 0, 0);
            assert_non_null(text);
            char pat[64];
            snprintf(pat, sizeof pat, "%s(", op_name);
            if (!strstr(text, pat))
                fail_msg("the graph of %s lacks %s:\n%s", op_name, pat, text);
            tgc_free(text);
            tgc_tensor_free(y);
            tgc_fn_free(f);
        }
}

/* ---- conv2d ---- */

typedef struct conv_case {
    int64_t N, Ci, H, W, Co, KH, KW;
    tgc_attrs a;
} conv_case;

static int64_t conv_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d)
{
    return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* The naive conv gradients, as gathers: dx at (n, c, h, w) sums over the output positions and
 * taps that read it; dw at (co, cj, kh, kw) over the batch and output positions. */
static void naive_conv_grads(const conv_case *k, const double *x, const double *w, const double *dy,
                             double *dx, double *dw)
{
    const int64_t *i = k->a.i, G = i[6], cig = k->Ci / G, cog = k->Co / G;
    const int64_t OH = conv_out(k->H, k->KH, i[0], i[2], i[4]);
    const int64_t OW = conv_out(k->W, k->KW, i[1], i[3], i[5]);
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t c = 0; c < k->Ci; c++)
            for (int64_t h = 0; h < k->H; h++)
                for (int64_t ww = 0; ww < k->W; ww++) {
                    double s = 0;
                    int64_t g = c / cig;
                    for (int64_t co = g * cog; co < (g + 1) * cog; co++)
                        for (int64_t kh = 0; kh < k->KH; kh++)
                            for (int64_t kw = 0; kw < k->KW; kw++) {
                                int64_t th = h + i[2] - kh * i[4], tw = ww + i[3] - kw * i[5];
                                if (th < 0 || tw < 0 || th % i[0] || tw % i[1])
                                    continue;
                                int64_t oh = th / i[0], ow = tw / i[1];
                                if (oh >= OH || ow >= OW)
                                    continue;
                                s += dy[((n * k->Co + co) * OH + oh) * OW + ow] *
                                     w[((co * cig + c % cig) * k->KH + kh) * k->KW + kw];
                            }
                    dx[((n * k->Ci + c) * k->H + h) * k->W + ww] = s;
                }
    for (int64_t co = 0; co < k->Co; co++)
        for (int64_t cj = 0; cj < cig; cj++)
            for (int64_t kh = 0; kh < k->KH; kh++)
                for (int64_t kw = 0; kw < k->KW; kw++) {
                    double s = 0;
                    int64_t c = co / cog * cig + cj;
                    for (int64_t n = 0; n < k->N; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t h = oh * i[0] - i[2] + kh * i[4];
                                int64_t ww = ow * i[1] - i[3] + kw * i[5];
                                if (h >= 0 && h < k->H && ww >= 0 && ww < k->W)
                                    s += dy[((n * k->Co + co) * OH + oh) * OW + ow] *
                                         x[((n * k->Ci + c) * k->H + h) * k->W + ww];
                            }
                    dw[((co * cig + cj) * k->KH + kh) * k->KW + kw] = s;
                }
}

/* The values of v rounded to dt (as a tensor of dt stores them). */
static double *rounded(const double *v, int64_t n, tgc_dtype dt)
{
    double *r = malloc(sizeof(double) * (size_t)(n ? n : 1));
    unsigned char buf[8];
    assert_non_null(r);
    for (int64_t i = 0; i < n; i++) {
        tgc_store(buf, dt, 0, v[i]);
        r[i] = tgc_load(buf, dt, 0);
    }
    return r;
}

static const tgc_dtype float_dtypes[] = {TGC_F64, TGC_F32, TGC_F16, TGC_BF16};

static void check_conv_case(const conv_case *k)
{
    const int64_t *i = k->a.i;
    const int64_t OH = conv_out(k->H, k->KH, i[0], i[2], i[4]);
    const int64_t OW = conv_out(k->W, k->KW, i[1], i[3], i[5]);
    const int64_t xs[4] = {k->N, k->Ci, k->H, k->W}, ws[4] = {k->Co, k->Ci / i[6], k->KH, k->KW},
                  ys[4] = {k->N, k->Co, OH, OW};
    const int64_t nx = numel_of(xs, 4), nw = numel_of(ws, 4), ny = numel_of(ys, 4);
    double *x = rand_vals(nx), *w = rand_vals(nw), *dy = rand_vals(ny);
    for (int t = 0; t < N_OF(float_dtypes); t++) {
        tgc_dtype dt = float_dtypes[t];
        double *xr = rounded(x, nx, dt), *wr = rounded(w, nw, dt), *dyr = rounded(dy, ny, dt);
        double *dx = malloc(sizeof(double) * (size_t)nx), *dw = malloc(sizeof(double) * (size_t)nw);
        assert_non_null(dx);
        assert_non_null(dw);
        naive_conv_grads(k, xr, wr, dyr, dx, dw);
        tgc_tensor *X = from_doubles(x, xs, 4, dt), *Wt = from_doubles(w, ws, 4, dt),
                   *DY = from_doubles(dy, ys, 4, dt);
        tgc_tensor *gx = tgc_conv2d_grad_input(DY, Wt, &k->a, X);
        tgc_tensor *gw = tgc_conv2d_grad_weight(X, DY, &k->a, Wt);
        expect_near(gx, dt, xs, 4, dx, dtype_tol(dt));
        expect_near(gw, dt, ws, 4, dw, dtype_tol(dt));
        if (dt == TGC_F64) {
            gcase ci = {OP_CGI, k->a, 0}, cw = {OP_CGW, k->a, 0};
            expect_fd(&ci, x, xs, 4, Wt, dy, ny, gx);
            expect_fd(&cw, w, ws, 4, X, dy, ny, gw);
        }
        if (dt == TGC_F32) {
            gcase ci = {OP_CGI, k->a, 0}, cw = {OP_CGW, k->a, 0};
            expect_compiled(&ci, (tgc_tensor *[]){DY, Wt, X}, 3, gx, "conv2d_grad_input");
            expect_compiled(&cw, (tgc_tensor *[]){X, DY, Wt}, 3, gw, "conv2d_grad_weight");
        }
        free(xr);
        free(wr);
        free(dyr);
        free(dx);
        free(dw);
    }
    free(x);
    free(w);
    free(dy);
}

static void test_conv2d_grads_plain(void **state)
{
    (void)state;
    conv_case k = {2, 3, 5, 6, 4, 3, 3, conv_attrs(1, 1, 0, 0, 1, 1, 1)};
    check_conv_case(&k);
}

static void test_conv2d_grads_stride_pad_dilation_groups(void **state)
{
    (void)state;
    /* stride 2, padding, dilation 2, groups 2, a non-square kernel, odd sizes */
    conv_case k = {2, 4, 9, 7, 6, 3, 2, conv_attrs(2, 1, 1, 2, 2, 1, 2)};
    check_conv_case(&k);
    /* stride 2 that leaves an input row unread at the end (H = 9: the last row gets zero) */
    conv_case k2 = {1, 2, 9, 5, 2, 2, 3, conv_attrs(2, 2, 0, 1, 1, 2, 1)};
    check_conv_case(&k2);
}

static void test_conv2d_grads_depthwise(void **state)
{
    (void)state;
    conv_case k = {1, 3, 5, 4, 3, 3, 3, conv_attrs(2, 2, 1, 1, 1, 1, 3)};
    check_conv_case(&k);
}

/* Strided (transposed / sliced) operands read as their values say. */
static void test_conv2d_grads_strided_inputs(void **state)
{
    (void)state;
    conv_case k = {2, 2, 5, 5, 3, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1, 1)};
    const int64_t xs[4] = {2, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, ys[4] = {2, 3, 5, 5};
    double *x = rand_vals(100), *w = rand_vals(54), *dy = rand_vals(150);
    double *dx = malloc(sizeof(double) * 100), *dw = malloc(sizeof(double) * 54);
    assert_non_null(dx);
    assert_non_null(dw);
    naive_conv_grads(&k, x, w, dy, dx, dw);
    tgc_tensor *X = from_doubles(x, xs, 4, TGC_F32), *Wt = from_doubles(w, ws, 4, TGC_F32);
    /* dy as a transposed view: made [2, 3, W, H] contiguous, then its last dims swapped */
    double *dyt = malloc(sizeof(double) * 150);
    assert_non_null(dyt);
    for (int n = 0; n < 6; n++)
        for (int h = 0; h < 5; h++)
            for (int ww = 0; ww < 5; ww++)
                dyt[n * 25 + ww * 5 + h] = dy[n * 25 + h * 5 + ww];
    tgc_tensor *DYt = tgc_transpose(from_doubles(dyt, ys, 4, TGC_F32), 2, 3);
    assert_non_null(DYt);
    expect_near(tgc_conv2d_grad_input(DYt, Wt, &k.a, X), TGC_F32, xs, 4, dx, 1e-5);
    expect_near(tgc_conv2d_grad_weight(X, DYt, &k.a, Wt), TGC_F32, ws, 4, dw, 1e-5);
    free(x);
    free(w);
    free(dy);
    free(dyt);
    free(dx);
    free(dw);
}

static void test_conv2d_grads_empty(void **state)
{
    (void)state;
    tgc_attrs a = conv_attrs(1, 1, 1, 1, 1, 1, 1);
    tgc_tensor *x = tgc_zeros(SHAPE(0, 2, 4, 4), 4, TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_ones(SHAPE(3, 2, 3, 3), 4, TGC_F32, tgc_cpu());
    tgc_tensor *dy = tgc_ones(SHAPE(0, 3, 4, 4), 4, TGC_F32, tgc_cpu());
    tgc_tensor *gx = tgc_conv2d_grad_input(dy, w, &a, x);
    expect_shape(gx, SHAPE(0, 2, 4, 4), 4);
    /* an empty batch gives a zero weight gradient */
    tgc_tensor *gw = tgc_conv2d_grad_weight(x, dy, &a, w);
    double zeros[54] = {0};
    expect_near(gw, TGC_F32, SHAPE(3, 2, 3, 3), 4, zeros, 0);
}

/* ---- pools ---- */

typedef struct pool_case {
    int64_t lead[2];
    int nlead;
    int64_t H, W;
    tgc_attrs a; /* pool attrs (or adaptive: i[0], i[1] = out sizes) */
} pool_case;

static void pool_shapes(const pool_case *k, int adaptive, int64_t *xs, int64_t *ys, int *nd)
{
    const int64_t *i = k->a.i;
    int n = 0;
    for (; n < k->nlead; n++)
        xs[n] = ys[n] = k->lead[n];
    xs[n] = k->H;
    xs[n + 1] = k->W;
    ys[n] = adaptive ? i[0] : conv_out(k->H, i[0], i[2], i[4], 1);
    ys[n + 1] = adaptive ? i[1] : conv_out(k->W, i[1], i[3], i[5], 1);
    *nd = n + 2;
}

/* The naive pool gradients as gathers: dx at (h, w) sums dy over the windows that contain it
 * (max: those whose pick it is, found by a scan written here). */
static void naive_pool_grad(int op, const pool_case *k, const double *x, const double *dy,
                            double *dx)
{
    const int64_t *i = k->a.i;
    int64_t xs[4], ys[4];
    int nd;
    pool_shapes(k, op == OP_AAPG, xs, ys, &nd);
    const int64_t H = k->H, W = k->W, OH = ys[nd - 2], OW = ys[nd - 1];
    const int64_t planes = numel_of(xs, nd - 2);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                double s = 0;
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t h0, h1, w0, w1, cnt;
                        if (op == OP_AAPG) {
                            h0 = oh * H / OH;
                            h1 = ((oh + 1) * H + OH - 1) / OH;
                            w0 = ow * W / OW;
                            w1 = ((ow + 1) * W + OW - 1) / OW;
                            cnt = (h1 - h0) * (w1 - w0);
                        } else {
                            int64_t ph0 = oh * i[2] - i[4], pw0 = ow * i[3] - i[5];
                            int64_t ph1 = ph0 + i[0], pw1 = pw0 + i[1];
                            h0 = ph0 < 0 ? 0 : ph0;
                            w0 = pw0 < 0 ? 0 : pw0;
                            h1 = ph1 > H ? H : ph1;
                            w1 = pw1 > W ? W : pw1;
                            if (i[6]) /* exclude_padding: the taps inside x */
                                cnt = (h1 - h0) * (w1 - w0);
                            else /* the window clipped to the padded input */
                                cnt = ((ph1 > H + i[4] ? H + i[4] : ph1) - ph0) *
                                      ((pw1 > W + i[5] ? W + i[5] : pw1) - pw0);
                        }
                        if (h < h0 || h >= h1 || w < w0 || w >= w1)
                            continue;
                        double g = dy[(p * OH + oh) * OW + ow];
                        if (op != OP_MPG) {
                            s += g / (double)cnt;
                            continue;
                        }
                        /* the pick: first strict maximum scanning rows then columns, or
                         * the last NaN */
                        int64_t ph = h0, pw = w0;
                        int nan_seen = 0;
                        for (int64_t a = h0; a < h1; a++)
                            for (int64_t b = w0; b < w1; b++) {
                                double e = x[(p * H + a) * W + b];
                                double best = x[(p * H + ph) * W + pw];
                                if (isnan(e)) {
                                    nan_seen = 1;
                                    ph = a;
                                    pw = b;
                                } else if (!nan_seen && e > best) {
                                    ph = a;
                                    pw = b;
                                }
                            }
                        if (ph == h && pw == w)
                            s += g;
                    }
                dx[(p * H + h) * W + w] = s;
            }
}

static void check_pool_case(int op, const pool_case *k)
{
    int64_t xs[4], ys[4];
    int nd;
    pool_shapes(k, op == OP_AAPG, xs, ys, &nd);
    const int64_t nx = numel_of(xs, nd), ny = numel_of(ys, nd);
    double *x = distinct_vals(nx), *dy = rand_vals(ny);
    gcase c = {op, k->a, 0};
    static const char *const names[] = {[OP_MPG] = "max_pool2d_grad",
                                        [OP_APG] = "avg_pool2d_grad",
                                        [OP_AAPG] = "adaptive_avg_pool2d_grad"};
    for (int t = 0; t < N_OF(float_dtypes); t++) {
        tgc_dtype dt = float_dtypes[t];
        double *xr = rounded(x, nx, dt), *dyr = rounded(dy, ny, dt);
        double *dx = malloc(sizeof(double) * (size_t)nx);
        assert_non_null(dx);
        naive_pool_grad(op, k, xr, dyr, dx);
        tgc_tensor *X = from_doubles(x, xs, nd, dt), *DY = from_doubles(dy, ys, nd, dt);
        tgc_tensor *in[2] = {op == OP_MPG ? X : DY, op == OP_MPG ? DY : X};
        tgc_tensor *g = apply_grad(&c, in);
        expect_near(g, dt, xs, nd, dx, dtype_tol(dt));
        if (dt == TGC_F64)
            expect_fd(&c, x, xs, nd, NULL, dy, ny, g);
        if (dt == TGC_F32)
            expect_compiled(&c, in, 2, g, names[op]);
        free(xr);
        free(dyr);
        free(dx);
    }
    free(x);
    free(dy);
}

static void test_max_pool2d_grad(void **state)
{
    (void)state;
    pool_case k = {{2, 3}, 2, 7, 8, pool_attrs(3, 3, 2, 2, 1, 1, 0)};
    check_pool_case(OP_MPG, &k);
    pool_case k2 = {{3}, 1, 6, 7, pool_attrs(2, 3, 1, 2, 1, 0, 0)}; /* 3-d x, overlapping */
    check_pool_case(OP_MPG, &k2);
}

/* Ties go to the first maximum in row-major window order; a NaN takes the gradient (the last
 * NaN of its window), as PyTorch's max_pool2d does. */
static void test_max_pool2d_grad_ties_and_nan(void **state)
{
    (void)state;
    tgc_attrs a = pool_attrs(2, 2, 2, 2, 0, 0, 0);
    /* window (0,0): all 1 -> (0,0); (0,1): 5 at (0,3) and (1,2) -> (0,3);
     * (1,0): NaN at (2,1) and (3,0) -> (3,0); (1,1): -inf everywhere -> the first, (2,2) */
    const double xv[16] = {1, 1,   2,         5,         1,   1, 5,         3,
                           0, NAN, -INFINITY, -INFINITY, NAN, 9, -INFINITY, -INFINITY};
    const double dyv[4] = {10, 20, 30, 40};
    const double want[16] = {10, 0, 0, 20, 0, 0, 0, 0, 0, 0, 40, 0, 30, 0, 0, 0};
    for (int t = 0; t < N_OF(float_dtypes); t++) {
        tgc_dtype dt = float_dtypes[t];
        tgc_tensor *x = from_doubles(xv, SHAPE(1, 4, 4), 3, dt);
        tgc_tensor *dy = from_doubles(dyv, SHAPE(1, 2, 2), 3, dt);
        expect_near(tgc_max_pool2d_grad(x, dy, &a), dt, SHAPE(1, 4, 4), 3, want, 0);
    }
    /* padding: the padded taps never win, and overlapping windows add up */
    tgc_attrs b = pool_attrs(3, 3, 1, 1, 1, 1, 0);
    const double x2[4] = {3, 3, 3, 3}, ones[4] = {1, 1, 1, 1}, w2[4] = {4, 0, 0, 0};
    expect_near(tgc_max_pool2d_grad(from_doubles(x2, SHAPE(1, 1, 2, 2), 4, TGC_F32),
                                    from_doubles(ones, SHAPE(1, 1, 2, 2), 4, TGC_F32), &b),
                TGC_F32, SHAPE(1, 1, 2, 2), 4, w2, 0);
}

static void test_avg_pool2d_grad(void **state)
{
    (void)state;
    pool_case k = {{2, 3}, 2, 7, 8, pool_attrs(3, 2, 2, 1, 1, 0, 0)};
    check_pool_case(OP_APG, &k);
    pool_case kx = {{2, 3}, 2, 7, 8, pool_attrs(3, 3, 2, 2, 1, 1, 1)}; /* exclude_padding */
    check_pool_case(OP_APG, &kx);
    pool_case k3 = {{1}, 1, 5, 6, pool_attrs(2, 3, 2, 2, 1, 1, 0)}; /* 3-d */
    check_pool_case(OP_APG, &k3);
}

static void test_adaptive_avg_pool2d_grad(void **state)
{
    (void)state;
    pool_case k = {{2, 3}, 2, 7, 8, {.i = {3, 5}, .ni = 2}}; /* overlapping windows */
    check_pool_case(OP_AAPG, &k);
    pool_case k1 = {{2}, 1, 5, 3, {.i = {1, 1}, .ni = 2}}; /* global */
    check_pool_case(OP_AAPG, &k1);
    pool_case kb = {{1, 2}, 2, 3, 4, {.i = {5, 6}, .ni = 2}}; /* larger than the input */
    check_pool_case(OP_AAPG, &kb);
}

static void test_pool_grads_empty(void **state)
{
    (void)state;
    tgc_attrs a = pool_attrs(2, 2, 2, 2, 0, 0, 0);
    tgc_tensor *x = tgc_zeros(SHAPE(0, 3, 4, 4), 4, TGC_F32, tgc_cpu());
    tgc_tensor *dy = tgc_zeros(SHAPE(0, 3, 2, 2), 4, TGC_F32, tgc_cpu());
    expect_shape(tgc_max_pool2d_grad(x, dy, &a), SHAPE(0, 3, 4, 4), 4);
    expect_shape(tgc_avg_pool2d_grad(dy, &a, x), SHAPE(0, 3, 4, 4), 4);
    tgc_attrs ad = {.i = {2, 2}, .ni = 2};
    expect_shape(tgc_adaptive_avg_pool2d_grad(dy, &ad, x), SHAPE(0, 3, 4, 4), 4);
}

/* ---- scatter-adds ---- */

static void test_embedding_grad(void **state)
{
    (void)state;
    const int64_t V = 7, D = 5, is[2] = {3, 4}, ds[3] = {3, 4, 5}, wsh[2] = {7, 5};
    int64_t ids[12];
    for (int p = 0; p < 12; p++)
        ids[p] = (p * 5 + 3) % 6; /* repeats; row 6 never used */
    double *w = rand_vals(V * D), *dy = rand_vals(12 * D);
    gcase c = {OP_EG, {.ni = 0}, 0};
    for (int it = 0; it < 2; it++) {
        tgc_tensor *idx = idx_tensor(ids, is, 2, it ? TGC_I32 : TGC_I64);
        for (int t = 0; t < N_OF(float_dtypes); t++) {
            tgc_dtype dt = float_dtypes[t];
            double *dyr = rounded(dy, 12 * D, dt), want[35];
            for (int64_t v = 0; v < V; v++) /* a gather over the positions naming row v */
                for (int64_t d = 0; d < D; d++) {
                    double s = 0;
                    for (int p = 0; p < 12; p++)
                        s += ids[p] == v ? dyr[p * D + d] : 0;
                    want[v * D + d] = s;
                }
            tgc_tensor *W = from_doubles(w, wsh, 2, dt), *DY = from_doubles(dy, ds, 3, dt);
            tgc_tensor *g = tgc_embedding_grad(DY, idx, W);
            expect_near(g, dt, wsh, 2, want, dtype_tol(dt));
            if (dt == TGC_F64)
                expect_fd(&c, w, wsh, 2, idx, dy, 12 * D, g);
            if (dt == TGC_F32 && it == 0)
                expect_compiled(&c, (tgc_tensor *[]){DY, idx, W}, 3, g, "embedding_grad");
            free(dyr);
        }
    }
    free(w);
    free(dy);
}

static void test_gather_grad(void **state)
{
    (void)state;
    const int64_t ts[3] = {3, 5, 4}, is[3] = {2, 6, 3}; /* idx larger than t at dim 1 */
    int64_t ids[36];
    for (int p = 0; p < 36; p++)
        ids[p] = (p * 7 + 2) % 5;
    double *t = rand_vals(60), *dy = rand_vals(36);
    for (int dim = -2; dim <= 1; dim += 3) { /* dim -2 (= 1) and 1 */
        gcase c = {OP_GG, {.ni = 0}, dim};
        tgc_tensor *idx = idx_tensor(ids, is, 3, TGC_I64);
        for (int k = 0; k < N_OF(float_dtypes); k++) {
            tgc_dtype dt = float_dtypes[k];
            double *dyr = rounded(dy, 36, dt), want[60];
            for (int a = 0; a < 3; a++) /* a gather over the positions that read (a, b, e) */
                for (int b = 0; b < 5; b++)
                    for (int e = 0; e < 4; e++) {
                        double s = 0;
                        for (int pa = 0; pa < 2; pa++)
                            for (int pb = 0; pb < 6; pb++)
                                for (int pe = 0; pe < 3; pe++) {
                                    int p = (pa * 6 + pb) * 3 + pe;
                                    if (pa == a && pe == e && ids[p] == b)
                                        s += dyr[p];
                                }
                        want[(a * 5 + b) * 4 + e] = s;
                    }
            tgc_tensor *T = from_doubles(t, ts, 3, dt), *DY = from_doubles(dy, is, 3, dt);
            tgc_tensor *g = tgc_gather_grad(DY, idx, dim, T);
            expect_near(g, dt, ts, 3, want, dtype_tol(dt));
            if (dt == TGC_F64)
                expect_fd(&c, t, ts, 3, idx, dy, 36, g);
            if (dt == TGC_F32)
                expect_compiled(&c, (tgc_tensor *[]){DY, idx, T}, 3, g, "gather_grad");
            free(dyr);
        }
    }
    /* dim 0 on a 2-d t, and a 0-d t */
    const double d2[2] = {1.5, -2}, w2[6] = {0, -2, 1.5, 0, 0, 0};
    tgc_tensor *g2 = tgc_gather_grad(from_doubles(d2, SHAPE(1, 2), 2, TGC_F32),
                                     idx_tensor((const int64_t[]){1, 0}, SHAPE(1, 2), 2, TGC_I32),
                                     0, tgc_zeros(SHAPE(3, 2), 2, TGC_F32, tgc_cpu()));
    expect_near(g2, TGC_F32, SHAPE(3, 2), 2, w2, 0);
    const double d0[1] = {4};
    tgc_tensor *g0 = tgc_gather_grad(from_doubles(d0, NULL, 0, TGC_F32),
                                     idx_tensor((const int64_t[]){0}, NULL, 0, TGC_I64), -1,
                                     tgc_zeros(NULL, 0, TGC_F32, tgc_cpu()));
    expect_near(g0, TGC_F32, NULL, 0, d0, 0);
    free(t);
    free(dy);
}

static void test_index_select_grad(void **state)
{
    (void)state;
    const int64_t ts[3] = {4, 5, 3}, ds[3] = {4, 7, 3}, is[1] = {7};
    const int64_t ids[7] = {4, 0, 4, 2, 4, 0, 1}; /* repeats; 3 never selected */
    double *t = rand_vals(60), *dy = rand_vals(84);
    gcase c = {OP_ISG, {.ni = 0}, -2};
    tgc_tensor *idx = idx_tensor(ids, is, 1, TGC_I32);
    for (int k = 0; k < N_OF(float_dtypes); k++) {
        tgc_dtype dt = float_dtypes[k];
        double *dyr = rounded(dy, 84, dt), want[60];
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 5; b++)
                for (int e = 0; e < 3; e++) {
                    double s = 0;
                    for (int j = 0; j < 7; j++)
                        s += ids[j] == b ? dyr[(a * 7 + j) * 3 + e] : 0;
                    want[(a * 5 + b) * 3 + e] = s;
                }
        tgc_tensor *T = from_doubles(t, ts, 3, dt), *DY = from_doubles(dy, ds, 3, dt);
        tgc_tensor *g = tgc_index_select_grad(DY, idx, -2, T);
        expect_near(g, dt, ts, 3, want, dtype_tol(dt));
        if (dt == TGC_F64)
            expect_fd(&c, t, ts, 3, idx, dy, 84, g);
        if (dt == TGC_F32)
            expect_compiled(&c, (tgc_tensor *[]){DY, idx, T}, 3, g, "index_select_grad");
        free(dyr);
    }
    /* a 0-d idx selects one slice (dy keeps the dim with size 1) */
    const double d1[2] = {3, 5}, w1[6] = {0, 0, 0, 0, 3, 5};
    tgc_tensor *g1 = tgc_index_select_grad(from_doubles(d1, SHAPE(1, 2), 2, TGC_F32),
                                           idx_tensor((const int64_t[]){2}, NULL, 0, TGC_I64), 0,
                                           tgc_zeros(SHAPE(3, 2), 2, TGC_F32, tgc_cpu()));
    expect_near(g1, TGC_F32, SHAPE(3, 2), 2, w1, 0);
    free(t);
    free(dy);
}

static void test_scatter_grads_empty(void **state)
{
    (void)state;
    double zeros[12] = {0};
    tgc_tensor *w = tgc_ones(SHAPE(4, 3), 2, TGC_F32, tgc_cpu());
    /* no indices: a zero gradient */
    tgc_tensor *idx0 = tgc_zeros(SHAPE(0), 1, TGC_I64, tgc_cpu());
    tgc_tensor *dy0 = tgc_zeros(SHAPE(0, 3), 2, TGC_F32, tgc_cpu());
    expect_near(tgc_embedding_grad(dy0, idx0, w), TGC_F32, SHAPE(4, 3), 2, zeros, 0);
    expect_near(tgc_index_select_grad(dy0, idx0, 0, w), TGC_F32, SHAPE(4, 3), 2, zeros, 0);
    tgc_tensor *gi = tgc_zeros(SHAPE(4, 0), 2, TGC_I64, tgc_cpu());
    expect_near(tgc_gather_grad(tgc_zeros(SHAPE(4, 0), 2, TGC_F32, tgc_cpu()), gi, 1, w), TGC_F32,
                SHAPE(4, 3), 2, zeros, 0);
    /* an empty result with indices: still checked, as the forward checks them */
    tgc_tensor *we = tgc_ones(SHAPE(4, 0), 2, TGC_F32, tgc_cpu());
    tgc_tensor *idx = idx_tensor((const int64_t[]){1, 3}, SHAPE(2), 1, TGC_I64);
    expect_shape(tgc_embedding_grad(tgc_zeros(SHAPE(2, 0), 2, TGC_F32, tgc_cpu()), idx, we),
                 SHAPE(4, 0), 2);
    tgc_tensor *bad = idx_tensor((const int64_t[]){1, 4}, SHAPE(2), 1, TGC_I64);
    expect_error(tgc_embedding_grad(tgc_zeros(SHAPE(2, 0), 2, TGC_F32, tgc_cpu()), bad, we),
                 TGC_ERR_INVALID_ARG, "index 4 out of range [0, 4) at position 1");
}

/* ---- symbolic sizes: one dynamic variant serves several sizes ---- */

static void test_dynamic_sizes_one_compile(void **state)
{
    (void)state;
    g_case = (gcase){OP_CGI, conv_attrs(2, 2, 1, 0, 1, 1, 1), 0};
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_INTERP;
    cfg.dynamic = TGC_DYNAMIC_ALWAYS;
    tgc_fn *f = tgc_compile(grad_model, "conv_grad_dyn", &cfg);
    assert_non_null(f);
    const int64_t Hs[2] = {9, 13};
    for (int r = 0; r < 2; r++) {
        int64_t H = Hs[r], OH = conv_out(H, 3, 2, 1, 1), OW = conv_out(6, 2, 2, 0, 1);
        tgc_tensor *x = tgc_zeros(SHAPE(2, 3, H, 6), 4, TGC_F32, tgc_cpu());
        tgc_tensor *w = tgc_randn(SHAPE(4, 3, 3, 2), 4, TGC_F32, tgc_cpu());
        tgc_tensor *dy = tgc_randn(SHAPE(2, 4, OH, OW), 4, TGC_F32, tgc_cpu());
        tgc_tensor *want = tgc_conv2d_grad_input(dy, w, &g_case.a, x), *got = NULL;
        assert_int_equal(tgc_call(f, NULL, (tgc_tensor *[]){dy, w, x}, 3, &got, 1), TGC_OK);
        expect_same(got, want, 4e-6); /* the default backend: f32 sums */
    }
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 1);
    /* the graph prints the input height as a symbol */
    char *text = tgc_fn_graph(f, 0, 0);
    assert_non_null(text);
    const char *node = strstr(text, "conv2d_grad_input(");
    assert_non_null(node);
    const char *attrs = strstr(node, "i=2,2,1,0,1,1,1,s");
    if (!attrs)
        fail_msg("no symbolic height in the attributes:\n%s", text);
    tgc_free(text);
    tgc_fn_free(f);
}

/* ---- error paths ---- */

static void test_builder_errors(void **state)
{
    (void)state;
    tgc_attrs ca = conv_attrs(1, 1, 0, 0, 1, 1, 1), pa = pool_attrs(2, 2, 2, 2, 0, 0, 0);
    tgc_tensor *x = tgc_zeros(SHAPE(1, 2, 5, 5), 4, TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_zeros(SHAPE(3, 2, 3, 3), 4, TGC_F32, tgc_cpu());
    tgc_tensor *dy = tgc_zeros(SHAPE(1, 3, 3, 3), 4, TGC_F32, tgc_cpu());
    tgc_tensor *dy3 = tgc_zeros(SHAPE(3, 3, 3), 3, TGC_F32, tgc_cpu());
    tgc_tensor *dyi = tgc_zeros(SHAPE(1, 3, 3, 3), 4, TGC_I32, tgc_cpu());
    tgc_tensor *dyh = tgc_zeros(SHAPE(1, 3, 3, 3), 4, TGC_F16, tgc_cpu());
    tgc_tensor *x3 = tgc_zeros(SHAPE(2, 5, 5), 3, TGC_F32, tgc_cpu());

    /* wrong ranks: TGC_ERR_SHAPE */
    expect_error(tgc_conv2d_grad_input(dy3, w, &ca, x), TGC_ERR_SHAPE,
                 "tgc_conv2d_grad_input: dy must have 4 dims");
    expect_error(tgc_conv2d_grad_input(dy, w, &ca, x3), TGC_ERR_SHAPE,
                 "tgc_conv2d_grad_input: x_like must have 4 dims");
    expect_error(tgc_conv2d_grad_weight(x3, dy, &ca, w), TGC_ERR_SHAPE,
                 "tgc_conv2d_grad_weight: x must have 4 dims");
    expect_error(tgc_conv2d_grad_weight(x, dy, &ca, x3), TGC_ERR_SHAPE,
                 "tgc_conv2d_grad_weight: w_like must have 4 dims");
    expect_error(tgc_max_pool2d_grad(x, dy3, &pa), TGC_ERR_SHAPE,
                 "tgc_max_pool2d_grad: dy [3, 3, 3] must have the rank of x");
    expect_error(tgc_avg_pool2d_grad(tgc_zeros(SHAPE(4, 4), 2, TGC_F32, tgc_cpu()), &pa, x),
                 TGC_ERR_SHAPE, "tgc_avg_pool2d_grad: dy must have 3 to 4 dims");
    expect_error(tgc_adaptive_avg_pool2d_grad(dy, &(tgc_attrs){.i = {3, 3}, .ni = 2},
                                              tgc_zeros(SHAPE(5, 5), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_SHAPE, "tgc_adaptive_avg_pool2d_grad: x_like must have 3 to 4 dims");
    expect_error(tgc_embedding_grad(dy, tgc_zeros(SHAPE(3), 1, TGC_I64, tgc_cpu()), x3),
                 TGC_ERR_SHAPE, "tgc_embedding_grad: weight_like must have 2 dims");
    expect_error(tgc_index_select_grad(x3, tgc_zeros(SHAPE(2, 1), 2, TGC_I64, tgc_cpu()), 0, x3),
                 TGC_ERR_SHAPE, "tgc_index_select_grad: idx must have 0 to 1 dims");

    /* wrong dtypes: TGC_ERR_DTYPE */
    expect_error(tgc_conv2d_grad_input(dyi, tgc_zeros(SHAPE(3, 2, 3, 3), 4, TGC_I32, tgc_cpu()),
                                       &ca, tgc_zeros(SHAPE(1, 2, 5, 5), 4, TGC_I32, tgc_cpu())),
                 TGC_ERR_DTYPE, "dy must be a float tensor, got i32");
    expect_error(
        tgc_conv2d_grad_input(dyh, w, &ca, tgc_zeros(SHAPE(1, 2, 5, 5), 4, TGC_F16, tgc_cpu())),
        TGC_ERR_DTYPE, "dtypes differ: dy is f16, weight is f32");
    expect_error(tgc_conv2d_grad_input(dyh, w, &ca, x), TGC_ERR_DTYPE,
                 "tgc_conv2d_grad_input: dy is f16 but x_like is f32");
    expect_error(tgc_conv2d_grad_weight(x, dyh, &ca, w), TGC_ERR_DTYPE,
                 "tgc_conv2d_grad_weight: dy is f16 but w_like is f32");
    expect_error(tgc_max_pool2d_grad(x, tgc_zeros(SHAPE(1, 2, 2, 2), 4, TGC_F64, tgc_cpu()), &pa),
                 TGC_ERR_DTYPE, "tgc_max_pool2d_grad: dtypes differ: x is f32, dy is f64");
    expect_error(tgc_embedding_grad(tgc_zeros(SHAPE(3, 4), 2, TGC_F32, tgc_cpu()),
                                    tgc_zeros(SHAPE(3), 1, TGC_F32, tgc_cpu()),
                                    tgc_zeros(SHAPE(5, 4), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_DTYPE, "tgc_embedding_grad: idx must be i32 or i64, got f32");
    expect_error(tgc_gather_grad(tgc_zeros(SHAPE(3), 1, TGC_I64, tgc_cpu()),
                                 tgc_zeros(SHAPE(3), 1, TGC_I64, tgc_cpu()), 0,
                                 tgc_zeros(SHAPE(3), 1, TGC_I64, tgc_cpu())),
                 TGC_ERR_DTYPE, "tgc_gather_grad: dy must be a float tensor, got i64");
    expect_error(tgc_index_select_grad(dy, tgc_zeros(SHAPE(3), 1, TGC_F32, tgc_cpu()), 1,
                                       tgc_zeros(SHAPE(1, 5, 3, 3), 4, TGC_F32, tgc_cpu())),
                 TGC_ERR_DTYPE, "tgc_index_select_grad: idx must be i32 or i64, got f32");

    /* shapes that do not belong to the forward op */
    expect_error(
        tgc_conv2d_grad_input(tgc_zeros(SHAPE(1, 3, 4, 3), 4, TGC_F32, tgc_cpu()), w, &ca, x),
        TGC_ERR_SHAPE, "dy [1, 3, 4, 3] has 4 positions along the height");
    expect_error(
        tgc_conv2d_grad_input(tgc_zeros(SHAPE(1, 4, 3, 3), 4, TGC_F32, tgc_cpu()), w, &ca, x),
        TGC_ERR_SHAPE, "has 4 channels but weight");
    expect_error(
        tgc_conv2d_grad_weight(tgc_zeros(SHAPE(2, 2, 5, 5), 4, TGC_F32, tgc_cpu()), dy, &ca, w),
        TGC_ERR_SHAPE, "batch sizes differ");
    expect_error(
        tgc_conv2d_grad_weight(x, dy, &ca, tgc_zeros(SHAPE(3, 2, 2, 2), 4, TGC_F32, tgc_cpu())),
        TGC_ERR_SHAPE, "along the height");
    tgc_attrs g2 = conv_attrs(1, 1, 0, 0, 1, 1, 2);
    expect_error(
        tgc_conv2d_grad_input(dy, tgc_zeros(SHAPE(3, 1, 3, 3), 4, TGC_F32, tgc_cpu()), &g2, x),
        TGC_ERR_SHAPE, "groups (2) must divide the 3 channels of weight");
    expect_error(tgc_max_pool2d_grad(x, tgc_zeros(SHAPE(1, 2, 3, 2), 4, TGC_F32, tgc_cpu()), &pa),
                 TGC_ERR_SHAPE, "has 3 positions along the height");
    expect_error(tgc_adaptive_avg_pool2d_grad(tgc_zeros(SHAPE(1, 2, 2, 3), 4, TGC_F32, tgc_cpu()),
                                              &(tgc_attrs){.i = {3, 3}, .ni = 2}, x),
                 TGC_ERR_SHAPE, "must end in the output size [3, 3]");
    expect_error(tgc_embedding_grad(tgc_zeros(SHAPE(3, 4), 2, TGC_F32, tgc_cpu()),
                                    tgc_zeros(SHAPE(2), 1, TGC_I64, tgc_cpu()),
                                    tgc_zeros(SHAPE(5, 4), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_SHAPE, "dy [3, 4] must be idx's shape [2] and one more dim");
    expect_error(tgc_gather_grad(tgc_zeros(SHAPE(2, 3), 2, TGC_F32, tgc_cpu()),
                                 tgc_zeros(SHAPE(2, 3), 2, TGC_I64, tgc_cpu()), 0,
                                 tgc_zeros(SHAPE(4, 2), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_SHAPE, "no larger dims than t [4, 2] outside dim 0");
    expect_error(tgc_gather_grad(tgc_zeros(SHAPE(2, 3), 2, TGC_F32, tgc_cpu()),
                                 tgc_zeros(SHAPE(2, 2), 2, TGC_I64, tgc_cpu()), 0,
                                 tgc_zeros(SHAPE(4, 3), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_SHAPE, "dy [2, 3] must have idx's shape [2, 2]");
    expect_error(tgc_index_select_grad(tgc_zeros(SHAPE(2, 3), 2, TGC_F32, tgc_cpu()),
                                       tgc_zeros(SHAPE(2), 1, TGC_I64, tgc_cpu()), 1,
                                       tgc_zeros(SHAPE(2, 5), 2, TGC_F32, tgc_cpu())),
                 TGC_ERR_SHAPE, "dy [2, 3] must have idx's 2 entries at dim 1");

    /* bad attributes and arguments: TGC_ERR_INVALID_ARG */
    tgc_attrs s0 = conv_attrs(0, 1, 0, 0, 1, 1, 1);
    expect_error(tgc_conv2d_grad_input(dy, w, &s0, x), TGC_ERR_INVALID_ARG,
                 "tgc_conv2d_grad_input: stride must be >= 1, got 0");
    tgc_attrs ex = pool_attrs(2, 2, 2, 2, 0, 0, 1);
    expect_error(tgc_max_pool2d_grad(x, tgc_zeros(SHAPE(1, 2, 2, 2), 4, TGC_F32, tgc_cpu()), &ex),
                 TGC_ERR_INVALID_ARG, "exclude_padding must be 0 or 1 and applies to avg_pool2d");
    tgc_attrs bigpad = pool_attrs(2, 2, 2, 2, 2, 0, 0);
    expect_error(
        tgc_avg_pool2d_grad(tgc_zeros(SHAPE(1, 2, 4, 2), 4, TGC_F32, tgc_cpu()), &bigpad, x),
        TGC_ERR_INVALID_ARG, "padding (2, 0) must be at most half the kernel");
    expect_error(tgc_conv2d_grad_input(dy, w, NULL, x), TGC_ERR_INVALID_ARG,
                 "tgc_conv2d_grad_input: conv_attrs is NULL");
    expect_error(tgc_conv2d_grad_input(dy, w, &(tgc_attrs){.ni = 3}, x), TGC_ERR_INVALID_ARG,
                 "conv_attrs has 3 integer attributes, expected 7");
    expect_error(tgc_conv2d_grad_input(dy, w, &ca, NULL), TGC_ERR_INVALID_ARG,
                 "tgc_conv2d_grad_input: x_like is NULL");
    expect_error(tgc_avg_pool2d_grad(dy, NULL, x), TGC_ERR_INVALID_ARG, "pool_attrs is NULL");
    expect_error(tgc_gather_grad(x3, tgc_zeros(SHAPE(2, 5, 5), 3, TGC_I64, tgc_cpu()), 3, x3),
                 TGC_ERR_INVALID_ARG, "tgc_gather_grad: dim 3 is out of range for a 3-d tensor");
    expect_error(tgc_index_select_grad(x3, tgc_zeros(SHAPE(2), 1, TGC_I64, tgc_cpu()), -4, x3),
                 TGC_ERR_INVALID_ARG, "dim -4 is out of range");

    /* a NULL tensor input keeps the first error */
    tgc_set_error(TGC_ERR_OOM, "an earlier failure");
    expect_error(tgc_conv2d_grad_weight(NULL, dy, &ca, w), TGC_ERR_OOM, "an earlier failure");
    tgc_set_error(TGC_ERR_SHAPE, "an earlier failure");
    expect_error(tgc_embedding_grad(dy, NULL, NULL), TGC_ERR_SHAPE, "an earlier failure");
    tgc_clear_error();
    expect_error(tgc_max_pool2d_grad(x, NULL, &pa), TGC_ERR_INVALID_ARG, "input 1 is NULL");
}

/* Indices outside [0, size) fail at run time as the forward ops do (negative ones too),
 * eagerly and compiled. */
static void test_index_out_of_range(void **state)
{
    (void)state;
    tgc_tensor *w = tgc_zeros(SHAPE(4, 2), 2, TGC_F32, tgc_cpu());
    tgc_tensor *neg = idx_tensor((const int64_t[]){1, -1, 2}, SHAPE(3), 1, TGC_I64);
    tgc_tensor *big = idx_tensor((const int64_t[]){0, 4, 2}, SHAPE(3), 1, TGC_I32);
    tgc_tensor *dy = tgc_ones(SHAPE(3, 2), 2, TGC_F32, tgc_cpu());
    /* the forward's own message for the same index */
    expect_error(tgc_embedding(w, neg), TGC_ERR_INVALID_ARG,
                 "index -1 out of range [0, 4) at position 1");
    expect_error(tgc_embedding_grad(dy, neg, w), TGC_ERR_INVALID_ARG,
                 "tgc_embedding_grad: index -1 out of range [0, 4) at position 1");
    expect_error(tgc_embedding_grad(dy, big, w), TGC_ERR_INVALID_ARG,
                 "tgc_embedding_grad: index 4 out of range [0, 4) at position 1");
    tgc_tensor *dys = tgc_ones(SHAPE(3, 2), 2, TGC_F32, tgc_cpu());
    expect_error(tgc_index_select_grad(dys, neg, 0, w), TGC_ERR_INVALID_ARG,
                 "tgc_index_select_grad: index -1 out of range [0, 4) at position 1");
    tgc_tensor *gi = idx_tensor((const int64_t[]){0, 1, 2, 1, 1, 2}, SHAPE(3, 2), 2, TGC_I64);
    expect_error(tgc_gather_grad(dys, gi, 1, w), TGC_ERR_INVALID_ARG,
                 "tgc_gather_grad: index 2 out of range [0, 2) at position 2");
    /* compiled: the call fails with the same status */
    g_case = (gcase){OP_EG, {.ni = 0}, 0};
    tgc_config cfg = tgc_config_default();
    tgc_fn *f = tgc_compile(grad_model, "embedding_grad_oob", &cfg);
    assert_non_null(f);
    tgc_tensor *y = NULL;
    assert_int_equal(tgc_call(f, NULL, (tgc_tensor *[]){dy, big, w}, 3, &y, 1),
                     TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "index 4 out of range [0, 4)"));
    assert_null(y);
    tgc_clear_error();
    tgc_fn_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv2d_grads_plain, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_grads_stride_pad_dilation_groups, scope_setup,
                                        scope_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_grads_depthwise, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_grads_strided_inputs, scope_setup,
                                        scope_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_grads_empty, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_max_pool2d_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_max_pool2d_grad_ties_and_nan, scope_setup,
                                        scope_teardown),
        cmocka_unit_test_setup_teardown(test_avg_pool2d_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_adaptive_avg_pool2d_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_pool_grads_empty, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_embedding_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_gather_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_index_select_grad, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_grads_empty, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_sizes_one_compile, scope_setup,
                                        scope_teardown),
        cmocka_unit_test_setup_teardown(test_builder_errors, scope_setup, scope_teardown),
        cmocka_unit_test_setup_teardown(test_index_out_of_range, scope_setup, scope_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
