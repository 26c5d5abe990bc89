/* perseus emulate: what Perseus and the baselines save for N data-parallel pipelines with a
 * straggler (include/perseus/emulator.h, docs/emulator.md). Plans one pipeline with the core,
 * builds the baselines, and prints the paper's metrics (docs/emulator.md, 'The recipe') as a table
 * or JSON, followed by the exact-evaluation and lookup-rule variants, labelled apart. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "numfmt.h"
#include "perseus/emulator.h"
#include "perseus/planner.h"

static const char emulate_usage[] =
    "usage: perseus emulate --profile FILE --stages S --microbatches M --pipelines N --tp T\n"
    "                       --unit-time SEC --blocking-power W [--cost-model exp|hull]\n"
    "                       [--schedule NAME [--virtual-stages V]] [--straggler S ...] [--json]\n"
    "\n"
    "Plan one pipeline and emulate N data-parallel copies of it, one straggling at\n"
    "T' = s * T_min: the energy Perseus saves against all computations at the highest\n"
    "clock, and what the baselines (all-max, one uniform clock, EnvPipe-style) save.\n"
    "Metrics as the SOSP'24 paper computes them (Table 6, Figures 7-8), then the same\n"
    "with every plan evaluated exactly, then with the server's lookup rule.\n"
    "\n"
    "  --profile FILE         stage profile CSV\n"
    "  --stages S             GPUs per pipeline (profile stages 0..S-1, or S*V interleaved)\n"
    "  --microbatches M       microbatches per pipeline and iteration\n"
    "  --pipelines N          data-parallel pipelines (>= 1)\n"
    "  --tp T                 tensor-parallel degree: GPUs per stage (>= 1); scales absolute\n"
    "                         energies only, never a percentage\n"
    "  --unit-time SEC        planner time quantum, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --cost-model MODEL     exp (default, the reference's) or hull\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved (with --virtual-stages)\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= 2)\n"
    "  --straggler S ...      slowdown factors >= 1: numbers ('1.1 1.2' or '1.1,1.2') or\n"
    "                         inclusive ranges START:STOP:STEP ('1.01:1.50:0.01'); repeatable\n"
    "  --json                 one JSON object instead of the table\n"
    "  --quiet                no progress bar or warnings\n"
    "  -h, --help             this help\n";

static int usage_error(const char *msg, const char *arg)
{
    return prs_cli_usage_error("emulate", msg, arg);
}

static int parse_positive_int(const char *opt, const char *v, int *out)
{
    return prs_cli_positive_int("emulate", opt, v, out);
}

static int parse_number(const char *opt, const char *v, double min, int strict, double *out)
{
    return prs_cli_number("emulate", opt, v, min, strict, out);
}

/* "--straggler 1.1 1.2 --json": getopt takes one value per option, so the values following a
 * --straggler (up to the next word starting with '-') are joined into its argument first. */
static char **join_straggler_values(int argc, char **argv, int *new_argc, char ***owned,
                                    int *nowned)
{
    char **out = malloc(sizeof *out * ((size_t)argc + 1));
    *owned = malloc(sizeof **owned * ((size_t)argc + 1));
    if (!out || !*owned) {
        free(out);
        free(*owned);
        return NULL;
    }
    *nowned = 0;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { /* the rest is not options */
            while (i < argc)
                out[n++] = argv[i++];
            break;
        }
        int eq = strncmp(a, "--straggler=", 12) == 0;
        if (i == 0 || (!eq && strcmp(a, "--straggler") != 0)) {
            out[n++] = argv[i];
            continue;
        }
        int first = eq ? i : i + 1; /* the value getopt would take */
        if (first >= argc) {
            out[n++] = argv[i];
            continue;
        }
        int last = first;
        while (last + 1 < argc && argv[last + 1][0] != '-')
            last++;
        if (last == first) {
            out[n++] = argv[i];
            continue;
        }
        size_t len = 16;
        for (int j = first; j <= last; j++)
            len += strlen(argv[j]) + 1;
        char *joined = malloc(len);
        if (!joined) {
            for (int j = 0; j < *nowned; j++)
                free((*owned)[j]);
            free(*owned);
            free(out);
            return NULL;
        }
        size_t at = 0;
        for (int j = first; j <= last; j++) /* "--straggler=A B C" or "A B C" */
            at += (size_t)snprintf(joined + at, len - at, "%s%s", j > first ? " " : "", argv[j]);
        (*owned)[(*nowned)++] = joined;
        if (!eq) out[n++] = argv[i];
        out[n++] = joined;
        i = last;
    }
    out[n] = NULL;
    *new_argc = n;
    return out;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static const char *num(char *buf, double x)
{
    return prsN_fmt_double(buf, PRS_NUMFMT_MAX, x);
}

static void json_rows(const prs_emu_summary *sm, const prs_emu_summary *paper_rule,
                      const char *indent)
{
    char b[12][PRS_NUMFMT_MAX];
    printf("\"stragglers\": [");
    for (size_t i = 0; i < sm->nrows; i++) {
        const prs_emu_metrics *r = &sm->rows[i];
        printf("%s\n%s  {\"s\": %s, \"t_prime_s\": %s, \"t_star_s\": %s, "
               "\"intrinsic_saving_pp\": %s, \"saving\": %s, \"intrinsic_saving\": %s, "
               "\"extrinsic_saving\": %s, \"saving_pp\": %s, \"tstar\": %s, "
               "\"job_energy_j\": %s, \"job_base_energy_j\": %s",
               i ? "," : "", indent, num(b[0], r->s), num(b[1], r->t_prime_s),
               num(b[2], r->choice_time_s), num(b[3], sm->intrinsic_saving_pp),
               num(b[4], r->saving), num(b[5], r->intrinsic_saving), num(b[6], r->extrinsic_saving),
               num(b[7], r->saving_pp), num(b[8], r->tstar), num(b[9], r->job_energy_j),
               num(b[10], r->job_base_energy_j));
        if (paper_rule)
            printf(", \"saving_minus_paper_rule\": %s",
                   num(b[11], r->saving - paper_rule->rows[i].saving));
        putchar('}');
    }
    if (sm->nrows)
        printf("\n%s]", indent);
    else
        putchar(']');
}

static void json_summary(const prs_emu_summary *sm, const char *indent)
{
    char b[3][PRS_NUMFMT_MAX];
    printf("{\"time_s\": %s, \"energy_j\": %s, ", num(b[0], sm->time_s), num(b[1], sm->energy_j));
    if (sm->freq_mhz) printf("\"freq_mhz\": %d, ", sm->freq_mhz);
    printf("\"intrinsic_saving_pp\": %s, ", num(b[2], sm->intrinsic_saving_pp));
    json_rows(sm, NULL, indent);
    putchar('}');
}

static void json_baselines(const prs_emulation *e, prs_emu_variant v, const char *indent)
{
    static const prs_emu_strategy bl[] = {PRS_EMU_ALLMAX, PRS_EMU_UNIFORM, PRS_EMU_ENVPIPE};
    char inner[32];
    snprintf(inner, sizeof inner, "%s  ", indent);
    printf("\"baselines\": {");
    for (size_t i = 0; i < sizeof bl / sizeof bl[0]; i++) {
        printf("%s\n%s  \"%s\": ", i ? "," : "", indent, prs_emu_strategy_name(bl[i]));
        json_summary(prs_emulation_get(e, v, bl[i]), inner);
    }
    printf("\n%s}", indent);
}

static void print_json(const prs_emulation *e, const char *profile_path, prs_cost_model model)
{
    const prs_frontier *f = prs_emulation_frontier(e);
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    const prs_emu_job *job = prs_emulation_job(e);
    const prs_emu_info *in = prs_emulation_info(e);
    const prs_emu_summary *pp = prs_emulation_get(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    const prs_emu_summary *ex = prs_emulation_get(e, PRS_EMU_EXACT, PRS_EMU_PERSEUS);
    const prs_emu_summary *lk = prs_emulation_get(e, PRS_EMU_LOOKUP, PRS_EMU_PERSEUS);
    char b[8][PRS_NUMFMT_MAX];
    printf("{\n  \"profile\": ");
    json_string(profile_path);
    printf(",\n  \"stages\": %d,\n  \"microbatches\": %d,\n  \"schedule\": \"%s\",\n"
           "  \"virtual_stages\": %d,\n  \"pipelines\": %d,\n  \"tp\": %d,\n  \"gpus\": %ld,\n"
           "  \"unit_time_s\": %s,\n  \"blocking_power_w\": %s,\n  \"cost_model\": \"%s\",\n"
           "  \"frontier_points\": %zu,\n",
           pipe->stages, pipe->microbatches, prs_schedule_name(pipe->schedule),
           pipe->virtual_stages > 1 ? pipe->virtual_stages : 1, job->pipelines, job->tp,
           (long)job->pipelines * job->tp * pipe->stages, num(b[0], pipe->unit_time_s),
           num(b[1], pipe->blocking_power_w), prs_cost_model_name(model), in->frontier_points);
    printf("  \"t_min_s\": %s,\n  \"e_intr_j\": %s,\n  \"t_energy_min_s\": %s,\n"
           "  \"e_energy_min_j\": %s,\n  \"e_base_j\": %s,\n  \"t_allmax_s\": %s,\n"
           "  \"intrinsic_saving_pp\": %s,\n  ",
           num(b[0], in->t_min_s), num(b[1], pp->energy_j), num(b[2], in->t_energy_min_s),
           num(b[3], in->e_energy_min_j * job->tp), num(b[4], pp->base_energy_j),
           num(b[5], in->allmax_time_s), num(b[6], pp->intrinsic_saving_pp));
    json_rows(pp, NULL, "  ");
    printf(",\n  ");
    json_baselines(e, PRS_EMU_PAPER, "  ");
    printf(",\n  \"exact\": {\n    \"base_time_s\": %s,\n    \"base_energy_j\": %s,\n"
           "    \"time_s\": %s,\n    \"energy_j\": %s,\n    \"intrinsic_saving_pp\": %s,\n    ",
           num(b[0], ex->base_time_s), num(b[1], ex->base_energy_j), num(b[2], ex->time_s),
           num(b[3], ex->energy_j), num(b[4], ex->intrinsic_saving_pp));
    json_rows(ex, NULL, "    ");
    printf(",\n    ");
    json_baselines(e, PRS_EMU_EXACT, "    ");
    printf("\n  },\n  \"lookup\": {\n    \"time_s\": %s,\n    \"energy_j\": %s,\n"
           "    \"intrinsic_saving_pp\": %s,\n    ",
           num(b[0], lk->time_s), num(b[1], lk->energy_j), num(b[2], lk->intrinsic_saving_pp));
    json_rows(lk, ex, "    ");
    printf("\n  }\n}\n");
}

static void table_rows(const prs_emulation *e, prs_emu_variant v)
{
    static const prs_emu_strategy all[] = {PRS_EMU_PERSEUS, PRS_EMU_ALLMAX, PRS_EMU_UNIFORM,
                                           PRS_EMU_ENVPIPE};
    const prs_emu_summary *first = prs_emulation_get(e, v, PRS_EMU_PERSEUS);
    printf("  intrinsic saving per pipeline, no straggler (%%):");
    for (size_t k = 0; k < 4; k++) {
        const prs_emu_summary *sm = prs_emulation_get(e, v, all[k]);
        printf("  %s %.2f", prs_emu_strategy_name(all[k]), sm->intrinsic_saving_pp);
        if (sm->freq_mhz) printf(" (%d MHz)", sm->freq_mhz);
    }
    putchar('\n');
    if (!first->nrows) return;
    printf("  %8s  %-8s  %9s  %9s  %9s  %9s  %6s  %9s\n", "s", "strategy", "saving %", "intr. %",
           "extr. %", "per-pipe %", "tstar", "t* (s)");
    for (size_t i = 0; i < first->nrows; i++) {
        for (size_t k = 0; k < 4; k++) {
            const prs_emu_metrics *r = &prs_emulation_get(e, v, all[k])->rows[i];
            char sbuf[PRS_NUMFMT_MAX];
            printf("  %8s  %-8s  %9.2f  %9.2f  %9.2f  %10.2f  %6.2f  %9.6g\n",
                   k ? "" : num(sbuf, r->s), prs_emu_strategy_name(all[k]), r->saving,
                   r->intrinsic_saving, r->extrinsic_saving, r->saving_pp, r->tstar,
                   r->choice_time_s);
        }
    }
}

static void print_table(const prs_emulation *e, const char *profile_path, prs_cost_model model)
{
    const prs_frontier *f = prs_emulation_frontier(e);
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    const prs_emu_job *job = prs_emulation_job(e);
    const prs_emu_info *in = prs_emulation_info(e);
    const prs_emu_summary *pp = prs_emulation_get(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    const prs_emu_summary *ex = prs_emulation_get(e, PRS_EMU_EXACT, PRS_EMU_PERSEUS);
    const prs_emu_summary *lk = prs_emulation_get(e, PRS_EMU_LOOKUP, PRS_EMU_PERSEUS);
    double tp = job->tp;
    printf("profile    %s\n", profile_path);
    printf("job        %d pipelines x %d stages x tp %d = %ld GPUs; %d microbatches per "
           "pipeline, %s",
           job->pipelines, pipe->stages, job->tp, (long)job->pipelines * job->tp * pipe->stages,
           pipe->microbatches, prs_schedule_name(pipe->schedule));
    if (pipe->virtual_stages > 1) printf(" (%d virtual stages)", pipe->virtual_stages);
    printf("\nplanner    %s cost model, unit %g s, blocking power %g W/GPU: %zu frontier "
           "points\n",
           prs_cost_model_name(model), pipe->unit_time_s, pipe->blocking_power_w,
           in->frontier_points);
    printf("frontier   T_min %.6g s at %.6g J per pipeline (predicted); least energy at "
           "T* %.6g s (T*/T_min %.3f), %.6g J\n",
           in->t_min_s, pp->energy_j, in->t_energy_min_s, in->t_energy_min_s / in->t_min_s,
           in->e_energy_min_j * tp);
    printf("all-max    %.6g s, %.6g J per pipeline (evaluated)\n", in->allmax_time_s,
           in->allmax_energy_j * tp);
    printf("uniform    %d MHz: %.6g s, %.6g J\n", in->uniform_freq_mhz, in->uniform_time_s,
           in->uniform_energy_j * tp);
    printf("envpipe    %.6g s, %.6g J\n", in->envpipe_time_s, in->envpipe_energy_j * tp);

    printf("\n[paper] the artifact's recipe (docs/emulator.md): predicted frontier "
           "energies;\n        all-max baseline E_base %.6g J charged at T_min %.6g s\n",
           pp->base_energy_j, pp->base_time_s);
    table_rows(e, PRS_EMU_PAPER);

    printf("\n[exact] every plan evaluated; all-max at its own critical path %.6g s, %.6g J;\n"
           "        Perseus's fastest plan %.6g s, %.6g J\n",
           ex->base_time_s, ex->base_energy_j, ex->time_s, ex->energy_j);
    table_rows(e, PRS_EMU_EXACT);

    printf("\n[lookup] the server's rule (least energy including blocking until T'), exact "
           "figures\n  intrinsic saving per pipeline, no straggler (%%): perseus %.2f\n",
           lk->intrinsic_saving_pp);
    if (lk->nrows) {
        printf("  %8s  %9s  %9s  %9s  %10s  %6s  %9s  %14s\n", "s", "saving %", "intr. %",
               "extr. %", "per-pipe %", "tstar", "t* (s)", "vs [exact] %");
        for (size_t i = 0; i < lk->nrows; i++) {
            const prs_emu_metrics *r = &lk->rows[i];
            char sbuf[PRS_NUMFMT_MAX];
            printf("  %8s  %9.2f  %9.2f  %9.2f  %10.2f  %6.2f  %9.6g  %+14.3f\n", num(sbuf, r->s),
                   r->saving, r->intrinsic_saving, r->extrinsic_saving, r->saving_pp, r->tstar,
                   r->choice_time_s, r->saving - ex->rows[i].saving);
        }
    }
}

int prs_cmd_emulate(int argc, char **argv)
{
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         {"stages", required_argument, 0, 's'},
                                         {"microbatches", required_argument, 0, 'm'},
                                         {"pipelines", required_argument, 0, 'N'},
                                         {"tp", required_argument, 0, 't'},
                                         {"unit-time", required_argument, 0, 'u'},
                                         {"blocking-power", required_argument, 0, 'b'},
                                         {"cost-model", required_argument, 0, 'c'},
                                         {"schedule", required_argument, 0, 'S'},
                                         {"virtual-stages", required_argument, 0, 'V'},
                                         {"straggler", required_argument, 0, 'x'},
                                         {"json", no_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    char **owned = NULL;
    int nowned = 0, nargc = 0;
    char **args = join_straggler_values(argc, argv, &nargc, &owned, &nowned);
    if (!args) {
        fputs("perseus emulate: out of memory\n", stderr);
        return 1;
    }
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    prs_plan_opts_default(&eo.plan);
    const char *profile_path = NULL;
    double *factors = NULL;
    size_t nfactors = 0;
    int have_unit = 0, have_power = 0, json = 0, quiet = 0, c, rc = 2;
    prs_error err = {0, ""};
    prs_profile *profile = NULL;
    prs_emulation *em = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(nargc, args, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            profile_path = optarg;
            break;
        case 's':
            if (parse_positive_int("--stages", optarg, &eo.plan.pipe.stages)) goto out;
            break;
        case 'm':
            if (parse_positive_int("--microbatches", optarg, &eo.plan.pipe.microbatches)) goto out;
            break;
        case 'N':
            if (parse_positive_int("--pipelines", optarg, &eo.pipelines)) goto out;
            break;
        case 't':
            if (parse_positive_int("--tp", optarg, &eo.tp)) goto out;
            break;
        case 'u':
            if (parse_number("--unit-time", optarg, 0, 1, &eo.plan.pipe.unit_time_s)) goto out;
            have_unit = 1;
            break;
        case 'b':
            if (parse_number("--blocking-power", optarg, 0, 0, &eo.plan.pipe.blocking_power_w))
                goto out;
            have_power = 1;
            break;
        case 'c':
            if (prs_cost_model_parse(optarg, &eo.plan.cost_model)) {
                usage_error("--cost-model: expected exp or hull, got", optarg);
                goto out;
            }
            break;
        case 'S':
            if (prs_schedule_parse(optarg, &eo.plan.pipe.schedule)) {
                usage_error("--schedule: expected 1f1b, gpipe or interleaved, got", optarg);
                goto out;
            }
            break;
        case 'V':
            if (parse_positive_int("--virtual-stages", optarg, &eo.plan.pipe.virtual_stages))
                goto out;
            break;
        case 'x':
            if (prs_straggler_parse(optarg, &factors, &nfactors, &err)) {
                fprintf(stderr, "perseus emulate: --straggler: %s\n", err.msg);
                goto out;
            }
            break;
        case 'j':
            json = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            fputs(emulate_usage, stdout);
            rc = 0;
            goto out;
        case ':':
            usage_error("missing value for", args[optind - 1]);
            goto out;
        default:
            usage_error("unknown option", args[optind - 1]);
            goto out;
        }
    }
    if (optind < nargc) {
        usage_error("unexpected argument", args[optind]);
        goto out;
    }
    const char *missing = !profile_path                ? "--profile"
                          : !eo.plan.pipe.stages       ? "--stages"
                          : !eo.plan.pipe.microbatches ? "--microbatches"
                          : !eo.pipelines              ? "--pipelines"
                          : !eo.tp                     ? "--tp"
                          : !have_unit                 ? "--unit-time"
                          : !have_power                ? "--blocking-power"
                                                       : NULL;
    if (missing) {
        usage_error("missing required option", missing);
        goto out;
    }
    if (prs_pipeline_check(&eo.plan.pipe, &err)) {
        usage_error(err.msg, NULL);
        goto out;
    }
    if (prs_profile_load(profile_path, &profile, &err) ||
        prs_profile_check_stages(profile, prs_pipeline_chunks(&eo.plan.pipe), &err)) {
        fprintf(stderr, "perseus emulate: %s\n", err.msg);
        goto out;
    }
    prs_cli_progress ps = {"emulate", !quiet && !json && isatty(STDERR_FILENO), -1};
    eo.plan.progress = prs_cli_on_progress;
    eo.plan.warn = quiet ? NULL : prs_cli_on_warn;
    eo.plan.ud = &ps;
    eo.stragglers = factors;
    eo.nstragglers = nfactors;
    int erc = prs_emulate(profile, &eo, &em, &err);
    if (erc) {
        fprintf(stderr, "perseus emulate: %s\n", err.msg);
        rc = erc == PRS_EINVAL || erc == PRS_EPARSE ? 2 : 1;
        goto out;
    }
    if (json)
        print_json(em, profile_path, eo.plan.cost_model);
    else
        print_table(em, profile_path, eo.plan.cost_model);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    prs_emulation_free(em);
    prs_profile_free(profile);
    free(factors);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(args);
    return rc;
}
