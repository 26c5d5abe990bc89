/* perseus plan / perseus plan export: run the planner on a stage profile and write the
 * frontier directory; print one stored plan. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "numfmt.h"
#include "perseus/planner.h"

static const char plan_usage[] =
    "usage: perseus plan --profile FILE --stages S --microbatches M --unit-time SEC\n"
    "                    --blocking-power W [--schedule NAME [--virtual-stages V]]\n"
    "                    [--cost-model exp|hull] --out DIR\n"
    "       perseus plan export DIR (--index K | --time SEC) [--format json|lowtime]\n"
    "\n"
    "Compute the iteration time-energy frontier of a pipeline from a stage profile\n"
    "(CSV: stage,instruction,frequency,time,energy) and one frequency plan per point.\n"
    "\n"
    "  --profile FILE         stage profile CSV\n"
    "  --stages S             pipeline stages (profile stages 0..S-1 are used)\n"
    "  --microbatches M       microbatches per iteration\n"
    "  --unit-time SEC        time quantum of the planner, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved (Megatron-LM)\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= 2);\n"
    "                         the profile then has stages * V stages (chunk c on GPU c mod S)\n"
    "  --cost-model MODEL     exp: the reference's exponential fit (default);\n"
    "                         hull: convex hull of measured options, closer to optimal\n"
    "  --always-use-noise-factor  the reference's 5% noise tolerance for every option set\n"
    "  --out DIR              output directory (created if missing): frontier.csv,\n"
    "                         frontier-detail.csv, plans.prs\n"
    "  --quiet                no progress bar or warnings\n"
    "  -h, --help             this help\n";

static const char export_usage[] =
    "usage: perseus plan export DIR (--index K | --time SEC) [--format json|lowtime]\n"
    "\n"
    "Print one plan of a frontier written by 'perseus plan --out DIR'.\n"
    "\n"
    "  --index K          the K-th frontier point (0 = slowest)\n"
    "  --time SEC         the least-energy plan whose evaluated iteration time is <= SEC\n"
    "  --format json      plan with its figures and each stage's computations (default)\n"
    "  --format lowtime   the reference's per-stage nested list of clocks\n"
    "  -h, --help         this help\n";

static int usage_error(const char *cmd, const char *msg, const char *arg)
{
    return prs_cli_usage_error(cmd, msg, arg);
}

static int parse_positive_int(const char *opt, const char *v, int *out)
{
    return prs_cli_positive_int("plan", opt, v, out);
}

static int parse_number(const char *cmd, const char *opt, const char *v, double min, int strict,
                        double *out)
{
    return prs_cli_number(cmd, opt, v, min, strict, out);
}

static void print_json_plan(const prs_frontier *f, size_t k, const int *clocks)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    const prs_frontier_point *pt = prs_frontier_point_at(f, k);
    char b[5][PRS_NUMFMT_MAX];
    printf("{\n  \"index\": %zu,\n  \"time_units\": %ld,\n  \"time_s\": %s,\n"
           "  \"energy_j\": %s,\n  \"eval_time_s\": %s,\n  \"eval_energy_j\": %s,\n",
           k, pt->time_units, prsN_fmt_double(b[0], sizeof b[0], pt->time_s),
           prsN_fmt_double(b[1], sizeof b[1], pt->energy_j),
           prsN_fmt_double(b[2], sizeof b[2], pt->eval_time_s),
           prsN_fmt_double(b[3], sizeof b[3], pt->eval_energy_j));
    printf("  \"stages\": %d,\n  \"microbatches\": %d,\n  \"schedule\": \"%s\",\n"
           "  \"virtual_stages\": %d,\n"
           "  \"unit_time_s\": %s,\n  \"blocking_power_w\": %s,\n  \"cost_model\": \"%s\",\n"
           "  \"plan\": [\n",
           pipe->stages, pipe->microbatches, prs_schedule_name(pipe->schedule),
           pipe->virtual_stages > 1 ? pipe->virtual_stages : 1,
           prsN_fmt_double(b[0], sizeof b[0], pipe->unit_time_s),
           prsN_fmt_double(b[1], sizeof b[1], pipe->blocking_power_w),
           prs_cost_model_name(prs_frontier_cost_model(f)));
    int per = prs_ops_per_stage(pipe);
    for (int s = 0; s < pipe->stages; s++) {
        printf("    {\"stage\": %d, \"ops\": [", s);
        for (int i = 0; i < per; i++) {
            prs_instr in = PRS_FORWARD;
            int mb = 0, chunk = s;
            prs_op_describe_chunk(pipe, s, i, &in, &mb, &chunk);
            /* "F3": forward of microbatch 3; interleaved adds the model chunk: "F3@5" */
            if (pipe->virtual_stages > 1)
                printf("%s\"%c%d@%d\"", i ? ", " : "", in == PRS_FORWARD ? 'F' : 'B', mb, chunk);
            else
                printf("%s\"%c%d\"", i ? ", " : "", in == PRS_FORWARD ? 'F' : 'B', mb);
        }
        printf("],\n     \"clocks_mhz\": [");
        for (int i = 0; i < per; i++)
            printf("%s%d", i ? ", " : "", clocks[s * per + i]);
        printf("]}%s\n", s + 1 < pipe->stages ? "," : "");
    }
    printf("  ]\n}\n");
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

static int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {{"index", required_argument, 0, 'i'},
                                         {"time", required_argument, 0, 't'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *index_arg = NULL, *format = "json";
    double time_s = -1;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            index_arg = optarg;
            break;
        case 't':
            if (parse_number("plan export", "--time", optarg, 0, 1, &time_s)) return 2;
            break;
        case 'f':
            format = optarg;
            break;
        case 'h':
            fputs(export_usage, stdout);
            return 0;
        case ':':
            return usage_error("plan export", "missing value for", argv[optind - 1]);
        default:
            return usage_error("plan export", "unknown option", argv[optind - 1]);
        }
    }
    if (optind + 1 != argc)
        return usage_error("plan export", "expected exactly one frontier directory", NULL);
    if ((index_arg != NULL) == (time_s >= 0))
        return usage_error("plan export", "give exactly one of --index K or --time SEC", NULL);
    if (strcmp(format, "json") != 0 && strcmp(format, "lowtime") != 0)
        return usage_error("plan export", "--format: expected json or lowtime, got", format);
    prs_error err = {0, ""};
    prs_frontier *f = NULL;
    if (prs_frontier_load(argv[optind], &f, &err)) {
        fprintf(stderr, "perseus plan export: %s\n", err.msg);
        return 2;
    }
    size_t k = 0;
    int rc = 0;
    if (index_arg) {
        long idx;
        if (prsN_parse_long(index_arg, &idx) || idx < 0 || (size_t)idx >= prs_frontier_size(f)) {
            fprintf(stderr, "perseus plan export: --index: expected 0..%zu, got '%s'\n",
                    prs_frontier_size(f) ? prs_frontier_size(f) - 1 : 0, index_arg);
            rc = 2;
            goto out;
        }
        k = (size_t)idx;
    } else if (prs_frontier_find_time(f, time_s, &k, &err)) {
        fprintf(stderr, "perseus plan export: --time: %s\n", err.msg);
        rc = 2;
        goto out;
    }
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    int *clocks = malloc(sizeof *clocks * (size_t)(pipe->stages * prs_ops_per_stage(pipe)));
    if (!clocks || prs_frontier_plan(f, k, clocks, &err)) {
        fprintf(stderr, "perseus plan export: %s\n", clocks ? err.msg : "out of memory");
        free(clocks);
        rc = 1;
        goto out;
    }
    if (strcmp(format, "json") == 0)
        print_json_plan(f, k, clocks);
    else
        print_lowtime_plan(f, clocks);
    free(clocks);
out:
    prs_frontier_free(f);
    return rc;
}

int prs_cmd_plan(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "export") == 0) return cmd_export(argc - 1, argv + 1);
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         {"stages", required_argument, 0, 's'},
                                         {"microbatches", required_argument, 0, 'm'},
                                         {"unit-time", required_argument, 0, 'u'},
                                         {"blocking-power", required_argument, 0, 'b'},
                                         {"cost-model", required_argument, 0, 'c'},
                                         {"schedule", required_argument, 0, 'S'},
                                         {"virtual-stages", required_argument, 0, 'V'},
                                         {"always-use-noise-factor", no_argument, 0, 'n'},
                                         {"out", required_argument, 0, 'o'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    const char *profile_path = NULL, *out_dir = NULL;
    int have_unit = 0, have_power = 0, quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            profile_path = optarg;
            break;
        case 's':
            if (parse_positive_int("--stages", optarg, &o.pipe.stages)) return 2;
            break;
        case 'm':
            if (parse_positive_int("--microbatches", optarg, &o.pipe.microbatches)) return 2;
            break;
        case 'u':
            if (parse_number("plan", "--unit-time", optarg, 0, 1, &o.pipe.unit_time_s)) return 2;
            have_unit = 1;
            break;
        case 'b':
            if (parse_number("plan", "--blocking-power", optarg, 0, 0, &o.pipe.blocking_power_w))
                return 2;
            have_power = 1;
            break;
        case 'c':
            if (prs_cost_model_parse(optarg, &o.cost_model))
                return usage_error("plan", "--cost-model: expected exp or hull, got", optarg);
            break;
        case 'S':
            if (prs_schedule_parse(optarg, &o.pipe.schedule))
                return usage_error("plan", "--schedule: expected 1f1b, gpipe or interleaved, got",
                                   optarg);
            break;
        case 'V':
            if (parse_positive_int("--virtual-stages", optarg, &o.pipe.virtual_stages)) return 2;
            break;
        case 'n':
            o.always_noise_factor = 1;
            break;
        case 'o':
            out_dir = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            fputs(plan_usage, stdout);
            return 0;
        case ':':
            return usage_error("plan", "missing value for", argv[optind - 1]);
        default:
            return usage_error("plan", "unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("plan", "unexpected argument", argv[optind]);
    const char *missing = !profile_path          ? "--profile"
                          : !o.pipe.stages       ? "--stages"
                          : !o.pipe.microbatches ? "--microbatches"
                          : !have_unit           ? "--unit-time"
                          : !have_power          ? "--blocking-power"
                          : !out_dir             ? "--out"
                                                 : NULL;
    if (missing) return usage_error("plan", "missing required option", missing);

    prs_error err = {0, ""};
    if (prs_pipeline_check(&o.pipe, &err)) return usage_error("plan", err.msg, NULL);
    prs_profile *profile = NULL;
    if (prs_profile_load(profile_path, &profile, &err)) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        return 2;
    }
    if (prs_profile_check_stages(profile, prs_pipeline_chunks(&o.pipe), &err)) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        prs_profile_free(profile);
        return 2;
    }
    prs_cli_progress ps = {"plan", !quiet && isatty(STDERR_FILENO), -1};
    o.progress = prs_cli_on_progress;
    o.warn = quiet ? NULL : prs_cli_on_warn;
    o.ud = &ps;
    prs_frontier *f = NULL;
    int rc = prs_plan(profile, &o, &f, &err);
    prs_profile_free(profile);
    if (rc) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        return rc == PRS_EINVAL || rc == PRS_EPARSE ? 2 : 1;
    }
    if (prs_frontier_size(f) == 0 && !quiet)
        fprintf(stderr, "perseus plan: warning: the iteration cannot be shortened: the frontier "
                        "is empty\n");
    rc = prs_frontier_save(f, out_dir, &err);
    if (rc) {
        fprintf(stderr, "perseus plan: %s\n", err.msg);
        prs_frontier_free(f);
        return 1;
    }
    if (!quiet && prs_frontier_size(f) > 0) {
        const prs_frontier_point *a = prs_frontier_point_at(f, 0),
                                 *z = prs_frontier_point_at(f, prs_frontier_size(f) - 1);
        fprintf(stderr,
                "perseus plan: %zu plans, %.6g s .. %.6g s; fastest plan evaluates to %.6g s, "
                "%.6g J; wrote %s/frontier.csv\n",
                prs_frontier_size(f), a->time_s, z->time_s, z->eval_time_s, z->eval_energy_j,
                out_dir);
    }
    prs_frontier_free(f);
    return 0;
}
