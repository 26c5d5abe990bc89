/* The HTTP side of perseusd's Zeus-compatible routes (zeus_routes.h).
 *
 * Zeus's clients block in GET /schedule until every rank of the job has asked, which can take a
 * whole iteration of the slowest rank; holding an HTTP worker per waiting rank would let one
 * large job stall the server. So a Zeus request is parsed on its HTTP worker, its connection is
 * suspended (libmicrohttpd's suspend/resume, which server.c already uses for large bodies) and
 * it is queued for one thread of ours, which translates it into calls to the v1 job behind it
 * (zeus_job.c) and answers it then, or when the barrier it waits in is complete: it then
 * resumes the connection and wakes the worker, whose next call for it queues the answer.
 *
 * Access. Zeus's clients send no credentials, so the routes answer loopback clients only, unless
 * perseusd is given a secret path prefix: under it (/PREFIX/register_job, ...) they answer any
 * client. Everything else about the server (tokens of v1 jobs, TLS) is unchanged. */
#define _GNU_SOURCE /* pthread_condattr_setclock */
#include "zeus_routes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "zeus_job.h"

struct zeus_srv {
    char *prefix; /* "/PREFIX" or NULL */
    zeus_jobs *jobs;
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* the queue and stop */
    pthread_cond_t cv;
    zeus_req *head, *tail;
    int stop;
};

static void *zeus_main(void *arg)
{
    zeus_srv *z = arg;
    pthread_mutex_lock(&z->mu);
    while (!z->stop) {
        if (!z->head) {
            if (zeus_jobs_waiting(z->jobs)) {
                struct timespec until;
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_nsec += 100L * 1000 * 1000;
                if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&z->cv, &z->mu, &until);
            } else {
                pthread_cond_wait(&z->cv, &z->mu);
            }
        }
        zeus_req *r = z->head;
        z->head = z->tail = NULL;
        pthread_mutex_unlock(&z->mu);
        while (r) {
            zeus_req *next = r->next;
            r->next = NULL;
            zeus_jobs_handle(z->jobs, r);
            r = next;
        }
        if (zeus_jobs_waiting(z->jobs)) zeus_jobs_poll(z->jobs);
        pthread_mutex_lock(&z->mu);
    }
    /* Stopping: what is queued or waiting is answered, so that no connection stays suspended. */
    zeus_req *r = z->head;
    z->head = z->tail = NULL;
    pthread_mutex_unlock(&z->mu);
    for (; r; r = r->next)
        zeus_fail(r, 503, "%s", "the server is stopping");
    zeus_jobs_abort(z->jobs);
    return NULL;
}

int zeus_start(const prs_server_config *cfg, const char *v1_base_url, zeus_srv **out,
               prs_error *err)
{
    *out = NULL;
    zeus_srv *z = calloc(1, sizeof *z);
    if (!z) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    const char *p = cfg->zeus.prefix;
    if (p && p[0]) {
        size_t n = strlen(p);
        for (size_t i = 0; i < n; i++)
            if (!(p[i] >= '0' && p[i] <= '9') && !(p[i] >= 'a' && p[i] <= 'z') &&
                !(p[i] >= 'A' && p[i] <= 'Z') && p[i] != '-' && p[i] != '_') {
                free(z);
                return prs_error_set(err, PRS_EINVAL,
                                     "--zeus-prefix: letters, digits, '-' and '_' only");
            }
        if (n < 16 || n > 128) {
            free(z);
            return prs_error_set(err, PRS_EINVAL,
                                 "--zeus-prefix: a secret of 16..128 characters (it is the only "
                                 "protection of the routes beyond loopback)");
        }
        z->prefix = malloc(n + 2);
        if (z->prefix) snprintf(z->prefix, n + 2, "/%s", p);
    }
    pthread_mutex_init(&z->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&z->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = zeus_jobs_new(cfg, v1_base_url, &z->jobs, err);
    if (!rc && pthread_create(&z->thread, NULL, zeus_main, z) != 0)
        rc = prs_error_set(err, PRS_EIO, "cannot start the Zeus routes' thread");
    if (rc) {
        zeus_jobs_free(z->jobs);
        pthread_mutex_destroy(&z->mu);
        pthread_cond_destroy(&z->cv);
        free(z->prefix);
        free(z);
        return rc;
    }
    z->started = 1;
    *out = z;
    return 0;
}

void zeus_stop(zeus_srv *z)
{
    if (!z) return;
    pthread_mutex_lock(&z->mu);
    z->stop = 1;
    pthread_cond_signal(&z->cv);
    pthread_mutex_unlock(&z->mu);
    if (z->started) pthread_join(z->thread, NULL);
    z->started = 0;
}

void zeus_free(zeus_srv *z)
{
    if (!z) return;
    zeus_stop(z);
    zeus_jobs_free(z->jobs);
    pthread_mutex_destroy(&z->mu);
    pthread_cond_destroy(&z->cv);
    free(z->prefix);
    free(z);
}

void zeus_request_done(void *req)
{
    zeus_req *r = req;
    if (!r) return;
    json_decref(r->body);
    free(r->text);
    free(r);
}

/* ---- matching ---- */

/* The route of path (after the prefix) and its job id: 0, or -1 when it is none of ours. */
static int zeus_match(const char *path, enum zeus_route *route, const char **id)
{
    static const struct {
        const char *path;
        enum zeus_route route;
        int with_id;
    } routes[] = {{"/info", ZR_INFO, 0},
                  {"/register_job", ZR_REGISTER_JOB, 0},
                  {"/register_rank", ZR_REGISTER_RANK, 0},
                  {"/register_rank/", ZR_REGISTER_RANK_MASTER, 1},
                  {"/schedule/", ZR_SCHEDULE, 1},
                  {"/result/", ZR_RESULT, 1},
                  {"/v1_job/", ZR_V1_JOB, 1}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t n = strlen(routes[i].path);
        if (routes[i].with_id ? strncmp(path, routes[i].path, n) == 0 && path[n]
                              : strcmp(path, routes[i].path) == 0) {
            *route = routes[i].route;
            *id = routes[i].with_id ? path + n : "";
            return 0;
        }
    }
    return -1;
}

static int from_loopback(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *a = i ? i->client_addr : NULL;
    if (!a || a->sa_family != AF_INET) return 0;
    const struct sockaddr_in *in = (const struct sockaddr_in *)a;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
}

/* Queue an answer on the connection now (the HTTP worker's thread). */
static enum MHD_Result send_now(struct MHD_Connection *c, int status, char *text, int *out_status)
{
    if (!text) return MHD_NO;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    *out_status = status;
    return ret;
}

static enum MHD_Result send_detail(struct MHD_Connection *c, int status, const char *msg,
                                   int *out_status)
{
    json_t *v = json_pack("{s:s}", "detail", msg);
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_now(c, status, text, out_status);
}

/* Check and parse a request that is ours; answer the ones that need no job now. */
static enum MHD_Result accept_request(zeus_srv *z, struct MHD_Connection *c, enum zeus_route route,
                                      const char *id, const char *method, const char *body,
                                      size_t len, int wake_fd, void **req, int *status)
{
    int get = route == ZR_INFO || route == ZR_SCHEDULE || route == ZR_V1_JOB;
    if (strcmp(method, get ? "GET" : "POST") != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "method %.16s not allowed here (allowed: %s)", method,
                 get ? "GET" : "POST");
        return send_detail(c, 405, msg, status);
    }
    if (route == ZR_INFO) {
        json_t *v = zeus_jobs_info(z->jobs);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        return send_now(c, 200, text, status);
    }
    if (strlen(id) >= sizeof((zeus_req *)0)->job) return send_detail(c, 404, "no such job", status);
    zeus_req *r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->conn = c;
    r->wake_fd = wake_fd;
    r->route = route;
    r->rank = -1;
    snprintf(r->job, sizeof r->job, "%s", id);
    if (!get) {
        json_error_t je;
        r->body = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
        if (!r->body) {
            char msg[256];
            snprintf(msg, sizeof msg, "body: not JSON (%s at line %d, column %d)", je.text, je.line,
                     je.column);
            zeus_request_done(r);
            return send_detail(c, 400, msg, status);
        }
    } else if (route == ZR_SCHEDULE) {
        const char *rank = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "rank");
        char *end = NULL;
        long v = rank ? strtol(rank, &end, 10) : -1;
        if (!rank || !rank[0] || *end || v < 0 || v > 65535) {
            zeus_request_done(r);
            return send_detail(c, 400, "rank: expected a query parameter ?rank=R, R in 0..65535",
                               status);
        }
        r->rank = v;
    }
    pthread_mutex_lock(&z->mu);
    if (z->stop) {
        pthread_mutex_unlock(&z->mu);
        zeus_request_done(r);
        return send_detail(c, 503, "the server is stopping", status);
    }
    *req = r;
    MHD_suspend_connection(c); /* before the thread can see it, and so resume it */
    if (z->tail)
        z->tail->next = r;
    else
        z->head = r;
    z->tail = r;
    pthread_cond_signal(&z->cv);
    pthread_mutex_unlock(&z->mu);
    return MHD_YES;
}

int zeus_dispatch(zeus_srv *z, struct MHD_Connection *c, const char *url, const char *method,
                  const char *body, size_t len, int wake_fd, void **req, int *status,
                  enum MHD_Result *ret)
{
    zeus_req *r = *req;
    if (r && r->ready) { /* resumed: its answer goes out now */
        char *text = r->text;
        r->text = NULL;
        r->ready = 0;
        *ret = send_now(c, r->status, text, status);
        return 1;
    }
    const char *path = url;
    int prefixed = 0;
    if (z->prefix) {
        size_t n = strlen(z->prefix);
        if (strncmp(url, z->prefix, n) == 0 && url[n] == '/') {
            path = url + n;
            prefixed = 1;
        }
    }
    enum zeus_route route;
    const char *id;
    if (zeus_match(path, &route, &id) != 0) return 0;
    if (!prefixed && !from_loopback(c)) {
        *ret = send_detail(c, 403,
                           "the Zeus-compatible routes answer loopback clients only, unless "
                           "under the server's secret prefix (perseusd --zeus-prefix)",
                           status);
        return 1;
    }
    *ret = accept_request(z, c, route, id, method, body, len, wake_fd, req, status);
    return 1;
}
