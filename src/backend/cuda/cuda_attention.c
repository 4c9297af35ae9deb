/* Fused attention on CUDA (see cuda_attention.h). First version: the contract only. */
#include "backend/cuda/cuda_attention.h"

#include "support/error.h"

tgc_status tgc_cuda_attention_run(const tgc_node *nd, tgc_tensor *const *ins,
                                  const int64_t *shape, tgc_tensor **out,
                                  const struct tgc_launch_env *env)
{
    (void)nd;
    (void)ins;
    (void)shape;
    (void)env;
    if (out)
        *out = NULL;
    return TGC_ERR_UNSUPPORTED;
}

int tgc_cuda_attention_supported(const tgc_node *nd)
{
    (void)nd;
    return 0;
}
