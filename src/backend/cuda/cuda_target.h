/* The CUDA backend's kernel-IR target (kir/schedule.h): what lowering assumes about the GPU
 * the renderer (cuda_render.h) writes kernels for. Immutable, shared by every thread. */
#ifndef TGC_BACKEND_CUDA_TARGET_H
#define TGC_BACKEND_CUDA_TARGET_H

#include "kir/schedule.h"

/* Threads per block of every LOOP kernel the renderer writes (tgc_cuda_launch.block). */
#define TGC_CUDA_BLOCK_THREADS 256

/* has_grid = 1 (outer axes are grid rows, inner axes block threads), block_threads 256,
 * lanes[dt] = elements of dt in 16 bytes (one 128-bit access; the renderer's vector width
 * for pointwise kernels is derived from the dtypes it touches, see cuda_render.h), no flat
 * split (the renderer runs flat domains as grid-stride loops), GEMM and CONV templates for
 * F32, F16 and BF16. */
const kir_target *tgc_cuda_kir_target(void);

#endif
