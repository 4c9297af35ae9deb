/* Autotuning of the CUDA GEMM / conv templates (cfg.autotune, TGC_AUTOTUNE): the candidate
 * tiles of a kernel, the timing of one launch on the device, and the choices remembered by
 * the kernel's text, in memory for the process and in the compile cache directory
 * (cfg.cache_dir) for later processes, so that a shape is measured once.
 *
 * A candidate is a tile forced on the template (tgc_cuda_render_template_tile) and whether
 * the warp-specialized TMA entry may run. Tiles do not change the order in which a kernel
 * sums an element's products, so a tuned kernel gives the heuristic's bits, except where the
 * launch splits k into a number of parts that depends on the tile.
 *
 * Thread-safety: every function may be called from any thread (the remembered choices are
 * behind the compile cache's lock). */
#ifndef TGC_BACKEND_CUDA_AUTOTUNE_H
#define TGC_BACKEND_CUDA_AUTOTUNE_H

#include "backend/cuda/cuda_gemm.h"
#include "runtime/cuda.h"
#include "tgc/config.h"

#define TGC_CUDA_TUNE_MAX 24

typedef struct tgc_cuda_tune_cand {
    tgc_cuda_tpl force; /* the tile: bm, bn, bk, wg, wm, wn, stages, tma_bn, tma_stages */
    int tma;            /* 1: the TMA entry runs where a call suits it; 0: NAME alone */
} tgc_cuda_tune_cand;

/* The candidates of a kernel whose heuristic configuration is `chosen` (what
 * tgc_cuda_render_template answered): the heuristic first (out[0], as chosen), then the
 * alternatives of `level` (FAST: other block tiles of its kind, the TMA entry's other widths
 * and NAME without it; FULL: those with other stage counts too). Some may break a constraint
 * of the templates: the caller renders each and drops those refused. The count (<= max). */
int tgc_cuda_tune_candidates(const tgc_cuda_tpl *chosen, tgc_autotune level,
                             tgc_cuda_tune_cand *out, int max);

/* "<bm> <bn> <bk> <wg> <wm> <wn> <stages> <tma_bn> <tma_stages> <tma>" of c into buf (the
 * remembered form; 80 bytes are enough); tgc_cuda_tune_parse reads it back: 1, or 0 for text
 * that is not such a line. */
void tgc_cuda_tune_format(const tgc_cuda_tune_cand *c, char *buf, size_t n);
int tgc_cuda_tune_parse(const char *text, size_t len, tgc_cuda_tune_cand *c);

/* The key of the choice for the kernel program `text` (the heuristic's, as rendered) on
 * device dev of architecture sm at `level`: the program's key (tgc_cuda_program_key), the
 * device's name, the driver's version, the library's and the level. malloc'd; NULL when out
 * of memory (error set). */
char *tgc_cuda_tune_key(const char *text, int sm, int dev, tgc_autotune level);

/* The remembered choice of key: 1 with *c from this process's memory or a valid file of
 * dir (NULL: memory only); 0 when none. tgc_cuda_tune_remember keeps c as key's choice in
 * memory and, with dir, on disk (best effort). */
int tgc_cuda_tune_recall(const char *key, const char *dir, tgc_cuda_tune_cand *c);
void tgc_cuda_tune_remember(const char *key, const char *dir, const tgc_cuda_tune_cand *c);

/* The mean time in microseconds of one launch of fn (grid, block, smem bytes, params) on
 * stream s over enough launches to fill about a millisecond, after two warm-up launches. The
 * driver's error when a launch or an event fails. */
tgc_status tgc_cuda_tune_time(CUfunction fn, const unsigned grid[3], const unsigned block[3],
                              unsigned smem, void **params, CUstream s, double *us);

#endif
