/* The formulas and decompositions of ops.def (ir/formula.h) and their builders.
 *
 * The oracle is interp: every FORMULA and DECOMPOSITION, expanded through a builder whose
 * values are tensors computed by interp's kernels op by op, equals interp's own kernel of
 * the op (within the dtype's rounding: the formula rounds each step to the compute dtype,
 * interp computes the op in double), NaN, infinities and signed zeros included. Then:
 * lowering hands backends primitives only (f16 cast up once and down once, nested formulas
 * expanded, template epilogues too); the expression language reduces over attribute dims,
 * reshapes per channel and back, picks by attributes and builds a repeated subexpression
 * once; its error paths; the support query; the LLVM codegen's math by libm name (a name
 * without vector code of its own, sin, is a library call per lane); the CUDA native
 * fallback's step programs and the CUDA renderer seeing no composite op. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/interp/interp.h"
#include "ir/formula.h"
#include "kir/kir.h"
#include "passes/passes.h"
#include "support/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor_impl.h"
#include "tgc/tgc.h"
#include "unit/graph_build_util.h"
#include "unit/unit_test_util.h"

#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_jit.h"
#include "backend/llvm/llvm_math.h"
#endif
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "kir/abi.h"
#include "support/strbuf.h"
#endif
/* last: its short macro names must not meet the headers above */
#include "ir/formula_dsl.h"

static const tgc_op g_composites[] = {TGC_OP_SIGMOID, TGC_OP_RSQRT, TGC_OP_GELU, TGC_OP_GELU_TANH,
                                      TGC_OP_SILU};

/* ---- a builder over tensors: every op runs on interp at once ---- */

#define TB_CAP 256

typedef struct tb {
    tgc_tensor *v[TB_CAP];
    int n;
    int ops[TGC_OP_COUNT]; /* ops built, by op (casts counted as CAST) */
    int consts;
} tb;

static int32_t tb_add(tb *t, tgc_tensor *x)
{
    if (!x || t->n >= TB_CAP)
        return -1;
    t->v[t->n] = x;
    return t->n++;
}

static int32_t tb_run(tb *t, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    tgc_vinfo iv[5], out;
    tgc_tensor *ts[5];
    for (int k = 0; k < n_in; k++) {
        ts[k] = t->v[in[k]];
        iv[k].dtype = ts[k]->dtype;
        iv[k].ndim = ts[k]->ndim;
        for (int d = 0; d < ts[k]->ndim; d++)
            iv[k].shape[d] = ts[k]->shape[d];
    }
    if (tgc_infer(op, iv, n_in, a, NULL, &out) != TGC_OK)
        return -1;
    t->ops[op]++;
    return tb_add(t, tgc_interp_run(op, ts, n_in, a, out.dtype, out.shape, out.ndim));
}

static int32_t tb_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    return tb_run(ctx, op, in, n_in, a);
}

static int32_t tb_const(void *ctx, double v, tgc_dtype dt)
{
    tb *t = ctx;
    t->consts++;
    return tb_add(t, tgc_full(NULL, 0, v, dt, tgc_cpu()));
}

static int32_t tb_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    tb *t = ctx;
    if (t->v[x]->dtype == dt)
        return x;
    tgc_attrs a = {.dtype = dt};
    return tb_run(t, TGC_OP_CAST, &x, 1, &a);
}

static int tb_shape(void *ctx, int32_t x, tgc_sdim *shape)
{
    tb *t = ctx;
    for (int d = 0; shape && d < t->v[x]->ndim; d++)
        shape[d] = t->v[x]->shape[d];
    return t->v[x]->ndim;
}

static tgc_formula_builder tb_builder(tb *t)
{
    memset(t, 0, sizeof *t);
    return (tgc_formula_builder){t, tb_op, tb_const, tb_cast, tb_shape};
}

/* The elements of t as doubles, row-major. Caller frees. */
static double *values(tgc_tensor *t)
{
    static const tgc_attrs none;
    tgc_attrs a = {.dtype = TGC_F64};
    tgc_tensor *d = tgc_interp_run(TGC_OP_CAST, &t, 1, &a, TGC_F64, t->shape, t->ndim);
    assert_non_null(d);
    d = tgc_interp_run(TGC_OP_CONTIGUOUS, &d, 1, &none, TGC_F64, d->shape, d->ndim);
    assert_non_null(d);
    int64_t n = tgc_numel(d);
    double *r = malloc((size_t)(n ? n : 1) * sizeof *r);
    assert_non_null(r);
    memcpy(r, tgc_host_data(d), (size_t)n * sizeof *r);
    return r;
}

static tgc_tensor *from_doubles(const double *v, int64_t n, const int64_t *shape, int ndim,
                                tgc_dtype dt)
{
    tgc_tensor *t = tgc_from_data(v, (size_t)n * sizeof *v, shape, ndim, TGC_F64, tgc_cpu());
    assert_non_null(t);
    tgc_attrs a = {.dtype = dt};
    return dt == TGC_F64 ? t : tgc_interp_run(TGC_OP_CAST, &t, 1, &a, dt, t->shape, t->ndim);
}

static double eps_of(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 1e-13;
    case TGC_F16: return 2e-3;
    case TGC_BF16: return 1.6e-2;
    default: return 1e-6;
    }
}

/* got == want within the dtype's rounding; NaN matches NaN, infinities match exactly. */
/* scale (may be NULL): per element, a magnitude the error may be relative to besides the
 * value's (a formula's operand: gelu(x) = 0.5 x (1 + erf(...)) rounds 1 + erf in the compute
 * dtype, an error of a few ulp of x where the value is tiny). */
static void expect_close_floor(const double *got, const double *want, const double *scale,
                               int64_t n, tgc_dtype dt, double tol, double floor, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            if (!(isnan(w) && isnan(g)) && g != w)
                fail_msg("%s[%lld]: %.17g, interp %.17g", what, (long long)i, g, w);
            continue;
        }
        double m = fmax(fabs(w), floor);
        if (scale && isfinite(scale[i]))
            m = fmax(m, 4 * fabs(scale[i]));
        if (fabs(g - w) > tol * m)
            fail_msg("%s[%lld]: %.17g, interp %.17g (tolerance %g)", what, (long long)i, g, w, tol);
        if (w == 0 && g == 0 && signbit(w) != signbit(g) && dt != TGC_BF16 && dt != TGC_F16)
            fail_msg("%s[%lld]: zero of the wrong sign", what, (long long)i);
    }
}

static void expect_close(const double *got, const double *want, const double *scale, int64_t n,
                         tgc_dtype dt, const char *what)
{
    expect_close_floor(got, want, scale, n, dt, eps_of(dt), 1e-30, what);
}

/* The failure of an evaluation: -1 with this status and message. */
static void expect_fail(int32_t r, tgc_status want, const char *text)
{
    assert_int_equal(r, -1);
    check_error(tgc_last_status(), want, text);
}

/* ---- the table ---- */

static void table_names_composites_primitives_and_math(void **state)
{
    (void)state;
    for (int i = 0; i < N_OF(g_composites); i++)
        assert_true(tgc_op_has_formula(g_composites[i]));
    /* their NaN, signed-zero and integer rules are the primitive's own */
    static const tgc_op prims[] = {
        TGC_OP_RELU, TGC_OP_CLAMP, TGC_OP_MAXIMUM, TGC_OP_MINIMUM, TGC_OP_ADD_SCALAR, TGC_OP_EXP,
        TGC_OP_ADD,  TGC_OP_WHERE, TGC_OP_CAST,    TGC_OP_SOFTMAX, TGC_OP_COUNT,      (tgc_op)-1};
    for (int i = 0; i < N_OF(prims); i++)
        assert_false(tgc_op_has_formula(prims[i]));
    assert_int_equal(tgc_op_formula_decompose(TGC_OP_GELU), TGC_FORMULA_DECOMPOSE_ACTIVATIONS);
    assert_int_equal(tgc_op_formula_decompose(TGC_OP_SILU), TGC_FORMULA_DECOMPOSE_ACTIVATIONS);
    assert_int_equal(tgc_op_formula_decompose(TGC_OP_SIGMOID), TGC_FORMULA_DECOMPOSE_NEVER);
    assert_int_equal(tgc_op_formula_decompose(TGC_OP_ADD), TGC_FORMULA_DECOMPOSE_NEVER);
    static const tgc_op dec[] = {TGC_OP_SOFTMAX,    TGC_OP_LOG_SOFTMAX, TGC_OP_LAYER_NORM,
                                 TGC_OP_BATCH_NORM, TGC_OP_LOGSUMEXP,   TGC_OP_RMS_NORM,
                                 TGC_OP_GROUP_NORM};
    for (int i = 0; i < N_OF(dec); i++)
        assert_true(tgc_op_has_decomposition(dec[i]));
    assert_false(tgc_op_has_decomposition(TGC_OP_GELU));
    assert_false(tgc_op_has_decomposition(TGC_OP_COUNT));
    assert_string_equal(tgc_op_math_fn(TGC_OP_EXP), "exp");
    assert_string_equal(tgc_op_math_fn(TGC_OP_LOG), "log");
    assert_string_equal(tgc_op_math_fn(TGC_OP_SQRT), "sqrt");
    assert_string_equal(tgc_op_math_fn(TGC_OP_TANH), "tanh");
    assert_string_equal(tgc_op_math_fn(TGC_OP_ERF), "erf");
    assert_string_equal(tgc_op_math_fn(TGC_OP_SIN), "sin");
    assert_string_equal(tgc_op_math_fn(TGC_OP_COS), "cos");
    int n = 0;
    for (int op = 0; op < TGC_OP_COUNT; op++)
        if (tgc_op_math_fn((tgc_op)op)) {
            n++;
            assert_int_equal(tgc_op_info_of((tgc_op)op)->kind, TGC_KIND_UNARY);
            assert_false(tgc_op_has_formula((tgc_op)op)); /* a primitive */
        }
    assert_int_equal(n, 7);
    assert_null(tgc_op_math_fn(TGC_OP_SIGMOID));
    assert_null(tgc_op_math_fn(TGC_OP_ABS));
    assert_null(tgc_op_math_fn(TGC_OP_COUNT));
    assert_int_equal(tgc_formula_compute_dtype(TGC_F16), TGC_F32);
    assert_int_equal(tgc_formula_compute_dtype(TGC_BF16), TGC_F32);
    assert_int_equal(tgc_formula_compute_dtype(TGC_F64), TGC_F64);
    assert_int_equal(tgc_formula_compute_dtype(TGC_I32), TGC_I32);
}

/* ---- formulas against interp's kernels ---- */

static const double g_special[] = {0.0,  -0.0,  1.0,      -1.0,      0.5,   -0.5, 2.5,
                                   -3.7, 7.25,  -12.0,    20.0,      -20.0, 88.8, -88.8,
                                   1000, -1000, 1e-30,    -1e-30,    1e-6,  3e38, -3e38,
                                   NAN,  -NAN,  INFINITY, -INFINITY, 0.1,   1e5,  -1e5};

static void check_formula(tgc_op op, tgc_dtype in_dt)
{
    int64_t n = N_OF(g_special), shape[1] = {n};
    tgc_tensor *x = from_doubles(g_special, n, shape, 1, in_dt);
    tgc_vinfo iv = {.dtype = in_dt, .ndim = 1, .shape = {n}}, ov;
    static const tgc_attrs none;
    assert_int_equal(tgc_infer(op, &iv, 1, &none, NULL, &ov), TGC_OK);
    tgc_tensor *want = tgc_interp_run(op, &x, 1, &none, ov.dtype, ov.shape, 1);
    assert_non_null(want);
    tb t;
    tgc_formula_builder b = tb_builder(&t);
    int32_t xi = tb_add(&t, x);
    int32_t r = tgc_op_formula(op, &b, &xi, 1, NULL, ov.dtype);
    if (r < 0)
        fail_msg("%s: %s", tgc_op_name(op), tgc_last_error());
    assert_int_equal(t.v[r]->dtype, ov.dtype);
    for (int k = 0; k < TGC_OP_COUNT; k++)
        if (t.ops[k])
            assert_false(tgc_op_has_formula((tgc_op)k) && k != TGC_OP_SIGMOID);
    double *g = values(t.v[r]), *w = values(want);
    char what[64];
    snprintf(what, sizeof what, "%s(%s)", tgc_op_name(op), tgc_dtype_name(in_dt));
    expect_close(g, w, g_special, n, ov.dtype, what);
    free(g);
    free(w);
}

static void formulas_equal_interp_kernels(void **state)
{
    (void)state;
    static const tgc_dtype dts[] = {TGC_F32, TGC_F64, TGC_F16, TGC_BF16};
    for (int i = 0; i < N_OF(g_composites); i++)
        for (int d = 0; d < N_OF(dts); d++)
            check_formula(g_composites[i], dts[d]);
    /* integer and bool operands become f32 first, as interp rounds them */
    check_formula(TGC_OP_SIGMOID, TGC_I64);
    check_formula(TGC_OP_SIGMOID, TGC_BOOL);
    check_formula(TGC_OP_GELU, TGC_I32);
    check_formula(TGC_OP_RSQRT, TGC_I64);
}

/* Large |x| saturates without inf / inf; NaN stays NaN. */
static void sigmoid_formula_saturates(void **state)
{
    (void)state;
    const double v[] = {-1000, -100, 100, 1000, NAN};
    int64_t shape[1] = {5};
    tb t;
    tgc_formula_builder b = tb_builder(&t);
    int32_t xi = tb_add(&t, from_doubles(v, 5, shape, 1, TGC_F32));
    int32_t r = tgc_op_formula(TGC_OP_SIGMOID, &b, &xi, 1, NULL, TGC_F32);
    assert_true(r >= 0);
    double *g = values(t.v[r]);
    assert_true(g[0] == 0.0 && g[1] >= 0.0 && g[1] < 1e-40);
    assert_true(g[2] == 1.0 && g[3] == 1.0);
    assert_true(isnan(g[4]));
    free(g);
    /* 1 / (1 + exp(-x)): neg, exp, add_scalar, div and the constant 1 */
    assert_int_equal(t.ops[TGC_OP_NEG], 1);
    assert_int_equal(t.ops[TGC_OP_EXP], 1);
    assert_int_equal(t.ops[TGC_OP_ADD_SCALAR], 1);
    assert_int_equal(t.ops[TGC_OP_DIV], 1);
    assert_int_equal(t.consts, 1);
}

/* ---- decompositions against interp's kernels ---- */

static tgc_tensor *randn_t(const int64_t *shape, int ndim, tgc_dtype dt, uint64_t seed)
{
    tgc_manual_seed(seed);
    tgc_tensor *t = tgc_randn(shape, ndim, TGC_F32, tgc_cpu());
    assert_non_null(t);
    tgc_attrs a = {.dtype = dt};
    return dt == TGC_F32 ? t : tgc_interp_run(TGC_OP_CAST, &t, 1, &a, dt, t->shape, t->ndim);
}

static void check_decomposition(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                                const char *what)
{
    tgc_vinfo iv[5], ov;
    for (int k = 0; k < n_in; k++) {
        iv[k].dtype = in[k]->dtype;
        iv[k].ndim = in[k]->ndim;
        for (int d = 0; d < in[k]->ndim; d++)
            iv[k].shape[d] = in[k]->shape[d];
    }
    assert_int_equal(tgc_infer(op, iv, n_in, a, NULL, &ov), TGC_OK);
    tgc_tensor *want = tgc_interp_run(op, in, n_in, a, ov.dtype, ov.shape, ov.ndim);
    assert_non_null(want);
    tb t;
    tgc_formula_builder b = tb_builder(&t);
    int32_t ids[5];
    for (int k = 0; k < n_in; k++)
        ids[k] = tb_add(&t, in[k]);
    int32_t r = tgc_op_decomposition(op, &b, ids, n_in, a, ov.dtype);
    if (r < 0)
        fail_msg("%s: %d %s", what, r, tgc_last_error());
    assert_int_equal(t.v[r]->dtype, ov.dtype);
    assert_int_equal(t.v[r]->ndim, ov.ndim);
    for (int d = 0; d < ov.ndim; d++)
        assert_int_equal(t.v[r]->shape[d], ov.shape[d]);
    double *g = values(t.v[r]), *w = values(want);
    /* each step rounds to the compute dtype, interp's kernel once: a few ulp, relative to
     * the values' unit scale */
    double tol = ov.dtype == TGC_F64 ? 1e-12 : ov.dtype == TGC_F32 ? 1e-5 : 2 * eps_of(ov.dtype);
    expect_close_floor(g, w, NULL, tgc_numel(want), ov.dtype, tol, 1.0, what);
    free(g);
    free(w);
}

/* logsumexp (with rows of -inf, +inf and NaN), rms_norm and group_norm (groups 1, between
 * and C; every weight / bias combination) as ops.def decomposes them, against interp. */
static void modern_decompositions_equal_interp_kernels(void **state)
{
    (void)state;
    int64_t s3[3] = {3, 4, 6}, s2[2] = {5, 4}, c4[1] = {4};
    static const tgc_dtype dts[] = {TGC_F32, TGC_F64, TGC_BF16};
    for (int d = 0; d < N_OF(dts); d++) {
        tgc_tensor *x = randn_t(s3, 3, dts[d], 40 + d);
        for (int mask = 1; mask < 8; mask++)
            for (int keep = 0; keep < 2; keep++) {
                tgc_attrs a = {.ni = 2};
                a.i[0] = mask;
                a.i[1] = keep;
                check_decomposition(TGC_OP_LOGSUMEXP, &x, 1, &a, "logsumexp");
            }
        for (int nn = 1; nn <= 2; nn++)
            for (int w = 0; w < 2; w++) {
                tgc_tensor *in[2] = {x, w ? randn_t(s3 + 3 - nn, nn, dts[d], 50 + nn) : NULL};
                tgc_attrs a = {.ni = 2, .nf = 1};
                a.i[0] = nn;
                a.i[1] = w ? TGC_LN_HAS_WEIGHT : 0;
                a.f[0] = 1e-6;
                check_decomposition(TGC_OP_RMS_NORM, in, 1 + w, &a, "rms_norm");
            }
        for (int groups = 1; groups <= 4; groups *= 2)
            for (int bits = 0; bits < 4; bits++)
                for (int rank = 2; rank <= 3; rank++) {
                    if (rank == 2 && groups == 4)
                        continue; /* groups of one element: +-0 times the weight, whose zero's
                                   * sign interp's added zero bias decides */
                    tgc_tensor *in[3] = {rank == 3 ? x : randn_t(s2, 2, dts[d], 60), NULL, NULL};
                    int n_in = 1;
                    if (bits & TGC_LN_HAS_WEIGHT)
                        in[n_in++] = randn_t(c4, 1, dts[d], 61);
                    if (bits & TGC_LN_HAS_BIAS)
                        in[n_in++] = randn_t(c4, 1, dts[d], 62);
                    tgc_attrs a = {.ni = 2, .nf = 1};
                    a.i[0] = groups;
                    a.i[1] = bits;
                    a.f[0] = 1e-5;
                    check_decomposition(TGC_OP_GROUP_NORM, in, n_in, &a, "group_norm");
                }
    }
    /* logsumexp's infinite maxima: rows of -inf, +inf, +inf with -inf, NaN */
    double v[12] = {-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2,
                    INFINITY,  -INFINITY, 0,         1, NAN,      3};
    int64_t s43[2] = {4, 3};
    tgc_tensor *e = from_doubles(v, 12, s43, 2, TGC_F32);
    for (int mask = 1; mask < 4; mask++) {
        tgc_attrs a = {.ni = 2};
        a.i[0] = mask;
        check_decomposition(TGC_OP_LOGSUMEXP, &e, 1, &a, "logsumexp of infinities");
    }
}

static void decompositions_equal_interp_kernels(void **state)
{
    (void)state;
    int64_t s3[3] = {3, 4, 7};
    static const tgc_dtype dts[] = {TGC_F32, TGC_F64, TGC_BF16};
    for (int d = 0; d < N_OF(dts); d++) {
        tgc_tensor *x = randn_t(s3, 3, dts[d], 1 + d);
        for (int dim = 0; dim < 3; dim++) {
            tgc_attrs a = {.ni = 1};
            a.i[0] = dim;
            check_decomposition(TGC_OP_SOFTMAX, &x, 1, &a, "softmax");
            check_decomposition(TGC_OP_LOG_SOFTMAX, &x, 1, &a, "log_softmax");
        }
        /* layer_norm over the last 1 or 2 dims, with and without weight and bias */
        for (int nn = 1; nn <= 2; nn++)
            for (int bits = 0; bits < 4; bits++) {
                tgc_tensor *in[3] = {x, NULL, NULL};
                int n_in = 1;
                const int64_t *ns = s3 + 3 - nn;
                if (bits & TGC_LN_HAS_WEIGHT)
                    in[n_in++] = randn_t(ns, nn, dts[d], 10 + bits);
                if (bits & TGC_LN_HAS_BIAS)
                    in[n_in++] = randn_t(ns, nn, dts[d], 20 + bits);
                tgc_attrs a = {.ni = 2, .nf = 1};
                a.i[0] = nn;
                a.i[1] = bits;
                a.f[0] = 1e-5;
                check_decomposition(TGC_OP_LAYER_NORM, in, n_in, &a, "layer_norm");
            }
    }
    /* softmax of a 0-d value reduces nothing */
    tgc_tensor *s = tgc_full(NULL, 0, 2.0, TGC_F32, tgc_cpu());
    tgc_attrs a0 = {.ni = 1};
    check_decomposition(TGC_OP_SOFTMAX, &s, 1, &a0, "softmax 0-d");
    /* batch_norm in eval over [N, C, H, W] and [N, C], every weight / bias combination */
    int64_t s4[4] = {2, 3, 4, 5}, s2[2] = {6, 3}, c[1] = {3};
    for (int rank = 0; rank < 2; rank++)
        for (int bits = 0; bits < 4; bits++) {
            tgc_tensor *in[5] = {rank ? randn_t(s2, 2, TGC_F32, 30) : randn_t(s4, 4, TGC_F32, 31),
                                 randn_t(c, 1, TGC_F32, 32), NULL, NULL, NULL};
            double var[3] = {0.5, 1.5, 2.0};
            in[2] = from_doubles(var, 3, c, 1, TGC_F32);
            int n_in = 3;
            int has = TGC_BN_HAS_STATS;
            if (bits & 1) {
                in[n_in++] = randn_t(c, 1, TGC_F32, 33);
                has |= TGC_BN_HAS_WEIGHT;
            }
            if (bits & 2) {
                in[n_in++] = randn_t(c, 1, TGC_F32, 34);
                has |= TGC_BN_HAS_BIAS;
            }
            tgc_attrs a = {.ni = 2, .nf = 2};
            a.i[1] = has;
            a.f[0] = 0.1;
            a.f[1] = 1e-5;
            check_decomposition(TGC_OP_BATCH_NORM, in, n_in, &a, "batch_norm");
        }
}

/* batch_norm in training, or without running stats, is not decomposed: -2. */
static void batch_norm_decomposition_requires_eval_with_stats(void **state)
{
    (void)state;
    int64_t s2[2] = {4, 3};
    tb t;
    tgc_formula_builder b = tb_builder(&t);
    int32_t x = tb_add(&t, randn_t(s2, 2, TGC_F32, 3));
    tgc_attrs a = {.ni = 2, .nf = 2};
    a.i[0] = 1;
    a.i[1] = 0;
    assert_int_equal(tgc_op_decomposition(TGC_OP_BATCH_NORM, &b, &x, 1, &a, TGC_F32), -2);
    a.i[0] = 0;
    assert_int_equal(tgc_op_decomposition(TGC_OP_BATCH_NORM, &b, &x, 1, &a, TGC_F32), -2);
    assert_int_equal(t.n, 1); /* nothing was built */
    assert_int_equal(tgc_op_decomposition(TGC_OP_GELU, &b, &x, 1, &a, TGC_F32), -2);
    assert_int_equal(tgc_op_formula(TGC_OP_RELU, &b, &x, 1, NULL, TGC_F32), -2);
}

/* ---- the expression language ---- */

/* group_norm, as a new op's decomposition would be written: x [N, C, *] reshaped to
 * [N, G, -1] (G = attrs.i[0]), normalized over dim attrs.i[1] (2), reshaped back to x's
 * shape, then weight and bias per channel. */
#define GN_R OPI(RESHAPE, CAST(X0, COMPUTE), 3, I_LIT(0), I_ATTR(0), I_LIT(-1))
#define GN_C SUB(GN_R, MEAN_KEEP(GN_R, DIM_OF(1)))
#define GN_N MUL(GN_C, RSQRT(ADDA(MEAN_KEEP(MUL(GN_C, GN_C), DIM_OF(1)), 0)))
#define GN_Y RESHAPE_AS(GN_N, X0)
#define GROUP_NORM                                                                                 \
    CAST(ADD(MUL(GN_Y, PER_CHANNEL(CAST(X1, COMPUTE), X0)), PER_CHANNEL(CAST(X2, COMPUTE), X0)),   \
         OUT)
static const tgc_fexpr *const g_group_norm = GROUP_NORM;

static void language_expresses_group_norm(void **state)
{
    (void)state;
    const int64_t N = 2, C = 6, H = 3, W = 2, G = 3, CG = C / G;
    int64_t s4[4] = {N, C, H, W}, c[1] = {C};
    tgc_tensor *x = randn_t(s4, 4, TGC_F32, 41), *w = randn_t(c, 1, TGC_F32, 42),
               *bias = randn_t(c, 1, TGC_F32, 43);
    tb t;
    tgc_formula_builder b = tb_builder(&t);
    int32_t in[3] = {tb_add(&t, x), tb_add(&t, w), tb_add(&t, bias)};
    tgc_attrs a = {.ni = 2, .nf = 1};
    a.i[0] = G;
    a.i[1] = 2;
    a.f[0] = 1e-5;
    int32_t r = tgc_formula_eval(g_group_norm, 0, &b, in, 3, &a, TGC_F32);
    if (r < 0)
        fail_msg("%s", tgc_last_error());
    assert_int_equal(t.v[r]->ndim, 4);
    for (int d = 0; d < 4; d++)
        assert_int_equal(t.v[r]->shape[d], s4[d]);
    /* the repeated subexpressions were built once: one reshape of x, two means */
    assert_int_equal(t.ops[TGC_OP_MEAN], 2);
    assert_int_equal(t.ops[TGC_OP_RESHAPE], 1 + 1 + 2); /* in, back, weight, bias */
    assert_int_equal(t.ops[TGC_OP_RSQRT], 1);
    double *got = values(t.v[r]), *xv = values(x), *wv = values(w), *bv = values(bias);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            double m = 0, v = 0, cnt = (double)(CG * H * W);
            const double *p = xv + (n * C + g * CG) * H * W;
            for (int64_t i = 0; i < CG * H * W; i++)
                m += p[i];
            m /= cnt;
            for (int64_t i = 0; i < CG * H * W; i++)
                v += (p[i] - m) * (p[i] - m);
            v /= cnt;
            for (int64_t i = 0; i < CG * H * W; i++) {
                int64_t ch = g * CG + i / (H * W);
                double want = (p[i] - m) / sqrt(v + 1e-5) * wv[ch] + bv[ch];
                double have = got[(n * C + g * CG) * H * W + i];
                if (fabs(have - want) > 1e-5 * fmax(1.0, fabs(want)))
                    fail_msg("group_norm[%lld, %lld, %lld]: %g, want %g", (long long)n,
                             (long long)g, (long long)i, have, want);
            }
        }
    free(got);
    free(xv);
    free(wv);
    free(bv);
}

/* A builder that records what it is asked, without values (a shape-less one like the
 * kernel-IR builder when `shaped` is 0). */
typedef struct rec {
    int n_ops, n_consts, n_casts, shaped, fail_at;
    tgc_op ops[64];
    tgc_attrs attrs[64];
} rec;

static int32_t rec_op(void *ctx, tgc_op op, const int32_t *in, int n_in, const tgc_attrs *a)
{
    (void)in, (void)n_in;
    rec *r = ctx;
    if (r->n_ops == r->fail_at) {
        tgc_set_error(TGC_ERR_OOM, "rec: out of memory");
        return -1;
    }
    r->ops[r->n_ops] = op;
    r->attrs[r->n_ops] = *a;
    return 100 + r->n_ops++;
}

static int32_t rec_const(void *ctx, double v, tgc_dtype dt)
{
    (void)v, (void)dt;
    rec *r = ctx;
    return 1000 + r->n_consts++;
}

static int32_t rec_cast(void *ctx, int32_t x, tgc_dtype dt)
{
    (void)dt;
    rec *r = ctx;
    r->n_casts++;
    return x + 10000;
}

static int rec_shape(void *ctx, int32_t x, tgc_sdim *shape)
{
    (void)x;
    rec *r = ctx;
    if (!r->shaped)
        return -1;
    for (int d = 0; shape && d < 3; d++)
        shape[d] = 4;
    return 3;
}

static void language_attributes_conditions_and_sharing(void **state)
{
    (void)state;
    rec r = {.shaped = 1, .fail_at = -1};
    tgc_formula_builder b = {&r, rec_op, rec_const, rec_cast, rec_shape};
    int32_t x = 7, in3[3] = {7, 8, 9};
    /* layer_norm over the last 2 of 3 dims, weight only: the mask and keepdim reach the
     * means, eps the add, the weight the mul; a repeated subexpression is built once */
    tgc_attrs a = {.ni = 2, .nf = 1};
    a.i[0] = 2;
    a.i[1] = TGC_LN_HAS_WEIGHT;
    a.f[0] = 0.25;
    assert_true(tgc_op_decomposition(TGC_OP_LAYER_NORM, &b, in3, 2, &a, TGC_F32) >= 0);
    int means = 0, muls = 0, adds = 0;
    for (int i = 0; i < r.n_ops; i++) {
        if (r.ops[i] == TGC_OP_MEAN) {
            means++;
            assert_int_equal(r.attrs[i].ni, 2);
            assert_int_equal(r.attrs[i].i[0], 6); /* dims 1 and 2 */
            assert_int_equal(r.attrs[i].i[1], 1);
        }
        if (r.ops[i] == TGC_OP_ADD_SCALAR) {
            adds++;
            assert_true(r.attrs[i].f[0] == 0.25);
        }
        muls += r.ops[i] == TGC_OP_MUL;
        assert_true(r.ops[i] != TGC_OP_ADD); /* no bias */
    }
    assert_int_equal(means, 2);
    assert_int_equal(adds, 1);
    assert_int_equal(muls, 3);    /* c * c, c * rstd, * weight */
    assert_int_equal(r.n_ops, 8); /* + sub, rsqrt */
    /* softmax over dim 1 of a 3-d value: the mask 1 << 1 */
    memset(&r, 0, sizeof r);
    r.shaped = 1;
    r.fail_at = -1;
    tgc_attrs s = {.ni = 1};
    s.i[0] = 1;
    assert_true(tgc_op_decomposition(TGC_OP_SOFTMAX, &b, &x, 1, &s, TGC_F32) >= 0);
    assert_int_equal(r.ops[0], TGC_OP_MAX);
    assert_int_equal(r.attrs[0].i[0], 2);
    /* a dim past the rank is the expression's failure, not a wrong mask */
    s.i[0] = 3;
    expect_fail(tgc_op_decomposition(TGC_OP_SOFTMAX, &b, &x, 1, &s, TGC_F32), TGC_ERR_INTERNAL,
                "an integer attribute the operand or the op does not have");
    /* without shapes (kernel-IR values) reductions over attribute dims cannot be built */
    r.shaped = 0;
    s.i[0] = 1;
    expect_fail(tgc_op_decomposition(TGC_OP_SOFTMAX, &b, &x, 1, &s, TGC_F32), TGC_ERR_INTERNAL,
                "an integer attribute the operand or the op does not have");
    expect_fail(tgc_formula_eval(PER_CHANNEL(X0, X0), 0, &b, &x, 1, NULL, TGC_F32),
                TGC_ERR_INTERNAL, "a reshape of values without shapes");
    /* an operand the op does not have */
    expect_fail(tgc_formula_eval(ADD(X0, X1), 0, &b, &x, 1, NULL, TGC_F32), TGC_ERR_INTERNAL,
                "an operand the op does not have");
    /* an incomplete builder */
    tgc_formula_builder nb = {&r, rec_op, NULL, rec_cast, NULL};
    expect_fail(tgc_formula_eval(X0, 0, &nb, &x, 1, NULL, TGC_F32), TGC_ERR_INTERNAL,
                "an incomplete builder");
    /* the builder's failure passes through with its error */
    memset(&r, 0, sizeof r);
    r.shaped = 1;
    r.fail_at = 1;
    expect_fail(tgc_op_formula(TGC_OP_GELU, &b, &x, 1, NULL, TGC_F32), TGC_ERR_OOM,
                "rec: out of memory");
    /* a failed operand (-1) is a failure, a missing expression -2 */
    int32_t bad = -1;
    assert_int_equal(tgc_op_formula(TGC_OP_GELU, &b, &bad, 1, NULL, TGC_F32), -1);
    assert_int_equal(tgc_formula_eval(NULL, 1, &b, &x, 1, NULL, TGC_F32), -2);
    /* IF and REQUIRE decide by the attributes */
    tgc_attrs c = {.ni = 1, .nf = 1};
    c.i[0] = 5;
    c.f[0] = 2.0;
    memset(&r, 0, sizeof r);
    r.fail_at = -1;
    assert_int_equal(tgc_formula_eval(IF(HAS(0, 4), X0, X1), 0, &b, in3, 3, &c, TGC_F32), 7);
    assert_int_equal(tgc_formula_eval(IF(HAS(0, 2), X0, X1), 0, &b, in3, 3, &c, TGC_F32), 8);
    assert_int_equal(tgc_formula_eval(IF(COND_AND(ATTR_IS(0, 5), FATTR_IS(0, 2.0)), X2, X1), 0, &b,
                                      in3, 3, &c, TGC_F32),
                     9);
    assert_int_equal(
        tgc_formula_eval(IF(COND_NOT(ATTR_IS(0, 5)), X2, X1), 0, &b, in3, 3, &c, TGC_F32), 8);
    assert_int_equal(tgc_formula_eval(REQUIRE(ATTR_IS(0, 4), X0), 0, &b, in3, 3, &c, TGC_F32), -2);
    assert_int_equal(r.n_ops, 0);
    /* pointwise: operands cast to the compute dtype once, the value cast to the result once */
    memset(&r, 0, sizeof r);
    r.fail_at = -1;
    assert_true(tgc_formula_eval(MUL(MUL(X0, X0), CONST(2.0)), 1, &b, &x, 1, NULL, TGC_F16) >= 0);
    assert_int_equal(r.n_casts, 2);
    assert_int_equal(r.n_consts, 1);
    assert_int_equal(r.n_ops, 2);
}

/* ---- support ---- */

typedef struct prim_log {
    int calls;
    tgc_op refuse;
} prim_log;

static int prim_check(void *ctx, tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in)
{
    prim_log *p = ctx;
    p->calls++;
    assert_false(tgc_op_has_formula(op)); /* nested formulas arrive expanded */
    (void)out, (void)in, (void)n_in;
    return op != p->refuse;
}

static void support_asks_about_every_primitive(void **state)
{
    (void)state;
    tgc_dtype f16 = TGC_F16, f32 = TGC_F32;
    prim_log p = {0, TGC_OP_COUNT};
    assert_true(tgc_op_formula_supported(TGC_OP_SILU, TGC_F16, &f16, 1, prim_check, &p));
    /* cast up, mul, neg, exp, add_scalar, div, cast down */
    assert_int_equal(p.calls, 7);
    p = (prim_log){0, TGC_OP_ERF};
    assert_false(tgc_op_formula_supported(TGC_OP_GELU, TGC_F32, &f32, 1, prim_check, &p));
    assert_true(tgc_op_formula_supported(TGC_OP_SILU, TGC_F32, &f32, 1, prim_check, &p));
    p = (prim_log){0, TGC_OP_CAST};
    assert_false(tgc_op_formula_supported(TGC_OP_SIGMOID, TGC_F32, (tgc_dtype[]){TGC_I64}, 1,
                                          prim_check, &p));
    assert_false(tgc_op_formula_supported(TGC_OP_ADD, TGC_F32, &f32, 1, prim_check, &p));
    /* the caller's error survives the question */
    tgc_set_error(TGC_ERR_SHAPE, "earlier");
    assert_true(tgc_op_formula_supported(TGC_OP_RSQRT, TGC_F32, &f32, 1, prim_check, &p));
    check_error(TGC_ERR_SHAPE, TGC_ERR_SHAPE, "earlier");
    tgc_clear_error();
}

/* ---- lowering: primitives only ---- */

static int count_op_vals(const kir_kernel *k, tgc_op op, tgc_dtype dt)
{
    int n = 0;
    for (int i = 0; i < k->n_vals; i++)
        n += k->vals[i].kind == KV_OP && k->vals[i].op == op &&
             (dt == TGC_DTYPE_COUNT || k->vals[i].dtype == dt);
    return n;
}

static void expect_primitives_only(const kir_kernel *k)
{
    for (int i = 0; i < k->n_vals; i++)
        if (k->vals[i].kind == KV_OP && tgc_op_has_formula(k->vals[i].op))
            fail_msg("val %d is %s, a composite op", i, tgc_op_name(k->vals[i].op));
}

static kir_kernel *lower_single(const tgc_graph *g, const kir_target *t, int want_groups)
{
    tgc_fusion f;
    gb_fuse(g, &f);
    assert_int_equal(f.n_groups, want_groups);
    uint8_t *m = kir_materialized(g, &f);
    assert_non_null(m);
    kir_kernel *k = NULL;
    if (kir_lower_group(g, &f, 0, m, t, &k) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    free(m);
    tgc_fusion_free(&f);
    return k;
}

static void lowering_expands_composites_into_primitives(void **state)
{
    (void)state;
    tgc_graph *g = tgc_graph_create();
    tgc_sdim s[2] = {4, 33};
    int32_t x = gb_input(g, TGC_F16, 2, s);
    int32_t o = gb_un(g, TGC_OP_SILU, gb_un(g, TGC_OP_GELU, x)); /* f16 */
    gb_outputs(g, &o, 1);
    kir_kernel *k = lower_single(g, gb_target(), 1);
    expect_primitives_only(k);
    /* each op casts its f16 operand up once and its value down once: half-precision rounds
     * where interp rounds, after each op */
    assert_int_equal(count_op_vals(k, TGC_OP_CAST, TGC_F32), 2);
    assert_int_equal(count_op_vals(k, TGC_OP_CAST, TGC_F16), 2);
    assert_int_equal(count_op_vals(k, TGC_OP_ERF, TGC_F32), 1);
    assert_int_equal(count_op_vals(k, TGC_OP_EXP, TGC_F32), 1); /* silu's sigmoid, nested */
    assert_int_equal(count_op_vals(k, TGC_OP_DIV, TGC_F32), 1);
    assert_int_equal(k->vals[k->stores[0].val].op, TGC_OP_CAST);
    assert_int_equal(k->vals[k->stores[0].val].dtype, TGC_F16);
    kir_kernel_free(k);
    tgc_graph_free(g);

    /* f32 needs no casts; every composite op at once */
    g = tgc_graph_create();
    x = gb_input(g, TGC_F32, 2, s);
    int32_t v = x;
    for (int i = 0; i < N_OF(g_composites); i++)
        v = gb_bin(g, TGC_OP_ADD, gb_un(g, g_composites[i], v), v);
    gb_outputs(g, &v, 1);
    k = lower_single(g, gb_target(), 1);
    expect_primitives_only(k);
    assert_int_equal(count_op_vals(k, TGC_OP_CAST, TGC_DTYPE_COUNT), 0);
    assert_int_equal(count_op_vals(k, TGC_OP_TANH, TGC_F32), 1);
    assert_int_equal(count_op_vals(k, TGC_OP_SQRT, TGC_F32), 1);
    kir_kernel_free(k);
    tgc_graph_free(g);

    /* a GEMM epilogue: linear then gelu */
    g = tgc_graph_create();
    tgc_sdim sx[2] = {8, 16}, sw[2] = {12, 16};
    int32_t in[2] = {gb_input(g, TGC_F32, 2, sx), gb_input(g, TGC_F32, 2, sw)};
    o = gb_un(g, TGC_OP_GELU, gb_op(g, TGC_OP_LINEAR, in, 2, NULL));
    gb_outputs(g, &o, 1);
    k = lower_single(g, gb_target(), 1);
    assert_int_equal(k->kind, KIR_GEMM);
    expect_primitives_only(k);
    assert_int_equal(k->vals[k->result].op, TGC_OP_MUL);
    assert_int_equal(count_op_vals(k, TGC_OP_ERF, TGC_F32), 1);
    kir_kernel_free(k);
    tgc_graph_free(g);
}

/* ---- LLVM: math by its libm name ---- */

#ifdef TGC_HAVE_LLVM
typedef void (*vec_fn)(const float *x, float *y);
typedef void (*dbl_fn)(const double *x, double *y);

/* y[0..8) = name(x[0..8)) as one 8-lane vector, and the same on one double. */
static void jit_math(const char *name, vec_fn *vf, dbl_fn *df, tgc_llvm_code **code)
{
    tgc_llvm_unit u;
    assert_int_equal(tgc_llvm_unit_begin(&u, "math_test"), TGC_OK);
    LLVMTypeRef params[2] = {u.t_ptr, u.t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(u.t_void, params, 2, 0);
    char fv[64], fd[64];
    tgc_llvm_unit_name(&u, "v", fv, sizeof fv);
    tgc_llvm_unit_name(&u, "d", fd, sizeof fd);
    for (int which = 0; which < 2; which++) {
        LLVMValueRef fn = tgc_llvm_add_function(&u, which ? fd : fv, fty);
        LLVMPositionBuilderAtEnd(u.b, LLVMAppendBasicBlockInContext(u.ctx, fn, "entry"));
        LLVMTypeRef t = which ? u.t_f64 : LLVMVectorType(u.t_f32, 8);
        LLVMValueRef x = LLVMBuildLoad2(u.b, t, LLVMGetParam(fn, 0), "");
        LLVMSetAlignment(x, 4);
        LLVMValueRef st = LLVMBuildStore(u.b, tgc_lm_unary(&u, name, x), LLVMGetParam(fn, 1));
        LLVMSetAlignment(st, 4);
        LLVMBuildRetVoid(u.b);
    }
    if (tgc_llvm_unit_finish(&u, code, NULL, NULL) != TGC_OK)
        fail_msg("%s", tgc_last_error());
    *vf = (vec_fn)tgc_llvm_code_lookup(*code, "v");
    *df = (dbl_fn)tgc_llvm_code_lookup(*code, "d");
    assert_non_null(*vf);
    assert_non_null(*df);
}

static void llvm_renders_math_by_name(void **state)
{
    (void)state;
    const float xs[8] = {0.0f, -0.5f, 1.25f, 3.0f, -7.5f, 100.0f, 1e-20f, 0.75f};
    float y[8];
    double d, dx = 0.625;
    /* names without vector code of their own: the C library's function, lane by lane, so a
     * new math primitive needs only its name */
    static const char *const lib[] = {"sin", "cos", "expm1", "atan"};
    static float (*const ff[])(float) = {sinf, cosf, expm1f, atanf};
    static double (*const fd[])(double) = {sin, cos, expm1, atan};
    for (int i = 0; i < N_OF(lib); i++) {
        assert_false(tgc_lm_has_vector(lib[i]));
        vec_fn vf;
        dbl_fn df;
        tgc_llvm_code *code;
        jit_math(lib[i], &vf, &df, &code);
        vf(xs, y);
        for (int l = 0; l < 8; l++)
            if (y[l] != ff[i](xs[l]))
                fail_msg("%s lane %d: %.9g, libm %.9g", lib[i], l, y[l], ff[i](xs[l]));
        df(&dx, &d);
        assert_true(d == fd[i](dx));
        tgc_llvm_code_free(code);
    }
    /* the vector code of llvm_math.c, within its documented accuracy */
    static const char *const vec[] = {"exp", "log", "tanh", "erf", "sqrt"};
    static double (*const vd[])(double) = {exp, log, tanh, erf, sqrt};
    for (int i = 0; i < N_OF(vec); i++) {
        assert_true(tgc_lm_has_vector(vec[i]));
        vec_fn vf;
        dbl_fn df;
        tgc_llvm_code *code;
        jit_math(vec[i], &vf, &df, &code);
        const float pos[8] = {0.5f, 1.0f, 2.0f, 3.5f, 0.01f, 7.0f, 0.25f, 1.5f};
        vf(pos, y);
        for (int l = 0; l < 8; l++) {
            double want = vd[i](pos[l]);
            if (fabs(y[l] - want) > 1e-6 * fmax(1.0, fabs(want)))
                fail_msg("%s lane %d: %.9g, libm %.9g", vec[i], l, y[l], want);
        }
        df(&dx, &d);
        assert_true(d == vd[i](dx)); /* f64: libm itself */
        tgc_llvm_code_free(code);
    }
}

static void llvm_supports_composites_through_their_primitives(void **state)
{
    (void)state;
    static const tgc_dtype fl[] = {TGC_F32, TGC_F64, TGC_F16, TGC_BF16};
    for (int i = 0; i < N_OF(g_composites); i++)
        for (int d = 0; d < N_OF(fl); d++)
            assert_true(tgc_llvm_pointwise_supported(g_composites[i], fl[d], &fl[d], 1));
    tgc_dtype i64 = TGC_I64, b = TGC_BOOL;
    assert_true(tgc_llvm_pointwise_supported(TGC_OP_SIGMOID, TGC_F32, &i64, 1));
    assert_true(tgc_llvm_pointwise_supported(TGC_OP_SIGMOID, TGC_F32, &b, 1));
    /* every math primitive, from its name alone */
    for (int op = 0; op < TGC_OP_COUNT; op++)
        if (tgc_op_math_fn((tgc_op)op)) {
            for (int d = 0; d < N_OF(fl); d++)
                assert_true(tgc_llvm_pointwise_supported((tgc_op)op, fl[d], &fl[d], 1));
            assert_false(tgc_llvm_pointwise_supported((tgc_op)op, TGC_I64, &i64, 1));
        }
    assert_true(tgc_llvm_pointwise_supported(TGC_OP_RELU, TGC_I64, &i64, 1));
    assert_false(tgc_llvm_pointwise_supported(TGC_OP_SOFTMAX, TGC_F32, fl, 1));
}
#endif

/* ---- CUDA: the native fallback's programs, and the renderer's input ---- */

#ifdef TGC_HAVE_CUDA
static void cuda_native_pointwise_programs_are_primitive_steps(void **state)
{
    (void)state;
    ops_pw pw;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        const tgc_op_info *info = tgc_op_info_of((tgc_op)op);
        if (info->kind != TGC_KIND_BINARY && info->kind != TGC_KIND_COMPARE &&
            info->kind != TGC_KIND_TERNARY && info->kind != TGC_KIND_SCALAR &&
            info->kind != TGC_KIND_UNARY)
            continue;
        tgc_attrs a = {.nf = 2, .f = {0.5, 2.0}};
        memset(&pw, 0, sizeof pw);
        assert_int_equal(tgc_cuda_ops_pw_program((tgc_op)op, &a, info->min_inputs, &pw), 1);
        if (!tgc_op_has_formula((tgc_op)op)) { /* a primitive is its one step */
            assert_int_equal(pw.n_steps, 1);
            assert_int_equal(pw.step[0].op, op);
            assert_int_equal(pw.step[0].a, 0);
            assert_int_equal(pw.step[0].b, info->min_inputs > 1 ? 1 : 0);
            assert_true(pw.step[0].f0 == 0.5 && pw.step[0].f1 == 2.0);
            continue;
        }
        assert_true(pw.n_steps > 1 && pw.n_steps <= OPS_PW_STEPS);
        for (int s = 0; s < pw.n_steps; s++) {
            const ops_pw_step *st = &pw.step[s];
            assert_true(st->op == OPS_PW_CONST || !tgc_op_has_formula((tgc_op)st->op));
            assert_true(st->a < 3 + s && st->b < 3 + s && st->c < 3 + s); /* earlier values */
        }
    }
    /* gelu: x * 0.5, x * (1/sqrt 2), erf, + 1, the product (casts are the kernel's loads
     * and store) */
    memset(&pw, 0, sizeof pw);
    assert_int_equal(tgc_cuda_ops_pw_program(TGC_OP_GELU, NULL, 1, &pw), 1);
    assert_int_equal(pw.n_steps, 5);
    assert_int_equal(pw.step[0].op, TGC_OP_MUL_SCALAR);
    assert_true(pw.step[0].f0 == 0.5);
    assert_int_equal(pw.step[2].op, TGC_OP_ERF);
    assert_int_equal(pw.step[2].a, 3 + 1);
    assert_int_equal(pw.step[4].op, TGC_OP_MUL);
    assert_int_equal(pw.step[4].a, 3 + 0);
    assert_int_equal(pw.step[4].b, 3 + 3);
    assert_int_equal(tgc_cuda_ops_pw_program(TGC_OP_GELU, NULL, 0, &pw), 0);
}

static void cuda_renderer_sees_primitives_only(void **state)
{
    (void)state;
    static const tgc_dtype dts[] = {TGC_F32, TGC_F16, TGC_F64};
    tgc_strbuf all = {0};
    tgc_sb_puts(&all, tgc_cuda_prelude());
    for (int d = 0; d < N_OF(dts); d++) {
        tgc_graph *g = tgc_graph_create();
        tgc_sdim s[1] = {1000};
        int32_t x = gb_input(g, dts[d], 1, s), v = x;
        for (int i = 0; i < N_OF(g_composites); i++)
            v = gb_bin(g, TGC_OP_ADD, gb_un(g, g_composites[i], v), x);
        gb_outputs(g, &v, 1);
        kir_kernel *k = lower_single(g, tgc_cuda_kir_target(), 1);
        expect_primitives_only(k);
        kir_args sl = {0};
        assert_int_equal(kir_args_collect(k, &sl), TGC_OK);
        tgc_strbuf sb = {0};
        char name[32];
        snprintf(name, sizeof name, "composites_%d", d);
        tgc_cuda_launch ln;
        assert_int_equal(tgc_cuda_render_loop(&sb, k, &sl, name, &ln), TGC_OK);
        char *t = tgc_sb_take(&sb);
        assert_non_null(t);
        static const char *const helpers[] = {"tgc_gelu(", "tgc_gelu_tanh(", "tgc_silu(",
                                              "tgc_sigmoid("};
        for (int h = 0; h < N_OF(helpers); h++)
            if (strstr(t, helpers[h]))
                fail_msg("the kernel calls %s:\n%s", helpers[h], t);
        assert_non_null(strstr(t, dts[d] == TGC_F64 ? "erf(" : "erff("));
        tgc_sb_puts(&all, t);
        free(t);
        kir_args_free(&sl);
        kir_kernel_free(k);
        tgc_graph_free(g);
    }
    char *src = tgc_sb_take(&all);
    assert_non_null(src);
    if (tgc_nvrtc_load() == TGC_OK) {
        char *cubin = NULL;
        size_t size = 0;
        if (tgc_nvrtc_compile("composites", src, 90, &cubin, &size, NULL) != TGC_OK)
            fail_msg("%s", tgc_last_error());
        assert_true(size > 0);
        free(cubin);
    } else {
        tgc_clear_error();
        print_message("libnvrtc is not loadable here: the NVRTC compile was skipped\n");
    }
    free(src);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(table_names_composites_primitives_and_math, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(formulas_equal_interp_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(sigmoid_formula_saturates, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(modern_decompositions_equal_interp_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(decompositions_equal_interp_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(batch_norm_decomposition_requires_eval_with_stats,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(language_expresses_group_norm, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(language_attributes_conditions_and_sharing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(support_asks_about_every_primitive, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(lowering_expands_composites_into_primitives, scoped_setup,
                                        scoped_teardown),
#ifdef TGC_HAVE_LLVM
        cmocka_unit_test_setup_teardown(llvm_renders_math_by_name, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(llvm_supports_composites_through_their_primitives,
                                        scoped_setup, scoped_teardown),
#endif
#ifdef TGC_HAVE_CUDA
        cmocka_unit_test_setup_teardown(cuda_native_pointwise_programs_are_primitive_steps,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(cuda_renderer_sees_primitives_only, scoped_setup,
                                        scoped_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
