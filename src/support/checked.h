/* Overflow-checked int64 arithmetic: the one place shape, stride, numel and offset
 * arithmetic goes through. Each helper stores the exact result in *r and returns 1, or
 * returns 0 when the result does not fit in int64 (*r is then unspecified). */
#ifndef TGC_SUPPORT_CHECKED_H
#define TGC_SUPPORT_CHECKED_H

#include <stdint.h>

static inline int tgc_add_ok(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}

static inline int tgc_sub_ok(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_sub_overflow(a, b, r);
}

static inline int tgc_mul_ok(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

/* Floor division (rounds toward negative infinity); fails for b == 0 and INT64_MIN / -1. */
static inline int tgc_floordiv_ok(int64_t a, int64_t b, int64_t *r)
{
    if (b == 0 || (a == INT64_MIN && b == -1))
        return 0;
    int64_t q = a / b;
    *r = (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
    return 1;
}

/* The product of shape[0..ndim) with sizes of 0 counted as 1 ("extent"): bounds every
 * contiguous stride and the numel. Returns 0 on a negative size or int64 overflow. */
static inline int tgc_extent_ok(const int64_t *shape, int ndim, int64_t *r)
{
    int64_t p = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || !tgc_mul_ok(p, shape[i] ? shape[i] : 1, &p))
            return 0;
    *r = p;
    return 1;
}

#endif
