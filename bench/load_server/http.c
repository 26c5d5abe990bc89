/* load_server: HTTP through libcurl: one multi handle driven by epoll through curl's socket
 * interface, a pool of reusable easy handles, and control requests run one at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load_server.h"

/* ---- curl plumbing: one multi handle, epoll, curl's socket interface ---- */

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (x->resp.len + len > MAX_RESPONSE) return 0; /* aborts the transfer: a transport error */
    ls_buf_add(&x->resp, ptr, len);
    return len;
}

/* Refuse every socket that would not connect to 127.0.0.0/8. */
static curl_socket_t open_loopback(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)ud;
    if (purpose == CURLSOCKTYPE_IPCXN && a->family == AF_INET &&
        a->addrlen >= (unsigned)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)&a->addr;
        if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
            return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    }
    fputs("load_server: refused a connection to an address that is not loopback\n", stderr);
    return CURL_SOCKET_BAD;
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *ud, void *sockp)
{
    (void)e;
    gen *g = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, s, NULL); /* may already be closed: ignore */
        curl_multi_assign(g->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    if (what & CURL_POLL_IN) ev.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) ev.events |= EPOLLOUT;
    ev.data.fd = s;
    if (!sockp) {
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(g->multi, s, g); /* any non-NULL pointer: "in the epoll set" */
    } else if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
}

static int on_timer(CURLM *m, long ms, void *ud)
{
    (void)m;
    gen *g = ud;
    g->timer_at = ms < 0 ? -1 : ls_now_s() + (double)ms / 1e3;
    return 0;
}

static int xfer_init(xfer *x)
{
    memset(x, 0, sizeof *x);
    x->h = curl_easy_init();
    if (!x->h) return -1;
    CURL *h = x->h;
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->err) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_loopback) != CURLE_OK;
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK;
#else
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTP) != CURLE_OK;
#endif
    return bad ? -1 : 0;
}

static void xfer_free(gen *g, xfer *x)
{
    if (!x->h) return;
    if (x->busy) curl_multi_remove_handle(g->multi, x->h);
    curl_easy_cleanup(x->h);
    free(x->body.p);
    free(x->resp.p);
    memset(x, 0, sizeof *x);
}

/* Hand a request to curl. path starts with '/'; the body (POST) is x->body. */
int ls_xfer_start(gen *g, xfer *x, int kind, int id, int method)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g->port, x->path);
    CURL *h = x->h;
    int bad = curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, g->hdr_auth ? g->hdr_auth : g->hdr_plain) !=
           CURLE_OK;
    if (method == M_POST) {
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, (char *)NULL) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)x->body.len) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body.p ? x->body.p : "") != CURLE_OK;
    } else {
        bad |= curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                                method == M_DELETE ? "DELETE" : (char *)NULL) != CURLE_OK;
    }
    if (bad) {
        fputs("load_server: curl refused a request option\n", stderr);
        return -1;
    }
    x->kind = kind;
    x->id = id;
    x->method = method;
    x->finished = 0;
    x->status = 0;
    x->rc = CURLE_OK;
    x->err[0] = '\0';
    ls_buf_clear(&x->resp);
    x->t0 = ls_now_s();
    if (curl_multi_add_handle(g->multi, h) != CURLM_OK) {
        fputs("load_server: curl_multi_add_handle failed\n", stderr);
        return -1;
    }
    x->busy = 1;
    g->inflight++;
    return 0;
}

/* Hand every finished transfer to g->on_done. Called after each socket action, so a completion is
 * timed when curl finishes it, not after the rest of the epoll batch. */
static void collect(gen *g)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(g->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        char *priv = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        xfer *x = (xfer *)(void *)priv;
        x->rc = m->data.result;
        x->t1 = ls_now_s();
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
        curl_multi_remove_handle(g->multi, x->h);
        x->busy = 0;
        x->finished = 1;
        g->inflight--;
        g->on_done(g, x);
    }
}

/* One turn of the loop: wait up to max_wait_s for sockets or curl's timer and let curl work. */
void ls_step(gen *g, double max_wait_s)
{
    double t = ls_now_s(), wait = max_wait_s;
    if (g->timer_at >= 0 && g->timer_at - t < wait) wait = g->timer_at - t;
    int ms = wait <= 0 ? 0 : (int)ceil(wait * 1e3);
    struct epoll_event ev[512];
    int n = epoll_wait(g->epfd, ev, 512, ms);
    int running = 0;
    for (int i = 0; i < n; i++) {
        int flags = ((ev[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                    ((ev[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                    ((ev[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(g->multi, ev[i].data.fd, flags, &running);
        collect(g);
    }
    if (g->timer_at >= 0 && ls_now_s() >= g->timer_at) {
        g->timer_at = -1;
        curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        collect(g);
    }
}

/* ---- control requests (one at a time, through the same multi handle) ---- */

/* Run one request to completion. Returns the HTTP status (after counting and showing a failure)
 * or -1 on a transport error, deadline or interruption. *out gets the parsed JSON body of a 2xx
 * answer (NULL if it is not JSON). */
long ls_ctl(gen *g, int method, const char *body, json_t **out, double deadline, const char *fmt,
            ...)
{
    xfer *x = &g->ctl;
    if (out) *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->path, sizeof x->path, fmt, ap);
    va_end(ap);
    ls_buf_clear(&x->body);
    if (body) ls_buf_add(&x->body, body, strlen(body));
    if (ls_xfer_start(g, x, K_CTL, 0, method)) return -1;
    while (!x->finished) {
        if (ls_over_time(g, deadline, "no answer to a control request")) {
            g->err->transport++;
            return -1;
        }
        ls_step(g, 0.05);
    }
    if (ls_request_failed(g, x)) return x->rc != CURLE_OK ? -1 : x->status;
    if (out) {
        *out = json_loadb(x->resp.p ? x->resp.p : "", x->resp.len, 0, NULL);
        if (!*out)
            ls_check_failed(g, "%s %s: the answer is not JSON", ls_method_name(method), x->path);
    }
    return x->status;
}

/* ---- pool of easy handles for the ranks ---- */

xfer *ls_pool_get(gen *g)
{
    return g->nfree ? g->free_x[--g->nfree] : NULL;
}

void ls_pool_put(gen *g, xfer *x)
{
    g->free_x[g->nfree++] = x;
}

/* Wait for every transfer in flight (after a failure: so no handle is left in the multi). */
void ls_drain(gen *g, double max_s)
{
    double end = ls_now_s() + max_s;
    while (g->inflight > (g->ctl.busy ? 1 : 0) && ls_now_s() < end)
        ls_step(g, 0.05);
}

/* The multi handle on an epoll set, the plain headers, and max(C, P) easy handles, C of them in
 * the ranks' pool. -1 (with a message) when libcurl or epoll refuse. */
int ls_http_setup(gen *g)
{
    int npool = g->conns > g->pollers ? g->conns : g->pollers;
    g->multi = curl_multi_init();
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->hdr_plain = curl_slist_append(NULL, "Content-Type: application/json");
    if (g->hdr_plain) g->hdr_plain = curl_slist_append(g->hdr_plain, "Expect:");
    if (!g->multi || g->epfd < 0 || !g->hdr_plain) {
        fputs("load_server: cannot set up libcurl and epoll\n", stderr);
        return -1;
    }
    if (curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, on_socket) ||
        curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, (void *)g) ||
        curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, on_timer) ||
        curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, (void *)g) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)g->conns) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)g->conns) ||
        curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, (long)g->conns)) {
        fputs("load_server: curl refused a multi option\n", stderr);
        return -1;
    }
    g->pool = ls_xcalloc((size_t)npool, sizeof *g->pool);
    g->free_x = ls_xcalloc((size_t)npool, sizeof *g->free_x);
    g->npool = npool;
    for (int i = 0; i < npool; i++)
        if (xfer_init(&g->pool[i])) {
            fputs("load_server: cannot make a curl easy handle\n", stderr);
            return -1;
        }
    if (xfer_init(&g->ctl)) {
        fputs("load_server: cannot make a curl easy handle\n", stderr);
        return -1;
    }
    /* The ranks' phases use C handles: at most C requests in flight, one per connection. */
    for (int i = g->conns - 1; i >= 0; i--)
        ls_pool_put(g, &g->pool[i]);
    return 0;
}

/* Everything http_setup made (whatever it got to), and libcurl's global state. */
void ls_http_cleanup(gen *g)
{
    for (int i = 0; g->pool && i < g->npool; i++)
        xfer_free(g, &g->pool[i]);
    xfer_free(g, &g->ctl);
    if (g->multi) curl_multi_cleanup(g->multi);
    if (g->epfd >= 0) close(g->epfd);
    curl_slist_free_all(g->hdr_plain);
    curl_slist_free_all(g->hdr_auth);
    curl_global_cleanup();
}
