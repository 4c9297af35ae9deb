/* The LLVM CPU backend: what is LLVM's own in the shared pipeline (backend.h). The driver
 * (driver.c) hands it the kernels of a variant; it emits them all into one LLVM unit (one O3
 * run, one JIT add): LOOP kernels through llvm_codegen.c, GEMM / conv templates with their
 * fused epilogues through llvm_gemm.c, then looks the functions up. The executor (exec.c)
 * launches them: a LOOP kernel's parallel rows split over threads (tgc_parallel_for), a
 * template through the runtime's GEMM / conv drivers (runtime/gemm.h). OPAQUE nodes it has a
 * native kernel for (the f32 conv2d, pool and embedding backward ops: llvm_ops.c) run through
 * run_node instead of interp. Graph preparation and the fusion hooks are in llvm_prepare.c.
 * The unit's object comes from the object cache (llvm_jit.h) when an equal unit was compiled
 * before, in this process or, with cfg.cache_dir, in an earlier one. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "backend/llvm/llvm_ops.h"
#include "backend/llvm/llvm_prepare.h"
#include "backend/plan.h"
#include "passes/passes.h"
#include "runtime/parallel.h"
#include "support/error.h"

/* A LOOP kernel: rows [lo, hi) (see llvm_codegen.h). */
typedef void (*loop_fn)(void **bufs, const int64_t *sizes, int64_t lo, int64_t hi);

/* The handle of one kernel (tgc_plan_kernel.handle). */
typedef struct llvm_kernel {
    loop_fn fn;         /* LOOP */
    tgc_gemm_kernel gk; /* GEMM / CONV */
    int64_t inner_work; /* LOOP, for the parallel grain: elements per row if constant, else 0 */
} llvm_kernel;

/* The code of a variant: its unit's JIT code and the kernels' handles. */
typedef struct llvm_code {
    tgc_llvm_code *code;
    llvm_kernel *kernels;
} llvm_code;

/* ---- compile ---- */

typedef struct ep_ctx {
    const kir_kernel *k;
    const kir_args *slots;
    int failed;
} ep_ctx;

static LLVMValueRef ep_emit(void *ctx, tgc_llvm_unit *u, LLVMValueRef acc,
                            const tgc_gemm_ep_pos *pos)
{
    ep_ctx *e = ctx;
    LLVMValueRef r = tgc_llvm_epilogue_emit(u, e->k, e->slots, acc, pos);
    if (!r) { /* keep the IR well formed; the step reports the failure */
        e->failed = 1;
        return acc;
    }
    return r;
}

/* The conv's GEMM has M = output channels, often a multiple of 8 but not of the default
 * 14-row micro-tile (64 = 4 x 14 + 8 wastes 9% of every pass): on AVX-512 such convs get
 * an 8 x 32 tile (measured 398 vs 363 GFLOP/s on 64 -> 64, 32 x 32, 3 x 3, 2 threads). */
static const tgc_gemm_config *conv_config(const tgc_llvm_unit *u, const kir_kernel *k)
{
    static const tgc_gemm_config mr8 = {.mr = 8};
    tgc_sdim co = k->tpl.co;
    if (u->target->vec_bits == 512 && TGC_SDIM_IS_CONST(co) && co % 14 != 0 && co % 8 == 0)
        return &mr8;
    return NULL;
}

static int64_t const_product(const kir_kernel *k, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (!TGC_SDIM_IS_CONST(k->extent[d]))
            return 0;
        p *= k->extent[d];
    }
    return p;
}

static void llvm_release_code(void *code)
{
    llvm_code *c = code;
    if (!c)
        return;
    tgc_llvm_code_free(c->code);
    free(c->kernels);
    free(c);
}

/* Emits kernel i of ks into u. */
static tgc_status emit_kernel(tgc_llvm_unit *u, tgc_plan_kernel *pk, llvm_kernel *lk, ep_ctx *ep)
{
    const kir_kernel *k = pk->k;
    char fname[48];
    tgc_llvm_unit_name(u, pk->name, fname, sizeof fname);
    if (k->kind == KIR_LOOP) {
        lk->inner_work = const_product(k, k->n_outer, k->n_outer + k->n_inner);
        return tgc_llvm_emit_loop(u, k, fname, &pk->slots);
    }
    ep->k = k;
    ep->slots = &pk->slots;
    tgc_gemm_epilogue e = {ep_emit, ep};
    tgc_status st = k->kind == KIR_GEMM
                        ? tgc_llvm_gemm_emit(u, fname, &e, &lk->gk)
                        : tgc_llvm_conv_emit_cfg(u, fname, NULL, &e, conv_config(u, k), &lk->gk);
    if (st == TGC_OK && ep->failed)
        st = tgc_set_error(TGC_ERR_COMPILE,
                           "tgc llvm: the epilogue of kernel %s uses an op the LLVM codegen "
                           "does not support",
                           pk->name);
    return st;
}

static tgc_status llvm_compile(const tgc_config *cfg, tgc_device dev, const char *name,
                               const tgc_graph *g, tgc_plan_kernel *ks, int n, void **out)
{
    (void)dev, (void)g; /* the host; no native steps of its own to prepare */
    *out = NULL;
    llvm_code *c = calloc(1, sizeof *c);
    ep_ctx *eps = calloc((size_t)(n ? n : 1), sizeof *eps);
    if (c)
        c->kernels = calloc((size_t)(n ? n : 1), sizeof *c->kernels);
    if (!c || !eps || !c->kernels) {
        free(eps);
        llvm_release_code(c);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    tgc_llvm_unit u;
    tgc_status st = tgc_llvm_unit_begin(&u, name);
    u.cache_dir = cfg->cache_dir; /* the object cache's directory (NULL: memory only) */
    for (int i = 0; i < n && st == TGC_OK; i++)
        st = emit_kernel(&u, &ks[i], &c->kernels[i], &eps[i]);
    free(eps);
    if (st != TGC_OK) {
        tgc_llvm_unit_abort(&u);
        llvm_release_code(c);
        return st;
    }
    char *ir_before = NULL, *ir_after = NULL;
    int want_ir = cfg->dump_dir != NULL;
    st =
        tgc_llvm_unit_finish(&u, &c->code, want_ir ? &ir_before : NULL, want_ir ? &ir_after : NULL);
    tgc_backend_dump_text(cfg, name, "ll", ir_before);
    tgc_backend_dump_text(cfg, name, "opt.ll", ir_after);
    free(ir_before);
    free(ir_after);
    for (int i = 0; st == TGC_OK && i < n; i++) {
        llvm_kernel *lk = &c->kernels[i];
        ks[i].handle = lk;
        if (ks[i].k->kind == KIR_LOOP) {
            lk->fn = (loop_fn)tgc_llvm_code_lookup(c->code, ks[i].name);
            if (!lk->fn)
                st = TGC_ERR_COMPILE;
        } else {
            st = tgc_gemm_kernel_bind(&lk->gk, c->code);
        }
    }
    if (st != TGC_OK) {
        llvm_release_code(c);
        for (int i = 0; i < n; i++)
            ks[i].handle = NULL;
        return st;
    }
    *out = c;
    return TGC_OK;
}

/* ---- launch ---- */

typedef struct loop_call {
    loop_fn fn;
    void **bufs;
    const int64_t *sizes;
} loop_call;

static void run_rows(void *ctx, int64_t lo, int64_t hi)
{
    const loop_call *c = ctx;
    c->fn(c->bufs, c->sizes, lo, hi);
}

static int64_t ev(const tgc_launch_env *env, tgc_sdim d)
{
    return tgc_sym_eval(env->syms, d, env->symvals);
}

/* The kernel's parallel rows (chunks of a 1-D domain, or the flattened outer dims) over the
 * function's threads, with a grain of about 16K elements of work. */
static tgc_status llvm_launch(const tgc_plan_kernel *pk, void *const *bufs, const int64_t *sizes,
                              const tgc_launch_env *env)
{
    const kir_kernel *k = pk->k;
    const llvm_kernel *lk = pk->handle;
    int64_t rows = 1, row_work = lk->inner_work;
    if (k->sched.split_axis >= 0) { /* a 1-D domain strip-mined by the schedule */
        int64_t e = ev(env, k->extent[0]), chunk = k->sched.split;
        rows = (e + chunk - 1) / chunk;
        row_work = chunk;
    } else {
        for (int d = 0; d < k->n_outer; d++)
            rows *= ev(env, k->extent[d]);
        if (!row_work) {
            row_work = 1;
            for (int d = k->n_outer; d < k->n_outer + k->n_inner; d++)
                row_work *= ev(env, k->extent[d]);
        }
    }
    loop_call lc = {lk->fn, (void **)bufs, sizes};
    int64_t grain = row_work > 0 ? 1 + 16384 / (row_work * (k->n_phases)) : 1;
    tgc_parallel_for(rows, grain, env->n_threads, run_rows, &lc);
    return TGC_OK;
}

static tgc_status llvm_run_template(const tgc_plan_kernel *pk, void *const *bufs,
                                    const int64_t *sizes, const tgc_launch_env *env)
{
    const kir_template *t = &pk->k->tpl;
    const llvm_kernel *lk = pk->handle;
    void *ep_args[2] = {(void *)bufs, (void *)sizes};
    if (pk->k->kind == KIR_CONV) {
        tgc_conv_args ca = {0};
        const tgc_conv2d_attrs *at = &t->attrs.conv2d;
        ca.p = (tgc_conv_params){ev(env, t->cn), ev(env, t->cc), ev(env, t->ch), ev(env, t->cw),
                                 ev(env, t->co), ev(env, t->kh), ev(env, t->kw), at->stride_h,
                                 at->stride_w,   at->pad_h,      at->pad_w,      at->dil_h,
                                 at->dil_w,      at->groups};
        ca.x = bufs[t->a];
        ca.w = bufs[t->b];
        ca.y = bufs[t->out];
        ca.ep_args = ep_args;
        return tgc_conv_run(&lk->gk, &ca, env->n_threads);
    }
    tgc_gemm_args ga = {0};
    ga.batch = ev(env, t->batch);
    ga.m = ev(env, t->M);
    ga.n = ev(env, t->N);
    ga.k = ev(env, t->K);
    ga.a = (const float *)bufs[t->a] + ev(env, t->a_off);
    ga.a_bs = ev(env, t->a_bs);
    ga.a_rs = ev(env, t->a_rs);
    ga.a_cs = ev(env, t->a_cs);
    ga.b = (const float *)bufs[t->b] + ev(env, t->b_off);
    ga.b_bs = ev(env, t->b_bs);
    ga.b_rs = ev(env, t->b_rs);
    ga.b_cs = ev(env, t->b_cs);
    ga.c = bufs[t->out];
    ga.c_bs = ev(env, t->c_bs);
    ga.c_rs = ev(env, t->c_rs);
    ga.ep_args = ep_args;
    return tgc_gemm_run(&lk->gk, &ga, env->n_threads);
}

/* The hooks live in llvm_prepare.c behind a function, so the vtable is filled once. */
static pthread_once_t vtable_once = PTHREAD_ONCE_INIT;
static tgc_backend vtable;

static const char llvm_name[] = "llvm";

static void fill_vtable(void)
{
    vtable = (tgc_backend){
        .name = llvm_name,
        .device = TGC_DEVICE_CPU,
        .reg = &tgc_llvm_backend_reg,
        .decompose_keep = TGC_DECOMPOSE_KEEP_ACTIVATIONS | TGC_DECOMPOSE_KEEP_BATCH_NORM |
                          TGC_DECOMPOSE_KEEP_CONV_GRAD_INPUT,
        .prepare = tgc_llvm_prepare,
        .fuse = tgc_llvm_fuse_hooks(),
        .target = tgc_llvm_kir_target,
        .compile = llvm_compile,
        .launch = llvm_launch,
        .run_template = llvm_run_template,
        .run_node = tgc_llvm_run_node,
        .node_supported = tgc_llvm_node_supported,
        .opaque_reason = tgc_llvm_opaque_reason,
        .release_code = llvm_release_code,
    };
}

const tgc_backend *tgc_backend_llvm(void)
{
    pthread_once(&vtable_once, fill_vtable);
    return &vtable;
}

/* Available where LLVM can target the host (else tgc_llvm_host says why). */
static const tgc_backend *llvm_get(void)
{
    return tgc_llvm_host() ? tgc_backend_llvm() : NULL;
}

const tgc_backend_reg tgc_llvm_backend_reg = {
    .name = llvm_name,
    .kinds = {{TGC_BACKEND_LLVM, NULL}},
    .n_kinds = 1,
    .device = TGC_DEVICE_CPU,
    .priority = 2, /* AUTO and eager ops on the host take it over interp */
    .get = llvm_get,
};
