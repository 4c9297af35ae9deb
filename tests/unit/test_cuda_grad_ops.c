/* The CUDA backend's kernels for the backward ops (conv2d input / weight gradients, pool
 * gradients, scatter-adds): src/backend/cuda/cuda_conv_grad.h and cuda_ops.c.
 *
 * Everywhere (NVRTC is in the toolkit; compiles counted as skipped when libnvrtc cannot be
 * opened): every conv-grad program (SIMT, TF32 and bf16 modes, both tile variants) compiles
 * for sm_90 with its mode's instruction and entry points; the embedded library is its .cuh;
 * the native-op program defines the backward kernels; the launch plans (tile variant, split-K
 * and its workspace, the geometry limits) for ResNet-like shapes. With TGC_CG_EMIT_DIR set,
 * the programs are written there for tools/gemm_emu/conv_grad_emu.sh (the CPU emulator).
 *
 * With a GPU (skipped through gpu_skip.h otherwise): each backward op on odd shapes
 * (strides, padding, dilation, groups, depthwise, non-contiguous dy, channels-last x and dy
 * (both, and each alone), f16 / f64 through the generic kernels; max-pool ties and NaN;
 * exclude_padding; adaptive windows; repeated and out-of-range indices) eager and compiled on
 * cuda:0 against interp on the CPU, with gpu_test_util.h's tolerances; conv grads run twice and
 * must give the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "gpu_test_util.h"
#include "unit_test_util.h"

#ifdef TGC_HAVE_CUDA

#include <math.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_conv_grad.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/eager.h"
#include "backend/plan.h"
#include "frontend/ops_grad.h"
#include "ir/op.h"
#include "tensor/tensor_impl.h"
#include "tgc/cuda.h"

#ifdef TGC_CUDA_OPS_EMU
/* tests/cuda_emu (run_grad_ops_emu.sh): the native-op kernels on the CPU, device memory on
 * the host; only the direct tgc_cuda_op_run path exists there (no driver: no eager or
 * compiled CUDA calls, no conv-grad templates, whose emulator is tools/gemm_emu) */
void tgc_ops_emu_init(void);
static const int g_emu = 1;
#else
static const int g_emu = 0;
#endif

static int g_nvrtc_skipped;

/* ---- (a) the programs, without a GPU ---- */

static void emit(const char *name, const char *text)
{
    const char *dir = getenv("TGC_CG_EMIT_DIR");
    if (!dir || !*dir)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static void conv_grad_programs_compile(void **state)
{
    (void)state;
    assert_null(tgc_cuda_conv_grad_source(TGC_CUDA_TPL_SIMT, 1));
    assert_null(tgc_cuda_conv_grad_source(TGC_CUDA_TPL_SIMT, 2));
    assert_null(tgc_cuda_conv_grad_source(TGC_CUDA_TPL_BF16X, 2));
    assert_null(tgc_cuda_conv_grad_source(TGC_CUDA_TPL_TF32, 4));
    assert_null(tgc_cuda_conv_grad_source(3, 0));
    assert_null(tgc_cuda_conv_grad_source(-1, 0));
    for (int mode = 0; mode < 3; mode++)
        for (int v = 0; v < 4; v++) {
            if ((mode == TGC_CUDA_TPL_SIMT && v) || (mode != TGC_CUDA_TPL_TF32 && v > 1))
                continue;
            const int wg = v >= 2; /* the wgmma variants (sm_90a) */
            char *src = tgc_cuda_conv_grad_source(mode, v);
            assert_non_null(src);
            char name[64];
            snprintf(name, sizeof name, "cg_m%d_v%d.cu", mode, v);
            emit(name, src);
            if (tgc_nvrtc_load() != TGC_OK) {
                g_nvrtc_skipped++;
                free(src);
                continue;
            }
            char *cubin = NULL, *ptx = NULL;
            size_t n = 0;
            if (tgc_nvrtc_compile(name, src, 90, &cubin, &n, &ptx) != TGC_OK)
                fail_msg("%s", tgc_last_error());
            assert_true(n > 0);
            int tf32 = strstr(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != NULL;
            int bf16 = strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL;
            assert_int_equal(tf32, mode == TGC_CUDA_TPL_TF32 && !wg);
            assert_int_equal(bf16, mode == TGC_CUDA_TPL_BF16X);
            /* 128-row tiles: two warpgroups along M with 128 columns each; 64-row tiles: two
             * side by side along N, 64 columns each */
            const char *wgmma = v == 2   ? "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"
                                : v == 3 ? "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"
                                         : "wgmma.mma_async";
            assert_int_equal(strstr(ptx, wgmma) != NULL, wg);
            if (mode == TGC_CUDA_TPL_SIMT)
                assert_non_null(strstr(ptx, "fma.rn.f32"));
            assert_non_null(strstr(ptx, "cp.async"));
            assert_non_null(strstr(ptx, ".entry tgc_cg_dgrad"));
            assert_non_null(strstr(ptx, ".entry tgc_cg_wgrad"));
            assert_non_null(strstr(ptx, ".entry tgc_cg_pack"));
            /* the channels-last entries: dgrad everywhere, wgrad but for the wgmma tiles */
            assert_non_null(strstr(ptx, ".entry tgc_cg_dgrad_cl"));
            assert_int_equal(strstr(ptx, ".entry tgc_cg_wgrad_cl") != NULL, !wg);
            /* deterministic: no float atomics anywhere (the split-K counters are integers) */
            assert_null(strstr(ptx, "atom.global.add.f32"));
            assert_null(strstr(ptx, "red.global.add.f32"));
            free(cubin);
            free(ptx);
            free(src);
        }
}

static char *read_source(const char *rel)
{
    char path[1024];
    const char *me = __FILE__, *cut = strstr(me, "tests/unit/test_cuda_grad_ops.c");
    if (!cut)
        return NULL;
    snprintf(path, sizeof path, "%.*s%s", (int)(cut - me), me, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

/* the conv-grad library embedded in every program is the checked-in .cuh */
static void embedded_library_matches_its_source(void **state)
{
    (void)state;
    char *want = read_source("src/backend/cuda/cuda_conv_grad_lib.cuh");
    if (!want)
        skip();
    char *src = tgc_cuda_conv_grad_source(TGC_CUDA_TPL_TF32, 0);
    assert_non_null(src);
    if (!strstr(src, want))
        fail_msg("the embedded cuda_conv_grad_lib.cuh is stale: rebuild");
    free(want);
    free(src);
}

/* the native-op program has the backward kernels the host launches */
static void ops_program_has_backward_kernels(void **state)
{
    (void)state;
    static const char *const want[] = {"tgc_ops_conv2d_grad_input", "tgc_ops_conv2d_grad_weight",
                                       "tgc_ops_pool2d_grad",       "tgc_ops_pool2d_grad_f32",
                                       "tgc_ops_index_add",         "tgc_ops_gather_grad"};
    int n;
    const char *const *names = tgc_cuda_ops_kernel_names(&n);
    char *src = tgc_cuda_ops_source();
    assert_non_null(src);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= strcmp(names[i], want[k]) == 0;
        if (!found)
            fail_msg("%s is not in the kernel table", want[k]);
        char def[128];
        snprintf(def, sizeof def, "__global__ void %s(", want[k]);
        if (!strstr(src, def))
            fail_msg("%s is not defined by the program", want[k]);
    }
    free(src);
}

/* every backward op has a native kernel (no staging through the host) */
static void backward_ops_are_supported(void **state)
{
    (void)state;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        if (tgc_op_info_of((tgc_op)op)->kind != TGC_KIND_GRAD)
            continue;
        tgc_node nd;
        memset(&nd, 0, sizeof nd);
        nd.op = (tgc_op)op;
        for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++) {
            nd.out.dtype = (tgc_dtype)dt;
            assert_int_equal(tgc_cuda_op_supported(&nd), 1);
        }
    }
}

/* the persistent cubin cache the conv-grad programs share with the backend's kernels */
static void disk_cache_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_cg_cacheXXXXXX";
    assert_non_null(mkdtemp(dir));
    const char img[] = "not really a cubin";
    char *got = NULL;
    size_t n = 0;
    assert_int_equal(tgc_cuda_program_disk_load(dir, 90, "program A", &got, &n), 0);
    tgc_cuda_program_disk_store(dir, 90, "program A", img, sizeof img);
    assert_int_equal(tgc_cuda_program_disk_load(dir, 90, "program A", &got, &n), 1);
    assert_int_equal(n, sizeof img);
    assert_memory_equal(got, img, sizeof img);
    free(got);
    assert_int_equal(tgc_cuda_program_disk_load(dir, 80, "program A", &got, &n),
                     0); /* other arch */
    assert_int_equal(tgc_cuda_program_disk_load(dir, 90, "program B", &got, &n), 0);
    assert_int_equal(tgc_cuda_program_disk_load(NULL, 90, "program A", &got, &n), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static tgc_cg_args cg(int wgrad, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k,
                      int64_t s, int64_t p, int64_t groups)
{
    tgc_cg_args a;
    memset(&a, 0, sizeof a);
    a.wgrad = wgrad;
    a.n = n;
    a.c = c;
    a.h = h;
    a.w = w;
    a.o = o;
    a.kh = a.kw = k;
    a.sh = a.sw = s;
    a.ph = a.pw = p;
    a.dh = a.dw = 1;
    a.groups = groups;
    a.oh = (h + 2 * p - (k - 1) - 1) / s + 1;
    a.ow = (w + 2 * p - (k - 1) - 1) / s + 1;
    return a;
}

static void launch_plans(void **state)
{
    (void)state;
    tgc_cg_launch l;
    int th;
    unsigned sd, sw;
    /* ResNet18 layer1 wgrad at batch 64: few tiles, long K: split over K */
    tgc_cg_args a = cg(1, 64, 64, 32, 32, 64, 3, 1, 1, 1);
    assert_true(tgc_cuda_conv_grad_fits(&a));
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 80, 132, &l);
    assert_int_equal(l.mode, TGC_CUDA_TPL_TF32);
    assert_int_equal(l.variant, 1);  /* 64 output channels: 64-row tiles */
    assert_int_equal(l.grid[0], 5);  /* 576 = 64 x 3 x 3 columns in 128-wide tiles */
    assert_int_equal(l.grid[1], 53); /* ~2 blocks per SM */
    assert_int_equal(l.grid[2], 1);
    assert_int_equal(l.zero_bytes, 256);
    assert_int_equal(l.ws_bytes, 256 + (size_t)5 * 53 * 64 * 128 * 4);
    assert_int_equal(l.packed, 0);
    /* the same on sm_90: wgrad stays on mma.sync (measured faster there) */
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 90, 132, &l);
    assert_int_equal(l.mode, TGC_CUDA_TPL_TF32);
    assert_int_equal(l.variant, 1);
    assert_int_equal(l.grid[1], 53);
    /* its dgrad on sm_90: the wgmma variant of 64-row tiles (one slab, two warpgroups along
     * N: 256 threads); on sm_80 mma.sync's (128 threads) */
    a.wgrad = 0;
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 90, 132, &l);
    assert_int_equal(l.variant, 3);
    assert_int_equal(l.threads, 256);
    assert_int_equal(l.grid[0], 64 * 32 * 32 / 128);
    assert_int_equal(l.grid[1], 1);
    tgc_cuda_conv_grad_config(TGC_CUDA_TPL_TF32, 3, 0, &th, &sd, &sw);
    assert_int_equal(l.smem, sd);
    assert_int_equal(sd, 4 * (64 + 128) * 32 * 4 + 1024);
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 80, 132, &l);
    assert_int_equal(l.variant, 1);
    assert_int_equal(l.threads, 128);
    /* channels-last: the same tiles, the stages of its loaders (dgrad's B K-major, padded;
     * wgrad's A and B MN-major, padded by 8 for mma.sync); wgmma tiles have no such wgrad */
    a.cl = 1;
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 80, 132, &l);
    tgc_cuda_conv_grad_config(TGC_CUDA_TPL_TF32, 1, 1, &th, &sd, &sw);
    assert_int_equal(l.smem, sd);
    assert_int_equal(sd, 3 * (64 * 36 + 128 * 36) * 4);
    assert_int_equal(sw, 3 * (32 * 72 + 32 * 136) * 4);
    tgc_cuda_conv_grad_config(TGC_CUDA_TPL_TF32, 3, 1, &th, &sd, &sw);
    assert_int_equal(sd, 4 * (64 + 128) * 32 * 4 + 1024);
    assert_int_equal(sw, 0);
    a.cl = 0;
    /* layer4 wgrad: enough tiles, no split */
    a = cg(1, 64, 512, 4, 4, 512, 3, 1, 1, 1);
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_MEDIUM, 90, 132, &l);
    assert_int_equal(l.mode, TGC_CUDA_TPL_BF16X);
    assert_int_equal(l.variant, 0);
    assert_int_equal(l.grid[0], 4 * 36);
    assert_int_equal(l.grid[1], 1);
    assert_int_equal(l.ws_bytes, 0);
    /* its dgrad at HIGH on sm_90: the 128-row wgmma tiles (two warpgroups along M) */
    a.wgrad = 0;
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGH, 90, 132, &l);
    assert_int_equal(l.variant, 2);
    assert_int_equal(l.threads, 256);
    assert_int_equal(l.grid[0], 4 * (64 * 4 * 4 / 128));
    assert_int_equal(l.grid[1], 9); /* 32 tiles: split over K, about two blocks per SM */
    tgc_cuda_conv_grad_config(TGC_CUDA_TPL_TF32, 2, 0, &th, &sd, &sw);
    assert_int_equal(l.smem, sd);
    assert_int_equal(sd, 4 * (128 + 128) * 32 * 4 + 1024);
    /* a stride-2 dgrad: one GEMM per (group, phase); the weights packed */
    a = cg(0, 64, 64, 32, 32, 128, 3, 2, 1, 1);
    assert_true(tgc_cuda_conv_grad_fits(&a));
    tgc_cuda_conv_grad_plan(&a, TGC_PRECISION_HIGHEST, 90, 132, &l);
    assert_int_equal(l.mode, TGC_CUDA_TPL_SIMT);
    assert_int_equal(l.grid[2], 4);
    assert_int_equal(l.grid[0], 1 * (64 * 16 * 16 / 128));
    assert_int_equal(l.packed, (size_t)128 * 64 * 9);
    assert_int_equal(l.threads, 256);
    tgc_cuda_conv_grad_config(TGC_CUDA_TPL_SIMT, 0, 0, &th, &sd, &sw);
    assert_int_equal(l.smem, sd);
    /* the limits: a stride and a dilation above 1 on one axis is the generic kernel's (for
     * dgrad), channels not divisible by the groups never fit */
    a = cg(0, 2, 4, 9, 9, 4, 3, 2, 1, 1);
    a.dh = 2;
    a.oh = (9 + 2 - 2 * 2 - 1) / 2 + 1;
    assert_false(tgc_cuda_conv_grad_fits(&a));
    a.wgrad = 1;
    assert_true(tgc_cuda_conv_grad_fits(&a));
    a = cg(1, 2, 6, 9, 9, 4, 3, 1, 1, 4);
    assert_false(tgc_cuda_conv_grad_fits(&a));
    a = cg(1, 0, 6, 9, 9, 4, 3, 1, 1, 1);
    assert_false(tgc_cuda_conv_grad_fits(&a));
}

/* ---- (b) on the GPU, against interp ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* a CPU f64 tensor of random values (levels > 0: integers in [0, levels), for ties) cast to dt */
static tgc_tensor *host_rand_nan(const int64_t *shape, int nd, tgc_dtype dt, int levels,
                                 int64_t nan_at)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = levels > 0 ? (double)(int)((urand() + 1.0) * 0.5 * levels) : urand();
    if (nan_at >= 0 && nan_at < n)
        v[nan_at] = NAN;
    tgc_tensor *t = tgc_from_data(v, sizeof(double) * (size_t)n, shape, nd, TGC_F64, tgc_cpu());
    free(v);
    assert_non_null(t);
    return dt == TGC_F64 ? t : tgc_cast(t, dt);
}

static tgc_tensor *host_rand(const int64_t *shape, int nd, tgc_dtype dt, int levels)
{
    return host_rand_nan(shape, nd, dt, levels, -1);
}

static tgc_tensor *host_ints(const int64_t *shape, int nd, int64_t lo, int64_t hi)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (int64_t)((urand() + 1.0) * 0.5 * (double)(hi - lo)) % (hi - lo);
    tgc_tensor *t = tgc_from_data(v, sizeof(int64_t) * (size_t)n, shape, nd, TGC_I64, tgc_cpu());
    free(v);
    assert_non_null(t);
    return t;
}

static tgc_tensor *gpu(tgc_tensor *t)
{
    tgc_tensor *g = tgc_to(t, tgc_cuda(0));
    if (!g)
        fail_msg("tgc_to(cuda:0): %s", tgc_last_error());
    return g;
}

/* the op under test, for eager calls and the compiled function */
typedef struct grad_case {
    tgc_op op;
    tgc_attrs a;
    int dim;
    int present[3]; /* which of the three slots the compiled function's inputs fill */
} grad_case;

static grad_case g_case;

/* in[0], in[1]: the op's tensor inputs (one for the avg pools), in[2]: the *_like tensor */
static tgc_tensor *apply_case(tgc_tensor *const *in)
{
    const grad_case *c = &g_case;
    switch (c->op) {
    case TGC_OP_CONV2D_GRAD_INPUT: return tgc_conv2d_grad_input(in[0], in[1], &c->a, in[2]);
    case TGC_OP_CONV2D_GRAD_WEIGHT: return tgc_conv2d_grad_weight(in[0], in[1], &c->a, in[2]);
    case TGC_OP_MAX_POOL2D_GRAD: return tgc_max_pool2d_grad(in[0], in[1], &c->a);
    case TGC_OP_AVG_POOL2D_GRAD: return tgc_avg_pool2d_grad(in[0], &c->a, in[2]);
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD: return tgc_adaptive_avg_pool2d_grad(in[0], &c->a, in[2]);
    case TGC_OP_EMBEDDING_GRAD: return tgc_embedding_grad(in[0], in[1], in[2]);
    case TGC_OP_GATHER_GRAD: return tgc_gather_grad(in[0], in[1], c->dim, in[2]);
    case TGC_OP_INDEX_SELECT_GRAD: return tgc_index_select_grad(in[0], in[1], c->dim, in[2]);
    default: return NULL;
    }
}

static tgc_status case_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self;
    (void)n_out;
    tgc_tensor *slot[3] = {NULL, NULL, NULL};
    for (int k = 0, j = 0; k < 3 && j < n_in; k++)
        if (g_case.present[k])
            slot[k] = in[j++];
    out[0] = apply_case(slot);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* The node's attributes as the builders make them (ops.def), from the reference result r. */
static tgc_attrs node_attrs(const tgc_tensor *r)
{
    tgc_attrs a = g_case.a;
    switch (g_case.op) {
    case TGC_OP_CONV2D_GRAD_INPUT:
    case TGC_OP_CONV2D_GRAD_WEIGHT:
    case TGC_OP_AVG_POOL2D_GRAD:
        a.i[7] = r->shape[2];
        a.i[8] = r->shape[3];
        a.ni = 9;
        break;
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD:
        a.i[2] = r->shape[r->ndim - 2];
        a.i[3] = r->shape[r->ndim - 1];
        a.ni = 4;
        break;
    case TGC_OP_EMBEDDING_GRAD:
        a.i[0] = r->shape[0];
        a.ni = 1;
        break;
    case TGC_OP_GATHER_GRAD:
        a.i[0] = g_case.dim;
        for (int d = 0; d < r->ndim; d++)
            a.i[1 + d] = r->shape[d];
        a.ni = 1 + r->ndim;
        break;
    case TGC_OP_INDEX_SELECT_GRAD:
        a.i[0] = g_case.dim;
        a.i[1] = r->shape[g_case.dim];
        a.ni = 2;
        break;
    default: break;
    }
    return a;
}

/* The node run directly by the backend's run_node entry (tgc_cuda_op_run) on device copies. */
static tgc_tensor *run_direct(const char *what, tgc_tensor *const *in_g, const tgc_tensor *want)
{
    tgc_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = g_case.op;
    nd.attrs = node_attrs(want);
    nd.out.dtype = want->dtype;
    nd.out.ndim = want->ndim;
    for (int d = 0; d < want->ndim; d++)
        nd.out.shape[d] = want->shape[d];
    tgc_tensor *ins[2];
    nd.n_in = 0;
    for (int k = 0; k < 2; k++)
        if (in_g[k])
            ins[nd.n_in++] = in_g[k];
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cuda(0);
    env.n_threads = 1;
    tgc_tensor *out = NULL;
    tgc_status st = tgc_cuda_op_run(&nd, ins, want->shape, &out, &env);
    if (st != TGC_OK)
        fail_msg("%s: tgc_cuda_op_run: %s: %s", what, tgc_status_str(st), tgc_last_error());
    return out;
}

/* Runs the case on interp (reference) and on cuda:0 eager and compiled; compares. rowtol > 0:
 * the row-norm rule of a matrix product. repeat: a second eager GPU run must be bit-equal. */
static tgc_tensor *g_base_dy; /* set: dy on the device is transpose(base, 2, 3), a strided view */
static int g_cl; /* conv grads: bit 0 x, bit 1 dy on the device channels-last (NHWC contiguous) */

/* t [n, c, h, w] on the device as an NCHW view of an NHWC contiguous copy */
static tgc_tensor *channels_last(tgc_tensor *t)
{
    static const int nhwc[4] = {0, 2, 3, 1}, nchw[4] = {0, 3, 1, 2};
    tgc_tensor *v = tgc_permute(tgc_contiguous(tgc_permute(t, nhwc, 4)), nchw, 4);
    assert_non_null(v);
    assert_true(t->shape[1] == 1 || !tgc_is_contiguous(v));
    return v;
}

static void check_case(const char *what, tgc_tensor *const *host, double rowtol, int repeat)
{
    tgc_tensor *in_c[3] = {host[0], host[1], host[2]};
    tgc_eager_force_interp(1);
    tgc_tensor *want = apply_case(in_c);
    tgc_eager_force_interp(0);
    if (!want)
        fail_msg("%s: interp: %s", what, tgc_last_error());
    tgc_tensor *in_g[3];
    for (int k = 0; k < 3; k++)
        in_g[k] = host[k] ? gpu(host[k]) : NULL;
    if (g_base_dy) {
        int k = g_case.op == TGC_OP_CONV2D_GRAD_WEIGHT ? 1 : 0;
        in_g[k] = tgc_transpose(gpu(g_base_dy), 2, 3);
        assert_non_null(in_g[k]);
        assert_false(tgc_is_contiguous(in_g[k]));
    }
    const int wg = g_case.op == TGC_OP_CONV2D_GRAD_WEIGHT;
    if (g_cl & 1 && wg)
        in_g[0] = channels_last(in_g[0]);
    if (g_cl & 2)
        in_g[wg ? 1 : 0] = channels_last(in_g[wg ? 1 : 0]);
    gpu_cmp r = gpu_compare(run_direct(what, in_g, want), want, rowtol, 1.0);
    if (!r.ok)
        fail_msg("%s, run_node: %s", what, r.msg);
    if (g_emu)
        return;
    tgc_tensor *got = apply_case(in_g);
    if (!got)
        fail_msg("%s: eager on cuda:0: %s", what, tgc_last_error());
    r = gpu_compare(got, want, rowtol, 1.0);
    if (!r.ok)
        fail_msg("%s, eager: %s", what, r.msg);
    if (repeat) {
        tgc_tensor *again = apply_case(in_g);
        assert_non_null(again);
        if (!gpu_bit_equal(again, got))
            fail_msg("%s: a second run gave other bits", what);
    }
    tgc_config cfg = tgc_config_default();
    cfg.backend = TGC_BACKEND_CUDA;
    tgc_fn *f = tgc_compile(case_fn, what, &cfg);
    assert_non_null(f);
    int n_in = 0;
    tgc_tensor *args[3];
    for (int k = 0; k < 3; k++) {
        g_case.present[k] = in_g[k] != NULL;
        if (in_g[k])
            args[n_in++] = in_g[k];
    }
    tgc_tensor *out = NULL;
    tgc_status st = tgc_call(f, NULL, args, n_in, &out, 1);
    if (st != TGC_OK)
        fail_msg("%s: tgc_call: %s", what, tgc_last_error());
    r = gpu_compare(out, want, rowtol, 1.0);
    if (!r.ok)
        fail_msg("%s, compiled: %s", what, r.msg);
    tgc_fn_free(f);
}

typedef struct conv_case {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    tgc_dtype dt;
    int strided_dy; /* dy as a transposed view of a [n, o, ow, oh] tensor */
} conv_case;

static void conv_grads_match_interp(void **state)
{
    (void)state;
    GPU_REQUIRE();
    static const conv_case cases[] = {
        /* n  c   h   w   o  kh kw sh sw ph pw dh dw g */
        {2, 5, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, TGC_F32, 0},
        {3, 16, 13, 11, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, TGC_F32, 0},
        {2, 8, 9, 9, 12, 1, 1, 2, 2, 0, 0, 1, 1, 2, TGC_F32, 1},
        {2, 6, 10, 9, 4, 3, 2, 1, 1, 2, 0, 2, 3, 2, TGC_F32, 0},
        {3, 3, 5, 11, 5, 2, 3, 3, 2, 1, 2, 1, 1, 1, TGC_F32, 1},
        {2, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, TGC_F32, 0}, /* depthwise */
        {4, 70, 12, 12, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, TGC_F32, 0},
        {8, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, TGC_F32, 0}, /* split-K wgrad */
        {2, 4, 9, 9, 4, 3, 3, 2, 2, 1, 1, 2, 2, 1, TGC_F32, 0},     /* generic dgrad */
        {2, 5, 7, 6, 6, 3, 3, 2, 1, 1, 0, 1, 1, 1, TGC_F64, 1},
        {2, 6, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, TGC_F16, 0},
    };
    const double prec_tol = gpu_precision_tol(tgc_config_default().matmul_precision);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *k = &cases[i];
        tgc_scope_push();
        int64_t oh = (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1;
        int64_t ow = (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1;
        int64_t xs[4] = {k->n, k->c, k->h, k->w}, wsz[4] = {k->o, k->c / k->groups, k->kh, k->kw};
        int64_t ys[4] = {k->n, k->o, oh, ow}, yt[4] = {k->n, k->o, ow, oh};
        tgc_tensor *x = host_rand(xs, 4, k->dt, 0), *w = host_rand(wsz, 4, k->dt, 0);
        g_base_dy = k->strided_dy ? host_rand(yt, 4, k->dt, 0) : NULL;
        tgc_tensor *dy = g_base_dy ? tgc_transpose(g_base_dy, 2, 3) : host_rand(ys, 4, k->dt, 0);
        assert_non_null(dy);
        memset(&g_case, 0, sizeof g_case);
        const int64_t at[7] = {k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->groups};
        for (int j = 0; j < 7; j++)
            g_case.a.i[j] = at[j];
        g_case.a.ni = 7;
        double tol = k->dt == TGC_F32 ? prec_tol : 1e-12; /* others: the dtype's own rtol */
        char what[128];
        snprintf(what, sizeof what, "conv case %zu dgrad", i);
        /* the emulation has no driver: the f32 geometries the templates take are
         * tools/gemm_emu's */
        tgc_cg_args ca = {.n = k->n,
                          .c = k->c,
                          .h = k->h,
                          .w = k->w,
                          .o = k->o,
                          .kh = k->kh,
                          .kw = k->kw,
                          .oh = oh,
                          .ow = ow,
                          .sh = k->sh,
                          .sw = k->sw,
                          .ph = k->ph,
                          .pw = k->pw,
                          .dh = k->dh,
                          .dw = k->dw,
                          .groups = k->groups};
        g_case.op = TGC_OP_CONV2D_GRAD_INPUT;
        tgc_tensor *d_in[3] = {dy, w, x};
        if (!g_emu || k->dt != TGC_F32 || !tgc_cuda_conv_grad_fits(&ca))
            check_case(what, d_in, tol, 1);
        snprintf(what, sizeof what, "conv case %zu wgrad", i);
        g_case.op = TGC_OP_CONV2D_GRAD_WEIGHT;
        tgc_tensor *w_in[3] = {x, dy, w};
        ca.wgrad = 1;
        if (!g_emu || k->dt != TGC_F32 || !tgc_cuda_conv_grad_fits(&ca))
            check_case(what, w_in, tol, 1);
        /* the channels-last entries: x and dy NHWC, and each alone (the other made NHWC) */
        for (g_cl = 1; g_cl <= 3 && k->dt == TGC_F32 && !k->strided_dy; g_cl++) {
            snprintf(what, sizeof what, "conv case %zu wgrad, channels-last %s", i,
                     g_cl == 3   ? "x and dy"
                     : g_cl == 1 ? "x"
                                 : "dy");
            if (!g_emu)
                check_case(what, w_in, tol, 1);
            g_case.op = TGC_OP_CONV2D_GRAD_INPUT;
            snprintf(what, sizeof what, "conv case %zu dgrad, channels-last dy", i);
            if (!g_emu && g_cl == 2)
                check_case(what, d_in, tol, 1);
            g_case.op = TGC_OP_CONV2D_GRAD_WEIGHT;
        }
        g_cl = 0;
        g_base_dy = NULL;
        tgc_scope_pop();
    }
}

static void pool_grads_match_interp(void **state)
{
    (void)state;
    GPU_REQUIRE();
    typedef struct pc {
        tgc_op op;
        int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, excl, oh_a, ow_a;
        int levels; /* max pool: integer values (ties) */
        tgc_dtype dt;
    } pc;
    static const pc cases[] = {
        {TGC_OP_MAX_POOL2D_GRAD, 2, 3, 9, 7, 3, 3, 2, 2, 1, 1, 0, 0, 0, 3, TGC_F32},
        {TGC_OP_MAX_POOL2D_GRAD, 1, 4, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, TGC_F32},
        {TGC_OP_MAX_POOL2D_GRAD, 2, 2, 7, 10, 3, 2, 1, 3, 1, 1, 0, 0, 0, 2, TGC_BF16},
        {TGC_OP_AVG_POOL2D_GRAD, 2, 3, 9, 7, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, TGC_F32},
        {TGC_OP_AVG_POOL2D_GRAD, 2, 3, 9, 7, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, TGC_F32},
        {TGC_OP_AVG_POOL2D_GRAD, 1, 2, 6, 5, 2, 2, 2, 2, 0, 1, 0, 0, 0, 0, TGC_F64},
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 2, 3, 7, 5, 0, 0, 0, 0, 0, 0, 0, 3, 2, 0, TGC_F32},
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 6, 7, 0, TGC_F32},
        {TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD, 3, 2, 8, 8, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, TGC_F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pc *k = &cases[i];
        tgc_scope_push();
        memset(&g_case, 0, sizeof g_case);
        g_case.op = k->op;
        int64_t oh, ow;
        if (k->op == TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD) {
            oh = k->oh_a;
            ow = k->ow_a;
            g_case.a.i[0] = oh;
            g_case.a.i[1] = ow;
            g_case.a.ni = 2;
        } else {
            oh = (k->h + 2 * k->ph - k->kh) / k->sh + 1;
            ow = (k->w + 2 * k->pw - k->kw) / k->sw + 1;
            const int64_t at[7] = {k->kh, k->kw, k->sh, k->sw, k->ph, k->pw, k->excl};
            for (int j = 0; j < 7; j++)
                g_case.a.i[j] = at[j];
            g_case.a.ni = 7;
        }
        int64_t xs[4] = {k->n, k->c, k->h, k->w}, ys[4] = {k->n, k->c, oh, ow};
        /* case 0: a NaN inside a window (it wins, as in the forward) */
        tgc_tensor *x = host_rand_nan(xs, 4, k->dt, k->levels, i == 0 ? 40 : -1);
        tgc_tensor *dy = host_rand(ys, 4, k->dt, 0);
        char what[96];
        snprintf(what, sizeof what, "pool case %zu (%s)", i, tgc_op_name(k->op));
        tgc_tensor *in[3] = {k->op == TGC_OP_MAX_POOL2D_GRAD ? x : dy,
                             k->op == TGC_OP_MAX_POOL2D_GRAD ? dy : NULL,
                             k->op == TGC_OP_MAX_POOL2D_GRAD ? NULL : x};
        check_case(what, in, 0, 0);
        tgc_scope_pop();
    }
}

static void scatter_grads_match_interp(void **state)
{
    (void)state;
    GPU_REQUIRE();
    /* embedding: idx [3, 5] with repeats into 7 rows of 6 */
    tgc_scope_push();
    memset(&g_case, 0, sizeof g_case);
    g_case.op = TGC_OP_EMBEDDING_GRAD;
    int64_t is[2] = {3, 5}, ys[3] = {3, 5, 6}, ws[2] = {7, 6};
    tgc_tensor *idx = host_ints(is, 2, 0, 7), *dy = host_rand(ys, 3, TGC_F32, 0);
    tgc_tensor *wl = host_rand(ws, 2, TGC_F32, 0);
    tgc_tensor *in[3] = {dy, idx, wl};
    check_case("embedding_grad", in, 0, 1);
    /* an index out of range: interp's status and message */
    int64_t bad_v[4] = {1, 9, 2, 11};
    int64_t bs[1] = {4}, bys[2] = {4, 6};
    tgc_tensor *bad = tgc_from_data(bad_v, sizeof bad_v, bs, 1, TGC_I64, tgc_cpu());
    tgc_tensor *bdy = host_rand(bys, 2, TGC_F32, 0);
    tgc_tensor *bin[2] = {gpu(bdy), gpu(bad)};
    tgc_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = TGC_OP_EMBEDDING_GRAD;
    nd.n_in = 2;
    nd.attrs.i[0] = 7;
    nd.attrs.ni = 1;
    nd.out.dtype = TGC_F32;
    nd.out.ndim = 2;
    nd.out.shape[0] = 7;
    nd.out.shape[1] = 6;
    int64_t oshape[2] = {7, 6};
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cuda(0);
    env.n_threads = 1;
    tgc_tensor *r = NULL;
    check_error(tgc_cuda_op_run(&nd, bin, oshape, &r, &env), TGC_ERR_INVALID_ARG,
                "tgc_embedding_grad: index 9 out of range [0, 7) at position 1");
    assert_null(r);
    tgc_clear_error();
    if (!g_emu) { /* the same through the public builder, eagerly */
        assert_null(tgc_embedding_grad(bin[0], bin[1], wl));
        check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "index 9 out of range [0, 7)");
        tgc_clear_error();
    }
    /* gather_grad along dim 1, idx smaller than t */
    g_case.op = TGC_OP_GATHER_GRAD;
    g_case.dim = 1;
    int64_t ts[3] = {3, 6, 4}, gs[3] = {2, 5, 4};
    tgc_tensor *gi = host_ints(gs, 3, 0, 6), *gdy = host_rand(gs, 3, TGC_F32, 0);
    tgc_tensor *tl = host_rand(ts, 3, TGC_F32, 0);
    tgc_tensor *gin[3] = {gdy, gi, tl};
    check_case("gather_grad", gin, 0, 1);
    /* index_select_grad along dim 0 and dim 2, f64 */
    g_case.op = TGC_OP_INDEX_SELECT_GRAD;
    for (int dim = 0; dim < 3; dim += 2) {
        g_case.dim = dim;
        int64_t s2[3] = {5, 3, 4};
        int64_t n = 7, d2[3] = {5, 3, 4};
        d2[dim] = n;
        tgc_tensor *xi = host_ints(&n, 1, 0, s2[dim]), *sdy = host_rand(d2, 3, TGC_F64, 0);
        tgc_tensor *sl = host_rand(s2, 3, TGC_F64, 0);
        tgc_tensor *sin[3] = {sdy, xi, sl};
        check_case(dim ? "index_select_grad dim 2" : "index_select_grad dim 0", sin, 0, 1);
    }
    /* rows wider than one warp's 256-element chunk, a 0-d index */
    g_case.dim = 1;
    int64_t wide[3] = {2, 5, 300}, wdy[3] = {2, 9, 300}, nine = 9;
    tgc_tensor *wi = host_ints(&nine, 1, 0, 5), *wd = host_rand(wdy, 3, TGC_F32, 0);
    tgc_tensor *wl2 = host_rand(wide, 3, TGC_F32, 0);
    tgc_tensor *win[3] = {wd, wi, wl2};
    check_case("index_select_grad wide rows", win, 0, 1);
    int64_t three = 3, zdy[3] = {2, 1, 300};
    tgc_tensor *z0 = tgc_from_data(&three, sizeof three, NULL, 0, TGC_I64, tgc_cpu());
    tgc_tensor *zd = host_rand(zdy, 3, TGC_F32, 0);
    tgc_tensor *zin[3] = {zd, z0, wl2};
    check_case("index_select_grad 0-d index", zin, 0, 1);
    tgc_scope_pop();
}

static int report_skips(void **state)
{
    if (g_nvrtc_skipped)
        printf("[  SKIPPED ] %d NVRTC compiles: libnvrtc not found\n", g_nvrtc_skipped);
    return group_shutdown(state);
}

int main(void)
{
#ifdef TGC_CUDA_OPS_EMU
    tgc_ops_emu_init();
    gpu_skip_probed_ = 1;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(conv_grad_programs_compile, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(embedded_library_matches_its_source, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(ops_program_has_backward_kernels, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(backward_ops_are_supported, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(launch_plans, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(disk_cache_round_trip, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(conv_grads_match_interp, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(pool_grads_match_interp, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(scatter_grads_match_interp, scoped_setup, scoped_teardown),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, report_skips));
}

#else /* no CUDA toolkit: nothing to test */

static void cuda_backend_not_built(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(cuda_backend_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
