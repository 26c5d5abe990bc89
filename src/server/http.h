/* The HTTP side of the server: a request's context (conn_ctx) from its first call to its
 * answer, the route table's rows, and the calls between the HTTP parts: framing and body
 * reading (http_request.c, http_framing.c), the route table (router.c, route_names.c), the
 * handlers (route_job.c, route_server.c), replies (reply.c), authentication (auth.c) and request
 * metrics (server_metrics.c). Every answer is queued through reply.c; every error is the JSON
 * body {"error": {"code", "message"}}. */
#ifndef PRS_SERVER_HTTP_H
#define PRS_SERVER_HTTP_H

#include <microhttpd.h>
#include <jansson.h>

#include "server_int.h"

struct conn_ctx;
struct route_match;

/* A route's handler: answers a complete request (body read) through reply.c. */
typedef enum MHD_Result (*route_handler)(prs_server *s, struct MHD_Connection *c,
                                         struct conn_ctx *cc, const struct route_match *m);

/* Who may use a route, checked by the router (route_refusal) or, for a job's token, by
 * http_request.c on the first call and again under the job's lock (route_job.c). */
typedef enum route_auth {
    AUTH_NONE,         /* anyone */
    AUTH_CREATE,       /* the creation token, when the server has one (checked before the body) */
    AUTH_METRICS,      /* the metrics token, when the server has one */
    AUTH_ADMIN,        /* the administrator's token (and the server must have one) */
    AUTH_JOB,          /* the job's own token */
    AUTH_JOB_OR_ADMIN, /* the job's own token or the administrator's */
    AUTH_CLUSTER,      /* the cluster's own token (checked by its handler, cluster_routes.c) */
    AUTH_CLUSTER_OR_ADMIN, /* the cluster's own token or the administrator's */
} route_auth;

/* One row of the route table (router.c): method and path pattern ({id}: a job id, {dp}: a
 * pipeline index) to route id, handler, who may call it and which body limit applies. */
typedef struct route_def {
    const char *method;
    const char *path;
    enum route route;
    route_handler handler;
    route_auth auth;
    int profile_body; /* body limit --max-profile-bytes (else --max-body-bytes) */
} route_def;

/* A request's method and URL matched against the table. */
typedef struct route_match {
    enum route route;     /* R_UNKNOWN when no path matched */
    const route_def *def; /* the matched row; for a known path with another method, the path's
                           * POST row if it has one, else its first (NULL: no path matched) */
    int method_ok;
    char allow[32]; /* the path's methods, for a 405's message ("GET, POST") */
    char id[SECURE_ID_LEN + 1];
    int has_id; /* the path had a well-formed job id */
    long dp;
} route_match;

/* One connection as its worker tracks it (its libmicrohttpd socket context), for the timeouts
 * and the global cap (http_conn.c). Touched only by the worker's thread. */
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

/* One HTTP worker: a libmicrohttpd daemon driven by our own thread (http_conn.c). */
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

/* The route name used in the metrics and the log (route_names.c). */
const char *route_name(enum route r);

/* ---- the route table (router.c) ---- */
/* Match a request's method and URL against the table (m filled in every case). */
void route_find(const char *method, const char *url, route_match *m);
/* Answer a complete request by its row's handler, after the checks of the row's auth that need
 * no job (metrics, admin): on an HTTP worker, or on the pool for a large body. */
enum MHD_Result route_dispatch(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m);

/* ---- replies (reply.c) ---- */

/* Queue an answer (text is malloc'd and taken over); on the pool, keep it in cc for the
 * worker to queue once the connection is resumed. */
enum MHD_Result reply_text(struct MHD_Connection *c, conn_ctx *cc, int status, const char *ctype,
                           char *text, size_t len);
/* Send a JSON value (steals the reference); reals in their shortest round-trip form. */
enum MHD_Result reply_json(struct MHD_Connection *c, conn_ctx *cc, int status, json_t *v);
/* Send the JSON error {"error": {"code", "message"}} and log it. */
enum MHD_Result reply_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, int status,
                            const char *code, const char *msg);
enum MHD_Result reply_api_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                const api_err *e);

/* ---- authentication (auth.c): tokens compared as SHA-256, in constant time ---- */

/* Hash the presented bearer token (before taking any lock: hashing is the costly part); 0 if
 * there is none. */
int auth_bearer_hash(struct MHD_Connection *c, uint8_t hash[SECURE_SHA256_LEN]);
/* Whether the presented token is job j's own. */
int auth_job_owner(int have_token, const uint8_t hash[SECURE_SHA256_LEN], const job *j);
/* Whether the presented token is the administrator's (--admin-token). */
int auth_is_admin(const prs_server *s, int have_token, const uint8_t hash[SECURE_SHA256_LEN]);
/* Whether the presented token may act on job j by a route of this auth: the job's own token,
 * or the administrator's for AUTH_JOB_OR_ADMIN. */
int auth_may_act(const prs_server *s, route_auth auth, int have_token,
                 const uint8_t hash[SECURE_SHA256_LEN], const job *j);
/* Whether a job creation may go on: the server has no creation token, or the request presents
 * it. */
int auth_create_allowed(prs_server *s, struct MHD_Connection *c);
/* Whether /metrics may be read: the server has no metrics token, or the request presents it. */
int auth_metrics_allowed(prs_server *s, struct MHD_Connection *c);

/* ---- handlers: one job's routes (route_job.c), the server's (route_server.c) ---- */

enum MHD_Result handle_job(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                           const route_match *m);
enum MHD_Result handle_healthz(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m);
enum MHD_Result handle_create(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                              const route_match *m);
enum MHD_Result handle_list(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                            const route_match *m);
enum MHD_Result handle_metrics(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m);

/* ---- inference clusters (cluster_routes.c) ---- */
enum MHD_Result handle_cluster_create(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                      const route_match *m);
/* Whether a cluster route may go on, from its headers alone: 0 (or not a cluster route), 404 (no
 * such cluster) or 401 (not its token, nor the administrator's where the route allows it). */
int cluster_refusal(prs_server *s, struct MHD_Connection *c, const route_match *m);
/* Every route of one cluster ({cid}): its token checked again, then answered by m->route. */
enum MHD_Result handle_cluster(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m);
/* ---- request metrics (server_metrics.c) ---- */

/* Count a finished request of route r with its status and duration. */
void srv_metrics_count(prs_server *s, enum route r, int status, double secs);

/* ---- framing and body reading (http_framing.c) ---- */

/* What a request's headers say of its body's framing. */
typedef struct http_framing {
    int lengths;          /* Content-Length headers */
    int lengths_differ;   /* ... with different values */
    int encodings;        /* Transfer-Encoding headers */
    const char *encoding; /* the first Transfer-Encoding, or NULL */
} http_framing;

/* Whether the framing is refused, checked before the body is read: two different Content-Length
 * values, two Transfer-Encodings, or a Content-Length with a Transfer-Encoding are ambiguous
 * (400: a proxy might frame the body otherwise); a Transfer-Encoding other than chunked is not
 * supported (501, at once: otherwise libmicrohttpd would wait for a body it cannot delimit).
 * 0 when fine, else 1 with the answer's status, code and message (static text). */
int http_framing_refusal(const http_framing *f, int *status, const char **code, const char **msg);
/* Append n bytes to the request's body (kept NUL-terminated): 0; -1 past cc->limit (too_large
 * set, status 413); -2 out of memory. */
int http_body_append(conn_ctx *cc, const char *data, size_t n);

/* ---- the libmicrohttpd request callbacks (http_request.c) ---- */

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                       enum MHD_RequestTerminationCode toe);

#endif
