/* The pipeline options every planning subcommand takes (plan, evaluate, emulate, plot savings):
 * --stages, --microbatches, --unit-time, --blocking-power, --schedule, --virtual-stages,
 * --change-cost-us and --cost-model, parsed in one place with one set of messages (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"

static const char *const names[PRS_CLI_NPIPE] = {
    "stages",         "microbatches", "unit-time",     "blocking-power", "schedule",
    "virtual-stages", "cost-model",   "frontier",      "max-points",     "threads",
    "force-units",    "polish",       "change-cost-us"};

void prs_cli_pipeline_init(prs_cli_pipeline *p)
{
    memset(p, 0, sizeof *p);
    prs_plan_opts_default(&p->plan);
}

static int parse_value(const char *cmd, int which, const char *arg, prs_cli_pipeline *p)
{
    prs_pipeline *pipe = &p->plan.pipe;
    char opt[32];
    snprintf(opt, sizeof opt, "--%s", names[which]);
    switch (which) {
    case PRS_CLI_STAGES:
        return prs_cli_positive_int(cmd, opt, arg, &pipe->stages);
    case PRS_CLI_MICROBATCHES:
        return prs_cli_positive_int(cmd, opt, arg, &pipe->microbatches);
    case PRS_CLI_UNIT_TIME:
        return prs_cli_number(cmd, opt, arg, 0, 1, &pipe->unit_time_s);
    case PRS_CLI_BLOCKING_POWER:
        if (prs_num_parse_double(arg, &pipe->blocking_power_w) == 0 &&
            pipe->blocking_power_w >= 0 && pipe->blocking_power_w <= PRS_MAX_BLOCKING_POWER_W)
            return 0;
        fprintf(stderr, "perseus %s: %s: expected a number from 0 to %g (W), got '%s'\n", cmd, opt,
                PRS_MAX_BLOCKING_POWER_W, arg);
        return -1;
    case PRS_CLI_SCHEDULE:
        if (prs_schedule_parse(arg, &pipe->schedule) == 0) return 0;
        prs_cli_usage_error(cmd, "--schedule: expected 1f1b, gpipe or interleaved, got", arg);
        return -1;
    case PRS_CLI_VIRTUAL_STAGES:
        return prs_cli_positive_int(cmd, opt, arg, &pipe->virtual_stages);
    case PRS_CLI_CHANGE_COST: {
        double us;
        if (prs_num_parse_double(arg, &us) == 0 && us >= 0 && us <= PRS_MAX_CHANGE_COST_S * 1e6) {
            pipe->change_cost_s = us / 1e6;
            return 0;
        }
        fprintf(stderr,
                "perseus %s: %s: expected a number of microseconds from 0 to %g, got '%s'\n", cmd,
                opt, PRS_MAX_CHANGE_COST_S * 1e6, arg);
        return -1;
    }
    case PRS_CLI_FRONTIER:
        if (prs_frontier_kind_parse(arg, &p->plan.frontier) == 0) return 0;
        prs_cli_usage_error(cmd, "--frontier: expected auto, raw or clean, got", arg);
        return -1;
    case PRS_CLI_MAX_POINTS:
        if (prs_num_parse_long(arg, &p->plan.max_points) == 0 && p->plan.max_points >= 1) return 0;
        prs_cli_usage_error(cmd, "--max-points: expected an integer >= 1, got", arg);
        return -1;
    case PRS_CLI_FORCE_UNITS:
        return 0;
    case PRS_CLI_POLISH:
        if (prs_polish_kind_parse(arg, &p->plan.polish) == 0) return 0;
        prs_cli_usage_error(cmd, "--polish: expected auto, none, runs or all, got", arg);
        return -1;
    case PRS_CLI_THREADS: {
        long n;
        if (prs_num_parse_long(arg, &n) == 0 && n >= 0 && n <= PRS_PLAN_MAX_THREADS) {
            p->plan.threads = (int)n;
            return 0;
        }
        char what[96];
        snprintf(what, sizeof what, "--threads: expected an integer from 0 to %d, got",
                 PRS_PLAN_MAX_THREADS);
        prs_cli_usage_error(cmd, what, arg);
        return -1;
    }
    default:
        if (prs_cost_model_parse(arg, &p->plan.cost_model) == 0) return 0;
        prs_cli_usage_error(cmd, "--cost-model: expected exp or hull, got", arg);
        return -1;
    }
}

int prs_cli_pipeline_option(const char *cmd, const char *name, const char *arg, prs_cli_pipeline *p)
{
    for (int i = 0; i < PRS_CLI_NPIPE; i++) {
        if (strcmp(name, names[i]) != 0) continue;
        if (parse_value(cmd, i, arg, p)) return -1;
        p->given |= PRS_CLI_BIT(i);
        return 0;
    }
    return 1;
}

const char *prs_cli_pipeline_missing(const prs_cli_pipeline *p, unsigned which)
{
    static const char *const opts[PRS_CLI_NPIPE] = {
        "--stages",         "--microbatches", "--unit-time",     "--blocking-power", "--schedule",
        "--virtual-stages", "--cost-model",   "--frontier",      "--max-points",     "--threads",
        "--force-units",    "--polish",       "--change-cost-us"};
    for (int i = 0; i < PRS_CLI_NPIPE; i++)
        if ((which & PRS_CLI_BIT(i)) && !(p->given & PRS_CLI_BIT(i))) return opts[i];
    return NULL;
}

int prs_cli_pipeline_match(const char *cmd, const prs_cli_pipeline *p, const prs_pipeline *f,
                           const char *dir)
{
    const prs_pipeline *cl = &p->plan.pipe;
    char a[PRS_NUMFMT_MAX], b[PRS_NUMFMT_MAX];
    int fv = f->virtual_stages > 1 ? f->virtual_stages : 1;
    int cv = cl->virtual_stages > 1 ? cl->virtual_stages : 1;
    unsigned given = p->given;
    if ((given & PRS_CLI_BIT(PRS_CLI_STAGES)) && f->stages != cl->stages)
        fprintf(stderr, "perseus %s: --stages %d does not match the frontier's %d (%s)\n", cmd,
                cl->stages, f->stages, dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_MICROBATCHES)) && f->microbatches != cl->microbatches)
        fprintf(stderr, "perseus %s: --microbatches %d does not match the frontier's %d (%s)\n",
                cmd, cl->microbatches, f->microbatches, dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_UNIT_TIME)) && f->unit_time_s != cl->unit_time_s)
        fprintf(stderr, "perseus %s: --unit-time %s does not match the frontier's %s (%s)\n", cmd,
                prs_num_fmt_double(a, sizeof a, cl->unit_time_s),
                prs_num_fmt_double(b, sizeof b, f->unit_time_s), dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_BLOCKING_POWER)) &&
             f->blocking_power_w != cl->blocking_power_w)
        fprintf(stderr, "perseus %s: --blocking-power %s does not match the frontier's %s (%s)\n",
                cmd, prs_num_fmt_double(a, sizeof a, cl->blocking_power_w),
                prs_num_fmt_double(b, sizeof b, f->blocking_power_w), dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_SCHEDULE)) && f->schedule != cl->schedule)
        fprintf(stderr, "perseus %s: --schedule %s does not match the frontier's %s (%s)\n", cmd,
                prs_schedule_name(cl->schedule), prs_schedule_name(f->schedule), dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_VIRTUAL_STAGES)) && fv != cv)
        fprintf(stderr, "perseus %s: --virtual-stages %d does not match the frontier's %d (%s)\n",
                cmd, cv, fv, dir);
    else if ((given & PRS_CLI_BIT(PRS_CLI_CHANGE_COST)) && f->change_cost_s != cl->change_cost_s)
        fprintf(stderr, "perseus %s: --change-cost-us %g does not match the frontier's %g (%s)\n",
                cmd, cl->change_cost_s * 1e6, f->change_cost_s * 1e6, dir);
    else
        return 0;
    return -1;
}
