/* What the host program controls and can observe: the process-wide log callback (every
 * message, with cfg.log_fn taking precedence for its function), the run-time version, the
 * scope depth and the live tensor count (and the warning of a root scope that grows), a
 * tgc_fn's fixed signature (n_in, n_out), the directories cfg.dump_dir and cfg.cache_dir
 * (created, or named with the reason), the backend tgc_fn_explain names, and the graph the
 * `graph` channel prints with its fusion groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_program.h"
#endif
#include "jit/jit.h"
#include "tgc/tgc.h"

/* ---- a log callback that keeps what it gets ---- */

#define MAX_MSGS 512

typedef struct captured {
    pthread_mutex_t lock;
    int n;
    unsigned channel[MAX_MSGS];
    char *text[MAX_MSGS];
} captured;

static captured process_log = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {0}};
static captured config_log = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {0}};

static void keep(unsigned channel, const char *message, void *user)
{
    captured *c = user;
    pthread_mutex_lock(&c->lock);
    if (c->n < MAX_MSGS) {
        c->channel[c->n] = channel;
        c->text[c->n] = strdup(message);
        c->n++;
    }
    pthread_mutex_unlock(&c->lock);
}

static void forget(captured *c)
{
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n; i++)
        free(c->text[i]);
    c->n = 0;
    pthread_mutex_unlock(&c->lock);
}

/* Messages of c on `channel` that contain text. */
static int count(captured *c, unsigned channel, const char *text)
{
    int k = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n; i++)
        k += c->channel[i] == channel && strstr(c->text[i], text) != NULL;
    pthread_mutex_unlock(&c->lock);
    return k;
}

#ifdef TGC_HAVE_LLVM /* used only by the cases that need the LLVM backend */
/* The first message on channel that contains text (owned by c), or NULL. */
static const char *find(captured *c, unsigned channel, const char *text)
{
    const char *m = NULL;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n && !m; i++)
        if (c->channel[i] == channel && strstr(c->text[i], text))
            m = c->text[i];
    pthread_mutex_unlock(&c->lock);
    return m;
}
#endif

static int setup(void **state)
{
    forget(&process_log);
    forget(&config_log);
    tgc_set_log_fn(keep, &process_log);
    return scoped_setup(state);
}

static int teardown(void **state)
{
    tgc_set_log_fn(NULL, NULL);
    return scoped_teardown(state);
}

/* ---- model functions ---- */

static tgc_status add_one(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                          int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static tgc_status add_two_inputs(tgc_module *self, tgc_tensor *const *in, int n_in,
                                 tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    out[0] = tgc_add(in[0], in[1]);
    return out[0] ? TGC_OK : tgc_last_status();
}

static int depth_inside;

static tgc_status records_depth(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    depth_inside = tgc_scope_depth();
    out[0] = tgc_neg(in[0]);
    return out[0] ? TGC_OK : tgc_last_status();
}

#ifdef TGC_HAVE_LLVM
/* A reshape of a permuted view: the backend's preparation inserts a copy before it, so the
 * compiled graph has more nodes than the graph after the passes. */
static tgc_status reshape_of_permute(tgc_module *self, tgc_tensor *const *in, int n_in,
                                     tgc_tensor **out, int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    int64_t flat[1] = {16};
    tgc_tensor *t = tgc_transpose(in[0], 0, 1);
    out[0] = tgc_add(tgc_reshape(t, flat, 1), tgc_reshape(tgc_exp(t), flat, 1));
    return out[0] ? TGC_OK : tgc_last_status();
}
#endif

static tgc_tensor *filled(int64_t rows, int64_t cols, double v)
{
    int64_t shape[2] = {rows, cols};
    return tgc_full(shape, 2, v, TGC_F32, tgc_cpu());
}

static tgc_config quiet_config(void)
{
    tgc_config c = tgc_config_default();
    c.log = 0;
    return c;
}

/* ---- version ---- */

static void version_at_run_time_matches_the_header_macros(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TGC_VERSION_MAJOR, TGC_VERSION_MINOR,
             TGC_VERSION_PATCH);
    assert_string_equal(tgc_version(), want);
    assert_int_equal(tgc_version_number(),
                     TGC_VERSION_MAJOR * 10000 + TGC_VERSION_MINOR * 100 + TGC_VERSION_PATCH);
    assert_int_equal(tgc_version_number(), TGC_VERSION_NUMBER);
}

/* ---- the log callback ---- */

static void environment_warnings_reach_the_process_log_fn(void **state)
{
    (void)state;
    setenv("TGC_DYNAMIC", "now-and-then", 1);
    tgc_config c = tgc_config_default();
    unsetenv("TGC_DYNAMIC");
    assert_int_equal(c.dynamic, TGC_DYNAMIC_AUTO);
    assert_int_equal(count(&process_log, 0,
                           "tgc: ignoring TGC_DYNAMIC='now-and-then': expected one of auto, "
                           "always, never; using auto"),
                     1);
}

static void function_messages_go_to_cfg_log_fn_first_else_the_process_one(void **state)
{
    (void)state;
    tgc_tensor *x = filled(2, 3, 1.0), *y;
    tgc_config c = quiet_config();
    c.log = TGC_LOG_PERF;
    tgc_fn *plain = tgc_compile(add_one, "plain", &c);
    c.log_fn = keep;
    c.log_user = &config_log;
    tgc_fn *own = tgc_compile(add_one, "own", &c);
    assert_int_equal(tgc_call(plain, NULL, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(tgc_call(own, NULL, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(count(&process_log, TGC_LOG_PERF, "tgc: compiled 'plain' variant 1"), 1);
    assert_int_equal(count(&process_log, TGC_LOG_PERF, "'own'"), 0);
    assert_int_equal(count(&config_log, TGC_LOG_PERF, "tgc: compiled 'own' variant 1"), 1);
    assert_int_equal(count(&config_log, TGC_LOG_PERF, "'plain'"), 0);
    tgc_fn_free(plain);
    tgc_fn_free(own);
}

static void cache_limit_warning_reaches_the_process_log_fn(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    c.cache_size_limit = 1;
    c.dynamic = TGC_DYNAMIC_NEVER;
    tgc_fn *f = tgc_compile(add_one, "limited", &c);
    tgc_tensor *y, *a = filled(2, 2, 1.0), *b = filled(3, 2, 1.0);
    assert_int_equal(tgc_call(f, NULL, &a, 1, &y, 1), TGC_OK);
    assert_int_equal(tgc_call(f, NULL, &b, 1, &y, 1), TGC_OK);
    assert_int_equal(count(&process_log, 0, "tgc: 'limited' hit cache_size_limit (1)"), 1);
    tgc_fn_free(f);
}

static void profile_lines_reach_the_log_fn_on_their_channel(void **state)
{
    (void)state;
#ifdef TGC_HAVE_LLVM
    tgc_config c = quiet_config();
    c.backend = TGC_BACKEND_LLVM;
    tgc_fn *f = tgc_compile(add_one, "profiled", &c);
    tgc_tensor *y, *x = filled(4, 4, 2.0);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    assert_true(count(&process_log, TGC_LOG_PROFILE, "tgc profile: step 0 ") >= 1);
    /* the function's own callback takes them when it has one */
    c.log_fn = keep;
    c.log_user = &config_log;
    tgc_fn *g = tgc_compile(add_one, "profiled_own", &c);
    forget(&process_log);
    assert_int_equal(tgc_call(g, NULL, &x, 1, &y, 1), TGC_OK);
    assert_true(count(&config_log, TGC_LOG_PROFILE, "tgc profile: step 0 ") >= 1);
    assert_int_equal(count(&process_log, TGC_LOG_PROFILE, "tgc profile"), 0);
    tgc_fn_free(f);
    tgc_fn_free(g);
#else
    skip();
#endif
}

static void without_a_callback_messages_still_go_somewhere(void **state)
{
    (void)state;
    tgc_set_log_fn(NULL, &process_log); /* stderr again; the user pointer is dropped */
    setenv("TGC_DYNAMIC", "to-stderr", 1);
    (void)tgc_config_default();
    unsetenv("TGC_DYNAMIC");
    tgc_set_log_fn(keep, &process_log);
    assert_int_equal(count(&process_log, 0, "to-stderr"), 0);
}

/* ---- scopes and live tensors ---- */

static void scope_depth_counts_open_scopes_and_the_call_frame(void **state)
{
    (void)state;
    int base = tgc_scope_depth(); /* the test's own scope */
    assert_int_equal(base, 1);
    tgc_scope_push();
    tgc_scope_push();
    assert_int_equal(tgc_scope_depth(), base + 2);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(tgc_scope_depth(), base + 1);
    tgc_config c = quiet_config();
    c.backend = TGC_BACKEND_EAGER;
    tgc_fn *f = tgc_compile(records_depth, "depth", &c);
    tgc_tensor *y, *x = filled(1, 1, 1.0);
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(depth_inside, base + 2); /* the frame tgc_call opened */
    assert_int_equal(tgc_scope_pop(), TGC_OK);
    assert_int_equal(tgc_scope_depth(), base);
    tgc_fn_free(f);
}

static void live_tensor_count_shows_a_loop_that_forgets_its_scope(void **state)
{
    (void)state;
    tgc_tensor *x = filled(2, 2, 1.0);
    int64_t before = tgc_live_tensor_count();
    for (int i = 0; i < 10; i++) { /* each iteration in its own scope: nothing stays */
        tgc_scope_push();
        assert_non_null(tgc_mul(tgc_add(x, x), x));
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    assert_int_equal(tgc_live_tensor_count(), before);
    for (int i = 0; i < 10; i++) /* no scope: two tensors per iteration stay */
        assert_non_null(tgc_mul(tgc_add(x, x), x));
    assert_int_equal(tgc_live_tensor_count(), before + 20);
    tgc_tensor *one = filled(1, 1, 0.0);
    assert_int_equal(tgc_live_tensor_count(), before + 21);
    tgc_tensor_free(one);
    assert_int_equal(tgc_live_tensor_count(), before + 20);
}

static int64_t root_warnings_seen[3];

/* A thread of its own: a fresh root scope, freed when the thread exits. */
static void *fill_root_scope(void *arg)
{
    (void)arg;
    int64_t shape[1] = {1};
    for (int i = 0; i < 99999; i++)
        if (!tgc_empty(shape, 1, TGC_F32, tgc_cpu()))
            return NULL;
    root_warnings_seen[0] = count(&process_log, 0, "tgc: the root scope of this thread holds");
    tgc_empty(shape, 1, TGC_F32, tgc_cpu());
    root_warnings_seen[1] =
        count(&process_log, 0, "tgc: the root scope of this thread holds 100000 tensors");
    for (int i = 0; i < 1000; i++)
        tgc_empty(shape, 1, TGC_F32, tgc_cpu());
    root_warnings_seen[2] = count(&process_log, 0, "tgc: the root scope of this thread holds");
    return NULL;
}

static void root_scope_past_100000_tensors_warns_once_through_the_log(void **state)
{
    (void)state;
    int64_t before = tgc_live_tensor_count();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fill_root_scope, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(root_warnings_seen[0], 0);
    assert_int_equal(root_warnings_seen[1], 1);
    assert_int_equal(root_warnings_seen[2], 1);
    assert_int_equal(tgc_live_tensor_count(), before); /* thread exit freed its root scope */
}

/* ---- a tgc_fn's signature ---- */

static void call_with_another_number_of_inputs_is_invalid_arg(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    tgc_fn *f = tgc_compile(add_one, "sig", &c);
    tgc_tensor *x = filled(2, 2, 1.0), *two[2] = {x, x}, *y[2];
    assert_int_equal(tgc_call(f, NULL, &x, 1, y, 1), TGC_OK);
    assert_int_equal(tgc_call(f, NULL, two, 2, y, 1), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'sig' was traced with 1 input, called with 2 (n_in); a tgc_fn "
                        "takes the same number of inputs and outputs on every call: compile one "
                        "tgc_fn per signature");
    assert_null(y[0]);
    assert_int_equal(tgc_call(f, NULL, &x, 1, y, 2), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'sig' was traced with 1 output, called with 2 (n_out); a tgc_fn "
                        "takes the same number of inputs and outputs on every call: compile one "
                        "tgc_fn per signature");
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(tgc_call(f, NULL, &x, 1, y, 1), TGC_OK); /* the signature still works */
    tgc_fn_free(f);

    c.backend = TGC_BACKEND_EAGER; /* no trace: the first call fixes it */
    f = tgc_compile(add_one, "eager_sig", &c);
    assert_int_equal(tgc_call(f, NULL, two, 2, y, 1), TGC_OK);
    assert_int_equal(tgc_call(f, NULL, &x, 1, y, 1), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'eager_sig' was first called with 2 inputs, called with 1 "
                        "(n_in); a tgc_fn takes the same number of inputs and outputs on every "
                        "call: compile one tgc_fn per signature");
    tgc_fn_free(f);
}

static void failed_first_call_does_not_fix_the_signature(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    tgc_fn *f = tgc_compile(add_two_inputs, "late", &c);
    tgc_tensor *x = filled(2, 2, 1.0), *two[2] = {x, x}, *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_INVALID_ARG);
    assert_int_equal(tgc_call(f, NULL, two, 2, &y, 1), TGC_OK);
    tgc_fn_free(f);
}

static void too_few_inputs_names_n_in(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    tgc_fn *f = tgc_compile(add_two_inputs, "needs_two", &c);
    tgc_tensor *x = filled(2, 2, 1.0), *y = x;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_ERR_INVALID_ARG);
    assert_null(y);
    assert_string_equal(tgc_last_error(),
                        "tgc_call: 'needs_two' failed while tracing: tgc_add: input 1 is NULL; it "
                        "was called with n_in = 1, and in[k] for k >= 1 is NULL (pass every "
                        "input the function reads)");
    tgc_fn_free(f);
}

static void inputs_the_trace_does_not_use_are_named_once(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    c.dynamic = TGC_DYNAMIC_NEVER;
    tgc_fn *f = tgc_compile(add_one, "extra", &c);
    tgc_tensor *x = filled(2, 2, 1.0), *three[3] = {x, x, x}, *y;
    assert_int_equal(tgc_call(f, NULL, three, 3, &y, 1), TGC_OK);
    assert_int_equal(count(&process_log, 0,
                           "tgc: 'extra' was called with 3 inputs but its trace does not use "
                           "in[1], in[2] (read only through sizes, or not at all); check n_in"),
                     1);
    tgc_tensor *other[3] = {filled(3, 2, 1.0), x, x}; /* a recompile does not repeat it */
    assert_int_equal(tgc_call(f, NULL, other, 3, &y, 1), TGC_OK);
    assert_int_equal(count(&process_log, 0, "its trace does not use"), 1);
    tgc_fn_free(f);
    f = tgc_compile(add_two_inputs, "all_used", &c);
    assert_int_equal(tgc_call(f, NULL, three, 2, &y, 1), TGC_OK);
    assert_int_equal(count(&process_log, 0, "its trace does not use"), 1);
    tgc_fn_free(f);
}

/* ---- directories ---- */

static char tmp_root[256];

static int dir_mode(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    return (int)(st.st_mode & 0777);
}

static void missing_dump_dir_is_created_with_its_parents(void **state)
{
    (void)state;
    char dir[512], file[600];
    snprintf(dir, sizeof dir, "%s/dumps/a/b", tmp_root);
    tgc_config c = quiet_config();
    c.dump_dir = dir;
    tgc_fn *f = tgc_compile(add_one, "dumped", &c);
    assert_non_null(f);
    assert_int_equal(dir_mode(dir), 0700);
    tgc_tensor *x = filled(2, 2, 1.0), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    snprintf(file, sizeof file, "%s/dumped_v1.graph.txt", dir);
    assert_int_equal(access(file, R_OK), 0);
    assert_int_equal(count(&process_log, 0, "dump"), 0);
    tgc_fn_free(f);
}

static void dump_dir_that_cannot_be_created_is_named_once_with_the_reason(void **state)
{
    (void)state;
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/plain_file", tmp_root);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(dir, sizeof dir, "%s/sub", file);
    tgc_config c = quiet_config();
    c.dump_dir = dir;
    tgc_fn *f = tgc_compile(add_one, "undumped", &c), *g = tgc_compile(add_one, "again", &c);
    assert_non_null(f);
    char want[1400];
    snprintf(want, sizeof want,
             "tgc: cfg.dump_dir (TGC_DUMP_DIR) '%s' is not a directory and cannot be created "
             "(%s: Not a directory); no IR dumps are written",
             dir, file);
    assert_int_equal(count(&process_log, 0, want), 1);
    assert_int_equal(count(&process_log, 0, "cannot be created"), 1);
    tgc_fn_free(f);
    tgc_fn_free(g);
}

static void missing_cache_dir_is_created_private(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache/x/", tmp_root);
    tgc_config c = quiet_config();
    c.cache_dir = dir;
    tgc_fn *f = tgc_compile(add_one, "cached", &c);
    assert_non_null(f);
    assert_int_equal(dir_mode(dir), 0700);
    tgc_fn_free(f);
}

static void cuda_program_cache_creates_its_missing_directory(void **state)
{
    (void)state;
#ifdef TGC_HAVE_CUDA
    /* the store a compiled CUDA program takes (no GPU needed: the bytes are opaque here) */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cubins/sm90", tmp_root);
    const char text[] = "extern \"C\" __global__ void k() {}", cubin[] = "not really a cubin";
    tgc_cuda_program_disk_store(dir, 90, text, cubin, sizeof cubin);
    assert_int_equal(dir_mode(dir), 0700);
    char *back = NULL;
    size_t n = 0;
    assert_int_equal(tgc_cuda_program_disk_load(dir, 90, text, &back, &n), 1);
    assert_int_equal(n, sizeof cubin);
    assert_memory_equal(back, cubin, n);
    free(back);
    /* a directory that cannot be made: named once, nothing stored */
    char file[512], bad[600];
    snprintf(file, sizeof file, "%s/not_a_dir", tmp_root);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(bad, sizeof bad, "%s/x", file);
    tgc_cuda_program_disk_store(bad, 90, text, cubin, sizeof cubin);
    tgc_cuda_program_disk_store(bad, 90, text, cubin, sizeof cubin);
    assert_int_equal(count(&process_log, 0, "is not a directory and cannot be created ("), 1);
    assert_int_equal(count(&process_log, 0, "compiled CUDA programs are not cached on disk"), 1);
#else
    skip();
#endif
}

/* ---- what the reports name ---- */

static void explain_names_the_backend_its_variants_run_on(void **state)
{
    (void)state;
    tgc_config c = quiet_config();
    tgc_fn *f = tgc_compile(add_one, "which", &c);
    char *r = tgc_fn_explain(f); /* no variant yet: the backend the config resolves to */
    char want[128];
    snprintf(want, sizeof want, "tgc_fn 'which' (backend %s): ", f->backend->name);
    assert_non_null(strstr(r, want));
    tgc_free(r);
    /* The variant's backend is the one for its inputs' device, which need not be the one the
     * config resolves to (AUTO on GPU inputs: cuda, while the config alone says llvm or
     * interp). Stand in for that on the host: the config resolves to interp, the variant
     * was compiled for its inputs' device. */
    tgc_tensor *x = filled(2, 2, 1.0), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    const char *ran = f->variants->backend->name;
    const tgc_backend *configured = f->backend;
#ifdef TGC_HAVE_LLVM
    assert_string_equal(ran, "llvm");
    f->backend = tgc_backend_interp();
#endif
    r = tgc_fn_explain(f);
    snprintf(want, sizeof want, "tgc_fn 'which' (backend %s): ", ran);
    if (strncmp(r, want, strlen(want)) != 0)
        fail_msg("explain starts \"%.80s\", not \"%s\"", r, want);
    tgc_free(r);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_string_equal(s.backend, ran);
    f->backend = configured;
    tgc_fn_free(f);
}

static void graph_channel_prints_the_graph_its_fusion_groups_number(void **state)
{
    (void)state;
#ifdef TGC_HAVE_LLVM
    tgc_config c = quiet_config();
    c.backend = TGC_BACKEND_LLVM;
    c.log = TGC_LOG_GRAPH;
    tgc_fn *f = tgc_compile(reshape_of_permute, "numbered", &c);
    tgc_tensor *x = filled(4, 4, 0.5), *y;
    assert_int_equal(tgc_call(f, NULL, &x, 1, &y, 1), TGC_OK);
    const char *m = find(&process_log, TGC_LOG_GRAPH,
                         "tgc: graph of 'numbered_v1' as compiled for llvm (7 nodes) and its "
                         "fusion groups:\n");
    assert_non_null(m);
    assert_non_null(strstr(m, "%4 = contiguous(%1)")); /* the copy the preparation added */
    const char *groups = strstr(m, "\ngroup 0 ");
    assert_non_null(groups);
    int members = 0;
    for (const char *p = strchr(groups, '%'); p; p = strchr(p + 1, '%')) {
        int id;
        char op[32], line[64];
        if (sscanf(p, "%%%d %31[a-z_0-9]", &id, op) != 2)
            continue;
        snprintf(line, sizeof line, "%%%d = %s(", id, op);
        const char *at = strstr(m, line);
        if (!at || at > groups)
            fail_msg("group member %%%d %s is not node %%%d of the graph printed above it:\n%s", id,
                     op, id, m);
        members++;
    }
    assert_int_equal(members, 3); /* exp, contiguous; add */
    tgc_fn_free(f);
#else
    skip();
#endif
}

int main(void)
{
    setenv("TGC_PROFILE", "1", 1); /* read once per process, before the first call */
    snprintf(tmp_root, sizeof tmp_root, "/tmp/tgc_host_hooks.%ld", (long)getpid());
    if (mkdir(tmp_root, 0700) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(version_at_run_time_matches_the_header_macros, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(environment_warnings_reach_the_process_log_fn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            function_messages_go_to_cfg_log_fn_first_else_the_process_one, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_limit_warning_reaches_the_process_log_fn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(profile_lines_reach_the_log_fn_on_their_channel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(without_a_callback_messages_still_go_somewhere, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(scope_depth_counts_open_scopes_and_the_call_frame, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(live_tensor_count_shows_a_loop_that_forgets_its_scope,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(root_scope_past_100000_tensors_warns_once_through_the_log,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(call_with_another_number_of_inputs_is_invalid_arg, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(failed_first_call_does_not_fix_the_signature, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(too_few_inputs_names_n_in, setup, teardown),
        cmocka_unit_test_setup_teardown(inputs_the_trace_does_not_use_are_named_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(missing_dump_dir_is_created_with_its_parents, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            dump_dir_that_cannot_be_created_is_named_once_with_the_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_cache_dir_is_created_private, setup, teardown),
        cmocka_unit_test_setup_teardown(cuda_program_cache_creates_its_missing_directory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(explain_names_the_backend_its_variants_run_on, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(graph_channel_prints_the_graph_its_fusion_groups_number,
                                        setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, group_shutdown);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
