/* Programs built against an older (smaller) or a newer (larger) header: the library reads
 * and writes only the bytes of the caller's structs, the fields a smaller struct lacks take
 * their defaults, and unknown nonzero bytes of a larger one are refused (include/tgc/config.h,
 * "Structs that grow"). Each smaller struct is followed by guard bytes the library must
 * neither change nor read (they hold values it would refuse); the same structs also live in
 * heap blocks of their exact size, where the sanitizer build sees any access past them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"
#include "tgc/tgc.h"

#define GUARD 0xA5

/* tgc_config as include/tgc/config.h declared it before matmul_precision, cuda_stream and
 * device were added. */
typedef struct old_config {
    size_t struct_size;
    tgc_backend_kind backend;
    tgc_mode mode;
    int cache_size_limit;
    int accumulated_cache_size_limit;
    tgc_on_cache_limit on_cache_limit;
    tgc_dynamic dynamic;
    int guard_module_identity;
    int fullgraph;
    const char *cache_dir;
    const char *dump_dir;
    int num_threads;
    unsigned log;
    tgc_log_fn log_fn;
    void *log_user;
} old_config;
static_assert(sizeof(old_config) == offsetof(tgc_config, matmul_precision),
              "old_config is tgc_config's prefix before matmul_precision");

static void expect_guard(const unsigned char *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != GUARD)
            fail_msg("guard byte %zu after the caller's struct was written (0x%02x)", i, g[i]);
}

static void expect_message(tgc_status want, const char *text)
{
    assert_int_equal(tgc_last_status(), want);
    if (strcmp(tgc_last_error(), text) != 0)
        fail_msg("message \"%s\"\n  expected \"%s\"", tgc_last_error(), text);
}

static tgc_status twice(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_mul_scalar(in[0], 2.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void call_twice(tgc_fn *f)
{
    int64_t s[1] = {3};
    tgc_tensor *x = tgc_full(s, 1, 21.0, TGC_F32, tgc_cpu()), *y = NULL;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    float got[3];
    assert_int_equal(tgc_copy_to_host(y, got, sizeof got), TGC_OK);
    assert_true(got[0] == 42.0f && got[2] == 42.0f);
}

static void test_config_default_fills_only_an_older_struct(void **state)
{
    (void)state;
    struct {
        old_config c;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    assert_int_equal(tgc_config_default_sized((tgc_config *)&buf.c, sizeof buf.c), TGC_OK);
    expect_guard(buf.guard, sizeof buf.guard);
    assert_int_equal(buf.c.struct_size, sizeof(old_config));
    assert_int_equal(buf.c.backend, TGC_BACKEND_AUTO);
    assert_int_equal(buf.c.cache_size_limit, 8);
    assert_int_equal(buf.c.accumulated_cache_size_limit, 256);
    assert_null(buf.c.log_fn);
    assert_null(buf.c.log_user);

    old_config *heap = malloc(sizeof *heap); /* exactly the old size */
    assert_non_null(heap);
    assert_int_equal(tgc_config_default_sized((tgc_config *)heap, sizeof *heap), TGC_OK);
    assert_int_equal(heap->struct_size, sizeof *heap);
    free(heap);

    /* too small to hold backend, or NULL: nothing written */
    unsigned char tiny[16];
    memset(tiny, GUARD, sizeof tiny);
    assert_int_equal(tgc_config_default_sized((tgc_config *)(void *)tiny, 8), TGC_ERR_INVALID_ARG);
    expect_guard(tiny, sizeof tiny);
    char want[256];
    snprintf(want, sizeof want,
             "tgc_config_default_sized: cfg is 8 bytes, less than the %zu of the smallest "
             "accepted struct",
             offsetof(tgc_config, backend) + sizeof(tgc_backend_kind));
    expect_message(TGC_ERR_INVALID_ARG, want);
    assert_int_equal(tgc_config_default_sized(NULL, sizeof(tgc_config)), TGC_ERR_INVALID_ARG);
    expect_message(TGC_ERR_INVALID_ARG, "tgc_config_default_sized: cfg is NULL");
}

/* An older config compiles; the fields it lacks take tgc_config_default()'s values,
 * environment included, never the bytes after it. */
static void test_compile_reads_only_struct_size(void **state)
{
    (void)state;
    setenv("TGC_MATMUL_PRECISION", "high", 1);
    struct {
        old_config c;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf); /* as matmul_precision: an unknown value, refused */
    assert_int_equal(tgc_config_default_sized((tgc_config *)&buf.c, sizeof buf.c), TGC_OK);
    buf.c.cache_size_limit = 3;
    tgc_fn *f = tgc_compile(twice, "old", (const tgc_config *)&buf.c);
    if (!f)
        fail_msg("tgc_compile refused an older config: %s", tgc_last_error());
    expect_guard(buf.guard, sizeof buf.guard);
    assert_int_equal(f->cfg.struct_size, sizeof(tgc_config));
    assert_int_equal(f->cfg.cache_size_limit, 3);
    assert_int_equal(f->cfg.matmul_precision, TGC_PRECISION_HIGH);
    assert_null(f->cfg.cuda_stream);
    assert_int_equal(f->cfg.device.type, TGC_DEVICE_CPU);
    assert_int_equal(f->cfg.device.index, 0);
    call_twice(f);
    tgc_fn_free(f);
    unsetenv("TGC_MATMUL_PRECISION");

    old_config *heap = malloc(sizeof *heap);
    assert_non_null(heap);
    assert_int_equal(tgc_config_default_sized((tgc_config *)heap, sizeof *heap), TGC_OK);
    f = tgc_compile(twice, "old_heap", (const tgc_config *)heap);
    assert_non_null(f);
    assert_int_equal(f->cfg.matmul_precision, TGC_PRECISION_HIGHEST);
    call_twice(f);
    tgc_fn_free(f);
    free(heap);
}

/* A newer header's config: its fields left zero are accepted, a set one is refused. */
static void test_compile_newer_config(void **state)
{
    (void)state;
    struct newer_config {
        tgc_config c;
        int64_t a_later_field;
        double another;
    } n;
    memset(&n, GUARD, sizeof n);
    assert_int_equal(tgc_config_default_sized(&n.c, sizeof n), TGC_OK);
    assert_int_equal(n.c.struct_size, sizeof n);
    assert_int_equal(n.a_later_field, 0); /* what this library does not know: zeros */
    assert_true(n.another == 0.0);
    tgc_fn *f = tgc_compile(twice, "newer", &n.c);
    assert_non_null(f);
    call_twice(f);
    tgc_fn_free(f);

    n.another = 1.0;
    size_t first = offsetof(struct newer_config, another);
    while (((const unsigned char *)&n)[first] == 0)
        first++;
    tgc_clear_error();
    assert_null(tgc_compile(twice, "newer", &n.c));
    char want[320];
    snprintf(want, sizeof want,
             "tgc_compile: cfg->struct_size is %zu bytes, more than the %zu this libtgc knows, "
             "and byte %zu is not zero (a field of a newer header); leave such fields zero or "
             "use the libtgc of that header",
             sizeof n, sizeof(tgc_config), first);
    expect_message(TGC_ERR_UNSUPPORTED, want);
}

static void test_compile_refuses_a_config_without_size(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    c.struct_size = 0;
    tgc_clear_error();
    assert_null(tgc_compile(twice, "zero", &c));
    char want[256];
    snprintf(want, sizeof want,
             "tgc_compile: cfg->struct_size is 0 bytes, less than the %zu of the smallest "
             "accepted struct; start from tgc_config_default()",
             offsetof(tgc_config, backend) + sizeof(tgc_backend_kind));
    expect_message(TGC_ERR_INVALID_ARG, want);
}

/* tgc_stats before backend was added; and a newer one with a field after it. */
static void test_fn_stats_sizes(void **state)
{
    (void)state;
    tgc_fn *f = tgc_compile(twice, "stats", NULL);
    assert_non_null(f);
    call_twice(f);
    enum { OLD = offsetof(tgc_stats, backend) };
    struct {
        union {
            unsigned char bytes[OLD];
            uint64_t align;
        } s;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    assert_int_equal(tgc_fn_stats_sized(f, (tgc_stats *)(void *)&buf.s, OLD), TGC_OK);
    expect_guard(buf.guard, sizeof buf.guard);
    tgc_stats old;
    memset(&old, 0, sizeof old);
    memcpy(&old, &buf.s, OLD);
    assert_int_equal(old.calls, 1);
    assert_int_equal(old.compiles, 1);
    assert_int_equal(old.variants, 1);

    void *heap = malloc(OLD);
    assert_non_null(heap);
    assert_int_equal(tgc_fn_stats_sized(f, heap, OLD), TGC_OK);
    memcpy(&old, heap, OLD);
    assert_int_equal(old.calls, 1);
    free(heap);

    struct {
        tgc_stats s;
        uint64_t a_later_counter;
    } n;
    memset(&n, GUARD, sizeof n);
    assert_int_equal(tgc_fn_stats_sized(f, &n.s, sizeof n), TGC_OK);
    assert_int_equal(n.s.calls, 1);
    assert_int_equal(n.a_later_counter, 0);

    unsigned char tiny[8];
    memset(tiny, GUARD, sizeof tiny);
    tgc_clear_error();
    assert_int_equal(tgc_fn_stats_sized(f, (tgc_stats *)(void *)tiny, 4), TGC_ERR_INVALID_ARG);
    expect_guard(tiny, sizeof tiny);
    expect_message(TGC_ERR_INVALID_ARG, "tgc_fn_stats: out_size is 4 bytes, less than the 8 of "
                                        "the smallest accepted struct");
    tgc_fn_free(f);
}

/* Written as far as the caller's struct goes, whether or not a GPU answers. */
static void test_cuda_memory_stats_size(void **state)
{
    (void)state;
    enum { OLD = offsetof(tgc_cuda_memstats, device_free) };
    struct {
        size_t s[OLD / sizeof(size_t)];
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    tgc_status st = tgc_cuda_memory_stats_sized(0, (tgc_cuda_memstats *)(void *)buf.s, OLD);
    expect_guard(buf.guard, sizeof buf.guard);
    if (st != TGC_OK) /* no GPU here: the fields the caller has are zeros */
        for (size_t i = 0; i < OLD / sizeof(size_t); i++)
            assert_int_equal(buf.s[i], 0);
    void *heap = malloc(OLD);
    assert_non_null(heap);
    tgc_cuda_memory_stats_sized(0, heap, OLD);
    free(heap);
}

static void test_dist_opts_sizes(void **state)
{
    (void)state;
    enum { OLD = offsetof(tgc_dist_opts, timeout_s) };
    struct {
        union {
            unsigned char bytes[OLD];
            uint64_t align;
        } o;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    tgc_dist_opts *o = (tgc_dist_opts *)(void *)&buf.o;
    assert_int_equal(tgc_dist_opts_default_sized(o, OLD), TGC_OK);
    expect_guard(buf.guard, sizeof buf.guard);
    tgc_dist_opts seen;
    memset(&seen, 0, sizeof seen);
    memcpy(&seen, &buf.o, OLD);
    assert_int_equal(seen.struct_size, OLD);
    assert_int_equal(seen.rank, -1);
    assert_int_equal(seen.world_size, -1);
    /* read as far as struct_size: the rank check sees the caller's values */
    seen.rank = 2;
    seen.world_size = 2;
    memcpy(&buf.o, &seen, OLD);
    tgc_clear_error();
    assert_null(tgc_dist_init(o));
    expect_guard(buf.guard, sizeof buf.guard);
    expect_message(TGC_ERR_INVALID_ARG, "tgc_dist_init: rank 2 is outside a world of size 2");

    struct {
        tgc_dist_opts o;
        int a_later_field;
    } n;
    assert_int_equal(tgc_dist_opts_default_sized(&n.o, sizeof n), TGC_OK);
    n.a_later_field = 7;
    tgc_clear_error();
    assert_null(tgc_dist_init(&n.o));
    assert_int_equal(tgc_last_status(), TGC_ERR_UNSUPPORTED);
    assert_non_null(strstr(tgc_last_error(), "tgc_dist_init: opts->struct_size is"));
    n.o.struct_size = 8;
    tgc_clear_error();
    assert_null(tgc_dist_init(&n.o));
    char want[256];
    snprintf(want, sizeof want,
             "tgc_dist_init: opts->struct_size is 8 bytes, less than the %zu of the smallest "
             "accepted struct; start from tgc_dist_opts_default()",
             offsetof(tgc_dist_opts, rank) + sizeof(int));
    expect_message(TGC_ERR_INVALID_ARG, want);
}

/* conv2d and the pools with options from before their last field: the default, not the
 * guard bytes (an impossible groups, an exclude_padding that is neither 0 nor 1). */
static void test_conv_pool_opts_sizes(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 2, 3, 3}, ws[4] = {2, 2, 1, 1};
    tgc_tensor *x = tgc_ones(xs, 4, TGC_F32, tgc_cpu()), *w = tgc_ones(ws, 4, TGC_F32, tgc_cpu());
    struct {
        union {
            unsigned char bytes[offsetof(tgc_conv2d_opts, groups)];
            int align;
        } o;
        unsigned char guard[16];
    } cb;
    memset(&cb, GUARD, sizeof cb);
    memcpy(&cb.o, &(tgc_conv2d_opts){.stride = {2, 2}}, offsetof(tgc_conv2d_opts, groups));
    tgc_tensor *c = tgc_conv2d_sized(x, w, NULL, (const tgc_conv2d_opts *)(const void *)&cb.o,
                                     offsetof(tgc_conv2d_opts, groups));
    if (!c)
        fail_msg("tgc_conv2d_sized: %s", tgc_last_error());
    assert_int_equal(tgc_numel(c), 2 * 2 * 2); /* 2 channels of 2x2: stride 2, groups 1 */
    float cv[8];
    assert_int_equal(tgc_copy_to_host(c, cv, sizeof cv), TGC_OK);
    assert_true(cv[0] == 2.0f && cv[7] == 2.0f);

    int64_t ps[4] = {1, 1, 3, 3};
    tgc_tensor *img = tgc_ones(ps, 4, TGC_F32, tgc_cpu());
    struct {
        union {
            unsigned char bytes[offsetof(tgc_pool2d_opts, exclude_padding)];
            int align;
        } o;
        unsigned char guard[16];
    } pb;
    memset(&pb, GUARD, sizeof pb);
    memcpy(&pb.o, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}},
           offsetof(tgc_pool2d_opts, exclude_padding));
    tgc_tensor *p = tgc_avg_pool2d_sized(img, (const tgc_pool2d_opts *)(const void *)&pb.o,
                                         offsetof(tgc_pool2d_opts, exclude_padding));
    if (!p)
        fail_msg("tgc_avg_pool2d_sized: %s", tgc_last_error());
    float pv[9];
    assert_int_equal(tgc_copy_to_host(p, pv, sizeof pv), TGC_OK);
    assert_float_equal(pv[0], 4.0f / 9.0f, 1e-6); /* the padding counted: exclude_padding 0 */
    assert_float_equal(pv[4], 1.0f, 1e-6);

    struct {
        tgc_pool2d_opts o;
        int ceil_mode;
    } n;
    memset(&n, 0, sizeof n);
    n.o.kernel[0] = n.o.kernel[1] = 3;
    n.ceil_mode = 1;
    tgc_clear_error();
    assert_null(tgc_max_pool2d_sized(img, &n.o, sizeof n));
    char want[320];
    snprintf(want, sizeof want,
             "tgc_max_pool2d: opts_size is %zu bytes, more than the %zu this libtgc knows, and "
             "byte %zu is not zero (a field of a newer header); leave such fields zero or use "
             "the libtgc of that header",
             sizeof n, sizeof(tgc_pool2d_opts), sizeof(tgc_pool2d_opts));
    expect_message(TGC_ERR_UNSUPPORTED, want);
    n.ceil_mode = 0;
    assert_non_null(tgc_max_pool2d_sized(img, &n.o, sizeof n));
}

static tgc_module *one_weight(void)
{
    int64_t s[1] = {1};
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_module_param(m, "w", tgc_ones(s, 1, TGC_F32, tgc_cpu()));
    return m;
}

/* loss = w: one SGD step of lr 0.5 from w = 1 gives 0.5, or 1.5 had maximize been read from
 * the guard bytes. */
static void test_optimizer_opts_sizes(void **state)
{
    (void)state;
    tgc_module *m = one_weight();
    struct {
        union {
            unsigned char bytes[offsetof(tgc_sgd_opts, maximize)];
            double align;
        } o;
        unsigned char guard[16];
    } sb;
    memset(&sb, GUARD, sizeof sb);
    memcpy(&sb.o, &(tgc_sgd_opts){.lr = 0.5}, offsetof(tgc_sgd_opts, maximize));
    tgc_optim *o = tgc_sgd_sized(m, (const tgc_sgd_opts *)(const void *)&sb.o,
                                 offsetof(tgc_sgd_opts, maximize));
    if (!o)
        fail_msg("tgc_sgd_sized: %s", tgc_last_error());
    tgc_tensor *w = tgc_module_get(m, "w");
    assert_int_equal(tgc_backward(tgc_sum(w, NULL, 0, 0)), TGC_OK);
    assert_int_equal(tgc_optim_step(o), TGC_OK);
    assert_float_equal(tgc_item_f64(w), 0.5, 1e-7);
    tgc_optim_free(o);

    /* Adam with lr and betas only: eps is the default, not the guard bytes' double */
    struct {
        union {
            unsigned char bytes[offsetof(tgc_adam_opts, eps)];
            double align;
        } o;
        unsigned char guard[16];
    } ab;
    memset(&ab, GUARD, sizeof ab);
    memcpy(&ab.o, &(tgc_adam_opts){.lr = 1e-3}, offsetof(tgc_adam_opts, eps));
    o = tgc_adam_sized(m, (const tgc_adam_opts *)(const void *)&ab.o, offsetof(tgc_adam_opts, eps));
    if (!o)
        fail_msg("tgc_adam_sized: %s", tgc_last_error());
    tgc_optim_free(o);

    struct {
        tgc_sgd_opts o;
        double a_later_field;
    } n;
    memset(&n, 0, sizeof n);
    n.o.lr = 0.1;
    n.a_later_field = 2.0;
    tgc_clear_error();
    assert_null(tgc_sgd_sized(m, &n.o, sizeof n));
    assert_int_equal(tgc_last_status(), TGC_ERR_UNSUPPORTED);
    assert_non_null(strstr(tgc_last_error(), "tgc_sgd: opts_size is"));
    tgc_clear_error();
    assert_null(tgc_adam_sized(m, &(tgc_adam_opts){.lr = 0.1}, 4));
    char want[256];
    snprintf(want, sizeof want,
             "tgc_adam: opts_size is 4 bytes, less than the %zu of the smallest accepted struct",
             sizeof(double));
    expect_message(TGC_ERR_INVALID_ARG, want);
    tgc_module_free(m);

    /* data-parallel options are read before anything else */
    struct {
        tgc_ddp_opts o;
        int a_later_flag;
    } d;
    memset(&d, 0, sizeof d); /* padding included: a newer field's bytes must be zero */
    d.a_later_flag = 1;
    tgc_clear_error();
    assert_null(tgc_ddp_create_sized(NULL, NULL, &d.o, sizeof d));
    assert_int_equal(tgc_last_status(), TGC_ERR_UNSUPPORTED);
    assert_non_null(strstr(tgc_last_error(), "tgc_ddp_create: opts_size is"));
    d.a_later_flag = 0;
    tgc_clear_error();
    assert_null(tgc_ddp_create_sized(NULL, NULL, &d.o, sizeof d));
    expect_message(TGC_ERR_INVALID_ARG, "tgc_ddp_create: pg is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_default_fills_only_an_older_struct,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_compile_reads_only_struct_size, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_compile_newer_config, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_compile_refuses_a_config_without_size, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_fn_stats_sizes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_cuda_memory_stats_size, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_dist_opts_sizes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_conv_pool_opts_sizes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_optimizer_opts_sizes, scoped_setup, scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
