/* Maximum flow with lower bounds and the source-minimal minimum cut (docs/planner.md).
 *
 * Each Phillips-Dessouky step asks for the cheapest way to shorten every critical path by one
 * unit: a minimum s-t cut where crossing an arc forwards costs its upper bound and crossing it
 * backwards refunds its lower bound. The reference finds it in two max-flow phases (a feasible
 * flow meeting the lower bounds via super source and sink, then a max flow from it). The cut
 * function itself is an ordinary cut function in disguise: with excess(v) = lower bounds in -
 * lower bounds out, cut(S) = sum over forward arcs of (ub - lb) + sum over v on the sink side of
 * excess(v). So a single max flow on capacities ub - lb plus source -> v arcs of capacity
 * excess(v) > 0 and v -> sink arcs of capacity -excess(v) has exactly the same minimisers. The
 * nodes reachable from the source in its final residual graph are the unique source-minimal
 * minimum cut, the set the reference's procedure finds too. Dinic's algorithm, with an
 * iterative depth-first search (no recursion depth limit on long pipelines). Consecutive
 * planner iterations differ in a few arcs, so callers pass the previous flow as a starting point
 * and the solve needs a few augmentations instead of a full max flow.
 *
 * Infinity is real (IEEE inf), not the reference's 10000 stand-in: an s-t path made only of
 * infinite-capacity arcs is detected up front and reported as PRS_ERANGE (no finite cut). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

#define AUG_EPS PRS_FLOW_AUG_EPS /* smallest residual worth augmenting through */

struct prs__flow_net {
    int max_nodes, max_edges;
    int nnodes, s, t, nedges;
    int *to; /* per edge; edge e ^ 1 is e's reverse */
    double *cap;
    double *excess;
    unsigned char *inf_arc; /* per original arc pair: ub infinite */
    int nbase; /* arcs' edges before the solver's node-excess edges; -1: not solved yet */
    /* Adjacency in one array (slot k: edge adj[k] to node adj_to[k]), in the order of a list
     * that each added edge joins at the front: per node, the node-excess edges of this solve
     * (last added first), then the arcs' edges (last added first). Node v's arcs' edges are
     * slots [first[v], last[v]); before them lie slots reserved for its node-excess edges (one
     * per node, every other node's for s and t), of which this solve uses [beg[v], first[v]). */
    int *adj, *adj_to, *beg, *first, *last;
    int *level, *it, *queue, *stack_e;
    double cut_eps; /* the cut's residual threshold (prs__flow_min_cut's eps) */
    int thin;       /* the last level search discovered a node through a residual <= cut_eps */
    long level_searches, level_nodes, cut_searches, cut_nodes; /* prs__flow_count */
};

prs__flow_net *prs__flow_new(int max_nodes, int max_arcs)
{
    prs__flow_net *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->nbase = -1; /* no solve to repeat (prs__flow_again) */
    n->max_nodes = max_nodes + 2;
    n->max_edges = 2 * (max_arcs + 2 * max_nodes + 1);
    size_t V = (size_t)n->max_nodes, E = (size_t)n->max_edges;
    size_t slots = E + 3 * V; /* every edge, and the node-excess reservations */
    n->adj = malloc(slots * sizeof *n->adj);
    n->adj_to = malloc(slots * sizeof *n->adj_to);
    n->beg = malloc(V * sizeof *n->beg);
    n->first = malloc(V * sizeof *n->first);
    n->last = malloc(V * sizeof *n->last);
    n->level = malloc(V * sizeof *n->level);
    n->it = malloc(V * sizeof *n->it);
    n->queue = malloc(V * sizeof *n->queue);
    n->stack_e = malloc(V * sizeof *n->stack_e);
    n->excess = malloc(V * sizeof *n->excess);
    n->to = malloc(E * sizeof *n->to);
    n->cap = malloc(E * sizeof *n->cap);
    n->inf_arc = malloc(E / 2 + 1);
    if (!n->adj || !n->adj_to || !n->beg || !n->first || !n->last || !n->level || !n->it ||
        !n->queue || !n->stack_e || !n->excess || !n->to || !n->cap || !n->inf_arc) {
        prs__flow_free(n);
        return NULL;
    }
    return n;
}

void prs__flow_free(prs__flow_net *n)
{
    if (!n) return;
    free(n->adj);
    free(n->adj_to);
    free(n->beg);
    free(n->first);
    free(n->last);
    free(n->level);
    free(n->it);
    free(n->queue);
    free(n->stack_e);
    free(n->excess);
    free(n->to);
    free(n->cap);
    free(n->inf_arc);
    free(n);
}

void prs__flow_reset(prs__flow_net *n, int nnodes, int s, int t)
{
    n->nnodes = nnodes;
    n->s = s;
    n->t = t;
    n->nedges = 0;
    n->nbase = -1;
    for (int v = 0; v < nnodes + 2; v++)
        n->excess[v] = 0;
}

int prs__flow_again(prs__flow_net *n)
{
    if (n->nbase < 0) return -1;
    n->nedges = n->nbase;
    for (int v = 0; v < n->nnodes + 2; v++)
        n->excess[v] = 0;
    return 0;
}

static int add_edge(prs__flow_net *n, int u, int v, double cap)
{
    int e = n->nedges;
    n->to[e] = v, n->cap[e] = cap;
    n->to[e + 1] = u, n->cap[e + 1] = 0;
    n->inf_arc[e / 2] = 0;
    n->nedges += 2;
    return e;
}

/* Lay out the arcs' edges (the first n->nbase) per node, last added first, after each node's
 * reserved node-excess slots. */
static void lay_out(prs__flow_net *n)
{
    int V = n->nnodes, k = 0;
    for (int v = 0; v < V; v++)
        n->last[v] = 0;
    for (int e = 0; e < n->nbase; e++)
        n->last[n->to[e ^ 1]]++; /* degree of e's tail */
    for (int v = 0; v < V; v++) {
        k += v == n->s || v == n->t ? V : 1;
        n->first[v] = k;
        k += n->last[v];
        n->last[v] = n->first[v]; /* filled below */
    }
    for (int e = n->nbase - 1; e >= 0; e--) {
        int u = n->to[e ^ 1];
        n->adj[n->last[u]] = e;
        n->adj_to[n->last[u]++] = n->to[e];
    }
}

/* Add a node-excess edge u -> v with capacity cap; it and its reverse go in front of their
 * tails' lists. Returns its id. */
static int add_excess_edge(prs__flow_net *n, int u, int v, double cap)
{
    int e = add_edge(n, u, v, cap);
    int k = --n->beg[u];
    n->adj[k] = e, n->adj_to[k] = v;
    k = --n->beg[v];
    n->adj[k] = e + 1, n->adj_to[k] = u;
    return e;
}

/* Edge pair e's residual capacities and inf flag for bounds [lb, ub] at a starting flow, and the
 * flow's share of its ends' excess. */
static void set_pair(prs__flow_net *n, int e, double lb, double ub, double flow)
{
    if (!(flow >= lb)) flow = lb; /* also catches NaN */
    if (flow > ub) flow = ub;
    n->cap[e] = ub - flow;
    n->cap[e + 1] = flow - lb;
    n->inf_arc[e / 2] = isinf(ub) != 0;
    n->excess[n->to[e]] += flow;
    n->excess[n->to[e + 1]] -= flow;
}

int prs__flow_add(prs__flow_net *n, int from, int to, double lb, double ub, double flow)
{
    int e = add_edge(n, from, to, 0);
    set_pair(n, e, lb, ub, flow);
    return e / 2;
}

void prs__flow_set(prs__flow_net *n, int arc, double lb, double ub, double flow)
{
    set_pair(n, 2 * arc, lb, ub, flow);
}

double prs__flow_flow(const prs__flow_net *n, int arc, double lb)
{
    return lb + n->cap[2 * arc + 1];
}

/* Levels of the nodes reachable from s through residual capacity > AUG_EPS (-1 elsewhere);
 * whether t is one of them. n->thin notes a node first reached through a residual of at most
 * n->cut_eps: when there is none, the reachable set is also the one through residuals above
 * cut_eps (every node has a path of those), so the final search doubles as the cut's. The
 * search stops when it reaches t (then only the levels below t's are complete). */
static int bfs_levels(prs__flow_net *n, int s, int t, int nv)
{
    for (int v = 0; v < nv; v++)
        n->level[v] = -1;
    int head = 0, tail = 0;
    n->queue[tail++] = s;
    n->level[s] = 0;
    n->thin = 0;
    n->level_searches++;
    while (head < tail) {
        int v = n->queue[head++];
        n->level_nodes++;
        for (int k = n->beg[v]; k < n->last[v]; k++) {
            double c = n->cap[n->adj[k]];
            int w = n->adj_to[k];
            if (c > AUG_EPS && n->level[w] < 0) {
                if (c <= n->cut_eps) n->thin = 1;
                n->level[w] = n->level[v] + 1;
                /* every node nearer than t has its level now; the rest cannot lie on a
                 * shortest path to t */
                if (w == t) return 1;
                n->queue[tail++] = w;
            }
        }
    }
    return 0;
}

/* Push the bottleneck of the path on the stack (depth edges) to t; returns it (INFINITY when
 * every edge is infinite: nothing pushed) and the depth to resume from (*depth: the first
 * edge the push saturated). */
static double augment(prs__flow_net *n, int *depth)
{
    double push = INFINITY;
    for (int i = 0; i < *depth; i++)
        if (n->cap[n->stack_e[i]] < push) push = n->cap[n->stack_e[i]];
    if (isinf(push)) return push;
    int back = *depth;
    for (int i = *depth - 1; i >= 0; i--) {
        int e = n->stack_e[i];
        n->cap[e] -= push;
        n->cap[e ^ 1] += push;
        if (n->cap[e] <= AUG_EPS) back = i;
    }
    *depth = back;
    return push;
}

/* Dinic's algorithm from s to t over nodes 0..nv-1; returns the flow pushed, INFINITY as soon
 * as a path of infinite residual capacity (an s-t path of infinite arcs) is found. */
static double dinic(prs__flow_net *n, int s, int t, int nv)
{
    double total = 0;
    while (bfs_levels(n, s, t, nv)) {
        for (int v = 0; v < nv; v++)
            n->it[v] = n->beg[v];
        int depth = 0, v = s;
        for (;;) {
            if (v == t) {
                double push = augment(n, &depth);
                if (isinf(push)) return INFINITY;
                total += push;
                v = depth ? n->to[n->stack_e[depth - 1]] : s;
                continue;
            }
            int k = n->it[v], end = n->last[v], next = n->level[v] + 1;
            while (k < end && !(n->cap[n->adj[k]] > AUG_EPS && n->level[n->adj_to[k]] == next))
                k++;
            n->it[v] = k;
            if (k < end) {
                n->stack_e[depth++] = n->adj[k];
                v = n->adj_to[k];
            } else {
                if (v == s) break;
                n->level[v] = -1; /* dead end */
                depth--;
                v = depth ? n->to[n->stack_e[depth - 1]] : s;
                n->it[v]++;
            }
        }
    }
    return total;
}

/* The node-excess edges of this solve (s -> v for excess > 0, v -> t for excess < 0), each
 * node's v -> t edge into to_sink (-1 for none); the negative excesses are added to *value. */
static void excess_edges(prs__flow_net *n, int *to_sink, double *value)
{
    int V = n->nnodes;
    for (int v = 0; v < V; v++)
        n->beg[v] = n->first[v];
    for (int v = 0; v < V; v++) {
        to_sink[v] = -1;
        if (v == n->s || v == n->t) continue;
        if (n->excess[v] > 0)
            add_excess_edge(n, n->s, v, n->excess[v]);
        else if (n->excess[v] < 0) {
            to_sink[v] = add_excess_edge(n, v, n->t, -n->excess[v]);
            *value += n->excess[v];
        }
    }
}

/* Cheap head start: most excess is next to a deficit one infinite arc away (the end of one
 * computation feeds the start of the next); push it along s -> v -> w -> t directly. Returns
 * the flow pushed. */
static double head_start(prs__flow_net *n, const int *to_sink)
{
    double flow = 0;
    for (int i = n->beg[n->s]; i < n->last[n->s]; i++) {
        int e = n->adj[i];
        if (e & 1) continue;
        int v = n->to[e];
        for (int j = n->beg[v]; j < n->last[v] && n->cap[e] > AUG_EPS; j++) {
            int a = n->adj[j], h = to_sink[n->adj_to[j]];
            if ((a & 1) || !n->inf_arc[a / 2] || h < 0 || n->cap[h] <= AUG_EPS) continue;
            double x = n->cap[e] < n->cap[h] ? n->cap[e] : n->cap[h];
            n->cap[e] -= x, n->cap[e ^ 1] += x;
            n->cap[a] -= x, n->cap[a ^ 1] += x;
            n->cap[h] -= x, n->cap[h ^ 1] += x;
            flow += x;
        }
    }
    return flow;
}

/* side[v] = 1 for the nodes reachable from s through residual capacity > eps. */
static void reachable(prs__flow_net *n, double eps, unsigned char *side)
{
    for (int v = 0; v < n->nnodes; v++)
        side[v] = 0;
    int head = 0, tail = 0;
    n->queue[tail++] = n->s;
    side[n->s] = 1;
    n->cut_searches++;
    while (head < tail) {
        int v = n->queue[head++];
        n->cut_nodes++;
        for (int k = n->beg[v]; k < n->last[v]; k++)
            if (n->cap[n->adj[k]] > eps && !side[n->adj_to[k]]) {
                side[n->adj_to[k]] = 1;
                n->queue[tail++] = n->adj_to[k];
            }
    }
}

int prs__flow_min_cut(prs__flow_net *n, double eps, unsigned char *side)
{
    /* cut(S) = sum_fw ub - sum_bw lb = sum_fw (ub - lb) + sum_{v in T} excess(v) + const, so
     * one ordinary max flow with arcs s -> v (excess > 0) and v -> t (excess < 0) has the same
     * minimisers as the lower-bounded problem: no separate feasibility phase is needed. The same
     * holds with any starting flow f0 in [lb, ub] in place of lb (residuals ub - f0 forwards,
     * f0 - lb backwards, excess from f0), which lets a caller warm-start from the last solve.
     * value: the cut's value = flow + excess(t) + the negative excesses outside s and t. */
    int V = n->nnodes;
    if (n->nbase < 0) { /* first solve of these arcs: lay them out for prs__flow_again */
        n->nbase = n->nedges;
        lay_out(n);
    }
    int *to_sink = n->it; /* scratch: node -> its v -> t helper edge, or -1 */
    double value = n->excess[n->t];
    excess_edges(n, to_sink, &value);
    double flow = head_start(n, to_sink);
    n->cut_eps = eps;
    double more = dinic(n, n->s, n->t, V);
    if (isinf(more)) return PRS_ERANGE; /* no finite cut */
    /* a negative value means no feasible flow meets the lower bounds */
    if (flow + more + value < -PRS_FLOW_INFEASIBLE_TOL) return PRS_EINFEASIBLE;
    if (!n->thin && eps >= AUG_EPS) { /* the last level search reached the cut's source side */
        for (int v = 0; v < V; v++)
            side[v] = n->level[v] >= 0;
        return 0;
    }
    reachable(n, eps, side);
    return 0;
}

void prs__flow_count(const prs__flow_net *n, prs_plan_stats *st)
{
    st->level_searches = n->level_searches;
    st->level_nodes = n->level_nodes;
    st->cut_searches = n->cut_searches;
    st->cut_nodes = n->cut_nodes;
}
