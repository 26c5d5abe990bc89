/* load_server: R simulated ranks against a local perseusd, over loopback only.
 *
 * Starts perseusd (--perseusd PATH, default: the perseusd beside this program's build folder)
 * on 127.0.0.1 with a scratch data directory, creates a job of R ranks (S stages x R/S
 * data-parallel pipelines), then measures:
 *   1. registration: every rank POSTs its coordinates, then every rank GETs its schedule (which
 *      must be the profiling one: all ranks are in), over C keep-alive connections (1024 by
 *      default) driven by one epoll loop; the figure is the wall time from the first
 *      registration until the last rank has its schedule;
 *   2. polling: P concurrent pollers (one connection and one outstanding request each) GET
 *      schedules for D seconds; the figures are the latency percentiles of those requests.
 * Counts and times are bounded (R <= 65536, C and P <= 4096, D <= 60 s, a 120 s watchdog).
 * Plain sockets and epoll, so the generator itself costs little next to the server (both share
 * this machine's cores: the figures include that contention). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int g_port;
static char g_job[64], g_token[96];
static int g_stages, g_ranks;

/* ---- one blocking request (setup only) ---- */

static int blocking_request(const char *req, char *out, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)g_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && (r = read(fd, out + len, n - len - 1)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
    return strncmp(out, "HTTP/1.1 2", 10) == 0 ? 0 : -1;
}

/* Value of "key":"..." in a JSON text (setup only: our own server's answer). */
static int json_field(const char *text, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(text, pat);
    if (!p) return -1;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    if (!e || (size_t)(e - p) >= n) return -1;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
    return 0;
}

/* ---- the epoll client ---- */

typedef struct conn {
    int fd;
    int next_rank; /* registration: ranks fd_index, +C, ...; polling: any */
    char out[512];
    size_t out_len, out_off;
    char in[4096];
    size_t in_len;
    double sent_at;
    double next_at; /* paced polling: when to send the next request (0: not waiting) */
} conn;

typedef struct load {
    int epfd, nconn, mode; /* mode 0: register+schedule, 1: poll */
    conn *c;
    long done, errors, target;
    double *lat;
    long nlat, cap_lat;
    double deadline;
    double interval_s; /* paced polling: each poller sends one request per interval */
} load;

static void build_request(load *L, conn *c)
{
    int r = c->next_rank;
    if (L->mode == 0) {
        char body[128];
        int bl = snprintf(body, sizeof body, "{\"rank\":%d,\"dp\":%d,\"pp\":%d}", r, r / g_stages,
                          r % g_stages);
        c->out_len = (size_t)snprintf(c->out, sizeof c->out,
                                      "POST /v1/jobs/%s/ranks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                      "Authorization: Bearer %s\r\nContent-Type: "
                                      "application/json\r\nContent-Length: %d\r\n\r\n%s",
                                      g_job, g_token, bl, body);
    } else {
        c->out_len = (size_t)snprintf(c->out, sizeof c->out,
                                      "GET /v1/jobs/%s/schedule?rank=%d HTTP/1.1\r\nHost: "
                                      "127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
                                      g_job, r, g_token);
    }
    c->out_off = 0;
    c->in_len = 0;
    c->sent_at = now_s();
}

static int open_conn(load *L, conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)g_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) return -1;
    struct epoll_event ev = {EPOLLOUT | EPOLLIN, {.ptr = c}};
    return epoll_ctl(L->epfd, EPOLL_CTL_ADD, c->fd, &ev);
}

/* A complete response in c->in? Returns its status, 0 when incomplete, -1 when malformed. */
static int response_complete(conn *c)
{
    c->in[c->in_len] = '\0';
    char *sep = strstr(c->in, "\r\n\r\n");
    if (!sep) return 0;
    const char *cl = strcasestr(c->in, "content-length:");
    long body = cl && cl < sep ? strtol(cl + 15, NULL, 10) : 0;
    if ((size_t)(sep + 4 - c->in) + (size_t)body > c->in_len) return 0;
    if (strncmp(c->in, "HTTP/1.1 ", 9) != 0) return -1;
    return atoi(c->in + 9);
}

static void record(load *L, double secs)
{
    if (L->nlat == L->cap_lat) {
        L->cap_lat = L->cap_lat ? 2 * L->cap_lat : 65536;
        L->lat = realloc(L->lat, sizeof *L->lat * (size_t)L->cap_lat);
    }
    L->lat[L->nlat++] = secs;
}

/* Advance a connection after a full response; 1 when it has no more work. */
static int advance(load *L, conn *c, int status, int ci)
{
    if (status < 200 || status >= 300) L->errors++;
    if (L->mode == 1) {
        record(L, now_s() - c->sent_at);
        L->done++;
        c->next_rank = (c->next_rank + L->nconn) % g_ranks;
        return now_s() >= L->deadline;
    }
    /* mode 0 registers every rank; mode 2 then fetches every rank's schedule, which must be
     * the profiling one (all ranks are in). */
    if (L->mode == 2 && !strstr(c->in, "\"phase\":\"profiling\"")) L->errors++;
    L->done++;
    c->next_rank += L->nconn;
    (void)ci;
    return c->next_rank >= g_ranks;
}

static int run_load(load *L, double watchdog_s)
{
    L->epfd = epoll_create1(0);
    int active = 0;
    for (int i = 0; i < L->nconn; i++) {
        conn *c = &L->c[i];
        c->next_rank = i % g_ranks;
        if (open_conn(L, c) != 0) {
            fprintf(stderr, "load_server: cannot open connection %d: %s\n", i, strerror(errno));
            return -1;
        }
        if (L->mode == 1 && L->interval_s > 0) {
            /* Pollers start spread over one interval, as ranks finishing iterations would. */
            c->next_at = now_s() + L->interval_s * (double)i / (double)L->nconn;
            struct epoll_event ev = {0, {.ptr = c}};
            epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev);
        } else {
            build_request(L, c);
        }
        active++;
    }
    struct epoll_event evs[256];
    double t_end = now_s() + watchdog_s;
    while (active > 0) {
        if (now_s() > t_end) {
            fprintf(stderr, "load_server: watchdog: %d connections still busy\n", active);
            return -1;
        }
        int n = epoll_wait(L->epfd, evs, 256, L->interval_s > 0 ? 1 : 100);
        if (L->interval_s > 0) {
            double t = now_s();
            for (int i = 0; i < L->nconn; i++) {
                conn *w = &L->c[i];
                if (w->fd < 0 || w->next_at <= 0 || t < w->next_at) continue;
                w->next_at = 0;
                build_request(L, w);
                struct epoll_event ev = {EPOLLOUT | EPOLLIN, {.ptr = w}};
                epoll_ctl(L->epfd, EPOLL_CTL_MOD, w->fd, &ev);
            }
        }
        for (int k = 0; k < n; k++) {
            conn *c = evs[k].data.ptr;
            if (c->fd < 0) continue;
            if (evs[k].events & (EPOLLERR | EPOLLHUP)) {
                fprintf(stderr,
                        "load_server: connection %d closed by the server (mode %d, events %#x)\n",
                        (int)(c - L->c), L->mode, evs[k].events);
                return -1;
            }
            if ((evs[k].events & EPOLLOUT) && c->out_off < c->out_len) {
                ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
                if (w > 0) c->out_off += (size_t)w;
                if (c->out_off == c->out_len) {
                    struct epoll_event ev = {EPOLLIN, {.ptr = c}};
                    epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (evs[k].events & EPOLLIN) {
                ssize_t r = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len - 1);
                if (r <= 0) {
                    if (r < 0 && errno == EAGAIN) continue;
                    fprintf(stderr, "load_server: connection closed by the server\n");
                    return -1;
                }
                c->in_len += (size_t)r;
                int st = response_complete(c);
                if (st == 0) continue;
                if (advance(L, c, st, (int)(c - L->c))) {
                    close(c->fd);
                    c->fd = -1;
                    active--;
                    continue;
                }
                if (L->mode == 1 && L->interval_s > 0) {
                    c->next_at = c->sent_at + L->interval_s;
                    struct epoll_event ev = {0, {.ptr = c}};
                    epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                    continue;
                }
                build_request(L, c);
                struct epoll_event ev = {EPOLLOUT | EPOLLIN, {.ptr = c}};
                epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev);
            }
        }
    }
    close(L->epfd);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, long n, double p)
{
    if (n == 0) return 0;
    long i = (long)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static const char usage[] =
    "usage: load_server [--ranks R] [--stages S] [--connections C] [--pollers P]\n"
    "                   [--poll-seconds D] [--poll-interval-ms MS] [--perseusd PATH]\n"
    "                   [--threads N]\n"
    "Defaults: 8192 ranks, 8 stages, 1024 connections, 1024 pollers, 5 s of polling,\n"
    "back to back (interval 0: each poller sends its next request as soon as the last is\n"
    "answered; MS > 0: one request per MS per poller), 4 server threads. Loopback only;\n"
    "the server runs in a scratch directory.\n";

int main(int argc, char **argv)
{
    int ranks = 8192, stages = 8, nconn = 1024, pollers = 1024, threads = 4;
    double poll_s = 5, interval_ms = 0;
    char bin[1024];
    char *self = strdup(argv[0]);
    snprintf(bin, sizeof bin, "%s/../perseusd", dirname(self));
    free(self);
    static const struct option opts[] = {{"ranks", required_argument, NULL, 'r'},
                                         {"stages", required_argument, NULL, 's'},
                                         {"connections", required_argument, NULL, 'c'},
                                         {"pollers", required_argument, NULL, 'p'},
                                         {"poll-seconds", required_argument, NULL, 'd'},
                                         {"perseusd", required_argument, NULL, 'b'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"poll-interval-ms", required_argument, NULL, 'i'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'r':
            ranks = atoi(optarg);
            break;
        case 's':
            stages = atoi(optarg);
            break;
        case 'c':
            nconn = atoi(optarg);
            break;
        case 'p':
            pollers = atoi(optarg);
            break;
        case 'd':
            poll_s = atof(optarg);
            break;
        case 'b':
            snprintf(bin, sizeof bin, "%s", optarg);
            break;
        case 't':
            threads = atoi(optarg);
            break;
        case 'i':
            interval_ms = atof(optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (ranks < 1 || ranks > 65536 || stages < 1 || ranks % stages || nconn < 1 || nconn > 4096 ||
        pollers < 1 || pollers > 4096 || !(poll_s > 0 && poll_s <= 60) || threads < 1 ||
        threads > 64 || !(interval_ms >= 0 && interval_ms <= 10000)) {
        fputs("load_server: a count or time is out of range\n", stderr);
        fputs(usage, stderr);
        return 2;
    }
    if (nconn > ranks) nconn = ranks;
    g_ranks = ranks;
    g_stages = stages;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);

    char dir[] = "/tmp/prs-load-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char port_file[256], threads_s[16];
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(threads_s, sizeof threads_s, "%d", threads);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", dir, "--port-file",
              port_file, "--log-level", "error", "--threads", threads_s, (char *)NULL);
        _exit(127);
    }
    double t0 = now_s();
    while (now_s() - t0 < 15 && !g_port) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &g_port) != 1) g_port = 0;
            fclose(f);
        }
        if (!g_port) usleep(20000);
    }
    int rc = 1;
    if (!g_port) {
        fprintf(stderr, "load_server: %s did not start\n", bin);
        goto out;
    }
    char req[1024], resp[8192];
    char body[256];
    int bl = snprintf(body, sizeof body,
                      "{\"stages\":%d,\"microbatches\":8,\"dp\":%d,\"clocks_mhz\":[1410,1200,"
                      "1000],\"blocking_power_w\":83.64}",
                      stages, ranks / stages);
    snprintf(req, sizeof req,
             "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Length: %d\r\n\r\n%s",
             bl, body);
    if (blocking_request(req, resp, sizeof resp) != 0 ||
        json_field(resp, "job_id", g_job, sizeof g_job) ||
        json_field(resp, "token", g_token, sizeof g_token)) {
        fprintf(stderr, "load_server: job creation failed: %s\n", resp);
        goto out;
    }

    load L = {0};
    L.nconn = nconn;
    L.c = calloc((size_t)nconn > (size_t)pollers ? (size_t)nconn : (size_t)pollers, sizeof *L.c);
    L.mode = 0;
    double a = now_s();
    if (run_load(&L, 120) != 0) goto out;
    double reg_only_s = now_s() - a;
    long reg_errors = L.errors;
    memset(L.c, 0, sizeof *L.c * (size_t)nconn);
    L.mode = 2;
    L.done = 0;
    if (run_load(&L, 120) != 0) goto out;
    double reg_s = now_s() - a;
    long reg_done = L.done;
    reg_errors += L.errors;

    load P = {0};
    P.nconn = pollers;
    P.c = L.c;
    memset(P.c, 0, sizeof *P.c * (size_t)pollers);
    P.mode = 1;
    P.interval_s = interval_ms / 1e3;
    P.deadline = now_s() + poll_s;
    a = now_s();
    if (run_load(&P, poll_s + 60) != 0) goto out;
    double poll_wall = now_s() - a;
    qsort(P.lat, (size_t)P.nlat, sizeof *P.lat, cmp_double);

    double la[3];
    if (getloadavg(la, 3) < 0) la[0] = -1;
    printf("load_server: %d ranks (%d stages x %d pipelines), server threads %d, load avg %.2f\n",
           ranks, stages, ranks / stages, threads, la[0]);
    printf("register + schedule: %ld ranks in %.3f s (registration alone %.3f s) over %d "
           "connections (%.0f ranks/s), errors %ld   [target < 10 s: %s]\n",
           reg_done, reg_s, reg_only_s, nconn, (double)reg_done / reg_s, reg_errors,
           reg_s < 10 && reg_errors == 0 && reg_done == ranks ? "PASS" : "MISS");
    double p99 = pct(P.lat, P.nlat, 0.99);
    printf("schedule polls: %d concurrent pollers, %s, %ld requests in %.2f s (%.0f/s), "
           "errors %ld\n",
           pollers, interval_ms > 0 ? "each one request per interval" : "back to back", P.nlat,
           poll_wall, (double)P.nlat / poll_wall, P.errors);
    if (interval_ms > 0) printf("poll interval: %.1f ms per poller\n", interval_ms);
    printf("poll latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f   [target p99 < 20 ms: %s]\n",
           1e3 * pct(P.lat, P.nlat, 0.5), 1e3 * pct(P.lat, P.nlat, 0.9), 1e3 * p99,
           1e3 * (P.nlat ? P.lat[P.nlat - 1] : 0), p99 < 0.020 && P.errors == 0 ? "PASS" : "MISS");
    free(P.lat);
    free(L.c);
    rc = 0;
out:
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "load_server: could not remove %s\n", dir);
    return rc;
}
