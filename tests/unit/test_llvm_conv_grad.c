/* The LLVM backend's f32 conv2d backward kernels (runtime/conv_grad.h over the JIT'd GEMM
 * pieces; CONV2D_GRAD_INPUT / CONV2D_GRAD_WEIGHT through the backend's run_node):
 *   - the drivers against naive double-accumulating references on odd shapes: kernels 1x1,
 *     3x3, 5x3, 7x7, strides 1/2/3, padding (also wider than the dilated kernel), dilation,
 *     groups 1/2/depthwise, batch 1..5, ResNet18 and seed-CNN layer shapes, 1 and 2 threads;
 *   - the same bits for every thread count;
 *   - the ops against interp, eagerly and compiled (symbolic batch and spatial sizes);
 *   - the native pool backward ops (max with ties and NaN, avg with and without padding
 *     counted, adaptive) bit for bit against interp, and EMBEDDING_GRAD, compiled; an
 *     out-of-range index still fails as interp says;
 *   - error statuses.
 * Skipped when built without LLVM. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TGC_HAVE_LLVM
#include "backend/eager.h"
#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_conv_grad.h"
#include "backend/plan.h"
#include "frontend/apply.h"
#include "frontend/ops_grad.h"
#include "runtime/conv_grad.h"
#include "support/error.h"
#include "tensor/tensor_impl.h"
#include "tgc/tgc.h"

static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 2047) / 1024.0f - 1.0f;
    }
}

static float *falloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

typedef struct shape {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
} shape;

static tgc_conv_params params_of(const shape *s)
{
    return (tgc_conv_params){s->n,  s->c,  s->h,  s->w,  s->o,  s->kh, s->kw,
                             s->sh, s->sw, s->ph, s->pw, s->dh, s->dw, s->g};
}

/* Naive references in double, with the sum of |terms| per element for the tolerance. */
static void ref_grads(const tgc_conv_params *p, const float *x, const float *w, const float *dy,
                      double *dx, double *dx_mag, double *dw, double *dw_mag)
{
    int64_t oh_n = tgc_conv_out_h(p), ow_n = tgc_conv_out_w(p);
    int64_t cg = p->c / p->groups, og = p->o / p->groups;
    size_t nx = (size_t)(p->n * p->c * p->h * p->w), nw = (size_t)(p->o * cg * p->kh * p->kw);
    memset(dx, 0, nx * sizeof *dx);
    memset(dx_mag, 0, nx * sizeof *dx_mag);
    memset(dw, 0, nw * sizeof *dw);
    memset(dw_mag, 0, nw * sizeof *dw_mag);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t o = 0; o < p->o; o++)
            for (int64_t oh = 0; oh < oh_n; oh++)
                for (int64_t ow = 0; ow < ow_n; ow++) {
                    double g = dy[((n * p->o + o) * oh_n + oh) * ow_n + ow];
                    int64_t grp = o / og;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t a = 0; a < p->kh; a++)
                            for (int64_t b = 0; b < p->kw; b++) {
                                int64_t ih = oh * p->stride_h - p->pad_h + a * p->dil_h;
                                int64_t iw = ow * p->stride_w - p->pad_w + b * p->dil_w;
                                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w)
                                    continue;
                                int64_t xi = ((n * p->c + grp * cg + c) * p->h + ih) * p->w + iw;
                                int64_t wi = ((o * cg + c) * p->kh + a) * p->kw + b;
                                dx[xi] += g * w[wi];
                                dx_mag[xi] += fabs(g * w[wi]);
                                dw[wi] += g * x[xi];
                                dw_mag[wi] += fabs(g * x[xi]);
                            }
                }
}

static void assert_close_all(const float *got, const double *ref, const double *mag, size_t n,
                             double k, const char *what, const shape *s)
{
    for (size_t i = 0; i < n; i++) {
        double tol = 1e-5 * sqrt(k > 1 ? k : 1) * mag[i] + 1e-6;
        if (!(fabs(got[i] - ref[i]) <= tol))
            fail_msg("%s[%zu] of n%lld c%lld %lldx%lld o%lld k%lldx%lld s%lld,%lld p%lld,%lld "
                     "d%lld,%lld g%lld: got %.7g, want %.7g (tol %.3g)",
                     what, i, (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w,
                     (long long)s->o, (long long)s->kh, (long long)s->kw, (long long)s->sh,
                     (long long)s->sw, (long long)s->ph, (long long)s->pw, (long long)s->dh,
                     (long long)s->dw, (long long)s->g, got[i], ref[i], tol);
    }
}

static const tgc_gemm_kernel *gk, *ck;

static int setup_kernels(void **state)
{
    (void)state;
    return tgc_llvm_conv_grad_kernels(&gk, &ck) == TGC_OK ? 0 : -1;
}

/* Both gradients of shape s with 1 and 2 threads against the reference; with `via_col2im`
 * the input gradient also takes the col2im path where it would take the conv one. */
static void check_shape(const shape *s)
{
    tgc_conv_params p = params_of(s);
    assert_int_equal(tgc_conv_params_check(&p), TGC_OK);
    int64_t oh = tgc_conv_out_h(&p), ow = tgc_conv_out_w(&p), cg = s->c / s->g;
    size_t nx = (size_t)(s->n * s->c * s->h * s->w), nw = (size_t)(s->o * cg * s->kh * s->kw),
           ny = (size_t)(s->n * s->o * oh * ow);
    float *x = falloc(nx), *w = falloc(nw), *dy = falloc(ny), *dx = falloc(nx), *dw = falloc(nw);
    double *rdx = malloc(nx * sizeof(double)), *mdx = malloc(nx * sizeof(double)),
           *rdw = malloc(nw * sizeof(double)), *mdw = malloc(nw * sizeof(double));
    assert_true(rdx && mdx && rdw && mdw);
    fill(x, nx, 1u + (unsigned)nx);
    fill(w, nw, 7u + (unsigned)nw);
    fill(dy, ny, 13u + (unsigned)ny);
    ref_grads(&p, x, w, dy, rdx, mdx, rdw, mdw);
    double kx = (double)(s->o / s->g * s->kh * s->kw), kw = (double)(s->n * oh * ow);
    for (int threads = 1; threads <= 2; threads++) {
        for (int path = 0; path < 2; path++) {
            memset(dx, 0xff, nx * sizeof(float)); /* NaN: every element must be written */
            assert_int_equal(tgc_conv_grad_input_run(gk, path ? NULL : ck, &p, dy, w, dx, threads),
                             TGC_OK);
            assert_close_all(dx, rdx, mdx, nx, kx, path ? "dx(col2im)" : "dx", s);
        }
        memset(dw, 0xff, nw * sizeof(float));
        assert_int_equal(tgc_conv_grad_weight_run(gk, &p, x, dy, dw, threads), TGC_OK);
        assert_close_all(dw, rdw, mdw, nw, kw, "dw", s);
    }
    free(x);
    free(w);
    free(dy);
    free(dx);
    free(dw);
    free(rdx);
    free(mdx);
    free(rdw);
    free(mdw);
}

/* n c h w o kh kw sh sw ph pw dh dw g */
static const shape odd_shapes[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1},    {2, 3, 5, 7, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {3, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1},   {2, 4, 10, 9, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
    {1, 6, 13, 8, 9, 5, 3, 1, 1, 2, 1, 1, 1, 3},   {2, 3, 17, 15, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {3, 8, 11, 12, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8},  {2, 6, 12, 12, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},
    {2, 5, 14, 13, 10, 3, 3, 1, 1, 2, 2, 2, 2, 1}, {1, 4, 9, 9, 5, 3, 2, 2, 3, 0, 1, 2, 1, 1},
    {2, 3, 6, 6, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1},    {4, 7, 8, 6, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {5, 9, 7, 7, 33, 3, 3, 1, 1, 3, 2, 1, 1, 1},   {2, 16, 5, 5, 40, 5, 3, 3, 2, 2, 1, 1, 2, 4},
    {2, 30, 6, 7, 17, 2, 2, 1, 1, 0, 0, 1, 1, 1},  {3, 12, 9, 10, 24, 3, 3, 2, 1, 0, 1, 1, 1, 2},
};

static void test_odd_shapes_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof odd_shapes / sizeof odd_shapes[0]; i++)
        check_shape(&odd_shapes[i]);
}

/* ResNet18 (CIFAR stem) and the seed CNN's layers at batch 2: K blocks, many M tiles, the
 * small-image conv path for deep layers. */
static const shape model_shapes[] = {
    {2, 3, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 64, 32, 32, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {2, 64, 32, 32, 128, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {2, 128, 16, 16, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 256, 8, 8, 512, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {2, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 3, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 3, 64, 64, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1},
};

static void test_model_layers_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof model_shapes / sizeof model_shapes[0]; i++)
        check_shape(&model_shapes[i]);
}

/* The same bits with 1, 2 and 3 threads and on a second run. */
static void test_results_do_not_depend_on_threads(void **state)
{
    (void)state;
    const shape ss[] = {{3, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                        {2, 32, 15, 15, 48, 3, 3, 2, 2, 1, 1, 1, 1, 2},
                        {4, 8, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8}};
    for (size_t si = 0; si < sizeof ss / sizeof ss[0]; si++) {
        tgc_conv_params p = params_of(&ss[si]);
        int64_t oh = tgc_conv_out_h(&p), ow = tgc_conv_out_w(&p);
        size_t nx = (size_t)(p.n * p.c * p.h * p.w), nw = (size_t)(p.o * p.c / p.groups * 9),
               ny = (size_t)(p.n * p.o * oh * ow);
        float *x = falloc(nx), *w = falloc(nw), *dy = falloc(ny);
        float *dx[4], *dw[4];
        fill(x, nx, 3);
        fill(w, nw, 5);
        fill(dy, ny, 9);
        for (int r = 0; r < 4; r++) {
            int threads = r == 3 ? 2 : r + 1;
            dx[r] = falloc(nx);
            dw[r] = falloc(nw);
            assert_int_equal(tgc_conv_grad_input_run(gk, ck, &p, dy, w, dx[r], threads), TGC_OK);
            assert_int_equal(tgc_conv_grad_weight_run(gk, &p, x, dy, dw[r], threads), TGC_OK);
            if (r) {
                assert_memory_equal(dx[r], dx[0], nx * sizeof(float));
                assert_memory_equal(dw[r], dw[0], nw * sizeof(float));
            }
        }
        for (int r = 0; r < 4; r++) {
            free(dx[r]);
            free(dw[r]);
        }
        free(x);
        free(w);
        free(dy);
    }
}

static void test_bad_arguments_are_invalid_arg(void **state)
{
    (void)state;
    float buf[64] = {0};
    tgc_conv_params p = {1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(tgc_conv_grad_weight_run(NULL, &p, buf, buf, buf, 1), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_conv_grad_weight_run(ck, &p, buf, buf, buf, 1), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_conv_grad_input_run(gk, gk, &p, buf, buf, buf, 1), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_conv_grad_weight_run(gk, &p, NULL, buf, buf, 1), TGC_ERR_INVALID_ARG);
    tgc_conv_params bad = p;
    bad.groups = 3;
    assert_int_equal(tgc_conv_grad_input_run(gk, ck, &bad, buf, buf, buf, 1), TGC_ERR_INVALID_ARG);
    bad = p;
    bad.kh = 9;
    assert_int_equal(tgc_conv_grad_weight_run(gk, &bad, buf, buf, buf, 1), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
}

/* ---- the ops through the backend, against interp ---- */

static tgc_tensor *host_tensor(const int64_t *shape, unsigned seed)
{
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    float *v = falloc((size_t)n);
    fill(v, (size_t)n, seed);
    tgc_tensor *t = tgc_from_data(v, (size_t)n * sizeof(float), shape, 4, TGC_F32, tgc_cpu());
    free(v);
    assert_non_null(t);
    return t;
}

static float *values_of(tgc_tensor *t)
{
    size_t n = (size_t)tgc_numel(t);
    float *v = falloc(n);
    assert_int_equal(tgc_copy_to_host(t, v, n * sizeof(float)), TGC_OK);
    return v;
}

/* got against interp's double-accumulated result: |d| <= 1e-5 sqrt(k) max|want| + 1e-6 */
static void expect_close_tensors(tgc_tensor *got, tgc_tensor *want, double k, const char *what)
{
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(tgc_numel(got), tgc_numel(want));
    float *g = values_of(got), *w = values_of(want);
    size_t n = (size_t)tgc_numel(want);
    double mag = 0;
    for (size_t i = 0; i < n; i++)
        mag = fmax(mag, fabs(w[i]));
    double tol = 1e-5 * sqrt(k) * (mag + 1) + 1e-6;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(g[i] - w[i]) <= tol))
            fail_msg("%s[%zu]: got %.7g, want %.7g (tol %.3g)", what, i, g[i], w[i], tol);
    free(g);
    free(w);
}

static tgc_attrs conv_attrs(const shape *s)
{
    tgc_attrs a = tgc_attrs_none();
    int64_t v[7] = {s->sh, s->sw, s->ph, s->pw, s->dh, s->dw, s->g};
    memcpy(a.i, v, sizeof v);
    a.ni = 7;
    return a;
}

static _Thread_local shape t_shape; /* the shape the traced functions below use */

static tgc_status fn_grad_input(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_attrs a = conv_attrs(&t_shape);
    out[0] = tgc_conv2d_grad_input(in[0], in[1], &a, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status fn_grad_weight(tgc_module *self, tgc_tensor *const *in, int n_in,
                                 tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_attrs a = conv_attrs(&t_shape);
    out[0] = tgc_conv2d_grad_weight(in[0], in[1], &a, in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* x, w, dy of shape s (batch n) */
static void make_inputs(const shape *s, int64_t n, tgc_tensor **x, tgc_tensor **w, tgc_tensor **dy)
{
    tgc_conv_params p = params_of(s);
    p.n = n;
    *x = host_tensor((int64_t[]){n, s->c, s->h, s->w}, 11);
    *w = host_tensor((int64_t[]){s->o, s->c / s->g, s->kh, s->kw}, 12);
    *dy = host_tensor((int64_t[]){n, s->o, tgc_conv_out_h(&p), tgc_conv_out_w(&p)}, 13);
}

/* Eagerly (the eager path's choice, then the backend's run_node directly) and compiled
 * (static and every size symbolic) against interp. */
static void check_ops(const shape *s)
{
    tgc_scope_push();
    tgc_tensor *x, *w, *dy;
    make_inputs(s, s->n, &x, &w, &dy);
    tgc_attrs a = conv_attrs(s);
    double kx = (double)(s->o / s->g * s->kh * s->kw), kw = (double)(s->n * s->h * s->w);
    tgc_eager_force_interp(1);
    tgc_tensor *want_dx = tgc_conv2d_grad_input(dy, w, &a, x);
    tgc_tensor *want_dw = tgc_conv2d_grad_weight(x, dy, &a, w);
    tgc_eager_force_interp(0);
    expect_close_tensors(tgc_conv2d_grad_input(dy, w, &a, x), want_dx, kx, "eager dx");
    expect_close_tensors(tgc_conv2d_grad_weight(x, dy, &a, w), want_dw, kw, "eager dw");

    /* the node straight through the backend's native kernel */
    const tgc_backend *b = tgc_backend_llvm();
    assert_non_null(b->run_node);
    tgc_node nd = {0};
    nd.op = TGC_OP_CONV2D_GRAD_INPUT;
    nd.attrs = a;
    nd.out.dtype = TGC_F32;
    nd.out.ndim = 4;
    assert_true(b->node_supported(&nd));
    tgc_launch_env env = {0};
    env.n_threads = 2;
    tgc_tensor *ins[2] = {dy, w}, *got = NULL;
    assert_int_equal(b->run_node(&nd, ins, x->shape, &got, &env), TGC_OK);
    expect_close_tensors(got, want_dx, kx, "run_node dx");
    nd.op = TGC_OP_CONV2D_GRAD_WEIGHT;
    ins[0] = x;
    ins[1] = dy;
    assert_int_equal(b->run_node(&nd, ins, w->shape, &got, &env), TGC_OK);
    expect_close_tensors(got, want_dw, kw, "run_node dw");

    t_shape = *s;
    for (int dyn = 0; dyn < 2; dyn++) {
        tgc_config cfg = tgc_config_default();
        cfg.backend = TGC_BACKEND_LLVM;
        cfg.dynamic = dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER;
        tgc_fn *fi = tgc_compile(fn_grad_input, "conv_grad_input", &cfg);
        tgc_fn *fw = tgc_compile(fn_grad_weight, "conv_grad_weight", &cfg);
        assert_true(fi && fw);
        /* dynamic: a second batch size through the same variant */
        for (int64_t n = s->n; n <= s->n + dyn; n++) {
            tgc_tensor *xn, *wn, *dyn_;
            make_inputs(s, n, &xn, &wn, &dyn_);
            tgc_eager_force_interp(1);
            tgc_tensor *rdx = tgc_conv2d_grad_input(dyn_, wn, &a, xn);
            tgc_tensor *rdw = tgc_conv2d_grad_weight(xn, dyn_, &a, wn);
            tgc_eager_force_interp(0);
            tgc_tensor *gi[1] = {NULL}, *gw[1] = {NULL};
            tgc_tensor *in_i[3] = {dyn_, wn, xn}, *in_w[3] = {xn, dyn_, wn};
            if (tgc_call(fi, NULL, in_i, 3, gi, 1) != TGC_OK ||
                tgc_call(fw, NULL, in_w, 3, gw, 1) != TGC_OK)
                fail_msg("compiled conv backward: %s", tgc_last_error());
            expect_close_tensors(gi[0], rdx, kx, dyn ? "compiled dx (dynamic)" : "compiled dx");
            expect_close_tensors(gw[0], rdw, kw * 2, dyn ? "compiled dw (dynamic)" : "compiled dw");
        }
        tgc_stats st;
        assert_int_equal(tgc_fn_stats(fi, &st), TGC_OK);
        assert_int_equal(st.compiles, 1);
        assert_int_equal(st.eager_fallbacks, 0);
        tgc_fn_free(fi);
        tgc_fn_free(fw);
    }
    tgc_scope_pop();
}

static void test_ops_match_interp_eager_and_compiled(void **state)
{
    (void)state;
    const shape ss[] = {
        {2, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {3, 4, 10, 9, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
        {2, 6, 13, 8, 9, 5, 3, 1, 1, 2, 1, 1, 1, 3},
        {2, 3, 17, 15, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
        {2, 8, 11, 12, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8},
        {2, 5, 14, 13, 10, 3, 3, 1, 1, 2, 2, 2, 2, 1},
        {2, 16, 8, 8, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1},
        {2, 32, 16, 16, 64, 3, 3, 1, 1, 2, 2, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++)
        check_ops(&ss[i]);
}

/* Other dtypes are not native: node_supported says so and run_node declines, so interp
 * computes them (f64 here, through a compiled function). */
static void test_other_dtypes_fall_back_to_interp(void **state)
{
    (void)state;
    tgc_node nd = {0};
    nd.op = TGC_OP_CONV2D_GRAD_WEIGHT;
    nd.out.ndim = 4;
    const tgc_dtype dts[] = {TGC_F64, TGC_F16, TGC_BF16};
    for (int i = 0; i < 3; i++) {
        nd.out.dtype = dts[i];
        assert_false(tgc_backend_llvm()->node_supported(&nd));
    }
    tgc_scope_push();
    shape s = {2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2};
    tgc_tensor *x, *w, *dy;
    make_inputs(&s, 2, &x, &w, &dy);
    x = tgc_cast(x, TGC_F64);
    w = tgc_cast(w, TGC_F64);
    dy = tgc_cast(dy, TGC_F64);
    t_shape = s;
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    tgc_fn *fw = tgc_compile(fn_grad_weight, "conv_grad_weight_f64", &cfg);
    tgc_tensor *in[3] = {x, dy, w}, *got[1] = {NULL};
    assert_int_equal(tgc_call(fw, NULL, in, 3, got, 1), TGC_OK);
    tgc_attrs a = conv_attrs(&s);
    tgc_eager_force_interp(1);
    tgc_tensor *want = tgc_conv2d_grad_weight(x, dy, &a, w);
    tgc_eager_force_interp(0);
    assert_int_equal(tgc_dtype_of(got[0]), TGC_F64);
    size_t n = (size_t)tgc_numel(want);
    double *g = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
    assert_true(g && r);
    assert_int_equal(tgc_copy_to_host(got[0], g, n * sizeof(double)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(want, r, n * sizeof(double)), TGC_OK);
    assert_memory_equal(g, r, n * sizeof(double));
    free(g);
    free(r);
    tgc_fn_free(fw);
    tgc_scope_pop();
}

/* ---- pools and embedding ---- */

typedef struct pool_case {
    tgc_op op;
    int64_t n, c, h, w, k, s, p, excl; /* adaptive: k = out_h, s = out_w */
} pool_case;

static _Thread_local pool_case t_pool;

static tgc_attrs pool_attrs(const pool_case *pc)
{
    tgc_attrs a = tgc_attrs_none();
    if (pc->op == TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD) {
        a.i[0] = pc->k, a.i[1] = pc->s, a.ni = 2;
        return a;
    }
    int64_t v[7] = {pc->k, pc->k, pc->s, pc->s, pc->p, pc->p, pc->excl};
    memcpy(a.i, v, sizeof v);
    a.ni = 7;
    return a;
}

static tgc_tensor *pool_grad_of(const pool_case *pc, tgc_tensor *x, tgc_tensor *dy)
{
    tgc_attrs a = pool_attrs(pc);
    switch (pc->op) {
    case TGC_OP_MAX_POOL2D_GRAD: return tgc_max_pool2d_grad(x, dy, &a);
    case TGC_OP_AVG_POOL2D_GRAD: return tgc_avg_pool2d_grad(dy, &a, x);
    default: return tgc_adaptive_avg_pool2d_grad(dy, &a, x);
    }
}

static tgc_status fn_pool_grad(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                               int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = pool_grad_of(&t_pool, in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* x with ties (values on a coarse grid) and one NaN per plane-ish */
static tgc_tensor *pool_input(const pool_case *pc, int64_t n)
{
    int64_t shape[4] = {n, pc->c, pc->h, pc->w}, cnt = n * pc->c * pc->h * pc->w;
    float *v = falloc((size_t)cnt);
    fill(v, (size_t)cnt, 21);
    for (int64_t i = 0; i < cnt; i++)
        v[i] = floorf(v[i] * 3.0f);
    if (cnt > 7)
        v[7] = NAN;
    tgc_tensor *t = tgc_from_data(v, (size_t)cnt * sizeof(float), shape, 4, TGC_F32, tgc_cpu());
    free(v);
    assert_non_null(t);
    return t;
}

static void expect_same_bits(tgc_tensor *got, tgc_tensor *want, const char *what)
{
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(tgc_numel(got), tgc_numel(want));
    float *g = values_of(got), *w = values_of(want);
    if (memcmp(g, w, (size_t)tgc_numel(want) * sizeof(float)) != 0)
        fail_msg("%s: not interp's bits", what);
    free(g);
    free(w);
}

static void check_pool(const pool_case *pc)
{
    tgc_scope_push();
    t_pool = *pc;
    for (int dyn = 0; dyn < 2; dyn++) {
        tgc_config cfg = tgc_config_default();
        cfg.backend = TGC_BACKEND_LLVM;
        cfg.dynamic = dyn ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER;
        tgc_fn *f = tgc_compile(fn_pool_grad, "pool_grad", &cfg);
        assert_non_null(f);
        for (int64_t n = pc->n; n <= pc->n + dyn; n++) {
            tgc_tensor *x = pool_input(pc, n);
            int64_t oh, ow;
            if (pc->op == TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD) {
                oh = pc->k, ow = pc->s;
            } else {
                oh = (pc->h + 2 * pc->p - pc->k) / pc->s + 1;
                ow = (pc->w + 2 * pc->p - pc->k) / pc->s + 1;
            }
            tgc_tensor *dy = host_tensor((int64_t[]){n, pc->c, oh, ow}, 23);
            tgc_eager_force_interp(1);
            tgc_tensor *want = pool_grad_of(pc, x, dy);
            tgc_eager_force_interp(0);
            tgc_tensor *in[2] = {x, dy}, *got[1] = {NULL};
            if (tgc_call(f, NULL, in, 2, got, 1) != TGC_OK)
                fail_msg("compiled %s: %s", tgc_op_name(pc->op), tgc_last_error());
            expect_same_bits(got[0], want, tgc_op_name(pc->op));
        }
        tgc_fn_free(f);
    }
    tgc_scope_pop();
}

static void test_pool_grads_are_interps_bits(void **state)
{
    (void)state;
    const pool_case cs[] = {
        {TGC_OP_MAX_POOL2D_GRAD, 2, 3, 9, 11, 3, 2, 1, 0},
        {TGC_OP_MAX_POOL2D_GRAD, 3, 5, 34, 34, 3, 2, 0, 0}, /* the seed CNN's */
        {TGC_OP_MAX_POOL2D_GRAD, 2, 4, 16, 16, 3, 2, 1, 0}, /* ResNet18's */
        {TGC_OP_MAX_POOL2D_GRAD, 1, 2, 7, 5, 2, 1, 1, 0},
        {TGC_OP_AVG_POOL2D_GRAD, 2, 3, 9, 10, 3, 2, 1, 0},
        {TGC_OP_AVG_POOL2D_GRAD, 2, 3, 9, 10, 3, 2, 1, 1},
        {TGC_OP_AVG_POOL2D_GRAD, 1, 4, 8, 8, 2, 2, 0, 0},
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 2, 3, 10, 10, 8, 8, 0, 0}, /* the seed CNN's */
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 2, 6, 7, 5, 3, 2, 0, 0},
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 3, 8, 4, 4, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        check_pool(&cs[i]);
    tgc_node nd = {0};
    nd.op = TGC_OP_MAX_POOL2D_GRAD;
    nd.out.ndim = 4;
    nd.out.dtype = TGC_F32;
    assert_true(tgc_backend_llvm()->node_supported(&nd));
    nd.out.dtype = TGC_F64;
    assert_false(tgc_backend_llvm()->node_supported(&nd));
}

static tgc_status fn_embedding_grad(tgc_module *self, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_embedding_grad(in[0], in[1], in[2]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_embedding_grad_matches_interp_and_checks_indices(void **state)
{
    (void)state;
    tgc_scope_push();
    const int64_t V = 37, D = 70, B = 3, T = 11;
    int64_t ids[B * T];
    for (int64_t i = 0; i < B * T; i++)
        ids[i] = (i * 7 + i / 5) % V; /* repeats */
    tgc_tensor *idx = tgc_from_data(ids, sizeof ids, (int64_t[]){B, T}, 2, TGC_I64, tgc_cpu());
    float *wv = falloc((size_t)(V * D)), *gv = falloc((size_t)(B * T * D));
    fill(wv, (size_t)(V * D), 1);
    fill(gv, (size_t)(B * T * D), 2);
    tgc_tensor *w =
        tgc_from_data(wv, (size_t)(V * D) * 4, (int64_t[]){V, D}, 2, TGC_F32, tgc_cpu());
    tgc_tensor *dy =
        tgc_from_data(gv, (size_t)(B * T * D) * 4, (int64_t[]){B, T, D}, 3, TGC_F32, tgc_cpu());
    free(wv);
    free(gv);
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_LLVM;
    tgc_fn *f = tgc_compile(fn_embedding_grad, "embedding_grad", &cfg);
    tgc_tensor *in[3] = {dy, idx, w}, *got[1] = {NULL};
    assert_int_equal(tgc_call(f, NULL, in, 3, got, 1), TGC_OK);
    tgc_eager_force_interp(1);
    tgc_tensor *want = tgc_embedding_grad(dy, idx, w);
    tgc_eager_force_interp(0);
    expect_close_tensors(got[0], want, (double)(B * T), "embedding_grad");
    /* an index out of range: the native kernel declines, interp reports it */
    ids[5] = V;
    tgc_tensor *bad = tgc_from_data(ids, sizeof ids, (int64_t[]){B, T}, 2, TGC_I64, tgc_cpu());
    tgc_tensor *in2[3] = {dy, bad, w};
    assert_int_equal(tgc_call(f, NULL, in2, 3, got, 1), TGC_ERR_INVALID_ARG);
    tgc_clear_error();
    tgc_fn_free(f);
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_shapes_match_reference),
        cmocka_unit_test(test_model_layers_match_reference),
        cmocka_unit_test(test_results_do_not_depend_on_threads),
        cmocka_unit_test(test_bad_arguments_are_invalid_arg),
        cmocka_unit_test(test_ops_match_interp_eager_and_compiled),
        cmocka_unit_test(test_other_dtypes_fall_back_to_interp),
        cmocka_unit_test(test_pool_grads_are_interps_bits),
        cmocka_unit_test(test_embedding_grad_matches_interp_and_checks_indices),
    };
    return cmocka_run_group_tests(tests, setup_kernels, NULL);
}
#else
static void test_llvm_absent(void **state)
{
    (void)state;
    skip();
}
int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llvm_absent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
