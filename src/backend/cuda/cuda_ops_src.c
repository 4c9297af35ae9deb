/* The text of the native-op kernel program: the prelude (cuda_render.h; the kernels use
 * none of it but share the program layout of every CUDA program), the op and dtype numbers
 * of ops.def and tensor.h as #defines, so the kernels switch on the same numbers the host
 * passes, tgc_native_math (a switch case per MATH_FN op of ops.def, in double: the native
 * pointwise kernel's math, so a new math op needs no kernel edit), then cuda_ops_kernels.cu
 * (embedded by the build as every .cu / .cuh is: CMakeLists.txt, tools/embed_text.cmake). Pure
 * functions; thread-safe. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_render.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "ir/op.h"
#include "support/error.h"

#include "backend/cuda/cuda_ops_kernels.cu.h"

static const char *const op_macro_names[] = {
#define X(e, name, mn, mx, kind) #e,
#include "ir/ops.def"
#undef X
};
static_assert(sizeof(op_macro_names) / sizeof(op_macro_names[0]) == TGC_OP_COUNT,
              "op names out of sync with ops.def");

static const char *const dt_macro_names[TGC_DTYPE_COUNT] = {
    [TGC_F32] = "F32", [TGC_F16] = "F16",   [TGC_BF16] = "BF16", [TGC_I32] = "I32",
    [TGC_I64] = "I64", [TGC_BOOL] = "BOOL", [TGC_F64] = "F64"};

static const char *const kernel_names[] = {
#define OPS_K_NAME(e, name) name,
    OPS_KERNELS(OPS_K_NAME)
#undef OPS_K_NAME
};

const char *const *tgc_cuda_ops_kernel_names(int *n)
{
    *n = OPS_K_COUNT;
    return kernel_names;
}

char *tgc_cuda_ops_source(void)
{
    const char *body = tgc_text_cuda_ops_kernels_cu;
    const char *prelude = tgc_cuda_prelude();
    size_t body_len = sizeof tgc_text_cuda_ops_kernels_cu;
    size_t cap =
        strlen(prelude) + body_len + 64 * (TGC_OP_COUNT + TGC_DTYPE_COUNT) + 64 * TGC_OP_COUNT + 64;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = (size_t)snprintf(s, cap, "%s\n/* tgc native ops */\n", prelude);
    for (int i = 0; i < TGC_OP_COUNT; i++)
        n += (size_t)snprintf(s + n, cap - n, "#define OP_%s %d\n", op_macro_names[i], i);
    for (int i = 0; i < TGC_DTYPE_COUNT; i++)
        n += (size_t)snprintf(s + n, cap - n, "#define DT_%s %d\n", dt_macro_names[i], i);
    n += (size_t)snprintf(s + n, cap - n,
                          "__device__ double tgc_native_math(int op, double x) {\n"
                          "  switch (op) {\n");
    for (int i = 0; i < TGC_OP_COUNT; i++)
        if (tgc_op_math_fn((tgc_op)i))
            n += (size_t)snprintf(s + n, cap - n, "  case OP_%s: return %s(x);\n",
                                  op_macro_names[i], tgc_op_math_fn((tgc_op)i));
    n += (size_t)snprintf(s + n, cap - n, "  default: return x;\n  }\n}\n");
    memcpy(s + n, body, body_len); /* with its NUL */
    return s;
}
