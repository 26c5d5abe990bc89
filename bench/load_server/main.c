/* load_server: R simulated ranks drive one whole perseusd job over loopback, with libcurl multi.
 *
 * Starts perseusd (--perseusd PATH, default: the perseusd beside this program's build folder)
 * on 127.0.0.1, port 0, with a scratch data directory, and takes one job of R ranks (S stages x
 * R/S data-parallel pipelines, 1F1B) through every phase:
 *   1. create the job (a short clock list, few profiling iterations);
 *   2. register + schedule: every rank POSTs its coordinates and GETs its schedule; the figure is
 *      the wall time from the first registration until the last rank has a schedule that is not
 *      "registering";
 *   3. profiling: each rank follows its schedule's round and clocks, posting all its iterations
 *      of a round in one results body whose per-computation windows come from the simulated GPU
 *      (perseus/gpumodel.h, A100 preset), until the job is planning or running;
 *   4. planning: the job status is polled until running (the planner's own time is reported);
 *   5. polls: P concurrent pollers (one outstanding request each) GET schedules of distinct ranks
 *      for D seconds after a warm-up that is not counted; latency percentiles and the CPU time of
 *      this generator and of the server;
 *   6. straggler: pipeline 0 is reported slow; every rank's schedule must show the plans the server
 *      announced (other pipelines on a new plan); the report is cleared and every schedule must
 *      be back on the fastest plan; then the job is completed and must be done.
 * All requests go through one libcurl multi handle (easy handles reused, keep-alive, at most C
 * connections) driven by an epoll loop with curl's socket interface. Sockets are refused unless
 * they connect to 127.0.0.0/8. Counts and times are bounded and every phase has a deadline.
 *
 * Files: main.c runs the phases in turn; options.c reads the options, http.c is the libcurl
 * plumbing, server.c runs perseusd, job.c moves the job, ranks.c simulates the ranks up to
 * planning, polls.c and straggler.c are the last phases, report.c prints the figures. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load_server.h"

/* As many open files as allowed; SIGINT/SIGTERM stop the loops, the alarm is the last resort. */
static void install_signals(const gen *g)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ls_on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = ls_on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)g->watchdog_s + 60); /* last resort: the loops check the watchdog first */
}

/* The ranks' state, the window cache and the straggler expectations. */
static void alloc_state(gen *g)
{
    g->rk = ls_xcalloc((size_t)g->ranks, sizeof *g->rk);
    g->clk = ls_xcalloc((size_t)g->ranks * (size_t)g->ops, sizeof *g->clk);
    g->q[0].r = ls_xcalloc((size_t)g->ranks, sizeof *g->q[0].r);
    g->q[1].r = ls_xcalloc((size_t)g->ranks, sizeof *g->q[1].r);
    g->parked = ls_xcalloc((size_t)g->ranks, sizeof *g->parked);
    g->wc = ls_xcalloc((size_t)g->stages * (size_t)g->ops, sizeof *g->wc);
    g->expect_plan = ls_xcalloc((size_t)g->dp, sizeof *g->expect_plan);
    g->expect_strag = ls_xcalloc((size_t)g->dp, sizeof *g->expect_strag);
}

static void free_state(gen *g)
{
    for (int i = 0; g->wc && i < g->stages * g->ops; i++)
        free(g->wc[i].text.p);
    free(g->wc);
    free(g->pool);
    free(g->free_x);
    free(g->rk);
    free(g->clk);
    free(g->q[0].r);
    free(g->q[1].r);
    free(g->parked);
    free(g->expect_plan);
    free(g->expect_strag);
    free(g->lat);
}

/* perseusd started, the job created (and its profile uploaded with --upload-profile). */
static int start_job(gen *g, const char *bin)
{
    ls_phase_begin(g, "start", &g->e_reg);
    if (ls_start_server(g, bin)) return -1;
    if (ls_create_job(g)) return -1;
    if (g->upload && ls_upload_profile(g)) return -1;
    return 0;
}

/* Every phase in turn, each one's figures printed as it ends: 0 when all ran to their end. */
static int run_phases(gen *g)
{
    int ok = ls_run_ranks(g) == 0;
    ls_report_register(g);
    if (!ok) return 1;
    ls_report_profiling(g);

    status_info si;
    memset(&si, 0, sizeof si);
    double t_plan0 = ls_now_s();
    if (ls_wait_running(g, &si)) return 1;
    ls_report_planning(&si, t_plan0);

    poll_figures pf;
    if (ls_poll_phase(g, &pf)) return 1;
    ls_report_polls(g, &pf);

    strag_figures sf;
    memset(&sf, 0, sizeof sf);
    int sok = ls_run_straggler(g, &si, &sf) == 0;
    ls_report_straggler(g, &sf, sok);
    if (!sok) return 1;

    if (ls_complete_job(g)) return 1;
    printf("complete: job done, schedules empty, errors %ld\n", ls_total_errors(&g->e_done));
    return 0;
}

int main(int argc, char **argv)
{
    static gen G;
    gen *g = &G;
    g->on_done = ls_on_done;
    char bin[1024];
    int st = ls_parse_options(g, argc, argv, bin, sizeof bin);
    if (st >= 0) return st;
    install_signals(g);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("load_server: curl_global_init failed\n", stderr);
        return 1;
    }
    int rc = 1;
    g->t_start = ls_now_s();
    if (ls_http_setup(g) == 0) {
        alloc_state(g);
        if (start_job(g, bin) == 0) {
            ls_report_header(g);
            rc = ls_report_result(g, run_phases(g));
        }
    }
    fflush(stdout);
    ls_http_cleanup(g);
    ls_stop_server(g);
    free_state(g);
    return rc;
}
