/* The fastest plan a power cap allows, beside what a uniform knob gives at the same cap
 * (docs/power.md, 'Power caps').
 *
 * A cap is watts per pipeline, held either on the average power of an iteration or on its peak
 * over a sliding window (perseus/power.h). Three strategies meet it:
 *   perseus      the fastest plan whose power is within the cap (ties: least energy) among the
 *                frontier's plans and, for caps below the power of the frontier's least-energy
 *                plan, plans slower than the frontier's with their slack reclaimed: every
 *                computation at clock f (one plan per uniform clock), or at the power limit's
 *                clock below, then each in turn lowered to the clock of least effective energy
 *                that fits its slack (the iteration keeps its length, at less power);
 *   uniform      the fastest single clock for every computation within the cap (ties: least
 *                energy), among the clocks profiled for every computation;
 *   power_limit  a per-GPU power limit of cap / GPUs: a GPU's limiter lowers the clock only as
 *                far as the running computation needs, so every computation runs at the
 *                highest profiled clock whose power (energy over quantized duration) is within
 *                the limit, the lowest profiled clock when none is.
 * Every plan is judged by the exact evaluation. A pipeline is stages tensor-parallel groups of
 * tp GPUs: its power is tp times the profile's (per GPU of a group), and the power limit is
 * cap / (stages * tp) per GPU. */
#ifndef PERSEUS_POWERCAP_H
#define PERSEUS_POWERCAP_H

#include "perseus/export.h"

#include <stddef.h>

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the cap holds: the average power of an iteration, or the peak over the window. */
typedef enum prs_cap_on { PRS_CAP_AVG = 0, PRS_CAP_PEAK = 1 } prs_cap_on;

typedef enum prs_cap_strategy {
    PRS_CAP_PERSEUS = 0,
    PRS_CAP_UNIFORM = 1,
    PRS_CAP_POWER_LIMIT = 2,
    PRS_CAP_NSTRATEGIES = 3
} prs_cap_strategy;

/* "avg", "peak"; "perseus", "uniform", "power_limit". parse: PRS_EINVAL for other names. */
PRS_API const char *prs_cap_on_name(prs_cap_on on);
PRS_API int prs_cap_on_parse(const char *name, prs_cap_on *out);
PRS_API const char *prs_cap_strategy_name(prs_cap_strategy s);

/* One strategy's plan at a cap. Figures per pipeline (tp-scaled). */
typedef struct prs_cap_choice {
    int feasible;            /* 1: its plan holds the cap; 0: none does (figures: its best try) */
    double time_s;           /* iteration time (evaluated) */
    double throughput_per_s; /* iterations per second, 1 / time_s */
    double energy_j;         /* iteration energy */
    double avg_power_w, peak_power_w;
    long index;         /* perseus: the frontier point; -1 otherwise */
    int freq_mhz;       /* uniform: its clock; perseus with index -1: the clock f reclaimed */
    double gpu_limit_w; /* power_limit, and perseus with index -1 and freq_mhz 0: the limit of
                           every GPU (reclaimed for perseus); 0 otherwise */
} prs_cap_choice;

typedef struct prs_cap_result {
    double cap_w;
    prs_cap_on on;
    double window_s;
    prs_cap_choice s[PRS_CAP_NSTRATEGIES];
} prs_cap_result;

typedef struct prs_powercap prs_powercap;

/* Evaluate the power of every plan of f (and of every uniform clock) against profile, once.
 * PRS_EINVAL for tp < 1, a bad window, or a profile that does not cover f's pipeline. */
PRS_API int prs_powercap_open(const prs_profile *profile, const prs_frontier *f, int tp,
                              double window_s, prs_powercap **out, prs_error *err);
PRS_API void prs_powercap_free(prs_powercap *pc);

/* The power (on, per pipeline) of the all-max plan, and the least of the frontier's plans: the
 * range a sweep of caps covers. */
PRS_API void prs_powercap_range(const prs_powercap *pc, prs_cap_on on, double *allmax_w,
                                double *lowest_w);

/* Every strategy's plan at cap_w (> 0, finite). PRS_EINVAL for a bad cap. */
PRS_API int prs_powercap_choose(prs_powercap *pc, double cap_w, prs_cap_on on, prs_cap_result *out,
                                prs_error *err);

/* The clocks (stages * ops_per_stage) of strategy s's plan in r, from prs_powercap_choose. */
PRS_API int prs_powercap_plan(prs_powercap *pc, const prs_cap_result *r, prs_cap_strategy s,
                              int *clocks_mhz, prs_error *err);

/* Throughput of a over b (a.throughput / b.throughput), NaN unless both are feasible. */
PRS_API double prs_cap_ratio(const prs_cap_choice *a, const prs_cap_choice *b);

#ifdef __cplusplus
}
#endif
#endif
