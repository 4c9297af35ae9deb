/* Kernel IR: what a backend compiles, one kernel per fused group.
 *
 * A LOOP kernel iterates a domain of up to KIR_MAX_DIMS dims with symbolic extents, split in
 * two sections: outer dims (the parallel rows) and inner dims (iterated inside one row). How
 * those map onto a machine (grid, block, serial loops, vector width, a split of a flat
 * domain) is the kernel's schedule (kir/schedule.h), computed by lowering from the backend's
 * kir_target. The body is a scalar compute DAG (vals) over loads. Rows are processed in
 * phases: every phase is one sweep over the inner domain; a phase may feed reductions
 * (accumulators, combined over the inner domain) and stores; accumulators of phase p are
 * readable from phase p+1 on, and by the row stores after the last phase. That shape covers
 * pointwise chains (one phase, stores), reductions with prologues and epilogues, and
 * softmax / layer_norm as one kernel whose row stays in cache between phases.
 *
 * Accesses are affine: element (offset + sum_d stride[d] * var[d]) of a buffer, with
 * offsets, strides and extents as symbolic dims (ir/sym.h): constants compile in, symbolic
 * ones become size slots the executor evaluates per call, so dynamic shapes compile once.
 *
 * Random values (KV_RAND) are Philox4x32-10 draws (runtime/philox.h) at counter
 * (base + index), index an affine function of the domain vars (the element's row-major
 * position in the random node's shape); the seed and base of each of a kernel's draws are
 * per-call kernel arguments (kir/abi.h), so one compiled kernel draws fresh bits every call.
 *
 * A GEMM or CONV kernel is a template (a matrix product or a convolution the target
 * implements for the template's dtypes, kir_target.template_dtypes) plus an epilogue DAG over
 * the accumulator (KV_ACC 0) with loads indexed by the epilogue vars (0: batch, 1: row m,
 * 2: column n). */
#ifndef TGC_KIR_KIR_H
#define TGC_KIR_KIR_H

#include "ir/graph.h"
#include "kir/schedule.h"

typedef enum { KIR_LOOP, KIR_GEMM, KIR_CONV } kir_kind;

typedef enum {
    KV_LOAD,  /* loads[load] */
    KV_CONST, /* cval */
    KV_OP,    /* a pointwise graph op over in[0..n_in) with attrs f[] */
    KV_ACC,   /* the value of accumulator acc (LOOP: a finished reduction; GEMM: the sum) */
    KV_SIZE,  /* the symbolic dim sdim, as a number (a mean's count) */
    KV_RAND,  /* draw rands[index] at this element: a float of dtype (see kir_rand_dist) */
    KV_INDEX  /* the element's position (off + sum stride * var) in iotas[index], as a number
               * (an arange computed where it is read, never loaded) */
} kir_vkind;

/* What a KV_RAND value computes from bits = tgc_philox_bits(seed, base + index):
 *   KIR_RAND_UNIFORM: (bits >> (32 - m)) * 2^-m, m = 11 for f16, 8 for bf16, 24 otherwise
 *     (as many bits as the dtype holds below 1: exact, never rounds up to 1);
 *   KIR_RAND_UNIFORM24: the same with m = 24 whatever the dtype (dropout's keep test,
 *     tgc_philox_uniform);
 *   KIR_RAND_NORMAL: tgc_philox_normal (Box-Muller in double on counters c and c | 2^63,
 *     rounded to f32), then converted to dtype. */
typedef enum { KIR_RAND_UNIFORM, KIR_RAND_UNIFORM24, KIR_RAND_NORMAL } kir_rand_dist;

typedef struct kir_val {
    kir_vkind kind;
    tgc_op op;
    tgc_dtype dtype; /* result dtype */
    int n_in;
    int32_t in[3];
    double f[2];        /* SCALAR ops: scalar (CLAMP: lo, hi) */
    int32_t index;      /* KV_LOAD: load id; KV_ACC: accumulator id; KV_RAND: draw id;
                         * KV_INDEX: iota id */
    kir_rand_dist dist; /* KV_RAND */
    double cval;
    tgc_sdim sdim;
} kir_val;

typedef struct kir_access {
    int32_t buf;
    tgc_sdim off;
    tgc_sdim stride[KIR_MAX_DIMS]; /* per domain dim (GEMM epilogue: batch, m, n) */
} kir_access;

/* A load may be guarded (a pooling window over padding): where some guard's index
 * (off + sum stride * var) falls outside [0, bound), the load yields fill instead of
 * reading memory. */
#define KIR_MAX_GUARDS 2
typedef struct kir_load {
    kir_access at;
    tgc_dtype dtype;
    int n_guards;
    kir_access guard[KIR_MAX_GUARDS];
    tgc_sdim bound[KIR_MAX_GUARDS];
    double fill;
} kir_load;

typedef enum { KR_SUM, KR_MAX, KR_MIN } kir_combiner;

typedef struct kir_reduce {
    kir_combiner comb;
    int32_t val;
    int phase;
} kir_reduce;

typedef struct kir_store {
    kir_access at;
    int32_t val;
    tgc_dtype dtype;
    int phase; /* -1: a row store, once per outer iteration after the last phase */
} kir_store;

/* One random node's draw: numel counters reserved per call (tgc_rng_draw, in graph node
 * order over the kernels of a graph); element at index (off + sum stride * var, the buf field
 * unused) uses counter base + index. */
typedef struct kir_rand {
    kir_access at;
    int32_t node;   /* the graph node drawing */
    tgc_sdim numel; /* counters it reserves */
} kir_rand;

/* Buffers a kernel touches: graph values, materialized by the executor. */
typedef struct kir_buf {
    int32_t value;
    tgc_dtype dtype;
    int written;
} kir_buf;

typedef struct kir_template {
    tgc_op op;       /* MATMUL, LINEAR or CONV2D */
    tgc_attrs attrs; /* conv params */
    /* operands' dtype, the accumulator's and the result's (the target has the template for
     * dtype, kir_target_has_template) */
    tgc_dtype dtype, acc_dtype, out_dtype;
    int32_t a, b; /* buffer ids of the operands (x, w for conv / linear) */
    int32_t out;  /* buffer id of the result */
    /* GEMM geometry (symbolic), from the operands' views:
     * C[b, m, n] = sum_k A[b*a_bs + m*a_rs + k*a_cs] * B[b*b_bs + k*b_rs + n*b_cs] */
    tgc_sdim batch, M, N, K;
    tgc_sdim a_off, a_bs, a_rs, a_cs, b_off, b_bs, b_rs, b_cs, c_bs, c_rs;
    /* CONV geometry */
    tgc_sdim cn, cc, ch, cw, co, kh, kw, oh, ow;
    /* CONV: 1 when x and w are channels-last views (permutes of NHWC and OHWI buffers, read
     * in place; k runs over (r, s, ci), ci fastest), 0 when both are contiguous NCHW / OIHW.
     * A target's template takes 1 only where kir_target.conv_channels_last says so. */
    int cl;
    /* CONV: 1 when the result is stored channels-last: out is a [N, OH, OW, O] buffer (the
     * epilogue's (image, channel, pixel) at (image OH OW + pixel) O + channel), 0: NCHW.
     * Only where kir_target.conv_channels_last says so (kir_permuted_store_ok). */
    int out_cl;
} kir_template;

typedef struct kir_kernel {
    kir_kind kind;
    int id;
    int n_outer, n_inner;
    tgc_sdim extent[KIR_MAX_DIMS]; /* outer dims first */
    int n_phases;
    kir_schedule sched; /* LOOP: the axes' roles on the target lowered for (templates:
                         * none, vec_axis and split_axis -1) */

    kir_val *vals;
    int n_vals, cap_vals;
    kir_load *loads;
    int n_loads, cap_loads;
    kir_reduce *reduces;
    int n_reduces, cap_reduces;
    kir_store *stores;
    int n_stores, cap_stores;
    kir_buf *bufs;
    int n_bufs, cap_bufs;
    kir_rand *rands; /* in graph node order */
    int n_rands, cap_rands;
    kir_access *iotas; /* KV_INDEX positions (the buf field unused) */
    int n_iotas, cap_iotas;

    kir_template tpl; /* GEMM / CONV */
    int32_t result;   /* GEMM / CONV: the epilogue's result val (-1: the accumulator) */
} kir_kernel;

kir_kernel *kir_kernel_new(kir_kind kind);
void kir_kernel_free(kir_kernel *k);
/* Builders return the new id, or -1 when out of memory (error set). */
int32_t kir_add_val(kir_kernel *k, const kir_val *v);
int32_t kir_add_load(kir_kernel *k, const kir_load *l);
int32_t kir_add_reduce(kir_kernel *k, const kir_reduce *r);
int32_t kir_add_store(kir_kernel *k, const kir_store *s);
int32_t kir_add_rand(kir_kernel *k, const kir_rand *r);
/* Adds iota `at` and the KV_INDEX value (i64) reading it; returns the value id. */
int32_t kir_add_index_val(kir_kernel *k, const kir_access *at);
/* Adds load l and the KV_LOAD value reading it; returns the value id. */
int32_t kir_add_load_val(kir_kernel *k, const kir_load *l);
/* The buffer id of graph value `value` in k (added when absent). */
int32_t kir_buf_of(kir_kernel *k, int32_t value, tgc_dtype dt, int written);

/* The number of domain dims a kernel's accesses span (LOOP: n_outer + n_inner; GEMM and
 * CONV epilogues: 3). */
int kir_domain_dims(const kir_kernel *k);

/* Text form for TGC_LOG=kernels and TGC_DUMP_DIR. Caller frees. */
char *kir_kernel_to_text(const kir_kernel *k, const tgc_symtab *syms);

#endif
