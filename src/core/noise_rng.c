/* Seeded random numbers for noisy profiles (noise_rng.h). */
#include <math.h>

#include "noise_rng.h"

#define TWO_PI 6.283185307179586

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

prs__rng prs__rng_seeded(uint64_t seed)
{
    prs__rng r = {seed, 0, 0};
    return r;
}

double prs__rng_uniform(prs__rng *r)
{
    return ((double)(splitmix64(&r->state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double prs__rng_normal(prs__rng *r)
{
    double z;
    if (r->have_spare) {
        r->have_spare = 0;
        z = r->spare;
    } else {
        double u = prs__rng_uniform(r), v = prs__rng_uniform(r);
        double rad = sqrt(-2.0 * log(u));
        r->spare = rad * sin(TWO_PI * v);
        r->have_spare = 1;
        z = rad * cos(TWO_PI * v);
    }
    return z > PRS__RNG_CLIP_SD ? PRS__RNG_CLIP_SD : z < -PRS__RNG_CLIP_SD ? -PRS__RNG_CLIP_SD : z;
}
