/* The server's database (SQLite, WAL): every job, rank, measurement, profile, frontier and
 * current plan. Statements are prepared once at open and bound with values only: no text from a
 * request is ever part of SQL. Calls are not thread-safe; the server serialises them under its
 * lock.
 *
 * Errors follow the project convention (perseus/error.h): each function returns 0 or a negative
 * PRS_E* code (PRS_EIO for a database failure, PRS_ENOMEM), the details recorded in the handle's
 * prs_error (store_error), as SQLite keeps its own. The row walks (store_each_*, ...) call fn per
 * row: fn returns 0 to go on; any other value ends the walk and is returned (a negative PRS_E*
 * code for a failure, whose details fn keeps; a positive one for "found, stop here"). */
#ifndef PRS_SERVER_STORE_H
#define PRS_SERVER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "store_schema.h"

typedef struct store store;

/* The size a WAL file is brought back to after a large transaction (PRAGMA journal_size_limit):
 * about what SQLite's automatic checkpoint lets it reach in normal use (1,000 pages of 4 KiB). */
#define STORE_WAL_LIMIT_BYTES (4L << 20)

/* Open or create the database at path and bring its schema up to date. full_sync: fsync at every
 * commit (survives power loss); otherwise commits survive a process crash (synchronous=NORMAL).
 * On failure *out is NULL and err says why: PRS_EINVAL for a schema newer than this server's,
 * PRS_EIO otherwise. */
int store_open(const char *path, int full_sync, store **out, prs_error *err);
void store_close(store *s);
/* The last failure of a call on s (code and message). */
const prs_error *store_error(const store *s);

/* Rows inserted, updated or deleted through s since it was opened (what a request cost). */
long long store_total_changes(store *s);

int store_begin(store *s);
int store_commit(store *s);
void store_rollback(store *s);

/* Job row. phase is the phase name; spec_json the canonical spec. */
typedef struct store_job_row {
    const char *id;
    const uint8_t *token_hash; /* 32 bytes */
    const char *spec_json;
    const char *config_key; /* "" when the job's frontier is not reusable */
    const char *phase;
    const char *reason;
    long sweep_index, round;
    double planning_s;
    long long created_unix;
    double bp_measured_w, bp_used_w; /* blocking power measured / planned with; 0: none */
    long long finished_unix;         /* when it became done or failed; 0: not finished */
} store_job_row;

int store_insert_job(store *s, const store_job_row *j);
int store_update_job(store *s, const store_job_row *j);
/* Replace a job's stored spec (a setting changed at run time: the power cap). */
int store_set_job_spec(store *s, const char *id, const char *spec_json);
/* Delete a job and every row it owns (ranks, measurements, windows, profile, frontier,
 * pipelines). */
int store_delete_job(store *s, const char *id);

/* Mark a job deleted (STORE_PHASE_DELETING): one row updated, whatever the job holds. */
int store_mark_deleting(store *s, const char *id);
/* A job marked deleted whose rows are not purged yet: its id into id_out, or "" when none. */
int store_next_deleting(store *s, char id_out[32]);
/* One bounded step of purging a job marked deleted, for the caller's transaction: at most
 * max_rows of its windows, else of its measurements (*deleted: how many), else its remaining rows
 * (a few per pipeline, rank and rule) and the job's own row (*done set). Call it again until
 * *done: each step's cost is bounded by max_rows, whatever the job holds. */
int store_purge_step(store *s, const char *id, long max_rows, long *deleted, int *done);
/* Give back to the file system at most max_pages of the database's free pages (what deleted
 * rows left), in the caller's transaction or its own; *left: the free pages still held. A
 * database made before this server (auto_vacuum off) gives nothing back (*left 0). */
int store_vacuum_step(store *s, long max_pages, long *left);
/* Calls fn for every job (oldest first) but those marked deleted. */
int store_each_job(store *s, int (*fn)(void *ud, const store_job_row *j), void *ud);
/* Blocking power measured and used by one job (0 when not known, or no such job). */
int store_job_blocking_power(store *s, const char *id, double *measured_w, double *used_w);

int store_insert_rank(store *s, const char *job, int rank, int dp, int pp, int tp, const char *gpu);
int store_each_rank(store *s, const char *job,
                    int (*fn)(void *ud, int rank, int dp, int pp, int tp), void *ud);

/* One iteration reported while profiling (later ones are folded into their pipeline's row,
 * store_pipe_row). phase: the job phase it arrived in. used: 1 when its windows count
 * in the profile (not a warm-up iteration, not outside profiling). Optional values (stored as
 * NULL): pace_s 0, plan_id -1, blocking_power_w 0. */
typedef struct store_meas_row {
    int rank;
    const char *phase;
    long round, iteration;
    int clock_mhz;
    double time_s, energy_j, pace_s;
    long plan_id;
    double blocking_power_w;
    int used;
} store_meas_row;

/* *id receives the new row's id. */
int store_insert_measurement(store *s, const char *job, const store_meas_row *m, long long *id);
/* Blocking-power estimates of the used measurements, ascending: fn(watts). */
int store_blocking_powers(store *s, const char *job, int (*fn)(void *ud, double watts), void *ud);
/* Iteration number of each rank's most recent measurement: fn(rank, iteration). */
int store_latest_iterations(store *s, const char *job, int (*fn)(void *ud, int rank, long it),
                            void *ud);
int store_insert_window(store *s, const char *job, long long measurement, int stage, int instr,
                        int microbatch, int clock_mhz, double time_s, double energy_j, int used);
long long store_count_measurements(store *s, const char *job);
/* Iterations each rank reported in a profiling round: fn(rank, count). */
int store_round_counts(store *s, const char *job, long round,
                       int (*fn)(void *ud, int rank, long count), void *ud);
/* Mean time and energy of used windows per (stage, instruction, clock), stage-major, highest
 * clock first: fn(stage, instr, clock, time, energy, n). */
int store_profile_means(store *s, const char *job,
                        int (*fn)(void *ud, int stage, int instr, int clock, double time_s,
                                  double energy_j, long n),
                        void *ud);

/* The largest relative standard error of the mean time or energy of the used windows at one clock,
 * over the (stage, instruction) types measured there (infinite when a type has fewer than 2
 * windows, or none is measured). */
int store_clock_spread(store *s, const char *job, int clock_mhz, double *max_rel_se);

/* Profile CSV of a job (source: "measured", "uploaded" or "reused"). get: *csv is malloc'd
 * (caller frees), NULL with rc 0 when there is none. */
int store_put_profile(store *s, const char *job, const char *source, const char *csv, size_t len);
int store_get_profile(store *s, const char *job, char **csv, size_t *len, char source[16]);

/* Frontier (plans.prs text, prs_frontier_to_plans) of a job; config_key "" if not reusable. */
int store_put_frontier(store *s, const char *job, const char *config_key, const void *blob,
                       size_t len, double planning_s);
int store_get_frontier(store *s, const char *job, void **blob, size_t *len);
/* The most recent job with a frontier under config_key: its id into job_out (32 bytes), or ""
 * when there is none. */
int store_find_frontier(store *s, const char *config_key, char job_out[32]);

/* A pipeline row written before version 5: its newest iteration is not stored (read it from
 * the measurements, store_latest_iterations). */
#define STORE_NEWEST_UNKNOWN (-2L)

/* Current plan and straggler state of one data-parallel pipeline. straggler: 0 none, 1
 * explicit, 2 automatic. The plan holds from iteration from_iteration; before it the pipeline
 * runs prev_plan_id (-1: none). Results posted after profiling are not stored one row per
 * iteration but folded into the pipeline's row: how many (reports), the sums of their time_s
 * and energy_j, and the newest iteration number of the pipeline. */
typedef struct store_pipe_row {
    int dp, straggler;
    double straggler_time_s;
    long plan_id, prev_plan_id, from_iteration;
    double pace_hz;    /* iterations per wall-clock second when stored (0: not known; pace.h) */
    long newest;       /* newest iteration any rank reported (-1: none; STORE_NEWEST_UNKNOWN) */
    long long reports; /* iterations posted after profiling */
    double report_time_s, report_energy_j; /* their sums */
    long epoch; /* the last plan rule the pipeline applied (job_assign.h) */
} store_pipe_row;

int store_put_pipeline(store *s, const char *job, const store_pipe_row *p);
int store_each_pipeline(store *s, const char *job, int (*fn)(void *ud, const store_pipe_row *p),
                        void *ud);

/* A running job's plan rule number epoch (job_assign.h): the slowest straggler's T' (0: none),
 * the lookup's plan for it, the power cap's plan (-1: none). */
typedef struct store_rule_row {
    long epoch;
    double tprime;
    long slow, cap;
} store_rule_row;

int store_put_rule(store *s, const char *job, const store_rule_row *r);
/* The job's stored rules, oldest first. */
int store_each_rule(store *s, const char *job, int (*fn)(void *ud, const store_rule_row *r),
                    void *ud);
/* Drop the job's rules numbered upto and below (every pipeline applied them). */
int store_delete_rules(store *s, const char *job, long upto);

/* The precision profiling reached at sweep clock sweep_index when its round last ended: the
 * largest relative standard error in percent (NaN is stored as not known) and the iterations
 * per rank kept. Written again when the round is extended. */
int store_put_precision(store *s, const char *job, long sweep_index, double se_pct, int iterations);
int store_each_precision(store *s, const char *job,
                         int (*fn)(void *ud, long sweep_index, double se_pct, int iterations),
                         void *ud);

/* Inference clusters (cluster.h): the declaration as JSON without its profile, the profile CSV
 * (NULL when none yet), the latest load report as JSON ({"rates_rps": ...}; NULL before one),
 * when it came and how many came. */
typedef struct store_cluster_row {
    const char *id;
    const uint8_t *token_hash; /* 32 bytes */
    long long created_unix;
    const char *spec_json;
    const char *profile; /* profile_len bytes, or NULL */
    size_t profile_len;
    const char *load_json; /* or NULL */
    long long load_unix;
    long loads;
} store_cluster_row;

int store_insert_cluster(store *s, const store_cluster_row *c);
int store_set_cluster_profile(store *s, const char *id, const char *csv, size_t len);
int store_set_cluster_load(store *s, const char *id, const char *load_json, long long load_unix,
                           long loads);
int store_delete_cluster(store *s, const char *id);
/* fn on every cluster's row (its pointers valid during the call); a non-zero return stops. */
int store_each_cluster(store *s, int (*fn)(void *ud, const store_cluster_row *c), void *ud);

#endif
