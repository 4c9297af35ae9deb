/* The one path every op takes: shape inference, then eager execution or trace recording. */
#ifndef TGC_FRONTEND_APPLY_H
#define TGC_FRONTEND_APPLY_H

#include "tensor/tensor_impl.h"
#include "ir/op.h"

/* Infers the result (errors name the op: "tgc_add: ..."), then either runs the op eagerly
 * through the interp kernels or, when this thread is tracing, records a node and returns a
 * traced tensor. Returns NULL on error. If any input is NULL, returns NULL and keeps the
 * error already set (or sets TGC_ERR_INVALID_ARG "tgc_<op>: input k is NULL" if none).
 * Optional inputs are simply left out of in[] (attrs say which are present). */
tgc_tensor *tgc_apply(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a);

/* Zero-initialised attrs. */
static inline tgc_attrs tgc_attrs_none(void)
{
    tgc_attrs a = {0};
    return a;
}

#endif
