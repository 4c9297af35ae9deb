/* The backend interface: one vtable per backend, and the four graph-level entry points
 * jit/ and the eager engine call (tgc_backend_compile / _run / _kernel_count / _release).
 *
 * Two kinds of backend implement it:
 *  - a graph runner (interp) runs whole graphs itself: it sets `graph` and nothing else
 *    but name and device;
 *  - a compiled backend (LLVM, CUDA) leaves `graph` NULL and supplies only what is its
 *    own: fusion classification, compile of the kernels of a variant, launch, template runs,
 *    code release and, for devices, synchronization. The shared compile driver (driver.c:
 *    passes, prepare, fusion, lowering, memory plan) and executor (exec.c: arena, binding,
 *    views, opaque steps on interp, outputs) do the rest, for every compiled backend.
 *
 * Which members are optional is said at each; a compiled backend must set every member
 * not marked optional. The kernels a compiled backend receives are described in plan.h. */
#ifndef TGC_BACKEND_BACKEND_H
#define TGC_BACKEND_BACKEND_H

#include "ir/graph.h"
#include "kir/schedule.h"
#include "passes/fuse.h"
#include "runtime/alloc.h"
#include "support/strbuf.h"
#include "tgc/config.h"

typedef struct tgc_exec_args {
    tgc_tensor *const *args; /* TGC_BIND_ARG */
    int n_args;
    tgc_tensor *const *params; /* TGC_BIND_PARAM: the module tree's flat list */
    int n_params;
    tgc_tensor *const *bound; /* TGC_BIND_CAPTURED and TGC_BIND_CONST, by binding index */
    int n_bound;
    const int64_t *symvals; /* value of each symbol for this call */
} tgc_exec_args;

struct tgc_plan_kernel;
struct tgc_launch_env;

/* Whole-variant capture (REDUCE_OVERHEAD, CUDA graphs) for a device backend: the executor
 * records one call's launches into a graph and replays it. Every member is set. */
typedef struct tgc_capture_ops {
    /* Starts recording the work the calling thread queues on its stream for dev; memory
     * allocated until end belongs to the recording for as long as it lives. */
    tgc_status (*begin)(tgc_device dev, void **cap);
    /* Stops recording and instantiates it into *graph (NULL and an error on failure, the
     * recording discarded either way). Nothing recorded has run yet. */
    tgc_status (*end)(tgc_device dev, void *cap, void **graph);
    /* Queues one replay of graph on the calling thread's stream for dev. */
    tgc_status (*launch)(tgc_device dev, void *graph);
    /* Destroys graph (a replay in flight completes first) and gives its memory back. */
    void (*release)(void *graph);
    /* Queues a copy of n contiguous bytes between two buffers of dev on the thread's stream
     * (the replay's input copies). */
    tgc_status (*copy_async)(tgc_device dev, void *dst, const void *src, size_t n);
} tgc_capture_ops;

/* A graph runner's whole-graph entry points (see tgc_backend_compile and friends for the
 * contracts they share). */
typedef struct tgc_graph_ops {
    tgc_status (*compile)(const tgc_graph *g, const tgc_config *cfg, const char *name,
                          void **artifact);
    tgc_status (*run)(void *artifact, const tgc_graph *g, const tgc_exec_args *x,
                      tgc_tensor **outs);
    int (*kernel_count)(const void *artifact);
    void (*release)(void *artifact);
} tgc_graph_ops;

struct tgc_backend_reg;

typedef struct tgc_backend {
    const char *name;           /* in logs and errors: its registration's name */
    tgc_device_type device;     /* where its buffers live; the eager registry's key */
    const tgc_graph_ops *graph; /* graph runners only; NULL: the shared driver compiles */
    /* Optional: its registration (who it is, and the config it reads: stream_of). */
    const struct tgc_backend_reg *reg;

    /* ---- compiled backends (graph == NULL) ---- */
    /* TGC_DECOMPOSE_KEEP_* (passes.h): composite ops its kernels compute themselves. */
    unsigned decompose_keep;
    /* Optional: backend-specific rewrites of the optimized graph before fusion (g is the
     * driver's clone). Errors fail the compile. */
    tgc_status (*prepare)(tgc_graph *g);
    /* How fusion classifies nodes for it (passes/fuse.h): an OPAQUE node runs on interp. */
    const tgc_fuse_hooks *fuse;
    /* The machine its kernels are lowered for (kir/schedule.h): vector widths, the split of
     * flat domains, grid or not, and which templates exist for which dtypes. The driver
     * lowers every group with it; the schedule in each kernel is what launch must run. */
    const kir_target *(*target)(void);
    /* Compiles all n kernels of one variant at once (one unit, one optimizer run), in plan
     * order, and returns the code owning them in *code (the plan releases it with
     * release_code); on failure it frees its partial work and leaves *code NULL. Sets
     * ks[i].handle, the backend's data for launch / run_template of kernel i; may read the
     * rest of ks[i] (the kernel IR, its size slots, its name) during the call and keep the
     * kernel IR, which the plan owns for as long as the code lives. dev is the device the
     * code runs on (of the backend's type: a GPU backend loads it there). cfg is the function's
     * (dump_dir: write its own code text as "<dump_dir>/<name>.<suffix>"). g is the prepared
     * graph the plan's steps index (read during the call only: the code its native steps need
     * can be made ready with the kernels). Errors: TGC_ERR_COMPILE (with the reason),
     * TGC_ERR_OOM. */
    tgc_status (*compile)(const tgc_config *cfg, tgc_device dev, const char *name,
                          const tgc_graph *g, struct tgc_plan_kernel *ks, int n, void **code);
    /* Runs LOOP kernel k over its whole domain, split over up to env->n_threads as the
     * backend sees fit (LLVM: the parallel rows): bufs[i] is element 0 of kernel buffer i on
     * the backend's device, sizes[j] the value of size slot j (kir/abi.h). Called from any
     * thread, concurrently with other calls of the same code. */
    tgc_status (*launch)(const struct tgc_plan_kernel *k, void *const *bufs, const int64_t *sizes,
                         const struct tgc_launch_env *env);
    /* Optional (both or neither): batched launches of LOOP kernels that do not depend on
     * each other (an optimizer's per-parameter updates). batch_fits says whether kernels
     * ks[0..n) (consecutive in the plan, none reading or writing what another writes) can
     * be one launch; the driver then marks them in ks[].batch before compile, and the
     * executor runs them with launch_batch: bufs[j] and sizes[j] are kernel j's arguments as
     * launch takes them; one_by_one: launch them one after another in order instead (inputs
     * the compile took for distinct are one storage in this call). launch_batch must give
     * every kernel's elements exactly the values its own launch would. */
    int (*batch_fits)(const struct tgc_plan_kernel *ks, int n);
    tgc_status (*launch_batch)(const struct tgc_plan_kernel *ks, int n, void *const *const *bufs,
                               const int64_t *const *sizes, int one_by_one,
                               const struct tgc_launch_env *env);
    /* Optional (NULL when its fuse hooks never classify TGC_FUSE_TEMPLATE): runs a GEMM /
     * CONV template kernel with its epilogue; same arguments and rules as launch. */
    tgc_status (*run_template)(const struct tgc_plan_kernel *k, void *const *bufs,
                               const int64_t *sizes, const struct tgc_launch_env *env);
    /* Optional: runs one node the fusion hooks classified OPAQUE natively on the backend's
     * device, in place of interp (a device backend's kernels for indexing, concatenation,
     * losses, attention...). ins[] are the node's inputs as tensors on the device (any
     * strides: views), shape its evaluated output shape; on success *out is a new
     * tensor on the device in the current scope. Draws from the Philox stream in the
     * node's turn, like interp. TGC_ERR_UNSUPPORTED with no error kept when it has no
     * kernel for the node: the executor then stages it through interp. */
    tgc_status (*run_node)(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                           tgc_tensor **out, const struct tgc_launch_env *env);
    /* Optional (with run_node): 1 when run_node has a kernel for nd, so the compile can say
     * which opaque steps really go through interp (and the host). */
    int (*node_supported)(const tgc_node *nd);
    /* Optional: why its fusion hooks left node `node` of g (the prepared graph) OPAQUE with no
     * kernel of its own (a static phrase: "no llvm kernel for this op", "attention is native
     * in f32 only"); NULL: no reason known. Named with each interp step on the perf channel
     * and in tgc_fn_explain. */
    const char *(*opaque_reason)(const tgc_graph *g, int32_t node);
    /* Optional (device backends): makes `stream` (the one its registration's stream_of reads
     * from the config) the calling thread's stream for dev for the rest of one call and
     * returns the stream it replaces, which the executor hands back at the end of the call. */
    void *(*use_stream)(tgc_device dev, void *stream);
    /* Optional (device backends whose launches are asynchronous): a key of the stream the
     * calling thread's work on dev goes to now (after use_stream), never the key of another
     * stream that could still have work queued, 0 on failure. The executor keeps its arenas
     * and recordings per key, so calls on different streams never share memory one of them
     * may still be using. NULL: launches are synchronous (the host), one arena serves all. */
    uint64_t (*stream_key)(tgc_device dev);
    /* Optional: whole-variant capture for cfg.mode == TGC_MODE_REDUCE_OVERHEAD. */
    const tgc_capture_ops *capture;
    /* Frees what compile returned (every handle into it dies). NULL code is fine. */
    void (*release_code)(void *code);
    /* Optional (NULL on host backends): waits until the device finished the work launched
     * so far, before the executor reads its memory from the host (staging for an opaque
     * step, write-back of inputs written in place). */
    tgc_status (*synchronize)(tgc_device dev);
} tgc_backend;

/* Compiles verified graph g (which outlives the artifact) for backend b, to run on device dev
 * (of b's device type; graph runners ignore it); name names the variant in logs and dump
 * files. */
tgc_status tgc_backend_compile(const tgc_backend *b, const tgc_graph *g, const tgc_config *cfg,
                               tgc_device dev, const char *name, void **artifact);
/* Runs an artifact: writes g->n_outputs new tensors into outs, owned by the caller's
 * innermost scope (all NULL on failure, error set). Thread-safe over one artifact. */
tgc_status tgc_backend_run(const tgc_backend *b, void *artifact, const tgc_graph *g,
                           const tgc_exec_args *x, tgc_tensor **outs);
/* Kernels per run, for tgc_stats (a batched launch counts each kernel it runs). */
int tgc_backend_kernel_count(const tgc_backend *b, const void *artifact);
/* The kernels of a compiled plan that run in batched launches (backend.h's launch_batch), and
 * in *n_launches how many launches those are; 0 for graph runners. */
int tgc_backend_batched(const tgc_backend *b, const void *artifact, int *n_launches);
/* The bytes of the arena a compiled plan keeps for its intermediates (the memory plan's peak
 * for the sizes of its latest call); 0 for graph runners and before the first call. */
size_t tgc_backend_arena_bytes(const tgc_backend *b, void *artifact);
void tgc_backend_release(const tgc_backend *b, void *artifact);
/* Appends one line per step of a compiled plan that runs on interp ("<indent>step 3:
 * var f64[s0, 8] on interp: <why>\n"): the real fallbacks, not the steps the backend runs
 * with its own kernels (node_supported) nor the executor's own copies (ASSIGN). Returns how
 * many; 0 for graph runners, which have no fallback steps. */
int tgc_backend_describe_fallbacks(const tgc_backend *b, const void *artifact, tgc_strbuf *sb,
                                   const char *indent);

/* Appends "<indent>channels-last: N activations stored NHWC, M of K convs read NHWC input in
 * place\n" for a compiled plan whose prepared graph keeps activations channels-last for its
 * convs (copies of NHWC permutes that convs read: tgc_prepare_channels_last, or the caller's
 * own); returns N (0: nothing appended; graph runners). */
int tgc_backend_describe_layout(const tgc_backend *b, const void *artifact, tgc_strbuf *sb,
                                const char *indent);

/* The number of leading steps of a compiled plan whose results are kept between calls (they
 * read module tensors and constants only: plan.h's tgc_plan_kept), and in *n_values how many
 * results; 0 for graph runners. */
int tgc_backend_kept_steps(const tgc_backend *b, const void *artifact, int *n_values);

/* Writes text to "<cfg->dump_dir>/<name>.<suffix>" when cfg has a dump folder (the driver's
 * graph and kernel-IR dumps, a backend's code text). Best effort: a file that cannot be
 * written is skipped. */
void tgc_backend_dump_text(const tgc_config *cfg, const char *name, const char *suffix,
                           const char *text);

const tgc_backend *tgc_backend_interp(void);

/* ---- registration: who a backend is (registry.h) ----
 *
 * A backend says who it is with one record, registered with the registry (the build's own
 * backends before main, src/backend/backends.c; others at run time with
 * tgc_backend_register). The registry resolves configs, devices and calls from these records
 * alone; nothing outside a backend's folder names it. */
#define TGC_BACKEND_REG_KINDS 2
typedef struct tgc_backend_reg {
    /* Its name, the vtable's `name` (logs, errors, tgc_stats, tgc_fn_explain); unique. */
    const char *name;
    /* The public kinds (cfg.backend values) it serves, each with the name it has in
     * messages and in TGC_BACKEND (NULL: `name`): interp serves TGC_BACKEND_INTERP and
     * TGC_BACKEND_EAGER ("eager"). A kind is served by one backend. None: it is reached
     * only through its device type (eager ops, AUTO). */
    struct {
        tgc_backend_kind kind;
        const char *name;
    } kinds[TGC_BACKEND_REG_KINDS];
    int n_kinds;
    /* The device type its buffers live on (tgc_backend.device). */
    tgc_device_type device;
    /* Optional: what the layers below the backends may know of that device type (its names,
     * the hooks of its runtime: runtime/alloc.h), registered with the backend. NULL for the
     * host, or when another registration brings them. */
    const tgc_device_ops *device_ops;
    /* How a user names a device of the type, for messages that say where to run a call:
     * "the GPU" and "tgc_cuda(i)" ("set cfg.device to the GPU (tgc_cuda(i))"). NULL for the
     * host. */
    const char *device_what;
    const char *device_ctor;
    /* Among the available backends of one device type, TGC_BACKEND_AUTO takes the one with
     * the highest priority, and eager ops the compiled one (graph == NULL) with the highest. */
    int priority;
    /* The backend, or NULL with the error set (its status, and what is missing) when it
     * cannot run in this build or on this machine. Decided once per process: every call gives
     * the same answer and, on failure, sets the same error again. Thread-safe. */
    const tgc_backend *(*get)(void);
    /* Optional: the stream a config asks the backend's launches to go to (the CUDA backend:
     * cfg.cuda_stream), handed to use_stream for each call; NULL: the thread's own. */
    void *(*stream_of)(const tgc_config *cfg);
} tgc_backend_reg;

/* The records of the backends that always exist, in their folders (interp_backend.c). */
extern const tgc_backend_reg tgc_interp_backend_reg;

/* The stream cfg asks b's launches to go to (its registration's stream_of); NULL: the
 * calling thread's own. */
static inline void *tgc_backend_config_stream(const tgc_backend *b, const tgc_config *cfg)
{
    return cfg && b->reg && b->reg->stream_of ? b->reg->stream_of(cfg) : NULL;
}
/* The tensor INPUT node nd of g is bound to in this call; NULL when the binding is out of
 * range. */
tgc_tensor *tgc_exec_input(const tgc_graph *g, const tgc_node *nd, const tgc_exec_args *x);

#endif
