/* The allocator interface (runtime/alloc.h): the host allocator's block cache and
 * statistics, registration, storage dispatch by device, and every copy between devices.
 *
 * A fake device stands in for CUDA: its blocks are addresses inside a PROT_NONE mapping, so
 * any code that reads device memory as if it were host memory crashes the test, and its
 * copy function (which finds the shadow host buffer behind an address) is the only way in
 * or out. It counts the copies of each direction, so the tests see which path a copy took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include "backend/interp/interp.h"
#include "runtime/alloc.h"
#include "runtime/storage.h"
#include "support/error.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/compile.h"
#include "tgc/cuda.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* ---- the fake device ---- */

#define FAKE_SPAN   ((size_t)1 << 28)
#define FAKE_BLOCKS 4096
#define FAKE_COUNT  2 /* cuda:0 and cuda:1 */

typedef struct fake_block {
    char *addr;   /* device address, inside the PROT_NONE span */
    char *shadow; /* the host memory behind it */
    size_t cap;
    int index;
    int live;
} fake_block;

typedef struct fake_dev {
    char *span;
    size_t used;
    fake_block blocks[FAKE_BLOCKS];
    int n_blocks;
    size_t in_use[FAKE_COUNT], peak[FAKE_COUNT];
    int h2d, d2h, d2d, empties;
    int fail_alloc, fail_copy;
} fake_dev;

static fake_dev g_fake;

static fake_block *fake_find(const void *p, size_t n, int index)
{
    const char *c = p;
    for (int i = 0; i < g_fake.n_blocks; i++) {
        fake_block *b = &g_fake.blocks[i];
        if (b->live && c >= b->addr && c + n <= b->addr + b->cap)
            return b->index == index ? b : NULL;
    }
    return NULL;
}

static int fake_count(void *ctx)
{
    (void)ctx;
    return FAKE_COUNT;
}

static tgc_block fake_alloc(void *ctx, int index, size_t nbytes)
{
    (void)ctx;
    size_t cap = (nbytes + 63) & ~(size_t)63;
    if (!cap)
        cap = 64;
    if (g_fake.fail_alloc || g_fake.n_blocks == FAKE_BLOCKS || g_fake.used + cap > FAKE_SPAN)
        return (tgc_block){NULL, 0};
    fake_block *b = &g_fake.blocks[g_fake.n_blocks++];
    *b = (fake_block){g_fake.span + g_fake.used, malloc(cap), cap, index, 1};
    g_fake.used += cap; /* addresses are never reused: a stale one is caught */
    g_fake.in_use[index] += cap;
    if (g_fake.in_use[index] > g_fake.peak[index])
        g_fake.peak[index] = g_fake.in_use[index];
    return (tgc_block){b->addr, cap};
}

static void fake_free(void *ctx, int index, tgc_block blk)
{
    (void)ctx;
    fake_block *b = fake_find(blk.ptr, blk.cap, index);
    assert_non_null(b); /* freed by the allocator and index that made it */
    assert_true(b->addr == blk.ptr && b->cap == blk.cap);
    free(b->shadow);
    b->live = 0;
    g_fake.in_use[index] -= blk.cap;
}

/* The host address of n bytes at p on dev: p itself on the host, its shadow on the fake
 * device; NULL when p is not memory of dev. */
static char *fake_resolve(const void *p, size_t n, tgc_device dev)
{
    if (dev.type == TGC_DEVICE_CPU)
        return (char *)p;
    fake_block *b = fake_find(p, n, dev.index);
    return b ? b->shadow + ((const char *)p - b->addr) : NULL;
}

static tgc_status fake_copy(void *ctx, void *dst, tgc_device ddev, const void *src, tgc_device sdev,
                            size_t nbytes)
{
    (void)ctx;
    assert_true(ddev.type == TGC_DEVICE_CUDA || sdev.type == TGC_DEVICE_CUDA);
    if (g_fake.fail_copy)
        return tgc_set_error(TGC_ERR_DEVICE, "fake: link down");
    char *d = fake_resolve(dst, nbytes, ddev), *s = fake_resolve(src, nbytes, sdev);
    if (!d || !s)
        return tgc_set_error(TGC_ERR_INTERNAL, "fake: address is not memory of that device");
    memcpy(d, s, nbytes);
    if (ddev.type == TGC_DEVICE_CPU)
        g_fake.d2h++;
    else if (sdev.type == TGC_DEVICE_CPU)
        g_fake.h2d++;
    else
        g_fake.d2d++;
    return TGC_OK;
}

static tgc_mem_stats fake_stats(void *ctx, int index)
{
    (void)ctx;
    return (tgc_mem_stats){g_fake.in_use[index], 0, g_fake.peak[index]};
}

static void fake_empty_cache(void *ctx)
{
    (void)ctx;
    g_fake.empties++;
}

static const tgc_allocator fake_allocator = {
    .name = "cuda",
    .device_count = fake_count,
    .alloc = fake_alloc,
    .free = fake_free,
    .copy = fake_copy,
    .stats = fake_stats,
    .empty_cache = fake_empty_cache,
};

static int fake_setup(void **state)
{
    char *span = g_fake.span;
    memset(&g_fake, 0, sizeof g_fake);
    g_fake.span = span;
    assert_int_equal(tgc_allocator_register(TGC_DEVICE_CUDA, &fake_allocator), TGC_OK);
    return scoped_setup(state);
}

static int fake_teardown(void **state)
{
    int r = scoped_teardown(state);
    /* every device block went back through the fake allocator */
    for (int i = 0; i < FAKE_COUNT; i++)
        if (g_fake.in_use[i] != 0)
            r = -1;
    for (int i = 0; i < g_fake.n_blocks; i++)
        free(g_fake.blocks[i].live ? g_fake.blocks[i].shadow : NULL);
    tgc_allocator_unregister(TGC_DEVICE_CUDA);
    return r;
}

static int group_setup(void **state)
{
    (void)state;
    void *p = mmap(NULL, FAKE_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    g_fake.span = p;
    return 0;
}

static int group_teardown(void **state)
{
    munmap(g_fake.span, FAKE_SPAN);
    return group_shutdown(state);
}

static int on_fake(const tgc_tensor *t)
{
    const char *p = t->storage->data;
    return p >= g_fake.span && p < g_fake.span + FAKE_SPAN;
}

/* ---- helpers ---- */

static tgc_tensor *iota(const int64_t *shape, int nd, tgc_dtype dt, tgc_device dev)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return tgc_reshape(tgc_arange(0, (double)n, 1, dt, dev), shape, nd);
}

static void read_f32(const tgc_tensor *t, float *out, size_t n)
{
    assert_int_equal(tgc_numel(t), (int64_t)n);
    assert_int_equal(tgc_copy_to_host(t, out, n * sizeof(float)), TGC_OK);
}

static void check_null(const tgc_tensor *t, tgc_status want, const char *text)
{
    assert_null(t);
    check_error(tgc_last_status(), want, text);
    tgc_clear_error();
}

/* ---- the host allocator ---- */

static void test_host_cache_reuse(void **state)
{
    (void)state;
    const tgc_allocator *h = tgc_allocator_of(TGC_DEVICE_CPU);
    assert_ptr_equal(h, &tgc_host_allocator);
    assert_string_equal(h->name, "cpu");
    h->empty_cache(h->ctx);
    assert_int_equal(h->stats(h->ctx, 0).cached, 0);
    size_t in_use0 = h->stats(h->ctx, 0).in_use;

    const size_t big = (size_t)4 << 20;
    tgc_storage *s = tgc_storage_new(big, tgc_cpu());
    assert_non_null(s);
    assert_ptr_equal(s->alloc, h);
    assert_int_equal(s->cap, big);
    assert_int_equal((uintptr_t)s->data % 64, 0);
    assert_int_equal(h->stats(h->ctx, 0).in_use, in_use0 + big);
    void *p = s->data;
    tgc_storage_unref(s);
    tgc_mem_stats m = h->stats(h->ctx, 0);
    assert_int_equal(m.in_use, in_use0);
    assert_int_equal(m.cached, big); /* blocks of 1 MiB and more are kept */
    assert_true(m.peak >= in_use0 + big);

    /* 3 MiB fits the 4 MiB block without wasting more than half: the same block comes back */
    s = tgc_storage_new((size_t)3 << 20, tgc_cpu());
    assert_ptr_equal(s->data, p);
    assert_int_equal(s->cap, big);
    assert_int_equal(s->nbytes, (size_t)3 << 20);
    assert_int_equal(h->stats(h->ctx, 0).cached, 0);
    tgc_storage_unref(s);

    /* 1 MiB would waste three quarters of it: a fresh block; the cached one stays */
    s = tgc_storage_new((size_t)1 << 20, tgc_cpu());
    assert_ptr_not_equal(s->data, p);
    assert_int_equal(s->cap, (size_t)1 << 20);
    assert_int_equal(h->stats(h->ctx, 0).cached, big);
    tgc_storage_unref(s);
    assert_int_equal(h->stats(h->ctx, 0).cached, big + ((size_t)1 << 20));

    /* small blocks are not cached; size 0 still gets an aligned 64-byte block */
    s = tgc_storage_new(0, tgc_cpu());
    assert_int_equal(s->cap, 64);
    tgc_storage_unref(s);
    s = tgc_storage_new(1000, tgc_cpu());
    assert_int_equal(s->cap, 1024);
    tgc_storage_unref(s);
    assert_int_equal(h->stats(h->ctx, 0).cached, big + ((size_t)1 << 20));

    h->reset_peak(h->ctx, 0);
    m = h->stats(h->ctx, 0);
    assert_int_equal(m.peak, m.in_use);
    h->empty_cache(h->ctx);
    assert_int_equal(h->stats(h->ctx, 0).cached, 0);
}

static void test_register_errors(void **state)
{
    (void)state;
    assert_int_equal(tgc_allocator_register((tgc_device_type)7, &fake_allocator),
                     TGC_ERR_INVALID_ARG);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_allocator_register: unknown device type 7");
    tgc_allocator no_copy = fake_allocator;
    no_copy.copy = NULL;
    check_error(tgc_allocator_register(TGC_DEVICE_CUDA, &no_copy), TGC_ERR_INVALID_ARG,
                "the cuda allocator lacks a required member");
    check_error(tgc_allocator_register(TGC_DEVICE_CUDA, NULL), TGC_ERR_INVALID_ARG,
                "lacks a required member");
    assert_null(tgc_allocator_of(TGC_DEVICE_CUDA));
    assert_null(tgc_allocator_of((tgc_device_type)7));
    /* the host allocator comes back when a replacement is removed */
    assert_int_equal(tgc_allocator_register(TGC_DEVICE_CPU, &tgc_host_allocator), TGC_OK);
    tgc_allocator_unregister(TGC_DEVICE_CPU);
    assert_ptr_equal(tgc_allocator_of(TGC_DEVICE_CPU), &tgc_host_allocator);
    char b[48];
    assert_string_equal(tgc_format_device(tgc_cuda(3), b, sizeof b), "cuda:3");
    assert_string_equal(tgc_format_device(tgc_cpu(), b, sizeof b), "cpu");
    assert_string_equal(tgc_format_device((tgc_device){(tgc_device_type)9, 1}, b, sizeof b),
                        "device type 9 index 1");
}

/* ---- devices ---- */

static void test_device_check_follows_registration(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    /* asked while the fake is registered, so a real driver does not replace it */
    int gpu = tgc_cuda_is_available();
    tgc_allocator_unregister(TGC_DEVICE_CUDA);
    if (!gpu) /* the first CUDA tensor tries the driver, and says why it is missing */
        check_null(tgc_empty(shape, 2, TGC_F32, tgc_cuda(0)), TGC_ERR_DEVICE,
                   "tgc_empty: device cuda:0 is not available: ");
    tgc_clear_error();
    assert_int_equal(tgc_allocator_register(TGC_DEVICE_CUDA, &fake_allocator), TGC_OK);
    tgc_tensor *t = tgc_empty(shape, 2, TGC_F32, tgc_cuda(1));
    assert_non_null(t);
    check_null(tgc_empty(shape, 2, TGC_F32, tgc_cuda(2)), TGC_ERR_DEVICE,
               "tgc_empty: device cuda:2 is not available: 2 cuda devices are present");
    check_null(tgc_zeros(shape, 2, TGC_F32, tgc_cuda(-1)), TGC_ERR_DEVICE,
               "tgc_zeros: device cuda:-1 is not available");
    check_null(tgc_empty(shape, 2, TGC_F32, (tgc_device){(tgc_device_type)5, 0}), TGC_ERR_DEVICE,
               "tgc_empty: unknown device type 5");
}

static void test_storage_dispatch(void **state)
{
    (void)state;
    const int64_t shape[] = {4, 5};
    tgc_tensor *t = tgc_empty(shape, 2, TGC_F64, tgc_cuda(1));
    assert_non_null(t);
    assert_ptr_equal(t->storage->alloc, &fake_allocator);
    assert_int_equal(t->storage->device.type, TGC_DEVICE_CUDA);
    assert_int_equal(t->storage->device.index, 1);
    assert_int_equal(tgc_device_of(t).index, 1);
    assert_true(on_fake(t));
    assert_false(tgc_on_host(t));
    assert_int_equal(g_fake.in_use[1], 192); /* 160 bytes in a block of 64-byte steps */
    assert_int_equal(t->storage->cap, 192);
    assert_int_equal(t->storage->nbytes, 160);
    assert_int_equal(g_fake.in_use[0], 0);
    tgc_tensor *h = tgc_empty(shape, 2, TGC_F64, tgc_cpu());
    assert_true(tgc_on_host(h));
    assert_false(on_fake(h));
    tgc_tensor_free(t);
    assert_int_equal(g_fake.in_use[1], 0); /* freed through the fake allocator */
    assert_int_equal(g_fake.peak[1], 192);

    g_fake.fail_alloc = 1;
    check_null(tgc_empty(shape, 2, TGC_F32, tgc_cuda(0)), TGC_ERR_OOM,
               "tgc_empty: out of memory for a f32 tensor of shape [4, 5]");
    g_fake.fail_alloc = 0;
}

/* ---- copies ---- */

static void test_to_and_back(void **state)
{
    (void)state;
    const int64_t shape[] = {3, 4};
    tgc_tensor *h = iota(shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *ht = tgc_transpose(h, 0, 1); /* a strided host source: [4, 3] */
    tgc_tensor *d = tgc_to(ht, tgc_cuda(0));
    assert_non_null(d);
    assert_true(on_fake(d));
    assert_int_equal(tgc_device_of(d).type, TGC_DEVICE_CUDA);
    assert_true(tgc_is_contiguous(d));
    assert_int_equal(tgc_size(d, 0), 4);
    assert_int_equal(g_fake.h2d, 1); /* one contiguous copy in */
    float got[12];
    read_f32(d, got, 12);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            assert_true(got[i * 3 + j] == (float)(j * 4 + i));
    assert_int_equal(g_fake.d2h, 1);

    tgc_tensor *back = tgc_to(d, tgc_cpu());
    assert_non_null(back);
    assert_true(tgc_on_host(back));
    float bv[12];
    read_f32(back, bv, 12);
    assert_memory_equal(bv, got, sizeof got);
    assert_int_equal(g_fake.d2h, 2);

    /* to the device it is on already: no copy through the allocator */
    int copies = g_fake.h2d + g_fake.d2h + g_fake.d2d;
    assert_non_null(tgc_to(d, tgc_cuda(0)));
    assert_int_equal(g_fake.h2d + g_fake.d2h + g_fake.d2d, copies);

    /* between two devices of the type: one device-to-device copy */
    tgc_tensor *d1 = tgc_to(d, tgc_cuda(1));
    assert_int_equal(tgc_device_of(d1).index, 1);
    assert_int_equal(g_fake.d2d, 1);
    assert_int_equal(d1->storage->device.index, 1);
    read_f32(d1, bv, 12);
    assert_memory_equal(bv, got, sizeof got);
}

static void test_strided_device_sources(void **state)
{
    (void)state;
    const int64_t shape[] = {4, 6};
    tgc_tensor *d = iota(shape, 2, TGC_F32, tgc_cuda(0));
    assert_true(on_fake(d));
    /* views are geometry: they stay on the device */
    tgc_tensor *v = tgc_slice(tgc_transpose(d, 0, 1), 0, 1, 6, 2); /* rows 1, 3, 5 of d^T */
    assert_non_null(v);
    assert_ptr_equal(v->storage, d->storage);
    assert_int_equal(v->offset, 1);
    float got[12];
    read_f32(v, got, 12); /* staged: the span the elements occupy, then strided on the host */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            assert_true(got[i * 4 + j] == (float)(j * 6 + 2 * i + 1));
    tgc_tensor *h = tgc_to(v, tgc_cpu());
    float hv[12];
    read_f32(h, hv, 12);
    assert_memory_equal(hv, got, sizeof got);
    tgc_tensor *dense = tgc_to(v, tgc_cuda(0)); /* made dense on its own device */
    assert_non_null(dense);
    assert_true(on_fake(dense));
    assert_true(tgc_is_contiguous(dense));
    assert_ptr_not_equal(dense->storage, d->storage);
    read_f32(dense, hv, 12);
    assert_memory_equal(hv, got, sizeof got);
    assert_true(tgc_item_f64(v) == 1.0);

    /* a converting copy into a strided device destination keeps the elements around it */
    tgc_tensor *dst = tgc_zeros(shape, 2, TGC_F64, tgc_cuda(0));
    tgc_tensor *dcol = tgc_slice(dst, 1, 2, 3, 1); /* column 2: [4, 1] */
    const int64_t cs[] = {4, 1};
    tgc_tensor *src = iota(cs, 2, TGC_F32, tgc_cpu());
    assert_int_equal(tgc_copy_(dcol, src), TGC_OK);
    double all[24];
    assert_int_equal(tgc_copy_to_host(dst, all, sizeof all), TGC_OK);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            assert_true(all[i * 6 + j] == (j == 2 ? (double)i : 0.0));

    /* device to device, overlapping storage: rows shift down by one */
    const int64_t rs[] = {4};
    tgc_tensor *row = iota(rs, 1, TGC_F32, tgc_cuda(0));
    assert_int_equal(tgc_copy_(tgc_slice(row, 0, 1, 4, 1), tgc_slice(row, 0, 0, 3, 1)), TGC_OK);
    float rv[4];
    read_f32(row, rv, 4);
    const float want[] = {0, 0, 1, 2};
    assert_memory_equal(rv, want, sizeof want);
}

static void test_items_and_creation_on_device(void **state)
{
    (void)state;
    const int64_t one[] = {1}, shape[] = {2, 3};
    const int64_t big = ((int64_t)1 << 53) + 1; /* not a double */
    tgc_tensor *i = tgc_from_data(&big, sizeof big, one, 1, TGC_I64, tgc_cuda(0));
    assert_non_null(i);
    assert_true(on_fake(i));
    assert_int_equal(tgc_item_i64(i), big);
    int32_t small = -7;
    tgc_tensor *i32 = tgc_from_data(&small, 4, one, 1, TGC_I32, tgc_cuda(1));
    assert_int_equal(tgc_item_i64(i32), -7);
    assert_true(tgc_item_f64(i32) == -7.0);

    const float data[] = {1.5f, -2, 3, 4, 5, 6};
    tgc_tensor *f = tgc_from_data(data, sizeof data, shape, 2, TGC_F32, tgc_cuda(0));
    float got[6];
    read_f32(f, got, 6);
    assert_memory_equal(got, data, sizeof data);
    assert_true(tgc_item_f64(f) == 1.5);

    read_f32(tgc_full(shape, 2, 2.5, TGC_F32, tgc_cuda(0)), got, 6);
    for (int k = 0; k < 6; k++)
        assert_true(got[k] == 2.5f);
    read_f32(tgc_zeros(shape, 2, TGC_F32, tgc_cuda(0)), got, 6);
    for (int k = 0; k < 6; k++)
        assert_true(got[k] == 0.0f);
    tgc_tensor *a = tgc_arange(1, 4, 0.5, TGC_F32, tgc_cuda(1));
    assert_true(on_fake(a));
    read_f32(a, got, 6);
    for (int k = 0; k < 6; k++)
        assert_true(got[k] == 1.0f + 0.5f * (float)k);

    /* random draws on a device are the host's bits */
    float hv[6];
    tgc_manual_seed(1234);
    read_f32(tgc_rand(shape, 2, TGC_F32, tgc_cpu()), hv, 6);
    tgc_manual_seed(1234);
    tgc_tensor *r = tgc_rand(shape, 2, TGC_F32, tgc_cuda(0));
    assert_true(on_fake(r));
    read_f32(r, got, 6);
    assert_memory_equal(got, hv, sizeof hv);
    tgc_manual_seed(99);
    read_f32(tgc_randn(shape, 2, TGC_F32, tgc_cpu()), hv, 6);
    tgc_manual_seed(99);
    read_f32(tgc_randn(shape, 2, TGC_F32, tgc_cuda(0)), got, 6);
    assert_memory_equal(got, hv, sizeof hv);
}

static tgc_status add_one(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status add_w(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)n_in, (void)n_out;
    out[0] = tgc_add(in[0], tgc_module_get(self, "w"));
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status w_plus_one(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)in, (void)n_in, (void)n_out;
    out[0] = tgc_add_scalar(tgc_module_get(self, "w"), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_host_only_code_refuses_devices(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    tgc_tensor *d = tgc_ones(shape, 2, TGC_F32, tgc_cuda(0));
    tgc_tensor *d1 = tgc_ones(shape, 2, TGC_F32, tgc_cuda(1));
    tgc_tensor *h = tgc_ones(shape, 2, TGC_F32, tgc_cpu());
    check_null(tgc_add(h, d), TGC_ERR_DEVICE,
               "tgc_add: inputs 0 and 1 are on different devices (cpu and cuda:0)");
    check_null(tgc_mul(d, d1), TGC_ERR_DEVICE, "(cuda:0 and cuda:1)");
    if (tgc_cuda_is_available()) {
        /* the rest needs a device type without a backend; on a GPU machine the real CUDA
         * backend would take these fake device pointers */
        print_message("test_host_only_code_refuses_devices: the CUDA backend is present; its "
                      "no-backend half is skipped\n");
        tgc_clear_error();
        return;
    }
    /* no kernels for the device: the interp kernels read host memory and say so */
    check_null(tgc_add(d, d), TGC_ERR_DEVICE,
               "tgc_add: input 0 is on cuda:0, but the interp backend runs on host memory only");
    check_null(tgc_sum(d, NULL, 0, 0), TGC_ERR_DEVICE, "tgc_sum: input 0 is on cuda:0");
    tgc_tensor *in[] = {h, d};
    int64_t os[] = {2, 3};
    check_null(tgc_interp_run(TGC_OP_ADD, in, 2, &(tgc_attrs){0}, TGC_F32, os, 2), TGC_ERR_DEVICE,
               "tgc_add: input 1 is on cuda:0");
    /* a compiled function refuses device inputs when no backend compiles for the device (this
     * fake device has an allocator but no CUDA backend behind it) */
    tgc_fn *f = tgc_compile(add_one, "add_one", NULL);
    tgc_tensor *y = NULL;
    check_error(tgc_call(f, NULL, &d, 1, &y, 1), TGC_ERR_DEVICE,
                "tgc_call: the inputs are on cuda:0, but ");
    assert_null(y);
    tgc_fn_free(f);
    /* ... and module tensors on a device when the trace meets them */
    tgc_module *m = tgc_module_create("net", NULL);
    assert_non_null(tgc_module_param(m, "w", h));
    assert_int_equal(tgc_module_to(m, tgc_cuda(0)), TGC_OK);
    f = tgc_compile(w_plus_one, "w_plus_one", NULL);
    check_error(tgc_call(f, m, NULL, 0, &y, 1), TGC_ERR_DEVICE,
                "tgc_call: 'w_plus_one' has no tensor inputs and its module is on cuda:0, but ");
    assert_null(y);
    tgc_fn_free(f);
    f = tgc_compile(add_w, "add_w", NULL); /* a host input with it: the op refuses the mix */
    check_error(tgc_call(f, m, &h, 1, &y, 1), TGC_ERR_DEVICE,
                "tgc_add: inputs 0 and 1 are on different devices (cpu and cuda:0)");
    assert_null(y);
    tgc_fn_free(f);
    tgc_module_free(m);
    /* the inputs are untouched */
    float got[6];
    read_f32(d, got, 6);
    assert_true(got[5] == 1.0f);
}

static void test_copy_errors(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    tgc_tensor *h = tgc_ones(shape, 2, TGC_F32, tgc_cpu());
    tgc_tensor *d = tgc_to(h, tgc_cuda(0));
    float got[6];
    g_fake.fail_copy = 1;
    check_null(tgc_to(h, tgc_cuda(1)), TGC_ERR_DEVICE,
               "tgc_to: copying 24 bytes from cpu to cuda:1 failed: fake: link down");
    assert_int_equal(tgc_copy_to_host(d, got, sizeof got), TGC_ERR_DEVICE);
    check_error(tgc_last_status(), TGC_ERR_DEVICE,
                "tgc_copy_to_host: copying 24 bytes from cuda:0 to cpu failed: fake: link down");
    assert_true(isnan(tgc_item_f64(d)));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_item_f64: copying 4 bytes from cuda:0");
    check_null(tgc_zeros(shape, 2, TGC_F32, tgc_cuda(0)), TGC_ERR_DEVICE,
               "tgc_zeros: copying 24 bytes from cpu to cuda:0 failed");
    check_error(tgc_copy_(d, h), TGC_ERR_DEVICE, "tgc_copy_: copying 24 bytes");
    g_fake.fail_copy = 0;
    assert_int_equal(g_fake.in_use[1], 0); /* the failed tgc_to freed its result */
    check_error(tgc_copy_to_host(d, got, 20), TGC_ERR_INVALID_ARG,
                "nbytes is 20 but the tensor holds 24");
    const int64_t other[] = {3, 3};
    check_error(tgc_copy_(tgc_zeros(other, 2, TGC_F32, tgc_cuda(0)), d), TGC_ERR_SHAPE,
                "tgc_copy_: shapes differ");
}

static void test_module_to(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    tgc_module *m = tgc_module_create("net", NULL);
    tgc_module *c = tgc_module_create("fc", NULL);
    assert_int_equal(tgc_module_child(m, "fc", c), TGC_OK);
    tgc_tensor *w =
        tgc_module_param(c, "w", tgc_transpose(iota(shape, 2, TGC_F32, tgc_cpu()), 0, 1));
    tgc_tensor *b = tgc_module_buffer(m, "steps", tgc_full(shape, 2, 7, TGC_I64, tgc_cpu()));
    uint64_t sig = tgc_module_signature(m);
    assert_int_equal(tgc_module_to(m, tgc_cuda(1)), TGC_OK);
    assert_ptr_equal(tgc_module_get(c, "w"), w); /* the same tensors, moved */
    assert_true(on_fake(w) && on_fake(b));
    assert_int_equal(tgc_device_of(w).index, 1);
    assert_int_not_equal(tgc_module_signature(m), sig);
    float got[6];
    read_f32(w, got, 6);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            assert_true(got[i * 2 + j] == (float)(j * 3 + i));
    assert_int_equal(tgc_item_i64(b), 7);

    /* a failed copy leaves every tensor where it was */
    g_fake.fail_copy = 1;
    check_error(tgc_module_to(m, tgc_cuda(0)), TGC_ERR_DEVICE, "tgc_module_to: copying");
    g_fake.fail_copy = 0;
    assert_int_equal(tgc_device_of(w).index, 1);
    assert_int_equal(tgc_device_of(b).index, 1);

    assert_int_equal(tgc_module_to(m, tgc_cpu()), TGC_OK);
    assert_true(tgc_on_host(w) && tgc_on_host(b));
    assert_int_equal(tgc_module_signature(m), sig);
    float back[6];
    read_f32(w, back, 6);
    assert_memory_equal(back, got, sizeof got);
    check_error(tgc_module_to(m, tgc_cuda(5)), TGC_ERR_DEVICE, "tgc_module_to: device cuda:5");
    tgc_module_free(m);
}

/* A host tensor larger than the machine's RAM and swap is TGC_ERR_OOM at once, also where the
 * kernel overcommits (it would promise the bytes and kill the process once they are written). */
static void test_host_block_beyond_ram_is_oom(void **state)
{
    (void)state;
    struct sysinfo si;
    assert_int_equal(sysinfo(&si), 0);
    unsigned long long bytes = ((unsigned long long)si.totalram + si.totalswap) * si.mem_unit;
    int64_t shape[2] = {2, (int64_t)(bytes / 8) + 4096}; /* f32: 8 bytes per column */
    tgc_clear_error();
    assert_null(tgc_empty(shape, 2, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_last_status(), TGC_ERR_OOM);
    tgc_clear_error();
    /* and a zeros, which would write every page */
    assert_null(tgc_zeros(shape, 2, TGC_F32, tgc_cpu()));
    assert_int_equal(tgc_last_status(), TGC_ERR_OOM);
    tgc_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_host_cache_reuse, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_host_block_beyond_ram_is_oom, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_register_errors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_device_check_follows_registration, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_storage_dispatch, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_to_and_back, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_strided_device_sources, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_items_and_creation_on_device, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_host_only_code_refuses_devices, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_copy_errors, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_module_to, fake_setup, fake_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
