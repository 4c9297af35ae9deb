/* The examples' hyperparameters are module attributes, so compiled variants see them: the
 * outside report had a BERT whose head count lived in userdata return the first trace's
 * result after the count changed, with no recompile and no log. Compiled equals eager
 * after every change, and the recompile reason names the attribute. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/models/bert.h"
#include "examples/models/resnet18.h"
#include "models/model_test_util.h"

/* max |a - b| over equal shapes. */
static double max_diff(tgc_tensor *a, tgc_tensor *b)
{
    tgc_tensor *d = tgc_max(tgc_abs(tgc_sub(a, b)), NULL, 0, 0);
    assert_non_null(d);
    return tgc_item_f64(d);
}

static bert_config small_bert(int heads)
{
    bert_config c = bert_base_config();
    c.hidden = 32;
    c.layers = 1;
    c.heads = heads;
    c.intermediate = 64;
    c.vocab = 50;
    c.max_pos = 32;
    return c;
}

/* Scales the first layer's query weights: with BERT's init (std 0.02) attention is nearly
 * uniform, so the head count would hardly change the result. */
static void sharpen_attention(tgc_module *m)
{
    tgc_module *self = tgc_module_get_child(
        tgc_module_get_child(
            tgc_module_get_child(tgc_module_get_child(tgc_module_get_child(m, "encoder"), "layer"),
                                 "0"),
            "attention"),
        "self");
    tgc_tensor *w = tgc_module_get(tgc_module_get_child(self, "query"), "weight");
    assert_non_null(w);
    assert_int_equal(tgc_copy_(w, tgc_mul_scalar(w, 300.0)), TGC_OK);
}

static void bert_head_count_is_guarded(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c4 = small_bert(4), c2 = small_bert(2);
    tgc_module *m4 = bert_create(&c4), *m2 = bert_create(&c2);
    assert_non_null(m4);
    assert_non_null(m2);
    sharpen_attention(m4);
    sharpen_attention(m2);
    /* same parameters, a different head count: only the attribute tells them apart */
    tgc_tensor *in[4];
    assert_int_equal(bert_make_inputs(&c4, 2, 8, 2, 3, in), TGC_OK);
    tgc_fn *f = tgc_compile(bert_forward, "bert", NULL);
    tgc_tensor *y4, *y2, *e4, *e2;
    assert_int_equal(tgc_call(f, m4, in, 4, &y4, 1), TGC_OK);
    assert_int_equal(tgc_call(f, m2, in, 4, &y2, 1), TGC_OK);
    assert_int_equal(bert_forward(m4, in, 4, &e4, 1), TGC_OK);
    assert_int_equal(bert_forward(m2, in, 4, &e2, 1), TGC_OK);
    assert_close(y4, e4, 1e-4);
    assert_close(y2, e2, 1e-4);
    assert_true(max_diff(e4, e2) > 1e-3); /* the head count matters */
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason, "self.num_attention_heads changed (4 -> 2)");
    /* changing the attribute in place recompiles too (a variant for 4 heads exists) */
    assert_int_equal(tgc_module_set_i64(m2, "num_attention_heads", 4), TGC_OK);
    assert_int_equal(tgc_call(f, m2, in, 4, &y2, 1), TGC_OK);
    assert_close(y2, e4, 1e-4);
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.cache_hits, 1);
    tgc_fn_free(f);
    bert_free(m4);
    bert_free(m2);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

static void resnet_batch_norm_eps_is_guarded(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    resnet18_config rc = resnet18_default_config();
    rc.width = 4;
    tgc_module *net = resnet18_create(&rc);
    assert_non_null(net);
    int64_t xs[4] = {1, 3, 32, 32};
    tgc_manual_seed(5);
    tgc_tensor *x = tgc_randn(xs, 4, TGC_F32, tgc_cpu());
    tgc_fn *f = tgc_compile(resnet18_forward, "resnet", NULL);
    tgc_tensor *y0, *y1, *e0, *e1;
    assert_int_equal(tgc_call(f, net, &x, 1, &y0, 1), TGC_OK);
    assert_int_equal(resnet18_forward(net, &x, 1, &e0, 1), TGC_OK);
    assert_close(y0, e0, 1e-4);
    tgc_module *bn =
        tgc_module_get_child(tgc_module_get_child(tgc_module_get_child(net, "layer2"), "0"), "bn1");
    assert_int_equal(tgc_module_set_f64(bn, "eps", 0.5), TGC_OK);
    assert_int_equal(tgc_call(f, net, &x, 1, &y1, 1), TGC_OK);
    assert_int_equal(resnet18_forward(net, &x, 1, &e1, 1), TGC_OK);
    assert_close(y1, e1, 1e-4);
    assert_true(max_diff(e0, e1) > 1e-4);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 2);
    assert_string_equal(s.last_recompile_reason, "self.layer2.0.bn1.eps changed (1e-05 -> 0.5)");
    tgc_fn_free(f);
    tgc_module_free(net);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bert_head_count_is_guarded),
        cmocka_unit_test(resnet_batch_norm_eps_is_guarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
