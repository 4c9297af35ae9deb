/* tgc_config_read: what tgc_compile accepts (the defaults are support/config_env.c). */
#include "jit/jit.h"
#include "support/struct_size.h"

static tgc_status config_check(const tgc_config *c);

tgc_status tgc_config_read(const tgc_config *user, tgc_config *out)
{
    *out = tgc_config_default();
    if (!user)
        return config_check(out);
    /* the caller's struct holds struct_size bytes: read no further (older headers lack the
     * later fields, which keep their defaults) */
    tgc_status st =
        tgc_struct_read("tgc_compile", "cfg->struct_size", "; start from tgc_config_default()", out,
                        sizeof *out, TGC_FIELD_END(tgc_config, backend), user, user->struct_size);
    out->struct_size = sizeof *out;
    return st == TGC_OK ? config_check(out) : st;
}

static tgc_status config_check(const tgc_config *c)
{
    if ((unsigned)c->backend > TGC_BACKEND_INTERP || (unsigned)c->mode > TGC_MODE_MAX_AUTOTUNE ||
        (unsigned)c->on_cache_limit > TGC_ON_LIMIT_ERROR ||
        (unsigned)c->dynamic > TGC_DYNAMIC_NEVER ||
        (unsigned)c->matmul_precision > TGC_PRECISION_MEDIUM ||
        (unsigned)c->autotune > TGC_AUTOTUNE_FULL)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg has an unknown backend, mode, on_cache_limit, "
                             "dynamic, matmul_precision or autotune value");
    if (c->cache_size_limit < 1 || c->accumulated_cache_size_limit < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cache_size_limit (%d) and "
                             "accumulated_cache_size_limit (%d) must be at least 1",
                             c->cache_size_limit, c->accumulated_cache_size_limit);
    if (c->num_threads < 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: num_threads is %d; use 0 for all cores", c->num_threads);
    if (!tgc_backend_device_known(c->device.type) || c->device.index < 0 ||
        (c->device.type == TGC_DEVICE_CPU && c->device.index != 0)) {
        char ctors[128];
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_compile: cfg.device {type %d, index %d} is not a device; use %s",
                             (int)c->device.type, c->device.index,
                             tgc_backend_device_ctors(ctors, sizeof ctors));
    }
    return tgc_backend_for(c) ? TGC_OK : tgc_error_prefix(tgc_last_status(), "tgc_compile");
}
