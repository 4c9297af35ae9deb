/* The options structs of tgc_conv2d and the pools (tgc_conv2d_opts, tgc_pool2d_opts): zero
 * fields take their defaults, NULL conv opts is all defaults, {height, width} pairs are not
 * swapped, negative values are rejected with their status, and avg_pool2d's exclude_padding
 * divides by the taps inside the input, eagerly and compiled on every backend. Values
 * against hand arithmetic. */
#include "op_test_util.h"

/* ---- conv2d ---- */

/* x [1, 1, 3, 4] = 0..11, w [1, 1, 1, 1] = 1: a 1x1 conv picks the strided positions. */
static void test_conv2d_opts_defaults_and_pairs(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 3, 4}, ws[4] = {1, 1, 1, 1};
    tgc_tensor *x = iota(xs, 4, TGC_F32), *w = tgc_ones(ws, 4, TGC_F32, tgc_cpu());
    /* NULL and all-zero opts are stride 1, padding 0, dilation 1, groups 1: the identity */
    const float ident[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    expect_allclose(tgc_conv2d(x, w, NULL, NULL), TGC_F32, xs, 4, ident, 0);
    expect_allclose(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){0}), TGC_F32, xs, 4, ident, 0);
    /* stride {height 2, width 3}: rows 0, 2 and columns 0, 3 */
    const int64_t os[4] = {1, 1, 2, 2};
    const float s23[4] = {0, 3, 8, 11};
    expect_allclose(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.stride = {2, 3}}), TGC_F32, os, 4,
                    s23, 0);
    /* stride {3, 2}: row 0, columns 0, 2 */
    const int64_t os32[4] = {1, 1, 1, 2};
    const float s32[2] = {0, 2};
    expect_allclose(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.stride = {3, 2}}), TGC_F32, os32, 4,
                    s32, 0);
    /* padding {1, 0} adds a zero row above and below only */
    const int64_t ps[4] = {1, 1, 5, 4};
    const float p10[20] = {0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0};
    expect_allclose(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.padding = {1, 0}}), TGC_F32, ps, 4,
                    p10, 0);
}

/* A 2x2 kernel of ones with dilation {1, 2} sums x[i][j] + x[i][j+2] + x[i+1][j] +
 * x[i+1][j+2]; groups 2 keeps the channels apart. */
static void test_conv2d_opts_dilation_and_groups(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 3, 4}, ws[4] = {1, 1, 2, 2};
    tgc_tensor *x = iota(xs, 4, TGC_F32), *w = tgc_ones(ws, 4, TGC_F32, tgc_cpu());
    const int64_t os[4] = {1, 1, 2, 2};
    const float want[4] = {0 + 2 + 4 + 6, 1 + 3 + 5 + 7, 4 + 6 + 8 + 10, 5 + 7 + 9 + 11};
    expect_allclose(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.dilation = {1, 2}}), TGC_F32, os, 4,
                    want, 0);
    /* two channels 0..3 and 4..7, weights 1 and 10 per group: out = [x0, 10*x1] */
    const int64_t gs[4] = {1, 2, 2, 2}, gws[4] = {2, 1, 1, 1};
    const float wv[2] = {1, 10};
    const float gwant[8] = {0, 1, 2, 3, 40, 50, 60, 70};
    expect_allclose(tgc_conv2d(iota(gs, 4, TGC_F32), from_floats(wv, gws, 4, TGC_F32), NULL,
                               &(tgc_conv2d_opts){.groups = 2}),
                    TGC_F32, gs, 4, gwant, 0);
}

static void test_conv2d_opts_negative_values_are_errors(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 4, 4}, ws[4] = {1, 1, 1, 1};
    tgc_tensor *x = tgc_zeros(xs, 4, TGC_F32, tgc_cpu()), *w = tgc_ones(ws, 4, TGC_F32, tgc_cpu());
    expect_error(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.stride = {1, -1}}), TGC_ERR_INVALID_ARG,
                 "tgc_conv2d: stride must be >= 1, got -1");
    expect_error(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.padding = {-1, 0}}),
                 TGC_ERR_INVALID_ARG, "tgc_conv2d: padding must be >= 0, got -1");
    expect_error(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.dilation = {-2, 1}}),
                 TGC_ERR_INVALID_ARG, "tgc_conv2d: dilation must be >= 1, got -2");
    expect_error(tgc_conv2d(x, w, NULL, &(tgc_conv2d_opts){.groups = -1}), TGC_ERR_INVALID_ARG,
                 "tgc_conv2d: groups must be >= 1, got -1");
}

/* ---- pools ---- */

static void test_pool_opts_defaults_and_pairs(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 4, 6};
    tgc_tensor *x = iota(xs, 4, TGC_F32);
    /* zero stride means stride = kernel: {2, 3} windows tile the 4x6 input */
    const int64_t os[4] = {1, 1, 2, 2};
    const float mx[4] = {8, 11, 20, 23};
    expect_allclose(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 3}}), TGC_F32, os, 4, mx, 0);
    const float av[4] = {(0 + 1 + 2 + 6 + 7 + 8) / 6.0f, (3 + 4 + 5 + 9 + 10 + 11) / 6.0f,
                         (12 + 13 + 14 + 18 + 19 + 20) / 6.0f,
                         (15 + 16 + 17 + 21 + 22 + 23) / 6.0f};
    expect_allclose(tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 3}}), TGC_F32, os, 4, av,
                    1e-6);
    /* kernel 1, stride {height 3, width 1}: rows 0 and 3 */
    const int64_t rs[4] = {1, 1, 2, 6};
    const float rows[12] = {0, 1, 2, 3, 4, 5, 18, 19, 20, 21, 22, 23};
    expect_allclose(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {1, 1}, .stride = {3, 1}}),
                    TGC_F32, rs, 4, rows, 0);
}

static void test_pool_opts_errors(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 4, 4};
    tgc_tensor *x = tgc_zeros(xs, 4, TGC_F32, tgc_cpu());
    expect_error(tgc_max_pool2d(x, NULL), TGC_ERR_INVALID_ARG, "tgc_max_pool2d: opts is NULL");
    expect_error(tgc_avg_pool2d(x, NULL), TGC_ERR_INVALID_ARG, "tgc_avg_pool2d: opts is NULL");
    expect_error(tgc_max_pool2d(x, &(tgc_pool2d_opts){0}), TGC_ERR_INVALID_ARG,
                 "tgc_max_pool2d: kernel size must be >= 1, got 0");
    expect_error(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, -2}}), TGC_ERR_INVALID_ARG,
                 "tgc_max_pool2d: kernel size must be >= 1, got -2");
    expect_error(tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 2}, .stride = {-1, 1}}),
                 TGC_ERR_INVALID_ARG, "tgc_avg_pool2d: stride must be >= 1, got -1");
    expect_error(tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 2}, .padding = {0, -1}}),
                 TGC_ERR_INVALID_ARG, "tgc_avg_pool2d: padding must be >= 0, got -1");
    expect_error(tgc_max_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 2}, .exclude_padding = 1}),
                 TGC_ERR_INVALID_ARG, "tgc_max_pool2d: exclude_padding applies to tgc_avg_pool2d");
    expect_error(tgc_avg_pool2d(x, &(tgc_pool2d_opts){.kernel = {2, 2}, .exclude_padding = 2}),
                 TGC_ERR_INVALID_ARG, "tgc_avg_pool2d: exclude_padding must be 0 or 1, got 2");
}

/* x [1, 1, 2, 2] of ones, kernel 2, stride 1, padding 1 -> [3, 3]. Counting the padding
 * (default) gives taps/4; excluding it gives 1 everywhere. */
static const float pad_x[4] = {1, 1, 1, 1};
static const int64_t pad_xs[4] = {1, 1, 2, 2}, pad_os[4] = {1, 1, 3, 3};
static const float counted[9] = {0.25f, 0.5f, 0.25f, 0.5f, 1, 0.5f, 0.25f, 0.5f, 0.25f};
static const float excluded[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

static tgc_tensor *avg_k2_p1(tgc_tensor *x, int exclude)
{
    return tgc_avg_pool2d(
        x, &(tgc_pool2d_opts){
               .kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 1}, .exclude_padding = exclude});
}

static void test_avg_pool2d_exclude_padding_eager(void **state)
{
    (void)state;
    tgc_tensor *x = from_floats(pad_x, pad_xs, 4, TGC_F32);
    expect_allclose(avg_k2_p1(x, 0), TGC_F32, pad_os, 4, counted, 0);
    expect_allclose(avg_k2_p1(x, 1), TGC_F32, pad_os, 4, excluded, 0);
    /* a window straddling the bottom edge only: kernel 3 stride 2 padding 1 on 4 rows gives
     * windows rows [-1, 2) and [1, 4): both have 2 and 3 rows inside */
    const int64_t xs[4] = {1, 1, 4, 1}, os[4] = {1, 1, 2, 1};
    tgc_tensor *c = iota(xs, 4, TGC_F32);
    const float want[2] = {(0 + 1) / 2.0f, (1 + 2 + 3) / 3.0f};
    expect_allclose(tgc_avg_pool2d(c, &(tgc_pool2d_opts){.kernel = {3, 1},
                                                         .stride = {2, 1},
                                                         .padding = {1, 0},
                                                         .exclude_padding = 1}),
                    TGC_F32, os, 4, want, 1e-6);
}

static tgc_status pools_fwd(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = avg_k2_p1(in[0], 0);
    out[1] = avg_k2_p1(in[0], 1);
    out[2] =
        tgc_max_pool2d(tgc_neg(in[0]), &(tgc_pool2d_opts){.kernel = {2, 2}, .padding = {1, 1}});
    return out[0] && out[1] && out[2] ? TGC_OK : tgc_last_status();
}

static void test_pool_opts_compiled(void **state)
{
    (void)state;
    const tgc_backend_kind backends[2] = {TGC_BACKEND_AUTO, TGC_BACKEND_INTERP};
    for (int b = 0; b < 2; b++) {
        tgc_config c = tgc_config_default();
        c.backend = backends[b];
        tgc_fn *f = tgc_compile(pools_fwd, "pools_opts", &c);
        assert_non_null(f);
        tgc_tensor *x = from_floats(pad_x, pad_xs, 4, TGC_F32), *out[3] = {0};
        assert_int_equal(tgc_call(f, NULL, &x, 1, out, 3), TGC_OK);
        expect_allclose(out[0], TGC_F32, pad_os, 4, counted, 1e-6);
        expect_allclose(out[1], TGC_F32, pad_os, 4, excluded, 1e-6);
        /* stride = kernel 2, padding 1 on 2x2: four windows, each holding one element */
        const int64_t ms[4] = {1, 1, 2, 2};
        const float mwant[4] = {-1, -1, -1, -1};
        expect_allclose(out[2], TGC_F32, ms, 4, mwant, 0);
        tgc_fn_free(f);
    }
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, scope_setup, scope_teardown)
    const struct CMUnitTest tests[] = {
        T(test_conv2d_opts_defaults_and_pairs),
        T(test_conv2d_opts_dilation_and_groups),
        T(test_conv2d_opts_negative_values_are_errors),
        T(test_pool_opts_defaults_and_pairs),
        T(test_pool_opts_errors),
        T(test_avg_pool2d_exclude_padding_eager),
        T(test_pool_opts_compiled),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
