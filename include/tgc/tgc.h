/* libtgc — a JIT tensor-graph compiler for C programs. Umbrella header. */
#ifndef TGC_TGC_H
#define TGC_TGC_H

#include "autograd.h"
#include "compile.h"
#include "config.h"
#include "cuda.h"
#include "dist.h"
#include "module.h"
#include "ops.h"
#include "safetensors.h"
#include "tensor.h"

#define TGC_VERSION_MAJOR 0
#define TGC_VERSION_MINOR 2
#define TGC_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define TGC_VERSION_NUMBER (TGC_VERSION_MAJOR * 10000 + TGC_VERSION_MINOR * 100 + TGC_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif
/* The version of the library the program runs against (the macros above are the version of
 * the headers it was compiled with): "major.minor.patch", a static string; and the same as
 * major * 10000 + minor * 100 + patch. A program built against headers of another major
 * version than tgc_version_number() / 10000 must not use the library. Thread-safe. */
TGC_API const char *tgc_version(void);
TGC_API int tgc_version_number(void);
#ifdef __cplusplus
}
#endif

#endif
