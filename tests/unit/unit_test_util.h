/* Helpers shared by the unit tests (include after <cmocka.h>). */
#ifndef TGC_TESTS_UNIT_TEST_UTIL_H
#define TGC_TESTS_UNIT_TEST_UTIL_H

#include <string.h>

#include "tgc/tensor.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* A log callback's messages (cfg.log_fn = test_log_capture, cfg.log_user = a test_log), one
 * per line, as many as fit; n is the length of text. */
typedef struct test_log {
    char text[1 << 16];
    size_t n;
} test_log;

static inline void test_log_capture(unsigned channel, const char *msg, void *user)
{
    (void)channel;
    test_log *b = (test_log *)user;
    size_t len = strlen(msg);
    if (b->n + len + 2 < sizeof b->text) {
        memcpy(b->text + b->n, msg, len);
        b->n += len;
        b->text[b->n++] = '\n';
        b->text[b->n] = 0;
    }
}

/* Each test runs in its own scope with no pending error. */
static inline int scoped_setup(void **state)
{
    (void)state;
    tgc_clear_error();
    tgc_scope_push();
    return 0;
}

static inline int scoped_teardown(void **state)
{
    (void)state;
    return tgc_scope_pop() == TGC_OK ? 0 : -1;
}

static inline int group_shutdown(void **state)
{
    (void)state;
    tgc_shutdown();
    return 0;
}

/* The call failed with `want`, tgc_last_status() agrees and the message contains text. */
static inline void check_error(tgc_status got, tgc_status want, const char *text)
{
    assert_int_equal(got, want);
    assert_int_equal(tgc_last_status(), want);
    if (!strstr(tgc_last_error(), text))
        fail_msg("error message \"%s\" lacks \"%s\"", tgc_last_error(), text);
}

#endif
