/* Kernel IR construction and its text form. */
#include <stdlib.h>
#include <string.h>

#include "kir/kir.h"
#include "support/strbuf.h"

kir_kernel *kir_kernel_new(kir_kind kind)
{
    kir_kernel *k = calloc(1, sizeof *k);
    if (!k) {
        tgc_set_error(TGC_ERR_OOM, "tgc: out of memory building a kernel");
        return NULL;
    }
    k->kind = kind;
    k->result = -1;
    /* no schedule yet (templates never get one: the template decides its own loops) */
    k->sched.vec_axis = -1;
    k->sched.split_axis = -1;
    k->sched.lanes = 1;
    return k;
}

void kir_kernel_free(kir_kernel *k)
{
    if (!k)
        return;
    free(k->vals);
    free(k->loads);
    free(k->reduces);
    free(k->stores);
    free(k->bufs);
    free(k->rands);
    free(k->iotas);
    free(k);
}

static int32_t push(void **arr, int *n, int *cap, size_t elem, const void *item)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        void *p = realloc(*arr, (size_t)nc * elem);
        if (!p) {
            tgc_set_error(TGC_ERR_OOM, "tgc: out of memory building a kernel");
            return -1;
        }
        *arr = p;
        *cap = nc;
    }
    memcpy((char *)*arr + (size_t)*n * elem, item, elem);
    return (*n)++;
}

int32_t kir_add_val(kir_kernel *k, const kir_val *v)
{
    return push((void **)&k->vals, &k->n_vals, &k->cap_vals, sizeof *v, v);
}

int32_t kir_add_load(kir_kernel *k, const kir_load *l)
{
    return push((void **)&k->loads, &k->n_loads, &k->cap_loads, sizeof *l, l);
}

int32_t kir_add_load_val(kir_kernel *k, const kir_load *l)
{
    int32_t li = kir_add_load(k, l);
    kir_val v = {.kind = KV_LOAD, .dtype = l->dtype, .index = li};
    return li < 0 ? -1 : kir_add_val(k, &v);
}

int32_t kir_add_reduce(kir_kernel *k, const kir_reduce *r)
{
    return push((void **)&k->reduces, &k->n_reduces, &k->cap_reduces, sizeof *r, r);
}

int32_t kir_add_store(kir_kernel *k, const kir_store *s)
{
    return push((void **)&k->stores, &k->n_stores, &k->cap_stores, sizeof *s, s);
}

int32_t kir_add_rand(kir_kernel *k, const kir_rand *r)
{
    return push((void **)&k->rands, &k->n_rands, &k->cap_rands, sizeof *r, r);
}

int32_t kir_add_index_val(kir_kernel *k, const kir_access *at)
{
    int32_t ii = push((void **)&k->iotas, &k->n_iotas, &k->cap_iotas, sizeof *at, at);
    kir_val v = {.kind = KV_INDEX, .dtype = TGC_I64, .index = ii};
    return ii < 0 ? -1 : kir_add_val(k, &v);
}

int32_t kir_buf_of(kir_kernel *k, int32_t value, tgc_dtype dt, int written)
{
    for (int i = 0; i < k->n_bufs; i++)
        if (k->bufs[i].value == value) {
            k->bufs[i].written |= written;
            return i;
        }
    kir_buf b = {value, dt, written};
    return push((void **)&k->bufs, &k->n_bufs, &k->cap_bufs, sizeof b, &b);
}

int kir_domain_dims(const kir_kernel *k)
{
    return k->kind == KIR_LOOP ? k->n_outer + k->n_inner : 3;
}

static void put_dim(tgc_strbuf *sb, const tgc_symtab *syms, tgc_sdim d)
{
    char buf[128];
    tgc_sym_format(syms, d, buf, sizeof buf);
    tgc_sb_puts(sb, buf);
}

/* off + stride*i... of an access */
static void put_index(tgc_strbuf *sb, const kir_kernel *k, const tgc_symtab *syms,
                      const kir_access *a)
{
    put_dim(sb, syms, a->off);
    for (int d = 0; d < kir_domain_dims(k); d++) {
        if (TGC_SDIM_IS_CONST(a->stride[d]) && a->stride[d] == 0)
            continue;
        tgc_sb_puts(sb, " + ");
        put_dim(sb, syms, a->stride[d]);
        tgc_sb_printf(sb, "*i%d", d);
    }
}

static void put_access(tgc_strbuf *sb, const kir_kernel *k, const tgc_symtab *syms,
                       const kir_access *a)
{
    tgc_sb_printf(sb, "buf%d[", a->buf);
    put_index(sb, k, syms, a);
    tgc_sb_puts(sb, "]");
}

static const char *const comb_names[] = {"sum", "max", "min"};
static const char *const dist_names[] = {"uniform", "uniform24", "normal"};

static void put_schedule(tgc_strbuf *sb, const kir_kernel *k)
{
    const kir_schedule *s = &k->sched;
    tgc_sb_puts(sb, "  schedule [");
    for (int d = 0; d < k->n_outer + k->n_inner; d++) {
        tgc_sb_printf(sb, "%s%s", d ? ", " : "", kir_axis_role_name(s->role[d]));
        if (s->role[d] == KIR_AXIS_VECTOR)
            tgc_sb_printf(sb, " x%d", s->lanes);
        if (s->role[d] == KIR_AXIS_BLOCK)
            tgc_sb_printf(sb, " x%d", s->block_threads);
    }
    tgc_sb_puts(sb, "]");
    if (s->split_axis >= 0)
        tgc_sb_printf(sb, " split i%d by %lld", s->split_axis, (long long)s->split);
    tgc_sb_puts(sb, "\n");
}

char *kir_kernel_to_text(const kir_kernel *k, const tgc_symtab *syms)
{
    tgc_strbuf sb = {0};
    static const char *const kinds[] = {"loop", "gemm", "conv"};
    tgc_sb_printf(&sb, "kernel k%d (%s)", k->id, kinds[k->kind]);
    if (k->kind == KIR_LOOP) {
        tgc_sb_puts(&sb, " outer [");
        for (int d = 0; d < k->n_outer + k->n_inner; d++) {
            if (d == k->n_outer)
                tgc_sb_puts(&sb, "] inner [");
            else if (d)
                tgc_sb_puts(&sb, ", ");
            put_dim(&sb, syms, k->extent[d]);
        }
        tgc_sb_printf(&sb, "] phases %d\n", k->n_phases);
        put_schedule(&sb, k);
    } else {
        tgc_sb_printf(&sb, " %s batch ", tgc_op_name(k->tpl.op));
        put_dim(&sb, syms, k->tpl.batch);
        tgc_sb_puts(&sb, " M ");
        put_dim(&sb, syms, k->tpl.M);
        tgc_sb_puts(&sb, " N ");
        put_dim(&sb, syms, k->tpl.N);
        tgc_sb_puts(&sb, " K ");
        put_dim(&sb, syms, k->tpl.K);
        tgc_sb_printf(&sb, " a=buf%d b=buf%d out=buf%d %s%s%s\n", k->tpl.a, k->tpl.b, k->tpl.out,
                      tgc_dtype_name(k->tpl.dtype), k->tpl.cl ? " reads NHWC" : "",
                      k->tpl.out_cl ? " stores NHWC" : "");
    }
    for (int i = 0; i < k->n_bufs; i++)
        tgc_sb_printf(&sb, "  buf%d = %%%d %s%s\n", i, k->bufs[i].value,
                      tgc_dtype_name(k->bufs[i].dtype), k->bufs[i].written ? " (written)" : "");
    for (int i = 0; i < k->n_vals; i++) {
        const kir_val *v = &k->vals[i];
        tgc_sb_printf(&sb, "  v%d = ", i);
        switch (v->kind) {
        case KV_LOAD: {
            const kir_load *ld = &k->loads[v->index];
            tgc_sb_puts(&sb, "load ");
            put_access(&sb, k, syms, &ld->at);
            for (int g = 0; g < ld->n_guards; g++) {
                tgc_sb_puts(&sb, g ? " and " : " if ");
                put_access(&sb, k, syms, &ld->guard[g]);
                tgc_sb_puts(&sb, " < ");
                put_dim(&sb, syms, ld->bound[g]);
            }
            if (ld->n_guards)
                tgc_sb_printf(&sb, " else %g", ld->fill);
            break;
        }
        case KV_CONST: tgc_sb_printf(&sb, "const %g", v->cval); break;
        case KV_ACC: tgc_sb_printf(&sb, "acc%d", v->index); break;
        case KV_SIZE:
            tgc_sb_puts(&sb, "size ");
            put_dim(&sb, syms, v->sdim);
            break;
        case KV_RAND: {
            const kir_rand *r = &k->rands[v->index];
            tgc_sb_printf(&sb, "philox %s(seed%d, base%d + ", dist_names[v->dist], v->index,
                          v->index);
            put_index(&sb, k, syms, &r->at);
            tgc_sb_printf(&sb, ") of %%%d", r->node);
            break;
        }
        case KV_INDEX:
            tgc_sb_puts(&sb, "index ");
            put_index(&sb, k, syms, &k->iotas[v->index]);
            break;
        case KV_OP:
            tgc_sb_printf(&sb, "%s(", tgc_op_name(v->op));
            for (int j = 0; j < v->n_in; j++)
                tgc_sb_printf(&sb, "%sv%d", j ? ", " : "", v->in[j]);
            tgc_sb_puts(&sb, ")");
            if (tgc_op_info_of(v->op)->kind == TGC_KIND_SCALAR)
                tgc_sb_printf(&sb, " {%g, %g}", v->f[0], v->f[1]);
            break;
        }
        tgc_sb_printf(&sb, " : %s\n", tgc_dtype_name(v->dtype));
    }
    for (int i = 0; i < k->n_reduces; i++)
        tgc_sb_printf(&sb, "  acc%d = %s(v%d) in phase %d\n", i, comb_names[k->reduces[i].comb],
                      k->reduces[i].val, k->reduces[i].phase);
    for (int i = 0; i < k->n_stores; i++) {
        tgc_sb_puts(&sb, "  store ");
        put_access(&sb, k, syms, &k->stores[i].at);
        tgc_sb_printf(&sb, " = v%d (%s, %s)\n", k->stores[i].val,
                      tgc_dtype_name(k->stores[i].dtype),
                      k->stores[i].phase < 0 ? "per row" : "per element");
    }
    if (k->kind != KIR_LOOP)
        tgc_sb_printf(&sb, "  result = v%d\n", k->result);
    return tgc_sb_take(&sb);
}
