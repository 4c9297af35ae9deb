/* Kernel IR -> C-family GPU source (see render_c.h): the base every dialect shares.
 *
 * Values are rendered on demand, one variable per value per loop body (inputs first), so a
 * value several stores or reductions use is computed once per element. A body is a C block:
 * its variables die with it, and the next body (another phase, another vector lane) renders
 * the values it needs again under its own names.
 *
 * Nothing here spells a language: every qualifier, index, intrinsic, type and math name comes
 * from the dialect table, through templates with "%s" placeholders (subst), so a dialect's
 * text differs from another's exactly in its table's strings. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/render_c.h"
#include "support/error.h"
#include "tensor/dtype.h"

/* ---- templates ------------------------------------------------------------------------- */

/* The "%s" placeholders of tpl; -1 when it holds another conversion. */
static int placeholders(const char *tpl)
{
    int n = 0;
    for (const char *p = tpl; *p; p++) {
        if (*p != '%')
            continue;
        if (p[1] == 's')
            n++;
        else if (p[1] != '%')
            return -1;
        p++;
    }
    return n;
}

/* Appends tpl with its placeholders replaced by args[0..n) in order (a placeholder past n is
 * left out: dialect_check makes the counts match). */
static void sb_subst(tgc_strbuf *sb, const char *tpl, int n, const char *const *args)
{
    int i = 0;
    const char *run = tpl;
    for (const char *p = tpl; *p; p++) {
        if (*p != '%' || (p[1] != 's' && p[1] != '%'))
            continue;
        tgc_sb_printf(sb, "%.*s", (int)(p - run), run);
        if (p[1] == '%')
            tgc_sb_puts(sb, "%");
        else if (i < n)
            tgc_sb_puts(sb, args[i]);
        i += p[1] == 's';
        p++;
        run = p + 1;
    }
    tgc_sb_puts(sb, run);
}

/* ---- dialects ---------------------------------------------------------------------------- */

static tgc_status bad_dialect(const tgc_c_dialect *d, const char *field, const char *why)
{
    return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc %s: dialect %s: %s %s", d->tag ? d->tag : "?",
                         d->name ? d->name : "(no name)", field, why);
}

/* TGC_OK when the base can render with d; else the first field it cannot use. */
static tgc_status dialect_check(const tgc_c_dialect *d)
{
    if (!d)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc render: no dialect table");
    struct {
        const char *name, *s;
        int args; /* placeholders of a template; -1: a plain string */
        int optional;
    } f[] = {
        {"name", d->name, -1, 0},
        {"tag", d->tag, -1, 0},
        {"kernel", d->kernel, -1, 0},
        {"launch_bounds", d->launch_bounds, 1, 1},
        {"device_fn", d->device_fn, -1, 0},
        {"global", d->global, -1, 0},
        {"restrict_", d->restrict_, -1, 0},
        {"shared", d->shared, -1, 0},
        {"barrier", d->barrier, -1, 0},
        {"thread_idx", d->thread_idx, -1, 0},
        {"block_idx", d->block_idx, -1, 0},
        {"grid_dim", d->grid_dim, -1, 0},
        {"shfl_xor", d->shfl_xor, 2, 0},
        {"f16_type", d->f16_type, -1, 0},
        {"bf16_type", d->bf16_type, -1, 0},
        {"i32_as_f32", d->i32_as_f32, 1, 0},
        {"u32_as_f32", d->u32_as_f32, 1, 0},
        {"f32_as_u32", d->f32_as_u32, 1, 0},
        {"i64_as_f64", d->i64_as_f64, 1, 0},
        {"mulhi_u32", d->mulhi_u32, 2, 0},
        {"math_f32", d->math_f32, 1, 0},
        {"math_f64", d->math_f64, 1, 0},
        {"vec_type", d->vec_type, 2, 0},
        {"vec_lane", d->vec_lane, 2, 0},
        {"prelude_f16", d->prelude_f16, -1, 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].s) {
            if (f[i].optional)
                continue;
            return bad_dialect(d, f[i].name, "is NULL");
        }
        if (f[i].args >= 0 && placeholders(f[i].s) != f[i].args)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc %s: dialect %s: %s is \"%s\": a template of %d \"%%s\"",
                                 d->tag, d->name, f[i].name, f[i].s, f[i].args);
    }
    for (const tgc_c_math_fn *m = d->math_fns; m && m->name; m++)
        if (!m->f32 || !m->f64)
            return bad_dialect(d, "math_fns", "has an entry without its f32 or f64 name");
    int w = d->warp_size;
    if (w < 2 || (w & (w - 1)))
        return bad_dialect(d, "warp_size", "is not a power of two of at least 2");
    if (d->block_threads < w || d->block_threads % w)
        return bad_dialect(d, "block_threads", "is not a multiple of warp_size");
    if (d->threads_per_sm < d->block_threads)
        return bad_dialect(d, "threads_per_sm", "is below block_threads");
    return TGC_OK;
}

/* ---- dtypes ------------------------------------------------------------------------------ */

const char *tgc_c_compute_type(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32:
    case TGC_F16:
    case TGC_BF16: return "float";
    case TGC_F64: return "double";
    case TGC_I32: return "int";
    case TGC_I64: return "long long";
    case TGC_BOOL: return "bool";
    default: return NULL;
    }
}

const char *tgc_c_storage_type(const tgc_c_dialect *d, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F32: return "float";
    case TGC_F16: return d->f16_type;
    case TGC_BF16: return d->bf16_type;
    case TGC_F64: return "double";
    case TGC_I32: return "int";
    case TGC_I64: return "long long";
    case TGC_BOOL: return "uint8_t";
    default: return NULL;
    }
}

static int is_f(tgc_dtype dt)
{
    return tgc_dtype_is_float(dt);
}

/* The accumulator dtype of a reduction (kir/schedule.c's rule). */
static tgc_dtype acc_dtype(const kir_kernel *k, const kir_reduce *r)
{
    tgc_dtype in = k->vals[r->val].dtype;
    if (is_f(in))
        return r->comb == KR_SUM ? TGC_F64 : in;
    return TGC_I64;
}

/* ---- the render context ----------------------------------------------------------------- */

typedef struct rc {
    const tgc_c_dialect *d;
    tgc_strbuf *o;
    const kir_kernel *k; /* NULL: the prelude */
    const kir_args *slots;
    const char *sizes;  /* "s.v" */
    const char *bufs;   /* "b.p": loads cast it (epilogues) */
    int typed_bufs;     /* 1: buffer i is the typed pointer B<i> (loop kernels) */
    const char *prefix; /* value variable names */
    const char *suffix; /* per body: "" or "_<lane>" */
    const char *var[KIR_MAX_DIMS];
    const char *acc[4];          /* templates: KV_ACC expressions */
    tgc_dtype tpl_acc_dtype;     /* their dtype */
    const char *const *load_raw; /* per load: a raw element expression (vector lanes) or NULL */
    uint8_t *emitted;
    const char *ind; /* indentation of emitted statements */
    char **strs;     /* strings to free at the end */
    size_t n_strs, cap_strs;
    int failed;
} rc;

static void oom(rc *c)
{
    if (c->failed)
        return;
    c->failed = 1;
    if (c->k)
        tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory rendering kernel k%d", c->d->tag,
                      c->k->id);
    else
        tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory rendering the prelude", c->d->tag);
}

static void fail(rc *c, const char *fmt, ...) TGC_PRINTF(2, 3);
static void fail(rc *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tgc_set_error(TGC_ERR_COMPILE, "tgc %s: kernel k%d: %s", c->d->tag, c->k ? c->k->id : -1, msg);
}

/* Keeps malloc'd s until the render ends ("0" when s is NULL: out of memory). */
static const char *keep(rc *c, char *s)
{
    if (s && c->n_strs == c->cap_strs) {
        size_t cap = c->cap_strs ? 2 * c->cap_strs : 256;
        char **p = realloc(c->strs, cap * sizeof *p);
        if (!p) {
            free(s);
            s = NULL;
        } else {
            c->strs = p;
            c->cap_strs = cap;
        }
    }
    if (!s) {
        oom(c);
        return "0";
    }
    c->strs[c->n_strs++] = s;
    return s;
}

/* A formatted string that lives until the render ends. */
static const char *rs(rc *c, const char *fmt, ...) TGC_PRINTF(2, 3);
static const char *rs(rc *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return keep(c, s);
}

/* Template tpl of the dialect with its arguments, as a string that lives until the render
 * ends. */
static const char *sub(rc *c, const char *tpl, int n, const char *const *args)
{
    tgc_strbuf sb = {0};
    sb_subst(&sb, tpl, n, args);
    return keep(c, tgc_sb_take(&sb));
}

static const char *sub1(rc *c, const char *tpl, const char *a)
{
    return sub(c, tpl, 1, &a);
}

static const char *sub2(rc *c, const char *tpl, const char *a, const char *b)
{
    const char *args[2] = {a, b};
    return sub(c, tpl, 2, args);
}

/* The dialect's name of libm function `name` ("exp", "sqrt", ...) for float or double. */
static const char *math(rc *c, const char *name, int dbl)
{
    for (const tgc_c_math_fn *m = c->d->math_fns; m && m->name; m++)
        if (!strcmp(m->name, name))
            return dbl ? m->f64 : m->f32;
    return sub1(c, dbl ? c->d->math_f64 : c->d->math_f32, name);
}

/* The dialect's vector of n elements of type `elem`. */
static const char *vec_type(rc *c, const char *elem, int n)
{
    return sub2(c, c->d->vec_type, elem, rs(c, "%d", n));
}

static const char *vec_lane(rc *c, const char *var, int lane)
{
    return sub2(c, c->d->vec_lane, var, rs(c, "%d", lane));
}

/* log2 of the warp size (a power of two: dialect_check). */
static int warp_shift(const tgc_c_dialect *d)
{
    int s = 0;
    while ((1 << s) < d->warp_size)
        s++;
    return s;
}

static void rc_init(rc *c, const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *k,
                    const kir_args *slots)
{
    memset(c, 0, sizeof *c);
    c->d = d;
    c->o = out;
    c->k = k;
    c->slots = slots;
    c->sizes = "s.v";
    c->bufs = "b.p";
    c->prefix = "v";
    c->suffix = "";
    c->ind = "    ";
}

static void rc_free(rc *c)
{
    for (size_t i = 0; i < c->n_strs; i++)
        free(c->strs[i]);
    free(c->strs);
    c->strs = NULL;
    c->n_strs = c->cap_strs = 0;
}

/* The status a render ends with. */
static tgc_status rc_status(rc *c)
{
    if (c->failed)
        return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_COMPILE;
    if (c->o->failed) {
        oom(c);
        return TGC_ERR_OOM;
    }
    return TGC_OK;
}

/* ---- the prelude ------------------------------------------------------------------------ */

static void piece(rc *c, const char *text)
{
    if (text)
        tgc_sb_puts(c->o, text);
}

/* f16 / bf16: the bf16 half when the dialect has no piece of its own (bf16_type holds the
 * 16 bits). */
static void prelude_bf16(rc *c)
{
    const tgc_c_dialect *d = c->d;
    const char *t = d->bf16_type;
    tgc_sb_printf(c->o, "TGC_DEV float tgc_bf2f(%s h) { return %s; }\n", t,
                  sub1(c, d->u32_as_f32, "(unsigned)h << 16"));
    tgc_sb_printf(c->o,
                  "TGC_DEV %s tgc_f2bf(float f) {\n"
                  "  unsigned x = %s;\n"
                  "  if ((x & 0x7fffffffu) > 0x7f800000u) return (%s)((x >> 16) | 0x40u);\n"
                  "  x += 0x7fffu + ((x >> 16) & 1u); return (%s)(x >> 16); }\n",
                  t, sub1(c, d->f32_as_u32, "f"), t, t);
}

/* One line of generated code per line of source. */
// clang-format off
static void prelude_philox(rc *c)
{
    const tgc_c_dialect *d = c->d;
    tgc_sb_printf(c->o,
        "/* Philox4x32-10, word 0 (runtime/philox.c) */\n"
        "TGC_DEV unsigned tgc_philox_bits(unsigned long long seed, unsigned long long counter) {\n"
        "  unsigned c0 = (unsigned)counter, c1 = (unsigned)(counter >> 32), c2 = 0u, c3 = 0u;\n"
        "  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);\n"
        "#pragma unroll\n"
        "  for (int r = 0; r < 10; r++) {\n"
        "    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }\n"
        "    unsigned hi0 = %s, lo0 = 0xD2511F53u * c0;\n"
        "    unsigned hi1 = %s, lo1 = 0xCD9E8D57u * c2;\n"
        "    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;\n"
        "  }\n"
        "  return c0; }\n",
        sub2(c, d->mulhi_u32, "0xD2511F53u", "c0"), sub2(c, d->mulhi_u32, "0xCD9E8D57u", "c2"));
    tgc_sb_printf(c->o,
        "/* (bits >> (32 - m)) * 2^-m: exact for m <= 24 */\n"
        "TGC_DEV float tgc_philox_uniform_m(unsigned long long seed, unsigned long long counter,\n"
        "                                   int m) {\n"
        "  return (float)(tgc_philox_bits(seed, counter) >> (32 - m)) * %s; }\n"
        "TGC_DEV float tgc_philox_uniform(unsigned long long seed, unsigned long long counter) {\n"
        "  return tgc_philox_uniform_m(seed, counter, 24); }\n"
        "TGC_DEV float tgc_philox_uniform24(unsigned long long seed, unsigned long long counter) {\n"
        "  return tgc_philox_uniform_m(seed, counter, 24); }\n"
        "TGC_DEV float tgc_philox_normal(unsigned long long seed, unsigned long long counter) {\n"
        "  double u1 = tgc_philox_uniform(seed, counter);\n"
        "  double u2 = tgc_philox_uniform(seed, counter | 0x8000000000000000ULL);\n"
        "  double r = %s(-2.0 * %s(1.0 - u1));\n"
        "  return (float)(r * %s(6.283185307179586476925286766559 * u2)); }\n",
        sub1(c, d->i32_as_f32, "(127 - m) << 23"), math(c, "sqrt", 1), math(c, "log", 1),
        math(c, "cos", 1));
}

static void prelude_interp_math(rc *c)
{
    tgc_sb_printf(c->o,
        "/* interp's math (k_pointwise.c) */\n"
        "TGC_DEV float tgc_maximum(float x, float y) { return x > y || x != x ? x : y; }\n"
        "TGC_DEV double tgc_maximum(double x, double y) { return x > y || x != x ? x : y; }\n"
        "TGC_DEV float tgc_minimum(float x, float y) { return x < y || x != x ? x : y; }\n"
        "TGC_DEV double tgc_minimum(double x, double y) { return x < y || x != x ? x : y; }\n"
        "TGC_DEV float tgc_clamp(float x, float lo, float hi) {\n"
        "  float r = x < lo ? lo : x; return r > hi ? hi : r; }\n"
        "TGC_DEV double tgc_clamp(double x, double lo, double hi) {\n"
        "  double r = x < lo ? lo : x; return r > hi ? hi : r; }\n"
        "TGC_DEV float tgc_relu(float x) { return x < 0.0f ? 0.0f : x; }\n"
        "TGC_DEV double tgc_relu(double x) { return x < 0.0 ? 0.0 : x; }\n");
    tgc_sb_printf(c->o,
        "/* integer pow: interp truncates glibc's correctly rounded pow; %s's pow may be an\n"
        " * ulp off, which truncation turns into an integer off by one: small non-negative\n"
        " * integer exponents multiply out exactly (exact while the product fits 2^53) */\n"
        "TGC_DEV double tgc_pow_int(double x, double y) {\n"
        "  if (y >= 0.0 && y <= 64.0 && y == (double)(int)y) {\n"
        "    double r = 1.0; for (int i = 0; i < (int)y; i++) r *= x; return r; }\n"
        "  return %s(x, y); }\n"
        "/* pow(x, 0.5) is not sqrt: pow(-0, .5) = +0 and pow(-inf, .5) = +inf */\n"
        "TGC_DEV float tgc_pow_half(float x) { return x == -tgc_inf_f() ? tgc_inf_f() : %s(x + 0.0f); }\n"
        "TGC_DEV double tgc_pow_half(double x) { return x == -tgc_inf_d() ? tgc_inf_d() : %s(x + 0.0); }\n",
        c->d->name, math(c, "pow", 1), math(c, "sqrt", 0), math(c, "sqrt", 1));
}

static void prelude_warp(rc *c)
{
    const char *sh = sub2(c, c->d->shfl_xor, "v", "o");
    int half = c->d->warp_size / 2;
    tgc_sb_printf(c->o,
        "template <typename T> TGC_DEV T tgc_warp_sum(T v) {\n"
        "#pragma unroll\n"
        "  for (int o = %d; o > 0; o >>= 1) v += %s;\n"
        "  return v; }\n"
        "template <typename T> TGC_DEV T tgc_warp_max(T v) {\n"
        "#pragma unroll\n"
        "  for (int o = %d; o > 0; o >>= 1) { T w = %s;\n"
        "    v = (w > v || w != w) ? w : v; }\n"
        "  return v; }\n"
        "template <typename T> TGC_DEV T tgc_warp_min(T v) {\n"
        "#pragma unroll\n"
        "  for (int o = %d; o > 0; o >>= 1) { T w = %s;\n"
        "    v = (w < v || w != w) ? w : v; }\n"
        "  return v; }\n",
        half, sh, half, sh, half, sh);
}

static void prelude(rc *c)
{
    const tgc_c_dialect *d = c->d;
    tgc_sb_printf(c->o,
        "/* tgc %s prelude */\n"
        "#ifndef TGC_%s_PRELUDE\n"
        "#define TGC_%s_PRELUDE 1\n",
        d->name, d->name, d->name);
    piece(c, d->prelude_head);
    tgc_sb_printf(c->o,
        "#ifndef TGC_NO_STDINT_TYPEDEFS\n"
        "typedef signed char int8_t;\n"
        "typedef unsigned char uint8_t;\n"
        "typedef short int16_t;\n"
        "typedef unsigned short uint16_t;\n"
        "typedef int int32_t;\n"
        "typedef unsigned int uint32_t;\n"
        "typedef long long int64_t;\n"
        "typedef unsigned long long uint64_t;\n"
        "#endif\n"
        "#define TGC_DEV %s\n"
        "TGC_DEV float tgc_inf_f() { return %s; }\n"
        "TGC_DEV float tgc_nan_f() { return %s; }\n"
        "TGC_DEV double tgc_inf_d() { return %s; }\n"
        "TGC_DEV double tgc_nan_d() { return %s; }\n",
        d->device_fn, sub1(c, d->i32_as_f32, "0x7f800000"), sub1(c, d->i32_as_f32, "0x7fc00000"),
        sub1(c, d->i64_as_f64, "0x7ff0000000000000LL"),
        sub1(c, d->i64_as_f64, "0x7ff8000000000000LL"));
    piece(c, d->prelude_math);
    tgc_sb_puts(c->o, "/* f16 / bf16 bits <-> float, round to nearest even; NaN as the host converts it */\n");
    piece(c, d->prelude_f16);
    if (d->prelude_bf16)
        piece(c, d->prelude_bf16);
    else
        prelude_bf16(c);
    tgc_sb_puts(c->o,
        "TGC_DEV float tgc_round_h(float f) { return tgc_h2f(tgc_f2h(f)); }\n"
        "TGC_DEV float tgc_round_bf(float f) { return tgc_bf2f(tgc_f2bf(f)); }\n"
        "/* float -> integer: saturating, NaN -> 0 (tgc_store) */\n"
        "TGC_DEV int tgc_f2i32(double v) {\n"
        "  return v != v ? 0 : v <= -2147483648.0 ? (-2147483647 - 1)\n"
        "       : v >= 2147483647.0 ? 2147483647 : (int)v; }\n"
        "TGC_DEV long long tgc_f2i64(double v) {\n"
        "  return v != v ? 0LL : v >= 9223372036854775808.0 ? 9223372036854775807LL\n"
        "       : v <= -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)v; }\n");
    prelude_philox(c);
    prelude_interp_math(c);
    piece(c, d->prelude_vec);
    tgc_sb_printf(c->o,
        "/* chunks per row of a split reduction (tgc_%s_split_chunks) */\n"
        "TGC_DEV long long tgc_split_chunks(long long rows, long long len) {\n"
        "  if (rows <= 0 || rows >= %dLL || len < %dLL) return 1;\n"
        "  long long a = (len + %dLL - 1) / %dLL, b = (%dLL + rows - 1) / rows;\n"
        "  long long c = a < b ? a : b; return c < 2 ? 1 : c; }\n",
        d->tag, TGC_C_SPLIT_ROWS_MAX, TGC_C_SPLIT_LEN_MIN, TGC_C_SPLIT_CHUNK, TGC_C_SPLIT_CHUNK,
        TGC_C_SPLIT_BLOCKS);
    prelude_warp(c);
    tgc_sb_printf(c->o, "#endif /* TGC_%s_PRELUDE */\n", d->name);
}
// clang-format on

tgc_status tgc_c_prelude(const tgc_c_dialect *d, tgc_strbuf *out)
{
    tgc_status st = dialect_check(d);
    if (st != TGC_OK)
        return st;
    if (!out)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc %s: the prelude needs a buffer", d->tag);
    rc c;
    rc_init(&c, d, out, NULL, NULL);
    prelude(&c);
    st = rc_status(&c);
    rc_free(&c);
    return st;
}

/* ---- expressions ------------------------------------------------------------------------- */

/* An int64 literal that is valid C++ for every value. */
static const char *i64_lit(rc *c, int64_t v)
{
    if (v == INT64_MIN)
        return "(-9223372036854775807LL - 1)";
    return v < 0 ? rs(c, "(%lldLL)", (long long)v) : rs(c, "%lldLL", (long long)v);
}

/* A symbolic dim as a long long expression: inline constant or its size slot. */
static const char *dim_expr(rc *c, tgc_sdim d)
{
    if (TGC_SDIM_IS_CONST(d))
        return i64_lit(c, d);
    int j = kir_args_slot(c->slots, d);
    if (j < 0) {
        fail(c, "a symbolic size has no slot (kir_args_collect was not run on this kernel)");
        return "0LL";
    }
    return rs(c, "%s[%d]", c->sizes, j);
}

/* Element index of an access at the current vars, in 64 bits. */
static const char *access_expr(rc *c, const kir_access *a)
{
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "(");
    int any = 0;
    if (!(TGC_SDIM_IS_CONST(a->off) && a->off == 0)) {
        tgc_sb_puts(&sb, dim_expr(c, a->off));
        any = 1;
    }
    int nd = kir_domain_dims(c->k);
    for (int d = 0; d < nd; d++) {
        tgc_sdim st = a->stride[d];
        if (TGC_SDIM_IS_CONST(st) && st == 0)
            continue;
        const char *v = c->var[d] ? c->var[d] : "0";
        if (TGC_SDIM_IS_CONST(st) && st == 1)
            tgc_sb_printf(&sb, "%s(long long)(%s)", any ? " + " : "", v);
        else
            tgc_sb_printf(&sb, "%s(long long)(%s) * %s", any ? " + " : "", v, dim_expr(c, st));
        any = 1;
    }
    if (!any)
        tgc_sb_puts(&sb, "0LL");
    tgc_sb_puts(&sb, ")");
    return keep(c, tgc_sb_take(&sb));
}

/* A constant of dtype dt in its compute type. */
static const char *const_expr(rc *c, tgc_dtype dt, double v)
{
    switch (dt) {
    case TGC_F32:
    case TGC_F16:
    case TGC_BF16:
        if (isnan(v))
            return "tgc_nan_f()";
        if (isinf(v))
            return v > 0 ? "tgc_inf_f()" : "(-tgc_inf_f())";
        return rs(c, "%af", (double)(float)v);
    case TGC_F64:
        if (isnan(v))
            return "tgc_nan_d()";
        if (isinf(v))
            return v > 0 ? "tgc_inf_d()" : "(-tgc_inf_d())";
        return rs(c, "%a", v);
    case TGC_I32:
    case TGC_I64: {
        int64_t iv = isnan(v)                      ? 0
                     : v >= 9223372036854775808.0  ? INT64_MAX
                     : v <= -9223372036854775808.0 ? INT64_MIN
                                                   : (int64_t)v;
        if (dt == TGC_I32)
            return rs(c, "((int)%s)", i64_lit(c, (int32_t)(uint32_t)(uint64_t)iv));
        return i64_lit(c, iv);
    }
    case TGC_BOOL: return v != 0 ? "true" : "false";
    default: fail(c, "a constant of an unknown dtype"); return "0";
    }
}

/* Converts expression e (compute type of `from`) to the compute type of `to`, rounding to
 * to's precision (interp's casts: tgc_store / round_to). */
static const char *conv(rc *c, const char *e, tgc_dtype from, tgc_dtype to)
{
    if (from == to)
        return e;
    if (to == TGC_BOOL)
        return rs(c, "((%s) != 0)", e);
    if (is_f(to)) {
        const char *f; /* e as float (or double for f64) */
        if (to == TGC_F64)
            return rs(c, "((double)(%s))", e);
        if (from == TGC_F64)
            f = rs(c, "((float)(%s))", e);
        else if (from == TGC_I64)
            f = rs(c, "((float)(double)(%s))", e);
        else if (from == TGC_I32 || from == TGC_BOOL)
            f = rs(c, "((float)(%s))", e);
        else
            f = e; /* f32 / f16 / bf16: already a float */
        if (to == TGC_F16 && from != TGC_BOOL)
            return rs(c, "tgc_round_h(%s)", f);
        if (to == TGC_BF16 && from != TGC_BOOL)
            return rs(c, "tgc_round_bf(%s)", f);
        return f;
    }
    /* to an integer */
    if (is_f(from))
        return to == TGC_I32 ? rs(c, "tgc_f2i32((double)(%s))", e)
                             : rs(c, "tgc_f2i64((double)(%s))", e);
    if (to == TGC_I32)
        return from == TGC_BOOL ? rs(c, "((int)(%s))", e)
                                : rs(c, "((int)(unsigned)(unsigned long long)(%s))", e);
    return rs(c, "((long long)(%s))", e);
}

/* ---- values ------------------------------------------------------------------------------ */

static const char *val(rc *c, int32_t id);

static const char *buf_ptr(rc *c, int32_t buf, tgc_dtype dt)
{
    if (buf < 0 || buf >= c->k->n_bufs) {
        fail(c, "an access names buffer %d of %d", buf, c->k->n_bufs);
        return "0";
    }
    if (c->typed_bufs)
        return rs(c, "B%d", buf);
    return rs(c, "((%sconst %s *)%s[%d])", c->d->global, tgc_c_storage_type(c->d, dt), c->bufs,
              buf);
}

/* A raw stored element -> its compute type. */
static const char *from_mem(rc *c, const char *e, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F16: return rs(c, "tgc_h2f(%s)", e);
    case TGC_BF16: return rs(c, "tgc_bf2f(%s)", e);
    case TGC_BOOL: return rs(c, "(%s != 0)", e);
    default: return e;
    }
}

/* A compute value -> the stored element type. */
static const char *to_mem(rc *c, const char *e, tgc_dtype dt)
{
    switch (dt) {
    case TGC_F16: return rs(c, "tgc_f2h(%s)", e);
    case TGC_BF16: return rs(c, "tgc_f2bf(%s)", e);
    case TGC_BOOL: return rs(c, "(uint8_t)(%s)", e);
    default: return e;
    }
}

static const char *load_expr(rc *c, int32_t li)
{
    const kir_load *ld = &c->k->loads[li];
    if (!tgc_c_storage_type(c->d, ld->dtype)) {
        fail(c, "a load of an unknown dtype");
        return "0";
    }
    const char *raw =
        c->load_raw && c->load_raw[li]
            ? c->load_raw[li]
            : rs(c, "%s[%s]", buf_ptr(c, ld->at.buf, ld->dtype), access_expr(c, &ld->at));
    const char *v = from_mem(c, raw, ld->dtype);
    if (!ld->n_guards)
        return v;
    /* a guarded tap: the read happens only inside the bounds */
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "(");
    for (int g = 0; g < ld->n_guards; g++) {
        const char *gi = access_expr(c, &ld->guard[g]);
        tgc_sb_printf(&sb, "%s(%s >= 0LL && %s < %s)", g ? " && " : "", gi, gi,
                      dim_expr(c, ld->bound[g]));
    }
    tgc_sb_puts(&sb, ")");
    const char *cond = keep(c, tgc_sb_take(&sb));
    return rs(c, "(%s ? %s : %s)", cond, v, const_expr(c, ld->dtype, ld->fill));
}

static int exact_float(double s)
{
    return isnan(s) || isinf(s) || (double)(float)s == s;
}

static int is_int_scalar(double s)
{
    return s == trunc(s) && fabs(s) < 9223372036854775808.0;
}

static int64_t sat_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    return (int64_t)v;
}

/* The libm base name of a primitive unary math op, NULL for every other op: the mapping of
 * tgc_op_math_fn (ir/op.h), which takes its place. */
static const char *math_fn_of(tgc_op op)
{
    switch (op) {
    case TGC_OP_EXP: return "exp";
    case TGC_OP_LOG: return "log";
    case TGC_OP_SQRT: return "sqrt";
    case TGC_OP_TANH: return "tanh";
    case TGC_OP_ERF: return "erf";
    default: return tgc_op_math_fn(op); /* the other MATH_FN ops (sin, cos) by their name */
    }
}

/* An integer op of dtype dt (I32 or I64) over operands already of dt. */
static const char *int_op(rc *c, const kir_val *v, tgc_dtype dt, const char **a)
{
    const int w = dt == TGC_I32;
    const char *ut = w ? "unsigned" : "unsigned long long", *st = w ? "int" : "long long";
    const char *f2i = w ? "tgc_f2i32" : "tgc_f2i64";
    double s = v->f[0];
    switch (v->op) {
    case TGC_OP_ADD: return rs(c, "(%s)((%s)%s + (%s)%s)", st, ut, a[0], ut, a[1]);
    case TGC_OP_SUB: return rs(c, "(%s)((%s)%s - (%s)%s)", st, ut, a[0], ut, a[1]);
    case TGC_OP_MUL: return rs(c, "(%s)((%s)%s * (%s)%s)", st, ut, a[0], ut, a[1]);
    case TGC_OP_MAXIMUM: return rs(c, "(%s > %s ? %s : %s)", a[0], a[1], a[0], a[1]);
    case TGC_OP_MINIMUM: return rs(c, "(%s < %s ? %s : %s)", a[0], a[1], a[0], a[1]);
    case TGC_OP_POW: return rs(c, "%s(tgc_pow_int((double)%s, (double)%s))", f2i, a[0], a[1]);
    case TGC_OP_POW_SCALAR:
        return rs(c, "%s(tgc_pow_int((double)%s, %s))", f2i, a[0], const_expr(c, TGC_F64, s));
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR:
    case TGC_OP_MUL_SCALAR: {
        const char *opc = v->op == TGC_OP_ADD_SCALAR ? "+" : v->op == TGC_OP_SUB_SCALAR ? "-" : "*";
        if (!is_int_scalar(s)) /* interp's double path */
            return rs(c, "%s((double)%s %s %s)", f2i, a[0], opc, const_expr(c, TGC_F64, s));
        return rs(c, "(%s)((%s)%s %s (%s)(unsigned long long)%s)", st, ut, a[0], opc, ut,
                  i64_lit(c, (int64_t)s));
    }
    case TGC_OP_CLAMP: {
        if (isnan(v->f[0]) || isnan(v->f[1]))
            return rs(c, "((%s)0)", st);
        const char *lo = i64_lit(c, sat_i64(ceil(v->f[0])));
        const char *hi = i64_lit(c, sat_i64(floor(v->f[1])));
        /* in 64 bits: an i32 compared with bounds beyond its range */
        return rs(c, "(%s)((long long)%s < %s ? %s : ((long long)%s > %s ? %s : (long long)%s))",
                  st, a[0], lo, lo, a[0], hi, hi, a[0]);
    }
    case TGC_OP_NEG: return rs(c, "(%s)((%s)0 - (%s)%s)", st, ut, ut, a[0]);
    case TGC_OP_ABS:
        return rs(c, "(%s < 0 ? (%s)((%s)0 - (%s)%s) : %s)", a[0], st, ut, ut, a[0], a[0]);
    case TGC_OP_RELU: return rs(c, "(%s < 0 ? (%s)0 : %s)", a[0], st, a[0]);
    default: return NULL;
    }
}

/* A float op computed in ct (float for f32 / f16 / bf16, double for f64) over operands of
 * that type; NULL when the op has no float form. */
static const char *float_op(rc *c, const kir_val *v, int dbl, const char **a)
{
    tgc_dtype cdt = dbl ? TGC_F64 : TGC_F32;
    double s = v->f[0];
    const char *fn = math_fn_of(v->op);
    if (fn)
        return rs(c, "%s(%s)", math(c, fn, dbl), a[0]);
    switch (v->op) {
    case TGC_OP_ADD: return rs(c, "(%s + %s)", a[0], a[1]);
    case TGC_OP_SUB: return rs(c, "(%s - %s)", a[0], a[1]);
    case TGC_OP_MUL: return rs(c, "(%s * %s)", a[0], a[1]);
    case TGC_OP_DIV: return rs(c, "(%s / %s)", a[0], a[1]);
    case TGC_OP_POW: return rs(c, "%s(%s, %s)", math(c, "pow", dbl), a[0], a[1]);
    case TGC_OP_MAXIMUM: return rs(c, "tgc_maximum(%s, %s)", a[0], a[1]);
    case TGC_OP_MINIMUM: return rs(c, "tgc_minimum(%s, %s)", a[0], a[1]);
    case TGC_OP_ADD_SCALAR:
    case TGC_OP_SUB_SCALAR:
    case TGC_OP_MUL_SCALAR:
    case TGC_OP_DIV_SCALAR: {
        const char *opc = v->op == TGC_OP_ADD_SCALAR   ? "+"
                          : v->op == TGC_OP_SUB_SCALAR ? "-"
                          : v->op == TGC_OP_MUL_SCALAR ? "*"
                                                       : "/";
        if (dbl || exact_float(s)) /* a float op of floats rounds as interp's double op */
            return rs(c, "(%s %s %s)", a[0], opc, const_expr(c, cdt, s));
        return rs(c, "((float)((double)%s %s %s))", a[0], opc, const_expr(c, TGC_F64, s));
    }
    case TGC_OP_POW_SCALAR:
        if (s == 1.0)
            return a[0];
        if (s == 2.0)
            return rs(c, "(%s * %s)", a[0], a[0]);
        if (s == 3.0)
            return dbl ? rs(c, "(%s * %s * %s)", a[0], a[0], a[0])
                       : rs(c, "((float)((double)%s * %s * %s))", a[0], a[0], a[0]);
        if (s == 0.5)
            return rs(c, "tgc_pow_half(%s)", a[0]);
        if (s == -1.0)
            return rs(c, "(%s / %s)", const_expr(c, cdt, 1.0), a[0]);
        if (s == 0.0)
            return const_expr(c, cdt, 1.0);
        if (dbl || exact_float(s))
            return rs(c, "%s(%s, %s)", math(c, "pow", dbl), a[0], const_expr(c, cdt, s));
        return rs(c, "((float)%s((double)%s, %s))", math(c, "pow", 1), a[0],
                  const_expr(c, TGC_F64, s));
    case TGC_OP_CLAMP:
        if (isnan(v->f[0]) || isnan(v->f[1]))
            return const_expr(c, cdt, NAN);
        if (dbl || (exact_float(v->f[0]) && exact_float(v->f[1])))
            return rs(c, "tgc_clamp(%s, %s, %s)", a[0], const_expr(c, cdt, v->f[0]),
                      const_expr(c, cdt, v->f[1]));
        return rs(c, "((float)tgc_clamp((double)%s, %s, %s))", a[0],
                  const_expr(c, TGC_F64, v->f[0]), const_expr(c, TGC_F64, v->f[1]));
    case TGC_OP_NEG: return rs(c, "(-%s)", a[0]);
    case TGC_OP_ABS: return rs(c, "%s(%s)", math(c, "fabs", dbl), a[0]);
    case TGC_OP_RELU: return rs(c, "tgc_relu(%s)", a[0]);
    /* composite ops (rsqrt, sigmoid, gelu, gelu_tanh, silu) never get here: lowering
     * expands their ops.def formulas into primitives */
    default: return NULL;
    }
}

static tgc_dtype vdt(const rc *c, int32_t id)
{
    return c->k->vals[id].dtype;
}

static const char *op_expr(rc *c, const kir_val *v)
{
    const tgc_op_info *info = tgc_op_info_of(v->op);
    if (!info) {
        fail(c, "an unknown op %d", (int)v->op);
        return "0";
    }
    for (int i = 0; i < v->n_in; i++)
        if (v->in[i] < 0 || v->in[i] >= c->k->n_vals) {
            fail(c, "%s reads value %d of %d", info->name, v->in[i], c->k->n_vals);
            return "0";
        }
    const char *a[3];
    if (info->kind == TGC_KIND_COMPARE) {
        static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
        tgc_dtype ct = tgc_promote(vdt(c, v->in[0]), vdt(c, v->in[1]));
        if (ct == TGC_BOOL)
            ct = TGC_I64;
        for (int k = 0; k < 2; k++)
            a[k] = conv(c, val(c, v->in[k]), vdt(c, v->in[k]), ct);
        int i = (int)(v->op - TGC_OP_EQ);
        if (i < 0 || i > 5) {
            fail(c, "compare op %s out of order", info->name);
            return "false";
        }
        return rs(c, "(%s %s %s)", a[0], ops[i], a[1]);
    }
    if (v->op == TGC_OP_WHERE) {
        a[0] = conv(c, val(c, v->in[0]), vdt(c, v->in[0]), TGC_BOOL);
        a[1] = conv(c, val(c, v->in[1]), vdt(c, v->in[1]), v->dtype);
        a[2] = conv(c, val(c, v->in[2]), vdt(c, v->in[2]), v->dtype);
        return rs(c, "(%s ? %s : %s)", a[0], a[1], a[2]);
    }
    if (v->op == TGC_OP_CAST || v->op == TGC_OP_CONTIGUOUS)
        return conv(c, val(c, v->in[0]), vdt(c, v->in[0]), v->dtype);
    tgc_dtype dt = v->dtype;
    /* bool arithmetic: interp's int path in int64, stored as != 0 */
    tgc_dtype cdt = dt == TGC_BOOL ? TGC_I64 : dt;
    for (int k = 0; k < v->n_in && k < 3; k++)
        a[k] = conv(c, val(c, v->in[k]), vdt(c, v->in[k]), cdt);
    const char *r = NULL;
    if (is_f(cdt)) {
        r = float_op(c, v, cdt == TGC_F64, a);
        if (r && cdt == TGC_F16)
            r = rs(c, "tgc_round_h(%s)", r);
        else if (r && cdt == TGC_BF16)
            r = rs(c, "tgc_round_bf(%s)", r);
    } else if (cdt == TGC_I32 || cdt == TGC_I64) {
        r = int_op(c, v, cdt, a);
    }
    if (!r) {
        fail(c, "the %s renderer has no %s for %s", c->d->name, info->name,
             tgc_dtype_info_of(dt) ? tgc_dtype_info_of(dt)->name : "?");
        return "0";
    }
    return dt == TGC_BOOL ? rs(c, "((%s) != 0)", r) : r;
}

static const char *rand_expr(rc *c, const kir_val *v)
{
    if (v->index < 0 || v->index >= c->k->n_rands) {
        fail(c, "a draw names rand %d of %d", v->index, c->k->n_rands);
        return "0";
    }
    const kir_rand *rd = &c->k->rands[v->index];
    int w = kir_args_rand_word(c->slots, v->index);
    const char *ctr =
        rs(c, "(unsigned long long)(%s[%d] + %s)", c->sizes, w + 1, access_expr(c, &rd->at));
    const char *seed = rs(c, "(unsigned long long)%s[%d]", c->sizes, w);
    const char *f;
    if (v->dist == KIR_RAND_NORMAL) {
        f = rs(c, "tgc_philox_normal(%s, %s)", seed, ctr);
    } else {
        int m = v->dist == KIR_RAND_UNIFORM24 ? 24
                : v->dtype == TGC_F16         ? 11
                : v->dtype == TGC_BF16        ? 8
                                              : 24;
        f = rs(c, "tgc_philox_uniform_m(%s, %s, %d)", seed, ctr, m);
    }
    return conv(c, f, TGC_F32, v->dtype);
}

/* Renders value id (and its inputs) in the current body; returns its variable name. */
static const char *val(rc *c, int32_t id)
{
    if (id < 0 || id >= c->k->n_vals) {
        fail(c, "value %d of %d", id, c->k->n_vals);
        return "0";
    }
    const char *name = rs(c, "%s%d%s", c->prefix, id, c->suffix);
    if (c->emitted[id] || c->failed)
        return name;
    const kir_val *v = &c->k->vals[id];
    const char *ct = tgc_c_compute_type(v->dtype);
    if (!ct) {
        fail(c, "value %d has an unknown dtype", id);
        return name;
    }
    const char *e = "0";
    switch (v->kind) {
    case KV_LOAD:
        if (v->index < 0 || v->index >= c->k->n_loads) {
            fail(c, "value %d loads %d of %d", id, v->index, c->k->n_loads);
            break;
        }
        e = conv(c, load_expr(c, v->index), c->k->loads[v->index].dtype, v->dtype);
        break;
    case KV_CONST: e = const_expr(c, v->dtype, v->cval); break;
    case KV_SIZE: e = conv(c, dim_expr(c, v->sdim), TGC_I64, v->dtype); break;
    case KV_ACC:
        if (c->k->kind != KIR_LOOP) {
            if (v->index < 0 || v->index >= 4 || !c->acc[v->index]) {
                fail(c, "value %d reads accumulator %d the caller did not name", id, v->index);
                break;
            }
            e = conv(c, rs(c, "(%s)", c->acc[v->index]), c->tpl_acc_dtype, v->dtype);
        } else {
            if (v->index < 0 || v->index >= c->k->n_reduces) {
                fail(c, "value %d reads accumulator %d of %d", id, v->index, c->k->n_reduces);
                break;
            }
            e = conv(c, rs(c, "a%d", v->index), acc_dtype(c->k, &c->k->reduces[v->index]),
                     v->dtype);
        }
        break;
    case KV_OP: e = op_expr(c, v); break;
    case KV_RAND: e = rand_expr(c, v); break;
    case KV_INDEX:
        if (v->index < 0 || v->index >= c->k->n_iotas) {
            fail(c, "value %d reads iota %d of %d", id, v->index, c->k->n_iotas);
            break;
        }
        e = conv(c, access_expr(c, &c->k->iotas[v->index]), TGC_I64, v->dtype);
        break;
    default: fail(c, "value %d has an unknown kind", id); break;
    }
    if (c->failed)
        return name;
    tgc_sb_printf(c->o, "%sconst %s %s = %s;\n", c->ind, ct, name, e);
    c->emitted[id] = 1;
    return name;
}

/* ---- epilogue values (template kernels) ---------------------------------------------- */

tgc_status tgc_c_render_vals(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *k,
                             const kir_args *slots, const tgc_c_val_env *env, int32_t result,
                             char *name, size_t name_len, uint8_t *emitted)
{
    tgc_status st = dialect_check(d);
    if (st != TGC_OK)
        return st;
    if (!out || !k || !slots || !env || !emitted || !name || name_len == 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc %s: rendering values needs out, k, slots, env, name and "
                             "emitted",
                             d->tag);
    if (result < 0 || result >= k->n_vals)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc %s: kernel k%d has no value %d (it has %d)",
                             d->tag, k->id, result, k->n_vals);
    rc c;
    rc_init(&c, d, out, k, slots);
    if (env->sizes)
        c.sizes = env->sizes;
    if (env->bufs)
        c.bufs = env->bufs;
    c.prefix = env->prefix ? env->prefix : "tv";
    for (int v = 0; v < KIR_MAX_DIMS; v++)
        c.var[v] = env->var[v];
    for (int i = 0; i < 4; i++)
        c.acc[i] = env->acc[i];
    c.tpl_acc_dtype = k->kind == KIR_LOOP           ? TGC_F32
                      : k->tpl.acc_dtype == TGC_F64 ? TGC_F64
                                                    : TGC_F32;
    c.emitted = emitted;
    const char *nm = val(&c, result);
    st = rc_status(&c);
    if (st == TGC_OK)
        snprintf(name, name_len, "%s", nm);
    rc_free(&c);
    return st;
}

/* ---- loop kernels ------------------------------------------------------------------------ */

static int nvars(const kir_kernel *k)
{
    return k->n_outer + k->n_inner;
}

/* 1 when buffer b is read by some load of k. */
static int buf_read(const kir_kernel *k, int b)
{
    for (int i = 0; i < k->n_loads; i++)
        if (k->loads[i].at.buf == b)
            return 1;
    return 0;
}

/* Typed buffer pointers B<i>: restrict where a buffer is only read or only written. */
static void emit_buf_ptrs(rc *c)
{
    const kir_kernel *k = c->k;
    const char *g = c->d->global;
    for (int b = 0; b < k->n_bufs; b++) {
        const char *st = tgc_c_storage_type(c->d, k->bufs[b].dtype);
        if (!st) {
            fail(c, "buffer %d has an unknown dtype", b);
            return;
        }
        int rd = buf_read(k, b), wr = k->bufs[b].written;
        const char *cn = wr ? "" : "const ";
        tgc_sb_printf(c->o, "%s%s%s%s *%sB%d = (%s%s%s *)b.p[%d];\n", c->ind, g, cn, st,
                      rd && wr ? "" : c->d->restrict_, b, g, cn, st, b);
    }
}

/* Declares the domain vars x<d> (type I) from flat index `idx` over vars [lo, hi). */
static void emit_decompose(rc *c, const char *idx, int lo, int hi)
{
    const kir_kernel *k = c->k;
    if (hi - lo == 1) {
        tgc_sb_printf(c->o, "%sconst I x%d = %s;\n", c->ind, lo, idx);
        return;
    }
    tgc_sb_printf(c->o, "%sI r_ = %s;\n", c->ind, idx);
    for (int d = hi - 1; d > lo; d--) {
        tgc_sb_printf(c->o, "%sconst I x%d = r_ %% (I)%s;\n", c->ind, d, dim_expr(c, k->extent[d]));
        tgc_sb_printf(c->o, "%sr_ /= (I)%s;\n", c->ind, dim_expr(c, k->extent[d]));
    }
    tgc_sb_printf(c->o, "%sconst I x%d = r_;\n", c->ind, lo);
}

static void emit_store(rc *c, const kir_store *s)
{
    const char *v = val(c, s->val);
    if (c->failed)
        return;
    if (!tgc_c_storage_type(c->d, s->dtype) || s->at.buf < 0 || s->at.buf >= c->k->n_bufs) {
        fail(c, "a store of an unknown dtype or buffer");
        return;
    }
    tgc_sb_printf(c->o, "%sB%d[%s] = %s;\n", c->ind, s->at.buf, access_expr(c, &s->at),
                  to_mem(c, conv(c, v, vdt(c, s->val), s->dtype), s->dtype));
}

static void reset_body(rc *c, const char *suffix)
{
    memset(c->emitted, 0, (size_t)(c->k->n_vals ? c->k->n_vals : 1));
    c->suffix = suffix;
}

/* The product of extents [lo, hi) as a long long expression. */
static const char *extent_product(rc *c, int lo, int hi)
{
    const char *p = "1LL";
    int64_t cst = 1;
    int any_sym = 0;
    for (int d = lo; d < hi; d++) {
        if (TGC_SDIM_IS_CONST(c->k->extent[d])) {
            cst *= c->k->extent[d];
            continue;
        }
        p = any_sym ? rs(c, "%s * %s", p, dim_expr(c, c->k->extent[d]))
                    : dim_expr(c, c->k->extent[d]);
        any_sym = 1;
    }
    if (!any_sym)
        return i64_lit(c, cst);
    return cst == 1 ? rs(c, "(%s)", p) : rs(c, "(%s * %s)", p, i64_lit(c, cst));
}

/* 1 when every extent is constant; *n gets their product (saturated). */
static int const_numel(const kir_kernel *k, int lo, int hi, int64_t *n)
{
    int64_t p = 1;
    for (int d = lo; d < hi; d++) {
        if (!TGC_SDIM_IS_CONST(k->extent[d]))
            return 0;
        int64_t e = k->extent[d];
        if (e != 0 && p > INT64_MAX / e)
            p = INT64_MAX;
        else
            p *= e;
    }
    *n = p;
    return 1;
}

/* The body function fname<sfx>_run's head, templated over the index type I. */
static void emit_run_head(rc *c, const char *fname, const char *sfx, const char *bs)
{
    tgc_sb_printf(c->o,
                  "template <typename I>\n%s void %s%s_run(const %s%s &b, const %s_s &s)\n{\n",
                  c->d->device_fn, fname, sfx, fname, bs, fname);
}

/* The kernel entry fname<sfx>(fname<bs> b, fname_s s): picks the index type (unsigned when
 * the domain has < 2^31 elements) for fname<sfx>_run. */
static void emit_entry(rc *c, const char *fname, const char *sfx, const char *bs)
{
    int64_t n = 0;
    int cn = const_numel(c->k, 0, nvars(c->k), &n);
    const char *lb =
        c->d->launch_bounds
            ? rs(c, " %s", sub1(c, c->d->launch_bounds, rs(c, "%d", c->d->block_threads)))
            : "";
    tgc_sb_printf(c->o, "%s%s %s%s(%s%s b, %s_s s)\n{\n", c->d->kernel, lb, fname, sfx, fname, bs,
                  fname);
    if (cn) {
        tgc_sb_printf(c->o, "    %s%s_run<%s>(b, s);\n}\n\n", fname, sfx,
                      n < ((int64_t)1 << 31) ? "unsigned" : "long long");
        return;
    }
    tgc_sb_printf(c->o,
                  "    const long long n_ = %s;\n"
                  "    if (n_ < 2147483648LL)\n"
                  "        %s%s_run<unsigned>(b, s);\n"
                  "    else\n"
                  "        %s%s_run<long long>(b, s);\n}\n\n",
                  extent_product(c, 0, nvars(c->k)), fname, sfx, fname, sfx);
}

/* ---- FLAT ---- */

/* Accesses that walk the innermost var with stride 1: vectorized on the vector path. */
static int unit_inner(const kir_kernel *k, const kir_access *a)
{
    tgc_sdim st = a->stride[nvars(k) - 1];
    return TGC_SDIM_IS_CONST(st) && st == 1;
}

/* Elements per thread on the vector path: 16 bytes of the narrowest vectorized access (at
 * most 8); 1 when no access is vectorizable or a constant forbids it. */
static int flat_vec(const kir_kernel *k)
{
    int n = nvars(k), last = n - 1;
    size_t min_size = 0;
    for (int i = 0; i < k->n_loads; i++) {
        const kir_load *ld = &k->loads[i];
        if (!ld->n_guards && unit_inner(k, &ld->at)) {
            size_t sz = tgc_dtype_info_of(ld->dtype)->size;
            if (!min_size || sz < min_size)
                min_size = sz;
        }
    }
    for (int i = 0; i < k->n_stores; i++)
        if (unit_inner(k, &k->stores[i].at)) {
            size_t sz = tgc_dtype_info_of(k->stores[i].dtype)->size;
            if (!min_size || sz < min_size)
                min_size = sz;
        }
    if (!min_size)
        return 1;
    int vec = (int)(16 / min_size);
    if (vec > 8)
        vec = 8;
    /* constants that rule the vector path out */
    tgc_sdim e = k->extent[last];
    while (vec > 1 && TGC_SDIM_IS_CONST(e) && e % vec)
        vec /= 2;
    return vec;
}

static int same_access(const kir_kernel *k, const kir_access *a, const kir_access *b)
{
    if (a->buf != b->buf || a->off != b->off)
        return 0;
    for (int d = 0; d < nvars(k); d++)
        if (a->stride[d] != b->stride[d])
            return 0;
    return 1;
}

/* Run-time conditions of the vector path for one vectorized access (appends " && ..."). */
static void vec_conditions(rc *c, tgc_strbuf *sb, const kir_access *a, tgc_dtype dt, int vec,
                           int *ok)
{
    const kir_kernel *k = c->k;
    int last = nvars(k) - 1;
    size_t bytes = tgc_dtype_info_of(dt)->size * (size_t)vec;
    tgc_sb_printf(sb, " && ((unsigned long long)b.p[%d] %% %zuull) == 0ull", a->buf, bytes);
    tgc_sdim terms[KIR_MAX_DIMS + 1];
    int nt = 0;
    terms[nt++] = a->off;
    for (int d = 0; d < last; d++)
        terms[nt++] = a->stride[d];
    for (int i = 0; i < nt; i++) {
        if (TGC_SDIM_IS_CONST(terms[i])) {
            if (terms[i] % vec)
                *ok = 0;
            continue;
        }
        tgc_sb_printf(sb, " && (%s %% %dLL) == 0LL", dim_expr(c, terms[i]), vec);
    }
}

/* One element (scalar path) or one lane (vector path) of a FLAT body: its stores. For the
 * vector path, vectorized stores go to the lane of S<i>. */
static void flat_lane(rc *c, int lane, int vec)
{
    const kir_kernel *k = c->k;
    for (int i = 0; i < k->n_stores && !c->failed; i++) {
        const kir_store *s = &k->stores[i];
        if (vec > 1 && unit_inner(k, &s->at)) {
            const char *v = val(c, s->val);
            tgc_sb_printf(c->o, "%s%s = %s;\n", c->ind, vec_lane(c, rs(c, "S%d", i), lane),
                          to_mem(c, conv(c, v, vdt(c, s->val), s->dtype), s->dtype));
        } else {
            emit_store(c, s);
        }
    }
}

/* The vector path of a FLAT kernel: `vec` elements per thread per iteration. */
static void emit_flat_vec(rc *c, int vec)
{
    const kir_kernel *k = c->k;
    int n = nvars(k), last = n - 1;
    const char *g = c->d->global;
    tgc_sb_printf(c->o, "        for (; t_ < n_ / (I)%d; t_ += step_) {\n", vec);
    c->ind = "            ";
    emit_decompose(c, rs(c, "t_ * (I)%d", vec), 0, n);
    /* vectorized loads: one access per operand per group */
    size_t nl = (size_t)(k->n_loads ? k->n_loads : 1);
    const char **raw = calloc(nl, sizeof *raw);
    int *same = calloc(nl, sizeof *same);
    if (!raw || !same) {
        free(raw);
        free(same);
        oom(c);
        return;
    }
    for (int i = 0; i < k->n_loads; i++) {
        const kir_load *ld = &k->loads[i];
        same[i] = i;
        if (ld->n_guards || !unit_inner(k, &ld->at))
            continue;
        for (int j = 0; j < i && same[i] == i; j++) /* one access per distinct operand */
            if (same[j] == j && !k->loads[j].n_guards && k->loads[j].dtype == ld->dtype &&
                same_access(k, &k->loads[j].at, &ld->at))
                same[i] = j;
        if (same[i] != i)
            continue;
        const char *vt = vec_type(c, tgc_c_storage_type(c->d, ld->dtype), vec);
        tgc_sb_printf(c->o, "%sconst %s L%d = *(%sconst %s *)(B%d + %s);\n", c->ind, vt, i, g, vt,
                      ld->at.buf, access_expr(c, &ld->at));
    }
    for (int i = 0; i < k->n_stores; i++)
        if (unit_inner(k, &k->stores[i].at))
            tgc_sb_printf(c->o, "%s%s S%d;\n", c->ind,
                          vec_type(c, tgc_c_storage_type(c->d, k->stores[i].dtype), vec), i);
    const char *base_last = c->var[last];
    for (int l = 0; l < vec && !c->failed; l++) {
        reset_body(c, rs(c, "_%d", l));
        c->var[last] = l ? rs(c, "(x%d + (I)%d)", last, l) : base_last;
        for (int i = 0; i < k->n_loads; i++)
            raw[i] = !k->loads[i].n_guards && unit_inner(k, &k->loads[i].at)
                         ? vec_lane(c, rs(c, "L%d", same[i]), l)
                         : NULL;
        c->load_raw = raw;
        tgc_sb_printf(c->o, "%s{\n", c->ind);
        flat_lane(c, l, vec);
        tgc_sb_printf(c->o, "%s}\n", c->ind);
    }
    c->load_raw = NULL;
    c->var[last] = base_last;
    free(raw);
    free(same);
    for (int i = 0; i < k->n_stores; i++) {
        const kir_store *s = &k->stores[i];
        if (unit_inner(k, &s->at))
            tgc_sb_printf(c->o, "%s*(%s%s *)(B%d + %s) = S%d;\n", c->ind, g,
                          vec_type(c, tgc_c_storage_type(c->d, s->dtype), vec), s->at.buf,
                          access_expr(c, &s->at), i);
    }
    tgc_sb_puts(c->o, "        }\n        return;\n    }\n");
}

static void emit_flat(rc *c, const char *fname, tgc_c_launch *launch)
{
    const kir_kernel *k = c->k;
    const tgc_c_dialect *d = c->d;
    int n = nvars(k), last = n - 1;
    int vec = flat_vec(k);
    tgc_strbuf cond = {0};
    int ok = 1;
    if (vec > 1) {
        if (!TGC_SDIM_IS_CONST(k->extent[last]))
            tgc_sb_printf(&cond, " && (%s %% %dLL) == 0LL", dim_expr(c, k->extent[last]), vec);
        for (int i = 0; i < k->n_loads; i++)
            if (!k->loads[i].n_guards && unit_inner(k, &k->loads[i].at))
                vec_conditions(c, &cond, &k->loads[i].at, k->loads[i].dtype, vec, &ok);
        for (int i = 0; i < k->n_stores; i++)
            if (unit_inner(k, &k->stores[i].at))
                vec_conditions(c, &cond, &k->stores[i].at, k->stores[i].dtype, vec, &ok);
        if (!ok)
            vec = 1;
    }
    launch->vec = vec;
    emit_run_head(c, fname, "", "_b");
    emit_buf_ptrs(c);
    tgc_sb_printf(c->o, "    const I n_ = (I)%s;\n", extent_product(c, 0, n));
    tgc_sb_printf(c->o, "    const I step_ = (I)%s * (I)%d;\n", d->grid_dim, d->block_threads);
    tgc_sb_printf(c->o, "    I t_ = (I)%s * (I)%d + (I)%s;\n", d->block_idx, d->block_threads,
                  d->thread_idx);
    char *cs = tgc_sb_take(&cond);
    for (int i = 0; i < n; i++)
        c->var[i] = rs(c, "x%d", i);
    if (vec > 1) {
        tgc_sb_printf(c->o, "    if (true%s) {\n", cs ? cs : "");
        emit_flat_vec(c, vec);
    }
    free(cs);
    tgc_sb_puts(c->o, "    for (; t_ < n_; t_ += step_) {\n");
    c->ind = "        ";
    emit_decompose(c, "t_", 0, n);
    reset_body(c, "");
    flat_lane(c, 0, 1);
    tgc_sb_puts(c->o, "    }\n}\n\n");
    c->ind = "    ";
}

/* ---- ROWS ---- */

static const char *acc_identity(rc *c, const kir_reduce *r, tgc_dtype at)
{
    if (r->comb == KR_SUM)
        return const_expr(c, at, 0.0);
    if (is_f(at))
        return const_expr(c, at, r->comb == KR_MAX ? -INFINITY : INFINITY);
    return r->comb == KR_MAX ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
}

/* acc = acc (+) x, NaN winning for float max / min. */
static const char *combine(rc *c, const kir_reduce *r, tgc_dtype at, const char *acc, const char *x)
{
    if (r->comb == KR_SUM)
        return rs(c, "%s + %s", acc, x);
    if (is_f(at))
        return rs(c, "(%s %s %s || %s != %s) ? %s : %s", x, r->comb == KR_MAX ? ">" : "<", acc, x,
                  x, x, acc);
    return rs(c, "(%s %s %s) ? %s : %s", x, r->comb == KR_MAX ? ">" : "<", acc, x, acc);
}

static const char *warp_fn(const kir_reduce *r)
{
    return r->comb == KR_SUM ? "tgc_warp_sum" : r->comb == KR_MAX ? "tgc_warp_max" : "tgc_warp_min";
}

/* 1 when the kernel reads its rows' neighbours contiguously (the last outer var has stride
 * 1 somewhere) but no load walks the innermost inner var contiguously: a column reduction. */
static int column_kernel(const kir_kernel *k)
{
    if (k->n_outer == 0)
        return 0;
    int lo = k->n_outer - 1, li = nvars(k) - 1, outer_unit = 0;
    for (int i = 0; i < k->n_loads; i++) {
        tgc_sdim so = k->loads[i].at.stride[lo], si = k->loads[i].at.stride[li];
        if (TGC_SDIM_IS_CONST(si) && si == 1)
            return 0;
        if (TGC_SDIM_IS_CONST(so) && so == 1)
            outer_unit = 1;
    }
    return outer_unit;
}

/* How a phase sweeps: a row of the plain kernel, a chunk of a row (split part), or the
 * partials of a row (split finish). */
typedef enum { PH_ROW, PH_PART, PH_FIN } phase_mode;

/* The row's threads combine phase p's accumulators: a warp by shuffles, a block through
 * shared memory. */
static void emit_phase_combine(rc *c, int p)
{
    const kir_kernel *k = c->k;
    const tgc_c_dialect *d = c->d;
    int has_red = 0;
    for (int r = 0; r < k->n_reduces; r++)
        has_red |= k->reduces[r].phase == p;
    if (!has_red)
        return;
    tgc_sb_puts(c->o, "        if (tpr_ > 1) {\n");
    for (int r = 0; r < k->n_reduces; r++)
        if (k->reduces[r].phase == p)
            tgc_sb_printf(c->o, "            a%d = %s(a%d);\n", r, warp_fn(&k->reduces[r]), r);
    tgc_sb_puts(c->o, "        }\n");
    tgc_sb_printf(c->o, "        if (tpr_ == %d) {\n", d->block_threads);
    for (int r = 0; r < k->n_reduces; r++)
        if (k->reduces[r].phase == p)
            tgc_sb_printf(c->o, "            if ((%s & %du) == 0u) red%d_[%s >> %d] = a%d;\n",
                          d->thread_idx, d->warp_size - 1, r, d->thread_idx, warp_shift(d), r);
    tgc_sb_printf(c->o, "            %s;\n", d->barrier);
    for (int r = 0; r < k->n_reduces; r++) {
        const kir_reduce *rd = &k->reduces[r];
        if (rd->phase != p)
            continue;
        tgc_dtype at = acc_dtype(k, rd);
        tgc_sb_printf(c->o, "            a%d = red%d_[0];\n", r, r);
        tgc_sb_printf(
            c->o,
            "            for (int w_ = 1; w_ < %d; w_++) { const %s x_ = red%d_[w_]; a%d = %s; }\n",
            d->block_threads / d->warp_size, tgc_c_compute_type(at), r, r,
            combine(c, rd, at, rs(c, "a%d", r), "x_"));
    }
    tgc_sb_printf(c->o, "            %s;\n        }\n", d->barrier);
}

static void emit_phase(rc *c, int p, phase_mode mode)
{
    const kir_kernel *k = c->k;
    int n = nvars(k);
    int any = 0;
    for (int r = 0; r < k->n_reduces; r++)
        if (k->reduces[r].phase == p) {
            tgc_dtype at = acc_dtype(k, &k->reduces[r]);
            tgc_sb_printf(c->o, "        a%d = %s;\n", r, acc_identity(c, &k->reduces[r], at));
            any = 1;
        }
    if (mode != PH_FIN)
        for (int s = 0; s < k->n_stores; s++)
            any |= k->stores[s].phase == p;
    if (!any)
        return;
    if (mode == PH_ROW)
        tgc_sb_puts(c->o, "        for (I j_ = lane_; j_ < l_; j_ += (I)tpr_) {\n");
    else if (mode == PH_PART)
        tgc_sb_printf(c->o, "        for (I j_ = j0_ + (I)%s; j_ < j1_; j_ += (I)%d) {\n",
                      c->d->thread_idx, c->d->block_threads);
    else
        tgc_sb_puts(c->o, "        for (I j_ = lane_; j_ < chunks_; j_ += (I)tpr_) {\n");
    c->ind = "            ";
    if (mode == PH_FIN) {
        /* the row's partials, in chunk order */
        for (int r = 0; r < k->n_reduces; r++) {
            const kir_reduce *rd = &k->reduces[r];
            tgc_dtype at = acc_dtype(k, rd);
            const char *ct = tgc_c_compute_type(at);
            tgc_sb_printf(c->o,
                          "%s{ const %s x_ = *(%sconst %s *)(scr_ + ((unsigned long long)(row_ * "
                          "chunks_ + j_) * %dull + %dull) * 8ull); a%d = %s; }\n",
                          c->ind, ct, c->d->global, ct, k->n_reduces, r, r,
                          combine(c, rd, at, rs(c, "a%d", r), "x_"));
        }
    } else {
        emit_decompose(c, "j_", k->n_outer, n);
        reset_body(c, "");
        for (int r = 0; r < k->n_reduces && !c->failed; r++) {
            const kir_reduce *rd = &k->reduces[r];
            if (rd->phase != p)
                continue;
            tgc_dtype at = acc_dtype(k, rd);
            const char *x = conv(c, val(c, rd->val), vdt(c, rd->val), at);
            tgc_sb_printf(c->o, "%s{ const %s x_ = %s; a%d = %s; }\n", c->ind,
                          tgc_c_compute_type(at), x, r, combine(c, rd, at, rs(c, "a%d", r), "x_"));
        }
        for (int s = 0; s < k->n_stores && !c->failed; s++)
            if (k->stores[s].phase == p)
                emit_store(c, &k->stores[s]);
    }
    tgc_sb_puts(c->o, "        }\n");
    c->ind = "        ";
    emit_phase_combine(c, p);
}

/* Declares the outer vars x0.. from row_. */
static void emit_row_vars(rc *c)
{
    const kir_kernel *k = c->k;
    if (k->n_outer == 0)
        return;
    tgc_sb_puts(c->o, "        I q_ = row_;\n");
    for (int d = k->n_outer - 1; d > 0; d--) {
        tgc_sb_printf(c->o, "        const I x%d = q_ %% (I)%s;\n", d, dim_expr(c, k->extent[d]));
        tgc_sb_printf(c->o, "        q_ /= (I)%s;\n", dim_expr(c, k->extent[d]));
    }
    tgc_sb_puts(c->o, "        const I x0 = q_;\n");
}

static void emit_row_stores(rc *c)
{
    const kir_kernel *k = c->k;
    int n = nvars(k), any_row = 0;
    for (int s = 0; s < k->n_stores; s++)
        any_row |= k->stores[s].phase < 0;
    if (!any_row)
        return;
    /* inner vars at 0 (their strides there are 0), on the row's first thread */
    for (int d = k->n_outer; d < n; d++)
        c->var[d] = "0";
    tgc_sb_puts(c->o, "        if (lane_ == (I)0) {\n");
    c->ind = "            ";
    reset_body(c, "");
    for (int s = 0; s < k->n_stores && !c->failed; s++)
        if (k->stores[s].phase < 0)
            emit_store(c, &k->stores[s]);
    tgc_sb_puts(c->o, "        }\n");
    c->ind = "        ";
    for (int d = k->n_outer; d < n; d++)
        c->var[d] = rs(c, "x%d", d);
}

/* The shared arrays the block combine of every reduction goes through. */
static void emit_red_arrays(rc *c)
{
    const kir_kernel *k = c->k;
    for (int r = 0; r < k->n_reduces; r++)
        tgc_sb_printf(c->o, "    %s%s red%d_[%d];\n", c->d->shared,
                      tgc_c_compute_type(acc_dtype(k, &k->reduces[r])), r,
                      c->d->block_threads / c->d->warp_size);
}

/* The grid-stride loop over rows, tpr_ threads per row, and the row's vars. */
static void emit_row_loop(rc *c)
{
    const tgc_c_dialect *d = c->d;
    tgc_sb_printf(c->o,
                  "    const int rpb_ = %d / tpr_;\n"
                  "    const I lane_ = (I)((int)%s %% tpr_);\n"
                  "    for (I row_ = (I)%s * (I)rpb_ + (I)((int)%s / tpr_); row_ < rows_;\n"
                  "         row_ += (I)%s * (I)rpb_) {\n",
                  d->block_threads, d->thread_idx, d->block_idx, d->thread_idx, d->grid_dim);
}

static void emit_accs(rc *c)
{
    const kir_kernel *k = c->k;
    for (int d = 0; d < nvars(k); d++)
        c->var[d] = rs(c, "x%d", d);
    c->ind = "        ";
    emit_row_vars(c);
    for (int r = 0; r < k->n_reduces; r++)
        tgc_sb_printf(c->o, "        %s a%d;\n", tgc_c_compute_type(acc_dtype(k, &k->reduces[r])),
                      r);
}

/* A split applies to one-phase reductions without stores after the reduction's phase. */
static int splittable(const kir_kernel *k)
{
    if (k->n_phases != 1 || k->n_reduces == 0)
        return 0;
    for (int s = 0; s < k->n_stores; s++)
        if (k->stores[s].phase > 0)
            return 0;
    return 1;
}

static void emit_split(rc *c, const char *fname)
{
    const kir_kernel *k = c->k;
    const tgc_c_dialect *d = c->d;
    int n = nvars(k), nb = k->n_bufs > 0 ? k->n_bufs : 1;
    tgc_sb_printf(c->o, "struct %s_pb { void *p[%d]; };\n", fname, nb + 1);
    for (int part = 1; part >= 0; part--) {
        emit_run_head(c, fname, part ? "_part" : "_fin", "_pb");
        emit_buf_ptrs(c);
        tgc_sb_printf(c->o, "    %schar *scr_ = (%schar *)b.p[%d];\n", d->global, d->global, nb);
        emit_red_arrays(c);
        tgc_sb_printf(c->o, "    const I rows_ = (I)%s;\n", extent_product(c, 0, k->n_outer));
        tgc_sb_printf(c->o, "    const I l_ = (I)%s;\n", extent_product(c, k->n_outer, n));
        tgc_sb_puts(
            c->o, "    const I chunks_ = (I)tgc_split_chunks((long long)rows_, (long long)l_);\n");
        if (part) {
            tgc_sb_printf(c->o,
                          "    const int tpr_ = %d;\n"
                          "    const I cl_ = (l_ + chunks_ - (I)1) / chunks_;\n"
                          "    for (I blk_ = (I)%s; blk_ < rows_ * chunks_; blk_ += "
                          "(I)%s) {\n"
                          "        const I row_ = blk_ / chunks_, ch_ = blk_ %% chunks_;\n"
                          "        const I j0_ = ch_ * cl_;\n"
                          "        const I j1_ = j0_ + cl_ < l_ ? j0_ + cl_ : l_;\n",
                          d->block_threads, d->block_idx, d->grid_dim);
        } else {
            tgc_sb_printf(c->o, "    const int tpr_ = chunks_ <= (I)%d ? %d : %d;\n",
                          TGC_C_WARP_ROW_MAX, d->warp_size, d->block_threads);
            emit_row_loop(c);
        }
        emit_accs(c);
        emit_phase(c, 0, part ? PH_PART : PH_FIN);
        if (part) {
            tgc_sb_printf(c->o, "        if (%s == 0u) {\n", d->thread_idx);
            for (int r = 0; r < k->n_reduces; r++)
                tgc_sb_printf(c->o,
                              "            *(%s%s *)(scr_ + ((unsigned long long)blk_ * %dull + "
                              "%dull) * 8ull) = a%d;\n",
                              d->global, tgc_c_compute_type(acc_dtype(k, &k->reduces[r])),
                              k->n_reduces, r, r);
            tgc_sb_puts(c->o, "        }\n");
        } else {
            emit_row_stores(c);
        }
        tgc_sb_puts(c->o, "    }\n}\n\n");
        c->ind = "    ";
    }
}

static void emit_rows(rc *c, const char *fname, tgc_c_launch *launch)
{
    const kir_kernel *k = c->k;
    const tgc_c_dialect *d = c->d;
    int n = nvars(k);
    int col = column_kernel(k);
    launch->column = col;
    emit_run_head(c, fname, "", "_b");
    emit_buf_ptrs(c);
    emit_red_arrays(c);
    tgc_sb_printf(c->o, "    const I rows_ = (I)%s;\n", extent_product(c, 0, k->n_outer));
    tgc_sb_printf(c->o, "    const I l_ = (I)%s;\n", extent_product(c, k->n_outer, n));
    /* threads per row: the same rule as tgc_c_launch_dims */
    if (col)
        tgc_sb_printf(c->o, "    const int tpr_ = rows_ >= (I)%d ? 1 : (l_ <= (I)%d ? %d : %d);\n",
                      TGC_C_COLUMN_ROWS_MIN, TGC_C_WARP_ROW_MAX, d->warp_size, d->block_threads);
    else
        tgc_sb_printf(c->o, "    const int tpr_ = l_ <= (I)%d ? %d : %d;\n", TGC_C_WARP_ROW_MAX,
                      d->warp_size, d->block_threads);
    emit_row_loop(c);
    emit_accs(c);
    for (int p = 0; p < k->n_phases && !c->failed; p++)
        emit_phase(c, p, PH_ROW);
    emit_row_stores(c);
    tgc_sb_puts(c->o, "    }\n}\n\n");
    c->ind = "    ";
}

tgc_status tgc_c_render_loop(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *k,
                             const kir_args *slots, const char *fname, tgc_c_launch *launch)
{
    tgc_status st = dialect_check(d);
    if (st != TGC_OK)
        return st;
    if (!out || !k || !slots || !fname || !launch)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc %s: rendering a LOOP kernel needs out, k, slots, fname and "
                             "launch",
                             d->tag);
    if (k->kind != KIR_LOOP)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc %s: kernel k%d is a template, not a LOOP kernel", d->tag, k->id);
    if (nvars(k) < 1 || nvars(k) > KIR_MAX_DIMS)
        return tgc_set_error(TGC_ERR_COMPILE, "tgc %s: kernel k%d has %d domain vars", d->tag,
                             k->id, nvars(k));
    memset(launch, 0, sizeof *launch);
    launch->block_threads = d->block_threads;
    launch->warp_size = d->warp_size;
    launch->blocks_per_sm = d->threads_per_sm / d->block_threads;
    launch->vec = 1;
    int rows = !tgc_c_loop_is_flat(k);
    launch->shape = rows ? TGC_C_SHAPE_ROWS : TGC_C_SHAPE_FLAT;
    rc c;
    rc_init(&c, d, out, k, slots);
    c.typed_bufs = 1;
    c.emitted = calloc((size_t)(k->n_vals ? k->n_vals : 1), 1);
    if (!c.emitted) {
        oom(&c);
        rc_free(&c);
        return TGC_ERR_OOM;
    }
    int nb = k->n_bufs > 0 ? k->n_bufs : 1,
        nw = kir_args_words(slots) > 0 ? kir_args_words(slots) : 1;
    tgc_sb_printf(out, "/* kernel k%d: %s, %d outer x %d inner vars, %d phase(s) */\n", k->id,
                  rows ? "rows" : "flat", k->n_outer, k->n_inner, k->n_phases);
    tgc_sb_printf(out, "struct %s_b { void *p[%d]; };\nstruct %s_s { long long v[%d]; };\n", fname,
                  nb, fname, nw);
    if (rows)
        emit_rows(&c, fname, launch);
    else
        emit_flat(&c, fname, launch);
    if (!c.failed)
        emit_entry(&c, fname, "", "_b");
    if (rows && splittable(k) && !c.failed) {
        emit_split(&c, fname);
        if (!c.failed) {
            emit_entry(&c, fname, "_part", "_pb");
            emit_entry(&c, fname, "_fin", "_pb");
        }
        launch->split = 1;
    }
    st = rc_status(&c);
    free(c.emitted);
    rc_free(&c);
    return st;
}

int tgc_c_loop_is_flat(const kir_kernel *k)
{
    if (k->kind != KIR_LOOP || k->n_reduces > 0 || k->n_phases > 1)
        return 0;
    for (int s = 0; s < k->n_stores; s++)
        if (k->stores[s].phase != 0)
            return 0;
    return 1;
}

/* ---- batches ----------------------------------------------------------------------------- */

tgc_status tgc_c_render_batch(const tgc_c_dialect *d, tgc_strbuf *out, const kir_kernel *const *ks,
                              const kir_args *const *slots, int n, const char *fname,
                              tgc_c_launch *launches)
{
    tgc_status st = dialect_check(d);
    if (st != TGC_OK)
        return st;
    if (!out || !ks || !slots || !fname || !launches || n < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc %s: rendering a batch needs out, kernels, slots, fname and "
                             "launches",
                             d->tag);
    for (int j = 0; j < n; j++)
        if (!ks[j] || !tgc_c_loop_is_flat(ks[j]))
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc %s: a batch holds flat LOOP kernels only (member %d)", d->tag,
                                 j);
    /* members: device functions whose block index and grid size are the batch's share of
     * the grid, which the entry puts in shared memory for the block */
    char kq[160];
    snprintf(kq, sizeof kq, "%s void", d->device_fn);
    tgc_c_dialect md = *d;
    md.kernel = kq;
    md.launch_bounds = NULL;
    md.block_idx = "tgc_bx_";
    md.grid_dim = "tgc_gx_";
    tgc_sb_printf(out,
                  "/* a batch of %d flat loop kernels launched as one: blocks [e[j - 1], e[j]) "
                  "run member j */\nstatic %sunsigned tgc_bx_, tgc_gx_;\n",
                  n, d->shared);
    char name[64];
    for (int j = 0; j < n && st == TGC_OK; j++) {
        snprintf(name, sizeof name, "%s_m%d", fname, j);
        st = tgc_c_render_loop(&md, out, ks[j], slots[j], name, &launches[j]);
    }
    if (st != TGC_OK)
        return st;
    tgc_sb_printf(out, "struct %s_e { unsigned e[%d]; };\n", fname, n);
    tgc_sb_printf(out, "%s", d->kernel);
    if (d->launch_bounds) {
        char bt[16];
        snprintf(bt, sizeof bt, "%d", d->block_threads);
        tgc_sb_puts(out, " ");
        const char *arg = bt;
        sb_subst(out, d->launch_bounds, 1, &arg);
    }
    tgc_sb_printf(out, " %s(", fname);
    for (int j = 0; j < n; j++)
        tgc_sb_printf(out, "%s_m%d_b b%d, %s_m%d_s s%d, ", fname, j, j, fname, j, j);
    tgc_sb_printf(out, "%s_e e)\n{\n    const unsigned x_ = %s;\n", fname, d->block_idx);
    for (int j = 0; j < n; j++) {
        tgc_sb_printf(out, "    if (x_ < e.e[%d]) {\n        if (%s == 0) {\n", j, d->thread_idx);
        if (j)
            tgc_sb_printf(out,
                          "            tgc_bx_ = x_ - e.e[%d];\n"
                          "            tgc_gx_ = e.e[%d] - e.e[%d];\n",
                          j - 1, j, j - 1);
        else
            tgc_sb_puts(out, "            tgc_bx_ = x_;\n            tgc_gx_ = e.e[0];\n");
        tgc_sb_printf(out,
                      "        }\n        %s;\n        %s_m%d(b%d, s%d);\n        return;\n    }\n",
                      d->barrier, fname, j, j, j);
    }
    tgc_sb_puts(out, "}\n\n");
    return out->failed ? tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory", d->tag) : TGC_OK;
}

/* ---- launch ------------------------------------------------------------------------------ */

static int64_t prod(const int64_t *e, int lo, int hi)
{
    int64_t p = 1;
    for (int d = lo; d < hi; d++) {
        if (e[d] <= 0)
            return 0;
        p = p > INT64_MAX / e[d] ? INT64_MAX : p * e[d];
    }
    return p;
}

void tgc_c_launch_dims(const tgc_c_launch *l, const kir_kernel *k, const int64_t *extents, int sms,
                       unsigned grid[3], unsigned block[3], unsigned *smem)
{
    const int bt = l->block_threads;
    int64_t cap = (int64_t)(sms > 0 ? sms : 1) * (l->blocks_per_sm > 0 ? l->blocks_per_sm : 8);
    int64_t blocks;
    if (l->shape == TGC_C_SHAPE_FLAT) {
        int64_t n = prod(extents, 0, nvars(k));
        int64_t per = l->vec > 1 ? l->vec : 1;
        int64_t groups = (n + per - 1) / per;
        blocks = (groups + bt - 1) / bt;
    } else {
        int64_t rows = prod(extents, 0, k->n_outer), len = prod(extents, k->n_outer, nvars(k));
        int tpr = l->column && rows >= TGC_C_COLUMN_ROWS_MIN ? 1
                  : len <= TGC_C_WARP_ROW_MAX                ? l->warp_size
                                                             : bt;
        int64_t rpb = bt / tpr;
        blocks = (rows + rpb - 1) / rpb;
    }
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    grid[0] = (unsigned)blocks;
    grid[1] = grid[2] = 1;
    block[0] = (unsigned)bt;
    block[1] = block[2] = 1;
    if (smem)
        *smem = l->smem_bytes;
}

int64_t tgc_c_split_chunks(int64_t rows, int64_t len)
{
    if (rows <= 0 || rows >= TGC_C_SPLIT_ROWS_MAX || len < TGC_C_SPLIT_LEN_MIN)
        return 1;
    int64_t a = (len + TGC_C_SPLIT_CHUNK - 1) / TGC_C_SPLIT_CHUNK;
    int64_t b = (TGC_C_SPLIT_BLOCKS + rows - 1) / rows;
    int64_t c = a < b ? a : b;
    return c < 2 ? 1 : c;
}

int tgc_c_split_dims(const tgc_c_launch *l, const kir_kernel *k, const int64_t *extents, int sms,
                     unsigned grid_part[3], unsigned grid_fin[3], size_t *scratch_bytes)
{
    if (!l->split || l->shape != TGC_C_SHAPE_ROWS)
        return 0;
    int64_t rows = prod(extents, 0, k->n_outer), len = prod(extents, k->n_outer, nvars(k));
    int64_t chunks = tgc_c_split_chunks(rows, len);
    if (chunks < 2)
        return 0;
    int64_t cap = (int64_t)(sms > 0 ? sms : 1) * (l->blocks_per_sm > 0 ? l->blocks_per_sm : 8);
    int64_t bp = rows * chunks < cap ? rows * chunks : cap;
    int tpr = chunks <= TGC_C_WARP_ROW_MAX ? l->warp_size : l->block_threads;
    int64_t rpb = l->block_threads / tpr, bf = (rows + rpb - 1) / rpb;
    grid_part[0] = (unsigned)(bp < 1 ? 1 : bp);
    grid_fin[0] = (unsigned)(bf < 1 ? 1 : bf > cap ? cap : bf);
    grid_part[1] = grid_part[2] = grid_fin[1] = grid_fin[2] = 1;
    *scratch_bytes = (size_t)(rows * chunks * k->n_reduces) * 8u;
    return 1;
}

/* ---- programs ---------------------------------------------------------------------------- */

char *tgc_c_render_program(const tgc_c_dialect *d, const kir_kernel *const *ks,
                           const kir_args *const *slots, const char *const *names, int n,
                           tgc_c_launch *launches)
{
    tgc_strbuf sb = {0};
    if (tgc_c_prelude(d, &sb) != TGC_OK) {
        tgc_sb_free(&sb);
        return NULL;
    }
    tgc_sb_puts(&sb, "\n");
    for (int i = 0; i < n; i++) {
        tgc_c_launch tmp;
        tgc_status st =
            tgc_c_render_loop(d, &sb, ks[i], slots[i], names[i], launches ? &launches[i] : &tmp);
        if (st != TGC_OK) {
            tgc_sb_free(&sb);
            return NULL;
        }
    }
    char *r = tgc_sb_take(&sb);
    if (!r)
        tgc_set_error(TGC_ERR_OOM, "tgc %s: out of memory rendering a program", d->tag);
    return r;
}
