/* server_contention: the scenarios of many connections: unauth (large bodies without a token) and
 * flood (idle connections). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "contention.h"

enum { NCONN = 200 };                  /* unauth's connections */
#define UNAUTH_BODY ((size_t)16 << 20) /* a profile post's body; results posts send 1 MiB */

/* unauth's connections: what each has sent, whether it was answered and whether that was
 * before its whole body was sent. */
typedef struct unauth {
    int fds[NCONN];
    size_t sent[NCONN];
    int answered[NCONN], early[NCONN];
    int open;
} unauth;

/* The body connection i announces. */
static size_t unauth_want(int i)
{
    return i % 4 < 2 ? UNAUTH_BODY : (size_t)1 << 20;
}

/* Every connection opened (non-blocking) and its request's head sent: half to V without its
 * token, half to a job that does not exist; half profile posts, half results posts. */
static void unauth_connect(unauth *u, int port, const char *vid)
{
    for (int i = 0; i < NCONN; i++) {
        u->fds[i] = sc_connect_port(port);
        if (u->fds[i] < 0) sc_die("connect: %s", strerror(errno));
        fcntl(u->fds[i], F_SETFL, O_NONBLOCK);
        char head[512];
        /* Half to an existing job without its token, half to a job that does not exist. */
        int n = snprintf(head, sizeof head,
                         "POST /v1/jobs/%s/%s HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         i % 2 ? vid : "AAAAAAAAAAAAAAAA", i % 4 < 2 ? "profile" : "results",
                         unauth_want(i));
        if (send(u->fds[i], head, (size_t)n, MSG_NOSIGNAL) != n) sc_die("send");
        u->sent[i] = 0;
    }
    u->open = NCONN;
}

static void unauth_close(unauth *u, int i)
{
    close(u->fds[i]);
    u->fds[i] = -1;
    u->open--;
}

/* One turn: wait up to 50 ms, read the answers (a connection is closed once answered), send
 * the next chunk of each body. */
static void unauth_turn(unauth *u, const char *chunk, size_t chunk_len)
{
    struct pollfd pf[NCONN];
    for (int i = 0; i < NCONN; i++) {
        pf[i].fd = u->fds[i];
        pf[i].events = POLLIN | (u->sent[i] < unauth_want(i) ? POLLOUT : 0);
        pf[i].revents = 0;
    }
    poll(pf, NCONN, 50);
    for (int i = 0; i < NCONN; i++) {
        if (u->fds[i] < 0) continue;
        size_t want = unauth_want(i);
        if (pf[i].revents & POLLIN) {
            char buf[512];
            ssize_t k = recv(u->fds[i], buf, sizeof buf, 0);
            if (k > 0 && !u->answered[i]) {
                u->answered[i] = 1;
                u->early[i] = u->sent[i] < want;
            }
            if (k <= 0 || u->answered[i]) {
                unauth_close(u, i);
                continue;
            }
        }
        if ((pf[i].revents & POLLOUT) && u->sent[i] < want) {
            size_t n = want - u->sent[i] < chunk_len ? want - u->sent[i] : chunk_len;
            ssize_t w = send(u->fds[i], chunk, n, MSG_NOSIGNAL);
            if (w > 0) u->sent[i] += (size_t)w;
            if (w < 0 && errno != EAGAIN) unauth_close(u, i);
        } else if (pf[i].revents & (POLLERR | POLLHUP)) {
            unauth_close(u, i);
        }
    }
}

/* How many were answered, how many early, the bytes sent and the server's RSS growth. */
static void unauth_report(unauth *u, double secs, long rss0, long peak)
{
    int nans = 0, nearly = 0;
    size_t total = 0;
    for (int i = 0; i < NCONN; i++) {
        nans += u->answered[i];
        nearly += u->early[i];
        total += u->sent[i];
        if (u->fds[i] >= 0) close(u->fds[i]);
    }
    printf("  %.3f s: %d of %d answered (%d before their body was sent), %.1f MB of bodies sent;"
           " server RSS %.1f MB before, peak %.1f MB: growth %.1f MB  [goal < 50 MB: %s]\n",
           secs, nans, NCONN, nearly, (double)total / 1e6, rss0 / 1024.0, peak / 1024.0,
           (peak - rss0) / 1024.0, (peak - rss0) / 1024.0 < 50 ? "met" : "MISSED");
}

/* 200 connections, each posting 16 MiB without a token to a job route. */
void sc_scenario_unauth(const char *bin)
{
    printf("unauth: %d connections post 16 MiB (profile) or 1 MiB (results) to job routes "
           "without a token\n",
           NCONN);
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    static const char *const tok[] = {"--create-token", "bench-create-token-0123456789", NULL};
    sc_bench_begin(&b, bin, "unauth", tok);
    sc_bench_victim(&b, "bench-create-token-0123456789");
    long rss0 = sc_proc_kb(b.s.pid, "VmRSS"), peak = rss0;
    static unauth u;
    static char chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    sc_poller_start(&b.p);
    double t0 = sc_now_s();
    unauth_connect(&u, b.s.port, b.v.id);
    double last_sample = 0;
    while (u.open > 0 && sc_now_s() - t0 < 300) {
        unauth_turn(&u, chunk, sizeof chunk);
        if (sc_now_s() - last_sample > 0.05) {
            last_sample = sc_now_s();
            long rss = sc_proc_kb(b.s.pid, "VmRSS");
            if (rss > peak) peak = rss;
        }
    }
    unauth_report(&u, sc_now_s() - t0, rss0, peak);
    sc_poller_report(&b.p, "during the posts");
    sc_bench_end(&b);
    free(b.p.lat_s);
}

/* 10,000 idle connections from 10 addresses; then new clients ask /healthz. */
void sc_scenario_flood(const char *bin, int nidle)
{
    printf("flood: %d idle connections (--max-connections 8192), then new clients\n", nidle);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if ((long)rl.rlim_cur < nidle + 100) {
        printf("  skipped: the open-file limit (%ld) is below %d\n", (long)rl.rlim_cur,
               nidle + 100);
        return;
    }
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    sc_bench_begin(&b, bin, "flood", NULL);
    sc_bench_victim(&b, NULL);
    long err0 = sc_count_lines(b.s.log, "level=error", 0);
    sc_poller_start(&b.p);
    int *fds = calloc((size_t)nidle, sizeof *fds);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)b.s.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    double t0 = sc_now_s();
    for (int i = 0; i < nidle; i++) {
        /* From 10 addresses (127.0.0.2 to .11), each well under --max-client-connections
         * (which each worker enforces for its share). */
        struct sockaddr_in from = {0};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (unsigned)(i % 10));
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fds[i] >= 0 && bind(fds[i], (struct sockaddr *)&from, sizeof from) == 0)
            (void)connect(fds[i], (struct sockaddr *)&a, sizeof a); /* non-blocking */
    }
    /* Wait (at most 10 s) until the server holds them: its open descriptors. */
    long held = 0;
    for (double dl = sc_now_s() + 10; sc_now_s() < dl && (held = sc_count_fds(b.s.pid)) < nidle;)
        sc_sleep_ms(20);
    printf("  %d connections opened, the server holding %ld descriptors after %.3f s\n", nidle,
           held, sc_now_s() - t0);
    for (int k = 0; k < 5; k++) {
        double c0 = sc_now_s();
        errno = 0;
        reply r = sc_request1(b.s.port, "GET", "/healthz", NULL, NULL, NULL, 0);
        printf("  new client %d: answered %d in %.3f s%s%s\n", k, r.status, sc_now_s() - c0,
               r.status ? "" : ": ", r.status ? "" : strerror(errno));
        free(r.body);
    }
    sc_poller_report(&b.p, "on a connection opened before the flood");
    printf("  error-level log lines during the flood: %ld\n",
           sc_count_lines(b.s.log, "level=error", 0) - err0);
    sc_count_lines(b.s.log, "level=error", 3);
    for (int i = 0; i < nidle; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(fds);
    sc_bench_end(&b);
    free(b.p.lat_s);
}
