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
    int *head, *next, *to;
    double *cap;
    double *excess;
    unsigned char *inf_arc; /* per original arc pair: ub infinite */
    int nbase;      /* arcs' edges before the solver's node-excess edges; -1: not solved yet */
    int *head_base; /* head[] as the arcs alone left it (prs__flow_again) */
    int *level, *it, *queue, *stack_e;
    double cut_eps; /* the cut's residual threshold (prs__flow_min_cut's eps) */
    int thin;       /* the last level search discovered a node through a residual <= cut_eps */
};

prs__flow_net *prs__flow_new(int max_nodes, int max_arcs)
{
    prs__flow_net *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->nbase = -1; /* no solve to repeat (prs__flow_again) */
    n->max_nodes = max_nodes + 2;
    n->max_edges = 2 * (max_arcs + 2 * max_nodes + 1);
    size_t V = (size_t)n->max_nodes, E = (size_t)n->max_edges;
    n->head = malloc(V * sizeof *n->head);
    n->head_base = malloc(V * sizeof *n->head_base);
    n->level = malloc(V * sizeof *n->level);
    n->it = malloc(V * sizeof *n->it);
    n->queue = malloc(V * sizeof *n->queue);
    n->stack_e = malloc(V * sizeof *n->stack_e);
    n->excess = malloc(V * sizeof *n->excess);
    n->next = malloc(E * sizeof *n->next);
    n->to = malloc(E * sizeof *n->to);
    n->cap = malloc(E * sizeof *n->cap);
    n->inf_arc = malloc(E / 2 + 1);
    if (!n->head || !n->head_base || !n->level || !n->it || !n->queue || !n->stack_e ||
        !n->excess || !n->next || !n->to || !n->cap || !n->inf_arc) {
        prs__flow_free(n);
        return NULL;
    }
    return n;
}

void prs__flow_free(prs__flow_net *n)
{
    if (!n) return;
    free(n->head);
    free(n->head_base);
    free(n->level);
    free(n->it);
    free(n->queue);
    free(n->stack_e);
    free(n->excess);
    free(n->next);
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
    for (int v = 0; v < nnodes + 2; v++) {
        n->head[v] = -1;
        n->excess[v] = 0;
    }
}

int prs__flow_again(prs__flow_net *n)
{
    if (n->nbase < 0) return -1;
    n->nedges = n->nbase;
    memcpy(n->head, n->head_base, sizeof *n->head * (size_t)(n->nnodes + 2));
    for (int v = 0; v < n->nnodes + 2; v++)
        n->excess[v] = 0;
    return 0;
}

static int add_edge(prs__flow_net *n, int u, int v, double cap)
{
    int e = n->nedges;
    n->to[e] = v, n->cap[e] = cap, n->next[e] = n->head[u], n->head[u] = e;
    n->to[e + 1] = u, n->cap[e + 1] = 0, n->next[e + 1] = n->head[v], n->head[v] = e + 1;
    n->inf_arc[e / 2] = 0;
    n->nedges += 2;
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
    while (head < tail) {
        int v = n->queue[head++];
        for (int e = n->head[v]; e >= 0; e = n->next[e])
            if (n->cap[e] > AUG_EPS && n->level[n->to[e]] < 0) {
                if (n->cap[e] <= n->cut_eps) n->thin = 1;
                n->level[n->to[e]] = n->level[v] + 1;
                /* every node nearer than t has its level now; the rest cannot lie on a
                 * shortest path to t */
                if (n->to[e] == t) return 1;
                n->queue[tail++] = n->to[e];
            }
    }
    return 0;
}

/* Dinic's algorithm from s to t over nodes 0..nv-1; returns the flow pushed, INFINITY as soon
 * as a path of infinite residual capacity (an s-t path of infinite arcs) is found. */
static double dinic(prs__flow_net *n, int s, int t, int nv)
{
    double total = 0;
    while (bfs_levels(n, s, t, nv)) {
        for (int v = 0; v < nv; v++)
            n->it[v] = n->head[v];
        int depth = 0, v = s;
        for (;;) {
            if (v == t) {
                double push = INFINITY;
                for (int i = 0; i < depth; i++)
                    if (n->cap[n->stack_e[i]] < push) push = n->cap[n->stack_e[i]];
                if (isinf(push)) return INFINITY;
                int back = depth;
                for (int i = depth - 1; i >= 0; i--) {
                    int e = n->stack_e[i];
                    n->cap[e] -= push;
                    n->cap[e ^ 1] += push;
                    if (n->cap[e] <= AUG_EPS) back = i;
                }
                total += push;
                depth = back;
                v = depth ? n->to[n->stack_e[depth - 1]] : s;
                continue;
            }
            int e = n->it[v];
            while (e >= 0 && !(n->cap[e] > AUG_EPS && n->level[n->to[e]] == n->level[v] + 1))
                e = n->next[e];
            n->it[v] = e;
            if (e >= 0) {
                n->stack_e[depth++] = e;
                v = n->to[e];
            } else {
                if (v == s) break;
                n->level[v] = -1; /* dead end */
                depth--;
                v = depth ? n->to[n->stack_e[depth - 1]] : s;
                n->it[v] = n->next[n->it[v]];
            }
        }
    }
    return total;
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
    if (n->nbase < 0) { /* first solve of these arcs: keep their lists for prs__flow_again */
        n->nbase = n->nedges;
        memcpy(n->head_base, n->head, sizeof *n->head * (size_t)(V + 2));
    }
    int *to_sink = n->it; /* scratch: node -> its v -> t helper edge, or -1 */
    double value = n->excess[n->t];
    for (int v = 0; v < V; v++) {
        to_sink[v] = -1;
        if (v == n->s || v == n->t) continue;
        if (n->excess[v] > 0)
            add_edge(n, n->s, v, n->excess[v]);
        else if (n->excess[v] < 0) {
            to_sink[v] = add_edge(n, v, n->t, -n->excess[v]);
            value += n->excess[v];
        }
    }
    /* Cheap head start: most excess is next to a deficit one infinite arc away (the end of one
     * computation feeds the start of the next); push it along s -> v -> w -> t directly. */
    double flow = 0;
    for (int e = n->head[n->s]; e >= 0; e = n->next[e]) {
        if (e & 1) continue;
        int v = n->to[e];
        for (int a = n->head[v]; a >= 0 && n->cap[e] > AUG_EPS; a = n->next[a]) {
            int w = n->to[a], h = to_sink[w];
            if ((a & 1) || !n->inf_arc[a / 2] || h < 0 || n->cap[h] <= AUG_EPS) continue;
            double x = n->cap[e] < n->cap[h] ? n->cap[e] : n->cap[h];
            n->cap[e] -= x, n->cap[e ^ 1] += x;
            n->cap[a] -= x, n->cap[a ^ 1] += x;
            n->cap[h] -= x, n->cap[h ^ 1] += x;
            flow += x;
        }
    }
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
    for (int v = 0; v < V; v++)
        side[v] = 0;
    int head = 0, tail = 0;
    n->queue[tail++] = n->s;
    side[n->s] = 1;
    while (head < tail) {
        int v = n->queue[head++];
        for (int e = n->head[v]; e >= 0; e = n->next[e])
            if (n->cap[e] > eps && !side[n->to[e]]) {
                side[n->to[e]] = 1;
                n->queue[tail++] = n->to[e];
            }
    }
    return 0;
}
