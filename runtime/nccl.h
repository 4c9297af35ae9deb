/* NCCL as runtime/comm.c sees it: libnccl.so.2 (or the file TGC_NCCL_LIBRARY names) opened
 * with dlopen the first time it is needed, its functions in one table. No NCCL header exists
 * where libtgc builds, so the few ABI types are declared here, laid out as NCCL's nccl.h lays
 * them out (the values and field order are NCCL's ABI; the names are ours). The tests' stand-in
 * (tests/dist/fake_nccl.c) includes this header to export the same ABI.
 *
 * Configs: ncclCommInitRankConfig copies min(config->size, its own size) bytes of the struct
 * and resets the fields newer than config->version to their defaults, so one struct of the
 * fields up to splitShare (NCCL 2.18) with version 2.18.0 is accepted by every library from
 * 2.14 on, older and newer. Libraries older than 2.14 lack the call: comm.c falls back to
 * ncclCommInitRank.
 *
 * Thread-safety: the table is written once under pthread_once (tgc_nccl_load, declared in
 * runtime/comm.h) and read-only afterwards. */
#ifndef TGC_RUNTIME_NCCL_H
#define TGC_RUNTIME_NCCL_H

#include <limits.h>
#include <stddef.h>

#include "tgc/tensor.h"

/* ncclResult_t */
typedef enum tgc_nccl_result {
    TGC_NCCL_SUCCESS = 0,
    TGC_NCCL_UNHANDLED_CUDA_ERROR = 1,
    TGC_NCCL_SYSTEM_ERROR = 2,
    TGC_NCCL_INTERNAL_ERROR = 3,
    TGC_NCCL_INVALID_ARGUMENT = 4,
    TGC_NCCL_INVALID_USAGE = 5,
    TGC_NCCL_REMOTE_ERROR = 6,
    TGC_NCCL_IN_PROGRESS = 7,
    TGC_NCCL_TIMEOUT = 8,
} tgc_nccl_result;

/* ncclDataType_t (the ones libtgc uses) */
typedef enum tgc_nccl_dtype {
    TGC_NCCL_INT32 = 2,
    TGC_NCCL_INT64 = 4,
    TGC_NCCL_FLOAT16 = 6,
    TGC_NCCL_FLOAT32 = 7,
    TGC_NCCL_FLOAT64 = 8,
    TGC_NCCL_BFLOAT16 = 9,
} tgc_nccl_dtype;

/* ncclRedOp_t: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4 (tgc_dist_op has the
 * same values). */
typedef enum tgc_nccl_op {
    TGC_NCCL_SUM = 0,
    TGC_NCCL_PROD = 1,
    TGC_NCCL_MAX = 2,
    TGC_NCCL_MIN = 3,
    TGC_NCCL_AVG = 4,
} tgc_nccl_op;

/* ncclUniqueId: 128 opaque bytes, passed by value. */
typedef struct tgc_nccl_id {
    char internal[128];
} tgc_nccl_id;

/* ncclComm_t: an opaque pointer. */
typedef struct tgc_nccl_comm_s *tgc_nccl_comm;

#define TGC_NCCL_CONFIG_UNDEF_INT INT_MIN
#define TGC_NCCL_API_MAGIC        0xcafebeefu
#define TGC_NCCL_CONFIG_VERSION   21800 /* NCCL_VERSION(2, 18, 0): fields up to splitShare */

/* ncclConfig_t, as NCCL 2.18 lays it out (later versions only append fields). */
typedef struct tgc_nccl_config {
    size_t size;          /* sizeof(tgc_nccl_config) */
    unsigned int magic;   /* TGC_NCCL_API_MAGIC */
    unsigned int version; /* TGC_NCCL_CONFIG_VERSION */
    int blocking;         /* 0: every call may return TGC_NCCL_IN_PROGRESS */
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
} tgc_nccl_config;

/* What NCCL_CONFIG_INITIALIZER gives, with blocking set. */
tgc_nccl_config tgc_nccl_config_init(int blocking);

typedef tgc_nccl_result (*tgc_nccl_init_rank_config_fn)(tgc_nccl_comm *comm, int nranks,
                                                        tgc_nccl_id id, int rank,
                                                        tgc_nccl_config *config);

/* The library's functions; the optional ones are NULL when the library lacks them. */
typedef struct tgc_nccl_api {
    tgc_nccl_result (*GetVersion)(int *version);
    tgc_nccl_result (*GetUniqueId)(tgc_nccl_id *id);
    tgc_nccl_init_rank_config_fn CommInitRankConfig; /* optional (NCCL >= 2.14) */
    tgc_nccl_result (*CommInitRank)(tgc_nccl_comm *comm, int nranks, tgc_nccl_id id, int rank);
    tgc_nccl_result (*CommGetAsyncError)(tgc_nccl_comm comm, tgc_nccl_result *async);
    tgc_nccl_result (*CommAbort)(tgc_nccl_comm comm);
    tgc_nccl_result (*CommDestroy)(tgc_nccl_comm comm);
    tgc_nccl_result (*CommFinalize)(tgc_nccl_comm comm); /* optional (NCCL >= 2.14) */
    tgc_nccl_result (*AllReduce)(const void *send, void *recv, size_t count, tgc_nccl_dtype dt,
                                 tgc_nccl_op op, tgc_nccl_comm comm, void *stream);
    tgc_nccl_result (*Broadcast)(const void *send, void *recv, size_t count, tgc_nccl_dtype dt,
                                 int root, tgc_nccl_comm comm, void *stream);
    tgc_nccl_result (*GroupStart)(void);
    tgc_nccl_result (*GroupEnd)(void);
    const char *(*GetErrorString)(tgc_nccl_result r);
    const char *(*GetLastError)(tgc_nccl_comm comm); /* optional (NCCL >= 2.13) */
    int version;                                     /* ncclGetVersion's code */
    char path[512];                                  /* the file opened */
} tgc_nccl_api;

/* The table, NULL until tgc_nccl_load succeeded. */
const tgc_nccl_api *tgc_nccl(void);

/* TGC_OK for TGC_NCCL_SUCCESS; else sets "<what>: <ncclGetErrorString> (ncclResult N)[: last
 * error]" and returns TGC_ERR_TIMEOUT for ncclTimeout, TGC_ERR_RUNTIME otherwise (what
 * include/tgc/dist.h promises for "another NCCL failure"). comm may be NULL. */
tgc_status tgc_nccl_error(tgc_nccl_result r, tgc_nccl_comm comm, const char *what);

#endif
