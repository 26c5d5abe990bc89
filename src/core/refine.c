/* Slack reclaiming: turn a plan into a cheaper one that is no slower than a time budget.
 *
 * The hull model plans in a continuous relaxation: a computation whose duration d falls between
 * two hull vertices runs at the faster vertex, so the real plan usually finishes early and pays
 * for speed it does not need. Given the budget T, a backward pass over the schedule (latest
 * times from the already-decided successors, earliest times from the current plan) gives
 * every computation the cheapest profiled clock, in effective energy
 * e - P_block q tau, whose quantized time fits between its earliest start and its latest
 * finish; a forward pass then does the same from the other side. Along any path the chosen
 * durations sum to at most T (each choice fits under latest times that already account for the
 * successors' choices), and every computation's current clock always fits, so no computation
 * gets costlier and the plan never exceeds T. Any profiled clock is eligible, hull vertex or
 * not. The passes run over the computations themselves in topological order (activities on
 * nodes, built from the planner's activity-on-arc graph): half the nodes of that graph, and the
 * same times. */
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

struct prs__refine_refiner {
    const prs__graph_graph *g;
    const prs__table_table *ev;
    const prs_pipeline *pipe;
    int ntypes;
    /* per type: options sorted by q ascending; best[k] = index (into ev) of the cheapest
     * option among the first k+1; after[e] (per table entry e) = the first sorted position
     * whose q exceeds e's */
    int *start, *order, *best, *after;
    long *oq;
    /* cheapest option within a limit, tabulated per type over [q0, q0 + n), the type's table at
     * fit[off ..] (NULL when the spans are too long to tabulate: a binary search then) */
    int *fit;
    struct op_fit {
        long q0;
        int off, n;
    } * op_fit; /* per op: its type's q0, off, n (one read in the passes) */
    /* per type: the sorted positions of the lower convex hull's vertices of (q, effective
     * energy), ascending q, at hv[hv_start[k]] .. hv[hv_start[k + 1] - 1] */
    int *hv, *hv_start;
    /* The schedule as activities on nodes: the ops in topological order, each one's predecessor
     * and successor ops (an AOA dummy arc R_u -> L_v is the edge u -> v). */
    int *otopo, *pred_start, *pred, *succ_start, *succ;
    long *dur;
    /* per op: earliest start and latest finish (the AOA earliest time at its tail, the latest
     * time at its head); rel: scratch of the roundings along the relaxed schedule */
    long *earliest, *latest, *rel;
    double *cost; /* per table entry: effective energy e - P_block q tau */
    int *cur;     /* per op: table entry of its clock */
    /* reclaiming by rate: a max-heap of (rate, op) and a work queue of ops */
    double *hrate;
    int *hop, *queue;
    unsigned char *queued;
    long reclaims, moves, tracks; /* prs__refine_count */
};

/* Total length of the per-type limit tables above which they are not built (ints). */
#define FIT_TABLE_MAX (1L << 22)

static int alloc_refiner(prs__refine_refiner *rf, int total)
{
    const prs__graph_graph *g = rf->g;
    size_t nt = (size_t)(total ? total : 1), nty = (size_t)rf->ntypes;
    rf->start = malloc(sizeof *rf->start * (nty + 1));
    rf->order = malloc(sizeof *rf->order * nt);
    rf->best = malloc(sizeof *rf->best * nt);
    rf->after = malloc(sizeof *rf->after * nt);
    rf->oq = malloc(sizeof *rf->oq * nt);
    rf->hv = malloc(sizeof *rf->hv * nt);
    rf->hv_start = malloc(sizeof *rf->hv_start * (nty + 1));
    rf->dur = malloc(sizeof *rf->dur * (size_t)g->nops);
    rf->earliest = malloc(sizeof *rf->earliest * (size_t)g->nops);
    rf->latest = malloc(sizeof *rf->latest * (size_t)g->nops);
    rf->rel = malloc(sizeof *rf->rel * (size_t)g->nops);
    rf->otopo = malloc(sizeof *rf->otopo * (size_t)g->nops);
    rf->pred_start = calloc((size_t)g->nops + 1, sizeof *rf->pred_start);
    rf->succ_start = calloc((size_t)g->nops + 1, sizeof *rf->succ_start);
    rf->pred = malloc(sizeof *rf->pred * (size_t)(g->narcs ? g->narcs : 1));
    rf->succ = malloc(sizeof *rf->succ * (size_t)(g->narcs ? g->narcs : 1));
    rf->cost = malloc(sizeof *rf->cost * nt);
    rf->cur = malloc(sizeof *rf->cur * (size_t)g->nops);
    rf->hrate = malloc(sizeof *rf->hrate * (size_t)g->nops);
    rf->hop = malloc(sizeof *rf->hop * (size_t)g->nops);
    rf->queue = malloc(sizeof *rf->queue * (size_t)(g->nops + 1));
    rf->queued = calloc((size_t)g->nops + 1, 1);
    return rf->start && rf->order && rf->best && rf->after && rf->oq && rf->hv && rf->hv_start &&
           rf->dur && rf->earliest && rf->latest && rf->rel && rf->otopo && rf->pred_start &&
           rf->succ_start && rf->pred && rf->succ && rf->cost && rf->cur && rf->hrate && rf->hop &&
           rf->queue && rf->queued;
}

/* One type's options sorted by q (stable), with the running cheapest and effective costs. */
static void sort_type(prs__refine_refiner *rf, int k)
{
    const prs__table_table *ev = rf->ev;
    const prs_pipeline *pipe = rf->pipe;
    int lo = ev->start[k], hi = ev->start[k + 1];
    for (int i = lo; i < hi; i++) { /* insertion sort by q */
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
        double c = ev->energy_j[o] - pipe->blocking_power_w * (double)ev->q[o] * pipe->unit_time_s;
        int b = i > lo ? rf->best[i - 1] : o;
        double cb = ev->energy_j[b] - pipe->blocking_power_w * (double)ev->q[b] * pipe->unit_time_s;
        rf->best[i] = (i == lo || c < cb) ? o : b;
        rf->cost[o] = c;
    }
    for (int i = lo, j = lo; i < hi; i++) {
        while (j < hi && rf->oq[j] <= rf->oq[i])
            j++;
        rf->after[rf->order[i]] = j;
    }
}

/* Is sorted position b on or above the segment from position a to position c (a < b < c in q)? */
static int above(const prs__refine_refiner *rf, int a, int b, int c)
{
    double ca = rf->cost[rf->order[a]], cb = rf->cost[rf->order[b]], cc = rf->cost[rf->order[c]];
    return (cb - ca) * (double)(rf->oq[c] - rf->oq[a]) >=
           (cc - ca) * (double)(rf->oq[b] - rf->oq[a]);
}

/* Per type, the vertices of the lower convex hull of the options that are cheaper than every
 * faster one (Andrew's monotone chain over ascending q). */
static void build_hull(prs__refine_refiner *rf)
{
    int n = 0;
    for (int k = 0; k < rf->ntypes; k++) {
        int first = n;
        rf->hv_start[k] = n;
        for (int i = rf->start[k]; i < rf->start[k + 1]; i++) {
            if (rf->best[i] != rf->order[i]) continue; /* a faster option is no costlier */
            if (n > first && rf->oq[rf->hv[n - 1]] == rf->oq[i]) n--; /* as fast, cheaper */
            while (n - first >= 2 && above(rf, rf->hv[n - 2], rf->hv[n - 1], i))
                n--;
            rf->hv[n++] = i;
        }
    }
    rf->hv_start[rf->ntypes] = n;
}

/* The per-type tables of the cheapest option within a limit, when their total length is
 * bounded (0), else rf->fit stays NULL; -1 when out of memory. */
static int build_fit(prs__refine_refiner *rf)
{
    int nty = rf->ntypes;
    struct op_fit *ty = malloc(sizeof *ty * ((size_t)rf->ntypes + 1)); /* per type */
    if (!ty) return -1;
    long total = 0;
    for (int k = 0; k < nty; k++) {
        int lo = rf->start[k], hi = rf->start[k + 1];
        ty[k].off = (int)total;
        ty[k].q0 = lo < hi ? rf->oq[lo] : 0;
        ty[k].n = lo < hi ? (int)(rf->oq[hi - 1] - rf->oq[lo] + 1) : 0;
        total += ty[k].n;
        if (total > FIT_TABLE_MAX) {
            free(ty);
            return 0;
        }
    }
    rf->fit = malloc(sizeof *rf->fit * (size_t)(total ? total : 1));
    rf->op_fit = malloc(sizeof *rf->op_fit * (size_t)(rf->g->nops ? rf->g->nops : 1));
    if (!rf->fit || !rf->op_fit) {
        free(ty);
        return -1;
    }
    for (int op = 0; op < rf->g->nops; op++)
        rf->op_fit[op] = ty[rf->g->op_type[op]];
    for (int k = 0; k < nty; k++) {
        int i = rf->start[k];
        for (int j = 0; j < ty[k].n; j++) {
            while (i + 1 < rf->start[k + 1] && rf->oq[i + 1] <= ty[k].q0 + j)
                i++;
            rf->fit[ty[k].off + j] = rf->best[i];
        }
    }
    free(ty);
    return 0;
}

/* The op whose arc ends at AOA node v, or -1 (a node at the tail of an arc, or of no op). */
static int op_ending_at(const prs__graph_graph *g, int v)
{
    for (int k = g->in_start[v]; k < g->in_start[v + 1]; k++) {
        int op = g->arcs[g->in_arcs[k]].op;
        if (op >= 0) return op;
    }
    return -1;
}

/* The activity-on-node form of the schedule (rf->otopo, pred, succ). An op v's arc runs
 * L_v -> R_v, and R_v's only in-arc is it; every other arc is a dummy of duration 0. A dummy
 * R_u -> L_v is the edge u -> v; dummies from the source's or into the sink's nodes add
 * nothing (times start at 0, and end within the budget). So the AOA times are the AON ones:
 * earliest[L_v] is v's earliest start, latest[R_v] its latest finish. */
static void build_aon(prs__refine_refiner *rf)
{
    const prs__graph_graph *g = rf->g;
    int n = 0, np = 0, ns = 0;
    for (int i = 0; i < g->nnodes; i++) { /* ops in the order of their tails */
        int v = g->topo[i];
        for (int k = g->out_start[v]; k < g->out_start[v + 1]; k++)
            if (g->arcs[g->out_arcs[k]].op >= 0) rf->otopo[n++] = g->arcs[g->out_arcs[k]].op;
    }
    for (int op = 0; op < g->nops; op++) {
        const prs__graph_arc *a = &g->arcs[g->op_arc[op]];
        rf->pred_start[op] = np;
        for (int k = g->in_start[a->from]; k < g->in_start[a->from + 1]; k++) {
            int u = op_ending_at(g, g->arcs[g->in_arcs[k]].from);
            if (u >= 0) rf->pred[np++] = u;
        }
        rf->succ_start[op] = ns;
        for (int k = g->out_start[a->to]; k < g->out_start[a->to + 1]; k++) {
            const prs__graph_arc *d = &g->arcs[g->out_arcs[k]];
            for (int j = g->out_start[d->to]; j < g->out_start[d->to + 1]; j++)
                if (g->arcs[g->out_arcs[j]].op >= 0) rf->succ[ns++] = g->arcs[g->out_arcs[j]].op;
        }
    }
    rf->pred_start[g->nops] = np;
    rf->succ_start[g->nops] = ns;
}

prs__refine_refiner *prs__refine_new(const prs__graph_graph *g, const prs__table_table *ev,
                                     const prs_pipeline *pipe)
{
    prs__refine_refiner *rf = calloc(1, sizeof *rf);
    if (!rf) return NULL;
    rf->g = g;
    rf->ev = ev;
    rf->pipe = pipe;
    rf->ntypes = ev->ntypes;
    if (!alloc_refiner(rf, ev->start[ev->ntypes])) {
        prs__refine_free(rf);
        return NULL;
    }
    memcpy(rf->start, ev->start, sizeof *rf->start * (size_t)(ev->ntypes + 1));
    build_aon(rf);
    for (int k = 0; k < ev->ntypes; k++)
        sort_type(rf, k);
    build_hull(rf);
    if (build_fit(rf)) {
        prs__refine_free(rf);
        return NULL;
    }
    return rf;
}

void prs__refine_free(prs__refine_refiner *rf)
{
    if (!rf) return;
    free(rf->start);
    free(rf->order);
    free(rf->best);
    free(rf->after);
    free(rf->oq);
    free(rf->fit);
    free(rf->op_fit);
    free(rf->hv);
    free(rf->hv_start);
    free(rf->dur);
    free(rf->earliest);
    free(rf->latest);
    free(rf->rel);
    free(rf->otopo);
    free(rf->pred_start);
    free(rf->pred);
    free(rf->succ_start);
    free(rf->succ);
    free(rf->cost);
    free(rf->cur);
    free(rf->hrate);
    free(rf->hop);
    free(rf->queue);
    free(rf->queued);
    free(rf);
}

/* Cheapest option of a type with q <= limit (index into ev), or -1, by binary search (without
 * the limit tables). */
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

/* Give op the cheapest clock within limit; -1 (op unchanged) when none fits. */
static inline int choose(prs__refine_refiner *rf, int op, long limit)
{
    int k;
    if (rf->fit) { /* the limit table, through the op's own entry */
        const struct op_fit *f = &rf->op_fit[op];
        long j = limit - f->q0;
        if (j < 0 || f->n == 0) return -1;
        k = rf->fit[f->off + (j < f->n ? j : f->n - 1)];
    } else if ((k = cheapest_within(rf, rf->g->op_type[op], limit)) < 0) {
        return -1; /* the passes: cannot happen, the current option always fits */
    }
    rf->cur[op] = k;
    rf->dur[op] = rf->ev->q[k];
    return 0;
}

/* op's earliest start: the last end of its predecessors (their rf->earliest and rf->dur). */
static inline long earliest_start(const prs__refine_refiner *rf, int op)
{
    long e = 0;
    for (int k = rf->pred_start[op]; k < rf->pred_start[op + 1]; k++) {
        int u = rf->pred[k];
        if (rf->earliest[u] + rf->dur[u] > e) e = rf->earliest[u] + rf->dur[u];
    }
    return e;
}

/* op's latest finish within budget: the first latest start of its successors (their
 * rf->latest and rf->dur). */
static inline long latest_finish(const prs__refine_refiner *rf, int op, long budget)
{
    long l = budget;
    for (int k = rf->succ_start[op]; k < rf->succ_start[op + 1]; k++) {
        int s = rf->succ[k];
        if (rf->latest[s] - rf->dur[s] < l) l = rf->latest[s] - rf->dur[s];
    }
    return l;
}

/* The two passes on rf->cur / rf->dur within budget; PRS_EINVAL if the plan exceeds it.
 * rf->earliest must hold the plan's earliest starts; on return it holds those of the result.
 * Returns through *T the result's critical path. */
static int two_passes(prs__refine_refiner *rf, long budget, long *T)
{
    const int n = rf->g->nops, *ot = rf->otopo;
    long *es = rf->earliest, *lf = rf->latest, *dur = rf->dur, end = 0;
    for (int i = 0; i < n; i++)
        if (es[ot[i]] + dur[ot[i]] > end) end = es[ot[i]] + dur[ot[i]];
    if (end > budget) return PRS_EINVAL;
    /* backward: latest finishes from the decided successors, earliest starts from the plan */
    for (int i = n - 1; i >= 0; i--) {
        int op = ot[i];
        lf[op] = latest_finish(rf, op, budget);
        choose(rf, op, lf[op] - es[op]);
    }
    /* forward: earliest starts from the decided predecessors, latest finishes from the
     * backward pass (every successor's duration was final when an op's was chosen) */
    end = 0;
    for (int i = 0; i < n; i++) {
        int op = ot[i];
        es[op] = earliest_start(rf, op);
        choose(rf, op, lf[op] - es[op]);
        if (es[op] + dur[op] > end) end = es[op] + dur[op];
    }
    *T = end;
    return 0;
}

int prs__refine_entries(const prs__refine_refiner *rf, const int *freq, int *idx)
{
    const prs__graph_graph *g = rf->g;
    for (int op = 0; op < g->nops; op++)
        if ((idx[op] = prs__table_find(rf->ev, g->op_type[op], freq[op])) < 0) return PRS_EINVAL;
    return 0;
}

/* Load table entries into rf->cur / rf->dur. */
static void load(prs__refine_refiner *rf, const int *idx)
{
    const prs__graph_graph *g = rf->g;
    for (int op = 0; op < g->nops; op++) {
        rf->cur[op] = idx[op];
        rf->dur[op] = rf->ev->q[idx[op]];
    }
}

/* The evaluated energy of rf->cur with critical path T, summed as prs__table_lookup does. */
static double energy_of(const prs__refine_refiner *rf, long T)
{
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < rf->g->nops; op++) {
        sum_q += rf->ev->q[rf->cur[op]];
        sum_e += rf->ev->energy_j[rf->cur[op]];
    }
    return prs__table_energy(rf->pipe, T, sum_e, sum_q);
}

/* Forward pass: the earliest starts (rf->earliest) of rf->dur; the critical path. */
static long forward(prs__refine_refiner *rf)
{
    const int n = rf->g->nops, *ot = rf->otopo;
    long *es = rf->earliest, *dur = rf->dur, end = 0;
    for (int i = 0; i < n; i++) {
        int op = ot[i];
        es[op] = earliest_start(rf, op);
        if (es[op] + dur[op] > end) end = es[op] + dur[op];
    }
    return end;
}

/* Earliest starts and latest finishes against the budget for rf->dur; the critical path. */
static long windows(prs__refine_refiner *rf, long budget)
{
    const int n = rf->g->nops, *ot = rf->otopo;
    long T = forward(rf);
    for (int i = n - 1; i >= 0; i--)
        rf->latest[ot[i]] = latest_finish(rf, ot[i], budget);
    return T;
}
/* The best move of one op: its slower clock with the largest saving of effective energy per
 * unit of time that fits in its float (latest finish - earliest start - duration, against the
 * budget). The rate, or 0 if no move saves; *to: the clock's table entry. */
static double op_move(const prs__refine_refiner *rf, int op, int *to)
{
    long fl = rf->latest[op] - rf->earliest[op] - rf->dur[op];
    double best = 0;
    if (fl <= 0) return 0;
    int type = rf->g->op_type[op];
    double c = rf->cost[rf->cur[op]];
    for (int i = rf->after[rf->cur[op]]; i < rf->start[type + 1]; i++) {
        long dq = rf->oq[i] - rf->dur[op]; /* > 0: options after the current one */
        if (dq > fl) break;                /* ascending q */
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

/* Put (rate, op) at position i of the heap of n entries, moving it down to its place. */
static void sift_down(prs__refine_refiner *rf, int n, int i, double rate, int op)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(rf, c + 1, rf->hrate[c], rf->hop[c])) c++;
        if (!before(rf, c, rate, op)) break;
        rf->hrate[i] = rf->hrate[c];
        rf->hop[i] = rf->hop[c];
        i = c;
    }
    rf->hrate[i] = rate;
    rf->hop[i] = op;
}

/* Does the best entry below the top of a heap of n come before (rate, op)? */
static int rival_leads(const prs__refine_refiner *rf, int n, double rate, int op)
{
    if (n < 2) return 0;
    int c = n > 2 && before(rf, 2, rf->hrate[1], rf->hop[1]) ? 2 : 1;
    return before(rf, c, rate, op);
}

static void heap_pop(prs__refine_refiner *rf, int *n)
{
    --*n;
    sift_down(rf, *n, 0, rf->hrate[*n], rf->hop[*n]);
}

/* After op's duration grew: raise the earliest starts after it and lower the latest finishes
 * before it (label correcting from op; times only move one way, so it converges). */
static void propagate(prs__refine_refiner *rf, int op)
{
    int n = rf->g->nops;
    long *es = rf->earliest, *lf = rf->latest, *dur = rf->dur;
    for (int dir = 0; dir < 2; dir++) {
        int head = 0, tail = 0;
        rf->queue[tail++] = op;
        rf->queued[op] = 1;
        while (head != tail) {
            int u = rf->queue[head];
            head = head == n ? 0 : head + 1;
            rf->queued[u] = 0;
            const int *st = dir == 0 ? rf->succ_start : rf->pred_start;
            const int *list = dir == 0 ? rf->succ : rf->pred;
            long t = dir == 0 ? es[u] + dur[u] : lf[u] - dur[u];
            for (int k = st[u]; k < st[u + 1]; k++) {
                int w = list[k];
                if (dir == 0 ? t <= es[w] : t >= lf[w]) continue;
                if (dir == 0)
                    es[w] = t;
                else
                    lf[w] = t;
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
    rf->reclaims++;
    int n = 0, to = 0;
    for (int op = 0; op < g->nops; op++) {
        double rate = op_move(rf, op, &to);
        if (rate > 0) rf->hrate[n] = rate, rf->hop[n++] = op;
    }
    /* heapify; the order (rate, then op) is total, so the pops come out the same as after
     * pushing one by one */
    for (int i = n / 2 - 1; i >= 0; i--)
        sift_down(rf, n, i, rf->hrate[i], rf->hop[i]);
    /* The top is recomputed where it stands and replaced by its new entry (one sift instead of a
     * pop and a push): the heap holds the same entries as if it had been popped and pushed. */
    while (n > 0) {
        int op = rf->hop[0];
        double stored = rf->hrate[0];
        double rate = op_move(rf, op, &to);
        if (rate <= 0) {
            heap_pop(rf, &n);
            continue;
        }
        if (rate < stored && rival_leads(rf, n, rate, op)) {
            sift_down(rf, n, 0, rate, op);
            continue;
        }
        rf->cur[op] = to;
        rf->dur[op] = rf->ev->q[to];
        rf->moves++;
        propagate(rf, op);
        rate = op_move(rf, op, &to);
        if (rate > 0)
            sift_down(rf, n, 0, rate, op);
        else
            heap_pop(rf, &n);
    }
    return 0;
}

/* The two passes within budget on rf->cur / rf->dur (rf->earliest: their earliest times), the
 * result into out, *T and *energy_j. */
static int finish(prs__refine_refiner *rf, long budget, int *out, long *T, double *energy_j)
{
    int rc = two_passes(rf, budget, T);
    if (rc) return rc;
    memcpy(out, rf->cur, sizeof *out * (size_t)rf->g->nops);
    *energy_j = energy_of(rf, *T);
    return 0;
}

int prs__refine_plan(prs__refine_refiner *rf, const int *idx, const long *earliest, long budget,
                     int by_rate, int *out, long *T, double *energy_j)
{
    load(rf, idx);
    int rc = 0;
    const prs__graph_graph *g = rf->g;
    if (by_rate)
        rc = reclaim_state(rf, budget); /* leaves the earliest starts of its result */
    else if (earliest) /* an op's earliest start is the earliest time at its arc's tail */
        for (int op = 0; op < g->nops; op++)
            rf->earliest[op] = earliest[g->arcs[g->op_arc[op]].from];
    else
        forward(rf);
    return rc ? rc : finish(rf, budget, out, T, energy_j);
}

/* Give op the clock within limit that minimizes effective energy + price * q, the slower on a
 * tie; d: its relaxed duration, price: the relaxation's slope there. An option above the hull
 * never beats the hull at a price within the hull's slopes there, and along the hull the
 * priced cost falls up to the vertex at or after d: so that vertex wins when it fits, and
 * otherwise the best is the last vertex that fits or an option between it and the limit.
 * -1 (op unchanged) when nothing fits. */
static int choose_priced(prs__refine_refiner *rf, int op, long limit, long d, double price)
{
    int type = rf->g->op_type[op], lo = rf->hv_start[type], hi = rf->hv_start[type + 1];
    int j = lo;
    while (j + 1 < hi && rf->oq[rf->hv[j]] < d)
        j++;
    long q_at = rf->oq[rf->hv[j]]; /* the vertex at or after d */
    while (j > lo && rf->oq[rf->hv[j]] > limit)
        j--;
    int k = -1;
    double best = 0;
    for (int i = rf->hv[j]; i < rf->start[type + 1] && rf->oq[i] <= limit; i++) {
        double v = rf->cost[rf->order[i]] + price * (double)rf->oq[i];
        if (k < 0 || v <= best) best = v, k = rf->order[i];
        if (rf->oq[i] >= q_at) break;
    }
    if (k < 0) return -1;
    rf->cur[op] = k;
    rf->dur[op] = rf->ev->q[k];
    return 0;
}

/* Give op a clock within limit as mode says (price, d: as choose_priced). */
static int choose_as(prs__refine_refiner *rf, int op, long limit, prs__track_mode mode, long d,
                     double price)
{
    return mode == PRS__TRACK_CHEAPEST ? choose(rf, op, limit)
                                       : choose_priced(rf, op, limit, d, price);
}

/* Rounding forward along the relaxed schedule: one pass in topological order computes the
 * relaxed plan's earliest event times (into rf->latest, free until the passes) and, arc by
 * arc, gives each computation a clock that, started when the rounded plan's predecessors end,
 * ends by the relaxed event at its head. A rounded event never comes after the relaxed one
 * (induction over the order: the fastest clock is no slower than a relaxed duration, so some
 * clock fits), so the rounded plan ends within the relaxed critical path. */
static int round_along(prs__refine_refiner *rf, const long *relaxed, prs__track_mode mode,
                       const double *price)
{
    const int n = rf->g->nops, *ot = rf->otopo;
    long *rel = rf->rel, *es = rf->earliest, *dur = rf->dur;
    for (int i = 0; i < n; i++) {
        int op = ot[i];
        long r = 0, e = 0; /* the relaxed and the rounded plan's start */
        for (int k = rf->pred_start[op]; k < rf->pred_start[op + 1]; k++) {
            int u = rf->pred[k];
            if (rel[u] + relaxed[u] > r) r = rel[u] + relaxed[u];
            if (es[u] + dur[u] > e) e = es[u] + dur[u];
        }
        rel[op] = r;
        es[op] = e;
        if (choose_as(rf, op, r + relaxed[op] - e, mode, relaxed[op], price ? price[op] : 0))
            return PRS_EINVAL; /* faster than every clock */
    }
    return 0;
}
/* Rounding backward, the mirror image: in reverse topological order, the relaxed plan's latest
 * event times against the budget (into rf->earliest) and the rounded plan's latest times (into
 * rf->latest); each computation, ending when the rounded plan's successors start, takes a clock
 * that starts no earlier than the relaxed event at its tail. A rounded latest time is never
 * before the relaxed one, so the rounded plan starts at 0 or later and ends within the budget.
 * Leaves the rounded plan's earliest times in rf->earliest. */
static int round_back(prs__refine_refiner *rf, const long *relaxed, const double *price,
                      long budget)
{
    const int n = rf->g->nops, *ot = rf->otopo;
    long *rel = rf->rel, *lf = rf->latest, *dur = rf->dur;
    for (int i = n - 1; i >= 0; i--) {
        int op = ot[i];
        long r = budget, l = budget; /* the relaxed and the rounded plan's finish */
        for (int k = rf->succ_start[op]; k < rf->succ_start[op + 1]; k++) {
            int s = rf->succ[k];
            if (rel[s] - relaxed[s] < r) r = rel[s] - relaxed[s];
            if (lf[s] - dur[s] < l) l = lf[s] - dur[s];
        }
        rel[op] = r;
        lf[op] = l;
        if (choose_priced(rf, op, l - (r - relaxed[op]), relaxed[op], price[op]))
            return PRS_EINVAL; /* faster than every clock */
    }
    forward(rf);
    return 0;
}
int prs__refine_track(prs__refine_refiner *rf, const long *relaxed, prs__track_mode mode,
                      const double *price, long budget, int *out, long *T, double *energy_j)
{
    rf->tracks++;
    int rc = mode == PRS__TRACK_PRICED_BACK ? round_back(rf, relaxed, price, budget)
                                            : round_along(rf, relaxed, mode, price);
    return rc ? rc : finish(rf, budget, out, T, energy_j);
}

void prs__refine_count(const prs__refine_refiner *rf, prs_plan_stats *st)
{
    st->reclaims += rf->reclaims;
    st->reclaim_moves += rf->moves;
    st->tracks += rf->tracks;
}
