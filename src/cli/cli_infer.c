/* Options shared by `perseus infer emulate` and `perseus infer plan` (cli_infer.h): every
 * constant of the serving model and the policies is an option, parsed strictly here once. */
#include "cli_infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/numfmt.h"

enum {
    O_PROFILE = PRS_CLI_INFER_OPT0,
    O_GPUS,
    O_MBT,
    O_IN_CLASSES,
    O_OUT_CLASSES,
    O_TTFT,
    O_TBT,
    O_PERIODS,
    O_PEAK_WINDOW,
    O_HEADROOM,
    O_MAX_UTIL,
    O_ORACLE,
    O_ACCURACY,
    O_START,
    O_RESHARD,
    O_CLOCK,
    O_NO_EMERGENCIES,
    O_EMERGENCY_SHARE,
    O_UNITS,
    O_PROBES,
    O_CLOCKS,
    O_SEED,
    O_LATE_MARGIN,
    O_POWER_CAP,
    O_PHASE_SLACK,
    O_RUN_STEPS,
};

const struct option prs_cli_infer_options[] = {
    {"profile", required_argument, 0, O_PROFILE},
    {"gpus", required_argument, 0, O_GPUS},
    {"max-batched-tokens", required_argument, 0, O_MBT},
    {"in-classes", required_argument, 0, O_IN_CLASSES},
    {"out-classes", required_argument, 0, O_OUT_CLASSES},
    {"ttft-slo", required_argument, 0, O_TTFT},
    {"tbt-slo", required_argument, 0, O_TBT},
    {"periods", required_argument, 0, O_PERIODS},
    {"peak-window", required_argument, 0, O_PEAK_WINDOW},
    {"headroom", required_argument, 0, O_HEADROOM},
    {"max-util", required_argument, 0, O_MAX_UTIL},
    {"oracle", no_argument, 0, O_ORACLE},
    {"predictor-accuracy", required_argument, 0, O_ACCURACY},
    {"start-time", required_argument, 0, O_START},
    {"reshard-time", required_argument, 0, O_RESHARD},
    {"clock-time", required_argument, 0, O_CLOCK},
    {"no-emergencies", no_argument, 0, O_NO_EMERGENCIES},
    {"emergency-wait", required_argument, 0, O_EMERGENCY_SHARE},
    {"units", required_argument, 0, O_UNITS},
    {"probe-requests", required_argument, 0, O_PROBES},
    {"clocks", required_argument, 0, O_CLOCKS},
    {"seed", required_argument, 0, O_SEED},
    {"late-margin", required_argument, 0, O_LATE_MARGIN},
    {"power-cap", required_argument, 0, O_POWER_CAP},
    {"phase-slack", required_argument, 0, O_PHASE_SLACK},
    {"run-steps", required_argument, 0, O_RUN_STEPS},
    {0, 0, 0, 0}};

const char prs_cli_infer_help[] =
    "  --profile FILE         the phase-level performance profile (required)\n"
    "  --gpus N               GPUs of the cluster (default 96)\n"
    "  --max-batched-tokens N prefill token budget of an iteration (default 8192)\n"
    "  --in-classes A,B       input classes: < A, < B, longer (default 256,1024)\n"
    "  --out-classes A,B      output classes (default 100,350)\n"
    "  --ttft-slo S,M,L       P99 time-to-first-token SLO by input class, s (0.25,0.5,1.5)\n"
    "  --tbt-slo S            time-between-tokens SLO, s, on each request's mean gap (0.1)\n"
    "  --periods C,P,I        cluster, pool and instance periods, s (default 1800,300,5)\n"
    "  --peak-window S        a period's load is its peak rate over windows of S s (60)\n"
    "  --headroom H           plan for the forecast times H >= 1 (default 1)\n"
    "  --max-util U           plan instances for at most U of their capacity (0.8)\n"
    "  --oracle               forecast from the coming period instead of the past one\n"
    "  --predictor-accuracy A share of output classes predicted right (default 1)\n"
    "  --start-time S         seconds to start an instance (load weights; default 30)\n"
    "  --reshard-time S       seconds to re-form a TP group over resident weights (5)\n"
    "  --clock-time S         seconds an instance pauses for a clock change (0.01)\n"
    "  --no-emergencies       no max-clock / re-route reaction to a long queue\n"
    "  --emergency-wait F     a queue is long when its head waited F x its TTFT SLO (0.5)\n"
    "  --units N              sizing granularity: units of load per instance (24)\n"
    "  --probe-requests N     requests per capacity probe (600)\n"
    "  --clocks N             clocks of the profile the policies choose among (6)\n"
    "  --seed N               seed of the probes and the length predictor (1)\n"
    "  --late-margin M        a capacity probe may have M x 1 % of its requests late (0.5)\n"
    "  --power-cap W          the cluster's power budget, W: every policy runs under it\n"
    "  --phase-slack S        phase policy: a decode step may take S longer (0.1)\n"
    "  --run-steps N          decode steps replayed as one event (64; 1: one at a time,\n"
    "                         the same results, slower)\n";

void prs_cli_infer_init(prs_cli_infer *c)
{
    memset(c, 0, sizeof *c);
    prs_infer_opts_default(&c->opts);
    prs_infer_cap_opts_default(&c->cap);
}

/* Comma-separated numbers into v[n]: 0, or -1 unless exactly n. */
static int numbers(const char *s, double *v, int n)
{
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (k == n || prs_num_parse_double(t, &v[k])) return -1;
        k++;
    }
    return k == n ? 0 : -1;
}

int prs_cli_infer_pair(const char *v, double *a, double *b)
{
    double x[2];
    if (numbers(v, x, 2) || !(x[0] < x[1])) return -1;
    *a = x[0];
    *b = x[1];
    return 0;
}

static int bad(const char *cmd, const char *opt, const char *want, const char *arg)
{
    fprintf(stderr, "perseus %s: --%s: expected %s, got '%s'\n", cmd, opt, want, arg);
    return 2;
}

static int option_lists(const char *cmd, int code, const char *arg, prs_cli_infer *c)
{
    double v[3];
    prs_infer_opts *o = &c->opts;
    switch (code) {
    case O_IN_CLASSES:
    case O_OUT_CLASSES: {
        int *lim = code == O_IN_CLASSES ? o->classes.in_limit : o->classes.out_limit;
        if (numbers(arg, v, 2) || !(v[0] >= 1 && v[1] > v[0] && v[1] <= 1e6) || v[0] != (int)v[0] ||
            v[1] != (int)v[1])
            return bad(cmd, code == O_IN_CLASSES ? "in-classes" : "out-classes",
                       "two increasing integers A,B >= 1", arg);
        lim[0] = (int)v[0];
        lim[1] = (int)v[1];
        return 0;
    }
    case O_TTFT:
        if (numbers(arg, v, 3) || !(v[0] > 0 && v[1] > 0 && v[2] > 0))
            return bad(cmd, "ttft-slo", "three seconds > 0 (S,M,L)", arg);
        memcpy(o->classes.ttft_slo_s, v, sizeof o->classes.ttft_slo_s);
        return 0;
    case O_PERIODS:
        if (numbers(arg, v, 3) || !(v[2] > 0 && v[1] >= v[2] && v[0] >= v[1]))
            return bad(cmd, "periods", "C,P,I seconds with C >= P >= I > 0", arg);
        o->cluster_period_s = v[0];
        o->pool_period_s = v[1];
        o->instance_period_s = v[2];
        return 0;
    default:
        return 1;
    }
}

static int option_number(const char *cmd, int code, const char *arg, prs_cli_infer *c)
{
    prs_infer_opts *o = &c->opts;
    const char *name = NULL;
    for (const struct option *p = prs_cli_infer_options; p->name; p++)
        if (p->val == code) name = p->name;
    double x;
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name ? name : "?");
    switch (code) {
    case O_TBT:
    case O_PEAK_WINDOW:
        if (prs_cli_number(cmd, opt, arg, 0, 1, &x)) return 2;
        *(code == O_TBT ? &o->classes.tbt_slo_s : &o->peak_window_s) = x;
        return 0;
    case O_LATE_MARGIN:
        if (prs_cli_number(cmd, opt, arg, 0, 1, &x) || x > 1)
            return bad(cmd, "late-margin", "a number in (0, 1]", arg);
        c->cap.late_margin = x;
        return 0;
    case O_POWER_CAP:
        if (prs_cli_number(cmd, opt, arg, 0, 1, &x)) return 2;
        o->power_cap_w = x;
        return 0;
    case O_PHASE_SLACK:
        if (prs_cli_number(cmd, opt, arg, 0, 0, &x) || x > 1)
            return bad(cmd, "phase-slack", "a share in [0, 1]", arg);
        o->phase_slack = x;
        return 0;
    case O_EMERGENCY_SHARE:
        if (prs_cli_number(cmd, opt, arg, 0, 1, &x)) return 2;
        o->emergency_share = x;
        return 0;
    case O_HEADROOM:
        if (prs_cli_number(cmd, opt, arg, 1, 0, &x)) return 2;
        o->headroom = x;
        return 0;
    case O_ACCURACY:
        if (prs_cli_number(cmd, opt, arg, 0, 0, &x) || x > 1)
            return bad(cmd, "predictor-accuracy", "a share in [0, 1]", arg);
        o->predictor_accuracy = x;
        return 0;
    case O_MAX_UTIL:
        if (prs_cli_number(cmd, opt, arg, 0, 1, &x) || x > 1)
            return bad(cmd, "max-util", "a share in (0, 1]", arg);
        o->max_util = x;
        return 0;
    case O_START:
    case O_RESHARD:
    case O_CLOCK:
        if (prs_cli_number(cmd, opt, arg, 0, 0, &x)) return 2;
        *(code == O_START ? &o->start_s : code == O_RESHARD ? &o->reshard_s : &o->clock_s) = x;
        return 0;
    default:
        return 1;
    }
}

static int option_int(const char *cmd, int code, const char *arg, prs_cli_infer *c)
{
    int n;
    const char *name = NULL;
    for (const struct option *p = prs_cli_infer_options; p->name; p++)
        if (p->val == code) name = p->name;
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name ? name : "?");
    switch (code) {
    case O_GPUS:
    case O_MBT:
    case O_UNITS:
    case O_PROBES:
    case O_CLOCKS:
    case O_SEED:
    case O_RUN_STEPS:
        if (prs_cli_positive_int(cmd, opt, arg, &n)) return 2;
        break;
    default:
        return 1;
    }
    if (code == O_GPUS && n > 100000) return bad(cmd, "gpus", "at most 100000", arg);
    if (code == O_UNITS && n > PRS_INFER_MAX_UNITS) return bad(cmd, "units", "at most 64", arg);
    if (code == O_PROBES && n > 1000000) return bad(cmd, "probe-requests", "at most 1e6", arg);
    if (code == O_RUN_STEPS && n > 4096) return bad(cmd, "run-steps", "at most 4096", arg);
    if (code == O_RUN_STEPS) c->opts.run_steps = n;
    if (code == O_GPUS) c->opts.gpus = n;
    if (code == O_MBT) c->opts.max_batched_tokens = c->cap.max_batched_tokens = n;
    if (code == O_UNITS) c->opts.units_top = n;
    if (code == O_PROBES) c->cap.probe_requests = n;
    if (code == O_CLOCKS) c->cap.max_clocks = n;
    if (code == O_SEED) c->opts.seed = c->cap.seed = (uint64_t)n;
    return 0;
}

int prs_cli_infer_option(const char *cmd, int code, const char *arg, prs_cli_infer *c)
{
    if (code == O_PROFILE) {
        c->profile_path = arg;
        return 0;
    }
    if (code == O_ORACLE || code == O_NO_EMERGENCIES) {
        *(code == O_ORACLE ? &c->opts.oracle : &c->opts.emergencies) = code == O_ORACLE;
        return 0;
    }
    int rc = option_lists(cmd, code, arg, c);
    if (rc == 1) rc = option_number(cmd, code, arg, c);
    if (rc == 1) rc = option_int(cmd, code, arg, c);
    return rc == 1 ? prs_cli_usage_error(cmd, "unknown option", arg) : rc;
}

int prs_cli_infer_ready(const char *cmd, prs_cli_infer *c)
{
    if (!c->profile_path) return prs_cli_usage_error(cmd, "missing --profile", NULL);
    prs_error err = {0};
    if (prs_infer_opts_check(&c->opts, &err)) {
        fprintf(stderr, "perseus %s: %s\n", cmd, err.msg);
        return 2;
    }
    if (prs_infer_profile_load(c->profile_path, &c->profile, &err)) {
        fprintf(stderr, "perseus %s: %s\n", cmd, err.msg);
        return 2;
    }
    prs_infer_profile_perf(c->profile, &c->perf);
    return 0;
}

void prs_cli_infer_free(prs_cli_infer *c)
{
    prs_infer_profile_free(c->profile);
    c->profile = NULL;
}
