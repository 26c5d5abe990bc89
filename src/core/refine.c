/* Slack reclaiming: turn a plan into a cheaper one that is no slower than a time budget.
 *
 * The hull model plans in a continuous relaxation: a computation whose duration d falls between
 * two hull vertices runs at the faster vertex, so the real plan usually finishes early and pays
 * for speed it does not need. Given the budget T, a backward pass over the activity-on-arc
 * graph (latest times from the already-decided successors, earliest times from the current
 * plan) gives every computation the cheapest profiled clock, in effective energy
 * e - P_block q tau, whose quantized time fits between its earliest start and its latest
 * finish; a forward pass then does the same from the other side. Along any path the chosen
 * durations sum to at most T (each choice fits under latest times that already account for the
 * successors' choices), and every computation's current clock always fits, so no computation
 * gets costlier and the plan never exceeds T. Any profiled clock is eligible, hull vertex or
 * not. */
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

struct prs__refine_refiner {
    const prs__graph_graph *g;
    const prs__table_table *ev;
    int ntypes;
    /* per type: options sorted by q ascending; best[k] = index (into ev) of the cheapest
     * option among the first k+1 */
    int *start, *order, *best;
    long *oq;
    long *dur, *earliest, *latest;
    double *cost; /* per table entry: effective energy e - P_block q tau */
    int *cur;     /* per op: table entry of its clock (prs__refine_reclaim) */
    /* reclaiming by rate: a max-heap of (rate, op) and a work queue of AOA nodes */
    double *hrate;
    int *hop, *queue;
    unsigned char *queued;
};

prs__refine_refiner *prs__refine_new(const prs__graph_graph *g, const prs__table_table *ev,
                                     const prs_pipeline *pipe)
{
    prs__refine_refiner *rf = calloc(1, sizeof *rf);
    if (!rf) return NULL;
    rf->g = g;
    rf->ev = ev;
    rf->ntypes = ev->ntypes;
    int total = ev->start[ev->ntypes];
    rf->start = malloc(sizeof *rf->start * (size_t)(ev->ntypes + 1));
    rf->order = malloc(sizeof *rf->order * (size_t)(total ? total : 1));
    rf->best = malloc(sizeof *rf->best * (size_t)(total ? total : 1));
    rf->oq = malloc(sizeof *rf->oq * (size_t)(total ? total : 1));
    rf->dur = malloc(sizeof *rf->dur * (size_t)g->nops);
    rf->earliest = malloc(sizeof *rf->earliest * (size_t)g->nnodes);
    rf->latest = malloc(sizeof *rf->latest * (size_t)g->nnodes);
    rf->cost = malloc(sizeof *rf->cost * (size_t)(total ? total : 1));
    rf->cur = malloc(sizeof *rf->cur * (size_t)g->nops);
    rf->hrate = malloc(sizeof *rf->hrate * (size_t)g->nops);
    rf->hop = malloc(sizeof *rf->hop * (size_t)g->nops);
    rf->queue = malloc(sizeof *rf->queue * (size_t)(g->nnodes + 1));
    rf->queued = calloc((size_t)g->nnodes, 1);
    if (!rf->start || !rf->order || !rf->best || !rf->oq || !rf->dur || !rf->earliest ||
        !rf->latest || !rf->cost || !rf->cur || !rf->hrate || !rf->hop || !rf->queue ||
        !rf->queued) {
        prs__refine_free(rf);
        return NULL;
    }
    memcpy(rf->start, ev->start, sizeof *rf->start * (size_t)(ev->ntypes + 1));
    for (int k = 0; k < ev->ntypes; k++) {
        int lo = ev->start[k], hi = ev->start[k + 1];
        for (int i = lo; i < hi; i++) { /* insertion sort by q, then by cost */
            int j = i;
            rf->order[j] = i;
            while (j > lo && ev->q[rf->order[j - 1]] > ev->q[rf->order[j]]) {
                int x = rf->order[j];
                rf->order[j] = rf->order[j - 1];
                rf->order[j - 1] = x;
                j--;
            }
        }
        for (int i = lo; i < hi; i++) {
            int o = rf->order[i];
            rf->oq[i] = ev->q[o];
            double c =
                ev->energy_j[o] - pipe->blocking_power_w * (double)ev->q[o] * pipe->unit_time_s;
            int b = i > lo ? rf->best[i - 1] : o;
            double cb =
                ev->energy_j[b] - pipe->blocking_power_w * (double)ev->q[b] * pipe->unit_time_s;
            rf->best[i] = (i == lo || c < cb) ? o : b;
            rf->cost[o] = c;
        }
    }
    return rf;
}

void prs__refine_free(prs__refine_refiner *rf)
{
    if (!rf) return;
    free(rf->start);
    free(rf->order);
    free(rf->best);
    free(rf->oq);
    free(rf->dur);
    free(rf->earliest);
    free(rf->latest);
    free(rf->cost);
    free(rf->cur);
    free(rf->hrate);
    free(rf->hop);
    free(rf->queue);
    free(rf->queued);
    free(rf);
}

/* Cheapest option of a type with q <= limit (index into ev), or -1. */
static int cheapest_within(const prs__refine_refiner *rf, int type, long limit)
{
    int lo = rf->start[type], hi = rf->start[type + 1] - 1, found = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (rf->oq[mid] <= limit) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found < 0 ? -1 : rf->best[found];
}

static void choose(prs__refine_refiner *rf, int op, long limit, int *freq)
{
    int k = cheapest_within(rf, rf->g->op_type[op], limit);
    if (k < 0) return; /* cannot happen: the current option always fits */
    freq[op] = rf->ev->freq[k];
    rf->dur[op] = rf->ev->q[k];
}

int prs__refine_refine(prs__refine_refiner *rf, int *freq, long budget)
{
    const prs__graph_graph *g = rf->g;
    for (int op = 0; op < g->nops; op++) {
        int k = prs__table_find(rf->ev, g->op_type[op], freq[op]);
        if (k < 0) return PRS_EINVAL;
        rf->dur[op] = rf->ev->q[k];
    }
    /* backward pass: latest times from decided successors, earliest from the current plan */
    prs__graph_cpm(g, rf->dur, rf->earliest, NULL);
    if (rf->earliest[g->sink] > budget) return PRS_EINVAL;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        int v = g->topo[i];
        long l = budget;
        for (int k = g->out_start[v]; k < g->out_start[v + 1]; k++) {
            const prs__graph_arc *a = &g->arcs[g->out_arcs[k]];
            if (a->op >= 0) choose(rf, a->op, rf->latest[a->to] - rf->earliest[v], freq);
            long t = rf->latest[a->to] - (a->op >= 0 ? rf->dur[a->op] : 0);
            if (t < l) l = t;
        }
        rf->latest[v] = l;
    }
    /* forward pass: earliest times from decided predecessors, latest from the current plan */
    prs__graph_cpm(g, rf->dur, rf->earliest, rf->latest);
    long T = rf->earliest[g->sink];
    for (int v = 0; v < g->nnodes; v++)
        rf->latest[v] += budget - T;
    for (int i = 0; i < g->nnodes; i++) {
        int v = g->topo[i];
        long e = 0;
        for (int k = g->in_start[v]; k < g->in_start[v + 1]; k++) {
            const prs__graph_arc *a = &g->arcs[g->in_arcs[k]];
            if (a->op >= 0) choose(rf, a->op, rf->latest[v] - rf->earliest[a->from], freq);
            long t = rf->earliest[a->from] + (a->op >= 0 ? rf->dur[a->op] : 0);
            if (t > e) e = t;
        }
        rf->earliest[v] = e;
    }
    return 0;
}

/* Load freq into rf->cur / rf->dur. */
static int load(prs__refine_refiner *rf, const int *freq)
{
    const prs__graph_graph *g = rf->g;
    for (int op = 0; op < g->nops; op++) {
        int k = prs__table_find(rf->ev, g->op_type[op], freq[op]);
        if (k < 0) return PRS_EINVAL;
        rf->cur[op] = k;
        rf->dur[op] = rf->ev->q[k];
    }
    return 0;
}

/* Earliest times and latest times against the budget for rf->dur; the critical path. */
static long windows(prs__refine_refiner *rf, long budget)
{
    const prs__graph_graph *g = rf->g;
    long T = prs__graph_cpm(g, rf->dur, rf->earliest, rf->latest);
    for (int v = 0; v < g->nnodes; v++)
        rf->latest[v] += budget - T;
    return T;
}

/* The best move of one op: its slower clock with the largest saving of effective energy per
 * unit of time that fits in its float (latest finish - earliest start - duration, against the
 * budget). The rate, or 0 if no move saves; *to: the clock's table entry. */
static double op_move(const prs__refine_refiner *rf, int op, int *to)
{
    const prs__graph_graph *g = rf->g;
    const prs__graph_arc *a = &g->arcs[g->op_arc[op]];
    long fl = rf->latest[a->to] - rf->earliest[a->from] - rf->dur[op];
    double best = 0;
    if (fl <= 0) return 0;
    int type = g->op_type[op];
    double c = rf->cost[rf->cur[op]];
    for (int i = rf->start[type]; i < rf->start[type + 1]; i++) {
        long dq = rf->oq[i] - rf->dur[op];
        if (dq > fl) break; /* ascending q */
        if (dq <= 0) continue;
        double rate = (c - rf->cost[rf->order[i]]) / (double)dq;
        if (rate > best) {
            best = rate;
            *to = rf->order[i];
        }
    }
    return best;
}

/* Heap order: higher rate first, then lower op index (ties go to the earliest computation, in
 * stage-major execution order). */
static int before(const prs__refine_refiner *rf, int i, double rate, int op)
{
    return rf->hrate[i] > rate || (rf->hrate[i] == rate && rf->hop[i] < op);
}

static void heap_push(prs__refine_refiner *rf, int *n, double rate, int op)
{
    int i = (*n)++;
    while (i > 0 && !before(rf, (i - 1) / 2, rate, op)) {
        rf->hrate[i] = rf->hrate[(i - 1) / 2];
        rf->hop[i] = rf->hop[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    rf->hrate[i] = rate;
    rf->hop[i] = op;
}

static void heap_pop(prs__refine_refiner *rf, int *n)
{
    double rate = rf->hrate[--*n];
    int op = rf->hop[*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(rf, c + 1, rf->hrate[c], rf->hop[c])) c++;
        if (!before(rf, c, rate, op)) break;
        rf->hrate[i] = rf->hrate[c];
        rf->hop[i] = rf->hop[c];
        i = c;
    }
    rf->hrate[i] = rate;
    rf->hop[i] = op;
}

/* After op's duration grew: raise the earliest times after it and lower the latest times before
 * it (label correcting from the op's arc; times only move one way, so it converges). */
static void propagate(prs__refine_refiner *rf, int op)
{
    const prs__graph_graph *g = rf->g;
    const prs__graph_arc *arc = &g->arcs[g->op_arc[op]];
    int n = g->nnodes, head = 0, tail = 0;
    for (int dir = 0; dir < 2; dir++) {
        int start = dir == 0 ? arc->to : arc->from;
        long t =
            dir == 0 ? rf->earliest[arc->from] + rf->dur[op] : rf->latest[arc->to] - rf->dur[op];
        if (dir == 0 ? t <= rf->earliest[start] : t >= rf->latest[start]) continue;
        if (dir == 0)
            rf->earliest[start] = t;
        else
            rf->latest[start] = t;
        head = tail = 0;
        rf->queue[tail++] = start;
        rf->queued[start] = 1;
        while (head != tail) {
            int u = rf->queue[head];
            head = head == n ? 0 : head + 1;
            rf->queued[u] = 0;
            const int *st = dir == 0 ? g->out_start : g->in_start;
            const int *list = dir == 0 ? g->out_arcs : g->in_arcs;
            for (int k = st[u]; k < st[u + 1]; k++) {
                const prs__graph_arc *e = &g->arcs[list[k]];
                long d = e->op >= 0 ? rf->dur[e->op] : 0;
                int w = dir == 0 ? e->to : e->from;
                if (dir == 0 ? rf->earliest[u] + d <= rf->earliest[w]
                             : rf->latest[u] - d >= rf->latest[w])
                    continue;
                if (dir == 0)
                    rf->earliest[w] = rf->earliest[u] + d;
                else
                    rf->latest[w] = rf->latest[u] - d;
                if (!rf->queued[w]) {
                    rf->queued[w] = 1;
                    rf->queue[tail] = w;
                    tail = tail == n ? 0 : tail + 1;
                }
            }
        }
    }
}

/* Reclaiming by rate on rf->cur / rf->dur: repeatedly apply the best move of any op. Floats
 * only shrink as ops get longer, so a rate in the heap is an upper bound of the op's best rate
 * now: the top is recomputed, applied if it still stands, pushed back otherwise. */
static int reclaim_state(prs__refine_refiner *rf, long budget)
{
    const prs__graph_graph *g = rf->g;
    if (windows(rf, budget) > budget) return PRS_EINVAL;
    int n = 0, to = 0;
    for (int op = 0; op < g->nops; op++) {
        double rate = op_move(rf, op, &to);
        if (rate > 0) heap_push(rf, &n, rate, op);
    }
    while (n > 0) {
        int op = rf->hop[0];
        double stored = rf->hrate[0];
        heap_pop(rf, &n);
        double rate = op_move(rf, op, &to);
        if (rate <= 0) continue;
        if (rate < stored && n > 0 && before(rf, 0, rate, op)) {
            heap_push(rf, &n, rate, op);
            continue;
        }
        rf->cur[op] = to;
        rf->dur[op] = rf->ev->q[to];
        propagate(rf, op);
        rate = op_move(rf, op, &to);
        if (rate > 0) heap_push(rf, &n, rate, op);
    }
    return 0;
}

static void store(const prs__refine_refiner *rf, int *freq)
{
    for (int op = 0; op < rf->g->nops; op++)
        freq[op] = rf->ev->freq[rf->cur[op]];
}

int prs__refine_reclaim(prs__refine_refiner *rf, int *freq, long budget)
{
    int rc = load(rf, freq);
    if (rc || (rc = reclaim_state(rf, budget))) return rc;
    store(rf, freq);
    return 0;
}
