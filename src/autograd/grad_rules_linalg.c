/* Backward rules of matmul, linear, conv2d and the pools.
 *
 * matmul follows numpy: a 1-D operand is promoted ([k] -> [1, k] on the left, [k, 1] on the
 * right), the rules ga = gy b^T, gb = a^T gy run on the promoted shapes, broadcast batch
 * dims are summed back (tgc_grad_sum_to) and the promotion is undone. conv2d and the pools
 * use their gradient ops (frontend/ops_grad.h), which have kernels of their own; a conv
 * bias gets the sum of gy over N, H, W. */
#include "autograd/grad_rules_impl.h"
#include "frontend/ops_grad.h"
#include "support/error.h"

static tgc_status matmul_grad(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *a = c->in[0], *b = c->in[1], *a2 = a, *b2 = b, *g = gy;
    const int a1 = tgc_ndim(a) == 1, b1 = tgc_ndim(b) == 1;
    if (a1) {
        GR_SET(a2, tgc_unsqueeze(a, 0));
        GR_SET(g, tgc_unsqueeze(g, -1 - !b1)); /* the removed row dim */
    }
    if (b1) {
        GR_SET(b2, tgc_unsqueeze(b, 1));
        GR_SET(g, tgc_unsqueeze(g, -1));
    }
    if (c->needs[0])
        GR_SET(gin[0], tgc_reshape_as(tgc_grad_sum_to(tgc_matmul(g, tgc_gr_mT(b2)), a2), a));
    if (c->needs[1])
        GR_SET(gin[1], tgc_reshape_as(tgc_grad_sum_to(tgc_matmul(tgc_gr_mT(a2), g), b2), b));
    return TGC_OK;
}

/* linear: y = x w^T + bias over x [..., in], w [out, in]. */
static tgc_status linear_grad(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *w = c->in[1];
    if (c->needs[0])
        GR_SET(gin[0], tgc_matmul(gy, w));
    if ((c->n_in > 1 && c->needs[1]) || (c->n_in > 2 && c->needs[2])) {
        /* every leading position is one row: [M, out] and [M, in] */
        tgc_tensor *g2, *x2;
        if (tgc_ndim(x) == 1) {
            GR_SET(g2, tgc_unsqueeze(gy, 0));
            GR_SET(x2, tgc_unsqueeze(x, 0));
        } else {
            GR_SET(g2, tgc_flatten(gy, 0, -2));
            GR_SET(x2, tgc_flatten(x, 0, -2));
        }
        if (c->needs[1])
            GR_SET(gin[1], tgc_matmul(tgc_gr_mT(g2), x2));
        if (c->n_in > 2 && c->needs[2]) {
            const int d0 = 0;
            GR_SET(gin[2], tgc_sum(g2, &d0, 1, 0));
        }
    }
    return TGC_OK;
}

tgc_status tgc_grad_rule_matmul(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    switch (c->op) {
    case TGC_OP_MATMUL: return matmul_grad(c, gy, gin);
    case TGC_OP_LINEAR: return linear_grad(c, gy, gin);
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_matmul: %s is not a matmul op",
                             tgc_op_name(c->op));
    }
}

tgc_status tgc_grad_rule_conv(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *w = c->in[1];
    if (c->needs[0])
        GR_SET(gin[0], tgc_conv2d_grad_input(gy, w, c->a, x));
    if (c->needs[1])
        GR_SET(gin[1], tgc_conv2d_grad_weight(x, gy, c->a, w));
    if (c->n_in > 2 && c->needs[2]) {
        const int dims[3] = {0, 2, 3};
        GR_SET(gin[2], tgc_sum(gy, dims, 3, 0));
    }
    return TGC_OK;
}

tgc_status tgc_grad_rule_pool(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0];
    if (!c->needs[0])
        return TGC_OK;
    switch (c->op) {
    case TGC_OP_MAX_POOL2D: GR_SET(gin[0], tgc_max_pool2d_grad(x, gy, c->a)); break;
    case TGC_OP_AVG_POOL2D: GR_SET(gin[0], tgc_avg_pool2d_grad(gy, c->a, x)); break;
    case TGC_OP_ADAPTIVE_AVG_POOL2D:
        GR_SET(gin[0], tgc_adaptive_avg_pool2d_grad(gy, c->a, x));
        break;
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_pool: %s is not a pool",
                             tgc_op_name(c->op));
    }
    return TGC_OK;
}
