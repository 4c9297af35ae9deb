/* Vector math in LLVM IR (see llvm_math.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/llvm/llvm_math.h"

static int lanes(LLVMTypeRef ty)
{
    return LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? (int)LLVMGetVectorSize(ty) : 0;
}

static LLVMTypeRef elem(LLVMTypeRef ty)
{
    return lanes(ty) ? LLVMGetElementType(ty) : ty;
}

static LLVMTypeRef same_shape(LLVMTypeRef like, LLVMTypeRef el)
{
    return lanes(like) ? LLVMVectorType(el, (unsigned)lanes(like)) : el;
}

static LLVMValueRef splat(LLVMTypeRef ty, LLVMValueRef c)
{
    int n = lanes(ty);
    if (!n)
        return c;
    LLVMValueRef v[64];
    for (int i = 0; i < n; i++)
        v[i] = c;
    return LLVMConstVector(v, (unsigned)n);
}

LLVMValueRef tgc_lm_const(tgc_llvm_unit *u, LLVMTypeRef ty, double v)
{
    (void)u;
    return splat(ty, LLVMConstReal(elem(ty), v));
}

static LLVMValueRef icst(LLVMTypeRef ty, long long v)
{
    return splat(ty, LLVMConstInt(elem(ty), (unsigned long long)v, 1));
}

LLVMValueRef tgc_lm_intrinsic1(tgc_llvm_unit *u, const char *name, LLVMValueRef x)
{
    LLVMTypeRef ty = LLVMTypeOf(x), fty;
    LLVMValueRef fn = tgc_llvm_intrinsic(u, name, &ty, 1, &fty);
    return LLVMBuildCall2(u->b, fty, fn, &x, 1, "");
}

static LLVMValueRef fma3(tgc_llvm_unit *u, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMTypeRef ty = LLVMTypeOf(a), fty;
    LLVMValueRef fn = tgc_llvm_intrinsic(u, "llvm.fma", &ty, 1, &fty);
    LLVMValueRef args[3] = {a, b, c};
    return LLVMBuildCall2(u->b, fty, fn, args, 3, "");
}

/* c[0] + x*(c[1] + x*(c[2] + ...)) */
static LLVMValueRef horner(tgc_llvm_unit *u, LLVMValueRef x, const double *c, int n)
{
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef r = tgc_lm_const(u, ty, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        r = fma3(u, r, x, tgc_lm_const(u, ty, c[i]));
    return r;
}

static LLVMValueRef sel(tgc_llvm_unit *u, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(u->b, c, a, b, "");
}

static LLVMValueRef fcmp(tgc_llvm_unit *u, LLVMRealPredicate p, LLVMValueRef a, double c)
{
    return LLVMBuildFCmp(u->b, p, a, tgc_lm_const(u, LLVMTypeOf(a), c), "");
}

LLVMValueRef tgc_lm_libm(tgc_llvm_unit *u, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef ty = LLVMTypeOf(x), et = elem(ty);
    int is_f = LLVMGetTypeKind(et) == LLVMFloatTypeKind;
    char fname[32];
    snprintf(fname, sizeof fname, "%s%s", name, is_f ? "f" : "");
    LLVMTypeRef params[2] = {et, et};
    LLVMTypeRef fty = LLVMFunctionType(et, params, y ? 2 : 1, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(u->mod, fname);
    if (!fn)
        fn = LLVMAddFunction(u->mod, fname, fty);
    int n = lanes(ty);
    if (!n) {
        LLVMValueRef args[2] = {x, y};
        return LLVMBuildCall2(u->b, fty, fn, args, y ? 2 : 1, "");
    }
    LLVMValueRef r = LLVMGetUndef(ty);
    for (int i = 0; i < n; i++) {
        LLVMValueRef idx = LLVMConstInt(u->t_i32, (unsigned)i, 0);
        LLVMValueRef args[2] = {LLVMBuildExtractElement(u->b, x, idx, ""),
                                y ? LLVMBuildExtractElement(u->b, y, idx, "") : NULL};
        r = LLVMBuildInsertElement(u->b, r, LLVMBuildCall2(u->b, fty, fn, args, y ? 2 : 1, ""), idx,
                                   "");
    }
    return r;
}

static int is_double(LLVMValueRef x)
{
    return LLVMGetTypeKind(elem(LLVMTypeOf(x))) == LLVMDoubleTypeKind;
}

LLVMValueRef tgc_lm_exp(tgc_llvm_unit *u, LLVMValueRef x)
{
    if (is_double(x))
        return tgc_lm_libm(u, "exp", x, NULL);
    LLVMTypeRef ty = LLVMTypeOf(x), ity = same_shape(ty, u->t_i32);
    /* x = n*ln2 + r, |r| <= ln2/2; e^r by its Taylor series to degree 7 (error < 1e-8) */
    LLVMValueRef xc = sel(u, fcmp(u, LLVMRealOGT, x, 88.75), tgc_lm_const(u, ty, 88.75), x);
    xc = sel(u, fcmp(u, LLVMRealOLT, xc, -87.0), tgc_lm_const(u, ty, -87.0), xc);
    LLVMValueRef t = LLVMBuildFMul(u->b, xc, tgc_lm_const(u, ty, M_LOG2E), "");
    LLVMValueRef n = tgc_lm_intrinsic1(u, "llvm.roundeven", t);
    LLVMValueRef r = fma3(u, n, tgc_lm_const(u, ty, -0.693145751953125), xc);
    r = fma3(u, n, tgc_lm_const(u, ty, -1.428606765330187045e-06), r);
    static const double c[8] = {1.0,      1.0,       1.0 / 2,   1.0 / 6,
                                1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040};
    LLVMValueRef p = horner(u, r, c, 8);
    /* 2^n in two factors, so n = 128 (results just below FLT_MAX) stays representable */
    LLVMValueRef ni = LLVMBuildFPToSI(u->b, n, ity, "");
    LLVMValueRef n1 = LLVMBuildAShr(u->b, ni, icst(ity, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(u->b, ni, n1, "");
    LLVMValueRef b1 =
        LLVMBuildShl(u->b, LLVMBuildAdd(u->b, n1, icst(ity, 127), ""), icst(ity, 23), "");
    LLVMValueRef b2 =
        LLVMBuildShl(u->b, LLVMBuildAdd(u->b, n2, icst(ity, 127), ""), icst(ity, 23), "");
    LLVMValueRef res =
        LLVMBuildFMul(u->b, LLVMBuildFMul(u->b, p, LLVMBuildBitCast(u->b, b1, ty, ""), ""),
                      LLVMBuildBitCast(u->b, b2, ty, ""), "");
    res = sel(u, fcmp(u, LLVMRealOGT, x, 88.72283935546875), tgc_lm_const(u, ty, INFINITY), res);
    /* below -87 the result is under 1.7e-38: flushed to zero (denormals are not kept) */
    res = sel(u, fcmp(u, LLVMRealOLT, x, -87.0), tgc_lm_const(u, ty, 0.0), res);
    return sel(u, fcmp(u, LLVMRealUNO, x, 0.0), x, res);
}

LLVMValueRef tgc_lm_log(tgc_llvm_unit *u, LLVMValueRef x)
{
    if (is_double(x))
        return tgc_lm_libm(u, "log", x, NULL);
    LLVMTypeRef ty = LLVMTypeOf(x), ity = same_shape(ty, u->t_i32);
    /* denormals: scale into the normal range first */
    LLVMValueRef small = fcmp(u, LLVMRealOLT, x, 1.17549435e-38);
    LLVMValueRef xs = sel(u, small, LLVMBuildFMul(u->b, x, tgc_lm_const(u, ty, 8388608.0), ""), x);
    LLVMValueRef bits = LLVMBuildBitCast(u->b, xs, ity, "");
    LLVMValueRef e =
        LLVMBuildSub(u->b, LLVMBuildLShr(u->b, bits, icst(ity, 23), ""), icst(ity, 127), "");
    LLVMValueRef mb = LLVMBuildOr(u->b, LLVMBuildAnd(u->b, bits, icst(ity, 0x7fffff), ""),
                                  icst(ity, 0x3f800000), "");
    LLVMValueRef m = LLVMBuildBitCast(u->b, mb, ty, "");
    LLVMValueRef big = fcmp(u, LLVMRealOGT, m, M_SQRT2);
    m = sel(u, big, LLVMBuildFMul(u->b, m, tgc_lm_const(u, ty, 0.5), ""), m);
    LLVMValueRef ef = LLVMBuildSIToFP(u->b, e, ty, "");
    ef = sel(u, big, LLVMBuildFAdd(u->b, ef, tgc_lm_const(u, ty, 1.0), ""), ef);
    ef = sel(u, small, LLVMBuildFSub(u->b, ef, tgc_lm_const(u, ty, 23.0), ""), ef);
    /* log m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716 */
    LLVMValueRef s = LLVMBuildFDiv(u->b, LLVMBuildFSub(u->b, m, tgc_lm_const(u, ty, 1.0), ""),
                                   LLVMBuildFAdd(u->b, m, tgc_lm_const(u, ty, 1.0), ""), "");
    LLVMValueRef s2 = LLVMBuildFMul(u->b, s, s, "");
    static const double c[6] = {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11};
    LLVMValueRef lm = LLVMBuildFMul(u->b, s, horner(u, s2, c, 6), "");
    LLVMValueRef res = fma3(u, ef, tgc_lm_const(u, ty, M_LN2), lm);
    res = sel(u, fcmp(u, LLVMRealOEQ, x, 0.0), tgc_lm_const(u, ty, -INFINITY), res);
    res = sel(u, fcmp(u, LLVMRealOLT, x, 0.0), tgc_lm_const(u, ty, NAN), res);
    res = sel(u, fcmp(u, LLVMRealOEQ, x, INFINITY), x, res);
    return sel(u, fcmp(u, LLVMRealUNO, x, 0.0), x, res);
}

LLVMValueRef tgc_lm_tanh(tgc_llvm_unit *u, LLVMValueRef x)
{
    if (is_double(x))
        return tgc_lm_libm(u, "tanh", x, NULL);
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef a = tgc_lm_intrinsic1(u, "llvm.fabs", x);
    /* |x| < 0.3: odd Taylor series (error < 1e-9); else 1 - 2/(e^{2|x|} + 1) */
    LLVMValueRef x2 = LLVMBuildFMul(u->b, x, x, "");
    static const double c[6] = {1.0,         -1.0 / 3,    2.0 / 15,
                                -17.0 / 315, 62.0 / 2835, -1382.0 / 155925};
    LLVMValueRef small = LLVMBuildFMul(u->b, x, horner(u, x2, c, 6), "");
    LLVMValueRef e = tgc_lm_exp(u, LLVMBuildFMul(u->b, a, tgc_lm_const(u, ty, 2.0), ""));
    LLVMValueRef t =
        LLVMBuildFSub(u->b, tgc_lm_const(u, ty, 1.0),
                      LLVMBuildFDiv(u->b, tgc_lm_const(u, ty, 2.0),
                                    LLVMBuildFAdd(u->b, e, tgc_lm_const(u, ty, 1.0), ""), ""),
                      "");
    LLVMValueRef big = sel(u, fcmp(u, LLVMRealOLT, x, 0.0), LLVMBuildFNeg(u->b, t, ""), t);
    LLVMValueRef res = sel(u, fcmp(u, LLVMRealOLT, a, 0.3), small, big);
    return sel(u, fcmp(u, LLVMRealUNO, x, 0.0), x, res);
}

LLVMValueRef tgc_lm_erf(tgc_llvm_unit *u, LLVMValueRef x)
{
    if (is_double(x))
        return tgc_lm_libm(u, "erf", x, NULL);
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef a = tgc_lm_intrinsic1(u, "llvm.fabs", x);
    LLVMValueRef x2 = LLVMBuildFMul(u->b, x, x, "");
    /* |x| < 0.75: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) */
    static const double ts[9] = {1.0,         -1.0 / 3,   1.0 / 10,     -1.0 / 42,   1.0 / 216,
                                 -1.0 / 1320, 1.0 / 9360, -1.0 / 75600, 1.0 / 685440};
    double c[9];
    for (int i = 0; i < 9; i++)
        c[i] = ts[i] * M_2_SQRTPI;
    LLVMValueRef small = LLVMBuildFMul(u->b, x, horner(u, x2, c, 9), "");
    /* else Abramowitz-Stegun 7.1.26: 1 - t P(t) e^{-x^2}, t = 1/(1 + p|x|) */
    LLVMValueRef t =
        LLVMBuildFDiv(u->b, tgc_lm_const(u, ty, 1.0),
                      fma3(u, a, tgc_lm_const(u, ty, 0.3275911), tgc_lm_const(u, ty, 1.0)), "");
    static const double p[5] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
    LLVMValueRef poly = LLVMBuildFMul(u->b, t, horner(u, t, p, 5), "");
    LLVMValueRef e = tgc_lm_exp(u, LLVMBuildFNeg(u->b, x2, ""));
    LLVMValueRef big =
        LLVMBuildFSub(u->b, tgc_lm_const(u, ty, 1.0), LLVMBuildFMul(u->b, poly, e, ""), "");
    big = sel(u, fcmp(u, LLVMRealOLT, x, 0.0), LLVMBuildFNeg(u->b, big, ""), big);
    LLVMValueRef res = sel(u, fcmp(u, LLVMRealOLT, a, 0.75), small, big);
    return sel(u, fcmp(u, LLVMRealUNO, x, 0.0), x, res);
}

static LLVMValueRef lm_sqrt(tgc_llvm_unit *u, LLVMValueRef x)
{
    return tgc_lm_intrinsic1(u, "llvm.sqrt", x); /* correctly rounded, as libm's */
}

/* The math this file writes as IR itself, by libm name; every other name is a library call
 * lane by lane (tgc_lm_libm). */
static const struct {
    const char *name;
    LLVMValueRef (*emit)(tgc_llvm_unit *u, LLVMValueRef x);
} g_vector_math[] = {
    {"exp", tgc_lm_exp}, {"log", tgc_lm_log}, {"tanh", tgc_lm_tanh},
    {"erf", tgc_lm_erf}, {"sqrt", lm_sqrt},
};

int tgc_lm_has_vector(const char *name)
{
    for (size_t i = 0; name && i < sizeof g_vector_math / sizeof g_vector_math[0]; i++)
        if (!strcmp(g_vector_math[i].name, name))
            return 1;
    return 0;
}

LLVMValueRef tgc_lm_unary(tgc_llvm_unit *u, const char *name, LLVMValueRef x)
{
    for (size_t i = 0; i < sizeof g_vector_math / sizeof g_vector_math[0]; i++)
        if (!strcmp(g_vector_math[i].name, name))
            return g_vector_math[i].emit(u, x);
    return tgc_lm_libm(u, name, x, NULL);
}

LLVMValueRef tgc_lm_pow(tgc_llvm_unit *u, LLVMValueRef x, LLVMValueRef y)
{
    return tgc_lm_libm(u, "pow", x, y);
}
