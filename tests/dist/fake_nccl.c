/* A TEST DOUBLE of NCCL, not a communication library: the NCCL functions runtime/comm.c calls,
 * with NCCL's ABI (the types of runtime/nccl.h), on HOST memory, for ranks that are processes
 * of one machine (the tests fork them). Built as libnccl.so.2 in its own folder of the build
 * tree; the tests point TGC_NCCL_LIBRARY at it.
 *
 * Rendezvous: ncclGetUniqueId writes a unique POSIX shared-memory name into the id bytes;
 * every rank of ncclCommInitRank* maps that segment (created by whoever comes first) and
 * counts itself in. The join is complete when `world` ranks arrived: a blocking init waits
 * for it, a nonblocking one (config.blocking = 0) returns ncclInProgress and
 * ncclCommGetAsyncError reports ncclInProgress until then.
 *
 * Collectives, in chunks of FAKE_CHUNK bytes per rank so any count works: every rank copies
 * its chunk into its slot, barrier, every rank reduces the slots in rank order into its
 * recv (so the result is identical on all ranks and deterministic: f32 in float, f64 in
 * double, f16/bf16 in float rounded once at the end, integers wrapping; AVG is the sum
 * divided by the world size), barrier. Broadcast: the root's chunk through slot 0.
 *
 * Failures: ncclCommAbort (from any thread, also while another thread is blocked in a call
 * on the same comm) marks the comm and the segment aborted, which makes every blocked or
 * later barrier of every rank return ncclRemoteError. A barrier also gives up after a safety
 * timeout (FAKE_SAFETY_S) with ncclSystemError, so a broken test never hangs forever. The
 * segment is unlinked when the last rank that mapped it leaves (destroy or abort).
 *
 * Groups: ncclCommInitRank* between ncclGroupStart and ncclGroupEnd (one process making
 * several ranks) only count in; ncclGroupEnd waits for the joins (blocking) or returns
 * ncclInProgress (when a nonblocking config was used). Collectives in groups are not
 * supported (comm.c issues none).
 *
 * Built with FAKE_NO_CONFIG it lacks ncclCommInitRankConfig, ncclCommFinalize and
 * ncclGetLastError, like an NCCL older than 2.14 (for comm.c's fallbacks).
 *
 * Thread-safety: calls on different comms may run in parallel; abort may race with a call. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/nccl.h"

#define FAKE_API       __attribute__((visibility("default")))
#define FAKE_MAX_RANKS 16
#define FAKE_CHUNK     (64 * 1024) /* bytes per rank and round */
#define FAKE_SAFETY_S  120.0
#define FAKE_VERSION   22703 /* "2.27.3" */
#define FAKE_SEG_MAGIC 0x74676366u

typedef struct seg {
    uint32_t magic;
    atomic_int world;   /* set by the first rank that joins */
    atomic_int arrived; /* ranks joined */
    atomic_int users;   /* ranks mapped now; the last one out unlinks */
    atomic_int aborted;
    atomic_uint bar_count;
    atomic_uint bar_gen;
    _Alignas(64) unsigned char slots[FAKE_MAX_RANKS][FAKE_CHUNK];
} seg;

struct tgc_nccl_comm_s {
    seg *s;
    char name[sizeof(tgc_nccl_id)];
    int rank, world;
    int blocking;
    int joined;        /* saw arrived == world */
    atomic_int abort;  /* this comm was aborted */
    atomic_int refs;   /* 1 for the handle + 1 per call running */
    atomic_int closed; /* destroy or abort happened */
};

static _Thread_local char t_last[256];
static _Thread_local int t_group;              /* ncclGroupStart depth */
static _Thread_local tgc_nccl_comm t_pend[64]; /* inits made inside the group */
static _Thread_local int t_npend;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_briefly(int spins)
{
    if (spins < 64)
        sched_yield();
    else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static tgc_nccl_result fail(tgc_nccl_result r, const char *msg)
{
    snprintf(t_last, sizeof t_last, "fake NCCL: %s", msg);
    return r;
}

/* ---- lifetime: the handle's reference and one per running call ---- */

static void leave_segment(tgc_nccl_comm c)
{
    if (atomic_fetch_sub(&c->s->users, 1) == 1)
        shm_unlink(c->name);
    munmap(c->s, sizeof(seg));
}

static void unref(tgc_nccl_comm c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        leave_segment(c);
        free(c);
    }
}

static int enter(tgc_nccl_comm c)
{
    if (!c || atomic_load(&c->closed))
        return 0;
    atomic_fetch_add(&c->refs, 1);
    return 1;
}

static tgc_nccl_result close_comm(tgc_nccl_comm c, int abort)
{
    if (!c)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "NULL communicator");
    if (abort) {
        atomic_store(&c->abort, 1);
        atomic_store(&c->s->aborted, 1);
    }
    if (atomic_exchange(&c->closed, 1))
        return TGC_NCCL_SUCCESS; /* closed already: the handle's reference is gone */
    unref(c);
    return TGC_NCCL_SUCCESS;
}

/* ---- the barrier all collectives and joins use ---- */

static tgc_nccl_result check_abort(tgc_nccl_comm c)
{
    if (atomic_load(&c->abort))
        return fail(TGC_NCCL_REMOTE_ERROR, "the communicator was aborted (ncclCommAbort)");
    if (atomic_load(&c->s->aborted))
        return fail(TGC_NCCL_REMOTE_ERROR, "a peer aborted the communicator");
    return TGC_NCCL_SUCCESS;
}

static tgc_nccl_result barrier(tgc_nccl_comm c)
{
    seg *s = c->s;
    tgc_nccl_result r = check_abort(c);
    if (r != TGC_NCCL_SUCCESS)
        return r;
    unsigned gen = atomic_load(&s->bar_gen);
    if (atomic_fetch_add(&s->bar_count, 1) == (unsigned)c->world - 1) {
        atomic_store(&s->bar_count, 0);
        atomic_fetch_add(&s->bar_gen, 1);
        return TGC_NCCL_SUCCESS;
    }
    double t0 = now_s();
    for (int spins = 0; atomic_load(&s->bar_gen) == gen; spins++) {
        r = check_abort(c);
        if (r != TGC_NCCL_SUCCESS)
            return r;
        if (now_s() - t0 > FAKE_SAFETY_S) {
            atomic_store(&s->aborted, 1);
            return fail(TGC_NCCL_SYSTEM_ERROR, "safety timeout: the peers never arrived");
        }
        pause_briefly(spins);
    }
    return TGC_NCCL_SUCCESS;
}

/* ---- version, ids, errors ---- */

FAKE_API tgc_nccl_result ncclGetVersion(int *v)
{
    if (!v)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "NULL version");
    *v = FAKE_VERSION;
    return TGC_NCCL_SUCCESS;
}

FAKE_API tgc_nccl_result ncclGetUniqueId(tgc_nccl_id *id)
{
    static atomic_int counter;
    if (!id)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "NULL id");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/tgc-fake-nccl-%d-%d-%ld", (int)getpid(),
             atomic_fetch_add(&counter, 1), (long)ts.tv_nsec);
    return TGC_NCCL_SUCCESS;
}

FAKE_API const char *ncclGetErrorString(tgc_nccl_result r)
{
    switch (r) {
    case TGC_NCCL_SUCCESS: return "no error";
    case TGC_NCCL_UNHANDLED_CUDA_ERROR: return "unhandled cuda error";
    case TGC_NCCL_SYSTEM_ERROR: return "unhandled system error";
    case TGC_NCCL_INTERNAL_ERROR: return "internal error";
    case TGC_NCCL_INVALID_ARGUMENT: return "invalid argument";
    case TGC_NCCL_INVALID_USAGE: return "invalid usage";
    case TGC_NCCL_REMOTE_ERROR: return "remote process exited or there was a network error";
    case TGC_NCCL_IN_PROGRESS: return "NCCL operation in progress";
    case TGC_NCCL_TIMEOUT: return "operation timed out";
    }
    return "unknown result code";
}

#ifndef FAKE_NO_CONFIG
FAKE_API const char *ncclGetLastError(tgc_nccl_comm comm)
{
    (void)comm;
    return t_last;
}
#endif

/* ---- init ---- */

static tgc_nccl_result join(tgc_nccl_comm *out, int world, tgc_nccl_id id, int rank, int blocking)
{
    if (!out || world < 1 || world > FAKE_MAX_RANKS || rank < 0 || rank >= world)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "bad rank or world size");
    id.internal[sizeof id.internal - 1] = 0;
    if (id.internal[0] != '/')
        return fail(TGC_NCCL_INVALID_ARGUMENT, "the unique id was not made by this library");
    int fd = shm_open(id.internal, O_CREAT | O_RDWR, 0600);
    if (fd < 0)
        return fail(TGC_NCCL_SYSTEM_ERROR, "shm_open failed");
    if (ftruncate(fd, sizeof(seg)) != 0) {
        close(fd);
        return fail(TGC_NCCL_SYSTEM_ERROR, "ftruncate failed");
    }
    seg *s = mmap(NULL, sizeof(seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
        return fail(TGC_NCCL_SYSTEM_ERROR, "mmap failed");
    tgc_nccl_comm c = calloc(1, sizeof *c);
    if (!c) {
        munmap(s, sizeof(seg));
        return fail(TGC_NCCL_SYSTEM_ERROR, "out of memory");
    }
    c->s = s;
    memcpy(c->name, id.internal, sizeof c->name);
    c->rank = rank;
    c->world = world;
    c->blocking = blocking;
    atomic_store(&c->refs, 1);
    atomic_fetch_add(&s->users, 1);
    int expect = 0;
    if (!atomic_compare_exchange_strong(&s->world, &expect, world) && expect != world) {
        close_comm(c, 1);
        return fail(TGC_NCCL_INVALID_USAGE, "ranks disagree on the world size");
    }
    atomic_fetch_add(&s->arrived, 1);
    *out = c;
    return TGC_NCCL_SUCCESS;
}

/* ncclSuccess once all ranks arrived, ncclInProgress before, the abort's error after one. */
static tgc_nccl_result join_state(tgc_nccl_comm c)
{
    tgc_nccl_result r = check_abort(c);
    if (r != TGC_NCCL_SUCCESS)
        return r;
    if (!c->joined && atomic_load(&c->s->arrived) >= c->world)
        c->joined = 1;
    return c->joined ? TGC_NCCL_SUCCESS : TGC_NCCL_IN_PROGRESS;
}

static tgc_nccl_result wait_joined(tgc_nccl_comm c)
{
    double t0 = now_s();
    for (int spins = 0;; spins++) {
        tgc_nccl_result r = join_state(c);
        if (r != TGC_NCCL_IN_PROGRESS)
            return r;
        if (now_s() - t0 > FAKE_SAFETY_S)
            return fail(TGC_NCCL_SYSTEM_ERROR, "safety timeout: the peers never joined");
        pause_briefly(spins);
    }
}

static tgc_nccl_result init_rank(tgc_nccl_comm *out, int world, tgc_nccl_id id, int rank,
                                 int blocking)
{
    tgc_nccl_result r = join(out, world, id, rank, blocking);
    if (r != TGC_NCCL_SUCCESS)
        return r;
    if (t_group > 0) {
        if (t_npend == (int)(sizeof t_pend / sizeof t_pend[0]))
            return fail(TGC_NCCL_INVALID_USAGE, "too many inits in one group");
        t_pend[t_npend++] = *out;
        return TGC_NCCL_SUCCESS;
    }
    return blocking ? wait_joined(*out) : TGC_NCCL_IN_PROGRESS;
}

FAKE_API tgc_nccl_result ncclCommInitRank(tgc_nccl_comm *comm, int nranks, tgc_nccl_id id, int rank)
{
    return init_rank(comm, nranks, id, rank, 1);
}

#ifndef FAKE_NO_CONFIG
/* NCCL_CONFIG_INITIALIZER (the fake links nothing of libtgc). */
static tgc_nccl_config default_config(void)
{
    tgc_nccl_config c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.magic = TGC_NCCL_API_MAGIC;
    c.version = TGC_NCCL_CONFIG_VERSION;
    c.blocking = c.cgaClusterSize = c.minCTAs = c.maxCTAs = c.splitShare =
        TGC_NCCL_CONFIG_UNDEF_INT;
    return c;
}

FAKE_API tgc_nccl_result ncclCommInitRankConfig(tgc_nccl_comm *comm, int nranks, tgc_nccl_id id,
                                                int rank, tgc_nccl_config *config)
{
    int blocking = 1;
    if (config) {
        /* NCCL's rule: read min(size, ours) bytes; the magic must be there. */
        tgc_nccl_config cfg = default_config();
        size_t n = config->size < sizeof cfg ? config->size : sizeof cfg;
        memcpy(&cfg, config, n);
        if (cfg.magic != TGC_NCCL_API_MAGIC || cfg.version < 21400)
            return fail(TGC_NCCL_INVALID_ARGUMENT, "config not made by NCCL_CONFIG_INITIALIZER");
        if (cfg.blocking == 0)
            blocking = 0;
    }
    return init_rank(comm, nranks, id, rank, blocking);
}

FAKE_API tgc_nccl_result ncclCommFinalize(tgc_nccl_comm comm)
{
    return comm ? TGC_NCCL_SUCCESS : fail(TGC_NCCL_INVALID_ARGUMENT, "NULL communicator");
}
#endif

FAKE_API tgc_nccl_result ncclGroupStart(void)
{
    if (t_group++ == 0)
        t_npend = 0;
    return TGC_NCCL_SUCCESS;
}

FAKE_API tgc_nccl_result ncclGroupEnd(void)
{
    if (t_group <= 0)
        return fail(TGC_NCCL_INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
    if (--t_group > 0)
        return TGC_NCCL_SUCCESS;
    tgc_nccl_result res = TGC_NCCL_SUCCESS;
    for (int i = 0; i < t_npend; i++) {
        if (!t_pend[i]->blocking) {
            res = res == TGC_NCCL_SUCCESS ? TGC_NCCL_IN_PROGRESS : res;
            continue;
        }
        tgc_nccl_result r = wait_joined(t_pend[i]);
        if (r != TGC_NCCL_SUCCESS)
            res = r;
    }
    t_npend = 0;
    return res;
}

FAKE_API tgc_nccl_result ncclCommGetAsyncError(tgc_nccl_comm comm, tgc_nccl_result *async)
{
    if (!comm || !async)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "NULL argument");
    *async = join_state(comm);
    return TGC_NCCL_SUCCESS;
}

FAKE_API tgc_nccl_result ncclCommAbort(tgc_nccl_comm comm)
{
    return close_comm(comm, 1);
}

FAKE_API tgc_nccl_result ncclCommDestroy(tgc_nccl_comm comm)
{
    return close_comm(comm, 0);
}

/* ---- element arithmetic ---- */

static size_t elem_size(tgc_nccl_dtype dt)
{
    switch (dt) {
    case TGC_NCCL_INT32:
    case TGC_NCCL_FLOAT32: return 4;
    case TGC_NCCL_INT64:
    case TGC_NCCL_FLOAT64: return 8;
    case TGC_NCCL_FLOAT16:
    case TGC_NCCL_BFLOAT16: return 2;
    }
    return 0;
}

static float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    bits = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_f16(float f) /* round to nearest even */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00;
    if (a >= 65520.0f)
        return sign | 0x7c00;
    if (a < ldexpf(1.0f, -14)) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)nearbyintf(a * ldexpf(1.0f, 24));
    int e;
    float fr = frexpf(a, &e);                          /* a = fr * 2^e, fr in [0.5, 1) */
    uint32_t m = (uint32_t)nearbyintf(ldexpf(fr, 11)); /* 11 significant bits */
    if (m == 2048) {
        m = 1024;
        e++;
    }
    return sign | (uint16_t)(((uint32_t)(e + 14) << 10) | (m - 1024));
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* recv[i] = op over the slots in rank order. */
static void reduce_slots(tgc_nccl_comm c, void *recv, size_t n, tgc_nccl_dtype dt, tgc_nccl_op op)
{
    int w = c->world;
    for (size_t i = 0; i < n; i++) {
        if (dt == TGC_NCCL_INT32 || dt == TGC_NCCL_INT64) {
            int64_t v = 0;
            for (int r = 0; r < w; r++) {
                int64_t x;
                if (dt == TGC_NCCL_INT32) {
                    int32_t y;
                    memcpy(&y, c->s->slots[r] + 4 * i, 4);
                    x = y;
                } else
                    memcpy(&x, c->s->slots[r] + 8 * i, 8);
                if (r == 0)
                    v = x;
                else if (op == TGC_NCCL_SUM)
                    v = (int64_t)((uint64_t)v + (uint64_t)x);
                else if (op == TGC_NCCL_PROD)
                    v = (int64_t)((uint64_t)v * (uint64_t)x);
                else if (op == TGC_NCCL_MAX)
                    v = x > v ? x : v;
                else
                    v = x < v ? x : v;
            }
            if (dt == TGC_NCCL_INT32) {
                int32_t y = (int32_t)(uint32_t)(uint64_t)v;
                memcpy((char *)recv + 4 * i, &y, 4);
            } else
                memcpy((char *)recv + 8 * i, &v, 8);
            continue;
        }
        double v = 0; /* f32 accumulates in float, f16/bf16 in float, f64 in double */
        for (int r = 0; r < w; r++) {
            const unsigned char *p = c->s->slots[r];
            double x;
            if (dt == TGC_NCCL_FLOAT64)
                memcpy(&x, p + 8 * i, 8);
            else {
                float f;
                uint16_t h;
                if (dt == TGC_NCCL_FLOAT32)
                    memcpy(&f, p + 4 * i, 4);
                else {
                    memcpy(&h, p + 2 * i, 2);
                    f = dt == TGC_NCCL_FLOAT16 ? f16_to_float(h) : bf16_to_float(h);
                }
                x = f;
            }
            if (r == 0)
                v = x;
            else if (op == TGC_NCCL_SUM || op == TGC_NCCL_AVG)
                v = v + x;
            else if (op == TGC_NCCL_PROD)
                v = v * x;
            else if (op == TGC_NCCL_MAX)
                v = x > v ? x : v;
            else
                v = x < v ? x : v;
            if (dt != TGC_NCCL_FLOAT64)
                v = (float)v;
        }
        if (op == TGC_NCCL_AVG)
            v = dt == TGC_NCCL_FLOAT64 ? v / w : (double)((float)v / (float)w);
        if (dt == TGC_NCCL_FLOAT64)
            memcpy((char *)recv + 8 * i, &v, 8);
        else if (dt == TGC_NCCL_FLOAT32) {
            float f = (float)v;
            memcpy((char *)recv + 4 * i, &f, 4);
        } else {
            uint16_t h = dt == TGC_NCCL_FLOAT16 ? float_to_f16((float)v) : float_to_bf16((float)v);
            memcpy((char *)recv + 2 * i, &h, 2);
        }
    }
}

static tgc_nccl_result check_call(tgc_nccl_comm c, size_t es, int op)
{
    if (es == 0)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "unsupported data type");
    if (op < TGC_NCCL_SUM || op > TGC_NCCL_AVG)
        return fail(TGC_NCCL_INVALID_ARGUMENT, "unsupported reduction");
    tgc_nccl_result r = join_state(c);
    if (r == TGC_NCCL_IN_PROGRESS)
        return fail(TGC_NCCL_INVALID_USAGE, "communicator used before its init completed");
    return r;
}

FAKE_API tgc_nccl_result ncclAllReduce(const void *send, void *recv, size_t count,
                                       tgc_nccl_dtype dt, tgc_nccl_op op, tgc_nccl_comm comm,
                                       void *stream)
{
    (void)stream;
    if (!enter(comm))
        return fail(TGC_NCCL_INVALID_USAGE, "communicator destroyed or aborted");
    size_t es = elem_size(dt);
    tgc_nccl_result r = check_call(comm, es, (int)op);
    if (r == TGC_NCCL_SUCCESS && op == TGC_NCCL_AVG &&
        (dt == TGC_NCCL_INT32 || dt == TGC_NCCL_INT64))
        r = fail(TGC_NCCL_INVALID_ARGUMENT, "ncclAvg on integers");
    size_t per = es ? FAKE_CHUNK / es : 0;
    for (size_t off = 0; r == TGC_NCCL_SUCCESS && off < count; off += per) {
        size_t n = count - off < per ? count - off : per;
        memcpy(comm->s->slots[comm->rank], (const char *)send + off * es, n * es);
        r = barrier(comm);
        if (r != TGC_NCCL_SUCCESS)
            break;
        reduce_slots(comm, (char *)recv + off * es, n, dt, op);
        r = barrier(comm);
    }
    unref(comm);
    return r;
}

FAKE_API tgc_nccl_result ncclBroadcast(const void *send, void *recv, size_t count,
                                       tgc_nccl_dtype dt, int root, tgc_nccl_comm comm,
                                       void *stream)
{
    (void)stream;
    if (!enter(comm))
        return fail(TGC_NCCL_INVALID_USAGE, "communicator destroyed or aborted");
    size_t es = elem_size(dt);
    tgc_nccl_result r = check_call(comm, es, TGC_NCCL_SUM);
    if (r == TGC_NCCL_SUCCESS && (root < 0 || root >= comm->world))
        r = fail(TGC_NCCL_INVALID_ARGUMENT, "root outside the world");
    size_t per = es ? FAKE_CHUNK / es : 0;
    for (size_t off = 0; r == TGC_NCCL_SUCCESS && off < count; off += per) {
        size_t n = count - off < per ? count - off : per;
        if (comm->rank == root)
            memcpy(comm->s->slots[0], (const char *)send + off * es, n * es);
        r = barrier(comm);
        if (r != TGC_NCCL_SUCCESS)
            break;
        memmove((char *)recv + off * es, comm->s->slots[0], n * es);
        r = barrier(comm);
    }
    unref(comm);
    return r;
}
