/* Row load/store helpers shared by the interp kernels (k_pointwise.c, k_reduce.c).
 *
 * Each moves n elements between a strided row of a tensor buffer and a contiguous double or
 * int64 array: base points at element 0 of the buffer, off is the row's first element and st
 * its stride, both in elements. The conversions are those of tgc_load / tgc_store, with the
 * common dtypes inlined as plain loops; the rest go through tgc_load / tgc_store.
 *   load_f64   any dtype to double
 *   load_i64   an integer or bool dtype to int64 (the kernels' exact integer paths)
 *   store_f64  double to any dtype (float to integer saturates, NaN becomes 0)
 *   store_i64  int64 to an integer or bool dtype (i32 wraps like a C cast)
 * They are static inline so each kernel file gets its own copy, compiled with that file's
 * flags; none of them is used by the f32 vectorized loops, which read the buffers directly. */
#ifndef TGC_BACKEND_INTERP_ROWS_H
#define TGC_BACKEND_INTERP_ROWS_H

#include <stdint.h>

#include "tensor/tensor_impl.h"

static inline void load_f64(const void *base, tgc_dtype dt, int64_t off, int64_t st, int64_t n,
                            double *dst)
{
    switch (dt) {
    case TGC_F32:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)base)[off + i * st];
        break;
    case TGC_F64:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const double *)base)[off + i * st];
        break;
    case TGC_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = tgc_half_to_float(((const uint16_t *)base)[off + i * st]);
        break;
    case TGC_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = tgc_bf16_to_float(((const uint16_t *)base)[off + i * st]);
        break;
    case TGC_I32:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const int32_t *)base)[off + i * st];
        break;
    case TGC_I64:
        for (int64_t i = 0; i < n; i++) dst[i] = (double)((const int64_t *)base)[off + i * st];
        break;
    default:
        for (int64_t i = 0; i < n; i++) dst[i] = tgc_load(base, dt, off + i * st);
        break;
    }
}

static inline void load_i64(const void *base, tgc_dtype dt, int64_t off, int64_t st, int64_t n,
                            int64_t *dst)
{
    switch (dt) {
    case TGC_I32:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const int32_t *)base)[off + i * st];
        break;
    case TGC_I64:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const int64_t *)base)[off + i * st];
        break;
    case TGC_BOOL:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const uint8_t *)base)[off + i * st] != 0;
        break;
    default: /* only integer dtypes take the int path */
        for (int64_t i = 0; i < n; i++) dst[i] = (int64_t)tgc_load(base, dt, off + i * st);
        break;
    }
}

/* Float to integer stores go through tgc_store, which saturates and maps NaN to 0. */
static inline void store_f64(void *base, tgc_dtype dt, int64_t off, int64_t st, int64_t n,
                             const double *src)
{
    switch (dt) {
    case TGC_F32:
        for (int64_t i = 0; i < n; i++) ((float *)base)[off + i * st] = (float)src[i];
        break;
    case TGC_F64:
        for (int64_t i = 0; i < n; i++) ((double *)base)[off + i * st] = src[i];
        break;
    case TGC_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)base)[off + i * st] = tgc_float_to_half((float)src[i]);
        break;
    case TGC_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)base)[off + i * st] = tgc_float_to_bf16((float)src[i]);
        break;
    case TGC_BOOL:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)base)[off + i * st] = src[i] != 0;
        break;
    default:
        for (int64_t i = 0; i < n; i++) tgc_store(base, dt, off + i * st, src[i]);
        break;
    }
}

static inline void store_i64(void *base, tgc_dtype dt, int64_t off, int64_t st, int64_t n,
                             const int64_t *src)
{
    switch (dt) {
    case TGC_I32: /* wraps like a C cast, as PyTorch's int32 arithmetic does */
        for (int64_t i = 0; i < n; i++) ((int32_t *)base)[off + i * st] = (int32_t)src[i];
        break;
    case TGC_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)base)[off + i * st] = src[i];
        break;
    case TGC_BOOL:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)base)[off + i * st] = src[i] != 0;
        break;
    default: /* only integer dtypes take the int path */
        for (int64_t i = 0; i < n; i++) tgc_store(base, dt, off + i * st, (double)src[i]);
        break;
    }
}

#endif
