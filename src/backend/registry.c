/* The backend registry (see registry.h): the registered backends, and every answer about
 * backends and device types derived from their records. */
#include "backend/registry.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "support/error.h"

#define MAX_BACKENDS 16

/* One registration and what its get answered (asked once: the answer is the process's). */
typedef struct entry {
    const tgc_backend_reg *r;
    _Atomic(const tgc_backend *) b;
    atomic_int state; /* 0: not asked yet; 1: available (b); 2: not available */
} entry;

/* Appended under g_lock, published by a release store of g_n: readers take no lock. */
static entry g_entries[MAX_BACKENDS];
static atomic_int g_n;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int count(void)
{
    return atomic_load_explicit(&g_n, memory_order_acquire);
}

static const char *kind_name_of(const tgc_backend_reg *r, int i)
{
    return r->kinds[i].name ? r->kinds[i].name : r->name;
}

static const entry *by_kind(tgc_backend_kind kind)
{
    int n = count();
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g_entries[i].r->n_kinds; k++)
            if (g_entries[i].r->kinds[k].kind == kind)
                return &g_entries[i];
    return NULL;
}

static tgc_status add_locked(const tgc_backend_reg *r)
{
    const char *fn = "tgc_backend_register";
    int n = atomic_load_explicit(&g_n, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (g_entries[i].r == r)
            return TGC_OK;
    if (!r || !r->name || !r->get || r->n_kinds < 0 || r->n_kinds > TGC_BACKEND_REG_KINDS)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: the record lacks a name or get, or has %d kinds (0 to %d)", fn,
                             r ? r->n_kinds : 0, TGC_BACKEND_REG_KINDS);
    if (n == MAX_BACKENDS)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s': %d backends are registered already",
                             fn, r->name, MAX_BACKENDS);
    for (int k = 0; k < r->n_kinds; k++) {
        tgc_backend_kind kind = r->kinds[k].kind;
        if (kind <= TGC_BACKEND_AUTO || kind > TGC_BACKEND_INTERP)
            return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s' serves backend kind %d", fn,
                                 r->name, (int)kind);
        const entry *e = by_kind(kind);
        if (e)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: '%s' serves cfg.backend %s, which '%s' serves already", fn,
                                 r->name, kind_name_of(r, k), e->r->name);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(g_entries[i].r->name, r->name) == 0)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: a backend named '%s' is registered already", fn, r->name);
    if (r->device_ops && tgc_device_ops_register(r->device, r->device_ops) != TGC_OK)
        return tgc_error_prefix(tgc_last_status(), fn);
    g_entries[n].r = r;
    atomic_store_explicit(&g_entries[n].b, NULL, memory_order_relaxed);
    atomic_store_explicit(&g_entries[n].state, 0, memory_order_relaxed);
    atomic_store_explicit(&g_n, n + 1, memory_order_release);
    return TGC_OK;
}

/* The build's own backends (backends.c), first, before main (the layers below the backends
 * reach a device type only through what its registration brings) or, at the latest, when
 * the registry is first asked. */
static void register_builtins(void)
{
    tgc_status saved = tgc_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    pthread_mutex_lock(&g_lock);
    for (int i = 0; tgc_backend_builtins[i]; i++)
        add_locked(tgc_backend_builtins[i]); /* the build's records are valid */
    pthread_mutex_unlock(&g_lock);
    if (saved != TGC_OK)
        tgc_set_error(saved, "%s", msg);
    else
        tgc_clear_error();
}

static void ensure(void)
{
    pthread_once(&g_once, register_builtins);
}

__attribute__((constructor)) static void registry_init(void)
{
    ensure();
}

tgc_status tgc_backend_register(const tgc_backend_reg *r)
{
    ensure();
    pthread_mutex_lock(&g_lock);
    tgc_status st = add_locked(r);
    pthread_mutex_unlock(&g_lock);
    return st;
}

/* e's backend. keep: the error state stays as it was (a NULL answer sets nothing); else a
 * NULL answer sets the registration's error, the same every time. */
static const tgc_backend *resolve(entry *e, int keep)
{
    int st = atomic_load_explicit(&e->state, memory_order_acquire);
    if (st == 1)
        return atomic_load_explicit(&e->b, memory_order_relaxed);
    if (st == 2 && keep)
        return NULL;
    tgc_status saved = tgc_last_status();
    char msg[1024];
    if (keep)
        snprintf(msg, sizeof msg, "%s", tgc_last_error());
    const tgc_backend *b = e->r->get();
    if (b)
        atomic_store_explicit(&e->b, b, memory_order_relaxed);
    atomic_store_explicit(&e->state, b ? 1 : 2, memory_order_release);
    if (keep) {
        if (saved != TGC_OK)
            tgc_set_error(saved, "%s", msg);
        else
            tgc_clear_error();
    }
    return b;
}

/* The available backend of device type dev with the highest priority (compiled: graph
 * runners left out), the error state left as it was; NULL when there is none. */
static const tgc_backend *best(tgc_device_type dev, int compiled)
{
    const tgc_backend *found = NULL;
    int found_prio = INT_MIN, n = count();
    for (int i = 0; i < n; i++) {
        entry *e = &g_entries[i];
        if (e->r->device != dev || (found && e->r->priority <= found_prio))
            continue;
        const tgc_backend *b = resolve(e, 1);
        if (b && (!compiled || !b->graph)) {
            found = b;
            found_prio = e->r->priority;
        }
    }
    return found;
}

/* The registration of device type dev with the highest priority, available or not. */
static entry *top(tgc_device_type dev)
{
    entry *first = NULL;
    int n = count();
    for (int i = 0; i < n; i++)
        if (g_entries[i].r->device == dev &&
            (!first || g_entries[i].r->priority > first->r->priority))
            first = &g_entries[i];
    return first;
}

const tgc_backend *tgc_backend_for(const tgc_config *cfg)
{
    ensure();
    if (cfg->backend == TGC_BACKEND_AUTO) {
        const tgc_backend *b = best(TGC_DEVICE_CPU, 0);
        if (!b)
            tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc_compile: no backend runs on the host");
        return b;
    }
    entry *e = (entry *)by_kind(cfg->backend);
    if (!e) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_compile: unknown backend %d", (int)cfg->backend);
        return NULL;
    }
    return resolve(e, 0);
}

const tgc_backend *tgc_backend_for_device(tgc_device_type dev)
{
    ensure();
    return best(dev, 1);
}

const char *tgc_backend_kind_name(tgc_backend_kind kind)
{
    ensure();
    if (kind == TGC_BACKEND_AUTO)
        return "auto"; /* the registry's own choice, no backend's */
    const entry *e = by_kind(kind);
    if (!e)
        return "?";
    for (int k = 0; k < e->r->n_kinds; k++)
        if (e->r->kinds[k].kind == kind)
            return kind_name_of(e->r, k);
    return "?";
}

int tgc_backend_device_known(tgc_device_type dev)
{
    ensure();
    return dev == TGC_DEVICE_CPU || top(dev) != NULL;
}

char *tgc_backend_device_ctors(char *buf, size_t n)
{
    ensure();
    size_t len = (size_t)snprintf(buf, n, "tgc_cpu()");
    int cnt = count();
    for (int i = 0; i < cnt && len < n; i++) {
        const tgc_backend_reg *r = g_entries[i].r;
        int said = r->device == TGC_DEVICE_CPU || !r->device_ctor;
        for (int j = 0; j < i && !said; j++) /* each device type once, by its first word */
            said = g_entries[j].r->device == r->device && g_entries[j].r->device_ctor;
        if (!said)
            len += (size_t)snprintf(buf + len, n - len, " or %s", r->device_ctor);
    }
    return buf;
}

/* "the inputs are on cuda:0", "'f' has no tensor inputs and its module is on cuda:0", ... */
static void describe_device(tgc_device dev, tgc_device_origin origin, const char *fn_name,
                            char *buf, size_t n)
{
    char d[48];
    tgc_format_device(dev, d, sizeof d);
    if (origin == TGC_DEVICE_OF_INPUTS)
        snprintf(buf, n, "the inputs are on %s", d);
    else if (origin == TGC_DEVICE_OF_MODULE)
        snprintf(buf, n, "'%s' has no tensor inputs and its module is on %s", fn_name, d);
    else
        snprintf(buf, n,
                 "'%s' has no tensor inputs or module tensors, so it runs on cfg.device (%s)",
                 fn_name, d);
}

/* "CUDA" of kind "cuda", for TGC_BACKEND_CUDA and "cfg.backend is CUDA". */
static void upper(const char *s, char *buf, size_t n)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        buf[i] = (char)toupper((unsigned char)s[i]);
    buf[i] = 0;
}

const tgc_backend *tgc_backend_for_call(const tgc_config *cfg, tgc_device dev,
                                        tgc_device_origin origin, const char *fn_name)
{
    ensure();
    char where[192];
    describe_device(dev, origin, fn_name, where, sizeof where);
    entry *k = cfg->backend == TGC_BACKEND_AUTO ? NULL : (entry *)by_kind(cfg->backend);
    char kind[32];
    upper(tgc_backend_kind_name(cfg->backend), kind, sizeof kind);
    if (dev.type == TGC_DEVICE_CPU) {
        if (k && k->r->device != TGC_DEVICE_CPU) {
            char move[160];
            if (origin == TGC_DEVICE_OF_INPUTS)
                snprintf(move, sizeof move,
                         "move them (and the module) with tgc_to / tgc_module_to");
            else if (origin == TGC_DEVICE_OF_MODULE)
                snprintf(move, sizeof move, "move the module with tgc_module_to");
            else
                snprintf(move, sizeof move, "set cfg.device to %s (%s)",
                         k->r->device_what ? k->r->device_what : "its device",
                         k->r->device_ctor ? k->r->device_ctor : "?");
            tgc_set_error(TGC_ERR_DEVICE,
                          "tgc_call: cfg.backend is %s but %s; %s, or use TGC_BACKEND_AUTO", kind,
                          where, move);
            return NULL;
        }
        return tgc_backend_for(cfg);
    }
    entry *serving = top(dev.type);
    entry *e = k;
    if (cfg->backend == TGC_BACKEND_AUTO) {
        const tgc_backend *b = best(dev.type, 0);
        if (b)
            return b;
        e = serving; /* none is available: the first choice says why */
    }
    if (e && e->r->device == dev.type) {
        const tgc_backend *b = resolve(e, 0);
        if (!b) {
            char why[256];
            snprintf(why, sizeof why, "%s", tgc_last_error());
            tgc_set_error(TGC_ERR_DEVICE, "tgc_call: %s, but %s", where, why);
        }
        return b;
    }
    const char *fix = origin == TGC_DEVICE_OF_INPUTS   ? "move the inputs with tgc_to"
                      : origin == TGC_DEVICE_OF_MODULE ? "move the module with tgc_module_to"
                                                       : "leave cfg.device at tgc_cpu()";
    if (!serving) {
        tgc_set_error(TGC_ERR_DEVICE, "tgc_call: %s, but no backend of this build runs there; %s",
                      where, fix);
        return NULL;
    }
    char use[64] = "TGC_BACKEND_AUTO";
    if (serving->r->n_kinds > 0) {
        char s[32];
        upper(kind_name_of(serving->r, 0), s, sizeof s);
        snprintf(use, sizeof use, "TGC_BACKEND_AUTO or TGC_BACKEND_%s", s);
    }
    const char *runs = "the host";
    char on[48];
    if (k && k->r->device != TGC_DEVICE_CPU) {
        const char *dn = tgc_device_type_name(k->r->device);
        snprintf(on, sizeof on, "%s devices", dn ? dn : "other");
        runs = on;
    }
    tgc_set_error(TGC_ERR_DEVICE, "tgc_call: %s, but cfg.backend %s runs on %s; use %s, or %s",
                  where, tgc_backend_kind_name(cfg->backend), runs, use, fix);
    return NULL;
}
