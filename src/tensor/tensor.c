/* The tensor core: tensor objects, their geometry and lifetime, element access, the device
 * and host-memory checks, and the thread's active trace slot (tensor/tensor_impl.h). Objects
 * made here belong to no scope: tensor_new.c makes the ones a scope owns. Public queries and
 * creation ops that record into a trace are frontend/tensor.c. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked.h"
#include "support/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor_impl.h"

static atomic_uint_fast64_t next_uid = 1;
static _Thread_local struct tgc_trace *current_trace;

struct tgc_trace *tgc_trace_current(void)
{
    return current_trace;
}

void tgc_trace_set_current(struct tgc_trace *tr)
{
    current_trace = tr;
}

tgc_device tgc_cpu(void)
{
    return (tgc_device){TGC_DEVICE_CPU, 0};
}
tgc_device tgc_cuda(int index)
{
    return (tgc_device){TGC_DEVICE_CUDA, index};
}

void tgc_free(void *p)
{
    free(p);
}

/* ---- geometry ---- */

/* Shapes here passed tgc_shape_check or shape inference (TGC_MAX_NUMEL), so the products fit;
 * they are still checked, and saturate, so that no input is undefined behaviour. */
int64_t tgc_shape_numel(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (!tgc_mul_ok(n, shape[i], &n))
            return INT64_MAX;
    return n;
}

void tgc_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        if (!tgc_mul_ok(s, shape[i] > 1 ? shape[i] : 1, &s))
            s = INT64_MAX;
    }
}

int tgc_tensor_is_contiguous(const tgc_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0)
            return 1;
        if (t->shape[i] != 1 && t->strides[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

int64_t tgc_tensor_elem_offset(const tgc_tensor *t, int64_t linear)
{
    int64_t off = t->offset;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t n = t->shape[i];
        off += (linear % n) * t->strides[i];
        linear /= n;
    }
    return off;
}

int tgc_norm_dim(int dim, int ndim)
{
    int d = dim < 0 ? dim + ndim : dim;
    return (d < 0 || d >= (ndim ? ndim : 1)) ? -1 : d;
}

/* ---- half types ---- */

float tgc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tgc_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return sign | 0x7c00;
    if (absx < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        float a;
        memcpy(&a, &absx, 4);
        /* 2^24 scales the smallest subnormal to 1; nearbyint rounds to nearest even. */
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t mant_odd = (absx >> 13) & 1;
    absx += 0xc8000fffu + mant_odd; /* rebias exponent and round to nearest even */
    return sign | (uint16_t)(absx >> 13);
}

float tgc_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tgc_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double tgc_load(const void *base, tgc_dtype dt, int64_t off)
{
    switch (dt) {
    case TGC_F32: return ((const float *)base)[off];
    case TGC_F16: return tgc_half_to_float(((const uint16_t *)base)[off]);
    case TGC_BF16: return tgc_bf16_to_float(((const uint16_t *)base)[off]);
    case TGC_I32: return ((const int32_t *)base)[off];
    case TGC_I64: return (double)((const int64_t *)base)[off];
    case TGC_BOOL: return ((const uint8_t *)base)[off] != 0;
    case TGC_F64: return ((const double *)base)[off];
    case TGC_DTYPE_COUNT: break;
    }
    return 0;
}

/* Float to integer conversion saturates and maps NaN to 0, so no input is UB. */
static int64_t to_i64(double v, double lo, double hi)
{
    if (v != v)
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

void tgc_store(void *base, tgc_dtype dt, int64_t off, double v)
{
    switch (dt) {
    case TGC_F32: ((float *)base)[off] = (float)v; break;
    case TGC_F16: ((uint16_t *)base)[off] = tgc_float_to_half((float)v); break;
    case TGC_BF16: ((uint16_t *)base)[off] = tgc_float_to_bf16((float)v); break;
    case TGC_I32: ((int32_t *)base)[off] = (int32_t)to_i64(v, -2147483648.0, 2147483647.0); break;
    case TGC_I64:
        /* 2^63 and above saturate to INT64_MAX (the largest double below 2^63 converts
         * exactly; INT64_MAX itself is not a double) */
        ((int64_t *)base)[off] = v >= 9223372036854775808.0
                                     ? INT64_MAX
                                     : to_i64(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case TGC_BOOL: ((uint8_t *)base)[off] = v != 0; break;
    case TGC_F64: ((double *)base)[off] = v; break;
    case TGC_DTYPE_COUNT: break;
    }
}

/* ---- object lifetime ---- */

/* Tensor objects alive in the process (tgc_live_tensor_count): relaxed, a diagnostic. */
static atomic_int_fast64_t live_tensors;

int64_t tgc_live_tensor_count(void)
{
    return (int64_t)atomic_load_explicit(&live_tensors, memory_order_relaxed);
}

tgc_tensor *tgc_tensor_alloc_unowned(void)
{
    tgc_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        tgc_set_error(TGC_ERR_OOM, "tgc: out of memory allocating a tensor");
        return NULL;
    }
    atomic_fetch_add_explicit(&live_tensors, 1, memory_order_relaxed);
    t->uid = atomic_fetch_add(&next_uid, 1);
    t->refs = 1;
    t->value = -1;
    t->device = tgc_cpu();
    return t;
}

void tgc_tensor_ref(tgc_tensor *t)
{
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
}

void tgc_grad_link_ref(tgc_grad_link *l)
{
    __atomic_add_fetch(&l->refs, 1, __ATOMIC_RELAXED);
}

void tgc_grad_link_unref(tgc_grad_link *l)
{
    if (l && __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) == 0)
        l->release(l);
}

void tgc_tensor_unref(tgc_tensor *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (t->grad) {
            t->grad->grad_of = NULL;
            tgc_tensor_unref(t->grad);
        }
        tgc_grad_link_unref(t->grad_fn);
        tgc_storage_unref(t->storage);
        free(t->debug_name);
        free(t);
        atomic_fetch_sub_explicit(&live_tensors, 1, memory_order_relaxed);
    }
}

int tgc_tensor_set_debug_name(tgc_tensor *t, const char *name)
{
    char *copy = NULL;
    if (name) {
        size_t n = strlen(name) + 1;
        if (!(copy = malloc(n)))
            return 0;
        memcpy(copy, name, n);
    }
    free(t->debug_name);
    t->debug_name = copy;
    return 1;
}

int tgc_shape_check(const char *fn, const int64_t *shape, int ndim)
{
    if (ndim < 0 || ndim > TGC_MAX_DIMS) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: ndim %d is outside [0, %d]", fn, ndim,
                      TGC_MAX_DIMS);
        return 0;
    }
    if (ndim > 0 && !shape) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: shape is NULL with ndim %d", fn, ndim);
        return 0;
    }
    char b[160];
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: negative size at dim %d in %s", fn, i,
                          tgc_format_dims(shape, ndim, b, sizeof b));
            return 0;
        }
    int64_t extent;
    if (!tgc_extent_ok(shape, ndim, &extent) || extent > TGC_MAX_NUMEL) {
        tgc_set_error(TGC_ERR_SHAPE,
                      "%s: shape %s is too large: its sizes (0 counted as 1) multiply to more "
                      "than TGC_MAX_NUMEL (2^56)",
                      fn, tgc_format_dims(shape, ndim, b, sizeof b));
        return 0;
    }
    return 1;
}

int tgc_device_check(const char *fn, tgc_device dev)
{
    const tgc_allocator *a = tgc_allocator_of(dev.type);
    if (a && (!a->device_count || (dev.index >= 0 && dev.index < a->device_count(a->ctx))))
        return 1;
    const tgc_device_ops *o = a || dev.type == TGC_DEVICE_CPU ? NULL : tgc_device_ops_of(dev.type);
    if (o) {
        /* The first tensor on a registered device type loads its driver (through the hooks
         * its backend registered), which registers the type's allocator; its failure, or the
         * build's lack of the backend, says what is missing. */
        if (!o->load) {
            tgc_set_error(TGC_ERR_DEVICE, "%s: device %s:%d is not available: %s", fn, o->name,
                          dev.index, o->missing);
            return 0;
        }
        if (o->load() != TGC_OK) {
            char why[768];
            snprintf(why, sizeof why, "%s", tgc_last_error());
            tgc_set_error(TGC_ERR_DEVICE, "%s: device %s:%d is not available: %s", fn, o->name,
                          dev.index, why);
            return 0;
        }
        if (!tgc_allocator_of(dev.type)) {
            tgc_set_error(TGC_ERR_INTERNAL,
                          "%s: device %s:%d: %s loaded but no allocator is registered", fn, o->name,
                          dev.index, o->label);
            return 0;
        }
        return tgc_device_check(fn, dev);
    }
    if (a) {
        int n = a->device_count(a->ctx);
        tgc_set_error(TGC_ERR_DEVICE,
                      "%s: device %s:%d is not available: %d %s device%s present; use an index "
                      "below %d, or tgc_cpu()",
                      fn, a->name, dev.index, n, a->name, n == 1 ? " is" : "s are", n);
        return 0;
    }
    tgc_set_error(TGC_ERR_DEVICE, "%s: unknown device type %d (index %d); use tgc_cpu()", fn,
                  (int)dev.type, dev.index);
    return 0;
}

int tgc_host_check(const char *fn, const char *who, const char *what, const tgc_tensor *t)
{
    if (tgc_on_host(t))
        return 1;
    char d[48];
    tgc_set_error(TGC_ERR_DEVICE,
                  "%s: %s is on %s, but %s runs on host memory only; move it with "
                  "tgc_to(t, tgc_cpu())",
                  fn, what, tgc_format_device(t->device, d, sizeof d), who);
    return 0;
}

int tgc_dtype_device_check(const char *fn, tgc_dtype dt, tgc_device dev)
{
    if ((unsigned)dt >= TGC_DTYPE_COUNT) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dt);
        return 0;
    }
    return tgc_device_check(fn, dev);
}
