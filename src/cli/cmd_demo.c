/* perseus demo: the whole loop of docs/design.md ('The loop') on one machine, in a few seconds.
 *
 * It starts perseusd in-process (prs_server_start) on a temporary directory with its SQLite
 * database, creates a job, and runs every rank of D data-parallel pipelines of S stages as a
 * prs_client on its own `sim` GPU (perseus/gpu.h). The ranks run in this thread in simulated
 * time: a list scheduler runs each stage's computations in its 1F1B order when their inputs are
 * ready, the GPU idles at blocking power while it waits, and at the end of each iteration every
 * GPU waits for the slowest (the data-parallel all-reduce). The clients profile (the server's
 * clock sweep), the server plans, the clients run the plan; then the last pipeline is made a
 * straggler (its computations slowed down by a factor, and reported to the server) for a few
 * slowdowns, and finally it recovers; then a power cap of 90 % of the job's power is set and
 * lifted (docs/server.md, 'Power caps').
 *
 * Baselines are the same simulation without clients, every GPU at its highest clock (all-max).
 * Reported: all-max versus Perseus iteration time and energy (all GPUs), the intrinsic saving, the
 * slowdown, and the saving with a straggler; --json prints them as one object. Plots (SVG) go to
 * --out: the frontier the server planned with the measured points, and the savings versus the
 * straggler's slowdown. Parse (parse_args), run (run: perseusd, the clients, run_demo), print
 * (print_table, or print_json with jansson). */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "perseus/clock.h"
#include "perseus/client.h"
#include "perseus/planner.h"
#include "perseus/plot.h"
#include "perseus/server.h"
#include "cli.h"
#include "demo_infer.h"

#define CMD "perseus demo"
#define MAX_STAGES 16
#define MAX_MB 32
#define MAX_DP 8
#define MAX_SLOWDOWNS 8

static void usage(FILE *f)
{
    fputs("usage: perseus demo [options]\n"
          "\n"
          "Start perseusd in-process (temporary directory, SQLite), run a simulated\n"
          "pipeline-parallel job of client ranks on the sim GPU backend through profiling,\n"
          "planning and running, then with a straggler, then under a power cap (90 % of its\n"
          "power, set and lifted); print all-max versus Perseus time and energy and the\n"
          "savings, and write the plots.\n"
          "\n"
          "  --stages S         pipeline stages (2..16, default 4)\n"
          "  --microbatches M   microbatches per iteration (1..32, default 8)\n"
          "  --dp D             data-parallel pipelines (2..8, default 2)\n"
          "  --gpu NAME         GPU preset of the sim backend (default a100)\n"
          "  --straggler X      straggler slowdown T'/T to report (1 < X <= 3, default 1.2)\n"
          "  --out DIR          where the plots go (default perseus-demo; created)\n"
          "  --no-plots         do not write plots\n"
          "  --json             print the results as one JSON object\n"
          "  --inference        the inference demo instead (perseus demo --inference --help)\n"
          "  -h, --help         show this help\n"
          "\n"
          "examples:\n"
          "  perseus demo\n"
          "  perseus demo --stages 8 --dp 4 --straggler 1.1 --out demo-plots\n"
          "  perseus demo --json --no-plots\n",
          f);
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(CMD ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the simulated job ------------------------------------------------------------------ */

typedef struct demo {
    int stages, mb, dp;
    const prs_gpu_preset *preset;
    prs_pipeline pipe;
    prs_gpu *gpu[MAX_DP * MAX_STAGES];
    prs_client *cl[MAX_DP * MAX_STAGES]; /* NULL: a baseline run, default clocks */
    double slow[MAX_DP];                 /* computation time multiplier per pipeline */
} demo;

static prs_gpu_work work_of(const demo *d, int dp, int pp, prs_instr in)
{
    prs_gpu_work w = d->preset->work[in];
    if (pp == d->stages - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
    w.t_ref_s *= d->slow[dp];
    return w;
}

/* One iteration of every pipeline and the all-reduce barrier. Returns the iteration time;
 * *energy gets the energy of all GPUs. -1 on a failure. */
static double run_iteration(demo *d, double *energy)
{
    int ops = prs_ops_per_stage(&d->pipe), n = d->dp * d->stages;
    double e0 = 0, t0 = prs_gpu_now_s(d->gpu[0]);
    for (int i = 0; i < n; i++)
        e0 += prs_gpu_read_energy_j(d->gpu[i]);
    for (int p = 0; p < d->dp; p++) {
        double fin[2][MAX_STAGES][MAX_MB];
        int next[MAX_STAGES] = {0};
        for (int s = 0; s < d->stages; s++)
            for (int m = 0; m < d->mb; m++)
                fin[0][s][m] = fin[1][s][m] = -1;
        for (int done = 0; done < d->stages * ops;) {
            int progress = 0;
            for (int s = 0; s < d->stages; s++) {
                if (next[s] == ops) continue;
                prs_instr in;
                int mb;
                prs_op_describe(&d->pipe, s, next[s], &in, &mb);
                double dep = 0;
                if (in == PRS_FORWARD && s > 0) dep = fin[0][s - 1][mb];
                if (in == PRS_BACKWARD && s < d->stages - 1) dep = fin[1][s + 1][mb];
                if (dep < 0) continue;
                int r = p * d->stages + s;
                double now = prs_gpu_now_s(d->gpu[r]);
                if (dep > now) prs_gpu_sim_idle(d->gpu[r], dep - now);
                prs_gpu_work w = work_of(d, p, s, in);
                if (d->cl[r]) prs_client_begin(d->cl[r], in, mb, 0);
                if (prs_gpu_sim_run(d->gpu[r], &w, NULL)) return -1;
                if (d->cl[r]) prs_client_end(d->cl[r], in, mb, 0);
                fin[in][s][mb] = prs_gpu_now_s(d->gpu[r]);
                next[s]++;
                done++;
                progress = 1;
            }
            if (!progress) return -1;
        }
    }
    double end = 0, e1 = 0;
    for (int i = 0; i < n; i++)
        if (prs_gpu_now_s(d->gpu[i]) > end) end = prs_gpu_now_s(d->gpu[i]);
    for (int i = 0; i < n; i++) {
        prs_gpu_sim_idle(d->gpu[i], end - prs_gpu_now_s(d->gpu[i]));
        e1 += prs_gpu_read_energy_j(d->gpu[i]);
        if (d->cl[i]) prs_client_iteration_end(d->cl[i]);
    }
    *energy = e1 - e0;
    return end - t0;
}

/* All-max baseline: the same job on fresh GPUs without clients. */
static int baseline(const demo *proto, double *time_s, double *energy_j)
{
    demo b = *proto;
    int n = b.dp * b.stages, rc = 0;
    memset(b.cl, 0, sizeof b.cl);
    for (int i = 0; i < n; i++)
        b.gpu[i] = NULL;
    for (int i = 0; i < n && !rc; i++)
        rc = prs_gpu_open_sim(b.preset, &b.gpu[i], NULL);
    if (!rc) *time_s = run_iteration(&b, energy_j);
    for (int i = 0; i < n; i++)
        prs_gpu_close(b.gpu[i]);
    return rc || *time_s < 0 ? -1 : 0;
}

/* What every rank runs: 1 when each runs phase with the same round (at least min_round), and then
 * *round is that round and plans[] each rank's plan (pipelines may run different plans). */
static int snapshot(demo *d, const char *phase, long min_round, long *round, long *plans)
{
    prs_client_stats s;
    for (int i = 0; i < d->dp * d->stages; i++) {
        prs_client_get_stats(d->cl[i], &s);
        if (strcmp(s.phase, phase) != 0 || s.round < min_round || (i > 0 && s.round != *round))
            return 0;
        *round = s.round;
        plans[i] = s.plan_id;
    }
    return 1;
}

static long request(int port, const char *method, const char *path, const char *token,
                    const char *json, json_t **out);

/* The job's phase as the server reports it, into buf ("" when it did not answer). */
static void server_phase(const demo *d, int port, char *buf, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", prs_client_job_id(d->cl[0]));
    json_t *o = NULL;
    buf[0] = '\0';
    if (request(port, "GET", path, prs_client_token(d->cl[0]), NULL, &o) == 200)
        snprintf(buf, n, "%s", json_string_value(json_object_get(o, "phase")) ?: "");
    json_decref(o);
}

/* Lockstep with the server, so that every figure depends on iterations, never on wall time:
 * wait until every rank's iterations are acknowledged, the server is not planning, and every
 * rank has fetched its schedule since. The server then decided everything (switch iterations,
 * phases) from the same reports on every run. 0, or -1 after timeout_s of wall time. */
static int sync_server(demo *d, int port, double timeout_s)
{
    int n = d->dp * d->stages;
    double t0 = prs_mono_s();
    prs_client_stats s;
    for (int i = 0; i < n; i++) {
        for (;;) {
            prs_client_get_stats(d->cl[i], &s);
            if (s.registered && s.posted + s.dropped >= s.iterations) break;
            if (prs_mono_s() - t0 > timeout_s) return -1;
            sleep_ms(1);
        }
    }
    char phase[32];
    for (server_phase(d, port, phase, sizeof phase); strcmp(phase, "planning") == 0;
         server_phase(d, port, phase, sizeof phase)) {
        if (prs_mono_s() - t0 > timeout_s) return -1;
        sleep_ms(2);
    }
    /* Two answers after `settled`: the second was asked for after the first arrived, hence
     * after `settled` (one request at a time per rank), so it holds the server's settled state. */
    double settled = prs_mono_s();
    for (int i = 0; i < n; i++) {
        for (double after = settled, k = 0; k < 2;) {
            prs_client_get_stats(d->cl[i], &s);
            if (s.last_contact_s > after) {
                after = s.last_contact_s;
                k++;
                continue;
            }
            if (prs_mono_s() - t0 > timeout_s) return -1;
            sleep_ms(1);
        }
    }
    return 0;
}

/* One iteration in lockstep with the server (sync_server after it). */
static double step(demo *d, int port, double *energy)
{
    double t = run_iteration(d, energy);
    if (t < 0 || sync_server(d, port, 30)) return -1;
    return t;
}

/* Iterate until every rank runs `phase` with a round >= min_round and its plan has settled: the
 * same round and plans for SETTLE iterations in a row. Then measure one more iteration, which
 * must run wholly under them. At most MAX_WAIT iterations. 0 on success. */
#define SETTLE 3
#define MAX_WAIT 2000
static int measure(demo *d, int port, const char *phase, long min_round, double *t, double *e,
                   long *round)
{
    long r = -1, r1 = -1, plans[MAX_DP * MAX_STAGES] = {0}, plans1[MAX_DP * MAX_STAGES] = {0};
    size_t size = sizeof(long) * (size_t)(d->dp * d->stages);
    int stable = 0;
    for (int k = 0; k < MAX_WAIT; k++) {
        if (!snapshot(d, phase, min_round, &r1, plans1)) {
            stable = 0;
            r = -1;
        } else if (r1 == r && memcmp(plans1, plans, size) == 0) {
            stable++;
        } else {
            stable = 0;
            r = r1;
            memcpy(plans, plans1, size);
        }
        double it_e = 0, it_t = step(d, port, &it_e);
        if (it_t < 0) return -1;
        if (stable >= SETTLE && snapshot(d, phase, min_round, &r1, plans1) && r1 == r &&
            memcmp(plans1, plans, size) == 0) {
            *t = it_t;
            *e = it_e;
            *round = r;
            return 0;
        }
    }
    return -1;
}

/* ---- talking to the embedded server ----------------------------------------------------- */

/* One request to the embedded server; returns the HTTP status (0: none) and the JSON answer in
 * *out (may be NULL). */
static long request(int port, const char *method, const char *path, const char *token,
                    const char *json, json_t **out)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    prs_cli_http_req req = {url, method, token, json, NULL, 10};
    return prs_cli_http(&req, out, NULL, 0);
}

/* ---- plots ------------------------------------------------------------------------------ */

static int write_svg(const char *dir, const char *name, int (*draw)(FILE *, const void *),
                     const void *spec)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return bad("cannot write %s", path), -1;
    int rc = draw(f, spec);
    if (fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, CMD ": could not draw %s\n", path);
    return rc;
}

static int draw_frontier(FILE *f, const void *spec)
{
    prs_error err;
    return prs_plot_frontier(f, spec, &err);
}

static int draw_savings(FILE *f, const void *spec)
{
    prs_error err;
    return prs_plot_savings(f, spec, &err);
}

/* ---- the command ------------------------------------------------------------------------ */

typedef struct results {
    double allmax_t, allmax_e, perseus_t, perseus_e;
    /* per slowdown: the straggler's factor, the iteration time (all-max's and Perseus's), the
     * energies of all GPUs and the saving */
    double slowdowns[MAX_SLOWDOWNS], saving_pct[MAX_SLOWDOWNS], strag_time[MAX_SLOWDOWNS],
        strag_base_e[MAX_SLOWDOWNS], strag_e[MAX_SLOWDOWNS];
    double strag_allmax_e, strag_perseus_e, strag_t;
    int nslow;
    long iterations;
    double wall_s;
    double recovered_t, recovered_e;
    /* power cap: the cap (all GPUs), the run under it with the power the server predicted
     * (sum of the pipelines' average and 1 s peak), and the run after it was lifted */
    double cap_w, cap_t, cap_e, cap_pred_avg_w, cap_pred_peak_w, lifted_t, lifted_e;
} results;

static int parse_int(const char *opt, const char *arg, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < lo || v > hi)
        return bad("%s: expected an integer in %d..%d, got '%s'", opt, lo, hi, arg);
    *out = (int)v;
    return 0;
}

/* The job's spec for POST /v1/jobs: the sweep is every supported clock from the preset's
 * profiling minimum up. Returns a string to free. */
static char *job_spec(const demo *d)
{
    json_t *clocks = json_array();
    for (int f = d->preset->f_max_mhz; f >= d->preset->prof_min_mhz; f -= d->preset->f_step_mhz)
        json_array_append_new(clocks, json_integer(f));
    /* switch_lead_s 0: the lockstep (sync_server) has every rank fetch its schedule before it
     * runs another iteration, so the shortest lead is safe, and it does not depend on how fast
     * this machine runs the simulation (the server sizes a longer lead from wall time). */
    json_t *spec = json_pack("{s:s, s:i, s:i, s:i, s:o, s:f, s:b, s:f, s:{s:i, s:i}}", "model",
                             "perseus-demo", "stages", d->stages, "microbatches", d->mb, "dp",
                             d->dp, "clocks_mhz", clocks, "blocking_power_w",
                             d->preset->blocking_power_w, "reuse_frontier", 0, "switch_lead_s", 0.0,
                             "profiling", "warmup_iterations", 1, "iterations_per_clock", 2);
    char *spec_text = json_dumps(spec, JSON_COMPACT);
    json_decref(spec);
    return spec_text;
}

/* One sim GPU and one client per rank; rank 0 creates the job. 0, or 1 on a failure. */
static int start_clients(demo *d, const char *url)
{
    int n = d->dp * d->stages, rc = 0;
    char *spec_text = job_spec(d);
    for (int i = 0; i < n && !rc; i++) {
        prs_error err;
        rc = prs_gpu_open_sim(d->preset, &d->gpu[i], &err);
        if (rc) break;
        prs_client_opts o;
        prs_client_opts_init(&o);
        o.server_url = url;
        if (i == 0) {
            o.job_spec_json = spec_text;
        } else {
            o.job_id = prs_client_job_id(d->cl[0]);
            o.token = prs_client_token(d->cl[0]);
        }
        o.rank = i;
        o.dp = i / d->stages;
        o.pp = i % d->stages;
        o.gpu = d->gpu[i];
        o.poll_interval_s = 0.001;
        o.warmup_iterations = 0;
        rc = prs_client_new(&o, &d->cl[i], &err);
        if (rc) fprintf(stderr, CMD ": rank %d: %s\n", i, err.msg);
    }
    free(spec_text);
    return rc ? 1 : 0;
}

/* Stragglers: the last pipeline slows down by each factor (ascending, the requested one
 * included) and is reported; each gives a point of the savings curve. 0 or the exit status. */
static int run_stragglers(demo *d, int port, double straggler, long *round, results *res)
{
    const char *id = prs_client_job_id(d->cl[0]), *token = prs_client_token(d->cl[0]);
    double factors[MAX_SLOWDOWNS] = {1.05, 1.1, 1.2, 1.3, 1.5};
    int nf = 5, have = 0;
    for (int k = 0; k < nf; k++)
        have |= fabs(factors[k] - straggler) < 1e-9;
    if (!have) {
        int k = nf++;
        while (k > 0 && factors[k - 1] > straggler) {
            factors[k] = factors[k - 1];
            k--;
        }
        factors[k] = straggler;
    }
    for (int k = 0; k < nf; k++) {
        double x = factors[k];
        d->slow[d->dp - 1] = x;
        char path[128], req[96];
        snprintf(path, sizeof path, "/v1/jobs/%s/stragglers", id);
        snprintf(req, sizeof req, "{\"dp\": %d, \"slowdown\": %.6g}", d->dp - 1, x);
        json_t *ans = NULL;
        long st = request(port, "POST", path, token, req, &ans);
        json_decref(ans);
        if (st != 200) return bad("reporting the straggler: HTTP %ld", st);
        if (sync_server(d, port, 30)) return bad("the ranks lost the server");
        double t, e, base_t, base_e;
        if (measure(d, port, "running", *round + 1, &t, &e, round) || baseline(d, &base_t, &base_e))
            return bad("no new plan for the straggler");
        if (fabs(x - straggler) < 1e-9) {
            res->strag_t = t;
            res->strag_perseus_e = e;
            res->strag_allmax_e = base_e;
        }
        res->slowdowns[res->nslow] = x;
        res->strag_time[res->nslow] = t;
        res->strag_base_e[res->nslow] = base_e;
        res->strag_e[res->nslow] = e;
        res->saving_pct[res->nslow++] = 100 * (1 - e / base_e);
    }
    return 0;
}

/* A power cap of 90 % of the straggler-free plan's measured power (all GPUs), set while running
 * and lifted: the run under it and after it. 0 or the exit status. */
static int run_power_cap(demo *d, int port, long *round, results *res)
{
    const char *id = prs_client_job_id(d->cl[0]), *token = prs_client_token(d->cl[0]);
    char path[128], req[96];
    snprintf(path, sizeof path, "/v1/jobs/%s/power_cap", id);
    res->cap_w = 0.9 * res->recovered_e / res->recovered_t;
    snprintf(req, sizeof req, "{\"power_cap_w\": %.17g}", res->cap_w);
    if (request(port, "POST", path, token, req, NULL) != 200 || sync_server(d, port, 30) ||
        measure(d, port, "running", *round + 1, &res->cap_t, &res->cap_e, round))
        return bad("the job did not run under the power cap");
    json_t *st = NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    if (request(port, "GET", path, token, NULL, &st) == 200)
        for (size_t k = 0; k < json_array_size(json_object_get(st, "pipelines")); k++) {
            json_t *pw =
                json_object_get(json_array_get(json_object_get(st, "pipelines"), k), "power");
            res->cap_pred_avg_w += json_number_value(json_object_get(pw, "avg_w"));
            res->cap_pred_peak_w += json_number_value(json_object_get(pw, "peak_w"));
        }
    json_decref(st);
    snprintf(path, sizeof path, "/v1/jobs/%s/power_cap", id);
    if (request(port, "DELETE", path, token, NULL, NULL) != 200 || sync_server(d, port, 30) ||
        measure(d, port, "running", *round + 1, &res->lifted_t, &res->lifted_e, round))
        return bad("the job did not return from the power cap");
    return 0;
}

/* Every point of the job's frontier, slowest first: the summary's size, then pages of at most
 * 10,000 points (GET /v1/jobs/{id}/frontier answers a summary without points unless a page is
 * asked for). A new array, or NULL when the server did not answer all of it. */
static json_t *fetch_frontier(const demo *d, int port)
{
    const char *id = prs_client_job_id(d->cl[0]), *token = prs_client_token(d->cl[0]);
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/frontier", id);
    json_t *sum = NULL;
    if (request(port, "GET", path, token, NULL, &sum) != 200 || !sum) {
        json_decref(sum);
        return NULL;
    }
    json_int_t size = json_integer_value(json_object_get(sum, "size"));
    json_decref(sum);
    json_t *all = json_array();
    json_int_t offset = 0;
    while (all && offset < size) {
        snprintf(path, sizeof path, "/v1/jobs/%s/frontier?offset=%lld&limit=10000", id,
                 (long long)offset);
        json_t *page = NULL;
        json_t *pts = request(port, "GET", path, token, NULL, &page) == 200 && page
                          ? json_object_get(page, "points")
                          : NULL;
        if (json_array_size(pts) == 0 || json_array_extend(all, pts)) {
            json_decref(all);
            all = NULL;
        }
        offset += (json_int_t)json_array_size(pts);
        json_decref(page);
    }
    return all;
}

/* frontier.csv in out_dir: the points of the plot (times in s, energies of all GPUs in J). */
static int write_frontier_csv(const char *out_dir, const double *pt, const double *pe,
                              const double *et, const double *ee, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/frontier.csv", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) return bad("cannot write %s", path), 1;
    fputs("time_s,energy_j,eval_time_s,eval_energy_j\n", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.9g,%.9g,%.9g,%.9g\n", pt[i], pe[i], et[i], ee[i]);
    return fclose(f) != 0 ? (bad("cannot write %s", path), 1) : 0;
}

/* The frontier the server planned, with the measured all-max and Perseus points; its points
 * also in frontier.csv. */
static int plot_frontier(const demo *d, int port, const char *out_dir, const results *res)
{
    json_t *pts = fetch_frontier(d, port);
    if (!pts) {
        bad("the server did not answer the job's whole frontier");
        return 1;
    }
    size_t np = json_array_size(pts);
    double *px = calloc(np + 1, sizeof *px), *py = calloc(np + 1, sizeof *py);
    double *ex = calloc(np + 1, sizeof *ex), *ey = calloc(np + 1, sizeof *ey);
    int rc = !px || !py || !ex || !ey;
    /* The server plans one pipeline; every pipeline runs the plan, so the job's frontier is
     * the pipeline's energies times dp: all GPUs, as the terminal prints them. */
    for (size_t i = 0; !rc && i < np; i++) {
        json_t *p = json_array_get(pts, i);
        px[i] = json_number_value(json_object_get(p, "time_s"));
        py[i] = d->dp * json_number_value(json_object_get(p, "energy_j"));
        ex[i] = json_number_value(json_object_get(p, "eval_time_s"));
        ey[i] = d->dp * json_number_value(json_object_get(p, "eval_energy_j"));
    }
    json_decref(pts);
    if (!rc) {
        prs_plot_point base[2] = {{"all-max (measured)", res->allmax_t, res->allmax_e},
                                  {"Perseus (measured)", res->perseus_t, res->perseus_e}};
        char subtitle[160];
        snprintf(subtitle, sizeof subtitle,
                 "perseus demo, sim %s: energy of all %d GPUs (%d pipelines x %d stages)",
                 d->preset->name, d->dp * d->stages, d->dp, d->stages);
        prs_frontier_plot fp;
        memset(&fp, 0, sizeof fp);
        fp.subtitle = subtitle;
        fp.predicted = (prs_plot_series){"planned", px, py, np};
        fp.evaluated = (prs_plot_series){"evaluated", ex, ey, np};
        fp.baselines = base;
        fp.nbaselines = 2;
        fp.tmin_s = res->perseus_t;
        fp.tstar_s = NAN;
        rc = write_svg(out_dir, "frontier.svg", draw_frontier, &fp);
        if (write_frontier_csv(out_dir, px, py, ex, ey, np)) rc = 1;
    }
    free(px);
    free(py);
    free(ex);
    free(ey);
    return rc ? 1 : 0;
}

/* frontier.svg and savings.svg in out_dir (created). 0, or 1 when one could not be written. */
static int write_plots(const demo *d, int port, const char *out_dir, results *res)
{
    if (prs_cli_make_dir("demo", out_dir)) return 1;
    int rc = plot_frontier(d, port, out_dir, res);
    prs_plot_series ss = {"Perseus (measured)", res->slowdowns, res->saving_pct,
                          (size_t)res->nslow};
    prs_savings_plot sp;
    memset(&sp, 0, sizeof sp);
    sp.subtitle = "perseus demo: saving of all GPUs over all-max, one pipeline straggling";
    sp.series = &ss;
    sp.nseries = 1;
    if (res->nslow > 0 && write_svg(out_dir, "savings.svg", draw_savings, &sp)) rc = 1;
    return rc;
}

static int run_demo(demo *d, prs_server *srv, const char *out_dir, double straggler, results *res)
{
    int port = prs_server_port(srv);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    if (start_clients(d, url)) return 1;
    const char *id = prs_client_job_id(d->cl[0]), *token = prs_client_token(d->cl[0]);
    double wall0 = prs_mono_s();
    int rc = 0;
    if (baseline(d, &res->allmax_t, &res->allmax_e)) rc = bad("baseline failed");
    long round = 0;
    if (!rc && sync_server(d, port, 30)) rc = bad("the ranks did not register");
    if (!rc && measure(d, port, "running", 0, &res->perseus_t, &res->perseus_e, &round))
        rc = bad("the job did not reach the running phase");
    if (!rc) rc = run_stragglers(d, port, straggler, &round, res);
    if (!rc) { /* recovery */
        d->slow[d->dp - 1] = 1;
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s/stragglers/%d", id, d->dp - 1);
        long st = request(port, "DELETE", path, token, NULL, NULL);
        if (st != 200 || sync_server(d, port, 30) ||
            measure(d, port, "running", round + 1, &res->recovered_t, &res->recovered_e, &round))
            rc = bad("the job did not recover from the straggler");
    }
    if (!rc) rc = run_power_cap(d, port, &round, res);
    prs_client_stats s;
    prs_client_get_stats(d->cl[0], &s);
    res->iterations = s.iterations;
    res->wall_s = prs_mono_s() - wall0;
    if (!rc && out_dir) rc = write_plots(d, port, out_dir, res);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", id);
    request(port, "POST", path, token, "{}", NULL);
    return rc;
}

/* The command line: the job's shape in a demo, the rest here. */
typedef struct demo_args {
    double straggler;
    const char *out_dir; /* NULL: --no-plots */
    int json;
} demo_args;

/* Parse argv into d and a; 0, or the exit status (*done: help printed). */
static int parse_args(int argc, char **argv, demo *d, demo_args *a, int *done)
{
    enum {
        OPT_STAGES = 256,
        OPT_MB,
        OPT_DP,
        OPT_GPU,
        OPT_STRAGGLER,
        OPT_OUT,
        OPT_NOPLOTS,
        OPT_JSON
    };
    static const struct option longopts[] = {{"stages", required_argument, 0, OPT_STAGES},
                                             {"microbatches", required_argument, 0, OPT_MB},
                                             {"dp", required_argument, 0, OPT_DP},
                                             {"gpu", required_argument, 0, OPT_GPU},
                                             {"straggler", required_argument, 0, OPT_STRAGGLER},
                                             {"out", required_argument, 0, OPT_OUT},
                                             {"no-plots", no_argument, 0, OPT_NOPLOTS},
                                             {"json", no_argument, 0, OPT_JSON},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    int c;
    *done = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_STAGES:
            if (parse_int("--stages", optarg, 2, MAX_STAGES, &d->stages)) return 2;
            break;
        case OPT_MB:
            if (parse_int("--microbatches", optarg, 1, MAX_MB, &d->mb)) return 2;
            break;
        case OPT_DP:
            if (parse_int("--dp", optarg, 2, MAX_DP, &d->dp)) return 2;
            break;
        case OPT_GPU:
            d->preset = prs_gpu_preset_find(optarg);
            if (!d->preset) {
                char names[128];
                return bad("--gpu: unknown preset '%s' (known: %s)", optarg,
                           prs_gpu_preset_names(names, sizeof names));
            }
            break;
        case OPT_STRAGGLER: {
            char *end;
            a->straggler = strtod(optarg, &end);
            if (end == optarg || *end || !(a->straggler > 1 && a->straggler <= 3))
                return bad("--straggler: expected a number in (1, 3], got '%s'", optarg);
            break;
        }
        case OPT_OUT:
            a->out_dir = optarg;
            break;
        case OPT_NOPLOTS:
            a->out_dir = NULL;
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case 'h':
            usage(stdout);
            *done = 1;
            return 0;
        default:
            return prs_cli_unknown_option("demo", argv[optind - 1], longopts);
        }
    }
    if (optind < argc) return bad("unexpected argument '%s'", argv[optind]);
    return 0;
}

/* Start perseusd on a temporary directory, run the demo, stop and remove it all. */
static int run(demo *d, const demo_args *a, results *res)
{
    d->pipe = (prs_pipeline){d->stages, d->mb, PRS_SCHEDULE_1F1B, 0.001, 0, 0, 0};
    for (int p = 0; p < d->dp; p++)
        d->slow[p] = 1;
    char dir[256], db[300];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/perseus-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return bad("cannot create a temporary directory"), 1;
    snprintf(db, sizeof db, "%s/perseusd.db", dir);
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.port = 0;
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.threads = 2;
    cfg.log_fd = -1;
    prs_server *srv;
    prs_error err;
    int rc = 1;
    if (prs_server_start(&cfg, &srv, &err)) {
        fprintf(stderr, CMD ": cannot start perseusd: %s\n", err.msg);
    } else {
        rc = run_demo(d, srv, a->out_dir, a->straggler, res);
        for (int i = 0; i < d->dp * d->stages; i++) {
            prs_client_free(d->cl[i]);
            prs_gpu_close(d->gpu[i]);
        }
        prs_server_stop(srv);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, CMD ": could not remove %s\n", dir);
    return rc;
}

/* x as printf's "%.*f" shows it, read back: the JSON value is the figure the table shows. */
static json_t *fixed(double x, int decimals)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", decimals, x);
    return prs_cli_json_real(strtod(buf, NULL));
}

static int print_json(const demo *d, const demo_args *a, const results *res)
{
    double intrinsic = 100 * (1 - res->perseus_e / res->allmax_e);
    double slowdown = 100 * (res->perseus_t / res->allmax_t - 1);
    double strag = 100 * (1 - res->strag_perseus_e / res->strag_allmax_e);
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "gpu", json_string(d->preset->name));
    json_object_set_new(o, "stages", json_integer(d->stages));
    json_object_set_new(o, "microbatches", json_integer(d->mb));
    json_object_set_new(o, "dp", json_integer(d->dp));
    json_object_set_new(o, "allmax_time_s", fixed(res->allmax_t, 6));
    json_object_set_new(o, "allmax_energy_j", fixed(res->allmax_e, 3));
    json_object_set_new(o, "perseus_time_s", fixed(res->perseus_t, 6));
    json_object_set_new(o, "perseus_energy_j", fixed(res->perseus_e, 3));
    json_object_set_new(o, "intrinsic_saving_pct", fixed(intrinsic, 3));
    json_object_set_new(o, "slowdown_pct", fixed(fabs(slowdown) < 5e-5 ? 0.0 : slowdown, 3));
    json_object_set_new(o, "straggler_slowdown", fixed(a->straggler, 3));
    json_object_set_new(o, "straggler_allmax_energy_j", fixed(res->strag_allmax_e, 3));
    json_object_set_new(o, "straggler_perseus_energy_j", fixed(res->strag_perseus_e, 3));
    json_object_set_new(o, "straggler_saving_pct", fixed(strag, 3));
    json_t *list = json_array();
    for (int k = 0; k < res->nslow; k++) {
        json_t *x = json_object();
        json_object_set_new(x, "slowdown", fixed(res->slowdowns[k], 3));
        json_object_set_new(x, "time_s", fixed(res->strag_time[k], 6));
        json_object_set_new(x, "allmax_energy_j", fixed(res->strag_base_e[k], 3));
        json_object_set_new(x, "perseus_energy_j", fixed(res->strag_e[k], 3));
        json_object_set_new(x, "saving_pct", fixed(res->saving_pct[k], 3));
        json_array_append_new(list, x);
    }
    json_object_set_new(o, "stragglers", list);
    json_object_set_new(o, "recovered_time_s", fixed(res->recovered_t, 6));
    json_object_set_new(o, "recovered_energy_j", fixed(res->recovered_e, 3));
    json_object_set_new(
        o, "power_cap",
        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "cap_w", fixed(res->cap_w, 3),
                  "time_s", fixed(res->cap_t, 6), "energy_j", fixed(res->cap_e, 3), "avg_power_w",
                  fixed(res->cap_e / res->cap_t, 3), "predicted_avg_power_w",
                  fixed(res->cap_pred_avg_w, 3), "predicted_peak_power_w",
                  fixed(res->cap_pred_peak_w, 3), "lifted_time_s", fixed(res->lifted_t, 6),
                  "lifted_energy_j", fixed(res->lifted_e, 3)));
    json_object_set_new(o, "iterations", json_integer(res->iterations));
    json_object_set_new(o, "plots", a->out_dir ? json_string(a->out_dir) : json_null());
    /* 15 digits: every figure above reads back as printed, and prints as it reads */
    return prs_cli_json_print(o, JSON_REAL_PRECISION(15));
}

static void print_table(const demo *d, const demo_args *a, const results *res)
{
    double intrinsic = 100 * (1 - res->perseus_e / res->allmax_e);
    double slowdown = 100 * (res->perseus_t / res->allmax_t - 1);
    double strag = 100 * (1 - res->strag_perseus_e / res->strag_allmax_e);
    const char *out_dir = a->out_dir;
    printf("perseus demo: %d pipelines x %d stages, %d microbatches, 1F1B, sim %s GPUs\n", d->dp,
           d->stages, d->mb, d->preset->name);
    printf("profiled, planned and ran in %ld iterations (%.1f s wall)\n\n", res->iterations,
           res->wall_s);
    printf("%-28s %12s %14s\n", "per iteration (all GPUs)", "time (s)", "energy (J)");
    printf("%-28s %12.4f %14.1f\n", "all-max", res->allmax_t, res->allmax_e);
    printf("%-28s %12.4f %14.1f\n", "Perseus", res->perseus_t, res->perseus_e);
    /* a rounding-level -0 would print as "-0.00 %" */
    printf("intrinsic energy saving %.2f %% at a slowdown of %.2f %%\n\n", intrinsic,
           fabs(slowdown) < 5e-5 ? 0.0 : slowdown);
    printf("with a straggler pipeline %.2fx slower:\n", a->straggler);
    printf("%-28s %12.4f %14.1f\n", "all-max", res->strag_t, res->strag_allmax_e);
    printf("%-28s %12.4f %14.1f\n", "Perseus", res->strag_t, res->strag_perseus_e);
    printf("energy saving %.2f %%\n", strag);
    printf("saving by slowdown:");
    for (int k = 0; k < res->nslow; k++)
        printf("%s %.2fx %.2f %%", k ? "," : "", res->slowdowns[k], res->saving_pct[k]);
    putchar('\n');
    printf("after recovery: %.4f s, %.1f J per iteration\n", res->recovered_t, res->recovered_e);
    printf("power cap %.1f W (90 %% of that): %.4f s, %.1f J, %.1f W per iteration (predicted "
           "%.1f W, 1 s peak %.1f W); lifted: %.4f s, %.1f J\n",
           res->cap_w, res->cap_t, res->cap_e, res->cap_e / res->cap_t, res->cap_pred_avg_w,
           res->cap_pred_peak_w, res->lifted_t, res->lifted_e);
    if (out_dir)
        printf("plots: %s/frontier.svg, %s/savings.svg (energies of all %d GPUs, as above)\n",
               out_dir, out_dir, d->dp * d->stages);
}

int prs_cmd_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--inference") == 0) return prs_cmd_demo_inference(argc, argv);
    demo d;
    memset(&d, 0, sizeof d);
    d.stages = 4;
    d.mb = 8;
    d.dp = 2;
    d.preset = prs_gpu_preset_find("a100");
    demo_args a = {1.2, "perseus-demo", 0};
    int done = 0, rc = parse_args(argc, argv, &d, &a, &done);
    if (rc || done) return rc;
    results res;
    memset(&res, 0, sizeof res);
    if ((rc = run(&d, &a, &res))) return rc;
    if (a.json) return print_json(&d, &a, &res) ? 1 : 0;
    print_table(&d, &a, &res);
    return 0;
}
