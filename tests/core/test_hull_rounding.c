/* Rounding a relaxed plan at the relaxation's price of time (docs/planner.md, 'From the relaxed
 * plan to clocks', step 5). One GPU, two microbatches: four computations in a chain, each with
 * three clocks: 8 units for 20 J, 10 units for 17.5 J and 12 units for 14 J (blocking power 0, so
 * effective energy is energy). The middle clock lies 0.5 J above the hull line between the other
 * two, whose slope is 1.5 J a unit. Within 40 units the relaxation runs every computation at 10
 * units for 17 J (68 J in all); the best real plan mixes the two vertices: two computations at 8
 * units and two at 12, 68 J. Every computation at the middle clock (what the cheapest clock that
 * fits each relaxed duration gives) costs 70 J; any plan with one at 10 units, at least 69 J.
 *
 *   - prs__refine_track, given the relaxed plan (10 units each) and its price (1.5 J a unit):
 *     70 J with the cheapest clock, 68 J with the priced choice forward and backward, each
 *     within 40 units and alternating fast and slow computations along the chain;
 *   - the hull planner's clean frontier has a plan within 40 units at 68 J (on a chain this
 *     short other relaxed plans of the walk also round to it). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/evaluate.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "plan_int.h"

#define NOPS 4
#define BUDGET 40

/* Clocks and figures: times a little over whole milliseconds so they cut to 8, 10, 12 units. */
static const char PROFILE[] = "stage,instruction,frequency,time,energy\n"
                              "0,forward,1500,0.0085,20\n"
                              "0,forward,1200,0.0105,17.5\n"
                              "0,forward,900,0.0125,14\n"
                              "0,backward,1500,0.0085,20\n"
                              "0,backward,1200,0.0105,17.5\n"
                              "0,backward,900,0.0125,14\n";

static prs_profile *load(void)
{
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    int rc = prs_profile_parse("chain.csv", PROFILE, strlen(PROFILE), &p, &err);
    if (rc) fail_msg("%s", err.msg);
    return p;
}

/* The hull planner's options for the chain: one GPU, two microbatches, 1 ms, no blocking power. */
static prs_plan_opts opts(void)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe.stages = 1;
    o.pipe.microbatches = 2;
    o.pipe.unit_time_s = 0.001;
    o.pipe.blocking_power_w = 0;
    o.cost_model = PRS_COST_HULL;
    o.frontier = PRS_FRONTIER_CLEAN;
    return o;
}

static void test_frontier(void **state)
{
    (void)state;
    prs_profile *p = load();
    prs_plan_opts o = opts();
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan(p, &o, &f, &err), 0);
    double best = INFINITY;
    for (size_t k = 0; k < prs_frontier_size(f); k++) {
        const prs_frontier_point *pt = prs_frontier_point_at(f, k);
        if (pt->eval_time_s <= BUDGET * 0.001 + 1e-9 && pt->eval_energy_j < best)
            best = pt->eval_energy_j;
    }
    printf("least energy within %d units: %.3f J\n", BUDGET, best);
    assert_float_equal(best, 68.0, 1e-9);
    prs_frontier_free(f);
    prs_profile_free(p);
}

/* The relaxed plan's rounding in one mode: its energy, and the chain's clocks in order. */
static double rounded(prs_eval *ev, prs__refine_refiner *rf, prs__track_mode mode, int *freq)
{
    long relaxed[NOPS];
    double price[NOPS];
    int out[NOPS];
    for (int op = 0; op < NOPS; op++)
        relaxed[op] = 10, price[op] = 1.5;
    long T = 0;
    double e = 0;
    assert_int_equal(prs__refine_track(rf, relaxed, mode, price, BUDGET, out, &T, &e), 0);
    assert_true(T <= BUDGET);
    for (int op = 0; op < NOPS; op++)
        freq[op] = ev->t.freq[out[op]];
    return e;
}

static void test_modes(void **state)
{
    (void)state;
    prs_profile *p = load();
    prs_pipeline pipe = opts().pipe;
    prs_eval *ev = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_eval_open(p, &pipe, &ev, &err), 0);
    assert_int_equal(ev->g.nops, NOPS);
    prs__refine_refiner *rf = prs__refine_new(&ev->g, &ev->t, &ev->pipe);
    assert_non_null(rf);
    int freq[NOPS];
    assert_float_equal(rounded(ev, rf, PRS__TRACK_CHEAPEST, freq), 70.0, 1e-9);
    for (int op = 0; op < NOPS; op++)
        assert_int_equal(freq[op], 1200);
    const prs__track_mode priced[2] = {PRS__TRACK_PRICED, PRS__TRACK_PRICED_BACK};
    for (int i = 0; i < 2; i++) {
        assert_float_equal(rounded(ev, rf, priced[i], freq), 68.0, 1e-9);
        for (int op = 0; op + 1 < NOPS; op++) /* fast and slow in turn along the chain */
            assert_true((freq[op] == 1500 && freq[op + 1] == 900) ||
                        (freq[op] == 900 && freq[op + 1] == 1500));
    }
    prs__refine_free(rf);
    prs_eval_close(ev);
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frontier),
        cmocka_unit_test(test_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
