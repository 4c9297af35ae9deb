/* The native GPU kernels for the ops the CUDA backend's fusion leaves opaque (cuda_ops.c).
 *
 * This file is CUDA C text, not built by the host compiler: the build embeds it in the
 * library as every .cu / .cuh (CMakeLists.txt, tools/embed_text.cmake), and cuda_ops_src.c
 * prepends the op and dtype numbers of ops.def as #defines (OP_*, DT_*) before handing the
 * whole program to NVRTC. Everything lives in namespace tgcops so it cannot collide with a
 * prelude; the entry points are extern "C" tgc_ops_*.
 *
 * Semantics are interp's (src/backend/interp): values go through double, stores convert like
 * tgc_store (float to integer saturates, NaN becomes 0; f16/bf16 round to nearest even from
 * float), integer sums wrap in 64 bits, NaN wins max/argmax, random bits are Philox4x32-10
 * word 0 of counter (base + i). Element dtypes are switched on at run time (the switch is
 * uniform across a launch); every index product is 64-bit. */

namespace tgcops {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define TGC_OPS_MAXD 8

/* A strided view: row-major element i lives at sum_d idx_d * st[d] (elements) from its
 * element 0, which is the pointer passed beside it. */
struct TV {
    i64 shape[TGC_OPS_MAXD];
    i64 st[TGC_OPS_MAXD];
    int nd;
    int dt;
};

__device__ __forceinline__ i64 tv_off(const TV &t, i64 i)
{
    if (t.nd <= 0)
        return 0;
    i64 off = 0;
    for (int d = t.nd - 1; d > 0; d--) {
        i64 s = t.shape[d];
        i64 q = i / s;
        off += (i - q * s) * t.st[d];
        i = q;
    }
    return off + i * t.st[0]; /* i < shape[0]: no division for the outermost dim */
}

/* ---- f16 / bf16, bit for bit the host's tgc_half_to_float & co ---- */

__device__ __forceinline__ float half_to_float(u16 h)
{
    u32 sign = (u32)(h & 0x8000) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ff;
    u32 bits;
    if (ex == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (ex == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((u32)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else {
        bits = sign | ((ex + 127 - 15) << 23) | (man << 13);
    }
    return __uint_as_float(bits);
}

__device__ __forceinline__ u16 float_to_half(float f)
{
    u32 x = __float_as_uint(f);
    u16 sign = (u16)((x >> 16) & 0x8000);
    u32 absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)
        return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
    if (absx >= 0x477ff000u)
        return sign | 0x7c00;
    if (absx < 0x38800000u) {
        float a = __uint_as_float(absx);
        return sign | (u16)rintf(a * 16777216.0f);
    }
    u32 mant_odd = (absx >> 13) & 1;
    absx += 0xc8000fffu + mant_odd;
    return sign | (u16)(absx >> 13);
}

__device__ __forceinline__ float bf16_to_float(u16 h)
{
    return __uint_as_float((u32)h << 16);
}

__device__ __forceinline__ u16 float_to_bf16(float f)
{
    u32 x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (u16)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (u16)(x >> 16);
}

/* ---- element access ---- */

__device__ __forceinline__ double ld(const void *p, int dt, i64 off)
{
    switch (dt) {
    case DT_F32: return ((const float *)p)[off];
    case DT_F16: return half_to_float(((const u16 *)p)[off]);
    case DT_BF16: return bf16_to_float(((const u16 *)p)[off]);
    case DT_I32: return ((const int *)p)[off];
    case DT_I64: return (double)((const i64 *)p)[off];
    case DT_BOOL: return ((const u8 *)p)[off] != 0;
    case DT_F64: return ((const double *)p)[off];
    default: return 0;
    }
}

/* integer and bool dtypes exactly; floats truncate (only integer operands take this path) */
__device__ __forceinline__ i64 ldi(const void *p, int dt, i64 off)
{
    switch (dt) {
    case DT_I32: return ((const int *)p)[off];
    case DT_I64: return ((const i64 *)p)[off];
    case DT_BOOL: return ((const u8 *)p)[off] != 0;
    default: {
        double v = ld(p, dt, off);
        return v >= -9.0e18 && v <= 9.0e18 ? (i64)v : (i64)0x8000000000000000ull;
    }
    }
}

__device__ __forceinline__ i64 sat_i64(double v, double lo, double hi)
{
    if (v != v)
        return 0;
    if (v <= lo)
        return (i64)lo;
    if (v >= hi)
        return (i64)hi;
    return (i64)v;
}

__device__ __forceinline__ void st(void *p, int dt, i64 off, double v)
{
    switch (dt) {
    case DT_F32: ((float *)p)[off] = (float)v; break;
    case DT_F16: ((u16 *)p)[off] = float_to_half((float)v); break;
    case DT_BF16: ((u16 *)p)[off] = float_to_bf16((float)v); break;
    case DT_I32: ((int *)p)[off] = (int)sat_i64(v, -2147483648.0, 2147483647.0); break;
    case DT_I64:
        ((i64 *)p)[off] = v >= 9223372036854775808.0
                              ? (i64)0x7fffffffffffffffll
                              : sat_i64(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case DT_BOOL: ((u8 *)p)[off] = v != 0; break;
    case DT_F64: ((double *)p)[off] = v; break;
    default: break;
    }
}

/* an int64 result into an integer dtype without passing through double (i32 wraps) */
__device__ __forceinline__ void sti(void *p, int dt, i64 off, i64 v)
{
    switch (dt) {
    case DT_I32: ((int *)p)[off] = (int)v; break;
    case DT_I64: ((i64 *)p)[off] = v; break;
    case DT_BOOL: ((u8 *)p)[off] = v != 0; break;
    default: st(p, dt, off, (double)v); break;
    }
}

__device__ __forceinline__ int dt_size(int dt)
{
    switch (dt) {
    case DT_F16:
    case DT_BF16: return 2;
    case DT_I64:
    case DT_F64: return 8;
    case DT_BOOL: return 1;
    default: return 4;
    }
}

/* one element from (sp, sdt, soff) to (dp, ddt, doff): a move when the dtypes agree */
__device__ __forceinline__ void move_elem(void *dp, int ddt, i64 doff, const void *sp, int sdt,
                                          i64 soff)
{
    if (ddt == sdt) {
        switch (dt_size(ddt)) {
        case 1: ((u8 *)dp)[doff] = ((const u8 *)sp)[soff]; return;
        case 2: ((u16 *)dp)[doff] = ((const u16 *)sp)[soff]; return;
        case 4: ((u32 *)dp)[doff] = ((const u32 *)sp)[soff]; return;
        default: ((u64 *)dp)[doff] = ((const u64 *)sp)[soff]; return;
        }
    }
    st(dp, ddt, doff, ld(sp, sdt, soff));
}

__device__ __forceinline__ int is_float_dt(int dt)
{
    return dt == DT_F32 || dt == DT_F16 || dt == DT_BF16 || dt == DT_F64;
}

/* ---- Philox4x32-10, runtime/philox.c bit for bit ---- */

__device__ __forceinline__ u32 philox_bits(u64 seed, u64 counter)
{
    u32 c0 = (u32)counter, c1 = (u32)(counter >> 32), c2 = 0, c3 = 0;
    u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    return c0;
}

__device__ __forceinline__ float philox_uniform(u64 seed, u64 counter)
{
    return (float)(philox_bits(seed, counter) >> 8) * 0x1p-24f;
}

__device__ __forceinline__ float philox_normal(u64 seed, u64 counter)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = philox_uniform(seed, counter);
    double u2 = philox_uniform(seed, counter | (1ull << 63));
    double r = sqrt(-2.0 * log(1.0 - u1));
    return (float)(r * cos(two_pi * u2));
}

/* ---- block reductions (blockDim.x a multiple of 32, at most 1024) ---- */

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double nanmax(double m, double v)
{
    return (v > m || v != v) ? v : m;
}

__device__ __forceinline__ double warp_max(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block; every thread gets the result. sh: 32 doubles of shared memory. */
__device__ double block_sum(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0;
    return warp_sum(v);
}

__device__ double block_max(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -__longlong_as_double(0x7ff0000000000000ll);
    return warp_max(v);
}

__device__ __forceinline__ u64 warp_usum(u64 v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ u64 block_usum(u64 v, u64 *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_usum(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0ull;
    return warp_usum(v);
}

__device__ __forceinline__ i64 warp_imax(i64 v)
{
    for (int o = 16; o > 0; o >>= 1) {
        i64 u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

__device__ i64 block_imax(i64 v, i64 *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_imax(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (i64)0x8000000000000000ull;
    return warp_imax(v);
}

/* argmax candidates: (value, position); the first NaN wins, else the larger value, ties
 * to the smaller position (interp's "first maximum"). pos < 0: no candidate. */
struct AM {
    double v;
    i64 iv;
    i64 pos;
};

__device__ __forceinline__ AM am_pick(AM a, AM b, int as_int)
{
    if (b.pos < 0)
        return a;
    if (a.pos < 0)
        return b;
    AM lo = a.pos < b.pos ? a : b, hi = a.pos < b.pos ? b : a;
    if (as_int)
        return hi.iv > lo.iv ? hi : lo;
    if (lo.v != lo.v)
        return lo;
    if (hi.v != hi.v)
        return hi;
    return hi.v > lo.v ? hi : lo;
}

__device__ AM block_argmax(AM a, int as_int, AM *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        AM b;
        b.v = __shfl_xor_sync(0xffffffffu, a.v, o);
        b.iv = __shfl_xor_sync(0xffffffffu, a.iv, o);
        b.pos = __shfl_xor_sync(0xffffffffu, a.pos, o);
        a = am_pick(a, b, as_int);
    }
    __syncthreads();
    if (lane == 0)
        sh[w] = a;
    __syncthreads();
    if (lane < nw) {
        a = sh[lane];
    } else {
        a.pos = -1;
        a.v = 0;
        a.iv = 0;
    }
    for (int o = 16; o > 0; o >>= 1) {
        AM b;
        b.v = __shfl_xor_sync(0xffffffffu, a.v, o);
        b.iv = __shfl_xor_sync(0xffffffffu, a.iv, o);
        b.pos = __shfl_xor_sync(0xffffffffu, a.pos, o);
        a = am_pick(a, b, as_int);
    }
    return a;
}

#define GRID_STRIDE(i, n)                                                                          \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (i64)blockDim.x * gridDim.x)

#define BLOCK_STRIDE(r, n) for (i64 r = blockIdx.x; r < (n); r += gridDim.x)

/* ---- pointwise math: the primitives of ops.def, k_pointwise.c's definitions. A composite
 * op (a FORMULA of ops.def) arrives as a program of these (struct PW) ---- */

__device__ __forceinline__ double pw_max(double x, double y)
{
    return x > y || x != x ? x : y;
}
__device__ __forceinline__ double pw_min(double x, double y)
{
    return x < y || x != x ? x : y;
}

__device__ double pw_eval(int op, double x, double y, double z, double f0, double f1)
{
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    case OP_DIV: return x / y;
    case OP_POW: return pow(x, y);
    case OP_MAXIMUM: return pw_max(x, y);
    case OP_MINIMUM: return pw_min(x, y);
    case OP_EQ: return x == y;
    case OP_NE: return x != y;
    case OP_LT: return x < y;
    case OP_LE: return x <= y;
    case OP_GT: return x > y;
    case OP_GE: return x >= y;
    case OP_WHERE: return x != 0 ? y : z;
    case OP_ADD_SCALAR: return x + f0;
    case OP_SUB_SCALAR: return x - f0;
    case OP_MUL_SCALAR: return x * f0;
    case OP_DIV_SCALAR: return x / f0;
    case OP_POW_SCALAR: return pow(x, f0);
    case OP_CLAMP: {
        if (f0 != f0 || f1 != f1)
            return __longlong_as_double(0x7ff8000000000000ll);
        double r = x < f0 ? f0 : x;
        return r > f1 ? f1 : r;
    }
    case OP_NEG: return -x;
    case OP_ABS: return fabs(x);
    case OP_RELU: return x < 0 ? 0.0 : x;
    /* exp, log, sqrt, tanh, erf, ...: every MATH_FN op of ops.def (cuda_ops_src.c generates
     * tgc_native_math); any other op (CAST) is x itself */
    default: return tgc_native_math(op, x);
    }
}

__device__ i64 pw_eval_int(int op, i64 x, i64 y, i64 z, i64 s0, i64 s1)
{
    u64 ux = (u64)x, uy = (u64)y;
    switch (op) {
    case OP_ADD: return (i64)(ux + uy);
    case OP_SUB: return (i64)(ux - uy);
    case OP_MUL: return (i64)(ux * uy);
    case OP_MAXIMUM: return x > y ? x : y;
    case OP_MINIMUM: return x < y ? x : y;
    case OP_EQ: return x == y;
    case OP_NE: return x != y;
    case OP_LT: return x < y;
    case OP_LE: return x <= y;
    case OP_GT: return x > y;
    case OP_GE: return x >= y;
    case OP_WHERE: return x ? y : z;
    case OP_ADD_SCALAR: return (i64)(ux + (u64)s0);
    case OP_SUB_SCALAR: return (i64)(ux - (u64)s0);
    case OP_MUL_SCALAR: return (i64)(ux * (u64)s0);
    case OP_CLAMP: {
        i64 r = x < s0 ? s0 : x;
        return r > s1 ? s1 : r;
    }
    case OP_NEG: return (i64)(0 - ux);
    case OP_ABS: return x < 0 ? (i64)(0 - ux) : x;
    case OP_RELU: return x < 0 ? 0 : x;
    default: return x; /* CAST */
    }
}

/* the cast to the common dtype before the math (k_pointwise.c round_to) */
__device__ __forceinline__ double round_to(double v, int from, int to)
{
    if (from == to)
        return v;
    switch (to) {
    case DT_F32: return (float)v;
    case DT_F16: return half_to_float(float_to_half((float)v));
    case DT_BF16: return bf16_to_float(float_to_bf16((float)v));
    default: return v;
    }
}

/* Pointwise over out's shape; in[k] strides are 0 where it broadcasts. The op is a program
 * of primitive steps (cuda_ops_impl.h's ops_pw): step k reads registers a, b, c (0..2: the
 * inputs, 3 + j: step j's value) and writes 3 + k; op PW_CONST is the constant f0 (s0). */
#define PW_STEPS 16
#define PW_CONST (-1)
struct PWS {
    int op, a, b, c;
    double f0, f1;
    i64 s0, s1;
};
struct PW {
    TV o;
    TV in[3];
    int cast_dt[3];
    int nin, n_steps, int_path;
    PWS step[PW_STEPS];
};

template <typename T> struct pw_math;
template <> struct pw_math<double> {
    static __device__ __forceinline__ double eval(const PWS &s, double x, double y, double z)
    {
        return s.op == PW_CONST ? s.f0 : pw_eval(s.op, x, y, z, s.f0, s.f1);
    }
};
template <> struct pw_math<i64> {
    static __device__ __forceinline__ i64 eval(const PWS &s, i64 x, i64 y, i64 z)
    {
        return s.op == PW_CONST ? s.s0 : pw_eval_int(s.op, x, y, z, s.s0, s.s1);
    }
};

/* The program over inputs x, y, z (one step: the primitive itself, in registers). */
template <typename T> __device__ __forceinline__ T pw_run(const PW &c, T x, T y, T z)
{
    if (c.n_steps == 1)
        return pw_math<T>::eval(c.step[0], x, y, z);
    T r[3 + PW_STEPS];
    r[0] = x;
    r[1] = y;
    r[2] = z;
    for (int k = 0; k < c.n_steps; k++) {
        const PWS &s = c.step[k];
        r[3 + k] = pw_math<T>::eval(s, r[s.a], r[s.b], r[s.c]);
    }
    return r[2 + c.n_steps];
}

} // namespace tgcops

using namespace tgcops;

extern "C" __global__ void tgc_ops_pointwise(PW c, void *o, const void *a, const void *b,
                                             const void *cc, i64 n)
{
    GRID_STRIDE(i, n)
    {
        i64 oo = tv_off(c.o, i);
        i64 ia = tv_off(c.in[0], i);
        i64 ib = c.nin > 1 ? tv_off(c.in[1], i) : 0;
        i64 ic = c.nin > 2 ? tv_off(c.in[2], i) : 0;
        if (c.int_path) {
            i64 x = ldi(a, c.in[0].dt, ia);
            i64 y = c.nin > 1 ? ldi(b, c.in[1].dt, ib) : x;
            i64 z = c.nin > 2 ? ldi(cc, c.in[2].dt, ic) : x;
            sti(o, c.o.dt, oo, pw_run<i64>(c, x, y, z));
        } else {
            double x = round_to(ld(a, c.in[0].dt, ia), c.in[0].dt, c.cast_dt[0]);
            double y = c.nin > 1 ? round_to(ld(b, c.in[1].dt, ib), c.in[1].dt, c.cast_dt[1]) : x;
            double z = c.nin > 2 ? round_to(ld(cc, c.in[2].dt, ic), c.in[2].dt, c.cast_dt[2]) : x;
            st(o, c.o.dt, oo, pw_run<double>(c, x, y, z));
        }
    }
}

/* ---- movement ---- */

/* dst (its own strides over src's shape) = src, converting like tgc_store */
extern "C" __global__ void tgc_ops_copy(TV d, void *dp, TV s, const void *sp, i64 n)
{
    GRID_STRIDE(i, n)
    {
        move_elem(dp, d.dt, tv_off(d, i), sp, s.dt, tv_off(s, i));
    }
}

/* cat of up to TGC_OPS_CAT_MAX dense inputs that land on consecutive ranges of a dense
 * output (cat along the outermost dim: a data-parallel gradient bucket): input k's bytes go
 * to [off[k], off[k + 1]) of the output, one launch for all. Words of 16, 8, 4 or 1 bytes,
 * whichever all the ranges and pointers allow (w = that width). */
#define TGC_OPS_CAT_MAX 32
struct CATD {
    const void *src[TGC_OPS_CAT_MAX];
    i64 off[TGC_OPS_CAT_MAX + 1]; /* in words */
    int n, w;
};

struct alignas(16) W16 { /* one 16-byte word: a vector load and store */
    unsigned long long a, b;
};

template <typename W> __device__ __forceinline__ void cat_dense_words(const CATD &c, void *dst)
{
    GRID_STRIDE(i, c.off[c.n])
    {
        int lo = 0, hi = c.n - 1; /* the input whose range holds word i */
        while (lo < hi) {
            int mid = (lo + hi + 1) >> 1;
            if (c.off[mid] <= i)
                lo = mid;
            else
                hi = mid - 1;
        }
        ((W *)dst)[i] = ((const W *)c.src[lo])[i - c.off[lo]];
    }
}

extern "C" __global__ void tgc_ops_cat_dense(CATD c, void *dst)
{
    switch (c.w) {
    case 16: cat_dense_words<W16>(c, dst); break;
    case 8: cat_dense_words<unsigned long long>(c, dst); break;
    case 4: cat_dense_words<u32>(c, dst); break;
    default: cat_dense_words<u8>(c, dst); break;
    }
}

extern "C" __global__ void tgc_ops_fill(void *p, int dt, i64 n, double v)
{
    GRID_STRIDE(i, n)
    {
        st(p, dt, i, v);
    }
}

/* index checks: flag[0] = smallest bad position (~0 when none), flag[1] its value */
extern "C" __global__ void tgc_ops_flag_init(u64 *flag)
{
    flag[0] = ~0ull;
    flag[1] = 0;
}

extern "C" __global__ void tgc_ops_check_index(TV ix, const void *ip, i64 n, i64 limit,
                                               int has_ignore, i64 ignore, u64 *flag)
{
    GRID_STRIDE(i, n)
    {
        i64 v = ldi(ip, ix.dt, tv_off(ix, i));
        if (has_ignore && v == ignore)
            continue;
        if (v < 0 || v >= limit)
            atomicMin(flag, (u64)i);
    }
}

extern "C" __global__ void tgc_ops_index_report(TV ix, const void *ip, u64 *flag)
{
    if (threadIdx.x == 0 && blockIdx.x == 0 && flag[0] != ~0ull)
        flag[1] = (u64)ldi(ip, ix.dt, tv_off(ix, (i64)flag[0]));
}

/* index_select / embedding: out [outer, n, inner] from t with dim `dim` indexed by ix;
 * t's dims before dim are outer (shape[0..dim)), after it inner. */
extern "C" __global__ void tgc_ops_select(TV t, const void *tp, TV ix, const void *ip, void *op,
                                          int odt, int dim, i64 n, i64 inner, i64 limit,
                                          i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 in_ = e % inner, r = e / inner;
        i64 j = r % n, ou = r / n;
        i64 id = ldi(ip, ix.dt, tv_off(ix, j));
        if (id < 0 || id >= limit)
            continue; /* reported by the check; the result is discarded */
        i64 off = id * t.st[dim];
        for (int d = t.nd - 1; d > dim; d--) {
            i64 s = t.shape[d], q = in_ / s;
            off += (in_ - q * s) * t.st[d];
            in_ = q;
        }
        for (int d = dim - 1; d >= 0; d--) {
            i64 s = t.shape[d], q = ou / s;
            off += (ou - q * s) * t.st[d];
            ou = q;
        }
        move_elem(op, odt, e, tp, t.dt, off);
    }
}

/* gather: out[p] = t[pos with dim replaced by ix[p]], p over ix's shape */
extern "C" __global__ void tgc_ops_gather(TV t, const void *tp, TV ix, const void *ip, void *op,
                                          int odt, int dim, i64 limit, i64 n)
{
    GRID_STRIDE(p, n)
    {
        i64 r = p, ioff = 0, toff = 0;
        for (int d = ix.nd - 1; d >= 0; d--) {
            i64 s = ix.shape[d], q = r / s, k = r - q * s;
            ioff += k * ix.st[d];
            if (d != dim)
                toff += k * t.st[d];
            r = q;
        }
        i64 v = ldi(ip, ix.dt, ioff);
        if (v < 0 || v >= limit)
            continue;
        if (t.nd > 0)
            toff += v * t.st[dim];
        move_elem(op, odt, p, tp, t.dt, toff);
    }
}

/* ---- creation and random ---- */

extern "C" __global__ void tgc_ops_arange(void *o, int dt, i64 n, double start, double step)
{
    GRID_STRIDE(i, n)
    {
        st(o, dt, i, start + (double)i * step);
    }
}

extern "C" __global__ void tgc_ops_rand(void *o, int dt, i64 n, u64 seed, u64 base, int normal)
{
    GRID_STRIDE(i, n)
    {
        u64 c = base + (u64)i;
        double v;
        if (normal) {
            v = philox_normal(seed, c);
        } else {
            u32 bits = philox_bits(seed, c);
            if (dt == DT_F16)
                v = (double)(bits >> 21) * 0x1p-11;
            else if (dt == DT_BF16)
                v = (double)(bits >> 24) * 0x1p-8;
            else
                v = (double)(bits >> 8) * 0x1p-24;
        }
        st(o, dt, i, v);
    }
}

extern "C" __global__ void tgc_ops_dropout(TV x, const void *xp, void *o, int odt, i64 n, u64 seed,
                                           u64 base, double p, double scale)
{
    GRID_STRIDE(i, n)
    {
        int keep = philox_uniform(seed, base + (u64)i) >= p;
        st(o, odt, i, ld(xp, x.dt, tv_off(x, i)) * (keep ? scale : 0.0));
    }
}

/* ---- reductions: one block per output element ---- */

struct RG {
    TV keep; /* kept dims of x (shape, x strides): output element order */
    TV red;  /* reduced dims of x (shape, x strides), row-major visiting order */
    i64 count, nout;
    int op, as_int, odt;
    double correction;
};

extern "C" __global__ void tgc_ops_reduce(RG g, const void *x, void *o)
{
    __shared__ double shd[32];
    __shared__ u64 shu[32];
    __shared__ AM sha[32];
    const int xdt = g.red.dt;
    BLOCK_STRIDE(r, g.nout)
    {
        const i64 base = tv_off(g.keep, r);
        if (g.op == OP_ARGMAX) {
            AM a;
            a.pos = -1;
            a.v = 0;
            a.iv = 0;
            for (i64 j = threadIdx.x; j < g.count; j += blockDim.x) {
                AM b;
                b.pos = j;
                i64 off = base + tv_off(g.red, j);
                if (g.as_int) {
                    b.iv = ldi(x, xdt, off);
                    b.v = 0;
                } else {
                    b.v = ld(x, xdt, off);
                    b.iv = 0;
                }
                a = am_pick(a, b, g.as_int);
            }
            a = block_argmax(a, g.as_int, sha);
            if (threadIdx.x == 0)
                sti(o, g.odt, r, a.pos < 0 ? 0 : a.pos);
        } else if (g.as_int && g.op == OP_SUM) {
            u64 s = 0;
            for (i64 j = threadIdx.x; j < g.count; j += blockDim.x)
                s += (u64)ldi(x, xdt, base + tv_off(g.red, j));
            s = block_usum(s, shu);
            if (threadIdx.x == 0)
                sti(o, g.odt, r, (i64)s);
        } else if (g.as_int) { /* MAX */
            i64 m = (i64)0x8000000000000000ull;
            for (i64 j = threadIdx.x; j < g.count; j += blockDim.x) {
                i64 v = ldi(x, xdt, base + tv_off(g.red, j));
                m = v > m ? v : m;
            }
            m = block_imax(m, (i64 *)shu);
            if (threadIdx.x == 0)
                sti(o, g.odt, r, m);
        } else if (g.op == OP_MAX) {
            double m = -__longlong_as_double(0x7ff0000000000000ll);
            for (i64 j = threadIdx.x; j < g.count; j += blockDim.x)
                m = nanmax(m, ld(x, xdt, base + tv_off(g.red, j)));
            m = block_max(m, shd);
            if (threadIdx.x == 0)
                st(o, g.odt, r, m);
        } else {
            double s = 0;
            for (i64 j = threadIdx.x; j < g.count; j += blockDim.x)
                s += ld(x, xdt, base + tv_off(g.red, j));
            s = block_sum(s, shd);
            const double n = (double)g.count;
            if (g.op == OP_VAR) {
                const double mean = s / n;
                double q = 0;
                for (i64 j = threadIdx.x; j < g.count; j += blockDim.x) {
                    double d = ld(x, xdt, base + tv_off(g.red, j)) - mean;
                    q += d * d;
                }
                q = block_sum(q, shd);
                s = q / fmax(0.0, n - g.correction);
            } else if (g.op == OP_MEAN) {
                s = s / n;
            }
            if (threadIdx.x == 0)
                st(o, g.odt, r, s);
        }
    }
}

/* softmax / log_softmax along one dim: one block per row */
struct SG {
    TV keep; /* kept dims: shape and x strides */
    TV okeep; /* kept dims: shape and out strides */
    i64 n, xst, ost, rows;
    int odt, log_;
};

extern "C" __global__ void tgc_ops_softmax(SG g, const void *x, void *o, int xdt)
{
    __shared__ double sh[32];
    BLOCK_STRIDE(r, g.rows)
    {
        const i64 xb = tv_off(g.keep, r), ob = tv_off(g.okeep, r);
        double m = -__longlong_as_double(0x7ff0000000000000ll);
        for (i64 j = threadIdx.x; j < g.n; j += blockDim.x)
            m = nanmax(m, ld(x, xdt, xb + j * g.xst));
        m = block_max(m, sh);
        double s = 0;
        for (i64 j = threadIdx.x; j < g.n; j += blockDim.x)
            s += exp(ld(x, xdt, xb + j * g.xst) - m);
        s = block_sum(s, sh);
        const double ls = log(s);
        for (i64 j = threadIdx.x; j < g.n; j += blockDim.x) {
            double v = ld(x, xdt, xb + j * g.xst);
            st(o, g.odt, ob + j * g.ost, g.log_ ? v - m - ls : exp(v - m) / s);
        }
    }
}

/* a per-feature or per-channel parameter: element k at p[k * st] (in row-major order of its
 * own view when v.nd > 1) */
struct PV {
    TV v;
    int present;
};

__device__ __forceinline__ double pv_ld(const PV &p, const void *ptr, i64 k, double dflt)
{
    return p.present ? ld(ptr, p.v.dt, tv_off(p.v, k)) : dflt;
}

/* layer_norm over rows of M elements (x's last dims) */
extern "C" __global__ void tgc_ops_layer_norm(TV x, const void *xp, void *o, int odt, i64 rows,
                                              i64 M, double eps, PV w, const void *wp, PV b,
                                              const void *bp)
{
    __shared__ double sh[32];
    BLOCK_STRIDE(r, rows)
    {
        double s = 0;
        for (i64 j = threadIdx.x; j < M; j += blockDim.x)
            s += ld(xp, x.dt, tv_off(x, r * M + j));
        s = block_sum(s, sh);
        const double mean = s / (double)M;
        double q = 0;
        for (i64 j = threadIdx.x; j < M; j += blockDim.x) {
            double d = ld(xp, x.dt, tv_off(x, r * M + j)) - mean;
            q += d * d;
        }
        q = block_sum(q, sh);
        const double rstd = 1.0 / sqrt(q / (double)M + eps);
        for (i64 j = threadIdx.x; j < M; j += blockDim.x) {
            double v = ld(xp, x.dt, tv_off(x, r * M + j));
            st(o, odt, r * M + j, (v - mean) * rstd * pv_ld(w, wp, j, 1.0) + pv_ld(b, bp, j, 0.0));
        }
    }
}

/* batch_norm, x [N, C, S...], in three kernels so that every SM works on it:
 *   tgc_ops_bn_stats  (training) block b: channel b % C, part b / C of the channel's N*S
 *                     values; sums of (x - k) and (x - k)^2 in double, shifted by the
 *                     channel's first value k (no cancellation when |mean| >> std), to
 *                     ws[(c * P + p) * 2]
 *   tgc_ops_bn_final  one thread per channel: the parts summed in order (the same bits on
 *                     every run), mean and variance (or the running stats in eval), the
 *                     running stats updated, and (mean, scale, shift) to ws2[3 c]
 *   tgc_ops_bn_apply  o = (x - mean) * scale + shift over every element.
 * `small`: N*C*S < 2^31 (32-bit index math). vec4: x and o contiguous f32, S % 4 == 0. */
__device__ __forceinline__ i64 bn_elem(i64 j, i64 c, i64 C, i64 S, int small)
{
    if (small) {
        unsigned n = (unsigned)j / (unsigned)S;
        return ((i64)n * C + c) * S + (i64)((unsigned)j - n * (unsigned)S);
    }
    i64 n = j / S;
    return (n * C + c) * S + (j - n * S);
}

extern "C" __global__ void tgc_ops_bn_stats(TV x, const void *xp, i64 N, i64 C, i64 S, i64 P,
                                            int small, int vec4, double *ws)
{
    __shared__ double sh[32];
    const i64 cnt = N * S;
    BLOCK_STRIDE(b, C * P)
    {
        const i64 c = b % C, p = b / C;
        const double k = ld(xp, x.dt, tv_off(x, c * S));
        double s = 0, q = 0;
        if (vec4) { /* parts in whole float4s of one image (S % 4 == 0) */
            const float4 *x4 = (const float4 *)xp;
            const i64 c4 = cnt / 4, lo4 = c4 * p / P, hi4 = c4 * (p + 1) / P;
            for (i64 j = 4 * (lo4 + (i64)threadIdx.x); j < 4 * hi4; j += 4 * (i64)blockDim.x) {
                float4 v = x4[bn_elem(j, c, C, S, small) / 4];
                double d0 = v.x - k, d1 = v.y - k, d2 = v.z - k, d3 = v.w - k;
                s += (d0 + d1) + (d2 + d3);
                q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
            }
        } else {
            const i64 lo = cnt * p / P, hi = cnt * (p + 1) / P;
            for (i64 j = lo + threadIdx.x; j < hi; j += blockDim.x) {
                double d = ld(xp, x.dt, tv_off(x, bn_elem(j, c, C, S, small))) - k;
                s += d;
                q += d * d;
            }
        }
        s = block_sum(s, sh);
        q = block_sum(q, sh);
        if (threadIdx.x == 0) {
            ws[(c * P + p) * 2] = s;
            ws[(c * P + p) * 2 + 1] = q;
        }
    }
}

extern "C" __global__ void tgc_ops_bn_final(TV x, const void *xp, i64 N, i64 C, i64 S, i64 P,
                                            int training, double momentum, double eps,
                                            const double *ws, double *ws2, PV rm, void *rmp, PV rv,
                                            void *rvp, PV w, const void *wp, PV b, const void *bp)
{
    GRID_STRIDE(c, C)
    {
        double mean, var;
        if (training) {
            const double cnt = (double)(N * S), k = ld(xp, x.dt, tv_off(x, c * S));
            double s = 0, q = 0;
            for (i64 p = 0; p < P; p++) {
                s += ws[(c * P + p) * 2];
                q += ws[(c * P + p) * 2 + 1];
            }
            const double ms = s / cnt;
            var = q / cnt - ms * ms;
            if (var < 0)
                var = 0;
            mean = k + ms;
            if (rm.present) {
                i64 om = c * rm.v.st[0], ov = c * rv.v.st[0];
                double unbiased = var * cnt / (cnt - 1);
                st(rmp, rm.v.dt, om, (1.0 - momentum) * ld(rmp, rm.v.dt, om) + momentum * mean);
                st(rvp, rv.v.dt, ov, (1.0 - momentum) * ld(rvp, rv.v.dt, ov) + momentum * unbiased);
            }
        } else {
            mean = ld(rmp, rm.v.dt, c * rm.v.st[0]);
            var = ld(rvp, rv.v.dt, c * rv.v.st[0]);
        }
        double scale = 1.0 / sqrt(var + eps), shift = 0;
        if (w.present)
            scale *= ld(wp, w.v.dt, c * w.v.st[0]);
        if (b.present)
            shift = ld(bp, b.v.dt, c * b.v.st[0]);
        ws2[3 * c] = mean;
        ws2[3 * c + 1] = scale;
        ws2[3 * c + 2] = shift;
    }
}

extern "C" __global__ void tgc_ops_bn_apply(TV x, const void *xp, void *o, int odt, i64 N, i64 C,
                                            i64 S, int small, int vec4, const double *ws2)
{
    const i64 total = N * C * S;
    if (vec4) {
        const float4 *x4 = (const float4 *)xp;
        float4 *o4 = (float4 *)o;
        GRID_STRIDE(i, total / 4)
        {
            const i64 c = small ? (i64)(((unsigned)i * 4u / (unsigned)S) % (unsigned)C)
                                : (i * 4 / S) % C;
            const double m = ws2[3 * c], sc = ws2[3 * c + 1], sf = ws2[3 * c + 2];
            float4 v = x4[i];
            v.x = (float)((v.x - m) * sc + sf);
            v.y = (float)((v.y - m) * sc + sf);
            v.z = (float)((v.z - m) * sc + sf);
            v.w = (float)((v.w - m) * sc + sf);
            o4[i] = v;
        }
        return;
    }
    GRID_STRIDE(e, total)
    {
        const i64 c = small ? (i64)(((unsigned)e / (unsigned)S) % (unsigned)C) : (e / S) % C;
        st(o, odt, e, (ld(xp, x.dt, tv_off(x, e)) - ws2[3 * c]) * ws2[3 * c + 1] + ws2[3 * c + 2]);
    }
}

/* ---- pools: x [..., H, W] (planes = the leading dims), one thread per output ---- */

__device__ __forceinline__ void pool_window(i64 i, i64 m, i64 n, i64 k, i64 s, i64 p,
                                            int exclude_pad, i64 *lo_, i64 *hi_, i64 *span_)
{
    i64 lo, hi, span;
    if (k == 0) {
        lo = i * n / m;
        hi = ((i + 1) * n + m - 1) / m;
        span = hi - lo;
    } else {
        lo = i * s - p;
        hi = lo + k;
        span = (hi < n + p ? hi : n + p) - lo;
    }
    *lo_ = lo > 0 ? lo : 0;
    *hi_ = hi < n ? hi : n;
    *span_ = exclude_pad ? *hi_ - *lo_ : span;
}

/* planes: x's leading dims as a TV (shape, x strides); hs, ws: x's strides of H and W.
 * kind 0 max, 1 avg, 2 adaptive avg */
extern "C" __global__ void tgc_ops_pool2d(TV planes, const void *xp, int xdt, i64 hs, i64 ws,
                                          i64 H, i64 W, void *o, int odt, i64 OH, i64 OW, int kind,
                                          i64 kh, i64 kw, i64 sh, i64 sw, i64 ph, i64 pw,
                                          int exclude_pad, i64 n)
{
    GRID_STRIDE(e, n)
    {
        i64 ow = e % OW, t = e / OW;
        i64 oh = t % OH, p = t / OH;
        i64 base = tv_off(planes, p);
        i64 hlo, hhi, hsp, wlo, whi, wsp;
        if (kind == 2) {
            pool_window(oh, OH, H, 0, 1, 0, 0, &hlo, &hhi, &hsp);
            pool_window(ow, OW, W, 0, 1, 0, 0, &wlo, &whi, &wsp);
        } else {
            pool_window(oh, OH, H, kh, sh, ph, exclude_pad, &hlo, &hhi, &hsp);
            pool_window(ow, OW, W, kw, sw, pw, exclude_pad, &wlo, &whi, &wsp);
        }
        double acc = kind == 0 ? -__longlong_as_double(0x7ff0000000000000ll) : 0.0;
        for (i64 i = hlo; i < hhi; i++)
            for (i64 j = wlo; j < whi; j++) {
                double v = ld(xp, xdt, base + i * hs + j * ws);
                if (kind == 0)
                    acc = ((v > acc) | (v != v)) ? v : acc;
                else
                    acc += v;
            }
        if (kind != 0)
            acc = acc / (double)(hsp * wsp);
        st(o, odt, e, acc);
    }
}

/* ---- losses: x [N, C, D...] or [C]; one warp per target position ---- */

/* NONE: out[p] written directly; else scratch[2p] = loss, scratch[2p+1] = 1 when counted */
extern "C" __global__ void tgc_ops_loss(TV x, const void *xp, TV tg, const void *tp, i64 P, i64 C,
                                        i64 D, i64 cstride, i64 ignore, int ce, double eps,
                                        int none, void *o, int odt, double *scratch)
{
    const int lane = threadIdx.x & 31;
    const i64 wid = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 p = wid; p < P; p += nwarps) {
        i64 t = ldi(tp, tg.dt, tv_off(tg, p));
        double l = 0;
        int counted = 0;
        if (t != ignore && t >= 0 && t < C) {
            counted = 1;
            const i64 n = p / D, d = p - (p / D) * D;
            const i64 off0 = tv_off(x, n * C * D + d);
            if (!ce) {
                l = -ld(xp, x.dt, off0 + t * cstride);
            } else {
                double m = -__longlong_as_double(0x7ff0000000000000ll), sumx = 0;
                for (i64 c = lane; c < C; c += 32) {
                    double v = ld(xp, x.dt, off0 + c * cstride);
                    m = v > m ? v : m;
                    sumx += v;
                }
                for (int s = 16; s > 0; s >>= 1) {
                    double u = __shfl_xor_sync(0xffffffffu, m, s);
                    m = u > m ? u : m;
                }
                sumx = warp_sum(sumx);
                double se = 0;
                for (i64 c = lane; c < C; c += 32)
                    se += exp(ld(xp, x.dt, off0 + c * cstride) - m);
                se = warp_sum(se);
                const double lse = m + log(se);
                l = lse - ld(xp, x.dt, off0 + t * cstride);
                if (eps != 0.0) {
                    double smooth = ((double)C * lse - sumx) / (double)C;
                    l = (1.0 - eps) * l + eps * smooth;
                }
            }
        }
        if (lane == 0) {
            if (none) {
                st(o, odt, p, l);
            } else {
                scratch[2 * p] = l;
                scratch[2 * p + 1] = counted;
            }
        }
    }
}

/* one block: out[0] = sum (or mean over the counted) of the scratch losses */
extern "C" __global__ void tgc_ops_loss_reduce(const double *scratch, i64 P, int mean, void *o,
                                               int odt)
{
    __shared__ double sh[32];
    double s = 0, c = 0;
    for (i64 p = threadIdx.x; p < P; p += blockDim.x) {
        s += scratch[2 * p];
        c += scratch[2 * p + 1];
    }
    s = block_sum(s, sh);
    c = block_sum(c, sh);
    if (threadIdx.x == 0)
        st(o, odt, 0, mean ? s / c : s);
}

/* ---- linear algebra for dtypes without a template: double accumulation ---- */

struct MM {
    i64 m, n, k, a_rs, a_cs, b_rs, b_cs;
    TV batch; /* broadcast batch shape; st: a's batch strides */
    i64 sb[TGC_OPS_MAXD]; /* b's batch strides */
    int adt, bdt, odt;
};

extern "C" __global__ void tgc_ops_matmul(MM g, const void *a, const void *b, void *o, i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 j = e % g.n, t = e / g.n;
        i64 i = t % g.m, bi = t / g.m;
        i64 oa = 0, ob = 0;
        for (int d = g.batch.nd - 1; d >= 0; d--) {
            i64 s = g.batch.shape[d], q = bi / s, k = bi - q * s;
            oa += k * g.batch.st[d];
            ob += k * g.sb[d];
            bi = q;
        }
        double acc = 0;
        for (i64 k = 0; k < g.k; k++)
            acc += ld(a, g.adt, oa + i * g.a_rs + k * g.a_cs) *
                   ld(b, g.bdt, ob + k * g.b_rs + j * g.b_cs);
        st(o, g.odt, e, acc);
    }
}

/* linear: x [rows (x's leading dims), in], w [out, in], bias [out] */
extern "C" __global__ void tgc_ops_linear(TV xl, const void *x, i64 xk, const void *w, int wdt,
                                          i64 w0, i64 w1, const void *bias, int bdt, i64 bst,
                                          void *o, int odt, i64 in_f, i64 out_f, i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 j = e % out_f, r = e / out_f;
        i64 xo = tv_off(xl, r);
        double acc = 0;
        for (i64 k = 0; k < in_f; k++)
            acc += ld(x, xl.dt, xo + k * xk) * ld(w, wdt, j * w0 + k * w1);
        if (bias)
            acc += ld(bias, bdt, j * bst);
        st(o, odt, e, acc);
    }
}

struct CV {
    i64 n, c, h, w, o, cg, og, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
    i64 xs[4], ws[4];
    i64 bst;
    int xdt, wdt, bdt, odt;
};

extern "C" __global__ void tgc_ops_conv2d(CV g, const void *x, const void *w, const void *bias,
                                          void *o, i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 ow = e % g.ow, t = e / g.ow;
        i64 oh = t % g.oh;
        t /= g.oh;
        i64 oc = t % g.o, n = t / g.o;
        i64 c0 = (oc / g.og) * g.cg;
        double acc = 0;
        for (i64 c = 0; c < g.cg; c++)
            for (i64 ki = 0; ki < g.kh; ki++) {
                i64 ih = oh * g.sh - g.ph + ki * g.dh;
                if (ih < 0 || ih >= g.h)
                    continue;
                for (i64 kj = 0; kj < g.kw; kj++) {
                    i64 iw = ow * g.sw - g.pw + kj * g.dw;
                    if (iw < 0 || iw >= g.w)
                        continue;
                    i64 xo = n * g.xs[0] + (c0 + c) * g.xs[1] + ih * g.xs[2] + iw * g.xs[3];
                    i64 wo = oc * g.ws[0] + c * g.ws[1] + ki * g.ws[2] + kj * g.ws[3];
                    acc += ld(x, g.xdt, xo) * ld(w, g.wdt, wo);
                }
            }
        double bv = bias ? ld(bias, g.bdt, oc * g.bst) : 0.0;
        st(o, g.odt, e, bv + acc);
    }
}

/* ---- backward ops (deterministic: every output element is summed by one thread or one
 * warp in a fixed order, no atomics) ---- */

/* dx of conv2d for every dtype (g: x's geometry; xs: dy's strides, ws: w's), double
 * accumulation, one thread per dx element over the taps that reach it */
extern "C" __global__ void tgc_ops_conv2d_grad_input(CV g, const void *dy, int ydt, const void *w,
                                                     void *o, i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 iw = e % g.w, t = e / g.w;
        i64 ih = t % g.h;
        t /= g.h;
        i64 ci = t % g.c, n = t / g.c;
        i64 gi = ci / g.cg, cj = ci - gi * g.cg;
        double acc = 0;
        for (i64 oc = gi * g.og; oc < (gi + 1) * g.og; oc++)
            for (i64 ki = 0; ki < g.kh; ki++) {
                i64 th = ih + g.ph - ki * g.dh;
                if (th < 0 || th % g.sh)
                    continue;
                i64 oh = th / g.sh;
                if (oh >= g.oh)
                    continue;
                for (i64 kj = 0; kj < g.kw; kj++) {
                    i64 tw = iw + g.pw - kj * g.dw;
                    if (tw < 0 || tw % g.sw)
                        continue;
                    i64 ow = tw / g.sw;
                    if (ow >= g.ow)
                        continue;
                    i64 yo = n * g.xs[0] + oc * g.xs[1] + oh * g.xs[2] + ow * g.xs[3];
                    i64 wo = oc * g.ws[0] + cj * g.ws[1] + ki * g.ws[2] + kj * g.ws[3];
                    acc += ld(dy, ydt, yo) * ld(w, g.wdt, wo);
                }
            }
        st(o, g.odt, e, acc);
    }
}

/* dw of conv2d for every dtype (xs: x's strides, ws: dy's), one warp per dw element: lane l
 * sums the (image, pixel) positions l, l + 32, ... in double, then a fixed shuffle tree */
extern "C" __global__ void tgc_ops_conv2d_grad_weight(CV g, const void *x, const void *dy,
                                                      int ydt, void *o, i64 total)
{
    const int lane = (int)threadIdx.x % 32;
    const i64 wpb = blockDim.x / 32;
    for (i64 e = (i64)blockIdx.x * wpb + threadIdx.x / 32; e < total; e += wpb * gridDim.x) {
        i64 kj = e % g.kw, t = e / g.kw;
        i64 ki = t % g.kh;
        t /= g.kh;
        i64 cj = t % g.cg, oc = t / g.cg;
        i64 ci = (oc / g.og) * g.cg + cj;
        const i64 ohw = g.oh * g.ow, cnt = g.n * ohw;
        double acc = 0;
        for (i64 p = lane; p < cnt; p += 32) {
            i64 n = p / ohw, q = p - n * ohw, oh = q / g.ow, ow = q - oh * g.ow;
            i64 ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w)
                continue;
            acc += ld(dy, ydt, n * g.ws[0] + oc * g.ws[1] + oh * g.ws[2] + ow * g.ws[3]) *
                   ld(x, g.xdt, n * g.xs[0] + ci * g.xs[1] + ih * g.xs[2] + iw * g.xs[3]);
        }
        acc = warp_sum(acc);
        if (lane == 0)
            st(o, g.odt, e, acc);
    }
}

/* the windows along one axis that cover input i (pool_window's, k == 0: adaptive) */
__device__ __forceinline__ void pool_cover(i64 i, i64 m, i64 n, i64 k, i64 s, i64 p, i64 *first,
                                           i64 *last)
{
    if (k == 0) {
        *first = i * m / n;
        i64 l = *first;
        while (l + 1 < m && (l + 1) * n / m <= i)
            l++;
        *last = l;
    } else {
        i64 lo = i + p - k + 1;
        *first = lo <= 0 ? 0 : (lo + s - 1) / s;
        i64 hi = (i + p) / s;
        *last = hi < m - 1 ? hi : m - 1;
    }
}

/* pool gradients, one thread per dx element: the windows covering it, in row-major window
 * order. kind 0 max (x recomputes each window's pick: the first maximum, or the last NaN),
 * 1 avg, 2 adaptive avg. xpl / ypl: the planes of x / dy (leading dims), their H, W strides
 * beside; dx is contiguous. */
extern "C" __global__ void tgc_ops_pool2d_grad(TV xpl, const void *xp, i64 xhs, i64 xws, TV ypl,
                                               const void *yp, i64 yhs, i64 yws, i64 H, i64 W,
                                               void *o, int odt, i64 OH, i64 OW, int kind, i64 kh,
                                               i64 kw, i64 sh, i64 sw, i64 ph, i64 pw,
                                               int exclude_pad, i64 n)
{
    GRID_STRIDE(e, n)
    {
        i64 j = e % W, t = e / W;
        i64 i = t % H, p = t / H;
        i64 yb = tv_off(ypl, p), xb = kind == 0 ? tv_off(xpl, p) : 0;
        const i64 k0 = kind == 2 ? 0 : kh, k1 = kind == 2 ? 0 : kw;
        i64 oh0, oh1, ow0, ow1;
        pool_cover(i, OH, H, k0, sh, ph, &oh0, &oh1);
        pool_cover(j, OW, W, k1, sw, pw, &ow0, &ow1);
        double acc = 0;
        for (i64 oh = oh0; oh <= oh1; oh++) {
            i64 hlo, hhi, hsp;
            pool_window(oh, OH, H, k0, sh, ph, kind == 1 && exclude_pad, &hlo, &hhi, &hsp);
            if (i < hlo || i >= hhi)
                continue;
            for (i64 ow = ow0; ow <= ow1; ow++) {
                i64 wlo, whi, wsp;
                pool_window(ow, OW, W, k1, sw, pw, kind == 1 && exclude_pad, &wlo, &whi, &wsp);
                if (j < wlo || j >= whi)
                    continue;
                double d = ld(yp, ypl.dt, yb + oh * yhs + ow * yws);
                if (kind != 0) {
                    acc += d / (double)(hsp * wsp);
                    continue;
                }
                i64 ai = hlo, aj = wlo;
                double best = -__longlong_as_double(0x7ff0000000000000ll);
                for (i64 a = hlo; a < hhi; a++)
                    for (i64 b = wlo; b < whi; b++) {
                        double v = ld(xp, xpl.dt, xb + a * xhs + b * xws);
                        if (v > best || v != v) {
                            best = v;
                            ai = a;
                            aj = b;
                        }
                    }
                if (ai == i && aj == j)
                    acc += d;
            }
        }
        st(o, odt, e, acc);
    }
}

/* index-add (EMBEDDING_GRAD, INDEX_SELECT_GRAD): out [outer, L, inner] (contiguous) from
 * dy (yt: any strides), row-major [outer, n, inner], at the n indices of ix. One warp per
 * (outer, row v, 256-wide chunk of inner): the lanes scan the indices 32 at a time and a
 * ballot gives the positions equal to v in index order; lane l sums elements l + 32 q of the
 * chunk over them in that order, in double (interp's order and arithmetic, no atomics) */
extern "C" __global__ void tgc_ops_index_add(TV yt, const void *yp, TV ix, const void *ip,
                                             void *o, int odt, i64 L, i64 n, i64 inner, i64 items)
{
    const int lane = (int)threadIdx.x % 32;
    const i64 wpb = blockDim.x / 32, chunks = (inner + 255) / 256;
    for (i64 it = (i64)blockIdx.x * wpb + threadIdx.x / 32; it < items; it += wpb * gridDim.x) {
        i64 ch = it % chunks, r = it / chunks;
        i64 v = r % L, ou = r / L;
        double acc[8];
        for (int q = 0; q < 8; q++)
            acc[q] = 0;
        for (i64 j0 = 0; j0 < n; j0 += 32) {
            i64 j = j0 + lane;
            bool hit = j < n && ldi(ip, ix.dt, tv_off(ix, j)) == v;
            unsigned m = __ballot_sync(0xffffffffu, hit);
            while (m) {
                int b = __ffs((int)m) - 1;
                m &= m - 1;
                i64 row = (ou * n + j0 + b) * inner;
                for (int q = 0; q < 8; q++) {
                    i64 e = ch * 256 + lane + 32 * q;
                    if (e < inner)
                        acc[q] += ld(yp, yt.dt, tv_off(yt, row + e));
                }
            }
        }
        for (int q = 0; q < 8; q++) {
            i64 e = ch * 256 + lane + 32 * q;
            if (e < inner)
                st(o, odt, (ou * L + v) * inner + e, acc[q]);
        }
    }
}

/* GATHER_GRAD: out (t's shape, contiguous; os: its shape as a TV with dy's strides in st)
 * from dy and ix (same shape, ix.shape; ix strides in ix.st): one thread per output element
 * over the positions along dim that land on it, in order */
extern "C" __global__ void tgc_ops_gather_grad(TV ov, const void *yp, TV ix, const void *ip,
                                               void *o, int odt, int dim, i64 total)
{
    GRID_STRIDE(e, total)
    {
        i64 r = e, yoff = 0, ioff = 0, jd = 0;
        bool inside = true;
        for (int d = ov.nd - 1; d >= 0; d--) {
            i64 s = ov.shape[d], q = r / s, k = r - q * s;
            r = q;
            if (d == dim) {
                jd = k;
                continue;
            }
            if (k >= ix.shape[d])
                inside = false;
            yoff += k * ov.st[d];
            ioff += k * ix.st[d];
        }
        double acc = 0;
        const i64 cnt = ov.nd > 0 ? ix.shape[dim] : 1;
        for (i64 k = 0; inside && k < cnt; k++) {
            i64 io = ov.nd > 0 ? ioff + k * ix.st[dim] : 0;
            if (ldi(ip, ix.dt, io) == jd)
                acc += ld(yp, ov.dt, ov.nd > 0 ? yoff + k * ov.st[dim] : 0);
        }
        st(o, odt, e, acc);
    }
}

/* pool gradients for contiguous f32 x / dy (every index below 2^31): tgc_ops_pool2d_grad
 * with 32-bit index arithmetic and float loads (the same windows, picks and summation order;
 * the sums in double) */
__device__ __forceinline__ void pool_cover32(int i, int m, int n, int k, int s, int p, int *first,
                                             int *last)
{
    if (k == 0) {
        int f = (int)((long long)i * m / n), l = f;
        while (l + 1 < m && (int)((long long)(l + 1) * n / m) <= i)
            l++;
        *first = f;
        *last = l;
    } else {
        int lo = i + p - k + 1, hi = (i + p) / s;
        *first = lo <= 0 ? 0 : (lo + s - 1) / s;
        *last = hi < m - 1 ? hi : m - 1;
    }
}

__device__ __forceinline__ void pool_window32(int i, int m, int n, int k, int s, int p, int excl,
                                              int *lo_, int *hi_, int *span_)
{
    int lo, hi, span;
    if (k == 0) {
        lo = (int)((long long)i * n / m);
        hi = (int)(((long long)(i + 1) * n + m - 1) / m);
        span = hi - lo;
    } else {
        lo = i * s - p;
        hi = lo + k;
        span = (hi < n + p ? hi : n + p) - lo;
    }
    *lo_ = lo > 0 ? lo : 0;
    *hi_ = hi < n ? hi : n;
    *span_ = excl ? *hi_ - *lo_ : span;
}

// Max pooling's argmax per output window (f32 planes of H x W, windows of OH x OW): the
// position a*W + b of the window's first maximum (a NaN replaces it: PyTorch's rule), the
// choice tgc_ops_pool2d_grad_f32 then reads instead of scanning every window it is in again.
extern "C" __global__ void tgc_ops_pool2d_argmax_f32(const float *x, int *arg, int H, int W,
                                                     int OH, int OW, int kh, int kw, int sh,
                                                     int sw, int ph, int pw, int n)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += blockDim.x * gridDim.x) {
        int ow = e % OW, t = e / OW;
        int oh = t % OH, p = t / OH;
        const float *xp = x + (long long)p * H * W;
        int hlo, hhi, hsp, wlo, whi, wsp;
        pool_window32(oh, OH, H, kh, sh, ph, 0, &hlo, &hhi, &hsp);
        pool_window32(ow, OW, W, kw, sw, pw, 0, &wlo, &whi, &wsp);
        int at = hlo * W + wlo;
        float best = -__uint_as_float(0x7f800000u);
        for (int a = hlo; a < hhi; a++)
            for (int b = wlo; b < whi; b++) {
                float v = xp[a * W + b];
                if (v > best || v != v) {
                    best = v;
                    at = a * W + b;
                }
            }
        arg[e] = at;
    }
}

// dx of a pool over f32 planes, a thread per element of dx summing (in double, windows in
// order) what it receives from each window it is in: max pooling (kind 0) dy where the
// window's argmax (arg, from tgc_ops_pool2d_argmax_f32) is this element, average pooling
// (1) and adaptive average pooling (2) dy over the window's count.
extern "C" __global__ void tgc_ops_pool2d_grad_f32(const int *arg, const float *dy, float *dx,
                                                   int H, int W, int OH, int OW, int kind, int kh,
                                                   int kw, int sh, int sw, int ph, int pw,
                                                   int excl, int n)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += blockDim.x * gridDim.x) {
        int j = e % W, t = e / W;
        int i = t % H, p = t / H;
        const float *yp = dy + (long long)p * OH * OW;
        const int *ap = arg + (long long)p * OH * OW;
        const int k0 = kind == 2 ? 0 : kh, k1 = kind == 2 ? 0 : kw;
        int oh0, oh1, ow0, ow1;
        pool_cover32(i, OH, H, k0, sh, ph, &oh0, &oh1);
        pool_cover32(j, OW, W, k1, sw, pw, &ow0, &ow1);
        double acc = 0;
        for (int oh = oh0; oh <= oh1; oh++) {
            int hlo, hhi, hsp;
            pool_window32(oh, OH, H, k0, sh, ph, kind == 1 && excl, &hlo, &hhi, &hsp);
            if (i < hlo || i >= hhi)
                continue;
            for (int ow = ow0; ow <= ow1; ow++) {
                int wlo, whi, wsp;
                pool_window32(ow, OW, W, k1, sw, pw, kind == 1 && excl, &wlo, &whi, &wsp);
                if (j < wlo || j >= whi)
                    continue;
                double d = yp[oh * OW + ow];
                if (kind != 0)
                    acc += d / (double)(hsp * wsp);
                else if (ap[oh * OW + ow] == i * W + j)
                    acc += d;
            }
        }
        dx[e] = (float)acc;
    }
}
