/* Log channels: messages go to the config's callback or to stderr. */
#ifndef TGC_SUPPORT_LOG_H
#define TGC_SUPPORT_LOG_H

#include "support/error.h"
#include "tgc/config.h"

/* Channel 0 is a warning: always delivered. */
void tgc_log_msg(const tgc_config *cfg, unsigned channel, const char *fmt, ...) TGC_PRINTF(3, 4);
/* Parses "recompiles,guards,..." into TGC_LOG_* bits (unknown names are ignored). */
unsigned tgc_log_parse(const char *spec);

#endif
