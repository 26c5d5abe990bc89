/* The router's load reports (load_report.h). One thread sleeps a period on a condition variable
 * (so stopping wakes it at once), takes the class counters, and posts their rates since its last
 * report with libcurl. A failed report is logged on stderr (once until one succeeds again) and
 * retried at the next period with the rates since the last report that got through, so no
 * request is dropped from the load perseusd sees. */
#define _POSIX_C_SOURCE 200809L
#include "load_report.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct prs_load_reporter {
    prs_router_report cfg;
    prs_class_counts_fn counts;
    void *ctx;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, logged_failure;
    unsigned long ok, unplannable, failed;
};

int prs__load_report_body(const unsigned long *prev, const unsigned long *now, double elapsed_s,
                          double scale, char *buf, size_t n)
{
    size_t off = 0;
    int k = snprintf(buf, n, "{\"rates_rps\": {");
    if (k < 0 || (size_t)k >= n) return -1;
    off = (size_t)k;
    for (int c = 0; c < PRS_INFER_NCLASS; c++) {
        double d = now[c] >= prev[c] ? (double)(now[c] - prev[c]) : 0;
        double rate = elapsed_s > 0 ? d / elapsed_s / scale : 0;
        if (rate > 1e6) rate = 1e6; /* the API's bound */
        k = snprintf(buf + off, n - off, "%s\"%s\": %.6g", c ? ", " : "", prs_infer_class_name(c),
                     rate);
        if (k < 0 || (size_t)k >= n - off) return -1;
        off += (size_t)k;
    }
    k = snprintf(buf + off, n - off, "}}");
    if (k < 0 || (size_t)k >= n - off) return -1;
    return (int)(off + (size_t)k);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data;
    (void)cls;
    return size * n;
}

/* Abandons a transfer once the reporter is stopping. */
static int on_progress(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    prs_load_reporter *l = cls;
    pthread_mutex_lock(&l->mu);
    int stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

/* POST body; the HTTP status (0 when perseusd could not be reached), curl's message in why. */
static long post(prs_load_reporter *l, const char *body, char *why, size_t nwhy)
{
    char url[PRS_ROUTER_URL_MAX + 128], auth[300];
    size_t ul = strlen(l->cfg.url);
    snprintf(url, sizeof url, "%.*s/v1/clusters/%s/loads",
             (int)(ul > 0 && l->cfg.url[ul - 1] == '/' ? ul - 1 : ul), l->cfg.url, l->cfg.cluster);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", l->cfg.token);
    CURL *c = curl_easy_init();
    if (c == NULL) return snprintf(why, nwhy, "out of memory"), 0;
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, l);
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(why, nwhy, "%s", curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

/* Wait one period or until stopped; 1 when stopped. */
static int wait_period(prs_load_reporter *l)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + l->cfg.period_s;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&l->mu);
    while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0) {
    }
    int stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

static void *run(void *arg)
{
    prs_load_reporter *l = arg;
    unsigned long prev[PRS_INFER_NCLASS], now[PRS_INFER_NCLASS];
    l->counts(l->ctx, prev);
    double prev_s = mono_s();
    while (!wait_period(l)) {
        l->counts(l->ctx, now);
        double t = mono_s();
        char body[512], why[CURL_ERROR_SIZE] = "";
        if (prs__load_report_body(prev, now, t - prev_s, l->cfg.rate_scale, body, sizeof body) < 0)
            continue;
        long status = post(l, body, why, sizeof why);
        /* 422: perseusd took the load but cannot plan it within the budget: delivered */
        int good = (status >= 200 && status < 300) || status == 422;
        pthread_mutex_lock(&l->mu);
        status == 422 ? l->unplannable++ : good ? l->ok++ : l->failed++;
        int log = !good && !l->logged_failure && !l->stop;
        l->logged_failure = !good;
        pthread_mutex_unlock(&l->mu);
        if (log && status)
            fprintf(stderr, "perseus-router: load report to %s: HTTP %ld\n", l->cfg.url, status);
        else if (log)
            fprintf(stderr, "perseus-router: load report to %s: %s\n", l->cfg.url, why);
        if (good) {
            memcpy(prev, now, sizeof prev);
            prev_s = t;
        }
    }
    return NULL;
}

int prs__load_reporter_start(const prs_router_report *cfg, prs_class_counts_fn counts, void *ctx,
                             prs_load_reporter **out, prs_error *err)
{
    prs_load_reporter *l = calloc(1, sizeof *l);
    if (l == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    l->cfg = *cfg;
    l->counts = counts;
    l->ctx = ctx;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->th, NULL, run, l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return prs_error_set(err, PRS_ENOMEM, "cannot start the load reporter");
    }
    *out = l;
    return 0;
}

void prs__load_reporter_counts(prs_load_reporter *l, unsigned long *ok, unsigned long *unplannable,
                               unsigned long *failed)
{
    pthread_mutex_lock(&l->mu);
    *ok = l->ok;
    *unplannable = l->unplannable;
    *failed = l->failed;
    pthread_mutex_unlock(&l->mu);
}

void prs__load_reporter_stop(prs_load_reporter *l)
{
    if (l == NULL) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->th, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
