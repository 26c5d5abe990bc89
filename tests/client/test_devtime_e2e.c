/* End to end on the device-stream path: the real perseusd, 2 pipelines x 4 stages, each rank a
 * thread that drives its own fake GPU through the fake libcuda (streams, events, host functions)
 * and the fake NVML (clock locks, an energy counter refreshed every R ms, 5 % power noise), as a
 * PyTorch rank drives a real one.
 *
 * Each rank's thread enqueues its stage's 1F1B order on its stream and never waits for the GPU
 * except one iteration back (as a framework reading the previous loss would), so the host runs
 * ahead of the device by several computations. A forward waits on the device for the previous
 * stage's forward of that microbatch, a backward for the next stage's backward (cuStreamWaitEvent
 * on the sender's event, as a point-to-point receive does); every iteration ends with a
 * device-side all-reduce of all 8 GPUs. Computations take 24-72 ms at the highest clock.
 *
 * Checks, for every configuration (counter refresh 10, 50, 100 ms; no counter and power sampled
 * every 100 ms):
 *   - the measured profile (GET .../profile) is within 1 % in time and 3 % in energy of the GPU
 *     model's truth for every (stage, instruction, clock);
 *   - the plan made from it, evaluated on the true profile, is within 0.5 % in energy of the
 *     plan made from the true profile, at the fastest time;
 *   - the measured blocking power is within 5 % of the model's, and the job planned with it;
 *   - in the running phase >= 99 % of every tracked computation's device time ran at its
 *     planned clock (the fake measures it).
 * (These are the targets, asserted with PRS_DEVTIME_STRICT=1; the suite's bounds, which hold
 * beside other work, are below.)
 * One configuration runs the running phase with the clocks requested from the host at the
 * hooks (no stream) and prints that share beside it. In "gpud-unprivileged" the ranks may not
 * change clocks themselves (the fake NVML refuses them, as for a non-root user): every change
 * goes through a node perseus-gpud, and every GPU is back at its default clock at the end.
 * Every configuration ends with no clock failure on any rank, in the job's status too.
 *
 * The configurations run as child processes in parallel (the fakes read their settings from the
 * environment when loaded); the coarse counters' rounds last until their fits settle. Each runs
 * in compressed time (time_scale below: the durations named here, all scaled alike), so the
 * whole takes about 3 minutes instead of 4 to 5. PRS_DEVTIME_CONFIG=NAME runs one
 * configuration in this process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <math.h>
#include <pthread.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "gpud_harness.h"
#include "perseus/client.h"
#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "server_harness.h"
#include "wait.h"

#define STAGES 4
#define MB 4
#define DP 2
#define RANKS (STAGES * DP)
#define OPS (2 * MB)
#define N_CLOCKS 4
#define MAX_CLOCKS 8
#define TRAINER_TOL 0.03 /* real-trainer, strict: rows and blocking power */
/* A profile row's energy is a fit's power times a time: the client ends a round when every
 * kind's power has an estimated standard error at most its criterion (1 % from the energy
 * counter; src/client/resolve.c). A run holds 24-32 rows per configuration and seven
 * configurations, so a fixed 3 % on the worst row (3 standard errors) is exceeded in a fair share
 * of runs with nothing wrong (observed: 3.04 %). Judged instead, in units of that 1 %: the worst
 * row within 4.5, and the rows' root mean square within 1.6 (0.74-1.02 % measured; a systematic
 * 2 % error in splitting energy between kinds, which a worst-row bound of 3 % would pass, lifts
 * it past 2). Power sampling's fit aims at 0.6 % but never gets there: its rounds end at the
 * client's bound. Given the test's (twice a real run's training, below), its rows land as far
 * as the counter's on an idle machine (rms 0.80 %); at a real run's bound, in the parallel run
 * of the seven configurations, rms 3.70 %, worst 14.2 % (its samples are instants of a power
 * that changes with every kernel, and a read the host held up is dropped). Its unit is 2 %: a
 * broken power path is off by tens of percent. */
#define ENERGY_WORST_SE 4.5
#define ENERGY_RMS_SE 1.6
#define FIT_SE 0.01
/* Those bounds hold on an idle machine only: beside other work the host's delays move the
 * client's readings (on 2 cores at a load of 4-6: worst rows 7.0 % and 15.4 %, rms 1.9 % and
 * 4.7 %; at 12 and more, 15-42 %; beside 4 busy loops, power sampling's rms 8.3 %). So the
 * suite, which runs wherever it is run, judges the rows against what a defect does (a kind's
 * energy lost or given to another: tens of percent) and the plan made from them (PLAN_TOL); the
 * accuracy goal above is checked with PRS_DEVTIME_STRICT=1 on an idle machine (bench/README.md).
 * The blocking power likewise: within 5 % strict, 10 % in the suite (beside 4 busy loops the
 * 100 ms counter's came out +6.5 %; an optimizer counted as blocking is +130 %). */
#define ENERGY_WORST_LOADED 0.25
#define ENERGY_RMS_LOADED 0.12
#define BLOCKING_TOL 0.05
#define BLOCKING_TOL_LOADED 0.10
#define PLAN_TOL                                                                                   \
    0.0075 /* energy at the fastest time, plan from the measured vs the true profile               \
            */

static const int sweep4[N_CLOCKS] = {1410, 1290, 1170, 1050};
static const int sweep8[MAX_CLOCKS] = {1410, 1350, 1290, 1230, 1170, 1110, 1050, 990};

/* Compressed time: every duration of a configuration's run (the computations' work, the
 * counter's refresh period, the client's polls, the planner's unit time, the plan switch's lead)
 * is its time_scale times the figure named in this file, so the run lasts that share of the
 * time; what is asserted are ratios of durations that all shrink alike. Only the long runs are
 * compressed: the coarse counters, whose fits take the most iterations to settle. No counter
 * refreshes faster than every 25 ms, nor any client poll faster than every 0.5 ms: the host's
 * wake-ups weigh more against shorter durations (power sampling at a quarter: blocking power
 * 6 % high; the 10 ms counter at half, on a loaded machine: an energy row 3.9 % off).
 * The client's bound on a profiling round (PRS__CLIENT_ROUND_BOUND_S of device time) is
 * compressed alike only in the real-trainer configuration, whose profiling time is the figure it
 * reports; the suite's configurations keep 60 s of the host's clock, more training than a real
 * run's rounds get (twice, at half time), which every power-sampling round and the 100 ms
 * counter's use: at the compressed bound the test took 133 s instead of 252 s, but beside 4 busy
 * loops it failed (the 100 ms counter's worst row 31.9 %, power sampling's rms 8.45 %) where the
 * longer bound passed. */
static double time_scale = 1; /* of the configuration this process runs */
#define TIME_SCALE time_scale

typedef struct config {
    const char *name;
    int refresh_ms; /* energy counter refresh; 0 with no_energy */
    int no_energy;  /* pre-Volta: power sampling */
    int stream;     /* 0: clocks from the host at the hooks (today's way), share only */
    int gpud;       /* unprivileged ranks: clocks only through a node perseus-gpud */
    int deny_below; /* the GPUs refuse locks below this clock (0: none) */
    double time_scale;
    /* A real trainer's shape, run only when named (PRS_DEVTIME_CONFIG): forwards of 5 ms at half
     * the power of 10 ms backwards (the stages' shares as below), after each iteration's
     * all-reduce an optimizer kernel of 20 ms outside the hooks (the client's other_after_last),
     * 8 clocks, per-kernel power noise of 2 % (the H100 check: a kind's power is constant to
     * 1-2 %; PRS_DEVTIME_NOISE overrides). The accuracy the issue of real trainers asks for,
     * judged with PRS_DEVTIME_STRICT=1: every row and the blocking power within 3 %; the time
     * profiling took (the goal: 5 minutes of training) is printed, not asserted. */
    int trainer;
} config;

static const config configs[] = {
    {"refresh-10ms", 10, 0, 1, 0, 0, 1, 0},
    {"refresh-50ms", 50, 0, 1, 0, 0, 0.5, 0},
    {"refresh-100ms", 100, 0, 1, 0, 0, 0.25, 0},
    {"power-sampling-100ms", 100, 1, 1, 0, 0, 0.5, 0},
    {"host-side-clocks", 10, 0, 0, 0, 0, 1, 0},
    {"gpud-unprivileged", 10, 0, 1, 1, 0, 1, 0},
    {"gpud-refuses-low-clocks", 10, 0, 1, 1, 1100, 1, 0},
    {"real-trainer", 100, 0, 1, 0, 0, 0.5, 1},
};

static const config *cur_cfg; /* the configuration this process runs */

/* PRS_DEVTIME_STRICT=1: the accuracy goals, on an idle machine. */
static int strict_run(void)
{
    const char *v = getenv("PRS_DEVTIME_STRICT");
    return v && strcmp(v, "1") == 0;
}

static int n_clocks(void)
{
    return cur_cfg->trainer ? MAX_CLOCKS : N_CLOCKS;
}

static int sweep_at(int i)
{
    return cur_cfg->trainer ? sweep8[i] : sweep4[i];
}

/* Work of one computation of stage s (forward 24 ms, backward 48 ms at f_max; the last stage
 * 7 % slower, the second 1.5x: an unbalanced pipeline, so plans differ per stage). */
static prs_gpu_work work_of(int s, prs_instr in)
{
    static const double scale[STAGES] = {1.0, 1.5, 1.0, 1.07};
    prs_gpu_work w = {in == PRS_FORWARD ? 0.024 : 0.048, in == PRS_FORWARD ? 0.8 : 0.85};
    if (cur_cfg->trainer) w.t_ref_s = in == PRS_FORWARD ? 0.005 : 0.010;
    w.t_ref_s *= scale[s] * TIME_SCALE;
    return w;
}

typedef struct world world;

typedef struct rank {
    world *w;
    int index, dp, pp;
    prs_client *cl;
    CUcontext ctx;
    CUstream stream;
    /* [iteration parity][instr * MB + mb]: this stage finished it (the neighbour waits on it),
     * and the iteration whose record is enqueued (-1: none) */
    CUevent done[2][2 * MB];
    long enq[2][2 * MB];
    long it; /* iterations enqueued */
    CUevent iter_end[2];
    int failed;
    char err[256];
    long order_errors, clock_failures, late_switches;
} rank;

struct world {
    const config *cfg;
    fakecu_api cu;
    CUresult (*wait_event)(CUstream, CUevent, unsigned);
    daemon_proc d;
    gpud_harness g; /* cfg->gpud */
    char url[64], job_id[64], token[128];
    rank r[RANKS];
    prs_pipeline pipe;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    volatile int stop;
    long stop_at; /* every rank stops after this iteration */
    long planned_ops, mismatched_plans;
};

static void rank_fail(rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rank_fail(rank *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->failed = 1;
}

/* Wait (host side, bounded) until rank `from` enqueued its record of done[par][in][mb] for
 * iteration it, then make r's stream wait for it on the device. */
static int wait_for(rank *r, rank *from, prs_instr in, int mb, long it)
{
    world *w = r->w;
    int par = (int)(it & 1);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&w->mu);
    while (from->enq[par][in * MB + mb] != it && !from->failed && !w->stop)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until)) break;
    int ok = from->enq[par][in * MB + mb] == it;
    pthread_mutex_unlock(&w->mu);
    if (!ok) return rank_fail(r, "rank %d never sent iteration %ld", from->index, it), -1;
    if (w->wait_event(r->stream, from->done[par][in * MB + mb], 0) != CUDA_SUCCESS)
        return rank_fail(r, "cuStreamWaitEvent failed"), -1;
    return 0;
}

static rank *peer(rank *r, int pp)
{
    return &r->w->r[r->dp * STAGES + pp];
}

/* A computation's power as a share of the GPU model's at its clock. */
static double power_share(prs_instr in)
{
    return cur_cfg->trainer && in == PRS_FORWARD ? 0.5 : 1.0;
}

/* Enqueue one iteration of r's stage. */
static int run_iteration(rank *r, long it)
{
    world *w = r->w;
    int par = (int)(it & 1);
    for (int k = 0; k < OPS; k++) {
        prs_instr in;
        int mb;
        prs_op_describe(&w->pipe, r->pp, k, &in, &mb);
        if (in == PRS_FORWARD && r->pp > 0 && wait_for(r, peer(r, r->pp - 1), in, mb, it))
            return -1;
        if (in == PRS_BACKWARD && r->pp < STAGES - 1 && wait_for(r, peer(r, r->pp + 1), in, mb, it))
            return -1;
        int rc = prs_client_begin(r->cl, in, mb, 0);
        if (rc) return rank_fail(r, "begin: %s", prs_strerror(rc)), -1;
        prs_client_stats st;
        prs_client_get_stats(r->cl, &st);
        prs_gpu_work wk = work_of(r->pp, in);
        if (w->cu.launch_work_power(r->stream, wk.t_ref_s, wk.alpha,
                                    strcmp(st.phase, "running") == 0 ? st.clock_mhz : 0,
                                    power_share(in)))
            return rank_fail(r, "launch failed"), -1;
        rc = prs_client_end(r->cl, in, mb, 0);
        if (rc) return rank_fail(r, "end: %s", prs_strerror(rc)), -1;
        w->cu.cuEventRecord(r->done[par][in * MB + mb], r->stream);
        pthread_mutex_lock(&w->mu);
        r->enq[par][in * MB + mb] = it;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    w->cu.launch_barrier(r->stream, "allreduce", RANKS);
    if (w->cfg->trainer && w->cu.launch_work(r->stream, 0.020 * TIME_SCALE, 0.8, 0))
        return rank_fail(r, "optimizer launch failed"), -1; /* outside the hooks */
    w->cu.cuEventRecord(r->iter_end[par], r->stream);
    int rc = prs_client_iteration_end(r->cl);
    if (rc) return rank_fail(r, "iteration_end: %s", prs_strerror(rc)), -1;
    /* A framework reads the previous iteration's loss: the host stays within one iteration. */
    if (it > 0) w->cu.cuEventSynchronize(r->iter_end[par ^ 1]);
    return 0;
}

static void *rank_main(void *arg)
{
    rank *r = arg;
    world *w = r->w;
    if (w->cu.cuCtxSetCurrent(r->ctx) || w->cu.cuStreamCreate(&r->stream, 0)) {
        rank_fail(r, "no context or stream");
        return NULL;
    }
    for (int p = 0; p < 2; p++) {
        w->cu.cuEventCreate(&r->iter_end[p], 0);
        for (int k = 0; k < 2 * MB; k++)
            w->cu.cuEventCreate(&r->done[p][k], FAKECU_EVENT_DISABLE_TIMING);
    }
    prs_client_opts o;
    prs_client_opts_init(&o);
    char spec[32];
    snprintf(spec, sizeof spec, "nvml:%d", r->index);
    o.server_url = w->url;
    o.job_id = w->job_id;
    o.token = w->token;
    o.rank = r->index;
    o.dp = r->dp;
    o.pp = r->pp;
    o.gpu_spec = w->cfg->stream ? NULL : spec; /* NULL: the stream's own GPU, by UUID */
    /* A private perseus-gpud for rank 0, inline for the others; with gpud, the default: the
     * node's daemon, whose socket exists. */
    o.controller = w->cfg->gpud ? -1 : r->index == 0 ? PRS_CLOCKCTL_PROCESS : PRS_CLOCKCTL_INLINE;
    o.poll_interval_s = 0.05 * TIME_SCALE;
    o.energy_poll_s = 0.002 * TIME_SCALE;
    o.power_poll_s = 0.1 * TIME_SCALE;
    o.warmup_iterations = 0;
    o.use_stream = w->cfg->stream;
    o.stream = (uintptr_t)r->stream;
    o.cuda_library = getenv("PRS_FAKE_CUDA");
    o.other_after_last = w->cfg->trainer;
    prs_error e;
    if (prs_client_new(&o, &r->cl, &e)) {
        rank_fail(r, "prs_client_new: %s", e.msg);
        return NULL;
    }
    if (r->cl->dev && w->cfg->trainer) /* see time_scale above */
        r->cl->dev->round_bound_s = PRS__CLIENT_ROUND_BOUND_S * TIME_SCALE;
    for (long it = 0;; it++) {
        pthread_mutex_lock(&w->mu);
        int stop = it > w->stop_at;
        r->it = it;
        pthread_mutex_unlock(&w->mu);
        if (stop || run_iteration(r, it)) break;
    }
    prs_client_stats st;
    prs_client_get_stats(r->cl, &st);
    r->order_errors = st.order_errors;
    r->clock_failures = st.clock_failures;
    r->late_switches = st.late_switches;
    prs_client_free(r->cl);
    w->cu.cuStreamSynchronize(r->stream);
    return NULL;
}

/* The GPU model's own profile over the (stage, instruction, clock) rows of `like`. */
static prs_profile *truth_like(const prs_profile *like)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    prs_profile *t = prs_profile_new();
    const prs_profile_row *rows = prs_profile_rows(like);
    for (size_t i = 0; i < prs_profile_nrows(like); i++) {
        prs_profile_row row = rows[i];
        prs_gpu_work wk = work_of(row.stage, row.instr);
        row.time_s = prs_gpu_time_s(g, &wk, row.freq_mhz);
        row.energy_j = prs_gpu_energy_j(g, &wk, row.freq_mhz) * power_share(row.instr);
        row.line = 0;
        assert_int_equal(prs_profile_add(t, &row, NULL), 0);
    }
    return t;
}

/* Energy (on the true profile) of the least-energy plan at the fastest time planned on p. */
static void plan_on(const prs_profile *p, double blocking_w, const prs_profile *truth,
                    double *time_s, double *energy_j)
{
    prs_plan_opts po;
    prs_plan_opts_default(&po);
    po.pipe = (prs_pipeline){STAGES, MB, PRS_SCHEDULE_1F1B, 0.001 * TIME_SCALE, blocking_w, 0, 0};
    prs_frontier *f = NULL;
    prs_error e;
    int rc = prs_plan(p, &po, &f, &e);
    if (rc) fail_msg("plan: %s", e.msg);
    size_t k;
    assert_int_equal(prs_frontier_lookup(f, 0, &k), 0);
    int clocks[STAGES * OPS];
    assert_int_equal(prs_frontier_plan(f, k, clocks, NULL), 0);
    prs_pipeline truth_pipe = po.pipe;
    truth_pipe.blocking_power_w = prs_gpu_preset_find("a100")->blocking_power_w;
    assert_int_equal(prs_evaluate_plan(truth, &truth_pipe, clocks, time_s, energy_j, NULL), 0);
    prs_frontier_free(f);
}

/* Compare the measured profile with the model's truth; returns the worst errors. */
static void check_profile(world *w, const prs_profile *meas, double blocking_w)
{
    prs_profile *truth = truth_like(meas);
    const prs_profile_row *m = prs_profile_rows(meas), *t = prs_profile_rows(truth);
    double worst_t = 0, worst_e = 0, sum_e2 = 0;
    size_t n = prs_profile_nrows(meas);
    for (size_t i = 0; i < n; i++) {
        double dt = fabs(m[i].time_s / t[i].time_s - 1),
               de = fabs(m[i].energy_j / t[i].energy_j - 1);
        if (dt > 0.01 || de > 0.03)
            printf("  %s: stage %d %s %d MHz: time %+.2f %%, energy %+.2f %%\n", w->cfg->name,
                   m[i].stage, prs_instr_name(m[i].instr), m[i].freq_mhz,
                   100 * (m[i].time_s / t[i].time_s - 1),
                   100 * (m[i].energy_j / t[i].energy_j - 1));
        worst_t = fmax(worst_t, dt);
        worst_e = fmax(worst_e, de);
        sum_e2 += de * de;
    }
    double rms_e = n > 0 ? sqrt(sum_e2 / (double)n) : 0;
    double tt, te, mt, me;
    plan_on(truth, prs_gpu_preset_find("a100")->blocking_power_w, truth, &tt, &te);
    plan_on(meas, blocking_w, truth, &mt, &me);
    printf("%s: %zu profile rows, worst time error %.3f %%, worst energy error %.3f %% "
           "(rms %.3f %%); "
           "plan from the measured profile %.4f s %.2f J vs from the truth %.4f s %.2f J "
           "(%+.3f %% energy)\n",
           w->cfg->name, n, 100 * worst_t, 100 * worst_e, 100 * rms_e, mt, me, tt, te,
           100 * (me / te - 1));
    /* Targets: 1 % in time, energy as above, 0.5 % for the plan. Measured (docs/measurement.md):
     * 0.000 %, 0.8-2.9 % and -0.36 to +0.49 % over the configurations; the plans made from a
     * measured profile land on a few discrete alternatives (+0.000, +0.247, +0.494 %), so the plan
     * bound keeps a margin over the target for the next one. */
    assert_true(worst_t <= 0.01);
    double unit = w->cfg->no_energy ? 2 * FIT_SE : FIT_SE;
    int strict = strict_run();
    if (strict && w->cfg->trainer) assert_true(worst_e <= TRAINER_TOL);
    assert_true(worst_e <= (strict ? ENERGY_WORST_SE * unit : ENERGY_WORST_LOADED));
    assert_true(rms_e <= (strict ? ENERGY_RMS_SE * unit : ENERGY_RMS_LOADED));
    /* Beside other work the plan's bound widens with the rows' own error: a plan sums the rows
     * of one clock per computation, so their errors reach it in part (measured: 0.16-0.47 of
     * the rms; power sampling at a 100 ms refresh in a clean CI run: rms 6.2 %, plan +1.26 %). */
    double plan_tol = strict ? PLAN_TOL : fmax(PLAN_TOL, 0.5 * rms_e);
    assert_true(me <= (1 + plan_tol) * te);
    assert_true(mt <= tt * (1 + plan_tol));
    prs_profile_free(truth);
}

/* No stored window carries a clock the GPUs refused. */
static void check_clocks(world *w, const prs_profile *meas)
{
    const prs_profile_row *m = prs_profile_rows(meas);
    int lowest = 1 << 30;
    for (size_t i = 0; i < prs_profile_nrows(meas); i++)
        if (m[i].freq_mhz < lowest) lowest = m[i].freq_mhz;
    printf("%s: lowest profiled clock %d MHz (GPUs refuse below %d)\n", w->cfg->name, lowest,
           w->cfg->deny_below);
    assert_true(lowest >= w->cfg->deny_below);
}

static json_t *job_status(world *w)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", w->job_id);
    http_reply r = http_do(w->d.port, "GET", path, w->token, NULL, 0, NULL);
    json_t *j = r.status == 200 ? json_incref(r.json) : NULL;
    http_reply_free(&r);
    return j;
}

static void create_job(world *w)
{
    json_t *clocks = json_array();
    for (int i = 0; i < n_clocks(); i++)
        json_array_append_new(clocks, json_integer(sweep_at(i)));
    json_t *spec = json_pack("{s:s, s:i, s:i, s:i, s:o, s:b, s:f, s:f, s:{s:i, s:i}}", "model",
                             w->cfg->name, "stages", STAGES, "microbatches", MB, "dp", DP,
                             "clocks_mhz", clocks, "reuse_frontier", 0, "switch_lead_s",
                             0.5 * TIME_SCALE, "unit_time_s", 0.001 * TIME_SCALE, "profiling",
                             "warmup_iterations", 1, "iterations_per_clock", 3);
    if (!w->cfg->stream ||
        getenv("PRS_DEVTIME_PIN_BP")) /* no measurement: the true profile is uploaded below */
        json_object_set_new(spec, "blocking_power_w",
                            json_real(prs_gpu_preset_find("a100")->blocking_power_w));
    http_reply r = http_json(w->d.port, "POST", "/v1/jobs", NULL, spec);
    assert_int_equal(r.status, 201);
    snprintf(w->job_id, sizeof w->job_id, "%s", json_str(r.json, "job_id"));
    snprintf(w->token, sizeof w->token, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    if (w->cfg->stream) return;
    prs_profile *shape = prs_profile_new();
    for (int s = 0; s < STAGES; s++)
        for (int c = 0; c < n_clocks(); c++)
            for (int in = 0; in < 2; in++) {
                prs_profile_row row = {s, (prs_instr)in, sweep_at(c), 1, 1, 0};
                assert_int_equal(prs_profile_add(shape, &row, NULL), 0);
            }
    prs_profile *truth = truth_like(shape);
    char *csv = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&csv, &len);
    assert_int_equal(prs_profile_write_csv(truth, f), 0);
    fclose(f);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", w->job_id);
    r = http_do(w->d.port, "POST", path, w->token, csv, len, "Content-Type: text/csv\r\n");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    free(csv);
    prs_profile_free(truth);
    prs_profile_free(shape);
}

/* Wait until the job is running (or 120 s pass); returns its status (new reference). */
static json_t *wait_running(world *w, double limit_s)
{
    double t0 = harness_now();
    while (harness_now() - t0 < limit_s) {
        json_t *j = job_status(w);
        if (getenv("PRS_DEVTIME_VERBOSE")) {
            char *text = j ? json_dumps(json_object_get(j, "profiling"), JSON_COMPACT) : NULL;
            prs_client_stats cs;
            memset(&cs, 0, sizeof cs);
            if (w->r[0].cl) prs_client_get_stats(w->r[0].cl, &cs);
            printf("%.1f s: %s %s; rank 0: %s round %ld it %ld posted %ld dropped %ld clockf %ld "
                   "measf %ld order %ld\n",
                   harness_now() - t0, json_str(j, "phase"), text ? text : "", cs.phase, cs.round,
                   cs.iterations, cs.posted, cs.dropped, cs.clock_failures, cs.measure_failures,
                   cs.order_errors);
            printf("  blocking power (W) by rank, the last estimate:");
            for (int i = 0; i < RANKS; i++) {
                memset(&cs, 0, sizeof cs);
                if (w->r[i].cl) prs_client_get_stats(w->r[i].cl, &cs);
                printf(" %.1f", cs.blocking_power_w);
            }
            printf("\n");
            free(text);
        }
        if (j && strcmp(json_str(j, "phase"), "running") == 0) return j;
        if (j && strcmp(json_str(j, "phase"), "failed") == 0) {
            fail_msg("%s: job failed: %s", w->cfg->name, json_str(j, "reason"));
        }
        json_decref(j);
        for (int i = 0; i < RANKS; i++)
            if (w->r[i].failed) fail_msg("%s: rank %d: %s", w->cfg->name, i, w->r[i].err);
        harness_sleep_ms(getenv("PRS_DEVTIME_VERBOSE") ? 2000 : 200); /* poll interval */
    }
    fail_msg("%s: the job did not reach running in %.0f s", w->cfg->name, limit_s);
    return NULL;
}

/* Every rank runs a plan, the same one, and has ended two iterations since it switched to it (or
 * a rank failed). */
static int all_switched(world *w, long since[RANKS])
{
    long plan = -2;
    int ok = 1;
    for (int i = 0; i < RANKS; i++) {
        prs_client_stats cs;
        prs_client_get_stats(w->r[i].cl, &cs);
        if (w->r[i].failed) return 1;
        if (strcmp(cs.phase, "running") != 0 || cs.plan_id < 0 ||
            (plan != -2 && cs.plan_id != plan)) {
            since[i] = -1;
            ok = 0;
            continue;
        }
        plan = cs.plan_id;
        if (since[i] < 0) since[i] = cs.iterations;
        ok = ok && cs.iterations >= since[i] + 2;
    }
    return ok;
}

/* Device time of the tracked computations since the last reset (seconds, all GPUs). */
static double device_busy_s(world *w)
{
    double busy, at;
    w->cu.clock_share(&busy, &at);
    return busy;
}

static void stop_ranks(world *w, pthread_t *th)
{
    pthread_mutex_lock(&w->mu);
    long top = 0;
    for (int i = 0; i < RANKS; i++)
        if (w->r[i].it > top) top = w->r[i].it;
    w->stop_at = top + 2;
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < RANKS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < RANKS; i++)
        if (w->r[i].failed) fail_msg("%s: rank %d: %s", w->cfg->name, i, w->r[i].err);
}

static void set_env(const config *cfg, const char *dir)
{
    char v[32];
    setenv("PRS_FAKE_GPU_DIR", dir, 1);
    setenv("PRS_FAKE_GPU_COUNT", "8", 1);
    snprintf(v, sizeof v, "%g", cfg->refresh_ms * TIME_SCALE);
    setenv("PRS_FAKE_NVML_REFRESH_MS", v, 1);
    const char *noise = getenv("PRS_DEVTIME_NOISE");
    setenv("PRS_FAKE_NVML_NOISE", noise ? noise : cfg->trainer ? "0.02" : "0.05", 1);
    if (cfg->no_energy) setenv("PRS_FAKE_NVML_NO_ENERGY", "1", 1);
    setenv("PRS_NVML_LIBRARY", getenv("PRS_FAKE_NVML"), 1);
    if (cfg->deny_below) {
        snprintf(v, sizeof v, "%d", cfg->deny_below);
        setenv("PRS_FAKE_NVML_DENY_BELOW", v, 1);
    }
}

static void gpud_open(world *w);

static void world_open(world *w, const config *cfg)
{
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->stop_at = 1L << 40;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->pipe = (prs_pipeline){STAGES, MB, PRS_SCHEDULE_1F1B, 0.001 * TIME_SCALE, 0, 0, 0};
    harness_tmpdir(w->d.dir, sizeof w->d.dir, "devtime");
    assert_true(w->d.dir[0]);
    set_env(cfg, w->d.dir);
    if (fakecu_load(&w->cu, getenv("PRS_FAKE_CUDA"))) fail_msg("fake libcuda: %s", dlerror());
    void *p = dlsym(w->cu.lib, "cuStreamWaitEvent");
    assert_non_null(p);
    memcpy(&w->wait_event, &p, sizeof p);
    assert_int_equal(w->cu.cuInit(0), CUDA_SUCCESS);
    for (int i = 0; i < RANKS; i++) {
        rank *r = &w->r[i];
        r->w = w;
        r->index = i;
        r->dp = i / STAGES;
        r->pp = i % STAGES;
        for (int par = 0; par < 2; par++) /* before any thread looks at them */
            for (int k = 0; k < 2 * MB; k++)
                r->enq[par][k] = -1;
        CUdevice dev;
        assert_int_equal(w->cu.cuDeviceGet(&dev, i), CUDA_SUCCESS);
        assert_int_equal(w->cu.cuDevicePrimaryCtxRetain(&r->ctx, dev), CUDA_SUCCESS);
    }
    assert_int_equal(daemon_start(&w->d), 0);
    snprintf(w->url, sizeof w->url, "http://127.0.0.1:%d", w->d.port);
    if (cfg->gpud) gpud_open(w);
}

/* A node perseus-gpud that may change clocks, then this process (the ranks) may not. */
static void gpud_open(world *w)
{
    char conf[64];
    snprintf(conf, sizeof conf, "allow uid %d all\n", (int)getuid());
    assert_int_equal(gpud_harness_init(&w->g, conf), 0);
    assert_int_equal(gpud_harness_start(&w->g, getenv("PRS_FAKE_NVML")), 0);
    setenv("PRS_FAKE_NVML_DENY", "1", 1);
    setenv("PRS_GPUD_SOCKET", w->g.sock, 1);
}

/* Every GPU is back at its default clock once the ranks are gone. */
static void gpud_close(world *w)
{
    for (int i = 0; i < RANKS; i++) {
        prs_gpu *g;
        prs_error e;
        int mhz = 0;
        assert_int_equal(prs_gpu_open_nvml((unsigned)i, NULL, &g, &e), 0);
        assert_int_equal(prs_gpu_sm_clock_now(g, &mhz), 0);
        assert_int_equal(mhz, 1410);
        prs_gpu_close(g);
    }
    gpud_harness_fini(&w->g);
    unsetenv("PRS_FAKE_NVML_DENY");
    unsetenv("PRS_GPUD_SOCKET");
}

/* The blocking power the job measured and the one it planned with. */
static double check_blocking(world *w, json_t *status)
{
    json_t *b = json_object_get(status, "blocking_power");
    double measured = json_num(b, "measured_w"), used = json_num(b, "used_w");
    double truth = prs_gpu_preset_find("a100")->blocking_power_w;
    printf("%s: blocking power measured %.2f W (model %.2f W, %+.2f %%), planned with %.2f W\n",
           w->cfg->name, measured, truth, 100 * (measured / truth - 1), used);
    assert_true(fabs(measured / truth - 1) <= (!strict_run()     ? BLOCKING_TOL_LOADED
                                               : w->cfg->trainer ? TRAINER_TOL
                                                                 : BLOCKING_TOL));
    assert_true(used == measured);
    return measured;
}

static prs_profile *fetch_profile(world *w)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", w->job_id);
    http_reply r = http_do(w->d.port, "GET", path, w->token, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    prs_profile *p = NULL;
    prs_error e;
    if (prs_profile_parse("measured", r.body, r.len, &p, &e)) fail_msg("profile: %s", e.msg);
    http_reply_free(&r);
    return p;
}

static void run_config(const config *cfg)
{
    time_scale = cfg->time_scale;
    cur_cfg = cfg;
    const char *scale = getenv("PRS_DEVTIME_SCALE"); /* by hand: another compression */
    if (scale && atof(scale) > 0) time_scale = atof(scale);
    world w;
    world_open(&w, cfg);
    create_job(&w);
    pthread_t th[RANKS];
    for (int i = 0; i < RANKS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, rank_main, &w.r[i]), 0);
    double t_start = harness_now();
    json_t *st = wait_running(&w, cfg->trainer ? 1800 : 480);
    /* a figure to read, never judged here: the goal (5 minutes for 8 clocks) is a duration */
    printf("%s: profiling and planning %d clocks took %.1f s of training time\n", cfg->name,
           n_clocks(), (harness_now() - t_start) / time_scale);
    /* Once every rank has switched to the plan, measure the clocks the computations ran at over
     * 8 s of device time (all GPUs together). */
    long since[RANKS];
    for (int i = 0; i < RANKS; i++)
        since[i] = -1;
    PRS_WAIT_UNTIL(all_switched(&w, since), 120);
    w.cu.reset_stats();
    PRS_WAIT_UNTIL(device_busy_s(&w) >= 8 || w.r[0].failed, 120);
    double busy, at_plan;
    w.cu.clock_share(&busy, &at_plan);
    stop_ranks(&w, th);
    long order = 0, late = 0, clockf = 0;
    for (int i = 0; i < RANKS; i++) {
        order += w.r[i].order_errors;
        late += w.r[i].late_switches;
        clockf += w.r[i].clock_failures;
    }
    printf("%s: running phase: %.1f %% of %.2f s of device time at the planned clock; "
           "order errors %ld, late plan switches %ld, clock failures %ld\n",
           cfg->name, 100 * at_plan / busy, busy, order, late, clockf);
    assert_true(busy > 1);
    assert_int_equal(order, 0);
    if (!cfg->deny_below) assert_int_equal(clockf, 0);
    if (cfg->deny_below) assert_true(clockf >= RANKS); /* each refused at least once */
    if (cfg->stream) {
        /* A switch that is late by design runs half the time at the wrong clock (the
         * host-side configuration: 54 %); on time, 99.4-100 % on an idle machine, 95.1-98.6 %
         * beside other work (a host function that changes the clock runs late; 95.1 % beside 4
         * busy loops): the bound lies between. */
        assert_true(at_plan >= 0.9 * busy);
        double blocking = getenv("PRS_DEVTIME_PIN_BP") ? 83.64 : check_blocking(&w, st);
        prs_profile *meas = fetch_profile(&w);
        check_profile(&w, meas, blocking);
        check_clocks(&w, meas);
        prs_profile_free(meas);
    }
    json_t *ranks = json_object_get(st, "ranks");
    json_int_t failures = json_integer_value(json_object_get(ranks, "clock_failures"));
    if (cfg->deny_below)
        assert_true(failures > 0);
    else
        assert_int_equal(failures, 0);
    json_decref(st);
    if (cfg->gpud) gpud_close(&w);
    assert_int_equal(daemon_stop(&w.d, SIGTERM), 0);
    harness_rmdir(w.d.dir);
}

static void test_one(void **state)
{
    run_config(*state);
}

static void test_configs(void **state)
{
    (void)state;
    if (!getenv("PRS_FAKE_CUDA") || !getenv("PRS_FAKE_NVML"))
        prs_skip_input("no fake driver libraries (PRS_FAKE_CUDA, PRS_FAKE_NVML)");
    enum { N = sizeof configs / sizeof configs[0] };
    const char *only = getenv("PRS_DEVTIME_CONFIG"); /* one configuration, in this process */
    for (int i = 0; only && i < N; i++)
        if (strcmp(only, configs[i].name) == 0) return run_config(&configs[i]);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* Real-time fakes: the sanitizers' slowdown would measure the machine, not the client (the
     * client's code runs under them in test_stream, the hook benchmark's test and, by hand, with
     * PRS_DEVTIME_CONFIG=refresh-10ms). */
    prs_skip_case("real-time fakes do not run under the sanitizers");
#endif
    /* PRS_DEVTIME_GROUP: "power-sampling" runs the configurations without an energy counter,
     * "energy-counter" the others (CTest runs them as two tests), unset or "all" every one. */
    const char *group = getenv("PRS_DEVTIME_GROUP");
    int want_power = group && strcmp(group, "power-sampling") == 0;
    int want_counter = group && strcmp(group, "energy-counter") == 0;
    if (group && strcmp(group, "all") != 0 && !want_power && !want_counter)
        fail_msg("PRS_DEVTIME_GROUP '%s': expected power-sampling, energy-counter or all", group);
    pid_t pid[N];
    int started = 0;
    for (int i = 0; i < N; i++) {
        pid[i] = 0;
        if ((want_power && !configs[i].no_energy) || (want_counter && configs[i].no_energy) ||
            configs[i].trainer) /* by name only: minutes of training at 8 clocks */
            continue;
        started++;
        fflush(stdout);
        pid[i] = fork();
        if (pid[i] > 0) setpgid(pid[i], pid[i]);
        if (pid[i] == 0) {
            /* A process group of its own: what a failing configuration leaves running (its
             * perseusd, its perseus-gpud) is ended with it, so nothing holds the test's output
             * open after the test. */
            setpgid(0, 0);
            /* Line by line, and flushed before _exit (which flushes nothing): a failing or
             * crashing configuration's lines reach the log. */
            setvbuf(stdout, NULL, _IOLBF, 0);
            const struct CMUnitTest one[] = {
                cmocka_unit_test_prestate(test_one, (void *)&configs[i])};
            int rc = cmocka_run_group_tests_name(configs[i].name, one, NULL, NULL);
            fflush(stdout);
            fflush(stderr);
            _exit(rc ? 1 : 0);
        }
    }
    int failures = 0;
    double t0 = harness_now();
    assert_true(started > 0);
    for (int left = started; left > 0; left--) { /* in the order they end, with their times */
        int st = 0;
        pid_t done = wait(&st);
        int i = 0;
        while (i < N && pid[i] != done)
            i++;
        assert_true(i < N);
        kill(-done, SIGKILL); /* whatever it left running */
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("configuration %s: %s after %.1f s", configs[i].name, ok ? "passed" : "FAILED",
               harness_now() - t0);
        if (WIFSIGNALED(st)) printf(" (killed by signal %d)", WTERMSIG(st));
        printf("\n");
        fflush(stdout);
        failures += !ok;
    }
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_configs)};
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
