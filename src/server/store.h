/* The server's database (SQLite, WAL): every job, rank, measurement, profile, frontier and
 * current plan. Statements are prepared once at open and bound with values only: no text from a
 * request is ever part of SQL. Calls are not thread-safe; the server serialises them under its
 * lock. Each function returns 0, or -1 with the reason in store_errmsg. */
#ifndef PRS_SERVER_STORE_H
#define PRS_SERVER_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct store store;

#define STORE_SCHEMA_VERSION 1

/* Open or create the database at path and bring its schema up to date. full_sync: fsync at every
 * commit (survives power loss); otherwise commits survive a process crash (synchronous=NORMAL).
 * On failure *out is NULL and msg (256 bytes) says why. */
int store_open(const char *path, int full_sync, store **out, char *msg);
void store_close(store *s);
const char *store_errmsg(const store *s);

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
} store_job_row;

int store_insert_job(store *s, const store_job_row *j);
int store_update_job(store *s, const char *id, const char *phase, const char *reason,
                     long sweep_index, long round, double planning_s);
/* Calls fn for every job (oldest first); stops and returns fn's value if non-zero. */
int store_each_job(store *s, int (*fn)(void *ud, const store_job_row *j), void *ud);

int store_insert_rank(store *s, const char *job, int rank, int dp, int pp, int tp, const char *gpu);
int store_each_rank(store *s, const char *job,
                    int (*fn)(void *ud, int rank, int dp, int pp, int tp), void *ud);

/* One reported iteration; *id receives its row id. phase: the job phase it arrived in. used: 1
 * when its windows count in the profile (not a warm-up iteration, not outside profiling). */
int store_insert_measurement(store *s, const char *job, int rank, const char *phase, long round,
                             long iteration, int clock_mhz, double time_s, double energy_j,
                             int used, long long *id);
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

/* Profile CSV of a job (source: "measured", "uploaded" or "reused"). get: *csv is malloc'd
 * (caller frees), NULL with rc 0 when there is none. */
int store_put_profile(store *s, const char *job, const char *source, const char *csv, size_t len);
int store_get_profile(store *s, const char *job, char **csv, size_t *len, char source[16]);

/* Frontier (plans.prs of prs_frontier_save) of a job; config_key "" if not reusable. */
int store_put_frontier(store *s, const char *job, const char *config_key, const void *blob,
                       size_t len, double planning_s);
int store_get_frontier(store *s, const char *job, void **blob, size_t *len);
/* The most recent job with a frontier under config_key: its id into job_out (32 bytes), or ""
 * when there is none. */
int store_find_frontier(store *s, const char *config_key, char job_out[32]);

/* Current plan and straggler state of one data-parallel pipeline. straggler: 0 none, 1
 * explicit, 2 automatic. */
int store_put_pipeline(store *s, const char *job, int dp, int straggler, double straggler_time_s,
                       long plan_id);
int store_each_pipeline(store *s, const char *job,
                        int (*fn)(void *ud, int dp, int straggler, double time_s, long plan_id),
                        void *ud);

#endif
