/* The LLVM CPU backend (see llvm_backend.c): a compiled backend of backend.h. Only built
 * with the LLVM backend (src/backend/backends.c lists it). */
#ifndef TGC_BACKEND_LLVM_BACKEND_H
#define TGC_BACKEND_LLVM_BACKEND_H

#include "backend/backend.h"

const tgc_backend *tgc_backend_llvm(void);
/* Who it is (registry.h): kind LLVM, the host, available where LLVM targets the host. */
extern const tgc_backend_reg tgc_llvm_backend_reg;

#endif
