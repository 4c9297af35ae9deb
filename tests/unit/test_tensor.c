/* Tensors through the public API (tgc/tensor.h): every creation function for every dtype,
 * the f16/bf16 conversions (known bit patterns, round to nearest even, subnormals, NaN,
 * every f16 pattern round-tripped), geometry queries, copies, scalars, devices, the random
 * generator, status and dtype names, and each bad argument's exact status and message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "tgc/cuda.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* Huge allocations must come back as NULL (TGC_ERR_OOM) under ASan too, not abort. */
const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static const tgc_dtype all_dtypes[] = {TGC_F32, TGC_F16,  TGC_BF16, TGC_I32,
                                       TGC_I64, TGC_BOOL, TGC_F64};
static const tgc_dtype float_dtypes[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};

/* ---- helpers ---- */

/* A NULL result with `want` and a message containing text. */
static void check_null(const tgc_tensor *t, tgc_status want, const char *text)
{
    assert_null(t);
    check_error(tgc_last_status(), want, text);
}

static uint16_t half_bits_of(const tgc_tensor *t)
{
    uint16_t h = 0;
    assert_int_equal(tgc_copy_to_host(t, &h, sizeof h), TGC_OK);
    return h;
}

/* f16 or bf16 bits that tgc_full stores for value. */
static uint16_t full16(double v, tgc_dtype dt)
{
    const int64_t one = 1;
    tgc_tensor *t = tgc_full(&one, 1, v, dt, tgc_cpu());
    assert_non_null(t);
    uint16_t h = half_bits_of(t);
    tgc_tensor_free(t);
    return h;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of a host buffer of dtype dt, as double. */
static double host_elem(const void *buf, tgc_dtype dt, int64_t i)
{
    return tgc_load(buf, dt, i);
}

static tgc_tensor *from_i64(const int64_t *v, const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    tgc_tensor *t = tgc_from_data(v, (size_t)n * 8, shape, nd, TGC_I64, tgc_cpu());
    assert_non_null(t);
    return t;
}

static tgc_tensor *from_f32(const float *v, const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    tgc_tensor *t = tgc_from_data(v, (size_t)n * 4, shape, nd, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* ---- names ---- */

static void test_status_str_every_status(void **state)
{
    (void)state;
    static const char *const want[] = {
        "TGC_OK",           "TGC_ERR_INVALID_ARG", "TGC_ERR_SHAPE",       "TGC_ERR_DTYPE",
        "TGC_ERR_DEVICE",   "TGC_ERR_OOM",         "TGC_ERR_UNSUPPORTED", "TGC_ERR_COMPILE",
        "TGC_ERR_RUNTIME",  "TGC_ERR_CACHE_LIMIT", "TGC_ERR_GRAPH_BREAK", "TGC_ERR_IO",
        "TGC_ERR_INTERNAL", "TGC_ERR_TIMEOUT",     "TGC_ERR_MISMATCH",
    };
    assert_int_equal(N_OF(want), TGC_STATUS_COUNT);
    assert_int_equal(TGC_OK, 0);
    for (int s = 0; s < TGC_STATUS_COUNT; s++)
        assert_string_equal(tgc_status_str((tgc_status)s), want[s]);
    /* never NULL, even for values outside the enum */
    assert_non_null(tgc_status_str(TGC_STATUS_COUNT));
    assert_non_null(tgc_status_str((tgc_status)-1));
    assert_non_null(tgc_status_str((tgc_status)1000));
    assert_string_not_equal(tgc_status_str(TGC_STATUS_COUNT), "TGC_OK");
}

static void test_dtype_names_and_sizes(void **state)
{
    (void)state;
    static const char *const names[] = {"f32", "f16", "bf16", "i32", "i64", "bool", "f64"};
    static const size_t sizes[] = {4, 2, 2, 4, 8, 1, 8};
    for (int i = 0; i < N_OF(all_dtypes); i++) {
        assert_string_equal(tgc_dtype_name(all_dtypes[i]), names[i]);
        assert_int_equal(tgc_dtype_size(all_dtypes[i]), sizes[i]);
    }
    assert_non_null(tgc_dtype_name(TGC_DTYPE_COUNT));
    assert_non_null(tgc_dtype_name((tgc_dtype)-1));
    assert_int_equal(tgc_dtype_size(TGC_DTYPE_COUNT), 0);
    assert_int_equal(tgc_dtype_size((tgc_dtype)-1), 0);
}

static void test_devices(void **state)
{
    (void)state;
    tgc_device c = tgc_cpu(), g = tgc_cuda(3);
    assert_int_equal(c.type, TGC_DEVICE_CPU);
    assert_int_equal(c.index, 0);
    assert_int_equal(g.type, TGC_DEVICE_CUDA);
    assert_int_equal(g.index, 3);
}

static void test_last_error_clear(void **state)
{
    (void)state;
    assert_int_equal(tgc_last_status(), TGC_OK);
    assert_string_equal(tgc_last_error(), "");
    const int64_t shape[] = {-1};
    assert_null(tgc_zeros(shape, 1, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_not_equal(tgc_last_error(), "");
    tgc_clear_error();
    assert_int_equal(tgc_last_status(), TGC_OK);
    assert_string_equal(tgc_last_error(), "");
}

/* ---- creation: geometry ---- */

static void check_geometry(const tgc_tensor *t, const int64_t *shape, int nd, tgc_dtype dt)
{
    assert_non_null(t);
    assert_int_equal(tgc_ndim(t), nd);
    assert_int_equal(tgc_dtype_of(t), dt);
    tgc_device dev = tgc_device_of(t);
    assert_int_equal(dev.type, TGC_DEVICE_CPU);
    assert_int_equal(dev.index, 0);
    int64_t got[TGC_MAX_DIMS];
    assert_int_equal(tgc_shape(t, got), nd);
    int64_t numel = 1, stride = 1;
    for (int d = nd - 1; d >= 0; d--) {
        assert_int_equal(got[d], shape[d]);
        assert_int_equal(tgc_size(t, d), shape[d]);
        assert_int_equal(tgc_size(t, d - nd), shape[d]);
        if (shape[d] > 1)
            assert_int_equal(tgc_stride(t, d), stride);
        assert_int_equal(tgc_stride(t, d - nd), tgc_stride(t, d));
        stride *= shape[d];
        numel *= shape[d];
    }
    assert_int_equal(tgc_numel(t), numel);
    assert_true(tgc_is_contiguous(t));
}

static void test_empty_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3, 4};
    for (int i = 0; i < N_OF(all_dtypes); i++) {
        tgc_tensor *t = tgc_empty(shape, 3, all_dtypes[i], tgc_cpu());
        check_geometry(t, shape, 3, all_dtypes[i]);
        assert_int_equal(tgc_stride(t, 0), 12);
        assert_int_equal(tgc_stride(t, 1), 4);
        assert_int_equal(tgc_stride(t, 2), 1);
        assert_int_equal(tgc_stride(t, -1), 1);
        assert_int_equal(tgc_stride(t, -3), 12);
    }
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void test_empty_every_rank(void **state)
{
    (void)state;
    const int64_t shape[TGC_MAX_DIMS] = {2, 1, 3, 1, 2, 2, 1, 3};
    for (int nd = 0; nd <= TGC_MAX_DIMS; nd++) {
        tgc_tensor *t = tgc_empty(shape, nd, TGC_F32, tgc_cpu());
        check_geometry(t, shape, nd, TGC_F32);
    }
    /* 0-d with a NULL shape */
    tgc_tensor *s = tgc_empty(NULL, 0, TGC_I64, tgc_cpu());
    check_geometry(s, NULL, 0, TGC_I64);
    assert_int_equal(tgc_numel(s), 1);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void test_zero_size_dims(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 0, 3};
    tgc_tensor *t = tgc_zeros(shape, 3, TGC_F32, tgc_cpu());
    assert_non_null(t);
    assert_int_equal(tgc_numel(t), 0);
    assert_int_equal(tgc_size(t, 1), 0);
    assert_true(tgc_is_contiguous(t));
    assert_int_equal(tgc_copy_to_host(t, NULL, 0), TGC_OK);
    tgc_tensor *u = tgc_from_data(NULL, 0, shape, 3, TGC_I32, tgc_cpu());
    assert_non_null(u);
    assert_int_equal(tgc_numel(u), 0);
    tgc_tensor *o = tgc_ones(shape, 3, TGC_F16, tgc_cpu());
    assert_non_null(o);
    tgc_tensor *f = tgc_full(shape, 3, 7.0, TGC_BOOL, tgc_cpu());
    assert_non_null(f);
    tgc_tensor *r = tgc_rand(shape, 3, TGC_F32, tgc_cpu());
    assert_non_null(r);
    assert_int_equal(tgc_numel(r), 0);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* ---- creation: values ---- */

static void test_zeros_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[] = {3, 5};
    for (int i = 0; i < N_OF(all_dtypes); i++) {
        tgc_dtype dt = all_dtypes[i];
        tgc_tensor *t = tgc_zeros(shape, 2, dt, tgc_cpu());
        check_geometry(t, shape, 2, dt);
        unsigned char buf[15 * 8];
        memset(buf, 0xab, sizeof buf);
        size_t nb = 15 * tgc_dtype_size(dt);
        assert_int_equal(tgc_copy_to_host(t, buf, nb), TGC_OK);
        for (size_t k = 0; k < nb; k++)
            assert_int_equal(buf[k], 0);
        assert_true(tgc_item_f64(t) == 0.0);
        assert_int_equal(tgc_item_i64(t), 0);
    }
}

/* Bytes of one element of value v in dtype dt, as the IEEE/two's complement encoding. */
static void expect_bytes(const tgc_tensor *t, int64_t n, const void *elem)
{
    tgc_dtype dt = tgc_dtype_of(t);
    size_t es = tgc_dtype_size(dt);
    unsigned char *buf = malloc((size_t)n * es);
    assert_non_null(buf);
    assert_int_equal(tgc_copy_to_host(t, buf, (size_t)n * es), TGC_OK);
    for (int64_t i = 0; i < n; i++)
        assert_memory_equal(buf + (size_t)i * es, elem, es);
    free(buf);
}

static void test_ones_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[] = {4, 3};
    const float f = 1.0f;
    const uint16_t h = 0x3c00, b = 0x3f80;
    const int32_t i = 1;
    const int64_t l = 1;
    const uint8_t o = 1;
    const double d = 1.0;
    const void *want[] = {&f, &h, &b, &i, &l, &o, &d};
    for (int k = 0; k < N_OF(all_dtypes); k++) {
        tgc_tensor *t = tgc_ones(shape, 2, all_dtypes[k], tgc_cpu());
        check_geometry(t, shape, 2, all_dtypes[k]);
        expect_bytes(t, 12, want[k]);
        assert_true(tgc_item_f64(t) == 1.0);
        assert_int_equal(tgc_item_i64(t), 1);
    }
}

static void test_full_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[] = {5};
    {
        const float f = 2.5f;
        const uint16_t h = 0x4100, b = 0x4020;
        const int32_t i = 2; /* float to integer truncates toward zero */
        const int64_t l = 2;
        const uint8_t o = 1; /* nonzero is true */
        const double d = 2.5;
        const void *want[] = {&f, &h, &b, &i, &l, &o, &d};
        for (int k = 0; k < N_OF(all_dtypes); k++) {
            tgc_tensor *t = tgc_full(shape, 1, 2.5, all_dtypes[k], tgc_cpu());
            check_geometry(t, shape, 1, all_dtypes[k]);
            expect_bytes(t, 5, want[k]);
        }
    }
    {
        const float f = -2.5f;
        const uint16_t h = 0xc100, b = 0xc020;
        const int32_t i = -2;
        const int64_t l = -2;
        const uint8_t o = 1;
        const double d = -2.5;
        const void *want[] = {&f, &h, &b, &i, &l, &o, &d};
        for (int k = 0; k < N_OF(all_dtypes); k++) {
            tgc_tensor *t = tgc_full(shape, 1, -2.5, all_dtypes[k], tgc_cpu());
            expect_bytes(t, 5, want[k]);
        }
    }
    /* full(0) is all-zero bytes; a 0-d full holds one value */
    const uint8_t zero8[8] = {0};
    for (int k = 0; k < N_OF(all_dtypes); k++)
        expect_bytes(tgc_full(shape, 1, 0.0, all_dtypes[k], tgc_cpu()), 5, zero8);
    tgc_tensor *s = tgc_full(NULL, 0, 42.0, TGC_I32, tgc_cpu());
    assert_non_null(s);
    assert_int_equal(tgc_ndim(s), 0);
    assert_int_equal(tgc_item_i64(s), 42);
    /* integer saturation and NaN: no UB, clamped values */
    assert_int_equal(tgc_item_i64(tgc_full(shape, 1, 1e20, TGC_I32, tgc_cpu())), INT32_MAX);
    assert_int_equal(tgc_item_i64(tgc_full(shape, 1, -1e20, TGC_I32, tgc_cpu())), INT32_MIN);
    assert_int_equal(tgc_item_i64(tgc_full(shape, 1, NAN, TGC_I32, tgc_cpu())), 0);
    assert_true(isnan(tgc_item_f64(tgc_full(shape, 1, NAN, TGC_F32, tgc_cpu()))));
    assert_true(isinf(tgc_item_f64(tgc_full(shape, 1, -INFINITY, TGC_F64, tgc_cpu()))));
}

static void test_f16_known_values(void **state)
{
    (void)state;
    const double sub_min = ldexp(1.0, -24); /* smallest subnormal */
    assert_int_equal(full16(1.0, TGC_F16), 0x3c00);
    assert_int_equal(full16(-2.0, TGC_F16), 0xc000);
    assert_int_equal(full16(0.5, TGC_F16), 0x3800);
    assert_int_equal(full16(65504.0, TGC_F16), 0x7bff); /* largest finite */
    assert_int_equal(full16(65519.0, TGC_F16), 0x7bff); /* below the overflow threshold */
    assert_int_equal(full16(65520.0, TGC_F16), 0x7c00); /* rounds to inf */
    assert_int_equal(full16(-1e6, TGC_F16), 0xfc00);
    assert_int_equal(full16(INFINITY, TGC_F16), 0x7c00);
    assert_int_equal(full16(ldexp(1.0, -14), TGC_F16), 0x0400); /* smallest normal */
    assert_int_equal(full16(sub_min, TGC_F16), 0x0001);
    assert_int_equal(full16(1023 * sub_min, TGC_F16), 0x03ff); /* largest subnormal */
    assert_int_equal(full16(0.5 * sub_min, TGC_F16), 0x0000);  /* tie: to even (0) */
    assert_int_equal(full16(1.5 * sub_min, TGC_F16), 0x0002);  /* tie: to even (2) */
    assert_int_equal(full16(0.75 * sub_min, TGC_F16), 0x0001); /* above the tie */
    assert_int_equal(full16(-3 * sub_min, TGC_F16), 0x8003);
    assert_int_equal(full16(1.0 + ldexp(1.0, -11), TGC_F16), 0x3c00);     /* tie: to even */
    assert_int_equal(full16(1.0 + 3 * ldexp(1.0, -11), TGC_F16), 0x3c02); /* tie: to even */
    assert_int_equal(full16(1.0 + ldexp(1.0, -10), TGC_F16), 0x3c01);
    uint16_t n = full16(NAN, TGC_F16);
    assert_int_equal(n & 0x7c00, 0x7c00);
    assert_int_not_equal(n & 0x03ff, 0);
    assert_int_not_equal(n & 0x0200, 0); /* quiet */

    /* reading back */
    const int64_t one = 1;
    const uint16_t pats[] = {0x7bff, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xfc00, 0x8000};
    const double vals[] = {65504.0, sub_min, 1023 * sub_min, ldexp(1.0, -14), 1.0, -INFINITY, -0.0};
    for (int i = 0; i < N_OF(pats); i++) {
        tgc_tensor *t = tgc_from_data(&pats[i], 2, &one, 1, TGC_F16, tgc_cpu());
        assert_non_null(t);
        double v = tgc_item_f64(t);
        assert_true(v == vals[i]);
        assert_int_equal(signbit(v) != 0, signbit(vals[i]) != 0);
    }
    const uint16_t nan16 = 0x7e00;
    assert_true(isnan(tgc_item_f64(tgc_from_data(&nan16, 2, &one, 1, TGC_F16, tgc_cpu()))));
}

static void test_bf16_known_values(void **state)
{
    (void)state;
    assert_int_equal(full16(1.0, TGC_BF16), 0x3f80);
    assert_int_equal(full16(-2.0, TGC_BF16), 0xc000);
    assert_int_equal(full16(65504.0, TGC_BF16), 0x4780); /* 65536 is the nearest bf16 */
    assert_int_equal(full16(1.0 + ldexp(1.0, -8), TGC_BF16), 0x3f80);     /* tie: to even */
    assert_int_equal(full16(1.0 + 3 * ldexp(1.0, -8), TGC_BF16), 0x3f82); /* tie: to even */
    assert_int_equal(full16(1.0 + ldexp(1.0, -8) + ldexp(1.0, -20), TGC_BF16), 0x3f81);
    assert_int_equal(full16(1.0 + ldexp(1.0, -7), TGC_BF16), 0x3f81);
    assert_int_equal(full16(INFINITY, TGC_BF16), 0x7f80);
    assert_int_equal(full16(-INFINITY, TGC_BF16), 0xff80);
    assert_int_equal(full16(FLT_MAX, TGC_BF16), 0x7f80); /* rounds up to inf */
    /* the largest finite bf16 is exact */
    assert_int_equal(full16((double)f32_from_bits(0x7f7f0000u), TGC_BF16), 0x7f7f);
    /* subnormals keep their top 16 bits, rounded */
    assert_int_equal(full16((double)f32_from_bits(0x00010000u), TGC_BF16), 0x0001);
    assert_int_equal(full16((double)f32_from_bits(0x00018000u), TGC_BF16), 0x0002); /* tie */
    assert_int_equal(full16((double)f32_from_bits(0x00008000u), TGC_BF16), 0x0000); /* tie */
    assert_int_equal(full16((double)f32_from_bits(0x00008001u), TGC_BF16), 0x0001);
    uint16_t n = full16(NAN, TGC_BF16);
    assert_int_equal(n & 0x7f80, 0x7f80);
    assert_int_not_equal(n & 0x007f, 0);
    /* a NaN whose payload sits only in the low 16 bits must stay NaN (not become inf) */
    uint16_t n2 = full16((double)f32_from_bits(0x7f800001u), TGC_BF16);
    assert_int_equal(n2 & 0x7f80, 0x7f80);
    assert_int_not_equal(n2 & 0x007f, 0);

    const int64_t one = 1;
    const uint16_t pats[] = {0x3f80, 0x7f7f, 0x0001, 0xff80, 0x4049};
    for (int i = 0; i < N_OF(pats); i++) {
        tgc_tensor *t = tgc_from_data(&pats[i], 2, &one, 1, TGC_BF16, tgc_cpu());
        assert_non_null(t);
        assert_true(tgc_item_f64(t) == (double)f32_from_bits((uint32_t)pats[i] << 16));
    }
}

/* full(-0.0) stores negative zero, like every other value (not +0.0). */
static void test_full_negative_zero(void **state)
{
    (void)state;
    assert_int_equal(full16(-0.0, TGC_F16), 0x8000);
    assert_int_equal(full16(-0.0, TGC_BF16), 0x8000);
    const int64_t one = 1;
    float f;
    assert_int_equal(tgc_copy_to_host(tgc_full(&one, 1, -0.0, TGC_F32, tgc_cpu()), &f, 4), TGC_OK);
    assert_int_equal(f32_bits(f), 0x80000000u);
    double d = tgc_item_f64(tgc_full(&one, 1, -0.0, TGC_F64, tgc_cpu()));
    assert_true(d == 0.0 && signbit(d));
}

/* All 65536 patterns of a 16-bit float dtype, widened to f32 (wide) and narrowed back
 * (back). The caller frees the three arrays. */
static void roundtrip_every_pattern(tgc_dtype dt, uint16_t **pat, float **wide, uint16_t **back)
{
    const int64_t n = 65536;
    *pat = malloc(n * sizeof **pat);
    *back = malloc(n * sizeof **back);
    *wide = malloc(n * sizeof **wide);
    assert_non_null(*pat);
    assert_non_null(*back);
    assert_non_null(*wide);
    for (int64_t i = 0; i < n; i++)
        (*pat)[i] = (uint16_t)i;
    tgc_tensor *h = tgc_from_data(*pat, n * 2, &n, 1, dt, tgc_cpu());
    tgc_tensor *f = tgc_empty(&n, 1, TGC_F32, tgc_cpu());
    tgc_tensor *h2 = tgc_empty(&n, 1, dt, tgc_cpu());
    assert_int_equal(tgc_copy_(f, h), TGC_OK);
    assert_int_equal(tgc_copy_(h2, f), TGC_OK);
    assert_int_equal(tgc_copy_to_host(f, *wide, n * 4), TGC_OK);
    assert_int_equal(tgc_copy_to_host(h2, *back, n * 2), TGC_OK);
}

/* Every f16 pattern -> f32 -> f16 is the identity (NaNs stay NaN), and f16 -> f32 is exact. */
static void test_f16_roundtrip_every_pattern(void **state)
{
    (void)state;
    const int64_t n = 65536;
    uint16_t *pat, *back;
    float *wide;
    roundtrip_every_pattern(TGC_F16, &pat, &wide, &back);
    for (int64_t i = 0; i < n; i++) {
        int is_nan = (pat[i] & 0x7c00) == 0x7c00 && (pat[i] & 0x3ff);
        if (is_nan) {
            assert_true(isnan(wide[i]));
            assert_true((back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff));
            continue;
        }
        /* exact value of the f16 pattern */
        int e = (pat[i] >> 10) & 0x1f, m = pat[i] & 0x3ff;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
        if (pat[i] & 0x8000)
            v = -v;
        if (!(wide[i] == (float)v && !signbit(wide[i]) == !signbit(v)))
            fail_msg("f16 0x%04x read as %.9g, want %.9g", pat[i], (double)wide[i], v);
        if (back[i] != pat[i])
            fail_msg("f16 0x%04x came back as 0x%04x", pat[i], back[i]);
    }
    free(pat);
    free(back);
    free(wide);
}

/* Every bf16 pattern -> f32 -> bf16 is the identity (NaNs stay NaN). */
static void test_bf16_roundtrip_every_pattern(void **state)
{
    (void)state;
    const int64_t n = 65536;
    uint16_t *pat, *back;
    float *wide;
    roundtrip_every_pattern(TGC_BF16, &pat, &wide, &back);
    for (int64_t i = 0; i < n; i++) {
        int is_nan = (pat[i] & 0x7f80) == 0x7f80 && (pat[i] & 0x7f);
        if (is_nan) {
            assert_true(isnan(wide[i]));
            assert_true((back[i] & 0x7f80) == 0x7f80 && (back[i] & 0x7f));
            continue;
        }
        if (f32_bits(wide[i]) != (uint32_t)pat[i] << 16)
            fail_msg("bf16 0x%04x read as 0x%08x", pat[i], f32_bits(wide[i]));
        if (back[i] != pat[i])
            fail_msg("bf16 0x%04x came back as 0x%04x", pat[i], back[i]);
    }
    free(pat);
    free(back);
    free(wide);
}

static void test_arange(void **state)
{
    (void)state;
    tgc_tensor *a = tgc_arange(0, 5, 1, TGC_I64, tgc_cpu());
    assert_non_null(a);
    assert_int_equal(tgc_ndim(a), 1);
    assert_int_equal(tgc_size(a, 0), 5);
    int64_t iv[5];
    assert_int_equal(tgc_copy_to_host(a, iv, sizeof iv), TGC_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(iv[i], i);

    tgc_tensor *b = tgc_arange(1, 2, 0.25, TGC_F32, tgc_cpu());
    assert_non_null(b);
    assert_int_equal(tgc_numel(b), 4);
    float fv[4];
    assert_int_equal(tgc_copy_to_host(b, fv, sizeof fv), TGC_OK);
    for (int i = 0; i < 4; i++)
        assert_true(fv[i] == 1.0f + 0.25f * (float)i);

    tgc_tensor *c = tgc_arange(5, 0, -2, TGC_I32, tgc_cpu());
    int32_t cv[3];
    assert_int_equal(tgc_numel(c), 3);
    assert_int_equal(tgc_copy_to_host(c, cv, sizeof cv), TGC_OK);
    assert_int_equal(cv[0], 5);
    assert_int_equal(cv[1], 3);
    assert_int_equal(cv[2], 1);

    /* a half-open end that is not a multiple of the step */
    assert_int_equal(tgc_numel(tgc_arange(0, 10, 3, TGC_I64, tgc_cpu())), 4);
    assert_int_equal(tgc_numel(tgc_arange(0, 1, 0.1, TGC_F64, tgc_cpu())), 10);

    /* empty ranges are 1-d with size 0 */
    tgc_tensor *e = tgc_arange(3, 3, 1, TGC_F32, tgc_cpu());
    assert_non_null(e);
    assert_int_equal(tgc_ndim(e), 1);
    assert_int_equal(tgc_size(e, 0), 0);
    assert_int_equal(tgc_numel(tgc_arange(3, 0, -1, TGC_F32, tgc_cpu())), 3);
    assert_int_equal(tgc_numel(tgc_arange(3, 3, -1, TGC_F32, tgc_cpu())), 0);

    /* every dtype */
    for (int k = 0; k < N_OF(all_dtypes); k++) {
        tgc_tensor *t = tgc_arange(0, 2, 1, all_dtypes[k], tgc_cpu());
        assert_non_null(t);
        assert_int_equal(tgc_dtype_of(t), all_dtypes[k]);
        assert_int_equal(tgc_numel(t), 2);
        assert_true(tgc_item_f64(t) == 0.0);
    }
    tgc_tensor *h = tgc_arange(0, 8, 1, TGC_F16, tgc_cpu());
    uint16_t hv[8];
    assert_int_equal(tgc_copy_to_host(h, hv, sizeof hv), TGC_OK);
    assert_int_equal(hv[1], 0x3c00);
    assert_int_equal(hv[2], 0x4000);
    assert_int_equal(hv[7], 0x4700);
    assert_int_equal(tgc_last_status(), TGC_OK);

    check_null(tgc_arange(0, 1, 0, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_arange: start, end and step must be finite and step nonzero");
    tgc_clear_error();
    check_null(tgc_arange(NAN, 1, 1, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG, "tgc_arange");
    tgc_clear_error();
    check_null(tgc_arange(0, 1e18, 1, TGC_F32, tgc_cpu()), TGC_ERR_SHAPE, "too many");
    tgc_clear_error();
    check_null(tgc_arange(0, 1e308, 1e-308, TGC_F32, tgc_cpu()), TGC_ERR_SHAPE, "too many");
    tgc_clear_error();
    check_null(tgc_arange(-1e308, 1e308, 1, TGC_F32, tgc_cpu()), TGC_ERR_SHAPE, "too many");
    /* a step that goes away from end (python and torch reject it too) */
    tgc_clear_error();
    check_null(tgc_arange(0, 10, -1, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_arange: step -1 goes away from end: [0, 10) needs a positive step");
    tgc_clear_error();
    check_null(tgc_arange(3, 0, 1, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "needs a negative step");
    /* non-finite bounds and steps */
    const double bad[][3] = {{INFINITY, 1, 1}, {0, INFINITY, 1},  {0, -INFINITY, -1},
                             {0, 1, INFINITY}, {0, 1, -INFINITY}, {0, 1, NAN},
                             {0, NAN, 1},      {0, 1, -0.0}};
    for (int k = 0; k < N_OF(bad); k++) {
        tgc_clear_error();
        check_null(tgc_arange(bad[k][0], bad[k][1], bad[k][2], TGC_F32, tgc_cpu()),
                   TGC_ERR_INVALID_ARG, "must be finite and step nonzero");
    }
    tgc_clear_error();
    check_null(tgc_arange(0, 4, 1, TGC_F32, tgc_cuda(99)), TGC_ERR_DEVICE, "cuda:99");
    tgc_clear_error();
    check_null(tgc_arange(0, 4, 1, (tgc_dtype)99, tgc_cpu()), TGC_ERR_DTYPE, "unknown dtype 99");
}

static void test_from_data_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float f[6] = {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 100.0f};
    const uint16_t h[6] = {0x3e00, 0xc000, 0x0000, 0x4280, 0xb800, 0x5640};
    const uint16_t b[6] = {0x3fc0, 0xc000, 0x0000, 0x4050, 0xbf00, 0x42c8};
    const int32_t i[6] = {1, -2, 0, 3, INT32_MIN, INT32_MAX};
    const int64_t l[6] = {1, -2, 0, 3, INT64_MIN, INT64_MAX};
    const uint8_t o[6] = {1, 0, 0, 1, 1, 0};
    const double d[6] = {1.5, -2.0, 0.0, 3.25, -0.5, 1e300};
    const void *data[] = {f, h, b, i, l, o, d};
    for (int k = 0; k < N_OF(all_dtypes); k++) {
        tgc_dtype dt = all_dtypes[k];
        size_t nb = 6 * tgc_dtype_size(dt);
        tgc_tensor *t = tgc_from_data(data[k], nb, shape, 2, dt, tgc_cpu());
        check_geometry(t, shape, 2, dt);
        unsigned char out[48];
        assert_int_equal(tgc_copy_to_host(t, out, nb), TGC_OK);
        assert_memory_equal(out, data[k], nb);
        assert_true(tgc_item_f64(t) == host_elem(data[k], dt, 0));
    }
    /* the data is copied: changing the source later does not change the tensor */
    float src[2] = {1.0f, 2.0f};
    const int64_t two = 2;
    tgc_tensor *t = tgc_from_data(src, sizeof src, &two, 1, TGC_F32, tgc_cpu());
    src[0] = 99.0f;
    assert_true(tgc_item_f64(t) == 1.0);
    /* 0-d */
    const double pi = 3.14159;
    tgc_tensor *s = tgc_from_data(&pi, 8, NULL, 0, TGC_F64, tgc_cpu());
    assert_non_null(s);
    assert_int_equal(tgc_ndim(s), 0);
    assert_int_equal(tgc_numel(s), 1);
    assert_true(tgc_item_f64(s) == pi);
}

/* ---- random ---- */

static void test_rand_determinism(void **state)
{
    (void)state;
    const int64_t n = 1000, half = 500;
    float a[1000], b[1000], c[1000], d[1000];
    tgc_manual_seed(1234);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&n, 1, TGC_F32, tgc_cpu()), a, sizeof a), TGC_OK);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&n, 1, TGC_F32, tgc_cpu()), c, sizeof c), TGC_OK);
    tgc_manual_seed(1234);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&n, 1, TGC_F32, tgc_cpu()), b, sizeof b), TGC_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a); /* the stream advances */
    /* counter-based: two draws of 500 are one draw of 1000 */
    tgc_manual_seed(1234);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&half, 1, TGC_F32, tgc_cpu()), d, 2000), TGC_OK);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&half, 1, TGC_F32, tgc_cpu()), d + 500, 2000),
                     TGC_OK);
    assert_memory_equal(a, d, sizeof a);
    /* another seed, another stream */
    tgc_manual_seed(1235);
    assert_int_equal(tgc_copy_to_host(tgc_rand(&n, 1, TGC_F32, tgc_cpu()), d, sizeof d), TGC_OK);
    assert_memory_not_equal(a, d, sizeof a);
    /* randn too */
    tgc_manual_seed(7);
    assert_int_equal(tgc_copy_to_host(tgc_randn(&n, 1, TGC_F32, tgc_cpu()), a, sizeof a), TGC_OK);
    tgc_manual_seed(7);
    assert_int_equal(tgc_copy_to_host(tgc_randn(&n, 1, TGC_F32, tgc_cpu()), b, sizeof b), TGC_OK);
    assert_memory_equal(a, b, sizeof a);
    /* the shape does not change the values, only their arrangement */
    const int64_t shape2[] = {10, 100};
    tgc_manual_seed(7);
    assert_int_equal(tgc_copy_to_host(tgc_randn(shape2, 2, TGC_F32, tgc_cpu()), c, sizeof c),
                     TGC_OK);
    assert_memory_equal(a, c, sizeof a);
}

static void test_rand_uniform_range_every_float_dtype(void **state)
{
    (void)state;
    const int64_t n = 100000;
    double *v = malloc(n * sizeof *v);
    unsigned char *raw = malloc(n * 8);
    assert_non_null(v);
    assert_non_null(raw);
    for (int k = 0; k < N_OF(float_dtypes); k++) {
        tgc_dtype dt = float_dtypes[k];
        tgc_manual_seed(42 + (uint64_t)k);
        tgc_tensor *t = tgc_rand(&n, 1, dt, tgc_cpu());
        assert_non_null(t);
        assert_int_equal(tgc_dtype_of(t), dt);
        assert_int_equal(tgc_copy_to_host(t, raw, (size_t)n * tgc_dtype_size(dt)), TGC_OK);
        double sum = 0, lo = 1, hi = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = host_elem(raw, dt, i);
            if (!(v[i] >= 0.0 && v[i] < 1.0))
                fail_msg("tgc_rand %s: element %lld is %.9g, outside [0, 1)", tgc_dtype_name(dt),
                         (long long)i, v[i]);
            sum += v[i];
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
        double mean = sum / (double)n;
        assert_true(fabs(mean - 0.5) < 0.01);
        assert_true(lo < 0.01);
        assert_true(hi > 0.99);
        tgc_tensor_free(t);
    }
    free(v);
    free(raw);
}

static void test_randn_moments(void **state)
{
    (void)state;
    const int64_t n = 100000;
    unsigned char *raw = malloc(n * 8);
    assert_non_null(raw);
    for (int k = 0; k < N_OF(float_dtypes); k++) {
        tgc_dtype dt = float_dtypes[k];
        tgc_manual_seed(2024);
        tgc_tensor *t = tgc_randn(&n, 1, dt, tgc_cpu());
        assert_non_null(t);
        assert_int_equal(tgc_copy_to_host(t, raw, (size_t)n * tgc_dtype_size(dt)), TGC_OK);
        double s = 0, s2 = 0;
        int64_t beyond3 = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = host_elem(raw, dt, i);
            assert_true(isfinite(x));
            s += x;
            s2 += x * x;
            beyond3 += fabs(x) > 3;
        }
        double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
        if (fabs(mean) > 0.02 || fabs(sd - 1.0) > 0.02)
            fail_msg("tgc_randn %s: mean %g, std %g", tgc_dtype_name(dt), mean, sd);
        /* P(|x| > 3) = 0.0027: about 270 of 100000 */
        assert_true(beyond3 > 150 && beyond3 < 400);
        tgc_tensor_free(t);
    }
    free(raw);
}

/* Uniform [0,1) and standard normal values do not exist in integer or bool tensors. */
static void test_rand_rejects_non_float_dtypes(void **state)
{
    (void)state;
    const int64_t n = 16;
    const tgc_dtype bad[] = {TGC_I32, TGC_I64, TGC_BOOL};
    for (int k = 0; k < N_OF(bad); k++) {
        tgc_clear_error();
        check_null(tgc_rand(&n, 1, bad[k], tgc_cpu()), TGC_ERR_DTYPE, "tgc_rand");
        tgc_clear_error();
        check_null(tgc_randn(&n, 1, bad[k], tgc_cpu()), TGC_ERR_DTYPE, "tgc_randn");
    }
}

/* ---- queries ---- */

static void test_queries_bad_dims(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3, 4};
    tgc_tensor *t = tgc_zeros(shape, 3, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_size(t, 3), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_size: dim 3 is out of range for rank 3");
    tgc_clear_error();
    assert_int_equal(tgc_size(t, -4), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_size: dim -4 is out of range for rank 3");
    tgc_clear_error();
    assert_int_equal(tgc_stride(t, 3), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_stride: dim 3 is out of range for rank 3");
    tgc_clear_error();
    assert_int_equal(tgc_stride(t, -4), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_stride: dim -4");
    tgc_clear_error();
    /* a 0-d tensor has no dims at all */
    tgc_tensor *s = tgc_zeros(NULL, 0, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_size(s, 0), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_size: dim 0 is out of range for rank 0");
    tgc_clear_error();
    assert_int_equal(tgc_size(s, -1), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "rank 0");
    tgc_clear_error();
    /* valid negative dims */
    assert_int_equal(tgc_size(t, -1), 4);
    assert_int_equal(tgc_size(t, -2), 3);
    assert_int_equal(tgc_size(t, -3), 2);
    assert_int_equal(tgc_stride(t, -2), 4);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void test_queries_null(void **state)
{
    (void)state;
    int64_t shape[TGC_MAX_DIMS + 1] = {0};
    assert_int_equal(tgc_ndim(NULL), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_ndim: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_size(NULL, 0), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_size: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_shape(NULL, shape), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_shape: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_stride(NULL, 0), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_stride: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_dtype_of(NULL), TGC_F32);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_dtype_of: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_device_of(NULL).type, TGC_DEVICE_CPU);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_device_of: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_numel(NULL), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_numel: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_is_contiguous(NULL), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_is_contiguous: tensor is NULL");
    tgc_clear_error();
    assert_true(isnan(tgc_item_f64(NULL)));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_item_f64: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_item_i64(NULL), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_item_i64: tensor is NULL");
    tgc_clear_error();
    assert_null(tgc_to(NULL, tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_to: tensor is NULL");
    tgc_clear_error();

    /* a NULL that follows an earlier failure keeps the first error */
    assert_null(tgc_zeros(shape, 9, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_numel(NULL), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_zeros: ndim 9");
}

static void test_views_geometry(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float v[] = {0, 1, 2, 3, 4, 5};
    tgc_tensor *t = from_f32(v, shape, 2);
    tgc_tensor *tt = tgc_transpose(t, 0, 1);
    assert_non_null(tt);
    assert_int_equal(tgc_size(tt, 0), 3);
    assert_int_equal(tgc_size(tt, 1), 2);
    assert_int_equal(tgc_stride(tt, 0), 1);
    assert_int_equal(tgc_stride(tt, 1), 3);
    assert_false(tgc_is_contiguous(tt));
    assert_int_equal(tgc_numel(tt), 6);
    tgc_tensor *row = tgc_slice(t, 0, 1, 2, 1); /* [[3, 4, 5]]: contiguous, offset 3 */
    assert_non_null(row);
    assert_true(tgc_is_contiguous(row));
    assert_true(tgc_item_f64(row) == 3.0);
    tgc_tensor *col = tgc_slice(t, 1, 1, 3, 1); /* [[1, 2], [4, 5]] */
    assert_false(tgc_is_contiguous(col));
    assert_true(tgc_item_f64(col) == 1.0);
    /* size-1 dims never break contiguity */
    tgc_tensor *c1 = tgc_slice(t, 1, 2, 3, 1); /* [[2], [5]]: stride 3 along dim 0 */
    assert_false(tgc_is_contiguous(c1));
    tgc_tensor *r1 = tgc_slice(tt, 1, 0, 1, 1); /* [[0], [1], [2]]: stride 1 along dim 0 */
    assert_true(tgc_is_contiguous(r1));
    float got[12];
    assert_int_equal(tgc_copy_to_host(r1, got, 3 * sizeof(float)), TGC_OK);
    assert_true(got[0] == 0 && got[1] == 1 && got[2] == 2);
    /* an expanded dim has stride 0 and is not contiguous */
    const int64_t to[] = {4, 3};
    tgc_tensor *e = tgc_expand(row, to, 2);
    assert_non_null(e);
    assert_int_equal(tgc_stride(e, 0), 0);
    assert_int_equal(tgc_stride(e, 1), 1);
    assert_false(tgc_is_contiguous(e));
    assert_int_equal(tgc_numel(e), 12);
    assert_int_equal(tgc_copy_to_host(e, got, sizeof got), TGC_OK);
    for (int i = 0; i < 12; i++)
        assert_true(got[i] == (float)(3 + i % 3));
}

/* ---- errors of the creation functions ---- */

static void test_creation_bad_args(void **state)
{
    (void)state;
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t neg[] = {2, -3};
    const float data[6] = {0};

    check_null(tgc_empty(nine, 9, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_empty: ndim 9 is outside [0, 8]");
    check_null(tgc_zeros(nine, 9, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_zeros: ndim 9 is outside [0, 8]");
    check_null(tgc_ones(nine, -1, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_ones: ndim -1 is outside [0, 8]");
    check_null(tgc_full(nine, 9, 1.0, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG, "tgc_full: ndim 9");
    check_null(tgc_rand(nine, 9, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG, "tgc_rand: ndim 9");
    check_null(tgc_randn(nine, 9, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG, "tgc_randn: ndim 9");
    check_null(tgc_from_data(data, 4, nine, 9, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_from_data: ndim 9");

    check_null(tgc_zeros(NULL, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_zeros: shape is NULL with ndim 2");
    check_null(tgc_from_data(data, 0, NULL, 1, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_from_data: shape is NULL");

    check_null(tgc_empty(neg, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_empty: negative size at dim 1 in [2, -3]");
    check_null(tgc_full(neg, 2, 0.0, TGC_I32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_full: negative size at dim 1 in [2, -3]");
    check_null(tgc_randn(neg, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_randn: negative size");
    check_null(tgc_from_data(data, 24, neg, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_from_data: negative size at dim 1");

    const int64_t shape[] = {2, 3};
    check_null(tgc_from_data(data, 10, shape, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_from_data: nbytes is 10 but shape [2, 3] of f32 needs 24");
    check_null(tgc_from_data(data, 24, shape, 2, TGC_F16, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "nbytes is 24 but shape [2, 3] of f16 needs 12");
    check_null(tgc_from_data(NULL, 24, shape, 2, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
               "tgc_from_data: data is NULL");

    check_null(tgc_zeros(shape, 2, (tgc_dtype)99, tgc_cpu()), TGC_ERR_DTYPE,
               "tgc_zeros: unknown dtype 99");
    check_null(tgc_from_data(data, 24, shape, 2, TGC_DTYPE_COUNT, tgc_cpu()), TGC_ERR_DTYPE,
               "unknown dtype");
    check_null(tgc_empty(shape, 2, (tgc_dtype)-1, tgc_cpu()), TGC_ERR_DTYPE, "unknown dtype -1");
}

static void test_cuda_device_unavailable(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float data[6] = {0};
    /* indices no device has: from 0 without a GPU, past the last one with */
    int n = tgc_cuda_device_count();
    char w[96];
    check_null(tgc_empty(shape, 2, TGC_F32, tgc_cuda(n)), TGC_ERR_DEVICE, "cuda:");
    snprintf(w, sizeof w, "tgc_zeros: device cuda:%d", n + 1);
    check_null(tgc_zeros(shape, 2, TGC_F32, tgc_cuda(n + 1)), TGC_ERR_DEVICE, w);
    snprintf(w, sizeof w, "tgc_ones: device cuda:%d", n);
    check_null(tgc_ones(shape, 2, TGC_F16, tgc_cuda(n)), TGC_ERR_DEVICE, w);
    check_null(tgc_full(shape, 2, 1, TGC_F32, tgc_cuda(n + 2)), TGC_ERR_DEVICE, "cuda:");
    snprintf(w, sizeof w, "tgc_rand: device cuda:%d", n);
    check_null(tgc_rand(shape, 2, TGC_F32, tgc_cuda(n)), TGC_ERR_DEVICE, w);
    check_null(tgc_randn(shape, 2, TGC_F32, tgc_cuda(n)), TGC_ERR_DEVICE, "tgc_randn");
    snprintf(w, sizeof w, "tgc_from_data: device cuda:%d", n + 3);
    check_null(tgc_from_data(data, 24, shape, 2, TGC_F32, tgc_cuda(n + 3)), TGC_ERR_DEVICE, w);
    tgc_tensor *t = tgc_ones(shape, 2, TGC_F32, tgc_cpu());
    snprintf(w, sizeof w, "tgc_to: device cuda:%d", n + 1);
    check_null(tgc_to(t, tgc_cuda(n + 1)), TGC_ERR_DEVICE, w);
    /* t is untouched */
    assert_int_equal(tgc_device_of(t).type, TGC_DEVICE_CPU);
    assert_true(tgc_item_f64(t) == 1.0);
}

/* ---- data movement ---- */

static void test_copy_to_host(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float v[] = {0, 1, 2, 3, 4, 5};
    tgc_tensor *t = from_f32(v, shape, 2);
    float out[6];
    assert_int_equal(tgc_copy_to_host(t, out, sizeof out), TGC_OK);
    assert_memory_equal(out, v, sizeof v);

    /* a non-contiguous view comes out row-major in the view's order */
    tgc_tensor *tt = tgc_transpose(t, 0, 1);
    assert_int_equal(tgc_copy_to_host(tt, out, sizeof out), TGC_OK);
    const float want_t[] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(out, want_t, sizeof want_t);
    /* a view with an offset */
    tgc_tensor *col = tgc_slice(t, 1, 1, 3, 1);
    float c4[4];
    assert_int_equal(tgc_copy_to_host(col, c4, sizeof c4), TGC_OK);
    assert_true(c4[0] == 1 && c4[1] == 2 && c4[2] == 4 && c4[3] == 5);

    check_error(tgc_copy_to_host(t, out, 8), TGC_ERR_INVALID_ARG,
                "tgc_copy_to_host: nbytes is 8 but the tensor holds 24");
    check_error(tgc_copy_to_host(t, out, 28), TGC_ERR_INVALID_ARG, "nbytes is 28");
    check_error(tgc_copy_to_host(t, NULL, 24), TGC_ERR_INVALID_ARG,
                "tgc_copy_to_host: dst is NULL");
    tgc_clear_error();
    check_error(tgc_copy_to_host(NULL, out, 24), TGC_ERR_INVALID_ARG,
                "tgc_copy_to_host: tensor is NULL");
}

/* i64 values above 2^53 are exact through every copy path. */
static void test_i64_copies_exact(void **state)
{
    (void)state;
    const int64_t big[] = {(INT64_C(1) << 53) + 1, INT64_MAX, INT64_MIN + 1,
                           -((INT64_C(1) << 60) + 3)};
    const int64_t shape[] = {2, 2};
    tgc_tensor *t = from_i64(big, shape, 2);
    tgc_tensor *tt = tgc_transpose(t, 0, 1); /* non-contiguous */
    int64_t out[4];
    assert_int_equal(tgc_copy_to_host(tt, out, sizeof out), TGC_OK);
    assert_int_equal(out[0], big[0]);
    assert_int_equal(out[1], big[2]);
    assert_int_equal(out[2], big[1]);
    assert_int_equal(out[3], big[3]);
    tgc_tensor *d = tgc_zeros(shape, 2, TGC_I64, tgc_cpu());
    assert_int_equal(tgc_copy_(d, tt), TGC_OK);
    assert_int_equal(tgc_copy_to_host(d, out, sizeof out), TGC_OK);
    assert_int_equal(out[0], big[0]);
    assert_int_equal(out[1], big[2]);
    assert_int_equal(out[2], big[1]);
    assert_int_equal(out[3], big[3]);
}

static void test_copy_(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float v[] = {0.5f, -1.75f, 2.0f, 3.9f, -4.9f, 0.0f};
    tgc_tensor *src = from_f32(v, shape, 2);
    tgc_tensor *dst = tgc_zeros(shape, 2, TGC_F32, tgc_cpu());
    uint64_t v0 = atomic_load(&dst->storage->version);
    assert_int_equal(tgc_copy_(dst, src), TGC_OK);
    assert_int_equal(atomic_load(&dst->storage->version), v0 + 1);
    float out[6];
    assert_int_equal(tgc_copy_to_host(dst, out, sizeof out), TGC_OK);
    assert_memory_equal(out, v, sizeof v);
    assert_int_equal(tgc_copy_(dst, src), TGC_OK);
    assert_int_equal(atomic_load(&dst->storage->version), v0 + 2);

    /* dtype conversion: f32 -> i32 truncates, -> bool is != 0, -> f16 rounds */
    tgc_tensor *di = tgc_zeros(shape, 2, TGC_I32, tgc_cpu());
    assert_int_equal(tgc_copy_(di, src), TGC_OK);
    int32_t iv[6];
    assert_int_equal(tgc_copy_to_host(di, iv, sizeof iv), TGC_OK);
    const int32_t want_i[] = {0, -1, 2, 3, -4, 0};
    assert_memory_equal(iv, want_i, sizeof iv);
    tgc_tensor *db = tgc_zeros(shape, 2, TGC_BOOL, tgc_cpu());
    assert_int_equal(tgc_copy_(db, src), TGC_OK);
    uint8_t bv[6];
    assert_int_equal(tgc_copy_to_host(db, bv, sizeof bv), TGC_OK);
    const uint8_t want_b[] = {1, 1, 1, 1, 1, 0};
    assert_memory_equal(bv, want_b, sizeof bv);
    tgc_tensor *dh = tgc_zeros(shape, 2, TGC_F16, tgc_cpu());
    assert_int_equal(tgc_copy_(dh, src), TGC_OK);
    uint16_t hv[6];
    assert_int_equal(tgc_copy_to_host(dh, hv, sizeof hv), TGC_OK);
    assert_int_equal(hv[0], 0x3800);
    assert_int_equal(hv[1], 0xbf00);
    /* i32 -> f64 */
    tgc_tensor *dd = tgc_zeros(shape, 2, TGC_F64, tgc_cpu());
    assert_int_equal(tgc_copy_(dd, di), TGC_OK);
    double dv[6];
    assert_int_equal(tgc_copy_to_host(dd, dv, sizeof dv), TGC_OK);
    for (int i = 0; i < 6; i++)
        assert_true(dv[i] == (double)want_i[i]);

    /* into a non-contiguous view: the write lands in the base */
    const int64_t shape_t[] = {3, 2};
    tgc_tensor *base = tgc_zeros(shape_t, 2, TGC_F32, tgc_cpu());
    tgc_tensor *view = tgc_transpose(base, 0, 1); /* [2, 3] */
    uint64_t bv0 = atomic_load(&base->storage->version);
    assert_int_equal(tgc_copy_(view, src), TGC_OK);
    assert_int_equal(atomic_load(&base->storage->version), bv0 + 1);
    assert_int_equal(tgc_copy_to_host(base, out, sizeof out), TGC_OK);
    const float want_base[] = {0.5f, 3.9f, -1.75f, -4.9f, 2.0f, 0.0f};
    assert_memory_equal(out, want_base, sizeof out);

    /* shape mismatch: TGC_ERR_SHAPE, dst untouched, no version bump */
    tgc_tensor *wrong = tgc_ones(shape_t, 2, TGC_F32, tgc_cpu());
    uint64_t wv = atomic_load(&wrong->storage->version);
    check_error(tgc_copy_(wrong, src), TGC_ERR_SHAPE,
                "tgc_copy_: shapes differ: dst is [3, 2], src is [2, 3]");
    assert_int_equal(atomic_load(&wrong->storage->version), wv);
    assert_int_equal(tgc_copy_to_host(wrong, out, sizeof out), TGC_OK);
    for (int i = 0; i < 6; i++)
        assert_true(out[i] == 1.0f);
    /* broadcasting is not copying */
    const int64_t row[] = {1, 3};
    check_error(tgc_copy_(dst, tgc_ones(row, 2, TGC_F32, tgc_cpu())), TGC_ERR_SHAPE,
                "dst is [2, 3], src is [1, 3]");
    const int64_t flat = 6;
    check_error(tgc_copy_(dst, tgc_ones(&flat, 1, TGC_F32, tgc_cpu())), TGC_ERR_SHAPE,
                "src is [6]");

    tgc_clear_error();
    check_error(tgc_copy_(NULL, src), TGC_ERR_INVALID_ARG, "tgc_copy_: dst is NULL");
    tgc_clear_error();
    check_error(tgc_copy_(dst, NULL), TGC_ERR_INVALID_ARG, "tgc_copy_: src is NULL");
}

/* Source and destination views of one storage: the result is what src held before. */
static void test_copy_overlapping(void **state)
{
    (void)state;
    const int64_t sq[] = {2, 2};
    const float v[] = {0, 1, 2, 3};
    tgc_tensor *a = from_f32(v, sq, 2);
    assert_int_equal(tgc_copy_(a, tgc_transpose(a, 0, 1)), TGC_OK);
    float out[6];
    assert_int_equal(tgc_copy_to_host(a, out, 4 * sizeof(float)), TGC_OK);
    assert_true(out[0] == 0 && out[1] == 2 && out[2] == 1 && out[3] == 3);

    /* shifted by one element, both directions */
    tgc_tensor *x = tgc_arange(0, 6, 1, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(tgc_slice(x, 0, 1, 6, 1), tgc_slice(x, 0, 0, 5, 1)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(x, out, sizeof out), TGC_OK);
    const float right[] = {0, 0, 1, 2, 3, 4};
    assert_memory_equal(out, right, sizeof right);
    tgc_tensor *y = tgc_arange(0, 6, 1, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(tgc_slice(y, 0, 0, 5, 1), tgc_slice(y, 0, 1, 6, 1)), TGC_OK);
    assert_int_equal(tgc_copy_to_host(y, out, sizeof out), TGC_OK);
    const float left[] = {1, 2, 3, 4, 5, 5};
    assert_memory_equal(out, left, sizeof left);

    /* onto itself: unchanged, still a write */
    uint64_t v0 = atomic_load(&y->storage->version);
    assert_int_equal(tgc_copy_(y, y), TGC_OK);
    assert_int_equal(atomic_load(&y->storage->version), v0 + 1);
    assert_int_equal(tgc_copy_to_host(y, out, sizeof out), TGC_OK);
    assert_memory_equal(out, left, sizeof left);
}

static void test_item(void **state)
{
    (void)state;
    const int64_t one = 1, shape[] = {2, 2};
    const float f[] = {2.9f, -1, -2.9f, 4};
    tgc_tensor *t = from_f32(f, shape, 2);
    assert_true(tgc_item_f64(t) == (double)2.9f);
    assert_int_equal(tgc_item_i64(t), 2); /* truncates */
    tgc_tensor *s = tgc_slice(t, 0, 1, 2, 1);
    assert_true(tgc_item_f64(s) == (double)-2.9f);
    assert_int_equal(tgc_item_i64(s), -2);
    const int32_t i = -7;
    assert_int_equal(tgc_item_i64(tgc_from_data(&i, 4, &one, 1, TGC_I32, tgc_cpu())), -7);
    const uint8_t b = 1;
    assert_true(tgc_item_f64(tgc_from_data(&b, 1, NULL, 0, TGC_BOOL, tgc_cpu())) == 1.0);
    assert_int_equal(tgc_last_status(), TGC_OK);

    const int64_t zero = 0;
    tgc_tensor *e = tgc_zeros(&zero, 1, TGC_F32, tgc_cpu());
    assert_true(isnan(tgc_item_f64(e)));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_item_f64: tensor is empty");
    tgc_clear_error();
    assert_int_equal(tgc_item_i64(e), 0);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_item_i64: tensor is empty");
}

/* tgc_item_i64 of an i64 tensor is the exact value, also beyond 2^53. */
static void test_item_i64_exact(void **state)
{
    (void)state;
    const int64_t one = 1;
    const int64_t vals[] = {(INT64_C(1) << 53) + 1, INT64_MAX, INT64_MIN,
                            -((INT64_C(1) << 62) + 1)};
    for (int k = 0; k < N_OF(vals); k++) {
        tgc_tensor *t = from_i64(&vals[k], &one, 1);
        int64_t got = tgc_item_i64(t);
        if (got != vals[k])
            fail_msg("tgc_item_i64 of i64 %lld gave %lld", (long long)vals[k], (long long)got);
    }
    const int32_t imin = INT32_MIN;
    assert_int_equal(tgc_item_i64(tgc_from_data(&imin, 4, &one, 1, TGC_I32, tgc_cpu())), INT32_MIN);
    /* floats beyond the int64 range saturate, NaN is 0: no undefined conversion */
    assert_int_equal(tgc_item_i64(tgc_full(&one, 1, 1e30, TGC_F32, tgc_cpu())), INT64_MAX);
    assert_int_equal(tgc_item_i64(tgc_full(&one, 1, -INFINITY, TGC_F64, tgc_cpu())), INT64_MIN);
    assert_int_equal(tgc_item_i64(tgc_full(&one, 1, NAN, TGC_F16, tgc_cpu())), 0);
    assert_int_equal(tgc_item_i64(tgc_full(&one, 1, -1e19, TGC_F64, tgc_cpu())), INT64_MIN);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void test_to_cpu(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float v[] = {0, 1, 2, 3, 4, 5};
    tgc_tensor *t = from_f32(v, shape, 2);
    tgc_tensor *c = tgc_to(t, tgc_cpu());
    assert_non_null(c);
    assert_ptr_not_equal(c, t);
    assert_int_equal(tgc_device_of(c).type, TGC_DEVICE_CPU);
    assert_int_equal(tgc_dtype_of(c), TGC_F32);
    assert_int_equal(tgc_size(c, 0), 2);
    assert_int_equal(tgc_size(c, 1), 3);
    float out[6];
    assert_int_equal(tgc_copy_to_host(c, out, sizeof out), TGC_OK);
    assert_memory_equal(out, v, sizeof v);
    /* freeing the source leaves the result valid */
    tgc_tensor *tt = tgc_transpose(t, 0, 1);
    tgc_tensor_free(t);
    tgc_tensor *ct = tgc_to(tt, tgc_cpu());
    assert_non_null(ct);
    assert_true(tgc_is_contiguous(ct));
    assert_int_equal(tgc_size(ct, 0), 3);
    assert_int_equal(tgc_copy_to_host(ct, out, sizeof out), TGC_OK);
    const float want[] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(out, want, sizeof want);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* ---- huge shapes: an error, never UB or a tensor smaller than its shape ---- */

static void test_huge_shapes(void **state)
{
    (void)state;
    /* representable numel, no memory for it */
    const int64_t huge[] = {INT64_C(1) << 50};
    check_null(tgc_empty(huge, 1, TGC_F32, tgc_cpu()), TGC_ERR_OOM, "tgc_empty");
    tgc_clear_error();
    /* numel or nbytes overflow int64 / size_t */
    const int64_t over[][2] = {
        {INT64_C(1) << 40, INT64_C(1) << 40},
        {INT64_C(1) << 62, 4},
        {INT64_MAX, 2},
        {INT64_C(1) << 61, 1}, /* numel fits, nbytes (x8) does not */
    };
    for (int k = 0; k < N_OF(over); k++) {
        tgc_clear_error();
        tgc_tensor *t = tgc_zeros(over[k], 2, TGC_I64, tgc_cpu());
        if (t)
            fail_msg("tgc_zeros [%lld, %lld] i64 returned a tensor", (long long)over[k][0],
                     (long long)over[k][1]);
        assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
        assert_non_null(strstr(tgc_last_error(), "tgc_zeros: shape ["));
        assert_non_null(strstr(tgc_last_error(), "TGC_MAX_NUMEL"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status_str_every_status, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_dtype_names_and_sizes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_devices, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_last_error_clear, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_empty_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_empty_every_rank, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_zero_size_dims, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_zeros_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_ones_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_full_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_f16_known_values, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_bf16_known_values, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_full_negative_zero, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_f16_roundtrip_every_pattern, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_bf16_roundtrip_every_pattern, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_arange, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_from_data_every_dtype, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_rand_determinism, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_rand_uniform_range_every_float_dtype, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_randn_moments, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_rand_rejects_non_float_dtypes, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_queries_bad_dims, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_queries_null, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_views_geometry, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_creation_bad_args, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_cuda_device_unavailable, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_copy_to_host, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_i64_copies_exact, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_copy_, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_copy_overlapping, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_item, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_item_i64_exact, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_to_cpu, scoped_setup, scoped_teardown),
        /* last: before the fix, UBSan stops the process on the overflow */
        cmocka_unit_test_setup_teardown(test_huge_shapes, scoped_setup, scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
