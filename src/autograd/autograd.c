/* Autograd: the records ops attach to their results, and tgc_backward over them
 * (autograd/autograd.h). The same code runs eagerly and while tracing: a rule's ops record
 * graph nodes inside a trace, and leaf gradients become in-place writes (tgc_copy_, ASSIGN)
 * of the leaves' .grad tensors. */
#include "autograd/autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
#include "frontend/trace.h"
#include "ir/sym.h"
#include "support/error.h"
#include "tgc/autograd.h"
#include "tgc/ops.h"

typedef struct tgc_grad_node {
    tgc_grad_link link; /* first: the tensor core frees it through link.release */
    tgc_op op;
    tgc_attrs a;
    tgc_grad_rule rule;
    int n_in, n_saved;
    tgc_tensor **in;    /* referenced */
    tgc_tensor **saved; /* referenced */
    tgc_tensor *out;    /* a handle of the result's value (no record), referenced */
    int released;       /* a backward ran through it: in/saved/out are gone */
    /* during one tgc_backward */
    int deps; /* records of the pass that still have to hand this one a gradient */
    int visited;
    tgc_tensor *pending; /* the gradient of out summed so far */
} tgc_grad_node;

static _Thread_local int paused;

void tgc_autograd_pause(void)
{
    paused++;
}

void tgc_autograd_resume(void)
{
    if (paused > 0)
        paused--;
}

static int requires(const tgc_tensor *t)
{
    return t && ((t->flags & TGC_T_REQUIRES_GRAD) || t->grad_fn);
}

int tgc_autograd_wants(tgc_tensor *const *in, int n_in)
{
    if (paused || !tgc_grad_enabled())
        return 0;
    for (int k = 0; k < n_in; k++)
        if (requires(in[k]))
            return 1;
    return 0;
}

static void drop_refs(tgc_grad_node *n)
{
    for (int k = 0; k < n->n_in; k++)
        tgc_tensor_unref(n->in[k]);
    for (int k = 0; k < n->n_saved; k++)
        tgc_tensor_unref(n->saved[k]);
    tgc_tensor_unref(n->out);
    free(n->in);
    free(n->saved);
    n->in = n->saved = NULL;
    n->out = NULL;
    n->n_in = n->n_saved = 0;
    n->released = 1;
}

static void node_release(tgc_grad_link *l)
{
    tgc_grad_node *n = (tgc_grad_node *)l;
    drop_refs(n);
    free(n);
}

/* A handle of t's value that carries no record: the same storage (eagerly) or the same traced
 * value, owned by the record. */
static tgc_tensor *value_handle(const tgc_tensor *t)
{
    tgc_tensor *h = tgc_tensor_alloc_unowned();
    if (!h)
        return NULL;
    h->dtype = t->dtype;
    h->ndim = t->ndim;
    memcpy(h->shape, t->shape, sizeof h->shape);
    memcpy(h->strides, t->strides, sizeof h->strides);
    memcpy(h->sshape, t->sshape, sizeof h->sshape);
    h->offset = t->offset;
    h->device = t->device;
    h->storage = t->storage;
    if (h->storage)
        tgc_storage_ref(h->storage);
    h->trace = t->trace;
    h->value = t->value;
    return h;
}

tgc_status tgc_autograd_attach(tgc_tensor *out, tgc_op op, const tgc_attrs *a,
                               tgc_tensor *const *in, int n_in, tgc_grad_rule rule,
                               tgc_tensor *const *saved, int n_saved)
{
    tgc_grad_node *n = calloc(1, sizeof *n);
    if (n) {
        n->in = calloc((size_t)(n_in ? n_in : 1), sizeof *n->in);
        n->saved = n_saved ? calloc((size_t)n_saved, sizeof *n->saved) : NULL;
        n->out = tgc_grad_rule_needs_out(op, a) ? value_handle(out) : NULL;
    }
    if (!n || !n->in || (n_saved && !n->saved) || (!n->out && tgc_grad_rule_needs_out(op, a))) {
        if (n) {
            tgc_tensor_unref(n->out);
            free(n->in);
            free(n->saved);
            free(n);
        }
        return tgc_set_error(TGC_ERR_OOM, "tgc_%s: out of memory recording for autograd",
                             tgc_op_name(op));
    }
    n->link.refs = 1;
    n->link.release = node_release;
    n->op = op;
    if (a)
        n->a = *a;
    n->rule = rule;
    n->n_in = n_in;
    for (int k = 0; k < n_in; k++) {
        n->in[k] = in[k];
        tgc_tensor_ref(in[k]);
    }
    n->n_saved = n_saved;
    for (int k = 0; k < n_saved; k++) {
        n->saved[k] = saved[k];
        tgc_tensor_ref(saved[k]);
    }
    tgc_grad_link_unref(out->grad_fn); /* a composite op may record over an inner record */
    out->grad_fn = &n->link;
    out->flags |= TGC_T_REQUIRES_GRAD;
    return TGC_OK;
}

/* ---- the backward pass ---- */

typedef struct {
    tgc_grad_node **v;
    int n, cap;
} node_list;

static int push(node_list *l, tgc_grad_node *n)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        tgc_grad_node **p = realloc(l->v, (size_t)cap * sizeof *p);
        if (!p)
            return 0;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return 1;
}

typedef struct {
    tgc_tensor *leaf;
    tgc_tensor *g;
    int remaining; /* contributions still to come (edges of the collected records) */
} leaf_grad;

typedef struct {
    leaf_grad *v;
    int n, cap;
} leaf_list;

static tgc_tensor *add_grads(tgc_tensor *a, tgc_tensor *b)
{
    return a ? tgc_add(a, b) : b;
}

/* The entry of leaf in l (a new one with no gradient yet when absent); NULL: out of memory. */
static leaf_grad *leaf_entry(leaf_list *l, tgc_tensor *leaf)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].leaf == leaf)
            return &l->v[i];
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        leaf_grad *p = realloc(l->v, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n] = (leaf_grad){leaf, NULL, 0};
    return &l->v[l->n++];
}

/* The leaf's .grad, created as zeros the first time (a concrete tensor even while tracing:
 * it is module / caller state that compiled calls then update in place). */
static tgc_tensor *ensure_grad(tgc_tensor *leaf)
{
    if (leaf->grad)
        return leaf->grad;
    tgc_trace *tr = tgc_trace_current();
    tgc_trace_set_current(NULL); /* not a constant of the trace */
    tgc_scope_push();
    tgc_tensor *z = tgc_zeros(leaf->shape, leaf->ndim, leaf->dtype, leaf->device);
    if (z) {
        tgc_scope_release(z); /* the leaf owns it now */
        z->grad_of = leaf;
        leaf->grad = z;
    }
    tgc_scope_pop();
    tgc_trace_set_current(tr);
    return z;
}

tgc_status tgc_autograd_ensure_grad(tgc_tensor *leaf)
{
    return ensure_grad(leaf) ? TGC_OK : tgc_last_status();
}

/* leaf.grad += g: eagerly an add and a copy; while tracing the same, recorded (ASSIGN). A
 * traced leaf (a value marked inside the trace) keeps a traced gradient. */
static tgc_status accumulate_leaf(tgc_tensor *leaf, tgc_tensor *g)
{
    if (g->dtype != leaf->dtype && !(g = tgc_cast(g, leaf->dtype)))
        return tgc_last_status();
    if (leaf->trace) {
        tgc_tensor *sum = leaf->grad ? tgc_add(leaf->grad, g) : tgc_contiguous(g);
        if (!sum)
            return tgc_last_status();
        tgc_scope_release(sum);
        if (leaf->grad) {
            leaf->grad->grad_of = NULL;
            tgc_tensor_unref(leaf->grad);
        }
        sum->grad_of = leaf;
        leaf->grad = sum;
        return TGC_OK;
    }
    tgc_tensor *grad = ensure_grad(leaf);
    if (!grad)
        return tgc_last_status();
    tgc_tensor *sum = tgc_add(grad, g);
    return sum ? tgc_copy_(grad, sum) : tgc_last_status();
}

/* The gradient hooks handed a leaf in the running backward (a backward runs on one thread). */
static _Thread_local tgc_grad_hook *active_hooks;

/* leaf's gradient is final: its hook hears of it (and joins the backward's active hooks). */
static tgc_status hook_ready(tgc_tensor *leaf)
{
    tgc_grad_hook *h = leaf->grad_hook;
    if (!h->active) {
        h->active = 1;
        h->next_active = active_hooks;
        active_hooks = h;
    }
    return h->ready(h, leaf);
}

/* The backward is over: every active hook finishes, also after an error (first error kept). */
static tgc_status hooks_finish(void)
{
    tgc_status st = TGC_OK;
    while (active_hooks) {
        tgc_grad_hook *h = active_hooks;
        active_hooks = h->next_active;
        h->active = 0;
        h->next_active = NULL;
        tgc_status fs = h->finish(h);
        if (st == TGC_OK)
            st = fs;
    }
    return st;
}

/* One more contribution g (NULL: none) to leaf; after its last one the sum goes into its
 * .grad at once, and its gradient hook hears of it (a data-parallel wrapper may start the
 * all-reduce of its bucket). */
static tgc_status leaf_done(leaf_list *l, tgc_tensor *leaf, tgc_tensor *g)
{
    leaf_grad *e = leaf_entry(l, leaf);
    if (!e)
        return tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
    if (g && !(e->g = e->g ? tgc_add(e->g, g) : g))
        return tgc_last_status();
    if (--e->remaining > 0)
        return TGC_OK;
    tgc_status st = e->g ? accumulate_leaf(leaf, e->g) : TGC_OK;
    if (st == TGC_OK && leaf->grad_hook)
        st = hook_ready(leaf);
    return st;
}

static int is_scalar(const tgc_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->trace ? !(TGC_SDIM_IS_CONST(t->sshape[d]) && t->sshape[d] == 1) : t->shape[d] != 1)
            return 0;
    return 1;
}

/* Adds n to the pass's set, which holds a reference of its own to each record: releasing
 * one record's tensors at the end of the pass may drop the last reference to another record
 * of the set (an intermediate the caller already freed or whose scope was popped), and the
 * pass still has to reset that one. */
static int collect_push(node_list *all, tgc_grad_node *n)
{
    if (!push(all, n))
        return 0;
    tgc_grad_link_ref(&n->link);
    return 1;
}

/* Collects the records reachable from root whose results need a gradient, counting for each
 * how many records of the set consume it. */
static tgc_status collect(tgc_grad_node *root, node_list *all, leaf_list *leaves)
{
    node_list stack = {0};
    tgc_status st = TGC_OK;
    root->visited = 1;
    if (!collect_push(all, root) || !push(&stack, root))
        st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
    while (st == TGC_OK && stack.n) {
        tgc_grad_node *n = stack.v[--stack.n];
        for (int k = 0; k < n->n_in && st == TGC_OK; k++) {
            tgc_grad_node *c = (tgc_grad_node *)n->in[k]->grad_fn;
            if (!c) { /* a leaf edge: its gradient is final after its last one */
                leaf_grad *e = requires(n->in[k]) ? leaf_entry(leaves, n->in[k]) : NULL;
                if (e)
                    e->remaining++;
                else if (requires(n->in[k]))
                    st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
                continue;
            }
            if (c->released) {
                st = tgc_set_error(TGC_ERR_INVALID_ARG,
                                   "tgc_backward: the graph was already freed by an earlier "
                                   "tgc_backward through it (record of tgc_%s)",
                                   tgc_op_name(c->op));
                break;
            }
            c->deps++;
            if (!c->visited) {
                c->visited = 1;
                if (!collect_push(all, c) || !push(&stack, c))
                    st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
            }
        }
    }
    free(stack.v);
    return st;
}

static tgc_status run_backward(tgc_tensor *out, tgc_tensor *gy)
{
    tgc_grad_node *root = (tgc_grad_node *)out->grad_fn;
    if (!root) { /* a leaf: its own gradient */
        tgc_status st = accumulate_leaf(out, gy);
        if (out->grad_hook) {
            tgc_autograd_pause();
            if (st == TGC_OK)
                st = hook_ready(out);
            tgc_status dst = hooks_finish();
            tgc_autograd_resume();
            if (st == TGC_OK)
                st = dst;
        }
        return st;
    }
    if (root->released)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_backward: the graph was already freed by an earlier "
                             "tgc_backward through it");
    node_list all = {0}, ready = {0};
    leaf_list leaves = {0};
    tgc_status st = collect(root, &all, &leaves);
    tgc_autograd_pause();
    root->pending = gy;
    if (st == TGC_OK && !push(&ready, root))
        st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
    while (st == TGC_OK && ready.n) {
        tgc_grad_node *n = ready.v[--ready.n];
        tgc_tensor *gin_small[8], **gin = gin_small;
        uint8_t needs_small[8], *needs = needs_small;
        if (n->n_in > 8) {
            gin = calloc((size_t)n->n_in, sizeof *gin);
            needs = calloc((size_t)n->n_in, 1);
            if (!gin || !needs) {
                free(gin);
                free(needs);
                st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
                break;
            }
        }
        for (int k = 0; k < n->n_in; k++) {
            gin[k] = NULL;
            needs[k] = (uint8_t) requires(n->in[k]);
        }
        if (n->pending) {
            tgc_grad_ctx c = {n->op, &n->a, n->in, n->n_in, n->out, n->saved, n->n_saved, needs};
            st = n->rule(&c, n->pending, gin);
        }
        for (int k = 0; k < n->n_in && st == TGC_OK; k++) {
            tgc_tensor *x = n->in[k];
            tgc_grad_node *c = (tgc_grad_node *)x->grad_fn;
            if (!needs[k])
                continue;
            if (c) {
                if (gin[k] && !(c->pending = add_grads(c->pending, gin[k])))
                    st = tgc_last_status();
                if (--c->deps == 0 && !push(&ready, c))
                    st = tgc_set_error(TGC_ERR_OOM, "tgc_backward: out of memory");
            } else {
                st = leaf_done(&leaves, x, gin[k]);
            }
        }
        if (gin != gin_small) {
            free(gin);
            free(needs);
        }
    }
    /* the gradient hooks finish (also after an error: a data-parallel wrapper joins its
     * all-reduces, since every rank must finish the collectives it started) */
    tgc_status dst = hooks_finish();
    if (st == TGC_OK)
        st = dst;
    tgc_autograd_resume();
    for (int i = 0; i < all.n; i++) {
        all.v[i]->visited = 0;
        all.v[i]->deps = 0;
        all.v[i]->pending = NULL;
        if (st == TGC_OK)
            drop_refs(all.v[i]); /* the step's record is freed after backward */
    }
    for (int i = 0; i < all.n; i++)
        tgc_grad_link_unref(&all.v[i]->link);
    free(all.v);
    free(ready.v);
    free(leaves.v);
    return st;
}

tgc_status tgc_backward(tgc_tensor *loss)
{
    if (!loss)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_backward: loss is NULL");
    if (!requires(loss))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_backward: the loss requires no gradient (no input of it "
                             "requires one, or it was computed with grad mode off)");
    if (!is_scalar(loss)) {
        char b[160];
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_backward: the loss must have one element, but it is %s; use "
                             "tgc_backward_grad to give the gradient of a larger tensor",
                             tgc_format_dims(loss->shape, loss->ndim, b, sizeof b));
    }
    tgc_autograd_pause();
    tgc_tensor *one = tgc_full(loss->shape, loss->ndim, 1.0, loss->dtype, loss->device);
    tgc_autograd_resume();
    return one ? run_backward(loss, one) : tgc_last_status();
}

tgc_status tgc_backward_grad(tgc_tensor *out, tgc_tensor *grad_out)
{
    if (!out || !grad_out)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_backward_grad: %s is NULL",
                              out ? "grad_out" : "out");
    if (!requires(out))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_backward_grad: out requires no gradient");
    if (grad_out->dtype != out->dtype)
        return tgc_set_error(TGC_ERR_DTYPE, "tgc_backward_grad: grad_out is %s but out is %s",
                             tgc_dtype_name(grad_out->dtype), tgc_dtype_name(out->dtype));
    /* shape[] holds the trace-time sizes of a traced tensor, so one comparison serves eager
     * and traced calls; equal symbolic sizes are then unified by the reshape below */
    int same = grad_out->ndim == out->ndim;
    for (int d = 0; same && d < out->ndim; d++)
        same = out->shape[d] == grad_out->shape[d];
    if (!same) {
        char a[160], b[160];
        return tgc_set_error(TGC_ERR_SHAPE, "tgc_backward_grad: grad_out is %s but out is %s",
                             tgc_format_dims(grad_out->shape, grad_out->ndim, a, sizeof a),
                             tgc_format_dims(out->shape, out->ndim, b, sizeof b));
    }
    tgc_autograd_pause();
    tgc_tensor *g = tgc_reshape_as(grad_out, out); /* checks symbolic sizes while tracing */
    tgc_autograd_resume();
    if (!g) {
        char cause[512];
        snprintf(cause, sizeof cause, "%s", tgc_last_error());
        return tgc_set_error(tgc_last_status(), "tgc_backward_grad: grad_out does not fit out: %s",
                             cause);
    }
    return run_backward(out, g);
}

tgc_tensor *tgc_grad(const tgc_tensor *t)
{
    if (!t) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_grad: tensor is NULL");
        return NULL;
    }
    return t->grad;
}

tgc_tensor *tgc_detach(tgc_tensor *t)
{
    if (!t) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_detach: tensor is NULL");
        return NULL;
    }
    if (t->trace)
        return tgc_trace_tensor(t->trace, t->value);
    return tgc_tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
}

tgc_status tgc_zero_grad(tgc_module *m)
{
    if (!m)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_zero_grad: module is NULL");
    int n = 0;
    tgc_tensor *const *ts = tgc_module_flat(m, &n);
    tgc_status st = TGC_OK;
    int tracing = tgc_trace_current() != NULL;
    tgc_scope_push();
    tgc_autograd_pause();
    for (int i = 0; i < n && st == TGC_OK; i++) {
        if (!(ts[i]->flags & TGC_T_REQUIRES_GRAD))
            continue;
        /* a parameter without a .grad gets one: zeroed gradients exist for every parameter
         * that requires one, so a compiled step traced before the first backward writes
         * the same tensors as the eager steps after it */
        tgc_tensor *g = ensure_grad(ts[i]);
        if (!g) {
            st = tgc_last_status();
            break;
        }
        /* while tracing, a broadcast scalar: no constant of the gradient's size is kept,
         * and the write is dropped when backward writes the gradient again */
        tgc_tensor *z = tracing ? tgc_expand_as(tgc_zeros(NULL, 0, g->dtype, g->device), g)
                                : tgc_zeros(g->shape, g->ndim, g->dtype, g->device);
        st = z ? tgc_copy_(g, z) : tgc_last_status();
    }
    tgc_autograd_resume();
    tgc_scope_pop();
    return st;
}
