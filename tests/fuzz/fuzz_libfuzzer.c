/* libFuzzer entry point over the generator of fuzz_gen.c: the fuzzer's bytes drive every
 * choice the generator makes (one byte per draw, then a PRNG seeded from their hash), the
 * program runs on every backend, and a difference aborts so that libFuzzer keeps the input.
 * Built only with clang (cmake -DTGC_BUILD_LIBFUZZER=ON, or make fuzz-libfuzzer). A crash
 * input replays with fuzz_run --replay on a directory holding it as NAME.bin. */
#include "fuzz_gen.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fz_prog p;
    fz_rng r;
    fz_rng_bytes(&r, data, size);
    fz_generate(&r, &p, NULL);
    fz_verdict v = fz_run(&p, stderr);
    if (v != FZ_PASS) {
        fprintf(stderr, "fuzz_libfuzzer: %s\n", v == FZ_MISMATCH ? "mismatch" : "internal error");
        fz_print(&p, stderr);
        abort();
    }
    return 0;
}
