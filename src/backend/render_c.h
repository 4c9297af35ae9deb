/* Kernel IR -> C-family GPU source text: a base renderer and the dialect table that says how
 * one language (CUDA, HIP, Metal, ...) spells what the base writes. The base writes the
 * kernel shapes, the value DAG, the numerics and the prelude; a dialect only spells them
 * (qualifiers, indices, warp intrinsics, vector and half types, bit casts, math names) and
 * adds the prelude pieces that have no common spelling (f16 conversions). A new language is
 * a new table (backend/cuda/cuda_render.c holds CUDA's).
 *
 * Every function here is pure: the same dialect, kernel IR and slots give the same text, byte
 * for byte (no addresses, no clocks, no global state). Thread-safe; outputs are the caller's.
 *
 * ABI of a generated kernel, in CUDA's spelling: `struct F_b { void *p[NB]; };
 * struct F_s { long long v[NW]; }; extern "C" __global__ void F(F_b b, F_s s)`,
 * NB = max(1, k->n_bufs), NW = max(1, kir_args_words(slots)). b.p[i] is element 0 of kernel
 * buffer i; s.v[j] is size slot j (kir_args_slot), then per draw r the seed at
 * s.v[kir_args_rand_word(r)] and the base counter in the next word. Every kernel loops
 * grid-stride, so ANY grid size is correct; tgc_c_launch_dims gives the fast one. The block
 * size must be launch->block_threads (the dialect's): kernels carry it as their launch bound
 * and index their shared memory by it.
 *
 * Kernel shapes:
 *  - FLAT (no reductions, one phase): every element of the domain once, grid-stride over a
 *    flat index decomposed into the domain vars. When every access that walks the innermost
 *    var contiguously is aligned (checked at run time, one uniform branch) a thread handles
 *    `vec` consecutive elements per iteration with one 16-byte access per such operand;
 *    other operands are read per lane (broadcasts once per group).
 *  - ROWS (reductions, several phases, row stores): the outer vars are rows, grid-stride; a
 *    row is run by one warp (inner length <= TGC_C_WARP_ROW_MAX), one block, or (column
 *    reductions with many rows) one thread. Each phase sweeps the row with stride "threads
 *    per row", accumulates per thread, and combines with xor-shuffle butterflies, then across
 *    the block's warps through shared memory in a fixed order, so every thread of the row
 *    holds the result (deterministic). Row stores run on the row's first thread.
 *  - SPLIT (one-phase reductions, also emitted for ROWS kernels that qualify): F_part reduces
 *    chunks of rows into a scratch area the launcher passes as an extra buffer, F_fin
 *    combines each row's partials in chunk order and stores (tgc_c_split_dims).
 *  Both bodies are templates over the index type I (unsigned when the whole domain has fewer
 *  than 2^31 elements, checked at run time when sizes are symbolic; long long otherwise);
 *  addresses are always computed in 64 bits.
 *
 * Numerics (interp, src/backend/interp/k_pointwise.c, is the reference):
 *  - f32 math in f32 with the dialect's IEEE functions (CUDA: expf, logf, tanhf, erff, powf;
 *    no fast math); + - * / of an f32 and a scalar constant that is not an exact float, and
 *    clamp by such bounds, are done in double and rounded once (interp's exact result); f64
 *    in double; f16 / bf16 compute in f32 and round to their precision after every op (each
 *    op of interp rounds its result) and at the store.
 *  - integers as interp's int path: + - * neg abs in wrapping two's complement (i32 wraps at
 *    32 bits), pow through double, float -> int saturating with NaN -> 0, i64 -> float
 *    through double; bool results of arithmetic are (integer result != 0).
 *  - sums accumulate in double (floats) or i64 (ints and bool); max / min in the input's
 *    compute type with NaN winning; reductions combine in a fixed order (deterministic).
 *  - KV_RAND: Philox4x32-10 exactly as runtime/philox.c.
 *
 * Prelude names (every dialect's; all `TGC_DEV`, the dialect's device_fn):
 *   int8_t .. uint64_t               typedefs (skipped with #define TGC_NO_STDINT_TYPEDEFS)
 *   float tgc_h2f(F16) / F16 tgc_f2h(float)                f16 <-> float (RNE; the dialect's
 *                                                          piece, F16 its f16_type)
 *   float tgc_bf2f(BF16) / BF16 tgc_f2bf(float)            bf16 <-> float (RNE)
 *   float tgc_round_h(float) / tgc_round_bf(float)         round a float to f16 / bf16
 *   int tgc_f2i32(double) / long long tgc_f2i64(double)   saturating, NaN -> 0 (interp)
 *   float tgc_inf_f() / double tgc_inf_d() / tgc_nan_f() / tgc_nan_d()
 *   unsigned tgc_philox_bits(unsigned long long seed, unsigned long long counter)
 *   float tgc_philox_uniform_m(seed, counter, int m)   (bits >> (32 - m)) * 2^-m
 *   float tgc_philox_uniform(seed, counter) == tgc_philox_uniform24   m = 24
 *   float tgc_philox_normal(seed, counter)   Box-Muller in double, rounded to float once
 *   T tgc_relu(T), tgc_maximum(T, T), tgc_minimum(T, T) (NaN propagates), tgc_clamp(T, T, T),
 *     for T = float and double (composite ops have no helper: lowering expands their
 *     ops.def formulas into primitives)
 *   the dialect's vector type (vec_type; CUDA: tgc_vec<T, N> { T v[N]; } aligned to N *
 *     sizeof(T))
 *   template <typename T> T tgc_warp_sum(T) / tgc_warp_max(T) / tgc_warp_min(T)
 *     xor-shuffle butterflies over a full warp (every lane gets the result) */
#ifndef TGC_BACKEND_RENDER_C_H
#define TGC_BACKEND_RENDER_C_H

#include <stddef.h>
#include <stdint.h>

#include "kir/abi.h"
#include "kir/kir.h"
#include "support/strbuf.h"

/* Rows up to this many inner elements are reduced by one warp (block_threads / warp_size
 * rows per block); longer rows by a whole block. The kernel and tgc_c_launch_dims both
 * apply it. */
#define TGC_C_WARP_ROW_MAX 128
/* Reductions whose outer (kept) axis is the contiguous one ("column" reductions: a sum over
 * dim 0 of [N, C]) give each thread its own row when there are at least this many rows, so a
 * warp reads neighbouring columns at once. */
#define TGC_C_COLUMN_ROWS_MIN 2048

/* Split reductions (few long rows): rows below SPLIT_ROWS_MAX with at least SPLIT_LEN_MIN
 * elements are cut into chunks of about SPLIT_CHUNK elements, at most SPLIT_BLOCKS chunks in
 * all (tgc_c_split_chunks; the kernels compute the same). */
#define TGC_C_SPLIT_ROWS_MAX 64
#define TGC_C_SPLIT_LEN_MIN  32768
#define TGC_C_SPLIT_CHUNK    8192
#define TGC_C_SPLIT_BLOCKS   2048

/* A math function the dialect spells its own way (libm base name -> its f32 and f64 names,
 * e.g. a prelude function that matches interp where the native one does not). */
typedef struct tgc_c_math_fn {
    const char *name, *f32, *f64;
} tgc_c_math_fn;

/* How one C-family language spells what the base renders. Strings marked "template" hold
 * "%s" where their arguments go, in the order given ("%%" is a percent sign; no other
 * conversions). Strings marked "prefix" are empty or end with a space. A piece is prelude
 * text pasted as it is (NULL: none; for prelude_bf16, the base's own). Static data: a table
 * is read, never written, by every render at once. */
typedef struct tgc_c_dialect {
    const char *name; /* "CUDA": the prelude's banner and guard (TGC_<name>_PRELUDE) */
    const char *tag;  /* "cuda": messages start "tgc <tag>: " */

    /* qualifiers */
    const char *kernel;        /* a kernel entry up to its name: `extern "C" __global__ void` */
    const char *launch_bounds; /* template (block threads), after `kernel`; NULL: none */
    const char *device_fn;     /* a device helper function: "static __device__ __forceinline__" */
    const char *global;        /* prefix: pointers into device memory ("" in CUDA) */
    const char *restrict_;     /* prefix: a pointer no other pointer aliases ("__restrict__ ") */
    const char *shared;        /* prefix: an array shared by the block ("__shared__ ") */
    const char *barrier;       /* a block barrier statement, no ';': "__syncthreads()" */

    /* unsigned index expressions: the thread in its block, the block in the grid, the
     * grid's blocks (one dimension: x) */
    const char *thread_idx, *block_idx, *grid_dim;

    /* warps: the size (a power of two dividing block_threads), and the template (value,
     * lane mask) of a full-warp xor shuffle */
    int warp_size;
    const char *shfl_xor;

    /* launch geometry the kernels are written for: threads per block and the most resident
     * threads per multiprocessor (the grid's cap is sms * threads_per_sm / block_threads) */
    int block_threads, threads_per_sm;

    /* storage types of f16 and bf16 (compute types are float for both) */
    const char *f16_type, *bf16_type;

    /* templates (one argument) of bit casts: int -> float, unsigned -> float, float ->
     * unsigned, long long -> double; and of the high 32 bits of a 32 x 32-bit product (two) */
    const char *i32_as_f32, *u32_as_f32, *f32_as_u32, *i64_as_f64, *mulhi_u32;

    /* math names: templates (the libm base name: "exp", "sqrt", "pow", ...) of the f32 and
     * f64 functions, and exceptions (NULL-terminated by name, or NULL) */
    const char *math_f32, *math_f64;
    const tgc_c_math_fn *math_fns;

    /* vectors of N elements for 16-byte accesses: templates of the type (element type, N)
     * and of lane i of a vector variable (variable, i) */
    const char *vec_type, *vec_lane;

    /* prelude pieces, in prelude order: after the guard (includes), after the bit casts
     * (helpers that math_fns name), the f16 conversions (tgc_h2f / tgc_f2h over f16_type;
     * required), the bf16 conversions (tgc_bf2f / tgc_f2bf over bf16_type; NULL: the base's,
     * through the bit casts, for a 16-bit unsigned bf16_type), the vector type */
    const char *prelude_head, *prelude_math, *prelude_f16, *prelude_bf16, *prelude_vec;
} tgc_c_dialect;

typedef enum {
    TGC_C_SHAPE_FLAT, /* pointwise: one flat grid-stride loop over every element */
    TGC_C_SHAPE_ROWS  /* reductions / phases: rows over the grid, a row per thread, warp or
                       * block (rule above) */
} tgc_c_shape;

/* What the launcher needs, filled by tgc_c_render_loop. */
typedef struct tgc_c_launch {
    tgc_c_shape shape;
    int block_threads; /* the dialect's block_threads */
    int warp_size;     /* the dialect's warp_size */
    /* FLAT: elements per thread per iteration on the vector path (1: scalar only); the
     * kernel takes the vector path at run time only where sizes, strides and pointers
     * allow (uniform branch), else one element per iteration. */
    int vec;
    /* ROWS: 1 when the kernel may choose a thread per row (TGC_C_COLUMN_ROWS_MIN). */
    int column;
    /* ROWS: 1 when the program also holds the split pair F_part / F_fin (one-phase
     * reductions): see tgc_c_split_dims. */
    int split;
    unsigned smem_bytes; /* dynamic shared memory (0: the kernels use static arrays only) */
    /* Blocks per multiprocessor the grid is sized for (threads_per_sm / block_threads). */
    int blocks_per_sm;
} tgc_c_launch;

/* Appends the prelude of dialect d (the names above) to out. TGC_ERR_INVALID_ARG for a
 * dialect table the base cannot use (naming the field), TGC_ERR_OOM. */
tgc_status tgc_c_prelude(const tgc_c_dialect *d, tgc_strbuf *out);

/* Appends LOOP kernel k as the kernel entry `fname(fname_b b, fname_s s)` (plus its structs
 * and a templated body function fname_run) to out, and describes its launch. slots: the
 * kernel's ABI (kir_args_collect). TGC_ERR_COMPILE for a kernel IR construct the renderer
 * does not handle (an op, dtype or combination), naming the kernel and the value;
 * TGC_ERR_INVALID_ARG for a NULL argument, a template kernel or an unusable dialect;
 * TGC_ERR_OOM. Deterministic. */
tgc_status tgc_c_render_loop(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *k,
                             const kir_args *slots, const char *fname, tgc_c_launch *launch);

/* 1 when LOOP kernel k renders as a flat kernel (one phase, no reductions, phase stores
 * only: pointwise work), the kind a batch holds. */
int tgc_c_loop_is_flat(const kir_kernel *k);

/* Appends flat LOOP kernels ks[0..n) as one batch: each rendered as tgc_c_render_loop does
 * (launches[j] filled), as a device function `fname_mJ(fname_mJ_b, fname_mJ_s)`, and the
 * kernel entry `fname(fname_m0_b b0, fname_m0_s s0, ..., fname_e e)` with
 * `struct fname_e { unsigned e[n]; }`: blocks [e[j - 1], e[j]) of the grid (e[-1] = 0) run
 * member j as if they were its own launch of e[j] - e[j - 1] blocks (tgc_c_launch_dims's,
 * or fewer: the members loop over their domain). The launcher fills e from each member's
 * grid; a member given no blocks (e[j] = e[j - 1]) does not run. TGC_ERR_INVALID_ARG for a
 * kernel that is not flat; otherwise tgc_c_render_loop's errors. */
tgc_status tgc_c_render_batch(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *const *ks,
                              const kir_args *const *slots, int n, const char *fname,
                              tgc_c_launch *launches);

/* The launch of a kernel rendered with launch l for this call: extents[d] is the value of
 * k->extent[d], sms the device's multiprocessor count. grid[1] = grid[2] = block[1] =
 * block[2] = 1. */
void tgc_c_launch_dims(const tgc_c_launch *l, const kir_kernel *k, const int64_t *extents, int sms,
                       unsigned grid[3], unsigned block[3], unsigned *smem);

/* Chunks per row of a split reduction over rows x len (1: no split). */
int64_t tgc_c_split_chunks(int64_t rows, int64_t len);

/* Split reductions. When l->split and this call's extents make a split worthwhile, returns 1
 * and fills the grids of the two kernels and the scratch they need; else returns 0 and the
 * launcher runs F as usual. The pair is `F_part(F_pb b, F_s s)` and `F_fin(F_pb b, F_s s)`
 * with `struct F_pb { void *p[NB + 1]; }`: the kernel's NB buffers, then a device scratch
 * area of *scratch_bytes bytes (8 per row, chunk and reduction; no initialization needed;
 * private to this launch pair until F_fin ends). The launcher runs F_part on grid_part, then
 * F_fin on grid_fin, in order, blocks of l->block_threads threads, in place of F (same sizes
 * array). F_part computes each chunk's partial (and the kernel's phase stores), F_fin
 * combines a row's partials in chunk order (deterministic) and does the row stores. */
int tgc_c_split_dims(const tgc_c_launch *l, const kir_kernel *k, const int64_t *extents, int sms,
                     unsigned grid_part[3], unsigned grid_fin[3], size_t *scratch_bytes);

/* Expressions the value renderer reads values through (template epilogues). */
typedef struct tgc_c_val_env {
    const char *acc[4];            /* C expression of KV_ACC i (float for the templates) */
    const char *var[KIR_MAX_DIMS]; /* expression of domain var d (GEMM: 0 batch, 1 m, 2 n);
                                    * integers, any width (converted to long long) */
    const char *bufs;              /* the buffers' void *[]: e.g. "b.p" */
    const char *sizes;             /* the size words' long long[]: e.g. "s.v" */
    const char *prefix;            /* names of the emitted variables (NULL: "tv"): the
                                    * caller makes them unique in its scope */
} tgc_c_val_env;

/* Emits the statements computing value `result` of k (and every input of it whose
 * emitted[] flag is 0; emitted has k->n_vals entries, zeroed by the caller, and is updated)
 * into out, and writes the name of the variable holding it into name (of name_len bytes).
 * The variable has the value's compute type (tgc_c_compute_type; f16 / bf16 already
 * rounded). Loads index env->bufs with env->var; symbolic sizes come from env->sizes (slots
 * as kir_args_collect gave them). TGC_ERR_COMPILE for an unsupported value,
 * TGC_ERR_INVALID_ARG for bad ids or an unusable dialect. */
tgc_status tgc_c_render_vals(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *k,
                             const kir_args *slots, const tgc_c_val_env *env, int32_t result,
                             char *name, size_t name_len, uint8_t *emitted);

/* The type of a value of dtype dt as the renderer computes it ("float" for f32 / f16 / bf16,
 * "double", "int", "long long", "bool"), and as it is stored in dialect d ("float",
 * "double", d->f16_type, d->bf16_type, "int", "long long", "uint8_t" for bool). NULL for an
 * unknown dtype. */
const char *tgc_c_compute_type(tgc_dtype dt);
const char *tgc_c_storage_type(const tgc_c_dialect *d, tgc_dtype dt);

/* One program: d's prelude followed by LOOP kernels ks[0..n) named names[i] (launches[i]
 * filled per kernel; may be NULL). Returns the malloc'd text, or NULL with the error set. */
char *tgc_c_render_program(const tgc_c_dialect *d, const kir_kernel *const *ks,
                           const kir_args *const *slots, const char *const *names, int n,
                           tgc_c_launch *launches);

#endif
