/* Maximum flow with lower bounds and the source-minimal minimum cut (PLANNER.md §8.2).
 *
 * Each Phillips-Dessouky step asks for the cheapest way to shorten every critical path by one
 * unit: a minimum s-t cut where crossing an arc forwards costs its upper bound and crossing it
 * backwards refunds its lower bound. We solve it as the reference does, in two phases on one
 * residual network: (1) a feasible circulation meeting the lower bounds (super source and sink on
 * each node's net demand, plus an infinite sink->source arc), (2) from that flow, a maximum
 * source->sink flow. The nodes reachable from the source in the final residual graph form the
 * unique source-minimal minimum cut, whatever max-flow algorithm found the flow; we use Dinic
 * with an iterative depth-first search (no recursion depth limit on long pipelines).
 *
 * Infinity is real (IEEE inf), not the reference's 10000 stand-in: an s-t path made only of
 * infinite-capacity arcs is detected up front and reported as PRS_ERANGE (no finite cut). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

#define AUG_EPS 1e-12 /* smallest residual worth augmenting through */

struct prsF_net {
    int max_nodes, max_edges;
    int nnodes, s, t, nedges;
    int *head, *next, *to;
    double *cap;
    double *excess;
    unsigned char *inf_arc; /* per original arc pair: ub infinite */
    int *level, *it, *queue, *stack_e;
};

prsF_net *prsF_new(int max_nodes, int max_arcs)
{
    prsF_net *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->max_nodes = max_nodes + 2;
    n->max_edges = 2 * (max_arcs + 2 * max_nodes + 1);
    size_t V = (size_t)n->max_nodes, E = (size_t)n->max_edges;
    n->head = malloc(V * sizeof *n->head);
    n->level = malloc(V * sizeof *n->level);
    n->it = malloc(V * sizeof *n->it);
    n->queue = malloc(V * sizeof *n->queue);
    n->stack_e = malloc(V * sizeof *n->stack_e);
    n->excess = malloc(V * sizeof *n->excess);
    n->next = malloc(E * sizeof *n->next);
    n->to = malloc(E * sizeof *n->to);
    n->cap = malloc(E * sizeof *n->cap);
    n->inf_arc = malloc(E / 2 + 1);
    if (!n->head || !n->level || !n->it || !n->queue || !n->stack_e || !n->excess || !n->next ||
        !n->to || !n->cap || !n->inf_arc) {
        prsF_free(n);
        return NULL;
    }
    return n;
}

void prsF_free(prsF_net *n)
{
    if (!n) return;
    free(n->head);
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

void prsF_reset(prsF_net *n, int nnodes, int s, int t)
{
    n->nnodes = nnodes;
    n->s = s;
    n->t = t;
    n->nedges = 0;
    for (int v = 0; v < nnodes + 2; v++) {
        n->head[v] = -1;
        n->excess[v] = 0;
    }
}

static int add_edge(prsF_net *n, int u, int v, double cap)
{
    int e = n->nedges;
    n->to[e] = v, n->cap[e] = cap, n->next[e] = n->head[u], n->head[u] = e;
    n->to[e + 1] = u, n->cap[e + 1] = 0, n->next[e + 1] = n->head[v], n->head[v] = e + 1;
    n->nedges += 2;
    return e;
}

int prsF_add(prsF_net *n, int from, int to, double lb, double ub)
{
    int e = add_edge(n, from, to, ub - lb);
    n->inf_arc[e / 2] = isinf(ub) != 0;
    n->excess[to] += lb;
    n->excess[from] -= lb;
    return e / 2;
}

static int bfs_levels(prsF_net *n, int s, int t, int nv)
{
    for (int v = 0; v < nv; v++) n->level[v] = -1;
    int head = 0, tail = 0;
    n->queue[tail++] = s;
    n->level[s] = 0;
    while (head < tail) {
        int v = n->queue[head++];
        for (int e = n->head[v]; e >= 0; e = n->next[e])
            if (n->cap[e] > AUG_EPS && n->level[n->to[e]] < 0) {
                n->level[n->to[e]] = n->level[v] + 1;
                n->queue[tail++] = n->to[e];
            }
    }
    return n->level[t] >= 0;
}

/* Dinic's algorithm from s to t over nodes 0..nv-1; returns the flow pushed. */
static double dinic(prsF_net *n, int s, int t, int nv)
{
    double total = 0;
    while (bfs_levels(n, s, t, nv)) {
        for (int v = 0; v < nv; v++) n->it[v] = n->head[v];
        int depth = 0, v = s;
        for (;;) {
            if (v == t) {
                double push = INFINITY;
                for (int i = 0; i < depth; i++)
                    if (n->cap[n->stack_e[i]] < push) push = n->cap[n->stack_e[i]];
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

/* Is there an s-t path of infinite-capacity original arcs? */
static int infinite_path(prsF_net *n)
{
    for (int v = 0; v < n->nnodes; v++) n->level[v] = -1;
    int head = 0, tail = 0;
    n->queue[tail++] = n->s;
    n->level[n->s] = 0;
    while (head < tail) {
        int v = n->queue[head++];
        if (v == n->t) return 1;
        for (int e = n->head[v]; e >= 0; e = n->next[e])
            if (!(e & 1) && n->inf_arc[e / 2] && n->level[n->to[e]] < 0) {
                n->level[n->to[e]] = 0;
                n->queue[tail++] = n->to[e];
            }
    }
    return 0;
}

int prsF_min_cut(prsF_net *n, double eps, unsigned char *side)
{
    if (infinite_path(n)) return PRS_ERANGE;
    int V = n->nnodes, ss = V, tt = V + 1;
    int first_super = n->nedges;
    for (int v = 0; v < V; v++) {
        if (n->excess[v] > 0) add_edge(n, ss, v, n->excess[v]);
        else if (n->excess[v] < 0) add_edge(n, v, tt, -n->excess[v]);
    }
    int back = add_edge(n, n->t, n->s, INFINITY);
    int end_super = n->nedges;
    dinic(n, ss, tt, V + 2);
    for (int e = first_super; e < back; e += 2)
        if (n->cap[e] > 1e-6) return PRS_EINFEASIBLE;
    /* Drop the helper arcs: what remains is a feasible s-t flow on the original arcs. */
    for (int e = first_super; e < end_super; e++) n->cap[e] = 0;
    dinic(n, n->s, n->t, V);
    for (int v = 0; v < V; v++) side[v] = 0;
    int head = 0, tail = 0;
    n->queue[tail++] = n->s;
    side[n->s] = 1;
    while (head < tail) {
        int v = n->queue[head++];
        for (int e = n->head[v]; e >= 0; e = n->next[e])
            if (e < first_super && n->cap[e] > eps && !side[n->to[e]]) {
                side[n->to[e]] = 1;
                n->queue[tail++] = n->to[e];
            }
    }
    return 0;
}
