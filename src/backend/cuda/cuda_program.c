/* The CUDA program cache (see cuda_program.h): keys, the batch that compiles what memory and
 * disk lack, and the loads into device contexts. */
#include "backend/cuda/cuda_program.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_nvrtc.h"
#include "runtime/cuda.h"
#include "runtime/parallel.h"
#include "support/error.h"
#include "support/strbuf.h"

/* A program's data besides its cubin: its name and its module in each device's context. */
typedef struct prog_ext {
    char *name;
    CUmodule mod[TGC_CUDA_MAX_DEVICES];
} prog_ext;

static void ext_free(void *p)
{
    prog_ext *x = p;
    free(x->name);
    free(x);
}

/* Programs stay for the life of the process (their modules are loaded, and kernel handles
 * into them are kept by the plans and the native-op tables). */
static tgc_code_cache g_cache = TGC_CODE_CACHE_INIT(
    "cuda", "cubin", "compiled CUDA programs are not cached on disk", 0, ext_free);
/* Guards the modules of every program (loading one into a context). */
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;

static tgc_code_entry *entry_of(const tgc_cuda_program *p)
{
    return (tgc_code_entry *)p;
}

char *tgc_cuda_program_key(const char *text, int sm)
{
    int ma = 0, mi = 0;
    int have = tgc_nvrtc_version(&ma, &mi) == 0;
    if (!have)
        tgc_clear_error();
    tgc_nvrtc_opts o;
    tgc_nvrtc_options(text, sm, &o);
    tgc_strbuf sb = {0};
    tgc_sb_printf(&sb, "tgc-cuda-program 1\nsm %d\n", sm);
    if (have)
        tgc_sb_printf(&sb, "nvrtc %d.%d\n", ma, mi);
    else
        tgc_sb_puts(&sb, "nvrtc none\n");
    for (int i = 0; i < o.n; i++)
        tgc_sb_printf(&sb, "%s\n", o.v[i]);
    tgc_sb_puts(&sb, "\n");
    tgc_sb_puts(&sb, text);
    char *k = tgc_sb_take(&sb);
    if (!k)
        tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for a program's cache key");
    return k;
}

static void sm_tag(int sm, char *buf, size_t n)
{
    snprintf(buf, n, "sm%d", sm);
}

int tgc_cuda_program_disk_load(const char *dir, int sm, const char *text, char **cubin,
                               size_t *size)
{
    *cubin = NULL;
    *size = 0;
    if (!dir || !*dir || !text)
        return 0;
    char *key = tgc_cuda_program_key(text, sm);
    if (!key)
        return 0;
    char tag[16];
    sm_tag(sm, tag, sizeof tag);
    void *b = NULL;
    int ok = tgc_code_disk_load(&g_cache, dir, tag, key, &b, size);
    free(key);
    *cubin = b;
    return ok;
}

void tgc_cuda_program_disk_store(const char *dir, int sm, const char *text, const void *cubin,
                                 size_t size)
{
    if (!dir || !*dir || !text)
        return;
    char *key = tgc_cuda_program_key(text, sm);
    if (!key)
        return;
    char tag[16];
    sm_tag(sm, tag, sizeof tag);
    tgc_code_disk_store(&g_cache, dir, tag, key, cubin, size);
    free(key);
}

void tgc_cuda_program_stats(tgc_code_cache_stats *s)
{
    tgc_code_cache_stats_get(&g_cache, s);
}

static prog_ext *new_ext(const char *name)
{
    prog_ext *x = calloc(1, sizeof *x);
    if (x && !(x->name = strdup(name ? name : "tgc_program"))) {
        free(x);
        x = NULL;
    }
    return x;
}

/* Publishes program i (made by this call) with its cubin (taken); frees the cubin and fails
 * the entry when out of memory. */
static tgc_status publish(tgc_code_entry *e, const char *name, char *cubin, size_t size,
                          int from_disk)
{
    prog_ext *x = new_ext(name);
    if (!x) {
        free(cubin);
        tgc_status st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory caching %s", name);
        tgc_code_cache_fail(&g_cache, e, st);
        return st;
    }
    tgc_code_cache_publish(&g_cache, e, cubin, size, x, from_disk);
    return TGC_OK;
}

tgc_status tgc_cuda_programs_get(int n, const tgc_cuda_program_src *srcs, int sm, const char *dir,
                                 const tgc_cuda_program **progs, char **ptx)
{
    for (int i = 0; i < n; i++) {
        progs[i] = NULL;
        if (ptx)
            ptx[i] = NULL;
    }
    if (n <= 0)
        return TGC_OK;
    for (int i = 0; i < n; i++)
        if (!srcs[i].text)
            return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc cuda: program %d has no text", i);
    const size_t cnt = (size_t)n;
    tgc_code_entry **ents = calloc(cnt, sizeof *ents);
    char **keys = calloc(cnt, sizeof *keys);
    int *make = calloc(cnt, sizeof *make);
    /* the programs this call compiles: their index, name, text and results */
    int *todo = calloc(cnt, sizeof *todo), n_todo = 0;
    const char **names = calloc(cnt, sizeof *names), **texts = calloc(cnt, sizeof *texts);
    char **cubins = calloc(cnt, sizeof *cubins), **ptxs = calloc(cnt, sizeof *ptxs);
    size_t *sizes = calloc(cnt, sizeof *sizes);
    tgc_status st = TGC_OK;
    if (!ents || !keys || !make || !todo || !names || !texts || !cubins || !ptxs || !sizes)
        st = tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for %d programs", n);
    char tag[16];
    sm_tag(sm, tag, sizeof tag);
    int n_acq = 0;
    for (int i = 0; st == TGC_OK && i < n; i++, n_acq++) {
        keys[i] = tgc_cuda_program_key(srcs[i].text, sm);
        st = keys[i] ? tgc_code_cache_acquire(&g_cache, keys[i], &ents[i], &make[i]) : TGC_ERR_OOM;
    }
    /* the new ones: from disk where an earlier process left them, else compiled below */
    for (int i = 0; i < n_acq; i++) {
        if (!make[i])
            continue;
        void *b = NULL;
        size_t sz = 0;
        if (st == TGC_OK && tgc_code_disk_load(&g_cache, dir, tag, keys[i], &b, &sz)) {
            tgc_status s = publish(ents[i], srcs[i].name, b, sz, 1);
            if (s != TGC_OK) {
                st = s;
                make[i] = 0;
                ents[i] = NULL; /* failed: the entry is gone */
            }
            continue;
        }
        todo[n_todo] = i;
        names[n_todo] = srcs[i].name;
        texts[n_todo++] = srcs[i].text;
    }
    if (st == TGC_OK && n_todo)
        st = tgc_nvrtc_compile_all(n_todo, names, texts, sm, tgc_threads_resolve(0), cubins, sizes,
                                   ptx ? ptxs : NULL);
    for (int j = 0; j < n_todo; j++) {
        int i = todo[j];
        tgc_code_entry *e = ents[i];
        make[i] = 0;
        if (st != TGC_OK) {
            tgc_code_cache_fail(&g_cache, e, st);
            ents[i] = NULL;
            continue;
        }
        tgc_code_disk_store(&g_cache, dir, tag, keys[i], cubins[j], sizes[j]);
        if (ptx)
            ptx[i] = ptxs[j];
        ptxs[j] = NULL;
        tgc_status s = publish(e, names[j], cubins[j], sizes[j], 0);
        cubins[j] = NULL;
        if (s != TGC_OK) {
            ents[i] = NULL;
            st = s;
        }
    }
    /* keep the first failure's message over the waits below */
    char msg[2048] = "";
    if (st != TGC_OK)
        snprintf(msg, sizeof msg, "%s", tgc_last_error());
    /* the programs other threads (or this call, for repeated texts) were making */
    for (int i = 0; i < n_acq; i++) {
        if (!ents[i])
            continue;
        tgc_status s = tgc_code_cache_wait(&g_cache, ents[i]);
        if (s != TGC_OK) {
            ents[i] = NULL;
            if (st == TGC_OK) {
                st = s;
                snprintf(msg, sizeof msg, "%s", tgc_last_error());
            }
        }
    }
    for (int i = 0; i < n_acq; i++) {
        if (!ents[i])
            continue;
        if (st == TGC_OK)
            progs[i] = (const tgc_cuda_program *)ents[i];
        tgc_code_cache_release(&g_cache, ents[i]); /* programs stay: the pointer lives on */
    }
    if (st != TGC_OK) {
        for (int i = 0; i < n; i++) {
            progs[i] = NULL;
            if (ptx) {
                free(ptx[i]);
                ptx[i] = NULL;
            }
        }
        if (msg[0])
            tgc_set_error(st, "%s", msg);
    }
    for (int j = 0; j < n_todo; j++) {
        free(cubins[j]);
        free(ptxs[j]);
    }
    for (int i = 0; keys && i < n; i++)
        free(keys[i]);
    free(ents);
    free(keys);
    free(make);
    free(todo);
    free(names);
    free(texts);
    free(cubins);
    free(ptxs);
    free(sizes);
    return st;
}

tgc_status tgc_cuda_program_get(const char *name, const char *text, int sm, const char *dir,
                                const tgc_cuda_program **prog)
{
    tgc_cuda_program_src s = {name, text};
    return tgc_cuda_programs_get(1, &s, sm, dir, prog, NULL);
}

tgc_status tgc_cuda_program_function(const tgc_cuda_program *p, int dev, const char *entry,
                                     CUfunction *fn)
{
    *fn = NULL;
    tgc_code_entry *e = entry_of(p);
    prog_ext *x = e->ext;
    const tgc_cuda_driver *d = tgc_cuda_drv();
    if (dev < 0 || dev >= TGC_CUDA_MAX_DEVICES || !d)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: device cuda:%d is not available", dev);
    tgc_status st = tgc_cuda_enter(dev);
    if (st != TGC_OK)
        return st;
    char what[300];
    pthread_mutex_lock(&g_load_lock);
    CUmodule m = x->mod[dev];
    if (!m) {
        snprintf(what, sizeof what, "tgc cuda: loading %.200s (cuModuleLoadData)", x->name);
        st = tgc_cuda_error(d->cuModuleLoadData(&m, e->blob), what);
        if (st == TGC_OK)
            x->mod[dev] = m;
    }
    pthread_mutex_unlock(&g_load_lock);
    if (st != TGC_OK)
        return st;
    snprintf(what, sizeof what, "tgc cuda: %.200s: cuModuleGetFunction(%.64s)", x->name, entry);
    return tgc_cuda_error(d->cuModuleGetFunction(fn, m, entry), what);
}

const void *tgc_cuda_program_image(const tgc_cuda_program *p, size_t *size)
{
    const tgc_code_entry *e = entry_of(p);
    *size = e->size;
    return e->blob;
}
