/* perseus-fakeserve: a fake LLM serving instance for trying the router and the clock controller
 * without GPUs. It speaks the OpenAI completions and chat completions API (streamed as
 * server-sent events, or whole), generates placeholder tokens at the pace of the inference cost
 * model for its batch and its GPU's clock (fake_engine.h), and exports vLLM's Prometheus metric
 * names on /metrics, so tools written against vLLM read it unchanged. docs/router.md. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fake_engine.h"
#include "cmdline.h"
#include "httpd.h"
#include "oai_request.h"
#include "prom.h"

#define BODY_MAX_BYTES (4u << 20)
#define TOKEN_TEXT " tok"

typedef struct app {
    prs_fake_engine *engine;
    const char *served_name;
    long default_max_tokens;
    int garbage; /* answer every completion with a non-JSON body (to test the router) */
    unsigned long next_id;
} app;

typedef struct conn {
    prs_httpd_body body;
} conn;

typedef struct stream {
    app *a;
    prs_fake_seq *seq;
    prs_oai_kind kind;
    char id[64];
    long sent;
    int finished;
    char *pending;
    size_t pending_len, pending_off;
} stream;

/* Set by main on SIGINT or SIGTERM, read by the connection threads (their streams end). */
static atomic_int stop_flag;

static json_t *choice(prs_oai_kind kind, long tokens, int last, int delta)
{
    size_t unit = sizeof TOKEN_TEXT - 1;
    char *buf = malloc((size_t)tokens * unit + 1);
    if (buf == NULL) return NULL;
    for (long i = 0; i < tokens; i++)
        memcpy(buf + (size_t)i * unit, TOKEN_TEXT, unit);
    buf[(size_t)tokens * unit] = '\0';
    json_t *text = json_string(buf);
    free(buf);
    json_t *finish = last ? json_string("length") : json_null();
    if (kind == PRS_OAI_COMPLETIONS)
        return json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "text", text, "logprobs",
                         "finish_reason", finish);
    json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content", text);
    return json_pack("{s:i, s:o, s:n, s:o}", "index", 0, delta ? "delta" : "message", msg,
                     "logprobs", "finish_reason", finish);
}

static char *chunk_text(const stream *s, int last)
{
    const char *object = s->kind == PRS_OAI_CHAT ? "chat.completion.chunk" : "text_completion";
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", s->id, "object", object, "created",
                          (json_int_t)time(NULL), "model", s->a->served_name, "choices",
                          choice(s->kind, 1, last, 1));
    char *j = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (j == NULL) return NULL;
    size_t n = strlen(j) + 16 + (last ? 16 : 0);
    char *out = malloc(n);
    if (out) snprintf(out, n, "data: %s\n\n%s", j, last ? "data: [DONE]\n\n" : "");
    free(j);
    return out;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *s = cls;
    while (s->pending == NULL) {
        if (s->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        int done;
        long n = prs__fake_wait(s->a->engine, s->seq, s->sent, 1.0, &done);
        if (stop_flag) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n > s->sent) {
            s->sent++;
            int last = done && s->sent == n;
            s->finished = last;
            s->pending = chunk_text(s, last);
            s->pending_len = s->pending ? strlen(s->pending) : 0;
            s->pending_off = 0;
            if (s->pending == NULL) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t k = s->pending_len - s->pending_off;
    if (k > max) k = max;
    memcpy(buf, s->pending + s->pending_off, k);
    s->pending_off += k;
    if (s->pending_off == s->pending_len) {
        free(s->pending);
        s->pending = NULL;
    }
    return (ssize_t)k;
}

static void stream_free(void *cls)
{
    stream *s = cls;
    prs__fake_release(s->a->engine, s->seq);
    free(s->pending);
    free(s);
}

/* Whether the client of c went away (its socket at end of file, reset or broken). Bytes waiting
 * to be read (a pipelined request) are not a departure. */
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return 1;
    char byte;
    ssize_t n = recv(ci->connect_fd, &byte, 1, MSG_PEEK);
    return n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* A whole (not streamed) answer once every token is generated. A client that leaves before
 * drops its request from the batch, as vLLM aborts the request of a disconnected client: a
 * router that dies leaves nothing running here. */
static enum MHD_Result answer_whole(struct MHD_Connection *c, stream *s, const prs_oai_request *rq)
{
    int done = 0;
    long n = 0;
    while (!done && !stop_flag) {
        n = prs__fake_wait(s->a->engine, s->seq, n, 0.1, &done);
        if (!done && client_gone(c)) {
            stream_free(s);
            return MHD_NO; /* closes the connection */
        }
    }
    const char *object = s->kind == PRS_OAI_CHAT ? "chat.completion" : "text_completion";
    json_t *v = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:{s:I, s:I, s:I}}", "id", s->id, "object",
                          object, "created", (json_int_t)time(NULL), "model", s->a->served_name,
                          "choices", choice(s->kind, n, 1, 0), "usage", "prompt_tokens",
                          (json_int_t)rq->prompt_tokens, "completion_tokens", (json_int_t)n,
                          "total_tokens", (json_int_t)rq->prompt_tokens + (json_int_t)n);
    char *body = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    stream_free(s);
    if (body == NULL)
        return prs__httpd_send_oai_error(c, 500, "server_error", NULL, NULL, "out of memory");
    enum MHD_Result r = prs__httpd_send(c, 200, "application/json", body, strlen(body));
    free(body);
    return r;
}

static enum MHD_Result complete(app *a, struct MHD_Connection *c, prs_oai_kind kind,
                                const prs_httpd_body *b)
{
    prs_oai_request rq;
    prs_error err = {0};
    const char *param;
    if (prs__oai_parse(kind, b->data ? b->data : "", b->len, &rq, &param, &err) != 0)
        return prs__httpd_send_oai_error(c, 400, "invalid_request_error", param, NULL, err.msg);
    if (strcmp(rq.model, a->served_name) != 0) {
        char msg[PRS_OAI_MODEL_MAX + 64];
        snprintf(msg, sizeof msg, "The model '%s' does not exist.", rq.model);
        return prs__httpd_send_oai_error(c, 404, "invalid_request_error", "model",
                                         "model_not_found", msg);
    }
    if (a->garbage) return prs__httpd_send(c, 200, "application/json", "<html>garbage", 13);
    stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return prs__httpd_send_oai_error(c, 500, "server_error", NULL, NULL, "out of memory");
    s->a = a;
    s->kind = kind;
    snprintf(s->id, sizeof s->id, "%s-%lu", kind == PRS_OAI_CHAT ? "chatcmpl" : "cmpl",
             __atomic_add_fetch(&a->next_id, 1, __ATOMIC_RELAXED));
    long out = rq.max_tokens > 0 ? rq.max_tokens : a->default_max_tokens;
    int rc = prs__fake_submit(a->engine, rq.prompt_tokens, out, &s->seq, &err);
    if (rc != 0) {
        free(s);
        return prs__httpd_send_oai_error(
            c, rc == PRS_ERANGE ? 503 : 400,
            rc == PRS_ERANGE ? "server_error" : "invalid_request_error", NULL, NULL, err.msg);
    }
    if (!rq.stream) return answer_whole(c, s, &rq);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (r == NULL) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void gauge(prs_prom_buf *b, const char *name, const char *type, const char *help,
                  const char *labels, double v)
{
    prs__prom_header(b, name, type, help);
    prs__prom_printf(b, "%s{%s} %.9g\n", name, labels, v);
}

static enum MHD_Result metrics(app *a, struct MHD_Connection *c)
{
    prs_fake_stats st;
    prs__fake_stats(a->engine, &st);
    prs_prom_buf b = {0};
    char labels[PRS_OAI_MODEL_MAX * 2 + 32];
    prs_prom_buf lb = {0};
    prs__prom_printf(&lb, "model_name=\"");
    prs__prom_label_value(&lb, a->served_name);
    prs__prom_printf(&lb, "\"");
    snprintf(labels, sizeof labels, "%s", lb.failed ? "" : lb.text);
    free(lb.text);
    gauge(&b, "vllm:num_requests_running", "gauge", "Number of requests currently running on GPU.",
          labels, st.running);
    gauge(&b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
          labels, st.waiting);
    gauge(&b, "vllm:gpu_cache_usage_perc", "gauge",
          "GPU KV-cache usage. 1 means 100 percent usage.", labels, st.kv_usage);
    gauge(&b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", labels,
          (double)st.prompt_tokens);
    gauge(&b, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
          labels, (double)st.generation_tokens);
    prs__prom_header(&b, "vllm:request_success_total", "counter",
                     "Count of successfully processed requests.");
    prs__prom_printf(&b, "vllm:request_success_total{finished_reason=\"length\",%s} %lu\n", labels,
                     st.finished);
    prs__prom_header(&b, "vllm:time_to_first_token_seconds", "histogram",
                     "Histogram of time to first token in seconds (model time).");
    prs__prom_hist_write(&b, "vllm:time_to_first_token_seconds", labels, &st.ttft);
    prs__prom_header(&b, "vllm:time_per_output_token_seconds", "histogram",
                     "Histogram of time per output token in seconds (model time).");
    prs__prom_hist_write(&b, "vllm:time_per_output_token_seconds", labels, &st.tpot);
    prs__prom_header(&b, "vllm:e2e_request_latency_seconds", "histogram",
                     "Histogram of end to end request latency in seconds (model time).");
    prs__prom_hist_write(&b, "vllm:e2e_request_latency_seconds", labels, &st.e2e);
    gauge(&b, "perseus_fake_gpu_clock_mhz", "gauge", "SM clock of the fake GPUs (MHz).", labels,
          st.mhz);
    gauge(&b, "perseus_fake_energy_joules_total", "counter",
          "Energy of the instance's GPUs by the cost model (model joules, idle included).", labels,
          st.energy_j);
    enum MHD_Result r = b.failed
                            ? prs__httpd_send(c, 500, "text/plain", "out of memory\n", 14)
                            : prs__httpd_send(c, 200, "text/plain; version=0.0.4", b.text, b.len);
    free(b.text);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    (void)version;
    app *a = cls;
    int post = strcmp(method, "POST") == 0;
    if (*con_cls == NULL) {
        conn *k = calloc(1, sizeof *k);
        if (k == NULL) return MHD_NO;
        k->body.max = BODY_MAX_BYTES;
        *con_cls = k;
        if (post) return MHD_YES;
    }
    conn *k = *con_cls;
    if (post && *data_size > 0) {
        prs__httpd_body_add(&k->body, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") == 0 && strcmp(url, "/metrics") == 0) return metrics(a, c);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/health") == 0)
        return prs__httpd_send(c, 200, "text/plain", "", 0);
    int chat = strcmp(url, "/v1/chat/completions") == 0;
    if (!chat && strcmp(url, "/v1/completions") != 0)
        return prs__httpd_send_oai_error(c, 404, "invalid_request_error", NULL, NULL,
                                         "unknown endpoint");
    if (!post)
        return prs__httpd_send_oai_error(c, 405, "invalid_request_error", NULL, NULL, "use POST");
    if (k->body.too_large)
        return prs__httpd_send_oai_error(c, 413, "invalid_request_error", NULL, NULL,
                                         "request body too large");
    return complete(a, c, chat ? PRS_OAI_CHAT : PRS_OAI_COMPLETIONS, &k->body);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    conn *k = *con_cls;
    if (k == NULL) return;
    prs__httpd_body_free(&k->body);
    free(k);
    *con_cls = NULL;
}

static const char usage[] =
    "usage: perseus-fakeserve [options]\n"
    "A fake OpenAI-compatible LLM serving instance paced by Perseus's inference cost model.\n"
    "  --listen HOST:PORT         address (default 127.0.0.1:8000; port 0: a free one)\n"
    "  --port-file FILE           write the port to FILE once serving\n"
    "  --model NAME               cost model of the served LLM (llama2-70b, bloom-176b)\n"
    "  --gpu NAME                 GPU type (a100, h100; default h100)\n"
    "  --tp N                     tensor-parallel degree (default 4)\n"
    "  --served-model-name NAME   model name clients ask for (default: --model)\n"
    "  --mhz MHZ                  SM clock (default: the GPU's highest)\n"
    "  --clock-file FILE          read the SM clock (MHz) from FILE before each iteration\n"
    "  --speedup X                run X times faster than the model (default 1)\n"
    "  --max-running N            sequences in a batch (default 256)\n"
    "  --max-batched-tokens N     prompt tokens per prefill (default 8192)\n"
    "  --max-waiting N            queued requests before answering 503 (default 1024)\n"
    "  --default-max-tokens N     tokens generated when a request gives no max_tokens (16)\n"
    "  --garbage                  answer completions with a malformed body (for tests)\n";

/* The options that depend on each other, and the cost model: -1 to go on, or 2. */
static int check_args(prs_fake_opts *o, app *a, const char *model, const char *gpu)
{
    if (o->tp < 1 || o->tp > 64) {
        fprintf(stderr, "perseus-fakeserve: --tp must be from 1 to 64\n");
        return 2;
    }
    const prs_infer_llm *m = prs_infer_llm_find(model);
    const prs_infer_gpu *g = prs_infer_gpu_find(gpu);
    prs_error err = {0};
    if (m == NULL || g == NULL || prs_infer_roofline_init(&o->model, m, g, &err) != 0) {
        fprintf(stderr, "perseus-fakeserve: no cost model for --model %s --gpu %s%s%s\n", model,
                gpu, err.msg[0] ? ": " : "", err.msg);
        return 2;
    }
    if (o->mhz == 0) o->mhz = g->f_max_mhz;
    if (a->served_name == NULL) a->served_name = m->name;
    if (a->default_max_tokens < 1) {
        fprintf(stderr, "perseus-fakeserve: --default-max-tokens must be >= 1\n");
        return 2;
    }
    return -1;
}

static int parse_args(int argc, char **argv, prs_fake_opts *o, app *a, const char **listen,
                      const char **port_file)
{
    static const struct option opts[] = {{"listen", 1, NULL, 'l'},
                                         {"port-file", 1, NULL, 'p'},
                                         {"model", 1, NULL, 'm'},
                                         {"gpu", 1, NULL, 'g'},
                                         {"tp", 1, NULL, 't'},
                                         {"served-model-name", 1, NULL, 'n'},
                                         {"mhz", 1, NULL, 'f'},
                                         {"clock-file", 1, NULL, 'c'},
                                         {"speedup", 1, NULL, 's'},
                                         {"max-running", 1, NULL, 'r'},
                                         {"max-batched-tokens", 1, NULL, 'b'},
                                         {"max-waiting", 1, NULL, 'w'},
                                         {"default-max-tokens", 1, NULL, 'd'},
                                         {"garbage", 0, NULL, 'G'},
                                         {"version", 0, NULL, 'V'},
                                         {"help", 0, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *model = "llama2-70b", *gpu = "h100";
    int ch;
    char *end = NULL;
    while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            *listen = optarg;
            break;
        case 'p':
            *port_file = optarg;
            break;
        case 'm':
            model = optarg;
            break;
        case 'g':
            gpu = optarg;
            break;
        case 't':
            o->tp = (int)strtol(optarg, &end, 10);
            break;
        case 'n':
            a->served_name = optarg;
            break;
        case 'f':
            o->mhz = (int)strtol(optarg, &end, 10);
            break;
        case 'c':
            o->clock_file = optarg;
            break;
        case 's':
            o->speedup = strtod(optarg, &end);
            break;
        case 'r':
            o->max_running = (int)strtol(optarg, &end, 10);
            break;
        case 'b':
            o->max_batched_tokens = strtol(optarg, &end, 10);
            break;
        case 'w':
            o->max_waiting = (int)strtol(optarg, &end, 10);
            break;
        case 'd':
            a->default_max_tokens = strtol(optarg, &end, 10);
            break;
        case 'G':
            a->garbage = 1;
            break;
        case 'V':
            puts("perseus-fakeserve " PRS_VERSION);
            return 0;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            return prs__cmdline_bad("perseus-fakeserve", opts, ch, argv);
        }
        if (end != NULL && (*end != '\0' || end == optarg)) {
            fprintf(stderr, "perseus-fakeserve: not a number: '%s'\n", optarg);
            return 2;
        }
        end = NULL;
    }
    if (optind < argc) {
        fprintf(stderr, "perseus-fakeserve: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return check_args(o, a, model, gpu);
}

int main(int argc, char **argv)
{
    prs_fake_opts o = {.tp = 4,
                       .speedup = 1.0,
                       .max_running = 256,
                       .max_batched_tokens = 8192,
                       .max_waiting = 1024};
    app a = {.default_max_tokens = 16};
    const char *listen = "127.0.0.1:8000", *port_file = NULL;
    int st = parse_args(argc, argv, &o, &a, &listen, &port_file);
    if (st >= 0) return st;
    /* SIGINT and SIGTERM are blocked before any thread starts, so every thread inherits the
     * mask and only main's sigwait takes them: with a handler, the kernel could run it on another
     * thread and leave main in pause() for good. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    prs_error err = {0};
    if (prs__fake_engine_new(&o, &a.engine, &err) != 0) {
        fprintf(stderr, "perseus-fakeserve: %s\n", err.msg);
        return 2;
    }
    struct MHD_Daemon *d;
    int port;
    if (prs__httpd_start(listen, 4096, 0, on_request, on_done, &a, &d, &port, &err) != 0 ||
        (port_file && prs__httpd_write_port(port_file, port, &err) != 0)) {
        fprintf(stderr, "perseus-fakeserve: %s\n", err.msg);
        prs__fake_engine_free(a.engine);
        return 1;
    }
    fprintf(stderr, "perseus-fakeserve: serving %s on port %d\n", a.served_name, port);
    int sig;
    sigwait(&stop_set, &sig);
    stop_flag = 1;
    MHD_stop_daemon(d);
    prs__fake_engine_free(a.engine);
    return 0;
}
