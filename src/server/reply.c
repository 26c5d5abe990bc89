/* Answers: every reply goes out through reply_text, which queues it on the connection, or, for
 * a request running on the pool (http_request.c, 'Requests with large bodies'), keeps it for the
 * HTTP worker to queue once the connection is resumed. Errors are the JSON body
 * {"error": {"code", "message"}}, logged at a level by who is at fault. */
#include "perseus/numfmt.h"

#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "request.h"

enum MHD_Result reply_text(struct MHD_Connection *c, conn_ctx *cc, int status, const char *ctype,
                           char *text, size_t len)
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
enum MHD_Result reply_json(struct MHD_Connection *c, conn_ctx *cc, int status, json_t *v)
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
    return reply_text(c, cc, status, "application/json", text, strlen(text));
}

enum MHD_Result reply_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, int status,
                            const char *code, const char *msg)
{
    json_t *v = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    char q[REQ_MSG_MAX + 8];
    /* 501 answers what the client sent (an unsupported encoding): the client's mistake. 503
     * answers a connection past the cap: by design under a flood, one line each would bury the
     * log, so debug (perseusd_http_requests_total counts them). */
    srv_log(s,
            status == 503                    ? PRS_LOG_DEBUG
            : status >= 500 && status != 501 ? PRS_LOG_ERROR
                                             : PRS_LOG_WARN,
            "msg=request_error route=%s status=%d code=%s job=%s detail=%s", route_name(cc->route),
            status, code, cc->job_id[0] ? cc->job_id : "-", srv_kv_quote(msg, q, sizeof q));
    return reply_json(c, cc, status, v);
}

enum MHD_Result reply_api_error(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                const api_err *e)
{
    return reply_error(s, c, cc, e->http ? e->http : 500, e->code ? e->code : "internal", e->msg);
}
