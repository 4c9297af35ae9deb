// The device library of the GEMM / conv templates (CUDA C++ for NVRTC; the build embeds it in
// the library as every .cu / .cuh: CMakeLists.txt, tools/embed_text.cmake).
// cuda_gemm.c appends it once per program (guarded), then one small wrapper per template
// kernel that instantiates these templates with the kernel's tile configuration, its
// operand loaders and its fused epilogue. Needs no CUDA header (16-bit values are raw bits).
//
// Problem: for bi < batch, C[bi, m, n] = ep(sum_k A(bi, m, k) * B(bi, k, n)), m < M, n < N.
// A block computes one BM x BN tile of one batch item over a range of k tiles (split-K:
// gridDim.y splits, partials in the workspace, the last split's block reduces them in split
// order and applies the epilogue). Shared memory holds ST stages of A and B tiles, each in
// one of two layouts: K-major ([mn][k], row length BK + pad) or MN-major ([k][mn], row
// length BMN + pad); the pads keep the fragment reads and ldmatrix conflict free and every
// row 16-byte aligned for cp.async.
#ifndef TGC_GEMM_LIB_V1
#define TGC_GEMM_LIB_V1

typedef struct tgc_gemm_geom {
    long long batch, M, N, K, a_off, a_bs, a_rs, a_cs, b_off, b_bs, b_rs, b_cs, c_bs, c_rs;
    long long cn, cc, ch, cw, co, kh, kw, oh, ow;
} tgc_gemm_geom;

// modes (tgc_cuda_tpl_mode)
#define TGC_TPL_SIMT 0  // fp32 FFMA
#define TGC_TPL_TF32 1  // fp32 smem, mma m16n8k8 tf32
#define TGC_TPL_BF16X 2 // fp32 smem, converted to bf16 at fragment load, mma m16n8k16 bf16
                        // (wgmma: rounded to bf16 in the stage, tf32 wgmma)
#define TGC_TPL_F16 3   // f16 smem, ldmatrix, mma m16n8k16 f16
#define TGC_TPL_BF16 4  // bf16 smem, ldmatrix, mma m16n8k16 bf16
// fp32 operands on Hopper: wgmma reads fp32 stages as tf32 (it drops the low 13 mantissa
// bits), so the stages are rounded first, to tf32 (TF32) or to bf16 (BF16X: products of bf16
// values are exact in tf32 and fp32, so the tf32 wgmma of bf16-rounded operands computes what
// a bf16 one would, with the fp32 stages and loaders of TF32)
#define TGC_TPL_ROUNDS(MODE) ((MODE) == TGC_TPL_TF32 || (MODE) == TGC_TPL_BF16X)

// The dynamic shared memory of a template kernel, and the few instructions the library
// uses through inline PTX. tools/gemm_emu/emu.h defines TGC_GEMM_EMU and provides host
// emulations of these instead, to run the kernels on the CPU.
#ifndef TGC_GEMM_EMU
#define TGC_DYN_SMEM(name) extern __shared__ __align__(16) char name[]
__device__ __forceinline__ unsigned tgc_smem_addr(const void *p)
{
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ void tgc_cp16(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tgc_smem_addr(dst)),
                 "l"(src), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void tgc_cp4(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(tgc_smem_addr(dst)),
                 "l"(src), "r"(bytes)
                 : "memory");
}
// the same at a shared-memory address (tgc_smem_addr): no conversion per copy
__device__ __forceinline__ void tgc_cp16_at(unsigned dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void tgc_cp4_at(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void tgc_cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void tgc_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ unsigned tgc_to_tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
// fp32 rounded to bf16 (to nearest even) and widened back, as fp32 bits
__device__ __forceinline__ unsigned tgc_to_bf16_f32(float x)
{
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return ((unsigned)h) << 16;
}
// lo -> bits 0..15 (the element of the smaller index), hi -> bits 16..31
__device__ __forceinline__ unsigned tgc_pack_bf16(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float tgc_bits_f32(unsigned short h, int is_bf16)
{
    if (is_bf16)
        return __uint_as_float(((unsigned)h) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short tgc_f32_bits(float f, int is_bf16)
{
    unsigned short h;
    if (is_bf16)
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ void tgc_mma_tf32(float *c, const unsigned *a, const unsigned *b)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <int BF16>
__device__ __forceinline__ void tgc_mma_16(float *c, const unsigned *a, const unsigned *b)
{
    if (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <int TRANS> __device__ __forceinline__ void tgc_ldsm_x4(unsigned *r, const void *p)
{
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(tgc_smem_addr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(tgc_smem_addr(p)));
}
// sm_90a (wgmma): templates, so that a program for another architecture never instantiates
// them. fence.proxy.async orders this thread's generic-proxy writes of shared memory (stores,
// cp.async) before later async-proxy reads (wgmma) once a barrier publishes them.
template <int X> __device__ __forceinline__ void tgc_fence_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
template <int X> __device__ __forceinline__ void tgc_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
template <int X> __device__ __forceinline__ void tgc_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void tgc_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Barrier ID of NT threads: the block's (0, __syncthreads) or a named one (the consumer
// warpgroups of the warp-specialized kernel, whose producer has left).
template <int ID, int NT> __device__ __forceinline__ void tgc_bar_sync()
{
    if (ID == 0)
        __syncthreads();
    else
        asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(NT) : "memory");
}
// *p += 1 at GPU scope with acquire-release semantics; the old value. Called by one thread
// after a block barrier, it publishes the writes of the whole block before it (release is
// cumulative over what the barrier ordered) and, with a barrier after it, makes the writes
// published by earlier arrivals visible to the whole block: no full fence per thread.
__device__ __forceinline__ unsigned tgc_arrive_acq_rel(unsigned *p)
{
    unsigned prev;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\n" : "=r"(prev) : "l"(p) : "memory");
    return prev;
}
// keeps the compiler from moving accesses of an accumulator register across the async window
__device__ __forceinline__ void tgc_reg_fence(float &r)
{
    asm volatile("" : "+f"(r)::"memory");
}
// ---- sm_90a: TMA, mbarrier, register reallocation (the warp-specialized GEMM) ----
// A TMA tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned), passed by value as a
// __grid_constant__ kernel parameter; the TMA instructions take its generic address.
struct __align__(64) tgc_tmap {
    unsigned long long w[16];
};
template <int X> __device__ __forceinline__ void tgc_mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// makes the initialized barriers visible to the async proxy (TMA's complete_tx) and the block
template <int X> __device__ __forceinline__ void tgc_mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// one arrival that also expects `bytes` of TMA transactions in the current phase
template <int X> __device__ __forceinline__ void tgc_mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
template <int X> __device__ __forceinline__ void tgc_mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// waits until the phase of parity `parity` has completed (a fresh barrier counts the phase
// before its first as complete: waiting with parity 1 returns at once)
template <int X> __device__ __forceinline__ void tgc_mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
// a box of a rank-3 tensor map at coordinates (c0, c1, c2) into shared memory at dst; its
// bytes complete a transaction of barrier bar (elements outside the tensor read as zeros)
template <int X>
__device__ __forceinline__ void tgc_tma_load3(unsigned dst, const tgc_tmap *m, unsigned bar,
                                              int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::"
                 "bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"((unsigned long long)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
template <int X> __device__ __forceinline__ void tgc_tmap_prefetch(const tgc_tmap *m)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)m) : "memory");
}
template <int R> __device__ __forceinline__ void tgc_setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void tgc_setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
#endif // TGC_GEMM_EMU
__device__ __forceinline__ long long tgc_min_ll(long long a, long long b)
{
    return a < b ? a : b;
}

// The vector loaders' interior tiles (every chunk in bounds, the same test for every thread):
// this thread's chunks (row, c) of the R x C-chunk grid copied whole, without bounds, from
// p + (L == 0 ? row * smn + k0 + c : (k0 + row) * sk + c) elements to stage byte off(row, c).
template <int ES, int L, int R, int C, int V, int NT, class OFF>
__device__ __forceinline__ void tgc_cp_interior(char *s, const char *p, long long smn,
                                                long long sk, long long k0, OFF off)
{
    const unsigned sa = tgc_smem_addr(s);
#pragma unroll
    for (int i = 0; i < R * C / NT; i++) {
        const int e = (int)threadIdx.x + i * NT, row = e / C, c = (e % C) * V;
        tgc_cp16_at(sa + off(row, c),
                    p + (L == 0 ? (long long)row * smn + k0 + c : (k0 + row) * sk + c) * ES);
    }
}

// ---- operand loaders: one BMN x BK tile of an operand into one smem stage ----
//
// A strided operand: element (mn, k) of the tile at p + (mn * smn + k * sk) * ES, valid for
// mn < MN, k < K (zeros elsewhere). L: smem layout (0 K-major, 1 MN-major). VEC: the layout's
// contiguous dim has global stride 1, so 16-byte cp.async chunks apply when `vec` (p and the
// other stride 16-byte aligned, checked per call). KFAST: element path with consecutive
// threads along k (else along mn).
template <int ES, int BMN, int BK, int NT, int L_, int PAD, int VEC, int KFAST> struct tgc_ld {
    static constexpr int L = L_;
    static constexpr int LD = L == 0 ? BK + PAD : BMN + PAD;
    static constexpr int SIZE = (L == 0 ? BMN : BK) * LD; // elements of one stage
    const char *p;
    long long smn, sk, MN, K;
    bool vec;
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        if (VEC && vec) {
            constexpr int V = 16 / ES;
            constexpr int C = (L == 0 ? BK : BMN) / V;
            constexpr int R = L == 0 ? BMN : BK;
            static_assert((R * C) % NT == 0, "vector loader: chunks not a multiple of threads");
            if (MN >= BMN && k0 + BK <= K) {
                tgc_cp_interior<ES, L, R, C, V, NT>(
                    s, p, smn, sk, k0, [](int row, int c) { return (row * LD + c) * ES; });
                return;
            }
#pragma unroll
            for (int i = 0; i < R * C / NT; i++) {
                int e = (int)threadIdx.x + i * NT;
                int row = e / C, c = (e % C) * V;
                const char *src;
                int bytes;
                if (L == 0) {
                    long long kk = k0 + c;
                    bool ok = row < MN && kk < K;
                    bytes = ok ? (int)tgc_min_ll(V, K - kk) * ES : 0;
                    src = ok ? p + ((long long)row * smn + kk) * ES : p;
                } else {
                    long long kk = k0 + row;
                    bool ok = kk < K && c < MN;
                    bytes = ok ? (int)tgc_min_ll(V, MN - c) * ES : 0;
                    src = ok ? p + (kk * sk + c) * ES : p;
                }
                tgc_cp16(s + (row * LD + c) * ES, src, bytes);
            }
            return;
        }
        static_assert((BMN * BK) % NT == 0, "element loader: tile not a multiple of threads");
        if (VEC) { // the misaligned fallback of a vector operand: kept small (compile time)
#pragma unroll 1
            for (int i = 0; i < BMN * BK / NT; i++)
                elem(s, k0, i);
        } else {
#pragma unroll 4
            for (int i = 0; i < BMN * BK / NT; i++)
                elem(s, k0, i);
        }
    }
    __device__ __forceinline__ void elem(char *s, long long k0, int i) const
    {
        int e = (int)threadIdx.x + i * NT;
        int k = KFAST ? e % BK : e / BMN, mn = KFAST ? e / BK : e % BMN;
        long long kk = k0 + k;
        bool ok = mn < MN && kk < K;
        const char *src = ok ? p + ((long long)mn * smn + kk * sk) * ES : p;
        char *dst = s + (L == 0 ? mn * LD + k : k * LD + mn) * ES;
        if (ES == 4)
            tgc_cp4(dst, src, ok ? 4 : 0);
        else
            *(unsigned short *)dst = ok ? __ldg((const unsigned short *)src) : (unsigned short)0;
    }
};

// ---- the swizzled stages of the wgmma path ----
// A stage holds a BMN x BK operand tile in wgmma's canonical 128-byte-swizzle layout, K-major
// (L 0: rows of BK elements, cut into 128-byte column blocks of BMN rows each) or MN-major (L
// 1: rows of BMN elements per k, cut into 128-byte blocks of BK rows each). In both, the
// 16-byte chunk c of 128-byte row r lands at chunk c ^ (r % 8); the stage starts on a
// 1024-byte boundary, where the hardware's swizzle pattern repeats. Byte offset of element
// (mn, k):
template <int L, int BMN, int BK, int ES> __device__ __forceinline__ int tgc_sw_off(int mn, int k)
{
    if (L == 0) {
        int b = k * ES;
        return (b >> 7) * (BMN * 128) + mn * 128 + ((((b >> 4) & 7) ^ (mn & 7)) << 4) + (b & 15);
    }
    int b = mn * ES;
    return (b >> 7) * (BK * 128) + k * 128 + ((((b >> 4) & 7) ^ (k & 7)) << 4) + (b & 15);
}

// An fp32 operand value rounded for the wgmma of MODE (TGC_TPL_ROUNDS): to tf32 (cvt.rna)
// or to bf16 (cvt.rn), as fp32 bits
template <int MODE> __device__ __forceinline__ float tgc_round_op(float x)
{
    return __uint_as_float(MODE == TGC_TPL_BF16X ? tgc_to_bf16_f32(x) : tgc_to_tf32(x));
}

// An fp32 stage of BYTES bytes rounded in place for MODE (tgc_round_op), in 16-byte chunks
// spread over nt threads (tid < nt): consecutive threads, consecutive chunks (no bank
// conflicts).
template <int BYTES, int MODE>
__device__ __forceinline__ void tgc_round_chunks(char *s, int tid, int nt)
{
    static_assert(BYTES % 16 == 0, "fp32 stage rounding: whole 16-byte chunks");
#pragma unroll 4
    for (int i = tid; i < BYTES / 16; i += nt) {
        float4 v = *(float4 *)(s + 16 * i);
        v.x = tgc_round_op<MODE>(v.x);
        v.y = tgc_round_op<MODE>(v.y);
        v.z = tgc_round_op<MODE>(v.z);
        v.w = tgc_round_op<MODE>(v.w);
        *(float4 *)(s + 16 * i) = v;
    }
}
// the same by all the block's threads
template <int BYTES, int MODE> __device__ __forceinline__ void tgc_round_stage(char *s)
{
    tgc_round_chunks<BYTES, MODE>(s, (int)threadIdx.x, (int)blockDim.x);
}

// tgc_ld's operand loader for a swizzled stage (same fields, same bounds; no pads).
template <int ES, int BMN, int BK, int NT, int L_, int VEC, int KFAST> struct tgc_ld_sw {
    static constexpr int L = L_;
    static constexpr int SIZE = BMN * BK; // elements of one stage
    static_assert(BMN % 8 == 0 && BK % 8 == 0 && ((L == 0 ? BK : BMN) * ES) % 128 == 0,
                  "swizzled stage: whole 128-byte rows");
    const char *p;
    long long smn, sk, MN, K;
    bool vec;
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        if (VEC && vec) {
            constexpr int V = 16 / ES;
            constexpr int C = (L == 0 ? BK : BMN) / V;
            constexpr int R = L == 0 ? BMN : BK;
            static_assert((R * C) % NT == 0, "vector loader: chunks not a multiple of threads");
            if (MN >= BMN && k0 + BK <= K) {
                tgc_cp_interior<ES, L, R, C, V, NT>(s, p, smn, sk, k0, [](int row, int c) {
                    return L == 0 ? tgc_sw_off<0, BMN, BK, ES>(row, c)
                                  : tgc_sw_off<1, BMN, BK, ES>(c, row);
                });
                return;
            }
#pragma unroll
            for (int i = 0; i < R * C / NT; i++) {
                int e = (int)threadIdx.x + i * NT;
                int row = e / C, c = (e % C) * V;
                const char *src;
                int bytes, off;
                if (L == 0) {
                    long long kk = k0 + c;
                    bool ok = row < MN && kk < K;
                    bytes = ok ? (int)tgc_min_ll(V, K - kk) * ES : 0;
                    src = ok ? p + ((long long)row * smn + kk) * ES : p;
                    off = tgc_sw_off<0, BMN, BK, ES>(row, c);
                } else {
                    long long kk = k0 + row;
                    bool ok = kk < K && c < MN;
                    bytes = ok ? (int)tgc_min_ll(V, MN - c) * ES : 0;
                    src = ok ? p + (kk * sk + c) * ES : p;
                    off = tgc_sw_off<1, BMN, BK, ES>(c, row);
                }
                tgc_cp16(s + off, src, bytes);
            }
            return;
        }
        static_assert((BMN * BK) % NT == 0, "element loader: tile not a multiple of threads");
        if (VEC) {
#pragma unroll 1
            for (int i = 0; i < BMN * BK / NT; i++)
                elem(s, k0, i);
        } else {
#pragma unroll 4
            for (int i = 0; i < BMN * BK / NT; i++)
                elem(s, k0, i);
        }
    }
    __device__ __forceinline__ void elem(char *s, long long k0, int i) const
    {
        int e = (int)threadIdx.x + i * NT;
        int k = KFAST ? e % BK : e / BMN, mn = KFAST ? e / BK : e % BMN;
        long long kk = k0 + k;
        bool ok = mn < MN && kk < K;
        const char *src = ok ? p + ((long long)mn * smn + kk * sk) * ES : p;
        char *dst = s + tgc_sw_off<L, BMN, BK, ES>(mn, k);
        if (ES == 4)
            tgc_cp4(dst, src, ok ? 4 : 0);
        else
            *(unsigned short *)dst = ok ? __ldg((const unsigned short *)src) : (unsigned short)0;
    }
};

struct tgc_conv_attr {
    int sh, sw, ph, pw, dh, dw, groups;
};

// The im2col operand of a conv (the B side: k = (ci, r, s) of one group, n = (img, oh, ow)),
// gathered straight from x NCHW into an MN-major stage, or a K-major swizzled one (SW);
// padding and edges read as zeros. TN threads side by side along n (consecutive pixels:
// coalesced), NT / TN = RS rows of them: thread t owns the CPT columns t % TN + c * TN (their
// pixel decoded once) and the BK / RS rows t / TN + r * RS of each stage (each row's (ci, r,
// s) decoded once for its CPT columns). The swizzled stages give each thread four columns
// where the tile allows it (fewer decodes per element); the padded ones one row per thread.
template <int ES, int BN, int BK, int NT, int PAD, int SW = 0> struct tgc_im2col {
    static constexpr int L = SW ? 0 : 1;
    static constexpr int LD = BN + PAD;
    static constexpr int SIZE = SW ? BN * BK : BK * LD;
    static constexpr int TN4 = BN / 4 >= 32 ? BN / 4 : 32;
    static constexpr bool FOUR = SW && BN % TN4 == 0 && NT % TN4 == 0 && BK % (NT / TN4) == 0;
    static constexpr int TN = FOUR ? TN4 : BN >= NT ? NT : BN;
    static constexpr int CPT = BN / TN;
    static constexpr int RS = NT / TN;
    static_assert(BN % NT == 0 || NT % BN == 0 || FOUR, "im2col: BN and threads");
    static_assert(BK % RS == 0, "im2col: rows per stage");
    __device__ __forceinline__ static int col(int c)
    {
        return (int)threadIdx.x % TN + c * TN;
    }
    const char *x;
    long long K, HW;
    int H, W, KW, KHW, DH, DW;
    const char *cp[CPT]; // x at the column's (image, group, ih0, iw0)
    int cih[CPT], ciw[CPT];
    __device__ __forceinline__ void init(const char *x_, const tgc_gemm_geom &G,
                                         const tgc_conv_attr &at, long long n0, long long gi)
    {
        x = x_;
        H = (int)G.ch;
        W = (int)G.cw;
        HW = G.ch * G.cw;
        KW = (int)G.kw;
        KHW = (int)(G.kh * G.kw);
        DH = at.dh;
        DW = at.dw;
        long long cg = G.cc / at.groups;
        K = cg * G.kh * G.kw;
        long long ohw = G.oh * G.ow, ntot = G.cn * ohw;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            long long n = n0 + col(c);
            if (n < ntot) {
                long long img = n / ohw, q = n - img * ohw;
                int oh = (int)(q / G.ow), ow = (int)(q - (long long)oh * G.ow);
                int ih0 = oh * at.sh - at.ph, iw0 = ow * at.sw - at.pw;
                cih[c] = ih0;
                ciw[c] = iw0;
                cp[c] = x + ((img * G.cc + gi * cg) * HW + (long long)ih0 * W + iw0) * ES;
            } else {
                cih[c] = -(1 << 28); // every tap out of bounds
                ciw[c] = 0;
                cp[c] = x;
            }
        }
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        const unsigned sa = tgc_smem_addr(s);
        const int kr0 = (int)threadIdx.x / TN;
#pragma unroll 4
        for (int r = 0; r < BK / RS; r++) {
            int k = kr0 + r * RS;
            long long kk = k0 + k;
            int rd = -(1 << 28), sd = 0;
            long long koff = 0;
            if (kk < K) {
                int k32 = (int)kk; // K < 2^31: 32-bit division (by a constant when KH, KW are)
                int ci = k32 / KHW, rr = k32 - ci * KHW;
                int kr = rr / KW, ks = rr - kr * KW;
                rd = kr * DH;
                sd = ks * DW;
                koff = (long long)ci * HW + (long long)rd * W + sd;
            }
            const long long kb = koff * ES;
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                int ih = cih[c] + rd, iw = ciw[c] + sd;
                bool ok = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
                const char *src = ok ? cp[c] + kb : x;
                const int n = col(c);
                const int off = SW ? tgc_sw_off<0, BN, BK, ES>(n, k) : (k * LD + n) * ES;
                if (ES == 4)
                    tgc_cp4_at(sa + off, src, ok ? 4 : 0);
                else
                    *(unsigned short *)(s + off) =
                        ok ? __ldg((const unsigned short *)src) : (unsigned short)0;
            }
        }
    }
};

// The im2col operand of a channels-last conv (x NHWC, the weights OHWI: k = (r, s, ci) of one
// group, ci fastest; n = (img, oh, ow)). Each pixel's k run within one tap is contiguous in
// x, so a stage is filled in 16-byte chunks of V channels: chunk c of row n of the tile
// (K-major, L 0, padded or swizzled SW; or MN-major, L 1, fp32 only, as four 4-byte copies).
// Thread t owns the chunk column (t % C) V of every k tile (its tap decoded once per tile) and
// the rows t / C + i NT / C (their pixel decoded once, in init, kept as a 32-bit pixel index).
// `vec` (per call): x 16-byte aligned, the channels of x and of a group multiples of V (no
// chunk straddles a tap) and fewer than 2^31 pixels (`pix`). Otherwise channel counts no
// multiple of V (3-channel stems) take the same rows' chunk elements one by one, each
// element's tap decoded once for all the rows; an unaligned x or more pixels decodes each
// element alone.
template <int ES, int BN, int BK, int NT, int L_, int PAD, int SW> struct tgc_im2col_cl {
    static constexpr int L = L_;
    static constexpr int LD = L == 0 ? BK + PAD : BN + PAD;
    static constexpr int SIZE = SW ? BN * BK : (L == 0 ? BN : BK) * LD;
    static constexpr int V = 16 / ES;
    static constexpr int C = BK / V;
    static constexpr int CPT = BN * C / NT;
    static_assert(BK % V == 0 && NT % C == 0 && (BN * C) % NT == 0, "im2col_cl: chunks and threads");
    static_assert((BN * BK) % NT == 0, "im2col_cl: elements and threads");
    static_assert(L == 0 || (ES == 4 && !SW), "im2col_cl: MN-major stages are fp32, unswizzled");
    const char *x;
    long long K, ohw, ntot, n0;
    int H, W, CH, CG, KW, OW, SH, SWD, PH, PW, DH, DW, gofs;
    bool vec, pix;
    int cpx[CPT]; // the row's pixel (image, ih0, iw0) of x, as (image H + ih0) W + iw0
    int cih[CPT], ciw[CPT];
    __device__ __forceinline__ static int row(int i)
    {
        return (int)threadIdx.x / C + i * (NT / C);
    }
    __device__ __forceinline__ void init(const char *x_, const tgc_gemm_geom &G,
                                         const tgc_conv_attr &at, long long n0_, long long gi)
    {
        x = x_;
        H = (int)G.ch;
        W = (int)G.cw;
        CH = (int)G.cc;
        CG = (int)(G.cc / at.groups);
        KW = (int)G.kw;
        OW = (int)G.ow;
        SH = at.sh;
        SWD = at.sw;
        PH = at.ph;
        PW = at.pw;
        DH = at.dh;
        DW = at.dw;
        gofs = (int)(gi * CG);
        K = (long long)CG * G.kh * G.kw;
        ohw = G.oh * G.ow;
        ntot = G.cn * ohw;
        n0 = n0_;
        pix = G.cn * G.ch * G.cw < (1LL << 31);
        vec = pix && (unsigned long long)x % 16 == 0 && CH % V == 0 && CG % V == 0;
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            long long n = n0 + row(i);
            if (n < ntot) {
                long long img = n / ohw, q = n - img * ohw;
                int oh = (int)(q / OW), ow = (int)(q - (long long)oh * OW);
                int ih0 = oh * SH - PH, iw0 = ow * SWD - PW;
                cih[i] = ih0;
                ciw[i] = iw0;
                cpx[i] = (int)((img * H + ih0) * W + iw0);
            } else {
                cih[i] = -(1 << 28); // every tap out of bounds
                ciw[i] = 0;
                cpx[i] = 0;
            }
        }
    }
    __device__ __forceinline__ static int soff(int n, int k)
    {
        return SW ? tgc_sw_off<0, BN, BK, ES>(n, k) : (L == 0 ? n * LD + k : k * LD + n) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        if (!vec) {
            // channel counts no multiple of V (constant: the other branch compiles away when
            // they are multiples, keeping this one's registers out of the chunked kernels)
            if (pix && (CH % V || CG % V)) {
#pragma unroll 1
                for (int j = 0; j < V; j++)
                    elems(s, k0, j);
            } else {
#pragma unroll 1
                for (int i = 0; i < BN * BK / NT; i++)
                    elem(s, k0, i);
            }
            return;
        }
        const int c = ((int)threadIdx.x % C) * V;
        const long long kk = k0 + c;
        int rd = -(1 << 28), td = 0, dp = 0;
        const char *xc = x;
        if (kk < K) { // K < 2^31: 32-bit division (by a constant when CG, KW are)
            int k32 = (int)kk, tap = k32 / CG, ci = k32 - tap * CG;
            int r = tap / KW, t = tap - r * KW;
            rd = r * DH;
            td = t * DW;
            dp = rd * W + td; // the tap's pixel offset
            xc = x + (long long)(gofs + ci) * ES;
        }
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            int ih = cih[i] + rd, iw = ciw[i] + td;
            bool ok = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            const char *src = ok ? xc + (long long)(cpx[i] + dp) * (CH * ES) : x;
            const int n = row(i);
            if (L == 0) {
                tgc_cp16(s + soff(n, c), src, ok ? 16 : 0);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++)
                    tgc_cp4(s + soff(n, c + j), ok ? src + 4 * j : x, ok ? 4 : 0);
            }
        }
    }
    // element j of this thread's chunk in each of its rows (k decoded once for them)
    __device__ __forceinline__ void elems(char *s, long long k0, int j) const
    {
        const int c = ((int)threadIdx.x % C) * V + j;
        const long long kk = k0 + c;
        int rd = -(1 << 28), td = 0, dp = 0;
        const char *xc = x;
        if (kk < K) {
            int k32 = (int)kk, tap = k32 / CG, ci = k32 - tap * CG;
            int r = tap / KW, t = tap - r * KW;
            rd = r * DH;
            td = t * DW;
            dp = rd * W + td;
            xc = x + (long long)(gofs + ci) * ES;
        }
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            int ih = cih[i] + rd, iw = ciw[i] + td;
            bool ok = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            const char *src = ok ? xc + (long long)(cpx[i] + dp) * (CH * ES) : x;
            char *dst = s + soff(row(i), c);
            if (ES == 4)
                tgc_cp4(dst, src, ok ? 4 : 0);
            else
                *(unsigned short *)dst = ok ? __ldg((const unsigned short *)src) : (unsigned short)0;
        }
    }
    // one element, everything decoded here (more than 2^31 pixels)
    __device__ __forceinline__ void elem(char *s, long long k0, int i) const
    {
        const int e = (int)threadIdx.x + i * NT, k = e % BK, n = e / BK;
        const long long kk = k0 + k, nn = n0 + n;
        bool ok = kk < K && nn < ntot;
        const char *src = x;
        if (ok) {
            long long img = nn / ohw, q = nn - img * ohw;
            int oh = (int)(q / OW), ow = (int)(q - (long long)oh * OW);
            int k32 = (int)kk, tap = k32 / CG, ci = k32 - tap * CG;
            int r = tap / KW, t = tap - r * KW;
            int ih = oh * SH - PH + r * DH, iw = ow * SWD - PW + t * DW;
            ok = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            if (ok)
                src = x + (((img * H + ih) * W + iw) * CH + gofs + ci) * ES;
        }
        if (ES == 4)
            tgc_cp4(s + soff(n, k), src, ok ? 4 : 0);
        else
            *(unsigned short *)(s + soff(n, k)) =
                ok ? __ldg((const unsigned short *)src) : (unsigned short)0;
    }
};

// element (mn, k) of a stage in layout L with row length LD
template <int L, int LD> __device__ __forceinline__ int tgc_sidx(int mn, int k)
{
    return L == 0 ? mn * LD + k : k * LD + mn;
}

// ---- the pipelined main loop over k tiles [kb, ke) ----
// Stages: tile kb + i lives in stage i % ST. One barrier per k tile: after it, tile kt is
// complete for every thread and every thread is done with tile kt - 1, whose stage the
// prefetch of tile kt + ST - 1 then overwrites. One commit group per tile (empty ones
// included) keeps cp.async.wait_group's count exact.
// COMP::ASYNC_PROXY, 0 when the compute has none: 1 when it reads shared memory through the
// async proxy (wgmma), which needs a proxy fence between the stage's writes and the barrier,
// and stages aligned to 1024 bytes (the 128-byte swizzle's repeat).
template <class C, class = void> struct tgc_async_of {
    static constexpr int v = 0;
};
template <class C> struct tgc_async_of<C, decltype((void)C::ASYNC_PROXY)> {
    static constexpr int v = C::ASYNC_PROXY;
};

// The async-proxy compute (wgmma) keeps one stage's group of wgmmas in flight while the next
// is issued: tiles are prefetched ST - 2 ahead, so the stage a load overwrites is two tiles
// old, and the wgmma that read it was retired by the compute's wait (at most one group
// pending) before this iteration's barrier. Before the barrier each thread fences its writes
// for the async proxy. fp32 operands (COMPUTE::ROUND, the mode): wgmma would drop the low 13
// mantissa bits of the fp32 values (truncation, biased toward zero), so the stage is rounded
// first (tgc_round_op: to tf32 with cvt.rna, as the mma.sync path rounds its fragments, or to
// bf16 for BF16X), by all threads over the whole stage in 16-byte chunks (tgc_round_stage)
// between a barrier that makes every thread's copies visible and the one before the wgmmas:
// a third of the instructions of rounding each thread's own gathered elements, and no bank
// conflicts.
template <int ST, class LA, class LB, class COMPUTE>
__device__ __forceinline__ void tgc_pipeline_async(const LA &la, const LB &lb, int kb, int ke,
                                                   char *sA, char *sB, int es, int bk,
                                                   COMPUTE &comp)
{
    static_assert(ST >= 3, "one wgmma group in flight needs three stages");
    const int sa = LA::SIZE * es, sb = LB::SIZE * es;
#pragma unroll 1
    for (int s = 0; s < ST - 2; s++) {
        if (kb + s < ke) {
            la.load(sA + s * sa, (long long)(kb + s) * bk);
            lb.load(sB + s * sb, (long long)(kb + s) * bk);
        }
        tgc_cp_commit();
    }
    for (int kt = kb; kt < ke; kt++) {
        tgc_cp_wait<ST - 3>();
        int st = (kt - kb) % ST;
        if constexpr (COMPUTE::ROUND != 0) {
            __syncthreads();
            tgc_round_stage<LA::SIZE * 4, COMPUTE::ROUND>(sA + st * sa);
            tgc_round_stage<LB::SIZE * 4, COMPUTE::ROUND>(sB + st * sb);
        }
        tgc_fence_async_smem<0>();
        __syncthreads();
        int nk = kt + ST - 2;
        if (nk < ke) {
            int sn = (nk - kb) % ST;
            la.load(sA + sn * sa, (long long)nk * bk);
            lb.load(sB + sn * sb, (long long)nk * bk);
        }
        tgc_cp_commit();
        comp(sA + st * sa, sB + st * sb);
    }
    comp.drain();
    tgc_cp_wait<0>();
    __syncthreads();
}

template <int ST, class LA, class LB, class COMPUTE>
__device__ __forceinline__ void tgc_pipeline(const LA &la, const LB &lb, int kb, int ke, char *sA,
                                             char *sB, int es, int bk, COMPUTE &comp)
{
    if constexpr (tgc_async_of<COMPUTE>::v) {
        tgc_pipeline_async<ST>(la, lb, kb, ke, sA, sB, es, bk, comp);
        return;
    }
    const int sa = LA::SIZE * es, sb = LB::SIZE * es;
#pragma unroll 1
    for (int s = 0; s < ST - 1; s++) {
        if (kb + s < ke) {
            la.load(sA + s * sa, (long long)(kb + s) * bk);
            lb.load(sB + s * sb, (long long)(kb + s) * bk);
        }
        tgc_cp_commit();
    }
    for (int kt = kb; kt < ke; kt++) {
        tgc_cp_wait<ST - 2>();
        __syncthreads();
        int nk = kt + ST - 1;
        if (nk < ke) {
            int st = (nk - kb) % ST;
            la.load(sA + st * sa, (long long)nk * bk);
            lb.load(sB + st * sb, (long long)nk * bk);
        }
        tgc_cp_commit();
        int st = (kt - kb) % ST;
        comp(sA + st * sa, sB + st * sb);
    }
    tgc_cp_wait<0>();
    __syncthreads();
}

// Tensor-core compute of one stage: warp tile (BM / WM) x (BN / WN), fragments per mode.
template <int MODE, int BM, int BN, int BK, int WM, int WN, class LA, class LB> struct tgc_tc_comp {
    static constexpr int WTM = BM / WM, WTN = BN / WN, MT = WTM / 16, NT8 = WTN / 8;
    static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile");
    float acc[MT][NT8][4];
    int wm0, wn0, lane;
    __device__ __forceinline__ void init()
    {
        int warp = (int)threadIdx.x / 32;
        lane = (int)threadIdx.x % 32;
        wm0 = (warp / WN) * WTM;
        wn0 = (warp % WN) * WTN;
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT8; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    acc[i][j][r] = 0.0f;
    }
    __device__ __forceinline__ void operator()(const char *sA_, const char *sB_)
    {
        const int g = lane >> 2, t = lane & 3;
        if (MODE == TGC_TPL_TF32) {
            const float *sA = (const float *)sA_, *sB = (const float *)sB_;
#pragma unroll 2 // fully unrolled, 64 x 64 warp tiles spill (the tf32 fragments of 4 k steps)
            for (int kk = 0; kk < BK; kk += 8) {
                unsigned af[MT][4], bf[NT8][2];
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    int m = wm0 + i * 16 + g;
                    af[i][0] = tgc_to_tf32(sA[tgc_sidx<LA::L, LA::LD>(m, kk + t)]);
                    af[i][1] = tgc_to_tf32(sA[tgc_sidx<LA::L, LA::LD>(m + 8, kk + t)]);
                    af[i][2] = tgc_to_tf32(sA[tgc_sidx<LA::L, LA::LD>(m, kk + t + 4)]);
                    af[i][3] = tgc_to_tf32(sA[tgc_sidx<LA::L, LA::LD>(m + 8, kk + t + 4)]);
                }
#pragma unroll
                for (int j = 0; j < NT8; j++) {
                    int n = wn0 + j * 8 + g;
                    bf[j][0] = tgc_to_tf32(sB[tgc_sidx<LB::L, LB::LD>(n, kk + t)]);
                    bf[j][1] = tgc_to_tf32(sB[tgc_sidx<LB::L, LB::LD>(n, kk + t + 4)]);
                }
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT8; j++)
                        tgc_mma_tf32(acc[i][j], af[i], bf[j]);
            }
        } else if (MODE == TGC_TPL_BF16X) {
            const float *sA = (const float *)sA_, *sB = (const float *)sB_;
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                unsigned af[MT][4], bf[NT8][2];
                const int k0 = kk + 2 * t;
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    int m = wm0 + i * 16 + g;
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        int mm = m + (r & 1) * 8, kx = k0 + (r >> 1) * 8;
                        af[i][r] = tgc_pack_bf16(sA[tgc_sidx<LA::L, LA::LD>(mm, kx)],
                                                 sA[tgc_sidx<LA::L, LA::LD>(mm, kx + 1)]);
                    }
                }
#pragma unroll
                for (int j = 0; j < NT8; j++) {
                    int n = wn0 + j * 8 + g;
#pragma unroll
                    for (int r = 0; r < 2; r++)
                        bf[j][r] = tgc_pack_bf16(sB[tgc_sidx<LB::L, LB::LD>(n, k0 + r * 8)],
                                                 sB[tgc_sidx<LB::L, LB::LD>(n, k0 + r * 8 + 1)]);
                }
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT8; j++)
                        tgc_mma_16<1>(acc[i][j], af[i], bf[j]);
            }
        } else {
            const unsigned short *sA = (const unsigned short *)sA_,
                                 *sB = (const unsigned short *)sB_;
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                unsigned af[MT][4], bf[NT8][2];
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    int m0 = wm0 + i * 16;
                    if (LA::L == 0)
                        tgc_ldsm_x4<0>(af[i], sA + (m0 + (lane & 15)) * LA::LD + kk +
                                                  (lane >> 4) * 8);
                    else
                        tgc_ldsm_x4<1>(af[i], sA + (kk + (lane & 7) + (lane >> 4) * 8) * LA::LD +
                                                  m0 + ((lane >> 3) & 1) * 8);
                }
#pragma unroll
                for (int j = 0; j < NT8; j += 2) {
                    int n0 = wn0 + j * 8;
                    unsigned r[4];
                    if (LB::L == 0)
                        tgc_ldsm_x4<0>(r, sB + (n0 + (lane & 7) + (lane >> 4) * 8) * LB::LD + kk +
                                              ((lane >> 3) & 1) * 8);
                    else
                        tgc_ldsm_x4<1>(r, sB + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * LB::LD +
                                              n0 + (lane >> 4) * 8);
                    bf[j][0] = r[0];
                    bf[j][1] = r[1];
                    bf[j + 1][0] = r[2];
                    bf[j + 1][1] = r[3];
                }
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT8; j++)
                        tgc_mma_16<MODE == TGC_TPL_BF16>(acc[i][j], af[i], bf[j]);
            }
        }
    }
    static constexpr int NACC = MT * NT8 * 4;
    __device__ __forceinline__ float &at(int q)
    {
        return acc[q / (NT8 * 4)][(q / 4) % NT8][q % 4];
    }
    // tile coordinates of accumulator q
    __device__ __forceinline__ void pos(int q, int &m, int &n) const
    {
        int i = q / (NT8 * 4), j = (q / 4) % NT8, r = q % 4;
        m = wm0 + i * 16 + (lane >> 2) + (r >> 1) * 8;
        n = wn0 + j * 8 + 2 * (lane & 3) + (r & 1);
    }
};

// SIMT fp32 compute: 256 threads as 16 x 16, each an 8 x 8 block made of four 4 x 4 pieces
// at rows ty*4 + {0, 64}, columns tx*4 + {0, 64} (float4 smem reads, conflict free). Both
// operands MN-major.
template <int BK, class LA, class LB> struct tgc_simt_comp {
    static_assert(LA::L == 1 && LB::L == 1, "SIMT needs MN-major stages");
    float acc[8][8];
    int tx, ty;
    __device__ __forceinline__ void init()
    {
        tx = (int)threadIdx.x % 16;
        ty = (int)threadIdx.x / 16;
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[i][j] = 0.0f;
    }
    __device__ __forceinline__ void operator()(const char *sA_, const char *sB_)
    {
        const float *sA = (const float *)sA_, *sB = (const float *)sB_;
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float4 a0 = *(const float4 *)(sA + k * LA::LD + ty * 4);
            float4 a1 = *(const float4 *)(sA + k * LA::LD + 64 + ty * 4);
            float4 b0 = *(const float4 *)(sB + k * LB::LD + tx * 4);
            float4 b1 = *(const float4 *)(sB + k * LB::LD + 64 + tx * 4);
            float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
    static constexpr int NACC = 64;
    __device__ __forceinline__ float &at(int q)
    {
        return acc[q / 8][q % 8];
    }
    __device__ __forceinline__ void pos(int q, int &m, int &n) const
    {
        int i = q / 8, j = q % 8;
        m = (i >> 2) * 64 + ty * 4 + (i & 3);
        n = (j >> 2) * 64 + tx * 4 + (j & 3);
    }
};

// wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride
// byte offsets (K-major: LBO unused, SBO the 1024 bytes between 8-row groups; MN-major: LBO
// between 64-element blocks along MN, SBO between 8-row groups along K).
__device__ __forceinline__ unsigned long long tgc_wgmma_desc(unsigned addr, unsigned lbo,
                                                             unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// Hopper compute of one stage: NWG consumer warpgroups, WGN of them side by side along N,
// NWG / WGN along M: each a 64 x (BN / WGN) slab of the tile with wgmma m64nNk16 (f16 /
// bf16) or m64nNk8 (tf32, and BF16X's bf16-rounded fp32), N = BN / WGN, from the swizzled
// stages (MMA: the rendered instruction, MMA::run(acc, desc_a, desc_b)). The stage's wgmmas are committed as one group
// before returning it waits until at most that group is pending (tgc_pipeline_async),
// drain() until none is.
template <int MODE, int BM, int BN, int BK, int NWG, int WGN, class LA, class LB, class MMA>
struct tgc_wgmma_comp {
    static constexpr int ASYNC_PROXY = 1;
    // the mode whose rounding the fp32 stages take (tgc_round_op), 0 for f16 / bf16 stages
    static constexpr int ROUND = TGC_TPL_ROUNDS(MODE) ? MODE : 0;
    static constexpr int ES = MODE >= TGC_TPL_F16 ? 2 : 4;
    static constexpr int KS = ROUND ? 8 : 16;
    static constexpr int WGM = NWG / WGN, WN = BN / WGN;
    static_assert(NWG % WGN == 0 && BM == 64 * WGM && BN % WGN == 0 && WN % 16 == 0 &&
                      WN <= 256 && BK % KS == 0,
                  "wgmma tile");
    static_assert(LB::L == 0 || (WN * ES) % 128 == 0, "wgmma: MN-major B slabs of 128 bytes");
    static_assert(!ROUND || (LA::L == 0 && LB::L == 0), "tf32 wgmma: K-major");
    static constexpr int NACC = WN / 2;
    float acc[NACC];
    int wgm, wgn, wl;
    // wg: this thread's consumer warpgroup (the warp-specialized kernel's consumers follow
    // its producer warpgroup)
    __device__ __forceinline__ void init(int wg = (int)threadIdx.x / 128)
    {
        wgm = wg / WGN;
        wgn = wg % WGN;
        wl = (int)threadIdx.x % 128;
#pragma unroll
        for (int q = 0; q < NACC; q++)
            acc[q] = 0.0f;
    }
    __device__ __forceinline__ void operator()(const char *sA, const char *sB)
    {
        const unsigned a0 = tgc_smem_addr(sA), b0 = tgc_smem_addr(sB);
#pragma unroll
        for (int q = 0; q < NACC; q++)
            tgc_reg_fence(acc[q]);
        tgc_wgmma_fence<0>();
#pragma unroll
        for (int kk = 0; kk < BK; kk += KS) {
            const unsigned kb = (unsigned)(kk * ES);
            unsigned long long da, db;
            if (LA::L == 0)
                da = tgc_wgmma_desc(a0 + (kb >> 7) * (BM * 128) + wgm * 64 * 128 + (kb & 127), 16,
                                    1024);
            else
                da = tgc_wgmma_desc(a0 + ((wgm * 64 * ES) >> 7) * (BK * 128) + kk * 128, BK * 128,
                                    1024);
            if (LB::L == 0)
                db = tgc_wgmma_desc(b0 + (kb >> 7) * (BN * 128) + wgn * WN * 128 + (kb & 127), 16,
                                    1024);
            else
                db = tgc_wgmma_desc(b0 + ((wgn * WN * ES) >> 7) * (BK * 128) + kk * 128, BK * 128,
                                    1024);
            MMA::run(acc, da, db);
        }
        tgc_wgmma_commit<0>();
        tgc_wgmma_wait<1>();
#pragma unroll
        for (int q = 0; q < NACC; q++)
            tgc_reg_fence(acc[q]);
    }
    __device__ __forceinline__ void drain()
    {
        tgc_wgmma_wait<0>();
#pragma unroll
        for (int q = 0; q < NACC; q++)
            tgc_reg_fence(acc[q]);
    }
    __device__ __forceinline__ float &at(int q)
    {
        return acc[q];
    }
    // the wgmma accumulator layout: warp w of the warpgroup holds rows 16w .. 16w + 15; in
    // each 8-column block j, lane l holds (l / 4, 2 (l % 4) + {0, 1}) and 8 rows below
    __device__ __forceinline__ void pos(int q, int &m, int &n) const
    {
        int w = wl / 32, lane = wl % 32, j = q / 4, r = q % 4;
        m = wgm * 64 + w * 16 + (lane >> 2) + (r >> 1) * 8;
        n = wgn * WN + j * 8 + 2 * (lane & 3) + (r & 1);
    }
};

// Split-K: every split's block writes its partial tile (fragment order, coalesced) to the
// workspace, then the last block to arrive for the tile sums all partials in split order
// (deterministic) and returns true; the others return false. Workspace: `tiles` uint
// counters (256-byte rounded; zero before the launch, left zero after it), then the
// partials [tiles][splits][NACC * NT] floats. Split sp of `splits`, thread tid of the NT that
// hold the accumulators and meet at barrier BAR (tgc_bar_sync).
template <int NT, int BAR, class COMP>
__device__ __forceinline__ bool tgc_splitk_at(COMP &c, void *ws, long long tile, long long tiles,
                                              int splits, int sp, int tid)
{
    if (splits <= 1)
        return true;
    __shared__ int tgc_last;
    unsigned *cnt = (unsigned *)ws;
    float *part = (float *)((char *)ws + (tiles * 4 + 255) / 256 * 256);
    const long long tsz = (long long)COMP::NACC * NT;
    float *mine = part + (tile * splits + sp) * tsz;
#pragma unroll
    for (int q = 0; q < COMP::NACC; q++)
        __stcg(mine + (long long)q * NT + tid, c.at(q));
    tgc_bar_sync<BAR, NT>();
    if (tid == 0)
        tgc_last = tgc_arrive_acq_rel(cnt + tile) == (unsigned)(splits - 1);
    tgc_bar_sync<BAR, NT>();
    if (!tgc_last)
        return false;
#pragma unroll
    for (int q = 0; q < COMP::NACC; q++)
        c.at(q) = 0.0f;
    for (int s = 0; s < splits; s++) {
        const float *ps = part + (tile * splits + s) * tsz;
#pragma unroll
        for (int q = 0; q < COMP::NACC; q++)
            c.at(q) += __ldcg(ps + (long long)q * NT + tid);
    }
    if (tid == 0)
        cnt[tile] = 0u;
    return true;
}
// The same for a grid of (tiles, splits, batch items): the split is blockIdx.y.
template <int NT, class COMP>
__device__ __forceinline__ bool tgc_splitk(COMP &c, void *ws, long long tile, long long tiles)
{
    return tgc_splitk_at<NT, 0>(c, ws, tile, tiles, (int)gridDim.y, (int)blockIdx.y,
                                (int)threadIdx.x);
}

// Block -> tile with grouped ordering (GROUP tile rows share B tiles in L2).
__device__ __forceinline__ bool tgc_tile_of(long long tiles_m, long long tiles_n, long long &tm,
                                            long long &tn)
{
    const long long GROUP = 8;
    if (tiles_m <= 0 || tiles_n <= 0)
        return false;
    long long pid = blockIdx.x, width = GROUP * tiles_n, gid = pid / width, first = gid * GROUP;
    long long gsz = tiles_m - first < GROUP ? tiles_m - first : GROUP;
    if (gsz <= 0)
        return false;
    tm = first + (pid % width) % gsz;
    tn = (pid % width) / gsz;
    return tm < tiles_m && tn < tiles_n;
}

// The epilogue of a thread's accumulators for the tile at (m0, n0) of batch item bi, in
// bounds: every value before any store, so that the epilogue's loads overlap (see
// cuda_gemm.c).
template <class COMP, class PROB>
__device__ __forceinline__ void tgc_epilogue(COMP &comp, const PROB &pb, long long bi,
                                             long long m0, long long n0)
{
#pragma unroll
    for (int q = 0; q < COMP::NACC; q++) {
        int m, n;
        comp.pos(q, m, n);
        if (m0 + m < pb.M && n0 + n < pb.N)
            comp.at(q) = pb.val(bi, m0 + m, n0 + n, comp.at(q));
    }
#pragma unroll
    for (int q = 0; q < COMP::NACC; q++) {
        int m, n;
        comp.pos(q, m, n);
        if (m0 + m < pb.M && n0 + n < pb.N)
            pb.store(bi, m0 + m, n0 + n, comp.at(q));
    }
}

// ---- the warp-specialized TMA GEMM (sm_90a) ----
// Layout tag of an operand's stages for tgc_wgmma_comp and the problem (0 K-major, 1 MN-major).
template <int L_> struct tgc_lay {
    static constexpr int L = L_;
};

// The first k tile of split sp of `splits` over ktiles (sp = splits: the end).
__device__ __forceinline__ int tgc_split_k0(int ktiles, int sp, int splits)
{
    return (int)((long long)ktiles * sp / splits);
}

// Linear tile t of a persistent block -> (batch item, tile row, tile column), GROUP tile rows
// at a time along the columns (they share B tiles in L2), as tgc_tile_of orders blocks.
__device__ __forceinline__ void tgc_ws_tile(long long t, long long tiles_m, long long tiles_n,
                                            long long &bi, long long &tm, long long &tn)
{
    const long long GROUP = 8, per = tiles_m * tiles_n;
    bi = t / per;
    const long long pid = t - bi * per, width = GROUP * tiles_n, first = pid / width * GROUP;
    const long long gsz = tiles_m - first < GROUP ? tiles_m - first : GROUP;
    tm = first + (pid % width) % gsz;
    tn = (pid % width) / gsz;
}

// One operand's BMN x BK tile at (mn0, k0) of batch item bi into the stage at dst: a box of
// BMN rows of 128 bytes (K-major, L 0), or BMN / BOX boxes of BK rows of BOX elements, BK x
// 128 bytes apart (MN-major, L 1); their bytes complete a transaction of barrier bar.
template <int L, int BMN, int BK, int BOX>
__device__ __forceinline__ void tgc_tma_tile(unsigned dst, const tgc_tmap *m, unsigned bar, int k0,
                                             int mn0, int bi)
{
    if (L == 0) {
        tgc_tma_load3<0>(dst, m, bar, k0, mn0, bi);
        return;
    }
#pragma unroll
    for (int j = 0; j < BMN / BOX; j++)
        tgc_tma_load3<0>(dst + j * BK * 128, m, bar, mn0 + BOX * j, k0, bi);
}

// An fp32 tile stored MN-major by TMA (raw: BMN / 32 boxes, each BK rows of 32 floats with the
// 128-byte swizzle) rounded for MODE (tgc_round_op) into the K-major swizzled stage dst (BMN
// rows of BK floats) that tf32 wgmma needs, by NT threads (tid < NT). Each thread takes four
// consecutive mn at one k, consecutive threads consecutive k: the 16-byte reads and the
// 4-byte writes of a warp fall in distinct banks.
template <int BMN, int BK, int NT, int MODE>
__device__ __forceinline__ void tgc_tf32_transpose(const char *raw, char *dst, int tid)
{
    static_assert(BK * 4 == 128 && BMN % 32 == 0, "tf32 transpose: 128-byte k rows");
#pragma unroll 1
    for (int u = tid; u < BMN / 4 * BK; u += NT) {
        const int k = u % BK, mn4 = u / BK;
        const float4 v =
            *(const float4 *)(raw + (mn4 / 8) * BK * 128 + k * 128 + (((mn4 % 8) ^ (k & 7)) << 4));
        const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
            *(float *)(dst + tgc_sw_off<0, BMN, BK, 4>(mn4 * 4 + i, k)) = tgc_round_op<MODE>(e[i]);
    }
}

// The whole warp-specialized kernel, a persistent block per SM looping over the tiles
// blockIdx.x, blockIdx.x + gridDim.x, ... of every batch item. Warpgroup 0 produces: its
// first thread moves each k tile of A (BM x BK) and B (BN x BK) into stage it % ST of a ring
// with TMA (ta, tb: rank-3 maps {inner, outer, batch} of the operands, boxes of 128 bytes by
// BM / BN rows for a K-major operand, of 64 elements by BK rows for an MN-major one, swizzled
// as the wgmma descriptors read them), after waiting for the stage's `empty` barrier; the
// TMA's bytes complete its `full` barrier. fp32 operands (TF32, BF16X): wgmma would truncate
// fp32 to tf32, so the producer's other three warps round each full stage in place
// (tgc_round_op, as every other path of the mode rounds) and arrive on its `ready` barrier,
// which the consumers wait on instead; an MN-major fp32 operand (which tf32 wgmma cannot
// read) lands in a raw slot of the stage instead, and those warps write it K-major as they
// round it (tgc_tf32_transpose). The
// BM / 64 consumer warpgroups (registers raised with setmaxnreg, the producer's lowered) each
// run wgmma over a 64 x BN slab of the stage with one group in flight, release the stage
// before it (one arrival per warp on `empty`) and, at the end of a tile, apply the epilogue
// from their accumulators while the producer already fills the ring for the next tile.
// Phases: use n of a stage (it / ST) completes phase n of its barriers, so waits use parity
// (it / ST) & 1, the producer's one earlier (the ring starts empty). Split-K (splits > 1, at
// most the k tiles): the blocks loop over units (tile, split) instead, split sp taking k tiles
// [ktiles sp / splits, ktiles (sp + 1) / splits), and the consumers of the split that ends a
// tile sum the partials (tgc_splitk_at, workspace ws) before its epilogue.
template <int MODE, int ST, int BM, int BN, int BK, int AL, int BL, class COMP, class PROB>
__device__ __forceinline__ void tgc_ws_run(const PROB &pb, const tgc_tmap *ta, const tgc_tmap *tb,
                                           void *ws, int splits, char *smem)
{
    constexpr int ES = MODE >= TGC_TPL_F16 ? 2 : 4, NC = BM / 64, ROUND = TGC_TPL_ROUNDS(MODE);
    constexpr unsigned SA = BM * BK * ES, SB = BN * BK * ES;
    static_assert(BK * ES == 128 && BM % 64 == 0 && BN % 64 == 0 && BN <= 256 && BM <= 256,
                  "warp-specialized GEMM tile");
    // TF32 MN-major operands: raw slots after the rings (A's, then B's), one per stage
    constexpr int RA = ROUND && AL, RB = ROUND && BL;
    constexpr int BOX = 128 / ES; // elements of a box along mn for an MN-major operand
    __shared__ unsigned long long tgc_bars[3 * ST]; // (8-byte aligned, as mbarriers need)
    char *base = smem + ((1024u - (tgc_smem_addr(smem) & 1023u)) & 1023u);
    char *raw_a = base + ST * (SA + SB), *raw_b = raw_a + (RA ? ST * SA : 0);
    const unsigned sa0 = tgc_smem_addr(base), sb0 = sa0 + ST * SA, bar0 = tgc_smem_addr(tgc_bars);
    const unsigned ra0 = tgc_smem_addr(raw_a), rb0 = tgc_smem_addr(raw_b);
    // full: bar0 + 8 s; empty: bar0 + 8 (ST + s); ready: bar0 + 8 (2 ST + s)
    const int wg = (int)threadIdx.x / 128;
    if (threadIdx.x == 0) {
#pragma unroll 1
        for (int s = 0; s < ST; s++) {
            tgc_mbar_init<0>(bar0 + 8 * s, 1);
            tgc_mbar_init<0>(bar0 + 8 * (ST + s), NC * 4);
            tgc_mbar_init<0>(bar0 + 8 * (2 * ST + s), 96);
        }
        tgc_mbar_init_fence<0>();
    }
    __syncthreads();
    const long long tiles_m = (pb.M + BM - 1) / BM, tiles_n = (pb.N + BN - 1) / BN;
    const long long total = pb.batch * tiles_m * tiles_n, units = total * splits;
    const int ktiles = (int)((pb.K + BK - 1) / BK);
    // registers: the producer's TMA loop needs few, its TF32 rounding warps some more; the
    // consumers take what the producer gives back. setmaxnreg.inc draws on the CTA's pool
    // only, which holds what the launch allocated (LREG a thread: 64 K / 384 in units of 8)
    // and what setmaxnreg.dec released; an increase the pool cannot meet blocks for ever.
    constexpr int LREG = 65536 / (128 * (NC + 1)) / 8 * 8, PREG = ROUND ? 64 : 40;
    constexpr int CREG = (LREG + (LREG - PREG) / NC) / 8 * 8;
    static_assert(NC * (CREG - LREG) <= LREG - PREG && CREG % 8 == 0 && PREG % 8 == 0,
                  "setmaxnreg: the consumers ask for more registers than the producer frees");
    if (wg == 0) {
        tgc_setmaxnreg_dec<PREG>();
        if (threadIdx.x == 0) {
            tgc_tmap_prefetch<0>(ta);
            tgc_tmap_prefetch<0>(tb);
            int it = 0;
#pragma unroll 1
            for (long long u = blockIdx.x; u < units; u += gridDim.x) {
                long long bi, tm, tn;
                const long long t = u / splits;
                tgc_ws_tile(t, tiles_m, tiles_n, bi, tm, tn);
                const int m0 = (int)(tm * BM), n0 = (int)(tn * BN);
                const int ba = pb.G.a_bs ? (int)bi : 0, bb = pb.G.b_bs ? (int)bi : 0;
                const int sp = (int)(u - t * splits);
#pragma unroll 1
                for (int kt = tgc_split_k0(ktiles, sp, splits);
                     kt < tgc_split_k0(ktiles, sp + 1, splits); kt++, it++) {
                    const int s = it % ST, k0 = kt * BK;
                    const unsigned full = bar0 + 8 * s;
                    tgc_mbar_wait<0>(bar0 + 8 * (ST + s), ((it / ST) & 1) ^ 1);
                    tgc_mbar_expect_tx<0>(full, SA + SB);
                    const unsigned da = (RA ? ra0 : sa0) + s * SA, db = (RB ? rb0 : sb0) + s * SB;
                    tgc_tma_tile<AL, BM, BK, BOX>(da, ta, full, k0, m0, ba);
                    tgc_tma_tile<BL, BN, BK, BOX>(db, tb, full, k0, n0, bb);
                }
            }
        } else if (ROUND && threadIdx.x >= 32) {
            int it = 0;
#pragma unroll 1
            for (long long u = blockIdx.x; u < units; u += gridDim.x) {
                const int sp = (int)(u % splits);
#pragma unroll 1
                for (int kt = tgc_split_k0(ktiles, sp, splits);
                     kt < tgc_split_k0(ktiles, sp + 1, splits); kt++, it++) {
                    const int s = it % ST;
                    tgc_mbar_wait<0>(bar0 + 8 * s, (it / ST) & 1);
                    const int tid = (int)threadIdx.x - 32;
                    if constexpr (RA)
                        tgc_tf32_transpose<BM, BK, 96, MODE>(raw_a + s * SA, base + s * SA, tid);
                    else
                        tgc_round_chunks<SA, MODE>(base + s * SA, tid, 96);
                    if constexpr (RB)
                        tgc_tf32_transpose<BN, BK, 96, MODE>(raw_b + s * SB,
                                                             base + ST * SA + s * SB, tid);
                    else
                        tgc_round_chunks<SB, MODE>(base + ST * SA + s * SB, tid, 96);
                    tgc_fence_async_smem<0>();
                    tgc_mbar_arrive<0>(bar0 + 8 * (2 * ST + s));
                }
            }
        }
        return;
    }
    tgc_setmaxnreg_inc<CREG>();
    const bool lead = threadIdx.x % 32 == 0;
    COMP comp;
    int it = 0;
#pragma unroll 1
    for (long long u = blockIdx.x; u < units; u += gridDim.x) {
        long long bi, tm, tn;
        const long long t = u / splits;
        tgc_ws_tile(t, tiles_m, tiles_n, bi, tm, tn);
        const long long m0 = tm * BM, n0 = tn * BN;
        const int sp = (int)(u - t * splits), kb = tgc_split_k0(ktiles, sp, splits),
                  ke = tgc_split_k0(ktiles, sp + 1, splits);
        comp.init(wg - 1);
#pragma unroll 1
        for (int kt = kb; kt < ke; kt++, it++) {
            const int s = it % ST;
            tgc_mbar_wait<0>(bar0 + 8 * ((ROUND ? 2 * ST : 0) + s), (it / ST) & 1);
            comp(base + s * SA, base + ST * SA + s * SB);
            if (kt > kb && lead) // the group before this one has completed: its stage is free
                tgc_mbar_arrive<0>(bar0 + 8 * (ST + (it - 1) % ST));
        }
        comp.drain();
        if (ke > kb && lead)
            tgc_mbar_arrive<0>(bar0 + 8 * (ST + (it - 1) % ST));
        if (!tgc_splitk_at<NC * 128, 1>(comp, ws, t, total, splits, sp, (int)threadIdx.x - 128))
            continue;
        tgc_epilogue(comp, pb, bi, m0, n0);
    }
}

// The whole template kernel: PROB gives the sizes, the loaders per (batch item, tile) and the
// epilogue; COMP the compute; one block per (tile, split, batch item).
template <int ST, int BM, int BN, int BK, int NT, int ES, class COMP, class PROB>
__device__ __forceinline__ void tgc_tpl_run(const PROB &pb, void *ws, char *smem)
{
    const long long tiles_m = (pb.M + BM - 1) / BM, tiles_n = (pb.N + BN - 1) / BN;
    long long tm, tn;
    if (!tgc_tile_of(tiles_m, tiles_n, tm, tn))
        return;
    const long long m0 = tm * BM, n0 = tn * BN;
    const int ktiles = (int)((pb.K + BK - 1) / BK);
    const int splits = (int)gridDim.y, sp = (int)blockIdx.y;
    const int kb = tgc_split_k0(ktiles, sp, splits), ke = tgc_split_k0(ktiles, sp + 1, splits);
    for (long long bi = blockIdx.z; bi < pb.batch; bi += gridDim.z) {
        typename PROB::LA la;
        typename PROB::LB lb;
        pb.loaders(bi, m0, n0, la, lb);
        COMP comp;
        comp.init();
        char *sA = smem;
        if constexpr (tgc_async_of<COMP>::v)
            sA += (1024u - (tgc_smem_addr(smem) & 1023u)) & 1023u;
        char *sB = sA + ST * PROB::LA::SIZE * ES;
        tgc_pipeline<ST>(la, lb, kb, ke, sA, sB, ES, BK, comp);
        if (!tgc_splitk<NT>(comp, ws, bi * tiles_m * tiles_n + blockIdx.x,
                            pb.batch * tiles_m * tiles_n))
            continue;
        tgc_epilogue(comp, pb, bi, m0, n0);
        __syncthreads();
    }
}

// GEMM problem: A(bi, m, k) = A[a_off + bi*a_bs + m*a_rs + k*a_cs], B(bi, k, n) likewise.
template <class LA_, class LB_, int ES, class EP> struct tgc_gemm_prob {
    typedef LA_ LA;
    typedef LB_ LB;
    const char *A, *B;
    tgc_gemm_geom G;
    bool va, vb;
    EP ep;
    long long batch, M, N, K;
    __device__ __forceinline__ void setup()
    {
        batch = G.batch;
        M = G.M;
        N = G.N;
        K = G.K;
        // 16-byte chunks need the tile bases aligned: the base pointer and the strides
        // between rows of chunks, for every tile and batch item
        const char *a0 = A + G.a_off * ES, *b0 = B + G.b_off * ES;
        va = ((unsigned long long)a0 % 16 == 0) && ((LA::L == 0 ? G.a_rs : G.a_cs) * ES) % 16 == 0 &&
             (G.a_bs * ES) % 16 == 0;
        vb = ((unsigned long long)b0 % 16 == 0) && ((LB::L == 0 ? G.b_cs : G.b_rs) * ES) % 16 == 0 &&
             (G.b_bs * ES) % 16 == 0;
    }
    __device__ __forceinline__ void loaders(long long bi, long long m0, long long n0, LA &la,
                                            LB &lb) const
    {
        la.p = A + (G.a_off + bi * G.a_bs + m0 * G.a_rs) * ES;
        la.smn = G.a_rs;
        la.sk = G.a_cs;
        la.MN = M - m0;
        la.K = K;
        la.vec = va;
        lb.p = B + (G.b_off + bi * G.b_bs + n0 * G.b_cs) * ES;
        lb.smn = G.b_cs;
        lb.sk = G.b_rs;
        lb.MN = N - n0;
        lb.K = K;
        lb.vec = vb;
    }
    __device__ __forceinline__ float val(long long bi, long long m, long long n, float v) const
    {
        return ep.val(bi, m, n, v);
    }
    __device__ __forceinline__ void store(long long bi, long long m, long long n, float v) const
    {
        ep.store(bi, m, n, v);
    }
};

// Conv problem (implicit GEMM, batch folded into the pixels): per group gi (the batch
// index), M = output channels of the group, N = images x OH x OW, K = (C / groups) x KH x KW;
// A = the weights [co][k] (K-major), B = im2col(x). The epilogue sees (image, channel,
// pixel) as its (batch, m, n) vars, as lower.c and the CPU conv define them.
template <class LA_, class LB_, int ES, class EP> struct tgc_conv_prob {
    typedef LA_ LA;
    typedef LB_ LB;
    const char *A, *B;
    tgc_gemm_geom G;
    tgc_conv_attr at;
    bool va, vb;
    EP ep;
    long long batch, M, N, K, ohw;
    __device__ __forceinline__ void setup()
    {
        batch = at.groups;
        M = G.co / at.groups;
        ohw = G.oh * G.ow;
        N = G.cn * ohw;
        K = (G.cc / at.groups) * G.kh * G.kw;
        va = ((unsigned long long)A % 16 == 0) && (K * ES) % 16 == 0;
        vb = false;
    }
    __device__ __forceinline__ void loaders(long long gi, long long m0, long long n0, LA &la,
                                            LB &lb) const
    {
        la.p = A + ((gi * M + m0) * K) * ES;
        la.smn = K;
        la.sk = 1;
        la.MN = M - m0;
        la.K = K;
        la.vec = va;
        lb.init(B, G, at, n0, gi);
    }
    // n = (image, pixel); 32-bit division where N allows it
    __device__ __forceinline__ void split(long long n, long long &img, long long &q) const
    {
        if (N < (1LL << 31)) {
            unsigned i = (unsigned)n / (unsigned)ohw;
            img = i;
            q = (long long)((unsigned)n - i * (unsigned)ohw);
        } else {
            img = n / ohw;
            q = n - img * ohw;
        }
    }
    __device__ __forceinline__ float val(long long gi, long long m, long long n, float v) const
    {
        long long img, q;
        split(n, img, q);
        return ep.val(img, gi * M + m, q, v);
    }
    __device__ __forceinline__ void store(long long gi, long long m, long long n, float v) const
    {
        long long img, q;
        split(n, img, q);
        ep.store(img, gi * M + m, q, v);
    }
};

#endif // TGC_GEMM_LIB_V1
