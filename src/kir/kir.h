/* Kernel IR: what a backend compiles, one kernel per fused group.
 *
 * A LOOP kernel iterates a domain of up to KIR_MAX_DIMS dims with symbolic extents, split in
 * two sections: outer dims (the parallel rows: the runtime splits the flattened outer range
 * [lo, hi) across threads) and inner dims (iterated inside one row; the innermost is the
 * SIMD axis). The body is a scalar compute DAG (vals) over loads. Rows are processed in
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
 * A GEMM or CONV kernel is a template (the LLVM backend's packed micro-kernels) plus an
 * epilogue DAG over the accumulator (KV_ACC 0) with loads indexed by the epilogue vars
 * (0: batch, 1: row m, 2: column n). */
#ifndef TGC_KIR_KIR_H
#define TGC_KIR_KIR_H

#include "ir/graph.h"

#define KIR_MAX_DIMS 12

typedef enum { KIR_LOOP, KIR_GEMM, KIR_CONV } kir_kind;

typedef enum {
    KV_LOAD,  /* loads[load] */
    KV_CONST, /* cval */
    KV_OP,    /* a pointwise graph op over in[0..n_in) with attrs f[] */
    KV_ACC,   /* the value of accumulator acc (LOOP: a finished reduction; GEMM: the sum) */
    KV_SIZE   /* the symbolic dim sdim, as a number (a mean's count) */
} kir_vkind;

typedef struct kir_val {
    kir_vkind kind;
    tgc_op op;
    tgc_dtype dtype; /* result dtype */
    int n_in;
    int32_t in[3];
    double f[2];   /* SCALAR ops: scalar (CLAMP: lo, hi) */
    int32_t index; /* KV_LOAD: load id; KV_ACC: accumulator id */
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

/* Buffers a kernel touches: graph values, materialized by the executor. */
typedef struct kir_buf {
    int32_t value;
    tgc_dtype dtype;
    int written;
} kir_buf;

typedef struct kir_template {
    tgc_op op;       /* MATMUL, LINEAR or CONV2D */
    tgc_attrs attrs; /* conv params */
    int32_t a, b;    /* buffer ids of the operands (x, w for conv / linear) */
    int32_t out;     /* buffer id of the result */
    /* GEMM geometry (symbolic), from the operands' views:
     * C[b, m, n] = sum_k A[b*a_bs + m*a_rs + k*a_cs] * B[b*b_bs + k*b_rs + n*b_cs] */
    tgc_sdim batch, M, N, K;
    tgc_sdim a_off, a_bs, a_rs, a_cs, b_off, b_bs, b_rs, b_cs, c_bs, c_rs;
    /* CONV geometry */
    tgc_sdim cn, cc, ch, cw, co, kh, kw, oh, ow;
} kir_template;

typedef struct kir_kernel {
    kir_kind kind;
    int id;
    int n_outer, n_inner;
    tgc_sdim extent[KIR_MAX_DIMS]; /* outer dims first */
    int n_phases;
    /* > 0: a 1-D domain (one inner dim) processed in chunks of this many elements, the
     * chunks being the parallel rows */
    int64_t chunk;

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
