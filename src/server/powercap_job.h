/* A job's power cap at run time (docs/server.md, 'Power caps').
 *
 * The cap is watts per job, split evenly across its dp pipelines, and held on the 1 s peak of
 * each pipeline's power (perseus/power.h: the sum over its stages * tp GPUs). The plan a cap
 * allows a pipeline is the fastest frontier plan whose peak is within cap / dp, or the plan of
 * least peak power when none is (the cap is then infeasible, and the status says so). Every
 * plan's power is evaluated once from the job's profile, the first time a cap needs it. */
#ifndef PRS_SERVER_POWERCAP_JOB_H
#define PRS_SERVER_POWERCAP_JOB_H

#include <jansson.h>

#include "job.h"

/* Evaluate every frontier plan's power (once per frontier). 0, or -1 when there is no frontier
 * or profile or an evaluation failed (the cap then has no effect). */
int job_power_prepare(job *j);
/* Forget the evaluated powers (the frontier changed). */
void job_power_clear(job *j);

/* The plan the cap allows every pipeline, -1 when there is no cap or the powers are not known;
 * *feasible (may be NULL) gets 0 when no plan holds the cap. */
long job_cap_plan(const job *j, int *feasible);

/* Of two frontier plans (-1: none), the slower one. */
long job_slower_plan(const job *j, long a, long b);

/* Status views: {"cap_w", "per_pipeline_w", "on", "window_s", "plan_id", "feasible"} (cap_w
 * null when there is none), and a plan's {"avg_w", "peak_w"} (null when not known). */
json_t *job_power_cap_json(const job *j);
json_t *job_plan_power_json(const job *j, long plan);

#endif
