/* The compile driver, the same for every compiled backend: a variant's graph becomes a plan
 * (plan.h) through
 *   clone -> passes (tgc_passes_run_opts, with the backend's decompose-keep flags; constant
 *   folding evaluates on interp) -> the backend's prepare (optional) -> fusion with the
 *   backend's hooks -> graph logs and dumps -> kir_lower_group per LOOP / TEMPLATE group ->
 *   store forwarding, kept steps (kept.c) and batched launches (batch.c) -> the backend's
 *   compile of ALL kernels of the variant in one call (LLVM: one unit, one O3 run) -> the
 *   memory plan (memplan.h) over the steps.
 * OPAQUE groups become steps run on interp (exec.c); each such op is named once per variant
 * on the perf channel, here, so calls pay nothing for it.
 *
 * Also the graph-level entry points of backend.h, which route graph runners (interp) to
 * their own members and compiled backends to this driver and the executor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/interp/interp.h"
#include "backend/plan.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "runtime/parallel.h"
#include "support/error.h"
#include "support/log.h"
#include "support/strbuf.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"

void tgc_plan_free(tgc_plan *p)
{
    if (!p)
        return;
    if (p->backend && p->code)
        p->backend->release_code(p->code);
    for (int i = 0; i < p->n_kernels; i++) {
        kir_kernel_free(p->kernels[i].k);
        kir_args_free(&p->kernels[i].slots);
    }
    free(p->kernels);
    free(p->steps);
    free(p->mutated);
    free(p->write_to);
    tgc_memplan_free(&p->mem);
    tgc_graph_free(p->g);
    tgc_replay_release(p);
    tgc_plan_streams_free(p);
    tgc_plan_kept_free(&p->kept);
    free(p);
}

void tgc_backend_dump_text(const tgc_config *cfg, const char *name, const char *suffix,
                           const char *text)
{
    if (!cfg->dump_dir || !text)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", cfg->dump_dir, name, suffix);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

/* The graph as compiled (after the passes and the backend's preparation) and its groups,
 * in one message: the groups name nodes of this graph, which the preparation may have
 * renumbered (copies inserted, parameter-only nodes moved first) since "after passes". */
static void log_graph(const tgc_plan *p, const tgc_fusion *fu, const tgc_config *cfg,
                      const char *name)
{
    if (!(cfg->log & TGC_LOG_GRAPH) && !cfg->dump_dir)
        return;
    char *t = tgc_fusion_to_text(p->g, fu), *gt = tgc_graph_to_text(p->g);
    tgc_strbuf sb = {0};
    tgc_sb_printf(&sb, "%s\n%s", gt ? gt : "", t ? t : "");
    char *both = tgc_sb_take(&sb);
    if (cfg->log & TGC_LOG_GRAPH)
        tgc_log_msg(cfg, TGC_LOG_GRAPH,
                    "tgc: graph of '%s' as compiled for %s (%d nodes) and its fusion groups:\n%s",
                    name, p->backend->name, p->g->n_nodes, both ? both : "");
    tgc_backend_dump_text(cfg, name, "opt.txt", both);
    free(both);
    free(gt);
    free(t);
}

/* Step si of p runs a node on interp or the backend's own kernel for it (not a kernel of the
 * plan, nor the executor's copy of an ASSIGN). */
static int opaque_step(const tgc_plan *p, int si)
{
    return p->steps[si].kernel < 0 && p->g->nodes[p->steps[si].node].op != TGC_OP_ASSIGN;
}

static int runs_native(const tgc_backend *b, const tgc_node *nd)
{
    return b->node_supported && b->node_supported(nd);
}

/* Why the node of an interp step has no kernel on its backend; NULL: no reason known. */
static const char *fallback_reason(const tgc_plan *p, int32_t node)
{
    return p->backend->opaque_reason ? p->backend->opaque_reason(p->g, node) : NULL;
}

int tgc_backend_describe_fallbacks(const tgc_backend *b, const void *artifact, tgc_strbuf *sb,
                                   const char *indent)
{
    const tgc_plan *p = artifact;
    if (b->graph || !p)
        return 0;
    int n = 0;
    for (int si = 0; si < p->n_steps; si++) {
        if (!opaque_step(p, si) || runs_native(b, &p->g->nodes[p->steps[si].node]))
            continue;
        const tgc_node *nd = &p->g->nodes[p->steps[si].node];
        tgc_sb_printf(sb, "%sstep %d: %s %s[", indent, si, tgc_op_name(nd->op),
                      tgc_dtype_name(nd->out.dtype));
        for (int d = 0; d < nd->out.ndim; d++) {
            char dim[64];
            tgc_sym_format(p->g->syms, nd->out.shape[d], dim, sizeof dim);
            tgc_sb_printf(sb, "%s%s", d ? ", " : "", dim);
        }
        const char *why = fallback_reason(p, p->steps[si].node);
        if (why)
            tgc_sb_printf(sb, "] on interp: %s\n", why);
        else
            tgc_sb_printf(sb, "] on interp: the %s backend has no kernel for it\n", b->name);
        n++;
    }
    return n;
}

int tgc_backend_describe_layout(const tgc_backend *b, const void *artifact, tgc_strbuf *sb,
                                const char *indent)
{
    const tgc_plan *p = artifact;
    if (b->graph || !p)
        return 0;
    const tgc_graph *g = p->g;
    uint8_t *act = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!act)
        return 0;
    int stored = 0, convs = 0, convs_cl = 0, grads = 0, grads_cl = 0;
    /* an NHWC copy holds an activation when something reads it other than as a conv's
     * weights (those get OHWI copies of the same form) */
    for (int32_t j = 0; j < g->n_nodes; j++) {
        const tgc_node *nd = &g->nodes[j];
        if (tgc_is_view_op(nd->op))
            continue;
        for (int k = 0; k < nd->n_in; k++) {
            const tgc_node *u = &g->nodes[nd->in[k]];
            int32_t src;
            if (u->op == TGC_OP_PERMUTE && tgc_nhwc_copy_of(g, u->in[0], &src) &&
                !(nd->op == TGC_OP_CONV2D && k == 1))
                act[u->in[0]] = 1;
        }
        int32_t base;
        if (nd->op == TGC_OP_CONV2D) {
            convs++;
            convs_cl += kir_is_channels_last_view(g, nd->in[0], &base);
        } else if (nd->op == TGC_OP_CONV2D_GRAD_INPUT || nd->op == TGC_OP_CONV2D_GRAD_WEIGHT) {
            /* a gradient reading its dy (and a weight gradient its x) channels-last */
            const int dyk = nd->op == TGC_OP_CONV2D_GRAD_WEIGHT;
            grads++;
            grads_cl += kir_is_channels_last_view(g, nd->in[dyk], &base) ||
                        (dyk && kir_is_channels_last_view(g, nd->in[0], &base));
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        stored += act[i];
    free(act);
    if (!convs_cl)
        stored = 0; /* a layout of the caller's own, no conv reading it */
    if (stored) {
        tgc_sb_printf(sb,
                      "%schannels-last: %d activation%s stored NHWC, %d of %d conv%s read NHWC "
                      "input in place",
                      indent, stored, stored == 1 ? "" : "s", convs_cl, convs,
                      convs == 1 ? "" : "s");
        if (grads_cl)
            tgc_sb_printf(sb, ", %d of %d conv gradients read NHWC operands", grads_cl, grads);
        tgc_sb_puts(sb, "\n");
    }
    return stored;
}

/* One perf line per op the backend hands to interp (or runs unfused on its own kernel) in
 * this variant. */
static void log_fallbacks(const tgc_plan *p, const tgc_config *cfg, const char *name)
{
    if (!(cfg->log & TGC_LOG_PERF))
        return;
    const tgc_backend *b = p->backend;
    for (int si = 0; si < p->n_steps; si++) {
        if (!opaque_step(p, si))
            continue;
        const tgc_node *nd = &p->g->nodes[p->steps[si].node];
        int native = runs_native(b, nd);
        int first = 1, count = 0;
        for (int j = 0; j < p->n_steps; j++) {
            const tgc_node *o = &p->g->nodes[p->steps[j].node];
            if (opaque_step(p, j) && o->op == nd->op && runs_native(b, o) == native) {
                first &= j >= si;
                count++;
            }
        }
        if (!first)
            continue;
        const char *why = fallback_reason(p, p->steps[si].node);
        if (native)
            tgc_log_msg(cfg, TGC_LOG_PERF,
                        "tgc: '%s' runs %s through the %s backend's own kernel, unfused (%d "
                        "node%s)",
                        name, tgc_op_name(nd->op), b->name, count, count == 1 ? "" : "s");
        else
            tgc_log_msg(cfg, TGC_LOG_PERF,
                        "tgc: '%s' runs %s on interp (%d node%s): the %s backend has no "
                        "kernel for it%s%s%s%s",
                        name, tgc_op_name(nd->op), count, count == 1 ? "" : "s", b->name,
                        why ? " (" : "", why ? why : "", why ? ")" : "",
                        p->device.type == TGC_DEVICE_CPU ? "" : "; its data is staged to the host");
    }
}

/* Lowers every LOOP / TEMPLATE group to a kernel and orders the steps. */
static tgc_status lower_groups(tgc_plan *p, const tgc_fusion *fu, const uint8_t *mat,
                               const tgc_config *cfg, const char *name)
{
    size_t ng = (size_t)(fu->n_groups ? fu->n_groups : 1);
    p->steps = calloc(ng, sizeof *p->steps);
    p->kernels = calloc(ng, sizeof *p->kernels);
    if (!p->steps || !p->kernels)
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling '%s'", name);
    int want_text = cfg->dump_dir || (cfg->log & TGC_LOG_KERNELS);
    tgc_strbuf kir_text = {0};
    tgc_status st = TGC_OK;
    for (int gi = 0; gi < fu->n_groups && st == TGC_OK; gi++) {
        const tgc_group *gr = &fu->groups[gi];
        tgc_step *s = &p->steps[p->n_steps];
        if (gr->kind == TGC_GROUP_OPAQUE) {
            s->kernel = -1;
            s->node = gr->anchor;
            p->n_steps++;
            continue;
        }
        kir_kernel *k = NULL;
        st = kir_lower_group(p->g, fu, gi, mat, p->backend->target(), &k);
        if (st != TGC_OK || !k)
            break;
        if (k->n_stores == 0 && k->n_rands == 0 && k->kind == KIR_LOOP) {
            /* nothing read outside: dead after fusion (a dead draw still runs: it advances
             * the stream) */
            kir_kernel_free(k);
            continue;
        }
        tgc_plan_kernel *pk = &p->kernels[p->n_kernels];
        pk->k = k;
        snprintf(pk->name, sizeof pk->name, "k%d", gi);
        s->kernel = p->n_kernels++;
        s->node = -1;
        p->n_steps++;
        st = kir_args_collect(k, &pk->slots);
        if (want_text) {
            char *t = kir_kernel_to_text(k, p->g->syms);
            if (t)
                tgc_sb_puts(&kir_text, t);
            free(t);
        }
    }
    char *kt = tgc_sb_take(&kir_text);
    if (kt && (cfg->log & TGC_LOG_KERNELS))
        tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc: kernels of '%s':\n%s", name, kt);
    tgc_backend_dump_text(cfg, name, "kir.txt", kt);
    free(kt);
    return st;
}

/* The steps' buffer uses for the planner: a kernel reads and writes its buffers, an opaque
 * step reads its node's inputs and writes the node. Only kernel outputs go to the arena. */
static tgc_status plan_memory(tgc_plan *p, const uint8_t *mat)
{
    int n_uses = 0;
    for (int si = 0; si < p->n_steps; si++)
        n_uses += p->steps[si].kernel >= 0 ? p->kernels[p->steps[si].kernel].k->n_bufs
                                           : 1 + p->g->nodes[p->steps[si].node].n_in;
    int32_t *start = malloc((size_t)(p->n_steps + 1) * sizeof *start);
    tgc_mem_use *uses = malloc((size_t)(n_uses ? n_uses : 1) * sizeof *uses);
    uint8_t *slotted = malloc((size_t)(p->n_steps ? p->n_steps : 1));
    tgc_status st = TGC_OK;
    if (!start || !uses || !slotted)
        st = tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
    int32_t u = 0;
    for (int si = 0; si < p->n_steps && st == TGC_OK; si++) {
        start[si] = u;
        const tgc_step *s = &p->steps[si];
        slotted[si] = s->kernel >= 0;
        if (s->kernel >= 0) {
            /* a batch's uses are all at its first kernel's step, where it launches; its other
             * kernels' steps use nothing */
            const tgc_plan_kernel *pk = &p->kernels[s->kernel];
            for (int j = 0; j < pk->batch; j++) {
                const kir_kernel *k = pk[j].k;
                for (int b = 0; b < k->n_bufs; b++)
                    uses[u++] = (tgc_mem_use){k->bufs[b].value, (uint8_t)(k->bufs[b].written != 0)};
            }
        } else {
            const tgc_node *nd = &p->g->nodes[s->node];
            for (int i = 0; i < nd->n_in; i++)
                uses[u++] = (tgc_mem_use){nd->in[i], 0};
            uses[u++] = (tgc_mem_use){s->node, 1};
        }
    }
    if (st == TGC_OK) {
        start[p->n_steps] = u;
        tgc_mem_steps ms = {p->n_steps, start, uses};
        st = tgc_memplan_build(p->g, &ms, TGC_MEMPLAN_VIEWS_ALIAS | TGC_MEMPLAN_SLOTS, mat, slotted,
                               &p->mem);
    }
    free(start);
    free(uses);
    free(slotted);
    return st;
}

/* The INPUT value v reads (through views), or -1. */
static int32_t input_root(const tgc_graph *g, int32_t v)
{
    while (v >= 0 && tgc_is_view_op(g->nodes[v].op))
        v = g->nodes[v].in[0];
    return v >= 0 && g->nodes[v].op == TGC_OP_INPUT ? v : -1;
}

static int same_access(const kir_kernel *k, const kir_access *a, const kir_access *b)
{
    if (a->off != b->off)
        return 0;
    for (int d = 0; d < k->n_outer + k->n_inner; d++)
        if (a->stride[d] != b->stride[d])
            return 0;
    return 1;
}

/* Store forwarding for ASSIGN(dst, v): the kernel that computes v writes it straight into
 * dst's buffer, when that cannot change what any step reads:
 *   - v is a buffer of a one-phase LOOP kernel without reductions that stores it once (a
 *     phase or a row store), and v
 *     is no graph output (an output must not alias module state);
 *   - dst is written by this ASSIGN only, and is no graph output;
 *   - that kernel reads dst (if at all) only at the element it stores v to (same access: a
 *     pointwise update such as p - lr * g), and no later step but the ASSIGN reads dst or a
 *     view of it (they would see the new contents early).
 * An optimizer's update then costs one kernel per parameter, reading and writing in place. */
static tgc_status forward_writes(tgc_plan *p)
{
    const tgc_graph *g = p->g;
    int32_t *kernel_step = malloc((size_t)(p->n_kernels ? p->n_kernels : 1) * sizeof(int32_t));
    int32_t *wt = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof(int32_t));
    int32_t *writers = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(int32_t));
    uint8_t *is_out = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!kernel_step || !wt || !writers || !is_out) {
        free(kernel_step);
        free(wt);
        free(writers);
        free(is_out);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning buffers");
    }
    int any = 0;
    for (int32_t v = 0; v < g->n_nodes; v++)
        wt[v] = -1;
    for (int i = 0; i < g->n_outputs; i++)
        is_out[g->outputs[i]] = 1;
    for (int si = 0; si < p->n_steps; si++)
        if (p->steps[si].kernel >= 0)
            kernel_step[p->steps[si].kernel] = si;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++)
            if (tgc_op_writes_operand(nd->op, &nd->attrs, k)) {
                int32_t r = input_root(g, nd->in[k]);
                if (r >= 0)
                    writers[r]++;
            }
    }
    for (int si = 0; si < p->n_steps; si++) {
        const tgc_step *s = &p->steps[si];
        if (s->kernel >= 0 || g->nodes[s->node].op != TGC_OP_ASSIGN)
            continue;
        const tgc_node *as = &g->nodes[s->node];
        int32_t dst = as->in[0], v = as->in[1];
        if (g->nodes[dst].op != TGC_OP_INPUT || writers[dst] != 1 || is_out[dst] || is_out[v] ||
            wt[v] >= 0)
            continue;
        /* the kernel writing v */
        int kk = -1;
        for (int k = 0; k < p->n_kernels && kk < 0; k++)
            for (int b = 0; b < p->kernels[k].k->n_bufs; b++)
                if (p->kernels[k].k->bufs[b].value == v && p->kernels[k].k->bufs[b].written)
                    kk = k;
        const kir_kernel *k = kk >= 0 ? p->kernels[kk].k : NULL;
        if (!k || k->kind != KIR_LOOP || k->n_reduces || k->n_phases > 1 || kernel_step[kk] > si)
            continue;
        int vb = -1, db = -1, ok = 1, stores = 0;
        for (int b = 0; b < k->n_bufs; b++) {
            if (k->bufs[b].value == v)
                vb = b;
            if (k->bufs[b].value == dst)
                db = b;
        }
        const kir_store *st = NULL;
        for (int j = 0; j < k->n_stores; j++)
            if (k->stores[j].at.buf == vb) {
                st = &k->stores[j];
                stores++;
            }
        /* one store of v: a phase store, or a row store (once per outer iteration: the flat
         * pointwise kernels of a device target have no inner dims), no reduction anywhere */
        ok = st && stores == 1 && k->bufs[vb].dtype == g->nodes[dst].out.dtype;
        for (int j = 0; ok && db >= 0 && j < k->n_loads; j++)
            if (k->loads[j].at.buf == db)
                ok = k->loads[j].n_guards == 0 && same_access(k, &k->loads[j].at, &st->at);
        if (db >= 0 && k->bufs[db].written)
            ok = 0;
        /* no later step reads dst's old contents */
        for (int sj = kernel_step[kk] + 1; ok && sj < p->n_steps; sj++) {
            const tgc_step *t = &p->steps[sj];
            if (sj == si)
                continue;
            if (t->kernel >= 0) {
                const kir_kernel *tk = p->kernels[t->kernel].k;
                for (int b = 0; ok && b < tk->n_bufs; b++)
                    ok = input_root(g, tk->bufs[b].value) != dst;
            } else {
                const tgc_node *tn = &g->nodes[t->node];
                for (int q = 0; ok && q < tn->n_in; q++)
                    ok = input_root(g, tn->in[q]) != dst;
            }
        }
        if (ok) {
            wt[v] = dst;
            any = 1;
        }
    }
    free(kernel_step);
    free(writers);
    free(is_out);
    if (any)
        p->write_to = wt;
    else
        free(wt);
    return TGC_OK;
}

static int writes_inputs(const tgc_graph *g)
{
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].flags & TGC_NODE_MUTATES)
            return 1;
    return 0;
}

/* The graph's constants (folded values, the constants decompositions make) are host
 * tensors; kernels read them where the plan runs, so on a device they move there once, at
 * compile time. */
static tgc_status consts_to_device(tgc_graph *g, tgc_device dev, const char *name)
{
    if (dev.type == TGC_DEVICE_CPU)
        return TGC_OK;
    for (int k = 0; k < g->n_consts; k++) {
        tgc_tensor *t = g->consts[k];
        if (!t || (t->device.type == dev.type && t->device.index == dev.index))
            continue;
        tgc_tensor *d = tgc_tensor_copy_to(name, t, dev);
        if (!d)
            return tgc_last_status();
        tgc_scope_release(d); /* the graph holds it, as it held t */
        tgc_tensor_unref(t);
        g->consts[k] = d;
    }
    return TGC_OK;
}

tgc_status tgc_plan_compile(const tgc_backend *b, const tgc_graph *src, const tgc_config *cfg,
                            tgc_device dev, const char *name, tgc_plan **out)
{
    tgc_plan *p = calloc(1, sizeof *p);
    if (!p)
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory compiling '%s'", name);
    tgc_plan_streams_init(p);
    p->backend = b;
    p->device = (tgc_device){b->device, dev.type == b->device ? dev.index : 0};
    p->n_threads = tgc_threads_resolve(cfg->num_threads);
    p->stream = tgc_backend_config_stream(b, cfg);
    p->log_fn = cfg->log_fn;
    p->log_user = cfg->log_user;
    p->g = tgc_graph_clone(src);
    tgc_status st = p->g ? TGC_OK : TGC_ERR_OOM;
    if (st == TGC_OK)
        st = tgc_passes_run_opts(p->g, cfg, name, b->decompose_keep, tgc_interp_eval_contiguous);
    if (st == TGC_OK && b->prepare)
        st = b->prepare(p->g);
    if (st == TGC_OK)
        st = consts_to_device(p->g, p->device, name);
    tgc_fusion fu = {0};
    uint8_t *mat = NULL;
    if (st == TGC_OK)
        st = tgc_pass_fuse(p->g, b->fuse, &fu);
    if (st == TGC_OK)
        log_graph(p, &fu, cfg, name);
    if (st == TGC_OK && !(mat = kir_materialized(p->g, &fu)))
        st = TGC_ERR_OOM;
    if (st == TGC_OK)
        st = lower_groups(p, &fu, mat, cfg, name);
    if (st == TGC_OK && writes_inputs(p->g) && !(p->mutated = tgc_pass_mutated_values(p->g)))
        st = tgc_last_status();
    if (st == TGC_OK && p->mutated)
        st = forward_writes(p);
    if (st == TGC_OK)
        st = tgc_plan_kept_find(p, mat);
    if (st == TGC_OK)
        st = tgc_plan_batches(p, cfg, name);
    if (st == TGC_OK)
        st = b->compile(cfg, p->device, name, p->g, p->kernels, p->n_kernels, &p->code);
    if (st == TGC_OK)
        st = plan_memory(p, mat);
    free(mat);
    tgc_fusion_free(&fu);
    if (st != TGC_OK) {
        tgc_plan_free(p);
        return st == TGC_ERR_OOM && !tgc_last_error()[0]
                   ? tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", b->name)
                   : tgc_keep_error(st, "tgc %s: compiling '%s' failed", b->name, name);
    }
    log_fallbacks(p, cfg, name);
    if ((cfg->mode == TGC_MODE_REDUCE_OVERHEAD || cfg->mode == TGC_MODE_MAX_AUTOTUNE) && b->capture)
        p->replay = tgc_replay_new(p, cfg, name); /* NULL: kernel by kernel (it said why) */
    *out = p;
    return TGC_OK;
}

tgc_status tgc_backend_compile(const tgc_backend *b, const tgc_graph *g, const tgc_config *cfg,
                               tgc_device dev, const char *name, void **artifact)
{
    if (!name)
        name = "graph";
    if (b->graph)
        return b->graph->compile(g, cfg, name, artifact);
    tgc_plan *p = NULL;
    tgc_status st = tgc_plan_compile(b, g, cfg, dev, name, &p);
    *artifact = p;
    return st;
}

int tgc_backend_kernel_count(const tgc_backend *b, const void *artifact)
{
    return b->graph ? b->graph->kernel_count(artifact) : ((const tgc_plan *)artifact)->n_kernels;
}

int tgc_backend_batched(const tgc_backend *b, const void *artifact, int *n_launches)
{
    *n_launches = 0;
    return b->graph || !artifact ? 0 : tgc_plan_batched(artifact, n_launches);
}

int tgc_backend_kept_steps(const tgc_backend *b, const void *artifact, int *n_values)
{
    const tgc_plan *p = artifact;
    *n_values = b->graph || !p ? 0 : p->kept.n_values;
    return b->graph || !p ? 0 : p->kept.n_steps;
}

size_t tgc_backend_arena_bytes(const tgc_backend *b, void *artifact)
{
    if (b->graph)
        return 0;
    return tgc_plan_arena_bytes(artifact);
}

void tgc_backend_release(const tgc_backend *b, void *artifact)
{
    if (b->graph)
        b->graph->release(artifact);
    else
        tgc_plan_free(artifact);
}
