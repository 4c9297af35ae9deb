/* Guards: what a variant's trace depended on, checked on every call.
 *
 * The check is a flat compare of precomputed fields (no allocation, no hashing of
 * inputs); the module is one 64-bit signature compare because modules cache it. */
#ifndef TGC_JIT_GUARD_H
#define TGC_JIT_GUARD_H

#include "frontend/trace.h"
#include "support/strbuf.h"

#define TGC_GUARD_MAX_SYMS 256

typedef struct tgc_input_guard {
    tgc_dtype dtype;
    tgc_device device;
    int ndim;
    int contiguous;
    int64_t size[TGC_MAX_DIMS];
    int16_t sym[TGC_MAX_DIMS]; /* -1: static size; else the symbol bound to this dim */
} tgc_input_guard;

/* A captured tensor is bound at call time, so a variant depends on its identity (the
 * variant keeps the object, whose dtype, shape, strides and device never change) and on its
 * liveness; on its version only when the trace read its values (values_read). */
typedef struct tgc_captured_guard {
    tgc_tensor *t; /* referenced */
    uint64_t version;
    int is_const;    /* created during the trace: kept, not guarded */
    int values_read; /* tgc_item_* read it while tracing: guarded on its version */
} tgc_captured_guard;

/* What a guard miss was about: picks the advice of the cache-limit message. */
typedef enum tgc_miss_kind {
    TGC_MISS_FIRST_CALL,
    TGC_MISS_INPUT_COUNT,
    TGC_MISS_SIZE,      /* a static size, a 0/1 specialization or a shape relation */
    TGC_MISS_SIZE_READ, /* a dim the model read with tgc_size/tgc_shape/tgc_numel changed */
    TGC_MISS_LAYOUT,    /* dtype, rank, device or contiguity of an input */
    TGC_MISS_TRAINING,
    TGC_MISS_ATTR, /* a module attribute's value (tgc_module_set_*) */
    TGC_MISS_STRUCTURE,
    TGC_MISS_IDENTITY, /* cfg.guard_module_identity */
    TGC_MISS_GRAD_MODE,
    TGC_MISS_CAPTURED, /* a captured tensor freed, or written after the trace read it */
    TGC_MISS_VALUE,    /* an input value read with tgc_item_* */
    TGC_MISS_NONE
} tgc_miss_kind;

typedef struct tgc_guards {
    int n_in;
    tgc_input_guard *in;
    int has_module;
    uint64_t module_sig;
    const void *module_ptr; /* with guard_module_identity */
    int module_identity;
    char *module_desc; /* tgc_module_describe at trace time, to explain a mismatch */
    int grad_enabled;
    int n_captured;
    tgc_captured_guard *captured;
    int n_values;
    tgc_value_guard *values;
    tgc_size_read *size_reads; /* the trace's specializing size reads (owned) */
    int n_size_reads;
    const tgc_symtab *syms; /* owned by the variant's graph: symbols and assumptions */
    int n_syms;
} tgc_guards;

/* Builds guards from a finished trace; takes over the trace's captured references. */
tgc_status tgc_guards_build(tgc_guards *g, tgc_trace *tr, tgc_module *self, tgc_tensor *const *in,
                            int n_in, int module_identity);
void tgc_guards_free(tgc_guards *g);
/* 1 when every guard holds; fills symvals (n_syms entries) on success. */
int tgc_guards_check(const tgc_guards *g, tgc_module *self, tgc_tensor *const *in, int n_in,
                     int64_t *symvals);
/* The first failing guard as a sentence ("input 0 size mismatch at dim 1: expected 128,
 * got 160"), and its kind. Computed on a miss only. */
tgc_miss_kind tgc_guards_explain(const tgc_guards *g, tgc_module *self, tgc_tensor *const *in,
                                 int n_in, char *buf, size_t n);
/* Appends a readable list of the guards to sb (for tgc_fn_explain). */
void tgc_guards_describe(const tgc_guards *g, tgc_strbuf *sb);

#endif
