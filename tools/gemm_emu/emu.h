// Host emulation of the CUDA subset the GEMM / conv template library uses
// (src/backend/cuda/cuda_gemm_lib.cuh), so a rendered template kernel can run on the CPU as
// C++: each CUDA thread of a block is a pthread, __syncthreads a barrier, and the
// warp-collective instructions (mma.sync, ldmatrix) exchange their operands through a
// per-warp area between two warp barriers and then compute exactly what the PTX ISA's
// fragment layouts say each lane receives. Blocks run one at a time.
//
// Shared-memory races are made visible, deterministically:
//   - cp.async lands as late as the PTX rules allow: at issue the destination is poisoned
//     (0xff bytes: NaN for f32, f16 and bf16) and the data (or the zero fill) is written only
//     when the issuing thread's cp.async.wait_group retires its group. A read of a stage
//     before its data is waited for and published by a barrier, or an overwrite of a stage
//     that another warp still reads in the same barrier interval, shows up as NaNs in the
//     output.
//   - warps run one after another between two __syncthreads (the 32 lanes of the running
//     warp concurrently, for the warp-collective instructions), in ascending warp order in
//     even barrier intervals and descending order in odd ones (TGC_EMU_FLIP=1 in the
//     environment swaps the two), so a write and a read of two warps in one interval meet in
//     both orders over the pipeline's repeated intervals.
// A development tool (tools/gemm_emu/run.sh), not part of the library.
#ifndef TGC_GEMM_EMU_H
#define TGC_GEMM_EMU_H
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>

#define TGC_GEMM_EMU 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

struct tgc_dim3 {
    unsigned x, y, z;
};
extern thread_local tgc_dim3 threadIdx;
extern tgc_dim3 blockIdx, gridDim, blockDim;
extern char *tgc_emu_smem;
#define TGC_DYN_SMEM(name) char *name = tgc_emu_smem

struct float4 {
    float x, y, z, w;
};

void tgc_emu_sync();      // __syncthreads
void tgc_emu_warp_sync(); // all 32 lanes of the calling thread's warp
#define __syncthreads() tgc_emu_sync()

template <class T> inline T __ldg(const T *p)
{
    return *p;
}
template <class T> inline T __ldcg(const T *p)
{
    return *(volatile const T *)p;
}
template <class T> inline void __stcg(T *p, T v)
{
    *(volatile T *)p = v;
}
inline void __threadfence()
{
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
// a named barrier (the consumer warpgroups'): the emulator's block barrier, which the
// producer's warps also pass through (they wait on mbarriers by yielding)
template <int ID, int NT> inline void tgc_bar_sync()
{
    tgc_emu_sync();
}
inline unsigned tgc_arrive_acq_rel(unsigned *p)
{
    return __atomic_fetch_add(p, 1u, __ATOMIC_ACQ_REL);
}
inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned tgc_f2u(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

// cp.async: copy src-size bytes, zero the rest of cp-size; deferred (see the top)
void tgc_emu_cp_async(void *dst, const void *src, int cp_size, int bytes);
void tgc_emu_cp_commit();
void tgc_emu_cp_wait(int n);
inline void tgc_cp16(void *dst, const void *src, int bytes)
{
    if (bytes < 0 || bytes > 16 || ((uintptr_t)dst % 16) || (bytes && ((uintptr_t)src % 16))) {
        fprintf(stderr, "emu: bad cp.async 16 (dst %p src %p bytes %d)\n", dst, src, bytes);
        abort();
    }
    tgc_emu_cp_async(dst, src, 16, bytes);
}
inline void tgc_cp4(void *dst, const void *src, int bytes)
{
    if ((bytes != 0 && bytes != 4) || ((uintptr_t)dst % 4) || (bytes && ((uintptr_t)src % 4))) {
        fprintf(stderr, "emu: bad cp.async 4\n");
        abort();
    }
    tgc_emu_cp_async(dst, src, 4, bytes);
}
inline void tgc_cp16_at(unsigned dst, const void *src)
{
    tgc_cp16(tgc_emu_smem + dst, src, 16);
}
inline void tgc_cp4_at(unsigned dst, const void *src, int bytes)
{
    tgc_cp4(tgc_emu_smem + dst, src, bytes);
}
inline void tgc_cp_commit()
{
    tgc_emu_cp_commit();
}
template <int N> inline void tgc_cp_wait()
{
    tgc_emu_cp_wait(N);
}

// cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero
inline unsigned tgc_to_tf32(float x)
{
    unsigned u = tgc_f2u(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return u;
    u += 0x1000u;
    return u & 0xffffe000u;
}
inline unsigned short tgc_bf16_rn(float f)
{
    unsigned u = tgc_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((u >> 16) | 0x40);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// cvt.rn.bf16.f32, widened back to fp32 bits
inline unsigned tgc_to_bf16_f32(float x)
{
    return (unsigned)tgc_bf16_rn(x) << 16;
}
inline float tgc_f16_to_f32(unsigned short h)
{
    unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0)
        return (s ? -1.0f : 1.0f) * (float)m * 5.9604645e-8f;
    if (e == 31)
        return __uint_as_float(s | 0x7f800000u | (m << 13));
    return __uint_as_float(s | ((e - 15 + 127) << 23) | (m << 13));
}
inline unsigned short tgc_f16_rn(float f)
{
    // via double rounding-free path: scale search (inputs in the emulator are modest)
    unsigned u = tgc_f2u(f);
    unsigned s = (u >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a >= 65520.0f)
        return (unsigned short)(s | 0x7c00u);
    if (a < 6.103515625e-05f) { // subnormal: multiples of 2^-24
        unsigned q = (unsigned)nearbyintf(a * 16777216.0f);
        return (unsigned short)(s | q);
    }
    int e = (int)((u >> 23) & 0xff) - 127;
    unsigned m = u & 0x7fffffu, h = s | ((unsigned)(e + 15) << 10) | (m >> 13), r = m & 0x1fffu;
    if (r > 0x1000u || (r == 0x1000u && (h & 1u)))
        h++;
    return (unsigned short)h;
}
inline unsigned tgc_pack_bf16(float lo, float hi)
{
    return (unsigned)tgc_bf16_rn(lo) | ((unsigned)tgc_bf16_rn(hi) << 16);
}
inline float tgc_bits_f32(unsigned short h, int is_bf16)
{
    return is_bf16 ? __uint_as_float((unsigned)h << 16) : tgc_f16_to_f32(h);
}
inline unsigned short tgc_f32_bits(float f, int is_bf16)
{
    return is_bf16 ? tgc_bf16_rn(f) : tgc_f16_rn(f);
}
inline float tgc_half_of(unsigned w, int hi, int is_bf16)
{
    return tgc_bits_f32((unsigned short)(hi ? w >> 16 : w & 0xffffu), is_bf16);
}

// per-warp exchange area (one block at a time, at most 32 warps)
struct tgc_emu_xchg {
    unsigned a[32][4], b[32][2];
    float c[32][4];
    const void *p[32];
};
extern tgc_emu_xchg tgc_emu_x[32];

inline int tgc_emu_lane()
{
    return (int)threadIdx.x % 32;
}
inline tgc_emu_xchg &tgc_emu_w()
{
    return tgc_emu_x[threadIdx.x / 32];
}

// m16n8k8 tf32: a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4); b0 (k=t, n=g) b1 (t+4, g);
// c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1)
inline void tgc_mma_tf32(float *c, const unsigned *a, const unsigned *b)
{
    tgc_emu_xchg &x = tgc_emu_w();
    int l = tgc_emu_lane();
    for (int i = 0; i < 4; i++)
        x.a[l][i] = a[i], x.c[l][i] = c[i];
    x.b[l][0] = b[0];
    x.b[l][1] = b[1];
    tgc_emu_warp_sync();
    float d[4];
    for (int r = 0; r < 4; r++) {
        int row = l / 4 + (r >> 1) * 8, col = 2 * (l % 4) + (r & 1);
        double s = 0;
        for (int k = 0; k < 8; k++) {
            unsigned av = x.a[(row % 8) * 4 + k % 4][(row >= 8) + 2 * (k >= 4)];
            unsigned bv = x.b[col * 4 + k % 4][k >= 4];
            if ((av & 0x1fffu) || (bv & 0x1fffu)) {
                fprintf(stderr, "emu: mma tf32 operand not rounded to tf32\n");
                abort();
            }
            s += (double)__uint_as_float(av) * (double)__uint_as_float(bv);
        }
        d[r] = (float)(s + x.c[(row % 8) * 4 + col / 2][(row >= 8) * 2 + col % 2]);
    }
    tgc_emu_warp_sync();
    for (int r = 0; r < 4; r++)
        c[r] = d[r];
}

// m16n8k16: a_r holds (row g + (r&1)*8, k 2t + (r>>1)*8 + {0,1}); b_r (k 2t + r*8 + {0,1}, n g)
template <int BF16> inline void tgc_mma_16(float *c, const unsigned *a, const unsigned *b)
{
    tgc_emu_xchg &x = tgc_emu_w();
    int l = tgc_emu_lane();
    for (int i = 0; i < 4; i++)
        x.a[l][i] = a[i], x.c[l][i] = c[i];
    x.b[l][0] = b[0];
    x.b[l][1] = b[1];
    tgc_emu_warp_sync();
    float d[4];
    for (int r = 0; r < 4; r++) {
        int row = l / 4 + (r >> 1) * 8, col = 2 * (l % 4) + (r & 1);
        double s = 0;
        for (int k = 0; k < 16; k++) {
            unsigned aw = x.a[(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)];
            unsigned bw = x.b[col * 4 + (k % 8) / 2][k >= 8];
            s += (double)tgc_half_of(aw, k & 1, BF16) * (double)tgc_half_of(bw, k & 1, BF16);
        }
        d[r] = (float)(s + x.c[(row % 8) * 4 + col / 2][(row >= 8) * 2 + col % 2]);
    }
    tgc_emu_warp_sync();
    for (int r = 0; r < 4; r++)
        c[r] = d[r];
}

// ldmatrix .x4: lane l gives the address of row l % 8 of matrix l / 8 (8 b16 each, 16-byte
// aligned); r[i] of lane l = matrix i's (row l/4, cols 2(l%4), +1), or with .trans
// (rows 2(l%4), +1, col l/4); the lower half holds the first element.
template <int TRANS> inline void tgc_ldsm_x4(unsigned *r, const void *p)
{
    tgc_emu_xchg &x = tgc_emu_w();
    int l = tgc_emu_lane();
    if ((uintptr_t)p % 16) {
        fprintf(stderr, "emu: ldmatrix row address not 16-byte aligned\n");
        abort();
    }
    x.p[l] = p;
    tgc_emu_warp_sync();
    for (int i = 0; i < 4; i++) {
        unsigned short e[2];
        for (int j = 0; j < 2; j++) {
            const unsigned short *row;
            int col;
            if (!TRANS) {
                row = (const unsigned short *)x.p[i * 8 + l / 4];
                col = 2 * (l % 4) + j;
            } else {
                row = (const unsigned short *)x.p[i * 8 + 2 * (l % 4) + j];
                col = l / 4;
            }
            e[j] = row[col];
        }
        r[i] = (unsigned)e[0] | ((unsigned)e[1] << 16);
    }
    tgc_emu_warp_sync();
}

inline long long tgc_min_ll_emu_unused(long long a)
{
    return a;
}

// ---- sm_90a: wgmma from swizzled shared memory ----
// Shared-memory "addresses" are offsets into the block's buffer (allocated 1024-aligned, so
// the swizzle sees the same address bits as on the GPU). wgmma is computed at issue, each
// thread its own accumulator elements, from the descriptors and the canonical 128-byte
// swizzle layouts as the PTX ISA describes them (K-major: 8-row groups SBO apart, rows of
// 128 bytes; MN-major: 64-element blocks LBO apart along MN, 8-row groups SBO apart along K;
// the 16-byte chunk index XORed with address bits 7..9). tf32 operands must come rounded
// (low 13 mantissa bits zero; the tensor cores would drop them).
inline unsigned tgc_smem_addr(const void *p)
{
    return (unsigned)((const char *)p - tgc_emu_smem);
}
template <int X> inline void tgc_fence_async_smem() {}
template <int X> inline void tgc_wgmma_fence() {}
template <int X> inline void tgc_wgmma_commit() {}
template <int N> inline void tgc_wgmma_wait() {}
inline void tgc_reg_fence(float &) {}
// ---- sm_90a: mbarrier, TMA and setmaxnreg, for the warp-specialized kernel ----
// A barrier is emulated by its address (a table in emu.cpp): expected and pending arrivals,
// pending transaction bytes and the completed-phase count. A wait that finds its phase
// incomplete yields the running warp (tgc_emu_yield: the lane counts as at a barrier, so the
// other warps run before it checks again); a yield interval in which nothing arrives is a
// deadlock and aborts. TMA copies the box at issue (zeros outside the tensor), in the
// 128-byte swizzle of the destination's address bits, and completes its bytes on the
// barrier at once. The tensor map is the emulator's own: what tgc_cuda_tmap_desc describes.
#define __grid_constant__
struct tgc_tmap {
    const char *base;
    long long es, dims[3], strides[2];
    unsigned box[2];
};
void tgc_emu_yield();
void tgc_emu_mbar_init(unsigned bar, unsigned count);
void tgc_emu_mbar_arrive(unsigned bar, long long tx); // tx: transaction bytes expected first
void tgc_emu_mbar_complete(unsigned bar, long long bytes);
bool tgc_emu_mbar_done(unsigned bar, unsigned parity);
template <int X> inline void tgc_mbar_init(unsigned bar, unsigned count)
{
    tgc_emu_mbar_init(bar, count);
}
template <int X> inline void tgc_mbar_init_fence() {}
template <int X> inline void tgc_mbar_expect_tx(unsigned bar, unsigned bytes)
{
    tgc_emu_mbar_arrive(bar, bytes);
}
template <int X> inline void tgc_mbar_arrive(unsigned bar)
{
    tgc_emu_mbar_arrive(bar, 0);
}
template <int X> inline void tgc_mbar_wait(unsigned bar, unsigned parity)
{
    while (!tgc_emu_mbar_done(bar, parity))
        tgc_emu_yield();
}
template <int X>
inline void tgc_tma_load3(unsigned dst, const tgc_tmap *m, unsigned bar, int c0, int c1, int c2)
{
    const long long es = m->es;
    for (unsigned r = 0; r < m->box[1]; r++)
        for (unsigned e = 0; e < m->box[0]; e++) {
            long long i0 = (long long)c0 + e, i1 = (long long)c1 + r;
            unsigned a = dst + r * 128 + (unsigned)(e * es);
            a ^= ((a >> 7) & 7) << 4;
            bool in = i0 >= 0 && i0 < m->dims[0] && i1 >= 0 && i1 < m->dims[1] && c2 >= 0 &&
                      c2 < m->dims[2];
            const char *src = m->base + c2 * m->strides[1] + i1 * m->strides[0] + i0 * es;
            if (in)
                memcpy(tgc_emu_smem + a, src, (size_t)es);
            else
                memset(tgc_emu_smem + a, 0, (size_t)es);
        }
    tgc_emu_mbar_complete(bar, (long long)m->box[0] * m->box[1] * es);
}
template <int X> inline void tgc_tmap_prefetch(const tgc_tmap *) {}
template <int R> inline void tgc_setmaxnreg_dec() {}
template <int R> inline void tgc_setmaxnreg_inc() {}
inline float tgc_emu_wg_elem(unsigned long long d, int trans, int mn, int k, int kind)
{
    if ((d >> 62) != 1 || ((d >> 49) & 7)) {
        fprintf(stderr, "emu: wgmma descriptor %llx: not 128-byte swizzle, base offset 0\n", d);
        abort();
    }
    unsigned start = (unsigned)(d & 0x3FFF) << 4, lbo = (unsigned)((d >> 16) & 0x3FFF) << 4,
             sbo = (unsigned)((d >> 32) & 0x3FFF) << 4, es = kind ? 2 : 4;
    unsigned a = !trans ? start + (unsigned)(mn / 8) * sbo + (unsigned)(mn % 8) * 128 + k * es
                        : start + (mn * es / 128) * lbo + (unsigned)(k / 8) * sbo +
                              (unsigned)(k % 8) * 128 + (mn * es) % 128;
    a ^= ((a >> 7) & 7) << 4;
    const char *p = tgc_emu_smem + a;
    if (kind == 0) {
        unsigned u;
        memcpy(&u, p, 4);
        if (u & 0x1fffu) {
            fprintf(stderr, "emu: wgmma tf32 operand not rounded to tf32\n");
            abort();
        }
        return __uint_as_float(u);
    }
    unsigned short h;
    memcpy(&h, p, 2);
    return tgc_bits_f32(h, kind == 2);
}
// kind: 0 tf32 (k8), 1 f16, 2 bf16 (k16)
inline void tgc_emu_wgmma(float *d, int n, int kind, int ta, int tb, unsigned long long da,
                          unsigned long long db)
{
    int wl = (int)threadIdx.x % 128, w = wl / 32, lane = wl % 32, ks = kind ? 16 : 8;
    for (int q = 0; q < n / 2; q++) {
        int j = q / 4, r = q % 4, m = w * 16 + (lane >> 2) + (r >> 1) * 8;
        int nn = j * 8 + 2 * (lane & 3) + (r & 1);
        double s = 0;
        for (int k = 0; k < ks; k++)
            s += (double)tgc_emu_wg_elem(da, ta, m, k, kind) *
                 (double)tgc_emu_wg_elem(db, tb, nn, k, kind);
        d[q] = (float)(d[q] + s);
    }
}

// The part of hb's prelude (cuda_render.h) that rendered epilogues call.
inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
inline unsigned __float_as_uint(float f)
{
    return tgc_f2u(f);
}
#define TGC_DEV static inline
TGC_DEV float tgc_h2f(uint16_t h)
{
    return tgc_f16_to_f32(h);
}
TGC_DEV uint16_t tgc_f2h(float f)
{
    if (f != f)
        return (uint16_t)(((tgc_f2u(f) >> 16) & 0x8000u) | 0x7e00u);
    return tgc_f16_rn(f);
}
TGC_DEV float tgc_bf2f(uint16_t h)
{
    return __uint_as_float((unsigned)h << 16);
}
TGC_DEV uint16_t tgc_f2bf(float f)
{
    return tgc_bf16_rn(f);
}
TGC_DEV float tgc_round_h(float f)
{
    return tgc_h2f(tgc_f2h(f));
}
TGC_DEV float tgc_round_bf(float f)
{
    return tgc_bf2f(tgc_f2bf(f));
}
TGC_DEV float tgc_relu(float x)
{
    return x < 0.0f ? 0.0f : x;
}
TGC_DEV double tgc_relu(double x)
{
    return x < 0.0 ? 0.0 : x;
}
TGC_DEV float tgc_maximum(float x, float y)
{
    return x > y || x != x ? x : y;
}
TGC_DEV float tgc_minimum(float x, float y)
{
    return x < y || x != x ? x : y;
}

// Runs kernel fn over the grid with nt threads per block and smem bytes of dynamic smem.
typedef void (*tgc_emu_body)(void *ctx);
void tgc_emu_launch(unsigned grid[3], unsigned nt, size_t smem, tgc_emu_body body, void *ctx);

#endif
