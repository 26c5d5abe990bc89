/* Seeded random numbers for tests and fakes: splitmix64 (a 64-bit counter passed through a fixed
 * mixing function), so a seed names the same stream on every machine and every run. The state is
 * the caller's (one per stream); a state of 0 is a valid seed. Header-only.
 *
 *     uint64_t s = 42;
 *     double u = prs_test_rng_unif(&s);   (uniform in [0, 1)) */
#ifndef PRS_TESTS_RNG_H
#define PRS_TESTS_RNG_H

#include <stdint.h>

/* The next 64 random bits of the stream in *s. */
static inline uint64_t prs_test_rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [0, 1): the top 53 bits. */
static inline double prs_test_rng_unif(uint64_t *s)
{
    return (double)(prs_test_rng_next(s) >> 11) * 0x1.0p-53;
}

#endif
