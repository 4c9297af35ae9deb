/* examples/data/cifar.h: the CIFAR-10 binary reader, the synthetic set, normalization,
 * per-epoch shuffling and the prefetch thread. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/data/cifar.h"

static char g_dir[128];

static void rm_set(const char *dir)
{
    static const char *const files[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
                                        "SYNTHETIC"};
    char p[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        remove(p);
    }
    rmdir(dir);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tgc_cifar_test_%d/sub", (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rm_set(g_dir);
    char parent[128];
    snprintf(parent, sizeof parent, "/tmp/tgc_cifar_test_%d", (int)getpid());
    rmdir(parent);
    return 0;
}

/* A missing directory gets a synthetic set in the binary format; a second open finds it
 * and still says synthetic. */
static void test_synthetic_written_and_read(void **state)
{
    (void)state;
    int synthetic = 0;
    assert_int_equal(cifar_open_dir(g_dir, 1003, 301, &synthetic), 1);
    assert_int_equal(synthetic, 1);
    char p[256];
    snprintf(p, sizeof p, "%s/data_batch_1.bin", g_dir);
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    assert_int_equal(ftell(fp),
                     201 * CIFAR_RECORD); /* 1003 over 5 files: 201, 201, 201, 200, 200 */
    fclose(fp);
    synthetic = 0;
    assert_int_equal(cifar_open_dir(g_dir, 1003, 301, &synthetic), 1);
    assert_int_equal(synthetic, 1);

    cifar_set train, test;
    assert_int_equal(cifar_load(g_dir, 1, &train), 1);
    assert_int_equal(cifar_load(g_dir, 0, &test), 1);
    assert_int_equal(train.n, 1003);
    assert_int_equal(test.n, 301);
    int counts[CIFAR_CLASSES] = {0};
    for (int64_t i = 0; i < train.n; i++) {
        assert_true(train.labels[i] < CIFAR_CLASSES);
        counts[train.labels[i]]++;
    }
    for (int c = 0; c < CIFAR_CLASSES; c++)
        assert_true(counts[c] > 50 && counts[c] < 150); /* roughly balanced */
    /* class patterns differ: per-class mean images are far apart relative to the noise */
    double mean[2][3072] = {{0}};
    int nc[2] = {0, 0};
    for (int64_t i = 0; i < train.n; i++)
        if (train.labels[i] < 2) {
            nc[train.labels[i]]++;
            for (int k = 0; k < 3072; k++)
                mean[train.labels[i]][k] += train.pixels[i * 3072 + k];
        }
    double dist = 0;
    for (int k = 0; k < 3072; k++)
        dist += fabs(mean[0][k] / nc[0] - mean[1][k] / nc[1]);
    assert_true(dist / 3072 > 10.0); /* mean absolute difference above 10 of 255 */
    cifar_free(&train);
    cifar_free(&test);
}

/* A file that is not whole records is rejected. */
static void test_truncated_file_rejected(void **state)
{
    (void)state;
    char dir[160], p[256];
    snprintf(dir, sizeof dir, "%s_bad", g_dir);
    int synthetic;
    assert_int_equal(cifar_open_dir(dir, 10, 5, &synthetic), 1);
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    FILE *fp = fopen(p, "ab");
    assert_non_null(fp);
    fputc(7, fp);
    fclose(fp);
    cifar_set s;
    assert_int_equal(cifar_load(dir, 0, &s), 0);
    assert_null(s.labels);
    assert_int_equal(cifar_load(dir, 1, &s), 1);
    assert_int_equal(s.n, 10);
    cifar_free(&s);
    rm_set(dir);
}

static void test_permutation_seeded(void **state)
{
    (void)state;
    enum { N = 1000 };
    static int64_t a[N], b[N], c[N];
    cifar_permutation(a, N, 42, 0);
    cifar_permutation(b, N, 42, 0);
    cifar_permutation(c, N, 42, 1);
    assert_memory_equal(a, b, sizeof a);
    assert_true(memcmp(a, c, sizeof a) != 0);
    static char seen[N];
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        assert_false(seen[a[i]]);
        seen[a[i]] = 1;
    }
}

static void test_normalization(void **state)
{
    (void)state;
    cifar_set s;
    uint8_t label = 3, pix[3072];
    for (int k = 0; k < 3072; k++)
        pix[k] = (uint8_t)(k % 256);
    s.n = 1;
    s.labels = &label;
    s.pixels = pix;
    float x[2 * 3072];
    int64_t y[2] = {0, 0}, idx = 0;
    cifar_fill(&s, &idx, 1, 2, x, y);
    assert_int_equal(y[0], 3);
    assert_int_equal(y[1], CIFAR_IGNORE);
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 1024; k += 97) {
            double want = ((double)pix[c * 1024 + k] / 255.0 - cifar_mean[c]) / cifar_std[c];
            assert_true(fabs(x[c * 1024 + k] - want) < 1e-5);
        }
    for (int k = 0; k < 3072; k++)
        assert_true(x[3072 + k] == 0.0f);
}

/* The prefetch thread delivers every image once per epoch, in full batches (training), and
 * the test set in order with the last batch padded. */
static void test_loader_epochs(void **state)
{
    (void)state;
    cifar_set train, test;
    assert_int_equal(cifar_load(g_dir, 1, &train), 1);
    assert_int_equal(cifar_load(g_dir, 0, &test), 1);
    cifar_loader ld;
    assert_int_equal(cifar_loader_start(&ld, &train, 64, 7, tgc_cpu(), 1, 2), 1);
    int64_t per_epoch = train.n / 64, got = 0;
    int64_t class_count[2][CIFAR_CLASSES] = {{0}};
    cifar_batch *b;
    while ((b = cifar_loader_next(&ld)) != NULL) {
        assert_int_equal(b->index, got % per_epoch);
        assert_int_equal(b->epoch, got / per_epoch);
        assert_int_equal(b->last, b->index == per_epoch - 1);
        assert_int_equal(b->valid, 64);
        assert_int_equal(tgc_size(b->x, 0), 64);
        assert_int_equal(tgc_size(b->x, 1), 3);
        assert_int_equal(tgc_dtype_of(b->y), TGC_I64);
        int64_t y[64];
        assert_int_equal(tgc_copy_to_host(b->y, y, sizeof y), TGC_OK);
        for (int i = 0; i < 64; i++) {
            assert_true(y[i] >= 0 && y[i] < CIFAR_CLASSES);
            class_count[b->epoch][y[i]]++;
        }
        got++;
        cifar_loader_release(&ld, b);
    }
    assert_null(cifar_loader_error(&ld));
    cifar_loader_stop(&ld);
    assert_int_equal(got, 2 * per_epoch);
    int64_t total[2] = {0, 0};
    for (int e = 0; e < 2; e++)
        for (int c = 0; c < CIFAR_CLASSES; c++)
            total[e] += class_count[e][c];
    assert_int_equal(total[0], per_epoch * 64);
    assert_int_equal(total[1], per_epoch * 64);

    assert_int_equal(cifar_loader_start(&ld, &test, 64, 0, tgc_cpu(), 0, 1), 1);
    int64_t seen = 0, first = -1;
    while ((b = cifar_loader_next(&ld)) != NULL) {
        int64_t y[64];
        assert_int_equal(tgc_copy_to_host(b->y, y, sizeof y), TGC_OK);
        if (b->index == 0)
            first = y[0];
        for (int i = 0; i < 64; i++) {
            if (i < b->valid)
                assert_int_equal(y[i], test.labels[seen + i]);
            else
                assert_int_equal(y[i], CIFAR_IGNORE);
        }
        seen += b->valid;
        cifar_loader_release(&ld, b);
    }
    cifar_loader_stop(&ld);
    assert_int_equal(seen, test.n);
    assert_int_equal(first, test.labels[0]);

    /* stopping early with batches still queued frees them */
    assert_int_equal(cifar_loader_start(&ld, &train, 16, 1, tgc_cpu(), 1, 0), 1);
    b = cifar_loader_next(&ld);
    assert_non_null(b);
    cifar_loader_release(&ld, b);
    cifar_loader_stop(&ld);
    cifar_free(&train);
    cifar_free(&test);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_written_and_read),
        cmocka_unit_test(test_truncated_file_rejected),
        cmocka_unit_test(test_permutation_seeded),
        cmocka_unit_test(test_normalization),
        cmocka_unit_test(test_loader_epochs),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    tgc_shutdown();
    return rc;
}
