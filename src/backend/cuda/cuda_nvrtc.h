/* NVRTC, opened at run time with dlopen: CUDA C text -> cubin (and PTX) for one sm_XY. In the
 * library only the program cache (cuda_program.c) compiles: everything else gets its programs
 * from there; tests call the compile functions directly.
 *
 * The library is looked up as "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12" and then
 * TGC_CUDA_LIBDIR "/libnvrtc.so" (the toolkit the library was built against). Loading is
 * idempotent and thread-safe (pthread_once); every function may be called from any thread.
 * Compiled images are malloc'd and owned by the caller (free()).
 *
 * Compile options: --gpu-architecture=sm_<sm> (sm_<sm>a when the program text contains
 * "#define TGC_NEEDS_SM90A"), -std=c++17, -default-device, -lineinfo, and --include-path=
 * TGC_CUDA_LIBDIR/../include when cuda_fp16.h is there (NVRTC 13 has no built-in copy); no
 * fast math. Generated code does not include toolkit headers: tgc_cuda_prelude() (cuda_render.h)
 * defines the integer types and the f16/bf16 conversions every generated program needs. */
#ifndef TGC_BACKEND_CUDA_NVRTC_H
#define TGC_BACKEND_CUDA_NVRTC_H

#include <stddef.h>

#include "tgc/tensor.h"

/* Opens libnvrtc and resolves its entry points once. TGC_ERR_DEVICE
 * "libnvrtc could not be opened (tried ...: <dlerror>)" when no candidate opens or a symbol is
 * missing; the same status and message on every later call. */
tgc_status tgc_nvrtc_load(void);

/* The options program src compiles with for sm (those above, in order); o->v points into o
 * itself, so o is not copied. The program cache keys each program by them. */
typedef struct tgc_nvrtc_opts {
    int n;
    const char *v[6];
    char arch[64];
} tgc_nvrtc_opts;
void tgc_nvrtc_options(const char *src, int sm, tgc_nvrtc_opts *o);

/* Compiles one program (src, named prog_name in messages) for sm (e.g. 90 -> sm_90). On
 * success *cubin is a malloc'd image of *cubin_size bytes and, when ptx != NULL, *ptx the
 * malloc'd NUL-terminated PTX text. On failure TGC_ERR_COMPILE "tgc cuda: NVRTC rejected
 * <prog_name>: <log>" (the log cut to its first few KiB), outputs NULL/0, nothing leaked.
 * Calls tgc_nvrtc_load() itself. */
tgc_status tgc_nvrtc_compile(const char *prog_name, const char *src, int sm, char **cubin,
                             size_t *cubin_size, char **ptx);

/* Compiles n programs on up to n_threads threads (pthreads; n_threads <= 1 compiles in the
 * calling thread). cubins[i], sizes[i] and (when ptxs != NULL) ptxs[i] receive program i's
 * results. The first failing program (lowest index) determines the status and message, which
 * are set on the calling thread; on failure every output is freed and NULL/0. */
tgc_status tgc_nvrtc_compile_all(int n, const char *const *names, const char *const *srcs, int sm,
                                 int n_threads, char **cubins, size_t *sizes, char **ptxs);

/* NVRTC's version; returns 0 on success, -1 when libnvrtc cannot be loaded (both set to 0). */
int tgc_nvrtc_version(int *major, int *minor);

#endif
