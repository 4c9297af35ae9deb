/* Grad mode (per thread) and the requires_grad flag. */
#include "frontend/grad_mode.h"
#include "frontend/module_impl.h"
#include "frontend/tensor_impl.h"
#include "ir/shape_infer.h"
#include "support/error.h"
#include "tgc/autograd.h"

static _Thread_local int no_grad_depth;
/* The depth the innermost open frame entered with (0 outside any model function). */
static _Thread_local int no_grad_floor;

void tgc_no_grad_push(void)
{
    no_grad_depth++;
}

void tgc_no_grad_pop(void)
{
    if (no_grad_depth > no_grad_floor)
        no_grad_depth--;
    else if (no_grad_depth > 0)
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_no_grad_pop: the model function popped a no-grad level it did not "
                      "push (grad mode is unchanged; pair every tgc_no_grad_push with one "
                      "tgc_no_grad_pop inside the function)");
    else
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_no_grad_pop: no matching tgc_no_grad_push");
}

int tgc_grad_frame_enter(void)
{
    int prev = no_grad_floor;
    no_grad_floor = no_grad_depth;
    return prev;
}

int tgc_grad_frame_leave(int prev_floor)
{
    int left = no_grad_depth - no_grad_floor;
    no_grad_depth = no_grad_floor;
    no_grad_floor = prev_floor;
    return left;
}

int tgc_grad_enabled(void)
{
    return no_grad_depth == 0;
}

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
    return t && (t->flags & TGC_T_REQUIRES_GRAD) ? 1 : 0;
}
