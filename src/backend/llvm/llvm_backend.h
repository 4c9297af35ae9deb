/* The LLVM CPU backend (see llvm_backend.c): a compiled backend of backend.h. Only built
 * with TGC_HAVE_LLVM. */
#ifndef TGC_BACKEND_LLVM_BACKEND_H
#define TGC_BACKEND_LLVM_BACKEND_H

#include "backend/backend.h"

const tgc_backend *tgc_backend_llvm(void);

#endif
