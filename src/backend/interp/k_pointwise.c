/* Interp kernels for the elementwise kinds: BINARY, COMPARE, TERNARY (where), SCALAR and
 * UNARY (cast included).
 *
 * The operands (out first, then the inputs) are walked together over out's shape, each with
 * its own strides: stride 0 along a dim the input broadcasts (missing or of size 1). Dims
 * that form one linear run in every operand are merged first, so the innermost row is as
 * long as the layout allows: a contiguous same-shape op is a single row.
 *
 * Rows are evaluated in blocks by one of three paths, picked once per call:
 *   f32     every operand is f32: float loops the compiler vectorizes. An input that is not
 *           unit-stride along the row (a broadcast scalar, a transposed view) is gathered
 *           into a block first.
 *   int     integer/bool inputs and an integer/bool result, for the ops that keep integers:
 *           computed in int64, so i64 values beyond 2^53 stay exact and overflow wraps as in
 *           PyTorch.
 *   double  everything else. Inputs are first rounded to the dtype the op computes in (an
 *           i64 compared with an f32 compares as f32, an int added to an f16 becomes f16,
 *           as PyTorch casts operands to the common dtype), the math runs in double and the
 *           store rounds once to out's dtype.
 * The f32 path matches the double path bit for bit: + - * / of two floats done in double
 * and rounded to float equal the float operation (53 >= 2 * 24 + 2 bits), and every other
 * op goes through the same double function on both paths. */
#include <math.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "backend/interp/interp_rows.h"
#include "ir/shape_infer.h"
#include "support/error.h"

#define PW_MAX_OPS 4 /* out and up to three inputs */
#define PW_BLOCK 256 /* elements per step: a few KiB per operand, stays in L1 */

#if defined(__GNUC__) && !defined(__clang__)
/* GCC's -O2 vectorizes only loops whose trip count is a known multiple of the vector width;
 * rows have arbitrary lengths. clang vectorizes them at -O2 already. */
#define PW_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define PW_VECTORIZE
#endif

static const double PW_SQRT1_2 = 0.70710678118654752440;   /* 1/sqrt(2) */
static const double PW_SQRT_2_PI = 0.79788456080286535588; /* sqrt(2/pi) */
static const double PW_TWO63 = 9223372036854775808.0;      /* 2^63 */

typedef struct pw_call {
    tgc_op op;
    tgc_op_kind kind;
    const tgc_attrs *a;
    int nops; /* out plus inputs */
    void *base[PW_MAX_OPS];
    tgc_dtype dt[PW_MAX_OPS];
    tgc_dtype cast_dt[PW_MAX_OPS]; /* dtype an input is rounded to before the math */
    int64_t si[2];                 /* the scalar attrs as integers, for the int path */
    int ndim;                      /* walked dims (after merging), at least 1 */
    int64_t shape[TGC_MAX_DIMS];
    int64_t st[PW_MAX_OPS][TGC_MAX_DIMS];
    int64_t off0[PW_MAX_OPS]; /* element offset of each operand's first element */
} pw_call;

typedef void (*pw_row_fn)(const pw_call *c, const int64_t *off, int64_t n);

/* ---- scalar semantics: the one definition of each op's math ---- */

/* maximum / minimum propagate NaN, written so that the f32 loops still vectorize. */
static inline double pw_max(double x, double y)
{
    return x > y || isnan(x) ? x : y;
}

static inline double pw_min(double x, double y)
{
    return x < y || isnan(x) ? x : y;
}

/* max then min, as PyTorch (lo > hi gives hi); NaN in x stays NaN. */
static inline double pw_clamp(double x, double lo, double hi)
{
    double r = x < lo ? lo : x;
    return r > hi ? hi : r;
}

/* A NaN bound makes every result NaN, as in PyTorch. */
static int clamp_bounds_nan(const tgc_attrs *a)
{
    return isnan(a->clamp.lo) || isnan(a->clamp.hi);
}

static double pw_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double pw_binary(tgc_op op, double x, double y)
{
    switch (op) {
    case TGC_OP_ADD: return x + y;
    case TGC_OP_SUB: return x - y;
    case TGC_OP_MUL: return x * y;
    case TGC_OP_DIV: return x / y;
    case TGC_OP_POW: return pow(x, y);
    case TGC_OP_MAXIMUM: return pw_max(x, y);
    default: return pw_min(x, y); /* MINIMUM */
    }
}

static double pw_compare(tgc_op op, double x, double y)
{
    switch (op) {
    case TGC_OP_EQ: return x == y;
    case TGC_OP_NE: return x != y;
    case TGC_OP_LT: return x < y;
    case TGC_OP_LE: return x <= y;
    case TGC_OP_GT: return x > y;
    default: return x >= y; /* GE */
    }
}

static double pw_scalar(tgc_op op, double x, const tgc_attrs *a)
{
    switch (op) {
    case TGC_OP_ADD_SCALAR: return x + a->scalar.value;
    case TGC_OP_SUB_SCALAR: return x - a->scalar.value;
    case TGC_OP_MUL_SCALAR: return x * a->scalar.value;
    case TGC_OP_DIV_SCALAR: return x / a->scalar.value;
    case TGC_OP_POW_SCALAR: return pow(x, a->scalar.value);
    default: return clamp_bounds_nan(a) ? NAN : pw_clamp(x, a->clamp.lo, a->clamp.hi); /* CLAMP */
    }
}

static double pw_unary(tgc_op op, double x)
{
    switch (op) {
    case TGC_OP_NEG: return -x;
    case TGC_OP_ABS: return fabs(x);
    case TGC_OP_EXP: return exp(x);
    case TGC_OP_LOG: return log(x);
    case TGC_OP_SQRT: return sqrt(x);
    case TGC_OP_RSQRT: return 1.0 / sqrt(x);
    case TGC_OP_TANH: return tanh(x);
    case TGC_OP_SIGMOID: return pw_sigmoid(x);
    case TGC_OP_RELU: return x < 0 ? 0.0 : x; /* keeps NaN, like PyTorch */
    case TGC_OP_GELU: return 0.5 * x * (1.0 + erf(x * PW_SQRT1_2));
    case TGC_OP_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(PW_SQRT_2_PI * (x + 0.044715 * x * x * x)));
    case TGC_OP_SILU: return x * pw_sigmoid(x);
    case TGC_OP_ERF: return erf(x);
    case TGC_OP_SIN: return sin(x);
    case TGC_OP_COS: return cos(x);
    default: return x; /* CAST: the store converts */
    }
}

/* The int path's math; unsigned arithmetic wraps instead of overflowing. */
static int64_t pw_eval_int(const pw_call *c, int64_t x, int64_t y, int64_t z)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (c->op) {
    case TGC_OP_ADD: return (int64_t)(ux + uy);
    case TGC_OP_SUB: return (int64_t)(ux - uy);
    case TGC_OP_MUL: return (int64_t)(ux * uy);
    case TGC_OP_MAXIMUM: return x > y ? x : y;
    case TGC_OP_MINIMUM: return x < y ? x : y;
    case TGC_OP_EQ: return x == y;
    case TGC_OP_NE: return x != y;
    case TGC_OP_LT: return x < y;
    case TGC_OP_LE: return x <= y;
    case TGC_OP_GT: return x > y;
    case TGC_OP_GE: return x >= y;
    case TGC_OP_WHERE: return x ? y : z;
    case TGC_OP_ADD_SCALAR: return (int64_t)(ux + (uint64_t)c->si[0]);
    case TGC_OP_SUB_SCALAR: return (int64_t)(ux - (uint64_t)c->si[0]);
    case TGC_OP_MUL_SCALAR: return (int64_t)(ux * (uint64_t)c->si[0]);
    case TGC_OP_CLAMP: {
        int64_t r = x < c->si[0] ? c->si[0] : x;
        return r > c->si[1] ? c->si[1] : r;
    }
    case TGC_OP_NEG: return (int64_t)(0 - ux);
    case TGC_OP_ABS: return x < 0 ? (int64_t)(0 - ux) : x;
    case TGC_OP_RELU: return x < 0 ? 0 : x;
    default: return x; /* CAST */
    }
}

/* ---- element access (the row loads and stores are in interp_rows.h) ---- */

/* Rounds loaded values to dt's precision: the cast to the common dtype that happens before
 * the math. f64 and integer targets need none (their inputs are already exact there). */
static void round_to(double *v, int64_t n, tgc_dtype from, tgc_dtype to)
{
    if (from == to) return;
    switch (to) {
    case TGC_F32:
        for (int64_t i = 0; i < n; i++) v[i] = (float)v[i];
        break;
    case TGC_F16:
        for (int64_t i = 0; i < n; i++) v[i] = tgc_half_to_float(tgc_float_to_half((float)v[i]));
        break;
    case TGC_BF16:
        for (int64_t i = 0; i < n; i++) v[i] = tgc_bf16_to_float(tgc_float_to_bf16((float)v[i]));
        break;
    default: break;
    }
}

/* ---- row evaluators ---- */

static int64_t block_len(int64_t n, int64_t s)
{
    return n - s < PW_BLOCK ? n - s : PW_BLOCK;
}

/* One block of the double path; the kind is switched on once per block, not per element. */
static void eval_double(const pw_call *c, const double *x, const double *y, const double *z,
                        double *r, int64_t m)
{
    const tgc_op op = c->op;
    switch (c->kind) {
    case TGC_KIND_BINARY:
        for (int64_t i = 0; i < m; i++) r[i] = pw_binary(op, x[i], y[i]);
        break;
    case TGC_KIND_COMPARE:
        for (int64_t i = 0; i < m; i++) r[i] = pw_compare(op, x[i], y[i]);
        break;
    case TGC_KIND_TERNARY:
        for (int64_t i = 0; i < m; i++) r[i] = x[i] != 0 ? y[i] : z[i];
        break;
    case TGC_KIND_SCALAR:
        for (int64_t i = 0; i < m; i++) r[i] = pw_scalar(op, x[i], c->a);
        break;
    default:
        for (int64_t i = 0; i < m; i++) r[i] = pw_unary(op, x[i]);
        break;
    }
}

static void row_double(const pw_call *c, const int64_t *off, int64_t n)
{
    const int last = c->ndim - 1, nin = c->nops - 1;
    double v[PW_MAX_OPS - 1][PW_BLOCK], r[PW_BLOCK];
    /* Unused operands alias the first so the loop below reads only loaded values. */
    const double *x = v[0], *y = nin > 1 ? v[1] : v[0], *z = nin > 2 ? v[2] : v[0];
    for (int64_t s = 0; s < n; s += PW_BLOCK) {
        int64_t m = block_len(n, s);
        for (int k = 1; k < c->nops; k++) {
            int64_t st = c->st[k][last];
            load_f64(c->base[k], c->dt[k], off[k] + s * st, st, m, v[k - 1]);
            round_to(v[k - 1], m, c->dt[k], c->cast_dt[k]);
        }
        eval_double(c, x, y, z, r, m);
        store_f64(c->base[0], c->dt[0], off[0] + s * c->st[0][last], c->st[0][last], m, r);
    }
}

static void row_int(const pw_call *c, const int64_t *off, int64_t n)
{
    const int last = c->ndim - 1, nin = c->nops - 1;
    int64_t v[PW_MAX_OPS - 1][PW_BLOCK], r[PW_BLOCK];
    const int64_t *x = v[0], *y = nin > 1 ? v[1] : v[0], *z = nin > 2 ? v[2] : v[0];
    for (int64_t s = 0; s < n; s += PW_BLOCK) {
        int64_t m = block_len(n, s);
        for (int k = 1; k < c->nops; k++) {
            int64_t st = c->st[k][last];
            load_i64(c->base[k], c->dt[k], off[k] + s * st, st, m, v[k - 1]);
        }
        for (int64_t i = 0; i < m; i++) r[i] = pw_eval_int(c, x[i], y[i], z[i]);
        store_i64(c->base[0], c->dt[0], off[0] + s * c->st[0][last], c->st[0][last], m, r);
    }
}

/* A unit-stride view of m f32 elements: in place when the input already is, else gathered
 * (stride 0 fills the block with the one broadcast value). */
static const float *f32_operand(const float *p, int64_t st, int64_t m, float *buf)
{
    if (st == 1) return p;
    for (int64_t i = 0; i < m; i++) buf[i] = p[i * st];
    return buf;
}

/* The f32 ops without a float loop of their own go through the double math, exactly as on
 * the double path. */
static void f32_math(const pw_call *c, const float *x, const float *y, float *o, int64_t m)
{
    const tgc_op op = c->op;
    switch (c->kind) {
    case TGC_KIND_BINARY:
        for (int64_t i = 0; i < m; i++) o[i] = (float)pw_binary(op, x[i], y[i]);
        break;
    case TGC_KIND_SCALAR:
        for (int64_t i = 0; i < m; i++) o[i] = (float)pw_scalar(op, x[i], c->a);
        break;
    default:
        for (int64_t i = 0; i < m; i++) o[i] = (float)pw_unary(op, x[i]);
        break;
    }
}

/* One block of the f32 path. The simple ops get their own loop so they vectorize; the rest
 * call the shared double math. */
static PW_VECTORIZE void f32_eval(const pw_call *c, const float *x, const float *y,
                                  float *restrict o, int64_t m)
{
    /* the scalar of a *_SCALAR op, CLAMP's bounds */
    const int clamp = c->op == TGC_OP_CLAMP;
    const double s = clamp ? c->a->clamp.lo : c->a->scalar.value, hi = clamp ? c->a->clamp.hi : 0.0;
    switch (c->op) {
    case TGC_OP_ADD: for (int64_t i = 0; i < m; i++) o[i] = x[i] + y[i]; break;
    case TGC_OP_SUB: for (int64_t i = 0; i < m; i++) o[i] = x[i] - y[i]; break;
    case TGC_OP_MUL: for (int64_t i = 0; i < m; i++) o[i] = x[i] * y[i]; break;
    case TGC_OP_DIV: for (int64_t i = 0; i < m; i++) o[i] = x[i] / y[i]; break;
    case TGC_OP_MAXIMUM: for (int64_t i = 0; i < m; i++) o[i] = (float)pw_max(x[i], y[i]); break;
    case TGC_OP_MINIMUM: for (int64_t i = 0; i < m; i++) o[i] = (float)pw_min(x[i], y[i]); break;
    case TGC_OP_ADD_SCALAR: for (int64_t i = 0; i < m; i++) o[i] = (float)(x[i] + s); break;
    case TGC_OP_SUB_SCALAR: for (int64_t i = 0; i < m; i++) o[i] = (float)(x[i] - s); break;
    case TGC_OP_MUL_SCALAR: for (int64_t i = 0; i < m; i++) o[i] = (float)(x[i] * s); break;
    case TGC_OP_DIV_SCALAR: for (int64_t i = 0; i < m; i++) o[i] = (float)(x[i] / s); break;
    case TGC_OP_CLAMP:
        for (int64_t i = 0; i < m; i++) o[i] = (float)pw_clamp(x[i], s, hi);
        if (clamp_bounds_nan(c->a))
            for (int64_t i = 0; i < m; i++) o[i] = NAN;
        break;
    case TGC_OP_NEG: for (int64_t i = 0; i < m; i++) o[i] = -x[i]; break;
    case TGC_OP_ABS: for (int64_t i = 0; i < m; i++) o[i] = fabsf(x[i]); break;
    case TGC_OP_RELU: for (int64_t i = 0; i < m; i++) o[i] = x[i] < 0 ? 0.0f : x[i]; break;
    case TGC_OP_CAST: memcpy(o, x, (size_t)m * sizeof *o); break;
    default: f32_math(c, x, y, o, m); break;
    }
}

static void row_f32(const pw_call *c, const int64_t *off, int64_t n)
{
    const int last = c->ndim - 1;
    const int binary = c->nops > 2;
    const int64_t sx = c->st[1][last], sy = binary ? c->st[2][last] : 0;
    const float *px = (const float *)c->base[1] + off[1];
    const float *py = binary ? (const float *)c->base[2] + off[2] : px;
    float *po = (float *)c->base[0] + off[0];
    float bx[PW_BLOCK], by[PW_BLOCK];
    for (int64_t s = 0; s < n; s += PW_BLOCK) {
        int64_t m = block_len(n, s);
        const float *x = f32_operand(px + s * sx, sx, m, bx);
        const float *y = binary ? f32_operand(py + s * sy, sy, m, by) : x;
        f32_eval(c, x, y, po + s, m);
    }
}

/* ---- picking a path ---- */

/* Integer or bool operands, out included. */
static int all_integer(const pw_call *c)
{
    for (int k = 0; k < c->nops; k++)
        if (tgc_dtype_is_float(c->dt[k])) return 0;
    return 1;
}

/* Unary, binary and scalar ops over f32 only, writing unit-stride rows. */
static int f32_path_ok(const pw_call *c)
{
    int last = c->ndim - 1;
    if (c->kind == TGC_KIND_COMPARE || c->kind == TGC_KIND_TERNARY) return 0;
    for (int k = 0; k < c->nops; k++)
        if (c->dt[k] != TGC_F32) return 0;
    return c->st[0][last] == 1 || c->shape[last] == 1;
}

static int is_int_scalar(double s)
{
    return s == trunc(s) && fabs(s) < PW_TWO63;
}

/* double -> int64 saturating (bounds of clamp on an integer tensor). */
static int64_t sat_i64(double v)
{
    if (v <= -PW_TWO63) return INT64_MIN;
    if (v >= PW_TWO63) return INT64_MAX;
    return (int64_t)v;
}

/* The int path takes integer/bool operands with an integer/bool result, for the ops whose
 * integer result is exact (div and pow go through double), and scalar forms only with
 * scalars it can hold as integers, which it stores in c->si. */
static int prepare_int_path(pw_call *c)
{
    /* the scalar of a *_SCALAR op, CLAMP's bounds */
    const int clamp = c->op == TGC_OP_CLAMP;
    const double lo = clamp ? c->a->clamp.lo : c->a->scalar.value,
                 hi = clamp ? c->a->clamp.hi : 0.0;
    if (!all_integer(c)) return 0;
    switch (c->op) {
    case TGC_OP_DIV:
    case TGC_OP_POW:
    case TGC_OP_DIV_SCALAR:
    case TGC_OP_POW_SCALAR: return 0;
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR:
    case TGC_OP_MUL_SCALAR:
        if (!is_int_scalar(lo)) return 0;
        c->si[0] = (int64_t)lo;
        return 1;
    case TGC_OP_CLAMP:
        if (isnan(lo) || isnan(hi)) return 0;
        /* An integer is >= lo iff it is >= ceil(lo), and <= hi iff <= floor(hi). */
        c->si[0] = sat_i64(ceil(lo));
        c->si[1] = sat_i64(floor(hi));
        return 1;
    default:
        return c->kind != TGC_KIND_UNARY || c->op == TGC_OP_CAST || c->op == TGC_OP_NEG ||
               c->op == TGC_OP_ABS || c->op == TGC_OP_RELU;
    }
}

static pw_row_fn pick_row(pw_call *c)
{
    if (f32_path_ok(c)) return row_f32;
    if (prepare_int_path(c)) return row_int;
    return row_double;
}

/* ---- setup and the walk ---- */

/* Strides that walk t over out's shape: dims aligned at the trailing end, stride 0 where t
 * is broadcast (missing or of size 1). Returns 0 when t's shape does not broadcast. */
static int broadcast_strides(const tgc_tensor *t, const tgc_tensor *out, int64_t *st)
{
    int lead = out->ndim - t->ndim;
    if (lead < 0) return 0;
    for (int d = 0; d < out->ndim; d++) {
        int k = d - lead;
        if (k < 0 || t->shape[k] == 1)
            st[d] = 0;
        else if (t->shape[k] == out->shape[d])
            st[d] = t->strides[k];
        else
            return 0;
    }
    return 1;
}

/* The dtype the inputs are cast to before the math: the common dtype for comparisons, the
 * result's dtype for arithmetic; where and cast only move values (the store converts). */
static tgc_dtype compute_dtype(tgc_op op, tgc_op_kind kind, tgc_tensor *const *in,
                               const tgc_tensor *out)
{
    if (kind == TGC_KIND_COMPARE) return tgc_promote(in[0]->dtype, in[1]->dtype);
    if (kind == TGC_KIND_TERNARY || op == TGC_OP_CAST) return TGC_DTYPE_COUNT;
    return out->dtype;
}

static int is_pointwise_kind(tgc_op_kind k)
{
    return k == TGC_KIND_BINARY || k == TGC_KIND_COMPARE || k == TGC_KIND_TERNARY ||
           k == TGC_KIND_SCALAR || k == TGC_KIND_UNARY;
}

static tgc_status pw_fail(const char *op, const char *what)
{
    return tgc_set_error(TGC_ERR_INTERNAL, "tgc_interp_pointwise: %s: %s", op, what);
}

static void set_operand(pw_call *c, int k, const tgc_tensor *t, tgc_dtype cast_dt)
{
    c->base[k] = tgc_host_data(t);
    c->dt[k] = t->dtype;
    c->cast_dt[k] = cast_dt == TGC_DTYPE_COUNT ? t->dtype : cast_dt;
    c->off0[k] = t->offset;
}

static tgc_status pw_setup(pw_call *c, tgc_op op, tgc_tensor *const *in, int n_in,
                           const tgc_attrs *a, tgc_tensor *out)
{
    static const tgc_attrs no_attrs;
    const tgc_op_info *info = tgc_op_info_of(op);
    if (!info || !is_pointwise_kind(info->kind))
        return pw_fail(tgc_op_name(op), "not an elementwise op");
    if (!out || !in || n_in != info->min_inputs)
        return pw_fail(info->name, "wrong number of inputs or no output");
    for (int k = 0; k < n_in; k++)
        if (!in[k]) return pw_fail(info->name, "an input is NULL");
    memset(c, 0, sizeof *c);
    c->op = op;
    c->kind = info->kind;
    c->a = a ? a : &no_attrs;
    c->nops = n_in + 1;
    c->ndim = out->ndim;
    memcpy(c->shape, out->shape, sizeof c->shape);
    memcpy(c->st[0], out->strides, sizeof c->st[0]);
    set_operand(c, 0, out, TGC_DTYPE_COUNT);
    tgc_dtype cdt = compute_dtype(op, c->kind, in, out);
    for (int k = 1; k < c->nops; k++) {
        if (!broadcast_strides(in[k - 1], out, c->st[k]))
            return pw_fail(info->name, "an input does not broadcast to the output's shape");
        set_operand(c, k, in[k - 1], cdt);
    }
    return TGC_OK;
}

/* Concrete operands only: a traced tensor has no storage to read. */
static tgc_status check_storage(const pw_call *c)
{
    for (int k = 0; k < c->nops; k++)
        if (!c->base[k]) return pw_fail(tgc_op_name(c->op), "an operand has no storage");
    return TGC_OK;
}

/* Drops size-1 dims and merges neighbours that are one linear run in every operand. The
 * visiting order is unchanged; the rows just get longer. */
static void merge_dims(pw_call *c)
{
    int nd = 0;
    for (int d = 0; d < c->ndim; d++) {
        if (c->shape[d] == 1) continue;
        int merge = nd > 0;
        for (int k = 0; merge && k < c->nops; k++)
            merge = c->st[k][nd - 1] == c->st[k][d] * c->shape[d];
        int at = merge ? nd - 1 : nd;
        c->shape[at] = merge ? c->shape[at] * c->shape[d] : c->shape[d];
        for (int k = 0; k < c->nops; k++) c->st[k][at] = c->st[k][d];
        nd = at + 1;
    }
    if (nd == 0) { /* every dim has size 1: one row of one element */
        c->shape[0] = 1;
        for (int k = 0; k < c->nops; k++) c->st[k][0] = 0;
        nd = 1;
    }
    c->ndim = nd;
}

/* Calls row() for every innermost row, with each operand's offset at the row's start. */
static void walk_rows(const pw_call *c, pw_row_fn row)
{
    const int inner = c->ndim - 1;
    int64_t idx[TGC_MAX_DIMS] = {0}, off[PW_MAX_OPS];
    memcpy(off, c->off0, sizeof off);
    for (;;) {
        row(c, off, c->shape[inner]);
        int d = inner - 1;
        for (; d >= 0; d--) {
            for (int k = 0; k < c->nops; k++) off[k] += c->st[k][d];
            if (++idx[d] < c->shape[d]) break;
            for (int k = 0; k < c->nops; k++) off[k] -= c->st[k][d] * c->shape[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

tgc_status tgc_interp_pointwise(tgc_op op, tgc_tensor *const *in, int n_in,
                                const tgc_attrs *a, tgc_tensor *out)
{
    pw_call c;
    tgc_status s = pw_setup(&c, op, in, n_in, a, out);
    if (s != TGC_OK) return s;
    if (tgc_shape_numel(out->shape, out->ndim) == 0) return TGC_OK;
    s = check_storage(&c);
    if (s != TGC_OK) return s;
    merge_dims(&c);
    walk_rows(&c, pick_row(&c));
    return TGC_OK;
}
