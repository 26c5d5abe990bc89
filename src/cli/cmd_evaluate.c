/* perseus evaluate: iteration time and energy of one plan against a stage profile, with each
 * GPU's busy and idle (blocking) time and energy. The plan is a frontier point (by index or
 * time), a uniform clock, all-max or the EnvPipe-style baseline (include/perseus/emulator.h);
 * the figures are the core's exact evaluation (prs_plan_timeline). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "numfmt.h"
#include "perseus/emulator.h"
#include "perseus/planner.h"

static const char evaluate_usage[] =
    "usage: perseus evaluate --profile FILE --stages S --microbatches M --unit-time SEC\n"
    "                        --blocking-power W [--schedule NAME [--virtual-stages V]]\n"
    "                        (--all-max | --uniform MHZ|auto | --envpipe) [--json]\n"
    "       perseus evaluate --profile FILE --frontier DIR (--index K | --time SEC) [--json]\n"
    "\n"
    "Iteration time and energy of a plan, and each GPU's busy time, idle time, busy energy\n"
    "and idle (blocking) energy: computations take their clock's measured time quantized\n"
    "to the unit, and their measured energy; a GPU burns the blocking power while idle.\n"
    "Energies are per GPU of a tensor-parallel group.\n"
    "\n"
    "  --profile FILE         stage profile CSV\n"
    "  --stages S             GPUs in the pipeline\n"
    "  --microbatches M       microbatches per iteration\n"
    "  --unit-time SEC        time quantum, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= 2)\n"
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
    "  --json                 one JSON object instead of the table\n"
    "  -h, --help             this help\n";

static int usage_error(const char *msg, const char *arg)
{
    return prs_cli_usage_error("evaluate", msg, arg);
}

static int parse_positive_int(const char *opt, const char *v, int *out)
{
    return prs_cli_positive_int("evaluate", opt, v, out);
}

static int parse_number(const char *opt, const char *v, double min, int strict, double *out)
{
    return prs_cli_number("evaluate", opt, v, min, strict, out);
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
} result;

/* Pipeline options given on the command line against the frontier's. */
static int check_match(const prs_pipeline *f, const prs_pipeline *cl, const int *given,
                       const char *dir)
{
    char a[PRS_NUMFMT_MAX], b[PRS_NUMFMT_MAX];
    int fv = f->virtual_stages > 1 ? f->virtual_stages : 1;
    int cv = cl->virtual_stages > 1 ? cl->virtual_stages : 1;
    if (given[0] && f->stages != cl->stages)
        fprintf(stderr, "perseus evaluate: --stages %d does not match the frontier's %d (%s)\n",
                cl->stages, f->stages, dir);
    else if (given[1] && f->microbatches != cl->microbatches)
        fprintf(stderr,
                "perseus evaluate: --microbatches %d does not match the frontier's %d (%s)\n",
                cl->microbatches, f->microbatches, dir);
    else if (given[2] && f->unit_time_s != cl->unit_time_s)
        fprintf(stderr, "perseus evaluate: --unit-time %s does not match the frontier's %s (%s)\n",
                prsN_fmt_double(a, sizeof a, cl->unit_time_s),
                prsN_fmt_double(b, sizeof b, f->unit_time_s), dir);
    else if (given[3] && f->blocking_power_w != cl->blocking_power_w)
        fprintf(stderr,
                "perseus evaluate: --blocking-power %s does not match the frontier's %s (%s)\n",
                prsN_fmt_double(a, sizeof a, cl->blocking_power_w),
                prsN_fmt_double(b, sizeof b, f->blocking_power_w), dir);
    else if (given[4] && f->schedule != cl->schedule)
        fprintf(stderr, "perseus evaluate: --schedule %s does not match the frontier's %s (%s)\n",
                prs_schedule_name(cl->schedule), prs_schedule_name(f->schedule), dir);
    else if (given[5] && fv != cv)
        fprintf(stderr,
                "perseus evaluate: --virtual-stages %d does not match the frontier's %d (%s)\n", cv,
                fv, dir);
    else
        return 0;
    return -1;
}

static void print_json(const char *profile_path, const prs_pipeline *pipe, const result *r)
{
    char b[6][PRS_NUMFMT_MAX];
    double tau = pipe->unit_time_s, pb = pipe->blocking_power_w;
    long T = lround(r->time_s / tau);
    printf("{\n  \"profile\": \"");
    for (const char *s = profile_path; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    printf("\",\n  \"plan\": \"%s\",\n", r->plan);
    if (r->freq_mhz) printf("  \"freq_mhz\": %d,\n", r->freq_mhz);
    if (r->point)
        printf("  \"index\": %ld,\n  \"predicted_time_s\": %s,\n  \"predicted_energy_j\": %s,\n",
               r->index, prsN_fmt_double(b[0], sizeof b[0], r->point->time_s),
               prsN_fmt_double(b[1], sizeof b[1], r->point->energy_j));
    printf("  \"stages\": %d,\n  \"microbatches\": %d,\n  \"schedule\": \"%s\",\n"
           "  \"virtual_stages\": %d,\n  \"unit_time_s\": %s,\n  \"blocking_power_w\": %s,\n"
           "  \"time_s\": %s,\n  \"energy_j\": %s,\n  \"per_stage\": [",
           pipe->stages, pipe->microbatches, prs_schedule_name(pipe->schedule),
           pipe->virtual_stages > 1 ? pipe->virtual_stages : 1,
           prsN_fmt_double(b[0], sizeof b[0], tau), prsN_fmt_double(b[1], sizeof b[1], pb),
           prsN_fmt_double(b[2], sizeof b[2], r->time_s),
           prsN_fmt_double(b[3], sizeof b[3], r->energy_j));
    for (int s = 0; s < pipe->stages; s++) {
        const stage_sum *st = &r->stages[s];
        double idle = (double)(T - st->busy_units) * tau;
        printf("%s\n    {\"stage\": %d, \"busy_time_s\": %s, \"idle_time_s\": %s, "
               "\"busy_energy_j\": %s, \"idle_energy_j\": %s}",
               s ? "," : "", s, prsN_fmt_double(b[0], sizeof b[0], (double)st->busy_units * tau),
               prsN_fmt_double(b[1], sizeof b[1], idle),
               prsN_fmt_double(b[2], sizeof b[2], st->busy_energy_j),
               prsN_fmt_double(b[3], sizeof b[3], pb * idle));
    }
    printf("\n  ]\n}\n");
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
    printf("\niteration  %.6g s, %.6g J (per GPU of a tensor-parallel group)\n\n", r->time_s,
           r->energy_j);
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

int prs_cmd_evaluate(int argc, char **argv)
{
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         {"stages", required_argument, 0, 's'},
                                         {"microbatches", required_argument, 0, 'm'},
                                         {"unit-time", required_argument, 0, 'u'},
                                         {"blocking-power", required_argument, 0, 'b'},
                                         {"schedule", required_argument, 0, 'S'},
                                         {"virtual-stages", required_argument, 0, 'V'},
                                         {"frontier", required_argument, 0, 'f'},
                                         {"index", required_argument, 0, 'i'},
                                         {"time", required_argument, 0, 't'},
                                         {"uniform", required_argument, 0, 'U'},
                                         {"all-max", no_argument, 0, 'A'},
                                         {"envpipe", no_argument, 0, 'E'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    prs_pipeline cl;
    memset(&cl, 0, sizeof cl);
    cl.schedule = PRS_SCHEDULE_1F1B;
    /* given: stages, microbatches, unit, power, schedule, virtual stages */
    int given[6] = {0, 0, 0, 0, 0, 0}, json = 0, nsources = 0, c;
    const char *profile_path = NULL, *frontier_dir = NULL, *index_arg = NULL, *uniform_arg = NULL;
    double time_arg = -1;
    source src = SRC_NONE;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            profile_path = optarg;
            break;
        case 's':
            if (parse_positive_int("--stages", optarg, &cl.stages)) return 2;
            given[0] = 1;
            break;
        case 'm':
            if (parse_positive_int("--microbatches", optarg, &cl.microbatches)) return 2;
            given[1] = 1;
            break;
        case 'u':
            if (parse_number("--unit-time", optarg, 0, 1, &cl.unit_time_s)) return 2;
            given[2] = 1;
            break;
        case 'b':
            if (parse_number("--blocking-power", optarg, 0, 0, &cl.blocking_power_w)) return 2;
            given[3] = 1;
            break;
        case 'S':
            if (prs_schedule_parse(optarg, &cl.schedule))
                return usage_error("--schedule: expected 1f1b, gpipe or interleaved, got", optarg);
            given[4] = 1;
            break;
        case 'V':
            if (parse_positive_int("--virtual-stages", optarg, &cl.virtual_stages)) return 2;
            given[5] = 1;
            break;
        case 'f':
            frontier_dir = optarg;
            src = SRC_FRONTIER;
            nsources++;
            break;
        case 'i':
            index_arg = optarg;
            break;
        case 't':
            if (parse_number("--time", optarg, 0, 1, &time_arg)) return 2;
            break;
        case 'U':
            uniform_arg = optarg;
            src = SRC_UNIFORM;
            nsources++;
            break;
        case 'A':
            src = SRC_ALLMAX;
            nsources++;
            break;
        case 'E':
            src = SRC_ENVPIPE;
            nsources++;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(evaluate_usage, stdout);
            return 0;
        case ':':
            return usage_error("missing value for", argv[optind - 1]);
        default:
            return usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("unexpected argument", argv[optind]);
    if (!profile_path) return usage_error("missing required option", "--profile");
    if (nsources != 1)
        return usage_error("give exactly one plan: --frontier DIR, --uniform MHZ, --all-max or "
                           "--envpipe",
                           NULL);
    if (src == SRC_FRONTIER && (index_arg != NULL) == (time_arg >= 0))
        return usage_error("--frontier needs exactly one of --index K or --time SEC", NULL);
    if (src != SRC_FRONTIER && (index_arg || time_arg >= 0))
        return usage_error("--index and --time select a point of a --frontier", NULL);
    int freq = 0;
    if (src == SRC_UNIFORM && strcmp(uniform_arg, "auto") != 0 &&
        (prsN_parse_int(uniform_arg, &freq) || freq < 1))
        return usage_error("--uniform: expected a clock in MHz or 'auto', got", uniform_arg);
    if (src != SRC_FRONTIER) {
        const char *missing = !given[0]   ? "--stages"
                              : !given[1] ? "--microbatches"
                              : !given[2] ? "--unit-time"
                              : !given[3] ? "--blocking-power"
                                          : NULL;
        if (missing) return usage_error("missing required option", missing);
    }

    prs_error err = {0, ""};
    prs_frontier *f = NULL;
    prs_profile *profile = NULL;
    prs_timeline_op *ops = NULL;
    int *clocks = NULL, rc = 2;
    result r;
    memset(&r, 0, sizeof r);
    r.index = -1;
    prs_pipeline pipe = cl;
    if (src == SRC_FRONTIER) {
        if (prs_frontier_load(frontier_dir, &f, &err)) {
            fprintf(stderr, "perseus evaluate: %s\n", err.msg);
            goto out;
        }
        pipe = *prs_frontier_pipeline(f);
        if (check_match(&pipe, &cl, given, frontier_dir)) goto out;
    } else if (prs_pipeline_check(&pipe, &err)) {
        usage_error(err.msg, NULL);
        goto out;
    }
    if (prs_profile_load(profile_path, &profile, &err) ||
        prs_profile_check_stages(profile, prs_pipeline_chunks(&pipe), &err)) {
        fprintf(stderr, "perseus evaluate: %s\n", err.msg);
        goto out;
    }
    size_t nops = (size_t)pipe.stages * (size_t)prs_ops_per_stage(&pipe);
    clocks = malloc(sizeof *clocks * nops);
    ops = malloc(sizeof *ops * nops);
    r.stages = calloc((size_t)pipe.stages, sizeof *r.stages);
    if (!clocks || !ops || !r.stages) {
        fputs("perseus evaluate: out of memory\n", stderr);
        rc = 1;
        goto out;
    }
    int lrc = 0;
    switch (src) {
    case SRC_ALLMAX:
        r.plan = "all-max";
        lrc = prs_baseline_allmax(profile, &pipe, clocks, &err);
        break;
    case SRC_ENVPIPE:
        r.plan = "envpipe";
        lrc = prs_baseline_envpipe(profile, &pipe, clocks, &err);
        break;
    case SRC_UNIFORM:
        r.plan = "uniform";
        if (freq) {
            for (size_t i = 0; i < nops; i++)
                clocks[i] = freq;
        } else {
            prs_uniform_point up;
            lrc = prs_baseline_uniform(profile, &pipe, 0, clocks, &up, &err);
            freq = up.freq_mhz;
        }
        r.freq_mhz = freq;
        break;
    default: {
        r.plan = "frontier";
        size_t k = 0;
        if (index_arg) {
            long idx;
            if (prsN_parse_long(index_arg, &idx) || idx < 0 ||
                (size_t)idx >= prs_frontier_size(f)) {
                fprintf(stderr, "perseus evaluate: --index: expected 0..%zu, got '%s'\n",
                        prs_frontier_size(f) ? prs_frontier_size(f) - 1 : 0, index_arg);
                goto out;
            }
            k = (size_t)idx;
        } else if (prs_frontier_find_time(f, time_arg, &k, &err)) {
            fprintf(stderr, "perseus evaluate: --time: %s\n", err.msg);
            goto out;
        }
        r.index = (long)k;
        r.point = prs_frontier_point_at(f, k);
        lrc = prs_frontier_plan(f, k, clocks, &err);
        break;
    }
    }
    if (!lrc) lrc = prs_plan_timeline(profile, &pipe, clocks, ops, &r.time_s, &r.energy_j, &err);
    if (lrc) {
        fprintf(stderr, "perseus evaluate: %s\n", err.msg);
        rc = lrc == PRS_ENOMEM ? 1 : 2;
        goto out;
    }
    for (size_t i = 0; i < nops; i++) {
        stage_sum *st = &r.stages[ops[i].stage];
        st->busy_units += lround((ops[i].end_s - ops[i].start_s) / pipe.unit_time_s);
        st->busy_energy_j += ops[i].energy_j;
    }
    if (json)
        print_json(profile_path, &pipe, &r);
    else
        print_table(profile_path, &pipe, &r);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(r.stages);
    free(ops);
    free(clocks);
    prs_profile_free(profile);
    prs_frontier_free(f);
    return rc;
}
