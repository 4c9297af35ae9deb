// The conv backward templates: the input gradient (dgrad) and the weight gradient (wgrad) of
// conv2d as implicit GEMMs on the GEMM library's loaders, pipeline, tensor-core (mma.sync, or
// wgmma from swizzled stages on sm_90) / SIMT compute and deterministic split-K
// (cuda_gemm_lib.cuh, which a program includes first).
// Embedded by the build as every .cu / .cuh (CMakeLists.txt, tools/embed_text.cmake);
// cuda_conv_grad.c appends it to every conv-grad program, then the entry points.
// f32 operands and results, weights [O][C/groups][KH][KW]; x / dy / dx NCHW contiguous, or
// x and dy channels-last (NHWC contiguous: the _cl loaders below; dx stays NCHW).
//
// dgrad, dx = conv_transpose(dy, w): the pixels of dx split into SH x SW phases (h mod SH,
// w mod SW); within one phase every pixel is reached by the same taps (r = r0 + j*SH), so
// each (group, phase) is a dense GEMM with no zero taps: M = C / groups, N = images x the
// phase's pixels, K = (O / groups) x its taps, A = the weights packed per (group, phase) as
// [c][tap][o] (tgc_cg_pack), B = the gather of dy at oh = base + hh - j (tgc_dcol). A phase
// without taps writes zeros. Strides and dilations may not both exceed 1 along an axis (the
// host sends those to the generic kernel).
//
// wgrad, dw[o][c, r, s] = sum over (image, pixel) of dy * x: per group M = O / groups,
// N = (C / groups) x KH x KW, K = images x OH x OW; A = dy rows (tgc_wdy), B = the transposed
// im2col of x (tgc_wcol). K is long and the tiles few, so the host splits K over gridDim.y;
// the library's split-K sums the partials in split order (the same bits on every run).
#ifndef TGC_CONV_GRAD_LIB_V1
#define TGC_CONV_GRAD_LIB_V1

#ifndef TGC_GEMM_EMU
__device__ __forceinline__ unsigned tgc_umulhi(unsigned a, unsigned b)
{
    return __umulhi(a, b);
}
#endif

// n / d for 0 <= n < 2^31, 1 <= d < 2^31, by a multiply-high (Granlund-Montgomery, as in
// CUTLASS's FastDivmod): set once per block, then a few instructions per division.
struct tgc_fdiv {
    unsigned mul;
    int shr;
    __device__ __forceinline__ void set(int d)
    {
        int s = 0;
        while (s < 31 && (1u << s) < (unsigned)d)
            s++;
        shr = s;
        mul = d <= 1 ? 0u
                     : (unsigned)(((1ull << 32) * ((1ull << s) - (unsigned long long)d)) /
                                      (unsigned long long)d +
                                  1ull);
    }
    __device__ __forceinline__ int div(int n) const
    {
        return (int)((tgc_umulhi((unsigned)n, mul) + (unsigned)n) >> shr);
    }
};

// The geometry of one conv: x [n, c, h, w], dy [n, o, oh, ow], w [o, c / groups, kh, kw].
struct tgc_cg_geom {
    long long n, c, h, w, o, kh, kw, oh, ow;
    int sh, sw, ph, pw, dh, dw, groups, pad_;
};

// One axis of a dgrad phase: taps r = r0 + j * rs (j < nr); the phase's pixels
// h = h0 + hh * S (hh < np) read dy at oh = base + hh - j * js.
struct tgc_dg_axis {
    int r0, rs, nr, js, base, np, h0;
};

__device__ __forceinline__ void tgc_dg_axis_of(tgc_dg_axis &a, int phase, int S, int P, int D,
                                               int KH, int H)
{
    if (S == 1) {
        a.r0 = 0;
        a.rs = 1;
        a.nr = KH;
        a.js = D;
        a.base = P;
        a.np = H;
        a.h0 = 0;
    } else { // D == 1
        int r0 = (phase + P) % S;
        a.r0 = r0;
        a.rs = S;
        a.nr = r0 < KH ? (KH - r0 + S - 1) / S : 0;
        a.js = 1;
        a.base = (phase + P - r0) / S;
        a.np = phase < H ? (H - phase + S - 1) / S : 0;
        a.h0 = phase;
    }
}

// taps of the phases before phase p (the packed weights' phase offsets)
__device__ __forceinline__ int tgc_dg_taps_before(const tgc_cg_geom &G, int p)
{
    int pre = 0;
    for (int q = 0; q < p; q++) {
        tgc_dg_axis a, b;
        tgc_dg_axis_of(a, q / G.sw, G.sh, G.ph, G.dh, (int)G.kh, (int)G.h);
        tgc_dg_axis_of(b, q % G.sw, G.sw, G.pw, G.dw, (int)G.kw, (int)G.w);
        pre += a.nr * b.nr;
    }
    return pre;
}

// What both dgrad B loaders (tgc_dcol, tgc_dcol_cl) know of a (group, phase): k = tap * Og + o
// (tap = j * nr_w + i) and the dy pixel of a phase column n at tap 0.
struct tgc_dg_taps {
    long long K;
    int OH, OW, Og, nsw, jsh, jsw;
    tgc_fdiv f_og, f_ns;
    __device__ __forceinline__ void set(const tgc_cg_geom &G, int Og_, const tgc_dg_axis &ah,
                                        const tgc_dg_axis &aw)
    {
        OH = (int)G.oh;
        OW = (int)G.ow;
        Og = Og_;
        nsw = aw.nr;
        jsh = ah.js;
        jsw = aw.js;
        K = (long long)Og * ah.nr * aw.nr;
        f_og.set(Og);
        f_ns.set(nsw > 0 ? nsw : 1);
    }
    // the tap of k (its offsets in dy: rows rd, columns sd) and its o; rd out of range past K
    __device__ __forceinline__ void tap_of(long long kk, int &rd, int &sd, int &o) const
    {
        rd = -(1 << 28);
        sd = 0;
        o = 0;
        if (kk < K) {
            int k32 = (int)kk, t = f_og.div(k32), j = f_ns.div(t);
            o = k32 - t * Og;
            rd = -j * jsh;
            sd = -(t - j * nsw) * jsw;
        }
    }
    // column n's image and dy pixel (oh, ow) at tap 0 (false past the phase's columns)
    __device__ __forceinline__ static bool pixel(long long n, const tgc_cg_geom &G,
                                                 const tgc_dg_axis &ah, const tgc_dg_axis &aw,
                                                 const tgc_fdiv &f_pix, const tgc_fdiv &f_npw,
                                                 int &img, int &oh, int &ow)
    {
        const int pix = ah.np * aw.np;
        if (n >= G.n * pix)
            return false;
        img = f_pix.div((int)n);
        const int q = (int)n - img * pix, hh = f_npw.div(q);
        oh = ah.base + hh;
        ow = aw.base + (q - hh * aw.np);
        return true;
    }
};

// B of dgrad: k = tap * Og + o (tap = j * nr_w + i), n = (image, hh, ww) of the phase; dy
// gathered into an MN-major stage, out-of-range rows and pixels read as zeros. Thread t owns
// CPT columns (decoded once) and BK / RS rows per stage, like tgc_im2col. SWZ: a K-major
// swizzled stage (the wgmma path) instead, each warp 8 consecutive columns x 4 rows (32
// bytes of dy per row: as coalesced as a warp along one row, and the 32 shared-memory words
// fall in 32 distinct banks of the swizzle); the warps side by side along n, then along k.
template <int ES, int BN, int BK, int NT, int PAD, int SWZ = 0> struct tgc_dcol : tgc_dg_taps {
    static constexpr int L = SWZ ? 0 : 1;
    static constexpr int LD = BN + PAD;
    static constexpr int SIZE = SWZ ? BN * BK : BK * LD;
    static constexpr int NW = NT / 32, NG = BN / 8;
    static constexpr int NWN = SWZ ? (NG < NW ? NG : NW) : 1, NWK = SWZ ? NW / NWN : 1;
    static constexpr int CPT = SWZ ? NG / NWN : BN >= NT ? BN / NT : 1;
    static constexpr int RS = SWZ ? 4 * NWK : NT >= BN ? NT / BN : 1;
    static_assert(SWZ || BN % NT == 0 || NT % BN == 0, "dcol: BN and threads");
    static_assert(!SWZ || (BN % 8 == 0 && NT % 32 == 0 && NG % NWN == 0 && NW % NWN == 0),
                  "dcol: swizzled tile and warps");
    static_assert(BK % RS == 0, "dcol: rows per stage");
    __device__ __forceinline__ static int col(int c)
    {
        const int t = (int)threadIdx.x;
        if (SWZ)
            return t % 8 + 8 * ((t / 32) % NWN + c * NWN);
        return BN >= NT ? t + c * NT : t % BN;
    }
    __device__ __forceinline__ static int row0()
    {
        const int t = (int)threadIdx.x;
        if (SWZ)
            return (t % 32) / 8 + 4 * ((t / 32) / NWN);
        return NT >= BN ? t / BN : 0;
    }
    const char *dy;
    long long OHW;
    long long cbase[CPT];
    int ch[CPT], cw[CPT];
    __device__ __forceinline__ void init(const char *dy_, const tgc_cg_geom &G, int gi, int Og_,
                                         const tgc_dg_axis &ah, const tgc_dg_axis &aw,
                                         const tgc_fdiv &f_pix, const tgc_fdiv &f_npw,
                                         long long n0)
    {
        dy = dy_;
        set(G, Og_, ah, aw);
        OHW = G.oh * G.ow;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            int img;
            if (pixel(n0 + col(c), G, ah, aw, f_pix, f_npw, img, ch[c], cw[c])) {
                cbase[c] = ((long long)img * G.o + (long long)gi * Og) * OHW +
                           (long long)ch[c] * OW + cw[c];
            } else {
                ch[c] = -(1 << 28);
                cw[c] = 0;
                cbase[c] = 0;
            }
        }
    }
    __device__ __forceinline__ static int off(int n, int k)
    {
        return SWZ ? tgc_sw_off<0, BN, BK, ES>(n, k) : (k * LD + n) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        const unsigned sa = tgc_smem_addr(s);
        const int kr0 = row0();
#pragma unroll 4
        for (int r = 0; r < BK / RS; r++) {
            int k = kr0 + r * RS, rd, sd, o;
            tap_of(k0 + k, rd, sd, o);
            const long long koff = (long long)o * OHW + (long long)rd * OW + sd;
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                int oh = ch[c] + rd, ow = cw[c] + sd;
                bool ok = (unsigned)oh < (unsigned)OH && (unsigned)ow < (unsigned)OW;
                const char *src = ok ? dy + (cbase[c] + koff) * ES : dy;
                tgc_cp4_at(sa + off(col(c), k), src, ok ? 4 : 0);
            }
        }
    }
};

// B of dgrad over a channels-last dy (NHWC: [image][oh][ow][o]): k = tap * Og + o with o
// fastest, so within one tap a pixel's k run is Og contiguous floats of dy. A K-major stage
// (L 0: padded, or swizzled SWZ, the wgmma path) takes 16-byte chunks of 4 o; an MN-major one
// (L 1, the SIMT compute) the same 4 values one by one. Thread t owns the chunk column
// (t % C) 4 of every k tile (its tap decoded once per tile) and the rows t / C + i NT / C (their
// pixel decoded once, in init); a warp reads 8 chunks (128 bytes) of each of 4 pixels. `vec`
// (per call): dy 16-byte aligned, O and Og multiples of 4 (no chunk straddles a tap);
// otherwise the chunk's 4 values are gathered one by one, each one's tap decoded.
template <int ES, int BN, int BK, int NT, int L_, int PAD, int SWZ = 0>
struct tgc_dcol_cl : tgc_dg_taps {
    static constexpr int L = L_;
    static constexpr int LD = L == 0 ? BK + PAD : BN + PAD;
    static constexpr int SIZE = SWZ ? BN * BK : (L == 0 ? BN : BK) * LD;
    static constexpr int V = 4, C = BK / V, CPT = BN * C / NT;
    static_assert(ES == 4 && BK % V == 0 && NT % C == 0 && (BN * C) % NT == 0,
                  "dcol_cl: fp32 chunks and threads");
    static_assert(!SWZ || L == 0, "dcol_cl: swizzled stages are K-major");
    const char *dy; // dy at channel gi * Og
    int O;
    bool vec;
    int cpx[CPT]; // the row's pixel at tap 0, (image OH + oh) OW + ow (may leave dy: tested per tap)
    int ch[CPT], cw[CPT];
    __device__ __forceinline__ static int row(int i)
    {
        return (int)threadIdx.x / C + i * (NT / C);
    }
    __device__ __forceinline__ void init(const char *dy_, const tgc_cg_geom &G, int gi, int Og_,
                                         const tgc_dg_axis &ah, const tgc_dg_axis &aw,
                                         const tgc_fdiv &f_pix, const tgc_fdiv &f_npw,
                                         long long n0)
    {
        dy = dy_ + (long long)gi * Og_ * ES;
        set(G, Og_, ah, aw);
        O = (int)G.o;
        vec = (unsigned long long)dy % 16 == 0 && O % V == 0 && Og % V == 0;
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            int img;
            if (pixel(n0 + row(i), G, ah, aw, f_pix, f_npw, img, ch[i], cw[i])) {
                cpx[i] = (img * OH + ch[i]) * OW + cw[i];
            } else {
                ch[i] = -(1 << 28); // every tap out of bounds
                cw[i] = 0;
                cpx[i] = 0;
            }
        }
    }
    __device__ __forceinline__ static int off(int n, int k)
    {
        return SWZ ? tgc_sw_off<0, BN, BK, ES>(n, k) : (L == 0 ? n * LD + k : k * LD + n) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        const int c = ((int)threadIdx.x % C) * V;
        if (!vec) {
#pragma unroll 1
            for (int j = 0; j < V; j++) {
                int rd, sd, o;
                tap_of(k0 + c + j, rd, sd, o);
#pragma unroll
                for (int i = 0; i < CPT; i++) {
                    int oh = ch[i] + rd, ow = cw[i] + sd;
                    bool ok = (unsigned)oh < (unsigned)OH && (unsigned)ow < (unsigned)OW;
                    const char *src =
                        ok ? dy + ((long long)(cpx[i] + rd * OW + sd) * O + o) * ES : dy;
                    tgc_cp4(s + off(row(i), c + j), src, ok ? 4 : 0);
                }
            }
            return;
        }
        int rd, sd, o;
        tap_of(k0 + c, rd, sd, o);
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            int oh = ch[i] + rd, ow = cw[i] + sd;
            bool ok = (unsigned)oh < (unsigned)OH && (unsigned)ow < (unsigned)OW;
            const char *src = ok ? dy + ((long long)(cpx[i] + rd * OW + sd) * O + o) * ES : dy;
            if (L == 0) {
                tgc_cp16(s + off(row(i), c), src, ok ? 16 : 0);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++)
                    tgc_cp4(s + off(row(i), c + j), ok ? src + 4 * j : dy, ok ? 4 : 0);
            }
        }
    }
};

template <class LA_, class LB_> struct tgc_dg_prob {
    typedef LA_ LA;
    typedef LB_ LB;
    tgc_cg_geom G;
    const char *dy, *wt;
    float *dx;
    long long M, N, K, wbase, pix;
    int gi, Og, Cg, Kp;
    tgc_dg_axis ah, aw;
    tgc_fdiv f_pix, f_npw;
    __device__ __forceinline__ void setup(int z)
    {
        const int nph = G.sh * G.sw;
        gi = z / nph;
        const int p = z - gi * nph;
        tgc_dg_axis_of(ah, p / G.sw, G.sh, G.ph, G.dh, (int)G.kh, (int)G.h);
        tgc_dg_axis_of(aw, p % G.sw, G.sw, G.pw, G.dw, (int)G.kw, (int)G.w);
        Og = (int)(G.o / G.groups);
        Cg = (int)(G.c / G.groups);
        Kp = Og * ah.nr * aw.nr;
        wbase = (long long)gi * Cg * Og * G.kh * G.kw +
                (long long)Cg * Og * tgc_dg_taps_before(G, p);
        pix = (long long)ah.np * aw.np;
        M = Cg;
        N = G.n * pix;
        K = Kp;
        f_pix.set(pix > 0 ? (int)pix : 1);
        f_npw.set(aw.np > 0 ? aw.np : 1);
    }
    __device__ __forceinline__ void loaders(long long m0, long long n0, LA &la, LB &lb) const
    {
        la.p = wt + (wbase + m0 * Kp) * 4;
        la.smn = Kp;
        la.sk = 1;
        la.MN = M - m0;
        la.K = Kp;
        la.vec = ((unsigned long long)la.p % 16 == 0) && Kp % 4 == 0;
        lb.init(dy, G, gi, Og, ah, aw, f_pix, f_npw, n0);
    }
    __device__ __forceinline__ void out(long long m, long long n, float v) const
    {
        int img = f_pix.div((int)n), q = (int)n - img * (int)pix;
        int hh = f_npw.div(q), ww = q - hh * aw.np;
        long long h = ah.h0 + (long long)hh * G.sh, w = aw.h0 + (long long)ww * G.sw;
        dx[(((long long)img * G.c + (long long)gi * Cg + m) * G.h + h) * G.w + w] = v;
    }
};

// A of wgrad: element (m = o, k = (image, pixel)) of dy, into a stage of layout L (SWZ: K-major
// swizzled, the wgmma path). The vector path (L == 0, OH*OW % 4 == 0, 16-byte aligned dy)
// moves 4 pixels of one image per cp.async.
template <int ES, int BM, int BK, int NT, int L_, int PAD, int SWZ = 0> struct tgc_wdy {
    static constexpr int L = L_;
    static constexpr int LD = L == 0 ? BK + PAD : BM + PAD;
    static constexpr int SIZE = SWZ ? BM * BK : (L == 0 ? BM : BK) * LD;
    static_assert(!SWZ || L == 0, "wdy: swizzled stages are K-major");
    const char *p; // dy at (image 0, channel gi * Og + m0, pixel 0)
    long long OHW, O, MN, K;
    bool vec;
    tgc_fdiv f_ohw;
    __device__ __forceinline__ static int off(int m, int k)
    {
        return SWZ ? tgc_sw_off<0, BM, BK, ES>(m, k) : (L == 0 ? m * LD + k : k * LD + m) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        if (L == 0 && vec) {
            constexpr int C = BK / 4;
            static_assert((BM * C) % NT == 0, "wdy: chunks not a multiple of threads");
#pragma unroll
            for (int i = 0; i < BM * C / NT; i++) {
                int e = (int)threadIdx.x + i * NT;
                int row = e / C, c = (e % C) * 4;
                long long kk = k0 + c;
                bool ok = row < MN && kk < K;
                const char *src = p;
                if (ok) {
                    int img = f_ohw.div((int)kk);
                    long long px = kk - (long long)img * OHW;
                    src = p + (((long long)img * O + row) * OHW + px) * ES;
                }
                tgc_cp16(s + off(row, c), src, ok ? 16 : 0);
            }
            return;
        }
        static_assert((BM * BK) % NT == 0, "wdy: tile not a multiple of threads");
#pragma unroll 4
        for (int i = 0; i < BM * BK / NT; i++) {
            int e = (int)threadIdx.x + i * NT;
            int k = e % BK, m = e / BK;
            long long kk = k0 + k;
            bool ok = m < MN && kk < K;
            const char *src = p;
            if (ok) {
                int img = f_ohw.div((int)kk);
                long long px = kk - (long long)img * OHW;
                src = p + (((long long)img * O + m) * OHW + px) * ES;
            }
            tgc_cp4(s + off(m, k), src, ok ? 4 : 0);
        }
    }
};

// B of wgrad: element (n = (c, r, s), k = (image, oh, ow)) = x[image, gi*Cg + c,
// oh*SH - PH + r*DH, ow*SW - PW + s*DW], zeros outside x. A warp covers 32 consecutive k of
// one column (coalesced along the pixels); thread t owns column set t / BK (CPT columns,
// decoded once) and row t % BK of every stage. SWZ: a K-major swizzled stage (the wgmma path;
// a warp writes one 128-byte row when BK is 32).
template <int ES, int BN, int BK, int NT, int L_, int PAD, int SWZ = 0> struct tgc_wcol {
    static constexpr int L = L_;
    static constexpr int LD = L == 0 ? BK + PAD : BN + PAD;
    static constexpr int SIZE = SWZ ? BN * BK : (L == 0 ? BN : BK) * LD;
    static_assert(!SWZ || L == 0, "wcol: swizzled stages are K-major");
    static constexpr int TN = NT / BK;
    static constexpr int CPT = BN / TN;
    static_assert(NT % BK == 0 && BN % TN == 0 && CPT <= 32, "wcol: threads and tile");
    const char *x; // x at (image 0, channel gi * Cg)
    long long K, OHW, CHW;
    int H, W, OW, SH, SW, PH, PW;
    tgc_fdiv f_ohw, f_ow;
    int coff[CPT], crs[CPT];
    unsigned mask;
    __device__ __forceinline__ void init(const char *x_, const tgc_cg_geom &G, int gi, int Cg,
                                         long long n0, long long N, long long K_)
    {
        x = x_ + (long long)gi * Cg * G.h * G.w * ES;
        K = K_;
        OHW = G.oh * G.ow;
        CHW = G.c * G.h * G.w;
        H = (int)G.h;
        W = (int)G.w;
        OW = (int)G.ow;
        SH = G.sh;
        SW = G.sw;
        PH = G.ph;
        PW = G.pw;
        f_ohw.set(OHW > 0 ? (int)OHW : 1);
        f_ow.set(OW > 0 ? OW : 1);
        const int khw = (int)(G.kh * G.kw), kw = (int)G.kw, tn = (int)threadIdx.x / BK;
        mask = 0;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            long long n = n0 + tn + c * TN;
            coff[c] = 0;
            crs[c] = 0;
            if (n < N) {
                int nn = (int)n, ci = nn / khw, rs = nn - ci * khw, r = rs / kw, sx = rs - r * kw;
                int rd = r * G.dh, sd = sx * G.dw;
                coff[c] = ci * H * W + rd * W + sd;
                crs[c] = (rd << 16) | sd;
                mask |= 1u << c;
            }
        }
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        const int kl = (int)threadIdx.x % BK, tn = (int)threadIdx.x / BK;
        long long kk = k0 + kl;
        bool row_ok = kk < K;
        int ih0 = -(1 << 28), iw0 = 0;
        long long base = 0;
        if (row_ok) {
            int img = f_ohw.div((int)kk), q = (int)(kk - (long long)img * OHW);
            int oh = f_ow.div(q), ow = q - oh * OW;
            ih0 = oh * SH - PH;
            iw0 = ow * SW - PW;
            base = (long long)img * CHW + (long long)ih0 * W + iw0;
        }
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            int ih = ih0 + (crs[c] >> 16), iw = iw0 + (crs[c] & 0xffff);
            bool ok = ((mask >> c) & 1u) && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            const char *src = ok ? x + (base + coff[c]) * ES : x;
            tgc_cp4(s + off(tn + c * TN, kl), src, ok ? 4 : 0);
        }
    }
    __device__ __forceinline__ static int off(int n, int k)
    {
        return SWZ ? tgc_sw_off<0, BN, BK, ES>(n, k) : (L == 0 ? n * LD + k : k * LD + n) * ES;
    }
};

// A of wgrad over a channels-last dy (NHWC): element (m = o, k = (image, pixel)) at dy row k,
// channel gi Og + m0 + m: a k row's channels are contiguous, so an MN-major stage (L 1) takes
// 16-byte chunks along m, a warp one contiguous run of a row, with no index decoding at all.
// vec (per call): dy 16-byte aligned, O and Og multiples of 4; else element by element.
template <int ES, int BM, int BK, int NT, int PAD> struct tgc_wdy_cl {
    static constexpr int L = 1;
    static constexpr int LD = BM + PAD;
    static constexpr int SIZE = BK * LD;
    static constexpr int V = 4, C = BM / V;
    static_assert(ES == 4 && (BK * C) % NT == 0 && (BM * BK) % NT == 0 && LD % V == 0,
                  "wdy_cl: fp32 chunks and threads");
    const char *p; // dy at (pixel 0, channel gi * Og + m0)
    long long O, MN, K;
    bool vec;
    __device__ __forceinline__ void init(const char *dy, const tgc_cg_geom &G, int gi, int Og,
                                         long long m0, long long MN_, long long K_)
    {
        p = dy + ((long long)gi * Og + m0) * ES;
        O = G.o;
        MN = MN_;
        K = K_;
        vec = (unsigned long long)dy % 16 == 0 && G.o % V == 0 && Og % V == 0;
    }
    __device__ __forceinline__ static int off(int m, int k)
    {
        return (k * LD + m) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        if (vec) {
#pragma unroll
            for (int i = 0; i < BK * C / NT; i++) {
                int e = (int)threadIdx.x + i * NT, k = e / C, m = (e % C) * V;
                long long kk = k0 + k;
                bool ok = m < MN && kk < K;
                tgc_cp16(s + off(m, k), ok ? p + (kk * O + m) * ES : p, ok ? 16 : 0);
            }
            return;
        }
#pragma unroll 4
        for (int i = 0; i < BM * BK / NT; i++) {
            int e = (int)threadIdx.x + i * NT, k = e / BM, m = e % BM;
            long long kk = k0 + k;
            bool ok = m < MN && kk < K;
            tgc_cp4(s + off(m, k), ok ? p + (kk * O + m) * ES : p, ok ? 4 : 0);
        }
    }
};

// B of wgrad over a channels-last x (NHWC): element (n = tap Cg + c with c fastest, tap = r KW
// + s; k = (image, oh, ow)) = x[image][oh SH - PH + r DH][ow SW - PW + s DW][gi Cg + c], zeros
// outside x: within one tap a pixel's n run is contiguous in x, so an MN-major stage (L 1)
// takes 16-byte chunks along n. Thread t owns the chunk column (t % C) 4 (its taps decoded
// once, in init) and the rows t / C + i NT / C of every stage (each row's pixel decoded once
// per stage: two multiply-high divisions for a chunk); a warp reads 32 chunks of one pixel.
// vec (per call): x 16-byte aligned, C and Cg multiples of 4 (no chunk straddles a tap);
// otherwise the chunk's 4 values are gathered one by one.
template <int ES, int BN, int BK, int NT, int PAD> struct tgc_wcol_cl {
    static constexpr int L = 1;
    static constexpr int LD = BN + PAD;
    static constexpr int SIZE = BK * LD;
    static constexpr int V = 4, C = BN / V, RPT = BK * C / NT;
    static_assert(ES == 4 && NT % C == 0 && (BK * C) % NT == 0 && LD % V == 0,
                  "wcol_cl: fp32 chunks and threads");
    const char *x; // x at channel gi * Cg
    long long K;
    int H, W, CH, OW, OHW, SH, SW, PH, PW;
    bool vec;
    tgc_fdiv f_ohw, f_ow;
    int crd[V], csd[V], cco[V]; // each column's tap offsets (rows, columns of x) and channel
    unsigned mask;              // the columns inside N
    __device__ __forceinline__ void init(const char *x_, const tgc_cg_geom &G, int gi, int Cg,
                                         long long n0, long long N, long long K_)
    {
        x = x_ + (long long)gi * Cg * ES;
        K = K_;
        H = (int)G.h;
        W = (int)G.w;
        CH = (int)G.c;
        OW = (int)G.ow;
        OHW = (int)(G.oh * G.ow);
        SH = G.sh;
        SW = G.sw;
        PH = G.ph;
        PW = G.pw;
        f_ohw.set(OHW > 0 ? OHW : 1);
        f_ow.set(OW > 0 ? OW : 1);
        vec = (unsigned long long)x_ % 16 == 0 && CH % V == 0 && Cg % V == 0;
        const int col = ((int)threadIdx.x % C) * V, kw = (int)G.kw;
        mask = 0;
#pragma unroll
        for (int j = 0; j < V; j++) {
            long long n = n0 + col + j;
            crd[j] = -(1 << 28);
            csd[j] = 0;
            cco[j] = 0;
            if (n < N) {
                int nn = (int)n, tap = nn / Cg, r = tap / kw;
                crd[j] = r * G.dh;
                csd[j] = (tap - r * kw) * G.dw;
                cco[j] = nn - tap * Cg;
                mask |= 1u << j;
            }
        }
    }
    __device__ __forceinline__ static int off(int n, int k)
    {
        return (k * LD + n) * ES;
    }
    __device__ __forceinline__ void load(char *s, long long k0) const
    {
        const int col = ((int)threadIdx.x % C) * V;
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const int k = (int)threadIdx.x / C + i * (NT / C);
            const long long kk = k0 + k;
            int ih0 = -(1 << 28), iw0 = 0, img = 0;
            if (kk < K) {
                img = f_ohw.div((int)kk);
                int q = (int)kk - img * OHW, oh = f_ow.div(q);
                ih0 = oh * SH - PH;
                iw0 = (q - oh * OW) * SW - PW;
            }
            if (vec) {
                int ih = ih0 + crd[0], iw = iw0 + csd[0];
                bool ok = (mask & 1u) && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
                const char *src =
                    ok ? x + ((long long)((img * H + ih) * W + iw) * CH + cco[0]) * ES : x;
                tgc_cp16(s + off(col, k), src, ok ? 16 : 0);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    int ih = ih0 + crd[j], iw = iw0 + csd[j];
                    bool ok = ((mask >> j) & 1u) && (unsigned)ih < (unsigned)H &&
                              (unsigned)iw < (unsigned)W;
                    const char *src =
                        ok ? x + ((long long)((img * H + ih) * W + iw) * CH + cco[j]) * ES : x;
                    tgc_cp4(s + off(col + j, k), src, ok ? 4 : 0);
                }
            }
        }
    }
};

// CL: x and dy channels-last (tgc_wdy_cl, tgc_wcol_cl: n = tap Cg + c), else NCHW (tgc_wdy,
// tgc_wcol: n = (c, r, s)); dw is OIHW either way.
template <class LA_, class LB_, int CL = 0> struct tgc_wg_prob {
    typedef LA_ LA;
    typedef LB_ LB;
    tgc_cg_geom G;
    const char *x, *dy;
    float *dw;
    long long M, N, K;
    int gi, Og, Cg;
    tgc_fdiv f_ohw, f_cg;
    __device__ __forceinline__ void setup(int z)
    {
        gi = z;
        Og = (int)(G.o / G.groups);
        Cg = (int)(G.c / G.groups);
        M = Og;
        N = (long long)Cg * G.kh * G.kw;
        K = G.n * G.oh * G.ow;
        long long ohw = G.oh * G.ow;
        f_ohw.set(ohw > 0 ? (int)ohw : 1);
        f_cg.set(Cg);
    }
    __device__ __forceinline__ void loaders(long long m0, long long n0, LA &la, LB &lb) const
    {
        if constexpr (CL) {
            la.init(dy, G, gi, Og, m0, M - m0, K);
        } else {
            const long long ohw = G.oh * G.ow;
            la.p = dy + ((long long)gi * Og + m0) * ohw * 4;
            la.OHW = ohw;
            la.O = G.o;
            la.MN = M - m0;
            la.K = K;
            la.vec = ((unsigned long long)dy % 16 == 0) && ohw % 4 == 0;
            la.f_ohw = f_ohw;
        }
        lb.init(x, G, gi, Cg, n0, N, K);
    }
    __device__ __forceinline__ void out(long long m, long long n, float v) const
    {
        if constexpr (CL) { // n < 2^31 (tgc_cuda_conv_grad_fits): a multiply-high division
            const int nn = (int)n, tap = f_cg.div(nn);
            dw[(((long long)gi * Og + m) * Cg + (nn - tap * Cg)) * (G.kh * G.kw) + tap] = v;
        } else {
            dw[((long long)gi * Og + m) * N + n] = v;
        }
    }
};

// One block per (tile, split, z): z is (group, phase) for dgrad, the group for wgrad; the
// problem's sizes depend on z, gridDim.x covers the largest, and blocks past a z's tiles
// return at once (all splits of a tile alike, so the split-K counters stay consistent).
template <int ST, int BM, int BN, int BK, int NT, int ES, class COMP, class PROB>
__device__ __forceinline__ void tgc_cg_run(PROB &pb, void *ws, char *smem)
{
    pb.setup((int)blockIdx.z);
    const long long tiles_m = (pb.M + BM - 1) / BM, tiles_n = (pb.N + BN - 1) / BN;
    long long tm, tn;
    if (!tgc_tile_of(tiles_m, tiles_n, tm, tn))
        return;
    const long long m0 = tm * BM, n0 = tn * BN;
    const int ktiles = (int)((pb.K + BK - 1) / BK);
    const int splits = (int)gridDim.y, sp = (int)blockIdx.y;
    const int kb = tgc_split_k0(ktiles, sp, splits), ke = tgc_split_k0(ktiles, sp + 1, splits);
    typename PROB::LA la;
    typename PROB::LB lb;
    pb.loaders(m0, n0, la, lb);
    COMP comp;
    comp.init();
    char *sA = smem;
    if constexpr (tgc_async_of<COMP>::v) // wgmma: stages on 1024-byte boundaries
        sA += (1024u - (tgc_smem_addr(smem) & 1023u)) & 1023u;
    char *sB = sA + ST * PROB::LA::SIZE * ES;
    tgc_pipeline<ST>(la, lb, kb, ke, sA, sB, ES, BK, comp);
    if (!tgc_splitk<NT>(comp, ws, (long long)blockIdx.z * gridDim.x + blockIdx.x,
                        (long long)gridDim.z * gridDim.x))
        return;
#pragma unroll
    for (int q = 0; q < COMP::NACC; q++) {
        int m, n;
        comp.pos(q, m, n);
        if (m0 + m < pb.M && n0 + n < pb.N)
            pb.out(m0 + m, n0 + n, comp.at(q));
    }
}

// Where weight (o, c, r, sx) goes in the packed dgrad weights: [group][phase][c][tap][o]
// (see the top); 32-bit indices (the caller checks the packed size fits).
__device__ __forceinline__ long long tgc_cg_pack_dst(const tgc_cg_geom &G, int Og, int Cg, int o,
                                                     int c, int r, int sx)
{
    const int gi = o / Og, oo = o - gi * Og;
    int phh = 0, j = r, phw = 0, i = sx;
    if (G.sh > 1) {
        phh = ((r % G.sh - G.ph) % G.sh + G.sh) % G.sh;
        j = r / G.sh;
    }
    if (G.sw > 1) {
        phw = ((sx % G.sw - G.pw) % G.sw + G.sw) % G.sw;
        i = sx / G.sw;
    }
    int T = (int)(G.kh * G.kw), before = 0, nrw = (int)G.kw;
    if (G.sh > 1 || G.sw > 1) {
        const int p = phh * G.sw + phw;
        tgc_dg_axis ah, aw;
        tgc_dg_axis_of(ah, phh, G.sh, G.ph, G.dh, (int)G.kh, (int)G.h);
        tgc_dg_axis_of(aw, phw, G.sw, G.pw, G.dw, (int)G.kw, (int)G.w);
        T = ah.nr * aw.nr;
        nrw = aw.nr;
        before = tgc_dg_taps_before(G, p);
    }
    const int tap = j * nrw + i;
    return (long long)gi * Cg * Og * G.kh * G.kw + (long long)Cg * Og * before +
           (long long)c * Og * T + (long long)tap * Og + oo;
}

// The dgrad weights packed per (group, phase) as [c][tap][o] (see the top); w has any strides.
// A thread per weight in w's logical order, its indices decoded with multiply-high divisions
// (the packed size is below 2^31: the host sends larger ones to the generic kernel).
extern "C" __global__ void tgc_cg_pack(tgc_cg_geom G, const float *w, long long s0, long long s1,
                                       long long s2, long long s3, float *wt)
{
    const int Og = (int)(G.o / G.groups), Cg = (int)(G.c / G.groups);
    const int kh = (int)G.kh, kw = (int)G.kw, total = (int)G.o * Cg * kh * kw;
    tgc_fdiv dkw, dkh, dcg;
    dkw.set(kw);
    dkh.set(kh);
    dcg.set(Cg);
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        int t = e, q = dkw.div(t);
        const int sx = t - q * kw;
        t = q;
        q = dkh.div(t);
        const int r = t - q * kh;
        t = q;
        const int o = dcg.div(t), c = t - o * Cg;
        wt[tgc_cg_pack_dst(G, Og, Cg, o, c, r, sx)] =
            w[(long long)o * s0 + (long long)c * s1 + (long long)r * s2 + (long long)sx * s3];
    }
}

#endif // TGC_CONV_GRAD_LIB_V1
