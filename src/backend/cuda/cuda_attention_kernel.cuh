/* The fused attention kernel's device code. The same text is the NVRTC program's body
 * (embedded by the build as every .cu / .cuh; cuda_attention.c puts the definitions below and
 * cuda_attention_args.cuh before it) and plain C that a host emulation of the CUDA execution
 * model compiles and runs (tests/unit/test_cuda_attention.c includes this file). Therefore
 * only the C subset of CUDA C++, and every CUDA-specific word through a macro the including
 * side defines:
 *   AT_DEV        a device helper (static inline)
 *   AT_KERNEL     the kernel's qualifiers (extern "C" __global__ __launch_bounds__)
 *   AT_SYNC()     __syncthreads()
 *   AT_SHFL_XOR(v, o)  __shfl_xor_sync over the full warp (always called by every thread)
 *   AT_AS_FLOAT(u), AT_AS_UINT(f)  bit casts
 *   AT_UNROLL, AT_NO_UNROLL  #pragma unroll / unroll 1 (as _Pragma)
 *   AT_TID, AT_BID  threadIdx.x, blockIdx.x;  at_smem  the dynamic shared memory (float[])
 *   AT_D, AT_DV   head dims of q/k and v (compile-time);  AT_DT  0 f32, 1 f16, 2 bf16
 *   AT_D4, AT_DP, AT_NC, AT_DVP, AT_BNP  the padded extents (cuda_attention.h: TGC_AT_*)
 *   AT_LD4(p), AT_ST4(p, v), AT_LDG4(p)  float4 shared load / store, global load;
 *                 float4  CUDA's (x, y, z, w)
 *   AT_DROPOUT    1 when the variant applies dropout (a.dropout), else 0
 *   AT_BM, AT_BN, AT_NT  query rows and keys per tile, threads per block (32 or 64, 64, 128)
 *   AT_RM         query rows per thread (AT_BM / 16)
 * and struct tgc_at_args (cuda_attention_args.cuh) declared before it.
 *
 * Algorithm (flash attention forward, fp32 SIMT): block = (batch position, tile of AT_BM
 * queries). Thread t owns query rows t / 8 + 16 i, i < AT_RM, score columns t % 8 + 8 j of each
 * key tile and output columns 32 c + 4 (t % 8) + u, u < 4. Shared rows are padded to 4 mod 8
 * floats so the float4 reads of a warp hit distinct banks. Per key tile: K and V are staged in shared memory
 * as fp32, the AT_RM x 8 scores are exact fp32 dot products, the row max / sum come from shuffles
 * over the 8 lanes of a row, the unnormalized probabilities (with the dropout keep mask and
 * 1/(1-p) applied) go through shared memory into the register accumulators, which are
 * rescaled by exp(m_old - m_new). The end divides by the full row sum (dropped elements
 * included, as dropout applies to the normalized weights). Rows with every score -inf give 0. */
AT_DEV float at_ld(const void *p, long long i, long long dt)
{
    if (dt == 0)
        return ((const float *)p)[i];
    if (dt == 2)
        return AT_AS_FLOAT(((unsigned int)((const unsigned short *)p)[i]) << 16);
    if (dt == 3)
        return (float)((const double *)p)[i];
    {
        unsigned int h = ((const unsigned short *)p)[i];
        unsigned int s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        if (e == 0) {
            float f = (float)m * 5.9604644775390625e-8f;
            return s ? -f : f;
        }
        if (e == 31)
            return AT_AS_FLOAT(s | 0x7f800000u | (m << 13));
        return AT_AS_FLOAT(s | ((e + 112u) << 23) | (m << 13));
    }
}

AT_DEV void at_st(void *p, long long i, float f)
{
    if (AT_DT == 0) {
        ((float *)p)[i] = f;
    } else if (AT_DT == 2) {
        unsigned int x = AT_AS_UINT(f);
        if ((x & 0x7fffffffu) > 0x7f800000u)
            x = (x >> 16) | 0x40u;
        else
            x = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        ((unsigned short *)p)[i] = (unsigned short)x;
    } else {
        unsigned int x = AT_AS_UINT(f);
        unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu, r;
        if (ax >= 0x7f800000u)
            r = sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
        else if (ax >= 0x477ff000u)
            r = sign | 0x7c00u;
        else if (ax < 0x38800000u)
            r = sign | (unsigned int)rintf(AT_AS_FLOAT(ax) * 16777216.0f);
        else
            r = sign | ((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13);
        ((unsigned short *)p)[i] = (unsigned short)r;
    }
}

/* runtime/philox.h: word 0 of Philox4x32-10 at counter (lo, hi, 0, 0), key (seed lo, hi) */
AT_DEV unsigned int at_philox(unsigned long long seed, unsigned long long ctr)
{
    unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0, c3 = 0;
    unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
    int r;
    for (r = 0; r < 10; r++) {
        unsigned long long p0 = (unsigned long long)0xD2511F53u * c0;
        unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c2;
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        c0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0;
        c1 = (unsigned int)p1;
        c2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
        c3 = (unsigned int)p0;
    }
    return c0;
}

/* Stages rows [r0, r0 + nrows) of an [n, w] operand (element offset o, strides sl, se) into
 * shared rows of ld floats as fp32: zeros past row n and in columns [w, wpad). vec (f32 with
 * se == 1, w % 4 == 0 and 16-byte aligned rows): float4 loads. */
AT_DEV void at_stage(float *dst, int ld, int nrows, int wpad, int w, const void *src, long long o,
                     long long r0, long long n, long long sl, long long se, long long vec, int tid)
{
    int j;
    if (AT_DT == 0 && vec) {
        for (j = tid; j < nrows * (wpad / 4); j += AT_NT) {
            const int r = j / (wpad / 4), e = (j % (wpad / 4)) * 4;
            float4 v = {0.0f, 0.0f, 0.0f, 0.0f};
            if (r0 + r < n && e < w)
                v = AT_LDG4((const float *)src + o + (r0 + r) * sl + e);
            AT_ST4(&dst[r * ld + e], v);
        }
    } else {
        for (j = tid; j < nrows * wpad; j += AT_NT) {
            const int r = j / wpad, e = j % wpad;
            dst[r * ld + e] =
                r0 + r < n && e < w ? at_ld(src, o + (r0 + r) * sl + e * se, AT_DT) : 0.0f;
        }
    }
}

AT_KERNEL void tgc_attention_fwd(struct tgc_at_args a)
{
    const int tid = (int)AT_TID;
    const int tr = tid >> 3, tc = tid & 7;
    const long long qt = (long long)AT_BID % a.n_qtiles;
    const long long b = (long long)AT_BID / a.n_qtiles;
    const long long q0 = qt * AT_BM;
    const float neg_inf = -AT_AS_FLOAT(0x7f800000u);
    float *sK = at_smem;             /* [AT_BN][AT_DP]: the key tile, d >= AT_D zero */
    float *sV = sK + AT_BN * AT_DP;  /* [AT_BN][AT_DVP]: the value tile, columns >= AT_DV zero */
    float *sP = sV + AT_BN * AT_DVP; /* [AT_BM][AT_BNP]: the tile's weights */
    float *sQ = sP + AT_BM * AT_BNP; /* [AT_BM][AT_DP]: the query tile */
    long long qo = 0, ko = 0, vo = 0, mo = 0, rem = b;
    int d, i, j, c;
    float m[AT_RM], l[AT_RM], acc[AT_RM][AT_NC * 4];
    long long kv_end = a.S;

    /* the batch position's element offsets (batch strides are 0 where broadcast) */
    for (d = (int)a.nb - 1; d >= 0; d--) {
        long long ix = rem % a.bshape[d];
        rem /= a.bshape[d];
        qo += ix * a.qbs[d];
        ko += ix * a.kbs[d];
        vo += ix * a.vbs[d];
        mo += ix * a.mbs[d];
    }

    at_stage(sQ, AT_DP, AT_BM, AT_D4, AT_D, a.q, qo, q0, a.L, a.qsl, a.qse, a.vec_q, tid);
    AT_UNROLL for (i = 0; i < AT_RM; i++) {
        m[i] = neg_inf;
        l[i] = 0.0f;
        AT_UNROLL for (c = 0; c < AT_NC * 4; c++)
            acc[i][c] = 0.0f;
    }
    /* causal: keys past the block's last query row are masked for every row */
    if (a.causal && q0 + AT_BM < kv_end)
        kv_end = q0 + AT_BM;

    for (long long n0 = 0; n0 < kv_end; n0 += AT_BN) {
        AT_SYNC();
        at_stage(sK, AT_DP, AT_BN, AT_D4, AT_D, a.k, ko, n0, a.S, a.ksl, a.kse, a.vec_k, tid);
        at_stage(sV, AT_DVP, AT_BN, AT_DVP, AT_DV, a.v, vo, n0, a.S, a.vsl, a.vse, a.vec_v, tid);
        AT_SYNC();

        /* scores of rows tr + 16 i, columns tc + 8 j: exact fp32 dot products */
        float s[AT_RM][8];
        AT_UNROLL for (i = 0; i < AT_RM; i++)
            AT_UNROLL for (j = 0; j < 8; j++)
                s[i][j] = 0.0f;
        for (d = 0; d < AT_D4; d += 4) {
            float4 qv[AT_RM], kv[8];
            AT_UNROLL for (i = 0; i < AT_RM; i++)
                qv[i] = AT_LD4(&sQ[(tr + 16 * i) * AT_DP + d]);
            AT_UNROLL for (j = 0; j < 8; j++)
                kv[j] = AT_LD4(&sK[(tc + 8 * j) * AT_DP + d]);
            AT_UNROLL for (i = 0; i < AT_RM; i++) {
                AT_UNROLL for (j = 0; j < 8; j++) {
                    s[i][j] = fmaf(qv[i].x, kv[j].x, s[i][j]);
                    s[i][j] = fmaf(qv[i].y, kv[j].y, s[i][j]);
                    s[i][j] = fmaf(qv[i].z, kv[j].z, s[i][j]);
                    s[i][j] = fmaf(qv[i].w, kv[j].w, s[i][j]);
                }
            }
        }

        AT_UNROLL for (i = 0; i < AT_RM; i++) {
            const long long row = q0 + tr + 16 * i;
            float mt = neg_inf, st = 0.0f, alpha, base;
            AT_UNROLL for (j = 0; j < 8; j++) {
                const long long col = n0 + tc + 8 * j;
                int masked = col >= a.S || row >= a.L || (a.causal && col > row);
                float bias = 0.0f;
                if (!masked && a.mask_dt >= 0) {
                    const long long mi = mo + row * a.msl + col * a.mss;
                    if (a.mask_dt == 4)
                        masked = ((const unsigned char *)a.mask)[mi] == 0;
                    else
                        bias = at_ld(a.mask, mi, a.mask_dt);
                }
                s[i][j] = masked ? neg_inf : s[i][j] * a.scale + bias;
                mt = fmaxf(mt, s[i][j]);
            }
            mt = fmaxf(mt, AT_SHFL_XOR(mt, 1));
            mt = fmaxf(mt, AT_SHFL_XOR(mt, 2));
            mt = fmaxf(mt, AT_SHFL_XOR(mt, 4));
            mt = fmaxf(mt, m[i]);
            /* every score so far -inf: keep the exponentials 0 and the state unscaled */
            base = mt == neg_inf ? 0.0f : mt;
            alpha = expf(m[i] - base);
            m[i] = mt;
            AT_UNROLL for (j = 0; j < 8; j++) {
                const float p = expf(s[i][j] - base);
                st += p;
                sP[(tr + 16 * i) * AT_BNP + tc + 8 * j] = p;
            }
            /* dropout on the weights of this row (one Philox per weight; not unrolled, so
             * the generator's code appears once per row) */
            if (AT_DROPOUT) {
                AT_NO_UNROLL for (j = 0; j < 8; j++) {
                    const long long col = n0 + tc + 8 * j;
                    float *pp = &sP[(tr + 16 * i) * AT_BNP + tc + 8 * j];
                    if (*pp != 0.0f) {
                        const unsigned long long ctr =
                            (unsigned long long)a.rng_base +
                            (unsigned long long)((b * a.L + row) * a.S + col);
                        const unsigned int bits =
                            at_philox((unsigned long long)a.rng_seed, ctr) >> 8;
                        *pp = (long long)bits >= a.keep_threshold ? *pp * a.keep_scale : 0.0f;
                    }
                }
            }
            st += AT_SHFL_XOR(st, 1);
            st += AT_SHFL_XOR(st, 2);
            st += AT_SHFL_XOR(st, 4);
            l[i] = l[i] * alpha + st;
            AT_UNROLL for (c = 0; c < AT_NC * 4; c++)
                acc[i][c] *= alpha;
        }
        AT_SYNC();

        /* acc[i][4 c + u] += P[row i] . V[:, 32 c + 4 tc + u]; weights past the last key are 0
         * (and so are the value rows), so the key loop may run to a multiple of 4 */
        {
            const int nk = a.S - n0 < AT_BN ? (int)(a.S - n0) : AT_BN;
            for (j = 0; j < nk; j += 4) {
                float4 pv[AT_RM];
                AT_UNROLL for (i = 0; i < AT_RM; i++)
                    pv[i] = AT_LD4(&sP[(tr + 16 * i) * AT_BNP + j]);
                AT_UNROLL for (c = 0; c < AT_NC; c++) {
                    const float4 v0 = AT_LD4(&sV[(j + 0) * AT_DVP + 32 * c + 4 * tc]);
                    const float4 v1 = AT_LD4(&sV[(j + 1) * AT_DVP + 32 * c + 4 * tc]);
                    const float4 v2 = AT_LD4(&sV[(j + 2) * AT_DVP + 32 * c + 4 * tc]);
                    const float4 v3 = AT_LD4(&sV[(j + 3) * AT_DVP + 32 * c + 4 * tc]);
                    AT_UNROLL for (i = 0; i < AT_RM; i++) {
                        float *o = &acc[i][4 * c];
                        o[0] = fmaf(pv[i].x, v0.x, o[0]);
                        o[1] = fmaf(pv[i].x, v0.y, o[1]);
                        o[2] = fmaf(pv[i].x, v0.z, o[2]);
                        o[3] = fmaf(pv[i].x, v0.w, o[3]);
                        o[0] = fmaf(pv[i].y, v1.x, o[0]);
                        o[1] = fmaf(pv[i].y, v1.y, o[1]);
                        o[2] = fmaf(pv[i].y, v1.z, o[2]);
                        o[3] = fmaf(pv[i].y, v1.w, o[3]);
                        o[0] = fmaf(pv[i].z, v2.x, o[0]);
                        o[1] = fmaf(pv[i].z, v2.y, o[1]);
                        o[2] = fmaf(pv[i].z, v2.z, o[2]);
                        o[3] = fmaf(pv[i].z, v2.w, o[3]);
                        o[0] = fmaf(pv[i].w, v3.x, o[0]);
                        o[1] = fmaf(pv[i].w, v3.y, o[1]);
                        o[2] = fmaf(pv[i].w, v3.z, o[2]);
                        o[3] = fmaf(pv[i].w, v3.w, o[3]);
                    }
                }
            }
        }
    }

    AT_UNROLL for (i = 0; i < AT_RM; i++) {
        const long long row = q0 + tr + 16 * i;
        const float li = l[i];
        if (row >= a.L)
            continue;
        AT_UNROLL for (c = 0; c < AT_NC * 4; c++) {
            const int col = 32 * (c / 4) + 4 * tc + c % 4;
            if (col < AT_DV)
                at_st(a.out, (b * a.L + row) * AT_DV + col, li > 0.0f ? acc[i][c] / li : 0.0f);
        }
    }
}
