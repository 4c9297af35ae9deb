/* Thread-local error state and status names. */
#include "support/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local tgc_status err_status;
static _Thread_local char err_msg[1024];

static const char *const status_names[] = {
    "TGC_OK",           "TGC_ERR_INVALID_ARG", "TGC_ERR_SHAPE",       "TGC_ERR_DTYPE",
    "TGC_ERR_DEVICE",   "TGC_ERR_OOM",         "TGC_ERR_UNSUPPORTED", "TGC_ERR_COMPILE",
    "TGC_ERR_RUNTIME",  "TGC_ERR_CACHE_LIMIT", "TGC_ERR_GRAPH_BREAK", "TGC_ERR_IO",
    "TGC_ERR_INTERNAL",
    "TGC_ERR_TIMEOUT",
    "TGC_ERR_MISMATCH",
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == TGC_STATUS_COUNT,
               "status name table out of sync");

const char *tgc_status_str(tgc_status s)
{
    return (unsigned)s < TGC_STATUS_COUNT ? status_names[s] : "TGC_ERR_UNKNOWN";
}

const char *tgc_last_error(void) { return err_msg; }
tgc_status tgc_last_status(void) { return err_status; }

void tgc_clear_error(void)
{
    err_status = TGC_OK;
    err_msg[0] = 0;
}

static tgc_status set_va(tgc_status s, const char *fmt, va_list ap)
{
    err_status = s;
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    return s;
}

tgc_status tgc_set_error(tgc_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_va(s, fmt, ap);
    va_end(ap);
    return s;
}

tgc_status tgc_keep_error(tgc_status s, const char *fmt, ...)
{
    if (err_status != TGC_OK)
        return err_status;
    va_list ap;
    va_start(ap, fmt);
    set_va(s, fmt, ap);
    va_end(ap);
    return s;
}

tgc_status tgc_error_prefix(tgc_status s, const char *fn)
{
    if (s == TGC_OK || !fn)
        return s;
    size_t n = strlen(fn);
    if (strncmp(err_msg, fn, n) == 0 && err_msg[n] == ':')
        return s;
    char cause[sizeof err_msg];
    memcpy(cause, err_msg, sizeof cause);
    cause[sizeof cause - 1] = 0;
    err_status = s;
    snprintf(err_msg, sizeof err_msg, "%s: %s", fn,
             cause[0] ? cause : tgc_status_str(s)); /* a bare status: at least its name */
    return s;
}

char *tgc_format_dims(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t len = 0;
    if (n == 0)
        return buf;
    buf[0] = 0;
    len += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}
