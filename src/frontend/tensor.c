/* Tensor objects: creation, geometry, queries, element access. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/tensor_impl.h"
#include "frontend/trace.h"
#include "ir/shape_infer.h"
#include "backend/interp/interp.h"
#include "frontend/apply.h"
#include "frontend/module_impl.h"
#include "runtime/philox.h"
#include "support/checked.h"
#include "support/error.h"
#include "tgc/ops.h"

static atomic_uint_fast64_t next_uid = 1;

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i32", 4}, {"i64", 8}, {"bool", 1}, {"f64", 8},
};
_Static_assert(sizeof(dtype_table) / sizeof(dtype_table[0]) == TGC_DTYPE_COUNT,
               "dtype table out of sync");

const char *tgc_dtype_name(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT ? dtype_table[dt].name : "?";
}

size_t tgc_dtype_size(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT ? dtype_table[dt].size : 0;
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

/* Shapes here passed check_shape or shape inference (TGC_MAX_NUMEL), so the products fit;
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

tgc_tensor *tgc_tensor_alloc_unowned(void)
{
    tgc_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        tgc_set_error(TGC_ERR_OOM, "tgc: out of memory allocating a tensor");
        return NULL;
    }
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

void tgc_tensor_unref(tgc_tensor *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        tgc_storage_unref(t->storage);
        free(t);
    }
}

static int check_shape(const char *fn, const int64_t *shape, int ndim)
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
    if (dev.type == TGC_DEVICE_CUDA) {
        tgc_set_error(TGC_ERR_DEVICE,
                      "%s: device cuda:%d is not available: this build has no CUDA backend yet; "
                      "use tgc_cpu()",
                      fn, dev.index);
        return 0;
    }
    if (dev.type != TGC_DEVICE_CPU) {
        tgc_set_error(TGC_ERR_DEVICE, "%s: unknown device type %d (index %d); use tgc_cpu()", fn,
                      (int)dev.type, dev.index);
        return 0;
    }
    return 1;
}

static int check_dtype_device(const char *fn, tgc_dtype dt, tgc_device dev)
{
    if ((unsigned)dt >= TGC_DTYPE_COUNT) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dt);
        return 0;
    }
    return tgc_device_check(fn, dev);
}

static tgc_tensor *new_tensor(const char *fn, const int64_t *shape, int ndim, tgc_dtype dt,
                              tgc_device dev)
{
    if (!check_shape(fn, shape, ndim) || !check_dtype_device(fn, dt, dev))
        return NULL;
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    int64_t numel = tgc_shape_numel(shape, ndim);
    t->storage = tgc_storage_new((size_t)numel * tgc_dtype_size(dt), dev);
    if (!t->storage) {
        free(t);
        char dims[160];
        tgc_set_error(TGC_ERR_OOM,
                      "%s: out of memory for a %s tensor of shape %s (%lld elements, %zu bytes)",
                      fn, tgc_dtype_name(dt), tgc_format_dims(shape, ndim, dims, sizeof dims),
                      (long long)numel, (size_t)numel * tgc_dtype_size(dt));
        return NULL;
    }
    t->dtype = dt;
    t->ndim = ndim;
    t->device = dev;
    for (int i = 0; i < ndim && i < TGC_MAX_DIMS; i++)
        t->shape[i] = shape[i];
    tgc_contiguous_strides(t->shape, ndim, t->strides);
    /* Created while tracing: the value becomes a constant of the graph, not a capture. */
    if (tgc_trace_current())
        t->flags |= TGC_T_TRACE_CONST;
    tgc_scope_adopt(t);
    return t;
}

tgc_tensor *tgc_tensor_new(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return new_tensor("tgc", shape, ndim, dt, dev);
}

tgc_tensor *tgc_tensor_view(const tgc_tensor *base, const int64_t *shape, const int64_t *strides,
                            int ndim, int64_t offset)
{
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    t->dtype = base->dtype;
    t->device = base->device;
    t->ndim = ndim;
    for (int i = 0; i < ndim && i < TGC_MAX_DIMS; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
    t->offset = offset;
    t->storage = base->storage;
    tgc_storage_ref(t->storage);
    t->flags = base->flags & TGC_T_TRACE_CONST;
    tgc_scope_adopt(t);
    return t;
}

/* ---- creation API ---- */

static void fill(tgc_tensor *t, double v)
{
    int64_t n = tgc_shape_numel(t->shape, t->ndim);
    void *p = tgc_tensor_base(t);
    if (v == 0 && !signbit(v)) {
        memset(p, 0, (size_t)n * tgc_dtype_size(t->dtype));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        tgc_store(p, t->dtype, i, v);
}

tgc_tensor *tgc_empty(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return new_tensor("tgc_empty", shape, ndim, dt, dev);
}

tgc_tensor *tgc_zeros(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    tgc_tensor *t = new_tensor("tgc_zeros", shape, ndim, dt, dev);
    if (t)
        fill(t, 0);
    return t;
}

tgc_tensor *tgc_ones(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    tgc_tensor *t = new_tensor("tgc_ones", shape, ndim, dt, dev);
    if (t)
        fill(t, 1);
    return t;
}

tgc_tensor *tgc_full(const int64_t *shape, int ndim, double value, tgc_dtype dt, tgc_device dev)
{
    tgc_tensor *t = new_tensor("tgc_full", shape, ndim, dt, dev);
    if (t)
        fill(t, value);
    return t;
}

tgc_tensor *tgc_arange(double start, double end, double step, tgc_dtype dt, tgc_device dev)
{
    if (!isfinite(start) || !isfinite(end) || !isfinite(step) || step == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_arange: start, end and step must be finite and step nonzero, got "
                      "start %g, end %g, step %g",
                      start, end, step);
        return NULL;
    }
    if ((end > start && step < 0) || (end < start && step > 0)) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_arange: step %g goes away from end: [%g, %g) needs a %s step", step,
                      start, end, end > start ? "positive" : "negative");
        return NULL;
    }
    double n = ceil((end - start) / step); /* >= 0 here; inf if end - start overflows */
    if (!(n <= (double)TGC_MAX_NUMEL)) {
        tgc_set_error(TGC_ERR_SHAPE,
                      "tgc_arange: [%g, %g) with step %g has %.0f elements, too many "
                      "(more than TGC_MAX_NUMEL, 2^56)",
                      start, end, step, n);
        return NULL;
    }
    int64_t count = (int64_t)n;
    tgc_tensor *t = new_tensor("tgc_arange", &count, 1, dt, dev);
    if (!t)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        tgc_store(tgc_tensor_base(t), dt, i, start + (double)i * step);
    return t;
}

tgc_tensor *tgc_from_data(const void *data, size_t nbytes, const int64_t *shape, int ndim,
                          tgc_dtype dt, tgc_device dev)
{
    if (!check_shape("tgc_from_data", shape, ndim) || !check_dtype_device("tgc_from_data", dt, dev))
        return NULL;
    size_t want = (size_t)tgc_shape_numel(shape, ndim) * tgc_dtype_size(dt);
    if (nbytes != want) {
        char b[160];
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_from_data: nbytes is %zu but shape %s of %s needs %zu", nbytes,
                      tgc_format_dims(shape, ndim, b, sizeof b), tgc_dtype_name(dt), want);
        return NULL;
    }
    if (!data && want) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_from_data: data is NULL");
        return NULL;
    }
    tgc_tensor *t = new_tensor("tgc_from_data", shape, ndim, dt, dev);
    if (t && want)
        memcpy(tgc_tensor_base(t), data, want);
    return t;
}

/* Through tgc_apply, so that inside a traced function the draw is a graph node that runs
 * on every call (and advances the stream like eager code), not a trace-time constant. */
static tgc_tensor *random_tensor(const char *fn, const int64_t *shape, int ndim, tgc_dtype dt,
                                 tgc_device dev, int normal)
{
    if (!check_shape(fn, shape, ndim) || !check_dtype_device(fn, dt, dev))
        return NULL;
    if (!tgc_dtype_is_float(dt)) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: random tensors must be a float dtype, got %s", fn,
                      tgc_dtype_name(dt));
        return NULL;
    }
    tgc_attrs a = {0};
    for (int d = 0; d < ndim; d++)
        a.i[d] = shape[d];
    a.ni = ndim;
    a.dtype = dt;
    a.f[0] = normal;
    a.nf = 1;
    return tgc_apply(TGC_OP_RAND, NULL, 0, &a);
}

tgc_tensor *tgc_rand(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return random_tensor("tgc_rand", shape, ndim, dt, dev, 0);
}

tgc_tensor *tgc_randn(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return random_tensor("tgc_randn", shape, ndim, dt, dev, 1);
}

void tgc_manual_seed(uint64_t seed)
{
    tgc_rng_seed(seed);
}

/* ---- queries ---- */

static int null_query(const tgc_tensor *t, const char *fn)
{
    if (t)
        return 0;
    tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: tensor is NULL", fn);
    return 1;
}

int tgc_ndim(const tgc_tensor *t)
{
    return null_query(t, "tgc_ndim") ? 0 : t->ndim;
}

/* Size of dim d (normalized); reading a symbolic dim while tracing specializes it, and the
 * trace remembers that `caller` did. */
static int64_t read_size(const tgc_tensor *t, int d, const char *caller)
{
    if (t->trace && !TGC_SDIM_IS_CONST(t->sshape[d]))
        return tgc_trace_read_size(t->trace, t, d, caller);
    return t->shape[d];
}

int64_t tgc_size(const tgc_tensor *t, int dim)
{
    if (null_query(t, "tgc_size"))
        return 0;
    int d = tgc_norm_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_size: dim %d is out of range for rank %d", dim,
                      t->ndim);
        return 0;
    }
    return read_size(t, d, "tgc_size");
}

int tgc_shape(const tgc_tensor *t, int64_t *shape)
{
    if (null_query(t, "tgc_shape"))
        return 0;
    if (!shape) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_shape: shape is NULL");
        return 0;
    }
    for (int i = 0; i < t->ndim; i++)
        shape[i] = read_size(t, i, "tgc_shape");
    return t->ndim;
}

int64_t tgc_stride(const tgc_tensor *t, int dim)
{
    if (null_query(t, "tgc_stride"))
        return 0;
    int d = tgc_norm_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_stride: dim %d is out of range for rank %d", dim,
                      t->ndim);
        return 0;
    }
    return t->strides[d];
}

tgc_dtype tgc_dtype_of(const tgc_tensor *t)
{
    return null_query(t, "tgc_dtype_of") ? TGC_F32 : t->dtype;
}

tgc_device tgc_device_of(const tgc_tensor *t)
{
    return null_query(t, "tgc_device_of") ? tgc_cpu() : t->device;
}

int64_t tgc_numel(const tgc_tensor *t)
{
    if (null_query(t, "tgc_numel"))
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) /* fits: TGC_MAX_NUMEL bounds every tensor */
        n *= read_size(t, i, "tgc_numel");
    return n;
}

int tgc_is_contiguous(const tgc_tensor *t)
{
    return null_query(t, "tgc_is_contiguous") ? 0 : tgc_tensor_is_contiguous(t);
}

/* ---- data movement ---- */

static int traced_data_access(const tgc_tensor *t, const char *fn)
{
    if (!t->trace)
        return 0;
    tgc_trace_break(t->trace, "%s reads the data of a traced tensor", fn);
    tgc_set_error(TGC_ERR_GRAPH_BREAK, "%s: reads the data of a traced tensor (graph break)", fn);
    return 1;
}

tgc_tensor *tgc_to(tgc_tensor *t, tgc_device dev)
{
    if (null_query(t, "tgc_to") || !check_dtype_device("tgc_to", t->dtype, dev))
        return NULL;
    return tgc_contiguous(t);
}

tgc_status tgc_copy_to_host(const tgc_tensor *t, void *dst, size_t nbytes)
{
    if (!t)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_copy_to_host: tensor is NULL");
    if (traced_data_access(t, "tgc_copy_to_host"))
        return TGC_ERR_GRAPH_BREAK;
    size_t want = (size_t)tgc_shape_numel(t->shape, t->ndim) * tgc_dtype_size(t->dtype);
    if (nbytes != want)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_copy_to_host: nbytes is %zu but the tensor holds %zu", nbytes,
                             want);
    if (want && !dst)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_copy_to_host: dst is NULL");
    if (want) {
        int64_t strides[TGC_MAX_DIMS];
        tgc_contiguous_strides(t->shape, t->ndim, strides);
        tgc_interp_copy_strided(dst, t->dtype, 0, strides, tgc_tensor_base(t), t->dtype, t->offset,
                                t->strides, t->shape, t->ndim);
    }
    return TGC_OK;
}

/* 1 when two index tuples of t reach one element: some size > 1 dim's stride does not
 * step over everything the smaller strides span (an expanded view: stride 0). */
static int has_internal_overlap(const tgc_tensor *t)
{
    int idx[TGC_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return 0;
        if (t->shape[d] > 1)
            idx[n++] = d;
    }
    for (int i = 1; i < n; i++) /* by |stride|, insertion sort */
        for (int j = i; j > 0 && llabs(t->strides[idx[j - 1]]) > llabs(t->strides[idx[j]]); j--) {
            int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    int64_t span = 0; /* the largest offset the smaller-stride dims reach */
    for (int i = 0; i < n; i++) {
        int64_t st = llabs(t->strides[idx[i]]);
        if (st <= span)
            return 1;
        span += st * (t->shape[idx[i]] - 1);
    }
    return 0;
}

tgc_status tgc_copy_(tgc_tensor *dst, const tgc_tensor *src)
{
    if (!dst || !src)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_copy_: %s is NULL", dst ? "src" : "dst");
    if (traced_data_access(dst, "tgc_copy_") || traced_data_access(src, "tgc_copy_"))
        return TGC_ERR_GRAPH_BREAK;
    if (dst->ndim != src->ndim ||
        memcmp(dst->shape, src->shape, (size_t)dst->ndim * sizeof(int64_t)) != 0) {
        char a[160], b[160];
        return tgc_set_error(TGC_ERR_SHAPE, "tgc_copy_: shapes differ: dst is %s, src is %s",
                             tgc_format_dims(dst->shape, dst->ndim, a, sizeof a),
                             tgc_format_dims(src->shape, src->ndim, b, sizeof b));
    }
    if (has_internal_overlap(dst)) {
        char a[160], b[160];
        return tgc_set_error(
            TGC_ERR_INVALID_ARG,
            "tgc_copy_: dst %s (strides %s) has elements that share memory (an expanded view?): "
            "writing it is ambiguous; copy into a contiguous tensor (tgc_contiguous) instead",
            tgc_format_dims(dst->shape, dst->ndim, a, sizeof a),
            tgc_format_dims(dst->strides, dst->ndim, b, sizeof b));
    }
    tgc_status st = tgc_interp_copy(dst, src);
    if (st != TGC_OK)
        return st;
    tgc_storage_bump(dst->storage);
    return TGC_OK;
}

static double item(const tgc_tensor *t, const char *fn)
{
    if (null_query(t, fn))
        return NAN;
    if (t->trace)
        return tgc_trace_read_value(t->trace, t, fn);
    if (tgc_shape_numel(t->shape, t->ndim) < 1) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: tensor is empty", fn);
        return NAN;
    }
    double v = tgc_load(tgc_tensor_base(t), t->dtype, t->offset);
    tgc_trace *tr = tgc_trace_current();
    if (tr)
        tgc_trace_read_value(tr, t, fn);
    return v;
}

double tgc_item_f64(const tgc_tensor *t)
{
    return item(t, "tgc_item_f64");
}

int64_t tgc_item_i64(const tgc_tensor *t)
{
    double v = item(t, "tgc_item_i64");
    /* integers beyond 2^53 do not survive the trip through double: read them directly */
    if (t && !t->trace && t->storage && tgc_shape_numel(t->shape, t->ndim) > 0) {
        if (t->dtype == TGC_I64)
            return ((const int64_t *)tgc_tensor_base(t))[t->offset];
        if (t->dtype == TGC_I32)
            return ((const int32_t *)tgc_tensor_base(t))[t->offset];
    }
    return v != v                        ? 0
           : v >= 9223372036854775807.0  ? INT64_MAX
           : v <= -9223372036854775808.0 ? INT64_MIN
                                         : (int64_t)v;
}

void tgc_mark_dynamic(tgc_tensor *t, int dim)
{
    if (null_query(t, "tgc_mark_dynamic"))
        return;
    int d = tgc_norm_dim(dim, t->ndim);
    if (d < 0 || t->ndim == 0) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_mark_dynamic: dim %d is out of range for rank %d",
                      dim, t->ndim);
        return;
    }
    t->dyn_mask |= (uint8_t)(1u << d);
}
