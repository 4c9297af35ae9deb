/* The f32 agreement bound that ops.h states for layer_norm on ill-conditioned rows (mean
 * large against the spread): compiled LLVM (or the default backend) against the interp
 * oracle, within torch's f32 tolerance plus 2 * 2^-24 * max|x_row| / sqrt(var_row + eps) *
 * |weight|, for rows whose mean/std ratio ranges over 1 to 1e6. */
#include "op_test_util.h"

#include <stdio.h>

static tgc_status ln_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_layer_norm_ill_conditioned_rows_bound(void **state)
{
    (void)state;
    enum { R = 16, C = 768 };
    tgc_config cd = tgc_config_default(), ci = tgc_config_default();
    ci.backend = TGC_BACKEND_INTERP;
    tgc_fn *fd = tgc_compile(ln_fn, "ln_default", &cd), *fi = tgc_compile(ln_fn, "ln_oracle", &ci);
    static float x[R * C], got[R * C], want[R * C], w[C];
    const int64_t s[2] = {R, C}, cs[1] = {C};
    for (int e = 0; e <= 6; e++) {
        tgc_manual_seed(100 + (uint64_t)e);
        tgc_tensor *noise = tgc_randn(s, 2, TGC_F32, tgc_cpu());
        tgc_tensor *in[3] = {tgc_add_scalar(noise, pow(10, e)),
                             tgc_randn(cs, 1, TGC_F32, tgc_cpu()),
                             tgc_randn(cs, 1, TGC_F32, tgc_cpu())};
        tgc_tensor *a = NULL, *b = NULL;
        assert_int_equal(tgc_call(fd, NULL, in, 3, &a, 1), TGC_OK);
        assert_int_equal(tgc_call(fi, NULL, in, 3, &b, 1), TGC_OK);
        assert_int_equal(tgc_copy_to_host(in[0], x, sizeof x), TGC_OK);
        assert_int_equal(tgc_copy_to_host(in[1], w, sizeof w), TGC_OK);
        assert_int_equal(tgc_copy_to_host(a, got, sizeof got), TGC_OK);
        assert_int_equal(tgc_copy_to_host(b, want, sizeof want), TGC_OK);
        for (int r = 0; r < R; r++) {
            double m = 0, v = 0, mx = 0;
            for (int j = 0; j < C; j++)
                m += x[r * C + j];
            m /= C;
            for (int j = 0; j < C; j++) {
                v += (x[r * C + j] - m) * (x[r * C + j] - m);
                mx = fmax(mx, fabs(x[r * C + j]));
            }
            const double k = mx / sqrt(v / C + 1e-5);
            for (int j = 0; j < C; j++) {
                double err = fabs((double)got[r * C + j] - want[r * C + j]);
                double bound = 1e-5 + 1.3e-6 * fabs(want[r * C + j]) + 2 * 0x1p-24 * k * fabs(w[j]);
                if (err > bound)
                    fail_msg("mean 1e%d row %d col %d: |%.9g - %.9g| = %.3g > %.3g", e, r, j,
                             got[r * C + j], want[r * C + j], err, bound);
            }
        }
    }
    tgc_fn_free(fd);
    tgc_fn_free(fi);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layer_norm_ill_conditioned_rows_bound, scope_setup,
                                        scope_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
