/* A program built only from the installed library: pkg-config and find_package(tgc) both
 * must give it everything it needs. */
#include <stdio.h>
#include <tgc/tgc.h>

static tgc_status twice(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_symint n[1] = {tgc_sym_size(in[0], 0)}; /* sizes without specializing them */
    out[0] = tgc_reshape_sym(tgc_mul_scalar(in[0], 2.0), n, 1);
    return out[0] ? TGC_OK : tgc_last_status();
}

int main(void)
{
    int64_t shape[1] = {3};
    tgc_tensor *x = tgc_full(shape, 1, 21.0, TGC_F32, tgc_cpu()), *y = NULL;
    tgc_fn *f = tgc_compile(twice, "twice", NULL);
    if (!f || tgc_call(f, NULL, &x, 1, &y, 1) != TGC_OK || tgc_item_f64(y) != 42.0) {
        fprintf(stderr, "consumer: %s\n", tgc_last_error());
        return 1;
    }
    /* options structs: a 1x1 conv with stride {2, 2} over a 3x3 image keeps 2x2 pixels */
    int64_t xs[4] = {1, 1, 3, 3}, ws[4] = {1, 1, 1, 1};
    tgc_tensor *img = tgc_ones(xs, 4, TGC_F32, tgc_cpu()), *w = tgc_ones(ws, 4, TGC_F32, tgc_cpu());
    tgc_tensor *c = tgc_conv2d(img, w, NULL, &(tgc_conv2d_opts){.stride = {2, 2}});
    tgc_tensor *p = tgc_max_pool2d(img, &(tgc_pool2d_opts){.kernel = {3, 3}});
    if (!c || tgc_numel(c) != 4 || !p || tgc_numel(p) != 1) {
        fprintf(stderr, "consumer: %s\n", tgc_last_error());
        return 1;
    }
    tgc_fn_free(f);
    tgc_shutdown();
    puts("consumer: ok");
    return 0;
}
