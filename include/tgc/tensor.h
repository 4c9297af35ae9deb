/* libtgc — tensors, devices, dtypes, status codes and scopes.
 *
 * Ownership: every tensor belongs to exactly one scope (see tgc_scope_push). Ops create
 * their results in the calling thread's innermost scope; tgc_scope_pop frees every tensor
 * still owned by that scope. tgc_tensor_free frees one tensor early. A thread always has a
 * root scope, freed at thread exit or by tgc_shutdown(). Views share storage with their
 * base; storage lives as long as any tensor viewing it.
 *
 * Threading: a tensor may be read from many threads at once; writes need external
 * synchronisation. Scopes are per thread.
 *
 * Errors: fallible calls return tgc_status, or NULL for calls that return a tensor.
 * tgc_last_error() gives the calling thread's message for the most recent failure. */
#ifndef TGC_TENSOR_H
#define TGC_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TGC_API __attribute__((visibility("default")))
#else
#define TGC_API
#endif

#define TGC_MAX_DIMS 8
/* The largest tensor: the sizes of every tensor, view and intermediate result, with sizes
 * of 0 counted as 1, multiply to at most TGC_MAX_NUMEL (2^56). So numel, every stride and
 * offset, and numel * element size (8 bytes at most: 2^59) fit in int64_t and size_t.
 * Creation functions and ops whose result would break this fail with TGC_ERR_SHAPE and a
 * message naming the op and the shape; so do shape computations that overflow int64
 * (conv and pool windows, cat sizes, reshape and expand targets) and pads beyond
 * +-TGC_MAX_NUMEL. Slice bounds of any int64 value clamp as in python. */
#define TGC_MAX_NUMEL ((int64_t)1 << 56)

typedef enum tgc_status {
    TGC_OK = 0,
    TGC_ERR_INVALID_ARG,
    TGC_ERR_SHAPE,
    TGC_ERR_DTYPE,
    TGC_ERR_DEVICE,
    TGC_ERR_OOM,
    TGC_ERR_UNSUPPORTED,
    TGC_ERR_COMPILE,
    TGC_ERR_RUNTIME,
    TGC_ERR_CACHE_LIMIT,
    TGC_ERR_GRAPH_BREAK,
    TGC_ERR_IO,
    TGC_ERR_INTERNAL,
    TGC_ERR_TIMEOUT,  /* a peer of a process group did not answer in time (tgc_dist) */
    TGC_ERR_MISMATCH, /* ranks of a process group disagree (a module's structure) */
    TGC_STATUS_COUNT
} tgc_status;

/* Name of a status ("TGC_ERR_SHAPE"); never NULL. */
TGC_API const char *tgc_status_str(tgc_status s);
/* The calling thread's message for its most recent error ("" when none). Valid until the
 * next failing call on this thread. */
TGC_API const char *tgc_last_error(void);
/* The status of the calling thread's most recent error (TGC_OK when cleared). */
TGC_API tgc_status tgc_last_status(void);
/* Forget the calling thread's error, so that the next NULL from an op can be attributed. */
TGC_API void tgc_clear_error(void);

typedef enum tgc_dtype {
    TGC_F32 = 0,
    TGC_F16,
    TGC_BF16,
    TGC_I32,
    TGC_I64,
    TGC_BOOL,
    TGC_F64,
    TGC_DTYPE_COUNT
} tgc_dtype;

TGC_API const char *tgc_dtype_name(tgc_dtype dt);
TGC_API size_t tgc_dtype_size(tgc_dtype dt);

typedef enum tgc_device_type { TGC_DEVICE_CPU = 0, TGC_DEVICE_CUDA = 1 } tgc_device_type;
typedef struct tgc_device {
    tgc_device_type type;
    int index;
} tgc_device;

TGC_API tgc_device tgc_cpu(void);
TGC_API tgc_device tgc_cuda(int index);

typedef struct tgc_tensor tgc_tensor;

/* ---- scopes ---- */
/* Open a scope on this thread: tensors created until the matching pop belong to it. */
TGC_API void tgc_scope_push(void);
/* Free every tensor still owned by the innermost scope and close it. Popping the root
 * scope, or inside a model function the scope tgc_call opened for it, is an error
 * (TGC_ERR_INVALID_ARG) that frees nothing. */
TGC_API tgc_status tgc_scope_pop(void);
/* Move t into the enclosing scope, so it survives the next tgc_scope_pop(). A tensor of the
 * root scope (nothing encloses it) or of the scope tgc_call opened around a model function
 * cannot move: TGC_ERR_INVALID_ARG. */
TGC_API tgc_status tgc_scope_keep(tgc_tensor *t);
/* Free one tensor now (its storage survives while other views use it). NULL is a no-op. */
TGC_API void tgc_tensor_free(tgc_tensor *t);
/* Free this thread's root scope and library state. Safe to call more than once. */
TGC_API void tgc_shutdown(void);
/* Leak checks for a host loop. tgc_scope_depth: the scopes open on this thread above its
 * root scope (0 at top level; inside a model function the scope tgc_call opened counts).
 * tgc_live_tensor_count: the tensor objects alive in the whole process, on every thread,
 * including module parameters and buffers, gradients, and tensors the library holds (kept
 * by compiled functions, saved for a backward, or still viewed by another tensor); a loop
 * whose iterations each leave it higher leaks. Both are cheap and thread-safe; the count
 * is exact when no other thread makes or frees tensors meanwhile. When a thread's root
 * scope comes to hold 100,000 tensors (and again at 1,000,000, ...), a warning goes
 * through the log (tgc_set_log_fn in config.h). */
TGC_API int tgc_scope_depth(void);
TGC_API int64_t tgc_live_tensor_count(void);

/* ---- creation (results belong to the innermost scope) ---- */
TGC_API tgc_tensor *tgc_empty(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
TGC_API tgc_tensor *tgc_zeros(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
TGC_API tgc_tensor *tgc_ones(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
TGC_API tgc_tensor *tgc_full(const int64_t *shape, int ndim, double value, tgc_dtype dt,
                             tgc_device dev);
/* 1-D [start, start+step, ...) below end (above end for a negative step). start, end and
 * step must be finite, step nonzero, and end - start must not have the opposite sign of
 * step (TGC_ERR_INVALID_ARG); more than TGC_MAX_NUMEL elements is TGC_ERR_SHAPE. */
TGC_API tgc_tensor *tgc_arange(double start, double end, double step, tgc_dtype dt, tgc_device dev);
/* Copies nbytes = numel * dtype size from host memory `data` (row-major). */
TGC_API tgc_tensor *tgc_from_data(const void *data, size_t nbytes, const int64_t *shape, int ndim,
                                  tgc_dtype dt, tgc_device dev);
/* Uniform [0,1) and standard normal from the library's Philox4x32-10 generator. */
TGC_API tgc_tensor *tgc_rand(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
TGC_API tgc_tensor *tgc_randn(const int64_t *shape, int ndim, tgc_dtype dt, tgc_device dev);
/* Seed the process-wide generator and reset its offset to 0. */
TGC_API void tgc_manual_seed(uint64_t seed);

/* ---- queries (on NULL: 0 / TGC_F32 / CPU, and an error is set) ---- */
TGC_API int tgc_ndim(const tgc_tensor *t);
/* Size of dim (negative counts from the end). Reading a dynamic dim while tracing
 * specializes it (a guard is added and the `dynamic` log channel says so). */
TGC_API int64_t tgc_size(const tgc_tensor *t, int dim);
/* Copies ndim sizes into shape (at least TGC_MAX_DIMS entries); returns ndim. */
TGC_API int tgc_shape(const tgc_tensor *t, int64_t *shape);
TGC_API int64_t tgc_stride(const tgc_tensor *t, int dim);
TGC_API tgc_dtype tgc_dtype_of(const tgc_tensor *t);
TGC_API tgc_device tgc_device_of(const tgc_tensor *t);
TGC_API int64_t tgc_numel(const tgc_tensor *t);
TGC_API int tgc_is_contiguous(const tgc_tensor *t);

/* ---- data movement ---- */
/* t on dev: tgc_contiguous(t) when t is on dev already (a view of t when contiguous), else a
 * contiguous copy on dev. A device is available when its backend is (TGC_ERR_DEVICE
 * otherwise); an op takes inputs of one device. */
TGC_API tgc_tensor *tgc_to(tgc_tensor *t, tgc_device dev);
/* Copies the tensor's elements, row-major, into dst (nbytes must be numel * dtype size), from
 * any device. */
TGC_API tgc_status tgc_copy_to_host(const tgc_tensor *t, void *dst, size_t nbytes);
/* Copies src into dst elementwise (same shape; dtypes and devices may differ). Bumps dst's
 * version. Inside a compiled function it is the in-place write of the variant: dst, a module
 * parameter or buffer, a gradient (tgc_grad), an optimizer's state or a captured tensor, is
 * written by every call (later reads of dst in the function see src's values; a dst that is
 * a strided view is a graph break). Not differentiable: src's record does not flow into dst.
 * dst must not overlap itself (an expanded view, stride 0 over a size above 1, has
 * elements that share memory): TGC_ERR_INVALID_ARG. */
TGC_API tgc_status tgc_copy_(tgc_tensor *dst, const tgc_tensor *src);
/* First element's value. While tracing, reading a traced tensor is a graph break. */
TGC_API double tgc_item_f64(const tgc_tensor *t);
TGC_API int64_t tgc_item_i64(const tgc_tensor *t);

/* ---- dynamic shapes ---- */
/* Ask tgc_compile to treat `dim` of this tensor as symbolic whenever it is an input.
 * Sizes of 0 and 1 stay specialized, as in PyTorch; so do sizes computed from symbolic
 * ones (a slice, a pad, a conv output) that are 1 when traced: they become the constant 1
 * under a guard, and a call where they differ compiles a new variant. */
TGC_API void tgc_mark_dynamic(tgc_tensor *t, int dim);

/* Sizes without specializing them. Reading a size with tgc_size, tgc_shape or tgc_numel
 * while tracing turns a dynamic dim into a constant (a guard: other sizes recompile, and the
 * recompile reason names the call that read it). A model that needs a size to build a shape
 * takes it as a tgc_symint instead: outside tracing, and for static dims, it is just the
 * number; while tracing a dynamic dim it is the size's symbolic expression, which
 * tgc_reshape_sym, tgc_expand_sym (ops.h), tgc_full_sym and tgc_arange_sym take without
 * specializing anything. Often no size is needed at all: tgc_flatten(t, 1, -1),
 * tgc_reshape with 0 (copy this dim) and -1 (infer it), tgc_reshape_as, tgc_expand_as.
 *
 * A tgc_symint is a small value (copy it freely); its fields are private. One made during a
 * trace belongs to that trace: using it after the trace, or in another, is
 * TGC_ERR_INVALID_ARG. An invalid symint (from a failed tgc_sym_size, an overflow, a division
 * by a non-positive value) carries no value: ops given one return NULL and keep the first
 * error, as with NULL tensors. Thread: a symint is only meaningful on the thread that made
 * it while it traces. */
typedef struct tgc_symint {
    int64_t expr_;   /* private: the value, or an expression handle of the trace */
    uint64_t trace_; /* private: the trace it belongs to, 0 for a plain number */
    int invalid_;    /* private: set when it came from an error */
} tgc_symint;

/* The size of dim (negative counts from the end), unspecialized while tracing. */
TGC_API tgc_symint tgc_sym_size(const tgc_tensor *t, int dim);
/* A plain number. */
TGC_API tgc_symint tgc_symint_const(int64_t v);
/* Arithmetic (overflow is TGC_ERR_SHAPE); floordiv rounds toward -inf and needs b > 0
 * (TGC_ERR_INVALID_ARG otherwise; a symbolic b is guarded to stay positive). */
TGC_API tgc_symint tgc_symint_add(tgc_symint a, tgc_symint b);
TGC_API tgc_symint tgc_symint_sub(tgc_symint a, tgc_symint b);
TGC_API tgc_symint tgc_symint_mul(tgc_symint a, tgc_symint b);
TGC_API tgc_symint tgc_symint_floordiv(tgc_symint a, tgc_symint b);
/* The number. Reading a symbolic one while tracing specializes it, like tgc_size. *ok (may
 * be NULL) is 0 for an invalid symint (the result is then 0). */
TGC_API int64_t tgc_symint_value(tgc_symint s, int *ok);
/* tgc_full with a shape of symints. */
TGC_API tgc_tensor *tgc_full_sym(const tgc_symint *shape, int ndim, double value, tgc_dtype dt,
                                 tgc_device dev);
/* start, start + step, ... below end (step != 0), as tgc_arange, with a symbolic end: while
 * tracing the element count ceil((end - start) / step) stays symbolic (guarded to be >= 0). */
TGC_API tgc_tensor *tgc_arange_sym(int64_t start, tgc_symint end, int64_t step, tgc_dtype dt,
                                   tgc_device dev);

/* Release memory returned by the library (e.g. tgc_fn_explain). */
TGC_API void tgc_free(void *p);

/* ---- host memory ---- */
/* The host program's allocator for the bytes of every tensor on the host: tensor data,
 * module parameters and gradients, and the scratch memory of compiled functions and eager
 * kernels (the library's own objects, graphs, compiled code and the per-thread packing
 * buffers of the CPU GEMM and conv kernels still use malloc).
 * alloc(nbytes, alignment, user) returns nbytes of memory aligned to `alignment` (always
 * 64; nbytes is a positive multiple of 64), or NULL when out of memory (the op then fails
 * with TGC_ERR_OOM; a misaligned pointer is handed back to free and counts as NULL).
 * free(ptr, nbytes, user) gets each block back once, with the nbytes it was asked for, from
 * any thread. Both are called from any thread, concurrently: they must be thread-safe, and
 * must not call libtgc. The library's own cache of large freed blocks
 * (TGC_STORAGE_CACHE_BYTES) is bypassed: the host allocator decides what to keep.
 * Set it before the first tensor is made and the first op runs, with no other thread using
 * libtgc meanwhile: while any host block is alive (a tensor, module, gradient, optimizer
 * state or compiled function not yet freed) it fails with TGC_ERR_INVALID_ARG and changes
 * nothing. Both NULL:
 * the library's own allocator (again). One NULL and not the other: TGC_ERR_INVALID_ARG.
 * The functions (and user) must stay valid while any block they made is alive, which may be
 * until the process exits. Device memory is the device allocator's (cuda.h). */
typedef void *(*tgc_host_alloc_fn)(size_t nbytes, size_t alignment, void *user);
typedef void (*tgc_host_free_fn)(void *ptr, size_t nbytes, void *user);
TGC_API tgc_status tgc_set_host_allocator(tgc_host_alloc_fn alloc, tgc_host_free_fn free_fn,
                                          void *user);

#ifdef __cplusplus
}
#endif
#endif
