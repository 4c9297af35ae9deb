/* Training on CIFAR-10 with libtgc: one compiled training step (forward, cross entropy,
 * backward and the Adam update, fused into one variant), a compiled evaluation function over
 * the same module, a prefetch thread for the data, and a checkpoint at the end; on one device,
 * or data-parallel on several GPUs (or host ranks) through include/tgc/dist.h.
 *
 *   ./build/examples/train_cifar [--model cnn|resnet18] [--data DIR] [--epochs N] [--batch 64]
 *                                [--lr 1e-3] [--max-steps N] [--report N] [--seed N]
 *                                [--checkpoint PATH] [--resume PATH] [--width 64]
 *                                [--synthetic-train N] [--synthetic-test N] [--threads N]
 *                                [--device cpu|cuda|cuda:N] [--precision highest|high|medium]
 *                                [--mode default|reduce-overhead]
 *                                [--gpus N | --ranks N] [--accum K] [--timeout S]
 *                                [--id-file PATH]
 *
 * --data DIR holds CIFAR-10's binary version (data_batch_1.bin ... data_batch_5.bin,
 * test_batch.bin). When DIR has no data_batch_1.bin, a synthetic set in the same format is
 * written there first (examples/data/cifar.h: class-dependent patterns, 50000 + 10000 images
 * unless --synthetic-train/--synthetic-test say otherwise) and every line that reports
 * accuracy says "synthetic". --model cnn is the seed's CNN (examples/models/seed_cnn.h),
 * resnet18 torchvision's layout (examples/models/resnet18.h, --width channels in layer1).
 * --max-steps stops training after that many steps (0: the full --epochs); --report prints a
 * progress line every N steps (mean loss over the period, images/s, step time). At each epoch
 * end the test set is evaluated (loss and accuracy; with --max-steps the run ends with one
 * evaluation). --checkpoint PATH writes the module (tgc_module_save, PATH), the optimizer
 * (tgc_optim_save, PATH with ".optim" before its extension) and the two compiled functions'
 * dynamic-shape decisions (tgc_fn_save_state, ".train_fn" and ".eval_fn") at the end; --resume
 * PATH loads them before training, so the resumed run compiles what the uninterrupted one ran
 * (a smaller last batch makes the batch dim dynamic) and continues bit for bit.
 *
 * How the compiled step works. train_step below is an ordinary C function of tgc ops:
 * forward, tgc_cross_entropy, tgc_backward, tgc_optim_step, then tgc_optim_zero_grad, so the
 * gradients are zero between steps (the same numbers as zeroing them first, as PyTorch's loop
 * does, and the gradients exist from the first trace on). tgc_compile traces
 * it once into one variant; the parameter updates, .grad writes, Adam's moments and step
 * count, and batch-norm running statistics are in-place writes of module and optimizer
 * storage, bound by position, so later calls are cache hits that change no guard. The
 * optimizer is reached through a static (g_opt): model functions only get `self`, and the
 * userdata of a module is not guarded (include/tgc/compile.h) — fine here, because the
 * optimizer object never changes during the run. eval_step is a second compiled function
 * over the same module, called in eval mode (tgc_module_train(net, 0)) and with grad mode
 * off: each function keeps its own variant, so switching between training and testing never
 * forces either to recompile (the stats at the end show one compile each).
 *
 * Several GPUs (data parallel, include/tgc/dist.h). One process per rank, each with its own
 * copy of the model; tgc_ddp_create broadcasts rank 0's parameters and buffers, and from then
 * on the same compiled train_step averages the gradients over the ranks inside tgc_backward
 * (bucketed all-reduces over NCCL, graph ops of the variant, overlapped with the rest of
 * backward), so every rank applies the same Adam update. Launching:
 *  - --gpus N: this program is the launcher. It reads the data, then forks N children before
 *    any tgc call touches a device (a fork after CUDA is initialized is unsafe), each child
 *    rank r on cuda:r with a fresh rendezvous file in a new temporary directory (opts.id_file:
 *    rank 0 writes the NCCL id there, the others read it; the directory is removed at the
 *    end). The parent waits for every child and fails when one failed (it then stops the
 *    others at once instead of letting them wait out --timeout). --ranks N does the same on
 *    --device: N host ranks with --device cpu (needs an NCCL-compatible library that reduces
 *    host memory, such as the test suite's fake, TGC_NCCL_LIBRARY=build/tests/dist/fake_nccl/
 *    libnccl.so.2), or cuda:r per rank with --device cuda. --gpus 1 (or --ranks 1) is one
 *    rank through NCCL: the data-parallel path on one device.
 *  - Launched by someone else: when TGC_RANK/TGC_WORLD_SIZE, RANK/WORLD_SIZE (torchrun),
 *    OMPI_COMM_WORLD_* (mpirun) or PMI_* are in the environment, the process joins that group
 *    instead of forking (rank, world size and the local rank come from the variables dist.h
 *    lists; with --device cuda the GPU is the local rank's). The id comes from --id-file, or
 *    TGC_DIST_ID_FILE (a path every rank sees: rank 0 writes it; remove a stale one first), or
 *    TGC_DIST_ID (tgc_dist_unique_id's text). For example:
 *      TGC_DIST_ID_FILE=/tmp/run1.id torchrun --standalone --nproc_per_node 2 --no-python \
 *          ./build/examples/train_cifar --device cuda --model resnet18
 *      rm -f /tmp/id; for r in 0 1; do TGC_RANK=$r TGC_WORLD_SIZE=2 TGC_DIST_ID_FILE=/tmp/id \
 *          ./build/examples/train_cifar --device cuda & done; wait
 *      mpirun -np 2 -x TGC_DIST_ID_FILE=/shared/id ./build/examples/train_cifar --device cuda
 *    Rank 0 writes a missing synthetic set before the others read it (on several hosts, give
 *    every host the data, or a shared --data).
 * --batch is the GLOBAL batch of one optimizer step. Every rank draws the same shuffled order
 * of the epoch (cifar_permutation of --seed) and takes its contiguous slice of each global
 * batch: rank r of N trains on images [r*B/N, (r+1)*B/N) of global batch j, so one step sees
 * exactly the images of the single-process run's step j with the same --batch (and, for a
 * model without batch norm, the same gradient up to rounding; batch-norm statistics are per
 * rank, as in PyTorch's DDP). --accum K splits each step into K micro-batches of B/K global
 * (B/(N*K) per rank): the first K-1 call the compiled step with tgc_ddp_set_sync(d, 0) (the
 * gradients only add up on each rank, no communication, and train_step skips the update),
 * the K-th with sync on (the all-reduce of the summed gradients, then the update and
 * zero_grad); each micro-batch's loss is scaled by 1/K, so the step equals one of batch B.
 * The sync flag is part of the module's structure signature, so the compiled step has two
 * variants: one traced with sync off (forward and backward only) and one with sync on
 * (forward, backward, all-reduces, Adam, zero_grad); the second call recompiles once
 * ("self.ddp sync changed") and both then stay cached (the stats line shows 2 variants).
 * --accum needs a process group (--gpus/--ranks 1 for one device). B must be a multiple of
 * N*K. Reports: every rank prints its own progress lines ("rank r/N: ... images/s, step
 * ms"); rank 0 adds a total line (the images/s of all ranks summed, the loss averaged, by a
 * tgc_dist_all_reduce of a two-element tensor). Evaluation and the checkpoint run on rank 0
 * only (the checkpoint after a tgc_dist_barrier; the other ranks wait in a barrier during an
 * evaluation, which is not counted as training time); --resume loads on every rank (the
 * optimizer state is not broadcast). --timeout S bounds every wait on peers (dist.h's
 * opts.timeout_s, 300 s by default): a rank that dies or hangs makes the others fail with
 * TGC_ERR_TIMEOUT instead of hanging. --threads applies per rank (host ranks share cores). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mkdtemp, kill */
#include <dirent.h>
#include <errno.h>
#include <math.h>
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

#include <tgc/dist.h>
#include <tgc/tgc.h>

#include "data/cifar.h"
#include "device_opts.h"
#include "models/resnet18.h"
#include "models/seed_cnn.h"

typedef struct options {
    const char *model, *data, *checkpoint, *resume, *id_file;
    int epochs, batch, report, width, threads;
    int ranks, gpus, accum; /* --ranks/--gpus N: launch N ranks (0: not asked) */
    long long max_steps, synth_train, synth_test;
    double lr, timeout_s;
    uint64_t seed;
    tgc_device device;
    tgc_matmul_precision precision;
    tgc_mode mode;
} options;

/* Which process group this process belongs to. */
typedef struct dist_plan {
    int on;          /* 0: the single-process run, no group */
    int rank, world; /* -1: from the environment (an external launcher) */
    const char *id_file;
} dist_plan;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the two compiled functions ---- */

static tgc_optim *g_opt;       /* the optimizer of train_step (see the file comment) */
static tgc_model_fn g_forward; /* the model's forward: seed_cnn_forward or resnet18_forward */
static tgc_ddp *g_ddp;         /* the data-parallel wrapper of the module; NULL: one process */
static int g_accum = 1;        /* micro-batches per optimizer step (--accum) */

/* in: x [N, 3, 32, 32], y i64 [N]; out[0]: the batch's mean loss (a scalar). With --accum K
 * the gradient is of loss / K, and only the micro-step with sync on updates (the variant
 * traced with sync off has no optimizer ops: see the file comment). */
static tgc_status train_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (n_in != 2 || n_out != 1)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL;
    tgc_status st = g_forward(self, in, 1, &logits, 1);
    tgc_tensor *loss =
        st == TGC_OK ? tgc_cross_entropy(logits, in[1], TGC_REDUCE_MEAN, CIFAR_IGNORE, 0.0) : NULL;
    if (st == TGC_OK && !loss)
        st = tgc_last_status();
    tgc_tensor *scaled = st == TGC_OK && g_accum > 1 ? tgc_mul_scalar(loss, 1.0 / g_accum) : loss;
    if (st == TGC_OK && !scaled)
        st = tgc_last_status();
    if (st == TGC_OK)
        st = tgc_backward(scaled);
    int update = !g_ddp || tgc_ddp_sync(g_ddp);
    if (st == TGC_OK && update)
        st = tgc_optim_step(g_opt);
    if (st == TGC_OK && update)
        st = tgc_optim_zero_grad(g_opt); /* the gradients are zero between steps */
    out[0] = st == TGC_OK ? tgc_detach(loss) : NULL;
    return st;
}

/* in: x, y (padding rows labelled CIFAR_IGNORE); out[0]: summed loss, out[1]: i64 count of
 * correct predictions. Called in eval mode with grad mode off. */
static tgc_status eval_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                            int n_out)
{
    if (n_in != 2 || n_out != 2)
        return TGC_ERR_INVALID_ARG;
    tgc_tensor *logits = NULL;
    tgc_status st = g_forward(self, in, 1, &logits, 1);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_cross_entropy(logits, in[1], TGC_REDUCE_SUM, CIFAR_IGNORE, 0.0);
    out[1] = tgc_sum(tgc_eq(tgc_argmax(logits, 1, 0), in[1]), NULL, 0, 0);
    return out[0] && out[1] ? TGC_OK : tgc_last_status();
}

/* ---- options ---- */

static void usage(FILE *fp, const char *prog)
{
    fprintf(fp,
            "usage: %s [--model cnn|resnet18] [--data DIR] [--epochs N] [--batch N] [--lr X]\n"
            "          [--max-steps N] [--report N] [--seed N] [--checkpoint PATH] "
            "[--resume PATH]\n"
            "          [--width N] [--synthetic-train N] [--synthetic-test N] [--threads "
            "N]\n" EXAMPLE_DEVICE_USAGE
            "          [--gpus N | --ranks N] [--accum K] [--timeout S] [--id-file PATH]\n"
            "--data DIR: CIFAR-10 binary files; a synthetic set is written there when missing\n"
            "--max-steps 0: the full --epochs; --report N: a progress line every N steps\n"
            "--checkpoint PATH: module at PATH, optimizer at PATH with .optim before the "
            "extension, compiled functions' states with .train_fn and .eval_fn\n"
            "--gpus N: data parallel on cuda:0..N-1 (N forked ranks); --ranks N: N ranks on "
            "--device\n"
            "--batch is the global batch (split over the ranks); --accum K: K micro-batches "
            "per step\n"
            "under torchrun/mpirun (RANK/WORLD_SIZE, TGC_RANK/TGC_WORLD_SIZE set): joins that "
            "group;\n"
            "  the id from --id-file, TGC_DIST_ID_FILE or TGC_DIST_ID\n",
            prog);
}

/* 1 run, 0 bad arguments, -1 help. */
static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        int d = example_device_option(argc, argv, &i, &o->device, &o->precision, &o->mode);
        if (d < 0) {
            fprintf(stderr, "%s: bad value for '%s'\n", argv[0], a);
            return 0;
        }
        if (d > 0)
            continue;
        if (!v) {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], a);
            return 0;
        }
        i++;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--checkpoint") == 0)
            o->checkpoint = v;
        else if (strcmp(a, "--resume") == 0)
            o->resume = v;
        else if (strcmp(a, "--epochs") == 0)
            o->epochs = atoi(v);
        else if (strcmp(a, "--batch") == 0)
            o->batch = atoi(v);
        else if (strcmp(a, "--report") == 0)
            o->report = atoi(v);
        else if (strcmp(a, "--width") == 0)
            o->width = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--max-steps") == 0)
            o->max_steps = atoll(v);
        else if (strcmp(a, "--synthetic-train") == 0)
            o->synth_train = atoll(v);
        else if (strcmp(a, "--synthetic-test") == 0)
            o->synth_test = atoll(v);
        else if (strcmp(a, "--lr") == 0)
            o->lr = atof(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--gpus") == 0)
            o->ranks = o->gpus = atoi(v);
        else if (strcmp(a, "--ranks") == 0)
            o->ranks = atoi(v);
        else if (strcmp(a, "--accum") == 0)
            o->accum = atoi(v);
        else if (strcmp(a, "--timeout") == 0)
            o->timeout_s = atof(v);
        else if (strcmp(a, "--id-file") == 0)
            o->id_file = v;
        else {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
            return 0;
        }
    }
    if (strcmp(o->model, "cnn") != 0 && strcmp(o->model, "resnet18") != 0) {
        fprintf(stderr, "%s: --model is cnn or resnet18\n", argv[0]);
        return 0;
    }
    if (o->epochs < 1 || o->batch < 1 || o->report < 1 || o->width < 1 || o->threads < 0 ||
        o->max_steps < 0 || o->lr <= 0 || o->synth_train < 5 || o->synth_test < 1) {
        fprintf(stderr, "%s: epochs, batch, report, width >= 1; lr > 0; max-steps, threads >= 0\n",
                argv[0]);
        return 0;
    }
    if (o->ranks < 0 || o->accum < 1 || o->timeout_s < 0) {
        fprintf(stderr, "%s: --gpus/--ranks N >= 1, --accum K >= 1, --timeout S >= 0\n", argv[0]);
        return 0;
    }
    if (o->gpus > 0 && o->device.type == TGC_DEVICE_CPU)
        o->device = tgc_cuda(0); /* --gpus: rank r on cuda:r */
    return 1;
}

/* 1 when a launcher gave this process a rank or a world size (see the file comment). */
static int launched_externally(void)
{
    static const char *const vars[] = {"TGC_RANK",   "TGC_WORLD_SIZE",       "RANK",
                                       "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}
/* PATH with tag before its extension ("ck.safetensors", ".optim" -> "ck.optim.safetensors"). */
static void side_path(const char *path, const char *tag, char *buf, size_t n)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash) && dot != path)
        snprintf(buf, n, "%.*s%s%s", (int)(dot - path), path, tag, dot);
    else
        snprintf(buf, n, "%s%s", path, tag);
}

static void optim_path(const char *path, char *buf, size_t n)
{
    side_path(path, ".optim", buf, n);
}

/* The functions' states beside a checkpoint: saved (save) or loaded. A checkpoint written
 * without them still resumes (the first calls may then compile static variants the
 * uninterrupted run had left). */
static int fn_states(tgc_fn *train, tgc_fn *eval, const char *path, int save, const char *prefix)
{
    tgc_fn *fns[2] = {train, eval};
    const char *tags[2] = {".train_fn", ".eval_fn"};
    for (int k = 0; k < 2; k++) {
        char p[4096];
        side_path(path, tags[k], p, sizeof p);
        if (!save && access(p, F_OK) != 0) {
            printf("%s--resume: no %s; the resumed run may compile differently\n", prefix, p);
            continue;
        }
        if ((save ? tgc_fn_save_state(fns[k], p) : tgc_fn_load_state(fns[k], p)) != TGC_OK) {
            fprintf(stderr, "%s%s %s: %s\n", prefix, save ? "checkpoint" : "--resume", p,
                    tgc_last_error());
            return 0;
        }
    }
    return 1;
}

static void print_stats(const char *what, const tgc_fn *f)
{
    tgc_stats s;
    if (tgc_fn_stats(f, &s) != TGC_OK)
        return;
    printf("%-10s %llu calls, %llu compiles, %llu recompiles, %llu eager calls, %d variants, "
           "compile_seconds %.3f, %d kernels, backend %s%s%s\n",
           what, (unsigned long long)s.calls, (unsigned long long)s.compiles,
           (unsigned long long)s.recompiles, (unsigned long long)s.eager_fallbacks, s.variants,
           s.compile_seconds, s.kernels_last_variant, s.backend,
           s.last_recompile_reason[0] ? "; last recompile: " : "", s.last_recompile_reason);
}

/* Evaluates the whole test set; 1 on success. */
static int evaluate(tgc_fn *eval, tgc_module *net, const cifar_set *test, const options *o,
                    int synthetic, long long epoch)
{
    cifar_loader ld;
    if (!cifar_loader_start(&ld, test, o->batch, 0, o->device, 0, 1))
        return 0;
    tgc_module_train(net, 0);
    tgc_no_grad_push();
    double loss = 0, t0 = now_s();
    long long correct = 0, seen = 0;
    int ok = 1;
    cifar_batch *b;
    while ((b = cifar_loader_next(&ld)) != NULL) {
        tgc_scope_push();
        tgc_tensor *in[2] = {b->x, b->y}, *out[2] = {NULL, NULL};
        tgc_status st = tgc_call(eval, net, in, 2, out, 2);
        if (st == TGC_OK) {
            loss += tgc_item_f64(out[0]); /* waits for the GPU before the batch is released */
            correct += tgc_item_i64(out[1]);
            seen += b->valid;
        } else {
            fprintf(stderr, "eval tgc_call: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
            ok = 0;
        }
        tgc_scope_pop();
        cifar_loader_release(&ld, b);
        if (!ok)
            break;
    }
    if (ok && cifar_loader_error(&ld)) {
        fprintf(stderr, "test data: %s\n", cifar_loader_error(&ld));
        ok = 0;
    }
    cifar_loader_stop(&ld);
    tgc_no_grad_pop();
    tgc_module_train(net, 1);
    if (ok && seen > 0)
        printf("epoch %lld test%s: loss %.4f  accuracy %.2f%% (%lld / %lld)  %.1f s\n", epoch,
               synthetic ? " (synthetic data)" : "", loss / (double)seen,
               100.0 * (double)correct / (double)seen, correct, seen, now_s() - t0);
    fflush(stdout);
    return ok;
}

static tgc_module *make_model(const options *o)
{
    tgc_module *net;
    if (strcmp(o->model, "cnn") == 0) {
        tgc_manual_seed(o->seed);
        net = seed_cnn_create();
        g_forward = seed_cnn_forward;
    } else {
        resnet18_config rc = resnet18_default_config();
        rc.width = o->width;
        rc.seed ^= o->seed;
        net = resnet18_create(&rc);
        g_forward = resnet18_forward;
    }
    if (!net) {
        fprintf(stderr, "creating the model: %s\n", tgc_last_error());
        return NULL;
    }
    tgc_module_train(net, 1); /* resnet18_create makes an eval-mode model */
    if (o->device.type != TGC_DEVICE_CPU && tgc_module_to(net, o->device) != TGC_OK) {
        fprintf(stderr, "tgc_module_to: %s\n", tgc_last_error());
        tgc_module_free(net);
        return NULL;
    }
    return net;
}

/* ---- training batches: one loader over every epoch, or this rank's slices ---- */

/* The single-process run reads the shuffled training set through one loader for all epochs.
 * A rank of a group gets, per epoch, a set of its own records in the order it trains on them
 * (see the file comment) and reads it in order through a loader of that epoch. */
typedef struct batch_source {
    const cifar_set *set;
    int dist, rank, world, accum, epochs;
    int64_t batch, micro; /* the global batch; this rank's micro-batch */
    uint64_t seed;
    tgc_device dev;
    int64_t epoch; /* dist: the epoch being read */
    cifar_set part;
    int64_t *perm;
    cifar_loader ld;
    int running;
    char error[256];
} batch_source;

/* part := rank's records of src->epoch: for each global step j and micro-batch k, the slice
 * [rank*micro, (rank+1)*micro) of the global micro-batch perm[j*batch + k*batch/accum ...). */
static void source_fill_part(batch_source *src)
{
    const cifar_set *s = src->set;
    int64_t steps = s->n / src->batch, gmicro = src->batch / src->accum, out = 0;
    cifar_permutation(src->perm, s->n, src->seed, src->epoch);
    for (int64_t j = 0; j < steps; j++)
        for (int k = 0; k < src->accum; k++)
            for (int64_t i = 0; i < src->micro; i++, out++) {
                int64_t rec = src->perm[j * src->batch + k * gmicro + src->rank * src->micro + i];
                src->part.labels[out] = s->labels[rec];
                memcpy(src->part.pixels + (size_t)out * CIFAR_PIXELS,
                       s->pixels + (size_t)rec * CIFAR_PIXELS, CIFAR_PIXELS);
            }
}

static int source_start_epoch(batch_source *src)
{
    source_fill_part(src);
    src->running = cifar_loader_start(&src->ld, &src->part, (int)src->micro, 0, src->dev, 0, 1);
    return src->running;
}

/* 1 on success. */
static int source_start(batch_source *src, const cifar_set *set, const options *o, int rank,
                        int world, int dist)
{
    memset(src, 0, sizeof *src);
    src->set = set;
    src->dist = dist;
    src->rank = rank;
    src->world = world;
    src->accum = o->accum;
    src->epochs = o->epochs;
    src->batch = o->batch;
    src->micro = o->batch / (world * o->accum);
    src->seed = o->seed;
    src->dev = o->device;
    if (!dist) {
        src->running =
            cifar_loader_start(&src->ld, set, o->batch, o->seed, o->device, 1, o->epochs);
        return src->running;
    }
    int64_t steps = set->n / o->batch;
    if (steps < 1) {
        fprintf(stderr, "cifar: %lld images make no global batch of %d\n", (long long)set->n,
                o->batch);
        return 0;
    }
    src->part.n = steps * o->accum * src->micro;
    src->part.labels = malloc((size_t)src->part.n);
    src->part.pixels = malloc((size_t)src->part.n * CIFAR_PIXELS);
    src->perm = malloc((size_t)set->n * sizeof(int64_t));
    if (!src->part.labels || !src->part.pixels || !src->perm) {
        fprintf(stderr, "cifar: out of host memory for this rank's %lld images\n",
                (long long)src->part.n);
        return 0;
    }
    return source_start_epoch(src);
}

/* The next micro-batch and its epoch; NULL at the end or on a failure (source_error). */
static cifar_batch *source_next(batch_source *src, long long *epoch)
{
    cifar_batch *b = src->running ? cifar_loader_next(&src->ld) : NULL;
    if (!src->dist) {
        if (b)
            *epoch = b->epoch;
        return b;
    }
    if (!b && src->running && !cifar_loader_error(&src->ld) && src->epoch + 1 < src->epochs) {
        cifar_loader_stop(&src->ld); /* the epoch is over: the next one's records */
        src->running = 0;
        src->epoch++;
        if (source_start_epoch(src))
            b = cifar_loader_next(&src->ld);
        else
            snprintf(src->error, sizeof src->error, "cannot start the loader of epoch %lld",
                     (long long)src->epoch);
    }
    *epoch = src->epoch;
    return b;
}

static void source_release(batch_source *src, cifar_batch *b)
{
    cifar_loader_release(&src->ld, b);
}

static const char *source_error(const batch_source *src)
{
    if (src->error[0])
        return src->error;
    return src->running ? cifar_loader_error(&src->ld) : NULL;
}

static void source_stop(batch_source *src)
{
    if (src->running)
        cifar_loader_stop(&src->ld);
    src->running = 0;
    if (src->dist)
        cifar_free(&src->part);
    free(src->perm);
    src->perm = NULL;
}

/* ---- a process group's rank ---- */

/* v[0..n) summed over the ranks (f32, through the group's device); 1 on success. */
static int sum_over_ranks(tgc_dist *pg, float *v, int64_t n)
{
    tgc_device dev = tgc_dist_device(pg);
    tgc_scope_push();
    tgc_tensor *t = tgc_from_data(v, (size_t)n * sizeof(float), &n, 1, TGC_F32, tgc_cpu());
    tgc_tensor *s = tgc_dist_all_reduce(pg, example_to(t, dev), TGC_DIST_SUM);
    int ok = s && tgc_copy_to_host(s, v, (size_t)n * sizeof(float)) == TGC_OK;
    if (!ok)
        fprintf(stderr, "tgc_dist_all_reduce: %s (%s)\n", tgc_last_error(),
                tgc_status_str(tgc_last_status()));
    tgc_scope_pop();
    return ok;
}

static int barrier(tgc_dist *pg)
{
    if (!pg)
        return 1;
    tgc_status st = tgc_dist_barrier(pg);
    if (st != TGC_OK)
        fprintf(stderr, "tgc_dist_barrier: %s (%s)\n", tgc_last_error(), tgc_status_str(st));
    return st == TGC_OK;
}

/* Joins the group of the plan; NULL with a message when it fails. */
static tgc_dist *join_group(const options *o, const dist_plan *dp)
{
    tgc_dist_opts d = tgc_dist_opts_default();
    d.rank = dp->rank;
    d.world_size = dp->world;
    d.id_file = dp->id_file;
    d.timeout_s = o->timeout_s;
    if (o->device.type == TGC_DEVICE_CPU)
        d.device = tgc_cpu();
    else
        d.device = tgc_cuda(dp->rank >= 0 ? dp->rank : -1); /* -1: the local rank's GPU */
    tgc_dist *pg = tgc_dist_init(&d);
    if (!pg) {
        tgc_status st = tgc_last_status();
        if (dp->rank >= 0)
            fprintf(stderr, "tgc_dist_init (rank %d of %d): %s (%s)\n", dp->rank, dp->world,
                    tgc_last_error(), tgc_status_str(st));
        else
            fprintf(stderr, "tgc_dist_init (rank and world size from the environment): %s (%s)\n",
                    tgc_last_error(), tgc_status_str(st));
        if (st == TGC_ERR_INVALID_ARG && dp->rank < 0)
            fprintf(stderr, "  launched externally: set TGC_DIST_ID_FILE (a path every rank "
                            "sees) or TGC_DIST_ID, or pass --id-file\n");
    }
    return pg;
}

/* ---- one training process: the single-process run, or one rank of a group ---- */

/* Trains as the options say; train/test are loaded already unless need_data (then this
 * rank reads them after the group formed: rank 0 first, which writes a missing synthetic
 * set). Returns the exit status. */
static int run(const options *opts, const dist_plan *dp, cifar_set *train, cifar_set *test,
               int synthetic, int need_data)
{
    options o = *opts;
    int rc = 1, rank = 0, world = 1;
    tgc_dist *pg = NULL;
    tgc_fn *step = NULL, *eval = NULL;
    tgc_module *net = NULL;
    char prefix[32] = "";
    if (dp->on) {
        pg = join_group(&o, dp);
        if (!pg)
            goto free_data;
        rank = tgc_dist_rank(pg);
        world = tgc_dist_world_size(pg);
        o.device = tgc_dist_device(pg);
        snprintf(prefix, sizeof prefix, "rank %d/%d: ", rank, world);
        if (o.batch % (world * o.accum) != 0) {
            if (rank == 0)
                fprintf(stderr,
                        "--batch %d (the global batch) must be a multiple of %d ranks "
                        "x --accum %d\n",
                        o.batch, world, o.accum);
            goto free_data;
        }
    }
    if (need_data) {
        double t_load = now_s();
        int ok = rank == 0 ? cifar_open_dir(o.data, o.synth_train, o.synth_test, &synthetic) : 1;
        ok = barrier(pg) && ok;
        if (ok && rank != 0)
            ok = cifar_open_dir(o.data, o.synth_train, o.synth_test, &synthetic);
        if (!ok || !cifar_load(o.data, 1, train) || !cifar_load(o.data, 0, test))
            goto free_data;
        if (rank == 0)
            printf("CIFAR-10%s from %s: %lld training, %lld test images (read in %.2f s)\n",
                   synthetic ? " (SYNTHETIC: generated stand-in, not the real data)" : "", o.data,
                   (long long)train->n, (long long)test->n, now_s() - t_load);
    }
    char dev[32];

    net = make_model(&o);
    if (!net)
        goto free_data;
    if (o.resume && tgc_module_load(net, o.resume, 1) != TGC_OK) {
        fprintf(stderr, "%s--resume %s: %s\n", prefix, o.resume, tgc_last_error());
        goto free_net;
    }
    if (pg) {
        g_ddp = tgc_ddp_create(pg, net, NULL);
        if (!g_ddp) {
            fprintf(stderr, "%stgc_ddp_create: %s (%s)\n", prefix, tgc_last_error(),
                    tgc_status_str(tgc_last_status()));
            goto free_net;
        }
        g_accum = o.accum;
    }
    g_opt = tgc_adam(net, &(tgc_adam_opts){.lr = o.lr});
    if (!g_opt) {
        fprintf(stderr, "tgc_adam: %s\n", tgc_last_error());
        goto free_ddp;
    }
    if (o.resume) {
        char op[4096];
        optim_path(o.resume, op, sizeof op);
        if (tgc_optim_load(g_opt, op) != TGC_OK) {
            fprintf(stderr, "%s--resume %s: %s\n", prefix, op, tgc_last_error());
            goto free_opt;
        }
        if (rank == 0)
            printf("resumed from %s and %s\n", o.resume, op);
    }
    tgc_config cfg = tgc_config_default();
    cfg.matmul_precision = o.precision;
    cfg.mode = o.mode;
    cfg.num_threads = o.threads;
    step = tgc_compile(train_step, "train_step", &cfg);
    eval = tgc_compile(eval_step, "eval_step", &cfg);
    if (!step || !eval) {
        fprintf(stderr, "tgc_compile: %s\n", tgc_last_error());
        goto free_fns;
    }
    if (o.resume && !fn_states(step, eval, o.resume, 0, prefix))
        goto free_fns;
    if (rank == 0) {
        printf("model %s (%d parameter tensors and buffers) on %s, Adam lr %g, batch %d, %s mode, "
               "precision %s\n",
               o.model, tgc_module_num_tensors(net), example_device_name(o.device, dev, sizeof dev),
               o.lr, o.batch, o.mode == TGC_MODE_REDUCE_OVERHEAD ? "reduce-overhead" : "default",
               o.precision == TGC_PRECISION_HIGHEST ? "highest"
               : o.precision == TGC_PRECISION_HIGH  ? "high"
                                                    : "medium");
        if (pg)
            printf("data parallel: %d ranks, global batch %d = %d ranks x %d micro-batches x %d "
                   "images; %d gradient buckets\n",
                   world, o.batch, world, o.accum, o.batch / (world * o.accum),
                   tgc_ddp_num_buckets(g_ddp));
    }
    fflush(stdout);

    batch_source src;
    if (!source_start(&src, train, &o, rank, world, pg != NULL)) {
        source_stop(&src);
        goto free_fns;
    }
    long long steps = 0, period_steps = 0;
    double period_loss = 0, period_t0 = now_s(), first_call_s = 0, t_run = now_s();
    double step_s_sum = 0, wait_s_sum = 0, images_per_step = (double)o.batch / world;
    int ok = 1;
    for (;;) {
        /* one optimizer step: o.accum micro-batches, the last with the all-reduce */
        double lv = 0, dt = 0;
        long long epoch = 0;
        int last = 0, got = 0;
        tgc_status st = TGC_OK;
        for (int k = 0; k < o.accum && st == TGC_OK; k++) {
            double tw = now_s();
            cifar_batch *b = source_next(&src, &epoch);
            wait_s_sum += now_s() - tw;
            if (!b)
                break;
            got++;
            if (g_ddp)
                st = tgc_ddp_set_sync(g_ddp, k == o.accum - 1);
            tgc_scope_push();
            tgc_tensor *in[2] = {b->x, b->y}, *loss = NULL;
            double t0 = now_s();
            if (st == TGC_OK)
                st = tgc_call(step, net, in, 2, &loss, 1);
            lv += (st == TGC_OK ? tgc_item_f64(loss) : NAN) / o.accum; /* waits for the step */
            dt += now_s() - t0;
            tgc_scope_pop();
            last = b->last;
            source_release(&src, b);
        }
        if (st == TGC_OK && got == 0)
            break;
        if (st != TGC_OK || got != o.accum) {
            fprintf(stderr, "%strain tgc_call: %s (%s)\n", prefix,
                    st != TGC_OK ? tgc_last_error() : "the data ended inside a step",
                    tgc_status_str(st));
            ok = 0;
            break;
        }
        if (steps == 0) {
            first_call_s = dt;
            tgc_stats s;
            if (rank == 0 && tgc_fn_stats(step, &s) == TGC_OK)
                printf("first step: %.3f s (compile_seconds %.3f: trace, joint graph, code), "
                       "loss %.4f\n",
                       dt, s.compile_seconds, lv);
        } else {
            step_s_sum += dt;
        }
        steps++;
        period_steps++;
        period_loss += lv;
        if (!isfinite(lv)) {
            fprintf(stderr, "%sstep %lld: loss is %g\n", prefix, steps, lv);
            ok = 0;
            break;
        }
        if (period_steps == o.report || last) {
            double el = now_s() - period_t0;
            float tot[2] = {(float)(period_loss / (double)period_steps),
                            (float)((double)period_steps * images_per_step / el)};
            printf("%sepoch %lld step %6lld  loss %.4f  %.0f images/s  step %.2f ms\n", prefix,
                   epoch, steps, period_loss / (double)period_steps, (double)tot[1],
                   1e3 * el / (double)period_steps);
            fflush(stdout);
            if (pg && !sum_over_ranks(pg, tot, 2)) {
                ok = 0;
                break;
            }
            if (pg && rank == 0) {
                printf("total (%d ranks) epoch %lld step %6lld  loss %.4f (mean over ranks)  %.0f "
                       "images/s\n",
                       world, epoch, steps, (double)tot[0] / world, (double)tot[1]);
                fflush(stdout);
            }
            period_steps = 0;
            period_loss = 0;
            period_t0 = now_s();
        }
        int stop = o.max_steps > 0 && steps >= o.max_steps;
        if (last || stop) {
            double te = now_s();
            if (rank == 0 && !evaluate(eval, net, test, &o, synthetic, epoch)) {
                ok = 0;
                break;
            }
            if (!barrier(pg)) { /* the other ranks wait for rank 0's evaluation */
                ok = 0;
                break;
            }
            period_t0 += now_s() - te; /* the evaluation is not training time */
        }
        if (stop)
            break;
    }
    if (ok && source_error(&src)) {
        fprintf(stderr, "%straining data: %s\n", prefix, source_error(&src));
        ok = 0;
    }
    source_stop(&src);
    double run_s = now_s() - t_run;
    if (ok && steps > 0) {
        printf("%strained %lld steps (%lld images) in %.1f s%s; first step %.3f s; mean later step "
               "%.2f ms; waited %.1f ms for data in all\n",
               prefix, steps, (long long)((double)steps * images_per_step), run_s,
               synthetic ? " on synthetic data" : "", first_call_s,
               steps > 1 ? 1e3 * step_s_sum / (double)(steps - 1) : 0.0, 1e3 * wait_s_sum);
        if (rank == 0) {
            print_stats("train_step", step);
            print_stats("eval_step", eval);
        }
    }
    if (ok && pg) { /* the run's total: the later steps' images/s summed over the ranks */
        float tot[2] = {steps > 1 ? (float)((double)(steps - 1) * images_per_step / step_s_sum)
                                  : 0.0f,
                        steps > 1 ? (float)(1e3 * step_s_sum / (double)(steps - 1)) : 0.0f};
        printf("%s%.0f images/s over the later steps (step %.2f ms)\n", prefix, (double)tot[0],
               (double)tot[1]);
        fflush(stdout);
        ok = sum_over_ranks(pg, tot, 2);
        if (ok && rank == 0)
            printf("total: %d ranks, %.0f images/s (sum over the ranks), mean step %.2f ms, "
                   "global batch %d\n",
                   world, (double)tot[0], (double)tot[1] / world, o.batch);
        ok = ok && barrier(pg); /* every rank is done before rank 0 writes the checkpoint */
    }
    if (ok && o.checkpoint && rank == 0) {
        char op[4096];
        optim_path(o.checkpoint, op, sizeof op);
        if (tgc_module_save(net, o.checkpoint) != TGC_OK || tgc_optim_save(g_opt, op) != TGC_OK) {
            fprintf(stderr, "checkpoint: %s\n", tgc_last_error());
            ok = 0;
        } else if (!fn_states(step, eval, o.checkpoint, 1, prefix)) {
            ok = 0;
        } else {
            printf("checkpoint: %s (module), %s (optimizer), with the functions' states\n",
                   o.checkpoint, op);
        }
    }
    fflush(stdout);
    rc = ok ? 0 : 1;
free_fns:
    tgc_fn_free(step); /* the compiled functions that all-reduced, before the group */
    tgc_fn_free(eval);
free_opt:
    tgc_optim_free(g_opt);
free_ddp:
    tgc_ddp_free(g_ddp);
    g_ddp = NULL;
free_net:
    tgc_module_free(net);
free_data:
    tgc_dist_free(pg);
    cifar_free(train);
    cifar_free(test);
    tgc_shutdown();
    return rc;
}

/* ---- the launcher of --gpus/--ranks N ---- */

/* Removes the rendezvous directory and what the ranks left in it. */
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

/* Forks o->ranks children (no tgc call has touched a device in this process), one rank
 * each, waits for them all and returns 0 when every rank succeeded. */
static int launch(const options *o, cifar_set *train, cifar_set *test, int synthetic)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], id_file[4200];
    snprintf(dir, sizeof dir, "%s/tgc_dist_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "train_cifar: mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(id_file, sizeof id_file, "%s/id", dir);
    int n = o->ranks, started = 0, failed = 0, alive = 0;
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    if (!pid) {
        remove_dir(dir);
        return 1;
    }
    fflush(stdout); /* nothing buffered is printed twice */
    fflush(stderr);
    for (; started < n; started++) {
        pid[started] = fork();
        if (pid[started] < 0) {
            fprintf(stderr, "train_cifar: fork: %s\n", strerror(errno));
            failed = 1;
            break;
        }
        if (pid[started] == 0) {
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* a rank does not outlive its launcher */
#endif
            dist_plan dp = {1, started, n, id_file};
            exit(run(o, &dp, train, test, synthetic, 0));
        }
        alive++;
    }
    cifar_free(train); /* the children have their copies */
    cifar_free(test);
    if (failed)
        for (int r = 0; r < started; r++)
            kill(pid[r], SIGTERM);
    while (alive > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int r = 0;
        while (r < started && pid[r] != p)
            r++;
        if (r == started)
            continue;
        pid[r] = 0;
        alive--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM && failed)
            fprintf(stderr, "train_cifar: rank %d stopped\n", r);
        else if (WIFSIGNALED(status))
            fprintf(stderr, "train_cifar: rank %d was killed by signal %d\n", r, WTERMSIG(status));
        else
            fprintf(stderr, "train_cifar: rank %d failed (exit status %d)\n", r,
                    WEXITSTATUS(status));
        if (!failed) { /* the others would only wait for it until --timeout */
            failed = 1;
            if (alive > 0)
                fprintf(stderr, "train_cifar: stopping the other ranks\n");
            for (int q = 0; q < started; q++)
                if (pid[q] > 0)
                    kill(pid[q], SIGTERM);
        }
    }
    free(pid);
    remove_dir(dir);
    if (!failed)
        printf("train_cifar: all %d ranks finished\n", n);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    options o = {.model = "cnn",
                 .data = "data/cifar-10-batches-bin",
                 .epochs = 1,
                 .batch = 64,
                 .report = 50,
                 .width = 64,
                 .accum = 1,
                 .synth_train = 50000,
                 .synth_test = 10000,
                 .lr = 1e-3,
                 .seed = 1234,
                 .device = tgc_cpu(),
                 .precision = TGC_PRECISION_HIGHEST,
                 .mode = TGC_MODE_DEFAULT};
    int parsed = parse_args(argc, argv, &o);
    if (parsed <= 0) {
        usage(parsed < 0 ? stdout : stderr, argv[0]);
        return parsed < 0 ? 0 : 2;
    }
    int external = launched_externally();
    if (external && o.ranks > 0) {
        fprintf(stderr,
                "%s: --gpus/--ranks launch the ranks, but this process was launched as "
                "one (RANK/WORLD_SIZE or TGC_RANK/TGC_WORLD_SIZE are set): use one or "
                "the other\n",
                argv[0]);
        return 2;
    }
    if (o.accum > 1 && !external && o.ranks == 0) {
        fprintf(stderr, "%s: --accum needs a process group (--gpus 1, or --ranks 1 on the host)\n",
                argv[0]);
        return 2;
    }
    cifar_set train = {0}, test = {0};
    if (external) {
        dist_plan dp = {1, -1, -1, o.id_file};
        return run(&o, &dp, &train, &test, 0, 1);
    }
    int synthetic = 0;
    double t_load = now_s();
    if (!cifar_open_dir(o.data, o.synth_train, o.synth_test, &synthetic) ||
        !cifar_load(o.data, 1, &train) || !cifar_load(o.data, 0, &test))
        return 1;
    printf("CIFAR-10%s from %s: %lld training, %lld test images (read in %.2f s)\n",
           synthetic ? " (SYNTHETIC: generated stand-in, not the real data)" : "", o.data,
           (long long)train.n, (long long)test.n, now_s() - t_load);
    if (o.ranks > 0)
        return launch(&o, &train, &test, synthetic);
    dist_plan none = {0, 0, 1, NULL};
    return run(&o, &none, &train, &test, synthetic, 0);
}
