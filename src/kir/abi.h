/* The kernel ABI, the same for every backend: a compiled kernel is handed bufs[i], element 0
 * of kernel buffer i (kir_kernel.bufs order), and sizes[j], the value of size slot j. The
 * slots are the symbolic dims the kernel reads (loop extents, access strides and offsets,
 * guard bounds, KV_SIZE values), each once, in first-use order; the executor evaluates them
 * from the call's symbol values, so one compiled kernel serves every size of a dynamic
 * variant. Constants are never slots: the code has them inline.
 *
 * After the size slots come two words per random draw r of the kernel (kir_kernel.rands, in
 * graph node order): sizes[kir_args_rand_word(a, r)] is the draw's seed (the bits of the
 * uint64) and the next word its base counter. The executor fills them on every call with
 * base = tgc_rng_draw(numel, &seed), draw by draw in the graph's node order (interp's order,
 * so the same counters and the same bits), before the kernel runs. */
#ifndef TGC_KIR_ABI_H
#define TGC_KIR_ABI_H

#include "kir/kir.h"

typedef struct kir_args {
    tgc_sdim *dims;
    int n, cap;
    int n_rands; /* the kernel's draws (two words each after the slots) */
} kir_args;

/* Appends the slots of k (a LOOP kernel, or a template's epilogue) to out. TGC_ERR_OOM. */
tgc_status kir_args_collect(const kir_kernel *k, kir_args *out);
/* The slot of d; -1 when d is a constant or not a slot. */
int kir_args_slot(const kir_args *a, tgc_sdim d);
void kir_args_free(kir_args *a);
/* The word of sizes[] holding draw r's seed (its base counter is the next word). */
int kir_args_rand_word(const kir_args *a, int r);
/* Words a kernel's sizes[] holds: the slots, then two per draw. */
int kir_args_words(const kir_args *a);

#endif
