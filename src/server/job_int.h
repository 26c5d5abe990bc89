/* Calls between the files of the job module: the state machine and its requests (job.c), the
 * profiling rounds (job_profiling.c), the reports of running jobs and straggler detection
 * (job_straggler.c) and the read-only views (job_view.c). Not for the server's other parts,
 * which use job.h. Errors: the job module's api_err convention (job.h). */
#ifndef PRS_SERVER_JOB_INT_H
#define PRS_SERVER_JOB_INT_H

#include "job_state.h"

/* ---- profiling rounds (job_profiling.c) ---- */

/* Iterations the current round asks of each rank: warm-up, k, and any extension. */
int job_round_need(const job *j);
/* Whether rank's last counted iteration of the current round came from an attribution fit short
 * of the criterion the rank aims for (the round then asks for more iterations). */
int job_fit_unsettled(const job *j, int rank);
/* Recount the ranks that have posted what the current round asks (ranks_done). */
void job_count_done_ranks(job *j);
/* Whether a clock whose precision reached se_pct after kept iterations gets k more: the spec's
 * target is not met and max_iterations_per_clock allows them. */
int job_wants_more(const job *j, double se_pct, int kept);
/* The job has its profile: measure the blocking power and plan (*action JOB_ACT_PLAN), or fail
 * when there is no blocking power to plan with. */
int job_enter_planning(job *j, store *st, int *action, api_err *e);
/* Results posted while profiling: counted against the round, which ends when every rank has
 * warm-up + k iterations. */
int job_results_profiling(job *j, store *st, const req_results *r, int *action, api_err *e);

/* ---- reports of planning and running jobs, straggler detection (job_straggler.c) ---- */

/* Results posted while planning or running: folded into the rank's pipeline; while running they
 * feed the straggler detector, whose findings change the plan rule (job_assign.h). */
int job_results_running(job *j, store *st, const req_results *r, api_err *e);
/* A straggler kind's name (STRAGGLER_*): "none", "explicit", "automatic". */
const char *job_straggler_name(int kind);
/* Log a change of pipeline d's straggler state (why: "reported", "detected", ...). */
void job_log_straggler(const job *j, int d, const char *why);

#endif
