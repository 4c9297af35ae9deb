/* Private to shape inference (shape_infer*.c): the per-call context, the helpers every rule
 * shares, and one rule per op kind (the dispatch table, shape_infer_dispatch.c, is generated from
 * ops.def). */
#ifndef TGC_IR_SHAPE_INFER_IMPL_H
#define TGC_IR_SHAPE_INFER_IMPL_H

#include "ir/shape_infer.h"
#include "support/error.h"

#define SI_NBUF   6
#define SI_BUFLEN 256

typedef struct si_ctx {
    tgc_op op;
    const tgc_vinfo *in;
    int n_in;
    const tgc_attrs *a;
    tgc_symtab *syms;
    tgc_vinfo *out;
    int next_buf; /* ring of text buffers for shapes in one message */
    char buf[SI_NBUF][SI_BUFLEN];
} si_ctx;

/* Sets the error "tgc_<op>: <message>" and returns s. */
tgc_status si_fail(si_ctx *c, tgc_status s, const char *fmt, ...) TGC_PRINTF(3, 4);
/* Text of a shape / of dims / of one dim with this call's sizes (symbolic dims print their
 * trace-time value), valid until SI_NBUF more are formatted. */
const char *si_shape(si_ctx *c, const tgc_vinfo *v);
const char *si_dims(si_ctx *c, const tgc_sdim *d, int n);
const char *si_dim(si_ctx *c, tgc_sdim d);

/* Trace-time value of d. */
int64_t si_hint(const si_ctx *c, tgc_sdim d);
/* 1 when a == b is known, or assumed because the hints agree (recorded in syms). */
int si_eq(si_ctx *c, tgc_sdim a, tgc_sdim b);
/* d >= bound, known or recorded as an assumption (guarded at call time). */
int si_ge(si_ctx *c, tgc_sdim d, int64_t bound);
/* Broadcasts x[0..nx) with y[0..ny) (aligned at the end) into r, *nr = max(nx, ny).
 * Returns 0 when a pair of dims does not broadcast (no error set). */
int si_broadcast_dims(si_ctx *c, const tgc_sdim *x, int nx, const tgc_sdim *y, int ny, tgc_sdim *r,
                      int *nr);
tgc_sdim si_prod(si_ctx *c, const tgc_sdim *d, int n);

/* The float dtype an op computing in float returns for dt (ints and bool: f32). */
tgc_dtype si_float_of(tgc_dtype dt);
/* The result dtype of ops.def's dtype rule for this node (TGC_DTR_OWN: operand 0's, or
 * TGC_F32 without operands; the rule decides). */
tgc_dtype si_dtype(const si_ctx *c);
/* in[k] must have rank in [lo, hi] (TGC_ERR_SHAPE naming `name`). */
tgc_status si_need_rank(si_ctx *c, int k, const char *name, int lo, int hi);
/* in[k] must be i32 or i64 (TGC_ERR_DTYPE). */
tgc_status si_need_index(si_ctx *c, int k, const char *name);
/* in[idx[0..n)] must all be float and of one dtype (TGC_ERR_DTYPE naming both). */
tgc_status si_need_float(si_ctx *c, const int *idx, const char *const *names, int n);
/* n_in must be want (a malformed node: TGC_ERR_INTERNAL). */
tgc_status si_need_inputs(si_ctx *c, int want);
/* dim must be a valid axis of a rank-ndim tensor (a 0-d tensor accepts dim 0). */
tgc_status si_need_dim(si_ctx *c, int64_t dim, int ndim);
/* out = dtype, rank n, dims d */
tgc_status si_set_out(si_ctx *c, tgc_dtype dt, const tgc_sdim *d, int n);

/* The attribute value v must be >= min (TGC_ERR_INVALID_ARG naming `what`). */
tgc_status si_attr_at_least(si_ctx *c, int64_t v, int64_t min, const char *what);
/* The forward's window attributes of a window pool or its gradient (MAX_POOL2D_GRAD,
 * AVG_POOL2D_GRAD), read from the op's own layout. */
tgc_pool_attrs si_pool_of(const si_ctx *c);
/* The window of CONV2D or its gradients (each read from the op's own layout): strides >= 1,
 * paddings >= 0, dilations >= 1, groups >= 1. */
tgc_status si_conv_attrs(si_ctx *c);
/* The window pools' window (si_pool_of): kernel and stride >= 1, padding in
 * [0, kernel / 2], exclude_padding 0 or 1 (1 for avg_pool2d and its gradient only). */
tgc_status si_pool_attrs(si_ctx *c);

/* The shape rules ops.def's DESC lines name (si_rule_<shape>, declared here from those lines,
 * so a new rule needs only its definition); each handles every op that names it, reading the
 * op's dtype rule through si_dtype where it has one. */
#define DESC(e, fusion, dtype, shape, grad) tgc_status si_rule_##shape(si_ctx *c);
#include "ir/ops.def"
#undef DESC

#endif
