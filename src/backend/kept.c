/* Kept values: the results of a plan's leading steps that compute from module tensors and
 * constants only, kept between the calls of a stream and recomputed only when what they read
 * changed (plan.h, tgc_plan_kept).
 *
 * The preparation moves every node that depends only on parameters and constants first
 * (prepare.c), so an inference variant starts with the steps that turn weights into what the
 * rest reads: batch-norm scale and shift, weights sliced to a convolution's live taps, masks
 * built from constants. Their inputs change only through in-place writes, each of which bumps
 * the storage's version (an optimizer's step, a checkpoint load, tgc_copy_, a training step's
 * running statistics): a call whose kept inputs are the same storages (by their process-unique
 * id, never an address that could be reused) at the same versions, offsets and strides, under
 * the same symbol values, reads what the last call on its stream computed. A training step
 * writes its parameters every call, so its kept steps run every call, as before.
 *
 * The cache lives in a stream's entry (exec.c's arena of that stream): only one call holds it
 * at a time, and on a device every use of its buffers is queued on that one stream, so a
 * recomputation never overwrites what an earlier call is still reading. A call that takes a
 * private arena (a concurrent call on the same stream, a capture) computes every step. */
#include <stdlib.h>
#include <string.h>

#include "backend/plan.h"
#include "ir/view_access.h"
#include "support/error.h"
#include "tensor/tensor_impl.h"

void tgc_plan_kept_free(tgc_plan_kept *k)
{
    free(k->inputs);
    free(k->values);
    free(k->index);
    memset(k, 0, sizeof *k);
}

static int module_input(const tgc_node *nd)
{
    return nd->op == TGC_OP_INPUT && nd->attrs.input.kind != TGC_BIND_ARG;
}

/* Step si can be kept: a kernel that draws nothing, reads module inputs and earlier kept
 * results (from[] through base[]), and writes values that are no input, no output nor a value
 * an output views, no forwarded write into an input and nothing written in place. */
static int keepable(const tgc_plan *p, int si, const uint8_t *from, const int32_t *base,
                    const uint8_t *is_out)
{
    const tgc_step *s = &p->steps[si];
    if (s->kernel < 0)
        return 0;
    const kir_kernel *k = p->kernels[s->kernel].k;
    if (k->n_rands)
        return 0;
    for (int b = 0; b < k->n_bufs; b++) {
        int32_t v = k->bufs[b].value, r = base[v];
        if (k->bufs[b].written) {
            if (r != v || p->g->nodes[v].op == TGC_OP_INPUT || is_out[v] ||
                (p->write_to && p->write_to[v] >= 0) || (p->mutated && p->mutated[v]))
                return 0;
        } else if (!from[r] && !module_input(&p->g->nodes[r])) {
            return 0;
        }
    }
    return 1;
}

/* Marks (through base[], on the viewed value) the values step si reads. */
static void mark_reads(const tgc_plan *p, int si, const int32_t *base, uint8_t *mark)
{
    const tgc_step *s = &p->steps[si];
    if (s->kernel >= 0) {
        const kir_kernel *k = p->kernels[s->kernel].k;
        for (int b = 0; b < k->n_bufs; b++)
            if (!k->bufs[b].written)
                mark[base[k->bufs[b].value]] = 1;
    } else {
        const tgc_node *nd = &p->g->nodes[s->node];
        for (int i = 0; i < nd->n_in; i++)
            mark[base[nd->in[i]]] = 1;
    }
}

tgc_status tgc_plan_kept_find(tgc_plan *p, uint8_t *mat)
{
    const tgc_graph *g = p->g;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    uint8_t *from = calloc(n, 1), *is_out = calloc(n, 1), *read_in = calloc(n, 1),
            *read_after = calloc(n, 1);
    int32_t *base = malloc(n * sizeof *base);
    tgc_plan_kept *kp = &p->kept;
    tgc_status st = TGC_OK;
    if (!from || !is_out || !read_in || !read_after || !base) {
        st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
        goto done;
    }
    for (int32_t v = 0; v < g->n_nodes; v++)
        base[v] = tgc_is_view_op(g->nodes[v].op) ? base[g->nodes[v].in[0]] : v;
    for (int i = 0; i < g->n_outputs; i++)
        is_out[base[g->outputs[i]]] = 1;
    int ns = 0;
    while (ns < p->n_steps && keepable(p, ns, from, base, is_out)) {
        const kir_kernel *k = p->kernels[p->steps[ns].kernel].k;
        for (int b = 0; b < k->n_bufs; b++)
            if (k->bufs[b].written)
                from[k->bufs[b].value] = 1;
        ns++;
    }
    for (int si = 0; si < p->n_steps; si++)
        mark_reads(p, si, base, si < ns ? read_in : read_after);
    int nv = 0, ni = 0;
    for (int32_t v = 0; v < g->n_nodes; v++) {
        nv += from[v] && read_after[v];
        ni += read_in[v] && module_input(&g->nodes[v]);
    }
    if (!ns || !nv)
        goto done;
    kp->values = malloc((size_t)nv * sizeof *kp->values);
    kp->inputs = malloc((size_t)(ni ? ni : 1) * sizeof *kp->inputs);
    kp->index = malloc(n * sizeof *kp->index);
    if (!kp->values || !kp->inputs || !kp->index) {
        tgc_plan_kept_free(kp);
        st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
        goto done;
    }
    for (int32_t v = 0; v < g->n_nodes; v++) {
        kp->index[v] = -1;
        if (from[v] && read_after[v]) {
            kp->index[v] = kp->n_values;
            kp->values[kp->n_values++] = v;
            mat[v] = 0; /* its own buffer, not an arena slot */
        }
        if (read_in[v] && module_input(&g->nodes[v]))
            kp->inputs[kp->n_inputs++] = v;
    }
    kp->n_steps = ns;
done:
    free(from);
    free(is_out);
    free(read_in);
    free(read_after);
    free(base);
    return st;
}

/* The key of a call is built in c->next (begin, one input at a time, end), then compared
 * with c->key, the key of the values c holds. */
static void key_put(tgc_kept_cache *c, uint64_t w)
{
    if (c->n_next < 0)
        return;
    if (c->n_next == c->next_cap) {
        int cap = c->next_cap ? 2 * c->next_cap : 64;
        uint64_t *nk = realloc(c->next, (size_t)cap * sizeof *nk);
        if (!nk) { /* no room for the key: this call keeps nothing */
            c->n_next = -1;
            return;
        }
        c->next = nk;
        c->next_cap = cap;
    }
    c->next[c->n_next++] = w;
}

void tgc_kept_key_begin(tgc_kept_cache *c, const int64_t *symvals, int n_syms)
{
    c->n_next = 0;
    for (int s = 0; s < n_syms; s++)
        key_put(c, (uint64_t)symvals[s]);
}

void tgc_kept_key_input(tgc_kept_cache *c, const tgc_tensor *t)
{
    key_put(c, t && t->storage ? t->storage->uid : 0);
    key_put(c, t && t->storage ? atomic_load(&t->storage->version) : 0);
    key_put(c, t ? (uint64_t)t->offset : 0);
    for (int d = 0; t && d < t->ndim; d++)
        key_put(c, (uint64_t)t->strides[d]);
}

int tgc_kept_key_end(tgc_kept_cache *c)
{
    if (c->valid && c->n_next >= 0 && c->n_next == c->n_key &&
        memcmp(c->next, c->key, (size_t)c->n_key * sizeof *c->key) == 0)
        return 1;
    /* a miss: c will hold this call's values once its kept steps ran (tgc_kept_filled) */
    c->valid = 0;
    uint64_t *t = c->key;
    int cap = c->key_cap;
    c->key = c->next;
    c->key_cap = c->next_cap;
    c->n_key = c->n_next;
    c->next = t;
    c->next_cap = cap;
    return 0;
}

void tgc_kept_filled(tgc_kept_cache *c)
{
    c->valid = c->n_key >= 0;
}

tgc_storage *tgc_kept_buffer(const tgc_plan *p, tgc_kept_cache *c, int j, size_t bytes)
{
    if (!c->bufs && !(c->bufs = calloc((size_t)p->kept.n_values, sizeof *c->bufs)))
        return NULL;
    if (!c->bufs[j] || c->bufs[j]->nbytes < bytes) {
        if (c->bufs[j])
            tgc_storage_unref(c->bufs[j]);
        c->valid = 0; /* a buffer replaced: what the key says it holds is gone */
        c->bufs[j] = tgc_storage_new(bytes ? bytes : 64, p->device);
    }
    return c->bufs[j];
}

void tgc_kept_cache_clear(const tgc_plan *p, tgc_kept_cache *c)
{
    for (int j = 0; c->bufs && j < p->kept.n_values; j++)
        if (c->bufs[j])
            tgc_storage_unref(c->bufs[j]);
    free(c->bufs);
    free(c->key);
    free(c->next);
    memset(c, 0, sizeof *c);
}

size_t tgc_kept_bytes(const tgc_plan *p, const tgc_kept_cache *c)
{
    size_t bytes = 0;
    for (int j = 0; c->bufs && j < p->kept.n_values; j++)
        bytes += c->bufs[j] ? c->bufs[j]->nbytes : 0;
    return bytes;
}
