/* The LLVM backend's object cache (src/backend/llvm/llvm_jit.{h,c} over backend/code_cache.c):
 *  - equal units share one object: compiled once, added to the JIT once, the same function
 *    addresses; it leaves the JIT with its last unit, and the next equal unit compiles again;
 *  - equal units finished by several threads at once compile once;
 *  - a unit's symbols are the same in every process (they carry the hash of its key);
 *  - with cfg.cache_dir, a fresh process (this binary run with --child) loads the objects an
 *    earlier one wrote instead of optimizing and generating code (counted), and computes the
 *    same bits, which agree with interp; a truncated object file is refused, compiled and
 *    written again.
 * Skipped when built without LLVM. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tgc/tgc.h"
#include "unit_test_util.h"

#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_jit.h"
#include "support/error.h"

static char g_exe[4096];

/* i64 f(i64 a, i64 b) { return a * b + c; } */
static void build_muladd(tgc_llvm_unit *u, long long c)
{
    LLVMTypeRef params[2] = {u->t_i64, u->t_i64};
    char name[64];
    tgc_llvm_unit_name(u, "muladd", name, sizeof name);
    LLVMValueRef fn = tgc_llvm_add_function(u, name, LLVMFunctionType(u->t_i64, params, 2, 0));
    LLVMPositionBuilderAtEnd(u->b, LLVMAppendBasicBlockInContext(u->ctx, fn, "entry"));
    LLVMValueRef m = LLVMBuildMul(u->b, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), "m");
    LLVMBuildRet(u->b,
                 LLVMBuildAdd(u->b, m, LLVMConstInt(u->t_i64, (unsigned long long)c, 1), "r"));
}

typedef int64_t (*muladd_fn)(int64_t, int64_t);

static tgc_llvm_code *finish_muladd(const char *unit, long long c)
{
    tgc_llvm_unit u;
    assert_int_equal(tgc_llvm_unit_begin(&u, unit), TGC_OK);
    build_muladd(&u, c);
    tgc_llvm_code *code = NULL;
    assert_int_equal(tgc_llvm_unit_finish(&u, &code, NULL, NULL), TGC_OK);
    return code;
}

static void equal_units_share_one_object(void **state)
{
    (void)state;
    tgc_code_cache_stats s0, s1;
    tgc_llvm_object_cache_stats(&s0);
    tgc_llvm_code *a = finish_muladd("shared", 11), *b = finish_muladd("shared", 11);
    tgc_llvm_code *other = finish_muladd("shared", 12); /* another constant: another key */
    tgc_llvm_object_cache_stats(&s1);
    assert_int_equal(s1.compiled - s0.compiled, 2);
    muladd_fn fa = (muladd_fn)tgc_llvm_code_lookup(a, "muladd");
    muladd_fn fb = (muladd_fn)tgc_llvm_code_lookup(b, "muladd");
    muladd_fn fo = (muladd_fn)tgc_llvm_code_lookup(other, "muladd");
    assert_non_null(fa);
    assert_ptr_equal(fa, fb);
    assert_ptr_not_equal(fa, fo);
    assert_int_equal(fa(6, 7), 53);
    assert_int_equal(fo(6, 7), 54);
    tgc_llvm_code_free(a);
    assert_int_equal(fb(2, 3), 17); /* b keeps the object in the JIT */
    tgc_llvm_code_free(b);
    tgc_llvm_code_free(other);
    /* gone with its last unit: the next equal unit compiles it again */
    tgc_llvm_code *c = finish_muladd("shared", 11);
    tgc_code_cache_stats s2;
    tgc_llvm_object_cache_stats(&s2);
    assert_int_equal(s2.compiled - s1.compiled, 1);
    muladd_fn fc = (muladd_fn)tgc_llvm_code_lookup(c, "muladd");
    assert_int_equal(fc(1, 1), 12);
    tgc_llvm_code_free(c);
}

typedef struct unit_ask {
    pthread_barrier_t *bar;
    tgc_llvm_code *code;
    muladd_fn fn;
    tgc_status st;
} unit_ask;

static void *finish_one(void *arg)
{
    unit_ask *a = arg;
    tgc_llvm_unit u;
    a->st = tgc_llvm_unit_begin(&u, "concurrent");
    if (a->st != TGC_OK)
        return NULL;
    build_muladd(&u, 1234567);
    pthread_barrier_wait(a->bar);
    a->st = tgc_llvm_unit_finish(&u, &a->code, NULL, NULL);
    if (a->st == TGC_OK)
        a->fn = (muladd_fn)tgc_llvm_code_lookup(a->code, "muladd");
    return NULL;
}

static void concurrent_equal_units_compile_once(void **state)
{
    (void)state;
    enum { N = 6 };
    tgc_code_cache_stats s0, s1;
    tgc_llvm_object_cache_stats(&s0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, N);
    unit_ask as[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        as[i] = (unit_ask){&bar, NULL, NULL, TGC_OK};
        assert_int_equal(pthread_create(&th[i], NULL, finish_one, &as[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    tgc_llvm_object_cache_stats(&s1);
    assert_int_equal(s1.compiled - s0.compiled, 1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(as[i].st, TGC_OK);
        assert_ptr_equal(as[i].fn, as[0].fn);
    }
    assert_int_equal(as[0].fn(2, 2), 1234571);
    for (int i = 0; i < N; i++)
        tgc_llvm_code_free(as[i].code);
}

/* ---- a compiled function, in fresh processes ---- */

#define ROWS 6
#define COLS 40

/* a LOOP kernel (pointwise + softmax) and a GEMM template with an epilogue */
static tgc_status model(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                        int n_out)
{
    (void)self, (void)n_in, (void)n_out;
    tgc_tensor *h = tgc_tanh(tgc_add_scalar(tgc_mul_scalar(in[0], 1.375), 0.0625));
    tgc_tensor *p = tgc_softmax(h, 1);
    tgc_tensor *mm = tgc_relu(tgc_add_scalar(tgc_matmul(in[0], tgc_transpose(in[0], 0, 1)), 0.5));
    out[0] = p;
    out[1] = mm;
    return p && mm ? TGC_OK : tgc_last_status();
}

static tgc_tensor *model_input(void)
{
    float x[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = (float)sin(0.37 * i) * 2.0f - 0.25f;
    int64_t shape[2] = {ROWS, COLS};
    return tgc_from_data(x, sizeof x, shape, 2, TGC_F32, tgc_cpu());
}

/* runs model on backend b (cache_dir dir, NULL: none) into p[ROWS * COLS] and m[ROWS * ROWS] */
static int run_model(tgc_backend_kind b, const char *dir, float *p, float *m)
{
    tgc_scope_push();
    tgc_config cfg = tgc_config_default();
    cfg.backend = b;
    cfg.cache_dir = dir;
    cfg.num_threads = 1;
    tgc_fn *f = tgc_compile(model, "cached_model", &cfg);
    tgc_tensor *x = model_input();
    tgc_tensor *out[2] = {NULL, NULL};
    int ok = f && x && tgc_call(f, NULL, &x, 1, out, 2) == TGC_OK &&
             tgc_copy_to_host(out[0], p, sizeof(float) * ROWS * COLS) == TGC_OK &&
             tgc_copy_to_host(out[1], m, sizeof(float) * ROWS * ROWS) == TGC_OK;
    tgc_fn_free(f);
    tgc_scope_pop();
    return ok;
}

/* the child's side: runs the model on LLVM with dir, prints the cache's counters, then every
 * result as the hex of its bits */
static int child_model(const char *dir)
{
    float p[ROWS * COLS], m[ROWS * ROWS];
    if (!run_model(TGC_BACKEND_LLVM, dir, p, m)) {
        fprintf(stderr, "child: %s\n", tgc_last_error());
        return 1;
    }
    tgc_code_cache_stats s;
    tgc_llvm_object_cache_stats(&s);
    printf("%llu %llu %llu %llu\n", (unsigned long long)s.compiled, (unsigned long long)s.disk_hits,
           (unsigned long long)s.disk_rejected, (unsigned long long)s.disk_writes);
    for (int i = 0; i < ROWS * COLS + ROWS * ROWS; i++) {
        float v = i < ROWS * COLS ? p[i] : m[i - ROWS * COLS];
        uint32_t bits;
        memcpy(&bits, &v, 4);
        printf("%08x\n", bits);
    }
    return 0;
}

typedef struct child_out {
    unsigned long long compiled, disk_hits, disk_rejected, disk_writes;
    uint32_t bits[ROWS * COLS + ROWS * ROWS];
} child_out;

static void run_child(const char *dir, child_out *o)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' --child '%s'", g_exe, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int got = fscanf(p, "%llu %llu %llu %llu", &o->compiled, &o->disk_hits, &o->disk_rejected,
                     &o->disk_writes);
    for (int i = 0; got >= 4 && i < ROWS * COLS + ROWS * ROWS; i++)
        got += fscanf(p, "%x", &o->bits[i]);
    int rc = pclose(p);
    if (got != 4 + ROWS * COLS + ROWS * ROWS || rc != 0)
        fail_msg("the child process failed (%d fields, status %d)", got, rc);
}

static int count_objects(const char *dir, char *one, size_t n)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "tgc-llvm-", 9) == 0 && l > 2 &&
            strcmp(e->d_name + l - 2, ".o") == 0) {
            k++;
            if (one)
                snprintf(one, n, "%s/%s", dir, e->d_name);
        }
        if (l > 4 && strcmp(e->d_name + l - 4, ".tmp") == 0)
            return -100; /* a temporary file left behind */
    }
    closedir(d);
    return k;
}

static void a_warm_process_skips_code_generation(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_llvm_objs_XXXXXX";
    assert_non_null(mkdtemp(dir));
    child_out cold, warm, torn;
    run_child(dir, &cold);
    assert_true(cold.compiled >= 1);
    assert_int_equal(cold.disk_hits, 0);
    assert_int_equal(cold.disk_writes, cold.compiled);
    assert_int_equal(count_objects(dir, NULL, 0), (int)cold.compiled);
    run_child(dir, &warm);
    assert_int_equal(warm.compiled, 0); /* no optimization, no code generation */
    assert_int_equal(warm.disk_hits, cold.compiled);
    assert_int_equal(warm.disk_writes, 0);
    assert_memory_equal(warm.bits, cold.bits, sizeof cold.bits);
    /* the bits agree with interp */
    float p[ROWS * COLS], m[ROWS * ROWS];
    assert_true(run_model(TGC_BACKEND_INTERP, NULL, p, m));
    for (int i = 0; i < ROWS * COLS + ROWS * ROWS; i++) {
        float want = i < ROWS * COLS ? p[i] : m[i - ROWS * COLS], got;
        memcpy(&got, &cold.bits[i], 4);
        if (fabsf(got - want) > 1e-5f * (1.0f + fabsf(want)))
            fail_msg("element %d: llvm %.9g, interp %.9g", i, got, want);
    }
    /* a truncated object file: refused, compiled and written again, the same bits */
    char path[8200];
    assert_true(count_objects(dir, path, sizeof path) >= 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - 3), 0);
    run_child(dir, &torn);
    assert_int_equal(torn.disk_rejected, 1);
    assert_int_equal(torn.compiled, 1);
    assert_int_equal(torn.disk_writes, 1);
    assert_int_equal(torn.disk_hits, cold.compiled - 1);
    assert_memory_equal(torn.bits, cold.bits, sizeof cold.bits);
    struct stat st2;
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st2.st_size, st.st_size);
    assert_int_equal(count_objects(dir, NULL, 0), (int)cold.compiled);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_model(argv[2]);
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
    if (n <= 0)
        return 1;
    g_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(equal_units_share_one_object, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(concurrent_equal_units_compile_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(a_warm_process_skips_code_generation, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_shutdown);
}
#else
static void test_llvm_absent(void **state)
{
    (void)state;
    skip();
}
int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llvm_absent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
