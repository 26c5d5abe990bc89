/* Exact pool sizing (src/infer/sizing.c) against exhaustive search:
 *   - on random small models (3 instance types of 1, 2, 4 GPUs, up to 5 units each, random
 *     non-decreasing power curves), every (g, k) of the exact and at-most tables equals the
 *     minimum over every multiset of instances and every split of the load;
 *   - the instances the table returns carry k units on g GPUs at the stated power;
 *   - the cluster split among 3 pools equals the best of every division of the GPUs;
 *   - a model from a capacity table: units, clocks chosen at each load, the refusal of a class
 *     that no configuration serves. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sizing.h"
#include "trace.h"

#define G 10
#define K 12

static prs_infer_pool_model random_model(uint64_t seed)
{
    prs_infer_pool_model m;
    memset(&m, 0, sizeof m);
    m.n_types = 3;
    m.unit_rps = 0.5;
    static const int tps[3] = {1, 2, 4};
    for (int a = 0; a < 3; a++) {
        m.tp[a] = tps[a];
        m.units[a] = 1 + (int)(prs__infer_unit(seed * 31 + (uint64_t)a) * 5);
        double p = 10 + 50 * prs__infer_unit(seed * 97 + (uint64_t)a) * tps[a];
        for (int j = 0; j <= m.units[a]; j++) {
            m.power_w[a][j] = p;
            p += 1 + 20 * prs__infer_unit(seed * 1009 + (uint64_t)(a * 16 + j));
        }
    }
    return m;
}

/* Least power of instances (types >= first, non-decreasing order) using exactly g GPUs and
 * carrying exactly k units: every multiset and every split. */
static double brute(const prs_infer_pool_model *m, int first, int g, int k)
{
    if (g == 0) return k == 0 ? 0 : INFINITY;
    double best = INFINITY;
    for (int a = first; a < m->n_types; a++) {
        if (m->tp[a] > g) continue;
        for (int j = 0; j <= m->units[a] && j <= k; j++) {
            double v = m->power_w[a][j] + brute(m, a, g - m->tp[a], k - j);
            if (v < best) best = v;
        }
    }
    return best;
}

static void test_pool_tables(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        prs_infer_pool_model m = random_model(seed);
        prs_infer_pool_table t;
        prs_error err = {0};
        assert_int_equal(prs_infer_pool_table_build(&m, G, &t, &err), 0);
        for (int g = 0; g <= G; g++)
            for (int k = 0; k <= K && k <= t.kmax; k++) {
                double want = brute(&m, 0, g, k);
                double got = prs_infer_pool_exact(&t, g, k);
                if (!(got == want || fabs(got - want) < 1e-9))
                    fail_msg("seed %d g %d k %d: exact %g, brute force %g", (int)seed, g, k, got,
                             want);
                double most = INFINITY;
                for (int h = 0; h <= g; h++)
                    most = fmin(most, brute(&m, 0, h, k));
                got = prs_infer_pool_atmost(&t, g, k);
                assert_true(got == most || fabs(got - most) < 1e-9);
                /* The instances returned realise the optimum. */
                int count[PRS_INFER_MAX_TPS], lt[64], lu[64];
                int n = prs_infer_pool_instances(&t, g, k, count, lt, lu, 64);
                if (!isfinite(want)) {
                    assert_int_equal(n, -1);
                    continue;
                }
                int gs = 0, ks = 0;
                double pw = 0;
                for (int i = 0; i < n; i++) {
                    gs += m.tp[lt[i]];
                    ks += lu[i];
                    assert_true(lu[i] <= m.units[lt[i]]);
                    pw += m.power_w[lt[i]][lu[i]];
                }
                assert_int_equal(gs, g);
                assert_int_equal(ks, k);
                assert_true(fabs(pw - want) < 1e-9);
            }
        prs_infer_pool_table_free(&t);
    }
}

static void test_cluster_split(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        prs_infer_pool_table t[3];
        const prs_infer_pool_table *tp[3];
        prs_error err = {0};
        for (int p = 0; p < 3; p++) {
            prs_infer_pool_model m = random_model(seed * 7 + (uint64_t)p);
            assert_int_equal(prs_infer_pool_table_build(&m, G, &t[p], &err), 0);
            tp[p] = &t[p];
        }
        int k[3] = {(int)(seed % 4), (int)(seed * 3 % 6), 2};
        int g[3];
        double got = prs_infer_cluster_split(tp, k, 3, G, g);
        double want = INFINITY;
        for (int a = 0; a <= G; a++)
            for (int b = 0; a + b <= G; b++)
                for (int c = 0; a + b + c <= G; c++)
                    want = fmin(want, prs_infer_pool_atmost(&t[0], a, k[0]) +
                                          prs_infer_pool_atmost(&t[1], b, k[1]) +
                                          prs_infer_pool_atmost(&t[2], c, k[2]));
        assert_true(got == want || fabs(got - want) < 1e-9);
        if (isfinite(want)) {
            assert_true(g[0] + g[1] + g[2] <= G);
            double sum = 0;
            for (int p = 0; p < 3; p++)
                sum += prs_infer_pool_exact(&t[p], g[p], k[p]);
            assert_true(fabs(sum - want) < 1e-9);
        }
        for (int p = 0; p < 3; p++)
            prs_infer_pool_table_free(&t[p]);
    }
    /* A load beyond the cluster is infeasible. */
    prs_infer_pool_model m = random_model(3);
    prs_infer_pool_table t;
    prs_error err = {0};
    assert_int_equal(prs_infer_pool_table_build(&m, 4, &t, &err), 0);
    const prs_infer_pool_table *tp[1] = {&t};
    int k[1] = {t.kmax + 1}, g[1];
    assert_true(isinf(prs_infer_cluster_split(tp, k, 1, 4, g)));
    prs_infer_pool_table_free(&t);
}

static void test_model_from_captable(void **state)
{
    (void)state;
    static prs_infer_captable ct;
    memset(&ct, 0, sizeof ct);
    ct.n_tps = 2;
    ct.tps[0] = 4;
    ct.tps[1] = 8;
    ct.n_clocks = 2;
    ct.clocks[0] = 1000;
    ct.clocks[1] = 2000;
    /* Class 0: TP4 carries 2 (slow clock) or 4 req/s; TP8 6 or 12. Power: idle 100 (TP4), 200
     * (TP8); the slow clock draws less at the same load. */
    prs_infer_cap c41 = {2, {150, 200, 250, 300}, 100}, c42 = {4, {250, 400, 550, 700}, 100};
    prs_infer_cap c81 = {6, {300, 400, 500, 600}, 200}, c82 = {12, {500, 800, 1100, 1400}, 200};
    ct.cap[0][0][0] = c41;
    ct.cap[0][0][1] = c42;
    ct.cap[0][1][0] = c81;
    ct.cap[0][1][1] = c82;
    prs_infer_pool_model m;
    prs_error err = {0};
    /* Every TP and clock, full capacity, 12 units for the best (TP8 fast: 12 req/s): 1 req/s a
     * unit. */
    assert_int_equal(prs_infer_pool_model_build(&ct, 0, 3, 1, 12, 1.0, &m, &err), 0);
    assert_int_equal(m.n_types, 2);
    assert_true(fabs(m.unit_rps - 1) < 1e-12);
    assert_int_equal(m.units[0], 4);
    assert_int_equal(m.units[1], 12);
    /* TP8 at 3 req/s: slow clock (cap 6: 3/6*4 = 2 points -> 400 W) beats fast (3/12*4 = 1
     * point -> 500 W). At 8 req/s only the fast clock carries it. */
    assert_int_equal(m.clock_of[1][3], 0);
    assert_true(fabs(m.power_w[1][3] - 400) < 1e-9);
    assert_int_equal(m.clock_of[1][8], 1);
    /* Top clock only, 80 % of capacity: TP8 carries 9.6 req/s = 9 units of 9.6/12. */
    assert_int_equal(prs_infer_pool_model_build(&ct, 0, 2, 0, 12, 0.8, &m, &err), 0);
    assert_int_equal(m.n_types, 1);
    assert_int_equal(m.tp[0], 8);
    assert_int_equal(m.units[0], 12);
    /* A class whose capacity is 0 everywhere is refused, by name. */
    assert_int_equal(prs_infer_pool_model_build(&ct, 8, 3, 1, 12, 1.0, &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "class LL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_tables),
        cmocka_unit_test(test_cluster_split),
        cmocka_unit_test(test_model_from_captable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
