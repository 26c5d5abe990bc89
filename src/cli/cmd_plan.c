/* perseus plan / perseus plan export: run the planner on a stage profile and write the
 * frontier directory; print one stored plan. Each is parse (options into plan_args or export_args),
 * run (the planner, or the stored plan's clocks) and print (the frontier directory, or the plan
 * as JSON or the reference's list). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/numfmt.h"
#include "perseus/planner.h"

static const char plan_usage[] =
    "usage: perseus plan --profile FILE --stages S --microbatches M --unit-time SEC\n"
    "                    --blocking-power W [--schedule NAME [--virtual-stages V]]\n"
    "                    [--change-cost-us US] [--cost-model exp|hull] [--frontier "
    "auto|raw|clean]\n"
    "                    [--max-points N] [--threads N] [--polish auto|none|runs|all]\n"
    "                    [--always-use-noise-factor] [--filter artifact|zeus] [--quiet]\n"
    "                    --out DIR\n"
    "                    [--power-cap W] [--cap-on avg|peak] [--window SEC]\n"
    "                    [--cap-sweep N [--cap-plot FILE]]\n"
    "       perseus plan export DIR (--index K | --time SEC) [--format json|lowtime]\n"
    "\n"
    "Compute the iteration time-energy frontier of a pipeline from a stage profile\n"
    "(CSV: stage,instruction,frequency,time,energy, or Zeus's rank-level CSV with\n"
    "rank,dp_rank,pp_rank,tp_rank too) and one frequency plan per point.\n"
    "\n"
    "  --profile FILE         stage profile CSV\n"
    "  --stages S             pipeline stages (profile stages 0..S-1 are used)\n"
    "  --microbatches M       microbatches per iteration\n"
    "  --unit-time SEC        time quantum of the planner, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved (Megatron-LM)\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= 2);\n"
    "                         the profile then has stages * V stages (chunk c on GPU c mod "
    "S)\n" PRS_CLI_CHANGE_COST_HELP
    "  --cost-model MODEL     exp: the reference's exponential fit (default);\n"
    "                         hull: convex hull of measured options, closer to optimal\n"
    "  --frontier KIND        clean: only plans no faster plan beats (evaluated energy plus\n"
    "                         blocking power over the time gap), evaluated times strictly\n"
    "                         falling; raw: one plan per planner iteration; auto (default):\n"
    "                         clean for hull, raw for exp (the reference's frontier)\n"
    "  --max-points N         refuse, before planning, a frontier longer than N points\n"
    "                         (default 1000000), naming the unit time that fits\n"
    "  --threads N            hull: threads that turn the planner's relaxed plans into\n"
    "                         clocks; 0 (default): one per processor, at most 16. The\n"
    "                         frontier is the same for every N\n"
    "  --polish KIND          plans polished by a local search that lowers their evaluated\n"
    "                         energy without lengthening their time: runs (the fastest plan,\n"
    "                         the one a job runs without a straggler), all (every plan, then\n"
    "                         cleaned again), none; auto (default): runs for hull, none for exp\n"
    "  --always-use-noise-factor  the reference's 5% noise tolerance for every option set\n"
    "  --filter KIND          exp: which options become candidates. artifact (default):\n"
    "                         not dominated in time and measured energy; zeus: not\n"
    "                         dominated in time and energy less blocking power (Zeus)\n"
    "  --out DIR              output directory (created if missing): frontier.csv,\n"
    "                         frontier-detail.csv, plans.prs\n"
    "  --quiet                no progress or warnings\n" PRS_CLI_POWERCAP_HELP
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  perseus synth --gpu a100 --stages 4 --out prof.csv\n"
    "  perseus plan --profile prof.csv --stages 4 --microbatches 8 --unit-time 0.001 \\\n"
    "               --blocking-power 83.64 --cost-model hull --out fr\n"
    "  perseus plan export fr --index 0\n";

static const char export_usage[] =
    "usage: perseus plan export DIR (--index K | --time SEC) [--format json|lowtime]\n"
    "\n"
    "Print one plan of a frontier written by 'perseus plan --out DIR'.\n"
    "\n"
    "  --index K          the K-th frontier point (0 = slowest)\n"
    "  --time SEC         the least-energy plan whose evaluated iteration time is <= SEC\n"
    "  --format json      plan with its figures and each stage's computations (default)\n"
    "  --format lowtime   the reference's per-stage nested list of clocks\n"
    "  -h, --help         this help\n"
    "\n"
    "examples:\n"
    "  perseus plan export fr --index 0            # the slowest, least-energy plan\n"
    "  perseus plan export fr --time 1.7 --format lowtime\n";

static int usage_error(const char *cmd, const char *msg, const char *arg)
{
    /* prs_cli_usage_error prints and returns 2; the 2 is stated here so that static analysis
     * (which cannot see into cli_util.c) knows a usage error is never success. */
    prs_cli_usage_error(cmd, msg, arg);
    return 2;
}

/* "F3": forward of microbatch 3; interleaved adds the model chunk: "F3@5". */
static json_t *json_ops(const prs_pipeline *pipe, int s)
{
    json_t *ops = json_array();
    for (int i = 0; i < prs_ops_per_stage(pipe); i++) {
        prs_instr in = PRS_FORWARD;
        int mb = 0, chunk = s;
        char name[48];
        prs_op_describe_chunk(pipe, s, i, &in, &mb, &chunk);
        if (pipe->virtual_stages > 1)
            snprintf(name, sizeof name, "%c%d@%d", in == PRS_FORWARD ? 'F' : 'B', mb, chunk);
        else
            snprintf(name, sizeof name, "%c%d", in == PRS_FORWARD ? 'F' : 'B', mb);
        json_array_append_new(ops, json_string(name));
    }
    return ops;
}

static int print_json_plan(const prs_frontier *f, size_t k, const int *clocks)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    const prs_frontier_point *pt = prs_frontier_point_at(f, k);
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "index", json_integer((json_int_t)k));
    json_object_set_new(o, "time_units", json_integer(pt->time_units));
    prs_cli_json_set_real(o, "time_s", pt->time_s);
    prs_cli_json_set_real(o, "energy_j", pt->energy_j);
    prs_cli_json_set_real(o, "eval_time_s", pt->eval_time_s);
    prs_cli_json_set_real(o, "eval_energy_j", pt->eval_energy_j);
    if (pt->bound_j > 0) { /* hull: the LP relaxation's lower bound, the certified gap */
        prs_cli_json_set_real(o, "bound_j", pt->bound_j);
        prs_cli_json_set_real(o, "gap_pct", 100 * (pt->eval_energy_j / pt->bound_j - 1));
    }
    json_object_set_new(o, "stages", json_integer(pipe->stages));
    json_object_set_new(o, "microbatches", json_integer(pipe->microbatches));
    json_object_set_new(o, "schedule", json_string(prs_schedule_name(pipe->schedule)));
    json_object_set_new(o, "virtual_stages",
                        json_integer(pipe->virtual_stages > 1 ? pipe->virtual_stages : 1));
    prs_cli_json_set_real(o, "unit_time_s", pipe->unit_time_s);
    prs_cli_json_set_real(o, "blocking_power_w", pipe->blocking_power_w);
    if (pipe->change_cost_s > 0) { /* docs/planner.md, 'Clock changes' */
        prs_cli_json_set_real(o, "change_cost_s", pipe->change_cost_s);
        json_object_set_new(o, "clock_changes",
                            json_integer((json_int_t)prs_plan_count_changes(pipe, clocks)));
    }
    json_object_set_new(o, "cost_model",
                        json_string(prs_cost_model_name(prs_frontier_cost_model(f))));
    json_t *plan = json_array();
    int per = prs_ops_per_stage(pipe);
    for (int s = 0; s < pipe->stages; s++) {
        json_t *st = json_object(), *mhz = json_array();
        for (int i = 0; i < per; i++)
            json_array_append_new(mhz, json_integer(clocks[s * per + i]));
        json_object_set_new(st, "stage", json_integer(s));
        json_object_set_new(st, "ops", json_ops(pipe, s));
        json_object_set_new(st, "clocks_mhz", mhz);
        json_array_append_new(plan, st);
    }
    json_object_set_new(o, "plan", plan);
    return prs_cli_json_print(o, JSON_INDENT(2));
}

static void print_lowtime_plan(const prs_frontier *f, const int *clocks)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    int per = prs_ops_per_stage(pipe);
    putchar('[');
    for (int s = 0; s < pipe->stages; s++) {
        printf("%s[", s ? ", " : "");
        for (int i = 0; i < per; i++)
            printf("%s%d", i ? ", " : "", clocks[s * per + i]);
        putchar(']');
    }
    puts("]");
}

/* plan export: the command line, parsed and checked. */
typedef struct export_args {
    const char *dir, *index_arg, *format;
    double time_s; /* --time, or -1 */
} export_args;

static int parse_export(int argc, char **argv, export_args *a, int *done)
{
    static const struct option opts[] = {{"index", required_argument, 0, 'i'},
                                         {"time", required_argument, 0, 't'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    a->index_arg = NULL;
    a->format = "json";
    a->time_s = -1;
    *done = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            a->index_arg = optarg;
            break;
        case 't':
            if (prs_cli_number("plan export", "--time", optarg, 0, 1, &a->time_s)) return 2;
            break;
        case 'f':
            a->format = optarg;
            break;
        case 'h':
            fputs(export_usage, stdout);
            *done = 1;
            return 0;
        case ':':
            return usage_error("plan export", "missing value for", argv[optind - 1]);
        default:
            prs_cli_unknown_option("plan export", argv[optind - 1], opts);
            return 2;
        }
    }
    if (optind + 1 != argc)
        return usage_error("plan export", "expected exactly one frontier directory", NULL);
    a->dir = argv[optind];
    if ((a->index_arg != NULL) == (a->time_s >= 0))
        return usage_error("plan export", "give exactly one of --index K or --time SEC", NULL);
    /* getopt_long gives required_argument options a non-NULL optarg; the analyzer takes the
     * option values for one symbol it may assume NULL */
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker)
    if (strcmp(a->format, "json") != 0 && strcmp(a->format, "lowtime") != 0)
        return usage_error("plan export", "--format: expected json or lowtime, got", a->format);
    return 0;
}

/* The frontier point a selects and its clocks (*clocks owned by the caller); 0 or the status. */
static int run_export(const export_args *a, const prs_frontier *f, size_t *k, int **clocks)
{
    prs_error err = {0, ""};
    if (a->index_arg) {
        long idx;
        if (prs_num_parse_long(a->index_arg, &idx) || idx < 0 ||
            (size_t)idx >= prs_frontier_size(f)) {
            fprintf(stderr, "perseus plan export: --index: expected 0..%zu, got '%s'\n",
                    prs_frontier_size(f) ? prs_frontier_size(f) - 1 : 0, a->index_arg);
            return 2;
        }
        *k = (size_t)idx;
    } else if (prs_frontier_find_time(f, a->time_s, k, &err)) {
        fprintf(stderr, "perseus plan export: --time: %s\n", err.msg);
        return 2;
    }
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    *clocks = malloc(sizeof **clocks * (size_t)(pipe->stages * prs_ops_per_stage(pipe)));
    if (!*clocks || prs_frontier_plan(f, *k, *clocks, &err)) {
        fprintf(stderr, "perseus plan export: %s\n", *clocks ? err.msg : "out of memory");
        return 1;
    }
    return 0;
}

static int cmd_export(int argc, char **argv)
{
    export_args a;
    int done = 0, rc = parse_export(argc, argv, &a, &done);
    if (rc || done) return rc;
    prs_error err = {0, ""};
    prs_frontier *f = NULL;
    if (prs_frontier_load(a.dir, &f, &err)) {
        fprintf(stderr, "perseus plan export: %s\n", err.msg);
        return 2;
    }
    size_t k = 0;
    int *clocks = NULL;
    rc = run_export(&a, f, &k, &clocks);
    if (!rc && strcmp(a.format, "json") == 0)
        rc = print_json_plan(f, k, clocks) ? 1 : 0;
    else if (!rc)
        print_lowtime_plan(f, clocks);
    free(clocks);
    prs_frontier_free(f);
    return rc;
}

/* plan: the command line, parsed and checked. */
typedef struct plan_args {
    const char *profile_path, *out_dir;
    int quiet;
    prs_cli_pipeline pl;
    prs_cli_powercap cap;
} plan_args;

static int parse_plan(int argc, char **argv, plan_args *a, int *done)
{
    enum { OPT_PIPE = 'P', OPT_CAP = 'C' };
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         PRS_CLI_PIPELINE_OPTIONS(OPT_PIPE),
                                         PRS_CLI_COST_MODEL_OPTION(OPT_PIPE),
                                         PRS_CLI_FRONTIER_OPTIONS(OPT_PIPE),
                                         PRS_CLI_POWERCAP_OPTIONS(OPT_CAP),
                                         PRS_CLI_UNITS_OPTION(OPT_PIPE),
                                         {"always-use-noise-factor", no_argument, 0, 'n'},
                                         {"filter", required_argument, 0, 'F'},
                                         {"out", required_argument, 0, 'o'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    prs_cli_pipeline_init(&a->pl);
    prs_cli_powercap_init(&a->cap);
    *done = 0;
    int c, li = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        switch (c) {
        case 'p':
            a->profile_path = optarg;
            break;
        case OPT_PIPE:
            if (prs_cli_pipeline_option("plan", opts[li].name, optarg, &a->pl)) return 2;
            break;
        case OPT_CAP:
            if (prs_cli_powercap_option("plan", opts[li].name, optarg, &a->cap)) return 2;
            break;
        case 'n':
            a->pl.plan.always_noise_factor = 1;
            break;
        case 'F':
            if (prs_option_filter_parse(optarg, &a->pl.plan.option_filter))
                return usage_error("plan", "--filter: expected artifact or zeus, got", optarg);
            break;
        case 'o':
            a->out_dir = optarg;
            break;
        case 'q':
            a->quiet = 1;
            break;
        case 'h':
            fputs(plan_usage, stdout);
            *done = 1;
            return 0;
        case ':':
            return usage_error("plan", "missing value for", argv[optind - 1]);
        default:
            prs_cli_unknown_option("plan", argv[optind - 1], opts);
            return 2;
        }
    }
    if (optind < argc) return usage_error("plan", "unexpected argument", argv[optind]);
    const char *missing = !a->profile_path ? "--profile"
                          : prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED)
                              ? prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED)
                          : !a->out_dir ? "--out"
                                        : NULL;
    if (missing) return usage_error("plan", "missing required option", missing);
    if (prs_cli_powercap_check(&a->cap))
        return usage_error("plan", prs_cli_powercap_check(&a->cap), NULL);
    prs_error err = {0, ""};
    if (prs_pipeline_check(&a->pl.plan.pipe, &err)) return usage_error("plan", err.msg, NULL);
    return 0;
}

/* Load the profile (into *profile, owned by the caller) and plan the frontier into *f; 0, or
 * the exit status (message printed). */
static int run_plan(const plan_args *a, prs_profile **profile, prs_frontier **f)
{
    prs_error err = {0, ""};
    prs_plan_opts o = a->pl.plan;
    if (prs_cli_profile_load("plan", a->profile_path, &a->pl, &o.pipe, profile)) return 2;
    /* Why there is nothing to plan, before the planner warns about every computation. */
    if (prs_plan_check(*profile, &o.pipe, "--unit-time", &err)) {
        fprintf(stderr, "perseus plan: error: %s\n", err.msg);
        return 2;
    }
    prs_cli_progress ps;
    prs_cli_progress_init(&ps, "plan", !a->quiet);
    o.progress = prs_cli_on_progress;
    o.warn = a->quiet ? NULL : prs_cli_on_warn;
    o.ud = &ps;
    int rc = prs_plan(*profile, &o, f, &err);
    if (rc) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        return rc == PRS_EINVAL || rc == PRS_EPARSE ? 2 : 1;
    }
    return prs_cli_frontier_usable("plan", *profile, *f);
}

/* Write the frontier directory and its one-line summary on stderr; 0 or the exit status. */
static int write_plan(const plan_args *a, const prs_frontier *f)
{
    prs_error err = {0, ""};
    if (prs_cli_make_dir("plan", a->out_dir)) return 1;
    if (prs_frontier_save(f, a->out_dir, &err)) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        return 1;
    }
    if (!a->quiet && prs_frontier_size(f) > 0) {
        const prs_frontier_point *p0 = prs_frontier_point_at(f, 0),
                                 *z = prs_frontier_point_at(f, prs_frontier_size(f) - 1);
        char gap[64] = "";
        if (z->bound_j > 0) /* hull: its certified gap */
            snprintf(gap, sizeof gap, " (%.3f %% over the LP bound)",
                     100 * (z->eval_energy_j / z->bound_j - 1));
        fprintf(stderr,
                "perseus plan: %zu plans, %.6g s .. %.6g s; fastest plan evaluates to %.6g s, "
                "%.6g J%s; wrote %s/frontier.csv\n",
                prs_frontier_size(f), p0->time_s, z->time_s, z->eval_time_s, z->eval_energy_j, gap,
                a->out_dir);
    }
    return 0;
}

int prs_cmd_plan(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "export") == 0) return cmd_export(argc - 1, argv + 1);
    plan_args a;
    int done = 0, rc = parse_plan(argc, argv, &a, &done);
    if (rc || done) return rc;
    prs_frontier *f = NULL;
    prs_profile *profile = NULL;
    rc = run_plan(&a, &profile, &f);
    if (!rc) rc = write_plan(&a, f);
    if (!rc) rc = prs_cli_powercap_run("plan", &a.cap, profile, f, 1, NULL);
    prs_frontier_free(f);
    prs_profile_free(profile);
    return rc;
}
