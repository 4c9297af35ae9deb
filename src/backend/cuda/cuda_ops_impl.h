/* Internals shared by cuda_ops*.c: the host mirrors of the kernel argument structs of
 * cuda_ops_kernels.cu (same field order and types, so the same layout), the kernel table and
 * the launcher (cuda_ops_launch.c: program load per device, launches, stream sync, reading
 * a device flag). Not thread-affine: every function may be called from any thread. */
#ifndef TGC_BACKEND_CUDA_OPS_IMPL_H
#define TGC_BACKEND_CUDA_OPS_IMPL_H

#include <stdint.h>

#include "backend/plan.h"
#include "ir/op.h"
#include "tgc/config.h"
#include "tensor/tensor_impl.h"

#define OPS_MAXD 8

typedef struct ops_tv {
    int64_t shape[OPS_MAXD];
    int64_t st[OPS_MAXD];
    int nd;
    int dt;
} ops_tv;

/* tgc_ops_cat_dense's argument (cuda_ops_kernels.cu's CATD, the same layout) */
#define OPS_CAT_MAX 32
typedef struct ops_catd {
    const void *src[OPS_CAT_MAX];
    int64_t off[OPS_CAT_MAX + 1];
    int n, w;
} ops_catd;

/* tgc_ops_pointwise's argument: the node's op as a program of primitive steps (its formula
 * expanded, ir/formula.h; a primitive is one step). Step k reads registers a, b, c (0..2 the
 * inputs, 3 + j step j's value) and writes register 3 + k; op OPS_PW_CONST is the constant
 * f0 (s0 on the integer path). The last step's value is stored. */
#define OPS_PW_STEPS 16
#define OPS_PW_CONST (-1)
typedef struct ops_pw_step {
    int op, a, b, c;
    double f0, f1;
    int64_t s0, s1;
} ops_pw_step;

typedef struct ops_pw {
    ops_tv o;
    ops_tv in[3];
    int cast_dt[3];
    int nin, n_steps, int_path;
    ops_pw_step step[OPS_PW_STEPS];
} ops_pw;

/* The steps of pointwise op `op` (attributes a, NULL: none) over n_in inputs into pw
 * (n_steps, step[]); 0 when its formula needs more steps than OPS_PW_STEPS (error set). */
int tgc_cuda_ops_pw_program(tgc_op op, const tgc_attrs *a, int n_in, ops_pw *pw);

typedef struct ops_rg {
    ops_tv keep, red;
    int64_t count, nout;
    int op, as_int, odt;
    double correction;
} ops_rg;

typedef struct ops_sg {
    ops_tv keep, okeep;
    int64_t n, xst, ost, rows;
    int odt, log_;
} ops_sg;

typedef struct ops_pv {
    ops_tv v;
    int present;
} ops_pv;

typedef struct ops_mm {
    int64_t m, n, k, a_rs, a_cs, b_rs, b_cs;
    ops_tv batch;
    int64_t sb[OPS_MAXD];
    int adt, bdt, odt;
} ops_mm;

typedef struct ops_cv {
    int64_t n, c, h, w, o, cg, og, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
    int64_t xs[4], ws[4];
    int64_t bst;
    int xdt, wdt, bdt, odt;
} ops_cv;

/* The program's entry points, in the order of tgc_cuda_ops_kernel_names. */
#define OPS_KERNELS(X)                                                                             \
    X(POINTWISE, "tgc_ops_pointwise")                                                              \
    X(COPY, "tgc_ops_copy")                                                                        \
    X(CAT_DENSE, "tgc_ops_cat_dense")                                                              \
    X(FILL, "tgc_ops_fill")                                                                        \
    X(FLAG_INIT, "tgc_ops_flag_init")                                                              \
    X(CHECK_INDEX, "tgc_ops_check_index")                                                          \
    X(INDEX_REPORT, "tgc_ops_index_report")                                                        \
    X(SELECT, "tgc_ops_select")                                                                    \
    X(GATHER, "tgc_ops_gather")                                                                    \
    X(ARANGE, "tgc_ops_arange")                                                                    \
    X(RAND, "tgc_ops_rand")                                                                        \
    X(DROPOUT, "tgc_ops_dropout")                                                                  \
    X(REDUCE, "tgc_ops_reduce")                                                                    \
    X(SOFTMAX, "tgc_ops_softmax")                                                                  \
    X(LAYER_NORM, "tgc_ops_layer_norm")                                                            \
    X(BN_STATS, "tgc_ops_bn_stats")                                                                \
    X(BN_FINAL, "tgc_ops_bn_final")                                                                \
    X(BN_APPLY, "tgc_ops_bn_apply")                                                                \
    X(POOL2D, "tgc_ops_pool2d")                                                                    \
    X(LOSS, "tgc_ops_loss")                                                                        \
    X(LOSS_REDUCE, "tgc_ops_loss_reduce")                                                          \
    X(MATMUL, "tgc_ops_matmul")                                                                    \
    X(LINEAR, "tgc_ops_linear")                                                                    \
    X(CONV2D, "tgc_ops_conv2d")                                                                    \
    X(CONV2D_GRAD_INPUT, "tgc_ops_conv2d_grad_input")                                              \
    X(CONV2D_GRAD_WEIGHT, "tgc_ops_conv2d_grad_weight")                                            \
    X(POOL2D_GRAD, "tgc_ops_pool2d_grad")                                                          \
    X(POOL2D_GRAD_F32, "tgc_ops_pool2d_grad_f32")                                                  \
    X(POOL2D_ARGMAX_F32, "tgc_ops_pool2d_argmax_f32")                                              \
    X(INDEX_ADD, "tgc_ops_index_add")                                                              \
    X(GATHER_GRAD, "tgc_ops_gather_grad")

typedef enum ops_kernel {
#define OPS_K_ENUM(e, name) OPS_K_##e,
    OPS_KERNELS(OPS_K_ENUM)
#undef OPS_K_ENUM
        OPS_K_COUNT
} ops_kernel;

/* Where a run's work goes: the device and the stream (NULL: the device's own). */
typedef struct ops_ctx {
    tgc_device dev;
    void *stream;
    const char *op;                 /* the op's name, for messages */
    tgc_matmul_precision precision; /* of f32 matrix products (the conv-grad templates) */
    const char *cache_dir;          /* the program cache's directory (NULL: none) */
} ops_ctx;

/* How a kernel is launched over its work: GRID over `work` elements (grid-stride), BLOCKS
 * one block per row of `work` rows (block-stride), WARPS one warp per item. */
typedef enum ops_shape { OPS_GRID, OPS_BLOCKS, OPS_WARPS, OPS_SINGLE } ops_shape;

/* Launches kernel k over work items on c's stream (loading the program for the device on
 * first use). block: threads per block (a multiple of 32 up to 1024; 0: 256). params: the
 * kernel's argument pointers, in order. work == 0 launches nothing. */
tgc_status tgc_ops_launch(const ops_ctx *c, ops_kernel k, ops_shape shape, int64_t work, int block,
                          void **params);
/* Threads per block for a block-per-row kernel whose rows have n elements: 32 to 256. */
static inline int tgc_ops_block_for(int64_t n)
{
    return n <= 32 ? 32 : n <= 64 ? 64 : n <= 128 ? 128 : 256;
}
/* Drops size-1 dims and merges neighbouring dims that form one linear run in each of the n
 * views, which all have the same shape: row-major order over the shape is unchanged, and
 * the kernels' index arithmetic gets cheaper (a contiguous view becomes one dim). */
void tgc_ops_merge(ops_tv *const *tvs, int n);
/* Waits for c's stream. */
tgc_status tgc_ops_sync(const ops_ctx *c);
/* Whether c's stream is being captured into a CUDA graph (no synchronization allowed then). */
int tgc_ops_capturing(const ops_ctx *c);

#endif
