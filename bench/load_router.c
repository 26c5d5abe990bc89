/* load_router: a fixed-rate load of streamed completions on an OpenAI-compatible URL (perseus-
 * router, or a perseus-fakeserve directly), to measure what the router adds to the time to first
 * token.
 *
 *   load_router --url http://127.0.0.1:PORT [--rate R] [--duration S] [--max-tokens N]
 *               [--prompt-bytes B] [--model NAME]
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

#define MAX_REQUESTS 1000000
#define DRAIN_S 60.0

typedef struct req {
    CURL *easy;
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

static void start(CURLM *m, req *r, const char *url, const char *body)
{
    r->easy = curl_easy_init();
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, body);
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

static void report(const req *rs, long n, double rate, double start_s)
{
    double *ttft = calloc((size_t)n + 1, sizeof *ttft), *e2e = calloc((size_t)n + 1, sizeof *e2e);
    long ok = 0;
    double last_sched = start_s;
    for (long i = 0; i < n && ttft && e2e; i++) {
        last_sched = rs[i].sched_s;
        if (!rs[i].ok) continue;
        ttft[ok] = rs[i].first_s - rs[i].sched_s;
        e2e[ok] = rs[i].end_s - rs[i].sched_s;
        ok++;
    }
    json_t *o = json_pack("{s:f, s:I, s:I, s:I, s:f, s:o, s:o, s:f}", "rate_rps", rate, "sent",
                          (json_int_t)n, "ok", (json_int_t)ok, "failed", (json_int_t)(n - ok),
                          "achieved_rps", n > 1 ? (double)(n - 1) / (last_sched - start_s) : 0.0,
                          "ttft_s", percentiles(ttft, (size_t)ok), "e2e_s",
                          percentiles(e2e, (size_t)ok), "cpu_s", cpu_s());
    json_dumpf(o, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(o);
    free(ttft);
    free(e2e);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", 1, NULL, 'u'},
                                         {"rate", 1, NULL, 'r'},
                                         {"duration", 1, NULL, 'd'},
                                         {"max-tokens", 1, NULL, 'n'},
                                         {"prompt-bytes", 1, NULL, 'b'},
                                         {"model", 1, NULL, 'm'},
                                         {NULL, 0, NULL, 0}};
    const char *base = NULL, *model = "llama2-70b";
    double rate = 100, duration = 5;
    long max_tokens = 8, prompt_bytes = 64;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            base = optarg;
            break;
        case 'r':
            rate = strtod(optarg, NULL);
            break;
        case 'd':
            duration = strtod(optarg, NULL);
            break;
        case 'n':
            max_tokens = strtol(optarg, NULL, 10);
            break;
        case 'b':
            prompt_bytes = strtol(optarg, NULL, 10);
            break;
        case 'm':
            model = optarg;
            break;
        default:
            return 2;
        }
    }
    long total = (long)(rate * duration);
    if (base == NULL || !(rate > 0) || total < 1 || total > MAX_REQUESTS || max_tokens < 1 ||
        prompt_bytes < 1 || prompt_bytes > 1000000) {
        fprintf(stderr,
                "usage: load_router --url URL [--rate R] [--duration S] [--max-tokens N] "
                "[--prompt-bytes B] (at most %d requests)\n",
                MAX_REQUESTS);
        return 2;
    }
    char url[1024];
    snprintf(url, sizeof url, "%s/v1/completions", base);
    char *prompt = malloc((size_t)prompt_bytes + 1);
    memset(prompt, 'a', (size_t)prompt_bytes);
    prompt[prompt_bytes] = '\0';
    json_t *b = json_pack("{s:s, s:s, s:I, s:b}", "model", model, "prompt", prompt, "max_tokens",
                          (json_int_t)max_tokens, "stream", 1);
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    free(prompt);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    req *rs = calloc((size_t)total, sizeof *rs);
    double start_s = now_s();
    long sent = 0;
    int running = 0;
    while (sent < total || running > 0) {
        double t = now_s();
        while (sent < total && t >= start_s + (double)sent / rate) {
            rs[sent].sched_s = start_s + (double)sent / rate;
            start(m, &rs[sent], url, body);
            sent++;
        }
        if (t > start_s + duration + DRAIN_S) break;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE) finish(m, msg);
        double next = sent < total ? start_s + (double)sent / rate - now_s() : 0.05;
        int wait_ms = next > 0 ? (int)(next * 1000) : 0;
        curl_multi_poll(m, NULL, 0, wait_ms > 50 ? 50 : wait_ms, NULL);
    }
    for (long i = 0; i < sent; i++)
        if (rs[i].easy) {
            curl_multi_remove_handle(m, rs[i].easy);
            curl_easy_cleanup(rs[i].easy);
        }
    report(rs, sent, rate, start_s);
    long failed = 0;
    for (long i = 0; i < sent; i++)
        failed += !rs[i].ok;
    curl_multi_cleanup(m);
    curl_global_cleanup();
    free(rs);
    free(body);
    return failed ? 1 : 0;
}
