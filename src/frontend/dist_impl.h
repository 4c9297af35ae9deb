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
tgc_tensor *tgc_dist_reduce_start(const char *fn, tgc_dist *pg, tgc_tensor *x, tgc_dist_op op);
tgc_tensor *tgc_dist_reduce_wait(tgc_dist *pg, tgc_tensor *y, tgc_tensor *x);
/* tgc_dist_all_reduce and tgc_dist_broadcast_ for another public function fn: its messages
 * start with fn, not with the collective's name. */
tgc_tensor *tgc_dist_all_reduce_in(const char *fn, tgc_dist *pg, tgc_tensor *t, tgc_dist_op op);
tgc_status tgc_dist_broadcast_in(const char *fn, tgc_dist *pg, tgc_tensor *t, int root);

/* The wrappers over a group (ddp.c attaches each at creation and detaches it in
 * tgc_ddp_free), so that tgc_dist_free of the group tells each one that its group is gone
 * (tgc_ddp_group_gone). attach: TGC_ERR_OOM. */
struct tgc_ddp;
tgc_status tgc_dist_attach_ddp(tgc_dist *pg, struct tgc_ddp *d);
void tgc_dist_detach_ddp(tgc_dist *pg, struct tgc_ddp *d);
/* Called by tgc_dist_free for each wrapper over the group, and by tgc_module_free for the
 * wrapper of each module of the tree it frees: the wrapper forgets the group (or the module
 * and its parameters); a later backward through it fails with TGC_ERR_INVALID_ARG (group
 * gone) or never reaches it (module gone), its queries still answer, and tgc_ddp_free
 * frees it. */
void tgc_ddp_group_gone(struct tgc_ddp *d);
void tgc_ddp_module_gone(struct tgc_ddp *d);

/* autograd's hooks (ddp.c), called with recording paused inside tgc_backward:
 * leaf's gradient for this backward is final and added into its .grad (leaf->ddp is set);
 * and the backward is over: every wrapper that saw a gradient launches its remaining
 * buckets and writes the averaged gradients into the .grads. */
tgc_status tgc_ddp_grad_ready(tgc_tensor *leaf);
tgc_status tgc_ddp_backward_end(void);

#endif
