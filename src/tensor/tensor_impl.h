/* The tensor object behind the opaque tgc_tensor, and helpers for kernels.
 *
 * A concrete tensor views a refcounted storage (offset and strides in elements) on the host
 * or on a device; code that touches elements with the CPU reaches them only through
 * tgc_host_data, after a host check (tgc_host_check). A traced
 * tensor (t->trace != NULL) has no storage: it names value `value` of the trace's graph
 * and its shape is symbolic (sshape); shape[] holds the trace-time hints. */
#ifndef TGC_TENSOR_TENSOR_IMPL_H
#define TGC_TENSOR_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/storage.h"
#include "tgc/tensor.h"

struct tgc_trace;
struct tgc_scope;
struct tgc_module;

/* The head of an autograd record (autograd/autograd.h): the tensor core only counts
 * references to it and calls release at the last one, so it needs nothing of the frontend. */
typedef struct tgc_grad_link {
    int refs;
    void (*release)(struct tgc_grad_link *link);
} tgc_grad_link;
void tgc_grad_link_ref(tgc_grad_link *l);
void tgc_grad_link_unref(tgc_grad_link *l);

enum {
    TGC_T_REQUIRES_GRAD = 1u << 0,
    TGC_T_TRACE_CONST = 1u << 1, /* created while tracing: becomes a graph constant */
    TGC_T_DEAD = 1u << 2,        /* freed by its owner; kept alive by other references */
};

struct tgc_tensor {
    tgc_dtype dtype;
    int ndim;
    int64_t shape[TGC_MAX_DIMS];
    int64_t strides[TGC_MAX_DIMS]; /* elements */
    int64_t offset;                /* elements */
    tgc_device device;
    tgc_storage *storage; /* NULL for traced tensors */
    uint32_t flags;
    uint8_t dyn_mask; /* tgc_mark_dynamic bits */
    uint64_t uid;     /* unique per tensor object, never reused */
    int refs;         /* owner reference + variant references; freed at 0 */

    /* tracing */
    struct tgc_trace *trace;
    int32_t value;
    int64_t sshape[TGC_MAX_DIMS]; /* tgc_sdim handles (ir/sym.h) of the trace's symtab */

    /* autograd: the record that made this tensor (a reference; NULL for leaves and untracked
     * results), and a leaf's accumulated gradient (owned: an unowned tensor this one holds,
     * freed with it) whose grad_of points back here */
    tgc_grad_link *grad_fn;
    tgc_tensor *grad;
    tgc_tensor *grad_of;
    /* a leaf's gradient hook (autograd/autograd.h: told when a backward finished its
     * gradient, e.g. by the data-parallel wrapper of its module) and the leaf's index in the
     * hook's own tables; NULL when none */
    struct tgc_grad_hook *grad_hook;
    int32_t grad_hook_slot;

    /* ownership: a scope's doubly linked list, or a module */
    struct tgc_scope *scope;
    tgc_tensor *prev, *next;
    struct tgc_module *module;

    /* what the library that owns the tensor calls it, for reports; NULL when unnamed */
    char *debug_name;
};

/* ---- the thread's active trace (set by the tracer; tensors created while one is active are
 * graph constants, TGC_T_TRACE_CONST) ---- */
struct tgc_trace *tgc_trace_current(void);
void tgc_trace_set_current(struct tgc_trace *tr);

/* ---- creation (internal) ---- */
/* 1 when shape (ndim dims) is a valid tensor shape; else 0 with the error set, naming fn. */
int tgc_shape_check(const char *fn, const int64_t *shape, int ndim);
/* 1 when dt is a dtype and tensors can live on dev; else 0 with the error set. */
int tgc_dtype_device_check(const char *fn, tgc_dtype dt, tgc_device dev);
/* tgc_tensor_new with fn naming the public op in errors (shape, dtype, device, OOM). */
tgc_tensor *tgc_tensor_new_checked(const char *fn, const int64_t *shape, int ndim, tgc_dtype dt,
                                   tgc_device dev);
/* A contiguous tensor with fresh storage, in the innermost scope. */
tgc_tensor *tgc_tensor_new(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
/* A view of base's storage with the given geometry, in the innermost scope. */
tgc_tensor *tgc_tensor_view(const tgc_tensor *base, const int64_t *shape, const int64_t *strides,
                            int ndim, int64_t offset);
/* A tensor object with no owner (not in any scope); refs = 1. Free with tgc_tensor_unref. */
tgc_tensor *tgc_tensor_alloc_unowned(void);
/* 1 when tensors can live on dev: an allocator is registered for its type (runtime/alloc.h;
 * the host's always is) and the index is one it has; else 0 with TGC_ERR_DEVICE set, the
 * message starting with fn and naming the device (or its unknown type). */
int tgc_device_check(const char *fn, tgc_device dev);
void tgc_tensor_ref(tgc_tensor *t);
void tgc_tensor_unref(tgc_tensor *t);
/* Names t for reports (tgc_fn_explain, recompile reasons): what the part of the library that
 * owns t calls it, e.g. an optimizer's state "adam.exp_avg[fc1.weight]". Replaces an earlier
 * name (NULL clears it); the name is copied and freed with the tensor object. 0 when out of
 * memory (t keeps its old name: a name is an aid to reports, never needed). */
int tgc_tensor_set_debug_name(tgc_tensor *t, const char *name);
/* Adds t to the innermost scope of this thread. */
void tgc_scope_adopt(tgc_tensor *t);
/* Removes t from its scope without freeing it (caller takes the owner reference). */
void tgc_scope_release(tgc_tensor *t);

/* ---- geometry ---- */
int64_t tgc_shape_numel(const int64_t *shape, int ndim);
void tgc_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
int tgc_tensor_is_contiguous(const tgc_tensor *t);
/* Element offset (from the storage start) of the i-th element in row-major order. */
int64_t tgc_tensor_elem_offset(const tgc_tensor *t, int64_t linear);
/* Normalizes dim against ndim (negative from the end); -1 when out of range. */
int tgc_norm_dim(int dim, int ndim);

/* ---- host memory ---- */
/* 1 when t's elements are in host memory (or t has no storage: traced); 0 when they are on a
 * device, where only the tensor core's copies (tensor/copy.h) reach them. */
static inline int tgc_on_host(const tgc_tensor *t)
{
    return !t->storage || t->storage->device.type == TGC_DEVICE_CPU;
}
/* 1 when t is on the host; else 0 with TGC_ERR_DEVICE set: "<fn>: <what> is on cuda:0, but
 * <who> runs on host memory only; move it with tgc_to(t, tgc_cpu())" (fn: the user's op,
 * who: the host-only code, what: which tensor). The check host-only code makes at its
 * entry. */
int tgc_host_check(const char *fn, const char *who, const char *what, const tgc_tensor *t);
/* HOST MEMORY ONLY: the host address of element 0 of t's storage (NULL without storage),
 * for code that reads or writes elements with the CPU. Never call it on a tensor that may
 * be on a device: such code checks tgc_on_host / tgc_host_check at its entry first (interp:
 * tgc_interp_run; the frontend: its ops), and moves other memory with the tensor core's
 * copies. */
static inline void *tgc_host_data(const tgc_tensor *t)
{
    return t->storage ? t->storage->data : 0;
}
/* The address of element 0 of t's view (storage start + offset) in the memory of the device t
 * lives on: what a kernel of that device's backend is handed (backend/exec.c). Host code
 * dereferences it only when tgc_on_host(t). */
static inline void *tgc_device_ptr(const tgc_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)tgc_dtype_size(t->dtype);
}

/* ---- element access: values go through double (exact for every dtype's range used) ---- */
double tgc_load(const void *base, tgc_dtype dt, int64_t off);
void tgc_store(void *base, tgc_dtype dt, int64_t off, double v);
float tgc_half_to_float(uint16_t h);
uint16_t tgc_float_to_half(float f);
float tgc_bf16_to_float(uint16_t h);
uint16_t tgc_float_to_bf16(float f);

#endif
