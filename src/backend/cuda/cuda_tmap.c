/* TMA tensor maps (see cuda_tmap.h). */
#include "backend/cuda/cuda_tmap.h"

#include "runtime/cuda.h"
#include "support/error.h"

_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");

tgc_status tgc_cuda_tmap_encode(const tgc_cuda_tmap_desc *d, void *out)
{
    if (d->dtype != TGC_F32 && d->dtype != TGC_F16 && d->dtype != TGC_BF16)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc cuda: no tensor map for %s elements",
                             tgc_dtype_name(d->dtype));
    const tgc_cuda_driver *drv = tgc_cuda_drv();
    if (!drv)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda: a tensor map needs the CUDA driver");
    CUtensorMapDataType ty = d->dtype == TGC_F32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                             : d->dtype == TGC_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                   : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const cuuint64_t dims[3] = {d->dims[0], d->dims[1], d->dims[2]};
    const cuuint64_t strides[2] = {d->strides[0], d->strides[1]};
    const cuuint32_t box[3] = {d->box[0], d->box[1], 1}, estr[3] = {1, 1, 1};
    CUresult r = drv->cuTensorMapEncodeTiled(
        (CUtensorMap *)out, ty, 3, d->base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS)
        return TGC_OK;
    char why[160];
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc cuda: tensor map of %llu x %llu x %llu (strides %llu, %llu bytes, "
                         "box %u x %u) refused: %s",
                         (unsigned long long)dims[0], (unsigned long long)dims[1],
                         (unsigned long long)dims[2], (unsigned long long)strides[0],
                         (unsigned long long)strides[1], box[0], box[1],
                         tgc_cuda_describe(r, why, sizeof why));
}
