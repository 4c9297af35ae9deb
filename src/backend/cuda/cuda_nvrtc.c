/* NVRTC through dlopen: loading the library once, compiling one program, compiling many in
 * parallel. The resolved function pointers are written once under pthread_once and only read
 * afterwards, so every entry point is thread-safe. */
#include "backend/cuda/cuda_nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/error.h"

#ifndef TGC_CUDA_LIBDIR
#define TGC_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

typedef struct nvrtc_api {
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
} nvrtc_api;

static nvrtc_api g_api;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_status g_load_status = TGC_ERR_DEVICE;
static char g_load_msg[1024];
static char g_include_dir[512];
static char g_include_opt[600];

static void nvrtc_do_load(void)
{
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        TGC_CUDA_LIBDIR "/libnvrtc.so"};
    void *h = NULL;
    char tried[512] = "";
    const char *last = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            last = e ? e : "unknown error";
            size_t len = strlen(tried);
            snprintf(tried + len, sizeof tried - len, "%s%s", len ? ", " : "", names[i]);
        }
    }
    if (!h) {
        snprintf(g_load_msg, sizeof g_load_msg, "libnvrtc could not be opened (tried %s: %s)",
                 tried, last);
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"nvrtcGetErrorString", (void **)&g_api.GetErrorString},
        {"nvrtcVersion", (void **)&g_api.Version},
        {"nvrtcCreateProgram", (void **)&g_api.CreateProgram},
        {"nvrtcDestroyProgram", (void **)&g_api.DestroyProgram},
        {"nvrtcCompileProgram", (void **)&g_api.CompileProgram},
        {"nvrtcGetPTXSize", (void **)&g_api.GetPTXSize},
        {"nvrtcGetPTX", (void **)&g_api.GetPTX},
        {"nvrtcGetCUBINSize", (void **)&g_api.GetCUBINSize},
        {"nvrtcGetCUBIN", (void **)&g_api.GetCUBIN},
        {"nvrtcGetProgramLogSize", (void **)&g_api.GetProgramLogSize},
        {"nvrtcGetProgramLog", (void **)&g_api.GetProgramLog},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            snprintf(g_load_msg, sizeof g_load_msg,
                     "libnvrtc could not be opened (tried %s: symbol %s missing)",
                     tried[0] ? tried : "libnvrtc.so", syms[i].name);
            memset(&g_api, 0, sizeof g_api);
            dlclose(h);
            return;
        }
        *syms[i].slot = p;
    }
    /* TGC_CUDA_LIBDIR is <toolkit>/lib64: its headers are in <toolkit>/include */
    char inc[512];
    snprintf(inc, sizeof inc, "%s/../include", TGC_CUDA_LIBDIR);
    char probe[600];
    snprintf(probe, sizeof probe, "%s/cuda_fp16.h", inc);
    FILE *f = fopen(probe, "r");
    if (f) {
        fclose(f);
        snprintf(g_include_dir, sizeof g_include_dir, "%s", inc);
        snprintf(g_include_opt, sizeof g_include_opt, "--include-path=%s", inc);
    }
    g_load_status = TGC_OK;
}

tgc_status tgc_nvrtc_load(void)
{
    pthread_once(&g_once, nvrtc_do_load);
    if (g_load_status != TGC_OK)
        return tgc_set_error(g_load_status, "%s", g_load_msg);
    return TGC_OK;
}

int tgc_nvrtc_version(int *major, int *minor)
{
    int ma = 0, mi = 0;
    int rc = -1;
    if (tgc_nvrtc_load() == TGC_OK && g_api.Version(&ma, &mi) == NVRTC_SUCCESS)
        rc = 0;
    if (major)
        *major = rc ? 0 : ma;
    if (minor)
        *minor = rc ? 0 : mi;
    return rc;
}

void tgc_nvrtc_options(const char *src, int sm, tgc_nvrtc_opts *o)
{
    memset(o, 0, sizeof *o);
    int sm_a = src && strstr(src, "#define TGC_NEEDS_SM90A") != NULL;
    snprintf(o->arch, sizeof o->arch, "--gpu-architecture=sm_%d%s", sm, sm_a ? "a" : "");
    o->v[o->n++] = o->arch;
    o->v[o->n++] = "-std=c++17";
    o->v[o->n++] = "-default-device";
    o->v[o->n++] = "-lineinfo";
    /* NVRTC 13 has no built-in cuda_fp16.h / cuda_bf16.h: programs that include toolkit
     * headers find them in the toolkit the library was built against, when it is there
     * (known once libnvrtc is loaded) */
    pthread_once(&g_once, nvrtc_do_load);
    if (g_load_status == TGC_OK && g_include_dir[0])
        o->v[o->n++] = g_include_opt;
}

/* Keeps the head of long logs (the first errors are the ones that matter). */
#define TGC_NVRTC_LOG_MAX 6000

tgc_status tgc_nvrtc_compile(const char *prog_name, const char *src, int sm, char **cubin,
                             size_t *cubin_size, char **ptx)
{
    if (cubin)
        *cubin = NULL;
    if (cubin_size)
        *cubin_size = 0;
    if (ptx)
        *ptx = NULL;
    if (!prog_name)
        prog_name = "tgc_program";
    if (!src || !cubin || !cubin_size || sm <= 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc cuda: tgc_nvrtc_compile(%s): source, outputs and sm are required",
                             prog_name);
    tgc_status st = tgc_nvrtc_load();
    if (st != TGC_OK)
        return st;

    tgc_nvrtc_opts o;
    tgc_nvrtc_options(src, sm, &o);

    nvrtcProgram prog = NULL;
    nvrtcResult r = g_api.CreateProgram(&prog, src, prog_name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return tgc_set_error(r == NVRTC_ERROR_OUT_OF_MEMORY ? TGC_ERR_OOM : TGC_ERR_COMPILE,
                             "tgc cuda: NVRTC could not create %s: %s", prog_name,
                             g_api.GetErrorString(r));
    r = g_api.CompileProgram(prog, o.n, o.v);
    if (r != NVRTC_SUCCESS) {
        size_t log_size = 0;
        char *log = NULL;
        if (g_api.GetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
            log = malloc(log_size + 1);
            if (log && g_api.GetProgramLog(prog, log) == NVRTC_SUCCESS) {
                log[log_size] = '\0';
            } else if (log) {
                log[0] = '\0';
            }
        }
        const char *text = log && log[0] ? log : g_api.GetErrorString(r);
        size_t tl = strlen(text);
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc cuda: NVRTC rejected %s: %.*s%s", prog_name,
                           (int)(tl > TGC_NVRTC_LOG_MAX ? TGC_NVRTC_LOG_MAX : tl), text,
                           tl > TGC_NVRTC_LOG_MAX ? " ... (log truncated)" : "");
        free(log);
        g_api.DestroyProgram(&prog);
        return st;
    }

    size_t n = 0;
    char *img = NULL;
    r = g_api.GetCUBINSize(prog, &n);
    if (r == NVRTC_SUCCESS && n > 0) {
        img = malloc(n);
        if (!img) {
            g_api.DestroyProgram(&prog);
            return tgc_set_error(TGC_ERR_OOM, "tgc cuda: no memory for the %zu-byte cubin of %s", n,
                                 prog_name);
        }
        r = g_api.GetCUBIN(prog, img);
    }
    if (r != NVRTC_SUCCESS || !img) {
        free(img);
        g_api.DestroyProgram(&prog);
        return tgc_set_error(TGC_ERR_COMPILE, "tgc cuda: NVRTC produced no cubin for %s: %s",
                             prog_name,
                             r != NVRTC_SUCCESS ? g_api.GetErrorString(r) : "empty image");
    }
    char *ptx_text = NULL;
    if (ptx) {
        size_t pn = 0;
        r = g_api.GetPTXSize(prog, &pn);
        if (r == NVRTC_SUCCESS) {
            ptx_text = malloc(pn + 1);
            if (!ptx_text) {
                free(img);
                g_api.DestroyProgram(&prog);
                return tgc_set_error(TGC_ERR_OOM, "tgc cuda: no memory for the PTX of %s",
                                     prog_name);
            }
            r = g_api.GetPTX(prog, ptx_text);
            ptx_text[pn] = '\0';
        }
        if (r != NVRTC_SUCCESS) {
            free(ptx_text);
            free(img);
            g_api.DestroyProgram(&prog);
            return tgc_set_error(TGC_ERR_COMPILE, "tgc cuda: NVRTC produced no PTX for %s: %s",
                                 prog_name, g_api.GetErrorString(r));
        }
    }
    g_api.DestroyProgram(&prog);
    *cubin = img;
    *cubin_size = n;
    if (ptx)
        *ptx = ptx_text;
    return TGC_OK;
}

/* ---- parallel compilation ------------------------------------------------------------- */

typedef struct compile_job {
    int n;
    const char *const *names;
    const char *const *srcs;
    int sm;
    char **cubins;
    size_t *sizes;
    char **ptxs;
    tgc_status *status; /* per program */
    char **msgs;        /* per program, malloc'd on failure */
    pthread_mutex_t mu;
    int next;
    int failed; /* stop taking new work once set */
} compile_job;

static void compile_one(compile_job *j, int i)
{
    const char *name = j->names ? j->names[i] : NULL;
    char fallback[32];
    if (!name) {
        snprintf(fallback, sizeof fallback, "tgc_program_%d", i);
        name = fallback;
    }
    tgc_status st = tgc_nvrtc_compile(name, j->srcs[i], j->sm, &j->cubins[i], &j->sizes[i],
                                      j->ptxs ? &j->ptxs[i] : NULL);
    j->status[i] = st;
    if (st != TGC_OK) {
        const char *m = tgc_last_error();
        j->msgs[i] = strdup(m ? m : "");
    }
}

static void *compile_worker(void *arg)
{
    compile_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->failed ? j->n : j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n)
            break;
        compile_one(j, i);
        if (j->status[i] != TGC_OK) {
            pthread_mutex_lock(&j->mu);
            j->failed = 1;
            pthread_mutex_unlock(&j->mu);
        }
    }
    return NULL;
}

tgc_status tgc_nvrtc_compile_all(int n, const char *const *names, const char *const *srcs, int sm,
                                 int n_threads, char **cubins, size_t *sizes, char **ptxs)
{
    if (n < 0 || (n > 0 && (!srcs || !cubins || !sizes)))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc cuda: tgc_nvrtc_compile_all: %d programs without sources or "
                             "outputs",
                             n);
    for (int i = 0; i < n; i++) {
        cubins[i] = NULL;
        sizes[i] = 0;
        if (ptxs)
            ptxs[i] = NULL;
    }
    if (n == 0)
        return TGC_OK;
    tgc_status st = tgc_nvrtc_load();
    if (st != TGC_OK)
        return st;

    compile_job j;
    memset(&j, 0, sizeof j);
    j.n = n;
    j.names = names;
    j.srcs = srcs;
    j.sm = sm;
    j.cubins = cubins;
    j.sizes = sizes;
    j.ptxs = ptxs;
    j.status = calloc((size_t)n, sizeof *j.status);
    j.msgs = calloc((size_t)n, sizeof *j.msgs);
    if (!j.status || !j.msgs) {
        free(j.status);
        free(j.msgs);
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda: no memory to compile %d programs", n);
    }
    for (int i = 0; i < n; i++)
        j.status[i] = TGC_OK;
    pthread_mutex_init(&j.mu, NULL);

    int nt = n_threads < 1 ? 1 : n_threads;
    if (nt > n)
        nt = n;
    pthread_t *th = NULL;
    int started = 0;
    if (nt > 1) {
        th = calloc((size_t)(nt - 1), sizeof *th);
        for (int t = 0; th && t < nt - 1; t++) {
            if (pthread_create(&th[t], NULL, compile_worker, &j) != 0)
                break;
            started++;
        }
    }
    compile_worker(&j); /* the calling thread works too */
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    free(th);
    pthread_mutex_destroy(&j.mu);

    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (j.status[i] != TGC_OK)
            bad = i;
    if (bad >= 0) {
        st = tgc_set_error(j.status[bad], "%s",
                           j.msgs[bad] ? j.msgs[bad] : "tgc cuda: NVRTC compilation failed");
        for (int i = 0; i < n; i++) {
            free(cubins[i]);
            cubins[i] = NULL;
            sizes[i] = 0;
            if (ptxs) {
                free(ptxs[i]);
                ptxs[i] = NULL;
            }
        }
    }
    for (int i = 0; i < n; i++)
        free(j.msgs[i]);
    free(j.msgs);
    free(j.status);
    return st;
}
