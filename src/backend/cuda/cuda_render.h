/* Kernel IR -> CUDA C text: the prelude every program starts with, LOOP kernels, the value
 * DAG renderer template epilogues use, launch geometry, whole programs.
 *
 * Every function here is pure: the same kernel IR and slots give the same text, byte for
 * byte (no addresses, no clocks, no global state). Thread-safe; outputs are the caller's.
 *
 * ABI of a generated kernel (COMMON.md): `struct F_b { void *p[NB]; }; struct F_s { long
 * long v[NW]; }; extern "C" __global__ void F(F_b b, F_s s)`, NB = max(1, k->n_bufs),
 * NW = max(1, kir_args_words(slots)). b.p[i] is element 0 of kernel buffer i; s.v[j] is
 * size slot j (kir_args_slot), then per draw r the seed at s.v[kir_args_rand_word(r)] and
 * the base counter in the next word. Every kernel loops grid-stride, so ANY grid size is
 * correct; tgc_cuda_launch_dims gives the fast one. The block size must be
 * launch->block_threads (256): kernels are compiled with __launch_bounds__(256) and index
 * their shared memory by it.
 *
 * Numerics (interp, src/backend/interp/k_pointwise.c, is the reference):
 *  - f32 math in f32 with the IEEE CUDA functions (expf, logf, tanhf, erff, powf; no fast
 *    math); + - * / of an f32 and a scalar constant that is not an exact float, and clamp
 *    by such bounds, are done in double and rounded once (interp's exact result); f64 in
 *    double; f16 / bf16 compute in f32 and round to their precision after every op (each op
 *    of interp rounds its result) and at the store.
 *  - integers as interp's int path: + - * neg abs in wrapping two's complement (i32 wraps
 *    at 32 bits), pow through double, float -> int saturating with NaN -> 0, i64 -> float
 *    through double; bool results of arithmetic are (integer result != 0).
 *  - sums accumulate in double (floats) or i64 (ints and bool); max / min in the input's
 *    compute type with NaN winning; reductions combine in a fixed order (deterministic).
 *  - KV_RAND: Philox4x32-10 exactly as runtime/philox.c.
 *
 * Prelude names (usable by every helper's programs; all __device__ __forceinline__):
 *   int8_t .. uint64_t               typedefs (skipped with #define TGC_NO_STDINT_TYPEDEFS)
 *   float tgc_h2f(uint16_t) / uint16_t tgc_f2h(float)      f16 bits <-> float (RNE)
 *   float tgc_bf2f(uint16_t) / uint16_t tgc_f2bf(float)    bf16 bits <-> float (RNE)
 *   float tgc_round_h(float) / tgc_round_bf(float)         round a float to f16 / bf16
 *   int tgc_f2i32(double) / long long tgc_f2i64(double)   saturating, NaN -> 0 (interp)
 *   float tgc_inf_f() / double tgc_inf_d() / tgc_nan_f() / tgc_nan_d()
 *   unsigned tgc_philox_bits(unsigned long long seed, unsigned long long counter)
 *   float tgc_philox_uniform_m(seed, counter, int m)   (bits >> (32 - m)) * 2^-m
 *   float tgc_philox_uniform(seed, counter) == tgc_philox_uniform24   m = 24
 *   float tgc_philox_normal(seed, counter)   Box-Muller in double, rounded to float once
 *   T tgc_sigmoid(T), tgc_gelu(T), tgc_gelu_tanh(T), tgc_silu(T), tgc_relu(T),
 *     tgc_maximum(T, T), tgc_minimum(T, T) (NaN propagates), for T = float and double
 *   template <typename T, int N> struct tgc_vec { T v[N]; } aligned to N * sizeof(T)
 *   template <typename T> T tgc_warp_sum(T) / tgc_warp_max(T) / tgc_warp_min(T)
 *     xor-shuffle butterflies over a full warp (every lane gets the result) */
#ifndef TGC_BACKEND_CUDA_RENDER_H
#define TGC_BACKEND_CUDA_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_target.h"
#include "kir/abi.h"
#include "kir/kir.h"
#include "support/strbuf.h"

/* Rows up to this many inner elements are reduced by one warp (8 rows per block); longer
 * rows by a whole block of 256 threads. The kernel and tgc_cuda_launch_dims both apply it. */
#define TGC_CUDA_WARP_ROW_MAX 128
/* Reductions whose outer (kept) axis is the contiguous one ("column" reductions: a sum over
 * dim 0 of [N, C]) give each thread its own row when there are at least this many rows, so a
 * warp reads 32 neighbouring columns at once. */
#define TGC_CUDA_COLUMN_ROWS_MIN 2048

typedef enum {
    TGC_CUDA_SHAPE_FLAT, /* pointwise: one flat grid-stride loop over every element */
    TGC_CUDA_SHAPE_ROWS  /* reductions / phases: rows over the grid, a row per thread, warp
                          * or block (rule above) */
} tgc_cuda_shape;

/* What the launcher needs, filled by tgc_cuda_render_loop. */
typedef struct tgc_cuda_launch {
    tgc_cuda_shape shape;
    int block_threads; /* always TGC_CUDA_BLOCK_THREADS (256) */
    /* FLAT: elements per thread per iteration on the vector path (1: scalar only); the
     * kernel takes the vector path at run time only where sizes, strides and pointers
     * allow (uniform branch), else one element per iteration. */
    int vec;
    /* ROWS: 1 when the kernel may choose a thread per row (TGC_CUDA_COLUMN_ROWS_MIN). */
    int column;
    unsigned smem_bytes; /* dynamic shared memory (0: the kernels use static arrays only) */
    /* Blocks per SM the grid is sized for (full occupancy at 256 threads: 8). */
    int blocks_per_sm;
} tgc_cuda_launch;

/* The text every program starts with (a static string; see the names above). */
const char *tgc_cuda_prelude(void);

/* Appends LOOP kernel k as `extern "C" __global__ void fname(fname_b b, fname_s s)` (plus
 * its structs and a templated body function fname_run) to out, and describes its launch.
 * slots: the kernel's ABI (kir_args_collect). TGC_ERR_COMPILE for a kernel IR construct the
 * renderer does not handle (an op, dtype or combination), naming the kernel and the value;
 * TGC_ERR_OOM. Deterministic. */
tgc_status tgc_cuda_render_loop(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                const char *fname, tgc_cuda_launch *launch);

/* The launch of a kernel rendered with launch l for this call: extents[d] is the value of
 * k->extent[d], sms the device's SM count. grid[1] = grid[2] = block[1] = block[2] = 1. */
void tgc_cuda_launch_dims(const tgc_cuda_launch *l, const kir_kernel *k, const int64_t *extents,
                          int sms, unsigned grid[3], unsigned block[3], unsigned *smem);

/* Expressions the value renderer reads values through (template epilogues). */
typedef struct tgc_cuda_val_env {
    const char *acc[4];            /* C expression of KV_ACC i (float for the templates) */
    const char *var[KIR_MAX_DIMS]; /* expression of domain var d (GEMM: 0 batch, 1 m, 2 n);
                                    * integers, any width (converted to long long) */
    const char *bufs;              /* the buffers' void *[]: e.g. "b.p" */
    const char *sizes;             /* the size words' long long[]: e.g. "s.v" */
    const char *prefix;            /* names of the emitted variables (NULL: "tv"): the
                                    * caller makes them unique in its scope */
} tgc_cuda_val_env;

/* Emits the statements computing value `result` of k (and every input of it whose
 * emitted[] flag is 0; emitted has k->n_vals entries, zeroed by the caller, and is updated)
 * into out, and writes the name of the C variable holding it into name (of name_len bytes).
 * The variable has the value's compute type: float for f32 / f16 / bf16 (already rounded to
 * f16 / bf16), double for f64, int for i32, long long for i64, bool for bool. Loads index
 * b->p with env->var; symbolic sizes come from env->sizes (slots as kir_args_collect gave
 * them). TGC_ERR_COMPILE for an unsupported value, TGC_ERR_INVALID_ARG for bad ids. */
tgc_status tgc_cuda_render_vals(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                const tgc_cuda_val_env *env, int32_t result, char *name,
                                size_t name_len, uint8_t *emitted);

/* The C type of a value of dtype dt as the renderer computes it ("float", "double", "int",
 * "long long", "bool") and as it is stored ("float", "double", "uint16_t" for f16 / bf16,
 * "int", "long long", "uint8_t" for bool). */
const char *tgc_cuda_compute_type(tgc_dtype dt);
const char *tgc_cuda_storage_type(tgc_dtype dt);

/* One program: the prelude followed by LOOP kernels ks[0..n) named names[i] (launches[i]
 * filled per kernel; may be NULL). Returns the malloc'd text, or NULL with the error set. */
char *tgc_cuda_render_program(const kir_kernel *const *ks, const kir_args *const *slots,
                              const char *const *names, int n, tgc_cuda_launch *launches);

#endif
