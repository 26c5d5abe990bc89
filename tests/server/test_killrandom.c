/* Durability under kills at random instants: while one thread per rank posts a running job's
 * results back to back, perseusd (the real binary) is killed with SIGKILL at a random instant
 * (after 1 to 16 more acknowledgements, drawn at random: requests are in flight in every state
 * of their handling), KILLS times, and restarted on the same data directory. After every
 * restart the job stores at least every result acknowledged before the kill; at the end, after a
 * clean stop and a restart, it stores every result ever acknowledged and none that was never
 * posted. $PRS_KILLS sets the count (default 100); the seed is printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "sim_ranks.h"
#include "wait.h"

#define STAGES 2
#define MB 2
#define DP 2
#define RANKS (STAGES * DP)

static daemon_proc d;
static sim_job job;
static atomic_int port, stop;
static atomic_long acked, posted;

typedef struct poster {
    pthread_t th;
    int rank;
    int clocks[2 * MB];
} poster;

static int teardown(void **state)
{
    (void)state;
    return daemon_teardown(&d);
}

/* One rank posting one running-phase iteration after another until stop. A result that got no
 * answer (the server died under it) is not posted again: the next one has the next number. */
static void *poster_main(void *arg)
{
    poster *p = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", job.id);
    for (long it = 1000; !atomic_load(&stop); it++) {
        json_t *its = json_array();
        json_array_append_new(its, sim_iteration(&job, p->rank % STAGES, it, p->clocks, 0, 0));
        json_t *body = json_pack("{s:i, s:o}", "rank", p->rank, "iterations", its);
        atomic_fetch_add(&posted, 1);
        int used = atomic_load(&port);
        http_reply r = http_json(used, "POST", path, job.token, body);
        int st = r.status;
        http_reply_free(&r);
        if (st == 200) atomic_fetch_add(&acked, 1);
        if (st == 0) /* the server is down: wait for the restarted one */
            PRS_WAIT_UNTIL(atomic_load(&port) != used || atomic_load(&stop), 30);
    }
    return NULL;
}

/* Stored measurements of the job, or -1. */
static long stored(void)
{
    job.port = atomic_load(&port);
    json_t *st = sim_status(&job);
    long m = st ? json_int(st, "measurements") : -1;
    json_decref(st);
    return m;
}

/* The job through profiling and planning to running, without kills. */
static void reach_running(void)
{
    assert_int_equal(sim_create(d.port, sim_sweep_spec(STAGES, MB, DP), STAGES, MB, DP, &job), 201);
    assert_int_equal(sim_register_all(&job), RANKS);
    long iteration = 0;
    assert_true(sim_profile(&job, 100000, &iteration) >= 0);
    json_t *st = sim_wait_phase_change(&job, "planning", 60);
    assert_non_null(st);
    assert_string_equal(json_str(st, "phase"), "running");
    json_decref(st);
    atomic_store(&acked, job.acked);
    atomic_store(&posted, job.acked);
}

static void kill_at_random(int kills, unsigned seed)
{
    for (int k = 0; k < kills; k++) {
        /* The kill's instant: after 1 to 16 more acknowledgements, so the posts in flight are
         * anywhere in their handling. */
        long want = atomic_load(&acked) + 1 + (long)(rand_r(&seed) % 16);
        PRS_WAIT_UNTIL(atomic_load(&acked) >= want, 30);
        if (atomic_load(&acked) < want) fail_msg("no results acknowledged in 30 s (kill %d)", k);
        long sure = atomic_load(&acked);
        assert_int_equal(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
        assert_int_equal(daemon_start(&d), 0);
        atomic_store(&port, d.port);
        long m = stored();
        if (m < sure)
            fail_msg("kill %d: %ld results stored, %ld acknowledged before it", k, m, sure);
    }
}

static void test_kill_at_random(void **state)
{
    (void)state;
    const char *env = getenv("PRS_KILLS");
    int kills = env && atoi(env) > 0 ? atoi(env) : 100;
    unsigned seed = (unsigned)time(NULL);
    harness_tmpdir(d.dir, sizeof d.dir, "killrandom");
    assert_true(d.dir[0]);
    assert_int_equal(daemon_start(&d), 0);
    atomic_store(&port, d.port);
    reach_running();
    poster p[RANKS];
    for (int r = 0; r < RANKS; r++) {
        char phase[32];
        p[r].rank = r;
        job.port = d.port;
        assert_true(sim_schedule(&job, r, phase, p[r].clocks, NULL, NULL) >= 0);
        assert_string_equal(phase, "running");
        assert_int_equal(pthread_create(&p[r].th, NULL, poster_main, &p[r]), 0);
    }
    double t0 = harness_now();
    kill_at_random(kills, seed);
    atomic_store(&stop, 1);
    for (int r = 0; r < RANKS; r++)
        pthread_join(p[r].th, NULL);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
    assert_int_equal(daemon_start(&d), 0);
    atomic_store(&port, d.port);
    long m = stored(), a = atomic_load(&acked), n = atomic_load(&posted);
    print_message("%d kills at random instants (seed %u) in %.1f s: %ld results posted, %ld "
                  "acknowledged, %ld stored (%ld unanswered ones kept)\n",
                  kills, seed, harness_now() - t0, n, a, m, m - a);
    assert_true(m >= a);
    assert_true(m <= n);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_kill_at_random, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
