/* The backend registry (see registry.h): the list of backends this build has. */
#include "backend/registry.h"

#include <pthread.h>
#include <stdio.h>

#include "support/error.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_jit.h"
#endif

const tgc_backend *tgc_backend_for(const tgc_config *cfg)
{
    switch (cfg->backend) {
    case TGC_BACKEND_INTERP:
    case TGC_BACKEND_EAGER: return tgc_backend_interp();
    case TGC_BACKEND_CUDA:
        tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc_compile: the CUDA backend is not available in "
                                           "this build; use TGC_BACKEND_AUTO or TGC_BACKEND_LLVM");
        return NULL;
    case TGC_BACKEND_LLVM:
    case TGC_BACKEND_AUTO:
#ifdef TGC_HAVE_LLVM
        if (tgc_llvm_host())
            return tgc_backend_llvm();
        if (cfg->backend == TGC_BACKEND_AUTO) {
            tgc_clear_error();
            return tgc_backend_interp();
        }
        return NULL; /* tgc_llvm_host set the reason */
#else
        if (cfg->backend == TGC_BACKEND_AUTO)
            return tgc_backend_interp();
        tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc_compile: this build has no LLVM backend "
                                           "(configured with TGC_WITH_LLVM=OFF); use "
                                           "TGC_BACKEND_AUTO or TGC_BACKEND_INTERP");
        return NULL;
#endif
    }
    tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_compile: unknown backend %d", (int)cfg->backend);
    return NULL;
}

#ifdef TGC_HAVE_LLVM
/* Whether LLVM can target this machine is decided once (tgc_llvm_host), so the eager path
 * asks nothing per op. */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static const tgc_backend *cpu_backend;

static void find_cpu_backend(void)
{
    tgc_status saved = tgc_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    cpu_backend = tgc_llvm_host() ? tgc_backend_llvm() : NULL;
    /* without an LLVM target eager ops run on interp; the caller's error state stays */
    if (saved != TGC_OK)
        tgc_set_error(saved, "%s", msg);
    else
        tgc_clear_error();
}
#endif

const tgc_backend *tgc_backend_for_device(tgc_device_type dev)
{
    switch (dev) {
    case TGC_DEVICE_CPU:
#ifdef TGC_HAVE_LLVM
        pthread_once(&cpu_once, find_cpu_backend);
        return cpu_backend;
#else
        return NULL;
#endif
    case TGC_DEVICE_CUDA: return NULL;
    }
    return NULL;
}
