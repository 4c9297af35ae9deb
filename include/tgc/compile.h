/* libtgc — compiling model functions.
 *
 * tgc_compile wraps a model function. The first tgc_call traces it with symbolic tensors
 * into a graph, compiles a variant for the backend and caches it under guards; later calls
 * check the guards (a precomputed signature compare) and run the matching variant.
 *
 * Tracing rules: the function body runs once per compile, with traced tensors; its side
 * effects (printf, counters, malloc) happen at trace time only. Reading a traced value
 * (tgc_item_*) is a graph break: with cfg.fullgraph tgc_call fails with
 * TGC_ERR_GRAPH_BREAK; otherwise that call, and later calls with the same guards, run
 * eagerly and the reason is logged on the `recompiles` channel.
 *
 * Captured tensors (created outside the function, not in `self`, used inside it) are bound
 * at call time like parameters: each call reads their current values, so writing them in
 * place between calls needs no recompile. A variant keeps the tensor object it traced and is
 * guarded on it being alive (freeing it recompiles); on its version only when the trace read
 * its value (tgc_item_* on it), because then the value is a constant of the graph. Values
 * reached through `self`'s userdata are not guarded at all: use module attributes.
 *
 * Scopes: the function runs inside a scope tgc_call opens for it (tracing or eagerly). The
 * function may push and pop scopes of its own; popping the one tgc_call opened fails with
 * TGC_ERR_INVALID_ARG and frees nothing, as does tgc_scope_keep of a tensor that scope owns
 * (return tensors through out[] instead). Scopes the function leaves open are closed when it
 * returns, and the call then fails with TGC_ERR_INVALID_ARG (unless the function failed).
 *
 * Ownership: tgc_compile returns a tgc_fn freed with tgc_fn_free. tgc_call writes n_out new
 * tensors into out[], owned by the caller's innermost scope. tgc_fn_explain returns a
 * string freed with tgc_free.
 *
 * Threading: tgc_call on one tgc_fn is safe from many threads at once. One function compiles
 * one variant at a time: callers that need a variant being compiled wait for it (and then
 * use it, compiling nothing), while calls that hit variants already in the cache go on
 * during the compile. Calls of different tgc_fns, eager ops and
 * the compiles they trigger may run on any number of threads at once: compiles of different
 * functions proceed in parallel (each builds, optimizes and generates code on its own; only
 * handing the finished code to the process-wide JIT is serialized). */
#ifndef TGC_COMPILE_H
#define TGC_COMPILE_H

#include "config.h"
#include "module.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef tgc_status (*tgc_model_fn)(tgc_module *self, tgc_tensor *const *in, int n_in,
                                   tgc_tensor **out, int n_out);

typedef struct tgc_fn tgc_fn;

typedef struct tgc_stats {
    uint64_t calls;
    uint64_t cache_hits;
    uint64_t compiles;        /* traces that produced a compiled variant, the first included */
    uint64_t recompiles;      /* compiles caused by a guard miss of an existing variant */
    uint64_t eager_fallbacks; /* calls that ran eagerly (limit reached or graph break) */
    uint64_t graph_breaks;    /* traces that hit a graph break (not compiles): the variant runs
                                 eagerly, or with cfg.fullgraph the call failed */
    int variants;
    int cache_limit_hit;      /* 1 once the function reached a cache limit */
    double compile_seconds;   /* total */
    double guard_ns_per_call; /* mean guard-check time of cache hits */
    int kernels_last_variant; /* kernels of the most recent variant (tgc_fn_explain says how
                               * many of them share a batched launch) */
    char last_recompile_reason[256];
    char backend[16]; /* the backend of the most recently used compiled variant ("cuda" for
                       * one on a GPU), else the one the config resolved to: "llvm", "interp" */
} tgc_stats;

/* cfg may be NULL (defaults); only its struct_size bytes are read (config.h: structs that
 * grow). Returns NULL with TGC_ERR_INVALID_ARG on a NULL fn or a bad config (limits < 1,
 * unknown enum values, a device that is none, struct_size 0), TGC_ERR_UNSUPPORTED for
 * nonzero fields of a newer header than this library's. name is copied. */
TGC_API tgc_fn *tgc_compile(tgc_model_fn fn, const char *name, const tgc_config *cfg);
TGC_API tgc_status tgc_call(tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                            tgc_tensor **out, int n_out);
/* The counts into *out (sizeof as the caller's header declares it reaches the library:
 * config.h, structs that grow). */
TGC_API tgc_status tgc_fn_stats_sized(const tgc_fn *f, tgc_stats *out, size_t out_size);
static inline tgc_status tgc_fn_stats(const tgc_fn *f, tgc_stats *out)
{
    return tgc_fn_stats_sized(f, out, sizeof *out);
}
/* A report: variants, their guards, why each was compiled, hit counts, compile and guard
 * times. Free with tgc_free. */
TGC_API char *tgc_fn_explain(const tgc_fn *f);
/* Writes the graph IR of variant i (0 = most recently hit) as text, or as DOT when dot is
 * set. Free with tgc_free. NULL when there is no such variant. */
TGC_API char *tgc_fn_graph(const tgc_fn *f, int variant, int dot);
TGC_API void tgc_fn_free(tgc_fn *f);

/* ---- the function's state, for checkpoints ----
 * With cfg.dynamic = AUTO a dim whose size changed between compiles is compiled as a
 * dynamic dim from then on, and that variant serves later calls: which variant a call runs
 * (so, for some computations, the exact bits of its results) depends on the sizes earlier
 * calls had. tgc_fn_save_state writes those decisions (per input dim: the size at the latest
 * compile, and whether it became dynamic) and the function's name to a small safetensors
 * file; tgc_fn_load_state, on a function of the same name that has not compiled yet, makes
 * it start from them. Saved with the module and optimizer checkpoints and loaded before the
 * first tgc_call of the resumed run, it makes the resumed run run the variants the
 * uninterrupted run would have run, so it continues bit for bit. Errors: NULL arguments
 * (TGC_ERR_INVALID_ARG); save: TGC_ERR_IO (written to a temporary name and renamed: a
 * failed save leaves no partial file); load: a missing or malformed file (TGC_ERR_IO), the
 * state of another function or a function that has compiled already (TGC_ERR_INVALID_ARG),
 * each leaving the function unchanged. Thread-safe with calls of f (a load then fails if a
 * call compiled first). */
TGC_API tgc_status tgc_fn_save_state(const tgc_fn *f, const char *path);
TGC_API tgc_status tgc_fn_load_state(tgc_fn *f, const char *path);

#ifdef __cplusplus
}
#endif
#endif
