/* libtgc — autograd, optimizers and optimizer checkpoints.
 *
 * Recording. Every op (tgc_apply, the one path of all ops) records how its result was made
 * when grad mode is on and an input requires a gradient: the result then requires a
 * gradient too (tgc_requires_grad_of is 1) and carries that record. The same code records
 * eagerly and inside a trace, so a compiled function that calls forward, the loss,
 * tgc_backward and tgc_optim_step compiles into ONE variant: forward, backward and update
 * fused and memory-planned together.
 *
 * Gradients. tgc_backward(loss) runs the backward rules of every recorded op from loss back
 * to the leaves (tensors that require a gradient and were not made by a recorded op:
 * module parameters, tensors marked with tgc_requires_grad) and ADDS each leaf's gradient
 * into its .grad (tgc_grad), which is created as zeros of the leaf's shape, dtype and device
 * the first time. After it, the record of that step is freed (a second tgc_backward through
 * it fails with TGC_ERR_INVALID_ARG). Backward rules run with grad mode off: there are no
 * gradients of gradients.
 *
 * Compiled steps. Inside a compiled function, tgc_backward and the optimizers work exactly
 * as eagerly: parameter updates, .grad accumulation, optimizer state and batch-norm running
 * statistics are in-place writes of module, grad and optimizer storage (tgc_copy_), bound
 * by position like parameters, so a new call never recompiles because a value changed.
 * Outputs of tgc_call carry no record: call tgc_backward inside the compiled function.
 *
 * Ownership: the records hold what a backward needs, so intermediates of a loss may be freed
 * before tgc_backward (tgc_tensor_free, or popping the scope that made them while keeping
 * the loss): the loss keeps its record graph alive until the backward through it.
 * tgc_grad returns the leaf's own gradient tensor (do not free it; it lives as
 * long as the leaf). Optimizers are created over a module and freed with tgc_optim_free,
 * normally before the module; an optimizer whose module was freed first is detached (it
 * keeps no reference to it): step, zero_grad and set_lr fail with TGC_ERR_INVALID_ARG, its
 * state stays readable, tgc_optim_free frees it. Their state tensors are theirs and move
 * with tgc_module_to. tgc_requires_grad_of(NULL) and tgc_optim_num_state(NULL) return 0
 * and set TGC_ERR_INVALID_ARG (keeping an earlier error).
 * Threading: recording is per thread; a module being trained must not be used by another
 * thread at the same time. */
#ifndef TGC_AUTOGRAD_H
#define TGC_AUTOGRAD_H

#include "module.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns gradient tracking of t on or off. Only floating-point tensors (f32, f16, bf16, f64)
 * can require gradients: turning it on for an integer or bool tensor fails with
 * TGC_ERR_DTYPE and leaves t unchanged. NULL: TGC_ERR_INVALID_ARG. On a module parameter
 * it changes the module's structure signature (compiled variants recompile). */
TGC_API tgc_status tgc_requires_grad(tgc_tensor *t, int on);
/* 1 when t requires a gradient: a leaf marked so, or the result of a recorded op. */
TGC_API int tgc_requires_grad_of(const tgc_tensor *t);
/* Disable grad mode on this thread until the matching pop (nests). Inside a model function
 * the levels its caller pushed are protected: popping one is refused (TGC_ERR_INVALID_ARG,
 * grad mode unchanged), and levels the function leaves pushed are undone when it returns,
 * which then fails with TGC_ERR_INVALID_ARG. */
TGC_API void tgc_no_grad_push(void);
TGC_API void tgc_no_grad_pop(void);
TGC_API int tgc_grad_enabled(void);

/* ---- backward ---- */
/* Backward from a scalar (one element) loss: d loss / d loss = 1. A loss that requires no
 * gradient, or has more than one element: TGC_ERR_INVALID_ARG. */
TGC_API tgc_status tgc_backward(tgc_tensor *loss);
/* Backward from any recorded tensor with the given gradient of it (out's shape and dtype;
 * TGC_ERR_SHAPE / TGC_ERR_DTYPE otherwise). */
TGC_API tgc_status tgc_backward_grad(tgc_tensor *out, tgc_tensor *grad_out);
/* The accumulated gradient of leaf t, or NULL when none was computed yet (no error). */
TGC_API tgc_tensor *tgc_grad(const tgc_tensor *t);
/* A view of t that shares its storage and carries no record (requires no gradient). */
TGC_API tgc_tensor *tgc_detach(tgc_tensor *t);
/* Zeroes the .grad of every parameter of the module tree that requires a gradient, in place;
 * a parameter without a .grad yet gets one (zeros). So a compiled step that starts with it
 * binds the same gradient tensors on its first call as later. */
TGC_API tgc_status tgc_zero_grad(tgc_module *m);

/* ---- optimizers (PyTorch's update rules, over every parameter of a module tree that
 * requires a gradient, in tree order) ---- */
typedef struct tgc_optim tgc_optim;
/* Option values. lr is required (> 0, finite in f32). Every other floating field means its
 * value, 0 included, except that TGC_OPTIM_DEFAULT asks for PyTorch's default of that
 * field for that optimizer, and that beta1, beta2 and eps, which are never 0 (betas in
 * (0, 1), eps > 0), also take their default when left 0. So a weight_decay of 0 is no decay
 * for Adam and AdamW alike; PyTorch's AdamW default (1e-2) is TGC_OPTIM_DEFAULT (or 1e-2).
 * A NaN, an infinity, or a value outside a field's range fails with TGC_ERR_INVALID_ARG
 * naming the function and the field. TGC_OPTIM_DEFAULT is a negative number no field
 * accepts as a value, so it never stands for a real one. */
#define TGC_OPTIM_DEFAULT (-0x1p+1000)
typedef struct tgc_sgd_opts {
    double lr;
    double momentum;     /* >= 0; 0: plain SGD (the default) */
    double dampening;    /* in [0, 1]; default 0 */
    double weight_decay; /* >= 0, L2, added to the gradient; default 0 */
    int nesterov;        /* needs momentum > 0 and dampening 0 */
    int maximize;
} tgc_sgd_opts;
typedef struct tgc_adam_opts {
    double lr;
    double beta1, beta2; /* in (0, 1); 0 or TGC_OPTIM_DEFAULT: 0.9, 0.999 */
    double eps;          /* > 0; 0 or TGC_OPTIM_DEFAULT: 1e-8 */
    double weight_decay; /* >= 0; Adam: L2 added to the gradient, AdamW: decoupled. 0: none;
                          * TGC_OPTIM_DEFAULT: PyTorch's (Adam 0, AdamW 1e-2) */
    int amsgrad;
    int maximize;
} tgc_adam_opts;
/* NULL on error (NULL module or opts, an option outside its range, nesterov without
 * momentum: TGC_ERR_INVALID_ARG). */
TGC_API tgc_optim *tgc_sgd_sized(tgc_module *m, const tgc_sgd_opts *opts, size_t opts_size);
TGC_API tgc_optim *tgc_adam_sized(tgc_module *m, const tgc_adam_opts *opts, size_t opts_size);
TGC_API tgc_optim *tgc_adamw_sized(tgc_module *m, const tgc_adam_opts *opts, size_t opts_size);
/* The sizes reach the library (config.h: structs that grow). */
static inline tgc_optim *tgc_sgd(tgc_module *m, const tgc_sgd_opts *opts)
{
    return tgc_sgd_sized(m, opts, sizeof *opts);
}
static inline tgc_optim *tgc_adam(tgc_module *m, const tgc_adam_opts *opts)
{
    return tgc_adam_sized(m, opts, sizeof *opts);
}
static inline tgc_optim *tgc_adamw(tgc_module *m, const tgc_adam_opts *opts)
{
    return tgc_adamw_sized(m, opts, sizeof *opts);
}
/* One update of every parameter from its .grad (parameters without a .grad are skipped, as
 * in PyTorch). Eagerly, or inside a compiled function, where it becomes fused in-place
 * updates; the step count and the learning rate live in tensors, so neither is a guard. */
TGC_API tgc_status tgc_optim_step(tgc_optim *o);
/* tgc_zero_grad of the optimizer's parameters. */
TGC_API tgc_status tgc_optim_zero_grad(tgc_optim *o);
/* Changes the learning rate (for schedules): no recompile. lr > 0. */
TGC_API tgc_status tgc_optim_set_lr(tgc_optim *o, double lr);
TGC_API double tgc_optim_lr(const tgc_optim *o);
/* The optimizer's state tensors ("step", "lr", "conv1.weight.exp_avg", ...): count, and the
 * i-th with its name (owned by the optimizer). */
TGC_API int tgc_optim_num_state(const tgc_optim *o);
TGC_API tgc_tensor *tgc_optim_state(const tgc_optim *o, int i, const char **name);
TGC_API void tgc_optim_free(tgc_optim *o);

/* ---- checkpoints (safetensors files: PyTorch's safetensors.torch reads and writes them;
 * tensor names are the module tree's dotted names without the root, "conv1.weight") ---- */
/* Writes the optimizer's state tensors (names as tgc_optim_state gives them), with the
 * optimizer kind and hyperparameters in the file's metadata. TGC_ERR_IO on a write failure
 * (the file is written to a temporary name and renamed, so a failed save leaves no partial
 * file). */
TGC_API tgc_status tgc_optim_save(const tgc_optim *o, const char *path);
/* Loads state saved by tgc_optim_save of an optimizer of the same kind over a module of the
 * same structure. A missing, truncated or malformed file, or one whose names, shapes or
 * dtypes do not match, fails (TGC_ERR_IO for the file, TGC_ERR_SHAPE / TGC_ERR_DTYPE /
 * TGC_ERR_INVALID_ARG for a mismatch, naming the tensor) and changes nothing. */
TGC_API tgc_status tgc_optim_load(tgc_optim *o, const char *path);

#ifdef __cplusplus
}
#endif
#endif
