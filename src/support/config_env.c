/* tgc_config_default: defaults, then the TGC_* environment; and the process-wide switches of
 * config_env.h (TGC_EAGER, TGC_PROFILE). The only place the environment is read. Lowest
 * layer, so that every layer can start from the defaults without calling up. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tgc/config.h"
#include "support/config_env.h"
#include "support/error.h"
#include "support/log.h"
#include "support/struct_size.h"

/* An unparsable TGC_* value is ignored with one warning per variable and value: the
 * defaults are called often (every tgc_config_default), the warning must not repeat. */
static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;

static void warn_bad_env(const char *name, const char *value, const char *accepted,
                         const char *fallback)
{
    static struct {
        const char *name;
        char value[64];
    } warned[32];
    static int n_warned;
    int seen = 0;
    pthread_mutex_lock(&warn_lock);
    for (int i = 0; i < n_warned && !seen; i++)
        seen = strcmp(warned[i].name, name) == 0 &&
               strncmp(warned[i].value, value, sizeof warned[i].value - 1) == 0;
    if (!seen && n_warned < (int)(sizeof warned / sizeof warned[0])) {
        warned[n_warned].name = name;
        snprintf(warned[n_warned].value, sizeof warned[n_warned].value, "%s", value);
        n_warned++;
    }
    pthread_mutex_unlock(&warn_lock);
    if (seen)
        return;
    /* no function yet: the process-wide callback, else stderr */
    tgc_log_msg(NULL, 0, "tgc: ignoring %s='%s': expected %s; using %s", name, value, accepted,
                fallback);
}

static int env_int(const char *name, int lo, int fallback, const char *accepted)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > 1000000) {
        char fb[32];
        snprintf(fb, sizeof fb, "%d", fallback);
        warn_bad_env(name, s, accepted, fb);
        return fallback;
    }
    return (int)v;
}

static int env_choice(const char *name, const char *const *names, int n, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    char accepted[160] = "one of ";
    for (int i = 0; i < n; i++) {
        size_t l = strlen(accepted);
        snprintf(accepted + l, sizeof accepted - l, "%s%s", i ? ", " : "", names[i]);
    }
    warn_bad_env(name, s, accepted, names[fallback]);
    return fallback;
}

/* TGC_LOG: a list of channel names; an unknown name is reported, the known ones apply. */
static unsigned env_log(void)
{
    const char *s = getenv("TGC_LOG");
    if (!s || !*s)
        return 0;
    unsigned bits = tgc_log_parse(s);
    for (const char *p = s + strspn(s, ",+ "); *p; p += strspn(p, ",+ ")) {
        size_t n = strcspn(p, ",+ ");
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)n, p);
        if (n >= sizeof word || !tgc_log_parse(word)) {
            warn_bad_env("TGC_LOG", s,
                         "a comma-separated list of recompiles, guards, graph, dynamic, perf, "
                         "kernels, all",
                         "the known names only");
            break;
        }
        p += n;
    }
    return bits;
}

tgc_status tgc_config_default_sized(tgc_config *cfg, size_t size)
{
    static const char *const backends[] = {"auto", "llvm", "cuda", "eager", "interp"};
    static const char *const dynamics[] = {"auto", "always", "never"};
    if (!cfg)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_config_default_sized: cfg is NULL");
    tgc_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = size;
    c.backend = (tgc_backend_kind)env_choice("TGC_BACKEND", backends, 5, TGC_BACKEND_AUTO);
    c.mode = TGC_MODE_DEFAULT;
    c.cache_size_limit = env_int("TGC_CACHE_SIZE_LIMIT", 1, 8,
                                 "an integer from 1 to 1000000 (variants per function)");
    c.accumulated_cache_size_limit = env_int("TGC_ACCUMULATED_CACHE_SIZE_LIMIT", 1, 256,
                                             "an integer from 1 to 1000000 (variants per process)");
    c.on_cache_limit = TGC_ON_LIMIT_FALLBACK_EAGER;
    c.dynamic = (tgc_dynamic)env_choice("TGC_DYNAMIC", dynamics, 3, TGC_DYNAMIC_AUTO);
    c.cache_dir = getenv("TGC_CACHE_DIR");
    c.dump_dir = getenv("TGC_DUMP_DIR");
    c.num_threads =
        env_int("TGC_NUM_THREADS", 0, 0, "an integer from 0 to 1000000 (0: one thread per core)");
    c.log = env_log();
    static const char *const precisions[] = {"highest", "high", "medium"};
    c.matmul_precision = (tgc_matmul_precision)env_choice("TGC_MATMUL_PRECISION", precisions, 3,
                                                          TGC_PRECISION_HIGHEST);
    c.device = (tgc_device){TGC_DEVICE_CPU, 0}; /* tgc_cpu(), a layer up */
    static const char *const tunes[] = {"off", "fast", "full"};
    c.autotune = (tgc_autotune)env_choice("TGC_AUTOTUNE", tunes, 3, TGC_AUTOTUNE_OFF);
    /* the caller's struct holds size bytes (older headers: fewer fields) */
    return tgc_struct_write("tgc_config_default_sized", "cfg", cfg, size, &c, sizeof c,
                            TGC_FIELD_END(tgc_config, backend));
}

/* Read once: eager ops and compiled calls test them on every call, on many threads. */
static pthread_once_t switches_once = PTHREAD_ONCE_INIT;
static int eager_interp, profile, cuda_tma, channels_last, channels_last_grad, cuda_batch;

/* 1 / 0 for a variable set to something other than / to "0", dflt when unset or empty */
static int env_on_off(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? strcmp(v, "0") != 0 : dflt;
}

static void read_switches(void)
{
    const char *e = getenv("TGC_EAGER"), *b = getenv("TGC_BACKEND");
    eager_interp = (e && strcmp(e, "interp") == 0) || (b && strcmp(b, "interp") == 0);
    profile = getenv("TGC_PROFILE") != NULL;
    cuda_tma = env_on_off("TGC_CUDA_TMA", 1);
    channels_last = env_on_off("TGC_CHANNELS_LAST", 1);
    channels_last_grad = env_on_off("TGC_CHANNELS_LAST_GRAD", 0);
    cuda_batch = env_on_off("TGC_CUDA_BATCH", 1);
}

int tgc_env_cuda_tma(void)
{
    pthread_once(&switches_once, read_switches);
    return cuda_tma;
}

int tgc_env_channels_last(void)
{
    pthread_once(&switches_once, read_switches);
    return channels_last;
}

int tgc_env_channels_last_grad(void)
{
    pthread_once(&switches_once, read_switches);
    return channels_last && channels_last_grad;
}

int tgc_env_cuda_batch(void)
{
    pthread_once(&switches_once, read_switches);
    return cuda_batch;
}

int tgc_env_eager_interp(void)
{
    pthread_once(&switches_once, read_switches);
    return eager_interp;
}

int tgc_env_profile(void)
{
    pthread_once(&switches_once, read_switches);
    return profile;
}

const char *tgc_env_llvm_cpu(void)
{
    return getenv("TGC_LLVM_CPU");
}

const char *tgc_env_llvm_features(void)
{
    return getenv("TGC_LLVM_FEATURES");
}

/* The first variable of names that is set: its value (-2 when malformed), or -1. */
static int env_first_int(const char *const *names, const char **name)
{
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        if (name)
            *name = names[i];
        char *end = NULL;
        long x = strtol(v, &end, 10);
        return *end || x < 0 || x > 1 << 30 || v[0] == '-' || v[0] == '+' ? -2 : (int)x;
    }
    return -1;
}

int tgc_env_dist_rank(const char **name)
{
    static const char *const names[] = {"TGC_RANK", "RANK",         "OMPI_COMM_WORLD_RANK",
                                        "PMI_RANK", "SLURM_PROCID", NULL};
    return env_first_int(names, name);
}

int tgc_env_dist_world(const char **name)
{
    static const char *const names[] = {"TGC_WORLD_SIZE", "WORLD_SIZE",   "OMPI_COMM_WORLD_SIZE",
                                        "PMI_SIZE",       "SLURM_NTASKS", NULL};
    return env_first_int(names, name);
}

int tgc_env_dist_local_rank(const char **name)
{
    static const char *const names[] = {"TGC_LOCAL_RANK", "LOCAL_RANK",
                                        "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL};
    return env_first_int(names, name);
}

const char *tgc_env_dist_id(void)
{
    const char *v = getenv("TGC_DIST_ID");
    return v && *v ? v : NULL;
}

const char *tgc_env_dist_id_file(void)
{
    const char *v = getenv("TGC_DIST_ID_FILE");
    return v && *v ? v : NULL;
}
