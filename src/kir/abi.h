/* The kernel ABI, the same for every backend: a compiled kernel is handed bufs[i], element 0
 * of kernel buffer i (kir_kernel.bufs order), and sizes[j], the value of size slot j. The
 * slots are the symbolic dims the kernel reads (loop extents, access strides and offsets,
 * guard bounds, KV_SIZE values), each once, in first-use order; the executor evaluates them
 * from the call's symbol values, so one compiled kernel serves every size of a dynamic
 * variant. Constants are never slots: the code has them inline. */
#ifndef TGC_KIR_ABI_H
#define TGC_KIR_ABI_H

#include "kir/kir.h"

typedef struct kir_args {
    tgc_sdim *dims;
    int n, cap;
} kir_args;

/* Appends the slots of k (a LOOP kernel, or a template's epilogue) to out. TGC_ERR_OOM. */
tgc_status kir_args_collect(const kir_kernel *k, kir_args *out);
/* The slot of d; -1 when d is a constant or not a slot. */
int kir_args_slot(const kir_args *a, tgc_sdim d);
void kir_args_free(kir_args *a);

#endif
