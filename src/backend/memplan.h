/* THE last-use planner, shared by interp (which frees each value after its last reader) and
 * the compiled plans (which carve intermediates out of one arena by lifetime).
 *
 * Input: the steps in order, each a list of uses (a value read, or a value written). A value
 * is live from the first step that writes it to the last step that reads it; a value nobody
 * reads dies at once. Graph outputs are live past the last step (last_use = n_steps). */
#ifndef TGC_BACKEND_MEMPLAN_H
#define TGC_BACKEND_MEMPLAN_H

#include "ir/graph.h"

typedef struct tgc_mem_use {
    int32_t value;
    uint8_t written;
} tgc_mem_use;

/* Step si's uses are uses[start[si] .. start[si + 1]). */
typedef struct tgc_mem_steps {
    int n_steps;
    const int32_t *start;
    const tgc_mem_use *uses;
} tgc_mem_steps;

typedef enum {
    /* Reads of a view count as reads of the value it views (compiled plans: a view has no
     * buffer of its own). Without it each view is a value of its own (interp's tensors). */
    TGC_MEMPLAN_VIEWS_ALIAS = 1u << 0,
    /* Assign arena slots to the intermediates that need a buffer (`materialized`). */
    TGC_MEMPLAN_SLOTS = 1u << 1
} tgc_memplan_flags;

typedef struct tgc_memplan {
    int32_t *last_use; /* per value: last step reading it; n_steps: an output; -1: never */
    int32_t *slot_of;  /* per value: its arena slot; -1: none (an input, an output or what
                        * an output views, a result of an unslotted step, a view when views
                        * alias); NULL without TGC_MEMPLAN_SLOTS */
    int n_slots;
} tgc_memplan;

/* Plans g's values over steps s. With TGC_MEMPLAN_SLOTS, a value gets a slot when a step
 * writes it first, it needs a buffer (materialized[v]; NULL: all do), it is not an INPUT,
 * not a graph output (outputs are fresh tensors, never in the arena) nor viewed by one, and
 * `slotted` (NULL: all steps) marks its writing step as one whose outputs go to the arena.
 * Slots are reused once their value is dead. TGC_ERR_OOM. */
tgc_status tgc_memplan_build(const tgc_graph *g, const tgc_mem_steps *s, unsigned flags,
                             const uint8_t *materialized, const uint8_t *slotted, tgc_memplan *out);
void tgc_memplan_free(tgc_memplan *m);

#endif
