/* Grad mode inside a model function's frame (see tensor/scope.h).
 *
 * The no-grad depth is per thread. While a frame is open, the function may push and pop
 * no-grad levels of its own, but a tgc_no_grad_pop below the depth the frame entered with
 * is refused (TGC_ERR_INVALID_ARG): grad mode is part of a variant's guards, and the caller's
 * level is not the function's to change. */
#ifndef TGC_TENSOR_GRAD_MODE_H
#define TGC_TENSOR_GRAD_MODE_H

/* Makes the current depth the floor; returns the previous floor, for tgc_grad_frame_leave. */
int tgc_grad_frame_enter(void);
/* Restores the depth the frame entered with and the previous floor. Returns how many no-grad
 * levels the function left pushed (0 when it was balanced). */
int tgc_grad_frame_leave(int prev_floor);

#endif
