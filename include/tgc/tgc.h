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
#include "tensor.h"

#define TGC_VERSION_MAJOR 0
#define TGC_VERSION_MINOR 2
#define TGC_VERSION_PATCH 0

#endif
