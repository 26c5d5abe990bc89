/* perseus noise: what noisy profiles cost (include/perseus/noise.h, docs/noise.md). For each
 * jitter level and cost model, draws noisy copies of a true profile, plans on each with today's
 * planner and the robust one, and judges every plan on the truth. Parse (parse_args), run
 * (run_levels: prs_noise_study per level), print (print_table, print_json, write_svg). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "perseus/noise.h"
#include "perseus/numfmt.h"
#include "perseus/planner.h"
#include "perseus/plot.h"

#define MAX_LEVELS 64

static const char noise_usage[] =
    "usage: perseus noise --profile FILE --stages S --microbatches M --unit-time SEC\n"
    "                     --blocking-power W --jitter FRAC[,FRAC...] --repeats R --seeds N\n"
    "                     [--cost-model exp|hull] [--energy-jitter FRAC] [--refresh SEC]\n"
    "                     [--bias FRAC] [--straggler S] [--seed N] [--schedule NAME\n"
    "                     [--virtual-stages V]] [--margin SD] [--budget FRAC]\n"
    "                     [--truth-unit SEC] [--oracle [--oracle-margin FRAC]]\n"
    "                     [--svg FILE] [--json] [--jobs N] [--quiet]\n"
    "\n"
    "Treat the profile as the truth, measure it N times with noise, plan on every noisy\n"
    "copy with today's planner (baseline) and the robust one, and judge each plan on the\n"
    "truth: how much slower the fastest plan is than the true T_min (overshoot), how much\n"
    "more energy it takes than the plan made on the truth (regret), the saving promised\n"
    "against the one obtained, and the same for the plan looked up for a straggler.\n"
    "\n"
    "  --profile FILE         the true stage profile (CSV)\n"
    "  --stages S, --microbatches M, --unit-time SEC, --blocking-power W,\n"
    "  --schedule NAME, --virtual-stages V\n"
    "                         the pipeline, as 'perseus plan' takes it\n"
    "  --jitter FRAC,...      relative standard deviation of one time measurement, one\n"
    "                         study per value (0 .. 0.2; e.g. 0.01,0.02,0.05)\n"
    "  --repeats R            measurements averaged per (stage, instruction, clock)\n"
    "  --seeds N              noisy profiles per level (medians and maxima over them)\n"
    "  --cost-model MODEL     exp or hull (default: both)\n"
    "  --energy-jitter FRAC   energy jitter as a multiple of the time jitter (default 1)\n"
    "  --refresh SEC          energy counter refresh period (default 0: exact counter)\n"
    "  --bias FRAC            systematic per-clock error, relative (default 0)\n"
    "  --straggler S          straggler slowdown for the lookup check (default 1.2)\n"
    "  --seed N               first seed (default 1)\n"
    "  --margin SD            robust planner: slack margin in standard errors (default\n"
    "                         0.5)\n"
    "  --budget FRAC          robust planner: cap of the time budget's margin (default\n"
    "                         0.003)\n"
    "  --truth-unit SEC       judge the plans on the truth at this time unit, at most\n"
    "                         --unit-time (default: --unit-time); e.g. 1e-6 judges\n"
    "                         measured times, not times cut to whole planning units\n"
    "  --oracle               instead of measuring with noise, plan on the shape oracle:\n"
    "                         the truth with one error of scale per group of identical\n"
    "                         types, as small as all their measurements allow (what a\n"
    "                         planner that knew every curve's shape would plan on)\n"
    "  --oracle-margin FRAC   the oracle's slack margin: every clock but a type's\n"
    "                         fastest takes this fraction more time (default 0, at most\n"
    "                         0.1)\n"
    "  --svg FILE             also draw overshoot and regret versus jitter\n"
    "  --json                 one JSON object instead of the table\n"
    "  --jobs N               threads for the seeds (default: the online CPUs, at most\n"
    "                         256); the figures are the same for any N\n"
    "  --quiet                no progress on stderr\n"
    "  -h, --help             this help\n";

typedef struct noise_args {
    const char *profile_path, *svg_path;
    double jitters[MAX_LEVELS];
    int njitters, repeats, seeds, json, quiet, models_given, jobs, oracle, oracle_margin_given;
    double energy_ratio, refresh_s, bias, straggler, truth_unit_s, oracle_margin;
    long seed;
    prs_robust_opts robust;
    prs_cli_pipeline pl;
} noise_args;

/* One study: a jitter level under one cost model. */
typedef struct noise_level {
    double jitter;
    prs_cost_model model;
    prs_noise_truth truth;
    prs_noise_summary sum[PRS_NOISE_NPLANNERS];
    prs_noise_outcome *runs; /* [planner * seeds + k] */
} noise_level;

static int usage_error(const char *msg, const char *arg)
{
    return prs_cli_usage_error("noise", msg, arg);
}

static int parse_jitters(const char *v, noise_args *a)
{
    char buf[1024];
    size_t len = strlen(v);
    if (len >= sizeof buf) return usage_error("--jitter: list too long", NULL);
    memcpy(buf, v, len + 1);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        double x;
        if (prs_num_parse_double(tok, &x) || !(x >= 0) || x > PRS_NOISE_MAX_JITTER)
            return usage_error("--jitter: expected fractions in [0, 0.2], got", tok);
        if (a->njitters == MAX_LEVELS) return usage_error("--jitter: at most 64 levels", NULL);
        a->jitters[a->njitters++] = x;
    }
    return a->njitters ? 0 : usage_error("--jitter: expected fractions, got", v);
}

static int parse_fraction(const char *opt, const char *v, double max, double *out)
{
    if (prs_num_parse_double(v, out) || !(*out >= 0) || *out > max) {
        fprintf(stderr, "perseus noise: %s: expected a number in [0, %g], got '%s'\n", opt, max, v);
        return 2;
    }
    return 0;
}

static int parse_option(int c, const char *name, const char *v, noise_args *a)
{
    switch (c) {
    case 'p':
        a->profile_path = v;
        return 0;
    case 'P':
        if (strcmp(name, "cost-model") == 0) a->models_given = 1;
        return prs_cli_pipeline_option("noise", name, v, &a->pl) ? 2 : 0;
    case 'J':
        return parse_jitters(v, a) ? 2 : 0;
    case 'R':
        return prs_cli_positive_int("noise", "--repeats", v, &a->repeats) ? 2 : 0;
    case 'N':
        return prs_cli_positive_int("noise", "--seeds", v, &a->seeds) ? 2 : 0;
    case 'E':
        return parse_fraction("--energy-jitter", v, 10, &a->energy_ratio);
    case 'Q':
        return parse_fraction("--refresh", v, 10, &a->refresh_s);
    case 'B':
        return parse_fraction("--bias", v, PRS_NOISE_MAX_JITTER, &a->bias);
    case 'S':
        return prs_cli_number("noise", "--straggler", v, 1, 0, &a->straggler) ? 2 : 0;
    case 'D':
        if (prs_num_parse_long(v, &a->seed) == 0 && a->seed >= 0) return 0;
        return usage_error("--seed: expected an integer >= 0, got", v);
    case 'M':
        return parse_fraction("--margin", v, 100, &a->robust.margin_sd);
    case 'U':
        return parse_fraction("--budget", v, 0.1, &a->robust.budget_max);
    case 'Y':
        return prs_cli_number("noise", "--truth-unit", v, 0, 1, &a->truth_unit_s) ? 2 : 0;
    case 'O':
        a->oracle = 1;
        return 0;
    case 'K':
        a->oracle_margin_given = 1;
        return parse_fraction("--oracle-margin", v, PRS_NOISE_ORACLE_MAX_MARGIN, &a->oracle_margin);
    case 'G':
        a->svg_path = v;
        return 0;
    case 'j':
        a->json = 1;
        return 0;
    case 'T':
        if (prs_cli_positive_int("noise", "--jobs", v, &a->jobs)) return 2;
        return a->jobs > PRS_NOISE_MAX_THREADS ? usage_error("--jobs: at most 256", NULL) : 0;
    default:
        a->quiet = 1;
        return 0;
    }
}

static int check_args(const noise_args *a)
{
    const char *missing = !a->profile_path ? "--profile"
                          : prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED)
                              ? prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED)
                          : !a->njitters ? "--jitter"
                          : !a->repeats  ? "--repeats"
                          : !a->seeds    ? "--seeds"
                                         : NULL;
    if (missing) return usage_error("missing required option", missing);
    prs_error perr = {0, ""};
    if (prs_pipeline_check(&a->pl.plan.pipe, &perr)) return usage_error(perr.msg, NULL);
    for (int i = 0; i < a->njitters; i++)
        if (a->jitters[i] * a->energy_ratio > PRS_NOISE_MAX_JITTER)
            return usage_error("--energy-jitter: energy jitter above 0.2 at some level", NULL);
    if (a->repeats > PRS_NOISE_MAX_REPEATS) return usage_error("--repeats: at most 1000", NULL);
    if (a->seeds > 100000) return usage_error("--seeds: at most 100000", NULL);
    if (a->truth_unit_s > a->pl.plan.pipe.unit_time_s)
        return usage_error("--truth-unit: at most --unit-time", NULL);
    if (a->oracle_margin_given && !a->oracle)
        return usage_error("--oracle-margin: needs", "--oracle");
    if (a->oracle && (a->refresh_s > 0 || a->bias > 0))
        return usage_error("--oracle: models jitter only, not",
                           a->refresh_s > 0 ? "--refresh" : "--bias");
    return 0;
}

static int parse_args(int argc, char **argv, noise_args *a, int *done)
{
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         PRS_CLI_PIPELINE_OPTIONS('P'),
                                         PRS_CLI_COST_MODEL_OPTION('P'),
                                         PRS_CLI_UNITS_OPTION('P'),
                                         {"jitter", required_argument, 0, 'J'},
                                         {"repeats", required_argument, 0, 'R'},
                                         {"seeds", required_argument, 0, 'N'},
                                         {"energy-jitter", required_argument, 0, 'E'},
                                         {"refresh", required_argument, 0, 'Q'},
                                         {"bias", required_argument, 0, 'B'},
                                         {"straggler", required_argument, 0, 'S'},
                                         {"seed", required_argument, 0, 'D'},
                                         {"margin", required_argument, 0, 'M'},
                                         {"budget", required_argument, 0, 'U'},
                                         {"truth-unit", required_argument, 0, 'Y'},
                                         {"oracle", no_argument, 0, 'O'},
                                         {"oracle-margin", required_argument, 0, 'K'},
                                         {"svg", required_argument, 0, 'G'},
                                         {"json", no_argument, 0, 'j'},
                                         {"jobs", required_argument, 0, 'T'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, li = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        if (c == 'h') {
            fputs(noise_usage, stdout);
            *done = 1;
            return 0;
        }
        if (c == ':') return usage_error("missing value for", argv[optind - 1]);
        if (c == '?') return prs_cli_unknown_option("noise", argv[optind - 1], opts);
        int rc = parse_option(c, opts[li].name, optarg, a);
        if (rc) return rc;
    }
    if (optind < argc) return usage_error("unexpected argument", argv[optind]);
    return check_args(a);
}

/* ---- Run ---- */

/* --jobs, or the online CPUs; never more than the seeds. */
static int study_threads(const noise_args *a)
{
    long n = a->jobs;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > PRS_NOISE_MAX_THREADS) n = PRS_NOISE_MAX_THREADS;
    return (int)(n < a->seeds ? n : a->seeds);
}

/* Progress over every level's seeds: a level reports its own seeds from offset on. */
typedef struct noise_progress {
    prs_cli_progress ps;
    long offset, total;
} noise_progress;

static int on_seed(void *ud, long done, long total)
{
    (void)total; /* the level's; the whole run's is np->total */
    noise_progress *np = ud;
    return prs_cli_on_progress(&np->ps, np->offset + done, np->total);
}

static int run_level(const noise_args *a, const prs_profile *truth, noise_level *lv,
                     noise_progress *np)
{
    prs_noise_study_opts o;
    memset(&o, 0, sizeof o);
    o.plan = a->pl.plan;
    o.plan.cost_model = lv->model;
    o.model.time_jitter = lv->jitter;
    o.model.energy_jitter = lv->jitter * a->energy_ratio;
    o.model.repeats = a->repeats;
    o.model.refresh_s = a->refresh_s;
    o.model.clock_bias = a->bias;
    o.seeds = a->seeds;
    o.seed_base = (uint64_t)a->seed;
    o.straggler = a->straggler;
    o.truth_unit_s = a->truth_unit_s;
    o.oracle = a->oracle;
    o.oracle_margin = a->oracle_margin;
    o.robust = a->robust;
    o.threads = study_threads(a);
    o.progress = on_seed;
    o.ud = np;
    lv->runs = malloc(sizeof *lv->runs * (size_t)PRS_NOISE_NPLANNERS * (size_t)a->seeds);
    prs_error err = {0, ""};
    int rc = lv->runs ? prs_noise_study(truth, &o, &lv->truth, lv->runs, lv->sum, &err)
                      : prs_error_set(&err, PRS_ENOMEM, "out of memory");
    if (rc) {
        fprintf(stderr, "perseus noise: %s\n", err.msg);
        return rc == PRS_EINVAL || rc == PRS_EPARSE ? 2 : 1;
    }
    return 0;
}

static int run_levels(const noise_args *a, noise_level *lv, int *nlv)
{
    prs_profile *truth = NULL;
    if (prs_cli_profile_load("noise", a->profile_path, &a->pl, &a->pl.plan.pipe, &truth)) return 2;
    static const prs_cost_model both[] = {PRS_COST_EXP, PRS_COST_HULL};
    int nm = a->models_given ? 1 : 2, rc = 0;
    noise_progress np = {.total = (long)nm * a->njitters * a->seeds};
    prs_cli_progress_init(&np.ps, "noise", !a->quiet && !a->json);
    np.ps.what = "studying";
    np.ps.unit = "seeds";
    *nlv = 0;
    for (int m = 0; m < nm && !rc; m++)
        for (int j = 0; j < a->njitters && !rc; j++) {
            noise_level *l = &lv[(*nlv)++];
            l->jitter = a->jitters[j];
            l->model = a->models_given ? a->pl.plan.cost_model : both[m];
            rc = run_level(a, truth, l, &np);
            np.offset += a->seeds;
        }
    if (rc && np.ps.bar && np.ps.last_pct >= 0) fputc('\n', stderr); /* below a broken bar */
    prs_profile_free(truth);
    return rc;
}

/* ---- Print ---- */

static json_t *json_summary(const prs_noise_summary *s, const prs_noise_outcome *runs, int n)
{
    json_t *o = json_object();
    prs_cli_json_set_real(o, "overshoot_median_pct", s->overshoot_median_pct);
    prs_cli_json_set_real(o, "overshoot_max_pct", s->overshoot_max_pct);
    prs_cli_json_set_real(o, "regret_median_pct", s->regret_median_pct);
    prs_cli_json_set_real(o, "regret_max_pct", s->regret_max_pct);
    prs_cli_json_set_real(o, "promised_saving_median_pct", s->promised_saving_median_pct);
    prs_cli_json_set_real(o, "obtained_saving_median_pct", s->obtained_saving_median_pct);
    prs_cli_json_set_real(o, "waste_median_pct", s->waste_median_pct);
    prs_cli_json_set_real(o, "waste_max_pct", s->waste_max_pct);
    json_t *st = json_object();
    prs_cli_json_set_real(st, "overshoot_median_pct", s->straggler_overshoot_median_pct);
    prs_cli_json_set_real(st, "overshoot_max_pct", s->straggler_overshoot_max_pct);
    prs_cli_json_set_real(st, "regret_median_pct", s->straggler_regret_median_pct);
    prs_cli_json_set_real(st, "regret_max_pct", s->straggler_regret_max_pct);
    json_object_set_new(o, "straggler", st);
    json_t *seeds = json_array();
    for (int k = 0; k < n; k++) {
        json_t *r = json_object();
        prs_cli_json_set_real(r, "overshoot_pct", runs[k].overshoot_pct);
        prs_cli_json_set_real(r, "regret_pct", runs[k].regret_pct);
        prs_cli_json_set_real(r, "promised_saving_pct", runs[k].promised_saving_pct);
        prs_cli_json_set_real(r, "obtained_saving_pct", runs[k].obtained_saving_pct);
        prs_cli_json_set_real(r, "straggler_overshoot_pct", runs[k].straggler_overshoot_pct);
        prs_cli_json_set_real(r, "straggler_regret_pct", runs[k].straggler_regret_pct);
        prs_cli_json_set_real(r, "waste_pct", runs[k].waste_pct);
        json_array_append_new(seeds, r);
    }
    json_object_set_new(o, "seeds", seeds);
    return o;
}

static json_t *json_level(const noise_args *a, const noise_level *l)
{
    json_t *o = json_object();
    prs_cli_json_set_real(o, "jitter", l->jitter);
    prs_cli_json_set_real(o, "energy_jitter", l->jitter * a->energy_ratio);
    json_object_set_new(o, "cost_model", json_string(prs_cost_model_name(l->model)));
    prs_cli_json_set_real(o, "t_min_s", l->truth.t_min_s);
    prs_cli_json_set_real(o, "energy_j", l->truth.energy_j);
    prs_cli_json_set_real(o, "saving_pct", l->truth.saving_pct);
    prs_cli_json_set_real(o, "straggler_time_s", l->truth.straggler_time_s);
    json_object_set_new(o, "baseline",
                        json_summary(&l->sum[PRS_NOISE_BASELINE], l->runs, a->seeds));
    json_object_set_new(o, "robust",
                        json_summary(&l->sum[PRS_NOISE_ROBUST], l->runs + a->seeds, a->seeds));
    return o;
}

/* The time unit the plans are judged in on the truth. */
static double judge_unit(const noise_args *a)
{
    return a->truth_unit_s > 0 ? a->truth_unit_s : a->pl.plan.pipe.unit_time_s;
}

static int print_json(const noise_args *a, const noise_level *lv, int nlv)
{
    const prs_pipeline *pipe = &a->pl.plan.pipe;
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string("perseus.noise/1"));
    json_object_set_new(o, "profile", json_string(a->profile_path));
    json_object_set_new(o, "stages", json_integer(pipe->stages));
    json_object_set_new(o, "microbatches", json_integer(pipe->microbatches));
    json_object_set_new(o, "schedule", json_string(prs_schedule_name(pipe->schedule)));
    prs_cli_json_set_real(o, "unit_time_s", pipe->unit_time_s);
    prs_cli_json_set_real(o, "truth_unit_s", judge_unit(a));
    prs_cli_json_set_real(o, "blocking_power_w", pipe->blocking_power_w);
    json_object_set_new(o, "repeats", json_integer(a->repeats));
    json_object_set_new(o, "seeds", json_integer(a->seeds));
    json_object_set_new(o, "seed", json_integer(a->seed));
    prs_cli_json_set_real(o, "energy_jitter_ratio", a->energy_ratio);
    prs_cli_json_set_real(o, "refresh_s", a->refresh_s);
    prs_cli_json_set_real(o, "clock_bias", a->bias);
    prs_cli_json_set_real(o, "straggler", a->straggler);
    prs_cli_json_set_real(o, "robust_margin_sd", a->robust.margin_sd);
    prs_cli_json_set_real(o, "robust_budget_max", a->robust.budget_max);
    json_object_set_new(o, "oracle", json_boolean(a->oracle));
    prs_cli_json_set_real(o, "oracle_margin", a->oracle_margin);
    json_t *levels = json_array();
    for (int i = 0; i < nlv; i++)
        json_array_append_new(levels, json_level(a, &lv[i]));
    json_object_set_new(o, "levels", levels);
    return prs_cli_json_print(o, JSON_INDENT(2));
}

static void print_table(const noise_args *a, const noise_level *lv, int nlv)
{
    const prs_pipeline *pipe = &a->pl.plan.pipe;
    printf("profile    %s (the truth, plans judged on it at a unit of %g s)\n", a->profile_path,
           judge_unit(a));
    printf("pipeline   %d stages, %d microbatches, %s, unit %g s, blocking power %g W\n",
           pipe->stages, pipe->microbatches, prs_schedule_name(pipe->schedule), pipe->unit_time_s,
           pipe->blocking_power_w);
    printf("noise      %d repeats averaged, energy jitter %g x time jitter, counter refresh %g s, "
           "clock bias %g; %d seeds from %ld; straggler %g\n",
           a->repeats, a->energy_ratio, a->refresh_s, a->bias, a->seeds, a->seed, a->straggler);
    printf("robust     margin %g standard errors, budget at most %g\n", a->robust.margin_sd,
           a->robust.budget_max);
    if (a->oracle)
        printf("oracle     every seed is the shape oracle (the truth's shapes, scales measured), "
               "margin %g\n",
               a->oracle_margin);
    putchar('\n');
    printf("%-5s %7s %-8s  %9s %9s  %9s %9s  %9s %9s  %9s %9s  %9s %9s\n", "model", "jitter",
           "planner", "over med", "over max", "regr med", "regr max", "wast med", "wast max",
           "promised", "obtained", "strag ov", "strag rg");
    printf("%-5s %7s %-8s  %9s %9s  %9s %9s  %9s %9s  %9s %9s  %9s %9s\n", "", "%", "", "%", "%",
           "%", "%", "%", "%", "saving %", "saving %", "max %", "med %");
    for (int i = 0; i < nlv; i++)
        for (int pl = 0; pl < PRS_NOISE_NPLANNERS; pl++) {
            const prs_noise_summary *s = &lv[i].sum[pl];
            printf("%-5s %7.2f %-8s  %9.3f %9.3f  %9.3f %9.3f  %9.3f %9.3f  %9.2f %9.2f  %9.3f "
                   "%9.3f\n",
                   pl ? "" : prs_cost_model_name(lv[i].model), 100.0 * lv[i].jitter,
                   pl ? "robust" : "baseline", s->overshoot_median_pct, s->overshoot_max_pct,
                   s->regret_median_pct, s->regret_max_pct, s->waste_median_pct, s->waste_max_pct,
                   s->promised_saving_median_pct, s->obtained_saving_median_pct,
                   s->straggler_overshoot_max_pct, s->straggler_regret_median_pct);
        }
    if (nlv)
        printf("\ntrue T_min %.6g s (%s), saving without noise %.2f %%\n", lv[0].truth.t_min_s,
               prs_cost_model_name(lv[0].model), lv[0].truth.saving_pct);
}

static int write_svg(const noise_args *a, const noise_level *lv, int nlv)
{
    if (nlv < 1) return 0;
    prs_noise_plot_level *pts = calloc((size_t)nlv, sizeof *pts);
    if (!pts) return 1;
    for (int i = 0; i < nlv; i++) {
        pts[i].jitter_pct = 100.0 * lv[i].jitter;
        pts[i].cost_model = prs_cost_model_name(lv[i].model);
        for (int pl = 0; pl < PRS_NOISE_NPLANNERS; pl++) {
            const prs_noise_outcome *r = lv[i].runs + (size_t)pl * (size_t)a->seeds;
            pts[i].overshoot_pct[pl] = &r->overshoot_pct;
            pts[i].regret_pct[pl] = &r->regret_pct;
        }
    }
    char sub[256];
    snprintf(sub, sizeof sub, "%s, %d stages, %d microbatches, %d repeats, %d seeds",
             a->profile_path, a->pl.plan.pipe.stages, a->pl.plan.pipe.microbatches, a->repeats,
             a->seeds);
    prs_noise_plot np = {
        NULL, sub, pts, (size_t)nlv, (size_t)a->seeds, sizeof(prs_noise_outcome) / sizeof(double)};
    prs_error err = {0, ""};
    FILE *f = fopen(a->svg_path, "w");
    int rc = f ? prs_plot_noise(f, &np, &err) : prs_error_set(&err, PRS_EIO, "cannot write");
    if (f && fclose(f) && !rc) rc = prs_error_set(&err, PRS_EIO, "cannot write");
    free(pts);
    if (rc) fprintf(stderr, "perseus noise: %s: %s\n", a->svg_path, err.msg);
    return rc ? 1 : 0;
}

int prs_cmd_noise(int argc, char **argv)
{
    noise_args a;
    memset(&a, 0, sizeof a);
    prs_cli_pipeline_init(&a.pl);
    a.energy_ratio = 1.0;
    a.straggler = 1.2;
    a.seed = 1;
    prs_robust_opts_default(&a.robust);
    int done = 0, nlv = 0, rc = parse_args(argc, argv, &a, &done);
    if (rc || done) return rc;
    noise_level *lv = calloc((size_t)2 * MAX_LEVELS, sizeof *lv);
    if (!lv) {
        fputs("perseus noise: out of memory\n", stderr);
        return 1;
    }
    rc = run_levels(&a, lv, &nlv);
    if (!rc && a.svg_path) rc = write_svg(&a, lv, nlv);
    if (!rc) {
        if (a.json)
            rc = print_json(&a, lv, nlv) ? 1 : 0;
        else
            print_table(&a, lv, nlv);
        if (!rc) rc = fflush(stdout) == 0 ? 0 : 1;
    }
    for (int i = 0; i < nlv; i++)
        free(lv[i].runs);
    free(lv);
    return rc;
}
