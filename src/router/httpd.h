/* What the router and the fake serving instance share about serving HTTP with libmicrohttpd
 * (httpd.c): a daemon on HOST:PORT (a thread per connection, or driven by the caller's epoll), the
 * port written to a file once listening, request bodies read to a bound, and responses in JSON, in
 * Prometheus text and in OpenAI's error shape. */
#ifndef PRS_ROUTER_HTTPD_H
#define PRS_ROUTER_HTTPD_H

#include <microhttpd.h>
#include <stddef.h>

#include "perseus/error.h"

/* A request body read to a bound: once more than max bytes arrive, too_large is set and the rest
 * is discarded (the handler answers 413 when the upload ends). */
typedef struct prs_httpd_body {
    char *data; /* malloc'd, NUL-terminated, len bytes */
    size_t len, max;
    int too_large, failed; /* failed: memory ran out */
} prs_httpd_body;

void prs__httpd_body_add(prs_httpd_body *b, const char *data, size_t n);
void prs__httpd_body_free(prs_httpd_body *b);

/* Start a daemon (thread per connection, at most max_conns connections, idle_timeout_s per
 * connection, 0 for none) on host:port (port 0: a free one) calling handler(cls) for every
 * request and done(cls) when each ends. *port gets the port. PRS_EINVAL when host:port is
 * malformed, PRS_EIO when it cannot be bound. */
int prs__httpd_start(const char *listen, unsigned max_conns, unsigned idle_timeout_s,
                     MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback done,
                     void *cls, struct MHD_Daemon **out, int *port, prs_error *err);
/* The same driven from outside: no thread of its own, an epoll descriptor
 * (MHD_DAEMON_INFO_EPOLL_FD) readable when it has work, which MHD_run does (MHD_get_timeout
 * says when at the latest); connections may be suspended (MHD_suspend_connection) while they
 * wait. Handlers must not block. */
int prs__httpd_start_events(const char *listen, unsigned max_conns, unsigned idle_timeout_s,
                            MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback done,
                            void *cls, struct MHD_Daemon **out, int *port, prs_error *err);
/* Raise this process's limit of open files to its hard limit; PRS_EINVAL (saying so) when that
 * is below need. */
int prs__httpd_raise_nofile(unsigned long need, prs_error *err);
/* Write the port to path atomically (a temporary file renamed into place). */
int prs__httpd_write_port(const char *path, int port, prs_error *err);

/* Queue a response of the given status with body (copied) and content type. */
enum MHD_Result prs__httpd_send(struct MHD_Connection *c, unsigned status, const char *ctype,
                                const char *body, size_t len);
/* An OpenAI error body (oai_request.h) with status. */
enum MHD_Result prs__httpd_send_oai_error(struct MHD_Connection *c, unsigned status,
                                          const char *type, const char *param, const char *code,
                                          const char *message);

#endif
