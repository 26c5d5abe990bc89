/* How far is the planner from the true optimum? On small random pipelines (up to 3 stages and 3
 * microbatches, 2-5 profiled clocks per computation type) we enumerate every clock assignment
 * (one clock per computation) and compute, for every iteration time T in units of tau, the least
 * evaluated energy (the exact evaluation's accounting: measured energies plus blocking power
 * whenever a stage is not computing). Then every frontier point's evaluated energy is compared with
 * the least energy of any assignment that is at least as fast.
 *
 * The enumerator is independent of the planner: it builds the 1F1B DAG itself from docs/planner.md
 * (and cross-checks it against prs_evaluate_plan on random assignments), and walks the
 * computations in topological order so each assignment costs O(1) on average. Options dominated
 * in (quantized time, effective cost e - P_block q tau) are dropped first; that is exact for the
 * "at least as fast" optimum because energy = sum(effective cost) + stages P_block T tau and T
 * never grows when an operation gets faster.
 *
 * Profiles come from a seeded splitmix64 stream, so every run sees the same cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "perseus/profile.h"
#include "plan_int.h"
#include "rng.h"

#define MAX_S 3
#define MAX_M 3
#define MAX_OPS (2 * MAX_S * MAX_M)
#define MAX_CLK 5
#define MAX_ASSIGNMENTS 1000000.0
#define NCASES 150
#define TAU_S 0.001

/* Bounds asserted on the hull planner, set from measurement (the test prints what it measures):
 * the gap of a plan is its evaluated energy over the least energy of any assignment at least as
 * fast, minus 1. Measured on these 150 cases with slack reclaiming (refine.c): fastest plan
 * optimal in 149 cases, worst 0.12 %; worst at any point 4.49 %. (Without slack reclaiming the
 * fastest plan was optimal in 142 cases, worst 3.4 %.) */
#define HULL_FASTEST_GAP_MAX 0.005
#define HULL_ANY_GAP_MAX 0.05
#define HULL_MIN_EXACT_SHARE 0.95

/* ---- splitmix64 ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    return prs_test_rng_next(&r->s);
}

static double rng_uniform(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * prs_test_rng_unif(&r->s);
}

/* Uniform integer in [lo, hi]. */
static int rng_int(rng *r, int lo, int hi)
{
    return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ---- The 1F1B DAG, built from docs/planner.md (not from the planner's graph code) ---- */

typedef struct dag {
    int stages, mbs, nops;
    int type[MAX_OPS]; /* stage * 2 + instr */
    int npred[MAX_OPS];
    int pred[MAX_OPS][2];
    int topo[MAX_OPS];
} dag;

/* Ops are numbered like plans: stage * 2M + position in the stage's execution order. */
static void dag_build(dag *g, int S, int M)
{
    memset(g, 0, sizeof *g);
    g->stages = S;
    g->mbs = M;
    g->nops = 2 * S * M;
    int where[MAX_S][2][MAX_M]; /* op of (stage, instr, microbatch) */
    for (int s = 0; s < S; s++) {
        int w = S - s < M ? S - s : M, pos = 0, nf = 0, nb = 0;
        int base = s * 2 * M;
        while (nf < w)
            where[s][PRS_FORWARD][nf++] = base + pos++;
        while (nf < M) {
            where[s][PRS_BACKWARD][nb++] = base + pos++;
            where[s][PRS_FORWARD][nf++] = base + pos++;
        }
        while (nb < M)
            where[s][PRS_BACKWARD][nb++] = base + pos++;
        assert_int_equal(pos, 2 * M);
        for (int i = 0; i < 2; i++)
            for (int m = 0; m < M; m++)
                g->type[where[s][i][m]] = s * 2 + i;
        for (int p = 1; p < 2 * M; p++)
            g->pred[base + p][g->npred[base + p]++] = base + p - 1;
    }
    for (int s = 0; s + 1 < S; s++)
        for (int m = 0; m < M; m++) {
            int f1 = where[s + 1][PRS_FORWARD][m], b0 = where[s][PRS_BACKWARD][m];
            g->pred[f1][g->npred[f1]++] = where[s][PRS_FORWARD][m];
            g->pred[b0][g->npred[b0]++] = where[s + 1][PRS_BACKWARD][m];
        }
    /* Kahn's algorithm; every op must be placed (the DAG is acyclic). */
    int placed[MAX_OPS] = {0}, n = 0;
    while (n < g->nops) {
        int progress = 0;
        for (int v = 0; v < g->nops; v++) {
            if (placed[v]) continue;
            int ready = 1;
            for (int k = 0; k < g->npred[v]; k++)
                ready &= placed[g->pred[v][k]];
            if (!ready) continue;
            placed[v] = 1;
            g->topo[n++] = v;
            progress = 1;
        }
        assert_true(progress);
    }
}

static long dag_longest(const dag *g, const long *q)
{
    long fin[MAX_OPS], T = 0;
    for (int i = 0; i < g->nops; i++) {
        int v = g->topo[i];
        long start = 0;
        for (int k = 0; k < g->npred[v]; k++)
            if (fin[g->pred[v][k]] > start) start = fin[g->pred[v][k]];
        fin[v] = start + q[v];
        if (fin[v] > T) T = fin[v];
    }
    return T;
}

/* ---- Random cases ---- */

typedef struct option {
    int freq_mhz;
    long q;
    double energy_j;
    double cost_j; /* effective: energy - P_block q tau */
} option;

typedef struct tcase {
    int id;
    int stages, mbs;
    double power_w;
    prs_profile *prof;
    dag g;
    int nall[2 * MAX_S];
    option all[2 * MAX_S][MAX_CLK]; /* every profiled clock */
    int nopt[2 * MAX_S];
    option opt[2 * MAX_S][MAX_CLK]; /* undominated in (q, effective cost) */
} tcase;

/* Shape of one computation type: t(f) = t_ref (alpha f_max / f + 1 - alpha), busy power
 * P_s + (P_max - P_s)(f / f_max)^3, a few per cent of noise on both. With a high static power the
 * energy is U-shaped in f, so slow clocks can be dominated outright; with a low one the energy
 * falls with the clock and every clock is a useful option. */
typedef struct type_shape {
    double t_ref_s, alpha, p_static_w, p_max_w;
    int nclk;
    int spread; /* 1: clocks drawn from nclk separate bands of the range, so times differ */
} type_shape;

static void gen_type(rng *r, tcase *c, int stage, prs_instr instr, const type_shape *sh)
{
    const double f_max = 1410;
    const int nsteps = 38; /* 1410 ... 855 MHz in 15 MHz steps */
    int used[38] = {0};
    int k = stage * 2 + (int)instr;
    c->nall[k] = sh->nclk;
    for (int i = 0; i < sh->nclk; i++) {
        int j;
        if (sh->spread) {
            int band = nsteps / sh->nclk;
            j = i * band + rng_int(r, 0, band - 1);
        } else {
            do
                j = rng_int(r, 0, nsteps - 1);
            while (used[j]);
        }
        used[j] = 1;
        double f = f_max - 15.0 * j, x = f / f_max;
        double t =
            sh->t_ref_s * (sh->alpha / x + 1 - sh->alpha) * (1 + rng_uniform(r, -0.02, 0.02));
        double p = (sh->p_static_w + (sh->p_max_w - sh->p_static_w) * x * x * x) *
                   (1 + rng_uniform(r, -0.04, 0.04));
        prs_profile_row row = {stage, instr, (int)f, t, p * t, 0};
        prs_error err = {0};
        if (prs_profile_add(c->prof, &row, &err) != PRS_OK) fail_msg("profile_add: %s", err.msg);
        option *o = &c->all[k][i];
        o->freq_mhz = (int)f;
        o->q = prs__model_quantize(t, TAU_S);
        o->energy_j = p * t;
        o->cost_j = o->energy_j - c->power_w * (double)o->q * TAU_S;
    }
}

static int dominates(const option *a, const option *b)
{
    return a->q <= b->q && a->cost_j <= b->cost_j && (a->q < b->q || a->cost_j < b->cost_j);
}

static void prune(tcase *c, int k)
{
    c->nopt[k] = 0;
    for (int i = 0; i < c->nall[k]; i++) {
        int dom = 0;
        for (int j = 0; j < c->nall[k] && !dom; j++) {
            const option *a = &c->all[k][j], *b = &c->all[k][i];
            /* exact duplicates in (q, cost): keep the first */
            dom = dominates(a, b) || (j < i && a->q == b->q && a->cost_j == b->cost_j);
        }
        if (!dom) c->opt[k][c->nopt[k]++] = c->all[k][i];
    }
}

static double assignments(const tcase *c)
{
    double n = 1;
    for (int op = 0; op < c->g.nops; op++)
        n *= c->nopt[c->g.type[op]];
    return n;
}

/* Draw a case; redraw the clocks (and after a while the shape) until the enumeration stays
 * under MAX_ASSIGNMENTS. Two kinds:
 *   general - 2-5 clocks anywhere in 855-1410 MHz, U-shaped energy, mostly 2-3 stages and
 *             microbatches (some 1s);
 *   fit     - 4-5 well-spread clocks with energy falling with the clock, so the reference's
 *             filter keeps >= 4 candidates and the exp model really runs (no fallback); only
 *             small pipelines fit the enumeration budget then. */
static void gen_case(rng *r, int id, tcase *c)
{
    int fit = id % 3 == 2;
    for (int attempt = 0;; attempt++) {
        int S, M;
        if (fit) {
            static const int sm[][2] = {{2, 2}, {2, 2}, {2, 2}, {3, 1}, {1, 3}, {2, 1}};
            int i = rng_int(r, 0, 5);
            S = sm[i][0], M = sm[i][1];
        } else {
            S = rng_int(r, 0, 7) == 0 ? 1 : rng_int(r, 2, MAX_S);
            M = rng_int(r, 0, 7) == 0 ? 1 : rng_int(r, 2, MAX_M);
        }
        double power = rng_uniform(r, 40, 100);
        type_shape shape[2 * MAX_S];
        for (int s = 0; s < S; s++) {
            double tf = fit ? rng_uniform(r, 0.012, 0.020) : rng_uniform(r, 0.005, 0.014);
            double tb = tf * rng_uniform(r, 1.6, 2.4);
            for (int i = 0; i < 2; i++) {
                type_shape *sh = &shape[s * 2 + i];
                sh->t_ref_s = i == 0 ? tf : tb;
                sh->alpha = fit ? rng_uniform(r, 0.7, 0.95) : rng_uniform(r, 0.3, 0.95);
                sh->p_static_w = fit ? rng_uniform(r, 20, 50) : rng_uniform(r, 60, 220);
                sh->p_max_w = rng_uniform(r, 280, 420);
                sh->spread = fit;
            }
        }
        /* a few clock draws per shape before giving up on it */
        for (int draw = 0; draw < 8; draw++) {
            memset(c, 0, sizeof *c);
            c->id = id;
            c->stages = S;
            c->mbs = M;
            c->power_w = power;
            c->prof = prs_profile_new();
            assert_non_null(c->prof);
            for (int k = 0; k < 2 * S; k++) {
                shape[k].nclk = fit ? rng_int(r, 4, MAX_CLK) : rng_int(r, 2, MAX_CLK);
                gen_type(r, c, k / 2, (prs_instr)(k % 2), &shape[k]);
                prune(c, k);
            }
            dag_build(&c->g, S, M);
            if (assignments(c) <= MAX_ASSIGNMENTS) return;
            prs_profile_free(c->prof);
        }
        assert_true(attempt < 1000);
    }
}

static prs_pipeline case_pipe(const tcase *c)
{
    prs_pipeline p = {c->stages, c->mbs, PRS_SCHEDULE_1F1B, TAU_S, c->power_w, 1, 0};
    return p;
}

/* ---- Exhaustive enumeration ---- */

typedef struct enumerator {
    const tcase *c;
    long fin[MAX_OPS];
    double *best_cost; /* per T: least sum of effective costs */
} enumerator;

static void enum_rec(enumerator *en, int i, long T, double cost)
{
    const dag *g = &en->c->g;
    if (i == g->nops) {
        if (cost < en->best_cost[T]) en->best_cost[T] = cost;
        return;
    }
    int v = g->topo[i], k = g->type[v];
    long start = 0;
    for (int j = 0; j < g->npred[v]; j++)
        if (en->fin[g->pred[v][j]] > start) start = en->fin[g->pred[v][j]];
    for (int o = 0; o < en->c->nopt[k]; o++) {
        const option *op = &en->c->opt[k][o];
        long f = start + op->q;
        en->fin[v] = f;
        enum_rec(en, i + 1, f > T ? f : T, cost + op->cost_j);
    }
}

/* Fills opt_energy[T] (T in 0..tmax) with the least evaluated energy of any assignment whose
 * iteration time is <= T units (INFINITY if none); returns the least achievable T. */
static long exhaustive(const tcase *c, double *opt_energy, long tmax)
{
    enumerator en;
    memset(&en, 0, sizeof en);
    en.c = c;
    en.best_cost = malloc(sizeof *en.best_cost * (size_t)(tmax + 1));
    assert_non_null(en.best_cost);
    for (long T = 0; T <= tmax; T++)
        en.best_cost[T] = INFINITY;
    enum_rec(&en, 0, 0, 0.0);
    long t_min = -1;
    double run = INFINITY;
    for (long T = 0; T <= tmax; T++) {
        if (isfinite(en.best_cost[T])) {
            double e = en.best_cost[T] + (double)c->stages * c->power_w * (double)T * TAU_S;
            if (e < run) run = e;
            if (t_min < 0) t_min = T;
        }
        opt_energy[T] = run;
    }
    free(en.best_cost);
    return t_min;
}

/* Our own evaluation of an assignment (indices into c->all) and prs_evaluate_plan's must agree. */
static void check_dag_against_library(rng *r, const tcase *c)
{
    prs_pipeline pipe = case_pipe(c);
    for (int trial = 0; trial < 20; trial++) {
        long q[MAX_OPS];
        int clocks[MAX_OPS];
        double sum_e = 0;
        long sum_q = 0;
        for (int op = 0; op < c->g.nops; op++) {
            int k = c->g.type[op];
            const option *o = &c->all[k][rng_int(r, 0, c->nall[k] - 1)];
            q[op] = o->q;
            clocks[op] = o->freq_mhz;
            sum_e += o->energy_j;
            sum_q += o->q;
        }
        long T = dag_longest(&c->g, q);
        double mine = sum_e + c->power_w * (double)(c->stages * T - sum_q) * TAU_S;
        double t_s, e_j;
        prs_error err = {0};
        if (prs_evaluate_plan(c->prof, &pipe, clocks, &t_s, &e_j, &err) != PRS_OK)
            fail_msg("case %d: evaluate: %s", c->id, err.msg);
        if (lround(t_s / TAU_S) != T || fabs(e_j - mine) > 1e-9 * mine)
            fail_msg(
                "case %d (S=%d M=%d): DAG mismatch: mine T=%ld E=%.12g, library %.6f s %.12g J",
                c->id, c->stages, c->mbs, T, mine, t_s, e_j);
    }
}

/* ---- Planner vs optimum ---- */

/* Gap of a plan: its evaluated energy over the least energy of any assignment at least as fast,
 * minus 1. */
typedef struct gap_stats {
    int cases, points, empty;
    int exact_fastest; /* cases whose fastest plan is optimal (gap <= 1e-9) */
    int slow_fastest;  /* cases whose fastest plan is slower than the least possible time */
    double worst_any, worst_fastest, worst_env;
    int worst_any_case, worst_fastest_case, worst_env_case;
    long worst_any_k;
} gap_stats;

static void merge(gap_stats *dst, const gap_stats *src)
{
    dst->cases += src->cases;
    dst->points += src->points;
    dst->empty += src->empty;
    dst->exact_fastest += src->exact_fastest;
    dst->slow_fastest += src->slow_fastest;
    if (src->worst_any > dst->worst_any) {
        dst->worst_any = src->worst_any;
        dst->worst_any_case = src->worst_any_case;
        dst->worst_any_k = src->worst_any_k;
    }
    if (src->worst_fastest > dst->worst_fastest) {
        dst->worst_fastest = src->worst_fastest;
        dst->worst_fastest_case = src->worst_fastest_case;
    }
    if (src->worst_env > dst->worst_env) {
        dst->worst_env = src->worst_env;
        dst->worst_env_case = src->worst_env_case;
    }
}

/* Counts exp -> hull fallbacks (other warnings, e.g. an infeasible flow, are not fallbacks). */
static void count_warning(void *ud, const char *msg)
{
    if (strstr(msg, "hull")) ++*(int *)ud;
}

/* Runs the planner on case c and measures its gaps into *st (one case). Checks (a) for every
 * point. Returns the number of exp -> hull fallbacks. */
static int compare(const tcase *c, prs_cost_model model, const double *opt_energy, long tmax,
                   long t_min, gap_stats *st)
{
    memset(st, 0, sizeof *st);
    st->cases = 1;
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = case_pipe(c);
    o.cost_model = model;
    int fallbacks = 0;
    o.warn = count_warning;
    o.ud = &fallbacks;
    prs_frontier *f = NULL;
    prs_error err = {0};
    if (prs_plan(c->prof, &o, &f, &err) != PRS_OK)
        fail_msg("case %d %s: plan failed: %s", c->id, prs_cost_model_name(model), err.msg);
    size_t n = prs_frontier_size(f);
    double fastest_s = INFINITY;
    for (size_t k = 0; k < n; k++) {
        const prs_frontier_point *p = prs_frontier_point_at(f, k);
        long T = lround(p->eval_time_s / TAU_S);
        assert_true(T >= t_min && T <= tmax);
        double best = opt_energy[T], gap = p->eval_energy_j / best - 1;
        /* (a) no plan beats the exhaustive optimum */
        if (gap < -1e-9)
            fail_msg("case %d %s point %zu: %.12g J at %ld units beats the optimum %.12g J", c->id,
                     prs_cost_model_name(model), k, p->eval_energy_j, T, best);
        st->points++;
        if (gap > st->worst_any) {
            st->worst_any = gap;
            st->worst_any_case = c->id;
            st->worst_any_k = (long)k;
        }
        /* what a consumer picks: the least energy among plans at least as fast as this one */
        double env = INFINITY;
        for (size_t j = 0; j < n; j++) {
            const prs_frontier_point *x = prs_frontier_point_at(f, j);
            if (x->eval_time_s <= p->eval_time_s && x->eval_energy_j < env) env = x->eval_energy_j;
        }
        if (env / best - 1 > st->worst_env) {
            st->worst_env = env / best - 1;
            st->worst_env_case = c->id;
        }
        if (p->eval_time_s < fastest_s) fastest_s = p->eval_time_s;
    }
    if (n == 0) {
        st->empty = 1;
    } else {
        const prs_frontier_point *last = prs_frontier_point_at(f, n - 1);
        assert_true(last->eval_time_s == fastest_s); /* the last plan is the fastest */
        long T = lround(last->eval_time_s / TAU_S);
        st->worst_fastest = last->eval_energy_j / opt_energy[T] - 1;
        st->worst_fastest_case = c->id;
        st->exact_fastest = st->worst_fastest <= 1e-9;
        st->slow_fastest = T != t_min;
    }
    prs_frontier_free(f);
    return fallbacks;
}

static void report(const char *what, const gap_stats *st)
{
    print_message("%s: %d cases (%d empty frontiers), %d points; fastest plan optimal in %d "
                  "cases, slower than possible in %d; worst gap at the fastest point %.4f %% "
                  "(case %d), at any point %.4f %% (case %d point %ld), of the best plan at "
                  "least as fast as a point %.4f %% (case %d)\n",
                  what, st->cases, st->empty, st->points, st->exact_fastest, st->slow_fastest,
                  100 * st->worst_fastest, st->worst_fastest_case, 100 * st->worst_any,
                  st->worst_any_case, st->worst_any_k, 100 * st->worst_env, st->worst_env_case);
}

static void test_against_exhaustive(void **state)
{
    (void)state;
    rng r = {0x5eed0f0b71a1ULL};
    gap_stats hull = {0}, exp_fitted = {0}, exp_all = {0};
    double total_assignments = 0;
    for (int id = 0; id < NCASES; id++) {
        tcase c;
        gen_case(&r, id, &c);
        check_dag_against_library(&r, &c);
        long tmax = 0; /* bound on any iteration time: the sum of the slowest times */
        long qfast[MAX_OPS];
        for (int op = 0; op < c.g.nops; op++) {
            int k = c.g.type[op];
            long slowest = c.all[k][0].q;
            qfast[op] = c.all[k][0].q;
            for (int i = 1; i < c.nall[k]; i++) {
                if (c.all[k][i].q > slowest) slowest = c.all[k][i].q;
                if (c.all[k][i].q < qfast[op]) qfast[op] = c.all[k][i].q;
            }
            tmax += slowest;
        }
        double *opt_energy = malloc(sizeof *opt_energy * (size_t)(tmax + 1));
        assert_non_null(opt_energy);
        long t_min = exhaustive(&c, opt_energy, tmax);
        total_assignments += assignments(&c);
        /* the least time is everything at its fastest clock */
        assert_int_equal(t_min, dag_longest(&c.g, qfast));

        gap_stats one;
        compare(&c, PRS_COST_HULL, opt_energy, tmax, t_min, &one);
        /* (c) the fastest plan is as fast as anything can be */
        if (one.slow_fastest) fail_msg("case %d hull: the fastest plan is not the fastest", id);
        merge(&hull, &one);
        int fallbacks = compare(&c, PRS_COST_EXP, opt_energy, tmax, t_min, &one);
        merge(&exp_all, &one);
        if (fallbacks == 0) merge(&exp_fitted, &one);
        free(opt_energy);
        prs_profile_free(c.prof);
    }
    print_message("%d cases, %.3g assignments enumerated in all\n", NCASES, total_assignments);
    report("hull", &hull);
    report("exp, every type fitted", &exp_fitted);
    report("exp, all cases (some types fell back to hull)", &exp_all);
    /* (b) measured: see HULL_*_GAP_MAX */
    assert_true(hull.worst_fastest <= HULL_FASTEST_GAP_MAX);
    assert_true(hull.worst_any <= HULL_ANY_GAP_MAX);
    assert_true(hull.exact_fastest >= HULL_MIN_EXACT_SHARE * NCASES);
    assert_true(hull.empty < NCASES / 10);
    assert_true(exp_fitted.cases >= NCASES / 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
