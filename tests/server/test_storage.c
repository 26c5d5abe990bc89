/* Storage at scale: the database must not grow with the running phase's iterations. perseusd
 * (the real binary) runs a job of 4 pipelines x 2 stages (PRS_STORAGE_DP pipelines when set)
 * through profiling into running; every rank then posts 512 running iterations (8 per post).
 * The database file is measured after a WAL checkpoint (TRUNCATE) when running starts and after
 * the posts, and the WAL's largest size in between. The test prints what it measured and
 * projects it to a 1,024-rank job running 24 h at one iteration per second (88.5 million
 * reports): the database at the start of running scaled by ranks (an overestimate: the job's own
 * rows do not grow with ranks), plus the measured growth per running report times the reports,
 * plus the largest WAL seen. It asserts that the growth is below 1 byte per report (it was about
 * 100 while every report was a row) and that the projection stays under 100 MB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "sim_ranks.h"

#define STAGES 2
#define MB 2
#define POSTS 64 /* per rank */
#define BATCH 8  /* iterations per post */

static daemon_proc d;
/* Pipelines: 4, or PRS_STORAGE_DP (1..512) to check the projection on a larger job by hand. */
static int dp = 4, ranks = 4 * STAGES;

static int teardown(void **state)
{
    (void)state;
    return daemon_teardown(&d);
}

/* Checkpoint the server's WAL into the database and truncate it (from a connection of the
 * test's own, while the server is idle); the database file's size. */
static long long checkpointed_size(void)
{
    char db[320];
    snprintf(db, sizeof db, "%s/perseusd.db", d.dir);
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    int busy = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(h, 5000);
        if (sqlite3_prepare_v2(h, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW)
            busy = sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    assert_int_equal(busy, 0);
    return harness_file_size(db);
}

static long long wal_size(void)
{
    char wal[330];
    snprintf(wal, sizeof wal, "%s/perseusd.db-wal", d.dir);
    return harness_file_size(wal);
}

/* Every rank posts POSTS x BATCH running iterations at its schedule's clocks. The largest WAL
 * size seen after a round of posts goes to *wal_peak. */
static void run_iterations(sim_job *j, long long *wal_peak)
{
    int(*clocks)[2 * MB] = malloc(sizeof *clocks * (size_t)ranks);
    assert_non_null(clocks);
    for (int rank = 0; rank < ranks; rank++) {
        char phase[32];
        assert_true(sim_schedule(j, rank, phase, clocks[rank], NULL, NULL) >= 0);
        assert_string_equal(phase, "running");
    }
    for (long post = 0; post < POSTS; post++) {
        for (int rank = 0; rank < ranks; rank++) {
            json_t *its = json_array();
            for (long k = 0; k < BATCH; k++)
                json_array_append_new(
                    its, sim_iteration(j, rank % STAGES, post * BATCH + k, clocks[rank], 0, 0));
            assert_int_equal(sim_post(j, rank, -1, its), 200);
        }
        long long w = wal_size();
        if (w > *wal_peak) *wal_peak = w;
    }
    free(clocks);
}

static void test_running_does_not_grow_the_database(void **state)
{
    (void)state;
    const char *env = getenv("PRS_STORAGE_DP");
    if (env && atoi(env) >= 1 && atoi(env) <= 512) dp = atoi(env);
    ranks = dp * STAGES;
    harness_tmpdir(d.dir, sizeof d.dir, "storage");
    assert_true(d.dir[0]);
    assert_int_equal(daemon_start(&d), 0);
    sim_job j;
    assert_int_equal(sim_create(d.port, sim_sweep_spec(STAGES, MB, dp), STAGES, MB, dp, &j), 201);
    assert_int_equal(sim_register_all(&j), ranks);
    long long registered = checkpointed_size();
    long iteration = 0;
    assert_true(sim_profile(&j, 100000, &iteration) > 0);
    long profiled = j.acked;
    json_t *st = sim_wait_phase_change(&j, "planning", 60);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    json_decref(st);
    long long start = checkpointed_size();

    long long wal_peak = 0;
    double t0 = harness_now();
    run_iterations(&j, &wal_peak);
    double posting_s = harness_now() - t0;
    long reports = j.acked - profiled;
    assert_int_equal(reports, (long)ranks * POSTS * BATCH);
    st = sim_status(&j);
    assert_non_null(st);
    assert_int_equal(json_int(st, "measurements"), j.acked); /* every report is counted */
    json_decref(st);
    long long end = checkpointed_size();

    double per_report = (double)(end - start) / (double)reports;
    double per_profiling = (double)(start - registered) / (double)profiled;
    const double big = 1024, reports_24h = big * 86400;
    double base = (double)start * big / ranks, growth = per_report * reports_24h;
    double projected = base + growth + (double)wal_peak;
    print_message(
        "%d ranks; database: %lld B at running start (%ld profiling iterations with %d windows "
        "each: %.0f B per iteration), %lld B after %ld running reports in %.2f s: "
        "%.3f B per running report; WAL at most %lld B\n",
        ranks, start, profiled, 2 * MB, per_profiling, end, reports, posting_s, per_report,
        wal_peak);
    print_message("1,024 ranks x 86,400 iterations: %.1f MB at running start (scaled by ranks) + "
                  "%.1f MB running growth + %.1f MB WAL = %.1f MB (limit 100 MB)\n",
                  base / 1e6, growth / 1e6, (double)wal_peak / 1e6, projected / 1e6);
    assert_true(per_report < 1.0);
    assert_true(projected < 100e6);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_running_does_not_grow_the_database, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
