/* The replay of perseus demo --inference (demo_infer.h): one libcurl multi handle sends each
 * request of the trace, a streamed /v1/completions with a prompt of 4 bytes per context token
 * (the router's estimate gives the trace's count back) asking for the trace's generated tokens,
 * at its arrival divided by the time scale. Each write of the stream that carries server-sent
 * "data:" events (not "[DONE]") is an event: the first gives the TTFT from the scheduled send,
 * the next ones the gaps between tokens. Times are kept in model seconds (real seconds times the
 * time scale). A request meets its SLO when it ends with "data: [DONE]", its TTFT is within its
 * input class's TTFT SLO and its mean gap within the TBT SLO, as the emulator counts. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_infer.h"

typedef struct req {
    CURL *easy;
    int pool, in_class;
    long prompt_tokens, max_tokens, events;
    double sched_s, first_s, last_s;
    int ok;
    char tail[16];
    size_t tail_len;
    demo_run *run;
    double scale;
} req;

static int push(demo_stats *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double demo_quantile(demo_stats *s, double q)
{
    if (s->n == 0) return NAN;
    qsort(s->v, s->n, sizeof *s->v, cmp);
    size_t i = (size_t)ceil(q * (double)s->n);
    return s->v[i > 0 ? i - 1 : 0];
}

/* Events in data[len]: "data:" at a line start, other than "data: [DONE]". */
static long count_events(const char *data, size_t len)
{
    long k = 0;
    for (const char *p = data, *end = data + len; p && p < end;) {
        const char *q = memmem(p, (size_t)(end - p), "data:", 5);
        if (!q) break;
        if ((q == data || q[-1] == '\n') &&
            !((size_t)(end - q) >= 12 && memcmp(q, "data: [DONE]", 12) == 0))
            k++;
        p = q + 5;
    }
    return k;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    req *r = cls;
    size_t len = size * n;
    long ev = count_events(data, len);
    if (ev > 0) {
        double t = demo_now();
        demo_pool_stats *ps = &r->run->pool[r->pool];
        if (r->events == 0) {
            r->first_s = t;
            push(&ps->ttft, (t - r->sched_s) * r->scale);
        } else {
            push(&ps->tbt, (t - r->last_s) * r->scale);
        }
        r->last_s = t;
        r->events += ev;
    }
    for (size_t i = 0; i < len; i++) {
        if (r->tail_len == sizeof r->tail) {
            memmove(r->tail, r->tail + 1, sizeof r->tail - 1);
            r->tail_len--;
        }
        r->tail[r->tail_len++] = data[i];
    }
    return len;
}

static int start(CURLM *m, req *r, const char *url, const char *model)
{
    size_t bytes = (size_t)r->prompt_tokens * 4;
    char *prompt = malloc(bytes + 1);
    if (!prompt) return -1;
    memset(prompt, 'a', bytes);
    prompt[bytes] = '\0';
    json_t *b = json_pack("{s:s, s:s, s:I, s:b}", "model", model, "prompt", prompt, "max_tokens",
                          (json_int_t)r->max_tokens, "stream", 1);
    free(prompt);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    r->easy = curl_easy_init();
    if (!body || !r->easy) {
        free(body);
        return -1;
    }
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS, body);
    free(body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT, 300L);
    curl_multi_add_handle(m, r->easy);
    return 0;
}

static void finish(CURLM *m, CURLMsg *msg, const prs_infer_classes *c)
{
    req *r;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    long status = 0;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
    r->ok = msg->data.result == CURLE_OK && status == 200 &&
            memmem(r->tail, r->tail_len, "data: [DONE]", 12) != NULL;
    demo_pool_stats *ps = &r->run->pool[r->pool];
    if (r->ok) {
        ps->ok++;
        double ttft = (r->first_s - r->sched_s) * r->scale;
        double gap =
            r->events > 1 ? (r->last_s - r->first_s) * r->scale / (double)(r->events - 1) : 0;
        ps->met += ttft <= c->ttft_slo_s[r->in_class] && gap <= c->tbt_slo_s;
    }
    curl_multi_remove_handle(m, r->easy);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
}

/* Send what is due, let curl work, collect what ended. Returns the requests still running. */
static int pump(CURLM *m, req *rs, size_t n, size_t *next, double t0, const char *url,
                const char *model, const prs_infer_classes *c)
{
    double now = demo_now();
    while (*next < n && rs[*next].sched_s <= now) {
        rs[*next].run->pool[rs[*next].pool].sent++;
        if (start(m, &rs[*next], url, model) != 0) return -1;
        ++*next;
    }
    int running = 0, left;
    curl_multi_perform(m, &running);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE) finish(m, msg, c);
    double wait_s = *next < n ? rs[*next].sched_s - demo_now() : 0.05;
    int ms = (int)fmin(50, fmax(0, wait_s * 1000));
    curl_multi_poll(m, NULL, 0, ms, NULL);
    (void)t0;
    return running;
}

int demo_replay(const char *url, const char *model, const prs_infer_trace *trace, double time_scale,
                const prs_infer_classes *classes, const int *pool_of_class, demo_run *out)
{
    memset(out, 0, sizeof *out);
    char endpoint[600];
    snprintf(endpoint, sizeof endpoint, "%s/v1/completions", url);
    req *rs = calloc(trace->n + 1, sizeof *rs);
    CURLM *m = curl_multi_init();
    if (!rs || !m) {
        free(rs);
        if (m) curl_multi_cleanup(m);
        fprintf(stderr, DEMO_CMD ": out of memory\n");
        return -1;
    }
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    double t0 = demo_now() + 0.05;
    for (size_t i = 0; i < trace->n; i++) {
        const prs_infer_req *q = &trace->reqs[i];
        req *r = &rs[i];
        int k = prs_infer_class_of(classes, q->in_tokens, q->out_tokens);
        r->pool = pool_of_class[k];
        r->in_class = k / 3;
        r->prompt_tokens = q->in_tokens;
        r->max_tokens = q->out_tokens;
        r->sched_s = t0 + q->arrival_s / time_scale;
        r->run = out;
        r->scale = time_scale;
    }
    size_t next = 0;
    int rc = 0, running = 1;
    while (!prs_demo_stop && (next < trace->n || running > 0)) {
        running = pump(m, rs, trace->n, &next, t0, endpoint, model, classes);
        if (running < 0) {
            fprintf(stderr, DEMO_CMD ": out of memory\n");
            rc = -1;
            break;
        }
    }
    if (prs_demo_stop) rc = -1;
    for (size_t i = 0; i < next; i++)
        if (rs[i].easy) {
            curl_multi_remove_handle(m, rs[i].easy);
            curl_easy_cleanup(rs[i].easy);
        }
    curl_multi_cleanup(m);
    free(rs);
    out->wall_s = demo_now() - t0;
    return rc;
}

void demo_run_free(demo_run *r)
{
    for (int p = 0; p < DEMO_NPOOLS; p++) {
        free(r->pool[p].ttft.v);
        free(r->pool[p].tbt.v);
    }
    memset(r, 0, sizeof *r);
}
