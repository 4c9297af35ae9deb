/* The CUDA fused attention (src/backend/cuda/cuda_attention.{h,c}, cuda_attention_kernel.cuh):
 *  - its NVRTC program compiles for sm_90 for every dtype and several head dims (skipped,
 *    visibly, without libnvrtc);
 *  - tgc_cuda_attention_supported / _setup answer what the kernel covers;
 *  - the kernel's own text, compiled here as C and run on a host emulation of the CUDA
 *    execution model (one pthread per CUDA thread, __syncthreads as a barrier, warp shuffles
 *    through a block-wide exchange), equals interp's sdpa over dtypes, odd lengths, head dims,
 *    strided views, masks, causal and dropout with the same Philox bits: so the algorithm
 *    and the host-side argument setup are checked without a GPU;
 *  - on a GPU (tgc_cuda_is_available), tgc_cuda_attention_run on device tensors equals interp,
 *    reserving the same Philox counters (skipped and counted through tests/gpu_skip.h
 *    without one: exit code 77 when nothing failed). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#ifdef TGC_HAVE_CUDA

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/interp/interp.h"
#include "runtime/philox.h"
#include "tgc/cuda.h"

/* ---- the host emulation of the kernel ---- */

static _Thread_local unsigned emu_tid;
static _Thread_local long long emu_bid;
static float *at_smem;
static pthread_barrier_t emu_bar;
static float emu_xchg[TGC_AT_NT];
static int emu_d, emu_dv, emu_dt, emu_bm;

static void emu_sync(void)
{
    pthread_barrier_wait(&emu_bar);
}

static float emu_shfl_xor(float v, int o)
{
    emu_xchg[emu_tid] = v;
    emu_sync();
    float r = emu_xchg[emu_tid ^ (unsigned)o];
    emu_sync();
    return r;
}

static float emu_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct float4 {
    float x, y, z, w;
} float4;

static unsigned emu_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

#define AT_DEV            static inline
#define AT_KERNEL         static
#define AT_SYNC()         emu_sync()
#define AT_SHFL_XOR(v, o) emu_shfl_xor((v), (o))
#define AT_AS_FLOAT(u)    emu_as_float(u)
#define AT_AS_UINT(f)     emu_as_uint(f)
#define AT_UNROLL
#define AT_NO_UNROLL
#define AT_TID       emu_tid
#define AT_BID       emu_bid
#define AT_D         emu_d
#define AT_DV        emu_dv
#define AT_DT        emu_dt
#define AT_DROPOUT   (a.dropout)
#define AT_D4        TGC_AT_D4(emu_d)
#define AT_DP        TGC_AT_DP(emu_d)
#define AT_NC        TGC_AT_NC(emu_dv)
#define AT_DVP       TGC_AT_DVP(emu_dv)
#define AT_BNP       TGC_AT_BNP
#define AT_LD4(p)    (*(const float4 *)(p))
#define AT_ST4(p, v) (*(float4 *)(p) = (v))
#define AT_LDG4(p)   (*(const float4 *)(p))
#define AT_BM        emu_bm
#define AT_RM        (emu_bm / 16)
#define AT_BN        TGC_AT_BN
#define AT_NT        TGC_AT_NT
#include "backend/cuda/cuda_attention_kernel.cuh"

static struct tgc_at_args emu_args;
static int64_t emu_blocks;

static void *emu_thread(void *arg)
{
    emu_tid = (unsigned)(uintptr_t)arg;
    for (long long b = 0; b < emu_blocks; b++) {
        emu_bid = b;
        tgc_attention_fwd(emu_args);
        emu_sync();
    }
    return NULL;
}

/* Runs launch ln (args complete) on the emulation. */
static void emu_run(const tgc_at_launch *ln)
{
    emu_args = ln->args;
    emu_blocks = ln->n_blocks;
    emu_d = ln->d;
    emu_dv = ln->dv;
    emu_dt = ln->dt;
    emu_bm = ln->bm;
    at_smem = aligned_alloc(16, (ln->smem + 15) / 16 * 16);
    memset(at_smem, 0xff, ln->smem); /* garbage: the kernel must not read what it never wrote */
    assert_non_null(at_smem);
    assert_int_equal(pthread_barrier_init(&emu_bar, NULL, TGC_AT_NT), 0);
    pthread_t th[TGC_AT_NT];
    for (int t = 0; t < TGC_AT_NT; t++)
        assert_int_equal(pthread_create(&th[t], NULL, emu_thread, (void *)(uintptr_t)t), 0);
    for (int t = 0; t < TGC_AT_NT; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&emu_bar);
    free(at_smem);
    at_smem = NULL;
}

/* ---- inputs ---- */

static uint64_t rng_state = 12345;

static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * 0x1p-53;
}

/* A new contiguous host tensor with values in [-1, 1) (bool: about 3/4 true). */
static tgc_tensor *rand_tensor(tgc_dtype dt, const int64_t *shape, int nd)
{
    tgc_tensor *t = tgc_tensor_new(shape, nd, dt, tgc_cpu());
    assert_non_null(t);
    const int64_t n = tgc_shape_numel(shape, nd);
    for (int64_t i = 0; i < n; i++)
        tgc_store(tgc_host_data(t), dt, i, dt == TGC_BOOL ? urand() < 0.75 : 2.0 * urand() - 1.0);
    return t;
}

/* A [d0, d2, d1, d3] view of a fresh contiguous [d0, d1, d2, d3] tensor (dims 1 and 2
 * swapped, as BERT's heads are) */
static tgc_tensor *rand_permuted(tgc_dtype dt, const int64_t *shape4)
{
    const int64_t base_shape[4] = {shape4[0], shape4[2], shape4[1], shape4[3]};
    tgc_tensor *b = rand_tensor(dt, base_shape, 4);
    const int64_t strides[4] = {b->strides[0], b->strides[2], b->strides[1], b->strides[3]};
    tgc_tensor *v = tgc_tensor_view(b, shape4, strides, 4, 0);
    assert_non_null(v);
    return v;
}

static tgc_node sdpa_node(tgc_dtype dt, int ndim, int causal, int has_mask, double p, double scale)
{
    tgc_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = TGC_OP_SDPA;
    nd.n_in = has_mask ? 4 : 3;
    nd.attrs.i[0] = causal;
    nd.attrs.i[1] = has_mask;
    nd.attrs.ni = 2;
    nd.attrs.f[0] = p;
    nd.attrs.f[1] = scale;
    nd.attrs.nf = 2;
    nd.out.dtype = dt;
    nd.out.ndim = ndim;
    return nd;
}

static double tol_of(tgc_dtype dt)
{
    return dt == TGC_F32 ? 2e-5 : dt == TGC_F16 ? 4e-3 : 2e-2;
}

/* got equals want within dt's tolerance; with exact_zeros, zero exactly where want is. */
static void check_close(const tgc_tensor *got, const tgc_tensor *want, tgc_dtype dt,
                        int exact_zeros, const char *what)
{
    const int64_t n = tgc_shape_numel(want->shape, want->ndim);
    assert_int_equal(tgc_shape_numel(got->shape, got->ndim), n);
    const double tol = tol_of(dt);
    for (int64_t i = 0; i < n; i++) {
        const double g = tgc_load(tgc_host_data(got), dt, i);
        const double w = tgc_load(tgc_host_data(want), dt, i);
        if (exact_zeros && ((g == 0.0) != (w == 0.0)))
            fail_msg("%s: element %lld kept/dropped differs: got %g, interp %g", what, (long long)i,
                     g, w);
        if (!(fabs(g - w) <= tol * (1.0 + fabs(w))))
            fail_msg("%s: element %lld: got %.9g, interp %.9g", what, (long long)i, g, w);
    }
}

typedef struct at_case {
    const char *name;
    tgc_dtype dt;
    int64_t B, H, L, S, E, Ev;
    int permuted; /* q, k, v as [B, H, n, E] views of [B, n, H, E] */
    int kv_bcast; /* k and v are [1, H, S, E]: broadcast over the batch */
    int mask;     /* 0 none, 1 bool [B, 1, 1, S], 2 float [L, S], 3 float [1, H, L, 1] */
    int causal;
    double p;       /* dropout */
    int identity_v; /* v = I (S == Ev): the output is the dropped weights themselves */
} at_case;

/* Builds case c's inputs; returns the number of inputs. */
static int make_inputs(const at_case *c, tgc_tensor **ins)
{
    const int64_t qs[4] = {c->B, c->H, c->L, c->E};
    const int64_t ks[4] = {c->kv_bcast ? 1 : c->B, c->H, c->S, c->E};
    const int64_t vs[4] = {c->kv_bcast ? 1 : c->B, c->H, c->S, c->Ev};
    if (c->permuted) {
        ins[0] = rand_permuted(c->dt, qs);
        ins[1] = rand_permuted(c->dt, ks);
        ins[2] = rand_permuted(c->dt, vs);
    } else {
        ins[0] = rand_tensor(c->dt, qs, 4);
        ins[1] = rand_tensor(c->dt, ks, 4);
        ins[2] = rand_tensor(c->dt, vs, 4);
    }
    if (c->identity_v) {
        const int64_t n = tgc_shape_numel(vs, 4);
        for (int64_t i = 0; i < n; i++) {
            const int64_t col = i % c->Ev, row = (i / c->Ev) % c->S;
            tgc_store(tgc_host_data(ins[2]), c->dt, tgc_tensor_elem_offset(ins[2], i),
                      row == col ? 1.0 : 0.0);
        }
    }
    if (c->mask == 1) {
        const int64_t ms[4] = {c->B, 1, 1, c->S};
        ins[3] = rand_tensor(TGC_BOOL, ms, 4);
        /* one batch entry masks every key: its rows give zeros */
        for (int64_t j = 0; j < c->S; j++)
            tgc_store(tgc_host_data(ins[3]), TGC_BOOL, j, 0.0);
    } else if (c->mask == 2) {
        const int64_t ms[2] = {c->L, c->S};
        ins[3] = rand_tensor(c->dt, ms, 2);
        /* row 0 fully -inf (zeros out), a few -inf elsewhere */
        for (int64_t j = 0; j < c->S; j++)
            tgc_store(tgc_host_data(ins[3]), c->dt, j, -INFINITY);
        for (int64_t i = 0; i < c->L * c->S; i += 5)
            tgc_store(tgc_host_data(ins[3]), c->dt, i, -INFINITY);
    } else if (c->mask == 3) {
        const int64_t ms[4] = {1, c->H, c->L, 1};
        ins[3] = rand_tensor(c->dt, ms, 4);
    }
    return c->mask ? 4 : 3;
}

/* Runs node nd on inputs ins (output shape of nd->out.ndim dims) on the emulation and on
 * interp, after the same seed, and compares. */
static void emulate_and_compare(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                int n_sms, int exact_zeros, const char *name)
{
    tgc_at_launch ln;
    assert_int_equal(tgc_cuda_attention_setup(nd, ins, shape, n_sms, &ln), TGC_OK);
    tgc_rng_seed(777);
    if (ln.n_draw) {
        uint64_t seed;
        ln.args.rng_base = (long long)tgc_rng_draw(ln.n_draw, &seed);
        ln.args.rng_seed = (long long)seed;
    }
    tgc_tensor *out = tgc_tensor_new(shape, nd->out.ndim, nd->out.dtype, tgc_cpu());
    assert_non_null(out);
    ln.args.out = tgc_device_ptr(out);
    emu_run(&ln);

    tgc_rng_seed(777);
    tgc_tensor *want = tgc_interp_run_node(nd, ins, shape);
    assert_non_null(want);
    check_close(out, want, nd->out.dtype, exact_zeros, name);
}

static void run_case_emulated(const at_case *c, int n_sms)
{
    tgc_tensor *ins[4];
    const int n_in = make_inputs(c, ins);
    const int64_t shape[4] = {c->B, c->H, c->L, c->Ev};
    tgc_node nd = sdpa_node(c->dt, 4, c->causal, c->mask != 0, c->p, 1.0 / sqrt((double)c->E));
    assert_int_equal(nd.n_in, n_in);
    emulate_and_compare(&nd, ins, shape, n_sms, c->identity_v, c->name);
}

/* Other ranks: 2-D q/k/v (no batch), and 5-D q with k/v of fewer dims broadcast over the
 * leading ones, a 3-D float mask and dropout. */
static void test_emulated_ranks_and_broadcast(void **state)
{
    (void)state;
    {
        const int64_t qs[2] = {37, 24}, ks[2] = {50, 24}, vs[2] = {50, 40}, os[2] = {37, 40};
        tgc_tensor *ins[3] = {rand_tensor(TGC_F32, qs, 2), rand_tensor(TGC_F32, ks, 2),
                              rand_tensor(TGC_F32, vs, 2)};
        tgc_node nd = sdpa_node(TGC_F32, 2, 1, 0, 0.0, 0.3);
        emulate_and_compare(&nd, ins, os, 0, 0, "2-D causal");
    }
    {
        const int64_t qs[5] = {2, 3, 2, 20, 32}, ks[3] = {2, 33, 32}, vs[4] = {1, 2, 33, 16};
        const int64_t ms[3] = {2, 20, 33}, os[5] = {2, 3, 2, 20, 16};
        tgc_tensor *ins[4] = {rand_tensor(TGC_F32, qs, 5), rand_tensor(TGC_F32, ks, 3),
                              rand_tensor(TGC_F32, vs, 4), rand_tensor(TGC_F32, ms, 3)};
        tgc_node nd = sdpa_node(TGC_F32, 5, 0, 1, 0.2, 0.125);
        emulate_and_compare(&nd, ins, os, 132, 0, "5-D broadcast k/v/mask dropout");
    }
}

static const at_case emu_cases[] = {
    {"f32 L7 S129 E64", TGC_F32, 2, 3, 7, 129, 64, 64, 0, 0, 0, 0, 0, 0},
    {"f32 L129 S7 E32 Ev48", TGC_F32, 1, 2, 129, 7, 32, 48, 0, 0, 0, 0, 0, 0},
    {"f32 L1 S1 E128", TGC_F32, 2, 1, 1, 1, 128, 128, 0, 0, 0, 0, 0, 0},
    {"f32 E80 causal", TGC_F32, 1, 2, 65, 65, 80, 80, 0, 0, 0, 1, 0, 0},
    {"f32 causal L129 S7", TGC_F32, 1, 1, 129, 7, 64, 64, 0, 0, 0, 1, 0, 0},
    {"f32 causal L7 S129", TGC_F32, 1, 1, 7, 129, 64, 64, 0, 0, 0, 1, 0, 0},
    {"f32 permuted bool mask", TGC_F32, 2, 3, 70, 70, 64, 64, 1, 0, 1, 0, 0, 0},
    {"f32 float mask [L,S]", TGC_F32, 2, 2, 33, 129, 64, 64, 0, 0, 2, 0, 0, 0},
    {"f32 float mask [1,H,L,1] kv bcast", TGC_F32, 2, 2, 9, 20, 16, 24, 0, 1, 3, 0, 0, 0},
    {"f16 permuted E64", TGC_F16, 2, 2, 65, 100, 64, 64, 1, 0, 1, 0, 0, 0},
    {"bf16 E64 causal", TGC_BF16, 1, 2, 100, 100, 64, 64, 0, 0, 0, 1, 0, 0},
    {"f32 dropout identity v", TGC_F32, 2, 2, 70, 67, 32, 67, 0, 0, 0, 0, 0.25, 1},
    {"f32 dropout causal bool mask identity v", TGC_F32, 2, 1, 9, 100, 64, 100, 0, 0, 1, 1, 0.5, 1},
    {"f32 dropout permuted", TGC_F32, 2, 3, 33, 65, 64, 64, 1, 0, 0, 0, 0.1, 0},
    {"bf16 dropout identity v", TGC_BF16, 1, 2, 17, 40, 64, 40, 0, 0, 0, 0, 0.3, 1},
};

static void test_emulated_kernel_matches_interp(void **state)
{
    (void)state;
    for (int i = 0; i < N_OF(emu_cases); i++) {
        tgc_scope_push();
        /* odd cases as on a 132-SM GPU: 32-row tiles where the grid is small */
        run_case_emulated(&emu_cases[i], i % 2 ? 132 : 0);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
}

/* ---- on the GPU ---- */

/* t's elements on device dev with t's geometry: its whole storage copied, then viewed. */
static tgc_tensor *to_device(tgc_tensor *t, tgc_device dev)
{
    const int64_t n = (int64_t)(t->storage->nbytes / (size_t)tgc_dtype_size(t->dtype));
    const int64_t one = 1;
    tgc_tensor *flat = tgc_tensor_view(t, &n, &one, 1, 0);
    assert_non_null(flat);
    tgc_tensor *d = tgc_to(flat, dev);
    assert_non_null(d);
    tgc_tensor *v = tgc_tensor_view(d, t->shape, t->strides, t->ndim, t->offset);
    assert_non_null(v);
    return v;
}

static void run_case_gpu(const at_case *c)
{
    tgc_tensor *ins[4], *dins[4];
    const int n_in = make_inputs(c, ins);
    const tgc_device dev = tgc_cuda(0);
    for (int i = 0; i < n_in; i++)
        dins[i] = to_device(ins[i], dev);
    const int64_t shape[4] = {c->B, c->H, c->L, c->Ev};
    tgc_node nd = sdpa_node(c->dt, 4, c->causal, c->mask != 0, c->p, 1.0 / sqrt((double)c->E));
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = dev;
    env.n_threads = 1;

    tgc_rng_seed(4242);
    tgc_tensor *dout = NULL;
    tgc_status s = tgc_cuda_attention_run(&nd, dins, shape, &dout, &env);
    if (s != TGC_OK)
        fail_msg("%s: tgc_cuda_attention_run: %d %s", c->name, (int)s, tgc_last_error());
    const uint64_t after_gpu = tgc_rng_draw(0, NULL);
    tgc_tensor *out = tgc_to(dout, tgc_cpu());
    assert_non_null(out);
    assert_true(tgc_tensor_is_contiguous(dout));

    tgc_rng_seed(4242);
    tgc_tensor *want = tgc_interp_run_node(&nd, ins, shape);
    assert_non_null(want);
    /* the same counters were reserved */
    assert_int_equal(tgc_rng_draw(0, NULL), after_gpu);
    check_close(out, want, c->dt, c->identity_v, c->name);
}

static const at_case gpu_cases[] = {
    {"gpu f32 BERT 8x12x128x64 permuted key mask", TGC_F32, 8, 12, 128, 128, 64, 64, 1, 0, 1, 0, 0,
     0},
    {"gpu f16 BERT permuted key mask", TGC_F16, 8, 12, 128, 128, 64, 64, 1, 0, 1, 0, 0, 0},
    {"gpu bf16 BERT permuted key mask dropout", TGC_BF16, 2, 12, 128, 128, 64, 64, 1, 0, 1, 0, 0.1,
     0},
    {"gpu f32 L1 S1 E128", TGC_F32, 2, 1, 1, 1, 128, 128, 0, 0, 0, 0, 0, 0},
    {"gpu f32 L7 S129 E32", TGC_F32, 2, 3, 7, 129, 32, 32, 0, 0, 0, 0, 0, 0},
    {"gpu f32 L129 S7 E80 causal", TGC_F32, 1, 2, 129, 7, 80, 80, 0, 0, 0, 1, 0, 0},
    {"gpu f32 L7 S129 causal float mask", TGC_F32, 2, 2, 7, 129, 64, 64, 0, 0, 2, 1, 0, 0},
    {"gpu f16 E128 Ev7 kv bcast mask [1,H,L,1]", TGC_F16, 2, 2, 129, 65, 128, 7, 0, 1, 3, 0, 0, 0},
    {"gpu f32 L1000 S1000 causal", TGC_F32, 1, 2, 1000, 1000, 64, 64, 0, 0, 0, 1, 0, 0},
    {"gpu f32 dropout identity v", TGC_F32, 2, 2, 70, 67, 32, 67, 0, 0, 0, 0, 0.25, 1},
    {"gpu f32 dropout causal bool mask identity v", TGC_F32, 2, 1, 129, 100, 64, 100, 1, 0, 1, 1,
     0.5, 1},
    {"gpu f16 dropout identity v", TGC_F16, 1, 3, 65, 128, 64, 128, 0, 0, 0, 0, 0.2, 1},
};

static void test_gpu_matches_interp(void **state)
{
    (void)state;
    GPU_REQUIRE();
    for (int i = 0; i < N_OF(gpu_cases); i++) {
        tgc_scope_push();
        run_case_gpu(&gpu_cases[i]);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    /* the BERT-base shape, f32 (batch 8, 12 heads, 128 tokens, head 64, key-padding mask):
     * time per call, printed for the record */
    {
        tgc_scope_push();
        const at_case *c = &gpu_cases[0];
        tgc_tensor *ins[4], *dins[4];
        const int n_in = make_inputs(c, ins);
        for (int i = 0; i < n_in; i++)
            dins[i] = to_device(ins[i], tgc_cuda(0));
        const int64_t shape[4] = {c->B, c->H, c->L, c->Ev};
        tgc_node nd = sdpa_node(c->dt, 4, 0, 1, 0.0, 0.125);
        tgc_launch_env env;
        memset(&env, 0, sizeof env);
        env.device = tgc_cuda(0);
        tgc_tensor *o = NULL;
        assert_int_equal(tgc_cuda_attention_run(&nd, dins, shape, &o, &env), TGC_OK);
        assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
        const int reps = gpu_under_sanitizer() ? 2 : 200;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int r = 0; r < reps; r++) {
            assert_int_equal(tgc_cuda_attention_run(&nd, dins, shape, &o, &env), TGC_OK);
            tgc_tensor_free(o);
        }
        assert_int_equal(tgc_cuda_synchronize(0), TGC_OK);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double us =
            ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3) /
            reps;
        printf("tgc: attention f32 8x12x128x64 with key mask: %.1f us per call, host path included "
               "(%d calls)\n",
               us, reps);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    /* host tensors and uncovered head dims fall back without an error */
    const int64_t qs[4] = {1, 1, 4, 160};
    tgc_tensor *h[3] = {rand_tensor(TGC_F32, qs, 4), rand_tensor(TGC_F32, qs, 4),
                        rand_tensor(TGC_F32, qs, 4)};
    tgc_node nd = sdpa_node(TGC_F32, 4, 0, 0, 0.0, 0.1);
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cuda(0);
    tgc_tensor *o = NULL;
    assert_int_equal(tgc_cuda_attention_run(&nd, h, qs, &o, &env), TGC_ERR_UNSUPPORTED);
    for (int i = 0; i < 3; i++)
        h[i] = to_device(h[i], env.device);
    assert_int_equal(tgc_cuda_attention_run(&nd, h, qs, &o, &env), TGC_ERR_UNSUPPORTED);
    assert_null(o);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* ---- NVRTC ---- */

static void test_program_compiles_for_sm90(void **state)
{
    (void)state;
    if (tgc_nvrtc_load() != TGC_OK) {
        printf("[  SKIPPED ] libnvrtc not available: %s\n", tgc_last_error());
        tgc_clear_error();
        skip();
    }
    static const int variants[][5] = {{0, 64, 64, 0, 64},
                                      {0, 64, 64, 0, 32},
                                      {1, 64, 64, 1, 64},
                                      {2, 128, 128, 0, 64},
                                      {0, 1, 7, 1, 32}};
    for (int i = 0; i < N_OF(variants); i++) {
        char *src = tgc_cuda_attention_source(variants[i][0], variants[i][1], variants[i][2],
                                              variants[i][3], variants[i][4]);
        assert_non_null(src);
        char *cubin = NULL, *ptx = NULL;
        size_t size = 0;
        tgc_status s = tgc_nvrtc_compile("tgc_attention", src, 90, &cubin, &size, &ptx);
        if (s != TGC_OK)
            fail_msg("variant %d/%d/%d/%d: %s", variants[i][0], variants[i][1], variants[i][2],
                     variants[i][3], tgc_last_error());
        assert_true(size > 0);
        assert_non_null(strstr(ptx, ".entry tgc_attention_fwd"));
        /* the register arrays (scores, accumulators) are fully unrolled: no local arrays */
        if (strstr(ptx, ".local"))
            fail_msg("variant %d/%d/%d/%d keeps arrays in local memory", variants[i][0],
                     variants[i][1], variants[i][2], variants[i][3]);
        free(cubin);
        free(ptx);
        free(src);
    }
}

/* ---- what is covered ---- */

static void test_supported_and_setup(void **state)
{
    (void)state;
    tgc_node nd = sdpa_node(TGC_F32, 4, 0, 0, 0.0, 0.125);
    assert_true(tgc_cuda_attention_supported(&nd));
    nd.out.dtype = TGC_F16;
    assert_true(tgc_cuda_attention_supported(&nd));
    nd.out.dtype = TGC_BF16;
    assert_true(tgc_cuda_attention_supported(&nd));
    nd.out.dtype = TGC_F64;
    assert_false(tgc_cuda_attention_supported(&nd));
    nd.out.dtype = TGC_F32;
    nd.op = TGC_OP_SOFTMAX;
    assert_false(tgc_cuda_attention_supported(&nd));
    assert_false(tgc_cuda_attention_supported(NULL));

    /* head dims above 128 and mixed dtypes fall back (no error kept) */
    tgc_node n4 = sdpa_node(TGC_F32, 4, 1, 0, 0.0, 0.125);
    const int64_t qs[4] = {1, 2, 5, 160}, vs[4] = {1, 2, 5, 64};
    tgc_tensor *ins[3] = {rand_tensor(TGC_F32, qs, 4), rand_tensor(TGC_F32, qs, 4),
                          rand_tensor(TGC_F32, vs, 4)};
    const int64_t shape[4] = {1, 2, 5, 64};
    tgc_at_launch ln;
    assert_int_equal(tgc_cuda_attention_setup(&n4, ins, shape, 0, &ln), TGC_ERR_UNSUPPORTED);
    assert_int_equal(tgc_last_status(), TGC_OK);
    const int64_t q64[4] = {1, 2, 5, 64};
    ins[0] = rand_tensor(TGC_F32, q64, 4);
    ins[1] = rand_tensor(TGC_F16, q64, 4);
    assert_int_equal(tgc_cuda_attention_setup(&n4, ins, shape, 0, &ln), TGC_ERR_UNSUPPORTED);
    ins[1] = rand_tensor(TGC_F32, q64, 4);
    assert_int_equal(tgc_cuda_attention_setup(&n4, ins, shape, 0, &ln), TGC_OK);
    {
        /* no float4 staging for a row start off 16 bytes or a width not a multiple of 4 */
        const int64_t q7[4] = {1, 2, 5, 7}, st[4] = {640, 320, 64, 1};
        const int64_t n_base = 1280;
        tgc_tensor *off = tgc_tensor_view(rand_tensor(TGC_F32, &n_base, 1), q64, st, 4, 1);
        tgc_tensor *t7[3] = {off, ins[1], rand_tensor(TGC_F32, q7, 4)};
        const int64_t s7[4] = {1, 2, 5, 7};
        tgc_at_launch l7;
        assert_int_equal(tgc_cuda_attention_setup(&n4, t7, s7, 0, &l7), TGC_OK);
        assert_true(!l7.args.vec_q && l7.args.vec_k && !l7.args.vec_v);
    }
    assert_int_equal(ln.n_blocks, 2);
    assert_int_equal(ln.bm, 32); /* L <= 32 */
    assert_int_equal(ln.n_draw, 0);
    assert_int_equal(ln.args.causal, 1);
    /* 64-row tiles unless the grid would be short of blocks */
    {
        const int64_t q100[4] = {1, 2, 100, 64}, s100[4] = {1, 2, 100, 64};
        tgc_tensor *t3[3] = {rand_tensor(TGC_F32, q100, 4), rand_tensor(TGC_F32, q100, 4),
                             rand_tensor(TGC_F32, q100, 4)};
        assert_int_equal(tgc_cuda_attention_setup(&n4, t3, s100, 0, &ln), TGC_OK);
        assert_int_equal(ln.bm, 64);
        assert_int_equal(ln.n_blocks, 4);
        assert_true(ln.args.vec_q && ln.args.vec_k && ln.args.vec_v); /* float4 staging */
        assert_int_equal(ln.smem, tgc_cuda_attention_smem(64, 64, 64));
        assert_int_equal(tgc_cuda_attention_setup(&n4, t3, s100, 132, &ln), TGC_OK);
        assert_int_equal(ln.bm, 32);
        assert_int_equal(ln.n_blocks, 8);
    }
    /* dropout: the threshold is exactly uniform >= p */
    n4.attrs.f[0] = 0.1;
    assert_int_equal(tgc_cuda_attention_setup(&n4, ins, shape, 0, &ln), TGC_OK);
    assert_int_equal(ln.n_draw, 2 * 5 * 5);
    for (uint32_t m = 1677720; m < 1677724; m++) {
        const float u = (float)m * 0x1p-24f;
        assert_int_equal(u >= 0.1, (long long)m >= ln.args.keep_threshold);
    }
}

#else /* no CUDA */

static void test_cuda_absent(void **state)
{
    (void)state;
    GPU_REQUIRE();
}

#endif

int main(void)
{
#ifdef TGC_HAVE_CUDA
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_supported_and_setup, scoped_setup, scoped_teardown),
        cmocka_unit_test(test_program_compiles_for_sm90),
        cmocka_unit_test_setup_teardown(test_emulated_kernel_matches_interp, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_emulated_ranks_and_broadcast, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_matches_interp, scoped_setup, scoped_teardown),
    };
#else
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cuda_absent)};
#endif
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, group_shutdown));
}
