/* Eager ops (see eager.c): the one entry the frontend runs an op through outside a trace. */
#ifndef TGC_BACKEND_EAGER_H
#define TGC_BACKEND_EAGER_H

#include "ir/graph.h"

/* Runs op on concrete inputs (all on one device), out being its inferred result type: on
 * the kernels of the device's compiled backend when that backend compiles this signature,
 * else on interp (the reference; on a device without a backend only views, as interp refuses
 * to read device memory: TGC_ERR_DEVICE). The result lives in the innermost scope; NULL on failure (error
 * set). */
tgc_tensor *tgc_eager_run(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                          const tgc_vinfo *out);

/* Tests: while on, this thread's eager ops run on interp (the oracle side of a
 * comparison). */
void tgc_eager_force_interp(int on);

#endif
