/* Data-parallel training benchmark (include/tgc/dist.h): the training step of ResNet18
 * (torchvision layout, width 64) and of the seed CNN at batch 64 PER RANK, 3x32x32, Adam
 * (lr 1e-3), one step = forward, cross entropy, backward (the gradients averaged over the
 * ranks by tgc_ddp's bucketed all-reduces), Adam, zero_grad, compiled in DEFAULT and
 * REDUCE_OVERHEAD mode (the latter on a GPU only), on N = 1, 2, ... ranks.
 *
 *   bench_ddp [--gpus G | --ranks G [--device cpu|cuda]] [--counts 1,2,...] [--only cnn,resnet18]
 *             [--modes default,reduce-overhead] [--iters 30] [--warmup 5] [--batch 64]
 *             [--precision highest|high|medium] [--threads N] [--timeout S]
 *             [--torch-ref [--torch-script tests/gpu/torch_ddp.py] [--torch-modes eager,compile]]
 *             [--torch-log FILE]
 *   bench_ddp --check-losses [--gpus G | --ranks G --device cpu] [--counts ...]
 *             [--check-model mlp|cnn] [--check-batch 32] [--check-steps 50] [--accum K]
 *
 * Ranks. For each N of --counts (default 1..G) the program forks N children (the parent
 * never touches a device: a fork after CUDA is initialized is unsafe), rank r on cuda:r
 * (--gpus) or on --device (--ranks; the host needs an NCCL stand-in that reduces host
 * memory: TGC_NCCL_LIBRARY=build/tests/dist/fake_nccl/libnccl.so.2), joined through a fresh
 * rendezvous file in a temporary directory. Each child runs every measurement of the run
 * on its group and reports through a pipe; the parent prints. A rank that fails makes the
 * parent stop the others (they would otherwise wait out --timeout, 120 s here).
 *
 * Measurements. Each rank steps --warmup times (the first call compiles), waits in a
 * tgc_dist_barrier, then times exactly --iters steps (the same number on every rank: the
 * ranks meet in every all-reduce), each followed by tgc_cuda_synchronize. Per rank: the
 * median step time and images/s = iters * batch / the timed loop's wall time; the total is
 * the sum over the ranks, and the scaling ratio total(N) / total(1) (the issue asks for
 * >= 1.8x on 2 GPUs for ResNet18). One line per measurement:
 *   resnet18_ddp_b64  cuda  default          N=2 rank 1   4.61 ms  13880 images/s ...
 *   resnet18_ddp_b64  cuda  default          N=2 total  27790 images/s  scaling 1.96x
 * --torch-ref runs tests/gpu/torch_ddp.py under torchrun (python3 -m torch.distributed.run
 * --standalone --nproc_per_node N) for the same counts in this command, after libtgc's
 * measurements, and prints PyTorch DDP's images/s (eager DDP and torch.compile of the DDP
 * module, at the same precision: highest = fp32 without TF32, high = TF32) and the ratios
 * tgc / torch; --torch-log FILE reads torch_ddp.py's output from an earlier run instead.
 * Nothing here passes or fails on a time: these are measurements (not run by ctest).
 *
 * --check-losses: the losses of N-rank data-parallel training with global batch B
 * (--check-batch; each rank takes its contiguous slice B/N, in --accum micro-batches with
 * tgc_ddp_set_sync off for all but the last) against one process without a group training
 * with batch B, over --check-steps steps of SGD (lr 0.05) on four fixed synthetic batches
 * in turn, with a model WITHOUT batch norm (batch-norm statistics are per rank in DDP, as
 * in PyTorch): --check-model mlp (3072-64-10, the default on the host) or cnn (the seed CNN,
 * the default on a GPU). Prints the max relative difference of the step losses (the mean of
 * the ranks' slice losses against the reference's), and of the final parameter sums, and
 * whether the ranks' parameters are identical; exits 1 when a loss differs by more than
 * 1e-4 relative (fp32 rounding of a different summation order stays well below it). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mkdtemp, kill, popen */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "tgc/cuda.h"
#include "tgc/dist.h"
#include "tgc/tgc.h"

#include "examples/models/resnet18.h"
#include "examples/models/seed_cnn.h"

#define MAX_COUNTS 16
#define MAX_STEPS  512
#define CHECK_TOL  1e-4

enum { MODEL_RESNET18 = 0, MODEL_CNN, MODEL_MLP, N_MODELS };
static const char *const model_names[N_MODELS] = {"resnet18", "cnn", "mlp"};
static const char *const bench_names[N_MODELS] = {"resnet18_ddp_b", "seed_cnn_ddp_b", "mlp_ddp_b"};

typedef struct options {
    tgc_device dev;
    int max_ranks, counts[MAX_COUNTS], n_counts;
    const char *only, *modes, *torch_script, *torch_modes, *torch_log;
    int iters, warmup, batch, threads, torch_ref;
    double timeout_s;
    tgc_matmul_precision precision;
    int check, check_model, check_batch, check_steps, accum;
} options;

/* What a rank reports to the parent (one write of less than PIPE_BUF bytes: atomic). */
enum { REC_PERF = 1, REC_LOSS, REC_PARAMS };
typedef struct rec {
    int kind, rank, world, model, mode, step;
    double step_ms, images_s, first_ms, value, value_abs;
    int compiles, variants, eager_calls, buckets;
} rec;

/* ---- the steps ---- */
static tgc_optim *g_opt;
static tgc_model_fn g_fwd;
static tgc_ddp *g_ddp;
static int g_accum = 1;

/* forward, cross entropy (of loss / accum), backward, and with sync on the update */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (n_in != 2 || n_out != 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL, *loss = NULL;
    tgc_status st = g_fwd(self, in, 1, &logits, 1);
    if (st == TGC_OK) {
        loss = tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, -100, 0.0);
        tgc_tensor *scaled = loss && g_accum > 1 ? tgc_mul_scalar(loss, 1.0 / g_accum) : loss;
        st = scaled ? tgc_backward(scaled) : tgc_last_status();
    }
    int update = !g_ddp || tgc_ddp_sync(g_ddp);
    if (st == TGC_OK && update)
        st = tgc_optim_step(g_opt);
    if (st == TGC_OK && update)
        st = tgc_optim_zero_grad(g_opt);
    out[0] = st == TGC_OK ? tgc_detach(loss) : NULL;
    return st;
}

/* The check's MLP: flatten - fc1 (3072 -> 64) - relu - fc2 (64 -> 10), no batch norm. */
static tgc_status mlp_forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                              int n_out)
{
    if (n_in < 1 || n_out < 1)
        return TGC_ERR_INVALID_ARG;
    tgc_module *f1 = tgc_module_get_child(self, "fc1"), *f2 = tgc_module_get_child(self, "fc2");
    tgc_tensor *x = tgc_flatten(in[0], 1, -1);
    x = tgc_relu(tgc_linear(x, tgc_module_get(f1, "weight"), tgc_module_get(f1, "bias")));
    out[0] = tgc_linear(x, tgc_module_get(f2, "weight"), tgc_module_get(f2, "bias"));
    return out[0] ? TGC_OK : tgc_last_status();
}

static const char *const mlp_layers[] = {"fc1", "fc2", NULL};
static const char *const cnn_layers[] = {"conv1", "conv2", "conv3", "fc", NULL};

static tgc_module *make_model(int model, tgc_device dev)
{
    tgc_module *net = NULL;
    if (model == MODEL_RESNET18) {
        resnet18_config c = resnet18_default_config();
        net = resnet18_create(&c);
        g_fwd = resnet18_forward;
    } else if (model == MODEL_CNN) {
        tgc_manual_seed(1234);
        net = seed_cnn_create();
        g_fwd = seed_cnn_forward;
    } else {
        tgc_manual_seed(1234);
        net = tgc_module_create("MLP", NULL);
        if (!net || !seed_cnn_layer(net, "fc1", 3072, 64, 3072, 0) ||
            !seed_cnn_layer(net, "fc2", 64, 10, 64, 0)) {
            tgc_module_free(net);
            net = NULL;
        }
        g_fwd = mlp_forward;
    }
    if (!net) {
        fprintf(stderr, "model: %s\n", tgc_last_error());
        return NULL;
    }
    tgc_module_train(net, 1);
    if (dev.type != TGC_DEVICE_CPU && tgc_module_to(net, dev) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        tgc_module_free(net);
        return NULL;
    }
    return net;
}

static int sync_dev(tgc_device d)
{
    return d.type == TGC_DEVICE_CPU || tgc_cuda_synchronize(d.index) == TGC_OK;
}

static tgc_tensor *to_dev(tgc_tensor *t, tgc_device d)
{
    return t && d.type != TGC_DEVICE_CPU ? tgc_to(t, d) : t;
}

static int put(int fd, const rec *r)
{
    return write(fd, r, sizeof *r) == (ssize_t)sizeof *r;
}

static const char *mode_name(int mode)
{
    return mode == TGC_MODE_REDUCE_OVERHEAD ? "reduce-overhead" : "default";
}

/* ---- one rank of a timing run ---- */

/* One call of the compiled step on batch i % 4; 1 on success. */
static int one_step(tgc_fn *f, tgc_module *net, tgc_tensor **x, tgc_tensor **y, int i,
                    tgc_device dev)
{
    tgc_scope_push();
    tgc_tensor *in[2] = {x[i % 4], y[i % 4]}, *loss = NULL;
    tgc_status st = tgc_call(f, net, in, 2, &loss, 1);
    int ok = st == TGC_OK && sync_dev(dev);
    tgc_scope_pop();
    if (!ok)
        fprintf(stderr, "compiled step: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
    return ok;
}

static int perf_one(const options *o, tgc_dist *pg, int model, tgc_mode mode, int fd)
{
    tgc_device dev = tgc_dist_device(pg);
    int rank = tgc_dist_rank(pg), ok = 0;
    tgc_module *net = make_model(model, dev);
    tgc_fn *f = NULL;
    tgc_tensor *x[4] = {NULL}, *y[4] = {NULL};
    if (!net)
        return 0;
    tgc_scope_push();
    g_ddp = tgc_ddp_create(pg, net, NULL);
    g_opt = g_ddp ? tgc_adam(net, &(tgc_adam_opts){.lr = 1e-3}) : NULL;
    if (!g_opt) {
        fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, g_ddp ? "tgc_adam" : "tgc_ddp_create",
                tgc_last_error(), tgc_status_str(tgc_last_status()));
        goto done;
    }
    g_accum = 1;
    tgc_manual_seed(99 + (uint64_t)rank); /* each rank its own data */
    int64_t xs[4] = {o->batch, 3, 32, 32}, ys[1] = {o->batch};
    for (int k = 0; k < 4; k++) {
        tgc_tensor *u = tgc_mul_scalar(tgc_rand(ys, 1, TGC_F32, tgc_cpu()), 10.0);
        x[k] = to_dev(tgc_randn(xs, 4, TGC_F32, tgc_cpu()), dev);
        y[k] = to_dev(tgc_clamp(tgc_cast(u, TGC_I64), 0, 9), dev);
        if (!x[k] || !y[k]) {
            fprintf(stderr, "inputs: %s\n", tgc_last_error());
            goto done;
        }
    }
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = o->threads;
    cfg.mode = mode;
    cfg.matmul_precision = o->precision;
    f = tgc_compile(train_step, "ddp_train_step", &cfg);
    if (!f) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        goto done;
    }
    double t0 = now();
    if (!one_step(f, net, x, y, 0, dev))
        goto done;
    double first_ms = 1e3 * (now() - t0);
    for (int i = 1; i < o->warmup; i++)
        if (!one_step(f, net, x, y, i, dev))
            goto done;
    if (tgc_dist_barrier(pg) != TGC_OK) {
        fprintf(stderr, "rank %d: tgc_dist_barrier: %s\n", rank, tgc_last_error());
        goto done;
    }
    double t[MAX_STEPS], start = now();
    for (int i = 0; i < o->iters; i++) {
        double s = now();
        if (!one_step(f, net, x, y, i, dev))
            goto done;
        t[i] = 1e3 * (now() - s);
    }
    double wall = now() - start;
    rec r = {REC_PERF,
             rank,
             tgc_dist_world_size(pg),
             model,
             (int)mode,
             0,
             median(t, o->iters),
             (double)o->iters * o->batch / wall,
             first_ms,
             0,
             0,
             0,
             0,
             0,
             tgc_ddp_num_buckets(g_ddp)};
    tgc_stats s;
    if (tgc_fn_stats(f, &s) == TGC_OK) {
        r.compiles = (int)s.compiles;
        r.variants = s.variants;
        r.eager_calls = (int)s.eager_fallbacks;
    }
    ok = put(fd, &r);
done:
    tgc_scope_pop();
    tgc_fn_free(f);
    tgc_ddp_free(g_ddp);
    g_ddp = NULL;
    tgc_optim_free(g_opt);
    g_opt = NULL;
    tgc_module_free(net);
    return ok;
}

static int wanted(const char *list, const char *key)
{
    if (!list)
        return 1;
    size_t n = strlen(key);
    for (const char *p = list; (p = strstr(p, key)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

static int mode_wanted(const options *o, tgc_mode mode)
{
    if (mode == TGC_MODE_REDUCE_OVERHEAD && o->dev.type == TGC_DEVICE_CPU)
        return 0; /* CUDA graphs */
    return wanted(o->modes, mode_name(mode));
}

typedef int (*rank_fn)(const options *o, tgc_dist *pg, int rank, int fd);

static int perf_rank(const options *o, tgc_dist *pg, int rank, int fd)
{
    (void)rank;
    int ok = 1;
    for (int m = MODEL_RESNET18; ok && m <= MODEL_CNN; m++)
        for (int mode = TGC_MODE_DEFAULT; ok && mode <= TGC_MODE_REDUCE_OVERHEAD; mode++)
            if (wanted(o->only, model_names[m]) && mode_wanted(o, (tgc_mode)mode))
                ok = perf_one(o, pg, m, (tgc_mode)mode, fd);
    return ok;
}

/* ---- one rank of the loss check (pg NULL: the reference process, batch B) ---- */

/* Rows [row0, row0 + rows) of fixed global batch q (class-dependent inputs). */
static void check_fill(int q, int64_t row0, int64_t rows, float *x, int64_t *y)
{
    for (int64_t i = 0; i < rows; i++) {
        uint64_t s = 0x5eedull ^ (0x9e3779b97f4a7c15ull * (uint64_t)(q * 100003 + row0 + i + 1));
        s ^= s >> 29;
        s *= 0xbf58476d1ce4e5b9ull;
        int64_t label = (int64_t)((s >> 33) % 10);
        y[i] = label;
        for (int j = 0; j < 3072; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            double u = (double)(s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
            x[(size_t)i * 3072 + j] = (float)(u + (j % 10 == label ? 0.5 : 0.0));
        }
    }
}

static double param_sum(tgc_module *net, int model, int absolute)
{
    const char *const *layers = model == MODEL_MLP ? mlp_layers : cnn_layers;
    double s = 0;
    tgc_scope_push();
    for (int l = 0; layers[l]; l++)
        for (int k = 0; k < 2; k++) {
            tgc_tensor *p =
                tgc_module_get(tgc_module_get_child(net, layers[l]), k ? "bias" : "weight");
            tgc_tensor *c = tgc_cast(p, TGC_F64);
            s += tgc_item_f64(tgc_sum(absolute ? tgc_abs(c) : c, NULL, 0, 0));
        }
    tgc_scope_pop();
    return s;
}

static int check_rank(const options *o, tgc_dist *pg, int rank, int fd)
{
    tgc_device dev = pg ? tgc_dist_device(pg) : o->dev;
    int world = pg ? tgc_dist_world_size(pg) : 1, accum = pg ? o->accum : 1, ok = 0;
    int64_t B = o->check_batch, micro = B / (world * accum);
    tgc_module *net = make_model(o->check_model, dev);
    tgc_fn *f = NULL;
    float *x = malloc((size_t)micro * 3072 * sizeof(float));
    int64_t *y = malloc((size_t)micro * sizeof(int64_t));
    if (!net || !x || !y)
        goto done;
    g_ddp = pg ? tgc_ddp_create(pg, net, NULL) : NULL;
    if (pg && !g_ddp) {
        fprintf(stderr, "rank %d: tgc_ddp_create: %s (%s)\n", rank, tgc_last_error(),
                tgc_status_str(tgc_last_status()));
        goto done;
    }
    g_accum = accum;
    g_opt = tgc_sgd(net, &(tgc_sgd_opts){.lr = 0.05});
    tgc_config cfg = tgc_config_default();
    cfg.num_threads = o->threads;
    cfg.matmul_precision = TGC_PRECISION_HIGHEST;
    f = g_opt ? tgc_compile(train_step, "check_step", &cfg) : NULL;
    if (!f) {
        fprintf(stderr, "setup: %s\n", tgc_last_error());
        goto done;
    }
    int64_t xs[4] = {micro, 3, 32, 32};
    for (int s = 0; s < o->check_steps; s++) {
        double loss = 0;
        for (int k = 0; k < accum; k++) {
            /* micro-batch k of the global batch, this rank's slice of it */
            check_fill(s % 4, k * (B / accum) + rank * micro, micro, x, y);
            tgc_scope_push();
            tgc_tensor *in[2] = {to_dev(tgc_from_data(x, (size_t)micro * 3072 * sizeof(float), xs,
                                                      4, TGC_F32, tgc_cpu()),
                                        dev),
                                 to_dev(tgc_from_data(y, (size_t)micro * sizeof(int64_t), &micro, 1,
                                                      TGC_I64, tgc_cpu()),
                                        dev)};
            tgc_tensor *out = NULL;
            tgc_status st = g_ddp ? tgc_ddp_set_sync(g_ddp, k == accum - 1) : TGC_OK;
            if (st == TGC_OK)
                st = in[0] && in[1] ? tgc_call(f, net, in, 2, &out, 1) : tgc_last_status();
            double v = st == TGC_OK ? tgc_item_f64(out) : NAN;
            tgc_scope_pop();
            if (st != TGC_OK) {
                fprintf(stderr, "rank %d step %d: %s (%s)\n", rank, s, tgc_last_error(),
                        tgc_status_str(st));
                goto done;
            }
            loss += v / accum;
        }
        rec r = {REC_LOSS, rank, pg ? world : 0, o->check_model, 0, s, 0, 0, 0, loss, 0, 0, 0,
                 0,        0};
        if (!put(fd, &r))
            goto done;
    }
    rec r = {REC_PARAMS,
             rank,
             pg ? world : 0,
             o->check_model,
             0,
             o->check_steps,
             0,
             0,
             0,
             param_sum(net, o->check_model, 0),
             param_sum(net, o->check_model, 1),
             0,
             0,
             0,
             0};
    tgc_stats st;
    if (tgc_fn_stats(f, &st) == TGC_OK) {
        r.compiles = (int)st.compiles;
        r.variants = st.variants;
        r.eager_calls = (int)st.eager_fallbacks;
    }
    ok = put(fd, &r);
done:
    tgc_fn_free(f);
    tgc_ddp_free(g_ddp);
    g_ddp = NULL;
    tgc_optim_free(g_opt);
    g_opt = NULL;
    tgc_module_free(net);
    free(x);
    free(y);
    return ok;
}

/* ---- the ranks: forked children that report through a pipe ---- */
typedef struct results {
    rec *r;
    int n, cap;
} results;

static int add_rec(results *res, const rec *r)
{
    if (res->n == res->cap) {
        int cap = res->cap ? 2 * res->cap : 64;
        rec *p = realloc(res->r, (size_t)cap * sizeof *p);
        if (!p)
            return 0;
        res->r = p;
        res->cap = cap;
    }
    res->r[res->n++] = *r;
    return 1;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4200];
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* A child: joins the group (world > 0; world 0 is one process without a group), runs fn,
 * and exits with its status. */
static void child_main(const options *o, int rank, int world, const char *id_file, rank_fn fn,
                       int fd)
{
    tgc_dist *pg = NULL;
    int ok = 1;
    if (world > 0) {
        tgc_dist_opts d = tgc_dist_opts_default();
        d.rank = rank;
        d.world_size = world;
        d.id_file = id_file;
        d.timeout_s = o->timeout_s;
        d.device = o->dev.type == TGC_DEVICE_CPU ? tgc_cpu() : tgc_cuda(rank);
        pg = tgc_dist_init(&d);
        if (!pg) {
            fprintf(stderr, "rank %d of %d: tgc_dist_init: %s (%s)\n", rank, world,
                    tgc_last_error(), tgc_status_str(tgc_last_status()));
            ok = 0;
        }
    }
    if (ok)
        ok = fn(o, pg, rank, fd);
    tgc_dist_free(pg);
    close(fd);
    tgc_shutdown();
    fflush(stdout);
    fflush(stderr);
    _exit(ok ? 0 : 1);
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? -1 : (ssize_t)got;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

typedef struct world_run {
    pid_t *pid;
    int n, alive, failed;
} world_run;

/* Notes the end of child p; on the first failure stops the other ranks (they would wait
 * for it until the timeout). */
static void reaped(world_run *w, pid_t p, int status)
{
    int r = 0;
    while (r < w->n && w->pid[r] != p)
        r++;
    if (r == w->n)
        return;
    w->pid[r] = 0;
    w->alive--;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM && w->failed)
        fprintf(stderr, "bench_ddp: rank %d stopped\n", r);
    else if (WIFSIGNALED(status))
        fprintf(stderr, "bench_ddp: rank %d was killed by signal %d\n", r, WTERMSIG(status));
    else
        fprintf(stderr, "bench_ddp: rank %d failed (exit status %d)\n", r, WEXITSTATUS(status));
    if (!w->failed)
        for (int q = 0; q < w->n; q++)
            if (w->pid[q] > 0)
                kill(w->pid[q], SIGTERM);
    w->failed = 1;
}

/* Runs fn on `world` forked ranks (0: one process without a group) and appends what they
 * report to res; 1 when every rank succeeded. */
static int run_world(const options *o, int world, rank_fn fn, results *res)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], id_file[4200];
    int fds[2];
    snprintf(dir, sizeof dir, "%s/tgc_bench_ddp_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir) || pipe(fds) != 0) {
        fprintf(stderr, "bench_ddp: %s: %s\n", dir, strerror(errno));
        return 0;
    }
    snprintf(id_file, sizeof id_file, "%s/id", dir);
    world_run w = {calloc((size_t)(world > 0 ? world : 1), sizeof(pid_t)), 0, 0, 0};
    int n = world > 0 ? world : 1;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; w.pid && r < n; r++) {
        pid_t p = fork();
        if (p == 0) {
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* a rank does not outlive the parent */
#endif
            close(fds[0]);
            child_main(o, r, world, id_file, fn, fds[1]);
        }
        if (p < 0) {
            fprintf(stderr, "bench_ddp: fork: %s\n", strerror(errno));
            w.failed = 1;
            break;
        }
        w.pid[w.n++] = p;
        w.alive++;
    }
    close(fds[1]);
    if (w.failed || !w.pid)
        for (int q = 0; q < w.n; q++)
            kill(w.pid[q], SIGTERM);
    for (int eof = 0; !eof;) {
        struct pollfd pf = {fds[0], POLLIN, 0};
        if (poll(&pf, 1, 200) > 0) {
            rec r;
            ssize_t k = read_full(fds[0], &r, sizeof r);
            if (k == (ssize_t)sizeof r)
                w.failed |= !add_rec(res, &r);
            else
                eof = 1; /* every rank closed its end (or a record was cut: it died) */
        }
        int status = 0;
        pid_t p;
        while (w.alive > 0 && (p = waitpid(-1, &status, WNOHANG)) > 0)
            reaped(&w, p, status);
    }
    while (w.alive > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0 && errno != EINTR)
            break;
        if (p > 0)
            reaped(&w, p, status);
    }
    close(fds[0]);
    free(w.pid);
    remove_dir(dir);
    return w.pid != NULL && !w.failed;
}

/* ---- PyTorch DDP (tests/gpu/torch_ddp.py's lines: flat JSON records) ---- */
enum { T_EAGER = 0, T_COMPILE, T_RO, N_TMODES };
static const char *const torch_mode_names[N_TMODES] = {"eager", "compile", "reduce-overhead"};

typedef struct figures {
    /* [model][mode][count index]: images/s summed over the ranks; NAN when not measured */
    double tgc[2][2][MAX_COUNTS], tgc_step_ms[2][2][MAX_COUNTS];
    double torch[2][N_TMODES][MAX_COUNTS];
} figures;

static double num_field(const char *line, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *q = strstr(line, pat);
    if (!q)
        return NAN;
    char *stop;
    double v = strtod(q + strlen(pat), &stop);
    return stop == q + strlen(pat) ? NAN : v;
}

static int str_field(const char *line, const char *key, const char *value)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": \"%s\"", key, value);
    return strstr(line, pat) != NULL;
}

static int count_index(const options *o, int n)
{
    for (int i = 0; i < o->n_counts; i++)
        if (o->counts[i] == n)
            return i;
    return -1;
}

/* Takes one output line of torch_ddp.py into f (its "total" records). */
static void torch_line(const options *o, const char *line, figures *f)
{
    if (!str_field(line, "torch_ddp", "total"))
        return;
    int ci = count_index(o, (int)num_field(line, "world"));
    int tf32 = strstr(line, "\"tf32\": true") != NULL;
    if (ci < 0 || tf32 != (o->precision != TGC_PRECISION_HIGHEST))
        return;
    for (int m = 0; m < 2; m++)
        for (int t = 0; t < N_TMODES; t++)
            if (str_field(line, "model", model_names[m]) &&
                str_field(line, "mode", torch_mode_names[t]))
                f->torch[m][t][ci] = num_field(line, "images_per_s");
}

static int torch_run(const options *o, int n, figures *f)
{
    char models[32] = "", cmd[1024];
    for (int m = 0; m < 2; m++)
        if (wanted(o->only, model_names[m]))
            snprintf(models + strlen(models), sizeof models - strlen(models), "%s%s",
                     models[0] ? "," : "", model_names[m]);
    snprintf(cmd, sizeof cmd,
             "python3 -m torch.distributed.run --standalone --nproc_per_node %d %s --models %s "
             "--modes %s --batch %d --iters %d --precision %s 2>&1",
             n, o->torch_script, models, o->torch_modes, o->batch, o->iters,
             o->precision == TGC_PRECISION_HIGHEST ? "highest" : "high");
    printf("torch: %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "bench_ddp: popen: %s\n", strerror(errno));
        return 0;
    }
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        printf("  torch| %s", line);
        fflush(stdout);
        torch_line(o, line, f);
    }
    int st = pclose(p);
    if (st != 0)
        printf("torch: torchrun with %d processes exited with status %d\n", n,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return st == 0;
}

static int torch_read_log(const options *o, figures *f)
{
    FILE *fp = fopen(o->torch_log, "r");
    if (!fp) {
        fprintf(stderr, "--torch-log %s: %s\n", o->torch_log, strerror(errno));
        return 0;
    }
    char line[4096];
    while (fgets(line, sizeof line, fp))
        torch_line(o, line, f);
    fclose(fp);
    return 1;
}

/* ---- printing ---- */
static const rec *find_rec(const results *res, int kind, int world, int model, int mode, int rank,
                           int step)
{
    for (int i = 0; i < res->n; i++) {
        const rec *r = &res->r[i];
        if (r->kind == kind && r->world == world && r->model == model && r->mode == mode &&
            r->rank == rank && r->step == step)
            return r;
    }
    return NULL;
}

static const char *dev_name(tgc_device d)
{
    return d.type == TGC_DEVICE_CPU ? "cpu" : "cuda";
}

static void print_perf(const options *o, const results *res, int ci, figures *f)
{
    int n = o->counts[ci];
    for (int m = 0; m < 2; m++)
        for (int mode = 0; mode < 2; mode++) {
            double total = 0, step = 0;
            int have = 0;
            char name[32];
            snprintf(name, sizeof name, "%s%d", bench_names[m], o->batch);
            for (int r = 0; r < n; r++) {
                const rec *x = find_rec(res, REC_PERF, n, m, mode, r, 0);
                if (!x)
                    continue;
                have++;
                total += x->images_s;
                step += x->step_ms / n;
                printf("%-18s %-4s  %-16s N=%d rank %-3d %8.3f ms  %8.0f images/s  (first call "
                       "%.0f ms; %d buckets; %d compiles, %d variants",
                       name, dev_name(o->dev), mode_name(mode), n, r, x->step_ms, x->images_s,
                       x->first_ms, x->buckets, x->compiles, x->variants);
                if (x->eager_calls)
                    printf("; %d EAGER calls", x->eager_calls);
                printf(")\n");
            }
            if (have == 0)
                continue;
            if (have == n) {
                f->tgc[m][mode][ci] = total;
                f->tgc_step_ms[m][mode][ci] = step;
            }
            int c1 = count_index(o, 1);
            double base = c1 >= 0 ? f->tgc[m][mode][c1] : NAN;
            printf("%-18s %-4s  %-16s N=%d total    %8.3f ms  %8.0f images/s%s", name,
                   dev_name(o->dev), mode_name(mode), n, step, total,
                   have < n ? " (some ranks reported nothing)" : "");
            if (!isnan(base) && have == n)
                printf("  scaling total(%d)/total(1) %.2fx", n, total / base);
            printf("\n");
        }
    fflush(stdout);
}

static void print_summary(const options *o, const figures *f)
{
    int c1 = count_index(o, 1);
    for (int m = 0; m < 2; m++)
        for (int ci = 0; ci < o->n_counts; ci++) {
            int n = o->counts[ci];
            for (int mode = 0; mode < 2; mode++) {
                double t = f->tgc[m][mode][ci], b = c1 >= 0 ? f->tgc[m][mode][c1] : NAN;
                if (isnan(t))
                    continue;
                printf("summary %-8s N=%d tgc %-16s %8.0f images/s", model_names[m], n,
                       mode_name(mode), t);
                if (n > 1 && !isnan(b))
                    printf("  scaling %.2fx%s", t / b,
                           m == MODEL_RESNET18 && n == 2 ? " (target >= 1.8x)" : "");
                for (int k = 0; k < N_TMODES; k++) {
                    double x = f->torch[m][k][ci];
                    if (!isnan(x))
                        printf("  tgc/torch-%s %.2fx", torch_mode_names[k], t / x);
                }
                printf("\n");
            }
            for (int k = 0; k < N_TMODES; k++) {
                double x = f->torch[m][k][ci], b = c1 >= 0 ? f->torch[m][k][c1] : NAN;
                if (isnan(x))
                    continue;
                printf("summary %-8s N=%d torch DDP %-11s %8.0f images/s", model_names[m], n,
                       torch_mode_names[k], x);
                if (n > 1 && !isnan(b))
                    printf("  scaling %.2fx", x / b);
                printf("\n");
            }
        }
}

/* Compares the ranks' losses with the reference's; 1 when within CHECK_TOL. */
static int print_check(const options *o, const results *res, int n)
{
    double max_rel = 0, sum_rel = 0, rank_diff = 0;
    int worst = 0, have = 1;
    for (int s = 0; s < o->check_steps; s++) {
        const rec *ref = find_rec(res, REC_LOSS, 0, o->check_model, 0, 0, s);
        double mean = 0;
        for (int r = 0; r < n; r++) {
            const rec *x = find_rec(res, REC_LOSS, n, o->check_model, 0, r, s);
            have &= x != NULL;
            mean += x ? x->value / n : NAN;
        }
        if (!ref || !have) {
            have = 0;
            break;
        }
        double rel = fabs(mean - ref->value) / fmax(fabs(ref->value), 1e-30);
        if (s < 3 || s == o->check_steps - 1 || s % 10 == 9)
            printf("check %s N=%d accum %d step %2d: loss %.7f (mean over ranks)  reference "
                   "%.7f  rel diff %.2e\n",
                   model_names[o->check_model], n, o->accum, s, mean, ref->value, rel);
        if (rel > max_rel) {
            max_rel = rel;
            worst = s;
        }
    }
    const rec *ref_p = find_rec(res, REC_PARAMS, 0, o->check_model, 0, 0, o->check_steps);
    const rec *p0 = find_rec(res, REC_PARAMS, n, o->check_model, 0, 0, o->check_steps);
    for (int r = 1; r < n && p0; r++) {
        const rec *x = find_rec(res, REC_PARAMS, n, o->check_model, 0, r, o->check_steps);
        rank_diff =
            x ? fmax(rank_diff, fabs(x->value - p0->value) + fabs(x->value_abs - p0->value_abs))
              : NAN;
    }
    if (ref_p && p0)
        sum_rel = fabs(p0->value_abs - ref_p->value_abs) / fmax(fabs(ref_p->value_abs), 1e-30);
    if (!have || !ref_p || !p0) {
        printf("check %s N=%d: some losses are missing (a rank failed)\n",
               model_names[o->check_model], n);
        return 0;
    }
    int ok = max_rel <= CHECK_TOL && rank_diff == 0;
    printf("check %s N=%d accum %d batch %d: %d steps, max relative loss difference %.3e (step "
           "%d), final sum|params| relative difference %.3e, ranks' parameters %s; %d compiles, "
           "%d variants%s -> %s\n",
           model_names[o->check_model], n, o->accum, o->check_batch, o->check_steps, max_rel, worst,
           sum_rel, rank_diff == 0 ? "identical" : "DIFFER", p0->compiles, p0->variants,
           p0->eager_calls ? " (EAGER calls)" : "",
           ok ? "ok" : "FAILED (tolerance 1e-4, identical ranks)");
    return ok;
}

/* ---- options ---- */
static int parse_counts(const char *v, options *o)
{
    o->n_counts = 0;
    for (const char *p = v; *p && o->n_counts < MAX_COUNTS;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1)
            return 0;
        o->counts[o->n_counts++] = (int)n;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return 0;
    }
    return o->n_counts > 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    int counts_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--torch-ref") == 0) {
            o->torch_ref = 1;
            continue;
        }
        if (strcmp(a, "--check-losses") == 0) {
            o->check = 1;
            continue;
        }
        if (!v)
            goto usage;
        i++;
        if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cpu") == 0)
                o->dev = tgc_cpu();
            else if (strncmp(v, "cuda", 4) == 0)
                o->dev = tgc_cuda(0);
            else
                goto usage;
        } else if (strcmp(a, "--gpus") == 0) {
            o->max_ranks = atoi(v);
            o->dev = tgc_cuda(0);
        } else if (strcmp(a, "--ranks") == 0)
            o->max_ranks = atoi(v);
        else if (strcmp(a, "--counts") == 0) {
            if (!parse_counts(v, o))
                goto usage;
            counts_given = 1;
        } else if (strcmp(a, "--only") == 0)
            o->only = v;
        else if (strcmp(a, "--modes") == 0)
            o->modes = v;
        else if (strcmp(a, "--iters") == 0)
            o->iters = atoi(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atoi(v);
        else if (strcmp(a, "--batch") == 0)
            o->batch = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--timeout") == 0)
            o->timeout_s = atof(v);
        else if (strcmp(a, "--torch-script") == 0)
            o->torch_script = v;
        else if (strcmp(a, "--torch-modes") == 0)
            o->torch_modes = v;
        else if (strcmp(a, "--torch-log") == 0)
            o->torch_log = v;
        else if (strcmp(a, "--check-model") == 0) {
            if (strcmp(v, "mlp") == 0)
                o->check_model = MODEL_MLP;
            else if (strcmp(v, "cnn") == 0)
                o->check_model = MODEL_CNN;
            else
                goto usage;
        } else if (strcmp(a, "--check-batch") == 0)
            o->check_batch = atoi(v);
        else if (strcmp(a, "--check-steps") == 0)
            o->check_steps = atoi(v);
        else if (strcmp(a, "--accum") == 0)
            o->accum = atoi(v);
        else if (strcmp(a, "--precision") == 0) {
            if (strcmp(v, "highest") == 0)
                o->precision = TGC_PRECISION_HIGHEST;
            else if (strcmp(v, "high") == 0)
                o->precision = TGC_PRECISION_HIGH;
            else if (strcmp(v, "medium") == 0)
                o->precision = TGC_PRECISION_MEDIUM;
            else
                goto usage;
        } else
            goto usage;
    }
    if (!counts_given) {
        o->n_counts = o->max_ranks < MAX_COUNTS ? o->max_ranks : MAX_COUNTS;
        for (int i = 0; i < o->n_counts; i++)
            o->counts[i] = i + 1;
    }
    if (o->check_model < 0)
        o->check_model = o->dev.type == TGC_DEVICE_CPU ? MODEL_MLP : MODEL_CNN;
    int ok = o->max_ranks >= 1 && o->iters >= 1 && o->iters <= MAX_STEPS && o->warmup >= 1 &&
             o->batch >= 1 && o->threads >= 0 && o->timeout_s >= 0 && o->accum >= 1 &&
             o->check_steps >= 1 && o->check_batch >= 1;
    for (int i = 0; ok && i < o->n_counts; i++)
        if (o->check && o->check_batch % (o->counts[i] * o->accum) != 0) {
            fprintf(stderr,
                    "bench_ddp: --check-batch %d is not a multiple of %d ranks x --accum %d\n",
                    o->check_batch, o->counts[i], o->accum);
            return 0;
        }
    if (ok)
        return 1;
usage:
    fprintf(stderr,
            "usage: %s [--gpus G | --ranks G [--device cpu|cuda]] [--counts 1,2,...] "
            "[--only cnn,resnet18] [--modes default,reduce-overhead] [--iters N <= %d] "
            "[--warmup N >= 1] [--batch 64] [--precision highest|high|medium] [--threads N] "
            "[--timeout S] [--torch-ref] [--torch-script PATH] [--torch-modes eager,compile] "
            "[--torch-log FILE]\n"
            "       %s --check-losses [--gpus G | --ranks G --device cpu] [--counts ...] "
            "[--check-model mlp|cnn] [--check-batch 32] [--check-steps 50] [--accum K]\n",
            argv[0], MAX_STEPS, argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    static options o;
    o = (options){.dev = tgc_cpu(),
                  .max_ranks = 1,
                  .torch_script = "tests/gpu/torch_ddp.py",
                  .torch_modes = "eager,compile",
                  .iters = 30,
                  .warmup = 5,
                  .batch = 64,
                  .timeout_s = 120,
                  .precision = TGC_PRECISION_HIGHEST,
                  .check_model = -1,
                  .check_batch = 32,
                  .check_steps = 50,
                  .accum = 1};
    if (!parse_args(argc, argv, &o))
        return 2;
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* for torchrun's processes too (dist.h sets it too) */
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
    /* no tgc call here that touches a device: the ranks are forked from this process */
    static results res;
    int ok = 1;
    if (o.check) {
        printf("bench_ddp --check-losses: %s (no batch norm), SGD lr 0.05, global batch %d, %d "
               "steps over 4 fixed batches, on %s; N ranks (slices of %s) against one process "
               "with the whole batch\n",
               model_names[o.check_model], o.check_batch, o.check_steps, dev_name(o.dev),
               o.accum > 1 ? "the accumulated micro-batches" : "the batch");
        fflush(stdout);
        ok = run_world(&o, 0, check_rank, &res);
        for (int ci = 0; ok && ci < o.n_counts; ci++) {
            int n = o.counts[ci];
            int ran = run_world(&o, n, check_rank, &res);
            ok = print_check(&o, &res, n) && ran;
        }
        free(res.r);
        return ok ? 0 : 1;
    }
    printf("bench_ddp: data-parallel training step (forward, cross entropy, backward with the "
           "gradient all-reduce, Adam, zero_grad), batch %d per rank, 3x32x32, on %s, precision "
           "%s; median of %d steps after %d warmup, on N = ",
           o.batch, dev_name(o.dev),
           o.precision == TGC_PRECISION_HIGHEST ? "highest (fp32)"
           : o.precision == TGC_PRECISION_HIGH  ? "high (TF32)"
                                                : "medium (bf16)",
           o.iters, o.warmup);
    for (int ci = 0; ci < o.n_counts; ci++)
        printf("%s%d", ci ? "," : "", o.counts[ci]);
    printf(" ranks\n");
    static figures f;
    for (int m = 0; m < 2; m++)
        for (int ci = 0; ci < MAX_COUNTS; ci++) {
            for (int k = 0; k < 2; k++)
                f.tgc[m][k][ci] = f.tgc_step_ms[m][k][ci] = NAN;
            for (int k = 0; k < N_TMODES; k++)
                f.torch[m][k][ci] = NAN;
        }
    for (int ci = 0; ci < o.n_counts; ci++) {
        int ran = run_world(&o, o.counts[ci], perf_rank, &res);
        print_perf(&o, &res, ci, &f);
        if (!ran)
            printf("bench_ddp: N=%d: a rank failed (above)\n", o.counts[ci]);
        ok &= ran;
    }
    if (o.torch_log)
        torch_read_log(&o, &f);
    for (int ci = 0; o.torch_ref && ci < o.n_counts; ci++)
        torch_run(&o, o.counts[ci], &f);
    print_summary(&o, &f);
    free(res.r);
    return ok ? 0 : 1;
}
