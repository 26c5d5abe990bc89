/* Request bodies of API v1 (docs/api.md): strict parsing and validation of JSON text into plain
 * structs. Strict means: the text is one JSON value (no trailing data), objects have no duplicate
 * and no unknown keys, every field has the documented type and range, required fields are
 * present. Every failure returns PRS_EINVAL with a one-line message in a prs_error naming the
 * field ("clocks_mhz[3]: expected an integer in 1..100000"). Nothing here touches the database or a
 * job: checks that need the job (a rank below the world size, a chunk of this stage) are made by
 * the caller. */
#ifndef PRS_SERVER_REQUEST_H
#define PRS_SERVER_REQUEST_H

#include <stddef.h>

#include <jansson.h>

#include "perseus/error.h"
#include "perseus/planner.h"

#define REQ_MSG_MAX 256 /* bound of a request error message, and of api_err's */
#define REQ_MAX_CLOCKS 512
#define REQ_MAX_MODEL 128
#define REQ_MAX_GPU 256
#define REQ_MAX_STAGES 1024
#define REQ_MAX_MICROBATCHES 4096
#define REQ_MAX_WORLD 65536
#define REQ_MAX_OPS (1 << 20)  /* stages * computations per stage: bounds planner memory */
#define REQ_MAX_ITERATIONS 256 /* per results post */
#define REQ_MAX_WINDOWS 65536  /* per results post, all iterations together */
#define REQ_MAX_CLOCK_MHZ 100000

/* A job specification (POST /v1/jobs). */
typedef struct req_job_spec {
    char model[REQ_MAX_MODEL + 1]; /* "" when not given: the job's frontier is never reused */
    int stages, microbatches, dp, tp, virtual_stages;
    prs_schedule schedule;
    int nclocks;
    int clocks_mhz[REQ_MAX_CLOCKS]; /* distinct, highest first */
    int warmup_iterations;          /* dropped at each clock, per rank */
    int iterations_per_clock;       /* k kept at each clock, per rank */
    double target_se_pct;           /* repeat a clock (k more each time) while the mean time or
                                       energy of some type has a larger relative standard error;
                                       0: never */
    int max_iterations_per_clock;   /* ... up to this many kept iterations (>= k) */
    int min_clock_mhz;              /* profiling floor: lower clocks are never swept */
    int skip_dominated;             /* stop the sweep at a clock dominated by the one above */
    double unit_time_s;
    int has_blocking_power;  /* 0: not given, the job plans with the measured blocking power */
    double blocking_power_w; /* when given (0 otherwise) */
    prs_cost_model cost_model;
    double straggler_factor; /* automatic detection threshold, > 1 */
    int straggler_iterations;
    double switch_lead_s; /* a new plan starts at least this long after it is announced */
    int reuse_frontier;
    /* SHA-256 (hex) of the creator's reuse_key; "" when none was given: the frontier is reused
     * only between jobs whose creators gave the same key (the key itself is never kept) */
    char reuse_key_sha256[2 * 32 + 1];
    double power_cap_w; /* per job (split across pipelines), on the 1 s peak; 0: no cap */
} req_job_spec;

/* A rank registration (POST /v1/jobs/{id}/ranks). */
typedef struct req_rank {
    int rank, dp, pp, tp;
    char gpu[REQ_MAX_GPU + 1]; /* GPU identity as the client reports it; "" if not given */
} req_rank;

/* One measured computation window. */
typedef struct req_window {
    prs_instr instr;
    int chunk; /* model chunk (profile stage); -1 when not given (= the rank's pipeline stage) */
    int microbatch; /* -1 when not given */
    int clock_mhz;  /* the clock actually applied */
    double time_s, energy_j;
} req_window;

typedef struct req_iteration {
    long iteration;
    double time_s, energy_j; /* of the whole iteration on this rank */
    int clock_mhz;           /* 0 when not given */
    double pace_s;           /* device time to the end of the last computation; 0: not given */
    long plan_id;            /* the plan the iteration ran (running phase); -1: not given */
    double blocking_power_w; /* the rank's estimate of its GPU's power while blocked; 0: none */
    double wall_s;           /* host wall-clock time since the rank's previous iteration; 0: none */
    size_t nwindows;
    req_window *windows; /* points into req_results.all_windows */
} req_iteration;

/* POST /v1/jobs/{id}/results. Free with req_results_free. */
typedef struct req_results {
    int rank;
    long round; /* -1 when not given */
    size_t niterations;
    req_iteration *iterations;
    req_window *all_windows;
    long clock_failures; /* the rank's clock changes that did not take, so far; -1: not given */
} req_results;

/* POST /v1/jobs/{id}/stragglers: exactly one of time_s and slowdown is > 0. */
typedef struct req_straggler {
    int dp;
    double time_s;   /* the straggler's iteration time T' */
    double slowdown; /* or T' as a multiple of the fastest plan's time */
} req_straggler;

/* Length bounds of a job spec's reuse_key (printable ASCII). */
#define REQ_MIN_REUSE_KEY 16
#define REQ_MAX_REUSE_KEY 256
/* Largest power cap accepted, watts per job. */
#define REQ_MAX_POWER_CAP_W 1e9

/* Parse text (len bytes, not NUL-terminated) into out. 0, or PRS_EINVAL with err's message
 * (one printable line of fewer than REQ_MSG_MAX bytes) naming the field. */
int req_parse_job_spec(const char *text, size_t len, req_job_spec *out, prs_error *err);
int req_parse_rank(const char *text, size_t len, req_rank *out, prs_error *err);
int req_parse_results(const char *text, size_t len, req_results *out, prs_error *err);
void req_results_free(req_results *r);
int req_parse_straggler(const char *text, size_t len, req_straggler *out, prs_error *err);
/* POST /v1/jobs/{id}/power_cap: {"power_cap_w": W}, W > 0 watts per job. */
int req_parse_power_cap(const char *text, size_t len, double *watts, prs_error *err);

/* The spec as a canonical JSON object (every field, defaults filled in); NULL on no memory.
 * req_parse_job_spec(json_dumps(req_job_spec_json(s))) gives back s. */
json_t *req_job_spec_json(const req_job_spec *s);

/* Computations per GPU and model chunks of the spec's pipeline. */
int req_spec_ops_per_stage(const req_job_spec *s);
void req_spec_pipeline(const req_job_spec *s, prs_pipeline *pipe);

#endif
