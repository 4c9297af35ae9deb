/* Gradcheck of every differentiable op (the cases of gradcheck_cases.h).
 *
 *   fd/<case>:       the eager backward in f64 against central finite differences of the
 *                    same eager forward (run with TGC_EAGER=interp it is the interp oracle:
 *                    ctest's test_gradcheck_interp);
 *   backends/<case>: f64, f32 and, where the op takes them, f16 and bf16 gradients of the
 *                    default eager backend and of a compiled step (backend AUTO: LLVM when
 *                    built with it) against a compiled step on interp, with per-dtype
 *                    tolerances (gc_tol).
 * Then the semantics finite differences cannot see: ties (amax splits evenly, maximum
 * halves, clamp passes at its bounds, relu and abs give 0 at 0), dropout's recorded mask
 * (the same bits as plain dropout), batch_norm's recorded training forward (the same output
 * and running statistics as the plain op), symbolic sizes staying symbolic in compiled
 * backward, and the rule table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "autograd/gradcheck_cases.h"
#include "autograd/autograd.h"
#include "test_shard.h"

static int case_ids[GC_N_CASES];

static double *all_vals[GC_N_CASES][5];

static void case_vals(int ci, double **v)
{
    for (int k = 0; k < gc_cases[ci].n_in; k++) {
        if (!all_vals[ci][k])
            all_vals[ci][k] = gc_values(ci, k);
        v[k] = all_vals[ci][k];
    }
}

/* L(x) with grad mode off (eager, f64, host). */
static double loss_value(int ci, double *const *vals, tgc_tensor *r)
{
    tgc_tensor *x[5];
    double v = NAN;
    tgc_scope_push();
    tgc_no_grad_push();
    if (gc_inputs(ci, vals, TGC_F64, tgc_cpu(), x)) {
        tgc_tensor *L = gc_loss(&gc_cases[ci], x, r);
        if (L)
            v = tgc_item_f64(L);
    }
    tgc_no_grad_pop();
    tgc_scope_pop();
    return v;
}

static void test_fd(void **state)
{
    const int ci = *(int *)*state;
    const gc_case *c = &gc_cases[ci];
    const double h = c->fd_h ? c->fd_h : 1e-6, tol = c->fd_tol ? c->fd_tol : 1e-6;
    double *vals[5];
    case_vals(ci, vals);
    tgc_scope_push();
    tgc_tensor *r = gc_case_weights(ci, vals, tgc_cpu());
    assert_non_null(r);
    gc_grads g;
    tgc_status st = gc_eager_grads(ci, vals, TGC_F64, tgc_cpu(), r, &g);
    if (st != TGC_OK)
        print_message("%s: %s\n", c->name, tgc_last_error());
    assert_int_equal(st, TGC_OK);
    int bad = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].kind != GC_F)
            continue;
        for (int64_t i = 0; i < g.n[k]; i++) {
            const double v = vals[k][i];
            vals[k][i] = v + h;
            double lp = loss_value(ci, vals, r);
            vals[k][i] = v - h;
            double lm = loss_value(ci, vals, r);
            vals[k][i] = v;
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(g.g[k][i] - fd) <= tol * (1 + fabs(fd)))) {
                print_message("%s: input %d element %lld: backward %.12g, finite difference "
                              "%.12g\n",
                              c->name, k, (long long)i, g.g[k][i], fd);
                bad++;
            }
        }
    }
    gc_grads_free(&g);
    tgc_scope_pop();
    assert_int_equal(bad, 0);
}

static void test_backends(void **state)
{
    const int ci = *(int *)*state;
    const gc_case *c = &gc_cases[ci];
    const tgc_dtype dts[4] = {TGC_F64, TGC_F32, TGC_F16, TGC_BF16};
    const int n_dt = c->flags & GC_HALF ? 4 : 2;
    double *vals[5];
    case_vals(ci, vals);
    int bad = 0;
    for (int j = 0; j < n_dt; j++) {
        const tgc_dtype dt = dts[j];
        tgc_scope_push();
        tgc_tensor *r = gc_case_weights(ci, vals, tgc_cpu());
        assert_non_null(r);
        gc_grads ref, got;
        tgc_status st = gc_compiled_grads(ci, vals, dt, tgc_cpu(), r, TGC_BACKEND_INTERP, &ref);
        if (st != TGC_OK)
            print_message("%s %s: compiled interp: %s\n", c->name, tgc_dtype_name(dt),
                          tgc_last_error());
        assert_int_equal(st, TGC_OK);
        const double tol = gc_tol(c, dt, 0);
        st = gc_eager_grads(ci, vals, dt, tgc_cpu(), r, &got);
        if (st != TGC_OK)
            print_message("%s %s: eager: %s\n", c->name, tgc_dtype_name(dt), tgc_last_error());
        assert_int_equal(st, TGC_OK);
        char what[64];
        snprintf(what, sizeof what, "%s eager", tgc_dtype_name(dt));
        bad += gc_compare(c, what, &got, &ref, tol);
        gc_grads_free(&got);
#ifdef TGC_HAVE_LLVM
        st = gc_compiled_grads(ci, vals, dt, tgc_cpu(), r, TGC_BACKEND_AUTO, &got);
        if (st != TGC_OK)
            print_message("%s %s: compiled: %s\n", c->name, tgc_dtype_name(dt), tgc_last_error());
        assert_int_equal(st, TGC_OK);
        snprintf(what, sizeof what, "%s compiled", tgc_dtype_name(dt));
        bad += gc_compare(c, what, &got, &ref, tol);
        gc_grads_free(&got);
#endif
        gc_grads_free(&ref);
        tgc_scope_pop();
    }
    assert_int_equal(bad, 0);
}

/* ---- semantics at ties and kinks ---- */

static tgc_tensor *vec64(const double *v, int64_t n)
{
    return tgc_from_data(v, (size_t)n * sizeof(double), &n, 1, TGC_F64, tgc_cpu());
}

static void grad_of(tgc_tensor *x, double *g, int64_t n)
{
    tgc_tensor *gx = tgc_cast(tgc_grad(x), TGC_F64);
    assert_non_null(gx);
    assert_int_equal(tgc_copy_to_host(gx, g, (size_t)n * sizeof(double)), TGC_OK);
}

static void test_max_ties_split_evenly(void **state)
{
    (void)state;
    tgc_scope_push();
    const double v[6] = {1, 3, 3, 2, 3, -1};
    tgc_tensor *x = vec64(v, 6);
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    assert_int_equal(tgc_backward(tgc_max(x, NULL, 0, 0)), TGC_OK);
    double g[6];
    grad_of(x, g, 6);
    const double want[6] = {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0}; /* torch.amax */
    for (int i = 0; i < 6; i++)
        assert_float_equal(g[i], want[i], 1e-15);
    tgc_scope_pop();
}

static void test_kinks_follow_pytorch(void **state)
{
    (void)state;
    tgc_scope_push();
    const double av[4] = {1, 2, 0, -0.5}, bv[4] = {1, 1, 0.5, -0.5};
    tgc_tensor *a = vec64(av, 4), *b = vec64(bv, 4);
    assert_int_equal(tgc_requires_grad(a, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad(b, 1), TGC_OK);
    /* maximum: ties split in half; clamp(a, 0, 1) passes at both bounds; relu(a) and abs(b)
     * give 0 at 0 */
    tgc_tensor *L = tgc_add(tgc_sum(tgc_maximum(a, b), NULL, 0, 0),
                            tgc_sum(tgc_mul_scalar(tgc_clamp(a, 0, 1), 10), NULL, 0, 0));
    L = tgc_add(L, tgc_sum(tgc_mul_scalar(tgc_relu(a), 100), NULL, 0, 0));
    L = tgc_add(L, tgc_sum(tgc_mul_scalar(tgc_abs(tgc_sub(b, b)), 1000), NULL, 0, 0));
    assert_int_equal(tgc_backward(L), TGC_OK);
    double ga[4], gb[4];
    grad_of(a, ga, 4);
    grad_of(b, gb, 4);
    /* a: maximum part {0.5, 1, 0, 0.5}; clamp part 10 * {1 (bound), 0, 1 (bound), 0};
     * relu part 100 * {1, 1, 0 (at 0), 0} */
    const double want_a[4] = {0.5 + 10 + 100, 1 + 0 + 100, 0 + 10 + 0, 0.5};
    const double want_b[4] = {0.5, 0, 1, 0.5}; /* abs(b - b) is at 0 everywhere: 0 */
    for (int i = 0; i < 4; i++) {
        assert_float_equal(ga[i], want_a[i], 1e-12);
        assert_float_equal(gb[i], want_b[i], 1e-12);
    }
    tgc_scope_pop();
}

/* ---- dropout: the recorded forward draws the bits plain dropout draws ---- */

static void check_dropout_bits(tgc_dtype dt)
{
    tgc_scope_push();
    int64_t s[2] = {37, 29};
    tgc_manual_seed(77);
    tgc_tensor *x = tgc_cast(tgc_randn(s, 2, TGC_F32, tgc_cpu()), dt);
    assert_non_null(x);
    tgc_manual_seed(5);
    tgc_tensor *plain = tgc_dropout(x, 0.35, 1);
    tgc_tensor *xr = tgc_cast(x, dt); /* the same values, as a leaf */
    assert_int_equal(tgc_requires_grad(xr, 1), TGC_OK);
    tgc_manual_seed(5);
    tgc_tensor *rec = tgc_dropout(xr, 0.35, 1);
    assert_int_equal(tgc_requires_grad_of(rec), 1);
    const int64_t n = 37 * 29;
    size_t es = tgc_dtype_size(dt);
    char *pb = malloc((size_t)n * es), *rb = malloc((size_t)n * es);
    assert_int_equal(tgc_copy_to_host(plain, pb, (size_t)n * es), TGC_OK);
    assert_int_equal(tgc_copy_to_host(rec, rb, (size_t)n * es), TGC_OK);
    assert_memory_equal(pb, rb, (size_t)n * es);
    /* the stream advanced by the same amount: the next draws agree too */
    tgc_tensor *after = tgc_rand(s, 1, TGC_F32, tgc_cpu());
    tgc_manual_seed(5);
    tgc_tensor *plain2 = tgc_dropout(x, 0.35, 1);
    tgc_tensor *after2 = tgc_rand(s, 1, TGC_F32, tgc_cpu());
    assert_non_null(plain2);
    float fa[37], fb[37];
    assert_int_equal(tgc_copy_to_host(after, fa, sizeof fa), TGC_OK);
    assert_int_equal(tgc_copy_to_host(after2, fb, sizeof fb), TGC_OK);
    assert_memory_equal(fa, fb, sizeof fa);
    /* the gradient is the saved mask times 1/(1-p), never re-drawn */
    tgc_manual_seed(999);
    assert_int_equal(tgc_backward(tgc_sum(tgc_cast(rec, TGC_F64), NULL, 0, 0)), TGC_OK);
    double *g = malloc((size_t)n * sizeof(double)), *pv = malloc((size_t)n * sizeof(double));
    grad_of(xr, g, n);
    tgc_tensor *p64 = tgc_cast(plain, TGC_F64);
    assert_int_equal(tgc_copy_to_host(p64, pv, (size_t)n * sizeof(double)), TGC_OK);
    int kept = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = pv[i] != 0 ? 1.0 / 0.65 : 0.0;
        kept += pv[i] != 0;
        assert_float_equal(g[i], want, dt == TGC_F64 ? 1e-15 : dt == TGC_F32 ? 1e-6 : 1e-2);
    }
    assert_true(kept > n / 2 && kept < n * 4 / 5);
    free(pb);
    free(rb);
    free(g);
    free(pv);
    tgc_scope_pop();
}

static void test_dropout_mask_is_plain_dropouts(void **state)
{
    (void)state;
    check_dropout_bits(TGC_F32);
    check_dropout_bits(TGC_F64);
    check_dropout_bits(TGC_F16);
    check_dropout_bits(TGC_BF16);
}

/* Compiled: a dropout recorded for autograd (of a parameter) and a plain one (of an input
 * that requires no gradient) give the bits eager plain dropout gives. */
static tgc_status drop_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)n_out;
    tgc_tensor *x = n_in ? in[0] : tgc_module_get(self, "x");
    tgc_manual_seed(42);
    out[0] = tgc_dropout(x, 0.3, 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void check_compiled_dropout(tgc_dtype dt, tgc_backend_kind b)
{
    tgc_scope_push();
    int64_t s[2] = {31, 17};
    tgc_manual_seed(4);
    tgc_tensor *x = tgc_cast(tgc_randn(s, 2, TGC_F32, tgc_cpu()), dt);
    tgc_module *with = tgc_module_create("drop", NULL), *without = tgc_module_create("plain", NULL);
    assert_non_null(tgc_module_param(with, "x", x)); /* requires a gradient */
    tgc_config cfg = tgc_config_default();
    cfg.backend = b;
    tgc_fn *f = tgc_compile(drop_fn, "drop_recorded", &cfg);
    tgc_fn *h = tgc_compile(drop_fn, "drop_plain", &cfg);
    tgc_tensor *o_rec[1], *o_plain[1];
    assert_int_equal(tgc_call(f, with, NULL, 0, o_rec, 1), TGC_OK);
    assert_int_equal(tgc_call(h, without, &x, 1, o_plain, 1), TGC_OK);
    tgc_manual_seed(42);
    tgc_tensor *plain_eager = tgc_dropout(x, 0.3, 1);
    const size_t nb = (size_t)(31 * 17) * tgc_dtype_size(dt);
    char *a = malloc(nb), *c = malloc(nb), *e = malloc(nb);
    assert_int_equal(tgc_copy_to_host(o_rec[0], a, nb), TGC_OK);
    assert_int_equal(tgc_copy_to_host(o_plain[0], c, nb), TGC_OK);
    assert_int_equal(tgc_copy_to_host(plain_eager, e, nb), TGC_OK);
    assert_memory_equal(a, c, nb);
    assert_memory_equal(a, e, nb);
    free(a);
    free(c);
    free(e);
    tgc_fn_free(f);
    tgc_fn_free(h);
    tgc_module_free(with);
    tgc_module_free(without);
    tgc_scope_pop();
}

static void test_compiled_dropout_mask_is_plain_dropouts(void **state)
{
    (void)state;
    const tgc_dtype dts[3] = {TGC_F32, TGC_F64, TGC_F16};
    for (int k = 0; k < 3; k++) {
        check_compiled_dropout(dts[k], TGC_BACKEND_INTERP);
        check_compiled_dropout(dts[k], TGC_BACKEND_AUTO);
    }
}

/* ---- batch_norm: the recorded training forward is the op's ---- */

static void test_batch_norm_recorded_forward_is_the_ops(void **state)
{
    (void)state;
    tgc_scope_push();
    int64_t xs[4] = {4, 3, 5, 2}, cs[1] = {3};
    tgc_manual_seed(3);
    tgc_tensor *x = tgc_mul_scalar(tgc_add_scalar(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), 2), 3);
    tgc_tensor *w = tgc_randn(cs, 1, TGC_F32, tgc_cpu()), *b = tgc_randn(cs, 1, TGC_F32, tgc_cpu());
    tgc_tensor *rm[2], *rv[2], *y[2];
    for (int k = 0; k < 2; k++) {
        rm[k] = tgc_zeros(cs, 1, TGC_F32, tgc_cpu());
        rv[k] = tgc_ones(cs, 1, TGC_F32, tgc_cpu());
    }
    y[0] = tgc_batch_norm(x, rm[0], rv[0], w, b, 1, 0.1, 1e-5);
    assert_int_equal(tgc_requires_grad(w, 1), TGC_OK);
    y[1] = tgc_batch_norm(x, rm[1], rv[1], w, b, 1, 0.1, 1e-5);
    assert_int_equal(tgc_requires_grad_of(y[0]), 0);
    assert_int_equal(tgc_requires_grad_of(y[1]), 1);
    float a[120], c[120];
    assert_int_equal(tgc_copy_to_host(y[0], a, sizeof a), TGC_OK);
    assert_int_equal(tgc_copy_to_host(y[1], c, sizeof c), TGC_OK);
    assert_memory_equal(a, c, sizeof a);
    float m0[3], m1[3], v0[3], v1[3];
    assert_int_equal(tgc_copy_to_host(rm[0], m0, sizeof m0), TGC_OK);
    assert_int_equal(tgc_copy_to_host(rm[1], m1, sizeof m1), TGC_OK);
    assert_int_equal(tgc_copy_to_host(rv[0], v0, sizeof v0), TGC_OK);
    assert_int_equal(tgc_copy_to_host(rv[1], v1, sizeof v1), TGC_OK);
    assert_memory_equal(m0, m1, sizeof m0); /* updated once, as without recording */
    assert_memory_equal(v0, v1, sizeof v0);
    assert_true(m0[0] != 0.0f);
    tgc_scope_pop();
}

/* ---- symbolic sizes: compiled backward over dynamic dims compiles once ---- */

static tgc_status dyn_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w");
    tgc_status st = tgc_zero_grad(self);
    if (st != TGC_OK)
        return st;
    const int d0 = 0;
    tgc_tensor *x = tgc_mul(in[0], w);                /* [n, 3] * [3] */
    tgc_tensor *s = tgc_slice(x, 0, 1, INT64_MAX, 1); /* dynamic dim sliced */
    tgc_tensor *j = tgc_cat((tgc_tensor *[]){x, s}, 2, 0);
    tgc_tensor *m = tgc_mean(tgc_mul(j, j), &d0, 1, 0); /* mean over the dynamic dim */
    tgc_tensor *L = tgc_sum(tgc_add(m, tgc_var(x, &d0, 1, 1, 0)), NULL, 0, 0);
    if (!L)
        return tgc_last_status();
    if ((st = tgc_backward(L)) != TGC_OK)
        return st;
    out[0] = L;
    return TGC_OK;
}

static void dyn_expected(const double *x, int n, const double *w, double *g)
{
    /* L = sum_c [mean_j (x_jc w_c)^2 over j in rows + rows[1:]] + var_c(x w) (unbiased) */
    for (int c = 0; c < 3; c++) {
        double s1 = 0, s2 = 0, mu = 0;
        for (int j = 0; j < n; j++) {
            double v = x[j * 3 + c];
            s1 += v * v;
            if (j > 0)
                s2 += v * v;
            mu += v * w[c];
        }
        mu /= n;
        double gv = 0;
        for (int j = 0; j < n; j++)
            gv += 2 * (x[j * 3 + c] * w[c] - mu) * x[j * 3 + c] / (n - 1);
        g[c] = 2 * w[c] * (s1 + s2) / (2 * n - 1) + gv;
    }
}

static void test_symbolic_sizes_stay_symbolic(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("dyn", NULL);
    const double wv[3] = {0.5, -1, 2};
    tgc_scope_push();
    int64_t three = 3;
    assert_non_null(
        tgc_module_param(m, "w", tgc_from_data(wv, sizeof wv, &three, 1, TGC_F64, tgc_cpu())));
    tgc_scope_pop();
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_ALWAYS;
    cfg.fullgraph = 1;
    tgc_fn *f = tgc_compile(dyn_step, "dyn_step", &cfg);
    assert_non_null(f);
    for (int n = 4; n <= 7; n += 3) {
        tgc_scope_push();
        double xv[21];
        for (int i = 0; i < n * 3; i++)
            xv[i] = 0.1 * i - 0.7;
        int64_t xs[2] = {n, 3};
        tgc_tensor *x =
            tgc_from_data(xv, sizeof(double) * (size_t)(n * 3), xs, 2, TGC_F64, tgc_cpu());
        tgc_mark_dynamic(x, 0);
        tgc_tensor *o[1];
        tgc_status st = tgc_call(f, m, &x, 1, o, 1);
        if (st != TGC_OK)
            print_message("n = %d: %s\n", n, tgc_last_error());
        assert_int_equal(st, TGC_OK);
        double g[3], want[3];
        grad_of(tgc_module_get(m, "w"), g, 3);
        dyn_expected(xv, n, wv, want);
        for (int c = 0; c < 3; c++)
            assert_float_equal(g[c], want[c], 1e-12 * (1 + fabs(want[c])));
        tgc_scope_pop();
    }
    tgc_stats stats;
    assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
    assert_int_equal(stats.compiles, 1); /* nothing in backward specialized the dim */
    tgc_fn_free(f);
    tgc_module_free(m);
}

/* Many rules over a dynamic batch dim n: the compiled step's gradients equal eager ones for
 * two sizes, from one compile. */
static tgc_status dyn_many(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *w = tgc_module_get(self, "w"), *b = tgc_module_get(self, "b");
    tgc_tensor *e = tgc_module_get(self, "e"), *g = tgc_module_get(self, "g");
    tgc_status st = tgc_zero_grad(self);
    if (st != TGC_OK)
        return st;
    tgc_tensor *x = in[0];                         /* [n, 4] */
    tgc_tensor *h = tgc_gelu(tgc_linear(x, w, b)); /* [n, 5] */
    h = tgc_layer_norm(h, 1, g, NULL, 1e-5);
    h = tgc_add(h, tgc_embedding(e, in[1]));          /* idx [n] */
    tgc_tensor *s = tgc_slice(h, 0, 0, INT64_MAX, 2); /* every other row */
    tgc_tensor *p = tgc_log_softmax(tgc_pad(s, (int64_t[]){1, 0}, 1, 0.0), -1);
    tgc_tensor *ce = tgc_cross_entropy(h, in[2], TGC_REDUCE_MEAN, 1, 0.1); /* target [n] */
    tgc_tensor *q = tgc_unsqueeze(h, 0);
    tgc_tensor *att = tgc_scaled_dot_product_attention(q, q, q, NULL, 0.0, 1, 0.0);
    const int d0 = 0;
    tgc_tensor *L = tgc_add(tgc_add(tgc_mean(p, NULL, 0, 0), ce),
                            tgc_sum(tgc_max(tgc_mul(att, att), &d0, 1, 0), NULL, 0, 0));
    L = tgc_add(L, tgc_mean(tgc_softmax(tgc_reshape(h, (int64_t[]){-1}, 1), 0), NULL, 0, 0));
    if (!L)
        return tgc_last_status();
    if ((st = tgc_backward(L)) != TGC_OK)
        return st;
    out[0] = L;
    return TGC_OK;
}

static tgc_module *dyn_module(void)
{
    tgc_module *m = tgc_module_create("dyn", NULL);
    tgc_scope_push();
    int64_t ws[2] = {5, 4}, bs[1] = {5}, es[2] = {6, 5};
    tgc_manual_seed(8);
    assert_non_null(tgc_module_param(m, "w", tgc_randn(ws, 2, TGC_F64, tgc_cpu())));
    assert_non_null(tgc_module_param(m, "b", tgc_randn(bs, 1, TGC_F64, tgc_cpu())));
    assert_non_null(tgc_module_param(m, "e", tgc_randn(es, 2, TGC_F64, tgc_cpu())));
    assert_non_null(tgc_module_param(m, "g", tgc_randn(bs, 1, TGC_F64, tgc_cpu())));
    tgc_scope_pop();
    return m;
}

static void test_symbolic_batch_many_rules(void **state)
{
    (void)state;
    tgc_module *me = dyn_module(), *mc = dyn_module();
    tgc_config cfg = tgc_config_default();
    cfg.fullgraph = 1;
    tgc_fn *f = tgc_compile(dyn_many, "dyn_many", &cfg);
    const char *names[4] = {"w", "b", "e", "g"};
    for (int n = 5; n <= 8; n += 3) {
        tgc_scope_push();
        int64_t xs[2] = {n, 4}, is[1] = {n};
        tgc_manual_seed((uint64_t)n);
        tgc_tensor *x = tgc_randn(xs, 2, TGC_F64, tgc_cpu());
        int64_t iv[8], tv[8];
        for (int i = 0; i < n; i++) {
            iv[i] = (i * 5 + 1) % 6;
            tv[i] = (i * 3) % 5;
        }
        tgc_tensor *in[3] = {
            x, tgc_from_data(iv, sizeof(int64_t) * (size_t)n, is, 1, TGC_I64, tgc_cpu()),
            tgc_from_data(tv, sizeof(int64_t) * (size_t)n, is, 1, TGC_I64, tgc_cpu())};
        for (int k = 0; k < 3; k++)
            tgc_mark_dynamic(in[k], 0);
        tgc_tensor *o[1];
        assert_int_equal(dyn_many(me, in, 3, o, 1), TGC_OK);
        tgc_status st = tgc_call(f, mc, in, 3, o, 1);
        if (st != TGC_OK)
            print_message("n = %d: %s\n", n, tgc_last_error());
        assert_int_equal(st, TGC_OK);
        for (int k = 0; k < 4; k++) {
            double ge[30], gc[30];
            tgc_tensor *pe = tgc_module_get(me, names[k]), *pc = tgc_module_get(mc, names[k]);
            int64_t cnt = tgc_numel(pe);
            grad_of(pe, ge, cnt);
            grad_of(pc, gc, cnt);
            for (int64_t i = 0; i < cnt; i++)
                assert_float_equal(gc[i], ge[i], 1e-10 * (1 + fabs(ge[i])));
        }
        tgc_scope_pop();
    }
    tgc_stats stats;
    assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
    if (stats.compiles != 1)
        print_message("recompiled: %s\n", stats.last_recompile_reason);
    assert_int_equal(stats.compiles, 1);
    tgc_fn_free(f);
    tgc_module_free(me);
    tgc_module_free(mc);
}

/* ---- tgc_grad_sum_to and tgc_grad_dim_is_one ---- */

static void test_grad_sum_to(void **state)
{
    (void)state;
    tgc_scope_push();
    int64_t gs[3] = {2, 3, 4}, ls[2] = {3, 1};
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
    tgc_tensor *g = tgc_from_data(v, sizeof v, gs, 3, TGC_F64, tgc_cpu());
    tgc_tensor *like = tgc_zeros(ls, 2, TGC_F32, tgc_cpu());
    tgc_tensor *r = tgc_grad_sum_to(g, like); /* sums dim 0 (leading) and dim 2 (size 1) */
    assert_non_null(r);
    assert_int_equal(tgc_dtype_of(r), TGC_F32);
    int64_t rs[TGC_MAX_DIMS];
    assert_int_equal(tgc_shape(r, rs), 2);
    assert_int_equal(rs[0], 3);
    assert_int_equal(rs[1], 1);
    float got[3];
    assert_int_equal(tgc_copy_to_host(r, got, sizeof got), TGC_OK);
    for (int j = 0; j < 3; j++) {
        double want = 0;
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < 4; k++)
                want += v[a * 12 + j * 4 + k];
        assert_float_equal(got[j], want, 0);
    }
    assert_int_equal(tgc_grad_dim_is_one(like, 1), 1);
    assert_int_equal(tgc_grad_dim_is_one(like, 0), 0);
    assert_int_equal(tgc_grad_dim_is_one(like, 2), 0); /* out of range: not a size-1 dim */
    /* a gradient with fewer dims than its operand cannot be reduced to it */
    tgc_clear_error();
    assert_null(tgc_grad_sum_to(like, g));
    assert_int_equal(tgc_last_status(), TGC_ERR_SHAPE);
    /* NULL in: NULL out, the first error kept */
    tgc_clear_error();
    assert_null(tgc_grad_sum_to(NULL, like));
    tgc_scope_pop();
}

/* ---- the table ---- */

static void test_rule_table(void **state)
{
    (void)state;
    int with = 0;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        tgc_attrs a = {0};
        a.dtype = TGC_F32;
        int none = op == TGC_OP_INPUT || op == TGC_OP_ASSIGN || op == TGC_OP_ARGMAX ||
                   op == TGC_OP_RAND || op == TGC_OP_ARANGE ||
                   (op >= TGC_OP_EQ && op <= TGC_OP_GE) || op >= TGC_OP_CONV2D_GRAD_INPUT;
        tgc_grad_rule r = tgc_grad_rule_for((tgc_op)op, &a);
        if (none)
            assert_null(r);
        else
            assert_non_null(r);
        with += r != NULL;
    }
    assert_true(with >= 60);
    tgc_attrs to_int = {0};
    to_int.dtype = TGC_I32;
    assert_null(tgc_grad_rule_for(TGC_OP_CAST, &to_int));
    assert_null(tgc_grad_rule_for(TGC_OP_COUNT, &to_int));
}

/* A dropout record without its mask cannot make a gradient: the rule says so. */
static void test_dropout_rule_needs_its_mask(void **state)
{
    (void)state;
    tgc_scope_push();
    int64_t n = 4;
    tgc_tensor *x = tgc_ones(&n, 1, TGC_F32, tgc_cpu()), *gy = tgc_ones(&n, 1, TGC_F32, tgc_cpu());
    tgc_attrs a = {0};
    a.f[0] = 0.5;
    a.nf = 1;
    const uint8_t needs[1] = {1};
    tgc_grad_ctx c = {TGC_OP_DROPOUT, &a, &x, 1, x, NULL, 0, needs};
    tgc_tensor *gin[1] = {NULL};
    tgc_grad_rule r = tgc_grad_rule_for(TGC_OP_DROPOUT, &a);
    assert_non_null(r);
    assert_int_equal(r(&c, gy, gin), TGC_ERR_UNSUPPORTED);
    assert_null(gin[0]);
    tgc_scope_pop();
}

int main(void)
{
    static struct CMUnitTest tests[2 * GC_N_CASES + 16];
    static char names[2 * GC_N_CASES][80];
    int n = 0;
    for (int i = 0; i < GC_N_CASES; i++) {
        case_ids[i] = i;
        snprintf(names[2 * i], sizeof names[0], "fd/%s", gc_cases[i].name);
        snprintf(names[2 * i + 1], sizeof names[0], "backends/%s", gc_cases[i].name);
        tests[n++] = (struct CMUnitTest){names[2 * i], test_fd, NULL, NULL, &case_ids[i]};
        tests[n++] = (struct CMUnitTest){names[2 * i + 1], test_backends, NULL, NULL, &case_ids[i]};
    }
    const struct CMUnitTest more[] = {
        cmocka_unit_test(test_max_ties_split_evenly),
        cmocka_unit_test(test_kinks_follow_pytorch),
        cmocka_unit_test(test_dropout_mask_is_plain_dropouts),
        cmocka_unit_test(test_compiled_dropout_mask_is_plain_dropouts),
        cmocka_unit_test(test_batch_norm_recorded_forward_is_the_ops),
        cmocka_unit_test(test_symbolic_sizes_stay_symbolic),
        cmocka_unit_test(test_symbolic_batch_many_rules),
        cmocka_unit_test(test_grad_sum_to),
        cmocka_unit_test(test_rule_table),
        cmocka_unit_test(test_dropout_rule_needs_its_mask),
    };
    if (n + sizeof more / sizeof more[0] > sizeof tests / sizeof tests[0])
        return 1; /* the table above is too small for the tests below */
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        tests[n++] = more[k];
    /* ctest runs it in shards (tests/test_shard.h: TGC_TEST_SHARD=k/n runs case i when
     * i % n == k) */
    int r = test_run_shard("test_gradcheck", tests, (size_t)n, NULL, NULL);
    for (int i = 0; i < GC_N_CASES; i++)
        for (int k = 0; k < 5; k++)
            free(all_vals[i][k]);
    tgc_shutdown();
    return r;
}
