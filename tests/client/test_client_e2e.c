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
#include <math.h>

#include "perseus/client.h"
#include "perseus/planner.h"
#include "server_harness.h"
#include "wait.h"

#define STAGES 4
#define MB 4
#define MAX_DP 4
#define MAX_RANKS (STAGES * MAX_DP)
#define MAX_V 2 /* model chunks per GPU (interleaved) */

typedef struct rank {
    prs_gpu *gpu;
    prs_client *cl;
    int dp, pp;
} rank;

typedef struct world {
    daemon_proc d;
    rank r[MAX_RANKS];
    int dp;              /* pipelines */
    double slow[MAX_DP]; /* work multiplier of each pipeline (a straggler: > 1) */
    double pace[MAX_DP]; /* last iteration: each pipeline's own critical path */
    prs_pipeline pipe;
    long iterations;
    long mixed_plans; /* running iterations in which pipeline 0's ranks ran different plans */
} world;

typedef struct iter_rec {
    char phase[16];
    long round, plan_id;
    int uniform; /* every rank of pipeline 0 in the same phase, round and plan */
    double time_s, energy_j;
} iter_rec;

/* Work of one computation of model chunk c (of `chunks`): the stage's work split over chunks. */
static prs_gpu_work stage_work(int c, int chunks, prs_instr in)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    prs_gpu_work w = g->work[in];
    if (c == chunks - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
    w.t_ref_s *= (double)STAGES / chunks;
    return w;
}

/* The computations of one iteration of pipeline dp (a forward of chunk c waits for chunk c - 1's
 * forward of that microbatch, a backward for chunk c + 1's); returns when its last GPU finished. */
static double run_pipeline(world *w, int dp)
{
    rank *r = &w->r[(size_t)dp * STAGES];
    int chunks = prs_pipeline_chunks(&w->pipe), ops = prs_ops_per_stage(&w->pipe);
    double fin[2][STAGES * MAX_V][MB];
    int next[STAGES] = {0};
    for (int c = 0; c < chunks; c++)
        for (int m = 0; m < MB; m++)
            fin[0][c][m] = fin[1][c][m] = -1;
    for (int done = 0; done < STAGES * ops;) {
        int progress = 0;
        for (int s = 0; s < STAGES; s++) {
            if (next[s] == ops) continue;
            prs_instr in;
            int mb, c;
            prs_op_describe_chunk(&w->pipe, s, next[s], &in, &mb, &c);
            double dep = 0;
            if (in == PRS_FORWARD && c > 0) dep = fin[0][c - 1][mb];
            if (in == PRS_BACKWARD && c < chunks - 1) dep = fin[1][c + 1][mb];
            if (dep < 0) continue;
            double now = prs_gpu_now_s(r[s].gpu);
            if (dep > now) assert_int_equal(prs_gpu_sim_idle(r[s].gpu, dep - now), 0);
            prs_gpu_work work = stage_work(c, chunks, in);
            work.t_ref_s *= w->slow[dp];
            assert_int_equal(prs_client_begin(r[s].cl, in, mb, c / STAGES), 0);
            assert_int_equal(prs_gpu_sim_run(r[s].gpu, &work, NULL), 0);
            assert_int_equal(prs_client_end(r[s].cl, in, mb, c / STAGES), 0);
            fin[in][c][mb] = prs_gpu_now_s(r[s].gpu);
            next[s]++;
            done++;
            progress = 1;
        }
        assert_true(progress);
    }
    double end = 0;
    for (int s = 0; s < STAGES; s++)
        if (prs_gpu_now_s(r[s].gpu) > end) end = prs_gpu_now_s(r[s].gpu);
    return end;
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
        if (strcmp(s0.phase, "running") == 0 && s.plan_id != s0.plan_id) w->mixed_plans++;
    }
}

/* One iteration of every pipeline, ended by the gradient all-reduce: every GPU waits (blocking
 * power) for the slowest pipeline. rec gets pipeline 0's time and energy. */
static double run_iteration(world *w, iter_rec *rec)
{
    snapshot(w, rec);
    int n = w->dp * STAGES;
    double t0 = prs_gpu_now_s(w->r[0].gpu), e0 = 0, e1 = 0, end = 0;
    for (int s = 0; s < STAGES; s++)
        e0 += prs_gpu_read_energy_j(w->r[s].gpu);
    for (int d = 0; d < w->dp; d++) {
        double fin = run_pipeline(w, d);
        w->pace[d] = fin - t0;
        if (fin > end) end = fin;
    }
    for (int i = 0; i < n; i++) {
        prs_gpu_sim_idle(w->r[i].gpu, end - prs_gpu_now_s(w->r[i].gpu));
        assert_int_equal(prs_client_iteration_end(w->r[i].cl), 0);
    }
    for (int s = 0; s < STAGES; s++)
        e1 += prs_gpu_read_energy_j(w->r[s].gpu);
    rec->time_s = end - t0;
    rec->energy_j = e1 - e0;
    w->iterations++;
    return rec->time_s;
}

/* Run-to-run noise of the sim GPUs and profiling iterations per clock of the next world_start. */
static double world_jitter = 0;
static int world_iters = 2;
static const char *world_precision = ""; /* more "profiling" members, each after a comma */

/* v: model chunks per GPU (1: 1F1B, 2: interleaved). An iteration is about a simulated second
 * but a few wall milliseconds, so the plan-switch lead is set in wall-clock terms: the server
 * measures how fast the pipelines report and announces a switch half a second of their pace
 * ahead, which every rank's background thread (polling every 10 ms) covers even when the
 * machine is loaded or the build is instrumented. ThreadSanitizer slows every thread and lock
 * several times more than the other sanitizers: there polls took longer than half a second, and
 * ranks learned of plans after their iteration (late_switches), so the lead is longer there; under
 * AddressSanitizer on a loaded machine one rank of test_interleaved learned of a plan late once
 * (a clean-clone CI run), so it is longer there too. */
#if defined(__SANITIZE_THREAD__)
#define SWITCH_LEAD "2.5"
#elif defined(__SANITIZE_ADDRESS__)
#define SWITCH_LEAD "1.5"
#else
#define SWITCH_LEAD "0.5"
#endif

/* Automatic straggler detection judges each pipeline's wall-clock pace; on a loaded host one
 * simulated pipeline can really run 10 % slower than the other for a few iterations and be taken
 * for a straggler, which moves the others to a slower plan. Tests that are not about stragglers
 * set a threshold no pace reaches. */
#define NO_AUTO_STRAGGLER " \"straggler\": {\"factor\": 100, \"iterations\": 3},"

static void world_start(world *w, double poll_s, int v, int dp, const char *extra)
{
    memset(w, 0, sizeof *w);
    w->dp = dp;
    for (int d = 0; d < MAX_DP; d++)
        w->slow[d] = 1;
    w->pipe = (prs_pipeline){STAGES, MB, v > 1 ? PRS_SCHEDULE_INTERLEAVED : PRS_SCHEDULE_1F1B,
                             0.001,  0,  v > 1 ? v : 0,
                             0};
    harness_tmpdir(w->d.dir, sizeof w->d.dir, "client-e2e");
    assert_true(w->d.dir[0]);
    assert_int_equal(daemon_start(&w->d), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", w->d.port);
    char spec[768];
    snprintf(spec, sizeof spec,
             "{\"model\": \"client-e2e\", \"stages\": 4, \"microbatches\": 4, \"dp\": %d,%s"
             " \"schedule\": \"%s\", \"virtual_stages\": %d,"
             " \"clocks_mhz\": [1410, 1365, 1320, 1275, 1230, 1185, 1140, 1095, 1050,"
             " 1005], \"blocking_power_w\": 83.64, \"reuse_frontier\": false, "
             "\"switch_lead_s\": " SWITCH_LEAD ","
             " \"profiling\": {\"warmup_iterations\": 1, \"iterations_per_clock\": %d%s}}",
             dp, extra, v > 1 ? "interleaved" : "1f1b", v > 1 ? v : 1, world_iters,
             world_precision);
    for (int i = 0; i < dp * STAGES; i++) {
        rank *r = &w->r[i];
        r->dp = i / STAGES;
        r->pp = i % STAGES;
        prs_error e;
        assert_int_equal(prs_gpu_open("sim:a100", &r->gpu, &e), 0);
        assert_int_equal(prs_gpu_sim_set_jitter(r->gpu, world_jitter, 1000u + (unsigned)i), 0);
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
    for (int i = 0; i < w->dp * STAGES; i++) {
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
        harness_sleep_ms(2); /* the training pace: results reach the server as they end */
    }
    return n;
}

static void profile_plan_run(int v)
{
    world w;
    world_start(&w, 0.01, v, 2, NO_AUTO_STRAGGLER);
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
    assert_int_equal(s.order_errors, 0);
    assert_int_equal(s.late_switches, 0);
    assert_true(s.pace_s > 0 && s.pace_s < run->time_s + 1e-9);
    assert_true(fabs(s.blocking_power_w - 83.64) < 1e-6 * 83.64); /* the sim's, measured exactly */
    long late = 0;
    for (int i = 0; i < STAGES; i++) {
        prs_client_stats si;
        prs_client_get_stats(w.r[i].cl, &si);
        late += si.late_switches;
    }
    printf("%s: %ld running iterations in which pipeline 0's ranks ran different plans; late "
           "switches on its ranks %ld\n",
           v > 1 ? "interleaved" : "1f1b", w.mixed_plans, late);
    assert_int_equal(w.mixed_plans, 0);
    assert_int_equal(late, 0);

    /* A hook out of the schedule's order is refused and counted, never filed as another. */
    prs_instr in;
    int mb, chunk;
    prs_op_describe_chunk(&w.pipe, 1, 0, &in, &mb, &chunk);
    assert_int_equal(prs_client_begin(w.r[1].cl, PRS_BACKWARD, MB - 1, 0), PRS_EORDER);
    assert_int_equal(prs_client_end(w.r[1].cl, PRS_BACKWARD, MB - 1, 0), 0);
    prs_client_get_stats(w.r[1].cl, &s);
    assert_int_equal(s.order_errors, 1);
    free(recs);
    world_stop(&w);
}

static void test_profile_plan_run(void **state)
{
    (void)state;
    profile_plan_run(1);
}

/* Megatron-LM's interleaved 1F1B, 2 model chunks per GPU: the hooks give the chunk, the server
 * files each window under its chunk, and the job profiles, plans and runs. */
static void test_interleaved(void **state)
{
    (void)state;
    profile_plan_run(2);
}

/* The true profile: the sim model's figures for every (chunk, instruction, clock) measured. */
static prs_profile *true_profile(const world *w, const prs_profile *measured)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    int chunks = prs_pipeline_chunks(&w->pipe);
    prs_profile *t = prs_profile_new();
    const prs_profile_row *rows = prs_profile_rows(measured);
    for (size_t i = 0; i < prs_profile_nrows(measured); i++) {
        prs_gpu_work work = stage_work(rows[i].stage, chunks, rows[i].instr);
        prs_profile_row r = rows[i];
        r.time_s = prs_gpu_time_s(g, &work, r.freq_mhz);
        r.energy_j = prs_gpu_energy_j(g, &work, r.freq_mhz);
        r.line = 0;
        assert_int_equal(prs_profile_add(t, &r, NULL), 0);
    }
    return t;
}

/* The clocks pipeline 0 runs now, from its ranks' schedules. */
static void running_plan(const world *w, int *clocks)
{
    int ops = prs_ops_per_stage(&w->pipe);
    for (int s = 0; s < STAGES; s++) {
        char path[160];
        snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=%d", prs_client_job_id(w->r[0].cl),
                 s);
        http_reply r = http_do(w->d.port, "GET", path, prs_client_token(w->r[0].cl), NULL, 0, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "phase"), "running");
        json_t *c = json_object_get(r.json, "clocks_mhz");
        assert_int_equal(json_array_size(c), ops);
        for (int i = 0; i < ops; i++)
            clocks[s * ops + i] = (int)json_integer_value(json_array_get(c, (size_t)i));
        http_reply_free(&r);
    }
}

/* GPUs whose computations vary by 3 % from run to run (sim jitter): the server repeats each
 * clock until its means are precise to 0.4 % (or 16 iterations), the status shows the precision
 * reached per clock, the profile it measures is within 2 % of the model's truth for every entry,
 * and the plan the robust planner runs is, on the truth, within 0.5 % of the all-max iteration
 * time and cheaper. */
static void test_jitter(void **state)
{
    (void)state;
    world w;
    world_jitter = 0.03;
    world_precision = ", \"target_se_pct\": 0.4, \"max_iterations_per_clock\": 16";
    world_start(&w, 0.01, 1, 2, NO_AUTO_STRAGGLER);
    world_jitter = 0;
    world_precision = "";
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 3);
    assert_true(seen(recs, n, "running"));
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", prs_client_job_id(w.r[0].cl));
    http_reply r = http_do(w.d.port, "GET", path, prs_client_token(w.r[0].cl), NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_str(r.json, "planner"), "robust");
    json_t *clocks_json = json_object_get(json_object_get(r.json, "profiling"), "clocks");
    size_t nclk = json_array_size(clocks_json);
    int repeated = 0;
    assert_true(nclk >= 2);
    for (size_t i = 0; i < nclk; i++) {
        json_t *c = json_array_get(clocks_json, i);
        long its = json_int(c, "iterations");
        double se = json_num(c, "se_pct");
        printf("clock %ld MHz: %ld iterations per rank, standard error %.3f %%\n",
               json_int(c, "clock_mhz"), its, se);
        assert_true(se <= 0.4 || its == 16);
        repeated |= its > 2;
    }
    assert_true(repeated);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", prs_client_job_id(w.r[0].cl));
    r = http_do(w.d.port, "GET", path, prs_client_token(w.r[0].cl), NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    prs_profile *measured = NULL;
    assert_int_equal(prs_profile_parse("server", r.body, r.len, &measured, NULL), 0);
    http_reply_free(&r);
    prs_profile *truth = true_profile(&w, measured);
    const prs_profile_row *m = prs_profile_rows(measured), *t = prs_profile_rows(truth);
    double worst = 0;
    for (size_t i = 0; i < prs_profile_nrows(measured); i++) {
        worst = fmax(worst, fabs(m[i].time_s / t[i].time_s - 1));
        worst = fmax(worst, fabs(m[i].energy_j / t[i].energy_j - 1));
    }
    int clocks[STAGES * 2 * MB], allmax[STAGES * 2 * MB];
    running_plan(&w, clocks);
    for (int i = 0; i < STAGES * 2 * MB; i++)
        allmax[i] = 1410;
    prs_pipeline pipe = w.pipe;
    pipe.blocking_power_w = 83.64;
    double tp, ep, ta, ea;
    assert_int_equal(prs_evaluate_plan(truth, &pipe, clocks, &tp, &ep, NULL), 0);
    assert_int_equal(prs_evaluate_plan(truth, &pipe, allmax, &ta, &ea, NULL), 0);
    printf("jitter 3 %%: %zu profile entries, worst %.2f %% from the truth; running plan on the "
           "truth %.4f s %.2f J, all-max %.4f s %.2f J (%+.3f %% time)\n",
           prs_profile_nrows(measured), 100 * worst, tp, ep, ta, ea, 100 * (tp / ta - 1));
    assert_true(worst < 0.02);
    assert_true(tp <= ta * 1.005);
    assert_true(ep < ea);
    prs_profile_free(truth);
    prs_profile_free(measured);
    free(recs);
    world_stop(&w);
}

/* The job's status (the caller frees it). */
static http_reply job_status(world *w)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", prs_client_job_id(w->r[0].cl));
    return http_do(w->d.port, "GET", path, prs_client_token(w->r[0].cl), NULL, 0, NULL);
}

/* Pipeline d's straggler state in the job status ("none", "automatic", "explicit"), its T' and
 * plan. */
static const char *straggler_of(world *w, int d, double *tprime, long *plan)
{
    static char kind[16];
    http_reply r = job_status(w);
    json_t *p = json_array_get(json_object_get(r.json, "pipelines"), (size_t)d);
    snprintf(kind, sizeof kind, "%s", json_str(p, "straggler"));
    *tprime = json_num(p, "straggler_time_s");
    *plan = json_int(p, "plan_id");
    http_reply_free(&r);
    return kind;
}

/* Whether the server judged iteration `it` in every pipeline (its status'
 * pipelines[].judged_iteration). */
static int judged(world *w, long it)
{
    http_reply r = job_status(w);
    json_t *pipes = json_object_get(r.json, "pipelines");
    int all = r.status == 200;
    for (int d = 0; d < w->dp; d++)
        all &= json_int(json_array_get(pipes, (size_t)d), "judged_iteration") >= it;
    http_reply_free(&r);
    return all;
}

/* Iterate until pipeline d's state is `want`; after each iteration, wait until the server has
 * judged it in every pipeline (the clients post from their background threads, so on a busy
 * machine the results may come late; the count of iterations that gives the state away does
 * not depend on it). Returns the iterations it took, or -1. */
static long until_state(world *w, int d, const char *want, double *tprime, long *plan)
{
    iter_rec rec;
    for (long n = 1; n <= 40; n++) {
        run_iteration(w, &rec);
        prs_client_stats st;
        prs_client_get_stats(w->r[0].cl, &st); /* every rank ran as many iterations */
        PRS_WAIT_UNTIL(judged(w, st.iterations - 1), 60);
        assert_true(judged(w, st.iterations - 1));
        if (strcmp(straggler_of(w, d, tprime, plan), want) == 0) return n;
    }
    return -1;
}

/* Automatic straggler detection with no explicit report: 4 pipelines whose iterations end in the
 * all-reduce (every pipeline reports the straggler's iteration time), one made 1.2x slower. Its
 * pace gives it away in straggler.iterations iterations, with T' its own pace; the others
 * move to the lookup plan; it clears when the pipeline recovers. */
static void test_straggler_auto(void **state)
{
    (void)state;
    world w;
    world_start(&w, 0.01, 1, 4, " \"straggler\": {\"factor\": 1.1, \"iterations\": 3},");
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 10);
    assert_true(seen(recs, n, "running"));
    double tprime;
    long fastest, plan;
    assert_string_equal(straggler_of(&w, 0, &tprime, &fastest), "none");
    w.slow[3] = 1.2;
    long took = until_state(&w, 3, "automatic", &tprime, &plan);
    double pace = w.pace[3], unused;
    iter_rec rec;
    double t0 = harness_now(); /* the others switch from the iteration the server set */
    while (harness_now() - t0 < 30) {
        assert_string_equal(straggler_of(&w, 0, &unused, &plan), "none");
        prs_client_stats st;
        prs_client_get_stats(w.r[0].cl, &st);
        if (plan != fastest && st.plan_id == plan) break;
        run_iteration(&w, &rec);
        harness_sleep_ms(20); /* the training pace */
    }
    printf("straggler 1.2x: detected after %ld iterations (straggler.iterations = 3); T' %.4f s, "
           "its pace %.4f s (%+.2f %%); the others run plan %ld (fastest %ld)\n",
           took, tprime, pace, 100 * (tprime / pace - 1), plan, fastest);
    assert_int_equal(took, 3);
    assert_true(fabs(tprime / pace - 1) <= 0.02);
    assert_true(plan != fastest);
    w.slow[3] = 1;
    took = until_state(&w, 3, "none", &tprime, &plan);
    printf("recovered: cleared after %ld iterations\n", took);
    assert_int_equal(took, 3);
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
        harness_sleep_ms(20); /* poll interval */
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
    world_start(&w, 0.01, 1, 2, NO_AUTO_STRAGGLER);
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 3);
    assert_true(seen(recs, n, "running"));
    long plan = recs[n - 1].plan_id;

    /* Wall time of the hooks for 20 iterations with the server up, then down. */
    iter_rec rec;
    double up = 0, down = 0, worst_down = 0, worst_up = 0;
    for (int i = 0; i < 20; i++) {
        double t = wall_iteration(&w, &rec);
        up += t;
        worst_up = t > worst_up ? t : worst_up;
    }
    assert_int_equal(daemon_stop(&w.d, SIGKILL), 128 + SIGKILL);
    prs_client_stats before;
    prs_client_get_stats(w.r[0].cl, &before);
    /* At least 20 iterations, and on until rank 0's background thread found the server gone
     * (a loaded or instrumented machine may take it longer than 20). */
    prs_client_stats during = before;
    int ndown = 0;
    double t0 = harness_now();
    while (ndown < 20 ||
           (during.http_failures <= before.http_failures && harness_now() - t0 < 20)) {
        double t = wall_iteration(&w, &rec);
        down += t;
        ndown++;
        if (t > worst_down) worst_down = t;
        assert_string_equal(rec.phase, "running"); /* the plan in hand */
        assert_int_equal(rec.plan_id, plan);
        harness_sleep_ms(5); /* let the background threads find the server gone */
        prs_client_get_stats(w.r[0].cl, &during);
    }
    printf("hooks per iteration (8 ranks, 64 computations): server up %.1f us, down %.1f us "
           "(worst %.1f us, %d iterations); requests without answer: %ld\n",
           1e6 * up / 20, 1e6 * down / ndown, 1e6 * worst_down, ndown, during.http_failures);
    assert_true(during.http_failures > before.http_failures);
    /* Never waits on the network: as fast as with the server up, give or take what a busy
     * machine adds (an allowance of 20 times the slowest iteration with the server up). */
    assert_true(worst_down < 0.05 + 20 * worst_up);

    assert_int_equal(daemon_restart(&w.d), 0);
    t0 = harness_now();
    prs_client_stats after = during;
    while (harness_now() - t0 < 20 && after.posted <= during.posted) {
        run_iteration(&w, &rec);
        harness_sleep_ms(5); /* the training pace */
        prs_client_get_stats(w.r[0].cl, &after);
    }
    assert_true(after.posted > during.posted); /* the job resumed */
    assert_string_equal(rec.phase, "running");
    free(recs);
    world_stop(&w);
}

/* GET or change the job: the status body (new reference), or the answer to method on path. */
static json_t *job_call(world *w, const char *method, const char *what, json_t *body)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", prs_client_job_id(w->r[0].cl), what);
    http_reply r = http_json(w->d.port, method, path, prs_client_token(w->r[0].cl), body);
    json_t *out = r.status == 200 && r.json ? json_incref(r.json) : NULL;
    if (!out) fprintf(stderr, "%s %s: HTTP %d\n", method, path, r.status);
    http_reply_free(&r);
    return out;
}

static json_t *pipe_status(json_t *status, int d)
{
    return json_array_get(json_object_get(status, "pipelines"), (size_t)d);
}

/* The announced plan of pipeline d and the iteration it holds from (its first rank's schedule). */
static long announced(world *w, int d, long *from)
{
    char q[64];
    snprintf(q, sizeof q, "/schedule?rank=%d", d * STAGES);
    json_t *s = job_call(w, "GET", q, NULL);
    long plan = json_int(s, "plan_id");
    *from = json_int(s, "from_iteration");
    json_decref(s);
    return plan;
}

/* Iterate until every rank runs plan `plan`; first[i] gets the first iteration rank i ran it
 * (the client's count of iterations ended before it), from[d] the iteration the server announced
 * it from for pipeline d. 0, or -1 when some rank never did. */
static int until_plan(world *w, long plan, long *first, long *from)
{
    int n = w->dp * STAGES, left = n;
    for (int i = 0; i < n; i++)
        first[i] = -1;
    iter_rec rec;
    double t0 = harness_now();
    while (left > 0 && harness_now() - t0 < 30) {
        for (int d = 0; d < w->dp; d++) {
            long f;
            if (announced(w, d, &f) == plan) from[d] = f;
        }
        for (int i = 0; i < n; i++) {
            prs_client_stats st;
            prs_client_get_stats(w->r[i].cl, &st);
            if (first[i] < 0 && st.plan_id == plan) {
                first[i] = st.iterations;
                left--;
            }
        }
        if (left > 0) run_iteration(w, &rec);
        harness_sleep_ms(2); /* the pace of train_until_running, which the lead was set for */
    }
    return left ? -1 : 0;
}

/* Pipeline 0's mean power over k iterations, measured on its sim GPUs. */
static double measured_power(world *w, int k)
{
    double t = 0, e = 0;
    iter_rec rec;
    for (int i = 0; i < k; i++) {
        run_iteration(w, &rec);
        t += rec.time_s;
        e += rec.energy_j;
    }
    return e / t;
}

/* Every rank of each pipeline started plan `plan` within one iteration of the one announced for
 * its pipeline, all of a pipeline's ranks at the same iteration. */
static void check_switch(world *w, long plan, const char *what)
{
    long first[MAX_RANKS], from[MAX_DP];
    for (int d = 0; d < MAX_DP; d++)
        from[d] = -1;
    assert_int_equal(until_plan(w, plan, first, from), 0);
    for (int d = 0; d < w->dp; d++) {
        const long *f = first + (ptrdiff_t)d * STAGES;
        printf("%s: pipeline %d: plan %ld announced from iteration %ld, its ranks ran it from "
               "%ld %ld %ld %ld\n",
               what, d, plan, from[d], f[0], f[1], f[2], f[3]);
        assert_true(from[d] >= 0);
        for (int i = 0; i < STAGES; i++) {
            assert_int_equal(f[i], f[0]);
            assert_true(f[i] >= from[d] - 1 && f[i] <= from[d] + 1);
        }
    }
}

/* A power cap set mid-run: every pipeline moves to the fastest plan within cap / dp on its 1 s
 * peak at the announced iteration, draws (measured on the sim GPUs) the power predicted within
 * 2 %, keeps the cap across a kill -9 of the server, and returns to the fastest plan when the cap
 * is lifted. */
static void test_power_cap(void **state)
{
    (void)state;
    world w;
    world_start(&w, 0.01, 1, 2, NO_AUTO_STRAGGLER);
    enum { CAP = 4000 };
    iter_rec *recs = calloc(CAP, sizeof *recs);
    long n = train_until_running(&w, recs, CAP, 3);
    assert_true(seen(recs, n, "running"));

    /* A cap above any plan's power keeps the fastest plan and shows its power. */
    json_t *st = job_call(&w, "POST", "/power_cap", json_pack("{s:f}", "power_cap_w", 1e6));
    assert_non_null(st);
    json_decref(st);
    st = job_call(&w, "GET", "", NULL);
    long fastest = json_int(json_object_get(json_object_get(st, "frontier"), "fastest"), "plan_id");
    json_t *pw = json_object_get(pipe_status(st, 0), "power");
    double fast_peak = json_num(pw, "peak_w"), fast_avg = json_num(pw, "avg_w");
    assert_int_equal(json_int(pipe_status(st, 0), "plan_id"), fastest);
    assert_true(fast_peak > 0 && fast_avg > 0 && fast_avg <= fast_peak * (1 + 1e-9));
    json_decref(st);
    double fast_meas = measured_power(&w, 3);

    /* 90 % of the fastest plan's peak, per pipeline. */
    double cap = 0.9 * fast_peak * w.dp;
    st = job_call(&w, "POST", "/power_cap", json_pack("{s:f}", "power_cap_w", cap));
    assert_non_null(st);
    long plan = json_int(json_object_get(st, "power_cap"), "plan_id");
    assert_true(plan != fastest && plan >= 0);
    /* The answer shows the rule every pipeline now follows: the capped plan. */
    assert_int_equal(json_int(json_object_get(st, "rule"), "plan_id"), plan);
    assert_int_equal(json_int(json_object_get(st, "rule"), "cap_plan_id"), plan);
    assert_true(json_is_true(json_object_get(json_object_get(st, "power_cap"), "feasible")));
    json_decref(st);
    st = job_call(&w, "GET", "", NULL);
    for (int d = 0; d < w.dp; d++) { /* announced, or held back behind a pending switch */
        long p = json_int(pipe_status(st, d), "plan_id");
        if (p != fastest && p != plan)
            fail_msg("pipeline %d runs plan %ld after the cap was set (fastest %ld, capped %ld)", d,
                     p, fastest, plan);
    }
    json_decref(st);
    check_switch(&w, plan, "cap set");

    st = job_call(&w, "GET", "", NULL);
    pw = json_object_get(pipe_status(st, 0), "power");
    double peak = json_num(pw, "peak_w"), avg = json_num(pw, "avg_w");
    json_decref(st);
    assert_true(peak <= cap / w.dp * (1 + 1e-9));
    double meas = measured_power(&w, 5);
    printf("fastest plan %ld: predicted %.2f W (peak %.2f W), measured %.2f W (%+.3f %%)\n"
           "cap %.2f W per pipeline: plan %ld predicted %.2f W (peak %.2f W), measured %.2f W "
           "(%+.3f %%)\n",
           fastest, fast_avg, fast_peak, fast_meas, 100 * (fast_meas / fast_avg - 1), cap / w.dp,
           plan, avg, peak, meas, 100 * (meas / avg - 1));
    assert_true(fabs(fast_meas / fast_avg - 1) <= 0.02);
    assert_true(fabs(meas / avg - 1) <= 0.02);

    /* The cap survives kill -9. */
    assert_int_equal(daemon_stop(&w.d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(daemon_restart(&w.d), 0);
    st = job_call(&w, "GET", "", NULL);
    json_t *pc = json_object_get(st, "power_cap");
    assert_true(fabs(json_num(pc, "cap_w") / cap - 1) < 1e-9);
    assert_int_equal(json_int(pipe_status(st, 0), "plan_id"), plan);
    json_decref(st);

    /* Lifted: back to the fastest plan. */
    st = job_call(&w, "DELETE", "/power_cap", NULL);
    assert_non_null(st);
    assert_true(json_is_null(json_object_get(json_object_get(st, "power_cap"), "cap_w")));
    assert_int_equal(json_int(json_object_get(st, "rule"), "plan_id"), fastest);
    assert_true(json_is_null(json_object_get(json_object_get(st, "rule"), "cap_plan_id")));
    json_decref(st);
    st = job_call(&w, "GET", "", NULL);
    for (int d = 0; d < w.dp; d++) {
        long p = json_int(pipe_status(st, d), "plan_id");
        if (p != fastest && p != plan)
            fail_msg("pipeline %d runs plan %ld after the cap was lifted (fastest %ld, capped %ld)",
                     d, p, fastest, plan);
    }
    json_decref(st);
    check_switch(&w, fastest, "cap lifted");
    prs_client_stats s;
    prs_client_get_stats(w.r[0].cl, &s);
    assert_int_equal(s.late_switches, 0);
    free(recs);
    world_stop(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_plan_run), cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_jitter),           cmocka_unit_test(test_straggler_auto),
        cmocka_unit_test(test_server_killed),    cmocka_unit_test(test_power_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
