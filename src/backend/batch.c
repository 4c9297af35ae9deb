/* Batched launches: which kernels of a plan launch together (plan.h, tgc_plan_batches).
 *
 * A run of a plan's steps that holds LOOP kernels none of which reads or writes what another
 * writes, with nothing between them but forwarded ASSIGN steps (which copy nothing: the
 * kernel stored straight into the input, driver.c's forward_writes), can run as one launch
 * where the backend says it can (backend.h: batch_fits, launch_batch). An optimizer's step
 * is such a run: one update kernel per parameter, each reading its gradient and state and
 * writing them in place. The executor launches the batch at its first kernel's step; the
 * memory plan counts every use of the batch at that step, so no buffer of one member shares
 * an arena slot with a buffer of another.
 *
 * Buffers are compared by what they are at run time: a view by the value it views, a value
 * stored into an input (write_to) by that input. Distinct inputs may still be one storage at
 * run time (a caller passing one tensor twice); the executor checks that per call and then
 * launches the members one by one (exec.c). A batch never straddles the kept steps'
 * boundary, which calls skip (kept.c). */
#include <stdio.h>
#include <stdlib.h>

#include "backend/plan.h"
#include "ir/view_access.h"
#include "support/error.h"
#include "support/log.h"
#include "support/strbuf.h"

enum { MARK_READ = 1, MARK_WRITTEN = 2 };

int32_t tgc_plan_root(const tgc_plan *p, int32_t v)
{
    while (tgc_is_view_op(p->g->nodes[v].op))
        v = p->g->nodes[v].in[0];
    return p->write_to && p->write_to[v] >= 0 ? p->write_to[v] : v;
}

/* An ASSIGN step that copies nothing at run time (its source was stored into its target). */
static int forwarded_assign(const tgc_plan *p, int si)
{
    const tgc_step *s = &p->steps[si];
    if (s->kernel >= 0)
        return 0;
    const tgc_node *nd = &p->g->nodes[s->node];
    return nd->op == TGC_OP_ASSIGN && p->write_to && p->write_to[nd->in[1]] == nd->in[0];
}

/* 1 when kernel k touches nothing the batch writes and writes nothing the batch touches. */
static int independent(const tgc_plan *p, const kir_kernel *k, const uint8_t *mark)
{
    for (int b = 0; b < k->n_bufs; b++) {
        uint8_t m = mark[tgc_plan_root(p, k->bufs[b].value)];
        if (k->bufs[b].written ? m != 0 : (m & MARK_WRITTEN) != 0)
            return 0;
    }
    return 1;
}

static void add_marks(const tgc_plan *p, const kir_kernel *k, uint8_t *mark, int32_t *touched,
                      int *n_touched)
{
    for (int b = 0; b < k->n_bufs; b++) {
        int32_t r = tgc_plan_root(p, k->bufs[b].value);
        if (!mark[r])
            touched[(*n_touched)++] = r;
        mark[r] |= k->bufs[b].written ? MARK_WRITTEN : MARK_READ;
    }
}

static void log_batch(const tgc_plan *p, const tgc_config *cfg, const char *name, int head, int n)
{
    if (!(cfg->log & TGC_LOG_KERNELS))
        return;
    tgc_log_msg(cfg, TGC_LOG_KERNELS,
                "tgc: kernels %s..%s of '%s' launch as one (%d loop kernels independent of "
                "each other)",
                p->kernels[head].name, p->kernels[head + n - 1].name, name, n);
}

tgc_status tgc_plan_batches(tgc_plan *p, const tgc_config *cfg, const char *name)
{
    for (int i = 0; i < p->n_kernels; i++)
        p->kernels[i].batch = 1;
    const tgc_backend *b = p->backend;
    if (!b->batch_fits || !b->launch_batch || p->n_kernels < 2)
        return TGC_OK;
    size_t nv = (size_t)(p->g->n_nodes ? p->g->n_nodes : 1);
    uint8_t *mark = calloc(nv, 1);
    int32_t *touched = malloc(nv * sizeof *touched);
    if (!mark || !touched) {
        free(mark);
        free(touched);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory planning launches");
    }
    for (int si = 0; si < p->n_steps; si++) {
        const tgc_step *s = &p->steps[si];
        if (s->kernel < 0 || p->kernels[s->kernel].k->kind != KIR_LOOP ||
            !b->batch_fits(&p->kernels[s->kernel], 1))
            continue;
        int head = s->kernel, n = 1, n_touched = 0, last = si;
        int kept = si < p->kept.n_steps;
        add_marks(p, p->kernels[head].k, mark, touched, &n_touched);
        for (int sj = si + 1; sj < p->n_steps; sj++) {
            const tgc_step *t = &p->steps[sj];
            if (forwarded_assign(p, sj))
                continue;
            if (t->kernel < 0 || (sj < p->kept.n_steps) != kept || t->kernel != head + n)
                break;
            const kir_kernel *k = p->kernels[t->kernel].k;
            if (k->kind != KIR_LOOP || !independent(p, k, mark) ||
                !b->batch_fits(&p->kernels[head], n + 1))
                break;
            add_marks(p, k, mark, touched, &n_touched);
            n++;
            last = sj;
        }
        for (int i = 0; i < n_touched; i++)
            mark[touched[i]] = 0;
        if (n < 2)
            continue;
        p->kernels[head].batch = n;
        for (int i = 1; i < n; i++)
            p->kernels[head + i].batch = 0;
        log_batch(p, cfg, name, head, n);
        si = last;
    }
    free(mark);
    free(touched);
    return TGC_OK;
}

int tgc_plan_batched(const tgc_plan *p, int *n_launches)
{
    int kernels = 0, launches = 0;
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].batch > 1) {
            kernels += p->kernels[i].batch;
            launches++;
        }
    *n_launches = launches;
    return kernels;
}
