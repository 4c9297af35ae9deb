/* Communicators (runtime/comm.h) over the NCCL of runtime/nccl.c.
 *
 * A GPU communicator has its own stream and a pool of events (without timing), both made
 * through the hooks its device type's backend registered (runtime/alloc.h), so this file
 * names no device runtime. A collective is queued there after an event recorded on the
 * caller's stream; an event recorded after it is kept by recv until tgc_comm_wait makes the
 * caller's stream wait for it. Both are record / wait pairs, so a CUDA-graph capture of the
 * caller's stream records them (and pulls the comm stream into the capture) like any other work.
 * Outside a capture a third event after each collective goes to the watchdog's queue with its time;
 * events recorded in a capture cannot be queried, so captured collectives are watched through
 * tgc_comm_watch after each replay.
 *
 * The watchdog: one thread per process, started with the first communicator (and again in a
 * forked child), that every WATCH_PERIOD_S checks each live communicator: the oldest queued
 * event still unfinished after the timeout, a host collective blocked longer than the
 * timeout, or an asynchronous NCCL error fails the communicator (sticky) and aborts its NCCL
 * communicator, which makes NCCL's kernels (and a blocked host call) return.
 *
 * Locking: g_reg (the registry: live communicators, handles) > c->lock (c's NCCL handle, its
 * failure, its queues). The watchdog holds g_reg while it looks at the communicators and
 * takes each c->lock only with trylock, so a thread inside a GPU enqueue (which holds c->lock
 * so that no abort runs under it) never blocks the watchdog; it calls ncclCommAbort after
 * releasing both, with the NCCL handle it took out of c (c->nc is NULL from then on, so
 * nothing calls NCCL on it again). A host collective blocks without c->lock (registered by
 * its start time instead): the watchdog may abort its NCCL communicator while the call is
 * in it, which NCCL (and the tests' fake) allow. tgc_comm_free leaves the registry first, so
 * the watchdog never sees a communicator being freed.
 *
 * Thread-safety: as runtime/comm.h says. */
#include "runtime/comm.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "runtime/nccl.h"
#include "support/error.h"

#define MAX_STARTED    1024
#define MAX_LOCAL      64 /* devices of one tgc_comm_create_local */
#define WATCH_PERIOD_S 0.010
#define GRACE_S        5.0 /* after an abort, how long a host wait lets NCCL's kernels return */

typedef struct started {
    const void *recv;
    void *ev; /* event recorded after the collective; NULL on the host */
} started;

typedef struct watched {
    void *ev; /* an event of the device type's streams */
    double t0;
} watched;

struct tgc_comm {
    int rank, world;
    tgc_device dev;
    double timeout;
    int64_t handle;
    struct tgc_comm *next; /* registry */

    pthread_mutex_t lock;
    tgc_nccl_comm nc; /* NULL once aborted (or freed) */
    atomic_int failed;
    tgc_status fail_status;
    char fail_msg[768];
    double busy_since; /* host: start of the blocking collective in flight; 0: none */
    const char *busy_what;
    started st[MAX_STARTED];
    int nst;

    const tgc_device_stream_ops *so; /* its device type's streams and events; NULL: host */
    void *stream;                    /* a stream of its own (GPU) */
    watched *wq;                     /* the watchdog's queue, oldest first */
    int wq_n, wq_cap;
    void **pool; /* free events */
    int npool, cap_pool;
};

/* ---- time ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- failures ---- */

/* Records c's sticky failure (the first one wins) and sets it as the thread's error. Call
 * with c->lock held. */
static tgc_status fail_locked(tgc_comm *c, tgc_status s, const char *fmt, ...) TGC_PRINTF(3, 4);
static tgc_status fail_locked(tgc_comm *c, tgc_status s, const char *fmt, ...)
{
    if (!atomic_load(&c->failed)) {
        char m[640];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        snprintf(c->fail_msg, sizeof c->fail_msg, "tgc_dist: rank %d of %d: %s", c->rank, c->world,
                 m);
        c->fail_status = s;
        atomic_store(&c->failed, 1);
    }
    return tgc_set_error(c->fail_status, "%s", c->fail_msg);
}

static tgc_status sticky_locked(tgc_comm *c)
{
    return tgc_set_error(c->fail_status, "%s", c->fail_msg);
}

static tgc_status timeout_locked(tgc_comm *c, const char *what, double age)
{
    return fail_locked(c, TGC_ERR_TIMEOUT,
                       "a peer did not answer within %g s (%s unfinished after %.1f s); the "
                       "communicator was aborted: free the group and make a new one with a new id",
                       c->timeout, what, age);
}

/* An NCCL failure of c: ncclRemoteError (a peer exited or its connection broke) counts as a
 * peer that does not answer (TGC_ERR_TIMEOUT, as include/tgc/dist.h promises for a peer that
 * dies), others are TGC_ERR_RUNTIME. Takes NCCL's text from tgc_nccl_error. */
static tgc_status nccl_fail_locked(tgc_comm *c, tgc_nccl_result r, tgc_nccl_comm nc,
                                   const char *what)
{
    tgc_nccl_error(r, nc, what);
    char m[512];
    snprintf(m, sizeof m, "%s", tgc_last_error());
    if (r == TGC_NCCL_REMOTE_ERROR)
        return fail_locked(c, TGC_ERR_TIMEOUT, "a peer failed or exited (%s)", m);
    return fail_locked(c, r == TGC_NCCL_TIMEOUT ? TGC_ERR_TIMEOUT : TGC_ERR_RUNTIME, "%s", m);
}

/* ---- device pieces: streams and events through the device type's hooks (runtime/alloc.h) ---- */

static int is_gpu(const tgc_comm *c)
{
    return c->so != NULL;
}

/* NCCL and the driver use the current device: make dev current. */
static tgc_status enter_ctx(const tgc_comm *c)
{
    return c->so->enter(c->dev.index, "tgc_comm");
}

static void *get_event(tgc_comm *c)
{
    if (c->npool > 0)
        return c->pool[--c->npool];
    void *e = NULL;
    if (c->so->event_create(&e, "tgc_comm") != TGC_OK)
        return NULL;
    return e;
}

static void put_event(tgc_comm *c, void *e)
{
    if (!e)
        return;
    if (c->npool == c->cap_pool) {
        int cap = c->cap_pool ? 2 * c->cap_pool : 16;
        void **p = realloc(c->pool, (size_t)cap * sizeof *p);
        if (!p) {
            c->so->event_destroy(e);
            return;
        }
        c->pool = p;
        c->cap_pool = cap;
    }
    c->pool[c->npool++] = e;
}

/* Records an event on s for the watchdog (not during a capture). c->lock held. */
static tgc_status watch_locked(tgc_comm *c, void *s)
{
    if (c->wq_n == c->wq_cap) {
        int cap = c->wq_cap ? 2 * c->wq_cap : 64;
        watched *q = realloc(c->wq, (size_t)cap * sizeof *q);
        if (!q)
            return tgc_set_error(TGC_ERR_OOM, "tgc_comm: out of memory for the watch queue");
        c->wq = q;
        c->wq_cap = cap;
    }
    void *e = get_event(c);
    if (!e)
        return tgc_last_status();
    tgc_status st = c->so->record(e, s, "tgc_comm");
    if (st != TGC_OK) {
        put_event(c, e);
        return st;
    }
    c->wq[c->wq_n++] = (watched){e, now_s()};
    return TGC_OK;
}

/* Makes dev current for NCCL (nothing to do on the host). */
static tgc_status enter_dev(tgc_device dev)
{
    const tgc_device_ops *o = dev.type == TGC_DEVICE_CPU ? NULL : tgc_device_ops_of(dev.type);
    return o && o->streams ? o->streams->enter(dev.index, "tgc_comm") : TGC_OK;
}

/* The caller's stream, or the thread's current stream of the device. */
static void *caller_stream(const tgc_comm *c, void *stream)
{
    return stream ? stream : tgc_device_ops_of(c->dev.type)->current_stream(c->dev.index);
}

/* ---- registry and watchdog ---- */

static pthread_mutex_t g_reg = PTHREAD_MUTEX_INITIALIZER;
static tgc_comm *g_live;
static int64_t g_next_handle = 1; /* under g_reg; never reused */
static int g_watchdog_on;         /* under g_reg; cleared in a forked child */
static int g_atfork;

static void fork_prepare(void)
{
    pthread_mutex_lock(&g_reg);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&g_reg);
}

static void fork_child(void)
{
    g_watchdog_on = 0; /* the child has no watchdog thread until its next communicator */
    pthread_mutex_unlock(&g_reg);
}

/* One communicator's check, c->lock held: returns the NCCL handle to abort, else NULL. */
static tgc_nccl_comm check_locked(tgc_comm *c, double now)
{
    if (!c->nc || atomic_load(&c->failed))
        return NULL;
    const tgc_nccl_api *n = tgc_nccl();
    if (is_gpu(c) && c->wq_n > 0 && enter_ctx(c) == TGC_OK) {
        int done = 0;
        while (done < c->wq_n) {
            int r = c->so->query(c->wq[done].ev, "tgc_comm: after a collective");
            if (r > 0) {
                put_event(c, c->wq[done].ev);
                done++;
                continue;
            }
            if (r == 0) {
                double age = now - c->wq[done].t0;
                if (age > c->timeout)
                    timeout_locked(c, "a collective queued on the GPU", age);
            } else {
                fail_locked(c, tgc_last_status(), "the GPU failed under a collective (%s)",
                            tgc_last_error());
            }
            break;
        }
        memmove(c->wq, c->wq + done, (size_t)(c->wq_n - done) * sizeof *c->wq);
        c->wq_n -= done;
    }
    if (!atomic_load(&c->failed) && c->busy_since > 0 && now - c->busy_since > c->timeout)
        timeout_locked(c, c->busy_what ? c->busy_what : "a collective", now - c->busy_since);
    if (!atomic_load(&c->failed)) {
        tgc_nccl_result a = TGC_NCCL_SUCCESS;
        tgc_nccl_result r = n->CommGetAsyncError(c->nc, &a);
        if (r != TGC_NCCL_SUCCESS)
            a = r;
        if (a != TGC_NCCL_SUCCESS && a != TGC_NCCL_IN_PROGRESS)
            nccl_fail_locked(c, a, c->nc, "asynchronous NCCL error");
    }
    if (!atomic_load(&c->failed))
        return NULL;
    tgc_nccl_comm nc = c->nc;
    c->nc = NULL;
    return nc;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    int relaxed[TGC_DEVICE_TYPES] = {0};
    for (;;) {
        sleep_s(WATCH_PERIOD_S);
        tgc_nccl_comm abort_nc[64];
        tgc_device abort_dev[64];
        int na = 0;
        pthread_mutex_lock(&g_reg);
        double now = now_s();
        for (tgc_comm *c = g_live; c && na < 64; c = c->next) {
            /* Events of other threads' captures are never queried here, but a global-mode
             * capture elsewhere would forbid this thread's queries: opt out once per type. */
            if (c->so && (unsigned)c->dev.type < TGC_DEVICE_TYPES && !relaxed[c->dev.type])
                relaxed[c->dev.type] = c->so->relax_capture();
            if (pthread_mutex_trylock(&c->lock) != 0)
                continue;
            tgc_nccl_comm nc = check_locked(c, now);
            pthread_mutex_unlock(&c->lock);
            if (nc) {
                abort_nc[na] = nc;
                abort_dev[na++] = c->dev;
            }
        }
        pthread_mutex_unlock(&g_reg);
        for (int i = 0; i < na; i++) {
            enter_dev(abort_dev[i]);
            tgc_nccl()->CommAbort(abort_nc[i]);
        }
        tgc_clear_error();
    }
    return NULL;
}

/* Adds c to the registry (giving it its handle) and makes sure the watchdog runs. */
static tgc_status register_comm(tgc_comm *c)
{
    tgc_status st = TGC_OK;
    pthread_mutex_lock(&g_reg);
    if (!g_atfork) {
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        g_atfork = 1;
    }
    if (!g_watchdog_on) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, watchdog_main, NULL) == 0)
            g_watchdog_on = 1;
        else
            st = tgc_set_error(TGC_ERR_RUNTIME, "tgc_comm: the watchdog thread could not start");
        pthread_attr_destroy(&at);
    }
    if (st == TGC_OK) {
        c->handle = g_next_handle++;
        c->next = g_live;
        g_live = c;
    }
    pthread_mutex_unlock(&g_reg);
    return st;
}

static void unregister_comm(tgc_comm *c)
{
    pthread_mutex_lock(&g_reg);
    for (tgc_comm **p = &g_live; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    pthread_mutex_unlock(&g_reg);
}

tgc_comm *tgc_comm_from_handle(int64_t handle)
{
    tgc_comm *found = NULL;
    pthread_mutex_lock(&g_reg);
    for (tgc_comm *c = g_live; c && !found; c = c->next)
        if (c->handle == handle)
            found = c;
    pthread_mutex_unlock(&g_reg);
    return found;
}

tgc_comm *tgc_comm_live(int64_t handle, const char *who)
{
    tgc_comm *c = tgc_comm_from_handle(handle);
    if (!c) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: the process group this step communicates over was freed (free "
                      "compiled functions before their tgc_dist)",
                      who);
        return NULL;
    }
    return tgc_comm_status(c) == TGC_OK ? c : NULL;
}

/* ---- ids ---- */

tgc_status tgc_comm_unique_id(tgc_comm_id *id)
{
    if (!id)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_unique_id: id is NULL");
    tgc_status st = tgc_nccl_load();
    if (st != TGC_OK)
        return st;
    tgc_nccl_id nid;
    memset(&nid, 0, sizeof nid);
    st = tgc_nccl_error(tgc_nccl()->GetUniqueId(&nid), NULL, "tgc_dist: ncclGetUniqueId");
    if (st == TGC_OK)
        memcpy(id->bytes, nid.internal, sizeof id->bytes);
    return st;
}

_Static_assert(sizeof(tgc_comm_id) == sizeof(tgc_nccl_id), "ids are NCCL's 128 bytes");
_Static_assert(TGC_DIST_ID_CHARS == 2 * sizeof(tgc_comm_id), "two hex digits a byte");

tgc_status tgc_comm_id_to_text(const tgc_comm_id *id, char *buf, size_t n)
{
    if (!id || !buf)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_id_to_text: NULL argument");
    if (n < TGC_DIST_ID_CHARS + 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_comm_id_to_text: the buffer has %zu bytes, the id needs %d "
                             "(TGC_DIST_ID_CHARS + 1)",
                             n, TGC_DIST_ID_CHARS + 1);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof id->bytes; i++) {
        buf[2 * i] = hex[id->bytes[i] >> 4];
        buf[2 * i + 1] = hex[id->bytes[i] & 15];
    }
    buf[TGC_DIST_ID_CHARS] = 0;
    return TGC_OK;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The messages about the text are the cause alone: the public function that was given the
 * id (tgc_dist_init) puts its name before them. */
tgc_status tgc_comm_id_from_text(const char *text, tgc_comm_id *id)
{
    if (!text || !id)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_id_from_text: NULL argument");
    size_t len = strnlen(text, TGC_DIST_ID_CHARS + 1);
    if (len != TGC_DIST_ID_CHARS)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "the id has %s%zu characters, a unique id has %d (the "
                             "text tgc_dist_unique_id wrote)",
                             len > TGC_DIST_ID_CHARS ? "more than " : "", len, TGC_DIST_ID_CHARS);
    tgc_comm_id out;
    for (size_t i = 0; i < sizeof out.bytes; i++) {
        int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            size_t at = hi < 0 ? 2 * i : 2 * i + 1;
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "the id has a non-hexadecimal character '%c' at %zu", text[at],
                                 at);
        }
        out.bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    *id = out;
    return TGC_OK;
}

/* ---- creation ---- */

static tgc_status check_device(tgc_device dev, const char *fn)
{
    if (dev.type == TGC_DEVICE_CPU)
        return TGC_OK;
    const tgc_device_ops *o = tgc_device_ops_of(dev.type);
    if (!o)
        return tgc_set_error(TGC_ERR_DEVICE, "%s: unknown device type %d", fn, (int)dev.type);
    if (!o->load || !o->streams)
        return tgc_set_error(TGC_ERR_DEVICE, "%s: %s:%d: %s", fn, o->name, dev.index,
                             o->load ? "its backend has no communicators" : o->missing);
    tgc_status st = o->load();
    if (st != TGC_OK)
        return st;
    if (dev.index < 0 || dev.index >= o->count())
        return tgc_set_error(TGC_ERR_DEVICE, "%s: device %s:%d does not exist (%d %s devices)", fn,
                             o->name, dev.index, o->count(), o->label);
    return o->streams->enter(dev.index, "tgc_comm");
}

static void destroy_shell(tgc_comm *c)
{
    if (!c)
        return;
    if (is_gpu(c) && c->so->loaded() && enter_ctx(c) == TGC_OK) {
        for (int i = 0; i < c->nst; i++)
            if (c->st[i].ev)
                c->so->event_destroy(c->st[i].ev);
        for (int i = 0; i < c->wq_n; i++)
            c->so->event_destroy(c->wq[i].ev);
        for (int i = 0; i < c->npool; i++)
            c->so->event_destroy(c->pool[i]);
        if (c->stream)
            c->so->stream_destroy(c->stream);
    }
    free(c->wq);
    free(c->pool);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* A communicator without its NCCL handle yet: its stream made on a GPU. */
static tgc_comm *new_shell(int rank, int world, tgc_device dev, double timeout_s)
{
    tgc_comm *c = calloc(1, sizeof *c);
    if (!c) {
        tgc_set_error(TGC_ERR_OOM, "tgc_dist: out of memory for a communicator");
        return NULL;
    }
    c->rank = rank;
    c->world = world;
    c->dev = dev;
    c->timeout = timeout_s;
    pthread_mutex_init(&c->lock, NULL);
    const tgc_device_ops *o = dev.type == TGC_DEVICE_CPU ? NULL : tgc_device_ops_of(dev.type);
    c->so = o ? o->streams : NULL; /* check_device made sure a device's type has them */
    if (is_gpu(c)) {
        void *s = NULL;
        if (enter_ctx(c) != TGC_OK || c->so->stream_create(&s, "tgc_dist") != TGC_OK) {
            destroy_shell(c);
            return NULL;
        }
        c->stream = s;
        /* a few events up front, so that a capture rarely has to create one */
        void *e[4] = {NULL};
        for (int i = 0; i < 4; i++)
            if (!(e[i] = get_event(c))) {
                for (int k = 0; k < i; k++)
                    put_event(c, e[k]);
                destroy_shell(c);
                return NULL;
            }
        for (int i = 0; i < 4; i++)
            put_event(c, e[i]);
    }
    return c;
}

/* Without ncclCommInitRankConfig (NCCL < 2.14) the init blocks: it runs on a helper thread
 * that the caller waits for with the timeout. On a timeout the caller leaves and the thread,
 * when its init ever returns, destroys what it made and frees the job. */
typedef struct init_job {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int refs, done, abandoned;
    tgc_nccl_result r;
    int n, world, rank0;
    tgc_nccl_id id;
    const tgc_device *devs;
    tgc_device devcopy[MAX_LOCAL];
    tgc_nccl_comm nc[MAX_LOCAL];
} init_job;

static void job_unref(init_job *j)
{
    pthread_mutex_lock(&j->m);
    int left = --j->refs;
    pthread_mutex_unlock(&j->m);
    if (left == 0) {
        pthread_mutex_destroy(&j->m);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
}

static void *init_thread(void *arg)
{
    init_job *j = arg;
    const tgc_nccl_api *n = tgc_nccl();
    tgc_nccl_result r = TGC_NCCL_SUCCESS;
    if (j->n > 1)
        r = n->GroupStart();
    for (int i = 0; i < j->n && r == TGC_NCCL_SUCCESS; i++) {
        enter_dev(j->devcopy[i]);
        r = n->CommInitRank(&j->nc[i], j->world, j->id, j->rank0 + i);
    }
    if (j->n > 1) {
        tgc_nccl_result e = n->GroupEnd();
        r = r == TGC_NCCL_SUCCESS ? e : r;
    }
    pthread_mutex_lock(&j->m);
    j->r = r;
    j->done = 1;
    int abandoned = j->abandoned;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->m);
    if (abandoned)
        for (int i = 0; i < j->n; i++)
            if (j->nc[i])
                n->CommAbort(j->nc[i]);
    job_unref(j);
    tgc_clear_error();
    return NULL;
}

static tgc_status timeout_join(int rank, int world, double t)
{
    return tgc_set_error(TGC_ERR_TIMEOUT,
                         "tgc_dist: rank %d of %d: the other ranks did not join within %g s "
                         "(check that every rank runs with the same id and world size)",
                         rank, world, t);
}

static tgc_status init_blocking(int n, const tgc_device *devs, tgc_nccl_id id, int world, int rank0,
                                double timeout_s, tgc_nccl_comm *nc)
{
    init_job *j = calloc(1, sizeof *j);
    if (!j)
        return tgc_set_error(TGC_ERR_OOM, "tgc_dist: out of memory");
    pthread_mutex_init(&j->m, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 2;
    j->n = n;
    j->world = world;
    j->rank0 = rank0;
    j->id = id;
    for (int i = 0; i < n; i++)
        j->devcopy[i] = devs[i];
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, init_thread, j);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        j->refs = 1;
        job_unref(j);
        return tgc_set_error(TGC_ERR_RUNTIME, "tgc_dist: the init thread could not start");
    }
    double deadline = now_s() + timeout_s;
    pthread_mutex_lock(&j->m);
    while (!j->done && now_s() < deadline) {
        pthread_mutex_unlock(&j->m);
        sleep_s(0.002);
        pthread_mutex_lock(&j->m);
    }
    tgc_status st = TGC_OK;
    if (!j->done) {
        j->abandoned = 1;
        st = timeout_join(rank0, world, timeout_s);
    } else if (j->r != TGC_NCCL_SUCCESS) {
        st = tgc_nccl_error(j->r, NULL, "tgc_dist: ncclCommInitRank");
        for (int i = 0; i < n; i++)
            if (j->nc[i])
                tgc_nccl()->CommAbort(j->nc[i]);
    } else
        for (int i = 0; i < n; i++)
            nc[i] = j->nc[i];
    pthread_mutex_unlock(&j->m);
    job_unref(j);
    return st;
}

/* Nonblocking init of n ranks (rank0 .. rank0+n-1, one per device; one NCCL group when n >
 * 1), polled with ncclCommGetAsyncError until every one is done, bounded by the timeout.
 * Every comm made is aborted on failure. */
static tgc_status init_ranks(int n, const tgc_device *devs, tgc_nccl_id id, int world, int rank0,
                             double timeout_s, tgc_nccl_comm *nc)
{
    const tgc_nccl_api *a = tgc_nccl();
    for (int i = 0; i < n; i++)
        nc[i] = NULL;
    if (!a->CommInitRankConfig)
        return init_blocking(n, devs, id, world, rank0, timeout_s, nc);
    tgc_nccl_result r = TGC_NCCL_SUCCESS;
    const char *what = "ncclCommInitRankConfig";
    if (n > 1)
        r = a->GroupStart();
    for (int i = 0; i < n && (r == TGC_NCCL_SUCCESS || r == TGC_NCCL_IN_PROGRESS); i++) {
        tgc_status st = enter_dev(devs[i]);
        if (st != TGC_OK) {
            if (n > 1)
                a->GroupEnd();
            for (int k = 0; k < i; k++)
                if (nc[k])
                    a->CommAbort(nc[k]);
            return st;
        }
        tgc_nccl_config cfg = tgc_nccl_config_init(0);
        r = a->CommInitRankConfig(&nc[i], world, id, rank0 + i, &cfg);
    }
    if (n > 1) {
        tgc_nccl_result e = a->GroupEnd();
        if (r == TGC_NCCL_SUCCESS || r == TGC_NCCL_IN_PROGRESS)
            r = e;
        what = "ncclGroupEnd (init)";
    }
    double deadline = now_s() + timeout_s;
    tgc_status st = TGC_OK;
    if (r != TGC_NCCL_SUCCESS && r != TGC_NCCL_IN_PROGRESS)
        st = tgc_nccl_error(r, n == 1 ? nc[0] : NULL, what);
    for (int i = 0; i < n && st == TGC_OK; i++) {
        for (int spin = 0;; spin++) {
            tgc_nccl_result s = TGC_NCCL_SUCCESS;
            tgc_nccl_result q = nc[i] ? a->CommGetAsyncError(nc[i], &s) : TGC_NCCL_INTERNAL_ERROR;
            if (q != TGC_NCCL_SUCCESS)
                s = q;
            if (s == TGC_NCCL_SUCCESS)
                break;
            if (s != TGC_NCCL_IN_PROGRESS) {
                st = tgc_nccl_error(s, nc[i], "tgc_dist: NCCL init");
                break;
            }
            if (now_s() >= deadline) {
                st = timeout_join(rank0 + i, world, timeout_s);
                break;
            }
            sleep_s(spin < 100 ? 0.0005 : 0.002);
        }
    }
    if (st != TGC_OK) {
        char keep[768];
        snprintf(keep, sizeof keep, "%s", tgc_last_error());
        tgc_status s = tgc_last_status();
        for (int i = 0; i < n; i++)
            if (nc[i]) {
                enter_dev(devs[i]);
                a->CommAbort(nc[i]);
                nc[i] = NULL;
            }
        tgc_set_error(s, "%s", keep);
    }
    return st;
}

static tgc_status check_create(int rank, int world, double timeout_s, tgc_comm **out,
                               const char *fn)
{
    if (!out)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (world < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: world size %d (must be >= 1)", fn, world);
    if (rank < 0 || rank >= world)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: rank %d outside [0, %d)", fn, rank, world);
    if (!(timeout_s > 0) || !isfinite(timeout_s)) /* NaN and inf: a deadline never reached */
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: timeout %g s (must be finite and > 0)", fn,
                             timeout_s);
    return tgc_nccl_load();
}

tgc_status tgc_comm_create(const tgc_comm_id *id, int rank, int world, tgc_device dev,
                           double timeout_s, tgc_comm **out)
{
    tgc_status st = check_create(rank, world, timeout_s, out, "tgc_comm_create");
    if (st != TGC_OK)
        return st;
    if (!id)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_create: id is NULL");
    if ((st = check_device(dev, "tgc_comm_create")) != TGC_OK)
        return st;
    tgc_comm *c = new_shell(rank, world, dev, timeout_s);
    if (!c)
        return tgc_last_status();
    tgc_nccl_id nid;
    memcpy(nid.internal, id->bytes, sizeof nid.internal);
    st = init_ranks(1, &dev, nid, world, rank, timeout_s, &c->nc);
    if (st == TGC_OK && (st = register_comm(c)) != TGC_OK) {
        enter_dev(dev);
        tgc_nccl()->CommAbort(c->nc);
    }
    if (st != TGC_OK) {
        destroy_shell(c);
        return st;
    }
    *out = c;
    return TGC_OK;
}

tgc_status tgc_comm_create_local(int n, const tgc_device *devs, double timeout_s, tgc_comm **out)
{
    if (!out || !devs || n < 1 || n > MAX_LOCAL)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_comm_create_local: %d devices (1 to %d, devs and out non-NULL)",
                             n, MAX_LOCAL);
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    tgc_comm *tmp = NULL;
    tgc_status st = check_create(0, n, timeout_s, &tmp, "tgc_comm_create_local");
    for (int i = 0; i < n && st == TGC_OK; i++)
        st = check_device(devs[i], "tgc_comm_create_local");
    if (st != TGC_OK)
        return st;
    tgc_nccl_id nid;
    memset(&nid, 0, sizeof nid);
    st = tgc_nccl_error(tgc_nccl()->GetUniqueId(&nid), NULL, "tgc_dist: ncclGetUniqueId");
    tgc_comm *c[MAX_LOCAL] = {NULL};
    tgc_nccl_comm nc[MAX_LOCAL] = {NULL};
    for (int i = 0; i < n && st == TGC_OK; i++)
        if (!(c[i] = new_shell(i, n, devs[i], timeout_s)))
            st = tgc_last_status();
    if (st == TGC_OK)
        st = init_ranks(n, devs, nid, n, 0, timeout_s, nc);
    if (st == TGC_OK)
        for (int i = 0; i < n; i++)
            c[i]->nc = nc[i];
    for (int i = 0; i < n && st == TGC_OK; i++)
        st = register_comm(c[i]);
    if (st != TGC_OK) {
        for (int i = 0; i < n; i++) {
            if (c[i] && c[i]->handle)
                unregister_comm(c[i]);
            if (c[i] && c[i]->nc) {
                enter_dev(devs[i]);
                tgc_nccl()->CommAbort(c[i]->nc);
            }
            destroy_shell(c[i]);
        }
        return st;
    }
    for (int i = 0; i < n; i++)
        out[i] = c[i];
    return TGC_OK;
}

/* ---- accessors ---- */

int tgc_comm_rank(const tgc_comm *c)
{
    return c ? c->rank : -1;
}

int tgc_comm_world(const tgc_comm *c)
{
    return c ? c->world : 0;
}

tgc_device tgc_comm_device(const tgc_comm *c)
{
    tgc_device d = {TGC_DEVICE_CPU, 0};
    return c ? c->dev : d;
}

double tgc_comm_timeout(const tgc_comm *c)
{
    return c ? c->timeout : 0;
}

int64_t tgc_comm_handle(const tgc_comm *c)
{
    return c ? c->handle : 0;
}

tgc_status tgc_comm_status(tgc_comm *c)
{
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_status: NULL communicator");
    if (!atomic_load(&c->failed))
        return TGC_OK;
    pthread_mutex_lock(&c->lock);
    tgc_status st = sticky_locked(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- collectives ---- */

static tgc_status map_dtype(tgc_dtype dt, tgc_nccl_dtype *out, const char *fn)
{
    switch (dt) {
    case TGC_F32: *out = TGC_NCCL_FLOAT32; return TGC_OK;
    case TGC_F16: *out = TGC_NCCL_FLOAT16; return TGC_OK;
    case TGC_BF16: *out = TGC_NCCL_BFLOAT16; return TGC_OK;
    case TGC_F64: *out = TGC_NCCL_FLOAT64; return TGC_OK;
    case TGC_I32: *out = TGC_NCCL_INT32; return TGC_OK;
    case TGC_I64: *out = TGC_NCCL_INT64; return TGC_OK;
    default: break;
    }
    return tgc_set_error(TGC_ERR_DTYPE,
                         "%s: %s tensors cannot be communicated (f32, f16, bf16, "
                         "f64, i32, i64)",
                         fn, dt == TGC_BOOL ? "bool" : "this dtype's");
}

static const char *op_name(tgc_dist_op op)
{
    static const char *const names[] = {"SUM", "PROD", "MAX", "MIN", "AVG"};
    return (int)op >= 0 && (int)op < 5 ? names[op] : "?";
}

static tgc_status check_reduce(tgc_comm *c, const void *send, void *recv, size_t count,
                               tgc_dtype dt, tgc_dist_op op, tgc_nccl_dtype *ndt)
{
    const char *fn = "tgc_comm_all_reduce_start";
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: NULL communicator", fn);
    if (count > 0 && (!send || !recv))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    if ((int)op < TGC_DIST_SUM || (int)op > TGC_DIST_AVG)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: unknown reduce op %d", fn, (int)op);
    tgc_status st = map_dtype(dt, ndt, fn);
    if (st != TGC_OK)
        return st;
    if ((op == TGC_DIST_AVG || op == TGC_DIST_PROD) && (dt == TGC_I32 || dt == TGC_I64))
        return tgc_set_error(TGC_ERR_DTYPE, "%s: %s is only for floating point (the tensor is %s)",
                             fn, op_name(op), dt == TGC_I32 ? "i32" : "i64");
    return TGC_OK;
}

/* Polls a nonblocking communicator's pending call until NCCL is done with it (bounded by the
 * timeout); r is what the call returned. */
static tgc_nccl_result settle(tgc_comm *c, tgc_nccl_comm nc, tgc_nccl_result r)
{
    double deadline = now_s() + c->timeout;
    while (r == TGC_NCCL_IN_PROGRESS) {
        if (atomic_load(&c->failed)) /* the watchdog aborted nc: never touch it again */
            return TGC_NCCL_REMOTE_ERROR;
        tgc_nccl_result a = TGC_NCCL_SUCCESS;
        tgc_nccl_result q = tgc_nccl()->CommGetAsyncError(nc, &a);
        r = q != TGC_NCCL_SUCCESS ? q : a;
        if (r == TGC_NCCL_IN_PROGRESS) {
            if (now_s() > deadline)
                return TGC_NCCL_TIMEOUT;
            sleep_s(0.0002);
        }
    }
    return r;
}

/* A host collective: blocking, registered with its start time so that the watchdog aborts it
 * after the timeout. */
static tgc_status host_collective(tgc_comm *c, const char *what, const void *send, void *recv,
                                  size_t count, tgc_nccl_dtype ndt, int op_or_root, int bcast)
{
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->failed)) {
        tgc_status st = sticky_locked(c);
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    tgc_nccl_comm nc = c->nc;
    c->busy_since = now_s();
    c->busy_what = what;
    pthread_mutex_unlock(&c->lock);
    const tgc_nccl_api *a = tgc_nccl();
    tgc_nccl_result r =
        bcast ? a->Broadcast(send, recv, count, ndt, op_or_root, nc, NULL)
              : a->AllReduce(send, recv, count, ndt, (tgc_nccl_op)op_or_root, nc, NULL);
    r = settle(c, nc, r);
    pthread_mutex_lock(&c->lock);
    c->busy_since = 0;
    c->busy_what = NULL;
    tgc_status st = TGC_OK;
    if (atomic_load(&c->failed))
        st = sticky_locked(c);
    else if (r == TGC_NCCL_INVALID_ARGUMENT || r == TGC_NCCL_INVALID_USAGE)
        st = tgc_nccl_error(r, nc, what);
    else if (r == TGC_NCCL_TIMEOUT)
        st = timeout_locked(c, what, c->timeout);
    else if (r != TGC_NCCL_SUCCESS)
        st = nccl_fail_locked(c, r, nc, what);
    tgc_nccl_comm abort_nc = NULL;
    if (atomic_load(&c->failed) && c->nc) {
        abort_nc = c->nc;
        c->nc = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (abort_nc)
        a->CommAbort(abort_nc);
    return st;
}

static int find_started(const tgc_comm *c, const void *recv)
{
    for (int i = 0; i < c->nst; i++)
        if (c->st[i].recv == recv)
            return i;
    return -1;
}

/* Reserves the started slot for recv, c->lock held. */
static tgc_status reserve_started(tgc_comm *c, const void *recv)
{
    if (find_started(c, recv) >= 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_comm_all_reduce_start: an all-reduce into %p was started and "
                             "not waited for (tgc_comm_wait)",
                             recv);
    if (c->nst == MAX_STARTED)
        return tgc_set_error(TGC_ERR_RUNTIME,
                             "tgc_comm_all_reduce_start: %d all-reduces started and not waited "
                             "for (at most %d at once)",
                             c->nst, MAX_STARTED);
    return TGC_OK;
}

/* Queues the all-reduce on the comm stream after the caller's work; c->lock held, not failed. */
static tgc_status gpu_all_reduce_locked(tgc_comm *c, const void *send, void *recv, size_t count,
                                        tgc_nccl_dtype ndt, tgc_dist_op op, void *stream)
{
    tgc_status st = enter_ctx(c);
    if (st != TGC_OK)
        return st;
    void *s = caller_stream(c, stream);
    if (!s)
        return tgc_last_status();
    int cap = 0;
    if ((st = c->so->capturing(s, &cap, "tgc_comm")) != TGC_OK)
        return st;
    void *before = get_event(c);
    if (!before)
        return tgc_last_status();
    st = c->so->record(before, s, "tgc_comm (caller stream)");
    if (st == TGC_OK)
        st = c->so->wait(c->stream, before, "tgc_comm (comm stream)");
    put_event(c, before); /* the wait holds the recorded state: reusable now */
    if (st != TGC_OK)
        return st;
    tgc_nccl_comm nc = c->nc;
    tgc_nccl_result r =
        tgc_nccl()->AllReduce(send, recv, count, ndt, (tgc_nccl_op)op, nc, c->stream);
    r = settle(c, nc, r);
    if (r == TGC_NCCL_INVALID_ARGUMENT || r == TGC_NCCL_INVALID_USAGE)
        return tgc_nccl_error(r, nc, "tgc_comm_all_reduce_start: ncclAllReduce");
    if (r == TGC_NCCL_TIMEOUT)
        return timeout_locked(c, "an all-reduce enqueue", c->timeout);
    if (r != TGC_NCCL_SUCCESS)
        return nccl_fail_locked(c, r, nc, "ncclAllReduce");
    void *after = get_event(c);
    if (!after)
        return fail_locked(c, tgc_last_status(), "%s", tgc_last_error());
    st = c->so->record(after, c->stream, "tgc_comm (comm stream)");
    if (st == TGC_OK && !cap)
        st = watch_locked(c, c->stream);
    if (st != TGC_OK) {
        put_event(c, after);
        /* the collective is queued but cannot be joined: the communicator is unusable */
        return fail_locked(c, st, "%s", tgc_last_error());
    }
    c->st[c->nst++] = (started){recv, after};
    return TGC_OK;
}

tgc_status tgc_comm_all_reduce_start(tgc_comm *c, const void *send, void *recv, size_t count,
                                     tgc_dtype dt, tgc_dist_op op, void *stream)
{
    tgc_nccl_dtype ndt = TGC_NCCL_FLOAT32;
    tgc_status st = check_reduce(c, send, recv, count, dt, op, &ndt);
    if (st != TGC_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->failed))
        st = sticky_locked(c);
    else
        st = reserve_started(c, recv);
    if (st == TGC_OK && is_gpu(c)) {
        st = gpu_all_reduce_locked(c, send, recv, count, ndt, op, stream);
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    pthread_mutex_unlock(&c->lock);
    if (st != TGC_OK)
        return st;
    st = host_collective(c, "an all-reduce", send, recv, count, ndt, (int)op, 0);
    if (st != TGC_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    c->st[c->nst++] = (started){recv, NULL};
    pthread_mutex_unlock(&c->lock);
    return TGC_OK;
}

tgc_status tgc_comm_wait(tgc_comm *c, const void *recv, void *stream)
{
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_wait: NULL communicator");
    pthread_mutex_lock(&c->lock);
    int i = find_started(c, recv);
    if (i < 0) {
        pthread_mutex_unlock(&c->lock);
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_comm_wait: no all-reduce into %p was started (or it was "
                             "waited for already)",
                             recv);
    }
    started e = c->st[i];
    c->st[i] = c->st[--c->nst];
    tgc_status st = TGC_OK;
    if (e.ev) {
        if (!atomic_load(&c->failed)) {
            st = enter_ctx(c);
            void *s = st == TGC_OK ? caller_stream(c, stream) : NULL;
            if (st == TGC_OK && !s)
                st = tgc_last_status();
            if (st == TGC_OK)
                st = c->so->wait(s, e.ev, "tgc_comm_wait");
        }
        put_event(c, e.ev);
    }
    if (st == TGC_OK && atomic_load(&c->failed))
        st = sticky_locked(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}

tgc_status tgc_comm_broadcast(tgc_comm *c, void *buf, size_t count, tgc_dtype dt, int root,
                              void *stream)
{
    const char *fn = "tgc_comm_broadcast";
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: NULL communicator", fn);
    if (count > 0 && !buf)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    if (root < 0 || root >= c->world)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, root,
                             c->world);
    tgc_nccl_dtype ndt = TGC_NCCL_FLOAT32;
    tgc_status st = map_dtype(dt, &ndt, fn);
    if (st != TGC_OK)
        return st;
    if (is_gpu(c)) {
        pthread_mutex_lock(&c->lock);
        if (atomic_load(&c->failed))
            st = sticky_locked(c);
        else
            st = enter_ctx(c);
        void *s = st == TGC_OK ? caller_stream(c, stream) : NULL;
        if (st == TGC_OK && !s)
            st = tgc_last_status();
        int cap = 0;
        if (st == TGC_OK)
            st = c->so->capturing(s, &cap, "tgc_comm");
        if (st == TGC_OK) {
            tgc_nccl_comm nc = c->nc;
            tgc_nccl_result r =
                settle(c, nc, tgc_nccl()->Broadcast(buf, buf, count, ndt, root, nc, s));
            if (r == TGC_NCCL_INVALID_ARGUMENT || r == TGC_NCCL_INVALID_USAGE)
                st = tgc_nccl_error(r, nc, "tgc_comm_broadcast: ncclBroadcast");
            else if (r == TGC_NCCL_TIMEOUT)
                st = timeout_locked(c, "a broadcast enqueue", c->timeout);
            else if (r != TGC_NCCL_SUCCESS)
                st = nccl_fail_locked(c, r, nc, "ncclBroadcast");
            else if (!cap)
                st = watch_locked(c, s);
        }
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    return host_collective(c, "a broadcast", buf, buf, count, ndt, root, 1);
}

tgc_status tgc_comm_synchronize(tgc_comm *c, void *stream)
{
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_synchronize: NULL communicator");
    if (is_gpu(c)) {
        pthread_mutex_lock(&c->lock);
        tgc_status st = atomic_load(&c->failed) ? sticky_locked(c) : enter_ctx(c);
        void *s = st == TGC_OK ? caller_stream(c, stream) : NULL;
        if (st == TGC_OK && !s)
            st = tgc_last_status();
        void *mine = st == TGC_OK ? get_event(c) : NULL;
        if (st == TGC_OK && !mine)
            st = tgc_last_status();
        if (st == TGC_OK)
            st = c->so->record(mine, s, "tgc_comm_synchronize");
        if (st == TGC_OK)
            st = watch_locked(c, s); /* the watchdog aborts the comm if this never finishes */
        pthread_mutex_unlock(&c->lock);
        if (st != TGC_OK) {
            pthread_mutex_lock(&c->lock);
            put_event(c, mine);
            pthread_mutex_unlock(&c->lock);
            return st;
        }
        double start = now_s(), failed_at = 0;
        for (int spin = 0;; spin++) {
            int r = c->so->query(mine, "tgc_comm_synchronize");
            if (r > 0)
                break;
            if (r < 0) {
                st = tgc_last_status();
                break;
            }
            double t = now_s();
            if (atomic_load(&c->failed) && failed_at == 0)
                failed_at = t;
            if ((failed_at > 0 && t - failed_at > GRACE_S) || t - start > c->timeout + GRACE_S) {
                pthread_mutex_lock(&c->lock);
                st = atomic_load(&c->failed)
                         ? sticky_locked(c)
                         : timeout_locked(c, "work queued before tgc_comm_synchronize", t - start);
                pthread_mutex_unlock(&c->lock);
                break;
            }
            sleep_s(spin < 200 ? 0.0001 : 0.001);
        }
        pthread_mutex_lock(&c->lock);
        put_event(c, mine);
        if (st == TGC_OK && atomic_load(&c->failed))
            st = sticky_locked(c);
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    return tgc_comm_status(c);
}

tgc_status tgc_comm_watch(tgc_comm *c, void *stream)
{
    if (!c)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_comm_watch: NULL communicator");
    tgc_status st = TGC_OK;
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->failed))
        st = sticky_locked(c);
    else if (is_gpu(c)) {
        st = enter_ctx(c);
        void *s = st == TGC_OK ? caller_stream(c, stream) : NULL;
        if (st == TGC_OK && !s)
            st = tgc_last_status();
        if (st == TGC_OK)
            st = watch_locked(c, s);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- free ---- */

void tgc_comm_free(tgc_comm *c)
{
    if (!c)
        return;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", tgc_last_error());
    tgc_status keep_st = tgc_last_status();
    const tgc_nccl_api *a = tgc_nccl();
    /* Queued work completes first, watched (so a dead peer still ends in an abort). */
    if (is_gpu(c) && !atomic_load(&c->failed))
        tgc_comm_synchronize(c, c->stream);
    unregister_comm(c);
    pthread_mutex_lock(&c->lock);
    tgc_nccl_comm nc = c->nc;
    c->nc = NULL;
    int failed = atomic_load(&c->failed);
    pthread_mutex_unlock(&c->lock);
    if (nc) {
        enter_dev(c->dev);
        if (failed)
            a->CommAbort(nc);
        else {
            tgc_nccl_result r = TGC_NCCL_SUCCESS;
            if (a->CommFinalize) {
                r = settle(c, nc, a->CommFinalize(nc));
            }
            if (r == TGC_NCCL_SUCCESS)
                a->CommDestroy(nc);
            else
                a->CommAbort(nc);
        }
    }
    destroy_shell(c);
    if (keep_st != TGC_OK)
        tgc_set_error(keep_st, "%s", keep);
    else
        tgc_clear_error();
}
