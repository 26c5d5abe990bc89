/* job.h: the state machine driven directly (no HTTP) on a scratch database: registration,
 * the profiling sweep (warm-up dropped, k per clock, late and early rounds, dominated clocks
 * ending the sweep), profile uploads, the configuration key and frontier reuse, the measured
 * blocking power, the plans.prs text kept in the store (the same bytes as the file the core
 * saves), the precision of profiling and its fit surviving a restart. test_job_running.c drives
 * running jobs (plan switches, stragglers, aggregates). */
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

#include "job_fixture.h"

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

/* A profiling schedule: the first clock and the pipeline's shape, no switch iteration. */
static void check_profiling_schedule(job *j, api_err *e)
{
    char *stext = NULL;
    size_t tlen = 0;
    assert_int_equal(job_schedule(j, 3, &stext, &tlen, e), 0);
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
}

/* Round 0: warm-up + 1 per rank. A future round is refused. A late post for round 0 is stored
 * and does not count for round 1. */
static void sweep_round0(job *j, api_err *e)
{
    int action;
    assert_int_equal(post(j, 0, 1, 1410, 1, &action, e), -1);
    assert_int_equal(e->http, 409);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(post(j, r, 0, 1410, 1, &action, e), 0);
        assert_int_equal(j->round, 0);
    }
    for (int r = 0; r < 3; r++)
        assert_int_equal(post(j, r, 0, 1410, 1, &action, e), 0);
    assert_int_equal(j->round, 0);
    assert_int_equal(j->ranks_done, 3);
    assert_int_equal(post(j, 3, 0, 1410, 1, &action, e), 0);
    assert_int_equal(j->round, 1); /* next clock */
    assert_int_equal(j->sweep[j->sweep_index], 1200);
    assert_int_equal(post(j, 0, 0, 1410, 1, &action, e), 0);
    assert_int_equal(j->round_iters[0], 0);
    assert_int_equal(j->measurements, 9);
    assert_int_equal(store_count_measurements(st, j->id), 9);
}

/* Reload mid-sweep: same position. */
static void check_reload_mid_sweep(const job *j)
{
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
}

/* Round 1 at 1200, round 2 at 1000: then the sweep ends and planning starts. */
static void sweep_to_planning(job *j, api_err *e)
{
    int action = JOB_ACT_NONE;
    for (int round = 1; round <= 2; round++)
        for (int rep = 0; rep < 2; rep++)
            for (int r = 0; r < 4; r++) {
                action = JOB_ACT_NONE;
                assert_int_equal(post(j, r, round, j->sweep[round], 1, &action, e), 0);
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
}

/* Plan for real and finish: every pipeline on the fastest plan, returned. */
static size_t plan_and_run(job *j, api_err *e)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    spec_pipeline(&j->spec, &o.pipe);
    prs_frontier *f = NULL;
    assert_int_equal(prs_plan(j->profile, &o, &f, NULL), 0);
    char *plans;
    size_t plen;
    prs_error err;
    assert_int_equal(prs_frontier_to_plans(f, &plans, &plen, &err), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_plan_finished(j, st, f, plans, plen, 0.5, NULL, e)), 0);
    free(plans);
    assert_int_equal(j->phase, JOB_RUNNING);
    size_t fastest;
    assert_int_equal(prs_frontier_lookup(j->frontier, 0, &fastest), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)fastest);
    assert_int_equal(pv(j, 1).plan_id, (long)fastest);
    assert_true(j->allmax_energy_j > 0);
    return fastest;
}

/* Rank 3 (dp 1, pp 1) is told the stage-1 part of the fastest plan. */
static void check_running_schedule(job *j, size_t fastest, api_err *e)
{
    char *stext = NULL;
    size_t tlen = 0;
    int *all = malloc(sizeof *all * 2 * 4);
    assert_int_equal(prs_frontier_plan(j->frontier, fastest, all, NULL), 0);
    assert_int_equal(job_schedule(j, 3, &stext, &tlen, e), 0);
    json_t *sch = json_loads(stext, JSON_REJECT_DUPLICATES, NULL);
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
}

/* A restarted client numbers its iterations from 0 again: after it registers again, the
 * detector counts them instead of waiting for the old numbers to come round. */
static void check_restarted_client(job *j, api_err *e)
{
    int action;
    long seen = pv(j, 0).iterations;
    for (int r = 0; r < 2; r++) { /* both ranks of pipeline 0: evaluated */
        g_iter = 1000;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen + 1);
    seen = pv(j, 0).iterations;
    for (int r = 0; r < 2; r++) {
        g_iter = 0;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen); /* an old number: ignored */
    {
        req_rank rr = {0, 0, 0, 0, ""};
        int created;
        assert_int_equal(store_begin(st), 0);
        assert_int_equal(tx_ok(job_register(j, st, &rr, &created, &action, e)), 0);
        assert_false(created);
    }
    for (int r = 0; r < 2; r++) {
        g_iter = 0;
        assert_int_equal(post(j, r, -1, 1410, 1, &action, e), 0);
    }
    assert_int_equal(pv(j, 0).iterations, seen + 1);
}

/* Explicit straggler: the other pipeline follows the lookup rule (once the switch the restart
 * announced is behind it). */
static void check_explicit_straggler(job *j, size_t fastest, api_err *e)
{
    int action;
    g_iter = pv(j, 0).from_iteration;
    assert_int_equal(post(j, 0, -1, 1410, 1, &action, e), 0);
    const prs_frontier_point *fp = prs_frontier_point_at(j->frontier, fastest);
    req_straggler sr = {1, 0, 1.5};
    long round0 = j->round;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_set_straggler(j, st, &sr, e)), 0);
    size_t want;
    assert_int_equal(prs_frontier_lookup(j->frontier, 1.5 * fp->eval_time_s, &want), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)want);
    assert_int_equal(pv(j, 1).plan_id, (long)fastest);
    assert_int_equal(j->round, round0 + 1);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_clear_straggler(j, st, 1, e)), 0);
    assert_int_equal(pv(j, 0).plan_id, (long)fastest);
    assert_int_equal(j->round, round0 + 2);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_clear_straggler(j, st, 7, e)), -1);
    assert_int_equal(e->http, 404);
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
    check_profiling_schedule(j, &e);
    sweep_round0(j, &e);
    check_reload_mid_sweep(j);
    sweep_to_planning(j, &e);
    size_t fastest = plan_and_run(j, &e);
    check_running_schedule(j, fastest, &e);
    check_restarted_client(j, &e);
    check_explicit_straggler(j, fastest, &e);

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

/* Reloaded: the same values. Returns the row it was loaded from (spec_json no longer valid). */
static store_job_row check_bp_reloaded(const job *j)
{
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
    return row;
}

/* A second job of the configuration s reuses the frontier and its blocking power, but not
 * without its creator's reuse key, nor with another. */
static void check_bp_reused_with_key(const job_spec *s)
{
    uint8_t h[32] = {4};
    api_err e = {0};
    job *k = NULL;
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, s, "AAAAAAAAAAAAAAB2", h, 2, &k, &e)), 0);
    assert_string_equal(k->profile_source, "reused");
    check_bp_status(k, -1, 81.5, 81.5);
    job_free(k);
    for (int other = 0; other < 2; other++) {
        job_spec o = *s;
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
}

/* A stored frontier that does not fit the spec (another pipeline shape under j's key, as
 * corrupted data would have) is not adopted: the job profiles. j's frontier is put back. */
static void check_unfit_frontier_not_adopted(const job *j, const job_spec *s)
{
    uint8_t h[32] = {4};
    api_err e = {0};
    job *k = NULL;
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
    assert_int_equal(tx_ok(job_create(st, s, "AAAAAAAAAAAAAAK4", h, 2, &k, &e)), 0);
    assert_null(k->frontier);
    assert_string_not_equal(k->profile_source, "reused");
    job_free(k);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(store_put_frontier(st, j->id, j->config_key, good, glen, 0)), 0);
    free(good);
    free(plans);
    job_free(other);
}

/* Only a running or done job's frontier is reused: not a failed one's (row: the job's). */
static void check_failed_not_reused(store_job_row *row, const job_spec *s)
{
    uint8_t h[32] = {4};
    api_err e = {0};
    job *k = NULL;
    row->phase = "failed";
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(store_update_job(st, row), 0);
    assert_int_equal(store_commit(st), 0);
    assert_int_equal(store_begin(st), 0);
    assert_int_equal(tx_ok(job_create(st, s, "AAAAAAAAAAAAAAC9", h, 3, &k, &e)), 0);
    assert_null(k->frontier);
    assert_string_not_equal(k->profile_source, "reused");
    job_free(k);
}

/* Pinned: planned with the spec's, the measured one shown beside it. Neither: failed, with the
 * reason. */
static void check_bp_pinned_and_none(void)
{
    job *j = profiled_job("AAAAAAAAAAAAAAB3", 90, 1);
    assert_int_equal(j->phase, JOB_PLANNING);
    assert_true(j->bp_used_w == 90);
    check_bp_status(j, 90, 81.5, 90);
    job_free(j);
    j = profiled_job("AAAAAAAAAAAAAAB4", 90, 0);
    assert_int_equal(j->phase, JOB_PLANNING);
    check_bp_status(j, 90, -1, 90);
    job_free(j);

    j = profiled_job("AAAAAAAAAAAAAAB5", -1, 0);
    assert_int_equal(j->phase, JOB_FAILED);
    assert_non_null(strstr(j->reason, "blocking_power_w"));
    check_bp_status(j, -1, -1, -1);
    job_free(j);
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

    store_job_row row = check_bp_reloaded(j);
    job_spec s = j->spec;
    check_bp_reused_with_key(&s);
    check_unfit_frontier_not_adopted(j, &s);
    check_failed_not_reused(&row, &s);
    /* A pinned blocking power is another configuration. */
    s.has_blocking_power = 1;
    s.blocking_power_w = 81.5;
    char k1[65], k2[65];
    job_config_key(&j->spec, k1);
    job_config_key(&s, k2);
    assert_string_not_equal(k1, k2);
    job_free(j);

    check_bp_pinned_and_none();
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
        cmocka_unit_test(test_measured_blocking_power),
        cmocka_unit_test(test_plans_text_matches_file),
        cmocka_unit_test(test_precision_survives_restart),
        cmocka_unit_test(test_fit_widens_round),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
