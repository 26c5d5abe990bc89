/* perseus-router's server (router.h). One thread serves every client connection and every
 * transfer to the instances: the forwarding loop (backend.h) runs the HTTP server
 * (libmicrohttpd, epoll, driven from outside) beside its transfers. A request's body is read,
 * classified, an instance picked (router_pick.h) and the body handed unchanged to a transfer,
 * and the connection suspended until the instance answers; it tries the next best instance when one
 * cannot be reached, is overloaded (429, 503) or fails before answering. A stream is passed through
 * as the client reads it (the connection suspended whenever the instance has sent nothing new), and
 * each server-sent "data:" event it carries is timed: the first gives the time to first token,
 * the others the inter-token gaps. No handler blocks. The shared state (instances' loads, the
 * statistics) sits behind one mutex held only for counter updates, never across I/O. */
#define _POSIX_C_SOURCE 200809L
#include "router.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "httpd.h"
#include "load_report.h"
#include "prom.h"
#include "router_pick.h"
#include "sse.h"

enum { REJ_INVALID, REJ_MODEL, REJ_TOO_LARGE, REJ_NO_CAPACITY, REJ_BACKEND, REJ_N };
static const char *const reject_name[REJ_N] = {"invalid_request", "unknown_model", "too_large",
                                               "no_capacity", "backend_failed"};

typedef struct inst_stats {
    prs_prom_hist ttft, itl, e2e;
    unsigned long ok, failed, client_gone, backend_errors, overloaded, rerouted_in;
} inst_stats;

struct prs_router {
    prs_router_config c;
    prs_router_predictor pred;
    prs_backend_loop *loop;
    pthread_mutex_t mu;
    prs_router_load *load;
    inst_stats *st;
    unsigned long class_requests[PRS_INFER_NCLASS];
    unsigned long rejected[REJ_N];
    struct MHD_Daemon *d;
    prs_load_reporter *reporter; /* NULL: no "perseusd" in the configuration */
};

/* One request forwarded: from its first pick to the end of its answer. The client connection
 * owns it while it waits for an instance's head (or whole answer); a streamed answer's response
 * owns it from then on. */
typedef struct flow {
    prs_router *r;
    struct MHD_Connection *c;
    prs_backend *b;       /* the transfer to the instance tried now */
    unsigned char *tried; /* instances tried by this request */
    int inst;             /* the instance taken (its load counts this request), -1: none */
    int fd;               /* the client's socket, watched while it waits for the head or the end */
    int in_class, klass, stream, failures, done, failed;
    long prompt_tokens, out, events;
    double start_s, last_s;
    prs_sse_scan sse;
    char path[32];
    char last[PRS_ERRMSG_MAX + PRS_ROUTER_NAME_MAX + 8]; /* the last failure */
} flow;

typedef struct conn {
    prs_httpd_body body;
    flow *f; /* the request being forwarded, until a streamed response takes it */
} conn;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static enum MHD_Result reject(prs_router *r, struct MHD_Connection *c, int why, unsigned status,
                              const char *type, const char *param, const char *code,
                              const char *msg)
{
    pthread_mutex_lock(&r->mu);
    r->rejected[why]++;
    pthread_mutex_unlock(&r->mu);
    return prs__httpd_send_oai_error(c, status, type, param, code, msg);
}

/* A token event of the stream passed: the first gives the TTFT, the next ones the gaps. */
static void on_token(void *cls)
{
    flow *f = cls;
    double t = now_s();
    prs_router *r = f->r;
    pthread_mutex_lock(&r->mu);
    if (f->events == 0)
        prs__prom_hist_observe(&r->st[f->inst].ttft, t - f->start_s);
    else
        prs__prom_hist_observe(&r->st[f->inst].itl, t - f->last_s);
    pthread_mutex_unlock(&r->mu);
    f->events++;
    f->last_s = t;
}

/* The end of a forwarded request, whichever way it ended: exactly once per flow. */
static void flow_end(flow *f)
{
    prs_router *r = f->r;
    double t = now_s();
    if (f->inst >= 0) {
        pthread_mutex_lock(&r->mu);
        r->load[f->inst].inflight--;
        inst_stats *s = &r->st[f->inst];
        if (f->done) {
            s->ok++;
            prs__prom_hist_observe(&s->e2e, t - f->start_s);
        } else if (f->failed) {
            s->failed++;
            s->backend_errors++;
        } else {
            s->client_gone++;
        }
        pthread_mutex_unlock(&r->mu);
        if (f->done && f->events > 0)
            r->pred.observe(r->pred.ctx, f->in_class, f->prompt_tokens, f->events);
    }
    prs__backend_free(f->b);
    free(f->tried);
    free(f);
}

/* The loop's call-back: what the suspended connection waits for is in. */
static void wake(void *cls)
{
    flow *f = cls;
    MHD_resume_connection(f->c);
}

/* Suspend the connection until want is in. The transfer is armed only once the connection is
 * suspended, so the loop never resumes a connection that is not. libmicrohttpd does not poll a
 * suspended connection: while it waits for the head or the whole answer, the loop watches the
 * client's socket, so that a client leaving is seen at once (a stream's is seen when a write to
 * it fails). */
static void park(flow *f, prs_backend_want want)
{
    MHD_suspend_connection(f->c);
    if (prs__backend_arm(f->b, want))
        MHD_resume_connection(f->c);
    else if (want != PRS_BACKEND_WANT_DATA)
        prs__backend_watch_peer(f->b, f->fd);
}

static ssize_t flow_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    flow *f = cls;
    prs_error err = {0};
    int end;
    ssize_t n = prs__backend_read(f->b, buf, max, &end, &err);
    if (n > 0) {
        prs__sse_feed(&f->sse, buf, (size_t)n, on_token, f);
        return n;
    }
    if (end) {
        f->done = 1;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n < 0) {
        f->failed = 1;
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    park(f, PRS_BACKEND_WANT_DATA); /* called again once bytes are in */
    return 0;
}

static void flow_free(void *cls)
{
    flow_end(cls);
}

/* The whole body of an ended transfer; NULL when it broke. */
static char *read_whole(prs_backend *b, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) break;
            buf = nb;
            cap *= 2;
        }
        int end;
        ssize_t k = prs__backend_read(b, buf + n, cap - n - 1, &end, NULL);
        if (end) {
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        if (k <= 0) break;
        n += (size_t)k;
    }
    free(buf);
    return NULL;
}

/* A non-streamed answer: checked to be a JSON object, then passed on with its status. */
static enum MHD_Result answer_whole(flow *f, struct MHD_Connection *c, long status)
{
    size_t len = 0;
    char *body = read_whole(f->b, &len);
    json_t *v = body ? json_loadb(body, len, 0, NULL) : NULL;
    enum MHD_Result ret;
    if (!json_is_object(v)) {
        f->failed = 1;
        ret = prs__httpd_send_oai_error(c, 502, "server_error", NULL, "bad_backend_response",
                                        "the serving instance answered with a malformed body");
    } else {
        f->done = 1; /* answered in full, an error of the instance's own included */
        json_int_t out =
            json_integer_value(json_object_get(json_object_get(v, "usage"), "completion_tokens"));
        f->events = (long)out;
        ret = prs__httpd_send(c, (unsigned)status, "application/json", body, len);
    }
    json_decref(v);
    free(body);
    flow_end(f);
    return ret;
}

static enum MHD_Result answer_stream(flow *f, struct MHD_Connection *c)
{
    if (strstr(prs__backend_content_type(f->b), "text/event-stream") == NULL) {
        f->failed = 1;
        flow_end(f);
        return prs__httpd_send_oai_error(c, 502, "server_error", NULL, "bad_backend_response",
                                         "the serving instance did not answer with a stream");
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, flow_read, f, flow_free);
    if (resp == NULL) {
        flow_end(f);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* Take instance i for a request (the mutex is held). */
static void take(prs_router *r, int i, int rerouted)
{
    r->load[i].inflight++;
    r->st[i].rerouted_in += (unsigned long)rerouted;
}

/* The instance failed or refused: give it back, and mark it down when it failed. */
static void give_back(prs_router *r, int i, int down, int overloaded)
{
    pthread_mutex_lock(&r->mu);
    r->load[i].inflight--;
    if (down) {
        r->load[i].down_until_s = now_s() + r->c.down_s;
        r->st[i].backend_errors++;
    }
    r->st[i].overloaded += (unsigned long)overloaded;
    pthread_mutex_unlock(&r->mu);
}

/* Send the request to the best instance not tried yet and suspend until it answers; when none
 * is left, the client gets 502 (some failed) or 503 (none had room). */
static enum MHD_Result try_next(conn *k)
{
    flow *f = k->f;
    prs_router *r = f->r;
    for (;;) {
        int rerouted;
        pthread_mutex_lock(&r->mu);
        int i = prs__router_pick(&r->c, r->load, f->tried, now_s(), f->klass, f->prompt_tokens,
                                 f->out, &rerouted);
        if (i >= 0) take(r, i, rerouted);
        pthread_mutex_unlock(&r->mu);
        if (i < 0) break;
        f->tried[i] = 1;
        char url[PRS_ROUTER_URL_MAX + 64];
        snprintf(url, sizeof url, "%s%s", r->c.inst[i].url, f->path);
        prs_error err = {0};
        if (prs__backend_start(r->loop, url, k->body.data ? k->body.data : "", k->body.len,
                               r->c.backend_timeout_s, f->stream, wake, f, &f->b, &err) != 0) {
            give_back(r, i, 0, 0);
            break;
        }
        f->inst = i;
        park(f, PRS_BACKEND_WANT_HEAD);
        return MHD_YES;
    }
    struct MHD_Connection *c = f->c;
    int failures = f->failures;
    char msg[PRS_ERRMSG_MAX + PRS_ROUTER_NAME_MAX + 80];
    snprintf(msg, sizeof msg, "every serving instance tried failed (last, %s)", f->last);
    flow_end(f);
    k->f = NULL;
    if (failures > 0)
        return reject(r, c, REJ_BACKEND, 502, "server_error", NULL, "backend_failed", msg);
    return reject(r, c, REJ_NO_CAPACITY, 503, "server_error", NULL, "overloaded",
                  "no serving instance has capacity for this request now; retry later");
}

/* The connection is resumed: what its instance answered decides the next step. */
static enum MHD_Result step(conn *k)
{
    flow *f = k->f;
    prs_router *r = f->r;
    if (prs__backend_peer_gone(f->b)) {
        k->f = NULL; /* counted as a departed client; freeing the transfer closes its
                      * connection, so the instance drops the request */
        flow_end(f);
        return MHD_NO; /* libmicrohttpd closes the client's connection */
    }
    long status = 0;
    prs_error err = {0};
    int rc = prs__backend_head(f->b, &status, &err);
    if (rc == 1) {
        park(f, PRS_BACKEND_WANT_HEAD);
        return MHD_YES;
    }
    if (rc != 0 || status >= 500 || status == 429) {
        int i = f->inst, down = rc != 0 || (status >= 500 && status != 503);
        prs__backend_free(f->b);
        f->b = NULL;
        f->inst = -1;
        give_back(r, i, down, status == 503 || status == 429);
        f->failures += down;
        if (down)
            snprintf(f->last, sizeof f->last, "%s: %s", r->c.inst[i].name,
                     rc == 0 ? "answered an error" : err.msg);
        return try_next(k);
    }
    if (f->stream && status == 200) {
        k->f = NULL; /* the response owns it now */
        return answer_stream(f, f->c);
    }
    if (!prs__backend_ready(f->b, PRS_BACKEND_WANT_END)) {
        park(f, PRS_BACKEND_WANT_END);
        return MHD_YES;
    }
    k->f = NULL;
    return answer_whole(f, f->c, status);
}

/* A new request to forward: its class, its output guess, and the first instance to try. */
static enum MHD_Result forward(prs_router *r, struct MHD_Connection *c, conn *k,
                               const prs_oai_request *rq, const char *path)
{
    flow *f = calloc(1, sizeof *f);
    unsigned char *tried = calloc((size_t)r->c.ninst, 1);
    if (f == NULL || tried == NULL || strlen(path) >= sizeof f->path) {
        free(f);
        free(tried);
        return prs__httpd_send_oai_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int in_class = prs_infer_class_of(&r->c.classes, (int)rq->prompt_tokens, 1) / 3;
    long out = r->pred.predict(r->pred.ctx, in_class, rq->prompt_tokens, rq->max_tokens);
    *f = (flow){.r = r,
                .c = c,
                .tried = tried,
                .inst = -1,
                .fd = ci ? (int)ci->connect_fd : -1,
                .in_class = in_class,
                .klass = prs_infer_class_of(&r->c.classes, (int)rq->prompt_tokens, (int)out),
                .stream = rq->stream,
                .prompt_tokens = rq->prompt_tokens,
                .out = out,
                .start_s = now_s()};
    snprintf(f->path, sizeof f->path, "%s", path);
    pthread_mutex_lock(&r->mu);
    r->class_requests[f->klass]++;
    pthread_mutex_unlock(&r->mu);
    k->f = f;
    return try_next(k);
}

static enum MHD_Result completion(prs_router *r, struct MHD_Connection *c, prs_oai_kind kind,
                                  conn *k, const char *path)
{
    if (k->f != NULL) return step(k);
    const prs_httpd_body *b = &k->body;
    if (b->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than %zu bytes", b->max);
        return reject(r, c, REJ_TOO_LARGE, 413, "invalid_request_error", NULL, "body_too_large",
                      msg);
    }
    if (b->failed)
        return prs__httpd_send_oai_error(c, 500, "server_error", NULL, NULL, "out of memory");
    prs_oai_request rq;
    prs_error err = {0};
    const char *param;
    if (prs__oai_parse(kind, b->data ? b->data : "", b->len, &rq, &param, &err) != 0)
        return reject(r, c, REJ_INVALID, 400, "invalid_request_error", param, NULL, err.msg);
    if (strcmp(rq.model, r->c.model) != 0) {
        char msg[PRS_OAI_MODEL_MAX + 64];
        snprintf(msg, sizeof msg, "The model '%s' does not exist.", rq.model);
        return reject(r, c, REJ_MODEL, 404, "invalid_request_error", "model", "model_not_found",
                      msg);
    }
    return forward(r, c, k, &rq, path);
}

static void inst_labels(const prs_router *r, int i, prs_prom_buf *lb)
{
    lb->len = 0;
    prs__prom_printf(lb, "pool=\"");
    prs__prom_label_value(lb, r->c.pools[r->c.inst[i].pool].name);
    prs__prom_printf(lb, "\",instance=\"");
    prs__prom_label_value(lb, r->c.inst[i].name);
    prs__prom_printf(lb, "\"");
}

static const struct {
    const char *name, *help;
    size_t off;
} counters[] = {
    {"perseus_router_requests_ok_total", "Requests answered in full by the instance.",
     offsetof(inst_stats, ok)},
    {"perseus_router_requests_failed_total", "Requests whose instance failed mid-answer.",
     offsetof(inst_stats, failed)},
    {"perseus_router_client_gone_total", "Requests whose client left before the end.",
     offsetof(inst_stats, client_gone)},
    {"perseus_router_backend_errors_total",
     "Failures of the instance (unreachable, 5xx, malformed answers).",
     offsetof(inst_stats, backend_errors)},
    {"perseus_router_overloaded_total", "Times the instance answered 429 or 503.",
     offsetof(inst_stats, overloaded)},
    {"perseus_router_rerouted_total", "Requests sent to the instance from another pool's class.",
     offsetof(inst_stats, rerouted_in)},
};

static void write_instances(const prs_router *r, prs_prom_buf *b, prs_prom_buf *lb)
{
    prs__prom_header(b, "perseus_router_inflight", "gauge", "Requests in flight at the instance.");
    for (int i = 0; i < r->c.ninst; i++) {
        inst_labels(r, i, lb);
        prs__prom_printf(b, "perseus_router_inflight{%s} %d\n", lb->text, r->load[i].inflight);
    }
    prs__prom_header(b, "perseus_router_instance_up", "gauge",
                     "1 when the instance takes requests, 0 while it is skipped after a failure.");
    double t = now_s();
    for (int i = 0; i < r->c.ninst; i++) {
        inst_labels(r, i, lb);
        prs__prom_printf(b, "perseus_router_instance_up{%s} %d\n", lb->text,
                         r->load[i].down_until_s <= t);
    }
    for (size_t k = 0; k < sizeof counters / sizeof counters[0]; k++) {
        prs__prom_header(b, counters[k].name, "counter", counters[k].help);
        for (int i = 0; i < r->c.ninst; i++) {
            inst_labels(r, i, lb);
            const unsigned long *v =
                (const unsigned long *)((const char *)&r->st[i] + counters[k].off);
            prs__prom_printf(b, "%s{%s} %lu\n", counters[k].name, lb->text, *v);
        }
    }
    static const char *const hname[3] = {"perseus_router_ttft_seconds",
                                         "perseus_router_inter_token_seconds",
                                         "perseus_router_e2e_seconds"};
    static const char *const hhelp[3] = {
        "Time from the request's arrival to the stream's first token event.",
        "Time between consecutive token events of a stream.",
        "Time from the request's arrival to the end of its answer."};
    for (int h = 0; h < 3; h++) {
        prs__prom_header(b, hname[h], "histogram", hhelp[h]);
        for (int i = 0; i < r->c.ninst; i++) {
            inst_labels(r, i, lb);
            const prs_prom_hist *v = h == 0   ? &r->st[i].ttft
                                     : h == 1 ? &r->st[i].itl
                                              : &r->st[i].e2e;
            prs__prom_hist_write(b, hname[h], lb->text, v);
        }
    }
}

static enum MHD_Result metrics(prs_router *r, struct MHD_Connection *c)
{
    prs_prom_buf b = {0}, lb = {0};
    prs__prom_printf(&lb, "%s", "");
    pthread_mutex_lock(&r->mu);
    write_instances(r, &b, &lb);
    prs__prom_header(&b, "perseus_router_class_requests_total", "counter",
                     "Requests by DynamoLLM class (input and predicted output length).");
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        prs__prom_printf(&b, "perseus_router_class_requests_total{class=\"%s\",pool=\"%s\"} %lu\n",
                         prs_infer_class_name(k), r->c.pools[r->c.pool_of_class[k]].name,
                         r->class_requests[k]);
    prs__prom_header(&b, "perseus_router_rejected_total", "counter",
                     "Requests refused by the router, by reason.");
    for (int k = 0; k < REJ_N; k++)
        prs__prom_printf(&b, "perseus_router_rejected_total{reason=\"%s\"} %lu\n", reject_name[k],
                         r->rejected[k]);
    pthread_mutex_unlock(&r->mu);
    prs__prom_header(
        &b, "perseus_router_backend_connections_total", "counter",
        "Connections opened to the instances (kept open and reused between requests).");
    prs__prom_printf(&b, "perseus_router_backend_connections_total %lu\n",
                     prs__backend_loop_connects(r->loop));
    if (r->reporter) {
        unsigned long ok, unplannable, failed;
        prs__load_reporter_counts(r->reporter, &ok, &unplannable, &failed);
        prs__prom_header(&b, "perseus_router_load_reports_total", "counter",
                         "Load reports posted to perseusd, by result.");
        prs__prom_printf(&b, "perseus_router_load_reports_total{result=\"ok\"} %lu\n", ok);
        prs__prom_printf(&b, "perseus_router_load_reports_total{result=\"unplannable\"} %lu\n",
                         unplannable);
        prs__prom_printf(&b, "perseus_router_load_reports_total{result=\"failed\"} %lu\n", failed);
    }
    enum MHD_Result ret = b.failed || lb.failed
                              ? prs__httpd_send(c, 500, "text/plain", "out of memory\n", 14)
                              : prs__httpd_send(c, 200, "text/plain; version=0.0.4", b.text, b.len);
    free(b.text);
    free(lb.text);
    return ret;
}

static enum MHD_Result models(prs_router *r, struct MHD_Connection *c)
{
    json_t *v = json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "object", "list", "data", "id", r->c.model,
                          "object", "model", "owned_by", "perseus");
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    enum MHD_Result ret =
        s ? prs__httpd_send(c, 200, "application/json", s, strlen(s))
          : prs__httpd_send_oai_error(c, 500, "server_error", NULL, NULL, "out of memory");
    free(s);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    (void)version;
    prs_router *r = cls;
    int post = strcmp(method, "POST") == 0;
    if (*con_cls == NULL) {
        conn *k = calloc(1, sizeof *k);
        if (k == NULL) return MHD_NO;
        k->body.max = r->c.max_body_bytes;
        *con_cls = k;
        if (post) return MHD_YES;
    }
    conn *k = *con_cls;
    if (k->f != NULL) return step(k); /* resumed: its instance answered */
    if (post && *data_size > 0) {
        prs__httpd_body_add(&k->body, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    int get = strcmp(method, "GET") == 0;
    if (get && strcmp(url, "/metrics") == 0) return metrics(r, c);
    if (get && strcmp(url, "/health") == 0) return prs__httpd_send(c, 200, "text/plain", "", 0);
    if (get && strcmp(url, "/v1/models") == 0) return models(r, c);
    int chat = strcmp(url, "/v1/chat/completions") == 0;
    if (!chat && strcmp(url, "/v1/completions") != 0)
        return prs__httpd_send_oai_error(c, 404, "invalid_request_error", NULL, "unknown_url",
                                         "unknown endpoint");
    if (!post)
        return prs__httpd_send_oai_error(c, 405, "invalid_request_error", NULL, NULL,
                                         "this endpoint takes POST");
    return completion(r, c, chat ? PRS_OAI_CHAT : PRS_OAI_COMPLETIONS, k, url);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    conn *k = *con_cls;
    if (k == NULL) return;
    if (k->f) flow_end(k->f); /* closed while it waited (the router stopping) */
    prs__httpd_body_free(&k->body);
    free(k);
    *con_cls = NULL;
}

/* The class counters, for the load reporter. */
static void class_counts(void *ctx, unsigned long counts[PRS_INFER_NCLASS])
{
    prs_router *r = ctx;
    pthread_mutex_lock(&r->mu);
    memcpy(counts, r->class_requests, sizeof r->class_requests);
    pthread_mutex_unlock(&r->mu);
}

int prs__router_new(prs_router_config *cfg, prs_router **out, prs_error *err)
{
    *out = NULL;
    prs_router *r = calloc(1, sizeof *r);
    if (r == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    r->c = *cfg;
    memset(cfg, 0, sizeof *cfg);
    r->load = calloc((size_t)r->c.ninst, sizeof *r->load);
    r->st = calloc((size_t)r->c.ninst, sizeof *r->st);
    if (r->load == NULL || r->st == NULL ||
        prs__router_history_new(r->c.default_out_tokens, &r->pred, err) != 0 ||
        prs__backend_loop_new(r->c.max_connections, &r->loop, err) != 0) {
        prs__router_free(r);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&r->mu, NULL);
    if (r->c.report.url[0] &&
        prs__load_reporter_start(&r->c.report, class_counts, r, &r->reporter, err) != 0) {
        prs__router_free(r);
        return PRS_ENOMEM;
    }
    *out = r;
    return 0;
}

/* The daemon's side of the forwarding loop's thread (backend.h). */
static void run_daemon(void *cls)
{
    prs_router *r = cls;
    MHD_run(r->d);
}

static long daemon_timeout_ms(void *cls)
{
    prs_router *r = cls;
    MHD_UNSIGNED_LONG_LONG ms;
    return MHD_get_timeout(r->d, &ms) == MHD_YES ? (long)(ms < 60000 ? ms : 60000) : -1;
}

int prs__router_listen(prs_router *r, const char *listen, int *port, prs_error *err)
{
    /* a client connection and a connection to an instance each (those kept idle for reuse
     * included: the loop holds at most max_connections in all), and a margin */
    unsigned long need = 2ul * r->c.max_connections + 32;
    int rc = prs__httpd_raise_nofile(need, err);
    if (rc) return rc;
    rc = prs__httpd_start_events(listen, r->c.max_connections, (unsigned)r->c.client_timeout_s,
                                 on_request, on_done, r, &r->d, port, err);
    if (rc) return rc;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_EPOLL_FD);
    prs_backend_host host = {.fd = info ? info->epoll_fd : -1,
                             .run = run_daemon,
                             .timeout_ms = daemon_timeout_ms,
                             .cls = r};
    if (host.fd < 0) return prs_error_set(err, PRS_EIO, "the HTTP server has no epoll descriptor");
    return prs__backend_loop_run(r->loop, &host, err);
}

void prs__router_free(prs_router *r)
{
    if (r == NULL) return;
    prs__load_reporter_stop(r->reporter);
    /* the loop's thread first: its transfers end and the connections waiting on them are
     * resumed, since the daemon cannot stop with suspended connections; the daemon's last run
     * answers them (no transfer starts any more), then it stops and its connections free their
     * transfers; then the loop's memory */
    prs__backend_loop_stop(r->loop);
    if (r->d) {
        MHD_run(r->d);
        MHD_stop_daemon(r->d);
    }
    prs__backend_loop_free(r->loop);
    if (r->pred.ctx) prs__router_history_free(&r->pred);
    if (r->load) pthread_mutex_destroy(&r->mu);
    free(r->load);
    free(r->st);
    prs__router_config_free(&r->c);
    free(r);
}
