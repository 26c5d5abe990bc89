/* The HTTP workers: each worker thread drives its own libmicrohttpd daemon on a shared
 * listening socket, tracks its connections (timeouts, the global --max-connections cap) and
 * hands requests to http_request.c. A worker's connections are touched only by its own
 * thread; the count over all workers (s->nconns) is an atomic. */
#define _GNU_SOURCE /* pipe2, SOCK_CLOEXEC */
#include "perseus/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

/* Memory pool per connection (request line, headers, read buffer, response headers). Bodies
 * stream through http_on_request, so this bounds only what one read holds; libmicrohttpd clears
 * the pool between requests, so a small pool is also a faster one. */
#define CONN_MEMORY (8u * 1024u)

/* libmicrohttpd's messages about a client that went away (closed, reset, stopped reading): the
 * client's doing, not a server fault, so they are logged at debug. */
static const char *const PEER_GONE[] = {
    /* and a connection refused at a limit (--max-client-connections): by design, every time a
     * client goes past it, so not worth a line above debug */
    "Server reached connection limit",
    "The socket is no longer available",
    "The connection was forcibly closed",
    "Socket has been disconnected",
    "Connection socket is closed",
    "Connection was closed by remote side",
    "Failed to send data",
    "Failed to send the",
};

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    prs_server *s = cls;
    char msg[512], q[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    prs_log_level level = PRS_LOG_ERROR;
    for (size_t i = 0; i < sizeof PEER_GONE / sizeof PEER_GONE[0]; i++)
        if (strncmp(msg, PEER_GONE[i], strlen(PEER_GONE[i])) == 0) level = PRS_LOG_DEBUG;
    /* A client that failed the TLS handshake (plain HTTP, a CA that does not trust us): the
     * client's mistake, worth a warning, not the server's error. */
    if (level == PRS_LOG_ERROR && strstr(msg, "andshake")) level = PRS_LOG_WARN;
    /* A request libmicrohttpd itself refused (malformed, headers too large, HTTP/9.9): the
     * client's mistake too. */
    static const char refused[] = "Error processing request (HTTP response code is ";
    if (level == PRS_LOG_ERROR && strncmp(msg, refused, sizeof refused - 1) == 0) {
        int code = atoi(msg + sizeof refused - 1);
        if ((code >= 400 && code < 500) || code == 505) level = PRS_LOG_WARN;
    }
    srv_log(s, level, "msg=http_daemon detail=%s", srv_kv_quote(msg, q, sizeof q));
}

/* Connections opening and closing (on the worker's thread, or the stopping one at shutdown). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    http_worker *w = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *k = calloc(1, sizeof *k);
        if (!k) return;
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->c = c;
        k->w = w;
        k->fd = i ? i->connect_fd : -1;
        k->since = prs_mono_s();
        long n = __atomic_add_fetch(&w->s->nconns, 1, __ATOMIC_RELAXED);
        k->over_cap = n > (long)w->s->cfg.max_connections;
        k->next = w->conns;
        if (w->conns) w->conns->prev = k;
        w->conns = k;
        *socket_context = k;
        return;
    }
    conn_track *k = *socket_context;
    if (!k) return;
    if (k->prev)
        k->prev->next = k->next;
    else
        w->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    __atomic_sub_fetch(&w->s->nconns, 1, __ATOMIC_RELAXED);
    free(k);
    *socket_context = NULL;
}

/* A connection opened past the cap that sends no request within this long is closed: it holds
 * a socket the server cannot serve. */
#define OVER_CAP_GRACE_S 1.0

/* Close connections past their timeout (worker thread, at most every 100 ms): one that sends no
 * complete request headers within --idle-timeout of opening or of its last answer (idle, or
 * trickling bytes: libmicrohttpd's own timeout restarts at every byte), and one whose request
 * (body and answer) takes longer than --request-timeout. Shutting the socket down makes
 * libmicrohttpd see it closed and release it. */
static void sweep_timeouts(http_worker *w)
{
    double now = prs_mono_s();
    if (now - w->swept < 0.1) return;
    w->swept = now;
    const prs_server_config *cfg = &w->s->cfg;
    for (conn_track *k = w->conns; k; k = k->next) {
        double limit = k->in_request ? cfg->request_timeout_s
                       : k->over_cap ? OVER_CAP_GRACE_S
                                     : cfg->idle_timeout_s;
        if (k->cut || k->fd < 0 || now - k->since <= limit) continue;
        k->cut = 1;
        shutdown(k->fd, SHUT_RDWR);
        srv_log(w->s, PRS_LOG_DEBUG, "msg=connection_timeout in_request=%d seconds=%.1f",
                k->in_request, now - k->since);
    }
}

/* ---- HTTP workers ----
 *
 * Each worker thread runs its own libmicrohttpd daemon in "external loop" mode: epoll inside the
 * daemon, but the waiting is ours. All daemons share one listening socket (each holds a dup), so
 * the kernel spreads new connections over the workers. We wait on the daemon's epoll descriptor
 * and a stop pipe with poll(), with libmicrohttpd's own timeout, then let the daemon work without
 * blocking (MHD_run). Waiting ourselves matters: libmicrohttpd 0.9.75's internal epoll loop calls
 * epoll_wait again with the full idle timeout whenever one call returned exactly its batch size
 * (128 events), even though connections are queued for processing, so a burst of 1,024 requests
 * could leave all of them unanswered until the connection timeout (60 s). */

static void *http_worker_main(void *arg)
{
    http_worker *w = arg;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(w->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    int epfd = info ? info->epoll_fd : -1;
    int passes = 0;
    for (;;) {
        MHD_UNSIGNED_LONG_LONG to = 0;
        int timeout_ms = 100; /* the timeout sweep's period */
        if (MHD_get_timeout(w->mhd, &to) == MHD_YES && to < (MHD_UNSIGNED_LONG_LONG)timeout_ms)
            timeout_ms = (int)to;
        /* A resumed connection (its answer prepared on the pool) must be taken back, its last
         * call made and its answer written: libmicrohttpd's epoll descriptor does not wake us
         * for that (the socket was writable all along), so every large request waited for the
         * next timeout, 100 ms. The pool wakes us through wake_fd, and a few passes without
         * waiting finish the work. */
        if (passes > 0) {
            passes--;
            timeout_ms = 0;
        }
        struct pollfd pf[3] = {{epfd, POLLIN, 0}, {w->stop_fd, POLLIN, 0}, {w->wake_fd, POLLIN, 0}};
        int n = poll(pf, 3, timeout_ms);
        if (n < 0 && errno != EINTR) break;
        if (pf[1].revents) break;
        if (pf[2].revents) {
            uint64_t count;
            ssize_t r = read(w->wake_fd, &count, sizeof count);
            (void)r;
            passes = 4;
        }
        if (MHD_run(w->mhd) != MHD_YES) break;
        sweep_timeouts(w);
    }
    return NULL;
}

/* Connections a daemon admits past the global cap, to answer them 503: a quarter of the cap, at
 * least 256. */
static unsigned over_cap_room(unsigned cap)
{
    return cap / 4 > 256 ? cap / 4 : 256;
}

/* One worker's daemon on its copy of the listening socket: HTTPS when s->tls holds a
 * certificate. The logger comes first, so that MHD reports option errors through it too. */
static struct MHD_Daemon *start_daemon(prs_server *s, http_worker *w, int fd, unsigned per,
                                       unsigned per_ip)
{
    struct MHD_OptionItem tls[] = {
        {s->tls.cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->tls.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key},
        {MHD_OPTION_END, 0, NULL}};
    return MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME |
            (s->tls.cert ? MHD_USE_TLS : 0),
        0, NULL, NULL, http_on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
        MHD_OPTION_ARRAY, tls, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_CONNECTION_LIMIT, per, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, w, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(s->cfg.request_timeout_s + 1), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, s, MHD_OPTION_END);
}

/* Bound first of all (prs_server_start): a port in use is refused before the data directory or
 * the database is touched. */
int http_listen(prs_server *s, const struct sockaddr_in *addr, prs_error *err)
{
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) return prs_error_set(err, PRS_EIO, "socket: %s", strerror(errno));
    int one = 1, rc = 0;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in bound = {0}; /* filled by getsockname */
    socklen_t blen = sizeof bound;
    if (bind(s->listen_fd, (const struct sockaddr *)addr, sizeof *addr) != 0 ||
        listen(s->listen_fd, 4096) != 0)
        rc = prs_error_set(err, PRS_EIO, "cannot listen on %s:%d: %s", s->listen_host, s->cfg.port,
                           strerror(errno));
    else if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &blen) != 0)
        rc = prs_error_set(err, PRS_EIO, "getsockname: %s", strerror(errno));
    if (rc) {
        close(s->listen_fd);
        s->listen_fd = -1;
        return rc;
    }
    s->port = ntohs(bound.sin_port);
    return 0;
}

int http_start(prs_server *s, prs_error *err)
{
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0)
        return prs_error_set(err, PRS_EIO, "pipe: %s", strerror(errno));
    s->nworkers = s->cfg.threads;
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    if (!s->workers) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (unsigned i = 0; i < s->nworkers; i++)
        s->workers[i].wake_fd = -1;
    /* The global cap is ours (on_connection), counted over every worker: each daemon admits as
     * many as the cap plus room for the ones past it, which get a 503, so that libmicrohttpd's
     * own limit (past which it stops accepting, leaving new clients waiting in the backlog) is
     * never what a client meets first, however unevenly the kernel spreads the connections. A
     * daemon admits its share of one client's. */
    unsigned per = s->cfg.max_connections + over_cap_room(s->cfg.max_connections);
    unsigned per_ip = (s->cfg.max_client_connections + s->nworkers - 1) / s->nworkers;
    for (unsigned i = 0; i < s->nworkers; i++) {
        http_worker *w = &s->workers[i];
        w->stop_fd = s->stop_pipe[0];
        w->s = s;
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->wake_fd < 0) return prs_error_set(err, PRS_EIO, "eventfd: %s", strerror(errno));
        int fd = fcntl(s->listen_fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return prs_error_set(err, PRS_EIO, "dup: %s", strerror(errno));
        w->mhd = start_daemon(s, w, fd, per, per_ip);
        if (!w->mhd) {
            close(fd);
            return prs_error_set(err, PRS_EIO, "cannot start the HTTP%s daemon on %s:%d%s",
                                 s->tls.cert ? "S" : "", s->listen_host, s->port,
                                 s->tls.cert ? " (is the key the certificate's, and both PEM?)"
                                             : "");
        }
        if (pthread_create(&w->thread, NULL, http_worker_main, w) != 0)
            return prs_error_set(err, PRS_EIO, "cannot start an HTTP worker thread");
        w->started = 1;
    }
    return 0;
}

/* Stop the workers (requests being handled finish first: handlers run on the worker threads),
 * then the daemons, which close the connections left. */
void http_stop(prs_server *s)
{
    if (s->stop_pipe[1] >= 0) {
        ssize_t w = write(s->stop_pipe[1], "x", 1);
        (void)w;
    }
    for (unsigned i = 0; s->workers && i < s->nworkers; i++)
        if (s->workers[i].started) pthread_join(s->workers[i].thread, NULL);
    /* The pool answers what it holds and resumes those connections: a daemon must not stop
     * with a connection suspended. */
    workq_stop(s->heavy);
    s->heavy = NULL;
    for (unsigned i = 0; s->workers && i < s->nworkers; i++) {
        if (s->workers[i].mhd) MHD_stop_daemon(s->workers[i].mhd);
        if (s->workers[i].wake_fd >= 0) close(s->workers[i].wake_fd);
    }
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
    for (int i = 0; i < 2; i++)
        if (s->stop_pipe[i] >= 0) close(s->stop_pipe[i]);
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
}
