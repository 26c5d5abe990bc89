/* infer_kill_client: the clients of tests/cli/infer_kill.sh, in one process. Keeps --concurrency
 * requests in flight on an OpenAI-compatible URL (perseus-router), each a completion or a chat,
 * streamed or not, of a short or a long prompt, drawn from --seed, each on its own connection and
 * with a deadline (--deadline-s), until --stop-file exists (or --requests were sent); then lets
 * those in flight end and exits 0. Every request ends as one line of --out:
 *
 *   START END STREAM CHAT LONG MAX_TOKENS CURL_CODE HTTP_STATUS VERDICT
 *
 * (START and END wall-clock seconds, the shell's $EPOCHREALTIME), VERDICT one of
 *   ok     a 200 answer, whole: a stream of MAX_TOKENS token events ending in "data: [DONE]", or
 *          a JSON object whose usage.completion_tokens is MAX_TOKENS;
 *   clean  a transfer error (could not connect, nothing or part received, connection broken), or
 *          an OpenAI-shaped 502/503 error;
 *   hang   the deadline passed;
 *   half   a 200 answer curl took as complete that is not whole;
 *   other  anything else.
 * A request that could not connect holds its slot 200 ms (the server is down: a client's back-off).
 * One program instead of a curl process per request: starting curl costs tens of milliseconds of
 * CPU, which a busy 2-core machine running the services under test cannot spare. */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../rng.h"

#define MAX_SLOTS 64
#define BODY_MAX (1u << 20)
#define LONG_PROMPT_WORDS 1000 /* "word " x 1000: about 1,250 tokens, input class L */
#define BACKOFF_S 0.2

typedef struct opts {
    const char *url, *out, *stop_file;
    unsigned long long seed;
    int concurrency;
    long deadline_s, requests; /* requests: how many to send at most (0: until the stop file) */
} opts;

typedef struct slot {
    CURL *easy;
    struct curl_slist *headers;
    char *req_body, *body;
    size_t len;
    int stream, chat, lng, busy;
    long max_tokens;
    double start, not_before;
} slot;

static uint64_t rng_state;
static unsigned rnd(unsigned n) /* uniform in [0, n) */
{
    return (unsigned)(prs_test_rng_next(&rng_state) % n);
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    slot *s = cls;
    size_t k = size * n;
    if (s->len + k > BODY_MAX) return 0; /* fails the transfer: "other" */
    char *b = realloc(s->body, s->len + k + 1);
    if (b == NULL) return 0;
    memcpy(b + s->len, data, k);
    s->body = b;
    s->len += k;
    b[s->len] = '\0';
    return k;
}

/* A stream of exactly want token events whose last data line is [DONE]. */
static int whole_stream(const char *body, long want)
{
    long events = 0;
    const char *last = NULL;
    for (const char *p = body ? body : ""; *p;) {
        if (strncmp(p, "data: {", 7) == 0) events++;
        if (strncmp(p, "data:", 5) == 0) last = p;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : p + strlen(p);
    }
    return events == want && last && strncmp(last, "data: [DONE]\n", 13) == 0;
}

/* A JSON object with usage.completion_tokens == want (and, for errors, an "error" object). */
static int json_has(const char *body, const char *what, long want)
{
    json_t *o = json_loads(body ? body : "", 0, NULL);
    int ok = 0;
    if (strcmp(what, "error") == 0)
        ok = json_is_object(json_object_get(o, "error"));
    else
        ok = json_integer_value(
                 json_object_get(json_object_get(o, "usage"), "completion_tokens")) == want;
    json_decref(o);
    return ok;
}

static const char *verdict(const slot *s, CURLcode rc, long status)
{
    if (rc == CURLE_OK && status == 200) {
        int whole = s->stream ? whole_stream(s->body, s->max_tokens)
                              : json_has(s->body, "usage", s->max_tokens);
        return whole ? "ok" : "half";
    }
    if (rc == CURLE_OK && (status == 502 || status == 503))
        return json_has(s->body, "error", 0) ? "clean" : "other";
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_PARTIAL_FILE || rc == CURLE_GOT_NOTHING ||
        rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR)
        return "clean";
    return rc == CURLE_OPERATION_TIMEDOUT ? "hang" : "other";
}

/* The next request of slot s, drawn at random, added to the multi handle. */
static int launch(CURLM *m, slot *s, const opts *o, const char *long_prompt)
{
    s->stream = (int)rnd(2);
    s->chat = rnd(3) == 0;
    s->lng = rnd(4) == 0;
    s->max_tokens = s->stream ? 8 + (long)rnd(100) : 4 + (long)rnd(40);
    char prompt[64], url[512];
    snprintf(prompt, sizeof prompt, "Say something %u", rnd(32768));
    json_t *rq = json_pack("{s:s, s:I, s:b}", "model", "llama2-70b", "max_tokens",
                           (json_int_t)s->max_tokens, "stream", s->stream);
    const char *text = s->lng ? long_prompt : prompt;
    if (s->chat)
        json_object_set_new(rq, "messages",
                            json_pack("[{s:s, s:s}]", "role", "user", "content", text));
    else
        json_object_set_new(rq, "prompt", json_string(text));
    free(s->req_body);
    s->req_body = json_dumps(rq, JSON_COMPACT);
    json_decref(rq);
    if (s->req_body == NULL) return -1;
    snprintf(url, sizeof url, "%s%s", o->url, s->chat ? "/v1/chat/completions" : "/v1/completions");
    s->len = 0;
    if (s->body) s->body[0] = '\0';
    curl_easy_reset(s->easy);
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->req_body);
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT, o->deadline_s);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 1L); /* a connection per request */
    curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 1L);
    s->start = wall_s();
    s->busy = 1;
    return curl_multi_add_handle(m, s->easy) == CURLM_OK ? 0 : -1;
}

/* Record every finished transfer; returns how many finished. */
static int collect(CURLM *m, FILE *out)
{
    int left, n = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) continue;
        slot *s = NULL;
        long status = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        CURLcode rc = msg->data.result;
        double end = wall_s();
        fprintf(out, "%.6f %.6f %d %d %d %ld %d %03ld %s\n", s->start, end, s->stream, s->chat,
                s->lng, s->max_tokens, (int)rc, status, verdict(s, rc, status));
        fflush(out);
        curl_multi_remove_handle(m, s->easy);
        s->busy = 0;
        s->not_before = rc == CURLE_COULDNT_CONNECT ? end + BACKOFF_S : 0;
        n++;
    }
    return n;
}

static int run(const opts *o, FILE *out)
{
    static slot slots[MAX_SLOTS];
    char *long_prompt = malloc(LONG_PROMPT_WORDS * 5 + 1);
    CURLM *m = curl_multi_init();
    if (long_prompt == NULL || m == NULL) return 1;
    for (int i = 0; i < LONG_PROMPT_WORDS; i++)
        memcpy(long_prompt + 5 * i, "word ", 5);
    long_prompt[LONG_PROMPT_WORDS * 5] = '\0';
    for (int i = 0; i < o->concurrency; i++) {
        slots[i].easy = curl_easy_init();
        slots[i].headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (slots[i].easy == NULL || slots[i].headers == NULL) return 1;
    }
    int stopping = 0, busy = 0;
    long sent = 0;
    while (!stopping || busy > 0) {
        stopping =
            stopping || access(o->stop_file, F_OK) == 0 || (o->requests > 0 && sent == o->requests);
        double now = wall_s();
        for (int i = 0; !stopping && i < o->concurrency; i++)
            if (!slots[i].busy && now >= slots[i].not_before &&
                (o->requests == 0 || sent < o->requests)) {
                if (launch(m, &slots[i], o, long_prompt) != 0) return 1;
                busy++;
                sent++;
            }
        int running;
        curl_multi_perform(m, &running);
        busy -= collect(m, out);
        curl_multi_poll(m, NULL, 0, 20, NULL);
    }
    for (int i = 0; i < o->concurrency; i++) {
        curl_easy_cleanup(slots[i].easy);
        curl_slist_free_all(slots[i].headers);
        free(slots[i].req_body);
        free(slots[i].body);
    }
    curl_multi_cleanup(m);
    free(long_prompt);
    return 0;
}

/* A whole number in [lo, hi] for option opt, or exit 2 naming it. */
static long number(const char *opt, const char *arg, long lo, long hi)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "infer_kill_client: --%s: want a whole number from %ld to %ld, got '%s'\n",
                opt, lo, hi, arg);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"url", 1, NULL, 'u'},         {"out", 1, NULL, 'o'},
        {"stop-file", 1, NULL, 's'},   {"seed", 1, NULL, 'S'},
        {"concurrency", 1, NULL, 'c'}, {"deadline-s", 1, NULL, 'd'},
        {"requests", 1, NULL, 'n'},    {NULL, 0, NULL, 0}};
    opts o = {.concurrency = 4, .deadline_s = 20};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            o.url = optarg;
            break;
        case 'o':
            o.out = optarg;
            break;
        case 's':
            o.stop_file = optarg;
            break;
        case 'S':
            o.seed = (unsigned long long)number("seed", optarg, 0, 2147483647L);
            break;
        case 'c':
            o.concurrency = (int)number("concurrency", optarg, 1, MAX_SLOTS);
            break;
        case 'd':
            o.deadline_s = number("deadline-s", optarg, 1, 3600);
            break;
        case 'n':
            o.requests = number("requests", optarg, 0, 1000000000L);
            break;
        default:
            return 2; /* getopt named the option */
        }
    }
    if (!o.url || !o.out || !o.stop_file || optind < argc) {
        fprintf(stderr,
                "usage: infer_kill_client --url URL --out FILE --stop-file FILE [--seed N] "
                "[--concurrency 1-%d] [--deadline-s S] [--requests N]\n",
                MAX_SLOTS);
        return 2;
    }
    rng_state = o.seed;
    FILE *out = fopen(o.out, "a");
    if (out == NULL) {
        fprintf(stderr, "infer_kill_client: %s: cannot open\n", o.out);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = run(&o, out);
    curl_global_cleanup();
    return fclose(out) != 0 || rc;
}
