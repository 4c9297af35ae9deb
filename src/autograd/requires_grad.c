/* The requires_grad flag of a tensor (grad mode itself is tensor/grad_mode.c). */
#include "frontend/module_impl.h"
#include "support/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"

tgc_status tgc_requires_grad(tgc_tensor *t, int on)
{
    if (!t)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_requires_grad: tensor is NULL");
    if (on && !tgc_dtype_is_float(t->dtype))
        return tgc_set_error(TGC_ERR_DTYPE,
                             "tgc_requires_grad: tensor is %s; only f32, f16, bf16 and f64 "
                             "tensors can require gradients (cast it first with tgc_cast)",
                             tgc_dtype_name(t->dtype));
    if (on)
        t->flags |= TGC_T_REQUIRES_GRAD;
    else
        t->flags &= ~(uint32_t)TGC_T_REQUIRES_GRAD;
    if (t->module)
        tgc_module_invalidate(t->module);
    return TGC_OK;
}

int tgc_requires_grad_of(const tgc_tensor *t)
{
    if (!t) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_requires_grad_of: tensor is NULL");
        return 0;
    }
    return (t->flags & TGC_T_REQUIRES_GRAD) ? 1 : 0;
}
