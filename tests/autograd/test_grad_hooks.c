/* The hooks the layers above autograd and the module hang on it: a leaf's gradient hook
 * (tgc_grad_hook, autograd/autograd.h: ready per finished leaf gradient, finish once per
 * backward, what the data-parallel wrapper uses), and the watches a module and a process
 * group call when they are freed or a module moves (tgc_watch, frontend/watch.h: what
 * optimizers and wrappers use). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autograd/autograd.h"
#include "frontend/module_impl.h"
#include "frontend/watch.h"
#include "runtime/alloc.h"
#include "support/error.h"
#include "tgc/tgc.h"

static tgc_tensor *vec(const float *v, int64_t n)
{
    return tgc_from_data(v, (size_t)n * sizeof(float), &n, 1, TGC_F32, tgc_cpu());
}

static void read_vec(const tgc_tensor *t, float *v, int64_t n)
{
    assert_int_equal(tgc_copy_to_host(t, v, (size_t)n * sizeof(float)), TGC_OK);
}

/* ---- gradient hooks ---- */

#define MAX_EVENTS 16

/* A hook that logs what it is told: per ready the leaf, its slot and its .grad as it is then
 * (n elements), per finish the event's position; and whether recording was paused. */
typedef struct test_hook {
    tgc_grad_hook h;
    int id;
    int n; /* elements of the leaves' gradients it reads */
    tgc_status ready_st, finish_st;
    int readies, finishes;
    tgc_tensor *leaf[MAX_EVENTS];
    int slot[MAX_EVENTS];
    float grad[MAX_EVENTS][4];
    int recording_seen; /* a ready or finish ran with recording on */
} test_hook;

/* Every event of every hook, in order: 100 * hook id + 0 (ready) or 1 (finish). */
static int g_events[64], g_n_events;

static int recording_on(void)
{
    float one = 1;
    tgc_tensor *t = vec(&one, 1);
    tgc_requires_grad(t, 1);
    int on = tgc_autograd_wants(&t, 1);
    tgc_tensor_free(t);
    return on;
}

static tgc_status hook_ready(tgc_grad_hook *h, tgc_tensor *leaf)
{
    test_hook *t = (test_hook *)h;
    assert_true(t->readies < MAX_EVENTS);
    int k = t->readies++;
    t->leaf[k] = leaf;
    t->slot[k] = leaf->grad_hook_slot;
    assert_non_null(tgc_grad(leaf)); /* added into the .grad before the hook hears of it */
    read_vec(tgc_grad(leaf), t->grad[k], t->n);
    t->recording_seen |= recording_on();
    g_events[g_n_events++] = 100 * t->id;
    if (t->ready_st != TGC_OK)
        return tgc_set_error(t->ready_st, "test hook %d: ready fails", t->id);
    return TGC_OK;
}

static tgc_status hook_finish(tgc_grad_hook *h)
{
    test_hook *t = (test_hook *)h;
    t->finishes++;
    t->recording_seen |= recording_on();
    g_events[g_n_events++] = 100 * t->id + 1;
    if (t->finish_st != TGC_OK)
        return tgc_set_error(t->finish_st, "test hook %d: finish fails", t->id);
    return TGC_OK;
}

static void hook_init(test_hook *t, int id, int n)
{
    memset(t, 0, sizeof *t);
    t->h.ready = hook_ready;
    t->h.finish = hook_finish;
    t->id = id;
    t->n = n;
}

static void hook_on(tgc_tensor *leaf, test_hook *t, int slot)
{
    leaf->grad_hook = &t->h;
    leaf->grad_hook_slot = slot;
}

static int setup(void **state)
{
    (void)state;
    g_n_events = 0;
    tgc_scope_push();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tgc_scope_pop();
    return 0;
}

/* loss = sum(w1 * x) + sum(w1 * w2): w1 gets two contributions, and its hook hears of it once,
 * with the final sum (x + w2) already in its .grad; w2's gets x-free w1. x has no hook. */
static void test_ready_once_with_the_final_gradient(void **state)
{
    (void)state;
    float xv[3] = {1, 2, 3}, w1v[3] = {0.5f, -1, 2}, w2v[3] = {4, 5, 6};
    tgc_tensor *x = vec(xv, 3), *w1 = vec(w1v, 3), *w2 = vec(w2v, 3);
    assert_int_equal(tgc_requires_grad(x, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad(w1, 1), TGC_OK);
    assert_int_equal(tgc_requires_grad(w2, 1), TGC_OK);
    test_hook h;
    hook_init(&h, 1, 3);
    hook_on(w1, &h, 7);
    hook_on(w2, &h, 8);
    tgc_tensor *loss =
        tgc_add(tgc_sum(tgc_mul(w1, x), NULL, 0, 0), tgc_sum(tgc_mul(w1, w2), NULL, 0, 0));
    assert_int_equal(tgc_backward(loss), TGC_OK);
    assert_int_equal(h.readies, 2);
    assert_int_equal(h.finishes, 1);
    assert_int_equal(g_n_events, 3);
    assert_int_equal(g_events[2], 101); /* finish after every ready */
    assert_false(h.recording_seen);
    assert_false(h.h.active);
    assert_null(h.h.next_active);
    for (int k = 0; k < 2; k++) {
        int is_w1 = h.leaf[k] == w1;
        assert_true(is_w1 || h.leaf[k] == w2);
        assert_int_equal(h.slot[k], is_w1 ? 7 : 8);
        for (int i = 0; i < 3; i++)
            assert_float_equal(h.grad[k][i], is_w1 ? xv[i] + w2v[i] : w1v[i], 1e-6);
    }
    assert_true(h.leaf[0] != h.leaf[1]);
    /* a second backward: told again, the gradients accumulated */
    tgc_tensor *loss2 = tgc_sum(tgc_mul(w1, x), NULL, 0, 0);
    assert_int_equal(tgc_backward(loss2), TGC_OK);
    assert_int_equal(h.readies, 3);
    assert_int_equal(h.finishes, 2);
    assert_ptr_equal(h.leaf[2], w1);
    for (int i = 0; i < 3; i++)
        assert_float_equal(h.grad[2][i], 2 * xv[i] + w2v[i], 1e-6);
}

/* Two hooks reached in one backward finish once each, the one reached last first; a hook
 * whose leaves the backward does not reach is not called. */
static void test_each_reached_hook_finishes_once(void **state)
{
    (void)state;
    float av[2] = {1, 2}, bv[2] = {3, 4}, cv[2] = {5, 6};
    tgc_tensor *a = vec(av, 2), *b = vec(bv, 2), *c = vec(cv, 2);
    tgc_requires_grad(a, 1);
    tgc_requires_grad(b, 1);
    tgc_requires_grad(c, 1);
    test_hook ha, hb, hc;
    hook_init(&ha, 1, 2);
    hook_init(&hb, 2, 2);
    hook_init(&hc, 3, 2);
    hook_on(a, &ha, 0);
    hook_on(b, &hb, 0);
    hook_on(c, &hc, 0);
    /* loss = sum(a * b): c is not in it */
    assert_int_equal(tgc_backward(tgc_sum(tgc_mul(a, b), NULL, 0, 0)), TGC_OK);
    assert_int_equal(ha.readies, 1);
    assert_int_equal(hb.readies, 1);
    assert_int_equal(ha.finishes, 1);
    assert_int_equal(hb.finishes, 1);
    assert_int_equal(hc.readies + hc.finishes, 0);
    assert_int_equal(g_n_events, 4);
    int first = g_events[0] / 100, second = g_events[1] / 100;
    assert_true(first != second && g_events[0] % 100 == 0 && g_events[1] % 100 == 0);
    assert_int_equal(g_events[2], 100 * second + 1); /* the one reached last finishes first */
    assert_int_equal(g_events[3], 100 * first + 1);
}

/* A failing ready is what tgc_backward returns; the hook still finishes (a wrapper must join
 * what it started), and a failing finish of another hook does not replace the first error. */
static void test_errors_returned_and_every_hook_finished(void **state)
{
    (void)state;
    float av[2] = {1, 2}, bv[2] = {3, 4};
    tgc_tensor *a = vec(av, 2), *b = vec(bv, 2);
    tgc_requires_grad(a, 1);
    tgc_requires_grad(b, 1);
    test_hook ha, hb;
    hook_init(&ha, 1, 2);
    hook_init(&hb, 2, 2);
    ha.ready_st = TGC_ERR_RUNTIME;
    hb.finish_st = TGC_ERR_TIMEOUT;
    hook_on(a, &ha, 0);
    hook_on(b, &hb, 0);
    tgc_status st = tgc_backward(tgc_sum(tgc_mul(a, b), NULL, 0, 0));
    assert_int_equal(ha.readies, 1);
    assert_int_equal(ha.finishes, 1);
    assert_int_equal(hb.finishes, hb.readies); /* reached or not, finished when reached */
    assert_int_equal(st, TGC_ERR_RUNTIME);
    assert_false(ha.h.active);
    assert_false(hb.h.active);

    /* only finish fails: its status and message come back */
    hook_init(&ha, 1, 2);
    hook_init(&hb, 2, 2);
    hb.finish_st = TGC_ERR_TIMEOUT;
    hook_on(a, &ha, 0);
    hook_on(b, &hb, 0);
    st = tgc_backward(tgc_sum(tgc_mul(a, b), NULL, 0, 0));
    assert_int_equal(st, TGC_ERR_TIMEOUT);
    assert_non_null(strstr(tgc_last_error(), "test hook 2: finish fails"));
    assert_int_equal(ha.finishes, 1);
    assert_int_equal(hb.finishes, 1);
    /* the next backward starts with no hook left active */
    hb.finish_st = TGC_OK;
    assert_int_equal(tgc_backward(tgc_sum(tgc_mul(a, b), NULL, 0, 0)), TGC_OK);
    assert_int_equal(ha.finishes, 2);
    assert_int_equal(hb.finishes, 2);
}

/* The loss itself a leaf with a hook: its own gradient is ready, then the backward finishes. */
static void test_leaf_loss(void **state)
{
    (void)state;
    float wv[2] = {1, 2}, gv[2] = {0.25f, -3};
    tgc_tensor *w = vec(wv, 2), *g = vec(gv, 2);
    tgc_requires_grad(w, 1);
    test_hook h;
    hook_init(&h, 1, 2);
    hook_on(w, &h, 3);
    assert_int_equal(tgc_backward_grad(w, g), TGC_OK);
    assert_int_equal(h.readies, 1);
    assert_int_equal(h.finishes, 1);
    assert_ptr_equal(h.leaf[0], w);
    assert_int_equal(h.slot[0], 3);
    assert_float_equal(h.grad[0][0], 0.25f, 0);
    assert_float_equal(h.grad[0][1], -3, 0);
    assert_false(h.recording_seen);
    /* a leaf that forgot its hook: nothing is called */
    w->grad_hook = NULL;
    assert_int_equal(tgc_backward_grad(w, g), TGC_OK);
    assert_int_equal(h.readies + h.finishes, 2);
}

/* ---- watches ---- */

typedef struct test_watch {
    tgc_watch w;
    int gones, movings;
    const tgc_module *root;
    tgc_device dev;
    tgc_tensor *own; /* moves with any subtree */
    int fail;        /* moving reports out of memory */
} test_watch;

static void watch_gone(tgc_watch *w)
{
    ((test_watch *)w)->gones++;
}

static int watch_moving(tgc_watch *w, const tgc_module *root, tgc_device dev,
                        int (*add)(void *ctx, tgc_tensor *t), void *ctx)
{
    test_watch *t = (test_watch *)w;
    t->movings++;
    t->root = root;
    t->dev = dev;
    if (t->fail)
        return 0;
    return t->own ? add(ctx, t->own) : 1;
}

static void watch_init(test_watch *t, int with_moving)
{
    memset(t, 0, sizeof *t);
    t->w.gone = watch_gone;
    t->w.moving = with_moving ? watch_moving : NULL;
}

/* A module's free calls the gone of every watch on any module of the tree, once; a watch
 * taken off is not called. */
static void test_module_free_calls_gone(void **state)
{
    (void)state;
    tgc_module *root = tgc_module_create("root", NULL);
    tgc_module *child = tgc_module_create("child", NULL);
    assert_int_equal(tgc_module_child(root, "c", child), TGC_OK);
    test_watch a, b, off;
    watch_init(&a, 0);
    watch_init(&b, 1);
    watch_init(&off, 0);
    assert_int_equal(tgc_module_watch(root, &a.w), TGC_OK);
    assert_int_equal(tgc_module_watch(child, &b.w), TGC_OK);
    assert_int_equal(tgc_module_watch(root, &off.w), TGC_OK);
    tgc_module_unwatch(root, &off.w);
    tgc_module_unwatch(root, &off.w); /* not on the list: nothing */
    tgc_module_free(root);
    assert_int_equal(a.gones, 1);
    assert_int_equal(b.gones, 1);
    assert_int_equal(off.gones, 0);
    assert_int_equal(a.movings + b.movings, 0);
}

/* A "device" for TGC_DEVICE_CUDA whose memory is host malloc. */
static tgc_block dev_alloc(void *ctx, int index, size_t nbytes)
{
    (void)ctx;
    (void)index;
    void *p = malloc(nbytes ? nbytes : 1);
    return (tgc_block){p, p ? (nbytes ? nbytes : 1) : 0};
}

static void dev_free(void *ctx, int index, tgc_block b)
{
    (void)ctx;
    (void)index;
    free(b.ptr);
}

static tgc_status dev_copy(void *ctx, void *dst, tgc_device ddev, const void *src, tgc_device sdev,
                           size_t n)
{
    (void)ctx;
    (void)ddev;
    (void)sdev;
    memcpy(dst, src, n);
    return TGC_OK;
}

static tgc_mem_stats dev_stats(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return (tgc_mem_stats){0, 0, 0};
}

static void dev_empty(void *ctx)
{
    (void)ctx;
}

static const tgc_allocator dev_allocator = {
    .name = "cuda",
    .alloc = dev_alloc,
    .free = dev_free,
    .copy = dev_copy,
    .stats = dev_stats,
    .empty_cache = dev_empty,
};

/* tgc_module_to asks the watches of the moved subtree and of its ancestors what moves with it
 * (root and device as given); their tensors move with the module's, and a watch that runs
 * out of memory fails the move before anything moved. */
static void test_module_to_asks_the_watches(void **state)
{
    (void)state;
    assert_int_equal(tgc_allocator_register(TGC_DEVICE_CUDA, &dev_allocator), TGC_OK);
    float v[2] = {1, 2}, s[2] = {7, 8};
    tgc_module *root = tgc_module_create("root", NULL);
    tgc_module *child = tgc_module_create("child", NULL);
    tgc_module *leaf = tgc_module_create("leaf", NULL);
    assert_int_equal(tgc_module_child(root, "c", child), TGC_OK);
    assert_int_equal(tgc_module_child(child, "l", leaf), TGC_OK);
    tgc_tensor *p = tgc_module_param(child, "w", vec(v, 2));
    assert_non_null(p);
    test_watch above, below, silent;
    watch_init(&above, 1);
    watch_init(&below, 1);
    watch_init(&silent, 0); /* no moving: only told of the free */
    above.own = vec(s, 2);
    tgc_scope_release(above.own); /* the watcher's own */
    assert_int_equal(tgc_module_watch(root, &above.w), TGC_OK);
    assert_int_equal(tgc_module_watch(leaf, &below.w), TGC_OK);
    assert_int_equal(tgc_module_watch(child, &silent.w), TGC_OK);

    /* out of memory in a watch: nothing moves */
    below.fail = 1;
    assert_int_equal(tgc_module_to(child, tgc_cuda(0)), TGC_ERR_OOM);
    assert_non_null(strstr(tgc_last_error(), "tgc_module_to: out of memory"));
    assert_int_equal(tgc_device_of(p).type, TGC_DEVICE_CPU);
    assert_int_equal(tgc_device_of(above.own).type, TGC_DEVICE_CPU);

    below.fail = 0;
    above.movings = below.movings = 0;
    assert_int_equal(tgc_module_to(child, tgc_cuda(0)), TGC_OK);
    assert_int_equal(above.movings, 1); /* an ancestor's watch */
    assert_int_equal(below.movings, 1); /* a watch below the moved module */
    assert_ptr_equal(above.root, child);
    assert_ptr_equal(below.root, child);
    assert_int_equal(above.dev.type, TGC_DEVICE_CUDA);
    assert_int_equal(tgc_device_of(p).type, TGC_DEVICE_CUDA);
    assert_int_equal(tgc_device_of(above.own).type, TGC_DEVICE_CUDA);
    float back[2];
    read_vec(above.own, back, 2);
    assert_float_equal(back[0], 7, 0);
    assert_float_equal(back[1], 8, 0);

    /* moving the leaf alone asks its own watch (leaf the root) and the ancestors' */
    above.movings = below.movings = 0;
    assert_int_equal(tgc_module_to(leaf, tgc_cpu()), TGC_OK);
    assert_int_equal(below.movings, 1);
    assert_int_equal(above.movings, 1);
    assert_ptr_equal(above.root, leaf);
    assert_ptr_equal(below.root, leaf);
    tgc_module_unwatch(root, &above.w);
    tgc_module_free(root);
    assert_int_equal(above.gones, 0); /* taken off before */
    assert_int_equal(below.gones, 1);
    assert_int_equal(silent.gones, 1);
    tgc_tensor_unref(above.own);
    tgc_allocator_unregister(TGC_DEVICE_CUDA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready_once_with_the_final_gradient, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_reached_hook_finishes_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_returned_and_every_hook_finished, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_leaf_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_module_free_calls_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_module_to_asks_the_watches, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
