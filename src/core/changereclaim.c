/* Slack reclaiming with clock changes that cost time (docs/planner.md, 'Clock changes'): each
 * computation in turn takes the clock, of all its profiled ones, that saves the most effective
 * energy (e - P_block * q * tau) and still fits the plan's schedule, its own change and the one
 * of the computation after it on its GPU counted. A sweep takes the computations in topological
 * order, each starting when its predecessors, as placed, end and ending by its latest time of
 * the plan before the sweep, so the iteration never gets longer (checked after each sweep). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

/* Sweeps over every computation at most (each a pass over the schedule graph). */
#define RECLAIM_SWEEPS 4
/* A move is taken when it saves more than this fraction of the plan's energy. */
#define RECLAIM_REL_TOL 1e-12

/* The computation before op on its GPU (cyclic). */
static int op_prev(const prs__graph_graph *g, int op)
{
    int n = g->ops_per_stage;
    return op % n ? op - 1 : op + n - 1;
}

/* Effective energy of table entry k. */
static double effective(const prs_eval *ev, int k)
{
    const prs_pipeline *p = &ev->pipe;
    return ev->t.energy_j[k] - p->blocking_power_w * p->unit_time_s * (double)ev->t.q[k];
}

/* Duration of op at table entry k after prev's clock (its change counted). */
static long dur_after(const prs_eval *ev, int k, int prev_clock)
{
    return ev->t.freq[k] != prev_clock ? ev->t.qc[k] : ev->t.q[k];
}

/* Set op to table entry k in clocks, ev->idx and ev->dur, with next's duration (its change
 * depends on op's clock). */
static void set_entry(prs_eval *ev, int *clocks, int op, int next, int k, int prev_clock)
{
    clocks[op] = ev->t.freq[k];
    ev->idx[op] = k;
    ev->dur[op] = dur_after(ev, k, prev_clock);
    if (next != op) ev->dur[next] = dur_after(ev, ev->idx[next], clocks[op]);
}

/* Place op, starting at start, at the clock that saves the most effective energy and ends by
 * its latest time of the plan before the sweep (ev->latest): the clock it has when that does
 * not fit, else the cheapest of the others that does. The GPU's last computation may not
 * lengthen its first (placed already: the first's change depends on the last's clock). When
 * nothing fits (the computation before it moved this sweep and made it a change), that one goes
 * back to its clock before the sweep (orig). Returns 1 when op moved. */
static int place(prs_eval *ev, int *clocks, const int *orig, int op, long start, double tol)
{
    const prs__graph_graph *g = &ev->g;
    int n = g->ops_per_stage, pos = op % n, type = g->op_type[op];
    int prev = pos ? op - 1 : op + n - 1, next = pos + 1 < n ? op + 1 : op - n + 1;
    long limit = ev->latest[g->arcs[g->op_arc[op]].to] - start;
    for (int pass = 0; pass < 2; pass++) {
        int k0 = ev->idx[op], best = -1;
        double bc = dur_after(ev, k0, clocks[prev]) <= limit ? effective(ev, k0) - tol : INFINITY;
        for (int k = ev->t.start[type]; k < ev->t.start[type + 1]; k++) {
            double c = effective(ev, k);
            if (k == k0 || !(c < bc) || dur_after(ev, k, clocks[prev]) > limit) continue;
            if (pos == n - 1 && next != op &&
                dur_after(ev, ev->idx[next], ev->t.freq[k]) > ev->dur[next])
                continue;
            best = k;
            bc = c;
        }
        if (best >= 0) {
            set_entry(ev, clocks, op, next, best, clocks[prev]);
            return 1;
        }
        if (bc < INFINITY || clocks[prev] == orig[prev] || prev == op) return 0;
        int kp = prs__table_find(&ev->t, g->op_type[prev], orig[prev]);
        int pp = op_prev(g, prev);
        set_entry(ev, clocks, prev, op, kp, clocks[pp]);
    }
    return 0;
}

/* One sweep in topological order: each computation placed (place) when its start is known.
 * Returns the moves made. */
static int sweep(prs_eval *ev, int *clocks, const int *orig, long *E, double tol)
{
    const prs__graph_graph *g = &ev->g;
    int moves = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int v = g->topo[i];
        long t = 0;
        for (int k = g->in_start[v]; k < g->in_start[v + 1]; k++) {
            const prs__graph_arc *a = &g->arcs[g->in_arcs[k]];
            long end = E[a->from] + (a->op >= 0 ? ev->dur[a->op] : 0);
            if (end > t) t = end;
        }
        E[v] = t;
        for (int k = g->out_start[v]; k < g->out_start[v + 1]; k++) {
            int op = g->arcs[g->out_arcs[k]].op;
            if (op >= 0) moves += place(ev, clocks, orig, op, t, tol);
        }
    }
    return moves;
}

int prs__changes_reclaim(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err)
{
    size_t nops = (size_t)ev->g.nops;
    int *orig = malloc(sizeof *orig * nops);
    long *E = malloc(sizeof *E * (size_t)ev->g.nnodes);
    int rc =
        !orig || !E ? FAIL(err, PRS_ENOMEM, "out of memory") : prs__table_lookup(ev, clocks, err);
    double e = 0;
    long t = rc ? 0 : prs__table_run(ev, &e);
    for (int s = 0; !rc && s < RECLAIM_SWEEPS; s++) {
        memcpy(orig, clocks, sizeof *orig * nops);
        prs__graph_cpm(&ev->g, ev->dur, ev->earliest, ev->latest);
        if (!sweep(ev, clocks, orig, E, RECLAIM_REL_TOL * e)) break;
        double e1 = e;
        long t1 = prs__table_lookup(ev, clocks, NULL) ? t + 1 : prs__table_run(ev, &e1);
        if (t1 > t || !(e1 < e)) { /* never expected: the sweep before it stands */
            memcpy(clocks, orig, sizeof *orig * nops);
            rc = prs__table_lookup(ev, clocks, err);
            if (!rc) t = prs__table_run(ev, &e);
            break;
        }
        t = t1;
        e = e1;
    }
    free(orig);
    free(E);
    if (!rc && T) *T = t;
    if (!rc && energy_j) *energy_j = e;
    return rc;
}
