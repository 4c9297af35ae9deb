/* Dialect tables for the renderer's tests (backend/render_c.h; include after <cmocka.h>).
 *
 * marked_dialect(): every string of the table is a marker no generated code contains
 * otherwise (KERNEL_ENTRY, TID_X, SHFL_XOR(...), "%s_F32_" for math names, ...), with CUDA's
 * numbers (warp 32, 256 threads). Text rendered with it must hold no CUDA spelling at all
 * (no_cuda_spelling), which shows the base spells nothing itself; and mapping the markers
 * back to CUDA's spellings (marked_to_cuda) must give the CUDA dialect's text byte for byte,
 * which shows every CUDA spelling comes from a table field. */
#ifndef TGC_TESTS_UNIT_RENDER_DIALECTS_H
#define TGC_TESTS_UNIT_RENDER_DIALECTS_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/render_c.h"

static inline const tgc_c_dialect *marked_dialect(void)
{
    static const tgc_c_dialect d = {
        .name = "MARKED",
        .tag = "marked",
        .kernel = "KERNEL_ENTRY",
        .launch_bounds = "BOUNDS(%s)",
        .device_fn = "DEVICE_FN",
        .global = "GLOBAL_ ",
        .restrict_ = "RESTRICT_ ",
        .shared = "SHARED_ ",
        .barrier = "BARRIER()",
        .thread_idx = "TID_X",
        .block_idx = "BID_X",
        .grid_dim = "GRID_X",
        .warp_size = 32,
        .shfl_xor = "SHFL_XOR(%s, %s)",
        .block_threads = 256,
        .threads_per_sm = 2048,
        .f16_type = "HALF_T",
        .bf16_type = "BFLOAT_T",
        .i32_as_f32 = "I2F(%s)",
        .u32_as_f32 = "U2F(%s)",
        .f32_as_u32 = "F2U(%s)",
        .i64_as_f64 = "L2D(%s)",
        .mulhi_u32 = "MULHI(%s, %s)",
        .math_f32 = "%s_F32_",
        .math_f64 = "%s_F64_",
        .vec_type = "VEC_T<%s, %s>",
        .vec_lane = "%s.LANE_[%s]",
        .prelude_f16 = "/*F16_PIECE*/\n",
        .prelude_vec = "/*VEC_PIECE*/\n",
    };
    return &d;
}

/* s with every `from` replaced by `to` (malloc'd; s is freed). */
static inline char *replace_all(char *s, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), n = 0;
    for (const char *p = strstr(s, from); p; p = strstr(p + nf, from))
        n++;
    char *r = malloc(strlen(s) + n * nt + 1), *w = r;
    assert_non_null(r);
    const char *p = s;
    for (const char *q = strstr(p, from); q; q = strstr(p, from)) {
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, to, nt);
        w += nt;
        p = q + nf;
    }
    strcpy(w, p);
    free(s);
    return r;
}

/* Text of marked_dialect() with its markers spelled as CUDA spells them (cuda: CUDA's table,
 * for its prelude pieces). Returns a malloc'd string. */
static inline char *marked_to_cuda(const char *text, const tgc_c_dialect *cuda)
{
    const char *map[][2] = {
        {"KERNEL_ENTRY", "extern \"C\" __global__ void"},
        {"BOUNDS(", "__launch_bounds__("},
        {"DEVICE_FN", "static __device__ __forceinline__"},
        {"GLOBAL_ ", ""},
        {"RESTRICT_ ", "__restrict__ "},
        {"SHARED_ ", "__shared__ "},
        {"BARRIER()", "__syncthreads()"},
        {"TID_X", "threadIdx.x"},
        {"BID_X", "blockIdx.x"},
        {"GRID_X", "gridDim.x"},
        {"SHFL_XOR(", "__shfl_xor_sync(0xffffffffu, "},
        {"BFLOAT_T", "uint16_t"},
        {"HALF_T", "uint16_t"},
        {"I2F(", "__int_as_float("},
        {"U2F(", "__uint_as_float("},
        {"F2U(", "__float_as_uint("},
        {"L2D(", "__longlong_as_double("},
        {"MULHI(", "__umulhi("},
        {"_F32_", "f"},
        {"_F64_", ""},
        {"VEC_T<", "tgc_vec<"},
        {".LANE_[", ".v["},
        {"/*F16_PIECE*/\n", cuda->prelude_f16},
        {"/*VEC_PIECE*/\n", cuda->prelude_vec},
        {"MARKED", "CUDA"},
        {"marked", "cuda"},
    };
    char *s = strdup(text);
    assert_non_null(s);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        s = replace_all(s, map[i][0], map[i][1]);
    return s;
}

/* 1 when text calls `name` (name followed by "(", not part of a longer identifier). */
static inline int calls(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name))
        if (p[n] == '(' && (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
            return 1;
    return 0;
}

/* Fails the test when text (rendered with marked_dialect()) spells anything as CUDA does. */
static inline void no_cuda_spelling(const char *text)
{
    static const char *const words[] = {
        "__global__",
        "__device__",
        "__forceinline__",
        "__launch_bounds__",
        "__restrict__",
        "__shared__",
        "__syncthreads",
        "threadIdx",
        "blockIdx",
        "gridDim",
        "__shfl",
        "__int_as_float",
        "__uint_as_float",
        "__float_as_uint",
        "__longlong_as_double",
        "__umulhi",
        "asm(",
        "tgc_vec",
        "extern \"C\"",
        "CUDA",
        "cuda",
    };
    static const char *const math[] = {"exp", "log", "sqrt", "tanh", "erf", "pow", "fabs", "cos"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(text, words[i]))
            fail_msg("the marked dialect's text holds \"%s\"", words[i]);
    /* calls outside comments (the prelude's comments say "pow(x, 0.5)") */
    char *code = strdup(text), *w = code;
    assert_non_null(code);
    for (const char *p = text; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
            *w++ = ' ';
        } else {
            *w++ = *p++;
        }
    }
    *w = 0;
    for (size_t i = 0; i < sizeof math / sizeof math[0]; i++) {
        char f[16];
        snprintf(f, sizeof f, "%sf", math[i]);
        if (calls(code, math[i]) || calls(code, f))
            fail_msg("the marked dialect's text calls %s or %s", math[i], f);
    }
    free(code);
}

#endif
