/* Native GPU kernels for the ops the CUDA backend's fusion leaves OPAQUE (cat, stack, pad,
 * embedding, gather, index_select, argmax, var, reductions of integers, softmax and
 * log_softmax, layer_norm, batch_norm, pools, losses, arange, rand, dropout, cast, every
 * pointwise op on every dtype, matmul / linear / conv2d for dtypes without a tensor-core
 * template, copies of views, the backward ops: conv2d input / weight gradients (f32 through
 * the implicit-GEMM templates of cuda_conv_grad.h), pool gradients, the scatter-adds of
 * embedding / gather / index_select, all without atomics, so the same bits every run) and the
 * route of scaled_dot_product_attention to cuda_attention.h, so that no op ever round-trips
 * through the host.
 *
 * The kernels are one CUDA C program (cuda_ops_kernels.cu, embedded as text) that the program
 * cache (cuda_program.h) compiles once per device architecture and loads once per device, lazily
 * and thread-safely; every function here may be called from any thread. Results match interp's
 * (src/backend/interp): the same formulas in double, the same conversions on store, the same
 * Philox bits for random ops, the same errors (an index out of range is detected on the
 * device, read back after synchronizing and reported with interp's status and message). */
#ifndef TGC_BACKEND_CUDA_OPS_H
#define TGC_BACKEND_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/plan.h"
#include "ir/graph.h"
#include "tgc/config.h"
#include "tensor/tensor_impl.h"

/* What the CUDA backend's compile decided for a variant that its native steps read: the code a
 * compile returns starts with it, and tgc_cuda_op_run finds it through env->code (NULL: the
 * defaults, HIGHEST and no cache directory). */
typedef struct tgc_cuda_native {
    tgc_matmul_precision precision; /* cfg.matmul_precision: f32 products (conv gradients) */
    char *cache_dir;                /* cfg.cache_dir (malloc'd): where programs are cached */
} tgc_cuda_native;

static inline const tgc_cuda_native *tgc_cuda_native_of(const struct tgc_launch_env *env)
{
    static const tgc_cuda_native none = {TGC_PRECISION_HIGHEST, NULL};
    return env && env->code ? (const tgc_cuda_native *)env->code : &none;
}

/* 1 when tgc_cuda_op_run has a kernel for node nd, judged by its op, attributes and output
 * dtype (input dtypes and shapes are checked at run time, which may still answer
 * TGC_ERR_UNSUPPORTED); 0 otherwise (INPUT, and SDPA when cuda_attention does not take it). */
int tgc_cuda_op_supported(const tgc_node *nd);

/* Compiles (or finds in the program cache, and in cache_dir) the native-op program and loads
 * its kernels on device dev, ahead of the first native step (the compile of a variant that
 * has some does it on a thread of its own). A failure is kept and repeated by that step. */
tgc_status tgc_cuda_ops_load(int dev, const char *cache_dir);

/* Runs node nd on env->device (run_node's contract, backend/backend.h): ins[] are its inputs
 * as tensors on that device with any strides, shape its evaluated output shape (nd->out.ndim
 * dims); on success *out is a new contiguous tensor on env->device in the current scope. Work
 * is queued on env->stream (NULL: the device's stream for this thread). batch_norm in
 * training also writes running_mean / running_var (ins[1], ins[2]) in place and bumps their
 * storage versions; rand, dropout draw from the Philox stream in the node's turn. Indexing
 * ops and losses synchronize the stream to read their bounds flag. Errors: interp's
 * (TGC_ERR_INVALID_ARG for an index or target out of range, TGC_ERR_SHAPE for a gather
 * index larger than its input), TGC_ERR_OOM, TGC_ERR_DEVICE / TGC_ERR_COMPILE from the
 * driver or NVRTC; TGC_ERR_UNSUPPORTED with the error cleared when it has no kernel for the
 * node (the caller then stages it through interp). *out is NULL on failure. */
tgc_status tgc_cuda_op_run(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                           tgc_tensor **out, const struct tgc_launch_env *env);

/* The whole kernel program's text (tgc_cuda_prelude(), the op and dtype numbers of ops.def as
 * #defines, then the kernels): malloc'd, the caller frees it; NULL when out of memory. Pure. */
char *tgc_cuda_ops_source(void);

/* The names of the program's kernels (entry points), n of them; for tests and dumps. */
const char *const *tgc_cuda_ops_kernel_names(int *n);

#endif
