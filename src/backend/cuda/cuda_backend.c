/* The CUDA backend: what is CUDA's own in the shared pipeline (backend.h).
 *
 * The driver (driver.c) hands it the kernels of a variant; compile renders each to CUDA C
 * (LOOP kernels: cuda_render.c; GEMM / conv templates with their epilogues: cuda_gemm.c) as a
 * program of its own, gets the programs from the program cache (cuda_program.c: memory, then
 * cfg.cache_dir, else NVRTC on every core at once, for the device's own sm_XY), has them loaded
 * into the device's primary context and looks the kernels up. The executor (exec.c) launches
 * them on the call's stream (cfg.cuda_stream, else the thread's stream for the device); nodes
 * fusion leaves OPAQUE run natively (cuda_ops.c: indexing, concatenation, losses, attention,
 * ...), so no data goes through the host. The fusion hooks and graph preparation are
 * cuda_classify.c's.
 *
 * cfg.matmul_precision is read here and only here, once per variant: the templates compile
 * their f32 mode in (tgc_cuda_f32_mode), and the variant's code records it for its native
 * steps (tgc_cuda_native: the conv gradients), which read it through tgc_launch_env.code.
 *
 * Code is per device: a module is loaded into one context, so a plan compiled for cuda:0
 * launches there. Thread-safety: launches of one code from several threads and streams at
 * once are fine: the handles are read-only after compile, and nothing a launch writes is
 * kept with the code (a template's split-K workspace is taken from the allocator for each
 * launch, on the launch's stream, and given back once queued: stream-ordered reuse, so two
 * streams never share one; during a capture it comes from the capture pool, which the
 * recording keeps). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_autotune.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_classify.h"
#include "backend/cuda/cuda_conv_grad.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "backend/cuda/cuda_tmap.h"
#include "backend/plan.h"
#include "runtime/cuda.h"
#include "runtime/storage.h"
#include "support/config_env.h"
#include "support/error.h"
#include "support/log.h"
#include "support/strbuf.h"

/* Every kernel is rendered under this one name into a program of its own (prelude +
 * kernel), so a program's text depends only on what the kernel computes: equal kernels
 * (the same conv in two blocks of a ResNet, the same op in two variants, an eager op and a
 * compiled one) are one program of the cache, compiled once and loaded once per device. */
#define KERNEL_NAME "tgc_k"

typedef struct cuda_kernel {
    CUfunction fn;
    CUfunction fn_tma;         /* the GEMM's warp-specialized TMA entry (tpl.tma_bn), else NULL */
    tgc_cuda_tmap_cache *maps; /* fn_tma's recent tensor maps (owned), else NULL */
    tgc_cuda_launch loop;      /* LOOP */
    tgc_cuda_tpl tpl;          /* GEMM / CONV */
} cuda_kernel;

/* The code of a variant: what its native steps read (first: tgc_launch_env.code points here)
 * and its kernels' handles (their programs live in the program cache for the life of the
 * process, like the eager engine's plans). */
typedef struct cuda_code {
    tgc_cuda_native native;
    int dev;
    int n;
    cuda_kernel *kernels;
} cuda_code;

/* ---- availability ---- */

static pthread_once_t avail_once = PTHREAD_ONCE_INIT;
static tgc_status avail_status;
static char avail_msg[512];
static tgc_backend vtable;

static void fill_vtable(void);

static void check_available(void)
{
    tgc_status st = tgc_cuda_load();
    const char *what = "CUDA";
    if (st == TGC_OK) {
        what = "NVRTC";
        st = tgc_nvrtc_load();
    }
    avail_status = st;
    if (st != TGC_OK)
        snprintf(avail_msg, sizeof avail_msg, "the CUDA backend is not available (%s): %s", what,
                 tgc_last_error());
    else
        fill_vtable();
    tgc_clear_error();
}

const tgc_backend *tgc_backend_cuda(void)
{
    pthread_once(&avail_once, check_available);
    if (avail_status != TGC_OK) {
        tgc_set_error(TGC_ERR_DEVICE, "%s", avail_msg);
        return NULL;
    }
    return &vtable;
}

/* Frees what a kernel handle owns (its tensor maps). */
static void drop_kernel(cuda_kernel *ck)
{
    if (ck->maps) {
        tgc_cuda_tmap_cache_destroy(ck->maps);
        free(ck->maps);
        ck->maps = NULL;
    }
}

static void release_code(void *code)
{
    cuda_code *c = code;
    if (!c)
        return;
    free(c->native.cache_dir);
    for (int i = 0; c->kernels && i < c->n; i++)
        drop_kernel(&c->kernels[i]);
    free(c->kernels);
    free(c);
}

/* ---- compile ---- */

/* Renders kernel pk as a whole program (prelude + the kernel as KERNEL_NAME) into *text; a
 * template with the tile `force` when not NULL (autotuning's candidates). */
static tgc_status render_program(const tgc_plan_kernel *pk, cuda_kernel *ck,
                                 tgc_matmul_precision prec, int sm, const tgc_cuda_tpl *force,
                                 char **text)
{
    const kir_kernel *k = pk->k;
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, tgc_cuda_prelude());
    tgc_status st =
        k->kind == KIR_LOOP ? tgc_cuda_render_loop(&sb, k, &pk->slots, KERNEL_NAME, &ck->loop)
        : force ? tgc_cuda_render_template_tile(&sb, k, &pk->slots, KERNEL_NAME, prec, sm, force,
                                                &ck->tpl)
                : tgc_cuda_render_template(&sb, k, &pk->slots, KERNEL_NAME, prec, sm, &ck->tpl);
    *text = tgc_sb_take(&sb);
    if (st == TGC_OK && !*text)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", pk->name);
    if (st != TGC_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

/* Renders the batch of flat LOOP kernels ks[0..n) (plan.h) as one program (prelude + the
 * batch's entry as KERNEL_NAME) into *text; each member's launch into cks[j].loop. */
static tgc_status render_batch_program(const tgc_plan_kernel *ks, int n, cuda_kernel *cks,
                                       char **text)
{
    const kir_kernel **kk = malloc((size_t)n * sizeof *kk);
    const kir_args **sl = malloc((size_t)n * sizeof *sl);
    tgc_cuda_launch *ls = malloc((size_t)n * sizeof *ls);
    tgc_strbuf sb = {0};
    tgc_status st = kk && sl && ls ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    for (int j = 0; j < n && st == TGC_OK; j++) {
        kk[j] = ks[j].k;
        sl[j] = &ks[j].slots;
    }
    if (st == TGC_OK) {
        tgc_sb_puts(&sb, tgc_cuda_prelude());
        st = tgc_cuda_render_batch(&sb, kk, sl, n, KERNEL_NAME, ls);
    }
    for (int j = 0; j < n && st == TGC_OK; j++)
        cks[j].loop = ls[j];
    *text = tgc_sb_take(&sb);
    if (st == TGC_OK && !*text)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", ks[0].name);
    if (st != TGC_OK) {
        free(*text);
        *text = NULL;
    }
    free(kk);
    free(sl);
    free(ls);
    return st;
}

/* TGC_DUMP_DIR: every kernel's program as <name>.cu, the PTX of those compiled now as
 * <name>.ptx (kernels found in the cache were compiled earlier: their PTX is not redone). */
static void dump_code(const tgc_config *cfg, const char *name, const tgc_plan_kernel *ks, int n,
                      char **texts, char **ptxs)
{
    if (!cfg->dump_dir)
        return;
    tgc_strbuf cu = {0}, ptx = {0};
    for (int i = 0, pi = 0; i < n; i++) {
        if (!ks[i].batch) /* in its batch's program */
            continue;
        const char *what = ks[i].batch > 1 ? "batch from kernel" : "kernel";
        if (texts[i]) {
            tgc_sb_printf(&cu, "// ---- %s %s (%d of %d) ----\n", what, ks[i].name, i + 1, n);
            tgc_sb_puts(&cu, texts[i]);
        }
        if (ptxs && ptxs[pi]) {
            tgc_sb_printf(&ptx, "// ---- %s %s ----\n", what, ks[i].name);
            tgc_sb_puts(&ptx, ptxs[pi]);
        }
        pi++;
    }
    char *t = tgc_sb_take(&cu);
    tgc_backend_dump_text(cfg, name, "cu", t);
    free(t);
    t = tgc_sb_take(&ptx);
    tgc_backend_dump_text(cfg, name, "ptx", t);
    free(t);
}

/* Kernel pk's functions on device dev from its program into *ck, with the shared memory they
 * ask for. */
static tgc_status bind_kernel(const tgc_cuda_program *prog, int dev, const char *name,
                              const tgc_plan_kernel *pk, cuda_kernel *ck)
{
    tgc_status st = tgc_cuda_program_function(prog, dev, KERNEL_NAME, &ck->fn);
    unsigned smem = pk->k->kind == KIR_LOOP ? ck->loop.smem_bytes : ck->tpl.smem_bytes;
    if (st == TGC_OK && smem > 48 * 1024) {
        char w[360];
        snprintf(w, sizeof w,
                 "tgc cuda: kernel %.31s of '%.200s' asks for %u bytes of shared memory", pk->name,
                 name, smem);
        st = tgc_cuda_error(tgc_cuda_drv()->cuFuncSetAttribute(
                                ck->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem),
                            w);
    }
    if (st == TGC_OK && pk->k->kind != KIR_LOOP && ck->tpl.tma_bn) {
        st = tgc_cuda_program_function(prog, dev, KERNEL_NAME "_tma", &ck->fn_tma);
        if (st == TGC_OK)
            st = tgc_cuda_error(tgc_cuda_drv()->cuFuncSetAttribute(
                                    ck->fn_tma, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    (int)ck->tpl.tma_smem),
                                "tgc cuda: the shared memory of a TMA GEMM kernel");
        if (st == TGC_OK && !(ck->maps = malloc(sizeof *ck->maps)))
            st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for a kernel's tensor maps");
        if (st == TGC_OK)
            tgc_cuda_tmap_cache_init(ck->maps);
    }
    return st;
}

/* The programs a variant's native steps will load at their first run (the conv gradients',
 * the native ops'), each loaded on a thread of its own while NVRTC compiles the variant's
 * kernels: the batches share the cores instead of following each other in the first call. */
typedef struct native_preload {
    pthread_t th;
    int started;
    int dev;
    tgc_matmul_precision prec;
    const char *cache_dir;
} native_preload;

static void *cg_preload_main(void *arg)
{
    const native_preload *p = arg;
    tgc_cuda_conv_grad_load(p->dev, p->prec, p->cache_dir); /* a failure is kept for the run */
    return NULL;
}

static void *ops_preload_main(void *arg)
{
    const native_preload *p = arg;
    tgc_cuda_ops_load(p->dev, p->cache_dir); /* a failure is kept for the run */
    return NULL;
}

static int is_conv_grad(tgc_op op)
{
    return op == TGC_OP_CONV2D_GRAD_INPUT || op == TGC_OP_CONV2D_GRAD_WEIGHT;
}

static int has_conv_grad(const tgc_graph *g)
{
    for (int i = 0; g && i < g->n_nodes; i++)
        if (is_conv_grad(g->nodes[i].op))
            return 1;
    return 0;
}

/* A node fusion leaves to a native step of the native-op program (not attention nor a conv
 * gradient: programs of their own; not an ASSIGN: the executor's copy). */
static int has_native_ops(const tgc_graph *g)
{
    const tgc_fuse_hooks *h = tgc_cuda_fuse_hooks();
    for (int32_t i = 0; g && i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        if (nd->op == TGC_OP_ASSIGN || is_conv_grad(nd->op) ||
            tgc_op_info_of(nd->op)->kind == TGC_KIND_ATTENTION)
            continue;
        if (h->classify(g, i) == TGC_FUSE_OPAQUE && tgc_cuda_op_supported(nd))
            return 1;
    }
    return 0;
}

static void preload_start(native_preload *p, void *(*main_fn)(void *))
{
    p->started = pthread_create(&p->th, NULL, main_fn, p) == 0;
}

static void preload_join(native_preload *p)
{
    if (p->started)
        pthread_join(p->th, NULL);
    p->started = 0;
}

static void autotune_kernels(const tgc_config *cfg, int dev, int sm, const char *name,
                             const tgc_graph *g, tgc_plan_kernel *ks, int n, cuda_code *c,
                             char *const *texts);

static tgc_status cuda_compile(const tgc_config *cfg, tgc_device dev, const char *name,
                               const tgc_graph *g, tgc_plan_kernel *ks, int n, void **out)
{
    *out = NULL;
    if (dev.index < 0 || dev.index >= TGC_CUDA_MAX_DEVICES)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: device index %d", dev.index);
    tgc_status st = tgc_cuda_enter(dev.index);
    if (st != TGC_OK)
        return st;
    const tgc_cuda_props *pr = tgc_cuda_props_of(dev.index);
    int sm = pr->major * 10 + pr->minor;
    cuda_code *c = calloc(1, sizeof *c);
    if (!c)
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    c->native.precision = cfg->matmul_precision;
    c->dev = dev.index;
    c->n = n;
    size_t cnt = (size_t)(n ? n : 1);
    c->kernels = calloc(cnt, sizeof *c->kernels);
    char **texts = calloc(cnt, sizeof *texts), **ptxs = calloc(cnt, sizeof *ptxs);
    tgc_cuda_program_src *srcs = calloc(cnt, sizeof *srcs);
    const tgc_cuda_program **progs = calloc(cnt, sizeof *progs);
    if (!c->kernels || !texts || !ptxs || !srcs || !progs ||
        (cfg->cache_dir && !(c->native.cache_dir = strdup(cfg->cache_dir))))
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    native_preload pre_cg = {.dev = dev.index,
                             .prec = c->native.precision,
                             .cache_dir = cfg->cache_dir},
                   pre_ops = pre_cg;
    if (st == TGC_OK && has_conv_grad(g))
        preload_start(&pre_cg, cg_preload_main);
    if (st == TGC_OK && has_native_ops(g))
        preload_start(&pre_ops, ops_preload_main);
    int np = 0; /* programs: one per kernel, one per batch (its other kernels have none) */
    for (int i = 0; st == TGC_OK && i < n; i++) {
        if (!ks[i].batch)
            continue;
        st = ks[i].batch > 1
                 ? render_batch_program(&ks[i], ks[i].batch, &c->kernels[i], &texts[i])
                 : render_program(&ks[i], &c->kernels[i], c->native.precision, sm, NULL, &texts[i]);
        srcs[np++] = (tgc_cuda_program_src){ks[i].name, texts[i]};
        if (st == TGC_OK && ks[i].k->kind != KIR_LOOP && (cfg->log & TGC_LOG_KERNELS)) {
            char d[256];
            tgc_cuda_tpl_describe(&c->kernels[i].tpl, d, sizeof d);
            tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc cuda: kernel %s of '%s' (sm_%d): %s", ks[i].name,
                        name, sm, d);
        }
    }
    if (st == TGC_OK) {
        st =
            tgc_cuda_programs_get(np, srcs, sm, cfg->cache_dir, progs, cfg->dump_dir ? ptxs : NULL);
        if (st != TGC_OK) /* keep the name of the variant with NVRTC's reason */
            tgc_keep_error(st, "tgc cuda: compiling '%s'", name);
    }
    preload_join(&pre_cg);
    preload_join(&pre_ops);
    if (cfg->dump_dir && texts)
        dump_code(cfg, name, ks, n, texts, ptxs);
    for (int i = 0, pi = 0; st == TGC_OK && i < n; i++) {
        if (ks[i].batch) /* a batch's entry is its first kernel's function */
            st = bind_kernel(progs[pi++], dev.index, name, &ks[i], &c->kernels[i]);
        ks[i].handle = &c->kernels[i];
    }
    if (st == TGC_OK)
        autotune_kernels(cfg, dev.index, sm, name, g, ks, n, c, texts);
    for (int i = 0; i < n && texts; i++)
        free(texts[i]);
    for (int i = 0; i < n && ptxs; i++)
        free(ptxs[i]);
    free(texts);
    free(ptxs);
    free(srcs);
    free(progs);
    if (st != TGC_OK) {
        for (int i = 0; i < n; i++)
            ks[i].handle = NULL;
        release_code(c);
        return st;
    }
    *out = c;
    return TGC_OK;
}

/* ---- launch ---- */

static int64_t ev(const tgc_launch_env *env, tgc_sdim d)
{
    return tgc_sym_eval(env->syms, d, env->symvals);
}

static CUstream stream_of(const tgc_launch_env *env)
{
    return env->stream ? (CUstream)env->stream : tgc_cuda_stream(env->device.index);
}

/* Makes the launch's device current and gives the stream its launches go to. */
static tgc_status enter_stream(const tgc_launch_env *env, CUstream *s)
{
    tgc_status st = tgc_cuda_enter(env->device.index);
    if (st != TGC_OK)
        return st;
    *s = stream_of(env);
    return *s ? TGC_OK : tgc_last_status();
}

/* LOOP kernel pk's launch for this call's extents. */
static void loop_dims(const tgc_plan_kernel *pk, const tgc_launch_env *env, unsigned grid[3],
                      unsigned block[3], unsigned *smem)
{
    const kir_kernel *k = pk->k;
    const cuda_kernel *ck = pk->handle;
    int64_t extents[KIR_MAX_DIMS];
    for (int d = 0; d < k->n_outer + k->n_inner; d++)
        extents[d] = ev(env, k->extent[d]);
    tgc_cuda_launch_dims(&ck->loop, k, extents, tgc_cuda_props_of(env->device.index)->sms, grid,
                         block, smem);
}

static tgc_status launch_fn(const tgc_plan_kernel *pk, CUfunction fn, const unsigned grid[3],
                            const unsigned block[3], unsigned smem, CUstream s, void **params)
{
    if (!grid[0] || !grid[1] || !grid[2])
        return TGC_OK; /* an empty domain */
    CUresult r = tgc_cuda_drv()->cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                                block[2], smem, s, params, NULL);
    if (r == CUDA_SUCCESS)
        return TGC_OK;
    char what[96];
    snprintf(what, sizeof what, "tgc cuda: launching kernel %s", pk->name);
    return tgc_cuda_error(r, what);
}

static tgc_status cuda_launch(const tgc_plan_kernel *pk, void *const *bufs, const int64_t *sizes,
                              const tgc_launch_env *env)
{
    const cuda_kernel *ck = pk->handle;
    CUstream s;
    tgc_status st = enter_stream(env, &s);
    if (st != TGC_OK)
        return st;
    unsigned grid[3], block[3], smem;
    loop_dims(pk, env, grid, block, &smem);
    void *params[2] = {(void *)bufs, (void *)sizes};
    return launch_fn(pk, ck->fn, grid, block, smem, s, params);
}

/* Kernel parameters a batch may take: 4096 bytes is what every driver and architecture
 * accepts; the rest is slack. */
#define BATCH_PARAM_BYTES 4000

/* The parameter bytes of batch member k: its buffer and size structs (render_c.c: at least
 * one 8-byte word each) and its entry in the block ends. */
static size_t batch_member_bytes(const tgc_plan_kernel *pk)
{
    int nb = pk->k->n_bufs, nw = kir_args_words(&pk->slots);
    return 8 * (size_t)((nb > 0 ? nb : 1) + (nw > 0 ? nw : 1)) + 4;
}

static int cuda_batch_fits(const tgc_plan_kernel *ks, int n)
{
    if (!tgc_env_cuda_batch()) /* TGC_CUDA_BATCH=0 */
        return 0;
    size_t bytes = 0;
    for (int j = 0; j < n; j++) {
        if (!tgc_c_loop_is_flat(ks[j].k))
            return 0;
        bytes += batch_member_bytes(&ks[j]);
    }
    return bytes <= BATCH_PARAM_BYTES;
}

/* A batch (plan.h): each member's grid as its own launch would have it, blocks of the one
 * entry in member order (the block ends e[j] the entry reads); one_by_one: one launch per
 * member, the others given no blocks. */
static tgc_status cuda_launch_batch(const tgc_plan_kernel *ks, int n, void *const *const *bufs,
                                    const int64_t *const *sizes, int one_by_one,
                                    const tgc_launch_env *env)
{
    const cuda_kernel *head = ks[0].handle;
    CUstream s;
    tgc_status st = enter_stream(env, &s);
    if (st != TGC_OK)
        return st;
    unsigned *blocks = malloc((size_t)n * sizeof *blocks), *ends = malloc((size_t)n * sizeof *ends);
    void **params = malloc((size_t)(2 * n + 1) * sizeof *params);
    if (!blocks || !ends || !params)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory launching a batch");
    unsigned block[3] = {TGC_CUDA_BLOCK_THREADS, 1, 1}, total = 0;
    for (int j = 0; j < n && st == TGC_OK; j++) {
        unsigned grid[3], blk[3], smem;
        loop_dims(&ks[j], env, grid, blk, &smem);
        blocks[j] = grid[0];
        total += grid[0];
        ends[j] = total;
        params[2 * j] = (void *)bufs[j];
        params[2 * j + 1] = (void *)sizes[j];
    }
    if (st == TGC_OK)
        params[2 * n] = ends;
    if (st == TGC_OK && !one_by_one) {
        unsigned grid[3] = {total, 1, 1};
        st = launch_fn(&ks[0], head->fn, grid, block, 0, s, params);
    }
    for (int j = 0; one_by_one && j < n && st == TGC_OK; j++) {
        for (int i = 0; i < n; i++)
            ends[i] = i < j ? 0 : blocks[j];
        unsigned grid[3] = {blocks[j], 1, 1};
        st = launch_fn(&ks[j], head->fn, grid, block, 0, s, params);
    }
    free(blocks);
    free(ends);
    free(params);
    return st;
}

/* A template kernel's launch for one call: the entry (NAME, or NAME_tma where the call's
 * operands suit it), its grid, block and dynamic shared memory, the split-K workspace it
 * needs (the first ws_zero bytes cleared), and NAME_tma's maps and k splits. The maps come
 * from the kernel's recent ones when the operands did not move (a recording keeps them); a
 * map the driver refuses launches NAME, which needs none. */
typedef struct tpl_launch {
    CUfunction fn;
    int tma, splits;
    unsigned grid[3], block[3], smem;
    size_t ws_bytes, ws_zero;
    CUtensorMap ma, mb;
} tpl_launch;

static void plan_template_launch(const cuda_kernel *ck, const kir_kernel *k, const tgc_gemm_geom *g,
                                 void *const *bufs, int sms, tpl_launch *L)
{
    tgc_cuda_tma_launch tl;
    L->tma = ck->fn_tma && tgc_cuda_template_tma(&ck->tpl, k, g, bufs, sms, &tl);
    if (L->tma && (tgc_cuda_tmap_get(ck->maps, &tl.maps[0], &L->ma) != TGC_OK ||
                   tgc_cuda_tmap_get(ck->maps, &tl.maps[1], &L->mb) != TGC_OK)) {
        tgc_clear_error();
        L->tma = 0;
    }
    L->splits = 1;
    L->ws_zero = 0;
    if (L->tma) {
        memcpy(L->grid, tl.grid, sizeof L->grid);
        memcpy(L->block, tl.block, sizeof L->block);
        L->smem = tl.smem;
        L->ws_bytes = tl.ws_bytes;
        L->ws_zero = tl.ws_zero_bytes;
        L->splits = tl.splits;
        L->fn = ck->fn_tma;
        return;
    }
    tgc_cuda_template_launch(&ck->tpl, k, g, sms, L->grid, L->block, &L->smem, &L->ws_bytes);
    if (L->ws_bytes)
        L->ws_zero = tgc_cuda_template_ws_zero_bytes(&ck->tpl, k, g, sms);
    L->fn = ck->fn;
}

/* The kernel parameters of launch L: NAME (bufs, sizes, g, ws) or NAME_tma (bufs, sizes, g,
 * maps, ws, splits); *wsp the workspace's address. */
static void template_params(tpl_launch *L, void *const *bufs, const int64_t *sizes,
                            tgc_gemm_geom *g, void **wsp, void *params[7])
{
    params[0] = (void *)bufs;
    params[1] = (void *)sizes;
    params[2] = g;
    params[3] = wsp;
    if (L->tma) {
        params[3] = &L->ma;
        params[4] = &L->mb;
        params[5] = wsp;
        params[6] = &L->splits;
    }
}

/* The mean time of one launch of ck's kernel for geometry g on buffers bufs (autotuning). */
static tgc_status time_candidate(const cuda_kernel *ck, const kir_kernel *k, tgc_gemm_geom *g,
                                 void *const *bufs, const int64_t *sizes, int sms, CUstream s,
                                 double *us)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    tpl_launch L;
    plan_template_launch(ck, k, g, bufs, sms, &L);
    CUdeviceptr ws = 0;
    CUresult r = CUDA_SUCCESS;
    if (L.ws_bytes) {
        r = d->cuMemAlloc(&ws, L.ws_bytes);
        if (r == CUDA_SUCCESS && L.ws_zero)
            r = d->cuMemsetD8Async(ws, 0, L.ws_zero, s);
    }
    if (r != CUDA_SUCCESS) {
        if (ws)
            d->cuMemFree(ws);
        return tgc_cuda_error(r, "a split-K workspace");
    }
    void *wsp = (void *)(uintptr_t)ws, *params[7];
    template_params(&L, bufs, sizes, g, &wsp, params);
    tgc_status st = tgc_cuda_tune_time(L.fn, L.grid, L.block, L.smem, params, s, us);
    if (ws) {
        d->cuStreamSynchronize(s);
        d->cuMemFree(ws);
    }
    return st;
}

static tgc_status cuda_run_template(const tgc_plan_kernel *pk, void *const *bufs,
                                    const int64_t *sizes, const tgc_launch_env *env)
{
    const kir_kernel *k = pk->k;
    const cuda_kernel *ck = pk->handle;
    CUstream s;
    tgc_status st = enter_stream(env, &s);
    if (st != TGC_OK)
        return st;
    tgc_gemm_geom g;
    tgc_cuda_template_geom(k, env->syms, env->symvals, &g);
    int sms = tgc_cuda_props_of(env->device.index)->sms;
    tpl_launch L;
    plan_template_launch(ck, k, &g, bufs, sms, &L);
    /* The split-K workspace: allocated on the launch's stream (the thread's current one:
     * the executor made the plan's stream current for the call) and unreferenced once the
     * launch is queued, so the allocator hands the block out again only to later work on
     * that stream; a launch on another stream at the same time gets a block of its own. The
     * tile counters are cleared on the stream first (a kernel leaves them zero, but a block
     * from the cache may hold anything). */
    tgc_storage *ws = NULL;
    if (L.ws_bytes) {
        ws = tgc_storage_new(L.ws_bytes, env->device);
        if (!ws)
            return tgc_keep_error(TGC_ERR_OOM,
                                  "tgc cuda: out of memory for the split-K workspace of %s "
                                  "(%zu bytes)",
                                  pk->name, L.ws_bytes);
        CUresult r = L.ws_zero
                         ? tgc_cuda_drv()->cuMemsetD8Async((CUdeviceptr)ws->data, 0, L.ws_zero, s)
                         : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) {
            tgc_storage_unref(ws);
            return tgc_cuda_error(r, "tgc cuda: clearing a split-K workspace");
        }
    }
    void *wsp = ws ? ws->data : NULL, *params[7];
    template_params(&L, bufs, sizes, &g, &wsp, params);
    st = launch_fn(pk, L.fn, L.grid, L.block, L.smem, s, params);
    if (ws)
        tgc_storage_unref(ws);
    return st;
}

static tgc_status cuda_run_node(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                tgc_tensor **out, const tgc_launch_env *env)
{
    if (!tgc_cuda_op_supported(nd))
        return TGC_ERR_UNSUPPORTED;
    tgc_status st = tgc_cuda_enter(env->device.index);
    return st == TGC_OK ? tgc_cuda_op_run(nd, ins, shape, out, env) : st;
}

static tgc_status cuda_synchronize(tgc_device dev)
{
    return tgc_cuda_sync(dev.index);
}

static uint64_t cuda_stream_key(tgc_device dev)
{
    return tgc_cuda_stream_key(dev.index);
}

static void *cuda_use_stream(tgc_device dev, void *stream)
{
    if (tgc_cuda_enter(dev.index) != TGC_OK)
        return NULL;
    return tgc_cuda_stream_swap(dev.index, (CUstream)stream);
}

/* ---- autotuning (cfg.autotune; cuda_autotune.h) ---- */

/* Candidates cds[0..n) of pk (cds[i].force.bm 0: the heuristic's tile) rendered, compiled
 * together (NVRTC runs them in parallel; the program cache answers at once for one compiled
 * before) and bound into ks[i] (without the TMA entry where cds[i].tma is 0); ok[i] 0 for one
 * the templates refuse. TGC_OK when at least one is bound. */
static tgc_status tune_build(const tgc_config *cfg, int dev, int sm, const tgc_plan_kernel *pk,
                             const tgc_cuda_tune_cand *cds, int n, cuda_kernel *ks, int *ok)
{
    char *texts[TGC_CUDA_TUNE_MAX] = {0};
    tgc_cuda_program_src srcs[TGC_CUDA_TUNE_MAX];
    const tgc_cuda_program *progs[TGC_CUDA_TUNE_MAX];
    int idx[TGC_CUDA_TUNE_MAX], m = 0;
    for (int i = 0; i < n; i++) {
        ok[i] = 0;
        memset(&ks[i], 0, sizeof ks[i]);
        if (render_program(pk, &ks[i], cfg->matmul_precision, sm,
                           cds[i].force.bm ? &cds[i].force : NULL, &texts[i]) != TGC_OK) {
            tgc_clear_error(); /* a tile the templates refuse */
            continue;
        }
        srcs[m] = (tgc_cuda_program_src){pk->name, texts[i]};
        idx[m++] = i;
    }
    tgc_status st = m ? tgc_cuda_programs_get(m, srcs, sm, cfg->cache_dir, progs, NULL)
                      : tgc_set_error(TGC_ERR_UNSUPPORTED, "no candidate renders");
    int bound = 0;
    for (int j = 0; st == TGC_OK && j < m; j++) {
        int i = idx[j];
        if (bind_kernel(progs[j], dev, pk->name, pk, &ks[i]) != TGC_OK) {
            drop_kernel(&ks[i]);
            tgc_clear_error();
            continue;
        }
        if (!cds[i].tma)
            ks[i].fn_tma = NULL; /* NAME alone */
        ok[i] = 1;
        bound++;
    }
    for (int i = 0; i < n; i++)
        free(texts[i]);
    if (st == TGC_OK && !bound)
        st = tgc_set_error(TGC_ERR_UNSUPPORTED, "no candidate loads");
    return st;
}

static int64_t value_numel(const tgc_graph *g, int32_t v)
{
    int64_t n = 1;
    for (int d = 0; d < g->nodes[v].out.ndim; d++)
        n *= tgc_sym_eval(g->syms, g->nodes[v].out.shape[d], NULL);
    return n;
}

/* Measures the candidates of template kernel pk (the heuristic's bound in *ck) on
 * scratch buffers of its sizes and installs the fastest in *ck; *win the winner. */
static tgc_status tune_measure(const tgc_config *cfg, int dev, int sm, const char *name,
                               const tgc_graph *g, tgc_plan_kernel *pk, cuda_kernel *ck,
                               tgc_autotune level, tgc_cuda_tune_cand *win)
{
    const kir_kernel *k = pk->k;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    tgc_cuda_tune_cand cands[TGC_CUDA_TUNE_MAX];
    int nc = tgc_cuda_tune_candidates(&ck->tpl, level, cands, TGC_CUDA_TUNE_MAX);
    cands[0].force.bm = 0; /* the heuristic: its own text, unforced */
    void *bufs[64] = {0};
    int64_t sizes[256] = {0};
    if (k->n_bufs > 64 || kir_args_words(&pk->slots) > 256)
        return tgc_set_error(TGC_ERR_UNSUPPORTED, "too many buffers or sizes to measure");
    for (int j = 0; j < pk->slots.n; j++)
        sizes[j] = tgc_sym_eval(g->syms, pk->slots.dims[j], NULL);
    CUstream s = NULL;
    CUresult r = d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    for (int b = 0; r == CUDA_SUCCESS && b < k->n_bufs; b++) {
        size_t bytes = (size_t)value_numel(g, k->bufs[b].value) * tgc_dtype_size(k->bufs[b].dtype);
        CUdeviceptr p = 0;
        r = d->cuMemAlloc(&p, bytes + 256);
        if (r == CUDA_SUCCESS) /* finite values in every dtype (0x3c00: 1.0 in f16) */
            r = d->cuMemsetD32Async(p, 0x3c003c00u, (bytes + 256) / 4, s);
        bufs[b] = (void *)(uintptr_t)p;
    }
    tgc_status st = r == CUDA_SUCCESS ? TGC_OK : tgc_cuda_error(r, "scratch buffers");
    tgc_gemm_geom geo;
    tgc_cuda_template_geom(k, g->syms, NULL, &geo);
    const int sms = tgc_cuda_props_of(dev)->sms;
    double best = 0, first = 0;
    int bi = -1, measured = 0;
    cuda_kernel cks[TGC_CUDA_TUNE_MAX];
    int ok[TGC_CUDA_TUNE_MAX] = {0};
    if (st == TGC_OK)
        st = tune_build(cfg, dev, sm, pk, cands, nc, cks, ok);
    for (int i = 0; st == TGC_OK && i < nc; i++) {
        if (!ok[i])
            continue;
        double us = 0;
        if (time_candidate(&cks[i], k, &geo, bufs, sizes, sms, s, &us) != TGC_OK) {
            st = tgc_last_status();
            break;
        }
        measured++;
        if (i == 0)
            first = us;
        char desc[256];
        tgc_cuda_tpl_describe(&cks[i].tpl, desc, sizeof desc);
        tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc cuda: autotune %s of '%s': %.2f us %s%s", pk->name,
                    name, us, desc, cks[i].fn_tma ? "" : " (no TMA entry)");
        if (bi < 0 || us < best) {
            best = us;
            bi = i;
        }
    }
    cuda_kernel bestk = {0};
    for (int i = 0; i < nc; i++)
        if (ok[i]) {
            if (st == TGC_OK && i == bi)
                bestk = cks[i];
            else
                drop_kernel(&cks[i]);
        }
    if (s) {
        d->cuStreamSynchronize(s);
        d->cuStreamDestroy(s);
    }
    for (int b = 0; b < k->n_bufs; b++)
        if (bufs[b])
            d->cuMemFree((CUdeviceptr)(uintptr_t)bufs[b]);
    if (st != TGC_OK || bi < 0) {
        drop_kernel(&bestk);
        return st != TGC_OK ? st : tgc_set_error(TGC_ERR_UNSUPPORTED, "no candidate ran");
    }
    tgc_log_msg(cfg, TGC_LOG_KERNELS,
                "tgc cuda: autotune %s of '%s': %d candidates measured, the fastest %.2f us "
                "(the heuristic's %.2f us)%s",
                pk->name, name, measured, best, first, bi == 0 ? ": the heuristic's tile" : "");
    *win = cands[bi];
    drop_kernel(ck);
    *ck = bestk;
    return TGC_OK;
}

/* cfg's autotuning level: cfg.autotune, else FULL for the mode MAX_AUTOTUNE. */
static tgc_autotune tune_level(const tgc_config *cfg)
{
    return cfg->autotune != TGC_AUTOTUNE_OFF    ? cfg->autotune
           : cfg->mode == TGC_MODE_MAX_AUTOTUNE ? TGC_AUTOTUNE_FULL
                                                : TGC_AUTOTUNE_OFF;
}

/* Every template kernel of a variant without symbolic sizes gets its remembered tile, or has
 * its candidates measured (the choice then remembered). Best effort: a kernel whose tuning
 * fails keeps the heuristic's tile (said once on the kernels channel). */
static void autotune_kernels(const tgc_config *cfg, int dev, int sm, const char *name,
                             const tgc_graph *g, tgc_plan_kernel *ks, int n, cuda_code *c,
                             char *const *texts)
{
    tgc_autotune level = tune_level(cfg);
    if (level == TGC_AUTOTUNE_OFF || tgc_sym_count(g->syms) != 0)
        return;
    for (int i = 0; i < n; i++) {
        if (ks[i].k->kind == KIR_LOOP || !texts[i])
            continue;
        char *key = tgc_cuda_tune_key(texts[i], sm, dev, level);
        tgc_cuda_tune_cand win;
        tgc_status st = key ? TGC_OK : tgc_last_status();
        if (st == TGC_OK && tgc_cuda_tune_recall(key, cfg->cache_dir, &win)) {
            cuda_kernel nk;
            int ok = 0;
            st = tune_build(cfg, dev, sm, &ks[i], &win, 1, &nk, &ok);
            if (st == TGC_OK) {
                drop_kernel(&c->kernels[i]);
                c->kernels[i] = nk;
                tgc_log_msg(cfg, TGC_LOG_KERNELS, "tgc cuda: autotune %s of '%s': remembered",
                            ks[i].name, name);
            }
        } else if (st == TGC_OK) {
            st = tune_measure(cfg, dev, sm, name, g, &ks[i], &c->kernels[i], level, &win);
            if (st == TGC_OK)
                tgc_cuda_tune_remember(key, cfg->cache_dir, &win);
        }
        if (st != TGC_OK) {
            tgc_log_msg(cfg, TGC_LOG_KERNELS,
                        "tgc cuda: autotune %s of '%s' kept the heuristic's tile: %s", ks[i].name,
                        name, tgc_last_error());
            tgc_clear_error();
        }
        free(key);
    }
}

/* ---- CUDA graphs (REDUCE_OVERHEAD, backend/replay.c) ---- */

typedef struct cuda_cap {
    CUstream s;
    tgc_cuda_pool *pool;
} cuda_cap;

typedef struct cuda_graph {
    int dev;
    CUgraphExec exec;
    tgc_cuda_pool *pool;
} cuda_graph;

static tgc_status cap_begin(tgc_device dev, void **out)
{
    *out = NULL;
    tgc_status st = tgc_cuda_enter(dev.index);
    if (st != TGC_OK)
        return st;
    cuda_cap *c = calloc(1, sizeof *c);
    if (!c)
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    if (!(c->s = tgc_cuda_stream(dev.index))) {
        free(c);
        return tgc_last_status();
    }
    /* thread-local: other threads' unsafe calls do not break it; the pool switches the mode
     * to relaxed around its own allocations */
    st = tgc_cuda_error(
        tgc_cuda_drv()->cuStreamBeginCapture(c->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "tgc cuda: beginning a graph capture");
    if (st == TGC_OK && !(c->pool = tgc_cuda_pool_begin(dev.index, c->s))) {
        st = tgc_last_status();
        CUgraph g = NULL;
        tgc_cuda_drv()->cuStreamEndCapture(c->s, &g);
        if (g)
            tgc_cuda_drv()->cuGraphDestroy(g);
    }
    if (st != TGC_OK) {
        free(c);
        return st;
    }
    *out = c;
    return TGC_OK;
}

static void graph_release(void *graph)
{
    cuda_graph *g = graph;
    if (!g)
        return;
    if (g->exec && tgc_cuda_enter(g->dev) == TGC_OK)
        tgc_cuda_drv()->cuGraphExecDestroy(g->exec);
    tgc_cuda_pool_release(g->pool);
    free(g);
}

static tgc_status cap_end(tgc_device dev, void *cap, void **out)
{
    cuda_cap *c = cap;
    *out = NULL;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    tgc_cuda_pool_end(c->pool);
    CUgraph graph = NULL;
    tgc_status st =
        tgc_cuda_error(d->cuStreamEndCapture(c->s, &graph), "tgc cuda: ending a graph capture");
    cuda_graph *g = calloc(1, sizeof *g);
    if (st == TGC_OK && !g)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    if (st == TGC_OK) {
        g->dev = dev.index;
        g->pool = c->pool;
        c->pool = NULL;
        st = tgc_cuda_error(d->cuGraphInstantiateWithFlags(&g->exec, graph, 0),
                            "tgc cuda: instantiating a captured graph");
        if (st == TGC_OK) /* upload once, so the first replay does not pay for it */
            st = tgc_cuda_error(d->cuGraphUpload(g->exec, c->s), "tgc cuda: uploading a graph");
    }
    if (graph)
        d->cuGraphDestroy(graph);
    if (st != TGC_OK) {
        graph_release(g);
        if (c->pool)
            tgc_cuda_pool_release(c->pool);
        free(c);
        return st;
    }
    free(c);
    *out = g;
    return TGC_OK;
}

static tgc_status graph_launch(tgc_device dev, void *graph)
{
    cuda_graph *g = graph;
    CUstream s = tgc_cuda_stream(dev.index);
    if (!s)
        return tgc_last_status();
    return tgc_cuda_error(tgc_cuda_drv()->cuGraphLaunch(g->exec, s),
                          "tgc cuda: launching a captured graph");
}

static tgc_status copy_async(tgc_device dev, void *dst, const void *src, size_t n)
{
    CUstream s = tgc_cuda_stream(dev.index);
    if (!s)
        return tgc_last_status();
    return tgc_cuda_error(
        tgc_cuda_drv()->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, s),
        "tgc cuda: copying an input of a captured graph");
}

static const tgc_capture_ops capture_ops = {cap_begin, cap_end, graph_launch, graph_release,
                                            copy_async};

static const char cuda_name[] = "cuda";

static void fill_vtable(void)
{
    vtable = (tgc_backend){
        .name = cuda_name,
        .device = TGC_DEVICE_CUDA,
        .reg = &tgc_cuda_backend_reg,
        .decompose_keep = tgc_cuda_decompose_keep(),
        .prepare = tgc_cuda_prepare,
        .fuse = tgc_cuda_fuse_hooks(),
        .target = tgc_cuda_kir_target,
        .compile = cuda_compile,
        .launch = cuda_launch,
        .batch_fits = cuda_batch_fits,
        .launch_batch = cuda_launch_batch,
        .run_template = cuda_run_template,
        .run_node = cuda_run_node,
        .node_supported = tgc_cuda_op_supported,
        .use_stream = cuda_use_stream,
        .stream_key = cuda_stream_key,
        .capture = &capture_ops,
        .release_code = release_code,
        .synchronize = cuda_synchronize,
    };
}

static void *cuda_stream_of(const tgc_config *cfg)
{
    return cfg->cuda_stream;
}

const tgc_backend_reg tgc_cuda_backend_reg = {
    .name = cuda_name,
    .kinds = {{TGC_BACKEND_CUDA, NULL}},
    .n_kinds = 1,
    .device = TGC_DEVICE_CUDA,
    .device_ops = &tgc_cuda_device_ops, /* runtime/cuda_hooks.c */
    .device_what = "the GPU",
    .device_ctor = "tgc_cuda(i)",
    .priority = 1,
    .get = tgc_backend_cuda,
    .stream_of = cuda_stream_of,
};
