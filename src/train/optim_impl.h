/* Optimizer internals (frontend layer) for checkpoints (checkpoint.c). An optimizer watches
 * its module (frontend/watch.h): tgc_module_to moves its state with the parameters, and
 * tgc_module_free makes it drop them (later tgc_optim_step / _zero_grad / _set_lr fail with
 * TGC_ERR_INVALID_ARG, its state stays readable, and tgc_optim_free frees it).
 *
 * An optimizer (optim.c) holds a reference to each parameter it updates (the parameters of
 * its module tree that required a gradient when it was created, in tree order) and owns its
 * state tensors: "step" and "lr" (f32, 0-d, on the parameters' device), then per parameter,
 * in parameter order, "<dotted name>.momentum_buffer" (SGD with momentum) or ".exp_avg",
 * ".exp_avg_sq" and, with amsgrad, ".max_exp_avg_sq" (Adam, AdamW), each of its parameter's
 * shape, dtype and device, created as zeros with the optimizer.
 *
 * Threading: as the module: an optimizer is used by one thread at a time. */
#ifndef TGC_FRONTEND_OPTIM_IMPL_H
#define TGC_FRONTEND_OPTIM_IMPL_H

#include <stddef.h>

#include "tgc/autograd.h"

/* "sgd", "adam" or "adamw" (NULL for a NULL optimizer). */
const char *tgc_optim_kind(const tgc_optim *o);
/* The hyperparameters as one JSON object, defaults resolved, lr as the "lr" tensor holds it
 * now: {"lr":0.01,"momentum":0.9,"dampening":0,"weight_decay":0,"nesterov":false,
 * "maximize":false} (SGD) or {"lr":..,"betas":[0.9,0.999],"eps":1e-08,"weight_decay":..,
 * "amsgrad":false,"maximize":false} (Adam, AdamW; AdamW's weight_decay 0 when none), numbers
 * in the shortest form that reads back to the same double. snprintf-style: returns the
 * length it needs (buf may be NULL with n 0); -1 on a NULL optimizer. */
int tgc_optim_hparams(const tgc_optim *o, char *buf, size_t n);
/* The module the optimizer was created over, NULL once that module was freed. */
tgc_module *tgc_optim_module(const tgc_optim *o);
/* The parameters it updates, in order (*n of them). */
tgc_tensor *const *tgc_optim_params(const tgc_optim *o, int *n);
/* The parameter state tensor i belongs to; NULL for "step" and "lr" (and out of range). */
tgc_tensor *tgc_optim_state_param(const tgc_optim *o, int i);
/* tgc_optim_step with the gradients given (grads[i] for the i-th of tgc_optim_params, NULL:
 * skipped) instead of each parameter's .grad. */
tgc_status tgc_optim_step_grads(tgc_optim *o, tgc_tensor *const *grads);

#endif
