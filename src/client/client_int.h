/* Internal to the client (src/client): the handle shared by the hooks (client.c, the training
 * thread) and the background thread (net.c). */
#ifndef PRS_CLIENT_INT_H
#define PRS_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "perseus/client.h"
#include "perseus/planner.h"
#include "devtime.h"

typedef struct prs__client_window {
    prs_instr instr;
    int microbatch;
    int chunk; /* model chunk = profile stage (global), -1: not known (no geometry) */
    int clock_mhz;
    double time_s, energy_j;
} prs__client_window;

/* One ended iteration waiting to be posted. */
typedef struct prs__client_iteration {
    long iteration;
    long round;
    long plan_id; /* plan it ran (running), -1 otherwise */
    double time_s, energy_j;
    double pace_s;           /* iteration start to the end of the last computation; 0: unknown */
    double wall_s;           /* host wall-clock time since the previous iteration ended; 0: none */
    double blocking_power_w; /* estimate of the GPU's blocked power; 0: unknown */
    int clock_mhz;
    double fit_rel_se;    /* profiling: largest standard error / power of its kinds' fit; 0: none */
    double fit_criterion; /* the fit_rel_se its round's fit aims for */
    int n_windows;        /* windows are kept only in the profiling phase */
    prs__client_window *windows;
} prs__client_iteration;

/* What the server says a rank should run (GET .../schedule). */
typedef struct prs__client_schedule {
    char phase[16];
    long round;
    long plan_id; /* -1: null */
    int quota;    /* profiling: iterations the round needs (warm-up + measured); 0: no limit */
    long from_iteration; /* running: the iteration from which this plan holds; -1: at once */
    int has_pipe;        /* the server sent the pipeline's geometry (pipe below is valid) */
    prs_pipeline pipe;
    int n;
    int *clocks; /* n entries, malloc'd */
} prs__client_schedule;

/* One computation of the current iteration (sync measurement: backend time and energy read at
 * begin and end). */
typedef struct prs__client_op {
    prs_instr instr;
    int microbatch, chunk;
    int clock_mhz; /* clock in effect (tag) */
    double t0, t1, e0, e1;
} prs__client_op;

/* The order the schedule expects of this rank's hooks in one iteration. */
typedef struct prs__client_expect {
    prs_instr instr;
    int microbatch, chunk; /* chunk: global model chunk */
} prs__client_expect;

struct prs_client {
    prs_client_opts opts; /* strings below point into this struct's own copies */
    char url[512], job_id[64], token[128], gpud_socket[108], ca_file[4096];
    char gpu_spec[128];   /* the spec the GPU was opened with ("nvml:GPU-..." when found by UUID) */
    char rank_who[96];    /* how the default spec chose the rank's GPU ("SLURM_LOCALID=3"); "" */
    int spec_from_stream; /* the default spec is the stream's device, by its CUDA UUID */
    prs_gpu *gpu;
    int own_gpu;
    prs_gpu *sampler_gpu; /* the sampler's own handle (stream mode, gpu opened from a spec) */
    prs_clockctl *ctl;
    struct prs__client_dev
        *dev;      /* device-stream measurement (devtime.h); NULL: read at the hooks */
    int f_max_mhz; /* tag of windows run at the default clock */
    int gpu_exact; /* the backend's time and energy are exact at every read (sim) */

    /* Training thread only. */
    prs__client_schedule cur;  /* the schedule this iteration runs */
    prs__client_schedule next; /* adopted, but holds only from next.from_iteration (n = 0: none) */
    long cur_version;
    prs__client_expect *expect; /* n_expect entries when cur.has_pipe, else NULL */
    int n_expect;
    int op; /* position of the next computation in the iteration */
    int in_window;
    int open_other;            /* the open window is other work (prs_client_other_begin) */
    double other_t0, other_e0; /* at the hooks: the open other window's start */
    double other_s, other_j;   /* at the hooks: this iteration's other work */
    prs_instr open_instr;      /* the computation the last begin opened */
    int open_microbatch, open_chunk;
    int bad_order; /* a hook of this iteration was out of order: no windows reported */
    prs__client_op *ops;
    int n_ops, cap_ops;
    int iter_started;
    int reset_clock; /* the job ended: the measurement path resets the clock */
    double iter_t0, iter_e0;
    double wall_end_s; /* host monotonic time the previous iteration ended (0: none yet) */
    long iter_no;
    long round_reported; /* iterations reported in the current schedule */

    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    prs__client_schedule latest; /* newest schedule from the server */
    atomic_long latest_version;
    prs__client_iteration *queue; /* ring of opts.max_queue; the bg thread pops, the hooks push */
    int q_head, q_len;
    int stop;
    prs_client_stats stats;
    /* The server refused the rank for good (registration answered 400, 401, 403, 404 or 409):
     * PRS_ESERVER and why, else 0 and "". Set by the bg thread; the hooks report it. */
    atomic_int refused; /* stored after refused_msg is written (release) */
    char refused_msg[PRS_ERRMSG_MAX];
    /* What prs_client_errmsg returns: the training thread's copy of the last error's words. */
    char errmsg[PRS_ERRMSG_MAX];
    atomic_long clock_failures;
    atomic_long order_errors;
    atomic_long late_switches;
    atomic_long measure_failures;
    atomic_int clock_mhz;
    /* Measure only (local.c): the windows reported, summed per kind (chunk * 2 + instr); under mu
     */
    prs_client_kind measured[2 * PRS_CLIENT_MAX_CHUNKS];
    double measured_j[2 * PRS_CLIENT_MAX_CHUNKS]; /* at the hooks: the windows' energy */
    double blocked_s, blocked_j; /* at the hooks: iterations with a blocking power, and it */

    pthread_t thread;
    int thread_started;
};

/* hooks.c: schedules, clocks and order, shared by the measurement paths */
/* One logfmt line on stderr: "ts=... level=LEVEL FMT..." (net.c). */
void prs__client_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void prs__client_expect_free(prs_client *c);
void prs__client_adopt_schedule(prs_client *c);
int prs__client_planned_clock(const prs_client *c);
int prs__client_check_order(prs_client *c, prs_instr instr, int microbatch, int chunk,
                            int *chunk_out);
int prs__client_check_end(prs_client *c, prs_instr instr, int microbatch, int chunk);
int prs__client_should_report(prs_client *c, double time_s, double energy_j);
int prs__client_phase_reports(const prs_client *c);
int prs__client_take_quota(prs_client *c, long round);
int prs__client_profiling(const prs_client *c);
void prs__client_enqueue(prs_client *c, prs__client_iteration *it, int report);

/* local.c: measure-only mode */
void prs__client_local_init(prs_client *c);
int prs__client_local_gpu(prs_client *c);
/* The SM clock now (MHz), -1 when it cannot be read. Training thread. */
int prs__client_local_clock(prs_client *c);
/* The clock a window run at the GPU's default clocks is tagged with: f_max on the exact
 * simulated GPU, else -1 (not known: a real GPU at its default clocks boosts, and under its power
 * limit runs well below f_max, so such a window makes no profile row). */
int prs__client_default_clock(const prs_client *c);
/* Measured at the hooks: add a reported iteration's windows (under c->mu). */
void prs__client_local_add(prs_client *c, const prs__client_iteration *it);
/* On a device stream: a computation of kind (chunk * 2 + instr) given to the fit, and the end of
 * an iteration given to it. */
void prs__client_local_count(prs_client *c, int kind, int clock_mhz, double time_s);
void prs__client_local_iteration(prs_client *c);

/* net.c */
void prs__client_global_init(void);
/* Create the job from opts.job_spec_json (blocking). Fills job_id and token. */
int prs__client_create_job(prs_client *c, prs_error *err);
void *prs__client_thread_main(void *arg);
/* PRS_ESERVER when the server refused the rank for good, with its words in c->errmsg (for
 * prs_client_errmsg); else 0. Training thread. */
int prs__client_refused(prs_client *c);
void prs__client_schedule_free(prs__client_schedule *s);
void prs__client_iteration_free(prs__client_iteration *it);

#endif
