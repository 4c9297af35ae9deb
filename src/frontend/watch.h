/* How a handle hears that another one it refers to without holding it is freed: an optimizer
 * or a data-parallel wrapper hears of its module's free, a wrapper of its process group's.
 * The referring handle embeds a tgc_watch and puts it on the other's list (tgc_module_watch,
 * tgc_dist_watch); the other's free calls it back. So the freed handle's code never names the
 * code of the handles that refer to it.
 *
 * Threading: the watched handle's own rules (one thread at a time). */
#ifndef TGC_FRONTEND_WATCH_H
#define TGC_FRONTEND_WATCH_H

#include "tensor/tensor_impl.h"

struct tgc_module;

typedef struct tgc_watch {
    /* The watched handle is being freed (called once, from its free; the watch is off its
     * list by then): forget it. The watcher's later calls that need it fail with
     * TGC_ERR_INVALID_ARG, and its own free still frees it. */
    void (*gone)(struct tgc_watch *w);
    /* A module's watchers only (NULL: nothing moves): tgc_module_to(root, dev) is moving
     * root's subtree to dev. Hands each tensor of the watcher's own that moves with it to
     * add(ctx, t), which returns 0 when out of memory; returns 0 then, else 1. */
    int (*moving)(struct tgc_watch *w, const struct tgc_module *root, tgc_device dev,
                  int (*add)(void *ctx, tgc_tensor *t), void *ctx);
} tgc_watch;

#endif
