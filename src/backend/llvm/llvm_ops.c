/* Native kernels for the LLVM backend's OPAQUE nodes (see llvm_ops.h). */
#include "backend/llvm/llvm_conv_grad.h"
#include "backend/llvm/llvm_ops.h"
#include "backend/plan.h"
#include <stdlib.h>

#include "runtime/conv_grad.h"
#include "runtime/pool_grad.h"
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
    case TGC_OP_MAX_POOL2D_GRAD:
    case TGC_OP_AVG_POOL2D_GRAD:
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD: return nd->out.dtype == TGC_F32 && nd->out.ndim >= 2;
    case TGC_OP_EMBEDDING_GRAD: return nd->out.dtype == TGC_F32 && nd->out.ndim == 2;
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
    const tgc_conv2d_attrs *v = &a->conv2d; /* both grads' layouts begin with conv2d's */
    *p = (tgc_conv_params){x[0],     x[1],     x[2],        x[3],        w[0],
                           w[2],     w[3],     v->stride_h, v->stride_w, v->pad_h,
                           v->pad_w, v->dil_h, v->dil_w,    v->groups};
    if (p->n == 0 || tgc_conv_params_check(p) != TGC_OK || w[1] * p->groups != p->c ||
        dy[0] != p->n || dy[1] != p->o || tgc_conv_out_h(p) != dy[2] ||
        tgc_conv_out_w(p) != dy[3]) {
        tgc_clear_error();
        return 0;
    }
    return 1;
}

/* Ends a helper's own scope (which holds dense copies of its inputs), keeping its result r
 * in the caller's scope when st is TGC_OK. */
static tgc_status keep_result(tgc_tensor *r, tgc_status st, tgc_tensor **out)
{
    if (st == TGC_OK)
        st = tgc_scope_keep(r);
    tgc_scope_pop();
    if (st == TGC_OK)
        *out = r;
    return st;
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
    return keep_result(r, st, out);
}

static int64_t numel_of(const tgc_tensor *t)
{
    return tgc_shape_numel(t->shape, t->ndim);
}

static tgc_status run_pool_grad(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                                tgc_tensor **out, int n_threads)
{
    int r = nd->out.ndim, max = nd->op == TGC_OP_MAX_POOL2D_GRAD;
    const tgc_tensor *dy = ins[max ? 1 : 0], *x = max ? ins[0] : NULL;
    /* MAX_POOL2D_GRAD's layout is pool, AVG_POOL2D_GRAD's pool_grad begins with it */
    const tgc_pool_attrs *at = &nd->attrs.pool;
    if (dy->dtype != TGC_F32 || dy->ndim != r || (x && (x->dtype != TGC_F32 || x->ndim != r)))
        return unsupported();
    tgc_pool_grad_args a = {
        .kind = max                                ? TGC_POOL_GRAD_MAX
                : nd->op == TGC_OP_AVG_POOL2D_GRAD ? TGC_POOL_GRAD_AVG
                                                   : TGC_POOL_GRAD_ADAPTIVE,
        .h = shape[r - 2],
        .w = shape[r - 1],
        .oh = dy->shape[r - 2],
        .ow = dy->shape[r - 1],
    };
    if (a.kind != TGC_POOL_GRAD_ADAPTIVE) {
        a.kh = at->kh, a.kw = at->kw, a.sh = at->sh, a.sw = at->sw, a.ph = at->ph, a.pw = at->pw;
        a.exclude_pad = a.kind == TGC_POOL_GRAD_AVG && nd->attrs.pool_grad.exclude_padding != 0;
    }
    int64_t n_out = tgc_shape_numel(shape, r);
    if (a.h < 1 || a.w < 1 || n_out == 0)
        return unsupported();
    a.planes = n_out / (a.h * a.w);
    if (numel_of(dy) != a.planes * a.oh * a.ow || (x && numel_of(x) != n_out))
        return unsupported();
    tgc_scope_push();
    a.dy = dense_f32(dy);
    a.x = x && a.dy ? dense_f32(x) : NULL;
    tgc_tensor *res = a.dy && (!x || a.x) ? tgc_tensor_new(shape, r, TGC_F32, tgc_cpu()) : NULL;
    tgc_status st = res ? TGC_OK : tgc_last_status();
    if (st == TGC_OK) {
        a.dx = tgc_device_ptr(res);
        st = tgc_pool2d_grad_run(&a, n_threads);
    }
    return keep_result(res, st, out);
}

/* The indices as int64 in row-major order, each in [0, v); NULL (no error kept) when the
 * dtype is not an integer one handled here or an index is out of range: interp then runs
 * the node and reports it. */
static int64_t *embedding_ids(const tgc_tensor *idx, int64_t v)
{
    int64_t n = numel_of(idx);
    int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids || (idx->dtype != TGC_I64 && idx->dtype != TGC_I32)) {
        free(ids);
        return NULL;
    }
    const void *base = tgc_host_data(idx);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = tgc_tensor_elem_offset(idx, i);
        ids[i] =
            idx->dtype == TGC_I64 ? ((const int64_t *)base)[off] : ((const int32_t *)base)[off];
        if (ids[i] < 0 || ids[i] >= v) {
            free(ids);
            return NULL;
        }
    }
    return ids;
}

static tgc_status run_embedding_grad(tgc_tensor *const *ins, const int64_t *shape, tgc_tensor **out,
                                     int n_threads)
{
    const tgc_tensor *dy = ins[0], *idx = ins[1];
    int64_t v = shape[0], d = shape[1], n = numel_of(idx);
    if (dy->dtype != TGC_F32 || numel_of(dy) != n * d || v * d == 0)
        return unsupported();
    int64_t *ids = embedding_ids(idx, v);
    if (!ids)
        return unsupported();
    tgc_scope_push();
    const float *g = dense_f32(dy);
    tgc_tensor *res = g ? tgc_tensor_new(shape, 2, TGC_F32, tgc_cpu()) : NULL;
    tgc_status st = res ? TGC_OK : tgc_last_status();
    if (st == TGC_OK)
        st = tgc_embedding_grad_run(g, ids, n, v, d, tgc_device_ptr(res), n_threads);
    free(ids);
    return keep_result(res, st, out);
}

tgc_status tgc_llvm_run_node(const tgc_node *nd, tgc_tensor *const *ins, const int64_t *shape,
                             tgc_tensor **out, const tgc_launch_env *env)
{
    *out = NULL;
    if (!tgc_llvm_node_supported(nd))
        return unsupported();
    switch (nd->op) {
    case TGC_OP_CONV2D_GRAD_INPUT:
    case TGC_OP_CONV2D_GRAD_WEIGHT: return run_conv_grad(nd, ins, shape, out, env->n_threads);
    case TGC_OP_EMBEDDING_GRAD: return run_embedding_grad(ins, shape, out, env->n_threads);
    default: return run_pool_grad(nd, ins, shape, out, env->n_threads);
    }
}
