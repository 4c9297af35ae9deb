/* CPU emulation of the native-op CUDA kernels (src/backend/cuda/cuda_ops_kernels.cu), for
 * checking them where no GPU exists: the kernel text is compiled as C++ with the shims below
 * (each CUDA thread of a block is a fiber (ucontext) run in turn by one OS thread; a barrier,
 * __syncthreads or the warp barrier of a shuffle, yields until every member arrived; shuffles
 * go through a per-warp exchange), and emu_launch.c replaces tgc_ops_launch / _sync /
 * _capturing so that cuda_ops.c launches these functions instead of the driver's. Blocks of
 * a grid run one after another, with small grids and blocks so that stride loops wrap. Device
 * memory is host memory (a fake CUDA allocator, registered by tgc_ops_emu_init).
 * Build and run: tests/cuda_emu/run.sh. Not part of the library. */
#include <dlfcn.h>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include <ucontext.h>

extern "C" {
#include "ir/op.h"
}

struct alignas(16) float4 {
    float x, y, z, w;
};

struct emu_dim3 {
    unsigned x, y, z;
};
/* the running fiber's indices (one OS thread runs every fiber of a block in turn) */
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

struct emu_fiber {
    ucontext_t ctx;
    unsigned tid;
    int done;
    char *stack;
};
enum { EMU_STACK = 128 * 1024 };
static char *emu_stack(unsigned t)
{
    static char *pool[1024];
    if (!pool[t])
        pool[t] = (char *)malloc(EMU_STACK);
    return pool[t];
}
static ucontext_t g_sched;
static emu_fiber *g_cur;

static void emu_yield()
{
    swapcontext(&g_cur->ctx, &g_sched);
}

/* counted barrier: the last to arrive opens it; the others yield until it opened */
struct emu_barrier {
    unsigned n, waiting = 0;
    unsigned long long gen = 0;
    explicit emu_barrier(unsigned count) : n(count) {}
    void arrive_and_wait()
    {
        unsigned long long g = gen;
        if (++waiting == n) {
            waiting = 0;
            gen++;
            return;
        }
        while (gen == g)
            emu_yield();
    }
};

struct emu_block {
    emu_barrier *all;
    emu_barrier *warp[32];
    uint64_t slot[1024];
};
static emu_block *g_blk;
static std::mutex g_atomic;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__      static

static void __syncthreads()
{
    g_blk->all->arrive_and_wait();
}

template <typename T> static T __shfl_xor_sync(unsigned, T v, int o)
{
    static_assert(sizeof(T) == 8, "64-bit shuffles only");
    unsigned t = threadIdx.x, w = t >> 5;
    uint64_t u;
    memcpy(&u, &v, 8);
    g_blk->slot[t] = u;
    g_blk->warp[w]->arrive_and_wait();
    u = g_blk->slot[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
    g_blk->warp[w]->arrive_and_wait();
    memcpy(&v, &u, 8);
    return v;
}

static unsigned __ballot_sync(unsigned, bool pred)
{
    unsigned t = threadIdx.x, w = t >> 5;
    g_blk->slot[t] = pred ? 1u : 0u;
    g_blk->warp[w]->arrive_and_wait();
    unsigned m = 0;
    for (unsigned l = 0; l < 32; l++)
        m |= (g_blk->slot[(t & ~31u) | l] ? 1u : 0u) << l;
    g_blk->warp[w]->arrive_and_wait();
    return m;
}
static int __ffs(int x)
{
    return __builtin_ffs(x);
}
static unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    std::lock_guard<std::mutex> l(g_atomic);
    unsigned long long old = *p;
    if (v < old)
        *p = v;
    return old;
}
static unsigned __umulhi(unsigned a, unsigned b)
{
    return (unsigned)(((uint64_t)a * b) >> 32);
}
static float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static double __longlong_as_double(long long u)
{
    double f;
    memcpy(&f, &u, 8);
    return f;
}
using std::cos;
using std::erf;
using std::exp;
using std::fabs;
using std::fmax;
using std::log;
using std::pow;
using std::rintf;
using std::sin;
using std::sqrt;
using std::tanh;

#define X(e, name, mn, mx, kind) constexpr int OP_##e = TGC_OP_##e;
#include "ir/ops.def"
#undef X
/* What cuda_ops_src.c generates from ops.def's MATH_FN lines: the op's math by its libm name
 * (the double function). */
struct emu_math_fns {
    double (*f[TGC_OP_COUNT])(double);
    emu_math_fns()
    {
        for (int op = 0; op < TGC_OP_COUNT; op++) {
            const char *name = tgc_op_math_fn((tgc_op)op);
            f[op] = name ? (double (*)(double))dlsym(RTLD_DEFAULT, name) : nullptr;
        }
    }
};

static double tgc_native_math(int op, double x)
{
    static const emu_math_fns fns; /* built once, thread-safely */
    return fns.f[op] ? fns.f[op](x) : x;
}
constexpr int DT_F32 = TGC_F32, DT_F16 = TGC_F16, DT_BF16 = TGC_BF16, DT_I32 = TGC_I32,
              DT_I64 = TGC_I64, DT_BOOL = TGC_BOOL, DT_F64 = TGC_F64;

#include "backend/cuda/cuda_ops_kernels.cu"

/* ---- launching ---- */

template <typename... A, size_t... I>
static void call_with(void (*f)(A...), void **p, std::index_sequence<I...>)
{
    f(*(std::remove_reference_t<A> *)p[I]...);
}

static void (*g_entry)(void);
static void fiber_main()
{
    g_entry();
    g_cur->done = 1;
    swapcontext(&g_cur->ctx, &g_sched);
}

template <typename... A>
static void run_grid(void (*f)(A...), void **p, unsigned grid, unsigned block)
{
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    static void (*sf)(A...);
    static void **sp;
    sf = f;
    sp = p;
    g_entry = [] { call_with(sf, sp, std::index_sequence_for<A...>{}); };
    for (unsigned b = 0; b < grid; b++) {
        emu_block blk;
        emu_barrier all(block);
        for (unsigned w = 0; w < block / 32; w++)
            blk.warp[w] = new emu_barrier(32);
        blk.all = &all;
        g_blk = &blk;
        blockIdx = {b, 0, 0};
        std::vector<emu_fiber> fs(block);
        for (unsigned t = 0; t < block; t++) {
            fs[t].tid = t;
            fs[t].done = 0;
            fs[t].stack = emu_stack(t);
            getcontext(&fs[t].ctx);
            fs[t].ctx.uc_stack.ss_sp = fs[t].stack;
            fs[t].ctx.uc_stack.ss_size = EMU_STACK;
            fs[t].ctx.uc_link = nullptr;
            makecontext(&fs[t].ctx, fiber_main, 0);
        }
        for (unsigned live = block; live > 0;) {
            live = 0;
            for (unsigned t = 0; t < block; t++) {
                if (fs[t].done)
                    continue;
                g_cur = &fs[t];
                threadIdx = {t, 0, 0};
                swapcontext(&g_sched, &fs[t].ctx);
                live += !fs[t].done;
            }
        }
        for (unsigned w = 0; w < block / 32; w++)
            delete blk.warp[w];
    }
}

/* shape: 0 grid, 1 one block per item, 2 one warp per item, 3 a single block (ops_shape) */
template <typename... A> static void run(void (*f)(A...), void **p, int s, long long work)
{
    /* small, odd geometries so every stride loop wraps */
    unsigned block = s == 0 ? 32 : 64, grid;
    switch (s) {
    case 0: grid = (unsigned)((work + 31) / 32); break;
    case 1: grid = (unsigned)work; break;
    case 2: grid = (unsigned)((work + 1) / 2); break;
    default: grid = 1; break;
    }
    if (grid > 3)
        grid = 3;
    if (grid < 1)
        grid = 1;
    run_grid(f, p, grid, block);
}

/* Runs kernel `name`; 0 when there is no such kernel. */
extern "C" int tgc_emu_launch(const char *name, int shape, long long work, void **p)
{
#define K(fn)                                                                                      \
    if (!strcmp(name, #fn)) {                                                                      \
        run(fn, p, shape, work);                                                                   \
        return 1;                                                                                  \
    }
    K(tgc_ops_pointwise)
    K(tgc_ops_copy)
    K(tgc_ops_cat_dense)
    K(tgc_ops_fill)
    K(tgc_ops_flag_init)
    K(tgc_ops_check_index)
    K(tgc_ops_index_report)
    K(tgc_ops_select)
    K(tgc_ops_gather)
    K(tgc_ops_arange)
    K(tgc_ops_rand)
    K(tgc_ops_dropout)
    K(tgc_ops_reduce)
    K(tgc_ops_softmax)
    K(tgc_ops_layer_norm)
    K(tgc_ops_bn_stats)
    K(tgc_ops_bn_final)
    K(tgc_ops_bn_apply)
    K(tgc_ops_pool2d)
    K(tgc_ops_loss)
    K(tgc_ops_loss_reduce)
    K(tgc_ops_matmul)
    K(tgc_ops_linear)
    K(tgc_ops_conv2d)
    K(tgc_ops_conv2d_grad_input)
    K(tgc_ops_conv2d_grad_weight)
    K(tgc_ops_pool2d_grad)
    K(tgc_ops_pool2d_grad_f32)
    K(tgc_ops_pool2d_argmax_f32)
    K(tgc_ops_index_add)
    K(tgc_ops_gather_grad)
#undef K
    return 0;
}
