/* Kernel IR -> CUDA C text: the CUDA dialect of the C-family renderer (backend/render_c.h,
 * which documents the kernel shapes, the ABI, the numerics and the prelude's names) and the
 * functions the CUDA backend calls, each the base's with this dialect.
 *
 * CUDA's spelling: `extern "C" __global__ void __launch_bounds__(256) F(F_b b, F_s s)`,
 * helpers `static __device__ __forceinline__`, threadIdx.x / blockIdx.x / gridDim.x, 32-lane
 * warps reduced with __shfl_xor_sync, __syncthreads(), __restrict__ and __shared__; f16 and
 * bf16 stored as uint16_t (f16 converted with PTX cvt, bf16 in integer arithmetic);
 * tgc_vec<T, N> { T v[N]; } for 16-byte accesses; the IEEE libm functions (expf, ...; no
 * fast math).
 *
 * Every function here is pure and thread-safe (tgc_cuda_prelude builds its text once). */
#ifndef TGC_BACKEND_CUDA_RENDER_H
#define TGC_BACKEND_CUDA_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_target.h"
#include "backend/render_c.h"
#include "kir/abi.h"
#include "kir/kir.h"
#include "support/strbuf.h"

/* The CUDA dialect table (static data). */
const tgc_c_dialect *tgc_cuda_dialect(void);

typedef tgc_c_shape tgc_cuda_shape;
#define TGC_CUDA_SHAPE_FLAT TGC_C_SHAPE_FLAT
#define TGC_CUDA_SHAPE_ROWS TGC_C_SHAPE_ROWS
/* What the launcher needs, filled by tgc_cuda_render_loop (block_threads is always
 * TGC_CUDA_BLOCK_THREADS, warp_size 32). */
typedef tgc_c_launch tgc_cuda_launch;
/* Expressions the value renderer reads values through (template epilogues). */
typedef tgc_c_val_env tgc_cuda_val_env;

/* The text every program starts with (built once, then static; see render_c.h's names). */
const char *tgc_cuda_prelude(void);

/* tgc_c_render_loop in CUDA: appends LOOP kernel k as `extern "C" __global__ void
 * fname(fname_b b, fname_s s)` (plus its structs and a templated body function fname_run)
 * to out, and describes its launch. */
tgc_status tgc_cuda_render_loop(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                const char *fname, tgc_cuda_launch *launch);

/* tgc_c_render_batch in CUDA: flat LOOP kernels ks[0..n) as one entry `extern "C"
 * __global__ void fname(fname_m0_b b0, fname_m0_s s0, ..., fname_e e)`. */
tgc_status tgc_cuda_render_batch(tgc_strbuf *out, const kir_kernel *const *ks,
                                 const kir_args *const *slots, int n, const char *fname,
                                 tgc_cuda_launch *launches);

/* tgc_c_launch_dims: the launch of a kernel rendered with launch l (sms: the device's SM
 * count). */
void tgc_cuda_launch_dims(const tgc_cuda_launch *l, const kir_kernel *k, const int64_t *extents,
                          int sms, unsigned grid[3], unsigned block[3], unsigned *smem);

/* tgc_c_split_chunks: chunks per row of a split reduction over rows x len (1: no split). */
int64_t tgc_cuda_split_chunks(int64_t rows, int64_t len);

/* tgc_c_split_dims: the grids and scratch of the split pair F_part / F_fin, launched on one
 * stream, blocks of 256 threads. */
int tgc_cuda_split_dims(const tgc_cuda_launch *l, const kir_kernel *k, const int64_t *extents,
                        int sms, unsigned grid_part[3], unsigned grid_fin[3],
                        size_t *scratch_bytes);

/* tgc_c_render_vals in CUDA: the statements computing value `result` of k, in the
 * variable named in name: float for f32 / f16 / bf16 (already rounded), double for f64, int
 * for i32, long long for i64, bool for bool. */
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
