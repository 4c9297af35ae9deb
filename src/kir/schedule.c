/* Schedules of LOOP kernels from a backend's target (see schedule.h). */
#include "kir/schedule.h"

#include "kir/kir.h"
#include "tensor/dtype.h"

int kir_target_has_template(const kir_target *t, kir_tpl_kind tpl, tgc_dtype dt)
{
    return t && (unsigned)tpl < KIR_TPL_COUNT && (unsigned)dt < TGC_DTYPE_COUNT &&
           ((t->template_dtypes[tpl] >> dt) & 1u);
}

const char *kir_axis_role_name(kir_axis_role r)
{
    static const char *const names[] = {"grid", "block", "serial", "vector"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

/* The dtype a reduction accumulates in (double sums of floats, i64 for integers). */
static tgc_dtype acc_dtype(const kir_kernel *k, const kir_reduce *r)
{
    tgc_dtype in = k->vals[r->val].dtype;
    if (tgc_dtype_is_float(in))
        return r->comb == KR_SUM ? TGC_F64 : in;
    return TGC_I64;
}

static int lanes_of(const kir_target *t, tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT && t->lanes[dt] > 0 ? t->lanes[dt] : 1;
}

/* The narrowest width over the kernel's values and accumulators (see kir_target.lanes). */
static int vector_lanes(const kir_kernel *k, const kir_target *t)
{
    int lanes = 0;
    for (int i = 0; i < k->n_vals; i++) {
        int l = lanes_of(t, k->vals[i].dtype);
        if (!lanes || l < lanes)
            lanes = l;
    }
    for (int i = 0; i < k->n_reduces; i++) {
        int l = lanes_of(t, acc_dtype(k, &k->reduces[i]));
        if (!lanes || l < lanes)
            lanes = l;
    }
    if (!lanes)
        lanes = lanes_of(t, TGC_F32);
    if (k->n_reduces && t->reduce_lanes > lanes)
        lanes = t->reduce_lanes;
    return lanes < t->min_lanes ? t->min_lanes : lanes;
}

void kir_schedule_kernel(kir_kernel *k, const kir_target *t)
{
    kir_schedule *s = &k->sched;
    int n = k->n_outer + k->n_inner, last = n - 1;
    s->vec_axis = -1;
    s->lanes = 1;
    s->split_axis = -1;
    s->split = 0;
    s->block_threads = t->has_grid ? t->block_threads : 0;
    for (int d = 0; d < n; d++)
        s->role[d] = d < k->n_outer ? KIR_AXIS_GRID
                     : t->has_grid  ? KIR_AXIS_BLOCK
                                    : KIR_AXIS_SERIAL;
    /* a flat pointwise domain has no outer axis to spread: its one axis is strip-mined
     * into grid rows (a domain with reductions keeps its row whole) */
    if (t->flat_split > 0 && k->n_outer == 0 && k->n_inner == 1 && k->n_reduces == 0) {
        s->split_axis = 0;
        s->split = t->flat_split;
    }
    if (t->has_grid)
        return;
    int lanes = vector_lanes(k, t);
    if (lanes > 1 && last >= k->n_outer) {
        s->role[last] = KIR_AXIS_VECTOR;
        s->vec_axis = last;
        s->lanes = lanes;
    }
}
