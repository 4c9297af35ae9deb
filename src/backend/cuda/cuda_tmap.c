/* TMA tensor maps (see cuda_tmap.h). */
#include "backend/cuda/cuda_tmap.h"

#include <string.h>

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

void tgc_cuda_tmap_cache_init(tgc_cuda_tmap_cache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

void tgc_cuda_tmap_cache_destroy(tgc_cuda_tmap_cache *c)
{
    pthread_mutex_destroy(&c->mu);
}

static int same_desc(const tgc_cuda_tmap_desc *a, const tgc_cuda_tmap_desc *b)
{
    return a->dtype == b->dtype && a->base == b->base && a->dims[0] == b->dims[0] &&
           a->dims[1] == b->dims[1] && a->dims[2] == b->dims[2] && a->strides[0] == b->strides[0] &&
           a->strides[1] == b->strides[1] && a->box[0] == b->box[0] && a->box[1] == b->box[1];
}

tgc_status tgc_cuda_tmap_get(tgc_cuda_tmap_cache *c, const tgc_cuda_tmap_desc *d, void *out)
{
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < TGC_CUDA_TMAP_CACHE; i++)
        if (c->e[i].used && same_desc(&c->e[i].d, d)) {
            memcpy(out, c->e[i].map, 128);
            c->hits++;
            pthread_mutex_unlock(&c->mu);
            return TGC_OK;
        }
    pthread_mutex_unlock(&c->mu);
    /* encoded outside the lock: two threads missing on one description both encode it (the
     * same bytes), and a slow driver call holds no other launch up */
    tgc_status st = tgc_cuda_tmap_encode(d, out);
    if (st != TGC_OK)
        return st;
    pthread_mutex_lock(&c->mu);
    unsigned i = c->next++ % TGC_CUDA_TMAP_CACHE;
    c->e[i].used = 1;
    c->e[i].d = *d;
    memcpy(c->e[i].map, out, 128);
    c->encodes++;
    pthread_mutex_unlock(&c->mu);
    return TGC_OK;
}
