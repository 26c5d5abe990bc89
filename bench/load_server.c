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
 * they connect to 127.0.0.0/8. Counts and times are bounded and every phase has a deadline. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "perseus/synth.h"

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile sig_atomic_t g_stop;  /* SIGINT/SIGTERM: stop at the next loop turn */
static volatile sig_atomic_t g_child; /* the server's pid, for the last-resort alarm */
static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "load_server: watchdog: the program did not stop in time; "
                              "killing perseusd\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do */
    }
    if (g_child > 0) kill((pid_t)g_child, SIGKILL);
    _exit(1);
}

static void oom(void)
{
    fputs("load_server: out of memory\n", stderr);
    if (g_child > 0) kill((pid_t)g_child, SIGTERM);
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom();
    return p;
}

/* ---- growable text ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void buf_reserve(buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) oom();
    b->p = p;
    b->cap = cap;
}

static void buf_add(buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf *b, const char *fmt, ...)
{
    for (;;) {
        buf_reserve(b, 64);
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) oom();
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        buf_reserve(b, (size_t)n);
    }
}

static void buf_clear(buf *b)
{
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

/* ---- job phases as the server names them ---- */

enum { PH_REGISTERING, PH_PROFILING, PH_PLANNING, PH_RUNNING, PH_DONE, PH_FAILED, PH_UNKNOWN };
static const char *const phase_names[] = {"registering", "profiling", "planning",
                                          "running",     "done",      "failed"};

static int phase_index(const char *s)
{
    for (int i = 0; s && i < PH_UNKNOWN; i++)
        if (strcmp(s, phase_names[i]) == 0) return i;
    return PH_UNKNOWN;
}

/* A point in the job's life: later phases, then later rounds, compare greater. */
static long long job_key(int phase, long long round)
{
    return (long long)phase * (1LL << 40) + round;
}

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
    double timer_at; /* curl's timeout; < 0: none */
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

static void phase_begin(gen *g, const char *name, errs *e)
{
    g->phase = name;
    g->err = e;
}

static long total_errors(const errs *e)
{
    return e->http + e->transport + e->check;
}

static void show_error(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void show_error(gen *g, const char *fmt, ...)
{
    if (g->err->shown > ERRORS_SHOWN) return;
    if (g->err->shown++ == ERRORS_SHOWN) {
        fprintf(stderr, "load_server: %s: further errors are counted, not shown\n", g->phase);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "load_server: %s: ", g->phase);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *method_name(int m)
{
    return m == M_POST ? "POST" : m == M_DELETE ? "DELETE" : "GET";
}

/* Count and show a failed request; 1 if x failed (transport error or status not 2xx). */
static int request_failed(gen *g, xfer *x)
{
    if (x->rc != CURLE_OK) {
        g->err->transport++;
        show_error(g, "%s %s: %s", method_name(x->method), x->path,
                   x->err[0] ? x->err : curl_easy_strerror(x->rc));
        return 1;
    }
    if (x->status < 200 || x->status > 299) {
        g->err->http++;
        show_error(g, "%s %s: HTTP %ld %.300s", method_name(x->method), x->path, x->status,
                   x->resp.p ? x->resp.p : "");
        return 1;
    }
    return 0;
}

static void check_failed(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_failed(gen *g, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g->err->check++;
    show_error(g, "%s", msg);
}

/* ---- curl plumbing: one multi handle, epoll, curl's socket interface ---- */

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (x->resp.len + len > MAX_RESPONSE) return 0; /* aborts the transfer: a transport error */
    buf_add(&x->resp, ptr, len);
    return len;
}

/* Refuse every socket that would not connect to 127.0.0.0/8. */
static curl_socket_t open_loopback(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)ud;
    if (purpose == CURLSOCKTYPE_IPCXN && a->family == AF_INET &&
        a->addrlen >= (unsigned)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)&a->addr;
        if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
            return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    }
    fputs("load_server: refused a connection to an address that is not loopback\n", stderr);
    return CURL_SOCKET_BAD;
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *ud, void *sockp)
{
    (void)e;
    gen *g = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, s, NULL); /* may already be closed: ignore */
        curl_multi_assign(g->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    if (what & CURL_POLL_IN) ev.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) ev.events |= EPOLLOUT;
    ev.data.fd = s;
    if (!sockp) {
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(g->multi, s, g); /* any non-NULL pointer: "in the epoll set" */
    } else if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
}

static int on_timer(CURLM *m, long ms, void *ud)
{
    (void)m;
    gen *g = ud;
    g->timer_at = ms < 0 ? -1 : now_s() + (double)ms / 1e3;
    return 0;
}

static int xfer_init(xfer *x)
{
    memset(x, 0, sizeof *x);
    x->h = curl_easy_init();
    if (!x->h) return -1;
    CURL *h = x->h;
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->err) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_loopback) != CURLE_OK;
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK;
#else
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTP) != CURLE_OK;
#endif
    return bad ? -1 : 0;
}

static void xfer_free(gen *g, xfer *x)
{
    if (!x->h) return;
    if (x->busy) curl_multi_remove_handle(g->multi, x->h);
    curl_easy_cleanup(x->h);
    free(x->body.p);
    free(x->resp.p);
    memset(x, 0, sizeof *x);
}

/* Hand a request to curl. path starts with '/'; the body (POST) is x->body. */
static int xfer_start(gen *g, xfer *x, int kind, int id, int method)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g->port, x->path);
    CURL *h = x->h;
    int bad = curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, g->hdr_auth ? g->hdr_auth : g->hdr_plain) !=
           CURLE_OK;
    if (method == M_POST) {
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, (char *)NULL) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)x->body.len) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body.p ? x->body.p : "") != CURLE_OK;
    } else {
        bad |= curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                                method == M_DELETE ? "DELETE" : (char *)NULL) != CURLE_OK;
    }
    if (bad) {
        fputs("load_server: curl refused a request option\n", stderr);
        return -1;
    }
    x->kind = kind;
    x->id = id;
    x->method = method;
    x->finished = 0;
    x->status = 0;
    x->rc = CURLE_OK;
    x->err[0] = '\0';
    buf_clear(&x->resp);
    x->t0 = now_s();
    if (curl_multi_add_handle(g->multi, h) != CURLM_OK) {
        fputs("load_server: curl_multi_add_handle failed\n", stderr);
        return -1;
    }
    x->busy = 1;
    g->inflight++;
    return 0;
}

static void on_done(gen *g, xfer *x);

/* Hand every finished transfer to on_done. Called after each socket action, so a completion is
 * timed when curl finishes it, not after the rest of the epoll batch. */
static void collect(gen *g)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(g->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        char *priv = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        xfer *x = (xfer *)(void *)priv;
        x->rc = m->data.result;
        x->t1 = now_s();
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
        curl_multi_remove_handle(g->multi, x->h);
        x->busy = 0;
        x->finished = 1;
        g->inflight--;
        on_done(g, x);
    }
}

/* One turn of the loop: wait up to max_wait_s for sockets or curl's timer and let curl work. */
static void step(gen *g, double max_wait_s)
{
    double t = now_s(), wait = max_wait_s;
    if (g->timer_at >= 0 && g->timer_at - t < wait) wait = g->timer_at - t;
    int ms = wait <= 0 ? 0 : (int)ceil(wait * 1e3);
    struct epoll_event ev[512];
    int n = epoll_wait(g->epfd, ev, 512, ms);
    int running = 0;
    for (int i = 0; i < n; i++) {
        int flags = ((ev[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                    ((ev[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                    ((ev[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(g->multi, ev[i].data.fd, flags, &running);
        collect(g);
    }
    if (g->timer_at >= 0 && now_s() >= g->timer_at) {
        g->timer_at = -1;
        curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        collect(g);
    }
}

/* A deadline passed, or the user stopped us: say which and fail the phase. */
static int over_time(gen *g, double deadline, const char *what)
{
    double t = now_s();
    if (g_stop) {
        fprintf(stderr, "load_server: %s: interrupted\n", g->phase);
        return 1;
    }
    if (t > g->t_start + g->watchdog_s) {
        fprintf(stderr, "load_server: %s: watchdog: the whole run is over %.0f s\n", g->phase,
                g->watchdog_s);
        return 1;
    }
    if (t > deadline) {
        fprintf(stderr, "load_server: %s: deadline: %s\n", g->phase, what);
        return 1;
    }
    return 0;
}

static double cpu_s(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + 1e-6 * (double)u->ru_utime.tv_usec +
           (double)u->ru_stime.tv_sec + 1e-6 * (double)u->ru_stime.tv_usec;
}

/* CPU seconds (user + system) the server has used so far; NAN when unknown. */
static double server_cpu_s(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')'); /* the command name may hold spaces */
    unsigned long ut, st;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void cpu_mark_now(pid_t pid, cpu_mark *m)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    m->gen = cpu_s(&u);
    m->srv = server_cpu_s(pid);
    m->wall = now_s();
}

/* "generator X%, perseusd Y%" of one core between two marks. */
static void print_cpu(const cpu_mark *a, const cpu_mark *b)
{
    double w = b->wall - a->wall;
    if (w <= 0) return;
    printf("cpu: generator %.0f%%, perseusd %.0f%% of a core", 100 * (b->gen - a->gen) / w,
           100 * (b->srv - a->srv) / w);
}

/* ---- control requests (one at a time, through the same multi handle) ---- */

/* Run one request to completion. Returns the HTTP status (after counting and showing a failure)
 * or -1 on a transport error, deadline or interruption. *out gets the parsed JSON body of a 2xx
 * answer (NULL if it is not JSON). */
static long ctl(gen *g, int method, const char *body, json_t **out, double deadline,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static long ctl(gen *g, int method, const char *body, json_t **out, double deadline,
                const char *fmt, ...)
{
    xfer *x = &g->ctl;
    if (out) *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->path, sizeof x->path, fmt, ap);
    va_end(ap);
    buf_clear(&x->body);
    if (body) buf_add(&x->body, body, strlen(body));
    if (xfer_start(g, x, K_CTL, 0, method)) return -1;
    while (!x->finished) {
        if (over_time(g, deadline, "no answer to a control request")) {
            g->err->transport++;
            return -1;
        }
        step(g, 0.05);
    }
    if (request_failed(g, x)) return x->rc != CURLE_OK ? -1 : x->status;
    if (out) {
        *out = json_loadb(x->resp.p ? x->resp.p : "", x->resp.len, 0, NULL);
        if (!*out) check_failed(g, "%s %s: the answer is not JSON", method_name(method), x->path);
    }
    return x->status;
}

/* ---- pool of easy handles for the ranks ---- */

static xfer *pool_get(gen *g)
{
    return g->nfree ? g->free_x[--g->nfree] : NULL;
}

static void pool_put(gen *g, xfer *x)
{
    g->free_x[g->nfree++] = x;
}

static void enqueue(gen *g, int r)
{
    int lo = g->rk[r].have_schedule;
    g->q[lo].r[(g->q[lo].head + g->q[lo].len) % g->ranks] = r;
    g->q[lo].len++;
    g->qlen++;
}

static int dequeue(gen *g)
{
    int lo = g->q[0].len == 0;
    int r = g->q[lo].r[g->q[lo].head];
    g->q[lo].head = (g->q[lo].head + 1) % g->ranks;
    g->q[lo].len--;
    g->qlen--;
    return r;
}

static void park(gen *g, int r, long long seen)
{
    rank_st *k = &g->rk[r];
    if (seen < g->key) { /* an answer that crossed ours shows the job moved on already */
        k->state = R_SCHEDULE;
        enqueue(g, r);
        return;
    }
    k->state = R_PARKED;
    k->seen = seen;
    k->wake_at = now_s() + g->wait_s;
    if (k->wake_at < g->next_wake) g->next_wake = k->wake_at;
    g->parked[g->nparked++] = r;
}

static void note_key(gen *g, long long key)
{
    if (key > g->key) g->key = key;
}

/* Parked ranks re-poll their schedule when any answer showed that the job moved on (as they
 * would at their next iteration boundary), or after --wait-ms at the latest. */
static void wake_parked(gen *g)
{
    double t = now_s();
    if (!g->nparked || (g->key == g->key_at_scan && t < g->next_wake)) return;
    g->key_at_scan = g->key;
    g->next_wake = INFINITY;
    int keep = 0;
    for (int i = 0; i < g->nparked; i++) {
        int r = g->parked[i];
        rank_st *k = &g->rk[r];
        if (k->seen < g->key || t >= k->wake_at) {
            k->state = R_SCHEDULE;
            enqueue(g, r);
        } else {
            g->parked[keep++] = r;
            if (k->wake_at < g->next_wake) g->next_wake = k->wake_at;
        }
    }
    g->nparked = keep;
}

/* ---- results from the simulated GPU ---- */

/* Window of computation op of stage pp at clock mhz: the model's time and energy, and its JSON
 * text (cached: every rank of a stage runs the same computations at the same clocks). */
static const win_cache *window(gen *g, int pp, int op, int mhz)
{
    win_cache *c = &g->wc[pp * g->ops + op];
    if (c->text.len && c->clock == mhz) return c;
    prs_instr in = PRS_FORWARD;
    int mb = 0;
    prs_op_describe(&g->pipe, pp, op, &in, &mb);
    prs_gpu_work w = g->gpu->work[in];
    /* The last stage also runs the LM head and the loss (gpumodel.h). */
    if (g->stages > 1 && pp == g->stages - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
    c->clock = mhz;
    c->t = prs_gpu_time_s(g->gpu, &w, mhz);
    c->e = prs_gpu_energy_j(g->gpu, &w, mhz);
    buf_clear(&c->text);
    buf_printf(&c->text,
               "{\"instruction\":\"%s\",\"microbatch\":%d,\"clock_mhz\":%d,\"time_s\":%.9g,"
               "\"energy_j\":%.9g}",
               prs_instr_name(in), mb, mhz, c->t, c->e);
    return c;
}

/* The body of rank r's post: its k->todo iterations of round k->round at its schedule's clocks. */
static void build_results(gen *g, int r, buf *b)
{
    rank_st *k = &g->rk[r];
    const int *clocks = g->clk + (size_t)r * (size_t)g->ops;
    int pp = r % g->stages;
    buf_clear(b);
    buf_printf(b, "{\"rank\":%d,\"round\":%ld,\"iterations\":[", r, k->round);
    for (int it = 0; it < k->todo; it++) {
        double t = 0, e = 0;
        for (int op = 0; op < g->ops; op++) {
            const win_cache *c = window(g, pp, op, clocks[op]);
            t += c->t;
            e += c->e;
        }
        buf_printf(b,
                   "%s{\"iteration\":%ld,\"time_s\":%.9g,\"energy_j\":%.9g,\"clock_mhz\":%d,"
                   "\"windows\":[",
                   it ? "," : "", k->next_iteration++, t, e, clocks[0]);
        for (int op = 0; op < g->ops; op++) {
            const win_cache *c = window(g, pp, op, clocks[op]);
            if (op) buf_add(b, ",", 1);
            buf_add(b, c->text.p, c->text.len);
        }
        buf_add(b, "]}", 2);
    }
    buf_add(b, "]}", 2);
    g->posts++;
    g->iterations_posted += k->todo;
    g->windows_posted += (long)k->todo * g->ops;
    g->bytes_posted += (long)b->len;
}

/* ---- the ranks' state machine (register, schedule, profiling) ---- */

static int start_rank(gen *g, xfer *x, int r)
{
    rank_st *k = &g->rk[r];
    switch (k->state) {
    case R_REGISTER:
        if (g->t_reg0 == 0) g->t_reg0 = now_s();
        buf_clear(&x->body);
        buf_printf(&x->body, "{\"rank\":%d,\"dp\":%d,\"pp\":%d,\"gpu\":\"simulated %s\"}", r,
                   r / g->stages, r % g->stages, g->gpu->name);
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/ranks", g->job);
        return xfer_start(g, x, K_REGISTER, r, M_POST);
    case R_SCHEDULE:
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, r);
        g->sched_requests++;
        return xfer_start(g, x, K_SCHEDULE, r, M_GET);
    case R_RESULTS:
        build_results(g, r, &x->body);
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/results", g->job);
        return xfer_start(g, x, K_RESULTS, r, M_POST);
    default:
        return -1;
    }
}

static int json_phase(json_t *o)
{
    return phase_index(json_string_value(json_object_get(o, "phase")));
}

static long long json_int(json_t *o, const char *key, long long dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static void rank_failed(gen *g)
{
    g->aborted = 1; /* the job cannot move on without this rank */
}

static void done_register(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    int ph = json_phase(o);
    if (ph != PH_REGISTERING && ph != PH_PROFILING && ph != PH_PLANNING && ph != PH_RUNNING) {
        check_failed(g, "rank %d registered, but the job is %s", r,
                     ph == PH_UNKNOWN ? "in no known phase" : phase_names[ph]);
        rank_failed(g);
        return;
    }
    note_key(g, job_key(ph, 0));
    if (x->t1 > g->t_reg_last) g->t_reg_last = x->t1;
    g->rk[r].state = R_SCHEDULE;
    enqueue(g, r);
}

static void done_schedule(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    rank_st *k = &g->rk[r];
    int ph = json_phase(o);
    long long round = json_int(o, "round", -1);
    if (ph == PH_UNKNOWN || round < 0) {
        check_failed(g, "rank %d: schedule without a known phase and round: %.200s", r, x->resp.p);
        rank_failed(g);
        return;
    }
    note_key(g, job_key(ph, round));
    if (ph == PH_REGISTERING) {
        park(g, r, job_key(ph, round));
        return;
    }
    if (!k->have_schedule) {
        k->have_schedule = 1;
        if (++g->nsched == g->ranks) g->t_sched_all = x->t1;
    }
    if (ph == PH_PLANNING || ph == PH_RUNNING) {
        k->state = R_DONE;
        g->ndone++;
        return;
    }
    if (ph != PH_PROFILING) {
        check_failed(g, "rank %d: the job is %s during profiling", r, phase_names[ph]);
        rank_failed(g);
        return;
    }
    long long total = json_int(o, "iterations", -1),
              reported = json_int(o, "iterations_reported", -1);
    json_t *cl = json_object_get(o, "clocks_mhz");
    if (total < 1 || total > 2LL * MAX_ITERS || reported < 0 || !json_is_array(cl) ||
        json_array_size(cl) != (size_t)g->ops) {
        check_failed(g,
                     "rank %d: a profiling schedule without iterations, iterations_reported "
                     "or %d clocks: %.200s",
                     r, g->ops, x->resp.p);
        rank_failed(g);
        return;
    }
    if (round + 1 > g->rounds_seen) g->rounds_seen = (int)round + 1;
    if (reported >= total) { /* its part of this round is in: wait for the others */
        park(g, r, job_key(ph, round));
        return;
    }
    int *clocks = g->clk + (size_t)r * (size_t)g->ops;
    for (int i = 0; i < g->ops; i++) {
        json_t *v = json_array_get(cl, (size_t)i);
        long long f = json_is_integer(v) ? (long long)json_integer_value(v) : 0;
        if (f < 1 || f > 100000) {
            check_failed(g, "rank %d: clocks_mhz[%d] is not a clock", r, i);
            rank_failed(g);
            return;
        }
        clocks[i] = (int)f;
    }
    k->round = (long)round;
    k->todo = (int)(total - reported);
    k->state = R_RESULTS;
    enqueue(g, r);
}

static void done_results(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    rank_st *k = &g->rk[r];
    int ph = json_phase(o);
    long long round = json_int(o, "round", -1);
    if (ph == PH_UNKNOWN || round < 0 || json_int(o, "accepted", -1) != k->todo) {
        check_failed(g, "rank %d: results answer without phase, round or the %d accepted: %.200s",
                     r, k->todo, x->resp.p);
        rank_failed(g);
        return;
    }
    note_key(g, job_key(ph, round));
    if (ph == PH_PROFILING && round == k->round) {
        park(g, r, job_key(ph, round));
    } else { /* the job moved on: ask what now */
        k->state = R_SCHEDULE;
        enqueue(g, r);
    }
}

/* ---- schedule checks (straggler phase) ---- */

static void done_check(gen *g, xfer *x, json_t *o)
{
    int r = x->id, dp = r / g->stages;
    json_t *pid = json_object_get(o, "plan_id"), *st = json_object_get(o, "straggler");
    if (json_phase(o) != PH_RUNNING || !json_is_integer(pid) || !json_is_boolean(st)) {
        check_failed(g, "rank %d: not a running schedule: %.200s", r, x->resp.p);
        return;
    }
    long plan = (long)json_integer_value(pid);
    int strag = json_is_true(st);
    if (g->expect_plan[dp] < 0) { /* recording: every rank of a pipeline must agree */
        g->expect_plan[dp] = plan;
        g->expect_strag[dp] = strag;
    }
    if (plan != g->expect_plan[dp] || strag != g->expect_strag[dp]) {
        if (!g->mismatches++)
            snprintf(g->first_mismatch, sizeof g->first_mismatch,
                     "rank %d (dp %d): plan %ld straggler %s, expected plan %ld straggler %s", r,
                     dp, plan, strag ? "true" : "false", g->expect_plan[dp],
                     g->expect_strag[dp] ? "true" : "false");
    }
}

/* ---- polls ---- */

static void record_latency(gen *g, double secs)
{
    if (g->nlat == g->cap_lat) {
        long cap = g->cap_lat ? 2 * g->cap_lat : 1L << 16;
        double *p = realloc(g->lat, sizeof *p * (size_t)cap);
        if (!p) oom();
        g->lat = p;
        g->cap_lat = cap;
    }
    g->lat[g->nlat++] = secs;
}

static void due_push(gen *g, double t, int id)
{
    int i = g->ndue++;
    while (i > 0 && g->due_at[(i - 1) / 2] > t) {
        g->due_at[i] = g->due_at[(i - 1) / 2];
        g->due_id[i] = g->due_id[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g->due_at[i] = t;
    g->due_id[i] = id;
}

static int due_pop(gen *g)
{
    int top = g->due_id[0];
    double t = g->due_at[--g->ndue];
    int id = g->due_id[g->ndue], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= g->ndue) break;
        if (c + 1 < g->ndue && g->due_at[c + 1] < g->due_at[c]) c++;
        if (g->due_at[c] >= t) break;
        g->due_at[i] = g->due_at[c];
        g->due_id[i] = g->due_id[c];
        i = c;
    }
    g->due_at[i] = t;
    g->due_id[i] = id;
    return top;
}

static void done_poll(gen *g, xfer *x)
{
    int failed = request_failed(g, x);
    /* Back to back: due again now; paced: one interval after this request was handed over. */
    if (g->due_at) due_push(g, x->t0 + g->interval_s, x->id);
    if (!x->counted) return;
    record_latency(g, x->t1 - x->t0);
    /* Cheap check only (this is the measured loop): the answer is a running schedule. */
    if (!failed && !(x->resp.p && strstr(x->resp.p, "\"phase\":\"running\""))) {
        if (!g->poll_unexpected++)
            show_error(g, "unexpected schedule: %.200s", x->resp.p ? x->resp.p : "");
    }
}

static void on_done(gen *g, xfer *x)
{
    if (x->kind == K_CTL) return; /* ctl() reads it */
    if (x->kind == K_POLL) {
        done_poll(g, x);
        return;
    }
    json_t *o = NULL;
    if (!request_failed(g, x)) {
        o = json_loadb(x->resp.p ? x->resp.p : "", x->resp.len, 0, NULL);
        if (!o) check_failed(g, "%s %s: the answer is not JSON", method_name(x->method), x->path);
    }
    if (!o) {
        if (x->kind != K_CHECK) rank_failed(g);
    } else if (x->kind == K_REGISTER) {
        done_register(g, x, o);
    } else if (x->kind == K_SCHEDULE) {
        done_schedule(g, x, o);
    } else if (x->kind == K_RESULTS) {
        done_results(g, x, o);
    } else {
        done_check(g, x, o);
    }
    json_decref(o);
    pool_put(g, x);
}

/* Hand queued ranks to free easy handles. */
static int pump(gen *g)
{
    while (g->qlen) {
        xfer *x = pool_get(g);
        if (!x) return 0;
        int r = dequeue(g);
        if (start_rank(g, x, r)) {
            pool_put(g, x);
            return -1;
        }
    }
    return 0;
}

/* Wait for every transfer in flight (after a failure: so no handle is left in the multi). */
static void drain(gen *g, double max_s)
{
    double end = now_s() + max_s;
    while (g->inflight > (g->ctl.busy ? 1 : 0) && now_s() < end)
        step(g, 0.05);
}

/* ---- phases ---- */

static int create_job(gen *g)
{
    buf b = {0};
    buf_printf(
        &b, "{\"stages\":%d,\"microbatches\":%d,\"dp\":%d,\"schedule\":\"1f1b\",\"clocks_mhz\":[",
        g->stages, g->microbatches, g->dp);
    for (int i = 0; i < g->nclocks; i++)
        buf_printf(&b, "%s%d", i ? "," : "", g->clocks[i]);
    buf_printf(&b,
               "],\"profiling\":{\"warmup_iterations\":%d,\"iterations_per_clock\":%d},"
               "\"blocking_power_w\":%.9g,\"reuse_frontier\":false}",
               g->warmup, g->iters, g->gpu->blocking_power_w);
    json_t *o;
    long st = ctl(g, M_POST, b.p, &o, now_s() + DEADLINE_CHECK_S, "/v1/jobs");
    free(b.p);
    if (st != 201 || !o) {
        if (st > 0 && st != 201 && st >= 200 && st < 300)
            check_failed(g, "POST /v1/jobs: status %ld, expected 201", st);
        json_decref(o);
        return -1;
    }
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *tok = json_string_value(json_object_get(o, "token"));
    if (!id || !tok || strlen(id) >= sizeof g->job || strlen(tok) >= sizeof g->token ||
        json_phase(o) != PH_REGISTERING) {
        check_failed(g, "POST /v1/jobs: unexpected answer %.200s", g->ctl.resp.p);
        json_decref(o);
        return -1;
    }
    snprintf(g->job, sizeof g->job, "%s", id);
    snprintf(g->token, sizeof g->token, "%s", tok);
    json_decref(o);
    char auth[200];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", g->token);
    g->hdr_auth = curl_slist_append(NULL, auth);
    if (!g->hdr_auth) oom();
    g->hdr_auth = curl_slist_append(g->hdr_auth, "Content-Type: application/json");
    g->hdr_auth = curl_slist_append(g->hdr_auth, "Expect:");
    if (!g->hdr_auth) oom();
    return 0;
}

/* --upload-profile: the job's profile from the simulated GPU at the job's clocks (the server
 * refuses rows at other clocks), as the ranks would measure it (window()), uploaded before any
 * rank registers, so the job plans at once and skips profiling. */
static int upload_profile(gen *g)
{
    buf b = {0};
    buf_printf(&b, "stage,instruction,frequency,time,energy\n");
    for (int s = 0; s < g->stages; s++)
        for (int c = 0; c < g->nclocks; c++)
            for (int in = 0; in < 2; in++) {
                prs_gpu_work w = g->gpu->work[in];
                if (g->stages > 1 && s == g->stages - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
                buf_printf(&b, "%d,%s,%d,%.9g,%.9g\n", s, prs_instr_name((prs_instr)in),
                           g->clocks[c], prs_gpu_time_s(g->gpu, &w, g->clocks[c]),
                           prs_gpu_energy_j(g->gpu, &w, g->clocks[c]));
            }
    json_t *o;
    long st = ctl(g, M_POST, b.p, &o, now_s() + DEADLINE_CHECK_S, "/v1/jobs/%s/profile", g->job);
    free(b.p);
    json_decref(o);
    if (st != 200) {
        check_failed(g, "POST profile: status %ld: %.200s", st, g->ctl.resp.p);
        return -1;
    }
    return 0;
}

/* The server's own total time answering a route, from its /metrics (seconds; -1: no answer). */
static double server_route_s(gen *g, const char *route)
{
    if (ctl(g, M_GET, NULL, NULL, now_s() + DEADLINE_CHECK_S, "/metrics") != 200) return -1;
    char key[128];
    snprintf(key, sizeof key, "perseusd_http_request_duration_seconds_sum{route=\"%s\"} ", route);
    const char *at = g->ctl.resp.p ? strstr(g->ctl.resp.p, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : 0; /* a route not used yet has no series */
}

/* The registration target: 8,192 ranks in 10 s, up to 65,536 in 15 s. */
static double reg_target_s(const gen *g)
{
    return g->ranks <= 8192 ? 10 : 15;
}

/* Register every rank, get its schedule, profile until the job plans. */
static int run_ranks(gen *g)
{
    for (int r = 0; r < g->ranks; r++) {
        g->rk[r].state = R_REGISTER;
        enqueue(g, r);
    }
    g->next_wake = INFINITY;
    phase_begin(g, "register", &g->e_reg);
    cpu_mark_now(g->pid, &g->cpu_reg0);
    double reg_deadline = now_s() + DEADLINE_REGISTER_S;
    double prof_deadline = 0;
    while (g->ndone < g->ranks) {
        if (g->aborted) break;
        if (g->nsched == g->ranks && !prof_deadline) {
            prof_deadline = now_s() + DEADLINE_PROFILE_S;
            cpu_mark_now(g->pid, &g->cpu_reg1);
            g->reg_sched_requests = g->sched_requests;
            phase_begin(g, "profiling", &g->e_prof);
        }
        if (!prof_deadline ? over_time(g, reg_deadline, "not every rank has a schedule after 60 s")
                           : over_time(g, prof_deadline, "profiling is not over after 120 s")) {
            fprintf(stderr,
                    "load_server: %d of %d ranks have a schedule, %d are past profiling (%d "
                    "waiting, %d queued, %d requests in flight)\n",
                    g->nsched, g->ranks, g->ndone, g->nparked, g->qlen, g->inflight);
            g->aborted = 1;
            break;
        }
        wake_parked(g);
        if (pump(g)) {
            g->aborted = 1;
            break;
        }
        double wait = 0.05;
        if (g->nparked && g->next_wake - now_s() < wait) wait = g->next_wake - now_s();
        step(g, wait);
    }
    if (g->aborted) {
        drain(g, 5);
        return -1;
    }
    if (!prof_deadline) { /* every rank went past registration at once (an uploaded profile) */
        cpu_mark_now(g->pid, &g->cpu_reg1);
        g->reg_sched_requests = g->sched_requests;
    }
    g->t_prof_done = now_s();
    cpu_mark_now(g->pid, &g->cpu_prof1);
    return 0;
}

typedef struct status_info {
    double planning_s;
    long points, fastest_plan;
    double fastest_time_s;
    long measurements;
    char source[32];
} status_info;

static int wait_running(gen *g, status_info *si)
{
    phase_begin(g, "planning", &g->e_plan);
    double deadline = now_s() + DEADLINE_PLANNING_S;
    for (;;) {
        json_t *o;
        long st = ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s", g->job);
        if (st != 200 || !o) {
            json_decref(o);
            return -1;
        }
        int ph = json_phase(o);
        if (ph == PH_RUNNING) {
            json_t *pl = json_object_get(o, "planning"), *fr = json_object_get(o, "frontier");
            json_t *fa = json_object_get(fr, "fastest");
            json_t *sec = json_object_get(pl, "elapsed_s"), *ft = json_object_get(fa, "time_s");
            si->planning_s = json_is_number(sec) ? json_number_value(sec) : NAN;
            si->points = (long)json_int(fr, "points", -1);
            si->fastest_plan = (long)json_int(fa, "plan_id", -1);
            si->fastest_time_s = json_is_number(ft) ? json_number_value(ft) : NAN;
            si->measurements = (long)json_int(o, "measurements", -1);
            const char *src = json_string_value(json_object_get(o, "profile_source"));
            snprintf(si->source, sizeof si->source, "%s", src ? src : "?");
            json_decref(o);
            if (!(si->fastest_time_s > 0) || si->fastest_plan < 0 || si->points < 1) {
                check_failed(g, "running, but the status has no fastest plan: %.200s",
                             g->ctl.resp.p);
                return -1;
            }
            return 0;
        }
        if (ph != PH_PLANNING && ph != PH_PROFILING) {
            const char *why = json_string_value(json_object_get(o, "reason"));
            check_failed(g, "the job is %s instead of planning or running%s%s",
                         ph == PH_UNKNOWN ? "in no known phase" : phase_names[ph], why ? ": " : "",
                         why ? why : "");
            json_decref(o);
            return -1;
        }
        json_decref(o);
        double until = now_s() + 0.05;
        while (now_s() < until) {
            if (over_time(g, deadline, "the job is not running after 120 s")) return -1;
            step(g, until - now_s());
        }
    }
}

typedef struct poll_figures {
    double measured_s, rate, gen_cpu, gen_user, gen_sys, srv_cpu;
    long requests;
} poll_figures;

/* The server's own latency histogram of schedule requests (GET /metrics): cumulative counts per
 * bucket bound. Returns the number of buckets read (0 on failure). */
#define MAX_BUCKETS 32
static int server_hist(gen *g, double *le, unsigned long long *cum)
{
    if (ctl(g, M_GET, NULL, NULL, now_s() + DEADLINE_CHECK_S, "/metrics") != 200) return 0;
    const char *key = "perseusd_http_request_duration_seconds_bucket{route=\"schedule\",le=\"";
    int n = 0;
    for (const char *p = g->ctl.resp.p; p && n < MAX_BUCKETS && (p = strstr(p, key));) {
        p += strlen(key);
        char *end;
        le[n] = strncmp(p, "+Inf", 4) == 0 ? INFINITY : strtod(p, &end);
        const char *v = strstr(p, "} ");
        if (!v) break;
        cum[n++] = strtoull(v + 2, NULL, 10);
        p = v;
    }
    return n;
}

/* Smallest bucket bound under which a fraction q of the requests between two histograms fall. */
static double hist_quantile(int n, const double *le, const unsigned long long *a,
                            const unsigned long long *b, double q, unsigned long long *count)
{
    *count = n ? b[n - 1] - a[n - 1] : 0;
    for (int i = 0; i < n; i++)
        if ((double)(b[i] - a[i]) >= q * (double)*count) return le[i];
    return INFINITY;
}

static int run_polls(gen *g, poll_figures *pf)
{
    phase_begin(g, "poll", &g->e_poll);
    int P = g->pollers;
    int *next_rank = xcalloc((size_t)P, sizeof *next_rank);
    g->due_at = xcalloc((size_t)P, sizeof *g->due_at);
    g->due_id = xcalloc((size_t)P, sizeof *g->due_id);
    g->ndue = 0;
    double t0 = now_s(), tw = t0 + g->poll_warm_s, tend = tw + g->poll_s;
    for (int i = 0; i < P; i++) {
        next_rank[i] = i;
        /* Paced pollers start spread over one interval, as ranks ending iterations would. */
        due_push(g, t0 + g->interval_s * (double)i / (double)P, i);
    }
    struct rusage u0, u1;
    double s0 = NAN, s1 = NAN, tm0 = 0, tm1 = 0;
    int measuring = 0, rc = 0;
    memset(&u0, 0, sizeof u0);
    memset(&u1, 0, sizeof u1);
    for (;;) {
        double t = now_s();
        if (!measuring && t >= tw) {
            measuring = 1;
            getrusage(RUSAGE_SELF, &u0);
            s0 = server_cpu_s(g->pid);
            tm0 = now_s();
        }
        if (measuring == 1 && t >= tend) {
            measuring = 2;
            getrusage(RUSAGE_SELF, &u1);
            s1 = server_cpu_s(g->pid);
            tm1 = now_s();
        }
        while (t < tend && g->ndue && g->due_at[0] <= t) {
            int i = due_pop(g);
            xfer *x = &g->pool[i];
            int r = next_rank[i];
            next_rank[i] = r + P < g->ranks ? r + P : i; /* poller i owns the ranks i mod P */
            snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, r);
            if (xfer_start(g, x, K_POLL, i, M_GET)) {
                rc = -1;
                break;
            }
            x->counted = x->t0 >= tw;
        }
        if (rc) break;
        if (t >= tend && g->inflight == 0) break;
        if (over_time(g, tend + DEADLINE_DRAIN_S,
                      "poll requests still unanswered 30 s after the end")) {
            rc = -1;
            break;
        }
        double wait = 0.05;
        if (!measuring && tw - t < wait) wait = tw - t;
        if (measuring == 1 && tend - t < wait) wait = tend - t;
        if (t < tend && g->ndue && g->due_at[0] - t < wait) wait = g->due_at[0] - t;
        step(g, wait); /* finished pollers go back on the heap */
    }
    if (rc) drain(g, 5);
    free(next_rank);
    free(g->due_at);
    free(g->due_id);
    g->due_at = NULL;
    g->due_id = NULL;
    if (rc) return -1;
    pf->measured_s = tm1 - tm0;
    pf->requests = g->nlat;
    pf->rate = pf->measured_s > 0 ? (double)g->nlat / pf->measured_s : 0;
    pf->gen_user = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec) +
                   1e-6 * (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec);
    pf->gen_sys = (double)(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) +
                  1e-6 * (double)(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec);
    pf->gen_cpu = cpu_s(&u1) - cpu_s(&u0);
    pf->srv_cpu = s1 - s0;
    return 0;
}

/* GET every rank's schedule through the pool; mismatches against g->expect_* (a pipeline whose
 * expectation is -1 takes its first answer). */
static int check_schedules(gen *g, double *secs)
{
    double t0 = now_s(), deadline = t0 + DEADLINE_CHECK_S;
    g->mismatches = 0;
    g->first_mismatch[0] = '\0';
    int next = 0;
    while (next < g->ranks || g->inflight > 0) {
        if (over_time(g, deadline, "schedule checks not answered in time")) {
            drain(g, 5);
            return -1;
        }
        xfer *x;
        while (next < g->ranks && (x = pool_get(g))) {
            snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, next);
            if (xfer_start(g, x, K_CHECK, next, M_GET)) {
                pool_put(g, x);
                drain(g, 5);
                return -1;
            }
            next++;
        }
        step(g, 0.05);
    }
    *secs = now_s() - t0;
    return 0;
}

/* The plan rule of a straggler answer (docs/api.md) as every pipeline's plan into plans[dp] and
 * whether it is a straggler into strag[dp]. */
static int read_pipelines(gen *g, json_t *o, long *plans, int *strag, const char *what)
{
    json_t *r = json_object_get(o, "rule"), *ss = json_object_get(r, "stragglers");
    long long others = json_int(r, "plan_id", -1), slow = json_int(r, "straggler_plan_id", -1);
    if (json_phase(o) != PH_RUNNING || !json_is_array(ss) || others < 0 || slow < 0) {
        check_failed(g, "%s: expected a running job and its plan rule: %.200s", what,
                     g->ctl.resp.p);
        return -1;
    }
    for (int d = 0; d < g->dp; d++) {
        plans[d] = (long)others;
        strag[d] = 0;
    }
    for (size_t i = 0; i < json_array_size(ss); i++) {
        json_t *v = json_array_get(ss, i);
        long long d = json_is_integer(v) ? json_integer_value(v) : -1;
        if (d < 0 || d >= g->dp) {
            check_failed(g, "%s: rule.stragglers[%zu] is not a pipeline", what, i);
            return -1;
        }
        plans[d] = (long)slow;
        strag[d] = 1;
    }
    return 0;
}

typedef struct strag_figures {
    double t_prime, set_s, check_set_s, clear_s, check_clear_s;
    double server_set_s, server_clear_s; /* the server's own time (/metrics), -1: unknown */
    int switched;
    long base_plan, new_plan;
} strag_figures;

static int run_straggler(gen *g, const status_info *si, strag_figures *sf)
{
    phase_begin(g, "straggler", &g->e_strag);
    long *base = xcalloc((size_t)g->dp, sizeof *base),
         *plans = xcalloc((size_t)g->dp, sizeof *plans);
    int *base_s = xcalloc((size_t)g->dp, sizeof *base_s),
        *strag = xcalloc((size_t)g->dp, sizeof *strag);
    int rc = -1;
    double secs;
    /* Baseline: every rank on its pipeline's plan; with no straggler, the fastest. */
    for (int d = 0; d < g->dp; d++)
        g->expect_plan[d] = -1;
    if (check_schedules(g, &secs)) goto out;
    if (g->mismatches)
        check_failed(g, "before the straggler: %ld schedules disagree, first %s", g->mismatches,
                     g->first_mismatch);
    for (int d = 0; d < g->dp; d++) {
        base[d] = g->expect_plan[d];
        base_s[d] = g->expect_strag[d];
        if (base[d] != si->fastest_plan || base_s[d])
            check_failed(g,
                         "before the straggler: pipeline %d runs plan %ld%s, expected the "
                         "fastest plan %ld",
                         d, base[d], base_s[d] ? " as a straggler" : "", si->fastest_plan);
    }
    sf->base_plan = base[0];
    /* Report pipeline 0 slow. */
    sf->t_prime = si->fastest_time_s * g->slowdown;
    char body[128];
    snprintf(body, sizeof body, "{\"dp\":0,\"time_s\":%.9g}", sf->t_prime);
    json_t *o;
    double srv0 = server_route_s(g, "set_straggler");
    double t = now_s();
    long st = ctl(g, M_POST, body, &o, t + DEADLINE_CHECK_S, "/v1/jobs/%s/stragglers", g->job);
    sf->set_s = now_s() - t;
    double srv1 = server_route_s(g, "set_straggler");
    sf->server_set_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    if (st != 200 || !o) {
        json_decref(o);
        goto out;
    }
    int bad = read_pipelines(g, o, plans, strag, "POST stragglers");
    json_decref(o);
    if (bad) goto out;
    sf->new_plan = g->dp > 1 ? plans[1] : plans[0];
    for (int d = 0; d < g->dp; d++) {
        if (d == 0 && (!strag[0] || plans[0] != base[0]))
            check_failed(g,
                         "the straggler pipeline 0: plan %ld straggler %s, expected plan %ld "
                         "straggler true",
                         plans[0], strag[0] ? "true" : "false", base[0]);
        if (d > 0 && strag[d]) check_failed(g, "pipeline %d is marked a straggler too", d);
        if (d > 0 && plans[d] != base[d]) sf->switched++;
    }
    if (g->dp > 1 && sf->switched != g->dp - 1)
        check_failed(g, "only %d of %d other pipelines left plan %ld for T' = %.4f s", sf->switched,
                     g->dp - 1, base[1], sf->t_prime);
    for (int d = 0; d < g->dp; d++) {
        g->expect_plan[d] = plans[d];
        g->expect_strag[d] = strag[d];
    }
    if (check_schedules(g, &sf->check_set_s)) goto out;
    if (g->mismatches)
        check_failed(g,
                     "with the straggler: %ld of %d schedules differ from the server's answer, "
                     "first %s",
                     g->mismatches, g->ranks, g->first_mismatch);
    /* Clear it: every pipeline back on its baseline plan. */
    srv0 = server_route_s(g, "clear_straggler");
    t = now_s();
    st = ctl(g, M_DELETE, NULL, &o, t + DEADLINE_CHECK_S, "/v1/jobs/%s/stragglers/0", g->job);
    sf->clear_s = now_s() - t;
    srv1 = server_route_s(g, "clear_straggler");
    sf->server_clear_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    if (st != 200 || !o) {
        json_decref(o);
        goto out;
    }
    bad = read_pipelines(g, o, plans, strag, "DELETE stragglers/0");
    json_decref(o);
    if (bad) goto out;
    for (int d = 0; d < g->dp; d++)
        if (plans[d] != base[d] || strag[d]) {
            check_failed(g, "after clearing: pipeline %d on plan %ld%s, expected %ld", d, plans[d],
                         strag[d] ? " as a straggler" : "", base[d]);
            break;
        }
    for (int d = 0; d < g->dp; d++) {
        g->expect_plan[d] = base[d];
        g->expect_strag[d] = 0;
    }
    if (check_schedules(g, &sf->check_clear_s)) goto out;
    if (g->mismatches)
        check_failed(g, "after clearing: %ld of %d schedules not back on their plan, first %s",
                     g->mismatches, g->ranks, g->first_mismatch);
    rc = 0;
out:
    free(base);
    free(plans);
    free(base_s);
    free(strag);
    return rc;
}

static int complete_job(gen *g)
{
    phase_begin(g, "complete", &g->e_done);
    double deadline = now_s() + DEADLINE_CHECK_S;
    json_t *o;
    long st = ctl(g, M_POST, NULL, &o, deadline, "/v1/jobs/%s/complete", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    if (json_phase(o) != PH_DONE) check_failed(g, "complete answered %.200s", g->ctl.resp.p);
    json_decref(o);
    st = ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    if (json_phase(o) != PH_DONE) check_failed(g, "the job is not done after complete");
    json_decref(o);
    st = ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s/schedule?rank=0", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    json_t *cl = json_object_get(o, "clocks_mhz");
    if (json_phase(o) != PH_DONE || !json_is_array(cl) || json_array_size(cl) != 0)
        check_failed(g, "a done job's schedule: %.200s", g->ctl.resp.p);
    json_decref(o);
    return 0;
}

/* ---- server ---- */

static int start_server(gen *g, const char *bin)
{
    snprintf(g->dir, sizeof g->dir, "/tmp/prs-load-XXXXXX");
    if (!mkdtemp(g->dir)) {
        fprintf(stderr, "load_server: cannot make a scratch directory: %s\n", strerror(errno));
        g->dir[0] = '\0';
        return -1;
    }
    char port_file[128], threads_s[16];
    snprintf(port_file, sizeof port_file, "%s/port", g->dir);
    /* 0: perseusd's default (one worker per online CPU) */
    snprintf(threads_s, sizeof threads_s, "%d", g->threads);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "load_server: %s: %s (build perseusd, or give --perseusd PATH)\n", bin,
                strerror(errno));
        return -1;
    }
    g->pid = fork();
    if (g->pid < 0) {
        fprintf(stderr, "load_server: fork: %s\n", strerror(errno));
        return -1;
    }
    if (g->pid == 0) {
        /* Every simulated rank shares one address: lift the per-client connection cap. */
        if (g->threads > 0)
            execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", g->dir, "--port-file",
                  port_file, "--log-level", "error", "--threads", threads_s,
                  "--max-client-connections", "8192", (char *)NULL);
        else
            execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", g->dir, "--port-file",
                  port_file, "--log-level", "error", "--max-client-connections", "8192",
                  (char *)NULL);
        fprintf(stderr, "load_server: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    g_child = g->pid;
    double t0 = now_s();
    while (now_s() - t0 < 15 && !g->port && !g_stop) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &g->port) != 1) g->port = 0;
            fclose(f);
        }
        int status;
        if (!g->port && waitpid(g->pid, &status, WNOHANG) == g->pid) {
            fprintf(stderr, "load_server: %s exited before serving (status %d)\n", bin, status);
            g->pid = 0;
            return -1;
        }
        if (!g->port) usleep(20000);
    }
    if (g->port < 1 || g->port > 65535) {
        fprintf(stderr, "load_server: %s did not write a port to %s in 15 s\n", bin, port_file);
        return -1;
    }
    return 0;
}

static void stop_server(gen *g)
{
    if (g->pid > 0) {
        kill(g->pid, SIGTERM);
        int status = 0;
        double t0 = now_s();
        pid_t w;
        while ((w = waitpid(g->pid, &status, WNOHANG)) == 0 && now_s() - t0 < 20)
            usleep(10000);
        if (w == 0) {
            fputs("load_server: perseusd did not stop on SIGTERM in 20 s; killing it\n", stderr);
            kill(g->pid, SIGKILL);
            waitpid(g->pid, &status, 0);
        } else if (w == g->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "load_server: perseusd stopped with status %d\n", status);
        }
        g->pid = 0;
        g_child = 0;
    }
    if (g->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
        if (system(cmd) != 0) fprintf(stderr, "load_server: could not remove %s\n", g->dir);
        g->dir[0] = '\0';
    }
}

/* ---- options ---- */

static const char usage[] =
    "usage: load_server [--ranks R] [--stages S] [--microbatches M] [--clocks F1,F2,...]\n"
    "                   [--warmup-iterations W] [--iterations-per-clock K]\n"
    "                   [--connections C] [--wait-ms MS] [--pollers P] [--poll-seconds D]\n"
    "                   [--poll-interval-ms MS] [--poll-warmup-ms MS] [--slowdown X]\n"
    "                   [--timeout S] [--perseusd PATH] [--threads N] [--upload-profile]\n"
    "Starts perseusd on 127.0.0.1 (port 0, scratch data directory; loopback only) and takes one\n"
    "job of R simulated ranks (S stages x R/S pipelines, 1F1B, M microbatches) through every\n"
    "phase with libcurl multi over at most C keep-alive connections: registration and first\n"
    "schedule (target < 10 s), profiling (each rank posts W warm-up + K iterations per clock of\n"
    "the list, windows from the simulated A100), planning, D seconds of schedule polls by P\n"
    "pollers (after a warm-up that is not counted; target p99 < 20 ms), a straggler on pipeline 0\n"
    "at X times the fastest plan's time (other pipelines must switch plans, and back when it is\n"
    "cleared), completion.\n"
    "Defaults: 8192 ranks, 8 stages, 8 microbatches, clocks 1410,1200,1000, W 1, K 1,\n"
    "1024 connections, 1024 pollers, 5 s of polls after 500 ms of warm-up, back to back\n"
    "(interval 0: a poller sends its next request when the last is answered; MS > 0: one request\n"
    "per MS per poller), slowdown 1.2, perseusd's default thread count (one per online CPU),\n"
    "perseusd beside this program's folder.\n"
    "A rank waiting for the others re-polls its schedule when an answer shows the job moved on,\n"
    "or after --wait-ms (default 1000, about an iteration) at the latest.\n"
    "--upload-profile uploads the simulated GPU's profile right after creating the job, so the\n"
    "job plans at once and the ranks skip profiling (how a large job is run).\n"
    "Bounds: R <= 65536, S <= 1024, M <= 64, C and P <= 4096, D <= 60 s, at most 16 clocks;\n"
    "deadlines: 60 s to the last schedule, 120 s of profiling, 120 s of planning, 60 s per\n"
    "straggler check, --timeout (default 300 s) for the whole run.\n"
    "Exit status: 0 when the job went through every phase without an error or a failed check\n"
    "(a missed latency target alone still exits 0), 1 otherwise, 2 on a bad argument.\n";

static int parse_int(const char *s, const char *name, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "load_server: %s: expected an integer in %ld..%ld, got '%s'\n", name, lo,
                hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, const char *name, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "load_server: %s: expected a number in %g..%g, got '%s'\n", name, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_clocks(gen *g, const char *s)
{
    g->nclocks = 0;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (g->nclocks == MAX_CLOCKS) {
            fprintf(stderr, "load_server: --clocks: at most %d clocks\n", MAX_CLOCKS);
            return -1;
        }
        if (parse_int(t, "--clocks", 1, 100000, &g->clocks[g->nclocks])) return -1;
        for (int i = 0; i < g->nclocks; i++)
            if (g->clocks[i] == g->clocks[g->nclocks]) {
                fprintf(stderr, "load_server: --clocks: %d twice\n", g->clocks[i]);
                return -1;
            }
        g->nclocks++;
    }
    if (!g->nclocks) {
        fputs("load_server: --clocks: no clock\n", stderr);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, long n, double p)
{
    if (n == 0) return 0;
    long i = (long)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static void print_errs(const char *what, const errs *e)
{
    printf("%s: %ld HTTP, %ld transport, %ld checks", what, e->http, e->transport, e->check);
}

int main(int argc, char **argv)
{
    static gen G;
    gen *g = &G;
    g->ranks = 8192;
    g->stages = 8;
    g->microbatches = 8;
    g->conns = 1024;
    g->pollers = 1024;
    g->threads = 0;
    g->warmup = 1;
    g->iters = 1;
    g->poll_s = 5;
    g->poll_warm_s = 0.5;
    g->wait_s = 1.0;
    g->slowdown = 1.2;
    g->watchdog_s = 300;
    g->timer_at = -1;
    g->epfd = -1;
    parse_clocks(g, "1410,1200,1000");
    char bin[1024];
    char *self = strdup(argv[0]);
    if (!self) oom();
    snprintf(bin, sizeof bin, "%s/../perseusd", dirname(self));
    free(self);
    enum { O_MB = 256, O_CLOCKS, O_WARMUP, O_ITERS, O_WAIT, O_PWARM, O_SLOW, O_TIMEOUT, O_UPLOAD };
    static const struct option opts[] = {{"ranks", required_argument, NULL, 'r'},
                                         {"stages", required_argument, NULL, 's'},
                                         {"microbatches", required_argument, NULL, O_MB},
                                         {"clocks", required_argument, NULL, O_CLOCKS},
                                         {"warmup-iterations", required_argument, NULL, O_WARMUP},
                                         {"iterations-per-clock", required_argument, NULL, O_ITERS},
                                         {"connections", required_argument, NULL, 'c'},
                                         {"wait-ms", required_argument, NULL, O_WAIT},
                                         {"pollers", required_argument, NULL, 'p'},
                                         {"poll-seconds", required_argument, NULL, 'd'},
                                         {"poll-interval-ms", required_argument, NULL, 'i'},
                                         {"poll-warmup-ms", required_argument, NULL, O_PWARM},
                                         {"slowdown", required_argument, NULL, O_SLOW},
                                         {"timeout", required_argument, NULL, O_TIMEOUT},
                                         {"perseusd", required_argument, NULL, 'b'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"upload-profile", no_argument, NULL, O_UPLOAD},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o, bad = 0;
    double ms;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'r':
            bad |= parse_int(optarg, "--ranks", 1, MAX_RANKS, &g->ranks);
            break;
        case 's':
            bad |= parse_int(optarg, "--stages", 1, 1024, &g->stages);
            break;
        case O_MB:
            bad |= parse_int(optarg, "--microbatches", 1, MAX_MICROBATCHES, &g->microbatches);
            break;
        case O_CLOCKS:
            bad |= parse_clocks(g, optarg);
            break;
        case O_WARMUP:
            bad |= parse_int(optarg, "--warmup-iterations", 0, MAX_ITERS, &g->warmup);
            break;
        case O_ITERS:
            bad |= parse_int(optarg, "--iterations-per-clock", 1, MAX_ITERS, &g->iters);
            break;
        case 'c':
            bad |= parse_int(optarg, "--connections", 1, MAX_CONNECTIONS, &g->conns);
            break;
        case O_WAIT:
            if (parse_real(optarg, "--wait-ms", 1, 10000, &ms))
                bad = 1;
            else
                g->wait_s = ms / 1e3;
            break;
        case 'p':
            bad |= parse_int(optarg, "--pollers", 1, MAX_POLLERS, &g->pollers);
            break;
        case 'd':
            bad |= parse_real(optarg, "--poll-seconds", 0.1, 60, &g->poll_s);
            break;
        case 'i':
            if (parse_real(optarg, "--poll-interval-ms", 0, 10000, &ms))
                bad = 1;
            else
                g->interval_s = ms / 1e3;
            break;
        case O_PWARM:
            if (parse_real(optarg, "--poll-warmup-ms", 0, 10000, &ms))
                bad = 1;
            else
                g->poll_warm_s = ms / 1e3;
            break;
        case O_UPLOAD:
            g->upload = 1;
            break;
        case O_SLOW:
            bad |= parse_real(optarg, "--slowdown", 1.01, 10, &g->slowdown);
            break;
        case O_TIMEOUT:
            bad |= parse_real(optarg, "--timeout", 10, 3600, &g->watchdog_s);
            break;
        case 'b':
            snprintf(bin, sizeof bin, "%s", optarg);
            break;
        case 't':
            bad |= parse_int(optarg, "--threads", 0, 64, &g->threads);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            bad = 1;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "load_server: unexpected argument '%s'\n", argv[optind]);
        bad = 1;
    }
    if (!bad && g->ranks % g->stages) {
        fprintf(stderr, "load_server: --ranks %d is not a multiple of --stages %d\n", g->ranks,
                g->stages);
        bad = 1;
    }
    if (bad) {
        fputs(usage, stderr);
        return 2;
    }
    g->dp = g->ranks / g->stages;
    if (g->pollers > g->ranks) {
        fprintf(stderr, "load_server: %d pollers for %d ranks: using %d (one rank each)\n",
                g->pollers, g->ranks, g->ranks);
        g->pollers = g->ranks;
    }
    if (g->conns > g->ranks) g->conns = g->ranks;
    g->gpu = prs_gpu_preset_find("a100");
    g->pipe = (prs_pipeline){
        g->stages, g->microbatches, PRS_SCHEDULE_1F1B, 0.001, g->gpu->blocking_power_w, 0, 0};
    g->ops = prs_ops_per_stage(&g->pipe);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)g->watchdog_s + 60); /* last resort: the loops check the watchdog first */

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("load_server: curl_global_init failed\n", stderr);
        return 1;
    }
    int rc = 1, npool = g->conns > g->pollers ? g->conns : g->pollers;
    g->t_start = now_s();
    g->multi = curl_multi_init();
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->hdr_plain = curl_slist_append(NULL, "Content-Type: application/json");
    if (g->hdr_plain) g->hdr_plain = curl_slist_append(g->hdr_plain, "Expect:");
    if (!g->multi || g->epfd < 0 || !g->hdr_plain) {
        fputs("load_server: cannot set up libcurl and epoll\n", stderr);
        goto out;
    }
    if (curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, on_socket) ||
        curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, (void *)g) ||
        curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, on_timer) ||
        curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, (void *)g) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)g->conns) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)g->conns) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, (long)g->conns)) {
        fputs("load_server: curl refused a multi option\n", stderr);
        goto out;
    }
    g->pool = xcalloc((size_t)npool, sizeof *g->pool);
    g->free_x = xcalloc((size_t)npool, sizeof *g->free_x);
    g->npool = npool;
    for (int i = 0; i < npool; i++)
        if (xfer_init(&g->pool[i])) {
            fputs("load_server: cannot make a curl easy handle\n", stderr);
            goto out;
        }
    if (xfer_init(&g->ctl)) {
        fputs("load_server: cannot make a curl easy handle\n", stderr);
        goto out;
    }
    /* The ranks' phases use C handles: at most C requests in flight, one per connection. */
    for (int i = g->conns - 1; i >= 0; i--)
        pool_put(g, &g->pool[i]);
    g->rk = xcalloc((size_t)g->ranks, sizeof *g->rk);
    g->clk = xcalloc((size_t)g->ranks * (size_t)g->ops, sizeof *g->clk);
    g->q[0].r = xcalloc((size_t)g->ranks, sizeof *g->q[0].r);
    g->q[1].r = xcalloc((size_t)g->ranks, sizeof *g->q[1].r);
    g->parked = xcalloc((size_t)g->ranks, sizeof *g->parked);
    g->wc = xcalloc((size_t)g->stages * (size_t)g->ops, sizeof *g->wc);
    g->expect_plan = xcalloc((size_t)g->dp, sizeof *g->expect_plan);
    g->expect_strag = xcalloc((size_t)g->dp, sizeof *g->expect_strag);

    phase_begin(g, "start", &g->e_reg);
    if (start_server(g, bin)) goto out;
    if (create_job(g)) goto out;
    if (g->upload && upload_profile(g)) goto out;

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

    int ok = run_ranks(g) == 0;
    double reg_s = g->t_sched_all - g->t_reg0;
    if (g->nsched == g->ranks) {
        long e = total_errors(&g->e_reg);
        printf("register + schedule: %d ranks in %.3f s (registration alone %.3f s) over %d "
               "connections (%.0f ranks/s, %ld schedule requests), errors %ld   "
               "[target < %g s: %s]\n",
               g->ranks, reg_s, g->t_reg_last - g->t_reg0, g->conns, (double)g->ranks / reg_s,
               g->reg_sched_requests, e, reg_target_s(g),
               reg_s < reg_target_s(g) && e == 0 ? "PASS" : "MISS");
        printf("register + schedule ");
        print_cpu(&g->cpu_reg0, &g->cpu_reg1);
        printf("\n");
    } else {
        printf("register + schedule: only %d of %d ranks got a schedule, errors %ld   "
               "[target < %g s: MISS]\n",
               g->nsched, g->ranks, total_errors(&g->e_reg), reg_target_s(g));
    }
    if (!ok) goto report;
    double prof_s = g->t_prof_done - g->t_sched_all;
    printf("profiling: %d clocks, %ld posts (%ld iterations, %ld windows, %.1f MB) in %.3f s "
           "(%.0f posts/s), errors %ld\n",
           g->rounds_seen, g->posts, g->iterations_posted, g->windows_posted,
           (double)g->bytes_posted / 1e6, prof_s, (double)g->posts / prof_s,
           total_errors(&g->e_prof));
    printf("profiling ");
    print_cpu(&g->cpu_reg1, &g->cpu_prof1);
    printf("\n");
    fflush(stdout);

    status_info si;
    memset(&si, 0, sizeof si);
    double t_plan0 = now_s();
    if (wait_running(g, &si)) goto report;
    printf("planning: planner %.3f s (server), running %.3f s after the last rank left "
           "profiling; %ld measurements (%s profile), frontier %ld points, fastest plan %ld "
           "(%.4f s)\n",
           si.planning_s, now_s() - t_plan0, si.measurements, si.source, si.points, si.fastest_plan,
           si.fastest_time_s);
    fflush(stdout);

    poll_figures pf;
    double le[MAX_BUCKETS], le2[MAX_BUCKETS];
    unsigned long long h0[MAX_BUCKETS], h1[MAX_BUCKETS];
    int nh0 = server_hist(g, le, h0);
    memset(&pf, 0, sizeof pf);
    if (run_polls(g, &pf)) goto report;
    int nh1 = server_hist(g, le2, h1);
    qsort(g->lat, (size_t)g->nlat, sizeof *g->lat, cmp_double);
    long poll_err = total_errors(&g->e_poll) + g->poll_unexpected;
    printf("schedule polls: %d concurrent pollers over %d connections, %s, %ld requests in "
           "%.2f s (%.0f/s) after %.0f ms of warm-up, errors %ld\n",
           g->pollers, g->conns,
           g->interval_s > 0 ? "each one request per interval" : "back to back", pf.requests,
           pf.measured_s, pf.rate, g->poll_warm_s * 1e3, poll_err);
    if (g->interval_s > 0) printf("poll interval: %.1f ms per poller\n", g->interval_s * 1e3);
    double p99 = pct(g->lat, g->nlat, 0.99);
    printf("poll latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f   [target p99 < 20 ms: %s]\n",
           1e3 * pct(g->lat, g->nlat, 0.5), 1e3 * pct(g->lat, g->nlat, 0.9), 1e3 * p99,
           1e3 * (g->nlat ? g->lat[g->nlat - 1] : 0),
           g->nlat && p99 < 0.020 && poll_err == 0 ? "PASS" : "MISS");
    printf("poll cpu: generator %.0f%% of a core (user %.2f s, sys %.2f s, %.1f us per request), "
           "perseusd %.0f%%, over %.2f s on %ld cores\n",
           100 * pf.gen_cpu / pf.measured_s, pf.gen_user, pf.gen_sys,
           pf.requests ? 1e6 * pf.gen_cpu / (double)pf.requests : 0,
           100 * pf.srv_cpu / pf.measured_s, pf.measured_s, sysconf(_SC_NPROCESSORS_ONLN));
    if (nh0 > 0 && nh0 == nh1) {
        unsigned long long cnt;
        double q50 = hist_quantile(nh0, le, h0, h1, 0.5, &cnt),
               q99 = hist_quantile(nh0, le, h0, h1, 0.99, &cnt);
        printf("poll latency inside perseusd (its /metrics histogram, warm-up included): %llu "
               "requests, p50 <= %g ms, p99 <= %g ms\n",
               cnt, 1e3 * q50, 1e3 * q99);
    }
    fflush(stdout);

    strag_figures sf;
    memset(&sf, 0, sizeof sf);
    int sok = run_straggler(g, &si, &sf) == 0;
    if (sok || sf.t_prime > 0) {
        printf("straggler: pipeline 0 at T' %.4f s (%.2fx): %d of %d other pipelines plan %ld -> "
               "%ld (answer %.1f ms, all %d schedules checked in %.3f s); cleared: back in %.1f "
               "ms (checked in %.3f s), errors %ld   [%s]\n",
               sf.t_prime, g->slowdown, sf.switched, g->dp - 1, sf.base_plan, sf.new_plan,
               1e3 * sf.set_s, g->ranks, sf.check_set_s, 1e3 * sf.clear_s, sf.check_clear_s,
               total_errors(&g->e_strag), sok && total_errors(&g->e_strag) == 0 ? "PASS" : "FAIL");
        double both = sf.server_set_s + sf.server_clear_s;
        if (sf.server_set_s >= 0 && sf.server_clear_s >= 0)
            printf("straggler set + clear inside perseusd (its /metrics): %.3f + %.3f = %.3f ms at "
                   "dp = %d   [target < 5 ms: %s]\n",
                   1e3 * sf.server_set_s, 1e3 * sf.server_clear_s, 1e3 * both, g->dp,
                   both < 0.005 ? "PASS" : "MISS");
    }
    if (!sok) goto report;
    if (complete_job(g)) goto report;
    printf("complete: job done, schedules empty, errors %ld\n", total_errors(&g->e_done));
    rc = 0;
report:;
    const errs *all[] = {&g->e_reg, &g->e_prof, &g->e_plan, &g->e_poll, &g->e_strag, &g->e_done};
    long sum = g->poll_unexpected;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sum += total_errors(all[i]);
    const char *stopped = rc ? g->phase : NULL; /* the phase that could not finish */
    if (rc == 0 && sum) rc = 1;
    printf("errors: %ld in all (", sum);
    print_errs("register", &g->e_reg);
    print_errs("; profiling", &g->e_prof);
    print_errs("; planning", &g->e_plan);
    print_errs("; poll", &g->e_poll);
    printf(", %ld unexpected", g->poll_unexpected);
    print_errs("; straggler", &g->e_strag);
    print_errs("; complete", &g->e_done);
    if (rc == 0)
        printf(")\nresult: OK: the job went through every phase without errors\n");
    else if (stopped)
        printf(")\nresult: FAILED: stopped in the %s phase (see the messages above)\n", stopped);
    else
        printf(")\nresult: FAILED: every phase ran, with %ld errors (see the messages above)\n",
               sum);
out:
    fflush(stdout);
    for (int i = 0; g->pool && i < g->npool; i++)
        xfer_free(g, &g->pool[i]);
    xfer_free(g, &g->ctl);
    if (g->multi) curl_multi_cleanup(g->multi);
    if (g->epfd >= 0) close(g->epfd);
    curl_slist_free_all(g->hdr_plain);
    curl_slist_free_all(g->hdr_auth);
    curl_global_cleanup();
    stop_server(g);
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
    return rc;
}
