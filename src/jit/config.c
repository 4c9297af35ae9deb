/* tgc_config_check: what tgc_compile accepts (the defaults are support/config_env.c). */
#include "jit/jit.h"

tgc_status tgc_config_check(const tgc_config *c)
{
    if (c->struct_size != sizeof(tgc_config))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg->struct_size is %zu, expected %zu; start from "
                             "tgc_config_default()",
                             c->struct_size, sizeof(tgc_config));
    if ((unsigned)c->backend > TGC_BACKEND_INTERP || (unsigned)c->mode > TGC_MODE_MAX_AUTOTUNE ||
        (unsigned)c->on_cache_limit > TGC_ON_LIMIT_ERROR ||
        (unsigned)c->dynamic > TGC_DYNAMIC_NEVER ||
        (unsigned)c->matmul_precision > TGC_PRECISION_MEDIUM)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg has an unknown backend, mode, on_cache_limit, "
                             "dynamic or matmul_precision value");
    if (c->cache_size_limit < 1 || c->accumulated_cache_size_limit < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cache_size_limit (%d) and "
                             "accumulated_cache_size_limit (%d) must be at least 1",
                             c->cache_size_limit, c->accumulated_cache_size_limit);
    if (c->num_threads < 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: num_threads is %d; use 0 for all cores", c->num_threads);
    return tgc_backend_for(c) ? TGC_OK : tgc_error_prefix(tgc_last_status(), "tgc_compile");
}
