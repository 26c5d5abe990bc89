/* The measuring backend (sse_serve.h). Events are due at fixed delays, so two FIFO queues keep
 * them in time order at O(1) a step: streams waiting for their first event (due ttft_s after the
 * request) and streams waiting for their next one (due gap_s after the last). A connection that
 * cannot take its bytes keeps them in its output buffer (EPOLLOUT) while its events go on. */
#define _GNU_SOURCE
#include "sse_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IN_MAX 65536
#define NEVENTS 512

typedef struct sconn {
    int fd, streaming, ending, in_queue;
    long left, sent; /* events still to send, events sent */
    double due, gap_s;
    char in[IN_MAX];
    size_t in_len;
    char *out;
    size_t out_len, out_off, out_cap;
    struct sconn *qnext;
    struct sconn *prev, *next; /* every connection not freed */
} sconn;

typedef struct queue {
    sconn *head, *tail;
} queue;

struct sse_serve {
    sse_serve_opts o;
    int lfd, epfd, evfd, conns;
    pthread_t thread;
    atomic_int stop;
    atomic_long open_streams, abandoned, requests;
    sconn *all;
    queue first, next, now; /* now: streams of "sse_gap_ms": 0, due at once */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void push(queue *q, sconn *c)
{
    c->qnext = NULL;
    c->in_queue = 1;
    if (q->tail)
        q->tail->qnext = c;
    else
        q->head = c;
    q->tail = c;
}

static sconn *pop(queue *q)
{
    sconn *c = q->head;
    q->head = c->qnext;
    if (q->head == NULL) q->tail = NULL;
    c->in_queue = 0;
    return c;
}

static int out_add(sconn *c, const char *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap * 2 : 4096;
        while (cap < c->out_len + n)
            cap *= 2;
        char *nb = realloc(c->out, cap);
        if (nb == NULL) return -1;
        c->out = nb;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return 0;
}

/* Send what the output buffer holds; -1 when the peer is gone. */
static int flush(sse_serve *s, sconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w <= 0) return -1;
        c->out_off += (size_t)w;
    }
    if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
    if (c->ending && c->out_len == 0) { /* the stream's last byte is sent */
        c->ending = c->streaming = 0;
        atomic_fetch_sub(&s->open_streams, 1);
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->out_len ? EPOLLOUT : 0u), .data.ptr = c};
    epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

static void conn_free(sse_serve *s, sconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        s->all = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c->out);
    free(c);
}

/* A closed connection stays allocated while a queue holds it (the queue drops it). */
static void conn_close(sse_serve *s, sconn *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
        s->conns--;
        if (c->streaming) {
            atomic_fetch_sub(&s->open_streams, 1);
            atomic_fetch_add(&s->abandoned, 1);
            c->streaming = c->ending = 0;
        }
    }
    if (!c->in_queue) conn_free(s, c);
}

static int chunk(sconn *c, const char *data)
{
    char head[32];
    size_t n = strlen(data);
    int k = snprintf(head, sizeof head, "%zx\r\n", n);
    return out_add(c, head, (size_t)k) || out_add(c, data, n) || out_add(c, "\r\n", 2);
}

/* The next event of a stream (its last one ends the stream). */
static int emit(sse_serve *s, sconn *c, double now)
{
    static const char ev[] = "data: {\"object\":\"text_completion\",\"model\":\"m\",\"choices\":"
                             "[{\"index\":0,\"text\":\" tok\",\"finish_reason\":null}]}\n\n";
    int bad = chunk(c, ev);
    c->sent++;
    if (--c->left > 0) {
        c->due = now + c->gap_s;
        push(c->gap_s == s->o.gap_s ? &s->next : &s->now, c);
    } else {
        bad |= chunk(c, "data: [DONE]\n\n") || out_add(c, "0\r\n\r\n", 5);
        c->ending = 1;
    }
    return bad || flush(s, c) ? -1 : 0;
}

static int answer_whole(sse_serve *s, sconn *c, long tokens)
{
    char body[256], head[160];
    int n = snprintf(body, sizeof body,
                     "{\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,"
                     "\"text\":\" tok\",\"finish_reason\":\"length\"}],\"usage\":"
                     "{\"completion_tokens\":%ld}}",
                     tokens);
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n",
                     n);
    return out_add(c, head, (size_t)h) || out_add(c, body, (size_t)n) || flush(s, c) ? -1 : 0;
}

/* A whole request is in: answer it. 1 when more bytes are needed, -1 to close. */
static int on_request(sse_serve *s, sconn *c, double now)
{
    c->in[c->in_len] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) return c->in_len >= IN_MAX - 1 ? -1 : 1;
    const char *cl = strcasestr(c->in, "content-length:");
    size_t body_len = cl && cl < end ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
    size_t total = (size_t)(end + 4 - c->in) + body_len;
    if (total >= IN_MAX) return -1;
    if (c->in_len < total) return 1;
    const char *body = end + 4, *mt = strstr(body, "\"max_tokens\"");
    long tokens = s->o.default_tokens;
    if (mt) tokens = strtol(strchr(mt + 12, ':') ? strchr(mt + 12, ':') + 1 : mt, NULL, 10);
    if (tokens < 1) tokens = 1;
    const char *st = strstr(body, "\"stream\"");
    int stream = st && strncmp(st + 8 + strspn(st + 8, " :"), "true", 4) == 0;
    const char *g = strstr(body, "\"sse_gap_ms\"");
    c->gap_s = g ? 0 : s->o.gap_s; /* the only other gap: 0, for tests that need a flood */
    memmove(c->in, c->in + total, c->in_len - total);
    c->in_len -= total;
    atomic_fetch_add(&s->requests, 1);
    if (!stream) return answer_whole(s, c, tokens);
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    c->left = tokens;
    c->sent = 0;
    c->streaming = 1;
    atomic_fetch_add(&s->open_streams, 1);
    c->due = now + s->o.ttft_s;
    push(&s->first, c);
    return out_add(c, head, sizeof head - 1) || flush(s, c) ? -1 : 0;
}

static void on_readable(sse_serve *s, sconn *c, double now)
{
    for (;;) {
        ssize_t r = recv(c->fd, c->in + c->in_len, IN_MAX - 1 - c->in_len, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r <= 0) {
            conn_close(s, c);
            return;
        }
        c->in_len += (size_t)r;
        int rc;
        while (!c->streaming && c->in_len > 0 && (rc = on_request(s, c, now)) <= 0)
            if (rc < 0) {
                conn_close(s, c);
                return;
            }
        if (c->in_len >= IN_MAX - 1) {
            conn_close(s, c);
            return;
        }
    }
}

static void on_accept(sse_serve *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        sconn *c = s->conns < s->o.max_conns ? calloc(1, sizeof *c) : NULL;
        if (c == NULL) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->next = s->all;
        if (s->all) s->all->prev = c;
        s->all = c;
        s->conns++;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* Send the events due by now; the delay to the next one (ms, -1: none). */
static int run_due(sse_serve *s)
{
    double now = mono_s();
    queue *qs[3] = {&s->first, &s->next, &s->now};
    double next = -1;
    for (int k = 0; k < 3; k++) {
        queue *q = qs[k];
        while (q->head && q->head->due <= now) {
            sconn *c = pop(q);
            if (c->fd < 0)
                conn_close(s, c); /* closed while queued: free it now */
            else if (emit(s, c, now) != 0)
                conn_close(s, c);
        }
        if (q->head && (next < 0 || q->head->due < next)) next = q->head->due;
    }
    return next < 0 ? -1 : (int)((next - now) * 1e3) + 1;
}

static void *serve_main(void *cls)
{
    sse_serve *s = cls;
    struct epoll_event evs[NEVENTS];
    while (!atomic_load(&s->stop)) {
        int wait_ms = run_due(s);
        int n = epoll_wait(s->epfd, evs, NEVENTS, wait_ms < 0 || wait_ms > 100 ? 100 : wait_ms);
        double now = mono_s();
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->lfd)
                on_accept(s);
            else if (p == &s->evfd)
                continue;
            else if (evs[i].events & (EPOLLERR | EPOLLHUP))
                conn_close(s, p);
            else if ((evs[i].events & EPOLLOUT) && flush(s, p) != 0)
                conn_close(s, p);
            else if (evs[i].events & EPOLLIN)
                on_readable(s, p, now);
        }
    }
    return NULL;
}

int sse_serve_start(int port, const sse_serve_opts *o, sse_serve **out, int *port_out)
{
    sse_serve *s = calloc(1, sizeof *s);
    if (s == NULL) return -1;
    s->o = *o;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};
    struct epoll_event ev2 = {.events = EPOLLIN, .data.ptr = &s->evfd};
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->lfd, 4096) != 0 || getsockname(s->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
        s->epfd < 0 || s->evfd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev2) != 0 ||
        pthread_create(&s->thread, NULL, serve_main, s) != 0) {
        int e = errno;
        close(s->lfd);
        close(s->epfd);
        close(s->evfd);
        free(s);
        errno = e;
        return -1;
    }
    *port_out = ntohs(sa.sin_port);
    *out = s;
    return 0;
}

void sse_serve_stop(sse_serve *s)
{
    if (s == NULL) return;
    atomic_store(&s->stop, 1);
    uint64_t one = 1;
    ssize_t w = write(s->evfd, &one, sizeof one);
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->lfd);
    close(s->epfd);
    close(s->evfd);
    while (s->all) {
        if (s->all->fd >= 0) close(s->all->fd);
        conn_free(s, s->all);
    }
    free(s);
}

long sse_serve_open_streams(sse_serve *s)
{
    return atomic_load(&s->open_streams);
}

long sse_serve_abandoned(sse_serve *s)
{
    return atomic_load(&s->abandoned);
}

long sse_serve_requests(sse_serve *s)
{
    return atomic_load(&s->requests);
}
