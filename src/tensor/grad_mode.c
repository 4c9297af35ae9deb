/* Grad mode: the per-thread no-grad depth and the floor a model function's frame sets
 * (tensor/grad_mode.h). */
#include "tensor/grad_mode.h"
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

