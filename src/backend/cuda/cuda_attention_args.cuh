/* The fused attention kernel's single by-value argument, shared verbatim by the host
 * (cuda_attention.h includes this file) and the device program (cuda_attention.c puts it
 * before the kernel text), so both sides have one layout. Batch dims are the output's (at most
 * 6); the *bs arrays are each tensor's element stride for them, 0 where it broadcasts. mask_dt:
 * -1 none, 0 f32, 1 f16, 2 bf16, 3 f64, 4 bool. Dropout keeps weight element e iff
 * (philox_bits(rng_seed, rng_base + e) >> 8) >= keep_threshold, which is exactly uniform >= p
 * (keep_threshold = ceil(p * 2^24)). vec_*: 1 when that f32 operand's rows may be read as
 * float4 (unit element stride, 16-byte aligned rows and batch steps, width % 4 == 0). */
#ifndef TGC_CUDA_ATTENTION_ARGS_CUH
#define TGC_CUDA_ATTENTION_ARGS_CUH

struct tgc_at_args {
    const void *q;
    const void *k;
    const void *v;
    const void *mask;
    void *out;
    long long L, S, nb, n_qtiles;
    long long bshape[8], qbs[8], kbs[8], vbs[8], mbs[8];
    long long qsl, qse, ksl, kse, vsl, vse, msl, mss;
    long long mask_dt, causal, dropout, keep_threshold, rng_seed, rng_base;
    long long vec_q, vec_k, vec_v;
    float scale, keep_scale;
};

#endif
