/* The collectives of a graph on the host (op kind COMM): ALL_REDUCE through the communicator
 * its node names (runtime/comm.h), synchronous on the host, and COMM_WAIT, which forgets the
 * finished all-reduce and hands its value on. The CUDA backend runs both on its own streams
 * (cuda_comm.c); this is the oracle and the host path. */
#include "backend/interp/interp.h"
#include "runtime/comm.h"
#include "support/error.h"
#include "tensor/copy.h"

tgc_status tgc_interp_comm(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_tensor *out)
{
    if (op != TGC_OP_ALL_REDUCE || n_in != 1 || !in[0] || !out)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_comm: %s given %d inputs",
                             tgc_op_name(op), n_in);
    tgc_comm *c = tgc_comm_live(a->all_reduce.comm, "tgc_all_reduce");
    if (!c)
        return tgc_last_status();
    if (!tgc_on_host(in[0]) || !tgc_on_host(out))
        return tgc_set_error(TGC_ERR_DEVICE,
                             "tgc_all_reduce: a device tensor reached the host collective");
    size_t n = (size_t)tgc_shape_numel(out->shape, out->ndim);
    const void *send = tgc_device_ptr(in[0]); /* element 0 of the view (host memory) */
    if (!tgc_tensor_is_contiguous(in[0])) {   /* reduce a contiguous copy in place */
        tgc_status st = tgc_tensor_copy(out, in[0]);
        if (st != TGC_OK)
            return st;
        send = tgc_device_ptr(out);
    }
    tgc_status st = tgc_comm_all_reduce_start(c, send, tgc_device_ptr(out), n, out->dtype,
                                              (tgc_dist_op)a->all_reduce.op, NULL);
    if (st == TGC_OK)
        tgc_storage_bump(out->storage);
    return st;
}

tgc_tensor *tgc_interp_comm_wait(tgc_tensor *const *in, const tgc_attrs *a)
{
    tgc_comm *c = tgc_comm_live(a->comm.comm, "tgc_comm_wait");
    if (!c)
        return NULL;
    tgc_tensor *y = in[0];
    if (tgc_comm_wait(c, tgc_device_ptr(y), NULL) != TGC_OK)
        return NULL;
    return tgc_tensor_view(y, y->shape, y->strides, y->ndim, y->offset);
}
