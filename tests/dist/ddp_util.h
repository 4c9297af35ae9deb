/* Shared by the data-parallel tests (test_ddp.c on host ranks through the fake NCCL,
 * test_ddp_cuda.c on the GPU through the real one): ranks as forked processes, results
 * through files, and a small model without batch norm (its statistics would be per rank)
 * with a compiled SGD training step.
 *
 * Children never call cmocka (a failed assert would run the rest of the suite in the child):
 * they use CHILD_CHECK, which prints the failure and exits 1; the parent asserts on every
 * child's exit status. The parent itself makes no tgc call before forking (a forked OpenMP
 * or CUDA state is unusable).
 * Header only, static functions; one test thread. */
#ifndef TGC_TESTS_DDP_UTIL_H
#define TGC_TESTS_DDP_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tgc/tgc.h"

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child %d: %s:%d: check failed: %s (last error: %s %s)\n",             \
                    (int)getpid(), __FILE__, __LINE__, #cond, tgc_status_str(tgc_last_status()),   \
                    tgc_last_error());                                                             \
            fflush(stderr);                                                                        \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHILD_OK(expr) CHILD_CHECK((expr) == TGC_OK)

/* A fresh folder for one test's files (the id file, results). */
static inline void ddp_tmpdir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/tgc_ddp_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

/* Runs fn(rank, world, arg) in `world` forked children and waits for all; returns the number
 * of children that failed (exit status other than 0), and each one's status in codes[] when
 * codes is not NULL. fn returns the child's exit code. */
typedef int (*ddp_rank_fn)(int rank, int world, void *arg);
static inline int ddp_run_ranks(int world, ddp_rank_fn fn, void *arg, int *codes)
{
    pid_t pids[16];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc = fn(r, world, arg);
            tgc_shutdown();
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
    }
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (codes)
            codes[r] = code;
        failed += code != 0;
    }
    return failed;
}

static inline void ddp_write_doubles(const char *dir, const char *name, const double *v, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHILD_CHECK(f && fwrite(v, sizeof *v, (size_t)n, f) == (size_t)n);
    fclose(f);
}

static inline int ddp_read_doubles(const char *dir, const char *name, double *v, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(v, sizeof *v, (size_t)n, f);
    fclose(f);
    return got == (size_t)n;
}

/* ---- the model: x [B, 8] -> linear 16 -> relu -> linear 4, cross entropy ---- */
#define DDP_IN     8
#define DDP_HID    16
#define DDP_OUT    4
#define DDP_NPARAM (DDP_HID * DDP_IN + DDP_HID + DDP_OUT * DDP_HID + DDP_OUT)

static inline tgc_tensor *ddp_param(tgc_module *m, const char *name, int64_t r, int64_t c,
                                    uint64_t *seed, tgc_device dev)
{
    int64_t shape[2] = {r, c};
    int n = (int)(r * c);
    float *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(*seed >> 40) / (double)(1ull << 24) - 0.5) * 0.6f;
    }
    tgc_scope_push();
    tgc_tensor *t = tgc_from_data(v, (size_t)n * sizeof *v, shape, c ? 2 : 1, TGC_F32, tgc_cpu());
    if (c == 0)
        t = tgc_from_data(v, (size_t)r * sizeof *v, shape, 1, TGC_F32, tgc_cpu());
    tgc_tensor *p = tgc_module_param(m, name, t);
    tgc_scope_pop();
    free(v);
    (void)dev;
    return p;
}

/* The model with parameters from seed (each rank may pass another seed: tgc_ddp_create
 * broadcasts rank 0's). */
static inline tgc_module *ddp_model(uint64_t seed, tgc_device dev)
{
    tgc_module *m = tgc_module_create("mlp", NULL);
    tgc_module *fc1 = tgc_module_create("fc1", NULL), *fc2 = tgc_module_create("fc2", NULL);
    CHILD_CHECK(m && fc1 && fc2);
    CHILD_CHECK(ddp_param(fc1, "weight", DDP_HID, DDP_IN, &seed, dev));
    /* a bias is 1-d: r elements, c = 0 */
    {
        int64_t r = DDP_HID;
        float v[DDP_HID];
        for (int i = 0; i < DDP_HID; i++)
            v[i] = 0.01f * (float)(i % 5) - 0.02f;
        tgc_scope_push();
        CHILD_CHECK(
            tgc_module_param(fc1, "bias", tgc_from_data(v, sizeof v, &r, 1, TGC_F32, tgc_cpu())));
        tgc_scope_pop();
    }
    CHILD_CHECK(ddp_param(fc2, "weight", DDP_OUT, DDP_HID, &seed, dev));
    {
        int64_t r = DDP_OUT;
        float v[DDP_OUT] = {0.01f, -0.02f, 0.03f, 0.0f};
        tgc_scope_push();
        CHILD_CHECK(
            tgc_module_param(fc2, "bias", tgc_from_data(v, sizeof v, &r, 1, TGC_F32, tgc_cpu())));
        tgc_scope_pop();
    }
    CHILD_OK(tgc_module_child(m, "fc1", fc1));
    CHILD_OK(tgc_module_child(m, "fc2", fc2));
    if (dev.type != TGC_DEVICE_CPU)
        CHILD_OK(tgc_module_to(m, dev));
    return m;
}

static inline tgc_tensor *ddp_forward(tgc_module *m, tgc_tensor *x)
{
    tgc_module *fc1 = tgc_module_get_child(m, "fc1"), *fc2 = tgc_module_get_child(m, "fc2");
    tgc_tensor *h =
        tgc_relu(tgc_linear(x, tgc_module_get(fc1, "weight"), tgc_module_get(fc1, "bias")));
    return tgc_linear(h, tgc_module_get(fc2, "weight"), tgc_module_get(fc2, "bias"));
}

/* The optimizer of the compiled step (model functions only get self). */
static tgc_optim *ddp_opt;
static double ddp_loss_scale = 1.0; /* 1 / micro-batches per step (read at trace time) */
static int ddp_do_step = 1;         /* 0: backward only (an accumulation micro-step) */

/* in: x [b, 8] f32, y [b] i64. out: the loss. forward, backward (averaged by the ddp when m
 * is data-parallel), and, when ddp_do_step, the SGD update and zero_grad. */
static inline tgc_status ddp_train_step(tgc_module *m, tgc_tensor *const *in, int n_in,
                                        tgc_tensor **out, int n_out)
{
    (void)n_in;
    (void)n_out;
    tgc_tensor *loss = tgc_cross_entropy(ddp_forward(m, in[0]), in[1], TGC_REDUCE_MEAN, -100, 0.0);
    tgc_tensor *scaled = ddp_loss_scale != 1.0 ? tgc_mul_scalar(loss, ddp_loss_scale) : loss;
    if (!scaled)
        return tgc_last_status();
    tgc_status st = tgc_backward(scaled);
    if (st == TGC_OK && ddp_do_step)
        st = tgc_optim_step(ddp_opt);
    if (st == TGC_OK && ddp_do_step)
        st = tgc_optim_zero_grad(ddp_opt);
    out[0] = loss;
    return st;
}

/* Global batch `step` of size b: x and y generated from (step, row), so any rank can take
 * any rows of it. Rows [r0, r0 + n) on dev. */
static inline void ddp_batch(int step, int r0, int n, tgc_device dev, tgc_tensor **x,
                             tgc_tensor **y)
{
    float xv[64 * DDP_IN];
    int64_t yv[64];
    CHILD_CHECK(n <= 64);
    for (int i = 0; i < n; i++) {
        int row = r0 + i;
        for (int j = 0; j < DDP_IN; j++)
            xv[i * DDP_IN + j] = (float)sin(0.7 * step + 1.3 * row + 0.37 * j) * 1.5f;
        yv[i] = (int64_t)((step * 7 + row * 3) % DDP_OUT);
    }
    int64_t xs[2] = {n, DDP_IN}, ys[1] = {n};
    *x = tgc_from_data(xv, (size_t)n * DDP_IN * sizeof(float), xs, 2, TGC_F32, tgc_cpu());
    *y = tgc_from_data(yv, (size_t)n * sizeof(int64_t), ys, 1, TGC_I64, tgc_cpu());
    if (dev.type != TGC_DEVICE_CPU) {
        *x = tgc_to(*x, dev);
        *y = tgc_to(*y, dev);
    }
    CHILD_CHECK(*x && *y);
}

/* All parameters of m, flattened in tree order, into v (DDP_NPARAM doubles). */
static inline void ddp_params_of(tgc_module *m, double *v)
{
    const char *names[4][2] = {
        {"fc1", "weight"}, {"fc1", "bias"}, {"fc2", "weight"}, {"fc2", "bias"}};
    int k = 0;
    for (int i = 0; i < 4; i++) {
        tgc_tensor *t = tgc_module_get(tgc_module_get_child(m, names[i][0]), names[i][1]);
        int64_t n = tgc_numel(t);
        float buf[DDP_HID * DDP_IN];
        CHILD_OK(tgc_copy_to_host(t, buf, (size_t)n * sizeof(float)));
        for (int64_t j = 0; j < n; j++)
            v[k++] = buf[j];
    }
}

#endif
