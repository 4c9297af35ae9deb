/* Helpers shared by the model tests (include after <cmocka.h>). */
#ifndef TGC_TESTS_MODEL_TEST_UTIL_H
#define TGC_TESTS_MODEL_TEST_UTIL_H

#include <math.h>
#include <stdlib.h>

#include "tgc/tensor.h"

/* Equal shapes, finite values, and max |a - b| <= rtol * max |b| (f32 results). */
static inline void assert_close(tgc_tensor *a, tgc_tensor *b, double rtol)
{
    assert_non_null(a);
    assert_non_null(b);
    int64_t n = tgc_numel(a);
    assert_int_equal(n, tgc_numel(b));
    assert_int_equal(tgc_ndim(a), tgc_ndim(b));
    for (int d = 0; d < tgc_ndim(a); d++)
        assert_int_equal(tgc_size(a, d), tgc_size(b, d));
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(tgc_copy_to_host(a, x, (size_t)n * sizeof(float)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(b, y, (size_t)n * sizeof(float)), TGC_OK);
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(isfinite(x[i]) && isfinite(y[i]));
        diff = fmax(diff, fabs((double)x[i] - y[i]));
        ref = fmax(ref, fabs((double)y[i]));
    }
    free(x);
    free(y);
    if (diff > rtol * ref)
        fail_msg("max |diff| %g > %g * max |ref| %g", diff, rtol, ref);
}

#endif
