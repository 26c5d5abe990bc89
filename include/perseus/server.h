/* perseusd as a library: the control plane that registers the ranks of training jobs, sweeps their
 * GPU clocks to build a stage profile, plans, serves each rank its clocks and switches plans when
 * a data-parallel pipeline straggles (docs/design.md, docs/server.md, docs/api.md).
 *
 * One prs_server owns an HTTP daemon (libmicrohttpd, its own threads), a SQLite database (WAL)
 * holding every job, and a planner thread per job in the planning phase. Everything that matters
 * is committed to the database before a request is acknowledged, so a server started on the same
 * database after a crash resumes every job where it was. */
#ifndef PERSEUS_SERVER_H
#define PERSEUS_SERVER_H

#include <stddef.h>

#include "perseus/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PRS_SERVER_DEFAULT_PORT 7787

typedef enum prs_log_level {
    PRS_LOG_ERROR = 0, /* server faults: 5xx requests, storage and planner-thread failures */
    PRS_LOG_WARN = 1,  /* and the client's mistakes (4xx requests) and failed plannings */
    PRS_LOG_INFO = 2,  /* and job events */
    PRS_LOG_DEBUG = 3  /* and every request */
} prs_log_level;

/* Server configuration: a value type. */
typedef struct prs_server_config {
    const char *listen_host;  /* numeric IPv4 address to bind; default "127.0.0.1" */
    int port;                 /* 0 picks a free port (see prs_server_port) */
    const char *db_path;      /* SQLite database file; required (created if missing) */
    const char *data_dir;     /* scratch directory for frontier files (server-made names only);
                               * required, created if missing */
    size_t max_body_bytes;    /* JSON request bodies; default 1 MiB */
    size_t max_profile_bytes; /* uploaded profile CSV; default 16 MiB */
    unsigned max_connections; /* concurrent connections; default 8192 (split evenly over the
                               * threads) */
    unsigned threads;         /* HTTP worker threads; 0 (the default): one per online CPU, at
                               * most 16 */
    prs_log_level log_level;  /* default PRS_LOG_INFO */
    int log_fd;               /* where one-line logs go; default 2 (stderr); -1: nowhere */
    int sync_full;            /* fsync every commit (survive power loss); default 0: a commit
                               * survives a crash of the process, not of the machine */
    const char *create_token; /* secret that POST /v1/jobs must present as its bearer token;
                               * NULL: none (allowed only on a loopback address) */
    long max_jobs;            /* jobs held at once (finished ones included); default 1024 */
    long max_world;           /* ranks of one job; default 65536 */
    long max_ranks;           /* ranks of all jobs together; default 262144 */
    double retention_s;       /* finished (done or failed) jobs are deleted this long after
                               * they finished; default 7 days; < 0: kept forever */
    long max_planners;        /* planner threads at once (more plannings wait); default 2 */
    double plan_timeout_s;    /* a planning running longer fails the job; default 600 s */
    long max_plan_points;     /* a problem whose frontier could have more points is refused
                               * (profile upload: 400; measured: the job fails); default 1e6 */
    size_t max_plan_memory;   /* likewise for the planner's tables; default 1 GiB */
    unsigned max_client_connections; /* connections from one IP address; default 2048 */
    double idle_timeout_s;     /* a connection that sends no complete request headers this long
                                * after opening or its last answer is closed, even if it
                                * trickles bytes; default 30 s */
    double request_timeout_s;  /* a request (body and answer) taking longer is closed;
                                * default 120 s */
    const char *tls_cert_file; /* PEM certificate (chain) to serve HTTPS with; NULL: plain HTTP */
    const char *tls_key_file;  /* its PEM private key; set both or neither */
    const char *admin_token;   /* secret whose bearer may delete any job (DELETE
                                * /v1/jobs/{id}); NULL: none. Only its SHA-256 is kept */
    const char *metrics_token; /* secret that GET /metrics must present as its bearer token;
                                * NULL: none (then the per-job series, which name job ids and
                                * models, are left out when listening beyond loopback) */
    double job_idle_timeout_s; /* an unfinished job that no request reached this long is
                                * deleted, freeing its place; 0: the default, 1 day; < 0: never */
    double change_cost_us;     /* the time a clock change adds, for jobs whose spec gives no
                                * change_cost_us (docs/planner.md, 'Clock changes'); default 0:
                                * changes are free; 0 to 100000 */
    /* Zeus-compatible routes (docs/api.md, "Zeus-compatible routes"); off unless enabled. */
    struct {
        int enabled;              /* serve them */
        const char *prefix;       /* secret path prefix under which clients beyond loopback may
                                   * use them; NULL: loopback clients only */
        long microbatches;        /* for clients that do not send num_microbatches; 0: none */
        long min_clock_mhz;       /* profiling floor; 0: the lowest clock the ranks list */
        double blocking_power_w;  /* planning's blocking power; <= 0: measured */
        const char *profile_path; /* stage profile CSV that jobs whose clients post no results
                                   * plan from; NULL: none */
        int profile_only;         /* end after profiling, as the artifact's profiler does */
    } zeus;
} prs_server_config;

/* Defaults as documented beside each field (db_path and data_dir NULL: must be set). */
void prs_server_config_default(prs_server_config *c);

typedef struct prs_server prs_server;

/* Open (or create) the database, load every job, restart planning where a job was planning and
 * start serving. On success *out owns a running server; on failure *out is NULL and err says why
 * (PRS_EINVAL for a bad configuration, PRS_EIO for a database or socket problem). */
int prs_server_start(const prs_server_config *cfg, prs_server **out, prs_error *err);

/* Port the server listens on (useful with port 0). */
int prs_server_port(const prs_server *s);

/* Stop accepting requests, finish the ones in flight, wait for planner threads, close the
 * database. NULL is a no-op. */
void prs_server_stop(prs_server *s);

#ifdef __cplusplus
}
#endif
#endif
