/* A program built only from the installed library: pkg-config and find_package(tgc) both
 * must give it everything it needs. */
#include <stdio.h>
#include <tgc/tgc.h>

static tgc_status twice(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_mul_scalar(in[0], 2.0);
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
    tgc_fn_free(f);
    tgc_shutdown();
    puts("consumer: ok");
    return 0;
}
