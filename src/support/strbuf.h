/* Growable string builder. Allocation failure makes the buffer sticky-failed (data NULL). */
#ifndef TGC_SUPPORT_STRBUF_H
#define TGC_SUPPORT_STRBUF_H

#include <stddef.h>

#include "support/error.h"

typedef struct tgc_strbuf {
    char *data;
    size_t len, cap;
    int failed;
} tgc_strbuf;

void tgc_sb_printf(tgc_strbuf *sb, const char *fmt, ...) TGC_PRINTF(2, 3);
void tgc_sb_puts(tgc_strbuf *sb, const char *s);
/* Returns the string (caller frees) and resets sb; NULL if an allocation failed. */
char *tgc_sb_take(tgc_strbuf *sb);
void tgc_sb_free(tgc_strbuf *sb);

#endif
