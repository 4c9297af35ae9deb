/* Public handles against bad input, outside data parallelism (tests/dist/test_dist_api.c
 * covers process groups):
 *  - loads from a named pipe are TGC_ERR_IO at once (tgc_module_load, tgc_optim_load), not a
 *    blocking open;
 *  - queries on a NULL module, tensor or optimizer set TGC_ERR_INVALID_ARG with a message
 *    naming the query, keeping an earlier error, as tensor queries do;
 *  - tgc_compile names itself before a lower layer's reason;
 *  - tgc_cuda_is_available is a boolean and tgc_cuda_check the status with the reason. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tgc/tgc.h"
#include "unit_test_util.h"

static void expect_msg(const char *want)
{
    if (strcmp(tgc_last_error(), want) != 0)
        fail_msg("message \"%s\", want \"%s\"", tgc_last_error(), want);
}

static void expect_prefix(const char *want)
{
    if (strncmp(tgc_last_error(), want, strlen(want)) != 0)
        fail_msg("message \"%s\" does not start with \"%s\"", tgc_last_error(), want);
}

static tgc_module *small_module(void)
{
    tgc_module *m = tgc_module_create("net", NULL);
    assert_non_null(m);
    int64_t s[2] = {2, 3};
    assert_non_null(tgc_module_param(m, "w", tgc_ones(s, 2, TGC_F32, tgc_cpu())));
    return m;
}

/* A named pipe nobody writes to: an open for reading would wait for a writer forever. */
static void make_fifo(char *dir, size_t nd, char *path, size_t np)
{
    snprintf(dir, nd, "/tmp/tgc_fifo_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, np, "%s/ckpt.safetensors", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void test_loads_refuse_a_named_pipe_at_once(void **state)
{
    (void)state;
    char dir[64], path[128], want[256];
    make_fifo(dir, sizeof dir, path, sizeof path);
    tgc_module *m = small_module();
    tgc_sgd_opts so = {0};
    so.lr = 0.1;
    tgc_optim *o = tgc_sgd(m, &so);
    assert_non_null(o);
    alarm(10); /* a blocking open fails the test instead of hanging it */
    assert_int_equal(tgc_module_load(m, path, 1), TGC_ERR_IO);
    snprintf(want, sizeof want,
             "tgc_module_load: '%s': is not a regular file (a pipe, socket or device)", path);
    expect_msg(want);
    assert_int_equal(tgc_optim_load(o, path), TGC_ERR_IO);
    snprintf(want, sizeof want,
             "tgc_optim_load: '%s': is not a regular file (a pipe, socket or device)", path);
    expect_msg(want);
    alarm(0);
    /* a directory and a missing file keep their own reasons */
    assert_int_equal(tgc_module_load(m, dir, 1), TGC_ERR_IO);
    snprintf(want, sizeof want, "tgc_module_load: '%s': is a directory", dir);
    expect_msg(want);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none", dir);
    assert_int_equal(tgc_module_load(m, missing, 1), TGC_ERR_IO);
    snprintf(want, sizeof want, "tgc_module_load: '%s': cannot open it: No such file or directory",
             missing);
    expect_msg(want);
    /* and a regular file still loads */
    char file[160];
    snprintf(file, sizeof file, "%s/ok.safetensors", dir);
    assert_int_equal(tgc_module_save(m, file), TGC_OK);
    assert_int_equal(tgc_module_load(m, file, 1), TGC_OK);
    remove(file);
    tgc_optim_free(o);
    tgc_module_free(m);
    remove(path);
    rmdir(dir);
}

static void test_queries_on_null_set_the_error(void **state)
{
    (void)state;
    tgc_clear_error();
    assert_int_equal(tgc_module_num_tensors(NULL), 0);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_module_num_tensors: module is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_module_is_training(NULL), 0);
    expect_msg("tgc_module_is_training: module is NULL");
    tgc_clear_error();
    assert_null(tgc_module_userdata(NULL));
    expect_msg("tgc_module_userdata: module is NULL");
    tgc_clear_error();
    assert_null(tgc_module_name(NULL));
    expect_msg("tgc_module_name: module is NULL");
    tgc_clear_error();
    tgc_module_train(NULL, 1);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_module_train: module is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_requires_grad_of(NULL), 0);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_requires_grad_of: tensor is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_optim_num_state(NULL), 0);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_optim_num_state: optimizer is NULL");
    /* the NULL of a failed creation keeps that failure */
    tgc_clear_error();
    tgc_module *m = tgc_module_create("", NULL);
    assert_int_equal(tgc_module_num_tensors(m), 0);
    assert_int_equal(tgc_module_is_training(m), 0);
    assert_int_equal(tgc_optim_num_state(NULL), 0);
    expect_msg("tgc_module_create: name is NULL or empty");
    /* answers on live handles leave the error state alone */
    tgc_clear_error();
    m = small_module();
    assert_int_equal(tgc_module_num_tensors(m), 1);
    assert_int_equal(tgc_requires_grad_of(tgc_module_get(m, "w")), 1);
    assert_int_equal(tgc_last_status(), TGC_OK);
    tgc_module_free(m);
}

static tgc_status identity(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                           int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = tgc_neg(in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_compile_names_itself_before_the_backend_reason(void **state)
{
    (void)state;
    if (tgc_cuda_is_available()) {
        skip(); /* the CUDA backend loads: nothing to refuse */
        return;
    }
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_CUDA;
    assert_null(tgc_compile(identity, "f", &c));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
#ifdef TGC_HAVE_CUDA
    expect_prefix("tgc_compile: the CUDA backend is not available (CUDA): ");
    /* the cause is the driver's, as tgc_cuda_check gives it */
    char reason[1024];
    snprintf(reason, sizeof reason, "%s", tgc_last_error());
    assert_int_equal(tgc_cuda_check(), TGC_ERR_DEVICE);
    assert_non_null(strstr(reason, tgc_last_error() + strlen("tgc_cuda_check: ")));
#else
    expect_prefix("tgc_compile: the CUDA backend is not available: this build has no CUDA");
#endif
}

static void test_cuda_availability_reads_as_a_boolean(void **state)
{
    (void)state;
    tgc_status st = tgc_cuda_check();
    int yes = tgc_cuda_is_available();
    assert_int_equal(yes, st == TGC_OK);
    if (st != TGC_OK) {
        assert_int_equal(st, TGC_ERR_DEVICE);
        expect_prefix("tgc_cuda_check: ");
    }
    /* the predicate keeps the thread's error: none, or an earlier one */
    tgc_clear_error();
    assert_int_equal(tgc_cuda_is_available(), yes);
    assert_int_equal(tgc_last_status(), TGC_OK);
    tgc_tensor *t = tgc_neg(NULL);
    assert_null(t);
    const tgc_status before = tgc_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tgc_last_error());
    assert_int_equal(tgc_cuda_is_available(), yes);
    assert_int_equal(tgc_last_status(), before);
    expect_msg(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loads_refuse_a_named_pipe_at_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_queries_on_null_set_the_error, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_compile_names_itself_before_the_backend_reason,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_cuda_availability_reads_as_a_boolean, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
