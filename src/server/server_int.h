/* The server's shared state (struct prs_server) and the calls its parts make to each other. Each
 * part is a file of its own: the jobs table (jobs_table.c), the planner task queue (planner.c),
 * the janitor (janitor.c), the HTTP workers (http_conn.c), request framing and body reading
 * (http_request.c), the route table (router.c), the handlers (route_job.c, route_server.c),
 * replies (reply.c), authentication (auth.c), metrics (server_metrics.c), the log
 * (server_log.c), and the lifecycle (server.c).
 *
 * Locks, outermost first: none is taken while a later one in this list is held by the same
 * thread, and none is taken twice.
 * - lock (rwlock, writers first): the jobs table (jobs buckets, njobs, nranks) and the planner
 *   tasks' job pointers (plan_task.j). Held only to look a job up and take a reference
 *   (job.refs, table_pin), or to link or unlink a job: never across parsing, checking,
 *   serialising or SQLite work.
 * - store_mu (mutex): the SQLite connection (st), held for a whole transaction. A change takes
 *   it before its job's lock, so a job's lock is never held while waiting for the store.
 * - job.lock (rwlock, writers first, one per job): shared by a job's views, exclusive for its
 *   changes. Requests of different jobs never wait for each other here.
 * - task_mu (mutex): the planner tasks (tasks, nplanning, stopping's effect) and every job's
 *   planner_active and plan_started_s.
 * - m.mu (mutex): the request and planning metrics (srv_metrics); a leaf, held for a copy.
 * - janitor_mu (mutex, with janitor_cv): the janitor's flags (janitor_stop, purge_pending); a
 *   leaf, never held while another lock is taken.
 * Without a lock, by atomics: job.refs, job.active_unix, job.plan_started_s (reads),
 * plan_task.cancel, nconns, janitor_stop (reads). An HTTP worker's connections (conn_track) are
 * touched only by its own thread.
 *
 * Errors: below the HTTP layer every call returns 0 or a negative PRS_E* code with details in a
 * prs_error, the store's in its handle (store_error), the job calls in an api_err, which the
 * handlers answer as the JSON error {"error": {"code", "message"}} (reply.c). */
#ifndef PRS_SERVER_SERVER_INT_H
#define PRS_SERVER_SERVER_INT_H

#include "perseus/logfmt.h"
#include "perseus/planner.h"
#include "perseus/server.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "secure.h"
#include "store.h"
#include "tls.h"
#include "workq.h"
#include "zeus_routes.h"

/* Routes (router.c): their ids count requests in the metrics. */
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
    R_CLUSTER_CREATE,
    R_CLUSTER_GET,
    R_CLUSTER_DELETE,
    R_CLUSTER_LOAD,
    R_CLUSTER_DESIRED,
    R_CLUSTER_PROFILE,
    R_UNKNOWN,
    N_ROUTES
};

/* Status codes counted apart (server_metrics.c), plus one for the others, and latency buckets. */
#define SRV_N_CODES 13
#define SRV_N_BUCKETS 14

typedef struct srv_metrics {
    pthread_mutex_t mu;
    unsigned long long count[N_ROUTES][SRV_N_CODES];
    unsigned long long hist[N_ROUTES][SRV_N_BUCKETS + 1]; /* cumulative at render time */
    double sum_s[N_ROUTES];
    unsigned long long planning_count, planning_failed;
    double planning_sum_s, planning_last_s;
} srv_metrics;

#define JOB_BUCKETS 1024

struct prs_server {
    prs_server_config cfg;
    char *listen_host, *db_path, *data_dir;
    tls_pem tls;                 /* certificate and key when serving HTTPS (tls.h) */
    struct http_worker *workers; /* cfg.threads of them, each with its own daemon and thread */
    unsigned nworkers;
    int listen_fd;
    int stop_pipe[2]; /* written once at shutdown: wakes every worker */
    int port;
    /* The locks: see the top of this file. */
    pthread_rwlock_t lock;
    pthread_mutex_t store_mu, task_mu;
    store *st;
    job *jobs[JOB_BUCKETS];
    long njobs;
    struct plan_task *tasks;    /* newest first: running and queued plannings */
    long nplanning;             /* planner threads running */
    int stopping;               /* shutdown: no planner starts, no check goes on (atomics) */
    double plan_mem;            /* the memory estimates the running planners hold (task_mu) */
    pthread_cond_t plan_mem_cv; /* plan_mem went down, or a task was canceled (task_mu) */
    long nranks;                /* ranks of all jobs together (--max-ranks) */
    long nconns;                /* open connections over every worker (atomics) */
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
    srv_metrics m;                  /* request counts and latencies, planner runs (m.mu) */
    workq *heavy;                   /* runs the requests with large bodies (http_request.c) */
    zeus_srv *zeus;                 /* the Zeus-compatible routes (zeus_routes.h); NULL when off */
    struct cluster_table *clusters; /* inference clusters (cluster.h), memory only */
    double started;
};

/* ---- the log (server_log.c): one line per event, key=value ---- */

void srv_log(prs_server *s, prs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A message as a key=value value into out (n bytes): quoted, with quotes and backslashes
 * replaced. Returns out. */
const char *srv_kv_quote(const char *in, char *out, size_t n);

/* ---- the jobs table (jobs_table.c) ---- */

/* Initialise a reader-writer lock that prefers writers: 0 or pthread's error. */
int table_rwlock_init(pthread_rwlock_t *l);
/* Put a job into the table with a lock of its own and the table's reference (lock held
 * exclusively); counted: whether njobs and nranks count it already (a creation reserves its
 * place first). 0, or -1 when out of memory (the job is left to the caller). */
int table_add(prs_server *s, job *j, int counted);
/* A reference to job id (NULL: no such job), taken under the table lock and held without it:
 * the job's memory stays until the reference is dropped (table_unpin), even if the job is
 * deleted meanwhile (then job.deleted is set). */
job *table_pin(prs_server *s, const char *id);
/* Drop a reference; the last one frees the job (it was unlinked: the table's is gone). */
void table_unpin(job *j);
/* A reference to every job in the table (malloc'd array of *n; NULL with *n 0 when there are
 * none or memory is short), for the walks over all jobs (metrics, the janitor). */
job **table_pin_all(prs_server *s, size_t *n);
void table_unpin_all(job **all, size_t n);
/* Take job j out of the buckets and the counts (lock held exclusively). */
void table_unlink_locked(prs_server *s, job *j);
/* Free every job left in the table (shutdown: no other thread runs). */
void table_free_all(prs_server *s);
/* Reload job j from the store after a failed transaction (store_mu and j's lock held
 * exclusively), so memory never holds what the database lost: 0, or PRS_EIO (logged). */
int table_reload(prs_server *s, job *j);

/* ---- the planner task queue (planner.c) ---- */

/* The options a planning of pipe with cost model `model` runs with (clean frontier, the
 * server's point limit); their progress callback stops a check when the server stops. */
void planq_opts(const prs_server *s, const prs_pipeline *pipe, prs_cost_model model,
                prs_plan_opts *o);
/* The problem has a frontier to find and fits --max-plan-points and --max-plan-memory
 * (prs_plan_measure, with o's progress callback: it stops the check): 0 with the planner's
 * peak-memory estimate in *peak and o->threads lowered as far as needed to fit the memory
 * limit, or -1 with the reason in why (n bytes) and its API error code in *code (bad_profile,
 * too_large_to_plan, or canceled when the progress callback stopped it). */
int planq_check_plannable(const prs_server *s, const prs_profile *p, prs_plan_opts *o, double *peak,
                          const char **code, char *why, size_t n);
/* Queue a job's planning and start it when a planner slot is free (the job's lock held
 * exclusively, or the table's). */
void planq_start(prs_server *s, job *j);
/* Stop the planning of a job that left the planning phase or is deleted (the job's lock held
 * exclusively, or the table's). */
void planq_cancel(prs_server *s, job *j);
/* Detach the tasks of job j, being unlinked (table lock held exclusively): their results are
 * dropped. */
void planq_detach_locked(prs_server *s, job *j);
/* Shutdown: cancel every planning, join the threads and free the tasks (table lock held
 * exclusively; dropped while joining). */
void planq_stop_all(prs_server *s);

/* ---- deletion and the janitor (janitor.c) ---- */

/* Delete a job (store_mu and the job's lock held exclusively): marked deleted in the store in
 * one short transaction and in memory, its planner stopped. why: for the log. 0, or -1 with e. */
int janitor_retire_job(prs_server *s, job *j, const char *why, api_err *e);
/* Take a retired job out of the table and drop the table's reference (no lock held). */
void janitor_unlink_job(prs_server *s, job *j);
/* Ask the janitor to purge now (a job was deleted). */
void janitor_wake(prs_server *s);
int janitor_start(prs_server *s, prs_error *err);
void janitor_join(prs_server *s);

/* ---- HTTP (http_conn.c) ---- */

/* Bind the listening socket (s->listen_fd, s->port): 0, or an error (nothing left open). */
int http_listen(prs_server *s, const struct sockaddr_in *addr, prs_error *err);
/* Start the HTTP workers on the listening socket: 0, or an error (http_stop cleans up). */
int http_start(prs_server *s, prs_error *err);
/* Stop the workers, finish the deferred requests, stop the daemons, close the socket. */
void http_stop(prs_server *s);

#endif
