/* Schedule DAGs in activity-on-arc form, and critical paths (docs/planner.md).
 *
 * The activity-on-node DAG of one iteration has a node per computation plus a source and a sink;
 * edges are each stage's execution order and the cross-stage data dependencies. The solver works
 * on arcs, so every AON node v becomes an arc L(v) -> R(v) (AOA nodes 2v and 2v+1) carrying v's
 * duration, and every AON edge u -> v a dummy arc R(u) -> L(v). The source's and sink's own arcs
 * are dummies. AON node ids: 0 source, 1 sink, 2 + op for computation op (stage-major, in each
 * stage's execution order), exactly the reference's numbering. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

void prs__graph_free(prs__graph_graph *g)
{
    if (!g) return;
    free(g->op_type);
    free(g->op_mb);
    free(g->op_chunk);
    free(g->arcs);
    free(g->op_arc);
    free(g->topo);
    free(g->out_start);
    free(g->out_arcs);
    free(g->in_start);
    free(g->in_arcs);
    free(g->cpm_in_start);
    free(g->cpm_in);
    free(g->cpm_out_start);
    free(g->cpm_out);
    free(g->cpm_out_arc);
    memset(g, 0, sizeof *g);
}

static int build_csr(int nnodes, int narcs, const prs__graph_arc *arcs, int by_from,
                     int **start_out, int **list_out)
{
    int *start = calloc((size_t)nnodes + 1, sizeof *start);
    int *list = malloc(sizeof *list * (size_t)(narcs ? narcs : 1));
    if (!start || !list) {
        free(start);
        free(list);
        return -1;
    }
    for (int a = 0; a < narcs; a++)
        start[(by_from ? arcs[a].from : arcs[a].to) + 1]++;
    for (int v = 0; v < nnodes; v++)
        start[v + 1] += start[v];
    int *fill = malloc(sizeof *fill * (size_t)nnodes);
    if (!fill) {
        free(start);
        free(list);
        return -1;
    }
    memcpy(fill, start, sizeof *fill * (size_t)nnodes);
    for (int a = 0; a < narcs; a++)
        list[fill[by_from ? arcs[a].from : arcs[a].to]++] = a;
    free(fill);
    *start_out = start;
    *list_out = list;
    return 0;
}

static int build_cpm_lists(prs__graph_graph *g);

/* Kahn's algorithm: fills g->topo with the nodes in topological order and returns how many it
 * placed (fewer than g->nnodes: a cycle), or -1 when out of memory. */
static int topo_sort(prs__graph_graph *g)
{
    int *deg = calloc((size_t)g->nnodes, sizeof *deg);
    if (!deg) return -1;
    for (int a = 0; a < g->narcs; a++)
        deg[g->arcs[a].to]++;
    int head = 0, tail = 0;
    for (int v = 0; v < g->nnodes; v++)
        if (deg[v] == 0) g->topo[tail++] = v;
    while (head < tail) {
        int v = g->topo[head++];
        for (int i = g->out_start[v]; i < g->out_start[v + 1]; i++) {
            int w = g->arcs[g->out_arcs[i]].to;
            if (--deg[w] == 0) g->topo[tail++] = w;
        }
    }
    free(deg);
    return tail;
}

int prs__graph_build(const prs_pipeline *pipe, prs__graph_graph *g, prs_error *err)
{
    memset(g, 0, sizeof *g);
    int S = pipe->stages, M = pipe->microbatches, per = prs_ops_per_stage(pipe);
    int C = prs_pipeline_chunks(pipe);
    if ((long)S * per > PRS_MAX_DAG_OPS)
        return prs_error_set(err, PRS_EINVAL, "pipeline too large: %d stages x %d microbatches", S,
                             M);
    int nops = S * per, naon = nops + 2;
    g->nops = nops;
    g->ops_per_stage = per;
    g->op_type = malloc(sizeof *g->op_type * (size_t)nops);
    g->op_mb = malloc(sizeof *g->op_mb * (size_t)nops);
    g->op_chunk = malloc(sizeof *g->op_chunk * (size_t)nops);
    prs_instr *instr = malloc(sizeof *instr * (size_t)nops);
    /* index of F(c,m) and B(c,m) among ops, per model chunk c; every schedule fills each entry,
     * zeroed anyway since static analysis cannot follow that */
    int *fwd = calloc((size_t)nops, sizeof *fwd), *bwd = calloc((size_t)nops, sizeof *bwd);
    /* AON edges: stage order + cross-chunk deps + F->B on the last chunk + source/sink links */
    size_t max_aon_edges = (size_t)nops * 3 + (size_t)naon * 2;
    int(*edges)[2] = malloc(sizeof *edges * max_aon_edges);
    int *indeg = calloc((size_t)naon, sizeof *indeg),
        *outdeg = calloc((size_t)naon, sizeof *outdeg);
    int rc = PRS_ENOMEM;
    if (!g->op_type || !g->op_mb || !g->op_chunk || !instr || !fwd || !bwd || !edges || !indeg ||
        !outdeg)
        goto out;
    for (int s = 0; s < S; s++) {
        prs__sched_stage_order(pipe, s, instr + (ptrdiff_t)s * per, g->op_mb + (ptrdiff_t)s * per,
                               g->op_chunk + (ptrdiff_t)s * per);
        for (int k = 0; k < per; k++) {
            int op = s * per + k, c = g->op_chunk[op];
            g->op_type[op] = c * 2 + (int)instr[op];
            (instr[op] == PRS_FORWARD ? fwd : bwd)[c * M + g->op_mb[op]] = op;
        }
    }
    size_t ne = 0;
#define EDGE(u, v) (edges[ne][0] = (u), edges[ne][1] = (v), ne++, outdeg[u]++, indeg[v]++)
    for (int s = 0; s < S; s++)
        for (int k = 0; k + 1 < per; k++)
            EDGE(2 + s * per + k, 2 + s * per + k + 1);
    for (int c = 0; c + 1 < C; c++)
        for (int m = 0; m < M; m++) {
            EDGE(2 + fwd[c * M + m], 2 + fwd[(c + 1) * M + m]);
            EDGE(2 + bwd[(c + 1) * M + m], 2 + bwd[c * M + m]);
        }
    /* The backward of the last chunk needs its forward. Every schedule here runs both on the
     * last GPU with the forward first, so the GPU's own order already implies it; state the
     * dependency only where it would not (a future schedule), so no arc is doubled. */
    for (int m = 0; m < M; m++) {
        int f = fwd[(C - 1) * M + m], b = bwd[(C - 1) * M + m];
        if (f / per != b / per || f > b) EDGE(2 + f, 2 + b);
    }
    for (int v = 2; v < naon; v++) {
        if (indeg[v] == 0) EDGE(0, v);
        if (outdeg[v] == 0) EDGE(v, 1);
    }
#undef EDGE
    g->nnodes = 2 * naon;
    g->narcs = naon + (int)ne;
    g->source = 0;       /* L(source) */
    g->sink = 2 * 1 + 1; /* R(sink) */
    g->arcs = malloc(sizeof *g->arcs * (size_t)g->narcs);
    g->op_arc = malloc(sizeof *g->op_arc * (size_t)nops);
    g->topo = malloc(sizeof *g->topo * (size_t)g->nnodes);
    if (!g->arcs || !g->op_arc || !g->topo) goto out;
    for (int v = 0; v < naon; v++) {
        g->arcs[v] = (prs__graph_arc){2 * v, 2 * v + 1, v >= 2 ? v - 2 : -1};
        if (v >= 2) g->op_arc[v - 2] = v;
    }
    for (size_t e = 0; e < ne; e++)
        g->arcs[naon + (int)e] = (prs__graph_arc){2 * edges[e][0] + 1, 2 * edges[e][1], -1};
    if (build_csr(g->nnodes, g->narcs, g->arcs, 1, &g->out_start, &g->out_arcs) ||
        build_csr(g->nnodes, g->narcs, g->arcs, 0, &g->in_start, &g->in_arcs))
        goto out;
    int tail = topo_sort(g);
    if (tail < 0) goto out;
    if (tail != g->nnodes) {
        rc = prs_error_set(err, PRS_EINVAL, "internal error: schedule graph has a cycle");
        goto out;
    }
    if (build_cpm_lists(g)) goto out;
    rc = 0;
out:
    free(instr);
    free(fwd);
    free(bwd);
    free(edges);
    free(indeg);
    free(outdeg);
    if (rc == PRS_ENOMEM) prs_error_set(err, rc, "out of memory building the schedule graph");
    if (rc) prs__graph_free(g);
    return rc;
}

/* The arcs in and out of each node in topological order, as (other end, op) in one array each
 * (prs__graph_cpm reads them front to back). Non-zero when out of memory. */
static int build_cpm_lists(prs__graph_graph *g)
{
    size_t n = (size_t)g->nnodes;
    g->cpm_in_start = malloc(sizeof *g->cpm_in_start * (n + 1));
    g->cpm_out_start = malloc(sizeof *g->cpm_out_start * (n + 1));
    g->cpm_in = malloc(sizeof *g->cpm_in * (size_t)(g->narcs ? g->narcs : 1));
    g->cpm_out = malloc(sizeof *g->cpm_out * (size_t)(g->narcs ? g->narcs : 1));
    g->cpm_out_arc = malloc(sizeof *g->cpm_out_arc * (size_t)(g->narcs ? g->narcs : 1));
    if (!g->cpm_in_start || !g->cpm_out_start || !g->cpm_in || !g->cpm_out || !g->cpm_out_arc)
        return -1;
    int ki = 0, ko = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int v = g->topo[i], w = g->topo[g->nnodes - 1 - i];
        g->cpm_in_start[i] = ki;
        for (int k = g->in_start[v]; k < g->in_start[v + 1]; k++, ki++) {
            const prs__graph_arc *a = &g->arcs[g->in_arcs[k]];
            g->cpm_in[ki] = (prs__graph_end){a->from, a->op};
        }
        g->cpm_out_start[i] = ko;
        for (int k = g->out_start[w]; k < g->out_start[w + 1]; k++, ko++) {
            const prs__graph_arc *a = &g->arcs[g->out_arcs[k]];
            g->cpm_out[ko] = (prs__graph_end){a->to, a->op};
            g->cpm_out_arc[ko] = g->out_arcs[k];
        }
    }
    g->cpm_in_start[n] = ki;
    g->cpm_out_start[n] = ko;
    return 0;
}

/* The forward pass: earliest times; the critical path length. */
static long forward(const prs__graph_graph *g, const long *dur, long *earliest)
{
    const prs__graph_end *in = g->cpm_in;
    for (int i = 0; i < g->nnodes; i++) {
        long e = 0;
        for (int k = g->cpm_in_start[i]; k < g->cpm_in_start[i + 1]; k++) {
            int op = in[k].op;
            long t = earliest[in[k].node] + (op >= 0 ? dur[op] : 0);
            if (t > e) e = t;
        }
        earliest[g->topo[i]] = e;
    }
    return earliest[g->sink];
}

/* The backward pass: latest times against T, and, when crit is given, crit[arc] = whether the
 * arc is critical (earliest at its tail plus its duration is the latest at its head). */
static void backward(const prs__graph_graph *g, const long *dur, const long *earliest, long T,
                     long *latest, unsigned char *crit)
{
    const prs__graph_end *out = g->cpm_out;
    for (int i = 0; i < g->nnodes; i++) {
        int v = g->topo[g->nnodes - 1 - i];
        long l = T;
        for (int k = g->cpm_out_start[i]; k < g->cpm_out_start[i + 1]; k++) {
            int op = out[k].op;
            long d = op >= 0 ? dur[op] : 0, late = latest[out[k].node];
            if (crit) crit[g->cpm_out_arc[k]] = earliest[v] + d == late;
            if (late - d < l) l = late - d;
        }
        latest[v] = l;
    }
}

long prs__graph_cpm(const prs__graph_graph *g, const long *dur, long *earliest, long *latest)
{
    long T = forward(g, dur, earliest);
    if (latest) backward(g, dur, earliest, T, latest, NULL);
    return T;
}

long prs__graph_cpm_crit(const prs__graph_graph *g, const long *dur, long *earliest, long *latest,
                         unsigned char *crit)
{
    long T = forward(g, dur, earliest);
    backward(g, dur, earliest, T, latest, crit);
    return T;
}
