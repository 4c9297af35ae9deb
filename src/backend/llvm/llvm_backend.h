/* The LLVM CPU backend (see llvm_backend.c) and its eager path (llvm_eager.c). Only built
 * with TGC_HAVE_LLVM. */
#ifndef TGC_BACKEND_LLVM_BACKEND_H
#define TGC_BACKEND_LLVM_BACKEND_H

#include "backend/backend.h"

const tgc_backend *tgc_backend_llvm(void);

#endif
