/* job.h: the state machine driven directly (no HTTP) on a scratch database: registration,
 * the profiling sweep (warm-up dropped, k per clock, late and early rounds, dominated clocks
 * ending the sweep), planning results, the lookup rule under explicit and automatic stragglers,
 * completion, reloading every piece of state from the store, results after profiling kept as
 * per-pipeline aggregates (no row each), and the plans.prs text kept in the store (the same
 * bytes as the file the core saves). */
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
static job_pipe pv(const job *j, int d)
{
    job_pipe v;
    job_pipe_view(j, d, &v);
    return v;
}

static char dir[256];
static store *st;

/* count(*) of a table's rows of job id, counted on a connection of its own. */
static long long stored_count(const char *table, const char *id)
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

static long long stored_windows(const char *id)
{
    return stored_count("windows", id);
}

static long long stored_rows(const char *id)
{
    return stored_count("measurements", id);
}

static int setup(void **state)
{
    (void)state;
    harness_tmpdir(dir, sizeof dir, "job");
    char db[300];
    snprintf(db, sizeof db, "%s/job.db", dir);
    return store_open(db, 0, &st, NULL);
}

static int teardown(void **state)
{
    (void)state;
    store_close(st);
    harness_rmdir(dir);
    return 0;
}

static job_spec make_spec(void)
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

static job *new_job(const char *id)
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

static int tx_ok(int rc)
{
    if (rc == 0) return store_commit(st);
    store_rollback(st);
    return rc;
}

static void register_all(job *j)
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
static int post(job *j, int rank, long round, int mhz, double escale, int *action, api_err *e)
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

/* The per-job energy series count all the job's GPUs: the plan's energies are one pipeline's with
 * one GPU per stage, and every stage runs on tp GPUs (an 8-way tensor-parallel job showed an
 * eighth of its savings). */
static void test_metrics_count_every_gpu(void **state)
{
    (void)state;
    job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    snprintf(j->id, sizeof j->id, "abc");
    snprintf(j->spec.model, sizeof j->spec.model, "m");
    j->spec.tp = 8;
    j->run_iterations = 5;
    j->run_energy_j = 1000;
    j->run_saved_j = 100;
    job_metric_row r;
    job_metric_row_of(j, &r);
    assert_true(fabs(r.value[JOB_METRIC_ENERGY] - 8000) < 1e-9);
    assert_true(fabs(r.value[JOB_METRIC_SAVED] - 800) < 1e-9);
    assert_true(fabs(r.value[JOB_METRIC_ITERATIONS] - 5) < 1e-9);
    free(j);
}

static void test_registration_and_sweep(void **state)
{
    (void)state;
    job *j = new_job("AAAAAAAAAAAAAAA1");
    assert_int_equal(j->phase, JOB_REGISTERING);
    assert_int_equal(j->nsweep, 3); /* 400 is below the floor */
    int action;
    api_err e = {0};
    /* Results before profiling: wrong phase. */
    assert_int_equal(post(j, 0, -1, 1410, 1, &action, &e), -1);
    assert_int_equal(e.http, 409);
    register_all(j);
    assert_int_equal(j->phase, JOB_PROFILING);

    char *stext = NULL;
    size_t tlen = 0;
    assert_int_equal(job_schedule(j, 3, &stext, &tlen, &e), 0);
    assert_int_equal(strlen(stext), tlen);
    json_t *sch = json_loads(stext, JSON_REJECT_DUPLICATES, NULL);
    free(stext);
    assert_non_null(sch);
    assert_int_equal(json_integer_value(json_object_get(sch, "clock_mhz")), 1410);
    assert_int_equal(json_array_size(json_object_get(sch, "clocks_mhz")), 4);
    assert_string_equal(json_string_value(json_object_get(sch, "schedule")), "1f1b");
    assert_int_equal(json_integer_value(json_object_get(sch, "stages")), 2);
    assert_int_equal(json_integer_value(json_object_get(sch, "microbatches")), 2);
    assert_int_equal(json_integer_value(json_object_get(sch, "virtual_stages")), 1);
    assert_null(json_object_get(sch, "from_iteration")); /* running only */
    json_decref(sch);

    /* Round 0: warm-up + 1 per rank. A future round is refused. */
    assert_int_equal(post(j, 0, 1, 1410, 1, &action, &e), -1);
    assert_int_equal(e.http, 409);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(post(j, r, 0, 1410, 1, &action, &e), 0);
        assert_int_equal(j->round, 0);
    }
    for (int r = 0; r < 3; r++)
        assert_int_equal(post(j, r, 0, 1410, 1, &action, &e), 0);
    assert_int_equal(j->round, 0);
    assert_int_equal(j->ranks_done, 3);
    assert_int_equal(post(j, 3, 0, 1410, 1, &action, &e), 0);
    assert_int_equal(j->round, 1); /* next clock */
    assert_int_equal(j->sweep[j->sweep_index], 1200);
    /* A late post for round 0 is stored and does not count for round 1. */
    assert_int_equal(post(j, 0, 0, 1410, 1, &action, &e), 0);
    assert_int_equal(j->round_iters[0], 0);
    assert_int_equal(j->measurements, 9);
    assert_int_equal(store_count_measurements(st, j->id), 9);

    /* Reload mid-sweep: same position. */
    job *k = NULL;
    int act;
    prs_error err;
    store_job_row row = {j->id, j->token_hash, "", "", "profiling", "", 1, 1, 0, 1, 0, 0, 0};
    json_t *sj = spec_json(&j->spec);
    char *text = json_dumps(sj, JSON_COMPACT);
    json_decref(sj);
    row.spec_json = text;
    assert_int_equal(job_load(st, &row, &k, &act, &err), 0);
    free(text);
    assert_int_equal(k->phase, JOB_PROFILING);
    assert_int_equal(k->nregistered, 4);
    assert_int_equal(k->measurements, 9);
    assert_int_equal(k->sweep_index, 1);
    job_free(k);

    /* Round 1 at 1200, round 2 at 1000: then the sweep ends and planning starts. */
    for (int round = 1; round <= 2; round++)
        for (int rep = 0; rep < 2; rep++)
            for (int r = 0; r < 4; r++) {
                action = JOB_ACT_NONE;
                assert_int_equal(post(j, r, round, j->sweep[round], 1, &action, &e), 0);
            }
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_int_equal(action, JOB_ACT_PLAN);
    assert_non_null(j->profile);
    /* 2 stages x 2 instructions x 3 clocks, warm-ups dropped. */
    assert_int_equal(prs_profile_nrows(j->profile), 12);
    char *csv = NULL, src[16];
    size_t len;
    assert_int_equal(store_get_profile(st, j->id, &csv, &len, src), 0);
    assert_string_equal(src, "measured");
    free(csv);

    /* Plan for real and finish. */
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    spec_pipeline(&j->spec, &o.pipe);
    prs_frontier *f = NULL;
    assert_int_equal(prs_plan(j->profile, &o, &f, NULL), 0);
    char *plans;
    size_t plen;
    assert_int_equal(prs_frontier_to_plans(f, &plans, &plen, &err), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_plan_finished(j, st, f, plans, plen, 0.5, NULL, &e)), 0);
    free(plans);
    assert_int_equal(j->phase, JOB_RUNNING);
    size_t fastest;
    assert_int_equal(prs_frontier_lookup(j->frontier, 0, &fastest), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)fastest);
    assert_int_equal(pv(j, 1).plan_id, (long)fastest);
    assert_true(j->allmax_energy_j > 0);

    /* Rank 3 (dp 1, pp 1) is told the stage-1 part of the fastest plan. */
    int *all = malloc(sizeof *all * 2 * 4);
    assert_int_equal(prs_frontier_plan(j->frontier, fastest, all, NULL), 0);
    assert_int_equal(job_schedule(j, 3, &stext, &tlen, &e), 0);
    sch = json_loads(stext, JSON_REJECT_DUPLICATES, NULL);
    free(stext);
    assert_non_null(sch);
    assert_string_equal(json_string_value(json_object_get(sch, "phase")), "running");
    assert_int_equal(json_integer_value(json_object_get(sch, "plan_id")), (long)fastest);
    json_t *cl = json_object_get(sch, "clocks_mhz");
    assert_int_equal(json_array_size(cl), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(json_integer_value(json_array_get(cl, (size_t)i)), all[4 + i]);
    assert_true(json_real_value(json_object_get(sch, "iteration_time_s")) > 0);
    assert_true(json_is_false(json_object_get(sch, "straggler")));
    json_decref(sch);
    free(all);

    /* A restarted client numbers its iterations from 0 again: after it registers again, the
     * detector counts them instead of waiting for the old numbers to come round. */
    long seen = pv(j, 0).iterations;
    for (int r = 0; r < 2; r++) { /* both ranks of pipeline 0: evaluated */
        g_iter = 1000;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, &e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen + 1);
    seen = pv(j, 0).iterations;
    for (int r = 0; r < 2; r++) {
        g_iter = 0;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, &e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen); /* an old number: ignored */
    {
        req_rank rr = {0, 0, 0, 0, ""};
        int created;
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, &e)), 0);
        assert_false(created);
    }
    for (int r = 0; r < 2; r++) {
        g_iter = 0;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, &e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen + 1);

    /* Explicit straggler: the other pipeline follows the lookup rule (once the switch the
     * restart announced is behind it). */
    g_iter = pv(j, 0).from_iteration;
    assert_int_equal(post(j, 0, -1, 1410, 1, &action, &e), 0);
    const prs_frontier_point *fp = prs_frontier_point_at(j->frontier, fastest);
    req_straggler sr = {1, 0, 1.5};
    long round0 = j->round;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_set_straggler(j, st, &sr, &e)), 0);
    size_t want;
    assert_int_equal(prs_frontier_lookup(j->frontier, 1.5 * fp->eval_time_s, &want), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)want);
    assert_int_equal(pv(j, 1).plan_id, (long)fastest);
    assert_int_equal(j->round, round0 + 1);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_clear_straggler(j, st, 1, &e)), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)fastest);
    assert_int_equal(j->round, round0 + 2);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_clear_straggler(j, st, 7, &e)), -1);
    assert_int_equal(e.http, 404);

    /* Complete; nothing more is accepted. */
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_complete(j, st, &e)), 0);
    assert_int_equal(j->phase, JOB_DONE);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_complete(j, st, &e)), -1);
    assert_int_equal(e.http, 409);
    job_free(j);
}

static void test_dominated_clock_ends_sweep(void **state)
{
    (void)state;
    job *j = new_job("AAAAAAAAAAAAAAA2");
    register_all(j);
    int action = 0;
    api_err e = {0};
    /* 1410 normal; 1200 costs 3x the energy: slower and costlier -> dominated. */
    for (int rep = 0; rep < 2; rep++)
        for (int r = 0; r < 4; r++)
            assert_int_equal(post(j, r, 0, 1410, 1, &action, &e), 0);
    for (int rep = 0; rep < 2; rep++)
        for (int r = 0; r < 4; r++)
            assert_int_equal(post(j, r, 1, 1200, 3, &action, &e), 0);
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_int_equal(action, JOB_ACT_PLAN);
    assert_int_equal(j->sweep_index, 1); /* 1000 never swept */
    assert_int_equal(prs_profile_nrows(j->profile), 8);

    /* A result while planning is folded into its pipeline (rank 2: dp 1), not stored as a row,
     * and the job loaded again (still planning, so planned again) has it. */
    long long rows = stored_rows(j->id), meas = j->measurements;
    g_iter = 700;
    assert_int_equal(post(j, 2, -1, 1410, 1, &action, &e), 0);
    assert_int_equal(stored_rows(j->id), rows);
    assert_int_equal(j->measurements, meas + 1);
    json_t *sj = spec_json(&j->spec);
    char *text = json_dumps(sj, JSON_COMPACT);
    json_decref(sj);
    store_job_row row = {
        j->id, j->token_hash, text, "", "planning", "", j->sweep_index, j->round, 0, 1, 0, 0, 0};
    job *k = NULL;
    prs_error err;
    assert_int_equal(job_load(st, &row, &k, &action, &err), 0);
    free(text);
    assert_int_equal(action, JOB_ACT_PLAN);
    assert_int_equal(k->measurements, meas + 1);
    assert_int_equal(k->pipes[1].newest, 700);
    assert_int_equal(k->pipes[1].reports, 1);
    assert_true(k->pipes[1].report_energy_j == 100.0);
    job_free(k);
    job_free(j);
}

static void test_profile_upload_and_failure(void **state)
{
    (void)state;
    job *j = new_job("AAAAAAAAAAAAAAA3");
    int action = 0;
    api_err e = {0};
    const char *one_stage = "stage,instruction,frequency,time,energy\n0,forward,1410,0.1,10\n"
                            "0,backward,1410,0.2,20\n";
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_upload_profile(j, st, one_stage, strlen(one_stage), &action, &e)),
                     -1);
    assert_int_equal(e.http, 400);
    assert_non_null(strstr(e.msg, "stage 1"));
    const char *two = "stage,instruction,frequency,time,energy\n0,forward,1410,0.1,10\n"
                      "0,backward,1410,0.2,20\n1,forward,1410,0.1,10\n1,backward,1410,0.2,20\n";
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_upload_profile(j, st, two, strlen(two), &action, &e)), 0);
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_int_equal(action, JOB_ACT_PLAN);
    assert_string_equal(j->profile_source, "uploaded");
    /* The planner failing puts the job in failed with the reason. */
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_plan_finished(j, st, NULL, NULL, 0, 0.1, "boom", &e)), 0);
    assert_int_equal(j->phase, JOB_FAILED);
    assert_non_null(strstr(j->reason, "boom"));
    json_t *s = job_status_json(j);
    assert_string_equal(json_string_value(json_object_get(s, "phase")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(s, "reason")), "boom"));
    json_decref(s);
    job_free(j);
}

static void test_config_key(void **state)
{
    (void)state;
    job_spec a = make_spec(), b;
    char ka[65], kb[65];
    job_config_key(&a, ka);
    assert_string_equal(ka, ""); /* no model: never reused */
    snprintf(a.model, sizeof a.model, "gpt3");
    job_config_key(&a, ka);
    assert_string_equal(ka, ""); /* no reuse key: never reused */
    memset(a.reuse_key_sha256, 'a', 64);
    b = a;
    job_config_key(&a, ka);
    job_config_key(&b, kb);
    assert_int_equal(strlen(ka), 64);
    assert_string_equal(ka, kb);
    b.dp = 8; /* the number of pipelines does not change a pipeline's plan */
    job_config_key(&b, kb);
    assert_string_equal(ka, kb);
    b.microbatches = 4;
    job_config_key(&b, kb);
    assert_string_not_equal(ka, kb);
    b = a;
    b.clocks_mhz[1] = 1215;
    job_config_key(&b, kb);
    assert_string_not_equal(ka, kb);
    b = a;
    b.reuse_key_sha256[63] = 'b'; /* another creator's key */
    job_config_key(&b, kb);
    assert_string_not_equal(ka, kb);
    b = a;
    b.reuse_frontier = 0;
    job_config_key(&b, kb);
    assert_string_equal(kb, "");
}

/* ---- running jobs for the plan-switch and straggler tests ---- */

static job *early_planned_job(const char *id, const char *spec_text);
static job *running_job(const char *id, const char *spec_text);

/* A frontier planned before the ranks were in, of a job completed before they were, never
 * served a plan: it is not reused (the docs promise it), while a job that ran is. */
static void test_early_frontier_not_reused(void **state)
{
    (void)state;
    static const char SPEC[] =
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,1200,1000],"
        "\"blocking_power_w\":83.64,\"model\":\"early-model\","
        "\"reuse_key\":\"a-team-secret-of-some-length\"}";
    job *a = early_planned_job("AAAAAAAAAAAAEAR1", SPEC);
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_complete(a, st, &e)), 0);
    assert_int_equal(a->phase, JOB_DONE);
    job_spec s;
    prs_error err;
    assert_int_equal(req_parse_job_spec(SPEC, strlen(SPEC), &s, &err), 0);
    uint8_t h[32] = {5};
    job *b = NULL;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, "AAAAAAAAAAAAEAR2", h, 2, &b, &e)), 0);
    assert_null(b->frontier);
    job *c = running_job("AAAAAAAAAAAAEAR3", SPEC);
    job *d = NULL;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, "AAAAAAAAAAAAEAR4", h, 3, &d, &e)), 0);
    assert_non_null(d->frontier);
    job_free(a);
    job_free(b);
    job_free(c);
    job_free(d);
}

/* A job of the given spec still registering with a frontier: a GPU-model profile (stage s
 * takes 1 + s/10 of the reference time) uploaded while registering, and planned. */
static job *early_planned_job(const char *id, const char *spec_text)
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
static job *running_job(const char *id, const char *spec_text)
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
static void post_iter(job *j, int rank, long iteration, double time_s, double pace_s, long plan)
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
static json_t *schedule_of(const job *j, int rank)
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

static long lead_of(const job *j, long from, long to)
{
    double t = prs_frontier_point_at(j->frontier, (size_t)to)->eval_time_s;
    if (from >= 0) t = fmin(t, prs_frontier_point_at(j->frontier, (size_t)from)->eval_time_s);
    long n = (long)ceil(j->spec.switch_lead_s / t);
    return n > 2 ? n : 2;
}

static void set_straggler(job *j, int dp, double slowdown, int clear)
{
    req_straggler sr = {dp, 0, slowdown};
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(
        tx_ok(clear ? job_clear_straggler(j, st, dp, &e) : job_set_straggler(j, st, &sr, &e)), 0);
}

/* Plans switch at a stated iteration: the lead, a replacement while a switch is pending, a
 * deferred change, the state after a reload and after a pipeline's ranks restart. */
/* A running job loaded again from the store, as a restarted server does. */

/* The job as a restarted server loads it from the store, in the phase given. */
static job *reload_as(const job *j, const char *phase)
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

static job *reload_running(const job *j)
{
    return reload_as(j, "running");
}

static void test_switch_iteration(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAA5",
                         "{\"stages\":2,\"microbatches\":2,\"dp\":2,\"tp\":2,\"switch_lead_s\":1.0,"
                         "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64}");
    long fastest = (long)j->fastest, lead = lead_of(j, -1, fastest);
    assert_true(lead > 2); /* 1 s of a sub-second plan */
    json_t *o = schedule_of(j, 5);
    assert_string_equal(json_string_value(json_object_get(o, "schedule")), "1f1b");
    assert_int_equal(json_integer_value(json_object_get(o, "stages")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "microbatches")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "virtual_stages")), 1);
    assert_int_equal(json_integer_value(json_object_get(o, "plan_id")), fastest);
    assert_int_equal(json_integer_value(json_object_get(o, "from_iteration")), -1 + lead);
    json_decref(o);

    /* Pipeline 0 reaches iteration 20 (rank 3 is its newest); pipeline 1 straggles. */
    for (long n = 0; n <= 20; n++)
        post_iter(j, n == 20 ? 3 : 0, n, 0.5, 0, -1);
    long round = j->round;
    set_straggler(j, 1, 1.5, 0);
    long slow = pv(j, 0).plan_id;
    assert_true(slow != fastest);
    assert_int_equal(j->round, round + 1);
    o = schedule_of(j, 2);
    assert_int_equal(json_integer_value(json_object_get(o, "plan_id")), slow);
    assert_int_equal(json_integer_value(json_object_get(o, "from_iteration")),
                     20 + lead_of(j, fastest, slow));
    json_decref(o);
    o = schedule_of(j, 4); /* the straggler keeps its plan and switch iteration */
    assert_int_equal(json_integer_value(json_object_get(o, "plan_id")), fastest);
    assert_int_equal(json_integer_value(json_object_get(o, "from_iteration")), -1 + lead);
    json_decref(o);

    /* Cleared at once: the lead is still there, so the change replaces the pending one. */
    long from = pv(j, 0).from_iteration;
    set_straggler(j, 1, 0, 1);
    assert_int_equal(pv(j, 0).plan_id, fastest);
    assert_int_equal(pv(j, 0).from_iteration, from);
    assert_int_equal(j->round, round + 2);

    /* One iteration before the switch: a new change waits until the switch happened. */
    set_straggler(j, 1, 1.5, 0);
    from = pv(j, 0).from_iteration;
    post_iter(j, 1, from - 1, 0.5, 0, -1);
    round = j->round;
    set_straggler(j, 1, 0, 1); /* a new rule (a new round) that pipeline 0 must hold back */
    assert_int_equal(pv(j, 0).plan_id, slow);
    assert_int_equal(pv(j, 0).want_plan, fastest);
    assert_int_equal(j->round, round + 1);
    post_iter(j, 0, from, 0.5, 0, -1);
    assert_int_equal(pv(j, 0).plan_id, fastest);
    assert_int_equal(pv(j, 0).prev_plan_id, slow);
    assert_int_equal(pv(j, 0).from_iteration, from + lead_of(j, slow, fastest));
    assert_int_equal(j->round, round + 2);

    /* Reloaded from the store: the same plans, switch iterations and newest iterations. */
    job *k = reload_running(j);
    for (int d = 0; d < 2; d++) {
        assert_int_equal(pv(k, d).plan_id, pv(j, d).plan_id);
        assert_int_equal(pv(k, d).prev_plan_id, pv(j, d).prev_plan_id);
        assert_int_equal(pv(k, d).from_iteration, pv(j, d).from_iteration);
        assert_int_equal(pv(k, d).newest, pv(j, d).newest);
    }
    job_free(k);

    /* Pipeline 0's ranks restart (numbering from 0): its plan is announced again from the
     * lead, not from the old numbers. */
    round = j->round;
    req_rank rr = {1, 0, 0, 1, ""};
    int created, action;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, &e)), 0);
    assert_int_equal(pv(j, 0).plan_id, fastest);
    assert_int_equal(pv(j, 0).newest, -1);
    assert_int_equal(pv(j, 0).from_iteration, -1 + lead_of(j, slow, fastest));
    assert_int_equal(j->round, round + 1);
    job_free(j);
}

/* A pipeline that runs faster in wall-clock time than its plan says (here 100 iterations a
 * second of plans near 0.5 s, as its ranks' wall_s tell) gets switch_lead_s of wall-clock time at
 * its own pace as the lead, so its ranks still hear of the switch in time; the pace is stored
 * with the pipeline and holds in a server that loads the job again. */
static void test_switch_lead_pace(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAP7",
                         "{\"stages\":2,\"microbatches\":2,\"dp\":2,\"tp\":2,\"switch_lead_s\":1.0,"
                         "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64}");
    long fastest = (long)j->fastest;
    for (long n = 0; n <= 250; n++) {
        req_iteration it = {.iteration = n, .time_s = 0.5, .plan_id = -1, .wall_s = 0.01};
        req_results r = {0, -1, 1, &it, NULL, -1};
        int action;
        api_err e = {0};
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_results(j, st, &r, &action, &e)), 0);
    }
    set_straggler(j, 1, 1.5, 0);
    long slow = pv(j, 0).plan_id;
    assert_true(slow != fastest);
    long plan_lead = lead_of(j, fastest, slow);
    assert_true(plan_lead < 100);
    long from = pv(j, 0).from_iteration;
    printf("lead at 100 iterations/s: %ld iterations (%ld from the plans' times)\n", from - 250,
           plan_lead);
    assert_true(from - 250 >= 100 && from - 250 <= 101);

    job *k = reload_running(j);
    assert_true(fabs(pv(k, 0).pace.hz - pv(j, 0).pace.hz) < 1e-9 * pv(j, 0).pace.hz);
    assert_true(pv(k, 1).pace.hz == 0); /* its ranks never said */
    job_free(k);

    /* Windows posted while running are checked, then dropped: only profiling stores them. */
    long long before = stored_windows(j->id);
    req_window w[2] = {{PRS_FORWARD, -1, 0, 1410, 0.01, 2.0},
                       {PRS_BACKWARD, -1, 0, 1410, 0.02, 4.0}};
    req_iteration it = {
        .iteration = 251, .time_s = 0.5, .plan_id = -1, .nwindows = 2, .windows = w};
    req_results r = {0, -1, 1, &it, w, -1};
    int action;
    api_err e = {0};
    long long meas = j->measurements;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_results(j, st, &r, &action, &e)), 0);
    assert_int_equal(j->measurements, meas + 1);
    assert_int_equal(stored_windows(j->id), before);
    job_free(j);
}

/* Results posted while running are no rows of their own: a post of many iterations writes one
 * pipeline row, the status's count includes them, and the aggregates and the newest iteration
 * come back when the job is loaded again. A pipeline row from before schema 5 (no newest
 * stored) next to a measurement row of the running phase, as an older server left them, loads
 * with both counted and the newest iteration taken from the rows. */
static void test_running_aggregates(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAG1", "{\"stages\":2,\"microbatches\":2,\"dp\":2,\"tp\":1,"
                                             "\"clocks_mhz\":[1410,1200,1000,800],"
                                             "\"blocking_power_w\":83.64}");
    long long rows = stored_rows(j->id), meas = j->measurements;
    assert_int_equal(rows, meas);
    req_iteration its[64];
    for (int i = 0; i < 64; i++)
        its[i] = (req_iteration){.iteration = i, .time_s = 0.5, .energy_j = 200, .plan_id = -1};
    for (int rank = 0; rank < 4; rank++) {
        req_results r = {rank, -1, 64, its, NULL, -1};
        int action;
        api_err e = {0};
        long long changes = store_total_changes(st);
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_results(j, st, &r, &action, &e)), 0);
        assert_int_equal(store_total_changes(st) - changes, 1); /* the pipeline's row */
    }
    assert_int_equal(stored_rows(j->id), rows);
    assert_int_equal(j->measurements, meas + 4 * 64);
    json_t *o = job_status_json(j);
    json_t *rep = json_object_get(json_array_get(json_object_get(o, "pipelines"), 1), "reported");
    assert_int_equal(json_integer_value(json_object_get(rep, "iterations")), 128);
    assert_true(fabs(json_real_value(json_object_get(rep, "energy_j")) - 128 * 200.0) < 1e-6);
    assert_true(fabs(json_real_value(json_object_get(rep, "mean_time_s")) - 0.5) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(o, "measurements")), meas + 256);
    json_decref(o);

    job *k = reload_running(j);
    assert_int_equal(k->measurements, j->measurements);
    for (int d = 0; d < 2; d++) {
        assert_int_equal(k->pipes[d].reports, 128);
        assert_int_equal(k->pipes[d].newest, 63);
        assert_true(k->pipes[d].report_time_s == j->pipes[d].report_time_s);
        assert_true(k->pipes[d].report_energy_j == j->pipes[d].report_energy_j);
    }
    job_free(k);

    /* Pipeline 0's ranks restart: its stored newest iteration (-1) holds against rows with
     * higher numbers. Pipeline 1's row as schema 4 wrote it: the rows tell its newest. */
    store_meas_row old = {2, "running", 0, 5000, 1410, 0.5, 200, 0, -1, 0, 0};
    long long id;
    store_pipe_row p1 = {.dp = 1,
                         .plan_id = j->pipes[1].plan_id,
                         .prev_plan_id = -1,
                         .newest = STORE_NEWEST_UNKNOWN};
    req_rank rr = {0, 0, 0, 0, ""};
    int created, action;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(store_insert_measurement(st, j->id, &old, &id), 0);
    old.rank = 0;
    assert_int_equal(store_insert_measurement(st, j->id, &old, &id), 0);
    assert_int_equal(store_put_pipeline(st, j->id, &p1), 0);
    assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, &e)), 0);
    k = reload_running(j);
    assert_int_equal(k->pipes[0].newest, -1);
    assert_int_equal(k->pipes[1].newest, 5000);
    assert_int_equal(k->pipes[1].reports, 0);
    assert_int_equal(k->measurements, meas + 128 + 2);
    job_free(k);
    job_free(j);
}

static double time_of(const job *j, long plan)
{
    return prs_frontier_point_at(j->frontier, (size_t)plan)->eval_time_s;
}

static void set_cap(job *j, double watts)
{
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_set_power_cap(j, st, watts, &e)), 0);
}

/* A power cap and a straggler together: every pipeline runs the slower of the cap's plan and
 * the plan the straggler rule gives it; lifting the cap leaves the straggler rule alone. */
static void test_cap_with_straggler(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAD1", "{\"stages\":2,\"microbatches\":4,\"dp\":2,\"tp\":1,"
                                             "\"clocks_mhz\":[1410,1300,1200,1100,1000,900,800],"
                                             "\"blocking_power_w\":83.64}");
    long fastest = (long)j->fastest;
    assert_int_equal(job_power_prepare(j), 0);
    set_straggler(j, 1, 1.3, 0);
    long slow = pv(j, 0).plan_id;
    assert_true(time_of(j, slow) > time_of(j, fastest));
    assert_int_equal(pv(j, 1).plan_id, fastest);

    /* A loose cap (just under the fastest plan's peak): its plan is faster than the lookup's,
     * so pipeline 0 keeps the lookup plan and only the straggler slows to the cap's plan. */
    double peak_fastest = j->powers.peak_w[fastest], peak_slow = j->powers.peak_w[slow];
    set_cap(j, 2 * peak_fastest * 0.999);
    int feasible = 0;
    long loose = job_cap_plan(j, &feasible);
    assert_true(feasible);
    assert_true(loose != fastest && time_of(j, loose) < time_of(j, slow));
    assert_int_equal(pv(j, 0).plan_id, slow);
    assert_int_equal(pv(j, 1).plan_id, loose);

    /* A tight cap (under the lookup plan's peak): both pipelines run the cap's plan. */
    set_cap(j, 2 * peak_slow * 0.98);
    long tight = job_cap_plan(j, &feasible);
    assert_true(feasible);
    assert_true(time_of(j, tight) > time_of(j, slow));
    assert_true(j->powers.peak_w[tight] <= peak_slow * 0.98);
    assert_int_equal(pv(j, 0).plan_id, tight);
    assert_int_equal(pv(j, 1).plan_id, tight);

    /* Lifted: the straggler rule alone again. */
    set_cap(j, 0);
    assert_int_equal(job_cap_plan(j, NULL), -1);
    assert_int_equal(pv(j, 0).plan_id, slow);
    assert_int_equal(pv(j, 1).plan_id, fastest);
    job_free(j);
}

/* ---- automatic stragglers on paces ---- */

#define PDP 4    /* pipelines */
#define PRANKS 4 /* ranks per pipeline: 2 stages x tp 2 */

/* Ranks that follow the schedule as a client does: each pipeline runs its current plan until
 * the iteration the schedule names, then the announced one. */
typedef struct sim_pipes {
    job *j;
    long cur[PDP]; /* plan each pipeline runs now (-1: none yet, the highest clocks) */
} sim_pipes;

static double plan_t(const job *j, long plan)
{
    return prs_frontier_point_at(j->frontier, (size_t)(plan >= 0 ? plan : (long)j->fastest))
        ->eval_time_s;
}

enum { WITH_PACE, SYNC_NO_PACE, OWN_TIME_NO_PACE };

/* Iteration n of every pipeline: pipeline d's computations take slow[d] times its plan's time.
 * WITH_PACE: every rank reports the same synchronised iteration time (the slowest pipeline's,
 * plus an all-reduce), its own pace (the pipeline's, a little less on all but one rank) and the
 * plan it ran. SYNC_NO_PACE: the same without paces. OWN_TIME_NO_PACE: unsynchronised, each
 * pipeline reports its own time and no pace. skip: a rank that does not report (-1: none). */
static void sim_iteration_all(sim_pipes *sp, long n, const double *slow, int mode, int skip)
{
    job *j = sp->j;
    double pace[PDP], sync = 0;
    for (int d = 0; d < PDP; d++) {
        json_t *o = schedule_of(j, d * PRANKS);
        long plan = json_integer_value(json_object_get(o, "plan_id"));
        if (n >= json_integer_value(json_object_get(o, "from_iteration"))) sp->cur[d] = plan;
        json_decref(o);
        pace[d] = slow[d] * plan_t(j, sp->cur[d]);
        sync = fmax(sync, pace[d]);
    }
    for (int d = 0; d < PDP; d++)
        for (int r = 0; r < PRANKS; r++) {
            int rank = d * PRANKS + r;
            if (rank == skip) continue;
            double p = pace[d] * (r == 1 ? 1.0 : 0.97 - 0.01 * r);
            post_iter(j, rank, n, mode == OWN_TIME_NO_PACE ? pace[d] : sync + 0.01,
                      mode == WITH_PACE ? p : 0, sp->cur[d]);
        }
}

static int n_auto(const job *j)
{
    int n = 0;
    for (int d = 0; d < PDP; d++)
        n += pv(j, d).straggler == STRAGGLER_AUTO;
    return n;
}

#define PACE_SPEC                                                                                  \
    "{\"stages\":2,\"microbatches\":2,\"dp\":4,\"tp\":2,\"switch_lead_s\":0,"                      \
    "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64,"                              \
    "\"straggler\":{\"factor\":1.1,\"iterations\":3}}"

/* Synchronous data parallelism: every pipeline reports the same iteration time, so only the
 * paces tell the straggler. Pipeline 2 computes 1.2x slower from iteration 10 to 29. */
static void test_pace_straggler(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAA6", PACE_SPEC);
    sim_pipes sp = {j, {-1, -1, -1, -1}};
    int k = j->spec.straggler_iterations;
    long fastest = (long)j->fastest, detected = -1, cleared = -1;
    double tf = plan_t(j, fastest);
    for (long n = 0; n < 50; n++) {
        double slow[PDP] = {1, 1, n >= 10 && n < 30 ? 1.2 : 1, 1};
        sim_iteration_all(&sp, n, slow, WITH_PACE, -1);
        if (n < 10) assert_int_equal(n_auto(j), 0);
        if (detected < 0 && pv(j, 2).straggler == STRAGGLER_AUTO) detected = n;
        if (detected >= 0 && cleared < 0 && n >= 30 && !pv(j, 2).straggler) cleared = n;
        assert_true(n_auto(j) <= 1);
        if (detected >= 0 && cleared < 0) {
            assert_int_equal(pv(j, 2).straggler, STRAGGLER_AUTO);
            double tprime = pv(j, 2).straggler_time_s;
            assert_true(fabs(tprime - 1.2 * tf) <= 0.02 * 1.2 * tf);
            size_t want;
            assert_int_equal(prs_frontier_lookup(j->frontier, tprime, &want), 0);
            for (int d = 0; d < PDP; d++)
                assert_int_equal(pv(j, d).plan_id, d == 2 ? fastest : (long)want);
            assert_true((long)want != fastest);
        }
    }
    assert_true(detected >= 10 && detected <= 10 + k); /* within k + 1 iterations */
    assert_true(cleared >= 30 && cleared <= 30 + k);
    for (int d = 0; d < PDP; d++)
        assert_int_equal(pv(j, d).plan_id, fastest);
    job_free(j);
}

/* The default threshold catches the slowdown it is meant for: a pipeline 1.2x slower (with
 * +-3 % of noise on its pace) is detected within straggler.iterations + 1 iterations with no
 * straggler settings in the spec. (The default was once 1.2 itself, compared with '>': a 1.2x
 * pipeline was then caught only by noise, and here never.) */
static void test_default_factor_catches_1_2(void **state)
{
    (void)state;
    job *j =
        running_job("AAAAAAAAAAAAAAB6", "{\"stages\":2,\"microbatches\":2,\"dp\":4,\"tp\":2,"
                                        "\"switch_lead_s\":0,\"clocks_mhz\":[1410,1200,1000,800],"
                                        "\"blocking_power_w\":83.64}");
    sim_pipes sp = {j, {-1, -1, -1, -1}};
    int k = j->spec.straggler_iterations;
    assert_true(j->spec.straggler_factor < 1.2); /* below what it must catch */
    long detected = -1;
    for (long n = 0; n < 10 + 4 * k && detected < 0; n++) {
        double noise = 0.03 * (n % 3 == 0 ? -1 : n % 3 == 1 ? 0 : 1);
        double slow[PDP] = {1, 1, n >= 10 ? 1.2 * (1 + noise) : 1, 1};
        sim_iteration_all(&sp, n, slow, WITH_PACE, -1);
        if (n < 10) assert_int_equal(n_auto(j), 0);
        if (pv(j, 2).straggler == STRAGGLER_AUTO) detected = n;
    }
    print_message("default factor %.2f: a 1.2x pipeline detected at iteration %ld\n",
                  j->spec.straggler_factor, detected);
    assert_true(detected >= 10 && detected <= 10 + k);
    job_free(j);
}

/* Without paces the iteration times are used, as before: equal synchronised times never single
 * out a pipeline; a pipeline that reports longer times is detected with T' = its time. */
static void test_time_straggler_without_pace(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAA7", PACE_SPEC);
    sim_pipes sp = {j, {-1, -1, -1, -1}};
    double tf = plan_t(j, (long)j->fastest);
    for (long n = 0; n < 10; n++) { /* one pipeline computes slower; all report the same time */
        double slow[PDP] = {1, 1.3, 1, 1};
        sim_iteration_all(&sp, n, slow, SYNC_NO_PACE, -1);
    }
    assert_int_equal(n_auto(j), 0);
    long n = 10;
    for (; n < 20 && !pv(j, 1).straggler; n++) {
        double slow[PDP] = {1, 1.3, 1, 1};
        sim_iteration_all(&sp, n, slow, OWN_TIME_NO_PACE, -1);
    }
    assert_int_equal(pv(j, 1).straggler, STRAGGLER_AUTO);
    assert_true(n - 1 <= 10 + j->spec.straggler_iterations); /* detected within k + 1 */
    assert_true(fabs(pv(j, 1).straggler_time_s - 1.3 * tf) < 1e-9 * tf);
    job_free(j);
}

/* An iteration is evaluated once all ranks of the pipeline reported it, or when a rank reports
 * JOB_PACE_LAG iterations later; a report of an evaluated iteration is ignored. */
static void test_evaluation_rule(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAA8", PACE_SPEC);
    sim_pipes sp = {j, {-1, -1, -1, -1}};
    double one[PDP] = {1, 1, 1, 1};
    for (long n = 0; n < 5; n++)
        sim_iteration_all(&sp, n, one, WITH_PACE, -1);
    assert_int_equal(pv(j, 0).last_iteration, 4);
    const long lag = JOB_PACE_LAG, last = 5 + lag - 1; /* rank 3 (pipeline 0) misses 5..last */
    for (long n = 5; n <= last; n++) {
        sim_iteration_all(&sp, n, one, WITH_PACE, 3);
        assert_int_equal(pv(j, 0).last_iteration, 4);
        assert_int_equal(pv(j, 1).last_iteration, n);
    }
    assert_int_equal(pv(j, 0).npend, lag);
    long seen = pv(j, 0).iterations;
    post_iter(j, 0, last + 1, 1.0, 0.9, -1);
    assert_int_equal(pv(j, 0).last_iteration, 5);
    assert_int_equal(pv(j, 0).iterations, seen + 1);
    post_iter(j, 3, 5, 1.0, 5.0, -1); /* too late: no effect */
    assert_int_equal(pv(j, 0).iterations, seen + 1);
    assert_int_equal(pv(j, 0).over, 0);
    for (long n = 6; n <= last; n++) /* rank 3 catches up: each iteration is complete */
        post_iter(j, 3, n, 1.0, 0.9, -1);
    assert_int_equal(pv(j, 0).last_iteration, last);
    for (int r = 1; r < PRANKS; r++)
        post_iter(j, r, last + 1, 1.0, 0.9, -1);
    assert_int_equal(pv(j, 0).last_iteration, last + 1);
    assert_int_equal(pv(j, 0).npend, 0);
    job_free(j);
}

/* ---- measured blocking power ---- */

/* A job of make_spec's shape (a model named after the job, blocking power as given or none: bp < 0)
 * profiled to planning; rank r reports blocking power 80 + r in its used iterations (warm-ups say
 * 500) when report is set. */
static job *profiled_job(const char *id, double bp, int report)
{
    job_spec s = make_spec();
    snprintf(s.model, sizeof s.model, "model-%s", id);
    memset(s.reuse_key_sha256, 'c', 64);
    s.has_blocking_power = bp >= 0;
    s.blocking_power_w = bp >= 0 ? bp : 0;
    uint8_t h[32] = {3};
    job *j = NULL;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, id, h, 1, &j, &e)), 0);
    register_all(j);
    int action = 0;
    for (int round = 0; j->phase == JOB_PROFILING && round < 3; round++)
        for (int rep = 0; rep < 2; rep++)
            for (int r = 0; r < 4; r++) {
                g_bp = report ? (rep == 0 ? 500 : 80 + r) : 0;
                assert_int_equal(post(j, r, round, j->sweep[round], 1, &action, &e), 0);
            }
    g_bp = 0;
    return j;
}

static void plan_it(job *j)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    job_pipeline(j, &o.pipe);
    prs_frontier *f = NULL;
    prs_error err;
    assert_int_equal(prs_plan(j->profile, &o, &f, NULL), 0);
    assert_true(prs_frontier_pipeline(f)->blocking_power_w == j->bp_used_w);
    char *plans;
    size_t plen;
    assert_int_equal(prs_frontier_to_plans(f, &plans, &plen, &err), 0);
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_plan_finished(j, st, f, plans, plen, 0.1, NULL, &e)), 0);
    free(plans);
}

static void check_bp_status(const job *j, double spec, double measured, double used)
{
    json_t *o = job_status_json(j);
    json_t *bp = json_object_get(o, "blocking_power");
    double want[3] = {spec, measured, used};
    const char *keys[3] = {"spec_w", "measured_w", "used_w"};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(bp, keys[i]);
        if (want[i] < 0)
            assert_true(json_is_null(v));
        else
            assert_true(fabs(json_number_value(v) - want[i]) < 1e-9);
    }
    json_decref(o);
}

/* Without a blocking power in the spec the job plans with the median of the ranks' estimates;
 * with one it plans with the spec's and shows both; with neither it fails. Frontier reuse keeps
 * the two kinds apart and carries the measured value along. */
static void test_measured_blocking_power(void **state)
{
    (void)state;
    job *j = profiled_job("AAAAAAAAAAAAAAB1", -1, 1);
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_true(j->bp_measured_w == 81.5); /* median of 80..83; warm-ups not used */
    assert_true(j->bp_used_w == 81.5);
    prs_pipeline pipe;
    job_pipeline(j, &pipe);
    assert_true(pipe.blocking_power_w == 81.5);
    check_bp_status(j, -1, 81.5, 81.5);
    plan_it(j);
    assert_int_equal(j->phase, JOB_RUNNING);

    /* Reloaded: the same values. */
    json_t *sj = spec_json(&j->spec);
    char *text = json_dumps(sj, JSON_COMPACT);
    json_decref(sj);
    store_job_row row = {j->id, j->token_hash, text, "", "running", "", 0, 0, 0, 1, 81.5, 81.5, 0};
    job *k = NULL;
    int act;
    prs_error err;
    assert_int_equal(job_load(st, &row, &k, &act, &err), 0);
    free(text);
    check_bp_status(k, -1, 81.5, 81.5);
    job_free(k);

    /* A second job of the same configuration reuses the frontier and its blocking power. */
    job_spec s = j->spec;
    uint8_t h[32] = {4};
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, "AAAAAAAAAAAAAAB2", h, 2, &k, &e)), 0);
    assert_string_equal(k->profile_source, "reused");
    check_bp_status(k, -1, 81.5, 81.5);
    job_free(k);
    /* ... but not without its creator's reuse key, nor with another. */
    for (int other = 0; other < 2; other++) {
        job_spec o = s;
        if (other)
            o.reuse_key_sha256[0] = 'd';
        else
            o.reuse_key_sha256[0] = '\0';
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_create(st, &o, other ? "AAAAAAAAAAAAAAK2" : "AAAAAAAAAAAAAAK1",
                                          h, 2, &k, &e)),
                         0);
        assert_null(k->frontier);
        assert_string_not_equal(k->profile_source, "reused");
        job_free(k);
    }
    /* A stored frontier that does not fit the spec (another pipeline shape under the same key,
     * as corrupted data would have) is not adopted: the job profiles. */
    job *other = running_job("AAAAAAAAAAAAAAK3",
                             "{\"stages\":2,\"microbatches\":4,\"dp\":2,\"tp\":1,"
                             "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64}");
    char *plans = NULL;
    size_t plen = 0;
    assert_int_equal(prs_frontier_to_plans(other->frontier, &plans, &plen, NULL), 0);
    void *good = NULL;
    size_t glen = 0;
    assert_int_equal(store_get_frontier(st, j->id, &good, &glen), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(store_put_frontier(st, j->id, j->config_key, plans, plen, 0)), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, "AAAAAAAAAAAAAAK4", h, 2, &k, &e)), 0);
    assert_null(k->frontier);
    assert_string_not_equal(k->profile_source, "reused");
    job_free(k);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(store_put_frontier(st, j->id, j->config_key, good, glen, 0)), 0);
    free(good);
    free(plans);
    job_free(other);
    /* Only a running or done job's frontier is reused: not a failed one's. */
    row.phase = "failed";
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(store_update_job(st, &row), 0);
    assert_int_equal(store_commit(st), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, &s, "AAAAAAAAAAAAAAC9", h, 3, &k, &e)), 0);
    assert_null(k->frontier);
    assert_string_not_equal(k->profile_source, "reused");
    job_free(k);
    /* A pinned blocking power is another configuration. */
    s.has_blocking_power = 1;
    s.blocking_power_w = 81.5;
    char k1[65], k2[65];
    job_config_key(&j->spec, k1);
    job_config_key(&s, k2);
    assert_string_not_equal(k1, k2);
    job_free(j);

    /* Pinned: planned with the spec's, the measured one shown beside it. */
    j = profiled_job("AAAAAAAAAAAAAAB3", 90, 1);
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_true(j->bp_used_w == 90);
    check_bp_status(j, 90, 81.5, 90);
    job_free(j);
    j = profiled_job("AAAAAAAAAAAAAAB4", 90, 0);
    assert_int_equal(j->phase, JOB_PLANNING);
    check_bp_status(j, 90, -1, 90);
    job_free(j);

    /* Neither: failed, with the reason. */
    j = profiled_job("AAAAAAAAAAAAAAB5", -1, 0);
    assert_int_equal(j->phase, JOB_FAILED);
    assert_non_null(strstr(j->reason, "blocking_power_w"));
    check_bp_status(j, -1, -1, -1);
    job_free(j);
}

/* The plans.prs text the store keeps is byte for byte the file prs_frontier_save writes, and
 * parses back into the same frontier; damaged text is refused with a message naming it. */
static void test_plans_text_matches_file(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAAA9", PACE_SPEC);
    char *text = NULL, *again = NULL, sub[300], path[320];
    size_t len = 0, alen = 0;
    prs_error err = {0, ""};
    assert_int_equal(prs_frontier_to_plans(j->frontier, &text, &len, &err), 0);
    snprintf(sub, sizeof sub, "%s/saved", dir);
    assert_int_equal(prs_frontier_save(j->frontier, sub, &err), 0);
    snprintf(path, sizeof path, "%s/plans.prs", sub);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *file = malloc(len + 2);
    assert_non_null(file);
    size_t flen = fread(file, 1, len + 2, f);
    fclose(f);
    assert_int_equal(flen, len);
    assert_memory_equal(file, text, len);
    free(file);
    static const char *const names[] = {"plans.prs", "frontier.csv", "frontier-detail.csv"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        unlink(path);
    }
    rmdir(sub);

    prs_frontier *back = NULL;
    assert_int_equal(prs_frontier_from_plans("stored frontier", text, len, &back, &err), 0);
    assert_int_equal(prs_frontier_size(back), prs_frontier_size(j->frontier));
    assert_int_equal(prs_frontier_to_plans(back, &again, &alen, &err), 0);
    assert_int_equal(alen, len);
    assert_memory_equal(again, text, len);
    prs_frontier_free(back);
    free(again);

    assert_int_equal(prs_frontier_from_plans("stored frontier", text, len / 2, &back, &err),
                     PRS_EPARSE);
    assert_null(back);
    assert_non_null(strstr(err.msg, "stored frontier:"));
    assert_int_equal(prs_frontier_from_plans("stored frontier", "", 0, &back, &err), PRS_EPARSE);
    assert_null(back);
    free(text);
    job_free(j);
}

/* The plan state of pipeline d as two views must agree on: plan, switch iteration, the plan
 * before, a held-back change, the last rule applied. */
static void same_view(const job *a, const job *b, int d)
{
    job_pipe x = pv(a, d), y = pv(b, d);
    assert_int_equal(x.plan_id, y.plan_id);
    assert_int_equal(x.from_iteration, y.from_iteration);
    assert_int_equal(x.prev_plan_id, y.prev_plan_id);
    assert_int_equal(x.want_plan, y.want_plan);
    assert_int_equal(x.epoch, y.epoch);
    assert_int_equal(x.straggler, y.straggler);
}

/* Rules applied late (job_assign.h): pipeline 3 never reports while pipeline 0 straggles and
 * recovers 150 times (pipelines 1 and 2 report now and then). The ring never holds more than
 * JOB_RULES rules, nor the store; what pipeline 3 shows is the plan the last rule gives it (or
 * that plan held back behind its pending switch); what it applies when it reports is what it
 * showed; and a reload at any point shows every pipeline as before. */
static void test_rules_applied_late(void **state)
{
    (void)state;
    job *j = running_job("AAAAAAAAAAAAAA11",
                         "{\"stages\":2,\"microbatches\":2,\"dp\":4,\"switch_lead_s\":0.5,"
                         "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64}");
    long fastest = (long)j->fastest;
    long n = 0;
    for (int k = 0; k < 150; k++) {
        set_straggler(j, 0, 1.2 + 0.02 * (k % 7), k % 2);
        if (k % 3 == 0)
            for (int d = 1; d <= 2; d++)
                for (int pp = 0; pp < 2; pp++)
                    post_iter(j, d * 2 + pp, n, 0.5, 0, -1);
        n++;
        assert_true(j->epoch - j->swept <= JOB_RULES - 1);
        long long rows = stored_count("rules", j->id);
        assert_true(rows >= 1 && rows <= JOB_RULES);
        job_pipe v = pv(j, 3);
        long want = k % 2                     ? fastest
                    : pv(j, 1).want_plan >= 0 ? pv(j, 1).want_plan
                                              : pv(j, 1).plan_id;
        assert_true(v.plan_id == want || v.want_plan == want);
        if (k % 37 == 5) {
            job *r = reload_running(j);
            for (int d = 0; d < 4; d++)
                same_view(j, r, d);
            job_free(r);
        }
    }
    assert_true(j->epoch >= 150);
    /* Pipeline 3 reports at last: it applies what it showed. */
    job_pipe before = pv(j, 3);
    job_catch_up(j, &j->pipes[3]);
    assert_int_equal(j->pipes[3].plan_id, before.plan_id);
    assert_int_equal(j->pipes[3].from_iteration, before.from_iteration);
    assert_int_equal(j->pipes[3].want_plan, before.want_plan);
    post_iter(j, 6, n, 0.5, 0, -1);
    post_iter(j, 7, n, 0.5, 0, -1);
    job *r = reload_running(j);
    for (int d = 0; d < 4; d++)
        same_view(j, r, d);
    job_free(r);
    job_free(j);
}

/* A job of more than 64 pipelines (the detector keeps the median of all their paces and
 * refreshes it every dp / 16 evaluations): 96 pipelines of one rank, pipeline 7 computes 1.3x
 * slower from iteration 5. It alone is detected, within the straggler rule's iterations plus
 * the median's refresh, and every other pipeline gets the lookup's plan. */
static void test_many_pipelines_straggler(void **state)
{
    (void)state;
    enum { DP = 96 };
    job *j = running_job("AAAAAAAAAAAAAA12",
                         "{\"stages\":1,\"microbatches\":2,\"dp\":96,\"switch_lead_s\":0,"
                         "\"clocks_mhz\":[1410,1200,1000,800],\"blocking_power_w\":83.64,"
                         "\"straggler\":{\"factor\":1.1,\"iterations\":3}}");
    long fastest = (long)j->fastest, detected = -1;
    double tf = plan_t(j, fastest);
    for (long n = 0; n < 16 && detected < 0; n++) {
        for (int d = 0; d < DP; d++) {
            double pace = (d == 7 && n >= 5 ? 1.3 : 1.0) * tf;
            post_iter(j, d, n, pace + 0.01, pace, fastest);
        }
        int autos = 0;
        for (int d = 0; d < DP; d++)
            autos += pv(j, d).straggler == STRAGGLER_AUTO;
        if (pv(j, 7).straggler == STRAGGLER_AUTO) detected = n;
        assert_true(autos == (detected >= 0));
    }
    assert_true(detected >= 5 + 2 && detected <= 5 + 3 + 1);
    size_t want;
    assert_int_equal(prs_frontier_lookup(j->frontier, pv(j, 7).straggler_time_s, &want), 0);
    assert_true((long)want != fastest);
    for (int d = 0; d < DP; d++) {
        job_pipe v = pv(j, d);
        assert_int_equal(v.plan_id == (d == 7 ? fastest : (long)want) ||
                             v.want_plan == (d == 7 ? fastest : (long)want),
                         1);
    }
    job_free(j);
}

/* Profiling asks for more iterations at a clock whose measurements spread (energies 1x and 1.3x
 * in the two pipelines), up to max_iterations_per_clock; a restarted server resumes the round with
 * the iterations it had asked for, and shows the precision each clock reached. */
static void test_precision_survives_restart(void **state)
{
    (void)state;
    job_spec s = make_spec();
    s.target_se_pct = 0.5;
    s.max_iterations_per_clock = 3;
    uint8_t h[32] = {3};
    job *j = NULL;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(job_create(st, &s, "AAAAAAAAAAAAAA13", h, 1, &j, &e), 0);
    assert_int_equal(store_commit(st), 0);
    register_all(j);
    int action;
    for (int n = 0; n < 2; n++) /* warm-up + 1 each */
        for (int r = 0; r < 4; r++)
            assert_int_equal(post(j, r, 0, 1410, r / 2 ? 1.3 : 1.0, &action, &e), 0);
    assert_int_equal(j->round, 0); /* still the first clock: one more asked for */
    assert_int_equal(j->round_extra, 1);
    assert_int_equal(j->clock_iters[0], 1);
    assert_true(j->clock_se_pct[0] > 0.5);
    job *k = reload_as(j, "profiling");
    assert_int_equal(k->round_extra, 1);
    assert_int_equal(k->clock_iters[0], 1);
    assert_true(fabs(k->clock_se_pct[0] - j->clock_se_pct[0]) < 1e-9);
    assert_int_equal(k->ranks_done, 0);
    job_free(k);
    for (int r = 0; r < 4; r++)
        assert_int_equal(post(j, r, 0, 1410, r / 2 ? 1.3 : 1.0, &action, &e), 0);
    assert_int_equal(j->round_extra, 2); /* 2 kept, still spread: the third and last */
    assert_int_equal(j->clock_iters[0], 2);
    k = reload_as(j, "profiling");
    assert_int_equal(k->round_extra, 2);
    job_free(k);
    for (int r = 0; r < 4; r++)
        assert_int_equal(post(j, r, 0, 1410, r / 2 ? 1.3 : 1.0, &action, &e), 0);
    assert_int_equal(j->round, 1); /* 3 kept: the cap ends the clock */
    assert_int_equal(j->clock_iters[0], 3);
    k = reload_as(j, "profiling");
    assert_int_equal(k->round_extra, 0);
    assert_int_equal(k->clock_iters[0], 3);
    job_free(k);
    job_free(j);
}

/* profiling.waiting of j's status: the entry of rank (NULL when not listed), a new reference. */
static json_t *waiting_of(const job *j, int rank, size_t *listed)
{
    json_t *status = job_status_json(j);
    assert_non_null(status);
    json_t *w = json_object_get(json_object_get(status, "profiling"), "waiting");
    assert_true(json_is_array(w));
    *listed = json_array_size(w);
    json_t *found = NULL, *v;
    size_t i;
    json_array_foreach(w, i, v)
    {
        if (json_integer_value(json_object_get(v, "rank")) == rank) found = json_incref(v);
    }
    json_decref(status);
    return found;
}

/* Ranks that report their round's iterations from an attribution fit short of its criterion
 * (past the client's time bound) get more iterations at that clock, up to
 * max_iterations_per_clock, and the status says, per rank, what the round waits for: the fit
 * (nothing reported yet) or iterations, with the fit's relative standard error and criterion. */
static void test_fit_widens_round(void **state)
{
    (void)state;
    job_spec s = make_spec();
    s.max_iterations_per_clock = 3;
    uint8_t h[32] = {4};
    job *j = NULL;
    api_err e = {0};
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(job_create(st, &s, "AAAAAAAAAAAAAA14", h, 1, &j, &e), 0);
    assert_int_equal(store_commit(st), 0);
    register_all(j);
    size_t listed;
    json_t *w = waiting_of(j, 2, &listed);
    assert_int_equal(listed, 4);
    assert_string_equal(json_string_value(json_object_get(w, "waiting_for")), "fit");
    assert_true(json_is_null(json_object_get(w, "fit_rel_se")));
    assert_int_equal(json_integer_value(json_object_get(w, "clock_mhz")), 1410);
    json_decref(w);
    int action;
    g_fit_se = 0.2;
    g_fit_crit = 0.01;
    for (int n = 0; n < 2; n++) /* warm-up + 1 each, the fit far from its criterion */
        for (int r = 0; r < 4; r++)
            assert_int_equal(post(j, r, 0, 1410, 1, &action, &e), 0);
    assert_int_equal(j->round, 0); /* the same clock, one more iteration asked for */
    assert_int_equal(j->round_extra, 1);
    w = waiting_of(j, 2, &listed);
    assert_int_equal(listed, 4);
    assert_string_equal(json_string_value(json_object_get(w, "waiting_for")), "iterations");
    assert_int_equal(json_integer_value(json_object_get(w, "iterations")), 2);
    assert_int_equal(json_integer_value(json_object_get(w, "need")), 3);
    assert_true(fabs(json_real_value(json_object_get(w, "fit_rel_se")) - 0.2) < 1e-12);
    assert_true(fabs(json_real_value(json_object_get(w, "criterion")) - 0.01) < 1e-12);
    assert_false(json_is_true(json_object_get(w, "fit_settled")));
    json_decref(w);
    g_fit_se = 0.005; /* settled: the round ends */
    for (int r = 0; r < 4; r++)
        assert_int_equal(post(j, r, 0, 1410, 1, &action, &e), 0);
    assert_int_equal(j->round, 1);
    g_fit_se = g_fit_crit = 0;
    job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_count_every_gpu),
        cmocka_unit_test(test_registration_and_sweep),
        cmocka_unit_test(test_dominated_clock_ends_sweep),
        cmocka_unit_test(test_profile_upload_and_failure),
        cmocka_unit_test(test_early_frontier_not_reused),
        cmocka_unit_test(test_config_key),
        cmocka_unit_test(test_switch_iteration),
        cmocka_unit_test(test_switch_lead_pace),
        cmocka_unit_test(test_running_aggregates),
        cmocka_unit_test(test_pace_straggler),
        cmocka_unit_test(test_default_factor_catches_1_2),
        cmocka_unit_test(test_time_straggler_without_pace),
        cmocka_unit_test(test_evaluation_rule),
        cmocka_unit_test(test_measured_blocking_power),
        cmocka_unit_test(test_plans_text_matches_file),
        cmocka_unit_test(test_cap_with_straggler),
        cmocka_unit_test(test_rules_applied_late),
        cmocka_unit_test(test_many_pipelines_straggler),
        cmocka_unit_test(test_precision_survives_restart),
        cmocka_unit_test(test_fit_widens_round),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
