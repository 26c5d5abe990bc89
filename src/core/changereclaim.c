/* Slack reclaiming with clock changes that cost time (docs/planner.md, 'Clock changes'): each
 * computation in turn takes the clock, of all its profiled ones, that saves the most effective
 * energy (e - P_block * q * tau) and still fits the plan's schedule, its own change and the one
 * of the computation after it on its GPU counted. The iteration never gets longer. */
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

/* Sweeps over every computation at most (each move costs a critical-path pass). */
#define RECLAIM_SWEEPS 4
/* A move is taken when it saves more than this fraction of the plan's energy. */
#define RECLAIM_REL_TOL 1e-12

/* Effective energy of table entry k. */
static double effective(const prs_eval *ev, int k)
{
    const prs_pipeline *p = &ev->pipe;
    return ev->t.energy_j[k] - p->blocking_power_w * p->unit_time_s * (double)ev->t.q[k];
}

/* Whether op at table entry k (clock f) fits the schedule ev evaluated last (earliest and latest
 * times against its critical path), with next, the computation after it on its GPU, whose
 * change depends on op's clock. Exact for paths through op alone and through op then next;
 * paths into next from elsewhere keep their times. */
static int fits(const prs_eval *ev, const int *clocks, int op, int next, int k)
{
    const prs__graph_graph *g = &ev->g;
    int n = g->ops_per_stage, pos = op % n, f = ev->t.freq[k];
    int before = clocks[pos ? op - 1 : op + n - 1];
    long d = f != before ? ev->t.qc[k] : ev->t.q[k];
    const prs__graph_arc *a = &g->arcs[g->op_arc[op]], *b = &g->arcs[g->op_arc[next]];
    long start = ev->earliest[a->from], end = start + d;
    if (end > ev->latest[a->to]) return 0;
    if (next == op) return 1; /* a GPU of one computation */
    int kn = ev->idx[next];
    long dn = f != clocks[next] ? ev->t.qc[kn] : ev->t.q[kn];
    long sn = ev->earliest[b->from] > end ? ev->earliest[b->from] : end;
    return sn + dn <= ev->latest[b->to];
}

/* The entry of op's clock that saves the most effective energy and fits; -1 for none. */
static int best_move(const prs_eval *ev, const int *clocks, int op, double tol)
{
    const prs__graph_graph *g = &ev->g;
    int n = g->ops_per_stage, pos = op % n, next = pos + 1 < n ? op + 1 : op - n + 1;
    int type = g->op_type[op], k0 = ev->idx[op], best = -1;
    double c0 = effective(ev, k0), bc = c0 - tol;
    for (int k = ev->t.start[type]; k < ev->t.start[type + 1]; k++) {
        if (k == k0) continue;
        double c = effective(ev, k);
        if (c < bc && fits(ev, clocks, op, next, k)) {
            best = k;
            bc = c;
        }
    }
    return best;
}

int prs__changes_reclaim(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err)
{
    int rc = prs__table_lookup(ev, clocks, err);
    if (rc) return rc;
    double e;
    long t = prs__table_run(ev, &e);
    for (int sweep = 0, moved = 1; moved && sweep < RECLAIM_SWEEPS; sweep++) {
        moved = 0;
        double tol = RECLAIM_REL_TOL * e;
        prs__graph_cpm(&ev->g, ev->dur, ev->earliest, ev->latest);
        for (int op = 0; op < ev->g.nops; op++) {
            int k = best_move(ev, clocks, op, tol);
            if (k < 0) continue;
            clocks[op] = ev->t.freq[k];
            if ((rc = prs__table_lookup(ev, clocks, err))) return rc;
            prs__graph_cpm(&ev->g, ev->dur, ev->earliest, ev->latest);
            moved = 1;
        }
        if ((rc = prs__table_lookup(ev, clocks, err))) return rc;
        t = prs__table_run(ev, &e);
    }
    if (T) *T = t;
    if (energy_j) *energy_j = e;
    return 0;
}
