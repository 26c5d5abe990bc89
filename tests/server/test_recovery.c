/* Recovery: perseusd is killed with SIGKILL in the middle of profiling and again while running;
 * each time a new perseusd on the same data directory resumes the job where it was, and the
 * stored measurement count equals the number of iterations the clients posted and had
 * acknowledged. A clean SIGTERM exits 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim_ranks.h"

#define STAGES 2
#define MB 2
#define DP 2

static daemon_proc d;

static int teardown(void **state)
{
    (void)state;
    return daemon_teardown(&d);
}

static void restart(sim_job *j)
{
    assert_int_equal(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(daemon_start(&d), 0);
    j->port = d.port;
}

static void test_kill_during_profiling_and_running(void **state)
{
    (void)state;
    harness_tmpdir(d.dir, sizeof d.dir, "recovery");
    assert_true(d.dir[0]);
    assert_int_equal(daemon_start(&d), 0);
    sim_job j;
    assert_int_equal(sim_create(d.port, sim_sweep_spec(STAGES, MB, DP), STAGES, MB, DP, &j), 201);
    http_reply r;

    /* Half the ranks register, crash, the rest register after the restart. */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j.id);
    for (int k = 0; k < 2; k++) {
        r = http_json(d.port, "POST", path, j.token,
                      json_pack("{s:i, s:i, s:i}", "rank", k, "dp", k / STAGES, "pp", k % STAGES));
        assert_int_equal(r.status, 201);
        http_reply_free(&r);
    }
    restart(&j);
    json_t *st = sim_status(&j);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "registering");
    assert_int_equal(json_int(json_object_get(st, "ranks"), "registered"), 2);
    json_decref(st);
    assert_int_equal(sim_register_all(&j), DP * STAGES); /* re-registration is idempotent */

    /* Profiling: 3 of the 7 clocks and a bit, then kill -9. */
    long iteration = 0;
    assert_int_equal(sim_profile(&j, 3 * 3 * DP * STAGES + 5, &iteration), 3 * 3 * DP * STAGES + 5);
    restart(&j);
    st = sim_status(&j);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "profiling");
    assert_int_equal(json_int(st, "measurements"), j.acked);
    assert_int_equal(json_int(json_object_get(st, "profiling"), "clocks_done"), 3);
    json_decref(st);

    /* The sweep continues where it was; nothing is repeated: 7 clocks x 3 iterations. */
    assert_true(sim_profile(&j, 100000, &iteration) > 0);
    st = sim_wait_phase_change(&j, "planning", 60);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    assert_int_equal(json_int(st, "measurements"), j.acked);
    assert_int_equal(j.acked, 7 * 3 * DP * STAGES);
    json_decref(st);

    /* Running with a straggler; kill -9; plans and straggler survive. */
    snprintf(path, sizeof path, "/v1/jobs/%s/stragglers", j.id);
    r = http_json(d.port, "POST", path, j.token, json_pack("{s:i, s:f}", "dp", 0, "slowdown", 1.3));
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    int clocks[2 * MB], before[2 * MB];
    long plan_before = -1, plan_after = -1;
    char phase[32];
    assert_true(sim_schedule(&j, STAGES, phase, before, &plan_before, NULL) >= 0);
    for (int k = 0; k < 5; k++) {
        json_t *its = json_array();
        json_array_append_new(its, sim_iteration(&j, 0, 5000 + k, before, 1, 0));
        assert_int_equal(sim_post(&j, STAGES, -1, its), 200);
    }
    restart(&j);
    st = sim_status(&j);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    assert_int_equal(json_int(st, "measurements"), j.acked);
    json_t *p0 = json_array_get(json_object_get(st, "pipelines"), 0);
    assert_string_equal(json_str(p0, "straggler"), "explicit");
    json_decref(st);
    assert_true(sim_schedule(&j, STAGES, phase, clocks, &plan_after, NULL) >= 0);
    assert_string_equal(phase, "running");
    assert_int_equal(plan_after, plan_before);
    assert_memory_equal(clocks, before, sizeof clocks);

    /* Clean shutdown. */
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
    assert_int_equal(daemon_start(&d), 0);
    j.port = d.port;
    st = sim_status(&j);
    assert_non_null(st);
    assert_int_equal(json_int(st, "measurements"), j.acked);
    json_decref(st);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kill_during_profiling_and_running, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
