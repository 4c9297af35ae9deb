/* The CUDA backend (src/backend/cuda/cuda_backend.c): kernel IR rendered to CUDA C, compiled
 * by NVRTC for the device's architecture, loaded and launched through the driver API. */
#ifndef TGC_BACKEND_CUDA_BACKEND_H
#define TGC_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

/* The backend, or NULL with TGC_ERR_DEVICE set saying what is missing (libcuda, a GPU,
 * libnvrtc). Decided once per process. */
const tgc_backend *tgc_backend_cuda(void);
/* Who it is (registry.h): kind CUDA, TGC_DEVICE_CUDA with its runtime's hooks, cfg.cuda_stream. */
extern const tgc_backend_reg tgc_cuda_backend_reg;

#endif
