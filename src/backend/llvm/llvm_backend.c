/* The LLVM CPU backend: graph -> passes -> fusion -> kernel IR -> one LLVM module per
 * variant -> native code; and the executor that runs it.
 *
 * Compile: the variant's graph is cloned and optimized (passes.h), prepared for this
 * backend (llvm_prepare.h), fused (fuse.h), each LOOP / TEMPLATE group lowered to a kernel
 * (lower.h) and emitted into one unit (one O3 run, one JIT add). OPAQUE groups run on
 * interp at call time (llvm_exec.c runs the artifact).
 *
 * Memory: every intermediate buffer gets a slot by lifetime (values whose live ranges do
 * not overlap share a slot); a call sizes the slots from its symbol values and carves them
 * out of one arena the artifact keeps between calls. Outputs are fresh tensors. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/interp/interp.h"
#include "backend/llvm/llvm_artifact.h"
#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_prepare.h"
#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/passes.h"
#include "runtime/parallel.h"
#include "support/error.h"
#include "support/log.h"
#include "support/strbuf.h"
#include "tgc/ops.h"

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

static void art_free(llvm_art *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n_steps; i++) {
        kir_kernel_free(a->steps[i].k);
        kir_args_free(&a->steps[i].slots);
    }
    free(a->steps);
    tgc_llvm_code_free(a->code);
    tgc_graph_free(a->g);
    free(a->slot_of);
    free(a->last_use);
    free(a->def_step);
    if (a->arena)
        tgc_storage_unref(a->arena);
    pthread_mutex_destroy(&a->arena_lock);
    free(a);
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

static void dump_text(const tgc_config *cfg, const char *name, const char *suffix, const char *text)
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

static tgc_status emit_steps(llvm_art *a, const tgc_fusion *fu, const uint8_t *mat,
                             const tgc_config *cfg, const char *name)
{
    tgc_llvm_unit u;
    tgc_status st = tgc_llvm_unit_begin(&u, name);
    if (st != TGC_OK)
        return st;
    ep_ctx *eps = calloc((size_t)(fu->n_groups ? fu->n_groups : 1), sizeof *eps);
    a->steps = calloc((size_t)(fu->n_groups ? fu->n_groups : 1), sizeof *a->steps);
    if (!eps || !a->steps) {
        free(eps);
        tgc_llvm_unit_abort(&u);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    tgc_strbuf kir_text = {0};
    for (int gi = 0; gi < fu->n_groups && st == TGC_OK; gi++) {
        step *s = &a->steps[a->n_steps];
        const tgc_group *gr = &fu->groups[gi];
        if (gr->kind == TGC_GROUP_OPAQUE) {
            s->kind = STEP_OPAQUE;
            s->node = gr->anchor;
            a->n_steps++;
            continue;
        }
        st = kir_lower_group(a->g, fu, gi, mat, tgc_llvm_kir_target(), &s->k);
        if (st != TGC_OK || !s->k)
            break;
        if (s->k->n_stores == 0 && s->k->n_rands == 0 && s->k->kind == KIR_LOOP) {
            /* nothing read outside: dead after fusion (a dead draw still runs: it advances
             * the stream) */
            kir_kernel_free(s->k);
            s->k = NULL;
            continue;
        }
        char base[32];
        snprintf(base, sizeof base, "k%d", gi);
        tgc_llvm_unit_name(&u, base, s->name, sizeof s->name);
        if (cfg->dump_dir || (cfg->log & TGC_LOG_KERNELS)) {
            char *t = kir_kernel_to_text(s->k, a->g->syms);
            if (t)
                tgc_sb_puts(&kir_text, t);
            free(t);
        }
        if (s->k->kind == KIR_LOOP) {
            s->kind = STEP_LOOP;
            s->inner_work = const_product(s->k, s->k->n_outer, s->k->n_outer + s->k->n_inner);
            st = tgc_llvm_emit_loop(&u, s->k, s->name, &s->slots);
        } else {
            s->kind = STEP_TEMPLATE;
            st = kir_args_collect(s->k, &s->slots);
            eps[gi].k = s->k;
            eps[gi].slots = &s->slots;
            tgc_gemm_epilogue ep = {ep_emit, &eps[gi]};
            if (st == TGC_OK && s->k->kind == KIR_GEMM)
                st = tgc_llvm_gemm_emit(&u, s->name, &ep, &s->gk);
            else if (st == TGC_OK)
                st = tgc_llvm_conv_emit_cfg(&u, s->name, NULL, &ep, conv_config(&u, s->k), &s->gk);
            if (st == TGC_OK && eps[gi].failed)
                st = tgc_set_error(TGC_ERR_COMPILE,
                                   "tgc llvm: the epilogue of kernel k%d uses an "
                                   "op the LLVM codegen does not support",
                                   gi);
        }
        a->n_steps++;
        a->kernels++;
    }
    free(eps);
    char *kt = tgc_sb_take(&kir_text);
    if (kt && (cfg->log & TGC_LOG_KERNELS))
        tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc: kernels of '%s':\n%s", name, kt);
    dump_text(cfg, name, "kir.txt", kt);
    free(kt);
    if (st != TGC_OK) {
        tgc_llvm_unit_abort(&u);
        return st;
    }
    char *ir_before = NULL, *ir_after = NULL;
    int want_ir = cfg->dump_dir != NULL;
    st =
        tgc_llvm_unit_finish(&u, &a->code, want_ir ? &ir_before : NULL, want_ir ? &ir_after : NULL);
    dump_text(cfg, name, "ll", ir_before);
    dump_text(cfg, name, "opt.ll", ir_after);
    free(ir_before);
    free(ir_after);
    for (int i = 0; st == TGC_OK && i < a->n_steps; i++) {
        step *s = &a->steps[i];
        if (s->kind == STEP_LOOP) {
            char base[32];
            snprintf(base, sizeof base, "k%d", s->k->id);
            s->fn = (loop_fn)tgc_llvm_code_lookup(a->code, base);
            if (!s->fn)
                st = TGC_ERR_COMPILE;
        } else if (s->kind == STEP_TEMPLATE) {
            st = tgc_gemm_kernel_bind(&s->gk, a->code);
        }
    }
    return st;
}

/* Buffer slots by lifetime: a value is live from the step that writes it to the last
 * step that reads it; a slot is reused once its value is dead. */
static tgc_status plan_memory(llvm_art *a, const uint8_t *mat)
{
    const tgc_graph *g = a->g;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    a->slot_of = malloc(n * sizeof(int32_t));
    a->last_use = malloc(n * sizeof(int32_t));
    a->def_step = malloc(n * sizeof(int32_t));
    int32_t *slot_free_after = malloc(n * sizeof(int32_t));
    int32_t *base = malloc(n * sizeof(int32_t));
    uint8_t *is_out = calloc(n, 1);
    if (!a->slot_of || !a->last_use || !a->def_step || !slot_free_after || !is_out || !base) {
        free(slot_free_after);
        free(is_out);
        free(base);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        a->last_use[i] = -1;
        a->def_step[i] = -1;
        base[i] = tgc_is_view_op(g->nodes[i].op) ? base[g->nodes[i].in[0]] : i;
    }
    for (int i = 0; i < g->n_outputs; i++)
        is_out[base[g->outputs[i]]] = 1;
    for (int si = 0; si < a->n_steps; si++) {
        step *s = &a->steps[si];
        if (s->kind == STEP_OPAQUE) {
            const tgc_node *nd = &g->nodes[s->node];
            for (int k = 0; k < nd->n_in; k++)
                a->last_use[base[nd->in[k]]] = si;
            a->def_step[s->node] = si;
            continue;
        }
        for (int b = 0; b < s->k->n_bufs; b++) {
            int32_t v = s->k->bufs[b].value;
            if (s->k->bufs[b].written) {
                if (a->def_step[v] < 0)
                    a->def_step[v] = si;
            } else {
                a->last_use[v] = si;
            }
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        a->slot_of[i] = -1;
    a->n_slots = 0;
    for (int si = 0; si < a->n_steps; si++) {
        step *s = &a->steps[si];
        if (s->kind == STEP_OPAQUE)
            continue;
        for (int b = 0; b < s->k->n_bufs; b++) {
            int32_t v = s->k->bufs[b].value;
            if (!s->k->bufs[b].written || a->def_step[v] != si || is_out[v] || !mat[v] ||
                g->nodes[v].op == TGC_OP_INPUT)
                continue;
            int slot = -1;
            for (int q = 0; q < a->n_slots && slot < 0; q++)
                if (slot_free_after[q] < si)
                    slot = q;
            if (slot < 0)
                slot = a->n_slots++;
            a->slot_of[v] = slot;
            /* live through its last read (a value nobody reads dies at once) */
            slot_free_after[slot] = a->last_use[v] > si ? a->last_use[v] : si;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        a->last_use[base[g->outputs[i]]] = a->n_steps;
    free(base);
    free(slot_free_after);
    free(is_out);
    return TGC_OK;
}

static tgc_status llvm_compile_named(const tgc_graph *src, const tgc_config *cfg, const char *name,
                                     void **artifact)
{
    llvm_art *a = calloc(1, sizeof *a);
    if (!a)
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    pthread_mutex_init(&a->arena_lock, NULL);
    a->n_threads = tgc_threads_resolve(cfg->num_threads);
    a->g = tgc_graph_clone(src);
    tgc_status st = a->g ? TGC_OK : TGC_ERR_OOM;
    if (st == TGC_OK)
        st = tgc_passes_run_opts(a->g, cfg, name, TGC_DECOMPOSE_KEEP_ACTIVATIONS,
                                 tgc_interp_eval_contiguous);
    if (st == TGC_OK)
        st = tgc_llvm_prepare(a->g);
    tgc_fusion fu = {0};
    uint8_t *mat = NULL;
    if (st == TGC_OK)
        st = tgc_pass_fuse(a->g, tgc_llvm_fuse_hooks(), &fu);
    if (st == TGC_OK && ((cfg->log & TGC_LOG_GRAPH) || cfg->dump_dir)) {
        /* the graph as compiled (after the passes and the backend's preparation) */
        char *t = tgc_fusion_to_text(a->g, &fu), *gt = tgc_graph_to_text(a->g);
        if (cfg->log & TGC_LOG_GRAPH)
            tgc_log_msg(cfg, TGC_LOG_GRAPH, "tgc: fusion groups of '%s':\n%s", name, t ? t : "");
        tgc_strbuf sb = {0};
        tgc_sb_printf(&sb, "%s\n%s", gt ? gt : "", t ? t : "");
        char *both = tgc_sb_take(&sb);
        dump_text(cfg, name, "opt.txt", both);
        free(both);
        free(gt);
        free(t);
    }
    if (st == TGC_OK && !(mat = kir_materialized(a->g, &fu)))
        st = TGC_ERR_OOM;
    if (st == TGC_OK)
        st = emit_steps(a, &fu, mat, cfg, name);
    if (st == TGC_OK)
        st = plan_memory(a, mat);
    free(mat);
    tgc_fusion_free(&fu);
    if (st != TGC_OK) {
        art_free(a);
        return st == TGC_ERR_OOM && !tgc_last_error()[0]
                   ? tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory")
                   : tgc_keep_error(st, "tgc llvm: compiling '%s' failed", name);
    }
    *artifact = a;
    return TGC_OK;
}

static tgc_status llvm_compile(const tgc_graph *g, const tgc_config *cfg, const char *name,
                               void **artifact)
{
    return llvm_compile_named(g, cfg, name ? name : "graph", artifact);
}

static int llvm_supports(tgc_op op)
{
    return op != TGC_OP_INPUT;
}

static int llvm_kernel_count(const void *artifact)
{
    return ((const llvm_art *)artifact)->kernels;
}

static void llvm_release(void *artifact)
{
    art_free(artifact);
}

const tgc_backend *tgc_backend_llvm(void)
{
    static const tgc_backend b = {"llvm",       llvm_supports,     llvm_compile,
                                  tgc_llvm_run, llvm_kernel_count, llvm_release};
    return &b;
}
