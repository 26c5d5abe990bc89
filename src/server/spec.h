/* A job's specification as a value (job_spec), what it is decoded from and what it is stored as.
 *
 * Two forms. The wire form is what POST /v1/jobs sends (docs/api.md); request.c decodes it under
 * the API's limits (req_spec_limits), which a later version may tighten. The stored form is what
 * the job's row in SQLite holds: the canonical JSON object (spec_json) with "spec_version"; it
 * is decoded under the capacity limits (SPEC_CAP_*, spec_stored_limits), which are what this
 * code can hold and are never tightened, so a job stored under looser API limits still loads
 * after an upgrade. A stored spec without "spec_version" is version 0 (written before the
 * version existed, same fields); one of a later version than SPEC_STORED_VERSION is refused.
 *
 * Errors: 0 or PRS_EINVAL with a one-line message in a prs_error naming the field. */
#ifndef PRS_SERVER_SPEC_H
#define PRS_SERVER_SPEC_H

#include <stddef.h>

#include <jansson.h>

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

/* The version of the stored form written now. */
#define SPEC_STORED_VERSION 1

/* Capacity: what the code holds (array sizes, counts the server's tables and routes are built
 * for). API limits are at most these. */
#define SPEC_CAP_MODEL 128
#define SPEC_CAP_CLOCKS 512
#define SPEC_CAP_STAGES 1024
#define SPEC_CAP_MICROBATCHES 4096
#define SPEC_CAP_WORLD 65536
#define SPEC_CAP_VIRTUAL_STAGES 64
#define SPEC_CAP_OPS (1 << 20) /* stages * computations per stage: bounds planner memory */

/* A job specification. */
typedef struct job_spec {
    char model[SPEC_CAP_MODEL + 1]; /* "" when not given: the job's frontier is never reused */
    int stages, microbatches, dp, tp, virtual_stages;
    prs_schedule schedule;
    int nclocks;
    int clocks_mhz[SPEC_CAP_CLOCKS]; /* distinct, highest first */
    int warmup_iterations;           /* dropped at each clock, per rank */
    int iterations_per_clock;        /* k kept at each clock, per rank */
    double target_se_pct;            /* repeat a clock (k more each time) while the mean time or
                                        energy of some type has a larger relative standard error;
                                        0: never */
    int max_iterations_per_clock;    /* ... up to this many kept iterations (>= k) */
    int min_clock_mhz;               /* profiling floor: lower clocks are never swept */
    int skip_dominated;              /* stop the sweep at a clock dominated by the one above */
    double unit_time_s;
    int has_blocking_power;  /* 0: not given, the job plans with the measured blocking power */
    double blocking_power_w; /* when given (0 otherwise) */
    int has_change_cost;     /* change_cost_us was given (else perseusd's default applies) */
    double change_cost_us;   /* the time a clock change adds, charged by the planner
                                (prs_pipeline.change_cost_s = this / 1e6; docs/planner.md,
                                'Clock changes'); 0: free */
    prs_cost_model cost_model;
    double straggler_factor; /* automatic detection threshold, > 1 */
    int straggler_iterations;
    double switch_lead_s; /* a new plan starts at least this long after it is announced */
    int reuse_frontier;
    /* SHA-256 (hex) of the creator's reuse_key; "" when none was given: the frontier is reused
     * only between jobs whose creators gave the same key (the key itself is never kept) */
    char reuse_key_sha256[2 * 32 + 1];
    double power_cap_w; /* per job (split across pipelines), on the 1 s peak; 0: no cap */
} job_spec;

/* The bounds a decoding applies (inclusive unless said). */
typedef struct spec_limits {
    long max_model; /* bytes, <= SPEC_CAP_MODEL */
    long max_stages, max_microbatches, max_world, max_virtual_stages, max_ops;
    int max_clocks; /* <= SPEC_CAP_CLOCKS */
    long max_clock_mhz;
    double min_unit_time_s, max_unit_time_s;
    double max_blocking_power_w, max_switch_lead_s, max_power_cap_w;
    long max_iterations; /* warm-up, per clock, most per clock, straggler iterations */
    double max_straggler_factor;
} spec_limits;

/* The capacity limits the stored form is decoded under. */
extern const spec_limits spec_stored_limits;

/* Decode a spec object under lim into out (defaults for what is absent). */
int spec_decode(json_t *root, const spec_limits *lim, job_spec *out, prs_error *err);

/* The spec as the canonical JSON object (every field, defaults filled in), as the job's status
 * shows it; NULL on no memory. Decoding it gives back s. */
json_t *spec_json(const job_spec *s);
/* The stored form: spec_json with "spec_version", as malloc'd text; NULL on no memory. */
char *spec_to_stored(const job_spec *s);
/* Decode a stored form (text, len bytes) under the capacity limits. */
int spec_from_stored(const char *text, size_t len, job_spec *out, prs_error *err);

/* Computations per GPU and model chunks of the spec's pipeline. */
int spec_ops_per_stage(const job_spec *s);
void spec_pipeline(const job_spec *s, prs_pipeline *pipe);
/* Whether every row of profile p is at one of the spec's clocks (clocks_mhz): 0, or PRS_EINVAL
 * naming the first row that is not (its line, stage, instruction and clock) and the clocks. */
int spec_check_profile_clocks(const job_spec *s, const prs_profile *p, prs_error *err);

#endif
