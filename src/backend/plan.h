/* The execution plan a compiled backend's variant becomes, shared by the compile driver
 * (driver.c builds it), the executor (exec.c runs it) and the backends (they compile and
 * launch its kernels).
 *
 * A plan is the optimized graph, its ordered steps (a kernel, or one node the backend has no
 * kernel for, run on interp), the memory plan (memplan.h: an arena slot per intermediate)
 * and the backend's code. It never changes after the compile, so calls on many threads
 * share it; only the arena it keeps between calls is taken under a trylock. */
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
} tgc_launch_env;

/* A step: kernel >= 0 runs plan kernel `kernel`; kernel < 0 runs graph node `node` on
 * interp (an opaque step: its data staged to the host first when the backend's device is
 * not host memory). */
typedef struct tgc_step {
    int32_t kernel;
    int32_t node;
} tgc_step;

typedef struct tgc_plan {
    const tgc_backend *backend;
    tgc_device device;
    tgc_graph *g; /* the optimized clone the steps index */
    tgc_step *steps;
    int n_steps;
    tgc_plan_kernel *kernels;
    int n_kernels;
    void *code;   /* the backend's, from its compile */
    void *stream; /* cfg->cuda_stream: the stream launches go to (NULL: the thread's) */
    int n_threads;
    tgc_memplan mem;
    /* per value: 1 when a node writes it in place (tgc_pass_mutated_values); NULL when no
     * node does. Inputs so marked are written back after a call. */
    uint8_t *mutated;
    /* the arena kept between calls */
    pthread_mutex_t arena_lock;
    tgc_storage *arena;
} tgc_plan;

/* The driver (driver.c): compiles g for compiled backend b into a plan. */
tgc_status tgc_plan_compile(const tgc_backend *b, const tgc_graph *g, const tgc_config *cfg,
                            tgc_device dev, const char *name, tgc_plan **out);
void tgc_plan_free(tgc_plan *p);

/* The executor (exec.c): runs plan p (tgc_backend_run's contract). */
tgc_status tgc_plan_run(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs);

#endif
