/* perseus evaluate: iteration time and energy of one plan against a stage profile, with each
 * GPU's busy and idle (blocking) time and energy. The plan is a frontier point (by index or
 * time), a uniform clock, all-max or the EnvPipe-style baseline (include/perseus/emulator.h);
 * the figures are the core's exact evaluation (prs_plan_timeline). Parse (parse_args: options
 * into evaluate_args), run (run: load, plan, evaluate), print (print_table or print_json). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/numfmt.h"
#include "perseus/emulator.h"
#include "perseus/planner.h"
#include "perseus/power.h"

static const char evaluate_usage[] =
    "usage: perseus evaluate --profile FILE --stages S --microbatches M --unit-time SEC\n"
    "                        --blocking-power W [--schedule NAME [--virtual-stages V]]\n"
    "                        (--all-max | --uniform MHZ|auto | --envpipe) [--json]\n"
    "       perseus evaluate --profile FILE --frontier DIR (--index K | --time SEC) [--json]\n"
    "                        [--window SEC] [--power-csv FILE]\n"
    "\n"
    "Iteration time and energy of a plan, and each GPU's busy time, idle time, busy energy\n"
    "and idle (blocking) energy: computations take their clock's measured time quantized\n"
    "to the unit, and their measured energy; a GPU burns the blocking power while idle.\n"
    "Energies are per GPU of a tensor-parallel group. The pipeline's power (the sum over\n"
    "its GPUs): average, and peak over a sliding window, iterations back to back.\n"
    "\n"
    "  --profile FILE         stage profile CSV\n"
    "  --stages S             GPUs in the pipeline\n"
    "  --microbatches M       microbatches per iteration\n"
    "  --unit-time SEC        time quantum, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= "
    "2)\n" PRS_CLI_CHANGE_COST_HELP
    "  --all-max              every computation at its highest profiled clock\n"
    "  --uniform MHZ          every computation at MHZ (profiled for every computation);\n"
    "                         'auto': the least-energy uniform clock no slower than all-max\n"
    "  --envpipe              EnvPipe-style: the last GPU at all-max, the others slowed\n"
    "                         into their slack without lengthening the iteration\n"
    "  --frontier DIR         a frontier written by 'perseus plan --out DIR'; the pipeline\n"
    "                         options may be left out (they are read from DIR) and must\n"
    "                         match DIR when given\n"
    "  --index K              the K-th frontier point (0 = slowest)\n"
    "  --time SEC             the least-energy frontier plan whose evaluated time is <= SEC\n"
    "  --window SEC           window of the peak power (default 1)\n"
    "  --power-csv FILE       write the power over one iteration (start_s,end_s,power_w,\n"
    "                         energy_j: one row per step) to FILE\n"
    "  --json                 one JSON object instead of the table\n"
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  perseus evaluate --profile prof.csv --stages 4 --microbatches 8 --unit-time 0.001 \\\n"
    "                   --blocking-power 83.64 --all-max\n"
    "  perseus evaluate --profile prof.csv --frontier fr --index 0 --json\n";

static int usage_error(const char *msg, const char *arg)
{
    /* prs_cli_usage_error prints and returns 2; stated here for static analysis (see cmd_plan.c).
     */
    prs_cli_usage_error("evaluate", msg, arg);
    return 2;
}

typedef enum source { SRC_NONE, SRC_ALLMAX, SRC_UNIFORM, SRC_ENVPIPE, SRC_FRONTIER } source;

typedef struct stage_sum {
    long busy_units;
    double busy_energy_j;
} stage_sum;

typedef struct result {
    const char *plan; /* "all-max", "uniform", "envpipe", "frontier" */
    int freq_mhz;     /* uniform */
    long index;       /* frontier: point index, else -1 */
    const prs_frontier_point *point;
    double time_s, energy_j;
    stage_sum *stages;
    prs_plan_power power;
} result;

/* The command line, parsed and checked. */
typedef struct evaluate_args {
    const char *profile_path, *frontier_dir, *index_arg, *uniform_arg;
    double time_s; /* --time, or -1 */
    source src;
    int nsources;
    int freq_mhz; /* --uniform MHZ; 0 for 'auto' */
    int json;
    double window_s;
    const char *power_csv;
    prs_cli_pipeline pl;
} evaluate_args;

/* What the evaluation owns. */
typedef struct evaluation {
    prs_frontier *f;
    prs_profile *profile;
    prs_pipeline pipe;
    prs_timeline_op *ops;
    int *clocks;
    size_t nops;
    result r;
} evaluation;

static int print_json(const char *profile_path, const prs_pipeline *pipe, const result *r)
{
    double tau = pipe->unit_time_s, pb = pipe->blocking_power_w;
    long T = lround(r->time_s / tau);
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "profile", json_string(profile_path));
    json_object_set_new(o, "plan", json_string(r->plan));
    if (r->freq_mhz) json_object_set_new(o, "freq_mhz", json_integer(r->freq_mhz));
    if (r->point) {
        json_object_set_new(o, "index", json_integer(r->index));
        prs_cli_json_set_real(o, "predicted_time_s", r->point->time_s);
        prs_cli_json_set_real(o, "predicted_energy_j", r->point->energy_j);
    }
    json_object_set_new(o, "stages", json_integer(pipe->stages));
    json_object_set_new(o, "microbatches", json_integer(pipe->microbatches));
    json_object_set_new(o, "schedule", json_string(prs_schedule_name(pipe->schedule)));
    json_object_set_new(o, "virtual_stages",
                        json_integer(pipe->virtual_stages > 1 ? pipe->virtual_stages : 1));
    prs_cli_json_set_real(o, "unit_time_s", tau);
    prs_cli_json_set_real(o, "blocking_power_w", pb);
    prs_cli_json_set_real(o, "time_s", r->time_s);
    prs_cli_json_set_real(o, "energy_j", r->energy_j);
    prs_cli_json_set_real(o, "avg_power_w", r->power.avg_power_w);
    prs_cli_json_set_real(o, "peak_power_w", r->power.peak_power_w);
    prs_cli_json_set_real(o, "window_s", r->power.window_s);
    prs_cli_json_set_real(o, "peak_start_s", r->power.peak_start_s);
    prs_cli_json_set_real(o, "max_power_w", r->power.max_power_w);
    json_t *per = json_array();
    for (int s = 0; s < pipe->stages; s++) {
        const stage_sum *st = &r->stages[s];
        double idle = (double)(T - st->busy_units) * tau;
        json_t *row = json_object();
        json_object_set_new(row, "stage", json_integer(s));
        prs_cli_json_set_real(row, "busy_time_s", (double)st->busy_units * tau);
        prs_cli_json_set_real(row, "idle_time_s", idle);
        prs_cli_json_set_real(row, "busy_energy_j", st->busy_energy_j);
        prs_cli_json_set_real(row, "idle_energy_j", pb * idle);
        json_array_append_new(per, row);
    }
    json_object_set_new(o, "per_stage", per);
    return prs_cli_json_print(o, JSON_INDENT(2));
}

static void print_table(const char *profile_path, const prs_pipeline *pipe, const result *r)
{
    double tau = pipe->unit_time_s, pb = pipe->blocking_power_w;
    long T = lround(r->time_s / tau);
    printf("profile    %s\n", profile_path);
    printf("pipeline   %d stages, %d microbatches, %s", pipe->stages, pipe->microbatches,
           prs_schedule_name(pipe->schedule));
    if (pipe->virtual_stages > 1) printf(" (%d virtual stages)", pipe->virtual_stages);
    printf("; unit %g s, blocking power %g W\n", tau, pb);
    printf("plan       %s", r->plan);
    if (r->freq_mhz) printf(", %d MHz for every computation", r->freq_mhz);
    if (r->point)
        printf(", frontier point %ld (planned %.6g s, predicted %.6g J)", r->index,
               r->point->time_s, r->point->energy_j);
    printf("\niteration  %.6g s, %.6g J (per GPU of a tensor-parallel group)\n", r->time_s,
           r->energy_j);
    printf("power      %.6g W average, %.6g W peak over %g s (from %.6g s), %.6g W at most\n\n",
           r->power.avg_power_w, r->power.peak_power_w, r->power.window_s, r->power.peak_start_s,
           r->power.max_power_w);
    printf("%5s  %10s  %10s  %15s  %15s  %12s\n", "stage", "busy (s)", "idle (s)",
           "busy energy (J)", "idle energy (J)", "energy (J)");
    double tb = 0, ti = 0, te_b = 0, te_i = 0;
    for (int s = 0; s < pipe->stages; s++) {
        const stage_sum *st = &r->stages[s];
        double busy = (double)st->busy_units * tau, idle = (double)(T - st->busy_units) * tau;
        printf("%5d  %10.4f  %10.4f  %15.3f  %15.3f  %12.3f\n", s, busy, idle, st->busy_energy_j,
               pb * idle, st->busy_energy_j + pb * idle);
        tb += busy;
        ti += idle;
        te_b += st->busy_energy_j;
        te_i += pb * idle;
    }
    printf("%5s  %10.4f  %10.4f  %15.3f  %15.3f  %12.3f\n", "total", tb, ti, te_b, te_i,
           te_b + te_i);
}

/* Parse argv into a and check the combination; 0, or the exit status (*done: help printed). */
static int parse_args(int argc, char **argv, evaluate_args *a, int *done)
{
    enum { OPT_PIPE = 'P' };
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         PRS_CLI_PIPELINE_OPTIONS(OPT_PIPE),
                                         {"frontier", required_argument, 0, 'f'},
                                         {"index", required_argument, 0, 'i'},
                                         {"time", required_argument, 0, 't'},
                                         {"uniform", required_argument, 0, 'U'},
                                         {"all-max", no_argument, 0, 'A'},
                                         {"envpipe", no_argument, 0, 'E'},
                                         {"json", no_argument, 0, 'j'},
                                         {"window", required_argument, 0, 'w'},
                                         {"power-csv", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->time_s = -1;
    a->window_s = PRS_POWER_WINDOW_S;
    a->src = SRC_NONE;
    prs_cli_pipeline_init(&a->pl);
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
            if (prs_cli_pipeline_option("evaluate", opts[li].name, optarg, &a->pl)) return 2;
            break;
        case 'f':
            a->frontier_dir = optarg;
            a->src = SRC_FRONTIER;
            a->nsources++;
            break;
        case 'i':
            a->index_arg = optarg;
            break;
        case 't':
            if (prs_cli_number("evaluate", "--time", optarg, 0, 1, &a->time_s)) return 2;
            break;
        case 'U':
            a->uniform_arg = optarg;
            a->src = SRC_UNIFORM;
            a->nsources++;
            break;
        case 'A':
            a->src = SRC_ALLMAX;
            a->nsources++;
            break;
        case 'E':
            a->src = SRC_ENVPIPE;
            a->nsources++;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'w':
            if (prs_cli_number("evaluate", "--window", optarg, 0, 1, &a->window_s)) return 2;
            break;
        case 'c':
            a->power_csv = optarg;
            break;
        case 'h':
            fputs(evaluate_usage, stdout);
            *done = 1;
            return 0;
        case ':':
            return usage_error("missing value for", argv[optind - 1]);
        default:
            return prs_cli_unknown_option("evaluate", argv[optind - 1], opts);
        }
    }
    if (optind < argc) return usage_error("unexpected argument", argv[optind]);
    if (!a->profile_path) return usage_error("missing required option", "--profile");
    if (a->nsources != 1)
        return usage_error("give exactly one plan: --frontier DIR, --uniform MHZ, --all-max or "
                           "--envpipe",
                           NULL);
    if (a->src == SRC_FRONTIER && (a->index_arg != NULL) == (a->time_s >= 0))
        return usage_error("--frontier needs exactly one of --index K or --time SEC", NULL);
    if (a->src != SRC_FRONTIER && (a->index_arg || a->time_s >= 0))
        return usage_error("--index and --time select a point of a --frontier", NULL);
    /* getopt_long gives required_argument options a non-NULL optarg; the analyzer takes the
     * option values for one symbol it may assume NULL */
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker)
    if (a->src == SRC_UNIFORM && strcmp(a->uniform_arg, "auto") != 0 &&
        (prs_num_parse_int(a->uniform_arg, &a->freq_mhz) || a->freq_mhz < 1))
        return usage_error("--uniform: expected a clock in MHz or 'auto', got", a->uniform_arg);
    if (a->src != SRC_FRONTIER) {
        const char *missing = prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED);
        if (missing) return usage_error("missing required option", missing);
    }
    return 0;
}

/* Load the frontier (or check the pipeline) and the profile, and allocate the plan. */
static int load_inputs(const evaluate_args *a, evaluation *ev, prs_error *err)
{
    ev->pipe = a->pl.plan.pipe;
    if (a->src == SRC_FRONTIER) {
        if (prs_frontier_load(a->frontier_dir, &ev->f, err)) {
            fprintf(stderr, "perseus evaluate: %s\n", err->msg);
            return 2;
        }
        ev->pipe = *prs_frontier_pipeline(ev->f);
        if (prs_cli_pipeline_match("evaluate", &a->pl, &ev->pipe, a->frontier_dir)) return 2;
    } else if (prs_pipeline_check(&ev->pipe, err)) {
        return usage_error(err->msg, NULL);
    }
    if (prs_profile_load(a->profile_path, &ev->profile, err) ||
        prs_profile_check_stages(ev->profile, prs_pipeline_chunks(&ev->pipe), err)) {
        fprintf(stderr, "perseus evaluate: %s\n", err->msg);
        return 2;
    }
    ev->nops = (size_t)ev->pipe.stages * (size_t)prs_ops_per_stage(&ev->pipe);
    ev->clocks = malloc(sizeof *ev->clocks * ev->nops);
    ev->ops = malloc(sizeof *ev->ops * ev->nops);
    ev->r.stages = calloc((size_t)ev->pipe.stages, sizeof *ev->r.stages);
    if (!ev->clocks || !ev->ops || !ev->r.stages) {
        fputs("perseus evaluate: out of memory\n", stderr);
        return 1;
    }
    return 0;
}

/* The frontier point --index or --time selects: 0, or 2 with the message printed. */
static int pick_point(const evaluate_args *a, const prs_frontier *f, size_t *k, prs_error *err)
{
    if (a->index_arg) {
        long idx;
        if (prs_num_parse_long(a->index_arg, &idx) || idx < 0 ||
            (size_t)idx >= prs_frontier_size(f)) {
            fprintf(stderr, "perseus evaluate: --index: expected 0..%zu, got '%s'\n",
                    prs_frontier_size(f) ? prs_frontier_size(f) - 1 : 0, a->index_arg);
            return 2;
        }
        *k = (size_t)idx;
    } else if (prs_frontier_find_time(f, a->time_s, k, err)) {
        fprintf(stderr, "perseus evaluate: --time: %s\n", err->msg);
        return 2;
    }
    return 0;
}

/* Fill ev->clocks with the plan a selects; the library's status (usage errors: *usage set). */
static int make_plan(const evaluate_args *a, evaluation *ev, int *usage, prs_error *err)
{
    result *r = &ev->r;
    switch (a->src) {
    case SRC_ALLMAX:
        r->plan = "all-max";
        return prs_baseline_allmax(ev->profile, &ev->pipe, ev->clocks, err);
    case SRC_ENVPIPE:
        r->plan = "envpipe";
        return prs_baseline_envpipe(ev->profile, &ev->pipe, ev->clocks, err);
    case SRC_UNIFORM:
        r->plan = "uniform";
        r->freq_mhz = a->freq_mhz;
        if (a->freq_mhz) {
            for (size_t i = 0; i < ev->nops; i++)
                ev->clocks[i] = a->freq_mhz;
            return 0;
        } else {
            prs_uniform_point up;
            int rc = prs_baseline_uniform(ev->profile, &ev->pipe, 0, ev->clocks, &up, err);
            r->freq_mhz = up.freq_mhz;
            return rc;
        }
    default: {
        r->plan = "frontier";
        size_t k = 0;
        if (pick_point(a, ev->f, &k, err)) {
            *usage = 1;
            return 0;
        }
        r->index = (long)k;
        r->point = prs_frontier_point_at(ev->f, k);
        return prs_frontier_plan(ev->f, k, ev->clocks, err);
    }
    }
}

/* The plan's power into ev->r.power, and its steps into --power-csv. */
static int power(const evaluate_args *a, evaluation *ev, prs_error *err)
{
    prs_eval *ctx;
    prs_power_step *steps = NULL;
    size_t n = 0;
    int rc = prs_eval_open(ev->profile, &ev->pipe, &ctx, err);
    if (rc) return rc;
    rc = prs_eval_power(ctx, ev->clocks, a->window_s, &ev->r.power, &steps, &n, err);
    prs_eval_close(ctx);
    if (rc || !a->power_csv) {
        free(steps);
        return rc;
    }
    FILE *f = fopen(a->power_csv, "w");
    if (f) {
        char b[4][PRS_NUMFMT_MAX];
        fputs("start_s,end_s,power_w,energy_j\n", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s,%s,%s,%s\n", prs_num_fmt_double(b[0], sizeof b[0], steps[i].start_s),
                    prs_num_fmt_double(b[1], sizeof b[1], steps[i].end_s),
                    prs_num_fmt_double(b[2], sizeof b[2], steps[i].power_w),
                    prs_num_fmt_double(b[3], sizeof b[3], steps[i].energy_j));
    }
    free(steps);
    if (!f || (fclose(f) != 0))
        return prs_error_set(err, PRS_EIO, "--power-csv: cannot write %s", a->power_csv);
    return 0;
}

/* Evaluate the plan a selects into ev->r; 0 or the exit status (message printed). */
static int run(const evaluate_args *a, evaluation *ev)
{
    prs_error err = {0, ""};
    int rc = load_inputs(a, ev, &err), usage = 0;
    if (rc) return rc;
    int lrc = make_plan(a, ev, &usage, &err);
    if (usage) return 2;
    if (!lrc)
        lrc = prs_plan_timeline(ev->profile, &ev->pipe, ev->clocks, ev->ops, &ev->r.time_s,
                                &ev->r.energy_j, &err);
    if (!lrc) lrc = power(a, ev, &err);
    if (lrc) {
        fprintf(stderr, "perseus evaluate: %s\n", err.msg);
        return lrc == PRS_ENOMEM || lrc == PRS_EIO ? 1 : 2;
    }
    for (size_t i = 0; i < ev->nops; i++) {
        stage_sum *st = &ev->r.stages[ev->ops[i].stage];
        st->busy_units += lround((ev->ops[i].end_s - ev->ops[i].start_s) / ev->pipe.unit_time_s);
        st->busy_energy_j += ev->ops[i].energy_j;
    }
    return 0;
}

int prs_cmd_evaluate(int argc, char **argv)
{
    evaluate_args a;
    int done = 0, rc = parse_args(argc, argv, &a, &done);
    if (rc || done) return rc;
    evaluation ev;
    memset(&ev, 0, sizeof ev);
    ev.r.index = -1;
    rc = run(&a, &ev);
    if (!rc) {
        if (a.json)
            rc = print_json(a.profile_path, &ev.pipe, &ev.r) ? 1 : 0;
        else
            print_table(a.profile_path, &ev.pipe, &ev.r);
        if (!rc) rc = fflush(stdout) == 0 ? 0 : 1;
    }
    free(ev.r.stages);
    free(ev.ops);
    free(ev.clocks);
    prs_profile_free(ev.profile);
    prs_frontier_free(ev.f);
    return rc;
}
