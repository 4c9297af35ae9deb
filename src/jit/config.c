/* tgc_config_default: defaults, then the TGC_* environment (the only place it is read). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jit/jit.h"
#include "support/log.h"

static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < 0 || v > 1000000) ? fallback : (int)v;
}

static int env_choice(const char *name, const char *const *names, int n, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return fallback;
}

tgc_config tgc_config_default(void)
{
    static const char *const backends[] = {"auto", "llvm", "cuda", "eager", "interp"};
    static const char *const dynamics[] = {"auto", "always", "never"};
    tgc_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.backend = (tgc_backend_kind)env_choice("TGC_BACKEND", backends, 5, TGC_BACKEND_AUTO);
    c.mode = TGC_MODE_DEFAULT;
    c.cache_size_limit = env_int("TGC_CACHE_SIZE_LIMIT", 8);
    c.accumulated_cache_size_limit = env_int("TGC_ACCUMULATED_CACHE_SIZE_LIMIT", 256);
    c.on_cache_limit = TGC_ON_LIMIT_FALLBACK_EAGER;
    c.dynamic = (tgc_dynamic)env_choice("TGC_DYNAMIC", dynamics, 3, TGC_DYNAMIC_AUTO);
    c.cache_dir = getenv("TGC_CACHE_DIR");
    c.dump_dir = getenv("TGC_DUMP_DIR");
    c.num_threads = env_int("TGC_NUM_THREADS", 0);
    c.log = tgc_log_parse(getenv("TGC_LOG"));
    return c;
}

tgc_status tgc_config_check(const tgc_config *c)
{
    if (c->struct_size != sizeof(tgc_config))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg->struct_size is %zu, expected %zu; start from "
                             "tgc_config_default()",
                             c->struct_size, sizeof(tgc_config));
    if ((unsigned)c->backend > TGC_BACKEND_INTERP || (unsigned)c->mode > TGC_MODE_MAX_AUTOTUNE ||
        (unsigned)c->on_cache_limit > TGC_ON_LIMIT_ERROR ||
        (unsigned)c->dynamic > TGC_DYNAMIC_NEVER)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg has an unknown backend, mode, on_cache_limit or "
                             "dynamic value");
    if (c->cache_size_limit < 1 || c->accumulated_cache_size_limit < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cache_size_limit (%d) and "
                             "accumulated_cache_size_limit (%d) must be at least 1",
                             c->cache_size_limit, c->accumulated_cache_size_limit);
    if (c->num_threads < 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: num_threads is %d; use 0 for all cores",
                             c->num_threads);
    return tgc_backend_for(c) ? TGC_OK : tgc_last_status();
}
