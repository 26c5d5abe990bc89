/* Is the Phillips-Dessouky loop optimal for its own cost model? An independent check with a
 * linear program, on GPUs and time units that the published golden frontiers do not cover.
 *
 * For one iteration time T (units of tau) the planner's problem is the time-cost tradeoff
 *
 *     minimise  sum over computations of C_type(d)
 *     s.t.      longest source-sink path with durations d <= T,  q_min <= d <= q_max, d integer,
 *
 * where C_type is the cost model of the computation's (stage, instruction) type, tabulated by
 * prs__model_build at every integer d in [q_min, q_max] (docs/planner.md, 'Exponential fit'). The
 * planner reports, at each frontier point, the predicted effective energy sum C(d) of its plan
 * (docs/planner.md, 'Frontier output': energy - stages * P_block * time). Here the same problem is
 * solved by GLPK's simplex:
 *
 *   - event times x_v >= 0 per AOA node, x_source = 0, x_sink <= T;
 *   - per computation one variable y_k in [0, 1] per unit segment k of its range, "shortened
 *     through segment k" (from q_max - k to q_max - k - 1), with cost C(q_max - k - 1) - C(q_max -
 *     k); the duration is d = q_max - sum_k y_k;
 *   - per arc x_to - x_from >= d (dummy arcs: >= 0), i.e. x_to - x_from + sum_k y_k >= q_max;
 *   - objective sum C(q_max) + sum of segment costs * y.
 *
 * This is the incremental (segment) form of the separable convex piecewise-linear objective,
 * equivalent to the epigraph form z >= C(k) + (C(k+1) - C(k)) (d - k) but with the segments as
 * bounded columns instead of rows, which keeps the basis as small as the graph (a few hundred rows
 * instead of tens of thousands at tau = 0.1 ms). Because C is convex the segment costs increase
 * with k, so the LP fills segments in order and its value is C of the relaxed duration. The
 * constraint matrix (arcs x nodes, plus unit columns) is a network matrix and the right-hand
 * sides are integers, so the LP has an integer optimum: its value is the integer optimum, which
 * every frontier point must reach (within 1e-7 relative).
 *
 * Also: the LP is infeasible one unit below the last (fastest) point, and at T_max = first point
 * + 1 its optimum is sum C(q_max) (everything at its slowest). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "skips.h"
#include <glpk.h>

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "plan_int.h"

#define REL_TOL 1e-7
#define NSAMPLE 20 /* evenly spaced interior points, besides the first and the last */

/* Worst relative gap (PD cost - LP optimum) / |LP optimum| seen per cost model. */
typedef struct stats {
    double worst_gap[2];
    double worst_abs_gap[2]; /* |gap| */
    int cases[2];
    long lps[2];
    long points[2];
} stats;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- The LP ---- */

/* A run of unit segments of one type's model with the same slope (hull: a whole hull edge; exp:
 * normally one unit): one LP column "shortened by y units through this run", y in [0, len]. */
typedef struct run_col {
    long len;
    double cost_per_unit; /* C(d - 1) - C(d) on the run, >= 0, increasing from run to run */
} run_col;

typedef struct type_runs {
    int n;
    run_col *r; /* slowest first: the first run starts at q_max */
} type_runs;

#define SLOPE_MERGE_TOL 1e-9 /* relative: merging changes C by far less than REL_TOL */

static void type_runs_build(type_runs *tr, const prs__model_optype *t)
{
    long span = t->q_max - t->q_min;
    tr->n = 0;
    tr->r = malloc(sizeof *tr->r * (size_t)(span > 0 ? span : 1));
    assert_non_null(tr->r);
    long j = 0; /* segment j: from d = q_max - j to q_max - j - 1, table index span - j */
    while (j < span) {
        double s0 = t->cost[span - j - 1] - t->cost[span - j];
        long len = 1;
        while (j + len < span) {
            double s = t->cost[span - j - len - 1] - t->cost[span - j - len];
            if (!(fabs(s - s0) <= SLOPE_MERGE_TOL * fabs(s0))) break;
            len++;
        }
        run_col *rc = &tr->r[tr->n++];
        rc->len = len;
        rc->cost_per_unit = (t->cost[span - j - len] - t->cost[span - j]) / (double)len;
        j += len;
    }
}

typedef struct tclp {
    glp_prob *lp;
    int col_sink;      /* GLPK column of x_sink */
    double const_cost; /* sum of C(q_max) over computations */
} tclp;

static void tclp_build(tclp *L, const prs__graph_graph *g, const prs__model_optype *types,
                       int ntypes)
{
    memset(L, 0, sizeof *L);
    int nnodes = g->nnodes, narcs = g->narcs;
    type_runs *tr = calloc((size_t)ntypes, sizeof *tr);
    assert_non_null(tr);
    for (int k = 0; k < ntypes; k++)
        type_runs_build(&tr[k], &types[k]);
    long nruns = 0;
    for (int op = 0; op < g->nops; op++)
        nruns += tr[g->op_type[op]].n;
    long ncols = nnodes + nruns, nnz = 2L * narcs + nruns;
    assert_true(ncols < 100000000L);
    L->lp = glp_create_prob();
    glp_set_obj_dir(L->lp, GLP_MIN);
    glp_add_rows(L->lp, narcs);
    glp_add_cols(L->lp, (int)ncols);
    int *ia = malloc(sizeof *ia * (size_t)(nnz + 1));
    int *ja = malloc(sizeof *ja * (size_t)(nnz + 1));
    double *ar = malloc(sizeof *ar * (size_t)(nnz + 1));
    assert_non_null(ia);
    assert_non_null(ja);
    assert_non_null(ar);
    /* event times: columns 1..nnodes */
    for (int v = 0; v < nnodes; v++) {
        if (v == g->source)
            glp_set_col_bnds(L->lp, v + 1, GLP_FX, 0, 0);
        else
            glp_set_col_bnds(L->lp, v + 1, GLP_LO, 0, 0);
    }
    L->col_sink = g->sink + 1;
    int next_col = nnodes + 1;
    long k = 0;
    double cst = 0;
    for (int a = 0; a < narcs; a++) {
        const prs__graph_arc *arc = &g->arcs[a];
        int row = a + 1;
        ++k, ia[k] = row, ja[k] = arc->to + 1, ar[k] = 1.0;
        ++k, ia[k] = row, ja[k] = arc->from + 1, ar[k] = -1.0;
        if (arc->op < 0) {
            glp_set_row_bnds(L->lp, row, GLP_LO, 0, 0);
            continue;
        }
        assert_int_equal(g->op_arc[arc->op], a);
        const prs__model_optype *t = &types[g->op_type[arc->op]];
        const type_runs *r = &tr[g->op_type[arc->op]];
        /* x_to - x_from >= d = q_max - sum y */
        glp_set_row_bnds(L->lp, row, GLP_LO, (double)t->q_max, 0);
        cst += t->cost[t->q_max - t->q_min];
        for (int i = 0; i < r->n; i++) {
            int col = next_col++;
            glp_set_col_bnds(L->lp, col, GLP_DB, 0, (double)r->r[i].len);
            glp_set_obj_coef(L->lp, col, r->r[i].cost_per_unit);
            ++k, ia[k] = row, ja[k] = col, ar[k] = 1.0;
        }
    }
    assert_int_equal(k, nnz);
    assert_int_equal(next_col, ncols + 1);
    glp_set_obj_coef(L->lp, 0, cst);
    L->const_cost = cst;
    glp_load_matrix(L->lp, (int)nnz, ia, ja, ar);
    free(ia);
    free(ja);
    free(ar);
    for (int i = 0; i < ntypes; i++)
        free(tr[i].r);
    free(tr);
}

static void tclp_free(tclp *L)
{
    glp_delete_prob(L->lp);
    L->lp = NULL;
}

enum { LP_OPT, LP_INFEASIBLE };

/* Solve with x_sink <= T, from scratch (the presolver ignores any previous basis). Returns
 * LP_OPT (objective in *obj) or LP_INFEASIBLE; anything else fails the test. The dual simplex
 * suits this LP: the all-slowest starting point is dual feasible (segment costs >= 0), and the
 * long-step ratio test passes many segment breakpoints per iteration. */
static int tclp_solve(tclp *L, long T, double *obj)
{
    glp_set_col_bnds(L->lp, L->col_sink, T > 0 ? GLP_DB : GLP_FX, 0, (double)T);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.meth = GLP_DUALP;
    parm.r_test = GLP_RT_FLIP;
    parm.presolve = GLP_ON;
    int rc = glp_simplex(L->lp, &parm);
    if (rc == GLP_ENOPFS) {
        /* the presolver found no primal feasible solution: confirm without it */
        parm.presolve = GLP_OFF;
        glp_std_basis(L->lp);
        rc = glp_simplex(L->lp, &parm);
        if (rc != 0) fail_msg("glp_simplex (no presolve) returned %d at T = %ld", rc, T);
        if (glp_get_status(L->lp) != GLP_NOFEAS)
            fail_msg("presolver says infeasible at T = %ld, simplex status %d", T,
                     glp_get_status(L->lp));
        return LP_INFEASIBLE;
    }
    if (rc != 0) fail_msg("glp_simplex returned %d at T = %ld", rc, T);
    int st = glp_get_status(L->lp);
    if (st == GLP_NOFEAS) return LP_INFEASIBLE;
    if (st != GLP_OPT) fail_msg("glp_simplex status %d at T = %ld", st, T);
    *obj = glp_get_obj_val(L->lp);
    return LP_OPT;
}

/* ---- One case ---- */

typedef struct tcase {
    const char *label; /* preset or profile name */
    const prs_profile *prof;
    int stages, mbs;
    double unit_s, p_block_w;
    prs_cost_model model;
} tcase;

static void check_convex(const prs__model_optype *t, const tcase *c)
{
    long span = t->q_max - t->q_min;
    for (long i = 1; i < span; i++) {
        double left = t->cost[i - 1] - t->cost[i], right = t->cost[i] - t->cost[i + 1];
        double tol = 1e-12 * (fabs(t->cost[i - 1]) + fabs(t->cost[i + 1]));
        if (right > left + tol)
            fail_msg("%s S=%d M=%d unit=%g %s: stage %d %s cost model not convex at d=%ld "
                     "(%.17g > %.17g): the LP would not be exact",
                     c->label, c->stages, c->mbs, c->unit_s, prs_cost_model_name(c->model),
                     t->stage, prs_instr_name(t->instr), t->q_min + i, right, left);
    }
}

static int fail_count;

/* The planner's own points (each checked against the LP); o gets the options, *t_plan the time
 * prs_plan took. */
static prs_frontier *plan_case(const tcase *c, prs_plan_opts *o, double *t_plan)
{
    prs_plan_opts_default(o);
    o->pipe.stages = c->stages;
    o->pipe.microbatches = c->mbs;
    o->pipe.unit_time_s = c->unit_s;
    o->pipe.blocking_power_w = c->p_block_w;
    o->cost_model = c->model;
    o->frontier = PRS_FRONTIER_RAW; /* the planner's own points, each checked against the LP */
    prs_error err = {0, ""};
    prs_frontier *f = NULL;
    *t_plan = now_s();
    int rc = prs_plan(c->prof, o, &f, &err);
    *t_plan = now_s() - *t_plan;
    if (rc) fail_msg("%s: prs_plan failed: %s", c->label, err.msg);
    assert_true(prs_frontier_size(f) >= 1);
    return f;
}

/* The planner's cost model of every (stage, instruction), each checked convex. */
static prs__model_optype *build_types(const tcase *c, const prs_plan_opts *o)
{
    int ntypes = 2 * c->stages;
    prs_error err = {0, ""};
    prs__model_optype *types = calloc((size_t)ntypes, sizeof *types);
    assert_non_null(types);
    for (int k = 0; k < ntypes; k++) {
        int fallback = 0;
        int rc =
            prs__model_build(c->prof, k / 2, (prs_instr)(k % 2), o, &types[k], &fallback, &err);
        if (rc) fail_msg("%s: prs__model_build failed: %s", c->label, err.msg);
        check_convex(&types[k], c);
    }
    return types;
}

/* Sampled points (first, last, NSAMPLE evenly spaced in between) against the LP optimum at their
 * time; *case_worst: the largest gap. Returns 1 when one failed. */
static int check_samples(const tcase *c, stats *st, const prs_frontier *f, tclp *L,
                         double *case_worst)
{
    int S = c->stages, mi = (int)c->model, case_failed = 0;
    const char *mname = prs_cost_model_name(c->model);
    size_t n = prs_frontier_size(f), last_k = (size_t)-1;
    for (int i = 0; i <= NSAMPLE + 1; i++) {
        size_t k = (size_t)i * (n - 1) / (NSAMPLE + 1);
        if (k == last_k) continue;
        last_k = k;
        const prs_frontier_point *pt = prs_frontier_point_at(f, k);
        double pd = pt->energy_j - (double)S * c->p_block_w * pt->time_s;
        double lp = 0;
        int r = tclp_solve(L, pt->time_units, &lp);
        st->lps[mi]++;
        st->points[mi]++;
        if (r != LP_OPT) {
            print_error("FAIL %s S=%d M=%d unit=%g %s: point %zu/%zu (T=%ld) LP infeasible\n",
                        c->label, S, c->mbs, c->unit_s, mname, k, n, pt->time_units);
            case_failed = 1;
            continue;
        }
        double gap = (pd - lp) / fabs(lp);
        if (gap > st->worst_gap[mi]) st->worst_gap[mi] = gap;
        if (fabs(gap) > st->worst_abs_gap[mi]) st->worst_abs_gap[mi] = fabs(gap);
        if (fabs(gap) > fabs(*case_worst)) *case_worst = gap;
        if (!(fabs(gap) <= REL_TOL)) {
            print_error("FAIL %s S=%d M=%d unit=%g %s: point %zu/%zu (T=%ld) PD cost %.12g J, "
                        "LP optimum %.12g J, gap %.3g relative\n",
                        c->label, S, c->mbs, c->unit_s, mname, k, n, pt->time_units, pd, lp, gap);
            case_failed = 1;
        }
    }
    return case_failed;
}

/* The frontier's ends: it ends at the minimum time, and starts one unit below T_max, where the
 * LP costs sum C(q_max) and which is the all-slowest critical path. Returns 1 when one failed. */
static int check_ends(const tcase *c, stats *st, const prs_frontier *f, tclp *L,
                      const prs__graph_graph *g, const prs__model_optype *types)
{
    int S = c->stages, mi = (int)c->model, case_failed = 0;
    const char *mname = prs_cost_model_name(c->model);
    size_t n = prs_frontier_size(f);
    /* the frontier ends at the minimum time */
    const prs_frontier_point *fastest = prs_frontier_point_at(f, n - 1);
    double obj = 0;
    st->lps[mi]++;
    if (tclp_solve(L, fastest->time_units - 1, &obj) != LP_INFEASIBLE) {
        print_error("FAIL %s S=%d M=%d unit=%g %s: LP feasible at T = %ld, one unit below the "
                    "last frontier point (optimum %.12g J): the frontier stops early\n",
                    c->label, S, c->mbs, c->unit_s, mname, fastest->time_units - 1, obj);
        case_failed = 1;
    }
    /* T_max: everything at its slowest */
    const prs_frontier_point *slowest = prs_frontier_point_at(f, 0);
    st->lps[mi]++;
    if (tclp_solve(L, slowest->time_units + 1, &obj) != LP_OPT) {
        print_error("FAIL %s S=%d M=%d unit=%g %s: LP infeasible at T_max = %ld\n", c->label, S,
                    c->mbs, c->unit_s, mname, slowest->time_units + 1);
        case_failed = 1;
    } else if (!(fabs(obj - L->const_cost) <= REL_TOL * fabs(L->const_cost))) {
        print_error("FAIL %s S=%d M=%d unit=%g %s: LP optimum at T_max = %ld is %.12g J, "
                    "sum C(q_max) = %.12g J\n",
                    c->label, S, c->mbs, c->unit_s, mname, slowest->time_units + 1, obj,
                    L->const_cost);
        case_failed = 1;
    }
    /* T_max itself must be the all-slowest critical path */
    long *dur = malloc(sizeof *dur * (size_t)g->nops);
    long *earliest = malloc(sizeof *earliest * (size_t)g->nnodes);
    assert_non_null(dur);
    assert_non_null(earliest);
    for (int op = 0; op < g->nops; op++)
        dur[op] = types[g->op_type[op]].q_max;
    long tmax = prs__graph_cpm(g, dur, earliest, NULL);
    if (tmax != slowest->time_units + 1) {
        print_error("FAIL %s S=%d M=%d unit=%g %s: first point T=%ld, all-slowest T_max=%ld\n",
                    c->label, S, c->mbs, c->unit_s, mname, slowest->time_units, tmax);
        case_failed = 1;
    }
    free(dur);
    free(earliest);
    return case_failed;
}

static void run_case(const tcase *c, stats *st)
{
    prs_plan_opts o;
    double t_plan;
    prs_frontier *f = plan_case(c, &o, &t_plan);
    size_t n = prs_frontier_size(f);
    int S = c->stages, ntypes = 2 * S;
    prs__model_optype *types = build_types(c, &o);
    prs_error err = {0, ""};
    prs__graph_graph g;
    int rc = prs__graph_build(&o.pipe, &g, &err);
    if (rc) fail_msg("%s: prs__graph_build failed: %s", c->label, err.msg);
    tclp L;
    tclp_build(&L, &g, types, ntypes);
    int mi = (int)c->model;
    const char *mname = prs_cost_model_name(c->model);

    double t_lp = now_s();
    double case_worst = 0;
    int case_failed = check_samples(c, st, f, &L, &case_worst);
    case_failed |= check_ends(c, st, f, &L, &g, types);
    st->cases[mi]++;
    t_lp = now_s() - t_lp;
    print_message("  %-5s S=%d M=%d unit=%-6g %-4s points=%-6zu cols=%-6d worst gap %+.2e  "
                  "plan %.2f s, LPs %.2f s%s\n",
                  c->label, S, c->mbs, c->unit_s, mname, n, glp_get_num_cols(L.lp), case_worst,
                  t_plan, t_lp, case_failed ? "  FAILED" : "");
    if (case_failed) fail_count++;

    tclp_free(&L);
    prs__graph_free(&g);
    for (int k = 0; k < ntypes; k++)
        prs__model_free(&types[k]);
    free(types);
    prs_frontier_free(f);
}

static void report(const char *what, const stats *st, double t0)
{
    for (int m = 0; m < 2; m++)
        if (st->cases[m])
            print_message("%s %s: %d cases, %ld frontier points checked, %ld LPs, worst gap "
                          "(PD - LP) / LP %+.3e, worst |gap| %.3e\n",
                          what, prs_cost_model_name((prs_cost_model)m), st->cases[m], st->points[m],
                          st->lps[m], st->worst_gap[m], st->worst_abs_gap[m]);
    print_message("%s: %.1f s\n", what, now_s() - t0);
}

/* ---- Synthetic profiles ---- */

typedef struct synth_gpu {
    const char *preset;
    int f_min_mhz;     /* 0: the preset's default profiling range */
    int expect_clocks; /* rows per (stage, instruction) */
} synth_gpu;

static const synth_gpu synth_gpus[] = {
    {"a100", 0, 38},  /* 1410 ... 855 MHz */
    {"a40", 855, 60}, /* 1740 ... 855 MHz: wider than the preset's default range */
    {"h100", 0, 53},  /* 1980 ... 1200 MHz */
};

/* At tau = 0.1 ms the frontiers are ~10x longer and the exp LPs ~10x wider: three shapes per GPU
 * there (one per stage count, microbatches rotating), every shape at 1 ms. */
static const int fine_mbs[3][3] = {{6, 4, 3}, {5, 3, 2}, {2, 6, 4}};

static void synth_run(const synth_gpu *sg, int S, int M, double unit_s, double noise, uint64_t seed,
                      stats *st)
{
    const prs_gpu_preset *gpu = prs_gpu_preset_find(sg->preset);
    assert_non_null(gpu);
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.gpu = gpu;
    so.stages = S;
    so.f_min_mhz = sg->f_min_mhz;
    so.noise = noise;
    so.seed = seed;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    int rc = prs_synth_profile(&so, &p, &err);
    if (rc) fail_msg("synth %s: %s", sg->preset, err.msg);
    size_t nrows = prs_profile_nrows(p);
    const prs_profile_row *rows = prs_profile_rows(p);
    for (int k = 0; k < 2 * S; k++) {
        int count = 0;
        for (size_t r = 0; r < nrows; r++)
            count += rows[r].stage == k / 2 && (int)rows[r].instr == k % 2;
        assert_int_equal(count, sg->expect_clocks);
    }
    for (int m = 0; m < 2; m++) {
        tcase c = {sg->preset, p, S, M, unit_s, gpu->blocking_power_w, (prs_cost_model)m};
        run_case(&c, st);
    }
    prs_profile_free(p);
}

static void test_synthetic(void **state)
{
    (void)state;
    stats st;
    memset(&st, 0, sizeof st);
    double t0 = now_s();
    fail_count = 0;
    uint64_t seed = 1000;
    for (int g = 0; g < 3; g++) {
        const synth_gpu *sg = &synth_gpus[g];
        /* measurement noise on every other shape: irregular candidate sets and hulls */
        for (int S = 2; S <= 4; S++)
            for (int M = 2; M <= 6; M++)
                synth_run(sg, S, M, 0.001, (S + M) % 2 ? 0.02 : 0, seed++, &st);
        for (int S = 2; S <= 4; S++)
            synth_run(sg, S, fine_mbs[g][S - 2], 0.0001, S == 3 ? 0.02 : 0, seed++, &st);
    }
    report("synthetic", &st, t0);
    assert_int_equal(fail_count, 0);
}

/* ---- The artifact's real profiles (A100, GPT-3 175B and Bloom), if present ---- */

static prs_profile *load_real(const char *model)
{
    const char *dir = getenv("PRS_SHARED_DIR");
    if (!dir || !*dir) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir, model);
    FILE *fp = fopen(path, "r");
    if (!fp) return NULL;
    fclose(fp);
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_profile_load(path, &p, &err)) fail_msg("%s: %s", path, err.msg);
    return p;
}

static void test_real(void **state)
{
    (void)state;
    static const char *const models[] = {"gpt3-175b", "bloom"};
    static const char *const labels[] = {"gpt3", "bloom"};
    static const double units[] = {0.001, 0.0001};
    prs_profile *profs[2] = {load_real(models[0]), load_real(models[1])};
    if (!profs[0] || !profs[1]) {
        prs_profile_free(profs[0]);
        prs_profile_free(profs[1]);
        prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
    }
    stats st;
    memset(&st, 0, sizeof st);
    double t0 = now_s();
    fail_count = 0;
    for (int i = 0; i < 2; i++)
        for (int u = 0; u < 2; u++)
            for (int m = 0; m < 2; m++) {
                tcase c = {labels[i], profs[i], 8, 4, units[u], 83.64, (prs_cost_model)m};
                run_case(&c, &st);
            }
    prs_profile_free(profs[0]);
    prs_profile_free(profs[1]);
    report("real A100 profiles", &st, t0);
    assert_int_equal(fail_count, 0);
}

static int teardown_glpk(void **state)
{
    (void)state;
    glp_free_env();
    return 0;
}

int main(void)
{
    glp_term_out(GLP_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_real),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, teardown_glpk));
}
