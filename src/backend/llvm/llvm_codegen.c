/* Kernel IR -> LLVM IR (see llvm_codegen.h).
 *
 * Loop counters and accumulators live in allocas; O3's SROA turns them into registers.
 * Values are emitted on demand per loop body and memoized there, so a value used by
 * several stores or reductions of one phase is computed once, and a value used in two
 * phases is recomputed from the (cached) row instead of being kept in memory. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "backend/llvm/llvm_math.h"
#include "ir/formula.h"
#include "ir/shape_infer.h"
#include "support/error.h"
#include "tensor/dtype.h"

#define MAX_VL 64

typedef struct cg {
    tgc_llvm_unit *u;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    const kir_kernel *k;
    const kir_args *slots;
    int vl;
    LLVMValueRef *buf_ptr;
    LLVMValueRef *slot_val;
    LLVMValueRef var[KIR_MAX_DIMS];
    int vec_var;       /* the var whose value is a vector base (-1: scalar code) */
    LLVMValueRef mask; /* current lane mask, or NULL */
    LLVMValueRef *memo;
    LLVMValueRef *acc_val; /* finished accumulators (scalar, accumulator type) */
    LLVMValueRef gemm_acc; /* template: the accumulator vector */
    LLVMValueRef ep_args;
    int failed;
} cg;

/* ---- dtypes (facts from the dtype table, tensor/dtype.h) ---- */

/* The scalar type values of dt are computed in. */
static LLVMTypeRef compute_type(const tgc_llvm_unit *u, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return u->t_f64;
    case TGC_F32:
    case TGC_F16:
    case TGC_BF16: return u->t_f32;
    case TGC_BOOL: return u->t_i1;
    default: return u->t_i64;
    }
}

/* bf16 is kept in memory as raw 16 bits: LLVM lowers fptrunc to bfloat to a libgcc call
 * (__truncsfbf2) that CPUs without AVX512-BF16 and libgcc 12 do not have, so the
 * conversions are integer arithmetic (round to nearest even, NaN kept quiet). */
static LLVMTypeRef mem_type(const tgc_llvm_unit *u, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return u->t_f64;
    case TGC_F32: return u->t_f32;
    case TGC_F16: return u->t_f16;
    case TGC_BF16: return u->t_i16;
    case TGC_BOOL: return u->t_i8;
    case TGC_I32: return u->t_i32;
    default: return u->t_i64;
    }
}

/* Element type t in the shape (scalar or vector) of value v. */
static LLVMTypeRef like(LLVMValueRef v, LLVMTypeRef t)
{
    LLVMTypeRef vt = LLVMTypeOf(v);
    return LLVMGetTypeKind(vt) == LLVMVectorTypeKind ? LLVMVectorType(t, LLVMGetVectorSize(vt)) : t;
}

/* What the loop codegen emits itself as a KV_OP value: CG_FLOAT (float_op computes it on
 * floats), CG_INT (int_op on integers), CG_ANY (emit_op handles it for every dtype:
 * compares, where, casts, contiguous copies). The other ops never reach it as a KV_OP of
 * their own: a primitive math op (tgc_op_math_fn) is rendered from its libm name, on floats;
 * a composite op (tgc_op_has_formula) arrives as its formula's primitives, expanded at
 * lowering; everything else is lowered otherwise (reductions, views, windows, draws) or runs
 * elsewhere (templates, OPAQUE steps). So a new math primitive or composite op needs no
 * entry here. */
enum { CG_FLOAT = 1, CG_INT = 2, CG_ANY = 4 };
static const unsigned char cg_ops[TGC_OP_COUNT] = {
    [TGC_OP_ADD] = CG_FLOAT | CG_INT,
    [TGC_OP_SUB] = CG_FLOAT | CG_INT,
    [TGC_OP_MUL] = CG_FLOAT | CG_INT,
    [TGC_OP_DIV] = CG_FLOAT,
    [TGC_OP_POW] = CG_FLOAT,
    [TGC_OP_MAXIMUM] = CG_FLOAT | CG_INT,
    [TGC_OP_MINIMUM] = CG_FLOAT | CG_INT,
    [TGC_OP_EQ] = CG_ANY,
    [TGC_OP_NE] = CG_ANY,
    [TGC_OP_LT] = CG_ANY,
    [TGC_OP_LE] = CG_ANY,
    [TGC_OP_GT] = CG_ANY,
    [TGC_OP_GE] = CG_ANY,
    [TGC_OP_WHERE] = CG_ANY,
    [TGC_OP_ADD_SCALAR] = CG_FLOAT,
    [TGC_OP_SUB_SCALAR] = CG_FLOAT,
    [TGC_OP_MUL_SCALAR] = CG_FLOAT,
    [TGC_OP_DIV_SCALAR] = CG_FLOAT,
    [TGC_OP_POW_SCALAR] = CG_FLOAT,
    [TGC_OP_CLAMP] = CG_FLOAT,
    [TGC_OP_NEG] = CG_FLOAT | CG_INT,
    [TGC_OP_ABS] = CG_FLOAT | CG_INT,
    [TGC_OP_RELU] = CG_FLOAT | CG_INT,
    [TGC_OP_CAST] = CG_ANY,
    [TGC_OP_CONTIGUOUS] = CG_ANY,
};

static unsigned cg_how(tgc_op op)
{
    if ((unsigned)op >= TGC_OP_COUNT)
        return 0;
    return tgc_op_math_fn(op) ? CG_FLOAT : cg_ops[op];
}

static int primitive_supported(void *ctx, tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in)
{
    (void)ctx;
    for (int k = 0; k < n_in; k++)
        if (!tgc_dtype_is_float(in[k]) && !tgc_dtype_is_int(in[k]) && in[k] != TGC_BOOL)
            return 0;
    unsigned how = cg_how(op);
    if (tgc_dtype_is_float(out))
        return (how & (CG_FLOAT | CG_ANY)) != 0;
    if (how & CG_ANY)
        return out == TGC_BOOL || tgc_dtype_is_int(out);
    return tgc_dtype_is_int(out) && (how & CG_INT);
}

int tgc_llvm_pointwise_supported(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in)
{
    if (tgc_op_has_formula(op))
        return tgc_op_formula_supported(op, out, in, n_in, primitive_supported, NULL);
    return primitive_supported(NULL, op, out, in, n_in);
}

static LLVMValueRef i64c(const cg *c, int64_t v)
{
    return LLVMConstInt(c->u->t_i64, (unsigned long long)v, 1);
}

static LLVMValueRef dim_val(const cg *c, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d))
        return i64c(c, d);
    return c->slot_val[kir_args_slot(c->slots, d)];
}

/* Loads bufs[] and sizes[] at the current position (the entry block). */
static void load_args(cg *c, LLVMValueRef bufs, LLVMValueRef sizes)
{
    tgc_llvm_unit *u = c->u;
    for (int i = 0; i < c->k->n_bufs; i++) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, u->t_ptr, bufs, (LLVMValueRef[]){i64c(c, i)}, 1, "");
        c->buf_ptr[i] = LLVMBuildLoad2(c->b, u->t_ptr, p, "buf");
    }
    /* the size slots, then each draw's seed and base (kir/abi.h) */
    for (int j = 0; j < kir_args_words(c->slots); j++) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, u->t_i64, sizes, (LLVMValueRef[]){i64c(c, j)}, 1, "");
        c->slot_val[j] = LLVMBuildLoad2(c->b, u->t_i64, p, j < c->slots->n ? "size" : "rng");
    }
}

/* ---- conversions ---- */

static LLVMValueRef splat_val(cg *c, LLVMValueRef s)
{
    if (c->vec_var < 0 || LLVMGetTypeKind(LLVMTypeOf(s)) == LLVMVectorTypeKind)
        return s;
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), (unsigned)c->vl);
    LLVMValueRef undef = LLVMGetUndef(vt);
    LLVMValueRef ins = LLVMBuildInsertElement(c->b, undef, s, LLVMConstInt(c->u->t_i32, 0, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(c->u->t_i32, (unsigned)c->vl));
    return LLVMBuildShuffleVector(c->b, ins, undef, zeros, "splat");
}

static LLVMValueRef cst(cg *c, tgc_dtype dt, double v)
{
    LLVMTypeRef t = compute_type(c->u, dt);
    LLVMValueRef s;
    if (tgc_dtype_is_float(dt))
        s = LLVMConstReal(t, v);
    else if (dt == TGC_BOOL)
        s = LLVMConstInt(t, v != 0, 0);
    else
        s = LLVMConstInt(t, (unsigned long long)(int64_t)v, 1);
    return splat_val(c, s);
}

static LLVMValueRef ivec(cg *c, LLVMValueRef like_v, LLVMTypeRef t, long long k)
{
    LLVMValueRef s = LLVMConstInt(t, (unsigned long long)k, 1);
    return LLVMGetTypeKind(LLVMTypeOf(like_v)) == LLVMVectorTypeKind ? splat_val(c, s) : s;
}

/* float -> the 16 bits of the nearest bf16 (ties to even; NaN stays a quiet NaN) */
static LLVMValueRef f32_to_bf16_bits(cg *c, LLVMValueRef f)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef it = like(f, u->t_i32);
    LLVMValueRef b = LLVMBuildBitCast(c->b, f, it, "");
    LLVMValueRef lsb = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, b, ivec(c, b, u->t_i32, 16), ""),
                                    ivec(c, b, u->t_i32, 1), "");
    LLVMValueRef r =
        LLVMBuildAdd(c->b, b, LLVMBuildAdd(c->b, lsb, ivec(c, b, u->t_i32, 0x7fff), ""), "");
    LLVMValueRef q = LLVMBuildOr(c->b, b, ivec(c, b, u->t_i32, 0x400000), "");
    r = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, f, f, ""), q, r, "");
    return LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, r, ivec(c, b, u->t_i32, 16), ""),
                          like(f, u->t_i16), "");
}

static LLVMValueRef bf16_bits_to_f32(cg *c, LLVMValueRef h)
{
    tgc_llvm_unit *u = c->u;
    LLVMValueRef w = LLVMBuildZExt(c->b, h, like(h, u->t_i32), "");
    w = LLVMBuildShl(c->b, w, ivec(c, w, u->t_i32, 16), "");
    return LLVMBuildBitCast(c->b, w, like(h, u->t_f32), "");
}

/* Converts a compute value of dtype `from` to the compute type of `to`, rounding to `to`'s
 * precision (a cast to f16 rounds to half even though f16 computes in float). */
static LLVMValueRef convert(cg *c, LLVMValueRef v, tgc_dtype from, tgc_dtype to)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef tt = like(v, compute_type(u, to));
    if (from == to)
        return v;
    if (tgc_dtype_is_float(from) && tgc_dtype_is_float(to)) {
        LLVMValueRef r = compute_type(u, from) == compute_type(u, to)
                             ? v
                             : (to == TGC_F64 ? LLVMBuildFPExt(c->b, v, tt, "")
                                              : LLVMBuildFPTrunc(c->b, v, tt, ""));
        if (to == TGC_F16) {
            LLVMTypeRef ht = like(v, u->t_f16);
            r = LLVMBuildFPExt(c->b, LLVMBuildFPTrunc(c->b, r, ht, ""), tt, "");
        } else if (to == TGC_BF16) {
            r = bf16_bits_to_f32(c, f32_to_bf16_bits(c, r));
        }
        return r;
    }
    if (to == TGC_BOOL) {
        if (tgc_dtype_is_float(from))
            return LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    if (tgc_dtype_is_float(to)) {
        LLVMValueRef r =
            from == TGC_BOOL ? LLVMBuildUIToFP(c->b, v, tt, "") : LLVMBuildSIToFP(c->b, v, tt, "");
        return (to == TGC_F16 || to == TGC_BF16) ? convert(c, r, TGC_F32, to) : r;
    }
    /* to int */
    LLVMValueRef r;
    if (from == TGC_BOOL) {
        r = LLVMBuildZExt(c->b, v, tt, "");
    } else if (tgc_dtype_is_float(from)) {
        /* saturating, to the target's own bounds (NaN gives 0), as ops.h promises */
        LLVMTypeRef it = like(v, to == TGC_I32 ? u->t_i32 : u->t_i64);
        LLVMTypeRef tys[2] = {it, LLVMTypeOf(v)}, fty;
        LLVMValueRef fn = tgc_llvm_intrinsic(u, "llvm.fptosi.sat", tys, 2, &fty);
        r = LLVMBuildCall2(c->b, fty, fn, &v, 1, "");
        return to == TGC_I32 ? LLVMBuildSExt(c->b, r, tt, "") : r;
    } else {
        r = v;
    }
    if (to == TGC_I32) /* integer to narrower integer wraps */
        r = LLVMBuildSExt(c->b, LLVMBuildTrunc(c->b, r, like(v, u->t_i32), ""), tt, "");
    return r;
}

static LLVMValueRef from_mem(cg *c, LLVMValueRef v, tgc_dtype dt)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef ct = like(v, compute_type(u, dt));
    switch (dt) {
    case TGC_F16: return LLVMBuildFPExt(c->b, v, ct, "");
    case TGC_BF16: return bf16_bits_to_f32(c, v);
    case TGC_BOOL: return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    case TGC_I32: return LLVMBuildSExt(c->b, v, ct, "");
    default: return v;
    }
}

static LLVMValueRef to_mem(cg *c, LLVMValueRef v, tgc_dtype dt)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef mt = like(v, mem_type(u, dt));
    switch (dt) {
    case TGC_F16: return LLVMBuildFPTrunc(c->b, v, mt, "");
    case TGC_BF16: return f32_to_bf16_bits(c, v);
    case TGC_BOOL: return LLVMBuildZExt(c->b, v, mt, "");
    case TGC_I32: return LLVMBuildTrunc(c->b, v, mt, "");
    default: return v;
    }
}

/* ---- memory ---- */

static LLVMValueRef iota(cg *c)
{
    LLVMValueRef v[MAX_VL];
    for (int i = 0; i < c->vl; i++)
        v[i] = i64c(c, i);
    return LLVMConstVector(v, (unsigned)c->vl);
}

/* Scalar element index of an access with the vector var at its base value. */
static LLVMValueRef access_index(cg *c, const kir_access *a)
{
    LLVMValueRef idx = dim_val(c, a->off);
    int nd = kir_domain_dims(c->k);
    for (int d = 0; d < nd; d++) {
        if (TGC_SDIM_IS_CONST(a->stride[d]) && a->stride[d] == 0)
            continue;
        idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, dim_val(c, a->stride[d]), c->var[d], ""),
                           "");
    }
    return idx;
}

static LLVMValueRef masked_intrinsic(cg *c, const char *name, LLVMTypeRef *tys, int n_tys,
                                     LLVMValueRef *args, int n_args)
{
    LLVMTypeRef fty;
    LLVMValueRef fn = tgc_llvm_intrinsic(c->u, name, tys, n_tys, &fty);
    return LLVMBuildCall2(c->b, fty, fn, args, (unsigned)n_args, "");
}

static LLVMValueRef all_true(cg *c)
{
    return LLVMConstAllOnes(LLVMVectorType(c->u->t_i1, (unsigned)c->vl));
}

/* A masked load of lanes base[idx + stride*i] for stride 1 or 2, without a gather: stride 2
 * (a stride-2 pool window, a strided slice) loads 2 VL contiguous elements, only the even
 * ones enabled, and keeps the even lanes. Disabled lanes read as fill. */
static LLVMValueRef strided_masked_load(cg *c, LLVMTypeRef mt, unsigned align, LLVMValueRef base,
                                        LLVMValueRef idx, int stride, LLVMValueRef mask,
                                        LLVMValueRef fill)
{
    tgc_llvm_unit *u = c->u;
    int n = c->vl * stride;
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)n);
    LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &idx, 1, "");
    LLVMValueRef m = mask, fills[2 * MAX_VL], sel[2 * MAX_VL];
    if (stride == 2) {
        for (int i = 0; i < n; i++)
            sel[i] = LLVMConstInt(u->t_i32, (unsigned)(i % 2 ? c->vl : i / 2), 0);
        LLVMValueRef off = LLVMConstNull(LLVMVectorType(u->t_i1, (unsigned)c->vl));
        m = LLVMBuildShuffleVector(c->b, mask, off, LLVMConstVector(sel, (unsigned)n), "");
    }
    for (int i = 0; i < n; i++)
        fills[i] = fill;
    LLVMTypeRef tys[2] = {vt, u->t_ptr};
    LLVMValueRef args[4] = {p, LLVMConstInt(u->t_i32, align, 0), m,
                            LLVMConstVector(fills, (unsigned)n)};
    LLVMValueRef r = masked_intrinsic(c, "llvm.masked.load", tys, 2, args, 4);
    if (stride == 1)
        return r;
    for (int i = 0; i < c->vl; i++)
        sel[i] = LLVMConstInt(u->t_i32, (unsigned)(2 * i), 0);
    return LLVMBuildShuffleVector(c->b, r, LLVMGetUndef(vt), LLVMConstVector(sel, (unsigned)c->vl),
                                  "");
}

/* The per-lane indices idx + stride * lane of an access whose vector-axis stride is vs. */
static LLVMValueRef lane_index(cg *c, LLVMValueRef idx, tgc_sdim vs)
{
    LLVMValueRef v = splat_val(c, idx);
    if (TGC_SDIM_IS_CONST(vs) && vs == 0)
        return v;
    return LLVMBuildAdd(c->b, v, LLVMBuildMul(c->b, splat_val(c, dim_val(c, vs)), iota(c), ""), "");
}

/* Lanes (or the scalar) where every guard of ld holds; NULL when ld has none. */
static LLVMValueRef guard_mask(cg *c, const kir_load *ld)
{
    LLVMValueRef m = NULL;
    for (int g = 0; g < ld->n_guards; g++) {
        const kir_access *ga = &ld->guard[g];
        LLVMValueRef e = access_index(c, ga);
        tgc_sdim vs = c->vec_var >= 0 ? ga->stride[c->vec_var] : 0;
        if (c->vec_var >= 0)
            e = lane_index(c, e, vs);
        LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(e));
        LLVMValueRef bound =
            c->vec_var >= 0 ? splat_val(c, dim_val(c, ld->bound[g])) : dim_val(c, ld->bound[g]);
        LLVMValueRef in = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, e, zero, ""),
                                       LLVMBuildICmp(c->b, LLVMIntSLT, e, bound, ""), "");
        m = m ? LLVMBuildAnd(c->b, m, in, "") : in;
    }
    return m;
}

static LLVMValueRef emit_guarded_load(cg *c, const kir_load *ld, LLVMValueRef gm)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef mt = mem_type(u, ld->dtype);
    LLVMValueRef base = c->buf_ptr[ld->at.buf];
    LLVMValueRef idx = access_index(c, &ld->at);
    unsigned align = (unsigned)tgc_dtype_size(ld->dtype);
    LLVMValueRef fill = LLVMConstReal(mt, ld->fill);
    if (c->vec_var < 0) {
        /* element 0 of the buffer is always readable: load there, then select */
        LLVMValueRef safe = LLVMBuildSelect(c->b, gm, idx, i64c(c, 0), "");
        LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &safe, 1, "");
        LLVMValueRef l = LLVMBuildLoad2(c->b, mt, p, "");
        LLVMSetAlignment(l, align);
        return from_mem(c, LLVMBuildSelect(c->b, gm, l, fill, ""), ld->dtype);
    }
    tgc_sdim vs = ld->at.stride[c->vec_var];
    LLVMValueRef mask = c->mask ? LLVMBuildAnd(c->b, c->mask, gm, "") : gm;
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)c->vl);
    if (TGC_SDIM_IS_CONST(vs) && (vs == 1 || vs == 2))
        return from_mem(c, strided_masked_load(c, mt, align, base, idx, (int)vs, mask, fill),
                        ld->dtype);
    LLVMValueRef vidx = lane_index(c, idx, vs);
    LLVMValueRef ptrs = LLVMBuildGEP2(c->b, mt, base, &vidx, 1, "");
    LLVMTypeRef tys[2] = {vt, LLVMVectorType(u->t_ptr, (unsigned)c->vl)};
    LLVMValueRef fills[MAX_VL];
    for (int i = 0; i < c->vl; i++)
        fills[i] = fill;
    LLVMValueRef args[4] = {ptrs, LLVMConstInt(u->t_i32, align, 0), mask,
                            LLVMConstVector(fills, (unsigned)c->vl)};
    return from_mem(c, masked_intrinsic(c, "llvm.masked.gather", tys, 2, args, 4), ld->dtype);
}

static LLVMValueRef emit_load(cg *c, const kir_load *ld)
{
    tgc_llvm_unit *u = c->u;
    if (ld->n_guards)
        return emit_guarded_load(c, ld, guard_mask(c, ld));
    LLVMTypeRef mt = mem_type(u, ld->dtype);
    LLVMValueRef base = c->buf_ptr[ld->at.buf];
    LLVMValueRef idx = access_index(c, &ld->at);
    tgc_sdim vs = c->vec_var >= 0 ? ld->at.stride[c->vec_var] : 0;
    LLVMValueRef r;
    unsigned align = (unsigned)tgc_dtype_size(ld->dtype);
    if (c->vec_var < 0 || (TGC_SDIM_IS_CONST(vs) && vs == 0)) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &idx, 1, "");
        LLVMValueRef l = LLVMBuildLoad2(c->b, mt, p, "");
        LLVMSetAlignment(l, align);
        r = from_mem(c, l, ld->dtype);
        return splat_val(c, r);
    }
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)c->vl);
    LLVMValueRef mask = c->mask ? c->mask : all_true(c);
    if (TGC_SDIM_IS_CONST(vs) && vs == 1) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &idx, 1, "");
        if (!c->mask) {
            r = LLVMBuildLoad2(c->b, vt, p, "");
            LLVMSetAlignment(r, align);
        } else {
            LLVMTypeRef tys[2] = {vt, u->t_ptr};
            LLVMValueRef args[4] = {p, LLVMConstInt(u->t_i32, align, 0), mask, LLVMGetUndef(vt)};
            r = masked_intrinsic(c, "llvm.masked.load", tys, 2, args, 4);
        }
    } else if (TGC_SDIM_IS_CONST(vs) && vs == 2) {
        r = strided_masked_load(c, mt, align, base, idx, 2, mask, LLVMGetUndef(mt));
    } else {
        LLVMValueRef vidx = lane_index(c, idx, vs);
        LLVMValueRef ptrs = LLVMBuildGEP2(c->b, mt, base, &vidx, 1, "");
        LLVMTypeRef tys[2] = {vt, LLVMVectorType(u->t_ptr, (unsigned)c->vl)};
        LLVMValueRef args[4] = {ptrs, LLVMConstInt(u->t_i32, align, 0), mask, LLVMGetUndef(vt)};
        r = masked_intrinsic(c, "llvm.masked.gather", tys, 2, args, 4);
    }
    return from_mem(c, r, ld->dtype);
}

static void emit_store(cg *c, const kir_store *st, LLVMValueRef v)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef mt = mem_type(u, st->dtype);
    LLVMValueRef base = c->buf_ptr[st->at.buf];
    LLVMValueRef idx = access_index(c, &st->at);
    LLVMValueRef m = to_mem(c, v, st->dtype);
    unsigned align = (unsigned)tgc_dtype_size(st->dtype);
    tgc_sdim vs = c->vec_var >= 0 ? st->at.stride[c->vec_var] : 0;
    if (c->vec_var < 0) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &idx, 1, "");
        LLVMSetAlignment(LLVMBuildStore(c->b, m, p), align);
        return;
    }
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)c->vl);
    LLVMValueRef mask = c->mask ? c->mask : all_true(c);
    if (TGC_SDIM_IS_CONST(vs) && vs == 1) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, mt, base, &idx, 1, "");
        if (!c->mask) {
            LLVMSetAlignment(LLVMBuildStore(c->b, m, p), align);
        } else {
            LLVMTypeRef tys[2] = {vt, u->t_ptr};
            LLVMValueRef args[4] = {m, p, LLVMConstInt(u->t_i32, align, 0), mask};
            masked_intrinsic(c, "llvm.masked.store", tys, 2, args, 4);
        }
        return;
    }
    LLVMValueRef vidx = lane_index(c, idx, vs);
    LLVMValueRef ptrs = LLVMBuildGEP2(c->b, mt, base, &vidx, 1, "");
    LLVMTypeRef tys[2] = {vt, LLVMVectorType(u->t_ptr, (unsigned)c->vl)};
    LLVMValueRef args[4] = {m, ptrs, LLVMConstInt(u->t_i32, align, 0), mask};
    masked_intrinsic(c, "llvm.masked.scatter", tys, 2, args, 4);
}

/* ---- values ---- */

static LLVMValueRef emit_val(cg *c, int32_t id);

static LLVMValueRef fsel(cg *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t,
                         LLVMValueRef f)
{
    return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, p, a, b, ""), t, f, "");
}

static LLVMValueRef isnan_v(cg *c, LLVMValueRef x)
{
    return LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, "");
}

static LLVMValueRef pow_scalar(cg *c, LLVMValueRef x, double e, tgc_dtype dt)
{
    if (e == 1.0)
        return x;
    if (e == 2.0)
        return LLVMBuildFMul(c->b, x, x, "");
    if (e == 3.0)
        return LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, x, x, ""), x, "");
    if (e == 0.5) {
        /* pow(x, 0.5), not sqrt: pow(-0, .5) = +0 and pow(-inf, .5) = +inf */
        LLVMValueRef r =
            tgc_lm_intrinsic1(c->u, "llvm.sqrt", LLVMBuildFAdd(c->b, x, cst(c, dt, 0.0), ""));
        return fsel(c, LLVMRealOEQ, x, cst(c, dt, -INFINITY), cst(c, dt, INFINITY), r);
    }
    if (e == -1.0)
        return LLVMBuildFDiv(c->b, cst(c, dt, 1.0), x, "");
    if (e == 0.0)
        return cst(c, dt, 1.0);
    return tgc_lm_pow(c->u, x, cst(c, dt, e));
}

static LLVMValueRef float_op(cg *c, const kir_val *v, LLVMValueRef *a)
{
    tgc_llvm_unit *u = c->u;
    tgc_dtype dt = v->dtype;
    switch (v->op) {
    case TGC_OP_ADD: return LLVMBuildFAdd(c->b, a[0], a[1], "");
    case TGC_OP_SUB: return LLVMBuildFSub(c->b, a[0], a[1], "");
    case TGC_OP_MUL: return LLVMBuildFMul(c->b, a[0], a[1], "");
    case TGC_OP_DIV: return LLVMBuildFDiv(c->b, a[0], a[1], "");
    case TGC_OP_POW: return tgc_lm_pow(u, a[0], a[1]);
    case TGC_OP_MAXIMUM:
        return LLVMBuildSelect(c->b,
                               LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, a[0], a[1], ""),
                                           isnan_v(c, a[0]), ""),
                               a[0], a[1], "");
    case TGC_OP_MINIMUM:
        return LLVMBuildSelect(c->b,
                               LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, a[0], a[1], ""),
                                           isnan_v(c, a[0]), ""),
                               a[0], a[1], "");
    case TGC_OP_ADD_SCALAR: return LLVMBuildFAdd(c->b, a[0], cst(c, dt, v->f[0]), "");
    case TGC_OP_SUB_SCALAR: return LLVMBuildFSub(c->b, a[0], cst(c, dt, v->f[0]), "");
    case TGC_OP_MUL_SCALAR: return LLVMBuildFMul(c->b, a[0], cst(c, dt, v->f[0]), "");
    case TGC_OP_DIV_SCALAR: return LLVMBuildFDiv(c->b, a[0], cst(c, dt, v->f[0]), "");
    case TGC_OP_POW_SCALAR: return pow_scalar(c, a[0], v->f[0], dt);
    case TGC_OP_CLAMP: {
        if (v->f[0] != v->f[0] || v->f[1] != v->f[1])
            return cst(c, dt, v->f[0] + v->f[1]);
        LLVMValueRef lo = cst(c, dt, v->f[0]), hi = cst(c, dt, v->f[1]);
        LLVMValueRef r = fsel(c, LLVMRealOLT, a[0], lo, lo, a[0]);
        return fsel(c, LLVMRealOGT, r, hi, hi, r);
    }
    case TGC_OP_NEG: return LLVMBuildFNeg(c->b, a[0], "");
    case TGC_OP_ABS: return tgc_lm_intrinsic1(u, "llvm.fabs", a[0]);
    case TGC_OP_RELU: return fsel(c, LLVMRealOLT, a[0], cst(c, dt, 0.0), cst(c, dt, 0.0), a[0]);
    default: {
        const char *fn = tgc_op_math_fn(v->op);
        return fn ? tgc_lm_unary(u, fn, a[0]) : NULL;
    }
    }
}

static LLVMValueRef int_op(cg *c, const kir_val *v, LLVMValueRef *a)
{
    switch (v->op) {
    case TGC_OP_ADD: return LLVMBuildAdd(c->b, a[0], a[1], "");
    case TGC_OP_SUB: return LLVMBuildSub(c->b, a[0], a[1], "");
    case TGC_OP_MUL: return LLVMBuildMul(c->b, a[0], a[1], "");
    case TGC_OP_MAXIMUM:
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, a[0], a[1], ""), a[0], a[1],
                               "");
    case TGC_OP_MINIMUM:
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, a[0], a[1], ""), a[0], a[1],
                               "");
    case TGC_OP_NEG: return LLVMBuildNeg(c->b, a[0], "");
    case TGC_OP_ABS:
    case TGC_OP_RELU: {
        LLVMValueRef neg =
            LLVMBuildICmp(c->b, LLVMIntSLT, a[0], LLVMConstNull(LLVMTypeOf(a[0])), "");
        return LLVMBuildSelect(c->b, neg,
                               v->op == TGC_OP_ABS ? LLVMBuildNeg(c->b, a[0], "")
                                                   : LLVMConstNull(LLVMTypeOf(a[0])),
                               a[0], "");
    }
    default: return NULL;
    }
}

static LLVMValueRef compare_op(cg *c, tgc_op op, LLVMValueRef x, LLVMValueRef y, int is_float)
{
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    static const LLVMIntPredicate ip[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT,
                                          LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    /* the predicates follow ops.def's order of the compares */
    static_assert(TGC_OP_NE == TGC_OP_EQ + 1 && TGC_OP_LT == TGC_OP_EQ + 2 &&
                      TGC_OP_LE == TGC_OP_EQ + 3 && TGC_OP_GT == TGC_OP_EQ + 4 &&
                      TGC_OP_GE == TGC_OP_EQ + 5,
                  "compare ops out of order");
    int i = (int)(op - TGC_OP_EQ);
    return is_float ? LLVMBuildFCmp(c->b, fp[i], x, y, "") : LLVMBuildICmp(c->b, ip[i], x, y, "");
}

static tgc_dtype val_dtype(const cg *c, int32_t id)
{
    return c->k->vals[id].dtype;
}

static LLVMValueRef emit_op(cg *c, const kir_val *v)
{
    LLVMValueRef a[3];
    tgc_op_kind kind = tgc_op_info_of(v->op)->kind;
    if (kind == TGC_KIND_COMPARE) {
        tgc_dtype ct = tgc_promote(val_dtype(c, v->in[0]), val_dtype(c, v->in[1]));
        if (ct == TGC_BOOL)
            ct = TGC_I64;
        for (int k = 0; k < 2; k++)
            a[k] = convert(c, emit_val(c, v->in[k]), val_dtype(c, v->in[k]), ct);
        return compare_op(c, v->op, a[0], a[1], tgc_dtype_is_float(ct));
    }
    if (v->op == TGC_OP_WHERE) {
        LLVMValueRef cond = convert(c, emit_val(c, v->in[0]), val_dtype(c, v->in[0]), TGC_BOOL);
        a[1] = convert(c, emit_val(c, v->in[1]), val_dtype(c, v->in[1]), v->dtype);
        a[2] = convert(c, emit_val(c, v->in[2]), val_dtype(c, v->in[2]), v->dtype);
        return LLVMBuildSelect(c->b, cond, a[1], a[2], "");
    }
    if (v->op == TGC_OP_CAST || v->op == TGC_OP_CONTIGUOUS)
        return convert(c, emit_val(c, v->in[0]), val_dtype(c, v->in[0]), v->dtype);
    for (int k = 0; k < v->n_in; k++)
        a[k] = convert(c, emit_val(c, v->in[k]), val_dtype(c, v->in[k]), v->dtype);
    LLVMValueRef r = tgc_dtype_is_float(v->dtype) ? float_op(c, v, a) : int_op(c, v, a);
    if (!r) {
        c->failed = 1;
        return cst(c, v->dtype, 0);
    }
    /* f16 / bf16 round after every op, as interp does */
    if (v->dtype == TGC_F16 || v->dtype == TGC_BF16)
        r = convert(c, r, TGC_F32, v->dtype);
    return r;
}

/* ---- random numbers: Philox4x32-10 (runtime/philox.h), lane-wise integer code ---- */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* hi and lo words of a * m, a 32-bit vector (or scalar), as one 32x32->64 multiply. */
static void mulhilo(cg *c, LLVMValueRef a, uint32_t m, LLVMValueRef *hi, LLVMValueRef *lo)
{
    tgc_llvm_unit *u = c->u;
    LLVMValueRef w = LLVMBuildZExt(c->b, a, like(a, u->t_i64), "");
    LLVMValueRef p = LLVMBuildMul(c->b, w, ivec(c, w, u->t_i64, (long long)m), "");
    *lo = LLVMBuildTrunc(c->b, p, like(a, u->t_i32), "");
    *hi = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, p, ivec(c, p, u->t_i64, 32), ""),
                         like(a, u->t_i32), "");
}

/* Word 0 of Philox4x32-10 of counter {ctr lo, ctr hi, 0, 0} (ctr: i64 lanes) under key
 * {seed lo, seed hi} (seed: a scalar i64): tgc_philox_bits. The key schedule is scalar. */
static LLVMValueRef philox_bits(cg *c, LLVMValueRef ctr, LLVMValueRef seed)
{
    tgc_llvm_unit *u = c->u;
    LLVMTypeRef t32 = like(ctr, u->t_i32);
    LLVMValueRef c0 = LLVMBuildTrunc(c->b, ctr, t32, "");
    LLVMValueRef c1 =
        LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, ctr, ivec(c, ctr, u->t_i64, 32), ""), t32, "");
    LLVMValueRef c2 = LLVMConstNull(t32), c3 = LLVMConstNull(t32);
    LLVMValueRef k0 = LLVMBuildTrunc(c->b, seed, u->t_i32, "");
    LLVMValueRef k1 = LLVMBuildTrunc(
        c->b, LLVMBuildLShr(c->b, seed, LLVMConstInt(u->t_i64, 32, 0), ""), u->t_i32, "");
    int vec = LLVMGetTypeKind(LLVMTypeOf(ctr)) == LLVMVectorTypeKind;
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 = LLVMBuildAdd(c->b, k0, LLVMConstInt(u->t_i32, PHILOX_W0, 0), "");
            k1 = LLVMBuildAdd(c->b, k1, LLVMConstInt(u->t_i32, PHILOX_W1, 0), "");
        }
        LLVMValueRef hi0, lo0, hi1, lo1;
        mulhilo(c, c0, PHILOX_M0, &hi0, &lo0);
        mulhilo(c, c2, PHILOX_M1, &hi1, &lo1);
        LLVMValueRef vk0 = vec ? splat_val(c, k0) : k0, vk1 = vec ? splat_val(c, k1) : k1;
        c0 = LLVMBuildXor(c->b, LLVMBuildXor(c->b, hi1, c1, ""), vk0, "");
        c1 = lo1;
        c2 = LLVMBuildXor(c->b, LLVMBuildXor(c->b, hi0, c3, ""), vk1, "");
        c3 = lo0;
    }
    return c0;
}

/* (bits >> (32 - m)) * 2^-m as f32: exact (m <= 24). */
static LLVMValueRef bits_to_unit(cg *c, LLVMValueRef bits, int m)
{
    tgc_llvm_unit *u = c->u;
    LLVMValueRef top = LLVMBuildLShr(c->b, bits, ivec(c, bits, u->t_i32, 32 - m), "");
    LLVMValueRef f = LLVMBuildUIToFP(c->b, top, like(bits, u->t_f32), "");
    LLVMValueRef scale = LLVMConstReal(u->t_f32, ldexp(1.0, -m));
    return LLVMBuildFMul(c->b, f, splat_val(c, scale), "");
}

/* A KV_RAND value (kir.h's kir_rand_dist), the same bits as interp's kernels. */
static LLVMValueRef emit_rand(cg *c, const kir_val *v)
{
    tgc_llvm_unit *u = c->u;
    const kir_rand *rd = &c->k->rands[v->index];
    int w = kir_args_rand_word(c->slots, v->index);
    LLVMValueRef seed = c->slot_val[w], base = c->slot_val[w + 1];
    LLVMValueRef idx = access_index(c, &rd->at);
    if (c->vec_var >= 0)
        idx = lane_index(c, idx, rd->at.stride[c->vec_var]);
    LLVMValueRef ctr = LLVMBuildAdd(c->b, idx, splat_val(c, base), "ctr");
    if (v->dist != KIR_RAND_NORMAL) {
        int m = v->dist == KIR_RAND_UNIFORM24 ? 24
                : v->dtype == TGC_F16         ? 11
                : v->dtype == TGC_BF16        ? 8
                                              : 24;
        return convert(c, bits_to_unit(c, philox_bits(c, ctr, seed), m), TGC_F32, v->dtype);
    }
    /* Box-Muller in double, as tgc_philox_normal: u1 at c, u2 at c | 2^63,
     * sqrt(-2 log(1 - u1)) * cos(2 pi u2), rounded to f32 once. log and cos are the C
     * library's (LLVM calls them lane by lane), so the bits are interp's. */
    LLVMValueRef ctr2 =
        LLVMBuildOr(c->b, ctr, ivec(c, ctr, u->t_i64, (long long)(UINT64_C(1) << 63)), "");
    LLVMTypeRef dt = like(ctr, u->t_f64);
    LLVMValueRef u1 = LLVMBuildFPExt(c->b, bits_to_unit(c, philox_bits(c, ctr, seed), 24), dt, "");
    LLVMValueRef u2 = LLVMBuildFPExt(c->b, bits_to_unit(c, philox_bits(c, ctr2, seed), 24), dt, "");
    LLVMValueRef one = splat_val(c, LLVMConstReal(u->t_f64, 1.0));
    LLVMValueRef lg = tgc_lm_intrinsic1(u, "llvm.log", LLVMBuildFSub(c->b, one, u1, ""));
    LLVMValueRef rr = tgc_lm_intrinsic1(
        u, "llvm.sqrt", LLVMBuildFMul(c->b, splat_val(c, LLVMConstReal(u->t_f64, -2.0)), lg, ""));
    LLVMValueRef ang = LLVMBuildFMul(
        c->b, splat_val(c, LLVMConstReal(u->t_f64, 6.283185307179586476925286766559)), u2, "");
    LLVMValueRef z = LLVMBuildFMul(c->b, rr, tgc_lm_intrinsic1(u, "llvm.cos", ang), "");
    return convert(c, LLVMBuildFPTrunc(c->b, z, like(ctr, u->t_f32), ""), TGC_F32, v->dtype);
}

static LLVMValueRef emit_val(cg *c, int32_t id)
{
    if (c->memo[id])
        return c->memo[id];
    const kir_val *v = &c->k->vals[id];
    LLVMValueRef r = NULL;
    switch (v->kind) {
    case KV_LOAD: r = emit_load(c, &c->k->loads[v->index]); break;
    case KV_CONST: r = cst(c, v->dtype, v->cval); break;
    case KV_SIZE: r = splat_val(c, convert(c, dim_val(c, v->sdim), TGC_I64, v->dtype)); break;
    case KV_ACC:
        if (c->k->kind != KIR_LOOP) {
            r = c->gemm_acc;
        } else {
            const kir_reduce *rd = &c->k->reduces[v->index];
            tgc_dtype at =
                tgc_dtype_is_float(c->k->vals[rd->val].dtype) && rd->comb == KR_SUM
                    ? TGC_F64
                    : (tgc_dtype_is_float(c->k->vals[rd->val].dtype) ? c->k->vals[rd->val].dtype
                                                                     : TGC_I64);
            int saved = c->vec_var;
            c->vec_var = -1;
            LLVMValueRef s = convert(c, c->acc_val[v->index], at, v->dtype);
            c->vec_var = saved;
            r = splat_val(c, s);
        }
        break;
    case KV_OP: r = emit_op(c, v); break;
    case KV_RAND: r = emit_rand(c, v); break;
    case KV_INDEX: {
        const kir_access *a = &c->k->iotas[v->index];
        r = access_index(c, a);
        if (c->vec_var >= 0)
            r = lane_index(c, r, a->stride[c->vec_var]);
        break;
    }
    }
    c->memo[id] = r;
    return r;
}

/* ---- loops ---- */

typedef struct loop {
    LLVMValueRef iv_slot;
    LLVMBasicBlockRef cond, body, exit;
    LLVMValueRef step;
} loop;

static LLVMValueRef entry_alloca(cg *c, LLVMTypeRef t, const char *name)
{
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(c->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first)
        LLVMPositionBuilderBefore(c->b, first);
    else
        LLVMPositionBuilderAtEnd(c->b, entry);
    LLVMValueRef a = LLVMBuildAlloca(c->b, t, name);
    LLVMPositionBuilderAtEnd(c->b, cur);
    return a;
}

/* for (iv = start; iv < end; iv += step): leaves the builder in the body; returns iv. */
static LLVMValueRef loop_begin(cg *c, loop *l, LLVMValueRef start, LLVMValueRef end,
                               LLVMValueRef step)
{
    tgc_llvm_unit *u = c->u;
    l->iv_slot = entry_alloca(c, u->t_i64, "iv");
    l->step = step;
    LLVMBuildStore(c->b, start, l->iv_slot);
    l->cond = LLVMAppendBasicBlockInContext(u->ctx, c->fn, "loop");
    l->body = LLVMAppendBasicBlockInContext(u->ctx, c->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(u->ctx, c->fn, "done");
    LLVMBuildBr(c->b, l->cond);
    LLVMPositionBuilderAtEnd(c->b, l->cond);
    LLVMValueRef iv = LLVMBuildLoad2(c->b, u->t_i64, l->iv_slot, "i");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, iv, end, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(c->b, l->body);
    return iv;
}

static void loop_end(cg *c, loop *l)
{
    LLVMValueRef iv = LLVMBuildLoad2(c->b, c->u->t_i64, l->iv_slot, "");
    LLVMBuildStore(c->b, LLVMBuildAdd(c->b, iv, l->step, ""), l->iv_slot);
    LLVMBuildBr(c->b, l->cond);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

/* Accumulator type of a reduction, and its identity. */
static tgc_dtype acc_dtype(const kir_kernel *k, const kir_reduce *r)
{
    tgc_dtype in = k->vals[r->val].dtype;
    if (tgc_dtype_is_float(in))
        return r->comb == KR_SUM ? TGC_F64 : in;
    return TGC_I64;
}

static LLVMValueRef acc_identity(cg *c, const kir_reduce *r, tgc_dtype at)
{
    if (r->comb == KR_SUM)
        return cst(c, at, 0.0);
    if (tgc_dtype_is_float(at))
        return cst(c, at, r->comb == KR_MAX ? -INFINITY : INFINITY);
    return cst(c, at, r->comb == KR_MAX ? (double)INT64_MIN : (double)INT64_MAX);
}

static LLVMValueRef combine(cg *c, const kir_reduce *r, tgc_dtype at, LLVMValueRef acc,
                            LLVMValueRef x)
{
    if (r->comb == KR_SUM)
        return tgc_dtype_is_float(at) ? LLVMBuildFAdd(c->b, acc, x, "")
                                      : LLVMBuildAdd(c->b, acc, x, "");
    if (tgc_dtype_is_float(at)) {
        /* NaN wins, as in interp */
        LLVMValueRef take = LLVMBuildOr(
            c->b, LLVMBuildFCmp(c->b, r->comb == KR_MAX ? LLVMRealOGT : LLVMRealOLT, x, acc, ""),
            isnan_v(c, x), "");
        return LLVMBuildSelect(c->b, take, x, acc, "");
    }
    return LLVMBuildSelect(
        c->b, LLVMBuildICmp(c->b, r->comb == KR_MAX ? LLVMIntSGT : LLVMIntSLT, x, acc, ""), x, acc,
        "");
}

/* Horizontal combine of a vector accumulator into a scalar. */
static LLVMValueRef reduce_lanes(cg *c, const kir_reduce *r, tgc_dtype at, LLVMValueRef v)
{
    int saved = c->vec_var;
    c->vec_var = -1;
    LLVMValueRef s = acc_identity(c, r, at);
    for (int i = 0; i < c->vl; i++)
        s = combine(
            c, r, at, s,
            LLVMBuildExtractElement(c->b, v, LLVMConstInt(c->u->t_i32, (unsigned)i, 0), ""));
    c->vec_var = saved;
    return s;
}

/* One phase: a sweep over the inner domain of the current row. */
static void emit_phase(cg *c, int phase, LLVMValueRef inner_lo, LLVMValueRef inner_hi)
{
    const kir_kernel *k = c->k;
    tgc_llvm_unit *u = c->u;
    int first = k->n_outer, last = k->n_outer + k->n_inner - 1;
    LLVMValueRef *acc_slot = calloc((size_t)(k->n_reduces ? k->n_reduces : 1), sizeof *acc_slot);
    for (int r = 0; r < k->n_reduces; r++) {
        if (k->reduces[r].phase != phase)
            continue;
        tgc_dtype at = acc_dtype(k, &k->reduces[r]);
        c->vec_var = last;
        LLVMTypeRef vt = LLVMVectorType(compute_type(u, at), (unsigned)c->vl);
        acc_slot[r] = entry_alloca(c, vt, "acc");
        LLVMBuildStore(c->b, acc_identity(c, &k->reduces[r], at), acc_slot[r]);
        c->vec_var = -1;
    }
    loop loops[KIR_MAX_DIMS];
    for (int d = first; d < last; d++)
        c->var[d] = loop_begin(c, &loops[d], i64c(c, 0), dim_val(c, k->extent[d]), i64c(c, 1));
    LLVMValueRef lo = inner_lo ? inner_lo : i64c(c, 0);
    LLVMValueRef hi = inner_hi ? inner_hi : dim_val(c, k->extent[last]);
    loop vl;
    LLVMValueRef iv = loop_begin(c, &vl, lo, hi, i64c(c, c->vl));
    c->var[last] = iv;
    c->vec_var = last;
    LLVMValueRef lanes = LLVMBuildAdd(c->b, splat_val(c, iv), iota(c), "");
    c->mask = LLVMBuildICmp(c->b, LLVMIntSLT, lanes, splat_val(c, hi), "mask");
    memset(c->memo, 0, (size_t)k->n_vals * sizeof *c->memo);
    for (int r = 0; r < k->n_reduces; r++) {
        const kir_reduce *rd = &k->reduces[r];
        if (rd->phase != phase)
            continue;
        tgc_dtype at = acc_dtype(k, rd);
        LLVMTypeRef vt = LLVMVectorType(compute_type(u, at), (unsigned)c->vl);
        LLVMValueRef x = convert(c, emit_val(c, rd->val), k->vals[rd->val].dtype, at);
        LLVMValueRef acc = LLVMBuildLoad2(c->b, vt, acc_slot[r], "");
        LLVMValueRef nv = combine(c, rd, at, acc, x);
        LLVMBuildStore(c->b, LLVMBuildSelect(c->b, c->mask, nv, acc, ""), acc_slot[r]);
    }
    for (int s = 0; s < k->n_stores; s++)
        if (k->stores[s].phase == phase)
            emit_store(c, &k->stores[s], emit_val(c, k->stores[s].val));
    loop_end(c, &vl);
    c->mask = NULL;
    for (int d = last - 1; d >= first; d--)
        loop_end(c, &loops[d]);
    for (int r = 0; r < k->n_reduces; r++) {
        if (k->reduces[r].phase != phase)
            continue;
        tgc_dtype at = acc_dtype(k, &k->reduces[r]);
        LLVMTypeRef vt = LLVMVectorType(compute_type(u, at), (unsigned)c->vl);
        c->vec_var = last;
        LLVMValueRef acc = LLVMBuildLoad2(c->b, vt, acc_slot[r], "");
        c->acc_val[r] = reduce_lanes(c, &k->reduces[r], at, acc);
    }
    c->vec_var = -1;
    free(acc_slot);
}

tgc_status tgc_llvm_emit_loop(tgc_llvm_unit *u, const kir_kernel *k, const char *name,
                              const kir_args *slots)
{
    /* this codegen runs the innermost axis as vectors and the outer ones as rows (or one
     * strip-mined axis): the schedule tgc_llvm_kir_target gives */
    int last = k->n_outer + k->n_inner - 1;
    if (k->sched.vec_axis != last || k->sched.lanes < 1 || k->sched.lanes > MAX_VL ||
        (k->sched.split_axis >= 0 && (k->sched.split_axis != 0 || k->n_outer != 0)))
        return tgc_set_error(TGC_ERR_COMPILE,
                             "tgc llvm: kernel k%d has a schedule this codegen does not run "
                             "(lower it for tgc_llvm_kir_target())",
                             k->id);
    cg c = {0};
    c.u = u;
    c.b = u->b;
    c.k = k;
    c.slots = slots;
    c.vl = k->sched.lanes;
    c.vec_var = -1;
    c.buf_ptr = calloc((size_t)k->n_bufs + 1, sizeof *c.buf_ptr);
    c.slot_val = calloc((size_t)kir_args_words(slots) + 1, sizeof *c.slot_val);
    c.memo = calloc((size_t)k->n_vals + 1, sizeof *c.memo);
    c.acc_val = calloc((size_t)k->n_reduces + 1, sizeof *c.acc_val);
    if (!c.buf_ptr || !c.slot_val || !c.memo || !c.acc_val) {
        free(c.buf_ptr);
        free(c.slot_val);
        free(c.memo);
        free(c.acc_val);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    LLVMTypeRef params[4] = {u->t_ptr, u->t_ptr, u->t_i64, u->t_i64};
    c.fn = tgc_llvm_add_function(u, name, LLVMFunctionType(u->t_void, params, 4, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    LLVMAddAttributeAtIndex(c.fn, 2, LLVMCreateEnumAttribute(u->ctx, noalias, 0));
    LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(u->ctx, c.fn, "entry"));
    load_args(&c, LLVMGetParam(c.fn, 0), LLVMGetParam(c.fn, 1));
    loop rows;
    LLVMValueRef o =
        loop_begin(&c, &rows, LLVMGetParam(c.fn, 2), LLVMGetParam(c.fn, 3), i64c(&c, 1));
    LLVMValueRef inner_lo = NULL, inner_hi = NULL;
    if (k->sched.split_axis >= 0) { /* the one axis, strip-mined: row o is a chunk of it */
        LLVMValueRef e = dim_val(&c, k->extent[0]);
        inner_lo = LLVMBuildMul(c.b, o, i64c(&c, k->sched.split), "");
        LLVMValueRef end = LLVMBuildAdd(c.b, inner_lo, i64c(&c, k->sched.split), "");
        inner_hi = LLVMBuildSelect(c.b, LLVMBuildICmp(c.b, LLVMIntSLT, end, e, ""), end, e, "");
    } else {
        LLVMValueRef rem = o;
        for (int d = k->n_outer - 1; d >= 0; d--) {
            LLVMValueRef e = dim_val(&c, k->extent[d]);
            if (d == 0) {
                c.var[d] = rem;
            } else {
                c.var[d] = LLVMBuildSRem(c.b, rem, e, "");
                rem = LLVMBuildSDiv(c.b, rem, e, "");
            }
        }
    }
    for (int p = 0; p < k->n_phases; p++)
        emit_phase(&c, p, inner_lo, inner_hi);
    /* row stores: inner vars at 0 (their strides are 0) */
    memset(c.memo, 0, (size_t)k->n_vals * sizeof *c.memo);
    for (int d = k->n_outer; d < k->n_outer + k->n_inner; d++)
        c.var[d] = i64c(&c, 0);
    for (int s = 0; s < k->n_stores; s++)
        if (k->stores[s].phase < 0)
            emit_store(&c, &k->stores[s], emit_val(&c, k->stores[s].val));
    loop_end(&c, &rows);
    LLVMBuildRetVoid(c.b);
    free(c.buf_ptr);
    free(c.slot_val);
    free(c.memo);
    free(c.acc_val);
    if (c.failed)
        return tgc_set_error(TGC_ERR_COMPILE,
                             "tgc llvm: kernel k%d uses an op the LLVM "
                             "codegen does not support",
                             k->id);
    return TGC_OK;
}

LLVMValueRef tgc_llvm_epilogue_emit(tgc_llvm_unit *u, const kir_kernel *k, const kir_args *slots,
                                    LLVMValueRef acc, const tgc_gemm_ep_pos *pos)
{
    if (k->result < 0 || (k->n_vals == 1 && k->vals[0].kind == KV_ACC))
        return acc;
    cg c = {0};
    c.u = u;
    c.b = u->b;
    c.fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(u->b));
    c.k = k;
    c.slots = slots;
    c.vl = pos->vl;
    c.vec_var = 2;
    c.mask = pos->mask;
    c.gemm_acc = acc;
    c.buf_ptr = calloc((size_t)k->n_bufs + 1, sizeof *c.buf_ptr);
    c.slot_val = calloc((size_t)kir_args_words(slots) + 1, sizeof *c.slot_val);
    c.memo = calloc((size_t)k->n_vals + 1, sizeof *c.memo);
    if (!c.buf_ptr || !c.slot_val || !c.memo) {
        free(c.buf_ptr);
        free(c.slot_val);
        free(c.memo);
        return NULL; /* the emitter reports the failure */
    }
    LLVMValueRef bufs = LLVMBuildLoad2(c.b, u->t_ptr, pos->args, "ep_bufs");
    LLVMValueRef sp = LLVMBuildGEP2(c.b, u->t_ptr, pos->args, (LLVMValueRef[]){i64c(&c, 1)}, 1, "");
    LLVMValueRef sizes = LLVMBuildLoad2(c.b, u->t_ptr, sp, "ep_sizes");
    load_args(&c, bufs, sizes);
    c.var[0] = pos->batch;
    c.var[1] = pos->m;
    c.var[2] = pos->n0;
    LLVMValueRef r = emit_val(&c, k->result);
    r = convert(&c, r, k->vals[k->result].dtype, TGC_F32);
    free(c.buf_ptr);
    free(c.slot_val);
    free(c.memo);
    return c.failed ? NULL : r;
}

/* The host's target for kernel IR: the vector widths this codegen runs (values compute in
 * f32, f64 or i64 lanes of the widest profitable register, at least 4 lanes; kernels with
 * reductions keep f32 width from 256 bits up, their f64 accumulators in two registers), flat
 * domains in rows of 16384 elements (enough work per row to amortize a thread hand-off), and
 * the f32 GEMM and conv templates (llvm_gemm.h). Built once from tgc_llvm_host(). */
static kir_target g_target;
static pthread_once_t g_target_once = PTHREAD_ONCE_INIT;

static void init_target(void)
{
    const tgc_llvm_target *h = tgc_llvm_host();
    int bits = h ? h->vec_bits : 128;
    g_target.name = "llvm";
    for (int dt = 0; dt < TGC_DTYPE_COUNT; dt++) {
        tgc_dtype d = (tgc_dtype)dt;
        int wide = d == TGC_F64 || tgc_dtype_is_int(d); /* f64 and i64 lanes */
        g_target.lanes[dt] = bits / (wide ? 64 : 32);
    }
    g_target.min_lanes = 4;
    g_target.reduce_lanes = bits >= 256 ? bits / 32 : 0;
    g_target.flat_split = 16384;
    g_target.has_grid = 0;
    g_target.template_dtypes[KIR_TPL_GEMM] = 1u << TGC_F32;
    g_target.template_dtypes[KIR_TPL_CONV] = 1u << TGC_F32;
    /* pointwise ops as cg_how allows per dtype; copies and pools of f32 / f64; reductions of
     * floats into their own dtype; draws of floats; aranges of the dtypes whose conversion
     * from f64 the codegen rounds as interp does */
    g_target.caps.pointwise_ok = tgc_llvm_pointwise_supported;
    g_target.caps.copy_dtypes = KIR_DTYPES_F32_F64;
    g_target.caps.reduce_dtypes = KIR_DTYPES_FLOAT;
    g_target.caps.reduce_keeps_dtype = 1;
    g_target.caps.pool_dtypes = KIR_DTYPES_F32_F64;
    g_target.caps.random_dtypes = KIR_DTYPES_FLOAT;
    g_target.caps.index_dtypes =
        KIR_DTYPES_F32_F64 | KIR_DTYPE_BIT(TGC_I32) | KIR_DTYPE_BIT(TGC_I64);
}

const kir_target *tgc_llvm_kir_target(void)
{
    pthread_once(&g_target_once, init_target);
    return &g_target;
}
