/* A job's power cap at run time (docs/server.md, 'Power caps').
 *
 * The cap is watts per job, split evenly across its dp pipelines, and held on the 1 s peak of
 * each pipeline's power (perseus/power.h: the sum over its stages * tp GPUs). The plan a cap
 * allows a pipeline is the fastest frontier plan whose peak is within cap / dp, or the plan of
 * least peak power when none is (the cap is then infeasible, and the status says so). Every
 * plan's power is evaluated once from the job's profile, the first time a cap needs it.
 *
 * These functions see only the frontier, the profile and the powers, never the job, so that the
 * job (job.c) depends on them and not the other way round. */
#ifndef PRS_SERVER_POWERCAP_JOB_H
#define PRS_SERVER_POWERCAP_JOB_H

#include <stddef.h>

#include <jansson.h>

#include "perseus/planner.h"

/* Every frontier plan's average and 1 s peak power per pipeline; empty (NULL) until needed. */
typedef struct plan_powers {
    double *avg_w, *peak_w;
    size_t n;
} plan_powers;

/* Evaluate every plan of f on profile (pipeline pipe, tp GPUs per stage; a plan has
 * pipe->stages * ops_per_stage clocks), once: 0 when done or already done, -1 when f or profile
 * is NULL or an evaluation failed (the cap then has no effect). */
int plan_powers_prepare(plan_powers *pw, const prs_frontier *f, const prs_profile *profile,
                        const prs_pipeline *pipe, int tp, int ops_per_stage);
/* Forget the evaluated powers (the frontier changed). */
void plan_powers_clear(plan_powers *pw);

/* The plan a cap of cap_w watts per pipeline allows (-1 when cap_w <= 0 or the powers are not
 * known); *feasible (may be NULL) gets 0 when no plan holds the cap. */
long plan_powers_cap_plan(const plan_powers *pw, const prs_frontier *f, double cap_w,
                          int *feasible);

/* Of two frontier plans (-1: none), the slower one. */
long frontier_slower_plan(const prs_frontier *f, long a, long b);

/* Status views: a job cap of cap_w watts (0: none) over dp pipelines as {"cap_w",
 * "per_pipeline_w", "on", "window_s", "plan_id", "feasible"}, and a plan's {"avg_w", "peak_w"}
 * (null when not known). */
json_t *plan_powers_cap_json(const plan_powers *pw, const prs_frontier *f, double cap_w, int dp);
json_t *plan_powers_json(const plan_powers *pw, long plan);

#endif
