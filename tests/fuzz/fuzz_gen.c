/* libtgc random-program fuzzer: generator, interpreter (the tgc_model_fn), printer, runner.
 * See fuzz_gen.h for the design and README.md for the tolerances. Public API only. */
#include "fuzz_gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ PRNG */

void fz_rng_seed(fz_rng *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->s = seed;
}

void fz_rng_bytes(fz_rng *r, const uint8_t *data, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    fz_rng_seed(r, h);
    r->data = data;
    r->len = len;
}

static uint64_t fz_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value in [0, n). With fuzzer bytes, one byte per draw while they last. */
static int64_t fz_below(fz_rng *r, int64_t n)
{
    if (n <= 1)
        return 0;
    if (r->data && r->pos < r->len)
        return (int64_t)(r->data[r->pos++] % (uint64_t)n);
    return (int64_t)(fz_splitmix(&r->s) % (uint64_t)n);
}

static int fz_chance(fz_rng *r, int percent)
{
    return fz_below(r, 100) < percent;
}

static int64_t fz_range(fz_rng *r, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + fz_below(r, hi - lo + 1);
}

/* ------------------------------------------------------------------ ops */

enum {
    OP_LEAF,
    /* unary */
    OP_NEG,
    OP_ABS,
    OP_RELU,
    OP_TANH,
    OP_SIGMOID,
    OP_GELU,
    OP_GELU_TANH,
    OP_SILU,
    OP_ERF,
    OP_EXP_SAFE,
    OP_LOG_SAFE,
    OP_SQRT_SAFE,
    OP_RSQRT_SAFE,
    OP_LOG_RAW,
    /* scalar */
    OP_ADD_S,
    OP_SUB_S,
    OP_MUL_S,
    OP_DIV_S,
    OP_POW_S,
    OP_CLAMP,
    /* binary */
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV_SAFE,
    OP_MAXIMUM,
    OP_MINIMUM,
    OP_POW_SAFE,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_WHERE,
    OP_CAST,
    /* reductions */
    OP_SUM,
    OP_MEAN,
    OP_MAX,
    OP_VAR,
    OP_ARGMAX,
    OP_SOFTMAX,
    OP_LOG_SOFTMAX,
    /* views and movement */
    OP_RESHAPE,
    OP_PERMUTE,
    OP_TRANSPOSE,
    OP_EXPAND,
    OP_SQUEEZE,
    OP_UNSQUEEZE,
    OP_SLICE,
    OP_FLATTEN,
    OP_CONTIGUOUS,
    OP_CAT,
    OP_STACK,
    OP_PAD,
    /* indexing */
    OP_EMBEDDING,
    OP_GATHER,
    OP_INDEX_SELECT,
    /* linear algebra */
    OP_MATMUL,
    OP_LINEAR,
    /* nn */
    OP_CONV2D,
    OP_MAX_POOL,
    OP_AVG_POOL,
    OP_ADAPTIVE_POOL,
    OP_BATCH_NORM,
    OP_LAYER_NORM,
    OP_DROPOUT,
    OP_CROSS_ENTROPY,
    OP_NLL,
    OP_SDPA,
    OP_COUNT
};

static const char *const fz_op_names[OP_COUNT] = {"leaf",
                                                  "tgc_neg",
                                                  "tgc_abs",
                                                  "tgc_relu",
                                                  "tgc_tanh",
                                                  "tgc_sigmoid",
                                                  "tgc_gelu",
                                                  "tgc_gelu_tanh",
                                                  "tgc_silu",
                                                  "tgc_erf",
                                                  "tgc_exp",
                                                  "tgc_log",
                                                  "tgc_sqrt",
                                                  "tgc_rsqrt",
                                                  "tgc_log",
                                                  "tgc_add_scalar",
                                                  "tgc_sub_scalar",
                                                  "tgc_mul_scalar",
                                                  "tgc_div_scalar",
                                                  "tgc_pow_scalar",
                                                  "tgc_clamp",
                                                  "tgc_add",
                                                  "tgc_sub",
                                                  "tgc_mul",
                                                  "tgc_div",
                                                  "tgc_maximum",
                                                  "tgc_minimum",
                                                  "tgc_pow",
                                                  "tgc_eq",
                                                  "tgc_ne",
                                                  "tgc_lt",
                                                  "tgc_le",
                                                  "tgc_gt",
                                                  "tgc_ge",
                                                  "tgc_where",
                                                  "tgc_cast",
                                                  "tgc_sum",
                                                  "tgc_mean",
                                                  "tgc_max",
                                                  "tgc_var",
                                                  "tgc_argmax",
                                                  "tgc_softmax",
                                                  "tgc_log_softmax",
                                                  "tgc_reshape",
                                                  "tgc_permute",
                                                  "tgc_transpose",
                                                  "tgc_expand",
                                                  "tgc_squeeze",
                                                  "tgc_unsqueeze",
                                                  "tgc_slice",
                                                  "tgc_flatten",
                                                  "tgc_contiguous",
                                                  "tgc_cat",
                                                  "tgc_stack",
                                                  "tgc_pad",
                                                  "tgc_embedding",
                                                  "tgc_gather",
                                                  "tgc_index_select",
                                                  "tgc_matmul",
                                                  "tgc_linear",
                                                  "tgc_conv2d",
                                                  "tgc_max_pool2d",
                                                  "tgc_avg_pool2d",
                                                  "tgc_adaptive_avg_pool2d",
                                                  "tgc_batch_norm",
                                                  "tgc_layer_norm",
                                                  "tgc_dropout",
                                                  "tgc_cross_entropy",
                                                  "tgc_nll_loss",
                                                  "tgc_scaled_dot_product_attention"};

/* The three ops whose positional int arguments become options structs: one call site each. */
static tgc_tensor *fz_conv2d(tgc_tensor *x, tgc_tensor *w, tgc_tensor *b, const int64_t *iv)
{
    /* iv: stride h, w, padding h, w, dilation h, w, groups */
    return tgc_conv2d(x, w, b,
                      &(tgc_conv2d_opts){.stride = {(int)iv[0], (int)iv[1]},
                                         .padding = {(int)iv[2], (int)iv[3]},
                                         .dilation = {(int)iv[4], (int)iv[5]},
                                         .groups = (int)iv[6]});
}

static tgc_tensor *fz_max_pool2d(tgc_tensor *x, const int64_t *iv)
{
    /* iv: kernel h, w, stride h, w, padding h, w */
    return tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {(int)iv[0], (int)iv[1]},
                                                .stride = {(int)iv[2], (int)iv[3]},
                                                .padding = {(int)iv[4], (int)iv[5]}});
}

static tgc_tensor *fz_avg_pool2d(tgc_tensor *x, const int64_t *iv)
{
    return tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {(int)iv[0], (int)iv[1]},
                                                .stride = {(int)iv[2], (int)iv[3]},
                                                .padding = {(int)iv[4], (int)iv[5]}});
}

static int fz_is_float(tgc_dtype dt)
{
    return dt == TGC_F32 || dt == TGC_F64 || dt == TGC_F16 || dt == TGC_BF16;
}

/* One instruction on already computed values (OP_LEAF is the caller's). */
static tgc_tensor *fz_exec(const fz_ins *I, tgc_tensor *const *v)
{
    tgc_tensor *A = I->a[0] >= 0 ? v[I->a[0]] : NULL;
    tgc_tensor *B = I->a[1] >= 0 ? v[I->a[1]] : NULL;
    tgc_tensor *C = I->a[2] >= 0 ? v[I->a[2]] : NULL;
    tgc_tensor *D = I->a[3] >= 0 ? v[I->a[3]] : NULL;
    tgc_tensor *E = I->a[4] >= 0 ? v[I->a[4]] : NULL;
    const int64_t *iv = I->iv;
    const double *dv = I->dv;
    int dims[FZ_MAX_IV];
    for (int i = 0; i < I->niv; i++)
        dims[i] = (int)iv[i];
    switch (I->op) {
    case OP_NEG: return tgc_neg(A);
    case OP_ABS: return tgc_abs(A);
    case OP_RELU: return tgc_relu(A);
    case OP_TANH: return tgc_tanh(A);
    case OP_SIGMOID: return tgc_sigmoid(A);
    case OP_GELU: return tgc_gelu(A);
    case OP_GELU_TANH: return tgc_gelu_tanh(A);
    case OP_SILU: return tgc_silu(A);
    case OP_ERF: return tgc_erf(A);
    case OP_EXP_SAFE: return tgc_exp(tgc_clamp(A, -8.0, 8.0));
    case OP_LOG_SAFE: return tgc_log(tgc_add_scalar(tgc_abs(A), 0.5));
    case OP_SQRT_SAFE: return tgc_sqrt(tgc_add_scalar(tgc_abs(A), 0.25));
    case OP_RSQRT_SAFE: return tgc_rsqrt(tgc_add_scalar(tgc_abs(A), 0.25));
    case OP_LOG_RAW: return tgc_log(A);
    case OP_ADD_S: return tgc_add_scalar(A, dv[0]);
    case OP_SUB_S: return tgc_sub_scalar(A, dv[0]);
    case OP_MUL_S: return tgc_mul_scalar(A, dv[0]);
    case OP_DIV_S: return tgc_div_scalar(A, dv[0]);
    case OP_POW_S: return tgc_pow_scalar(A, dv[0]);
    case OP_CLAMP: return tgc_clamp(A, dv[0], dv[1]);
    case OP_ADD: return tgc_add(A, B);
    case OP_SUB: return tgc_sub(A, B);
    case OP_MUL: return tgc_mul(A, B);
    case OP_DIV_SAFE: return tgc_div(A, tgc_add_scalar(tgc_abs(B), 0.5));
    case OP_MAXIMUM: return tgc_maximum(A, B);
    case OP_MINIMUM: return tgc_minimum(A, B);
    case OP_POW_SAFE: return tgc_pow(tgc_add_scalar(tgc_abs(A), 0.5), tgc_clamp(B, -2.0, 2.0));
    case OP_EQ: return tgc_eq(A, B);
    case OP_NE: return tgc_ne(A, B);
    case OP_LT: return tgc_lt(A, B);
    case OP_LE: return tgc_le(A, B);
    case OP_GT: return tgc_gt(A, B);
    case OP_GE: return tgc_ge(A, B);
    case OP_WHERE: return tgc_where(A, B, C);
    case OP_CAST: return tgc_cast(A, (tgc_dtype)iv[0]);
    case OP_SUM: return tgc_sum(A, dims + 1, I->niv - 1, (int)iv[0]);
    case OP_MEAN: return tgc_mean(A, dims + 1, I->niv - 1, (int)iv[0]);
    case OP_MAX: return tgc_max(A, dims + 1, I->niv - 1, (int)iv[0]);
    case OP_VAR: return tgc_var(A, dims + 2, I->niv - 2, (int)iv[1], (int)iv[0]);
    case OP_ARGMAX: return tgc_argmax(A, (int)iv[0], (int)iv[1]);
    case OP_SOFTMAX: return tgc_softmax(A, (int)iv[0]);
    case OP_LOG_SOFTMAX: return tgc_log_softmax(A, (int)iv[0]);
    case OP_RESHAPE: return tgc_reshape(A, iv, I->niv);
    case OP_PERMUTE: return tgc_permute(A, dims, I->niv);
    case OP_TRANSPOSE: return tgc_transpose(A, (int)iv[0], (int)iv[1]);
    case OP_EXPAND: return tgc_expand(A, iv, I->niv);
    case OP_SQUEEZE: return tgc_squeeze(A, (int)iv[0]);
    case OP_UNSQUEEZE: return tgc_unsqueeze(A, (int)iv[0]);
    case OP_SLICE: return tgc_slice(A, (int)iv[0], iv[1], iv[2], iv[3]);
    case OP_FLATTEN: return tgc_flatten(A, (int)iv[0], (int)iv[1]);
    case OP_CONTIGUOUS: return tgc_contiguous(A);
    case OP_CAT:
    case OP_STACK: {
        tgc_tensor *ts[5] = {A, B, C, D, E};
        int n = (int)iv[1];
        for (int i = 0; i < n; i++)
            if (!ts[i])
                return NULL;
        return I->op == OP_CAT ? tgc_cat(ts, n, (int)iv[0]) : tgc_stack(ts, n, (int)iv[0]);
    }
    case OP_PAD: return tgc_pad(A, iv, I->niv / 2, dv[0]);
    case OP_EMBEDDING: return tgc_embedding(A, B);
    case OP_GATHER: return tgc_gather(A, (int)iv[0], B);
    case OP_INDEX_SELECT: return tgc_index_select(A, (int)iv[0], B);
    case OP_MATMUL: return tgc_matmul(A, B);
    case OP_LINEAR: return tgc_linear(A, B, C);
    case OP_CONV2D: return fz_conv2d(A, B, C, iv);
    case OP_MAX_POOL: return fz_max_pool2d(A, iv);
    case OP_AVG_POOL: return fz_avg_pool2d(A, iv);
    case OP_ADAPTIVE_POOL: return tgc_adaptive_avg_pool2d(A, (int)iv[0], (int)iv[1]);
    case OP_BATCH_NORM: return tgc_batch_norm(A, B, C, D, E, (int)iv[0], dv[0], dv[1]);
    case OP_LAYER_NORM: return tgc_layer_norm(A, (int)iv[0], B, C, dv[0]);
    case OP_DROPOUT: return tgc_dropout(A, dv[0], (int)iv[0]);
    case OP_CROSS_ENTROPY: return tgc_cross_entropy(A, B, (int)iv[0], iv[1], dv[0]);
    case OP_NLL: return tgc_nll_loss(A, B, (int)iv[0], iv[1]);
    case OP_SDPA: return tgc_scaled_dot_product_attention(A, B, C, D, dv[0], (int)iv[0], dv[1]);
    default: return NULL;
    }
}

/* ------------------------------------------------------------------ leaves */

static int64_t fz_leaf_dim(const fz_prog *p, const fz_leaf *L, int d, int call)
{
    return L->ref[d] >= 0 ? p->sizes[call][L->ref[d]] : L->cst[d];
}

static double fz_normal(uint64_t *s)
{
    double u1 = ((double)(fz_splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(fz_splitmix(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The leaf's tensor for one call: data from its seed and the call's sizes, then its layout. */
static tgc_tensor *fz_leaf_tensor(const fz_prog *p, const fz_leaf *L, int call)
{
    int64_t shape[TGC_MAX_DIMS], base[TGC_MAX_DIMS], n = 1;
    int nd = L->ndim;
    for (int d = 0; d < nd; d++)
        shape[d] = base[d] = fz_leaf_dim(p, L, d, call);
    if (L->layout == FZ_TRANSPOSED && nd >= 2) {
        base[nd - 1] = shape[nd - 2];
        base[nd - 2] = shape[nd - 1];
    } else if (L->layout == FZ_STRIDED && nd >= 1) {
        base[nd - 1] = 2 * shape[nd - 1];
    } else if (L->layout == FZ_EXPANDED && nd >= 1) {
        base[0] = 1;
    }
    for (int d = 0; d < nd; d++)
        n *= base[d];
    if (n < 0 || n > (1 << 20))
        return NULL;
    uint64_t s = L->seed * 0x9e3779b97f4a7c15ull + (uint64_t)call * 7919u + 1u;
    int as_int = L->data == FZ_INT || L->data == FZ_BOOL;
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    if (!buf)
        return NULL;
    int64_t hi = L->hi;
    if (L->hi_ref >= 0)
        hi += p->sizes[call][L->hi_ref];
    for (int64_t i = 0; i < n; i++) {
        if (as_int) {
            int64_t span = L->data == FZ_BOOL ? 2 : hi - L->lo;
            int64_t lo = L->data == FZ_BOOL ? 0 : L->lo;
            ((int64_t *)buf)[i] = span > 0 ? lo + (int64_t)(fz_splitmix(&s) % (uint64_t)span) : lo;
        } else {
            double x = fz_normal(&s);
            if (L->data == FZ_POS)
                x = 0.5 + (double)(fz_splitmix(&s) >> 11) / 9007199254740992.0;
            ((double *)buf)[i] = x;
        }
    }
    tgc_tensor *t =
        tgc_from_data(buf, (size_t)n * 8, base, nd, as_int ? TGC_I64 : TGC_F64, tgc_cpu());
    free(buf);
    if (t && L->dt != tgc_dtype_of(t))
        t = tgc_cast(t, L->dt);
    if (!t)
        return NULL;
    if (L->layout == FZ_TRANSPOSED && nd >= 2)
        t = tgc_transpose(t, -1, -2);
    else if (L->layout == FZ_STRIDED && nd >= 1)
        t = tgc_slice(t, -1, 0, INT64_MAX, 2);
    else if (L->layout == FZ_EXPANDED && nd >= 1)
        t = tgc_expand(t, shape, nd);
    return t;
}

static void fz_leaf_name(const fz_leaf *L, int index, char *buf, size_t n)
{
    snprintf(buf, n, "%c%d", L->cls == FZ_PARAM ? 'p' : 'b', index);
}

/* ------------------------------------------------------------------ the model function */

typedef struct fz_ctx {
    const fz_prog *p;
    tgc_tensor *cap[FZ_MAX_LEAVES]; /* the FZ_CAP leaves, by leaf index */
} fz_ctx;

static tgc_status fz_model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    const fz_ctx *ctx = tgc_module_userdata(self);
    const fz_prog *p = ctx->p;
    tgc_tensor *v[FZ_MAX_INS];
    for (int i = 0; i < p->nins; i++) {
        const fz_ins *I = &p->ins[i];
        if (I->op == OP_LEAF) {
            const fz_leaf *L = &p->leaves[I->leaf];
            if (L->cls == FZ_ARG) {
                v[i] = L->arg_index < n_in ? in[L->arg_index] : NULL;
            } else if (L->cls == FZ_CAP) {
                v[i] = ctx->cap[I->leaf];
            } else {
                char name[16];
                fz_leaf_name(L, I->leaf, name, sizeof name);
                v[i] = tgc_module_get(self, name);
            }
        } else {
            v[i] = fz_exec(I, v);
        }
    }
    for (int o = 0; o < n_out && o < p->nout; o++) {
        out[o] = v[p->outs[o]];
        if (!out[o]) {
            tgc_status st = tgc_last_status();
            return st != TGC_OK ? st : TGC_ERR_INTERNAL;
        }
    }
    return TGC_OK;
}

/* ------------------------------------------------------------------ printer */

static const char *fz_dt_name(tgc_dtype dt)
{
    return tgc_dtype_name(dt);
}

/* An int64 argument as C source: the limits by name. */
static void fz_i64_str(int64_t v, char *buf)
{
    if (v == INT64_MAX)
        strcpy(buf, "INT64_MAX");
    else if (v == INT64_MIN)
        strcpy(buf, "INT64_MIN");
    else
        snprintf(buf, 32, "%lld", (long long)v);
}

static void fz_print_ins(const fz_prog *p, int i, FILE *f)
{
    const fz_ins *I = &p->ins[i];
    char a[5][16];
    for (int k = 0; k < 5; k++) {
        if (I->a[k] >= 0)
            snprintf(a[k], sizeof a[k], "v%d", I->a[k]);
        else
            snprintf(a[k], sizeof a[k], "NULL");
    }
    const int64_t *iv = I->iv;
    const double *dv = I->dv;
    fprintf(f, "  tgc_tensor *v%d = ", i);
    switch (I->op) {
    case OP_LEAF: {
        const fz_leaf *L = &p->leaves[I->leaf];
        static const char *const data[] = {"randn", "rand[0.5,1.5)", "int", "bool"};
        static const char *const lay[] = {"", " transposed-view", " strided-view(step 2)",
                                          " expanded-view(dim 0 from 1)"};
        if (L->cls == FZ_ARG)
            fprintf(f, "in[%d]; /* ", L->arg_index);
        else if (L->cls == FZ_CAP)
            fprintf(f, "captured[%d]; /* a tensor the model captures, ", I->leaf);
        else
            fprintf(f, "tgc_module_get(self, \"%c%d\"); /* %s, ", L->cls == FZ_PARAM ? 'p' : 'b',
                    I->leaf, L->cls == FZ_PARAM ? "param" : "buffer");
        fprintf(f, "%s %s [", fz_dt_name(L->dt), data[L->data]);
        for (int d = 0; d < L->ndim; d++) {
            if (L->ref[d] >= 0)
                fprintf(f, "%ss%d", d ? ", " : "", L->ref[d]);
            else
                fprintf(f, "%s%lld", d ? ", " : "", (long long)L->cst[d]);
        }
        fprintf(f, "]");
        if (L->data == FZ_INT) {
            if (L->hi_ref >= 0)
                fprintf(f, " in [%lld, s%d%+lld)", (long long)L->lo, L->hi_ref, (long long)L->hi);
            else
                fprintf(f, " in [%lld, %lld)", (long long)L->lo, (long long)L->hi);
        }
        fprintf(f, "%s", lay[L->layout]);
        if (L->dyn_mask) {
            fprintf(f, " mark_dynamic{");
            for (int d = 0, first = 1; d < L->ndim; d++)
                if (L->dyn_mask & (1u << d)) {
                    fprintf(f, "%s%d", first ? "" : ",", d);
                    first = 0;
                }
            fprintf(f, "}");
        }
        fprintf(f, " */\n");
        return;
    }
    case OP_EXP_SAFE: fprintf(f, "tgc_exp(tgc_clamp(%s, -8, 8));\n", a[0]); return;
    case OP_LOG_SAFE: fprintf(f, "tgc_log(tgc_add_scalar(tgc_abs(%s), 0.5));\n", a[0]); return;
    case OP_SQRT_SAFE: fprintf(f, "tgc_sqrt(tgc_add_scalar(tgc_abs(%s), 0.25));\n", a[0]); return;
    case OP_RSQRT_SAFE: fprintf(f, "tgc_rsqrt(tgc_add_scalar(tgc_abs(%s), 0.25));\n", a[0]); return;
    case OP_ADD_S:
    case OP_SUB_S:
    case OP_MUL_S:
    case OP_DIV_S:
    case OP_POW_S: fprintf(f, "%s(%s, %.17g);\n", fz_op_names[I->op], a[0], dv[0]); return;
    case OP_CLAMP: fprintf(f, "tgc_clamp(%s, %.17g, %.17g);\n", a[0], dv[0], dv[1]); return;
    case OP_DIV_SAFE:
        fprintf(f, "tgc_div(%s, tgc_add_scalar(tgc_abs(%s), 0.5));\n", a[0], a[1]);
        return;
    case OP_POW_SAFE:
        fprintf(f, "tgc_pow(tgc_add_scalar(tgc_abs(%s), 0.5), tgc_clamp(%s, -2, 2));\n", a[0],
                a[1]);
        return;
    case OP_WHERE: fprintf(f, "tgc_where(%s, %s, %s);\n", a[0], a[1], a[2]); return;
    case OP_CAST: fprintf(f, "tgc_cast(%s, %s);\n", a[0], fz_dt_name((tgc_dtype)iv[0])); return;
    case OP_SUM:
    case OP_MEAN:
    case OP_MAX:
    case OP_VAR: {
        int off = I->op == OP_VAR ? 2 : 1;
        fprintf(f, "%s(%s, (int[]){", fz_op_names[I->op], a[0]);
        for (int k = off; k < I->niv; k++)
            fprintf(f, "%s%lld", k > off ? ", " : "", (long long)iv[k]);
        if (I->op == OP_VAR)
            fprintf(f, "}, %d, /*correction*/ %lld, /*keepdim*/ %lld);\n", I->niv - off,
                    (long long)iv[1], (long long)iv[0]);
        else
            fprintf(f, "}, %d, /*keepdim*/ %lld);\n", I->niv - off, (long long)iv[0]);
        return;
    }
    case OP_ARGMAX:
        fprintf(f, "tgc_argmax(%s, %lld, %lld);\n", a[0], (long long)iv[0], (long long)iv[1]);
        return;
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
    case OP_SQUEEZE:
    case OP_UNSQUEEZE:
        if (I->op == OP_SQUEEZE && iv[0] == TGC_ALL_DIMS)
            fprintf(f, "tgc_squeeze(%s, TGC_ALL_DIMS);\n", a[0]);
        else
            fprintf(f, "%s(%s, %lld);\n", fz_op_names[I->op], a[0], (long long)iv[0]);
        return;
    case OP_RESHAPE:
    case OP_EXPAND:
    case OP_PERMUTE:
        fprintf(f, "%s(%s, (%s[]){", fz_op_names[I->op], a[0],
                I->op == OP_PERMUTE ? "int" : "int64_t");
        for (int k = 0; k < I->niv; k++)
            fprintf(f, "%s%lld", k ? ", " : "", (long long)iv[k]);
        fprintf(f, "}, %d);\n", I->niv);
        return;
    case OP_TRANSPOSE:
    case OP_FLATTEN:
        fprintf(f, "%s(%s, %lld, %lld);\n", fz_op_names[I->op], a[0], (long long)iv[0],
                (long long)iv[1]);
        return;
    case OP_SLICE: {
        char b[3][32];
        for (int k = 0; k < 3; k++)
            fz_i64_str(iv[k + 1], b[k]);
        fprintf(f, "tgc_slice(%s, %lld, %s, %s, %s);\n", a[0], (long long)iv[0], b[0], b[1], b[2]);
        return;
    }
    case OP_CAT:
    case OP_STACK:
        fprintf(f, "%s((tgc_tensor *[]){", fz_op_names[I->op]);
        for (int k = 0; k < iv[1]; k++)
            fprintf(f, "%s%s", k ? ", " : "", a[k]);
        fprintf(f, "}, %lld, %lld);\n", (long long)iv[1], (long long)iv[0]);
        return;
    case OP_PAD:
        fprintf(f, "tgc_pad(%s, (int64_t[]){", a[0]);
        for (int k = 0; k < I->niv; k++) {
            char b[32];
            fz_i64_str(iv[k], b);
            fprintf(f, "%s%s", k ? ", " : "", b);
        }
        fprintf(f, "}, %d, %.17g);\n", I->niv / 2, dv[0]);
        return;
    case OP_GATHER:
    case OP_INDEX_SELECT:
        fprintf(f, "%s(%s, %lld, %s);\n", fz_op_names[I->op], a[0], (long long)iv[0], a[1]);
        return;
    case OP_LINEAR: fprintf(f, "tgc_linear(%s, %s, %s);\n", a[0], a[1], a[2]); return;
    case OP_CONV2D:
        fprintf(f,
                "tgc_conv2d(%s, %s, %s, /*stride*/ {%lld, %lld}, /*padding*/ {%lld, %lld}, "
                "/*dilation*/ {%lld, %lld}, /*groups*/ %lld);\n",
                a[0], a[1], a[2], (long long)iv[0], (long long)iv[1], (long long)iv[2],
                (long long)iv[3], (long long)iv[4], (long long)iv[5], (long long)iv[6]);
        return;
    case OP_MAX_POOL:
    case OP_AVG_POOL:
        fprintf(
            f,
            "%s(%s, /*kernel*/ {%lld, %lld}, /*stride*/ {%lld, %lld}, /*padding*/ {%lld, %lld});\n",
            fz_op_names[I->op], a[0], (long long)iv[0], (long long)iv[1], (long long)iv[2],
            (long long)iv[3], (long long)iv[4], (long long)iv[5]);
        return;
    case OP_ADAPTIVE_POOL:
        fprintf(f, "tgc_adaptive_avg_pool2d(%s, %lld, %lld);\n", a[0], (long long)iv[0],
                (long long)iv[1]);
        return;
    case OP_BATCH_NORM:
        fprintf(f, "tgc_batch_norm(%s, %s, %s, %s, %s, /*training*/ %lld, %g, %g);\n", a[0], a[1],
                a[2], a[3], a[4], (long long)iv[0], dv[0], dv[1]);
        return;
    case OP_LAYER_NORM:
        fprintf(f, "tgc_layer_norm(%s, %lld, %s, %s, %g);\n", a[0], (long long)iv[0], a[1], a[2],
                dv[0]);
        return;
    case OP_DROPOUT:
        fprintf(f, "tgc_dropout(%s, %g, %lld);\n", a[0], dv[0], (long long)iv[0]);
        return;
    case OP_CROSS_ENTROPY:
        fprintf(f, "tgc_cross_entropy(%s, %s, %lld, %lld, %g);\n", a[0], a[1], (long long)iv[0],
                (long long)iv[1], dv[0]);
        return;
    case OP_NLL:
        fprintf(f, "tgc_nll_loss(%s, %s, %lld, %lld);\n", a[0], a[1], (long long)iv[0],
                (long long)iv[1]);
        return;
    case OP_SDPA:
        fprintf(f, "tgc_scaled_dot_product_attention(%s, %s, %s, %s, %g, /*causal*/ %lld, %g);\n",
                a[0], a[1], a[2], a[3], dv[0], (long long)iv[0], dv[1]);
        return;
    default:
        if (I->a[1] >= 0)
            fprintf(f, "%s(%s, %s);\n", fz_op_names[I->op], a[0], a[1]);
        else
            fprintf(f, "%s(%s);\n", fz_op_names[I->op], a[0]);
        return;
    }
}

void fz_print(const fz_prog *p, FILE *f)
{
    static const char *const dyn[] = {"AUTO", "ALWAYS", "NEVER"};
    fprintf(f, "/* program seed %llu, dynamic = %s, %d call(s) with sizes:",
            (unsigned long long)p->seed, dyn[p->dynamic], p->ncalls);
    for (int c = 0; c < p->ncalls; c++) {
        fprintf(f, " [");
        for (int s = 0; s < p->nsizes; s++)
            fprintf(f, "%ss%d=%lld", s ? " " : "", s, (long long)p->sizes[c][s]);
        fprintf(f, "]");
    }
    fprintf(f, " */\ntgc_status model(tgc_module *self, tgc_tensor *const *in, int n_in, "
               "tgc_tensor **out, int n_out)\n{\n");
    for (int i = 0; i < p->nins; i++)
        fz_print_ins(p, i, f);
    for (int o = 0; o < p->nout; o++)
        fprintf(f, "  out[%d] = v%d;\n", o, p->outs[o]);
    fprintf(f, "}\n");
}

/* ------------------------------------------------------------------ generator */

typedef struct fz_gen {
    fz_rng *r;
    fz_prog *p;
    tgc_tensor *val[FZ_MAX_INS];
    const char *progress;
} fz_gen;

static void fz_progress(fz_gen *g)
{
    if (!g->progress)
        return;
    FILE *f = fopen(g->progress, "w");
    if (!f)
        return;
    fz_print(g->p, f);
    fclose(f);
}

static int fz_shape(fz_gen *g, int v, int64_t *shape)
{
    return g->val[v] ? tgc_shape(g->val[v], shape) : -1;
}

static tgc_dtype fz_dtype(fz_gen *g, int v)
{
    return tgc_dtype_of(g->val[v]);
}

/* The size-table entry a concrete size came from (call-0 sizes are distinct), or -1. */
static int fz_ref_of(const fz_prog *p, int64_t size)
{
    if (size <= 1)
        return -1;
    for (int s = 0; s < p->nsizes; s++)
        if (p->sizes[0][s] == size)
            return s;
    return -1;
}

/* Appends a leaf instruction: shape from concrete sizes (mapped back to size-table entries for
 * arguments, so their partners follow size changes); returns the value or -1. */
static int fz_add_leaf(fz_gen *g, fz_class cls, tgc_dtype dt, fz_data data, int nd,
                       const int64_t *shape)
{
    fz_prog *p = g->p;
    if (p->nleaves >= FZ_MAX_LEAVES || p->nins >= FZ_MAX_INS)
        return -1;
    fz_leaf *L = &p->leaves[p->nleaves];
    memset(L, 0, sizeof *L);
    /* parameters are float (tgc_module_param refuses integers): integer state is a buffer */
    L->cls = cls == FZ_PARAM && !fz_is_float(dt) ? FZ_BUF : cls;
    L->dt = dt;
    L->data = data;
    L->hi_ref = -1;
    L->lo = -4;
    L->hi = 5;
    L->ndim = nd;
    L->seed = fz_splitmix(&g->r->s) ^ (uint64_t)fz_below(g->r, 1 << 30);
    for (int d = 0; d < nd; d++) {
        L->ref[d] = cls == FZ_ARG ? fz_ref_of(p, shape[d]) : -1;
        L->cst[d] = shape[d];
    }
    if (cls == FZ_ARG) {
        int k = (int)fz_below(g->r, 10);
        L->layout = k < 6              ? FZ_CONTIG
                    : k == 6 || k == 7 ? FZ_TRANSPOSED
                    : k == 8           ? FZ_STRIDED
                                       : FZ_EXPANDED;
        if (nd == 0 || (L->layout == FZ_TRANSPOSED && nd < 2))
            L->layout = FZ_CONTIG;
        for (int d = 0; d < nd; d++)
            if (L->ref[d] >= 0 && fz_chance(g->r, 15))
                L->dyn_mask |= 1u << d;
        L->arg_index = p->nargs++;
    }
    fz_ins *I = &p->ins[p->nins];
    memset(I, 0, sizeof *I);
    for (int k = 0; k < 5; k++)
        I->a[k] = -1;
    I->op = OP_LEAF;
    I->leaf = p->nleaves++;
    tgc_tensor *t = fz_leaf_tensor(p, L, 0);
    if (!t) {
        p->nleaves--;
        if (cls == FZ_ARG)
            p->nargs--;
        return -1;
    }
    g->val[p->nins] = t;
    return p->nins++;
}

static int fz_leaf_int(fz_gen *g, int nd, const int64_t *shape, int64_t lo, int64_t hi,
                       int64_t hi_size)
{
    int v = fz_add_leaf(g, FZ_ARG, fz_chance(g->r, 50) ? TGC_I64 : TGC_I32, FZ_INT, nd, shape);
    if (v < 0)
        return -1;
    fz_leaf *L = &g->p->leaves[g->p->ins[v].leaf];
    L->lo = lo;
    L->hi = hi;
    L->hi_ref = -1;
    int ref = fz_ref_of(g->p, hi_size);
    if (hi_size >= 0) {
        if (ref >= 0) {
            L->hi_ref = ref;
            L->hi = hi - hi_size;
        }
    }
    g->val[v] = fz_leaf_tensor(g->p, L, 0); /* again, with its final range */
    return g->val[v] ? v : -1;
}

static tgc_dtype fz_float_dtype(fz_rng *r)
{
    int k = (int)fz_below(r, 20);
    return k < 16 ? TGC_F32 : k == 16 ? TGC_F64 : k == 17 ? TGC_F16 : k == 18 ? TGC_BF16 : TGC_F32;
}

static int64_t fz_size_pick(fz_gen *g)
{
    int k = (int)fz_below(g->r, 20);
    if (k == 0)
        return 0;
    if (k <= 3)
        return 1;
    return g->p->sizes[0][fz_below(g->r, g->p->nsizes)];
}

/* A new argument of random rank and sizes from the size table. */
static int fz_new_input(fz_gen *g, int min_rank, int max_rank, tgc_dtype dt, fz_data data)
{
    int64_t shape[TGC_MAX_DIMS];
    int nd = (int)fz_range(g->r, min_rank, max_rank);
    for (int d = 0; d < nd; d++)
        shape[d] = fz_size_pick(g);
    return fz_add_leaf(g, FZ_ARG, dt, data, nd, shape);
}

/* Appends an op instruction and runs it eagerly. Returns its value, or -1 (rolled back) when
 * the eager op fails, unless keep_failure: then the failure stays (the program ends there). */
static int fz_emit(fz_gen *g, fz_ins *I, int keep_failure)
{
    fz_prog *p = g->p;
    if (p->nins >= FZ_MAX_INS)
        return -1;
    for (int k = 0; k < 5; k++)
        if (I->a[k] >= 0 && !g->val[I->a[k]])
            return -1;
    p->ins[p->nins] = *I;
    p->nins++;
    fz_progress(g);
    tgc_clear_error();
    tgc_tensor *t = fz_exec(&p->ins[p->nins - 1], g->val);
    g->val[p->nins - 1] = t;
    if (!t) {
        tgc_status st = tgc_last_status();
        if (keep_failure || st == TGC_ERR_INTERNAL || st == TGC_OK) {
            p->bad_op = 1;
            return p->nins - 1;
        }
        p->nins--;
        return -1;
    }
    int64_t shape[TGC_MAX_DIMS];
    int nd = tgc_shape(t, shape);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] > 4096)
            n = INT64_MAX / 2;
        else if (n < (1 << 20))
            n *= shape[d];
    }
    if (n > 20000) { /* keep programs small: a big intermediate is dropped */
        p->nins--;
        g->val[p->nins] = NULL;
        return -1;
    }
    return p->nins - 1;
}

static fz_ins fz_ins_new(int op, int a0, int a1)
{
    fz_ins I;
    memset(&I, 0, sizeof I);
    I.op = op;
    for (int k = 0; k < 5; k++)
        I.a[k] = -1;
    I.a[0] = a0;
    I.a[1] = a1;
    return I;
}

enum { FZ_ANY = 0, FZ_FLOAT = 1, FZ_LEAFONLY = 2, FZ_INTONLY = 4 };

/* A random existing value (recent ones preferred) with rank in [min_rank, max_rank]. */
static int fz_pick(fz_gen *g, int flags, int min_rank, int max_rank)
{
    fz_prog *p = g->p;
    int cand[FZ_MAX_INS], n = 0;
    for (int i = 0; i < p->nins; i++) {
        if (!g->val[i])
            continue;
        int nd = tgc_ndim(g->val[i]);
        tgc_dtype dt = fz_dtype(g, i);
        if (nd < min_rank || nd > max_rank)
            continue;
        if ((flags & FZ_FLOAT) && !fz_is_float(dt))
            continue;
        if ((flags & FZ_INTONLY) && fz_is_float(dt))
            continue;
        if ((flags & FZ_LEAFONLY) && p->ins[i].op != OP_LEAF && fz_is_float(dt))
            continue;
        cand[n++] = i;
    }
    if (!n)
        return -1;
    if (fz_chance(g->r, 50))
        return cand[n - 1];
    return cand[fz_below(g->r, n)];
}

/* A float value of rank in range, made as a new input when none exists. */
static int fz_pick_float(fz_gen *g, int min_rank, int max_rank)
{
    int v = fz_chance(g->r, 85) ? fz_pick(g, FZ_FLOAT, min_rank, max_rank) : -1;
    if (v < 0)
        v = fz_new_input(g, min_rank, max_rank, fz_float_dtype(g->r), FZ_NORMAL);
    return v;
}

/* A shape that broadcasts with shape: some dims 1, leading dims dropped or added. */
static int fz_bcast_shape(fz_gen *g, const int64_t *shape, int nd, int64_t *out)
{
    int drop = nd && fz_chance(g->r, 30) ? (int)fz_below(g->r, nd + 1) : 0;
    int add = fz_chance(g->r, 15) && nd < 4 ? 1 : 0;
    int n = 0;
    if (add)
        out[n++] = fz_chance(g->r, 50) ? 1 : fz_size_pick(g);
    for (int d = drop; d < nd; d++)
        out[n++] = fz_chance(g->r, 25) ? 1 : shape[d];
    return n;
}

/* A second operand that broadcasts with value a: an existing value or a new input. */
static int fz_partner(fz_gen *g, int a, int want_float)
{
    int64_t shape[TGC_MAX_DIMS], bs[TGC_MAX_DIMS];
    int nd = fz_shape(g, a, shape);
    if (fz_chance(g->r, 35)) {
        /* an existing value of a broadcast-compatible shape */
        for (int tries = 0; tries < 4; tries++) {
            int b = fz_pick(g, want_float ? FZ_FLOAT : FZ_ANY, 0, 4);
            if (b < 0)
                break;
            int64_t s2[TGC_MAX_DIMS];
            int n2 = fz_shape(g, b, s2), ok = 1;
            for (int i = 1; i <= nd && i <= n2; i++) {
                int64_t x = shape[nd - i], y = s2[n2 - i];
                if (x != y && x != 1 && y != 1)
                    ok = 0;
            }
            if (ok)
                return b;
        }
    }
    int n = fz_bcast_shape(g, shape, nd, bs);
    tgc_dtype dt = fz_float_dtype(g->r);
    fz_data data = FZ_NORMAL;
    if (!want_float && fz_chance(g->r, 15)) {
        dt = fz_chance(g->r, 50) ? TGC_I32 : TGC_I64;
        data = FZ_INT;
    }
    int k = (int)fz_below(g->r, 100);
    return fz_add_leaf(g, k < 10 ? FZ_PARAM : k < 16 ? FZ_CAP : FZ_ARG, dt, data, n, bs);
}

static int fz_rand_dim(fz_gen *g, int nd) /* a dim of rank nd, sometimes negative */
{
    int d = (int)fz_below(g->r, nd);
    return fz_chance(g->r, 30) ? d - nd : d;
}

/* dims: a random non-empty subset (or empty = all when allow_all); writes into iv from off. */
static int fz_rand_dims(fz_gen *g, int nd, int64_t *iv, int off, int allow_all)
{
    int n = 0;
    if (allow_all && fz_chance(g->r, 15))
        return off;
    for (int d = 0; d < nd; d++)
        if (fz_chance(g->r, 45))
            iv[off + n++] = fz_chance(g->r, 25) ? d - nd : d;
    if (!n && nd)
        iv[off + n++] = fz_rand_dim(g, nd);
    return off + n;
}

/* ---- families; each returns the last value it produced, or -1 */

static int fz_gen_unary(fz_gen *g)
{
    static const int ops[] = {OP_NEG,      OP_ABS,       OP_RELU,       OP_TANH,   OP_SIGMOID,
                              OP_GELU,     OP_GELU_TANH, OP_SILU,       OP_ERF,    OP_EXP_SAFE,
                              OP_LOG_SAFE, OP_SQRT_SAFE, OP_RSQRT_SAFE, OP_LOG_RAW};
    int op = ops[fz_below(g->r, (int)(sizeof ops / sizeof ops[0]))];
    int a = op == OP_LOG_RAW ? fz_pick(g, FZ_LEAFONLY, 0, 4) : fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    fz_ins I = fz_ins_new(op, a, -1);
    return fz_emit(g, &I, 0);
}

static int fz_gen_scalar(fz_gen *g)
{
    static const int ops[] = {OP_ADD_S, OP_SUB_S, OP_MUL_S, OP_DIV_S, OP_POW_S, OP_CLAMP};
    static const double vals[] = {2.5, -1.5, 0.5, 3.0, -0.75, 1.0, 2.0};
    int op = ops[fz_below(g->r, 6)];
    int a = fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    fz_ins I = fz_ins_new(op, a, -1);
    I.dv[0] = vals[fz_below(g->r, 7)];
    if (op == OP_POW_S) {
        static const double ex[] = {2.0, 3.0, 1.0, 0.0};
        I.dv[0] = ex[fz_below(g->r, 4)];
    }
    if (op == OP_CLAMP) {
        I.dv[0] = -0.5 - (double)fz_below(g->r, 3);
        I.dv[1] = 0.25 + (double)fz_below(g->r, 3);
    }
    return fz_emit(g, &I, 0);
}

static int fz_gen_binary(fz_gen *g)
{
    static const int ops[] = {OP_ADD,     OP_SUB,      OP_MUL, OP_DIV_SAFE, OP_MAXIMUM,
                              OP_MINIMUM, OP_POW_SAFE, OP_ADD, OP_MUL};
    int op = ops[fz_below(g->r, 9)];
    int a = fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    int b = fz_partner(g, a, 0);
    if (b < 0)
        return -1;
    fz_ins I = fz_chance(g->r, 50) ? fz_ins_new(op, a, b) : fz_ins_new(op, b, a);
    return fz_emit(g, &I, 0);
}

/* Comparisons and casts to integers only see leaves and integer values: a float computed in a
 * different order may sit on the other side of a threshold, which is not a defect. */
static int fz_gen_compare(fz_gen *g)
{
    int a = fz_pick(g, FZ_LEAFONLY, 0, 4);
    if (a < 0)
        return -1;
    int b;
    if (fz_chance(g->r, 30))
        b = a;
    else {
        b = fz_partner(g, a, 0);
        if (b >= 0 && g->p->ins[b].op != OP_LEAF && fz_is_float(fz_dtype(g, b)))
            b = a;
    }
    if (b < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_EQ + (int)fz_below(g->r, 6), a, b);
    int c = fz_emit(g, &I, 0);
    if (c < 0 || fz_chance(g->r, 30))
        return c;
    /* where(cond, x, y) */
    int x = fz_partner(g, c, 0);
    if (x < 0)
        return c;
    int y = fz_chance(g->r, 30) ? x : fz_partner(g, c, 0);
    if (y < 0)
        return c;
    fz_ins W = fz_ins_new(OP_WHERE, c, x);
    W.a[2] = y;
    int w = fz_emit(g, &W, 0);
    return w >= 0 ? w : c;
}

static int fz_gen_cast(fz_gen *g)
{
    static const tgc_dtype fl[] = {TGC_F32, TGC_F64, TGC_F16, TGC_BF16};
    static const tgc_dtype in[] = {TGC_I32, TGC_I64, TGC_BOOL};
    int to_int = fz_chance(g->r, 40);
    int a = fz_pick(g, to_int ? FZ_LEAFONLY : FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_CAST, a, -1);
    I.iv[0] = to_int ? in[fz_below(g->r, 3)] : fl[fz_below(g->r, 4)];
    I.niv = 1;
    if (to_int && fz_is_float(fz_dtype(g, a))) {
        /* a scale so that the truncation is not all zeros */
        fz_ins M = fz_ins_new(OP_MUL_S, a, -1);
        M.dv[0] = 3.0;
        int m = fz_emit(g, &M, 0);
        if (m < 0)
            return -1;
        I.a[0] = m;
    }
    return fz_emit(g, &I, 0);
}

static int fz_gen_reduce(fz_gen *g)
{
    static const int ops[] = {OP_SUM,    OP_MEAN,    OP_MAX,        OP_VAR,
                              OP_ARGMAX, OP_SOFTMAX, OP_LOG_SOFTMAX};
    int op = ops[fz_below(g->r, 7)];
    int a = op == OP_ARGMAX ? fz_pick(g, FZ_LEAFONLY, 1, 4) : fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    int nd = tgc_ndim(g->val[a]);
    fz_ins I = fz_ins_new(op, a, -1);
    if (op == OP_ARGMAX || op == OP_SOFTMAX || op == OP_LOG_SOFTMAX) {
        if (nd == 0)
            return -1;
        I.iv[0] = fz_rand_dim(g, nd);
        I.iv[1] = fz_below(g->r, 2);
        I.niv = 2;
    } else {
        I.iv[0] = fz_below(g->r, 2); /* keepdim */
        int off = 1;
        if (op == OP_VAR)
            I.iv[off++] = fz_below(g->r, 2);
        I.niv = fz_rand_dims(g, nd, I.iv, off, 1);
    }
    return fz_emit(g, &I, 0);
}

/* Keepdim reductions whose results meet again in one expression, with
 * operands of every broadcast shape (normalizations written out by hand). */
static int fz_gen_norm_pattern(fz_gen *g)
{
    static const int red[] = {OP_SUM, OP_MEAN, OP_MAX, OP_VAR};
    static const int comb[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV_SAFE};
    int x = fz_pick_float(g, 1, 4);
    if (x < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, x, shape);
    fz_ins R = fz_ins_new(red[fz_below(g->r, 4)], x, -1);
    R.iv[0] = 1;
    int off = 1;
    if (R.op == OP_VAR)
        R.iv[off++] = 0;
    R.niv = fz_rand_dims(g, nd, R.iv, off, 0);
    int r1 = fz_emit(g, &R, 0);
    if (r1 < 0)
        return -1;
    int64_t rs[TGC_MAX_DIMS];
    int rnd = fz_shape(g, r1, rs);
    int r2;
    int k = (int)fz_below(g->r, 6);
    if (k <= 1) { /* a second keepdim reduction, of another tensor of x's shape */
        int z = fz_add_leaf(g, FZ_ARG, fz_dtype(g, x), FZ_NORMAL, nd, shape);
        if (z < 0)
            return -1;
        fz_ins R2 = R;
        R2.a[0] = z;
        if (k == 1)
            R2.op = red[fz_below(g->r, 4)];
        if (R2.op == OP_VAR && R.op != OP_VAR) {
            R2.op = OP_MEAN;
        } else if (R.op == OP_VAR && R2.op != OP_VAR) {
            R2.op = OP_VAR;
        }
        r2 = fz_emit(g, &R2, 0);
    } else if (k == 2) { /* shape [1] (an eps tensor) */
        int64_t one = 1;
        r2 = fz_add_leaf(g, fz_chance(g->r, 50) ? FZ_PARAM : FZ_ARG, fz_dtype(g, x), FZ_POS, 1,
                         &one);
    } else if (k == 3) { /* 0-d */
        r2 = fz_add_leaf(g, FZ_ARG, fz_dtype(g, x), FZ_POS, 0, NULL);
    } else if (k == 4) { /* the reduction's own shape */
        r2 = fz_add_leaf(g, FZ_ARG, fz_dtype(g, x), FZ_NORMAL, rnd, rs);
    } else { /* a broadcast shape of x */
        int64_t bs[TGC_MAX_DIMS];
        int n = fz_bcast_shape(g, shape, nd, bs);
        r2 = fz_add_leaf(g, FZ_ARG, fz_dtype(g, x), FZ_NORMAL, n, bs);
    }
    if (r2 < 0)
        return r1;
    int shape_kind = (int)fz_below(g->r, 3);
    int op1 = comb[fz_below(g->r, 4)], op2 = comb[fz_below(g->r, 3)];
    if (shape_kind == 0) { /* x op (r1 op r2) */
        fz_ins E = fz_ins_new(op1, r1, r2);
        int e = fz_emit(g, &E, 0);
        if (e < 0)
            return r1;
        if (fz_chance(g->r, 40)) {
            fz_ins S = fz_ins_new(OP_SQRT_SAFE, e, -1);
            int s = fz_emit(g, &S, 0);
            if (s >= 0)
                e = s;
        }
        fz_ins Y = fz_chance(g->r, 70) ? fz_ins_new(op2, x, e) : fz_ins_new(op2, e, x);
        return fz_emit(g, &Y, 0);
    }
    if (shape_kind == 1) { /* (x op r1) op r2 */
        fz_ins E = fz_ins_new(op1, x, r1);
        int e = fz_emit(g, &E, 0);
        if (e < 0)
            return r1;
        fz_ins Y = fz_ins_new(op2, e, r2);
        return fz_emit(g, &Y, 0);
    }
    /* (x - r1) * rsqrt(r2' + eps) with r2' another reduction of x */
    fz_ins D = fz_ins_new(OP_SUB, x, r1);
    int d = fz_emit(g, &D, 0);
    if (d < 0)
        return r1;
    fz_ins V = fz_ins_new(OP_MUL, d, d);
    int v = fz_emit(g, &V, 0);
    if (v < 0)
        return d;
    fz_ins M = fz_ins_new(OP_MEAN, v, -1);
    memcpy(M.iv, R.iv, sizeof M.iv);
    M.niv = R.niv;
    if (R.op == OP_VAR) { /* drop the correction */
        M.iv[0] = 1;
        for (int i = 2; i < R.niv; i++)
            M.iv[i - 1] = R.iv[i];
        M.niv = R.niv - 1;
    }
    int m = fz_emit(g, &M, 0);
    if (m < 0)
        return d;
    fz_ins A = fz_ins_new(OP_ADD, m, r2);
    int a = fz_emit(g, &A, 0);
    if (a < 0)
        return d;
    fz_ins Q = fz_ins_new(OP_RSQRT_SAFE, a, -1);
    int q = fz_emit(g, &Q, 0);
    if (q < 0)
        return d;
    fz_ins Y = fz_ins_new(OP_MUL, d, q);
    return fz_emit(g, &Y, 0);
}

static int fz_gen_view(fz_gen *g)
{
    int a = fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, a, shape);
    int kind = (int)fz_below(g->r, 10);
    fz_ins I = fz_ins_new(OP_CONTIGUOUS, a, -1);
    switch (kind) {
    case 0: { /* reshape with 0 / -1 / concrete */
        I.op = OP_RESHAPE;
        int m = (int)fz_below(g->r, 4);
        if (m == 0 || nd == 0) { /* flatten all */
            I.iv[0] = -1;
            I.niv = 1;
        } else if (m == 1) { /* keep a prefix with 0, merge the rest */
            int keep = (int)fz_below(g->r, nd);
            for (int d = 0; d < keep; d++)
                I.iv[d] = 0;
            I.iv[keep] = -1;
            I.niv = keep + 1;
        } else if (m == 2) { /* split a dim that has a factor */
            int d = (int)fz_below(g->r, nd);
            if (nd >= 4)
                return -1;
            int64_t f = shape[d] % 2 == 0 ? 2 : shape[d] % 3 == 0 ? 3 : 1;
            for (int i = 0, j = 0; i < nd; i++) {
                if (i == d) {
                    I.iv[j++] = f;
                    I.iv[j++] = -1;
                } else {
                    I.iv[j++] = fz_chance(g->r, 50) ? 0 : shape[i];
                }
                I.niv = j;
            }
        } else { /* add a 1 and keep the dims */
            int j = 0;
            for (int i = 0; i < nd; i++) {
                if (fz_chance(g->r, 30) && j < 6)
                    I.iv[j++] = 1;
                I.iv[j++] = shape[i];
            }
            I.niv = j;
        }
        break;
    }
    case 1: /* permute */
        I.op = OP_PERMUTE;
        for (int d = 0; d < nd; d++)
            I.iv[d] = d;
        for (int d = nd - 1; d > 0; d--) {
            int j = (int)fz_below(g->r, d + 1);
            int64_t t = I.iv[d];
            I.iv[d] = I.iv[j];
            I.iv[j] = t;
        }
        I.niv = nd;
        break;
    case 2:
        if (nd < 1)
            return -1;
        I.op = OP_TRANSPOSE;
        I.iv[0] = fz_rand_dim(g, nd);
        I.iv[1] = fz_rand_dim(g, nd);
        I.niv = 2;
        break;
    case 3: { /* expand size-1 dims, maybe a new leading dim */
        I.op = OP_EXPAND;
        int j = 0;
        if (nd < 4 && fz_chance(g->r, 40))
            I.iv[j++] = fz_size_pick(g);
        for (int d = 0; d < nd; d++)
            I.iv[j++] = shape[d] == 1 && fz_chance(g->r, 70)
                            ? fz_size_pick(g)
                            : (fz_chance(g->r, 50) ? -1 : shape[d]);
        I.niv = j;
        break;
    }
    case 4:
        I.op = OP_SQUEEZE;
        I.iv[0] = nd == 0 || fz_chance(g->r, 30) ? TGC_ALL_DIMS : fz_rand_dim(g, nd);
        for (int d = 0; d < nd && I.iv[0] != TGC_ALL_DIMS; d++)
            if (shape[d] == 1 && fz_chance(g->r, 60))
                I.iv[0] = d;
        I.niv = 1;
        break;
    case 5:
        if (nd >= 4)
            return -1;
        I.op = OP_UNSQUEEZE;
        I.iv[0] = (int)fz_below(g->r, nd + 1) - (fz_chance(g->r, 30) ? nd + 1 : 0);
        I.niv = 1;
        break;
    case 6:
    case 7: { /* slice: odd starts, negative ends, steps 1..3, the -1: form of item 6 */
        if (nd < 1)
            return -1;
        I.op = OP_SLICE;
        I.iv[0] = fz_rand_dim(g, nd);
        int m = (int)fz_below(g->r, 5);
        if (m == 0) {
            I.iv[1] = -1;
            I.iv[2] = INT64_MAX;
            I.iv[3] = 1;
        } else if (m == 1) {
            I.iv[1] = 1;
            I.iv[2] = -1;
            I.iv[3] = fz_range(g->r, 1, 3);
        } else if (m == 2) {
            I.iv[1] = fz_range(g->r, -4, 3);
            I.iv[2] = fz_range(g->r, -3, 9);
            I.iv[3] = fz_range(g->r, 1, 3);
        } else if (m == 3) {
            I.iv[1] = 0;
            I.iv[2] = INT64_MAX;
            I.iv[3] = fz_range(g->r, 2, 3);
        } else {
            I.iv[1] = fz_range(g->r, 0, 2);
            I.iv[2] = fz_range(g->r, 1, 3) + I.iv[1];
            I.iv[3] = 1;
        }
        I.niv = 4;
        break;
    }
    case 8:
        if (nd < 1)
            return -1;
        I.op = OP_FLATTEN;
        I.iv[0] = (int)fz_below(g->r, nd);
        I.iv[1] = fz_range(g->r, I.iv[0], nd - 1);
        if (fz_chance(g->r, 30))
            I.iv[1] = -1;
        I.niv = 2;
        break;
    default: I.op = OP_CONTIGUOUS; break;
    }
    return fz_emit(g, &I, 0);
}

/* Slices, narrows and pads of a dim that a later call changes (so that it
 * becomes symbolic under dynamic = AUTO) meet the tensor they came from: x + x[:, -1:],
 * squeeze(x[:, -1:]), x[:, 1:] - x[:, :-1], pad(x)[:, 1:-1] + x. */
static int fz_gen_slice_pattern(fz_gen *g)
{
    int x = fz_pick_float(g, 1, 4);
    if (x < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, x, shape);
    int d = (int)fz_below(g->r, nd);
    for (int k = 0; k < nd; k++) /* prefer a dim from the size table: it will change */
        if (fz_ref_of(g->p, shape[(d + k) % nd]) >= 0) {
            d = (d + k) % nd;
            break;
        }
    int dd = fz_chance(g->r, 30) ? d - nd : d;
    int kind = (int)fz_below(g->r, 4);
    fz_ins S = fz_ins_new(OP_SLICE, x, -1);
    S.iv[0] = dd;
    S.niv = 4;
    if (kind == 0 || kind == 1) { /* x[..., -k:] */
        S.iv[1] = -fz_range(g->r, 1, 2);
        S.iv[2] = INT64_MAX;
        S.iv[3] = 1;
        if (S.iv[1] == -2 && fz_chance(g->r, 50)) { /* x[..., -2:-1] */
            S.iv[2] = -1;
        }
    } else if (kind == 2) { /* x[..., 1:] - x[..., :-1] */
        S.iv[1] = 1;
        S.iv[2] = INT64_MAX;
        S.iv[3] = 1;
    } else { /* pad then x[..., 1:-1] */
        fz_ins P = fz_ins_new(OP_PAD, x, -1);
        int pair = nd - 1 - d;
        if (pair > 2)
            return -1;
        for (int i = 0; i < 2 * (pair + 1); i++)
            P.iv[i] = 0;
        P.iv[2 * pair] = P.iv[2 * pair + 1] = 1;
        P.niv = 2 * (pair + 1);
        int pv = fz_emit(g, &P, 0);
        if (pv < 0)
            return -1;
        S.a[0] = pv;
        S.iv[1] = 1;
        S.iv[2] = -1;
        S.iv[3] = 1;
    }
    int sl = fz_emit(g, &S, 0);
    if (sl < 0)
        return -1;
    if (kind == 1) {
        fz_ins Q = fz_ins_new(OP_SQUEEZE, sl, -1);
        Q.iv[0] = fz_chance(g->r, 50) ? TGC_ALL_DIMS : dd;
        Q.niv = 1;
        int q = fz_emit(g, &Q, 0);
        if (q < 0 || fz_chance(g->r, 40))
            return q < 0 ? sl : q;
        sl = q;
    }
    if (kind == 2) {
        fz_ins S2 = fz_ins_new(OP_SLICE, x, -1);
        S2.iv[0] = dd;
        S2.iv[1] = 0;
        S2.iv[2] = -1;
        S2.iv[3] = 1;
        S2.niv = 4;
        int s2 = fz_emit(g, &S2, 0);
        if (s2 < 0)
            return sl;
        fz_ins D = fz_ins_new(OP_SUB, sl, s2);
        int dv = fz_emit(g, &D, 0);
        return dv >= 0 ? dv : sl;
    }
    fz_ins A = fz_chance(g->r, 50) ? fz_ins_new(OP_ADD, x, sl) : fz_ins_new(OP_MUL, sl, x);
    int a = fz_emit(g, &A, 0);
    return a >= 0 ? a : sl;
}

/* A view chain over a size-0 dim. */
static int fz_gen_view_chain_zero(fz_gen *g)
{
    int64_t shape[4] = {0, fz_size_pick(g), 1, fz_size_pick(g)};
    int nd = (int)fz_range(g->r, 2, 4);
    int64_t s2[4];
    for (int d = 0; d < nd; d++)
        s2[d] = shape[(d + (int)fz_below(g->r, 2)) % 4];
    s2[fz_below(g->r, nd)] = 0;
    int x = fz_add_leaf(g, FZ_ARG, TGC_F32, FZ_NORMAL, nd, s2);
    if (x < 0)
        return -1;
    fz_ins T = fz_ins_new(OP_TRANSPOSE, x, -1);
    T.iv[0] = 0;
    T.iv[1] = nd - 1;
    T.niv = 2;
    int t = fz_emit(g, &T, 0);
    if (t < 0)
        return -1;
    fz_ins R = fz_ins_new(OP_RESHAPE, t, -1);
    R.iv[0] = -1;
    R.niv = 1;
    int r = fz_emit(g, &R, 0);
    if (r < 0)
        return t;
    fz_ins S = fz_ins_new(OP_SLICE, r, -1);
    S.iv[0] = 0;
    S.iv[1] = 1;
    S.iv[2] = INT64_MAX;
    S.iv[3] = 3;
    S.niv = 4;
    int s = fz_emit(g, &S, 0);
    return s >= 0 ? s : r;
}

static int fz_gen_join(fz_gen *g)
{
    int a = fz_pick(g, FZ_ANY, 0, 4);
    if (a < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, a, shape);
    int kind = (int)fz_below(g->r, 3);
    if (kind == 2) { /* pad */
        if (nd < 1)
            return -1;
        fz_ins I = fz_ins_new(OP_PAD, a, -1);
        int pairs = (int)fz_range(g->r, 1, nd < 3 ? nd : 3);
        for (int i = 0; i < 2 * pairs; i++)
            I.iv[i] = fz_range(g->r, 0, 2);
        I.niv = 2 * pairs;
        I.dv[0] = fz_chance(g->r, 50) ? 0.0 : -1.5;
        return fz_emit(g, &I, 0);
    }
    int n = (int)fz_range(g->r, 1, 3);
    fz_ins I = fz_ins_new(kind == 0 ? OP_CAT : OP_STACK, a, -1);
    int dim = kind == 0 ? (nd ? (int)fz_below(g->r, nd) : 0) : (int)fz_below(g->r, nd + 1);
    if (kind == 0 && nd == 0)
        return -1;
    for (int k = 1; k < n; k++) {
        if (fz_chance(g->r, 30)) {
            I.a[k] = a;
            continue;
        }
        int64_t s2[TGC_MAX_DIMS];
        memcpy(s2, shape, sizeof s2);
        if (kind == 0)
            s2[dim] = fz_range(g->r, 0, 3);
        int b = fz_add_leaf(g, FZ_ARG, fz_chance(g->r, 80) ? fz_dtype(g, a) : fz_float_dtype(g->r),
                            fz_is_float(fz_dtype(g, a)) ? FZ_NORMAL : FZ_INT, nd, s2);
        if (b < 0)
            return -1;
        I.a[k] = b;
    }
    I.iv[0] = fz_chance(g->r, 30) ? dim - (kind == 0 ? nd : nd + 1) : dim;
    I.iv[1] = n;
    I.niv = 2;
    return fz_emit(g, &I, 0);
}

static int fz_gen_index(fz_gen *g)
{
    int kind = (int)fz_below(g->r, 3);
    if (kind == 0) { /* embedding: weight param [V, D], idx of any shape */
        int64_t w[2] = {fz_range(g->r, 1, 9), fz_range(g->r, 1, 6)};
        int wv = fz_add_leaf(g, FZ_PARAM, fz_float_dtype(g->r), FZ_NORMAL, 2, w);
        if (wv < 0)
            return -1;
        int64_t is[TGC_MAX_DIMS];
        int nd = (int)fz_range(g->r, 0, 3);
        for (int d = 0; d < nd; d++)
            is[d] = fz_size_pick(g);
        int iv = fz_leaf_int(g, nd, is, 0, w[0], -1);
        if (iv < 0)
            return -1;
        fz_ins I = fz_ins_new(OP_EMBEDDING, wv, iv);
        return fz_emit(g, &I, 0);
    }
    int a = fz_pick(g, FZ_ANY, 1, 4);
    if (a < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, a, shape);
    int dim = (int)fz_below(g->r, nd);
    if (shape[dim] == 0)
        return -1;
    if (kind == 1) { /* gather: idx of a's rank, each dim <= a's */
        int64_t is[TGC_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            is[d] = d == dim ? fz_range(g->r, 0, 4) : fz_range(g->r, shape[d] ? 1 : 0, shape[d]);
        int iv = fz_leaf_int(g, nd, is, 0, shape[dim], shape[dim]);
        if (iv < 0)
            return -1;
        fz_ins I = fz_ins_new(OP_GATHER, a, iv);
        I.iv[0] = fz_chance(g->r, 30) ? dim - nd : dim;
        I.niv = 1;
        return fz_emit(g, &I, 0);
    }
    int64_t n = fz_range(g->r, 0, 5);
    int iv = fz_leaf_int(g, 1, &n, 0, shape[dim], shape[dim]);
    if (iv < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_INDEX_SELECT, a, iv);
    I.iv[0] = dim;
    I.niv = 1;
    return fz_emit(g, &I, 0);
}

static int fz_gen_matmul(fz_gen *g)
{
    int a = fz_pick_float(g, 1, 4);
    if (a < 0)
        return -1;
    int64_t shape[TGC_MAX_DIMS];
    int nd = fz_shape(g, a, shape);
    tgc_dtype dt = fz_dtype(g, a);
    if (fz_chance(g->r, 40)) { /* linear */
        int64_t w[2] = {fz_range(g->r, 1, 7), shape[nd - 1]};
        int wv = fz_add_leaf(g, FZ_PARAM, dt, FZ_NORMAL, 2, w);
        int bv = -1;
        if (wv < 0)
            return -1;
        if (fz_chance(g->r, 60)) {
            bv = fz_add_leaf(g, FZ_PARAM, dt, FZ_NORMAL, 1, w);
            if (bv < 0)
                return -1;
        }
        fz_ins I = fz_ins_new(OP_LINEAR, a, wv);
        I.a[2] = bv;
        return fz_emit(g, &I, 0);
    }
    /* b: [..., k, m] (or 1-D [k]), batch dims broadcast */
    int64_t bs[TGC_MAX_DIMS];
    int bn;
    int64_t k = shape[nd - 1];
    if (fz_chance(g->r, 20)) {
        bs[0] = k;
        bn = 1;
    } else {
        int nb = nd >= 2 ? (int)fz_below(g->r, nd - 1) : 0;
        bn = 0;
        for (int i = nd - 2 - nb; i < nd - 2; i++)
            bs[bn++] = fz_chance(g->r, 30) ? 1 : shape[i];
        bs[bn++] = k;
        bs[bn++] = fz_chance(g->r, 20) ? 1 : fz_size_pick(g);
    }
    int b = fz_add_leaf(g, fz_chance(g->r, 30) ? FZ_PARAM : FZ_ARG, dt, FZ_NORMAL, bn, bs);
    if (b < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_MATMUL, a, b);
    return fz_emit(g, &I, 0);
}

/* A float value of rank 4 ([N, C, H, W]), made fresh when none exists. */
static int fz_pick_nchw(fz_gen *g)
{
    int x = fz_chance(g->r, 60) ? fz_pick(g, FZ_FLOAT, 4, 4) : -1;
    if (x >= 0)
        return x;
    int64_t s[4] = {fz_chance(g->r, 30) ? 1 : fz_size_pick(g), fz_range(g->r, 1, 4),
                    fz_range(g->r, 1, 9), fz_range(g->r, 1, 9)};
    if (s[0] == 0 && fz_chance(g->r, 70))
        s[0] = 2;
    s[2] = g->p->sizes[0][fz_below(g->r, g->p->nsizes)];
    return fz_add_leaf(g, FZ_ARG, fz_chance(g->r, 90) ? TGC_F32 : TGC_F64, FZ_NORMAL, 4, s);
}

static int fz_gen_conv_pool(fz_gen *g)
{
    int x = fz_pick_nchw(g);
    if (x < 0)
        return -1;
    int64_t s[TGC_MAX_DIMS];
    fz_shape(g, x, s);
    tgc_dtype dt = fz_dtype(g, x);
    int kind = (int)fz_below(g->r, 4);
    if (kind == 0) {
        int64_t c = s[1], groups = 1;
        if (c > 1 && fz_chance(g->r, 30))
            groups = c % 2 == 0 ? 2 : c;
        int64_t o = groups * fz_range(g->r, 1, 3);
        int64_t w[4] = {o, c / groups, fz_range(g->r, 1, 3), fz_range(g->r, 1, 3)};
        int wv = fz_add_leaf(g, FZ_PARAM, dt, FZ_NORMAL, 4, w);
        if (wv < 0)
            return -1;
        int bv = -1;
        if (fz_chance(g->r, 60)) {
            bv = fz_add_leaf(g, FZ_PARAM, dt, FZ_NORMAL, 1, &o);
            if (bv < 0)
                return -1;
        }
        fz_ins I = fz_ins_new(OP_CONV2D, x, wv);
        I.a[2] = bv;
        I.iv[0] = fz_range(g->r, 1, 2);
        I.iv[1] = fz_range(g->r, 1, 2);
        I.iv[2] = fz_range(g->r, 0, 1);
        I.iv[3] = fz_range(g->r, 0, 1);
        I.iv[4] = fz_chance(g->r, 20) ? 2 : 1;
        I.iv[5] = fz_chance(g->r, 20) ? 2 : 1;
        I.iv[6] = groups;
        I.niv = 7;
        return fz_emit(g, &I, 0);
    }
    if (kind == 3) {
        fz_ins I = fz_ins_new(OP_ADAPTIVE_POOL, x, -1);
        I.iv[0] = fz_range(g->r, 1, 3);
        I.iv[1] = fz_range(g->r, 1, 3);
        I.niv = 2;
        return fz_emit(g, &I, 0);
    }
    fz_ins I = fz_ins_new(kind == 1 ? OP_MAX_POOL : OP_AVG_POOL, x, -1);
    I.iv[0] = fz_range(g->r, 1, 3);
    I.iv[1] = fz_range(g->r, 1, 3);
    I.iv[2] = fz_range(g->r, 0, 2);
    I.iv[3] = fz_range(g->r, 0, 2);
    I.iv[4] = fz_range(g->r, 0, I.iv[0] / 2);
    I.iv[5] = fz_range(g->r, 0, I.iv[1] / 2);
    I.niv = 6;
    return fz_emit(g, &I, 0);
}

static int fz_gen_norm(fz_gen *g)
{
    int kind = (int)fz_below(g->r, 2);
    if (kind == 0) { /* batch_norm, train or eval, with running stats as module buffers */
        int x = fz_chance(g->r, 50) ? fz_pick_nchw(g) : fz_pick_float(g, 2, 4);
        if (x < 0)
            return -1;
        int64_t s[TGC_MAX_DIMS];
        fz_shape(g, x, s);
        tgc_dtype dt = fz_dtype(g, x);
        int training = (int)fz_below(g->r, 2);
        fz_ins I = fz_ins_new(OP_BATCH_NORM, x, -1);
        if (!training || fz_chance(g->r, 80)) {
            /* module buffers, or tensors the model captures */
            fz_class cls = fz_chance(g->r, 40) ? FZ_CAP : FZ_BUF;
            I.a[1] = fz_add_leaf(g, cls, dt, FZ_NORMAL, 1, &s[1]);
            I.a[2] = fz_add_leaf(g, cls, dt, FZ_POS, 1, &s[1]);
            if (I.a[1] < 0 || I.a[2] < 0)
                return -1;
        }
        if (fz_chance(g->r, 60)) {
            I.a[3] = fz_add_leaf(g, FZ_PARAM, dt, FZ_POS, 1, &s[1]);
            I.a[4] = fz_add_leaf(g, FZ_PARAM, dt, FZ_NORMAL, 1, &s[1]);
            if (I.a[3] < 0 || I.a[4] < 0)
                return -1;
        }
        I.iv[0] = training;
        I.niv = 1;
        I.dv[0] = 0.1;
        I.dv[1] = 1e-5;
        return fz_emit(g, &I, 0);
    }
    int x = fz_pick_float(g, 1, 4);
    if (x < 0)
        return -1;
    int64_t s[TGC_MAX_DIMS];
    int nd = fz_shape(g, x, s);
    int nn = (int)fz_range(g->r, 1, nd);
    fz_ins I = fz_ins_new(OP_LAYER_NORM, x, -1);
    if (fz_chance(g->r, 60)) {
        I.a[1] = fz_add_leaf(g, FZ_PARAM, fz_dtype(g, x), FZ_POS, nn, s + nd - nn);
        I.a[2] = fz_chance(g->r, 50)
                     ? fz_add_leaf(g, FZ_PARAM, fz_dtype(g, x), FZ_NORMAL, nn, s + nd - nn)
                     : -1;
        if (I.a[1] < 0)
            return -1;
    }
    I.iv[0] = nn;
    I.niv = 1;
    I.dv[0] = 1e-5;
    return fz_emit(g, &I, 0);
}

static int fz_gen_dropout(fz_gen *g)
{
    static const double ps[] = {0.0, 0.25, 0.5, 1.0};
    int a = fz_pick_float(g, 0, 4);
    if (a < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_DROPOUT, a, -1);
    I.dv[0] = ps[fz_below(g->r, 4)];
    I.iv[0] = fz_chance(g->r, 80);
    I.niv = 1;
    return fz_emit(g, &I, 0);
}

static int fz_gen_loss(fz_gen *g)
{
    int x = fz_pick_float(g, 2, 3);
    if (x < 0)
        return -1;
    int64_t s[TGC_MAX_DIMS], ts[TGC_MAX_DIMS];
    int nd = fz_shape(g, x, s), tn = 0;
    if (s[1] == 0)
        return -1;
    for (int d = 0; d < nd; d++)
        if (d != 1)
            ts[tn++] = s[d];
    int t = fz_leaf_int(g, tn, ts, 0, s[1], s[1]);
    if (t < 0)
        return -1;
    int ce = fz_chance(g->r, 60);
    if (!ce) {
        fz_ins L = fz_ins_new(OP_LOG_SOFTMAX, x, -1);
        L.iv[0] = 1;
        L.niv = 1;
        x = fz_emit(g, &L, 0);
        if (x < 0)
            return -1;
    }
    fz_ins I = fz_ins_new(ce ? OP_CROSS_ENTROPY : OP_NLL, x, t);
    I.iv[0] = fz_below(g->r, 3);
    I.iv[1] = fz_chance(g->r, 25) ? 0 : -100;
    I.niv = 2;
    I.dv[0] = ce && fz_chance(g->r, 30) ? 0.1 : 0.0;
    return fz_emit(g, &I, 0);
}

static int fz_gen_sdpa(fz_gen *g)
{
    int q = fz_pick_float(g, 2, 4);
    if (q < 0)
        return -1;
    int64_t s[TGC_MAX_DIMS];
    int nd = fz_shape(g, q, s);
    tgc_dtype dt = fz_dtype(g, q);
    int64_t ks[TGC_MAX_DIMS], vs[TGC_MAX_DIMS];
    memcpy(ks, s, sizeof ks);
    int64_t S = fz_chance(g->r, 50) ? s[nd - 2] : fz_size_pick(g);
    ks[nd - 2] = S;
    memcpy(vs, ks, sizeof vs);
    vs[nd - 1] = fz_chance(g->r, 60) ? s[nd - 1] : fz_range(g->r, 1, 5);
    int k = fz_add_leaf(g, FZ_ARG, dt, FZ_NORMAL, nd, ks);
    int v = k >= 0 ? fz_add_leaf(g, FZ_ARG, dt, FZ_NORMAL, nd, vs) : -1;
    if (v < 0)
        return -1;
    fz_ins I = fz_ins_new(OP_SDPA, q, k);
    I.a[2] = v;
    int mk = (int)fz_below(g->r, 4);
    int causal = mk == 3;
    if (mk == 1 || mk == 2) {
        int64_t ms[2] = {fz_chance(g->r, 30) ? 1 : s[nd - 2], S};
        if (mk == 1) {
            I.a[3] = fz_add_leaf(g, FZ_ARG, TGC_BOOL, FZ_BOOL, 2, ms);
        } else {
            I.a[3] = fz_add_leaf(g, FZ_ARG, dt, FZ_NORMAL, 2, ms);
        }
        if (I.a[3] < 0)
            return -1;
    }
    I.iv[0] = causal;
    I.niv = 1;
    I.dv[0] = fz_chance(g->r, 20) ? 0.25 : 0.0;
    I.dv[1] = fz_chance(g->r, 20) ? 0.5 : 0.0;
    return fz_emit(g, &I, 0);
}

/* Deliberately invalid or extreme arguments: the program ends here and
 * every path must fail with the same status (TGC_ERR_SHAPE), never crash or report INTERNAL. */
static int fz_gen_extreme(fz_gen *g)
{
    int a = fz_pick(g, FZ_ANY, 1, 3);
    if (a < 0)
        return -1;
    int nd = tgc_ndim(g->val[a]);
    int kind = (int)fz_below(g->r, 4);
    fz_ins I = fz_ins_new(OP_PAD, a, -1);
    if (kind == 0) {
        I.iv[0] = INT64_MAX;
        I.iv[1] = 1;
        I.niv = 2;
    } else if (kind == 1) {
        I.op = OP_EXPAND;
        I.iv[0] = (int64_t)1 << 62;
        for (int d = 0; d < nd; d++)
            I.iv[d + 1] = -1;
        I.niv = nd + 1;
    } else if (kind == 2) {
        I.op = OP_SLICE;
        I.iv[0] = nd - 1;
        I.iv[1] = INT64_MIN;
        I.iv[2] = INT64_MAX;
        I.iv[3] = INT64_MAX;
        I.niv = 4;
    } else {
        I.op = OP_RESHAPE;
        I.iv[0] = (int64_t)1 << 62;
        I.iv[1] = (int64_t)1 << 62;
        I.iv[2] = 0;
        I.niv = 3;
    }
    return fz_emit(g, &I, 1);
}

/* Reruns the whole program eagerly with the sizes of one call; 1 when every op succeeds. */
static int fz_valid_call(const fz_prog *p, int call)
{
    tgc_scope_push();
    tgc_tensor *v[FZ_MAX_INS];
    int ok = 1;
    for (int i = 0; i < p->nins && ok; i++) {
        const fz_ins *I = &p->ins[i];
        v[i] = I->op == OP_LEAF ? fz_leaf_tensor(p, &p->leaves[I->leaf], call) : fz_exec(I, v);
        if (!v[i])
            ok = 0;
    }
    tgc_scope_pop();
    return ok;
}

void fz_generate(fz_rng *r, fz_prog *p, const char *progress)
{
    memset(p, 0, sizeof *p);
    fz_gen gs, *g = &gs;
    memset(g, 0, sizeof *g);
    g->r = r;
    g->p = p;
    g->progress = progress;
    p->seed = r->s;
    p->nsizes = (int)fz_range(r, 2, FZ_MAX_SIZES);
    for (int s = 0; s < p->nsizes; s++) { /* distinct call-0 sizes in 2..9 */
        int64_t v;
        int dup;
        do {
            v = fz_range(r, 2, 9);
            dup = 0;
            for (int t = 0; t < s; t++)
                dup |= p->sizes[0][t] == v;
        } while (dup);
        p->sizes[0][s] = v;
    }
    int dk = (int)fz_below(r, 10);
    p->dynamic = dk < 7 ? TGC_DYNAMIC_AUTO : dk < 9 ? TGC_DYNAMIC_ALWAYS : TGC_DYNAMIC_NEVER;
    tgc_manual_seed(p->seed);
    tgc_scope_push();
    int n0 = (int)fz_range(r, 1, 3);
    for (int i = 0; i < n0; i++) {
        tgc_dtype dt = fz_float_dtype(r);
        fz_data data = FZ_NORMAL;
        if (fz_chance(r, 10)) {
            dt = fz_chance(r, 50) ? TGC_I64 : TGC_I32;
            data = FZ_INT;
        } else if (fz_chance(r, 5)) {
            dt = TGC_BOOL;
            data = FZ_BOOL;
        }
        fz_new_input(g, 0, 4, dt, data);
    }
    if (p->nins == 0)
        fz_new_input(g, 1, 3, TGC_F32, FZ_NORMAL);
    /* family weights */
    typedef int (*fam_fn)(fz_gen *);
    static const struct {
        fam_fn fn;
        int w;
    } fams[] = {{fz_gen_unary, 12},        {fz_gen_scalar, 8},    {fz_gen_binary, 16},
                {fz_gen_compare, 6},       {fz_gen_cast, 4},      {fz_gen_reduce, 12},
                {fz_gen_norm_pattern, 9},  {fz_gen_view, 20},     {fz_gen_view_chain_zero, 2},
                {fz_gen_slice_pattern, 5}, {fz_gen_join, 6},      {fz_gen_index, 5},
                {fz_gen_matmul, 6},        {fz_gen_conv_pool, 6}, {fz_gen_norm, 5},
                {fz_gen_dropout, 3},       {fz_gen_loss, 3},      {fz_gen_sdpa, 4}};
    int total = 0, nf = (int)(sizeof fams / sizeof fams[0]);
    for (int i = 0; i < nf; i++)
        total += fams[i].w;
    int steps = (int)fz_range(r, 1, 10), done = 0;
    for (int tries = 0; done < steps && tries < steps * 4 && !p->bad_op; tries++) {
        if (p->nins > FZ_MAX_INS - 12 || p->nleaves > FZ_MAX_LEAVES - 6)
            break;
        int saved_ins = p->nins, saved_leaves = p->nleaves, saved_args = p->nargs;
        int pick = (int)fz_below(r, total), f = 0;
        while (pick >= fams[f].w)
            pick -= fams[f++].w;
        if (fams[f].fn(g) >= 0) {
            done++;
        } else if (!p->bad_op) { /* roll back what the failed family appended */
            p->nins = saved_ins;
            p->nleaves = saved_leaves;
            p->nargs = saved_args;
        }
    }
    if (!p->bad_op && fz_chance(r, 3))
        fz_gen_extreme(g);
    /* outputs: the last value, then the other op results nothing uses (latest first), then
     * sometimes an intermediate; sinks beyond FZ_MAX_OUT stay dead code */
    p->outs[p->nout++] = p->nins - 1;
    int used[FZ_MAX_INS] = {0};
    for (int i = 0; i < p->nins; i++)
        for (int k = 0; k < 5; k++)
            if (p->ins[i].a[k] >= 0)
                used[p->ins[i].a[k]] = 1;
    for (int i = p->nins - 2; i >= 0 && p->nout < FZ_MAX_OUT && !p->bad_op; i--)
        if (!used[i] && p->ins[i].op != OP_LEAF && g->val[i] && !fz_chance(r, 10))
            p->outs[p->nout++] = i;
    if (p->nout < FZ_MAX_OUT && !p->bad_op && fz_chance(r, 30)) {
        int v = (int)fz_below(r, p->nins);
        int dup = 0;
        for (int o = 0; o < p->nout; o++)
            dup |= p->outs[o] == v;
        if (!dup && g->val[v])
            p->outs[p->nout++] = v;
    }
    tgc_scope_pop();
    /* later calls: the same sizes again, or some sizes changed (kept when valid eagerly) */
    p->ncalls = (int)fz_range(r, 1, FZ_MAX_CALLS);
    for (int c = 1; c < p->ncalls; c++) {
        int valid = 0;
        for (int tries = 0; tries < 4 && !valid; tries++) {
            memcpy(p->sizes[c], p->sizes[c - 1], sizeof p->sizes[c]);
            if (!fz_chance(r, 25)) {
                int s = (int)fz_below(r, p->nsizes);
                p->sizes[c][s] = fz_chance(r, 10) ? fz_range(r, 0, 1) : fz_range(r, 2, 11);
                if (fz_chance(r, 30)) {
                    s = (int)fz_below(r, p->nsizes);
                    p->sizes[c][s] = fz_range(r, 2, 11);
                }
            }
            valid = fz_valid_call(p, c);
        }
    }
    fz_progress(g);
}

/* ------------------------------------------------------------------ runner */

typedef struct fz_host {
    tgc_dtype dt;
    int ndim;
    int64_t shape[TGC_MAX_DIMS];
    int64_t n;
    double *x; /* values (integers exactly) */
} fz_host;

typedef struct fz_result {
    tgc_status st;
    char msg[256];
    int nout;
    fz_host out[FZ_MAX_OUT];
    int nbuf;
    fz_host buf[FZ_MAX_LEAVES]; /* module buffers and captured tensors after the call */
    int buf_leaf[FZ_MAX_LEAVES];
    tgc_stats stats;
} fz_result;

static int fz_capture(const tgc_tensor *t, fz_host *h)
{
    memset(h, 0, sizeof *h);
    if (!t)
        return -1;
    h->dt = tgc_dtype_of(t);
    h->ndim = tgc_shape(t, h->shape);
    h->n = tgc_numel(t);
    if (h->n < 0 || h->n > (1 << 22))
        return -1;
    h->x = calloc((size_t)(h->n ? h->n : 1), sizeof(double));
    if (!h->x)
        return -1;
    int is_float = fz_is_float(h->dt);
    tgc_scope_push();
    tgc_tensor *c = tgc_cast((tgc_tensor *)t, is_float ? TGC_F64 : TGC_I64);
    int rc = -1;
    if (c) {
        if (is_float) {
            rc = tgc_copy_to_host(c, h->x, (size_t)h->n * 8) == TGC_OK ? 0 : -1;
        } else {
            int64_t *tmp = malloc((size_t)(h->n ? h->n : 1) * 8);
            if (tmp && tgc_copy_to_host(c, tmp, (size_t)h->n * 8) == TGC_OK) {
                for (int64_t i = 0; i < h->n; i++)
                    h->x[i] = (double)tmp[i];
                rc = 0;
            }
            free(tmp);
        }
    }
    tgc_scope_pop();
    return rc;
}

static void fz_result_free(fz_result *r)
{
    for (int o = 0; o < r->nout; o++)
        free(r->out[o].x);
    for (int b = 0; b < r->nbuf; b++)
        free(r->buf[b].x);
    memset(r, 0, sizeof *r);
}

/* The tolerance: ops.h's per-dtype bound, scaled by the number of op instructions (errors of
 * a chain add up) and applied to |ref| and to the output's largest magnitude (cancellation
 * leaves errors of the intermediates' size). Integers, bool and dropout masks are exact. */
static void fz_tol(tgc_dtype dt, int nops, double *atol, double *rtol)
{
    double k = 2.0 * (1 + nops);
    switch (dt) {
    case TGC_F64:
        *atol = 1e-7 * k;
        *rtol = 1e-7 * k;
        break;
    case TGC_F16:
        *atol = 1e-5 * k;
        *rtol = 1e-3 * k;
        break;
    case TGC_BF16:
        *atol = 1e-5 * k;
        *rtol = 1.6e-2 * k;
        break;
    default:
        *atol = 1e-5 * k;
        *rtol = 1.3e-6 * k;
        break;
    }
}

static int fz_same_value(double a, double b, double atol, double rtol, double scale, int exact)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    if (exact)
        return a == b;
    return fabs(a - b) <= atol * (1 + scale) + rtol * (fabs(b) + scale);
}

/* Compares one captured tensor against the oracle's; writes the difference. */
static int fz_compare_host(const fz_host *got, const fz_host *ref, int nops, char *why, size_t n)
{
    if (got->dt != ref->dt) {
        snprintf(why, n, "dtype %s, oracle %s", tgc_dtype_name(got->dt), tgc_dtype_name(ref->dt));
        return 0;
    }
    int same_shape = got->ndim == ref->ndim;
    for (int d = 0; same_shape && d < got->ndim; d++)
        same_shape = got->shape[d] == ref->shape[d];
    if (!same_shape) {
        char a[96] = "", b[96] = "";
        for (int d = 0; d < got->ndim; d++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "",
                     (long long)got->shape[d]);
        for (int d = 0; d < ref->ndim; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "",
                     (long long)ref->shape[d]);
        snprintf(why, n, "shape [%s], oracle [%s]", a, b);
        return 0;
    }
    double atol, rtol, scale = 0;
    fz_tol(ref->dt, nops, &atol, &rtol);
    int exact = !fz_is_float(ref->dt);
    for (int64_t i = 0; i < ref->n; i++)
        if (isfinite(ref->x[i]) && fabs(ref->x[i]) > scale)
            scale = fabs(ref->x[i]);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < ref->n; i++)
        if (!fz_same_value(got->x[i], ref->x[i], atol, rtol, scale, exact)) {
            if (first < 0)
                first = i;
            bad++;
        }
    if (bad) {
        snprintf(why, n, "%lld of %lld values differ, first at flat index %lld: %.9g, oracle %.9g",
                 (long long)bad, (long long)ref->n, (long long)first, got->x[first], ref->x[first]);
        return 0;
    }
    return 1;
}

typedef struct fz_path {
    const char *name;
    tgc_backend_kind backend;
    tgc_fn *fn;
    tgc_module *mod;
    fz_ctx ctx;
} fz_path;

int fz_have_llvm(void)
{
    static int have = -1;
    if (have < 0) {
        tgc_config cfg = tgc_config_default();
        cfg.backend = TGC_BACKEND_LLVM;
        cfg.log = 0;
        tgc_fn *f = tgc_compile(fz_model, "probe", &cfg);
        have = f != NULL;
        tgc_fn_free(f);
        tgc_clear_error();
    }
    return have;
}

static int fz_make_path(const fz_prog *p, fz_path *P, const char *name, tgc_backend_kind be)
{
    memset(P, 0, sizeof *P);
    P->name = name;
    P->backend = be;
    P->ctx.p = p;
    tgc_config cfg = tgc_config_default();
    cfg.backend = be;
    cfg.dynamic = p->dynamic;
    cfg.log = 0;
    P->fn = tgc_compile(fz_model, "fuzz", &cfg);
    P->mod = tgc_module_create("fuzz", &P->ctx);
    if (!P->fn || !P->mod)
        return -1;
    for (int l = 0; l < p->nleaves; l++) /* in the caller's scope: they outlive the calls */
        if (p->leaves[l].cls == FZ_CAP && !(P->ctx.cap[l] = fz_leaf_tensor(p, &p->leaves[l], 0)))
            return -1;
    tgc_scope_push();
    int rc = 0;
    for (int l = 0; l < p->nleaves && rc == 0; l++) {
        const fz_leaf *L = &p->leaves[l];
        if (L->cls == FZ_ARG || L->cls == FZ_CAP)
            continue;
        char nm[16];
        fz_leaf_name(L, l, nm, sizeof nm);
        tgc_tensor *init = fz_leaf_tensor(p, L, 0);
        tgc_tensor *t = L->cls == FZ_PARAM ? tgc_module_param(P->mod, nm, init)
                                           : tgc_module_buffer(P->mod, nm, init);
        if (!t)
            rc = -1;
    }
    tgc_scope_pop();
    return rc;
}

static void fz_call_path(const fz_prog *p, fz_path *P, int call, fz_result *R)
{
    memset(R, 0, sizeof *R);
    tgc_scope_push();
    tgc_tensor *in[FZ_MAX_LEAVES];
    int nin = 0;
    for (int l = 0; l < p->nleaves; l++) {
        const fz_leaf *L = &p->leaves[l];
        if (L->cls != FZ_ARG)
            continue;
        tgc_tensor *t = fz_leaf_tensor(p, L, call);
        for (int d = 0; t && d < L->ndim; d++)
            if (L->dyn_mask & (1u << d))
                tgc_mark_dynamic(t, d);
        in[nin++] = t;
    }
    tgc_tensor *out[FZ_MAX_OUT] = {0};
    tgc_clear_error();
    tgc_manual_seed(p->seed ^ (uint64_t)(call + 1));
    R->st = tgc_call(P->fn, P->mod, in, nin, out, p->nout);
    if (R->st != TGC_OK) {
        snprintf(R->msg, sizeof R->msg, "%s", tgc_last_error());
    } else {
        R->nout = p->nout;
        for (int o = 0; o < p->nout; o++)
            if (fz_capture(out[o], &R->out[o]) != 0) {
                R->st = TGC_ERR_INTERNAL;
                snprintf(R->msg, sizeof R->msg, "fuzzer: output %d could not be read back: %s", o,
                         tgc_last_error());
            }
    }
    for (int l = 0; l < p->nleaves; l++) {
        const fz_leaf *L = &p->leaves[l];
        if (L->cls != FZ_BUF && L->cls != FZ_CAP)
            continue;
        char nm[16];
        fz_leaf_name(L, l, nm, sizeof nm);
        R->buf_leaf[R->nbuf] = l;
        fz_capture(L->cls == FZ_CAP ? P->ctx.cap[l] : tgc_module_get(P->mod, nm), &R->buf[R->nbuf]);
        R->nbuf++;
    }
    tgc_fn_stats(P->fn, &R->stats);
    tgc_scope_pop();
}

fz_verdict fz_run(const fz_prog *p, FILE *report)
{
    fz_path paths[3];
    int np = 0;
    fz_verdict verdict = FZ_PASS;
    int nops = 0;
    for (int i = 0; i < p->nins; i++)
        nops += p->ins[i].op != OP_LEAF;
    /* paths[0] is the oracle */
    int ok = fz_make_path(p, &paths[np++], "interp", TGC_BACKEND_INTERP) == 0;
    ok = ok && fz_make_path(p, &paths[np++], "eager", TGC_BACKEND_EAGER) == 0;
    if (ok && fz_have_llvm())
        ok = fz_make_path(p, &paths[np++], "llvm", TGC_BACKEND_LLVM) == 0;
    if (!ok) {
        fprintf(report, "  setup failed: %s\n", tgc_last_error());
        verdict = FZ_INTERNAL;
    }
    fz_result prev[3], cur[3];
    memset(prev, 0, sizeof prev);
    for (int c = 0; ok && c < p->ncalls; c++) {
        for (int k = 0; k < np; k++)
            fz_call_path(p, &paths[k], c, &cur[k]);
        int repeat = c > 0 && memcmp(p->sizes[c], p->sizes[c - 1], sizeof p->sizes[c]) == 0;
        for (int k = 0; k < np; k++) {
            fz_result *R = &cur[k], *O = &cur[0];
            if (R->st == TGC_ERR_INTERNAL) {
                fprintf(report, "  call %d: %s: TGC_ERR_INTERNAL: %s\n", c, paths[k].name, R->msg);
                verdict = FZ_INTERNAL;
            }
            if (k > 0 && R->st != O->st) {
                fprintf(report, "  call %d: %s status %s (%s), oracle %s (%s)\n", c, paths[k].name,
                        tgc_status_str(R->st), R->msg, tgc_status_str(O->st), O->msg);
                if (verdict == FZ_PASS)
                    verdict = FZ_MISMATCH;
            } else if (k > 0 && R->st == TGC_OK) {
                char why[256];
                for (int o = 0; o < R->nout; o++)
                    if (!fz_compare_host(&R->out[o], &O->out[o], nops, why, sizeof why)) {
                        fprintf(report, "  call %d: %s out[%d] (v%d): %s\n", c, paths[k].name, o,
                                p->outs[o], why);
                        if (verdict == FZ_PASS)
                            verdict = FZ_MISMATCH;
                    }
            }
            /* State after a failed call is not compared: eager ran the ops before the failing
             * one (and their in-place writes), a compiled call failed at trace time and ran none */
            if (k > 0 && R->st == TGC_OK && O->st == TGC_OK && R->nbuf == O->nbuf) {
                char why[256];
                for (int b = 0; b < R->nbuf; b++)
                    if (O->buf[b].x && R->buf[b].x &&
                        !fz_compare_host(&R->buf[b], &O->buf[b], nops, why, sizeof why)) {
                        fprintf(report, "  call %d: %s %s%d after the call: %s\n", c, paths[k].name,
                                p->leaves[R->buf_leaf[b]].cls == FZ_CAP ? "captured tensor "
                                                                        : "module buffer b",
                                R->buf_leaf[b], why);
                        if (verdict == FZ_PASS)
                            verdict = FZ_MISMATCH;
                    }
            }
            /* an identical call must hit the cache: nothing about it changed */
            if (repeat && paths[k].backend != TGC_BACKEND_EAGER && R->st == TGC_OK &&
                prev[k].st == TGC_OK && R->stats.compiles > prev[k].stats.compiles) {
                fprintf(report,
                        "  call %d: %s recompiled on a call identical to the previous one "
                        "(reason: %s)\n",
                        c, paths[k].name, R->stats.last_recompile_reason);
                if (verdict == FZ_PASS)
                    verdict = FZ_MISMATCH;
            }
        }
        int failed = cur[0].st != TGC_OK;
        for (int k = 0; k < np; k++) {
            fz_result_free(&prev[k]);
            prev[k] = cur[k];
        }
        if (failed) /* the paths' module and captured state may now differ: stop here */
            break;
    }
    for (int k = 0; k < np; k++) {
        fz_result_free(&prev[k]);
        tgc_fn_free(paths[k].fn);
        tgc_module_free(paths[k].mod);
        for (int l = 0; l < p->nleaves; l++)
            tgc_tensor_free(paths[k].ctx.cap[l]);
    }
    return verdict;
}

/* ------------------------------------------------------------------ reducer */

/* q = p with instruction i's uses replaced by subst[i] (>= 0) and the instructions no output
 * needs removed; leaves and argument positions renumbered. */
static void fz_rebuild(const fz_prog *p_in, const int *subst, fz_prog *q)
{
    static fz_prog copy; /* p_in may be q */
    copy = *p_in;
    const fz_prog *p = &copy;
    int live[FZ_MAX_INS] = {0}, map[FZ_MAX_INS], lmap[FZ_MAX_LEAVES];
    int res[FZ_MAX_INS];
    for (int i = 0; i < p->nins; i++) {
        int j = i;
        while (subst[j] >= 0)
            j = subst[j];
        res[i] = j;
    }
    for (int o = 0; o < p->nout; o++)
        live[res[p->outs[o]]] = 1;
    for (int i = p->nins - 1; i >= 0; i--)
        if (live[i])
            for (int k = 0; k < 5; k++)
                if (p->ins[i].a[k] >= 0)
                    live[res[p->ins[i].a[k]]] = 1;
    *q = *p;
    q->nins = q->nleaves = q->nargs = q->nout = 0;
    for (int l = 0; l < p->nleaves; l++)
        lmap[l] = -1;
    for (int i = 0; i < p->nins; i++) {
        map[i] = -1;
        if (!live[i])
            continue;
        fz_ins I = p->ins[i];
        for (int k = 0; k < 5; k++)
            if (I.a[k] >= 0)
                I.a[k] = map[res[I.a[k]]];
        if (I.op == OP_LEAF) {
            if (lmap[I.leaf] < 0) {
                lmap[I.leaf] = q->nleaves;
                q->leaves[q->nleaves] = p->leaves[I.leaf];
                if (q->leaves[q->nleaves].cls == FZ_ARG)
                    q->leaves[q->nleaves].arg_index = q->nargs++;
                q->nleaves++;
            }
            I.leaf = lmap[I.leaf];
        }
        map[i] = q->nins;
        q->ins[q->nins++] = I;
    }
    for (int o = 0; o < p->nout; o++) {
        int m = map[res[p->outs[o]]];
        int dup = 0;
        for (int k = 0; k < q->nout; k++)
            dup |= q->outs[k] == m;
        if (!dup)
            q->outs[q->nout++] = m;
    }
}

static fz_verdict fz_run_quiet(const fz_prog *p)
{
    FILE *null = fopen("/dev/null", "w");
    fz_verdict v = fz_run(p, null ? null : stderr);
    if (null)
        fclose(null);
    return v;
}

void fz_reduce(const fz_prog *p, fz_prog *out)
{
    static fz_prog cur, cand;
    int subst[FZ_MAX_INS];
    cur = *p;
    fz_verdict want = fz_run_quiet(&cur);
    *out = cur;
    if (want == FZ_PASS)
        return;
    for (int round = 0, changed = 1; changed && round < 6; round++) {
        changed = 0;
        /* one output */
        for (int o = 0; cur.nout > 1 && o < cur.nout; o++) {
            for (int i = 0; i < cur.nins; i++)
                subst[i] = -1;
            cand = cur;
            cand.outs[0] = cur.outs[o];
            cand.nout = 1;
            fz_rebuild(&cand, subst, &cand);
            if (fz_run_quiet(&cand) == want) {
                cur = cand;
                changed = 1;
                break;
            }
        }
        /* fewer calls */
        for (int c = 0; cur.ncalls > 1 && c < cur.ncalls; c++) {
            cand = cur;
            for (int k = c; k + 1 < cand.ncalls; k++)
                memcpy(cand.sizes[k], cand.sizes[k + 1], sizeof cand.sizes[k]);
            cand.ncalls--;
            if (fz_run_quiet(&cand) == want) {
                cur = cand;
                changed = 1;
                c--;
            }
        }
        /* an instruction replaced by one of its operands */
        for (int i = cur.nins - 1; i >= 0; i--) {
            if (cur.ins[i].op == OP_LEAF)
                continue;
            for (int k = 0; k < 5 && i < cur.nins; k++) {
                int a = cur.ins[i].a[k];
                if (a < 0)
                    continue;
                for (int j = 0; j < cur.nins; j++)
                    subst[j] = -1;
                subst[i] = a;
                fz_rebuild(&cur, subst, &cand);
                if (cand.nins < cur.nins && fz_run_quiet(&cand) == want) {
                    cur = cand;
                    changed = 1;
                    break;
                }
            }
        }
        /* dynamic marks and layouts dropped */
        for (int l = 0; l < cur.nleaves; l++) {
            if (!cur.leaves[l].dyn_mask && cur.leaves[l].layout == FZ_CONTIG)
                continue;
            cand = cur;
            cand.leaves[l].dyn_mask = 0;
            cand.leaves[l].layout = FZ_CONTIG;
            if (fz_run_quiet(&cand) == want) {
                cur = cand;
                changed = 1;
            }
        }
    }
    *out = cur;
}
