/* Connections under abuse (docs/server.md, 'Connections'), against a server in this process:
 *   - 8,300 idle connections from one client (address 127.0.0.2) do not stop a healthy client
 *     (127.0.0.1): the per-client cap keeps them from taking the server's connections;
 *   - past the global cap a new connection is answered 503 at once, and a connection opened
 *     before keeps working;
 *   - 200 slowloris connections, trickling a header byte every 200 ms, and an idle connection
 *     are closed once the idle timeout passes (libmicrohttpd's own timeout restarts at every
 *     byte). */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "perseus/server.h"
#include "server_harness.h"
#include "skips.h"

static prs_server *srv;
static int port;
static char dir[256];

static int start(prs_server_config *cfg)
{
    harness_tmpdir(dir, sizeof dir, "conns");
    if (!dir[0]) return -1;
    char db[300];
    snprintf(db, sizeof db, "%s/test.db", dir);
    cfg->port = 0;
    cfg->db_path = db;
    cfg->data_dir = dir;
    cfg->log_fd = -1;
    cfg->threads = 2;
    prs_error err = {0, ""};
    if (prs_server_start(cfg, &srv, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    port = prs_server_port(srv);
    return 0;
}

static void stop(void)
{
    prs_server_stop(srv);
    harness_rmdir(dir);
}

/* A non-blocking connection from `from` (a loopback address) to the server; -1 on failure. */
static int open_from(const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    inet_pton(AF_INET, from, &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether the server closed fd within max_s (a read returns 0 or an error). */
static int closed_within(int fd, double max_s)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(max_s * 1000)) <= 0) return 0;
    char b[256];
    return recv(fd, b, sizeof b, 0) <= 0;
}

/* One GET /healthz on a keep-alive connection fd (blocking): the status, 0 when none. */
static int keepalive_get(int fd)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) return 0;
    char buf[4096];
    size_t len = 0;
    struct pollfd p = {fd, POLLIN, 0};
    while (len < sizeof buf - 1 && poll(&p, 1, 5000) > 0) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = '\0';
        const char *end = strstr(buf, "\r\n\r\n"), *cl = strstr(buf, "Content-Length: ");
        if (end && cl && len >= (size_t)(end + 4 - buf) + (size_t)atol(cl + 16)) break;
    }
    buf[len] = '\0';
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The slowest of n /healthz requests on fresh connections (each must answer 200), seconds. */
static double worst_healthz(int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double r0 = harness_now();
        http_reply r = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
        double secs = harness_now() - r0;
        if (secs > worst) worst = secs;
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    return worst;
}

/* Latency bounds hold on an idle machine; the allowance for a busy one is 50 times the slowest
 * of a few requests measured before the load under test. */
static double allowance_s(void)
{
    return 50 * worst_healthz(5);
}

static void test_idle_flood(void **state)
{
    (void)state;
    raise_fd_limit();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 8300 + 2500) {
        prs_skip_case("the open-file limit is below 10,800");
    }
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    assert_int_equal(start(&cfg), 0);
    double allowance = allowance_s();
    static int fds[8300];
    int opened = 0;
    double t0 = harness_now();
    for (int i = 0; i < 8300; i++)
        if ((fds[i] = open_from("127.0.0.2")) >= 0) opened++;
    double opening = harness_now() - t0;
    /* The server accepts in arrival order: once a request made now is answered, it has taken
     * (and refused) the flood before it. */
    worst_healthz(1);
    double worst = worst_healthz(20);
    print_message("%d idle connections from one client opened in %.2f s; a healthy client's 20 "
                  "requests: slowest %.1f ms (allowance %.0f ms)\n",
                  opened, opening, worst * 1e3, allowance * 1e3);
    assert_true(opened > 8000);
    assert_true(worst < 0.5 + allowance);
    for (int i = 0; i < 8300; i++)
        if (fds[i] >= 0) close(fds[i]);
    stop();
}

static void test_global_cap(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_connections = 64;
    assert_int_equal(start(&cfg), 0);
    double allowance = allowance_s();
    int keep = open_from("127.0.0.1");
    assert_true(keep >= 0);
    int fl = fcntl(keep, F_GETFL);
    fcntl(keep, F_SETFL, fl & ~O_NONBLOCK);
    assert_int_equal(keepalive_get(keep), 200);
    int fds[100];
    for (int i = 0; i < 100; i++)
        fds[i] = open_from("127.0.0.2");
    /* Until the server has taken them: a new connection is then refused. */
    http_reply r = {0};
    double secs = 0;
    for (double w0 = harness_now(); harness_now() - w0 < 30; harness_sleep_ms(5)) {
        http_reply_free(&r);
        double t0 = harness_now();
        r = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
        secs = harness_now() - t0;
        if (r.status == 503) break;
    }
    print_message("past the cap of 64: a new connection answered %d in %.1f ms (allowance %.0f "
                  "ms)\n",
                  r.status, secs * 1e3, allowance * 1e3);
    assert_int_equal(r.status, 503);
    assert_true(secs < 1.0 + allowance);
    assert_non_null(strstr(r.body, "--max-connections"));
    http_reply_free(&r);
    assert_int_equal(keepalive_get(keep), 200); /* the existing connection keeps working */
    for (int i = 0; i < 100; i++)
        if (fds[i] >= 0) close(fds[i]);
    /* Once the server has seen them closed, new connections are served again. */
    r = (http_reply){0};
    for (double w0 = harness_now(); harness_now() - w0 < 30; harness_sleep_ms(5)) {
        http_reply_free(&r);
        r = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
        if (r.status == 200) break;
    }
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    close(keep);
    stop();
}

static void test_slowloris(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.idle_timeout_s = 1;
    assert_int_equal(start(&cfg), 0);
    double allowance = allowance_s();
    enum { N = 200 };
    int fds[N], closed[N] = {0};
    for (int i = 0; i < N; i++)
        assert_true((fds[i] = open_from("127.0.0.2")) >= 0);
    int idle = open_from("127.0.0.3");
    static const char head[] =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaa";
    double t0 = harness_now();
    int nclosed = 0;
    for (size_t k = 0; nclosed < N && harness_now() - t0 < 30; k++) {
        for (int i = 0; i < N; i++) {
            if (closed[i]) continue;
            if (send(fds[i], head + (k % (sizeof head - 1)), 1, MSG_NOSIGNAL) != 1 ||
                closed_within(fds[i], 0)) {
                closed[i] = 1;
                nclosed++;
            }
        }
        harness_sleep_ms(200); /* a byte every 200 ms: the trickle under test */
    }
    double secs = harness_now() - t0;
    print_message("%d of %d trickling connections closed after %.2f s (idle timeout 1 s, "
                  "allowance %.0f ms)\n",
                  nclosed, N, secs, allowance * 1e3);
    assert_int_equal(nclosed, N);
    assert_true(secs < 3.0 + allowance);
    assert_true(closed_within(idle, 1.0 + allowance));
    http_reply r = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    close(idle);
    stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_flood),
        cmocka_unit_test(test_global_cap),
        cmocka_unit_test(test_slowloris),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
