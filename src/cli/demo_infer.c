/* perseus demo --inference (demo_infer.h): DynamoLLM's levels run live on this machine, with no
 * GPU. perseusd (an inference cluster declared in it), four perseus-fakeserve instances in two
 * pools (short requests: two TP-2 instances; long: two TP-4), perseus-router in front reporting
 * its per-class loads to the cluster, and for the second run a perseus-instclock per instance
 * choosing its clock (written to the fake's clock file; through perseus-gpud as well when the
 * fake NVML is at hand, $PRS_FAKE_NVML). A slice of a trace (Azure's conversation trace when
 * found, or a built-in synthetic one) is replayed through the router at a time scale, first
 * with every GPU at its highest clock, then under the instance level; the summary compares the
 * two runs (requests, TTFT and TBT percentiles per pool, SLO attainment, the fakes' energy by the
 * cost model, the clocks chosen) and shows what perseusd's cluster level made of the loads.
 * Ctrl-C or SIGTERM stops everything in order (controllers first: the clocks go back to the
 * highest) and removes the temporary directory. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "demo_infer_int.h"
#include "roofline.h"

#define CONV_TRACE "AzureLLMInferenceTrace_conv.csv"
#define SHARED_DATA "shared/data/azure-llm-2023"

const char *const pool_names[DEMO_NPOOLS] = {"short", "long"};
const char *inst_names[DEMO_MAX_INST];
int inst_tp[DEMO_MAX_INST], inst_pool[DEMO_MAX_INST];
int demo_ninst, demo_ngpus;
static char inst_name_buf[DEMO_MAX_INST][16];
/* classes SS SM SL MS MM ML go to the short pool, LS LM LL to the long one */
const int pool_of_class[PRS_INFER_NCLASS] = {0, 0, 0, 0, 0, 0, 1, 1, 1};

void demo_layout(int per_pool)
{
    demo_ninst = demo_ngpus = 0;
    for (int p = 0; p < DEMO_NPOOLS; p++)
        for (int k = 0; k < per_pool; k++) {
            int i = demo_ninst++;
            snprintf(inst_name_buf[i], sizeof inst_name_buf[i], "%c%d", p ? 'l' : 's', k + 1);
            inst_names[i] = inst_name_buf[i];
            inst_tp[i] = p ? 4 : 2;
            inst_pool[i] = p;
            demo_ngpus += inst_tp[i];
        }
}

static void usage(FILE *f)
{
    fputs("usage: perseus demo --inference [options]\n"
          "\n"
          "Start perseusd, fake serving instances (perseus-fakeserve) in two pools,\n"
          "perseus-router and a clock controller per instance (perseus-instclock) on this\n"
          "machine; replay a slice of a request trace through the router, first at the\n"
          "highest clock, then under the instance level; print requests, TTFT/TBT per pool,\n"
          "SLO attainment, energy and clocks, and write plots. No GPU needed.\n"
          "\n"
          "  --trace FILE       Azure LLM inference trace (CSV); default: Azure's conversation\n"
          "                     trace (" CONV_TRACE ") if found in the\n"
          "                     current directory or beside the source tree, else a synthetic one\n"
          "                     ('synthetic': that one)\n"
          "  --from S           start of the slice in the trace, seconds (default 0)\n"
          "  --duration S       length of the slice, seconds of the trace (default 120)\n"
          "  --time-scale X     replay X times faster than the trace (default 20)\n"
          "  --headroom X       share of each SLO the clock controllers may use (default 0.6)\n"
          "  --per-pool N       instances per pool, 1 to 8 (default 2: s1, s2 at TP 2;\n"
          "                     l1, l2 at TP 4)\n"
          "  --max-running N    requests an instance batches at most (the fakes' --max-running)\n"
          "                     and the router sends it at once (default: theirs, 256)\n"
          "  --compare          also predict both runs with perseus infer emulate --cluster\n"
          "                     on the router's configuration and print them side by side\n"
          "  --out DIR          where the plots go (default perseus-demo-inference)\n"
          "  --no-plots         do not write plots\n"
          "  -h, --help         show this help\n",
          f);
}

static int parse_pos(const char *opt, const char *arg, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, DEMO_CMD ": %s: expected a number in [%g, %g], got '%s'\n", opt, lo, hi,
                arg);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_int(const char *opt, const char *arg, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < lo || v > hi) {
        fprintf(stderr, DEMO_CMD ": %s: expected an integer in [%d, %d], got '%s'\n", opt, lo, hi,
                arg);
        return 2;
    }
    *out = (int)v;
    return 0;
}

/* argv without "--inference": 0, or the exit status (*done: help printed). */
static int parse_args(int argc, char **argv, dargs *a, int *done)
{
    enum {
        O_INF = 256,
        O_TRACE,
        O_FROM,
        O_DUR,
        O_SCALE,
        O_HEAD,
        O_OUT,
        O_NOPLOTS,
        O_PER_POOL,
        O_MAX_RUNNING,
        O_COMPARE
    };
    static const struct option opts[] = {{"inference", no_argument, 0, O_INF},
                                         {"trace", required_argument, 0, O_TRACE},
                                         {"from", required_argument, 0, O_FROM},
                                         {"duration", required_argument, 0, O_DUR},
                                         {"time-scale", required_argument, 0, O_SCALE},
                                         {"headroom", required_argument, 0, O_HEAD},
                                         {"out", required_argument, 0, O_OUT},
                                         {"no-plots", no_argument, 0, O_NOPLOTS},
                                         {"per-pool", required_argument, 0, O_PER_POOL},
                                         {"max-running", required_argument, 0, O_MAX_RUNNING},
                                         {"compare", no_argument, 0, O_COMPARE},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    while (!rc && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_INF:
            break;
        case O_TRACE:
            a->trace_path = optarg;
            break;
        case O_FROM:
            rc = parse_pos("--from", optarg, 0, 1e9, &a->from_s);
            break;
        case O_DUR:
            rc = parse_pos("--duration", optarg, 1, 86400, &a->duration_s);
            break;
        case O_SCALE:
            rc = parse_pos("--time-scale", optarg, 1, 1000, &a->time_scale);
            break;
        case O_HEAD:
            rc = parse_pos("--headroom", optarg, 0.05, 1, &a->headroom);
            break;
        case O_OUT:
            a->out_dir = optarg;
            break;
        case O_NOPLOTS:
            a->out_dir = NULL;
            break;
        case O_PER_POOL:
            rc = parse_int("--per-pool", optarg, 1, DEMO_MAX_PER_POOL, &a->per_pool);
            break;
        case O_MAX_RUNNING:
            rc = parse_int("--max-running", optarg, 1, 4096, &a->max_running);
            break;
        case O_COMPARE:
            a->compare = 1;
            break;
        case 'h':
            usage(stdout);
            *done = 1;
            return 0;
        default:
            return prs_cli_unknown_option("demo", argv[optind - 1], opts);
        }
    }
    if (!rc && optind < argc) {
        fprintf(stderr, DEMO_CMD ": unexpected argument '%s'\n", argv[optind]);
        rc = 2;
    }
    return rc;
}

/* A synthetic trace: Poisson arrivals at 4 requests/s, prompt and output lengths drawn
 * log-uniformly (32..4096 and 8..700 tokens), seeded: every run replays the same requests. */
static int synthetic_trace(double duration_s, prs_infer_trace *out)
{
    prs_error err = {0};
    if (prs_infer_trace_poisson(4.0, duration_s, NULL, 1, 1, 42, out, &err) != 0) {
        fprintf(stderr, DEMO_CMD ": %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < out->n; i++) {
        double u = prs__infer_unit(prs__infer_mix64(2 * i + 1));
        double v = prs__infer_unit(prs__infer_mix64(2 * i + 2));
        out->reqs[i].in_tokens = (int32_t)(32 * pow(4096.0 / 32, u));
        out->reqs[i].out_tokens = (int32_t)(8 * pow(700.0 / 8, v));
    }
    return 0;
}

static int load_trace(demo_state *st)
{
    char found[1200];
    const char *path = st->a.trace_path;
    if (path && strcmp(path, "synthetic") == 0) {
        path = NULL;
    } else if (!path && access(CONV_TRACE, R_OK) == 0) {
        path = CONV_TRACE; /* in the current directory */
    } else if (!path) {
        /* the data directory beside a build tree's source checkout, as the tests find it */
        snprintf(found, sizeof found, "%s/../../%s/" CONV_TRACE, st->ps.bindir, SHARED_DATA);
        if (access(found, R_OK) == 0) path = found;
    }
    if (!path) {
        st->trace_name = "synthetic (Poisson 4 requests/s, log-uniform lengths)";
        return synthetic_trace(st->a.duration_s, &st->trace);
    }
    prs_infer_trace all = {0};
    prs_error err = {0};
    int rc = prs_infer_trace_load(path, &all, &err);
    if (!rc)
        rc = prs_infer_trace_window(&all, st->a.from_s, st->a.from_s + st->a.duration_s, &st->trace,
                                    &err);
    prs_infer_trace_free(&all);
    if (rc) {
        fprintf(stderr, DEMO_CMD ": %s\n", err.msg);
        return 1;
    }
    if (st->trace.n == 0) {
        fprintf(stderr, DEMO_CMD ": %s: no request in [%g, %g) s\n", path, st->a.from_s,
                st->a.from_s + st->a.duration_s);
        return 1;
    }
    const char *base = strrchr(path, '/');
    st->trace_name = base ? base + 1 : path;
    return 0;
}

/* The fakes' energy counters summed (model joules): 0, or -1. */
static int fakes_energy(const demo_state *st, double *sum)
{
    *sum = 0;
    for (int i = 0; i < demo_ninst; i++) {
        char url[96];
        double e;
        snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", st->fake_port[i]);
        if (demo_scrape(url, "perseus_fake_energy_joules_total", &e) != 0) return -1;
        *sum += e;
    }
    return 0;
}

/* One replay of the trace through the router; k: 0 at the highest clock, 1 under control. */
static int run_phase(demo_state *st, int k)
{
    char url[64];
    double e0, e1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", st->router_port);
    prs_infer_classes classes;
    prs_infer_classes_default(&classes);
    fprintf(stderr, DEMO_CMD ": replaying %zu requests %s (%.1f s)\n", st->trace.n,
            k ? "under the instance level" : "at the highest clock",
            st->a.duration_s / st->a.time_scale);
    if (fakes_energy(st, &e0) != 0) return fprintf(stderr, DEMO_CMD ": no energy\n"), 1;
    if (demo_replay(url, DEMO_MODEL, &st->trace, st->a.time_scale, &classes, pool_of_class,
                    &st->run[k]) != 0)
        return 1;
    if (fakes_energy(st, &e1) != 0) return fprintf(stderr, DEMO_CMD ": no energy\n"), 1;
    st->energy_j[k] = e1 - e0;
    st->duration_s[k] = st->run[k].wall_s * st->a.time_scale;
    return 0;
}

/* GET the cluster with its token; kept in st->desired when its load is the highest seen (the
 * router's reports follow the trace: the last ones, as the replay drains, see no arrivals).
 * Runs on the sampler's thread; the main thread reads st->desired once the sampler stopped. */
static void fetch_desired(void *ctx)
{
    demo_state *st = ctx;
    char url[160];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/clusters/%s", st->server_port,
             st->cluster_id);
    prs_cli_http_req req = {url, "GET", st->cluster_token, NULL, NULL, 10};
    json_t *ans = NULL;
    double rps = -1;
    if (prs_cli_http(&req, &ans, NULL, 0) == 200) {
        const char *cls;
        json_t *pool;
        rps = 0;
        json_object_foreach(json_object_get(json_object_get(ans, "desired"), "pools"), cls, pool)
            rps += json_number_value(json_object_get(pool, "load_rps"));
    }
    if (rps > st->desired_rps || (rps >= 0 && !st->desired)) {
        json_decref(st->desired);
        st->desired = ans;
        st->desired_rps = rps;
    } else {
        json_decref(ans);
    }
}

/* Under the instance level: the controllers and the clock sampler around the replay. */
static int controlled_phase(demo_state *st)
{
    int rc = 0;
    for (int i = 0, g = 0; i < demo_ninst && !rc; g += inst_tp[i++])
        rc = demo_start_ctl(st, i, g);
    st->clocks.ninst = demo_ninst;
    for (int i = 0; i < demo_ninst; i++)
        snprintf(st->clocks.files[i], sizeof st->clocks.files[i], "%s/%s.mhz", st->ps.tmp,
                 inst_names[i]);
    st->clocks.period_s = 1 / st->a.time_scale; /* a sample every second of the trace */
    st->clocks.time_scale = st->a.time_scale;
    st->clocks.tick = fetch_desired; /* every 10 s of the trace: the router reports every 30 */
    st->clocks.ctx = st;
    st->clocks.tick_every = 10;
    if (!rc) rc = demo_sampler_start(&st->clocks) != 0;
    if (!rc) rc = run_phase(st, 1);
    demo_sampler_stop(&st->clocks);
    if (!rc) fetch_desired(st); /* once more, after the sampler's last */
    for (int i = 0; i < demo_ninst; i++)
        if (st->ctl[i] >= 0 && demo_stop(&st->ps, st->ctl[i], 10) != 0 && !prs_demo_stop) {
            fprintf(stderr, DEMO_CMD ": %s did not exit cleanly (%s/%s.log)\n",
                    st->ps.p[st->ctl[i]].name, st->ps.tmp, st->ps.p[st->ctl[i]].name);
            rc = 1;
        }
    return rc;
}

/* One line of the table: a label, the highest-clock run's figure, the controlled run's. */
static void row(const char *label, const char *a, const char *b, const char *tail)
{
    printf("%-30s %15s %15s%s\n", label, a, b, tail);
}

/* "A / B" with decimals digits (the count form when decimals < 0). */
static const char *pair(char *buf, size_t n, double x, double y, int decimals)
{
    if (decimals < 0)
        snprintf(buf, n, "%ld / %ld", (long)x, (long)y);
    else
        snprintf(buf, n, "%.*f / %.*f", decimals, x, decimals, y);
    return buf;
}

static void print_run_pools(demo_state *st)
{
    char a[64], b[64], label[64];
    row("", "highest clock", "instance level", "");
    for (int p = 0; p < DEMO_NPOOLS; p++) {
        demo_pool_stats *x = &st->run[0].pool[p], *y = &st->run[1].pool[p];
        snprintf(label, sizeof label, "pool %s requests ok / sent", pool_names[p]);
        row(label, pair(a, sizeof a, (double)x->ok, (double)x->sent, -1),
            pair(b, sizeof b, (double)y->ok, (double)y->sent, -1), "");
        row("  TTFT p50 / p99 (s)",
            pair(a, sizeof a, demo_quantile(&x->ttft, 0.5), demo_quantile(&x->ttft, 0.99), 3),
            pair(b, sizeof b, demo_quantile(&y->ttft, 0.5), demo_quantile(&y->ttft, 0.99), 3), "");
        row("  TBT  p50 / p99 (s)",
            pair(a, sizeof a, demo_quantile(&x->tbt, 0.5), demo_quantile(&x->tbt, 0.99), 3),
            pair(b, sizeof b, demo_quantile(&y->tbt, 0.5), demo_quantile(&y->tbt, 0.99), 3), "");
    }
    double att[2];
    for (int k = 0; k < 2; k++) {
        long met = 0, sent = 0;
        for (int p = 0; p < DEMO_NPOOLS; p++) {
            met += st->run[k].pool[p].met;
            sent += st->run[k].pool[p].sent;
        }
        att[k] = sent ? 100.0 * (double)met / (double)sent : NAN;
    }
    char tail[64];
    snprintf(a, sizeof a, "%.1f %%", att[0]);
    snprintf(b, sizeof b, "%.1f %%", att[1]);
    row("SLO attainment", a, b, "");
    snprintf(a, sizeof a, "%.1f", st->energy_j[0] / 1e3);
    snprintf(b, sizeof b, "%.1f", st->energy_j[1] / 1e3);
    snprintf(tail, sizeof tail, "  (%+.1f %%)", 100 * (st->energy_j[1] / st->energy_j[0] - 1));
    snprintf(label, sizeof label, "energy, %d GPUs (kJ)", demo_ngpus);
    row(label, a, b, tail);
    snprintf(a, sizeof a, "%.1f", st->duration_s[0]);
    snprintf(b, sizeof b, "%.1f", st->duration_s[1]);
    row("replay (model s)", a, b, "");
}

static void print_clocks(const demo_state *st)
{
    printf("clocks chosen under the instance level (MHz, mean / min / max of the samples):\n");
    for (int i = 0; i < demo_ninst; i++) {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        size_t n = 0;
        for (size_t j = 0; j < st->clocks.n; j++) {
            double m = st->clocks.mhz[j * (size_t)demo_ninst + i];
            if (isnan(m)) continue;
            sum += m;
            lo = fmin(lo, m);
            hi = fmax(hi, m);
            n++;
        }
        if (n)
            printf("  %s (pool %s, TP %d): %.0f / %.0f / %.0f\n", inst_names[i],
                   pool_names[inst_pool[i]], inst_tp[i], sum / (double)n, lo, hi);
    }
}

/* What perseusd's cluster level made of the router's reports. */
static void print_cluster(const demo_state *st)
{
    const json_t *d = json_object_get(st->desired, "desired");
    printf("perseusd cluster level, from the router's load reports: highest load %.2f "
           "requests/s (report %lld), desired instances:\n ",
           st->desired_rps, (long long)json_integer_value(json_object_get(st->desired, "loads")));
    const char *cls;
    const json_t *pool;
    int any = 0;
    json_object_foreach((json_t *)json_object_get(d, "pools"), cls, pool)
    {
        size_t i;
        const json_t *x;
        json_array_foreach(json_object_get(pool, "instances"), i, x)
        {
            json_int_t n = json_integer_value(json_object_get(x, "count"));
            if (n <= 0) continue;
            printf("%s %s %lld x TP%lld", any++ ? "," : "", cls, (long long)n,
                   (long long)json_integer_value(json_object_get(x, "tp")));
        }
    }
    const json_t *e = json_object_get(d, "last_error");
    printf("%s%s%s\n", any ? "" : " nothing", json_is_string(e) ? "; " : "",
           json_is_string(e) ? json_string_value(e) : "");
}

static void print_summary(demo_state *st, double wall_s)
{
    int k = st->a.per_pool;
    const char *sep = k > 2 ? " ... " : ", ";
    if (k == 1)
        printf("perseus demo --inference: %s on %s (fake instances), pools short (s1: TP 2) and "
               "long (l1: TP 4)\n",
               DEMO_MODEL, DEMO_GPU);
    else
        printf("perseus demo --inference: %s on %s (fake instances), pools short (s1%s%s: TP 2) "
               "and long (l1%s%s: TP 4)\n",
               DEMO_MODEL, DEMO_GPU, sep, inst_names[k - 1], sep, inst_names[2 * k - 1]);
    if (st->a.max_running)
        printf("each instance batches at most %d requests, and the router sends it no more\n",
               st->a.max_running);
    printf("trace: %s, %g s of it (%zu requests) replayed %gx faster, twice; %.1f s wall in all\n",
           st->trace_name, st->a.duration_s, st->trace.n, st->a.time_scale, wall_s);
    printf("times and energies in model seconds and joules (the fakes' cost model)%s\n\n",
           st->gpud ? "; clocks through perseus-gpud on the fake NVML" : "");
    print_run_pools(st);
    print_clocks(st);
    if (st->predicted) demo_print_compare(st);
    if (st->desired) print_cluster(st);
    if (st->gpus_reset >= 0)
        printf("GPUs reset after the controllers stopped: %s\n", st->gpus_reset ? "yes" : "NO");
    if (st->a.out_dir)
        printf("plots: %s/clocks.svg, %s/ttft-cdf.svg, %s/tbt-cdf.svg\n", st->a.out_dir,
               st->a.out_dir, st->a.out_dir);
}

/* Everything between the temporary directory and the summary. */
static int run_demo(demo_state *st)
{
    int rc = load_trace(st) || demo_start_perseusd(st) || demo_start_gpud(st) ||
             demo_start_fakes(st) || demo_declare_cluster(st) || demo_start_router(st);
    int before[DEMO_MAX_GPUS], after[DEMO_MAX_GPUS];
    int nb = st->gpud && !rc ? demo_gpu_clocks(st, before, DEMO_MAX_GPUS) : -1;
    if (!rc) rc = run_phase(st, 0);
    if (!rc) rc = controlled_phase(st);
    if (nb > 0) {
        int na = demo_gpu_clocks(st, after, DEMO_MAX_GPUS);
        st->gpus_reset = na == nb && memcmp(before, after, sizeof(int) * (size_t)nb) == 0;
    }
    if (!rc && st->a.compare) rc = demo_predict(st);
    if (!rc && st->a.out_dir) {
        const char *runs[2] = {"highest clock", "instance level"};
        rc = demo_plots(st->a.out_dir, inst_names, &st->clocks, st->run, runs, 2, pool_names);
    }
    return rc;
}

int prs_cmd_demo_inference(int argc, char **argv)
{
    demo_state *st = calloc(1, sizeof *st);
    if (!st) return 1;
    st->a = (dargs){NULL, 0, 120, 20, 0.6, 2, 0, 0, "perseus-demo-inference"};
    st->gpus_reset = -1;
    for (int i = 0; i < DEMO_MAX_INST; i++)
        st->ctl[i] = -1;
    int done = 0, rc = parse_args(argc, argv, &st->a, &done);
    demo_layout(st->a.per_pool);
    if (!rc && !done) rc = demo_find_programs(&st->ps);
    const char *tmp = getenv("TMPDIR");
    snprintf(st->ps.tmp, sizeof st->ps.tmp, "%s/perseus-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!rc && !done && !mkdtemp(st->ps.tmp)) {
        fprintf(stderr, DEMO_CMD ": cannot create a temporary directory in %s\n",
                tmp && *tmp ? tmp : "/tmp");
        rc = 1;
    }
    if (!rc && !done) {
        double t0 = demo_now();
        curl_global_init(CURL_GLOBAL_DEFAULT);
        demo_catch_signals();
        rc = run_demo(st);
        demo_stop_all(&st->ps);
        if (!rc && !prs_demo_stop) print_summary(st, demo_now() - t0);
        if (prs_demo_stop) {
            fprintf(stderr, DEMO_CMD ": interrupted; everything stopped\n");
            rc = 130;
        }
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", st->ps.tmp);
        if (system(cmd) != 0) fprintf(stderr, DEMO_CMD ": could not remove %s\n", st->ps.tmp);
        curl_global_cleanup();
    }
    for (int k = 0; k < 2; k++)
        demo_run_free(&st->run[k]);
    demo_sampler_free(&st->clocks);
    json_decref(st->desired);
    prs_infer_trace_free(&st->trace);
    free(st);
    return rc;
}
