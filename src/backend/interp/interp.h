/* The interp backend: plain C loops, the oracle every other path is tested against.
 *
 * Kernels take concrete (possibly strided, non-contiguous) input tensors and write a
 * preallocated contiguous `out` whose dtype and shape come from shape inference. They
 * never allocate outputs themselves and never fail on inputs that passed inference,
 * except for data-dependent errors (an index out of range: TGC_ERR_INVALID_ARG with a
 * message naming the op). */
#ifndef TGC_BACKEND_INTERP_H
#define TGC_BACKEND_INTERP_H

#include "tensor/tensor_impl.h"
#include "ir/graph.h"
#include "ir/op.h"

/* Runs one op eagerly: allocates the result in the innermost scope (a view for view ops
 * where the strides allow) and computes it. out_shape: the inferred concrete shape. */
tgc_tensor *tgc_interp_run(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_dtype out_dtype, const int64_t *out_shape, int out_ndim);

/* tgc_interp_run for a graph node, whose error (if any) names the op the user called:
 * a node that a pass decomposed out of a public op (tgc_node.origin) reports
 * "tgc_<that op>: ..." rather than the name of the part that failed. */
tgc_tensor *tgc_interp_run_node(const tgc_node *nd, tgc_tensor *const *in,
                                const int64_t *out_shape);
/* tgc_interp_run_node with a contiguous result: the constant-folding evaluator the compile
 * driver hands the passes (tgc_node_eval_fn, passes/passes.h). */
tgc_tensor *tgc_interp_eval_contiguous(const tgc_node *nd, tgc_tensor *const *in,
                                       const int64_t *shape);
/* Renames the pending error of node nd after its user op (see tgc_interp_run_node). */
void tgc_interp_name_user_op(const tgc_node *nd);

/* Per-family kernels (k_*.c). Each handles the ops of its kinds. */
/* BINARY, COMPARE, TERNARY, SCALAR, UNARY (CAST included) */
tgc_status tgc_interp_pointwise(tgc_op op, tgc_tensor *const *in, int n_in,
                                const tgc_attrs *a, tgc_tensor *out);
/* REDUCE, NORM */
tgc_status tgc_interp_reduce(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out);
/* MOVE (cat, stack, pad), INDEX, and CONTIGUOUS / RESHAPE when a copy is needed: copies
 * in[0]'s elements in row-major order into out. */
tgc_status tgc_interp_movement(tgc_op op, tgc_tensor *const *in, int n_in,
                               const tgc_attrs *a, tgc_tensor *out);
/* MATMUL, LINEAR, CONV2D */
tgc_status tgc_interp_linalg(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out);
/* CREATE (rand): fills out from the Philox stream */
tgc_status tgc_interp_create(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out);
/* POOL, NN (batch_norm, layer_norm), RANDOM (dropout), LOSS, ATTENTION */
tgc_status tgc_interp_nn(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                         tgc_tensor *out);
/* GRAD: the backward ops (conv2d input / weight gradients, pool gradients, the scatter-adds
 * of embedding, gather and index_select), accumulating in double */
tgc_status tgc_interp_grad(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_tensor *out);
/* COMM: ALL_REDUCE over the communicator of handle a->all_reduce.comm (runtime/comm.h), on the
 * host: synchronous, into out. COMM_WAIT (tgc_interp_comm_wait, called by tgc_interp_run): joins
 * the all-reduce that wrote in[0] and returns a view of it (NULL with the error set). */
tgc_status tgc_interp_comm(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_tensor *out);
tgc_tensor *tgc_interp_comm_wait(tgc_tensor *const *in, const tgc_attrs *a);

#endif
