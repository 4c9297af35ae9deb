/* Backward rules of the elementwise ops: binary (broadcasting: each operand's gradient is
 * summed back to its shape by tgc_grad_sum_to, which also casts it to the operand's dtype),
 * where, the scalar forms, clamp, the unary math and cast. Derivative factors are computed
 * in tgc_gr_compute_dtype (f32 for half types) and the result is cast once, as PyTorch's
 * kernels do; ties and kinks follow PyTorch (maximum/minimum split a tie evenly, clamp lets
 * the gradient through at its bounds, relu and abs give 0 at 0). */
#include <math.h>

#include "autograd/grad_rules_impl.h"
#include "support/error.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static tgc_tensor *zeros_as(tgc_tensor *t)
{
    return t ? tgc_gr_scalar(0.0, tgc_dtype_of(t), t) : NULL;
}

/* where(cond, a, 0) and where(cond, 0, a). */
static tgc_tensor *keep_if(tgc_tensor *cond, tgc_tensor *a)
{
    return tgc_where(cond, a, zeros_as(a));
}
static tgc_tensor *zero_if(tgc_tensor *cond, tgc_tensor *a)
{
    return tgc_where(cond, zeros_as(a), a);
}

/* maximum / minimum: the operand that is strictly past the other takes the gradient, a tie
 * gives each half (PyTorch). `loses` is where this operand is not the result. */
static tgc_tensor *tie_split(tgc_tensor *loses, tgc_tensor *tie, tgc_tensor *g)
{
    return zero_if(loses, tgc_where(tie, tgc_mul_scalar(g, 0.5), g));
}

tgc_status tgc_grad_rule_binary(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *a = c->in[0], *b = c->in[1];
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(gy));
    tgc_tensor *g, *ga = NULL, *gb = NULL;
    GR_SET(g, tgc_gr_cast(gy, dt));
    switch (c->op) {
    case TGC_OP_ADD:
        ga = g;
        gb = g;
        break;
    case TGC_OP_SUB:
        ga = g;
        if (c->needs[1])
            GR_SET(gb, tgc_neg(g));
        break;
    case TGC_OP_MUL:
        if (c->needs[0])
            GR_SET(ga, tgc_mul(g, tgc_gr_cast(b, dt)));
        if (c->needs[1])
            GR_SET(gb, tgc_mul(g, tgc_gr_cast(a, dt)));
        break;
    case TGC_OP_DIV: {
        tgc_tensor *bu;
        GR_SET(bu, tgc_gr_cast(b, dt));
        if (c->needs[0])
            GR_SET(ga, tgc_div(g, bu));
        if (c->needs[1]) /* -g * a / (b * b), as PyTorch */
            GR_SET(gb, tgc_div(tgc_mul(tgc_neg(g), tgc_gr_cast(a, dt)), tgc_mul(bu, bu)));
        break;
    }
    case TGC_OP_POW: {
        tgc_tensor *au, *bu;
        GR_SET(au, tgc_gr_cast(a, dt));
        GR_SET(bu, tgc_gr_cast(b, dt));
        if (c->needs[0]) /* b * a^(b-1), 0 where b == 0 */
            GR_SET(ga, zero_if(tgc_eq(bu, zeros_as(bu)),
                               tgc_mul(g, tgc_mul(bu, tgc_pow(au, tgc_sub_scalar(bu, 1.0))))));
        if (c->needs[1]) { /* out * log(a), 0 where a == 0 and b >= 0 */
            tgc_tensor *at0 = tgc_eq(au, zeros_as(au)), *bge0 = tgc_ge(bu, zeros_as(bu));
            tgc_tensor *both = tgc_where(at0, bge0, at0);
            GR_SET(gb, zero_if(both, tgc_mul(g, tgc_mul(tgc_gr_cast(c->out, dt), tgc_log(au)))));
        }
        break;
    }
    case TGC_OP_MAXIMUM:
    case TGC_OP_MINIMUM: {
        const int mx = c->op == TGC_OP_MAXIMUM;
        tgc_tensor *tie;
        GR_SET(tie, tgc_eq(a, b));
        if (c->needs[0])
            GR_SET(ga, tie_split(mx ? tgc_lt(a, b) : tgc_gt(a, b), tie, g));
        if (c->needs[1])
            GR_SET(gb, tie_split(mx ? tgc_gt(a, b) : tgc_lt(a, b), tie, g));
        break;
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_binary: %s is not a binary op",
                             tgc_op_name(c->op));
    }
    if (c->needs[0])
        GR_SET(gin[0], tgc_grad_sum_to(ga, a));
    if (c->needs[1])
        GR_SET(gin[1], tgc_grad_sum_to(gb, b));
    return TGC_OK;
}

tgc_status tgc_grad_rule_where(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *cond = c->in[0];
    if (c->needs[1])
        GR_SET(gin[1], tgc_grad_sum_to(keep_if(cond, gy), c->in[1]));
    if (c->needs[2])
        GR_SET(gin[2], tgc_grad_sum_to(zero_if(cond, gy), c->in[2]));
    return TGC_OK;
}

tgc_status tgc_grad_rule_scalar(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *g, *r = NULL;
    if (!c->needs[0])
        return TGC_OK;
    const tgc_dtype dt = tgc_gr_compute_dtype(tgc_dtype_of(x));
    const double s = c->op == TGC_OP_CLAMP ? 0.0 : c->a->scalar.value; /* CLAMP: its bounds */
    GR_SET(g, tgc_gr_cast(gy, dt));
    switch (c->op) {
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR: r = g; break;
    case TGC_OP_MUL_SCALAR: r = tgc_mul_scalar(g, s); break;
    case TGC_OP_DIV_SCALAR: r = tgc_div_scalar(g, s); break;
    case TGC_OP_POW_SCALAR:
        if (s == 0.0)
            return TGC_OK; /* x^0 is constant: a zero gradient (PyTorch) */
        r = tgc_mul(g, tgc_mul_scalar(tgc_pow_scalar(tgc_gr_cast(x, dt), s - 1.0), s));
        break;
    case TGC_OP_CLAMP: { /* passes where lo <= x <= hi (bounds included, NaN blocked) */
        tgc_tensor *xu = tgc_gr_cast(x, dt);
        tgc_tensor *lo = tgc_gr_scalar(c->a->clamp.lo, TGC_F64, x);
        tgc_tensor *hi = tgc_gr_scalar(c->a->clamp.hi, TGC_F64, x);
        r = keep_if(tgc_ge(xu, lo), keep_if(tgc_le(xu, hi), g));
        break;
    }
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_scalar: %s is not a scalar op",
                             tgc_op_name(c->op));
    }
    GR_SET(gin[0], tgc_gr_cast(r, tgc_dtype_of(x)));
    return TGC_OK;
}

/* d/dx of gelu (exact): Phi(x) + x * phi(x). */
static tgc_tensor *gelu_grad(tgc_tensor *x)
{
    tgc_tensor *cdf =
        tgc_mul_scalar(tgc_add_scalar(tgc_erf(tgc_mul_scalar(x, M_SQRT1_2)), 1.0), 0.5);
    tgc_tensor *pdf =
        tgc_mul_scalar(tgc_exp(tgc_mul_scalar(tgc_mul(x, x), -0.5)), 1.0 / sqrt(2.0 * M_PI));
    return tgc_add(cdf, tgc_mul(x, pdf));
}

/* d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), PyTorch's formula. */
static tgc_tensor *gelu_tanh_grad(tgc_tensor *x)
{
    const double beta = sqrt(2.0 / M_PI), kappa = 0.044715;
    tgc_tensor *x2 = tgc_mul(x, x);
    tgc_tensor *inner = tgc_mul_scalar(tgc_add(x, tgc_mul_scalar(tgc_mul(x2, x), kappa)), beta);
    tgc_tensor *th = tgc_tanh(inner);
    tgc_tensor *left_d = tgc_mul_scalar(tgc_add_scalar(th, 1.0), 0.5);
    tgc_tensor *right_d = tgc_mul(tgc_gr_rsub(1.0, tgc_mul(th, th)),
                                  tgc_add_scalar(tgc_mul_scalar(x2, 3.0 * kappa * beta), beta));
    return tgc_add(left_d, tgc_mul(tgc_mul_scalar(x, 0.5), right_d));
}

tgc_status tgc_grad_rule_unary(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin)
{
    tgc_tensor *x = c->in[0], *g, *xu, *y, *r = NULL;
    if (!c->needs[0])
        return TGC_OK;
    const tgc_dtype xdt = tgc_dtype_of(x);
    if (c->op == TGC_OP_CAST) { /* back to the input's dtype */
        GR_SET(gin[0], tgc_gr_cast(gy, xdt));
        return TGC_OK;
    }
    const tgc_dtype dt = tgc_gr_compute_dtype(xdt);
    GR_SET(g, tgc_gr_cast(gy, dt));
    GR_SET(xu, tgc_gr_cast(x, dt));
    y = NULL; /* the result, for the ops whose rule reads it (tgc_grad_rule_needs_out) */
    if (tgc_grad_rule_needs_out(c->op, c->a))
        GR_SET(y, tgc_gr_cast(c->out, dt));
    switch (c->op) {
    case TGC_OP_NEG: r = tgc_neg(g); break;
    case TGC_OP_ABS: /* sign(x): 0 at 0 */
        r = tgc_where(tgc_gt(xu, zeros_as(xu)), g, keep_if(tgc_lt(xu, zeros_as(xu)), tgc_neg(g)));
        break;
    case TGC_OP_EXP: r = tgc_mul(g, y); break;
    case TGC_OP_LOG: r = tgc_div(g, xu); break;
    case TGC_OP_SQRT: r = tgc_div(g, tgc_mul_scalar(y, 2.0)); break;
    case TGC_OP_RSQRT: r = tgc_mul(g, tgc_mul_scalar(tgc_mul(y, tgc_mul(y, y)), -0.5)); break;
    case TGC_OP_TANH: r = tgc_mul(g, tgc_gr_rsub(1.0, tgc_mul(y, y))); break;
    case TGC_OP_SIGMOID: r = tgc_mul(g, tgc_mul(y, tgc_gr_rsub(1.0, y))); break;
    case TGC_OP_RELU: r = keep_if(tgc_gt(xu, zeros_as(xu)), g); break;
    case TGC_OP_GELU: r = tgc_mul(g, gelu_grad(xu)); break;
    case TGC_OP_GELU_TANH: r = tgc_mul(g, gelu_tanh_grad(xu)); break;
    case TGC_OP_SILU: { /* s (1 + x (1 - s)) */
        tgc_tensor *s = tgc_sigmoid(xu);
        r = tgc_mul(g, tgc_mul(s, tgc_add_scalar(tgc_mul(xu, tgc_gr_rsub(1.0, s)), 1.0)));
        break;
    }
    case TGC_OP_ERF:
        r = tgc_mul(g, tgc_mul_scalar(tgc_exp(tgc_neg(tgc_mul(xu, xu))), 2.0 / sqrt(M_PI)));
        break;
    case TGC_OP_SIN: r = tgc_mul(g, tgc_cos(xu)); break;
    case TGC_OP_COS: r = tgc_neg(tgc_mul(g, tgc_sin(xu))); break;
    default:
        return tgc_set_error(TGC_ERR_INTERNAL, "tgc_grad_rule_unary: %s is not a unary op",
                             tgc_op_name(c->op));
    }
    GR_SET(gin[0], tgc_gr_cast(r, xdt));
    return TGC_OK;
}
