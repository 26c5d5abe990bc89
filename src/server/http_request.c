/* A request from its first call to its answer, as libmicrohttpd hands it over: the checks made
 * on the headers alone (connection cap, body framing, tokens, declared length), the body read
 * within its limit, then the answer by the route table (router.c), on the HTTP worker or, for
 * a request with a large body, on the pool (see 'Requests with large bodies' below). */
#include "perseus/clock.h"
#include "perseus/numfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http.h"

/* The tracking record of a connection (its socket context), or NULL. */
static conn_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                       enum MHD_RequestTerminationCode toe)
{
    prs_server *s = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    double secs = prs_mono_s() - cc->start;
    srv_metrics_count(s, cc->route, cc->status, secs);
    srv_log(s, PRS_LOG_DEBUG, "msg=request route=%s status=%d job=%s ms=%.3f complete=%d",
            route_name(cc->route), cc->status, cc->job_id[0] ? cc->job_id : "-", secs * 1e3,
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

/* How the body is framed, checked on the first call (http_framing_refusal): 0 when the framing
 * is fine, else 1 with the queued answer's result in *ret. */
static int check_framing(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                         enum MHD_Result *ret)
{
    length_headers l = {0, 0, 0, ""};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &l);
    http_framing f = {
        l.count, l.differ, l.encodings,
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING)};
    int status;
    const char *code, *msg;
    if (!http_framing_refusal(&f, &status, &code, &msg)) return 0;
    cc->answered = 1;
    *ret = reply_error(s, c, cc, status, code, msg);
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
           m->route == R_CLUSTER_CREATE || m->route == R_CLUSTER_PROFILE ||
           m->route == R_CLUSTER_LOAD ||
           (m->route == R_STATUS && cc->job_world >= HEAVY_STATUS_RANKS);
}

/* Whether a job route may go on, from its headers alone: 0, or the status to refuse it with (404:
 * no such job; 401: not the job's token, nor the administrator's for a deletion). */
static int job_refusal(prs_server *s, struct MHD_Connection *c, const route_match *m, long *world)
{
    uint8_t presented[SECURE_SHA256_LEN];
    int have_token = auth_bearer_hash(c, presented);
    job *j = table_pin(s, m->id);
    if (!j) return 404;
    pthread_rwlock_rdlock(j->lock);
    int refused = j->deleted                                                 ? 404
                  : !auth_may_act(s, m->def->auth, have_token, presented, j) ? 401
                                                                             : 0;
    *world = j->world;
    pthread_rwlock_unlock(j->lock);
    table_unpin(j);
    return refused;
}

static enum MHD_Result send_prepared(struct MHD_Connection *c, conn_ctx *cc);
static void defer(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, const route_match *m);

/* The first call of a request, with its headers: its context made, and the refusals that need
 * no body (over the connection cap, bad framing, a missing creation or job token, a declared
 * body over the limit) answered before any of the body is read. */
static enum MHD_Result begin_request(prs_server *s, struct MHD_Connection *c, const route_match *m,
                                     void **con_cls)
{
    conn_ctx *cc = calloc(1, sizeof *cc);
    if (!cc) return MHD_NO;
    cc->start = prs_mono_s();
    cc->route = m->route;
    cc->limit = m->def && m->def->profile_body ? s->cfg.max_profile_bytes : s->cfg.max_body_bytes;
    if (m->has_id) snprintf(cc->job_id, sizeof cc->job_id, "%s", m->id);
    *con_cls = cc;
    conn_track *k = track_of(c);
    if (k) {
        k->in_request = 1;
        k->since = cc->start;
        if (k->over_cap) {
            cc->answered = 1;
            return reply_error(s, c, cc, 503, "unavailable",
                               "the server is at its connection limit (--max-connections): "
                               "retry later");
        }
    }
    enum MHD_Result framing;
    if (check_framing(s, c, cc, &framing) != 0) return framing;
    /* Creation needs the creation token: checked before any body is read. */
    if (m->def && m->method_ok && m->def->auth == AUTH_CREATE && !auth_create_allowed(s, c)) {
        cc->answered = 1;
        return reply_error(s, c, cc, 401, "unauthorized",
                           m->route == R_CLUSTER_CREATE
                               ? "declaring a cluster needs the server's creation token "
                                 "(Authorization: Bearer ...)"
                               : "creating a job needs the server's creation token "
                                 "(Authorization: Bearer ...)");
    }
    /* A cluster route's token likewise, before its body (cluster_routes.c). */
    int cluster_refused = m->def && m->method_ok ? cluster_refusal(s, c, m) : 0;
    if (cluster_refused) {
        cc->answered = 1;
        return cluster_refused == 404
                   ? reply_error(s, c, cc, 404, "not_found", "no such cluster")
                   : reply_error(s, c, cc, 401, "unauthorized", "missing or wrong bearer token");
    }
    /* A job route's token is checked on this first call, which has the headers: a request
     * without the job's token is refused before any of its body is read (a response queued
     * now makes libmicrohttpd answer and close the connection). */
    if (m->def && m->has_id && m->method_ok) {
        int refused = job_refusal(s, c, m, &cc->job_world);
        if (refused) {
            cc->answered = 1;
            return refused == 404 ? reply_error(s, c, cc, 404, "not_found", "no such job")
                                  : reply_error(s, c, cc, 401, "unauthorized",
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
        return reply_error(s, c, cc, 413, "too_large", msg);
    }
    return MHD_YES;
}

/* A piece of the body: appended to the request's, within its limit (http_body_append); past
 * it, or with an answer already queued, the connection is closed. */
static enum MHD_Result read_body(conn_ctx *cc, const char *upload_data, size_t *upload_data_size)
{
    if (cc->answered) return MHD_NO; /* close: the answer is already queued */
    if (http_body_append(cc, upload_data, *upload_data_size) != 0) return MHD_NO;
    *upload_data_size = 0;
    return MHD_YES;
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **con_cls)
{
    (void)version;
    prs_server *s = cls;
    conn_ctx *cc = *con_cls;
    route_match m;
    route_find(method, url, &m);
    if (!cc) return begin_request(s, c, &m, con_cls);
    if (*upload_data_size > 0) return read_body(cc, upload_data, upload_data_size);
    if (cc->ready) return send_prepared(c, cc);
    if (cc->too_large || cc->answered) return MHD_YES; /* response already queued */
    enum MHD_Result zr; /* the Zeus-compatible routes, when on (zeus_routes.h) */
    conn_track *zk = m.route == R_UNKNOWN && s->zeus ? track_of(c) : NULL;
    if (m.route == R_UNKNOWN && s->zeus &&
        zeus_dispatch(s->zeus, c, url, method, cc->body, cc->len, zk ? zk->w->wake_fd : -1,
                      &cc->zeus_req, &cc->status, &zr))
        return zr;
    if (m.route == R_UNKNOWN) return reply_error(s, c, cc, 404, "not_found", "no such route");
    if (!m.method_ok) {
        char msg[96];
        snprintf(msg, sizeof msg, "method %.16s not allowed here (allowed: %s)", method, m.allow);
        return reply_error(s, c, cc, 405, "method_not_allowed", msg);
    }
    if (s->heavy && is_heavy(&m, cc)) {
        defer(s, c, cc, &m);
        return MHD_YES;
    }
    return route_dispatch(s, c, cc, &m);
}

/* ---- requests with large bodies ----
 *
 * An HTTP worker serves many connections from one thread, so a request that takes long there
 * (parsing a 1 MB results post and storing every window, an 11 MB profile) would hold up every
 * other connection of that worker, polls included. Such a request (is_heavy: a large body, a
 * profile upload, a large job's status) is handed to a small pool of threads instead (s->heavy):
 * its connection is suspended, the pool runs the handler, which prepares its answer in the
 * request's context (reply_text) instead of queueing it, and resumes the connection; libmicrohttpd
 * then calls http_on_request once more, which queues the prepared answer (send_prepared). At
 * shutdown the pool finishes what it holds before the daemons stop (http_stop), so no connection
 * stays suspended. */

static void run_deferred(void *arg)
{
    conn_ctx *cc = arg;
    route_dispatch(cc->s, cc->conn, cc, &cc->m);
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
    return reply_text(c, cc, cc->prep_status, cc->prep_ctype, text, cc->prep_len);
}
