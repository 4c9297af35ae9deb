/* Philox4x32-10 counter-based generator and the process-wide stream.
 *
 * Element i of a draw that starts at stream offset `off` uses counter (off + i) (low and
 * high 32 bits as the first two counter words, zero above) and key (seed low, seed high),
 * and takes word 0 of the output. Every backend computes exactly this, so random ops give
 * the same bits in eager, interp and compiled code. */
#ifndef TGC_RUNTIME_PHILOX_H
#define TGC_RUNTIME_PHILOX_H

#include <stdint.h>

void tgc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
uint32_t tgc_philox_bits(uint64_t seed, uint64_t counter);
/* Uniform in [0, 1) with 24 random bits. */
float tgc_philox_uniform(uint64_t seed, uint64_t counter);
/* Standard normal from two counters (Box-Muller on counter and counter | 1<<63):
 * sqrt(-2 ln(1 - u1)) * cos(2 pi u2) in double, rounded to float once. */
float tgc_philox_normal(uint64_t seed, uint64_t counter);

/* The process stream: tgc_rng_seed resets the offset to 0. tgc_rng_draw(n, &seed) returns
 * the current offset, advances it by n and gives the seed those offsets belong to, all at
 * once (thread-safe: a draw never pairs one seed with another seed's offsets). A random op
 * reserves its counters with it; tgc_rng_reserve is the same without the seed. */
void tgc_rng_seed(uint64_t seed);
uint64_t tgc_rng_current_seed(void);
uint64_t tgc_rng_draw(uint64_t n, uint64_t *seed);
uint64_t tgc_rng_reserve(uint64_t n);

#endif
