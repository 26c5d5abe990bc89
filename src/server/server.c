/* perseusd's server (perseus/server.h): its lifecycle, start and stop, around the parts in
 * files of their own (server_int.h lists them, and the locks and their order).
 *
 * Concurrency. HTTP worker threads each drive a libmicrohttpd daemon on a shared listening
 * socket (http_conn.c). The jobs table's lock is held only to find a job and take a reference
 * to it, or to add or unlink one: a pointer swap, never work (jobs_table.c). A request then
 * works on its job under the job's own lock (shared for views, exclusive for changes), and a
 * change takes the store's mutex before the job's lock, so no job's lock is held while waiting
 * for another job's transaction (route_job.c). Deleting a job marks it deleted in one short
 * transaction and unlinks it; the janitor thread purges its rows in bounded batches
 * (janitor.c). The planner runs outside every lock in a thread per planning job and takes them
 * only to report progress and to install its result (planner.c).
 *
 * Durability. A mutating request runs as one transaction; the response is queued only after the
 * commit, so an acknowledged result is in the database. If the transaction fails the job is
 * reloaded from the database, so memory never holds what the database lost.
 *
 * Safety. Ids and tokens are made by the server from /dev/urandom; tokens are kept only as
 * SHA-256 and compared in constant time (auth.c). Bodies are bounded (413 past the limit) and
 * parsed strictly (request.c). No request text reaches SQL (bound values only), and the server
 * makes no file besides its database: frontiers go to and from the store as plans.prs text in
 * memory. Every error is a JSON body {"error": {"code", "message"}} (reply.c). */
#include "perseus/clock.h"
#include "perseus/limits.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "cluster_store.h"
#include "server_int.h"

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
        srv_log(s, PRS_LOG_ERROR, "msg=job_not_loaded job=%.16s detail=%s", row->id,
                srv_kv_quote(err.msg, q, sizeof q));
        return 0; /* one unreadable job must not take the others down */
    }
    if (table_add(s, j, 0) != 0) {
        job_free(j);
        return PRS_ENOMEM;
    }
    srv_log(s, PRS_LOG_INFO, "msg=job_loaded job=%s phase=%s registered=%d measurements=%lld",
            j->id, job_phase_name(j->phase), j->nregistered, j->measurements);
    if (action == JOB_ACT_PLAN) planq_start(s, j);
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
    table_free_all(s);
    cluster_table_free(s->clusters);
    store_close(s->st);
    if (s->listen_fd >= 0) close(s->listen_fd);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->store_mu);
    pthread_mutex_destroy(&s->task_mu);
    pthread_cond_destroy(&s->plan_mem_cv);
    pthread_mutex_destroy(&s->m.mu);
    pthread_mutex_destroy(&s->janitor_mu);
    pthread_cond_destroy(&s->janitor_cv);
    free(s->listen_host);
    free(s->db_path);
    free(s->data_dir);
    tls_free(&s->tls);
    free(s);
}

/* The configuration's checks, and the address to listen on into *addr: 0, or PRS_EINVAL. */
static int check_config(const prs_server_config *cfg, struct sockaddr_in *addr, prs_error *err)
{
    if (!cfg || !cfg->db_path || !cfg->data_dir || !cfg->listen_host)
        return prs_error_set(err, PRS_EINVAL, "db_path, data_dir and listen_host are required");
    if (cfg->port < 0 || cfg->port > 65535)
        return prs_error_set(err, PRS_EINVAL, "port %d is not in 0..65535", cfg->port);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->listen_host, &addr->sin_addr) != 1)
        return prs_error_set(err, PRS_EINVAL, "listen address '%s' is not a numeric IPv4 address",
                             cfg->listen_host);
    /* Anyone who can reach the port can create jobs unless a creation token is set: that is
     * only acceptable on the loopback network (127.0.0.0/8). */
    if ((ntohl(addr->sin_addr.s_addr) >> 24) != 127 && !(cfg->create_token && cfg->create_token[0]))
        return prs_error_set(err, PRS_EINVAL,
                             "listening on %s (beyond loopback) needs a creation token "
                             "(--create-token)",
                             cfg->listen_host);
    if (cfg->max_jobs < 0 || cfg->max_world < 0 || cfg->max_ranks < 0)
        return prs_error_set(err, PRS_EINVAL, "max_jobs, max_world and max_ranks must be >= 0");
    return 0;
}

/* Only a token's hash is kept: into hash, with *has set when the token is given. */
static void keep_token_hash(const char *token, uint8_t hash[SECURE_SHA256_LEN], int *has)
{
    if (token && token[0]) {
        secure_sha256(token, strlen(token), hash);
        *has = 1;
    }
}

/* A server with its configuration (limits filled in, tokens hashed, strings copied) and its
 * locks, nothing opened yet: NULL when out of memory. */
static prs_server *server_new(const prs_server_config *cfg, const struct sockaddr_in *addr)
{
    prs_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->listen_fd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->cfg = *cfg;
    if (!s->cfg.max_body_bytes) s->cfg.max_body_bytes = 1u << 20;
    if (!s->cfg.max_profile_bytes) s->cfg.max_profile_bytes = (size_t)PRS_PROFILE_MAX_BYTES;
    if (!s->cfg.max_connections) s->cfg.max_connections = 8192;
    if (!s->cfg.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        s->cfg.threads = n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
    }
    table_rwlock_init(&s->lock);
    s->clusters = cluster_table_new();
    pthread_mutex_init(&s->store_mu, NULL);
    pthread_mutex_init(&s->task_mu, NULL);
    pthread_cond_init(&s->plan_mem_cv, NULL);
    pthread_mutex_init(&s->m.mu, NULL);
    prs_sync_init_mono(&s->janitor_mu, &s->janitor_cv);
    fill_unset_limits(&s->cfg);
    keep_token_hash(cfg->create_token, s->create_hash, &s->has_create_token);
    keep_token_hash(cfg->admin_token, s->admin_hash, &s->has_admin_token);
    keep_token_hash(cfg->metrics_token, s->metrics_hash, &s->has_metrics_token);
    s->cfg.create_token = s->cfg.admin_token = s->cfg.metrics_token = NULL;
    s->loopback = (ntohl(addr->sin_addr.s_addr) >> 24) == 127;
    s->started = prs_mono_s();
    s->listen_host = strdup(cfg->listen_host);
    s->db_path = strdup(cfg->db_path);
    s->data_dir = strdup(cfg->data_dir);
    if (!s->listen_host || !s->db_path || !s->data_dir || !s->clusters) {
        server_free(s);
        return NULL;
    }
    s->cfg.listen_host = s->listen_host;
    s->cfg.db_path = s->db_path;
    s->cfg.data_dir = s->data_dir;
    return s;
}

int prs_server_start(const prs_server_config *cfg, prs_server **out, prs_error *err)
{
    *out = NULL;
    struct sockaddr_in addr;
    int rc = check_config(cfg, &addr, err);
    if (rc) return rc;
    prs_server *s = server_new(cfg, &addr);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (tls_load(cfg->tls_cert_file, cfg->tls_key_file, &s->tls, err)) {
        server_free(s);
        return err ? err->code : PRS_EINVAL;
    }
    s->cfg.tls_cert_file = s->cfg.tls_key_file = NULL; /* read; the text is in s->tls */
    if (http_listen(s, &addr, err)) {
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
    rc = store_each_job(s->st, load_job_row, s);
    pthread_rwlock_unlock(&s->lock);
    if (rc) {
        prs_error_set(err, PRS_EIO, "%s", store_error(s->st)->msg);
        prs_server_stop(s);
        return PRS_EIO;
    }
    if (cluster_store_restore_all(s, err) != 0) {
        prs_server_stop(s);
        return PRS_EIO;
    }
    if (janitor_start(s, err) != 0) {
        prs_server_stop(s);
        return PRS_EIO;
    }
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
    if (workq_start(2, 5, &s->heavy, err) != 0 || http_start(s, err) != 0) {
        prs_server_stop(s);
        return PRS_EIO;
    }
    srv_log(s, PRS_LOG_INFO, "msg=listening version=%s addr=%s port=%d db=%s jobs=%ld", PRS_VERSION,
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
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE); /* stops the checks of uploads */
    zeus_stop(s->zeus); /* answers what waits while the workers still run */
    http_stop(s);
    zeus_free(s->zeus);
    janitor_join(s);
    pthread_rwlock_wrlock(&s->lock);
    planq_stop_all(s);
    pthread_rwlock_unlock(&s->lock);
    srv_log(s, PRS_LOG_INFO, "msg=stopped");
    server_free(s);
}
