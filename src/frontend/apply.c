/* tgc_apply: the one path of every op, eager or traced. Traced ops are recorded into the
 * trace's graph; eager ones run through the eager engine (backend/eager.h), which picks the
 * inputs' device's backend. */
#include "frontend/apply.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/eager.h"
#include "autograd/autograd.h"
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
        if (!tgc_device_equal(in[k]->device, in[0]->device)) {
            char d0[48], dk[48];
            tgc_set_error(TGC_ERR_DEVICE,
                          "tgc_%s: inputs 0 and %d are on different devices (%s and %s); move "
                          "one with tgc_to",
                          tgc_op_name(op), k, tgc_format_device(in[0]->device, d0, sizeof d0),
                          tgc_format_device(in[k]->device, dk, sizeof dk));
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
    return tgc_eager_run(op, in, n_in, a, &out);
}

/* Shape inference failed while tracing: its message names symbols ("a is [s0, s1]"). Say
 * it with this call's sizes instead: the same inference on the concrete sizes gives the
 * message eager mode would (when it fails too); otherwise each symbol is replaced by its
 * value. */
static void concrete_error(tgc_symtab *syms, tgc_op op, const tgc_vinfo *v, int n_in,
                           const tgc_attrs *a)
{
    if (tgc_sym_count(syms) == 0)
        return;
    tgc_status st = tgc_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    int sym_attrs = 0; /* symbolic sizes in the attributes need the table */
    for (int k = 0; k < a->ni; k++)
        sym_attrs |= !TGC_SDIM_IS_CONST(a->i[k]);
    if (!sym_attrs && n_in <= 8) {
        tgc_vinfo c[8], out;
        for (int k = 0; k < n_in; k++) {
            c[k] = v[k];
            for (int d = 0; d < v[k].ndim; d++)
                c[k].shape[d] = tgc_sym_hint(syms, v[k].shape[d]);
        }
        if (tgc_infer(op, c, n_in, a, NULL, &out) != TGC_OK)
            return; /* the eager message */
    }
    char out[1024];
    size_t o = 0;
    for (const char *p = msg; *p && o + 24 < sizeof out;) {
        int k, len = 0;
        int word_start = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (word_start && *p == 's' && sscanf(p, "s%d%n", &k, &len) == 1 && len > 1 &&
            !isalnum((unsigned char)p[len]) && p[len] != '_' && k >= 0 && k < tgc_sym_count(syms) &&
            isdigit((unsigned char)p[1])) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%lld",
                                  (long long)tgc_sym_hint(syms, tgc_sym_symbol(syms, k)));
            p += len;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    tgc_set_error(st, "%s", out);
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
    if (tgc_infer(op, v, n_in, a, tr->g->syms, &out) != TGC_OK) {
        concrete_error(tr->g->syms, op, v, n_in, a);
        goto done;
    }
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
    if (res && tgc_autograd_wants(in, n_in)) { /* the one place every op is recorded */
        tgc_grad_rule rule = tgc_grad_rule_for(op, a);
        if (rule && tgc_autograd_attach(res, op, a, in, n_in, rule, NULL, 0) != TGC_OK) {
            tgc_tensor_free(res);
            return NULL;
        }
    }
    return res;
}
