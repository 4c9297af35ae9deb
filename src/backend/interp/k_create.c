/* Creation kernels: random tensors drawn from the process Philox stream at run time, and
 * arange (start f[0], step f[1]) of the node's element count. */
#include "backend/interp/interp.h"
#include "runtime/philox.h"
#include "support/error.h"

/* Uniform [0, 1) with as many random bits as the dtype's mantissa holds below 1, so a
 * half-precision draw never rounds up to 1.0. */
static double uniform_for(tgc_dtype dt, uint64_t seed, uint64_t counter)
{
    uint32_t bits = tgc_philox_bits(seed, counter);
    switch (dt) {
    case TGC_F16: return (double)(bits >> 21) * 0x1p-11;
    case TGC_BF16: return (double)(bits >> 24) * 0x1p-8;
    default: return (double)(bits >> 8) * 0x1p-24;
    }
}

tgc_status tgc_interp_create(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             tgc_tensor *out)
{
    (void)in;
    if ((op != TGC_OP_RAND && op != TGC_OP_ARANGE) || n_in != 0)
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_create: %s is not a creation op",
                             tgc_op_name(op));
    int64_t n = tgc_shape_numel(out->shape, out->ndim);
    if (op == TGC_OP_ARANGE) {
        for (int64_t i = 0; i < n; i++)
            tgc_store(tgc_host_data(out), out->dtype, i,
                      a->arange.start + (double)i * a->arange.step);
        return TGC_OK;
    }
    uint64_t seed, base = tgc_rng_draw((uint64_t)n, &seed);
    void *p = tgc_host_data(out);
    for (int64_t i = 0; i < n; i++) {
        uint64_t c = base + (uint64_t)i;
        double v =
            a->rand.normal != 0 ? tgc_philox_normal(seed, c) : uniform_for(out->dtype, seed, c);
        tgc_store(p, out->dtype, i, v);
    }
    return TGC_OK;
}
