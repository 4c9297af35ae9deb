/* Log channels, and the process-wide log callback (tgc_set_log_fn in tgc/config.h). */
#include "support/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bit;
} channels[] = {
    {"recompiles", TGC_LOG_RECOMPILES}, {"guards", TGC_LOG_GUARDS}, {"graph", TGC_LOG_GRAPH},
    {"dynamic", TGC_LOG_DYNAMIC},       {"perf", TGC_LOG_PERF},     {"kernels", TGC_LOG_KERNELS},
    {"all", TGC_LOG_ALL},
};

unsigned tgc_log_parse(const char *spec)
{
    unsigned bits = 0;
    while (spec && *spec) {
        size_t n = strcspn(spec, ",+ ");
        for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++)
            if (strlen(channels[i].name) == n && strncmp(spec, channels[i].name, n) == 0)
                bits |= channels[i].bit;
        spec += n;
        spec += strspn(spec, ",+ ");
    }
    return bits;
}

/* The process-wide callback: a pair, so it is read under a lock (messages are rare; the
 * callback itself runs outside the lock, so it may log or set another callback). */
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static tgc_log_fn g_log_fn;
static void *g_log_user;

void tgc_set_log_fn(tgc_log_fn fn, void *user)
{
    pthread_mutex_lock(&g_log_lock);
    g_log_fn = fn;
    g_log_user = fn ? user : NULL;
    pthread_mutex_unlock(&g_log_lock);
}

void tgc_log_write(const tgc_config *cfg, unsigned channel, const char *msg)
{
    if (cfg && cfg->log_fn) {
        cfg->log_fn(channel, msg, cfg->log_user);
        return;
    }
    pthread_mutex_lock(&g_log_lock);
    tgc_log_fn fn = g_log_fn;
    void *user = g_log_user;
    pthread_mutex_unlock(&g_log_lock);
    if (fn)
        fn(channel, msg, user);
    else
        fprintf(stderr, "%s\n", msg);
}

void tgc_log_msg(const tgc_config *cfg, unsigned channel, const char *fmt, ...)
{
    if (cfg && channel && !(cfg->log & channel))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tgc_log_write(cfg, channel, msg);
}
