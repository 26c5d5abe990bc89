/* perseus-instclock: DynamoLLM's instance level for one live serving instance. Every period it
 * reads the instance's load from its engine's Prometheus page (vLLM's metric names), picks the
 * lowest SM clock at which the inference cost model meets the latency SLOs for that load
 * (src/router/instclock.h), and applies it: to the instance's GPUs through perseus-gpud, which
 * leases them to this process alone and resets them when it exits or dies, and/or to a clock file
 * (what perseus-fakeserve reads). When the page cannot be read it goes to the highest clock,
 * which is always safe for the SLOs. docs/router.md, "Clock control". */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmdline.h"
#include "httpd.h"
#include "instclock.h"
#include "perseus/clock.h"
#include "perseus/gpu.h"

#define MAX_GPUS 64
#define METRICS_MAX_BYTES (8u << 20)

typedef struct opts {
    const char *metrics_url, *clock_file, *gpus, *socket;
    prs_infer_roofline model;
    int tp;
    prs_instclock_slo slo;
    double period_s;
    double time_scale; /* the engine's clock runs this many times faster than the wall clock */
    long iterations;   /* 0: until stopped */
} opts;

typedef struct page {
    char *text;
    size_t len;
    int too_large;
} page;

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    page *p = cls;
    size_t k = size * n;
    if (p->len + k > METRICS_MAX_BYTES) {
        p->too_large = 1;
        return 0;
    }
    char *t = realloc(p->text, p->len + k + 1);
    if (t == NULL) return 0;
    memcpy(t + p->len, data, k);
    p->text = t;
    p->len += k;
    t[p->len] = '\0';
    return k;
}

/* The instance's load from its metrics page. */
static int read_load(const opts *o, prs_instclock_load *load, prs_error *err)
{
    page p = {0};
    CURL *c = curl_easy_init();
    if (c == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    long timeout_ms = (long)(o->period_s * 1000) + 1000;
    curl_easy_setopt(c, CURLOPT_URL, o->metrics_url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    int r;
    if (rc != CURLE_OK)
        r = prs_error_set(err, PRS_ESERVER, "%s: %s", o->metrics_url,
                          p.too_large ? "page too large" : curl_easy_strerror(rc));
    else
        r = prs__instclock_parse_metrics(p.text ? p.text : "", p.len, load, err);
    free(p.text);
    return r;
}

/* The clock file, written under a temporary name and renamed into place. */
static int write_clock_file(const char *path, int mhz, prs_error *err)
{
    return prs__httpd_write_port(path, mhz, err);
}

typedef struct gpus {
    prs_gpu *g[MAX_GPUS];
    prs_clockctl *ctl[MAX_GPUS];
    int n;
} gpus;

static void close_gpus(gpus *s)
{
    for (int i = 0; i < s->n; i++) {
        prs_clockctl_free(s->ctl[i]); /* resets the clocks: the lease ends */
        prs_gpu_close(s->g[i]);
    }
    s->n = 0;
}

/* Lease every GPU of the comma-separated specs: through the node's perseus-gpud for nvml GPUs,
 * inline for simulated ones. */
static int open_gpus(const opts *o, gpus *s, prs_error *err)
{
    char list[1024];
    snprintf(list, sizeof list, "%s", o->gpus);
    char *save = NULL;
    for (char *spec = strtok_r(list, ",", &save); spec; spec = strtok_r(NULL, ",", &save)) {
        if (s->n == MAX_GPUS)
            return prs_error_set(err, PRS_EINVAL, "--gpus: more than %d GPUs", MAX_GPUS);
        int rc = prs_gpu_open(spec, &s->g[s->n], err);
        if (rc) return rc;
        prs_clockctl_mode mode = strcmp(prs_gpu_backend(s->g[s->n]), "sim") == 0
                                     ? PRS_CLOCKCTL_INLINE
                                     : PRS_CLOCKCTL_DAEMON;
        rc = prs_clockctl_open(s->g[s->n], mode, o->socket, &s->ctl[s->n], err);
        if (rc) {
            prs_gpu_close(s->g[s->n]);
            return rc;
        }
        s->n++;
    }
    return 0;
}

/* The lowest clock of g at or above mhz (its highest when none is). */
static int supported_clock(prs_gpu *g, int mhz)
{
    int clocks[512], n = 0, best = 0;
    if (prs_gpu_clocks(g, clocks, 512, &n) != 0 || n == 0) return mhz;
    if (n > 512) n = 512;
    for (int i = 0; i < n; i++)
        if (clocks[i] >= mhz && (best == 0 || clocks[i] < best)) best = clocks[i];
    return best ? best : clocks[0];
}

static int apply(const opts *o, gpus *s, int mhz, prs_error *err)
{
    if (o->clock_file && write_clock_file(o->clock_file, mhz, err) != 0) return PRS_EIO;
    for (int i = 0; i < s->n; i++) {
        if (prs_clockctl_set(s->ctl[i], supported_clock(s->g[i], mhz)) != 0 ||
            prs_clockctl_sync(s->ctl[i], 2.0) != 0)
            return prs_error_set(err, PRS_EGPU, "GPU %d: %s", i, prs_gpu_errmsg(s->g[i]));
    }
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (!stop_flag && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The prompt tokens a second (of the engine's time) since the previous reading, into load;
 * nothing on the first reading, without the counter, or when it went back (a restart). */
typedef struct rate_state {
    double tokens, t; /* the previous reading; tokens -1: none */
} rate_state;

static void observe_rate(const opts *o, rate_state *r, prs_instclock_load *load)
{
    double now = prs_mono_s();
    if (load->prompt_tokens >= 0 && r->tokens >= 0 && load->prompt_tokens >= r->tokens &&
        now > r->t)
        load->prompt_rate = (load->prompt_tokens - r->tokens) / ((now - r->t) * o->time_scale);
    r->tokens = load->prompt_tokens;
    r->t = now;
}

static int run(const opts *o, gpus *s)
{
    int last = -1, status = 0;
    rate_state rate = {-1, 0};
    for (long it = 0; !stop_flag && (o->iterations == 0 || it < o->iterations); it++) {
        if (it > 0) sleep_s(o->period_s);
        prs_instclock_load load = {0};
        prs_error err = {0};
        int mhz;
        int got = read_load(o, &load, &err) == 0;
        if (got) observe_rate(o, &rate, &load);
        if (!got) {
            fprintf(stderr, "perseus-instclock: %s: highest clock\n", err.msg);
            mhz = o->model.gpu->f_max_mhz;
        } else if (prs__instclock_pick(&o->model, o->tp, &o->slo, &load, &mhz, &err) != 0) {
            fprintf(stderr, "perseus-instclock: %s\n", err.msg);
            return 1;
        }
        if (mhz == last) continue;
        if (apply(o, s, mhz, &err) != 0) {
            fprintf(stderr, "perseus-instclock: %s\n", err.msg);
            status = 1;
            continue;
        }
        fprintf(stderr,
                "perseus-instclock: clock %d MHz (running %g, waiting %g, kv %.3f, prompt tokens "
                "%.0f/s)\n",
                mhz, load.running, load.waiting, load.kv_usage, load.prompt_rate);
        last = mhz;
    }
    return status;
}

static const char usage[] =
    "usage: perseus-instclock --metrics URL --tp N [options]\n"
    "Set a serving instance's SM clock to the lowest that meets its SLOs for its load.\n"
    "  --metrics URL          the engine's Prometheus page (vLLM's metric names)\n"
    "  --model NAME           cost model of the served LLM (default llama2-70b)\n"
    "  --gpu NAME             GPU type (default h100)\n"
    "  --tp N                 the instance's tensor-parallel degree\n"
    "  --ttft-slo S           time-to-first-token SLO, seconds (default 0.5)\n"
    "  --tbt-slo S            time-between-tokens SLO, seconds (default 0.1)\n"
    "  --headroom X           share of each SLO the model may use (default 0.8)\n"
    "  --prompt-tokens N      a typical prompt of the instance's pool (default 512)\n"
    "  --target N:S           also meet a TTFT of S seconds for prompts of N tokens (repeatable,\n"
    "                         up to 8: a pool serving several input classes, each its own SLO)\n"
    "  --period S             seconds between decisions (default 5)\n"
    "  --time-scale X         the engine runs X times faster than the wall clock (a time-scaled\n"
    "                         perseus-fakeserve; default 1): its prompt rate is per X seconds\n"
    "  --gpus SPEC,...        the instance's GPUs (nvml:INDEX, nvml:GPU-UUID, sim), leased\n"
    "                         through perseus-gpud and reset when this program ends or dies\n"
    "  --gpud-socket PATH     perseus-gpud's socket (default $PRS_GPUD_SOCKET or\n"
    "                         /run/perseus/gpud.sock)\n"
    "  --clock-file FILE      also write the clock (MHz) to FILE (perseus-fakeserve reads it)\n"
    "  --iterations N         stop after N decisions (default: run until SIGINT/SIGTERM)\n";

static int bad(const char *opt, const char *arg)
{
    fprintf(stderr, "perseus-instclock: %s: bad value '%s'\n", opt, arg);
    return 2;
}

static int number(const char *opt, const char *arg, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(v >= lo && v <= hi)) return bad(opt, arg);
    *out = v;
    return -1;
}

/* --target N:S: prompts of N tokens within S seconds to the first token. */
static int parse_target(const char *arg, prs_instclock_slo *slo)
{
    char *end;
    long n = strtol(arg, &end, 10);
    double s = *end == ':' ? strtod(end + 1, &end) : 0;
    if (slo->ntargets == PRS_INSTCLOCK_MAX_TARGETS || n < 1 || n > 1000000 || *end != '\0' ||
        !(s > 0 && s <= 3600))
        return bad("--target (N:S, at most 8)", arg);
    slo->target_tokens[slo->ntargets] = n;
    slo->target_ttft_s[slo->ntargets++] = s;
    return -1;
}

static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        {"metrics", 1, NULL, 'm'},    {"model", 1, NULL, 'M'},         {"gpu", 1, NULL, 'g'},
        {"tp", 1, NULL, 't'},         {"ttft-slo", 1, NULL, 'T'},      {"tbt-slo", 1, NULL, 'B'},
        {"headroom", 1, NULL, 'H'},   {"prompt-tokens", 1, NULL, 'P'}, {"period", 1, NULL, 'p'},
        {"gpus", 1, NULL, 'G'},       {"gpud-socket", 1, NULL, 's'},   {"clock-file", 1, NULL, 'c'},
        {"iterations", 1, NULL, 'i'}, {"target", 1, NULL, 'x'},        {"time-scale", 1, NULL, 'S'},
        {"version", 0, NULL, 'V'},    {"help", 0, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *model = "llama2-70b", *gpu = "h100";
    double v = 0, tp = 0;
    int ch, st = -1;
    while (st < 0 && (ch = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (ch) {
        case 'm':
            o->metrics_url = optarg;
            break;
        case 'M':
            model = optarg;
            break;
        case 'g':
            gpu = optarg;
            break;
        case 't':
            st = number("--tp", optarg, 1, 64, &tp);
            break;
        case 'T':
            st = number("--ttft-slo", optarg, 1e-6, 3600, &o->slo.ttft_s);
            break;
        case 'B':
            st = number("--tbt-slo", optarg, 1e-6, 3600, &o->slo.tbt_s);
            break;
        case 'H':
            st = number("--headroom", optarg, 1e-6, 1, &o->slo.headroom);
            break;
        case 'P':
            st = number("--prompt-tokens", optarg, 1, 1e6, &v);
            o->slo.prompt_tokens = (long)v;
            break;
        case 'p':
            st = number("--period", optarg, 0.01, 3600, &o->period_s);
            break;
        case 'G':
            o->gpus = optarg;
            break;
        case 's':
            o->socket = optarg;
            break;
        case 'c':
            o->clock_file = optarg;
            break;
        case 'x':
            st = parse_target(optarg, &o->slo);
            break;
        case 'S':
            st = number("--time-scale", optarg, 1e-3, 1e6, &o->time_scale);
            break;
        case 'i':
            st = number("--iterations", optarg, 1, 1e12, &v);
            o->iterations = (long)v;
            break;
        case 'V':
            puts("perseus-instclock " PRS_VERSION);
            return 0;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            return prs__cmdline_bad("perseus-instclock", longopts, ch, argv);
        }
    }
    if (st >= 0) return st;
    if (optind < argc || o->metrics_url == NULL || tp == 0) {
        fprintf(stderr, "perseus-instclock: %s\n",
                optind < argc ? "unexpected argument" : "--metrics URL and --tp N are required");
        return 2;
    }
    o->tp = (int)tp;
    const prs_infer_llm *m = prs_infer_llm_find(model);
    const prs_infer_gpu *g = prs_infer_gpu_find(gpu);
    prs_error err = {0};
    long kv;
    if (m == NULL || g == NULL || prs_infer_roofline_init(&o->model, m, g, &err) != 0 ||
        prs_infer_roofline_kv_tokens(&o->model, o->tp, &kv, &err) != 0) {
        fprintf(stderr, "perseus-instclock: no cost model for --model %s --gpu %s --tp %d%s%s\n",
                model, gpu, o->tp, err.msg[0] ? ": " : "", err.msg);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    opts o = {.slo = {.ttft_s = 0.5, .tbt_s = 0.1, .headroom = 0.8, .prompt_tokens = 512},
              .period_s = 5,
              .time_scale = 1};
    int st = parse_args(argc, argv, &o);
    if (st >= 0) return st;
    if (o.model.gpu == NULL) return 2; /* parse_args set the model when it returned -1 */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    gpus s = {0};
    prs_error err = {0};
    if (o.gpus && open_gpus(&o, &s, &err) != 0) {
        fprintf(stderr, "perseus-instclock: --gpus: %s\n", err.msg);
        close_gpus(&s);
        curl_global_cleanup();
        return 1;
    }
    st = run(&o, &s);
    close_gpus(&s);
    if (o.clock_file) write_clock_file(o.clock_file, o.model.gpu->f_max_mhz, NULL);
    curl_global_cleanup();
    return st;
}
