/* Sharded cmocka groups: one test executable as several ctest entries that run in parallel
 * (header only; tests only).
 *
 * A long test ends main with
 *
 *     return test_run_shard("test_x", tests, sizeof tests / sizeof tests[0], NULL, NULL);
 *
 * instead of cmocka_run_group_tests(tests, NULL, NULL) (the last two: the group's setup and
 * teardown, as cmocka's). With TGC_TEST_SHARD=k/n in the
 * environment only the cases i with i % n == k run (the cases alternate between the shards,
 * so neighbouring cases of similar cost are spread); without it, or with a malformed value
 * (printed), every case runs. tgc_add_test_shards() in tests/CMakeLists.txt registers the n
 * ctest entries of a test (the test itself is shard 0; test_x_shard1 ... test_x_shard<n-1>
 * the others), so the union of the shards is exactly the unsharded run.
 *
 * Thread-safety: call from the test's main thread only. */
#ifndef TGC_TESTS_TEST_SHARD_H
#define TGC_TESTS_TEST_SHARD_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* The shard k of n named by TGC_TEST_SHARD (0 of 1 when unset or malformed). */
static inline void test_shard_of_env(int *k, int *n)
{
    const char *env = getenv("TGC_TEST_SHARD");
    *k = 0;
    *n = 1;
    if (!env || !*env)
        return;
    int a = 0, b = 0;
    char extra = 0;
    if (sscanf(env, "%d/%d%c", &a, &b, &extra) != 2 || b < 1 || a < 0 || a >= b) {
        fprintf(stderr, "TGC_TEST_SHARD=%s is not k/n with 0 <= k < n: every case runs\n", env);
        return;
    }
    *k = a;
    *n = b;
}

/* Runs the cases of tests[0..count) that belong to this process's shard; cmocka's status. */
static inline int test_run_shard(const char *group, const struct CMUnitTest *tests, size_t count,
                                 CMFixtureFunction setup, CMFixtureFunction teardown)
{
    int k, n;
    test_shard_of_env(&k, &n);
    if (n == 1)
        return _cmocka_run_group_tests(group, tests, count, setup, teardown);
    struct CMUnitTest *mine = malloc(sizeof *mine * (count ? count : 1));
    if (!mine) {
        fprintf(stderr, "%s: out of memory selecting shard %d/%d\n", group, k, n);
        return 1;
    }
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (i % (size_t)n == (size_t)k)
            mine[m++] = tests[i];
    printf("%s: shard %d/%d: %zu of %zu cases\n", group, k, n, m, count);
    int rc = _cmocka_run_group_tests(group, mine, m, setup, teardown);
    free(mine);
    return rc;
}

#endif
