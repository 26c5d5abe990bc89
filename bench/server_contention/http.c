/* server_contention: HTTP/1.1 over a plain socket, and the job requests the scenarios make. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "contention.h"

/* ---- HTTP/1.1 over a plain socket ---- */

int sc_connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One request on fd (keep-alive unless close_after); the answer's status (0: none) and body. */
reply sc_request(int fd, const char *method, const char *path, const char *token, const char *ctype,
                 const char *body, size_t len, int close_after)
{
    reply r = {0, NULL, 1};
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%sContent-Length: %zu\r\n"
                     "Content-Type: %s\r\n\r\n",
                     method, path, close_after ? "Connection: close\r\n" : "",
                     token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "",
                     len, ctype ? ctype : "application/json");
    if (send_all(fd, head, (size_t)n) || (len && send_all(fd, body, len))) return r;
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    long want = -1;
    for (;;) {
        if (got + 4096 > cap) buf = realloc(buf, cap *= 2);
        char *sep = NULL;
        if (want < 0 && (sep = memmem(buf, got, "\r\n\r\n", 4))) {
            buf[got] = '\0';
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            want = (long)(sep + 4 - buf) + (cl && cl < sep ? atol(cl + 17) : 0);
            r.closed = strcasestr(buf, "\r\nConnection: close") != NULL;
        }
        if (want >= 0 && (long)got >= want) break;
        ssize_t k = recv(fd, buf + got, cap - got - 1, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    if (want >= 0 && strncmp(buf, "HTTP/1.1 ", 9) == 0) {
        r.status = atoi(buf + 9);
        r.body = strdup(strstr(buf, "\r\n\r\n") + 4);
        if (!r.body) sc_die("out of memory");
    } else {
        r.closed = 1;
    }
    free(buf);
    return r;
}

/* One request on a new connection. */
reply sc_request1(int port, const char *method, const char *path, const char *token,
                  const char *ctype, const char *body, size_t len)
{
    int fd = sc_connect_port(port);
    reply r = {0, NULL, 1};
    if (fd < 0) return r;
    r = sc_request(fd, method, path, token, ctype, body, len, 1);
    close(fd);
    return r;
}

void sc_create_job(int port, const char *create_token, int stages, int microbatches, job_ref *j)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"stages\":%d,\"microbatches\":%d,\"dp\":1,\"clocks_mhz\":[1410,1290,1170,1050,"
             "930,810,690],\"profiling\":{\"warmup_iterations\":1,\"iterations_per_clock\":2,"
             "\"skip_dominated\":false},\"blocking_power_w\":83.64}",
             stages, microbatches);
    reply r = sc_request1(port, "POST", "/v1/jobs", create_token, NULL, spec, strlen(spec));
    json_t *o = r.body ? json_loads(r.body, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *tok = json_string_value(json_object_get(o, "token"));
    if (r.status != 201 || !id || !tok) sc_die("job creation answered %d: %s", r.status, r.body);
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->token, sizeof j->token, "%s", tok);
    json_decref(o);
    free(r.body);
}

void sc_register_rank0(int port, const job_ref *j)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j->id);
    const char *b = "{\"rank\":0,\"dp\":0,\"pp\":0,\"tp\":0}";
    reply r = sc_request1(port, "POST", path, j->token, NULL, b, strlen(b));
    if (r.status != 201 && r.status != 200) sc_die("registration answered %d", r.status);
    free(r.body);
}

/* A job of one stage and one rank, profiling 7 clocks for 1,000 iterations each: its results
 * are stored with every window. */
void sc_profiling_job(int port, job_ref *a)
{
    static const char spec[] =
        "{\"stages\":1,\"microbatches\":64,\"dp\":1,\"clocks_mhz\":[1410,1290,1170,1050,"
        "930,810,690],\"profiling\":{\"warmup_iterations\":1,\"iterations_per_clock\":1000,"
        "\"skip_dominated\":false},\"blocking_power_w\":83.64}";
    reply r = sc_request1(port, "POST", "/v1/jobs", NULL, NULL, spec, strlen(spec));
    json_t *o = json_loads(r.body ? r.body : "", 0, NULL);
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *tok = json_string_value(json_object_get(o, "token"));
    if (r.status != 201 || !id || !tok) sc_die("job creation answered %d", r.status);
    snprintf(a->id, sizeof a->id, "%s", id);
    snprintf(a->token, sizeof a->token, "%s", tok);
    json_decref(o);
    free(r.body);
    sc_register_rank0(port, a);
}
