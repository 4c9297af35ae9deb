/* Log channels: messages go to the config's callback, else to the process-wide one
 * (tgc_set_log_fn), else to stderr. Every message the library prints passes here. */
#ifndef TGC_SUPPORT_LOG_H
#define TGC_SUPPORT_LOG_H

#include "support/error.h"
#include "tgc/config.h"

/* Formats and delivers a message of a channel when cfg enables it. Channel 0 is a warning:
 * always delivered. cfg NULL: a message of no function (environment warnings, a scope that
 * grows without bound), delivered whatever its channel to the process-wide callback or
 * stderr. */
void tgc_log_msg(const tgc_config *cfg, unsigned channel, const char *fmt, ...) TGC_PRINTF(3, 4);
/* Delivers msg without checking cfg's channels (TGC_PROFILE lines: the switch is the
 * environment's, not a channel's). cfg may be NULL. */
void tgc_log_write(const tgc_config *cfg, unsigned channel, const char *msg);
/* Parses "recompiles,guards,..." into TGC_LOG_* bits (unknown names are ignored). */
unsigned tgc_log_parse(const char *spec);

#endif
