/* Thread-local error state. */
#ifndef TGC_SUPPORT_ERROR_H
#define TGC_SUPPORT_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include "tgc/tensor.h"

#if defined(__GNUC__)
#define TGC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TGC_INTERNAL __attribute__((visibility("hidden")))
#else
#define TGC_PRINTF(a, b)
#define TGC_INTERNAL
#endif

/* Sets the thread's error (status and formatted message) and returns s. */
tgc_status tgc_set_error(tgc_status s, const char *fmt, ...) TGC_PRINTF(2, 3);
/* Like tgc_set_error but keeps an earlier error if one is already pending: used where a
 * NULL input means the first failure has already been reported. */
tgc_status tgc_keep_error(tgc_status s, const char *fmt, ...) TGC_PRINTF(2, 3);
/* Formats a concrete shape as "[64, 3, 32, 32]" into buf (returns buf). */
char *tgc_format_dims(const int64_t *shape, int ndim, char *buf, size_t n);

#endif
