/* What operand rounding alone does to test_cuda_public's matrix-product checks: for the shapes
 * of its big GEMM / conv cases, with randn operands as that test draws them, the exact result
 * of the operands rounded to bf16 (MEDIUM) or tf32 (HIGH), products summed in double, is
 * compared with the unrounded one under tests/gpu_test_util.h's rule (every element of a row
 * within tol * rms(row of the reference) + 1e-5). A correct kernel can do no better than this;
 * whatever fails here fails on any GPU. A development tool, not part of the library:
 *   cc -O2 tools/gemm_emu/round_sim.c -o round_sim -lm
 *   ./round_sim [bf16|tf32] [tol] [seeds]      (defaults: bf16 1e-2 3)
 * Prints per shape the mean number of elements over the bound and the worst error / allowed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs;
static double u01(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}
static float randn(void)
{
    return (float)(sqrt(-2 * log(u01())) * cos(6.283185307179586 * u01()));
}

static int g_tf32;
static float rnd(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (g_tf32)
        u = (u + 0x1000u) & 0xffffe000u; /* cvt.rna.tf32.f32 */
    else
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* cvt.rn.bf16x2.f32 */
    memcpy(&f, &u, 4);
    return f;
}

typedef struct stat {
    long long bad, n;
    double worst;
} stat;

/* one row of want / got against the row-rms rule */
static void check_row(const double *want, const double *got, int n, double tol, stat *st)
{
    double rms = 0;
    for (int i = 0; i < n; i++)
        rms += want[i] * want[i];
    rms = sqrt(rms / n);
    for (int i = 0; i < n; i++) {
        double al = tol * rms + 1e-5, e = fabs(got[i] - want[i]);
        st->bad += e > al;
        st->worst = e / al > st->worst ? e / al : st->worst;
        st->n++;
    }
}

/* batch x [M, K] times [K, N] (+ bias; gelu: gelu(y + bias) + x, N == K) */
static void gemm(int batch, int M, int N, int K, int bias, int gelu, double tol, stat *st)
{
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
    float *bv = malloc(sizeof(float) * (size_t)N);
    double *w = malloc(sizeof(double) * (size_t)N), *g = malloc(sizeof(double) * (size_t)N);
    for (int i = 0; i < K * N; i++)
        B[i] = randn();
    for (int i = 0; i < N; i++)
        bv[i] = bias ? randn() : 0;
    for (int b = 0; b < batch; b++) {
        for (int i = 0; i < M * K; i++)
            A[i] = randn();
        for (int m = 0; m < M; m++) {
            for (int n = 0; n < N; n++) {
                double x = 0, y = 0;
                for (int k = 0; k < K; k++) {
                    x += (double)A[m * K + k] * B[k * N + n];
                    y += (double)rnd(A[m * K + k]) * rnd(B[k * N + n]);
                }
                x = (float)x + bv[n];
                y = (float)y + bv[n];
                if (gelu) {
                    x = 0.5 * x * (1 + erf(x / sqrt(2.0))) + A[m * K + n];
                    y = 0.5 * y * (1 + erf(y / sqrt(2.0))) + A[m * K + n];
                }
                w[n] = x;
                g[n] = y;
            }
            check_row(w, g, N, tol, st);
        }
    }
    free(A);
    free(B);
    free(bv);
    free(w);
    free(g);
}

/* NCHW conv, weights [O][C/g][KH][KW]; rows are the output's last dim */
static void conv(int n, int c, int h, int wd, int o, int kh, int kw, int sh, int sw, int ph, int pw,
                 int dh, int dw, int groups, double tol, stat *st)
{
    int oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1,
        ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    int cg = c / groups, og = o / groups;
    float *x = malloc(sizeof(float) * (size_t)n * c * h * wd);
    float *wt = malloc(sizeof(float) * (size_t)o * cg * kh * kw);
    for (int i = 0; i < n * c * h * wd; i++)
        x[i] = randn();
    for (int i = 0; i < o * cg * kh * kw; i++)
        wt[i] = randn();
    double *w = malloc(sizeof(double) * (size_t)ow), *g = malloc(sizeof(double) * (size_t)ow);
    for (int im = 0; im < n; im++)
        for (int co = 0; co < o; co++)
            for (int p = 0; p < oh; p++) {
                for (int q = 0; q < ow; q++) {
                    double a = 0, b = 0;
                    int gi = co / og;
                    for (int ci = 0; ci < cg; ci++)
                        for (int r = 0; r < kh; r++)
                            for (int t = 0; t < kw; t++) {
                                int ih = p * sh - ph + r * dh, iw = q * sw - pw + t * dw;
                                if (ih < 0 || ih >= h || iw < 0 || iw >= wd)
                                    continue;
                                float xv = x[((im * c + gi * cg + ci) * h + ih) * wd + iw];
                                float wv = wt[((co * cg + ci) * kh + r) * kw + t];
                                a += (double)xv * wv;
                                b += (double)rnd(xv) * rnd(wv);
                            }
                    w[q] = (float)a;
                    g[q] = (float)b;
                }
                check_row(w, g, ow, tol, st);
            }
    free(x);
    free(wt);
    free(w);
    free(g);
}

int main(int argc, char **argv)
{
    g_tf32 = argc > 1 && !strcmp(argv[1], "tf32");
    double tol = argc > 2 ? atof(argv[2]) : 1e-2;
    int seeds = argc > 3 ? atoi(argv[3]) : 3;
    enum { NS = 10 };
    static const char *names[NS] = {
        "linear 77x768 K768 +b",    "linear 77x768 K3072 +b", "linear 2x77x3072 K768 +b",
        "gelu(linear 8x77x768)+x",  "mm 127x1024 K512",       "mm 127x33 K65",
        "mm 127x129 K257",          "mm 3x127x200 K65",       "conv stem 8x3x32x32 7x7/2",
        "conv 4x16x33x31 s2 d2 g4",
    };
    stat st[NS];
    memset(st, 0, sizeof st);
    for (int s = 0; s < seeds; s++) {
        rs = 0x9E3779B97F4A7C15ull * (uint64_t)(s + 1);
        gemm(1, 77, 768, 768, 1, 0, tol, &st[0]);
        gemm(1, 77, 768, 3072, 1, 0, tol, &st[1]);
        gemm(2, 77, 3072, 768, 1, 0, tol, &st[2]);
        gemm(8, 77, 768, 768, 1, 1, tol, &st[3]);
        gemm(1, 127, 1024, 512, 0, 0, tol, &st[4]);
        gemm(1, 127, 33, 65, 0, 0, tol, &st[5]);
        gemm(1, 127, 129, 257, 0, 0, tol, &st[6]);
        gemm(3, 127, 200, 65, 0, 0, tol, &st[7]);
        conv(8, 3, 32, 32, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, tol, &st[8]);
        conv(4, 16, 33, 31, 32, 3, 3, 2, 2, 2, 1, 2, 1, 4, tol, &st[9]);
    }
    printf("%s operands, tol %g of the row rms, %d seeds:\n", g_tf32 ? "tf32" : "bf16", tol, seeds);
    for (int i = 0; i < NS; i++)
        printf("  %-28s %8.1f of %8lld over the bound (mean), worst %.2f x allowed\n", names[i],
               (double)st[i].bad / seeds, st[i].n / seeds, st[i].worst);
    return 0;
}
