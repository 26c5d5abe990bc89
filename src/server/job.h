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

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "perseus/planner.h"
#include "pace.h"
#include "powercap_job.h"
#include "request.h"
#include "secure.h"
#include "store.h"

typedef enum job_phase {
    JOB_REGISTERING = 0,
    JOB_PROFILING,
    JOB_PLANNING,
    JOB_RUNNING,
    JOB_DONE,
    JOB_FAILED,
    JOB_NPHASES
} job_phase;

const char *job_phase_name(job_phase p);
/* -1 for an unknown name. */
int job_phase_parse(const char *name, job_phase *out);

typedef struct api_err {
    int http;         /* 400, 404, 409, 500, ... */
    const char *code; /* static string: "bad_request", "wrong_phase", ... */
    char msg[REQ_MSG_MAX];
} api_err;

/* Fill e and return -1. */
int api_fail(api_err *e, int http, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct job_rank {
    int registered;
    int dp, pp, tp;
    long clock_failures; /* as the rank last said (cumulative; resent with every post) */
} job_rank;

enum { STRAGGLER_NONE = 0, STRAGGLER_EXPLICIT = 1, STRAGGLER_AUTO = 2 };

/* An iteration of a pipeline that some of its ranks reported and the straggler detector has
 * not evaluated yet. */
typedef struct job_pending {
    long iteration;
    int reports;   /* rank reports of it so far */
    long plan_id;  /* the plan a rank said it ran (-1: none said) */
    double pace_s; /* slowest reported pace (0: none reported) */
    double time_s; /* slowest reported iteration time */
} job_pending;

/* Iteration n of a pipeline waits for its ranks' reports until iteration n + JOB_PACE_LAG
 * arrives (clients post what ended since their last post, several iterations at once when
 * iterations are short); a full ring evaluates its oldest. */
#define JOB_PACE_LAG 8
#define JOB_PENDING 16

/* One data-parallel pipeline while running. */
typedef struct job_pipe {
    int straggler; /* STRAGGLER_* */
    double straggler_time_s;
    long plan_id;
    long prev_plan_id;   /* the plan run before from_iteration (-1: none, the highest clocks) */
    long from_iteration; /* first iteration of plan_id */
    long want_plan;      /* a plan change waiting for the pending switch to happen (-1: none) */
    long newest;         /* newest iteration number any rank of the pipeline reported (-1) */
    pipe_pace pace;      /* iterations per wall-clock second, from the ranks' reports (pace.h) */
    long last_iteration; /* last iteration the detector evaluated (-1: none) */
    job_pending pend[JOB_PENDING]; /* iterations awaiting evaluation, oldest first */
    int npend;
    double last_norm_s; /* its latest pace scaled to the fastest plan (0: none yet) */
    int over, under;    /* consecutive iterations above / below the threshold */
    long iterations;    /* iterations seen while running (since the server started) */
    /* Results posted after profiling are folded here instead of being stored one row each:
     * how many, and the sums of their time_s and energy_j (stored with the pipeline). */
    long long reports;
    double report_time_s, report_energy_j;
    long epoch; /* the last plan rule it applied (job_assign.h) */
} job_pipe;

/* The plan rule of a running job (job_assign.h): what every pipeline should run. */
typedef struct job_rule {
    double tprime; /* the slowest straggler's T' (0: no straggler) */
    long slow;     /* the lookup's plan for T': the other pipelines' (the fastest when none) */
    long cap;      /* the power cap's plan (-1: no cap) */
} job_rule;

/* Rules kept for pipelines that have not applied them yet. */
#define JOB_RULES 64

/* A plan decoded from the frontier, shared by the pipelines that run it. */
typedef struct job_decoded {
    long id;
    int *clocks;
} job_decoded;

typedef struct job {
    char id[SECURE_ID_LEN + 1];
    uint8_t token_hash[SECURE_SHA256_LEN];
    req_job_spec spec;
    char config_key[2 * SECURE_SHA256_LEN + 1]; /* "" when not reusable */
    job_phase phase;
    char reason[REQ_MSG_MAX];
    long long created_unix;
    long long finished_unix; /* when it became done or failed (0: not finished) */

    int world, nregistered, ops_per_stage;
    job_rank *ranks; /* world entries, indexed by rank */
    int *slot;       /* (dp, pp, tp) -> rank, or -1 */

    /* profiling: clocks to sweep (spec clocks >= floor, highest first) */
    int nsweep;
    int sweep[REQ_MAX_CLOCKS];
    long sweep_index;     /* clock being profiled */
    long round;           /* profiling: = sweep_index; running: bumped at every plan change */
    int *round_iters;     /* per rank: iterations reported in the current profiling round */
    int ranks_done;       /* ranks with warm-up + k iterations in the current round */
    int round_extra;      /* iterations per rank added to the current round for precision */
    double *clock_se_pct; /* per sweep clock: the largest relative standard error reached, in
                             percent (NaN before the clock's round ended) */
    int *clock_iters;     /* per sweep clock: kept iterations per rank when its round ended */

    /* planning */
    long plan_done, plan_total;
    double planning_s;
    int planner_active; /* a planner thread works on this job */
    prs_profile *profile;
    char profile_source[16]; /* "measured", "uploaded", "reused" */

    /* running */
    prs_frontier *frontier;
    size_t fastest;
    double allmax_time_s, allmax_energy_j; /* 0 when unknown */
    job_pipe *pipes;                       /* dp entries */
    double *scratch;                       /* dp entries: the detector's median */
    double median_s;      /* large jobs: the median of every pipeline's scaled pace (0: none) */
    long median_stale;    /* evaluations since median_s was computed */
    job_decoded *decoded; /* the plans some pipeline or rule names, decoded (job_plan_clocks) */
    int ndecoded, capdecoded;
    job_rule rules[JOB_RULES]; /* rule e at rules[e % JOB_RULES] for e in [swept, epoch] */
    long epoch;                /* the newest rule */
    long swept;                /* every pipeline applied the rules up to this one */
    int *strag;                /* the pipelines marked stragglers (nstrag of dp entries) */
    int nstrag;

    double bp_measured_w, bp_used_w; /* blocking power measured, planned with (0: none) */

    /* power cap (powercap_job.h): every frontier plan's average and 1 s peak power per
     * pipeline, NULL until a cap needed them */
    plan_powers powers;

    long long measurements; /* results stored: profiling rows plus the pipelines' reports */

    /* Running iterations the straggler detector evaluated since the server started, over all
     * pipelines (the status's savings, /metrics): how many, their planned energy, the energy
     * they saved against all-max, and the latest one's time. */
    long long run_iterations;
    double run_energy_j, run_saved_j, last_iteration_s;

    /* Where the job reports what an operator should see (plan switches, stragglers): one
     * key=value line at a prs_log_level (perseus/server.h); NULL: nowhere. */
    void (*log)(void *ud, int level, const char *line);
    void *log_ud;
    /* The server's lock of this job (server.c, 'Locking'): held shared by views, exclusively by
     * the calls that change the job. Owned by the server; NULL outside it. */
    pthread_rwlock_t *lock;
    struct job *next;
} job;

/* Actions the caller must take after a call. */
enum { JOB_ACT_NONE = 0, JOB_ACT_PLAN = 1 };

/* A new job in the registering phase with the given id and token hash, written to the store.
 * If the spec names a model and allows reuse, and the store holds a frontier for the same
 * configuration (job_config_key), the job adopts that profile and frontier. */
int job_create(store *st, const req_job_spec *spec, const char *id, const uint8_t *token_hash,
               long long now_unix, job **out, api_err *e);
/* Load a job and everything it owns from the store (startup, or resync after a failed
 * transaction). *action is JOB_ACT_PLAN when the job was planning. */
int job_load(store *st, const store_job_row *row, job **out, int *action, prs_error *err);
void job_free(job *j);

/* Reuse key of a spec, hex SHA-256 into key (65 bytes); "" when the spec names no model or
 * turns reuse off. Same key = same model name, pipeline (stages, microbatches, tp, schedule,
 * virtual stages), clock list, profiling floor, unit time, blocking power and cost model. */
void job_config_key(const req_job_spec *spec, char key[2 * SECURE_SHA256_LEN + 1]);

/* The pipeline the job plans with: the spec's, with the blocking power in use. */
void job_pipeline(const job *j, prs_pipeline *pipe);
/* Evaluate every frontier plan's power for the cap (plan_powers_prepare), once: 0, or -1. */
int job_power_prepare(job *j);
/* The plan the job's power cap allows every pipeline (plan_powers_cap_plan on cap / dp); -1 when
 * there is no cap or the powers are not evaluated. */
long job_cap_plan(const job *j, int *feasible);
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
/* The same with the profile parsed and checked against the job's stages already (outside the
 * server lock); p is taken over in every case. */
int job_install_profile(job *j, store *st, prs_profile *p, int *action, api_err *e);
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
