/* Directories the library writes into (cfg.cache_dir, cfg.dump_dir): created on first use
 * rather than silently not written. */
#ifndef TGC_SUPPORT_DIRS_H
#define TGC_SUPPORT_DIRS_H

#include "tgc/config.h"

/* Makes sure dir is a directory: creates it and its missing parents (mode 0700: compiled
 * code and dumps are the user's own). 1 when it is one; 0 when it cannot be, and then, once
 * per process and directory, a warning through cfg's log (cfg may be NULL) names `what` (the
 * option, e.g. "cfg.cache_dir"), the directory, the reason and `consequence`. Thread-safe. */
int tgc_dir_ensure(const tgc_config *cfg, const char *dir, const char *what,
                   const char *consequence);

#endif
