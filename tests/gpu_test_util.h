/* Comparing GPU results with CPU references through the public API (header only; tests only).
 *
 * Values are read by moving a tensor to the host (tgc_to), casting it to f64 there and
 * copying it out, so nothing here depends on how a backend stores a tensor.
 *
 * Tolerances (the numbers README.md's GPU section documents):
 *   - integer and bool results, and the positions dropout zeroes, are exact;
 *   - elementwise, by dtype of the result: |got - want| <= atol + rtol * |want| with
 *     f32 rtol 1e-5 atol 1e-5 (HIGHEST: fp32 arithmetic in another order than interp's
 *     double-then-round), f16 1e-3 / 1e-5, bf16 1.6e-2 / 1e-5, f64 1e-7 / 1e-7;
 *   - matrix products (matmul, linear, conv2d, attention and what they feed) by
 *     cfg.matmul_precision, relative to the norm of the output's row (last dim): every element
 *     of a row within tol * rms(row of want) + atol + rtol * |want| (rows shorter than 16:
 *     the rms of the whole output), with tol 2e-5 for HIGHEST (fp32 in another order; a
 *     conv's 576-term sums then batch-norm's 1/std), 8e-3 for HIGH (TF32: 10-bit mantissa inputs,
 * measured up to 3.7e-3 on 9-term depthwise convs, whose short rows make the row rule tight) and
 * 4e-2 for MEDIUM (bf16 inputs); f16/bf16 operands use their dtype's rtol when it is larger, and an
 * f16 / bf16 result may also be off by its own rounding (the rtol * |want| term). MEDIUM's bound is
 * what rounding the operands to bf16 alone needs: with randn operands the exact product of the
 * rounded operands lands up to 2.6e-2 of the row rms from the unrounded one (worst of 100 random
 * draws at the shapes of test_cuda_public's big cases; rows of 16 elements, as conv outputs of
 * width 16 have, make the row rms a noisy yardstick), and 1e-2 failed ~0.2% of the elements of a
 *     linear + gelu and ~0.1% of a conv for any correct kernel (tools/gemm_emu/round_sim.c).
 *     The kernels themselves are checked tightly by tests/bench/bench_cuda_gemm.c (against
 *     the bf16-rounded operands, 1e-5 of sum |a_k b_k|).
 *
 * Thread-safety: none needed (test main thread). */
#ifndef TGC_TESTS_GPU_TEST_UTIL_H
#define TGC_TESTS_GPU_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgc/tgc.h"

/* The values of t (any device, any dtype) as doubles, row-major; NULL on error. */
static inline double *gpu_values(const tgc_tensor *t, int64_t *n_out)
{
    if (!t)
        return NULL;
    tgc_scope_push();
    tgc_tensor *h = tgc_to((tgc_tensor *)t, tgc_cpu());
    tgc_tensor *d = h ? tgc_cast(h, TGC_F64) : NULL;
    int64_t n = d ? tgc_numel(d) : 0;
    double *v = d ? malloc(sizeof(double) * (size_t)(n ? n : 1)) : NULL;
    if (v && tgc_copy_to_host(d, v, (size_t)n * sizeof(double)) != TGC_OK) {
        free(v);
        v = NULL;
    }
    tgc_scope_pop();
    if (n_out)
        *n_out = n;
    return v;
}

static inline void gpu_shape_str(const tgc_tensor *t, char *buf, size_t n)
{
    int64_t s[TGC_MAX_DIMS];
    int nd = tgc_shape(t, s);
    size_t k = (size_t)snprintf(buf, n, "%s[", tgc_dtype_name(tgc_dtype_of(t)));
    for (int d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static inline void gpu_dtype_tol(tgc_dtype dt, double *rtol, double *atol)
{
    switch (dt) {
    case TGC_F16: *rtol = 1e-3, *atol = 1e-5; break;
    case TGC_BF16: *rtol = 1.6e-2, *atol = 1e-5; break;
    case TGC_F64: *rtol = 1e-7, *atol = 1e-7; break;
    case TGC_F32: *rtol = 1e-5, *atol = 1e-5; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* Row-norm tolerance of a matrix product computed at precision p. */
static inline double gpu_precision_tol(tgc_matmul_precision p)
{
    return p == TGC_PRECISION_MEDIUM ? 4e-2 : p == TGC_PRECISION_HIGH ? 8e-3 : 2e-5;
}

typedef struct gpu_cmp {
    int ok;
    int64_t bad, first; /* elements out of tolerance, the first of them */
    double got, want;   /* at first */
    double worst;       /* largest |got - want| / allowed */
    char msg[512];      /* why it failed, for a message */
} gpu_cmp;

/* Compares got with want: same dtype and shape, values within the tolerances above.
 * rowtol > 0 selects the row-norm rule with that tolerance (matrix products); 0 the
 * elementwise rule. scale multiplies the tolerance (a case's own slack, 1 by default). */
static inline gpu_cmp gpu_compare(const tgc_tensor *got, const tgc_tensor *want, double rowtol,
                                  double scale)
{
    gpu_cmp r;
    memset(&r, 0, sizeof r);
    r.first = -1;
    if (!got || !want) {
        snprintf(r.msg, sizeof r.msg, "%s is NULL", got ? "the reference" : "the result");
        return r;
    }
    char sg[128], sw[128];
    gpu_shape_str(got, sg, sizeof sg);
    gpu_shape_str(want, sw, sizeof sw);
    if (strcmp(sg, sw) != 0) {
        snprintf(r.msg, sizeof r.msg, "result is %s, reference %s", sg, sw);
        return r;
    }
    int64_t n = 0, nw = 0;
    double *g = gpu_values(got, &n), *w = gpu_values(want, &nw);
    if (!g || !w) {
        snprintf(r.msg, sizeof r.msg, "could not read values: %s", tgc_last_error());
        free(g);
        free(w);
        return r;
    }
    tgc_dtype dt = tgc_dtype_of(want);
    double rtol, atol;
    gpu_dtype_tol(dt, &rtol, &atol);
    int is_float = dt == TGC_F32 || dt == TGC_F16 || dt == TGC_BF16 || dt == TGC_F64;
    int nd = tgc_ndim(want);
    int64_t row = nd > 0 ? tgc_size(want, -1) : 1;
    if (row < 1)
        row = 1;
    /* rows shorter than 16 elements (a conv output of width 3) are no yardstick of their
     * own: they use the rms of the whole output. Nor is a row that an activation zeroed
     * mostly (13 of 16 values of a ReLU'd conv row): its rms is far below the size of the
     * products its rounding comes from, so no row's yardstick is less than a quarter of the
     * whole output's rms */
    double all_rms = 0;
    if (rowtol > 0 && is_float) {
        for (int64_t k = 0; k < n; k++)
            all_rms += isfinite(w[k]) ? w[k] * w[k] : 0;
        all_rms = n > 0 ? sqrt(all_rms / (double)n) : 0;
    }
    for (int64_t base = 0; base < n; base += row) {
        double rms = 0;
        if (rowtol > 0 && is_float && row < 16) {
            rms = all_rms;
        } else if (rowtol > 0 && is_float) {
            for (int64_t k = base; k < base + row && k < n; k++)
                rms += isfinite(w[k]) ? w[k] * w[k] : 0;
            rms = fmax(sqrt(rms / (double)row), 0.25 * all_rms);
        }
        for (int64_t k = base; k < base + row && k < n; k++) {
            double a = g[k], b = w[k], allowed;
            if (a == b || (isnan(a) && isnan(b)))
                continue;
            if (!is_float || isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
                allowed = 0;
            } else if (rowtol > 0) {
                allowed = scale * (fmax(rowtol, rtol) * rms + atol + rtol * fabs(b));
            } else {
                allowed = scale * (atol + rtol * fabs(b));
            }
            double err = fabs(a - b);
            double q = allowed > 0 ? err / allowed : INFINITY;
            if (q > r.worst)
                r.worst = q;
            if (!(err <= allowed) && r.bad++ == 0) {
                r.first = k;
                r.got = a;
                r.want = b;
            }
        }
    }
    r.ok = r.bad == 0;
    if (!r.ok)
        snprintf(r.msg, sizeof r.msg,
                 "%s: %lld of %lld elements out of tolerance (%s); first at %lld: got %.9g, "
                 "want %.9g",
                 sw, (long long)r.bad, (long long)n,
                 rowtol > 0 ? "row-norm rule" : "elementwise rule", (long long)r.first, r.got,
                 r.want);
    free(g);
    free(w);
    return r;
}

/* 1 when a and b hold the same values bit for bit (after the f64 cast: exact for every
 * dtype but f64 NaN payloads). */
static inline int gpu_bit_equal(const tgc_tensor *a, const tgc_tensor *b)
{
    int64_t na = 0, nb = 0;
    double *x = gpu_values(a, &na), *y = gpu_values(b, &nb);
    int eq = x && y && na == nb;
    for (int64_t k = 0; eq && k < na; k++)
        eq = x[k] == y[k] || (isnan(x[k]) && isnan(y[k]));
    free(x);
    free(y);
    return eq;
}

#endif
