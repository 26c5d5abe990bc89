/* A job's state as the job module keeps it (the structs of job.h and job_assign.h), and the
 * small operations both use: phase names, the request error, the planning pipeline and power
 * cap of a job, and storing a job's row or a pipeline's row. Internal to the server.
 *
 * Errors: the request calls answer with an api_err (the HTTP status, a stable code and a
 * one-line message); see job.h. */
#ifndef PRS_SERVER_JOB_STATE_H
#define PRS_SERVER_JOB_STATE_H

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
    /* Its last counted iteration of a profiling round: the attribution fit's largest relative
     * standard error and the criterion the rank aims for (0: not said), and that round. */
    double fit_rel_se, fit_criterion;
    long fit_round;
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
    job_spec spec;
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
    int sweep[SPEC_CAP_CLOCKS];
    long sweep_index;     /* clock being profiled */
    long round;           /* profiling: = sweep_index; running: bumped at every plan change */
    int *round_iters;     /* per rank: iterations reported in the current profiling round */
    int *late_iters;      /* per rank: iterations of earlier rounds stored during this one */
    int ranks_done;       /* ranks with warm-up + k iterations in the current round */
    int round_extra;      /* iterations per rank added to the current round for precision */
    double *clock_se_pct; /* per sweep clock: the largest relative standard error reached, in
                             percent (NaN before the clock's round ended) */
    int *clock_iters;     /* per sweep clock: kept iterations per rank when its round ended */

    /* planning */
    long plan_done, plan_total;
    double planning_s;
    int planner_active;    /* a planner thread works on this job */
    double plan_started_s; /* when its planner thread started (prs_mono_s, atomics; the
                            * server sets it), 0 while none runs */
    int plan_waits_memory; /* its planner waits for --max-plan-memory (atomics; the server sets
                            * it) */
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
    /* The server's lock of this job (server_int.h, the locks): held shared by views, exclusively by
     * the calls that change the job. Owned by the server; NULL outside it. */
    pthread_rwlock_t *lock;
    /* Also the server's (server_int.h, the locks): references that keep the job's memory (the
     * table's own, and each request or thread working on it; atomics), whether it was deleted
     * (set under its lock: requests that reach it afterwards answer 404), and when a request
     * last reached it (seconds since the epoch, atomics: --job-idle-timeout). */
    long refs;
    int deleted;
    long long active_unix;
    struct job *next;
} job;

/* Actions the caller must take after a call. */
enum { JOB_ACT_NONE = 0, JOB_ACT_PLAN = 1 };

/* The pipeline the job plans with: the spec's, with the blocking power in use. */
void job_pipeline(const job *j, prs_pipeline *pipe);
/* Evaluate every frontier plan's power for the cap (plan_powers_prepare), once: 0, or -1. */
int job_power_prepare(job *j);
/* The plan the job's power cap allows every pipeline (plan_powers_cap_plan on cap / dp); -1 when
 * there is no cap or the powers are not evaluated. */
long job_cap_plan(const job *j, int *feasible);
/* The job's row for the store (spec_json: NULL when only the job's state changes). */
store_job_row job_row(const job *j, const char *spec_json);
/* A failed store call as the request's error: 500 "storage" with SQLite's reason; -1. */
int job_store_fail(api_err *e, store *st);
/* Store the job's row as it is in memory (the retention clock starts when it is first stored
 * finished). */
int job_persist(job *j, store *st, api_err *e);
/* Store pipeline d as it is in memory. */
int job_put_pipe(job *j, store *st, int d, api_err *e);
/* Move the job to the failed phase with the reason (printf format). */
void job_set_failed(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A profile as the CSV text stored for it (malloc'd into *csv): 0, or -1 when out of memory. */
int job_profile_csv(const prs_profile *p, char **csv, size_t *len);
/* One key=value line to the job's log sink at a prs_log_level (none: nothing). */
void job_logf(const job *j, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
