/* Scopes and tensor lifetime: push/pop frees what the scope owns, tgc_scope_keep moves a
 * tensor to the enclosing scope, tgc_tensor_free frees early without a double free at the
 * pop, the root scope cannot be popped, views keep storage alive after their base is freed,
 * tgc_shutdown frees everything, scopes are per thread.
 *
 * Leaks are checked two ways: by LeakSanitizer in the ASan build, and here by the storage
 * reference count, which drops when a tensor viewing that storage is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <pthread.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

static int setup(void **state)
{
    (void)state;
    tgc_clear_error();
    return 0;
}

/* Every test leaves the thread at its root scope with nothing in it. */
static int teardown(void **state)
{
    (void)state;
    tgc_shutdown();
    return 0;
}

static int storage_refs(const tgc_tensor *t)
{
    return atomic_load(&t->storage->refs);
}

/* A view of base, created in the innermost scope: holds one storage reference. */
static tgc_tensor *view_of(tgc_tensor *base)
{
    tgc_tensor *v = tgc_slice(base, 0, 0, tgc_size(base, 0), 1);
    assert_non_null(v);
    assert_ptr_equal(v->storage, base->storage);
    return v;
}

static tgc_tensor *ones(int64_t n)
{
    tgc_tensor *t = tgc_ones(&n, 1, TGC_F32, tgc_cpu());
    assert_non_null(t);
    return t;
}

static void test_pop_frees_scope_tensors(void **state)
{
    (void)state;
    tgc_tensor *base = ones(8); /* root scope */
    assert_int_equal(storage_refs(base), 1);
    tgc_scope_push();
    tgc_tensor *v1 = view_of(base), *v2 = view_of(base);
    (void)v1;
    (void)v2;
    for (int i = 0; i < 10; i++)
        assert_non_null(tgc_add(base, base)); /* op results belong to the innermost scope */
    assert_int_equal(storage_refs(base), 3);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);
    assert_int_equal(tgc_last_status(), TGC_OK);
    /* base survived: it belongs to the root scope */
    assert_true(tgc_item_f64(base) == 1.0);
}

static void test_nested_scopes(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_scope_push();
    view_of(base);
    tgc_scope_push();
    view_of(base);
    view_of(base);
    assert_int_equal(storage_refs(base), 4);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2);
    tgc_scope_push();
    view_of(base);
    assert_int_equal(storage_refs(base), 3);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);
}

static void test_keep_survives_pop(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_scope_push();
    tgc_tensor *kept = view_of(base);
    tgc_tensor *tmp = view_of(base);
    (void)tmp;
    tgc_tensor *res = tgc_mul_scalar(base, 3.0);
    assert_non_null(res);
    assert_int_equal(tgc_scope_keep(kept), TGC_OK);
    assert_int_equal(tgc_scope_keep(res), TGC_OK);
    assert_int_equal(storage_refs(base), 3);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2); /* tmp freed, kept alive */
    assert_true(tgc_item_f64(kept) == 1.0);
    assert_true(tgc_item_f64(res) == 3.0);
    assert_int_equal(tgc_numel(res), 4);
    /* kept now belongs to the root scope: another push/pop does not free it */
    tgc_scope_push();
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2);
    tgc_tensor_free(kept);
    assert_int_equal(storage_refs(base), 1);
}

/* keep moves one level: out of the tensor's scope into its parent, not to the root. */
static void test_keep_moves_one_level(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_scope_push(); /* outer */
    tgc_scope_push(); /* inner */
    tgc_tensor *v = view_of(base);
    assert_int_equal(tgc_scope_keep(v), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK); /* inner */
    assert_int_equal(storage_refs(base), 2);
    assert_true(tgc_item_f64(v) == 1.0);
    assert_int_equal(tgc_scope_pop(), TGC_OK); /* outer frees it */
    assert_int_equal(storage_refs(base), 1);

    /* keeping twice moves it twice */
    tgc_scope_push();
    tgc_scope_push();
    tgc_tensor *w = view_of(base);
    assert_int_equal(tgc_scope_keep(w), TGC_OK);
    assert_int_equal(tgc_scope_keep(w), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2); /* w is in the root scope now */
    assert_true(tgc_item_f64(w) == 1.0);
}

/* The root scope has no enclosing scope: keep there is an error that changes nothing. */
static void test_keep_in_root_scope(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_tensor *v = view_of(base); /* root */
    check_error(tgc_scope_keep(v), TGC_ERR_INVALID_ARG,
                "tgc_scope_keep: tensor is in the root scope, which has no enclosing scope");
    tgc_clear_error();
    tgc_scope_push();
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2);
    assert_true(tgc_item_f64(v) == 1.0);
    /* a tensor kept into the root scope cannot be kept further */
    tgc_scope_push();
    tgc_tensor *w = view_of(base);
    assert_int_equal(tgc_scope_keep(w), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    check_error(tgc_scope_keep(w), TGC_ERR_INVALID_ARG, "root scope");
    assert_true(tgc_item_f64(w) == 1.0);
}

static void test_keep_bad_args(void **state)
{
    (void)state;
    check_error(tgc_scope_keep(NULL), TGC_ERR_INVALID_ARG, "tgc_scope_keep: tensor is NULL");
    tgc_module *m = tgc_module_create("m", NULL);
    assert_non_null(m);
    tgc_tensor *p = tgc_module_param(m, "w", ones(3));
    assert_non_null(p);
    tgc_clear_error();
    check_error(tgc_scope_keep(p), TGC_ERR_INVALID_ARG,
                "tgc_scope_keep: tensor is not owned by a scope");
    /* freeing a module's tensor is refused; the tensor stays valid */
    tgc_clear_error();
    tgc_tensor_free(p);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_tensor_free: tensor belongs to a module");
    assert_true(tgc_item_f64(p) == 1.0);
    tgc_module_free(m);
}

static void test_free_early_then_pop(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_scope_push();
    tgc_tensor *a = view_of(base), *b = view_of(base), *c = view_of(base);
    assert_int_equal(storage_refs(base), 4);
    tgc_tensor_free(b); /* middle of the scope's list */
    assert_int_equal(storage_refs(base), 3);
    tgc_tensor_free(c); /* head of the list */
    assert_int_equal(storage_refs(base), 2);
    assert_true(tgc_item_f64(a) == 1.0);
    assert_int_equal(tgc_scope_pop(), TGC_OK); /* frees a only: no double free */
    assert_int_equal(storage_refs(base), 1);

    /* free every tensor of a scope, then pop the empty scope */
    tgc_scope_push();
    tgc_tensor *x = view_of(base), *y = view_of(base);
    tgc_tensor_free(x);
    tgc_tensor_free(y);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);

    /* a kept tensor freed early is not freed again by the parent */
    tgc_scope_push();
    tgc_scope_push();
    tgc_tensor *k = view_of(base);
    assert_int_equal(tgc_scope_keep(k), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    tgc_tensor_free(k);
    assert_int_equal(storage_refs(base), 1);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);

    /* a tensor of an outer scope freed from inside an inner one */
    tgc_scope_push();
    tgc_tensor *outer = view_of(base);
    tgc_tensor *outer2 = view_of(base);
    tgc_scope_push();
    view_of(base);
    tgc_tensor_free(outer);
    assert_int_equal(storage_refs(base), 3);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 2);
    assert_true(tgc_item_f64(outer2) == 1.0);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void test_free_null_is_noop(void **state)
{
    (void)state;
    tgc_tensor_free(NULL);
    assert_int_equal(tgc_last_status(), TGC_OK);
    assert_string_equal(tgc_last_error(), "");
}

static void test_pop_root_scope(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_tensor *v = view_of(base);
    (void)v;
    check_error(tgc_scope_pop(), TGC_ERR_INVALID_ARG, "tgc_scope_pop: no scope to pop");
    /* nothing was freed */
    assert_int_equal(storage_refs(base), 2);
    assert_true(tgc_item_f64(base) == 1.0);
    /* balanced pairs work afterwards; one pop too many fails again */
    tgc_scope_push();
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    tgc_clear_error();
    check_error(tgc_scope_pop(), TGC_ERR_INVALID_ARG, "tgc_scope_pop");
    assert_int_equal(storage_refs(base), 2);
}

static void test_view_keeps_storage_after_base_freed(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    const float v[] = {0, 1, 2, 3, 4, 5};
    tgc_scope_push();
    tgc_tensor *base = tgc_from_data(v, sizeof v, shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *t = tgc_transpose(base, 0, 1);
    tgc_tensor *s = tgc_slice(base, 1, 1, 3, 1);
    assert_non_null(t);
    assert_non_null(s);
    tgc_storage *st = base->storage;
    assert_int_equal(atomic_load(&st->refs), 3);
    tgc_tensor_free(base);
    assert_int_equal(atomic_load(&st->refs), 2);
    float out[6];
    assert_int_equal(tgc_copy_to_host(t, out, sizeof out), TGC_OK);
    const float want[] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(out, want, sizeof want);
    tgc_tensor_free(t);
    assert_int_equal(tgc_copy_to_host(s, out, 4 * sizeof(float)), TGC_OK);
    assert_true(out[0] == 1 && out[1] == 2 && out[2] == 4 && out[3] == 5);
    /* writes through the last view still work */
    assert_int_equal(tgc_copy_(s, tgc_zeros((int64_t[]){2, 2}, 2, TGC_F32, tgc_cpu())), TGC_OK);
    assert_true(tgc_item_f64(s) == 0.0);
    assert_int_equal(tgc_scope_pop(), TGC_OK);

    /* the base's scope is popped while a kept view lives on */
    tgc_scope_push();
    tgc_tensor *b2 = tgc_from_data(v, sizeof v, shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *row = tgc_slice(b2, 0, 1, 2, 1);
    assert_int_equal(tgc_scope_keep(row), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(atomic_load(&row->storage->refs), 1);
    assert_int_equal(tgc_copy_to_host(row, out, 3 * sizeof(float)), TGC_OK);
    assert_true(out[0] == 3 && out[1] == 4 && out[2] == 5);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* A view of a module parameter outlives the module. */
static void test_view_of_param_outlives_module(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_tensor *p = tgc_module_param(m, "w", ones(5));
    assert_non_null(p);
    /* grad mode off: with it on, v's autograd record would also hold the parameter (and so
     * its storage) until v is freed */
    tgc_no_grad_push();
    tgc_tensor *v = view_of(p);
    tgc_no_grad_pop();
    assert_int_equal(atomic_load(&v->storage->refs), 2);
    tgc_module_free(m);
    assert_int_equal(atomic_load(&v->storage->refs), 1);
    assert_true(tgc_item_f64(v) == 1.0);
}

static void test_shutdown(void **state)
{
    (void)state;
    tgc_tensor *base = tgc_ones((int64_t[]){4}, 1, TGC_F32, tgc_cpu());
    tgc_scope_push();
    tgc_scope_push();
    tgc_scope_push();
    /* a probe outside any scope keeps the storage readable after shutdown */
    tgc_storage *st = base->storage;
    tgc_storage_ref(st);
    view_of(base);
    view_of(base);
    assert_int_equal(atomic_load(&st->refs), 4);
    tgc_shutdown(); /* pops the three scopes and frees the root scope (base included) */
    assert_int_equal(atomic_load(&st->refs), 1);
    tgc_storage_unref(st);
    /* back at the root scope */
    check_error(tgc_scope_pop(), TGC_ERR_INVALID_ARG, "no scope to pop");
    tgc_clear_error();
    /* safe to call again, and the library works afterwards */
    tgc_shutdown();
    tgc_shutdown();
    tgc_tensor *t = ones(3);
    assert_true(tgc_item_f64(t) == 1.0);
    tgc_scope_push();
    assert_non_null(ones(2));
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

/* ---- threads: scopes are per thread ---- */

typedef struct thread_arg {
    tgc_tensor *base;
    int refs_inside;
    tgc_status pop_root;
    int ok;
} thread_arg;

static void *scoped_worker(void *p)
{
    thread_arg *a = p;
    /* this thread's root scope is its own: popping it fails here too */
    a->pop_root = tgc_scope_pop();
    tgc_scope_push();
    tgc_tensor *v = tgc_slice(a->base, 0, 0, 2, 1);
    a->ok = v != NULL && tgc_item_f64(v) == 1.0;
    a->refs_inside = atomic_load(&a->base->storage->refs);
    a->ok = a->ok && tgc_scope_pop() == TGC_OK;
    return NULL;
}

static void test_scopes_are_per_thread(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    tgc_scope_push(); /* the main thread's scope must not receive the worker's tensors */
    thread_arg a = {base, 0, TGC_OK, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, scoped_worker, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(a.ok);
    assert_int_equal(a.pop_root, TGC_ERR_INVALID_ARG);
    assert_int_equal(a.refs_inside, 2);
    assert_int_equal(storage_refs(base), 1);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(storage_refs(base), 1);
    /* the worker's error is its own */
    assert_int_equal(tgc_last_status(), TGC_OK);
}

static void *root_worker(void *p)
{
    thread_arg *a = p;
    /* created in the thread's root scope and never freed explicitly */
    tgc_tensor *v = tgc_slice(a->base, 0, 0, 2, 1);
    a->ok = v != NULL;
    a->refs_inside = atomic_load(&a->base->storage->refs);
    return NULL;
}

/* tensor.h: "A thread always has a root scope, freed at thread exit or by tgc_shutdown()". */
static void test_thread_root_scope_freed_at_exit(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    thread_arg a = {base, 0, TGC_OK, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, root_worker, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(a.ok);
    assert_int_equal(a.refs_inside, 2);
    assert_int_equal(storage_refs(base), 1);
}

static void *unbalanced_worker(void *p)
{
    thread_arg *a = p;
    /* scopes left open at thread exit are freed with the root scope */
    tgc_slice(a->base, 0, 0, 2, 1);
    tgc_scope_push();
    tgc_slice(a->base, 0, 0, 2, 1);
    tgc_scope_push();
    tgc_tensor *v = tgc_slice(a->base, 0, 1, 3, 1);
    a->ok = v != NULL;
    a->refs_inside = atomic_load(&a->base->storage->refs);
    return NULL;
}

static void test_thread_open_scopes_freed_at_exit(void **state)
{
    (void)state;
    tgc_tensor *base = ones(4);
    for (int round = 0; round < 3; round++) {
        thread_arg a = {base, 0, TGC_OK, 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, unbalanced_worker, &a), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_true(a.ok);
        assert_int_equal(a.refs_inside, 4);
        assert_int_equal(storage_refs(base), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pop_frees_scope_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_scopes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_survives_pop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_moves_one_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_in_root_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_early_then_pop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_null_is_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pop_root_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_keeps_storage_after_base_freed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_of_param_outlives_module, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scopes_are_per_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_root_scope_freed_at_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_open_scopes_freed_at_exit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
