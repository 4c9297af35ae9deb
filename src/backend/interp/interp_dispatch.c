/* Eager execution of one op through the interp kernels: the one entry that checks that the
 * inputs are in host memory (the kernels read them through tgc_host_data). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "ir/view_geometry.h"
#include "tensor/copy.h"
#include "support/error.h"

typedef tgc_status (*kernel_fn)(tgc_op, tgc_tensor *const *, int, const tgc_attrs *, tgc_tensor *);

/* Kernel family per op kind; the table below is generated from ops.def so a new op
 * without a family fails to compile. */
#define FAMILY_SOURCE    NULL
#define FAMILY_BINARY    tgc_interp_pointwise
#define FAMILY_COMPARE   tgc_interp_pointwise
#define FAMILY_TERNARY   tgc_interp_pointwise
#define FAMILY_SCALAR    tgc_interp_pointwise
#define FAMILY_UNARY     tgc_interp_pointwise
#define FAMILY_REDUCE    tgc_interp_reduce
#define FAMILY_NORM      tgc_interp_reduce
#define FAMILY_VIEW      tgc_interp_movement
#define FAMILY_MOVE      tgc_interp_movement
#define FAMILY_INDEX     tgc_interp_movement
#define FAMILY_MATMUL    tgc_interp_linalg
#define FAMILY_CONV      tgc_interp_linalg
#define FAMILY_POOL      tgc_interp_nn
#define FAMILY_NN        tgc_interp_nn
#define FAMILY_RANDOM    tgc_interp_nn
#define FAMILY_CREATE    tgc_interp_create
#define FAMILY_LOSS      tgc_interp_nn
#define FAMILY_ATTENTION tgc_interp_nn
#define FAMILY_GRAD      tgc_interp_grad
#define FAMILY_COMM      tgc_interp_comm

static const kernel_fn families[] = {
#define X(e, name, mn, mx, kind) FAMILY_##kind,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof(families) / sizeof(families[0]) == TGC_OP_COUNT,
              "interp kernel table out of sync with ops.def");

tgc_tensor *tgc_interp_run(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                           tgc_dtype out_dtype, const int64_t *out_shape, int out_ndim)
{
    if ((unsigned)op >= TGC_OP_COUNT || !families[op]) {
        tgc_set_error(TGC_ERR_INTERNAL, "tgc interp: op %s cannot run eagerly", tgc_op_name(op));
        return NULL;
    }
    if (op == TGC_OP_ASSIGN) { /* writes its input 0 in place; the result is that tensor */
        tgc_status st = tgc_tensor_copy(in[0], in[1]);
        if (st != TGC_OK)
            return NULL;
        tgc_storage_bump(in[0]->storage);
        return tgc_tensor_view(in[0], in[0]->shape, in[0]->strides, in[0]->ndim, in[0]->offset);
    }
    if (op == TGC_OP_COMM_WAIT) /* joins the all-reduce; the result is its value */
        return tgc_interp_comm_wait(in, a);
    if (tgc_op_info_of(op)->kind == TGC_KIND_VIEW && in[0]->dtype == out_dtype) {
        int64_t strides[TGC_MAX_DIMS], offset = in[0]->offset;
        if (tgc_view_geometry(op, in[0], a, out_shape, out_ndim, strides, &offset))
            return tgc_tensor_view(in[0], out_shape, strides, out_ndim, offset);
    }
    /* Views are geometry and work on any device; the kernels read host memory. */
    char fn[48], what[24];
    for (int k = 0; k < n_in; k++)
        if (!tgc_on_host(in[k])) {
            snprintf(fn, sizeof fn, "tgc_%s", tgc_op_name(op));
            snprintf(what, sizeof what, "input %d", k);
            tgc_host_check(fn, "the interp backend", what, in[k]);
            return NULL;
        }
    tgc_tensor *out =
        tgc_tensor_new(out_shape, out_ndim, out_dtype, n_in ? in[0]->device : tgc_cpu());
    if (!out && tgc_last_status() == TGC_ERR_OOM) { /* name the op, not the allocator */
        char dims[160];
        tgc_set_error(TGC_ERR_OOM,
                      "tgc_%s: out of memory for its %s result of shape %s (%zu bytes)",
                      tgc_op_name(op), tgc_dtype_name(out_dtype),
                      tgc_format_dims(out_shape, out_ndim, dims, sizeof dims),
                      (size_t)tgc_shape_numel(out_shape, out_ndim) * tgc_dtype_size(out_dtype));
    }
    if (!out)
        return NULL;
    if (families[op](op, in, n_in, a, out) != TGC_OK) {
        tgc_tensor_free(out);
        return NULL;
    }
    return out;
}

void tgc_interp_name_user_op(const tgc_node *nd)
{
    tgc_op user = tgc_node_user_op(nd);
    if (user == nd->op || tgc_last_status() == TGC_OK)
        return;
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "tgc_%s:", tgc_op_name(nd->op));
    const char *msg = tgc_last_error();
    if (n <= 0 || (size_t)n >= sizeof prefix || strncmp(msg, prefix, (size_t)n) != 0)
        return;
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", msg + n);
    tgc_set_error(tgc_last_status(), "tgc_%s:%s", tgc_op_name(user), rest);
}

tgc_tensor *tgc_interp_run_node(const tgc_node *nd, tgc_tensor *const *in, const int64_t *out_shape)
{
    tgc_tensor *r =
        tgc_interp_run(nd->op, in, nd->n_in, &nd->attrs, nd->out.dtype, out_shape, nd->out.ndim);
    if (!r)
        tgc_interp_name_user_op(nd);
    return r;
}

tgc_tensor *tgc_interp_eval_contiguous(const tgc_node *nd, tgc_tensor *const *in,
                                       const int64_t *shape)
{
    tgc_tensor *r = tgc_interp_run_node(nd, in, shape);
    if (r && !tgc_tensor_is_contiguous(r)) {
        static const tgc_attrs none;
        r = tgc_interp_run(TGC_OP_CONTIGUOUS, &r, 1, &none, nd->out.dtype, shape, nd->out.ndim);
    }
    return r;
}
