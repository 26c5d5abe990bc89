/* Min cut with lower bounds (maxflow.c) against brute force: on small random networks every
 * source-side set S is enumerated, its cost sum_{forward} ub - sum_{backward} lb computed, and
 * the solver's cut must be the source-minimal minimiser (the intersection of all minimisers),
 * whatever starting flow it is given. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plan_int.h"
#include "rng.h"

static uint64_t rng_state;
static uint64_t next_u64(void)
{
    return prs_test_rng_next(&rng_state);
}
static double uniform(void)
{
    return prs_test_rng_unif(&rng_state);
}
static int below(int n)
{
    return (int)(next_u64() % (uint64_t)n);
}

typedef struct arc {
    int from, to;
    double lb, ub, flow;
} arc;

/* Random DAG on n nodes (0 = source, n-1 = sink) with a feasible flow, then bounds around it. */
static int make_case(int n, arc *arcs)
{
    int m = 0;
    for (int u = 0; u < n; u++)
        for (int v = u + 1; v < n; v++)
            if (uniform() < 0.45) arcs[m++] = (arc){u, v, 0, 0, 0};
    /* route a few unit-ish flows along random source-sink paths through existing arcs */
    for (int p = 0; p < 4; p++) {
        double amount = 0.5 + 2 * uniform();
        int v = 0;
        while (v != n - 1) {
            int choices[64], nc = 0;
            for (int a = 0; a < m; a++)
                if (arcs[a].from == v) choices[nc++] = a;
            if (nc == 0) break;
            int a = choices[below(nc)];
            arcs[a].flow += amount;
            v = arcs[a].to;
        }
        if (v != n - 1) { /* dead end: undo by zeroing this instance's flows */
            for (int a = 0; a < m; a++)
                arcs[a].flow = 0;
            return make_case(n, arcs);
        }
    }
    for (int a = 0; a < m; a++) {
        double f = arcs[a].flow;
        int kind = below(5);
        if (kind == 0) { /* dummy-like */
            arcs[a].lb = 0;
            arcs[a].ub = INFINITY;
        } else if (kind == 1) { /* tight: lb == ub (a linear cost segment) */
            arcs[a].lb = arcs[a].ub = f;
        } else {
            arcs[a].lb = f * uniform();
            arcs[a].ub = f + 3 * uniform();
            if (below(4) == 0) arcs[a].ub = INFINITY;
        }
    }
    return m;
}

static double cut_cost(const arc *arcs, int m, unsigned mask)
{
    double c = 0;
    for (int a = 0; a < m; a++) {
        int fs = (mask >> arcs[a].from) & 1, ts = (mask >> arcs[a].to) & 1;
        if (fs && !ts)
            c += arcs[a].ub;
        else if (!fs && ts)
            c -= arcs[a].lb;
    }
    return c;
}

/* The source-minimal minimum cut by brute force over every S holding 0 and not n-1 (the
 * intersection of all minimisers); its cost into *best (INFINITY when every cut is). */
static unsigned brute_cut(const arc *arcs, int m, int n, double *best)
{
    unsigned inter = ~0u;
    *best = INFINITY;
    for (unsigned mask = 0; mask < (1u << n); mask++) {
        if (!(mask & 1) || (mask >> (n - 1)) & 1) continue;
        double c = cut_cost(arcs, m, mask);
        if (c < *best - 1e-9) {
            *best = c;
            inter = mask;
        } else if (fabs(c - *best) <= 1e-9) {
            inter &= mask;
        }
    }
    return inter;
}

static void random_cuts(void **state)
{
    (void)state;
    rng_state = 12345;
    prs__flow_net *net = prs__flow_new(16, 256);
    assert_non_null(net);
    int infinite = 0, finite = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int n = 3 + below(8);
        arc arcs[128];
        int m = make_case(n, arcs);
        double best;
        unsigned inter = brute_cut(arcs, m, n, &best);
        for (int start = 0; start < 3; start++) {
            prs__flow_reset(net, n, 0, n - 1);
            for (int a = 0; a < m; a++) {
                double f0 = start == 0 ? arcs[a].lb : start == 1 ? arcs[a].flow : 10 * uniform();
                prs__flow_add(net, arcs[a].from, arcs[a].to, arcs[a].lb, arcs[a].ub, f0);
            }
            unsigned char side[16];
            int rc = prs__flow_min_cut(net, 1e-9, side);
            if (isinf(best)) {
                assert_int_equal(rc, PRS_ERANGE);
                infinite++;
                continue;
            }
            assert_int_equal(rc, 0);
            finite++;
            unsigned got = 0;
            for (int v = 0; v < n; v++)
                got |= (unsigned)side[v] << v;
            if (got != inter)
                print_message("case %d start %d: got set %#x, want %#x (cost %g vs %g)\n", iter,
                              start, got, inter, cut_cost(arcs, m, got), best);
            assert_int_equal(got, inter);
            /* the flow handed back for warm starts respects the bounds */
            for (int a = 0; a < m; a++) {
                double f = prs__flow_flow(net, a);
                assert_true(f >= arcs[a].lb - 1e-9 && f <= arcs[a].ub + 1e-9);
            }
        }
    }
    print_message("%d finite and %d infinite cuts checked\n", finite, infinite);
    assert_true(finite > 1000 && infinite > 50);
    prs__flow_free(net);
}

/* New bounds for arc a around its designed flow (make_case's kinds). */
static void new_bounds(arc *a)
{
    double f = a->flow;
    int kind = below(4);
    a->lb = kind == 0 ? 0 : kind == 1 ? f : f * uniform();
    a->ub = kind == 0 || below(4) == 0 ? INFINITY : kind == 1 ? f : f + 3 * uniform();
}

/* Chains of solves where each solve after the first changes a few arcs' bounds with
 * prs__flow_rebound and keeps everything else as the last solve left it: every cut must be
 * the brute-force source-minimal minimiser of the bounds then in force. */
static void rebound_chains(void **state)
{
    (void)state;
    rng_state = 4242;
    prs__flow_net *net = prs__flow_new(16, 256);
    assert_non_null(net);
    int checked = 0;
    for (int iter = 0; iter < 400; iter++) {
        int n = 3 + below(8);
        arc arcs[128];
        int m = make_case(n, arcs);
        prs__flow_reset(net, n, 0, n - 1);
        for (int a = 0; a < m; a++)
            prs__flow_add(net, arcs[a].from, arcs[a].to, arcs[a].lb, arcs[a].ub, arcs[a].lb);
        for (int round = 0; round < 8; round++) {
            if (round > 0) /* a few arcs get new bounds; the designed flow stays feasible */
                for (int a = 0; a < m; a++)
                    if (below(3) == 0) {
                        new_bounds(&arcs[a]);
                        prs__flow_rebound(net, a, arcs[a].lb, arcs[a].ub);
                    }
            double best;
            unsigned want = brute_cut(arcs, m, n, &best);
            unsigned char side[16];
            int rc = prs__flow_min_cut(net, 1e-9, side);
            if (isinf(best)) { /* the network is spent: the chain ends */
                assert_int_equal(rc, PRS_ERANGE);
                break;
            }
            assert_int_equal(rc, 0);
            unsigned got = 0;
            for (int v = 0; v < n; v++)
                got |= (unsigned)side[v] << v;
            if (got != want)
                print_message("case %d round %d: got set %#x, want %#x\n", iter, round, got, want);
            assert_int_equal(got, want);
            for (int a = 0; a < m; a++) {
                double f = prs__flow_flow(net, a);
                assert_true(f >= arcs[a].lb - 1e-9 && f <= arcs[a].ub + 1e-9);
            }
            checked += round > 0;
        }
    }
    print_message("%d solves after prs__flow_rebound checked\n", checked);
    assert_true(checked > 500);
    prs__flow_free(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(random_cuts),
                                       cmocka_unit_test(rebound_chains)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
