/* The three pipeline schedules (1F1B, GPipe, Megatron-LM interleaved 1F1B) checked against an
 * independent construction (sched_ref.h; test_schedule_times.c checks iteration times and the
 * planner on them):
 *   1. per-GPU execution orders, re-derived the way the frameworks describe them: Megatron-LM's
 *      non-interleaved 1F1B (S - s - 1 warm-up forwards, then forward/backward pairs, then the
 *      cool-down backwards) checked against docs/planner.md's examples; GPipe (all forwards,
 *      then all backwards); and a transcription of the loop structure of Megatron-LM's
 *      forward_backward_pipelining_with_interleaving (virtual microbatch ids, get_model_chunk_id,
 *      warm-up / steady / cool-down), plus hand-derived orders for S = 2, V = 2, M = 4;
 *   2. the dependency DAG from prs__graph_build, converted back from activity-on-arc form, against
 *      the activity-on-node edge set built here from those orders and the data dependencies
 *      (as a set: no dependency may appear twice, so |E_aoa| = |E_aon| + N, docs/planner.md);
 *   3. inconsistent pipeline descriptions are refused with a clear message. */
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
#include "sched_ref.h"

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
        cmocka_unit_test(test_orders_1f1b),        cmocka_unit_test(test_orders_gpipe),
        cmocka_unit_test(test_orders_interleaved), cmocka_unit_test(test_dag_1f1b),
        cmocka_unit_test(test_dag_gpipe),          cmocka_unit_test(test_dag_interleaved),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
