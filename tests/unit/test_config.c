/* tgc_config_default (defaults, then the TGC_* environment) and the configurations that
 * tgc_compile accepts or rejects, with their exact statuses and messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/jit.h"
#include "tgc/compile.h"
#include "tgc/cuda.h"
#include "tgc/config.h"
#include "tgc/module.h"
#include "tgc/ops.h"

static const char *const env_vars[] = {
    "TGC_LOG",      "TGC_BACKEND",  "TGC_CACHE_SIZE_LIMIT", "TGC_ACCUMULATED_CACHE_SIZE_LIMIT",
    "TGC_DYNAMIC",  "TGC_DUMP_DIR", "TGC_CACHE_DIR",        "TGC_NUM_THREADS",
    "TGC_AUTOTUNE",
};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
        unsetenv(env_vars[i]);
}

static int setup(void **state)
{
    (void)state;
    clear_env();
    tgc_clear_error();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clear_env();
    return 0;
}

static tgc_status model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self;
    (void)in;
    (void)n_in;
    (void)out;
    (void)n_out;
    return TGC_OK;
}

/* tgc_compile with cfg must fail with want and a message containing text. */
static void check_rejected(const tgc_config *cfg, tgc_status want, const char *text)
{
    tgc_clear_error();
    tgc_fn *f = tgc_compile(model, "m", cfg);
    if (f) {
        tgc_fn_free(f);
        fail_msg("tgc_compile accepted a config that should give %s (%s)", tgc_status_str(want),
                 text);
    }
    check_error(tgc_last_status(), want, text);
}

static void check_accepted(const tgc_config *cfg)
{
    tgc_clear_error();
    tgc_fn *f = tgc_compile(model, "m", cfg);
    if (!f)
        fail_msg("tgc_compile rejected a valid config: %s", tgc_last_error());
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.calls, 0);
    assert_int_equal(st.variants, 0);
    tgc_fn_free(f);
}

static void test_defaults(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    assert_int_equal(c.struct_size, sizeof(tgc_config));
    assert_int_equal(c.backend, TGC_BACKEND_AUTO);
    assert_int_equal(c.mode, TGC_MODE_DEFAULT);
    assert_int_equal(c.cache_size_limit, 8);
    assert_int_equal(c.accumulated_cache_size_limit, 256);
    assert_int_equal(c.on_cache_limit, TGC_ON_LIMIT_FALLBACK_EAGER);
    assert_int_equal(c.dynamic, TGC_DYNAMIC_AUTO);
    assert_int_equal(c.guard_module_identity, 0);
    assert_int_equal(c.fullgraph, 0);
    assert_null(c.cache_dir);
    assert_null(c.dump_dir);
    assert_int_equal(c.num_threads, 0);
    assert_int_equal(c.log, 0);
    assert_null(c.log_fn);
    assert_null(c.log_user);
    assert_int_equal(c.autotune, TGC_AUTOTUNE_OFF);
    /* the defaults compile */
    check_accepted(&c);
    check_accepted(NULL);
}

static void test_env_parsing(void **state)
{
    (void)state;
    setenv("TGC_LOG", "recompiles,guards", 1);
    setenv("TGC_CACHE_SIZE_LIMIT", "3", 1);
    setenv("TGC_ACCUMULATED_CACHE_SIZE_LIMIT", "40", 1);
    setenv("TGC_DYNAMIC", "never", 1);
    setenv("TGC_BACKEND", "interp", 1);
    setenv("TGC_NUM_THREADS", "4", 1);
    setenv("TGC_CACHE_DIR", "/tmp/tgc-cache", 1);
    setenv("TGC_DUMP_DIR", "/tmp/tgc-dump", 1);
    setenv("TGC_AUTOTUNE", "fast", 1);
    tgc_config c = tgc_config_default();
    assert_int_equal(c.autotune, TGC_AUTOTUNE_FAST);
    assert_int_equal(c.struct_size, sizeof(tgc_config));
    assert_int_equal(c.log, TGC_LOG_RECOMPILES | TGC_LOG_GUARDS);
    assert_int_equal(c.cache_size_limit, 3);
    assert_int_equal(c.accumulated_cache_size_limit, 40);
    assert_int_equal(c.dynamic, TGC_DYNAMIC_NEVER);
    assert_int_equal(c.backend, TGC_BACKEND_INTERP);
    assert_int_equal(c.num_threads, 4);
    assert_non_null(c.cache_dir);
    assert_string_equal(c.cache_dir, "/tmp/tgc-cache");
    assert_non_null(c.dump_dir);
    assert_string_equal(c.dump_dir, "/tmp/tgc-dump");
    /* untouched by the environment */
    assert_int_equal(c.mode, TGC_MODE_DEFAULT);
    assert_int_equal(c.on_cache_limit, TGC_ON_LIMIT_FALLBACK_EAGER);
    check_accepted(&c);

    /* unsetting brings the defaults back */
    clear_env();
    c = tgc_config_default();
    assert_int_equal(c.log, 0);
    assert_int_equal(c.cache_size_limit, 8);
    assert_int_equal(c.dynamic, TGC_DYNAMIC_AUTO);
    assert_int_equal(c.backend, TGC_BACKEND_AUTO);
    assert_null(c.cache_dir);
    assert_int_equal(c.autotune, TGC_AUTOTUNE_OFF);
}

static void test_env_log_channels(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        unsigned bits;
    } cases[] = {
        {"recompiles", TGC_LOG_RECOMPILES},
        {"guards", TGC_LOG_GUARDS},
        {"graph", TGC_LOG_GRAPH},
        {"dynamic", TGC_LOG_DYNAMIC},
        {"perf", TGC_LOG_PERF},
        {"kernels", TGC_LOG_KERNELS},
        {"all", TGC_LOG_ALL},
        {"recompiles,guards,graph,kernels,perf",
         TGC_LOG_RECOMPILES | TGC_LOG_GUARDS | TGC_LOG_GRAPH | TGC_LOG_KERNELS | TGC_LOG_PERF},
        {"graph,nonsense,dynamic", TGC_LOG_GRAPH | TGC_LOG_DYNAMIC}, /* unknown names ignored,
                                                                        with a warning */
        {"guardsx", 0},                                              /* whole names only */
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TGC_LOG", cases[i].spec, 1);
        tgc_config c = tgc_config_default();
        if (c.log != cases[i].bits)
            fail_msg("TGC_LOG=%s gave 0x%x, want 0x%x", cases[i].spec, c.log, cases[i].bits);
    }
}

/* What tgc_config_default() writes to stderr (the warnings of unparsable variables). */
static void config_default_stderr(tgc_config *c, char *buf, size_t n)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    *c = tgc_config_default();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t got = fread(buf, 1, n - 1, tmp);
    buf[got] = 0;
    fclose(tmp);
}

/* An unparsable value is ignored with one warning that names the variable, the value and
 * what is accepted; the same value again stays quiet. */
static void test_env_bad_values_warn_once(void **state)
{
    (void)state;
    static const struct {
        const char *var, *value, *warning;
    } cases[] = {
        {"TGC_CACHE_SIZE_LIMIT", "abc",
         "tgc: ignoring TGC_CACHE_SIZE_LIMIT='abc': expected an integer from 1 to 1000000 "
         "(variants per function); using 8\n"},
        {"TGC_CACHE_SIZE_LIMIT", "0",
         "tgc: ignoring TGC_CACHE_SIZE_LIMIT='0': expected an integer from 1 to 1000000 "
         "(variants per function); using 8\n"},
        {"TGC_ACCUMULATED_CACHE_SIZE_LIMIT", "99999999999999999999",
         "tgc: ignoring TGC_ACCUMULATED_CACHE_SIZE_LIMIT='99999999999999999999': expected an "
         "integer from 1 to 1000000 (variants per process); using 256\n"},
        {"TGC_DYNAMIC", "sometimes",
         "tgc: ignoring TGC_DYNAMIC='sometimes': expected one of auto, always, never; using "
         "auto\n"},
        {"TGC_BACKEND", "gpu",
         "tgc: ignoring TGC_BACKEND='gpu': expected one of auto, llvm, cuda, eager, interp; "
         "using auto\n"},
        {"TGC_LOG", "recompiles,bogus",
         "tgc: ignoring TGC_LOG='recompiles,bogus': expected a comma-separated list of "
         "recompiles, guards, graph, dynamic, perf, kernels, all; using the known names "
         "only\n"},
        {"TGC_AUTOTUNE", "max",
         "tgc: ignoring TGC_AUTOTUNE='max': expected one of off, fast, full; using off\n"},
        {"TGC_NUM_THREADS", "-3",
         "tgc: ignoring TGC_NUM_THREADS='-3': expected an integer from 0 to 1000000 (0: one "
         "thread per core); using 0\n"},
    };
    char out[1024];
    tgc_config c;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv(cases[i].var, cases[i].value, 1);
        config_default_stderr(&c, out, sizeof out);
        assert_string_equal(out, cases[i].warning);
        config_default_stderr(&c, out, sizeof out); /* once */
        assert_string_equal(out, "");
    }
    /* the defaults stand in for the ignored values; known log names still apply */
    assert_int_equal(c.num_threads, 0);
    setenv("TGC_LOG", "recompiles,bogus", 1);
    setenv("TGC_CACHE_SIZE_LIMIT", "abc", 1);
    config_default_stderr(&c, out, sizeof out);
    assert_string_equal(out, "");
    assert_int_equal(c.log, TGC_LOG_RECOMPILES);
    assert_int_equal(c.cache_size_limit, 8);
    /* valid values are quiet */
    clear_env();
    setenv("TGC_LOG", "graph, dynamic", 1);
    setenv("TGC_NUM_THREADS", "2", 1);
    setenv("TGC_BACKEND", "Interp", 1);
    config_default_stderr(&c, out, sizeof out);
    assert_string_equal(out, "");
    assert_int_equal(c.log, TGC_LOG_GRAPH | TGC_LOG_DYNAMIC);
    assert_int_equal(c.num_threads, 2);
    assert_int_equal(c.backend, TGC_BACKEND_INTERP);
}

static void test_env_choices(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        tgc_backend_kind b;
    } backends[] = {{"auto", TGC_BACKEND_AUTO},     {"llvm", TGC_BACKEND_LLVM},
                    {"cuda", TGC_BACKEND_CUDA},     {"eager", TGC_BACKEND_EAGER},
                    {"interp", TGC_BACKEND_INTERP}, {"INTERP", TGC_BACKEND_INTERP},
                    {"Eager", TGC_BACKEND_EAGER}};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        setenv("TGC_BACKEND", backends[i].v, 1);
        assert_int_equal(tgc_config_default().backend, backends[i].b);
    }
    static const struct {
        const char *v;
        tgc_dynamic d;
    } dyn[] = {{"auto", TGC_DYNAMIC_AUTO},
               {"always", TGC_DYNAMIC_ALWAYS},
               {"never", TGC_DYNAMIC_NEVER},
               {"ALWAYS", TGC_DYNAMIC_ALWAYS}};
    for (size_t i = 0; i < sizeof dyn / sizeof dyn[0]; i++) {
        setenv("TGC_DYNAMIC", dyn[i].v, 1);
        assert_int_equal(tgc_config_default().dynamic, dyn[i].d);
    }
    /* values that are not understood leave the default */
    setenv("TGC_BACKEND", "tpu", 1);
    setenv("TGC_DYNAMIC", "sometimes", 1);
    setenv("TGC_CACHE_SIZE_LIMIT", "12abc", 1);
    setenv("TGC_ACCUMULATED_CACHE_SIZE_LIMIT", "-5", 1);
    setenv("TGC_NUM_THREADS", "many", 1);
    tgc_config c = tgc_config_default();
    assert_int_equal(c.backend, TGC_BACKEND_AUTO);
    assert_int_equal(c.dynamic, TGC_DYNAMIC_AUTO);
    assert_int_equal(c.cache_size_limit, 8);
    assert_int_equal(c.accumulated_cache_size_limit, 256);
    assert_int_equal(c.num_threads, 0);
    /* an environment-selected backend the build lacks is reported by tgc_compile */
    setenv("TGC_BACKEND", "cuda", 1);
    if (!tgc_cuda_is_available()) /* a machine without a GPU (or a build without CUDA) */
        check_rejected(NULL, TGC_ERR_DEVICE, "CUDA");
#ifndef TGC_HAVE_LLVM
    setenv("TGC_BACKEND", "llvm", 1);
    check_rejected(NULL, TGC_ERR_UNSUPPORTED, "LLVM");
#endif
}

static void test_compile_rejects_bad_configs(void **state)
{
    (void)state;
    const tgc_config good = tgc_config_default();
    tgc_config c;

    tgc_clear_error();
    assert_null(tgc_compile(NULL, "m", &good));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_compile: fn is NULL");
    tgc_clear_error();
    assert_null(tgc_compile(NULL, "m", NULL));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "fn is NULL");

    /* struct_size: an older header's smaller struct is read as far as it goes, a struct
     * that did not start from tgc_config_default() is refused (test_abi: every size) */
    c = good;
    c.struct_size = sizeof(tgc_config) - sizeof c.device;
    check_accepted(&c);
    c.struct_size = 0;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "start from tgc_config_default()");

    c = good;
    c.cache_size_limit = 0;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "cache_size_limit (0)");
    c.cache_size_limit = -3;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "cache_size_limit (-3)");
    c = good;
    c.accumulated_cache_size_limit = 0;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "accumulated_cache_size_limit (0)");

    c = good;
    c.backend = (tgc_backend_kind)5;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "unknown backend");
    c.backend = (tgc_backend_kind)-1;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "unknown");
    c = good;
    c.mode = (tgc_mode)3;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "mode");
    c = good;
    c.on_cache_limit = (tgc_on_cache_limit)2;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "on_cache_limit");
    c = good;
    c.dynamic = (tgc_dynamic)3;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "dynamic");
    c = good;
    c.autotune = (tgc_autotune)3;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "autotune value");

    c = good;
    c.num_threads = -1;
    check_rejected(&c, TGC_ERR_INVALID_ARG, "num_threads is -1");

    c = good;
#ifdef TGC_HAVE_LLVM
    c.backend = TGC_BACKEND_LLVM;
    check_accepted(&c);
#else
    c.backend = TGC_BACKEND_LLVM;
    check_rejected(&c, TGC_ERR_UNSUPPORTED, "no LLVM backend");
#endif
    c.backend = TGC_BACKEND_CUDA; /* on a machine without a GPU (or without CUDA) */
    if (!tgc_cuda_is_available())
        check_rejected(&c, TGC_ERR_DEVICE, "CUDA backend is not available");
}

static void test_compile_accepts_valid_configs(void **state)
{
    (void)state;
    const tgc_config good = tgc_config_default();
    tgc_config c;
    const tgc_backend_kind backends[] = {TGC_BACKEND_AUTO, TGC_BACKEND_EAGER, TGC_BACKEND_INTERP};
    for (size_t i = 0; i < 3; i++) {
        c = good;
        c.backend = backends[i];
        check_accepted(&c);
    }
    c = good;
    c.mode = TGC_MODE_MAX_AUTOTUNE;
    c.on_cache_limit = TGC_ON_LIMIT_ERROR;
    c.dynamic = TGC_DYNAMIC_ALWAYS;
    c.cache_size_limit = 1;
    c.accumulated_cache_size_limit = 1;
    c.num_threads = 3;
    c.guard_module_identity = 1;
    c.fullgraph = 1;
    c.log = TGC_LOG_ALL;
    check_accepted(&c);

    /* a NULL or empty name gets a default; strings are copied */
    char dir[32] = "/tmp/some-cache";
    c = good;
    c.cache_dir = dir;
    c.dump_dir = dir;
    tgc_fn *f = tgc_compile(model, NULL, &c);
    assert_non_null(f);
    assert_non_null(f->name);
    assert_true(f->name[0] != 0);
    assert_ptr_not_equal(f->cfg.cache_dir, dir);
    assert_ptr_not_equal(f->cfg.dump_dir, dir);
    dir[0] = 'X';
    assert_string_equal(f->cfg.cache_dir, "/tmp/some-cache");
    assert_string_equal(f->cfg.dump_dir, "/tmp/some-cache");
    tgc_fn_free(f);
    f = tgc_compile(model, "", NULL);
    assert_non_null(f);
    assert_true(f->name[0] != 0);
    tgc_fn_free(f);
    /* the name is copied */
    char name[16] = "my_forward";
    f = tgc_compile(model, name, NULL);
    name[0] = 'X';
    assert_string_equal(f->name, "my_forward");
    tgc_fn_free(f);
    tgc_fn_free(NULL);
}

/* tgc_fn_stats names the backend the config resolved to. */
static void test_stats_name_the_backend(void **state)
{
    (void)state;
    tgc_config c = tgc_config_default();
    const struct {
        tgc_backend_kind kind;
        const char *name;
    } cases[] = {
#ifdef TGC_HAVE_LLVM
        {TGC_BACKEND_AUTO, "llvm"},
        {TGC_BACKEND_LLVM, "llvm"},
#else
        {TGC_BACKEND_AUTO, "interp"},
#endif
        {TGC_BACKEND_INTERP, "interp"},
        {TGC_BACKEND_EAGER, "eager"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.backend = cases[i].kind;
        tgc_fn *f = tgc_compile(model, "m", &c);
        assert_non_null(f);
        tgc_stats s;
        assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
        assert_string_equal(s.backend, cases[i].name);
        tgc_fn_free(f);
    }
}

/* A function without tensor inputs: it creates its values on make_dev and returns
 * a * a + 1 for a = arange(4). */
static tgc_device make_dev;

static tgc_status make_values(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    (void)self, (void)in, (void)n_in, (void)n_out;
    tgc_tensor *a = tgc_arange(0, 4, 1, TGC_F32, make_dev);
    out[0] = tgc_add_scalar(tgc_mul(a, a), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void expect_made_values(tgc_fn *f, tgc_module *self)
{
    tgc_tensor *y = NULL;
    tgc_clear_error();
    if (tgc_call(f, self, NULL, 0, &y, 1) != TGC_OK)
        fail_msg("tgc_call: %s", tgc_last_error());
    float got[4];
    assert_int_equal(tgc_copy_to_host(y, got, sizeof got), TGC_OK);
    assert_true(got[0] == 1.0f && got[1] == 2.0f && got[2] == 5.0f && got[3] == 10.0f);
}

/* cfg.device: where a call runs that neither its inputs nor its module place. */
static void test_device_of_a_function_without_inputs(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_config c = tgc_config_default();
    assert_int_equal(c.device.type, TGC_DEVICE_CPU);
    assert_int_equal(c.device.index, 0);
    make_dev = tgc_cpu();
    tgc_fn *f = tgc_compile(make_values, "make", &c);
    assert_non_null(f);
    expect_made_values(f, NULL);
    expect_made_values(f, NULL); /* a cache hit */
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(f, &st), TGC_OK);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(st.cache_hits, 1);
    tgc_fn_free(f);

    /* a host backend cannot run a function whose device is a GPU */
    c.backend = TGC_BACKEND_INTERP;
    c.device = tgc_cuda(0);
    make_dev = tgc_cuda(0);
    f = tgc_compile(make_values, "make", &c);
    assert_non_null(f);
    tgc_tensor *y = NULL;
    tgc_clear_error();
    assert_int_equal(tgc_call(f, NULL, NULL, 0, &y, 1), TGC_ERR_DEVICE);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'make' has no tensor inputs or module tensors, so it runs on "
                        "cfg.device (cuda:0), but cfg.backend interp runs on the host; use "
                        "TGC_BACKEND_AUTO or TGC_BACKEND_CUDA, or leave cfg.device at tgc_cpu()");
    tgc_fn_free(f);

    /* a module's tensors place the call before cfg.device does */
    int64_t s[1] = {4};
    tgc_module *m = tgc_module_create("m", NULL);
    tgc_module_buffer(m, "b", tgc_zeros(s, 1, TGC_F32, tgc_cpu()));
    make_dev = tgc_cpu();
    f = tgc_compile(make_values, "make", &c);
    expect_made_values(f, m);
    tgc_fn_free(f);
    tgc_module_free(m);

    /* AUTO with cfg.device on a GPU: CUDA where there is one, else the reason */
    c.backend = TGC_BACKEND_AUTO;
    make_dev = tgc_cuda(0);
    f = tgc_compile(make_values, "make", &c);
    assert_non_null(f);
    if (tgc_cuda_is_available()) {
        expect_made_values(f, NULL);
    } else {
        tgc_clear_error();
        assert_int_equal(tgc_call(f, NULL, NULL, 0, &y, 1), TGC_ERR_DEVICE);
        const char *want = "tgc_call: 'make' has no tensor inputs or module tensors, so it runs "
                           "on cfg.device (cuda:0), but ";
        if (strncmp(tgc_last_error(), want, strlen(want)) != 0)
            fail_msg("message \"%s\" does not start with \"%s\"", tgc_last_error(), want);
    }
    tgc_fn_free(f);

    /* a device that is none */
    c = tgc_config_default();
    c.device = (tgc_device){(tgc_device_type)7, 0};
    check_rejected(&c, TGC_ERR_INVALID_ARG,
                   "tgc_compile: cfg.device {type 7, index 0} is not a device; use tgc_cpu() or "
                   "tgc_cuda(i)");
    c.device = (tgc_device){TGC_DEVICE_CPU, 1};
    check_rejected(&c, TGC_ERR_INVALID_ARG, "cfg.device {type 0, index 1} is not a device");
    c.device = tgc_cuda(-1);
    check_rejected(&c, TGC_ERR_INVALID_ARG, "cfg.device {type 1, index -1} is not a device");
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_parsing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_log_channels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_bad_values_warn_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_choices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_rejects_bad_configs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_accepts_valid_configs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats_name_the_backend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_of_a_function_without_inputs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
