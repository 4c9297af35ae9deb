/* Every public op, eager vs traced-and-compiled.
 *
 * For each case of trace_eager_cases.h (one line per case: a model function applying one op,
 * and its input variants) and each input variant, the model function runs
 *   (a) eagerly: called directly, outside any trace, and
 *   (b) compiled: through tgc_compile / tgc_call,
 * on the same inputs, from the same Philox state (tgc_manual_seed before each path, so
 * dropout draws the same bits), with module tensors in two equal module copies. The outputs
 * must be equal (exactly, or within 1e-5 relative for reductions) in dtype, shape and
 * values, and so must every module tensor afterwards (batch-norm running stats in training).
 *
 * Passes per variant:
 *   static:  default config (first compile static), D = 5; two calls with fresh inputs and
 *            fresh modules: one compile, one cache hit, no graph break, no eager fallback.
 *   dynamic: cfg.dynamic = TGC_DYNAMIC_ALWAYS, D = 6 then D = 9; each compared to eager and
 *            the function must have compiled exactly once.
 *   auto:    cfg.dynamic = TGC_DYNAMIC_AUTO, D = 5, 6, 9: a static compile, one recompile
 *            with the changed dims symbolic, then a cache hit.
 *
 * Random streams: besides the per-case reseeding, three calls in a row without reseeding
 * must draw the same bits eagerly and compiled (the trace consumes nothing from the Philox
 * stream and each compiled call advances it exactly as much as an eager call).
 *
 * Coverage: every case names the public op functions it calls; the list of public ops is
 * checked against the declarations in include/tgc/ops.h, every public op must have a case,
 * and every op of src/ir/ops.def (except the graph source INPUT) must appear in the graph
 * of some compiled variant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "frontend/ops_grad.h"
#include "ir/op.h"
#include "op_test_util.h"
#include "test_shard.h"
#include "tgc/tgc.h"
#ifdef TGC_HAVE_LLVM
#include "backend/eager.h"
#endif

enum { TE_EXACT = 0, TE_REL = 1 };
#define TE_RTOL     1e-5
#define TE_STATIC_D 5
static const int64_t te_dynamic_d[2] = {6, 9};

static tgc_status te_status(const tgc_tensor *t)
{
    if (t)
        return TGC_OK;
    return tgc_last_status() != TGC_OK ? tgc_last_status() : TGC_ERR_INTERNAL;
}

/* ---- the model functions, one per case ---- */
#define TE_CASE(id, ops, tol, specs, ...)                                                          \
    static tgc_status te_fn_##id(tgc_module *self, tgc_tensor *const *in, int n_in,                \
                                 tgc_tensor **out, int n_out)                                      \
    {                                                                                              \
        (void)self;                                                                                \
        (void)in;                                                                                  \
        (void)n_in;                                                                                \
        (void)n_out;                                                                               \
        out[0] = (__VA_ARGS__);                                                                    \
        return te_status(out[0]);                                                                  \
    }
#include "trace_eager_cases.h"
#include "trace_eager_cases_more.h"
#undef TE_CASE

typedef struct te_case {
    const char *name;
    const char *ops; /* public op functions it calls, space separated */
    int tol;
    const char *specs;
    tgc_model_fn fn;
} te_case;

static const te_case te_cases[] = {
#define TE_CASE(id, ops, tol, specs, ...) {#id, ops, tol, specs, te_fn_##id},
#include "trace_eager_cases.h"
#include "trace_eager_cases_more.h"
#undef TE_CASE
};

/* Every public op of include/tgc/ops.h (checked against the header below). */
static const char *const te_public_ops[] = {
    "tgc_add",        "tgc_sub",
    "tgc_mul",        "tgc_div",
    "tgc_pow",        "tgc_maximum",
    "tgc_minimum",    "tgc_eq",
    "tgc_ne",         "tgc_lt",
    "tgc_le",         "tgc_gt",
    "tgc_ge",         "tgc_where",
    "tgc_add_scalar", "tgc_sub_scalar",
    "tgc_mul_scalar", "tgc_div_scalar",
    "tgc_pow_scalar", "tgc_clamp",
    "tgc_neg",        "tgc_abs",
    "tgc_exp",        "tgc_log",
    "tgc_sqrt",       "tgc_rsqrt",
    "tgc_tanh",       "tgc_sigmoid",
    "tgc_relu",       "tgc_gelu",
    "tgc_gelu_tanh",  "tgc_silu",
    "tgc_erf",        "tgc_cast",
    "tgc_sin",        "tgc_cos",
    "tgc_logsumexp",  "tgc_rms_norm",
    "tgc_group_norm", "tgc_sum",
    "tgc_mean",       "tgc_max",
    "tgc_argmax",     "tgc_var",
    "tgc_softmax",    "tgc_log_softmax",
    "tgc_reshape",    "tgc_reshape_sym",
    "tgc_reshape_as", "tgc_expand_sym",
    "tgc_expand_as",  "tgc_permute",
    "tgc_transpose",  "tgc_expand",
    "tgc_squeeze",    "tgc_unsqueeze",
    "tgc_slice",      "tgc_flatten",
    "tgc_contiguous", "tgc_cat",
    "tgc_stack",      "tgc_pad",
    "tgc_flip",       "tgc_embedding",
    "tgc_gather",     "tgc_index_select",
    "tgc_matmul",     "tgc_linear",
    "tgc_conv2d",     "tgc_max_pool2d",
    "tgc_avg_pool2d", "tgc_adaptive_avg_pool2d",
    "tgc_batch_norm", "tgc_layer_norm",
    "tgc_dropout",    "tgc_cross_entropy",
    "tgc_nll_loss",   "tgc_scaled_dot_product_attention",
};

/* The internal builders of the backward ops (src/frontend/ops_grad.h): not public, but
 * cases may name them, so that every op of ops.def appears in a compiled graph. */
static const char *const te_internal_ops[] = {
    "tgc_conv2d_grad_input", "tgc_conv2d_grad_weight",       "tgc_max_pool2d_grad",
    "tgc_avg_pool2d_grad",   "tgc_adaptive_avg_pool2d_grad", "tgc_embedding_grad",
    "tgc_gather_grad",       "tgc_index_select_grad",
};

/* Ops of ops.def seen in the graph of a compiled variant. */
static int te_graph_op_seen[TGC_OP_COUNT];

/* ---- input specs (grammar in trace_eager_cases.h) ---- */

#include "ops/trace_eager_specs.h"

/* Integer or bool data made on the host and loaded with tgc_from_data. */
static tgc_tensor *te_host_ints(char kind, int64_t range, const int64_t *shape, int nd,
                                uint64_t *rng)
{
    tgc_dtype dt = kind == 'b' ? TGC_BOOL : kind == 'm' || kind == 'i' ? TGC_I64 : TGC_I32;
    int64_t n = numel_of(shape, nd);
    size_t es = tgc_dtype_size(dt);
    unsigned char *buf = calloc((size_t)(n ? n : 1), es);
    if (!buf)
        return NULL;
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = te_next(rng);
        double x;
        switch (kind) {
        case 'b': x = (double)(r & 1); break;
        case 'q':
        case 'm': x = (double)(int64_t)(r % 9) - 4; break;
        case 'v': x = (double)(r % 6) + 1; break;
        default: x = range > 0 ? (double)(r % (uint64_t)range) : 0; break;
        }
        tgc_store(buf, dt, k, x);
    }
    tgc_tensor *t = tgc_from_data(buf, (size_t)n * es, shape, nd, dt, tgc_cpu());
    free(buf);
    return t;
}

static tgc_tensor *te_fill(char kind, int64_t range, const int64_t *shape, int nd, uint64_t *rng)
{
    switch (kind) {
    case 'n': return tgc_randn(shape, nd, TGC_F32, tgc_cpu());
    case 'u': return tgc_rand(shape, nd, TGC_F32, tgc_cpu());
    case 'p': return tgc_add_scalar(tgc_rand(shape, nd, TGC_F32, tgc_cpu()), 0.5);
    case 'h': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_F16);
    case 'g': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_BF16);
    case 'd': return tgc_cast(tgc_randn(shape, nd, TGC_F32, tgc_cpu()), TGC_F64);
    default: return te_host_ints(kind, range, shape, nd, rng);
    }
}

/* One input of a variant at dynamic size D, with its layout (a view for T, S, E). */
static tgc_tensor *te_make(const te_input *in, int64_t D, uint64_t *rng)
{
    int nd = in->ndim;
    int64_t shape[TGC_MAX_DIMS], base[TGC_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = base[d] = in->is_d[d] ? D : in->shape[d];
    switch (in->layout) {
    case 'T':
        base[nd - 2] = shape[nd - 1];
        base[nd - 1] = shape[nd - 2];
        break;
    case 'S': base[nd - 1] = 2 * shape[nd - 1]; break;
    case 'E': base[0] = 1; break;
    default: break;
    }
    tgc_tensor *t = te_fill(in->kind, in->range_is_d ? D : in->range, base, nd, rng);
    switch (in->layout) {
    case 'T': return tgc_transpose(t, -1, -2);
    case 'S': return tgc_slice(t, -1, 0, base[nd - 1], 2);
    case 'E': return tgc_expand(t, shape, nd);
    default: return t;
    }
}

/* ---- comparing ---- */

typedef struct te_ctx {
    const te_case *c;
    const te_variant *v;
    int vi;
    const char *pass;
    int64_t D;
    int failures;
} te_ctx;

static void te_fail(te_ctx *x, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->failures++;
    print_message("FAIL %s [variant %d \"%s\", %s pass, D=%lld]: %s\n", x->c->name, x->vi,
                  x->v ? x->v->text : "", x->pass, (long long)x->D, msg);
}

static void te_shape_str(const tgc_tensor *t, char *buf, size_t n)
{
    int64_t s[TGC_MAX_DIMS];
    int nd = tgc_shape(t, s);
    size_t k = (size_t)snprintf(buf, n, "%s[", tgc_dtype_name(tgc_dtype_of(t)));
    for (int d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* Under interp, compiled runs the same kernels as eager: exact cases must be bitwise equal.
 * A code-generating backend (TGC_BACKEND=llvm or auto) fuses and vectorizes, so its float
 * results may differ by rounding: per-dtype tolerances then (integers stay exact). */
static int te_interp = 1;
static int te_eager_backend;

/* torch.testing's default tolerances per dtype: |a - b| <= atol + rtol * |eager|. */
static void te_dtype_tol(tgc_dtype dt, double *rtol, double *atol)
{
    switch (dt) {
    case TGC_F16: *rtol = 1e-3, *atol = 1e-5; break;
    case TGC_BF16: *rtol = 1.6e-2, *atol = 1e-5; break;
    case TGC_F64: *rtol = 1e-7, *atol = 1e-7; break;
    case TGC_F32: *rtol = 1.3e-6, *atol = 1e-5; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

static int te_close(double a, double b, int tol, tgc_dtype dt)
{
    if (a == b || (isnan(a) && isnan(b)))
        return 1;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b))
        return 0;
    double m = fmax(fabs(a), fabs(b));
    if (tol != TE_EXACT && fabs(a - b) <= TE_RTOL * fmax(m, 1e-3))
        return 1;
    if (te_interp)
        return 0;
    double rtol, atol;
    te_dtype_tol(dt, &rtol, &atol);
    return fabs(a - b) <= atol + rtol * fabs(a);
}

/* 1 when eager tensor e and compiled tensor c agree in dtype, shape and values. */
static int te_compare(te_ctx *x, const char *what, const tgc_tensor *e, const tgc_tensor *c,
                      int tol)
{
    char se[128], sc[128];
    if (!e || !c) {
        te_fail(x, "%s: %s output is NULL", what, e ? "compiled" : "eager");
        return 0;
    }
    te_shape_str(e, se, sizeof se);
    te_shape_str(c, sc, sizeof sc);
    if (strcmp(se, sc) != 0) {
        te_fail(x, "%s: eager gives %s, compiled gives %s", what, se, sc);
        return 0;
    }
    double *ve = try_values_of(e), *vc = try_values_of(c);
    int ok = ve && vc;
    if (!ok)
        te_fail(x, "%s: could not read values: %s", what, tgc_last_error());
    int64_t n = tgc_numel(e), bad = 0, first = -1;
    for (int64_t k = 0; ok && k < n; k++)
        if (!te_close(ve[k], vc[k], tol, tgc_dtype_of(e)) && bad++ == 0)
            first = k;
    if (ok && bad) {
        te_fail(x, "%s %s: %lld of %lld elements differ; first at %lld: eager %.9g, compiled %.9g",
                what, se, (long long)bad, (long long)n, (long long)first, ve[first], vc[first]);
        ok = 0;
    }
    free(ve);
    free(vc);
    return ok;
}

/* ---- running one variant ---- */

static uint64_t te_seed(int case_i, int vi, int rep, int64_t D)
{
    return 0x7E57ull + (uint64_t)case_i * 1000003ull + (uint64_t)vi * 1009ull +
           (uint64_t)rep * 101ull + (uint64_t)D;
}

/* Runs variant v at size D: eager, then compiled through f, both from equal inputs, equal
 * module copies and the same Philox state; compares outputs and module tensors. */
static void te_run(te_ctx *x, int case_i, tgc_fn *f, int rep)
{
    const te_variant *v = x->v;
    tgc_module *me = NULL, *mc = NULL;
    tgc_scope_push();
    uint64_t rng = te_seed(case_i, x->vi, rep, x->D);
    tgc_manual_seed(rng);
    tgc_tensor *args[TE_MAX_INPUTS];
    int n_args = 0, n_mod = 0;
    for (int k = 0; k < v->n; k++) {
        tgc_tensor *t = te_make(&v->in[k], x->D, &rng);
        if (!t) {
            te_fail(x, "making input %d failed: %s", k, tgc_last_error());
            goto out;
        }
        if (v->in[k].role == 0) {
            args[n_args++] = t;
            continue;
        }
        if (!me) {
            me = tgc_module_create("eager", NULL);
            mc = tgc_module_create("compiled", NULL);
        }
        char name[16];
        snprintf(name, sizeof name, "p%d", n_mod++);
        int ok = v->in[k].role == 1
                     ? tgc_module_param(me, name, t) && tgc_module_param(mc, name, t)
                     : tgc_module_buffer(me, name, t) && tgc_module_buffer(mc, name, t);
        if (!ok) {
            te_fail(x, "adding module tensor %s failed: %s", name, tgc_last_error());
            goto out;
        }
    }

    tgc_tensor *eo[1] = {NULL}, *co[1] = {NULL};
    tgc_clear_error();
    tgc_manual_seed(0xD0D0 + (uint64_t)rep);
#ifdef TGC_HAVE_LLVM
    tgc_eager_force_interp(1); /* the reference side is always the interp oracle */
#endif
    tgc_status st = x->c->fn(me, args, n_args, eo, 1);
#ifdef TGC_HAVE_LLVM
    tgc_eager_force_interp(0);
#endif
    if (st != TGC_OK) {
        te_fail(x, "eager run failed: %s: %s", tgc_status_str(st), tgc_last_error());
        goto out;
    }
    tgc_clear_error();
    tgc_manual_seed(0xD0D0 + (uint64_t)rep);
    st = tgc_call(f, mc, args, n_args, co, 1);
    if (st != TGC_OK) {
        te_fail(x, "tgc_call failed: %s: %s", tgc_status_str(st), tgc_last_error());
        goto out;
    }
    te_compare(x, "output", eo[0], co[0], x->c->tol);
    for (int k = 0; k < n_mod; k++) {
        char name[16], what[48];
        snprintf(name, sizeof name, "p%d", k);
        snprintf(what, sizeof what, "module tensor %s after the call", name);
        te_compare(x, what, tgc_module_get(me, name), tgc_module_get(mc, name), TE_EXACT);
    }
out:
    tgc_scope_pop();
    tgc_module_free(me);
    tgc_module_free(mc);
}

/* Marks the ops of f's most recent variant as covered; 0 when it has no graph. */
static int te_note_graph_ops(const tgc_fn *f)
{
    char *text = tgc_fn_graph(f, 0, 0);
    if (!text)
        return 0;
    for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        const char *eq = strstr(line, " = ");
        const char *nl = strchr(line, '\n');
        if (line[0] != '%' || !eq || (nl && eq > nl))
            continue;
        const char *name = eq + 3, *paren = strchr(name, '(');
        if (!paren)
            continue;
        for (int op = 0; op < TGC_OP_COUNT; op++) {
            const char *on = tgc_op_name((tgc_op)op);
            if (strlen(on) == (size_t)(paren - name) && strncmp(on, name, strlen(on)) == 0)
                te_graph_op_seen[op] = 1;
        }
    }
    tgc_free(text);
    return 1;
}

static void te_check_stats(te_ctx *x, const tgc_fn *f, uint64_t compiles, uint64_t calls,
                           uint64_t hits)
{
    if (te_eager_backend) /* TGC_BACKEND=eager: every call runs eagerly, nothing compiles */
        return;
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK) {
        te_fail(x, "tgc_fn_stats failed: %s", tgc_last_error());
        return;
    }
    if (s.compiles != compiles || s.recompiles != compiles - 1)
        te_fail(x, "compiled %llu times (expected %llu); last recompile reason: %s",
                (unsigned long long)s.compiles, (unsigned long long)compiles,
                s.last_recompile_reason);
    if (s.graph_breaks || s.eager_fallbacks)
        te_fail(x, "%llu graph breaks, %llu eager fallbacks (expected none)",
                (unsigned long long)s.graph_breaks, (unsigned long long)s.eager_fallbacks);
    if (s.calls != calls || s.cache_hits != hits)
        te_fail(x, "%llu calls and %llu cache hits, expected %llu and %llu",
                (unsigned long long)s.calls, (unsigned long long)s.cache_hits,
                (unsigned long long)calls, (unsigned long long)hits);
    if (s.compiles >= 1 && !s.graph_breaks && !te_note_graph_ops(f))
        te_fail(x, "tgc_fn_graph gives no graph: %s", tgc_last_error());
}

static void te_run_case(void **state)
{
    const te_case *c = *state;
    int case_i = (int)(c - te_cases);
    te_ctx x = {c, NULL, 0, "parse", 0, 0};
    int n_dynamic = 0;
    const char *sp = c->specs;
    for (int vi = 0; *sp; vi++) {
        te_variant v;
        x.v = NULL;
        x.vi = vi;
        if (!te_parse_variant(&sp, &v)) {
            te_fail(&x, "malformed input spec near \"%s\"", sp);
            break;
        }
        x.v = &v;

        /* static: default config, two calls, one compile */
        tgc_config cfg = tgc_config_default();
        x.pass = "static";
        x.D = TE_STATIC_D;
        tgc_fn *f = tgc_compile(c->fn, c->name, &cfg);
        assert_non_null(f);
        te_run(&x, case_i, f, 0);
        te_run(&x, case_i, f, 1);
        te_check_stats(&x, f, 1, 2, 1);
        tgc_fn_free(f);

        /* dynamic: every size symbolic, two sizes of D, one compile */
        if (!v.has_d)
            continue;
        n_dynamic++;
        cfg.dynamic = TGC_DYNAMIC_ALWAYS;
        x.pass = "dynamic";
        f = tgc_compile(c->fn, c->name, &cfg);
        assert_non_null(f);
        for (int k = 0; k < N_OF(te_dynamic_d); k++) {
            x.D = te_dynamic_d[k];
            te_run(&x, case_i, f, k);
        }
        te_check_stats(&x, f, 1, N_OF(te_dynamic_d), N_OF(te_dynamic_d) - 1);
        tgc_fn_free(f);

        /* automatic: static at D = 5, one recompile with the changed dims symbolic at the
         * first new size, then a cache hit at the next */
        cfg.dynamic = TGC_DYNAMIC_AUTO;
        x.pass = "auto-dynamic";
        f = tgc_compile(c->fn, c->name, &cfg);
        assert_non_null(f);
        x.D = TE_STATIC_D;
        te_run(&x, case_i, f, 0);
        for (int k = 0; k < N_OF(te_dynamic_d); k++) {
            x.D = te_dynamic_d[k];
            te_run(&x, case_i, f, k + 1);
        }
        te_check_stats(&x, f, 2, N_OF(te_dynamic_d) + 1, N_OF(te_dynamic_d) - 1);
        tgc_fn_free(f);
    }
    if (n_dynamic == 0) {
        x.v = NULL;
        x.pass = "dynamic";
        te_fail(&x, "no input variant uses D, so the case has no dynamic-shape pass");
    }
    if (x.failures)
        fail_msg("%s: %d failed checks (listed above)", c->name, x.failures);
}

/* ---- coverage ---- */

static int te_is_public(const char *name, size_t len)
{
    for (int k = 0; k < N_OF(te_public_ops); k++)
        if (strlen(te_public_ops[k]) == len && strncmp(te_public_ops[k], name, len) == 0)
            return 1;
    return 0;
}

/* include/tgc/ops.h, found from this file's path. */
static char *te_read_ops_header(void)
{
    const char *me = __FILE__, *tail = strstr(me, "tests/ops/");
    char path[1024];
    snprintf(path, sizeof path, "%.*sinclude/tgc/ops.h", tail ? (int)(tail - me) : 0, me);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        print_message("cannot open %s\n", path);
        return NULL;
    }
    char *buf = calloc(1, 1 << 20);
    if (buf && fread(buf, 1, (1 << 20) - 1, fp) == 0)
        print_message("%s is empty\n", path);
    fclose(fp);
    return buf;
}

/* The list above is exactly the ops declared in ops.h; every case names only public ops (or
 * the backward ops' internal builders); every public op has a case. */
static void test_public_ops_covered(void **state)
{
    (void)state;
    int missing = 0;
    char *hdr = te_read_ops_header();
    assert_non_null(hdr);
    int declared = 0;
    const char *pat = "TGC_API tgc_tensor *";
    for (const char *p = strstr(hdr, pat); p; p = strstr(p + 1, pat)) {
        const char *name = p + strlen(pat);
        size_t len = strspn(name, "abcdefghijklmnopqrstuvwxyz_0123456789");
        if (len > 6 && strncmp(name + len - 6, "_sized", 6) == 0)
            len -= 6; /* tgc_conv2d_sized: the entry point behind the inline tgc_conv2d */
        declared++;
        if (!te_is_public(name, len)) {
            print_message("ops.h declares %.*s, missing from te_public_ops\n", (int)len, name);
            missing++;
        }
    }
    free(hdr);
    assert_int_equal(declared, N_OF(te_public_ops));

    int covered[N_OF(te_public_ops)] = {0};
    for (int i = 0; i < N_OF(te_cases); i++) {
        const char *p = te_cases[i].ops;
        while (*p) {
            size_t len = strcspn(p, " ");
            int found = 0;
            for (int k = 0; k < N_OF(te_public_ops); k++)
                if (strlen(te_public_ops[k]) == len && strncmp(te_public_ops[k], p, len) == 0) {
                    covered[k] = 1;
                    found = 1;
                }
            for (int k = 0; !found && k < N_OF(te_internal_ops); k++)
                found =
                    strlen(te_internal_ops[k]) == len && strncmp(te_internal_ops[k], p, len) == 0;
            if (!found) {
                print_message("case %s names %.*s, not a public op\n", te_cases[i].name, (int)len,
                              p);
                missing++;
            }
            p += len;
            while (*p == ' ')
                p++;
        }
    }
    int n_covered = 0;
    for (int k = 0; k < N_OF(te_public_ops); k++) {
        n_covered += covered[k];
        if (!covered[k])
            print_message("public op %s has no case\n", te_public_ops[k]);
    }
    print_message("%d cases cover %d of %d public ops\n", N_OF(te_cases), n_covered,
                  N_OF(te_public_ops));
    assert_int_equal(missing, 0);
    assert_int_equal(n_covered, N_OF(te_public_ops));
}

/* Runs last: every op of ops.def but INPUT (and the collectives) appeared in a compiled
 * graph. */
static void test_graph_ops_covered(void **state)
{
    if (te_eager_backend) /* about compiled graphs: nothing compiles on the eager backend */
        skip();
    /* the ops seen by every case: a shard runs some of them (the unsharded
     * test_trace_eager_interp checks them all) */
    int shard, shards;
    test_shard_of_env(&shard, &shards);
    if (shards > 1)
        skip();
    (void)state;
    int n = 0, want = 0;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        if (op == TGC_OP_INPUT)
            continue;
        /* collectives need a process group: tests/dist/test_ddp.c compiles them on the default
         * backend and on interp, against eager, over the fake NCCL */
        if (op == TGC_OP_ALL_REDUCE || op == TGC_OP_COMM_WAIT)
            continue;
        want++;
        n += te_graph_op_seen[op];
        if (!te_graph_op_seen[op])
            print_message("op %s never appeared in a compiled graph\n", tgc_op_name((tgc_op)op));
    }
    print_message("compiled graphs covered %d of %d ops of ops.def\n", n, want);
    assert_int_equal(n, want);
}

/* Batch norm in training, spelled out: from equal module copies, one eager call and one
 * compiled call update the running stats identically, and as the formula says:
 * new = (1 - momentum) * old + momentum * batch statistic (variance unbiased). */
static tgc_status te_bn_forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)n_in;
    (void)n_out;
    out[0] = tgc_batch_norm(in[0], tgc_module_get(self, "running_mean"),
                            tgc_module_get(self, "running_var"), tgc_module_get(self, "weight"),
                            tgc_module_get(self, "bias"), tgc_module_is_training(self), 0.25, 1e-5);
    return te_status(out[0]);
}

static tgc_module *te_bn_module(tgc_tensor *rm, tgc_tensor *rv, tgc_tensor *w, tgc_tensor *b)
{
    tgc_module *m = tgc_module_create("bn", NULL);
    assert_non_null(m);
    assert_non_null(tgc_module_param(m, "weight", w));
    assert_non_null(tgc_module_param(m, "bias", b));
    assert_non_null(tgc_module_buffer(m, "running_mean", rm));
    assert_non_null(tgc_module_buffer(m, "running_var", rv));
    return m;
}

static void test_batch_norm_running_stats(void **state)
{
    if (te_eager_backend) /* about compiled graphs: nothing compiles on the eager backend */
        skip();
    (void)state;
    te_case c = {"batch_norm_running_stats", "tgc_batch_norm", TE_REL, "", te_bn_forward};
    te_ctx x = {&c, NULL, 0, "bn", 7, 0};
    tgc_scope_push();
    tgc_manual_seed(99);
    int64_t xs[4] = {7, 3, 4, 5}, cs[1] = {3};
    tgc_tensor *in = tgc_transpose(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), 2, 3);
    tgc_tensor *rm = tgc_randn(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *rv = tgc_add_scalar(tgc_rand(cs, 1, TGC_F32, tgc_cpu()), 0.5);
    tgc_tensor *w = tgc_randn(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *b = tgc_randn(cs, 1, TGC_F32, tgc_cpu());
    tgc_module *me = te_bn_module(rm, rv, w, b), *mc = te_bn_module(rm, rv, w, b);
    tgc_fn *f = tgc_compile(te_bn_forward, "bn", NULL);
    assert_non_null(f);

    tgc_tensor *eo[1], *co[1];
    assert_int_equal(te_bn_forward(me, &in, 1, eo, 1), TGC_OK);
    assert_int_equal(tgc_call(f, mc, &in, 1, co, 1), TGC_OK);
    te_compare(&x, "output", eo[0], co[0], TE_REL);
    te_compare(&x, "running_mean", tgc_module_get(me, "running_mean"),
               tgc_module_get(mc, "running_mean"), TE_EXACT);
    te_compare(&x, "running_var", tgc_module_get(me, "running_var"),
               tgc_module_get(mc, "running_var"), TE_EXACT);

    /* the formula, from eager reductions over N, H, W */
    tgc_tensor *bm = tgc_mean(in, DIMS(0, 2, 3), 3, 0), *bv = tgc_var(in, DIMS(0, 2, 3), 3, 1, 0);
    tgc_tensor *want_m = tgc_add(tgc_mul_scalar(rm, 0.75), tgc_mul_scalar(bm, 0.25));
    tgc_tensor *want_v = tgc_add(tgc_mul_scalar(rv, 0.75), tgc_mul_scalar(bv, 0.25));
    te_compare(&x, "running_mean vs formula", want_m, tgc_module_get(me, "running_mean"), TE_REL);
    te_compare(&x, "running_var vs formula", want_v, tgc_module_get(me, "running_var"), TE_REL);

    /* eval mode: a new variant (training flag is guarded) that reads the updated stats */
    tgc_module_train(me, 0);
    tgc_module_train(mc, 0);
    assert_int_equal(te_bn_forward(me, &in, 1, eo, 1), TGC_OK);
    assert_int_equal(tgc_call(f, mc, &in, 1, co, 1), TGC_OK);
    te_compare(&x, "eval output", eo[0], co[0], TE_REL);
    te_compare(&x, "running_mean after eval", tgc_module_get(me, "running_mean"),
               tgc_module_get(mc, "running_mean"), TE_EXACT);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.eager_fallbacks, 0);

    tgc_scope_pop();
    tgc_fn_free(f);
    tgc_module_free(me);
    tgc_module_free(mc);
    assert_int_equal(x.failures, 0);
}

/* In-place writes (tgc_copy_: ASSIGN in a compiled graph): a buffer updated from its own
 * value and the input, eagerly and compiled, equal after every call, with one compile. */
static tgc_status te_assign_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                    tgc_tensor **out, int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *acc = tgc_module_get(self, "acc");
    tgc_status st = tgc_copy_(acc, tgc_add(tgc_mul_scalar(acc, 0.5), in[0]));
    out[0] = tgc_mul(acc, in[0]); /* reads the written value */
    return st != TGC_OK ? st : te_status(out[0]);
}

static void test_assign_in_place(void **state)
{
    if (te_eager_backend)
        skip();
    (void)state;
    te_case c = {"assign_in_place", "tgc_copy_", TE_REL, "", te_assign_forward};
    te_ctx x = {&c, NULL, 0, "assign", 7, 0};
    tgc_scope_push();
    tgc_manual_seed(5);
    int64_t xs[2] = {5, 7};
    tgc_tensor *in = tgc_randn(xs, 2, TGC_F32, tgc_cpu());
    tgc_tensor *a0 = tgc_randn(xs, 2, TGC_F32, tgc_cpu());
    tgc_module *me = tgc_module_create("m", NULL), *mc = tgc_module_create("m", NULL);
    assert_non_null(tgc_module_buffer(me, "acc", a0));
    assert_non_null(tgc_module_buffer(mc, "acc", a0));
    tgc_fn *f = tgc_compile(te_assign_forward, "assign", NULL);
    for (int rep = 0; rep < 3; rep++) {
        tgc_tensor *eo[1], *co[1];
        assert_int_equal(te_assign_forward(me, &in, 1, eo, 1), TGC_OK);
        assert_int_equal(tgc_call(f, mc, &in, 1, co, 1), TGC_OK);
        te_compare(&x, "output", eo[0], co[0], TE_REL);
        te_compare(&x, "acc", tgc_module_get(me, "acc"), tgc_module_get(mc, "acc"), TE_REL);
    }
    te_note_graph_ops(f);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    tgc_scope_pop();
    tgc_fn_free(f);
    tgc_module_free(me);
    tgc_module_free(mc);
    assert_int_equal(x.failures, 0);
}

/* ---- the Philox stream across calls, without reseeding between them ---- */

static tgc_status te_random_ops(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = tgc_add(tgc_dropout(in[0], 0.5, 1),
                     tgc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.3, 0, 0.0));
    return te_status(out[0]);
}

/* tgc_rand / tgc_randn called inside the model function: fresh numbers on every call. */
static tgc_status te_random_create(tgc_module *self, tgc_tensor *const *in, int n_in,
                                   tgc_tensor **out, int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = tgc_add(tgc_mul(in[0], tgc_rand(SHAPE(1, 6), 2, TGC_F32, tgc_cpu())),
                     tgc_randn(SHAPE(4, 6), 2, TGC_F32, tgc_cpu()));
    return te_status(out[0]);
}

/* Three eager calls and three compiled calls, each trio from the same seed. */
static void te_stream_check(const char *name, tgc_model_fn fn)
{
    enum { CALLS = 3 };
    te_case c = {name, "", TE_EXACT, "", fn};
    te_ctx x = {&c, NULL, 0, "stream", 4, 0};
    tgc_scope_push();
    tgc_manual_seed(11);
    tgc_tensor *in = tgc_transpose(tgc_randn(SHAPE(6, 4), 2, TGC_F32, tgc_cpu()), 0, 1);
    tgc_tensor *eo[CALLS], *co[CALLS];
    tgc_fn *f = tgc_compile(fn, name, NULL);
    assert_non_null(f);
    tgc_manual_seed(12);
    for (int k = 0; k < CALLS; k++)
        assert_int_equal(fn(NULL, &in, 1, &eo[k], 1), TGC_OK);
    tgc_manual_seed(12);
    for (int k = 0; k < CALLS; k++)
        assert_int_equal(tgc_call(f, NULL, &in, 1, &co[k], 1), TGC_OK);
    for (int k = 0; k < CALLS; k++) {
        char what[32];
        snprintf(what, sizeof what, "call %d", k);
        te_compare(&x, what, eo[k], co[k], TE_REL);
    }
    te_check_stats(&x, f, 1, CALLS, CALLS - 1);
    tgc_scope_pop();
    tgc_fn_free(f);
    assert_int_equal(x.failures, 0);
}

static void test_random_stream_dropout(void **state)
{
    (void)state;
    te_stream_check("random_stream_dropout", te_random_ops);
}

static void test_random_stream_rand_in_fn(void **state)
{
    (void)state;
    te_stream_check("random_stream_rand_in_fn", te_random_create);
}

int main(void)
{
    enum { N_EXTRA = 6 }; /* the tests added below besides the cases */
    struct CMUnitTest *tests = calloc((size_t)N_OF(te_cases) + N_EXTRA, sizeof *tests);
    if (!tests)
        return 1;
    int n = 0;
    tests[n++] =
        (struct CMUnitTest){"public_ops_covered", test_public_ops_covered, NULL, NULL, NULL};
    for (int i = 0; i < N_OF(te_cases); i++)
        tests[n++] =
            (struct CMUnitTest){te_cases[i].name, te_run_case, NULL, NULL, (void *)&te_cases[i]};
    tests[n++] = (struct CMUnitTest){"assign_in_place", test_assign_in_place, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"batch_norm_running_stats", test_batch_norm_running_stats,
                                     NULL, NULL, NULL};
    tests[n++] =
        (struct CMUnitTest){"random_stream_dropout", test_random_stream_dropout, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"random_stream_rand_in_fn", test_random_stream_rand_in_fn,
                                     NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"graph_ops_covered", test_graph_ops_covered, NULL, NULL, NULL};
    const char *be = getenv("TGC_BACKEND");
    te_interp = be && strcmp(be, "interp") == 0;
    te_eager_backend = be && strcmp(be, "eager") == 0;
    print_message("backend: %s (%s comparisons)\n", be ? be : "auto",
                  te_interp ? "exact" : "per-dtype tolerance");
    /* ctest runs it in shards (tests/test_shard.h: TGC_TEST_SHARD=k/n runs case i when
     * i % n == k) */
    int rc = test_run_shard("trace_eager", tests, (size_t)n, NULL, NULL);
    free(tests);
    tgc_shutdown();
    return rc;
}
