/* Process groups and data-parallel training on a GPU through the real NCCL (libnccl.so.2 of
 * the machine; TGC_NCCL_LIBRARY unset): a world of size 1 on cuda:0, whose compiled DDP step
 * (DEFAULT, and REDUCE_OVERHEAD, where the all-reduce is captured into the CUDA graph) must
 * give the losses of the plain compiled step; collectives eagerly and compiled; a peer that
 * never joins (TGC_ERR_TIMEOUT); a missing library (TGC_ERR_UNSUPPORTED); NVLink multicast
 * kept off. Skipped without a GPU (tests/gpu_skip.h) or without NCCL (a visible reason).
 * Runs in one process (a forked child could not use the parent's CUDA state), except the
 * missing-library case, whose child never touches CUDA. */
#include "ddp_util.h"

#include <time.h>

#include "gpu_skip.h"

/* NCCL present? (probed once; the reason printed when not) */
static int nccl_ok(void)
{
    static int known = -1;
    if (known < 0) {
        char id[TGC_DIST_ID_CHARS + 1];
        known = tgc_dist_unique_id(id, sizeof id) == TGC_OK;
        if (!known)
            printf("tgc: NCCL cases skipped: %s\n", tgc_last_error());
    }
    return known;
}

#define NCCL_REQUIRE()                                                                             \
    do {                                                                                           \
        GPU_REQUIRE();                                                                             \
        if (!nccl_ok())                                                                            \
            skip();                                                                                \
    } while (0)

static tgc_dist *world_of_one(double timeout)
{
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 0;
    o.world_size = 1;
    o.device = tgc_cuda(0);
    o.timeout_s = timeout;
    return tgc_dist_init(&o);
}

static int missing_child(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    (void)arg;
    setenv("TGC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 0;
    o.world_size = 1;
    o.device = tgc_cuda(0);
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_UNSUPPORTED);
    CHILD_CHECK(strstr(tgc_last_error(), "/nonexistent/libnccl.so.2"));
    return 0;
}

static void test_missing_library(void **state)
{
    (void)state;
    assert_int_equal(ddp_run_ranks(1, missing_child, NULL, NULL), 0);
}

static tgc_dist *g_pg;

static tgc_status reduce_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    out[0] = tgc_dist_all_reduce(g_pg, tgc_mul_scalar(in[0], 3.0), TGC_DIST_SUM);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void test_collectives_world_of_one(void **state)
{
    (void)state;
    NCCL_REQUIRE(); /* main unset NCCL_NVLS_ENABLE: loading NCCL set it */
    g_pg = world_of_one(60);
    assert_non_null(g_pg);
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    assert_non_null(nvls);
    assert_string_equal(nvls, "0");
    assert_int_equal(tgc_dist_world_size(g_pg), 1);
    assert_int_equal(tgc_dist_device(g_pg).type, TGC_DEVICE_CUDA);
    tgc_scope_push();
    float v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = (float)i * 0.5f - 7.0f;
    int64_t n = 1000;
    tgc_tensor *x = tgc_to(tgc_from_data(v, sizeof v, &n, 1, TGC_F32, tgc_cpu()), tgc_cuda(0));
    float got[1000];
    const tgc_dist_op ops[4] = {TGC_DIST_SUM, TGC_DIST_AVG, TGC_DIST_MAX, TGC_DIST_MIN};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, x, ops[k]), got, sizeof got),
                         TGC_OK);
        assert_memory_equal(got, v, sizeof v);
    }
    assert_int_equal(tgc_dist_broadcast_(g_pg, x, 0), TGC_OK);
    for (int mode = 0; mode < 2; mode++) {
        tgc_config c = tgc_config_default();
        c.mode = mode ? TGC_MODE_REDUCE_OVERHEAD : TGC_MODE_DEFAULT;
        tgc_fn *f = tgc_compile(reduce_fn, "reduce", &c);
        for (int call = 0; call < 4; call++) {
            tgc_tensor *y = NULL;
            assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
            assert_int_equal(tgc_copy_to_host(y, got, sizeof got), TGC_OK);
            for (int i = 0; i < 1000; i++)
                assert_float_equal(got[i], 3.0f * v[i], 1e-6);
        }
        tgc_fn_free(f);
    }
    assert_int_equal(tgc_dist_barrier(g_pg), TGC_OK);
    tgc_scope_pop();
    tgc_dist_free(g_pg);
    g_pg = NULL;
}

/* 20 compiled steps with and without the wrapper: the same losses (an average over one rank
 * is the gradient itself). */
static void train(int ddp, int mode, double *losses, int steps, double *ms)
{
    tgc_module *m = ddp_model(1234, tgc_cuda(0));
    tgc_ddp *d = NULL;
    if (ddp) {
        g_pg = world_of_one(60);
        assert_non_null(g_pg);
        tgc_ddp_opts o = {512, 256, 0}; /* several buckets */
        d = tgc_ddp_create(g_pg, m, &o);
        assert_non_null(d);
        assert_true(tgc_ddp_num_buckets(d) >= 3);
    }
    tgc_sgd_opts so = {0};
    so.lr = 0.1;
    so.momentum = 0.9;
    ddp_opt = tgc_sgd(m, &so);
    assert_int_equal(tgc_zero_grad(m), TGC_OK);
    tgc_config c = tgc_config_default();
    c.mode = mode < 0 ? TGC_MODE_DEFAULT : (tgc_mode)mode;
    tgc_fn *f = mode < 0 ? NULL : tgc_compile(ddp_train_step, ddp ? "ddp_step" : "step", &c);
    ddp_loss_scale = 1.0;
    ddp_do_step = 1;
    struct timespec t0, t1;
    for (int s = 0; s < steps; s++) {
        if (s == 5)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        tgc_scope_push();
        tgc_tensor *x, *y, *loss = NULL;
        ddp_batch(s, 0, 16, tgc_cuda(0), &x, &y);
        tgc_tensor *in[2] = {x, y};
        if (f) /* mode < 0: eagerly */
            assert_int_equal(tgc_call(f, m, in, 2, &loss, 1), TGC_OK);
        else
            assert_int_equal(ddp_train_step(m, in, 2, &loss, 1), TGC_OK);
        losses[s] = tgc_item_f64(loss);
        tgc_scope_pop();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) /
          (steps - 5);
    tgc_stats st;
    memset(&st, 0, sizeof st);
    assert_true(!f || tgc_fn_stats(f, &st) == TGC_OK);
    assert_true(!f || st.compiles == 1);
    assert_true(!f || st.eager_fallbacks == 0);
    if (ddp && f) {
        char *ex = tgc_fn_explain(f);
        assert_non_null(strstr(ex, "all_reduce"));
        printf("%s", ex);
        tgc_free(ex);
    }
    tgc_fn_free(f);
    tgc_optim_free(ddp_opt);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    g_pg = NULL;
}

static void test_world_of_one_equals_plain_step(void **state)
{
    (void)state;
    NCCL_REQUIRE();
    for (int mode = -1; mode < 2; mode++) { /* -1: eagerly */
        int md = mode < 0 ? -1 : mode ? TGC_MODE_REDUCE_OVERHEAD : TGC_MODE_DEFAULT;
        double plain[20], dp[20], ms_plain = 0, ms_dp = 0;
        train(0, md, plain, 20, &ms_plain);
        train(1, md, dp, 20, &ms_dp);
        double worst = 0;
        for (int s = 0; s < 20; s++) {
            double e = fabs(plain[s] - dp[s]) / fmax(1e-3, fabs(plain[s]));
            worst = fmax(worst, e);
            if (e > 1e-6)
                fail_msg("%s step %d: plain %.8f, data-parallel world of one %.8f",
                         mode < 0 ? "eager"
                         : mode   ? "REDUCE_OVERHEAD"
                                  : "DEFAULT",
                         s, plain[s], dp[s]);
        }
        printf("world of one, %s: 20 steps, max relative loss difference %.2e; step %.3f ms "
               "plain, %.3f ms data-parallel\n",
               mode < 0 ? "eager"
               : mode   ? "REDUCE_OVERHEAD"
                        : "DEFAULT",
               worst, ms_plain, ms_dp);
    }
}

static void test_peer_never_joins(void **state)
{
    (void)state;
    NCCL_REQUIRE();
    char id[TGC_DIST_ID_CHARS + 1];
    assert_int_equal(tgc_dist_unique_id(id, sizeof id), TGC_OK);
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 0;
    o.world_size = 2;
    o.device = tgc_cuda(0);
    o.id = id;
    o.timeout_s = 2.0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tgc_clear_error();
    tgc_dist *pg = tgc_dist_init(&o);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    assert_null(pg);
    assert_int_equal(tgc_last_status(), TGC_ERR_TIMEOUT);
    printf("peer never joins: TGC_ERR_TIMEOUT after %.2f s (%s)\n", dt, tgc_last_error());
    assert_true(dt >= 1.5 && dt < 30.0);
    /* the process can make a new group afterwards */
    tgc_dist *one = world_of_one(30);
    assert_non_null(one);
    tgc_dist_free(one);
}

int main(void)
{
    unsetenv("TGC_NCCL_LIBRARY");
    unsetenv("NCCL_NVLS_ENABLE"); /* the library must set it to 0 before NCCL reads it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_collectives_world_of_one),
        cmocka_unit_test(test_world_of_one_equals_plain_step),
        cmocka_unit_test(test_peer_never_joins),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
