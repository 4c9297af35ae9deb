#include <stdio.h>
#include <tgc/tgc.h>

static tgc_optim *opt; /* reached through a static: a model function receives only self */

/* Forward, loss, backward and the Adam update: one compiled variant. in[0]: x [B, 16] f32,
 * in[1]: labels [B] i64. out[0]: the loss, detached. */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in, (void)n_out;
    tgc_tensor *logits =
        tgc_linear(in[0], tgc_module_get(self, "weight"), tgc_module_get(self, "bias"));
    tgc_tensor *loss = tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, -100, 0.0);
    tgc_status st = loss ? tgc_backward(loss) : tgc_last_status(); /* adds into each .grad */
    if (st == TGC_OK)
        st = tgc_optim_step(opt); /* in-place Adam update */
    if (st == TGC_OK)
        st = tgc_optim_zero_grad(opt);
    out[0] = tgc_detach(loss);
    return st;
}

int main(void)
{
    tgc_module *net = tgc_module_create("classifier", NULL);
    tgc_scope_push();
    int ok =
        tgc_module_param(net, "weight", tgc_randn((int64_t[]){4, 16}, 2, TGC_F32, tgc_cpu())) &&
        tgc_module_param(net, "bias", tgc_zeros((int64_t[]){4}, 1, TGC_F32, tgc_cpu()));
    tgc_scope_pop();
    opt = ok ? tgc_adam(net, &(tgc_adam_opts){.lr = 1e-2}) : NULL;
    tgc_config cfg = tgc_config_default();
    tgc_fn *step = opt ? tgc_compile(train_step, "train_step", &cfg) : NULL;
    if (!step)
        return fprintf(stderr, "setup: %s\n", tgc_last_error()), 1;
    int64_t labels[32];
    float centers[4][16] = {{0}}; /* class c: feature c has mean 2, so the classes separate */
    for (int i = 0; i < 32; i++)
        labels[i] = i % 4;
    for (int c = 0; c < 4; c++)
        centers[c][c] = 2.0f;
    for (int i = 0; i < 200; i++) {
        tgc_scope_push();
        tgc_tensor *y =
            tgc_from_data(labels, sizeof labels, (int64_t[]){32}, 1, TGC_I64, tgc_cpu());
        tgc_tensor *mean = tgc_embedding(
            tgc_from_data(centers, sizeof centers, (int64_t[]){4, 16}, 2, TGC_F32, tgc_cpu()), y);
        tgc_tensor *x = tgc_add(tgc_randn((int64_t[]){32, 16}, 2, TGC_F32, tgc_cpu()), mean);
        tgc_tensor *in[2] = {x, y}, *loss = NULL;
        if (tgc_call(step, net, in, 2, &loss, 1) != TGC_OK) /* compiled once, then cache hits */
            return fprintf(stderr, "step %d: %s\n", i, tgc_last_error()), 1;
        if (i % 50 == 0 || i == 199)
            printf("step %3d: loss %.4f\n", i, tgc_item_f64(loss));
        tgc_scope_pop();
    }
    if (tgc_module_save(net, "classifier.safetensors") != TGC_OK ||
        tgc_optim_save(opt, "classifier.optim.safetensors") != TGC_OK)
        return fprintf(stderr, "save: %s\n", tgc_last_error()), 1;
    tgc_fn_free(step);
    tgc_optim_free(opt);
    tgc_module_free(net);
    tgc_shutdown();
    return 0;
}
