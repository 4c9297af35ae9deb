/* The public tensor API: creation ops, queries, copies between devices and to the host,
 * scalar reads (the objects themselves are the tensor core, src/tensor/). Creation on a
 * device initialises on the host and copies over; every move between devices is the tensor
 * core's copy (tensor/copy.h). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "frontend/trace.h"
#include "ir/shape_infer.h"
#include "frontend/apply.h"
#include "frontend/module_impl.h"
#include "runtime/philox.h"
#include "support/checked.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tgc/ops.h"

/* ---- creation API ---- */

/* Host memory to initialise t's elements in: t's own on the host; on a device a staging
 * buffer that init_end copies over (devices have no fill kernels here). NULL with the error
 * set (t freed) when out of memory. */
static void *init_begin(const char *fn, tgc_tensor *t)
{
    if (tgc_on_host(t))
        return tgc_host_data(t);
    size_t nb = (size_t)tgc_shape_numel(t->shape, t->ndim) * tgc_dtype_size(t->dtype);
    void *p = malloc(nb ? nb : 1);
    if (!p) {
        tgc_set_error(TGC_ERR_OOM, "%s: out of memory for a %zu-byte staging buffer", fn, nb);
        tgc_tensor_free(t);
    }
    return p;
}

/* t, its elements written from p (init_begin's); NULL with the error set when the copy to
 * the device fails. */
static tgc_tensor *init_end(const char *fn, tgc_tensor *t, void *p)
{
    if (p == tgc_host_data(t))
        return t;
    tgc_status st = tgc_tensor_write(fn, t, p);
    free(p);
    if (st != TGC_OK) {
        tgc_tensor_free(t);
        return NULL;
    }
    return t;
}

static tgc_tensor *filled(const char *fn, tgc_tensor *t, double v)
{
    void *p = t ? init_begin(fn, t) : NULL;
    if (!p)
        return NULL;
    int64_t n = tgc_shape_numel(t->shape, t->ndim);
    if (v == 0 && !signbit(v))
        memset(p, 0, (size_t)n * tgc_dtype_size(t->dtype));
    else
        for (int64_t i = 0; i < n; i++)
            tgc_store(p, t->dtype, i, v);
    return init_end(fn, t, p);
}

tgc_tensor *tgc_empty(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return tgc_tensor_new_checked("tgc_empty", shape, ndim, dt, dev);
}

tgc_tensor *tgc_zeros(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return filled("tgc_zeros", tgc_tensor_new_checked("tgc_zeros", shape, ndim, dt, dev), 0);
}

tgc_tensor *tgc_ones(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev)
{
    return filled("tgc_ones", tgc_tensor_new_checked("tgc_ones", shape, ndim, dt, dev), 1);
}

tgc_tensor *tgc_full(const int64_t *shape, int ndim, double value, tgc_dtype dt, tgc_device dev)
{
    return filled("tgc_full", tgc_tensor_new_checked("tgc_full", shape, ndim, dt, dev), value);
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
    tgc_tensor *t = tgc_tensor_new_checked("tgc_arange", &count, 1, dt, dev);
    void *p = t ? init_begin("tgc_arange", t) : NULL;
    if (!p)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        tgc_store(p, dt, i, start + (double)i * step);
    return init_end("tgc_arange", t, p);
}

tgc_tensor *tgc_from_data(const void *data, size_t nbytes, const int64_t *shape, int ndim,
                          tgc_dtype dt, tgc_device dev)
{
    if (!tgc_shape_check("tgc_from_data", shape, ndim) ||
        !tgc_dtype_device_check("tgc_from_data", dt, dev))
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
    tgc_tensor *t = tgc_tensor_new_checked("tgc_from_data", shape, ndim, dt, dev);
    if (!t || !want)
        return t;
    if (tgc_on_host(t)) {
        memcpy(tgc_host_data(t), data, want);
    } else if (tgc_tensor_write("tgc_from_data", t, data) != TGC_OK) {
        tgc_tensor_free(t);
        return NULL;
    }
    return t;
}

/* Through tgc_apply, so that inside a traced function the draw is a graph node that runs
 * on every call (and advances the stream like eager code), not a trace-time constant, on the
 * variant's device. Eagerly on a device the draw runs on the host (the same Philox bits) and
 * is copied over. */
static tgc_tensor *random_tensor(const char *fn, const int64_t *shape, int ndim, tgc_dtype dt,
                                 tgc_device dev, int normal)
{
    if (!tgc_shape_check(fn, shape, ndim) || !tgc_dtype_device_check(fn, dt, dev))
        return NULL;
    if (!tgc_dtype_is_float(dt)) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: random tensors must be a float dtype, got %s", fn,
                      tgc_dtype_name(dt));
        return NULL;
    }
    int on_device = dev.type != TGC_DEVICE_CPU;
    struct tgc_trace *tr = tgc_trace_current();
    if (tr) {
        /* traced: a draw of the variant, on the variant's device (the same Philox bits) */
        if (!tgc_device_equal(dev, tr->device)) {
            char d[48], v[48];
            tgc_set_error(TGC_ERR_DEVICE,
                          "%s: drawing on %s inside a traced function that runs on %s: draw on "
                          "the function's device (its inputs', else its module's, else "
                          "cfg.device)",
                          fn, tgc_format_device(dev, d, sizeof d),
                          tgc_format_device(tr->device, v, sizeof v));
            return NULL;
        }
        on_device = 0; /* the node's value is on the variant's device already */
    }
    tgc_attrs a = tgc_attrs_of(TGC_OP_RAND);
    for (int d = 0; d < ndim; d++)
        a.rand.shape[d] = shape[d];
    a.ni = ndim;
    a.dtype = dt;
    a.rand.normal = normal;
    tgc_tensor *r = tgc_apply(TGC_OP_RAND, NULL, 0, &a);
    if (!r || !on_device)
        return r;
    tgc_tensor *moved = tgc_tensor_copy_to(fn, r, dev);
    tgc_tensor_free(r);
    return moved;
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
    if (null_query(t, "tgc_to") || !tgc_dtype_device_check("tgc_to", t->dtype, dev))
        return NULL;
    /* on a device without kernels only the tensor core's copy makes a strided view dense */
    if (tgc_device_equal(t->device, dev) &&
        (dev.type == TGC_DEVICE_CPU || tgc_tensor_is_contiguous(t)))
        return tgc_contiguous(t);
    if (traced_data_access(t, "tgc_to"))
        return NULL;
    return tgc_tensor_copy_to("tgc_to", t, dev);
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
    return tgc_tensor_read("tgc_copy_to_host", t, dst);
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
    tgc_trace *tr = tgc_trace_current();
    if (tr && (dst->trace || src->trace || !(dst->flags & TGC_T_TRACE_CONST))) {
        /* inside a compiled function: an in-place write of the variant (ASSIGN) */
        if ((dst->trace && dst->trace != tr) || (src->trace && src->trace != tr))
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc_copy_: a traced tensor that escaped its trace");
        return tgc_trace_assign(tr, dst, (tgc_tensor *)src);
    }
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
    tgc_status st = tgc_tensor_copy(dst, src);
    if (st != TGC_OK)
        return st;
    tgc_storage_bump(dst->storage);
    return TGC_OK;
}

/* The bytes of t's element at its offset into v: read in place on the host, copied from a
 * device. 0 with the error set when the copy fails. */
static const void *item_bytes(const tgc_tensor *t, const char *fn, uint64_t *v)
{
    if (tgc_on_host(t))
        return (const char *)tgc_host_data(t) + t->offset * (int64_t)tgc_dtype_size(t->dtype);
    return tgc_tensor_read_item(fn, t, v) == TGC_OK ? v : NULL;
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
    uint64_t buf;
    const void *p = item_bytes(t, fn, &buf);
    if (!p)
        return NAN;
    double v = tgc_load(p, t->dtype, 0);
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
    if (t && !t->trace && t->storage && tgc_shape_numel(t->shape, t->ndim) > 0 &&
        (t->dtype == TGC_I64 || t->dtype == TGC_I32)) {
        uint64_t buf;
        const void *p = item_bytes(t, "tgc_item_i64", &buf);
        if (p && t->dtype == TGC_I64)
            return *(const int64_t *)p;
        if (p)
            return *(const int32_t *)p;
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
