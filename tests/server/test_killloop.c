/* Reliability: perseusd (the real binary) is killed with SIGKILL over and over, in every phase
 * of a job (registering, profiling, planning, running, done), 30 times or more, and after every
 * restart each thing it had acknowledged is still there: registered ranks, the measurement count
 * (every acknowledged result), the profiling round, the phase, every pipeline's plan (id and
 * clocks, as a rank's schedule shows it), the job's round and the straggler states. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim_ranks.h"

#define STAGES 2
#define MB 2
#define DP 2
#define RANKS (STAGES * DP)

static daemon_proc d;
static int kills;

static int teardown(void **state)
{
    (void)state;
    return daemon_teardown(&d);
}

/* What the server acknowledged, as its answers show it. */
typedef struct seen {
    char phase[32];
    long measurements, registered, clocks_done, round;
    long plan[DP];
    int clocks[DP][2 * MB];
    char straggler[DP][16];
} seen;

static void observe(sim_job *j, seen *s)
{
    memset(s, 0, sizeof *s);
    json_t *st = sim_status(j);
    assert_non_null(st);
    snprintf(s->phase, sizeof s->phase, "%s", json_str(st, "phase"));
    s->measurements = json_int(st, "measurements");
    s->registered = json_int(json_object_get(st, "ranks"), "registered");
    s->clocks_done = json_int(json_object_get(st, "profiling"), "clocks_done");
    json_t *pipes = json_object_get(st, "pipelines");
    for (int dp = 0; dp < DP; dp++)
        snprintf(s->straggler[dp], sizeof s->straggler[dp], "%s",
                 json_str(json_array_get(pipes, (size_t)dp), "straggler"));
    json_decref(st);
    for (int dp = 0; dp < DP && strcmp(s->phase, "running") == 0; dp++) {
        char phase[32];
        s->round = sim_schedule(j, dp * STAGES, phase, s->clocks[dp], &s->plan[dp], NULL);
    }
}

/* Kill -9 and restart; everything observed before is observed again. */
static void kill_and_check(sim_job *j, const char *where)
{
    seen before, after;
    observe(j, &before);
    assert_int_equal(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(daemon_start(&d), 0);
    j->port = d.port;
    kills++;
    observe(j, &after);
    if (strcmp(before.phase, after.phase) != 0 || before.measurements != after.measurements ||
        before.measurements != j->acked)
        fprintf(stderr, "kill %d (%s): phase %s -> %s, measurements %ld -> %ld (acked %ld)\n",
                kills, where, before.phase, after.phase, before.measurements, after.measurements,
                j->acked);
    assert_string_equal(after.phase, before.phase);
    assert_int_equal(after.measurements, j->acked);
    assert_int_equal(after.registered, before.registered);
    assert_int_equal(after.clocks_done, before.clocks_done);
    for (int dp = 0; dp < DP; dp++) {
        assert_string_equal(after.straggler[dp], before.straggler[dp]);
        assert_int_equal(after.plan[dp], before.plan[dp]);
        assert_memory_equal(after.clocks[dp], before.clocks[dp], sizeof after.clocks[dp]);
    }
    assert_int_equal(after.round, before.round);
}

static void straggler(sim_job *j, const char *method, int dp)
{
    char path[160];
    http_reply r;
    if (strcmp(method, "POST") == 0) {
        snprintf(path, sizeof path, "/v1/jobs/%s/stragglers", j->id);
        r = http_json(j->port, "POST", path, j->token,
                      json_pack("{s:i, s:f}", "dp", dp, "slowdown", 1.3));
    } else {
        snprintf(path, sizeof path, "/v1/jobs/%s/stragglers/%d", j->id, dp);
        r = http_do(j->port, "DELETE", path, j->token, NULL, 0, NULL);
    }
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
}

static void test_kill_loop(void **state)
{
    (void)state;
    double t0 = harness_now();
    harness_tmpdir(d.dir, sizeof d.dir, "killloop");
    assert_true(d.dir[0]);
    assert_int_equal(daemon_start(&d), 0);
    sim_job j;
    assert_int_equal(sim_create(d.port, sim_sweep_spec(STAGES, MB, DP), STAGES, MB, DP, &j), 201);
    http_reply r;

    /* Registering: a kill after every rank. */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j.id);
    for (int k = 0; k < RANKS; k++) {
        r = http_json(j.port, "POST", path, j.token,
                      json_pack("{s:i, s:i, s:i}", "rank", k, "dp", k / STAGES, "pp", k % STAGES));
        assert_int_equal(r.status, 201);
        http_reply_free(&r);
        if (k < RANKS - 1) kill_and_check(&j, "registering");
    }
    /* Profiling: 7 clocks x 3 iterations x 4 ranks = 84 posts, a kill every 4. */
    long iteration = 0, n;
    while ((n = sim_profile(&j, 4, &iteration)) == 4) {
        json_t *st = sim_status(&j);
        assert_non_null(st);
        int profiling = strcmp(json_str(st, "phase"), "profiling") == 0;
        json_decref(st);
        if (!profiling) break;
        kill_and_check(&j, "profiling");
    }
    assert_true(n >= 0);
    /* The last result ended the sweep: planning (or already running). A kill now. */
    seen s;
    observe(&j, &s);
    assert_true(strcmp(s.phase, "planning") == 0 || strcmp(s.phase, "running") == 0);
    assert_int_equal(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(daemon_start(&d), 0);
    j.port = d.port;
    kills++;
    json_t *st = sim_wait_phase_change(&j, "planning", 60);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    assert_int_equal(json_int(st, "measurements"), j.acked);
    json_decref(st);
    kill_and_check(&j, "running");

    /* Running: results, stragglers set and cleared, a kill after each. */
    for (int k = 0; k < 4; k++) {
        for (int dp = 0; dp < DP; dp++) {
            char phase[32];
            int clocks[2 * MB];
            long plan;
            assert_true(sim_schedule(&j, dp * STAGES, phase, clocks, &plan, NULL) >= 0);
            json_t *its = json_array();
            json_array_append_new(its, sim_iteration(&j, 0, 1000 + k, clocks, 1, 0));
            assert_int_equal(sim_post(&j, dp * STAGES, -1, its), 200);
        }
        kill_and_check(&j, "running: results");
        straggler(&j, k % 2 ? "DELETE" : "POST", 0);
        kill_and_check(&j, "running: straggler");
    }
    /* Done. */
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", j.id);
    r = http_do(j.port, "POST", path, j.token, "{}", 2, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    kill_and_check(&j, "done");
    print_message("%d kills across every phase in %.1f s; %ld results acknowledged, all kept\n",
                  kills, harness_now() - t0, j.acked);
    assert_true(kills >= 30);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_kill_loop, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
