/* The backend registry (see registry.h): the list of backends this build has. */
#include "backend/registry.h"

#include <pthread.h>
#include <stdio.h>

#include "runtime/alloc.h"
#include "support/error.h"
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
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
#ifdef TGC_HAVE_CUDA
        return tgc_backend_cuda(); /* NULL with TGC_ERR_DEVICE: what is missing */
#else
        tgc_set_error(TGC_ERR_DEVICE, "tgc_compile: the CUDA backend is not available: this "
                                      "build has no CUDA backend (configured with "
                                      "TGC_WITH_CUDA=OFF or without the CUDA toolkit headers)");
        return NULL;
#endif
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
    case TGC_DEVICE_CUDA:
#ifdef TGC_HAVE_CUDA
    {
        tgc_status saved = tgc_last_status();
        char msg[256];
        snprintf(msg, sizeof msg, "%s", tgc_last_error());
        const tgc_backend *b = tgc_backend_cuda();
        if (saved != TGC_OK)
            tgc_set_error(saved, "%s", msg);
        else
            tgc_clear_error();
        return b;
    }
#else
        return NULL;
#endif
    }
    return NULL;
}

/* "the inputs are on cuda:0", "'f' has no tensor inputs and its module is on cuda:0", ... */
static void describe_device(tgc_device dev, tgc_device_origin origin, const char *fn_name,
                            char *buf, size_t n)
{
    char d[48];
    tgc_format_device(dev, d, sizeof d);
    if (origin == TGC_DEVICE_OF_INPUTS)
        snprintf(buf, n, "the inputs are on %s", d);
    else if (origin == TGC_DEVICE_OF_MODULE)
        snprintf(buf, n, "'%s' has no tensor inputs and its module is on %s", fn_name, d);
    else
        snprintf(buf, n,
                 "'%s' has no tensor inputs or module tensors, so it runs on cfg.device (%s)",
                 fn_name, d);
}

const tgc_backend *tgc_backend_for_call(const tgc_config *cfg, tgc_device dev,
                                        tgc_device_origin origin, const char *fn_name)
{
    char where[192];
    describe_device(dev, origin, fn_name, where, sizeof where);
    static const char *const moves[] = {"move them (and the module) with tgc_to / tgc_module_to",
                                        "move the module with tgc_module_to",
                                        "set cfg.device to the GPU (tgc_cuda(i))"};
    if (dev.type == TGC_DEVICE_CPU) {
        if (cfg->backend == TGC_BACKEND_CUDA) {
            tgc_set_error(TGC_ERR_DEVICE,
                          "tgc_call: cfg.backend is CUDA but %s; %s, or use TGC_BACKEND_AUTO",
                          where, moves[origin]);
            return NULL;
        }
        return tgc_backend_for(cfg);
    }
    if (dev.type == TGC_DEVICE_CUDA &&
        (cfg->backend == TGC_BACKEND_AUTO || cfg->backend == TGC_BACKEND_CUDA)) {
#ifdef TGC_HAVE_CUDA
        const tgc_backend *b = tgc_backend_cuda();
        if (!b) {
            char why[256];
            snprintf(why, sizeof why, "%s", tgc_last_error());
            tgc_set_error(TGC_ERR_DEVICE, "tgc_call: %s, but %s", where, why);
        }
        return b;
#else
        tgc_set_error(TGC_ERR_DEVICE, "tgc_call: %s, but this build has no CUDA backend", where);
        return NULL;
#endif
    }
    static const char *const names[] = {"auto", "llvm", "cuda", "eager", "interp"};
    tgc_set_error(TGC_ERR_DEVICE,
                  "tgc_call: %s, but cfg.backend %s runs on the host; use TGC_BACKEND_AUTO or "
                  "TGC_BACKEND_CUDA, or %s",
                  where, (unsigned)cfg->backend < 5 ? names[cfg->backend] : "?",
                  origin == TGC_DEVICE_OF_INPUTS   ? "move the inputs with tgc_to"
                  : origin == TGC_DEVICE_OF_MODULE ? "move the module with tgc_module_to"
                                                   : "leave cfg.device at tgc_cpu()");
    return NULL;
}
