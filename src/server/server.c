/* perseusd's HTTP layer (perseus/server.h): routing, authentication, body limits, JSON errors,
 * metrics, logs and the planner threads, around the job state machine (job.c) and the store
 * (store.c).
 *
 * Concurrency. Worker threads each drive a libmicrohttpd daemon on a shared listening socket
 * (see HTTP workers below). The jobs table has a reader-writer lock held only to find a job and
 * take a reference to it, or to add or unlink one: a pointer swap, never work. A request then
 * works on its job under the job's own lock (shared for views, exclusive for changes), and a
 * change takes the store's mutex before the job's lock, so no job's lock is held while waiting
 * for another job's transaction. Deleting a job marks it deleted in one short transaction and
 * unlinks it; the janitor thread purges its rows in bounded batches (store_purge_step). The
 * planner runs outside every lock in a thread per planning job and takes them only to report
 * progress and to install its result.
 *
 * Durability. A mutating request runs as one transaction; the response is queued only after the
 * commit, so an acknowledged result is in the database. If the transaction fails the job is
 * reloaded from the database, so memory never holds what the database lost.
 *
 * Safety. Ids and tokens are made by the server from /dev/urandom; tokens are kept only as
 * SHA-256 and compared in constant time. Bodies are bounded (413 past the limit) and parsed
 * strictly (request.c). No request text reaches SQL (bound values only), and the server makes no
 * file besides its database: frontiers go to and from the store as plans.prs text in memory.
 * Every error is a JSON body {"error": {"code", "message"}}.
 *
 * Errors. Below the HTTP layer every call returns 0 or a negative PRS_E* code with details in a
 * prs_error (perseus/error.h), the store's in its handle (store_error); the request handlers
 * turn those, and the job calls' api_err, into the JSON error: api_err is the outermost layer. */
#define _GNU_SOURCE /* pipe2, SOCK_CLOEXEC; struct timespec helpers */
#include "perseus/clock.h"
#include "perseus/limits.h"
#include "perseus/logfmt.h"
#include "perseus/noise.h"
#include "perseus/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "job.h"
#include "job_assign.h"
#include "job_metrics.h"
#include "metrics.h"
#include "perseus/numfmt.h"
#include "request.h"
#include "secure.h"
#include "powercap_job.h"
#include "store.h"
#include "tls.h"
#include "workq.h"
#include "zeus_routes.h"

/* ---- routes and metrics ---- */

enum route {
    R_HEALTHZ,
    R_METRICS,
    R_CREATE,
    R_STATUS,
    R_REGISTER,
    R_SCHEDULE,
    R_RESULTS,
    R_STRAGGLER_SET,
    R_STRAGGLER_CLEAR,
    R_POWER_CAP_SET,
    R_POWER_CAP_CLEAR,
    R_PROFILE_GET,
    R_PROFILE_PUT,
    R_FRONTIER,
    R_COMPLETE,
    R_DELETE,
    R_LIST,
    R_UNKNOWN,
    N_ROUTES
};

static const char *const ROUTE_NAMES[N_ROUTES] = {
    "healthz",         "metrics",     "create_job",     "get_job",         "register_rank",
    "schedule",        "results",     "set_straggler",  "clear_straggler", "set_power_cap",
    "clear_power_cap", "get_profile", "upload_profile", "get_frontier",    "complete",
    "delete_job",      "list_jobs",   "unknown"};

static const int CODES[] = {200, 201, 400, 401, 404, 405, 409, 413, 429, 500, 501, 503};
#define N_CODES ((int)(sizeof CODES / sizeof CODES[0]) + 1) /* + "other" */
static const double BUCKETS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                 0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};
#define N_BUCKETS ((int)(sizeof BUCKETS / sizeof BUCKETS[0]))

typedef struct metrics {
    pthread_mutex_t mu;
    unsigned long long count[N_ROUTES][N_CODES];
    unsigned long long hist[N_ROUTES][N_BUCKETS + 1]; /* cumulative at render time */
    double sum_s[N_ROUTES];
    unsigned long long planning_count, planning_failed;
    double planning_sum_s, planning_last_s;
} metrics;

typedef struct plan_task {
    struct prs_server *s;
    job *j; /* NULL once the job was deleted: the result is dropped (lock held to read it) */
    char job_id[SECURE_ID_LEN + 1];
    prs_cost_model cost_model;
    prs_profile *profile; /* a copy: the job's may be replaced while we plan */
    prs_pipeline pipe;    /* job_pipeline when planning started */
    int robust;           /* plan with prs_plan_robust: the profile was measured here */
    pthread_t thread;
    int started;   /* its thread runs (else it waits for a planner slot) */
    int finished;  /* done (or dropped before it started): reap it */
    int cancel;    /* CANCEL_*: read by the planner thread without the lock (atomics) */
    int timed_out; /* the planner passed the time limit (planner thread only) */
    double deadline;
    double progress_at; /* last progress update taken */
    struct plan_task *next;
} plan_task;

enum { CANCEL_NONE = 0, CANCEL_JOB_LEFT = 1, CANCEL_SHUTDOWN = 2 };

#define JOB_BUCKETS 1024
/* Memory pool per connection (request line, headers, read buffer, response headers). Bodies
 * stream through on_request, so this bounds only what one read holds; libmicrohttpd clears the
 * pool between requests, so a small pool is also a faster one. */
#define CONN_MEMORY (8u * 1024u)

/* One connection as its worker tracks it (its libmicrohttpd socket context), for the timeouts
 * and the global cap (see 'Connections' below). Touched only by the worker's thread. */
typedef struct conn_track {
    struct MHD_Connection *c;
    int fd;
    int in_request;        /* headers received, answer not yet sent */
    int over_cap;          /* opened past --max-connections: its first request gets 503, and it is
                            * closed if it sends none within OVER_CAP_GRACE_S */
    int cut;               /* shut down for a timeout: libmicrohttpd closes it next */
    double since;          /* when it opened, or its last request began or ended */
    struct http_worker *w; /* its worker */
    struct conn_track *prev, *next;
} conn_track;

/* One HTTP worker: a libmicrohttpd daemon driven by our own thread (see start_http). */
typedef struct http_worker {
    struct MHD_Daemon *mhd;
    struct prs_server *s;
    pthread_t thread;
    int stop_fd;
    int started;
    conn_track *conns; /* open connections of this daemon */
    double swept;      /* last timeout sweep */
    int wake_fd;       /* eventfd written when a connection of this worker is resumed */
} http_worker;

struct prs_server {
    prs_server_config cfg;
    char *listen_host, *db_path, *data_dir;
    tls_pem tls;          /* certificate and key when serving HTTPS (tls.h) */
    http_worker *workers; /* cfg.threads of them, each with its own daemon and thread */
    unsigned nworkers;
    int listen_fd;
    int stop_pipe[2]; /* written once at shutdown: wakes every worker */
    int port;
    /* Locking, outermost first (never taken in another order, and never taken again by a
     * thread that holds it):
     * - lock: the jobs table (buckets, njobs, nranks, the planner tasks' job pointers). Held
     *   only to look a job up and take a reference to it (job.refs, pin_job), or to link or
     *   unlink a job: never across parsing, checking, serialising or SQLite work.
     * - store_mu: the SQLite connection (st), held for a whole transaction. A change takes it
     *   before its job's lock, so a job's lock is never held while waiting for the store.
     * - a job's own lock (job.lock): shared by its views, exclusive for its changes. Requests of
     *   different jobs never wait for each other here.
     * - task_mu: the planner tasks (tasks, nplanning) and every job's planner_active. */
    pthread_rwlock_t lock;
    pthread_mutex_t store_mu, task_mu;
    store *st;
    job *jobs[JOB_BUCKETS];
    long njobs;
    plan_task *tasks; /* newest first: running and queued plannings */
    long nplanning;   /* planner threads running */
    int stopping;     /* shutdown: no planner starts */
    long nranks;      /* ranks of all jobs together (--max-ranks) */
    long nconns;      /* open connections over every worker (atomics) */
    uint8_t create_hash[SECURE_SHA256_LEN];
    int has_create_token;
    uint8_t admin_hash[SECURE_SHA256_LEN];
    int has_admin_token;
    uint8_t metrics_hash[SECURE_SHA256_LEN];
    int has_metrics_token;
    int loopback; /* listening on 127.0.0.0/8 only */
    /* The janitor: deletes finished jobs past --retention and unfinished ones idle past
     * --job-idle-timeout, and purges the rows of deleted jobs. */
    pthread_t janitor;
    pthread_mutex_t janitor_mu;
    pthread_cond_t janitor_cv;
    int janitor_stop, janitor_started, purge_pending;
    metrics m;
    workq *heavy;   /* runs the requests with large bodies (see 'Requests with large bodies') */
    zeus_srv *zeus; /* the Zeus-compatible routes (zeus_routes.h); NULL when off */
    double started;
};

/* ---- logging: one line per event, key=value ---- */

static void log_kv(prs_server *s, prs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void log_kv(prs_server *s, prs_log_level level, const char *fmt, ...)
{
    if (s->cfg.log_fd < 0 || level > s->cfg.log_level) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    va_list ap;
    va_start(ap, fmt);
    prs_logfmt_write(s->cfg.log_fd, names[level], fmt, ap);
    va_end(ap);
}

/* A message as a key=value value: quoted, with quotes and backslashes replaced. */
static const char *kv_quote(const char *in, char *out, size_t n)
{
    size_t o = 0;
    out[o++] = '"';
    for (; *in && o + 2 < n; in++)
        out[o++] = (*in == '"' || *in == '\\') ? '\'' : *in;
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

/* libmicrohttpd's messages about a client that went away (closed, reset, stopped reading): the
 * client's doing, not a server fault, so they are logged at debug. */
static const char *const PEER_GONE[] = {
    /* and a connection refused at a limit (--max-client-connections): by design, every time a
     * client goes past it, so not worth a line above debug */
    "Server reached connection limit",
    "The socket is no longer available",
    "The connection was forcibly closed",
    "Socket has been disconnected",
    "Connection socket is closed",
    "Connection was closed by remote side",
    "Failed to send data",
    "Failed to send the",
};

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    prs_server *s = cls;
    char msg[512], q[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    prs_log_level level = PRS_LOG_ERROR;
    for (size_t i = 0; i < sizeof PEER_GONE / sizeof PEER_GONE[0]; i++)
        if (strncmp(msg, PEER_GONE[i], strlen(PEER_GONE[i])) == 0) level = PRS_LOG_DEBUG;
    /* A client that failed the TLS handshake (plain HTTP, a CA that does not trust us): the
     * client's mistake, worth a warning, not the server's error. */
    if (level == PRS_LOG_ERROR && strstr(msg, "andshake")) level = PRS_LOG_WARN;
    /* A request libmicrohttpd itself refused (malformed, headers too large, HTTP/9.9): the
     * client's mistake too. */
    static const char refused[] = "Error processing request (HTTP response code is ";
    if (level == PRS_LOG_ERROR && strncmp(msg, refused, sizeof refused - 1) == 0) {
        int code = atoi(msg + sizeof refused - 1);
        if ((code >= 400 && code < 500) || code == 505) level = PRS_LOG_WARN;
    }
    log_kv(s, level, "msg=http_daemon detail=%s", kv_quote(msg, q, sizeof q));
}

/* ---- jobs table ---- */

static unsigned bucket_of(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h % JOB_BUCKETS;
}

static job *find_job(prs_server *s, const char *id)
{
    for (job *j = s->jobs[bucket_of(id)]; j; j = j->next)
        if (strcmp(j->id, id) == 0) return j;
    return NULL;
}

static void job_log_sink(void *ud, int level, const char *line)
{
    log_kv(ud, (prs_log_level)level, "%s", line);
}

/* A lock that prefers writers: polls hold it shared all the time, and without the preference a
 * posted result could wait behind them indefinitely. */
static int rwlock_init_writer_first(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(l, &ra);
    pthread_rwlockattr_destroy(&ra);
    return rc;
}

/* Free a job and the lock the server gave it. */
static void job_drop(job *j)
{
    if (j && j->lock) {
        pthread_rwlock_destroy(j->lock);
        free(j->lock);
        j->lock = NULL;
    }
    job_free(j);
}

/* Put a job into the table with a lock of its own and the table's reference (table lock held
 * exclusively); counted: whether njobs and nranks count it already (a creation reserves its
 * place first). 0, or -1 when out of memory (the job is left to the caller). */
static int add_job(prs_server *s, job *j, int counted)
{
    j->lock = malloc(sizeof *j->lock);
    if (!j->lock || rwlock_init_writer_first(j->lock) != 0) {
        free(j->lock);
        j->lock = NULL;
        return -1;
    }
    j->log = job_log_sink;
    j->log_ud = s;
    j->refs = 1;
    j->deleted = 0;
    j->active_unix = (long long)time(NULL);
    unsigned b = bucket_of(j->id);
    j->next = s->jobs[b];
    s->jobs[b] = j;
    if (!counted) {
        s->njobs++;
        s->nranks += j->world;
    }
    return 0;
}

/* A reference to job id (NULL: no such job), taken under the table lock and held without it:
 * the job's memory stays until the reference is dropped (unpin_job), even if the job is deleted
 * meanwhile (then job.deleted is set). */
static job *pin_job(prs_server *s, const char *id)
{
    pthread_rwlock_rdlock(&s->lock);
    job *j = find_job(s, id);
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->lock);
    return j;
}

/* Drop a reference; the last one frees the job (it was unlinked: the table's is gone). */
static void unpin_job(job *j)
{
    if (j && __atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) == 0) job_drop(j);
}

/* A reference to every job in the table (malloc'd array of *n; NULL with *n 0 when there are
 * none or memory is short), for the walks over all jobs (metrics, the janitor). */
static job **pin_all_jobs(prs_server *s, size_t *n)
{
    *n = 0;
    pthread_rwlock_rdlock(&s->lock);
    job **all = s->njobs > 0 ? malloc((size_t)s->njobs * sizeof(job *)) : NULL;
    for (int b = 0; all && b < JOB_BUCKETS; b++)
        for (job *j = s->jobs[b]; j && *n < (size_t)s->njobs; j = j->next) {
            __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
            all[(*n)++] = j;
        }
    pthread_rwlock_unlock(&s->lock);
    return all;
}

static void unpin_all_jobs(job **all, size_t n)
{
    for (size_t i = 0; i < n; i++)
        unpin_job(all[i]);
    free(all);
}

/* Take a deleted job out of the table (the lock held exclusively only for the unlink) and drop
 * the table's reference; a planner working on it is detached and its result dropped. */
static void unlink_job(prs_server *s, job *j)
{
    pthread_rwlock_wrlock(&s->lock);
    for (job **pp = &s->jobs[bucket_of(j->id)]; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    s->njobs--;
    s->nranks -= j->world;
    pthread_mutex_lock(&s->task_mu);
    for (plan_task *t = s->tasks; t; t = t->next)
        if (t->j == j) t->j = NULL; /* its result is dropped */
    pthread_mutex_unlock(&s->task_mu);
    pthread_rwlock_unlock(&s->lock);
    unpin_job(j);
}

/* ---- planner threads ----
 *
 * At most --max-planners planner threads run at once; further plannings wait in s->tasks
 * (started = 0) and start, oldest first, as running ones finish. A planner is stopped through
 * its progress callback, which the core calls after every step: when the job is completed or
 * deleted, when the server shuts down (cancel), or past the planning time limit (timed_out). */

/* Progress from the planner: whether to stop (cancel set, or the time limit passed). Progress
 * is taken at most every 50 ms (each update takes the job's lock exclusively). */
static int on_plan_progress(void *ud, long done, long total)
{
    plan_task *t = ud;
    if (__atomic_load_n(&t->cancel, __ATOMIC_ACQUIRE)) return 1;
    double now = prs_mono_s();
    if (now > t->deadline) {
        t->timed_out = 1;
        return 1;
    }
    if (done < total && now - t->progress_at < 0.05) return 0;
    t->progress_at = now;
    pthread_rwlock_rdlock(&t->s->lock);
    job *j = t->j; /* cleared only under the table lock held exclusively */
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&t->s->lock);
    if (j) {
        pthread_rwlock_wrlock(j->lock);
        j->plan_done = done;
        j->plan_total = total;
        pthread_rwlock_unlock(j->lock);
        unpin_job(j);
    }
    return 0;
}

static int reload_job(prs_server *s, job *j);
static void launch_queued(prs_server *s);

/* The problem has a frontier to find (prs_plan_check: times that do not all round to 0 units)
 * and fits --max-plan-points and --max-plan-memory: 0, or -1 with the reason (naming the field
 * or the limit) in why and its API error code in *code (bad_profile, too_large_to_plan). */
static int check_plannable(const prs_server *s, const prs_profile *p, const prs_pipeline *pipe,
                           const char **code, char *why, size_t n)
{
    long span;
    double bytes;
    prs_error err = {0, ""};
    *code = "bad_profile";
    if (prs_plan_check(p, pipe, "unit_time_s", &err) ||
        prs_plan_size(p, pipe, &span, &bytes, &err)) {
        snprintf(why, n, "%s", err.msg);
        return -1;
    }
    *code = "too_large_to_plan";
    if (bytes > (double)s->cfg.max_plan_memory) {
        snprintf(why, n,
                 "planning would need about %.0f MiB of tables at a unit time of %g s, over the "
                 "server's limit of %zu MiB (--max-plan-memory): use a larger unit_time_s",
                 bytes / 1048576.0, pipe->unit_time_s, s->cfg.max_plan_memory >> 20);
        return -1;
    }
    if (span > s->cfg.max_plan_points) {
        snprintf(why, n,
                 "the frontier could have %ld points at a unit time of %g s, over the server's "
                 "limit of %ld (--max-plan-points): use a larger unit_time_s",
                 span, pipe->unit_time_s, s->cfg.max_plan_points);
        return -1;
    }
    return 0;
}

/* Store the planner's outcome (the job's lock held exclusively, and store_mu): the frontier, or
 * the failure why. */
static void install_plan(prs_server *s, job *j, prs_frontier *f, const char *text, size_t len,
                         double secs, const char *why)
{
    api_err e = {0, NULL, ""};
    int ok = store_begin(s->st) == 0 &&
             job_plan_finished(j, s->st, f, text, len, secs, why, &e) == 0 &&
             store_commit(s->st) == 0;
    if (!ok) {
        store_rollback(s->st);
        log_kv(s, PRS_LOG_ERROR, "msg=plan_store_failed job=%s detail=%s", j->id,
               e.msg[0] ? e.msg : store_error(s->st)->msg);
        reload_job(s, j);
    }
}

static void *planner_main(void *arg)
{
    plan_task *t = arg;
    prs_server *s = t->s;
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = t->pipe;
    o.cost_model = t->cost_model;
    o.frontier = PRS_FRONTIER_CLEAN; /* the plans served: none beaten by a faster one */
    o.max_points = s->cfg.max_plan_points;
    o.progress = on_plan_progress;
    o.ud = t;
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    double t0 = prs_mono_s();
    t->deadline = t0 + s->cfg.plan_timeout_s;
    const char *code;
    int rc =
        check_plannable(s, t->profile, &t->pipe, &code, err.msg, sizeof err.msg) ? PRS_EINVAL : 0;
    if (!rc)
        rc = t->robust ? prs_plan_robust(t->profile, &o, &f, NULL, &err)
                       : prs_plan(t->profile, &o, &f, &err);
    double secs = prs_mono_s() - t0;
    if (rc == PRS_ECANCELED && t->timed_out)
        snprintf(err.msg, sizeof err.msg,
                 "planning took longer than the server's limit of %g s (--plan-timeout): use a "
                 "larger unit_time_s",
                 s->cfg.plan_timeout_s);
    char *text = NULL;
    size_t len = 0;
    if (rc == 0 && prs_frontier_to_plans(f, &text, &len, &err) != 0) {
        prs_frontier_free(f);
        f = NULL;
    }
    pthread_rwlock_rdlock(&s->lock);
    job *j = t->j; /* cleared only under the table lock held exclusively */
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->lock);
    int canceled = rc == PRS_ECANCELED && !t->timed_out;
    if (j) pthread_mutex_lock(&s->store_mu); /* the store before the job's lock */
    if (j) pthread_rwlock_wrlock(j->lock);
    if (!j || j->deleted || canceled) {
        /* Deleted, completed, or the server is stopping (the job stays planning and is planned
         * again at the next start): nothing to store. */
        log_kv(s, PRS_LOG_INFO, "msg=planning_canceled job=%s seconds=%.3f detail=%s", t->job_id,
               secs,
               !j || j->deleted               ? "job_deleted"
               : t->cancel == CANCEL_SHUTDOWN ? "shutdown"
                                              : "job_left");
        prs_frontier_free(f);
    } else {
        install_plan(s, j, f, text, len, secs, err.msg);
        pthread_mutex_lock(&s->m.mu);
        if (f) {
            s->m.planning_count++;
            s->m.planning_sum_s += secs;
            s->m.planning_last_s = secs;
        } else {
            s->m.planning_failed++;
        }
        pthread_mutex_unlock(&s->m.mu);
        char q[PRS_ERRMSG_MAX + 8];
        log_kv(s, f ? PRS_LOG_INFO : PRS_LOG_WARN,
               "msg=planned job=%s ok=%d seconds=%.3f points=%zu phase=%s%s%s", j->id, f != NULL,
               secs, f ? prs_frontier_size(f) : (size_t)0, job_phase_name(j->phase),
               f ? "" : " detail=", f ? "" : kv_quote(err.msg, q, sizeof q));
    }
    pthread_mutex_lock(&s->task_mu);
    if (j) {
        j->planner_active = 0;
        double zero = 0;
        __atomic_store(&j->plan_started_s, &zero, __ATOMIC_RELAXED);
    }
    t->finished = 1;
    s->nplanning--;
    launch_queued(s);
    pthread_mutex_unlock(&s->task_mu);
    if (j) {
        pthread_rwlock_unlock(j->lock);
        pthread_mutex_unlock(&s->store_mu);
        unpin_job(j);
    }
    free(text);
    return NULL;
}

/* Copy a profile row by row. */
static prs_profile *profile_copy(const prs_profile *p)
{
    prs_profile *c = prs_profile_new();
    const prs_profile_row *rows = prs_profile_rows(p);
    for (size_t i = 0; c && i < prs_profile_nrows(p); i++)
        if (prs_profile_add(c, &rows[i], NULL) != 0) {
            prs_profile_free(c);
            return NULL;
        }
    return c;
}

/* Join planner threads that have finished and drop queued tasks whose job went (lock held;
 * finished threads no longer need it). all: every task, waiting for running ones (shutdown:
 * they were canceled). */
static void reap_tasks(prs_server *s, int all)
{
    plan_task **pp = &s->tasks;
    while (*pp) {
        plan_task *t = *pp;
        if (t->finished || all) {
            *pp = t->next;
            if (t->started) {
                if (all) pthread_rwlock_unlock(&s->lock);
                pthread_join(t->thread, NULL);
                if (all) pthread_rwlock_wrlock(&s->lock);
            }
            prs_profile_free(t->profile);
            free(t);
            if (all) pp = &s->tasks;
        } else {
            pp = &t->next;
        }
    }
}

/* Start the oldest queued planning if a planner slot is free (task_mu held). */
static void launch_queued(prs_server *s)
{
    if (s->stopping || s->nplanning >= s->cfg.max_planners) return;
    plan_task *oldest = NULL;
    for (plan_task *t = s->tasks; t; t = t->next)
        if (!t->started && !t->finished) oldest = t; /* the list is newest first */
    if (!oldest) return;
    if (pthread_create(&oldest->thread, NULL, planner_main, oldest) != 0) {
        log_kv(s, PRS_LOG_ERROR, "msg=planner_not_started job=%s detail=no_thread", oldest->job_id);
        if (oldest->j) oldest->j->planner_active = 0;
        oldest->finished = 1;
        return;
    }
    oldest->started = 1;
    if (oldest->j) {
        double now = prs_mono_s();
        __atomic_store(&oldest->j->plan_started_s, &now, __ATOMIC_RELAXED);
    }
    s->nplanning++;
    log_kv(s, PRS_LOG_INFO, "msg=planning job=%s", oldest->job_id);
}

/* Queue a job's planning and start it when a planner slot is free (the job's lock held
 * exclusively, or the table's). */
static void start_planner(prs_server *s, job *j)
{
    pthread_mutex_lock(&s->task_mu);
    reap_tasks(s, 0);
    int active = j->planner_active;
    pthread_mutex_unlock(&s->task_mu);
    if (active) return;
    plan_task *t = calloc(1, sizeof *t);
    if (t) t->profile = j->profile ? profile_copy(j->profile) : NULL;
    if (!t || !t->profile) {
        free(t);
        log_kv(s, PRS_LOG_ERROR, "msg=planner_not_started job=%s detail=out_of_memory", j->id);
        return;
    }
    t->s = s;
    t->j = j;
    snprintf(t->job_id, sizeof t->job_id, "%s", j->id);
    t->cost_model = j->spec.cost_model;
    t->robust = job_plans_robust(j);
    job_pipeline(j, &t->pipe);
    j->plan_done = j->plan_total = 0;
    pthread_mutex_lock(&s->task_mu);
    j->planner_active = 1;
    t->next = s->tasks;
    s->tasks = t;
    launch_queued(s);
    if (!t->started && !t->finished)
        log_kv(s, PRS_LOG_INFO, "msg=planning_queued job=%s running=%ld", j->id, s->nplanning);
    pthread_mutex_unlock(&s->task_mu);
}

/* Stop the planning of a job that left the planning phase or is deleted (the job's lock held
 * exclusively, or the table's): a queued one is dropped, a running one canceled through its
 * progress callback. */
static void cancel_planner(prs_server *s, job *j)
{
    pthread_mutex_lock(&s->task_mu);
    for (plan_task *t = s->tasks; t; t = t->next) {
        if (t->j != j || t->finished) continue;
        if (!t->started) {
            t->finished = 1;
            j->planner_active = 0;
        } else {
            __atomic_store_n(&t->cancel, CANCEL_JOB_LEFT, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&s->task_mu);
}

/* ---- reload after a failed transaction ---- */

typedef struct reload_ctx {
    store *st;
    const char *id;
    job *found;
    int action;
    prs_error err;
} reload_ctx;

/* The row of the job to reload: load it and stop the walk (1), or its failure. */
static int reload_one_st(void *ud, const store_job_row *row)
{
    reload_ctx *c = ud;
    if (strcmp(row->id, c->id) != 0) return 0;
    int rc = job_load(c->st, row, &c->found, &c->action, &c->err);
    return rc ? rc : 1;
}

/* Copy every field of a job but its reference count, which other threads change meanwhile. */
static void job_copy_but_refs(job *dst, const job *src)
{
    size_t a = offsetof(job, refs), b = a + sizeof dst->refs;
    memcpy(dst, src, a);
    memcpy((char *)dst + b, (const char *)src + b, sizeof *dst - b);
}

static int reload_job(prs_server *s, job *j)
{
    reload_ctx c = {s->st, j->id, NULL, 0, {0, ""}};
    int rc = store_each_job(s->st, reload_one_st, &c);
    if (rc < 0 && !c.found && c.err.code == 0) c.err = *store_error(s->st);
    if (!c.found) {
        log_kv(s, PRS_LOG_ERROR, "msg=reload_failed job=%s detail=%s", j->id, c.err.msg);
        return PRS_EIO;
    }
    /* Swap contents so pointers to j (planner tasks, the table, references) and its lock stay
     * valid; its reference count is left alone (others take references meanwhile). */
    pthread_mutex_lock(&s->task_mu);
    job tmp;
    job_copy_but_refs(&tmp, c.found);
    tmp.next = j->next;
    tmp.planner_active = j->planner_active;
    tmp.plan_started_s = j->plan_started_s; /* written under task_mu, held here */
    tmp.log = j->log;
    tmp.log_ud = j->log_ud;
    tmp.lock = j->lock;
    tmp.deleted = j->deleted;
    tmp.active_unix = __atomic_load_n(&j->active_unix, __ATOMIC_RELAXED);
    job_copy_but_refs(c.found, j);
    job_copy_but_refs(j, &tmp);
    pthread_mutex_unlock(&s->task_mu);
    c.found->next = NULL;
    c.found->lock = NULL;
    job_free(c.found);
    return 0;
}

/* ---- responses ---- */

typedef struct route_match {
    enum route route;
    int method_ok;
    const char *allow;
    char id[SECURE_ID_LEN + 1];
    int has_id; /* the path had a well-formed job id */
    long dp;
} route_match;

typedef struct conn_ctx {
    double start;
    enum route route;
    char job_id[SECURE_ID_LEN + 1];
    size_t limit;
    char *body;
    size_t len, cap;
    int too_large;
    long job_world; /* ranks of the request's job, seen on the first call (0: none) */
    int answered;   /* an answer was queued before the body: the body is not read */
    int status;
    /* A request handed to the pool (its connection suspended meanwhile): its route, and the
     * answer it prepared for the worker to queue once the connection is resumed. */
    int deferred, ready;
    struct prs_server *s;
    struct MHD_Connection *conn;
    workq_item item;
    struct http_worker *worker; /* the worker of a deferred request's connection */
    route_match m;
    int prep_status;
    const char *prep_ctype;
    char *prep_text; /* NULL: no answer could be made, close the connection */
    size_t prep_len;
    void *zeus_req; /* a Zeus-compatible request's context (zeus_routes.h) */
} conn_ctx;

static enum MHD_Result send_text(struct MHD_Connection *c, conn_ctx *cc, int status,
                                 const char *ctype, char *text, size_t len)
{
    if (cc->deferred) { /* on the pool's thread: kept for the HTTP worker to queue */
        cc->prep_status = status;
        cc->prep_ctype = ctype;
        cc->prep_text = text;
        cc->prep_len = len;
        cc->status = status;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    cc->status = status;
    return ret;
}

/* Send a JSON value (steals the reference); reals in their shortest round-trip form. */
static enum MHD_Result send_json(struct MHD_Connection *c, conn_ctx *cc, int status, json_t *v)
{
    char *dump = v ? json_dumps(v, JSON_COMPACT) : NULL;
    char *text = dump ? prs_num_json_shortest(dump) : NULL;
    free(dump);
    json_decref(v);
    if (!text) {
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        text = strdup(oom);
        status = 500;
        if (!text) return MHD_NO;
    }
    return send_text(c, cc, status, "application/json", text, strlen(text));
}

static enum MHD_Result send_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, int status,
                                  const char *code, const char *msg)
{
    json_t *v = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    char q[REQ_MSG_MAX + 8];
    /* 501 answers what the client sent (an unsupported encoding): the client's mistake. 503
     * answers a connection past the cap: by design under a flood, one line each would bury the
     * log, so debug (perseusd_http_requests_total counts them). */
    log_kv(s,
           status == 503                    ? PRS_LOG_DEBUG
           : status >= 500 && status != 501 ? PRS_LOG_ERROR
                                            : PRS_LOG_WARN,
           "msg=request_error route=%s status=%d code=%s job=%s detail=%s", ROUTE_NAMES[cc->route],
           status, code, cc->job_id[0] ? cc->job_id : "-", kv_quote(msg, q, sizeof q));
    return send_json(c, cc, status, v);
}

static enum MHD_Result send_api_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                      const api_err *e)
{
    return send_error(s, c, cc, e->http ? e->http : 500, e->code ? e->code : "internal", e->msg);
}

/* ---- routing ---- */

static void match(const char *method, const char *url, route_match *m)
{
    memset(m, 0, sizeof *m);
    m->route = R_UNKNOWN;
    m->dp = -1;
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0,
        del = strcmp(method, "DELETE") == 0;
#define ROUTE(r, ok, allowed)                                                                      \
    do {                                                                                           \
        m->route = (r);                                                                            \
        m->method_ok = (ok);                                                                       \
        m->allow = (allowed);                                                                      \
        return;                                                                                    \
    } while (0)
    if (strcmp(url, "/healthz") == 0) ROUTE(R_HEALTHZ, get, "GET");
    if (strcmp(url, "/metrics") == 0) ROUTE(R_METRICS, get, "GET");
    if (strcmp(url, "/v1/jobs") == 0) ROUTE(get ? R_LIST : R_CREATE, get || post, "GET, POST");
    if (strncmp(url, "/v1/jobs/", 9) != 0) return;
    const char *p = url + 9, *slash = strchr(p, '/');
    size_t idlen = slash ? (size_t)(slash - p) : strlen(p);
    if (!secure_is_id(p, idlen)) return;
    memcpy(m->id, p, idlen);
    m->id[idlen] = '\0';
    m->has_id = 1;
    const char *rest = slash ? slash : "";
    if (strcmp(rest, "") == 0) ROUTE(del ? R_DELETE : R_STATUS, get || del, "GET, DELETE");
    if (strcmp(rest, "/ranks") == 0) ROUTE(R_REGISTER, post, "POST");
    if (strcmp(rest, "/schedule") == 0) ROUTE(R_SCHEDULE, get, "GET");
    if (strcmp(rest, "/results") == 0) ROUTE(R_RESULTS, post, "POST");
    if (strcmp(rest, "/stragglers") == 0) ROUTE(R_STRAGGLER_SET, post, "POST");
    if (strcmp(rest, "/power_cap") == 0)
        ROUTE(del ? R_POWER_CAP_CLEAR : R_POWER_CAP_SET, post || del, "POST, DELETE");
    if (strcmp(rest, "/frontier") == 0) ROUTE(R_FRONTIER, get, "GET");
    if (strcmp(rest, "/complete") == 0) ROUTE(R_COMPLETE, post, "POST");
    if (strcmp(rest, "/profile") == 0)
        ROUTE(get ? R_PROFILE_GET : R_PROFILE_PUT, get || post, "GET, POST");
    if (strncmp(rest, "/stragglers/", 12) == 0) {
        long dp;
        if (prs_num_parse_long(rest + 12, &dp) == 0 && dp >= 0 && dp < REQ_MAX_WORLD &&
            rest[12] >= '0' && rest[12] <= '9') {
            m->dp = dp;
            ROUTE(R_STRAGGLER_CLEAR, del, "DELETE");
        }
    }
    m->has_id = 0;
#undef ROUTE
}

/* ---- handlers (lock held unless noted) ---- */

/* Hash the presented bearer token (before taking the server lock: hashing is the costly part);
 * 0 if there is none. */
static int bearer_hash(struct MHD_Connection *c, uint8_t hash[SECURE_SHA256_LEN])
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    /* The scheme is case-insensitive (RFC 9110, 11.1), followed by one or more spaces. */
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 0;
    const char *tok = h + 6;
    while (*tok == ' ' || *tok == '\t')
        tok++;
    secure_sha256(tok, strlen(tok), hash);
    return 1;
}

static int authorize(int have_token, const uint8_t hash[SECURE_SHA256_LEN], const job *j)
{
    return have_token && secure_equal(hash, j->token_hash, SECURE_SHA256_LEN);
}

/* Whether a job creation may go on: the server has no creation token, or the request presents
 * it (compared as SHA-256, in constant time). */
static int create_allowed(prs_server *s, struct MHD_Connection *c)
{
    uint8_t presented[SECURE_SHA256_LEN];
    if (!s->has_create_token) return 1;
    return bearer_hash(c, presented) && secure_equal(presented, s->create_hash, SECURE_SHA256_LEN);
}

/* The server's caps on a new job of `world` ranks (lock held): 0, or -1 with e filled. */
static int check_caps(const prs_server *s, long world, api_err *e)
{
    if (s->njobs >= s->cfg.max_jobs)
        return api_fail(e, 429, "too_many_jobs",
                        "the server holds %ld jobs, its limit (--max-jobs %ld): delete finished "
                        "jobs (DELETE /v1/jobs/{id}) or wait for their retention to pass",
                        s->njobs, s->cfg.max_jobs);
    if (s->nranks + world > s->cfg.max_ranks)
        return api_fail(e, 429, "too_many_ranks",
                        "%ld more ranks would make %ld on the server, over its limit "
                        "(--max-ranks %ld)",
                        world, s->nranks + world, s->cfg.max_ranks);
    return 0;
}

static enum MHD_Result handle_create(prs_server *s, struct MHD_Connection *c, conn_ctx *cc)
{
    req_job_spec spec;
    prs_error err;
    if (req_parse_job_spec(cc->body ? cc->body : "", cc->len, &spec, &err))
        return send_error(s, c, cc, 400, "bad_request", err.msg);
    long world = (long)spec.dp * spec.stages * spec.tp;
    if (world > s->cfg.max_world) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "dp x stages x tp = %ld ranks: over the server's limit of %ld per job "
                 "(--max-world)",
                 world, s->cfg.max_world);
        return send_error(s, c, cc, 400, "bad_request", msg);
    }
    char id[SECURE_ID_LEN + 1], token[SECURE_TOKEN_LEN + 1];
    if (secure_new_token(token, NULL))
        return send_error(s, c, cc, 500, "internal", "no randomness");
    uint8_t hash[SECURE_SHA256_LEN];
    secure_sha256(token, strlen(token), hash);
    /* The job's place is reserved under the table lock, the job made and stored outside it
     * (under the store's mutex alone), then linked: the table lock is held for the counts and
     * the link only. */
    pthread_rwlock_wrlock(&s->lock);
    api_err e = {0, NULL, ""};
    if (check_caps(s, world, &e)) {
        pthread_rwlock_unlock(&s->lock);
        return send_api_error(s, c, cc, &e);
    }
    s->njobs++;
    s->nranks += world;
    pthread_rwlock_unlock(&s->lock);
    job *j = NULL;
    int ok = secure_new_id(id, NULL) == 0;
    if (ok) {
        pthread_mutex_lock(&s->store_mu);
        ok = store_begin(s->st) == 0 &&
             job_create(s->st, &spec, id, hash, (long long)time(NULL), &j, &e) == 0 &&
             store_commit(s->st) == 0;
        if (!ok) {
            store_rollback(s->st);
            if (!e.code) job_store_fail(&e, s->st);
        }
        pthread_mutex_unlock(&s->store_mu);
    } else {
        api_fail(&e, 500, "internal", "no randomness");
    }
    int spec_reused = ok && j->frontier != NULL;
    pthread_rwlock_wrlock(&s->lock);
    if (ok && add_job(s, j, 1) != 0) {
        ok = 0;
        api_fail(&e, 500, "internal", "out of memory");
    }
    if (!ok) {
        s->njobs--;
        s->nranks -= world;
    }
    pthread_rwlock_unlock(&s->lock);
    if (!ok) {
        job_free(j);
        return send_api_error(s, c, cc, &e);
    }
    int reused = spec_reused; /* read before the job was linked: others may change it since */
    snprintf(cc->job_id, sizeof cc->job_id, "%s", id);
    log_kv(s, PRS_LOG_INFO, "msg=job_created job=%s ranks=%d reused_frontier=%d", id,
           spec.dp * spec.stages * spec.tp, reused);
    return send_json(c, cc, 201,
                     json_pack("{s:s, s:s, s:s, s:b}", "job_id", id, "token", token, "phase",
                               "registering", "reused_frontier", reused));
}

/* ?offset=&limit= of GET /frontier: neither gives the summary (*limit 0); either gives a page of
 * at most FRONTIER_PAGE_MAX points (FRONTIER_PAGE_DEFAULT when limit is not given). */
#define FRONTIER_PAGE_DEFAULT 1000
#define FRONTIER_PAGE_MAX 10000

/* Query argument `name` as a decimal integer in [lo, hi] into *v: 0, 1 when absent (*v left as
 * it is), -1 when malformed or out of range. */
static int int_arg(struct MHD_Connection *c, const char *name, int lo, int hi, int *v)
{
    const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!t) return 1;
    int x;
    if (!(t[0] >= '0' && t[0] <= '9') || prs_num_parse_int(t, &x) != 0 || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

static int parse_page_args(struct MHD_Connection *c, long *offset, long *limit, api_err *e)
{
    int o = 0, l = FRONTIER_PAGE_DEFAULT;
    int ro = int_arg(c, "offset", 0, INT_MAX, &o),
        rl = int_arg(c, "limit", 1, FRONTIER_PAGE_MAX, &l);
    if (ro < 0) return api_fail(e, 400, "bad_request", "offset: expected an integer >= 0");
    if (rl < 0)
        return api_fail(e, 400, "bad_request", "limit: expected an integer in 1..%d",
                        FRONTIER_PAGE_MAX);
    *offset = o;
    *limit = ro == 1 && rl == 1 ? 0 : l;
    return 0;
}

static int parse_rank_arg(struct MHD_Connection *c, int *rank)
{
    return int_arg(c, "rank", 0, INT_MAX, rank) == 0 ? 0 : -1;
}

/* Run a mutating job call as one transaction (store_mu and the job's lock held exclusively);
 * reload the job if it fails on the server side. */
typedef int (*mutate_fn)(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e);

static int run_tx(prs_server *s, job *j, conn_ctx *cc, mutate_fn fn, void *arg, api_err *e)
{
    int action = JOB_ACT_NONE;
    if (store_begin(s->st)) return job_store_fail(e, s->st);
    job_phase before = j->phase;
    if (fn(s, j, cc, arg, &action, e) != 0 || store_commit(s->st) != 0) {
        store_rollback(s->st);
        if (!e->code) job_store_fail(e, s->st);
        if (e->http >= 500) reload_job(s, j);
        return -1;
    }
    char why[REQ_MSG_MAX + 8];
    if (j->phase != before)
        log_kv(s, j->phase == JOB_FAILED ? PRS_LOG_WARN : PRS_LOG_INFO,
               "msg=phase job=%s from=%s to=%s%s%s", j->id, job_phase_name(before),
               job_phase_name(j->phase), j->phase == JOB_FAILED ? " reason=" : "",
               j->phase == JOB_FAILED ? kv_quote(j->reason, why, sizeof why) : "");
    if (action == JOB_ACT_PLAN) start_planner(s, j);
    return 0;
}

static int do_register(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    int *created = arg;
    req_rank r;
    prs_error err;
    if (req_parse_rank(cc->body ? cc->body : "", cc->len, &r, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_register(j, s->st, &r, created, action, e);
}

/* A results post, parsed before the job lock is taken (parse_rc: req_parse_results' answer). */
typedef struct parsed_results {
    int parse_rc;
    prs_error err;
    req_results r;
} parsed_results;

static int do_results(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    (void)cc;
    parsed_results *p = arg;
    if (p->parse_rc) return api_fail(e, 400, "bad_request", "%s", p->err.msg);
    return job_results(j, s->st, &p->r, action, e);
}

static int do_straggler(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    req_straggler r;
    prs_error err;
    if (req_parse_straggler(cc->body ? cc->body : "", cc->len, &r, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_set_straggler(j, s->st, &r, e);
}

static int do_clear(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    return job_clear_straggler(j, s->st, (int)*(long *)arg, e);
}

static int do_power_cap(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    double watts = 0;
    prs_error err;
    if (*(int *)arg && req_parse_power_cap(cc->body ? cc->body : "", cc->len, &watts, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_set_power_cap(j, s->st, watts, e);
}

/* An upload parsed, checked and written as the CSV to store outside every lock. */
typedef struct parsed_upload {
    prs_profile *p;
    char *csv;
    size_t len;
} parsed_upload;

static int do_profile(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    parsed_upload *u = arg;
    int rc = job_install_profile(j, s->st, u->p, u->csv, u->len, action, e);
    u->p = NULL; /* taken over */
    return rc;
}

/* An uploaded profile, parsed and judged before the job lock is taken: it must parse, cover the
 * job's stages (pipe: the job's pipeline) and make a planning problem with a frontier, within
 * the server's limits. 0 with *out, or -1 with e filled. */
static int parse_upload(prs_server *s, const prs_pipeline *pipe_in, conn_ctx *cc,
                        parsed_upload *out, api_err *e)
{
    out->p = NULL;
    out->csv = NULL;
    prs_pipeline pipe = *pipe_in;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_profile_parse("profile", cc->body ? cc->body : "", cc->len, &p, &err) ||
        prs_profile_check_stages(p, prs_pipeline_chunks(&pipe), &err)) {
        prs_profile_free(p);
        return api_fail(e, 400, "bad_profile", "%s", err.msg);
    }
    char why[REQ_MSG_MAX];
    const char *code;
    if (check_plannable(s, p, &pipe, &code, why, sizeof why)) {
        prs_profile_free(p);
        return api_fail(e, 400, code, "%s", why);
    }
    if (job_profile_csv(p, &out->csv, &out->len)) {
        prs_profile_free(p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    out->p = p;
    return 0;
}

static int do_complete(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    return job_complete(j, s->st, e);
}

/* Delete a job (store_mu and the job's lock held exclusively): marked deleted in the store in
 * one short transaction, whatever it holds, and in memory (requests that reach it from now on
 * answer 404); its planner is stopped. The caller then unlinks it (unlink_job) and wakes the
 * janitor, which purges its rows in bounded batches. why: "request", "admin", "retention" or
 * "idle", for the log. */
static int retire_job(prs_server *s, job *j, const char *why, api_err *e)
{
    if (store_begin(s->st) || store_mark_deleting(s->st, j->id) || store_commit(s->st)) {
        store_rollback(s->st);
        return job_store_fail(e, s->st);
    }
    j->deleted = 1;
    cancel_planner(s, j);
    log_kv(s, PRS_LOG_INFO, "msg=job_deleted job=%s phase=%s by=%s", j->id,
           job_phase_name(j->phase), why);
    return 0;
}

static void wake_janitor(prs_server *s);

/* Whether the presented token is the administrator's (--admin-token). */
static int is_admin(const prs_server *s, int have_token, const uint8_t hash[SECURE_SHA256_LEN])
{
    return have_token && s->has_admin_token && secure_equal(hash, s->admin_hash, SECURE_SHA256_LEN);
}

/* Whether the presented token may act on job j for this route: the job's own token, or the
 * administrator's to delete it or read its status. */
static int may_act(const prs_server *s, enum route r, int have_token,
                   const uint8_t hash[SECURE_SHA256_LEN], const job *j)
{
    if (authorize(have_token, hash, j)) return 1;
    return (r == R_DELETE || r == R_STATUS) && is_admin(s, have_token, hash);
}

/* The routes that only read a job: its lock shared, the store untouched but for the profile. */
static int is_view(enum route r)
{
    return r == R_SCHEDULE || r == R_STATUS || r == R_FRONTIER || r == R_PROFILE_GET;
}

/* A job request's answer, made under the job's locks and sent once they are released. */
typedef struct job_answer {
    api_err e;
    json_t *out; /* a JSON answer, or */
    char *text;  /* a text one (schedule, profile CSV) */
    size_t tlen;
    int status, rc;
} job_answer;

/* What a job request brings, made before any lock is taken. */
typedef struct job_input {
    parsed_upload upload;
    parsed_results results;
    int by_owner; /* the job's own token was presented (else the administrator's: a deletion) */
} job_input;

static void job_input_free(job_input *in)
{
    prs_profile_free(in->upload.p); /* left when the request failed before the upload */
    free(in->upload.csv);
    req_results_free(&in->results.r);
}

/* The routes that read a job (its lock shared; store_mu held for the profile). */
static void answer_view(prs_server *s, struct MHD_Connection *c, const route_match *m, const job *j,
                        job_answer *a)
{
    switch (m->route) {
    case R_STATUS:
        a->out = job_status_json(j);
        break;
    case R_SCHEDULE: {
        int rank;
        if (parse_rank_arg(c, &rank))
            a->rc = api_fail(&a->e, 400, "bad_request", "rank: expected ?rank=N");
        else
            a->rc = job_schedule(j, rank, &a->text, &a->tlen, &a->e);
        break;
    }
    case R_FRONTIER: {
        long offset = 0, limit = 0;
        a->rc = parse_page_args(c, &offset, &limit, &a->e);
        if (!a->rc) a->out = job_frontier_json(j, offset, limit);
        if (!a->rc && !a->out)
            a->rc = api_fail(&a->e, 404, "not_found", "the job has no frontier yet");
        break;
    }
    default: { /* R_PROFILE_GET */
        char src[16];
        if (store_get_profile(s->st, j->id, &a->text, &a->tlen, src))
            a->rc = job_store_fail(&a->e, s->st);
        if (!a->rc && !a->text)
            a->rc = api_fail(&a->e, 404, "not_found", "the job has no profile yet");
    }
    }
}

/* The routes that change a job (store_mu and its lock held exclusively), each one transaction. */
static void answer_change(prs_server *s, conn_ctx *cc, const route_match *m, job *j, job_input *in,
                          job_answer *a)
{
    switch (m->route) {
    case R_REGISTER: {
        int created = 0;
        a->rc = run_tx(s, j, cc, do_register, &created, &a->e);
        a->status = created ? 201 : 200;
        if (!a->rc)
            a->out = json_pack("{s:s, s:i, s:i}", "phase", job_phase_name(j->phase), "registered",
                               j->nregistered, "expected", j->world);
        break;
    }
    case R_RESULTS: {
        size_t n = in->results.parse_rc ? 0 : in->results.r.niterations;
        a->rc = run_tx(s, j, cc, do_results, &in->results, &a->e);
        if (!a->rc)
            a->out = json_pack("{s:I, s:s, s:I, s:I}", "accepted", (json_int_t)n, "phase",
                               job_phase_name(j->phase), "round", (json_int_t)j->round,
                               "measurements", (json_int_t)j->measurements);
        break;
    }
    case R_STRAGGLER_SET:
    case R_STRAGGLER_CLEAR: {
        long dp = m->dp;
        a->rc = run_tx(s, j, cc, m->route == R_STRAGGLER_SET ? do_straggler : do_clear, &dp, &a->e);
        if (!a->rc)
            a->out = json_pack("{s:s, s:I, s:o}", "phase", job_phase_name(j->phase), "round",
                               (json_int_t)j->round, "rule", job_rule_json(j));
        break;
    }
    case R_POWER_CAP_SET:
    case R_POWER_CAP_CLEAR: {
        int set = m->route == R_POWER_CAP_SET;
        a->rc = run_tx(s, j, cc, do_power_cap, &set, &a->e);
        if (!a->rc)
            a->out = json_pack(
                "{s:s, s:I, s:o, s:o}", "phase", job_phase_name(j->phase), "round",
                (json_int_t)j->round, "power_cap",
                plan_powers_cap_json(&j->powers, j->frontier, j->spec.power_cap_w, j->spec.dp),
                "rule", job_rule_json(j));
        break;
    }
    case R_PROFILE_PUT:
        a->rc = run_tx(s, j, cc, do_profile, &in->upload, &a->e);
        if (!a->rc) a->out = json_pack("{s:s}", "phase", job_phase_name(j->phase));
        break;
    case R_COMPLETE:
        a->rc = run_tx(s, j, cc, do_complete, NULL, &a->e);
        if (!a->rc) {
            cancel_planner(s, j);
            a->out = json_pack("{s:s}", "phase", job_phase_name(j->phase));
        }
        break;
    case R_DELETE:
        a->rc = retire_job(s, j, in->by_owner ? "request" : "admin", &a->e);
        if (!a->rc) a->out = json_pack("{s:s, s:b}", "job_id", cc->job_id, "deleted", 1);
        break;
    default:
        a->rc = api_fail(&a->e, 404, "not_found", "no such route");
    }
}

/* An upload is parsed, checked and written as its CSV before any lock, for the job's owner
 * only (the job's pipeline read under its shared lock): 0, or the refusal's HTTP status with
 * e filled. */
static int prepare_upload(prs_server *s, conn_ctx *cc, job *j, int have_token,
                          const uint8_t presented[SECURE_SHA256_LEN], parsed_upload *u, api_err *e)
{
    prs_pipeline pipe;
    pthread_rwlock_rdlock(j->lock);
    int gone = j->deleted, owner = !gone && authorize(have_token, presented, j);
    if (owner) job_pipeline(j, &pipe);
    pthread_rwlock_unlock(j->lock);
    if (gone) api_fail(e, 404, "not_found", "no such job");
    if (!gone && !owner) api_fail(e, 401, "unauthorized", "missing or wrong bearer token");
    if (!gone && owner) parse_upload(s, &pipe, cc, u, e);
    return e->code ? e->http : 0;
}

static enum MHD_Result handle_job(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                  const route_match *m)
{
    uint8_t presented[SECURE_SHA256_LEN];
    int have_token = bearer_hash(c, presented);
    job *j = pin_job(s, m->id); /* the table lock is held for the look-up only */
    if (!j) return send_error(s, c, cc, 404, "not_found", "no such job");
    job_input in = {{NULL, NULL, 0}, {0}, 0};
    job_answer a = {{0, NULL, ""}, NULL, NULL, 0, 200, 0};
    if (m->route == R_PROFILE_PUT &&
        prepare_upload(s, cc, j, have_token, presented, &in.upload, &a.e)) {
        unpin_job(j);
        return send_api_error(s, c, cc, &a.e);
    }
    /* A results body is parsed before any lock, so a large post holds up no other client; its
     * errors are answered after the token was checked. */
    if (m->route == R_RESULTS)
        in.results.parse_rc =
            req_parse_results(cc->body ? cc->body : "", cc->len, &in.results.r, &in.results.err);
    /* Views share the job's lock (the profile's text is read under store_mu too); changes take
     * store_mu first, then the job's lock exclusively. */
    int view = is_view(m->route), with_store = !view || m->route == R_PROFILE_GET;
    if (with_store) pthread_mutex_lock(&s->store_mu);
    if (view)
        pthread_rwlock_rdlock(j->lock);
    else
        pthread_rwlock_wrlock(j->lock);
    in.by_owner = authorize(have_token, presented, j);
    if (j->deleted)
        a.rc = api_fail(&a.e, 404, "not_found", "no such job");
    else if (!in.by_owner && !may_act(s, m->route, have_token, presented, j))
        a.rc = api_fail(&a.e, 401, "unauthorized", "missing or wrong bearer token");
    else {
        __atomic_store_n(&j->active_unix, (long long)time(NULL), __ATOMIC_RELAXED);
        if (view)
            answer_view(s, c, m, j, &a);
        else
            answer_change(s, cc, m, j, &in, &a);
    }
    pthread_rwlock_unlock(j->lock);
    if (with_store) pthread_mutex_unlock(&s->store_mu);
    if (m->route == R_DELETE && !a.rc) {
        unlink_job(s, j);
        wake_janitor(s);
    }
    unpin_job(j);
    job_input_free(&in);
    if (a.rc) {
        json_decref(a.out);
        free(a.text);
        return send_api_error(s, c, cc, &a.e);
    }
    if (a.text)
        return send_text(c, cc, 200, m->route == R_SCHEDULE ? "application/json" : "text/csv",
                         a.text, a.tlen);
    return send_json(c, cc, a.status, a.out);
}

/* ---- metrics ---- */

static void count_request(prs_server *s, enum route r, int status, double secs)
{
    int ci = N_CODES - 1;
    for (int i = 0; i < N_CODES - 1; i++)
        if (CODES[i] == status) ci = i;
    int b = N_BUCKETS;
    for (int i = 0; i < N_BUCKETS; i++)
        if (secs <= BUCKETS[i]) {
            b = i;
            break;
        }
    pthread_mutex_lock(&s->m.mu);
    s->m.count[r][ci]++;
    s->m.hist[r][b]++;
    s->m.sum_s[r] += secs;
    pthread_mutex_unlock(&s->m.mu);
}

static int cmp_job_id(const void *a, const void *b)
{
    return strcmp((*(job *const *)a)->id, (*(job *const *)b)->id);
}

/* GET /v1/jobs, the administrator's: one line of every job the server holds, by id. The table
 * lock is held only to take references (pin_all_jobs); each job is read under its own lock. */
static enum MHD_Result handle_list(prs_server *s, struct MHD_Connection *c, conn_ctx *cc)
{
    uint8_t presented[SECURE_SHA256_LEN];
    if (!is_admin(s, bearer_hash(c, presented), presented))
        return send_error(s, c, cc, 401, "unauthorized",
                          s->has_admin_token ? "listing jobs needs the server's admin token "
                                               "(Authorization: Bearer ...)"
                                             : "listing jobs needs an admin token, and the server "
                                               "has none (perseusd --admin-token-file)");
    size_t n;
    job **all = pin_all_jobs(s, &n);
    if (n > 1) qsort(all, n, sizeof(job *), cmp_job_id);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        job *j = all[i];
        pthread_rwlock_rdlock(j->lock);
        if (!j->deleted)
            json_array_append_new(
                list, json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i}", "job_id", j->id,
                                "model", j->spec.model, "phase", job_phase_name(j->phase), "stages",
                                j->spec.stages, "dp", j->spec.dp, "tp", j->spec.tp,
                                "ranks_registered", j->nregistered, "ranks_expected", j->world));
        pthread_rwlock_unlock(j->lock);
    }
    unpin_all_jobs(all, n);
    if (!list) return send_error(s, c, cc, 500, "internal", "out of memory");
    return send_json(
        c, cc, 200,
        json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(list), "jobs", list));
}

static enum MHD_Result handle_metrics(prs_server *s, struct MHD_Connection *c, conn_ctx *cc)
{
    long phases[JOB_NPHASES] = {0};
    size_t nrows = 0, njobs = 0;
    job **pinned = pin_all_jobs(s, &njobs);
    job_metric_row *rows = calloc(njobs > 0 ? njobs : 1, sizeof *rows);
    for (size_t i = 0; rows && i < njobs; i++) {
        job *j = pinned[i];
        pthread_rwlock_rdlock(j->lock);
        if (!j->deleted && j->phase >= 0 && j->phase < JOB_NPHASES) phases[j->phase]++;
        if (!j->deleted) job_metric_row_of(j, &rows[nrows++]);
        pthread_rwlock_unlock(j->lock);
    }
    unpin_all_jobs(pinned, njobs);
    char *text = NULL;
    size_t len = 0;
    FILE *f = rows ? open_memstream(&text, &len) : NULL;
    if (!f) {
        free(rows);
        return send_error(s, c, cc, 500, "internal", "out of memory");
    }
    fprintf(f, "# HELP perseusd_jobs Jobs by phase.\n# TYPE perseusd_jobs gauge\n");
    for (int p = 0; p < JOB_NPHASES; p++)
        fprintf(f, "perseusd_jobs{phase=\"%s\"} %ld\n", job_phase_name((job_phase)p), phases[p]);
    fprintf(f,
            "# HELP perseusd_jobs_loaded Jobs known to the server.\n"
            "# TYPE perseusd_jobs_loaded gauge\nperseusd_jobs_loaded %zu\n",
            nrows);
    /* The per-job series name job ids and models: not for anyone who can reach the port. */
    if (s->has_metrics_token || s->loopback) job_metrics_write(f, rows, nrows);
    free(rows);
    prs__metrics_build_info(f);
    prs__metrics_process(f);
    metrics m;
    pthread_mutex_lock(&s->m.mu);
    memcpy(&m, &s->m, sizeof m);
    pthread_mutex_unlock(&s->m.mu);
    fprintf(f, "# HELP perseusd_http_requests_total HTTP requests by route and status.\n"
               "# TYPE perseusd_http_requests_total counter\n");
    for (int r = 0; r < N_ROUTES; r++)
        for (int k = 0; k < N_CODES; k++)
            if (m.count[r][k]) {
                if (k < N_CODES - 1)
                    fprintf(f, "perseusd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                            ROUTE_NAMES[r], CODES[k], m.count[r][k]);
                else
                    fprintf(f, "perseusd_http_requests_total{route=\"%s\",code=\"other\"} %llu\n",
                            ROUTE_NAMES[r], m.count[r][k]);
            }
    fprintf(f, "# HELP perseusd_http_request_duration_seconds Request latency by route.\n"
               "# TYPE perseusd_http_request_duration_seconds histogram\n");
    char num[PRS_NUMFMT_MAX];
    for (int r = 0; r < N_ROUTES; r++) {
        unsigned long long cum = 0;
        for (int b = 0; b <= N_BUCKETS; b++)
            cum += m.hist[r][b];
        if (!cum) continue;
        unsigned long long total = cum;
        cum = 0;
        for (int b = 0; b < N_BUCKETS; b++) {
            cum += m.hist[r][b];
            fprintf(f,
                    "perseusd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %llu\n",
                    ROUTE_NAMES[r], prs_num_fmt_double(num, sizeof num, BUCKETS[b]), cum);
        }
        fprintf(f, "perseusd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                ROUTE_NAMES[r], total);
        fprintf(f, "perseusd_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n",
                ROUTE_NAMES[r], m.sum_s[r]);
        fprintf(f, "perseusd_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                ROUTE_NAMES[r], total);
    }
    fprintf(
        f,
        "# HELP perseusd_planning_seconds Wall time of completed planner runs.\n"
        "# TYPE perseusd_planning_seconds summary\n"
        "perseusd_planning_seconds_sum %.6f\nperseusd_planning_seconds_count %llu\n"
        "# HELP perseusd_planning_last_seconds Wall time of the last planner run.\n"
        "# TYPE perseusd_planning_last_seconds gauge\nperseusd_planning_last_seconds %.6f\n"
        "# HELP perseusd_planning_failures_total Planner runs that failed.\n"
        "# TYPE perseusd_planning_failures_total counter\nperseusd_planning_failures_total %llu\n"
        "# HELP perseusd_uptime_seconds Seconds since the server started.\n"
        "# TYPE perseusd_uptime_seconds gauge\nperseusd_uptime_seconds %.3f\n",
        m.planning_sum_s, m.planning_count, m.planning_last_s, m.planning_failed,
        prs_mono_s() - s->started);
    if (fclose(f) != 0) {
        free(text);
        return send_error(s, c, cc, 500, "internal", "out of memory");
    }
    return send_text(c, cc, 200, "text/plain; version=0.0.4", text, len);
}

/* ---- libmicrohttpd callbacks ---- */

/* The tracking record of a connection (its socket context), or NULL. */
static conn_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    prs_server *s = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    double secs = prs_mono_s() - cc->start;
    count_request(s, cc->route, cc->status, secs);
    log_kv(s, PRS_LOG_DEBUG, "msg=request route=%s status=%d job=%s ms=%.3f complete=%d",
           ROUTE_NAMES[cc->route], cc->status, cc->job_id[0] ? cc->job_id : "-", secs * 1e3,
           toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free(cc->body);
    free(cc->prep_text);
    zeus_request_done(cc->zeus_req);
    free(cc);
    *con_cls = NULL;
    conn_track *k = track_of(c);
    if (k) {
        k->in_request = 0;
        k->since = prs_mono_s();
    }
}

/* Connections opening and closing (on the worker's thread, or the stopping one at shutdown). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    http_worker *w = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *k = calloc(1, sizeof *k);
        if (!k) return;
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->c = c;
        k->w = w;
        k->fd = i ? i->connect_fd : -1;
        k->since = prs_mono_s();
        long n = __atomic_add_fetch(&w->s->nconns, 1, __ATOMIC_RELAXED);
        k->over_cap = n > (long)w->s->cfg.max_connections;
        k->next = w->conns;
        if (w->conns) w->conns->prev = k;
        w->conns = k;
        *socket_context = k;
        return;
    }
    conn_track *k = *socket_context;
    if (!k) return;
    if (k->prev)
        k->prev->next = k->next;
    else
        w->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    __atomic_sub_fetch(&w->s->nconns, 1, __ATOMIC_RELAXED);
    free(k);
    *socket_context = NULL;
}

/* A connection opened past the cap that sends no request within this long is closed: it holds
 * a socket the server cannot serve. */
#define OVER_CAP_GRACE_S 1.0

/* Close connections past their timeout (worker thread, at most every 100 ms): one that sends no
 * complete request headers within --idle-timeout of opening or of its last answer (idle, or
 * trickling bytes: libmicrohttpd's own timeout restarts at every byte), and one whose request
 * (body and answer) takes longer than --request-timeout. Shutting the socket down makes
 * libmicrohttpd see it closed and release it. */
static void sweep_timeouts(http_worker *w)
{
    double now = prs_mono_s();
    if (now - w->swept < 0.1) return;
    w->swept = now;
    const prs_server_config *cfg = &w->s->cfg;
    for (conn_track *k = w->conns; k; k = k->next) {
        double limit = k->in_request ? cfg->request_timeout_s
                       : k->over_cap ? OVER_CAP_GRACE_S
                                     : cfg->idle_timeout_s;
        if (k->cut || k->fd < 0 || now - k->since <= limit) continue;
        k->cut = 1;
        shutdown(k->fd, SHUT_RDWR);
        log_kv(w->s, PRS_LOG_DEBUG, "msg=connection_timeout in_request=%d seconds=%.1f",
               k->in_request, now - k->since);
    }
}

/* Counts the Content-Length headers of a request and whether their values differ, and the
 * Transfer-Encoding headers. */
typedef struct length_headers {
    int count, differ, encodings;
    const char *first;
} length_headers;

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    length_headers *l = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) l->encodings++;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0) return MHD_YES;
    if (l->count++ == 0)
        l->first = value;
    else if (strcmp(l->first, value ? value : "") != 0)
        l->differ = 1;
    return MHD_YES;
}

/* How the body is framed, checked on the first call: two different Content-Length values, or a
 * Content-Length with a Transfer-Encoding, are ambiguous (400: a proxy might frame the body
 * otherwise); a Transfer-Encoding other than chunked is not supported (501, at once: otherwise
 * libmicrohttpd would wait for a body it cannot delimit). Returns 0 when the framing is fine, else
 * 1 with the queued answer's result in *ret. */
static int check_framing(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                         enum MHD_Result *ret)
{
    length_headers l = {0, 0, 0, ""};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &l);
    const char *te =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    cc->answered = 1;
    if (l.differ)
        *ret = send_error(s, c, cc, 400, "bad_request",
                          "conflicting Content-Length headers (give exactly one)");
    else if (l.encodings > 1)
        /* libmicrohttpd reads only the first: a proxy might frame the body by another */
        *ret = send_error(s, c, cc, 400, "bad_request",
                          "more than one Transfer-Encoding header (give one: chunked)");
    else if (te && strcasecmp(te, "chunked") != 0)
        *ret = send_error(s, c, cc, 501, "not_implemented",
                          "unsupported Transfer-Encoding (only chunked is supported)");
    else if (te && l.count)
        *ret = send_error(s, c, cc, 400, "bad_request",
                          "both Content-Length and Transfer-Encoding given (give one)");
    else {
        cc->answered = 0;
        return 0;
    }
    return 1;
}

/* Requests with a body this large run on the pool (see 'Requests with large bodies'). */
#define HEAVY_BODY_BYTES ((size_t)64 * 1024)

/* A job of this many ranks has its status built on the pool: it lists every rank and pipeline
 * (a job of 16,384 pipelines: megabytes of JSON, half a second of work). */
#define HEAVY_STATUS_RANKS 1024L

/* Whether a complete request runs on the pool rather than on its HTTP worker: a body of
 * HEAVY_BODY_BYTES or more, any profile upload (checking the planning problem can take long
 * even for a small profile), the status of a large job. */
static int is_heavy(const route_match *m, const conn_ctx *cc)
{
    return cc->len >= HEAVY_BODY_BYTES || m->route == R_PROFILE_PUT ||
           (m->route == R_STATUS && cc->job_world >= HEAVY_STATUS_RANKS);
}

static enum MHD_Result dispatch(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                const route_match *mp);
static void defer(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, const route_match *m);
static enum MHD_Result send_prepared(struct MHD_Connection *c, conn_ctx *cc);

/* Whether a job route may go on, from its headers alone: 0, or the status to refuse it with (404:
 * no such job; 401: not the job's token, nor the administrator's for a deletion). */
static int job_refusal(prs_server *s, struct MHD_Connection *c, const route_match *m, long *world)
{
    uint8_t presented[SECURE_SHA256_LEN];
    int have_token = bearer_hash(c, presented);
    job *j = pin_job(s, m->id);
    if (!j) return 404;
    pthread_rwlock_rdlock(j->lock);
    int refused = j->deleted ? 404 : !may_act(s, m->route, have_token, presented, j) ? 401 : 0;
    *world = j->world;
    pthread_rwlock_unlock(j->lock);
    unpin_job(j);
    return refused;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    prs_server *s = cls;
    conn_ctx *cc = *con_cls;
    route_match m;
    match(method, url, &m);
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        cc->start = prs_mono_s();
        cc->route = m.route;
        cc->limit = m.route == R_PROFILE_PUT ? s->cfg.max_profile_bytes : s->cfg.max_body_bytes;
        if (m.has_id) snprintf(cc->job_id, sizeof cc->job_id, "%s", m.id);
        *con_cls = cc;
        conn_track *k = track_of(c);
        if (k) {
            k->in_request = 1;
            k->since = cc->start;
            if (k->over_cap) {
                cc->answered = 1;
                return send_error(s, c, cc, 503, "unavailable",
                                  "the server is at its connection limit (--max-connections): "
                                  "retry later");
            }
        }
        enum MHD_Result framing;
        if (check_framing(s, c, cc, &framing) != 0) return framing;
        /* Creation needs the creation token: checked before any body is read. */
        if (m.route == R_CREATE && m.method_ok && !create_allowed(s, c)) {
            cc->answered = 1;
            return send_error(s, c, cc, 401, "unauthorized",
                              "creating a job needs the server's creation token "
                              "(Authorization: Bearer ...)");
        }
        /* A job route's token is checked on this first call, which has the headers: a request
         * without the job's token is refused before any of its body is read (a response queued
         * now makes libmicrohttpd answer and close the connection). */
        if (m.has_id && m.method_ok) {
            int refused = job_refusal(s, c, &m, &cc->job_world);
            if (refused) {
                cc->answered = 1;
                return refused == 404 ? send_error(s, c, cc, 404, "not_found", "no such job")
                                      : send_error(s, c, cc, 401, "unauthorized",
                                                   "missing or wrong bearer token");
            }
        }
        /* A declared body over the limit is refused before it is read: a response queued on
         * this first call makes libmicrohttpd answer and close the connection. */
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        long declared;
        if (cl && prs_num_parse_long(cl, &declared) == 0 && declared > 0 &&
            (size_t)declared > cc->limit) {
            cc->too_large = 1;
            char msg[96];
            snprintf(msg, sizeof msg, "request body larger than %zu bytes", cc->limit);
            return send_error(s, c, cc, 413, "too_large", msg);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (cc->answered) return MHD_NO; /* close: the answer is already queued */
        if (cc->too_large || cc->len + *upload_data_size > cc->limit) {
            /* A chunked body that grew past the limit: no response can be queued in the middle
             * of an upload, so the connection is closed. */
            cc->too_large = 1;
            cc->status = 413;
            return MHD_NO;
        }
        if (cc->len + *upload_data_size + 1 > cc->cap) {
            size_t nc = cc->cap ? cc->cap : 4096;
            while (nc < cc->len + *upload_data_size + 1)
                nc *= 2;
            char *b = realloc(cc->body, nc);
            if (!b) return MHD_NO;
            cc->body = b;
            cc->cap = nc;
        }
        memcpy(cc->body + cc->len, upload_data, *upload_data_size);
        cc->len += *upload_data_size;
        cc->body[cc->len] = '\0';
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (cc->ready) return send_prepared(c, cc);
    if (cc->too_large || cc->answered) return MHD_YES; /* response already queued */
    enum MHD_Result zr; /* the Zeus-compatible routes, when on (zeus_routes.h) */
    conn_track *zk = m.route == R_UNKNOWN && s->zeus ? track_of(c) : NULL;
    if (m.route == R_UNKNOWN && s->zeus &&
        zeus_dispatch(s->zeus, c, url, method, cc->body, cc->len, zk ? zk->w->wake_fd : -1,
                      &cc->zeus_req, &cc->status, &zr))
        return zr;
    if (m.route == R_UNKNOWN) return send_error(s, c, cc, 404, "not_found", "no such route");
    if (!m.method_ok) {
        char msg[96];
        snprintf(msg, sizeof msg, "method %.16s not allowed here (allowed: %s)", method, m.allow);
        return send_error(s, c, cc, 405, "method_not_allowed", msg);
    }
    if (s->heavy && is_heavy(&m, cc)) {
        defer(s, c, cc, &m);
        return MHD_YES;
    }
    return dispatch(s, c, cc, &m);
}

/* ---- requests with large bodies ----
 *
 * An HTTP worker serves many connections from one thread, so a request that takes long there
 * (parsing a 1 MB results post and storing every window, an 11 MB profile) would hold up every
 * other connection of that worker, polls included. Such a request (is_heavy: a large body, a
 * profile upload, a large job's status) is handed to a small pool of threads instead (s->heavy):
 * its connection is suspended, the pool runs the handler, which prepares its answer in the
 * request's context (send_text) instead of queueing it, and resumes the connection; libmicrohttpd
 * then calls on_request once more, which queues the prepared answer (send_prepared). At shutdown
 * the pool finishes what it holds before the daemons stop (stop_http), so no connection stays
 * suspended. */

static void run_deferred(void *arg)
{
    conn_ctx *cc = arg;
    dispatch(cc->s, cc->conn, cc, &cc->m);
    cc->deferred = 0;
    cc->ready = 1;
    MHD_resume_connection(cc->conn);
    if (cc->worker) {
        uint64_t one = 1;
        ssize_t w = write(cc->worker->wake_fd, &one, sizeof one);
        (void)w; /* a full counter still wakes the worker */
    }
}

/* Suspend the connection and queue its request on the pool. */
static void defer(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, const route_match *m)
{
    cc->deferred = 1;
    cc->s = s;
    cc->conn = c;
    conn_track *k = track_of(c);
    cc->worker = k ? k->w : NULL;
    cc->m = *m;
    MHD_suspend_connection(c);
    workq_push(s->heavy, &cc->item, run_deferred, cc);
}

/* The answer the pool prepared, queued now that the connection is back with its worker. */
static enum MHD_Result send_prepared(struct MHD_Connection *c, conn_ctx *cc)
{
    cc->ready = 0;
    cc->answered = 1;
    char *text = cc->prep_text;
    cc->prep_text = NULL;
    if (!text) return MHD_NO;
    return send_text(c, cc, cc->prep_status, cc->prep_ctype, text, cc->prep_len);
}

/* Answer a complete request (on an HTTP worker, or on the pool for a large body). */
static enum MHD_Result dispatch(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                const route_match *mp)
{
    route_match m = *mp;
    switch (m.route) {
    case R_HEALTHZ: {
        pthread_rwlock_rdlock(&s->lock);
        long n = s->njobs;
        pthread_rwlock_unlock(&s->lock);
        return send_json(c, cc, 200,
                         json_pack("{s:s, s:I}", "status", "ok", "jobs", (json_int_t)n));
    }
    case R_METRICS: {
        uint8_t presented[SECURE_SHA256_LEN];
        if (s->has_metrics_token && !(bearer_hash(c, presented) &&
                                      secure_equal(presented, s->metrics_hash, SECURE_SHA256_LEN)))
            return send_error(s, c, cc, 401, "unauthorized",
                              "/metrics needs the server's metrics token (Authorization: Bearer "
                              "...)");
        return handle_metrics(s, c, cc);
    }
    case R_CREATE:
        return handle_create(s, c, cc);
    case R_LIST:
        return handle_list(s, c, cc);
    default:
        return handle_job(s, c, cc, &m);
    }
}

/* ---- HTTP workers ----
 *
 * Each worker thread runs its own libmicrohttpd daemon in "external loop" mode: epoll inside the
 * daemon, but the waiting is ours. All daemons share one listening socket (each holds a dup), so
 * the kernel spreads new connections over the workers. We wait on the daemon's epoll descriptor
 * and a stop pipe with poll(), with libmicrohttpd's own timeout, then let the daemon work without
 * blocking (MHD_run). Waiting ourselves matters: libmicrohttpd 0.9.75's internal epoll loop calls
 * epoll_wait again with the full idle timeout whenever one call returned exactly its batch size
 * (128 events), even though connections are queued for processing, so a burst of 1,024 requests
 * could leave all of them unanswered until the connection timeout (60 s). */

static void *http_worker_main(void *arg)
{
    http_worker *w = arg;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(w->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    int epfd = info ? info->epoll_fd : -1;
    int passes = 0;
    for (;;) {
        MHD_UNSIGNED_LONG_LONG to = 0;
        int timeout_ms = 100; /* the timeout sweep's period */
        if (MHD_get_timeout(w->mhd, &to) == MHD_YES && to < (MHD_UNSIGNED_LONG_LONG)timeout_ms)
            timeout_ms = (int)to;
        /* A resumed connection (its answer prepared on the pool) must be taken back, its last
         * call made and its answer written: libmicrohttpd's epoll descriptor does not wake us
         * for that (the socket was writable all along), so every large request waited for the
         * next timeout, 100 ms. The pool wakes us through wake_fd, and a few passes without
         * waiting finish the work. */
        if (passes > 0) {
            passes--;
            timeout_ms = 0;
        }
        struct pollfd pf[3] = {{epfd, POLLIN, 0}, {w->stop_fd, POLLIN, 0}, {w->wake_fd, POLLIN, 0}};
        int n = poll(pf, 3, timeout_ms);
        if (n < 0 && errno != EINTR) break;
        if (pf[1].revents) break;
        if (pf[2].revents) {
            uint64_t count;
            ssize_t r = read(w->wake_fd, &count, sizeof count);
            (void)r;
            passes = 4;
        }
        if (MHD_run(w->mhd) != MHD_YES) break;
        sweep_timeouts(w);
    }
    return NULL;
}

/* Connections a daemon admits past the global cap, to answer them 503: a quarter of the cap, at
 * least 256. */
static unsigned over_cap_room(unsigned cap)
{
    return cap / 4 > 256 ? cap / 4 : 256;
}

/* One worker's daemon on its copy of the listening socket: HTTPS when s->tls holds a
 * certificate. The logger comes first, so that MHD reports option errors through it too. */
static struct MHD_Daemon *start_daemon(prs_server *s, http_worker *w, int fd, unsigned per,
                                       unsigned per_ip)
{
    struct MHD_OptionItem tls[] = {
        {s->tls.cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->tls.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key},
        {MHD_OPTION_END, 0, NULL}};
    return MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME |
                                (s->tls.cert ? MHD_USE_TLS : 0),
                            0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
                            MHD_OPTION_ARRAY, tls, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_CONNECTION_LIMIT, per, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            per_ip, MHD_OPTION_NOTIFY_CONNECTION, on_connection, w,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(s->cfg.request_timeout_s + 1),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
}

/* The listening socket, bound first of all: a port in use is refused before the data directory
 * or the database is touched. s->listen_fd and s->port, or an error (the socket closed). */
static int open_listener(prs_server *s, const struct sockaddr_in *addr, prs_error *err)
{
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) return prs_error_set(err, PRS_EIO, "socket: %s", strerror(errno));
    int one = 1, rc = 0;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in bound = {0}; /* filled by getsockname */
    socklen_t blen = sizeof bound;
    if (bind(s->listen_fd, (const struct sockaddr *)addr, sizeof *addr) != 0 ||
        listen(s->listen_fd, 4096) != 0)
        rc = prs_error_set(err, PRS_EIO, "cannot listen on %s:%d: %s", s->listen_host, s->cfg.port,
                           strerror(errno));
    else if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &blen) != 0)
        rc = prs_error_set(err, PRS_EIO, "getsockname: %s", strerror(errno));
    if (rc) {
        close(s->listen_fd);
        s->listen_fd = -1;
        return rc;
    }
    s->port = ntohs(bound.sin_port);
    return 0;
}

static int start_http(prs_server *s, prs_error *err)
{
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0)
        return prs_error_set(err, PRS_EIO, "pipe: %s", strerror(errno));
    s->nworkers = s->cfg.threads;
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    if (!s->workers) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (unsigned i = 0; i < s->nworkers; i++)
        s->workers[i].wake_fd = -1;
    /* The global cap is ours (on_connection), counted over every worker: each daemon admits as
     * many as the cap plus room for the ones past it, which get a 503, so that libmicrohttpd's
     * own limit (past which it stops accepting, leaving new clients waiting in the backlog) is
     * never what a client meets first, however unevenly the kernel spreads the connections. A
     * daemon admits its share of one client's. */
    unsigned per = s->cfg.max_connections + over_cap_room(s->cfg.max_connections);
    unsigned per_ip = (s->cfg.max_client_connections + s->nworkers - 1) / s->nworkers;
    for (unsigned i = 0; i < s->nworkers; i++) {
        http_worker *w = &s->workers[i];
        w->stop_fd = s->stop_pipe[0];
        w->s = s;
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->wake_fd < 0) return prs_error_set(err, PRS_EIO, "eventfd: %s", strerror(errno));
        int fd = fcntl(s->listen_fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return prs_error_set(err, PRS_EIO, "dup: %s", strerror(errno));
        w->mhd = start_daemon(s, w, fd, per, per_ip);
        if (!w->mhd) {
            close(fd);
            return prs_error_set(err, PRS_EIO, "cannot start the HTTP%s daemon on %s:%d%s",
                                 s->tls.cert ? "S" : "", s->listen_host, s->port,
                                 s->tls.cert ? " (is the key the certificate's, and both PEM?)"
                                             : "");
        }
        if (pthread_create(&w->thread, NULL, http_worker_main, w) != 0)
            return prs_error_set(err, PRS_EIO, "cannot start an HTTP worker thread");
        w->started = 1;
    }
    return 0;
}

/* Stop the workers (requests being handled finish first: handlers run on the worker threads),
 * then the daemons, which close the connections left. */
static void stop_http(prs_server *s)
{
    if (s->stop_pipe[1] >= 0) {
        ssize_t w = write(s->stop_pipe[1], "x", 1);
        (void)w;
    }
    for (unsigned i = 0; s->workers && i < s->nworkers; i++)
        if (s->workers[i].started) pthread_join(s->workers[i].thread, NULL);
    /* The pool answers what it holds and resumes those connections: a daemon must not stop
     * with a connection suspended. */
    workq_stop(s->heavy);
    s->heavy = NULL;
    for (unsigned i = 0; s->workers && i < s->nworkers; i++) {
        if (s->workers[i].mhd) MHD_stop_daemon(s->workers[i].mhd);
        if (s->workers[i].wake_fd >= 0) close(s->workers[i].wake_fd);
    }
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
    for (int i = 0; i < 2; i++)
        if (s->stop_pipe[i] >= 0) close(s->stop_pipe[i]);
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
}

/* ---- the janitor: retention, idle jobs, purging deleted jobs ---- */

/* Rows a purge deletes in one transaction (store_purge_step): a few milliseconds of store_mu,
 * after which the requests waiting for the store go first. */
#define PURGE_BATCH_ROWS 2000L

/* Why job j is to be deleted now ("retention", "idle"), or NULL (its lock held). */
static const char *expiry_of(const prs_server *s, const job *j, long long now)
{
    if (j->deleted) return NULL;
    int finished = j->phase == JOB_DONE || j->phase == JOB_FAILED;
    if (finished && s->cfg.retention_s >= 0 && j->finished_unix &&
        (double)(now - j->finished_unix) >= s->cfg.retention_s)
        return "retention";
    long long active = __atomic_load_n(&j->active_unix, __ATOMIC_RELAXED);
    if (!finished && s->cfg.job_idle_timeout_s >= 0 &&
        (double)(now - active) >= s->cfg.job_idle_timeout_s)
        return "idle";
    return NULL;
}

/* Delete the finished jobs whose retention has passed and the unfinished ones no request
 * reached for --job-idle-timeout, each as a DELETE would (retire_job). */
static void expire_jobs(prs_server *s)
{
    long long now = (long long)time(NULL);
    size_t n = 0;
    job **all = pin_all_jobs(s, &n);
    for (size_t i = 0; i < n; i++) {
        job *j = all[i];
        pthread_rwlock_rdlock(j->lock);
        const char *why = expiry_of(s, j, now);
        pthread_rwlock_unlock(j->lock);
        if (!why) continue;
        pthread_mutex_lock(&s->store_mu);
        pthread_rwlock_wrlock(j->lock);
        api_err e = {0, NULL, ""};
        why = expiry_of(s, j, now); /* again: a request may have come meanwhile */
        int retired = why && retire_job(s, j, why, &e) == 0;
        pthread_rwlock_unlock(j->lock);
        pthread_mutex_unlock(&s->store_mu);
        if (why && !retired) log_kv(s, PRS_LOG_ERROR, "msg=expiry_failed detail=%s", e.msg);
        if (retired) unlink_job(s, j);
    }
    unpin_all_jobs(all, n);
}

static int janitor_stopping(prs_server *s)
{
    return __atomic_load_n(&s->janitor_stop, __ATOMIC_RELAXED);
}

/* Pages of free space given back to the file system per step (4 MiB of 4 KiB pages). */
#define VACUUM_STEP_PAGES 1024L

/* Give the space of purged rows back to the file system, a bounded step under store_mu at a
 * time (a database made by an older server, without incremental auto-vacuum, keeps it). */
static void shrink_store(prs_server *s)
{
    for (long left = 1; left > 0 && !janitor_stopping(s);) {
        pthread_mutex_lock(&s->store_mu);
        int rc = store_vacuum_step(s->st, VACUUM_STEP_PAGES, &left);
        if (rc) log_kv(s, PRS_LOG_ERROR, "msg=vacuum_failed detail=%s", store_error(s->st)->msg);
        pthread_mutex_unlock(&s->store_mu);
        if (rc) return;
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* Purge the rows of the jobs marked deleted, a bounded batch per transaction, store_mu taken
 * and released around each: no lock is held across the whole purge. A failure is logged and
 * the purge tried again at the janitor's next turn; a shutdown stops it, and the next start
 * resumes it. */
static void purge_deleted(prs_server *s)
{
    while (!janitor_stopping(s)) {
        char id[32];
        long n = 0;
        int done = 0;
        pthread_mutex_lock(&s->store_mu);
        int rc = store_next_deleting(s->st, id);
        if (!rc && id[0]) {
            rc = store_begin(s->st);
            if (!rc) rc = store_purge_step(s->st, id, PURGE_BATCH_ROWS, &n, &done);
            if (!rc) rc = store_commit(s->st);
            if (rc) store_rollback(s->st);
        }
        if (rc) log_kv(s, PRS_LOG_ERROR, "msg=purge_failed detail=%s", store_error(s->st)->msg);
        pthread_mutex_unlock(&s->store_mu);
        if (rc) return;
        if (!id[0]) {
            shrink_store(s);
            return;
        }
        if (done) log_kv(s, PRS_LOG_DEBUG, "msg=job_purged job=%.16s", id);
        /* Leave the store to the requests that waited for it during the batch: a mutex is not
         * fair, and this thread would otherwise take it again at once. */
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* Ask the janitor to purge now (a job was deleted). */
static void wake_janitor(prs_server *s)
{
    pthread_mutex_lock(&s->janitor_mu);
    s->purge_pending = 1;
    pthread_cond_signal(&s->janitor_cv);
    pthread_mutex_unlock(&s->janitor_mu);
}

/* The janitor's period: a quarter of the shorter of the retention and the idle timeout (at
 * least 50 ms, at most 30 s). */
static double janitor_period_s(const prs_server *s)
{
    double p = 120;
    if (s->cfg.retention_s >= 0 && s->cfg.retention_s < p) p = s->cfg.retention_s;
    if (s->cfg.job_idle_timeout_s >= 0 && s->cfg.job_idle_timeout_s < p)
        p = s->cfg.job_idle_timeout_s;
    p /= 4;
    return p < 0.05 ? 0.05 : p > 30 ? 30 : p;
}

/* The janitor thread: expires jobs every period and purges deleted ones when woken (and at
 * start, for deletions a restart interrupted), until the server stops. */
static void *janitor_main(void *arg)
{
    prs_server *s = arg;
    double period = janitor_period_s(s), next = prs_mono_s() + period;
    pthread_mutex_lock(&s->janitor_mu);
    s->purge_pending = 1;
    while (!s->janitor_stop) {
        if (!s->purge_pending && prs_mono_s() < next) {
            struct timespec until = prs_mono_timespec(next);
            pthread_cond_timedwait(&s->janitor_cv, &s->janitor_mu, &until);
            continue;
        }
        int purge = s->purge_pending;
        s->purge_pending = 0;
        pthread_mutex_unlock(&s->janitor_mu);
        if (prs_mono_s() >= next) {
            expire_jobs(s);
            next = prs_mono_s() + period;
            purge = 1;
        }
        if (purge) purge_deleted(s);
        pthread_mutex_lock(&s->janitor_mu);
    }
    pthread_mutex_unlock(&s->janitor_mu);
    return NULL;
}

static void stop_janitor(prs_server *s)
{
    if (!s->janitor_started) return;
    pthread_mutex_lock(&s->janitor_mu);
    __atomic_store_n(&s->janitor_stop, 1, __ATOMIC_RELAXED);
    pthread_cond_signal(&s->janitor_cv);
    pthread_mutex_unlock(&s->janitor_mu);
    pthread_join(s->janitor, NULL);
    s->janitor_started = 0;
}

/* ---- lifecycle ---- */

void prs_server_config_default(prs_server_config *c)
{
    memset(c, 0, sizeof *c);
    c->listen_host = "127.0.0.1";
    c->port = PRS_SERVER_DEFAULT_PORT;
    c->max_body_bytes = 1u << 20;
    c->max_profile_bytes = (size_t)PRS_PROFILE_MAX_BYTES;
    c->max_connections = 8192;
    c->threads = 0; /* one per online CPU */
    c->log_level = PRS_LOG_INFO;
    c->log_fd = 2;
    c->max_jobs = 1024;
    c->max_world = 65536;
    c->max_ranks = 262144;
    c->retention_s = 7 * 86400.0;
    c->max_client_connections = 2048;
    c->idle_timeout_s = 30;
    c->request_timeout_s = 120;
    c->max_planners = 2;
    c->plan_timeout_s = 600;
    c->max_plan_points = 1000000;
    c->max_plan_memory = (size_t)1 << 30;
    c->job_idle_timeout_s = 86400;
}

/* Limits left 0 (or out of range) by the caller take prs_server_config_default's values. */
static void fill_unset_limits(prs_server_config *c)
{
    prs_server_config d;
    prs_server_config_default(&d);
    if (!c->max_jobs) c->max_jobs = d.max_jobs;
    if (!c->max_world) c->max_world = d.max_world;
    if (!c->max_ranks) c->max_ranks = d.max_ranks;
    if (c->max_planners < 1) c->max_planners = d.max_planners;
    if (!c->max_client_connections) c->max_client_connections = d.max_client_connections;
    if (!(c->idle_timeout_s > 0)) c->idle_timeout_s = d.idle_timeout_s;
    if (!(c->request_timeout_s > 0)) c->request_timeout_s = d.request_timeout_s;
    if (!(c->plan_timeout_s > 0)) c->plan_timeout_s = d.plan_timeout_s;
    if (c->max_plan_points < 1) c->max_plan_points = d.max_plan_points;
    if (!c->max_plan_memory) c->max_plan_memory = d.max_plan_memory;
    if (c->job_idle_timeout_s == 0) c->job_idle_timeout_s = d.job_idle_timeout_s;
}

static int load_job_row(void *ud, const store_job_row *row)
{
    prs_server *s = ud;
    job *j = NULL;
    int action = JOB_ACT_NONE;
    prs_error err = {0, ""};
    if (job_load(s->st, row, &j, &action, &err) != 0) {
        char q[PRS_ERRMSG_MAX + 8];
        log_kv(s, PRS_LOG_ERROR, "msg=job_not_loaded job=%.16s detail=%s", row->id,
               kv_quote(err.msg, q, sizeof q));
        return 0; /* one unreadable job must not take the others down */
    }
    if (add_job(s, j, 0) != 0) {
        job_free(j);
        return PRS_ENOMEM;
    }
    log_kv(s, PRS_LOG_INFO, "msg=job_loaded job=%s phase=%s registered=%d measurements=%lld", j->id,
           job_phase_name(j->phase), j->nregistered, j->measurements);
    if (action == JOB_ACT_PLAN) start_planner(s, j);
    return 0;
}

/* The data directory and its missing parents (the default one, ~/.local/state/perseusd, may be
 * the first thing made under ~/.local), each only for its owner. 0, or -1 with errno. */
static int make_dir(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        *q = '/';
    }
    return mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static void server_free(prs_server *s)
{
    if (!s) return;
    for (int b = 0; b < JOB_BUCKETS; b++)
        while (s->jobs[b]) {
            job *j = s->jobs[b];
            s->jobs[b] = j->next;
            job_drop(j);
        }
    store_close(s->st);
    if (s->listen_fd >= 0) close(s->listen_fd);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->store_mu);
    pthread_mutex_destroy(&s->task_mu);
    pthread_mutex_destroy(&s->m.mu);
    pthread_mutex_destroy(&s->janitor_mu);
    pthread_cond_destroy(&s->janitor_cv);
    free(s->listen_host);
    free(s->db_path);
    free(s->data_dir);
    tls_free(&s->tls);
    free(s);
}

int prs_server_start(const prs_server_config *cfg, prs_server **out, prs_error *err)
{
    *out = NULL;
    if (!cfg || !cfg->db_path || !cfg->data_dir || !cfg->listen_host)
        return prs_error_set(err, PRS_EINVAL, "db_path, data_dir and listen_host are required");
    if (cfg->port < 0 || cfg->port > 65535)
        return prs_error_set(err, PRS_EINVAL, "port %d is not in 0..65535", cfg->port);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->listen_host, &addr.sin_addr) != 1)
        return prs_error_set(err, PRS_EINVAL, "listen address '%s' is not a numeric IPv4 address",
                             cfg->listen_host);
    /* Anyone who can reach the port can create jobs unless a creation token is set: that is
     * only acceptable on the loopback network (127.0.0.0/8). */
    if ((ntohl(addr.sin_addr.s_addr) >> 24) != 127 && !(cfg->create_token && cfg->create_token[0]))
        return prs_error_set(err, PRS_EINVAL,
                             "listening on %s (beyond loopback) needs a creation token "
                             "(--create-token)",
                             cfg->listen_host);
    if (cfg->max_jobs < 0 || cfg->max_world < 0 || cfg->max_ranks < 0)
        return prs_error_set(err, PRS_EINVAL, "max_jobs, max_world and max_ranks must be >= 0");
    prs_server *s = calloc(1, sizeof *s);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    s->listen_fd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->cfg = *cfg;
    if (!s->cfg.max_body_bytes) s->cfg.max_body_bytes = 1u << 20;
    if (!s->cfg.max_profile_bytes) s->cfg.max_profile_bytes = (size_t)PRS_PROFILE_MAX_BYTES;
    if (!s->cfg.max_connections) s->cfg.max_connections = 8192;
    if (!s->cfg.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        s->cfg.threads = n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
    }
    rwlock_init_writer_first(&s->lock);
    pthread_mutex_init(&s->store_mu, NULL);
    pthread_mutex_init(&s->task_mu, NULL);
    pthread_mutex_init(&s->m.mu, NULL);
    prs_sync_init_mono(&s->janitor_mu, &s->janitor_cv);
    fill_unset_limits(&s->cfg);
    if (cfg->create_token && cfg->create_token[0]) {
        secure_sha256(cfg->create_token, strlen(cfg->create_token), s->create_hash);
        s->has_create_token = 1;
    }
    s->cfg.create_token = NULL; /* only its hash is kept */
    if (cfg->admin_token && cfg->admin_token[0]) {
        secure_sha256(cfg->admin_token, strlen(cfg->admin_token), s->admin_hash);
        s->has_admin_token = 1;
    }
    s->cfg.admin_token = NULL;
    if (cfg->metrics_token && cfg->metrics_token[0]) {
        secure_sha256(cfg->metrics_token, strlen(cfg->metrics_token), s->metrics_hash);
        s->has_metrics_token = 1;
    }
    s->cfg.metrics_token = NULL;
    s->loopback = (ntohl(addr.sin_addr.s_addr) >> 24) == 127;
    s->started = prs_mono_s();
    s->listen_host = strdup(cfg->listen_host);
    s->db_path = strdup(cfg->db_path);
    s->data_dir = strdup(cfg->data_dir);
    if (!s->listen_host || !s->db_path || !s->data_dir) {
        server_free(s);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    s->cfg.listen_host = s->listen_host;
    s->cfg.db_path = s->db_path;
    s->cfg.data_dir = s->data_dir;
    if (tls_load(cfg->tls_cert_file, cfg->tls_key_file, &s->tls, err)) {
        server_free(s);
        return err ? err->code : PRS_EINVAL;
    }
    s->cfg.tls_cert_file = s->cfg.tls_key_file = NULL; /* read; the text is in s->tls */
    if (open_listener(s, &addr, err)) {
        server_free(s);
        return PRS_EIO;
    }
    if (make_dir(s->data_dir)) {
        int e = errno;
        prs_error_set(err, PRS_EIO, "%s: cannot create data directory: %s", s->data_dir,
                      strerror(e));
        server_free(s);
        return PRS_EIO;
    }
    if (store_open(s->db_path, s->cfg.sync_full, &s->st, err) != 0) {
        if (err) err->code = PRS_EIO;
        server_free(s);
        return PRS_EIO;
    }
    pthread_rwlock_wrlock(&s->lock);
    int rc = store_each_job(s->st, load_job_row, s);
    pthread_rwlock_unlock(&s->lock);
    if (rc) {
        prs_error_set(err, PRS_EIO, "%s", store_error(s->st)->msg);
        prs_server_stop(s);
        return PRS_EIO;
    }
    if (pthread_create(&s->janitor, NULL, janitor_main, s) != 0) {
        prs_error_set(err, PRS_EIO, "cannot start the janitor thread");
        prs_server_stop(s);
        return PRS_EIO;
    }
    s->janitor_started = 1;
    char zeus_base[96]; /* the Zeus-compatible routes reach the v1 API here (zeus_routes.h) */
    snprintf(zeus_base, sizeof zeus_base, "%s://%s:%d", s->tls.cert ? "https" : "http",
             strcmp(s->listen_host, "0.0.0.0") ? s->listen_host : "127.0.0.1", s->port);
    if (cfg->zeus.enabled && zeus_start(cfg, zeus_base, &s->zeus, err) != 0) {
        prs_server_stop(s);
        return PRS_EINVAL;
    }
    /* Two threads for large bodies, one can parse while the other holds the store, niced so
     * that the HTTP workers' polls come first on a busy machine. */
    long loaded = s->njobs; /* read before the workers can create jobs (add_job) */
    if (workq_start(2, 5, &s->heavy, err) != 0 || start_http(s, err) != 0) {
        prs_server_stop(s);
        return PRS_EIO;
    }
    log_kv(s, PRS_LOG_INFO, "msg=listening version=%s addr=%s port=%d db=%s jobs=%ld", PRS_VERSION,
           s->listen_host, s->port, s->db_path, loaded);
    *out = s;
    return 0;
}

int prs_server_port(const prs_server *s)
{
    return s ? s->port : 0;
}

void prs_server_stop(prs_server *s)
{
    if (!s) return;
    zeus_stop(s->zeus); /* answers what waits while the workers still run */
    stop_http(s);
    zeus_free(s->zeus);
    stop_janitor(s);
    pthread_rwlock_wrlock(&s->lock);
    s->stopping = 1;
    for (plan_task *t = s->tasks; t; t = t->next)
        __atomic_store_n(&t->cancel, CANCEL_SHUTDOWN, __ATOMIC_RELEASE);
    reap_tasks(s, 1); /* planner threads take the lock to finish: reap_tasks drops it to join */
    pthread_rwlock_unlock(&s->lock);
    log_kv(s, PRS_LOG_INFO, "msg=stopped");
    server_free(s);
}
