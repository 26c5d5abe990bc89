/* load_router: a load of streamed completions on an OpenAI-compatible URL (perseus-router, or a
 * perseus-fakeserve directly): at a fixed rate, to measure what the router adds to the time to
 * first token, or replaying a request trace, to measure SLO attainment end to end.
 *
 *   load_router --url http://127.0.0.1:PORT [--rate R] [--duration S] [--max-tokens N]
 *               [--prompt-bytes B] [--model NAME]
 *   load_router --url URL --trace FILE [--from S] [--duration S] [--time-scale X]
 *
 * With --trace (Azure's format, src/infer/trace.h), the requests are the trace's arrivals in
 * [from, from + duration) seconds, sent at their arrival time divided by the time scale, each a
 * prompt of 4 bytes per context token (so the router's estimate is the trace's count) asking for
 * the trace's generated tokens. The SLO attainment counts the requests whose TTFT and mean gap
 * between tokens, multiplied back by the time scale, are within DynamoLLM's default SLOs of their
 * input class (src/infer/classes.h); a failed request misses.
 *
 * Sends R requests a second for S seconds (request i at start + i / R), each a streamed
 * /v1/completions of a prompt of B bytes asking for N tokens, through one libcurl multi handle
 * (connections kept alive and reused), and waits for every answer (at most 60 s past the end).
 * A request succeeds when its status is 200 and its stream ends with "data: [DONE]". Its TTFT is
 * the time from its scheduled send to the first body bytes, its end-to-end time to the end of
 * the stream. Prints one JSON object: counts, TTFT and end-to-end percentiles (p50, p90, p99,
 * max; seconds), the rate achieved and this program's CPU time. Exit 0 when every request
 * succeeded, 1 otherwise, 2 on bad options. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "classes.h"
#include "trace.h"

#define MAX_REQUESTS 1000000
#define DRAIN_S 60.0

typedef struct req {
    CURL *easy;
    double offset_s; /* when to send, from the start */
    long prompt_tokens, max_tokens;
    double sched_s, first_s, end_s;
    int done_seen, ok;
    char tail[16]; /* the stream's last bytes */
    size_t tail_len;
} req;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    req *r = cls;
    size_t len = size * n;
    if (r->first_s == 0 && len > 0) r->first_s = now_s();
    /* keep the last bytes to see the stream's end */
    for (size_t i = 0; i < len; i++) {
        if (r->tail_len == sizeof r->tail) {
            memmove(r->tail, r->tail + 1, sizeof r->tail - 1);
            r->tail_len--;
        }
        r->tail[r->tail_len++] = data[i];
    }
    return len;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static json_t *percentiles(double *v, size_t n)
{
    if (n == 0) return json_null();
    qsort(v, n, sizeof *v, cmp);
    return json_pack("{s:f, s:f, s:f, s:f}", "p50", v[(n - 1) / 2], "p90", v[(n - 1) * 9 / 10],
                     "p99", v[(n - 1) * 99 / 100], "max", v[n - 1]);
}

/* The request's body: a prompt of 4 bytes per token. */
static char *body_of(const req *r, const char *model)
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
    return body;
}

static void start(CURLM *m, req *r, const char *url, const char *model)
{
    char *body = body_of(r, model);
    r->easy = curl_easy_init();
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS, body ? body : "");
    free(body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT, 120L);
    curl_multi_add_handle(m, r->easy);
}

static void finish(CURLM *m, CURLMsg *msg)
{
    req *r;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    long status = 0;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
    r->end_s = now_s();
    r->ok = msg->data.result == CURLE_OK && status == 200 && r->tail_len >= 14 &&
            memmem(r->tail, r->tail_len, "data: [DONE]", 12) != NULL;
    curl_multi_remove_handle(m, r->easy);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
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

static void report(const req *rs, long n, double start_s, double time_scale)
{
    double *ttft = calloc((size_t)n + 1, sizeof *ttft), *e2e = calloc((size_t)n + 1, sizeof *e2e);
    long ok = 0, met = 0;
    prs_infer_classes classes;
    prs_infer_classes_default(&classes);
    double last_sched = start_s;
    for (long i = 0; i < n && ttft && e2e; i++) {
        last_sched = rs[i].sched_s;
        met += met_slo(&rs[i], &classes, time_scale);
        if (!rs[i].ok) continue;
        ttft[ok] = rs[i].first_s - rs[i].sched_s;
        e2e[ok] = rs[i].end_s - rs[i].sched_s;
        ok++;
    }
    json_t *o = json_pack(
        "{s:I, s:I, s:I, s:f, s:o, s:o, s:f, s:f, s:f}", "sent", (json_int_t)n, "ok",
        (json_int_t)ok, "failed", (json_int_t)(n - ok), "achieved_rps",
        n > 1 && last_sched > start_s ? (double)(n - 1) / (last_sched - start_s) : 0.0, "ttft_s",
        percentiles(ttft, (size_t)ok), "e2e_s", percentiles(e2e, (size_t)ok), "time_scale",
        time_scale, "slo_attainment", n ? (double)met / (double)n : 0.0, "cpu_s", cpu_s());
    json_dumpf(o, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(o);
    free(ttft);
    free(e2e);
}

typedef struct args {
    const char *base, *model, *trace;
    double rate, duration, from_s, time_scale;
    long max_tokens, prompt_bytes;
} args;

static int parse(int argc, char **argv, args *a)
{
    static const struct option opts[] = {
        {"url", 1, NULL, 'u'},          {"rate", 1, NULL, 'r'},
        {"duration", 1, NULL, 'd'},     {"max-tokens", 1, NULL, 'n'},
        {"prompt-bytes", 1, NULL, 'b'}, {"model", 1, NULL, 'm'},
        {"trace", 1, NULL, 't'},        {"from", 1, NULL, 'f'},
        {"time-scale", 1, NULL, 's'},   {NULL, 0, NULL, 0}};
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
        default:
            return 2;
        }
    }
    if (a->base == NULL || !(a->rate > 0) || !(a->duration > 0) || !(a->time_scale > 0) ||
        a->max_tokens < 1 || a->prompt_bytes < 4 || a->prompt_bytes > 1000000) {
        fprintf(stderr, "usage: load_router --url URL [--rate R] [--duration S] [--max-tokens N] "
                        "[--prompt-bytes B] | [--trace FILE --from S --time-scale X]\n");
        return 2;
    }
    return 0;
}

/* The requests to send: the trace's window, or a fixed rate. NULL on failure (message said). */
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

int main(int argc, char **argv)
{
    args a = {.model = "llama2-70b",
              .rate = 100,
              .duration = 5,
              .time_scale = 1,
              .max_tokens = 8,
              .prompt_bytes = 64};
    if (parse(argc, argv, &a) != 0) return 2;
    long total = 0;
    req *rs = plan(&a, &total);
    if (rs == NULL) {
        fprintf(stderr, "load_router: no requests to send (at most %d)\n", MAX_REQUESTS);
        return 2;
    }
    char url[1024];
    snprintf(url, sizeof url, "%s/v1/completions", a.base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    double start_s = now_s(), last_offset = rs[total - 1].offset_s;
    long sent = 0;
    int running = 0;
    while (sent < total || running > 0) {
        double t = now_s();
        while (sent < total && t >= start_s + rs[sent].offset_s) {
            rs[sent].sched_s = start_s + rs[sent].offset_s;
            start(m, &rs[sent], url, a.model);
            sent++;
        }
        if (t > start_s + last_offset + DRAIN_S) break;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE) finish(m, msg);
        double next = sent < total ? start_s + rs[sent].offset_s - now_s() : 0.05;
        int wait_ms = next > 0 ? (int)(next * 1000) : 0;
        curl_multi_poll(m, NULL, 0, wait_ms > 50 ? 50 : wait_ms, NULL);
    }
    for (long i = 0; i < sent; i++)
        if (rs[i].easy) {
            curl_multi_remove_handle(m, rs[i].easy);
            curl_easy_cleanup(rs[i].easy);
        }
    report(rs, sent, start_s, a.time_scale);
    long failed = 0;
    for (long i = 0; i < sent; i++)
        failed += !rs[i].ok;
    curl_multi_cleanup(m);
    curl_global_cleanup();
    free(rs);
    return failed ? 1 : 0;
}
