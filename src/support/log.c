/* Log channels. */
#include "support/log.h"

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

void tgc_log_msg(const tgc_config *cfg, unsigned channel, const char *fmt, ...)
{
    if (channel && !(cfg->log & channel))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cfg->log_fn)
        cfg->log_fn(channel, msg, cfg->log_user);
    else
        fprintf(stderr, "%s\n", msg);
}
