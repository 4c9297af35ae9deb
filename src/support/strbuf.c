/* Growable string builder. */
#include "support/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sb_reserve(tgc_strbuf *sb, size_t extra)
{
    if (sb->failed)
        return 0;
    if (sb->len + extra + 1 <= sb->cap)
        return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->failed = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = cap;
    return 1;
}

void tgc_sb_printf(tgc_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || !sb_reserve(sb, (size_t)need))
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)need + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)need;
}

void tgc_sb_puts(tgc_strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    if (!sb_reserve(sb, n))
        return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

char *tgc_sb_take(tgc_strbuf *sb)
{
    if (sb->failed) {
        tgc_sb_free(sb);
        return NULL;
    }
    if (!sb->data && !sb_reserve(sb, 0))
        return NULL;
    if (sb->len == 0)
        sb->data[0] = 0;
    char *s = sb->data;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return s;
}

void tgc_sb_free(tgc_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
}
