/* CUDA fusion classification and preparation (see cuda_classify.h): the shared classifier
 * and preparation (backend/classify.c, backend/prepare.c) for the CUDA target. */
#include "backend/cuda/cuda_classify.h"
#include "backend/classify.h"
#include "backend/cuda/cuda_target.h"
#include "backend/prepare.h"
#include "kir/lower.h"
#include "passes/passes.h"

static tgc_fuse_class classify(const tgc_graph *g, int32_t i)
{
    return tgc_backend_classify(g, i, tgc_cuda_kir_target());
}

/* its conv template stores channels-last (kir_target.conv_channels_last) */
static const tgc_fuse_hooks hooks = {classify, kir_epilogue_operand_ok, kir_permuted_store_ok};

const tgc_fuse_hooks *tgc_cuda_fuse_hooks(void)
{
    return &hooks;
}

unsigned tgc_cuda_decompose_keep(void)
{
    return TGC_DECOMPOSE_KEEP_ACTIVATIONS;
}

tgc_status tgc_cuda_prepare(tgc_graph *g)
{
    return tgc_prepare_for_target(g, tgc_cuda_kir_target());
}
