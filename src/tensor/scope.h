/* Scope frames: the scope the library opens around a model function (tgc_call, the tracer,
 * the eager fallback, a tgc_call inlined into a trace).
 *
 * A frame is a barrier. Code running inside it may push and pop scopes of its own, but a
 * tgc_scope_pop that would close the frame is refused (TGC_ERR_INVALID_ARG, nothing freed),
 * and so is tgc_scope_keep of a tensor owned by the frame: the library decides what
 * outlives the function (its outputs, handed off with tgc_scope_frame_handoff). The frame
 * guards the thread's grad mode the same way (tensor/grad_mode.h). */
#ifndef TGC_TENSOR_SCOPE_H
#define TGC_TENSOR_SCOPE_H

#include "tensor/tensor_impl.h"

typedef struct tgc_scope tgc_scope;

/* Opens a frame as the innermost scope; NULL with TGC_ERR_OOM set. */
tgc_scope *tgc_scope_frame_push(void);
/* Moves t (owned by the frame or a scope inside it) to the scope enclosing the frame. */
void tgc_scope_frame_handoff(tgc_scope *frame, tgc_tensor *t);
/* Closes the scopes the function left open inside the frame, then the frame, freeing what
 * they own, and restores the grad mode the frame was opened with (tensor/grad_mode.h).
 * Returns st when it is an error; else TGC_ERR_INVALID_ARG (message naming fn_name) when the
 * function left scopes or no-grad levels open, else TGC_OK. */
tgc_status tgc_scope_frame_pop(tgc_scope *frame, const char *fn_name, tgc_status st);

#endif
