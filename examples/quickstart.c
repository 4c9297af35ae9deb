#include <stdio.h>
#include <tgc/tgc.h>

/* A two-layer MLP: self has children "fc1" and "fc2", each with "weight" and "bias"; tensors
 * are found by their dotted path. */
static tgc_status forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)n_in, (void)n_out;
    tgc_tensor *h = tgc_relu(
        tgc_linear(in[0], tgc_module_get(self, "fc1.weight"), tgc_module_get(self, "fc1.bias")));
    out[0] = tgc_linear(h, tgc_module_get(self, "fc2.weight"), tgc_module_get(self, "fc2.bias"));
    return out[0] ? TGC_OK : tgc_last_status(); /* ops given NULL pass NULL on */
}

static tgc_module *linear_layer(int64_t in, int64_t out)
{
    tgc_module *m = tgc_module_create("linear", NULL);
    tgc_scope_push(); /* the init tensors are copied into the module, then freed */
    int ok =
        tgc_module_param(m, "weight", tgc_randn((int64_t[]){out, in}, 2, TGC_F32, tgc_cpu())) &&
        tgc_module_param(m, "bias", tgc_zeros((int64_t[]){out}, 1, TGC_F32, tgc_cpu()));
    tgc_scope_pop();
    return ok ? m : (tgc_module_free(m), NULL);
}

int main(void)
{
    tgc_module *net = tgc_module_create("mlp", NULL), *fc1 = linear_layer(32, 64),
               *fc2 = linear_layer(64, 10);
    if (!net || !fc1 || !fc2 || tgc_module_child(net, "fc1", fc1) != TGC_OK ||
        tgc_module_child(net, "fc2", fc2) != TGC_OK)
        return fprintf(stderr, "model: %s\n", tgc_last_error()), 1;
    tgc_config cfg = tgc_config_default(); /* defaults, then the TGC_* environment */
    tgc_fn *f = tgc_compile(forward, "forward", &cfg);
    for (int step = 0; f && step < 3; step++) {
        tgc_scope_push(); /* frees this step's tensors at the pop */
        tgc_tensor *x = tgc_randn((int64_t[]){8, 32}, 2, TGC_F32, tgc_cpu()), *y = NULL;
        tgc_status st = tgc_call(f, net, &x, 1, &y, 1); /* 1st call traces and compiles */
        if (st != TGC_OK)
            return fprintf(stderr, "call: %s\n", tgc_last_error()), 1;
        printf("step %d: sum(y) = %f\n", step, tgc_item_f64(tgc_sum(y, NULL, 0, 0)));
        tgc_scope_pop();
    }
    tgc_stats s;
    if (!f || tgc_fn_stats(f, &s) != TGC_OK)
        return fprintf(stderr, "compile: %s\n", tgc_last_error()), 1;
    printf("%lld calls, %lld compile(s)\n", (long long)s.calls, (long long)s.compiles);
    tgc_fn_free(f);
    tgc_module_free(net); /* frees fc1 and fc2 with it */
    tgc_shutdown();
    return 0;
}
