/* The execution plan a compiled backend's variant becomes, shared by the compile driver
 * (driver.c builds it), the executor (exec.c runs it) and the backends (they compile and
 * launch its kernels).
 *
 * A plan is the optimized graph, its ordered steps (a kernel, or one node the backend has no
 * kernel for, run on interp), the memory plan (memplan.h: an arena slot per intermediate)
 * and the backend's code. It never changes after the compile, so calls on many threads
 * share it; only the arenas it keeps between calls (one per stream, taken under a trylock)
 * and the recordings of REDUCE_OVERHEAD (replay.c, also per stream) change. */
#ifndef TGC_BACKEND_PLAN_H
#define TGC_BACKEND_PLAN_H

#include <pthread.h>

#include "backend/backend.h"
#include "backend/memplan.h"
#include "kir/abi.h"
#include "runtime/storage.h"

/* One kernel of a variant, as the backend's compile / launch / run_template see it. */
typedef struct tgc_plan_kernel {
    kir_kernel *k;  /* LOOP, GEMM or CONV (owned by the plan) */
    kir_args slots; /* its size slots, collected by the driver (the kernel ABI) */
    char name[32];  /* "k<group>": unique within the variant */
    void *handle;   /* the backend's: set by its compile, read by launch / run_template */
    /* Batched launches (the backend's launch_batch): n >= 2 at the first kernel of a batch,
     * whose n - 1 successors (kernels i + 1 .. i + n - 1, of later steps) launch with it in
     * its step; 0 at those successors (their own steps do nothing); 1 for a kernel launched
     * alone. Set by the driver before compile (plan_batches in driver.c). */
    int batch;
} tgc_plan_kernel;

/* What a launch may need besides buffers and sizes: the symbols of this call (to evaluate
 * the kernel's symbolic extents) and the thread budget of the function. */
typedef struct tgc_launch_env {
    const tgc_symtab *syms;
    const int64_t *symvals;
    int n_threads;
    tgc_device device; /* the plan's device */
    void *stream;      /* device backends: the stream to launch on (NULL: the backend's own
                        * for this thread and device) */
    /* the backend's code of the plan being run (what its compile returned): what the compile
     * decided for the variant that a native step reads too (CUDA: the matmul precision of
     * the conv gradients, the compile cache's directory) */
    const void *code;
} tgc_launch_env;

/* A step: kernel >= 0 runs plan kernel `kernel`; kernel < 0 runs graph node `node` on
 * interp (an opaque step: its data staged to the host first when the backend's device is
 * not host memory). */
typedef struct tgc_step {
    int32_t kernel;
    int32_t node;
} tgc_step;

/* The results of a plan's leading steps that compute from module tensors and constants only
 * (kept.c), as one stream's calls keep them: a buffer per kept value and the key of the call
 * that computed them (every input's storage, version, offset and strides, the symbol
 * values). valid: the buffers hold the results for key. */
typedef struct tgc_kept_cache {
    tgc_storage **bufs; /* per kept value; NULL until first needed */
    uint64_t *key;      /* n_key words; n_key < 0: none */
    int n_key, key_cap;
    uint64_t *next; /* the key being built for the current call */
    int n_next, next_cap;
    int valid;
} tgc_kept_cache;

/* The arena a plan keeps between the calls made on one stream (exec.c). A device backend's
 * launches are asynchronous: the kernels of a call that returned may still be reading and
 * writing its arena, so only later work on the same stream (which runs after them) may use
 * it; a call on another stream gets the arena of its own stream. The host (a backend
 * without stream_key) has one, key 0. */
#define TGC_PLAN_STREAMS 16
typedef struct tgc_plan_stream {
    uint64_t key;         /* the backend's stream_key; 0 on the host; unused when arena and
                           * the key are both 0 on a device plan */
    uint64_t last_call;   /* the plan's call count at its last use: the oldest is evicted */
    pthread_mutex_t lock; /* held by the call using arena (a trylock) */
    tgc_storage *arena;
    tgc_kept_cache kept; /* the kept values of the calls on this stream */
} tgc_plan_stream;

/* Steps [0, n_steps) of a plan read only module tensors (parameters, buffers, gradients,
 * captured tensors) and constants, draw nothing and write no input nor output: batch-norm
 * scales, weights sliced to a convolution's live taps, masks from constants. Their results
 * that later steps read (values) are kept between a stream's calls and the steps are skipped
 * while every input they read (inputs: INPUT nodes) is the same storage at the same version,
 * offset and strides, under the same symbol values (kept.c). n_steps = 0: none. */
typedef struct tgc_plan_kept {
    int n_steps;
    int32_t *inputs;
    int n_inputs;
    int32_t *values;
    int n_values;
    int32_t *index; /* per graph value: its index in values, else -1; NULL when no values */
} tgc_plan_kept;

typedef struct tgc_plan {
    const tgc_backend *backend;
    tgc_device device;
    tgc_graph *g; /* the optimized clone the steps index */
    tgc_step *steps;
    int n_steps;
    tgc_plan_kernel *kernels;
    int n_kernels;
    void *code;   /* the backend's, from its compile */
    void *stream; /* the config's stream for the backend (NULL: the thread's) */
    int n_threads;
    tgc_log_fn log_fn; /* cfg->log_fn, log_user: where TGC_PROFILE lines go */
    void *log_user;
    tgc_memplan mem;
    /* per value: 1 when a node writes it in place (tgc_pass_mutated_values); NULL when no
     * node does. Inputs so marked are written back after a call. */
    uint8_t *mutated;
    /* per value: the INPUT an ASSIGN writes it to, when the kernel computing it can store
     * straight into that input (forward_writes in driver.c), else -1; NULL when none can. The
     * executor then binds the value to the input's buffer and the ASSIGN copies nothing. */
    int32_t *write_to;
    tgc_plan_kept kept; /* the leading steps whose results are kept between calls */
    /* the arenas kept between calls, per stream: streams_lock guards the keys and n_streams
     * (held only to find, add or evict an entry, never during a call) */
    pthread_mutex_t streams_lock;
    tgc_plan_stream streams[TGC_PLAN_STREAMS];
    int n_streams;
    uint64_t n_calls; /* under streams_lock */
    /* REDUCE_OVERHEAD on a backend with capture: the recorded calls (replay.c); NULL when the
     * plan runs step by step */
    struct tgc_replay *replay;
} tgc_plan;

/* The per-stream arenas (exec.c): set up empty by the driver, freed with the plan. */
void tgc_plan_streams_init(tgc_plan *p);
void tgc_plan_streams_free(tgc_plan *p);
/* The bytes of the plan's arenas, over every stream. */
size_t tgc_plan_arena_bytes(tgc_plan *p);

/* Kept values (kept.c). The driver finds the kept steps once the steps, the written inputs
 * and the forwarded writes are known, before the memory plan: kept values take no arena slot
 * (mat[v] cleared). TGC_ERR_OOM. */
tgc_status tgc_plan_kept_find(tgc_plan *p, uint8_t *mat);
void tgc_plan_kept_free(tgc_plan_kept *k);
/* A call holding stream entry c builds its key: begin with the symbol values, then each of
 * p->kept.inputs' tensors in order; end returns 1 when c's buffers hold the kept values for
 * this key (the kept steps can be skipped), else 0 with c made ready to be filled (the key
 * taken, not valid until tgc_kept_filled says the kept steps ran). */
void tgc_kept_key_begin(tgc_kept_cache *c, const int64_t *symvals, int n_syms);
void tgc_kept_key_input(tgc_kept_cache *c, const tgc_tensor *t);
int tgc_kept_key_end(tgc_kept_cache *c);
void tgc_kept_filled(tgc_kept_cache *c);
/* The buffer of kept value j, allocated or replaced to hold bytes first (contents kept when
 * it fits; a replacement makes c invalid); NULL: out of memory. */
tgc_storage *tgc_kept_buffer(const tgc_plan *p, tgc_kept_cache *c, int j, size_t bytes);
void tgc_kept_cache_clear(const tgc_plan *p, tgc_kept_cache *c);
size_t tgc_kept_bytes(const tgc_plan *p, const tgc_kept_cache *c);

/* Batched launches (batch.c): marks p->kernels[].batch (1 everywhere, or the batches the
 * backend can launch as one: kernels of consecutive steps, forwarded ASSIGN steps between
 * them allowed, none depending on another, on one side of the kept steps' boundary). The
 * driver calls it once the forwarded writes and the kept steps are known, before the
 * backend's compile; a kernels line per batch goes to cfg's log. TGC_ERR_OOM. */
tgc_status tgc_plan_batches(tgc_plan *p, const tgc_config *cfg, const char *name);
/* The value whose buffer value v is at run time: a view's viewed value, a value stored
 * straight into an input (write_to) that input, else v. */
int32_t tgc_plan_root(const tgc_plan *p, int32_t v);
/* The kernels of p that run in batched launches; *n_launches: those launches. */
int tgc_plan_batched(const tgc_plan *p, int *n_launches);

/* The driver (driver.c): compiles g for compiled backend b into a plan. */
tgc_status tgc_plan_compile(const tgc_backend *b, const tgc_graph *g, const tgc_config *cfg,
                            tgc_device dev, const char *name, tgc_plan **out);
void tgc_plan_free(tgc_plan *p);

/* The run entry (run.c): runs plan p (tgc_backend_run's contract): replayed (replay.c) when
 * the plan has a replay and it applies, else step by step. */
tgc_status tgc_plan_run(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs);
/* Runs the steps of p one by one (capturing: the launches are being recorded, so a step
 * that would synchronize fails with TGC_ERR_UNSUPPORTED instead). kept: NULL for the kept
 * values of the stream's arena entry; else a recording's own (replay.c), whose values the
 * call reads (skipping the kept steps) when they hold for it, in a private arena. */
tgc_status tgc_plan_run_steps(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs, int capturing,
                              tgc_kept_cache *kept);
/* Runs p's kept steps into kept unless its values hold for this call already (a recording
 * that reads them refreshes them before each replay, outside the graph). */
tgc_status tgc_plan_refresh_kept(tgc_plan *p, const tgc_exec_args *x, tgc_kept_cache *kept);

/* REDUCE_OVERHEAD (replay.c): a plan whose backend can capture records one call into a
 * graph and replays it. */
typedef struct tgc_replay tgc_replay;
/* The replay state for p, or NULL (with a perf-channel line naming why, through cfg) when p
 * cannot be replayed: it draws random numbers (a replay would repeat the bits), or writes
 * its inputs in place. */
tgc_replay *tgc_replay_new(const tgc_plan *p, const tgc_config *cfg, const char *name);
/* Frees p->replay and its recordings (their graphs and buffers); p->replay becomes NULL. */
void tgc_replay_release(tgc_plan *p);
/* Serves one call from a recording when it can (*done = 1, its status returned); *done = 0:
 * run the steps instead (the first call, a call while another thread replays, a call whose
 * recordings are all still in use by their outputs). */
tgc_status tgc_replay_run(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs, int *done);

#endif
