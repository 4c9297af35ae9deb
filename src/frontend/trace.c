/* The tracer: binds concrete tensors met during tracing and records reads of values. */
#include "frontend/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/shape_infer.h"
#include "ir/view_access.h"
#include "support/log.h"

void tgc_trace_break(tgc_trace *tr, const char *fmt, ...)
{
    if (tr->broken)
        return;
    tr->broken = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tr->break_reason, sizeof tr->break_reason, fmt, ap);
    va_end(ap);
}

static int32_t add_input(tgc_trace *tr, tgc_bind_kind kind, int index, const tgc_tensor *t)
{
    tgc_attrs a = tgc_attrs_of(TGC_OP_INPUT);
    a.input.kind = kind;
    a.input.index = index;
    tgc_vinfo v = {t->dtype, t->ndim, {0}};
    for (int d = 0; d < t->ndim; d++)
        v.shape[d] = t->shape[d];
    return tgc_graph_add(tr->g, TGC_OP_INPUT, NULL, 0, &a, &v);
}

static int param_index(const tgc_trace *tr, const tgc_tensor *t)
{
    if (!t->module)
        return -1;
    for (int i = 0; i < tr->n_params; i++)
        if (tr->params[i] == t)
            return i;
    return -1;
}

/* Binding index of a captured or constant tensor (bound on first use), or -1 (error set). */
static int bind_other(tgc_trace *tr, tgc_tensor *t)
{
    for (int i = 0; i < tr->n_bound; i++)
        if (tr->bound[i].t == t)
            return i;
    if (tr->n_bound == tr->cap_bound) {
        int cap = tr->cap_bound ? tr->cap_bound * 2 : 8;
        tgc_trace_binding *p = realloc(tr->bound, (size_t)cap * sizeof *p);
        if (!p) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory while tracing");
            return -1;
        }
        tr->bound = p;
        tr->cap_bound = cap;
    }
    int is_const = (t->flags & TGC_T_TRACE_CONST) != 0;
    int32_t v = add_input(tr, is_const ? TGC_BIND_CONST : TGC_BIND_CAPTURED, tr->n_bound, t);
    if (v < 0)
        return -1;
    tgc_tensor_ref(t);
    tr->bound[tr->n_bound++] =
        (tgc_trace_binding){t, atomic_load(&t->storage->version), v, is_const, 0};
    return tr->n_bound - 1;
}

/* The INPUT of the .grad of param p (TGC_BIND_GRAD), bound on first use; -1 (error set). */
static int32_t bind_grad(tgc_trace *tr, int p, const tgc_tensor *g)
{
    if (!tr->grad_value) {
        tr->grad_value = malloc((size_t)(tr->n_params ? tr->n_params : 1) * sizeof(int32_t));
        if (!tr->grad_value) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory while tracing");
            return -1;
        }
        for (int i = 0; i < tr->n_params; i++)
            tr->grad_value[i] = -1;
    }
    if (tr->grad_value[p] < 0)
        tr->grad_value[p] = add_input(tr, TGC_BIND_GRAD, p, g);
    return tr->grad_value[p];
}

static int find_alias(const tgc_trace *tr, const tgc_tensor *t)
{
    for (int i = 0; i < tr->n_aliases; i++)
        if (tr->aliases[i].t == t)
            return i;
    return -1;
}

static int32_t bind_raw(tgc_trace *tr, tgc_tensor *t)
{
    /* a variant runs on one device (its inputs'): a module or captured tensor elsewhere is
     * refused here, before a backend would read its memory */
    if (!tgc_device_equal(t->device, tr->device)) {
        char a[48], b[48];
        tgc_set_error(TGC_ERR_DEVICE,
                      "tgc_call: '%s' reads a module or captured tensor on %s, but it runs on "
                      "%s (its inputs' device, else its module's, else cfg.device); move the "
                      "module with tgc_module_to, or create the tensor there (one device per "
                      "call)",
                      tr->fn_name ? tr->fn_name : "fn", tgc_format_device(t->device, a, sizeof a),
                      tgc_format_device(tr->device, b, sizeof b));
        return -1;
    }
    int p = param_index(tr, t);
    if (p < 0 && t->grad_of && (p = param_index(tr, t->grad_of)) >= 0)
        return bind_grad(tr, p, t); /* a parameter's gradient: bound by position too */
    if (p < 0) {
        int b = bind_other(tr, t);
        return b < 0 ? -1 : tr->bound[b].value;
    }
    if (tr->param_value[p] < 0)
        tr->param_value[p] = add_input(tr, TGC_BIND_PARAM, p, t);
    return tr->param_value[p];
}

int32_t tgc_trace_bind(tgc_trace *tr, tgc_tensor *t)
{
    int a = find_alias(tr, t);
    return a >= 0 ? tr->aliases[a].cur : bind_raw(tr, t);
}

tgc_status tgc_trace_assign(tgc_trace *tr, tgc_tensor *dst, tgc_tensor *src)
{
    int32_t s = src->trace ? src->value : tgc_trace_bind(tr, src);
    if (s < 0)
        return tgc_last_status();
    if (src->dtype != dst->dtype) { /* the write converts, as tgc_copy_ does eagerly */
        tgc_attrs ca = {0};
        ca.dtype = dst->dtype;
        tgc_vinfo cv = tr->g->nodes[s].out, out;
        if (tgc_infer(TGC_OP_CAST, &cv, 1, &ca, tr->g->syms, &out) != TGC_OK ||
            (s = tgc_graph_add(tr->g, TGC_OP_CAST, &s, 1, &ca, &out)) < 0)
            return tgc_last_status();
    }
    /* A broadcast, permuted or strided view is written through a copy of its own (a kernel
     * the executor can store straight into dst), not element by element by the write. */
    int strided = 0;
    for (int32_t v = s; tgc_is_view_op(tr->g->nodes[v].op); v = tr->g->nodes[v].in[0]) {
        tgc_op op = tr->g->nodes[v].op;
        strided |= op != TGC_OP_RESHAPE && op != TGC_OP_FLATTEN && op != TGC_OP_SQUEEZE &&
                   op != TGC_OP_UNSQUEEZE && op != TGC_OP_CONTIGUOUS;
    }
    if (strided) {
        tgc_attrs none = {0};
        tgc_vinfo sv = tr->g->nodes[s].out;
        if ((s = tgc_graph_add(tr->g, TGC_OP_CONTIGUOUS, &s, 1, &none, &sv)) < 0)
            return tgc_last_status();
    }
    if (dst->trace) { /* a value of this trace: later reads see src's */
        dst->value = s;
        return TGC_OK;
    }
    if (!tgc_tensor_is_contiguous(dst)) {
        tgc_trace_break(tr, "tgc_copy_ writes a strided view of a tensor inside the compiled "
                            "function (only whole, contiguous tensors are written in place)");
        return TGC_ERR_GRAPH_BREAK;
    }
    int a = find_alias(tr, dst);
    int32_t in[2] = {a >= 0 ? tr->aliases[a].input : bind_raw(tr, dst), s};
    if (in[0] < 0)
        return tgc_last_status();
    tgc_vinfo v[2] = {tr->g->nodes[in[0]].out, tr->g->nodes[s].out}, out;
    tgc_attrs none = {0};
    int32_t id;
    if (tgc_infer(TGC_OP_ASSIGN, v, 2, &none, tr->g->syms, &out) != TGC_OK ||
        (id = tgc_graph_add(tr->g, TGC_OP_ASSIGN, in, 2, &none, &out)) < 0)
        return tgc_last_status();
    if (a >= 0) {
        /* An earlier write of dst is dead: readers of dst's old contents come before it in
         * node order (later reads were handed the written values), and this write replaces
         * the memory. It becomes a view of its value that nothing reads, which DCE drops. */
        tgc_node *old = &tr->g->nodes[tr->aliases[a].assign];
        old->op = TGC_OP_CONTIGUOUS;
        old->flags &= ~(unsigned)TGC_NODE_MUTATES; /* it writes nothing now: DCE may drop it */
        old->in[0] = old->in[1];
        old->n_in = 1;
        old->out = tr->g->nodes[old->in[0]].out;
    }
    if (a < 0) {
        if (tr->n_aliases == tr->cap_aliases) {
            int cap = tr->cap_aliases ? tr->cap_aliases * 2 : 16;
            tgc_trace_alias *p = realloc(tr->aliases, (size_t)cap * sizeof *p);
            if (!p)
                return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory while tracing");
            tr->aliases = p;
            tr->cap_aliases = cap;
        }
        a = tr->n_aliases++;
        tr->aliases[a] = (tgc_trace_alias){dst, in[0], s, id};
    }
    tr->aliases[a].cur = s;
    tr->aliases[a].assign = id;
    return TGC_OK;
}

tgc_tensor *tgc_trace_tensor(tgc_trace *tr, int32_t value)
{
    tgc_tensor *t = tgc_tensor_alloc_unowned();
    if (!t)
        return NULL;
    const tgc_vinfo *v = &tr->g->nodes[value].out;
    t->device = tr->device; /* every value of a variant lives on its device */
    t->dtype = v->dtype;
    t->ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++) {
        t->sshape[d] = v->shape[d];
        t->shape[d] = tgc_sym_hint(tr->g->syms, v->shape[d]);
    }
    tgc_contiguous_strides(t->shape, t->ndim, t->strides);
    t->trace = tr;
    t->value = value;
    tgc_scope_adopt(t);
    return t;
}

static void add_value_guard(tgc_trace *tr, int input, double value)
{
    for (int i = 0; i < tr->n_value_guards; i++)
        if (tr->value_guards[i].input == input)
            return;
    if (tr->n_value_guards == tr->cap_value_guards) {
        int cap = tr->cap_value_guards ? tr->cap_value_guards * 2 : 4;
        tgc_value_guard *p = realloc(tr->value_guards, (size_t)cap * sizeof *p);
        if (!p) {
            tgc_trace_break(tr, "out of memory recording a value guard");
            return;
        }
        tr->value_guards = p;
        tr->cap_value_guards = cap;
    }
    tr->value_guards[tr->n_value_guards++] = (tgc_value_guard){input, value};
}

double tgc_trace_read_value(tgc_trace *tr, const tgc_tensor *t, const char *what)
{
    if (!t->trace) { /* a concrete tensor read during tracing */
        if (param_index(tr, t) >= 0) {
            tgc_trace_break(tr, "%s reads the value of a module tensor", what);
            return 0;
        }
        int b = bind_other(tr, (tgc_tensor *)t);
        if (b >= 0) { /* the value flows into the graph as a constant: guard its version */
            tr->bound[b].values_read = 1;
            tr->bound[b].version = atomic_load(&t->storage->version);
        }
        return 0; /* the caller already has the value */
    }
    const tgc_node *nd = &tr->g->nodes[t->value];
    if (nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_ARG) {
        const tgc_tensor *arg = tr->args[nd->attrs.input.index];
        if (tgc_shape_numel(arg->shape, arg->ndim) < 1) {
            tgc_trace_break(tr, "%s reads an empty input", what);
            return 0;
        }
        double v = tgc_load(tgc_host_data(arg), arg->dtype, arg->offset);
        add_value_guard(tr, (int)nd->attrs.input.index, v);
        tgc_log_msg(tr->cfg, TGC_LOG_GUARDS,
                    "tgc: '%s': %s read input %lld while tracing; guarding on its value %g",
                    tr->fn_name, what, (long long)nd->attrs.input.index, v);
        return v;
    }
    tgc_trace_break(tr, "%s reads the value of a traced tensor (%%%d = %s)", what, t->value,
                    tgc_op_name(nd->op));
    return 0;
}

/* "input 0 dim 1" when d is a symbol, else "size s0*3 at dim 1 of a traced tensor". */
static void describe_dim(const tgc_symtab *syms, tgc_sdim d, int dim, char *buf, size_t n)
{
    for (int k = 0; k < tgc_sym_count(syms); k++)
        if (tgc_sym_same(tgc_sym_symbol(syms, k), d)) {
            int input, in_dim;
            tgc_sym_origin(syms, k, &input, &in_dim);
            snprintf(buf, n, "input %d dim %d", input, in_dim);
            return;
        }
    char e[96];
    tgc_sym_format(syms, d, e, sizeof e);
    int len = dim >= 0 ? snprintf(buf, n, "size %s at dim %d of a traced tensor", e, dim)
                       : snprintf(buf, n, "size %s", e);
    (void)len; /* a long expression is cut, which is fine for a message */
}

static int64_t read_sdim(tgc_trace *tr, tgc_sdim d, int dim, const char *caller)
{
    char where[160];
    describe_dim(tr->g->syms, d, dim, where, sizeof where);
    int64_t v = tgc_sym_specialize(tr->g->syms, d);
    for (int i = 0; i < tr->n_size_reads; i++)
        if (tgc_sym_same(tr->size_reads[i].dim, d))
            return v; /* the first call that specialized it is the one to name */
    if (tr->n_size_reads == tr->cap_size_reads) {
        int cap = tr->cap_size_reads ? tr->cap_size_reads * 2 : 4;
        tgc_size_read *p = realloc(tr->size_reads, (size_t)cap * sizeof *p);
        if (!p)
            return v; /* the assumption is recorded; only its explanation is lost */
        tr->size_reads = p;
        tr->cap_size_reads = cap;
    }
    tgc_size_read *r = &tr->size_reads[tr->n_size_reads++];
    r->dim = d;
    r->value = v;
    int len = snprintf(r->what, sizeof r->what, "%s was specialized to %lld by %.40s() in '%.100s'",
                       where, (long long)v, caller, tr->fn_name);
    (void)len; /* cut to fit the reason field */
    tgc_log_msg(tr->cfg, TGC_LOG_DYNAMIC,
                "tgc: '%s': %s() read dynamic %s while tracing; specializing it to %lld, so "
                "other sizes recompile: " TGC_SIZE_READ_ADVICE,
                tr->fn_name, caller, where, (long long)v);
    return v;
}

int64_t tgc_trace_read_size(tgc_trace *tr, const tgc_tensor *t, int dim, const char *caller)
{
    return read_sdim(tr, t->sshape[dim], dim, caller);
}

int64_t tgc_trace_read_sdim(tgc_trace *tr, tgc_sdim d, const char *caller)
{
    return read_sdim(tr, d, -1, caller);
}

void tgc_trace_release(tgc_trace *tr)
{
    for (int i = 0; i < tr->n_bound; i++)
        tgc_tensor_unref(tr->bound[i].t);
    free(tr->bound);
    free(tr->value_guards);
    free(tr->param_value);
    free(tr->grad_value);
    free(tr->aliases);
    tr->grad_value = NULL;
    tr->aliases = NULL;
    tr->n_aliases = tr->cap_aliases = 0;
    free(tr->size_reads);
    tr->size_reads = NULL;
    tr->n_size_reads = tr->cap_size_reads = 0;
    tr->bound = NULL;
    tr->value_guards = NULL;
    tr->param_value = NULL;
    tr->n_bound = tr->n_value_guards = 0;
}
