/* fuzz_run: runs random programs of the generator (fuzz_gen.c) on every backend and compares.
 *
 *   fuzz_run [--seed S] [--count N] [--seconds T] [--known FILE] [--record DIR]
 *   fuzz_run --replay DIR [--known FILE]
 *   options: --no-fork (run in this process), --timeout S (per program, default 120),
 *            --print (print every program), --reduce (also print a reduced program),
 *            --list (generate and print the programs, run nothing)
 *
 * Seed mode runs programs S, S+1, ... S+N-1 (stopping early after T seconds). Replay mode runs
 * every corpus entry of DIR: NAME.seed (a "seed N" line, then the program it generated, which
 * must still be what the generator makes of that seed) or NAME.bin (a libFuzzer input).
 * Each program runs in a child process, so a crash or hang is reported and the run goes on.
 * A finding prints one line (seed and what differed), the program as C-like text and the
 * differences; entries of the known-failures file are reported as
 * "expected failure (known: item N)" and not counted. The summary line:
 *   programs N, mismatches M, crashes/internal K (expected failures E)
 * The exit status is 0 only when M and K are 0. */
#include "fuzz_gen.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct known {
    char entry[256]; /* corpus file name */
    char item[64];
    uint64_t seed;
    int has_seed;
    int seen;
} known;

static known g_known[256];
static int g_nknown;
static int g_no_fork, g_print, g_reduce, g_list, g_timeout = 120;
static const char *g_record;
static char g_progress[512];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static int parse_seed(const char *text, uint64_t *seed)
{
    const char *s = strstr(text, "seed ");
    if (!s || (s != text && s[-1] != '\n'))
        return -1;
    *seed = strtoull(s + 5, NULL, 0);
    return 0;
}

/* The known-failures file: "ENTRY item N: text" per line, '#' comments. ENTRY is a corpus file
 * name; with a corpus directory its seed is read, so seed mode recognizes it too. */
static void load_known(const char *path, const char *corpus)
{
    char *text = read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "fuzz_run: cannot read %s\n", path);
        exit(2);
    }
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        while (*line == ' ')
            line++;
        if (!*line || *line == '#' || g_nknown >= 256)
            continue;
        known *k = &g_known[g_nknown];
        memset(k, 0, sizeof *k);
        if (sscanf(line, "%255s item %63[^:\n]", k->entry, k->item) < 2)
            continue;
        if (corpus) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", corpus, k->entry);
            char *c = read_file(p, NULL);
            if (c && parse_seed(c, &k->seed) == 0)
                k->has_seed = 1;
            free(c);
        }
        g_nknown++;
    }
    free(text);
}

static known *known_for(const char *entry, uint64_t seed, int has_seed)
{
    for (int i = 0; i < g_nknown; i++) {
        if (entry && strcmp(g_known[i].entry, entry) == 0)
            return &g_known[i];
        if (!entry && has_seed && g_known[i].has_seed && g_known[i].seed == seed)
            return &g_known[i];
    }
    return NULL;
}

/* In the child (or in process): generate, run, print on a finding. Returns the verdict. */
static int child_run(uint64_t seed, const uint8_t *data, size_t len)
{
    fz_rng r;
    if (data)
        fz_rng_bytes(&r, data, len);
    else
        fz_rng_seed(&r, seed);
    static fz_prog p;
    fz_generate(&r, &p, g_progress[0] ? g_progress : NULL);
    if (g_print || g_list)
        fz_print(&p, stdout);
    if (g_list)
        return FZ_PASS;
    char *rep = NULL;
    size_t replen = 0;
    FILE *mem = open_memstream(&rep, &replen);
    fz_verdict v = fz_run(&p, mem ? mem : stderr);
    if (mem)
        fclose(mem);
    if (v != FZ_PASS) {
        FILE *f = g_progress[0] ? fopen(g_progress, "a") : NULL;
        if (f) { /* the differences go after the program, for the parent to print */
            fprintf(f, "%s", rep ? rep : "");
            fclose(f);
        } else {
            fz_print(&p, stdout);
            printf("%s", rep ? rep : "");
        }
    }
    free(rep);
    if (v != FZ_PASS && g_reduce) {
        static fz_prog small;
        fz_reduce(&p, &small);
        FILE *f = g_progress[0] ? fopen(g_progress, "a") : stdout;
        if (f) {
            fprintf(f, "reduced:\n");
            fz_print(&small, f);
            FILE *m2 = open_memstream(&rep, &replen);
            if (m2) {
                fz_run(&small, m2);
                fclose(m2);
                fprintf(f, "%s", rep);
                free(rep);
            }
            if (f != stdout)
                fclose(f);
        }
    }
    fflush(stdout);
    return (int)v;
}

typedef enum { R_PASS, R_MISMATCH, R_INTERNAL, R_CRASH } outcome;

/* Runs one program (a seed, or fuzzer bytes) isolated in a child; why gets the crash reason. */
static outcome run_one(uint64_t seed, const uint8_t *data, size_t len, char *why, size_t whyn)
{
    why[0] = 0;
    if (g_no_fork) {
        int v = child_run(seed, data, len);
        return v == FZ_PASS ? R_PASS : v == FZ_MISMATCH ? R_MISMATCH : R_INTERNAL;
    }
    unlink(g_progress);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whyn, "fork failed: %s", strerror(errno));
        return R_CRASH;
    }
    if (pid == 0) {
        alarm((unsigned)g_timeout);
        int v = child_run(seed, data, len);
        tgc_shutdown();
        exit(v);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(why, whyn, "%s (signal %d)", sig == SIGALRM ? "timeout" : strsignal(sig), sig);
        return R_CRASH;
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
    if (code == FZ_PASS)
        return R_PASS;
    if (code == FZ_MISMATCH)
        return R_MISMATCH;
    if (code == FZ_INTERNAL)
        return R_INTERNAL;
    snprintf(why, whyn, "child exited with status %d (a sanitizer report?)", code);
    return R_CRASH;
}

static long g_programs, g_mismatch, g_crash, g_expected;

static void record_entry(uint64_t seed, const char *kind, const char *prog)
{
    if (!g_record)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-%llu.seed", g_record, (unsigned long long)seed);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "seed %llu\n# found by fuzz_run: %s\n%s", (unsigned long long)seed, kind,
            prog ? prog : "");
    fclose(f);
}

/* The program lines ("  tgc_tensor *vN = ...") of a text, for the corpus check. */
static int program_lines(const char *text, char lines[][320], int max)
{
    int n = 0;
    const char *s = text;
    while (s && *s && n < max) {
        const char *e = strchr(s, '\n');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (strncmp(s, "reduced:", 8) == 0) /* what follows is the reducer's program */
            break;
        if (l > 14 && strncmp(s, "  tgc_tensor *v", 15) == 0) {
            size_t c = l < 319 ? l : 319;
            memcpy(lines[n], s, c);
            lines[n][c] = 0;
            n++;
        }
        s = e ? e + 1 : NULL;
    }
    return n;
}

static void report(uint64_t seed, const char *entry, outcome o, const char *why, int has_seed)
{
    g_programs++;
    char *prog = g_no_fork ? NULL : read_file(g_progress, NULL);
    known *k = known_for(entry, seed, has_seed);
    if (o == R_PASS) {
        if (k)
            printf("known failure passed this time: %s (item %s); once it passes for good "
                   "(some defects read stale memory and fail only sometimes), remove it from "
                   "known_failures\n",
                   k->entry, k->item);
        free(prog);
        return;
    }
    const char *kind = o == R_MISMATCH ? "mismatch" : o == R_INTERNAL ? "internal error" : "crash";
    if (k) {
        g_expected++;
        printf("expected failure (known: item %s): %s, %s%s%s\n", k->item, k->entry, kind,
               why[0] ? ": " : "", why);
        free(prog);
        return;
    }
    if (o == R_MISMATCH)
        g_mismatch++;
    else
        g_crash++;
    if (entry)
        printf("FINDING %s (seed %llu): %s%s%s\n", entry, (unsigned long long)seed, kind,
               why[0] ? ": " : "", why);
    else
        printf("FINDING seed %llu: %s%s%s\n", (unsigned long long)seed, kind, why[0] ? ": " : "",
               why);
    if (prog)
        printf("%s", prog);
    if (o == R_CRASH)
        printf("  (replay: fuzz_run --seed %llu --count 1 --no-fork)\n", (unsigned long long)seed);
    if (!entry)
        record_entry(seed, kind, prog);
    free(prog);
    fflush(stdout);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_run: cannot open %s\n", dir);
        exit(2);
    }
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024) {
        size_t l = strlen(e->d_name);
        if ((l > 5 && strcmp(e->d_name + l - 5, ".seed") == 0) ||
            (l > 4 && strcmp(e->d_name + l - 4, ".bin") == 0))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    static char want[FZ_MAX_INS][320], got[FZ_MAX_INS][320];
    for (int i = 0; i < n; i++) {
        char path[1024], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        if (!text) {
            fprintf(stderr, "fuzz_run: cannot read %s\n", path);
            g_crash++;
            continue;
        }
        int is_bin = strcmp(names[i] + strlen(names[i]) - 4, ".bin") == 0;
        uint64_t seed = 0;
        if (!is_bin && parse_seed(text, &seed) != 0) {
            printf("FINDING %s: corpus entry without a 'seed N' line\n", names[i]);
            g_mismatch++;
            free(text);
            continue;
        }
        outcome o = is_bin ? run_one(0, (const uint8_t *)text, len, why, sizeof why)
                           : run_one(seed, NULL, 0, why, sizeof why);
        if (!is_bin && !g_no_fork) {
            /* the stored program must still be (a prefix of) what the seed generates */
            char *prog = read_file(g_progress, NULL);
            int nw = program_lines(text, want, FZ_MAX_INS);
            int ng = prog ? program_lines(prog, got, FZ_MAX_INS) : 0;
            int same = nw <= ng;
            for (int k = 0; same && k < nw; k++)
                same = strcmp(want[k], got[k]) == 0;
            free(prog);
            if (!same) {
                printf("FINDING %s: the generator no longer makes this entry's program from seed "
                       "%llu; re-record the entry (fuzz_run --seed %llu --count 1 --record DIR) "
                       "or keep its program as a unit test\n",
                       names[i], (unsigned long long)seed, (unsigned long long)seed);
                g_mismatch++;
            }
        }
        report(seed, names[i], o, why, !is_bin);
        free(text);
        free(names[i]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    long count = 100;
    double seconds = 0;
    const char *replay_dir = NULL, *known_file = NULL, *corpus = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seed") && v)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--count") && v)
            count = strtol(argv[++i], NULL, 0);
        else if (!strcmp(a, "--seconds") && v)
            seconds = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--replay") && v)
            replay_dir = argv[++i];
        else if (!strcmp(a, "--known") && v)
            known_file = argv[++i];
        else if (!strcmp(a, "--corpus") && v)
            corpus = argv[++i];
        else if (!strcmp(a, "--record") && v)
            g_record = argv[++i];
        else if (!strcmp(a, "--timeout") && v)
            g_timeout = atoi(argv[++i]);
        else if (!strcmp(a, "--no-fork"))
            g_no_fork = 1;
        else if (!strcmp(a, "--list"))
            g_list = 1;
        else if (!strcmp(a, "--reduce"))
            g_reduce = 1;
        else if (!strcmp(a, "--print"))
            g_print = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--seed S] [--count N] [--seconds T] [--known FILE [--corpus DIR]]\n"
                    "          [--record DIR] [--replay DIR] [--no-fork] [--timeout S] [--print] "
                    "[--reduce]\n",
                    argv[0]);
            return 2;
        }
    }
    if (known_file)
        load_known(known_file, corpus ? corpus : replay_dir);
    if (!g_no_fork) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_progress, sizeof g_progress, "%s/fuzz_run.%ld.prog", tmp ? tmp : "/tmp",
                 (long)getpid());
    }
    double t0 = now_s();
    if (replay_dir) {
        replay(replay_dir);
    } else {
        for (long i = 0; i < count; i++) {
            if (seconds > 0 && now_s() - t0 > seconds)
                break;
            char why[256];
            uint64_t s = seed + (uint64_t)i;
            outcome o = run_one(s, NULL, 0, why, sizeof why);
            report(s, NULL, o, why, 1);
        }
    }
    if (g_progress[0])
        unlink(g_progress);
    printf("programs %ld, mismatches %ld, crashes/internal %ld (expected failures %ld, %.1f s)\n",
           g_programs, g_mismatch, g_crash, g_expected, now_s() - t0);
    return g_mismatch || g_crash ? 1 : 0;
}
