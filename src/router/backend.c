/* The forwarding loop (backend.h): one thread, one libcurl multi handle driven through its socket
 * interface over epoll, so each wake-up costs what the sockets that moved cost, however many
 * transfers are open. Owners on other threads talk to the loop through a queue of commands
 * (start, unpause, free) and an eventfd; the loop talks back through each transfer's state, under
 * the transfer's mutex, and the owner's call-back. Only the loop's thread touches libcurl. */
#define _GNU_SOURCE
#include "backend.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_S 0.25 /* how often silent instances are looked for */
#define NEVENTS 256

enum { CMD_ADD = 1, CMD_UNPAUSE = 2, CMD_FREE = 4 };
enum { WANT_NONE = -1 };
/* epoll's data: a descriptor (shifted left), or a transfer whose peer is watched (low bit) */
#define FD_TAG(fd) ((uint64_t)(unsigned)(fd) << 1)

struct prs_backend {
    prs_backend_loop *l;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    void (*wake)(void *);
    void *wake_cls;
    int stream;
    double timeout_s;
    /* under mu, shared by the loop and the owner */
    pthread_mutex_t mu;
    int head, finished, failed, paused, released, want;
    int watch_fd;  /* the peer's socket watched while armed (prs__backend_watch_peer), -1: none */
    int peer_gone; /* the watched peer closed its connection */
    long status;
    char ctype[128];
    char errmsg[CURL_ERROR_SIZE];
    char *buf; /* bytes received, [off, len) not handed out */
    size_t len, off, cap;
    /* the loop's own */
    int added, in_live;
    double last_s;
    char errbuf[CURL_ERROR_SIZE];
    prs_backend *prev, *next; /* the live list: every transfer started and not freed */
    /* under the loop's qmu */
    unsigned cmds;
    int queued;
    prs_backend *qnext;
};

struct prs_backend_loop {
    CURLM *multi;
    int epfd, evfd;
    pthread_t thread;
    int started;
    atomic_int stop;
    double timer_at; /* libcurl's timer (monotonic seconds), < 0: none */
    double next_sweep;
    prs_backend *live;
    pthread_mutex_t qmu;
    prs_backend *queue;
    int dead; /* the thread stopped: commands wait for prs__backend_loop_free */
    atomic_ulong connects;
    prs_backend_host host; /* the event source sharing the thread (host.fd < 0: none) */
    int woke;              /* an owner was called back since the host last ran */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the owner's side ---------------------------------------------------------------------- */

static void post(prs_backend *b, unsigned cmd)
{
    prs_backend_loop *l = b->l;
    pthread_mutex_lock(&l->qmu);
    b->cmds |= cmd;
    if (!b->queued) {
        b->queued = 1;
        b->qnext = l->queue;
        l->queue = b;
    }
    int dead = l->dead;
    pthread_mutex_unlock(&l->qmu);
    /* on the loop's thread (an owner called by the host), the queue runs after the host */
    if (!dead && !(l->started && pthread_equal(pthread_self(), l->thread))) {
        uint64_t one = 1;
        ssize_t w = write(l->evfd, &one, sizeof one);
        (void)w; /* a full counter already wakes the loop */
    }
}

/* What want waits for is in, or the watched peer left (mu held). */
static int satisfied(const prs_backend *b, int want)
{
    if (b->peer_gone && want != WANT_NONE) return 1;
    switch (want) {
    case PRS_BACKEND_WANT_HEAD:
        return b->head || b->finished;
    case PRS_BACKEND_WANT_DATA:
        return b->len > b->off || b->finished;
    case PRS_BACKEND_WANT_END:
        return b->finished;
    default:
        return 0;
    }
}

int prs__backend_arm(prs_backend *b, prs_backend_want want)
{
    pthread_mutex_lock(&b->mu);
    int now = satisfied(b, (int)want);
    if (!now) b->want = (int)want;
    pthread_mutex_unlock(&b->mu);
    return now;
}

int prs__backend_ready(prs_backend *b, prs_backend_want want)
{
    pthread_mutex_lock(&b->mu);
    int now = satisfied(b, (int)want);
    pthread_mutex_unlock(&b->mu);
    return now;
}

int prs__backend_head(prs_backend *b, long *status, prs_error *err)
{
    pthread_mutex_lock(&b->mu);
    int rc = 0;
    if (b->head)
        *status = b->status;
    else if (b->finished)
        rc = prs_error_set(err, PRS_ESERVER, "%s", b->errmsg);
    else
        rc = 1;
    pthread_mutex_unlock(&b->mu);
    return rc;
}

const char *prs__backend_content_type(const prs_backend *b)
{
    return b->ctype; /* written before head is set, never after */
}

ssize_t prs__backend_read(prs_backend *b, char *buf, size_t max, int *end, prs_error *err)
{
    *end = 0;
    pthread_mutex_lock(&b->mu);
    size_t k = b->len - b->off;
    if (k > max) k = max;
    if (k > 0) memcpy(buf, b->buf + b->off, k);
    b->off += k;
    int unpause = 0;
    if (b->off == b->len) b->off = b->len = 0;
    if (b->paused && b->len - b->off < PRS_BACKEND_STREAM_HOLD / 2) {
        b->paused = 0;
        unpause = 1;
    }
    ssize_t rc = (ssize_t)k;
    if (k == 0 && b->finished) {
        if (b->failed)
            rc = prs_error_set(err, PRS_ESERVER, "%s", b->errmsg);
        else
            *end = 1;
    }
    pthread_mutex_unlock(&b->mu);
    if (unpause) post(b, CMD_UNPAUSE);
    return rc;
}

/* Stop watching the peer's socket (mu held). */
static void unwatch(prs_backend *b)
{
    if (b->watch_fd < 0) return;
    epoll_ctl(b->l->epfd, EPOLL_CTL_DEL, b->watch_fd, NULL);
    b->watch_fd = -1;
}

void prs__backend_watch_peer(prs_backend *b, int fd)
{
    pthread_mutex_lock(&b->mu);
    if (fd >= 0 && b->want != WANT_NONE && b->watch_fd < 0 && !b->released) {
        /* EPOLLRDHUP alone: bytes the peer sends (a next request on a kept-alive connection)
         * wake nothing; its end of the connection, or an error on it, does */
        struct epoll_event ev = {.events = EPOLLRDHUP, .data.u64 = (uint64_t)(uintptr_t)b | 1u};
        if (epoll_ctl(b->l->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) b->watch_fd = fd;
    }
    pthread_mutex_unlock(&b->mu);
}

int prs__backend_peer_gone(prs_backend *b)
{
    pthread_mutex_lock(&b->mu);
    int gone = b->peer_gone;
    pthread_mutex_unlock(&b->mu);
    return gone;
}

void prs__backend_free(prs_backend *b)
{
    if (b == NULL) return;
    pthread_mutex_lock(&b->mu);
    b->released = 1;
    b->want = WANT_NONE;
    unwatch(b);
    pthread_mutex_unlock(&b->mu);
    post(b, CMD_FREE);
}

/* ---- the loop's side ----------------------------------------------------------------------- */

/* Call the owner back when what it armed for is in; mu held, released here. */
static void notify_unlock(prs_backend *b)
{
    int w = b->want != WANT_NONE && !b->released && satisfied(b, b->want);
    if (w) {
        b->want = WANT_NONE;
        unwatch(b); /* the owner takes its connection back */
    }
    pthread_mutex_unlock(&b->mu);
    if (w) {
        b->l->woke = 1;
        b->wake(b->wake_cls);
    }
}

static void set_head(prs_backend *b)
{
    if (b->head) return;
    curl_easy_getinfo(b->easy, CURLINFO_RESPONSE_CODE, &b->status);
    b->head = 1;
}

static size_t on_header(char *data, size_t size, size_t n, void *cls)
{
    prs_backend *b = cls;
    size_t len = size * n;
    b->last_s = mono_s();
    pthread_mutex_lock(&b->mu);
    if (len <= 2) {
        long code = 0;
        curl_easy_getinfo(b->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) set_head(b); /* the blank line ending a final head */
    } else if (!b->head && strncmp(data, "HTTP/", 5) == 0) {
        b->ctype[0] = '\0'; /* a new head (after a 100 Continue) */
    } else if (len > 13 && strncasecmp(data, "content-type:", 13) == 0) {
        size_t k = len - 13;
        const char *v = data + 13;
        while (k > 0 && (*v == ' ' || *v == '\t'))
            v++, k--;
        while (k > 0 && (v[k - 1] == '\r' || v[k - 1] == '\n'))
            k--;
        if (k >= sizeof b->ctype) k = sizeof b->ctype - 1;
        memcpy(b->ctype, v, k);
        b->ctype[k] = '\0';
    }
    notify_unlock(b);
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    prs_backend *b = cls;
    size_t len = size * n;
    b->last_s = mono_s();
    pthread_mutex_lock(&b->mu);
    set_head(b);
    size_t held = b->len - b->off;
    if (b->stream && b->status == 200 && held > 0 && held + len > PRS_BACKEND_STREAM_HOLD) {
        b->paused = 1; /* the owner unpauses once it took half */
        pthread_mutex_unlock(&b->mu);
        return CURL_WRITEFUNC_PAUSE;
    }
    if (b->len + len > PRS_BACKEND_WHOLE_MAX) {
        snprintf(b->errbuf, sizeof b->errbuf, "answer larger than %u bytes", PRS_BACKEND_WHOLE_MAX);
        pthread_mutex_unlock(&b->mu);
        return 0; /* aborts the transfer */
    }
    if (b->off > 0 && b->off == b->len) b->off = b->len = 0;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (nb == NULL) {
            snprintf(b->errbuf, sizeof b->errbuf, "out of memory");
            pthread_mutex_unlock(&b->mu);
            return 0;
        }
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    notify_unlock(b);
    return len;
}

/* The transfer ended (result); it leaves the multi handle, its connection back to the cache
 * when it completed. */
static void finish(prs_backend_loop *l, prs_backend *b, CURLcode result)
{
    long connects = 0;
    curl_easy_getinfo(b->easy, CURLINFO_NUM_CONNECTS, &connects);
    curl_multi_remove_handle(l->multi, b->easy);
    b->added = 0;
    l->connects += (unsigned long)connects;
    pthread_mutex_lock(&b->mu);
    if (result == CURLE_OK) set_head(b);
    b->finished = 1;
    b->failed = result != CURLE_OK;
    if (b->failed)
        snprintf(b->errmsg, sizeof b->errmsg, "%s",
                 b->errbuf[0] ? b->errbuf : curl_easy_strerror(result));
    notify_unlock(b);
}

static void live_remove(prs_backend_loop *l, prs_backend *b)
{
    if (!b->in_live) return;
    if (b->prev)
        b->prev->next = b->next;
    else
        l->live = b->next;
    if (b->next) b->next->prev = b->prev;
    b->in_live = 0;
}

static void destroy(prs_backend_loop *l, prs_backend *b)
{
    unwatch(b);
    if (b->added) curl_multi_remove_handle(l->multi, b->easy);
    live_remove(l, b);
    if (b->easy) curl_easy_cleanup(b->easy);
    curl_slist_free_all(b->headers);
    pthread_mutex_destroy(&b->mu);
    free(b->buf);
    free(b->body);
    free(b);
}

/* Carry out the commands posted since the last call. */
static void run_queue(prs_backend_loop *l)
{
    pthread_mutex_lock(&l->qmu);
    prs_backend *q = l->queue;
    l->queue = NULL;
    for (prs_backend *b = q; b; b = b->qnext)
        b->queued = 0;
    pthread_mutex_unlock(&l->qmu);
    while (q) {
        prs_backend *b = q;
        q = q->qnext;
        pthread_mutex_lock(&l->qmu);
        unsigned cmds = b->cmds;
        b->cmds = 0;
        pthread_mutex_unlock(&l->qmu);
        if (cmds & CMD_FREE) {
            destroy(l, b);
            continue;
        }
        if (cmds & CMD_ADD) {
            b->prev = NULL;
            b->next = l->live;
            if (l->live) l->live->prev = b;
            l->live = b;
            b->in_live = 1;
            b->last_s = mono_s();
            b->added = curl_multi_add_handle(l->multi, b->easy) == CURLM_OK;
            if (!b->added) finish(l, b, CURLE_OUT_OF_MEMORY);
        }
        if ((cmds & CMD_UNPAUSE) && b->added) {
            b->last_s = mono_s();
            curl_easy_pause(b->easy, CURLPAUSE_CONT);
        }
    }
}

int prs__backend_start(prs_backend_loop *l, const char *url, const char *body, size_t len,
                       double timeout_s, int stream, void (*wake)(void *), void *wake_cls,
                       prs_backend **out, prs_error *err)
{
    *out = NULL;
    prs_backend *b = calloc(1, sizeof *b);
    if (b == NULL || (b->body = malloc(len + 1)) == NULL) {
        free(b);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    memcpy(b->body, body, len);
    pthread_mutex_init(&b->mu, NULL);
    b->l = l;
    b->wake = wake;
    b->wake_cls = wake_cls;
    b->stream = stream;
    b->timeout_s = timeout_s;
    b->want = WANT_NONE;
    b->watch_fd = -1;
    b->easy = curl_easy_init();
    b->headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = b->headers ? curl_slist_append(b->headers, "Expect:") : NULL;
    if (b->easy == NULL || h2 == NULL) {
        destroy(l, b);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    long t = (long)(timeout_s + 0.5);
    curl_easy_setopt(b->easy, CURLOPT_URL, url);
    curl_easy_setopt(b->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(b->easy, CURLOPT_POSTFIELDS, b->body);
    curl_easy_setopt(b->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(b->easy, CURLOPT_HTTPHEADER, b->headers);
    curl_easy_setopt(b->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(b->easy, CURLOPT_HEADERDATA, b);
    curl_easy_setopt(b->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(b->easy, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(b->easy, CURLOPT_ERRORBUFFER, b->errbuf);
    curl_easy_setopt(b->easy, CURLOPT_PRIVATE, b);
    curl_easy_setopt(b->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(b->easy, CURLOPT_CONNECTTIMEOUT, t < 5 ? (t < 1 ? 1L : t) : 5L);
    curl_easy_setopt(b->easy, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(b->easy, CURLOPT_TCP_NODELAY, 1L);
    pthread_mutex_lock(&l->qmu);
    int dead = l->dead;
    pthread_mutex_unlock(&l->qmu);
    if (dead) {
        destroy(l, b);
        return prs_error_set(err, PRS_ESERVER, "the router is stopping");
    }
    *out = b;
    post(b, CMD_ADD);
    return 0;
}

/* ---- the loop's thread ---------------------------------------------------------------------- */

static int on_socket(CURL *easy, curl_socket_t s, int what, void *cls, void *socketp)
{
    (void)easy;
    prs_backend_loop *l = cls;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(l->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                                       ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
                             .data.u64 = FD_TAG(s)};
    if (epoll_ctl(l->epfd, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) != 0)
        epoll_ctl(l->epfd, socketp ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s, &ev);
    curl_multi_assign(l->multi, s, (void *)1);
    return 0;
}

static int on_timer(CURLM *m, long ms, void *cls)
{
    (void)m;
    prs_backend_loop *l = cls;
    l->timer_at = ms < 0 ? -1 : mono_s() + (double)ms * 1e-3;
    return 0;
}

static void drain_done(prs_backend_loop *l)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(l->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE) continue;
        prs_backend *b = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&b);
        finish(l, b, m->data.result);
    }
}

/* Give up the instances silent for longer than their timeout (a paused transfer waits on its
 * client, not on its instance). Measured here rather than by libcurl's low-speed check, which
 * let a silent instance hold a request several times longer than the timeout. */
static void sweep(prs_backend_loop *l, double now)
{
    prs_backend *b = l->live;
    while (b) {
        prs_backend *next = b->next;
        if (b->added && now - b->last_s > b->timeout_s) {
            pthread_mutex_lock(&b->mu);
            int paused = b->paused;
            pthread_mutex_unlock(&b->mu);
            if (paused) {
                b->last_s = now;
            } else {
                snprintf(b->errbuf, sizeof b->errbuf, "no answer for %.0f s", b->timeout_s);
                finish(l, b, CURLE_OPERATION_TIMEDOUT);
            }
        }
        b = next;
    }
    l->next_sweep = now + SWEEP_S;
}

/* The watched peer's socket reported its end or an error (events). Gone: an error, or the end
 * with no byte before it (a peek reads 0). Bytes before the end (a request sent, then the
 * sending side shut) are not taken for a departure: the watch stops and the owner keeps
 * waiting. */
static void on_peer(prs_backend *b, uint32_t events)
{
    pthread_mutex_lock(&b->mu);
    if (b->watch_fd < 0) { /* no longer watched */
        pthread_mutex_unlock(&b->mu);
        return;
    }
    int gone = (events & (EPOLLHUP | EPOLLERR)) != 0;
    if (!gone) {
        char c;
        ssize_t r = recv(b->watch_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    unwatch(b);
    b->peer_gone = gone;
    notify_unlock(b);
}

/* The epoll wait's bound (ms): libcurl's timer, the next sweep, the host's timeout. */
static int wait_ms(prs_backend_loop *l, double now)
{
    double until = l->next_sweep;
    if (l->timer_at >= 0 && l->timer_at < until) until = l->timer_at;
    if (l->host.timeout_ms) {
        long h = l->host.timeout_ms(l->host.cls);
        if (h >= 0 && now + (double)h * 1e-3 < until) until = now + (double)h * 1e-3;
    }
    return until <= now ? 0 : (int)((until - now) * 1e3) + 1;
}

static void *loop_main(void *cls)
{
    prs_backend_loop *l = cls;
    struct epoll_event evs[NEVENTS];
    int running;
    while (!l->stop) {
        double now = mono_s();
        int n = epoll_wait(l->epfd, evs, NEVENTS, wait_ms(l, now));
        int host_ready = n == 0 && l->host.run != NULL; /* its timeout, maybe */
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 & 1u) { /* a watched peer (prs__backend_watch_peer) */
                on_peer((prs_backend *)(uintptr_t)(evs[i].data.u64 & ~(uint64_t)1), evs[i].events);
                continue;
            }
            int fd = (int)(evs[i].data.u64 >> 1);
            if (fd == l->evfd) {
                uint64_t v;
                ssize_t r = read(l->evfd, &v, sizeof v);
                (void)r;
            } else if (fd == l->host.fd) {
                host_ready = 1;
            } else {
                int flags = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                            ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                            ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
                curl_multi_socket_action(l->multi, fd, flags, &running);
            }
        }
        run_queue(l);
        now = mono_s();
        if (l->timer_at >= 0 && l->timer_at <= now) {
            l->timer_at = -1;
            curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        drain_done(l);
        if (now >= l->next_sweep) sweep(l, now);
        if (l->host.run && (host_ready || l->woke)) {
            l->woke = 0;
            l->host.run(l->host.cls);
            run_queue(l); /* what the host's owners asked for, at once */
        }
    }
    return NULL;
}

int prs__backend_loop_new(unsigned max_conns, prs_backend_loop **out, prs_error *err)
{
    *out = NULL;
    prs_backend_loop *l = calloc(1, sizeof *l);
    if (l == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->multi = curl_multi_init();
    l->timer_at = -1;
    pthread_mutex_init(&l->qmu, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = FD_TAG(l->evfd)};
    if (l->epfd < 0 || l->evfd < 0 || l->multi == NULL ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev) != 0) {
        l->dead = 1;
        prs__backend_loop_free(l);
        return prs_error_set(err, PRS_EIO, "cannot set up the forwarding loop: %s",
                             strerror(errno));
    }
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
    /* at most max_conns connections in all, idle ones included: a new one closes the oldest
     * idle one when at the limit (and the owners never have more transfers than that) */
    curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, (long)(max_conns ? max_conns : 1));
    curl_multi_setopt(l->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)(max_conns ? max_conns : 1));
    l->host.fd = -1;
    *out = l;
    return 0;
}

int prs__backend_loop_run(prs_backend_loop *l, const prs_backend_host *host, prs_error *err)
{
    if (host) {
        l->host = *host;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = FD_TAG(host->fd)};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, host->fd, &ev) != 0)
            return prs_error_set(err, PRS_EIO, "cannot watch the server's events: %s",
                                 strerror(errno));
    }
    l->next_sweep = mono_s() + SWEEP_S;
    l->started = 1; /* before the thread runs: post() tells its thread by it */
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        l->started = 0;
        return prs_error_set(err, PRS_EIO, "cannot start the forwarding loop's thread");
    }
    return 0;
}

void prs__backend_loop_stop(prs_backend_loop *l)
{
    if (l == NULL) return;
    pthread_mutex_lock(&l->qmu);
    int dead = l->dead;
    l->dead = 1; /* no transfer starts any more */
    pthread_mutex_unlock(&l->qmu);
    if (dead) return;
    if (!l->started) {
        run_queue(l);
        return;
    }
    l->stop = 1;
    uint64_t one = 1;
    ssize_t w = write(l->evfd, &one, sizeof one);
    (void)w;
    pthread_join(l->thread, NULL);
    l->started = 0;
    run_queue(l); /* transfers started meanwhile join the live list */
    for (prs_backend *b = l->live; b; b = b->next) {
        if (b->finished) continue;
        snprintf(b->errbuf, sizeof b->errbuf, "the router is stopping");
        if (b->added)
            finish(l, b, CURLE_ABORTED_BY_CALLBACK);
        else {
            pthread_mutex_lock(&b->mu);
            b->finished = b->failed = 1;
            snprintf(b->errmsg, sizeof b->errmsg, "the router is stopping");
            notify_unlock(b);
        }
    }
}

unsigned long prs__backend_loop_connects(prs_backend_loop *l)
{
    return atomic_load(&l->connects);
}

void prs__backend_loop_free(prs_backend_loop *l)
{
    if (l == NULL) return;
    prs__backend_loop_stop(l);
    run_queue(l);
    for (prs_backend *b = l->live, *next; b; b = next) {
        next = b->next; /* destroy frees b and unlinks it alone */
        destroy(l, b);
    }
    l->live = NULL;
    if (l->multi) curl_multi_cleanup(l->multi);
    if (l->epfd >= 0) close(l->epfd);
    if (l->evfd >= 0) close(l->evfd);
    pthread_mutex_destroy(&l->qmu);
    free(l);
}
