/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and
 * the process-wide (seed, offset) stream. The contract is in philox.h: every backend
 * reproduces tgc_philox_bits / _uniform / _normal bit for bit. */
#include "runtime/philox.h"

#include <math.h>
#include <pthread.h>

#define PHILOX_M0     0xD2511F53u
#define PHILOX_M1     0xCD9E8D57u
#define PHILOX_W0     0x9E3779B9u
#define PHILOX_W1     0xBB67AE85u
#define PHILOX_ROUNDS 10

/* The stream's seed before any tgc_rng_seed call. */
#define TGC_RNG_DEFAULT_SEED 0x2545F4914F6CDD1DULL

static inline void mulhilo32(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void tgc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo32(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo32(PHILOX_M1, c2, &hi1, &lo1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint32_t tgc_philox_bits(uint64_t seed, uint64_t counter)
{
    const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    tgc_philox4x32_10(ctr, key, out);
    return out[0];
}

float tgc_philox_uniform(uint64_t seed, uint64_t counter)
{
    /* 24 bits fill a float's mantissa exactly: the result is a multiple of 2^-24 below 1. */
    return (float)(tgc_philox_bits(seed, counter) >> 8) * 0x1p-24f;
}

float tgc_philox_normal(uint64_t seed, uint64_t counter)
{
    /* Box-Muller, evaluated in double and rounded once to float:
     *   u1 = uniform(counter), u2 = uniform(counter | 1<<63),
     *   z  = sqrt(-2 ln(1 - u1)) * cos(2 pi u2).
     * 1 - u1 lies in (0, 1], so the logarithm is finite. */
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = tgc_philox_uniform(seed, counter);
    double u2 = tgc_philox_uniform(seed, counter | (UINT64_C(1) << 63));
    double r = sqrt(-2.0 * log(1.0 - u1));
    return (float)(r * cos(two_pi * u2));
}

/* The stream is one (seed, offset) pair: a draw must never pair a seed with offsets reserved
 * under another (a tgc_rng_seed on one thread between another thread's seed read and its
 * reservation would repeat bits), so both move together under one lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_seed = TGC_RNG_DEFAULT_SEED;
static uint64_t g_offset = 0;

void tgc_rng_seed(uint64_t seed)
{
    pthread_mutex_lock(&g_lock);
    g_seed = seed;
    g_offset = 0;
    pthread_mutex_unlock(&g_lock);
}

uint64_t tgc_rng_current_seed(void)
{
    pthread_mutex_lock(&g_lock);
    uint64_t seed = g_seed;
    pthread_mutex_unlock(&g_lock);
    return seed;
}

uint64_t tgc_rng_draw(uint64_t n, uint64_t *seed)
{
    pthread_mutex_lock(&g_lock);
    uint64_t base = g_offset;
    g_offset += n;
    if (seed)
        *seed = g_seed;
    pthread_mutex_unlock(&g_lock);
    return base;
}

uint64_t tgc_rng_reserve(uint64_t n)
{
    return tgc_rng_draw(n, NULL);
}
