/* Polishing: lower a real plan's evaluated energy without lengthening its evaluated time
 * (docs/planner.md, 'Polishing').
 *
 * The hull planner rounds a relaxed plan to clocks; where a profile has a jump (a clock much
 * cheaper and only a little slower than the hull vertex above it), the best plans run some
 * computations at that clock and a neighbour faster, which no rounding of one relaxed plan
 * finds. Polishing is a local search over such trades: for every edge u -> v of the schedule
 * (consecutive computations of a GPU, or a computation and its successor on the next stage), it
 * re-chooses the clocks of u and v together, every clock of u against the cheapest clock of v
 * that still fits, the other computations fixed, and applies the pair with the largest saving
 * of effective energy (e - P_block q tau). A pair fits when every path through u or v stays
 * within the budget; the test is exact for paths through the edge and safe (it may refuse a
 * pair that fits, never take one that does not) for paths that leave and re-enter the pair,
 * whose length is bounded by the earliest and latest event times of the current plan. A
 * computation alone is re-chosen the same way. Every move lowers the effective energy and
 * keeps the critical path within the budget, so the evaluated energy falls; sweeps repeat
 * until none saves more than rounding, or PRS_POLISH_MAX_SWEEPS. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "polish.h"

struct prs__polish {
    const prs__graph_graph *g;
    const prs__table_table *t;
    const prs_pipeline *pipe;
    /* per type: table entries sorted by q ascending (sorted[start[k] ..]), their q, and the
     * cheapest among the first i + 1 (pbest) */
    int *start, *sorted, *pbest;
    long *sq;
    double *cost; /* per table entry: effective energy */
    int *node_op; /* per AOA node: the op whose arc leaves it (its tail), -1 for none */
    long *dur, *earliest, *latest;
    long moves;
    prs__tick tick; /* checkpoints inside a run (fn NULL: none) */
    long total;     /* what the checkpoints pass as done and total */
};

/* Sort a type's m table entries at e by q ascending, ties by entry (a type has a few dozen
 * clocks: insertion sort). */
static void sort_by_q(const prs__table_table *t, int *e, int m)
{
    for (int i = 1; i < m; i++) {
        int x = e[i], j = i;
        for (; j > 0 && (t->q[e[j - 1]] > t->q[x] || (t->q[e[j - 1]] == t->q[x] && e[j - 1] > x));
             j--)
            e[j] = e[j - 1];
        e[j] = x;
    }
}

void prs__polish_free(prs__polish *p)
{
    if (!p) return;
    free(p->start);
    free(p->sorted);
    free(p->pbest);
    free(p->sq);
    free(p->cost);
    free(p->node_op);
    free(p->dur);
    free(p->earliest);
    free(p->latest);
    free(p);
}

prs__polish *prs__polish_new(const prs__graph_graph *g, const prs__table_table *t,
                             const prs_pipeline *pipe)
{
    prs__polish *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->g = g;
    p->t = t;
    p->pipe = pipe;
    size_t n = (size_t)t->start[t->ntypes], nn = (size_t)g->nnodes, no = (size_t)g->nops;
    p->start = malloc(sizeof *p->start * ((size_t)t->ntypes + 1));
    p->sorted = malloc(sizeof *p->sorted * (n ? n : 1));
    p->pbest = malloc(sizeof *p->pbest * (n ? n : 1));
    p->sq = malloc(sizeof *p->sq * (n ? n : 1));
    p->cost = malloc(sizeof *p->cost * (n ? n : 1));
    p->node_op = malloc(sizeof *p->node_op * nn);
    p->dur = malloc(sizeof *p->dur * no);
    p->earliest = malloc(sizeof *p->earliest * nn);
    p->latest = malloc(sizeof *p->latest * nn);
    if (!p->start || !p->sorted || !p->pbest || !p->sq || !p->cost || !p->node_op || !p->dur ||
        !p->earliest || !p->latest) {
        prs__polish_free(p);
        return NULL;
    }
    double ptau = pipe->blocking_power_w * pipe->unit_time_s;
    for (size_t e = 0; e < n; e++) {
        p->cost[e] = t->energy_j[e] - ptau * (double)t->q[e];
        p->sorted[e] = (int)e;
    }
    for (int k = 0; k < t->ntypes; k++) {
        int s = t->start[k], m = t->start[k + 1] - s;
        p->start[k] = s;
        sort_by_q(t, p->sorted + s, m);
        for (int i = 0; i < m; i++) {
            int e = p->sorted[s + i];
            p->sq[s + i] = t->q[e];
            p->pbest[s + i] =
                i > 0 && p->cost[p->pbest[s + i - 1]] <= p->cost[e] ? p->pbest[s + i - 1] : e;
        }
    }
    p->start[t->ntypes] = (int)n;
    for (size_t v = 0; v < nn; v++)
        p->node_op[v] = -1;
    for (int a = 0; a < g->narcs; a++)
        if (g->arcs[a].op >= 0) p->node_op[g->arcs[a].from] = g->arcs[a].op;
    return p;
}

/* The cheapest table entry of type k whose q is at most lim; -1 if none. */
static int cheapest_within(const prs__polish *p, int k, long lim)
{
    int lo = p->start[k], hi = p->start[k + 1]; /* first position with q > lim */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->sq[mid] <= lim)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > p->start[k] ? p->pbest[lo - 1] : -1;
}

/* Critical path of idx's plan, earliest and latest times (latest against budget). */
static long times(prs__polish *p, const int *idx, long budget)
{
    for (int op = 0; op < p->g->nops; op++)
        p->dur[op] = p->t->q[idx[op]];
    long T = prs__graph_cpm(p->g, p->dur, p->earliest, p->latest);
    for (int v = 0; v < p->g->nnodes; v++)
        p->latest[v] += budget - T;
    return T;
}

static long lmax(long a, long b)
{
    return a > b ? a : b;
}

/* The latest time at the head of arc a, or at any of node v's out-arcs other than skip. */
static long min_latest_out(const prs__polish *p, int v, int skip)
{
    long m = LONG_MAX;
    for (int i = p->g->out_start[v]; i < p->g->out_start[v + 1]; i++) {
        int a = p->g->out_arcs[i];
        if (a != skip && p->latest[p->g->arcs[a].to] < m) m = p->latest[p->g->arcs[a].to];
    }
    return m;
}

/* The earliest time at the tail of any of node v's in-arcs other than skip (0: none). */
static long max_earliest_in(const prs__polish *p, int v, int skip)
{
    long m = 0;
    for (int i = p->g->in_start[v]; i < p->g->in_start[v + 1]; i++) {
        int a = p->g->in_arcs[i];
        if (a != skip && p->earliest[p->g->arcs[a].from] > m) m = p->earliest[p->g->arcs[a].from];
    }
    return m;
}

/* Most neighbours a star move re-chooses (a computation has at most a few). */
#define STAR_MAX 8

/* A move: new entries for op u (and op v, -1: none; or the star's nstar ops) saving `gain` of
 * effective energy. */
typedef struct move {
    int u, eu, v, ev;
    double gain;
    int nstar;
    int star[STAR_MAX], estar[STAR_MAX];
} move;

/* The best re-choice of op u's clock alone into *best (when it saves more). */
static void best_single(const prs__polish *p, const int *idx, int u, move *best)
{
    const prs__graph_arc *au = &p->g->arcs[p->g->op_arc[u]];
    long lim = p->latest[au->to] - p->earliest[au->from];
    int e = cheapest_within(p, p->g->op_type[u], lim);
    if (e < 0) return;
    double gain = p->cost[idx[u]] - p->cost[e];
    if (gain > best->gain) *best = (move){u, e, -1, -1, gain, 0, {0}, {0}};
}

/* The best re-choice of the clocks of u and its successor v (dummy arc `arc` from u's head to
 * v's tail) into *best, when it saves more. */
static void best_pair(const prs__polish *p, const int *idx, int u, int v, int arc, move *best)
{
    const prs__graph_graph *g = p->g;
    const prs__graph_arc *au = &g->arcs[g->op_arc[u]], *av = &g->arcs[g->op_arc[v]];
    long es_u = p->earliest[au->from], d_u = p->t->q[idx[u]], d_v = p->t->q[idx[v]];
    long lf_v = p->latest[av->to];
    long ready_v = max_earliest_in(p, av->from, arc); /* v's other predecessors */
    long lat_u = min_latest_out(p, au->to, arc);      /* u's other successors */
    int tu = g->op_type[u], tv = g->op_type[v];
    double base = p->cost[idx[u]] + p->cost[idx[v]];
    for (int i = p->start[tu]; i < p->start[tu + 1]; i++) {
        int eu = p->sorted[i];
        long du = p->sq[i], end_u = es_u + du;
        if (end_u > lat_u || end_u > lf_v) break; /* q ascending: no longer u fits either */
        if (p->cost[eu] + p->cost[p->pbest[p->start[tv + 1] - 1]] >= base - best->gain) continue;
        /* v starts by max(u's end, its other predecessors' end, which paths from u may delay
         * by u's lengthening); paths from u's other successors may pass through v */
        long start_v = lmax(end_u, ready_v + lmax(0, du - d_u));
        long lim = p->latest[av->to] - start_v;
        if (lat_u != LONG_MAX && d_v + (lat_u - end_u) < lim) lim = d_v + (lat_u - end_u);
        int ev = cheapest_within(p, tv, lim);
        if (ev < 0) continue;
        double gain = base - p->cost[eu] - p->cost[ev];
        if (gain > best->gain) *best = (move){u, eu, v, ev, gain, 0, {0}, {0}};
    }
    (void)lf_v;
}

/* The star of op u: its successor ops (succ) or predecessor ops through dummy arcs into
 * nb[] (at most STAR_MAX; their count returned, -1 when more), and the latest time at the
 * head of u's other out-arcs (succ; LONG_MAX: none) or the earliest at the tail of its other
 * in-arcs (*other). */
static int star_of(const prs__polish *p, int u, int succ, int *nb, long *other)
{
    const prs__graph_graph *g = p->g;
    const prs__graph_arc *au = &g->arcs[g->op_arc[u]];
    int v = succ ? au->to : au->from, n = 0;
    const int *st = succ ? g->out_start : g->in_start, *arcs = succ ? g->out_arcs : g->in_arcs;
    *other = succ ? LONG_MAX : 0;
    for (int i = st[v]; i < st[v + 1]; i++) {
        const prs__graph_arc *a = &g->arcs[arcs[i]];
        int w = succ ? p->node_op[a->to] : -1;
        if (!succ && a->from != g->source) /* a dummy from an op's head: that op */
            for (int k = g->in_start[a->from]; k < g->in_start[a->from + 1] && w < 0; k++)
                w = g->arcs[g->in_arcs[k]].op;
        if (a->op < 0 && w >= 0) {
            if (n == STAR_MAX) return -1;
            nb[n++] = w;
        } else if (succ && p->latest[a->to] < *other) {
            *other = p->latest[a->to];
        } else if (!succ && p->earliest[a->from] > *other) {
            *other = p->earliest[a->from];
        }
    }
    return n;
}

/* Star moves: u at each of its clocks, every successor (succ) or predecessor of u at the
 * cheapest clock no slower than its own that fits; the best into *best when it saves more.
 * The neighbours only get faster, so the paths between them only shorten. */
static void best_star(const prs__polish *p, const int *idx, int u, int succ, move *best)
{
    const prs__graph_graph *g = p->g;
    int nb[STAR_MAX], enb[STAR_MAX];
    long other;
    int n = star_of(p, u, succ, nb, &other);
    if (n < 2) return; /* none, too many, or one: a pair move */
    const prs__graph_arc *au = &g->arcs[g->op_arc[u]];
    long es_u = p->earliest[au->from], lf_u = p->latest[au->to], d_u = p->t->q[idx[u]];
    int tu = g->op_type[u];
    for (int i = p->start[tu]; i < p->start[tu + 1]; i++) {
        int eu = p->sorted[i];
        long du = p->sq[i], end_u = es_u + du;
        if (succ ? end_u > other : other + du > lf_u) break;
        double gain = p->cost[idx[u]] - p->cost[eu];
        int ok = 1;
        for (int k = 0; k < n && ok; k++) {
            int v = nb[k];
            const prs__graph_arc *av = &g->arcs[g->op_arc[v]];
            long d_v = p->t->q[idx[v]], lim;
            if (succ) {
                long ready = 0; /* v's predecessors other than u, delayed by u's lengthening */
                for (int j = g->in_start[av->from]; j < g->in_start[av->from + 1]; j++) {
                    int a = g->in_arcs[j];
                    if (g->arcs[a].from != au->to && p->earliest[g->arcs[a].from] > ready)
                        ready = p->earliest[g->arcs[a].from];
                }
                lim = p->latest[av->to] - lmax(end_u, ready + lmax(0, du - d_u));
            } else {
                lim = lf_u - du - p->earliest[av->from];
            }
            enb[k] = cheapest_within(p, g->op_type[v], lim < d_v ? lim : d_v);
            ok = enb[k] >= 0;
            if (ok) gain += p->cost[idx[v]] - p->cost[enb[k]];
        }
        if (!ok || !(gain > best->gain)) continue;
        *best = (move){u, eu, -1, -1, gain, n, {0}, {0}};
        memcpy(best->star, nb, sizeof nb[0] * (size_t)n);
        memcpy(best->estar, enb, sizeof enb[0] * (size_t)n);
    }
}

/* The best move around op u (alone, with a successor, or with all its successors or all its
 * predecessors). */
static move best_move(const prs__polish *p, const int *idx, int u, double tol)
{
    const prs__graph_graph *g = p->g;
    move best = {-1, -1, -1, -1, tol, 0, {0}, {0}};
    best_single(p, idx, u, &best);
    int head = g->arcs[g->op_arc[u]].to;
    for (int i = g->out_start[head]; i < g->out_start[head + 1]; i++) {
        int a = g->out_arcs[i], v = p->node_op[g->arcs[a].to];
        if (g->arcs[a].op < 0 && v >= 0) best_pair(p, idx, u, v, a, &best);
    }
    best_star(p, idx, u, 1, &best);
    best_star(p, idx, u, 0, &best);
    return best;
}

/* Apply move m to idx, swapping the entries: applied twice, it is undone. */
static void apply_move(int *idx, move *m)
{
    int x = idx[m->u];
    idx[m->u] = m->eu;
    m->eu = x;
    if (m->v >= 0) {
        x = idx[m->v];
        idx[m->v] = m->ev;
        m->ev = x;
    }
    for (int k = 0; k < m->nstar; k++) {
        x = idx[m->star[k]];
        idx[m->star[k]] = m->estar[k];
        m->estar[k] = x;
    }
}

int prs__polish_run(prs__polish *p, int *idx, long budget, long *T, double *energy_j)
{
    const prs__graph_graph *g = p->g;
    long t = times(p, idx, budget);
    if (t > budget) return PRS_EINVAL;
    double sum_c = 0;
    for (int op = 0; op < g->nops; op++)
        sum_c += p->cost[idx[op]];
    double tol = PRS_POLISH_REL_TOL * fabs(sum_c);
    for (int sweep = 0; sweep < PRS_POLISH_MAX_SWEEPS; sweep++) {
        int moved = 0;
        for (int u = 0; u < g->nops; u++) {
            if (u % PRS_POLISH_TICK_OPS == PRS_POLISH_TICK_OPS - 1 && p->tick.fn &&
                p->tick.fn(p->tick.ud, p->total, p->total))
                return PRS_ECANCELED; /* idx holds a plan within the budget, not the best */
            move m = best_move(p, idx, u, tol);
            if (m.u < 0) continue;
            apply_move(idx, &m);
            long t1 = times(p, idx, budget);
            if (t1 > budget) { /* never, by the fit tests; checked all the same */
                apply_move(idx, &m);
                t = times(p, idx, budget);
                continue;
            }
            t = t1;
            p->moves++;
            moved = 1;
        }
        if (!moved) break;
    }
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < g->nops; op++) {
        sum_e += p->t->energy_j[idx[op]];
        sum_q += p->t->q[idx[op]];
    }
    *T = t;
    *energy_j = prs__table_energy(p->pipe, t, sum_e, sum_q);
    return 0;
}

void prs__polish_set_tick(prs__polish *p, const prs__tick *tick, long total)
{
    p->tick = tick ? *tick : (prs__tick){NULL, NULL};
    p->total = total;
}

long prs__polish_moves(const prs__polish *p)
{
    return p->moves;
}
