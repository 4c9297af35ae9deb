/* Fused attention on CUDA: scaled_dot_product_attention (SDPA) as one flash-attention style
 * kernel per call (online softmax, optional bool / float mask, causal, dropout with the CPU's
 * Philox bits), never materializing the L x S score matrix. The device code is
 * cuda_attention_kernel.cuh; this header is the host side.
 *
 * The kernels are CUDA C from the program cache (cuda_program.h: compiled once per
 * architecture and (dtype, head dims, dropout, rows), loaded once per device), lazily and
 * thread-safely; every function here may be called from any thread. */
#ifndef TGC_BACKEND_CUDA_ATTENTION_H
#define TGC_BACKEND_CUDA_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "backend/plan.h"
#include "ir/graph.h"
#include "tensor/tensor_impl.h"

/* struct tgc_at_args, the kernel's single by-value argument: one layout for the host and the
 * device program */
#include "backend/cuda/cuda_attention_args.cuh"

/* Runs SDPA node nd natively on env->device, with run_node's rules (backend/backend.h): ins
 * are the node's inputs as device tensors (any strides), shape its evaluated output shape;
 * on success *out is a new contiguous tensor on env->device in the current scope. The work is
 * queued on env->stream (NULL: tgc_cuda_stream(env->device.index)). With dropout it draws
 * from the Philox stream in the node's turn exactly as interp does (numel of the [batch...,
 * L, S] weights). TGC_ERR_UNSUPPORTED with no error kept for a case it does not cover (the
 * caller then stages the node through interp); any other error has its message. */
tgc_status tgc_cuda_attention_run(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                  tgc_tensor **out, const struct tgc_launch_env *env);

/* 1 when tgc_cuda_attention_run may cover node nd judging by its op, attributes and output
 * dtype alone (f32, f16, bf16); input dtypes, head dims (1..128) and ranks are checked at
 * run time, where an uncovered case answers TGC_ERR_UNSUPPORTED. 0 otherwise. */
int tgc_cuda_attention_supported(const tgc_node *nd);

/* ---- the pieces of a launch, exposed for the unit test (it runs the kernel text on a host
 * emulation of the CUDA execution model) ---- */

/* Tile geometry of the kernel: keys per tile, threads per block; the query rows per tile
 * (bm) are 64, or 32 where 64 would leave the GPU's multiprocessors short of blocks. */
#define TGC_AT_BN       64
#define TGC_AT_NT       128
#define TGC_AT_MAX_HEAD 128
/* Padded extents, shared by the host (shared-memory size) and the kernel text: the d loop runs
 * to TGC_AT_D4 (zeros past d), shared rows of q and k hold TGC_AT_DP floats (4 mod 8), the
 * value tile TGC_AT_DVP columns (TGC_AT_NC groups of 32), the weight tile TGC_AT_BNP. */
#define TGC_AT_D4(d)   (((d) + 3) / 4 * 4)
#define TGC_AT_DP(d)   (TGC_AT_D4(d) + (TGC_AT_D4(d) % 8 == 0 ? 4 : 0))
#define TGC_AT_NC(dv)  (((dv) + 31) / 32)
#define TGC_AT_DVP(dv) (TGC_AT_NC(dv) * 32)
#define TGC_AT_BNP     (TGC_AT_BN + 4)

/* One launch: the arguments (out and the dropout draw still to fill), the program variant
 * (dt: 0 f32, 1 f16, 2 bf16; d, dv: head dims of q/k and v; bm: query rows per block), the grid
 * and the dynamic shared memory. n_draw: the Philox counters the node reserves when
 * args.dropout. */
typedef struct tgc_at_launch {
    struct tgc_at_args args;
    int dt, d, dv, bm;
    int out_ndim;
    int64_t n_blocks;
    size_t smem;
    uint64_t n_draw;
    int64_t out_numel;
} tgc_at_launch;

/* Fills ln for node nd on inputs ins (tensors of any device: the pointers are
 * tgc_device_ptr) and output shape, for a GPU of n_sms multiprocessors (0: unknown).
 * TGC_ERR_UNSUPPORTED (no error set) when the kernel does not cover the case. */
tgc_status tgc_cuda_attention_setup(const tgc_node *nd, tgc_tensor *const *ins,
                                    const int64_t *shape, int n_sms, tgc_at_launch *ln);

/* The NVRTC program text of variant (dt, d, dv, dropout: 0 or 1, bm: 32 or 64), malloc'd
 * (NULL on OOM, error set); its kernel is "tgc_attention_fwd". */
char *tgc_cuda_attention_source(int dt, int d, int dv, int dropout, int bm);

/* Dynamic shared memory bytes of variant (d, dv, bm). */
size_t tgc_cuda_attention_smem(int d, int dv, int bm);

#endif
