/* The CUDA dialect of the C-family renderer (see cuda_render.h): a table, the one prelude
 * piece CUDA spells its own way (f16 conversions through PTX), and the base's functions
 * bound to the table. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/cuda/cuda_render.h"
#include "support/error.h"

/* One line of generated code per line of source. */
// clang-format off
static const char g_f16[] =
    "TGC_DEV float tgc_h2f(uint16_t h) {\n"
    "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "TGC_DEV uint16_t tgc_f2h(float f) {\n"
    "  if (f != f) return (uint16_t)(((unsigned)__float_as_uint(f) >> 16 & 0x8000u) | 0x7e00u);\n"
    "  uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n";
// clang-format on

static const tgc_c_dialect g_cuda = {
    .name = "CUDA",
    .tag = "cuda",
    .kernel = "extern \"C\" __global__ void",
    .launch_bounds = "__launch_bounds__(%s)",
    .device_fn = "static __device__ __forceinline__",
    .global = "",
    .restrict_ = "__restrict__ ",
    .shared = "__shared__ ",
    .barrier = "__syncthreads()",
    .thread_idx = "threadIdx.x",
    .block_idx = "blockIdx.x",
    .grid_dim = "gridDim.x",
    .warp_size = 32,
    .shfl_xor = "__shfl_xor_sync(0xffffffffu, %s, %s)",
    .block_threads = TGC_CUDA_BLOCK_THREADS,
    .threads_per_sm = 2048,
    .f16_type = "uint16_t",
    .bf16_type = "uint16_t",
    .i32_as_f32 = "__int_as_float(%s)",
    .u32_as_f32 = "__uint_as_float(%s)",
    .f32_as_u32 = "__float_as_uint(%s)",
    .i64_as_f64 = "__longlong_as_double(%s)",
    .mulhi_u32 = "__umulhi(%s, %s)",
    .math_f32 = "%sf",
    .math_f64 = "%s",
    .math_fns = NULL,
    .vec_type = "tgc_vec<%s, %s>",
    .vec_lane = "%s.v[%s]",
    .prelude_head = NULL,
    .prelude_math = NULL,
    .prelude_f16 = g_f16,
    .prelude_bf16 = NULL,
    .prelude_vec =
        "template <typename T, int N> struct alignas(sizeof(T) * N) tgc_vec { T v[N]; };\n",
};

const tgc_c_dialect *tgc_cuda_dialect(void)
{
    return &g_cuda;
}

/* ---- the prelude: built once ---- */

static pthread_once_t g_prelude_once = PTHREAD_ONCE_INIT;
static char *g_prelude;

static void build_prelude(void)
{
    tgc_strbuf sb = {0};
    if (tgc_c_prelude(&g_cuda, &sb) == TGC_OK)
        g_prelude = tgc_sb_take(&sb);
    else
        tgc_sb_free(&sb);
}

const char *tgc_cuda_prelude(void)
{
    pthread_once(&g_prelude_once, build_prelude);
    /* out of memory at the first call: a program that says so when it is compiled */
    return g_prelude ? g_prelude : "#error \"tgc cuda: out of memory building the prelude\"\n";
}

/* ---- the base, in CUDA ---- */

const char *tgc_cuda_compute_type(tgc_dtype dt)
{
    return tgc_c_compute_type(dt);
}

const char *tgc_cuda_storage_type(tgc_dtype dt)
{
    return tgc_c_storage_type(&g_cuda, dt);
}

tgc_status tgc_cuda_render_loop(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                const char *fname, tgc_cuda_launch *launch)
{
    return tgc_c_render_loop(&g_cuda, out, k, slots, fname, launch);
}

tgc_status tgc_cuda_render_vals(tgc_strbuf *out, const kir_kernel *k, const kir_args *slots,
                                const tgc_cuda_val_env *env, int32_t result, char *name,
                                size_t name_len, uint8_t *emitted)
{
    return tgc_c_render_vals(&g_cuda, out, k, slots, env, result, name, name_len, emitted);
}

tgc_status tgc_cuda_render_batch(tgc_strbuf *out, const kir_kernel *const *ks,
                                 const kir_args *const *slots, int n, const char *fname,
                                 tgc_cuda_launch *launches)
{
    return tgc_c_render_batch(&g_cuda, out, ks, slots, n, fname, launches);
}

void tgc_cuda_launch_dims(const tgc_cuda_launch *l, const kir_kernel *k, const int64_t *extents,
                          int sms, unsigned grid[3], unsigned block[3], unsigned *smem)
{
    tgc_c_launch_dims(l, k, extents, sms, grid, block, smem);
}

int64_t tgc_cuda_split_chunks(int64_t rows, int64_t len)
{
    return tgc_c_split_chunks(rows, len);
}

int tgc_cuda_split_dims(const tgc_cuda_launch *l, const kir_kernel *k, const int64_t *extents,
                        int sms, unsigned grid_part[3], unsigned grid_fin[3], size_t *scratch_bytes)
{
    return tgc_c_split_dims(l, k, extents, sms, grid_part, grid_fin, scratch_bytes);
}

char *tgc_cuda_render_program(const kir_kernel *const *ks, const kir_args *const *slots,
                              const char *const *names, int n, tgc_cuda_launch *launches)
{
    return tgc_c_render_program(&g_cuda, ks, slots, names, n, launches);
}
