/* The Phillips-Dessouky time-cost tradeoff loop (docs/planner.md).
 *
 * Start with every computation at its slowest candidate (T_max). Each iteration: find the
 * critical arcs (longest-path slack 0), give each critical computation flow bounds from its cost
 * model (shortening costs u(d), lengthening refunds l(d)), and cut the critical DAG at the
 * minimum cut: computations crossing it forwards get one unit faster, those crossing it
 * backwards one unit slower. Every critical path crosses the cut once net, so the iteration gets
 * one unit shorter at the least predicted energy. Stop when no finite cut exists (some critical
 * path is all at its fastest). Each iteration is one frontier point.
 *
 * exp mode reproduces the reference bit for bit where it matters (capacities padded by 1e-6 and
 * floored to a 1e-6 grid, the same termination rules). hull mode uses the exact piecewise-linear
 * slopes, no padding, a tighter cut tolerance, and skips (rather than stops at) a lengthening
 * that is impossible. Both modes guard the step: if lengthening made a non-critical path too
 * long, the lengthenings are undone so the iteration still shrinks by exactly one unit. hull mode
 * also takes a step that will repeat unchanged k times in one go (repeats_hold), emitting its k
 * points without the scans and critical-path passes between them. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontier_int.h"
#include "perseus/clock.h"
#include "perseus/numfmt.h"
#include "emit.h"
#include "plan_int.h"
#include "polish.h"

/* The reference's name for PRS_REF_FP_ERROR (perseus/limits.h). */
#define FP_ERROR PRS_REF_FP_ERROR

/* Everything one planning run owns. */
typedef struct run {
    const prs_plan_opts *o;
    prs_eval *ev; /* the evaluation context: DAG, measured figures, evaluation scratch */
    const prs__graph_graph *g; /* &ev->g */
    prs__model_optype *types;
    prs__flow_net *net;
    long *dur, *earliest, *latest;
    double *arc_flow, *arc_lb, *arc_ub; /* per arc: starting flow, bounds when last critical */
    long *arc_d;                        /* per arc: its duration when its bounds were taken */
    unsigned char *was_crit;            /* per arc: critical in the last iteration */
    unsigned char *crit;                /* per arc: critical now (prs__graph_cpm_crit) */
    int *net_id;                        /* per arc: its id in r->net (-1: not there) */
    int net_ok;   /* the last solve succeeded: r->side holds its cut, r->net its flows (so
                   * prs__flow_rebound can follow it) */
    int *rebound; /* positions in r->arc_id of the critical arcs whose bounds changed */
    int nrebound;
    int ncrit; /* the critical arcs in r->arc_id */
    int *freq, *arc_id, *touched, *lengthen, *chg_op, *chg_freq;
    int *plan, *prev_plan; /* emitted plan (hull: refined), the previous one */
    int *idx;              /* per op: table entry of freq[op] */
    int changed;           /* freq changed since the last emitted point */
    prs__emit *emit;       /* picks each point's plan (pick.c), in order */
    prs_frontier *front;   /* the frontier the points go to */
    prs_frontier *tracks;  /* hull, clean frontier: the roundings along the relaxed schedule
                            * that are points of their own, cleaned with the frontier's */
    int *track_prev;       /* the clocks of the last of them */
    unsigned char *side;
    double *bounds;    /* flow bounds per type and duration (fill_bounds) */
    size_t *bounds_at; /* per type: its first (lb, ub) pair in bounds */
    /* per type and duration d (indexed like bounds' pairs): how many durations from d down
     * (run_dn) or up (run_up), d included, have d's bounds; only hull mode repeats steps, but
     * the tables are cheap and filled in the same pass as the bounds */
    long *run_dn, *run_up;
    int *prev_touched; /* the computations the step before changed (prev_n of them) */
    int prev_n;
    prs_plan_stats st; /* what this run did (prs_plan_counted) */
    double *cost_at;   /* hull: the relaxation's effective cost at T_max - i units, index i */
    long t_max, span;  /* the critical path with every computation at its slowest; T_max - T_min */
} run;

static void free_types(prs__model_optype *types, int ntypes);

static void run_free(run *r)
{
    prs__emit_free(r->emit); /* first: its threads read the types and the table until joined */
    free_types(r->types, prs_pipeline_chunks(&r->o->pipe) * 2);
    prs_eval_close(r->ev);
    prs__flow_free(r->net);
    free(r->dur);
    free(r->earliest);
    free(r->latest);
    free(r->arc_flow);
    free(r->arc_lb);
    free(r->arc_d);
    free(r->arc_ub);
    free(r->was_crit);
    free(r->crit);
    free(r->freq);
    free(r->arc_id);
    free(r->net_id);
    free(r->rebound);
    free(r->touched);
    free(r->lengthen);
    free(r->chg_op);
    free(r->chg_freq);
    free(r->plan);
    free(r->prev_plan);
    free(r->idx);
    free(r->track_prev);
    prs_frontier_free(r->tracks);
    free(r->side);
    free(r->bounds);
    free(r->bounds_at);
    free(r->run_dn);
    free(r->run_up);
    free(r->prev_touched);
    free(r->cost_at);
}

static const prs__model_optype *type_of(const run *r, int op)
{
    return &r->types[r->g->op_type[op]];
}

static int knob(const run *r, int op)
{
    const prs__model_optype *t = type_of(r, op);
    return t->knob[r->dur[op] - t->q_min];
}

/* The clock of op's current duration into freq and idx; notes a change. */
static void set_clock(run *r, int op)
{
    int f = knob(r, op);
    if (!r->changed && f == r->freq[op]) return;
    r->changed = 1;
    r->freq[op] = f;
    /* plans only hold profiled clocks (candidates are profile rows) */
    r->idx[op] = prs__table_find(&r->ev->t, r->g->op_type[op], f);
}

static double floor_grid(double x)
{
    return isinf(x) ? x : prs_num_py_floordiv(x, FP_ERROR) * FP_ERROR;
}

/* Flow bounds of a critical computation of type t at duration d (docs/planner.md, 'Iteration
 * loop'). */
static void op_bounds(const prs__model_optype *t, long d, int exp_mode, double *lb, double *ub)
{
    long i = d - t->q_min;
    *lb = 0;
    *ub = INFINITY;
    if (t->q_min == t->q_max) return;
    if (d == t->q_min)
        *lb = t->down[i];
    else if (d == t->q_max)
        *ub = t->up[i];
    else {
        *lb = t->down[i];
        *ub = exp_mode ? t->up[i] + FP_ERROR : t->up[i];
    }
    if (exp_mode) {
        *lb = floor_grid(*lb);
        *ub = floor_grid(*ub);
    }
}

/* Tabulate op_bounds for every type and duration (r->bounds: lb, ub pairs; r->bounds_at: each
 * type's first pair; r->run_dn, r->run_up: the runs of equal bounds). Non-zero when out of
 * memory. */
static int fill_bounds(run *r)
{
    int ntypes = prs_pipeline_chunks(&r->o->pipe) * 2;
    int exp_mode = r->o->cost_model == PRS_COST_EXP;
    size_t total = 0;
    if (ntypes < 2) return -1; /* build_types refused these */
    r->bounds_at = malloc(sizeof *r->bounds_at * (size_t)ntypes);
    if (!r->bounds_at) return -1;
    for (int k = 0; k < ntypes; k++) {
        r->bounds_at[k] = total;
        total += (size_t)(r->types[k].q_max - r->types[k].q_min + 1);
    }
    r->bounds = malloc(sizeof *r->bounds * 2 * total);
    r->run_dn = malloc(sizeof *r->run_dn * total);
    r->run_up = malloc(sizeof *r->run_up * total);
    if (!r->bounds || !r->run_dn || !r->run_up) return -1;
    for (int k = 0; k < ntypes; k++) {
        const prs__model_optype *t = &r->types[k];
        double *b = r->bounds + 2 * r->bounds_at[k];
        long *dn = r->run_dn + r->bounds_at[k], *up = r->run_up + r->bounds_at[k];
        long n = t->q_max - t->q_min + 1;
        for (long i = 0; i < n; i++) {
            op_bounds(t, t->q_min + i, exp_mode, &b[2 * i], &b[2 * i + 1]);
            int same = i > 0 && b[2 * i] == b[2 * i - 2] && b[2 * i + 1] == b[2 * i - 1];
            dn[i] = same ? dn[i - 1] + 1 : 1;
        }
        for (long i = n - 1; i >= 0; i--) /* i + 1 has i's bounds when dn[i + 1] > 1 */
            up[i] = i < n - 1 && dn[i + 1] > 1 ? up[i + 1] + 1 : 1;
    }
    return 0;
}

/* Flow bounds of a critical arc: dummies [0, inf), computations from the table. */
static void arc_bounds(const run *r, const prs__graph_arc *a, double *lb, double *ub)
{
    if (a->op < 0) {
        *lb = 0;
        *ub = INFINITY;
        return;
    }
    int type = r->g->op_type[a->op];
    const double *b =
        r->bounds + 2 * (r->bounds_at[type] + (size_t)(r->dur[a->op] - r->types[type].q_min));
    *lb = b[0];
    *ub = b[1];
}

enum step_result { STEP_OK, STEP_DONE, STEP_INFEASIBLE };

/* Bounds of critical arc a at duration d into r->arc_*; 1 when they changed. */
static int take_bounds(run *r, int a, long d)
{
    double lb, ub;
    arc_bounds(r, &r->g->arcs[a], &lb, &ub);
    int changed = lb != r->arc_lb[a] || ub != r->arc_ub[a];
    r->arc_d[a] = d;
    r->arc_lb[a] = lb;
    r->arc_ub[a] = ub;
    return changed;
}

/* The critical arcs are those of the last scan (r->crit as r->was_crit): only the arcs of the
 * computations the last step changed can have new bounds. Those that do go to r->rebound, in
 * the order of r->arc_id; *same as in scan_critical. */
static void rescan_moved(run *r, int *same)
{
    r->nrebound = 0;
    for (int i = 0; i < r->prev_n; i++) {
        int op = r->prev_touched[i], a = r->g->op_arc[op];
        if (!r->crit[a] || r->arc_d[a] == r->dur[op] || !take_bounds(r, a, r->dur[op])) continue;
        *same = 0;
        int k = r->nrebound++, pos = r->net_id[a];
        for (; k > 0 && r->rebound[k - 1] > pos; k--) /* ascending, as a full scan lists them */
            r->rebound[k] = r->rebound[k - 1];
        r->rebound[k] = pos;
    }
}

/* The critical arcs into r->arc_id (their count returned) with their bounds, those whose
 * bounds changed into r->rebound; *same: the flow problem is the last solve's (hull mode only:
 * the same critical arcs with the same bounds, so the same source-minimal minimum cut;
 * piecewise-linear costs make this common); *same_arcs: the same critical arcs, whatever their
 * bounds. */
static int scan_critical(run *r, int *same, int *same_arcs)
{
    const prs__graph_graph *g = r->g;
    int ncrit = 0;
    *same = r->o->cost_model != PRS_COST_EXP && r->net_ok;
    *same_arcs = 1;
    if (r->net_ok && memcmp(r->crit, r->was_crit, (size_t)g->narcs) == 0) {
        rescan_moved(r, same);
        return r->ncrit;
    }
    r->nrebound = 0;
    for (int a = 0; a < g->narcs; a++) {
        const prs__graph_arc *arc = &g->arcs[a];
        if (!r->crit[a]) {
            if (r->was_crit[a]) *same = *same_arcs = 0;
            r->was_crit[a] = 0;
            continue;
        }
        long d = arc->op >= 0 ? r->dur[arc->op] : 0;
        if (!r->was_crit[a]) {
            *same = *same_arcs = 0;
            take_bounds(r, a, d);
        } else if (r->arc_d[a] != d && take_bounds(r, a, d)) {
            *same = 0;
            r->rebound[r->nrebound++] = ncrit;
        }
        r->was_crit[a] = 1;
        r->arc_id[ncrit++] = a;
    }
    r->ncrit = ncrit;
    return ncrit;
}

/* A network of the critical arcs, each starting from its flow in the last one (0 if it was not
 * there or that solve failed). */
static void build_net(run *r, int ncrit)
{
    const prs__graph_graph *g = r->g;
    for (int i = 0; i < ncrit; i++) {
        int a = r->arc_id[i], k = r->net_id[a];
        r->arc_flow[a] = r->net_ok && k >= 0 ? prs__flow_flow(r->net, k) : 0;
    }
    for (int a = 0; a < g->narcs; a++)
        r->net_id[a] = -1;
    prs__flow_reset(r->net, g->nnodes, g->source, g->sink);
    for (int i = 0; i < ncrit; i++) {
        int a = r->arc_id[i];
        r->net_id[a] = prs__flow_add(r->net, g->arcs[a].from, g->arcs[a].to, r->arc_lb[a],
                                     r->arc_ub[a], r->arc_flow[a]);
    }
}

/* The minimum cut of the critical arcs into r->side. The same critical arcs as in the last
 * solve: its network, with its flows, takes the changed bounds (prs__flow_rebound). */
static int solve_cut(run *r, int ncrit, int same_arcs)
{
    if (same_arcs && r->net_ok) {
        for (int i = 0; i < r->nrebound; i++) {
            int a = r->arc_id[r->rebound[i]];
            prs__flow_rebound(r->net, r->rebound[i], r->arc_lb[a], r->arc_ub[a]);
        }
    } else {
        build_net(r, ncrit);
    }
    int exp_mode = r->o->cost_model == PRS_COST_EXP;
    r->st.cuts++;
    int rc = prs__flow_min_cut(r->net, exp_mode ? FP_ERROR : PRS_HULL_CUT_EPS, r->side);
    r->net_ok = rc == 0;
    return rc;
}

/* The computations the cut changes into r->touched: the first *nshort cross it forwards (to be
 * shortened), the rest up to *n backwards (to be lengthened). *pure: every critical arc
 * crossing the cut is changed (no dummy crosses it backwards, no lengthening is skipped), so
 * every critical path gets exactly one unit shorter. */
static enum step_result cut_ops(run *r, int ncrit, int *nshort, int *n, int *pure)
{
    const prs__graph_graph *g = r->g;
    int exp_mode = r->o->cost_model == PRS_COST_EXP;
    int m = 0, nback = 0;
    *pure = 1;
    for (int i = 0; i < ncrit; i++) {
        const prs__graph_arc *arc = &g->arcs[r->arc_id[i]];
        int from = r->side[arc->from], to = r->side[arc->to];
        if (from == to) continue;
        if (from) { /* forwards: shorten */
            if (arc->op < 0 || r->dur[arc->op] - 1 < type_of(r, arc->op)->q_min) return STEP_DONE;
            r->touched[m++] = arc->op;
        } else if (arc->op < 0) { /* backwards: lengthen, never dummies */
            *pure = 0;
        } else if (r->dur[arc->op] + 1 > type_of(r, arc->op)->q_max) {
            if (exp_mode) return STEP_DONE;
            *pure = 0;
        } else {
            r->lengthen[nback++] = arc->op;
        }
    }
    if (m == 0) return STEP_DONE;
    *nshort = m;
    memcpy(r->touched + m, r->lengthen, sizeof *r->lengthen * (size_t)nback);
    *n = m + nback;
    return STEP_OK;
}

/* The predicted effective-energy change of the step in r->touched from the current durations. */
static double step_delta(const run *r, int nshort, int n)
{
    double dl = 0;
    for (int i = 0; i < n; i++) {
        int op = r->touched[i];
        const prs__model_optype *t = type_of(r, op);
        if (i < nshort)
            dl += t->up[r->dur[op] - t->q_min];
        else
            dl -= t->down[r->dur[op] - t->q_min];
    }
    return dl;
}

/* Apply the step in r->touched k times (k < 0 undoes). */
static void apply_step(run *r, int nshort, int n, long k)
{
    for (int i = 0; i < n; i++)
        r->dur[r->touched[i]] += i < nshort ? -k : k;
}

/* hull mode: how many times in a row the step in r->touched meets the same bounds for every
 * computation it changes, each staying within its range. */
static long repeat_limit(const run *r, int nshort, int n)
{
    long k = LONG_MAX;
    for (int i = 0; i < n; i++) {
        int op = r->touched[i], type = r->g->op_type[op];
        const prs__model_optype *t = &r->types[type];
        size_t at = r->bounds_at[type] + (size_t)(r->dur[op] - t->q_min);
        long run_len = i < nshort ? r->run_dn[at] : r->run_up[at];
        long room = i < nshort ? r->dur[op] - t->q_min : t->q_max - r->dur[op];
        if (run_len < k) k = run_len;
        if (room < k) k = room;
    }
    return k;
}

/* Would the next k - 1 iterations repeat this pure step (cut_ops), each one unit shorter?
 * They would if k steps at once end at T - k with the critical arcs of now: every critical path
 * shrinks by one unit per step, so critical arcs stay critical; every other path's length
 * changes linearly with the number of steps, so a path below the critical length at the first
 * and the last step is below it at every step between. The problems solved in between are then
 * the same (same critical arcs; the same bounds by repeat_limit), and so are their cuts.
 * Either way r->earliest / r->latest are left holding the times after the k steps: the caller
 * uses them on success and recomputes them otherwise. */
static int repeats_hold(run *r, long T, int nshort, int n, long k)
{
    const prs__graph_graph *g = r->g;
    apply_step(r, nshort, n, k);
    int ok = prs__graph_cpm_crit(g, r->dur, r->earliest, r->latest, r->crit) == T - k &&
             memcmp(r->crit, r->was_crit, (size_t)g->narcs) == 0;
    apply_step(r, nshort, n, -k);
    return ok;
}

/* What an iteration did: r->touched[0..n) changed duration, the first nshort shortened; delta
 * is the predicted effective-energy change; nrep iterations in a row make this same change
 * (when more than one, r->earliest / r->latest already hold the times after the last of them,
 * T - nrep). */
typedef struct step_out {
    int n, nshort;
    long nrep;
    double delta;
} step_out;

/* Count a step that changes the computations in r->touched[0..n) and keep them. */
static void note_ops(run *r, int n)
{
    size_t bytes = sizeof *r->touched * (size_t)n;
    r->st.same_ops += n == r->prev_n && memcmp(r->touched, r->prev_touched, bytes) == 0;
    memcpy(r->prev_touched, r->touched, bytes);
    r->prev_n = n;
}

/* One iteration; T is the current critical path length (earliest/latest filled). On STEP_OK
 * the durations are updated and *out says how. */
static enum step_result step(run *r, long T, step_out *out)
{
    const prs__graph_graph *g = r->g;
    int exp_mode = r->o->cost_model == PRS_COST_EXP;
    int same, same_arcs, nshort = 0, n = 0, pure;
    int ncrit = scan_critical(r, &same, &same_arcs);
    int rc = same ? 0 : solve_cut(r, ncrit, same_arcs);
    if (rc == PRS_ERANGE) return STEP_DONE;
    if (rc == PRS_EINFEASIBLE) return STEP_INFEASIBLE;
    enum step_result sr = cut_ops(r, ncrit, &nshort, &n, &pure);
    if (sr != STEP_OK) return sr;
    double dl = step_delta(r, nshort, n);
    if (exp_mode && fabs(dl) < FP_ERROR) return STEP_DONE;
    out->nrep = 1;
    if (!exp_mode && pure) {
        long k = repeat_limit(r, nshort, n);
        if (k >= 2 && repeats_hold(r, T, nshort, n, k)) out->nrep = k;
    }
    apply_step(r, nshort, n, 1);
    /* Step guard: lengthening may have made a near-critical path longer than T - 1. */
    if (out->nrep == 1 && n > nshort && prs__graph_cpm(g, r->dur, r->earliest, NULL) > T - 1) {
        for (int i = nshort; i < n; i++) {
            int op = r->touched[i];
            r->dur[op]--;
            dl += type_of(r, op)->down[r->dur[op] - type_of(r, op)->q_min];
        }
        n = nshort;
    }
    r->st.cuts_kept += same; /* counted for steps taken only */
    note_ops(r, n);
    out->n = n;
    out->nshort = nshort;
    out->delta = dl;
    return STEP_OK;
}

static int alloc_run(run *r, prs_error *err)
{
    const prs__graph_graph *g = r->g;
    size_t ops = (size_t)g->nops, nodes = (size_t)g->nnodes, arcs = (size_t)g->narcs;
    r->dur = calloc(ops, sizeof *r->dur); /* zeroed: every path reads it initialised */
    r->freq = malloc(ops * sizeof *r->freq);
    r->touched = malloc(ops * sizeof *r->touched);
    r->lengthen = malloc(ops * sizeof *r->lengthen);
    r->prev_touched = calloc(ops, sizeof *r->prev_touched); /* zeroed for the analyser */
    r->chg_op = malloc(ops * sizeof *r->chg_op);
    r->chg_freq = malloc(ops * sizeof *r->chg_freq);
    r->plan = malloc(ops * sizeof *r->plan);
    r->prev_plan = malloc(ops * sizeof *r->prev_plan);
    r->idx = malloc(ops * sizeof *r->idx);
    r->earliest = malloc(nodes * sizeof *r->earliest);
    r->latest = malloc(nodes * sizeof *r->latest);
    r->side = malloc(nodes);
    r->arc_id = calloc(arcs, sizeof *r->arc_id); /* zeroed for the analyser */
    r->net_id = malloc(arcs * sizeof *r->net_id);
    r->rebound = malloc(arcs * sizeof *r->rebound);
    r->arc_lb = malloc(arcs * sizeof *r->arc_lb);
    r->arc_d = malloc(arcs * sizeof *r->arc_d);
    r->arc_ub = malloc(arcs * sizeof *r->arc_ub);
    r->was_crit = calloc(arcs, 1);
    r->crit = malloc(arcs);
    r->arc_flow = calloc(arcs, sizeof *r->arc_flow);
    r->net = prs__flow_new(g->nnodes, g->narcs);
    if (!r->dur || !r->freq || !r->touched || !r->lengthen || !r->prev_touched || !r->chg_op ||
        !r->chg_freq || !r->plan || !r->prev_plan || !r->idx || !r->earliest || !r->latest ||
        !r->side || !r->arc_id || !r->net_id || !r->rebound || !r->arc_lb || !r->arc_d ||
        !r->arc_ub || !r->was_crit || !r->crit || !r->arc_flow || !r->net)
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (size_t a = 0; a < arcs; a++) {
        r->net_id[a] = -1; /* no network yet */
        r->arc_lb[a] = r->arc_ub[a] = NAN;
    }
    return 0;
}

/* The frontier of the plans rounded along the relaxed schedule (hull mode, clean frontier),
 * starting from r->freq; non-zero when out of memory. */
static int alloc_tracks(run *r)
{
    r->tracks = prs__frontier_new(&r->o->pipe, r->o->cost_model, r->freq);
    r->track_prev = malloc((size_t)r->g->nops * sizeof(int));
    if (!r->tracks || !r->track_prev) return -1;
    memcpy(r->track_prev, r->freq, (size_t)r->g->nops * sizeof(int));
    return 0;
}

/* A set-up checkpoint (prs__tick_stop on o's progress callback): PRS_ECANCELED with err set
 * when it asks to stop. */
static int setup_tick(const prs_plan_opts *o, prs_error *err)
{
    prs__tick t = {o->progress, o->ud};
    return prs__tick_stop(&t) ? FAIL(err, PRS_ECANCELED, "planning canceled while setting up") : 0;
}

/* Every operation type's options and cost model (types: ntypes = chunks * 2 entries, zeroed);
 * warnings (fallbacks to hull) go to o->warn; a set-up checkpoint after each. */
static int build_types(const prs_profile *profile, const prs_plan_opts *o, int ntypes,
                       prs__model_optype *types, prs_error *err)
{
    if (ntypes < 2) {
        prs_error_set(err, PRS_EINVAL, "no computations to plan");
        return PRS_EINVAL; /* visibly non-zero to the static analyser */
    }
    for (int k = 0; k < ntypes; k++) {
        int fallback = 0;
        prs_error note = {0, ""};
        int rc = prs__model_build_memo(profile, k / 2, (prs_instr)(k % 2), o, types, k, &types[k],
                                       &fallback, &note);
        if (rc) {
            prs_error_set(err, rc, "%s", note.msg);
            return rc;
        }
        if (fallback && o->warn) o->warn(o->ud, note.msg);
        if (setup_tick(o, err)) return PRS_ECANCELED;
    }
    return 0;
}

static void free_types(prs__model_optype *types, int ntypes)
{
    if (types)
        for (int k = 0; k < ntypes; k++)
            prs__model_free(&types[k]);
    free(types);
}

/* T_max - T_min in units: every iteration shortens the iteration by one unit, so the raw
 * frontier has at most this many points (or one, when it is 0). dur, earliest: scratch. */
static long frontier_span(const prs__graph_graph *g, const prs__model_optype *types, long *dur,
                          long *earliest)
{
    for (int op = 0; op < g->nops; op++)
        dur[op] = types[g->op_type[op]].q_max;
    long t_max = prs__graph_cpm(g, dur, earliest, NULL);
    for (int op = 0; op < g->nops; op++)
        dur[op] = types[g->op_type[op]].q_min;
    return t_max - prs__graph_cpm(g, dur, earliest, NULL);
}

/* The smallest unit time of the 1-2-5 series (1, 2, 5, 10, 20 ... ms) at which the frontier has
 * at most max_points points; 0 if none within a few decades of the estimate. Points scale as
 * 1 / unit, so the search starts just below span * unit / max_points. */
static double unit_that_fits(const prs_profile *profile, const prs_plan_opts *o,
                             const prs__graph_graph *g, long *dur, long *earliest, long span,
                             long max_points)
{
    static const double mant[3] = {1, 2, 5};
    double est = o->pipe.unit_time_s * (double)span / (double)max_points;
    int e = (int)floor(log10(est)) - 1, i = 0;
    int ntypes = prs_pipeline_chunks(&o->pipe) * 2;
    for (int tries = 0; tries < 15; tries++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%g", mant[i] * pow(10, e));
        double u = strtod(buf, NULL);
        if (++i == 3) i = 0, e++;
        if (u <= o->pipe.unit_time_s || u < 0.6 * est) continue;
        prs_plan_opts q = *o;
        q.pipe.unit_time_s = u;
        q.warn = NULL;
        prs__model_optype *types = calloc((size_t)ntypes, sizeof *types);
        if (!types) return 0;
        long sp = -1;
        if (build_types(profile, &q, ntypes, types, NULL) == 0)
            sp = frontier_span(g, types, dur, earliest);
        free_types(types, ntypes);
        if (sp >= 0 && sp <= max_points) return u;
    }
    return 0;
}

/* Refuse a frontier longer than the limit, before planning, naming the unit time to use. */
static int check_points(run *r, const prs_profile *profile, long *span, prs_error *err)
{
    const prs_plan_opts *o = r->o;
    long max_points = o->max_points > 0 ? o->max_points : PRS_DEFAULT_MAX_POINTS;
    *span = frontier_span(r->g, r->types, r->dur, r->earliest);
    if (*span <= max_points) return 0;
    double u = unit_that_fits(profile, o, r->g, r->dur, r->earliest, *span, max_points);
    if (u > 0)
        prs_error_set(err, PRS_EINVAL,
                      "the frontier would have %ld points at a unit time of %g s, more than the "
                      "limit of %ld: use a unit time of %g s (the smallest that fits) or raise "
                      "the limit",
                      *span, o->pipe.unit_time_s, max_points, u);
    else
        prs_error_set(err, PRS_EINVAL,
                      "the frontier would have %ld points at a unit time of %g s, more than the "
                      "limit of %ld: use a unit time about %.3g times larger or raise the limit",
                      *span, o->pipe.unit_time_s, max_points, (double)*span / (double)max_points);
    return PRS_EINVAL; /* visibly non-zero to the static analyser */
}

/* Push pt with the clocks in plan into f, stored as the changes from prev (f's last plan, then
 * updated). */
static int push_plan(run *r, prs_frontier *f, const prs_frontier_point *pt, const int *plan,
                     int *prev)
{
    size_t nchg = 0;
    for (int op = 0; op < r->g->nops; op++)
        if (plan[op] != prev[op]) {
            r->chg_op[nchg] = op;
            r->chg_freq[nchg++] = plan[op];
            prev[op] = plan[op];
        }
    return prs__frontier_push(f, pt, r->chg_op, r->chg_freq, nchg);
}

/* The clocks of a plan of table entries into r->plan. */
static void to_clocks(run *r, const int *idx)
{
    for (int op = 0; op < r->g->nops; op++)
        r->plan[op] = r->ev->t.freq[idx[op]];
}

/* A point's plans into the frontiers (r->emit's deliver callback, in order): its plan as the
 * next point of r->front, then the plans rounded along the relaxed schedule that are points of
 * their own into r->tracks. Non-zero when out of memory. */
static int deliver(void *ud, const prs__emit_point *p)
{
    run *r = ud;
    const prs_pipeline *pipe = &r->o->pipe;
    const prs__pick_out *out = p->out;
    prs_frontier_point pt;
    pt.time_units = p->planned;
    pt.time_s = (double)p->planned * pipe->unit_time_s;
    pt.energy_j = out->cost + (double)pipe->stages * pipe->blocking_power_w * pt.time_s;
    pt.cost_change_j = p->delta;
    pt.eval_time_s = (double)out->t * pipe->unit_time_s;
    pt.eval_energy_j = out->e;
    pt.bound_j = 0; /* set_bounds */
    long at = r->t_max - p->planned;
    if (r->cost_at && at >= 0 && at <= r->span) r->cost_at[at] = out->cost;
    int rc;
    if (p->chg_op) { /* the changes from the point before, found by the thread that picked it */
        for (int k = 0; k < p->nchg; k++)
            r->prev_plan[p->chg_op[k]] = p->chg_freq[k];
        rc = prs__frontier_push(r->front, &pt, p->chg_op, p->chg_freq, (size_t)p->nchg);
    } else {
        to_clocks(r, out->best);
        rc = push_plan(r, r->front, &pt, r->plan, r->prev_plan);
    }
    for (int m = 0; m < PRS__TRACK_MODES && !rc; m++) {
        if (!out->extra[m]) continue;
        to_clocks(r, out->x_idx[m]);
        pt.eval_time_s = (double)out->x_t[m] * pipe->unit_time_s;
        pt.eval_energy_j = out->x_e[m];
        rc = push_plan(r, r->tracks, &pt, r->plan, r->track_prev);
    }
    return rc;
}

/* The current durations as the next frontier point (T: the planned critical path; ch_op: the nch
 * ops changed since the last point, NULL for any): their plan is picked (pick.c) and delivered
 * in order. Non-zero when out of memory. */
static int push_point(run *r, long T, double delta, int nch, const int *ch_op)
{
    r->st.points++;
    int rc = prs__emit_submit(r->emit, r->idx, r->changed, r->dur, nch, ch_op, T, delta);
    r->changed = 0;
    return rc;
}

/* The frontier points of the iterations step() made (st->nrep of them, the first already
 * applied): each one's clocks, critical path (*T) and plan; progress after each (*done of
 * total). Non-zero with err set when out of memory or canceled. */
static int emit_steps(run *r, const step_out *st, long *T, long *done, long total, prs_error *err)
{
    const prs_plan_opts *o = r->o;
    for (long j = 1; j <= st->nrep; j++) {
        double delta = st->delta;
        if (j > 1) { /* the same step again (step()) */
            delta = step_delta(r, st->nshort, st->n);
            apply_step(r, st->nshort, st->n, 1);
        }
        for (int i = 0; i < st->n; i++)
            set_clock(r, r->touched[i]);
        *T = st->nrep > 1 ? *T - 1
                          : prs__graph_cpm_crit(r->g, r->dur, r->earliest, r->latest, r->crit);
        if (push_point(r, *T, delta, st->n, r->touched))
            return prs_error_set(err, PRS_ENOMEM, "out of memory storing plans");
        ++*done;
        if (o->progress && o->progress(o->ud, *done, total))
            return prs_error_set(err, PRS_ECANCELED, "planning canceled after %ld of %ld steps",
                                 *done, total);
    }
    return 0;
}

/* The planner's iterations from the slowest plan on, each emitted into r->front (total: the
 * progress callback's estimate of their number). Non-zero with err set when out of memory or
 * canceled. */
static int walk(run *r, long total, prs_error *err)
{
    const prs_plan_opts *o = r->o;
    long T = prs__graph_cpm_crit(r->g, r->dur, r->earliest, r->latest, r->crit), done = 0;
    if (o->progress && o->progress(o->ud, 0, total))
        return prs_error_set(err, PRS_ECANCELED, "planning canceled");
    for (;;) {
        step_out st;
        enum step_result sr = step(r, T, &st);
        if (sr == STEP_INFEASIBLE && o->warn)
            o->warn(o->ud, "flow with lower bounds infeasible; frontier ends here");
        if (sr != STEP_OK) break;
        r->st.steps++;
        r->st.repeated += st.nrep > 1;
        int rc = emit_steps(r, &st, &T, &done, total, err);
        if (rc) return rc;
    }
    /* No iteration could shorten the pipeline (one achievable time): its one plan is the start,
     * every computation at its slowest candidate. */
    if ((r->st.points == 0 && push_point(r, T, 0, 0, NULL)) || prs__emit_flush(r->emit))
        return prs_error_set(err, PRS_ENOMEM, "out of memory storing plans");
    return 0;
}

/* hull: every point's lower bound (prs_frontier_point.bound_j): the relaxation's effective cost
 * at its evaluated time t, no less than at its planned time (which is >= t: the cost does not
 * rise with time) and, where the walk passed t, that time's own, plus blocking power to t. */
static void set_bounds(const run *r, prs_frontier *f)
{
    const prs_pipeline *pipe = &r->o->pipe;
    double bw = (double)pipe->stages * pipe->blocking_power_w;
    for (size_t k = 0; k < f->npoints && r->cost_at; k++) {
        prs_frontier_point *pt = &f->pts[k];
        long t = lround(pt->eval_time_s / pipe->unit_time_s), at = r->t_max - t;
        double cost = pt->energy_j - bw * pt->time_s;
        /* a change cost past the planned time: only the relaxation's cost at t bounds it */
        if (pipe->change_cost_s > 0 && pt->eval_time_s > pt->time_s) cost = -INFINITY;
        if (at >= 0 && at <= r->span && !isnan(r->cost_at[at])) cost = fmax(cost, r->cost_at[at]);
        pt->bound_j = isfinite(cost) ? cost + bw * pt->eval_time_s : 0;
    }
}

/* What the run counted, into stats (may be NULL). */
static void count(run *r, prs_plan_stats *stats)
{
    if (!stats) return;
    *stats = r->st;
    if (r->net) prs__flow_count(r->net, stats);
    if (r->emit) {
        prs__emit_stop(r->emit); /* a run that stopped early may have points in flight */
        prs__emit_count(r->emit, stats);
    }
}

int prs_plan(const prs_profile *profile, const prs_plan_opts *o, prs_frontier **out, prs_error *err)
{
    return prs_plan_counted(profile, o, out, NULL, err);
}

/* Everything before the walk, with a set-up checkpoint between its passes (setup_tick): the
 * evaluation context, the cost models, the run's arrays, the frontier span into *span (checked
 * against the limit), the bounds, the starting plan (every computation at its slowest), the
 * frontier r->front (the caller's to free) and the pickers. */
static int set_up(run *r, const prs_profile *profile, prs_plan_stats *stats, long *span,
                  prs_error *err)
{
    const prs_plan_opts *o = r->o;
    prs__tick tick = {o->progress, o->ud};
    int ntypes = prs_pipeline_chunks(&o->pipe) * 2, rc;
    /* the evaluation context first: it checks that every measured time counts in units */
    if ((rc = prs__eval_open_ticked(profile, &o->pipe, &tick, &r->ev, err))) return rc;
    r->g = &r->ev->g;
    r->types = calloc((size_t)ntypes, sizeof *r->types);
    if (!r->types) return FAIL(err, PRS_ENOMEM, "out of memory");
    if ((rc = build_types(profile, o, ntypes, r->types, err)) || (rc = alloc_run(r, err)) ||
        (rc = setup_tick(o, err)) || (rc = check_points(r, profile, span, err)) ||
        (rc = setup_tick(o, err)))
        return rc;
    if (fill_bounds(r)) return FAIL(err, PRS_ENOMEM, "out of memory");
    const prs__graph_graph *g = r->g;
    r->changed = 1;
    for (int op = 0; op < g->nops; op++) {
        r->dur[op] = type_of(r, op)->q_max;
        set_clock(r, op);
    }
    memcpy(r->prev_plan, r->freq, sizeof *r->prev_plan * (size_t)g->nops);
    prs_frontier_kind kind = o->frontier;
    if (kind == PRS_FRONTIER_AUTO)
        kind = o->cost_model == PRS_COST_HULL ? PRS_FRONTIER_CLEAN : PRS_FRONTIER_RAW;
    int hull = o->cost_model == PRS_COST_HULL;
    r->front = prs__frontier_new(&o->pipe, o->cost_model, r->freq);
    if (!r->front || (kind == PRS_FRONTIER_CLEAN && hull && alloc_tracks(r)))
        return FAIL(err, PRS_ENOMEM, "out of memory");
    if ((rc = setup_tick(o, err))) return rc;
    prs__pick_shared sh = {g,    &r->ev->t,         &o->pipe,     r->types,
                           hull, r->tracks != NULL, stats != NULL};
    /* exp's pick is one evaluation, less than handing a point to another thread costs */
    int threads = !hull ? 1 : o->threads ? o->threads : prs__emit_default_threads();
    if (!(r->emit = prs__emit_new(&sh, threads, 0, deliver, r)))
        return FAIL(err, PRS_ENOMEM, "out of memory");
    if ((rc = setup_tick(o, err))) return rc;
    if (hull && !(r->cost_at = malloc(sizeof *r->cost_at * (size_t)(*span + 1))))
        return FAIL(err, PRS_ENOMEM, "out of memory");
    for (long i = 0; hull && i <= *span; i++)
        r->cost_at[i] = NAN;
    r->span = *span;
    r->t_max = prs__graph_cpm(g, r->dur, r->earliest, NULL); /* every computation at its slowest */
    return setup_tick(o, err);
}

int prs_plan_counted(const prs_profile *profile, const prs_plan_opts *o, prs_frontier **out,
                     prs_plan_stats *stats, prs_error *err)
{
    if (stats) memset(stats, 0, sizeof *stats);
    *out = NULL;
    int rc = prs__plan_opts_check(o, err);
    if (rc || (rc = prs_profile_check_stages(profile, prs_pipeline_chunks(&o->pipe), err)))
        return rc;
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    long span = 0;
    rc = set_up(&r, profile, stats, &span, err);
    prs_frontier *f = r.front;
    if (rc) goto out;
    prs_frontier_kind kind = o->frontier;
    if (kind == PRS_FRONTIER_AUTO)
        kind = o->cost_model == PRS_COST_HULL ? PRS_FRONTIER_CLEAN : PRS_FRONTIER_RAW;
    int hull = o->cost_model == PRS_COST_HULL;
    long total = span > 0 ? span : 1;
    prs__tick tick = {o->progress, o->ud};
    if ((rc = walk(&r, total, err)) ||
        (rc = prs__changes_frontiers(r.ev, &f, &r.tracks, kind == PRS_FRONTIER_CLEAN, &tick, total,
                                     err)))
        goto out;
    if (kind == PRS_FRONTIER_CLEAN) {
        prs_frontier *c = NULL;
        const prs_frontier *both[2] = {f, r.tracks};
        if ((rc = prs__frontier_clean_union(both, r.tracks ? 2 : 1, &c, err))) goto out;
        prs_frontier_free(f);
        f = c;
    }
    if (o->progress && o->progress(o->ud, total, total)) { /* between cleaning and polishing */
        rc = prs_error_set(err, PRS_ECANCELED, "planning canceled");
        goto out;
    }
    prs_polish_kind pk = o->polish != PRS_POLISH_AUTO ? o->polish
                         : hull                       ? PRS_POLISH_RUNS
                                                      : PRS_POLISH_NONE;
    if (pk != PRS_POLISH_NONE) {
        double p0 = prs_mono_s();
        if ((rc = prs__polish_frontier(r.ev, &f, pk == PRS_POLISH_ALL, kind == PRS_FRONTIER_CLEAN,
                                       &tick, total, &r.st.polish_moves, err)))
            goto out;
        r.st.polish_s = prs_mono_s() - p0;
    }
    set_bounds(&r, f);
    if (o->progress && o->progress(o->ud, total, total)) {
        rc = prs_error_set(err, PRS_ECANCELED, "planning canceled");
        goto out;
    }
    *out = f;
    f = NULL;
    rc = 0;
out:
    count(&r, stats);
    prs_frontier_free(f);
    run_free(&r);
    return rc;
}
