/* Helpers for the fusion and lowering tests (include after <cmocka.h>): graphs built node
 * by node with shape inference, and the compiled backends' fusion classifier for an
 * LLVM-like target. */
#ifndef TGC_TESTS_UNIT_GRAPH_BUILD_UTIL_H
#define TGC_TESTS_UNIT_GRAPH_BUILD_UTIL_H

#include <string.h>

#include "backend/backend.h"
#include "backend/classify.h"
#include "ir/shape_infer.h"
#include "ir/view_access.h"
#include "kir/lower.h"
#include "passes/fuse.h"

/* An input bound as kind (TGC_BIND_ARG, TGC_BIND_PARAM, ...) at index idx, of this dtype and
 * shape. */
static inline int32_t gb_input_bound(tgc_graph *g, tgc_bind_kind kind, int idx, tgc_dtype dt,
                                     int ndim, const tgc_sdim *shape)
{
    tgc_attrs a = {.ni = 2};
    a.i[0] = kind;
    a.i[1] = idx;
    tgc_vinfo v = {.dtype = dt, .ndim = ndim};
    for (int d = 0; d < ndim; d++)
        v.shape[d] = shape[d];
    int32_t id = tgc_graph_add(g, TGC_OP_INPUT, NULL, 0, &a, &v);
    assert_true(id >= 0);
    return id;
}

/* An argument input of this dtype and shape (bound to the next argument index). */
static inline int32_t gb_input(tgc_graph *g, tgc_dtype dt, int ndim, const tgc_sdim *shape)
{
    int n_in = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n_in += g->nodes[i].op == TGC_OP_INPUT;
    return gb_input_bound(g, TGC_BIND_ARG, n_in, dt, ndim, shape);
}

/* A node whose type comes from shape inference. */
static inline int32_t gb_op(tgc_graph *g, tgc_op op, const int32_t *in, int n_in,
                            const tgc_attrs *a)
{
    tgc_vinfo iv[4];
    tgc_attrs none = {0};
    for (int k = 0; k < n_in; k++)
        iv[k] = g->nodes[in[k]].out;
    tgc_vinfo out;
    if (tgc_infer(op, iv, n_in, a ? a : &none, g->syms, &out) != TGC_OK)
        fail_msg("%s: %s", tgc_op_name(op), tgc_last_error());
    int32_t id = tgc_graph_add(g, op, in, n_in, a ? a : &none, &out);
    assert_true(id >= 0);
    return id;
}

static inline int32_t gb_un(tgc_graph *g, tgc_op op, int32_t x)
{
    return gb_op(g, op, &x, 1, NULL);
}

static inline int32_t gb_bin(tgc_graph *g, tgc_op op, int32_t x, int32_t y)
{
    int32_t in[2] = {x, y};
    return gb_op(g, op, in, 2, NULL);
}

/* A one-input op with integer attributes i[0..n). */
static inline int32_t gb_ints(tgc_graph *g, tgc_op op, int32_t x, const int64_t *ints, int n)
{
    tgc_attrs a = {.ni = n};
    for (int k = 0; k < n; k++)
        a.i[k] = ints[k];
    return gb_op(g, op, &x, 1, &a);
}

static inline int32_t gb_scalar(tgc_graph *g, tgc_op op, int32_t x, double s)
{
    tgc_attrs a = {.nf = 1};
    a.f[0] = s;
    return gb_op(g, op, &x, 1, &a);
}

/* sum / mean / max over a dim mask. */
static inline int32_t gb_reduce(tgc_graph *g, tgc_op op, int32_t x, uint32_t mask, int keep)
{
    int64_t ints[2] = {mask, keep};
    return gb_ints(g, op, x, ints, 2);
}

static inline void gb_outputs(tgc_graph *g, const int32_t *ids, int n)
{
    assert_int_equal(tgc_graph_set_outputs(g, ids, n), TGC_OK);
    if (tgc_graph_verify(g) != TGC_OK)
        fail_msg("%s", tgc_last_error());
}

/* A CPU target like the LLVM backend's on a 256-bit machine (tgc_llvm_kir_target): f32 lanes
 * 8, f64 / i64 lanes 4, at least 4, reductions at f32 width, flat domains split by 16384,
 * f32 GEMM and conv templates; kernels for every pointwise op, copies and pools of f32 / f64,
 * reductions of floats into their own dtype, no draws or positions (those run opaque). */
static inline const kir_target *gb_target(void)
{
    static kir_target t;
    if (!t.name) {
        for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++)
            t.lanes[dt] = dt == TGC_F64 || dt == TGC_I32 || dt == TGC_I64 ? 4 : 8;
        t.min_lanes = 4;
        t.reduce_lanes = 8;
        t.flat_split = 16384;
        t.template_dtypes[KIR_TPL_GEMM] = 1u << TGC_F32;
        t.template_dtypes[KIR_TPL_CONV] = 1u << TGC_F32;
        t.caps.copy_dtypes = KIR_DTYPES_F32_F64;
        t.caps.reduce_dtypes = KIR_DTYPES_FLOAT;
        t.caps.reduce_keeps_dtype = 1;
        t.caps.pool_dtypes = KIR_DTYPES_F32_F64;
        t.name = "test-cpu";
    }
    return &t;
}

/* The compiled backends' classification (backend/classify.c) for gb_target: pointwise ops
 * and f32 / f64 contiguous copies are POINTWISE, sum / mean / max of floats and a 1x1
 * adaptive average pool are REDUCE, max / avg pools of f32 / f64 are WINDOW, matmul / linear
 * / conv2d the template accepts are TEMPLATE, anything else runs opaque. */
static inline tgc_fuse_class gb_classify(const tgc_graph *g, int32_t i)
{
    return tgc_backend_classify(g, i, gb_target());
}

static const tgc_fuse_hooks gb_hooks = {gb_classify, kir_epilogue_operand_ok, NULL};

static inline void gb_fuse(const tgc_graph *g, tgc_fusion *f)
{
    if (tgc_pass_fuse(g, &gb_hooks, f) != TGC_OK)
        fail_msg("fuse: %s", tgc_last_error());
}

/* The nth node of g (0: the first) whose op is op. */
static inline int32_t gb_find_op(const tgc_graph *g, tgc_op op, int nth)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op && nth-- == 0)
            return i;
    fail_msg("no %s #%d in the graph", tgc_op_name(op), nth);
    return -1;
}

/* Runs g on interp with bindings a; its outputs in out. */
static inline void gb_run_interp(const tgc_graph *g, const tgc_exec_args *a, tgc_tensor **out)
{
    const tgc_backend *b = tgc_backend_interp();
    void *art = NULL;
    tgc_config cfg = tgc_config_default();
    assert_int_equal(tgc_backend_compile(b, g, &cfg, tgc_cpu(), "test", &art), TGC_OK);
    tgc_status st = tgc_backend_run(b, art, g, a, out);
    tgc_backend_release(b, art);
    if (st != TGC_OK)
        fail_msg("run failed: %s", tgc_last_error());
}

#endif
