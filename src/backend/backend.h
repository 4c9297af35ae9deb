/* The backend interface: one small vtable per backend (interp now; LLVM and CUDA next).
 *
 * compile turns a verified graph into an artifact (for interp: the graph plus an execution
 * plan); run executes an artifact on concrete inputs; release frees it. supports_op lets a
 * graph fall back per op. Every backend consumes the same exec arguments. */
#ifndef TGC_BACKEND_BACKEND_H
#define TGC_BACKEND_BACKEND_H

#include "ir/graph.h"
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

typedef struct tgc_backend {
    const char *name;
    int (*supports_op)(tgc_op op);
    /* The graph outlives the artifact; name is the function's, for logs and dumps. */
    tgc_status (*compile)(const tgc_graph *g, const tgc_config *cfg, const char *name,
                          void **artifact);
    /* Writes g->n_outputs new tensors into outs, owned by the caller's innermost scope. */
    tgc_status (*run)(void *artifact, const tgc_graph *g, const tgc_exec_args *x,
                      tgc_tensor **outs);
    /* Kernel launches per run, for tgc_stats. */
    int (*kernel_count)(const void *artifact);
    void (*release)(void *artifact);
} tgc_backend;

const tgc_backend *tgc_backend_interp(void);
/* The tensor INPUT node nd of g is bound to in this call; NULL when the binding is out of
 * range. */
tgc_tensor *tgc_exec_input(const tgc_graph *g, const tgc_node *nd, const tgc_exec_args *x);
/* The backend a config asks for in this build: AUTO is LLVM when built with it, else interp.
 * NULL with TGC_ERR_UNSUPPORTED set when the kind is not available. */
const tgc_backend *tgc_backend_for(const tgc_config *cfg);

#endif
