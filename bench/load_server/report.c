/* load_server: what each phase prints, and the run's verdict. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load_server.h"

/* The registration target: 8,192 ranks in 10 s, up to 65,536 in 15 s. */
static double reg_target_s(const gen *g)
{
    return g->ranks <= 8192 ? 10 : 15;
}

/* The run's first line: its size, the server's threads, the load and libcurl's version. */
void ls_report_header(const gen *g)
{
    double la[3];
    if (getloadavg(la, 3) < 0) la[0] = -1;
    char thr[48];
    if (g->threads > 0)
        snprintf(thr, sizeof thr, "%d", g->threads);
    else
        snprintf(thr, sizeof thr, "default (%ld CPUs)", sysconf(_SC_NPROCESSORS_ONLN));
    printf("load_server: %d ranks (%d stages x %d pipelines, %d microbatches), server threads %s, "
           "load avg %.2f, libcurl %s\n",
           g->ranks, g->stages, g->dp, g->microbatches, thr, la[0],
           curl_version_info(CURLVERSION_NOW)->version);
    fflush(stdout);
}

void ls_report_register(const gen *g)
{
    double reg_s = g->t_sched_all - g->t_reg0;
    if (g->nsched == g->ranks) {
        long e = ls_total_errors(&g->e_reg);
        printf("register + schedule: %d ranks in %.3f s (registration alone %.3f s) over %d "
               "connections (%.0f ranks/s, %ld schedule requests), errors %ld   "
               "[target < %g s: %s]\n",
               g->ranks, reg_s, g->t_reg_last - g->t_reg0, g->conns, (double)g->ranks / reg_s,
               g->reg_sched_requests, e, reg_target_s(g),
               reg_s < reg_target_s(g) && e == 0 ? "PASS" : "MISS");
        printf("register + schedule ");
        ls_print_cpu(&g->cpu_reg0, &g->cpu_reg1);
        printf("\n");
    } else {
        printf("register + schedule: only %d of %d ranks got a schedule, errors %ld   "
               "[target < %g s: MISS]\n",
               g->nsched, g->ranks, ls_total_errors(&g->e_reg), reg_target_s(g));
    }
}

void ls_report_profiling(const gen *g)
{
    double prof_s = g->t_prof_done - g->t_sched_all;
    printf("profiling: %d clocks, %ld posts (%ld iterations, %ld windows, %.1f MB) in %.3f s "
           "(%.0f posts/s), errors %ld\n",
           g->rounds_seen, g->posts, g->iterations_posted, g->windows_posted,
           (double)g->bytes_posted / 1e6, prof_s, (double)g->posts / prof_s,
           ls_total_errors(&g->e_prof));
    printf("profiling ");
    ls_print_cpu(&g->cpu_reg1, &g->cpu_prof1);
    printf("\n");
    fflush(stdout);
}

void ls_report_planning(const status_info *si, double t_plan0)
{
    printf("planning: planner %.3f s (server), running %.3f s after the last rank left "
           "profiling; %ld measurements (%s profile), frontier %ld points, fastest plan %ld "
           "(%.4f s)\n",
           si->planning_s, ls_now_s() - t_plan0, si->measurements, si->source, si->points,
           si->fastest_plan, si->fastest_time_s);
    fflush(stdout);
}

/* g->lat is sorted. */
void ls_report_polls(const gen *g, const poll_figures *pf)
{
    long poll_err = ls_total_errors(&g->e_poll) + g->poll_unexpected;
    printf("schedule polls: %d concurrent pollers over %d connections, %s, %ld requests in "
           "%.2f s (%.0f/s) after %.0f ms of warm-up, errors %ld\n",
           g->pollers, g->conns,
           g->interval_s > 0 ? "each one request per interval" : "back to back", pf->requests,
           pf->measured_s, pf->rate, g->poll_warm_s * 1e3, poll_err);
    if (g->interval_s > 0) printf("poll interval: %.1f ms per poller\n", g->interval_s * 1e3);
    double p99 = ls_pct(g->lat, g->nlat, 0.99);
    printf("poll latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f   [target p99 < 20 ms: %s]\n",
           1e3 * ls_pct(g->lat, g->nlat, 0.5), 1e3 * ls_pct(g->lat, g->nlat, 0.9), 1e3 * p99,
           1e3 * (g->nlat ? g->lat[g->nlat - 1] : 0),
           g->nlat && p99 < 0.020 && poll_err == 0 ? "PASS" : "MISS");
    printf("poll cpu: generator %.0f%% of a core (user %.2f s, sys %.2f s, %.1f us per request), "
           "perseusd %.0f%%, over %.2f s on %ld cores\n",
           100 * pf->gen_cpu / pf->measured_s, pf->gen_user, pf->gen_sys,
           pf->requests ? 1e6 * pf->gen_cpu / (double)pf->requests : 0,
           100 * pf->srv_cpu / pf->measured_s, pf->measured_s, sysconf(_SC_NPROCESSORS_ONLN));
    if (pf->nh0 > 0 && pf->nh0 == pf->nh1) {
        unsigned long long cnt;
        double q50 = ls_hist_quantile(pf->nh0, pf->le, pf->h0, pf->h1, 0.5, &cnt),
               q99 = ls_hist_quantile(pf->nh0, pf->le, pf->h0, pf->h1, 0.99, &cnt);
        printf("poll latency inside perseusd (its /metrics histogram, warm-up included): %llu "
               "requests, p50 <= %g ms, p99 <= %g ms\n",
               cnt, 1e3 * q50, 1e3 * q99);
    }
    fflush(stdout);
}

/* sok: the phase ran to its end. Nothing when it stopped before reporting the straggler. */
void ls_report_straggler(const gen *g, const strag_figures *sf, int sok)
{
    if (!sok && !(sf->t_prime > 0)) return;
    printf("straggler: pipeline 0 at T' %.4f s (%.2fx): %d of %d other pipelines plan %ld -> "
           "%ld (answer %.1f ms, all %d schedules checked in %.3f s); cleared: back in %.1f "
           "ms (checked in %.3f s), errors %ld   [%s]\n",
           sf->t_prime, g->slowdown, sf->switched, g->dp - 1, sf->base_plan, sf->new_plan,
           1e3 * sf->set_s, g->ranks, sf->check_set_s, 1e3 * sf->clear_s, sf->check_clear_s,
           ls_total_errors(&g->e_strag),
           sok && ls_total_errors(&g->e_strag) == 0 ? "PASS" : "FAIL");
    double both = sf->server_set_s + sf->server_clear_s;
    if (sf->server_set_s >= 0 && sf->server_clear_s >= 0)
        printf("straggler set + clear inside perseusd (its /metrics): %.3f + %.3f = %.3f ms at "
               "dp = %d   [target < 5 ms: %s]\n",
               1e3 * sf->server_set_s, 1e3 * sf->server_clear_s, 1e3 * both, g->dp,
               both < 0.005 ? "PASS" : "MISS");
}

/* The errors of every phase and the verdict. rc: 0 when every phase ran to its end. Returns the
 * exit status: 1 when a phase stopped or anything failed. */
int ls_report_result(const gen *g, int rc)
{
    const errs *all[] = {&g->e_reg, &g->e_prof, &g->e_plan, &g->e_poll, &g->e_strag, &g->e_done};
    long sum = g->poll_unexpected;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sum += ls_total_errors(all[i]);
    const char *stopped = rc ? g->phase : NULL; /* the phase that could not finish */
    if (rc == 0 && sum) rc = 1;
    printf("errors: %ld in all (", sum);
    ls_print_errs("register", &g->e_reg);
    ls_print_errs("; profiling", &g->e_prof);
    ls_print_errs("; planning", &g->e_plan);
    ls_print_errs("; poll", &g->e_poll);
    printf(", %ld unexpected", g->poll_unexpected);
    ls_print_errs("; straggler", &g->e_strag);
    ls_print_errs("; complete", &g->e_done);
    if (rc == 0)
        printf(")\nresult: OK: the job went through every phase without errors\n");
    else if (stopped)
        printf(")\nresult: FAILED: stopped in the %s phase (see the messages above)\n", stopped);
    else
        printf(")\nresult: FAILED: every phase ran, with %ld errors (see the messages above)\n",
               sum);
    return rc;
}
