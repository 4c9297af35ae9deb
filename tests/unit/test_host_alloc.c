/* tgc_set_host_allocator: the host program's allocator supplies the bytes of every host
 * tensor, eager kernel and compiled function; it can be set only while no host block is
 * alive (every block comes back once everything is freed); misaligned memory is refused as
 * out of memory. The cases run in order in one
 * process, the first ones before any op runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tgc/tgc.h"

/* A counting allocator that remembers each block's size, so free can check it. */
#define MAX_BLOCKS 4096

typedef struct host_heap {
    pthread_mutex_t lock;
    void *ptr[MAX_BLOCKS];
    size_t size[MAX_BLOCKS];
    int n_live;
    long allocs, frees, bad_frees, bad_requests;
} host_heap;

static host_heap heap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *heap_alloc(size_t nbytes, size_t alignment, void *user)
{
    host_heap *h = user;
    void *p = aligned_alloc(alignment, nbytes);
    pthread_mutex_lock(&h->lock);
    h->bad_requests += alignment != 64 || nbytes == 0 || nbytes % 64 != 0;
    if (p && h->n_live < MAX_BLOCKS) {
        h->ptr[h->n_live] = p;
        h->size[h->n_live++] = nbytes;
        h->allocs++;
    } else {
        free(p);
        p = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    return p;
}

static void heap_free(void *ptr, size_t nbytes, void *user)
{
    host_heap *h = user;
    pthread_mutex_lock(&h->lock);
    int i = 0;
    while (i < h->n_live && h->ptr[i] != ptr)
        i++;
    if (i == h->n_live || h->size[i] != nbytes) {
        h->bad_frees++;
    } else {
        h->ptr[i] = h->ptr[h->n_live - 1];
        h->size[i] = h->size[h->n_live - 1];
        h->n_live--;
        h->frees++;
    }
    pthread_mutex_unlock(&h->lock);
    free(ptr);
}

static int live_blocks(void)
{
    pthread_mutex_lock(&heap.lock);
    int n = heap.n_live;
    pthread_mutex_unlock(&heap.lock);
    return n;
}

/* Memory 64-byte aligned plus 8: unusable for the kernels. */
static void *misaligned_alloc(size_t nbytes, size_t alignment, void *user)
{
    (void)alignment, (void)user;
    char *p = aligned_alloc(64, nbytes + 64);
    return p ? p + 8 : NULL;
}

static void misaligned_free(void *ptr, size_t nbytes, void *user)
{
    (void)nbytes;
    long *freed = user;
    ++*freed;
    free((char *)ptr - 8);
}

static tgc_status scale_add(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add(tgc_mul_scalar(in[0], 2.0), in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void half_given_allocator_is_invalid_arg(void **state)
{
    (void)state;
    assert_int_equal(tgc_set_host_allocator(heap_alloc, NULL, &heap), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_set_host_allocator: alloc is set but free is NULL; pass both, or "
                        "both NULL for the library's own allocator");
    assert_int_equal(tgc_set_host_allocator(NULL, heap_free, &heap), TGC_ERR_INVALID_ARG);
}

static void misaligned_memory_is_out_of_memory_and_handed_back(void **state)
{
    (void)state;
    long freed = 0;
    assert_int_equal(tgc_set_host_allocator(misaligned_alloc, misaligned_free, &freed), TGC_OK);
    int64_t shape[1] = {16};
    tgc_clear_error();
    assert_null(tgc_empty(shape, 1, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_last_status(), TGC_ERR_OOM);
    assert_int_equal(freed, 1);
    assert_int_equal(tgc_set_host_allocator(NULL, NULL, NULL), TGC_OK);
}

static void tensors_come_from_the_host_allocator(void **state)
{
    (void)state;
    assert_int_equal(tgc_set_host_allocator(heap_alloc, heap_free, &heap), TGC_OK);
    tgc_scope_push();
    int64_t shape[2] = {3, 5};
    tgc_tensor *t = tgc_zeros(shape, 2, TGC_F32, tgc_cpu());
    assert_non_null(t);
    assert_int_equal(live_blocks(), 1);
    assert_int_equal(heap.size[0], 64); /* 60 bytes, rounded up to the alignment */
    assert_int_equal(((uintptr_t)heap.ptr[0]) % 64, 0);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(live_blocks(), 0);
    /* nothing alive: the allocator may be changed back (and set again) */
    assert_int_equal(tgc_set_host_allocator(NULL, NULL, NULL), TGC_OK);
    assert_int_equal(tgc_set_host_allocator(heap_alloc, heap_free, &heap), TGC_OK);
}

static void ops_and_compiled_calls_use_it_and_it_stays_while_blocks_live(void **state)
{
    (void)state;
    long allocs_before = heap.allocs;
    tgc_scope_push();
    int64_t shape[2] = {64, 64};
    tgc_tensor *x = tgc_rand(shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *e = tgc_add(tgc_mul_scalar(x, 2.0), x); /* eagerly */
    assert_non_null(e);
    tgc_config c = tgc_config_default();
    tgc_fn *f = tgc_compile(scale_add, "hosted", &c);
    tgc_tensor *y;
    for (int i = 0; i < 3; i++)
        assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    float a[64 * 64], b[64 * 64];
    assert_int_equal(tgc_copy_to_host(e, a, sizeof a), TGC_OK);
    assert_int_equal(tgc_copy_to_host(y, b, sizeof b), TGC_OK);
    for (int i = 0; i < 64 * 64; i++)
        assert_float_equal(a[i], b[i], 1e-6);
    assert_true(heap.allocs >= allocs_before + 3); /* x, e, y at least */
    /* blocks are alive (the tensors): the allocator cannot change under them */
    assert_int_equal(tgc_set_host_allocator(NULL, NULL, NULL), TGC_ERR_INVALID_ARG);
    if (!strstr(tgc_last_error(), "tgc_set_host_allocator: ") ||
        !strstr(tgc_last_error(), "host buffers ("))
        fail_msg("unexpected message: %s", tgc_last_error());
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    tgc_fn_free(f);
    assert_int_equal(heap.bad_frees, 0);
    assert_int_equal(heap.bad_requests, 0);
    /* everything freed: every block came back, and the allocator may change again */
    assert_int_equal(live_blocks(), 0);
    assert_int_equal(heap.frees, heap.allocs);
    assert_int_equal(tgc_set_host_allocator(NULL, NULL, NULL), TGC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half_given_allocator_is_invalid_arg),
        cmocka_unit_test(misaligned_memory_is_out_of_memory_and_handed_back),
        cmocka_unit_test(tensors_come_from_the_host_allocator),
        cmocka_unit_test(ops_and_compiled_calls_use_it_and_it_stays_while_blocks_live),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
