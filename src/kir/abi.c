/* Size slots of a kernel (kir/abi.h). */
#include <stdlib.h>
#include <string.h>

#include "kir/abi.h"
#include "support/error.h"

int kir_args_slot(const kir_args *a, tgc_sdim d)
{
    for (int i = 0; i < a->n; i++)
        if (a->dims[i] == d)
            return i;
    return -1;
}

static int slot_add(kir_args *a, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d) || kir_args_slot(a, d) >= 0)
        return 1;
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 16;
        tgc_sdim *p = realloc(a->dims, (size_t)nc * sizeof *p);
        if (!p)
            return 0;
        a->dims = p;
        a->cap = nc;
    }
    a->dims[a->n++] = d;
    return 1;
}

void kir_args_free(kir_args *a)
{
    free(a->dims);
    memset(a, 0, sizeof *a);
}

static int collect_access(kir_args *a, const kir_kernel *k, const kir_access *ac)
{
    int ok = slot_add(a, ac->off);
    for (int d = 0; d < kir_domain_dims(k); d++)
        ok &= slot_add(a, ac->stride[d]);
    return ok;
}

tgc_status kir_args_collect(const kir_kernel *k, kir_args *a)
{
    int ok = 1;
    if (k->kind == KIR_LOOP)
        for (int d = 0; d < k->n_outer + k->n_inner; d++)
            ok &= slot_add(a, k->extent[d]);
    for (int i = 0; i < k->n_loads; i++) {
        ok &= collect_access(a, k, &k->loads[i].at);
        for (int g = 0; g < k->loads[i].n_guards; g++) {
            ok &= collect_access(a, k, &k->loads[i].guard[g]);
            ok &= slot_add(a, k->loads[i].bound[g]);
        }
    }
    for (int i = 0; i < k->n_stores; i++)
        ok &= collect_access(a, k, &k->stores[i].at);
    for (int i = 0; i < k->n_rands; i++)
        ok &= collect_access(a, k, &k->rands[i].at);
    for (int i = 0; i < k->n_iotas; i++)
        ok &= collect_access(a, k, &k->iotas[i]);
    for (int i = 0; i < k->n_vals; i++)
        if (k->vals[i].kind == KV_SIZE)
            ok &= slot_add(a, k->vals[i].sdim);
    a->n_rands = k->n_rands;
    return ok ? TGC_OK
              : tgc_set_error(TGC_ERR_OOM, "tgc: out of memory collecting a kernel's sizes");
}

int kir_args_rand_word(const kir_args *a, int r)
{
    return a->n + 2 * r;
}

int kir_args_words(const kir_args *a)
{
    return a->n + 2 * a->n_rands;
}
