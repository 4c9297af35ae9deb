/* Native kernels for the LLVM backend's OPAQUE nodes (see llvm_ops.h). */
#include "backend/llvm/llvm_conv_grad.h"
#include "backend/llvm/llvm_ops.h"
#include "backend/plan.h"
#include "runtime/conv_grad.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"

static tgc_status unsupported(void)
{
    tgc_clear_error();
    return TGC_ERR_UNSUPPORTED;
}

int tgc_llvm_node_supported(const tgc_node *nd)
{
    switch (nd->op) {
    case TGC_OP_CONV2D_GRAD_INPUT:
    case TGC_OP_CONV2D_GRAD_WEIGHT: return nd->out.dtype == TGC_F32 && nd->out.ndim == 4;
    default: return 0;
    }
}

/* t itself when dense, else a dense copy in the current scope (NULL on failure). */
static const float *dense_f32(const tgc_tensor *t)
{
    if (!tgc_tensor_is_contiguous(t)) {
        t = tgc_tensor_copy_to("llvm conv backward", t, tgc_cpu());
        if (!t)
            return NULL;
    }
    return tgc_device_ptr(t);
}

/* The forward conv's params from x's and w's shapes and the node's window attributes;
 * 0 when they do not describe a valid conv producing dy's shape. */
static int conv_params(const int64_t *x, const int64_t *w, const int64_t *dy, const tgc_attrs *a,
                       tgc_conv_params *p)
{
    *p = (tgc_conv_params){x[0],    x[1],    x[2],    x[3],    w[0],    w[2],    w[3],
                           a->i[0], a->i[1], a->i[2], a->i[3], a->i[4], a->i[5], a->i[6]};
    if (p->n == 0 || tgc_conv_params_check(p) != TGC_OK || w[1] * p->groups != p->c ||
        dy[0] != p->n || dy[1] != p->o || tgc_conv_out_h(p) != dy[2] ||
        tgc_conv_out_w(p) != dy[3]) {
        tgc_clear_error();
        return 0;
    }
    return 1;
}

static tgc_status run_conv_grad(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                tgc_tensor **out, int n_threads)
{
    const tgc_tensor *a = ins[0], *b = ins[1];
    if (a->dtype != TGC_F32 || b->dtype != TGC_F32 || a->ndim != 4 || b->ndim != 4)
        return unsupported();
    int grad_in = nd->op == TGC_OP_CONV2D_GRAD_INPUT;
    /* grad input: (dy, w) -> x's shape; grad weight: (x, dy) -> w's shape */
    tgc_conv_params p;
    if (!(grad_in ? conv_params(shape, b->shape, a->shape, &nd->attrs, &p)
                  : conv_params(a->shape, shape, b->shape, &nd->attrs, &p)))
        return unsupported(); /* empty or inconsistent: interp's kernel decides */
    const tgc_gemm_kernel *gemm, *conv;
    tgc_status st = tgc_llvm_conv_grad_kernels(&gemm, &conv);
    if (st != TGC_OK)
        return unsupported();
    tgc_scope_push();
    const float *pa = dense_f32(a), *pb = pa ? dense_f32(b) : NULL;
    tgc_tensor *r = pb ? tgc_tensor_new(shape, 4, TGC_F32, tgc_cpu()) : NULL;
    st = r ? TGC_OK : tgc_last_status();
    if (st == TGC_OK)
        st = grad_in ? tgc_conv_grad_input_run(gemm, conv, &p, pa, pb, tgc_device_ptr(r), n_threads)
                     : tgc_conv_grad_weight_run(gemm, &p, pa, pb, tgc_device_ptr(r), n_threads);
    if (st == TGC_OK) /* the result survives the pop; dense copies of inputs do not */
        st = tgc_scope_keep(r);
    tgc_scope_pop();
    if (st != TGC_OK)
        return st;
    *out = r;
    return TGC_OK;
}

tgc_status tgc_llvm_run_node(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                             tgc_tensor **out, const tgc_launch_env *env)
{
    *out = NULL;
    if (!tgc_llvm_node_supported(nd))
        return unsupported();
    return run_conv_grad(nd, ins, shape, out, env->n_threads);
}
