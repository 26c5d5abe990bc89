/* perseus demo --inference (demo_infer.c): perseusd, perseus-fakeserve instances in two pools,
 * their perseus-instclock controllers and perseus-router, started as child processes on this
 * machine; a slice of a request trace replayed through the router twice (every GPU at its
 * highest clock, then under the instance level), and a summary. The parts:
 *   demo_infer_start.c   the services: perseusd and the cluster declared in it, perseus-gpud on
 *                        the fake NVML when given, the fakes, the router, the controllers;
 *   demo_infer_procs.c   the child processes: started next to the perseus binary, stopped in
 *                        order, never left behind (they die with the demo, kill -9 included);
 *   demo_infer_replay.c  the replay: each request sent at its arrival / time scale, its stream
 *                        timed (TTFT, every gap between events), statistics per pool;
 *   demo_infer_scrape.c  the fakes' Prometheus pages (energy), a sampler of the clocks the
 *                        controllers chose over time, and the plots. */
#ifndef PRS_CLI_DEMO_INFER_H
#define PRS_CLI_DEMO_INFER_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "classes.h"
#include "trace.h"

#define DEMO_CMD "perseus demo --inference"
#define DEMO_NPOOLS 2
#define DEMO_MAX_PER_POOL 8 /* instances per pool at most (--per-pool) */
#define DEMO_MAX_INST (DEMO_NPOOLS * DEMO_MAX_PER_POOL)
#define DEMO_MAX_PROCS (3 + 2 * DEMO_MAX_INST) /* perseusd, gpud, router, fakes, controllers */

int prs_cmd_demo_inference(int argc, char **argv);

/* Set by SIGINT / SIGTERM while the demo runs: every wait gives up and everything is stopped. */
extern volatile sig_atomic_t prs_demo_stop;

/* ---- child processes (demo_infer_procs.c) ---- */

typedef struct demo_proc {
    char name[48];
    pid_t pid;
} demo_proc;

typedef struct demo_procs {
    char bindir[1024]; /* where perseus and the other programs are */
    char tmp[512];     /* the demo's temporary directory */
    demo_proc p[DEMO_MAX_PROCS];
    int n;
} demo_procs;

/* bindir from /proc/self/exe, and a check that every program is there: 0, or 1 (message). */
int demo_find_programs(demo_procs *ps);
/* Start bindir/prog with argv (NULL-ended, argv[0] included), stderr to tmp/NAME.log, with
 * extra environment entries env (NULL-ended, may be NULL); the child dies when the demo does.
 * Returns its index, or -1 (message printed). */
int demo_spawn(demo_procs *ps, const char *name, const char *prog, char *const argv[],
               char *const env[]);
/* Wait until tmp/FILE holds a port (or the child died, or the demo is stopped): the port, or
 * -1 with a message naming the program and the end of its log. */
int demo_wait_port(demo_procs *ps, int idx, const char *file, double timeout_s);
/* Stop child idx: SIGTERM, then SIGKILL after timeout_s. 0 when it exited with status 0. */
int demo_stop(demo_procs *ps, int idx, double timeout_s);
/* Stop every child still running, last started first. */
void demo_stop_all(demo_procs *ps);
/* Install the SIGINT / SIGTERM handlers (prs_demo_stop). */
void demo_catch_signals(void);
void demo_sleep(double s);
double demo_now(void);

/* ---- replay (demo_infer_replay.c) ---- */

typedef struct demo_stats {
    size_t n, cap;
    double *v;
} demo_stats;

typedef struct demo_pool_stats {
    long sent, ok, met;
    demo_stats ttft, tbt; /* model seconds: every request's TTFT, every gap between events */
} demo_pool_stats;

typedef struct demo_run {
    demo_pool_stats pool[DEMO_NPOOLS];
    double wall_s;
} demo_run;

/* Replay trace through url (an OpenAI-compatible base URL) at time_scale; pool_of_class maps
 * a class to the demo's pool. 0, or -1 when stopped or on an error (message printed). */
int demo_replay(const char *url, const char *model, const prs_infer_trace *trace, double time_scale,
                const prs_infer_classes *classes, const int *pool_of_class, demo_run *out);
void demo_run_free(demo_run *r);
/* The q-quantile (0..1) of s (sorted in place); NAN when empty. */
double demo_quantile(demo_stats *s, double q);

/* ---- the fakes' pages, the clock sampler, the plots (demo_infer_scrape.c) ---- */

/* The sum of a metric's series on a Prometheus page at url: 0, or -1. */
int demo_scrape(const char *url, const char *metric, double *value);

typedef struct demo_sampler {
    char files[DEMO_MAX_INST][600]; /* the fakes' clock files */
    int ninst;
    double period_s, time_scale, t0;
    pthread_t th;
    pthread_mutex_t mu;
    int stop, running;
    size_t n, cap;
    double *t;               /* model seconds since t0 */
    double *mhz;             /* n x ninst */
    void (*tick)(void *ctx); /* called every tick_every samples (may be NULL) */
    void *ctx;
    int tick_every;
} demo_sampler;

int demo_sampler_start(demo_sampler *s);
void demo_sampler_stop(demo_sampler *s);
void demo_sampler_free(demo_sampler *s);

/* clocks.svg, ttft-cdf.svg and tbt-cdf.svg in dir: 0, or 1 (message). */
int demo_plots(const char *dir, const char *const *inst_names, const demo_sampler *clocks,
               demo_run *runs, const char *const *run_names, int nruns,
               const char *const *pool_names);

#endif
