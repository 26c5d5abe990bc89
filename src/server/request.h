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
#include "jsonfield.h"
#include "spec.h"

#define REQ_MSG_MAX JF_MSG_MAX /* bound of a request error message, and of api_err's */
/* The API's limits on a job spec (req_spec_limits): at most the spec's capacity (spec.h), and
 * free to be tightened, since stored specs load under the capacity. */
#define REQ_MAX_CLOCKS 512
#define REQ_MAX_MODEL 128
#define REQ_MAX_STAGES 1024
#define REQ_MAX_MICROBATCHES 4096
#define REQ_MAX_WORLD 65536
#define REQ_MAX_VIRTUAL_STAGES 64
#define REQ_MAX_OPS (1 << 20)             /* stages * computations per stage */
#define REQ_MAX_PROFILING_ITERATIONS 1000 /* warm-up, per clock, straggler iterations */
#define REQ_MAX_GPU 256
#define REQ_MAX_ITERATIONS 256 /* per results post */
#define REQ_MAX_WINDOWS 65536  /* per results post, all iterations together */
#define REQ_MAX_CLOCK_MHZ 100000

_Static_assert(REQ_MAX_CLOCKS <= SPEC_CAP_CLOCKS && REQ_MAX_MODEL <= SPEC_CAP_MODEL &&
                   REQ_MAX_STAGES <= SPEC_CAP_STAGES &&
                   REQ_MAX_MICROBATCHES <= SPEC_CAP_MICROBATCHES &&
                   REQ_MAX_WORLD <= SPEC_CAP_WORLD &&
                   REQ_MAX_VIRTUAL_STAGES <= SPEC_CAP_VIRTUAL_STAGES && REQ_MAX_OPS <= SPEC_CAP_OPS,
               "the API's limits are within the spec's capacity");

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
    double fit_rel_se;    /* profiling: largest standard error / power of its kinds' fit; 0: none */
    double fit_criterion; /* the rel. standard error the rank's fit aims for; 0: not given */
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

/* Largest power cap accepted, watts per job. */
#define REQ_MAX_POWER_CAP_W 1e9

/* The API's limits on a job spec. */
extern const spec_limits req_spec_limits;

/* Parse text (len bytes, not NUL-terminated) into out. 0, or PRS_EINVAL with err's message
 * (one printable line of fewer than REQ_MSG_MAX bytes) naming the field. A job spec is decoded
 * by spec_decode under req_spec_limits. */
int req_parse_job_spec(const char *text, size_t len, job_spec *out, prs_error *err);
int req_parse_rank(const char *text, size_t len, req_rank *out, prs_error *err);
int req_parse_results(const char *text, size_t len, req_results *out, prs_error *err);
void req_results_free(req_results *r);
int req_parse_straggler(const char *text, size_t len, req_straggler *out, prs_error *err);
/* POST /v1/jobs/{id}/power_cap: {"power_cap_w": W}, W > 0 watts per job. */
int req_parse_power_cap(const char *text, size_t len, double *watts, prs_error *err);

#endif
