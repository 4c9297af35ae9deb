/* libtgc — data-parallel training over NCCL: process groups (tgc_dist) and the data-parallel
 * wrapper of a module (tgc_ddp), what PyTorch's torch.distributed and
 * DistributedDataParallel give.
 *
 * NCCL. libtgc has no collective layer of its own: it opens NCCL (libnccl.so.2, or the file
 * TGC_NCCL_LIBRARY names) with dlopen the first time a process group is made, like the CUDA
 * driver and NVRTC, so the library builds and runs without it. Where it is missing every
 * call here fails with TGC_ERR_UNSUPPORTED and a message naming the file. NVLink multicast
 * (NVLS) is kept off: NCCL_NVLS_ENABLE=0 is set in the environment before NCCL is loaded
 * unless the variable is set already, and libtgc never calls cuMulticastCreate.
 * Collectives run on device memory: a group's device is a GPU (tgc_cuda(i)). A host device
 * (tgc_cpu()) is accepted only with an NCCL-compatible library that reduces host memory,
 * such as the one the tests build (tests/dist/fake_nccl.c); the real NCCL refuses it.
 *
 * One process per GPU. Every rank calls tgc_dist_init with its rank, the world size and the
 * same unique id, which comes from a file (opts.id_file: rank 0 writes it, atomically; the
 * others wait for it) or from the environment, so any launcher works (a shell loop, mpirun,
 * torchrun, a job scheduler). Ranks and sizes the options leave at -1 are read from the
 * environment: TGC_RANK, else RANK (torchrun), OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK,
 * SLURM_PROCID; TGC_WORLD_SIZE, else WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_NTASKS; the device's index from TGC_LOCAL_RANK, LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, else rank modulo the number of GPUs. The id is
 * opts.id, else TGC_DIST_ID (the text tgc_dist_unique_id writes), else the file opts.id_file,
 * else the file TGC_DIST_ID_FILE. One process driving several GPUs makes one group per
 * device with tgc_dist_init_local and drives each from a thread of its own.
 *
 * Failures are statuses, never hangs. Every wait on peers (init, each collective, the
 * structure check of tgc_ddp_create) is bounded by opts.timeout_s: a peer that never joins
 * or that dies fails the call with TGC_ERR_TIMEOUT, and a watchdog thread aborts the NCCL
 * communicator of a collective still unfinished on the GPU after the timeout (so a later
 * synchronization returns instead of hanging); from then on tgc_dist_status and every call
 * on the group, including compiled steps that all-reduce over it, fail with TGC_ERR_TIMEOUT.
 * A group that failed cannot be repaired: free it and make a new one with a new id.
 *
 * Ownership: tgc_dist_init returns a group the caller frees with tgc_dist_free, normally
 * after every tgc_ddp over it and every compiled function that communicated over it. Freed
 * in another order nothing crashes: a tgc_ddp whose group (or module) was freed first is
 * detached (each handle is told of the other's free; none keeps the other alive): a backward
 * that would average through it, tgc_ddp_set_sync and tgc_ddp_group fail with
 * TGC_ERR_INVALID_ARG saying which was freed, and tgc_ddp_free still frees it; a compiled
 * step that all-reduces over a freed group fails with TGC_ERR_INVALID_ARG.
 * Errors: messages start with the name of the function called, then the cause, including
 * causes from NCCL, the CUDA driver or the rendezvous ("tgc_dist_init: libcuda.so.1 could
 * not be opened (...)"). Queries on a NULL handle return the value stated at each and set
 * TGC_ERR_INVALID_ARG, keeping an earlier error (the NULL is usually a failed creation's).
 * Threading: a group is used by one thread at a time (NCCL's rule); groups of one process
 * may be used from different threads at once. */
#ifndef TGC_DIST_H
#define TGC_DIST_H

#include "module.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- process groups ---- */
typedef struct tgc_dist tgc_dist;

typedef struct tgc_dist_opts {
    size_t struct_size; /* sizeof(tgc_dist_opts): set by tgc_dist_opts_default (config.h
                         * says how a struct of another size is read) */
    int rank;           /* 0 .. world_size-1; -1: from the environment (see above) */
    int world_size;     /* >= 1; -1: from the environment */
    tgc_device device;  /* this rank's device; device.index -1 (the default): a GPU chosen
                         * from the local rank (see above) */
    const char *id;      /* the unique id as text (tgc_dist_unique_id); NULL: TGC_DIST_ID,
                          * else id_file */
    const char *id_file; /* rendezvous file: rank 0 creates the id and writes it here (to a
                          * temporary name, renamed), the others wait up to timeout_s for it;
                          * NULL: TGC_DIST_ID_FILE. Remove a stale file before a new run. */
    double timeout_s;    /* bound of every wait on peers, in seconds; 0: 300 s; NaN, an
                          * infinity or a negative value: TGC_ERR_INVALID_ARG */
} tgc_dist_opts;

/* Defaults: rank and world_size -1, device tgc_cuda(-1) (chosen from the local rank), id
 * and id_file NULL, timeout 300 s. tgc_dist_opts_default_sized fills size bytes (sizeof as
 * the caller's header declares it) and sets struct_size = size; NULL opts or a size below
 * the end of rank: TGC_ERR_INVALID_ARG, nothing written. */
TGC_API tgc_status tgc_dist_opts_default_sized(tgc_dist_opts *opts, size_t size);
static inline tgc_dist_opts tgc_dist_opts_default(void)
{
    tgc_dist_opts o;
    tgc_dist_opts_default_sized(&o, sizeof o);
    return o;
}

/* A new unique id as text (hexadecimal, TGC_DIST_ID_CHARS characters and a NUL) into buf of
 * n bytes: pass it to every rank (opts.id or TGC_DIST_ID). Loads NCCL
 * (TGC_ERR_UNSUPPORTED without it); n too small: TGC_ERR_INVALID_ARG. */
#define TGC_DIST_ID_CHARS 256
TGC_API tgc_status tgc_dist_unique_id(char *buf, size_t n);

/* Joins the process group: returns when all world_size ranks joined (NULL with the status
 * otherwise: TGC_ERR_UNSUPPORTED without NCCL; TGC_ERR_INVALID_ARG for a rank outside
 * [0, world_size), a missing or malformed id, no rank or world size anywhere;
 * TGC_ERR_DEVICE for a device that does not exist; TGC_ERR_TIMEOUT when the peers did not
 * all join (or rank 0 wrote no id file) within the timeout; TGC_ERR_IO when the id file
 * cannot be written or read; TGC_ERR_RUNTIME for another NCCL failure, with NCCL's
 * message). A world of size 1 needs no peer (and still goes through NCCL). */
TGC_API tgc_dist *tgc_dist_init(const tgc_dist_opts *opts);
/* One process, n devices: out[i] is the group member (rank i of n) on devs[i]. Use each
 * from its own thread (collectives of the members must be issued concurrently). timeout_s
 * as opts.timeout_s of tgc_dist_init. On failure every out[i] is NULL and the status says
 * why (as tgc_dist_init). */
TGC_API tgc_status tgc_dist_init_local(int n, const tgc_device *devs, double timeout_s,
                                       tgc_dist **out);
/* Rank (-1 for NULL), world size (0 for NULL) and device (tgc_cpu() for NULL) of pg. */
TGC_API int tgc_dist_rank(const tgc_dist *pg);
TGC_API int tgc_dist_world_size(const tgc_dist *pg);
TGC_API tgc_device tgc_dist_device(const tgc_dist *pg);
/* TGC_OK while the group works; TGC_ERR_TIMEOUT (or the NCCL failure) once it failed, with
 * the reason in tgc_last_error(). NULL: TGC_ERR_INVALID_ARG. */
TGC_API tgc_status tgc_dist_status(const tgc_dist *pg);
/* Returns when every rank called it (bounded by the timeout). */
TGC_API tgc_status tgc_dist_barrier(tgc_dist *pg);
/* Frees the group (NULL: nothing). Collectives still queued complete first, or are aborted
 * when the group failed. A tgc_ddp still over it is detached (see Ownership above). */
TGC_API void tgc_dist_free(tgc_dist *pg);

/* ---- collectives on tensors (eagerly, or recorded as graph ops inside a compiled
 * function: the step stays one variant, and one CUDA graph in REDUCE_OVERHEAD) ---- */
typedef enum tgc_dist_op {
    TGC_DIST_SUM = 0,
    TGC_DIST_PROD,
    TGC_DIST_MAX,
    TGC_DIST_MIN,
    TGC_DIST_AVG
} tgc_dist_op;
/* A new tensor: op over the ranks of t's elements (every rank passes a tensor of the same
 * shape and dtype on the group's device; f32, f16, bf16, f64, i32, i64; AVG and PROD only
 * for floating point). NULL on error (TGC_ERR_DEVICE for another device, TGC_ERR_DTYPE,
 * TGC_ERR_TIMEOUT). Records no gradient. */
TGC_API tgc_tensor *tgc_dist_all_reduce(tgc_dist *pg, tgc_tensor *t, tgc_dist_op op);
/* Overwrites t on every rank with root's t (t must be contiguous; eager only, not inside a
 * compiled function: TGC_ERR_UNSUPPORTED there). */
TGC_API tgc_status tgc_dist_broadcast_(tgc_dist *pg, tgc_tensor *t, int root);

/* ---- data-parallel modules ---- */
typedef struct tgc_ddp tgc_ddp;

typedef struct tgc_ddp_opts {
    size_t bucket_bytes;       /* gradient bytes per all-reduce; 0: 25 MiB (PyTorch's) */
    size_t first_bucket_bytes; /* the first bucket (the last parameters, ready first); 0: 1 MiB */
    int no_broadcast;          /* 1: skip the broadcast of rank 0's parameters and buffers */
} tgc_ddp_opts;

/* Makes module m (on the group's device) data-parallel over pg:
 *  - checks that every rank has the same structure (a hash of the names, kinds, shapes,
 *    dtypes and requires_grad flags of the module tree's tensors, exchanged over pg):
 *    TGC_ERR_MISMATCH on every rank when they disagree, naming this rank's hash;
 *  - copies rank 0's parameters and buffers to every rank (a broadcast), unless
 *    opts->no_broadcast;
 *  - from then on, tgc_backward through m's parameters averages their gradients over the
 *    ranks: the parameters that require a gradient are split into buckets (reverse tree
 *    order, one dtype each, about bucket_bytes), and each bucket's all-reduce is launched on
 *    a stream of its own as soon as backward has produced the bucket's last gradient, so it
 *    overlaps the rest of backward; the averaged gradients are in each .grad when
 *    tgc_backward returns (for the device: for work queued after it). Inside a compiled
 *    function the all-reduces are graph ops: forward, backward, all-reduces and the
 *    optimizer update stay one variant.
 * opts may be NULL (defaults). A parameter that gets no gradient in a backward contributes
 * its .grad as it is (zeros when it had none). Every rank must run the same backward.
 * NULL on error: TGC_ERR_INVALID_ARG (NULL argument, m already data-parallel),
 * TGC_ERR_DEVICE (m's tensors not all on the group's device), TGC_ERR_MISMATCH,
 * TGC_ERR_TIMEOUT, or the group's failure. Free the ddp before m and pg; freeing m or pg
 * first detaches it instead (see Ownership above): the ddp keeps no reference to either. */
TGC_API tgc_ddp *tgc_ddp_create_sized(tgc_dist *pg, tgc_module *m, const tgc_ddp_opts *opts,
                                      size_t opts_size);
static inline tgc_ddp *tgc_ddp_create(tgc_dist *pg, tgc_module *m, const tgc_ddp_opts *opts)
{
    return tgc_ddp_create_sized(pg, m, opts, sizeof *opts); /* config.h: structs that grow */
}
/* Gradient accumulation: with sync off, tgc_backward only adds into each .grad on this rank
 * (no communication), like PyTorch's no_sync(); the first backward with sync on again
 * averages the accumulated gradients. The flag is part of the module's structure
 * signature, so a compiled step traced with one setting recompiles once for the other
 * (recompile reason: "self.ddp sync changed") and then both variants stay cached. */
TGC_API tgc_status tgc_ddp_set_sync(tgc_ddp *d, int on);
/* The sync flag (0 for NULL). */
TGC_API int tgc_ddp_sync(const tgc_ddp *d);
/* The number of gradient buckets, and the number of parameters in bucket i (for logs); 0
 * for NULL or a bucket out of range, with TGC_ERR_INVALID_ARG. */
TGC_API int tgc_ddp_num_buckets(const tgc_ddp *d);
TGC_API int tgc_ddp_bucket_size(const tgc_ddp *d, int i);
/* The group d averages over; NULL with TGC_ERR_INVALID_ARG for NULL or once the group was
 * freed. */
TGC_API tgc_dist *tgc_ddp_group(const tgc_ddp *d);
/* Detaches the wrapper: m's gradients are no longer averaged (NULL: nothing). */
TGC_API void tgc_ddp_free(tgc_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
