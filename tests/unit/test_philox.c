/* Philox4x32-10 known answers (Random123 KAT) and the process stream's contract. */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "runtime/philox.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void check_kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4])
{
    uint32_t got[4];
    tgc_philox4x32_10(ctr, key, got);
    for (int i = 0; i < 4; i++)
        assert_int_equal(got[i], want[i]);
}

static void test_kat_zero(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0, 0, 0, 0};
    const uint32_t key[2] = {0, 0};
    const uint32_t want[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    check_kat(ctr, key, want);
}

static void test_kat_ones(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
    const uint32_t key[2] = {0xffffffff, 0xffffffff};
    const uint32_t want[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    check_kat(ctr, key, want);
}

static void test_kat_pi(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    const uint32_t key[2] = {0xa4093822, 0x299f31d0};
    const uint32_t want[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    check_kat(ctr, key, want);
}

/* bits(seed, counter) is word 0 of the block for counter {lo, hi, 0, 0}, key {lo, hi}. */
static void test_bits_layout(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, 0x2545F4914F6CDD1DULL, 0xffffffffffffffffULL};
    const uint64_t ctrs[] = {0, 1, 0xffffffffULL, 0x100000000ULL, 0x123456789abcdef0ULL};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        for (size_t c = 0; c < sizeof ctrs / sizeof ctrs[0]; c++) {
            const uint32_t ctr[4] = {(uint32_t)ctrs[c], (uint32_t)(ctrs[c] >> 32), 0, 0};
            const uint32_t key[2] = {(uint32_t)seeds[s], (uint32_t)(seeds[s] >> 32)};
            uint32_t out[4];
            tgc_philox4x32_10(ctr, key, out);
            assert_int_equal(tgc_philox_bits(seeds[s], ctrs[c]), out[0]);
        }
    }
    /* the zero KAT through the scalar entry point */
    assert_int_equal(tgc_philox_bits(0, 0), 0x6627e8d5);
    /* the high counter and key words matter */
    assert_int_not_equal(tgc_philox_bits(0, 0x100000000ULL), tgc_philox_bits(0, 0));
    assert_int_not_equal(tgc_philox_bits(0x100000000ULL, 0), tgc_philox_bits(0, 0));
}

static void test_uniform(void **state)
{
    (void)state;
    const uint64_t seed = 1234;
    const int n = 200000;
    double sum = 0, sumsq = 0;
    float lo = 1, hi = 0;
    for (int i = 0; i < n; i++) {
        float u = tgc_philox_uniform(seed, (uint64_t)i);
        /* exactly (bits >> 8) * 2^-24 */
        assert_true(u == (float)(tgc_philox_bits(seed, (uint64_t)i) >> 8) / 16777216.0f);
        assert_true(u >= 0.0f && u < 1.0f);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        sum += u;
        sumsq += (double)u * u;
    }
    double mean = sum / n, var = sumsq / n - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12.0) < 0.002);
    assert_true(lo < 0.001f && hi > 0.999f);
    /* the largest possible value is 1 - 2^-24, still below 1 */
    assert_true((float)(0xffffffffu >> 8) * 0x1p-24f < 1.0f);
}

static void test_normal(void **state)
{
    (void)state;
    const uint64_t seed = 99;
    const int n = 200000;
    double sum = 0, sumsq = 0;
    int beyond2 = 0;
    for (int i = 0; i < n; i++) {
        float z = tgc_philox_normal(seed, (uint64_t)i);
        assert_true(isfinite(z));
        sum += z;
        sumsq += (double)z * z;
        beyond2 += fabsf(z) > 2.0f;
    }
    double mean = sum / n, var = sumsq / n - mean * mean;
    assert_true(fabs(mean) < 0.01);
    assert_true(fabs(var - 1.0) < 0.02);
    /* P(|z| > 2) = 0.0455 */
    assert_true(fabs((double)beyond2 / n - 0.0455) < 0.003);

    /* Box-Muller on counter and counter | 1<<63 */
    for (uint64_t c = 0; c < 64; c++) {
        double u1 = tgc_philox_uniform(seed, c);
        double u2 = tgc_philox_uniform(seed, c | (UINT64_C(1) << 63));
        double want = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * 3.14159265358979323846 * u2);
        assert_true(fabs(tgc_philox_normal(seed, c) - want) <= 1e-6 * (1.0 + fabs(want)));
    }
    /* deterministic */
    assert_true(tgc_philox_normal(seed, 7) == tgc_philox_normal(seed, 7));
}

static void test_seed_and_reserve(void **state)
{
    (void)state;
    tgc_rng_seed(42);
    assert_true(tgc_rng_current_seed() == 42);
    assert_true(tgc_rng_reserve(10) == 0);
    assert_true(tgc_rng_reserve(5) == 10);
    assert_true(tgc_rng_reserve(0) == 15);
    assert_true(tgc_rng_reserve(1) == 15);
    assert_true(tgc_rng_reserve(0) == 16);

    /* reseeding resets the offset, also with the same seed */
    tgc_rng_seed(42);
    assert_true(tgc_rng_reserve(3) == 0);
    tgc_rng_seed(0xdeadbeefcafef00dULL);
    assert_true(tgc_rng_current_seed() == 0xdeadbeefcafef00dULL);
    assert_true(tgc_rng_reserve(1) == 0);

    /* a draw replays after a reseed: same (seed, offset) -> same bits */
    tgc_rng_seed(7);
    uint64_t base = tgc_rng_reserve(4);
    uint32_t first[4];
    for (int i = 0; i < 4; i++)
        first[i] = tgc_philox_bits(tgc_rng_current_seed(), base + (uint64_t)i);
    tgc_rng_seed(7);
    base = tgc_rng_reserve(4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tgc_philox_bits(tgc_rng_current_seed(), base + (uint64_t)i), first[i]);
    /* the next draw does not overlap */
    assert_true(tgc_rng_reserve(4) == 4);
}

#define RESERVE_THREADS    4
#define RESERVE_PER_THREAD 20000

static void *reserve_worker(void *arg)
{
    uint64_t *got = arg;
    for (int i = 0; i < RESERVE_PER_THREAD; i++)
        got[i] = tgc_rng_reserve(3);
    return NULL;
}

/* A draw hands out its offsets together with the seed they belong to. */
static void test_draw_gives_seed_and_offsets(void **state)
{
    (void)state;
    uint64_t seed = 0;
    tgc_rng_seed(77);
    assert_true(tgc_rng_draw(5, &seed) == 0);
    assert_true(seed == 77);
    assert_true(tgc_rng_draw(1, &seed) == 5);
    tgc_rng_seed(78);
    assert_true(tgc_rng_draw(2, &seed) == 0);
    assert_true(seed == 78);
    assert_true(tgc_rng_draw(0, NULL) == 2);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Concurrent reservations never overlap: every block start is distinct and they tile the
 * range [0, 3 * total). */
static void test_reserve_atomic(void **state)
{
    (void)state;
    const size_t total = (size_t)RESERVE_THREADS * RESERVE_PER_THREAD;
    uint64_t *got = malloc(total * sizeof *got);
    assert_non_null(got);
    tgc_rng_seed(5);
    pthread_t th[RESERVE_THREADS];
    for (int t = 0; t < RESERVE_THREADS; t++)
        assert_int_equal(
            pthread_create(&th[t], NULL, reserve_worker, got + (size_t)t * RESERVE_PER_THREAD), 0);
    for (int t = 0; t < RESERVE_THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    qsort(got, total, sizeof *got, cmp_u64);
    for (size_t i = 0; i < total; i++)
        assert_true(got[i] == 3 * (uint64_t)i);
    assert_true(tgc_rng_reserve(0) == 3 * (uint64_t)total);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kat_zero),         cmocka_unit_test(test_kat_ones),
        cmocka_unit_test(test_kat_pi),           cmocka_unit_test(test_bits_layout),
        cmocka_unit_test(test_uniform),          cmocka_unit_test(test_normal),
        cmocka_unit_test(test_seed_and_reserve), cmocka_unit_test(test_reserve_atomic),
        cmocka_unit_test(test_draw_gives_seed_and_offsets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
