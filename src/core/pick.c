/* The plan a planner iteration emits (pick.h). exp mode emits the relaxed plan's clocks (the
 * duration -> clock map, as the reference does), evaluated exactly. hull mode reclaims slack
 * (refine.c) within the rounded plan's own time and keeps the cheaper; when that plan is not
 * certified, i.e. its energy exceeds the relaxation's lower bound by more than
 * PRS_HULL_CERT_GAP, it also tries the reclaiming by rate within the same time, and on a clean
 * frontier it rounds the relaxed plan along its schedule (docs/planner.md, 'From the relaxed
 * plan to clocks'). A candidate is taken only when it ends no later than the best so far, the
 * rounded plan, whose time t0 is at most the planned time. Both refinements only lengthen
 * computations, each to the cheapest clock within its limit, and every clock of the rounded
 * plan is a hull vertex, the cheapest of the clocks no slower than it: so a refinement within
 * the planned time that ends by t0 makes the same choices as the one within t0, and refining
 * within the planned time is not done. The results that depend on the rounded plan alone (its
 * evaluation and both refinements) are kept while it does not change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pick.h"

/* A plan of table entries (one per op) with its evaluated critical path and energy; ok = 0
 * when it could not be built, -1 when not computed yet. */
typedef struct cand {
    int *idx;
    long t;
    double e;
    int ok;
} cand;

struct prs__pick_ctx {
    prs__pick_shared sh;
    prs__refine_refiner *refiner; /* hull mode only */
    long *dur, *earliest;         /* evaluation scratch: per op, per AOA node */
    cand rounded, fit_own, by_rate_own;
    cand tracked[PRS__TRACK_MODES]; /* hull mode, clean frontier: per rounding mode */
    double *price;                  /* per op: the relaxation's price of time (tracks) */
    long evaluations;
    double pick_s; /* sh.timed: time spent in prs__pick_point */
};

prs__pick_ctx *prs__pick_new(const prs__pick_shared *sh)
{
    prs__pick_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->sh = *sh;
    size_t ops = (size_t)sh->g->nops, nodes = (size_t)sh->g->nnodes;
    c->dur = malloc(ops * sizeof *c->dur);
    c->earliest = malloc(nodes * sizeof *c->earliest);
    int bad = !c->dur || !c->earliest;
    if (sh->hull) {
        c->refiner = prs__refine_new(sh->g, sh->table, sh->pipe);
        c->fit_own.idx = malloc(ops * sizeof(int));
        c->by_rate_own.idx = malloc(ops * sizeof(int));
        bad = bad || !c->refiner || !c->fit_own.idx || !c->by_rate_own.idx;
    }
    if (sh->hull && sh->tracks) {
        c->price = malloc(ops * sizeof *c->price);
        bad = bad || !c->price;
        for (int m = 0; m < PRS__TRACK_MODES; m++)
            bad = bad || !(c->tracked[m].idx = malloc(ops * sizeof(int)));
    }
    if (bad) {
        prs__pick_free(c);
        return NULL;
    }
    return c;
}

void prs__pick_free(prs__pick_ctx *c)
{
    if (!c) return;
    prs__refine_free(c->refiner);
    free(c->dur);
    free(c->earliest);
    free(c->fit_own.idx);
    free(c->by_rate_own.idx);
    for (int m = 0; m < PRS__TRACK_MODES; m++)
        free(c->tracked[m].idx);
    free(c->price);
    free(c);
}

/* Exact evaluation of a plan of table entries, with the same arithmetic as
 * prs__table_lookup and prs__table_run (the figures are the same bits). */
static void evaluate_idx(prs__pick_ctx *c, const int *idx, long *T, double *energy_j)
{
    const prs__table_table *t = c->sh.table;
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < c->sh.g->nops; op++) {
        c->dur[op] = t->q[idx[op]];
        sum_q += t->q[idx[op]];
        sum_e += t->energy_j[idx[op]];
    }
    *T = prs__graph_cpm(c->sh.g, c->dur, c->earliest, NULL);
    *energy_j = prs__table_energy(c->sh.pipe, *T, sum_e, sum_q);
}

/* Energy of cd charged with blocking power up to time T (units; T >= cd->t). */
static double charged_to(const prs__pick_ctx *c, const cand *cd, long T)
{
    const prs_pipeline *p = c->sh.pipe;
    return cd->e + (double)p->stages * p->blocking_power_w * (double)(T - cd->t) * p->unit_time_s;
}

/* Lower bound on the energy of any plan finishing within T (units): the relaxation's effective
 * cost at the planned time (no larger than at any shorter time) plus blocking power to T. */
static double relaxed_bound(const prs__pick_ctx *c, double cost, long T)
{
    const prs_pipeline *p = c->sh.pipe;
    return cost + (double)p->stages * p->blocking_power_w * (double)T * p->unit_time_s;
}

/* Is energy e within PRS_HULL_CERT_GAP of the lower bound? */
static int certified(double e, double bound)
{
    return e <= bound + PRS_HULL_CERT_GAP * fabs(bound);
}

/* Take cd as the best plan when it is better: it ends no later, and with blocking power from
 * its end to the best's end charged to it, it costs less (or_equal: no more). */
static void consider(const prs__pick_ctx *c, const cand *cd, const cand **best, int or_equal)
{
    if (cd->ok <= 0 || cd->t > (*best)->t) return;
    double charged = charged_to(c, cd, (*best)->t);
    if (or_equal ? charged <= (*best)->e : charged < (*best)->e) *best = cd;
}

/* Refine the rounded plan within budget (refine.c; preceded by the reclaiming by rate when
 * by_rate) into cd, unless cd already holds that result. */
static const cand *refined(prs__pick_ctx *c, cand *cd, long budget, int by_rate)
{
    if (cd->ok < 0)
        cd->ok = !prs__refine_plan(c->refiner, c->rounded.idx, c->earliest, budget, by_rate,
                                   cd->idx, &cd->t, &cd->e);
    return cd;
}

/* Per op, the relaxation's price of a unit of time at its duration: the slope of its hull cost
 * there (between two vertices the segment's; at a vertex the mean of the two sides'). */
static void fill_prices(prs__pick_ctx *c, const long *dur)
{
    for (int op = 0; op < c->sh.g->nops; op++) {
        const prs__model_optype *t = &c->sh.types[c->sh.g->op_type[op]];
        long j = dur[op] - t->q_min;
        int has_up = dur[op] > t->q_min, has_down = dur[op] < t->q_max;
        double up = has_up ? t->up[j] : 0, down = has_down ? t->down[j] : 0;
        c->price[op] = has_up && has_down ? 0.5 * (up + down) : up + down;
    }
}

/* hull mode, clean frontier: when the best plan of the relaxed plan at planned time T (cost: its
 * effective cost) is not certified against the relaxation's bound at T, round the relaxed plan
 * along its schedule too (refine.c) within T: forward with every computation at the cheapest
 * clock that keeps the schedule; and where the plan is more than PRS_HULL_TRACK_GAP above the
 * bound, forward and backward with the clock that is cheapest once its time is priced at the
 * relaxation's price (a computation between two hull vertices then takes one of them and
 * leaves the time it saves to its neighbours, as the relaxation mixes the two). A result may
 * end after the best plan, so it becomes a point of its own (out->extra) unless the best plan
 * beats it; cleaning keeps whichever no faster plan beats. */
static void track(prs__pick_ctx *c, const cand *best, const long *dur, double cost, long T,
                  prs__pick_out *out)
{
    double bound = relaxed_bound(c, cost, T), e = charged_to(c, best, T);
    if (certified(e, bound)) return;
    int modes = e <= bound + PRS_HULL_TRACK_GAP * fabs(bound) ? 1 : PRS__TRACK_MODES;
    if (modes > 1) fill_prices(c, dur);
    for (int m = 0; m < modes; m++) {
        cand *cd = &c->tracked[m];
        cd->ok = !prs__refine_track(c->refiner, dur, (prs__track_mode)m, c->price, T, cd->idx,
                                    &cd->t, &cd->e);
        int x = cd->ok && !(best->t <= cd->t && charged_to(c, best, cd->t) <= cd->e);
        for (int k = 0; k < m && x; k++) /* the same figures: one point serves */
            if (out->extra[k] && out->x_t[k] == cd->t && out->x_e[k] == cd->e) x = 0;
        out->extra[m] = x;
        if (!x) continue;
        memcpy(out->x_idx[m], cd->idx, sizeof(int) * (size_t)c->sh.g->nops);
        out->x_t[m] = cd->t;
        out->x_e[m] = cd->e;
    }
}

/* The relaxed plan's predicted effective cost: its computations' costs summed in op order. */
static double predicted_cost(const prs__pick_ctx *c, const long *dur)
{
    double cost = 0;
    for (int op = 0; op < c->sh.g->nops; op++) {
        const prs__model_optype *t = &c->sh.types[c->sh.g->op_type[op]];
        cost += t->cost[dur[op] - t->q_min];
    }
    return cost;
}

/* Seconds from a to b. */
static double seconds(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

static void pick(prs__pick_ctx *c, const int *idx, int fresh, const long *dur, long planned,
                 prs__pick_out *out)
{
    memset(out->extra, 0, sizeof out->extra);
    double cost = out->cost = predicted_cost(c, dur);
    if (fresh) {
        c->evaluations++;
        c->rounded.idx = (int *)idx; /* only read */
        c->rounded.ok = 1;
        evaluate_idx(c, idx, &c->rounded.t, &c->rounded.e);
        c->fit_own.ok = c->by_rate_own.ok = -1; /* not computed */
    }
    const cand *best = &c->rounded;
    if (c->sh.hull) {
        long t0 = c->rounded.t;
        consider(c, refined(c, &c->fit_own, t0, 0), &best, 1);
        if (!certified(best->e, relaxed_bound(c, cost, best->t)))
            consider(c, refined(c, &c->by_rate_own, t0, 1), &best, 0);
        if (c->sh.tracks) track(c, best, dur, cost, planned, out);
    }
    memcpy(out->best, best->idx, sizeof(int) * (size_t)c->sh.g->nops);
    out->t = best->t;
    out->e = best->e;
}

void prs__pick_point(prs__pick_ctx *c, const int *idx, int fresh, const long *dur, long planned,
                     prs__pick_out *out)
{
    if (!c->sh.timed) {
        pick(c, idx, fresh, dur, planned, out);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pick(c, idx, fresh, dur, planned, out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->pick_s += seconds(&t0, &t1);
}

void prs__pick_count(const prs__pick_ctx *c, prs_plan_stats *st)
{
    st->evaluations += c->evaluations;
    st->pick_s += c->pick_s;
    if (c->refiner) prs__refine_count(c->refiner, st);
}
