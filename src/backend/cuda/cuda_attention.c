/* Fused attention on CUDA (see cuda_attention.h): the host side. Checks what the kernel
 * covers, fills its by-value argument from the tensors' geometry exactly as interp's sdpa
 * reads them (src/backend/interp/k_nn.c), builds the program text of the variant (dtype,
 * head dims, dropout or not, 32 or 64 query rows), gets its kernel on the device through the
 * program cache (cuda_program.h: compiled for the device's sm_XY, loaded once per device) and
 * launches it on the stream.
 *
 * The kernel text is self-contained (its own f16/bf16 conversions and Philox, not the shared
 * prelude) because the unit test also compiles it as C on a host emulation of CUDA.
 *
 * Ownership and thread-safety: the kernels found so far (one per device and variant, kept for
 * the life of the process) are a list guarded by one mutex, under which a missing one is got
 * from the program cache once; everything else is per call. */
#include "backend/cuda/cuda_attention.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_program.h"
#include "runtime/cuda.h"
#include "runtime/philox.h"
#include "support/error.h"

#include "backend/cuda/cuda_attention_args.cuh.h"
#include "backend/cuda/cuda_attention_kernel.cuh.h"

/* The CUDA spellings of the words the kernel text leaves to its includer. */
static const char at_prefix[] =
    "#define AT_DEV static __device__ __forceinline__\n"
    "#define AT_KERNEL extern \"C\" __global__ __launch_bounds__(AT_NT)\n"
    "#define AT_SYNC() __syncthreads()\n"
    "#define AT_SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, (v), (o))\n"
    "#define AT_AS_FLOAT(u) __uint_as_float(u)\n"
    "#define AT_AS_UINT(f) __float_as_uint(f)\n"
    "#define AT_LD4(p) (*(const float4 *)(p))\n"
    "#define AT_ST4(p, v) (*(float4 *)(p) = (v))\n"
    "#define AT_LDG4(p) __ldg((const float4 *)(p))\n"
    "#define AT_UNROLL _Pragma(\"unroll\")\n"
    "#define AT_NO_UNROLL _Pragma(\"unroll 1\")\n"
    "#define AT_TID threadIdx.x\n"
    "#define AT_BID blockIdx.x\n"
    "extern __shared__ float at_smem[];\n";

static int at_dt_code(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32: return 0;
    case TGC_F16: return 1;
    case TGC_BF16: return 2;
    default: return -1;
    }
}

static int at_mask_code(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32: return 0;
    case TGC_F16: return 1;
    case TGC_BF16: return 2;
    case TGC_F64: return 3;
    case TGC_BOOL: return 4;
    default: return -1;
    }
}

size_t tgc_cuda_attention_smem(int d, int dv, int bm)
{
    size_t floats = (size_t)TGC_AT_BN * (size_t)TGC_AT_DP(d) +
                    (size_t)TGC_AT_BN * (size_t)TGC_AT_DVP(dv) + (size_t)bm * TGC_AT_BNP +
                    (size_t)bm * (size_t)TGC_AT_DP(d);
    return floats * sizeof(float);
}

char *tgc_cuda_attention_source(int dt, int d, int dv, int dropout, int bm)
{
    const size_t n = sizeof at_prefix + sizeof tgc_text_cuda_attention_args_cuh +
                     sizeof tgc_text_cuda_attention_kernel_cuh + 512;
    char *src = malloc(n);
    if (!src) {
        tgc_set_error(TGC_ERR_OOM, "tgc cuda attention: out of memory for the program text");
        return NULL;
    }
    snprintf(src, n,
             "/* libtgc fused attention: dtype %d, head dims %d / %d, dropout %d, %d rows */\n"
             "#define AT_D %d\n#define AT_DV %d\n#define AT_DT %d\n#define AT_DROPOUT %d\n"
             "#define AT_D4 %d\n#define AT_DP %d\n#define AT_NC %d\n#define AT_DVP %d\n"
             "#define AT_BM %d\n#define AT_RM %d\n#define AT_BN %d\n#define AT_BNP %d\n"
             "#define AT_NT %d\n%s%s\n%s\n",
             dt, d, dv, dropout != 0, bm, d, dv, dt, dropout != 0, TGC_AT_D4(d), TGC_AT_DP(d),
             TGC_AT_NC(dv), TGC_AT_DVP(dv), bm, bm / 16, TGC_AT_BN, TGC_AT_BNP, TGC_AT_NT,
             at_prefix, tgc_text_cuda_attention_args_cuh, tgc_text_cuda_attention_kernel_cuh);
    return src;
}

int tgc_cuda_attention_supported(const tgc_node *nd)
{
    if (!nd || nd->op != TGC_OP_SDPA || at_dt_code(nd->out.dtype) < 0)
        return 0;
    const double p = nd->attrs.sdpa.dropout_p;
    return p >= 0.0 && p <= 1.0 && isfinite(nd->attrs.sdpa.scale);
}

/* Element stride of tensor t (whose last `inner` dims are not batch dims) for output batch
 * dim od of nb, as interp's batch_offset walks it: 0 where t lacks the dim or broadcasts. */
static int64_t at_batch_stride(const tgc_tensor *t, int inner, int od, int nb)
{
    const int tb = t->ndim - inner;
    const int d = od - (nb - tb);
    return d >= 0 && d < tb && t->shape[d] != 1 ? t->strides[d] : 0;
}

/* 1 when f32 operand t (last dim the width) can be staged with float4 loads: unit element
 * stride, row and batch strides multiples of 4 elements, element 0 16-byte aligned, width a
 * multiple of 4. */
static long long at_vec4(const tgc_tensor *t, const long long *bstrides, int nb)
{
    if (t->dtype != TGC_F32 || t->strides[t->ndim - 1] != 1 || t->shape[t->ndim - 1] % 4 ||
        t->strides[t->ndim - 2] % 4 || (uintptr_t)tgc_device_ptr(t) % 16)
        return 0;
    for (int d = 0; d < nb; d++)
        if (bstrides[d] % 4)
            return 0;
    return 1;
}

tgc_status tgc_cuda_attention_setup(const tgc_node *nd, tgc_tensor *const *ins,
                                    const int64_t *shape, int n_sms, tgc_at_launch *ln)
{
    memset(ln, 0, sizeof *ln);
    if (!tgc_cuda_attention_supported(nd) || nd->n_in < 3 || nd->n_in > 4)
        return TGC_ERR_UNSUPPORTED;
    const tgc_tensor *q = ins[0], *k = ins[1], *v = ins[2];
    const tgc_tensor *mask = nd->n_in > 3 ? ins[3] : NULL;
    const int dt = at_dt_code(nd->out.dtype);
    if (q->dtype != nd->out.dtype || k->dtype != q->dtype || v->dtype != q->dtype)
        return TGC_ERR_UNSUPPORTED;
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return TGC_ERR_UNSUPPORTED;
    const int out_ndim = nd->out.ndim;
    const int nb = out_ndim - 2;
    if (nb < 0 || nb > 6)
        return TGC_ERR_UNSUPPORTED;
    const int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
    const int64_t S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
    if (shape[nb] != L || shape[nb + 1] != Ev || k->shape[k->ndim - 1] != E ||
        v->shape[v->ndim - 2] != S)
        return TGC_ERR_UNSUPPORTED;
    int64_t B = 1;
    for (int d = 0; d < nb; d++)
        B *= shape[d];
    const int64_t out_numel = B * L * Ev;
    /* an empty output launches nothing: any head dims will do */
    if (out_numel > 0 && (E < 1 || E > TGC_AT_MAX_HEAD || Ev < 1 || Ev > TGC_AT_MAX_HEAD))
        return TGC_ERR_UNSUPPORTED;
    int mask_dt = -1;
    if (mask) {
        mask_dt = at_mask_code(mask->dtype);
        if (mask_dt < 0)
            return TGC_ERR_UNSUPPORTED;
    }
    const double p = nd->attrs.sdpa.dropout_p;
    /* 32-row tiles for short sequences and where 64-row ones give under two blocks per SM */
    const int bm = L <= 32 || (n_sms > 0 && B * ((L + 63) / 64) < 2 * (int64_t)n_sms) ? 32 : 64;

    struct tgc_at_args *a = &ln->args;
    a->q = tgc_device_ptr(q);
    a->k = tgc_device_ptr(k);
    a->v = tgc_device_ptr(v);
    a->mask = mask ? tgc_device_ptr(mask) : NULL;
    a->L = L;
    a->S = S;
    a->nb = nb;
    a->n_qtiles = (L + bm - 1) / bm;
    for (int d = 0; d < nb; d++) {
        a->bshape[d] = shape[d];
        a->qbs[d] = at_batch_stride(q, 2, d, nb);
        a->kbs[d] = at_batch_stride(k, 2, d, nb);
        a->vbs[d] = at_batch_stride(v, 2, d, nb);
        if (mask)
            a->mbs[d] = at_batch_stride(mask, mask->ndim < 2 ? mask->ndim : 2, d, nb);
    }
    a->qsl = q->strides[q->ndim - 2];
    a->qse = q->strides[q->ndim - 1];
    a->ksl = k->strides[k->ndim - 2];
    a->kse = k->strides[k->ndim - 1];
    a->vsl = v->strides[v->ndim - 2];
    a->vse = v->strides[v->ndim - 1];
    if (mask) {
        if (mask->ndim >= 1 && mask->shape[mask->ndim - 1] != 1)
            a->mss = mask->strides[mask->ndim - 1];
        if (mask->ndim >= 2 && mask->shape[mask->ndim - 2] != 1)
            a->msl = mask->strides[mask->ndim - 2];
    }
    a->vec_q = at_vec4(q, a->qbs, nb);
    a->vec_k = at_vec4(k, a->kbs, nb);
    a->vec_v = at_vec4(v, a->vbs, nb);
    a->mask_dt = mask_dt;
    a->causal = nd->attrs.sdpa.causal != 0;
    a->dropout = p > 0.0;
    /* uniform u = m / 2^24 (m an integer below 2^24): u >= p iff m >= ceil(p 2^24), exact */
    a->keep_threshold = p > 0.0 ? (long long)ceil(p * 16777216.0) : 0;
    a->keep_scale = p < 1.0 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    a->scale = (float)nd->attrs.sdpa.scale;

    ln->dt = dt;
    ln->d = (int)E;
    ln->dv = (int)Ev;
    ln->bm = bm;
    ln->out_ndim = out_ndim;
    ln->out_numel = out_numel;
    ln->n_blocks = B * a->n_qtiles;
    ln->smem = tgc_cuda_attention_smem((int)E, (int)Ev, bm);
    ln->n_draw = p > 0.0 ? (uint64_t)(B * L * S) : 0;
    return TGC_OK;
}

/* ---- the kernels: one per (device, variant), kept for the process ---- */

typedef struct at_prog {
    int dev, dt, d, dv, dropout, bm;
    CUfunction fn;
    struct at_prog *next;
} at_prog;

static pthread_mutex_t at_lock = PTHREAD_MUTEX_INITIALIZER;
static at_prog *at_progs;

/* The variant's kernel on dev, from the program cache on first use (under the lock, so each
 * is got once). */
static tgc_status at_function_locked(int dev, const tgc_at_launch *ln, const char *cache_dir,
                                     CUfunction *fn)
{
    const int dropout = ln->args.dropout != 0;
    for (at_prog *p = at_progs; p; p = p->next) {
        if (p->dev == dev && p->dt == ln->dt && p->d == ln->d && p->dv == ln->dv &&
            p->dropout == dropout && p->bm == ln->bm) {
            *fn = p->fn;
            return TGC_OK;
        }
    }
    const tgc_cuda_props *props = tgc_cuda_props_of(dev);
    const tgc_cuda_driver *drv = tgc_cuda_drv();
    if (!props || !drv)
        return tgc_set_error(TGC_ERR_DEVICE, "tgc cuda attention: CUDA device %d is not loaded",
                             dev);
    char name[64];
    snprintf(name, sizeof name, "tgc_attention_dt%d_d%d_dv%d_bm%d%s", ln->dt, ln->d, ln->dv, ln->bm,
             dropout ? "_dropout" : "");
    char *src = tgc_cuda_attention_source(ln->dt, ln->d, ln->dv, dropout, ln->bm);
    if (!src)
        return tgc_last_status();
    const tgc_cuda_program *prog = NULL;
    tgc_status s =
        tgc_cuda_program_get(name, src, props->major * 10 + props->minor, cache_dir, &prog);
    free(src);
    if (s)
        return s;
    at_prog *p = calloc(1, sizeof *p);
    if (!p)
        return tgc_set_error(TGC_ERR_OOM, "tgc cuda attention: out of memory caching %s", name);
    s = tgc_cuda_program_function(prog, dev, "tgc_attention_fwd", &p->fn);
    if (!s)
        s = tgc_cuda_error(drv->cuFuncSetAttribute(p->fn,
                                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   (int)ln->smem),
                           "cuFuncSetAttribute (attention shared memory)");
    if (s) {
        free(p);
        return s;
    }
    p->dev = dev;
    p->dt = ln->dt;
    p->d = ln->d;
    p->dv = ln->dv;
    p->dropout = dropout;
    p->bm = ln->bm;
    p->next = at_progs;
    at_progs = p;
    *fn = p->fn;
    return TGC_OK;
}

static tgc_status at_function(int dev, const tgc_at_launch *ln, const char *cache_dir,
                              CUfunction *fn)
{
    pthread_mutex_lock(&at_lock);
    tgc_status s = at_function_locked(dev, ln, cache_dir, fn);
    pthread_mutex_unlock(&at_lock);
    return s;
}

tgc_status tgc_cuda_attention_run(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                  tgc_tensor **out, const struct tgc_launch_env *env)
{
    tgc_at_launch ln;
    *out = NULL;
    if (!env || env->device.type != TGC_DEVICE_CUDA)
        return TGC_ERR_UNSUPPORTED;
    const int dev = env->device.index;
    for (int i = 0; i < nd->n_in; i++) {
        const tgc_device d = ins[i]->storage ? ins[i]->storage->device : tgc_cpu();
        if (d.type != TGC_DEVICE_CUDA || d.index != dev)
            return TGC_ERR_UNSUPPORTED;
    }
    const tgc_cuda_props *props = tgc_cuda_props_of(dev);
    tgc_status s = tgc_cuda_attention_setup(nd, ins, shape, props ? props->sms : 0, &ln);
    if (s)
        return s;
    if (ln.n_blocks > INT_MAX)
        return TGC_ERR_UNSUPPORTED;
    CUfunction fn = NULL;
    if (ln.out_numel > 0) {
        if (props && (size_t)props->smem_per_block_optin < ln.smem)
            return TGC_ERR_UNSUPPORTED; /* head dims too large for this GPU's shared memory */
        if ((s = at_function(dev, &ln, tgc_cuda_native_of(env)->cache_dir, &fn)))
            return s;
    }
    /* the node's turn on the Philox stream, as interp draws it (also for empty outputs) */
    if (ln.args.dropout) {
        uint64_t seed = 0;
        ln.args.rng_base = (long long)tgc_rng_draw(ln.n_draw, &seed);
        ln.args.rng_seed = (long long)seed;
    }
    tgc_tensor *r = tgc_tensor_new(shape, ln.out_ndim, nd->out.dtype, env->device);
    if (!r)
        return tgc_last_status();
    if (ln.out_numel > 0) {
        ln.args.out = tgc_device_ptr(r);
        CUstream stream = env->stream ? (CUstream)env->stream : tgc_cuda_stream(dev);
        s = stream ? tgc_cuda_enter(dev) : tgc_last_status();
        if (!s) {
            void *params[] = {&ln.args};
            s = tgc_cuda_error(tgc_cuda_drv()->cuLaunchKernel(fn, (unsigned)ln.n_blocks, 1, 1,
                                                              TGC_AT_NT, 1, 1, (unsigned)ln.smem,
                                                              stream, params, NULL),
                               "cuLaunchKernel (tgc_attention_fwd)");
        }
        if (s) {
            tgc_tensor_free(r);
            return s;
        }
    }
    *out = r;
    return TGC_OK;
}
