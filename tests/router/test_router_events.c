/* perseus-router's event-driven serving (src/router/router.c, backend.c), in-process in front of
 * the measuring backend (bench/lib/sse_serve.h):
 *   - 300 streams at once are all held (the backend sends all 300 at the same time) without a
 *     thread more than an idle router has, and each ends with its every event and [DONE];
 *   - a client that stops reading a flood of events (16.5 MB: its socket buffers, the router's
 *     hold and the sockets between router and backend fill) does not stall the other streams, which
 * end meanwhile; once it reads again, it gets its whole stream;
 *   - a client leaving mid-stream makes the router close its transfer: the backend sees its
 *     stream abandoned, and the router's metrics count the departed client;
 *   - a client leaving while it waits for a whole (not streamed) answer: the router closes its
 *     connection to a silent instance at once and counts the departed client, while a kept-alive
 *     client sending its next request as it waits is answered. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "router.h"
#include "router_config.h"
#include "sse_serve.h"
#include "wait.h"

#define NSTREAMS 300
#define TOKENS 40
#define FLOOD_TOKENS 150000 /* 16.5 MB: more than the sockets' buffers on the way hold */

typedef struct client {
    int fd;
    char *buf; /* the body, chunked encoding removed */
    size_t len, cap, scanned;
    char raw_head[4096]; /* the response's head, then the current chunk-size line */
    size_t head_len, remain;
    int in_body, state; /* 0: a chunk-size line, 1: chunk data, 2: the data's CRLF */
    long events;
    int done, reading;
} client;

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void client_open(client *c, int port, long tokens, int flood)
{
    memset(c, 0, sizeof *c);
    c->reading = 1;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->fd >= 0);
    int small = 65536; /* so that a client that does not read is felt soon */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(c->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char body[256], req[512];
    int n =
        snprintf(body, sizeof body,
                 "{\"model\": \"m\", \"prompt\": \"hi\", \"max_tokens\": %ld, \"stream\": true%s}",
                 tokens, flood ? ", \"sse_gap_ms\": 0" : "");
    int k =
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\n\r\n%s",
                 n, body);
    assert_int_equal(send(c->fd, req, (size_t)k, MSG_NOSIGNAL), k);
}

static void append(client *c, const char *p, size_t n)
{
    if (c->cap - c->len < n + 1) {
        c->cap = c->cap ? c->cap * 2 : 262144;
        while (c->cap - c->len < n + 1)
            c->cap *= 2;
        c->buf = realloc(c->buf, c->cap + 1);
        assert_non_null(c->buf);
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    c->buf[c->len] = '\0';
}

/* Bytes from the router: the head, then the chunked body. */
static void decode(client *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!c->in_body) {
            c->raw_head[c->head_len++] = p[i];
            assert_true(c->head_len < sizeof c->raw_head);
            if (c->head_len >= 4 && memcmp(c->raw_head + c->head_len - 4, "\r\n\r\n", 4) == 0)
                c->in_body = 1, c->head_len = 0;
        } else if (c->state == 1) {
            size_t k = n - i < c->remain ? n - i : c->remain;
            append(c, p + i, k);
            i += k - 1;
            c->remain -= k;
            if (c->remain == 0) c->state = 2;
        } else if (p[i] == '\n') {
            c->raw_head[c->head_len] = '\0';
            c->head_len = 0;
            if (c->state == 0) {
                c->remain = strtoul(c->raw_head, NULL, 16);
                c->state = c->remain ? 1 : 0;
            } else {
                c->state = 0;
            }
        } else if (c->head_len < sizeof c->raw_head - 1) {
            c->raw_head[c->head_len++] = p[i];
        }
    }
}

/* Read what every reading client has, without waiting: counts its events, sees its [DONE]. */
static void pump(client *cs, int n)
{
    struct pollfd pfd[NSTREAMS + 2];
    for (int i = 0; i < n; i++)
        pfd[i] =
            (struct pollfd){.fd = cs[i].reading && !cs[i].done ? cs[i].fd : -1, .events = POLLIN};
    if (poll(pfd, (nfds_t)n, 2) <= 0) return;
    for (int i = 0; i < n; i++) {
        client *c = &cs[i];
        if (!(pfd[i].revents & (POLLIN | POLLHUP))) continue;
        char raw[65536];
        ssize_t r = recv(c->fd, raw, sizeof raw, MSG_DONTWAIT);
        if (r <= 0) continue;
        decode(c, raw, (size_t)r);
        if (c->len == 0) continue;
        /* "data: {" cannot overlap itself: count the matches from where the last scan left
         * off, which is before a partial match at the end */
        size_t from = c->scanned;
        char *p = c->buf + from;
        for (; (p = strstr(p, "data: {")) != NULL; p += 7) {
            c->events++;
            c->scanned = (size_t)(p - c->buf) + 7;
        }
        if (c->len >= 6 && c->scanned < c->len - 6) c->scanned = c->len - 6;
        c->done = strstr(c->buf + (from > 12 ? from - 12 : 0), "data: [DONE]") != NULL;
    }
}

static int count_done(client *cs, int n, int from)
{
    int d = 0;
    for (int i = from; i < n; i++)
        d += cs[i].done;
    return d;
}

static int count_started(client *cs, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        d += cs[i].events > 0;
    return d;
}

typedef struct fixture {
    sse_serve *backend;
    prs_router *router;
    int port;
} fixture;

/* A router whose one instance listens on bport. */
static void start_router(fixture *f, int bport)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"model\": \"m\", \"cost_model\": {\"model\": \"llama2-70b\", \"gpu\": \"h100\"}, "
             "\"max_connections\": 400, \"pools\": [{\"name\": \"p\", \"classes\": "
             "[\"SS\",\"SM\",\"SL\",\"MS\",\"MM\",\"ML\",\"LS\",\"LM\",\"LL\"], \"instances\": "
             "[{\"name\": \"i\", \"url\": \"http://127.0.0.1:%d\", \"tp\": 2, "
             "\"max_running\": 1000}]}]}",
             bport);
    prs_router_config cfg;
    prs_error err = {0};
    assert_int_equal(prs__router_config_parse(text, strlen(text), "r.json", &cfg, &err), 0);
    assert_int_equal(prs__router_new(&cfg, &f->router, &err), 0);
    int rc = prs__router_listen(f->router, "127.0.0.1:0", &f->port, &err);
    if (rc) fail_msg("%s", err.msg);
}

static void start(fixture *f, double gap_s)
{
    sse_serve_opts o = {.ttft_s = 0.01, .gap_s = gap_s, .default_tokens = 4, .max_conns = 4096};
    int bport;
    assert_int_equal(sse_serve_start(0, &o, &f->backend, &bport), 0);
    start_router(f, bport);
}

static void stop(fixture *f)
{
    prs__router_free(f->router);
    sse_serve_stop(f->backend);
}

static void test_many_streams(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0.05);
    int idle = threads();
    static client cs[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++)
        client_open(&cs[i], f.port, TOKENS, 0);
    /* all 300 streams open at the backend at once, each having passed events to its client */
    PRS_WAIT_UNTIL((pump(cs, NSTREAMS), sse_serve_open_streams(f.backend) == NSTREAMS &&
                                            count_started(cs, NSTREAMS) == NSTREAMS),
                   60);
    assert_int_equal(sse_serve_open_streams(f.backend), NSTREAMS);
    assert_int_equal(count_started(cs, NSTREAMS), NSTREAMS);
    assert_int_equal(threads(), idle);
    PRS_WAIT_UNTIL((pump(cs, NSTREAMS), count_done(cs, NSTREAMS, 0) == NSTREAMS), 60);
    assert_int_equal(count_done(cs, NSTREAMS, 0), NSTREAMS);
    for (int i = 0; i < NSTREAMS; i++) {
        assert_int_equal(cs[i].events, TOKENS);
        close(cs[i].fd);
        free(cs[i].buf);
    }
    assert_int_equal(threads(), idle);
    assert_int_equal(sse_serve_abandoned(f.backend), 0);
    stop(&f);
}

static void test_slow_reader(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0.02);
    static client cs[21];
    client_open(&cs[0], f.port, FLOOD_TOKENS, 1);
    cs[0].reading = 0; /* reads nothing until the others are done */
    for (int i = 1; i < 21; i++)
        client_open(&cs[i], f.port, TOKENS, 0);
    PRS_WAIT_UNTIL((pump(cs, 21), count_done(cs, 21, 1) == 20), 60);
    assert_int_equal(count_done(cs, 21, 1), 20);
    assert_int_equal(cs[0].len, 0);
    /* the flood waits on its client, its bytes held back at the backend, not dropped */
    assert_int_equal(sse_serve_open_streams(f.backend), 1);
    assert_int_equal(sse_serve_abandoned(f.backend), 0);
    cs[0].reading = 1;
    PRS_WAIT_UNTIL((pump(cs, 21), cs[0].done), 120);
    assert_true(cs[0].done);
    assert_int_equal(cs[0].events, FLOOD_TOKENS);
    for (int i = 0; i < 21; i++) {
        close(cs[i].fd);
        free(cs[i].buf);
    }
    stop(&f);
}

static long router_metric(int port, const char *series)
{
    client c;
    memset(&c, 0, sizeof c);
    c.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(c.fd, (struct sockaddr *)&sa, sizeof sa), 0);
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send(c.fd, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)sizeof req - 1);
    char buf[65536];
    size_t len = 0;
    for (ssize_t r; (r = recv(c.fd, buf + len, sizeof buf - 1 - len, 0)) > 0;)
        len += (size_t)r;
    buf[len] = '\0';
    close(c.fd);
    const char *p = strstr(buf, series);
    return p ? strtol(p + strlen(series), NULL, 10) : -1;
}

static void test_client_leaves(void **state)
{
    (void)state;
    fixture f;
    start(&f, 0.02);
    static client cs[10];
    for (int i = 0; i < 10; i++)
        client_open(&cs[i], f.port, 100000, 0); /* streams that would last 2,000 s */
    PRS_WAIT_UNTIL((pump(cs, 10), count_started(cs, 10) == 10), 60);
    assert_int_equal(count_started(cs, 10), 10);
    close(cs[3].fd);
    cs[3].reading = 0;
    PRS_WAIT_UNTIL(sse_serve_abandoned(f.backend) == 1, 30);
    assert_int_equal(sse_serve_abandoned(f.backend), 1);
    assert_int_equal(sse_serve_open_streams(f.backend), 9);
    assert_int_equal(router_metric(f.port, "perseus_router_client_gone_total{pool=\"p\","
                                           "instance=\"i\"} "),
                     1);
    assert_int_equal(router_metric(f.port, "perseus_router_inflight{pool=\"p\",instance=\"i\"} "),
                     9);
    for (int i = 0; i < 10; i++) {
        if (i != 3) close(cs[i].fd);
        free(cs[i].buf);
    }
    PRS_WAIT_UNTIL(sse_serve_open_streams(f.backend) == 0, 30);
    assert_int_equal(sse_serve_open_streams(f.backend), 0);
    stop(&f);
}

/* A silent instance: a listening socket whose connections the test accepts and answers. */
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* The request the router forwarded, once whole (its body ends the JSON object). */
static int accept_request(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 30000), 1);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    char buf[4096];
    size_t len = 0;
    while (len == 0 || buf[len - 1] != '}') {
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 30000), 1);
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        assert_true(r > 0);
        len += (size_t)r;
    }
    return fd;
}

/* The instance's end of a connection was closed by the router. */
static int closed_by_peer(int fd)
{
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static void whole_request(client *c, int port)
{
    static const char body[] = "{\"model\": \"m\", \"prompt\": \"hi\", \"max_tokens\": 9}";
    char req[512];
    int k = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(c->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(send(c->fd, req, (size_t)k, MSG_NOSIGNAL), k);
}

/* A client that leaves while its whole answer is awaited: the router closes its connection to
 * the instance at once and counts the departed client; a kept-alive client that sends more
 * bytes while it waits (its next request) has not left, and gets its answer. */
static void test_client_leaves_whole(void **state)
{
    (void)state;
    int bport, lfd = listen_any(&bport);
    fixture f = {0};
    start_router(&f, bport);
    client c;
    whole_request(&c, f.port);
    int ifd = accept_request(lfd);
    assert_int_equal(router_metric(f.port, "perseus_router_inflight{pool=\"p\",instance=\"i\"} "),
                     1);
    close(c.fd);
    PRS_WAIT_UNTIL(closed_by_peer(ifd), 30);
    assert_true(closed_by_peer(ifd));
    assert_int_equal(router_metric(f.port, "perseus_router_inflight{pool=\"p\",instance=\"i\"} "),
                     0);
    assert_int_equal(router_metric(f.port, "perseus_router_client_gone_total{pool=\"p\","
                                           "instance=\"i\"} "),
                     1);
    close(ifd);

    whole_request(&c, f.port);
    ifd = accept_request(lfd);
    static const char more[] = "GET /health HTTP/1.1\r\nHost: x\r\n";
    assert_int_equal(send(c.fd, more, sizeof more - 1, MSG_NOSIGNAL), (ssize_t)sizeof more - 1);
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: 35\r\n\r\n{\"usage\": {\"completion_tokens\": 9}}";
    assert_int_equal(send(ifd, ans, sizeof ans - 1, MSG_NOSIGNAL), (ssize_t)sizeof ans - 1);
    char buf[4096] = "";
    size_t len = 0;
    while (strstr(buf, "completion_tokens\": 9}}") == NULL) {
        struct pollfd p = {.fd = c.fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 30000), 1);
        ssize_t r = recv(c.fd, buf + len, sizeof buf - 1 - len, 0);
        assert_true(r > 0);
        len += (size_t)r;
        buf[len] = '\0';
    }
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    close(c.fd);
    close(ifd);
    close(lfd);
    prs__router_free(f.router);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_streams),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_client_leaves),
        cmocka_unit_test(test_client_leaves_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
