/* Fusion into LOOP, TEMPLATE and OPAQUE groups (see fuse.h).
 *
 * Greedy, in topological order: a pointwise node joins the newest group of one of its
 * direct producers that can take it, a reduction joins the group that computes its input
 * (a prologue) or a group reducing the same dims of the same shape (softmax, layer_norm).
 * The one ordering rule keeps the schedule acyclic: a node may join group G only when
 * every other value it reads comes from a group older than G. Effects (tgc_op_effects) add
 * more: a node that writes in place starts a group of its own, so it keeps its place among
 * the effect nodes, and a node reading a value that is written in place joins no group older
 * than the newest group writing that value so far (it would read the value from before the
 * write; distinct graph inputs are distinct memory, as the executor binds them). A random draw
 * may join a LOOP group (dropout fuses with its producer), but none older than the newest
 * draw's group: groups run in id order and each draws its counters when it runs, so draws
 * happen in graph node order, as interp's. A draw belongs to one group, so its counters are
 * reserved once per call. A pointwise node that reads no group's value joins one of the
 * newest pure-pointwise groups over its shape (horizontal fusion of siblings); one that
 * only reads values of groups that cannot take it joins one of the newest LOOP groups it
 * fits. */
#include <stdlib.h>
#include <string.h>

#include "ir/view_access.h"
#include "passes/fuse.h"
#include "passes/passes.h"
#include "support/strbuf.h"

typedef struct fuse_ctx {
    const tgc_graph *g;
    const tgc_fuse_hooks *h;
    tgc_fusion *f;
    int32_t *base;      /* per node: the non-view node its value is read from */
    int32_t *n_users;   /* per non-view node: consumers through views, outputs counted */
    uint8_t *is_output; /* value or a view of it is a graph output */
    uint8_t *written;   /* per node: its value (or what it views) is written in place */
    int32_t *writer_of; /* per non-view node: the newest group writing its value in place;
                         * -1: none yet */
    int last_writer;    /* the newest group of a node that writes operands it does not name
                         * (every written value waits for it); -1: none yet */
    int last_random;    /* the newest group of a random draw; -1: none yet */
} fuse_ctx;

uint32_t tgc_fuse_reduce_dims(const tgc_graph *g, int32_t node)
{
    const tgc_node *nd = &g->nodes[node];
    if (nd->op == TGC_OP_ADAPTIVE_AVG_POOL2D) {
        int r = g->nodes[nd->in[0]].out.ndim;
        return (1u << (r - 1)) | (1u << (r - 2));
    }
    return (uint32_t)nd->attrs.reduce.mask; /* sum, mean, max */
}

static int same_shape(const tgc_vinfo *a, const tgc_vinfo *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (!tgc_sdim_same(a->shape[d], b->shape[d]))
            return 0;
    return 1;
}

/* A reduced value in keepdim form: the domain with reduced dims 1; or with them removed. */
static int is_row_shape(const tgc_group *gr, const tgc_vinfo *v)
{
    const tgc_vinfo *d = &gr->domain;
    if (v->ndim == d->ndim) {
        for (int k = 0; k < d->ndim; k++) {
            int red = (gr->red_mask >> k) & 1;
            if (red ? !tgc_sdim_is(v->shape[k], 1) : !tgc_sdim_same(v->shape[k], d->shape[k]))
                return 0;
        }
        return 1;
    }
    int j = 0;
    for (int k = 0; k < d->ndim; k++) {
        if ((gr->red_mask >> k) & 1)
            continue;
        if (j >= v->ndim || !tgc_sdim_same(v->shape[j], d->shape[k]))
            return 0;
        j++;
    }
    return j == v->ndim;
}

static int add_member(tgc_fusion *f, int gid, int32_t node)
{
    tgc_group *gr = &f->groups[gid];
    if (gr->n_members == gr->cap) {
        int nc = gr->cap ? gr->cap * 2 : 8;
        int32_t *p = realloc(gr->members, (size_t)nc * sizeof *p);
        if (!p)
            return 0;
        gr->members = p;
        gr->cap = nc;
    }
    gr->members[gr->n_members++] = node;
    f->group_of[node] = gid;
    return 1;
}

static int new_group(fuse_ctx *c, tgc_group_kind kind, int32_t node)
{
    tgc_fusion *f = c->f;
    tgc_group *p = realloc(f->groups, (size_t)(f->n_groups + 1) * sizeof *p);
    if (!p)
        return -1;
    f->groups = p;
    tgc_group *gr = &f->groups[f->n_groups];
    memset(gr, 0, sizeof *gr);
    gr->kind = kind;
    gr->anchor = kind == TGC_GROUP_LOOP ? -1 : node;
    gr->tip = node;
    gr->domain = c->g->nodes[node].out;
    if (!add_member(f, f->n_groups, node))
        return -1;
    return f->n_groups++;
}

/* Group whose buffer a read of value u comes from (-1: a graph input). */
static int source_group(const fuse_ctx *c, int32_t u)
{
    return c->f->group_of[c->base[u]];
}

/* Every input of node i that is not a direct member of gid must come from an older
 * group; and values of gid may only be read directly (not through views). */
static int reads_ok(const fuse_ctx *c, int gid, int32_t i)
{
    const tgc_node *nd = &c->g->nodes[i];
    for (int k = 0; k < nd->n_in; k++) {
        int32_t u = nd->in[k];
        if (c->written[u] && (gid <= c->last_writer || gid <= c->writer_of[c->base[u]]))
            return 0;
        if (c->f->group_of[u] == gid)
            continue;
        if (source_group(c, u) >= gid)
            return 0;
    }
    return 1;
}

static int try_join_pointwise(fuse_ctx *c, int gid, int32_t i)
{
    tgc_fusion *f = c->f;
    tgc_group *gr = &f->groups[gid];
    const tgc_node *nd = &c->g->nodes[i];
    if (gr->kind == TGC_GROUP_OPAQUE || !reads_ok(c, gid, i))
        return 0;
    int random = (tgc_node_effects(nd) & TGC_EFFECT_RANDOM) != 0;
    if (random && (gr->kind != TGC_GROUP_LOOP || gid < c->last_random))
        return 0;
    if (gr->kind == TGC_GROUP_TEMPLATE) {
        int32_t tip = gr->tip;
        if (!same_shape(&nd->out, &c->g->nodes[gr->anchor].out) || c->n_users[tip] != 1 ||
            c->is_output[tip] || nd->out.dtype != c->g->nodes[gr->anchor].out.dtype)
            return 0;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t u = nd->in[k];
            if (f->group_of[u] == gid && u != tip)
                return 0;
            if (f->group_of[u] != gid && !c->h->epilogue_ok(c->g, gr->anchor, i, u))
                return 0; /* the backend cannot read this operand in an epilogue */
        }
        gr->tip = i;
        return add_member(f, gid, i);
    }
    /* LOOP */
    if (gr->anchor < 0) {
        if (!same_shape(&nd->out, &gr->domain))
            return 0;
        for (int k = 0; k < nd->n_in; k++)
            if (f->group_of[nd->in[k]] == gid &&
                !same_shape(&c->g->nodes[nd->in[k]].out, &gr->domain))
                return 0;
        f->level[i] = 0;
        for (int k = 0; k < nd->n_in; k++)
            if (f->group_of[nd->in[k]] == gid && f->level[nd->in[k]] > f->level[i])
                f->level[i] = f->level[nd->in[k]];
        return add_member(f, gid, i);
    }
    int full = same_shape(&nd->out, &gr->domain);
    int row = !full && is_row_shape(gr, &nd->out);
    if (!full && !row)
        return 0;
    int level = 0;
    for (int k = 0; k < nd->n_in; k++) {
        int32_t u = nd->in[k];
        if (f->group_of[u] != gid)
            continue;
        const tgc_vinfo *uv = &c->g->nodes[u].out;
        int lv;
        if (f->is_row[u]) {
            /* a row value broadcasts over the reduced dims: keepdim form only, so the
             * broadcast lines up dim by dim */
            if (full && uv->ndim != gr->domain.ndim)
                return 0;
            if (row && !same_shape(uv, &nd->out))
                return 0;
            lv = f->level[u];
        } else {
            if (row || !same_shape(uv, &gr->domain))
                return 0;
            lv = f->level[u];
        }
        if (lv > level)
            level = lv;
    }
    f->level[i] = (uint8_t)level;
    f->is_row[i] = (uint8_t)row;
    return add_member(f, gid, i);
}

/* Node i, a contiguous copy of a permute of v (tgc_permuted_copy_of), joins v's group as
 * v's store in i's order where v is read by nothing else: the tip of a template group whose
 * backend stores its epilogue so, or a full-shaped member of a LOOP group. */
static int try_join_permuted(fuse_ctx *c, int32_t i)
{
    tgc_fusion *f = c->f;
    int32_t v;
    if (!tgc_permuted_copy_of(c->g, i, &v, NULL) || c->n_users[v] != 1 || c->is_output[v] ||
        c->written[v] || c->written[i] || tgc_node_effects(&c->g->nodes[i]) ||
        (c->g->nodes[i].flags & TGC_NODE_MUTATES))
        return 0;
    int gid = f->group_of[v];
    if (gid < 0)
        return 0;
    tgc_group *gr = &f->groups[gid];
    if (gr->kind == TGC_GROUP_TEMPLATE) {
        if (gr->tip != v || !c->h->permuted_store_ok ||
            !c->h->permuted_store_ok(c->g, gr->anchor, i))
            return 0;
        gr->tip = i;
        return add_member(f, gid, i);
    }
    if (gr->kind != TGC_GROUP_LOOP || f->is_row[v] || !same_shape(&c->g->nodes[v].out, &gr->domain))
        return 0;
    f->level[i] = f->level[v];
    f->is_row[i] = 0;
    return add_member(f, gid, i);
}

static int try_join_reduce(fuse_ctx *c, int gid, int32_t i)
{
    tgc_fusion *f = c->f;
    tgc_group *gr = &f->groups[gid];
    const tgc_node *nd = &c->g->nodes[i];
    int32_t x = nd->in[0];
    uint32_t mask = tgc_fuse_reduce_dims(c->g, i);
    if (gr->kind != TGC_GROUP_LOOP || f->group_of[x] != gid || f->is_row[x] ||
        !reads_ok(c, gid, i) || !same_shape(&c->g->nodes[x].out, &gr->domain))
        return 0;
    if (gr->anchor >= 0 && gr->red_mask != mask)
        return 0;
    if (gr->anchor < 0) {
        gr->anchor = i;
        gr->red_mask = mask;
    }
    f->level[i] = f->level[x] + 1; /* its value is readable one phase later */
    if (f->level[i] > 60)
        return 0;
    f->is_row[i] = 1;
    return add_member(f, gid, i);
}

static tgc_status fuse_nodes(fuse_ctx *c)
{
    const tgc_graph *g = c->g;
    tgc_fusion *f = c->f;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        tgc_fuse_class cls = c->h->classify(g, i);
        int gid = -2;
        if (cls == TGC_FUSE_FREE)
            continue;
        if (cls == TGC_FUSE_WINDOW) {
            /* starts a pointwise group over its output; consumers may join it */
            if (new_group(c, TGC_GROUP_LOOP, i) < 0)
                return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory fusing a graph");
            continue;
        }
        if (cls == TGC_FUSE_POINTWISE && try_join_permuted(c, i))
            continue;
        if (cls == TGC_FUSE_POINTWISE || cls == TGC_FUSE_REDUCE) {
            /* the newest producer group first: longest chains, fewest buffers */
            int tried[8], n_tried = 0;
            int own = (tgc_node_effects(nd) & ~(unsigned)TGC_EFFECT_RANDOM) != 0 ||
                      (nd->flags & TGC_NODE_MUTATES);
            for (int pass = 0; pass < nd->n_in && gid < 0 && !own; pass++) {
                int best = -1;
                for (int k = 0; k < nd->n_in; k++) {
                    int h = f->group_of[nd->in[k]];
                    int seen = 0;
                    for (int t = 0; t < n_tried; t++)
                        seen |= tried[t] == h;
                    if (h > best && !seen)
                        best = h;
                }
                if (best < 0)
                    break;
                if (n_tried < 8)
                    tried[n_tried++] = best;
                int ok = cls == TGC_FUSE_POINTWISE ? try_join_pointwise(c, best, i)
                                                   : try_join_reduce(c, best, i);
                if (ok)
                    gid = best;
            }
            /* A pointwise node no producer's group takes joins one of the four newest LOOP
             * groups where it fits, instead of starting its own kernel (horizontal fusion):
             * one that reads no group's value (only graph inputs: an optimizer's p * decay,
             * v * beta2) a pure-pointwise group over its shape, where the ordering rule holds
             * trivially; one whose operands all come from older groups (batch norm's backward
             * scales a per-channel 1/std saved by the forward) any, as a full value or as a row
             * value of a reduction, so its consumers (dx = d * scale) can join it there.
             * reads_ok still keeps readers of written values after the value's writer. */
            int reads_groups = 0;
            for (int k = 0; gid < 0 && k < nd->n_in; k++)
                reads_groups |= source_group(c, nd->in[k]) >= 0;
            for (int h = f->n_groups - 1, seen = 0;
                 gid < 0 && !own && cls == TGC_FUSE_POINTWISE && h >= 0 && seen < 4; h--) {
                if (f->groups[h].kind != TGC_GROUP_LOOP)
                    continue;
                seen++;
                if ((reads_groups || f->groups[h].anchor < 0) && try_join_pointwise(c, h, i))
                    gid = h;
            }
            if (gid < 0) {
                gid = new_group(c, TGC_GROUP_LOOP, i);
                if (gid >= 0 && cls == TGC_FUSE_REDUCE) {
                    tgc_group *gr = &f->groups[gid];
                    gr->anchor = i;
                    gr->red_mask = tgc_fuse_reduce_dims(g, i);
                    gr->domain = g->nodes[nd->in[0]].out;
                    f->level[i] = 1;
                    f->is_row[i] = 1;
                }
            }
        } else {
            gid = new_group(c, cls == TGC_FUSE_TEMPLATE ? TGC_GROUP_TEMPLATE : TGC_GROUP_OPAQUE, i);
        }
        if (gid < 0)
            return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory fusing a graph");
        if (tgc_node_effects(nd) & TGC_EFFECT_WRITES_INPUTS) {
            for (int k = 0; k < nd->n_in; k++)
                if (tgc_op_writes_operand(nd->op, &nd->attrs, k))
                    c->writer_of[c->base[nd->in[k]]] = gid;
        } else if (nd->flags & TGC_NODE_MUTATES) {
            c->last_writer = gid;
        }
        if (tgc_node_effects(nd) & TGC_EFFECT_RANDOM)
            c->last_random = gid;
    }
    return TGC_OK;
}

tgc_status tgc_pass_fuse(const tgc_graph *g, const tgc_fuse_hooks *hooks, tgc_fusion *out)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    fuse_ctx c = {g,
                  hooks,
                  out,
                  malloc(n * sizeof(int32_t)),
                  calloc(n, sizeof(int32_t)),
                  calloc(n, 1),
                  tgc_pass_mutated_values(g),
                  malloc(n * sizeof(int32_t)),
                  -1,
                  -1};
    out->group_of = malloc(n * sizeof(int32_t));
    out->level = calloc(n, 1);
    out->is_row = calloc(n, 1);
    tgc_status st = TGC_OK;
    if (!c.base || !c.n_users || !c.is_output || !c.written || !c.writer_of || !out->group_of ||
        !out->level || !out->is_row)
        st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory fusing a graph");
    for (int32_t i = 0; st == TGC_OK && i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        out->group_of[i] = -1;
        c.writer_of[i] = -1;
        c.base[i] = tgc_is_view_op(nd->op) ? c.base[nd->in[0]] : i;
        if (tgc_is_view_op(nd->op))
            continue;
        for (int k = 0; k < nd->n_in; k++)
            c.n_users[c.base[nd->in[k]]]++;
    }
    for (int i = 0; st == TGC_OK && i < g->n_outputs; i++) {
        c.n_users[c.base[g->outputs[i]]]++;
        c.is_output[c.base[g->outputs[i]]] = 1;
    }
    if (st == TGC_OK)
        st = fuse_nodes(&c);
    free(c.base);
    free(c.n_users);
    free(c.is_output);
    free(c.written);
    free(c.writer_of);
    if (st != TGC_OK)
        tgc_fusion_free(out);
    return st;
}

void tgc_fusion_free(tgc_fusion *f)
{
    for (int i = 0; i < f->n_groups; i++)
        free(f->groups[i].members);
    free(f->groups);
    free(f->group_of);
    free(f->level);
    free(f->is_row);
    memset(f, 0, sizeof *f);
}

char *tgc_fusion_to_text(const tgc_graph *g, const tgc_fusion *f)
{
    tgc_strbuf sb = {0};
    static const char *const kinds[] = {"loop", "template", "opaque"};
    for (int i = 0; i < f->n_groups; i++) {
        const tgc_group *gr = &f->groups[i];
        char shape[256];
        tgc_vinfo_format_shape(g->syms, &gr->domain, shape, sizeof shape);
        tgc_sb_printf(&sb, "group %d %s %s", i, kinds[gr->kind], shape);
        if (gr->kind == TGC_GROUP_LOOP && gr->anchor >= 0)
            tgc_sb_printf(&sb, " reduce mask 0x%x", gr->red_mask);
        tgc_sb_puts(&sb, ":");
        for (int k = 0; k < gr->n_members; k++)
            tgc_sb_printf(&sb, " %%%d %s", gr->members[k],
                          tgc_op_name(g->nodes[gr->members[k]].op));
        tgc_sb_puts(&sb, "\n");
    }
    return tgc_sb_take(&sb);
}
