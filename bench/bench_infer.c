/* bench_infer: speed and memory of the serving emulator (src/infer) on Azure's traces.
 *
 *   case 1: one policy (dynamollm unless --policy) over the one-hour conversation trace scaled
 *           so that singlepool needs 80 % of 96 GPUs at its peak; goal < 1 s on one core;
 *   case 2: every policy and the lower bound over the conversation trace tiled into 7 days
 *           (diurnal depth 0.5) and scaled to 27 M requests by copies shifted over an hour, on a
 * cluster sized so that singlepool needs 80 % of it at the peak; goal < 10 min and peak RSS < 2 GB.
 *
 * The capacity table (built once per trace mix and shared by every policy) is timed apart from
 * the replays. Times are wall-clock (CLOCK_MONOTONIC) and CPU (CLOCK_PROCESS_CPUTIME_ID) of this
 * single-threaded process; peak RSS from getrusage. A report, not a test: a missed goal still
 * exits 0; exit 1 when the benchmark cannot run, 2 on a bad argument.
 *
 * --run-steps N sets the decode steps an instance computes ahead as one event (default 64; 1
 * replays one step at a time, the same results: engine.h), for an A/B of the two.
 *
 * usage: bench_infer --profile FILE [--trace FILE] [--policy NAME] [--days N] [--requests N]
 *                    [--run-steps N] [--skip-week] */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cluster.h"
#include "profile.h"

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

typedef struct bench {
    prs_infer_perf perf;
    prs_infer_opts o;
    prs_infer_cap_opts co;
    prs_infer_captable caps;
} bench;

static int die(const char *what, const prs_error *err)
{
    fprintf(stderr, "bench_infer: %s: %s\n", what, err->msg);
    return 1;
}

/* Scale t so that singlepool needs `share` of the cluster; with target_n > 0 scale to that
 * many requests instead and size the cluster (multiple of 8 GPUs) for the share. */
static int scale(bench *b, prs_infer_trace *t, double share, double target_n, prs_error *err)
{
    double f;
    if (target_n > 0) {
        f = target_n / (double)t->n;
        int a = b->caps.n_tps - 1, c = b->caps.n_clocks - 1;
        double cap = b->caps.cap[PRS_INFER_NCLASS][a][c].rate_rps * b->o.max_util;
        double peak = prs_infer_trace_peak_rate(t, b->o.peak_window_s) * f;
        int inst = (int)ceil(peak / cap);
        b->o.gpus = (int)ceil(inst * 8 / share / 8) * 8;
    } else if (prs_infer_scale_for_share(t, &b->caps, &b->o, share, &f, err)) {
        return err->code;
    }
    /* Superposed copies shifted over an hour (a week's load is many users, not one user's
     * bursts multiplied); the one-hour case has factor about 1 and duplicates. */
    prs_infer_trace s;
    int rc = target_n > 0 ? prs_infer_trace_scale_shift(t, f, 3600, &s, err)
                          : prs_infer_trace_scale(t, f, &s, err);
    if (rc) return rc;
    prs_infer_trace_free(t);
    *t = s;
    return 0;
}

static int run(bench *b, const prs_infer_trace *t, prs_infer_policy p, double *wall, double *cpu,
               double *energy_j, double *slo)
{
    static prs_infer_result r;
    prs_error err = {0};
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    if (prs_infer_replay(t, &b->perf, &b->caps, &b->o, p, &r, &err))
        return die(prs_infer_policy_name(p), &err);
    *wall = now_s(CLOCK_MONOTONIC) - w0;
    *cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *energy_j = r.energy_j;
    *slo = r.lat.done[PRS_INFER_ALL]
               ? 1 - (double)r.lat.late[PRS_INFER_ALL] / (double)r.lat.done[PRS_INFER_ALL]
               : 0;
    prs_infer_result_free(&r);
    return 0;
}

static int build_caps(bench *b, const prs_infer_trace *t, double *secs)
{
    prs_error err = {0};
    double w0 = now_s(CLOCK_MONOTONIC);
    if (prs_infer_captable_build(&b->perf, &b->o.classes, &b->co, t, &b->caps, &err))
        return die("capacity table", &err);
    *secs = now_s(CLOCK_MONOTONIC) - w0;
    return 0;
}

static int case_hour(bench *b, const char *path, prs_infer_policy p)
{
    prs_infer_trace t;
    prs_error err = {0};
    if (prs_infer_trace_load(path, &t, &err)) return die(path, &err);
    double cap_s = 0, wall = 0, cpu = 0, e = 0, slo = 0;
    int rc = build_caps(b, &t, &cap_s);
    if (!rc && scale(b, &t, 0.8, 0, &err)) rc = die("scale", &err);
    if (!rc) rc = run(b, &t, p, &wall, &cpu, &e, &slo);
    if (!rc)
        printf("case 1: %s, %zu requests, %d GPUs: capacity table %.2f s; replay %.3f s wall, "
               "%.3f s CPU (goal < 1 s: %s); %.2f kWh, SLO %.2f %%\n",
               prs_infer_policy_name(p), t.n, b->o.gpus, cap_s, wall, cpu,
               cpu < 1 ? "PASS" : "MISS", e / 3.6e6, 100 * slo);
    prs_infer_trace_free(&t);
    return rc;
}

static int case_week(bench *b, const char *path, int days, double requests)
{
    prs_infer_trace t, tiled;
    prs_error err = {0};
    if (prs_infer_trace_load(path, &t, &err)) return die(path, &err);
    int rc = prs_infer_trace_tile(&t, days, 0.5, 14, &tiled, &err) ? die("tile", &err) : 0;
    prs_infer_trace_free(&t);
    if (rc) return rc;
    double cap_s = 0, total = 0, wall = 0, cpu = 0, e = 0, slo = 0;
    rc = build_caps(b, &tiled, &cap_s);
    if (!rc && scale(b, &tiled, 0.8, requests, &err)) rc = die("scale", &err);
    if (!rc)
        printf("case 2: %d days, %zu requests, %d GPUs; capacity table %.2f s\n", days, tiled.n,
               b->o.gpus, cap_s);
    for (int p = 0; !rc && p < PRS_INFER_NPOLICY; p++) {
        rc = run(b, &tiled, (prs_infer_policy)p, &wall, &cpu, &e, &slo);
        total += wall;
        if (!rc)
            printf("  %-11s %8.1f s wall %8.1f s CPU  %10.1f kWh  SLO %6.2f %%\n",
                   prs_infer_policy_name((prs_infer_policy)p), wall, cpu, e / 3.6e6, 100 * slo);
        fflush(stdout);
    }
    double w0 = now_s(CLOCK_MONOTONIC);
    if (!rc && prs_infer_lower_bound(&tiled, &b->caps, &b->o, &e, &err)) rc = die("bound", &err);
    total += now_s(CLOCK_MONOTONIC) - w0;
    if (!rc)
        printf("  lowerbound  %8.1f s wall                  %10.1f kWh\n"
               "case 2 total: %.1f s (goal < 600 s: %s), peak RSS %.0f MB (goal < 2048: %s)\n",
               now_s(CLOCK_MONOTONIC) - w0, e / 3.6e6, total + cap_s,
               total + cap_s < 600 ? "PASS" : "MISS", peak_rss_mb(),
               peak_rss_mb() < 2048 ? "PASS" : "MISS");
    prs_infer_trace_free(&tiled);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"profile", required_argument, 0, 'p'},   {"trace", required_argument, 0, 't'},
        {"policy", required_argument, 0, 'P'},    {"days", required_argument, 0, 'd'},
        {"requests", required_argument, 0, 'n'},  {"skip-week", no_argument, 0, 's'},
        {"run-steps", required_argument, 0, 'r'}, {0, 0, 0, 0}};
    const char *profile = NULL, *trace = NULL;
    prs_infer_policy policy = PRS_INFER_DYNAMOLLM;
    int days = 7, skip_week = 0, run_steps = 64, c;
    double requests = 27e6;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'p':
            profile = optarg;
            break;
        case 't':
            trace = optarg;
            break;
        case 'P':
            ok = prs_infer_policy_parse(optarg, &policy) == 0;
            break;
        case 'd':
            ok = (days = atoi(optarg)) >= 1 && days <= 366;
            break;
        case 'n':
            ok = (requests = atof(optarg)) >= 1;
            break;
        case 's':
            skip_week = 1;
            break;
        case 'r':
            ok = (run_steps = atoi(optarg)) >= 1 && run_steps <= 4096;
            break;
        default:
            ok = 0;
        }
        if (!ok) return 2;
    }
    static char def[1024];
    if (!trace) {
        const char *d = getenv("PRS_SHARED_DIR");
        snprintf(def, sizeof def, "%s/data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
                 d ? d : "../shared");
        trace = def;
    }
    if (!profile) {
        fprintf(stderr, "usage: bench_infer --profile FILE (perseus infer synth --gpu h100 "
                        "--model llama2-70b --out FILE) [--trace FILE] ...\n");
        return 2;
    }
    static bench b;
    prs_infer_profile *prof;
    prs_error err = {0};
    if (prs_infer_profile_load(profile, &prof, &err)) return die(profile, &err);
    prs_infer_profile_perf(prof, &b.perf);
    prs_infer_opts_default(&b.o);
    b.o.run_steps = run_steps;
    prs_infer_cap_opts_default(&b.co);
    int rc = case_hour(&b, trace, policy);
    if (!rc && !skip_week) {
        prs_infer_opts_default(&b.o);
        b.o.run_steps = run_steps;
        rc = case_week(&b, trace, days, requests);
    }
    prs_infer_profile_free(prof);
    return rc;
}
