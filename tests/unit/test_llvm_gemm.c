/* The LLVM backend's f32 GEMM and conv2d kernels against naive double-accumulating references:
 * odd and tiny sizes, several KC blocks, transposed / strided / broadcast-batch layouts, 1 and
 * 2 threads, fused epilogues (values and coordinates), conv stride / padding / dilation /
 * groups / depthwise / 1x1 / the ResNet stem, static and dynamic geometry, error statuses.
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
#include "backend/llvm/llvm_gemm.h"
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

/* |got - ref| <= 1e-5 * sqrt(K) * sum|terms| (+ a tiny absolute floor) */
static void assert_close(double got, double ref, double mag, int64_t k, const char *what, int64_t i)
{
    double tol = 1e-5 * sqrt((double)(k > 0 ? k : 1)) * mag + 1e-6;
    if (fabs(got - ref) > tol)
        fail_msg("%s[%lld]: got %.7g, want %.7g (tol %.3g)", what, (long long)i, got, ref, tol);
}

/* Finishes a unit (after checking that the verifier accepts it) and binds the kernels. */
static tgc_llvm_code *finish_and_bind(tgc_llvm_unit *u, tgc_gemm_kernel *ks, int n)
{
    assert_int_equal(tgc_llvm_verify(u->mod), TGC_OK);
    tgc_llvm_code *code = NULL;
    assert_int_equal(tgc_llvm_unit_finish(u, &code, NULL, NULL), TGC_OK);
    for (int i = 0; i < n; i++)
        assert_int_equal(tgc_gemm_kernel_bind(&ks[i], code), TGC_OK);
    return code;
}

static tgc_llvm_code *build_gemm(const tgc_gemm_epilogue *ep, const tgc_gemm_config *cfg,
                                 tgc_gemm_kernel *k)
{
    tgc_llvm_unit u;
    assert_int_equal(tgc_llvm_unit_begin(&u, "gemm_test"), TGC_OK);
    assert_int_equal(tgc_llvm_gemm_emit_cfg(&u, "g", ep, cfg, k), TGC_OK);
    return finish_and_bind(&u, k, 1);
}

/* ---- GEMM ---- */

typedef struct gemm_layout {
    int64_t batch, m, n, k;
    int a_trans, b_trans; /* column-major A / B (B = W^T with W [N,K] row-major) */
    int64_t a_pad, b_pad, c_pad;
    int a_broadcast; /* a_bs = 0 */
} gemm_layout;

/* Runs the layout through k and checks every element against the reference. */
static void check_gemm(const tgc_gemm_kernel *k, gemm_layout L, int threads)
{
    int64_t M = L.m, N = L.n, K = L.k;
    tgc_gemm_args a = {.batch = L.batch, .m = M, .n = N, .k = K};
    int64_t lda = (L.a_trans ? M : K) + L.a_pad, ldb = (L.b_trans ? K : N) + L.b_pad;
    int64_t a_size = (L.a_trans ? K : M) * lda, b_size = (L.b_trans ? N : K) * ldb;
    a.a_rs = L.a_trans ? 1 : lda;
    a.a_cs = L.a_trans ? lda : 1;
    a.b_rs = L.b_trans ? 1 : ldb;
    a.b_cs = L.b_trans ? ldb : 1;
    a.a_bs = L.a_broadcast ? 0 : a_size;
    a.b_bs = b_size;
    a.c_rs = N + L.c_pad;
    a.c_bs = M * a.c_rs;
    size_t na = (size_t)(a_size * (L.a_broadcast ? 1 : L.batch)), nb = (size_t)(b_size * L.batch),
           nc = (size_t)(a.c_bs * L.batch);
    float *A = falloc(na), *B = falloc(nb), *C = falloc(nc);
    fill(A, na, 7);
    fill(B, nb, 11);
    for (size_t i = 0; i < nc; i++)
        C[i] = 12345.0f; /* the padding must survive, the rest be overwritten */
    a.a = A;
    a.b = B;
    a.c = C;
    assert_int_equal(tgc_gemm_run(k, &a, threads), TGC_OK);
    for (int64_t b = 0; b < L.batch; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < a.c_rs; j++) {
                float got = C[b * a.c_bs + i * a.c_rs + j];
                if (j >= N) {
                    assert_true(got == 12345.0f);
                    continue;
                }
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < K; p++) {
                    double t = (double)A[b * a.a_bs + i * a.a_rs + p * a.a_cs] *
                               B[b * a.b_bs + p * a.b_rs + j * a.b_cs];
                    ref += t;
                    mag += fabs(t);
                }
                assert_close(got, ref, mag, K, "C", (b * M + i) * N + j);
            }
    free(A);
    free(B);
    free(C);
}

static void test_gemm_sizes_match_reference(void **state)
{
    (void)state;
    tgc_gemm_kernel k;
    tgc_llvm_code *code = build_gemm(NULL, NULL, &k);
    static const int64_t sizes[][3] = {{1, 1, 1},       {7, 13, 5},  {1, 1000, 3}, {257, 129, 65},
                                       {300, 200, 700}, {33, 47, 0}, {15, 33, 1},  {64, 64, 64}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 1; t <= 2; t++)
            check_gemm(
                &k, (gemm_layout){.batch = 1, .m = sizes[s][0], .n = sizes[s][1], .k = sizes[s][2]},
                t);
    tgc_llvm_code_free(code);
}

static void test_gemm_many_k_blocks_and_small_tiles(void **state)
{
    (void)state;
    /* kc 16 and mc/nc of one tile: K=150 is ten blocks accumulated in C */
    tgc_gemm_config cfg = {.kc = 16, .mc = 1, .nc = 1};
    tgc_gemm_kernel k;
    tgc_llvm_code *code = build_gemm(NULL, &cfg, &k);
    assert_int_equal(k.kc, 16);
    check_gemm(&k, (gemm_layout){.batch = 2, .m = 37, .n = 70, .k = 150}, 1);
    check_gemm(&k, (gemm_layout){.batch = 1, .m = 20, .n = 45, .k = 33}, 2);
    tgc_llvm_code_free(code);
}

static void test_gemm_transposed_strided_and_broadcast(void **state)
{
    (void)state;
    tgc_gemm_kernel k;
    tgc_llvm_code *code = build_gemm(NULL, NULL, &k);
    for (int t = 1; t <= 2; t++) {
        /* linear layer: B = W^T */
        check_gemm(&k, (gemm_layout){.batch = 1, .m = 50, .n = 37, .k = 29, .b_trans = 1}, t);
        check_gemm(&k, (gemm_layout){.batch = 1, .m = 19, .n = 70, .k = 300, .a_trans = 1}, t);
        check_gemm(&k,
                   (gemm_layout){.batch = 2,
                                 .m = 23,
                                 .n = 41,
                                 .k = 17,
                                 .a_trans = 1,
                                 .b_trans = 1,
                                 .a_pad = 3,
                                 .b_pad = 5,
                                 .c_pad = 7},
                   t);
        /* batch of 3 sharing one A (stride 0) */
        check_gemm(
            &k, (gemm_layout){.batch = 3, .m = 31, .n = 45, .k = 260, .a_broadcast = 1, .c_pad = 2},
            t);
    }
    tgc_llvm_code_free(code);
}

/* Epilogue: relu(acc + bias[m]) + res[batch][m][n] with bias and res read through ep_args. */
typedef struct ep_data {
    const float *bias;
    const float *res;
    int64_t res_bs, res_rs;
} ep_data;

static LLVMValueRef load_field(tgc_llvm_unit *u, LLVMValueRef args, int idx, LLVMTypeRef t)
{
    LLVMValueRef i = LLVMConstInt(u->t_i64, (unsigned long long)idx * 8, 0);
    LLVMValueRef p = LLVMBuildGEP2(u->b, u->t_i8, args, &i, 1, "");
    return LLVMBuildLoad2(u->b, t, p, "");
}

static LLVMValueRef splat_f32(tgc_llvm_unit *u, LLVMValueRef s, int vl)
{
    LLVMTypeRef vt = LLVMVectorType(u->t_f32, (unsigned)vl);
    LLVMValueRef v =
        LLVMBuildInsertElement(u->b, LLVMGetUndef(vt), s, LLVMConstInt(u->t_i32, 0, 0), "");
    return LLVMBuildShuffleVector(u->b, v, LLVMGetUndef(vt),
                                  LLVMConstNull(LLVMVectorType(u->t_i32, (unsigned)vl)), "");
}

static LLVMValueRef bias_relu_res(void *ctx, tgc_llvm_unit *u, LLVMValueRef acc,
                                  const tgc_gemm_ep_pos *pos)
{
    (void)ctx;
    LLVMTypeRef vt = LLVMVectorType(u->t_f32, (unsigned)pos->vl);
    LLVMValueRef bias = load_field(u, pos->args, 0, u->t_ptr);
    LLVMValueRef bm = LLVMBuildLoad2(
        u->b, u->t_f32, LLVMBuildGEP2(u->b, u->t_f32, bias, (LLVMValueRef[]){pos->m}, 1, ""), "");
    LLVMValueRef v = LLVMBuildFAdd(u->b, acc, splat_f32(u, bm, pos->vl), "");
    LLVMValueRef zero = LLVMConstNull(vt);
    v = LLVMBuildSelect(u->b, LLVMBuildFCmp(u->b, LLVMRealOGT, v, zero, ""), v, zero, "");
    LLVMValueRef res = load_field(u, pos->args, 1, u->t_ptr);
    LLVMValueRef off = LLVMBuildAdd(
        u->b,
        LLVMBuildAdd(u->b,
                     LLVMBuildMul(u->b, pos->batch, load_field(u, pos->args, 2, u->t_i64), ""),
                     LLVMBuildMul(u->b, pos->m, load_field(u, pos->args, 3, u->t_i64), ""), ""),
        pos->n0, "");
    LLVMValueRef rp = LLVMBuildGEP2(u->b, u->t_f32, res, &off, 1, "");
    LLVMValueRef r;
    if (pos->mask) {
        LLVMTypeRef ov[2] = {vt, u->t_ptr}, ft;
        LLVMValueRef f = tgc_llvm_intrinsic(u, "llvm.masked.load", ov, 2, &ft);
        LLVMValueRef args[4] = {rp, LLVMConstInt(u->t_i32, 4, 0), pos->mask, zero};
        r = LLVMBuildCall2(u->b, ft, f, args, 4, "");
    } else {
        r = LLVMBuildLoad2(u->b, vt, rp, "");
        LLVMSetAlignment(r, 4);
    }
    return LLVMBuildFAdd(u->b, v, r, "");
}

static void test_gemm_epilogue_bias_relu_residual(void **state)
{
    (void)state;
    tgc_gemm_epilogue ep = {.emit = bias_relu_res};
    tgc_gemm_config cfg = {.kc = 32}; /* K=100: the epilogue must see only the final sums */
    tgc_gemm_kernel k;
    tgc_llvm_code *code = build_gemm(&ep, &cfg, &k);
    const int64_t B = 2, M = 29, N = 53, K = 100;
    float *A = falloc(B * M * K), *W = falloc(B * K * N), *C = falloc(B * M * N), *bias = falloc(M),
          *res = falloc(B * M * N);
    fill(A, (size_t)(B * M * K), 1);
    fill(W, (size_t)(B * K * N), 2);
    fill(bias, (size_t)M, 3);
    fill(res, (size_t)(B * M * N), 4);
    ep_data d = {.bias = bias, .res = res, .res_bs = M * N, .res_rs = N};
    tgc_gemm_args a = {.batch = B,
                       .m = M,
                       .n = N,
                       .k = K,
                       .a = A,
                       .a_bs = M * K,
                       .a_rs = K,
                       .a_cs = 1,
                       .b = W,
                       .b_bs = K * N,
                       .b_rs = N,
                       .b_cs = 1,
                       .c = C,
                       .c_bs = M * N,
                       .c_rs = N,
                       .ep_args = &d};
    for (int t = 1; t <= 2; t++) {
        memset(C, 0, sizeof(float) * (size_t)(B * M * N));
        assert_int_equal(tgc_gemm_run(&k, &a, t), TGC_OK);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t p = 0; p < K; p++) {
                        double x = (double)A[b * M * K + i * K + p] * W[b * K * N + p * N + j];
                        acc += x;
                        mag += fabs(x);
                    }
                    double v = acc + bias[i];
                    double ref = (v > 0 ? v : 0) + res[b * M * N + i * N + j];
                    assert_close(C[b * M * N + i * N + j], ref, mag + 2, K, "ep", j);
                }
    }
    free(A);
    free(W);
    free(C);
    free(bias);
    free(res);
    tgc_llvm_code_free(code);
}

/* ---- conv2d ---- */

static void conv_ref(const tgc_conv_params *p, const float *x, const float *w, double *y,
                     double *mag)
{
    int64_t oh = tgc_conv_out_h(p), ow = tgc_conv_out_w(p), cg = p->c / p->groups,
            og = p->o / p->groups;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t o = 0; o < p->o; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double s = 0, m = 0;
                    int64_t g = o / og;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t a = 0; a < p->kh; a++)
                            for (int64_t b = 0; b < p->kw; b++) {
                                int64_t ih = i * p->stride_h - p->pad_h + a * p->dil_h;
                                int64_t iw = j * p->stride_w - p->pad_w + b * p->dil_w;
                                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w)
                                    continue;
                                double t =
                                    (double)x[((n * p->c + g * cg + c) * p->h + ih) * p->w + iw] *
                                    w[((o * cg + c) * p->kh + a) * p->kw + b];
                                s += t;
                                m += fabs(t);
                            }
                    int64_t idx = ((n * p->o + o) * oh + i) * ow + j;
                    y[idx] = s;
                    mag[idx] = m;
                }
}

/* Runs one conv (dynamic or static geometry) and compares with the reference. */
static void check_conv(tgc_conv_params p, int use_static, int threads)
{
    tgc_llvm_unit u;
    tgc_gemm_kernel k;
    assert_int_equal(tgc_llvm_unit_begin(&u, "conv_test"), TGC_OK);
    assert_int_equal(tgc_llvm_conv_emit(&u, "c", use_static ? &p : NULL, NULL, &k), TGC_OK);
    tgc_llvm_code *code = finish_and_bind(&u, &k, 1);
    int64_t oh = tgc_conv_out_h(&p), ow = tgc_conv_out_w(&p);
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), nw = (size_t)(p.o * p.c / p.groups * p.kh * p.kw),
           ny = (size_t)(p.n * p.o * oh * ow);
    float *x = falloc(nx), *w = falloc(nw), *y = falloc(ny);
    double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
    assert_non_null(ref);
    assert_non_null(mag);
    fill(x, nx, 5);
    fill(w, nw, 6);
    conv_ref(&p, x, w, ref, mag);
    tgc_conv_args a = {.p = p, .x = x, .w = w, .y = y};
    assert_int_equal(tgc_conv_run(&k, &a, threads), TGC_OK);
    int64_t kk = p.c / p.groups * p.kh * p.kw;
    for (size_t i = 0; i < ny; i++)
        assert_close(y[i], ref[i], mag[i], kk, "y", (int64_t)i);
    free(x);
    free(w);
    free(y);
    free(ref);
    free(mag);
    tgc_llvm_code_free(code);
}

static tgc_conv_params conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh,
                            int64_t kw, int64_t s, int64_t pad, int64_t dil, int64_t groups)
{
    return (tgc_conv_params){.n = n,
                             .c = c,
                             .h = h,
                             .w = w,
                             .o = o,
                             .kh = kh,
                             .kw = kw,
                             .stride_h = s,
                             .stride_w = s,
                             .pad_h = pad,
                             .pad_w = pad,
                             .dil_h = dil,
                             .dil_w = dil,
                             .groups = groups};
}

static void test_conv_matches_reference(void **state)
{
    (void)state;
    const tgc_conv_params cases[] = {
        conv(2, 3, 9, 11, 5, 3, 3, 1, 0, 1, 1),    /* stride 1, pad 0, odd H/W */
        conv(3, 8, 17, 19, 16, 3, 3, 1, 1, 1, 1),  /* pad 1, batch 3 */
        conv(2, 4, 20, 20, 6, 3, 3, 2, 1, 1, 1),   /* stride 2 */
        conv(1, 3, 15, 15, 4, 3, 3, 1, 3, 1, 1),   /* pad 3 */
        conv(2, 4, 16, 16, 8, 3, 3, 1, 2, 2, 1),   /* dilation 2 */
        conv(2, 6, 12, 12, 8, 3, 3, 1, 1, 1, 2),   /* groups 2 */
        conv(2, 8, 13, 13, 8, 3, 3, 1, 1, 1, 8),   /* depthwise */
        conv(2, 16, 10, 10, 20, 1, 1, 1, 0, 1, 1), /* 1x1 as a plain GEMM */
        conv(1, 16, 9, 9, 8, 1, 1, 2, 0, 1, 1),    /* 1x1 stride 2 (downsample) */
        conv(4, 32, 1, 1, 24, 1, 1, 1, 0, 1, 1),   /* 1x1 on 1x1 images: batched columns */
        conv(3, 16, 7, 7, 8, 1, 1, 1, 0, 1, 1),    /* 1x1 on 7x7 images, batched */
        conv(1, 3, 37, 37, 8, 7, 7, 2, 3, 1, 1),   /* ResNet stem shape */
        conv(1, 64, 8, 40, 70, 3, 3, 1, 1, 1, 1),  /* K over one KC block, wide rows */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(cases[i], (int)(i & 1), 1 + (int)(i % 3 == 2));
    /* the same shapes the other way around: static <-> dynamic, 2 threads */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i += 3)
        check_conv(cases[i], !(int)(i & 1), 2);
}

/* Conv epilogue coordinates: y = acc + bias[o] + 10 * n + 0.01 * pixel. */
static LLVMValueRef conv_coords(void *ctx, tgc_llvm_unit *u, LLVMValueRef acc,
                                const tgc_gemm_ep_pos *pos)
{
    (void)ctx;
    LLVMValueRef bias = load_field(u, pos->args, 0, u->t_ptr);
    LLVMValueRef bm = LLVMBuildLoad2(
        u->b, u->t_f32, LLVMBuildGEP2(u->b, u->t_f32, bias, (LLVMValueRef[]){pos->m}, 1, ""), "");
    LLVMValueRef nb = LLVMBuildFMul(u->b, LLVMBuildSIToFP(u->b, pos->batch, u->t_f32, ""),
                                    LLVMConstReal(u->t_f32, 10.0), "");
    LLVMValueRef lanes[64];
    for (int i = 0; i < pos->vl; i++)
        lanes[i] = LLVMConstReal(u->t_f32, i);
    LLVMValueRef pix =
        LLVMBuildFAdd(u->b, splat_f32(u, LLVMBuildSIToFP(u->b, pos->n0, u->t_f32, ""), pos->vl),
                      LLVMConstVector(lanes, (unsigned)pos->vl), "");
    LLVMValueRef v =
        LLVMBuildFAdd(u->b, acc, splat_f32(u, LLVMBuildFAdd(u->b, bm, nb, ""), pos->vl), "");
    return LLVMBuildFAdd(
        u->b, v, LLVMBuildFMul(u->b, pix, splat_f32(u, LLVMConstReal(u->t_f32, 0.01), pos->vl), ""),
        "");
}

static void test_conv_epilogue_sees_channel_image_pixel(void **state)
{
    (void)state;
    tgc_conv_params p = conv(3, 4, 7, 9, 6, 3, 3, 1, 1, 1, 2);
    tgc_gemm_epilogue ep = {.emit = conv_coords};
    tgc_llvm_unit u;
    tgc_gemm_kernel k;
    assert_int_equal(tgc_llvm_unit_begin(&u, "conv_ep"), TGC_OK);
    assert_int_equal(tgc_llvm_conv_emit(&u, "c", NULL, &ep, &k), TGC_OK);
    tgc_llvm_code *code = finish_and_bind(&u, &k, 1);
    int64_t ohw = tgc_conv_out_h(&p) * tgc_conv_out_w(&p);
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), nw = (size_t)(p.o * p.c / 2 * 9),
           ny = (size_t)(p.n * p.o * ohw);
    float *x = falloc(nx), *w = falloc(nw), *y = falloc(ny), bias[6] = {1, 2, 3, 4, 5, 6};
    double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
    assert_non_null(ref);
    assert_non_null(mag);
    fill(x, nx, 8);
    fill(w, nw, 9);
    conv_ref(&p, x, w, ref, mag);
    ep_data d = {.bias = bias};
    tgc_conv_args a = {.p = p, .x = x, .w = w, .y = y, .ep_args = &d};
    assert_int_equal(tgc_conv_run(&k, &a, 2), TGC_OK);
    for (size_t i = 0; i < ny; i++) {
        int64_t n = (int64_t)i / (p.o * ohw), o = (int64_t)i / ohw % p.o, pix = (int64_t)i % ohw;
        double want = ref[i] + bias[o] + 10.0 * (double)n + 0.01 * (double)pix;
        assert_close(y[i], want, mag[i] + 40, 36, "y", (int64_t)i);
    }
    free(x);
    free(w);
    free(y);
    free(ref);
    free(mag);
    tgc_llvm_code_free(code);
}

static void test_unit_holds_many_kernels(void **state)
{
    (void)state;
    tgc_llvm_unit u;
    tgc_gemm_kernel ks[3];
    tgc_gemm_epilogue ep = {.emit = bias_relu_res};
    tgc_conv_params p = conv(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1);
    assert_int_equal(tgc_llvm_unit_begin(&u, "many"), TGC_OK);
    assert_int_equal(tgc_llvm_gemm_emit(&u, "g0", NULL, &ks[0]), TGC_OK);
    assert_int_equal(tgc_llvm_gemm_emit(&u, "g1", &ep, &ks[1]), TGC_OK);
    assert_int_equal(tgc_llvm_conv_emit(&u, "c0", &p, NULL, &ks[2]), TGC_OK);
    /* the micro-kernel and packing routines are emitted once and shared */
    assert_string_equal(ks[0].ukr_name, ks[2].ukr_name);
    tgc_llvm_code *code = finish_and_bind(&u, ks, 3);
    check_gemm(&ks[0], (gemm_layout){.batch = 1, .m = 9, .n = 40, .k = 12}, 1);
    tgc_llvm_code_free(code);
}

static void test_bad_arguments_are_invalid_arg(void **state)
{
    (void)state;
    tgc_gemm_kernel g, c;
    tgc_llvm_unit u;
    tgc_conv_params p = conv(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1);
    assert_int_equal(tgc_llvm_unit_begin(&u, "bad"), TGC_OK);
    assert_int_equal(tgc_llvm_gemm_emit(&u, NULL, NULL, &g), TGC_ERR_INVALID_ARG);
    assert_int_equal(
        tgc_llvm_gemm_emit_cfg(&u, "g", NULL, &(tgc_gemm_config){.mr = 40, .nr_vec = 4}, &g),
        TGC_ERR_INVALID_ARG);
    tgc_conv_params bad = p;
    bad.groups = 3; /* 4 channels are not divisible into 3 groups */
    assert_int_equal(tgc_llvm_conv_emit(&u, "c", &bad, NULL, &c), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_llvm_gemm_emit(&u, "g", NULL, &g), TGC_OK);
    assert_int_equal(tgc_llvm_conv_emit(&u, "c", &p, NULL, &c), TGC_OK);
    tgc_gemm_kernel both[2] = {g, c};
    tgc_llvm_code *code = finish_and_bind(&u, both, 2);
    float buf[1024] = {0};
    tgc_gemm_args ga = {.batch = 1,
                        .m = 2,
                        .n = 2,
                        .k = 2,
                        .a = buf,
                        .a_rs = 2,
                        .a_cs = 1,
                        .b = buf,
                        .b_rs = 2,
                        .b_cs = 1,
                        .c = buf + 512,
                        .c_rs = 2};
    assert_int_equal(tgc_gemm_run(&both[0], &ga, 1), TGC_OK);
    ga.m = -1;
    assert_int_equal(tgc_gemm_run(&both[0], &ga, 1), TGC_ERR_INVALID_ARG);
    ga.m = 2;
    ga.c_rs = 1; /* rows of C overlap */
    assert_int_equal(tgc_gemm_run(&both[0], &ga, 1), TGC_ERR_INVALID_ARG);
    ga.c_rs = 2;
    ga.b = NULL;
    assert_int_equal(tgc_gemm_run(&both[0], &ga, 1), TGC_ERR_INVALID_ARG);
    ga.b = buf;
    assert_int_equal(tgc_gemm_run(&both[1], &ga, 1), TGC_ERR_INVALID_ARG); /* a conv kernel */
    tgc_conv_args ca = {.p = p, .x = buf, .w = buf, .y = buf + 512};
    assert_int_equal(tgc_conv_run(&both[1], &ca, 1), TGC_OK);
    ca.p.n = 2; /* n may change */
    assert_int_equal(tgc_conv_run(&both[1], &ca, 1), TGC_OK);
    ca.p.h = 9; /* the static geometry may not */
    assert_int_equal(tgc_conv_run(&both[1], &ca, 1), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "static"));
    ca.p.h = 8;
    ca.p.pad_h = 5; /* the window is still fine, but differs */
    assert_int_equal(tgc_conv_run(&both[1], &ca, 1), TGC_ERR_INVALID_ARG);
    tgc_gemm_kernel unbound = g;
    unbound.ukr = NULL;
    assert_int_equal(tgc_gemm_run(&unbound, &ga, 1), TGC_ERR_INVALID_ARG);
    tgc_llvm_code_free(code);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_sizes_match_reference),
        cmocka_unit_test(test_gemm_many_k_blocks_and_small_tiles),
        cmocka_unit_test(test_gemm_transposed_strided_and_broadcast),
        cmocka_unit_test(test_gemm_epilogue_bias_relu_residual),
        cmocka_unit_test(test_conv_matches_reference),
        cmocka_unit_test(test_conv_epilogue_sees_channel_image_pixel),
        cmocka_unit_test(test_unit_holds_many_kernels),
        cmocka_unit_test(test_bad_arguments_are_invalid_arg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
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
