/* perseus infer emulate: replay a request trace on a serving cluster under each policy and
 * compare their energy, power and latency (docs/inference.md, "Serving emulator and policies").
 *
 * Parse (options, strict) -> prepare the trace (load, window, tiling, rate scaling) and the
 * capacity table from the profile -> replay every policy asked for (src/infer/cluster.h) ->
 * print a table, or one JSON object (--json), and with --out DIR the same JSON and the cluster
 * power per second of each policy as CSV. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_infer.h"
#include "cmd_infer_emulate_cluster.h"
#include "perseus/numfmt.h"

#define CMD "infer emulate"

enum {
    O_TRACE = 256,
    O_POLICY,
    O_JSON,
    O_SCALE,
    O_SHARE,
    O_WINDOW,
    O_TILE,
    O_DEPTH,
    O_PEAK_HOUR,
    O_OUTDIR,
    O_SCALE_SHIFT,
    O_PLOTS,
    O_CLUSTER,
    O_INST_LEVEL,
    O_INST_HEADROOM,
    O_HELP
};

typedef struct args {
    prs_cli_infer in;
    const char *trace_path, *out_dir, *plots_dir;
    int policies[PRS_INFER_NPOLICY], n_policies;
    int json;
    double scale, share;
    double win_from, win_to;
    int tile_days;
    double depth, peak_hour;
    double scale_shift_s; /* > 0: scale by shifted copies over this span */
    int policy_set;
    prs_cli_emulate_cluster cl; /* --cluster: a fixed cluster (cmd_infer_emulate_cluster.c) */
} args;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: perseus infer emulate --trace FILE --profile FILE [options]\n"
        "       perseus infer emulate --trace FILE --cluster FILE [--instance-level S] ...\n"
        "\n"
        "Replay an LLM inference trace (Azure's CSV: TIMESTAMP,ContextTokens,\n"
        "GeneratedTokens) on a cluster under serving policies and compare their energy,\n"
        "cluster power and latency against the SLOs.\n"
        "\n"
        "  --trace FILE           the request trace (required)\n"
        "  --policy LIST          all (default) or names, comma-separated: singlepool,\n"
        "                         multipool, instances, tp, clock, dynamollm, oracle, phase\n"
        "  --scale X              rate scale factor (requests duplicated or thinned)\n"
        "  --peak-share S         scale so that singlepool needs share S of the GPUs at\n"
        "                         the trace's peak\n"
        "  --window A,B           keep the requests arriving in [A, B) seconds\n"
        "  --tile-days N          tile the trace over N days with a diurnal swing\n"
        "  --diurnal-depth D      the swing: rate at the trough is 1-D of the peak (0.5)\n"
        "  --peak-hour H          hour of the daily peak (default 14)\n"
        "  --json                 one JSON object on stdout instead of the table\n"
        "  --out DIR              also write DIR/emulate.json and DIR/power.csv\n"
        "  --plots DIR            draw SVG plots into DIR: power.svg, ttft-cdf.svg,\n"
        "                         tbt-cdf.svg, pools-POLICY.svg, tp-POLICY.svg\n"
        "  --cluster FILE         instead of the policies, the fixed cluster of a router\n"
        "                         configuration (perseus-router --config), routed as the\n"
        "                         router does, on the cost model of perseus-fakeserve\n"
        "                         (no --profile); with it:\n"
        "  --instance-level S     clocks chosen as perseus-instclock does, every S s\n"
        "                         (default: the configured clocks)\n"
        "  --instance-headroom H  the instance level's share of each SLO (0.6)\n"
        "%s"
        "  -h, --help             show this help\n"
        "\n"
        "examples:\n"
        "  perseus infer synth --gpu h100 --model llama2-70b --tp 2,4,8 --out h100.csv\n"
        "  perseus infer emulate --trace AzureLLMInferenceTrace_conv.csv --profile h100.csv \\\n"
        "      --gpus 96 --peak-share 0.8\n"
        "  perseus infer emulate --trace AzureLLMInferenceTrace_conv.csv --cluster router.json \\\n"
        "      --window 0,600 --instance-level 1\n",
        prs_cli_infer_help);
}

static int parse_policies(const char *v, args *a)
{
    a->n_policies = 0;
    if (strcmp(v, "all") == 0) {
        for (int p = 0; p < PRS_INFER_NPOLICY; p++)
            a->policies[a->n_policies++] = p;
        return 0;
    }
    char buf[256];
    if (strlen(v) >= sizeof buf) return prs_cli_usage_error(CMD, "--policy: list too long", NULL);
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        prs_infer_policy p;
        if (prs_infer_policy_parse(t, &p))
            return prs_cli_usage_error(CMD, "--policy: unknown policy", t);
        for (int i = 0; i < a->n_policies; i++)
            if (a->policies[i] == (int)p)
                return prs_cli_usage_error(CMD, "--policy: named twice", t);
        a->policies[a->n_policies++] = p;
    }
    return a->n_policies ? 0 : prs_cli_usage_error(CMD, "--policy: empty list", v);
}

static int own_option(int code, const char *arg, args *a)
{
    switch (code) {
    case O_TRACE:
        a->trace_path = arg;
        return 0;
    case O_POLICY:
        a->policy_set = 1;
        return parse_policies(arg, a);
    case O_JSON:
        a->json = 1;
        return 0;
    case O_SCALE:
        return prs_cli_number(CMD, "--scale", arg, 0, 1, &a->scale) ? 2 : 0;
    case O_SHARE:
        if (prs_cli_number(CMD, "--peak-share", arg, 0, 1, &a->share) || a->share > 1)
            return prs_cli_usage_error(CMD, "--peak-share: expected a share in (0, 1]", arg);
        return 0;
    case O_WINDOW:
        if (prs_cli_infer_pair(arg, &a->win_from, &a->win_to) || a->win_from < 0)
            return prs_cli_usage_error(CMD, "--window: expected A,B seconds, 0 <= A < B", arg);
        return 0;
    case O_TILE:
        if (prs_cli_positive_int(CMD, "--tile-days", arg, &a->tile_days)) return 2;
        if (a->tile_days > 366) return prs_cli_usage_error(CMD, "--tile-days: at most 366", arg);
        return 0;
    case O_DEPTH:
        if (prs_cli_number(CMD, "--diurnal-depth", arg, 0, 0, &a->depth) || a->depth >= 1)
            return prs_cli_usage_error(CMD, "--diurnal-depth: expected a number in [0, 1)", arg);
        return 0;
    case O_PEAK_HOUR:
        if (prs_cli_number(CMD, "--peak-hour", arg, 0, 0, &a->peak_hour) || a->peak_hour >= 24)
            return prs_cli_usage_error(CMD, "--peak-hour: expected an hour in [0, 24)", arg);
        return 0;
    case O_OUTDIR:
        a->out_dir = arg;
        return 0;
    case O_PLOTS:
        a->plots_dir = arg;
        return 0;
    case O_SCALE_SHIFT:
        return prs_cli_number(CMD, "--scale-shift", arg, 0, 1, &a->scale_shift_s) ? 2 : 0;
    case O_CLUSTER:
        a->cl.cluster_path = arg;
        return 0;
    case O_INST_LEVEL:
        return prs_cli_number(CMD, "--instance-level", arg, 0, 1, &a->cl.fixed.instance_period_s)
                   ? 2
                   : 0;
    case O_INST_HEADROOM:
        if (prs_cli_number(CMD, "--instance-headroom", arg, 0, 1, &a->cl.fixed.headroom) ||
            a->cl.fixed.headroom > 1)
            return prs_cli_usage_error(CMD, "--instance-headroom: expected a share in (0, 1]", arg);
        return 0;
    default: /* every code of the table is handled above */
        return prs_cli_usage_error(CMD, "unhandled option", arg ? arg : "");
    }
}

/* --cluster excludes what belongs to the policies; its own options need it. -1: go on. */
static int check_cluster(args *a)
{
    prs_cli_emulate_cluster *c = &a->cl;
    prs_cli_fixed d;
    prs_cli_fixed_default(&d);
    if (!c->cluster_path) {
        if (c->fixed.instance_period_s > 0 || c->fixed.headroom != d.headroom)
            return prs_cli_usage_error(
                CMD, "--instance-level and --instance-headroom need --cluster", NULL);
        return -1;
    }
    const char *bad = a->in.profile_path ? "--profile"
                      : a->policy_set    ? "--policy"
                      : a->scale > 0     ? "--scale"
                      : a->share > 0     ? "--peak-share"
                      : a->tile_days > 0 ? "--tile-days"
                      : a->scale_shift_s ? "--scale-shift"
                      : a->plots_dir     ? "--plots"
                      : a->out_dir       ? "--out"
                                         : NULL;
    if (bad) return prs_cli_usage_error(CMD, "--cluster excludes", bad);
    c->trace_path = a->trace_path;
    c->json = a->json;
    c->fixed.max_batched_tokens = a->in.opts.max_batched_tokens;
    return -1;
}

static int parse_args(int argc, char **argv, args *a)
{
    static const struct option own[] = {
        {"trace", required_argument, 0, O_TRACE},
        {"policy", required_argument, 0, O_POLICY},
        {"json", no_argument, 0, O_JSON},
        {"scale", required_argument, 0, O_SCALE},
        {"peak-share", required_argument, 0, O_SHARE},
        {"window", required_argument, 0, O_WINDOW},
        {"tile-days", required_argument, 0, O_TILE},
        {"diurnal-depth", required_argument, 0, O_DEPTH},
        {"peak-hour", required_argument, 0, O_PEAK_HOUR},
        {"out", required_argument, 0, O_OUTDIR},
        {"scale-shift", required_argument, 0, O_SCALE_SHIFT},
        {"plots", required_argument, 0, O_PLOTS},
        {"cluster", required_argument, 0, O_CLUSTER},
        {"instance-level", required_argument, 0, O_INST_LEVEL},
        {"instance-headroom", required_argument, 0, O_INST_HEADROOM},
        {"help", no_argument, 0, O_HELP}};
    static struct option opts[64];
    size_t n_own = sizeof own / sizeof own[0], n = 0;
    for (size_t i = 0; i < n_own; i++)
        opts[n++] = own[i];
    for (const struct option *p = prs_cli_infer_options; p->name; p++)
        opts[n++] = *p;
    opts[n] = (struct option){0, 0, 0, 0};
    prs_cli_infer_init(&a->in);
    prs_cli_fixed_default(&a->cl.fixed);
    parse_policies("all", a);
    a->depth = 0.5;
    a->peak_hour = 14;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            usage(stdout);
            return 0;
        }
        if (c == '?') return prs_cli_unknown_option(CMD, argv[optind - 1], opts);
        if (c == ':') return prs_cli_usage_error(CMD, "missing value for", argv[optind - 1]);
        int rc = c >= PRS_CLI_INFER_OPT0 ? prs_cli_infer_option(CMD, c, optarg, &a->in)
                                         : own_option(c, optarg, a);
        if (rc) return rc;
    }
    if (optind < argc) return prs_cli_usage_error(CMD, "unexpected argument", argv[optind]);
    if (!a->trace_path) return prs_cli_usage_error(CMD, "missing --trace", NULL);
    if (a->scale > 0 && a->share > 0)
        return prs_cli_usage_error(CMD, "--scale and --peak-share exclude each other", NULL);
    return check_cluster(a);
}

/* Replace *t by the result of a transform (rc its status). */
static int swap_trace(prs_infer_trace *t, prs_infer_trace *next, int rc, prs_error *err)
{
    if (rc) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err->msg);
        return 2;
    }
    prs_infer_trace_free(t);
    *t = *next;
    return 0;
}

/* Load the trace, apply the window and the tiling, build the capacity table on it, then scale
 * (the table depends on the length mix, not on the rate). */
static int prepare(args *a, prs_infer_trace *t, prs_infer_captable *caps, double *factor)
{
    prs_error err = {0};
    prs_infer_trace next;
    if (prs_infer_trace_load(a->trace_path, t, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        return 2;
    }
    int rc = 0;
    if (a->win_to > 0)
        rc = swap_trace(t, &next, prs_infer_trace_window(t, a->win_from, a->win_to, &next, &err),
                        &err);
    if (!rc && a->tile_days > 0)
        rc = swap_trace(t, &next,
                        prs_infer_trace_tile(t, a->tile_days, a->depth, a->peak_hour, &next, &err),
                        &err);
    if (rc) return rc;
    if (prs_infer_captable_build(&a->in.perf, &a->in.opts.classes, &a->in.cap, t, caps, &err)) {
        fprintf(stderr, "perseus %s: %s: %s\n", CMD, a->in.profile_path, err.msg);
        return 2;
    }
    *factor = a->scale > 0 ? a->scale : 1;
    if (a->share > 0 && prs_infer_scale_for_share(t, caps, &a->in.opts, a->share, factor, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        return 2;
    }
    if (*factor != 1 && a->scale_shift_s > 0)
        rc = swap_trace(
            t, &next, prs_infer_trace_scale_shift(t, *factor, a->scale_shift_s, &next, &err), &err);
    else if (*factor != 1)
        rc = swap_trace(t, &next, prs_infer_trace_scale(t, *factor, &next, &err), &err);
    return rc;
}

static double slo_share(const prs_infer_result *r, int k)
{
    return r->lat.done[k] ? 1 - (double)r->lat.late[k] / (double)r->lat.done[k] : NAN;
}

static const prs_infer_result *find(const prs_infer_result *res, int n, prs_infer_policy p)
{
    for (int i = 0; i < n; i++)
        if (res[i].policy == p) return &res[i];
    return NULL;
}

static void print_table(const args *a, const prs_infer_result *res, int n, double lb_j,
                        const prs_infer_trace *t, double factor)
{
    printf("trace %s: %zu requests over %.0f s (rate x%.3f), %d GPUs\n\n", a->trace_path, t->n,
           t->n ? t->reqs[t->n - 1].arrival_s : 0, factor, a->in.opts.gpus);
    printf("%-11s %10s %7s %8s %8s %8s %7s %7s %7s %7s %7s %22s %6s\n", "policy", "energy_kWh",
           "saving", "GPU_h", "P50_kW", "P99_kW", "TTFT50", "TTFT99", "TBT50", "TBT99", "SLO_%",
           "start/resh/stop/clk/no", "rerout");
    const prs_infer_result *single = NULL;
    for (int i = 0; i < n; i++)
        if (res[i].policy == PRS_INFER_SINGLEPOOL) single = &res[i];
    for (int i = 0; i < n; i++) {
        const prs_infer_result *r = &res[i];
        char reconf[48];
        snprintf(reconf, sizeof reconf, "%ld/%ld/%ld/%ld/%ld", r->reconf[0], r->reconf[1],
                 r->reconf[2], r->reconf[3], r->reconf[4]);
        char saving[16] = "      -";
        if (single)
            snprintf(saving, sizeof saving, "%6.1f%%", 100 * (1 - r->energy_j / single->energy_j));
        printf("%-11s %10.3f %7s %8.1f %8.2f %8.2f %7.3f %7.3f %7.3f %7.3f %7.2f %22s %6ld\n",
               prs_infer_policy_name(r->policy), r->energy_j / 3.6e6, saving, r->gpu_hours,
               r->power_p50_w / 1e3, r->power_p99_w / 1e3,
               prs__infer_hist_quantile(&r->lat.ttft[PRS_INFER_ALL], 0.5),
               prs__infer_hist_quantile(&r->lat.ttft[PRS_INFER_ALL], 0.99),
               prs__infer_hist_quantile(&r->lat.tbt[PRS_INFER_ALL], 0.5),
               prs__infer_hist_quantile(&r->lat.tbt[PRS_INFER_ALL], 0.99),
               100 * slo_share(r, PRS_INFER_ALL), reconf, r->rerouted);
    }
    char saving[16] = "      -";
    if (single) snprintf(saving, sizeof saving, "%6.1f%%", 100 * (1 - lb_j / single->energy_j));
    printf("%-11s %10.3f %7s   (the model's optimum per %g s, reconfiguration free)\n",
           "lowerbound", lb_j / 3.6e6, saving, a->in.opts.instance_period_s);
    for (int i = 0; i < n; i++)
        if (res[i].underprovisioned)
            printf("note: %s: the forecast exceeded the cluster %ld times (planned for less)\n",
                   prs_infer_policy_name(res[i].policy), res[i].underprovisioned);
    const prs_infer_result *dyn = find(res, n, PRS_INFER_DYNAMOLLM);
    const prs_infer_result *ph = find(res, n, PRS_INFER_PHASE);
    if (dyn && ph)
        printf("phase against dynamollm: energy %+.1f %%, SLO %.2f %% against %.2f %%\n",
               100 * (ph->energy_j / dyn->energy_j - 1), 100 * slo_share(ph, PRS_INFER_ALL),
               100 * slo_share(dyn, PRS_INFER_ALL));
}

/* Under a power budget: each policy against its own replay without it. */
static void print_cap_table(const args *a, const prs_infer_result *res,
                            const prs_infer_result *free_res, int n)
{
    printf("\nunder a power budget of %.2f kW (against the same policy without it):\n",
           a->in.opts.power_cap_w / 1e3);
    printf("%-11s %10s %10s %9s %9s %9s %8s %8s %8s %6s %6s %6s %7s\n", "policy", "kWh_free",
           "kWh_cap", "P99_free", "P99_cap", "over_s", "over_kW", "SLO_free", "SLO_cap", "late+",
           "short", "unmet", "clk_dn");
    for (int i = 0; i < n; i++) {
        const prs_infer_result *r = &res[i], *f = &free_res[i];
        printf("%-11s %10.3f %10.3f %9.2f %9.2f %9.0f %8.2f %8.2f %8.2f %6ld %6ld %6ld %7ld\n",
               prs_infer_policy_name(r->policy), f->energy_j / 3.6e6, r->energy_j / 3.6e6,
               f->power_p99_w / 1e3, r->power_p99_w / 1e3, r->over_cap_s, r->over_cap_max_w / 1e3,
               100 * slo_share(f, PRS_INFER_ALL), 100 * slo_share(r, PRS_INFER_ALL),
               (long)r->lat.late[PRS_INFER_ALL] - (long)f->lat.late[PRS_INFER_ALL], r->cap_short,
               r->cap_unmet, r->cap_lowered);
    }
}

static json_t *latency_json(const prs_infer_result *r, int k)
{
    json_t *o = json_object();
    json_object_set_new(o, "requests", json_integer((json_int_t)r->lat.done[k]));
    prs_cli_json_set_real(o, "slo_attainment", slo_share(r, k));
    prs_cli_json_set_real(o, "ttft_p50_s", prs__infer_hist_quantile(&r->lat.ttft[k], 0.5));
    prs_cli_json_set_real(o, "ttft_p99_s", prs__infer_hist_quantile(&r->lat.ttft[k], 0.99));
    prs_cli_json_set_real(o, "tbt_p50_s", prs__infer_hist_quantile(&r->lat.tbt[k], 0.5));
    prs_cli_json_set_real(o, "tbt_p99_s", prs__infer_hist_quantile(&r->lat.tbt[k], 0.99));
    return o;
}

/* The budget's effect: what the replay under it measured, and the same policy without it. */
static json_t *cap_json(const args *a, const prs_infer_result *r, const prs_infer_result *f)
{
    json_t *o = json_object();
    prs_cli_json_set_real(o, "cap_w", a->in.opts.power_cap_w);
    prs_cli_json_set_real(o, "over_cap_s", r->over_cap_s);
    prs_cli_json_set_real(o, "over_cap_max_w", r->over_cap_max_w);
    json_object_set_new(o, "cluster_short", json_integer(r->cap_short));
    json_object_set_new(o, "periods_unmet", json_integer(r->cap_unmet));
    json_object_set_new(o, "clock_steps_down", json_integer(r->cap_lowered));
    json_object_set_new(o, "iterations_at_floor", json_integer(r->cap_floor_iters));
    json_t *u = json_object();
    prs_cli_json_set_real(u, "energy_j", f->energy_j);
    prs_cli_json_set_real(u, "power_p50_w", f->power_p50_w);
    prs_cli_json_set_real(u, "power_p99_w", f->power_p99_w);
    prs_cli_json_set_real(u, "slo_attainment", slo_share(f, PRS_INFER_ALL));
    json_object_set_new(u, "late", json_integer((json_int_t)f->lat.late[PRS_INFER_ALL]));
    prs_cli_json_set_real(u, "ttft_p99_s",
                          prs__infer_hist_quantile(&f->lat.ttft[PRS_INFER_ALL], 0.99));
    prs_cli_json_set_real(u, "tbt_p99_s",
                          prs__infer_hist_quantile(&f->lat.tbt[PRS_INFER_ALL], 0.99));
    json_object_set_new(o, "uncapped", u);
    return o;
}

static json_t *policy_json(const args *a, const prs_infer_result *r, const prs_infer_result *single,
                           const prs_infer_result *free_r)
{
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(prs_infer_policy_name(r->policy)));
    prs_cli_json_set_real(o, "energy_j", r->energy_j);
    prs_cli_json_set_real(o, "energy_kwh", r->energy_j / 3.6e6);
    prs_cli_json_set_real(o, "saving_vs_singlepool",
                          single ? 1 - r->energy_j / single->energy_j : NAN);
    prs_cli_json_set_real(o, "gpu_hours", r->gpu_hours);
    json_object_set_new(o, "peak_gpus", json_integer(r->peak_gpus));
    prs_cli_json_set_real(o, "power_p50_w", r->power_p50_w);
    prs_cli_json_set_real(o, "power_p99_w", r->power_p99_w);
    prs_cli_json_set_real(o, "duration_s", r->duration_s);
    prs_cli_json_set_real(o, "slo_attainment", slo_share(r, PRS_INFER_ALL));
    json_object_set_new(o, "late", json_integer((json_int_t)r->lat.late[PRS_INFER_ALL]));
    json_object_set_new(o, "rerouted", json_integer(r->rerouted));
    json_object_set_new(o, "emergencies", json_integer(r->emergencies));
    json_object_set_new(o, "preemptions", json_integer(r->preemptions));
    json_object_set_new(o, "underprovisioned", json_integer(r->underprovisioned));
    json_t *rc = json_object();
    static const char *const kinds[] = {"start", "reshard", "stop", "clock", "skipped"};
    for (int k = 0; k < PRS_INFER_NRECONF; k++)
        json_object_set_new(rc, kinds[k], json_integer(r->reconf[k]));
    json_object_set_new(o, "reconfigurations", rc);
    json_t *lat = json_object();
    for (int k = PRS_INFER_ALL; k >= 0; k--)
        json_object_set_new(lat, prs_infer_class_name(k), latency_json(r, k));
    json_object_set_new(o, "latency", lat);
    if (free_r) json_object_set_new(o, "power_cap", cap_json(a, r, free_r));
    return o;
}

static json_t *result_json(const args *a, const prs_infer_result *res,
                           const prs_infer_result *free_res, int n, double lb_j,
                           const prs_infer_trace *t, double factor)
{
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "command", json_string(CMD));
    json_t *tr = json_object();
    json_object_set_new(tr, "path", json_string(a->trace_path));
    json_object_set_new(tr, "requests", json_integer((json_int_t)t->n));
    prs_cli_json_set_real(tr, "span_s", t->n ? t->reqs[t->n - 1].arrival_s : 0);
    prs_cli_json_set_real(tr, "scale", factor);
    json_object_set_new(o, "trace", tr);
    json_object_set_new(o, "gpus", json_integer(a->in.opts.gpus));
    if (a->in.opts.power_cap_w > 0) prs_cli_json_set_real(o, "power_cap_w", a->in.opts.power_cap_w);
    const prs_infer_result *single = NULL;
    for (int i = 0; i < n; i++)
        if (res[i].policy == PRS_INFER_SINGLEPOOL) single = &res[i];
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(
            arr, policy_json(a, &res[i], single, a->in.opts.power_cap_w > 0 ? &free_res[i] : NULL));
    json_object_set_new(o, "policies", arr);
    json_t *lb = json_object();
    prs_cli_json_set_real(lb, "energy_j", lb_j);
    prs_cli_json_set_real(lb, "energy_kwh", lb_j / 3.6e6);
    prs_cli_json_set_real(lb, "saving_vs_singlepool", single ? 1 - lb_j / single->energy_j : NAN);
    json_object_set_new(o, "lower_bound", lb);
    return o;
}

/* DIR/emulate.json (the --json object) and DIR/power.csv (the cluster's power per bin, one
 * column per policy). */
static int write_out(const args *a, json_t *j, const prs_infer_result *res, int n)
{
    if (prs_cli_make_dir(CMD, a->out_dir)) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/emulate.json", a->out_dir);
    if (json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "perseus %s: cannot write %s\n", CMD, path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/power.csv", a->out_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "perseus %s: cannot write %s: %s\n", CMD, path, strerror(errno));
        return 1;
    }
    double end = 0;
    for (int i = 0; i < n; i++)
        if (res[i].duration_s > end) end = res[i].duration_s;
    double bin = a->in.opts.power_bin_s;
    fprintf(f, "time_s");
    for (int i = 0; i < n; i++)
        fprintf(f, ",%s_w", prs_infer_policy_name(res[i].policy));
    fputc('\n', f);
    for (size_t k = 0; (double)k * bin < end; k++) {
        fprintf(f, "%g", (double)k * bin);
        for (int i = 0; i < n; i++)
            fprintf(f, ",%.1f", k < res[i].meter.n ? res[i].meter.energy_j[k] / bin : 0.0);
        fputc('\n', f);
    }
    if (fclose(f)) {
        fprintf(stderr, "perseus %s: cannot write %s\n", CMD, path);
        return 1;
    }
    return 0;
}

static void free_results(prs_infer_result *res, int n)
{
    for (int k = 0; k < n; k++)
        prs_infer_result_free(&res[k]);
}

/* Every policy asked for; under a power budget, each also without it (into free_res). */
static int run_all(args *a, const prs_infer_trace *t, const prs_infer_captable *caps,
                   prs_infer_result *res, prs_infer_result *free_res, double *lb_j)
{
    prs_error err = {0};
    prs_infer_opts uncapped = a->in.opts;
    uncapped.power_cap_w = 0;
    int capped = a->in.opts.power_cap_w > 0;
    for (int i = 0; i < a->n_policies; i++) {
        int rc = prs_infer_replay(t, &a->in.perf, caps, &a->in.opts, a->policies[i], &res[i], &err);
        if (!rc && capped) {
            rc = prs_infer_replay(t, &a->in.perf, caps, &uncapped, a->policies[i], &free_res[i],
                                  &err);
            if (rc) prs_infer_result_free(&res[i]);
        }
        if (rc) {
            fprintf(stderr, "perseus %s: %s: %s\n", CMD, prs_infer_policy_name(a->policies[i]),
                    err.msg);
            free_results(res, i);
            if (capped) free_results(free_res, i);
            return 2;
        }
    }
    if (prs_infer_lower_bound(t, caps, &a->in.opts, lb_j, &err)) {
        fprintf(stderr, "perseus %s: lower bound: %s\n", CMD, err.msg);
        free_results(res, a->n_policies);
        if (capped) free_results(free_res, a->n_policies);
        return 2;
    }
    return 0;
}

/* --cluster: the trace and its window, then the fixed cluster. */
static int emulate_cluster(args *a, prs_infer_trace *t)
{
    prs_error err = {0};
    prs_infer_trace next;
    if (prs_infer_trace_load(a->trace_path, t, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        return 2;
    }
    int rc = 0;
    if (a->win_to > 0)
        rc = swap_trace(t, &next, prs_infer_trace_window(t, a->win_from, a->win_to, &next, &err),
                        &err);
    return rc ? rc : prs_cli_infer_emulate_cluster(&a->cl, t);
}

int prs_cmd_infer_emulate(int argc, char **argv)
{
    args *a = calloc(1, sizeof *a);
    prs_infer_captable *caps = calloc(1, sizeof *caps);
    prs_infer_result *res = calloc((size_t)2 * PRS_INFER_NPOLICY, sizeof *res);
    prs_infer_result *free_res = res ? res + PRS_INFER_NPOLICY : NULL;
    prs_infer_trace t = {0};
    int rc = a && caps && res ? parse_args(argc, argv, a) : 1;
    int go = rc == -1;
    if (go && a->cl.cluster_path) {
        rc = emulate_cluster(a, &t);
        goto done;
    }
    if (go) rc = prs_cli_infer_ready(CMD, &a->in);
    double factor = 1, lb_j = 0;
    if (!rc && go)
        rc = prepare(a, &t, caps, &factor);
    else if (!go)
        goto done;
    if (!rc) rc = run_all(a, &t, caps, res, free_res, &lb_j);
    if (!rc) {
        int capped = a->in.opts.power_cap_w > 0;
        json_t *j = a->json || a->out_dir
                        ? result_json(a, res, free_res, a->n_policies, lb_j, &t, factor)
                        : NULL;
        if (a->out_dir) rc = write_out(a, j, res, a->n_policies);
        if (!rc && a->plots_dir) rc = prs_cli_infer_plots(CMD, a->plots_dir, res, a->n_policies);
        if (a->json) {
            if (prs_cli_json_print(json_incref(j), JSON_INDENT(2))) rc = 1;
        } else if (!rc) {
            print_table(a, res, a->n_policies, lb_j, &t, factor);
            if (capped) print_cap_table(a, res, free_res, a->n_policies);
        }
        json_decref(j);
        free_results(res, a->n_policies);
        if (capped) free_results(free_res, a->n_policies);
    }
done:
    if (a) prs_cli_infer_free(&a->in);
    prs_infer_trace_free(&t);
    free(res);
    free(caps);
    free(a);
    return rc;
}
