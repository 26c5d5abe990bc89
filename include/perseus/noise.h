/* Noisy profiles (docs/noise.md): a model of how a profiler measures, to draw noisy copies of a
 * true profile; the reconciliation the robust planner applies to measured profiles before
 * planning; and the study that plans on noisy copies and judges every plan on the truth.
 *
 * Random numbers come from a seeded generator of our own (splitmix64 and Box-Muller), so a
 * (profile, model, seed) triple gives the same noisy profile on every machine. */
#ifndef PERSEUS_NOISE_H
#define PERSEUS_NOISE_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The measurement model ---- */

/* How one (stage, instruction, clock) row is measured. Every measurement multiplies the true time
 * by 1 + time_jitter * z and the true energy by 1 + energy_jitter * z' (z, z' standard normal,
 * clipped to +-4); repeats such measurements are averaged. With refresh_s > 0 the energy counter
 * only moves every refresh_s seconds: a measurement spans k = ceil(refresh_s / time) back-to-back
 * runs starting at a uniformly random phase of the counter, reads the counter's whole steps over
 * that window, and divides by k. With clock_bias > 0 every clock gets one systematic factor for
 * time and one for energy, 1 + clock_bias * z, shared by every stage and instruction measured at
 * that clock and not reduced by repeating. */
typedef struct prs_noise_model {
    double time_jitter;   /* relative standard deviation of one time measurement, [0, 0.2] */
    double energy_jitter; /* the same for energy, [0, 0.2] */
    int repeats;          /* measurements averaged per row, 1 .. PRS_NOISE_MAX_REPEATS */
    double refresh_s;     /* energy counter refresh period; 0: an exact counter */
    double clock_bias;    /* relative standard deviation of the per-clock bias, [0, 0.2] */
} prs_noise_model;

#define PRS_NOISE_MAX_JITTER 0.2
#define PRS_NOISE_MAX_REPEATS 1000

/* PRS_EINVAL, naming the field, when a field is out of range or not finite. */
PRS_API int prs_noise_model_check(const prs_noise_model *m, prs_error *err);

/* A noisy copy of truth, measured as m says, with the random numbers of seed. Rows keep their
 * order; the same seed draws the same standard normals whatever the jitter, so levels of one seed
 * differ only in scale. *out is new (prs_profile_free). */
PRS_API int prs_noise_apply(const prs_profile *truth, const prs_noise_model *m, uint64_t seed,
                            prs_profile **out, prs_error *err);

/* ---- The shape oracle: a bound on what measuring can tell ---- */

/* What a planner would plan on if it knew every computation type's true curve over the clocks
 * and which types are the same, and measured only each curve's scale (docs/noise.md): the truth
 * with, per group of types whose true rows are identical (one instruction, the same clocks,
 * times and energies), one time factor 1 + time_jitter * z / sqrt(repeats * rows of the group)
 * and one energy factor likewise (z standard normal per group: the precision of every
 * measurement of the group averaged); then every row but a type's fastest (least true time; on
 * a tie the higher clock) takes margin (a fraction) more time, a margin for slack. Only m's
 * jitters and repeats are used: a counter refresh or a clock bias is refused (PRS_EINVAL), and
 * so is a margin outside [0, PRS_NOISE_ORACLE_MAX_MARGIN] (prs_noise_oracle_check). Rows keep
 * their order; *out is new (prs_profile_free). */
#define PRS_NOISE_ORACLE_MAX_MARGIN 0.1
PRS_API int prs_noise_oracle_apply(const prs_profile *truth, const prs_noise_model *m,
                                   double margin, uint64_t seed, prs_profile **out, prs_error *err);
/* PRS_EINVAL, naming what, when m and margin are not an oracle's (above); else 0. */
PRS_API int prs_noise_oracle_check(const prs_noise_model *m, double margin, prs_error *err);

/* ---- Reconciliation: what the robust planner plans on ---- */

/* First, the types of one instruction measured over the same clocks are pooled where they share
 * a shape (each a scale of one curve over the clocks; a type whose residuals show a curve of its
 * own keeps its data; types whose scales the noise cannot tell apart share one). Then per
 * computation type (stage, instruction), over its clocks: time is fitted by least squares under
 * "non-increasing and convex in the clock", energy under "convex in the clock"; points further than
 * PRS_RECONCILE_OUTLIER robust standard deviations from the first fit are replaced by the fit and
 * the fit redone; where a (pooled, cleaned) value lies further from the fit than
 * PRS_RECONCILE_KEEP_SD noises of one measurement, the fit keeps the part beyond. The time of
 * every clock but the type's fastest then gets the margin margin_sd *
 * (the relative standard error se of the type's fitted times), so that plans which slow a
 * computation into believed slack keep the promised iteration time when the measurement was
 * optimistic, and (margin_sd > 0) is raised to the fastest clock's time times 1 +
 * PRS_RECONCILE_TIE_SD * se (clocks the measurements cannot tell apart from the fastest are not
 * taken for as fast). Types with fewer than 3 or more than PRS_RECONCILE_MAX_CLOCKS clocks are
 * copied. *out is new; se_pct, when non-NULL, receives the median relative standard error of the
 * fitted types' times in percent (0 when none). */
#define PRS_RECONCILE_OUTLIER 4.0
/* A fitted value moves toward its (pooled, cleaned) measurement by the part of their difference
 * beyond this many relative noises of one measurement, where the pool of the instruction's types
 * gives that noise: the shapes hold on real GPUs only approximately. */
#define PRS_RECONCILE_KEEP_SD 4.0
#define PRS_RECONCILE_MARGIN_SD 0.5
#define PRS_RECONCILE_TIE_SD 1.0
#define PRS_RECONCILE_MAX_CLOCKS 128
PRS_API int prs_profile_reconcile(const prs_profile *measured, double margin_sd, prs_profile **out,
                                  double *se_pct, prs_error *err);

/* The robust planner: prs_profile_reconcile with PRS_RECONCILE_MARGIN_SD, prs_plan on the
 * result, then the time budget's margin: the points faster than the fastest evaluated time times
 * 1 + prs_robust_budget(se) (se: the median standard error of the fitted times) are dropped, unless
 * none would be left. The frontier's figures are those of the reconciled profile; *fitted (may be
 * NULL) receives that profile. */
#define PRS_ROBUST_BUDGET_SE 0.5
#define PRS_ROBUST_BUDGET_MAX 0.003
PRS_API int prs_plan_robust(const prs_profile *measured, const prs_plan_opts *opts,
                            prs_frontier **out, prs_profile **fitted, prs_error *err);
/* The budget's relative margin for a median standard error of se_pct percent:
 * min(PRS_ROBUST_BUDGET_MAX, PRS_ROBUST_BUDGET_SE * se_pct / 100). */
PRS_API double prs_robust_budget(double se_pct);

/* The robust planner's two trade-offs between a promised time that holds and energy, for
 * studying them (docs/noise.md); prs_plan_robust uses the defaults. */
typedef struct prs_robust_opts {
    double margin_sd;  /* slack margin in standard errors, [0, 100]; PRS_RECONCILE_MARGIN_SD */
    double budget_max; /* cap of the budget's relative margin, [0, 0.1]; PRS_ROBUST_BUDGET_MAX */
} prs_robust_opts;
PRS_API void prs_robust_opts_default(prs_robust_opts *o);
/* prs_plan_robust with these settings (NULL: the defaults); PRS_EINVAL when out of range. */
PRS_API int prs_plan_robust_with(const prs_profile *measured, const prs_plan_opts *opts,
                                 const prs_robust_opts *robust, prs_frontier **out,
                                 prs_profile **fitted, prs_error *err);

/* ---- The study ---- */

/* One plan chosen from a frontier planned on a noisy profile, judged on the truth. */
typedef struct prs_noise_outcome {
    double overshoot_pct;           /* fastest plan: 100 (t / true T_min - 1) */
    double regret_pct;              /* its energy over the true-profile plan's, both until the
                                       later of the two times */
    double promised_saving_pct;     /* intrinsic saving against all-max, on the planned profile */
    double obtained_saving_pct;     /* the same plan and all-max evaluated on the truth */
    double straggler_overshoot_pct; /* lookup at T' = s T_min: 100 max(0, t - T') / T' */
    double straggler_regret_pct;    /* its energy + blocking until max(t, T') over the true
                                       lookup plan's, same horizon */
    double waste_pct; /* fastest plan: its energy over the least of the true-profile frontier's
                         plans finishing within h = max(t, true T_min), all charged blocking
                         power until h: what it spends that the same planner with exact
                         measurements would not at that speed (regret less the trade of time) */
} prs_noise_outcome;

/* Medians and maxima over seeds. */
typedef struct prs_noise_summary {
    double overshoot_median_pct, overshoot_max_pct;
    double regret_median_pct, regret_max_pct;
    double promised_saving_median_pct, obtained_saving_median_pct;
    double straggler_overshoot_median_pct, straggler_overshoot_max_pct;
    double straggler_regret_median_pct, straggler_regret_max_pct;
    double waste_median_pct, waste_max_pct;
} prs_noise_summary;

enum { PRS_NOISE_BASELINE = 0, PRS_NOISE_ROBUST = 1, PRS_NOISE_NPLANNERS = 2 };

/* The most threads a noise study runs on. */
#define PRS_NOISE_MAX_THREADS 256

/* The truth a study compares with, for one pipeline and cost model. */
typedef struct prs_noise_truth {
    double t_min_s;          /* the true-profile frontier's fastest plan, evaluated */
    double energy_j;         /* its energy */
    double allmax_energy_j;  /* all-max, evaluated */
    double saving_pct;       /* its intrinsic saving */
    double straggler_time_s; /* T' = straggler * t_min_s */
    double straggler_plan_s; /* the true lookup plan at T': time and energy */
    double straggler_energy_j;
} prs_noise_truth;

typedef struct prs_noise_study_opts {
    prs_plan_opts plan;    /* pipeline and cost model (callbacks ignored) */
    prs_noise_model model; /* the measurement model of every seed */
    int seeds;             /* >= 1; seed k uses seed_base + k */
    uint64_t seed_base;
    double straggler;       /* s >= 1 for the straggler lookup */
    prs_robust_opts robust; /* the robust planner's settings (prs_robust_opts_default) */
    int threads;            /* seeds run on this many threads (0 or 1: the caller's only) */
    /* When not NULL: called after each seed with the seeds done so far and o->seeds, one call
     * at a time (from whichever thread finished the seed); non-zero cancels the study, which
     * then fails with PRS_ECANCELED. */
    int (*progress)(void *ud, long done, long total);
    void *ud;
    /* The time unit (s) the chosen plans are judged in on the truth: 0 takes the planning unit
     * (plan.pipe.unit_time_s); a finer one, at most the planning unit, judges a computation by
     * its measured time rather than by that time cut down to whole planning units, as a GPU
     * runs it (docs/noise.md, 'Judging at a finer unit'). */
    double truth_unit_s;
    /* Non-zero: every seed is drawn by the shape oracle (prs_noise_oracle_apply, with
     * oracle_margin) instead of measured with model's noise. */
    int oracle;
    double oracle_margin;
} prs_noise_study_opts;

/* Plan truth once (baseline planner) and on seeds noisy copies with both planners; fill
 * truth_out, and outcomes[planner * seeds + k] and summary[planner] when non-NULL. The figures
 * do not depend on o->threads (each seed's are its own); on failure the error is the one of the
 * first seed that failed. */
PRS_API int prs_noise_study(const prs_profile *truth, const prs_noise_study_opts *o,
                            prs_noise_truth *truth_out, prs_noise_outcome *outcomes,
                            prs_noise_summary summary[PRS_NOISE_NPLANNERS], prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
