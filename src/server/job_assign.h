/* Which plan each pipeline of a running job runs, and from which iteration (docs/server.md,
 * 'Stragglers and plan switches'). Internal to the job module (job.c).
 *
 * The job's plan rule is the slowest straggler's T', the plan the frontier lookup gives the other
 * pipelines for it, and the power cap's plan. It changes when a straggler is reported, cleared,
 * detected or recovers, and when the cap changes. Applying a new rule to every pipeline at once
 * would cost O(dp) work and O(dp) stored rows under the job's lock; instead each rule gets the
 * next number (its epoch) and is kept in a ring of JOB_RULES, and a pipeline applies the rules it
 * has not seen, in order, when it is next touched: a results post of one of its ranks, a
 * registration, a straggler change of its own. A reader applies them to a copy (job_pipe_view).
 * Nothing else changes a pipeline's plan state in between, so applying the rules late, one by
 * one, gives exactly what applying each at once would have given. Before the ring would drop a
 * rule that some pipeline has not applied, every pipeline applies all of them (one O(dp) sweep
 * per JOB_RULES - 1 rules). The rules are stored as they are made (one row each), and each
 * pipeline's row records the last rule it applied, so a restart resumes the same way.
 *
 * Errors: the job module's api_err convention (job.h). */
#ifndef PRS_SERVER_JOB_ASSIGN_H
#define PRS_SERVER_JOB_ASSIGN_H

#include "job_state.h"

/* Evaluated iteration time of frontier plan k (0 when there is none). */
double job_plan_time(const job *j, long k);
/* The plan pipeline p ran in iteration n (p has applied every rule). */
long job_plan_of(const job_pipe *p, long n);

/* Apply the rules pipeline p has not applied yet (p: the job's own or a copy). */
void job_catch_up(const job *j, job_pipe *p);
/* Pipeline d as it stands with every rule applied, into *out (the job is not changed). */
void job_pipe_view(const job *j, int d, job_pipe *out);
/* The clocks of plan id (stages * ops_per_stage, stage-major), or NULL when not decoded. Every
 * plan a rule or a pipeline names is decoded when the rule is made or the job loaded. */
const int *job_plan_clocks(const job *j, long id);
/* Drop every decoded plan (the frontier changes). */
void job_decoded_clear(job *j);

/* Announce pipeline p's current plan again from its newest iteration plus the lead (its ranks
 * restarted and count iterations from 0 again). */
void job_reannounce(const job *j, job_pipe *p);

/* Mark pipeline d a straggler of kind (STRAGGLER_EXPLICIT or _AUTO) at T' time_s, or not
 * (STRAGGLER_NONE). The caller applied d's rules first and makes the next rule after. */
void job_mark_straggler(job *j, int d, int kind, double time_s);

/* The running job starts: every pipeline gets the current rule's plan now. */
int job_assign_all(job *j, store *st, api_err *e);
/* Make the rule the current stragglers and cap call for; when it gives any pipeline another plan
 * than the last one did, it becomes the next epoch (stored, logged, the round bumped). d >= 0:
 * pipeline d's own straggler state changed, it applies the rule at once (and is stored). */
int job_rules_update(job *j, store *st, int d, api_err *e);
/* Pipeline d reported a newer iteration: a plan change held back behind a pending switch goes
 * out once that switch is behind every rank. */
int job_apply_deferred(job *j, store *st, int d, api_err *e);
/* After loading a running job (its rules loaded into the ring, epoch the newest one's, -1 when
 * none was stored): the straggler list, the decoded plans, and the plan changes that were held
 * back when the server stopped. 0, or -1 when out of memory. */
int job_assign_loaded(job *j);

/* The current rule as the answer to a straggler or cap change shows it: {epoch,
 * straggler_time_s, plan_id (the other pipelines'), straggler_plan_id, cap_plan_id, stragglers
 * (their dp)}; JSON null unless the job runs. O(stragglers), however many pipelines the job has.
 * Each pipeline takes its plan from the lead's iteration on (its schedule). */
json_t *job_rule_json(const job *j);

#endif
