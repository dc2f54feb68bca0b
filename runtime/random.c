/* The seeded generator behind --seed (docs/FORMAT.md §3).
 *
 * Every input and param that is not given a value is filled from its own stream, chosen by the
 * seed and the value's name, so adding an input to a graph does not change the values of the
 * others, and every backend (and the oracle in the tests) sees the same numbers. The stream is
 * xoshiro256** seeded through splitmix64; both use only 64-bit integer arithmetic, and floats
 * are made from the integers with exact operations and the project's own rounding
 * (ir/dtype.c), so the values are the same on every platform and compiler.
 *
 * Floats are uniform in [-1, 1): f32 values on the grid k * 2^-23 - 1 (24 random bits, exact in
 * f32); f16 and bf16 a 53-bit uniform double rounded to the dtype, where a draw that rounds up
 * to 1.0 is drawn again, so every value is strictly below 1. i32 values are uniform in 0..9,
 * bools fair coin flips.
 */
#include "runtime/runtime.h"
#include <stdlib.h>

#include <string.h>

typedef struct {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void rng_seed(rng *r, uint64_t seed, const char *name)
{
    uint64_t h = mc_hash64(name ? name : "", name ? strlen(name) : 0, 0);
    uint64_t x = seed ^ rotl(h, 17) ^ 0x6D696E6963ull; /* "minic" */
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void mc_fill_random(void *data, mc_dtype d, int64_t n, uint64_t seed, const char *name)
{
    rng r;
    rng_seed(&r, seed, name);
    for (int64_t i = 0; i < n; i++) {
        switch (d) {
        case MC_I32:
            /* (32 random bits * 10) >> 32: uniform enough, and integer-exact everywhere */
            mc_store_element(data, d, i, (double)(((rng_next(&r) >> 32) * 10) >> 32));
            break;
        case MC_BOOL: mc_store_element(data, d, i, (double)(rng_next(&r) >> 63)); break;
        case MC_F32:
            /* 24 random bits on a grid of 2^-23: every value is an f32 already, so there is
             * nothing to round (and filling a large input stays fast) */
            ((float *)data)[i] = (float)((double)(rng_next(&r) >> 40) * 0x1p-23 - 1.0);
            break;
        default: {
            double v;
            do /* 53 random bits: an exact double in [-1, 1), then the dtype's rounding */
                v = mc_round_to_dtype((double)(rng_next(&r) >> 11) * 0x1p-52 - 1.0, d);
            while (v >= 1.0);
            mc_store_element(data, d, i, v);
        }
        }
    }
}
