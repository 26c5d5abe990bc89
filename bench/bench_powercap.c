/* bench_powercap: Perseus under a power cap against the uniform knobs, on the SOSP'24 A100
 * profiles (docs/power.md, 'Power caps on the A100 profiles').
 *
 * For GPT-3 175B and Bloom 176B (8 stages, unit 1 ms, blocking power 83.64 W), M = 12 and 96:
 * plan the frontier, then for caps at 95, 90, 85 and 80 % of the all-max plan's average power,
 * held on the average and on the peak over the window, the throughput of Perseus's plan and its
 * ratio to the fastest uniform clock and to a per-GPU power limit at the same cap
 * (perseus/powercap.h). Prints a Markdown table on stdout: docs/power-caps-a100.md is this
 * output (scripts/power-caps-table.sh). Exit 1 if a profile cannot be read or planned, 2 on a
 * bad argument. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/planner.h"
#include "perseus/powercap.h"
#include "perseus/profile.h"

#define PROG "bench_powercap"
#define SUBDIR "data/sosp24/stage_profile"

static const char *const models[] = {"gpt3-175b", "bloom"};
static const int microbatches[] = {12, 96};
static const int pcts[] = {95, 90, 85, 80};

static void cell_ratio(double r)
{
    if (isnan(r))
        printf(" - |");
    else
        printf(" %.4f |", r);
}

/* One (model, M): its rows. 0, or 1 with a message. */
static int one_case(const char *dir, const char *model, int m, prs_cost_model cm, double window)
{
    char path[8192];
    prs_error err = {0, ""};
    int n = snprintf(path, sizeof path, "%s/%s+a100_sxm_bf16.csv", dir, model);
    if (n < 0 || (size_t)n >= sizeof path) {
        fprintf(stderr, PROG ": the profile directory name is too long\n");
        return 1;
    }
    prs_profile *p = NULL;
    prs_frontier *f = NULL;
    prs_powercap *pc = NULL;
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe.stages = 8;
    o.pipe.microbatches = m;
    o.pipe.unit_time_s = 0.001;
    o.pipe.blocking_power_w = 83.64;
    o.cost_model = cm;
    int rc = prs_profile_load(path, &p, &err);
    if (!rc) rc = prs_plan(p, &o, &f, &err);
    if (!rc) rc = prs_powercap_open(p, f, 1, window, &pc, &err);
    for (int on = 0; on < 2 && !rc; on++) {
        double allmax_avg, lo;
        prs_powercap_range(pc, PRS_CAP_AVG, &allmax_avg, &lo);
        for (size_t i = 0; i < sizeof pcts / sizeof pcts[0] && !rc; i++) {
            prs_cap_result r;
            double cap = allmax_avg * pcts[i] / 100.0;
            if ((rc = prs_powercap_choose(pc, cap, (prs_cap_on)on, &r, &err))) break;
            const prs_cap_choice *ps = &r.s[PRS_CAP_PERSEUS];
            printf("| %s | %d | %s | %d %% | %.1f |", model, m, prs_cap_on_name((prs_cap_on)on),
                   pcts[i], cap);
            if (ps->feasible)
                printf(" %.5f | %.1f |", ps->throughput_per_s, ps->peak_power_w);
            else
                printf(" - | - |");
            cell_ratio(prs_cap_ratio(ps, &r.s[PRS_CAP_UNIFORM]));
            cell_ratio(prs_cap_ratio(ps, &r.s[PRS_CAP_POWER_LIMIT]));
            printf("\n");
        }
    }
    if (rc) fprintf(stderr, PROG ": %s M=%d: %s\n", model, m, err.msg);
    prs_powercap_free(pc);
    prs_frontier_free(f);
    prs_profile_free(p);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"profiles", required_argument, 0, 'p'},
                                         {"cost-model", required_argument, 0, 'c'},
                                         {"window", required_argument, 0, 'w'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *dir = NULL;
    prs_cost_model cm = PRS_COST_EXP;
    double window = 1.0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'p':
            dir = optarg;
            break;
        case 'c':
            if (prs_cost_model_parse(optarg, &cm) == 0) break;
            fprintf(stderr, PROG ": --cost-model: expected exp or hull, got '%s'\n", optarg);
            return 2;
        case 'w':
            window = strtod(optarg, &end);
            if (end != optarg && !*end && window > 0 && isfinite(window)) break;
            fprintf(stderr, PROG ": --window: expected seconds > 0, got '%s'\n", optarg);
            return 2;
        case 'h':
            printf("usage: " PROG " [--profiles DIR] [--cost-model exp|hull] [--window SEC]\n");
            return 0;
        default:
            return 2;
        }
    }
    char buf[2048];
    if (!dir) {
        const char *shared = getenv("PRS_SHARED_DIR");
        int n = snprintf(buf, sizeof buf, "%s/" SUBDIR, shared && *shared ? shared : "../shared");
        if (n < 0 || (size_t)n >= sizeof buf) return fprintf(stderr, PROG ": name too long\n"), 2;
        dir = buf;
    }
    printf("| model | M | cap on | cap (%% of all-max avg) | cap (W) | Perseus (it/s) | Perseus "
           "peak (W) | vs uniform | vs power limit |\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (size_t k = 0; k < sizeof microbatches / sizeof microbatches[0]; k++)
            if (one_case(dir, models[i], microbatches[k], cm, window)) return 1;
    return 0;
}
