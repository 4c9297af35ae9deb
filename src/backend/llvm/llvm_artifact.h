/* The LLVM backend's compiled artifact, shared by its compiler (llvm_backend.c) and its
 * executor (llvm_exec.c). */
#ifndef TGC_BACKEND_LLVM_ARTIFACT_H
#define TGC_BACKEND_LLVM_ARTIFACT_H

#include <pthread.h>

#include "backend/backend.h"
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "runtime/storage.h"

/* A LOOP kernel: rows [lo, hi) (see llvm_codegen.h). */
typedef void (*loop_fn)(void **bufs, const int64_t *sizes, int64_t lo, int64_t hi);

typedef enum { STEP_LOOP, STEP_TEMPLATE, STEP_OPAQUE } step_kind;

typedef struct step {
    step_kind kind;
    kir_kernel *k; /* LOOP / TEMPLATE */
    int32_t node;  /* OPAQUE: the node */
    char name[48];
    kir_args slots;
    loop_fn fn;
    tgc_gemm_kernel gk;
    int64_t inner_work; /* for the parallel grain: elements per row if constant, else 0 */
} step;

typedef struct llvm_art {
    tgc_graph *g; /* optimized clone */
    step *steps;
    int n_steps;
    tgc_llvm_code *code;
    int n_threads;
    /* memory plan: per node, its slot (-1: not planned: an input, output or interp value) */
    int32_t *slot_of;
    int n_slots;
    int32_t *last_use; /* per node: last step reading it (n_steps: a graph output) */
    int32_t *def_step;
    /* the arena kept between calls */
    pthread_mutex_t arena_lock;
    tgc_storage *arena;
    int kernels;
} llvm_art;

/* Runs a compiled variant (the backend's run). */
tgc_status tgc_llvm_run(void *artifact, const tgc_graph *g, const tgc_exec_args *x,
                        tgc_tensor **outs);

#endif
