/* The tracer: runs a model function once with traced tensors and records a graph.
 *
 * A trace is thread-local while active. Concrete tensors met during tracing become graph
 * inputs: module tensors of `self` bound by position, tensors created during the trace as
 * constants, anything else as a captured tensor: bound at call time like a parameter (its
 * values are read by each call), guarded by identity and liveness, and by its version only
 * when the trace read its values (tgc_item_* on it), because then the graph holds them. */
#ifndef TGC_FRONTEND_TRACE_H
#define TGC_FRONTEND_TRACE_H

#include "tensor/tensor_impl.h"
#include "ir/graph.h"
#include "support/error.h"
#include "tgc/compile.h"

typedef struct tgc_trace_binding {
    tgc_tensor *t;    /* referenced (tgc_tensor_ref) */
    uint64_t version; /* storage version when bound */
    int32_t value;    /* its INPUT node */
    int is_const;     /* created during the trace (TGC_BIND_CONST) */
    int values_read;  /* the trace read its values: the graph depends on this version */
} tgc_trace_binding;

/* A value read at trace time from an input tensor (tgc_item_*): guarded by value. */
typedef struct tgc_value_guard {
    int input;
    double value;
} tgc_value_guard;

/* A size read at trace time (tgc_size, tgc_shape, tgc_numel, tgc_symint_value) that
 * specialized a symbolic dim: the assumption dim == value, and a sentence naming the call
 * and the dim, for the recompile reason when that assumption fails. */
typedef struct tgc_size_read {
    tgc_sdim dim;
    int64_t value;
    char what[384]; /* "input 0 dim 0 was specialized to 64 by tgc_numel() in 'forward'" */
} tgc_size_read;

/* A concrete tensor the trace assigned (tgc_copy_ -> ASSIGN): its INPUT node, and the value
 * later reads of it get. */
typedef struct tgc_trace_alias {
    const tgc_tensor *t;
    int32_t input;
    int32_t cur;
    int32_t assign; /* its latest ASSIGN node */
} tgc_trace_alias;

typedef struct tgc_trace {
    tgc_graph *g;
    const tgc_config *cfg;
    const char *fn_name;
    tgc_module *self;
    tgc_device device;   /* where the variant runs: every bound tensor must live there */
    tgc_tensor **params; /* self's flat tensor list */
    int n_params;
    int32_t *param_value; /* value id per param, -1 until used */
    int32_t *grad_value;  /* INPUT of the .grad of each param (TGC_BIND_GRAD), -1 until used;
                           * NULL until the first */
    tgc_trace_alias *aliases;
    int n_aliases, cap_aliases;
    tgc_tensor *const *args;
    int n_args;
    tgc_trace_binding *bound; /* CAPTURED and CONST inputs, by binding index */
    int n_bound, cap_bound;
    tgc_value_guard *value_guards;
    int n_value_guards, cap_value_guards;
    tgc_size_read *size_reads;
    int n_size_reads, cap_size_reads;
    uint64_t serial; /* names this trace in tgc_symint values (0 until one is made) */
    int broken;
    char break_reason[256];
} tgc_trace;

/* The calling thread's active trace, or NULL. */
/* tgc_trace_current / tgc_trace_set_current: the thread's active trace, in the tensor core
 * (tensor/tensor_impl.h), which marks tensors created while tracing as constants. */

/* Value id for a concrete tensor used by an op during tracing (binds it on first use);
 * -1 on error (set). */
int32_t tgc_trace_bind(tgc_trace *tr, tgc_tensor *t);
/* Records tgc_copy_(dst, src) while tracing: dst is a concrete, contiguous tensor (bound like
 * any other; a traced dst is rebound to src's value), src a traced or concrete tensor of
 * dst's shape (cast to dst's dtype here). Later reads of dst get src's value. */
tgc_status tgc_trace_assign(tgc_trace *tr, tgc_tensor *dst, tgc_tensor *src);
/* A new traced tensor for value id, in the innermost scope. */
tgc_tensor *tgc_trace_tensor(tgc_trace *tr, int32_t value);
/* Marks the trace broken (first reason kept). */
void tgc_trace_break(tgc_trace *tr, const char *fmt, ...) TGC_PRINTF(2, 3);
/* Called by tgc_item_* on a traced tensor: specializes an input (value guard) or breaks.
 * Returns the value to hand back to the function. */
double tgc_trace_read_value(tgc_trace *tr, const tgc_tensor *t, const char *what);
/* Called by the size queries (caller: "tgc_size", "tgc_numel", ...) on a symbolic dim during
 * tracing: specializes it, records which call did (tgc_size_read) and logs on `dynamic`. */
int64_t tgc_trace_read_size(tgc_trace *tr, const tgc_tensor *t, int dim, const char *caller);
/* The same for a symbolic size d that is not a tensor's dim (tgc_symint_value). */
int64_t tgc_trace_read_sdim(tgc_trace *tr, tgc_sdim d, const char *caller);
/* Advice appended to every message about a specializing size read. */
#define TGC_SIZE_READ_ADVICE                                                                       \
    "use tgc_flatten, tgc_reshape with 0/-1, tgc_reshape_as or tgc_sym_size instead of reading "   \
    "sizes"
/* Releases the trace's references and memory (not the graph when taken). */
void tgc_trace_release(tgc_trace *tr);

#endif
