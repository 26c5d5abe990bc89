/* Properties every frontier must have, for both cost models, on the shipped SOSP'24 profiles
 * (skipped when the shared data folder is absent) and on synthetic profiles of every GPU preset:
 *   (a) each iteration shortens the planned iteration by exactly one unit;
 *   (b) the reported cost change is the difference of the predicted energies, less the blocking
 *       energy of the unit saved (docs/planner.md);
 *   (c) a plan never runs slower than planned (evaluated time <= planned time);
 *   (d) the frontier runs from T_max - 1 (all at the slowest candidate) down to T_min (all at
 *       the fastest profiled clock), T_max and T_min taken from our own 1F1B DAG (docs/planner.md);
 *   (e) every plan names profiled clocks only and re-evaluates to exactly its evaluated figures;
 *   (f) on GPT-3 / A100, M = 12, the hull model beats the reference at the least time, and exp
 *       reproduces the reference's 6204.1 J there (docs/planner.md).
 * Failures are collected per run and described (profile, stages, microbatches, unit, model,
 * point) before the test fails, so one run reports everything that is wrong. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "skips.h"

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "plan_int.h"

/* At most this many plans per frontier are re-evaluated for (e) (evenly spread, plus the first
 * and the last): rebuilding plans is linear in the frontier so far, evaluating rebuilds graphs. */
#define MAX_EVAL_CHECKS 400
/* Failures described in detail per run and property; the rest are only counted. */
#define MAX_REPORTS 3

/* ---- The 1F1B DAG, built from docs/planner.md (not from the planner's graph code) ---- */

typedef struct dag {
    int nops;
    int *type;      /* per op (stage * 2M + position): stage * 2 + instr */
    int *npred;     /* 0..2 */
    int (*pred)[2]; /* previous op of the stage; F(s-1,m) for F(s,m); B(s+1,m) for B(s,m) */
    int *topo;
} dag;

static void dag_build(dag *g, int S, int M)
{
    g->nops = 2 * S * M;
    size_t n = (size_t)g->nops;
    g->type = calloc(n, sizeof *g->type);
    g->npred = calloc(n, sizeof *g->npred);
    g->pred = calloc(n, sizeof *g->pred);
    g->topo = calloc(n, sizeof *g->topo);
    int *where = calloc(n, sizeof *where); /* op of (stage, instr, mb): (s * 2 + i) * M + m */
    unsigned char *placed = calloc(n, 1);
    assert_true(g->type && g->npred && g->pred && g->topo && where && placed);
    for (int s = 0; s < S; s++) {
        int w = S - s < M ? S - s : M, pos = 0, nf = 0, nb = 0, base = s * 2 * M;
        int *fw = &where[(s * 2 + PRS_FORWARD) * M], *bw = &where[(s * 2 + PRS_BACKWARD) * M];
        while (nf < w)
            fw[nf++] = base + pos++;
        while (nf < M) {
            bw[nb++] = base + pos++;
            fw[nf++] = base + pos++;
        }
        while (nb < M)
            bw[nb++] = base + pos++;
        assert_int_equal(pos, 2 * M);
        for (int m = 0; m < M; m++) {
            g->type[fw[m]] = s * 2 + PRS_FORWARD;
            g->type[bw[m]] = s * 2 + PRS_BACKWARD;
        }
        for (int p = 1; p < 2 * M; p++)
            g->pred[base + p][g->npred[base + p]++] = base + p - 1;
    }
    for (int s = 0; s + 1 < S; s++)
        for (int m = 0; m < M; m++) {
            int f1 = where[((s + 1) * 2 + PRS_FORWARD) * M + m];
            int b0 = where[(s * 2 + PRS_BACKWARD) * M + m];
            g->pred[f1][g->npred[f1]++] = where[(s * 2 + PRS_FORWARD) * M + m];
            g->pred[b0][g->npred[b0]++] = where[((s + 1) * 2 + PRS_BACKWARD) * M + m];
        }
    int done = 0;
    while (done < g->nops) {
        int progress = 0;
        for (int v = 0; v < g->nops; v++) {
            if (placed[v]) continue;
            int ready = 1;
            for (int k = 0; k < g->npred[v]; k++)
                ready &= placed[g->pred[v][k]];
            if (!ready) continue;
            placed[v] = 1;
            g->topo[done++] = v;
            progress = 1;
        }
        assert_true(progress); /* acyclic */
    }
    free(where);
    free(placed);
}

static void dag_free(dag *g)
{
    free(g->type);
    free(g->npred);
    free(g->pred);
    free(g->topo);
}

static long dag_longest(const dag *g, const long *q)
{
    long *fin = malloc(sizeof *fin * (size_t)g->nops), T = 0;
    assert_non_null(fin);
    for (int i = 0; i < g->nops; i++) {
        int v = g->topo[i];
        long start = 0;
        for (int k = 0; k < g->npred[v]; k++)
            if (fin[g->pred[v][k]] > start) start = fin[g->pred[v][k]];
        fin[v] = start + q[v];
        if (fin[v] > T) T = fin[v];
    }
    free(fin);
    return T;
}

/* ---- One planner run and its checks ---- */

typedef struct run_desc {
    const char *profile; /* for messages */
    const prs_profile *prof;
    int stages, mbs;
    double unit_s, power_w;
    prs_cost_model model;
} run_desc;

/* Totals over every run, reported at the end. */
typedef struct totals {
    int runs, points, evals;
    int failures[5];      /* per property a..e */
    double worst_b;       /* largest |error| of (b), relative to the energies */
    double least_slack_s; /* smallest time_s - eval_time_s seen (>= 0 if (c) holds) */
} totals;

static void fail_prop(totals *t, const run_desc *r, char prop, long k, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void fail_prop(totals *t, const run_desc *r, char prop, long k, const char *fmt, ...)
{
    if (t->failures[prop - 'a']++ >= MAX_REPORTS) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_message("FAIL (%c) %s S=%d M=%d tau=%g s P=%g W %s point %ld: %s\n", prop, r->profile,
                  r->stages, r->mbs, r->unit_s, r->power_w, prs_cost_model_name(r->model), k, msg);
}

/* The profiled clocks of each (stage, instruction) type of stages 0..S-1, CSR-style. */
typedef struct clock_sets {
    int *start; /* 2S + 1 */
    int *freq;
} clock_sets;

static void clock_sets_build(clock_sets *c, const prs_profile *p, int S)
{
    const prs_profile_row *rows = prs_profile_rows(p);
    size_t n = prs_profile_nrows(p);
    c->start = calloc((size_t)(2 * S + 1), sizeof *c->start);
    c->freq = calloc(n + 1, sizeof *c->freq);
    assert_true(c->start && c->freq);
    for (size_t i = 0; i < n; i++)
        if (rows[i].stage < S) c->start[rows[i].stage * 2 + (int)rows[i].instr + 1]++;
    for (int k = 0; k < 2 * S; k++)
        c->start[k + 1] += c->start[k];
    int *fill = malloc(sizeof *fill * (size_t)(2 * S));
    assert_non_null(fill);
    memcpy(fill, c->start, sizeof *fill * (size_t)(2 * S));
    for (size_t i = 0; i < n; i++)
        if (rows[i].stage < S)
            c->freq[fill[rows[i].stage * 2 + (int)rows[i].instr]++] = rows[i].freq_mhz;
    free(fill);
}

static int clock_sets_has(const clock_sets *c, int type, int freq)
{
    for (int i = c->start[type]; i < c->start[type + 1]; i++)
        if (c->freq[i] == freq) return 1;
    return 0;
}

static void clock_sets_free(clock_sets *c)
{
    free(c->start);
    free(c->freq);
}

/* The run's raw frontier (the properties are of the iterations themselves); o gets the options. */
static prs_frontier *plan_run(const run_desc *r, totals *tot, prs_plan_opts *o)
{
    prs_plan_opts_default(o);
    o->pipe.stages = r->stages;
    o->pipe.microbatches = r->mbs;
    o->pipe.unit_time_s = r->unit_s;
    o->pipe.blocking_power_w = r->power_w;
    o->cost_model = r->model;
    o->frontier = PRS_FRONTIER_RAW; /* properties of the iterations themselves */
    prs_frontier *f = NULL;
    prs_error err = {0};
    if (prs_plan(r->prof, o, &f, &err) != PRS_OK)
        fail_msg("%s S=%d M=%d tau=%g %s: plan failed: %s", r->profile, r->stages, r->mbs,
                 r->unit_s, prs_cost_model_name(r->model), err.msg);
    tot->runs++;
    return f;
}

/* Where the walk starts and ends: T_max and the predicted energy there, T_min. */
typedef struct walk_bounds {
    long t_max, t_min;
    double energy0;
} walk_bounds;

/* The planner's per-type models (for T_max and the starting predicted energy) and the fastest
 * profiled time of every type (for T_min), over the run's DAG g. */
static walk_bounds run_bounds(const run_desc *r, const prs_plan_opts *o, const dag *g)
{
    int S = r->stages, ntypes = 2 * S;
    prs_error err = {0};
    prs__model_optype *types = calloc((size_t)ntypes, sizeof *types);
    long *fastest = malloc(sizeof *fastest * (size_t)ntypes);
    assert_true(types && fastest);
    for (int k = 0; k < ntypes; k++) {
        int fallback = 0;
        if (prs__model_build(r->prof, k / 2, (prs_instr)(k % 2), o, &types[k], &fallback, &err))
            fail_msg("prs__model_build: %s", err.msg);
        fastest[k] = -1;
    }
    const prs_profile_row *rows = prs_profile_rows(r->prof);
    for (size_t i = 0; i < prs_profile_nrows(r->prof); i++) {
        if (rows[i].stage >= S) continue;
        int k = rows[i].stage * 2 + (int)rows[i].instr;
        long q = prs__model_quantize(rows[i].time_s, r->unit_s);
        if (fastest[k] < 0 || q < fastest[k]) fastest[k] = q;
    }
    long *q = calloc((size_t)g->nops, sizeof *q);
    assert_non_null(q);
    double cost0 = 0;
    for (int op = 0; op < g->nops; op++) {
        const prs__model_optype *t = &types[g->type[op]];
        q[op] = t->q_max;
        cost0 += t->cost[t->q_max - t->q_min];
    }
    walk_bounds b;
    b.t_max = dag_longest(g, q);
    for (int op = 0; op < g->nops; op++)
        q[op] = fastest[g->type[op]];
    b.t_min = dag_longest(g, q);
    b.energy0 = cost0 + (double)S * r->power_w * (double)b.t_max * r->unit_s;
    free(q);
    free(fastest);
    for (int k = 0; k < ntypes; k++)
        prs__model_free(&types[k]);
    free(types);
    return b;
}

/* (a)-(d): one unit per step from T_max down to T_min, energies as the cost changes predict,
 * evaluated times within the planned ones. */
static void check_points(const run_desc *r, totals *tot, const prs_frontier *f, walk_bounds b)
{
    int S = r->stages;
    size_t n = prs_frontier_size(f);
    tot->points += (int)n;
    if (n == 0 && b.t_max != b.t_min)
        fail_prop(tot, r, 'd', -1, "empty frontier, but T_max %ld > T_min %ld", b.t_max, b.t_min);
    long prev_units = b.t_max;
    double prev_energy = b.energy0;
    for (size_t k = 0; k < n; k++) {
        const prs_frontier_point *p = prs_frontier_point_at(f, k);
        long kk = (long)k;
        /* (a), and (d) for the first point */
        if (p->time_units != prev_units - 1)
            fail_prop(tot, r, k == 0 ? 'd' : 'a', kk, "time %ld units after %ld%s", p->time_units,
                      prev_units, k == 0 ? " (T_max)" : "");
        if (fabs(p->time_s - (double)p->time_units * r->unit_s) > 1e-12)
            fail_prop(tot, r, 'a', kk, "time_s %.17g is not %ld units", p->time_s, p->time_units);
        /* (b) */
        double want = p->cost_change_j - (double)S * r->power_w * r->unit_s;
        double got = p->energy_j - prev_energy;
        double scale = fmax(fabs(p->energy_j), fabs(prev_energy));
        double rel = fabs(got - want) / fmax(scale, 1e-300);
        if (rel > tot->worst_b) tot->worst_b = rel;
        if (rel > 1e-9)
            fail_prop(tot, r, 'b', kk, "energy change %.12g J, cost change %.12g J predicts %.12g",
                      got, p->cost_change_j, want);
        /* (c) */
        double slack = p->time_s - p->eval_time_s;
        if (slack < tot->least_slack_s) tot->least_slack_s = slack;
        if (p->eval_time_s > p->time_s + 1e-12)
            fail_prop(tot, r, 'c', kk, "evaluated %.6f s > planned %.6f s (%ld units)",
                      p->eval_time_s, p->time_s, p->time_units);
        prev_units = p->time_units;
        prev_energy = p->energy_j;
    }
    /* (d) the last point */
    if (n > 0) {
        const prs_frontier_point *last = prs_frontier_point_at(f, n - 1);
        if (last->time_units != b.t_min)
            fail_prop(tot, r, 'd', (long)n - 1, "last point at %ld units, T_min is %ld",
                      last->time_units, b.t_min);
        if (lround(last->eval_time_s / r->unit_s) != b.t_min)
            fail_prop(tot, r, 'd', (long)n - 1, "last plan evaluates to %.6f s, T_min is %ld",
                      last->eval_time_s, b.t_min);
    }
}

/* (e) point k's plan: profiled clocks only, and it evaluates to the point's figures. */
static void check_plan_at(const run_desc *r, totals *tot, const prs_frontier *f, const dag *g,
                          const clock_sets *cs, size_t k, int *clocks)
{
    prs_error err = {0};
    prs_pipeline pipe = *prs_frontier_pipeline(f);
    const prs_frontier_point *p = prs_frontier_point_at(f, k);
    tot->evals++;
    if (prs_frontier_plan(f, k, clocks, &err) != PRS_OK) {
        fail_prop(tot, r, 'e', (long)k, "prs_frontier_plan: %s", err.msg);
        return;
    }
    for (int op = 0; op < g->nops; op++) {
        int type = g->type[op];
        if (!clock_sets_has(cs, type, clocks[op])) {
            fail_prop(tot, r, 'e', (long)k,
                      "stage %d position %d runs at %d MHz, which "
                      "is not profiled for its %s",
                      op / (2 * r->mbs), op % (2 * r->mbs), clocks[op],
                      prs_instr_name((prs_instr)(type % 2)));
            return;
        }
    }
    double t_s, e_j;
    if (prs_evaluate_plan(r->prof, &pipe, clocks, &t_s, &e_j, &err) != PRS_OK)
        fail_prop(tot, r, 'e', (long)k, "evaluate: %s", err.msg);
    else if (t_s != p->eval_time_s || e_j != p->eval_energy_j)
        fail_prop(tot, r, 'e', (long)k,
                  "re-evaluates to %.17g s %.17g J, point says "
                  "%.17g s %.17g J",
                  t_s, e_j, p->eval_time_s, p->eval_energy_j);
}

/* Plans and checks (a)-(e). Returns the frontier (caller frees) for further checks. */
static prs_frontier *check_run(const run_desc *r, totals *tot)
{
    prs_plan_opts o;
    prs_frontier *f = plan_run(r, tot, &o);
    dag g;
    dag_build(&g, r->stages, r->mbs);
    clock_sets cs;
    clock_sets_build(&cs, r->prof, r->stages);
    check_points(r, tot, f, run_bounds(r, &o, &g));
    /* (e) */
    int *clocks = malloc(sizeof *clocks * (size_t)g.nops);
    assert_non_null(clocks);
    size_t n = prs_frontier_size(f);
    size_t stride = n > MAX_EVAL_CHECKS ? n / MAX_EVAL_CHECKS : 1;
    for (size_t k = 0; k < n; k += (k + 1 < n && k + stride >= n) ? n - 1 - k : stride)
        check_plan_at(r, tot, f, &g, &cs, k, clocks);
    free(clocks);
    dag_free(&g);
    clock_sets_free(&cs);
    return f;
}

static void report(const char *what, const totals *t)
{
    print_message("%s: %d runs, %d points, %d plans re-evaluated; worst (b) error %.3g relative; "
                  "least planned - evaluated time %.3g s; failures a-e: %d %d %d %d %d\n",
                  what, t->runs, t->points, t->evals, t->worst_b, t->least_slack_s, t->failures[0],
                  t->failures[1], t->failures[2], t->failures[3], t->failures[4]);
}

static void assert_no_failures(const totals *t)
{
    for (int i = 0; i < 5; i++)
        if (t->failures[i]) fail_msg("property (%c) failed %d times", 'a' + i, t->failures[i]);
}

/* ---- Real profiles ---- */

static const char *const REAL[] = {"gpt3-175b", "bloom"};
#define A100_BLOCKING_W 83.64

/* Loads $PRS_SHARED_DIR/data/sosp24/stage_profile/<name>+a100_sxm_bf16.csv, or NULL. */
static prs_profile *load_real(const char *name)
{
    const char *dir = getenv("PRS_SHARED_DIR");
    if (!dir || !*dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir, name);
    if (access(path, R_OK) != 0) return NULL;
    prs_profile *p = NULL;
    prs_error err = {0};
    if (prs_profile_load(path, &p, &err) != PRS_OK) fail_msg("%s", err.msg);
    return p;
}

static void test_real_profiles(void **state)
{
    (void)state;
    prs_profile *prof[2] = {load_real(REAL[0]), load_real(REAL[1])};
    if (!prof[0] || !prof[1]) {
        prs_profile_free(prof[0]);
        prs_profile_free(prof[1]);
        prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        return;
    }
    /* (profile, stages, microbatches, unit): the paper's pipeline at both units, fewer
     * microbatches than stages, a shorter pipeline, a tiny one at the fine unit */
    static const struct {
        int profile, stages, mbs;
        double unit_s;
    } runs[] = {
        {0, 8, 12, 0.001}, {1, 8, 12, 0.001}, {0, 8, 12, 0.0001}, {1, 8, 4, 0.0001},
        {0, 8, 4, 0.001},  {1, 4, 8, 0.001},  {0, 2, 2, 0.0001},  {1, 2, 2, 0.0001},
    };
    totals tot = {0};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        for (int m = 0; m < 2; m++) {
            run_desc r = {REAL[runs[i].profile], prof[runs[i].profile], runs[i].stages,
                          runs[i].mbs,           runs[i].unit_s,        A100_BLOCKING_W,
                          (prs_cost_model)m};
            prs_frontier_free(check_run(&r, &tot));
        }
    report("real profiles", &tot);
    prs_profile_free(prof[0]);
    prs_profile_free(prof[1]);
    assert_no_failures(&tot);
}

/* (f) docs/planner.md, 'Quality': GPT-3 / A100, 8 stages, M = 12, 1 ms. The reference's last plan
 * evaluates to 6204.1 J at 2.818 s; the exact optimum there is 6128.4 J. */
static void test_gpt3_hull_beats_exp(void **state)
{
    (void)state;
    prs_profile *p = load_real(REAL[0]);
    if (!p) {
        prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        return;
    }
    totals tot = {0};
    const prs_frontier_point *last[2];
    prs_frontier *f[2];
    for (int m = 0; m < 2; m++) {
        run_desc r = {REAL[0], p, 8, 12, 0.001, A100_BLOCKING_W, (prs_cost_model)m};
        f[m] = check_run(&r, &tot);
        assert_true(prs_frontier_size(f[m]) > 0);
        last[m] = prs_frontier_point_at(f[m], prs_frontier_size(f[m]) - 1);
    }
    const prs_frontier_point *e = last[PRS_COST_EXP], *h = last[PRS_COST_HULL];
    print_message("GPT-3 M=12 fastest plans: exp %.4f s %.4f J (%zu points), hull %.4f s %.4f J "
                  "(%zu points); optimum 6128.4 J at 2.818 s (docs/planner.md)\n",
                  e->eval_time_s, e->eval_energy_j, prs_frontier_size(f[PRS_COST_EXP]),
                  h->eval_time_s, h->eval_energy_j, prs_frontier_size(f[PRS_COST_HULL]));
    assert_true(fabs(e->eval_time_s - 2.818) < 1e-9);
    assert_true(h->eval_time_s == e->eval_time_s);
    assert_true(fabs(e->eval_energy_j - 6204.1) <= 0.1);
    assert_true(h->eval_energy_j < e->eval_energy_j);
    assert_true(h->eval_energy_j >= 6128.4 - 0.05); /* nothing beats the optimum */
    prs_frontier_free(f[0]);
    prs_frontier_free(f[1]);
    prs_profile_free(p);
    assert_no_failures(&tot);
}

/* ---- Synthetic profiles ---- */

static void test_synthetic_profiles(void **state)
{
    (void)state;
    /* Every run with both cost models. Noise 0 gives smooth profiles, 0.02 realistic ones with
     * non-monotone points; the fine unit multiplies the frontier length by ten, so it is used
     * on the shorter pipelines (the A40's computations are twice as long as the A100's). */
    static const struct {
        const char *gpu;
        int stages, mbs;
        double unit_s, noise;
    } runs[] = {
        {"a100", 2, 2, 0.0001, 0.02}, {"a100", 3, 7, 0.001, 0},     {"a100", 4, 16, 0.001, 0.02},
        {"a100", 5, 3, 0.0001, 0},    {"a100", 8, 9, 0.001, 0.02},  {"a100", 6, 12, 0.001, 0},
        {"a100", 7, 2, 0.001, 0.02},  {"a100", 2, 14, 0.001, 0},    {"a40", 2, 2, 0.0001, 0},
        {"a40", 3, 7, 0.001, 0.02},   {"a40", 4, 16, 0.001, 0},     {"a40", 5, 3, 0.001, 0.02},
        {"a40", 8, 9, 0.001, 0},      {"a40", 6, 12, 0.001, 0.02},  {"a40", 7, 2, 0.001, 0},
        {"a40", 2, 14, 0.001, 0.02},  {"h100", 2, 2, 0.0001, 0},    {"h100", 3, 7, 0.0001, 0.02},
        {"h100", 4, 16, 0.001, 0},    {"h100", 5, 3, 0.0001, 0.02}, {"h100", 8, 9, 0.001, 0},
        {"h100", 6, 12, 0.001, 0.02}, {"h100", 7, 2, 0.0001, 0},    {"h100", 2, 14, 0.001, 0.02},
    };
    totals tot = {0};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const prs_gpu_preset *gpu = prs_gpu_preset_find(runs[i].gpu);
        assert_non_null(gpu);
        prs_synth_opts so;
        prs_synth_opts_init(&so);
        so.gpu = gpu;
        so.stages = runs[i].stages;
        so.noise = runs[i].noise;
        so.seed = 1000 + (uint64_t)i;
        prs_profile *p = NULL;
        prs_error err = {0};
        if (prs_synth_profile(&so, &p, &err) != PRS_OK) fail_msg("synth: %s", err.msg);
        char name[64];
        snprintf(name, sizeof name, "synth %s noise %g seed %llu", gpu->name, so.noise,
                 (unsigned long long)so.seed);
        for (int m = 0; m < 2; m++) {
            run_desc r = {name,
                          p,
                          runs[i].stages,
                          runs[i].mbs,
                          runs[i].unit_s,
                          gpu->blocking_power_w,
                          (prs_cost_model)m};
            prs_frontier_free(check_run(&r, &tot));
        }
        prs_profile_free(p);
    }
    report("synthetic profiles", &tot);
    assert_no_failures(&tot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_profiles),
        cmocka_unit_test(test_gpt3_hull_beats_exp),
        cmocka_unit_test(test_synthetic_profiles),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
