/* The wire format of Zeus's pipeline-frequency clients (the SOSP'24 artifact's and Zeus
 * master's), read and written with jansson: job and rank registrations, the schedule answers
 * and the translation of a posted result into the iterations of a v1 results post. No state,
 * no I/O: zeus_routes.c keeps the jobs and talks to the v1 job behind them. */
#ifndef PRS_SERVER_ZEUS_WIRE_H
#define PRS_SERVER_ZEUS_WIRE_H

#include <stddef.h>

#include <jansson.h>

#include "perseus/error.h"

#define ZW_MAX_MODEL 64       /* characters of a model name kept from a registration */
#define ZW_MAX_SCHEDULE 65536 /* pipe-schedule entries of one rank */
#define ZW_MAX_CLOCKS 512     /* clocks a rank may list */

/* What a pipe-schedule entry is: a computation, or anything else (load, p2p, cc, step). */
enum { ZW_OTHER = 0, ZW_FORWARD = 1, ZW_BACKWARD = 2 };

/* A job registration (both dialects). microbatches 0: not given. */
typedef struct zw_job {
    long pp, dp, tp, world, microbatches;
    char model[ZW_MAX_MODEL + 1]; /* model_name or job_metadata, printable; "" when absent */
} zw_job;

/* A rank registration: the artifact's (job_id, pipe_schedule, power_state_range) or master's
 * (available_frequencies). sched is NULL for master's; clocks_mhz distinct, highest first. */
typedef struct zw_rank {
    long rank, dp, pp, tp;
    char job_id[256]; /* the artifact's, from the body; "" for master's */
    unsigned char *sched;
    size_t nsched;
    long clocks_mhz[ZW_MAX_CLOCKS];
    size_t nclocks;
} zw_rank;

/* Parse a job registration. 0, or PRS_EINVAL with err naming the field. */
int zw_parse_job(const json_t *body, zw_job *out, prs_error *err);

/* Parse a rank registration; artifact: the artifact's dialect (job_id and pipe_schedule in the
 * body, clocks in power_state_range) or master's (clocks in available_frequencies). 0, or
 * PRS_EINVAL/PRS_ENOMEM with err naming the field; free with zw_rank_free either way. */
int zw_parse_rank(const json_t *body, int artifact, zw_rank *out, prs_error *err);
void zw_rank_free(zw_rank *r);

/* The computations of stage s (of S) under 1F1B with M microbatches in execution order: kind[i]
 * ZW_FORWARD or ZW_BACKWARD and its microbatch mb[i], for i < 2M. */
void zw_1f1b_order(long S, long s, long M, unsigned char *kind, long *mb);

/* 0 when the computations of r's pipe schedule come in stage r->pp's 1F1B order for S stages
 * and M microbatches, else PRS_EINVAL saying where they differ. */
int zw_check_schedule(const zw_rank *r, long S, long M, prs_error *err);

/* {"rank": R, "power_states": [...]}: one clock per pipe-schedule entry; computation i gets
 * clocks_mhz[i] (2M of them), any other entry the clock of the computation before it (the
 * first computation's when none came before). */
json_t *zw_power_states(long rank, const unsigned char *sched, size_t nsched,
                        const long *clocks_mhz, size_t nclocks);

/* {"rank": R, "frequencies": [["forward", MHz], ...]}: stage s's computations in 1F1B order. */
json_t *zw_frequencies(long rank, long S, long s, long M, const long *clocks_mhz);

/* What a rank was last told: its stage, the pipeline geometry, the clock of each computation in
 * 1F1B order (2M) and the profiling round (-1: not profiling). */
typedef struct zw_served {
    long stages, stage, microbatches;
    const long *clocks_mhz;
    long round;
} zw_served;

/* A posted result as v1 iterations. The result's rank in *rank, its iteration count in *n; the
 * iterations (numbered from *next_iteration on, which advances by *n) in *iterations, a new
 * array (empty when no iteration had a time). Per iteration: time_s from iter_time, energy_j
 * from iter_energy when it has one, one window per forward and backward with both a time and an
 * energy > 0 (a list of M + 1 forwards, as a first iteration may report, drops its first), and a
 * blocking power estimated from the time and energy outside the computations. 0, or PRS_EINVAL
 * with err naming the field. */
int zw_result_to_v1(const json_t *body, const zw_served *sv, long *next_iteration, long *rank,
                    size_t *n, json_t **iterations, prs_error *err);

/* The rank of a result body (for finding what it was served before translating): 0, or
 * PRS_EINVAL. */
int zw_result_rank(const json_t *body, long *rank, prs_error *err);

#endif
