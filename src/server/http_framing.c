/* HTTP framing and body reading, apart from libmicrohttpd so they can be tested alone: the
 * verdict on how a request's body is framed (from its Content-Length and Transfer-Encoding
 * headers), and the body gathered piece by piece within its limit. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

int http_framing_refusal(const http_framing *f, int *status, const char **code, const char **msg)
{
    *status = 400;
    *code = "bad_request";
    if (f->lengths_differ)
        *msg = "conflicting Content-Length headers (give exactly one)";
    else if (f->encodings > 1)
        /* libmicrohttpd reads only the first: a proxy might frame the body by another */
        *msg = "more than one Transfer-Encoding header (give one: chunked)";
    else if (f->encoding && strcasecmp(f->encoding, "chunked") != 0) {
        *status = 501;
        *code = "not_implemented";
        *msg = "unsupported Transfer-Encoding (only chunked is supported)";
    } else if (f->encoding && f->lengths)
        *msg = "both Content-Length and Transfer-Encoding given (give one)";
    else
        return 0;
    return 1;
}

int http_body_append(conn_ctx *cc, const char *data, size_t n)
{
    if (cc->too_large || cc->len + n > cc->limit) {
        /* A chunked body that grew past the limit: no response can be queued in the middle of
         * an upload, so the connection is closed. */
        cc->too_large = 1;
        cc->status = 413;
        return -1;
    }
    if (cc->len + n + 1 > cc->cap) {
        size_t nc = cc->cap ? cc->cap : 4096;
        while (nc < cc->len + n + 1)
            nc *= 2;
        char *b = realloc(cc->body, nc);
        if (!b) return -2;
        cc->body = b;
        cc->cap = nc;
    }
    memcpy(cc->body + cc->len, data, n);
    cc->len += n;
    cc->body[cc->len] = '\0';
    return 0;
}
