/* Targets and schedules: how a LOOP kernel's domain maps onto a machine.
 *
 * A backend describes its machine once, as a kir_target: the SIMD width per dtype, how a flat
 * 1-D domain is split into parallel rows, whether it launches a grid of thread blocks (a
 * GPU), and which templates it has for which dtypes. Lowering computes each LOOP kernel's
 * kir_schedule from that target: every domain axis gets a role, so a renderer reads the
 * mapping instead of guessing it from the domain's shape.
 *
 *  - KIR_AXIS_GRID: a parallel outer axis. The grid axes of a kernel are flattened into one
 *    row range [0, rows); a CPU splits it across threads, a GPU launches one block per row.
 *  - KIR_AXIS_BLOCK: a parallel inner axis (GPU threads of one block; reductions over it
 *    combine across the block).
 *  - KIR_AXIS_SERIAL: a loop inside one row.
 *  - KIR_AXIS_VECTOR: the innermost inner axis, run `lanes` elements at a time with a masked
 *    tail.
 *
 * A split strip-mines one axis: its outer ceil(extent / split) iterations become the grid
 * rows, its inner `split` elements keep the axis's role (a flat pointwise domain: CPU rows of
 * 16384 elements, GPU blocks of block_threads). */
#ifndef TGC_KIR_SCHEDULE_H
#define TGC_KIR_SCHEDULE_H

#include <stdint.h>

#include "ir/op.h"
#include "tgc/tensor.h"

#define KIR_MAX_DIMS 12

typedef enum { KIR_AXIS_GRID, KIR_AXIS_BLOCK, KIR_AXIS_SERIAL, KIR_AXIS_VECTOR } kir_axis_role;

/* Template kinds a target may have (kir_kind's GEMM and CONV). */
typedef enum { KIR_TPL_GEMM, KIR_TPL_CONV, KIR_TPL_COUNT } kir_tpl_kind;

/* Dtype sets of kir_caps: a bit (1u << dtype) per dtype. */
#define KIR_DTYPE_BIT(dt)  (1u << (dt))
#define KIR_DTYPES_ALL     ((1u << TGC_DTYPE_COUNT) - 1u)
#define KIR_DTYPES_F32_F64 (KIR_DTYPE_BIT(TGC_F32) | KIR_DTYPE_BIT(TGC_F64))
#define KIR_DTYPES_FLOAT   (KIR_DTYPES_F32_F64 | KIR_DTYPE_BIT(TGC_F16) | KIR_DTYPE_BIT(TGC_BF16))

/* What a target computes natively, per fusion class of ops.def (tgc_op_fusion_class): the
 * shared classifier (backend/classify.c) makes a node of such a class a kernel only for
 * these dtypes, else OPAQUE (the backend's native op or interp). TEMPLATE is
 * template_dtypes' (below, with kir_template_ok). */
typedef struct kir_caps {
    /* POINTWISE: 1 when the target renders op for these result and operand dtypes; NULL:
     * every op for every dtype. */
    int (*pointwise_ok)(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in);
    uint32_t copy_dtypes;   /* COPY, by result dtype */
    uint32_t reduce_dtypes; /* REDUCE, by input dtype */
    int reduce_keeps_dtype; /* 1: only reductions whose result has their input's dtype */
    uint32_t pool_dtypes;   /* POOL (windows, global averages), by input dtype */
    uint32_t random_dtypes; /* RANDOM, by result dtype */
    uint32_t index_dtypes;  /* INDEX (arange), by result dtype; 0: always OPAQUE */
} kir_caps;

typedef struct kir_target {
    const char *name;
    /* SIMD: lanes[dt] elements of dtype dt fit one vector (1: no SIMD). A kernel's width is
     * the narrowest over its values and accumulators, at least min_lanes; a kernel with
     * reductions uses reduce_lanes when that is wider (its accumulators span two
     * registers, so float inputs keep their full width). */
    int lanes[TGC_DTYPE_COUNT];
    int min_lanes;
    int reduce_lanes;
    /* A flat 1-D pointwise domain is split into grid rows of this many elements (0: never
     * split). */
    int64_t flat_split;
    /* 1: a GPU-like target. Inner axes become KIR_AXIS_BLOCK of block_threads threads
     * instead of serial loops and vectors. */
    int has_grid;
    int block_threads;
    /* Per template kind: a bit (1u << dtype) per dtype the target has that template for. */
    uint32_t template_dtypes[KIR_TPL_COUNT];
    /* 1: its conv template reads channels-last operands in place (kir_template.cl) and
     * stores channels-last results (kir_template.out_cl, its fusion hooks' permuted_store_ok),
     * and the prepare pass can keep the activations between convs channels-last
     * (tgc_prepare_channels_last); 0: such a conv reads contiguous copies (the prepare pass
     * makes them) and every template stores in its own order. */
    int conv_channels_last;
    /* 1: its conv-gradient nodes read channels-last operands in place (the weight gradient x
     * and dy, the input gradient dy), so the prepare pass may keep the activations they read
     * channels-last too (where tgc_env_channels_last_grad() says so); 0: those stay NCHW. */
    int conv_grad_channels_last;
    /* The kernels it has per fusion class (above). */
    kir_caps caps;
} kir_target;

typedef struct kir_schedule {
    kir_axis_role role[KIR_MAX_DIMS]; /* per domain axis */
    int vec_axis;                     /* the KIR_AXIS_VECTOR axis, -1 when none */
    int lanes;                        /* its width (1 when none) */
    int split_axis;                   /* the strip-mined axis, -1 when none */
    int64_t split;                    /* its inner part's length */
    int block_threads;                /* threads per block (grid targets; 0 otherwise) */
} kir_schedule;

/* 1 when target t has template kind `tpl` for dtype dt. */
int kir_target_has_template(const kir_target *t, kir_tpl_kind tpl, tgc_dtype dt);

struct kir_kernel;
/* Fills k->sched for LOOP kernel k (its domain, values and reductions final) on target t. */
void kir_schedule_kernel(struct kir_kernel *k, const kir_target *t);

/* The role's name in the kernel text ("grid", "block", "serial", "vector"). */
const char *kir_axis_role_name(kir_axis_role r);

#endif
