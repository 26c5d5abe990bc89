/* Shared by the server tests: run perseusd (the real binary, or the library in-process), talk
 * HTTP/1.1 to it over a plain loopback socket, and read JSON answers with jansson. Header-only
 * (static functions) so each test stays one program. Every wait is bounded. */
#ifndef PRS_TEST_SERVER_HARNESS_H
#define PRS_TEST_SERVER_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

typedef struct http_reply {
    int status; /* 0: no answer (connection refused, closed, timed out) */
    char *body; /* NUL-terminated, malloc'd */
    size_t len;
    json_t *json; /* parsed body when it is JSON, else NULL */
} http_reply;

static inline void http_reply_free(http_reply *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

static inline double harness_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Size of a file in bytes, 0 when it does not exist. */
static inline long long harness_file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

static inline void harness_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One request on a fresh connection (Connection: close). body may be NULL; token may be NULL;
 * extra_headers ("Name: value\r\n"...) may be NULL. Waits at most 10 s. */
static inline http_reply http_do(int port, const char *method, const char *path, const char *token,
                                 const char *body, size_t body_len, const char *extra_headers)
{
    http_reply r = {0, NULL, 0, NULL};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return r;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return r;
    }
    char head[2048];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%s", method,
                     path, token ? "Authorization: Bearer " : "", token ? token : "",
                     token ? "\r\n" : "", extra_headers ? extra_headers : "");
    if (body)
        n += snprintf(head + n, sizeof head - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n", body_len);
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return r;
    }
    size_t off = 0;
    while (body && off < body_len) {
        ssize_t w = send(fd, body + off, body_len - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may answer early (413) and close */
        off += (size_t)w;
    }
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap) buf = realloc(buf, cap *= 2);
        ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.1 ", 9) != 0 || !sep) {
        free(buf);
        return r;
    }
    r.status = atoi(buf + 9);
    /* Bodies come with Content-Length from libmicrohttpd's buffer responses. */
    const char *b = sep + 4;
    r.len = len - (size_t)(b - buf);
    r.body = malloc(r.len + 1);
    memcpy(r.body, b, r.len);
    r.body[r.len] = '\0';
    free(buf);
    r.json = json_loadb(r.body, r.len, 0, NULL);
    return r;
}

static inline http_reply http_json(int port, const char *method, const char *path,
                                   const char *token, json_t *body /* stolen */)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    http_reply r = http_do(port, method, path, token, text, text ? strlen(text) : 0, NULL);
    free(text);
    return r;
}

static inline const char *json_str(json_t *o, const char *key)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : "";
}

static inline long json_int(json_t *o, const char *key)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    return json_is_integer(v) ? (long)json_integer_value(v) : -999;
}

static inline double json_num(json_t *o, const char *key)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* ---- the real binary ---- */

typedef struct daemon_proc {
    pid_t pid;
    int port;
    char dir[256];
} daemon_proc;

/* A new scratch directory for one test run. */
static inline void harness_tmpdir(char *out, size_t n, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/prs-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(out)) out[0] = '\0';
}

/* Start perseusd on a free loopback port with data in dir. 0 when it serves within 15 s. */
static inline int daemon_start(daemon_proc *d)
{
    const char *bin_dir = getenv("PRS_BIN_DIR");
    char bin[512], port_file[300], log[300];
    snprintf(bin, sizeof bin, "%s/perseusd", bin_dir ? bin_dir : ".");
    snprintf(port_file, sizeof port_file, "%s/port", d->dir);
    snprintf(log, sizeof log, "%s/perseusd.log", d->dir);
    unlink(port_file);
    d->pid = fork();
    if (d->pid < 0) return -1;
    if (d->pid == 0) {
        /* Never outlive the test, and never hold the test runner's output pipe. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 2);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", d->dir, "--port-file",
              port_file, "--log-level", "info", (char *)NULL);
        _exit(127);
    }
    double t0 = harness_now();
    while (harness_now() - t0 < 15) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &d->port) == 1;
            fclose(f);
            if (ok && d->port > 0) return 0;
        }
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) return -1;
        harness_sleep_ms(20); /* poll interval */
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    return -1;
}

/* Stop with a signal (SIGTERM: clean; SIGKILL: crash). Returns the exit status, or -1. */
static inline int daemon_stop(daemon_proc *d, int sig)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, sig);
    int st = 0;
    double t0 = harness_now();
    while (harness_now() - t0 < 20) {
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        harness_sleep_ms(10); /* poll interval */
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

static inline void harness_rmdir(const char *dir);

/* A test's teardown of its daemon: killed if still running, its directory removed (cmocka jumps
 * past the end of a test on a failed assertion, so the test cannot do it itself). Returns 0. */
static inline int daemon_teardown(daemon_proc *d)
{
    if (d->pid > 0) daemon_stop(d, SIGKILL);
    harness_rmdir(d->dir);
    d->dir[0] = '\0';
    return 0;
}

/* rm -r of a test directory (only files one level down, and the tmp/ scratch folder). */
static inline void harness_rmdir(const char *dir)
{
    if (!dir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

#endif
