/* Extreme sizes for every public op that takes sizes: INT64_MAX,
 * INT64_MIN, 2^62, TGC_MAX_NUMEL and around it, negatives, 0 and 1 in every position.
 * Each result is checked against an oracle computed here in 128-bit arithmetic (exact
 * status, and shape and numel where it succeeds), eagerly and while tracing (static and
 * with the sliced dim dynamic), so that no size arithmetic overflows silently or crashes
 * (run under ASan+UBSan in the sanitizer build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tgc/tgc.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* huge allocations must fail with NULL (TGC_ERR_OOM), not abort the sanitizer build */
const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

typedef __int128 i128;

#define MAXN ((i128)TGC_MAX_NUMEL)

static const int64_t V[] = {INT64_MAX,
                            INT64_MIN,
                            INT64_MIN + 1,
                            (int64_t)1 << 62,
                            -((int64_t)1 << 62),
                            TGC_MAX_NUMEL,
                            TGC_MAX_NUMEL + 1,
                            (int64_t)1 << 40,
                            -1,
                            -2,
                            0,
                            1,
                            3};

static int fits64(i128 v)
{
    return v >= INT64_MIN && v <= INT64_MAX;
}

/* ---- the oracle's result ---- */

typedef struct expect {
    tgc_status st;
    int ndim;
    int64_t shape[TGC_MAX_DIMS];
    const char *op; /* the op the message names, when not the one called */
} expect;

#define ERR(s)              ((expect){.st = (s)})
#define ERR_NAMING(s, name) ((expect){.st = (s), .op = (name)})

static expect ok_shape(const i128 *shape, int nd)
{
    expect e = {.st = TGC_OK, .ndim = nd};
    i128 extent = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] < 0 || !fits64(shape[d]))
            return ERR(TGC_ERR_SHAPE);
        extent *= shape[d] ? shape[d] : 1;
        if (extent > MAXN)
            return ERR(TGC_ERR_SHAPE);
        e.shape[d] = (int64_t)shape[d];
    }
    return e;
}

static void check(const tgc_tensor *t, expect e, const char *what, const char *op)
{
    tgc_status st = t ? TGC_OK : tgc_last_status();
    i128 want_numel = 1;
    for (int d = 0; d < e.ndim; d++)
        want_numel *= e.shape[d];
    if (e.st == TGC_OK && st == TGC_ERR_OOM && want_numel * 8 > ((i128)1 << 40)) {
        /* valid, but more memory than there is */
        if (!strstr(tgc_last_error(), "out of memory"))
            fail_msg("%s: TGC_ERR_OOM with \"%s\"", what, tgc_last_error());
        tgc_clear_error();
        return;
    }
    if (e.op)
        op = e.op;
    if (st != e.st)
        fail_msg("%s: got %s (%s), want %s", what, tgc_status_str(st), t ? "" : tgc_last_error(),
                 tgc_status_str(e.st));
    if (!t) {
        if (!strstr(tgc_last_error(), op))
            fail_msg("%s: the message \"%s\" does not name %s", what, tgc_last_error(), op);
        tgc_clear_error();
        return;
    }
    if (tgc_ndim(t) != e.ndim)
        fail_msg("%s: %d dims, want %d", what, tgc_ndim(t), e.ndim);
    i128 numel = 1;
    for (int d = 0; d < e.ndim; d++) {
        if (tgc_size(t, d) != e.shape[d])
            fail_msg("%s: size %d is %lld, want %lld", what, d, (long long)tgc_size(t, d),
                     (long long)e.shape[d]);
        numel *= e.shape[d];
    }
    if (tgc_numel(t) != (int64_t)numel)
        fail_msg("%s: numel %lld, want %lld", what, (long long)tgc_numel(t), (long long)numel);
}

/* ---- the ops, applied to a tensor eagerly or while tracing ---- */

enum { OP_RESHAPE, OP_EXPAND, OP_SLICE, OP_PAD, OP_CAT, OP_STACK, OP_COUNT };
static const char *const op_names[] = {"tgc_reshape", "tgc_expand", "tgc_slice",
                                       "tgc_pad",     "tgc_cat",    "tgc_stack"};

static struct {
    int op;
    int64_t a, b, c;
} g;

/* x is [2, 5] (reshape, slice, pad) or [1] (expand, cat, stack). */
static tgc_tensor *apply(tgc_tensor *x)
{
    switch (g.op) {
    case OP_RESHAPE: return tgc_reshape(x, (const int64_t[]){g.a, g.b}, 2);
    case OP_EXPAND: return tgc_expand(x, (const int64_t[]){g.a, g.b}, 2);
    case OP_SLICE: return tgc_slice(x, 1, g.a, g.b, g.c);
    case OP_PAD: return tgc_pad(x, (const int64_t[]){g.a, g.b}, 1, 0.0);
    case OP_CAT:
    case OP_STACK: {
        /* n views of x expanded to [a] (no memory) joined along dim 0 */
        tgc_tensor *e = tgc_expand(x, &g.a, 1);
        tgc_tensor *ts[3] = {e, e, e};
        return g.op == OP_CAT ? tgc_cat(ts, (int)g.b, 0) : tgc_stack(ts, (int)g.b, 0);
    }
    }
    return NULL;
}

static expect oracle(void)
{
    i128 a = g.a, b = g.b, r[2];
    switch (g.op) {
    case OP_RESHAPE: {
        i128 in[2] = {2, 5};
        int infer = -1;
        for (int k = 0; k < 2; k++) {
            i128 v = k ? b : a;
            if (v < -1 || (v == -1 && infer >= 0))
                return ERR(TGC_ERR_INVALID_ARG);
            if (v == -1)
                infer = k;
            r[k] = v == 0 ? in[k] : v;
        }
        if (infer >= 0) {
            i128 known = r[1 - infer];
            if (known == 0 || 10 % known)
                return ERR(TGC_ERR_SHAPE);
            r[infer] = 10 / known;
        }
        if (r[0] * r[1] != 10)
            return ERR(TGC_ERR_SHAPE);
        return ok_shape(r, 2);
    }
    case OP_EXPAND:
        if (a < 0 || b < -1) /* -1 keeps a size: the new leading dim has none */
            return ERR(TGC_ERR_INVALID_ARG);
        r[0] = a;
        r[1] = b == -1 ? 1 : b;
        return ok_shape(r, 2);
    case OP_SLICE: {
        if (g.c < 1)
            return ERR(TGC_ERR_INVALID_ARG);
        i128 n = 5, lo = a < 0 ? a + n : a, hi = b < 0 ? b + n : b;
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
        r[0] = 2;
        r[1] = hi > lo ? (hi - lo + g.c - 1) / g.c : 0;
        return ok_shape(r, 2);
    }
    case OP_PAD:
        if (a < -MAXN || a > MAXN || b < -MAXN || b > MAXN)
            return ERR(TGC_ERR_SHAPE);
        r[0] = 2;
        r[1] = 5 + a + b;
        return ok_shape(r, 2);
    case OP_CAT:
    case OP_STACK: {
        if (a < -1)
            return ERR_NAMING(TGC_ERR_INVALID_ARG, "tgc_expand");
        i128 one[1] = {a == -1 ? 1 : a};
        if (ok_shape(one, 1).st) /* the expand itself */
            return ERR_NAMING(ok_shape(one, 1).st, "tgc_expand");
        if (g.op == OP_CAT) {
            r[0] = one[0] * b;
            return ok_shape(r, 1);
        }
        r[0] = b;
        r[1] = one[0];
        return ok_shape(r, 2);
    }
    }
    return ERR(TGC_ERR_INTERNAL);
}

static tgc_status model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = apply(in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_tensor *input_of(int op)
{
    int small = op == OP_EXPAND || op == OP_CAT || op == OP_STACK;
    const int64_t shape[2] = {small ? 1 : 2, 5};
    tgc_tensor *x = small ? tgc_zeros((const int64_t[]){1}, 1, TGC_F32, tgc_cpu())
                          : tgc_zeros(shape, 2, TGC_F32, tgc_cpu());
    assert_non_null(x);
    return x;
}

static void describe(char *buf, size_t n, const char *mode)
{
    snprintf(buf, n, "%s(%lld, %lld, %lld) %s", op_names[g.op], (long long)g.a, (long long)g.b,
             (long long)g.c, mode);
}

static int n_traced;

/* mode 0: eager; 1: traced, static sizes; 2: traced with the last dim dynamic. */
static void run_one(int mode)
{
    char what[160];
    describe(what, sizeof what, mode == 0 ? "eager" : mode == 1 ? "traced" : "traced dynamic");
    expect e = oracle();
    tgc_scope_push();
    tgc_tensor *x = input_of(g.op);
    tgc_clear_error();
    if (mode == 0) {
        check(apply(x), e, what, op_names[g.op]);
    } else {
        tgc_config cfg = tgc_config_default();
        cfg.log = 0;
        cfg.fullgraph = 1;
        /* static traces on the default backend (code generation sees the sizes and strides),
         * dynamic ones on interp */
        cfg.backend = mode == 1 ? TGC_BACKEND_AUTO : TGC_BACKEND_INTERP;
        tgc_fn *f = tgc_compile(model, "extreme", &cfg);
        assert_non_null(f);
        tgc_tensor *y = NULL;
        if (mode == 2)
            tgc_mark_dynamic(x, tgc_ndim(x) - 1);
        tgc_status st = tgc_call(f, NULL, &x, 1, &y, 1);
        if (st != TGC_OK) {
            y = NULL;
            if (tgc_last_status() != st)
                fail_msg("%s: tgc_call returned %s, the last error is %s", what, tgc_status_str(st),
                         tgc_status_str(tgc_last_status()));
        }
        check(y, e, what, op_names[g.op]);
        tgc_stats stats;
        assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
        if (stats.calls != 1 || stats.compiles != (e.st == TGC_OK))
            fail_msg("%s: %llu calls, %llu compiles", what, (unsigned long long)stats.calls,
                     (unsigned long long)stats.compiles);
        n_traced++;
        tgc_fn_free(f);
    }
    tgc_scope_pop();
}

static void sweep_op(int op, int with_c)
{
    for (int i = 0; i < N_OF(V); i++)
        for (int j = 0; j < N_OF(V); j++)
            for (int k = 0; k < (with_c ? N_OF(V) : 1); k++) {
                g.op = op;
                g.a = V[i];
                g.b = V[j];
                g.c = with_c ? V[k] : 0;
                run_one(0);
                /* tracing: a sample (every a and every b, each with every mode) */
                if ((i + j + k) % 5 == 0) {
                    run_one(1);
                    run_one(2);
                }
            }
}

static void test_reshape(void **state)
{
    (void)state;
    sweep_op(OP_RESHAPE, 0);
}

static void test_expand(void **state)
{
    (void)state;
    sweep_op(OP_EXPAND, 0);
    /* the reported case: [1] to [2^62, 8] is too large, and says so with the shapes */
    tgc_scope_push();
    tgc_tensor *x = input_of(OP_EXPAND);
    tgc_tensor *y = tgc_expand(x, (const int64_t[]){(int64_t)1 << 62, 8}, 2);
    assert_null(y);
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "tgc_expand: the result [4611686018427387904, 8]"));
    tgc_clear_error();
    /* bad sizes name the target and the input */
    assert_null(tgc_expand(x, (const int64_t[]){3, -2}, 2));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "invalid size -2 at position 1 of the target "
                                             "[3, -2] for [1]"));
    tgc_clear_error();
    tgc_tensor *x3 = tgc_zeros((const int64_t[]){3}, 1, TGC_F32, tgc_cpu());
    assert_null(tgc_expand(x3, (const int64_t[]){2, 4}, 2));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "(target [2, 4])"));
    tgc_clear_error();
    tgc_scope_pop();
}

static void test_reshape_messages(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_tensor *x = input_of(OP_RESHAPE);
    assert_null(tgc_reshape(x, (const int64_t[]){5, -3}, 2));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "tgc_reshape: invalid size -3 at position 1 of "
                                             "the target [5, -3] for [2, 5]"));
    tgc_clear_error();
    assert_null(tgc_reshape(x, (const int64_t[]){-1, -1}, 2));
    assert_non_null(strstr(tgc_last_error(), "positions 0 and 1 of the target [-1, -1]"));
    tgc_clear_error();
    assert_null(tgc_reshape(x, (const int64_t[]){INT64_MAX, 2}, 2));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "cannot reshape [2, 5] (10 elements) into "
                                             "[9223372036854775807, 2]"));
    tgc_clear_error();
    tgc_scope_pop();
}

static void test_slice(void **state)
{
    (void)state;
    sweep_op(OP_SLICE, 1);
    /* the reported case: python gives 1 element */
    tgc_scope_push();
    tgc_tensor *x = input_of(OP_SLICE);
    tgc_tensor *y = tgc_slice(x, 1, INT64_MIN, INT64_MAX, INT64_MAX);
    assert_non_null(y);
    assert_int_equal(tgc_size(y, 1), 1);
    float v[2];
    assert_int_equal(tgc_copy_to_host(y, v, sizeof v), TGC_OK);
    tgc_scope_pop();
}

static void test_pad(void **state)
{
    (void)state;
    sweep_op(OP_PAD, 0);
    /* the reported crash, on a 1-d tensor: an error naming tgc_pad */
    tgc_scope_push();
    tgc_tensor *x = tgc_zeros((const int64_t[]){4}, 1, TGC_F32, tgc_cpu());
    assert_null(tgc_pad(x, (int64_t[]){INT64_MAX, 1}, 1, 0));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "tgc_pad: pads 9223372036854775807, 1"));
    tgc_clear_error();
    tgc_scope_pop();
}

static void test_cat_stack(void **state)
{
    (void)state;
    const int64_t sizes[] = {-2,
                             -1,
                             0,
                             1,
                             3,
                             (int64_t)1 << 54,
                             (int64_t)1 << 55,
                             TGC_MAX_NUMEL / 3 + 1,
                             TGC_MAX_NUMEL,
                             INT64_MAX};
    for (int op = OP_CAT; op <= OP_STACK; op++)
        for (int i = 0; i < N_OF(sizes); i++)
            for (int n = 1; n <= 3; n++) {
                g.op = op;
                g.a = sizes[i];
                g.b = n;
                g.c = 0;
                for (int mode = 0; mode < 3; mode++)
                    run_one(mode);
            }
}

/* Creation functions: shape [a, b] for every pair of extreme values. */
static void test_creation(void **state)
{
    (void)state;
    for (int i = 0; i < N_OF(V); i++)
        for (int j = 0; j < N_OF(V); j++) {
            const int64_t shape[2] = {V[i], V[j]};
            i128 r[2] = {V[i], V[j]};
            expect e = ok_shape(r, 2);
            if (V[i] < 0 || V[j] < 0)
                e = ERR(TGC_ERR_INVALID_ARG);
            char what[128];
            snprintf(what, sizeof what, "[%lld, %lld]", (long long)V[i], (long long)V[j]);
            tgc_scope_push();
            i128 numel = (i128)V[i] * V[j];
            if (e.st == TGC_OK && numel > (1 << 20)) {
                /* valid but huge: out of memory, or an untouched allocation */
                tgc_tensor *t = tgc_empty(shape, 2, TGC_F32, tgc_cpu());
                if (!t) {
                    assert_int_equal(tgc_last_status(), TGC_ERR_OOM);
                    assert_non_null(strstr(tgc_last_error(),
                                           "tgc_empty: out of memory for a f32 tensor of shape"));
                    tgc_clear_error();
                } else {
                    check(t, e, what, "tgc_empty");
                }
                tgc_scope_pop();
                continue;
            }
            check(tgc_empty(shape, 2, TGC_F32, tgc_cpu()), e, what, "tgc_empty");
            check(tgc_zeros(shape, 2, TGC_I64, tgc_cpu()), e, what, "tgc_zeros");
            check(tgc_ones(shape, 2, TGC_F64, tgc_cpu()), e, what, "tgc_ones");
            check(tgc_full(shape, 2, 2.5, TGC_F32, tgc_cpu()), e, what, "tgc_full");
            check(tgc_rand(shape, 2, TGC_F32, tgc_cpu()), e, what, "tgc_rand");
            check(tgc_randn(shape, 2, TGC_F32, tgc_cpu()), e, what, "tgc_randn");
            /* from_data: nbytes 0 matches only an empty shape */
            expect fe = e;
            if (e.st == TGC_OK && numel != 0)
                fe = ERR(TGC_ERR_INVALID_ARG);
            check(tgc_from_data(NULL, 0, shape, 2, TGC_F32, tgc_cpu()), fe, what, "tgc_from_data");
            tgc_scope_pop();
        }
    /* the reported case: the strides of [0, 2^62, 2^62] overflow int64 */
    const int64_t empty_huge[] = {0, (int64_t)1 << 62, (int64_t)1 << 62};
    assert_null(tgc_empty(empty_huge, 3, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    assert_non_null(strstr(tgc_last_error(), "tgc_empty: shape [0, 4611686018427387904, "));
    tgc_clear_error();
    /* within the limit: an empty tensor with representable strides */
    const int64_t empty_ok[] = {0, (int64_t)1 << 28, (int64_t)1 << 28};
    tgc_tensor *t = tgc_empty(empty_ok, 3, TGC_F32, tgc_cpu());
    assert_non_null(t);
    assert_int_equal(tgc_numel(t), 0);
    assert_int_equal(tgc_stride(t, 0), (int64_t)1 << 56);
    tgc_tensor_free(t);
}

/* copy_ into a view whose elements share memory is rejected; into other views it works. */
static void test_copy_into_overlapping_view(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_tensor *src = tgc_ones((const int64_t[]){3, 4}, 2, TGC_F32, tgc_cpu());
    tgc_tensor *base = tgc_zeros((const int64_t[]){1, 4}, 2, TGC_F32, tgc_cpu());
    tgc_tensor *wide = tgc_expand(base, (const int64_t[]){3, 4}, 2); /* stride 0 on dim 0 */
    assert_int_equal(tgc_copy_(wide, src), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "tgc_copy_: dst [3, 4] (strides [0, 1]) has "
                                             "elements that share memory"));
    tgc_clear_error();
    /* expanded over a size-1 dim only, or a strided slice: no overlap */
    tgc_tensor *one = tgc_expand(base, (const int64_t[]){1, 4}, 2);
    assert_int_equal(tgc_copy_(one, tgc_ones((const int64_t[]){1, 4}, 2, TGC_F32, tgc_cpu())),
                     TGC_OK);
    tgc_tensor *big = tgc_zeros((const int64_t[]){3, 8}, 2, TGC_F32, tgc_cpu());
    tgc_tensor *every2 = tgc_slice(big, 1, 0, INT64_MAX, 2);
    assert_int_equal(tgc_copy_(every2, src), TGC_OK);
    float v[24];
    assert_int_equal(tgc_copy_to_host(big, v, sizeof v), TGC_OK);
    for (int i = 0; i < 24; i++)
        assert_true(v[i] == (i % 2 == 0 ? 1.0f : 0.0f));
    /* a transposed destination is fine too */
    tgc_tensor *sq = tgc_zeros((const int64_t[]){4, 3}, 2, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(tgc_transpose(sq, 0, 1), src), TGC_OK);
    tgc_scope_pop();
}

/* Ops that forward to another op name the one the user called. */
static void test_forwarding_names(void **state)
{
    (void)state;
    tgc_clear_error();
    assert_null(tgc_transpose(NULL, 0, 1));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_transpose: input 0 is NULL");
    tgc_clear_error();
    const char *names[] = {"tgc_squeeze", "tgc_unsqueeze",  "tgc_slice", "tgc_flatten",
                           "tgc_permute", "tgc_contiguous", "tgc_pad"};
    for (int k = 0; k < N_OF(names); k++) {
        tgc_clear_error();
        tgc_tensor *r = NULL;
        switch (k) {
        case 0: r = tgc_squeeze(NULL, 0); break;
        case 1: r = tgc_unsqueeze(NULL, 0); break;
        case 2: r = tgc_slice(NULL, 0, 0, 1, 1); break;
        case 3: r = tgc_flatten(NULL, 0, 1); break;
        case 4: r = tgc_permute(NULL, NULL, 0); break;
        case 5: r = tgc_contiguous(NULL); break;
        case 6: r = tgc_pad(NULL, NULL, 0, 0); break;
        }
        assert_null(r);
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", names[k]);
        assert_string_equal(tgc_last_error(), want);
    }
    tgc_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_creation),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_reshape_messages),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_cat_stack),
        cmocka_unit_test(test_copy_into_overlapping_view),
        cmocka_unit_test(test_forwarding_names),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    printf("%d traced calls\n", n_traced);
    tgc_shutdown();
    return r;
}
