/* The job state machine driven directly (no HTTP) on a scratch database, for test_job and
 * test_job_running: the store, a job of a small spec, registrations, results posts from the GPU
 * model, running jobs on an uploaded profile, stragglers, and a job reloaded from the store.
 * Header-only. */
#ifndef PRS_TEST_JOB_FIXTURE_H
#define PRS_TEST_JOB_FIXTURE_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "job.h"
#include "job_assign.h"
#include "job_metrics.h"
#include "perseus/gpumodel.h"
#include "server_harness.h"

/* Pipeline d as its ranks see it: with every plan rule applied (job_assign.h). */
static inline job_pipe pv(const job *j, int d)
{
    job_pipe v;
    job_pipe_view(j, d, &v);
    return v;
}

static char dir[256];
static store *st;

/* count(*) of a table's rows of job id, counted on a connection of its own. */
static inline long long stored_count(const char *table, const char *id)
{
    char db[300], sql[128];
    snprintf(db, sizeof db, "%s/job.db", dir);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE job_id=?1", table);
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    long long v = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK &&
        sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    return v;
}

static inline long long stored_windows(const char *id)
{
    return stored_count("windows", id);
}

static inline long long stored_rows(const char *id)
{
    return stored_count("measurements", id);
}

static inline int setup(void **state)
{
    (void)state;
    harness_tmpdir(dir, sizeof dir, "job");
    char db[300];
    snprintf(db, sizeof db, "%s/job.db", dir);
    return store_open(db, 0, &st, NULL);
}

static inline int teardown(void **state)
{
    (void)state;
    store_close(st);
    harness_rmdir(dir);
    return 0;
}

static inline job_spec make_spec(void)
{
    job_spec s;
    prs_error err;
    const char *t = "{\"stages\":2,\"microbatches\":2,\"dp\":2,\"clocks_mhz\":[1410,1200,1000,400],"
                    "\"blocking_power_w\":83.64,\"profiling\":{\"warmup_iterations\":1,"
                    "\"iterations_per_clock\":1,\"min_clock_mhz\":500},"
                    "\"straggler\":{\"factor\":1.2,\"iterations\":2}}";
    assert_int_equal(req_parse_job_spec(t, strlen(t), &s, &err), 0);
    return s;
}

static inline job *new_job(const char *id)
{
    job_spec s = make_spec();
    uint8_t h[32] = {1};
    job *j = NULL;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(job_create(st, &s, id, h, 1, &j, &e), 0);
    assert_int_equal(store_commit(st), 0);
    return j;
}

static inline int tx_ok(int rc)
{
    if (rc == 0) return store_commit(st);
    store_rollback(st);
    return rc;
}

static inline void register_all(job *j)
{
    for (int r = 0; r < 4; r++) {
        req_rank rr = {r, r / 2, r % 2, 0, ""};
        int created, action;
        api_err e = {0};
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, &e)), 0);
        assert_true(created);
    }
}

static long g_iter;                 /* number of the next iteration post() reports */
static double g_bp;                 /* blocking power post() reports (0: none) */
static double g_fit_se, g_fit_crit; /* the attribution fit post() reports (0: none) */

/* One iteration of rank at clock mhz, windows from the GPU model; energy scaled by escale. */
static inline int post(job *j, int rank, long round, int mhz, double escale, int *action,
                       api_err *e)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    req_window w[4];
    for (int i = 0; i < 4; i++) {
        prs_instr in = i < 2 ? PRS_FORWARD : PRS_BACKWARD;
        w[i] = (req_window){in,
                            -1,
                            i % 2,
                            mhz,
                            prs_gpu_time_s(g, &g->work[in], mhz),
                            escale * prs_gpu_energy_j(g, &g->work[in], mhz)};
    }
    req_iteration it = {.iteration = g_iter++,
                        .time_s = 1.0,
                        .energy_j = 100.0,
                        .clock_mhz = mhz,
                        .plan_id = -1,
                        .blocking_power_w = g_bp,
                        .fit_rel_se = g_fit_se,
                        .fit_criterion = g_fit_crit,
                        .nwindows = 4,
                        .windows = w};
    req_results r = {rank, round, 1, &it, w, -1};
    assert_int_equal(store_begin(st), 0);
    return tx_ok(job_results(j, st, &r, action, e));
}

/* ---- running jobs for the plan-switch and straggler tests ---- */

/* A job of the given spec still registering with a frontier: a GPU-model profile (stage s
 * takes 1 + s/10 of the reference time) uploaded while registering, and planned. */
static inline job *early_planned_job(const char *id, const char *spec_text)
{
    job_spec s;
    prs_error err;
    assert_int_equal(req_parse_job_spec(spec_text, strlen(spec_text), &s, &err), 0);
    uint8_t h[32] = {2};
    job *j = NULL;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, id, h, 1, &j, &e)), 0);
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    char csv[8192];
    int n = snprintf(csv, sizeof csv, "stage,instruction,frequency,time,energy\n");
    for (int c = 0; c < s.stages; c++)
        for (int k = 0; k < s.nclocks; k++)
            for (int in = 0; in < 2; in++) {
                prs_gpu_work w = g->work[in];
                w.t_ref_s *= 1 + 0.1 * c;
                n += snprintf(csv + n, sizeof csv - (size_t)n, "%d,%s,%d,%.9g,%.9g\n", c,
                              in ? "backward" : "forward", s.clocks_mhz[k],
                              prs_gpu_time_s(g, &w, s.clocks_mhz[k]),
                              prs_gpu_energy_j(g, &w, s.clocks_mhz[k]));
            }
    int action = 0;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_upload_profile(j, st, csv, (size_t)n, &action, &e)), 0);
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    job_pipeline(j, &o.pipe);
    prs_frontier *f = NULL;
    assert_int_equal(prs_plan(j->profile, &o, &f, NULL), 0);
    char *plans;
    size_t plen;
    assert_int_equal(prs_frontier_to_plans(f, &plans, &plen, &err), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_plan_finished(j, st, f, plans, plen, 0.1, NULL, &e)), 0);
    free(plans);
    assert_int_equal(j->phase, JOB_REGISTERING);
    return j;
}

/* The same, then every rank registered with rank = slot index (dp, pp, tp): running. */
static inline job *running_job(const char *id, const char *spec_text)
{
    job *j = early_planned_job(id, spec_text);
    job_spec s = j->spec;
    int action = 0;
    api_err e = {0};
    for (int r = 0; r < j->world; r++) {
        int tp = r % s.tp, pp = r / s.tp % s.stages, dp = r / s.tp / s.stages, created;
        req_rank rr = {r, dp, pp, tp, ""};
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, &e)), 0);
    }
    assert_int_equal(j->phase, JOB_RUNNING);
    return j;
}

/* One running iteration of a rank: time_s, pace_s (0: none), plan_id (-1: none). */
static inline void post_iter(job *j, int rank, long iteration, double time_s, double pace_s,
                             long plan)
{
    req_iteration it = {.iteration = iteration,
                        .time_s = time_s,
                        .pace_s = pace_s,
                        .plan_id = plan,
                        .windows = NULL};
    req_results r = {rank, -1, 1, &it, NULL, -1};
    int action;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_results(j, st, &r, &action, &e)), 0);
}

/* The schedule of a rank, parsed. */
static inline json_t *schedule_of(const job *j, int rank)
{
    char *text = NULL;
    size_t len = 0;
    api_err e = {0};
    assert_int_equal(job_schedule(j, rank, &text, &len, &e), 0);
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    assert_non_null(o);
    return o;
}

static inline long lead_of(const job *j, long from, long to)
{
    double t = prs_frontier_point_at(j->frontier, (size_t)to)->eval_time_s;
    if (from >= 0) t = fmin(t, prs_frontier_point_at(j->frontier, (size_t)from)->eval_time_s);
    long n = (long)ceil(j->spec.switch_lead_s / t);
    return n > 2 ? n : 2;
}

static inline void set_straggler(job *j, int dp, double slowdown, int clear)
{
    req_straggler sr = {dp, 0, slowdown};
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(
        tx_ok(clear ? job_clear_straggler(j, st, dp, &e) : job_set_straggler(j, st, &sr, &e)), 0);
}

/* The job as a restarted server loads it from the store, in the phase given. */
static inline job *reload_as(const job *j, const char *phase)
{
    json_t *sj = spec_json(&j->spec);
    char *text = json_dumps(sj, JSON_COMPACT);
    json_decref(sj);
    store_job_row row = {
        j->id, j->token_hash,    text,         "", phase, "", j->sweep_index, j->round, 0,
        1,     j->bp_measured_w, j->bp_used_w, 0};
    job *k = NULL;
    int act;
    prs_error err;
    assert_int_equal(job_load(st, &row, &k, &act, &err), 0);
    free(text);
    return k;
}

static inline job *reload_running(const job *j)
{
    return reload_as(j, "running");
}

/* A running job of four pipelines with a straggler factor of 1.1 over 3 iterations. */
#define PACE_SPEC                                                                                  \
    "{\"stages\":2,\"microbatches\":2,\"dp\":4,\"tp\":2,\"switch_lead_s\":0,"                      \
    "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64,"                              \
    "\"straggler\":{\"factor\":1.1,\"iterations\":3}}"

#endif
