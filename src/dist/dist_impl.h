/* What the process groups (dist.c) give the data-parallel wrapper (ddp.c) above them. */
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

/* The handles that watch a group (frontend/watch.h: the data-parallel wrappers over it, which
 * ddp.c puts on at creation and takes off in tgc_ddp_free): tgc_dist_free calls each one's
 * gone. watch: TGC_ERR_OOM (message naming tgc_ddp_create); unwatch of a watch not on the
 * list: nothing. */
struct tgc_watch;
tgc_status tgc_dist_watch(tgc_dist *pg, struct tgc_watch *w);
void tgc_dist_unwatch(tgc_dist *pg, struct tgc_watch *w);

#endif
