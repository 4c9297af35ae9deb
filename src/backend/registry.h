/* The backend registry: which backend a config gets in this build, and which compiled
 * backend serves a device for eager ops. The only place (with the backends themselves)
 * that knows which backends a build has. */
#ifndef TGC_BACKEND_REGISTRY_H
#define TGC_BACKEND_REGISTRY_H

#include "backend/backend.h"

/* The backend a config asks for in this build: AUTO is LLVM when built with it, else interp.
 * NULL with TGC_ERR_UNSUPPORTED set when the kind is not available. */
const tgc_backend *tgc_backend_for(const tgc_config *cfg);
/* What gave a call its device: its inputs, its module's tensors (no tensor inputs), or
 * cfg.device (neither). */
typedef enum tgc_device_origin {
    TGC_DEVICE_OF_INPUTS,
    TGC_DEVICE_OF_MODULE,
    TGC_DEVICE_OF_CONFIG
} tgc_device_origin;
/* The backend a variant of function fn_name with config cfg gets when it runs on dev: the
 * host's (tgc_backend_for) for the CPU, the CUDA backend for a GPU under AUTO and CUDA. NULL
 * with TGC_ERR_DEVICE set (naming the device, where it came from, the backend and what to
 * do) when the config's backend cannot run there. */
const tgc_backend *tgc_backend_for_call(const tgc_config *cfg, tgc_device dev,
                                        tgc_device_origin origin, const char *fn_name);
/* The compiled backend whose kernels run eager ops on tensors of device type dev; NULL when
 * there is none in this build or on this machine (eager ops then run on interp, on CPU).
 * The error state is left as it was. */
const tgc_backend *tgc_backend_for_device(tgc_device_type dev);

#endif
