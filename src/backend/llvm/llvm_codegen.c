/* Kernel IR -> LLVM IR (see llvm_codegen.h).
 *
 * Loop counters and accumulators live in allocas; O3's SROA turns them into registers.
 * Values are emitted on demand per loop body and memoized there, so a value used by
 * several stores or reductions of one phase is computed once, and a value used in two
 * phases is recomputed from the (cached) row instead of being kept in memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/llvm/llvm_codegen.h"
#include "backend/llvm/llvm_gemm.h"
#include "backend/llvm/llvm_math.h"
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

int tgc_llvm_pointwise_supported(tgc_op op, tgc_dtype out, const tgc_dtype *in, int n_in)
{
    for (int k = 0; k < n_in; k++)
        if (!tgc_dtype_is_float(in[k]) && !tgc_dtype_is_int(in[k]) && in[k] != TGC_BOOL)
            return 0;
    if (tgc_dtype_is_float(out))
        return 1;
    tgc_op_kind kind = tgc_op_info_of(op)->kind;
    if (kind == TGC_KIND_COMPARE || op == TGC_OP_CAST || op == TGC_OP_CONTIGUOUS ||
        op == TGC_OP_WHERE)
        return out == TGC_BOOL || tgc_dtype_is_int(out);
    if (!tgc_dtype_is_int(out))
        return 0;
    switch (op) {
    case TGC_OP_ADD:
    case TGC_OP_SUB:
    case TGC_OP_MUL:
    case TGC_OP_MAXIMUM:
    case TGC_OP_MINIMUM:
    case TGC_OP_NEG:
    case TGC_OP_ABS:
    case TGC_OP_RELU: return 1;
    default: return 0;
    }
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
    for (int j = 0; j < c->slots->n; j++) {
        LLVMValueRef p = LLVMBuildGEP2(c->b, u->t_i64, sizes, (LLVMValueRef[]){i64c(c, j)}, 1, "");
        c->slot_val[j] = LLVMBuildLoad2(c->b, u->t_i64, p, "size");
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
    case TGC_OP_EXP: return tgc_lm_exp(u, a[0]);
    case TGC_OP_LOG: return tgc_lm_log(u, a[0]);
    case TGC_OP_SQRT: return tgc_lm_intrinsic1(u, "llvm.sqrt", a[0]);
    case TGC_OP_RSQRT:
        return LLVMBuildFDiv(c->b, cst(c, dt, 1.0), tgc_lm_intrinsic1(u, "llvm.sqrt", a[0]), "");
    case TGC_OP_TANH: return tgc_lm_tanh(u, a[0]);
    case TGC_OP_SIGMOID: return tgc_lm_sigmoid(u, a[0]);
    case TGC_OP_RELU: return fsel(c, LLVMRealOLT, a[0], cst(c, dt, 0.0), cst(c, dt, 0.0), a[0]);
    case TGC_OP_GELU: {
        LLVMValueRef e =
            tgc_lm_erf(u, LLVMBuildFMul(c->b, a[0], cst(c, dt, 0.70710678118654752440), ""));
        LLVMValueRef h = LLVMBuildFMul(c->b, a[0], cst(c, dt, 0.5), "");
        return LLVMBuildFMul(c->b, h, LLVMBuildFAdd(c->b, e, cst(c, dt, 1.0), ""), "");
    }
    case TGC_OP_GELU_TANH: {
        LLVMValueRef x3 = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, a[0], a[0], ""), a[0], "");
        LLVMValueRef in =
            LLVMBuildFAdd(c->b, a[0], LLVMBuildFMul(c->b, x3, cst(c, dt, 0.044715), ""), "");
        LLVMValueRef t =
            tgc_lm_tanh(u, LLVMBuildFMul(c->b, in, cst(c, dt, 0.79788456080286535588), ""));
        LLVMValueRef h = LLVMBuildFMul(c->b, a[0], cst(c, dt, 0.5), "");
        return LLVMBuildFMul(c->b, h, LLVMBuildFAdd(c->b, t, cst(c, dt, 1.0), ""), "");
    }
    case TGC_OP_SILU: return LLVMBuildFMul(c->b, a[0], tgc_lm_sigmoid(u, a[0]), "");
    case TGC_OP_ERF: return tgc_lm_erf(u, a[0]);
    default: return NULL;
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
                    : (tgc_dtype_is_float(c->k->vals[rd->val].dtype) ? c->k->vals[rd->val].dtype : TGC_I64);
            int saved = c->vec_var;
            c->vec_var = -1;
            LLVMValueRef s = convert(c, c->acc_val[v->index], at, v->dtype);
            c->vec_var = saved;
            r = splat_val(c, s);
        }
        break;
    case KV_OP: r = emit_op(c, v); break;
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
        return tgc_dtype_is_float(at) ? LLVMBuildFAdd(c->b, acc, x, "") : LLVMBuildAdd(c->b, acc, x, "");
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

static int kernel_vl(const tgc_llvm_unit *u, const kir_kernel *k)
{
    int wide = 0;
    for (int i = 0; i < k->n_vals; i++)
        if (k->vals[i].dtype == TGC_F64 || tgc_dtype_is_int(k->vals[i].dtype))
            wide = 1;
    for (int i = 0; i < k->n_reduces; i++)
        if (k->reduces[i].comb == KR_SUM)
            wide = 1; /* f64 accumulators */
    int bits = u->target->vec_bits;
    int vl = bits / (wide ? 64 : 32);
    /* sums accumulate in double: keep float inputs at full width anyway (two registers) */
    if (wide && k->n_reduces && bits >= 256)
        vl = bits / 32;
    return vl < 4 ? 4 : vl;
}

tgc_status tgc_llvm_emit_loop(tgc_llvm_unit *u, const kir_kernel *k, const char *name,
                              kir_args *slots)
{
    tgc_status st = kir_args_collect(k, slots);
    if (st != TGC_OK)
        return st;
    cg c = {0};
    c.u = u;
    c.b = u->b;
    c.k = k;
    c.slots = slots;
    c.vl = kernel_vl(u, k);
    c.vec_var = -1;
    c.buf_ptr = calloc((size_t)k->n_bufs + 1, sizeof *c.buf_ptr);
    c.slot_val = calloc((size_t)slots->n + 1, sizeof *c.slot_val);
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
    if (k->chunk > 0) {
        LLVMValueRef e = dim_val(&c, k->extent[0]);
        inner_lo = LLVMBuildMul(c.b, o, i64c(&c, k->chunk), "");
        LLVMValueRef end = LLVMBuildAdd(c.b, inner_lo, i64c(&c, k->chunk), "");
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

LLVMValueRef tgc_llvm_epilogue_emit(tgc_llvm_unit *u, const kir_kernel *k,
                                    const kir_args *slots, LLVMValueRef acc,
                                    const tgc_gemm_ep_pos *pos)
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
    c.slot_val = calloc((size_t)slots->n + 1, sizeof *c.slot_val);
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
