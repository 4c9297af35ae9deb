/* The LLVM backend's f32 conv2d backward kernels (runtime/conv_grad.h over the JIT'd GEMM
 * pieces; CONV2D_GRAD_INPUT / CONV2D_GRAD_WEIGHT through the backend's run_node):
 *   - the drivers against naive double-accumulating references on odd shapes: kernels 1x1,
 *     3x3, 5x3, 7x7, strides 1/2/3, padding (also wider than the dilated kernel), dilation,
 *     groups 1/2/depthwise, batch 1..5, ResNet18 and seed-CNN layer shapes, 1 and 2 threads;
 *   - the same bits for every thread count;
 *   - the ops against interp, eagerly and compiled (symbolic batch and spatial sizes);
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
#include "backend/llvm/llvm_conv_grad.h"
#include "runtime/conv_grad.h"
#include "support/error.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_shapes_match_reference),
        cmocka_unit_test(test_model_layers_match_reference),
        cmocka_unit_test(test_results_do_not_depend_on_threads),
        cmocka_unit_test(test_bad_arguments_are_invalid_arg),
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
