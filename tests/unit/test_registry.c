/* The backend registry (src/backend/registry.h): every cfg.backend kind resolves to the
 * backend whose registration serves it, with the same status and message as the build's
 * records give; names of kinds and device types come from the registrations (and agree with
 * TGC_BACKEND's parser); the eager backend of a device type is the available compiled one of
 * highest priority, and asking leaves the thread's error alone; tgc_backend_for_call's
 * messages; registration errors; and a backend registered at run time for a device type of
 * its own is found for that type, names its devices in messages and loads through its hooks
 * on the first tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/registry.h"
#include "runtime/alloc.h"
#include "support/error.h"
#include "tgc/compile.h"
#include "tgc/config.h"
#include "tgc/cuda.h"
#include "tgc/ops.h"

static tgc_config with_backend(tgc_backend_kind k)
{
    tgc_config c = tgc_config_default();
    c.backend = k;
    return c;
}

static void expect_msg(const char *want)
{
    if (strcmp(tgc_last_error(), want) != 0)
        fail_msg("message \"%s\", not \"%s\"", tgc_last_error(), want);
}

#ifndef TGC_HAVE_LLVM
static tgc_status identity(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = in[0];
    return TGC_OK;
}
#endif

/* The build's record serving kind, from the one list. */
static const tgc_backend_reg *builtin_for(tgc_backend_kind kind)
{
    for (int i = 0; tgc_backend_builtins[i]; i++)
        for (int k = 0; k < tgc_backend_builtins[i]->n_kinds; k++)
            if (tgc_backend_builtins[i]->kinds[k].kind == kind)
                return tgc_backend_builtins[i];
    return NULL;
}

/* ---- the build's backends ---- */

static void test_each_kind_resolves_to_its_registration(void **state)
{
    (void)state;
    const tgc_backend_kind kinds[] = {TGC_BACKEND_LLVM, TGC_BACKEND_CUDA, TGC_BACKEND_EAGER,
                                      TGC_BACKEND_INTERP};
    for (int i = 0; i < N_OF(kinds); i++) {
        const tgc_backend_reg *r = builtin_for(kinds[i]);
        assert_non_null(r);
        /* what the record's get answers, the registry answers, status and message included */
        tgc_clear_error();
        const tgc_backend *want = r->get();
        tgc_status want_st = tgc_last_status();
        char want_msg[1024];
        snprintf(want_msg, sizeof want_msg, "%s", tgc_last_error());
        for (int round = 0; round < 2; round++) { /* the second answer is the remembered one */
            tgc_clear_error();
            tgc_config c = with_backend(kinds[i]);
            const tgc_backend *b = tgc_backend_for(&c);
            assert_ptr_equal(b, want);
            assert_int_equal(tgc_last_status(), want_st);
            assert_string_equal(tgc_last_error(), want_msg);
            if (b) {
                assert_string_equal(b->name, r->name);
                assert_ptr_equal(b->reg, r);
                assert_int_equal(b->device, r->device);
            }
        }
    }
    tgc_config c = with_backend(TGC_BACKEND_INTERP);
    assert_ptr_equal(tgc_backend_for(&c), tgc_backend_interp());
    c = with_backend(TGC_BACKEND_EAGER);
    assert_ptr_equal(tgc_backend_for(&c), tgc_backend_interp());
}

static void test_missing_backends_say_what_they_said(void **state)
{
    (void)state;
    tgc_config c = with_backend(TGC_BACKEND_LLVM);
    tgc_clear_error();
    const tgc_backend *llvm = tgc_backend_for(&c);
#ifdef TGC_HAVE_LLVM
    assert_non_null(llvm);
    assert_string_equal(llvm->name, "llvm");
#else
    assert_null(llvm);
    assert_int_equal(tgc_last_status(), TGC_ERR_UNSUPPORTED);
    expect_msg("this build has no LLVM backend (configured with TGC_WITH_LLVM=OFF); use "
               "TGC_BACKEND_AUTO or TGC_BACKEND_INTERP");
    /* tgc_compile puts its name first, as before */
    assert_null(tgc_compile(identity, "f", &c));
    assert_int_equal(tgc_last_status(), TGC_ERR_UNSUPPORTED);
    expect_msg("tgc_compile: this build has no LLVM backend (configured with TGC_WITH_LLVM=OFF); "
               "use TGC_BACKEND_AUTO or TGC_BACKEND_INTERP");
#endif
    c = with_backend(TGC_BACKEND_CUDA);
    tgc_clear_error();
    const tgc_backend *cuda = tgc_backend_for(&c);
    if (!cuda) {
        assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
#ifdef TGC_HAVE_CUDA
        check_error(tgc_last_status(), TGC_ERR_DEVICE, "the CUDA backend is not available (");
#else
        expect_msg("the CUDA backend is not available: this build has no CUDA backend "
                   "(configured with TGC_WITH_CUDA=OFF or without the CUDA toolkit headers)");
#endif
    } else {
        assert_string_equal(cuda->name, "cuda");
        assert_int_equal(cuda->device, TGC_DEVICE_CUDA);
    }
    /* a kind nothing serves */
    c = with_backend((tgc_backend_kind)5);
    tgc_clear_error();
    assert_null(tgc_backend_for(&c));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_compile: unknown backend 5");
}

static void test_auto_takes_the_best_host_backend(void **state)
{
    (void)state;
    tgc_set_error(TGC_ERR_SHAPE, "an earlier error");
    tgc_config c = with_backend(TGC_BACKEND_AUTO);
    const tgc_backend *b = tgc_backend_for(&c);
    assert_non_null(b);
#ifdef TGC_HAVE_LLVM
    assert_string_equal(b->name, "llvm");
#else
    assert_ptr_equal(b, tgc_backend_interp());
#endif
    /* asking changed nothing */
    check_error(tgc_last_status(), TGC_ERR_SHAPE, "an earlier error");
}

static void test_kind_names_match_tgc_backend(void **state)
{
    (void)state;
    const char *names[] = {"auto", "llvm", "cuda", "eager", "interp"};
    for (int k = 0; k < N_OF(names); k++) {
        assert_string_equal(tgc_backend_kind_name((tgc_backend_kind)k), names[k]);
        /* the environment's spelling of each kind is its registered name */
        setenv("TGC_BACKEND", tgc_backend_kind_name((tgc_backend_kind)k), 1);
        tgc_config c = tgc_config_default();
        assert_int_equal(c.backend, k);
    }
    unsetenv("TGC_BACKEND");
    assert_string_equal(tgc_backend_kind_name((tgc_backend_kind)9), "?");
    /* each backend's vtable name is its registration's */
    assert_string_equal(tgc_backend_interp()->name, tgc_interp_backend_reg.name);
    assert_ptr_equal(tgc_backend_interp()->reg, &tgc_interp_backend_reg);
}

static void test_device_types_from_registrations(void **state)
{
    (void)state;
    /* CUDA's names come from its registration, in every build */
    assert_string_equal(tgc_device_type_name(TGC_DEVICE_CUDA), "cuda");
    assert_string_equal(tgc_device_type_name(TGC_DEVICE_CPU), "cpu");
    const tgc_device_ops *o = tgc_device_ops_of(TGC_DEVICE_CUDA);
    assert_non_null(o);
    assert_string_equal(o->label, "CUDA");
#ifdef TGC_HAVE_CUDA
    assert_non_null(o->load);
    assert_non_null(o->streams);
#else
    assert_null(o->load);
    assert_string_equal(o->missing, "this build has no CUDA backend (configured with "
                                    "TGC_WITH_CUDA=OFF or without the CUDA toolkit headers)");
#endif
    assert_null(tgc_device_ops_of(TGC_DEVICE_CPU));
    assert_null(tgc_device_ops_of((tgc_device_type)7));
    assert_true(tgc_backend_device_known(TGC_DEVICE_CPU));
    assert_true(tgc_backend_device_known(TGC_DEVICE_CUDA));
    assert_false(tgc_backend_device_known((tgc_device_type)7));
    char b[128];
    assert_string_equal(tgc_backend_device_ctors(b, sizeof b), "tgc_cpu() or tgc_cuda(i)");
}

static void test_eager_backend_of_each_device(void **state)
{
    (void)state;
    tgc_set_error(TGC_ERR_DTYPE, "kept");
    const tgc_backend *cpu = tgc_backend_for_device(TGC_DEVICE_CPU);
#ifdef TGC_HAVE_LLVM
    assert_non_null(cpu);
    assert_string_equal(cpu->name, "llvm");
    assert_null(cpu->graph); /* a compiled backend: never interp */
#else
    assert_null(cpu);
#endif
    const tgc_backend *gpu = tgc_backend_for_device(TGC_DEVICE_CUDA);
    if (!tgc_cuda_is_available())
        assert_null(gpu);
    else
        assert_string_equal(gpu->name, "cuda");
    assert_null(tgc_backend_for_device((tgc_device_type)7));
    check_error(tgc_last_status(), TGC_ERR_DTYPE, "kept");
}

static void test_call_messages(void **state)
{
    (void)state;
    tgc_config c = with_backend(TGC_BACKEND_CUDA);
    assert_null(tgc_backend_for_call(&c, tgc_cpu(), TGC_DEVICE_OF_INPUTS, "f"));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    expect_msg("tgc_call: cfg.backend is CUDA but the inputs are on cpu; move them (and the "
               "module) with tgc_to / tgc_module_to, or use TGC_BACKEND_AUTO");
    assert_null(tgc_backend_for_call(&c, tgc_cpu(), TGC_DEVICE_OF_MODULE, "f"));
    expect_msg("tgc_call: cfg.backend is CUDA but 'f' has no tensor inputs and its module is on "
               "cpu; move the module with tgc_module_to, or use TGC_BACKEND_AUTO");
    c = with_backend(TGC_BACKEND_LLVM);
    assert_null(tgc_backend_for_call(&c, tgc_cuda(0), TGC_DEVICE_OF_INPUTS, "f"));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    expect_msg("tgc_call: the inputs are on cuda:0, but cfg.backend llvm runs on the host; use "
               "TGC_BACKEND_AUTO or TGC_BACKEND_CUDA, or move the inputs with tgc_to");
    c = with_backend(TGC_BACKEND_EAGER);
    assert_null(tgc_backend_for_call(&c, tgc_cuda(1), TGC_DEVICE_OF_MODULE, "f"));
    expect_msg("tgc_call: 'f' has no tensor inputs and its module is on cuda:1, but cfg.backend "
               "eager runs on the host; use TGC_BACKEND_AUTO or TGC_BACKEND_CUDA, or move the "
               "module with tgc_module_to");
    /* the host's backend on the host */
    c = with_backend(TGC_BACKEND_INTERP);
    assert_ptr_equal(tgc_backend_for_call(&c, tgc_cpu(), TGC_DEVICE_OF_INPUTS, "f"),
                     tgc_backend_interp());
    /* AUTO and CUDA on a GPU: the CUDA backend, or why not */
    const tgc_backend_kind gpu_kinds[] = {TGC_BACKEND_AUTO, TGC_BACKEND_CUDA};
    for (int i = 0; i < N_OF(gpu_kinds); i++) {
        c = with_backend(gpu_kinds[i]);
        tgc_clear_error();
        const tgc_backend *b = tgc_backend_for_call(&c, tgc_cuda(0), TGC_DEVICE_OF_INPUTS, "f");
        if (tgc_cuda_is_available()) {
            assert_non_null(b);
            assert_string_equal(b->name, "cuda");
            continue;
        }
        assert_null(b);
        assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
        const char *want = "tgc_call: the inputs are on cuda:0, but the CUDA backend is not "
                           "available";
        if (strncmp(tgc_last_error(), want, strlen(want)) != 0)
            fail_msg("message \"%s\" does not start with \"%s\"", tgc_last_error(), want);
    }
}

/* ---- registration ---- */

static const tgc_backend *never(void)
{
    tgc_set_error(TGC_ERR_DEVICE, "the test backend is never available");
    return NULL;
}

static void test_registration_errors(void **state)
{
    (void)state;
    check_error(tgc_backend_register(NULL), TGC_ERR_INVALID_ARG, "tgc_backend_register: ");
    tgc_backend_reg r = {.name = NULL, .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG, "lacks a name or get");
    r = (tgc_backend_reg){.name = "other", .get = NULL};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG, "lacks a name or get");
    r = (tgc_backend_reg){.name = "other", .n_kinds = 3, .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG, "has 3 kinds");
    r = (tgc_backend_reg){
        .name = "other", .kinds = {{TGC_BACKEND_LLVM, NULL}}, .n_kinds = 1, .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG,
                "tgc_backend_register: 'other' serves cfg.backend other, which 'llvm' serves "
                "already");
    r = (tgc_backend_reg){
        .name = "other", .kinds = {{TGC_BACKEND_AUTO, NULL}}, .n_kinds = 1, .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG, "'other' serves backend kind 0");
    r = (tgc_backend_reg){.name = "interp", .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG,
                "a backend named 'interp' is registered already");
    static const tgc_device_ops host_ops = {.name = "host2", .label = "Host2", .missing = "no"};
    r = (tgc_backend_reg){
        .name = "other", .device = TGC_DEVICE_CPU, .device_ops = &host_ops, .get = never};
    check_error(tgc_backend_register(&r), TGC_ERR_INVALID_ARG,
                "tgc_backend_register: tgc_device_ops_register: device type 0 is the host's");
    /* nothing of the failed ones stuck */
    assert_string_equal(tgc_backend_kind_name(TGC_BACKEND_LLVM), "llvm");
    assert_false(tgc_backend_device_known((tgc_device_type)3));
    /* a build's own record again: a no-op */
    tgc_clear_error();
    assert_int_equal(tgc_backend_register(&tgc_interp_backend_reg), TGC_OK);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* A device type of its own: "fake", one device, loaded on first use; no allocator. */
#define FAKE_TYPE ((tgc_device_type)3)
static int g_loads;

static tgc_status fake_load(void)
{
    g_loads++;
    return TGC_OK;
}
static int fake_count(void)
{
    return 1;
}
static tgc_status fake_sync(int index)
{
    (void)index;
    return TGC_OK;
}
static tgc_status fake_set_stream(int index, void *stream)
{
    (void)index, (void)stream;
    return TGC_OK;
}
static void *fake_current_stream(int index)
{
    (void)index;
    return NULL;
}
static const char *fake_name(int index)
{
    (void)index;
    return "Fake Device";
}
static tgc_status fake_mem_info(int index, size_t *f, size_t *t)
{
    (void)index;
    *f = *t = 0;
    return TGC_OK;
}

static const tgc_device_ops fake_ops = {
    .name = "fake",
    .label = "Fake",
    .load = fake_load,
    .count = fake_count,
    .synchronize = fake_sync,
    .set_stream = fake_set_stream,
    .current_stream = fake_current_stream,
    .device_name = fake_name,
    .mem_info = fake_mem_info,
};

static tgc_backend fake_backend; /* compiled (graph NULL); only its identity is used */
static const tgc_backend *fake_get(void)
{
    return &fake_backend;
}
static void *fake_stream_of(const tgc_config *cfg)
{
    return cfg->log_user; /* a field the generic code passes on without reading */
}

static const tgc_backend_reg fake_reg = {
    .name = "fake",
    .device = FAKE_TYPE,
    .device_ops = &fake_ops,
    .device_what = "the fake device",
    .device_ctor = "fake(i)",
    .priority = 1,
    .get = fake_get,
    .stream_of = fake_stream_of,
};
/* A second one of the type, preferred but never available. */
static const tgc_backend_reg fake_better_reg = {
    .name = "fake_better",
    .device = FAKE_TYPE,
    .priority = 5,
    .get = never,
};

static void test_run_time_registration(void **state)
{
    (void)state;
    assert_null(tgc_backend_for_device(FAKE_TYPE));
    fake_backend = (tgc_backend){.name = "fake", .device = FAKE_TYPE, .reg = &fake_reg};
    assert_int_equal(tgc_backend_register(&fake_reg), TGC_OK);
    assert_int_equal(tgc_backend_register(&fake_better_reg), TGC_OK);
    /* found for its device type, the unavailable better one passed over quietly */
    tgc_set_error(TGC_ERR_IO, "kept");
    assert_ptr_equal(tgc_backend_for_device(FAKE_TYPE), &fake_backend);
    check_error(tgc_last_status(), TGC_ERR_IO, "kept");
    assert_ptr_equal(tgc_backend_for_device(FAKE_TYPE), &fake_backend);
    /* the host's answers are unchanged */
    tgc_config c = with_backend(TGC_BACKEND_INTERP);
    assert_ptr_equal(tgc_backend_for(&c), tgc_backend_interp());
    /* its device type is known and named by its registration */
    assert_true(tgc_backend_device_known(FAKE_TYPE));
    assert_string_equal(tgc_device_type_name(FAKE_TYPE), "fake");
    char d[48];
    assert_string_equal(tgc_format_device((tgc_device){FAKE_TYPE, 2}, d, sizeof d), "fake:2");
    char b[128];
    assert_string_equal(tgc_backend_device_ctors(b, sizeof b),
                        "tgc_cpu() or tgc_cuda(i) or fake(i)");
    /* calls: AUTO runs there; a host backend says what to use instead */
    c = with_backend(TGC_BACKEND_AUTO);
    assert_ptr_equal(
        tgc_backend_for_call(&c, (tgc_device){FAKE_TYPE, 0}, TGC_DEVICE_OF_INPUTS, "f"),
        &fake_backend);
    c = with_backend(TGC_BACKEND_INTERP);
    assert_null(tgc_backend_for_call(&c, (tgc_device){FAKE_TYPE, 0}, TGC_DEVICE_OF_CONFIG, "f"));
    expect_msg("tgc_call: 'f' has no tensor inputs or module tensors, so it runs on cfg.device "
               "(fake:0), but cfg.backend interp runs on the host; use TGC_BACKEND_AUTO, or "
               "leave cfg.device at tgc_cpu()");
    /* the config it reads is its own business */
    c = tgc_config_default();
    int marker;
    c.log_user = &marker;
    assert_ptr_equal(tgc_backend_config_stream(&fake_backend, &c), &marker);
    assert_null(tgc_backend_config_stream(tgc_backend_interp(), &c));
    /* the first tensor on the type loads it through its hooks; no allocator: said so */
    const int64_t shape[] = {2};
    assert_null(tgc_empty(shape, 1, TGC_F32, (tgc_device){FAKE_TYPE, 0}));
    check_error(tgc_last_status(), TGC_ERR_INTERNAL,
                "tgc_empty: device fake:0: Fake loaded but no allocator is registered");
    assert_true(g_loads >= 1);
}

/* A type whose backend the build lacks: its names and why, no hooks. */
static void test_missing_device_type(void **state)
{
    (void)state;
    static const tgc_device_ops gone_ops = {
        .name = "gone", .label = "Gone", .missing = "this build has no gone backend"};
    static const tgc_backend_reg gone_reg = {
        .name = "gone", .device = (tgc_device_type)2, .device_ops = &gone_ops, .get = never};
    assert_int_equal(tgc_backend_register(&gone_reg), TGC_OK);
    const int64_t shape[] = {2};
    assert_null(tgc_zeros(shape, 1, TGC_F32, (tgc_device){(tgc_device_type)2, 1}));
    check_error(tgc_last_status(), TGC_ERR_DEVICE,
                "tgc_zeros: device gone:1 is not available: this build has no gone backend");
    tgc_config c = with_backend(TGC_BACKEND_AUTO);
    tgc_clear_error();
    assert_null(
        tgc_backend_for_call(&c, (tgc_device){(tgc_device_type)2, 0}, TGC_DEVICE_OF_INPUTS, "f"));
    expect_msg("tgc_call: the inputs are on gone:0, but the test backend is never available");
    assert_null(tgc_backend_for_device((tgc_device_type)2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_kind_resolves_to_its_registration, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_missing_backends_say_what_they_said, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_auto_takes_the_best_host_backend, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_kind_names_match_tgc_backend, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_device_types_from_registrations, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_eager_backend_of_each_device, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_call_messages, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_registration_errors, scoped_setup, scoped_teardown),
        /* these two register for good: after the ones above */
        cmocka_unit_test_setup_teardown(test_run_time_registration, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_missing_device_type, scoped_setup, scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
