/* BERT encoder (examples/models/bert.h), a small config: compiled equals eager with a padding
 * mask, the mask really hides padding, and the sequence-length sweep behaves: dynamic = AUTO
 * compiles at most twice, dynamic = NEVER reaches cache_size_limit (an error in ERROR mode,
 * one warning and eager values in FALLBACK_EAGER mode). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/models/bert.h"
#include "models/model_test_util.h"

static bert_config small_config(void)
{
    bert_config c = bert_base_config();
    c.hidden = 64;
    c.layers = 2;
    c.heads = 4;
    c.intermediate = 128;
    c.vocab = 100;
    c.max_pos = 64;
    return c;
}

static tgc_tensor *run_eager(tgc_module *m, tgc_tensor *const *in)
{
    tgc_tensor *y = NULL;
    tgc_status st = bert_forward(m, in, 4, &y, 1);
    if (st != TGC_OK)
        fail_msg("bert_forward: %s (%s)", tgc_last_error(), tgc_status_str(st));
    return y;
}

static tgc_tensor *run_compiled(tgc_fn *f, tgc_module *m, tgc_tensor *const *in)
{
    tgc_tensor *y = NULL;
    tgc_status st = tgc_call(f, m, in, 4, &y, 1);
    if (st != TGC_OK)
        fail_msg("tgc_call: %s (%s)", tgc_last_error(), tgc_status_str(st));
    return y;
}

static tgc_stats stats_of(const tgc_fn *f)
{
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    return s;
}

/* batch 2, seq 16, the second row padded at its last 5 positions. */
static void bert_compiled_equals_eager_with_padding(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    tgc_tensor *in[4];
    assert_int_equal(bert_make_inputs(&c, 2, 16, 5, 1, in), TGC_OK);
    tgc_tensor *eager = run_eager(m, in);
    assert_int_equal(tgc_ndim(eager), 3);
    assert_int_equal(tgc_size(eager, 0), 2);
    assert_int_equal(tgc_size(eager, 1), 16);
    assert_int_equal(tgc_size(eager, 2), 64);
    tgc_fn *f = tgc_compile(bert_forward, "bert", NULL);
    assert_non_null(f);
    assert_close(run_compiled(f, m, in), eager, 1e-4);
    assert_close(run_compiled(f, m, in), eager, 1e-4);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.cache_hits, 1);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* The mask hides padding: row 1's first 11 positions equal a run on those 11 tokens alone. */
static void bert_padding_mask_hides_padded_tokens(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    tgc_tensor *in[4], *cut[4];
    assert_int_equal(bert_make_inputs(&c, 2, 16, 5, 1, in), TGC_OK);
    for (int i = 0; i < 3; i++)
        cut[i] = tgc_contiguous(tgc_slice(tgc_slice(in[i], 0, 1, 2, 1), 1, 0, 11, 1));
    cut[3] = tgc_contiguous(tgc_slice(in[3], 1, 0, 11, 1));
    tgc_fn *f = tgc_compile(bert_forward, "bert", NULL);
    assert_non_null(f);
    tgc_tensor *full = run_compiled(f, m, in), *alone = run_compiled(f, m, cut);
    tgc_tensor *row = tgc_slice(tgc_slice(full, 0, 1, 2, 1), 1, 0, 11, 1);
    assert_close(row, alone, 1e-4);
    assert_close(alone, run_eager(m, cut), 1e-4);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* tgc_scaled_dot_product_attention with the additive mask gives the explicit formulation. */
static void bert_sdpa_matches_explicit_attention(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config(), cs = small_config();
    cs.use_sdpa = 1;
    tgc_module *m = bert_create(&c), *ms = bert_create(&cs);
    assert_non_null(m);
    assert_non_null(ms);
    tgc_tensor *in[4];
    assert_int_equal(bert_make_inputs(&c, 2, 16, 5, 7, in), TGC_OK);
    tgc_fn *f = tgc_compile(bert_forward, "bert_sdpa", NULL);
    assert_non_null(f);
    assert_close(run_compiled(f, ms, in), run_eager(m, in), 1e-4);
    tgc_fn_free(f);
    bert_free(ms);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

static const int64_t sweep_lengths[] = {8, 12, 16, 21, 27, 32};
#define N_LENGTHS ((int)(sizeof sweep_lengths / sizeof sweep_lengths[0]))

/* dynamic = AUTO over six sequence lengths: static first, then one symbolic variant. */
static void bert_dynamic_auto_sweep_compiles_at_most_twice(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_AUTO;
    tgc_fn *f = tgc_compile(bert_forward, "bert_auto", &cfg);
    assert_non_null(f);
    for (int i = 0; i < N_LENGTHS; i++) {
        tgc_scope_push();
        tgc_tensor *in[4];
        assert_int_equal(bert_make_inputs(&c, 2, sweep_lengths[i], 3, 10 + (uint64_t)i, in),
                         TGC_OK);
        assert_close(run_compiled(f, m, in), run_eager(m, in), 1e-4);
        tgc_scope_pop();
    }
    tgc_stats s = stats_of(f);
    assert_true(s.compiles <= 2);
    assert_int_equal(s.cache_hits, N_LENGTHS - s.compiles);
    assert_int_equal(s.eager_fallbacks, 0);
    assert_int_equal(s.cache_limit_hit, 0);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* Without position_ids the function makes them with tgc_arange_sym: the same values as the
 * input ones, and the AUTO sweep still compiles at most twice (S is never specialized). */
static void bert_positions_made_inside_stay_dynamic(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_AUTO;
    tgc_fn *f = tgc_compile(bert_forward, "bert_no_pos", &cfg);
    assert_non_null(f);
    for (int i = 0; i < N_LENGTHS; i++) {
        tgc_scope_push();
        tgc_tensor *in[4], *y = NULL, *e = NULL;
        assert_int_equal(bert_make_inputs(&c, 2, sweep_lengths[i], 3, 30 + (uint64_t)i, in),
                         TGC_OK);
        assert_int_equal(tgc_call(f, m, in, 3, &y, 1), TGC_OK);
        assert_int_equal(bert_forward(m, in, 3, &e, 1), TGC_OK);
        assert_close(e, run_eager(m, in), 1e-6); /* eager: same as the given positions */
        assert_close(y, e, 1e-4);
        tgc_scope_pop();
    }
    tgc_stats s = stats_of(f);
    assert_true(s.compiles <= 2);
    assert_int_equal(s.eager_fallbacks, 0);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

/* dynamic = NEVER, cache_size_limit 3, ERROR mode: the fourth length is TGC_ERR_CACHE_LIMIT;
 * lengths that were compiled keep running. */
static void bert_dynamic_never_reaches_cache_limit_error(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_NEVER;
    cfg.cache_size_limit = 3;
    cfg.on_cache_limit = TGC_ON_LIMIT_ERROR;
    tgc_fn *f = tgc_compile(bert_forward, "bert_never", &cfg);
    assert_non_null(f);
    tgc_tensor *in[4], *y = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(bert_make_inputs(&c, 1, sweep_lengths[i], 0, 20, in), TGC_OK);
        run_compiled(f, m, in);
    }
    assert_int_equal(bert_make_inputs(&c, 1, sweep_lengths[3], 0, 20, in), TGC_OK);
    assert_int_equal(tgc_call(f, m, in, 4, &y, 1), TGC_ERR_CACHE_LIMIT);
    assert_int_equal(tgc_last_status(), TGC_ERR_CACHE_LIMIT);
    assert_true(strlen(tgc_last_error()) > 0);
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 3);
    assert_int_equal(s.variants, 3);
    assert_int_equal(s.cache_limit_hit, 1);
    /* a length that has a variant still hits it */
    assert_int_equal(bert_make_inputs(&c, 1, sweep_lengths[1], 0, 21, in), TGC_OK);
    assert_close(run_compiled(f, m, in), run_eager(m, in), 1e-4);
    s = stats_of(f);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.compiles, 3);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

typedef struct log_capture {
    int warnings;
    int limit_warnings;
} log_capture;

static void capture_log(unsigned channel, const char *msg, void *user)
{
    log_capture *cap = user;
    if (channel == 0) {
        cap->warnings++;
        if (strstr(msg, "cache_size_limit"))
            cap->limit_warnings++;
    }
}

/* dynamic = NEVER, cache_size_limit 3, FALLBACK_EAGER: one warning, then eager values. */
static void bert_dynamic_never_falls_back_to_eager_with_one_warning(void **state)
{
    (void)state;
    tgc_scope_push();
    tgc_no_grad_push();
    bert_config c = small_config();
    tgc_module *m = bert_create(&c);
    assert_non_null(m);
    log_capture cap = {0, 0};
    tgc_config cfg = tgc_config_default();
    cfg.dynamic = TGC_DYNAMIC_NEVER;
    cfg.cache_size_limit = 3;
    cfg.on_cache_limit = TGC_ON_LIMIT_FALLBACK_EAGER;
    cfg.log_fn = capture_log;
    cfg.log_user = &cap;
    tgc_fn *f = tgc_compile(bert_forward, "bert_never", &cfg);
    assert_non_null(f);
    for (int i = 0; i < N_LENGTHS; i++) {
        tgc_scope_push();
        tgc_tensor *in[4];
        assert_int_equal(bert_make_inputs(&c, 2, sweep_lengths[i], 2, 30 + (uint64_t)i, in),
                         TGC_OK);
        assert_close(run_compiled(f, m, in), run_eager(m, in), 1e-4);
        tgc_scope_pop();
    }
    tgc_stats s = stats_of(f);
    assert_int_equal(s.compiles, 3);
    assert_int_equal(s.eager_fallbacks, N_LENGTHS - 3);
    assert_int_equal(s.cache_limit_hit, 1);
    assert_int_equal(cap.limit_warnings, 1);
    assert_int_equal(cap.warnings, 1);
    tgc_fn_free(f);
    bert_free(m);
    tgc_no_grad_pop();
    tgc_scope_pop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bert_compiled_equals_eager_with_padding),
        cmocka_unit_test(bert_padding_mask_hides_padded_tokens),
        cmocka_unit_test(bert_sdpa_matches_explicit_attention),
        cmocka_unit_test(bert_dynamic_auto_sweep_compiles_at_most_twice),
        cmocka_unit_test(bert_positions_made_inside_stay_dynamic),
        cmocka_unit_test(bert_dynamic_never_reaches_cache_limit_error),
        cmocka_unit_test(bert_dynamic_never_falls_back_to_eager_with_one_warning),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tgc_shutdown();
    return rc;
}
