/* The CUDA backend's one program cache: every program NVRTC compiles goes through it (the
 * variants' kernels, the GEMM / conv templates, the native ops, attention, the conv
 * gradients).
 *
 * A program is keyed by its full text, NVRTC's version, its compile options (the architecture
 * sm_XY or sm_XYa among them: tgc_nvrtc_options) and sm: tgc_cuda_program_key. The cubin is
 * kept in memory for the life of the process and, given a directory (cfg.cache_dir,
 * TGC_CACHE_DIR), on disk under the same key (backend/code_cache.h: checked in full before it
 * is used, written atomically), so a later process loads it instead of running NVRTC. The
 * programs of one call that are in neither place compile all at once on every core. A
 * program is loaded into a device's context once (its first tgc_cuda_program_function there)
 * and stays loaded.
 *
 * Thread-safety: every function may be called from any thread; a program several threads ask
 * for at the same time compiles once (the others wait for it). */
#ifndef TGC_BACKEND_CUDA_PROGRAM_H
#define TGC_BACKEND_CUDA_PROGRAM_H

#include <cuda.h>
#include <stddef.h>

#include "backend/code_cache.h"
#include "tgc/tensor.h"

/* One program asked for: a name for messages (NVRTC's program name; NULL: a numbered one) and
 * its full text. */
typedef struct tgc_cuda_program_src {
    const char *name;
    const char *text;
} tgc_cuda_program_src;

typedef struct tgc_cuda_program tgc_cuda_program;

/* The programs srcs[0..n) for sm_<sm>: each from memory, else from dir (NULL: no disk), else
 * compiled now (those of this call together, on every core) and written to dir. progs[i] is
 * program i's (the cache's, for the life of the process). ptx (NULL: not wanted): ptx[i] is the
 * malloc'd PTX of program i when this call compiled it, else NULL. Errors: the first failure,
 * TGC_ERR_COMPILE with NVRTC's log naming the program, TGC_ERR_DEVICE when libnvrtc is
 * missing, TGC_ERR_OOM; then progs[] and ptx[] are NULL. */
tgc_status tgc_cuda_programs_get(int n, const tgc_cuda_program_src *srcs, int sm, const char *dir,
                                 const tgc_cuda_program **progs, char **ptx);
/* One program (tgc_cuda_programs_get with n = 1). */
tgc_status tgc_cuda_program_get(const char *name, const char *text, int sm, const char *dir,
                                const tgc_cuda_program **prog);

/* Kernel `entry` of p on device dev, whose context the program is loaded into on the first call
 * for dev (the call makes dev current on the calling thread). TGC_ERR_DEVICE for a bad device,
 * the driver's error for a failed load or a missing entry. */
tgc_status tgc_cuda_program_function(const tgc_cuda_program *p, int dev, const char *entry,
                                     CUfunction *fn);

/* p's cubin (size bytes). */
const void *tgc_cuda_program_image(const tgc_cuda_program *p, size_t *size);

/* The key of text compiled for sm: "tgc-cuda-program 1", "sm <sm>", "nvrtc <major>.<minor>"
 * ("nvrtc none" without libnvrtc), the options one a line, an empty line, then the text.
 * Malloc'd; NULL when out of memory (error set). */
char *tgc_cuda_program_key(const char *text, int sm);

/* The disk entry of (text, sm) in dir, as the cache reads and writes it (tests): load gives 1
 * and a malloc'd copy of the cubin when dir holds a valid one, 0 otherwise; store is best
 * effort, creating a missing dir (with parents, 0700; one it cannot make is a warning, once,
 * that ends "compiled CUDA programs are not cached on disk"). */
int tgc_cuda_program_disk_load(const char *dir, int sm, const char *text, char **cubin,
                               size_t *size);
void tgc_cuda_program_disk_store(const char *dir, int sm, const char *text, const void *cubin,
                                 size_t size);

/* What the cache did since the process started: compiled counts NVRTC compiles. */
void tgc_cuda_program_stats(tgc_code_cache_stats *s);

#endif
