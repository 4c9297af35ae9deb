/* The NCCL loader (runtime/nccl.h): opens libnccl.so.2, or the file TGC_NCCL_LIBRARY names,
 * with dlopen once per process, fills the function table and turns ncclResult_t into
 * statuses with NCCL's own text.
 *
 * Environment: TGC_NCCL_LIBRARY=<path> replaces the library opened; NCCL_NVLS_ENABLE is set
 * to "0" before the dlopen unless the user set it (NVLink multicast can take a shared host's
 * GPUs out of service; libtgc keeps it off). Both read once, at load (the runtime reads its
 * own variables).
 *
 * Thread-safety: loading is under pthread_once; the table is read-only afterwards. */
#include "runtime/nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm.h"
#include "support/error.h"

static tgc_nccl_api g_api;
static atomic_int g_loaded;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_status g_status = TGC_OK;
static char g_msg[1024];

tgc_nccl_config tgc_nccl_config_init(int blocking)
{
    tgc_nccl_config c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.magic = TGC_NCCL_API_MAGIC;
    c.version = TGC_NCCL_CONFIG_VERSION;
    c.blocking = blocking;
    c.cgaClusterSize = c.minCTAs = c.maxCTAs = c.splitShare = TGC_NCCL_CONFIG_UNDEF_INT;
    c.netName = NULL;
    return c;
}

static void load_fail(const char *fmt, ...) TGC_PRINTF(1, 2);
static void load_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_status = TGC_ERR_UNSUPPORTED;
}

static void do_load(void)
{
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* never overwrites the user's value */
    const char *env = getenv("TGC_NCCL_LIBRARY");
    const char *path = env && *env ? env : "libnccl.so.2";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        load_fail("NCCL could not be loaded: %s%s could not be opened (%s); install NCCL "
                  "(libnccl2, or the nvidia-nccl-cu12 wheel) or point TGC_NCCL_LIBRARY at it",
                  env && *env ? "TGC_NCCL_LIBRARY=" : "", path, why ? why : "no reason given");
        return;
    }
    tgc_nccl_api a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define NEED_(member, sym)                                                                         \
    do {                                                                                           \
        void *f_ = dlsym(lib, sym);                                                                \
        if (f_)                                                                                    \
            memcpy(&a.member, &f_, sizeof f_);                                                     \
        else if (!missing)                                                                         \
            missing = sym;                                                                         \
    } while (0)
#define OPTIONAL_(member, sym)                                                                     \
    do {                                                                                           \
        void *f_ = dlsym(lib, sym);                                                                \
        if (f_)                                                                                    \
            memcpy(&a.member, &f_, sizeof f_);                                                     \
    } while (0)
    NEED_(GetVersion, "ncclGetVersion");
    NEED_(GetUniqueId, "ncclGetUniqueId");
    NEED_(CommInitRank, "ncclCommInitRank");
    NEED_(CommGetAsyncError, "ncclCommGetAsyncError");
    NEED_(CommAbort, "ncclCommAbort");
    NEED_(CommDestroy, "ncclCommDestroy");
    NEED_(AllReduce, "ncclAllReduce");
    NEED_(Broadcast, "ncclBroadcast");
    NEED_(GroupStart, "ncclGroupStart");
    NEED_(GroupEnd, "ncclGroupEnd");
    NEED_(GetErrorString, "ncclGetErrorString");
    OPTIONAL_(CommInitRankConfig, "ncclCommInitRankConfig");
    OPTIONAL_(CommFinalize, "ncclCommFinalize");
    OPTIONAL_(GetLastError, "ncclGetLastError");
#undef NEED_
#undef OPTIONAL_
    if (missing) {
        load_fail("NCCL could not be loaded: %s lacks %s: it is not NCCL, or an NCCL older "
                  "than 2.7",
                  path, missing);
        dlclose(lib);
        return;
    }
    if (a.GetVersion(&a.version) != TGC_NCCL_SUCCESS)
        a.version = 0;
    snprintf(a.path, sizeof a.path, "%s", path);
    g_api = a;
    atomic_store_explicit(&g_loaded, 1, memory_order_release);
}

tgc_status tgc_nccl_load(void)
{
    pthread_once(&g_once, do_load);
    if (g_status != TGC_OK)
        return tgc_set_error(g_status, "%s", g_msg);
    return TGC_OK;
}

const tgc_nccl_api *tgc_nccl(void)
{
    return atomic_load_explicit(&g_loaded, memory_order_acquire) ? &g_api : NULL;
}

int tgc_nccl_version(void)
{
    const tgc_nccl_api *a = tgc_nccl();
    return a ? a->version : 0;
}

tgc_status tgc_nccl_error(tgc_nccl_result r, tgc_nccl_comm comm, const char *what)
{
    if (r == TGC_NCCL_SUCCESS)
        return TGC_OK;
    const tgc_nccl_api *a = tgc_nccl();
    const char *text = a ? a->GetErrorString(r) : NULL;
    const char *last = a && a->GetLastError ? a->GetLastError(comm) : NULL;
    tgc_status s = r == TGC_NCCL_TIMEOUT ? TGC_ERR_TIMEOUT : TGC_ERR_RUNTIME;
    return tgc_set_error(s, "%s: %s (ncclResult %d)%s%s", what, text ? text : "NCCL error", (int)r,
                         last && *last ? ": " : "", last && *last ? last : "");
}
