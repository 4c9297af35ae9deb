/* GEMM and CONV template kernels of the CUDA backend: kir_kernel (KIR_GEMM / KIR_CONV with
 * its fused epilogue) -> CUDA C text for NVRTC, plus the launch geometry for given sizes.
 *
 * Kernel ABI (COMMON ABI plus two parameters):
 *   extern "C" __global__ void NAME(NAME_b b, NAME_s s, tgc_gemm_geom g, void *ws)
 * g is evaluated per call by the launcher (tgc_sym_eval of every tpl sdim; 0 for the ones the
 * kind does not use); constant sdims are also compiled in, so only symbolic ones are read
 * from g. ws: device workspace of *ws_bytes (split-K partials and tile counters), NULL when
 * 0. Contract for ws: its first tgc_cuda_template_ws_zero_bytes() bytes (the counters) must
 * be zero before a launch; every launch leaves them zero again, so zeroing once when the
 * workspace is allocated suffices (cuMemsetD8Async of the whole ws before each launch is
 * also correct, and capturable).
 *
 * Modes: F32 operands with TGC_PRECISION_HIGHEST -> SIMT FFMA (exact fp32); HIGH -> TF32
 * mma.sync m16n8k8 (inputs rounded with cvt.rna.tf32); MEDIUM -> bf16 mma.sync m16n8k16
 * (fp32 staged, rounded to bf16 at fragment load); F16 / BF16 operands -> m16n8k16 with
 * ldmatrix. fp32 accumulation everywhere. On sm_90 the TF32, F16 and BF16 modes use wgmma
 * instead (the program then compiles for sm_90a): operand tiles in 128-byte-swizzled stages,
 * one 64-row slab per consumer warpgroup; TF32 needs both operands K-major in memory (stride 1
 * along k, or gathered element-wise: conv's im2col, operands strided both ways), otherwise
 * the kernel keeps mma.sync. A conv of channels-last operands (kir_template.cl) gathers x
 * in 16-byte chunks of channels into K-major stages (tgc_im2col_cl). TF32 stages are
 * rounded to tf32 in shared memory (cvt.rna, as the mma.sync path rounds its fragments)
 * before wgmma reads them. The render is a pure function of (k, slots, prec, sm); rendering
 * and launch geometry are thread-safe. */
#ifndef TGC_BACKEND_CUDA_GEMM_H
#define TGC_BACKEND_CUDA_GEMM_H

#include <stddef.h>

#include "backend/cuda/cuda_tmap.h"
#include "kir/abi.h"
#include "kir/kir.h"
#include "support/strbuf.h"
#include "tgc/config.h"

/* The per-call geometry, laid out exactly as the generated text's struct (all int64). */
typedef struct tgc_gemm_geom {
    long long batch, M, N, K, a_off, a_bs, a_rs, a_cs, b_off, b_bs, b_rs, b_cs, c_bs, c_rs;
    long long cn, cc, ch, cw, co, kh, kw, oh, ow;
} tgc_gemm_geom;

typedef enum tgc_cuda_tpl_mode {
    TGC_CUDA_TPL_SIMT = 0,  /* fp32 FFMA */
    TGC_CUDA_TPL_TF32 = 1,  /* fp32 operands, TF32 mma */
    TGC_CUDA_TPL_BF16X = 2, /* fp32 operands rounded to bf16, bf16 mma */
    TGC_CUDA_TPL_F16 = 3,   /* f16 operands */
    TGC_CUDA_TPL_BF16 = 4   /* bf16 operands */
} tgc_cuda_tpl_mode;

/* The configuration a render chose (input to the launch). Plain data. */
typedef struct tgc_cuda_tpl {
    int kind;       /* KIR_GEMM or KIR_CONV */
    int mode;       /* tgc_cuda_tpl_mode */
    int bm, bn, bk; /* block tile */
    int wm, wn;     /* warps along m and n (SIMT: 16 x 16 threads of 8 x 8; wgmma: warpgroups) */
    int stages;     /* cp.async pipeline depth */
    int threads;    /* block threads */
    unsigned smem_bytes; /* dynamic shared memory (> 48 KiB needs the opt-in attribute) */
    int split_k;         /* split-K allowed (the launch picks the split count per call) */
    int cl;     /* conv of channels-last operands (kir_template.cl): x gathered in 16-byte chunks */
    int out_cl; /* conv whose result is stored channels-last (kir_template.out_cl) */
    int wg;     /* sm_90a wgmma path: consumer warpgroups (bm = 64 wg); 0: mma.sync */
    const char *why; /* the reason for the tile, a static string (tgc_cuda_tpl_describe) */
    /* sm_90a GEMMs whose operands are contiguous along k or along m / n: the program also has
     * NAME_tma, the warp-specialized TMA kernel (128 x tma_bn tiles, k tiles of 128 bytes,
     * tma_stages, 384 threads, tma_smem bytes of dynamic shared memory), launched instead of
     * NAME for the calls tgc_cuda_template_tma accepts. tma_bn 0: no such entry. */
    int tma_bn, tma_stages;
    int tma_al, tma_bl; /* its operands' stage layouts (0 K-major, 1 MN-major) */
    unsigned tma_smem;
} tgc_cuda_tpl;

/* One line for the kernels log channel: kind, mode, instruction path, tile, warpgroups or
 * warps, stages, threads, shared memory and the reason (cfg->why), e.g. "conv TF32 wgmma
 * 64x128x32, 2 warpgroups along N, 4 stages, 256 threads, 99328 B smem: at most 64 rows".
 * Writes at most n bytes (NUL included). Pure. */
void tgc_cuda_tpl_describe(const tgc_cuda_tpl *cfg, char *buf, size_t n);

/* The mode of f32 operands at precision prec (HIGHEST SIMT, HIGH TF32, MEDIUM BF16X): the one
 * mapping of cfg.matmul_precision to code, for the templates and the conv gradients. */
int tgc_cuda_f32_mode(tgc_matmul_precision prec);

/* The template library's text (cuda_gemm_lib.cuh), which every template program and the
 * conv-gradient programs start with. */
const char *tgc_cuda_gemm_lib(void);

/* Appends struct NAME_mma to out: NAME_mma::run(acc, desc_a, desc_b) issues one
 * wgmma.mma_async m64nNk16 (mode F16 / BF16; ta, tb: 1 where that operand's stages are
 * MN-major) or m64nNk8 (TF32, both K-major) adding to the n / 2 accumulators of each thread
 * of the warpgroup (the emulator computes the same from the descriptors). The `MMA` of
 * tgc_wgmma_comp, for the templates and the conv-gradient programs. */
void tgc_cuda_render_wgmma(tgc_strbuf *o, const char *name, int mode, int n, int ta, int tb);

/* Appends kernel k (KIR_GEMM or KIR_CONV) as CUDA C to out: the template library once per
 * program (guarded with #ifndef), the NAME_b / NAME_s structs, the epilogue and the
 * __global__ NAME. slots: the kernel's size slots (kir_args_collect of k). prec applies to
 * F32 operands. sm: e.g. 90. *cfg receives the configuration. The program must start with
 * tgc_cuda_prelude() (cuda_render.h): the epilogue, rendered by tgc_cuda_render_vals, uses
 * its helpers. Errors: TGC_ERR_UNSUPPORTED (an operand dtype the templates do not have, sm
 * below 80), TGC_ERR_COMPILE (an epilogue value the value renderer does not handle),
 * TGC_ERR_OOM. */
tgc_status tgc_cuda_render_template(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                    const char *fname, tgc_matmul_precision prec, int sm,
                                    tgc_cuda_tpl *cfg);

/* tgc_cuda_render_template with the block tile forced: tile's bm, bn, bk, wm, wn and stages
 * (SIMT: bm = bn = 128, bk 8 or 16, any stages 2..8) replace the chosen ones, the rest is
 * ignored. tile->wg > 0 asks for the wgmma path (sm_90, a mode and layouts it has): wg
 * warpgroups, wn (0 or 1: one; 2) of them side by side along N, bm = 64 wg / wn, bn / wn a
 * multiple of 16 up to 256 (of 64 for an MN-major 16-bit operand), bk * element size a
 * multiple of 128 bytes, 3 to 8 stages; wm is ignored. tile->wg == 0 forces the mma.sync
 * / SIMT templates on every sm. tile->tma_bn (128, 192 or 256) with tile->tma_stages (2 to 8)
 * forces the TMA entry's tile where the kernel has that entry; 0 keeps the chosen one. For tuning
 * sweeps (bench_cuda_gemm sweep). TGC_ERR_INVALID_ARG when the tile breaks a constraint of the
 * templates (warp tiles of 16 x 16 multiples, loader chunks a multiple of the block's threads, at
 * most 227 KiB of shared memory). */
tgc_status tgc_cuda_render_template_tile(tgc_strbuf *out, const kir_kernel *k,
                                         const kir_args *slots, const char *fname,
                                         tgc_matmul_precision prec, int sm,
                                         const tgc_cuda_tpl *tile, tgc_cuda_tpl *cfg);

/* The launch of a rendered template kernel for the sizes in g on a device with `sms`
 * multiprocessors: grid, block, dynamic smem bytes and workspace bytes (0: pass NULL).
 * grid is never 0 in any dim (an empty problem launches blocks that return at once). */
void tgc_cuda_template_launch(const tgc_cuda_tpl *cfg, const kir_kernel *k, const tgc_gemm_geom *g,
                              int sms, unsigned grid[3], unsigned block[3], unsigned *smem,
                              size_t *ws_bytes);

/* 1 when sm_90a GEMM programs get the warp-specialized TMA entry (tgc_cuda_tpl.tma_bn): the
 * environment's TGC_CUDA_TMA (1 or 0), read once per process, else the library's default
 * (on). Thread-safe. */
int tgc_cuda_gemm_tma(void);

/* A launch of the warp-specialized TMA kernel: the tensor maps of A and B to encode
 * (tgc_cuda_tmap_encode), the persistent grid (a block per SM at most, 384 threads), its
 * dynamic shared memory, the k splits of each tile (1: none) and the split-K workspace
 * (ws_bytes, 0 when splits is 1; its first ws_zero_bytes zero before the launch, as the
 * kernel leaves them). */
typedef struct tgc_cuda_tma_launch {
    tgc_cuda_tmap_desc maps[2];
    unsigned grid[3], block[3], smem;
    int splits;
    size_t ws_bytes, ws_zero_bytes;
} tgc_cuda_tma_launch;

/* The TMA kernel's launch for the sizes in g and the kernel's buffers bufs (device pointers,
 * the kernel's buffer order) on a device of `sms` multiprocessors, when cfg has that entry
 * and this call suits it: 1 with *out; 0 when the call keeps NAME: no TMA entry, or sizes or
 * strides TMA cannot address (a base or a stride not 16-byte aligned, a size of 2^31 or more,
 * an empty problem). k is split when the tiles fill less than a wave of the SMs and the
 * splits' wave takes less time (each split's unit costing its k tiles, the ring's filling
 * and the partial tile's write and read). NAME_tma takes (NAME_b b, NAME_s s,
 * tgc_gemm_geom g, tgc_tmap ta, tgc_tmap tb, void *ws, int splits): the maps by value, 128
 * bytes each. Pure. */
int tgc_cuda_template_tma(const tgc_cuda_tpl *cfg, const kir_kernel *k, const tgc_gemm_geom *g,
                          void *const *bufs, int sms, tgc_cuda_tma_launch *out);

/* Bytes at the start of the workspace that must be zero before a launch (the split-K tile
 * counters); 0 when the launch needs no workspace. */
size_t tgc_cuda_template_ws_zero_bytes(const tgc_cuda_tpl *cfg, const kir_kernel *k,
                                       const tgc_gemm_geom *g, int sms);

/* The geometry of k for the symbol values vals (what the launcher passes as g). */
void tgc_cuda_template_geom(const kir_kernel *k, const tgc_symtab *syms, const int64_t *vals,
                            tgc_gemm_geom *g);

#endif
