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
 * planner iterations differ in a few arcs, so callers start from the previous flow and the solve
 * needs a few augmentations instead of a full max flow: either by giving every arc its starting
 * flow again (prs__flow_again, prs__flow_set), or, cheaper, by keeping the network as the last
 * solve left it, residual supplies included, and changing the bounds of the arcs whose bounds
 * changed (prs__flow_rebound): the other arcs and nodes are then not touched at all.
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
    double *lb;             /* per original arc pair: its lower bound */
    unsigned char *inf_arc; /* per original arc pair: ub infinite */
    int nbase; /* arcs' edges before the solver's node-supply edges; -1: not solved yet */
    int fresh; /* the supply edges are to be filled from excess[] (no solve since the arcs' flows
                * were last set in full) */
    /* Adjacency in one array (slot k: edge adj[k] to node adj_to[k]). Every node v other than
     * s and t has two supply edge pairs, numbered from nbase: s -> v (edge supply_edge(n, v))
     * and v -> t (the next pair). Node v's arcs' edges are slots [first[v], last[v]), last
     * added first; before them, from beg[v], its v -> t supply edge, and for s its s -> v
     * supply edges with residual capacity, by node descending (in_s[v]: v is listed; pend: the
     * nodes given supply since the list was last put in order). The supply edges' reverses lead
     * into s or out of t, which no search needs, and are not listed. */
    int *adj, *adj_to, *beg, *first, *last;
    unsigned char *in_s;
    int *pend, npend;
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
    n->in_s = malloc(V);
    n->pend = malloc(V * sizeof *n->pend);
    n->excess = malloc(V * sizeof *n->excess);
    n->to = malloc(E * sizeof *n->to);
    n->cap = malloc(E * sizeof *n->cap);
    n->inf_arc = malloc(E / 2 + 1);
    n->lb = malloc((E / 2 + 1) * sizeof *n->lb);
    if (!n->adj || !n->adj_to || !n->beg || !n->first || !n->last || !n->level || !n->it ||
        !n->queue || !n->stack_e || !n->in_s || !n->pend || !n->excess || !n->to || !n->cap ||
        !n->inf_arc || !n->lb) {
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
    free(n->in_s);
    free(n->pend);
    free(n->excess);
    free(n->to);
    free(n->cap);
    free(n->inf_arc);
    free(n->lb);
    free(n);
}

void prs__flow_reset(prs__flow_net *n, int nnodes, int s, int t)
{
    n->nnodes = nnodes;
    n->s = s;
    n->t = t;
    n->nedges = 0;
    n->nbase = -1;
    n->fresh = 1;
    for (int v = 0; v < nnodes + 2; v++)
        n->excess[v] = 0;
}

int prs__flow_again(prs__flow_net *n)
{
    if (n->nbase < 0) return -1;
    n->fresh = 1;
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
    n->lb[e / 2] = 0;
    n->nedges += 2;
    return e;
}

/* The s -> v supply edge of node v (v -> t is the pair after it). */
static int supply_edge(const prs__flow_net *n, int v)
{
    return n->nbase + 4 * v;
}

/* Lay out the arcs' edges (the first n->nbase) per node, last added first, and add every
 * node's supply edges (empty) in front of them. */
static void lay_out(prs__flow_net *n)
{
    int V = n->nnodes, k = 0;
    for (int v = 0; v < V; v++)
        n->last[v] = 0;
    for (int e = 0; e < n->nbase; e++)
        n->last[n->to[e ^ 1]]++; /* degree of e's tail */
    for (int v = 0; v < V; v++) {
        k += v == n->s ? V : v == n->t ? 0 : 1;
        n->first[v] = n->beg[v] = k;
        k += n->last[v];
        n->last[v] = n->first[v]; /* filled below */
    }
    for (int e = n->nbase - 1; e >= 0; e--) {
        int u = n->to[e ^ 1];
        n->adj[n->last[u]] = e;
        n->adj_to[n->last[u]++] = n->to[e];
    }
    for (int v = 0; v < V; v++) {
        int e = add_edge(n, n->s, v, 0) + 2;
        add_edge(n, v, n->t, 0);
        if (v == n->s || v == n->t) continue;
        k = --n->beg[v];
        n->adj[k] = e, n->adj_to[k] = n->t;
    }
}

/* List s -> v at the front of s's list. */
static void list_source(prs__flow_net *n, int v)
{
    int k = --n->beg[n->s];
    n->adj[k] = supply_edge(n, v);
    n->adj_to[k] = v;
}

/* Put s's list in order: the listed nodes that still have supply and the pending ones, by node
 * descending. */
static void order_sources(prs__flow_net *n)
{
    int *old = n->queue, nold = 0, s = n->s, *pend = n->pend;
    for (int i = 1; i < n->npend; i++) /* pending nodes, ascending */
        for (int j = i; j > 0 && pend[j - 1] > pend[j]; j--) {
            int x = pend[j];
            pend[j] = pend[j - 1];
            pend[j - 1] = x;
        }
    for (int k = n->first[s] - 1; k >= n->beg[s]; k--) { /* listed, ascending from the back */
        int v = n->adj_to[k];
        if (n->cap[n->adj[k]] > AUG_EPS)
            old[nold++] = v;
        else
            n->in_s[v] = 0;
    }
    n->beg[s] = n->first[s];
    int i = 0, j = 0;
    while (i < nold || j < n->npend) /* merge, ascending, each put in front */
        list_source(n, j == n->npend || (i < nold && old[i] < pend[j]) ? old[i++] : pend[j++]);
    n->npend = 0;
}

/* Node v's supply (> 0: from s, < 0: to t) changes by d. */
static void shift_supply(prs__flow_net *n, int v, double d)
{
    if (v == n->s || v == n->t) return;
    int e = supply_edge(n, v);
    double x = n->cap[e] - n->cap[e + 2] + d;
    n->cap[e] = x > 0 ? x : 0;
    n->cap[e + 2] = x < 0 ? -x : 0;
    if (n->cap[e] > AUG_EPS && !n->in_s[v]) {
        n->in_s[v] = 1;
        n->pend[n->npend++] = v;
    }
}

/* Edge pair e's residual capacities and inf flag for bounds [lb, ub] at a flow (clamped into
 * them); returns the flow. */
static double set_caps(prs__flow_net *n, int e, double lb, double ub, double flow)
{
    if (!(flow >= lb)) flow = lb; /* also catches NaN */
    if (flow > ub) flow = ub;
    n->cap[e] = ub - flow;
    n->cap[e + 1] = flow - lb;
    n->inf_arc[e / 2] = isinf(ub) != 0;
    n->lb[e / 2] = lb;
    return flow;
}

/* set_caps, and the flow's share of its ends' excess. */
static void set_pair(prs__flow_net *n, int e, double lb, double ub, double flow)
{
    flow = set_caps(n, e, lb, ub, flow);
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

void prs__flow_rebound(prs__flow_net *n, int arc, double lb, double ub)
{
    int e = 2 * arc;
    double old = n->lb[arc] + n->cap[e + 1];
    double d = set_caps(n, e, lb, ub, old) - old;
    if (d != 0) {
        shift_supply(n, n->to[e], d);
        shift_supply(n, n->to[e + 1], -d);
    }
}

double prs__flow_flow(const prs__flow_net *n, int arc)
{
    return n->lb[arc] + n->cap[2 * arc + 1];
}

/* Levels of the nodes reachable from s through residual capacity > AUG_EPS (-1 elsewhere);
 * whether t is one of them; it[v] = beg[v] for each of them. n->thin notes a node first
 * reached through a residual of at most n->cut_eps: when there is none, the reachable set is
 * also the one through residuals above cut_eps (every node has a path of those), so the final
 * search doubles as the cut's. The search stops when it reaches t (then only the levels below
 * t's are complete). */
static int bfs_levels(prs__flow_net *n, int s, int t, int nv)
{
    for (int v = 0; v < nv; v++)
        n->level[v] = -1;
    int head = 0, tail = 0;
    n->queue[tail++] = s;
    n->level[s] = 0;
    n->it[s] = n->beg[s];
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
                n->it[w] = n->beg[w];
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
    while (bfs_levels(n, s, t, nv)) { /* it[v] = beg[v] for every node found */
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

/* Every node's supply edges from excess[] (s -> v for excess > 0, v -> t for excess < 0), none
 * of their flow pushed yet. */
static void fill_supplies(prs__flow_net *n)
{
    n->beg[n->s] = n->first[n->s];
    n->npend = 0;
    for (int v = 0; v < n->nnodes; v++) {
        int e = supply_edge(n, v);
        double x = v == n->s || v == n->t ? 0 : n->excess[v];
        n->cap[e] = x > 0 ? x : 0;
        n->cap[e + 2] = x < 0 ? -x : 0;
        n->cap[e + 1] = n->cap[e + 3] = 0;
        n->in_s[v] = n->cap[e] > AUG_EPS;
        if (n->in_s[v]) list_source(n, v);
    }
}

/* The cut's value less the flow the solve pushes: the arcs' flow into t less their flow out of
 * it, and the deficits (supplies to t) of the other nodes. */
static double cut_offset(const prs__flow_net *n)
{
    double value = 0;
    for (int k = n->first[n->t]; k < n->last[n->t]; k++) {
        int e = n->adj[k];
        value += e & 1 ? n->lb[e / 2] + n->cap[e] : -(n->lb[e / 2] + n->cap[e + 1]);
    }
    for (int v = 0; v < n->nnodes; v++)
        value -= n->cap[supply_edge(n, v) + 2];
    return value;
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
     * After a solve, the supply arcs' residuals are the excesses of its final flow, so a solve
     * that follows prs__flow_rebound starts from them as they are. The cut's value is the flow
     * pushed plus cut_offset(). */
    int V = n->nnodes;
    if (n->nbase < 0) { /* first solve of these arcs: lay them out for later solves */
        n->nbase = n->nedges;
        lay_out(n);
    }
    if (n->fresh)
        fill_supplies(n);
    else
        order_sources(n);
    n->fresh = 0;
    double value = cut_offset(n);
    n->cut_eps = eps;
    double flow = dinic(n, n->s, n->t, V);
    if (isinf(flow)) return PRS_ERANGE; /* no finite cut */
    /* a negative value means no feasible flow meets the lower bounds */
    if (flow + value < -PRS_FLOW_INFEASIBLE_TOL) return PRS_EINFEASIBLE;
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
