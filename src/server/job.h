/* One training job and its state machine (docs/server.md):
 *
 *   registering --all ranks in--> profiling --sweep done--> planning --planner done--> running
 *        |                                                     ^                         |
 *        +---- profile uploaded (any time before running) -----+        complete --> done
 *        +---- frontier reused: all ranks in -------------------------------> running
 *   any phase --(planning fails, profile unusable)--> failed (with a reason)
 *
 * Every mutating call writes what it changes to the store; the caller wraps the call in a
 * transaction and commits before answering, or rolls back and reloads the job from the store
 * (job_load), so memory never runs ahead of the database. Calls are not thread-safe: the server
 * holds the job's lock (job.lock) around them, exclusively for the calls that take a store and
 * shared for the read-only views (schedule, status, frontier), which change nothing.
 *
 * Errors. The request calls (job_create, job_register, ...) answer with an api_err: the HTTP
 * status, a stable code ("wrong_phase") and a one-line message, the outermost layer the server
 * turns into a JSON error. Everything below them, and job_load, which answers no request, uses
 * the project convention: 0 or a negative PRS_E* code with details in a prs_error. Frontiers
 * travel to and from the store as plans.prs text in memory (prs_frontier_to_plans /
 * prs_frontier_from_plans); no file is involved. */
#ifndef PRS_SERVER_JOB_H
#define PRS_SERVER_JOB_H

#include "job_state.h"

/* A new job in the registering phase with the given id and token hash, written to the store.
 * If the spec names a model and allows reuse, and the store holds a frontier for the same
 * configuration (job_config_key), the job adopts that profile and frontier. */
int job_create(store *st, const job_spec *spec, const char *id, const uint8_t *token_hash,
               long long now_unix, job **out, api_err *e);
/* Load a job and everything it owns from the store (startup, or resync after a failed
 * transaction). *action is JOB_ACT_PLAN when the job was planning. */
int job_load(store *st, const store_job_row *row, job **out, int *action, prs_error *err);
void job_free(job *j);

/* Reuse key of a spec, hex SHA-256 into key (65 bytes); "" when the spec names no model or
 * turns reuse off. Same key = same model name, pipeline (stages, microbatches, tp, schedule,
 * virtual stages), clock list, profiling floor, unit time, blocking power and cost model. */
void job_config_key(const job_spec *spec, char key[2 * SECURE_SHA256_LEN + 1]);

/* Whether the job is planned with the robust planner (prs_plan_robust, docs/noise.md): for a
 * profile measured by this server's sweep; an uploaded or reused profile is planned as given. */
int job_plans_robust(const job *j);

int job_register(job *j, store *st, const req_rank *r, int *created, int *action, api_err *e);
/* Schedule of a rank as JSON text {phase, round, plan_id, clocks_mhz, ...} (malloc'd into
 * *text). Read-only: safe under a shared lock. Built by hand, not with jansson, because every
 * rank polls it. */
int job_schedule(const job *j, int rank, char **text, size_t *len, api_err *e);
int job_results(job *j, store *st, const req_results *r, int *action, api_err *e);
int job_upload_profile(job *j, store *st, const char *csv, size_t len, int *action, api_err *e);
/* The same with the profile parsed and checked against the job's stages already, and written as
 * the CSV text to store (job_profile_csv), both outside every lock; p is taken over in every
 * case, csv is the caller's. */
int job_install_profile(job *j, store *st, prs_profile *p, const char *csv, size_t len, int *action,
                        api_err *e);
int job_set_straggler(job *j, store *st, const req_straggler *r, api_err *e);
int job_clear_straggler(job *j, store *st, int dp, api_err *e);
int job_complete(job *j, store *st, api_err *e);
/* Set (watts > 0) or lift (watts 0) the job's power cap (powercap_job.h): stored in its spec;
 * while running, every pipeline is given the slower of the cap's plan and the straggler rule's,
 * announced as any plan change is. Refused once the job is done or failed. */
int job_set_power_cap(job *j, store *st, double watts, api_err *e);

/* The planner finished: f (owned, may be NULL on failure) with its plans.prs text
 * (prs_frontier_to_plans), or the failure why. Moves to running or failed unless the job left
 * planning meanwhile. */
int job_plan_finished(job *j, store *st, prs_frontier *f, const void *plans, size_t plans_len,
                      double planning_s, const char *why, api_err *e);

/* GET /v1/jobs/{id} body (new reference). */
json_t *job_status_json(const job *j);
/* GET /v1/jobs/{id}/frontier body (new reference); NULL when there is no frontier. limit <= 0:
 * the summary (size, slowest and fastest point); otherwise the points [offset, offset + limit)
 * and the offset of the next page (null after the last). */
json_t *job_frontier_json(const job *j, long offset, long limit);

#endif
