/* Forwarding one request with libcurl (backend.h). Each transfer has its own multi handle, so a
 * connection thread pumps only its own transfer: the write callback pauses the transfer once a
 * chunk is held, and prs__backend_read hands that chunk out and unpauses, which is what ties the
 * instance's pace to the client's. */
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define POLL_MS 1000

struct prs_backend {
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char ctype[128];
    int head_done, finished;
    CURLcode result;
    char *chunk; /* bytes received, not yet handed out */
    size_t chunk_len, chunk_off;
    char errbuf[CURL_ERROR_SIZE];
    double timeout_s, last_activity_s; /* the instance's silence is bounded by timeout_s */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct prs_backend_pool {
    CURLSH *share;
    pthread_mutex_t mu[CURL_LOCK_DATA_LAST];
};

static void pool_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *cls)
{
    (void)h, (void)access;
    prs_backend_pool *p = cls;
    pthread_mutex_lock(&p->mu[data]);
}

static void pool_unlock(CURL *h, curl_lock_data data, void *cls)
{
    (void)h;
    prs_backend_pool *p = cls;
    pthread_mutex_unlock(&p->mu[data]);
}

int prs__backend_pool_new(prs_backend_pool **out, prs_error *err)
{
    *out = NULL;
    prs_backend_pool *p = calloc(1, sizeof *p);
    if (p == NULL || (p->share = curl_share_init()) == NULL) {
        free(p);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&p->mu[i], NULL);
    curl_share_setopt(p->share, CURLSHOPT_LOCKFUNC, pool_lock);
    curl_share_setopt(p->share, CURLSHOPT_UNLOCKFUNC, pool_unlock);
    curl_share_setopt(p->share, CURLSHOPT_USERDATA, p);
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    *out = p;
    return 0;
}

void prs__backend_pool_free(prs_backend_pool *p)
{
    if (p == NULL) return;
    curl_share_cleanup(p->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&p->mu[i]);
    free(p);
}

static size_t on_header(char *data, size_t size, size_t n, void *cls)
{
    prs_backend *b = cls;
    size_t len = size * n;
    b->last_activity_s = mono_s();
    if (len <= 2) {
        b->head_done = 1; /* the blank line ending the head */
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
    } else if (strncmp(data, "HTTP/", 5) == 0) {
        b->ctype[0] = '\0'; /* a new response (after a 100 Continue) */
        b->head_done = 0;
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    prs_backend *b = cls;
    size_t len = size * n;
    b->head_done = 1;
    b->last_activity_s = mono_s();
    if (b->chunk != NULL) return CURL_WRITEFUNC_PAUSE; /* the last chunk is not handed out yet */
    b->chunk = malloc(len ? len : 1);
    if (b->chunk == NULL) return 0; /* aborts the transfer */
    memcpy(b->chunk, data, len);
    b->chunk_len = len;
    b->chunk_off = 0;
    return len;
}

int prs__backend_start(prs_backend_pool *pool, const char *url, const char *body, size_t len,
                       double timeout_s, prs_backend **out, prs_error *err)
{
    *out = NULL;
    prs_backend *b = calloc(1, sizeof *b);
    if (b == NULL || (b->body = malloc(len + 1)) == NULL) {
        free(b);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    memcpy(b->body, body, len);
    b->multi = curl_multi_init();
    b->easy = curl_easy_init();
    b->headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = b->headers ? curl_slist_append(b->headers, "Expect:") : NULL;
    if (b->multi == NULL || b->easy == NULL || h2 == NULL) {
        prs__backend_free(b);
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
    curl_easy_setopt(b->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(b->easy, CURLOPT_CONNECTTIMEOUT, t < 5 ? t : 5L);
    b->timeout_s = timeout_s;
    b->last_activity_s = mono_s();
    curl_easy_setopt(b->easy, CURLOPT_PROTOCOLS_STR, "http");
    if (pool != NULL) curl_easy_setopt(b->easy, CURLOPT_SHARE, pool->share);
    curl_multi_add_handle(b->multi, b->easy);
    *out = b;
    return 0;
}

/* One round of transfer work; sets finished and result when the transfer ends. */
static void pump(prs_backend *b)
{
    int running = 0;
    curl_multi_perform(b->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(b->multi, &left)) != NULL) {
        if (m->msg == CURLMSG_DONE) {
            b->finished = 1;
            b->result = m->data.result;
        }
    }
    if (!b->finished && b->chunk == NULL) curl_multi_poll(b->multi, NULL, 0, POLL_MS, NULL);
    /* silence: measured here, not by libcurl's low-speed check, which let a silent instance
     * hold a request several times longer than the timeout */
    if (!b->finished && b->chunk == NULL && mono_s() - b->last_activity_s > b->timeout_s) {
        b->finished = 1;
        b->result = CURLE_OPERATION_TIMEDOUT;
        snprintf(b->errbuf, sizeof b->errbuf, "no answer for %.0f s", b->timeout_s);
    }
}

static int transfer_error(const prs_backend *b, prs_error *err)
{
    return prs_error_set(err, PRS_ESERVER, "%s",
                         b->errbuf[0] ? b->errbuf : curl_easy_strerror(b->result));
}

int prs__backend_head(prs_backend *b, long *status, prs_error *err)
{
    while (!b->head_done && !b->finished)
        pump(b);
    if (b->finished && b->result != CURLE_OK) return transfer_error(b, err);
    curl_easy_getinfo(b->easy, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

const char *prs__backend_content_type(const prs_backend *b)
{
    return b->ctype;
}

ssize_t prs__backend_read(prs_backend *b, char *buf, size_t max, prs_error *err)
{
    while (b->chunk == NULL) {
        if (b->finished) return b->result == CURLE_OK ? 0 : transfer_error(b, err);
        pump(b);
    }
    size_t k = b->chunk_len - b->chunk_off;
    if (k > max) k = max;
    memcpy(buf, b->chunk + b->chunk_off, k);
    b->chunk_off += k;
    if (b->chunk_off == b->chunk_len) {
        free(b->chunk);
        b->chunk = NULL;
        curl_easy_pause(b->easy, CURLPAUSE_CONT);
    }
    return (ssize_t)k;
}

void prs__backend_free(prs_backend *b)
{
    if (b == NULL) return;
    if (b->multi && b->easy) curl_multi_remove_handle(b->multi, b->easy);
    if (b->easy) curl_easy_cleanup(b->easy);
    if (b->multi) curl_multi_cleanup(b->multi);
    curl_slist_free_all(b->headers);
    free(b->chunk);
    free(b->body);
    free(b);
}
