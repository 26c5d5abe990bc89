/* load_server's shared declarations: bounds and deadlines, the generator's state, and the
 * functions its files give one another (bench/load_server/main.c says what the program does). */
#ifndef PRS_BENCH_LOAD_SERVER_H
#define PRS_BENCH_LOAD_SERVER_H

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "perseus/gpumodel.h"
#include "perseus/planner.h"

/* ---- bounds, deadlines ---- */

#define MAX_RANKS 65536
#define MAX_CONNECTIONS 4096
#define MAX_POLLERS 4096
#define MAX_CLOCKS 16
#define MAX_MICROBATCHES 64
#define MAX_ITERS 16            /* warm-up and measured iterations per clock, each */
#define DEADLINE_REGISTER_S 60  /* first registration -> last rank has a schedule */
#define DEADLINE_PROFILE_S 120  /* -> every rank sees planning or running */
#define DEADLINE_PLANNING_S 120 /* -> the job is running */
#define DEADLINE_DRAIN_S 30     /* poll phase: in-flight requests after the end */
#define DEADLINE_CHECK_S 60     /* straggler checks and completion */
#define REQUEST_TIMEOUT_MS 30000L
#define MAX_RESPONSE (64u << 20) /* bytes of one response body */
#define ERRORS_SHOWN 10          /* error lines printed per phase */

/* ---- growable text ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

/* ---- job phases as the server names them ---- */

enum { PH_REGISTERING, PH_PROFILING, PH_PLANNING, PH_RUNNING, PH_DONE, PH_FAILED, PH_UNKNOWN };
extern const char *const phase_names[];

/* ---- generator state ---- */

enum { M_GET, M_POST, M_DELETE };
enum { K_REGISTER, K_SCHEDULE, K_RESULTS, K_POLL, K_CHECK, K_CTL };
enum { R_REGISTER, R_SCHEDULE, R_RESULTS, R_PARKED, R_DONE };

typedef struct gen gen;

/* CPU time of this generator and of the server at one moment. */
typedef struct cpu_mark {
    double wall, gen, srv;
} cpu_mark;

typedef struct xfer {
    CURL *h;
    int kind, id; /* id: the rank, or the poller */
    int method;
    int busy, finished, counted;
    double t0, t1; /* handed to curl, completion seen */
    long status;
    CURLcode rc;
    buf body, resp;
    char path[160];
    char err[CURL_ERROR_SIZE];
} xfer;

typedef struct rank_st {
    int state;
    int have_schedule;   /* has had a schedule that is not "registering" */
    long long seen;      /* job_key it last saw (parked ranks wake when the job moves past it) */
    double wake_at;      /* parked: re-poll at the latest then */
    long round;          /* profiling round of the iterations to post */
    int todo;            /* iterations to post */
    long next_iteration; /* iteration number of its next iteration */
} rank_st;

typedef struct win_cache {
    int clock;
    double t, e;
    buf text;
} win_cache;

typedef struct errs {
    long http, transport, check;
    int shown;
} errs;

struct gen {
    /* configuration */
    int ranks, stages, dp, microbatches, ops, conns, pollers, threads;
    int clocks[MAX_CLOCKS], nclocks, warmup, iters;
    double poll_s, interval_s, poll_warm_s, wait_s, slowdown, watchdog_s;
    int upload; /* --upload-profile: no profiling, the job plans on an uploaded profile */
    prs_pipeline pipe;
    const prs_gpu_preset *gpu;
    /* server */
    pid_t pid;
    int port;
    char dir[64], job[64], token[128];
    /* curl */
    CURLM *multi;
    int epfd;
    double timer_at;                  /* curl's timeout; < 0: none */
    void (*on_done)(gen *g, xfer *x); /* given every finished transfer (ls_on_done) */
    struct curl_slist *hdr_plain, *hdr_auth;
    xfer *pool;
    int npool, inflight;
    xfer **free_x;
    int nfree;
    xfer ctl;
    /* ranks */
    rank_st *rk;
    int *clk; /* ranks x ops: clocks of the current profiling round */
    /* ranks ready to send, FIFO: [0] ranks that have no schedule yet, [1] the others (so
     * profiling traffic does not delay the first schedules: the simulated ranks share C
     * connections, where real ranks would each have their own) */
    struct {
        int *r, head, len;
    } q[2];
    int qlen;
    int *parked, nparked;
    double next_wake;
    long long key, key_at_scan;
    int nsched, ndone;
    win_cache *wc; /* stages x ops */
    /* phase bookkeeping */
    const char *phase;
    errs *err;
    errs e_reg, e_prof, e_plan, e_poll, e_strag, e_done;
    int aborted;
    double t_start;
    /* figures */
    double t_reg0, t_reg_last, t_sched_all, t_prof_done;
    cpu_mark cpu_reg0, cpu_reg1, cpu_prof1;
    long posts, iterations_posted, windows_posted, bytes_posted;
    long sched_requests, reg_sched_requests;
    int rounds_seen;
    /* straggler checks */
    long *expect_plan; /* per dp; -1: record */
    int *expect_strag;
    long mismatches;
    char first_mismatch[256];
    /* polls */
    double *lat;
    long nlat, cap_lat, poll_unexpected;
    /* idle pollers, a min-heap on when their next request is due */
    double *due_at;
    int *due_id, ndue;
};

/* The job's status once it runs (wait_running). */
typedef struct status_info {
    double planning_s;
    long points, fastest_plan;
    double fastest_time_s;
    long measurements;
    char source[32];
} status_info;

#define MAX_BUCKETS 32 /* of the server's latency histogram */

/* The poll phase's figures, and the server's schedule-latency histogram before and after it. */
typedef struct poll_figures {
    double measured_s, rate, gen_cpu, gen_user, gen_sys, srv_cpu;
    long requests;
    int nh0, nh1; /* buckets read before and after (0: none) */
    double le[MAX_BUCKETS];
    unsigned long long h0[MAX_BUCKETS], h1[MAX_BUCKETS];
} poll_figures;

/* The straggler phase's figures. */
typedef struct strag_figures {
    double t_prime, set_s, check_set_s, clear_s, check_clear_s;
    double server_set_s, server_clear_s; /* the server's own time (/metrics), -1: unknown */
    int switched;
    long base_plan, new_plan;
} strag_figures;

/* ---- util.c: clock, signals, memory, growable text, percentiles ---- */

extern volatile sig_atomic_t g_stop;  /* SIGINT/SIGTERM: stop at the next loop turn */
extern volatile sig_atomic_t g_child; /* the server's pid, for the last-resort alarm */
double ls_now_s(void);
void ls_on_stop(int sig);
void ls_on_alarm(int sig);
void ls_oom(void);
void *ls_xcalloc(size_t n, size_t size);
void ls_buf_add(buf *b, const char *s, size_t n);
void ls_buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ls_buf_clear(buf *b);
int ls_cmp_double(const void *a, const void *b);
double ls_pct(const double *v, long n, double p);

/* ---- errors.c: a phase's errors and deadlines ---- */

void ls_phase_begin(gen *g, const char *name, errs *e);
long ls_total_errors(const errs *e);
void ls_show_error(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ls_method_name(int m);
int ls_request_failed(gen *g, xfer *x);
void ls_check_failed(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ls_over_time(gen *g, double deadline, const char *what);
void ls_print_errs(const char *what, const errs *e);

/* ---- http.c: libcurl multi, epoll, the pool of easy handles, control requests ---- */

int ls_http_setup(gen *g);
void ls_http_cleanup(gen *g);
int ls_xfer_start(gen *g, xfer *x, int kind, int id, int method);
void ls_step(gen *g, double max_wait_s);
void ls_drain(gen *g, double max_s);
xfer *ls_pool_get(gen *g);
void ls_pool_put(gen *g, xfer *x);
long ls_ctl(gen *g, int method, const char *body, json_t **out, double deadline, const char *fmt,
            ...) __attribute__((format(printf, 6, 7)));

/* ---- server.c: perseusd's process, its CPU time and its /metrics ---- */

int ls_start_server(gen *g, const char *bin);
void ls_stop_server(gen *g);
double ls_cpu_s(const struct rusage *u);
double ls_server_cpu_s(pid_t pid);
void ls_cpu_mark_now(pid_t pid, cpu_mark *m);
void ls_print_cpu(const cpu_mark *a, const cpu_mark *b);
double ls_server_route_s(gen *g, const char *route);
int ls_server_hist(gen *g, double *le, unsigned long long *cum);
double ls_hist_quantile(int n, const double *le, const unsigned long long *a,
                        const unsigned long long *b, double q, unsigned long long *count);

/* ---- job.c: the job's phases, creation, profile upload, planning, completion ---- */

int ls_phase_index(const char *s);
long long ls_job_key(int phase, long long round);
int ls_json_phase(json_t *o);
long long ls_json_int(json_t *o, const char *key, long long dflt);
int ls_create_job(gen *g);
int ls_upload_profile(gen *g);
int ls_wait_running(gen *g, status_info *si);
int ls_complete_job(gen *g);

/* ---- ranks.c: the ranks' state machine (register, schedule, profiling) ---- */

void ls_on_done(gen *g, xfer *x);
int ls_run_ranks(gen *g);

/* ---- polls.c: the schedule polls ---- */

void ls_done_poll(gen *g, xfer *x);
int ls_poll_phase(gen *g, poll_figures *pf);

/* ---- straggler.c: a straggler reported and cleared, every schedule checked ---- */

void ls_done_check(gen *g, xfer *x, json_t *o);
int ls_run_straggler(gen *g, const status_info *si, strag_figures *sf);

/* ---- options.c: defaults and command-line options ---- */

int ls_parse_options(gen *g, int argc, char **argv, char *bin, size_t binsize);

/* ---- report.c: the figures each phase prints, and the verdict ---- */

void ls_report_header(const gen *g);
void ls_report_register(const gen *g);
void ls_report_profiling(const gen *g);
void ls_report_planning(const status_info *si, double t_plan0);
void ls_report_polls(const gen *g, const poll_figures *pf);
void ls_report_straggler(const gen *g, const strag_figures *sf, int sok);
int ls_report_result(const gen *g, int rc);

#endif
