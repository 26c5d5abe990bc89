/* optimum_table: the hull planner's clean frontier against the exact optimum (milp_ref.h).
 *
 *   optimum_table [--solver glpk|cbc] [--threads N] PROFILE STAGES MICROBATCHES UNIT_S
 *                 BLOCKING_W NTIMES TIME_LIMIT_S [LABEL [RETRY_LIMIT_S]]
 *
 * Plans with the hull model (clean frontier) without polishing ("unpolished", the planner
 * before polishing) and with its default (the fastest plan polished), picks NTIMES points evenly
 * spread over the unpolished frontier by index, the slowest and the fastest (T_min) included,
 * and at each point's evaluated time T takes the plan a job runs there: the lookup
 * (prs_frontier_lookup_plan) on the unpolished frontier, and the polished lookup on the polished
 * one (the plans perseusd runs). It then solves the MILP at T (the polished plan offered as the
 * first incumbent, TIME_LIMIT_S per solve; GLPK's branch and cut unless --solver cbc, with N
 * threads for CBC). The MILP's plan is checked with prs_evaluate_plan. Energies are charged
 * blocking power up to T. Prints one Markdown table row per point: label, T, unpolished,
 * polished, best MILP energy, proven lower bound, status, the polished plan's gap over the best
 * plan found and over the bound (the true gap lies between), and its certified gap over the LP
 * relaxation's bound (prs_frontier_point.bound_j). Last line: the worst of each.
 * With RETRY_LIMIT_S, a point whose gap over the bound exceeds 0.1 % after the first solve is
 * solved again with that longer limit (the bound is then tighter or the same; status "retried"
 * when the retry also stops at its limit). Exit 0, or 1 on any error. Run by
 * scripts/optimum-table.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milp_ref.h"
#include "perseus/evaluate.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

static int fail(const char *what, const prs_error *err)
{
    fprintf(stderr, "optimum_table: %s: %s\n", what, err->msg);
    return 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: optimum_table [--solver glpk|cbc] [--threads N] PROFILE STAGES "
                    "MICROBATCHES UNIT_S BLOCKING_W NTIMES TIME_LIMIT_S [LABEL "
                    "[RETRY_LIMIT_S]]\n");
    return 2;
}

/* Leading options; the index of the first positional argument, or -1 on a bad one. */
static int parse_opts(int argc, char **argv, prs_milp_solver *solver, int *threads)
{
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--solver") == 0 && strcmp(argv[i + 1], "glpk") == 0)
            *solver = PRS_MILP_GLPK;
        else if (strcmp(argv[i], "--solver") == 0 && strcmp(argv[i + 1], "cbc") == 0)
            *solver = PRS_MILP_CBC;
        else if (strcmp(argv[i], "--threads") == 0 && (*threads = atoi(argv[i + 1])) >= 1 &&
                 *threads <= 64)
            continue;
        else
            return -1;
    }
    return i;
}

/* What one run compares: both frontiers, the MILP, scratch plans, and the worst gaps so far. */
typedef struct table {
    prs_profile *prof;
    prs_plan_opts o;
    prs_frontier *f, *fp; /* unpolished, polished */
    prs_milp *m;
    int *plan, *best;
    double limit, retry, bw;
    const char *label;
    double worst_best, worst_bound, worst_lp;
} table;

/* The MILP's plan evaluates to what it says, within T_s; the polished plan is no worse than the
 * unpolished one. 0, or 1 with a message. */
static int check_plans(const table *tb, const prs_milp_result *r, double T_s, double today,
                       double polished)
{
    prs_error err = {0, ""};
    double t_s, e_j;
    if (prs_evaluate_plan(tb->prof, &tb->o.pipe, tb->best, &t_s, &e_j, &err))
        return fail("evaluate", &err);
    double charged = e_j + tb->bw * (T_s - t_s);
    if (t_s > T_s + 1e-9 || fabs(charged - r->energy_j) > 1e-6 * r->energy_j) {
        fprintf(stderr,
                "optimum_table: MILP plan evaluates to %.9g J at %.6f s, MILP says "
                "%.9g J within %.6f s\n",
                charged, t_s, r->energy_j, T_s);
        return 1;
    }
    if (polished > today * (1 + 1e-12)) {
        fprintf(stderr, "optimum_table: polished plan %.9g J above unpolished %.9g J\n", polished,
                today);
        return 1;
    }
    return 0;
}

/* The row of the unpolished frontier's point k: both lookups, the MILP (solved again with the
 * longer limit when its gap stays over 0.1 %), the checks. 0, or 1 with a message. */
static int table_row(table *tb, size_t k)
{
    prs_error err = {0, ""};
    const prs_frontier_point *pt = prs_frontier_point_at(tb->f, k);
    double T_s = pt->eval_time_s, t0, e0, t1, e1;
    long T = lround(T_s / tb->o.pipe.unit_time_s);
    if (prs_frontier_lookup_plan(tb->f, tb->prof, T_s, PRS_POLISH_NONE, tb->plan, NULL, &t0, &e0,
                                 &err) ||
        prs_frontier_lookup_plan(tb->fp, tb->prof, T_s, PRS_POLISH_RUNS, tb->plan, NULL, &t1, &e1,
                                 &err))
        return fail("lookup", &err);
    double today = e0 + tb->bw * (T_s - t0), polished = e1 + tb->bw * (T_s - t1);
    prs_milp_result r;
    if (prs_milp_solve(tb->m, T, tb->plan, tb->limit, &r, tb->best, &err))
        return fail("MILP solve", &err);
    int retried = 0;
    if (tb->retry > tb->limit && r.status == PRS_MILP_FEASIBLE && polished / r.bound_j - 1 > 1e-3) {
        if (prs_milp_solve(tb->m, T, tb->plan, tb->retry, &r, tb->best, &err))
            return fail("MILP solve", &err);
        retried = 1;
    }
    if (r.status == PRS_MILP_INFEASIBLE) {
        fprintf(stderr, "optimum_table: MILP infeasible at T = %ld, where a plan exists\n", T);
        return 1;
    }
    if (check_plans(tb, &r, T_s, today, polished)) return 1;
    double g_best = polished / r.energy_j - 1, g_bound = polished / r.bound_j - 1,
           g_lp = polished / pt->bound_j - 1;
    if (g_best > tb->worst_best) tb->worst_best = g_best;
    if (g_bound > tb->worst_bound) tb->worst_bound = g_bound;
    if (g_lp > tb->worst_lp) tb->worst_lp = g_lp;
    printf("| %s | %.4f | %.2f | %.2f | %.2f | %.2f | %s | %+.3f %% | %+.3f %% | %+.3f %% |\n",
           tb->label, T_s, today, polished, r.energy_j, r.bound_j,
           r.status == PRS_MILP_OPTIMAL ? "optimal"
           : retried                    ? "retried"
                                        : "time limit",
           100 * g_best, 100 * g_bound, 100 * g_lp);
    fflush(stdout);
    return 0;
}

/* The profile loaded, the pipeline and the limits from the positional arguments (argv[1] the
 * profile). -1 to go on, else the exit status. */
static int read_args(int argc, char **argv, table *tb, int *ntimes)
{
    prs_error err = {0, ""};
    if (prs_profile_load(argv[1], &tb->prof, &err)) return fail(argv[1], &err);
    prs_plan_opts_default(&tb->o);
    tb->o.pipe.stages = atoi(argv[2]);
    tb->o.pipe.microbatches = atoi(argv[3]);
    tb->o.pipe.unit_time_s = strtod(argv[4], NULL);
    tb->o.pipe.blocking_power_w = strtod(argv[5], NULL);
    tb->o.cost_model = PRS_COST_HULL;
    tb->o.frontier = PRS_FRONTIER_CLEAN;
    *ntimes = atoi(argv[6]);
    tb->limit = strtod(argv[7], NULL);
    tb->label = argc > 8 ? argv[8] : argv[1];
    tb->retry = argc > 9 ? strtod(argv[9], NULL) : 0;
    if (*ntimes < 2 || !(tb->limit > 0) || !(tb->retry >= 0)) {
        fprintf(stderr, "optimum_table: NTIMES >= 2, TIME_LIMIT_S > 0, RETRY_LIMIT_S >= 0\n");
        return 2;
    }
    return -1;
}

/* Both frontiers (unpolished and polished), the MILP and the scratch plans. -1 to go on, else
 * the exit status. */
static int prepare(table *tb, prs_milp_solver solver, int threads)
{
    prs_error err = {0, ""};
    tb->o.polish = PRS_POLISH_NONE;
    if (prs_plan(tb->prof, &tb->o, &tb->f, &err)) return fail("plan", &err);
    tb->o.polish = PRS_POLISH_AUTO;
    if (prs_plan(tb->prof, &tb->o, &tb->fp, &err)) return fail("plan", &err);
    tb->m = prs_milp_new(tb->prof, &tb->o.pipe, &err);
    if (!tb->m) return fail("MILP", &err);
    if (prs_milp_set_solver(tb->m, solver, threads)) return usage();
    int nops = tb->o.pipe.stages * 2 * tb->o.pipe.microbatches;
    tb->plan = malloc(sizeof *tb->plan * (size_t)nops);
    tb->best = malloc(sizeof *tb->best * (size_t)nops);
    if (!tb->plan || !tb->best) return 1;
    tb->worst_best = tb->worst_bound = tb->worst_lp = -INFINITY;
    tb->bw = (double)tb->o.pipe.stages * tb->o.pipe.blocking_power_w;
    return -1;
}

int main(int argc, char **argv)
{
    prs_milp_solver solver = PRS_MILP_GLPK;
    int threads = 1, first = parse_opts(argc, argv, &solver, &threads);
    if (first < 0) return usage();
    argc -= first - 1;
    argv += first - 1;
    if (argc < 8 || argc > 10) return usage();
    static table tb;
    int ntimes, st = read_args(argc, argv, &tb, &ntimes);
    if (st >= 0) return st;
    if ((st = prepare(&tb, solver, threads)) >= 0) return st;
    size_t n = prs_frontier_size(tb.f);
    size_t last = (size_t)-1;
    for (int i = 0; i < ntimes; i++) {
        size_t k = (size_t)llround((double)i * (double)(n - 1) / (double)(ntimes - 1));
        if (k == last) continue;
        last = k;
        if (table_row(&tb, k)) return 1;
    }
    printf("worst %s: %+.3f %% over the best plan found, %+.3f %% over the bound, %+.3f %% over "
           "the LP bound\n",
           tb.label, 100 * tb.worst_best, 100 * tb.worst_bound, 100 * tb.worst_lp);
    free(tb.plan);
    free(tb.best);
    prs_milp_free(tb.m);
    prs_frontier_free(tb.f);
    prs_frontier_free(tb.fp);
    prs_profile_free(tb.prof);
    return 0;
}
