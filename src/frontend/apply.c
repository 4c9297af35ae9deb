/* tgc_apply: the one path of every op, eager or traced. */
#include "frontend/apply.h"

#include <stdlib.h>

#include "backend/interp/interp.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_eager.h"
#endif
#include "frontend/trace.h"
#include "ir/shape_infer.h"
#include "support/error.h"

static int check_inputs(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_trace *tr)
{
    for (int k = 0; k < n_in; k++) {
        if (!in[k]) {
            tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_%s: input %d is NULL", tgc_op_name(op), k);
            return 0;
        }
        if (in[k]->trace && in[k]->trace != tr) {
            tgc_set_error(TGC_ERR_INVALID_ARG,
                          "tgc_%s: input %d is a traced tensor that escaped its trace "
                          "(outputs of a traced function are only valid through tgc_call)",
                          tgc_op_name(op), k);
            return 0;
        }
        if (in[k]->device.type != in[0]->device.type ||
            in[k]->device.index != in[0]->device.index) {
            tgc_set_error(TGC_ERR_DEVICE, "tgc_%s: inputs 0 and %d are on different devices",
                          tgc_op_name(op), k);
            return 0;
        }
    }
    return 1;
}

static tgc_tensor *run_eager(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_vinfo *v)
{
    for (int k = 0; k < n_in; k++) {
        v[k].dtype = in[k]->dtype;
        v[k].ndim = in[k]->ndim;
        for (int d = 0; d < in[k]->ndim; d++)
            v[k].shape[d] = in[k]->shape[d];
    }
    tgc_vinfo out;
    if (tgc_infer(op, v, n_in, a, NULL, &out) != TGC_OK)
        return NULL;
#ifdef TGC_HAVE_LLVM
    int handled;
    tgc_tensor *r = tgc_llvm_eager(op, in, n_in, a, &handled);
    if (handled)
        return r;
#endif
    return tgc_interp_run(op, in, n_in, a, out.dtype, out.shape, out.ndim);
}

static tgc_tensor *record(tgc_trace *tr, tgc_op op, tgc_tensor *const *in, int n_in,
                          const tgc_attrs *a, tgc_vinfo *v)
{
    int32_t ids_buf[16];
    int32_t *ids = n_in <= 16 ? ids_buf : malloc((size_t)n_in * sizeof *ids);
    tgc_tensor *res = NULL;
    if (!ids) {
        tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory while tracing", tgc_op_name(op));
        return NULL;
    }
    for (int k = 0; k < n_in; k++) {
        ids[k] = in[k]->trace ? in[k]->value : tgc_trace_bind(tr, in[k]);
        if (ids[k] < 0)
            goto done;
        v[k] = tr->g->nodes[ids[k]].out;
    }
    tgc_vinfo out;
    if (tgc_infer(op, v, n_in, a, tr->g->syms, &out) != TGC_OK)
        goto done;
    int32_t id = tgc_graph_add(tr->g, op, ids, n_in, a, &out);
    if (id >= 0)
        res = tgc_trace_tensor(tr, id);
done:
    if (ids != ids_buf)
        free(ids);
    return res;
}

tgc_tensor *tgc_apply(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a)
{
    tgc_trace *tr = tgc_trace_current();
    if (!check_inputs(op, in, n_in, tr))
        return NULL;
    tgc_vinfo vbuf[8];
    tgc_vinfo *v = n_in <= 8 ? vbuf : malloc((size_t)n_in * sizeof *v);
    if (!v) {
        tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory", tgc_op_name(op));
        return NULL;
    }
    tgc_tensor *res = tr ? record(tr, op, in, n_in, a, v) : run_eager(op, in, n_in, a, v);
    if (v != vbuf)
        free(v);
    return res;
}
