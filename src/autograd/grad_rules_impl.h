/* Internal to the backward rules (grad_rules*.c, grad_util.c) and the composite ops that
 * record their own node (ops_nn.c): the rules of each family, and the small helpers they
 * share. Everything here builds tensors with tgc ops only, so it runs eagerly and is traced
 * alike; sizes are read as tgc_sdims (t->sshape while tracing) or symints, never with
 * tgc_size / tgc_shape / tgc_numel. Single-threaded per call, like every op. */
#ifndef TGC_FRONTEND_GRAD_RULES_IMPL_H
#define TGC_FRONTEND_GRAD_RULES_IMPL_H

#include "autograd/autograd.h"
#include "ir/sym.h"
#include "tgc/ops.h"

/* ---- helpers (grad_util.c) ---- */

/* The status of a failed helper or op: the error kept by the op that returned NULL (an
 * internal error with a message when none was set). */
tgc_status tgc_gr_fail(const char *rule);
/* dst = expr, returning the rule's failure when expr is NULL. */
#define GR_SET(dst, expr)                                                                          \
    do {                                                                                           \
        if (!((dst) = (expr)))                                                                     \
            return tgc_gr_fail(__func__);                                                          \
    } while (0)

/* Dim d of t as a tgc_sdim: the traced symbolic size, or the number. */
tgc_sdim tgc_gr_sdim(const tgc_tensor *t, int d);
/* 1 when dim d of t is a known constant (always outside tracing); *v its value. */
int tgc_gr_const_dim(const tgc_tensor *t, int d, int64_t *v);
/* A 0-d tensor of value v, dtype dt, on like's device. */
tgc_tensor *tgc_gr_scalar(double v, tgc_dtype dt, const tgc_tensor *like);
/* A stride-0 view of value v with like's shape and dtype dt (no storage of that size). */
tgc_tensor *tgc_gr_full_like(double v, tgc_dtype dt, tgc_tensor *like);
/* The dtype rules compute in: f32 for f16/bf16 (as the fused kernels and PyTorch do), the
 * dtype itself otherwise. */
tgc_dtype tgc_gr_compute_dtype(tgc_dtype dt);
/* t cast to tgc_gr_compute_dtype(dt) (t itself, as a new view, when it already is). */
tgc_tensor *tgc_gr_up(tgc_tensor *t, tgc_dtype dt);
/* t cast to dt when it is not already. */
tgc_tensor *tgc_gr_cast(tgc_tensor *t, tgc_dtype dt);
/* A reduction's result g (reduced dims `mask` of an ndim-d input, removed unless keepdim)
 * with the reduced dims back as size 1. */
tgc_tensor *tgc_gr_unreduce(tgc_tensor *g, int64_t mask, int ndim, int keepdim);
/* The number of elements of x over the dims in mask: *count when every one is a constant
 * (*dyn = NULL), else *dyn is a 0-d tensor of dtype dt holding it (symbolic sizes stay
 * symbolic: each is summed from a stride-0 view of its size, a reduction over that many
 * elements only). Returns 0 on error (kept). */
int tgc_gr_count(tgc_tensor *x, int64_t mask, tgc_dtype dt, double *count, tgc_tensor **dyn);
/* t divided by the element count of x over mask (see tgc_gr_count), minus `minus`. */
tgc_tensor *tgc_gr_div_count(tgc_tensor *t, tgc_tensor *x, int64_t mask, double minus);
/* Transpose of the last two dims. */
tgc_tensor *tgc_gr_mT(tgc_tensor *t);
/* s - t. */
tgc_tensor *tgc_gr_rsub(double s, tgc_tensor *t);

/* ---- the rules: ops.def's DESC lines name each op's (tgc_grad_rule_<grad>, defined in the
 * grad_rules_<family>.c that holds its family; tgc_grad_rule_none in grad_rules.c marks the
 * ops without a gradient), so a new op's rule needs no declaration here ---- */
#define DESC(e, fusion, dtype, shape, grad)                                                        \
    tgc_status tgc_grad_rule_##grad(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin);
#include "ir/ops.def"
#undef DESC

/* ---- composite forwards (grad_rules_nn.c), used by ops_nn.c when recording ---- */

/* Batch statistics of x [N, C, ...] over every dim but 1, as batch_norm's training forward
 * computes them: mean and 1/sqrt(var + eps) (population variance), keepdim shape
 * [1, C, 1, ...], in tgc_gr_compute_dtype(x). */
tgc_status tgc_gr_bn_stats(tgc_tensor *x, double eps, tgc_tensor **mean, tgc_tensor **rstd);
/* The attention weights softmax(q k^T * scale + mask, causal) as the SDPA kernel computes
 * them (rows with every position masked are zeros), in q's compute dtype. */
tgc_tensor *tgc_gr_sdpa_weights(tgc_tensor *q, tgc_tensor *k, tgc_tensor *mask, int causal,
                                double scale);

#endif
