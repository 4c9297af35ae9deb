/* Autograd recording and backward (frontend layer): the records ops attach to their results,
 * the backward rules they run, and the pass tgc_backward makes over them.
 *
 * A record (tgc_grad_node) belongs to the tensor it made (t->grad_fn) and holds references to
 * the op's inputs, its attributes, the saved tensors a rule asked for, and the output's own
 * value (a view of its storage eagerly, a traced tensor of the same value while tracing):
 * nothing is copied. Records are refcounted: a tensor holds its record, a record holds its
 * inputs (and so their records). tgc_backward releases the inputs and saved tensors of every
 * record it ran through, so the step's memory is freed once the user's tensors are. */
#ifndef TGC_FRONTEND_AUTOGRAD_H
#define TGC_FRONTEND_AUTOGRAD_H

#include "ir/op.h"
#include "tensor/tensor_impl.h"

/* What a backward rule sees of the op it differentiates. */
typedef struct tgc_grad_ctx {
    tgc_op op;
    const tgc_attrs *a;    /* the forward op's attributes */
    tgc_tensor *const *in; /* the forward inputs, as passed to tgc_apply (n_in of them) */
    int n_in;
    tgc_tensor *out;          /* the forward result (its values; no record of its own), for
                               * the ops of tgc_grad_rule_needs_out; NULL otherwise */
    tgc_tensor *const *saved; /* what tgc_autograd_attach was given (n_saved; NULL for 0) */
    int n_saved;
    const uint8_t *needs; /* needs[k]: input k needs a gradient */
} tgc_grad_ctx;

/* A backward rule: given gy (d loss / d out, out's shape and dtype), writes gin[k] for every
 * k with needs[k] (a tensor of in[k]'s shape and dtype, made with tgc ops, so it runs eagerly
 * or is traced), and leaves gin[k] NULL otherwise (a NULL gin[k] where needs[k] means "zero
 * gradient"). Runs with grad mode off. Returns TGC_OK or the first error. Rules never read
 * sizes with tgc_size / tgc_shape / tgc_numel (that would specialize symbolic dims while
 * tracing): they use tgc_grad_sum_to, tgc_reshape_as, tgc_expand_as, tgc_sym_size. */
typedef tgc_status (*tgc_grad_rule)(const tgc_grad_ctx *c, tgc_tensor *gy, tgc_tensor **gin);

/* The rule of op (with these attributes), or NULL when the op's result never requires a
 * gradient (comparisons, argmax, integer results, sources: it is not differentiable). Every
 * differentiable op of ops.def has one (grad_rules*.c). */
tgc_grad_rule tgc_grad_rule_for(tgc_op op, const tgc_attrs *a);

/* 1 when op's rule reads the forward result (c->out: exp, sqrt, rsqrt, tanh, sigmoid, pow,
 * max, softmax, log_softmax); other records keep no handle of their result, so its memory
 * goes when the user's tensor does. */
int tgc_grad_rule_needs_out(tgc_op op, const tgc_attrs *a);

/* 1 when a result made from these inputs must be recorded: grad mode is on and an input
 * requires a gradient (tgc_requires_grad_of). */
int tgc_autograd_wants(tgc_tensor *const *in, int n_in);
/* Records out as made by op from in[] with rule; saved[] are extra tensors the rule needs
 * (statistics of a composite op's forward). out then requires a gradient. tgc_apply calls
 * it for every op; composite frontend ops (batch_norm in training, dropout) compute their
 * forward with recording off (tgc_autograd_pause/resume) and attach one record of their
 * own. TGC_ERR_OOM. */
tgc_status tgc_autograd_attach(tgc_tensor *out, tgc_op op, const tgc_attrs *a,
                               tgc_tensor *const *in, int n_in, tgc_grad_rule rule,
                               tgc_tensor *const *saved, int n_saved);
/* Recording off on this thread until the matching resume (nests; not the user's grad mode,
 * not a guard). */
void tgc_autograd_pause(void);
void tgc_autograd_resume(void);

/* A hook on leaves' gradients: code above autograd that acts on gradients as a backward
 * finishes them (the data-parallel wrapper of ddp.c, which starts each bucket's all-reduce
 * while the backward goes on) sets leaf->grad_hook (and leaf->grad_hook_slot, its own index
 * of the leaf) on the leaves it watches; autograd never names it.
 *  - ready: leaf's gradient of the running backward is final and added into its .grad (its
 *    last contribution arrived: the counts come from the collected records);
 *  - finish: the backward is over (also after an error: collectives started must be joined):
 *    called once per backward for each hook that was handed a leaf in it, the most recent
 *    first.
 * Both run on the backward's thread with recording paused and return TGC_OK or an error,
 * which tgc_backward returns (the first one; every hook is still finished). A hook lives
 * until its leaves forget it (grad_hook = NULL). */
typedef struct tgc_grad_hook {
    tgc_status (*ready)(struct tgc_grad_hook *h, tgc_tensor *leaf);
    tgc_status (*finish)(struct tgc_grad_hook *h);
    /* autograd's: set while the running backward has handed it a leaf */
    int active;
    struct tgc_grad_hook *next_active;
} tgc_grad_hook;

/* Makes sure leaf has a .grad (zeros of its shape, dtype and device, owned by it): what a
 * compiled step that writes it in place needs before it runs. TGC_ERR_OOM. */
tgc_status tgc_autograd_ensure_grad(tgc_tensor *leaf);

/* g summed over the dims where `like` was broadcast (leading extra dims, and dims where like
 * has size 1 and g does not), reshaped to like's shape and cast to like's dtype. Symbolic
 * dims stay symbolic. NULL g: NULL (error kept). */
tgc_tensor *tgc_grad_sum_to(tgc_tensor *g, const tgc_tensor *like);
/* 1 when dim d of t has size 1 (statically: while tracing a dim of size 1 is always a
 * constant), without specializing anything. */
int tgc_grad_dim_is_one(const tgc_tensor *t, int d);

#endif
