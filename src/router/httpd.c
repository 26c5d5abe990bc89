/* HTTP plumbing shared by perseus-router and perseus-fakeserve (httpd.h). A thread per
 * connection keeps the fake simple: a handler may block on its engine while the daemon's
 * connection limit bounds the threads. The router's daemon is event-driven instead: an epoll
 * descriptor run by the caller's thread, handlers that never block, and connections suspended
 * while they wait. */
#define _POSIX_C_SOURCE 200809L
#include "httpd.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "oai_request.h"

#define LISTEN_BACKLOG 4096 /* connections waiting to be accepted, for bursts of clients */

void prs__httpd_body_add(prs_httpd_body *b, const char *data, size_t n)
{
    if (b->too_large || b->failed) return;
    if (b->len + n > b->max) {
        b->too_large = 1;
        return;
    }
    char *d = realloc(b->data, b->len + n + 1);
    if (d == NULL) {
        b->failed = 1;
        return;
    }
    memcpy(d + b->len, data, n);
    b->len += n;
    d[b->len] = '\0';
    b->data = d;
}

void prs__httpd_body_free(prs_httpd_body *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static int resolve(const char *listen, struct sockaddr_in *sa, prs_error *err)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen || (size_t)(colon - listen) >= sizeof host)
        return prs_error_set(err, PRS_EINVAL, "--listen: expected HOST:PORT, got '%s'", listen);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535)
        return prs_error_set(err, PRS_EINVAL, "--listen: bad port in '%s'", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return prs_error_set(err, PRS_EINVAL, "--listen: cannot resolve '%s' to IPv4", host);
    memcpy(sa, res->ai_addr, sizeof *sa);
    freeaddrinfo(res);
    sa->sin_port = htons((uint16_t)port);
    return 0;
}

static int start(unsigned flags, size_t conn_memory, const char *listen, unsigned max_conns,
                 unsigned idle_timeout_s, MHD_AccessHandlerCallback handler,
                 MHD_RequestCompletedCallback done, void *cls, struct MHD_Daemon **out, int *port,
                 prs_error *err)
{
    struct sockaddr_in sa;
    int rc = resolve(listen, &sa, err);
    if (rc) return rc;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)LISTEN_BACKLOG, MHD_OPTION_NOTIFY_COMPLETED, done,
        cls, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_memory, MHD_OPTION_END);
    if (d == NULL) return prs_error_set(err, PRS_EIO, "cannot listen on %s", listen);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? (int)info->port : 0;
    *out = d;
    return 0;
}

int prs__httpd_start(const char *listen, unsigned max_conns, unsigned idle_timeout_s,
                     MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback done,
                     void *cls, struct MHD_Daemon **out, int *port, prs_error *err)
{
    return start(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL,
                 (size_t)32768, listen, max_conns, idle_timeout_s, handler, done, cls, out, port,
                 err);
}

int prs__httpd_start_events(const char *listen, unsigned max_conns, unsigned idle_timeout_s,
                            MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback done,
                            void *cls, struct MHD_Daemon **out, int *port, prs_error *err)
{
    /* 16 KiB a connection (libmicrohttpd's default is 32): its buffers are cleared for every
     * request, and ten thousand connections hold 160 MiB */
    return start(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, (size_t)16384, listen, max_conns,
                 idle_timeout_s, handler, done, cls, out, port, err);
}

int prs__httpd_raise_nofile(unsigned long need, prs_error *err)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return prs_error_set(err, PRS_EIO, "cannot read the limit of open files");
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            return prs_error_set(err, PRS_EIO, "cannot raise the limit of open files to %llu",
                                 (unsigned long long)rl.rlim_max);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        return prs_error_set(err, PRS_EINVAL,
                             "max_connections needs %lu open files, but this process may open "
                             "only %llu (raise the hard limit: ulimit -Hn, LimitNOFILE=)",
                             need, (unsigned long long)rl.rlim_cur);
    return 0;
}

int prs__httpd_write_port(const char *path, int port, prs_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return prs_error_set(err, PRS_EINVAL, "port file name too long");
    FILE *f = fopen(tmp, "w");
    if (f == NULL) return prs_error_set(err, PRS_EIO, "%s: cannot write", tmp);
    int bad = fprintf(f, "%d\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) return prs_error_set(err, PRS_EIO, "%s: cannot write", path);
    return 0;
}

enum MHD_Result prs__httpd_send(struct MHD_Connection *c, unsigned status, const char *ctype,
                                const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result prs__httpd_send_oai_error(struct MHD_Connection *c, unsigned status,
                                          const char *type, const char *param, const char *code,
                                          const char *message)
{
    char *body = prs__oai_error_body(message, type, param, code);
    static const char fallback[] =
        "{\"error\":{\"message\":\"error\",\"type\":\"server_error\",\"param\":null,"
        "\"code\":null}}";
    enum MHD_Result r = prs__httpd_send(c, status, "application/json", body ? body : fallback,
                                        body ? strlen(body) : sizeof fallback - 1);
    free(body);
    return r;
}
