/* The power of a plan: what a pipeline draws over one iteration, by the exact evaluation
 * (perseus/evaluate.h; docs/power.md).
 *
 * Each computation draws its measured energy spread evenly over its quantized duration (the
 * times the evaluation lays it out with), and a GPU that does not compute draws the blocking
 * power. The pipeline's power at an instant is the sum over its GPUs, so the power over time is
 * a step function whose integral over the iteration is exactly the evaluated energy. A
 * computation whose quantized time is 0 units takes no time: its energy is a zero-width step
 * (an impulse) at its start.
 *
 * Iterations run back to back, so the power is periodic with the iteration time T. The peak
 * over a window of w seconds is the largest mean power of any w-second stretch of that periodic
 * signal: for w >= T a window holds floor(w / T) whole iterations plus the busiest stretch of
 * the remainder, so the peak falls towards the average power as w grows. Figures are per GPU of
 * a tensor-parallel group, as the profile's energies are; multiply by tp for a pipeline of
 * tensor-parallel groups. */
#ifndef PERSEUS_POWER_H
#define PERSEUS_POWER_H

#include "perseus/export.h"

#include <stddef.h>

#include "perseus/error.h"
#include "perseus/evaluate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default window of the peak power, seconds. */
#define PRS_POWER_WINDOW_S 1.0

/* One step of the power over time: the pipeline draws power_w from start_s to end_s (seconds
 * from the start of the iteration). energy_j = power_w * (end_s - start_s), except for a
 * zero-width step (start_s == end_s), which carries an impulse of energy_j (power_w is 0). */
typedef struct prs_power_step {
    double start_s, end_s;
    double power_w;
    double energy_j;
} prs_power_step;

/* The power figures of one plan. */
typedef struct prs_plan_power {
    double time_s;       /* iteration time T (evaluated) */
    double energy_j;     /* iteration energy (evaluated): the integral of the steps */
    double avg_power_w;  /* energy_j / time_s */
    double window_s;     /* the window the peak is over */
    double peak_power_w; /* largest mean power over any window_s-long stretch, back to back */
    double peak_start_s; /* where in the iteration (0 <= . < T) that stretch begins */
    double max_power_w;  /* largest step power (the instantaneous peak, impulses aside) */
} prs_plan_power;

/* Peak mean power over a window of window_s seconds of the periodic signal steps[0..n) (sorted,
 * contiguous, from 0 to the period steps[n-1].end_s > 0), repeated back to back. Windows are
 * closed: an impulse on either edge counts. *start_s (may be NULL) gets where in the period a
 * peak window begins. Exact at both extremes: a window shorter than every step gives the
 * largest step's power, a window of many periods the average. PRS_EINVAL for window_s not
 * finite and > 0, steps that are not sorted, contiguous and non-negative from 0, or a peak that
 * is not a finite number of watts (an impulse over a window that short). */
PRS_API int prs_power_peak(const prs_power_step *steps, size_t n, double window_s, double *peak_w,
                           double *start_s, prs_error *err);

/* Evaluate a plan (as prs_eval_run) and its power: figures into *out; with steps non-NULL,
 * *steps gets the power over one iteration (malloc'ed, free with free()) and *nsteps its length
 * (at most 4 * computations + 1 steps; adjacent steps of the same power are merged).
 * Fails as prs_eval_lookup, or PRS_EINVAL for a bad window. */
PRS_API int prs_eval_power(prs_eval *ev, const int *clocks_mhz, double window_s,
                           prs_plan_power *out, prs_power_step **steps, size_t *nsteps,
                           prs_error *err);

/* One-shot prs_eval_power against a profile (opens and closes a context). */
PRS_API int prs_plan_power_of(const prs_profile *profile, const prs_pipeline *pipe,
                              const int *clocks_mhz, double window_s, prs_plan_power *out,
                              prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
