/* Process groups and data-parallel training on host ranks: forked processes joined through
 * the test NCCL (tests/dist/fake_nccl.c, selected by TGC_NCCL_LIBRARY), which reduces host
 * memory. What is checked is libtgc's side: the rendezvous, the collectives as graph ops
 * (eager, compiled on the default backend and on interp), the buckets and their order, the
 * averaging inside tgc_backward, gradient accumulation, the structure check, the broadcast,
 * the recompile on the sync flag, and every failure status (missing library, bad options,
 * mismatched ranks, a peer that never joins, a peer that dies). N-rank training with global
 * batch B must equal 1-rank training with batch B. */
#include "ddp_util.h"

#include <pthread.h>
#include <time.h>

static char dir[256];
static tgc_dist *g_pg;

static tgc_dist *join(int rank, int world, double timeout)
{
    char file[512];
    snprintf(file, sizeof file, "%s/id", dir);
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = rank;
    o.world_size = world;
    o.device = tgc_cpu();
    o.id_file = file;
    o.timeout_s = timeout;
    return tgc_dist_init(&o);
}

static int setup(void **state)
{
    (void)state;
    ddp_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}

static tgc_config cfg_for(int backend)
{
    tgc_config c = tgc_config_default();
    c.num_threads = 1;
    if (backend)
        c.backend = (tgc_backend_kind)backend;
    return c;
}

/* ---- collectives ---- */

static tgc_status reduce_fn(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    (void)self;
    (void)n_in;
    (void)n_out;
    tgc_tensor *s = tgc_dist_all_reduce(g_pg, tgc_mul_scalar(in[0], 2.0), TGC_DIST_SUM);
    out[0] = tgc_dist_all_reduce(g_pg, tgc_add_scalar(s, 1.0), TGC_DIST_MAX);
    out[1] = tgc_dist_all_reduce(g_pg, in[0], TGC_DIST_AVG);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

static int collectives_rank(int rank, int world, void *arg)
{
    (void)arg;
    g_pg = join(rank, world, 30);
    CHILD_CHECK(g_pg);
    CHILD_CHECK(tgc_dist_rank(g_pg) == rank && tgc_dist_world_size(g_pg) == world);
    CHILD_CHECK(tgc_dist_device(g_pg).type == TGC_DEVICE_CPU);
    CHILD_OK(tgc_dist_status(g_pg));
    float v[7];
    for (int i = 0; i < 7; i++)
        v[i] = (float)((rank + 1) * (i + 1)) + 0.25f * (float)i;
    int64_t n = 7;
    tgc_tensor *x = tgc_from_data(v, sizeof v, &n, 1, TGC_F32, tgc_cpu());
    int tri = world * (world + 1) / 2;
    /* eager: SUM, AVG, MAX, MIN, PROD of f32, SUM and MAX of i64 */
    float got[7];
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, x, TGC_DIST_SUM), got, sizeof got));
    for (int i = 0; i < 7; i++)
        CHILD_CHECK(fabsf(got[i] - ((float)(tri * (i + 1)) + 0.25f * (float)i * (float)world)) <
                    1e-4f);
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, x, TGC_DIST_AVG), got, sizeof got));
    for (int i = 0; i < 7; i++)
        CHILD_CHECK(fabsf(got[i] - ((float)(tri * (i + 1)) / (float)world + 0.25f * (float)i)) <
                    1e-4f);
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, x, TGC_DIST_MAX), got, sizeof got));
    for (int i = 0; i < 7; i++)
        CHILD_CHECK(got[i] == (float)(world * (i + 1)) + 0.25f * (float)i);
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, x, TGC_DIST_MIN), got, sizeof got));
    for (int i = 0; i < 7; i++)
        CHILD_CHECK(got[i] == (float)(i + 1) + 0.25f * (float)i);
    int64_t iv[3] = {rank, 10 * rank, -rank}, ig[3];
    n = 3;
    tgc_tensor *xi = tgc_from_data(iv, sizeof iv, &n, 1, TGC_I64, tgc_cpu());
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, xi, TGC_DIST_SUM), ig, sizeof ig));
    CHILD_CHECK(ig[0] == tri - world && ig[1] == 10 * (tri - world) && ig[2] == world - tri);
    /* a strided (transposed) input */
    int64_t s2[2] = {2, 3};
    float m6[6] = {1, 2, 3, 4, 5, 6}, g6[6];
    tgc_tensor *t = tgc_transpose(tgc_from_data(m6, sizeof m6, s2, 2, TGC_F32, tgc_cpu()), 0, 1);
    CHILD_OK(tgc_copy_to_host(tgc_dist_all_reduce(g_pg, t, TGC_DIST_SUM), g6, sizeof g6));
    const float want6[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++)
        CHILD_CHECK(g6[i] == want6[i] * (float)world);
    /* compiled, on the default backend and on interp: equal to the same ops eagerly */
    for (int b = 0; b < 2; b++) {
        tgc_config c = cfg_for(b ? TGC_BACKEND_INTERP : 0);
        tgc_fn *f = tgc_compile(reduce_fn, "reduce", &c);
        CHILD_CHECK(f);
        for (int call = 0; call < 3; call++) {
            tgc_tensor *outs[2];
            CHILD_OK(tgc_call(f, NULL, &x, 1, outs, 2));
            float a[7], avg[7];
            CHILD_OK(tgc_copy_to_host(outs[0], a, sizeof a));
            CHILD_OK(tgc_copy_to_host(outs[1], avg, sizeof avg));
            for (int i = 0; i < 7; i++) {
                float sum = 2.0f * ((float)(tri * (i + 1)) + 0.25f * (float)i * (float)world);
                CHILD_CHECK(fabsf(a[i] - (sum + 1.0f)) < 1e-3f);
                CHILD_CHECK(fabsf(avg[i] - ((float)(tri * (i + 1)) / (float)world +
                                            0.25f * (float)i)) < 1e-4f);
            }
        }
        tgc_stats st;
        CHILD_OK(tgc_fn_stats(f, &st));
        CHILD_CHECK(st.compiles == 1 && st.eager_fallbacks == 0);
        tgc_fn_free(f);
    }
    CHILD_OK(tgc_dist_barrier(g_pg));
    tgc_dist_free(g_pg);
    return 0;
}

static void test_collectives(void **state)
{
    (void)state;
    for (int world = 1; world <= 3; world++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -f '%s/id'", dir);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(ddp_run_ranks(world, collectives_rank, NULL, NULL), 0);
    }
}

/* ---- one process, several members (tgc_dist_init_local), each driven by a thread ---- */

static void *local_member(void *arg)
{
    tgc_dist *pg = arg;
    float v[3] = {1.0f + (float)tgc_dist_rank(pg), 2, 3}, got[3] = {0, 0, 0};
    int64_t n = 3;
    tgc_scope_push();
    tgc_tensor *x = tgc_from_data(v, sizeof v, &n, 1, TGC_F32, tgc_cpu());
    tgc_tensor *r = tgc_dist_all_reduce(pg, x, TGC_DIST_SUM);
    int ok = r && tgc_copy_to_host(r, got, sizeof got) == TGC_OK && got[0] == 3.0f &&
             got[1] == 4.0f && got[2] == 6.0f;
    tgc_scope_pop();
    return ok ? pg : NULL;
}

static int local_rank_fn(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    (void)arg;
    tgc_device devs[2] = {tgc_cpu(), tgc_cpu()};
    tgc_dist *pg[2] = {NULL, NULL};
    CHILD_OK(tgc_dist_init_local(2, devs, 30, pg));
    CHILD_CHECK(tgc_dist_rank(pg[0]) == 0 && tgc_dist_rank(pg[1]) == 1);
    CHILD_CHECK(tgc_dist_world_size(pg[1]) == 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHILD_CHECK(pthread_create(&t[i], NULL, local_member, pg[i]) == 0);
    for (int i = 0; i < 2; i++) {
        void *res = NULL;
        pthread_join(t[i], &res);
        CHILD_CHECK(res == pg[i]);
    }
    tgc_dist_free(pg[0]);
    tgc_dist_free(pg[1]);
    tgc_dist *none[1] = {(tgc_dist *)1};
    CHILD_CHECK(tgc_dist_init_local(0, devs, 30, none) == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(tgc_dist_init_local(2, NULL, 30, pg) == TGC_ERR_INVALID_ARG);
    return 0;
}

static void test_local_group(void **state)
{
    (void)state;
    assert_int_equal(ddp_run_ranks(1, local_rank_fn, NULL, NULL), 0);
}

/* ---- training: N ranks with global batch B equal 1 rank with batch B ---- */

typedef struct train_case {
    int world, batch, steps;
    int compiled;    /* 0: eager */
    int accum;       /* micro-batches per step (>= 1) */
    size_t bucket;   /* ddp bucket_bytes (0: default) */
    int mode;        /* tgc_mode */
    const char *tag; /* result file prefix */
} train_case;

static void remove_id(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/id", dir);
    remove(path);
}

/* One rank of the case (world 0: the single-process reference, no process group). */
static int train_rank(int rank, int world, void *arg)
{
    const train_case *tc = arg;
    int dist = tc->world > 0 && world > 0;
    int per = tc->batch / (dist ? world : 1);
    tgc_module *m = ddp_model(dist ? 1000 + (uint64_t)rank : 1000, tgc_cpu());
    tgc_ddp *d = NULL;
    if (dist) {
        g_pg = join(rank, world, 30);
        CHILD_CHECK(g_pg);
        tgc_ddp_opts o = {tc->bucket, tc->bucket, 0};
        d = tgc_ddp_create(g_pg, m, &o);
        CHILD_CHECK(d);
        if (tc->bucket)
            CHILD_CHECK(tgc_ddp_num_buckets(d) == 4); /* one parameter each */
        else
            CHILD_CHECK(tgc_ddp_num_buckets(d) == 1 && tgc_ddp_bucket_size(d, 0) == 4);
        CHILD_CHECK(tgc_ddp_group(d) == g_pg && tgc_ddp_sync(d) == 1);
    }
    tgc_sgd_opts so = {0};
    so.lr = 0.1;
    so.momentum = 0.9;
    ddp_opt = tgc_sgd(m, &so);
    CHILD_CHECK(ddp_opt);
    CHILD_OK(tgc_zero_grad(m));
    tgc_config c = cfg_for(0);
    c.mode = (tgc_mode)tc->mode;
    tgc_fn *f_step = NULL, *f_acc = NULL;
    if (tc->compiled) {
        f_step = tgc_compile(ddp_train_step, "train_step", &c);
        f_acc = tgc_compile(ddp_train_step, "accumulate", &c);
        CHILD_CHECK(f_step && f_acc);
    }
    int accum = dist ? tc->accum : 1;
    double losses[64];
    for (int s = 0; s < tc->steps; s++) {
        double loss_sum = 0;
        for (int k = 0; k < accum; k++) {
            tgc_scope_push();
            int micro = per / accum, last = k == accum - 1;
            tgc_tensor *x, *y;
            ddp_batch(s, (dist ? rank * per : 0) + k * micro, micro, tgc_cpu(), &x, &y);
            ddp_loss_scale = 1.0 / accum;
            ddp_do_step = last;
            if (d)
                CHILD_OK(tgc_ddp_set_sync(d, last));
            tgc_tensor *in[2] = {x, y}, *loss = NULL;
            if (tc->compiled)
                CHILD_OK(tgc_call(last ? f_step : f_acc, m, in, 2, &loss, 1));
            else
                CHILD_OK(ddp_train_step(m, in, 2, &loss, 1));
            loss_sum += tgc_item_f64(loss) / accum;
            tgc_scope_pop();
        }
        losses[s] = loss_sum;
    }
    double params[DDP_NPARAM];
    ddp_params_of(m, params);
    char name[64];
    snprintf(name, sizeof name, "%s.loss.%d", tc->tag, dist ? rank : -1);
    ddp_write_doubles(dir, name, losses, tc->steps);
    snprintf(name, sizeof name, "%s.param.%d", tc->tag, dist ? rank : -1);
    ddp_write_doubles(dir, name, params, DDP_NPARAM);
    if (tc->compiled) {
        tgc_stats st;
        if (dist && tc->bucket) {
            /* overlap: the first bucket's all-reduce starts before the backward of the first
             * layer (its weight gradient, the last matmul) is computed, and the joins come
             * after all of the backward */
            char *g = tgc_fn_graph(f_step, 0, 0);
            const char *first_ar = strstr(g, "all_reduce("), *last_mm = NULL, *p = g;
            while ((p = strstr(p, "matmul(")))
                last_mm = p++;
            const char *first_wait = strstr(g, "comm_wait(");
            CHILD_CHECK(first_ar && last_mm && first_wait);
            CHILD_CHECK(first_ar < last_mm && last_mm < first_wait);
            tgc_free(g);
        }
        char *ex = tgc_fn_explain(f_step);
        CHILD_CHECK(!dist || strstr(ex, tc->bucket ? "collectives: 4 all_reduce"
                                                   : "collectives: 1 all_reduce"));
        tgc_free(ex);
        CHILD_OK(tgc_fn_stats(f_step, &st));
        CHILD_CHECK(st.compiles == 1 && st.eager_fallbacks == 0);
        CHILD_OK(tgc_fn_stats(f_acc, &st));
        CHILD_CHECK(st.compiles == (uint64_t)(accum > 1));
        tgc_fn_free(f_step);
        tgc_fn_free(f_acc);
    }
    tgc_optim_free(ddp_opt);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    return 0;
}

static int reference_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    train_case ref = *(const train_case *)arg;
    ref.world = 0;
    return train_rank(0, 0, &ref);
}

static void check_case(const train_case *tc)
{
    remove_id();
    assert_int_equal(ddp_run_ranks(tc->world, train_rank, (void *)tc, NULL), 0);
    assert_int_equal(ddp_run_ranks(1, reference_rank, (void *)tc, NULL), 0);
    char name[64];
    double ref_loss[64], ref_param[DDP_NPARAM], p0[DDP_NPARAM];
    snprintf(name, sizeof name, "%s.loss.-1", tc->tag);
    assert_true(ddp_read_doubles(dir, name, ref_loss, tc->steps));
    snprintf(name, sizeof name, "%s.param.-1", tc->tag);
    assert_true(ddp_read_doubles(dir, name, ref_param, DDP_NPARAM));
    double mean[64] = {0}, worst = 0;
    for (int r = 0; r < tc->world; r++) {
        double l[64], p[DDP_NPARAM];
        snprintf(name, sizeof name, "%s.loss.%d", tc->tag, r);
        assert_true(ddp_read_doubles(dir, name, l, tc->steps));
        snprintf(name, sizeof name, "%s.param.%d", tc->tag, r);
        assert_true(ddp_read_doubles(dir, name, p, DDP_NPARAM));
        for (int s = 0; s < tc->steps; s++)
            mean[s] += l[s] / tc->world;
        if (r == 0)
            memcpy(p0, p, sizeof p0);
        else /* every rank applies the same averaged gradients: the same bits */
            assert_memory_equal(p, p0, sizeof p0);
    }
    for (int s = 0; s < tc->steps; s++) {
        double e = fabs(mean[s] - ref_loss[s]) / fmax(1e-3, fabs(ref_loss[s]));
        worst = fmax(worst, e);
        if (e > 1e-5)
            fail_msg("%s: step %d: mean loss over %d ranks %.8f, one rank with the whole batch "
                     "%.8f",
                     tc->tag, s, tc->world, mean[s], ref_loss[s]);
    }
    for (int i = 0; i < DDP_NPARAM; i++)
        if (fabs(p0[i] - ref_param[i]) > 1e-5 * fmax(1.0, fabs(ref_param[i])))
            fail_msg("%s: parameter %d: %.8f on the ranks, %.8f with one rank", tc->tag, i, p0[i],
                     ref_param[i]);
    printf("%s: %d ranks x batch %d = batch %d over %d steps: max relative loss difference "
           "%.2e\n",
           tc->tag, tc->world, tc->batch / tc->world, tc->batch, tc->steps, worst);
}

static void test_train_compiled_two_ranks(void **state)
{
    (void)state;
    train_case tc = {2, 8, 12, 1, 1, 0, TGC_MODE_DEFAULT, "compiled2"};
    check_case(&tc);
}

static void test_train_eager_two_ranks(void **state)
{
    (void)state;
    train_case tc = {2, 8, 6, 0, 1, 0, TGC_MODE_DEFAULT, "eager2"};
    check_case(&tc);
}

static void test_train_three_ranks_small_buckets(void **state)
{
    (void)state;
    train_case tc = {3, 12, 8, 1, 1, 64, TGC_MODE_DEFAULT, "buckets3"};
    check_case(&tc);
}

static void test_train_accumulation(void **state)
{
    (void)state;
    train_case tc = {2, 8, 8, 1, 2, 0, TGC_MODE_DEFAULT, "accum2"};
    check_case(&tc);
}

static void test_train_accumulation_eager(void **state)
{
    (void)state;
    train_case tc = {2, 8, 4, 0, 2, 0, TGC_MODE_DEFAULT, "accum2eager"};
    check_case(&tc);
}

/* ---- the sync flag is a guard with a reason ---- */

static int sync_rank(int rank, int world, void *arg)
{
    (void)arg;
    g_pg = join(rank, world, 30);
    CHILD_CHECK(g_pg);
    tgc_module *m = ddp_model(7, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(g_pg, m, NULL);
    CHILD_CHECK(d);
    tgc_sgd_opts so = {0};
    so.lr = 0.05;
    ddp_opt = tgc_sgd(m, &so);
    CHILD_OK(tgc_zero_grad(m));
    tgc_config c = cfg_for(0);
    tgc_fn *f = tgc_compile(ddp_train_step, "step", &c);
    ddp_loss_scale = 1.0;
    ddp_do_step = 1;
    const int flags[5] = {1, 0, 1, 0, 1};
    for (int s = 0; s < 5; s++) {
        tgc_scope_push();
        tgc_tensor *x, *y, *loss = NULL;
        ddp_batch(s, rank * 4, 4, tgc_cpu(), &x, &y);
        CHILD_OK(tgc_ddp_set_sync(d, flags[s]));
        CHILD_CHECK(tgc_ddp_sync(d) == flags[s]);
        tgc_tensor *in[2] = {x, y};
        CHILD_OK(tgc_call(f, m, in, 2, &loss, 1));
        tgc_scope_pop();
    }
    tgc_stats st;
    CHILD_OK(tgc_fn_stats(f, &st));
    CHILD_CHECK(st.compiles == 2 && st.recompiles == 1 && st.cache_hits == 3);
    CHILD_CHECK(strstr(st.last_recompile_reason, "self.ddp sync changed (on -> off)"));
    tgc_fn_free(f);
    tgc_optim_free(ddp_opt);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    return 0;
}

static void test_sync_flag_recompiles_once(void **state)
{
    (void)state;
    remove_id();
    assert_int_equal(ddp_run_ranks(2, sync_rank, NULL, NULL), 0);
}

/* ---- creation: broadcast and structure check ---- */

static int broadcast_rank(int rank, int world, void *arg)
{
    int no_bcast = *(const int *)arg;
    g_pg = join(rank, world, 30);
    CHILD_CHECK(g_pg);
    tgc_module *m = ddp_model(50 + (uint64_t)rank, tgc_cpu());
    tgc_ddp_opts o = {0, 0, no_bcast};
    tgc_ddp *d = tgc_ddp_create(g_pg, m, &o);
    CHILD_CHECK(d);
    double p[DDP_NPARAM];
    ddp_params_of(m, p);
    char name[64];
    snprintf(name, sizeof name, "bcast%d.%d", no_bcast, rank);
    ddp_write_doubles(dir, name, p, DDP_NPARAM);
    /* a second wrapper over the same module is refused */
    tgc_clear_error();
    CHILD_CHECK(!tgc_ddp_create(g_pg, m, NULL) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    return 0;
}

static void test_broadcast_from_rank0(void **state)
{
    (void)state;
    for (int nb = 0; nb < 2; nb++) {
        remove_id();
        assert_int_equal(ddp_run_ranks(3, broadcast_rank, &nb, NULL), 0);
        double p0[DDP_NPARAM], p[DDP_NPARAM];
        char name[64];
        snprintf(name, sizeof name, "bcast%d.0", nb);
        assert_true(ddp_read_doubles(dir, name, p0, DDP_NPARAM));
        for (int r = 1; r < 3; r++) {
            snprintf(name, sizeof name, "bcast%d.%d", nb, r);
            assert_true(ddp_read_doubles(dir, name, p, DDP_NPARAM));
            if (nb)
                assert_memory_not_equal(p, p0, sizeof p); /* no_broadcast keeps its own */
            else
                assert_memory_equal(p, p0, sizeof p);
        }
    }
}

static int mismatch_rank(int rank, int world, void *arg)
{
    (void)arg;
    g_pg = join(rank, world, 30);
    CHILD_CHECK(g_pg);
    tgc_module *m = ddp_model(3, tgc_cpu());
    if (rank == 1) { /* one more parameter on rank 1 */
        int64_t n = 3;
        float v[3] = {1, 2, 3};
        tgc_scope_push();
        CHILD_CHECK(
            tgc_module_param(m, "extra", tgc_from_data(v, sizeof v, &n, 1, TGC_F32, tgc_cpu())));
        tgc_scope_pop();
    }
    tgc_clear_error();
    tgc_ddp *d = tgc_ddp_create(g_pg, m, NULL);
    CHILD_CHECK(!d && tgc_last_status() == TGC_ERR_MISMATCH);
    CHILD_CHECK(strstr(tgc_last_error(), "disagree on the structure of module 'mlp'"));
    CHILD_OK(tgc_dist_status(g_pg)); /* the group itself still works */
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    return 0;
}

static void test_structure_mismatch(void **state)
{
    (void)state;
    remove_id();
    assert_int_equal(ddp_run_ranks(2, mismatch_rank, NULL, NULL), 0);
}

/* ---- failure statuses ---- */

static int errors_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    (void)arg;
    tgc_dist_opts o = tgc_dist_opts_default();
    o.device = tgc_cpu();
    o.rank = 2;
    o.world_size = 2;
    o.id_file = "/nonexistent/dir/id";
    tgc_clear_error();
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(strstr(tgc_last_error(), "rank 2 is outside a world of size 2"));
    o.rank = 0;
    o.id_file = NULL; /* TGC_DIST_ID / TGC_DIST_ID_FILE are unset in the test */
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(strstr(tgc_last_error(), "no unique id"));
    o.id = "zz";
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    o.id = NULL;
    o.id_file = "/nonexistent/dir/id";
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_IO);
    tgc_dist_opts bad = o;
    bad.struct_size = 8;
    CHILD_CHECK(!tgc_dist_init(&bad) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    o.rank = -1;
    o.world_size = -1;
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(strstr(tgc_last_error(), "no rank"));
    setenv("TGC_RANK", "x1", 1);
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(strstr(tgc_last_error(), "TGC_RANK=x1"));
    unsetenv("TGC_RANK");
    char buf[8];
    CHILD_CHECK(tgc_dist_unique_id(buf, sizeof buf) == TGC_ERR_INVALID_ARG);
    char id[TGC_DIST_ID_CHARS + 1];
    CHILD_OK(tgc_dist_unique_id(id, sizeof id));
    CHILD_CHECK(strlen(id) == TGC_DIST_ID_CHARS);
    /* a world of one from the environment, with an id in TGC_DIST_ID */
    setenv("TGC_RANK", "0", 1);
    setenv("TGC_WORLD_SIZE", "1", 1);
    setenv("TGC_DIST_ID", id, 1);
    o.id_file = NULL;
    tgc_dist *pg = tgc_dist_init(&o);
    CHILD_CHECK(pg && tgc_dist_rank(pg) == 0 && tgc_dist_world_size(pg) == 1);
    /* collectives' own errors */
    int64_t n = 2;
    uint8_t bv[2] = {1, 0};
    tgc_tensor *b = tgc_from_data(bv, sizeof bv, &n, 1, TGC_BOOL, tgc_cpu());
    CHILD_CHECK(!tgc_dist_all_reduce(pg, b, TGC_DIST_SUM) && tgc_last_status() == TGC_ERR_DTYPE);
    int64_t iv[2] = {1, 2};
    tgc_tensor *xi = tgc_from_data(iv, sizeof iv, &n, 1, TGC_I64, tgc_cpu());
    CHILD_CHECK(!tgc_dist_all_reduce(pg, xi, TGC_DIST_AVG) && tgc_last_status() == TGC_ERR_DTYPE);
    CHILD_CHECK(!tgc_dist_all_reduce(pg, xi, (tgc_dist_op)9) &&
                tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(!tgc_dist_all_reduce(NULL, xi, TGC_DIST_SUM) &&
                tgc_last_status() == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(tgc_dist_broadcast_(pg, xi, 1) == TGC_ERR_INVALID_ARG);
    CHILD_OK(tgc_dist_broadcast_(pg, xi, 0));
    CHILD_CHECK(tgc_dist_status(NULL) == TGC_ERR_INVALID_ARG);
    CHILD_CHECK(!tgc_ddp_create(pg, NULL, NULL) && tgc_last_status() == TGC_ERR_INVALID_ARG);
    tgc_dist_free(pg);
    tgc_dist_free(NULL);
    tgc_ddp_free(NULL);
    return 0;
}

static void test_error_statuses(void **state)
{
    (void)state;
    assert_int_equal(ddp_run_ranks(1, errors_rank, NULL, NULL), 0);
}

static int missing_library_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    (void)arg;
    setenv("TGC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    char id[TGC_DIST_ID_CHARS + 1];
    CHILD_CHECK(tgc_dist_unique_id(id, sizeof id) == TGC_ERR_UNSUPPORTED);
    CHILD_CHECK(strstr(tgc_last_error(), "/nonexistent/libnccl.so.2"));
    tgc_dist_opts o = tgc_dist_opts_default();
    o.device = tgc_cpu();
    o.rank = 0;
    o.world_size = 1;
    CHILD_CHECK(!tgc_dist_init(&o) && tgc_last_status() == TGC_ERR_UNSUPPORTED);
    return 0;
}

static void test_missing_library(void **state)
{
    (void)state;
    assert_int_equal(ddp_run_ranks(1, missing_library_rank, NULL, NULL), 0);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int never_joins_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    int mode = *(const int *)arg;
    double t0 = now_s();
    tgc_clear_error();
    /* mode 0: rank 0 of 2 alone (its peer never joins); 1: rank 1 alone (no id file) */
    tgc_dist *pg = join(mode, 2, 0.5);
    double dt = now_s() - t0;
    CHILD_CHECK(!pg && tgc_last_status() == TGC_ERR_TIMEOUT);
    CHILD_CHECK(dt >= 0.4 && dt < 10.0);
    return 0;
}

static void test_peer_never_joins(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        remove_id();
        assert_int_equal(ddp_run_ranks(1, never_joins_rank, &mode, NULL), 0);
    }
}

/* A peer that dies mid-training: the survivor's next step fails with TGC_ERR_TIMEOUT within
 * the timeout instead of hanging, and the group stays failed. */
static int dies_rank(int rank, int world, void *arg)
{
    (void)arg;
    g_pg = join(rank, world, 1.0);
    CHILD_CHECK(g_pg);
    tgc_module *m = ddp_model(9, tgc_cpu());
    tgc_ddp *d = tgc_ddp_create(g_pg, m, NULL);
    CHILD_CHECK(d);
    tgc_sgd_opts so = {0};
    so.lr = 0.05;
    ddp_opt = tgc_sgd(m, &so);
    CHILD_OK(tgc_zero_grad(m));
    tgc_config c = cfg_for(0);
    tgc_fn *f = tgc_compile(ddp_train_step, "step", &c);
    ddp_loss_scale = 1.0;
    ddp_do_step = 1;
    for (int s = 0; s < 3; s++) {
        if (rank == 1 && s == 2)
            _exit(0); /* dies without a word */
        tgc_scope_push();
        tgc_tensor *x, *y, *loss = NULL;
        ddp_batch(s, rank * 4, 4, tgc_cpu(), &x, &y);
        tgc_tensor *in[2] = {x, y};
        double t0 = now_s();
        tgc_status st = tgc_call(f, m, in, 2, &loss, 1);
        if (s < 2) {
            CHILD_OK(st);
        } else {
            CHILD_CHECK(st == TGC_ERR_TIMEOUT);
            CHILD_CHECK(now_s() - t0 < 30.0);
            CHILD_CHECK(tgc_dist_status(g_pg) == TGC_ERR_TIMEOUT);
            tgc_tensor *again = NULL;
            CHILD_CHECK(tgc_call(f, m, in, 2, &again, 1) == TGC_ERR_TIMEOUT);
        }
        tgc_scope_pop();
    }
    tgc_fn_free(f);
    tgc_optim_free(ddp_opt);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    return 0;
}

static void test_peer_dies(void **state)
{
    (void)state;
    remove_id();
    assert_int_equal(ddp_run_ranks(2, dies_rank, NULL, NULL), 0);
}

/* Last (the parent forks no rank after it): a world of one in this process, so the
 * sanitizer build checks the whole path for leaks: init, the wrapper, eager and compiled
 * steps, and every free. */
static void test_world_of_one_in_process(void **state)
{
    (void)state;
    char id[TGC_DIST_ID_CHARS + 1];
    assert_int_equal(tgc_dist_unique_id(id, sizeof id), TGC_OK);
    tgc_dist_opts o = tgc_dist_opts_default();
    o.rank = 0;
    o.world_size = 1;
    o.device = tgc_cpu();
    o.id = id;
    g_pg = tgc_dist_init(&o);
    assert_non_null(g_pg);
    tgc_module *m = ddp_model(77, tgc_cpu());
    tgc_ddp_opts dop = {64, 64, 0};
    tgc_ddp *d = tgc_ddp_create(g_pg, m, &dop);
    assert_non_null(d);
    tgc_sgd_opts so = {0};
    so.lr = 0.05;
    ddp_opt = tgc_sgd(m, &so);
    assert_int_equal(tgc_zero_grad(m), TGC_OK);
    tgc_config c = cfg_for(0);
    tgc_fn *f = tgc_compile(ddp_train_step, "step", &c);
    ddp_loss_scale = 1.0;
    ddp_do_step = 1;
    for (int s = 0; s < 4; s++) {
        tgc_scope_push();
        tgc_tensor *x, *y, *loss = NULL;
        ddp_batch(s, 0, 4, tgc_cpu(), &x, &y);
        tgc_tensor *in[2] = {x, y};
        assert_int_equal(
            s % 2 ? tgc_call(f, m, in, 2, &loss, 1) : ddp_train_step(m, in, 2, &loss, 1), TGC_OK);
        assert_true(isfinite(tgc_item_f64(loss)));
        tgc_scope_pop();
    }
    tgc_fn_free(f);
    tgc_optim_free(ddp_opt);
    tgc_ddp_free(d);
    tgc_module_free(m);
    tgc_dist_free(g_pg);
    g_pg = NULL;
}

int main(void)
{
    unsetenv("TGC_DIST_ID");
    unsetenv("TGC_DIST_ID_FILE");
    unsetenv("TGC_RANK");
    unsetenv("TGC_WORLD_SIZE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_local_group),
        cmocka_unit_test(test_train_compiled_two_ranks),
        cmocka_unit_test(test_train_eager_two_ranks),
        cmocka_unit_test(test_train_three_ranks_small_buckets),
        cmocka_unit_test(test_train_accumulation),
        cmocka_unit_test(test_train_accumulation_eager),
        cmocka_unit_test(test_sync_flag_recompiles_once),
        cmocka_unit_test(test_broadcast_from_rank0),
        cmocka_unit_test(test_structure_mismatch),
        cmocka_unit_test(test_error_statuses),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_peer_never_joins),
        cmocka_unit_test(test_peer_dies),
        cmocka_unit_test(test_world_of_one_in_process),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
