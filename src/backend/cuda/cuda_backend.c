/* The CUDA backend: what is CUDA's own in the shared pipeline (backend.h).
 *
 * The driver (driver.c) hands it the kernels of a variant; compile renders each to CUDA C
 * (LOOP kernels: cuda_render.c; GEMM / conv templates with their epilogues: cuda_gemm.c),
 * groups them into a few programs (prelude + kernels), compiles the programs with NVRTC on
 * several threads at once for the device's own sm_XY, loads each cubin into the device's
 * primary context and looks the kernels up. The executor (exec.c) launches them on the
 * call's stream (cfg.cuda_stream, else the thread's stream for the device); nodes fusion
 * leaves OPAQUE run natively (cuda_ops.c: indexing, concatenation, losses, attention, ...),
 * so no data goes through the host. The fusion hooks and graph preparation are
 * cuda_classify.c's.
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
#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_classify.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_target.h"
#include "backend/plan.h"
#include "runtime/cuda.h"
#include "runtime/parallel.h"
#include "runtime/storage.h"
#include "support/dirs.h"
#include "support/error.h"
#include "support/file.h"
#include "support/strbuf.h"

/* Every kernel is rendered under this one name into a program of its own (prelude +
 * kernel), so a program's text depends only on what the kernel computes: equal kernels
 * (the same conv in two blocks of a ResNet, the same op in two variants, an eager op and a
 * compiled one) are compiled by NVRTC once per process and loaded once per device
 * (the module cache below). The programs of a variant that are not cached yet compile on
 * all cores at once. */
#define KERNEL_NAME "tgc_k"

typedef struct cuda_kernel {
    CUfunction fn;
    tgc_cuda_launch loop; /* LOOP */
    tgc_cuda_tpl tpl;     /* GEMM / CONV */
} cuda_kernel;

/* The code of a variant: its kernels' handles (their modules live in the module cache for
 * the life of the process, like the eager engine's plans). */
typedef struct cuda_code {
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

static void release_code(void *code)
{
    cuda_code *c = code;
    if (!c)
        return;
    free(c->kernels);
    free(c);
}

/* ---- the module cache: program text -> cubin, loaded once per device ---- */

typedef struct mod_entry {
    uint64_t hash;
    char *text;
    char *cubin;
    size_t cubin_size;
    CUmodule mod[TGC_CUDA_MAX_DEVICES];
    CUfunction fn[TGC_CUDA_MAX_DEVICES];
    struct mod_entry *next;
} mod_entry;

#define MOD_BUCKETS 512
static mod_entry *g_mods[MOD_BUCKETS];
static pthread_mutex_t g_mods_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t text_hash(const char *t)
{
    uint64_t h = 1469598103934665603ull;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ull;
    return h;
}

static mod_entry *mod_find(const char *text, uint64_t h)
{
    for (mod_entry *e = g_mods[h % MOD_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->text, text) == 0)
            return e;
    return NULL;
}

/* Adds text (malloc'd) with its cubin (malloc'd) to the cache, which owns both from now on
 * (freed at once when another thread added the same text meanwhile). Under g_mods_lock. */
static mod_entry *mod_insert(char *text, uint64_t h, char *cubin, size_t size)
{
    mod_entry *e = mod_find(text, h);
    if (e) { /* another thread compiled it meanwhile */
        free(text);
        free(cubin);
        return e;
    }
    e = calloc(1, sizeof *e);
    if (!e) {
        free(text);
        free(cubin);
        return NULL;
    }
    e->hash = h;
    e->text = text;
    e->cubin = cubin;
    e->cubin_size = size;
    e->next = g_mods[h % MOD_BUCKETS];
    g_mods[h % MOD_BUCKETS] = e;
    return e;
}

/* The kernel of entry e on device dev (loaded on first use; under g_mods_lock). */
static tgc_status mod_function(mod_entry *e, int dev, const char *what, CUfunction *fn)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    if (!e->mod[dev]) {
        char w[400];
        snprintf(w, sizeof w, "tgc cuda: loading %s (cuModuleLoadData)", what);
        CUmodule m;
        tgc_status st = tgc_cuda_error(d->cuModuleLoadData(&m, e->cubin), w);
        if (st != TGC_OK)
            return st;
        snprintf(w, sizeof w, "tgc cuda: %s (cuModuleGetFunction)", what);
        CUfunction f;
        st = tgc_cuda_error(d->cuModuleGetFunction(&f, m, KERNEL_NAME), w);
        if (st != TGC_OK) {
            d->cuModuleUnload(m);
            return st;
        }
        e->mod[dev] = m;
        e->fn[dev] = f;
    }
    *fn = e->fn[dev];
    return TGC_OK;
}

/* ---- the persistent cache (cfg.cache_dir) ----
 * One file per program, <dir>/tgc-cuda-sm<sm>-<hash of the text>.cubin: a magic line, the
 * program text's length and bytes (compared in full on load, so a hash collision or a file of
 * another build never loads), then the cubin's length and bytes. Written to a temporary name
 * and renamed, so concurrent processes never see half a file. Best effort: a file that cannot
 * be read or written is compiled again. */

#define DISK_MAGIC "tgc-cuda-cubin 1\n"

static void disk_path(const char *dir, int sm, uint64_t h, char *buf, size_t n)
{
    snprintf(buf, n, "%s/tgc-cuda-sm%d-%016llx.cubin", dir, sm, (unsigned long long)h);
}

static int disk_load(const char *dir, int sm, const char *text, uint64_t h, char **cubin,
                     size_t *size)
{
    char path[4096];
    disk_path(dir, sm, h, path, sizeof path);
    int fd = tgc_file_open_read(path, NULL, NULL); /* a pipe or device there is a miss */
    FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char magic[sizeof DISK_MAGIC];
    uint64_t tl = 0, cl = 0;
    size_t want = strlen(text);
    int ok = fread(magic, 1, sizeof DISK_MAGIC - 1, fp) == sizeof DISK_MAGIC - 1 &&
             memcmp(magic, DISK_MAGIC, sizeof DISK_MAGIC - 1) == 0 &&
             fread(&tl, sizeof tl, 1, fp) == 1 && tl == want;
    char *t = ok ? malloc(want + 1) : NULL;
    ok = ok && t && fread(t, 1, want, fp) == want && memcmp(t, text, want) == 0 &&
         fread(&cl, sizeof cl, 1, fp) == 1 && cl > 0 && cl < ((uint64_t)1 << 32);
    free(t);
    char *c = ok ? malloc((size_t)cl) : NULL;
    ok = ok && c && fread(c, 1, (size_t)cl, fp) == cl;
    fclose(fp);
    if (!ok) {
        free(c);
        return 0;
    }
    *cubin = c;
    *size = (size_t)cl;
    return 1;
}

static void disk_store(const char *dir, int sm, const char *text, uint64_t h, const char *cubin,
                       size_t size)
{
    char path[4096], tmp[4200];
    disk_path(dir, sm, h, path, sizeof path);
    if (!tgc_dir_ensure(NULL, dir, "the compile cache directory (cfg.cache_dir, TGC_CACHE_DIR)",
                        "compiled CUDA programs are not cached on disk"))
        return;
    snprintf(tmp, sizeof tmp, "%s.%ld.%lx.tmp", path, (long)getpid(),
             (unsigned long)pthread_self());
    FILE *fp = fopen(tmp, "wb");
    if (!fp)
        return;
    uint64_t tl = strlen(text), cl = size;
    int ok = fwrite(DISK_MAGIC, 1, sizeof DISK_MAGIC - 1, fp) == sizeof DISK_MAGIC - 1 &&
             fwrite(&tl, sizeof tl, 1, fp) == 1 && fwrite(text, 1, tl, fp) == tl &&
             fwrite(&cl, sizeof cl, 1, fp) == 1 && fwrite(cubin, 1, size, fp) == size;
    ok = fclose(fp) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

int tgc_cuda_disk_load(const char *dir, int sm, const char *text, char **cubin, size_t *size)
{
    return dir && *dir && disk_load(dir, sm, text, text_hash(text), cubin, size);
}

void tgc_cuda_disk_store(const char *dir, int sm, const char *text, const char *cubin, size_t size)
{
    if (dir && *dir)
        disk_store(dir, sm, text, text_hash(text), cubin, size);
}

/* ---- compile ---- */

/* Renders kernel pk as a whole program (prelude + the kernel as KERNEL_NAME) into *text. */
static tgc_status render_program(tgc_plan_kernel *pk, cuda_kernel *ck, const tgc_config *cfg,
                                 int sm, char **text)
{
    const kir_kernel *k = pk->k;
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, tgc_cuda_prelude());
    tgc_status st = k->kind == KIR_LOOP
                        ? tgc_cuda_render_loop(&sb, k, &pk->slots, KERNEL_NAME, &ck->loop)
                        : tgc_cuda_render_template(&sb, k, &pk->slots, KERNEL_NAME,
                                                   cfg->matmul_precision, sm, &ck->tpl);
    *text = tgc_sb_take(&sb);
    if (st == TGC_OK && !*text)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory rendering kernel %s", pk->name);
    if (st != TGC_OK) {
        free(*text);
        *text = NULL;
    }
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
    for (int i = 0; i < n; i++) {
        if (texts[i]) {
            tgc_sb_printf(&cu, "// ---- kernel %s (%d of %d) ----\n", ks[i].name, i + 1, n);
            tgc_sb_puts(&cu, texts[i]);
        }
        if (ptxs && ptxs[i]) {
            tgc_sb_printf(&ptx, "// ---- kernel %s ----\n", ks[i].name);
            tgc_sb_puts(&ptx, ptxs[i]);
        }
    }
    char *t = tgc_sb_take(&cu);
    tgc_backend_dump_text(cfg, name, "cu", t);
    free(t);
    t = tgc_sb_take(&ptx);
    tgc_backend_dump_text(cfg, name, "ptx", t);
    free(t);
}

static tgc_status cuda_compile(const tgc_config *cfg, tgc_device dev, const char *name,
                               tgc_plan_kernel *ks, int n, void **out)
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
    c->dev = dev.index;
    c->n = n;
    size_t cnt = (size_t)(n ? n : 1);
    c->kernels = calloc(cnt, sizeof *c->kernels);
    char **texts = calloc(cnt, sizeof *texts);
    uint64_t *hashes = calloc(cnt, sizeof *hashes);
    mod_entry **ents = calloc(cnt, sizeof *ents);
    /* the programs to compile now: distinct texts not in the cache */
    int *todo = calloc(cnt, sizeof *todo), n_todo = 0;
    const char **tnames = calloc(cnt, sizeof *tnames), **tsrcs = calloc(cnt, sizeof *tsrcs);
    char **cubins = calloc(cnt, sizeof *cubins), **ptxs = calloc(cnt, sizeof *ptxs);
    char **ptx_of = calloc(cnt, sizeof *ptx_of);
    size_t *sizes = calloc(cnt, sizeof *sizes);
    if (!c->kernels || !texts || !hashes || !ents || !todo || !tnames || !tsrcs || !cubins ||
        !ptxs || !ptx_of || !sizes)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
    for (int i = 0; st == TGC_OK && i < n; i++) {
        st = render_program(&ks[i], &c->kernels[i], cfg, sm, &texts[i]);
        if (st == TGC_OK)
            hashes[i] = text_hash(texts[i]);
    }
    if (st == TGC_OK) {
        pthread_mutex_lock(&g_mods_lock);
        for (int i = 0; i < n; i++) {
            ents[i] = mod_find(texts[i], hashes[i]);
            int dup = 0;
            for (int j = 0; !ents[i] && j < n_todo && !dup; j++)
                dup = hashes[todo[j]] == hashes[i] && strcmp(texts[todo[j]], texts[i]) == 0;
            if (!ents[i] && !dup)
                todo[n_todo++] = i;
        }
        pthread_mutex_unlock(&g_mods_lock);
        for (int j = 0; j < n_todo; j++) {
            tnames[j] = ks[todo[j]].name;
            tsrcs[j] = texts[todo[j]];
        }
        /* cfg.cache_dir: programs compiled by an earlier process load from disk; NVRTC
         * runs on the rest (compacted to the front of the name / source lists) */
        int n_nv = 0, *nv = calloc((size_t)(n_todo ? n_todo : 1), sizeof *nv);
        if (!nv)
            st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
        for (int j = 0; st == TGC_OK && j < n_todo; j++)
            if (!cfg->cache_dir ||
                !disk_load(cfg->cache_dir, sm, tsrcs[j], hashes[todo[j]], &cubins[j], &sizes[j]))
                nv[n_nv++] = j;
        const char **nnames = NULL, **nsrcs = NULL;
        char **ncub = NULL, **nptx = NULL;
        size_t *nsz = NULL;
        if (st == TGC_OK && n_nv) {
            nnames = calloc((size_t)n_nv, sizeof *nnames);
            nsrcs = calloc((size_t)n_nv, sizeof *nsrcs);
            ncub = calloc((size_t)n_nv, sizeof *ncub);
            nptx = calloc((size_t)n_nv, sizeof *nptx);
            nsz = calloc((size_t)n_nv, sizeof *nsz);
            if (!nnames || !nsrcs || !ncub || !nptx || !nsz)
                st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
            for (int q = 0; st == TGC_OK && q < n_nv; q++) {
                nnames[q] = tnames[nv[q]];
                nsrcs[q] = tsrcs[nv[q]];
            }
            if (st == TGC_OK)
                st = tgc_nvrtc_compile_all(n_nv, nnames, nsrcs, sm, tgc_threads_resolve(0), ncub,
                                           nsz, cfg->dump_dir ? nptx : NULL);
            for (int q = 0; st == TGC_OK && q < n_nv; q++) {
                cubins[nv[q]] = ncub[q];
                sizes[nv[q]] = nsz[q];
                ptxs[nv[q]] = nptx[q];
                if (cfg->cache_dir)
                    disk_store(cfg->cache_dir, sm, nsrcs[q], hashes[todo[nv[q]]], ncub[q], nsz[q]);
            }
        }
        free(nv);
        free(nnames);
        free(nsrcs);
        free(ncub);
        free(nptx);
        free(nsz);
        if (st != TGC_OK) /* keep the name of the variant with NVRTC's reason */
            tgc_keep_error(st, "tgc cuda: compiling '%s'", name);
    }
    if (cfg->dump_dir) {
        for (int j = 0; j < n_todo; j++)
            ptx_of[todo[j]] = ptxs[j];
        dump_code(cfg, name, ks, n, texts, ptx_of);
    }
    if (st == TGC_OK) {
        pthread_mutex_lock(&g_mods_lock);
        for (int j = 0; j < n_todo && st == TGC_OK; j++) {
            int i = todo[j];
            char *copy = strdup(texts[i]);
            if (!copy || !mod_insert(copy, hashes[i], cubins[j], sizes[j]))
                st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory");
            cubins[j] = NULL; /* the cache's now (or freed) */
        }
        for (int i = 0; st == TGC_OK && i < n; i++) {
            cuda_kernel *ck = &c->kernels[i];
            mod_entry *e = ents[i] ? ents[i] : mod_find(texts[i], hashes[i]);
            if (!e) {
                st = tgc_set_error(TGC_ERR_INTERNAL, "tgc cuda: kernel %s lost its module",
                                   ks[i].name);
                break;
            }
            char what[300];
            snprintf(what, sizeof what, "kernel %.31s of '%.200s'", ks[i].name, name);
            st = mod_function(e, dev.index, what, &ck->fn);
            unsigned smem = ks[i].k->kind == KIR_LOOP ? ck->loop.smem_bytes : ck->tpl.smem_bytes;
            if (st == TGC_OK && smem > 48 * 1024) {
                char w[360];
                snprintf(w, sizeof w, "tgc cuda: %s asks for %u bytes of shared memory", what,
                         smem);
                st = tgc_cuda_error(
                    tgc_cuda_drv()->cuFuncSetAttribute(
                        ck->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem),
                    w);
            }
            ks[i].handle = ck;
        }
        pthread_mutex_unlock(&g_mods_lock);
    }
    for (int i = 0; i < n && texts; i++)
        free(texts[i]);
    for (int j = 0; j < n_todo; j++) {
        free(cubins[j]);
        free(ptxs[j]);
    }
    free(texts);
    free(hashes);
    free(ents);
    free(todo);
    free(tnames);
    free(tsrcs);
    free(cubins);
    free(ptxs);
    free(ptx_of);
    free(sizes);
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
    const kir_kernel *k = pk->k;
    const cuda_kernel *ck = pk->handle;
    tgc_status st = tgc_cuda_enter(env->device.index);
    if (st != TGC_OK)
        return st;
    CUstream s = stream_of(env);
    if (!s)
        return tgc_last_status();
    int64_t extents[KIR_MAX_DIMS];
    for (int d = 0; d < k->n_outer + k->n_inner; d++)
        extents[d] = ev(env, k->extent[d]);
    unsigned grid[3], block[3], smem;
    tgc_cuda_launch_dims(&ck->loop, k, extents, tgc_cuda_props_of(env->device.index)->sms, grid,
                         block, &smem);
    void *params[2] = {(void *)bufs, (void *)sizes};
    return launch_fn(pk, ck->fn, grid, block, smem, s, params);
}

static tgc_status cuda_run_template(const tgc_plan_kernel *pk, void *const *bufs,
                                    const int64_t *sizes, const tgc_launch_env *env)
{
    const kir_kernel *k = pk->k;
    const cuda_kernel *ck = pk->handle;
    tgc_status st = tgc_cuda_enter(env->device.index);
    if (st != TGC_OK)
        return st;
    CUstream s = stream_of(env);
    if (!s)
        return tgc_last_status();
    tgc_gemm_geom g;
    tgc_cuda_template_geom(k, env->syms, env->symvals, &g);
    int sms = tgc_cuda_props_of(env->device.index)->sms;
    unsigned grid[3], block[3], smem;
    size_t ws_bytes = 0;
    tgc_cuda_template_launch(&ck->tpl, k, &g, sms, grid, block, &smem, &ws_bytes);
    /* The split-K workspace: allocated on the launch's stream (the thread's current one:
     * the executor made the plan's stream current for the call) and unreferenced once the
     * launch is queued, so the allocator hands the block out again only to later work on
     * that stream; a launch on another stream at the same time gets a block of its own. The
     * tile counters are cleared on the stream first (a kernel leaves them zero, but a block
     * from the cache may hold anything). */
    tgc_storage *ws = NULL;
    if (ws_bytes) {
        ws = tgc_storage_new(ws_bytes, env->device);
        if (!ws)
            return tgc_keep_error(TGC_ERR_OOM,
                                  "tgc cuda: out of memory for the split-K workspace of %s "
                                  "(%zu bytes)",
                                  pk->name, ws_bytes);
        size_t zero = tgc_cuda_template_ws_zero_bytes(&ck->tpl, k, &g, sms);
        CUresult r = zero ? tgc_cuda_drv()->cuMemsetD8Async((CUdeviceptr)ws->data, 0, zero, s)
                          : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) {
            tgc_storage_unref(ws);
            return tgc_cuda_error(r, "tgc cuda: clearing a split-K workspace");
        }
    }
    void *wsp = ws ? ws->data : NULL;
    void *params[4] = {(void *)bufs, (void *)sizes, &g, &wsp};
    st = launch_fn(pk, ck->fn, grid, block, smem, s, params);
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
