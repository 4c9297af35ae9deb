/* tgc_fn internals: the variant cache behind tgc_compile / tgc_call. */
#ifndef TGC_JIT_JIT_H
#define TGC_JIT_JIT_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/registry.h"
#include "jit/guard.h"
#include "tgc/compile.h"

typedef struct tgc_variant {
    int id;       /* 1-based, in compile order */
    int is_eager; /* the trace hit a graph break: calls matching these guards run eagerly */
    tgc_guards guards;
    tgc_graph *graph;
    const tgc_backend *backend; /* the backend for the inputs' device (tgc_backend_for_call) */
    tgc_device device;          /* where it runs: its inputs' device */
    void *artifact;
    tgc_tensor **bound; /* the guards' captured and constant tensors, for tgc_exec_args */
    int32_t *grad_params; /* module tensors whose .grad the graph binds (TGC_BIND_GRAD): each
                           * call makes sure they exist first */
    int n_grad_params;
    char reason[256];   /* why it was compiled */
    char break_reason[256];
    uint64_t hits;
    double compile_seconds;
    struct tgc_variant *next; /* most recently hit first */
} tgc_variant;

struct tgc_fn {
    tgc_model_fn fn;
    char *name;
    tgc_config cfg; /* strings owned */
    const tgc_backend *backend;
    /* lock: the variant list (lookups reorder it), the counters and limit_warned; held for a
     * lookup, never across a compile. compile_lock: one compile of this function at a time,
     * and the automatic-dynamic state below; taken before lock, so calls that hit existing
     * variants go on while another call compiles. */
    pthread_mutex_t lock;
    pthread_mutex_t compile_lock;
    tgc_variant *variants;
    int n_variants;
    int limit_warned;
    /* n_in << 32 | n_out of the first call that succeeded (-1 before it): later calls must
     * pass the same. Set once (compare-exchange), read without the lock on every call. */
    _Atomic int64_t signature;
    /* automatic dynamic: sizes seen per input dim at earlier compiles */
    int n_seen;
    int64_t (*seen)[TGC_MAX_DIMS];
    int *seen_ndim;
    uint8_t *dynamic_dims; /* per input: dims that changed, symbolic from now on */
    tgc_stats stats;
    double guard_ns_sum;
    uint64_t guard_samples;
};

/* The caller's config (NULL: the defaults) as the library's full struct in *out: the
 * fields past user->struct_size take their defaults; then the checks of tgc_compile. */
tgc_status tgc_config_read(const tgc_config *user, tgc_config *out);
/* Traces f for these inputs and builds variant number id (not yet linked into the cache). */
tgc_status tgc_variant_compile(tgc_fn *f, int id, tgc_module *self, tgc_tensor *const *in, int n_in,
                               int n_out, tgc_variant **out);
void tgc_variant_free(const tgc_fn *f, tgc_variant *v);

#endif
