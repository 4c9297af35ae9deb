/* The backend registry: which backend a config gets in this build, and which compiled
 * backend serves a device for eager ops. The only place (with the backends themselves)
 * that knows which backends a build has. */
#ifndef TGC_BACKEND_REGISTRY_H
#define TGC_BACKEND_REGISTRY_H

#include "backend/backend.h"

/* The backend a config asks for in this build: AUTO is LLVM when built with it, else interp.
 * NULL with TGC_ERR_UNSUPPORTED set when the kind is not available. */
const tgc_backend *tgc_backend_for(const tgc_config *cfg);
/* The backend a variant of a function with config cfg gets when its inputs live on dev: the
 * host's (tgc_backend_for) for CPU tensors, the CUDA backend for GPU tensors under AUTO and
 * CUDA. NULL with TGC_ERR_DEVICE set (naming the device, the backend and what to do) when
 * the config's backend cannot run there. */
const tgc_backend *tgc_backend_for_call(const tgc_config *cfg, tgc_device dev);
/* The compiled backend whose kernels run eager ops on tensors of device type dev; NULL when
 * there is none in this build or on this machine (eager ops then run on interp, on CPU).
 * The error state is left as it was. */
const tgc_backend *tgc_backend_for_device(tgc_device_type dev);

#endif
