/* Process groups (include/tgc/dist.h): tgc_dist over a communicator of runtime/comm.h, the
 * rendezvous (id from the options, the environment or a file), and the collectives on
 * tensors, which are graph ops (ALL_REDUCE, then COMM_WAIT) recorded through tgc_apply, so
 * they run eagerly or inside a compiled function alike. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, mkstemp-free temp names, getpid */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend/apply.h"
#include "autograd/autograd.h"
#include "dist/dist_impl.h"
#include "frontend/trace.h"
#include "frontend/watch.h"
#include "runtime/comm.h"
#include "support/config_env.h"
#include "support/error.h"
#include "support/ptr_list.h"
#include "support/file.h"
#include "support/struct_size.h"
#include "tensor/copy.h"
#include "tgc/cuda.h"
#include "tgc/dist.h"
#include "tgc/ops.h"

struct tgc_dist {
    tgc_comm *comm;
    tgc_ptr_list watches; /* tgc_watch of the wrappers over this group: told when it goes */
};

tgc_comm *tgc_dist_comm(const tgc_dist *pg)
{
    return pg ? pg->comm : NULL;
}

tgc_status tgc_dist_opts_default_sized(tgc_dist_opts *opts, size_t size)
{
    if (!opts)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dist_opts_default_sized: opts is NULL");
    tgc_dist_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = size;
    o.rank = -1;
    o.world_size = -1;
    o.device = tgc_cuda(-1);
    o.timeout_s = 300.0;
    return tgc_struct_write("tgc_dist_opts_default_sized", "size", opts, size, &o, sizeof o,
                            TGC_FIELD_END(tgc_dist_opts, rank));
}

tgc_status tgc_dist_unique_id(char *buf, size_t n)
{
    if (!buf || n < TGC_DIST_ID_CHARS + 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_dist_unique_id: the buffer needs %d bytes, got %zu",
                             TGC_DIST_ID_CHARS + 1, buf ? n : 0);
    tgc_comm_id id;
    tgc_status st = tgc_comm_unique_id(&id);
    if (st == TGC_OK)
        st = tgc_comm_id_to_text(&id, buf, n);
    return tgc_error_prefix(st, "tgc_dist_unique_id");
}

/* A timeout in seconds: 0 means the default (300 s); NaN, an infinity or a negative value
 * would make every deadline unreachable or meaningless, so they are refused. */
static tgc_status check_timeout(double t, const char *fn, const char *field)
{
    if (isfinite(t) && t >= 0)
        return TGC_OK;
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "%s: %s is %g; give a finite number of seconds > 0 (0: the default, "
                         "300 s)",
                         fn, field, t);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rank 0's side of the file rendezvous: the id text written to a temporary name and renamed,
 * so a reader sees all of it or nothing. */
static tgc_status write_id_file(const char *path, const char *text)
{
    char tmp[4096];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp)
        return tgc_set_error(TGC_ERR_IO, "tgc_dist_init: id file path '%s' is too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return tgc_set_error(TGC_ERR_IO, "tgc_dist_init: cannot write the id file '%s': %s", tmp,
                             strerror(errno));
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return tgc_set_error(TGC_ERR_IO, "tgc_dist_init: cannot write the id file '%s': %s", path,
                             strerror(e));
    }
    return TGC_OK;
}

/* The other ranks' side: waits for the file, reads the id's text. */
static tgc_status read_id_file(const char *path, double timeout_s, char *text, size_t n, int rank)
{
    double end = now_s() + timeout_s;
    for (;;) {
        const char *why = NULL;
        int fd = tgc_file_open_read(path, NULL, &why);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "r");
            if (!f) {
                close(fd);
                return tgc_set_error(TGC_ERR_IO, "tgc_dist_init: cannot read the id file '%s'",
                                     path);
            }
            size_t got = fread(text, 1, n - 1, f);
            fclose(f);
            text[got] = 0;
            text[strcspn(text, "\r\n")] = 0;
            return TGC_OK;
        }
        if (errno != ENOENT)
            return tgc_set_error(TGC_ERR_IO, "tgc_dist_init: cannot read the id file '%s': %s",
                                 path, why);
        if (now_s() > end)
            return tgc_set_error(TGC_ERR_TIMEOUT,
                                 "tgc_dist_init: rank %d: rank 0 wrote no id file '%s' within "
                                 "%.1f s",
                                 rank, path, timeout_s);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* A rank or world size: the option's, else the environment's (-1 when neither). */
static tgc_status resolve_int(int given, int (*env)(const char **), const char *what, int *out)
{
    if (given >= 0) {
        *out = given;
        return TGC_OK;
    }
    const char *name = NULL;
    int v = env(&name);
    if (v == -2)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_dist_init: %s is not a non-negative integer (%s=%s)", what, name,
                             getenv(name));
    if (v < 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_dist_init: no %s: set opts.%s, or TGC_%s (or the launcher's "
                             "variable, see tgc/dist.h)",
                             what, strcmp(what, "rank") == 0 ? "rank" : "world_size",
                             strcmp(what, "rank") == 0 ? "RANK" : "WORLD_SIZE");
    *out = v;
    return TGC_OK;
}

static tgc_status resolve_device(tgc_device d, int rank, tgc_device *out)
{
    if (d.type == TGC_DEVICE_CUDA && d.index < 0) {
        int count = tgc_cuda_device_count();
        if (count <= 0) {
            if (tgc_cuda_check() == TGC_OK)
                return tgc_set_error(TGC_ERR_DEVICE, "tgc_dist_init: no GPU on this machine");
            char why[768]; /* the reason, after tgc_cuda_check's name */
            const char *e = tgc_last_error();
            snprintf(why, sizeof why, "%s", strncmp(e, "tgc_cuda_check: ", 16) ? e : e + 16);
            return tgc_set_error(TGC_ERR_DEVICE, "tgc_dist_init: %s", why);
        }
        int local = tgc_env_dist_local_rank(NULL);
        d.index = (local >= 0 ? local : rank) % count;
    }
    *out = d;
    return TGC_OK;
}

static tgc_dist *dist_init(const tgc_dist_opts *opts)
{
    tgc_dist_opts o = tgc_dist_opts_default(); /* what the caller's struct lacks */
    if (opts &&
        tgc_struct_read("tgc_dist_init", "opts->struct_size",
                        "; start from tgc_dist_opts_default()", &o, sizeof o,
                        TGC_FIELD_END(tgc_dist_opts, rank), opts, opts->struct_size) != TGC_OK)
        return NULL;
    o.struct_size = sizeof o;
    if (check_timeout(o.timeout_s, "tgc_dist_init", "opts.timeout_s") != TGC_OK)
        return NULL;
    if (o.timeout_s == 0)
        o.timeout_s = 300.0;
    int rank = 0, world = 0;
    tgc_status st = resolve_int(o.rank, tgc_env_dist_rank, "rank", &rank);
    if (st == TGC_OK)
        st = resolve_int(o.world_size, tgc_env_dist_world, "world size", &world);
    if (st == TGC_OK && (world < 1 || rank >= world))
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "tgc_dist_init: rank %d is outside a world of size %d", rank, world);
    tgc_device dev = o.device;
    if (st == TGC_OK)
        st = resolve_device(o.device, rank, &dev);
    if (st != TGC_OK)
        return NULL;
    /* the id: given, from the environment, or through the file */
    char text[TGC_DIST_ID_CHARS + 64];
    const char *id = o.id ? o.id : tgc_env_dist_id();
    const char *file = o.id_file ? o.id_file : tgc_env_dist_id_file();
    tgc_comm_id cid;
    if (!id && !file) {
        if (world > 1) {
            tgc_set_error(TGC_ERR_INVALID_ARG,
                          "tgc_dist_init: no unique id: set opts.id or opts.id_file, or "
                          "TGC_DIST_ID or TGC_DIST_ID_FILE");
            return NULL;
        }
        st = tgc_comm_unique_id(&cid); /* a world of one makes its own */
    } else if (id) {
        st = tgc_comm_id_from_text(id, &cid);
    } else if (rank == 0) {
        st = tgc_comm_unique_id(&cid);
        if (st == TGC_OK)
            st = tgc_comm_id_to_text(&cid, text, sizeof text);
        if (st == TGC_OK)
            st = write_id_file(file, text);
    } else {
        st = tgc_nccl_load(); /* a missing library says so before any wait */
        if (st == TGC_OK)
            st = read_id_file(file, o.timeout_s, text, sizeof text, rank);
        if (st == TGC_OK)
            st = tgc_comm_id_from_text(text, &cid);
    }
    if (st != TGC_OK)
        return NULL;
    tgc_dist *pg = calloc(1, sizeof *pg);
    if (!pg) {
        tgc_set_error(TGC_ERR_OOM, "tgc_dist_init: out of memory");
        return NULL;
    }
    st = tgc_comm_create(&cid, rank, world, dev, o.timeout_s, &pg->comm);
    if (st != TGC_OK) {
        free(pg);
        return NULL;
    }
    return pg;
}

tgc_dist *tgc_dist_init(const tgc_dist_opts *opts)
{
    tgc_dist *pg = dist_init(opts);
    if (!pg)
        tgc_error_prefix(tgc_last_status(), "tgc_dist_init");
    return pg;
}

tgc_status tgc_dist_init_local(int n, const tgc_device *devs, double timeout_s, tgc_dist **out)
{
    if (!out || !devs || n < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dist_init_local: %s",
                             !out    ? "out is NULL"
                             : !devs ? "devs is NULL"
                                     : "n must be >= 1");
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (check_timeout(timeout_s, "tgc_dist_init_local", "timeout_s") != TGC_OK)
        return TGC_ERR_INVALID_ARG;
    tgc_comm **comms = calloc((size_t)n, sizeof *comms);
    tgc_dist **pgs = calloc((size_t)n, sizeof *pgs);
    tgc_status st =
        comms && pgs ? TGC_OK : tgc_set_error(TGC_ERR_OOM, "tgc_dist_init_local: out of memory");
    for (int i = 0; i < n && st == TGC_OK; i++)
        if (!(pgs[i] = calloc(1, sizeof **pgs)))
            st = tgc_set_error(TGC_ERR_OOM, "tgc_dist_init_local: out of memory");
    if (st == TGC_OK)
        st = tgc_comm_create_local(n, devs, timeout_s > 0 ? timeout_s : 300.0, comms);
    for (int i = 0; i < n; i++) {
        if (st == TGC_OK) {
            pgs[i]->comm = comms[i];
            out[i] = pgs[i];
        } else if (pgs) {
            free(pgs[i]);
        }
    }
    free(comms);
    free(pgs);
    return tgc_error_prefix(st, "tgc_dist_init_local");
}

/* The queries' NULL check: as a tensor query's, it keeps an earlier error (the NULL is
 * usually a failed tgc_dist_init's) and otherwise sets TGC_ERR_INVALID_ARG. */
static int null_group(const tgc_dist *pg, const char *fn)
{
    if (pg)
        return 0;
    tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: pg is NULL", fn);
    return 1;
}

int tgc_dist_rank(const tgc_dist *pg)
{
    return null_group(pg, "tgc_dist_rank") ? -1 : tgc_comm_rank(pg->comm);
}

int tgc_dist_world_size(const tgc_dist *pg)
{
    return null_group(pg, "tgc_dist_world_size") ? 0 : tgc_comm_world(pg->comm);
}

tgc_device tgc_dist_device(const tgc_dist *pg)
{
    return null_group(pg, "tgc_dist_device") ? tgc_cpu() : tgc_comm_device(pg->comm);
}

tgc_status tgc_dist_status(const tgc_dist *pg)
{
    if (!pg)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dist_status: pg is NULL");
    return tgc_error_prefix(tgc_comm_status(pg->comm), "tgc_dist_status");
}

tgc_status tgc_dist_watch(tgc_dist *pg, tgc_watch *w)
{
    return tgc_ptr_list_add(&pg->watches, w)
               ? TGC_OK
               : tgc_set_error(TGC_ERR_OOM, "tgc_ddp_create: out of memory");
}

void tgc_dist_unwatch(tgc_dist *pg, tgc_watch *w)
{
    tgc_ptr_list_remove(&pg->watches, w);
}

void tgc_dist_free(tgc_dist *pg)
{
    if (!pg)
        return;
    for (int i = 0; i < pg->watches.n; i++) { /* a wrapper's later backwards fail */
        tgc_watch *w = pg->watches.items[i];
        w->gone(w);
    }
    tgc_ptr_list_free(&pg->watches);
    tgc_comm_free(pg->comm);
    free(pg);
}

/* ---- collectives as graph ops ---- */

static tgc_status check_tensor(const char *fn, const tgc_dist *pg, const tgc_tensor *t)
{
    if (!pg || !t)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !pg ? "pg" : "t");
    tgc_device d = tgc_comm_device(pg->comm);
    char td[48], gd[48];
    if (!tgc_device_equal(t->device, d))
        return tgc_set_error(TGC_ERR_DEVICE, "%s: the tensor is on %s, the process group on %s", fn,
                             tgc_format_device(t->device, td, sizeof td),
                             tgc_format_device(d, gd, sizeof gd));
    return tgc_comm_status(pg->comm);
}

tgc_tensor *tgc_dist_reduce_start(const char *fn, tgc_dist *pg, tgc_tensor *x, tgc_dist_op op)
{
    if (check_tensor(fn, pg, x) != TGC_OK)
        return NULL;
    tgc_attrs a = tgc_attrs_of(TGC_OP_ALL_REDUCE);
    a.all_reduce.comm = tgc_comm_handle(pg->comm);
    a.all_reduce.op = op;
    return tgc_apply(TGC_OP_ALL_REDUCE, &x, 1, &a);
}

tgc_tensor *tgc_dist_reduce_wait(tgc_dist *pg, tgc_tensor *y, tgc_tensor *x)
{
    if (!y || !x)
        return NULL;
    tgc_attrs a = tgc_attrs_of(TGC_OP_COMM_WAIT);
    a.comm.comm = tgc_comm_handle(pg->comm);
    tgc_tensor *in[2] = {y, x};
    return tgc_apply(TGC_OP_COMM_WAIT, in, 2, &a);
}

tgc_tensor *tgc_dist_all_reduce_in(const char *fn, tgc_dist *pg, tgc_tensor *t, tgc_dist_op op)
{
    if ((unsigned)op > TGC_DIST_AVG) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: unknown reduction %d", fn, (int)op);
        return NULL;
    }
    tgc_autograd_pause(); /* collectives carry no gradient */
    tgc_tensor *y = tgc_dist_reduce_start(fn, pg, t, op);
    tgc_tensor *r = tgc_dist_reduce_wait(pg, y, t);
    tgc_autograd_resume();
    if (!r && pg && t) /* a NULL input keeps the error that made it */
        tgc_error_prefix(tgc_last_status(), fn);
    return r;
}

tgc_tensor *tgc_dist_all_reduce(tgc_dist *pg, tgc_tensor *t, tgc_dist_op op)
{
    return tgc_dist_all_reduce_in("tgc_dist_all_reduce", pg, t, op);
}

tgc_status tgc_dist_broadcast_in(const char *fn, tgc_dist *pg, tgc_tensor *t, int root)
{
    tgc_status st = check_tensor(fn, pg, t); /* names fn, or keeps a NULL input's error */
    if (st != TGC_OK)
        return st;
    if (t->trace)
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "%s: not inside a compiled function (broadcast before the first "
                             "call, e.g. with tgc_ddp_create)",
                             fn);
    if (root < 0 || root >= tgc_comm_world(pg->comm))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: root %d is outside a world of size %d", fn,
                             root, tgc_comm_world(pg->comm));
    if (!tgc_tensor_is_contiguous(t))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: t must be contiguous", fn);
    size_t n = (size_t)tgc_shape_numel(t->shape, t->ndim);
    if (n == 0)
        return TGC_OK;
    st = tgc_comm_broadcast(pg->comm, tgc_device_ptr(t), n, t->dtype, root, NULL);
    if (st == TGC_OK && t->storage)
        tgc_storage_bump(t->storage);
    return tgc_error_prefix(st, fn);
}

tgc_status tgc_dist_broadcast_(tgc_dist *pg, tgc_tensor *t, int root)
{
    return tgc_dist_broadcast_in("tgc_dist_broadcast_", pg, t, root);
}

tgc_status tgc_dist_barrier(tgc_dist *pg)
{
    if (!pg)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_dist_barrier: pg is NULL");
    tgc_status st = tgc_comm_status(pg->comm);
    if (st != TGC_OK)
        return tgc_error_prefix(st, "tgc_dist_barrier");
    if (tgc_trace_current())
        return tgc_set_error(TGC_ERR_UNSUPPORTED,
                             "tgc_dist_barrier: not inside a compiled function");
    tgc_scope_push();
    tgc_tensor *one = tgc_zeros((int64_t[]){1}, 1, TGC_F32, tgc_comm_device(pg->comm));
    tgc_tensor *r = one ? tgc_dist_all_reduce_in("tgc_dist_barrier", pg, one, TGC_DIST_SUM) : NULL;
    st = r ? tgc_comm_synchronize(pg->comm, NULL) : tgc_last_status();
    tgc_scope_pop();
    return tgc_error_prefix(st, "tgc_dist_barrier");
}
