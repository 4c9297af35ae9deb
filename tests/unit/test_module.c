/* Modules (tgc/module.h): creation, parameters, buffers, children, lookup, training flag,
 * userdata, devices; bad names and bad trees with their exact statuses; the structure
 * signature (equal for equal structures, different after any structural change, restored
 * when the change is undone); the pre-order flat list (internal tgc_module_flat); the
 * tgc_module_describe text; freeing whole trees (checked by ASan/LSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"
#include "tgc/cuda.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

static tgc_tensor *full(const int64_t *shape, int nd, double v, tgc_dtype dt)
{
    tgc_tensor *t = tgc_full(shape, nd, v, dt, tgc_cpu());
    assert_non_null(t);
    return t;
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

/* ---- a small model, built with variations ---- */

typedef struct variant {
    int64_t w_cols;        /* fc1.weight is [4, w_cols] */
    const char *bias_name; /* fc1's bias */
    tgc_dtype dtype;       /* of fc1.weight */
    int bias_first;        /* add fc1.bias before fc1.weight */
    int bias_as_buffer;
    const char *child_name; /* of fc2 */
} variant;

static const variant base_v = {3, "bias", TGC_F32, 0, 0, "fc2"};

/* net { scale(param [1]), fc1 { weight [4, w], bias [4] }, bn { running_mean (buffer [4]) },
 *       fc2 { weight [2, 4] } } */
static tgc_module *build(variant v, void *ud)
{
    tgc_module *net = tgc_module_create("net", ud);
    tgc_module *fc1 = tgc_module_create("fc1", NULL);
    tgc_module *bn = tgc_module_create("bn", NULL);
    tgc_module *fc2 = tgc_module_create("fc2", NULL);
    assert_non_null(net);
    assert_non_null(fc1);
    assert_non_null(bn);
    assert_non_null(fc2);
    assert_non_null(tgc_module_param(net, "scale", full(SHAPE(1), 2.0, TGC_F32)));
    tgc_tensor *w = full(SHAPE(4, v.w_cols), 0.5, v.dtype);
    tgc_tensor *b = full(SHAPE(4), 0.0, TGC_F32);
    if (v.bias_first)
        assert_non_null(v.bias_as_buffer ? tgc_module_buffer(fc1, v.bias_name, b)
                                         : tgc_module_param(fc1, v.bias_name, b));
    assert_non_null(tgc_module_param(fc1, "weight", w));
    if (!v.bias_first)
        assert_non_null(v.bias_as_buffer ? tgc_module_buffer(fc1, v.bias_name, b)
                                         : tgc_module_param(fc1, v.bias_name, b));
    assert_non_null(tgc_module_buffer(bn, "running_mean", full(SHAPE(4), 0.0, TGC_F32)));
    assert_non_null(tgc_module_param(fc2, "weight", full(SHAPE(2, 4), 1.0, TGC_F32)));
    assert_int_equal(tgc_module_child(net, "fc1", fc1), TGC_OK);
    assert_int_equal(tgc_module_child(net, "bn", bn), TGC_OK);
    assert_int_equal(tgc_module_child(net, v.child_name, fc2), TGC_OK);
    return net;
}

/* ---- basics ---- */

static void test_create(void **state)
{
    (void)state;
    int ud = 7;
    tgc_module *m = tgc_module_create("encoder", &ud);
    assert_non_null(m);
    assert_string_equal(tgc_module_name(m), "encoder");
    assert_ptr_equal(tgc_module_userdata(m), &ud);
    assert_true(tgc_module_is_training(m)); /* new modules train */
    assert_int_equal(tgc_module_num_tensors(m), 0);
    assert_null(tgc_module_get(m, "x"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get: 'x': module 'encoder' has no parameter or buffer 'x'");
    assert_null(tgc_module_get_child(m, "x"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get_child: 'x': module 'encoder' has no child 'x'");
    tgc_clear_error();
    tgc_module_free(m);

    /* the name is copied */
    char name[8] = "tmp";
    tgc_module *c = tgc_module_create(name, NULL);
    name[0] = 'X';
    assert_string_equal(tgc_module_name(c), "tmp");
    assert_null(tgc_module_userdata(c));
    tgc_module_free(c);
    assert_int_equal(tgc_last_status(), TGC_OK);

    assert_null(tgc_module_create(NULL, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_create: name is NULL or empty");
    tgc_clear_error();
    assert_null(tgc_module_create("", &ud));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_create");

    /* NULL module queries are harmless */
    assert_null(tgc_module_name(NULL));
    assert_null(tgc_module_userdata(NULL));
    assert_int_equal(tgc_module_is_training(NULL), 0);
    assert_int_equal(tgc_module_num_tensors(NULL), 0);
    assert_null(tgc_module_get(NULL, "w"));
    assert_null(tgc_module_get_child(NULL, "c"));
    tgc_module_train(NULL, 1);
    tgc_module_free(NULL);
}

static void test_param_and_buffer(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("lin", NULL);
    const float wv[] = {1, 2, 3, 4, 5, 6};
    tgc_tensor *init = tgc_from_data(wv, sizeof wv, SHAPE(2, 3), TGC_F32, tgc_cpu());
    tgc_tensor *w = tgc_module_param(m, "weight", init);
    assert_non_null(w);
    assert_ptr_not_equal(w, init); /* a copy owned by the module */
    assert_int_equal(tgc_ndim(w), 2);
    assert_int_equal(tgc_size(w, 0), 2);
    assert_int_equal(tgc_size(w, 1), 3);
    assert_int_equal(tgc_dtype_of(w), TGC_F32);
    assert_true(tgc_requires_grad_of(w));
    float out[6];
    assert_int_equal(tgc_copy_to_host(w, out, sizeof out), TGC_OK);
    assert_memory_equal(out, wv, sizeof wv);
    /* independent of init afterwards, and of the scope that owned init */
    assert_int_equal(tgc_copy_(init, tgc_zeros(SHAPE(2, 3), TGC_F32, tgc_cpu())), TGC_OK);
    tgc_tensor_free(init);
    assert_int_equal(tgc_copy_to_host(w, out, sizeof out), TGC_OK);
    assert_memory_equal(out, wv, sizeof wv);

    /* a non-contiguous init of another dtype keeps its dtype and logical values */
    tgc_tensor *i2 = tgc_from_data(wv, sizeof wv, SHAPE(2, 3), TGC_F32, tgc_cpu());
    tgc_tensor *h = tgc_cast(tgc_transpose(i2, 0, 1), TGC_F16);
    assert_non_null(h);
    tgc_tensor *rm = tgc_module_buffer(m, "running", tgc_transpose(i2, 0, 1));
    tgc_tensor *hb = tgc_module_buffer(m, "half", h);
    assert_non_null(rm);
    assert_non_null(hb);
    assert_false(tgc_requires_grad_of(rm));
    assert_int_equal(tgc_dtype_of(hb), TGC_F16);
    assert_int_equal(tgc_size(rm, 0), 3);
    assert_true(tgc_is_contiguous(rm));
    assert_int_equal(tgc_copy_to_host(rm, out, sizeof out), TGC_OK);
    const float want_t[] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(out, want_t, sizeof want_t);

    assert_ptr_equal(tgc_module_get(m, "weight"), w);
    assert_ptr_equal(tgc_module_get(m, "running"), rm);
    assert_ptr_equal(tgc_module_get(m, "half"), hb);
    assert_int_equal(tgc_last_status(), TGC_OK);
    assert_null(tgc_module_get(m, "bias"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "has no parameter or buffer 'bias'");
    assert_null(tgc_module_get(m, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_get: name is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_module_num_tensors(m), 3);

    /* module tensors do not belong to a scope: a pop leaves them alone */
    tgc_scope_push();
    tgc_tensor *p = tgc_module_param(m, "inner", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu()));
    assert_non_null(p);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_true(tgc_item_f64(p) == 1.0);
    assert_int_equal(tgc_module_num_tensors(m), 4);
    tgc_module_free(m);
}

static void test_param_bad_args(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_tensor *x = tgc_ones(SHAPE(3), TGC_F32, tgc_cpu());
    assert_non_null(tgc_module_param(m, "w", x));
    assert_null(tgc_module_param(m, "w", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_param: module 'm' already has a member named 'w'");
    assert_null(tgc_module_buffer(m, "w", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_buffer: module 'm' already has a member named 'w'");
    assert_null(tgc_module_param(m, "a.b", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_param: name 'a.b' contains '.'");
    assert_null(tgc_module_buffer(m, ".", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "contains '.'");
    assert_null(tgc_module_param(m, "", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_param: name is NULL or empty");
    assert_null(tgc_module_param(m, NULL, x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "name is NULL or empty");
    assert_null(tgc_module_param(NULL, "v", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_param: module is NULL");
    tgc_clear_error();
    assert_null(tgc_module_param(m, "v", NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_param: init tensor for 'v' is NULL");
    /* a name taken by a child */
    tgc_module *c = tgc_module_create("c", NULL);
    assert_int_equal(tgc_module_child(m, "sub", c), TGC_OK);
    assert_null(tgc_module_buffer(m, "sub", x));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "already has a member named 'sub'");
    /* nothing was added by the failures */
    assert_int_equal(tgc_module_num_tensors(m), 1);
    assert_null(tgc_module_get(m, "v"));
    assert_null(tgc_module_get(m, "a.b"));
    tgc_module_free(m);
}

static void test_children(void **state)
{
    (void)state;
    tgc_module *root = tgc_module_create("root", NULL);
    tgc_module *a = tgc_module_create("block", NULL);
    tgc_module *b = tgc_module_create("block", NULL); /* module names need not be unique */
    tgc_module *leaf = tgc_module_create("leaf", NULL);
    assert_int_equal(tgc_module_child(root, "0", a), TGC_OK);
    assert_int_equal(tgc_module_child(root, "1", b), TGC_OK);
    assert_int_equal(tgc_module_child(a, "leaf", leaf), TGC_OK);
    assert_ptr_equal(tgc_module_get_child(root, "0"), a);
    assert_ptr_equal(tgc_module_get_child(root, "1"), b);
    assert_null(tgc_module_get_child(root, "leaf")); /* a name is a path from root */
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "module 'root' has no child 'leaf'");
    assert_ptr_equal(tgc_module_get_child(a, "leaf"), leaf);
    assert_ptr_equal(tgc_module_get_child(root, "0.leaf"), leaf);
    assert_null(tgc_module_get(root, "0")); /* children are not tensors */
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get: '0': module 'root' has no parameter or buffer '0' (it is a "
                "child module: tgc_module_get_child)");
    tgc_clear_error();
    assert_non_null(tgc_module_param(leaf, "w", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu())));
    assert_non_null(tgc_module_buffer(b, "r", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu())));
    assert_non_null(tgc_module_param(root, "p", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu())));
    assert_int_equal(tgc_module_num_tensors(root), 3);
    assert_int_equal(tgc_module_num_tensors(a), 1);
    assert_int_equal(tgc_module_num_tensors(leaf), 1);
    assert_int_equal(tgc_last_status(), TGC_OK);
    tgc_module_free(root); /* frees a, b and leaf (LSan) */
}

static void test_child_errors(void **state)
{
    (void)state;
    tgc_module *p1 = tgc_module_create("p1", NULL);
    tgc_module *p2 = tgc_module_create("p2", NULL);
    tgc_module *c = tgc_module_create("c", NULL);
    tgc_module *gc = tgc_module_create("gc", NULL);
    assert_int_equal(tgc_module_child(p1, "c", c), TGC_OK);
    assert_int_equal(tgc_module_child(c, "gc", gc), TGC_OK);

    /* a child with a parent already */
    check_error(tgc_module_child(p2, "c", c), TGC_ERR_INVALID_ARG,
                "tgc_module_child: module 'c' already has a parent");
    check_error(tgc_module_child(p1, "again", c), TGC_ERR_INVALID_ARG, "already has a parent");
    /* itself */
    check_error(tgc_module_child(p2, "me", p2), TGC_ERR_INVALID_ARG, "tgc_module_child");
    /* cycles: p1 under its own grandchild, or under its child */
    check_error(tgc_module_child(gc, "p1", p1), TGC_ERR_INVALID_ARG,
                "tgc_module_child: 'p1' is an ancestor of 'gc'");
    check_error(tgc_module_child(c, "p1", p1), TGC_ERR_INVALID_ARG, "ancestor");
    /* names */
    tgc_module *d = tgc_module_create("d", NULL);
    check_error(tgc_module_child(p1, "c", d), TGC_ERR_INVALID_ARG,
                "tgc_module_child: module 'p1' already has a member named 'c'");
    check_error(tgc_module_child(p1, "x.y", d), TGC_ERR_INVALID_ARG,
                "tgc_module_child: name 'x.y' contains '.'");
    check_error(tgc_module_child(p1, "", d), TGC_ERR_INVALID_ARG, "name is NULL or empty");
    check_error(tgc_module_child(p1, NULL, d), TGC_ERR_INVALID_ARG, "name is NULL or empty");
    check_error(tgc_module_child(NULL, "d", d), TGC_ERR_INVALID_ARG, "module is NULL");
    check_error(tgc_module_child(p1, "d", NULL), TGC_ERR_INVALID_ARG,
                "tgc_module_child: child is NULL");
    /* a parameter name is taken for children too */
    assert_non_null(tgc_module_param(p2, "w", tgc_ones(SHAPE(1), TGC_F32, tgc_cpu())));
    check_error(tgc_module_child(p2, "w", d), TGC_ERR_INVALID_ARG,
                "already has a member named 'w'");

    /* the failures changed nothing: d is still a root, p2 has no child, the tree is intact */
    assert_null(tgc_module_get_child(p2, "c"));
    assert_null(tgc_module_get_child(p2, "me"));
    assert_null(tgc_module_get_child(gc, "p1"));
    assert_null(tgc_module_get_child(p1, "again"));
    assert_ptr_equal(tgc_module_get_child(p1, "c"), c);
    assert_int_equal(tgc_module_child(p2, "d", d), TGC_OK);
    tgc_module_free(p1); /* frees c and gc */
    tgc_module_free(p2); /* frees d */
}

static void test_training(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    tgc_module *fc1 = tgc_module_get_child(net, "fc1"), *bn = tgc_module_get_child(net, "bn");
    assert_true(tgc_module_is_training(net));
    assert_true(tgc_module_is_training(fc1));
    tgc_module_train(net, 0);
    assert_false(tgc_module_is_training(net));
    assert_false(tgc_module_is_training(fc1));
    assert_false(tgc_module_is_training(bn));
    tgc_module_train(bn, 1); /* only the subtree */
    assert_true(tgc_module_is_training(bn));
    assert_false(tgc_module_is_training(net));
    assert_false(tgc_module_is_training(fc1));
    tgc_module_train(net, 5); /* any nonzero is on */
    assert_int_equal(tgc_module_is_training(net), 1);
    assert_int_equal(tgc_module_is_training(fc1), 1);
    tgc_module_free(net);
}

static void test_module_to(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    assert_int_equal(tgc_module_to(net, tgc_cpu()), TGC_OK);
    /* indices no device has: from 0 without a GPU, past the last one with */
    int n = tgc_cuda_device_count();
    char wn[64];
    snprintf(wn, sizeof wn, "tgc_module_to: device cuda:%d", n);
    check_error(tgc_module_to(net, tgc_cuda(n)), TGC_ERR_DEVICE, wn);
    snprintf(wn, sizeof wn, "cuda:%d", n + 2);
    check_error(tgc_module_to(net, tgc_cuda(n + 2)), TGC_ERR_DEVICE, wn);
    check_error(tgc_module_to(net, (tgc_device){(tgc_device_type)7, 0}), TGC_ERR_DEVICE,
                "tgc_module_to: unknown device type 7 (index 0)");
    check_error(tgc_module_to(NULL, tgc_cpu()), TGC_ERR_INVALID_ARG,
                "tgc_module_to: module is NULL");
    /* the failed move left the tensors on the CPU */
    tgc_tensor *w = tgc_module_get(tgc_module_get_child(net, "fc1"), "weight");
    assert_int_equal(tgc_device_of(w).type, TGC_DEVICE_CPU);
    tgc_module_free(net);
}

/* ---- structure signature ---- */

static uint64_t sig_of(variant v)
{
    tgc_module *m = build(v, NULL);
    uint64_t s = tgc_module_signature(m);
    tgc_module_free(m);
    return s;
}

static void test_signature_equal_for_equal_structure(void **state)
{
    (void)state;
    int u1, u2;
    tgc_module *a = build(base_v, &u1), *b = build(base_v, &u2);
    assert_int_not_equal(tgc_module_signature(a), 0);
    assert_true(tgc_module_signature(a) == tgc_module_signature(b));
    /* values are not structure */
    tgc_tensor *w = tgc_module_get(tgc_module_get_child(a, "fc1"), "weight");
    assert_int_equal(tgc_copy_(w, tgc_full(SHAPE(4, 3), 9.0, TGC_F32, tgc_cpu())), TGC_OK);
    assert_true(tgc_module_signature(a) == tgc_module_signature(b));
    /* stable across calls */
    assert_true(tgc_module_signature(a) == tgc_module_signature(a));
    tgc_module_free(a);
    tgc_module_free(b);
    assert_int_equal(tgc_module_signature(NULL), 0);
}

static void test_signature_changes_with_structure(void **state)
{
    (void)state;
    uint64_t s0 = sig_of(base_v);
    assert_true(sig_of(base_v) == s0);
    variant v;
    v = base_v;
    v.w_cols = 5; /* shape */
    assert_true(sig_of(v) != s0);
    v = base_v;
    v.bias_name = "b"; /* tensor name */
    assert_true(sig_of(v) != s0);
    v = base_v;
    v.dtype = TGC_F16; /* dtype */
    assert_true(sig_of(v) != s0);
    v = base_v;
    v.bias_first = 1; /* position: parameters bind by position */
    assert_true(sig_of(v) != s0);
    v = base_v;
    v.bias_as_buffer = 1; /* parameter vs buffer */
    assert_true(sig_of(v) != s0);
    v = base_v;
    v.child_name = "head"; /* child name */
    assert_true(sig_of(v) != s0);
}

static void test_signature_tracks_changes_in_place(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    tgc_module *fc1 = tgc_module_get_child(net, "fc1"), *bn = tgc_module_get_child(net, "bn");
    const uint64_t s0 = tgc_module_signature(net);

    /* training, whole tree and one child; restored when it flips back */
    tgc_module_train(net, 0);
    uint64_t s_eval = tgc_module_signature(net);
    assert_true(s_eval != s0);
    tgc_module_train(net, 1);
    assert_true(tgc_module_signature(net) == s0);
    tgc_module_train(bn, 0);
    uint64_t s_bn = tgc_module_signature(net);
    assert_true(s_bn != s0);
    assert_true(s_bn != s_eval);
    tgc_module_train(bn, 1);
    assert_true(tgc_module_signature(net) == s0);

    /* requires_grad of a nested parameter */
    tgc_tensor *w = tgc_module_get(fc1, "weight");
    uint64_t s_fc1 = tgc_module_signature(fc1);
    tgc_requires_grad(w, 0);
    assert_true(tgc_module_signature(net) != s0);
    assert_true(tgc_module_signature(fc1) != s_fc1);
    tgc_requires_grad(w, 1);
    assert_true(tgc_module_signature(net) == s0);
    assert_true(tgc_module_signature(fc1) == s_fc1);

    /* a tensor added to a child after it was attached */
    assert_non_null(tgc_module_buffer(bn, "running_var", tgc_ones(SHAPE(4), TGC_F32, tgc_cpu())));
    uint64_t s_added = tgc_module_signature(net);
    assert_true(s_added != s0);
    /* a child attached deep in the tree */
    tgc_module *extra = tgc_module_create("extra", NULL);
    assert_int_equal(tgc_module_child(bn, "extra", extra), TGC_OK);
    assert_true(tgc_module_signature(net) != s_added);
    tgc_module_free(net);
}

/* ---- flat list and describe ---- */

static void test_flat_is_preorder(void **state)
{
    (void)state;
    /* root { r0, A { a0, a1, AA { aa0 } }, r1, B { b0 } }: own tensors first, in insertion
     * order (r1 was added after A was attached), then each child's in attach order. */
    tgc_module *root = tgc_module_create("root", NULL);
    tgc_module *A = tgc_module_create("A", NULL), *AA = tgc_module_create("AA", NULL);
    tgc_module *B = tgc_module_create("B", NULL);
    tgc_tensor *x = tgc_ones(SHAPE(1), TGC_F32, tgc_cpu());
    tgc_tensor *r0 = tgc_module_param(root, "r0", x);
    assert_int_equal(tgc_module_child(root, "A", A), TGC_OK);
    tgc_tensor *a0 = tgc_module_param(A, "a0", x);
    tgc_tensor *a1 = tgc_module_buffer(A, "a1", x);
    assert_int_equal(tgc_module_child(A, "AA", AA), TGC_OK);
    tgc_tensor *aa0 = tgc_module_param(AA, "aa0", x);
    tgc_tensor *r1 = tgc_module_buffer(root, "r1", x);
    assert_int_equal(tgc_module_child(root, "B", B), TGC_OK);
    tgc_tensor *b0 = tgc_module_param(B, "b0", x);

    int n = -1;
    tgc_tensor *const *flat = tgc_module_flat(root, &n);
    assert_non_null(flat);
    assert_int_equal(n, 6);
    tgc_tensor *want[] = {r0, r1, a0, a1, aa0, b0};
    for (int i = 0; i < 6; i++)
        assert_ptr_equal(flat[i], want[i]);
    assert_int_equal(tgc_module_num_tensors(root), 6);

    /* a subtree's flat list is its own pre-order */
    tgc_tensor *const *fa = tgc_module_flat(A, &n);
    assert_int_equal(n, 3);
    assert_ptr_equal(fa[0], a0);
    assert_ptr_equal(fa[1], a1);
    assert_ptr_equal(fa[2], aa0);

    /* the cached list follows later additions anywhere in the tree */
    tgc_tensor *aa1 = tgc_module_param(AA, "aa1", x);
    flat = tgc_module_flat(root, &n);
    assert_int_equal(n, 7);
    tgc_tensor *want2[] = {r0, r1, a0, a1, aa0, aa1, b0};
    for (int i = 0; i < 7; i++)
        assert_ptr_equal(flat[i], want2[i]);
    tgc_module *C = tgc_module_create("C", NULL);
    tgc_tensor *c0 = tgc_module_param(C, "c0", x);
    assert_int_equal(tgc_module_child(AA, "C", C), TGC_OK);
    flat = tgc_module_flat(root, &n);
    assert_int_equal(n, 8);
    assert_ptr_equal(flat[6], c0);
    assert_ptr_equal(flat[7], b0);

    /* an empty tree */
    tgc_module *e = tgc_module_create("e", NULL);
    n = -1;
    tgc_module_flat(e, &n);
    assert_int_equal(n, 0);
    tgc_module_free(e);
    tgc_module_free(root);
}

static void test_describe(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    tgc_module_train(tgc_module_get_child(net, "bn"), 0);
    tgc_requires_grad(tgc_module_get(net, "scale"), 0);
    char *text = tgc_module_describe(net);
    assert_non_null(text);
    assert_string_equal(text, "self.training = true\n"
                              "self.scale: param f32[1] cpu\n"
                              "self.fc1.training = true\n"
                              "self.fc1.weight: param f32[4, 3] cpu requires_grad\n"
                              "self.fc1.bias: param f32[4] cpu requires_grad\n"
                              "self.bn.training = false\n"
                              "self.bn.running_mean: buffer f32[4] cpu\n"
                              "self.fc2.training = true\n"
                              "self.fc2.weight: param f32[2, 4] cpu requires_grad\n");
    free(text);

    tgc_module *h = tgc_module_create("h", NULL);
    assert_non_null(tgc_module_buffer(h, "s", tgc_zeros(NULL, 0, TGC_BF16, tgc_cpu())));
    text = tgc_module_describe(h);
    assert_string_equal(text, "self.training = true\nself.s: buffer bf16[] cpu\n");
    free(text);
    tgc_module_free(h);
    tgc_module_free(net);
}

/* Integer and bool tensors cannot require gradients: as parameters or by the flag. */
static void test_integer_params_are_rejected(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    assert_null(tgc_module_param(m, "ids", full(SHAPE(3), 1, TGC_I64)));
    check_error(tgc_last_status(), TGC_ERR_DTYPE,
                "tgc_module_param: 'ids' is i64, but a parameter requires gradients, which only "
                "f32, f16, bf16 and f64 tensors can; keep integer state in tgc_module_buffer");
    assert_null(tgc_module_param(m, "mask", full(SHAPE(3), 1, TGC_BOOL)));
    check_error(tgc_last_status(), TGC_ERR_DTYPE, "'mask' is bool");
    assert_int_equal(tgc_module_num_tensors(m), 0);
    /* as a buffer it is fine, and a float parameter too */
    tgc_tensor *b = tgc_module_buffer(m, "ids", full(SHAPE(3), 1, TGC_I32));
    assert_non_null(b);
    assert_int_equal(tgc_requires_grad_of(b), 0);
    assert_non_null(tgc_module_param(m, "w", full(SHAPE(3), 1, TGC_BF16)));
    uint64_t sig = tgc_module_signature(m);

    tgc_clear_error();
    check_error(tgc_requires_grad(b, 1), TGC_ERR_DTYPE,
                "tgc_requires_grad: tensor is i32; only f32, f16, bf16 and f64 tensors can "
                "require gradients (cast it first with tgc_cast)");
    assert_int_equal(tgc_requires_grad_of(b), 0);
    assert_true(tgc_module_signature(m) == sig);
    tgc_tensor *t = full(SHAPE(2), 0, TGC_I64);
    check_error(tgc_requires_grad(t, 1), TGC_ERR_DTYPE, "tensor is i64");
    assert_int_equal(tgc_requires_grad_of(t), 0);
    tgc_clear_error();
    assert_int_equal(tgc_requires_grad(t, 0), TGC_OK); /* turning it off is always fine */
    tgc_tensor *f = full(SHAPE(2), 0, TGC_F32);
    assert_int_equal(tgc_requires_grad(f, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad_of(f), 1);
    check_error(tgc_requires_grad(NULL, 1), TGC_ERR_INVALID_ARG,
                "tgc_requires_grad: tensor is NULL");
    tgc_module_free(m);
}

static void test_attributes(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("bert", NULL);
    assert_int_equal(tgc_module_set_i64(m, "num_heads", 12), TGC_OK);
    assert_int_equal(tgc_module_set_f64(m, "eps", 1e-12), TGC_OK);
    assert_int_equal(tgc_module_set_str(m, "act", "gelu"), TGC_OK);
    int64_t i = 0;
    double d = 0;
    const char *str = NULL;
    assert_int_equal(tgc_module_attr_i64(m, "num_heads", &i), TGC_OK);
    assert_int_equal(i, 12);
    assert_int_equal(tgc_module_attr_f64(m, "eps", &d), TGC_OK);
    assert_true(d == 1e-12);
    assert_int_equal(tgc_module_attr_str(m, "act", &str), TGC_OK);
    assert_string_equal(str, "gelu");
    /* setting again changes the value; the string is copied */
    char buf[8] = "relu";
    assert_int_equal(tgc_module_set_str(m, "act", buf), TGC_OK);
    buf[0] = 'x';
    assert_int_equal(tgc_module_attr_str(m, "act", &str), TGC_OK);
    assert_string_equal(str, "relu");
    assert_int_equal(tgc_module_set_i64(m, "num_heads", INT64_MIN), TGC_OK);
    assert_int_equal(tgc_module_attr_i64(m, "num_heads", &i), TGC_OK);
    assert_true(i == INT64_MIN);
    /* attributes are members of their module only, not tensors */
    assert_int_equal(tgc_module_num_tensors(m), 0);
    assert_null(tgc_module_get(m, "eps"));
    tgc_module_free(m);
}

static void test_attribute_errors(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    assert_non_null(tgc_module_param(m, "w", full(SHAPE(2), 1, TGC_F32)));
    assert_int_equal(tgc_module_set_i64(m, "k", 3), TGC_OK);
    int64_t i = 77;
    double d = 5;
    const char *str = "unchanged";

    check_error(tgc_module_attr_i64(m, "missing", &i), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_i64: module 'm' has no attribute 'missing' (set it with "
                "tgc_module_set_i64 before the call)");
    check_error(tgc_module_attr_f64(m, "k", &d), TGC_ERR_DTYPE,
                "tgc_module_attr_f64: attribute 'k' of module 'm' is an i64; read it with "
                "tgc_module_attr_i64");
    check_error(tgc_module_attr_str(m, "k", &str), TGC_ERR_DTYPE,
                "read it with tgc_module_attr_i64");
    assert_true(d == 5);
    assert_string_equal(str, "unchanged");
    check_error(tgc_module_attr_i64(m, NULL, &i), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_i64: name is NULL");
    check_error(tgc_module_attr_i64(NULL, "k", &i), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_i64: module is NULL");
    check_error(tgc_module_attr_i64(m, "k", NULL), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_i64: out is NULL");
    /* a tensor is not an attribute */
    check_error(tgc_module_attr_f64(m, "w", &d), TGC_ERR_INVALID_ARG, "has no attribute 'w'");
    assert_int_equal(i, 77);

    uint64_t sig = tgc_module_signature(m);
    check_error(tgc_module_set_f64(m, "k", 1.5), TGC_ERR_DTYPE,
                "tgc_module_set_f64: attribute 'k' of module 'm' is an i64 (an attribute keeps "
                "its type); set it with tgc_module_set_i64");
    check_error(tgc_module_set_i64(m, NULL, 1), TGC_ERR_INVALID_ARG,
                "tgc_module_set_i64: name is NULL or empty");
    check_error(tgc_module_set_f64(m, "", 1), TGC_ERR_INVALID_ARG,
                "tgc_module_set_f64: name is NULL or empty");
    check_error(tgc_module_set_i64(NULL, "k", 1), TGC_ERR_INVALID_ARG,
                "tgc_module_set_i64: module is NULL");
    check_error(tgc_module_set_str(m, "s", NULL), TGC_ERR_INVALID_ARG,
                "tgc_module_set_str: value is NULL");
    check_error(tgc_module_set_i64(m, "w", 1), TGC_ERR_INVALID_ARG,
                "tgc_module_set_i64: module 'm' already has a member named 'w'");
    check_error(tgc_module_set_i64(m, "a.b", 1), TGC_ERR_INVALID_ARG, "contains '.'");
    check_error(tgc_module_set_i64(m, "training", 0), TGC_ERR_INVALID_ARG,
                "tgc_module_set_i64: the name 'training' is the module's training flag; set it "
                "with tgc_module_train");
    check_error(tgc_module_set_i64(m, "a = b", 1), TGC_ERR_INVALID_ARG,
                "tgc_module_set_i64: name 'a = b' contains a space, '=', ':' or a newline");
    /* and an attribute name is taken for tensors and children */
    assert_null(tgc_module_buffer(m, "k", full(SHAPE(1), 0, TGC_F32)));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "already has a member named 'k'");
    tgc_module *c = tgc_module_create("c", NULL);
    check_error(tgc_module_child(m, "k", c), TGC_ERR_INVALID_ARG, "already has a member named 'k'");
    tgc_module_free(c);
    /* nothing changed */
    assert_true(tgc_module_signature(m) == sig);
    assert_int_equal(tgc_module_attr_i64(m, "k", &i), TGC_OK);
    assert_int_equal(i, 3);
    tgc_module_free(m);
}

/* Attributes are part of the signature with their values, in any order they were set. */
static void test_attributes_in_signature_and_description(void **state)
{
    (void)state;
    tgc_module *a = tgc_module_create("a", NULL), *b = tgc_module_create("b", NULL);
    tgc_module *ca = tgc_module_create("enc", NULL), *cb = tgc_module_create("enc", NULL);
    assert_int_equal(tgc_module_child(a, "enc", ca), TGC_OK);
    assert_int_equal(tgc_module_child(b, "enc", cb), TGC_OK);
    uint64_t empty = tgc_module_signature(a);
    assert_int_equal(tgc_module_set_f64(a, "scale", 0.5), TGC_OK);
    assert_int_equal(tgc_module_set_i64(a, "heads", 2), TGC_OK);
    assert_int_equal(tgc_module_set_i64(b, "heads", 2), TGC_OK);
    assert_int_equal(tgc_module_set_f64(b, "scale", 0.5), TGC_OK);
    uint64_t sa = tgc_module_signature(a);
    assert_true(sa != empty);
    assert_true(sa == tgc_module_signature(b));
    /* a child's attribute changes the root's signature; setting it back restores it */
    assert_int_equal(tgc_module_set_str(cb, "act", "gelu"), TGC_OK);
    assert_true(tgc_module_signature(b) != sa);
    assert_int_equal(tgc_module_set_str(ca, "act", "gelu"), TGC_OK);
    assert_true(tgc_module_signature(a) == tgc_module_signature(b));
    uint64_t s_gelu = tgc_module_signature(a);
    assert_int_equal(tgc_module_set_str(ca, "act", "relu"), TGC_OK);
    assert_true(tgc_module_signature(a) != s_gelu);
    assert_int_equal(tgc_module_set_str(ca, "act", "gelu"), TGC_OK);
    assert_true(tgc_module_signature(a) == s_gelu);
    /* a value's type counts: 2 as an f64 is not 2 as an i64 */
    tgc_module *x = tgc_module_create("x", NULL), *y = tgc_module_create("y", NULL);
    assert_int_equal(tgc_module_set_i64(x, "v", 2), TGC_OK);
    assert_int_equal(tgc_module_set_f64(y, "v", 2.0), TGC_OK);
    assert_true(tgc_module_signature(x) != tgc_module_signature(y));

    assert_int_equal(tgc_module_set_f64(a, "scale", 0.1), TGC_OK);
    assert_int_equal(tgc_module_set_str(ca, "note", "say \"hi\"\nbye"), TGC_OK);
    char *text = tgc_module_describe(a);
    assert_string_equal(text, "self.training = true\n"
                              "self.heads = 2\n"
                              "self.scale = 0.1\n"
                              "self.enc.training = true\n"
                              "self.enc.act = \"gelu\"\n"
                              "self.enc.note = \"say \\\"hi\\\"\\nbye\"\n");
    free(text);
    tgc_module_free(x);
    tgc_module_free(y);
    tgc_module_free(a);
    tgc_module_free(b);
}

/* A big tree built and freed: LSan reports anything left behind. */
static void test_free_whole_tree(void **state)
{
    (void)state;
    tgc_module *root = tgc_module_create("root", NULL);
    tgc_tensor *x = tgc_ones(SHAPE(8, 8), TGC_F32, tgc_cpu());
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i);
        tgc_module *l = tgc_module_create(name, NULL);
        for (int j = 0; j < 12; j++) { /* more than the initial capacities */
            snprintf(name, sizeof name, "w%d", j);
            assert_non_null(j % 2 ? tgc_module_param(l, name, x) : tgc_module_buffer(l, name, x));
        }
        for (int j = 0; j < 6; j++) {
            snprintf(name, sizeof name, "sub%d", j);
            tgc_module *s = tgc_module_create(name, NULL);
            assert_non_null(tgc_module_param(s, "w", x));
            assert_int_equal(tgc_module_child(l, name, s), TGC_OK);
        }
        snprintf(name, sizeof name, "%d", i);
        assert_int_equal(tgc_module_child(root, name, l), TGC_OK);
    }
    assert_int_equal(tgc_module_num_tensors(root), 20 * (12 + 6));
    int n;
    tgc_module_flat(root, &n);
    assert_int_equal(n, 20 * 18);
    (void)tgc_module_signature(root);
    char *d = tgc_module_describe(root);
    assert_non_null(d);
    free(d);
    tgc_module_free(root);
}

/* Freeing a module that still has a parent is refused (like tgc_tensor_free on a module's
 * tensor): the parent owns it, and freeing it here would leave the parent pointing at freed
 * memory. The parent's tgc_module_free still frees it exactly once. */
static void test_free_attached_child_is_refused(void **state)
{
    (void)state;
    tgc_module *p = tgc_module_create("p", NULL);
    tgc_module *c = tgc_module_create("c", NULL);
    assert_non_null(tgc_module_param(c, "w", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu())));
    assert_int_equal(tgc_module_child(p, "c", c), TGC_OK);
    tgc_clear_error();
    tgc_module_free(c);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_free");
    /* still attached and usable */
    assert_ptr_equal(tgc_module_get_child(p, "c"), c);
    assert_string_equal(tgc_module_name(c), "c");
    assert_true(tgc_item_f64(tgc_module_get(c, "w")) == 1.0);
    assert_int_equal(tgc_module_num_tensors(p), 1);
    tgc_module_free(p);
}

/* Dotted paths (PyTorch's state_dict names) reach tensors, children and attributes below a
 * module; a miss names the part that is missing. */
static void test_dotted_paths(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    tgc_module *fc1 = tgc_module_get_child(net, "fc1");
    assert_non_null(fc1);
    assert_ptr_equal(tgc_module_get(net, "fc1.weight"), tgc_module_get(fc1, "weight"));
    assert_ptr_equal(tgc_module_get(net, "bn.running_mean"),
                     tgc_module_get(tgc_module_get_child(net, "bn"), "running_mean"));
    tgc_module *deep = tgc_module_create("deep", NULL);
    assert_int_equal(tgc_module_child(fc1, "inner", deep), TGC_OK);
    assert_non_null(tgc_module_param(deep, "w", full(SHAPE(2), 1.0, TGC_F32)));
    assert_int_equal(tgc_module_set_f64(deep, "scale", 0.5), TGC_OK);
    assert_ptr_equal(tgc_module_get_child(net, "fc1.inner"), deep);
    assert_ptr_equal(tgc_module_get(net, "fc1.inner.w"), tgc_module_get(deep, "w"));
    double scale = 0;
    assert_int_equal(tgc_module_attr_f64(net, "fc1.inner.scale", &scale), TGC_OK);
    assert_true(scale == 0.5);
    assert_int_equal(tgc_last_status(), TGC_OK);

    assert_null(tgc_module_get(net, "fc3.weight"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get: 'fc3.weight': module 'net' has no child 'fc3'");
    assert_null(tgc_module_get(net, "fc1.inner.v"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get: 'fc1.inner.v': module 'deep' has no parameter or buffer 'v'");
    assert_null(tgc_module_get(net, "fc1."));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "module 'fc1' has no parameter or buffer ''");
    assert_null(tgc_module_get(net, ".weight"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "module 'net' has no child ''");
    assert_null(tgc_module_get_child(net, "fc1.weight"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_get_child: 'fc1.weight': module 'fc1' has no child 'weight' (it is "
                "a tensor: tgc_module_get)");
    scale = 7;
    check_error(tgc_module_attr_f64(net, "fc2.inner.scale", &scale), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_f64: 'fc2.inner.scale': module 'fc2' has no child 'inner'");
    check_error(tgc_module_attr_f64(net, "fc1.inner.gone", &scale), TGC_ERR_INVALID_ARG,
                "tgc_module_attr_f64: module 'deep' has no attribute 'gone'");
    assert_true(scale == 7);
    tgc_module_free(net);
}

/* The tree's tensors listed by index: pre-order, dotted names, kinds; the same names and
 * order tgc_module_save writes. */
static void test_list_tensors(void **state)
{
    (void)state;
    tgc_module *net = build(base_v, NULL);
    static const char *const names[] = {"scale", "fc1.weight", "fc1.bias", "bn.running_mean",
                                        "fc2.weight"};
    static const int buffers[] = {0, 0, 0, 1, 0};
    assert_int_equal(tgc_module_num_tensors(net), 5);
    for (int i = 0; i < 5; i++) {
        int is_buffer = -1;
        tgc_tensor *t = tgc_module_tensor_at(net, i, &is_buffer);
        assert_non_null(t);
        assert_ptr_equal(t, tgc_module_get(net, names[i]));
        assert_int_equal(is_buffer, buffers[i]);
        assert_ptr_equal(tgc_module_tensor_at(net, i, NULL), t);
        int len = tgc_module_tensor_name(net, i, NULL, 0);
        assert_int_equal(len, (int)strlen(names[i]));
        char buf[64];
        assert_int_equal(tgc_module_tensor_name(net, i, buf, sizeof buf), len);
        assert_string_equal(buf, names[i]);
        /* snprintf-style truncation */
        char small[5];
        assert_int_equal(tgc_module_tensor_name(net, i, small, sizeof small), len);
        assert_int_equal(strlen(small), len < 4 ? len : 4);
        assert_memory_equal(small, names[i], strlen(small));
    }
    tgc_tensor *w = tgc_module_tensor_at(net, 1, NULL);
    assert_int_equal(tgc_dtype_of(w), TGC_F32);
    assert_int_equal(tgc_ndim(w), 2);
    assert_int_equal(tgc_size(w, 0), 4);
    assert_int_equal(tgc_size(w, 1), 3);
    /* a subtree names from itself */
    char buf[64];
    tgc_module *fc1 = tgc_module_get_child(net, "fc1");
    assert_int_equal(tgc_module_tensor_name(fc1, 1, buf, sizeof buf), 4);
    assert_string_equal(buf, "bias");
    assert_int_equal(tgc_last_status(), TGC_OK);

    assert_null(tgc_module_tensor_at(net, 5, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_tensor_at: index 5 is out of range: module 'net' has 5 tensors");
    assert_null(tgc_module_tensor_at(net, -1, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "index -1 is out of range");
    assert_int_equal(tgc_module_tensor_name(net, 7, buf, sizeof buf), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_tensor_name: index 7");
    assert_int_equal(tgc_module_tensor_name(net, 0, NULL, 8), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "buf is NULL with n = 8");
    assert_null(tgc_module_tensor_at(NULL, 0, NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_module_tensor_at: module is NULL");
    tgc_module_free(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_param_and_buffer, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_param_bad_args, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_children, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_child_errors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_dotted_paths, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_list_tensors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_training, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_module_to, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_signature_equal_for_equal_structure, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_signature_changes_with_structure, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_signature_tracks_changes_in_place, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_flat_is_preorder, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_describe, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_integer_params_are_rejected, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_attributes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_attribute_errors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_attributes_in_signature_and_description, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_free_whole_tree, scoped_setup, scoped_teardown),
        /* last: before the fix, the double free aborts the ASan build */
        cmocka_unit_test_setup_teardown(test_free_attached_child_is_refused, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
