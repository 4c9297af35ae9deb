/* sin, cos, logsumexp, rms_norm and group_norm (header only; tests only; main thread only),
 * shared by test_ops_modern.c (the host: interp, eager kernels, compiled LLVM and interp) and
 * test_cuda_ops_modern.c (the same cases on cuda:0, eager and compiled).
 *
 * Each case builds its inputs from a fixed hash of (case, element) in the case's dtype, with
 * edge values where the case asks (infinities and NaN for sin / cos / logsumexp, tiny rows
 * where rms_norm's default eps matters). The interp oracle is checked against a double
 * loop written here from PyTorch's definitions; every other path (eager on the default
 * backend, compiled on each backend) is checked against interp. */
#ifndef TGC_TESTS_OPS_OPS_MODERN_CASES_H
#define TGC_TESTS_OPS_OPS_MODERN_CASES_H

#include <stdio.h>

#include "backend/eager.h"
#include "tensor/dtype.h"
#include "op_test_util.h"

typedef enum { M_SIN, M_COS, M_LSE, M_RMS, M_GN } m_op;

enum {
    M_PLAIN = 0,
    M_SPECIAL = 1, /* sin/cos: inf, -inf, NaN, large; logsumexp: rows of -inf, +inf, NaN */
    M_TINY = 2     /* values around 1e-4: rms_norm's eps is visible */
};

typedef struct m_case {
    const char *name;
    m_op op;
    tgc_dtype dt;
    int nd;
    int64_t shape[5];
    int n_dims, dims[4], keepdim; /* logsumexp */
    int n_norm;                   /* rms_norm */
    int groups;                   /* group_norm */
    int weight, bias;
    double eps; /* rms_norm: < 0 is eps=None */
    int values;
} m_case;

#define M_SHAPE(...)                                                                               \
    .nd = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .shape = {__VA_ARGS__}
#define M_DIMS(...)                                                                                \
    .n_dims = (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), .dims = {__VA_ARGS__}

static const m_case m_cases[] = {
    {"sin_f32", M_SIN, TGC_F32, M_SHAPE(3, 7)},
    {"sin_f32_special", M_SIN, TGC_F32, M_SHAPE(8), .values = M_SPECIAL},
    {"sin_f64", M_SIN, TGC_F64, M_SHAPE(2, 3, 4)},
    {"sin_f16", M_SIN, TGC_F16, M_SHAPE(5, 3)},
    {"sin_bf16", M_SIN, TGC_BF16, M_SHAPE(4, 4)},
    {"sin_i32", M_SIN, TGC_I32, M_SHAPE(9)},
    {"cos_f32", M_COS, TGC_F32, M_SHAPE(4, 6)},
    {"cos_f32_special", M_COS, TGC_F32, M_SHAPE(8), .values = M_SPECIAL},
    {"cos_f64", M_COS, TGC_F64, M_SHAPE(17)},
    {"cos_f16", M_COS, TGC_F16, M_SHAPE(2, 2, 5)},
    {"cos_bf16", M_COS, TGC_BF16, M_SHAPE(3, 3)},
    {"logsumexp_last", M_LSE, TGC_F32, M_SHAPE(4, 5), M_DIMS(1)},
    {"logsumexp_special", M_LSE, TGC_F32, M_SHAPE(6, 5), M_DIMS(-1), .values = M_SPECIAL},
    {"logsumexp_special_keep", M_LSE, TGC_F64, M_SHAPE(6, 4), M_DIMS(1), .keepdim = 1,
     .values = M_SPECIAL},
    {"logsumexp_dims02_keep", M_LSE, TGC_F32, M_SHAPE(3, 4, 2), M_DIMS(0, 2), .keepdim = 1},
    {"logsumexp_dim0", M_LSE, TGC_F32, M_SHAPE(5, 3), M_DIMS(0)},
    {"logsumexp_all", M_LSE, TGC_F32, M_SHAPE(3, 4), .n_dims = 0},
    {"logsumexp_f16", M_LSE, TGC_F16, M_SHAPE(3, 8), M_DIMS(1)},
    {"logsumexp_bf16", M_LSE, TGC_BF16, M_SHAPE(2, 6), M_DIMS(1), .keepdim = 1},
    {"logsumexp_i32", M_LSE, TGC_I32, M_SHAPE(3, 4), M_DIMS(1)},
    {"logsumexp_empty", M_LSE, TGC_F32, M_SHAPE(3, 0), M_DIMS(1)},
    {"rms_norm_weight", M_RMS, TGC_F32, M_SHAPE(2, 3, 8), .n_norm = 1, .weight = 1, .eps = 1e-6},
    {"rms_norm_two_dims", M_RMS, TGC_F32, M_SHAPE(2, 3, 4), .n_norm = 2, .weight = 1, .eps = 1e-5},
    {"rms_norm_default_eps", M_RMS, TGC_F32, M_SHAPE(4, 6), .n_norm = 1, .eps = -1,
     .values = M_TINY},
    {"rms_norm_default_eps_f64", M_RMS, TGC_F64, M_SHAPE(3, 5), .n_norm = 1, .weight = 1, .eps = -1,
     .values = M_TINY},
    {"rms_norm_default_eps_f16", M_RMS, TGC_F16, M_SHAPE(3, 8), .n_norm = 1, .eps = -1,
     .values = M_TINY},
    {"rms_norm_bf16", M_RMS, TGC_BF16, M_SHAPE(2, 16), .n_norm = 1, .weight = 1, .eps = 1e-5},
    {"rms_norm_f16_weight", M_RMS, TGC_F16, M_SHAPE(2, 2, 8), .n_norm = 1, .weight = 1,
     .eps = 1e-5},
    {"group_norm_g1", M_GN, TGC_F32, M_SHAPE(2, 6, 5), .groups = 1, .eps = 1e-5},
    {"group_norm_gC", M_GN, TGC_F32, M_SHAPE(2, 6, 5), .groups = 6, .weight = 1, .bias = 1,
     .eps = 1e-5},
    {"group_norm_g3_affine_4d", M_GN, TGC_F32, M_SHAPE(2, 6, 3, 4), .groups = 3, .weight = 1,
     .bias = 1, .eps = 1e-5},
    {"group_norm_g2_weight_only", M_GN, TGC_F32, M_SHAPE(3, 4, 5), .groups = 2, .weight = 1,
     .eps = 1e-3},
    {"group_norm_g2_bias_only", M_GN, TGC_F32, M_SHAPE(2, 4, 2, 2), .groups = 2, .bias = 1,
     .eps = 1e-5},
    {"group_norm_2d", M_GN, TGC_F32, M_SHAPE(3, 4), .groups = 2, .weight = 1, .bias = 1,
     .eps = 1e-5},
    {"group_norm_f64", M_GN, TGC_F64, M_SHAPE(2, 4, 3), .groups = 2, .weight = 1, .bias = 1,
     .eps = 1e-5},
    {"group_norm_f16", M_GN, TGC_F16, M_SHAPE(2, 8, 4), .groups = 4, .weight = 1, .bias = 1,
     .eps = 1e-5},
    {"group_norm_bf16", M_GN, TGC_BF16, M_SHAPE(2, 4, 6), .groups = 2, .eps = 1e-5},
};

/* ---- inputs ---- */

static double m_hash01(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static double m_value(const m_case *c, int ci, int64_t i, int64_t row_len)
{
    double u = m_hash01((uint64_t)ci, (uint64_t)i);
    if (c->dt == TGC_I32)
        return (double)((int)(u * 13) - 6);
    if (c->values == M_TINY)
        return (u - 0.5) * 4e-4;
    if (c->values == M_SPECIAL && (c->op == M_SIN || c->op == M_COS)) {
        static const double sp[8] = {0.0, INFINITY, -INFINITY, NAN, 100.0, -3.14159265, 1e4, -0.5};
        return sp[i % 8];
    }
    if (c->values == M_SPECIAL && c->op == M_LSE) {
        /* rows: all -inf; one +inf; one -inf among finite; one NaN; +inf and -inf; finite */
        int64_t r = i / row_len, k = i % row_len;
        switch (r % 6) {
        case 0: return -INFINITY;
        case 1: return k == 1 ? INFINITY : u * 6 - 3;
        case 2: return k == 0 ? -INFINITY : u * 6 - 3;
        case 3: return k == 2 ? NAN : u * 6 - 3;
        case 4: return k == 0 ? INFINITY : -INFINITY;
        default: return u * 60 - 30;
        }
    }
    return u * 6 - 3;
}

static tgc_tensor *m_make(const m_case *c, int ci, int which, const int64_t *shape, int nd,
                          tgc_dtype dt)
{
    int64_t n = numel_of(shape, nd), row = nd ? shape[nd - 1] : 1;
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        double u = m_hash01((uint64_t)(ci * 7 + which), (uint64_t)i);
        v[i] = which == 0 ? m_value(c, ci, i, row ? row : 1) : which == 1 ? 0.5 + u : u - 0.5;
    }
    tgc_eager_force_interp(1);
    tgc_tensor *t = from_doubles(v, shape, nd, dt);
    tgc_eager_force_interp(0);
    free(v);
    return t;
}

typedef struct m_inputs {
    tgc_tensor *t[3];
    int n;
    int has_w, has_b;
} m_inputs;

static m_inputs m_inputs_of(const m_case *c, int ci)
{
    m_inputs in = {{NULL}, 0, 0, 0};
    in.t[in.n++] = m_make(c, ci, 0, c->shape, c->nd, c->dt);
    if (c->op == M_RMS && c->weight) {
        in.t[in.n++] = m_make(c, ci, 1, c->shape + c->nd - c->n_norm, c->n_norm, c->dt);
        in.has_w = 1;
    }
    if (c->op == M_GN) {
        if (c->weight) {
            in.t[in.n++] = m_make(c, ci, 1, &c->shape[1], 1, c->dt);
            in.has_w = 1;
        }
        if (c->bias) {
            in.t[in.n++] = m_make(c, ci, 2, &c->shape[1], 1, c->dt);
            in.has_b = 1;
        }
    }
    return in;
}

/* The op of case c over in[0..n) (x, then weight and bias where the case has them). */
static tgc_tensor *m_apply(const m_case *c, tgc_tensor *const *in, int n)
{
    tgc_tensor *w = NULL, *b = NULL;
    if (c->op == M_RMS && c->weight)
        w = n > 1 ? in[1] : NULL;
    if (c->op == M_GN) {
        int k = 1;
        if (c->weight)
            w = k < n ? in[k++] : NULL;
        if (c->bias)
            b = k < n ? in[k++] : NULL;
    }
    switch (c->op) {
    case M_SIN: return tgc_sin(in[0]);
    case M_COS: return tgc_cos(in[0]);
    case M_LSE: return tgc_logsumexp(in[0], c->dims, c->n_dims, c->keepdim);
    case M_RMS: return tgc_rms_norm(in[0], c->n_norm, w, c->eps);
    default: return tgc_group_norm(in[0], c->groups, w, b, c->eps);
    }
}

/* ---- the double references (PyTorch's definitions) ---- */

static double m_finfo_eps(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 2.220446049250313e-16;
    case TGC_F16: return 0x1p-10;
    case TGC_BF16: return 0x1p-7;
    default: return 0x1p-23;
    }
}

/* want[] of case c from the inputs' values (as rounded to their dtype); returns its size. */
static int64_t m_reference(const m_case *c, const m_inputs *in, double **want_out)
{
    double *x = values_of(in->t[0]);
    double *w = in->has_w ? values_of(in->t[1]) : NULL;
    double *b = in->has_b ? values_of(in->t[in->has_w ? 2 : 1]) : NULL;
    const int64_t n = numel_of(c->shape, c->nd);
    double *want = NULL;
    int64_t nw = n;
    if (c->op == M_SIN || c->op == M_COS) {
        want = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t i = 0; i < n; i++)
            want[i] = c->op == M_SIN ? sin(x[i]) : cos(x[i]);
    } else if (c->op == M_LSE) {
        uint64_t mask = 0;
        for (int k = 0; k < c->n_dims; k++)
            mask |= (uint64_t)1 << (c->dims[k] < 0 ? c->dims[k] + c->nd : c->dims[k]);
        if (c->n_dims == 0)
            mask = ((uint64_t)1 << c->nd) - 1;
        nw = 1;
        for (int d = 0; d < c->nd; d++)
            if (!(mask >> d & 1))
                nw *= c->shape[d];
        want = malloc(sizeof(double) * (size_t)(nw ? nw : 1));
        double *mx = malloc(sizeof(double) * (size_t)(nw ? nw : 1));
        int64_t *oi = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (int64_t o = 0; o < nw; o++) {
            mx[o] = -INFINITY;
            want[o] = 0;
        }
        for (int64_t i = 0; i < n; i++) { /* the kept dims' row-major index of element i */
            int64_t rem = i, o = 0, stride = 1;
            for (int d = c->nd - 1; d >= 0; d--) {
                int64_t id = rem % c->shape[d];
                rem /= c->shape[d];
                if (!(mask >> d & 1)) {
                    o += id * stride;
                    stride *= c->shape[d];
                }
            }
            oi[i] = o;
            if (x[i] > mx[o] || isnan(x[i]))
                mx[o] = isnan(mx[o]) ? mx[o] : x[i];
        }
        for (int64_t o = 0; o < nw; o++)
            mx[o] = isinf(mx[o]) ? 0.0 : mx[o]; /* torch: an infinite max is taken out as 0 */
        for (int64_t i = 0; i < n; i++)
            want[oi[i]] += exp(x[i] - mx[oi[i]]);
        for (int64_t o = 0; o < nw; o++)
            want[o] = log(want[o]) + mx[o];
        free(mx);
        free(oi);
    } else if (c->op == M_RMS) {
        int64_t M = numel_of(c->shape + c->nd - c->n_norm, c->n_norm), rows = M ? n / M : 0;
        double eps = c->eps < 0 ? m_finfo_eps(c->dt) : c->eps;
        want = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t r = 0; r < rows; r++) {
            double q = 0;
            for (int64_t j = 0; j < M; j++)
                q += x[r * M + j] * x[r * M + j];
            double s = 1.0 / sqrt(q / (double)M + eps);
            for (int64_t j = 0; j < M; j++)
                want[r * M + j] = x[r * M + j] * s * (w ? w[j] : 1.0);
        }
    } else {
        const int64_t N = c->shape[0], C = c->shape[1], G = c->groups, S = n / (N * C);
        const int64_t M = C / G * S;
        want = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t r = 0; r < N * G; r++) {
            double s = 0, q = 0;
            for (int64_t j = 0; j < M; j++)
                s += x[r * M + j];
            double mean = s / (double)M;
            for (int64_t j = 0; j < M; j++)
                q += (x[r * M + j] - mean) * (x[r * M + j] - mean);
            double rstd = 1.0 / sqrt(q / (double)M + c->eps);
            for (int64_t j = 0; j < M; j++) {
                int64_t ch = (r % G) * (C / G) + j / S;
                want[r * M + j] =
                    (x[r * M + j] - mean) * rstd * (w ? w[ch] : 1.0) + (b ? b[ch] : 0.0);
            }
        }
    }
    free(x);
    free(w);
    free(b);
    *want_out = want;
    return nw;
}

/* allclose tolerance (atol = rtol) of a result dtype: one rounding of the result and a few
 * of f32 intermediates. */
static double m_tol(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 1e-10;
    case TGC_F16: return 2e-3;
    case TGC_BF16: return 1.6e-2;
    default: return 2e-5;
    }
}

static tgc_dtype m_out_dtype(const m_case *c)
{
    return tgc_dtype_is_float(c->dt) ? c->dt : TGC_F32;
}

static void m_expect_near(const char *what, const m_case *c, const tgc_tensor *got,
                          const double *want, int64_t n)
{
    if (!got)
        fail_msg("%s %s: %s", c->name, what, tgc_last_error());
    assert_int_equal(tgc_dtype_of(got), m_out_dtype(c));
    assert_int_equal(tgc_numel(got), n);
    double *g = values_of(got), tol = m_tol(m_out_dtype(c));
    for (int64_t i = 0; i < n; i++)
        if (!values_close(g[i], want[i], tol, TOL_SCALE_ALLCLOSE)) {
            double gi = g[i];
            free(g);
            fail_msg("%s %s: element %lld: got %.9g, want %.9g", c->name, what, (long long)i, gi,
                     want[i]);
        }
    free(g);
}

/* ---- compiled: the case's op as a model of the call's inputs ---- */

static const m_case *m_current;

static tgc_status m_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_out;
    out[0] = m_apply(m_current, in, n_in);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* One compiled call of case c on backend be (inputs as given); the result (the caller's). */
static tgc_tensor *m_compiled(const m_case *c, tgc_backend_kind be, tgc_tensor *const *in, int n)
{
    tgc_config cfg = tgc_config_default();
    cfg.backend = be;
    cfg.log = 0;
    m_current = c;
    char name[96];
    snprintf(name, sizeof name, "modern_%s_%d", c->name, (int)be);
    tgc_fn *f = tgc_compile(m_model, name, &cfg);
    if (!f)
        fail_msg("%s: compile: %s", c->name, tgc_last_error());
    tgc_tensor *y = NULL;
    tgc_status st = tgc_call(f, NULL, in, n, &y, 1);
    if (st != TGC_OK)
        fail_msg("%s: call on backend %d: %s", c->name, (int)be, tgc_last_error());
    tgc_fn_free(f);
    return y;
}

/* The interp oracle's result of case c, checked against the double reference; *want gets
 * the oracle's values (the caller frees). */
static tgc_tensor *m_oracle(const m_case *c, const m_inputs *in, double **want, int64_t *nw)
{
    double *ref;
    *nw = m_reference(c, in, &ref);
    tgc_eager_force_interp(1);
    tgc_tensor *y = m_apply(c, in->t, in->n);
    tgc_eager_force_interp(0);
    m_expect_near("interp vs the double reference", c, y, ref, *nw);
    free(ref);
    *want = values_of(y);
    return y;
}

#endif
