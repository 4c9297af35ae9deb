/* TMA tensor maps of the CUDA backend: the plain description of one rank-3 tiled map (what
 * the GEMM templates' launch computes, cuda_gemm.h) and its encoding into the driver's
 * 128-byte CUtensorMap (cuTensorMapEncodeTiled) with the layout the warp-specialized GEMM's
 * shared-memory stages need: 128-byte swizzle, no interleave, 256-byte L2 promotion, elements
 * outside the tensor read as zeros. Needs no CUDA header; thread-safe (no state). */
#ifndef TGC_BACKEND_CUDA_TMAP_H
#define TGC_BACKEND_CUDA_TMAP_H

#include <pthread.h>
#include <stdint.h>

#include "tgc/tensor.h"

/* One rank-3 tensor {dims[0] (contiguous), dims[1], dims[2]} of `dtype` (TGC_F32, TGC_F16 or
 * TGC_BF16) at base (16-byte aligned), dims 1 and 2 `strides` bytes apart (multiples of 16,
 * below 2^40), read in boxes of box[0] x box[1] x 1 elements (box[0] of 128 bytes). */
typedef struct tgc_cuda_tmap_desc {
    tgc_dtype dtype;
    void *base;
    uint64_t dims[3];
    uint64_t strides[2];
    uint32_t box[2];
} tgc_cuda_tmap_desc;

/* Encodes d into out (128 bytes, 64-byte aligned: a CUtensorMap). The CUDA driver must be
 * loaded (tgc_cuda_load) and a context current on the calling thread (tgc_cuda_enter; without
 * one the driver answers CUDA_ERROR_INVALID_CONTEXT). TGC_ERR_INVALID_ARG when the driver refuses
 * the description (the caller then launches a kernel that does not need the map), with its message.
 */
tgc_status tgc_cuda_tmap_encode(const tgc_cuda_tmap_desc *d, void *out);

/* The maps a kernel launched with lately, so that a launch whose operands did not move (the
 * usual case: a variant's buffers come from its memory plan) copies its maps instead of
 * asking the driver again. Entries are replaced in turn; a description the driver refuses is
 * not kept. Init before use, destroy after; thread-safe (a mutex over the lookup). */
#define TGC_CUDA_TMAP_CACHE 8
typedef struct tgc_cuda_tmap_cache {
    pthread_mutex_t mu;
    unsigned next;                    /* the entry the next miss replaces */
    unsigned long long hits, encodes; /* counts, for tests and logs */
    struct {
        int used;
        tgc_cuda_tmap_desc d;
        _Alignas(64) unsigned char map[128];
    } e[TGC_CUDA_TMAP_CACHE];
} tgc_cuda_tmap_cache;

void tgc_cuda_tmap_cache_init(tgc_cuda_tmap_cache *c);
void tgc_cuda_tmap_cache_destroy(tgc_cuda_tmap_cache *c);

/* d's map into out (as tgc_cuda_tmap_encode), from c when an equal description was encoded
 * lately, else encoded and kept in c. */
tgc_status tgc_cuda_tmap_get(tgc_cuda_tmap_cache *c, const tgc_cuda_tmap_desc *d, void *out);

#endif
