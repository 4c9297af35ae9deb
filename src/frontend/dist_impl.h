/* Between the process groups (dist.c), the data-parallel wrapper (ddp.c) and autograd
 * (autograd.c). */
#ifndef TGC_FRONTEND_DIST_IMPL_H
#define TGC_FRONTEND_DIST_IMPL_H

#include "runtime/comm.h"
#include "tensor/tensor_impl.h"
#include "tgc/dist.h"

/* The group's communicator (NULL for NULL). */
tgc_comm *tgc_dist_comm(const tgc_dist *pg);
/* The two halves of tgc_dist_all_reduce as ops (eager or recorded): start queues the
 * all-reduce of x (ALL_REDUCE), wait (COMM_WAIT) joins it; the work recorded in between
 * overlaps the communication. x must stay unwritten until the wait. NULL on error. */
tgc_tensor *tgc_dist_reduce_start(tgc_dist *pg, tgc_tensor *x, tgc_dist_op op);
tgc_tensor *tgc_dist_reduce_wait(tgc_dist *pg, tgc_tensor *y, tgc_tensor *x);

/* autograd's hooks (ddp.c), called with recording paused inside tgc_backward:
 * leaf's gradient for this backward is final and added into its .grad (leaf->ddp is set);
 * and the backward is over: every wrapper that saw a gradient launches its remaining
 * buckets and writes the averaged gradients into the .grads. */
tgc_status tgc_ddp_grad_ready(tgc_tensor *leaf);
tgc_status tgc_ddp_backward_end(void);

#endif
