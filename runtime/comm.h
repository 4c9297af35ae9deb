/* Communicators: one rank of a process group over NCCL (runtime/nccl.c opens the library),
 * what tgc_dist (src/dist/dist.c) and the collective graph ops of the backends run on.
 *
 * A communicator belongs to one device. On a GPU it has a CUDA stream of its own: a
 * collective is queued there after the work queued so far on the caller's stream (an event
 * recorded there, waited for on the comm stream), and the caller's stream joins it later
 * (tgc_comm_wait), so the collective overlaps whatever the caller queues in between. Both
 * joins are event record / wait pairs, so they are recorded by a CUDA-graph capture of the
 * caller's stream like everything else (NCCL supports graph capture). On a host device the
 * collectives run synchronously in the calling thread (only an NCCL-compatible library that
 * takes host memory, like the tests' fake, can do that; the real NCCL refuses host memory).
 *
 * Timeouts: every host-side wait on peers (init, a synchronous host collective,
 * tgc_comm_synchronize) is bounded by the communicator's timeout, and a watchdog thread
 * watches each collective queued on the GPU (an event after it): one unfinished after the
 * timeout, or an asynchronous NCCL error, aborts the NCCL communicator (ncclCommAbort), which
 * makes NCCL's kernels return. The failure is sticky: tgc_comm_status and every later call
 * return it (TGC_ERR_TIMEOUT with "a peer did not answer within N s ..." for a timeout).
 *
 * Handles: each communicator has a small positive integer handle, unique in the process
 * for its lifetime and never reused; graph nodes name their communicator by it (an
 * attribute), and tgc_comm_from_handle finds it again (NULL once freed: the node fails).
 *
 * Thread-safety: one thread at a time per communicator (NCCL's rule); different
 * communicators may be used from different threads at once. tgc_comm_status and
 * tgc_comm_from_handle may be called from any thread. */
#ifndef TGC_RUNTIME_COMM_H
#define TGC_RUNTIME_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "tgc/dist.h"
#include "tgc/tensor.h"

/* NCCL's unique id: 128 opaque bytes (ncclUniqueId). */
typedef struct tgc_comm_id {
    unsigned char bytes[128];
} tgc_comm_id;

typedef struct tgc_comm tgc_comm;

/* Loads NCCL (once per process; first sets NCCL_NVLS_ENABLE=0 when the environment has no
 * NCCL_NVLS_ENABLE). TGC_ERR_UNSUPPORTED naming the file when it cannot be opened or lacks
 * a needed symbol. The library is TGC_NCCL_LIBRARY when set, else libnccl.so.2. */
tgc_status tgc_nccl_load(void);
/* NCCL's version code (ncclGetVersion, e.g. 22703), 0 when not loaded. */
int tgc_nccl_version(void);

/* A new id (ncclGetUniqueId). */
tgc_status tgc_comm_unique_id(tgc_comm_id *id);
/* The id as TGC_DIST_ID_CHARS hexadecimal characters and a NUL into buf (n bytes), and
 * back (TGC_ERR_INVALID_ARG for text of another length or with a non-hex character). */
tgc_status tgc_comm_id_to_text(const tgc_comm_id *id, char *buf, size_t n);
tgc_status tgc_comm_id_from_text(const char *text, tgc_comm_id *id);

/* Joins rank `rank` of `world` on device dev (a GPU, or the host with a host-memory
 * library). Non-blocking NCCL init polled until done: TGC_ERR_TIMEOUT (the communicator
 * aborted) when the peers have not all joined within timeout_s (> 0). Errors as
 * tgc_dist_init (include/tgc/dist.h). */
tgc_status tgc_comm_create(const tgc_comm_id *id, int rank, int world, tgc_device dev,
                           double timeout_s, tgc_comm **out);
/* One process, n devices (one communicator each, ranks 0..n-1, inited as one NCCL group). */
tgc_status tgc_comm_create_local(int n, const tgc_device *devs, double timeout_s, tgc_comm **out);
void tgc_comm_free(tgc_comm *c); /* NULL: nothing; waits for queued work unless failed */

int tgc_comm_rank(const tgc_comm *c);
int tgc_comm_world(const tgc_comm *c);
tgc_device tgc_comm_device(const tgc_comm *c);
double tgc_comm_timeout(const tgc_comm *c);
int64_t tgc_comm_handle(const tgc_comm *c);
tgc_comm *tgc_comm_from_handle(int64_t handle);
/* The communicator a graph node names, usable: NULL with the error set when it was freed
 * ("<who>: the process group this step communicates over was freed ...", TGC_ERR_INVALID_ARG)
 * or has failed (its sticky failure). */
tgc_comm *tgc_comm_live(int64_t handle, const char *who);
/* TGC_OK, or the sticky failure (its message set again in the calling thread). */
tgc_status tgc_comm_status(tgc_comm *c);

/* Collectives. Buffers are addresses on the communicator's device (device pointers on a GPU);
 * `stream` is the caller's CUDA stream (CUstream), NULL for the calling thread's current
 * stream of the device (tgc_cuda_stream_ptr); ignored on the host. count is in elements;
 * dt any of f32 f16 bf16 f64 i32 i64 (bool: TGC_ERR_DTYPE), op any tgc_dist_op (AVG and
 * PROD on integers: TGC_ERR_DTYPE). send == recv is an in-place reduction.
 *
 * All-reduce, asynchronous: queued on the comm stream after the work queued so far on
 * `stream`; recv is final for work queued on `stream` after tgc_comm_wait(c, recv, stream).
 * send and recv must stay allocated (not reused by anything) until that wait. Every
 * started all-reduce is waited for exactly once, in any order; the communicator remembers
 * the started ones by recv (at most 1024 at once: TGC_ERR_RUNTIME beyond). On the host the
 * reduction is done when start returns and wait only forgets it. */
tgc_status tgc_comm_all_reduce_start(tgc_comm *c, const void *send, void *recv, size_t count,
                                     tgc_dtype dt, tgc_dist_op op, void *stream);
/* Makes `stream` wait for the all-reduce that writes recv (TGC_ERR_INVALID_ARG when none
 * was started into recv). Returns at once on the GPU (the wait is on the stream). */
tgc_status tgc_comm_wait(tgc_comm *c, const void *recv, void *stream);
/* In-place broadcast of root's buf, queued on `stream` itself (ordered with the caller's
 * work; not overlapped). */
tgc_status tgc_comm_broadcast(tgc_comm *c, void *buf, size_t count, tgc_dtype dt, int root,
                              void *stream);
/* Waits (bounded by the timeout, the watchdog aborting the communicator when it passes)
 * until the work queued on `stream` so far has finished: TGC_ERR_TIMEOUT when it did not. */
tgc_status tgc_comm_synchronize(tgc_comm *c, void *stream);
/* After a CUDA-graph replay that contains this communicator's collectives was queued on
 * `stream`: records an event there for the watchdog, so a replay stuck on a dead peer is
 * aborted after the timeout too. Nothing on the host. */
tgc_status tgc_comm_watch(tgc_comm *c, void *stream);

#endif
