/* load_router: an open-loop load of streamed completions on an OpenAI-compatible URL
 * (perseus-router, or a serving instance directly): at a fixed rate, to measure what the router
 * adds to the time to first token and how many streams it holds, or replaying a request trace,
 * to measure SLO attainment end to end.
 *
 *   load_router --url http://HOST:PORT [--direct http://HOST:PORT] [--rounds N] [--rate R]
 *               [--duration S] [--max-tokens N] [--prompt-bytes B] [--model NAME]
 *   load_router --url URL --trace FILE [--from S] [--duration S] [--time-scale X]
 *
 * One thread, epoll, non-blocking sockets and its own HTTP/1.1 client (keep-alive: a connection
 * whose answer ended is reused by a later request; one is opened whenever none is idle), so one
 * process offers thousands of requests a second and holds tens of thousands of streams. Request
 * i is sent at start + i / R whatever happened to the earlier ones (open loop; a timerfd wakes
 * the loop at each send time), so a slow server cannot slow the offered load down.
 *
 * With --direct, the same load is sent to that URL too, in alternating phases (direct, routed,
 * direct, routed... --rounds of each, one after the other), and the report adds the difference
 * of the TTFT percentiles: the router's cost with the instance's own time taken out, measured
 * within the same run.
 *
 * With --trace (Azure's format, src/infer/trace.h), the requests are the trace's arrivals in
 * [from, from + duration) seconds, sent at their arrival time divided by the time scale, each a
 * prompt of 4 bytes per context token asking for the trace's generated tokens; the SLO
 * attainment counts the requests whose TTFT and mean gap between tokens, multiplied back by the
 * time scale, are within DynamoLLM's default SLOs of their input class.
 *
 * A request succeeds when its status is 200 and its stream ends with "data: [DONE]". Its TTFT is
 * the time from its scheduled send to the first body bytes, its end-to-end time to the end of
 * the stream. Prints one JSON object: counts, TTFT and end-to-end percentiles (p50, p90, p99,
 * max; seconds), the rate achieved, the most requests in flight at once and this program's CPU
 * time. Exit 0 when every request succeeded, 1 otherwise, 2 on bad options. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "classes.h"
#include "trace.h"

#define MAX_REQUESTS 10000000
#define DRAIN_S 60.0
#define NEVENTS 512

typedef struct req {
    double offset_s; /* when to send, from the phase's start */
    long prompt_tokens, max_tokens;
    double sched_s, first_s, end_s;
    int ok;
} req;

typedef struct target {
    struct sockaddr_in sa;
    char host[300];
    struct cconn *idle; /* connections whose last answer ended */
} target;

enum { C_CONNECT, C_HEAD, C_BODY, C_SIZE, C_DATA, C_DATA_END, C_TRAILER };

typedef struct cconn {
    int fd, state, chunked, close_after;
    target *t;
    req *r;
    char *out; /* the request's bytes, [out_off, out_len) still to send */
    size_t out_len, out_off;
    char head[8192];
    size_t head_len, remain;
    long status;
    char line[64];
    size_t line_len;
    char tail[16]; /* the body's last bytes */
    size_t tail_len;
    struct cconn *next_idle;
    struct cconn *prev, *next; /* every open connection, for the end of a phase */
} cconn;

typedef struct run {
    cconn *conns; /* every open connection */
    int epfd, tfd;
    long in_flight, max_in_flight;
    const char *model;
} run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_url(const char *url, target *t)
{
    char host[256];
    int port = 80;
    if (sscanf(url, "http://%255[^:/]:%d", host, &port) < 1) return -1;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) != 0) return -1;
    memcpy(&t->sa, res->ai_addr, sizeof t->sa);
    freeaddrinfo(res);
    t->sa.sin_port = htons((uint16_t)port);
    snprintf(t->host, sizeof t->host, "%s:%d", host, port);
    return 0;
}

/* The request's HTTP bytes: a prompt of 4 bytes per token. */
static char *request_bytes(const req *r, const target *t, const char *model, size_t *len)
{
    size_t bytes = (size_t)r->prompt_tokens * 4;
    char *prompt = malloc(bytes + 1);
    if (prompt == NULL) return NULL;
    memset(prompt, 'a', bytes);
    prompt[bytes] = '\0';
    json_t *b = json_pack("{s:s, s:s, s:I, s:b}", "model", model, "prompt", prompt, "max_tokens",
                          (json_int_t)r->max_tokens, "stream", 1);
    free(prompt);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    char *out = NULL;
    int n = body ? asprintf(&out,
                            "POST /v1/completions HTTP/1.1\r\nHost: %s\r\n"
                            "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                            t->host, strlen(body), body)
                 : -1;
    free(body);
    if (n < 0) return NULL;
    *len = (size_t)n;
    return out;
}

static void watch(run *u, cconn *c, unsigned events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(u->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        epoll_ctl(u->epfd, EPOLL_CTL_ADD, c->fd, &ev);
}

static void conn_link(run *u, cconn *c)
{
    c->prev = NULL;
    c->next = u->conns;
    if (u->conns) u->conns->prev = c;
    u->conns = c;
}

static void conn_free(run *u, cconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        u->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    close(c->fd);
    free(c->out);
    free(c);
}

/* The request on c ended (ok or not); c goes idle (kept alive) or is closed. */
static void end_request(run *u, cconn *c, int ok)
{
    req *r = c->r;
    r->end_s = now_s();
    r->ok = ok && c->status == 200 && memmem(c->tail, c->tail_len, "data: [DONE]", 12) != NULL;
    c->r = NULL;
    u->in_flight--;
    free(c->out);
    c->out = NULL;
    if (ok && !c->close_after) {
        c->next_idle = c->t->idle;
        c->t->idle = c;
        watch(u, c, EPOLLIN | EPOLLRDHUP);
        return;
    }
    conn_free(u, c);
}

static void on_data(cconn *c, const char *p, size_t n)
{
    if (n == 0) return;
    if (c->r->first_s == 0) c->r->first_s = now_s();
    for (size_t i = n > sizeof c->tail ? n - sizeof c->tail : 0; i < n; i++) {
        if (c->tail_len == sizeof c->tail) {
            memmove(c->tail, c->tail + 1, sizeof c->tail - 1);
            c->tail_len--;
        }
        c->tail[c->tail_len++] = p[i];
    }
}

/* A line of the chunked encoding (size or trailer) is in c->line. 1: the body ended. */
static int chunk_line(cconn *c)
{
    c->line[c->line_len] = '\0';
    c->line_len = 0;
    if (c->state == C_TRAILER) return c->line[0] == '\0' || strcmp(c->line, "\r") == 0;
    c->remain = strtoul(c->line, NULL, 16);
    c->state = c->remain ? C_DATA : C_TRAILER;
    return 0;
}

/* Body bytes; 1 when the answer ended. */
static int feed_body(cconn *c, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (c->state == C_BODY || c->state == C_DATA) {
            size_t k = n - i < c->remain ? n - i : c->remain;
            on_data(c, p + i, k);
            i += k;
            c->remain -= k;
            if (c->remain > 0) continue;
            if (c->state == C_BODY) return 1;
            c->state = C_DATA_END;
        } else if (c->state == C_DATA_END) {
            if (p[i++] == '\n') c->state = C_SIZE;
        } else {
            char ch = p[i++];
            if (ch == '\n') {
                if (chunk_line(c)) return 1;
            } else if (c->line_len < sizeof c->line - 1) {
                c->line[c->line_len++] = ch;
            }
        }
    }
    return 0;
}

/* The head is in c->head[0, end): the status and how the body is framed. */
static void parse_head(cconn *c, size_t end)
{
    c->head[end] = '\0';
    c->status = strtol(c->head + 9, NULL, 10);
    c->chunked = strcasestr(c->head, "transfer-encoding: chunked") != NULL;
    c->close_after = strcasestr(c->head, "connection: close") != NULL;
    const char *cl = strcasestr(c->head, "content-length:");
    c->remain = cl ? strtoul(cl + 15, NULL, 10) : 0;
    c->state = c->chunked ? C_SIZE : C_BODY;
}

/* Bytes from the server; 1 when the answer ended, -1 on a broken one. */
static int on_bytes(cconn *c, const char *p, size_t n)
{
    if (c->state != C_HEAD) return feed_body(c, p, n);
    size_t room = sizeof c->head - 1 - c->head_len, k = n < room ? n : room;
    memcpy(c->head + c->head_len, p, k);
    c->head_len += k;
    c->head[c->head_len] = '\0';
    char *e = strstr(c->head, "\r\n\r\n");
    if (e == NULL) return c->head_len >= sizeof c->head - 1 ? -1 : 0;
    size_t end = (size_t)(e - c->head) + 4, before = c->head_len - k;
    parse_head(c, end);
    if (!c->chunked && c->remain == 0) return 1;
    return feed_body(c, p + (end - before), n - (end - before));
}

static void on_readable(run *u, cconn *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (c->r == NULL) { /* an idle connection closed or spoke: drop it */
            target *t = c->t;
            for (cconn **p = &t->idle; *p; p = &(*p)->next_idle)
                if (*p == c) {
                    *p = c->next_idle;
                    break;
                }
            conn_free(u, c);
            return;
        }
        int rc = n <= 0 ? -1 : on_bytes(c, buf, (size_t)n);
        if (rc != 0) {
            end_request(u, c, rc > 0);
            return;
        }
    }
}

static void on_writable(run *u, cconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOTCONN)) {
            watch(u, c, EPOLLIN | EPOLLOUT);
            return;
        }
        if (w < 0) {
            end_request(u, c, 0);
            return;
        }
        c->out_off += (size_t)w;
    }
    c->state = C_HEAD;
    watch(u, c, EPOLLIN);
}

/* Send r on an idle connection to t, or a new one. */
static void send_request(run *u, target *t, req *r, const char *model)
{
    cconn *c = t->idle;
    if (c) {
        t->idle = c->next_idle;
    } else {
        c = calloc(1, sizeof *c);
        int fd = c ? socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
        if (fd < 0) {
            free(c);
            r->end_s = now_s(); /* failed: out of sockets */
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->t = t;
        conn_link(u, c);
        if (connect(fd, (struct sockaddr *)&t->sa, sizeof t->sa) != 0 && errno != EINPROGRESS) {
            conn_free(u, c);
            r->end_s = now_s();
            return;
        }
    }
    c->r = r;
    c->state = C_CONNECT;
    c->head_len = c->line_len = c->tail_len = 0;
    c->out = request_bytes(r, t, model, &c->out_len);
    c->out_off = 0;
    if (++u->in_flight > u->max_in_flight) u->max_in_flight = u->in_flight;
    if (c->out == NULL) {
        end_request(u, c, 0);
        return;
    }
    on_writable(u, c);
}

static void arm_timer(run *u, double at)
{
    struct itimerspec its = {0};
    if (at > 0) {
        its.it_value.tv_sec = (time_t)at;
        its.it_value.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
    }
    timerfd_settime(u->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* One phase: rs[0, n) sent to t on their schedule, then answered (or DRAIN_S past the last). */
static void run_phase(run *u, target *t, req *rs, long n)
{
    double start = now_s() + 0.01, last = start + rs[n - 1].offset_s;
    long sent = 0;
    struct epoll_event evs[NEVENTS];
    arm_timer(u, start + rs[0].offset_s);
    while ((sent < n || u->in_flight > 0) && now_s() < last + DRAIN_S) {
        int k = epoll_wait(u->epfd, evs, NEVENTS, 100);
        for (int i = 0; i < k; i++) {
            cconn *c = evs[i].data.ptr;
            if (c == NULL) continue; /* the timer */
            if (c->r && (c->state == C_CONNECT || c->out_off < c->out_len))
                on_writable(u, c);
            else
                on_readable(u, c);
        }
        double now = now_s();
        while (sent < n && now >= start + rs[sent].offset_s) {
            rs[sent].sched_s = start + rs[sent].offset_s;
            send_request(u, t, &rs[sent], u->model);
            sent++;
        }
        uint64_t exp;
        ssize_t rd = read(u->tfd, &exp, sizeof exp);
        (void)rd;
        if (sent < n) arm_timer(u, start + rs[sent].offset_s);
    }
    /* the next phase starts afresh: requests not answered by now failed, and no connection of
     * this phase (busy or idle) is left to slow it down */
    while (u->conns)
        conn_free(u, u->conns);
    t->idle = NULL;
    u->in_flight = 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, int p)
{
    return v[(n - 1) * (size_t)p / 100];
}

static json_t *percentiles(double *v, size_t n)
{
    if (n == 0) return json_null();
    qsort(v, n, sizeof *v, cmp);
    return json_pack("{s:f, s:f, s:f, s:f}", "p50", pct(v, n, 50), "p90", pct(v, n, 90), "p99",
                     pct(v, n, 99), "max", v[n - 1]);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* 1 when r met the SLOs of its input class (times scaled back by time_scale). */
static int met_slo(const req *r, const prs_infer_classes *c, double time_scale)
{
    if (!r->ok) return 0;
    int in_class = prs_infer_class_of(c, (int)r->prompt_tokens, 1) / 3;
    double ttft = (r->first_s - r->sched_s) * time_scale;
    double gap =
        r->max_tokens > 1 ? (r->end_s - r->first_s) * time_scale / (double)(r->max_tokens - 1) : 0;
    return ttft <= c->ttft_slo_s[in_class] && gap <= c->tbt_slo_s;
}

/* The report of the requests of phases [0, nph) of n requests each; *ttft gets their sorted
 * TTFTs (the caller frees it) and *nok their count. */
static json_t *report(req **ph, int nph, long n, double time_scale, double **ttft_out, size_t *nok)
{
    size_t total = (size_t)nph * (size_t)n;
    double *ttft = calloc(total + 1, sizeof *ttft), *e2e = calloc(total + 1, sizeof *e2e);
    long ok = 0, met = 0;
    double rate_sum = 0;
    prs_infer_classes classes;
    prs_infer_classes_default(&classes);
    for (int p = 0; p < nph && ttft && e2e; p++) {
        req *rs = ph[p];
        if (n > 1 && rs[n - 1].sched_s > rs[0].sched_s)
            rate_sum += (double)(n - 1) / (rs[n - 1].sched_s - rs[0].sched_s);
        for (long i = 0; i < n; i++) {
            met += met_slo(&rs[i], &classes, time_scale);
            if (!rs[i].ok) continue;
            ttft[ok] = rs[i].first_s - rs[i].sched_s;
            e2e[ok] = rs[i].end_s - rs[i].sched_s;
            ok++;
        }
    }
    json_t *o = json_pack(
        "{s:I, s:I, s:I, s:f, s:o, s:o, s:f, s:f}", "sent", (json_int_t)total, "ok", (json_int_t)ok,
        "failed", (json_int_t)((long)total - ok), "achieved_rps", nph ? rate_sum / nph : 0.0,
        "ttft_s", percentiles(ttft, (size_t)ok), "e2e_s", percentiles(e2e, (size_t)ok),
        "time_scale", time_scale, "slo_attainment", total ? (double)met / (double)total : 0.0);
    free(e2e);
    *ttft_out = ttft;
    *nok = (size_t)ok;
    return o;
}

typedef struct args {
    const char *base, *direct, *model, *trace;
    double rate, duration, from_s, time_scale;
    long max_tokens, prompt_bytes;
    int rounds;
} args;

static int parse(int argc, char **argv, args *a)
{
    static const struct option opts[] = {
        {"url", 1, NULL, 'u'},        {"rate", 1, NULL, 'r'},         {"duration", 1, NULL, 'd'},
        {"max-tokens", 1, NULL, 'n'}, {"prompt-bytes", 1, NULL, 'b'}, {"model", 1, NULL, 'm'},
        {"trace", 1, NULL, 't'},      {"from", 1, NULL, 'f'},         {"time-scale", 1, NULL, 's'},
        {"direct", 1, NULL, 'D'},     {"rounds", 1, NULL, 'R'},       {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            a->base = optarg;
            break;
        case 'r':
            a->rate = strtod(optarg, NULL);
            break;
        case 'd':
            a->duration = strtod(optarg, NULL);
            break;
        case 'n':
            a->max_tokens = strtol(optarg, NULL, 10);
            break;
        case 'b':
            a->prompt_bytes = strtol(optarg, NULL, 10);
            break;
        case 'm':
            a->model = optarg;
            break;
        case 't':
            a->trace = optarg;
            break;
        case 'f':
            a->from_s = strtod(optarg, NULL);
            break;
        case 's':
            a->time_scale = strtod(optarg, NULL);
            break;
        case 'D':
            a->direct = optarg;
            break;
        case 'R':
            a->rounds = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    if (a->base == NULL || !(a->rate > 0) || !(a->duration > 0) || !(a->time_scale > 0) ||
        a->max_tokens < 1 || a->prompt_bytes < 4 || a->prompt_bytes > 1000000 || a->rounds < 1 ||
        a->rounds > 100) {
        fprintf(stderr, "usage: load_router --url URL [--direct URL] [--rounds N] [--rate R] "
                        "[--duration S] [--max-tokens N] [--prompt-bytes B] | [--trace FILE "
                        "--from S --time-scale X]\n");
        return 2;
    }
    return 0;
}

/* The requests of one phase: the trace's window, or a fixed rate. NULL on failure (said). */
static req *plan(const args *a, long *n)
{
    if (a->trace == NULL) {
        *n = (long)(a->rate * a->duration);
        req *rs = *n >= 1 && *n <= MAX_REQUESTS ? calloc((size_t)*n, sizeof *rs) : NULL;
        for (long i = 0; rs && i < *n; i++)
            rs[i] = (req){.offset_s = (double)i / a->rate,
                          .prompt_tokens = a->prompt_bytes / 4,
                          .max_tokens = a->max_tokens};
        return rs;
    }
    prs_infer_trace t = {0}, w = {0};
    prs_error err = {0};
    if (prs_infer_trace_load(a->trace, &t, &err) != 0 ||
        prs_infer_trace_window(&t, a->from_s, a->from_s + a->duration, &w, &err) != 0) {
        fprintf(stderr, "load_router: %s\n", err.msg);
        prs_infer_trace_free(&t);
        return NULL;
    }
    prs_infer_trace_free(&t);
    *n = (long)w.n;
    req *rs = w.n >= 1 && w.n <= MAX_REQUESTS ? calloc(w.n, sizeof *rs) : NULL;
    for (size_t i = 0; rs && i < w.n; i++)
        rs[i] = (req){.offset_s = w.reqs[i].arrival_s / a->time_scale,
                      .prompt_tokens = w.reqs[i].in_tokens,
                      .max_tokens = w.reqs[i].out_tokens};
    prs_infer_trace_free(&w);
    return rs;
}

/* The routed phases' report, with the direct phases' and the differences when there are. */
static json_t *summary(req **routed, req **direct, int rounds, long n, const args *a, run *u)
{
    double *rt, *dt = NULL;
    size_t rn, dn = 0;
    json_t *o = report(routed, rounds, n, a->time_scale, &rt, &rn);
    if (a->direct) {
        json_t *d = report(direct, rounds, n, a->time_scale, &dt, &dn);
        json_object_set_new(o, "direct", d);
        if (rn && dn)
            json_object_set_new(o, "added_ttft_s",
                                json_pack("{s:f, s:f, s:f}", "p50",
                                          pct(rt, rn, 50) - pct(dt, dn, 50), "p90",
                                          pct(rt, rn, 90) - pct(dt, dn, 90), "p99",
                                          pct(rt, rn, 99) - pct(dt, dn, 99)));
    }
    json_object_set_new(o, "rounds", json_integer(rounds));
    json_object_set_new(o, "max_in_flight", json_integer(u->max_in_flight));
    json_object_set_new(o, "cpu_s", json_real(cpu_s()));
    free(rt);
    free(dt);
    return o;
}

int main(int argc, char **argv)
{
    args a = {.model = "llama2-70b",
              .rate = 100,
              .duration = 5,
              .time_scale = 1,
              .max_tokens = 8,
              .prompt_bytes = 64,
              .rounds = 1};
    if (parse(argc, argv, &a) != 0) return 2;
    target routed_t = {0}, direct_t = {0};
    if (parse_url(a.base, &routed_t) != 0 || (a.direct && parse_url(a.direct, &direct_t) != 0)) {
        fprintf(stderr, "load_router: expected a URL http://HOST:PORT\n");
        return 2;
    }
    long n = 0;
    req *routed[100] = {0}, *direct[100] = {0};
    for (int k = 0; k < a.rounds; k++) {
        routed[k] = plan(&a, &n);
        direct[k] = a.direct ? plan(&a, &n) : NULL;
        if (routed[k] == NULL || (a.direct && direct[k] == NULL)) {
            fprintf(stderr, "load_router: no requests to send (at most %d)\n", MAX_REQUESTS);
            return 2;
        }
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    run u = {.epfd = epoll_create1(EPOLL_CLOEXEC),
             .tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
             .model = a.model};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(u.epfd, EPOLL_CTL_ADD, u.tfd, &ev);
    for (int k = 0; k < a.rounds; k++) {
        if (a.direct) run_phase(&u, &direct_t, direct[k], n);
        run_phase(&u, &routed_t, routed[k], n);
    }
    json_t *o = summary(routed, direct, a.rounds, n, &a, &u);
    long failed = json_integer_value(json_object_get(o, "failed")) +
                  json_integer_value(json_object_get(json_object_get(o, "direct"), "failed"));
    json_dumpf(o, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(o);
    for (int k = 0; k < a.rounds; k++) {
        free(routed[k]);
        free(direct[k]);
    }
    return failed ? 1 : 0;
}
