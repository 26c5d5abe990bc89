/* 1,024 connections, each sending its next request as soon as the last one is answered, for
 * 2 s, with one HTTP worker and with two: no request may wait 5 s. libmicrohttpd 0.9.75's own
 * epoll loop waits again with the full idle timeout after a wait that returned exactly its batch
 * of 128 events; under such a closed loop that happens sooner or later, and every client then
 * sits until the 60 s connection timeout. The server drives its daemons itself to avoid that
 * (src/server/server.c, HTTP workers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <poll.h>
#include <sys/resource.h>

#include "perseus/server.h"
#include "server_harness.h"

#define BURST 1024

typedef struct burst_conn {
    int fd;
    size_t sent;
    char in[1024];
    size_t got;
} burst_conn;

static const char REQ[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

static int connect_nb(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A complete answer: headers and the Content-Length body. */
static int complete(burst_conn *c)
{
    c->in[c->got] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (!end) return 0;
    const char *cl = strstr(c->in, "Content-Length: ");
    long body = cl && cl < end ? strtol(cl + 16, NULL, 10) : 0;
    return (size_t)(end + 4 - c->in) + (size_t)body <= c->got;
}

/* n connections, each sending its next request as soon as the last is answered, for
 * duration_s. Returns the number of 200 answers; *worst_s the longest wait for one; gives up
 * (and reports it in *worst_s) when some request waited stall_s. */
static long closed_loop(int port, int n, double duration_s, double stall_s, double *worst_s)
{
    burst_conn *c = calloc((size_t)n, sizeof *c);
    double *sent_at = calloc((size_t)n, sizeof *sent_at);
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    assert_non_null(c);
    assert_non_null(sent_at);
    assert_non_null(pf);
    double t0 = harness_now();
    for (int i = 0; i < n; i++) {
        c[i].fd = connect_nb(port);
        assert_true(c[i].fd >= 0);
        sent_at[i] = t0;
    }
    long answered = 0;
    *worst_s = 0;
    for (;;) {
        double now = harness_now();
        if (now - t0 > duration_s) break;
        int stalled = 0;
        for (int i = 0; i < n; i++)
            if (now - sent_at[i] > stall_s) stalled = 1;
        if (stalled) {
            *worst_s = stall_s;
            break;
        }
        for (int i = 0; i < n; i++) {
            pf[i].fd = c[i].fd;
            pf[i].events = c[i].sent < sizeof REQ - 1 ? POLLOUT : POLLIN;
            pf[i].revents = 0;
        }
        if (poll(pf, (nfds_t)n, 100) < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++) {
            burst_conn *b = &c[i];
            if (!pf[i].revents) continue;
            if (b->sent < sizeof REQ - 1) {
                ssize_t w = write(b->fd, REQ + b->sent, sizeof REQ - 1 - b->sent);
                if (w > 0) b->sent += (size_t)w;
                continue;
            }
            ssize_t r = read(b->fd, b->in + b->got, sizeof b->in - 1 - b->got);
            if (r < 0 && errno == EAGAIN) continue;
            assert_true(r > 0); /* the server closed a keep-alive connection */
            b->got += (size_t)r;
            if (!complete(b)) continue;
            assert_int_equal(strncmp(b->in, "HTTP/1.1 200", 12), 0);
            answered++;
            double t = harness_now();
            if (t - sent_at[i] > *worst_s) *worst_s = t - sent_at[i];
            sent_at[i] = t;
            b->sent = b->got = 0;
        }
    }
    for (int i = 0; i < n; i++)
        close(c[i].fd);
    free(c);
    free(sent_at);
    free(pf);
    return answered;
}

static void run(unsigned threads)
{
    char dir[256];
    harness_tmpdir(dir, sizeof dir, "burst");
    assert_true(dir[0] != '\0');
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.port = 0;
    char db[300];
    snprintf(db, sizeof db, "%s/test.db", dir);
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.log_fd = -1;
    cfg.threads = threads;
    prs_server *srv = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_server_start(&cfg, &srv, &err), 0);
    int port = prs_server_port(srv);

    struct rlimit rl;
    int n = BURST;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(2 * BURST + 64)) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)(2 * BURST + 64) ? rl.rlim_max : 2 * BURST + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < (rlim_t)(2 * BURST + 64)) n = (int)(rl.rlim_cur - 64) / 2;
    }
    double worst = 0;
    long ok = closed_loop(port, n, 2.0, 5.0, &worst);
    fprintf(stderr, "threads %u: %d connections, %ld answers in 2 s, longest wait %.3f s\n",
            threads, n, ok, worst);
    assert_true(ok >= n);
    assert_true(worst < 5.0);
    prs_server_stop(srv);
    harness_rmdir(dir);
}

static void test_burst_one_worker(void **state)
{
    (void)state;
    run(1);
}

static void test_burst_two_workers(void **state)
{
    (void)state;
    run(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_one_worker),
        cmocka_unit_test(test_burst_two_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
