/* The backends of this build: the one list of them (registry.h's tgc_backend_builtins), and
 * the one file outside the backends' own folders that knows which ones the build has (the
 * TGC_HAVE_* of CMakeLists.txt). A backend the build lacks is listed too, by who it is and
 * why it is missing, so its kind, its device type and every message about them are the same
 * in every build. */
#include "backend/registry.h"
#include "support/error.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_backend.h"
#endif
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#ifndef TGC_HAVE_LLVM
static const tgc_backend *no_llvm(void)
{
    tgc_set_error(TGC_ERR_UNSUPPORTED, "this build has no LLVM backend (configured with "
                                       "TGC_WITH_LLVM=OFF); use TGC_BACKEND_AUTO or "
                                       "TGC_BACKEND_INTERP");
    return NULL;
}

static const tgc_backend_reg llvm_missing = {
    .name = "llvm",
    .kinds = {{TGC_BACKEND_LLVM, NULL}},
    .n_kinds = 1,
    .device = TGC_DEVICE_CPU,
    .priority = 2,
    .get = no_llvm,
};
#endif

#ifndef TGC_HAVE_CUDA
#define NO_CUDA                                                                                    \
    "this build has no CUDA backend (configured with TGC_WITH_CUDA=OFF or without the CUDA "       \
    "toolkit headers)"

/* The device type's names, and no hooks: every use of a CUDA device says NO_CUDA. */
static const tgc_device_ops cuda_missing_ops = {
    .name = "cuda", .label = "CUDA", .missing = NO_CUDA};

static const tgc_backend *no_cuda(void)
{
    tgc_set_error(TGC_ERR_DEVICE, "the CUDA backend is not available: " NO_CUDA);
    return NULL;
}

static const tgc_backend_reg cuda_missing = {
    .name = "cuda",
    .kinds = {{TGC_BACKEND_CUDA, NULL}},
    .n_kinds = 1,
    .device = TGC_DEVICE_CUDA,
    .device_ops = &cuda_missing_ops,
    .device_what = "the GPU",
    .device_ctor = "tgc_cuda(i)",
    .priority = 1,
    .get = no_cuda,
};
#endif

const tgc_backend_reg *const tgc_backend_builtins[] = {
    &tgc_interp_backend_reg,
#ifdef TGC_HAVE_LLVM
    &tgc_llvm_backend_reg,
#else
    &llvm_missing,
#endif
#ifdef TGC_HAVE_CUDA
    &tgc_cuda_backend_reg,
#else
    &cuda_missing,
#endif
    NULL,
};
