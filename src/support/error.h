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
/* The message of an error a public function passes on from a lower layer, made to start with
 * that function's name: when s is an error and the thread's message does not already start
 * with "fn: ", it becomes "fn: <message>" (the cause stays after the name, as
 * "tgc_dist_init: tgc_comm_create: unknown device type 7"). Returns s; TGC_OK is returned
 * untouched. Applied at the public entry points that forward lower-layer failures. */
tgc_status tgc_error_prefix(tgc_status s, const char *fn);
/* Formats a concrete shape as "[64, 3, 32, 32]" into buf (returns buf). */
char *tgc_format_dims(const int64_t *shape, int ndim, char *buf, size_t n);

#endif
