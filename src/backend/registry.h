/* The backend registry: the backends of this process, as their registration records
 * (backend.h's tgc_backend_reg) say who they are; which backend a config gets, which one
 * serves a device for a call or for eager ops, and the names of backends and device types in
 * messages. It knows no backend by name: the build's own are registered before main (the one
 * list, src/backend/backends.c), others at run time. */
#ifndef TGC_BACKEND_REGISTRY_H
#define TGC_BACKEND_REGISTRY_H

#include "backend/backend.h"

/* Adds r (which must stay valid for the life of the process) and registers its device
 * type's ops (r->device_ops, runtime/alloc.h). Registering the same record again is a no-op.
 * TGC_ERR_INVALID_ARG (error set, nothing registered) for a record without a name or get, a
 * name or a kind another record has, a kind outside tgc_backend_kind, or a full registry
 * (16). Thread-safe: lookups may run meanwhile. */
tgc_status tgc_backend_register(const tgc_backend_reg *r);

/* The build's own backends, NULL-terminated: the one list of them (backends.c). */
extern const tgc_backend_reg *const tgc_backend_builtins[];

/* The backend a config asks for: the one of the registration that serves cfg->backend
 * (whatever its device type), or for AUTO the available host backend of highest priority
 * (LLVM when built with it, else interp). NULL with the error set (the registration's status and
 * reason, as its get gives them; TGC_ERR_INVALID_ARG "unknown backend" for a kind nothing serves)
 * when it is not available. */
const tgc_backend *tgc_backend_for(const tgc_config *cfg);
/* What gave a call its device: its inputs, its module's tensors (no tensor inputs), or
 * cfg.device (neither). */
typedef enum tgc_device_origin {
    TGC_DEVICE_OF_INPUTS,
    TGC_DEVICE_OF_MODULE,
    TGC_DEVICE_OF_CONFIG
} tgc_device_origin;
/* The backend a variant of function fn_name with config cfg gets when it runs on dev: the
 * host's (tgc_backend_for) for the CPU; for another device type the backend of that type
 * the kind names, or under AUTO the available one of highest priority. NULL with
 * TGC_ERR_DEVICE set (naming the device, where it came from, the backend and what to do) when
 * the config's backend cannot run there. */
const tgc_backend *tgc_backend_for_call(const tgc_config *cfg, tgc_device dev,
                                        tgc_device_origin origin, const char *fn_name);
/* The compiled backend whose kernels run eager ops on tensors of device type dev (the
 * available one of highest priority); NULL when there is none in this build or on this
 * machine (eager ops then run on interp, on CPU). The error state is left as it was. */
const tgc_backend *tgc_backend_for_device(tgc_device_type dev);

/* The name kind has in messages and TGC_BACKEND ("auto", "llvm", "eager", ...); "?" for a
 * kind nothing serves. */
const char *tgc_backend_kind_name(tgc_backend_kind kind);
/* 1 when some registration owns device type dev (the host always: cfg.device may name it),
 * whether or not its backend is available. */
int tgc_backend_device_known(tgc_device_type dev);
/* The ways to name a device users are offered in messages, "tgc_cpu() or tgc_cuda(i)", into
 * buf; returns buf. */
char *tgc_backend_device_ctors(char *buf, size_t n);

#endif
