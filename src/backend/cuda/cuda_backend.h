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

/* The persistent cubin cache of cfg.cache_dir (one file per program text and architecture,
 * see cuda_backend.c), for the backend's other programs (cuda_conv_grad.c): load gives 1 and
 * a malloc'd image when dir holds text's cubin for sm, 0 otherwise; store is best effort,
 * creating a missing dir (with parents, 0700; one it cannot make is a warning, once).
 * Thread- and process-safe (files written under a temporary name, then renamed). */
int tgc_cuda_disk_load(const char *dir, int sm, const char *text, char **cubin, size_t *size);
void tgc_cuda_disk_store(const char *dir, int sm, const char *text, const char *cubin, size_t size);

#endif
