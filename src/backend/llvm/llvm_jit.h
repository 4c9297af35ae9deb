/* The LLVM JIT underneath the LLVM backend: one ORC LLJIT per process, the host target, and
 * "units" — one LLVM module each, built with the C API builder, verified, optimized with
 * the default<O3> pipeline, compiled to an object file and added to the JIT under its own
 * resource tracker, so freeing a unit's code removes exactly its functions.
 *
 * Target: the host CPU's name and features (LLVMGetHostCPUName/Features), so the same build
 * emits AVX-512 code on an AVX-512 machine and AVX2 code on an AVX2-only one. The
 * environment can override both for testing (TGC_LLVM_CPU=haswell, TGC_LLVM_FEATURES=...).
 *
 * The object cache: a unit's object file is keyed by its module's text (taken before
 * optimization, with the functions under their unit names) plus LLVM's version, the target
 * triple, CPU, features and the optimization and code generation settings. An object is made
 * once however many threads finish equal units at the same time, is added to the JIT once and
 * shared by every unit of that key while one of them lives (backend/code_cache.h), and, when
 * the unit names a directory (cache_dir: cfg.cache_dir, TGC_CACHE_DIR), is written there and
 * read back by a later process, which then skips optimization and code generation. The
 * functions' symbols carry the hash of the key ("<base>_h<16 hex digits>"), so they are the
 * same in every process and never collide between different units.
 *
 * Errors (verifier failures, LLVM diagnostics, JIT errors) become TGC_ERR_COMPILE with
 * LLVM's message. Every LLVM object is disposed: tgc_llvm_unit_finish disposes the module
 * and context once its object file exists (or on failure), tgc_llvm_unit_abort disposes an
 * unfinished unit.
 *
 * Thread safety: units may be built and finished on several threads at once, and they
 * compile in parallel: each has its own LLVMContext, module and, for optimization and code
 * generation, TargetMachine. Only the steps that touch the shared JIT (adding the object,
 * lookups, which link it, and freeing) are serialized by one lock; they are short. A unit
 * itself is used by one thread at a time. */
#include "backend/code_cache.h"
#ifndef TGC_BACKEND_LLVM_JIT_H
#define TGC_BACKEND_LLVM_JIT_H

#include <llvm-c/Core.h>

#include "tgc/tensor.h"

typedef struct tgc_llvm_target {
    char cpu[64];
    char features[4096];
    int vec_bits; /* widest profitable vector register: 512 (AVX-512), 256 (AVX2) or 128 */
    int has_fma;
} tgc_llvm_target;

/* The host target (initializes LLVM's native target once). NULL when LLVM cannot target
 * this machine (error set: TGC_ERR_COMPILE). */
const tgc_llvm_target *tgc_llvm_host(void);

typedef struct tgc_llvm_unit {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const tgc_llvm_target *target;
    /* the object cache's directory (NULL, the default: memory only); the caller's, read by
     * tgc_llvm_unit_finish */
    const char *cache_dir;
    /* common types of ctx */
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_bf16, t_f32, t_f64, t_ptr;
} tgc_llvm_unit;

/* Starts a unit: a fresh context and a module with the host's triple and data layout. */
tgc_status tgc_llvm_unit_begin(tgc_llvm_unit *u, const char *name);
/* Disposes an unfinished unit (safe on a zeroed or already-consumed unit). */
void tgc_llvm_unit_abort(tgc_llvm_unit *u);

/* Writes the unit name of function `base` into buf ("<base>.tgcu"; tgc_llvm_unit_finish gives
 * it its final symbol, which tgc_llvm_code_lookup finds by base). */
void tgc_llvm_unit_name(const tgc_llvm_unit *u, const char *base, char *buf, size_t n);

/* Adds a function with external linkage and the target's attributes (target-cpu,
 * target-features, vector-width hints, nounwind). */
LLVMValueRef tgc_llvm_add_function(tgc_llvm_unit *u, const char *name, LLVMTypeRef fn_type);

/* Declares (once) an LLVM intrinsic overloaded on the given types. */
LLVMValueRef tgc_llvm_intrinsic(tgc_llvm_unit *u, const char *name, LLVMTypeRef *types, int n_types,
                                LLVMTypeRef *fn_type);

typedef struct tgc_llvm_code tgc_llvm_code;

/* Verifies the module (LLVMVerifyModule), then takes its object from the object cache, which
 * makes it when missing (from u->cache_dir, else by optimizing with default<O3> and generating
 * code) and adds it to the JIT. When ir_before / ir_after are non-NULL they receive the module's
 * text before and after optimization (caller frees with free; asking for ir_after optimizes
 * the module even when the object is cached). The unit is consumed on success and on
 * failure. */
tgc_status tgc_llvm_unit_finish(tgc_llvm_unit *u, tgc_llvm_code **out, char **ir_before,
                                char **ir_after);
/* Address of a function of the unit by its base name (as given to tgc_llvm_unit_name);
 * NULL with TGC_ERR_COMPILE set when absent. */
void *tgc_llvm_code_lookup(tgc_llvm_code *c, const char *base);
/* Ends this unit's use of its code: the last unit of a key removes it from the JIT. NULL is
 * fine. */
void tgc_llvm_code_free(tgc_llvm_code *c);

/* What the object cache did since the process started: compiled counts optimizations and code
 * generations, disk_hits objects read from a cache directory instead. */
void tgc_llvm_object_cache_stats(tgc_code_cache_stats *s);

/* Verifies a module without consuming it: TGC_OK or TGC_ERR_COMPILE with the verifier's
 * message. Used by tests on every kernel. */
tgc_status tgc_llvm_verify(LLVMModuleRef m);

#endif
