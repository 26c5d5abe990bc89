/* perseus emulate: what Perseus and the baselines save for N data-parallel pipelines with a
 * straggler (include/perseus/emulator.h, docs/emulator.md). Plans one pipeline with the core,
 * builds the baselines, and prints the paper's metrics (docs/emulator.md, 'The recipe') as a table
 * or JSON, followed by the exact-evaluation and lookup-rule variants, labelled apart. Parse
 * (parse_args: options into emulate_args), run (run: prs_emulate), print (print_table, print_json).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"
#include "perseus/emulator.h"
#include "perseus/planner.h"

static const char emulate_usage[] =
    "usage: perseus emulate --profile FILE --stages S --microbatches M --pipelines N --tp T\n"
    "                       --unit-time SEC --blocking-power W [--cost-model exp|hull]\n"
    "                       [--frontier auto|raw|clean] [--max-points N] [--threads N]\n"
    "                       [--polish auto|none|runs|all]\n"
    "                       [--schedule NAME [--virtual-stages V]] [--straggler S ...] [--json]\n"
    "                       [--quiet] [--power-cap W] [--cap-on avg|peak] [--window SEC]\n"
    "                       [--cap-sweep N [--cap-plot FILE]]\n"
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
    "                         energies only, never a percentage; pipelines x stages x tp is\n"
    "                         at most 10000000 GPUs\n"
    "  --unit-time SEC        planner time quantum, e.g. 0.001\n"
    "  --blocking-power W     GPU power while blocked or idle, e.g. 83.64 (A100)\n"
    "  --cost-model MODEL     exp (default, the reference's) or hull\n"
    "  --frontier KIND        the frontier planned, as 'perseus plan --frontier' (default auto:\n"
    "                         clean for hull, raw for exp); the paper's metrics read it, the\n"
    "                         exact and lookup metrics always choose from its clean frontier\n"
    "  --max-points N         refuse a frontier longer than N points (default 1000000)\n"
    "  --threads N            hull's planner threads, as 'perseus plan --threads' (default 0:\n"
    "                         one per processor, at most 16)\n"
    "  --polish KIND          plans polished, as 'perseus plan --polish' (default auto: the\n"
    "                         fastest plan for hull, none for exp)\n"
    "  --schedule NAME        1f1b (default), gpipe, or interleaved (with --virtual-stages)\n"
    "  --virtual-stages V     model chunks per GPU for the interleaved schedule (>= "
    "2)\n" PRS_CLI_CHANGE_COST_HELP
    "  --straggler S ...      slowdown factors >= 1: numbers ('1.1 1.2' or '1.1,1.2') or\n"
    "                         inclusive ranges START:STOP:STEP ('1.01:1.50:0.01'); repeatable\n"
    "  --json                 one JSON object instead of the table\n"
    "  --quiet                no progress or warnings\n" PRS_CLI_POWERCAP_HELP
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  perseus emulate --profile prof.csv --stages 4 --microbatches 8 --pipelines 8 --tp 1 \\\n"
    "                  --unit-time 0.001 --blocking-power 83.64 --straggler 1.05 1.1 1.2\n"
    "  perseus emulate ... --cost-model hull --straggler 1.01:1.50:0.01 --json\n";

static int usage_error(const char *msg, const char *arg)
{
    return prs_cli_usage_error("emulate", msg, arg);
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

static const char *num(char *buf, double x)
{
    return prs_num_fmt_double(buf, PRS_NUMFMT_MAX, x);
}

/* The per-straggler metrics of sm; with paper_rule, each row's saving against its row. */
static json_t *json_rows(const prs_emu_summary *sm, const prs_emu_summary *paper_rule)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < sm->nrows; i++) {
        const prs_emu_metrics *r = &sm->rows[i];
        json_t *o = json_object();
        prs_cli_json_set_real(o, "slowdown", r->s);
        prs_cli_json_set_real(o, "t_prime_s", r->t_prime_s);
        prs_cli_json_set_real(o, "t_star_s", r->choice_time_s);
        prs_cli_json_set_real(o, "intrinsic_saving_pct", sm->intrinsic_saving_pp);
        prs_cli_json_set_real(o, "saving_pct", r->saving);
        prs_cli_json_set_real(o, "job_intrinsic_saving_pct", r->intrinsic_saving);
        prs_cli_json_set_real(o, "extrinsic_saving_pct", r->extrinsic_saving);
        prs_cli_json_set_real(o, "saving_per_pipeline_pct", r->saving_pp);
        prs_cli_json_set_real(o, "t_star_ratio", r->tstar);
        prs_cli_json_set_real(o, "job_energy_j", r->job_energy_j);
        prs_cli_json_set_real(o, "job_base_energy_j", r->job_base_energy_j);
        if (paper_rule)
            prs_cli_json_set_real(o, "saving_minus_paper_rule_pct",
                                  r->saving - paper_rule->rows[i].saving);
        json_array_append_new(rows, o);
    }
    return rows;
}

static json_t *json_summary(const prs_emu_summary *sm)
{
    json_t *o = json_object();
    prs_cli_json_set_real(o, "time_s", sm->time_s);
    prs_cli_json_set_real(o, "energy_j", sm->energy_j);
    if (sm->freq_mhz) json_object_set_new(o, "freq_mhz", json_integer(sm->freq_mhz));
    prs_cli_json_set_real(o, "intrinsic_saving_pct", sm->intrinsic_saving_pp);
    json_object_set_new(o, "stragglers", json_rows(sm, NULL));
    return o;
}

static json_t *json_baselines(const prs_emulation *e, prs_emu_variant v)
{
    static const prs_emu_strategy bl[] = {PRS_EMU_ALLMAX, PRS_EMU_UNIFORM, PRS_EMU_ENVPIPE};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof bl / sizeof bl[0]; i++)
        json_object_set_new(o, prs_emu_strategy_name(bl[i]),
                            json_summary(prs_emulation_get(e, v, bl[i])));
    return o;
}

/* The job and the planner's figures, the keys before the [paper] metrics. */
static json_t *json_job(const prs_emulation *e, const char *profile_path, prs_cost_model model)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(prs_emulation_frontier(e));
    const prs_emu_job *job = prs_emulation_job(e);
    const prs_emu_info *in = prs_emulation_info(e);
    const prs_emu_summary *pp = prs_emulation_get(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "profile", json_string(profile_path));
    json_object_set_new(o, "stages", json_integer(pipe->stages));
    json_object_set_new(o, "microbatches", json_integer(pipe->microbatches));
    json_object_set_new(o, "schedule", json_string(prs_schedule_name(pipe->schedule)));
    json_object_set_new(o, "virtual_stages",
                        json_integer(pipe->virtual_stages > 1 ? pipe->virtual_stages : 1));
    json_object_set_new(o, "pipelines", json_integer(job->pipelines));
    json_object_set_new(o, "tp", json_integer(job->tp));
    json_object_set_new(o, "gpus",
                        json_integer((json_int_t)job->pipelines * job->tp * pipe->stages));
    prs_cli_json_set_real(o, "unit_time_s", pipe->unit_time_s);
    prs_cli_json_set_real(o, "blocking_power_w", pipe->blocking_power_w);
    json_object_set_new(o, "cost_model", json_string(prs_cost_model_name(model)));
    json_object_set_new(o, "frontier_points", json_integer((json_int_t)in->frontier_points));
    json_object_set_new(o, "clean_points", json_integer((json_int_t)in->clean_points));
    prs_cli_json_set_real(o, "t_min_s", in->t_min_s);
    prs_cli_json_set_real(o, "e_intr_j", pp->energy_j);
    prs_cli_json_set_real(o, "t_energy_min_s", in->t_energy_min_s);
    prs_cli_json_set_real(o, "e_energy_min_j", in->e_energy_min_j * job->tp);
    prs_cli_json_set_real(o, "e_base_j", pp->base_energy_j);
    prs_cli_json_set_real(o, "t_allmax_s", in->allmax_time_s);
    return o;
}

/* The command line, parsed and checked. */
typedef struct emulate_args {
    const char *profile_path;
    double *factors; /* --straggler values (owned) */
    size_t nfactors;
    int pipelines, tp, json, quiet;
    prs_cli_pipeline pl;
    prs_cli_powercap cap;
} emulate_args;

static int print_json(const prs_emulation *e, const emulate_args *a, const prs_profile *profile)
{
    const char *profile_path = a->profile_path;
    prs_cost_model model = a->pl.plan.cost_model;
    const prs_emu_summary *pp = prs_emulation_get(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    const prs_emu_summary *ex = prs_emulation_get(e, PRS_EMU_EXACT, PRS_EMU_PERSEUS);
    const prs_emu_summary *lk = prs_emulation_get(e, PRS_EMU_LOOKUP, PRS_EMU_PERSEUS);
    json_t *o = json_job(e, profile_path, model);
    prs_cli_json_set_real(o, "intrinsic_saving_pct", pp->intrinsic_saving_pp);
    json_object_set_new(o, "stragglers", json_rows(pp, NULL));
    json_object_set_new(o, "baselines", json_baselines(e, PRS_EMU_PAPER));
    json_t *exact = json_object();
    prs_cli_json_set_real(exact, "base_time_s", ex->base_time_s);
    prs_cli_json_set_real(exact, "base_energy_j", ex->base_energy_j);
    prs_cli_json_set_real(exact, "time_s", ex->time_s);
    prs_cli_json_set_real(exact, "energy_j", ex->energy_j);
    prs_cli_json_set_real(exact, "intrinsic_saving_pct", ex->intrinsic_saving_pp);
    json_object_set_new(exact, "stragglers", json_rows(ex, NULL));
    json_object_set_new(exact, "baselines", json_baselines(e, PRS_EMU_EXACT));
    json_object_set_new(o, "exact", exact);
    json_t *lookup = json_object();
    prs_cli_json_set_real(lookup, "time_s", lk->time_s);
    prs_cli_json_set_real(lookup, "energy_j", lk->energy_j);
    prs_cli_json_set_real(lookup, "intrinsic_saving_pct", lk->intrinsic_saving_pp);
    json_object_set_new(lookup, "stragglers", json_rows(lk, ex));
    json_object_set_new(o, "lookup", lookup);
    int rc = prs_cli_powercap_run("emulate", &a->cap, profile, prs_emulation_frontier(e),
                                  prs_emulation_job(e)->tp, o);
    if (rc) {
        json_decref(o);
        return rc;
    }
    return prs_cli_json_print(o, JSON_INDENT(2)) ? 1 : 0;
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
           "points, %zu on the clean frontier\n",
           prs_cost_model_name(model), pipe->unit_time_s, pipe->blocking_power_w,
           in->frontier_points, in->clean_points);
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

/* The job's size, pipelines x stages x tp GPUs, at most PRS_MAX_JOB_GPUS (each factor is an int,
 * so two of them multiply in long long without overflow). The library refuses it too
 * (prs__emu_check_job); here the message names the options and the exit status is 2. */
static int check_gpus(const emulate_args *a)
{
    int stages = a->pl.plan.pipe.stages;
    long long pt = (long long)a->pipelines * a->tp;
    if (pt <= PRS_MAX_JOB_GPUS && pt * stages <= PRS_MAX_JOB_GPUS) return 0;
    fprintf(stderr,
            "perseus emulate: --pipelines x --stages x --tp: at most %ld GPUs, got %d x %d x %d\n",
            PRS_MAX_JOB_GPUS, a->pipelines, stages, a->tp);
    return 2;
}

/* Parse the command line (stragglers joined) into a; 0, or the exit status (*done: help). */
static int parse_args(int argc, char **argv, emulate_args *a, int *done)
{
    enum { OPT_PIPE = 'P', OPT_CAP = 'C' };
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         PRS_CLI_PIPELINE_OPTIONS(OPT_PIPE),
                                         PRS_CLI_COST_MODEL_OPTION(OPT_PIPE),
                                         PRS_CLI_FRONTIER_OPTIONS(OPT_PIPE),
                                         PRS_CLI_POWERCAP_OPTIONS(OPT_CAP),
                                         {"pipelines", required_argument, 0, 'N'},
                                         {"tp", required_argument, 0, 't'},
                                         {"straggler", required_argument, 0, 'x'},
                                         {"json", no_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         PRS_CLI_UNITS_OPTION(OPT_PIPE),
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    prs_error err = {0, ""};
    int c, li = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        switch (c) {
        case 'p':
            a->profile_path = optarg;
            break;
        case OPT_CAP:
            if (prs_cli_powercap_option("emulate", opts[li].name, optarg, &a->cap)) return 2;
            break;
        case OPT_PIPE:
            if (prs_cli_pipeline_option("emulate", opts[li].name, optarg, &a->pl)) return 2;
            break;
        case 'N':
            if (prs_cli_positive_int("emulate", "--pipelines", optarg, &a->pipelines)) return 2;
            break;
        case 't':
            if (prs_cli_positive_int("emulate", "--tp", optarg, &a->tp)) return 2;
            break;
        case 'x':
            if (prs_straggler_parse(optarg, &a->factors, &a->nfactors, &err)) {
                fprintf(stderr, "perseus emulate: --straggler: %s\n", err.msg);
                return 2;
            }
            break;
        case 'j':
            a->json = 1;
            break;
        case 'q':
            a->quiet = 1;
            break;
        case 'h':
            fputs(emulate_usage, stdout);
            *done = 1;
            return 0;
        case ':':
            return usage_error("missing value for", argv[optind - 1]);
        default:
            return prs_cli_unknown_option("emulate", argv[optind - 1], opts);
        }
    }
    if (optind < argc) return usage_error("unexpected argument", argv[optind]);
    const prs_cli_pipeline *pl = &a->pl;
    const unsigned shape = PRS_CLI_BIT(PRS_CLI_STAGES) | PRS_CLI_BIT(PRS_CLI_MICROBATCHES);
    const char *missing = !a->profile_path ? "--profile"
                          : prs_cli_pipeline_missing(pl, shape)
                              ? prs_cli_pipeline_missing(pl, shape)
                          : !a->pipelines ? "--pipelines"
                          : !a->tp        ? "--tp"
                                          : prs_cli_pipeline_missing(pl, PRS_CLI_PIPELINE_REQUIRED);
    if (missing) return usage_error("missing required option", missing);
    if (prs_cli_powercap_check(&a->cap)) return usage_error(prs_cli_powercap_check(&a->cap), NULL);
    prs_error perr = {0, ""};
    if (prs_pipeline_check(&a->pl.plan.pipe, &perr)) return usage_error(perr.msg, NULL);
    return check_gpus(a);
}

/* Load the profile and emulate the job; 0, or the exit status (message printed). */
static int run(emulate_args *a, prs_profile **profile, prs_emulation **em)
{
    prs_error err = {0, ""};
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.plan = a->pl.plan;
    if (prs_cli_profile_load("emulate", a->profile_path, &a->pl, &eo.plan.pipe, profile)) return 2;
    if (prs_plan_check(*profile, &eo.plan.pipe, "--unit-time", &err)) {
        fprintf(stderr, "perseus emulate: error: %s\n", err.msg);
        return 2;
    }
    prs_cli_progress ps;
    prs_cli_progress_init(&ps, "emulate", !a->quiet && !a->json);
    eo.plan.progress = prs_cli_on_progress;
    eo.plan.warn = a->quiet ? NULL : prs_cli_on_warn;
    eo.plan.ud = &ps;
    eo.pipelines = a->pipelines;
    eo.tp = a->tp;
    eo.stragglers = a->factors;
    eo.nstragglers = a->nfactors;
    int erc = prs_emulate(*profile, &eo, em, &err);
    if (erc) {
        fprintf(stderr, "perseus emulate: %s\n", err.msg);
        return erc == PRS_EINVAL || erc == PRS_EPARSE ? 2 : 1;
    }
    return prs_cli_frontier_usable("emulate", *profile, prs_emulation_frontier(*em));
}

int prs_cmd_emulate(int argc, char **argv)
{
    char **owned = NULL;
    int nowned = 0, nargc = 0;
    char **args = join_straggler_values(argc, argv, &nargc, &owned, &nowned);
    if (!args) {
        fputs("perseus emulate: out of memory\n", stderr);
        return 1;
    }
    emulate_args a;
    memset(&a, 0, sizeof a);
    prs_cli_pipeline_init(&a.pl);
    prs_cli_powercap_init(&a.cap);
    prs_profile *profile = NULL;
    prs_emulation *em = NULL;
    int done = 0, rc = parse_args(nargc, args, &a, &done);
    if (!rc && !done) rc = run(&a, &profile, &em);
    if (!rc && !done) {
        if (a.json) {
            rc = print_json(em, &a, profile);
        } else {
            print_table(em, a.profile_path, a.pl.plan.cost_model);
            rc = prs_cli_powercap_run("emulate", &a.cap, profile, prs_emulation_frontier(em), a.tp,
                                      NULL);
        }
        if (!rc) rc = fflush(stdout) == 0 ? 0 : 1;
    }
    prs_emulation_free(em);
    prs_profile_free(profile);
    free(a.factors);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(args);
    return rc;
}
