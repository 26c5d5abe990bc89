/* The schedule tests' independent construction (test_schedules.c, test_schedule_times.c): the
 * per-GPU execution orders of 1F1B, GPipe and Megatron-LM's interleaved 1F1B re-derived the way
 * the frameworks describe them, the cases they are checked on, and the activity-on-node DAG
 * built from those orders with its longest path. Header-only. */
#ifndef PRS_TEST_SCHED_REF_H
#define PRS_TEST_SCHED_REF_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "plan_int.h"

/* ---- Expected execution orders ---- */

/* One computation: forward or backward of model chunk `chunk` on microbatch `mb`. */
typedef struct xop {
    prs_instr instr;
    int chunk, mb;
} xop;

/* A pipeline and its expected per-GPU orders: ops[s * per + pos]. */
typedef struct xsched {
    prs_pipeline pipe;
    int S, V, M, C, per;
    xop *ops;
} xsched;

static inline prs_pipeline make_pipe(prs_schedule sched, int S, int V, int M)
{
    prs_pipeline p;
    memset(&p, 0, sizeof p);
    p.stages = S;
    p.microbatches = M;
    p.schedule = sched;
    p.unit_time_s = 1e-3;
    p.blocking_power_w = 0;
    p.virtual_stages = V;
    return p;
}

static inline void put(xsched *x, int s, int *pos, prs_instr instr, int chunk, int mb)
{
    assert_true(*pos < x->per);
    x->ops[s * x->per + *pos] = (xop){instr, chunk, mb};
    (*pos)++;
}

/* Megatron-LM's forward_backward_pipelining_without_interleaving for GPU `rank` (its chunk is
 * the GPU itself): num_warmup = min(S - rank - 1, M) forwards, then num_microbatches_remaining
 * steady-state steps of "forward, backward", then the remaining backwards. */
static inline void megatron_1f1b(xsched *x, int rank)
{
    int warmup = x->S - rank - 1;
    if (warmup > x->M) warmup = x->M;
    int remaining = x->M - warmup, pos = 0, fwd = 0, bwd = 0;
    for (int i = 0; i < warmup; i++)
        put(x, rank, &pos, PRS_FORWARD, rank, fwd++);
    for (int i = 0; i < remaining; i++) {
        put(x, rank, &pos, PRS_FORWARD, rank, fwd++);
        put(x, rank, &pos, PRS_BACKWARD, rank, bwd++);
    }
    for (int i = 0; i < warmup; i++)
        put(x, rank, &pos, PRS_BACKWARD, rank, bwd++);
    assert_int_equal(pos, x->per);
}

/* GPipe: fill the pipe with every microbatch, then drain it with every backward. */
static inline void gpipe(xsched *x, int rank)
{
    int pos = 0;
    for (int m = 0; m < x->M; m++)
        put(x, rank, &pos, PRS_FORWARD, rank, m);
    for (int m = 0; m < x->M; m++)
        put(x, rank, &pos, PRS_BACKWARD, rank, m);
}

/* Megatron-LM's forward_backward_pipelining_with_interleaving, the scheduling skeleton only (no
 * communication), for pipeline rank `rank` of pp = S with V model chunks and M microbatches. */
typedef struct megatron_ctx {
    int pp, V, rank;
} megatron_ctx;

/* get_model_chunk_id(microbatch_id, forward) */
static inline int get_model_chunk_id(const megatron_ctx *c, int microbatch_id, int forward)
{
    int microbatch_id_in_group = microbatch_id % (c->pp * c->V);
    int model_chunk_id = microbatch_id_in_group / c->pp;
    if (!forward) model_chunk_id = c->V - model_chunk_id - 1;
    return model_chunk_id;
}

/* get_microbatch_id_in_model_chunk(iteration_id, forward) */
static inline int get_microbatch_id_in_model_chunk(const megatron_ctx *c, int iteration_id)
{
    int iteration_group_id = iteration_id / (c->pp * c->V);
    return iteration_group_id * c->pp + iteration_id % c->pp;
}

/* forward_step_helper(k) / backward_step_helper(k): run virtual microbatch k on the local model
 * chunk get_model_chunk_id says; local chunk j of rank r holds layers of model chunk j pp + r. */
static inline void step_helper(xsched *x, const megatron_ctx *c, int *pos, int k, int forward)
{
    int local = get_model_chunk_id(c, k, forward);
    put(x, c->rank, pos, forward ? PRS_FORWARD : PRS_BACKWARD, local * c->pp + c->rank,
        get_microbatch_id_in_model_chunk(c, k));
}

static inline void megatron_interleaved(xsched *x, int rank)
{
    megatron_ctx c = {x->S, x->V, rank};
    int num_microbatches = x->M;
    int total_num_microbatches = num_microbatches * c.V;
    int num_warmup_microbatches = (c.pp - rank - 1) * 2;
    num_warmup_microbatches += (c.V - 1) * c.pp;
    if (num_warmup_microbatches > total_num_microbatches)
        num_warmup_microbatches = total_num_microbatches;
    int num_microbatches_remaining = total_num_microbatches - num_warmup_microbatches;
    int pos = 0;
    /* Run warmup forward passes. */
    for (int k = 0; k < num_warmup_microbatches; k++)
        step_helper(x, &c, &pos, k, 1);
    /* Run 1F1B in steady state. */
    for (int k = 0; k < num_microbatches_remaining; k++) {
        int forward_k = k + num_warmup_microbatches;
        step_helper(x, &c, &pos, forward_k, 1);
        int backward_k = k;
        step_helper(x, &c, &pos, backward_k, 0);
    }
    /* Run cooldown backward passes. */
    for (int k = num_microbatches_remaining; k < total_num_microbatches; k++)
        step_helper(x, &c, &pos, k, 0);
    assert_int_equal(pos, x->per);
}

static inline void xsched_init(xsched *x, prs_schedule sched, int S, int V, int M)
{
    memset(x, 0, sizeof *x);
    x->pipe = make_pipe(sched, S, V, M);
    x->S = S;
    x->V = sched == PRS_SCHEDULE_INTERLEAVED ? V : 1;
    x->M = M;
    x->C = S * x->V;
    x->per = 2 * M * x->V;
    x->ops = calloc((size_t)S * (size_t)x->per, sizeof *x->ops);
    assert_non_null(x->ops);
    for (int s = 0; s < S; s++) {
        switch (sched) {
        case PRS_SCHEDULE_GPIPE:
            gpipe(x, s);
            break;
        case PRS_SCHEDULE_INTERLEAVED:
            megatron_interleaved(x, s);
            break;
        default:
            megatron_1f1b(x, s);
            break;
        }
    }
}

static inline void xsched_free(xsched *x)
{
    free(x->ops);
    x->ops = NULL;
}

static inline const char *sched_desc(const xsched *x, char *buf, size_t n)
{
    snprintf(buf, n, "%s S=%d V=%d M=%d", prs_schedule_name(x->pipe.schedule), x->S, x->V, x->M);
    return buf;
}

/* "F3@5": forward of model chunk 3 on microbatch 5. */
static inline void op_str(char *buf, size_t n, prs_instr instr, int chunk, int mb)
{
    snprintf(buf, n, "%c%d@%d", instr == PRS_FORWARD ? 'F' : 'B', chunk, mb);
}

/* GPU s's order as the library describes it, space-separated ("F0@0 F0@1 ..."). */
static inline void describe_gpu(const prs_pipeline *p, int s, char *buf, size_t n)
{
    int per = prs_ops_per_stage(p);
    size_t len = 0;
    buf[0] = '\0';
    for (int pos = 0; pos < per; pos++) {
        prs_instr instr;
        int mb = -1, chunk = -1;
        assert_int_equal(prs_op_describe_chunk(p, s, pos, &instr, &mb, &chunk), 0);
        char tok[32];
        op_str(tok, sizeof tok, instr, chunk, mb);
        int w = snprintf(buf + len, n - len, "%s%s", pos ? " " : "", tok);
        assert_true(w > 0 && (size_t)w < n - len);
        len += (size_t)w;
    }
}

static inline void expected_gpu(const xsched *x, int s, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int pos = 0; pos < x->per; pos++) {
        const xop *o = &x->ops[s * x->per + pos];
        char tok[32];
        op_str(tok, sizeof tok, o->instr, o->chunk, o->mb);
        int w = snprintf(buf + len, n - len, "%s%s", pos ? " " : "", tok);
        assert_true(w > 0 && (size_t)w < n - len);
        len += (size_t)w;
    }
}

/* Interleaved cases: (S, V, M), M a multiple of S. M == S is included: there the formula
 * num_warmup = min((S - r - 1) 2 + (V - 1) S, M V) leaves the last ranks a steady state (current
 * Megatron-LM; releases up to core 0.7 instead ran every forward first when M == S). */
static const int interleaved_cases[][3] = {
    {2, 2, 4}, {4, 2, 8}, {4, 3, 12}, {3, 2, 6}, {2, 2, 2},  {2, 3, 6},
    {4, 2, 4}, {2, 4, 8}, {3, 3, 9},  {2, 2, 8}, {4, 4, 16},
};
static const int plain_cases[][2] = {{1, 1}, {1, 3}, {2, 1}, {2, 2}, {2, 5}, {3, 7},
                                     {4, 2}, {4, 4}, {4, 8}, {5, 3}, {8, 12}};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Expected activity-on-node DAG ---- */

typedef struct edge {
    int u, v;
} edge;

typedef struct xdag {
    int nops, naon; /* AON ids: 0 source, 1 sink, 2 + op */
    int nedges;
    edge *edges;
    int *topo; /* ops in a topological order */
} xdag;

static inline int edge_cmp(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->u != y->u) return x->u < y->u ? -1 : 1;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return 0;
}

static inline void add_edge(xdag *d, int cap, int u, int v)
{
    for (int e = 0; e < d->nedges; e++) /* a set: a dependency stated twice is one edge */
        if (d->edges[e].u == u && d->edges[e].v == v) return;
    assert_true(d->nedges < cap);
    d->edges[d->nedges++] = (edge){u, v};
}

/* Build the expected DAG from the expected orders: each GPU's order as a chain; the data flow
 * of microbatch m through the model chunks 0 .. C-1 and back (F(c,m) -> F(c+1,m),
 * B(c+1,m) -> B(c,m)); the loss turns around on the last chunk (F(C-1,m) -> B(C-1,m)): for 1F1B
 * and GPipe the reference (docs/planner.md) leaves it implied by the last GPU's order, where F
 * always precedes B; for interleaving it is stated. Then source/sink links. */
static inline void xdag_build(xdag *d, const xsched *x)
{
    d->nops = x->S * x->per;
    d->naon = d->nops + 2;
    int cap = d->nops * 4 + 4;
    d->edges = malloc(sizeof *d->edges * (size_t)cap);
    d->topo = malloc(sizeof *d->topo * (size_t)d->nops);
    d->nedges = 0;
    int *where = malloc(sizeof *where * (size_t)x->C * (size_t)x->M * 2);
    assert_true(d->edges && d->topo && where);
    for (int i = 0; i < x->C * x->M * 2; i++)
        where[i] = -1;
    for (int op = 0; op < d->nops; op++) {
        const xop *o = &x->ops[op];
        int *w = &where[(o->chunk * x->M + o->mb) * 2 + (int)o->instr];
        assert_int_equal(*w, -1);
        *w = op;
    }
#define F(c, m) (2 + where[((c)*x->M + (m)) * 2 + PRS_FORWARD])
#define B(c, m) (2 + where[((c)*x->M + (m)) * 2 + PRS_BACKWARD])
    for (int s = 0; s < x->S; s++)
        for (int pos = 0; pos + 1 < x->per; pos++)
            add_edge(d, cap, 2 + s * x->per + pos, 2 + s * x->per + pos + 1);
    for (int m = 0; m < x->M; m++) {
        for (int c = 0; c + 1 < x->C; c++) {
            add_edge(d, cap, F(c, m), F(c + 1, m));
            add_edge(d, cap, B(c + 1, m), B(c, m));
        }
        if (x->pipe.schedule == PRS_SCHEDULE_INTERLEAVED)
            add_edge(d, cap, F(x->C - 1, m), B(x->C - 1, m));
    }
#undef F
#undef B
    int *indeg = calloc((size_t)d->naon, sizeof *indeg);
    int *outdeg = calloc((size_t)d->naon, sizeof *outdeg);
    assert_true(indeg && outdeg);
    int inner = d->nedges;
    for (int e = 0; e < inner; e++) {
        outdeg[d->edges[e].u]++;
        indeg[d->edges[e].v]++;
    }
    for (int v = 2; v < d->naon; v++) {
        if (indeg[v] == 0) add_edge(d, cap, 0, v);
        if (outdeg[v] == 0) add_edge(d, cap, v, 1);
    }
    /* topological order of the ops (Kahn); a cycle means the orders deadlock */
    int head = 0, tail = 0;
    for (int v = 2; v < d->naon; v++)
        if (indeg[v] == 0) d->topo[tail++] = v - 2;
    while (head < tail) {
        int op = d->topo[head++];
        for (int e = 0; e < inner; e++)
            if (d->edges[e].u == op + 2 && --indeg[d->edges[e].v] == 0)
                d->topo[tail++] = d->edges[e].v - 2;
    }
    assert_int_equal(tail, d->nops);
    free(indeg);
    free(outdeg);
    free(where);
    qsort(d->edges, (size_t)d->nedges, sizeof *d->edges, edge_cmp);
}

static inline void xdag_free(xdag *d)
{
    free(d->edges);
    free(d->topo);
}

/* Longest path: start[op] = earliest start when op takes dur[op]; returns the makespan. */
static inline long xdag_cpm(const xdag *d, const long *dur, long *start)
{
    long *fin = calloc((size_t)d->nops, sizeof *fin), T = 0;
    int *pos = malloc(sizeof *pos * (size_t)d->nops);
    assert_true(fin && pos);
    for (int i = 0; i < d->nops; i++)
        pos[d->topo[i]] = i;
    for (int i = 0; i < d->nops; i++) {
        int op = d->topo[i];
        long st = 0;
        for (int e = 0; e < d->nedges; e++)
            if (d->edges[e].v == op + 2 && d->edges[e].u >= 2) {
                int u = d->edges[e].u - 2;
                assert_true(pos[u] < i);
                if (fin[u] > st) st = fin[u];
            }
        if (start) start[op] = st;
        fin[op] = st + dur[op];
        if (fin[op] > T) T = fin[op];
    }
    free(fin);
    free(pos);
    return T;
}

#endif
