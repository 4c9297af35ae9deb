/* The process-group and data-parallel API against bad input and out-of-order frees, through
 * the host-memory NCCL double:
 *  - every floating option (opts.timeout_s, tgc_dist_init_local's timeout_s) refuses NaN,
 *    infinities and negative values with TGC_ERR_INVALID_ARG at once, instead of a deadline
 *    that is never reached;
 *  - a named pipe as the rendezvous file is TGC_ERR_IO at once, not a blocking open;
 *  - messages start with the function called and keep the lower layer's cause after it;
 *  - queries on NULL (or an index out of range) set TGC_ERR_INVALID_ARG with a message;
 *  - a tgc_ddp whose module or group was freed first is detached: no crash, statuses.
 * Forked tests first (the process itself then starts libtgc only once). */
#include "ddp_util.h"

#include <math.h>
#include <signal.h>
#include <sys/stat.h>

/* The whole test process fails (SIGALRM) if a call that must return at once blocks. */
#define WITHIN_SECONDS(s) alarm(s)

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

static tgc_dist_opts world_of_one(void)
{
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 0;
    o.world_size = 1;
    o.device = tgc_cpu();
    return o;
}

/* ---- in a child: NCCL missing ---- */

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int missing_nccl_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    (void)arg;
    setenv("TGC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    char id[TGC_DIST_ID_CHARS + 1];
    CHILD_CHECK(tgc_dist_unique_id(id, sizeof id) == TGC_ERR_UNSUPPORTED);
    CHILD_CHECK(starts_with(tgc_last_error(), "tgc_dist_unique_id: NCCL could not be loaded: "));
    tgc_device dev = tgc_cpu();
    tgc_dist *out = NULL;
    CHILD_CHECK(tgc_dist_init_local(1, &dev, 0, &out) == TGC_ERR_UNSUPPORTED && !out);
    CHILD_CHECK(starts_with(tgc_last_error(), "tgc_dist_init_local: NCCL could not be loaded: "));
    tgc_dist_opts o = world_of_one();
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_UNSUPPORTED);
    CHILD_CHECK(starts_with(tgc_last_error(), "tgc_dist_init: NCCL could not be loaded: "));
    CHILD_CHECK(strstr(tgc_last_error(), "/nonexistent/libnccl.so.2"));
    return 0;
}

static void test_missing_nccl_names_the_function(void **state)
{
    (void)state;
    assert_int_equal(ddp_run_ranks(1, missing_nccl_rank, NULL, NULL), 0);
}

/* ---- in this process ---- */

static void test_timeout_must_be_finite_and_non_negative(void **state)
{
    (void)state;
    const double bad[] = {NAN, INFINITY, -INFINITY, -1.0, -1e-9};
    const char *shown[] = {"nan", "inf", "-inf", "-1", "-1e-09"};
    WITHIN_SECONDS(20);
    for (int i = 0; i < 5; i++) {
        char want[256];
        tgc_dist_opts o = world_of_one();
        o.timeout_s = bad[i];
        tgc_clear_error();
        assert_null(tgc_dist_init(&o));
        assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
        snprintf(want, sizeof want,
                 "tgc_dist_init: opts.timeout_s is %s; give a finite number of seconds > 0 (0: "
                 "the default, 300 s)",
                 shown[i]);
        expect_msg(want);
        tgc_device dev = tgc_cpu();
        tgc_dist *out = (tgc_dist *)&o; /* overwritten with NULL */
        assert_int_equal(tgc_dist_init_local(1, &dev, bad[i], &out), TGC_ERR_INVALID_ARG);
        assert_null(out);
        snprintf(want, sizeof want,
                 "tgc_dist_init_local: timeout_s is %s; give a finite number of seconds > 0 "
                 "(0: the default, 300 s)",
                 shown[i]);
        expect_msg(want);
        /* a rank that waits for the rendezvous file: its deadline would never come */
        o = tgc_dist_opts_default();
        o.rank = 1;
        o.world_size = 2;
        o.device = tgc_cpu();
        o.id_file = "/tmp/tgc_dist_api_no_such_id_file";
        o.timeout_s = bad[i];
        assert_null(tgc_dist_init(&o));
        assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
        expect_prefix("tgc_dist_init: opts.timeout_s is ");
    }
    /* 0 is the default, and a world of one joins */
    tgc_dist_opts o = world_of_one();
    o.timeout_s = 0;
    tgc_dist *pg = tgc_dist_init(&o);
    assert_non_null(pg);
    tgc_dist_free(pg);
    alarm(0);
}

static void test_fifo_id_file_is_refused_at_once(void **state)
{
    (void)state;
    char dir[64], path[128];
    ddp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/id", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 1; /* a reader: would wait in open for a writer that never comes */
    o.world_size = 2;
    o.device = tgc_cpu();
    o.id_file = path;
    o.timeout_s = 30;
    WITHIN_SECONDS(10);
    assert_null(tgc_dist_init(&o));
    alarm(0);
    assert_int_equal(tgc_last_status(), TGC_ERR_IO);
    char want[256];
    snprintf(want, sizeof want,
             "tgc_dist_init: cannot read the id file '%s': is not a regular file (a pipe, "
             "socket or device)",
             path);
    expect_msg(want);
    remove(path);
    rmdir(dir);
}

static void test_init_messages_name_tgc_dist_init(void **state)
{
    (void)state;
    tgc_dist_opts o = world_of_one();
    o.device = (tgc_device){(tgc_device_type)7, 0};
    assert_null(tgc_dist_init(&o));
    assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
    expect_msg("tgc_dist_init: tgc_comm_create: unknown device type 7");
    o = world_of_one();
    o.id = "ab";
    assert_null(tgc_dist_init(&o));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_dist_init: the id has 2 characters, a unique id has 256 (the text "
               "tgc_dist_unique_id wrote)");
    if (!tgc_cuda_is_available()) { /* this machine: the driver's reason, after the name */
        assert_int_equal(tgc_cuda_check(), TGC_ERR_DEVICE);
        char reason[1024];
        snprintf(reason, sizeof reason, "tgc_dist_init: %s", tgc_last_error() + 16);
        o = world_of_one();
        o.device = tgc_cuda(-1); /* from the local rank */
        assert_null(tgc_dist_init(&o));
        assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
        expect_msg(reason);
        o.device = tgc_cuda(0);
        assert_null(tgc_dist_init(&o));
        assert_int_equal(tgc_last_status(), TGC_ERR_DEVICE);
        expect_prefix("tgc_dist_init: ");
        assert_non_null(strstr(tgc_last_error(), reason + strlen("tgc_dist_init: ")));
    }
}

static void test_queries_on_null_set_the_error(void **state)
{
    (void)state;
    tgc_clear_error();
    assert_int_equal(tgc_dist_rank(NULL), -1);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_dist_rank: pg is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_dist_world_size(NULL), 0);
    expect_msg("tgc_dist_world_size: pg is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_dist_device(NULL).type, TGC_DEVICE_CPU);
    expect_msg("tgc_dist_device: pg is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_ddp_sync(NULL), 0);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_ddp_sync: d is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_ddp_num_buckets(NULL), 0);
    expect_msg("tgc_ddp_num_buckets: d is NULL");
    tgc_clear_error();
    assert_int_equal(tgc_ddp_bucket_size(NULL, 0), 0);
    expect_msg("tgc_ddp_bucket_size: d is NULL");
    tgc_clear_error();
    assert_null(tgc_ddp_group(NULL));
    expect_msg("tgc_ddp_group: d is NULL");
    /* a NULL from a failed creation keeps that failure's message */
    tgc_dist_opts o = world_of_one();
    o.timeout_s = NAN;
    tgc_dist *pg = tgc_dist_init(&o);
    assert_int_equal(tgc_dist_rank(pg), -1);
    expect_prefix("tgc_dist_init: opts.timeout_s is nan");
    /* out of range */
    char id[TGC_DIST_ID_CHARS + 1];
    assert_int_equal(tgc_dist_unique_id(id, sizeof id), TGC_OK);
    o = world_of_one();
    o.id = id;
    pg = tgc_dist_init(&o);
    assert_non_null(pg);
    tgc_module *m = ddp_model(3, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(pg, m, NULL);
    assert_non_null(d);
    int nb = tgc_ddp_num_buckets(d);
    assert_true(nb >= 1);
    assert_int_equal(tgc_ddp_bucket_size(d, 0), 4);
    tgc_clear_error();
    assert_int_equal(tgc_ddp_bucket_size(d, nb), 0);
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_ddp_bucket_size: bucket 1 is out of range (the wrapper has 1)");
    assert_int_equal(tgc_ddp_bucket_size(d, -1), 0);
    expect_msg("tgc_ddp_bucket_size: bucket -1 is out of range (the wrapper has 1)");
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(pg);
}

static tgc_dist *new_group(void)
{
    char id[TGC_DIST_ID_CHARS + 1];
    assert_int_equal(tgc_dist_unique_id(id, sizeof id), TGC_OK);
    tgc_dist_opts o = world_of_one();
    o.id = id;
    tgc_dist *pg = tgc_dist_init(&o);
    assert_non_null(pg);
    return pg;
}

/* One eager training step of m (forward, backward, no optimizer). */
static tgc_status eager_backward(tgc_module *m)
{
    tgc_scope_push();
    tgc_tensor *x, *y, *loss = NULL;
    ddp_batch(0, 0, 4, tgc_cpu(), &x, &y);
    tgc_tensor *in[2] = {x, y};
    ddp_do_step = 0;
    tgc_status st = ddp_train_step(m, in, 2, &loss, 1);
    ddp_do_step = 1;
    tgc_scope_pop();
    return st;
}

static void test_module_freed_before_its_ddp(void **state)
{
    (void)state;
    tgc_dist *pg = new_group();
    tgc_module *m = ddp_model(5, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(pg, m, NULL);
    assert_non_null(d);
    assert_int_equal(eager_backward(m), TGC_OK);
    tgc_module_free(m); /* first */
    assert_int_equal(tgc_ddp_set_sync(d, 0), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_ddp_set_sync: the data-parallel wrapper of module 'mlp' is detached: its "
               "module was freed first (free the tgc_ddp before its module and its process "
               "group)");
    assert_ptr_equal(tgc_ddp_group(d), pg); /* the group is still there */
    assert_int_equal(tgc_ddp_sync(d), 1);
    tgc_ddp_free(d); /* crashed on the freed module */
    /* the group still works and takes a new wrapper */
    tgc_module *m2 = ddp_model(6, tgc_cpu());
    d = tgc_ddp_create(pg, m2, NULL);
    assert_non_null(d);
    assert_int_equal(eager_backward(m2), TGC_OK);
    tgc_ddp_free(d);
    tgc_module_free(m2);
    tgc_dist_free(pg);
}

static void test_group_freed_before_its_ddp(void **state)
{
    (void)state;
    tgc_dist *pg = new_group();
    tgc_module *m = ddp_model(7, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(pg, m, NULL);
    assert_non_null(d);
    assert_int_equal(eager_backward(m), TGC_OK);
    tgc_dist_free(pg); /* first */
    /* a backward that would average through the freed group fails (it crashed) */
    assert_int_equal(eager_backward(m), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_backward: the data-parallel wrapper of module 'mlp' is detached: its "
               "process group was freed first (free the tgc_ddp before its module and its "
               "process group)");
    tgc_clear_error();
    assert_null(tgc_ddp_group(d));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    expect_msg("tgc_ddp_group: the process group of module 'mlp''s wrapper was freed");
    assert_int_equal(tgc_ddp_set_sync(d, 0), TGC_ERR_INVALID_ARG);
    expect_prefix("tgc_ddp_set_sync: the data-parallel wrapper of module 'mlp' is detached");
    tgc_ddp_free(d);
    /* without the wrapper the module trains locally again */
    assert_int_equal(eager_backward(m), TGC_OK);
    tgc_module_free(m);
}

static void test_group_freed_before_a_compiled_step(void **state)
{
    (void)state;
    tgc_dist *pg = new_group();
    tgc_module *m = ddp_model(8, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(pg, m, NULL);
    assert_non_null(d);
    tgc_sgd_opts so = {0};
    so.lr = 0.05;
    ddp_opt = tgc_sgd(m, &so);
    assert_non_null(ddp_opt);
    assert_int_equal(tgc_zero_grad(m), TGC_OK);
    tgc_config c = tgc_config_default();
    c.backend = TGC_BACKEND_INTERP;
    tgc_fn *f = tgc_compile(ddp_train_step, "step", &c);
    for (int s = 0; s < 2; s++) {
        tgc_scope_push();
        tgc_tensor *x, *y, *loss = NULL;
        ddp_batch(s, 0, 4, tgc_cpu(), &x, &y);
        tgc_tensor *in[2] = {x, y};
        tgc_status st = tgc_call(f, m, in, 2, &loss, 1);
        if (s == 1)
            tgc_dist_free(pg);
        assert_int_equal(st, TGC_OK);
        tgc_scope_pop();
    }
    tgc_scope_push();
    tgc_tensor *x, *y, *loss = NULL;
    ddp_batch(2, 0, 4, tgc_cpu(), &x, &y);
    tgc_tensor *in[2] = {x, y};
    assert_int_equal(tgc_call(f, m, in, 2, &loss, 1), TGC_ERR_INVALID_ARG);
    assert_non_null(strstr(tgc_last_error(), "freed"));
    tgc_scope_pop();
    /* every remaining free, the module before the wrapper too */
    tgc_module_free(m);
    tgc_optim_free(ddp_opt);
    ddp_opt = NULL;
    tgc_fn_free(f);
    tgc_ddp_free(d);
}

static void test_everything_freed_in_reverse(void **state)
{
    (void)state;
    /* the group, then the module, then the wrapper (the order of creation) */
    tgc_dist *pg = new_group();
    tgc_module *m = ddp_model(9, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(pg, m, NULL);
    assert_non_null(d);
    tgc_dist_free(pg);
    tgc_module_free(m);
    assert_int_equal(tgc_ddp_set_sync(d, 1), TGC_ERR_INVALID_ARG);
    expect_prefix("tgc_ddp_set_sync: the data-parallel wrapper of module 'mlp' is detached: its "
                  "module was freed first");
    tgc_ddp_free(d);
    /* and two wrappers over one group, the group freed first */
    pg = new_group();
    tgc_module *a = ddp_model(1, tgc_cpu()), *b = ddp_model(2, tgc_cpu());
    tgc_ddp *da = tgc_ddp_create(pg, a, NULL), *db = tgc_ddp_create(pg, b, NULL);
    assert_non_null(da);
    assert_non_null(db);
    tgc_ddp_free(da); /* one detaches normally */
    tgc_dist_free(pg);
    assert_int_equal(eager_backward(b), TGC_ERR_INVALID_ARG);
    tgc_module_free(b);
    tgc_ddp_free(db);
    assert_int_equal(eager_backward(a), TGC_OK);
    tgc_module_free(a);
}

int main(void)
{
    unsetenv("TGC_DIST_ID");
    unsetenv("TGC_DIST_ID_FILE");
    unsetenv("TGC_RANK");
    unsetenv("TGC_WORLD_SIZE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_nccl_names_the_function),
        cmocka_unit_test(test_timeout_must_be_finite_and_non_negative),
        cmocka_unit_test(test_fifo_id_file_is_refused_at_once),
        cmocka_unit_test(test_init_messages_name_tgc_dist_init),
        cmocka_unit_test(test_queries_on_null_set_the_error),
        cmocka_unit_test(test_module_freed_before_its_ddp),
        cmocka_unit_test(test_group_freed_before_its_ddp),
        cmocka_unit_test(test_group_freed_before_a_compiled_step),
        cmocka_unit_test(test_everything_freed_in_reverse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
