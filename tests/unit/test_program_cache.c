/* The compile cache of the compiled backends (src/backend/code_cache.{h,c}) and the CUDA
 * program cache on top of it (src/backend/cuda/cuda_program.{h,c}), without a GPU:
 *  - disk entries: a round trip, a truncated or corrupt file or one of another key refused
 *    (and counted), written again by the next store; writes are atomic (a reader running
 *    beside a writer always finds a whole entry) and leave no temporary file;
 *  - memory: an entry many threads ask for at once is made once, the others wait for it; a
 *    failure reaches every waiter and is forgotten; an evicting cache drops an entry with its
 *    last user;
 *  - CUDA (NVRTC, no driver needed): the key changes with the text, the architecture and the
 *    options; a program asked for by several threads at once compiles once; a batch with a
 *    repeated text compiles it once; NVRTC's errors come back with their log; a fresh process
 *    loads a program from cfg.cache_dir instead of compiling it, and recompiles and rewrites
 *    an entry that was truncated (each step a child process: this test binary run with
 *    --child). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit_test_util.h"

#include "backend/code_cache.h"
#include "support/error.h"
#ifdef TGC_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_program.h"
#endif

static char g_exe[4096];

static void make_dir(char *tmpl)
{
    assert_non_null(mkdtemp(tmpl));
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* files in dir whose name starts with prefix and ends with suffix */
static int count_files(const char *dir, const char *prefix, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && l >= sl &&
             strcmp(e->d_name + l - sl, suffix) == 0;
    }
    closedir(d);
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* ---- disk entries ---- */

static tgc_code_cache g_test_cache =
    TGC_CODE_CACHE_INIT("test", "bin", "test entries are not cached", 0, NULL);

static void disk_round_trip_and_refusals(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_code_cache_XXXXXX";
    make_dir(dir);
    tgc_code_cache *c = &g_test_cache;
    const char key_a[] = "key A\nsome text", key_b[] = "key B";
    const char code[] = "the compiled bytes of A";
    void *got = NULL;
    size_t n = 0;
    tgc_code_cache_stats s0, s1;
    tgc_code_cache_stats_get(c, &s0);
    assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 0); /* no file: a miss */
    tgc_code_disk_store(c, dir, "t", key_a, code, sizeof code);
    assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 1);
    assert_int_equal(n, sizeof code);
    assert_memory_equal(got, code, n);
    free(got);
    assert_int_equal(tgc_code_disk_load(c, NULL, "t", key_a, &got, &n), 0);
    assert_int_equal(tgc_code_disk_load(c, "", "t", key_a, &got, &n), 0);
    tgc_code_cache_stats_get(c, &s1);
    assert_int_equal(s1.disk_writes - s0.disk_writes, 1);
    assert_int_equal(s1.disk_rejected - s0.disk_rejected, 0);

    char pa[4200], pb[4200], cmd[9000];
    tgc_code_disk_path(c, dir, "t", key_a, pa, sizeof pa);
    tgc_code_disk_path(c, dir, "t", key_b, pb, sizeof pb);
    assert_string_not_equal(pa, pb);
    assert_non_null(strstr(pa, "/tgc-test-t-"));
    const long full = file_size(pa);
    assert_true(full > (long)(sizeof code + sizeof key_a));
    /* A's file under B's name: another key, refused */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", pa, pb);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tgc_code_disk_load(c, dir, "t", key_b, &got, &n), 0);
    assert_null(got);
    /* truncated anywhere: refused */
    for (long cut = full - 1; cut > 0; cut = cut > 16 ? cut - 16 : cut - 1) {
        assert_int_equal(truncate(pa, cut), 0);
        assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 0);
        tgc_code_disk_store(c, dir, "t", key_a, code, sizeof code); /* written again */
        assert_int_equal(file_size(pa), full);
    }
    /* a flipped byte of the code, of the key, or trailing bytes: refused */
    static const long at[] = {-1, -5, 30, 45};
    for (int i = 0; i < N_OF(at); i++) {
        FILE *f = fopen(pa, "r+b");
        assert_non_null(f);
        long off = at[i] < 0 ? full + at[i] : at[i];
        fseek(f, off, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, off, SEEK_SET);
        fputc(ch ^ 0x20, f);
        fclose(f);
        assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 0);
        tgc_code_disk_store(c, dir, "t", key_a, code, sizeof code);
        assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 1);
        free(got);
    }
    FILE *f = fopen(pa, "ab");
    assert_non_null(f);
    fputs("more", f);
    fclose(f);
    assert_int_equal(tgc_code_disk_load(c, dir, "t", key_a, &got, &n), 0);
    tgc_code_cache_stats_get(c, &s1);
    assert_true(s1.disk_rejected - s0.disk_rejected >= 5);
    /* nothing but the two entries: the writes left no temporary file */
    assert_int_equal(count_files(dir, "", ".tmp"), 0);
    assert_int_equal(count_files(dir, "tgc-test-t-", ".bin"), 2);
    remove_dir(dir);
}

/* A writer replaces an entry again and again while a reader loads it: every load finds a
 * whole entry (the old code or the new one), never a part of one. */
typedef struct atomic_ctx {
    const char *dir;
    size_t size;
    char *code[2];
    volatile int stop;
    int loads, bad;
} atomic_ctx;

static void *atomic_writer(void *arg)
{
    atomic_ctx *a = arg;
    for (int i = 0; i < 24; i++)
        tgc_code_disk_store(&g_test_cache, a->dir, "big", "big key", a->code[i % 2], a->size);
    a->stop = 1;
    return NULL;
}

static void atomic_write_never_shows_a_partial_entry(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_code_atomic_XXXXXX";
    make_dir(dir);
    atomic_ctx a = {.dir = dir, .size = (size_t)4 << 20};
    for (int k = 0; k < 2; k++) {
        a.code[k] = malloc(a.size);
        assert_non_null(a.code[k]);
        for (size_t i = 0; i < a.size; i++)
            a.code[k][i] = (char)(i * 31 + (size_t)k * 7 + 1);
    }
    tgc_code_disk_store(&g_test_cache, dir, "big", "big key", a.code[1], a.size);
    pthread_t w;
    assert_int_equal(pthread_create(&w, NULL, atomic_writer, &a), 0);
    while (!a.stop) {
        void *got = NULL;
        size_t n = 0;
        if (!tgc_code_disk_load(&g_test_cache, dir, "big", "big key", &got, &n) || n != a.size ||
            (memcmp(got, a.code[0], n) != 0 && memcmp(got, a.code[1], n) != 0))
            a.bad++;
        a.loads++;
        free(got);
    }
    pthread_join(w, NULL);
    if (a.bad)
        fail_msg("%d of %d loads beside the writer found no whole entry", a.bad, a.loads);
    assert_true(a.loads > 0);
    assert_int_equal(count_files(dir, "", ".tmp"), 0);
    assert_int_equal(count_files(dir, "tgc-test-big-", ".bin"), 1);
    free(a.code[0]);
    free(a.code[1]);
    remove_dir(dir);
}

/* A directory that cannot be made: nothing stored, nothing written, no error. */
static void unusable_directory_stores_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgc_code_nodir_XXXXXX";
    make_dir(dir);
    char file[600], bad[700];
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/sub", file);
    tgc_code_cache_stats s0, s1;
    tgc_code_cache_stats_get(&g_test_cache, &s0);
    tgc_code_disk_store(&g_test_cache, bad, "t", "k", "x", 1);
    tgc_code_cache_stats_get(&g_test_cache, &s1);
    assert_int_equal(s1.disk_writes, s0.disk_writes);
    assert_int_equal(tgc_last_status(), TGC_OK);
    remove_dir(dir);
}

/* ---- memory ---- */

typedef struct flight {
    tgc_code_cache *c;
    const char *key;
    int fail;
    pthread_barrier_t *bar;
    tgc_code_entry *e;
    int made;
    tgc_status st;
    char msg[256];
} flight;

static void *ask(void *arg)
{
    flight *f = arg;
    pthread_barrier_wait(f->bar);
    int make = 0;
    f->st = tgc_code_cache_acquire(f->c, f->key, &f->e, &make);
    if (f->st != TGC_OK)
        return NULL;
    f->made = make;
    if (make) {
        struct timespec ts = {0, 20 * 1000 * 1000}; /* the others arrive meanwhile */
        nanosleep(&ts, NULL);
        if (f->fail) {
            f->st = tgc_set_error(TGC_ERR_COMPILE, "tgc test: the compiler said no");
            tgc_code_cache_fail(f->c, f->e, f->st);
            f->e = NULL;
        } else {
            char *blob = strdup("made once");
            tgc_code_cache_publish(f->c, f->e, blob, strlen(blob) + 1, NULL, 0);
        }
    } else {
        f->st = tgc_code_cache_wait(f->c, f->e);
        if (f->st != TGC_OK)
            f->e = NULL;
    }
    snprintf(f->msg, sizeof f->msg, "%s", f->st != TGC_OK ? tgc_last_error() : "");
    return NULL;
}

static void run_flight(tgc_code_cache *c, const char *key, int fail, flight *fs, int n)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    pthread_t th[16];
    for (int i = 0; i < n; i++) {
        fs[i] = (flight){.c = c, .key = key, .fail = fail, .bar = &bar};
        assert_int_equal(pthread_create(&th[i], NULL, ask, &fs[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
}

static void concurrent_asks_make_an_entry_once(void **state)
{
    (void)state;
    enum { N = 8 };
    flight fs[N];
    tgc_code_cache_stats s0, s1;
    tgc_code_cache_stats_get(&g_test_cache, &s0);
    run_flight(&g_test_cache, "one entry for all", 0, fs, N);
    int makers = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(fs[i].st, TGC_OK);
        assert_ptr_equal(fs[i].e, fs[0].e);
        makers += fs[i].made;
    }
    assert_int_equal(makers, 1);
    assert_string_equal(fs[0].e->blob, "made once");
    tgc_code_cache_stats_get(&g_test_cache, &s1);
    assert_int_equal(s1.compiled - s0.compiled, 1);
    assert_int_equal(s1.memory_hits - s0.memory_hits, N - 1);
    for (int i = 0; i < N; i++)
        tgc_code_cache_release(&g_test_cache, fs[i].e);
}

static void a_failure_reaches_every_waiter_and_is_forgotten(void **state)
{
    (void)state;
    enum { N = 6 };
    flight fs[N];
    run_flight(&g_test_cache, "an entry that fails", 1, fs, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(fs[i].st, TGC_ERR_COMPILE);
        assert_non_null(strstr(fs[i].msg, "the compiler said no"));
    }
    /* forgotten: the next ask makes it again */
    tgc_code_entry *e = NULL;
    int make = 0;
    assert_int_equal(tgc_code_cache_acquire(&g_test_cache, "an entry that fails", &e, &make),
                     TGC_OK);
    assert_int_equal(make, 1);
    tgc_code_cache_publish(&g_test_cache, e, strdup("now it works"), 13, NULL, 0);
    tgc_code_cache_release(&g_test_cache, e);
}

static int g_ext_freed;
static void count_ext_free(void *ext)
{
    g_ext_freed++;
    free(ext);
}
static tgc_code_cache g_evicting =
    TGC_CODE_CACHE_INIT("evict", "bin", "not cached", 1, count_ext_free);

static void evicting_cache_drops_an_entry_with_its_last_user(void **state)
{
    (void)state;
    tgc_code_entry *a = NULL, *b = NULL;
    int make = 0;
    assert_int_equal(tgc_code_cache_acquire(&g_evicting, "k", &a, &make), TGC_OK);
    assert_int_equal(make, 1);
    tgc_code_cache_publish(&g_evicting, a, strdup("x"), 2, malloc(8), 0);
    assert_int_equal(tgc_code_cache_acquire(&g_evicting, "k", &b, &make), TGC_OK);
    assert_int_equal(make, 0);
    assert_ptr_equal(a, b);
    assert_int_equal(tgc_code_cache_wait(&g_evicting, b), TGC_OK);
    tgc_code_cache_release(&g_evicting, a);
    assert_int_equal(g_ext_freed, 0); /* b still uses it */
    tgc_code_cache_release(&g_evicting, b);
    assert_int_equal(g_ext_freed, 1);
    assert_int_equal(tgc_code_cache_acquire(&g_evicting, "k", &a, &make), TGC_OK);
    assert_int_equal(make, 1); /* gone: made again */
    tgc_code_cache_publish(&g_evicting, a, strdup("y"), 2, NULL, 0);
    tgc_code_cache_release(&g_evicting, a);
}

/* ---- CUDA programs (NVRTC; no GPU) ---- */

#ifdef TGC_HAVE_CUDA
static int g_nvrtc_skipped;

static int have_nvrtc(void)
{
    if (tgc_nvrtc_load() == TGC_OK)
        return 1;
    tgc_clear_error();
    g_nvrtc_skipped++;
    return 0;
}

/* a program no other test compiles (the nonce makes it new to this process and to disk) */
static char *fresh_program(const char *tag)
{
    static int seq;
    char *s = malloc(512);
    snprintf(s, 512,
             "// %s %ld %d %d\n"
             "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] *= 2.0f; }\n",
             tag, (long)getpid(), (int)time(NULL), seq++);
    return s;
}

static void program_key_follows_text_arch_and_options(void **state)
{
    (void)state;
    const char a[] = "extern \"C\" __global__ void k() {}\n";
    const char b[] = "extern \"C\" __global__ void k() { }\n";
    const char a90a[] = "#define TGC_NEEDS_SM90A\nextern \"C\" __global__ void k() {}\n";
    char *ka = tgc_cuda_program_key(a, 90), *ka2 = tgc_cuda_program_key(a, 90);
    char *kb = tgc_cuda_program_key(b, 90), *k80 = tgc_cuda_program_key(a, 80);
    char *k90a = tgc_cuda_program_key(a90a, 90);
    assert_string_equal(ka, ka2);
    assert_string_not_equal(ka, kb);
    assert_string_not_equal(ka, k80);
    /* the options are in the key, one a line, as NVRTC gets them */
    tgc_nvrtc_opts o;
    tgc_nvrtc_options(a, 90, &o);
    for (int i = 0; i < o.n; i++) {
        char line[700];
        snprintf(line, sizeof line, "\n%s\n", o.v[i]);
        assert_non_null(strstr(ka, line));
    }
    assert_non_null(strstr(ka, "\n--gpu-architecture=sm_90\n"));
    assert_non_null(strstr(k90a, "\n--gpu-architecture=sm_90a\n"));
    assert_null(strstr(ka, "sm_90a"));
    assert_non_null(strstr(ka, "\nnvrtc "));
    /* the text is the key's end */
    size_t la = strlen(ka), lt = strlen(a);
    assert_string_equal(ka + la - lt, a);
    free(ka);
    free(ka2);
    free(kb);
    free(k80);
    free(k90a);
}

typedef struct prog_ask {
    const char *text;
    pthread_barrier_t *bar;
    const tgc_cuda_program *p;
    tgc_status st;
} prog_ask;

static void *ask_program(void *arg)
{
    prog_ask *a = arg;
    pthread_barrier_wait(a->bar);
    a->st = tgc_cuda_program_get("tgc_test_k", a->text, 90, NULL, &a->p);
    return NULL;
}

static void concurrent_gets_compile_a_program_once(void **state)
{
    (void)state;
    if (!have_nvrtc())
        skip();
    enum { N = 6 };
    char *text = fresh_program("concurrent");
    tgc_code_cache_stats s0, s1;
    tgc_cuda_program_stats(&s0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, N);
    prog_ask as[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        as[i] = (prog_ask){text, &bar, NULL, TGC_OK};
        assert_int_equal(pthread_create(&th[i], NULL, ask_program, &as[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    tgc_cuda_program_stats(&s1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(as[i].st, TGC_OK);
        assert_ptr_equal(as[i].p, as[0].p);
    }
    assert_int_equal(s1.compiled - s0.compiled, 1);
    size_t n = 0;
    assert_non_null(tgc_cuda_program_image(as[0].p, &n));
    assert_true(n > 0);
    free(text);
}

static void a_batch_compiles_a_repeated_text_once(void **state)
{
    (void)state;
    if (!have_nvrtc())
        skip();
    char *a = fresh_program("batch a"), *b = fresh_program("batch b");
    tgc_cuda_program_src srcs[3] = {{"a", a}, {"b", b}, {"a again", a}};
    const tgc_cuda_program *progs[3];
    char *ptx[3];
    tgc_code_cache_stats s0, s1;
    tgc_cuda_program_stats(&s0);
    assert_int_equal(tgc_cuda_programs_get(3, srcs, 90, NULL, progs, ptx), TGC_OK);
    tgc_cuda_program_stats(&s1);
    assert_int_equal(s1.compiled - s0.compiled, 2);
    assert_ptr_equal(progs[0], progs[2]);
    assert_ptr_not_equal(progs[0], progs[1]);
    assert_non_null(ptx[0]);
    assert_non_null(strstr(ptx[0], ".entry k"));
    assert_non_null(ptx[1]);
    assert_null(ptx[2]); /* compiled once, as program 0 */
    for (int i = 0; i < 3; i++)
        free(ptx[i]);
    /* asked again: from memory, no PTX (nothing compiled) */
    assert_int_equal(tgc_cuda_programs_get(3, srcs, 90, NULL, progs, ptx), TGC_OK);
    tgc_code_cache_stats s2;
    tgc_cuda_program_stats(&s2);
    assert_int_equal(s2.compiled, s1.compiled);
    for (int i = 0; i < 3; i++)
        assert_null(ptx[i]);
    free(a);
    free(b);
}

static void nvrtc_errors_come_back_and_are_not_cached(void **state)
{
    (void)state;
    if (!have_nvrtc())
        skip();
    char dir[] = "/tmp/tgc_prog_err_XXXXXX";
    make_dir(dir);
    const char bad[] = "extern \"C\" __global__ void k() { this is not C++; }\n";
    const tgc_cuda_program *p = (const tgc_cuda_program *)1;
    for (int round = 0; round < 2; round++) {
        check_error(tgc_cuda_program_get("tgc_bad", bad, 90, dir, &p), TGC_ERR_COMPILE,
                    "NVRTC rejected tgc_bad");
        assert_null(p);
    }
    assert_int_equal(count_files(dir, "tgc-cuda-", ".cubin"), 0);
    /* a batch fails as a whole with the failing program's message */
    char *good = fresh_program("good beside bad");
    tgc_cuda_program_src srcs[2] = {{"tgc_good", good}, {"tgc_bad", bad}};
    const tgc_cuda_program *progs[2];
    check_error(tgc_cuda_programs_get(2, srcs, 90, NULL, progs, NULL), TGC_ERR_COMPILE,
                "NVRTC rejected tgc_bad");
    assert_null(progs[0]);
    assert_null(progs[1]);
    tgc_clear_error();
    free(good);
    remove_dir(dir);
}

/* the child's side: gets the program of `nonce` with dir as the cache directory and prints
 * "compiled disk_hits disk_rejected disk_writes size" */
static int child_cuda_get(const char *dir, const char *nonce)
{
    char text[512];
    snprintf(text, sizeof text,
             "// %s\nextern \"C\" __global__ void k(float *p) { p[threadIdx.x] += 1.0f; }\n",
             nonce);
    const tgc_cuda_program *p = NULL;
    if (tgc_cuda_program_get("tgc_child", text, 90, dir, &p) != TGC_OK) {
        fprintf(stderr, "child: %s\n", tgc_last_error());
        return 1;
    }
    tgc_code_cache_stats s;
    tgc_cuda_program_stats(&s);
    size_t n = 0;
    tgc_cuda_program_image(p, &n);
    printf("%llu %llu %llu %llu %zu\n", (unsigned long long)s.compiled,
           (unsigned long long)s.disk_hits, (unsigned long long)s.disk_rejected,
           (unsigned long long)s.disk_writes, n);
    return 0;
}

typedef struct child_out {
    unsigned long long compiled, disk_hits, disk_rejected, disk_writes;
    size_t size;
} child_out;

static child_out run_child(const char *dir, const char *nonce)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' --child cuda '%s' '%s'", g_exe, dir, nonce);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    child_out o;
    int got = fscanf(p, "%llu %llu %llu %llu %zu", &o.compiled, &o.disk_hits, &o.disk_rejected,
                     &o.disk_writes, &o.size);
    int rc = pclose(p);
    if (got != 5 || rc != 0)
        fail_msg("the child process failed (%d fields, status %d)", got, rc);
    return o;
}

static void a_fresh_process_loads_programs_from_the_cache_dir(void **state)
{
    (void)state;
    if (!have_nvrtc())
        skip();
    char dir[] = "/tmp/tgc_prog_disk_XXXXXX";
    make_dir(dir);
    char nonce[128];
    snprintf(nonce, sizeof nonce, "disk %ld %ld", (long)getpid(), (long)time(NULL));
    child_out cold = run_child(dir, nonce);
    assert_int_equal(cold.compiled, 1);
    assert_int_equal(cold.disk_hits, 0);
    assert_int_equal(cold.disk_writes, 1);
    assert_int_equal(count_files(dir, "tgc-cuda-sm90-", ".cubin"), 1);
    child_out warm = run_child(dir, nonce);
    assert_int_equal(warm.compiled, 0);
    assert_int_equal(warm.disk_hits, 1);
    assert_int_equal(warm.size, cold.size);
    /* truncate the entry: refused, compiled and written again */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    char path[8200] = "";
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "tgc-cuda-", 9) == 0)
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(d);
    const long full = file_size(path);
    assert_int_equal(truncate(path, full / 2), 0);
    child_out torn = run_child(dir, nonce);
    assert_int_equal(torn.disk_rejected, 1);
    assert_int_equal(torn.compiled, 1);
    assert_int_equal(torn.disk_writes, 1);
    assert_int_equal(file_size(path), full);
    child_out again = run_child(dir, nonce);
    assert_int_equal(again.compiled, 0);
    assert_int_equal(again.disk_hits, 1);
    assert_int_equal(count_files(dir, "", ".tmp"), 0);
    remove_dir(dir);
}
#endif

static int report_skips(void **state)
{
    (void)state;
#ifdef TGC_HAVE_CUDA
    if (g_nvrtc_skipped)
        printf("[  SKIPPED ] %d NVRTC cases: libnvrtc not found\n", g_nvrtc_skipped);
#endif
    return 0;
}

int main(int argc, char **argv)
{
#ifdef TGC_HAVE_CUDA
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "cuda") == 0)
        return child_cuda_get(argv[3], argv[4]);
#else
    (void)argc;
    (void)argv;
#endif
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
    if (n <= 0)
        return 1;
    g_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(disk_round_trip_and_refusals, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(atomic_write_never_shows_a_partial_entry, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(unusable_directory_stores_nothing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(concurrent_asks_make_an_entry_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(a_failure_reaches_every_waiter_and_is_forgotten,
                                        scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(evicting_cache_drops_an_entry_with_its_last_user,
                                        scoped_setup, scoped_teardown),
#ifdef TGC_HAVE_CUDA
        cmocka_unit_test_setup_teardown(program_key_follows_text_arch_and_options, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(concurrent_gets_compile_a_program_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(a_batch_compiles_a_repeated_text_once, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(nvrtc_errors_come_back_and_are_not_cached, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(a_fresh_process_loads_programs_from_the_cache_dir,
                                        scoped_setup, scoped_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, report_skips);
}
