/* The measurement model (include/perseus/noise.h, docs/noise.md): a noisy copy of a true profile.
 *
 * Random numbers come from noise_rng.h (splitmix64, Box-Muller). Draws are taken in a
 * fixed order that does not depend on the model's magnitudes (every row draws its repeats' time
 * and energy normals and counter phases even when a magnitude is 0), so one seed gives the same
 * normals at every jitter level and levels differ only in scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/noise.h"

#include "noise_rng.h"

#define MAX_CLOCKS 4096 /* distinct clocks with their own bias */

static int bad_fraction(double x)
{
    return !isfinite(x) || x < 0 || x > PRS_NOISE_MAX_JITTER;
}

int prs_noise_model_check(const prs_noise_model *m, prs_error *err)
{
    if (!m) return prs_error_set(err, PRS_EINVAL, "noise model: NULL");
    if (bad_fraction(m->time_jitter))
        return prs_error_set(err, PRS_EINVAL, "noise model: time jitter must be in [0, %g]",
                             PRS_NOISE_MAX_JITTER);
    if (bad_fraction(m->energy_jitter))
        return prs_error_set(err, PRS_EINVAL, "noise model: energy jitter must be in [0, %g]",
                             PRS_NOISE_MAX_JITTER);
    if (bad_fraction(m->clock_bias))
        return prs_error_set(err, PRS_EINVAL, "noise model: clock bias must be in [0, %g]",
                             PRS_NOISE_MAX_JITTER);
    if (m->repeats < 1 || m->repeats > PRS_NOISE_MAX_REPEATS)
        return prs_error_set(err, PRS_EINVAL, "noise model: repeats must be in 1..%d",
                             PRS_NOISE_MAX_REPEATS);
    if (!isfinite(m->refresh_s) || m->refresh_s < 0 || m->refresh_s > 10)
        return prs_error_set(err, PRS_EINVAL,
                             "noise model: counter refresh period must be in [0, 10] s");
    return 0;
}

/* Per-clock bias factors: clocks[] distinct, in order of first appearance. */
typedef struct bias_table {
    int clocks[MAX_CLOCKS];
    double time[MAX_CLOCKS], energy[MAX_CLOCKS];
    int n;
} bias_table;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Clocks sorted ascending, each with its draws: the same clock gets the same factors whatever
 * the row order. */
static int bias_build(const prs_profile_row *rows, size_t n, const prs_noise_model *m, prs__rng *r,
                      bias_table *b, prs_error *err)
{
    b->n = 0;
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (int k = 0; k < b->n && !seen; k++)
            seen = b->clocks[k] == rows[i].freq_mhz;
        if (seen) continue;
        if (b->n == MAX_CLOCKS)
            return prs_error_set(err, PRS_EINVAL, "noise model: more than %d distinct clocks",
                                 MAX_CLOCKS);
        b->clocks[b->n++] = rows[i].freq_mhz;
    }
    qsort(b->clocks, (size_t)b->n, sizeof b->clocks[0], cmp_int);
    for (int k = 0; k < b->n; k++) {
        b->time[k] = 1.0 + m->clock_bias * prs__rng_normal(r);
        b->energy[k] = 1.0 + m->clock_bias * prs__rng_normal(r);
    }
    return 0;
}

static int bias_index(const bias_table *b, int freq)
{
    const int *hit = bsearch(&freq, b->clocks, (size_t)b->n, sizeof freq, cmp_int);
    return hit ? (int)(hit - b->clocks) : 0;
}

/* One energy measurement of a computation taking time t (seconds) at power e / t, with the
 * counter stepping every q seconds from a random phase. */
static double counter_read(double t, double e, double q, double phase_u)
{
    if (q <= 0) return e;
    double k = ceil(q / t);
    double window = k * t, phase = phase_u * q;
    double steps = floor((phase + window) / q) - floor(phase / q);
    double measured = steps * q * (e / t) / k;
    return measured > 0 ? measured : e * 1e-6; /* never zero: the profile refuses it */
}

static void measure_row(const prs_profile_row *in, const prs_noise_model *m, double tb, double eb,
                        prs__rng *r, prs_profile_row *out)
{
    double tsum = 0, esum = 0;
    for (int k = 0; k < m->repeats; k++) {
        double zt = prs__rng_normal(r), ze = prs__rng_normal(r), ph = prs__rng_uniform(r);
        double t = in->time_s * tb * (1.0 + m->time_jitter * zt);
        double e = in->energy_j * eb * (1.0 + m->energy_jitter * ze);
        tsum += t;
        esum += counter_read(t, e, m->refresh_s, ph);
    }
    *out = *in;
    out->time_s = tsum / m->repeats;
    out->energy_j = esum / m->repeats;
    out->line = 0;
}

int prs_noise_apply(const prs_profile *truth, const prs_noise_model *m, uint64_t seed,
                    prs_profile **out, prs_error *err)
{
    if (!out) return prs_error_set(err, PRS_EINVAL, "noise: NULL output");
    *out = NULL;
    if (!truth) return prs_error_set(err, PRS_EINVAL, "noise: NULL profile");
    int rc = prs_noise_model_check(m, err);
    if (rc) return rc;
    bias_table *b = malloc(sizeof *b);
    prs_profile *p = prs_profile_new();
    if (!b || !p) {
        free(b);
        prs_profile_free(p);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    prs__rng r = prs__rng_seeded(seed);
    size_t n = prs_profile_nrows(truth);
    const prs_profile_row *rows = prs_profile_rows(truth);
    rc = bias_build(rows, n, m, &r, b, err);
    for (size_t i = 0; i < n && !rc; i++) {
        int k = bias_index(b, rows[i].freq_mhz);
        prs_profile_row row;
        measure_row(&rows[i], m, b->time[k], b->energy[k], &r, &row);
        rc = prs_profile_add(p, &row, err);
    }
    free(b);
    if (rc) {
        prs_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
