/* Helpers shared by the op tests of tests/ops: input tensors made from host arrays, results
 * read back as doubles, and checks of values, shapes and error paths.
 *
 * Tolerances: a value got matches want when |got - want| <= tol * (scale + |want|), a NaN
 * want matching only NaN and an infinite want only the same infinity. Two scales are used:
 *   TOL_SCALE_REL (1e-3): relative, with a small floor near 0. expect_values, expect_f32 and
 *     close_to use it (the pointwise and reduce tests).
 *   TOL_SCALE_ALLCLOSE (1): absolute near 0, relative for large values, i.e. numpy's allclose
 *     with atol = rtol = tol. expect_allclose uses it (the nn and linalg tests).
 * tol = 0 asks for exact values with either scale.
 *
 * Everything is static inline, so a test file that uses only some of it compiles without
 * unused-function warnings. */
#ifndef TGC_TESTS_OPS_OP_TEST_UTIL_H
#define TGC_TESTS_OPS_OP_TEST_UTIL_H

/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "tgc/tgc.h"

#define N_OF(a)    ((int)(sizeof(a) / sizeof((a)[0])))
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...)  ((const double[]){__VA_ARGS__})

#define TOL_SCALE_REL      1e-3
#define TOL_SCALE_ALLCLOSE 1.0

/* ---- making inputs ---- */

static inline int64_t numel_of(const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

/* A contiguous tensor of dtype dt holding v, converted as tgc_store converts. */
static inline tgc_tensor *from_doubles(const double *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t n = numel_of(shape, nd);
    size_t es = tgc_dtype_size(dt);
    unsigned char *buf = malloc((size_t)(n ? n : 1) * es);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++)
        tgc_store(buf, dt, i, v[i]);
    tgc_tensor *t = tgc_from_data(buf, (size_t)n * es, shape, nd, dt, tgc_cpu());
    free(buf);
    assert_non_null(t);
    return t;
}

/* from_doubles for float values (each is exact as a double). */
static inline tgc_tensor *from_floats(const float *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t n = numel_of(shape, nd);
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++)
        d[i] = v[i];
    tgc_tensor *t = from_doubles(d, shape, nd, dt);
    free(d);
    return t;
}

static inline tgc_tensor *f32s(const float *v, const int64_t *shape, int nd)
{
    tgc_tensor *t = tgc_from_data(v, sizeof(float) * (size_t)numel_of(shape, nd), shape, nd,
                                  TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

static inline tgc_tensor *i64s(const int64_t *v, const int64_t *shape, int nd)
{
    tgc_tensor *t = tgc_from_data(v, sizeof(int64_t) * (size_t)numel_of(shape, nd), shape, nd,
                                  TGC_I64, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* A tensor of the given shape holding 0, 1, 2, ... in row-major order. */
static inline tgc_tensor *iota(const int64_t *shape, int nd, tgc_dtype dt)
{
    int64_t n = numel_of(shape, nd);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i;
    tgc_tensor *t = from_doubles(v, shape, nd, dt);
    free(v);
    return t;
}

/* ---- reading results ---- */

/* The elements of t in row-major order, as doubles (caller frees); NULL when they cannot be
 * read. Asserts nothing, for callers that report failures their own way. */
static inline double *try_values_of(const tgc_tensor *t)
{
    int64_t n = tgc_numel(t);
    size_t es = tgc_dtype_size(tgc_dtype_of(t));
    unsigned char *raw = malloc((size_t)(n ? n : 1) * es);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!raw || !v || tgc_copy_to_host(t, raw, (size_t)n * es) != TGC_OK) {
        free(raw);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = tgc_load(raw, tgc_dtype_of(t), i);
    free(raw);
    return v;
}

/* try_values_of that fails the test when t is NULL or cannot be read. */
static inline double *values_of(const tgc_tensor *t)
{
    if (!t)
        fail_msg("op failed: %s", tgc_last_error());
    double *v = try_values_of(t);
    if (!v)
        fail_msg("cannot read the tensor's values: %s", tgc_last_error());
    return v;
}

/* ---- checking ---- */

/* |got - want| <= tol * (scale + |want|); see the top of this file. */
static inline int values_close(double got, double want, double tol, double scale)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= tol * (scale + fabs(want));
}

static inline int close_to(double got, double want, double tol)
{
    return values_close(got, want, tol, TOL_SCALE_REL);
}

static inline void expect_shape(const tgc_tensor *t, const int64_t *shape, int nd)
{
    int64_t got[TGC_MAX_DIMS];
    assert_non_null(t);
    assert_int_equal(tgc_shape(t, got), nd);
    for (int d = 0; d < nd; d++)
        assert_int_equal(got[d], shape[d]);
}

/* t has n elements, in row-major order within tol of want (any dtype). */
static inline void expect_elements_near(const tgc_tensor *t, const double *want, int64_t n,
                                        double tol, double scale)
{
    if (!t)
        fail_msg("op failed: %s", tgc_last_error());
    assert_int_equal(tgc_numel(t), n);
    double *got = values_of(t);
    for (int64_t i = 0; i < n; i++)
        if (!values_close(got[i], want[i], tol, scale)) {
            double g = got[i];
            free(got);
            fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g, want[i]);
        }
    free(got);
}

/* t has exactly the n values want, in row-major order (any dtype, shape not checked). */
static inline void expect_elements(const tgc_tensor *t, const double *want, int64_t n)
{
    expect_elements_near(t, want, n, 0, TOL_SCALE_REL);
}

/* t has dtype dt, the given shape, and values within tol of want at the given scale. */
static inline void expect_values_near(const tgc_tensor *t, tgc_dtype dt, const int64_t *shape,
                                      int nd, const double *want, double tol, double scale)
{
    if (!t)
        fail_msg("op failed: %s", tgc_last_error());
    assert_int_equal(tgc_dtype_of(t), dt);
    expect_shape(t, shape, nd);
    expect_elements_near(t, want, numel_of(shape, nd), tol, scale);
}

/* expect_values_near for float wants. */
static inline void expect_floats_near(const tgc_tensor *t, tgc_dtype dt, const int64_t *shape,
                                      int nd, const float *want, double tol, double scale)
{
    int64_t n = numel_of(shape, nd);
    double *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(w);
    for (int64_t i = 0; i < n; i++)
        w[i] = want[i];
    expect_values_near(t, dt, shape, nd, w, tol, scale);
    free(w);
}

/* Dtype, shape and values, relative tolerance tol (TOL_SCALE_REL). */
static inline void expect_values(const tgc_tensor *t, tgc_dtype dt, const int64_t *shape, int nd,
                                 const double *want, double tol)
{
    expect_values_near(t, dt, shape, nd, want, tol, TOL_SCALE_REL);
}

/* expect_values for an f32 result and float wants. */
static inline void expect_f32(const tgc_tensor *t, const int64_t *shape, int nd, const float *want,
                              double tol)
{
    expect_floats_near(t, TGC_F32, shape, nd, want, tol, TOL_SCALE_REL);
}

/* Dtype, shape and values within tol * (1 + |want|) (TOL_SCALE_ALLCLOSE), float wants. */
static inline void expect_allclose(const tgc_tensor *t, tgc_dtype dt, const int64_t *shape, int nd,
                                   const float *want, double tol)
{
    expect_floats_near(t, dt, shape, nd, want, tol, TOL_SCALE_ALLCLOSE);
}

/* Exact i64 contents (n <= 8), read without passing through double. */
static inline void expect_i64_exact(const tgc_tensor *t, const int64_t *want, int64_t n)
{
    int64_t got[8];
    assert_non_null(t);
    assert_true(n <= 8);
    assert_int_equal(tgc_dtype_of(t), TGC_I64);
    assert_int_equal(tgc_numel(t), n);
    assert_int_equal(tgc_copy_to_host(t, got, sizeof(int64_t) * (size_t)n), TGC_OK);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

/* A NULL result with status st and a message that contains part1 and part2 (either may be
 * NULL); clears the error. */
static inline void expect_error_both(const void *result, tgc_status st, const char *part1,
                                     const char *part2)
{
    assert_null(result);
    assert_int_equal(tgc_last_status(), st);
    if (part1 && !strstr(tgc_last_error(), part1))
        fail_msg("error \"%s\" lacks \"%s\"", tgc_last_error(), part1);
    if (part2 && !strstr(tgc_last_error(), part2))
        fail_msg("error \"%s\" lacks \"%s\"", tgc_last_error(), part2);
    tgc_clear_error();
}

static inline void expect_error(const void *result, tgc_status st, const char *msg_part)
{
    expect_error_both(result, st, msg_part, NULL);
}

/* ---- fixtures: every test runs in its own scope, whose pop frees what it made ---- */

static inline int scope_setup(void **state)
{
    (void)state;
    tgc_clear_error();
    tgc_scope_push();
    return 0;
}

static inline int scope_teardown(void **state)
{
    (void)state;
    return tgc_scope_pop() == TGC_OK ? 0 : -1;
}

static inline int group_teardown(void **state)
{
    (void)state;
    tgc_shutdown();
    return 0;
}

#endif
