/* End to end: the real perseusd (tests/server/server_harness.h) and 2 data-parallel pipelines of 4
 * stages, each rank a prs_client on its own sim GPU (perseus/gpu.h), going through registering ->
 * profiling -> planning -> running as a training job would.
 *
 * The ranks run in this one thread, in simulated time: a list scheduler runs each stage's
 * computations in its 1F1B order (prs_op_describe), each when its dependencies are done (a
 * forward after the previous stage's forward of that microbatch, a backward after the next
 * stage's backward), idling the GPU (blocking power) while it waits; at the end of an iteration
 * all GPUs wait for the slowest (the optimizer step's all-reduce). So the iteration time and
 * energy the sim GPUs report are the pipeline's, and the profile the server builds comes only
 * from the windows the clients measured.
 *
 * Asserts: every phase is reached; the profile is measured; in the running phase the pipeline's
 * energy per iteration is below the all-max iteration's (profiling round 0: every clock at f_max)
 * at an iteration time no more than 2 % longer; clocks are reset when the clients are freed. A
 * second case kills the server in the running phase: training goes on at the same pace with the
 * plan in hand, and after a restart on the same port and data the clients post again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/client.h"
#include "perseus/planner.h"
#include "server_harness.h"

#define STAGES 4
#define MB 4
#define DP 2
#define RANKS (STAGES * DP)
#define OPS (2 * MB)

typedef struct rank {
    prs_gpu *gpu;
    prs_client *cl;
    int dp, pp;
} rank;

typedef struct world {
    daemon_proc d;
    rank r[RANKS];
    prs_pipeline pipe;
    long iterations;
} world;

typedef struct iter_rec {
    char phase[16];
    long round, plan_id;
    int uniform; /* every rank of pipeline 0 in the same phase, round and plan */
    double time_s, energy_j;
} iter_rec;

static prs_gpu_work stage_work(int pp, prs_instr in)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    prs_gpu_work w = g->work[in];
    if (pp == STAGES - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
    return w;
}

/* One iteration of pipeline dp; returns its time; *energy gets the sum over its GPUs. */
static double run_pipeline(world *w, int dp, double *energy)
{
    rank *r = &w->r[(size_t)dp * STAGES];
    double fin_f[STAGES][MB], fin_b[STAGES][MB], e0 = 0, t0 = prs_gpu_now_s(r[0].gpu);
    int next[STAGES] = {0};
    for (int s = 0; s < STAGES; s++) {
        e0 += prs_gpu_read_energy_j(r[s].gpu);
        for (int m = 0; m < MB; m++)
            fin_f[s][m] = fin_b[s][m] = -1;
    }
    for (int done = 0; done < STAGES * OPS;) {
        int progress = 0;
        for (int s = 0; s < STAGES; s++) {
            if (next[s] == OPS) continue;
            prs_instr in;
            int mb;
            prs_op_describe(&w->pipe, s, next[s], &in, &mb);
            double dep = 0;
            if (in == PRS_FORWARD && s > 0) dep = fin_f[s - 1][mb];
            if (in == PRS_BACKWARD && s < STAGES - 1) dep = fin_b[s + 1][mb];
            if (dep < 0) continue;
            double now = prs_gpu_now_s(r[s].gpu);
            if (dep > now) assert_int_equal(prs_gpu_sim_idle(r[s].gpu, dep - now), 0);
            prs_gpu_work work = stage_work(s, in);
            assert_int_equal(prs_client_begin(r[s].cl, in, mb, 0), 0);
            assert_int_equal(prs_gpu_sim_run(r[s].gpu, &work, NULL), 0);
            assert_int_equal(prs_client_end(r[s].cl, in, mb, 0), 0);
            (in == PRS_FORWARD ? fin_f : fin_b)[s][mb] = prs_gpu_now_s(r[s].gpu);
            next[s]++;
            done++;
            progress = 1;
        }
        assert_true(progress);
    }
    double end = 0;
    for (int s = 0; s < STAGES; s++)
        if (prs_gpu_now_s(r[s].gpu) > end) end = prs_gpu_now_s(r[s].gpu);
    double e1 = 0;
    for (int s = 0; s < STAGES; s++) {
        prs_gpu_sim_idle(r[s].gpu, end - prs_gpu_now_s(r[s].gpu));
        e1 += prs_gpu_read_energy_j(r[s].gpu);
        assert_int_equal(prs_client_iteration_end(r[s].cl), 0);
    }
    *energy = e1 - e0;
    return end - t0;
}

/* Snapshot of pipeline 0's schedule before an iteration. */
static void snapshot(world *w, iter_rec *rec)
{
    prs_client_stats s0, s;
    prs_client_get_stats(w->r[0].cl, &s0);
    snprintf(rec->phase, sizeof rec->phase, "%s", s0.phase);
    rec->round = s0.round;
    rec->plan_id = s0.plan_id;
    rec->uniform = 1;
    for (int i = 1; i < STAGES; i++) {
        prs_client_get_stats(w->r[i].cl, &s);
        rec->uniform &= strcmp(s.phase, s0.phase) == 0 && s.round == s0.round;
    }
}

static double run_iteration(world *w, iter_rec *rec)
{
    snapshot(w, rec);
    double e_other;
    rec->time_s = run_pipeline(w, 0, &rec->energy_j);
    run_pipeline(w, 1, &e_other);
    w->iterations++;
    return rec->time_s;
}

static void world_start(world *w, double poll_s)
{
    memset(w, 0, sizeof *w);
    w->pipe = (prs_pipeline){STAGES, MB, PRS_SCHEDULE_1F1B, 0.001, 0, 0};
    harness_tmpdir(w->d.dir, sizeof w->d.dir, "client-e2e");
    assert_true(w->d.dir[0]);
    assert_int_equal(daemon_start(&w->d), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", w->d.port);
    const char *spec = "{\"model\": \"client-e2e\", \"stages\": 4, \"microbatches\": 4, \"dp\": 2,"
                       " \"clocks_mhz\": [1410, 1365, 1320, 1275, 1230, 1185, 1140, 1095, 1050,"
                       " 1005], \"blocking_power_w\": 83.64, \"reuse_frontier\": false,"
                       " \"profiling\": {\"warmup_iterations\": 1, \"iterations_per_clock\": 2}}";
    for (int i = 0; i < RANKS; i++) {
        rank *r = &w->r[i];
        r->dp = i / STAGES;
        r->pp = i % STAGES;
        prs_error e;
        assert_int_equal(prs_gpu_open("sim:a100", &r->gpu, &e), 0);
        prs_client_opts o;
        prs_client_opts_init(&o);
        o.server_url = url;
        if (i == 0) {
            o.job_spec_json = spec;
        } else {
            o.job_id = prs_client_job_id(w->r[0].cl);
            o.token = prs_client_token(w->r[0].cl);
        }
        o.rank = i;
        o.dp = r->dp;
        o.pp = r->pp;
        o.gpu = r->gpu;
        o.poll_interval_s = poll_s;
        o.http_timeout_s = 2;
        o.warmup_iterations = 0;
        int rc = prs_client_new(&o, &r->cl, &e);
        if (rc) fprintf(stderr, "prs_client_new: %s\n", e.msg);
        assert_int_equal(rc, 0);
    }
}

static void world_stop(world *w)
{
    for (int i = 0; i < RANKS; i++) {
        long changes = prs_gpu_sim_clock_changes(w->r[i].gpu);
        prs_client_free(w->r[i].cl);
        int f = -1;
        prs_gpu_sim_clock(w->r[i].gpu, &f);
        assert_int_equal(f, 0); /* clocks reset at exit */
        assert_true(changes > 0);
        prs_gpu_close(w->r[i].gpu);
    }
    if (w->d.pid > 0) assert_int_equal(daemon_stop(&w->d, SIGTERM), 0);
    harness_rmdir(w->d.dir);
}

static int seen(const iter_rec *recs, long n, const char *phase)
{
    for (long i = 0; i < n; i++)
        if (strcmp(recs[i].phase, phase) == 0) return 1;
    return 0;
}

/* Iterate until pipeline 0 ran `want` uniform running iterations (or the time is up). */
static long train_until_running(world *w, iter_rec *recs, long cap, int want)
{
    long n = 0;
    int running = 0;
    double t0 = harness_now();
    while (n < cap && running < want && harness_now() - t0 < 60) {
        run_iteration(w, &recs[n]);
        if (recs[n].uniform && strcmp(recs[n].phase, "running") == 0) running++;
        n++;
        harness_sleep_ms(2);
    }
    return n;
}

static void test_profile_plan_run(void **state)
{
    world w;
    world_start(&w, 0.01);
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 5);
    assert_true(seen(recs, n, "profiling"));
    assert_true(seen(recs, n, "running"));

    /* All-max: a uniform iteration of profiling round 0 (every clock 1410 MHz). */
    const iter_rec *allmax = NULL, *run = NULL;
    for (long i = 0; i < n; i++) {
        if (recs[i].uniform && strcmp(recs[i].phase, "profiling") == 0 && recs[i].round == 0)
            allmax = &recs[i];
        if (recs[i].uniform && strcmp(recs[i].phase, "running") == 0) run = &recs[i];
    }
    if (!allmax || !run) {
        fail_msg("no all-max or no running iteration in %ld", n);
        return;
    }
    printf("all-max: %.4f s %.2f J per iteration; running plan %ld: %.4f s %.2f J "
           "(%+.2f %% time, %+.2f %% energy) after %ld iterations\n",
           allmax->time_s, allmax->energy_j, run->plan_id, run->time_s, run->energy_j,
           100 * (run->time_s / allmax->time_s - 1), 100 * (run->energy_j / allmax->energy_j - 1),
           n);
    assert_true(run->energy_j < allmax->energy_j);
    assert_true(run->time_s <= 1.02 * allmax->time_s);

    /* The server built the profile from the measured windows. */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", prs_client_job_id(w.r[0].cl));
    http_reply r = http_do(w.d.port, "GET", path, prs_client_token(w.r[0].cl), NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_str(r.json, "phase"), "running");
    assert_string_equal(json_str(r.json, "profile_source"), "measured");
    http_reply_free(&r);

    prs_client_stats s;
    prs_client_get_stats(w.r[3].cl, &s);
    assert_true(s.registered);
    assert_true(s.posted > 0);
    assert_int_equal(s.clock_failures, 0);
    free(recs);
    world_stop(&w);
}

/* Restart perseusd on the same port and data directory. */
static int daemon_restart(daemon_proc *d)
{
    const char *bin_dir = getenv("PRS_BIN_DIR");
    char bin[512], listen[64], log[300];
    snprintf(bin, sizeof bin, "%s/perseusd", bin_dir ? bin_dir : ".");
    snprintf(listen, sizeof listen, "127.0.0.1:%d", d->port);
    snprintf(log, sizeof log, "%s/perseusd.log", d->dir);
    d->pid = fork();
    if (d->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 2);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, 1);
        execl(bin, "perseusd", "--listen", listen, "--data-dir", d->dir, (char *)NULL);
        _exit(127);
    }
    double t0 = harness_now();
    while (harness_now() - t0 < 15) {
        http_reply r = http_do(d->port, "GET", "/healthz", NULL, NULL, 0, NULL);
        int ok = r.status == 200;
        http_reply_free(&r);
        if (ok) return 0;
        harness_sleep_ms(20);
    }
    return -1;
}

static double wall_iteration(world *w, iter_rec *rec)
{
    double t0 = harness_now();
    run_iteration(w, rec);
    return harness_now() - t0;
}

static void test_server_killed(void **state)
{
    world w;
    world_start(&w, 0.01);
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 3);
    assert_true(seen(recs, n, "running"));
    long plan = recs[n - 1].plan_id;

    /* Wall time of the hooks for 20 iterations with the server up, then down. */
    iter_rec rec;
    double up = 0, down = 0, worst_down = 0;
    for (int i = 0; i < 20; i++)
        up += wall_iteration(&w, &rec);
    assert_int_equal(daemon_stop(&w.d, SIGKILL), 128 + SIGKILL);
    prs_client_stats before;
    prs_client_get_stats(w.r[0].cl, &before);
    for (int i = 0; i < 20; i++) {
        double t = wall_iteration(&w, &rec);
        down += t;
        if (t > worst_down) worst_down = t;
        assert_string_equal(rec.phase, "running"); /* the plan in hand */
        assert_int_equal(rec.plan_id, plan);
        harness_sleep_ms(5); /* let the background threads find the server gone */
    }
    prs_client_stats during;
    prs_client_get_stats(w.r[0].cl, &during);
    printf("hooks per iteration (8 ranks, 64 computations): server up %.1f us, down %.1f us "
           "(worst %.1f us); requests without answer: %ld\n",
           1e6 * up / 20, 1e6 * down / 20, 1e6 * worst_down, during.http_failures);
    assert_true(during.http_failures > before.http_failures);
    assert_true(worst_down < 0.05); /* never waits on the network */

    assert_int_equal(daemon_restart(&w.d), 0);
    double t0 = harness_now();
    prs_client_stats after = during;
    while (harness_now() - t0 < 20 && after.posted <= during.posted) {
        run_iteration(&w, &rec);
        harness_sleep_ms(5);
        prs_client_get_stats(w.r[0].cl, &after);
    }
    assert_true(after.posted > during.posted); /* the job resumed */
    assert_string_equal(rec.phase, "running");
    free(recs);
    world_stop(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_plan_run),
        cmocka_unit_test(test_server_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
