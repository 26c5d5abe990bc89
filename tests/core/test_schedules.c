/* The three pipeline schedules (1F1B, GPipe, Megatron-LM interleaved 1F1B) checked against an
 * independent construction:
 *   1. per-GPU execution orders, re-derived the way the frameworks describe them: Megatron-LM's
 *      non-interleaved 1F1B (S - s - 1 warm-up forwards, then forward/backward pairs, then the
 *      cool-down backwards) checked against docs/planner.md's examples; GPipe (all forwards,
 *      then all backwards); and a transcription of the loop structure of Megatron-LM's
 *      forward_backward_pipelining_with_interleaving (virtual microbatch ids, get_model_chunk_id,
 *      warm-up / steady / cool-down), plus hand-derived orders for S = 2, V = 2, M = 4;
 *   2. the dependency DAG from prs__graph_build, converted back from activity-on-arc form, against
 *      the activity-on-node edge set built here from those orders and the data dependencies
 *      (as a set: no dependency may appear twice, so |E_aoa| = |E_aon| + N, docs/planner.md);
 *   3. iteration times of uniform pipelines against closed forms ((M + S - 1)(f + b) for 1F1B and
 *      GPipe, Megatron-LM's M(f + b) + (S - 1)(f + b) / V for interleaving), and the evaluated
 *      timeline against a longest-path computation on the DAG built here;
 *   4. the planner runs on every schedule (both cost models): unit steps down to the all-fastest
 *      critical path;
 *   5. inconsistent pipeline descriptions are refused with a clear message. */
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

static prs_pipeline make_pipe(prs_schedule sched, int S, int V, int M)
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

static void put(xsched *x, int s, int *pos, prs_instr instr, int chunk, int mb)
{
    assert_true(*pos < x->per);
    x->ops[s * x->per + *pos] = (xop){instr, chunk, mb};
    (*pos)++;
}

/* Megatron-LM's forward_backward_pipelining_without_interleaving for GPU `rank` (its chunk is
 * the GPU itself): num_warmup = min(S - rank - 1, M) forwards, then num_microbatches_remaining
 * steady-state steps of "forward, backward", then the remaining backwards. */
static void megatron_1f1b(xsched *x, int rank)
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
static void gpipe(xsched *x, int rank)
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
static int get_model_chunk_id(const megatron_ctx *c, int microbatch_id, int forward)
{
    int microbatch_id_in_group = microbatch_id % (c->pp * c->V);
    int model_chunk_id = microbatch_id_in_group / c->pp;
    if (!forward) model_chunk_id = c->V - model_chunk_id - 1;
    return model_chunk_id;
}

/* get_microbatch_id_in_model_chunk(iteration_id, forward) */
static int get_microbatch_id_in_model_chunk(const megatron_ctx *c, int iteration_id)
{
    int iteration_group_id = iteration_id / (c->pp * c->V);
    return iteration_group_id * c->pp + iteration_id % c->pp;
}

/* forward_step_helper(k) / backward_step_helper(k): run virtual microbatch k on the local model
 * chunk get_model_chunk_id says; local chunk j of rank r holds layers of model chunk j pp + r. */
static void step_helper(xsched *x, const megatron_ctx *c, int *pos, int k, int forward)
{
    int local = get_model_chunk_id(c, k, forward);
    put(x, c->rank, pos, forward ? PRS_FORWARD : PRS_BACKWARD, local * c->pp + c->rank,
        get_microbatch_id_in_model_chunk(c, k));
}

static void megatron_interleaved(xsched *x, int rank)
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

static void xsched_init(xsched *x, prs_schedule sched, int S, int V, int M)
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

static void xsched_free(xsched *x)
{
    free(x->ops);
    x->ops = NULL;
}

static const char *sched_desc(const xsched *x, char *buf, size_t n)
{
    snprintf(buf, n, "%s S=%d V=%d M=%d", prs_schedule_name(x->pipe.schedule), x->S, x->V, x->M);
    return buf;
}

/* "F3@5": forward of model chunk 3 on microbatch 5. */
static void op_str(char *buf, size_t n, prs_instr instr, int chunk, int mb)
{
    snprintf(buf, n, "%c%d@%d", instr == PRS_FORWARD ? 'F' : 'B', chunk, mb);
}

/* GPU s's order as the library describes it, space-separated ("F0@0 F0@1 ..."). */
static void describe_gpu(const prs_pipeline *p, int s, char *buf, size_t n)
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

static void expected_gpu(const xsched *x, int s, char *buf, size_t n)
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

#define ORDER_BUF 16384

/* Compare the library's orders with the expected ones and check coverage: GPU s runs F and B of
 * every (chunk c with c mod S == s, microbatch) exactly once, and nothing else. */
static void check_orders(const xsched *x)
{
    char what[96];
    sched_desc(x, what, sizeof what);
    assert_int_equal(prs_ops_per_stage(&x->pipe), x->per);
    assert_int_equal(prs_pipeline_chunks(&x->pipe), x->C);
    char *got = malloc(ORDER_BUF), *want = malloc(ORDER_BUF);
    int *count = calloc((size_t)x->C * (size_t)x->M * 2, sizeof *count);
    assert_true(got && want && count);
    for (int s = 0; s < x->S; s++) {
        describe_gpu(&x->pipe, s, got, ORDER_BUF);
        expected_gpu(x, s, want, ORDER_BUF);
        if (strcmp(got, want) != 0)
            print_message("%s GPU %d order\n  library:  %s\n  expected: %s\n", what, s, got, want);
        assert_string_equal(got, want);
        memset(count, 0, sizeof *count * (size_t)x->C * (size_t)x->M * 2);
        for (int pos = 0; pos < x->per; pos++) {
            prs_instr instr, instr2;
            int mb, chunk, mb2;
            assert_int_equal(prs_op_describe_chunk(&x->pipe, s, pos, &instr, &mb, &chunk), 0);
            /* prs_op_describe is the same without the chunk, and a NULL chunk is accepted */
            assert_int_equal(prs_op_describe(&x->pipe, s, pos, &instr2, &mb2), 0);
            assert_int_equal(instr2, instr);
            assert_int_equal(mb2, mb);
            assert_int_equal(prs_op_describe_chunk(&x->pipe, s, pos, &instr2, &mb2, NULL), 0);
            assert_true(chunk >= 0 && chunk < x->C);
            assert_true(mb >= 0 && mb < x->M);
            assert_int_equal(chunk % x->S, s); /* model chunk c runs on GPU c mod S */
            count[(chunk * x->M + mb) * 2 + (int)instr]++;
        }
        for (int c = 0; c < x->C; c++)
            for (int m = 0; m < x->M; m++)
                for (int i = 0; i < 2; i++)
                    assert_int_equal(count[(c * x->M + m) * 2 + i], c % x->S == s ? 1 : 0);
        prs_instr instr;
        int mb, chunk;
        assert_int_equal(prs_op_describe_chunk(&x->pipe, s, x->per, &instr, &mb, &chunk),
                         PRS_ERANGE);
        assert_int_equal(prs_op_describe_chunk(&x->pipe, s, -1, &instr, &mb, &chunk), PRS_ERANGE);
    }
    prs_instr instr;
    int mb, chunk;
    assert_int_equal(prs_op_describe_chunk(&x->pipe, x->S, 0, &instr, &mb, &chunk), PRS_ERANGE);
    assert_int_equal(prs_op_describe_chunk(&x->pipe, -1, 0, &instr, &mb, &chunk), PRS_ERANGE);
    free(got);
    free(want);
    free(count);
}

static void check_literal(prs_schedule sched, int S, int V, int M, int s, const char *want)
{
    prs_pipeline p = make_pipe(sched, S, V, M);
    char *got = malloc(ORDER_BUF);
    assert_non_null(got);
    describe_gpu(&p, s, got, ORDER_BUF);
    if (strcmp(got, want) != 0)
        print_message("%s S=%d V=%d M=%d GPU %d\n  library:  %s\n  expected: %s\n",
                      prs_schedule_name(sched), S, V, M, s, got, want);
    assert_string_equal(got, want);
    free(got);
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

static void test_orders_1f1b(void **state)
{
    (void)state;
    /* docs/planner.md's 1F1B examples (the reference's enumerated TrainSchedule) */
    check_literal(PRS_SCHEDULE_1F1B, 4, 0, 8, 0,
                  "F0@0 F0@1 F0@2 F0@3 B0@0 F0@4 B0@1 F0@5 B0@2 F0@6 B0@3 F0@7 B0@4 B0@5 B0@6 "
                  "B0@7");
    check_literal(PRS_SCHEDULE_1F1B, 4, 0, 8, 3,
                  "F3@0 B3@0 F3@1 B3@1 F3@2 B3@2 F3@3 B3@3 F3@4 B3@4 F3@5 B3@5 F3@6 B3@6 F3@7 "
                  "B3@7");
    for (int s = 0; s < 3; s++) {
        char want[64];
        snprintf(want, sizeof want, "F%d@0 F%d@1 B%d@0 B%d@1", s, s, s, s);
        check_literal(PRS_SCHEDULE_1F1B, 4, 0, 2, s, want);
    }
    check_literal(PRS_SCHEDULE_1F1B, 4, 1, 2, 3, "F3@0 B3@0 F3@1 B3@1");
    for (size_t i = 0; i < NELEM(plain_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_1F1B, plain_cases[i][0], 1, plain_cases[i][1]);
        check_orders(&x);
        xsched_free(&x);
    }
}

static void test_orders_gpipe(void **state)
{
    (void)state;
    check_literal(PRS_SCHEDULE_GPIPE, 3, 0, 4, 1, "F1@0 F1@1 F1@2 F1@3 B1@0 B1@1 B1@2 B1@3");
    for (size_t i = 0; i < NELEM(plain_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_GPIPE, plain_cases[i][0], 0, plain_cases[i][1]);
        check_orders(&x);
        xsched_free(&x);
    }
}

static void test_orders_interleaved(void **state)
{
    (void)state;
    /* Worked by hand from Megatron-LM's rules for pp = 2, V = 2, M = 4 (model chunks 0, 2 on GPU
     * 0 and 1, 3 on GPU 1). GPU 0: 4 warm-up forwards (groups of pp = 2 microbatches per chunk);
     * GPU 1: 2. */
    check_literal(PRS_SCHEDULE_INTERLEAVED, 2, 2, 4, 0,
                  "F0@0 F0@1 F2@0 F2@1 F0@2 B2@0 F0@3 B2@1 F2@2 B0@0 F2@3 B0@1 B2@2 B2@3 B0@2 "
                  "B0@3");
    check_literal(PRS_SCHEDULE_INTERLEAVED, 2, 2, 4, 1,
                  "F1@0 F1@1 F3@0 B3@0 F3@1 B3@1 F1@2 B1@0 F1@3 B1@1 F3@2 B3@2 F3@3 B3@3 B1@2 "
                  "B1@3");
    for (size_t i = 0; i < NELEM(interleaved_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_INTERLEAVED, interleaved_cases[i][0], interleaved_cases[i][1],
                    interleaved_cases[i][2]);
        check_orders(&x);
        xsched_free(&x);
    }
}

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

static int edge_cmp(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->u != y->u) return x->u < y->u ? -1 : 1;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return 0;
}

static void add_edge(xdag *d, int cap, int u, int v)
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
static void xdag_build(xdag *d, const xsched *x)
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

static void xdag_free(xdag *d)
{
    free(d->edges);
    free(d->topo);
}

/* Longest path: start[op] = earliest start when op takes dur[op]; returns the makespan. */
static long xdag_cpm(const xdag *d, const long *dur, long *start)
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

/* The AON edges of a prsG graph: every AOA node must be L(v) or R(v) of exactly one AON node v
 * (op arc i: L(2+i) -> R(2+i); the source's own arc leaves g->source, the sink's enters
 * g->sink); every other arc is a dummy R(u) -> L(v), i.e. AON edge u -> v. */
static edge *aon_edges_of(const prs__graph_graph *g, int naon, int *nedges)
{
    int *lof = malloc(sizeof *lof * (size_t)g->nnodes),
        *rof = malloc(sizeof *rof * (size_t)g->nnodes);
    unsigned char *own = calloc((size_t)g->narcs, 1);
    edge *e = malloc(sizeof *e * (size_t)(g->narcs ? g->narcs : 1));
    assert_true(lof && rof && own && e);
    for (int n = 0; n < g->nnodes; n++)
        lof[n] = rof[n] = -1;
    int nop_arcs = 0;
    for (int a = 0; a < g->narcs; a++) {
        const prs__graph_arc *arc = &g->arcs[a];
        assert_true(arc->from >= 0 && arc->from < g->nnodes);
        assert_true(arc->to >= 0 && arc->to < g->nnodes);
        if (arc->op < 0) continue;
        assert_true(arc->op < g->nops);
        assert_int_equal(g->op_arc[arc->op], a);
        int v = 2 + arc->op;
        assert_int_equal(lof[arc->from], -1);
        assert_int_equal(rof[arc->to], -1);
        lof[arc->from] = v;
        rof[arc->to] = v;
        own[a] = 1;
        nop_arcs++;
    }
    assert_int_equal(nop_arcs, g->nops);
    /* the source's own arc: the one dummy arc out of g->source; the sink's: into g->sink */
    int src_arc = -1, snk_arc = -1;
    for (int a = 0; a < g->narcs; a++) {
        if (g->arcs[a].from == g->source) {
            assert_int_equal(src_arc, -1);
            src_arc = a;
        }
        if (g->arcs[a].to == g->sink) {
            assert_int_equal(snk_arc, -1);
            snk_arc = a;
        }
    }
    assert_true(src_arc >= 0 && snk_arc >= 0 && src_arc != snk_arc);
    assert_true(g->arcs[src_arc].op < 0 && g->arcs[snk_arc].op < 0);
    lof[g->source] = 0;
    assert_int_equal(rof[g->arcs[src_arc].to], -1);
    rof[g->arcs[src_arc].to] = 0;
    rof[g->sink] = 1;
    assert_int_equal(lof[g->arcs[snk_arc].from], -1);
    lof[g->arcs[snk_arc].from] = 1;
    own[src_arc] = own[snk_arc] = 1;
    /* 2 AOA nodes per AON node, each one L or R of exactly one */
    assert_int_equal(g->nnodes, 2 * naon);
    for (int n = 0; n < g->nnodes; n++)
        assert_true((lof[n] >= 0) != (rof[n] >= 0));
    int ne = 0;
    for (int a = 0; a < g->narcs; a++) {
        if (own[a]) continue;
        assert_true(g->arcs[a].op < 0);
        int u = rof[g->arcs[a].from], v = lof[g->arcs[a].to];
        assert_true(u >= 0 && v >= 0); /* a dummy runs from some R(u) to some L(v) */
        e[ne++] = (edge){u, v};
    }
    free(lof);
    free(rof);
    free(own);
    qsort(e, (size_t)ne, sizeof *e, edge_cmp);
    *nedges = ne;
    return e;
}

/* Expected count of AON edges (chain + data + turn-around + source/sink links, no duplicates). */
static long expected_edge_count(const xsched *x, long turnaround_also_in_chain)
{
    long chain = (long)x->S * (x->per - 1);
    long data = 2L * x->M * (x->C - 1);
    long turn = x->pipe.schedule == PRS_SCHEDULE_INTERLEAVED ? x->M - turnaround_also_in_chain : 0;
    return chain + data + turn + 2; /* source -> F(0,0), B(0,M-1) -> sink */
}

static void check_dag(const xsched *x)
{
    char what[96];
    sched_desc(x, what, sizeof what);
    xdag d;
    xdag_build(&d, x);
    prs__graph_graph g;
    prs_error err = {0, ""};
    int rc = prs__graph_build(&x->pipe, &g, &err);
    if (rc) print_message("%s: prs__graph_build: %s\n", what, err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(g.nops, d.nops);
    assert_int_equal(g.ops_per_stage, x->per);
    for (int op = 0; op < g.nops; op++) {
        const xop *o = &x->ops[op];
        assert_int_equal(g.op_chunk[op], o->chunk);
        assert_int_equal(g.op_mb[op], o->mb);
        assert_int_equal(g.op_type[op], o->chunk * 2 + (int)o->instr);
    }
    int ne = 0;
    edge *got = aon_edges_of(&g, d.naon, &ne);
    /* the F -> B turn-around edges of the last chunk that the last GPU's order already has */
    long dup = 0;
    if (x->pipe.schedule == PRS_SCHEDULE_INTERLEAVED) {
        const xop *last = &x->ops[(x->S - 1) * x->per];
        for (int pos = 0; pos + 1 < x->per; pos++)
            if (last[pos].instr == PRS_FORWARD && last[pos].chunk == x->C - 1 &&
                last[pos + 1].instr == PRS_BACKWARD && last[pos + 1].chunk == x->C - 1 &&
                last[pos + 1].mb == last[pos].mb)
                dup++;
    }
    assert_int_equal(d.nedges, expected_edge_count(x, dup));
    /* distinct AON edges: exactly the expected set */
    int nd = 0;
    for (int i = 0; i < ne; i++)
        if (i == 0 || edge_cmp(&got[i], &got[i - 1]) != 0) got[nd++] = got[i];
    int repeated = ne - nd;
    int i = 0, j = 0, missing = 0, extra = 0;
    while (i < d.nedges || j < nd) {
        int c = i >= d.nedges ? 1 : j >= nd ? -1 : edge_cmp(&d.edges[i], &got[j]);
        if (c < 0) {
            if (missing++ < 5)
                print_message("%s: missing AON edge %d -> %d\n", what, d.edges[i].u, d.edges[i].v);
            i++;
        } else if (c > 0) {
            if (extra++ < 5)
                print_message("%s: unexpected AON edge %d -> %d\n", what, got[j].u, got[j].v);
            j++;
        } else {
            i++, j++;
        }
    }
    assert_int_equal(missing, 0);
    assert_int_equal(extra, 0);
    /* The AON graph is a set of edges (the reference builds a networkx DiGraph), so
     * |E_aoa| = |E_aon| + N (docs/planner.md): a dependency that is also a same-GPU order edge
     * (on the last GPU of Megatron-LM's interleaving, F(C-1,m) always runs right before
     * B(C-1,m)) must not become a second, parallel dummy arc. */
    if (repeated)
        print_message("%s: %d AON edge(s) emitted twice (%d arcs, expected %d distinct edges + "
                      "%d nodes = %d)\n",
                      what, repeated, g.narcs, d.nedges, d.naon, d.nedges + d.naon);
    assert_int_equal(repeated, 0);
    assert_int_equal(g.narcs, d.nedges + d.naon); /* |E_aoa| = |E_aon| + N (docs/planner.md) */
    /* the graph's topological order is one */
    int *at = malloc(sizeof *at * (size_t)g.nnodes);
    assert_non_null(at);
    for (int k = 0; k < g.nnodes; k++)
        at[k] = -1;
    for (int k = 0; k < g.nnodes; k++) {
        assert_true(g.topo[k] >= 0 && g.topo[k] < g.nnodes);
        assert_int_equal(at[g.topo[k]], -1);
        at[g.topo[k]] = k;
    }
    for (int a = 0; a < g.narcs; a++)
        assert_true(at[g.arcs[a].from] < at[g.arcs[a].to]);
    free(at);
    free(got);
    prs__graph_free(&g);
    xdag_free(&d);
}

static void test_dag_1f1b(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(plain_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_1F1B, plain_cases[i][0], 0, plain_cases[i][1]);
        check_dag(&x);
        xsched_free(&x);
    }
    /* docs/planner.md: S = 8, M = 12 has 194 nodes and 354 edges, 388 AOA nodes, 548 arcs */
    xsched x;
    xsched_init(&x, PRS_SCHEDULE_1F1B, 8, 0, 12);
    xdag d;
    xdag_build(&d, &x);
    assert_int_equal(d.naon, 194);
    assert_int_equal(d.nedges, 354);
    prs__graph_graph g;
    assert_int_equal(prs__graph_build(&x.pipe, &g, NULL), 0);
    assert_int_equal(g.nnodes, 388);
    assert_int_equal(g.narcs, 548);
    prs__graph_free(&g);
    xdag_free(&d);
    xsched_free(&x);
}

static void test_dag_gpipe(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(plain_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_GPIPE, plain_cases[i][0], 1, plain_cases[i][1]);
        check_dag(&x);
        xsched_free(&x);
    }
}

static void test_dag_interleaved(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(interleaved_cases); i++) {
        xsched x;
        xsched_init(&x, PRS_SCHEDULE_INTERLEAVED, interleaved_cases[i][0], interleaved_cases[i][1],
                    interleaved_cases[i][2]);
        check_dag(&x);
        xsched_free(&x);
    }
}

/* ---- Timing of uniform pipelines: closed forms ---- */

#define CLOCK 1000

/* A profile of `chunks` stages with one clock: every forward takes fq units, every backward bq
 * (a hair above the multiple of the unit so that flooring gives exactly fq, bq). */
static prs_profile *uniform_profile(int chunks, long fq, long bq, double unit)
{
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    for (int c = 0; c < chunks; c++)
        for (int i = 0; i < 2; i++) {
            long q = i == 0 ? fq : bq;
            prs_profile_row r = {
                c, (prs_instr)i, CLOCK, ((double)q + 1e-4) * unit, (double)q * 0.25 + 0.5 * c, 0};
            prs_error err = {0, ""};
            int rc = prs_profile_add(p, &r, &err);
            if (rc) print_message("prs_profile_add: %s\n", err.msg);
            assert_int_equal(rc, 0);
        }
    return p;
}

/* Evaluate the uniform pipeline; check the library's time, energy and timeline against the DAG
 * built here; return the iteration time in units. */
static long uniform_time(const xsched *x, long fq, long bq)
{
    char what[96];
    sched_desc(x, what, sizeof what);
    prs_pipeline p = x->pipe;
    p.blocking_power_w = 40.0;
    double unit = p.unit_time_s;
    prs_profile *prof = uniform_profile(x->C, fq, bq, unit);
    int n = x->S * x->per;
    int *clocks = malloc(sizeof *clocks * (size_t)n);
    prs_timeline_op *tl = calloc((size_t)n, sizeof *tl);
    long *dur = malloc(sizeof *dur * (size_t)n), *start = malloc(sizeof *start * (size_t)n);
    assert_true(clocks && tl && dur && start);
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < n; op++) {
        clocks[op] = CLOCK;
        const xop *o = &x->ops[op];
        dur[op] = o->instr == PRS_FORWARD ? fq : bq;
        sum_q += dur[op];
        sum_e += (double)dur[op] * 0.25 + 0.5 * o->chunk;
    }
    xdag d;
    xdag_build(&d, x);
    long T = xdag_cpm(&d, dur, start);
    double t_s = -1, e_j = -1;
    prs_error err = {0, ""};
    int rc = prs_evaluate_plan(prof, &p, clocks, &t_s, &e_j, &err);
    if (rc) print_message("%s: prs_evaluate_plan: %s\n", what, err.msg);
    assert_int_equal(rc, 0);
    if (fabs(t_s - (double)T * unit) > 1e-12)
        print_message("%s f=%ld b=%ld: evaluated %.6f s, longest path here %ld units\n", what, fq,
                      bq, t_s, T);
    assert_true(fabs(t_s - (double)T * unit) <= 1e-12);
    double want_e = sum_e + p.blocking_power_w * (double)((long)x->S * T - sum_q) * unit;
    assert_true(fabs(e_j - want_e) <= 1e-9 * fabs(want_e));
    double t2 = -1, e2 = -1;
    assert_int_equal(prs_plan_timeline(prof, &p, clocks, tl, &t2, &e2, &err), 0);
    assert_true(t2 == t_s && e2 == e_j);
    for (int op = 0; op < n; op++) {
        const xop *o = &x->ops[op];
        assert_int_equal(tl[op].stage, op / x->per);
        assert_int_equal(tl[op].pos, op % x->per);
        assert_int_equal(tl[op].chunk, o->chunk);
        assert_int_equal(tl[op].microbatch, o->mb);
        assert_int_equal(tl[op].instr, o->instr);
        assert_int_equal(tl[op].freq_mhz, CLOCK);
        assert_true(fabs(tl[op].start_s - (double)start[op] * unit) <= 1e-12);
        assert_true(fabs(tl[op].end_s - (double)(start[op] + dur[op]) * unit) <= 1e-12);
    }
    /* no GPU runs two computations at once */
    for (int s = 0; s < x->S; s++)
        for (int k = 1; k < x->per; k++)
            assert_true(tl[s * x->per + k].start_s >= tl[s * x->per + k - 1].end_s - 1e-12);
    xdag_free(&d);
    free(clocks);
    free(tl);
    free(dur);
    free(start);
    prs_profile_free(prof);
    return T;
}

static const long fb_pairs[][2] = {{3, 6}, {2, 2}, {1, 3}, {4, 5}, {5, 10}, {2, 1}, {5, 3}};

static void test_time_plain(void **state)
{
    (void)state;
    prs_schedule scheds[] = {PRS_SCHEDULE_1F1B, PRS_SCHEDULE_GPIPE};
    for (size_t k = 0; k < NELEM(scheds); k++)
        for (size_t i = 0; i < NELEM(plain_cases); i++)
            for (size_t j = 0; j < NELEM(fb_pairs); j++) {
                xsched x;
                int S = plain_cases[i][0], M = plain_cases[i][1];
                xsched_init(&x, scheds[k], S, 0, M);
                long f = fb_pairs[j][0], b = fb_pairs[j][1];
                long T = uniform_time(&x, f, b);
                long want = (long)(M + S - 1) * (f + b);
                if (T != want)
                    print_message("%s S=%d M=%d f=%ld b=%ld: T = %ld, (M+S-1)(f+b) = %ld\n",
                                  prs_schedule_name(scheds[k]), S, M, f, b, T, want);
                assert_int_equal(T, want);
                xsched_free(&x);
            }
}

/* Interleaved, each chunk taking f/V and b/V: Megatron-LM's M (f + b) + (S - 1)(f + b) / V (its
 * bubble (S - 1)(f + b) / V). Units per chunk: fc = f / V, bc = b / V. It holds exactly in every
 * case here, b < f included. */
static void test_time_interleaved(void **state)
{
    (void)state;
    static const long chunk_fb[][2] = {{1, 2}, {2, 4}, {1, 1}, {3, 3}, {2, 3},
                                       {1, 3}, {2, 1}, {3, 1}, {3, 2}};
    int mismatches = 0;
    for (size_t i = 0; i < NELEM(interleaved_cases); i++)
        for (size_t j = 0; j < NELEM(chunk_fb); j++) {
            int S = interleaved_cases[i][0], V = interleaved_cases[i][1];
            int M = interleaved_cases[i][2];
            xsched x;
            xsched_init(&x, PRS_SCHEDULE_INTERLEAVED, S, V, M);
            long fc = chunk_fb[j][0], bc = chunk_fb[j][1];
            long T = uniform_time(&x, fc, bc);
            /* f = V fc, b = V bc: M (f + b) + (S - 1)(f + b) / V */
            long want = (long)M * V * (fc + bc) + (long)(S - 1) * (fc + bc);
            if (T != want) {
                print_message("interleaved S=%d V=%d M=%d f/V=%ld b/V=%ld: T = %ld, "
                              "M(f+b) + (S-1)(f+b)/V = %ld\n",
                              S, V, M, fc, bc, T, want);
                mismatches++;
            }
            xsched_free(&x);
        }
    assert_int_equal(mismatches, 0);
}

/* ---- Planning on every schedule ---- */

static long all_fastest_T(const xsched *x, const prs_profile *prof, double unit)
{
    long *qmin = malloc(sizeof *qmin * (size_t)x->C * 2);
    assert_non_null(qmin);
    for (int k = 0; k < x->C * 2; k++)
        qmin[k] = -1;
    const prs_profile_row *rows = prs_profile_rows(prof);
    for (size_t i = 0; i < prs_profile_nrows(prof); i++) {
        if (rows[i].stage >= x->C) continue;
        long q = prs__model_quantize(rows[i].time_s, unit);
        long *m = &qmin[rows[i].stage * 2 + (int)rows[i].instr];
        if (*m < 0 || q < *m) *m = q;
    }
    int n = x->S * x->per;
    long *dur = malloc(sizeof *dur * (size_t)n);
    assert_non_null(dur);
    for (int op = 0; op < n; op++) {
        dur[op] = qmin[x->ops[op].chunk * 2 + (int)x->ops[op].instr];
        assert_true(dur[op] > 0);
    }
    xdag d;
    xdag_build(&d, x);
    long T = xdag_cpm(&d, dur, NULL);
    xdag_free(&d);
    free(dur);
    free(qmin);
    return T;
}

static void check_plan(prs_schedule sched, int S, int V, int M)
{
    xsched x;
    xsched_init(&x, sched, S, V, M);
    char what[96];
    sched_desc(&x, what, sizeof what);
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.gpu = prs_gpu_preset_find("a100");
    assert_non_null(so.gpu);
    so.stages = x.C;
    prs_profile *prof = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_synth_profile(&so, &prof, &err), 0);
    prs_cost_model models[] = {PRS_COST_EXP, PRS_COST_HULL};
    for (size_t k = 0; k < NELEM(models); k++) {
        prs_plan_opts o;
        prs_plan_opts_default(&o);
        o.pipe = x.pipe;
        o.pipe.blocking_power_w = so.gpu->blocking_power_w;
        o.cost_model = models[k];
        o.frontier = PRS_FRONTIER_RAW; /* one point per iteration, one unit apart */
        prs_frontier *f = NULL;
        int rc = prs_plan(prof, &o, &f, &err);
        if (rc)
            print_message("%s %s: prs_plan: %s\n", what, prs_cost_model_name(models[k]), err.msg);
        assert_int_equal(rc, 0);
        size_t n = prs_frontier_size(f);
        assert_true(n > 0);
        for (size_t i = 1; i < n; i++) {
            const prs_frontier_point *a = prs_frontier_point_at(f, i - 1);
            const prs_frontier_point *b = prs_frontier_point_at(f, i);
            if (a->time_units - b->time_units != 1)
                print_message("%s %s: point %zu at %ld units, point %zu at %ld\n", what,
                              prs_cost_model_name(models[k]), i - 1, a->time_units, i,
                              b->time_units);
            assert_int_equal(a->time_units - b->time_units, 1);
        }
        long Tmin = all_fastest_T(&x, prof, o.pipe.unit_time_s);
        const prs_frontier_point *last = prs_frontier_point_at(f, n - 1);
        if (fabs(last->eval_time_s - (double)Tmin * o.pipe.unit_time_s) > 1e-12)
            print_message("%s %s: last plan evaluates to %.6f s, all-fastest path %ld units\n",
                          what, prs_cost_model_name(models[k]), last->eval_time_s, Tmin);
        assert_true(fabs(last->eval_time_s - (double)Tmin * o.pipe.unit_time_s) <= 1e-12);
        assert_int_equal(last->time_units, Tmin);
        /* the last plan re-evaluates to the same figures */
        int nclk = S * prs_ops_per_stage(&o.pipe);
        int *clk = malloc(sizeof *clk * (size_t)nclk);
        assert_non_null(clk);
        assert_int_equal(prs_frontier_plan(f, n - 1, clk, &err), 0);
        double t = 0, e = 0;
        assert_int_equal(prs_evaluate_plan(prof, &o.pipe, clk, &t, &e, &err), 0);
        assert_true(fabs(t - last->eval_time_s) <= 1e-12);
        assert_true(fabs(e - last->eval_energy_j) <= 1e-9 * fabs(e));
        const prs_pipeline *fp = prs_frontier_pipeline(f);
        assert_int_equal(fp->schedule, sched);
        assert_int_equal(prs_pipeline_chunks(fp), x.C);
        free(clk);
        prs_frontier_free(f);
    }
    prs_profile_free(prof);
    xsched_free(&x);
}

static void test_plan_every_schedule(void **state)
{
    (void)state;
    check_plan(PRS_SCHEDULE_1F1B, 3, 0, 4);
    check_plan(PRS_SCHEDULE_GPIPE, 3, 0, 4);
    check_plan(PRS_SCHEDULE_GPIPE, 2, 1, 3);
    check_plan(PRS_SCHEDULE_INTERLEAVED, 2, 2, 4);
    check_plan(PRS_SCHEDULE_INTERLEAVED, 3, 2, 6);
}

/* ---- Bad pipeline descriptions ---- */

static void expect_refused(const prs_profile *prof, prs_pipeline pipe, int code, const char *s1,
                           const char *s2)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = pipe;
    prs_frontier *f = (prs_frontier *)&o; /* any non-NULL: a failing prs_plan sets NULL */
    prs_error err = {0, ""};
    int rc = prs_plan(prof, &o, &f, &err);
    if (rc != code || !strstr(err.msg, s1) || (s2 && !strstr(err.msg, s2)))
        print_message("%s S=%d V=%d M=%d: got %d \"%s\", expected %d with \"%s\"%s%s\n",
                      prs_schedule_name(pipe.schedule), pipe.stages, pipe.virtual_stages,
                      pipe.microbatches, rc, err.msg, code, s1, s2 ? " and " : "", s2 ? s2 : "");
    assert_int_equal(rc, code);
    assert_null(f);
    assert_non_null(strstr(err.msg, s1));
    if (s2) assert_non_null(strstr(err.msg, s2));
    /* evaluation refuses the same pipeline */
    int n =
        pipe.stages * 2 * pipe.microbatches * (pipe.virtual_stages > 1 ? pipe.virtual_stages : 1);
    int *clk = malloc(sizeof *clk * (size_t)n);
    assert_non_null(clk);
    for (int i = 0; i < n; i++)
        clk[i] = 1410;
    double t, e;
    prs_error err2 = {0, ""};
    assert_int_equal(prs_evaluate_plan(prof, &pipe, clk, &t, &e, &err2), code);
    assert_non_null(strstr(err2.msg, s1));
    free(clk);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = 4;
    prs_profile *prof4 = NULL, *prof2 = NULL;
    assert_int_equal(prs_synth_profile(&so, &prof4, NULL), 0);
    so.stages = 2;
    assert_int_equal(prs_synth_profile(&so, &prof2, NULL), 0);
    /* interleaved needs V >= 2 */
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 1, 4), PRS_EINVAL,
                   "at least 2 virtual stages", "got 1");
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 0, 4), PRS_EINVAL,
                   "at least 2 virtual stages", "got 0");
    /* V > 1 needs interleaving */
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_1F1B, 2, 2, 4), PRS_EINVAL,
                   "need the interleaved schedule", "1f1b");
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_GPIPE, 2, 2, 4), PRS_EINVAL,
                   "need the interleaved schedule", "gpipe");
    /* M a multiple of S */
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 2, 5), PRS_EINVAL,
                   "multiple of stages", "5 microbatches");
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 2, 1), PRS_EINVAL,
                   "multiple of stages", "2 stages");
    /* the profile must cover S V model chunks */
    expect_refused(prof2, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 2, 4), PRS_EPARSE,
                   "stage 2 has no forward rows", NULL);
    expect_refused(prof4, make_pipe(PRS_SCHEDULE_INTERLEAVED, 2, 3, 4), PRS_EPARSE,
                   "stage 4 has no forward rows", NULL);
    /* V = 0 and V = 1 are both "not interleaved" for the other schedules */
    prs_pipeline ok = make_pipe(PRS_SCHEDULE_GPIPE, 2, 1, 2);
    assert_int_equal(prs_pipeline_check(&ok, NULL), 0);
    ok.virtual_stages = 0;
    assert_int_equal(prs_pipeline_check(&ok, NULL), 0);
    prs_profile_free(prof2);
    prs_profile_free(prof4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orders_1f1b),         cmocka_unit_test(test_orders_gpipe),
        cmocka_unit_test(test_orders_interleaved),  cmocka_unit_test(test_dag_1f1b),
        cmocka_unit_test(test_dag_gpipe),           cmocka_unit_test(test_dag_interleaved),
        cmocka_unit_test(test_time_plain),          cmocka_unit_test(test_time_interleaved),
        cmocka_unit_test(test_plan_every_schedule), cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
