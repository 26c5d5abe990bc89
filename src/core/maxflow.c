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
 * needs a few augmentations instead of a full max flow: a new network gets every arc's starting
 * flow (prs__flow_add), and a network solved before is kept as the last solve left it, residual
 * supplies included, with new bounds for the arcs whose bounds changed (prs__flow_rebound): the
 * other arcs and nodes are then not touched at all.
 *
 * Infinity is real (IEEE inf), not the reference's 10000 stand-in: an s-t path made only of
 * infinite-capacity arcs is noticed when a search would push an infinite amount along it, and
 * reported as PRS_ERANGE (no finite cut).
 *
 * The residual graph lives in one array of slots, each a directed residual edge with its
 * capacity, its head and the slot of its reverse, grouped by tail node: the searches read a
 * node's edges and their capacities in one sequential sweep. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

#define AUG_EPS PRS_FLOW_AUG_EPS /* smallest residual worth augmenting through */

/* A directed residual edge: capacity left, head node, the slot of its reverse. */
typedef struct slot {
    double cap;
    int to, rev;
} slot;

struct prs__flow_net {
    int nnodes, s, t, narcs;
    int laid;  /* the arcs added since the last reset have their slots */
    int fresh; /* the supplies are to be filled from excess[] (no solve since the last reset) */
    /* per arc: ends, bounds, forward slot (once laid), residuals before it is laid */
    int *afrom, *ato, *fw;
    double *lb, *cf, *cb;
    /* Slots: node v's arcs' edges (forward out of v, reverse into it) are slots [first[v],
     * last[v]), in the order of a list that each edge joins at the front as arcs are added,
     * forward before reverse; before them, from beg[v], its supply edge to t (t_slot[v]), and
     * for s an edge to each node with supply left, by node descending (s_slot[v]; -1 while v
     * is not listed, its supply then in scap[v]; in_s[v]: listed or pending, pend[0 .. npend):
     * given supply since the list was last put in order). The supply edges' reverses lead into
     * s or out of t, which no search needs: they all share the slot junk. */
    slot *sl;
    int junk;
    int *beg, *first, *last, *t_slot, *s_slot, *pend, npend;
    double *scap, *excess; /* excess: per node, the arcs' flow in - out (fill_supplies) */
    double offset; /* the arcs' flow into t less their flow out of it, less the supplies to t */
    unsigned char *in_s;
    int *level, *it, *queue, *stack;
    double cut_eps; /* the cut's residual threshold (prs__flow_min_cut's eps) */
    int thin;       /* the last level search discovered a node through a residual <= cut_eps */
    int strong;     /* the cut search's first queue[0 .. strong), when it ended the solve (else -1):
                     * the cut's source side */
    int settled;    /* the last solve needed no augmenting path (the next one likely neither) */
    long level_searches, level_nodes, cut_searches, cut_nodes; /* prs__flow_count */
};

prs__flow_net *prs__flow_new(int max_nodes, int max_arcs)
{
    prs__flow_net *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    size_t V = (size_t)max_nodes + 2, A = (size_t)(max_arcs > 0 ? max_arcs : 1);
    size_t S = 2 * A + 2 * V + 1; /* arcs both ways, s's list, the t edges, junk */
    n->afrom = malloc(A * sizeof *n->afrom);
    n->ato = malloc(A * sizeof *n->ato);
    n->fw = malloc(A * sizeof *n->fw);
    n->lb = malloc(A * sizeof *n->lb);
    n->cf = malloc(A * sizeof *n->cf);
    n->cb = malloc(A * sizeof *n->cb);
    n->sl = malloc(S * sizeof *n->sl);
    n->beg = malloc(V * sizeof *n->beg);
    n->first = malloc(V * sizeof *n->first);
    n->last = malloc(V * sizeof *n->last);
    n->t_slot = malloc(V * sizeof *n->t_slot);
    n->s_slot = malloc(V * sizeof *n->s_slot);
    n->pend = malloc(V * sizeof *n->pend);
    n->scap = malloc(V * sizeof *n->scap);
    n->excess = malloc(V * sizeof *n->excess);
    n->in_s = malloc(V);
    n->level = malloc(V * sizeof *n->level);
    n->it = malloc(V * sizeof *n->it);
    n->queue = malloc(V * sizeof *n->queue);
    n->stack = malloc(V * sizeof *n->stack);
    if (!n->afrom || !n->ato || !n->fw || !n->lb || !n->cf || !n->cb || !n->sl || !n->beg ||
        !n->first || !n->last || !n->t_slot || !n->s_slot || !n->pend || !n->scap || !n->excess ||
        !n->in_s || !n->level || !n->it || !n->queue || !n->stack) {
        prs__flow_free(n);
        return NULL;
    }
    return n;
}

void prs__flow_free(prs__flow_net *n)
{
    if (!n) return;
    free(n->afrom);
    free(n->ato);
    free(n->fw);
    free(n->lb);
    free(n->cf);
    free(n->cb);
    free(n->sl);
    free(n->beg);
    free(n->first);
    free(n->last);
    free(n->t_slot);
    free(n->s_slot);
    free(n->pend);
    free(n->scap);
    free(n->excess);
    free(n->in_s);
    free(n->level);
    free(n->it);
    free(n->queue);
    free(n->stack);
    free(n);
}

void prs__flow_reset(prs__flow_net *n, int nnodes, int s, int t)
{
    n->nnodes = nnodes;
    n->s = s;
    n->t = t;
    n->narcs = 0;
    n->laid = 0;
    n->fresh = 1;
    for (int v = 0; v < nnodes; v++)
        n->excess[v] = 0;
}

/* Arc i's residuals for bounds [lb, ub] at a flow (clamped into them); returns the flow. */
static double set_caps(prs__flow_net *n, int i, double lb, double ub, double flow)
{
    if (!(flow >= lb)) flow = lb; /* also catches NaN */
    if (flow > ub) flow = ub;
    if (n->laid) {
        n->sl[n->fw[i]].cap = ub - flow;
        n->sl[n->sl[n->fw[i]].rev].cap = flow - lb;
    } else {
        n->cf[i] = ub - flow;
        n->cb[i] = flow - lb;
    }
    n->lb[i] = lb;
    return flow;
}

int prs__flow_add(prs__flow_net *n, int from, int to, double lb, double ub, double flow)
{
    int i = n->narcs++;
    n->afrom[i] = from;
    n->ato[i] = to;
    flow = set_caps(n, i, lb, ub, flow);
    n->excess[to] += flow; /* the flow's share of its ends' excess */
    n->excess[from] -= flow;
    return i;
}

double prs__flow_flow(const prs__flow_net *n, int arc)
{
    return n->lb[arc] + (n->laid ? n->sl[n->sl[n->fw[arc]].rev].cap : n->cb[arc]);
}

/* Node v's residual supply from s. */
static double s_cap(const prs__flow_net *n, int v)
{
    return n->s_slot[v] >= 0 ? n->sl[n->s_slot[v]].cap : n->scap[v];
}

/* Node v's supply (> 0: from s, < 0: to t) changes by d. */
static void shift_supply(prs__flow_net *n, int v, double d)
{
    if (v == n->s || v == n->t) return;
    double x = s_cap(n, v) - n->sl[n->t_slot[v]].cap + d;
    double up = x > 0 ? x : 0;
    if (n->s_slot[v] >= 0)
        n->sl[n->s_slot[v]].cap = up;
    else
        n->scap[v] = up;
    double down = x < 0 ? -x : 0;
    n->offset -= down - n->sl[n->t_slot[v]].cap;
    n->sl[n->t_slot[v]].cap = down;
    if (up > AUG_EPS && !n->in_s[v]) {
        n->in_s[v] = 1;
        n->pend[n->npend++] = v;
    }
}

void prs__flow_rebound(prs__flow_net *n, int arc, double lb, double ub)
{
    double old = prs__flow_flow(n, arc);
    double d = set_caps(n, arc, lb, ub, old) - old;
    if (d != 0) {
        n->offset += (n->ato[arc] == n->t) * d - (n->afrom[arc] == n->t) * d;
        shift_supply(n, n->ato[arc], d);
        shift_supply(n, n->afrom[arc], -d);
    }
}

/* Put a slot for an edge of arc i (rev: its reverse) at node v's next free arc slot. */
static int place(prs__flow_net *n, int v, int i, int rev)
{
    int k = n->last[v]++;
    n->sl[k].to = rev ? n->afrom[i] : n->ato[i];
    return k;
}

/* The slots: per node its supply region, then its arcs' edges (see the struct). */
static void lay_out(prs__flow_net *n)
{
    int V = n->nnodes, k = 0;
    for (int v = 0; v < V; v++)
        n->last[v] = 0;
    for (int i = 0; i < n->narcs; i++)
        n->last[n->afrom[i]]++, n->last[n->ato[i]]++;
    for (int v = 0; v < V; v++) {
        k += v == n->s ? V : v == n->t ? 0 : 1;
        n->first[v] = n->beg[v] = k;
        k += n->last[v];
        n->last[v] = n->first[v]; /* filled below */
    }
    n->junk = k;
    n->sl[k].cap = 0;
    for (int i = n->narcs - 1; i >= 0; i--) { /* last added first, reverse before forward */
        int b = place(n, n->ato[i], i, 1), f = place(n, n->afrom[i], i, 0);
        n->sl[f].rev = b, n->sl[b].rev = f;
        n->sl[f].cap = n->cf[i], n->sl[b].cap = n->cb[i];
        n->fw[i] = f;
    }
    for (int v = 0; v < V; v++) {
        n->t_slot[v] = n->s_slot[v] = -1;
        if (v == n->s || v == n->t) continue;
        int e = n->t_slot[v] = --n->beg[v];
        n->sl[e] = (slot){0, n->t, n->junk};
    }
    n->laid = 1;
}

/* List s -> v at the front of s's list. */
static void list_source(prs__flow_net *n, int v)
{
    int k = n->s_slot[v] = --n->beg[n->s];
    n->sl[k] = (slot){n->scap[v], v, n->junk};
}

/* The cut's value less the flow the solve pushes: the arcs' flow into t less their flow out of
 * it, and the deficits (supplies to t) of the other nodes. */
static double cut_offset(const prs__flow_net *n)
{
    double value = 0;
    for (int i = 0; i < n->narcs; i++)
        value += ((n->ato[i] == n->t) - (n->afrom[i] == n->t)) * prs__flow_flow(n, i);
    for (int v = 0; v < n->nnodes; v++)
        if (n->t_slot[v] >= 0) value -= n->sl[n->t_slot[v]].cap;
    return value;
}

/* Every node's supplies from excess[] (s -> v for excess > 0, v -> t for excess < 0), none of
 * their flow pushed yet; s lists the nodes with supply. */
static void fill_supplies(prs__flow_net *n)
{
    n->beg[n->s] = n->first[n->s];
    n->npend = 0;
    for (int v = 0; v < n->nnodes; v++) {
        n->s_slot[v] = -1;
        n->in_s[v] = 0;
        if (v == n->s || v == n->t) continue;
        double x = n->excess[v];
        n->scap[v] = x > 0 ? x : 0;
        n->sl[n->t_slot[v]].cap = x < 0 ? -x : 0;
        n->in_s[v] = n->scap[v] > AUG_EPS;
        if (n->in_s[v]) list_source(n, v); /* ascending, each in front: descending */
    }
    n->offset = cut_offset(n);
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
        int v = n->sl[k].to;
        n->scap[v] = n->sl[k].cap;
        n->s_slot[v] = -1;
        if (n->scap[v] > AUG_EPS)
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

/* Levels of the nodes reachable from s through residual capacity > AUG_EPS (-1 elsewhere);
 * whether t is one of them; it[v] = beg[v] for each of them. n->thin notes a node first
 * reached through a residual of at most n->cut_eps: when there is none, the reachable set is
 * also the one through residuals above cut_eps (every node has a path of those), so the final
 * search doubles as the cut's. The search stops when it reaches t (then only the levels below
 * t's are complete). */
static int bfs_levels(prs__flow_net *n, int s, int t, int nv)
{
    const slot *sl = n->sl;
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
            double c = sl[k].cap;
            int w = sl[k].to;
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

/* Push the bottleneck of the path on the stack (depth slots) to t; returns it (INFINITY when
 * every edge is infinite: nothing pushed) and the depth to resume from (*depth: the first
 * edge the push saturated). */
static double augment(prs__flow_net *n, int *depth)
{
    slot *sl = n->sl;
    double push = INFINITY;
    for (int i = 0; i < *depth; i++)
        if (sl[n->stack[i]].cap < push) push = sl[n->stack[i]].cap;
    if (isinf(push)) return push;
    int back = *depth;
    for (int i = *depth - 1; i >= 0; i--) {
        int k = n->stack[i];
        sl[k].cap -= push;
        sl[sl[k].rev].cap += push;
        if (sl[k].cap <= AUG_EPS) back = i;
    }
    *depth = back;
    return push;
}

/* Queue w as found by the cut search (level 0 marks it); 1 when w is t. */
static int cut_found(prs__flow_net *n, int w, int t, int *tail)
{
    if (w == t) return 1;
    n->level[w] = 0;
    n->queue[(*tail)++] = w;
    return 0;
}

/* Scan node v's edges of residual above lo for nodes the cut search has not found; 1 when one
 * of them is t. With only_strong, v is noted on the stack (*nthin) when it has an edge of
 * residual in (AUG_EPS, cut_eps] to such a node. */
static int cut_scan(prs__flow_net *n, int v, int t, int only_strong, int *tail, int *nthin)
{
    const slot *sl = n->sl;
    double lo = only_strong ? n->cut_eps : AUG_EPS;
    int noted = !only_strong;
    for (int k = n->beg[v]; k < n->last[v]; k++) {
        double c = sl[k].cap;
        int w = sl[k].to;
        if (c <= AUG_EPS || n->level[w] >= 0) continue;
        if (c > lo) {
            if (cut_found(n, w, t, tail)) return 1;
        } else if (!noted) {
            n->stack[(*nthin)++] = v;
            noted = 1;
        }
    }
    return 0;
}

/* Start a cut search from s: no node found but s. */
static void cut_start(prs__flow_net *n, int s, int nv, int *head, int *tail)
{
    for (int v = 0; v < nv; v++)
        n->level[v] = -1;
    n->level[s] = 0;
    n->queue[0] = s;
    *head = 0, *tail = 1;
    n->cut_searches++;
}

/* Scan the queued nodes queue[*head .. *tail) as cut_scan says (only_strong: residuals above
 * cut_eps), those they find included; 1 when t is found. */
static int cut_sweep(prs__flow_net *n, int t, int only_strong, int *head, int *tail, int *nthin)
{
    while (*head < *tail) {
        n->cut_nodes++;
        if (cut_scan(n, n->queue[(*head)++], t, only_strong, tail, nthin)) return 1;
    }
    return 0;
}

/* Is t reachable from s through residual capacity > AUG_EPS? The search follows residuals above
 * cut_eps first: the nodes found that way, queue[0 .. tier), are the cut's source side when t
 * is not reachable at all, which the search then settles by going on through the thinner
 * residuals it passed over. When t is not reachable, n->strong = tier. */
static int cut_search(prs__flow_net *n, int s, int t, int nv)
{
    int head, tail, nthin = 0;
    cut_start(n, s, nv, &head, &tail);
    if (cut_sweep(n, t, 1, &head, &tail, &nthin)) return 1;
    int tier = tail;
    for (int i = 0; i < nthin; i++)
        if (cut_scan(n, n->stack[i], t, 0, &tail, &nthin)) return 1;
    if (cut_sweep(n, t, 0, &head, &tail, &nthin)) return 1;
    n->strong = tier;
    return 0;
}

/* Dinic's algorithm from s to t over nodes 0..nv-1; returns the flow pushed, INFINITY as soon
 * as a path of infinite residual capacity (an s-t path of infinite arcs) is found. */
static double dinic(prs__flow_net *n, int s, int t, int nv)
{
    const slot *sl = n->sl;
    double total = 0;
    n->strong = -1;
    /* A solve that needs no augmenting path mostly follows another: then the cut search alone
     * may settle it, finding the cut's source side in the same sweep */
    int guess = n->settled;
    n->settled = 1;
    if (guess && !cut_search(n, s, t, nv)) return 0;
    while (bfs_levels(n, s, t, nv)) {
        n->settled = 0;
        int depth = 0, v = s;
        for (;;) {
            if (v == t) {
                double push = augment(n, &depth);
                if (isinf(push)) return INFINITY;
                total += push;
                v = depth ? sl[n->stack[depth - 1]].to : s;
                continue;
            }
            int k = n->it[v], end = n->last[v], next = n->level[v] + 1;
            while (k < end && !(sl[k].cap > AUG_EPS && n->level[sl[k].to] == next))
                k++;
            n->it[v] = k;
            if (k < end) {
                n->stack[depth++] = k;
                v = sl[k].to;
            } else {
                if (v == s) break;
                n->level[v] = -1; /* dead end */
                depth--;
                v = depth ? sl[n->stack[depth - 1]].to : s;
                n->it[v]++;
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
     * After a solve, the supply arcs' residuals are the excesses of its final flow, so a solve
     * that follows prs__flow_rebound starts from them as they are. The cut's value is the flow
     * pushed plus n->offset (cut_offset(), kept up to date from one solve to the next). */
    int V = n->nnodes;
    if (!n->laid) lay_out(n); /* first solve of these arcs */
    if (n->fresh)
        fill_supplies(n);
    else
        order_sources(n);
    n->fresh = 0;
    double value = n->offset;
    n->cut_eps = eps > AUG_EPS ? eps : AUG_EPS; /* nothing thinner is augmented */
    double flow = dinic(n, n->s, n->t, V);
    if (isinf(flow)) return PRS_ERANGE; /* no finite cut */
    /* a negative value means no feasible flow meets the lower bounds */
    if (flow + value < -PRS_FLOW_INFEASIBLE_TOL) return PRS_EINFEASIBLE;
    n->offset += flow;               /* every augmenting path ends with an edge into t */
    if (n->strong < 0 && !n->thin) { /* the last level search reached the cut's source side */
        for (int v = 0; v < V; v++)
            side[v] = n->level[v] >= 0;
        return 0;
    }
    if (n->strong < 0) { /* the nodes reachable through residuals above cut_eps (not t) */
        int head, tail, nthin = 0;
        cut_start(n, n->s, V, &head, &tail);
        cut_sweep(n, n->t, 1, &head, &tail, &nthin);
        n->strong = tail;
    }
    memset(side, 0, (size_t)V);
    for (int i = 0; i < n->strong; i++)
        side[n->queue[i]] = 1;
    return 0;
}

void prs__flow_count(const prs__flow_net *n, prs_plan_stats *st)
{
    st->level_searches = n->level_searches;
    st->level_nodes = n->level_nodes;
    st->cut_searches = n->cut_searches;
    st->cut_nodes = n->cut_nodes;
}
