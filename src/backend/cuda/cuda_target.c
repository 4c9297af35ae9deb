/* The CUDA kernel-IR target (see cuda_target.h): a constant table. */
#include "backend/cuda/cuda_target.h"

static const kir_target g_target = {
    .name = "cuda",
    .lanes =
        {
            [TGC_F32] = 4,
            [TGC_F16] = 8,
            [TGC_BF16] = 8,
            [TGC_I32] = 4,
            [TGC_I64] = 2,
            [TGC_BOOL] = 16,
            [TGC_F64] = 2,
        },
    .min_lanes = 1,
    .reduce_lanes = 0,
    .flat_split = 0,
    .has_grid = 1,
    .block_threads = TGC_CUDA_BLOCK_THREADS,
    .template_dtypes =
        {
            [KIR_TPL_GEMM] = (1u << TGC_F32) | (1u << TGC_F16) | (1u << TGC_BF16),
            [KIR_TPL_CONV] = (1u << TGC_F32) | (1u << TGC_F16) | (1u << TGC_BF16),
        },
    .conv_channels_last = 1,
    .conv_grad_channels_last = 1, /* cuda_conv_grad.h's _cl entries */
    /* the renderer computes every pointwise op, copy and reduction for every dtype (floats
     * sum in double, integers in i64); pools and draws of floats; arange is a native op */
    .caps =
        {
            .pointwise_ok = NULL,
            .copy_dtypes = KIR_DTYPES_ALL,
            .reduce_dtypes = KIR_DTYPES_ALL,
            .reduce_keeps_dtype = 0,
            .pool_dtypes = KIR_DTYPES_FLOAT,
            .random_dtypes = KIR_DTYPES_FLOAT,
            .index_dtypes = 0,
        },
};

const kir_target *tgc_cuda_kir_target(void)
{
    return &g_target;
}
