/* End to end, against the real perseusd binary over HTTP: a job of 4 stages x 2 data-parallel
 * pipelines (8 ranks) goes through registering, profiling (measurements from the GPU model),
 * planning and running; the plan it ends on evaluates (prs_evaluate_plan on the server's own
 * profile) below all-max energy at no slower iteration time; an explicit straggler moves the
 * other pipeline to the plan the lookup rule chooses and back when cleared; an automatic one
 * (reported iteration times) does the same; completing the job ends in done. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "perseus/profile.h"
#include "sim_ranks.h"

#define STAGES 4
#define MB 4
#define DP 2
#define OPS (2 * MB)

static const int CLOCKS[] = {1410, 1350, 1290, 1230, 1170, 1110, 1050,
                             990,  930,  870,  810,  750,  690};

#define REUSE_KEY "e2e-team-reuse-key-1"

/* Create a job of model; reuse_key: the creator's reuse key, or NULL for none. */
static int create_job(int port, sim_job *j, const char *model, const char *reuse_key)
{
    json_t *clocks = json_array();
    for (size_t i = 0; i < sizeof CLOCKS / sizeof CLOCKS[0]; i++)
        json_array_append_new(clocks, json_integer(CLOCKS[i]));
    json_t *spec = json_pack(
        "{s:s, s:i, s:i, s:i, s:i, s:s, s:o, s:{s:i, s:i, s:i, s:b},"
        " s:f, s:f, s:s, s:{s:f, s:i}}",
        "model", model, "stages", STAGES, "microbatches", MB, "dp", DP, "tp", 1, "schedule", "1f1b",
        "clocks_mhz", clocks, "profiling", "warmup_iterations", 1, "iterations_per_clock", 2,
        "min_clock_mhz", 750, "skip_dominated", 1, "unit_time_s", 0.001, "blocking_power_w", 83.64,
        "cost_model", "exp", "straggler", "factor", 1.2, "iterations", 2);
    if (reuse_key) json_object_set_new(spec, "reuse_key", json_string(reuse_key));
    return sim_create(port, spec, STAGES, MB, DP, j);
}

/* Plan of pipeline dp as the ranks receive it: clocks[pp * OPS + i]. Returns its plan_id. */
static long pipeline_plan(const sim_job *j, int dp, int *clocks)
{
    long plan = -1;
    for (int p = 0; p < STAGES; p++) {
        char phase[32];
        long id = -1;
        assert_true(sim_schedule(j, dp * STAGES + p, phase, clocks + p * OPS, &id, NULL) >= 0);
        assert_string_equal(phase, "running");
        if (p > 0) assert_int_equal(id, plan);
        plan = id;
    }
    return plan;
}

/* GET /frontier: the summary by default, then every point in pages of 7 that chain by
 * next_offset; returns the summary with the points gathered under "points" (new reference). */
static json_t *frontier_pages(sim_job *j)
{
    http_reply r = sim_get(j, "/frontier");
    assert_int_equal(r.status, 200);
    json_t *fr = json_incref(r.json);
    http_reply_free(&r);
    long size = json_int(fr, "size"), fastest = json_int(fr, "fastest");
    assert_true(size > 7 && fastest == size - 1); /* the clean frontier ends at the fastest */
    assert_null(json_object_get(fr, "points"));
    json_t *pts = json_array();
    long offset = 0;
    for (int page = 0; offset >= 0; page++) {
        char q[64];
        snprintf(q, sizeof q, "/frontier?offset=%ld&limit=7", offset);
        r = sim_get(j, q);
        assert_int_equal(r.status, 200);
        json_t *got = json_object_get(r.json, "points");
        assert_int_equal(json_int(r.json, "size"), size);
        assert_int_equal(json_int(r.json, "offset"), offset);
        assert_true(json_array_size(got) == (size_t)(size - offset < 7 ? size - offset : 7));
        json_array_extend(pts, got);
        json_t *next = json_object_get(r.json, "next_offset");
        offset = json_is_null(next) ? -1 : (long)json_integer_value(next);
        assert_true(offset < 0 || offset == json_int(r.json, "offset") + 7);
        http_reply_free(&r);
        assert_true(page <= size / 7);
    }
    assert_int_equal((long)json_array_size(pts), size);
    for (long k = 0; k < size; k++)
        assert_int_equal(json_int(json_array_get(pts, (size_t)k), "plan_id"), k);
    assert_true(
        json_equal(json_object_get(fr, "fastest_point"), json_array_get(pts, (size_t)fastest)));
    assert_true(json_equal(json_object_get(fr, "slowest_point"), json_array_get(pts, 0)));
    json_object_set_new(fr, "points", pts);
    return fr;
}

/* The lookup rule (planner.h), recomputed from GET /frontier. */
static long expected_lookup(json_t *frontier, double tprime)
{
    json_t *pts = json_object_get(frontier, "points");
    long fastest = json_int(frontier, "fastest");
    double tf = json_num(json_array_get(pts, (size_t)fastest), "eval_time_s");
    if (!(tprime > tf)) return fastest;
    long best = fastest;
    double be = INFINITY;
    for (size_t k = 0; k < json_array_size(pts); k++) {
        json_t *p = json_array_get(pts, k);
        double t = json_num(p, "eval_time_s"), e = json_num(p, "eval_energy_j");
        if (t > tprime + 1e-12) continue;
        double c = e + STAGES * 83.64 * (tprime - t);
        if (c < be) {
            be = c;
            best = (long)k;
        }
    }
    return best;
}

static void post_running(sim_job *j, int dp, long iteration, double time_s)
{
    int clocks[OPS];
    for (int i = 0; i < OPS; i++)
        clocks[i] = 1410;
    for (int p = 0; p < STAGES; p++) {
        json_t *its = json_array();
        json_array_append_new(its, sim_iteration(j, p, iteration, clocks, 0, time_s));
        assert_int_equal(sim_post(j, dp * STAGES + p, -1, its), 200);
    }
}

static daemon_proc d;

/* On a failed assertion cmocka jumps past the end of the test: stop the server here. */
static int teardown(void **state)
{
    (void)state;
    return daemon_teardown(&d);
}

/* Registering: schedules say wait until all 8 are in, then profiling starts. Profiling:
 * clocks high to low; stops early once a clock is dominated; then the job plans and runs. */
static void register_and_profile(sim_job *j)
{
    char phase[32];
    int clocks[OPS];
    assert_int_equal(sim_register_all(j), DP * STAGES);
    assert_true(sim_schedule(j, 0, phase, clocks, NULL, NULL) >= 0);
    assert_string_equal(phase, "profiling");
    assert_int_equal(clocks[0], 1410);

    long iteration = 0;
    long posts = sim_profile(j, 100000, &iteration);
    assert_true(posts > 0);
    json_t *st = sim_wait_phase_change(j, "planning", 60);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    assert_int_equal(json_int(st, "measurements"), j->acked);
    assert_int_equal(posts, j->acked);
    assert_string_equal(json_str(st, "profile_source"), "measured");
    assert_string_equal(json_str(st, "planner"), "robust");
    json_t *prof = json_object_get(st, "profiling");
    /* 3 iterations (1 warm-up + 2) per rank per clock; fewer clocks than listed were swept. */
    long swept = posts / (3 * DP * STAGES);
    assert_int_equal(posts % (3 * DP * STAGES), 0);
    long above_floor = (long)(sizeof CLOCKS / sizeof CLOCKS[0]) - 1; /* 690 < 750 */
    assert_int_equal(json_int(prof, "clocks_total"), above_floor);
    print_message("swept %ld of %ld clocks in %ld posts\n", swept, above_floor, posts);
    assert_true(swept >= 3 && swept < above_floor);
    json_t *planning = json_object_get(st, "planning");
    assert_true(json_num(planning, "done_pct") == 100.0);
    json_decref(st);
}

/* Running: each pipeline gets the fastest plan (into plan0, its id returned); check it against
 * the server's profile. */
static long check_fastest_plan(sim_job *j, int *plan0)
{
    http_reply pr = sim_get(j, "/profile");
    assert_int_equal(pr.status, 200);
    prs_profile *profile = NULL;
    assert_int_equal(prs_profile_parse("server", pr.body, pr.len, &profile, NULL), 0);
    http_reply_free(&pr);
    int plan1[STAGES * OPS], allmax[STAGES * OPS];
    long id0 = pipeline_plan(j, 0, plan0), id1 = pipeline_plan(j, 1, plan1);
    assert_int_equal(id0, id1);
    assert_memory_equal(plan0, plan1, sizeof plan1);
    for (int i = 0; i < STAGES * OPS; i++)
        allmax[i] = 1410;
    prs_pipeline pipe = {STAGES, MB, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0, 0};
    double t_plan, e_plan, t_max, e_max;
    assert_int_equal(prs_evaluate_plan(profile, &pipe, plan0, &t_plan, &e_plan, NULL), 0);
    assert_int_equal(prs_evaluate_plan(profile, &pipe, allmax, &t_max, &e_max, NULL), 0);
    print_message("plan %ld: %.4f s %.2f J; all-max: %.4f s %.2f J (%.1f %% saved)\n", id0, t_plan,
                  e_plan, t_max, e_max, 100 * (1 - e_plan / e_max));
    /* The profile was measured here, so the robust planner planned it (docs/noise.md): its
     * fastest plan may give up a fraction of a percent of time for the uncertainty of what it
     * measured, never more than 0.5 %. */
    assert_true(t_plan <= t_max * 1.005);
    assert_true(e_plan < e_max);
    prs_profile_free(profile);
    return id0;
}

/* The server plans a clean frontier: evaluated times strictly falling, and no plan that a
 * faster one, charged blocking power until it ends, costs no more than. */
static void check_clean_frontier(json_t *frontier)
{
    json_t *pts = json_object_get(frontier, "points");
    for (size_t k = 0; k < json_array_size(pts); k++) {
        double t = json_num(json_array_get(pts, k), "eval_time_s");
        double e = json_num(json_array_get(pts, k), "eval_energy_j");
        if (k > 0) assert_true(t < json_num(json_array_get(pts, k - 1), "eval_time_s"));
        for (size_t i = k + 1; i < json_array_size(pts); i++) {
            double ti = json_num(json_array_get(pts, i), "eval_time_s");
            double ei = json_num(json_array_get(pts, i), "eval_energy_j");
            assert_true(ei + STAGES * 83.64 * (t - ti) > e);
        }
    }
}

/* Explicit straggler: pipeline 1 at 1.25x; pipeline 0 gets lookup(T'), 1 stays fastest. Then
 * cleared: back to the fastest plan. */
static void check_explicit_straggler(sim_job *j, json_t *frontier, long id0, const int *plan0,
                                     double tf)
{
    char path[128];
    int slow[STAGES * OPS], plan1[STAGES * OPS];
    snprintf(path, sizeof path, "/v1/jobs/%s/stragglers", j->id);
    http_reply r = http_json(d.port, "POST", path, j->token,
                             json_pack("{s:i, s:f}", "dp", 1, "slowdown", 1.25));
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    long want = expected_lookup(frontier, 1.25 * tf);
    assert_true(want != id0);
    assert_int_equal(pipeline_plan(j, 0, slow), want);
    assert_true(memcmp(slow, plan0, sizeof slow) != 0);
    assert_int_equal(pipeline_plan(j, 1, plan1), id0);
    assert_memory_equal(plan1, plan0, sizeof plan1);

    snprintf(path, sizeof path, "/v1/jobs/%s/stragglers/1", j->id);
    r = http_do(d.port, "DELETE", path, j->token, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(pipeline_plan(j, 0, slow), id0);
    assert_memory_equal(slow, plan0, sizeof slow);
}

/* Automatic: pipeline 0 reports 1.4x the time of pipeline 1 for 2 iterations (factor 1.2,
 * k = 2) -> pipeline 1 slows down; then normal times for 2 iterations -> back. Returns the plan
 * pipeline 1 slowed down to. */
static long check_automatic_straggler(sim_job *j, json_t *frontier, long id0, const int *plan0,
                                      double tf)
{
    int slow[STAGES * OPS];
    long it = 1000;
    post_running(j, 1, it, tf);
    post_running(j, 0, it++, 1.4 * tf);
    assert_int_equal(pipeline_plan(j, 1, slow), id0); /* one iteration is not enough */
    post_running(j, 1, it, tf);
    post_running(j, 0, it++, 1.4 * tf);
    long want = expected_lookup(frontier, 1.4 * tf);
    assert_int_equal(pipeline_plan(j, 1, slow), want);
    assert_int_equal(pipeline_plan(j, 0, slow), id0);
    http_reply js = sim_get(j, "");
    json_t *p0 = json_array_get(json_object_get(js.json, "pipelines"), 0);
    assert_string_equal(json_str(p0, "straggler"), "automatic");
    http_reply_free(&js);
    for (int k = 0; k < 2; k++) {
        /* Pipeline 1 now runs a slower plan on purpose: its reported time is that plan's. */
        double t1 = json_num(json_array_get(json_object_get(frontier, "points"), (size_t)want),
                             "eval_time_s");
        post_running(j, 1, it, t1);
        post_running(j, 0, it++, tf);
    }
    assert_int_equal(pipeline_plan(j, 1, slow), id0);
    assert_memory_equal(slow, plan0, sizeof slow);
    return want;
}

/* Metrics saw it all: the server's series, and per job its phase, and the iterations and
 * savings its status shows. */
static void check_metrics(sim_job *j)
{
    http_reply r = http_do(d.port, "GET", "/metrics", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "perseusd_jobs{phase=\"running\"} 1"));
    assert_non_null(strstr(r.body, "perseusd_planning_seconds_count 1"));
    assert_non_null(strstr(r.body, "route=\"schedule\",code=\"200\""));
    http_reply sr = sim_get(j, "");
    json_t *sv = json_object_get(sr.json, "savings");
    char series[256];
    snprintf(series, sizeof series,
             "perseusd_job_phase{job_id=\"%s\",model=\"e2e-model\",phase=\"running\"} 1\n", j->id);
    assert_non_null(strstr(r.body, series));
    snprintf(series, sizeof series,
             "perseusd_job_iterations_total{job_id=\"%s\",model=\"e2e-model\"} %lld\n", j->id,
             (long long)json_int(sv, "iterations"));
    assert_non_null(strstr(r.body, series));
    assert_true(json_int(sv, "iterations") > 0);
    snprintf(series, sizeof series,
             "perseusd_job_energy_saved_joules_total{job_id=\"%s\",model=\"e2e-model\"} ", j->id);
    const char *saved = strstr(r.body, series);
    assert_non_null(saved);
    double so_far = json_num(sv, "so_far_j");
    assert_true(so_far > 0 && fabs(strtod(saved + strlen(series), NULL) / so_far - 1) < 1e-12);
    http_reply_free(&sr);
    http_reply_free(&r);
}

/* The operator's log told the story: the reported straggler and its clearing, the detected
 * one and its recovery, and the plan switches they caused (want: pipeline 1's slower plan). */
static void check_log(const sim_job *j, long want)
{
    char logpath[300], series[256], *log = NULL;
    snprintf(logpath, sizeof logpath, "%s/perseusd.log", d.dir);
    FILE *lf = fopen(logpath, "r");
    assert_non_null(lf);
    size_t loglen = 0;
    assert_int_equal(getdelim(&log, &loglen, '\0', lf) > 0, 1);
    fclose(lf);
    const char *events[] = {"state=explicit why=reported", "state=none why=cleared",
                            "state=automatic why=detected", "state=none why=recovered"};
    for (size_t i = 0; i < sizeof events / sizeof *events; i++) {
        snprintf(series, sizeof series, "msg=straggler job=%s dp=", j->id);
        const char *at = strstr(log, series);
        int found = 0;
        for (; at && !found; at = strstr(at + 1, series)) {
            const char *eol = strchr(at, '\n');
            const char *ev = strstr(at, events[i]);
            found = ev && (!eol || ev < eol);
        }
        if (!found) fprintf(stderr, "no '%s' in the log:\n%s\n", events[i], log);
        assert_true(found);
    }
    snprintf(series, sizeof series, "msg=plan_switch job=%s pipelines=1 plan=%ld ", j->id,
             want); /* pipeline 0 detected as a straggler: pipeline 1 slows down */
    assert_non_null(strstr(log, series));
    free(log);
}

static void complete_job(const sim_job *j)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", j->id);
    http_reply r = http_do(d.port, "POST", path, j->token, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_str(r.json, "phase"), "done");
    http_reply_free(&r);
}

/* Without its creator's reuse key, or with another, the same model and configuration does not
 * get the frontier: it profiles. The status never shows the key or its hash. A second job with
 * the same model, configuration and reuse key reuses the frontier: running as soon as its ranks
 * are in, no profiling. */
static void check_reuse(long id0, const int *plan0)
{
    char phase[32];
    int clocks[OPS];
    const char *others[] = {NULL, "e2e-someone-elses-key"};
    for (int i = 0; i < 2; i++) {
        sim_job o;
        assert_int_equal(create_job(d.port, &o, "e2e-model", others[i]), 201);
        assert_int_equal(sim_register_all(&o), DP * STAGES);
        assert_true(sim_schedule(&o, 0, phase, clocks, NULL, NULL) >= 0);
        assert_string_equal(phase, "profiling");
        http_reply so = sim_get(&o, "");
        json_t *spec = json_object_get(so.json, "spec");
        assert_true(json_is_boolean(json_object_get(spec, "reuse_key_set")));
        assert_true(json_is_true(json_object_get(spec, "reuse_key_set")) == (others[i] != NULL));
        assert_null(json_object_get(spec, "reuse_key_sha256"));
        assert_null(strstr(so.body, "e2e-someone"));
        http_reply_free(&so);
    }

    sim_job k;
    assert_int_equal(create_job(d.port, &k, "e2e-model", REUSE_KEY), 201);
    assert_int_equal(sim_register_all(&k), DP * STAGES);
    long kid = -1;
    assert_true(sim_schedule(&k, 0, phase, clocks, &kid, NULL) >= 0);
    assert_string_equal(phase, "running");
    assert_int_equal(kid, id0);
    assert_memory_equal(clocks, plan0, sizeof clocks);
}

static void test_job_through_every_phase(void **state)
{
    (void)state;
    harness_tmpdir(d.dir, sizeof d.dir, "e2e");
    assert_true(d.dir[0]);
    assert_int_equal(daemon_start(&d), 0);
    sim_job j;
    assert_int_equal(create_job(d.port, &j, "e2e-model", REUSE_KEY), 201);
    assert_int_equal(strlen(j.id), 16);
    register_and_profile(&j);

    int plan0[STAGES * OPS];
    long id0 = check_fastest_plan(&j, plan0);
    json_t *frontier = frontier_pages(&j);
    assert_int_equal(json_int(frontier, "fastest"), id0);
    check_clean_frontier(frontier);
    double tf =
        json_num(json_array_get(json_object_get(frontier, "points"), (size_t)id0), "eval_time_s");
    check_explicit_straggler(&j, frontier, id0, plan0, tf);
    long want = check_automatic_straggler(&j, frontier, id0, plan0, tf);
    json_decref(frontier);

    check_metrics(&j);
    check_log(&j, want);
    complete_job(&j);
    check_reuse(id0, plan0);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_job_through_every_phase, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
