/* ResNet18 (examples/models/resnet18.h): the real torchvision layout compiled equals eager,
 * and the variant cache behaves (one compile per shape, module instances share variants,
 * the training flag and the batch size are guarded as documented). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/models/resnet18.h"
#include "models/model_test_util.h"

static tgc_tensor *images(int64_t n, int64_t c)
{
    int64_t shape[4] = {n, c, 32, 32};
    return tgc_randn(shape, 4, TGC_F32, tgc_cpu());
}

static tgc_module *small_resnet(uint64_t seed)
{
    resnet18_config c = resnet18_default_config();
    c.width = 4; /* channels 4, 8, 16, 32: the layout, at a fraction of the cost */
    c.seed = seed;
    tgc_module *m = resnet18_create(&c);
    assert_non_null(m);
    return m;
}

/* The module tree is torchvision's: 62 parameters, 40 batch-norm buffers, its names. */
static void resnet18_has_torchvision_layout(void **state)
{
    (void)state;
    resnet18_config c = resnet18_default_config();
    tgc_module *m = resnet18_create(&c);
    assert_non_null(m);
    assert_int_equal(tgc_module_num_tensors(m), 102);
    assert_false(tgc_module_is_training(m));
    tgc_module *l2 = tgc_module_get_child(m, "layer2");
    tgc_module *down = tgc_module_get_child(tgc_module_get_child(l2, "0"), "downsample");
    tgc_tensor *w = tgc_module_get(tgc_module_get_child(down, "0"), "weight");
    assert_non_null(w);
    int64_t shape[TGC_MAX_DIMS];
    assert_int_equal(tgc_shape(w, shape), 4);
    assert_int_equal(shape[0], 128);
    assert_int_equal(shape[1], 64);
    assert_int_equal(shape[2], 1);
    assert_non_null(tgc_module_get(tgc_module_get_child(down, "1"), "running_var"));
    /* layer1 keeps 64 channels at stride 1: no downsample */
    tgc_module *l1_0 = tgc_module_get_child(tgc_module_get_child(m, "layer1"), "0");
    assert_non_null(l1_0);
    assert_null(tgc_module_get_child(l1_0, "downsample"));
    tgc_tensor *fc = tgc_module_get(tgc_module_get_child(m, "fc"), "weight");
    assert_int_equal(tgc_shape(fc, shape), 2);
    assert_int_equal(shape[0], 10);
    assert_int_equal(shape[1], 512);
    /* deterministic: a second model of the same config has the same weights */
    tgc_module *m2 = resnet18_create(&c);
    tgc_scope_push();
    tgc_tensor *a = tgc_module_get(tgc_module_get_child(m, "conv1"), "weight");
    tgc_tensor *b = tgc_module_get(tgc_module_get_child(m2, "conv1"), "weight");
    assert_close(a, b, 0.0);
    tgc_scope_pop();
    assert_int_equal(tgc_module_signature(m), tgc_module_signature(m2));
    tgc_module_free(m2);
    tgc_module_free(m);
}

/* The real layout (width 64), batch 2, eval mode: compiled equals eager within 1e-4. */
static void resnet18_compiled_equals_eager(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    tgc_manual_seed(3);
    resnet18_config c = resnet18_default_config();
    tgc_module *net = resnet18_create(&c);
    assert_non_null(net);
    tgc_tensor *x = images(2, 3), *eager = NULL, *compiled = NULL;
    assert_int_equal(resnet18_forward(net, &x, 1, &eager, 1), TGC_OK);
    assert_int_equal(tgc_size(eager, 0), 2);
    assert_int_equal(tgc_size(eager, 1), 10);
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet18", NULL);
    assert_non_null(f);
    assert_int_equal(tgc_call(f, net, &x, 1, &compiled, 1), TGC_OK);
    assert_close(compiled, eager, 1e-4);
    tgc_fn_free(f);
    tgc_module_free(net);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

static tgc_stats stats_of(const tgc_fn *f)
{
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    return s;
}

static tgc_tensor *call1(tgc_fn *f, tgc_module *m, tgc_tensor *x)
{
    tgc_tensor *y = NULL;
    tgc_status st = tgc_call(f, m, &x, 1, &y, 1);
    if (st != TGC_OK)
        fail_msg("tgc_call: %s (%s)", tgc_last_error(), tgc_status_str(st));
    return y;
}

/* Same shape twice = one compile; a second instance shares the variant; the training flag
 * and a new batch size recompile, and with dynamic = AUTO the batch becomes symbolic. */
static void resnet18_guards_and_recompiles(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    tgc_manual_seed(5);
    tgc_module *a = small_resnet(1), *b = small_resnet(2);
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_AUTO;
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet18_small", &cfg);
    assert_non_null(f);
    tgc_tensor *x = images(2, 3);

    call1(f, a, x);
    call1(f, a, images(2, 3));
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 1);

    /* another instance of the same structure (other weights): a cache hit, its own values */
    tgc_tensor *yb = call1(f, b, x), *eb = NULL;
    assert_int_equal(resnet18_forward(b, &x, 1, &eb, 1), TGC_OK);
    assert_close(yb, eb, 1e-4);
    s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 2);

    /* training mode changes the structure signature: one recompile, with a reason */
    tgc_module_train(a, 1);
    call1(f, a, images(2, 3));
    s = stats_of(f);
    assert_int_equal(s.compiles, 2);
    assert_non_null(strstr(s.last_recompile_reason, "training"));
    tgc_module_train(a, 0);
    call1(f, a, x); /* back to eval: variant 1 again */
    s = stats_of(f);
    assert_int_equal(s.compiles, 2);

    /* new batch sizes: one recompile with the batch dim symbolic, then hits */
    tgc_tensor *y3 = call1(f, a, images(3, 3));
    assert_int_equal(tgc_size(y3, 0), 3);
    tgc_tensor *x5 = images(5, 3), *y5 = call1(f, a, x5), *e5 = NULL;
    assert_int_equal(resnet18_forward(a, &x5, 1, &e5, 1), TGC_OK);
    assert_close(y5, e5, 1e-4);
    s = stats_of(f);
    assert_int_equal(s.compiles, 3);
    assert_int_equal(s.eager_fallbacks, 0);
    assert_int_equal(s.variants, 3);

    tgc_fn_free(f);
    tgc_module_free(a);
    tgc_module_free(b);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* On 32x32 images the last stage runs 3x3 kernels on 1x1 maps, so the compiled variant
 * begins with steps that read only the weights (batch-norm scales, kernels sliced to their
 * live taps), whose results it keeps between calls: every in-place write of a weight or a
 * running statistic, a checkpoint-style copy of every tensor, another instance of the model,
 * and a model made where a freed one lived must all be seen. */
static void resnet18_kept_weights_follow_updates(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    tgc_manual_seed(11);
    tgc_module *a = small_resnet(1);
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet18_kept", NULL);
    assert_non_null(f);
    tgc_tensor *x = images(2, 3), *e = NULL;
    const char *names[] = {"layer4.1.conv2.weight", "layer4.1.bn2.running_var", "bn1.weight",
                           "layer4.0.conv1.weight"};
    for (int round = 0; round <= 4; round++) {
        if (round > 0) {
            tgc_tensor *t = tgc_module_get(a, names[round - 1]);
            assert_non_null(t);
            int64_t shape[4];
            int nd = tgc_shape(t, shape);
            tgc_tensor *r = tgc_rand(shape, nd, TGC_F32, tgc_cpu()); /* positive: a variance */
            assert_int_equal(tgc_copy_(t, r), TGC_OK);
        }
        tgc_tensor *y = call1(f, a, x);
        assert_int_equal(resnet18_forward(a, &x, 1, &e, 1), TGC_OK);
        assert_close(y, e, 1e-4);
        tgc_tensor *again = call1(f, a, x); /* unchanged: the kept values */
        assert_close(again, e, 1e-4);
    }
    char *ex = tgc_fn_explain(f);
    assert_non_null(ex);
    assert_non_null(strstr(ex, "read only module tensors and constants"));
    tgc_free(ex);

    /* another instance shares the variant, with its own weights; then one made where a freed
     * one was (its tensors may get the same addresses) */
    for (uint64_t seed = 2; seed <= 4; seed++) {
        tgc_module *b = small_resnet(seed);
        tgc_tensor *y = call1(f, b, x);
        assert_int_equal(resnet18_forward(b, &x, 1, &e, 1), TGC_OK);
        assert_close(y, e, 1e-4);
        tgc_module_free(b);
        y = call1(f, a, x);
        assert_int_equal(resnet18_forward(a, &x, 1, &e, 1), TGC_OK);
        assert_close(y, e, 1e-4);
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    tgc_fn_free(f);
    tgc_module_free(a);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* Training mode: batch statistics and running-stat updates agree with eager. */
static void resnet18_train_mode_batch_norm_matches_eager(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_manual_seed(9);
    tgc_module *a = small_resnet(4), *b = small_resnet(4);
    tgc_module_train(a, 1);
    tgc_module_train(b, 1);
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet18_train", NULL);
    assert_non_null(f);
    for (int step = 0; step < 2; step++) {
        tgc_tensor *x = images(4, 3), *ye = NULL, *yc = NULL;
        assert_int_equal(resnet18_forward(a, &x, 1, &ye, 1), TGC_OK);
        assert_int_equal(tgc_call(f, b, &x, 1, &yc, 1), TGC_OK);
        assert_close(yc, ye, 1e-4);
        tgc_module *bn_a = tgc_module_get_child(tgc_module_get_child(a, "layer3"), "0");
        tgc_module *bn_b = tgc_module_get_child(tgc_module_get_child(b, "layer3"), "0");
        assert_close(tgc_module_get(tgc_module_get_child(bn_b, "bn2"), "running_var"),
                     tgc_module_get(tgc_module_get_child(bn_a, "bn2"), "running_var"), 1e-5);
    }
    assert_int_equal(stats_of(f).compiles, 1);
    tgc_fn_free(f);
    tgc_module_free(a);
    tgc_module_free(b);
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resnet18_has_torchvision_layout),
        cmocka_unit_test(resnet18_compiled_equals_eager),
        cmocka_unit_test(resnet18_guards_and_recompiles),
        cmocka_unit_test(resnet18_kept_weights_follow_updates),
        cmocka_unit_test(resnet18_train_mode_batch_norm_matches_eager),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
