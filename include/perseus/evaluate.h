/* The evaluation context: one pipeline and one profile made ready for judging plans by what
 * their clocks really do (docs/planner.md, 'Evaluation').
 *
 * Opening checks the pipeline and the profile, builds the schedule DAG and the table of measured
 * (quantized time, energy) figures of every profiled clock, once. A context then evaluates any
 * number of plans without rebuilding anything: prs_evaluate_plan, prs_plan_timeline, the
 * emulator's baselines and the planner all go through it, so every figure comes from the same
 * accounting. Plans are flat arrays of stages * ops_per_stage clocks (perseus/planner.h).
 *
 * A context is not thread-safe (it keeps scratch arrays); open one per thread. */
#ifndef PERSEUS_EVALUATE_H
#define PERSEUS_EVALUATE_H

#include "perseus/export.h"

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct prs_eval prs_eval;

/* One profiled clock of a computation, with its measured figures. */
typedef struct prs_eval_clock {
    int freq_mhz;
    long units;      /* measured time quantized to units of tau, as the planner quantizes */
    double time_s;   /* measured time */
    double energy_j; /* measured energy */
} prs_eval_clock;

/* Check the pipeline (prs_pipeline_check) and that the profile covers its model chunks, then
 * build the context. The profile is read only during the call; the pipeline is copied. On
 * failure *out is NULL. */
PRS_API int prs_eval_open(const prs_profile *profile, const prs_pipeline *pipe, prs_eval **out,
                          prs_error *err);
PRS_API void prs_eval_close(prs_eval *ev);

/* Computations in a plan: stages * ops_per_stage. */
PRS_API int prs_eval_nops(const prs_eval *ev);
/* Profiled clocks of computation op (at least one), and the i-th of them, ascending frequency.
 * op and i must be in range. */
PRS_API int prs_eval_nclocks(const prs_eval *ev, int op);
PRS_API prs_eval_clock prs_eval_clock_at(const prs_eval *ev, int op, int i);
/* Index (for prs_eval_clock_at) of clock freq_mhz of computation op, or -1 if not profiled. */
PRS_API int prs_eval_find(const prs_eval *ev, int op, int freq_mhz);
/* Clocks profiled for every computation, ascending: at most cap into out; returns the count. */
PRS_API int prs_eval_common_clocks(const prs_eval *ev, int *out, int cap);

/* Look every clock of a plan up: idx[op] (may be NULL) gets its index for prs_eval_clock_at.
 * PRS_EINVAL, with a message naming the first computation whose clock is not profiled. */
PRS_API int prs_eval_lookup(const prs_eval *ev, const int *clocks_mhz, int *idx, prs_error *err);

/* Evaluate a plan: *time_s is the critical path of the quantized measured times, *energy_j the
 * measured energies plus blocking power while a stage does not compute,
 * sum(e) + P_block * (stages * T - sum(q)) * tau. ops (may be NULL) gets the timeline
 * (prs_plan_timeline). Fails as prs_eval_lookup. */
PRS_API int prs_eval_run(prs_eval *ev, const int *clocks_mhz, prs_timeline_op *ops, double *time_s,
                         double *energy_j, prs_error *err);

/* Per computation, the window it may occupy without lengthening the iteration under this plan:
 * its duration plus its total float (latest finish - earliest start), in units of tau, into
 * window_units[op]. Fails as prs_eval_lookup. */
PRS_API int prs_eval_windows(prs_eval *ev, const int *clocks_mhz, long *window_units,
                             prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
