/* The hull planner against an exact optimum: at times T spread evenly over the clean frontier of
 * small and medium pipelines, the frontier's answer (its least-energy plan within T, charged
 * blocking power up to T) is compared with the MILP of the discrete problem (tests/ref/milp_ref.c,
 * GLPK's branch and cut over every profiled clock) at T: the least energy of any plan finishing
 * within T, blocking power up to T included. Times, not the frontier's own points, so that a
 * frontier is judged the same whichever points it has. The MILP's own plan is re-evaluated with
 * prs_evaluate_plan, and no hull plan may beat the MILP's proven lower bound.
 * On three cases every time is also solved by CBC (tests/ref/milp_cbc.c), the solver
 * scripts/optimum-table.sh uses: its plans pass the same checks and, where both solvers prove
 * optimality, the two optima agree.
 *
 * Cases: synthetic A40-, H100- and A100-class profiles (the GPU model, some with measurement
 * noise) and, when the shared data set is present, the first stages of the SOSP'24 GPT-3 and
 * Bloom A100 profiles. The test prints the gaps it measures; the asserted bound is
 * HULL_GAP_MAX. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "milp_ref.h"
#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/synth.h"
#include "skips.h"

/* Worst gap of an emitted hull plan over the exact optimum, set from measurement (the test
 * prints the figures; docs/planner.md, 'From the relaxed plan to clocks'). */
#define HULL_GAP_MAX 0.003
#define SOLVE_LIMIT_S 5.0
/* A solve stopped by SOLVE_LIMIT_S (wall clock: a busy machine) is solved again with this much
 * more time, so whether both solvers prove a point never depends on the machine's load. */
#define SOLVE_RETRY_LIMIT_S 60.0
#define TIMES_CHECKED 24

typedef struct gcase {
    const char *name;
    const char *gpu; /* synthetic preset, or NULL for a shared profile */
    const char *file;
    int stages, mbs;
    double unit_s, power_w, noise;
    uint64_t seed;
    int cross; /* also solve with CBC: both must prove the same optimum */
} gcase;

static double worst_overall;

/* The time T (units) to check, the frontier's plan for it (into plan) and that plan's energy
 * charged up to T. */
typedef struct probe {
    long T;
    double T_s, energy_j;
} probe;

/* Solve at p->T with the reference's solver and check its plan: it evaluates (prs_evaluate_plan)
 * to what the solver says, within T, and no hull plan beats the proven bound. */
static void solve_checked(const gcase *c, prs_milp *m, const prs_profile *prof,
                          const prs_plan_opts *o, const probe *p, const int *plan, int *best,
                          prs_milp_result *r)
{
    prs_error err = {0, ""};
    if (prs_milp_solve(m, p->T, plan, SOLVE_LIMIT_S, r, best, &err))
        fail_msg("%s: MILP at T = %ld: %s", c->name, p->T, err.msg);
    if (r->status == PRS_MILP_FEASIBLE && c->cross &&
        prs_milp_solve(m, p->T, plan, SOLVE_RETRY_LIMIT_S, r, best, &err))
        fail_msg("%s: MILP at T = %ld (again): %s", c->name, p->T, err.msg);
    assert_int_not_equal(r->status, PRS_MILP_INFEASIBLE);
    double t_s, e_j;
    assert_int_equal(prs_evaluate_plan(prof, &o->pipe, best, &t_s, &e_j, &err), 0);
    double charged = e_j + (double)c->stages * c->power_w * (p->T_s - t_s);
    assert_true(t_s <= p->T_s + 1e-9);
    assert_true(fabs(charged - r->energy_j) <= 1e-6 * r->energy_j);
    /* no plan beats a proven lower bound */
    assert_true(p->energy_j >= r->bound_j * (1 - 1e-9));
}

/* The same point solved by CBC: where both solvers prove optimality, they agree. */
static void cross_check(const gcase *c, prs_milp *cbc, const prs_profile *prof,
                        const prs_plan_opts *o, const probe *p, const int *plan, int *best,
                        const prs_milp_result *glpk, int *agreed)
{
    prs_milp_result r;
    solve_checked(c, cbc, prof, o, p, plan, best, &r);
    assert_true(r.bound_j <= glpk->energy_j * (1 + 1e-9));
    assert_true(glpk->bound_j <= r.energy_j * (1 + 1e-9));
    if (r.status == PRS_MILP_OPTIMAL && glpk->status == PRS_MILP_OPTIMAL) {
        if (fabs(r.energy_j - glpk->energy_j) > 1e-6 * glpk->energy_j)
            fail_msg("%s at %.4f s: CBC proves %.6f J, GLPK %.6f J", c->name, p->T_s, r.energy_j,
                     glpk->energy_j);
        ++*agreed;
    }
}

/* The case's hull frontier (clean), its options in *o. */
static prs_frontier *plan_case(const gcase *c, const prs_profile *prof, prs_plan_opts *o)
{
    prs_plan_opts_default(o);
    o->pipe.stages = c->stages;
    o->pipe.microbatches = c->mbs;
    o->pipe.unit_time_s = c->unit_s;
    o->pipe.blocking_power_w = c->power_w;
    o->cost_model = PRS_COST_HULL;
    o->frontier = PRS_FRONTIER_CLEAN;
    prs_error err = {0, ""};
    prs_frontier *f = NULL;
    if (prs_plan(prof, o, &f, &err)) fail_msg("%s: plan: %s", c->name, err.msg);
    return f;
}

/* The synthetic profile of a case with a GPU preset. */
static prs_profile *synth_case(const gcase *c)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.gpu = prs_gpu_preset_find(c->gpu);
    assert_non_null(so.gpu);
    so.stages = c->stages;
    so.noise = c->noise;
    so.seed = c->seed;
    prs_profile *prof = NULL;
    prs_error err = {0, ""};
    if (prs_synth_profile(&so, &prof, &err)) fail_msg("%s: synth: %s", c->name, err.msg);
    return prof;
}

/* The frontier's plan for p->T: the one with the least energy charged up to T (p->energy_j). */
static size_t charged_best(const gcase *c, const prs_frontier *f, probe *p)
{
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < prs_frontier_size(f); k++) {
        const prs_frontier_point *pt = prs_frontier_point_at(f, k);
        if (pt->eval_time_s > p->T_s + 1e-9) continue;
        double e = pt->eval_energy_j + (double)c->stages * c->power_w * (p->T_s - pt->eval_time_s);
        if (best == SIZE_MAX || e < p->energy_j) best = k, p->energy_j = e;
    }
    assert_true(best != SIZE_MAX);
    return best;
}

static void check_case(const gcase *c, prs_profile *prof)
{
    prs_plan_opts o;
    prs_frontier *f = plan_case(c, prof, &o);
    prs_error err = {0, ""};
    prs_milp *m = prs_milp_new(prof, &o.pipe, &err);
    if (!m) fail_msg("%s: MILP: %s", c->name, err.msg);
    prs_milp *cbc = c->cross ? prs_milp_new(prof, &o.pipe, &err) : NULL;
    if (c->cross && !cbc) fail_msg("%s: MILP for CBC: %s", c->name, err.msg);
    if (cbc && prs_milp_set_solver(cbc, PRS_MILP_CBC, 1))
        fail_msg("%s: CBC refused as the solver", c->name);
    size_t n = prs_frontier_size(f);
    /* evaluated times of the clean frontier fall point by point: the slowest comes first */
    long t_slow = lround(prs_frontier_point_at(f, 0)->eval_time_s / c->unit_s);
    long t_fast = lround(prs_frontier_point_at(f, n - 1)->eval_time_s / c->unit_s);
    long span = t_slow - t_fast, ntimes = span < TIMES_CHECKED ? span + 1 : TIMES_CHECKED;
    int nops = c->stages * 2 * c->mbs;
    int *plan = malloc(sizeof *plan * (size_t)nops), *best = malloc(sizeof *best * (size_t)nops);
    assert_non_null(plan);
    assert_non_null(best);
    double worst = 0, worst_t = 0;
    int checked = 0, optimal = 0, exact = 0, agreed = 0;
    for (long j = 0; j < ntimes; j++) {
        probe p;
        p.T = t_fast + (ntimes > 1 ? span * j / (ntimes - 1) : 0);
        p.T_s = (double)p.T * c->unit_s;
        size_t k = charged_best(c, f, &p);
        assert_int_equal(prs_frontier_plan(f, k, plan, &err), 0);
        prs_milp_result r;
        solve_checked(c, m, prof, &o, &p, plan, best, &r);
        if (cbc) cross_check(c, cbc, prof, &o, &p, plan, best, &r, &agreed);
        /* Against the proven optimum; a solve stopped by its limit (whose best plan may be the
         * hull plan it was started from) is judged against its lower bound instead. */
        double ref = r.status == PRS_MILP_OPTIMAL ? r.energy_j : r.bound_j;
        double gap = p.energy_j / ref - 1;
        if (gap > worst) worst = gap, worst_t = p.T_s;
        checked++;
        optimal += r.status == PRS_MILP_OPTIMAL;
        exact += gap <= 1e-9;
    }
    print_message("%s: %zu plans, %d times checked (%d proven optimal by the MILP), %d at the "
                  "optimum, worst gap %.4f %% at %.4f s\n",
                  c->name, n, checked, optimal, exact, 100 * worst, worst_t);
    if (cbc) {
        print_message("%s: CBC and GLPK proved the same optimum at %d times\n", c->name, agreed);
        assert_int_equal(agreed, checked); /* small cases: both prove every time */
    }
    if (worst > worst_overall) worst_overall = worst;
    if (worst > HULL_GAP_MAX)
        fail_msg("%s: hull plan %.4f %% above the optimum at %.4f s (bound %.2f %%)", c->name,
                 100 * worst, worst_t, 100 * HULL_GAP_MAX);
    free(plan);
    free(best);
    prs_milp_free(m);
    prs_milp_free(cbc);
    prs_frontier_free(f);
}

static void run_synth(const gcase *c)
{
    prs_profile *prof = synth_case(c);
    check_case(c, prof);
    prs_profile_free(prof);
}

static void test_synthetic(void **state)
{
    (void)state;
    static const gcase cases[] = {
        {"A40-class S=2 M=2, 1 ms", "a40", NULL, 2, 2, 1e-3, 70.38, 0, 0, 1},
        {"A40-class S=3 M=3, 1 ms, 3 % noise", "a40", NULL, 3, 3, 1e-3, 70.38, 0.03, 7, 0},
        {"H100-class S=2 M=3, 1 ms", "h100", NULL, 2, 3, 1e-3, 146.37, 0, 0, 1},
        {"H100-class S=4 M=4, 1 ms, 2 % noise", "h100", NULL, 4, 4, 1e-3, 146.37, 0.02, 3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_synth(&cases[i]);
}

static void test_paper_profiles(void **state)
{
    (void)state;
    const char *shared = getenv("PRS_SHARED_DIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/data/sosp24/stage_profile",
             shared && *shared ? shared : "../shared");
    static const gcase cases[] = {
        {"GPT-3 A100 S=4 M=4", NULL, "gpt3-175b+a100_sxm_bf16.csv", 4, 4, 1e-3, 83.64, 0, 0, 1},
        {"Bloom A100 S=4 M=4", NULL, "bloom+a100_sxm_bf16.csv", 4, 4, 1e-3, 83.64, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
        prs_profile *prof = NULL;
        prs_error err = {0, ""};
        if (prs_profile_load(path, &prof, &err)) prs_skip_input("SOSP'24 profiles not found");
        check_case(&cases[i], prof);
        prs_profile_free(prof);
    }
    print_message("worst gap over every case: %.4f %%\n", 100 * worst_overall);
}

/* Both solvers at a time one unit below the fastest plan's (no plan fits: infeasible) and at the
 * fastest plan's time with almost no time to search: CBC still answers with the plan it was
 * started from or a better one. */
static void test_solver_edges(void **state)
{
    (void)state;
    const gcase c = {
        "H100-class S=4 M=4, 1 ms, 2 % noise", "h100", NULL, 4, 4, 1e-3, 146.37, 0.02, 3, 1};
    prs_profile *prof = synth_case(&c);
    prs_plan_opts o;
    prs_frontier *f = plan_case(&c, prof, &o);
    prs_error err = {0, ""};
    size_t last = prs_frontier_size(f) - 1;
    const prs_frontier_point *pt = prs_frontier_point_at(f, last);
    long T = lround(pt->eval_time_s / c.unit_s);
    int nops = c.stages * 2 * c.mbs;
    int *plan = malloc(sizeof *plan * (size_t)nops), *best = malloc(sizeof *best * (size_t)nops);
    assert_non_null(plan);
    assert_non_null(best);
    assert_int_equal(prs_frontier_plan(f, last, plan, &err), 0);
    for (int solver = PRS_MILP_GLPK; solver <= PRS_MILP_CBC; solver++) {
        prs_milp *m = prs_milp_new(prof, &o.pipe, &err);
        assert_non_null(m);
        assert_int_equal(prs_milp_set_solver(m, (prs_milp_solver)solver, 1), 0);
        prs_milp_result r;
        assert_int_equal(prs_milp_solve(m, T - 1, NULL, SOLVE_LIMIT_S, &r, NULL, &err), 0);
        assert_int_equal(r.status, PRS_MILP_INFEASIBLE);
        if (solver == PRS_MILP_CBC) {
            assert_int_equal(prs_milp_solve(m, T, plan, 1e-3, &r, best, &err), 0);
            assert_true(r.energy_j <= pt->eval_energy_j * (1 + 1e-9));
            assert_true(r.bound_j <= r.energy_j);
        }
        assert_int_equal(prs_milp_set_solver(m, (prs_milp_solver)2, 1), -1);
        assert_int_equal(prs_milp_set_solver(m, PRS_MILP_CBC, 0), -1);
        prs_milp_free(m);
    }
    free(plan);
    free(best);
    prs_frontier_free(f);
    prs_profile_free(prof);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_paper_profiles),
        cmocka_unit_test(test_solver_edges),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
