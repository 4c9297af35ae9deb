/* Compiling one variant: trace the function, verify the graph, build guards, hand the graph
 * to the backend. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/module_impl.h"
#include "tensor/scope.h"
#include "jit/jit.h"
#include "support/log.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Automatic dynamic shapes: a dim whose size differs from an earlier compile's becomes
 * symbolic from this compile on. */
static void note_changed_dims(tgc_fn *f, tgc_tensor *const *in, int n_in)
{
    if (n_in > f->n_seen) {
        int64_t(*seen)[TGC_MAX_DIMS] = realloc(f->seen, (size_t)n_in * sizeof *seen);
        if (seen)
            f->seen = seen;
        int *nd = realloc(f->seen_ndim, (size_t)n_in * sizeof *nd);
        if (nd)
            f->seen_ndim = nd;
        uint8_t *dd = realloc(f->dynamic_dims, (size_t)n_in);
        if (dd)
            f->dynamic_dims = dd;
        if (!seen || !nd || !dd)
            return;
        for (int i = f->n_seen; i < n_in; i++) {
            f->seen_ndim[i] = -1;
            f->dynamic_dims[i] = 0;
        }
        f->n_seen = n_in;
    }
    for (int i = 0; i < n_in; i++) {
        if (f->seen_ndim[i] == in[i]->ndim)
            for (int d = 0; d < in[i]->ndim; d++)
                if (f->seen[i][d] != in[i]->shape[d] && !(f->dynamic_dims[i] & (1u << d))) {
                    f->dynamic_dims[i] |= (uint8_t)(1u << d);
                    tgc_log_msg(
                        &f->cfg, TGC_LOG_DYNAMIC,
                        "tgc: '%s': input %d dim %d changed (%lld -> %lld); compiling it as a "
                        "dynamic dim from now on",
                        f->name, i, d, (long long)f->seen[i][d], (long long)in[i]->shape[d]);
                }
        f->seen_ndim[i] = in[i]->ndim;
        memcpy(f->seen[i], in[i]->shape, sizeof f->seen[i]);
    }
}

static int dim_is_dynamic(const tgc_fn *f, const tgc_tensor *t, int i, int d)
{
    if (t->shape[d] < 2) /* 0 and 1 stay specialized, as in PyTorch */
        return 0;
    switch (f->cfg.dynamic) {
    case TGC_DYNAMIC_NEVER: return 0;
    case TGC_DYNAMIC_ALWAYS: return 1;
    case TGC_DYNAMIC_AUTO: break;
    }
    return ((t->dyn_mask >> d) & 1) || (i < f->n_seen && ((f->dynamic_dims[i] >> d) & 1));
}

static tgc_status add_arg_inputs(tgc_fn *f, tgc_trace *tr, tgc_tensor *const *in, int n_in,
                                 tgc_tensor **traced)
{
    for (int i = 0; i < n_in; i++) {
        tgc_vinfo v = {in[i]->dtype, in[i]->ndim, {0}};
        for (int d = 0; d < in[i]->ndim; d++)
            v.shape[d] = dim_is_dynamic(f, in[i], i, d)
                             ? tgc_sym_new(tr->g->syms, in[i]->shape[d], i, d)
                             : in[i]->shape[d];
        tgc_attrs a = tgc_attrs_of(TGC_OP_INPUT);
        a.input.kind = TGC_BIND_ARG;
        a.input.index = i;
        if (tgc_graph_add(tr->g, TGC_OP_INPUT, NULL, 0, &a, &v) != i)
            return tgc_last_status();
        traced[i] = tgc_trace_tensor(tr, i);
        if (!traced[i])
            return tgc_last_status();
    }
    return TGC_OK;
}

static tgc_status collect_outputs(const tgc_fn *f, tgc_trace *tr, tgc_tensor **outs, int n_out,
                                  int32_t *ids)
{
    for (int k = 0; k < n_out; k++) {
        if (!outs[k])
            return tgc_keep_error(TGC_ERR_INVALID_ARG,
                                  "tgc_call: '%s' returned TGC_OK but left out[%d] NULL", f->name,
                                  k);
        if (outs[k]->trace && outs[k]->trace != tr)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc_call: '%s' out[%d] is a traced tensor of another trace",
                                 f->name, k);
        ids[k] = outs[k]->trace ? outs[k]->value : tgc_trace_bind(tr, outs[k]);
        if (ids[k] < 0)
            return tgc_last_status();
    }
    return TGC_OK;
}

/* Entries past n_in in the traced input array, NULL: a function that reads in[n_in] (called
 * with too few inputs) reads NULL instead of past the array, and the message says so. */
#define TRACE_ARG_PAD 8

/* The function failed while tracing because an op got a NULL input: the likely cause is an
 * in[k] read past n_in, which the op's message cannot name. */
static void name_missing_inputs(const tgc_fn *f, int n_in, tgc_status st)
{
    const char *e = tgc_last_error();
    size_t n = strlen(e), k = strlen(" is NULL");
    if (st != TGC_ERR_INVALID_ARG || n < k || strcmp(e + n - k, " is NULL") != 0)
        return;
    char op_msg[512];
    snprintf(op_msg, sizeof op_msg, "%s", e);
    tgc_set_error(st,
                  "tgc_call: '%s' failed while tracing: %s; it was called with n_in = %d, and "
                  "in[k] for k >= %d is NULL (pass every input the function reads)",
                  f->name, op_msg, n_in, n_in);
}

/* The inputs the trace did not use (no node reads them, no output is one): passing an input
 * the function ignores is legal but usually a mistake of the caller, so the first trace
 * names them once. */
static void warn_unused_inputs(const tgc_fn *f, const tgc_graph *g, int n_in)
{
    if (n_in <= 0 || n_in > 4096)
        return;
    uint8_t *used = calloc((size_t)n_in, 1);
    if (!used)
        return;
    for (int i = n_in; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0 && g->nodes[i].in[k] < n_in)
                used[g->nodes[i].in[k]] = 1;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0 && g->outputs[k] < n_in)
            used[g->outputs[k]] = 1;
    char list[256] = "";
    int n_unused = 0;
    for (int i = 0; i < n_in; i++)
        if (!used[i] && n_unused++ < 8)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%sin[%d]",
                     n_unused > 1 ? ", " : "", i);
    free(used);
    if (n_unused)
        tgc_log_msg(&f->cfg, 0,
                    "tgc: '%s' was called with %d inputs but its trace does not use %s%s (read "
                    "only through sizes, or not at all); check n_in",
                    f->name, n_in, list, n_unused > 8 ? ", ..." : "");
}

/* Runs the function once with traced tensors. On return the trace holds the graph, or is
 * marked broken; *fn_status is what the function (or output collection) reported. */
static tgc_status run_trace(tgc_fn *f, tgc_trace *tr, tgc_module *self, tgc_tensor *const *in,
                            int n_in, int n_out, int32_t *out_ids)
{
    tgc_tensor **traced = calloc((size_t)n_in + TRACE_ARG_PAD, sizeof *traced);
    tgc_tensor **outs = calloc((size_t)(n_out ? n_out : 1), sizeof *outs);
    tgc_status st = (traced && outs) ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc: out of memory");
    /* A frame, so that the function cannot pop the scope that owns the traced inputs. */
    tgc_scope *frame = st == TGC_OK ? tgc_scope_frame_push() : NULL;
    if (!frame)
        st = tgc_last_status();
    if (st == TGC_OK)
        st = add_arg_inputs(f, tr, in, n_in, traced);
    if (st == TGC_OK) {
        tgc_clear_error();
        tgc_trace_set_current(tr);
        st = f->fn(self, traced, n_in, outs, n_out);
        tgc_trace_set_current(NULL);
        name_missing_inputs(f, n_in, st);
        if (st == TGC_OK && !tr->broken)
            st = collect_outputs(f, tr, outs, n_out, out_ids);
        else if (st != TGC_OK && tgc_last_status() == TGC_OK)
            tgc_set_error(st, "tgc_call: '%s' returned %s while tracing", f->name,
                          tgc_status_str(st));
    }
    if (frame)
        st = tgc_scope_frame_pop(frame, f->name, st);
    free(traced);
    free(outs);
    return st;
}

static void dump_graph(const tgc_fn *f, const tgc_variant *v)
{
    char *text = tgc_graph_to_text(v->graph);
    if (text && (f->cfg.log & TGC_LOG_GRAPH))
        tgc_log_msg(&f->cfg, TGC_LOG_GRAPH, "tgc: graph of '%s' variant %d:\n%s", f->name, v->id,
                    text);
    if (text && f->cfg.dump_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_v%d.graph.txt", f->cfg.dump_dir, f->name, v->id);
        FILE *fp = fopen(path, "w");
        if (fp) {
            fputs(text, fp);
            fclose(fp);
        }
        char *dot = tgc_graph_to_dot(v->graph);
        snprintf(path, sizeof path, "%s/%s_v%d.dot", f->cfg.dump_dir, f->name, v->id);
        fp = dot ? fopen(path, "w") : NULL;
        if (fp) {
            fputs(dot, fp);
            fclose(fp);
        }
        if (!fp)
            tgc_log_msg(&f->cfg, 0, "tgc: could not write graph dumps to '%s': %s", f->cfg.dump_dir,
                        dot ? strerror(errno) : "out of memory");
        free(dot);
    }
    free(text);
}

static tgc_status finish_graph(tgc_fn *f, tgc_variant *v, const int32_t *out_ids, int n_out)
{
    tgc_status st = tgc_graph_set_outputs(v->graph, out_ids, n_out);
    if (st == TGC_OK)
        st = tgc_graph_verify(v->graph);
    if (st == TGC_OK) {
        char name[256]; /* names the variant in logs and in the backend's dump files */
        snprintf(name, sizeof name, "%s_v%d", f->name, v->id);
        st = tgc_backend_compile(v->backend, v->graph, &f->cfg, v->device, name, &v->artifact);
    }
    if (st == TGC_OK)
        dump_graph(f, v);
    return st;
}

/* Where a call runs: its inputs' device (tgc_call checked they agree), else its module's,
 * else cfg.device (a function that only creates tensors). */
static tgc_device call_device(const tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                              tgc_device_origin *origin)
{
    *origin = TGC_DEVICE_OF_INPUTS;
    if (n_in > 0)
        return in[0]->device;
    int n = 0;
    tgc_tensor *const *ps = self ? tgc_module_flat(self, &n) : NULL;
    *origin = n > 0 ? TGC_DEVICE_OF_MODULE : TGC_DEVICE_OF_CONFIG;
    return n > 0 ? ps[0]->device : f->cfg.device;
}

tgc_status tgc_variant_compile(tgc_fn *f, int id, tgc_module *self, tgc_tensor *const *in, int n_in,
                               int n_out, tgc_variant **out)
{
    double t0 = now_seconds();
    if (f->cfg.dynamic == TGC_DYNAMIC_AUTO)
        note_changed_dims(f, in, n_in);
    tgc_variant *v = calloc(1, sizeof *v);
    int32_t *out_ids = calloc((size_t)(n_out ? n_out : 1), sizeof *out_ids);
    tgc_trace tr = {0};
    tr.g = v && out_ids ? tgc_graph_create() : NULL;
    tgc_status st = tr.g ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling");
    if (st == TGC_OK) {
        v->id = id;
        tgc_device_origin origin;
        v->device = call_device(f, self, in, n_in, &origin);
        if (!(v->backend = tgc_backend_for_call(&f->cfg, v->device, origin, f->name)))
            st = tgc_last_status();
        tr.device = v->device;
        tr.cfg = &f->cfg;
        tr.fn_name = f->name;
        tr.self = self;
        tr.args = in;
        tr.n_args = n_in;
        tr.params = self ? (tgc_tensor **)tgc_module_flat(self, &tr.n_params) : NULL;
        tr.param_value = malloc((size_t)(tr.n_params ? tr.n_params : 1) * sizeof(int32_t));
        if (!tr.param_value)
            st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling");
        for (int i = 0; i < tr.n_params; i++)
            tr.param_value[i] = -1;
    }
    if (st == TGC_OK)
        st = run_trace(f, &tr, self, in, n_in, n_out, out_ids);
    if (tr.broken && f->cfg.fullgraph) {
        st = tgc_set_error(TGC_ERR_GRAPH_BREAK,
                           "tgc_call: graph break in '%s' and cfg.fullgraph is set: %s", f->name,
                           tr.break_reason);
    } else if (tr.broken) {
        st = TGC_OK;
        v->is_eager = 1;
        snprintf(v->break_reason, sizeof v->break_reason, "%s", tr.break_reason);
    }
    if (st == TGC_OK) {
        v->graph = tr.g;
        st = tgc_guards_build(&v->guards, &tr, self, in, n_in, f->cfg.guard_module_identity);
    }
    if (st == TGC_OK && !v->is_eager) {
        v->bound =
            malloc((size_t)(v->guards.n_captured ? v->guards.n_captured : 1) * sizeof *v->bound);
        st = v->bound ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling");
        for (int i = 0; st == TGC_OK && i < v->guards.n_captured; i++)
            v->bound[i] = v->guards.captured[i].t;
    }
    if (st == TGC_OK && !v->is_eager && tr.grad_value) {
        v->grad_params = malloc((size_t)(tr.n_params ? tr.n_params : 1) * sizeof(int32_t));
        st = v->grad_params ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling");
        for (int i = 0; st == TGC_OK && i < tr.n_params; i++)
            if (tr.grad_value[i] >= 0)
                v->grad_params[v->n_grad_params++] = i;
    }
    if (st == TGC_OK && !v->is_eager)
        st = finish_graph(f, v, out_ids, n_out);
    if (st == TGC_OK && !v->is_eager && id == 1)
        warn_unused_inputs(f, v->graph, n_in);
    tgc_trace_release(&tr);
    free(out_ids);
    if (st != TGC_OK) {
        if (v) {
            v->graph = tr.g;
            tgc_variant_free(f, v);
        } else {
            tgc_graph_free(tr.g);
        }
        return st;
    }
    v->compile_seconds = now_seconds() - t0;
    *out = v;
    return TGC_OK;
}

void tgc_variant_free(const tgc_fn *f, tgc_variant *v)
{
    (void)f;
    if (!v)
        return;
    if (v->artifact)
        tgc_backend_release(v->backend, v->artifact);
    tgc_guards_free(&v->guards);
    free(v->bound);
    free(v->grad_params);
    tgc_graph_free(v->graph);
    free(v);
}
