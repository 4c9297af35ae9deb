/* Public entry points of the elementwise ops: binary, comparison, where, scalar forms,
 * unary and cast. Broadcasting and dtype rules live in shape inference. */
#include "frontend/apply.h"
#include "tgc/ops.h"

static tgc_tensor *binary(tgc_op op, tgc_tensor *a, tgc_tensor *b)
{
    tgc_tensor *in[2] = {a, b};
    tgc_attrs at = tgc_attrs_none();
    return tgc_apply(op, in, 2, &at);
}

static tgc_tensor *scalar(tgc_op op, tgc_tensor *t, double s0, double s1)
{
    tgc_attrs at = tgc_attrs_of(op);
    if (op == TGC_OP_CLAMP) {
        at.clamp.lo = s0;
        at.clamp.hi = s1;
    } else {
        at.scalar.value = s0;
    }
    return tgc_apply(op, &t, 1, &at);
}

static tgc_tensor *unary(tgc_op op, tgc_tensor *t)
{
    tgc_attrs at = tgc_attrs_none();
    return tgc_apply(op, &t, 1, &at);
}

#define BINARY_OP(name, OP)                                                                        \
    tgc_tensor *tgc_##name(tgc_tensor *a, tgc_tensor *b)                                           \
    {                                                                                              \
        return binary(TGC_OP_##OP, a, b);                                                          \
    }
#define SCALAR_OP(name, OP)                                                                        \
    tgc_tensor *tgc_##name(tgc_tensor *t, double s)                                                \
    {                                                                                              \
        return scalar(TGC_OP_##OP, t, s, 0.0);                                                     \
    }
#define UNARY_OP(name, OP)                                                                         \
    tgc_tensor *tgc_##name(tgc_tensor *t)                                                          \
    {                                                                                              \
        return unary(TGC_OP_##OP, t);                                                              \
    }

BINARY_OP(add, ADD)
BINARY_OP(sub, SUB)
BINARY_OP(mul, MUL)
BINARY_OP(div, DIV)
BINARY_OP(pow, POW)
BINARY_OP(maximum, MAXIMUM)
BINARY_OP(minimum, MINIMUM)
BINARY_OP(eq, EQ)
BINARY_OP(ne, NE)
BINARY_OP(lt, LT)
BINARY_OP(le, LE)
BINARY_OP(gt, GT)
BINARY_OP(ge, GE)

SCALAR_OP(add_scalar, ADD_SCALAR)
SCALAR_OP(sub_scalar, SUB_SCALAR)
SCALAR_OP(mul_scalar, MUL_SCALAR)
SCALAR_OP(div_scalar, DIV_SCALAR)
SCALAR_OP(pow_scalar, POW_SCALAR)

UNARY_OP(neg, NEG)
UNARY_OP(abs, ABS)
UNARY_OP(exp, EXP)
UNARY_OP(log, LOG)
UNARY_OP(sqrt, SQRT)
UNARY_OP(rsqrt, RSQRT)
UNARY_OP(tanh, TANH)
UNARY_OP(sigmoid, SIGMOID)
UNARY_OP(relu, RELU)
UNARY_OP(gelu, GELU)
UNARY_OP(gelu_tanh, GELU_TANH)
UNARY_OP(silu, SILU)
UNARY_OP(erf, ERF)
UNARY_OP(sin, SIN)
UNARY_OP(cos, COS)

tgc_tensor *tgc_where(tgc_tensor *cond, tgc_tensor *a, tgc_tensor *b)
{
    tgc_tensor *in[3] = {cond, a, b};
    tgc_attrs at = tgc_attrs_none();
    return tgc_apply(TGC_OP_WHERE, in, 3, &at);
}

tgc_tensor *tgc_clamp(tgc_tensor *t, double lo, double hi)
{
    return scalar(TGC_OP_CLAMP, t, lo, hi);
}

tgc_tensor *tgc_cast(tgc_tensor *t, tgc_dtype dt)
{
    tgc_attrs at = tgc_attrs_none();
    at.dtype = dt;
    return tgc_apply(TGC_OP_CAST, &t, 1, &at);
}
