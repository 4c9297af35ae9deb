/* GPU tests: skipping GPU cases visibly where no GPU is present (header only; tests only).
 *
 * Every test binary with GPU cases (tests/{unit,ops,models}/test_*cuda*.c or *gpu*, labelled
 * `gpu` by tests/CMakeLists.txt) starts each GPU case with GPU_REQUIRE(), which calls cmocka's
 * skip() when no CUDA device can be used, and ends main with
 *
 *     return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
 *
 * which prints exactly one line "tgc: N GPU tests skipped: <reason>" when N > 0 (the reason
 * is tgc_last_error() of the probe, e.g. the library or device that is missing) and turns a
 * run where nothing failed but GPU cases were skipped into exit code 77, which ctest reports
 * as "Skipped" (SKIP_RETURN_CODE). A failure keeps a nonzero code other than 77.
 *
 * The probe uses the public API only: tgc_cuda_check() when the library is built with
 * CUDA and include/tgc/cuda.h exists, then one small allocation on tgc_cuda(0). So a build
 * without the CUDA backend (TGC_WITH_CUDA=OFF) compiles these tests and skips them too.
 * gpu_sync() waits for device 0 (tgc_cuda_synchronize, or a one-element host read where the
 * header is missing).
 *
 * Thread-safety: call from the test's main thread only (static state, cached probe). */
#ifndef TGC_TESTS_GPU_SKIP_H
#define TGC_TESTS_GPU_SKIP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tgc/tgc.h"

#if defined(TGC_HAVE_CUDA) && defined(__has_include)
#if __has_include("tgc/cuda.h")
#include "tgc/cuda.h"
#define TGC_TEST_HAVE_CUDA_API 1
#endif
#endif
#ifndef TGC_TEST_HAVE_CUDA_API
#define TGC_TEST_HAVE_CUDA_API 0
#endif

static int gpu_skip_probed_; /* 0: not yet; 1: GPU usable; -1: none */
static int gpu_skip_count_;  /* cases skipped so far */
static char gpu_skip_reason_[512];

/* 1 when tgc_cuda(0) can be used; the first call probes, later calls return the cached
 * answer. The reason for a 0 is kept for gpu_skip_finish. */
static inline int gpu_available(void)
{
    if (gpu_skip_probed_)
        return gpu_skip_probed_ > 0;
    gpu_skip_probed_ = -1;
    tgc_clear_error();
#if TGC_TEST_HAVE_CUDA_API
    if (tgc_cuda_check() != TGC_OK) {
        snprintf(gpu_skip_reason_, sizeof gpu_skip_reason_, "%s",
                 tgc_last_error()[0] ? tgc_last_error() : "tgc_cuda_check() failed");
        return 0;
    }
#elif !defined(TGC_HAVE_CUDA)
    snprintf(gpu_skip_reason_, sizeof gpu_skip_reason_,
             "libtgc was built without the CUDA backend (TGC_WITH_CUDA=OFF or no toolkit)");
    return 0;
#endif
    tgc_scope_push();
    int64_t one = 1;
    tgc_tensor *t = tgc_zeros(&one, 1, TGC_F32, tgc_cuda(0));
    float v = 1;
    int ok = t && tgc_copy_to_host(t, &v, sizeof v) == TGC_OK && v == 0.0f;
    if (!ok)
        snprintf(gpu_skip_reason_, sizeof gpu_skip_reason_, "%s",
                 tgc_last_error()[0] ? tgc_last_error()
                                     : "a tensor on tgc_cuda(0) could not be made or read");
    tgc_scope_pop();
    tgc_clear_error();
    gpu_skip_probed_ = ok ? 1 : -1;
    return ok;
}

/* Start of a GPU case: skip (counted) when there is no GPU. */
#define GPU_REQUIRE()                                                                              \
    do {                                                                                           \
        if (!gpu_available()) {                                                                    \
            gpu_skip_count_++;                                                                     \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* The end of main: prints the skip line and maps "passed with skips" to ctest's 77. */
static inline int gpu_skip_finish(int cmocka_rc)
{
    if (gpu_skip_count_ > 0) {
        printf("tgc: %d GPU tests skipped: %s\n", gpu_skip_count_, gpu_skip_reason_);
        fflush(stdout);
    }
    if (cmocka_rc != 0)
        return cmocka_rc == 77 ? 1 : cmocka_rc;
    return gpu_skip_count_ > 0 ? 77 : 0;
}

/* Waits until the work queued on device 0 is done. */
static inline tgc_status gpu_sync(void)
{
#if TGC_TEST_HAVE_CUDA_API
    return tgc_cuda_synchronize(0);
#else
    tgc_scope_push();
    int64_t one = 1;
    tgc_tensor *t = tgc_zeros(&one, 1, TGC_F32, tgc_cuda(0));
    float v;
    tgc_status st = t ? tgc_copy_to_host(t, &v, sizeof v) : tgc_last_status();
    tgc_scope_pop();
    return st;
#endif
}

/* Under compute-sanitizer (tests/gpu/test_gpu.sh sets TGC_GPU_TEST_SANITIZER=1 for its
 * memcheck and racecheck phases) every kernel runs tens of times slower: long loops (timing
 * loops, many-step training checks) run a few iterations there, the same code paths. */
static inline int gpu_under_sanitizer(void)
{
    const char *e = getenv("TGC_GPU_TEST_SANITIZER");
    return e && *e && strcmp(e, "0") != 0;
}

#endif
