/* Eager ops (see eager.c): the one entry the frontend runs an op through outside a trace. */
#ifndef TGC_BACKEND_EAGER_H
#define TGC_BACKEND_EAGER_H

#include "ir/graph.h"
#include "tgc/config.h"

/* Runs op on concrete inputs (all on one device), out being its inferred result type: on
 * the kernels of the device's compiled backend when that backend compiles this signature,
 * else on interp (the reference; on a device without a backend only views, as interp refuses
 * to read device memory: TGC_ERR_DEVICE). The result lives in the innermost scope; NULL on failure
 * (error set). */
tgc_tensor *tgc_eager_run(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                          const tgc_vinfo *out);

/* The settings of the compiled function whose call runs eagerly on this thread (a graph
 * break, a cache limit's fallback, backend EAGER), so its ops compute as its variants do:
 * matmul_precision (the only config field that changes numerics; the eager cache key holds
 * it for the ops whose matrix products it rounds) and the stream the ops launch on (the one
 * the function's config names for the backend an op runs on: tgc_backend_config_stream).
 * set = 0: the defaults (tgc_config_default()'s precision, the thread's stream). */
typedef struct tgc_eager_opts {
    int set;
    tgc_matmul_precision precision;
    const tgc_config *cfg; /* the function's (it outlives the push) */
} tgc_eager_opts;

/* Makes cfg's settings this thread's eager settings (NULL: the defaults) and returns the ones
 * before, which tgc_eager_opts_pop restores (calls nest). */
tgc_eager_opts tgc_eager_opts_push(const tgc_config *cfg);
void tgc_eager_opts_pop(tgc_eager_opts prev);

/* Tests: the eager cache's ready entries of op whose plan computes matrix products at
 * precision p (p < 0: of any precision, with a plan or not). */
int tgc_eager_cache_count(tgc_op op, int p);

/* Tests: while on, this thread's eager ops run on interp (the oracle side of a
 * comparison). */
void tgc_eager_force_interp(int on);

#endif
