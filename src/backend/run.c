/* Running a variant (tgc_backend_run, backend.h): a backend that runs graphs itself (interp)
 * runs it; a compiled backend's plan is served by a recording of REDUCE_OVERHEAD when one
 * applies (replay.c), else by the executor's steps (exec.c). Above both: the replay records
 * through the executor, and neither calls back here. */
#include "backend/plan.h"

tgc_status tgc_plan_run(tgc_plan *p, const tgc_exec_args *x, tgc_tensor **outs)
{
    const tgc_backend *b = p->backend;
    void *prev = p->stream && b->use_stream ? b->use_stream(p->device, p->stream) : NULL;
    int done = 0;
    tgc_status st = p->replay ? tgc_replay_run(p, x, outs, &done) : TGC_OK;
    if (!done)
        st = tgc_plan_run_steps(p, x, outs, 0, NULL);
    if (p->stream && b->use_stream)
        b->use_stream(p->device, prev);
    return st;
}

tgc_status tgc_backend_run(const tgc_backend *b, void *artifact, const tgc_graph *g,
                           const tgc_exec_args *x, tgc_tensor **outs)
{
    if (b->graph)
        return b->graph->run(artifact, g, x, outs);
    return tgc_plan_run(artifact, x, outs);
}
