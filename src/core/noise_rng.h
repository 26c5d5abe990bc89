/* The seeded random numbers of the noise model and the shape oracle (src/core/noise_rng.c):
 * splitmix64 (a 64-bit counter through a fixed mixing function) gives uniform doubles in (0, 1);
 * Box-Muller turns pairs of them into standard normals, clipped to +-PRS__RNG_CLIP_SD so a
 * measurement stays positive. Module prefix prs__rng_. */
#ifndef PRS_NOISE_RNG_H
#define PRS_NOISE_RNG_H

#include <stdint.h>

#define PRS__RNG_CLIP_SD 4.0

typedef struct prs__rng {
    uint64_t state;
    int have_spare;
    double spare;
} prs__rng;

/* A generator started from seed. */
prs__rng prs__rng_seeded(uint64_t seed);

/* Uniform in (0, 1): 53 random bits, never 0. */
double prs__rng_uniform(prs__rng *r);

/* Standard normal, clipped to +-PRS__RNG_CLIP_SD (both Box-Muller values are used). */
double prs__rng_normal(prs__rng *r);

#endif
