/* The C-family renderer (backend/render_c.h) with dialect tables defined here: a HIP-like
 * table (64-lane warps and their shuffle, _Float16 storage, HIP's vector type and index
 * names, AMD's launch attribute and math library, clang's bit casts) renders the same
 * kernels as CUDA with its own spelling and warp numbers; a marked table (every string a
 * marker: render_dialects.h) shows that the base spells nothing itself, and, mapped back,
 * gives the CUDA dialect's text byte for byte. The dialect checks and their messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/render_c.h"
#include "ir/sym.h"
#include "kir/kir.h"
#include "support/error.h"
#include "support/strbuf.h"
#include "tgc/tgc.h"
#include "unit/render_dialects.h"
#include "unit/unit_test_util.h"
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_render.h"
#endif

/* ---- a HIP-like dialect ---- */

// clang-format off
static const char g_hip_f16[] =
    "TGC_DEV float tgc_h2f(_Float16 h) { return (float)h; }\n"
    "TGC_DEV _Float16 tgc_f2h(float f) { return (_Float16)f; }\n";
// clang-format on

static const tgc_c_math_fn g_hip_math[] = {
    {"fabs", "__builtin_fabsf", "__builtin_fabs"},
    {NULL, NULL, NULL},
};

static const tgc_c_dialect g_hip = {
    .name = "HIP",
    .tag = "hip",
    .kernel = "extern \"C\" __global__ void",
    .launch_bounds = "__attribute__((amdgpu_flat_work_group_size(1, %s)))",
    .device_fn = "static __device__ inline",
    .global = "",
    .restrict_ = "__restrict ",
    .shared = "__shared__ ",
    .barrier = "__syncthreads()",
    .thread_idx = "hipThreadIdx_x",
    .block_idx = "hipBlockIdx_x",
    .grid_dim = "hipGridDim_x",
    .warp_size = 64,
    .shfl_xor = "__shfl_xor(%s, %s, 64)",
    .block_threads = 256,
    .threads_per_sm = 2560,
    .f16_type = "_Float16",
    .bf16_type = "uint16_t",
    .i32_as_f32 = "__builtin_bit_cast(float, (int)(%s))",
    .u32_as_f32 = "__builtin_bit_cast(float, (unsigned)(%s))",
    .f32_as_u32 = "__builtin_bit_cast(unsigned, %s)",
    .i64_as_f64 = "__builtin_bit_cast(double, (long long)(%s))",
    .mulhi_u32 = "__umulhi(%s, %s)",
    .math_f32 = "__ocml_%s_f32",
    .math_f64 = "__ocml_%s_f64",
    .math_fns = g_hip_math,
    .vec_type = "HIP_vector_type<%s, %s>",
    .vec_lane = "%s.data[%s]",
    .prelude_head = "#include <hip/hip_runtime.h>\n",
    .prelude_f16 = g_hip_f16,
};

/* ---- kernels ---- */

static kir_store store_at(int32_t buf, int32_t val, tgc_dtype dt, int phase)
{
    kir_store st = {0};
    st.at.buf = buf;
    st.val = val;
    st.dtype = dt;
    st.phase = phase;
    return st;
}

/* out[i] = op(x[i]) over n elements of dt. */
static kir_kernel *unary_kernel(tgc_op op, tgc_sdim n, tgc_dtype dt)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_inner = 1;
    k->extent[0] = n;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, dt, 0), bo = kir_buf_of(k, 1, dt, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = 1;
    ld.dtype = dt;
    int32_t x = kir_add_load_val(k, &ld);
    kir_val e = {.kind = KV_OP, .op = op, .dtype = dt, .n_in = 1, .in = {x}};
    int32_t v = kir_add_val(k, &e);
    kir_store st = store_at(bo, v, dt, 0);
    st.at.stride[0] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

/* out[r] = comb_j x[r, j] over rows x len f32 (row store). */
static kir_kernel *row_kernel(int64_t rows, int64_t len, kir_combiner comb)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_outer = 1;
    k->n_inner = 1;
    k->extent[0] = rows;
    k->extent[1] = len;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, TGC_F32, 0), bo = kir_buf_of(k, 1, TGC_F32, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = len;
    ld.at.stride[1] = 1;
    ld.dtype = TGC_F32;
    int32_t x = kir_add_load_val(k, &ld);
    kir_reduce r = {comb, x, 0};
    int32_t ri = kir_add_reduce(k, &r);
    kir_val acc = {.kind = KV_ACC, .dtype = TGC_F32, .index = ri};
    int32_t av = kir_add_val(k, &acc);
    kir_store st = store_at(bo, av, TGC_F32, -1);
    st.at.stride[0] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

/* out[c] = sum_r x[r, c] over [n, cols] (a column reduction: the outer var is contiguous). */
static kir_kernel *column_kernel(int64_t n, int64_t cols)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_outer = 1;
    k->n_inner = 1;
    k->extent[0] = cols;
    k->extent[1] = n;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, TGC_F32, 0), bo = kir_buf_of(k, 1, TGC_F32, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = 1;
    ld.at.stride[1] = cols;
    ld.dtype = TGC_F32;
    int32_t x = kir_add_load_val(k, &ld);
    kir_reduce r = {KR_SUM, x, 0};
    int32_t ri = kir_add_reduce(k, &r);
    kir_val acc = {.kind = KV_ACC, .dtype = TGC_F32, .index = ri};
    int32_t av = kir_add_val(k, &acc);
    kir_store st = store_at(bo, av, TGC_F32, -1);
    st.at.stride[0] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

/* softmax over the rows of [rows, len] bf16: max (phase 0), sum of exp (1), store (2). */
static kir_kernel *softmax_kernel(int64_t rows, int64_t len)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_outer = 1;
    k->n_inner = 1;
    k->extent[0] = rows;
    k->extent[1] = len;
    k->n_phases = 3;
    const tgc_dtype dt = TGC_BF16;
    int32_t bx = kir_buf_of(k, 0, dt, 0), bo = kir_buf_of(k, 1, dt, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = len;
    ld.at.stride[1] = 1;
    ld.dtype = dt;
    int32_t x = kir_add_load_val(k, &ld);
    kir_reduce mx = {KR_MAX, x, 0};
    int32_t a0 =
        kir_add_val(k, &(kir_val){.kind = KV_ACC, .dtype = dt, .index = kir_add_reduce(k, &mx)});
    int32_t d = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_SUB, .dtype = dt, .n_in = 2, .in = {x, a0}});
    int32_t e = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_EXP, .dtype = dt, .n_in = 1, .in = {d}});
    kir_reduce sm = {KR_SUM, e, 1};
    int32_t a1 =
        kir_add_val(k, &(kir_val){.kind = KV_ACC, .dtype = dt, .index = kir_add_reduce(k, &sm)});
    int32_t q = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_DIV, .dtype = dt, .n_in = 2, .in = {e, a1}});
    kir_store st = store_at(bo, q, dt, 2);
    st.at.stride[0] = len;
    st.at.stride[1] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

/* out[i] = randn * 2 (f16) over n: a Philox draw. */
static kir_kernel *rand_kernel(int64_t n)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_inner = 1;
    k->extent[0] = n;
    k->n_phases = 1;
    int32_t bo = kir_buf_of(k, 1, TGC_F16, 1);
    kir_rand rd = {0};
    rd.at.stride[0] = 1;
    rd.numel = n;
    int32_t ri = kir_add_rand(k, &rd);
    kir_val rv = {.kind = KV_RAND, .dtype = TGC_F16, .index = ri, .dist = KIR_RAND_NORMAL};
    int32_t r = kir_add_val(k, &rv);
    int32_t m = kir_add_val(k, &(kir_val){.kind = KV_OP,
                                          .op = TGC_OP_MUL_SCALAR,
                                          .dtype = TGC_F16,
                                          .n_in = 1,
                                          .in = {r},
                                          .f = {2.0, 0}});
    kir_store st = store_at(bo, m, TGC_F16, 0);
    st.at.stride[0] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

/* out[i, j] = x[i, j - 1] (0 outside) + (i32) x[i, j] over [rows, 30] i32: a guarded tap. */
static kir_kernel *guarded_kernel(void)
{
    kir_kernel *k = kir_kernel_new(KIR_LOOP);
    assert_non_null(k);
    k->n_inner = 2;
    k->extent[0] = 7;
    k->extent[1] = 30;
    k->n_phases = 1;
    int32_t bx = kir_buf_of(k, 0, TGC_I32, 0), bo = kir_buf_of(k, 1, TGC_I32, 1);
    kir_load ld = {0};
    ld.at.buf = bx;
    ld.at.stride[0] = 30;
    ld.at.stride[1] = 1;
    ld.dtype = TGC_I32;
    int32_t x = kir_add_load_val(k, &ld);
    ld.at.off = -1;
    ld.n_guards = 1;
    ld.guard[0].off = -1;
    ld.guard[0].stride[1] = 1;
    ld.bound[0] = 30;
    ld.fill = 0;
    int32_t xl = kir_add_load_val(k, &ld);
    int32_t s = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_ADD, .dtype = TGC_I32, .n_in = 2, .in = {x, xl}});
    kir_store st = store_at(bo, s, TGC_I32, 0);
    st.at.stride[0] = 30;
    st.at.stride[1] = 1;
    assert_true(kir_add_store(k, &st) >= 0);
    return k;
}

typedef struct named_kernel {
    const char *name;
    kir_kernel *k;
} named_kernel;

/* The hand-built kernels every dialect renders (tgc_symtab for the symbolic one). */
static int corpus(named_kernel *ks, tgc_symtab *syms)
{
    int n = 0;
    ks[n++] = (named_kernel){"kexp", unary_kernel(TGC_OP_EXP, 1 << 20, TGC_F32)};
    ks[n++] = (named_kernel){"kh", unary_kernel(TGC_OP_EXP, 4096, TGC_F16)};
    ks[n++] = (named_kernel){"ko", unary_kernel(TGC_OP_TANH, 1001, TGC_F32)};
    ks[n++] =
        (named_kernel){"kd", unary_kernel(TGC_OP_ERF, tgc_sym_new(syms, 1000, 0, 0), TGC_F64)};
    ks[n++] = (named_kernel){"kabs", unary_kernel(TGC_OP_ABS, 64, TGC_F32)};
    ks[n++] = (named_kernel){"krs", row_kernel(64, 4096, KR_SUM)};
    ks[n++] = (named_kernel){"kmax", row_kernel(64, 100, KR_MAX)};
    ks[n++] = (named_kernel){"ksp", row_kernel(1, (int64_t)1 << 24, KR_SUM)};
    ks[n++] = (named_kernel){"kcol", column_kernel(4096, 64)};
    ks[n++] = (named_kernel){"ksm", softmax_kernel(16, 1000)};
    ks[n++] = (named_kernel){"krand", rand_kernel(4096)};
    ks[n++] = (named_kernel){"kgd", guarded_kernel()};
    return n;
}

static char *render(const tgc_c_dialect *d, const kir_kernel *k, const char *name, tgc_c_launch *l)
{
    kir_args a = {0};
    assert_int_equal(kir_args_collect(k, &a), TGC_OK);
    tgc_strbuf sb = {0};
    if (tgc_c_render_loop(d, &sb, k, &a, name, l) != TGC_OK)
        fail_msg("%s: %s", name, tgc_last_error());
    kir_args_free(&a);
    char *t = tgc_sb_take(&sb);
    assert_non_null(t);
    return t;
}

static char *prelude_of(const tgc_c_dialect *d)
{
    tgc_strbuf sb = {0};
    assert_int_equal(tgc_c_prelude(d, &sb), TGC_OK);
    char *t = tgc_sb_take(&sb);
    assert_non_null(t);
    return t;
}

static int lines(const char *t)
{
    int n = 0;
    for (; *t; t++)
        n += *t == '\n';
    return n;
}

static void has(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("the text lacks \"%s\":\n%s", part, text);
}

static void lacks(const char *text, const char *part)
{
    if (strstr(text, part))
        fail_msg("the text holds \"%s\":\n%s", part, text);
}

/* ---- the marked dialect: no spelling in the base ---- */

/* Every kernel and the prelude rendered with the marked table hold no CUDA spelling, and
 * (CUDA builds) spell CUDA's text exactly once the markers are mapped back. */
static void base_spells_nothing_itself(void **state)
{
    (void)state;
    tgc_symtab *syms = tgc_symtab_create();
    named_kernel ks[16];
    int n = corpus(ks, syms);
    char *mp = prelude_of(marked_dialect());
    no_cuda_spelling(mp);
#ifdef TGC_HAVE_CUDA
    char *cm = marked_to_cuda(mp, tgc_cuda_dialect());
    assert_string_equal(cm, tgc_cuda_prelude());
    free(cm);
#endif
    free(mp);
    for (int i = 0; i < n; i++) {
        tgc_c_launch lm;
        char *m = render(marked_dialect(), ks[i].k, ks[i].name, &lm);
        no_cuda_spelling(m);
#ifdef TGC_HAVE_CUDA
        tgc_c_launch lc;
        char *c = render(tgc_cuda_dialect(), ks[i].k, ks[i].name, &lc);
        char *back = marked_to_cuda(m, tgc_cuda_dialect());
        assert_string_equal(back, c);
        assert_memory_equal(&lm, &lc, sizeof lm);
        free(back);
        free(c);
#endif
        free(m);
        kir_kernel_free(ks[i].k);
    }
    tgc_symtab_free(syms);
}

/* ---- the HIP-like dialect ---- */

static void hip_prelude(void **state)
{
    (void)state;
    char *t = prelude_of(&g_hip);
    has(t, "/* tgc HIP prelude */\n#ifndef TGC_HIP_PRELUDE\n#define TGC_HIP_PRELUDE 1\n"
           "#include <hip/hip_runtime.h>\n");
    has(t, "#define TGC_DEV static __device__ inline\n");
    has(t, "TGC_DEV float tgc_inf_f() { return __builtin_bit_cast(float, (int)(0x7f800000)); }");
    /* its f16 piece over _Float16, the base's bf16 through its bit casts */
    has(t, "TGC_DEV _Float16 tgc_f2h(float f) { return (_Float16)f; }");
    has(t, "TGC_DEV float tgc_bf2f(uint16_t h) { return __builtin_bit_cast(float, "
           "(unsigned)((unsigned)h << 16)); }");
    has(t, "unsigned hi0 = __umulhi(0xD2511F53u, c0)");
    /* AMD's math library, the dialect's names */
    has(t, "return x == -tgc_inf_f() ? tgc_inf_f() : __ocml_sqrt_f32(x + 0.0f); }");
    has(t, "double r = __ocml_sqrt_f64(-2.0 * __ocml_log_f64(1.0 - u1));");
    has(t, "return __ocml_pow_f64(x, y); }");
    /* composite ops have no prelude helper: lowering expands their formulas */
    lacks(t, "tgc_sigmoid");
    lacks(t, "tgc_gelu");
    /* 64-lane butterflies */
    has(t, "for (int o = 32; o > 0; o >>= 1) v += __shfl_xor(v, o, 64);");
    has(t, "for (int o = 32; o > 0; o >>= 1) { T w = __shfl_xor(v, o, 64);");
    has(t, "#endif /* TGC_HIP_PRELUDE */\n");
    static const char *const cuda[] = {
        "__shfl_xor_sync", "asm(", "__int_as_float", "expf(", "tgc_vec", "__forceinline__", "CUDA"};
    for (int i = 0; i < N_OF(cuda); i++)
        lacks(t, cuda[i]);
    free(t);
}

static void hip_pointwise_kernels(void **state)
{
    (void)state;
    tgc_c_launch l;
    kir_kernel *k = unary_kernel(TGC_OP_EXP, 1 << 20, TGC_F32);
    char *t = render(&g_hip, k, "kexp", &l);
    has(t, "extern \"C\" __global__ void __attribute__((amdgpu_flat_work_group_size(1, 256))) "
           "kexp(kexp_b b, kexp_s s)");
    has(t, "template <typename I>\nstatic __device__ inline void kexp_run(");
    has(t, "const float *__restrict B0 = (const float *)b.p[0];");
    has(t, "const I step_ = (I)hipGridDim_x * (I)256;");
    has(t, "I t_ = (I)hipBlockIdx_x * (I)256 + (I)hipThreadIdx_x;");
    has(t, "const HIP_vector_type<float, 4> L0 = *(const HIP_vector_type<float, 4> *)(B0 + ");
    has(t, "const float v0_3 = L0.data[3];");
    has(t, "const float v1_3 = __ocml_exp_f32(v0_3);");
    has(t, "S0.data[3] = v1_3;");
    has(t, "*(HIP_vector_type<float, 4> *)(B1 + ");
    assert_int_equal(l.vec, 4);
    assert_int_equal(l.warp_size, 64);
    assert_int_equal(l.block_threads, 256);
    assert_int_equal(l.blocks_per_sm, 10);
    /* 2^20 / 4 per thread / 256 = 1024 blocks, capped at 10 per multiprocessor */
    unsigned grid[3], block[3], smem = 1;
    int64_t ext[1] = {1 << 20};
    tgc_c_launch_dims(&l, k, ext, 100, grid, block, &smem);
    assert_int_equal(grid[0], 1000);
    assert_int_equal(block[0], 256);
    assert_int_equal(smem, 0);
    free(t);
    kir_kernel_free(k);
    /* f16 stored as _Float16, 8 lanes */
    k = unary_kernel(TGC_OP_EXP, 4096, TGC_F16);
    t = render(&g_hip, k, "kh", &l);
    assert_int_equal(l.vec, 8);
    has(t, "const _Float16 *__restrict B0 = (const _Float16 *)b.p[0];");
    has(t, "HIP_vector_type<_Float16, 8>");
    has(t, "tgc_round_h(__ocml_exp_f32(");
    free(t);
    kir_kernel_free(k);
    /* a math name from the dialect's exceptions, the f64 template */
    k = unary_kernel(TGC_OP_ABS, 64, TGC_F32);
    t = render(&g_hip, k, "kabs", &l);
    has(t, "__builtin_fabsf(");
    free(t);
    kir_kernel_free(k);
    k = unary_kernel(TGC_OP_ERF, 64, TGC_F64);
    t = render(&g_hip, k, "kerf", &l);
    has(t, "__ocml_erf_f64(");
    free(t);
    kir_kernel_free(k);
}

static void hip_reductions_use_64_lane_warps(void **state)
{
    (void)state;
    tgc_c_launch l;
    kir_kernel *k = row_kernel(64, 4096, KR_SUM);
    char *t = render(&g_hip, k, "krs", &l);
    assert_int_equal(l.shape, TGC_C_SHAPE_ROWS);
    has(t, "    __shared__ double red0_[4];\n");
    has(t, "const int tpr_ = l_ <= (I)128 ? 64 : 256;");
    has(t, "const I lane_ = (I)((int)hipThreadIdx_x % tpr_);");
    has(t, "a0 = tgc_warp_sum(a0);");
    has(t, "if ((hipThreadIdx_x & 63u) == 0u) red0_[hipThreadIdx_x >> 6] = a0;");
    has(t, "for (int w_ = 1; w_ < 4; w_++) {");
    has(t, "            __syncthreads();\n");
    unsigned grid[3], block[3], smem;
    int64_t ext[2] = {64, 4096};
    tgc_c_launch_dims(&l, k, ext, 132, grid, block, &smem);
    assert_int_equal(grid[0], 64); /* a block per long row */
    ext[1] = 100;
    tgc_c_launch_dims(&l, k, ext, 132, grid, block, &smem);
    assert_int_equal(grid[0], 16); /* a 64-lane warp per short row: 4 rows per block */
    free(t);
    kir_kernel_free(k);
    /* column reductions: a thread per row for many rows */
    k = column_kernel(4096, 4096);
    t = render(&g_hip, k, "kcol", &l);
    assert_int_equal(l.column, 1);
    has(t, "const int tpr_ = rows_ >= (I)2048 ? 1 : (l_ <= (I)128 ? 64 : 256);");
    free(t);
    kir_kernel_free(k);
    /* the split pair: 64-lane warps finish up to 128 chunks */
    k = row_kernel(1, (int64_t)1 << 24, KR_SUM);
    t = render(&g_hip, k, "ksp", &l);
    assert_int_equal(l.split, 1);
    has(t, "__attribute__((amdgpu_flat_work_group_size(1, 256))) ksp_part(ksp_pb b, ksp_s s)");
    has(t, "for (I blk_ = (I)hipBlockIdx_x; blk_ < rows_ * chunks_; blk_ += (I)hipGridDim_x) {");
    has(t, "const int tpr_ = chunks_ <= (I)128 ? 64 : 256;");
    has(t, "if (hipThreadIdx_x == 0u) {");
    unsigned gp[3], gf[3];
    size_t scratch = 0;
    int64_t e8[2] = {8, 1 << 20}; /* 128 chunks a row: a warp each, 4 rows per block */
    assert_int_equal(tgc_c_split_dims(&l, k, e8, 132, gp, gf, &scratch), 1);
    assert_int_equal(gp[0], 8 * 128);
    assert_int_equal(gf[0], 2);
    assert_int_equal(scratch, 8 * 128 * 8);
    free(t);
    kir_kernel_free(k);
}

/* Every kernel of the corpus has the same shape in HIP-like and marked spellings (line for
 * line), the launch the same except for the warp and the blocks per multiprocessor. */
static void hip_renders_the_same_kernels(void **state)
{
    (void)state;
    tgc_symtab *syms = tgc_symtab_create();
    named_kernel ks[16];
    int n = corpus(ks, syms);
    for (int i = 0; i < n; i++) {
        tgc_c_launch lh, lm;
        char *h = render(&g_hip, ks[i].k, ks[i].name, &lh);
        char *m = render(marked_dialect(), ks[i].k, ks[i].name, &lm);
        assert_int_equal(lines(h), lines(m));
        assert_int_equal(lh.shape, lm.shape);
        assert_int_equal(lh.vec, lm.vec);
        assert_int_equal(lh.column, lm.column);
        assert_int_equal(lh.split, lm.split);
        assert_int_equal(lh.warp_size, 64);
        assert_int_equal(lm.warp_size, 32);
        free(h);
        free(m);
        kir_kernel_free(ks[i].k);
    }
    tgc_symtab_free(syms);
}

/* A GEMM epilogue through the value renderer: loads cast the buffers with the dialect's
 * storage types and global prefix. */
static void epilogue_values_in_a_dialect(void **state)
{
    (void)state;
    kir_kernel *k = kir_kernel_new(KIR_GEMM);
    assert_non_null(k);
    k->tpl.dtype = k->tpl.acc_dtype = k->tpl.out_dtype = TGC_F16;
    int32_t a = kir_add_val(k, &(kir_val){.kind = KV_ACC, .dtype = TGC_F16, .index = 0});
    kir_load ld = {0};
    ld.at.buf = kir_buf_of(k, 7, TGC_F16, 0);
    ld.at.stride[2] = 1;
    ld.dtype = TGC_F16;
    int32_t bv = kir_add_load_val(k, &ld);
    int32_t s = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_ADD, .dtype = TGC_F16, .n_in = 2, .in = {a, bv}});
    int32_t r = kir_add_val(
        k, &(kir_val){.kind = KV_OP, .op = TGC_OP_SQRT, .dtype = TGC_F16, .n_in = 1, .in = {s}});
    k->result = r;
    kir_args sl = {0};
    assert_int_equal(kir_args_collect(k, &sl), TGC_OK);
    tgc_c_val_env env = {.acc = {"acc_"}, .var = {"bb", "mm", "nn"}, .prefix = "e_"};
    uint8_t emitted[8] = {0};
    char name[32];
    tgc_strbuf sb = {0};
    assert_int_equal(tgc_c_render_vals(&g_hip, &sb, k, &sl, &env, r, name, sizeof name, emitted),
                     TGC_OK);
    assert_string_equal(name, "e_3");
    char *t = tgc_sb_take(&sb);
    has(t, "const float e_1 = tgc_h2f(((const _Float16 *)b.p[0])[((long long)(nn))]);");
    has(t, "const float e_3 = tgc_round_h(__ocml_sqrt_f32(e_2));");
    free(t);
    memset(emitted, 0, sizeof emitted);
    assert_int_equal(
        tgc_c_render_vals(marked_dialect(), &sb, k, &sl, &env, r, name, sizeof name, emitted),
        TGC_OK);
    t = tgc_sb_take(&sb);
    has(t, "tgc_h2f(((GLOBAL_ const HALF_T *)b.p[0])[((long long)(nn))]);");
    no_cuda_spelling(t);
    free(t);
    kir_args_free(&sl);
    kir_kernel_free(k);
}

/* ---- errors ---- */

static void check_bad_dialect(const tgc_c_dialect *d, const char *text)
{
    kir_kernel *k = unary_kernel(TGC_OP_EXP, 64, TGC_F32);
    kir_args a = {0};
    assert_int_equal(kir_args_collect(k, &a), TGC_OK);
    tgc_strbuf sb = {0};
    tgc_c_launch l;
    check_error(tgc_c_render_loop(d, &sb, k, &a, "k", &l), TGC_ERR_INVALID_ARG, text);
    assert_int_equal(sb.len, 0);
    check_error(tgc_c_prelude(d, &sb), TGC_ERR_INVALID_ARG, text);
    assert_int_equal(sb.len, 0);
    uint8_t emitted[4] = {0};
    char name[16];
    tgc_c_val_env env = {.var = {"x"}};
    check_error(tgc_c_render_vals(d, &sb, k, &a, &env, 0, name, sizeof name, emitted),
                TGC_ERR_INVALID_ARG, text);
    assert_null(tgc_c_render_program(d, (const kir_kernel *const[]){k},
                                     (const kir_args *const[]){&a}, (const char *const[]){"k"}, 1,
                                     NULL));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    kir_args_free(&a);
    tgc_sb_free(&sb);
    kir_kernel_free(k);
}

static void dialects_the_base_cannot_use(void **state)
{
    (void)state;
    check_bad_dialect(NULL, "tgc render: no dialect table");
    tgc_c_dialect d = g_hip;
    d.warp_size = 48;
    check_bad_dialect(&d, "tgc hip: dialect HIP: warp_size is not a power of two of at least 2");
    d = g_hip;
    d.block_threads = 96;
    check_bad_dialect(&d, "tgc hip: dialect HIP: block_threads is not a multiple of warp_size");
    d = g_hip;
    d.threads_per_sm = 128;
    check_bad_dialect(&d, "tgc hip: dialect HIP: threads_per_sm is below block_threads");
    d = g_hip;
    d.shfl_xor = "__shfl_xor(%s)";
    check_bad_dialect(&d, "tgc hip: dialect HIP: shfl_xor is \"__shfl_xor(%s)\": a template of "
                          "2 \"%s\"");
    d = g_hip;
    d.vec_lane = "%s.data[%d]";
    check_bad_dialect(&d, "tgc hip: dialect HIP: vec_lane is \"%s.data[%d]\": a template of 2");
    d = g_hip;
    d.prelude_f16 = NULL;
    check_bad_dialect(&d, "tgc hip: dialect HIP: prelude_f16 is NULL");
    static const tgc_c_math_fn half_entry[] = {{"exp", "my_expf", NULL}, {NULL, NULL, NULL}};
    d = g_hip;
    d.math_fns = half_entry;
    check_bad_dialect(&d, "math_fns has an entry without its f32 or f64 name");
    /* a launch bound is optional: none, no attribute */
    d = g_hip;
    d.launch_bounds = NULL;
    kir_kernel *k = unary_kernel(TGC_OP_EXP, 64, TGC_F32);
    tgc_c_launch l;
    char *t = render(&d, k, "kn", &l);
    has(t, "extern \"C\" __global__ void kn(kn_b b, kn_s s)\n");
    free(t);
    kir_kernel_free(k);
}

static void kernels_the_base_cannot_render(void **state)
{
    (void)state;
    /* exp of an i32: no integer form, named by the dialect */
    kir_kernel *k = unary_kernel(TGC_OP_EXP, 64, TGC_I32);
    kir_args a = {0};
    assert_int_equal(kir_args_collect(k, &a), TGC_OK);
    tgc_strbuf sb = {0};
    tgc_c_launch l;
    char want[96];
    snprintf(want, sizeof want, "tgc hip: kernel k%d: the HIP renderer has no exp for i32", k->id);
    check_error(tgc_c_render_loop(&g_hip, &sb, k, &a, "k", &l), TGC_ERR_COMPILE, want);
    check_error(tgc_c_render_loop(&g_hip, NULL, k, &a, "k", &l), TGC_ERR_INVALID_ARG,
                "tgc hip: rendering a LOOP kernel needs out, k, slots, fname and launch");
    kir_args_free(&a);
    tgc_sb_free(&sb);
    kir_kernel_free(k);
    /* a template kernel is not a LOOP kernel; values it lacks */
    k = kir_kernel_new(KIR_GEMM);
    assert_non_null(k);
    kir_args_collect(k, &a);
    check_error(tgc_c_render_loop(&g_hip, &sb, k, &a, "k", &l), TGC_ERR_INVALID_ARG,
                "is a template, not a LOOP kernel");
    uint8_t emitted[1] = {0};
    char name[8];
    tgc_c_val_env env = {0};
    check_error(tgc_c_render_vals(&g_hip, &sb, k, &a, &env, 3, name, sizeof name, emitted),
                TGC_ERR_INVALID_ARG, "has no value 3 (it has 0)");
    kir_args_free(&a);
    tgc_sb_free(&sb);
    kir_kernel_free(k);
}

/* A whole program: the prelude, a blank line, the kernels in order. */
static void programs(void **state)
{
    (void)state;
    kir_kernel *k0 = unary_kernel(TGC_OP_EXP, 256, TGC_F32), *k1 = row_kernel(8, 64, KR_MAX);
    kir_args a0 = {0}, a1 = {0};
    assert_int_equal(kir_args_collect(k0, &a0), TGC_OK);
    assert_int_equal(kir_args_collect(k1, &a1), TGC_OK);
    tgc_c_launch ls[2];
    char *t = tgc_c_render_program(&g_hip, (const kir_kernel *const[]){k0, k1},
                                   (const kir_args *const[]){&a0, &a1},
                                   (const char *const[]){"p0", "p1"}, 2, ls);
    assert_non_null(t);
    char *p = prelude_of(&g_hip);
    assert_memory_equal(t, p, strlen(p));
    assert_int_equal(t[strlen(p)], '\n');
    const char *f0 = strstr(t, " p0(p0_b b, p0_s s)"), *f1 = strstr(t, " p1(p1_b b, p1_s s)");
    assert_non_null(f0);
    assert_non_null(f1);
    assert_true(f0 < f1);
    assert_int_equal(ls[0].shape, TGC_C_SHAPE_FLAT);
    assert_int_equal(ls[1].shape, TGC_C_SHAPE_ROWS);
    free(p);
    free(t);
    kir_args_free(&a0);
    kir_args_free(&a1);
    kir_kernel_free(k0);
    kir_kernel_free(k1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(base_spells_nothing_itself, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(hip_prelude, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(hip_pointwise_kernels, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(hip_reductions_use_64_lane_warps, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(hip_renders_the_same_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(epilogue_values_in_a_dialect, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(dialects_the_base_cannot_use, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(kernels_the_base_cannot_render, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(programs, scoped_setup, scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
